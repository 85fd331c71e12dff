// naive_copy — the naive training-loop shape in C/CUDA: a pageable cudaMemcpy of a batch, then a
// kernel of similar duration that reads it.  Prints ms/iter and whether the device checksum of
// every batch matched the host's.  Each iteration is an NVTX range `train_step#N` (N from 0, the
// warm-up iterations included), so a trace's report can give per-step figures
// (`pinwheel report --step-range '^train_step'`); without a tool attached NVTX does nothing.
// With host_ms > 0 the host then works that long (a spin, no memory traffic) before the next
// copy, as a loop that prepares its next step on the CPU does.
//   naive_copy [MiB=64] [iters=40] [kernel_ms=6] [host_ms=0]   (a size ending in K is in KiB: 256K)
#include "common.cuh"
#include <nvtx3/nvToolsExt.h>

int main(int argc, char **argv) {
  char *unit = (char *)"";
  size_t mib = argc > 1 ? strtoul(argv[1], &unit, 10) : 64;
  int iters = argc > 2 ? atoi(argv[2]) : 40;
  double kms = argc > 3 ? atof(argv[3]) : 6.0;
  double hms = argc > 4 ? atof(argv[4]) : 0.0;
  int kib = *unit == 'K' || *unit == 'k'; // the size is in KiB
  size_t bytes = kib ? mib << 10 : mib << 20, words = bytes / 4;
  const int NB = 4; // distinct pageable batches, used in turn
  uint32_t *h[NB];
  unsigned long long expect[NB];
  for (int b = 0; b < NB; b++) {
    h[b] = (uint32_t *)malloc(bytes);
    for (size_t i = 0; i < words; i++)
      h[b][i] = (uint32_t)(i * 2654435761u + b * 97u);
    expect[b] = host_sum(h[b], words);
  }
  uint32_t *d;
  unsigned long long *dsum, want = 0, got = 0;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMalloc(&dsum, sizeof *dsum));
  long spin = calibrate_spin(d, words, dsum, kms);
  CK(cudaMemset(dsum, 0, sizeof *dsum));
  CK(cudaDeviceSynchronize());
  double t0 = 0;
  for (int i = -3; i < iters; i++) { // 3 warm-up iterations
    if (i == 0) {
      CK(cudaDeviceSynchronize());
      t0 = now_ms();
    }
    int b = (i + 3) % NB;
    char step[32];
    snprintf(step, sizeof step, "train_step#%d", i + 3);
    nvtxRangePushA(step);
    CK(cudaMemcpy(d, h[b], bytes, cudaMemcpyHostToDevice));
    consume<<<264, 256>>>(d, words, dsum, spin);
    CK(cudaGetLastError());
    for (double h0 = now_ms(); hms > 0 && now_ms() - h0 < hms;)
      ; // the host's own work of the step
    nvtxRangePop();
    want += expect[b];
  }
  CK(cudaDeviceSynchronize());
  double ms = (now_ms() - t0) / iters;
  CK(cudaMemcpy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost));
  printf("naive_copy: %zu %s batch, %d iters%s: %.3f ms/iter, checksum %s\n", mib,
         kib ? "KiB" : "MiB", iters, hms > 0 ? ", host work" : "", ms,
         got == want ? "ok" : "MISMATCH");
  return got == want ? 0 : 1;
}
