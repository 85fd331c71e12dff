// copy_torture — randomized H2D/D2H copies checked byte for byte, for the staging engine on a GPU.
// Each thread has its own stream (thread 0: the default stream, thread 1: cudaStreamPerThread),
// copies random sizes (1 B .. max) at unaligned offsets, overwrites and frees the source right
// after the call returns, and checks the bytes on the device with a checksum kernel queued after
// the copy; some copies are read back with a pageable D2H copy and compared with memcmp.
// Built twice: normally and with --default-stream per-thread (the _ptds/_ptsz entry points).
//   copy_torture [threads=8] [copies_per_thread=1250] [max_MiB=512] [seed=1]
#include "common.cuh"
#include <pthread.h>

static int nthreads, per_thread;
static size_t max_bytes;
static unsigned seed0;
static long failures, copies_done, d2h_checked;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

__global__ void checksum(const unsigned char *p, size_t n, unsigned long long *out) {
  unsigned long long acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc += (unsigned long long)p[i] * (i % 251 + 1);
  atomicAdd(out, acc);
}

static unsigned long long host_checksum(const unsigned char *p, size_t n) {
  unsigned long long acc = 0;
  for (size_t i = 0; i < n; i++) acc += (unsigned long long)p[i] * (i % 251 + 1);
  return acc;
}

static uint64_t xs64(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *s) {
  unsigned r = xs64(s) % 1000;
  size_t cap;
  if (r < 600) cap = 64 << 10;
  else if (r < 950) cap = 8 << 20;
  else if (r < 998) cap = 64 << 20;
  else cap = max_bytes;
  if (cap > max_bytes) cap = max_bytes;
  return 1 + xs64(s) % cap;
}

static void *worker(void *arg) {
  int t = (int)(long)arg;
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed0 + 1) + t * 7919 + 1;
  cudaStream_t st;
  if (t == 0) st = 0;
  else if (t == 1) st = cudaStreamPerThread;
  else CK(cudaStreamCreate(&st)); // blocking: ordered with the legacy default stream
  unsigned char *d;
  CK(cudaMalloc(&d, max_bytes + 64));
  const int BATCH = 32;
  unsigned long long *dres, hres[BATCH], want[BATCH];
  CK(cudaMalloc(&dres, BATCH * sizeof *dres));
  unsigned char *back = (unsigned char *)malloc((16 << 20) + 64);
  long bad = 0, nd2h = 0;
  for (int i = 0; i < per_thread; i += BATCH) {
    int nb = per_thread - i < BATCH ? per_thread - i : BATCH;
    CK(cudaMemsetAsync(dres, 0, BATCH * sizeof *dres, st));
    for (int k = 0; k < nb; k++) {
      size_t n = pick_size(&s), so = xs64(&s) % 64, doff = xs64(&s) % 64;
      unsigned char *src = (unsigned char *)malloc(n + 64);
      uint64_t *w = (uint64_t *)src;
      for (size_t q = 0; q < (n + 64) / 8; q++) w[q] = xs64(&s);
      want[k] = host_checksum(src + so, n);
      int sync_api = xs64(&s) % 4 == 0;
      cudaStream_t ks = sync_api ? (cudaStream_t)0 : st;
      // cudaMemcpy runs on the default stream, which (per-thread flavour) is not ordered with st:
      // earlier checksums on st must be done before it writes d, with or without pinwheel
      if (sync_api && ks != st) CK(cudaStreamSynchronize(st));
      if (sync_api) CK(cudaMemcpy(d + doff, src + so, n, cudaMemcpyHostToDevice));
      else CK(cudaMemcpyAsync(d + doff, src + so, n, cudaMemcpyHostToDevice, st));
      int check_d2h = n <= (16u << 20) && xs64(&s) % 4 == 0;
      unsigned char *keep = NULL;
      if (check_d2h) {
        keep = (unsigned char *)malloc(n);
        memcpy(keep, src + so, n);
      }
      memset(src, 0xA5, n + 64); // the program may overwrite and free the source at once
      free(src);
      checksum<<<132, 256, 0, ks>>>(d + doff, n, dres + k);
      CK(cudaGetLastError());
      if (check_d2h) {
        memset(back, 0, n);
        CK(cudaMemcpyAsync(back, d + doff, n, cudaMemcpyDeviceToHost, ks));
        if (memcmp(back, keep, n)) {
          fprintf(stderr, "copy_torture: thread %d: D2H of %zu bytes differs\n", t, n);
          bad++;
        }
        nd2h++;
        free(keep);
      }
      if (ks != st) CK(cudaStreamSynchronize(ks)); // keep the batch's results ordered
    }
    CK(cudaStreamSynchronize(st));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hres, dres, nb * sizeof *dres, cudaMemcpyDeviceToHost));
    for (int k = 0; k < nb; k++)
      if (hres[k] != want[k]) {
        fprintf(stderr, "copy_torture: thread %d copy %d: device checksum differs\n", t, i + k);
        bad++;
      }
  }
  pthread_mutex_lock(&mu);
  failures += bad;
  copies_done += per_thread;
  d2h_checked += nd2h;
  pthread_mutex_unlock(&mu);
  free(back);
  CK(cudaFree(d));
  CK(cudaFree(dres));
  return NULL;
}

int main(int argc, char **argv) {
  nthreads = argc > 1 ? atoi(argv[1]) : 8;
  per_thread = argc > 2 ? atoi(argv[2]) : 1250;
  max_bytes = (size_t)(argc > 3 ? atol(argv[3]) : 512) << 20;
  seed0 = argc > 4 ? atoi(argv[4]) : 1;
  CK(cudaFree(0));
  double t0 = now_ms();
  pthread_t th[64];
  for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
  for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
  printf("copy_torture: %ld copies (%ld read back D2H) in %.1f s, %d threads: %s\n", copies_done,
         d2h_checked, (now_ms() - t0) / 1e3, nthreads, failures ? "FAILED" : "bytes ok");
  return failures != 0;
}
