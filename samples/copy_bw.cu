// copy_bw — one large pageable copy each way: host-blocking throughput of cudaMemcpy (time until
// the call returns), and H2D until the bytes are on the device (call + sync).  Median of 7.
//   copy_bw [MiB=256]
#include "common.cuh"
#include <algorithm>

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? atol(argv[1]) : 256, bytes = mib << 20;
  char *h = (char *)malloc(bytes), *back = (char *)malloc(bytes);
  for (size_t i = 0; i < bytes; i++) h[i] = (char)(i * 131 + 7);
  char *d;
  CK(cudaMalloc(&d, bytes));
  double call[7], done[7], d2h[7];
  for (int k = 0; k < 8; k++) {
    CK(cudaDeviceSynchronize());
    double t0 = now_ms();
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    double t1 = now_ms();
    CK(cudaDeviceSynchronize());
    double t2 = now_ms();
    memset(back, 0, bytes);
    double t3 = now_ms();
    CK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    double t4 = now_ms();
    if (memcmp(back, h, bytes)) {
      printf("copy_bw: bytes differ\n");
      return 1;
    }
    if (k == 0) continue; // warm-up
    call[k - 1] = bytes / (t1 - t0) / 1e6;
    done[k - 1] = bytes / (t2 - t0) / 1e6;
    d2h[k - 1] = bytes / (t4 - t3) / 1e6;
  }
  std::sort(call, call + 7);
  std::sort(done, done + 7);
  std::sort(d2h, d2h + 7);
  printf("copy_bw: %zu MiB pageable: H2D host-blocking %.1f GB/s, H2D until on device %.1f GB/s, "
         "D2H %.1f GB/s, bytes ok\n",
         mib, call[3], done[3], d2h[3]);
  return 0;
}
