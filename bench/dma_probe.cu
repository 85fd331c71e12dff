/* dma_probe.cu — where a staged copy's DMA loses speed.  256 MiB host-to-device in 4 MiB chunks:
 *   cold     from pinned memory written long before (what a prefetcher's DMA reads);
 *   stage    through a 48 MiB pinned pool that threads fill chunk by chunk from pageable memory
 *            while the earlier chunks' DMAs run (pinwheel's staging, without pinwheel): the
 *            threads spinning or sleeping between chunks, or spinning with each line they wrote
 *            written back (clwb, else clflushopt: no line left modified in a core's cache);
 *   pool     the pool's 48 MiB (12 DMAs: their fixed costs weigh more), DMA'd after the threads
 *            filled it and went to sleep for 10 ms;
 * each on one stream or two (chunks alternating: a second copy engine, if the driver gives one).
 * Rounds interleaved; GB/s a round and the medians; bytes compared in each variant's first round.
 *
 *   nvcc -O2 -o dma_probe bench/dma_probe.cu -lpthread
 *   ./dma_probe [rounds 5] [threads incl. the caller: CPUs, <= 16] [MiB 256] [pool 48] [chunk 4]
 */
#include "../samples/common.cuh" /* CK, now_ms */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t TOTAL, POOL, CHUNK;
static int NT;
static char *src, *pinned_src, *pool, *dst;
static cudaStream_t st[2];

/* The stage threads: generation `gen` posts a chunk (source offset, pool slot); each thread
 * copies its slice and counts itself done.  Between chunks a thread spins or sleeps on `cv`. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long gen;
  int done;
  size_t off, slot;
  int spin, stop, flush;
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* 1: clwb, 2: clflushopt, 0: neither (the write-back variants are then not run) */
static int flush_kind(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) return b >> 24 & 1 ? 1 : b >> 23 & 1 ? 2 : 0;
#endif
  return 0;
}

static void write_back(char *p, size_t n, int kind) {
#if defined(__x86_64__)
  for (size_t i = 0; i < n; i += 64) {
    if (kind == 1)
      __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(p + i) : "memory"); /* clwb (%rax) */
    else
      __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x38" ::"a"(p + i) : "memory"); /* clflushopt */
  }
  __asm__ volatile("sfence" ::: "memory");
#else
  (void)p, (void)n, (void)kind;
#endif
}

static void slice(int id, size_t off, size_t slot) {
  size_t part = (CHUNK / NT + 4095) & ~(size_t)4095, a = (size_t)id * part;
  if (a >= CHUNK) return;
  size_t n = a + part > CHUNK ? CHUNK - a : part;
  memcpy(pool + slot + a, src + off + a, n);
  int f = LOAD(W.flush);
  if (f) write_back(pool + slot + a, n, f);
}

static void *worker(void *arg) {
  int id = (int)(long)arg;
  long seen = 0;
  for (;;) {
    long g;
    if (LOAD(W.spin)) {
      while ((g = LOAD(W.gen)) == seen && !LOAD(W.stop))
        relax();
    } else {
      pthread_mutex_lock(&W.mu);
      while ((g = LOAD(W.gen)) == seen && !LOAD(W.stop))
        pthread_cond_wait(&W.cv, &W.mu);
      pthread_mutex_unlock(&W.mu);
    }
    if (LOAD(W.stop)) return NULL;
    seen = g;
    slice(id, W.off, W.slot);
    __atomic_add_fetch(&W.done, 1, __ATOMIC_RELEASE);
  }
}

/* One chunk copied into the pool by all threads (the caller is thread 0). */
static void fill(size_t off, size_t slot) {
  W.off = off, W.slot = slot;
  __atomic_store_n(&W.done, 0, __ATOMIC_RELAXED);
  pthread_mutex_lock(&W.mu);
  __atomic_add_fetch(&W.gen, 1, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&W.cv);
  pthread_mutex_unlock(&W.mu);
  slice(0, off, slot);
  while (LOAD(W.done) < NT - 1)
    relax();
}

static double stage(int nstreams) {
  size_t slots = POOL / CHUNK, n = TOTAL / CHUNK;
  cudaEvent_t ev[64];
  for (size_t i = 0; i < slots; i++)
    CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  double t0 = now_ms();
  for (size_t k = 0; k < n; k++) {
    size_t s = k % slots;
    if (k >= slots) CK(cudaEventSynchronize(ev[s])); /* the slot's last DMA is done */
    fill(k * CHUNK, s * CHUNK);
    CK(cudaMemcpyAsync(dst + k * CHUNK, pool + s * CHUNK, CHUNK, cudaMemcpyHostToDevice,
                       st[k % nstreams]));
    CK(cudaEventRecord(ev[s], st[k % nstreams]));
  }
  for (int i = 0; i < nstreams; i++)
    CK(cudaStreamSynchronize(st[i]));
  double t = (now_ms() - t0) / 1e3;
  for (size_t i = 0; i < slots; i++)
    CK(cudaEventDestroy(ev[i]));
  return TOTAL / t / 1e9;
}

static double dma(const char *from, size_t bytes, int nstreams) {
  double t0 = now_ms();
  for (size_t k = 0; k < bytes / CHUNK; k++)
    CK(cudaMemcpyAsync(dst + k * CHUNK, from + k * CHUNK, CHUNK, cudaMemcpyHostToDevice,
                       st[k % nstreams]));
  for (int i = 0; i < nstreams; i++)
    CK(cudaStreamSynchronize(st[i]));
  return bytes / ((now_ms() - t0) / 1e3) / 1e9;
}

static double pool_after_sleep(int nstreams) {
  for (size_t s = 0; s < POOL; s += CHUNK)
    fill(s, s);
  usleep(10000);
  return dma(pool, POOL, nstreams);
}

static int check(const char *what, size_t bytes) {
  char *back = (char *)malloc(bytes);
  if (!back) {
    fprintf(stderr, "dma_probe: out of memory\n");
    exit(1);
  }
  CK(cudaMemcpy(back, dst, bytes, cudaMemcpyDeviceToHost));
  int ok = memcmp(back, src, bytes) == 0;
  free(back);
  if (!ok) fprintf(stderr, "dma_probe: %s: bytes differ\n", what);
  return ok;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  NT = argc > 2 ? atoi(argv[2])
                : (int)(ncpu < 1    ? 1
                        : ncpu > 16 ? 16
                                    : ncpu); /* pinwheel's default */
  long mib[3] = {argc > 3 ? atol(argv[3]) : 256, argc > 4 ? atol(argv[4]) : 48,
                 argc > 5 ? atol(argv[5]) : 4};
  for (int i = 0; i < 3; i++)
    if (mib[i] < 1 || mib[i] > 65536) mib[i] = 0; /* refused below */
  TOTAL = (size_t)mib[0] << 20, POOL = (size_t)mib[1] << 20, CHUNK = (size_t)mib[2] << 20;
  if (rounds < 1 || rounds > 64 || NT < 1 || NT > 256 || CHUNK == 0 || POOL < CHUNK ||
      POOL / CHUNK > 64 || TOTAL < POOL || TOTAL % CHUNK || POOL % CHUNK) {
    fprintf(stderr, "dma_probe: bad arguments (rounds 1-64, threads 1-256, pool 1-64 chunks)\n");
    return 2;
  }
  src = (char *)malloc(TOTAL);
  if (!src) {
    fprintf(stderr, "dma_probe: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < TOTAL; i += 8)
    *(unsigned long long *)(src + i) = i * 0x9E3779B97F4A7C15ull;
  CK(cudaHostAlloc((void **)&pinned_src, TOTAL, cudaHostAllocDefault));
  memcpy(pinned_src, src, TOTAL);
  CK(cudaHostAlloc((void **)&pool, POOL, cudaHostAllocDefault));
  memset(pool, 0, POOL);
  CK(cudaMalloc((void **)&dst, TOTAL));
  for (int i = 0; i < 2; i++)
    CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
  pthread_t th[256];
  for (int i = 1; i < NT; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)(long)i)) {
      fprintf(stderr, "dma_probe: cannot start thread %d\n", i);
      return 1;
    }
  int ce = 0;
  CK(cudaDeviceGetAttribute(&ce, cudaDevAttrAsyncEngineCount, 0));
  printf("dma_probe: %zu MiB in %zu MiB chunks, pool %zu MiB, %d stage threads, %d copy engines\n",
         TOTAL >> 20, CHUNK >> 20, POOL >> 20, NT, ce);
  int fk = flush_kind();
  enum { V = 10 };
  const char *name[V] = {
      "cold, 1 stream",
      "cold, 2 streams",
      "stage spin, 1 stream",
      "stage spin, 2 streams",
      "stage sleep, 1 stream",
      "stage sleep, 2 streams",
      "pool after sleep, 1 stream",
      "pool after sleep, 2 streams",
      fk == 2 ? "stage spin, clflushopt, 1 stream" : "stage spin, clwb, 1 stream",
      fk == 2 ? "stage spin, clflushopt, 2 streams" : "stage spin, clwb, 2 streams"};
  double r[V][64];
  int bad = 0;
  dma(pinned_src, TOTAL, 1); /* warm-up: the DMA path and the device pages */
  for (int k = 0; k < rounds; k++) {
    for (int v = 0; v < V; v++) {
      int ns = 1 + (v & 1);
      if (v >= 8 && !fk) {
        r[v][k] = 0; /* this CPU has neither instruction */
        continue;
      }
      __atomic_store_n(&W.spin, v == 2 || v == 3 || v >= 8, __ATOMIC_RELEASE);
      __atomic_store_n(&W.flush, v >= 8 ? fk : 0, __ATOMIC_RELEASE);
      if (k == 0) { /* the byte check reads only what this variant wrote */
        CK(cudaMemset(dst, 0xA5, TOTAL));
        memset(pool, 0x5A, POOL);
        CK(cudaDeviceSynchronize());
      }
      if (v < 2)
        r[v][k] = dma(pinned_src, TOTAL, ns);
      else if (v < 6 || v >= 8)
        r[v][k] = stage(ns);
      else
        r[v][k] = pool_after_sleep(ns);
      if (k == 0) bad |= !check(name[v], v < 6 || v >= 8 ? TOTAL : POOL);
      printf("round %d: %-28s %6.1f GB/s\n", k + 1, name[v], r[v][k]);
    }
  }
  printf("\n| variant | GB/s, median of %d |\n|---|---|\n", rounds);
  for (int v = 0; v < V; v++) {
    qsort(r[v], rounds, sizeof(double), cmp);
    printf("| %s | %.1f |\n", name[v], r[v][rounds / 2]);
  }
  pthread_mutex_lock(&W.mu);
  __atomic_store_n(&W.stop, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&W.cv);
  pthread_mutex_unlock(&W.mu);
  for (int i = 1; i < NT; i++)
    pthread_join(th[i], NULL);
  printf("bytes %s\n", bad ? "DIFFER" : "ok");
  return bad;
}
