// copy_bw — one large pageable copy each way: host-blocking throughput of cudaMemcpy (time until
// the call returns), H2D until the bytes are on the device (call + sync), D2H into a buffer the
// program already touched, and D2H into freshly mapped memory (malloc'd for each copy and freed
// after, as `.cpu()` does: the copy takes the first-touch page faults).  Median of 7 after a
// warm-up; the host time of the very first copy (where an interposer sets itself up) is printed
// too.  Every copy's bytes are compared.
//   copy_bw [MiB=256]
#include "common.cuh"
#include <algorithm>

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? atol(argv[1]) : 256, bytes = mib << 20;
  char *h = (char *)malloc(bytes), *back = (char *)malloc(bytes);
  for (size_t i = 0; i < bytes; i++) h[i] = (char)(i * 131 + 7);
  char *d;
  CK(cudaMalloc(&d, bytes));
  CK(cudaDeviceSynchronize());
  double first = 0;
  double call[7], done[7], d2h[7], fresh[7];
  for (int k = 0; k < 8; k++) {
    CK(cudaDeviceSynchronize());
    double t0 = now_ms();
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    double t1 = now_ms();
    CK(cudaDeviceSynchronize());
    double t2 = now_ms();
    if (k == 0) first = t1 - t0;
    memset(back, 0, bytes);
    double t3 = now_ms();
    CK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    double t4 = now_ms();
    if (memcmp(back, h, bytes)) {
      printf("copy_bw: D2H bytes differ\n");
      return 1;
    }
    char *f = (char *)malloc(bytes); // above the mmap threshold: fresh pages every time
    double t5 = now_ms();
    CK(cudaMemcpy(f, d, bytes, cudaMemcpyDeviceToHost));
    double t6 = now_ms();
    if (memcmp(f, h, bytes)) {
      printf("copy_bw: D2H (fresh destination) bytes differ\n");
      return 1;
    }
    free(f);
    if (k == 0) continue; // warm-up
    call[k - 1] = bytes / (t1 - t0) / 1e6;
    done[k - 1] = bytes / (t2 - t0) / 1e6;
    d2h[k - 1] = bytes / (t4 - t3) / 1e6;
    fresh[k - 1] = bytes / (t6 - t5) / 1e6;
  }
  std::sort(call, call + 7);
  std::sort(done, done + 7);
  std::sort(d2h, d2h + 7);
  std::sort(fresh, fresh + 7);
  printf("copy_bw: %zu MiB pageable: H2D host-blocking %.1f GB/s, H2D until on device %.1f GB/s, "
         "D2H %.1f GB/s, D2H fresh %.1f GB/s, first copy %.1f ms, bytes ok\n",
         mib, call[3], done[3], d2h[3], fresh[3], first);
  return 0;
}
