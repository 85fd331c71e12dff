// common.cuh — shared pieces of the C/CUDA samples: error checks, a kernel whose duration is
// set in milliseconds and that checksums the batch it reads, and a wall clock.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Sums the batch's 32-bit words into *sum, then spins `spin` rounds so the kernel lasts about as
// long as the copy it follows.
__global__ void consume(const uint32_t *batch, size_t words, unsigned long long *sum, long spin) {
  unsigned long long acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    acc += batch[i];
  float x = (float)(acc & 0xff);
  for (long k = 0; k < spin; k++) x = x * 0.999f + 0.5f;
  if (x == -1.0f) acc++; // never true; keeps the spin
  atomicAdd(sum, acc);
}

static inline unsigned long long host_sum(const uint32_t *p, size_t words) {
  unsigned long long s = 0;
  for (size_t i = 0; i < words; i++) s += p[i];
  return s;
}

// Spin count for a kernel of about `ms` milliseconds on this GPU.
static inline long calibrate_spin(const uint32_t *d, size_t words, unsigned long long *dsum, double ms) {
  long spin = 20000;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int it = 0; it < 4; it++) {
    CK(cudaEventRecord(a));
    consume<<<264, 256>>>(d, words, dsum, spin);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (t > 0.05f) spin = (long)(spin * ms / t);
  }
  return spin;
}
