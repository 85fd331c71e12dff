// pinned_fill — CuPy's cp.asarray in C: a buffer of the program's pinned memory (cudaHostAlloc)
// filled from a pageable array with one memmove, then cudaMemcpyAsync to the device and a stream
// synchronize; the throughput of fill + copy (median of `reps` after a warm-up), every copy's bytes
// checked on the device.  Then the hazards that must make pinwheel's uploads ahead
// (PINWHEEL_FILL_AHEAD) give up, each between a fill and its copy, bytes checked after each: a
// kernel that writes the pinned buffer through its device mapping, a host function that writes
// it, a write of the program's own, and a memset of it through the mapping.
//   pinned_fill [MiB=256] [reps=7]
#include "common.cuh"
#include <algorithm>

// Every 4096th byte of the buffer becomes v (a kernel of the program writing its pinned memory).
__global__ void mark(unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096; i < n;
       i += (size_t)gridDim.x * blockDim.x * 4096)
    p[i] = v;
}

static void fill_host(unsigned char *p, size_t n, unsigned seed) {
  uint32_t *w = (uint32_t *)p;
  for (size_t i = 0; i < n / 4; i++) w[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

struct host_write {
  unsigned char *p;
  size_t n;
};
static void CUDART_CB host_mark(void *arg) {
  host_write *h = (host_write *)arg;
  for (size_t i = 7; i < h->n; i += 4096) h->p[i] ^= 0x5a;
}

static int bad;
static void check(const char *what, unsigned char *dev, const unsigned char *want, size_t n,
                  unsigned char *back) {
  CK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  if (memcmp(back, want, n)) {
    printf("pinned_fill: %s: bytes differ\n", what);
    bad = 1;
  }
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? atol(argv[1]) : 256, n = mib << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  if (reps < 1) reps = 1;
  unsigned char *src = (unsigned char *)malloc(n), *want = (unsigned char *)malloc(n),
                *back = (unsigned char *)malloc(n), *pin, *dev;
  CK(cudaHostAlloc((void **)&pin, n, cudaHostAllocDefault));
  CK(cudaMalloc((void **)&dev, n));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *gbs = (double *)malloc(reps * sizeof *gbs);
  for (int k = 0; k <= reps; k++) { // k 0: warm-up
    fill_host(src, n, (unsigned)k);
    double t0 = now_ms();
    memmove(pin, src, n);
    CK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    double t1 = now_ms();
    if (k) gbs[k - 1] = n / (t1 - t0) / 1e6;
    check("fill + copy", dev, src, n, back);
  }
  std::sort(gbs, gbs + reps);
  // the hazards: each changes the buffer between its fill and its copy (the host function last:
  // it turns uploads ahead off for the rest of the process)
  static const char *names[] = {"a kernel's write", "the program's write", "a memset",
                                "a host function's write"};
  for (int h = 0; h < 4; h++) {
    fill_host(src, n, 100u + h);
    memcpy(want, src, n); // first: its first touch of want is slow, and the upload would expire
    memmove(pin, src, n);
    if (h == 0) { // a kernel writes it through its device mapping (unified addressing)
      mark<<<64, 256, 0, s>>>(pin, n, 0xee);
      CK(cudaStreamSynchronize(s));
      for (size_t i = 0; i < n; i += 4096) want[i] = 0xee;
    } else if (h == 1) { // the program writes it
      for (size_t i = 11; i < n; i += 8192) pin[i] = (unsigned char)~pin[i];
      for (size_t i = 11; i < n; i += 8192) want[i] = (unsigned char)~want[i];
    } else if (h == 2) { // a memset through its device mapping
      CK(cudaMemsetAsync(pin + n / 2, 0x33, 4096, s));
      CK(cudaStreamSynchronize(s));
      memset(want + n / 2, 0x33, 4096);
    }
    host_write hw = {pin, n};
    if (h == 3) { // a host function on the copy's stream writes it before the copy runs
      CK(cudaLaunchHostFunc(s, host_mark, &hw));
      for (size_t i = 7; i < n; i += 4096) want[i] ^= 0x5a;
    }
    CK(cudaMemcpyAsync(dev, pin, n, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    check(names[h], dev, want, n, back);
  }
  CK(cudaFreeHost(pin));
  CK(cudaFree(dev));
  printf("pinned_fill: %zu MiB: fill + copy %.1f GB/s (median of %d), hazards checked, bytes %s\n",
         mib, gbs[reps / 2], reps, bad ? "DIFFER" : "ok");
  return bad;
}
