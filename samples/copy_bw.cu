// copy_bw — one large pageable copy each way: host-blocking throughput of cudaMemcpy (time until
// the call returns), H2D until the bytes are on the device (call + sync), D2H into a buffer the
// program already touched, and D2H into freshly mapped memory (malloc'd for each copy and freed
// after, as `.cpu()` does: the copy takes the first-touch page faults).  Median of 7 after a
// warm-up; the host time of the very first copy (where an interposer sets itself up) is printed
// too.  Every copy's bytes are compared.
//   copy_bw [MiB=256]
// With `h2d N [pinned]`: only N H2D copies (each until on the device, after one warm-up), from
// pageable memory or, with `pinned`, from cudaHostAlloc'd memory (the DMA's own speed).  They start
// at COPY_BW_START_AT (seconds since the epoch) when it is set, so that one process per GPU copies
// at the same time; the line gives the median and the window the copies took (seconds since the
// epoch), from which the aggregate of several processes follows.  The last copy's bytes compared.
//   copy_bw 256 h2d 20 [pinned]
#include "common.cuh"
#include <algorithm>
#include <string.h>
#include <time.h>

static double now_epoch(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int h2d_only(size_t mib, int n, int pinned) {
  size_t bytes = mib << 20;
  char *h;
  if (pinned)
    CK(cudaHostAlloc(&h, bytes, cudaHostAllocDefault));
  else
    h = (char *)malloc(bytes);
  char *back = (char *)malloc(bytes);
  for (size_t i = 0; i < bytes; i++) h[i] = (char)(i * 131 + 7);
  char *d;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); // warm-up (and the interposer's set-up)
  CK(cudaDeviceSynchronize());
  const char *at = getenv("COPY_BW_START_AT");
  if (at && *at) {
    double wait = atof(at) - now_epoch();
    if (wait > 0) {
      struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
  double *gbs = (double *)malloc(n * sizeof *gbs);
  double w0 = now_epoch();
  for (int k = 0; k < n; k++) {
    double t0 = now_ms();
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    gbs[k] = bytes / (now_ms() - t0) / 1e6;
  }
  double w1 = now_epoch();
  CK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
  int ok = memcmp(back, h, bytes) == 0;
  std::sort(gbs, gbs + n);
  printf("copy_bw: %zu MiB %s: H2D x %d: median %.1f GB/s, window %.6f %.6f, bytes %s\n", mib,
         pinned ? "pinned" : "pageable", n, gbs[n / 2], w0, w1, ok ? "ok" : "DIFFER");
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? atol(argv[1]) : 256, bytes = mib << 20;
  if (argc > 3 && !strcmp(argv[2], "h2d") && atoi(argv[3]) > 0)
    return h2d_only(mib, atoi(argv[3]), argc > 4 && !strcmp(argv[4], "pinned"));
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
