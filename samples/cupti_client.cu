// cupti_client — a program with a CUPTI profiler of its own that asks for kernel records only,
// started after a few pageable copies: under `pinwheel run --trace`, the handoff on the real
// CUPTI.  The client must get its kernels' records and nothing of the kinds pinwheel had enabled
// (runtime and driver calls, copies, NVTX, synchronization, external correlations).
//   cupti_client [enable-first]
// enable-first: the kernel kind is enabled before the client registers its buffer callbacks (as
// NVIDIA's activity samples do); otherwise after (as Kineto does).  Exit status 0 when the
// client got 10 kernel records and no other, 1 otherwise.
#include "common.cuh"
#include <cupti.h>
#include <string.h>

__global__ void empty(int *p) {
  if (p && threadIdx.x == 1024) *p = 1; // never
}

static int kernels, others;
static char other_kinds[256];

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *size = 1 << 20;
  *buf = (uint8_t *)aligned_alloc(8, *size);
  *max = 0;
}

static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *rec = NULL;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      kernels++;
    } else {
      others++;
      size_t n = strlen(other_kinds);
      if (n < sizeof other_kinds - 8) snprintf(other_kinds + n, sizeof other_kinds - n, " %d", (int)rec->kind);
    }
  }
  free(buf);
}

#define CU(x)                                                                                      \
  do {                                                                                             \
    CUptiResult r_ = (x);                                                                          \
    if (r_ != CUPTI_SUCCESS) {                                                                     \
      fprintf(stderr, "cupti_client: %s failed (%d)\n", #x, (int)r_);                              \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  int first = argc > 1 && !strcmp(argv[1], "enable-first");
  size_t bytes = 16 << 20;
  char *h = (char *)malloc(bytes);
  memset(h, 1, bytes);
  int *d;
  CK(cudaMalloc((void **)&d, bytes));
  for (int i = 0; i < 3; i++) // before the client: in pinwheel's trace
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  if (first) CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CU(cuptiActivityRegisterCallbacks(requested, completed));
  if (!first) CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  int dev;
  for (int i = 0; i < 10; i++) {
    empty<<<1, 32>>>(d);
    CK(cudaGetDevice(&dev));
  }
  CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); // a copy: no record asked for
  CK(cudaDeviceSynchronize());
  CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  printf("cupti_client (%s): %d kernel records, %d of other kinds%s%s\n",
         first ? "enabled, then registered" : "registered, then enabled", kernels, others,
         others ? ":" : "", other_kinds);
  return kernels == 10 && others == 0 ? 0 : 1;
}
