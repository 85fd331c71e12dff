// ideal_copy — the hand-written ideal of naive_copy: the batches live in pinned memory, a copy
// stream prefetches batch i+1 into the other of two device buffers while the kernel reads batch i.
// host_ms as in naive_copy: the host's own work (a spin) after each launch.
//   ideal_copy [MiB=64] [iters=40] [kernel_ms=6] [host_ms=0]   (a size ending in K is in KiB: 256K)
#include "common.cuh"

int main(int argc, char **argv) {
  char *unit = (char *)"";
  size_t mib = argc > 1 ? strtoul(argv[1], &unit, 10) : 64;
  int iters = argc > 2 ? atoi(argv[2]) : 40;
  double kms = argc > 3 ? atof(argv[3]) : 6.0;
  double hms = argc > 4 ? atof(argv[4]) : 0.0;
  int kib = *unit == 'K' || *unit == 'k'; // the size is in KiB
  size_t bytes = kib ? mib << 10 : mib << 20, words = bytes / 4;
  const int NB = 4;
  uint32_t *h[NB];
  unsigned long long expect[NB];
  for (int b = 0; b < NB; b++) {
    CK(cudaHostAlloc(&h[b], bytes, cudaHostAllocDefault));
    for (size_t i = 0; i < words; i++)
      h[b][i] = (uint32_t)(i * 2654435761u + b * 97u);
    expect[b] = host_sum(h[b], words);
  }
  uint32_t *d[2];
  unsigned long long *dsum, want = 0, got = 0;
  CK(cudaMalloc(&d[0], bytes));
  CK(cudaMalloc(&d[1], bytes));
  CK(cudaMalloc(&dsum, sizeof *dsum));
  long spin = calibrate_spin(d[0], words, dsum, kms);
  CK(cudaMemset(dsum, 0, sizeof *dsum));
  cudaStream_t cs, ks;
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
  cudaEvent_t copied[2], used[2];
  for (int k = 0; k < 2; k++) {
    CK(cudaEventCreateWithFlags(&copied[k], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&used[k], cudaEventDisableTiming));
    CK(cudaEventRecord(used[k], ks));
  }
  CK(cudaDeviceSynchronize());
  int total = iters + 3;
  CK(cudaMemcpyAsync(d[0], h[0], bytes, cudaMemcpyHostToDevice, cs));
  CK(cudaEventRecord(copied[0], cs));
  double t0 = 0;
  for (int i = 0; i < total; i++) {
    if (i == 3) {
      CK(cudaStreamSynchronize(ks));
      t0 = now_ms();
    }
    int cur = i & 1, nxt = cur ^ 1;
    if (i + 1 < total) { // prefetch the next batch once its buffer is free
      CK(cudaStreamWaitEvent(cs, used[nxt], 0));
      CK(cudaMemcpyAsync(d[nxt], h[(i + 1) % NB], bytes, cudaMemcpyHostToDevice, cs));
      CK(cudaEventRecord(copied[nxt], cs));
    }
    CK(cudaStreamWaitEvent(ks, copied[cur], 0));
    consume<<<264, 256, 0, ks>>>(d[cur], words, dsum, spin);
    CK(cudaGetLastError());
    CK(cudaEventRecord(used[cur], ks));
    for (double h0 = now_ms(); hms > 0 && now_ms() - h0 < hms;)
      ; // the host's own work of the step
    want += expect[i % NB];
  }
  CK(cudaDeviceSynchronize());
  double ms = (now_ms() - t0) / iters;
  CK(cudaMemcpy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost));
  printf("ideal_copy: %zu %s batch, %d iters%s: %.3f ms/iter, checksum %s\n", mib,
         kib ? "KiB" : "MiB", iters, hms > 0 ? ", host work" : "", ms,
         got == want ? "ok" : "MISMATCH");
  return got == want ? 0 : 1;
}
