// two_streams.cu — copies on different streams stay independent (issue: one thread's staged copy
// must not stall another thread's copy on another stream).
//
//   two_streams [MiB] [kernel_ms]
//
// Thread A queues a kernel of about kernel_ms on its stream SA, then a device-to-host copy of MiB
// into pageable memory on SA: that copy cannot finish before the kernel.  While A waits in it,
// thread B times a host-to-device copy of MiB from pageable memory on its own stream SB (five
// copies; the median).  Under CUDA alone B's copies never wait for SA; under pinwheel they must not
// either.  Prints B's median time and checks every byte of both copies.
#include "common.cuh"

#include <pthread.h>

#include <algorithm>
#include <vector>

__global__ void spin_kernel(long rounds, float *out) {
  float x = threadIdx.x;
  for (long k = 0; k < rounds; k++) x = x * 0.999f + 0.5f;
  if (x == -1.0f) *out = x; // never true; keeps the spin
}

struct shared_state {
  size_t n;
  double kernel_ms;
  volatile int a_in_copy;
  int a_ok;
};

static void *thread_a(void *arg) {
  shared_state *s = (shared_state *)arg;
  cudaStream_t sa;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  unsigned char *dev, *host = (unsigned char *)malloc(s->n);
  float *dummy;
  CK(cudaMalloc(&dev, s->n));
  CK(cudaMalloc(&dummy, sizeof(float)));
  CK(cudaMemset(dev, 0x5a, s->n));
  CK(cudaDeviceSynchronize());
  // calibrate the spin: about kernel_ms
  long rounds = 1 << 20;
  double t0 = now_ms();
  spin_kernel<<<1, 32, 0, sa>>>(rounds, dummy);
  CK(cudaStreamSynchronize(sa));
  double per = (now_ms() - t0) / rounds;
  rounds = (long)(s->kernel_ms / per);
  spin_kernel<<<1, 32, 0, sa>>>(rounds, dummy);
  s->a_in_copy = 1;
  CK(cudaMemcpyAsync(host, dev, s->n, cudaMemcpyDeviceToHost, sa));
  CK(cudaStreamSynchronize(sa));
  s->a_ok = 1;
  for (size_t i = 0; i < s->n; i++)
    if (host[i] != 0x5a) s->a_ok = 0;
  free(host);
  CK(cudaFree(dev));
  CK(cudaFree(dummy));
  CK(cudaStreamDestroy(sa));
  return NULL;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  double kernel_ms = argc > 2 ? atof(argv[2]) : 300;
  shared_state s = {mib << 20, kernel_ms, 0, 0};
  cudaStream_t sb;
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  unsigned char *dev, *host = (unsigned char *)malloc(s.n);
  CK(cudaMalloc(&dev, s.n));
  for (size_t i = 0; i < s.n; i++)
    host[i] = (unsigned char)(i * 13 + 1);
  // warm up B's path (pinwheel's pool and ring are set up here)
  for (int w = 0; w < 3; w++) {
    CK(cudaMemcpyAsync(dev, host, s.n, cudaMemcpyHostToDevice, sb));
    CK(cudaStreamSynchronize(sb));
  }
  pthread_t ta;
  pthread_create(&ta, NULL, thread_a, &s);
  while (!s.a_in_copy) {
  }
  double t_wait = now_ms();
  while (now_ms() - t_wait < 20) { // A is inside its copy, behind its kernel
  }
  std::vector<double> times;
  for (int r = 0; r < 5; r++) {
    double t0 = now_ms();
    CK(cudaMemcpyAsync(dev, host, s.n, cudaMemcpyHostToDevice, sb));
    CK(cudaStreamSynchronize(sb));
    times.push_back(now_ms() - t0);
  }
  pthread_join(ta, NULL);
  std::sort(times.begin(), times.end());
  unsigned char *back = (unsigned char *)malloc(s.n);
  CK(cudaMemcpy(back, dev, s.n, cudaMemcpyDeviceToHost));
  int b_ok = memcmp(back, host, s.n) == 0;
  printf("B's %zu MiB H2D on its own stream while A's D2H waits behind a %.0f ms kernel: median "
         "%.2f ms (min %.2f, max %.2f); bytes %s\n",
         mib, kernel_ms, times[2], times[0], times[4], (b_ok && s.a_ok) ? "ok" : "WRONG");
  return (b_ok && s.a_ok) ? 0 : 1;
}
