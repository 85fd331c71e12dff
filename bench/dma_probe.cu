/* dma_probe.cu — where a staged copy's DMA loses speed.  256 MiB host-to-device in 4 MiB chunks
 * on one stream, without pinwheel:
 *   cold   from pinned memory written long before (what a prefetcher's DMA reads);
 *   stage  through a 48 MiB pinned pool that threads fill chunk by chunk from pageable memory
 *          while the earlier chunks' DMAs run (pinwheel's staging): the threads spinning or
 *          sleeping between chunks; spinning with each line they wrote demoted to the shared
 *          cache (cldemote), written back (clwb) or flushed (clflushopt), where the CPU has it;
 *   pool   the pool's 48 MiB DMA'd 10 ms after the threads filled it, while they sleep or spin;
 *          filled with its lines demoted; pushed out of the writers' L2 (each thread then writes
 *          2 MiB of its own: threads are not pinned, so mostly, not surely); flushed (clflush).
 * Two rates a variant: GB/s from the first DMA queued to the last one done, and the DMA engine's
 * rate (bytes over the sum of each DMA's span between timing events): equal where the DMAs are
 * the limit, the second higher where the host could not keep them fed.  A DMA queued on an idle
 * stream has its span start at the queueing, so the engine's rate is a lower bound there.
 * Rounds interleaved, medians (the upper middle for an even count); bytes compared in each
 * variant's first round.
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

#define SCRATCH ((size_t)2 << 20) /* what a thread writes to push the pool out of its L2 */

static size_t TOTAL, POOL, CHUNK;
static int NT;
static char *src, *pinned_src, *pool, *dst, *scratch;
static cudaStream_t st;

/* What a thread does to each line of its slice after writing it. */
enum { LINE_NONE, LINE_CLWB, LINE_CLFLUSHOPT, LINE_CLFLUSH, LINE_CLDEMOTE };

/* The stage threads: generation `gen` posts a chunk (source offset, pool slot) or a task
 * (`task`: each thread writes its own scratch, or nothing); each thread does its part and counts
 * itself done.  Between generations a thread spins or sleeps on `cv`, as `spin` was when it
 * finished its last one. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long gen;
  int done;
  size_t off, slot;
  int spin, stop, line, task;
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
enum { TASK_CHUNK, TASK_EVICT, TASK_NONE };

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Which line instructions this CPU has (CPUID leaf 7); clflush is in every x86-64. */
static int has_line_op(int op) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (op == LINE_NONE || op == LINE_CLFLUSH) return 1;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return op == LINE_CLWB ? b >> 24 & 1 : op == LINE_CLFLUSHOPT ? b >> 23 & 1 : c >> 25 & 1;
#else
  return op == LINE_NONE;
#endif
}

static void line_op(char *p, size_t n, int op) {
#if defined(__x86_64__)
  for (size_t i = 0; i < n; i += 64) {
    if (op == LINE_CLWB)
      __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(p + i) : "memory"); /* clwb (%rax) */
    else if (op == LINE_CLFLUSHOPT)
      __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x38" ::"a"(p + i) : "memory"); /* clflushopt */
    else if (op == LINE_CLFLUSH)
      __asm__ volatile(".byte 0x0f, 0xae, 0x38" ::"a"(p + i) : "memory"); /* clflush (%rax) */
    else if (op == LINE_CLDEMOTE)
      __asm__ volatile(".byte 0x0f, 0x1c, 0x00" ::"a"(p + i) : "memory"); /* cldemote (%rax) */
  }
  __asm__ volatile("sfence" ::: "memory");
#else
  (void)p, (void)n, (void)op;
#endif
}

static void part(int id) {
  int task = LOAD(W.task);
  if (task == TASK_EVICT) memset(scratch + (size_t)id * SCRATCH, id + 1, SCRATCH);
  if (task != TASK_CHUNK) return;
  size_t each = (CHUNK / NT + 4095) & ~(size_t)4095, a = (size_t)id * each;
  if (a >= CHUNK) return;
  size_t n = a + each > CHUNK ? CHUNK - a : each;
  memcpy(pool + W.slot + a, src + W.off + a, n);
  int op = LOAD(W.line);
  if (op != LINE_NONE) line_op(pool + W.slot + a, n, op);
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
    part(id);
    __atomic_add_fetch(&W.done, 1, __ATOMIC_RELEASE);
  }
}

/* One generation done by all threads (the caller is thread 0). */
static void post(size_t off, size_t slot, int task) {
  W.off = off, W.slot = slot;
  STORE(W.task, task);
  __atomic_store_n(&W.done, 0, __ATOMIC_RELAXED);
  pthread_mutex_lock(&W.mu);
  __atomic_add_fetch(&W.gen, 1, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&W.cv);
  pthread_mutex_unlock(&W.mu);
  part(0);
  while (LOAD(W.done) < NT - 1)
    relax();
}

/* The DMAs of one measurement, each between two timing events. */
static struct {
  cudaEvent_t *a, *b;
  size_t n, max;
  double t0;
} D;

static void dma_begin(void) {
  D.n = 0;
}

static void dma(char *to, const char *from) {
  if (D.n == 0) D.t0 = now_ms();
  CK(cudaEventRecord(D.a[D.n], st));
  CK(cudaMemcpyAsync(to, from, CHUNK, cudaMemcpyHostToDevice, st));
  CK(cudaEventRecord(D.b[D.n], st));
  D.n++;
}

/* GB/s from the first DMA queued to the last one done, and over the DMAs' own spans. */
static void dma_end(double *wall, double *engine) {
  CK(cudaStreamSynchronize(st));
  double t = (now_ms() - D.t0) / 1e3, busy = 0;
  for (size_t k = 0; k < D.n; k++) {
    float ms;
    CK(cudaEventElapsedTime(&ms, D.a[k], D.b[k]));
    busy += ms / 1e3;
  }
  *wall = D.n * CHUNK / t / 1e9;
  *engine = busy > 0 ? D.n * CHUNK / busy / 1e9 : 0;
}

static void stage(double *wall, double *engine) {
  size_t slots = POOL / CHUNK, n = TOTAL / CHUNK;
  dma_begin();
  for (size_t k = 0; k < n; k++) {
    size_t s = k % slots;
    if (k >= slots) CK(cudaEventSynchronize(D.b[k - slots])); /* the slot's last DMA is done */
    post(k * CHUNK, s * CHUNK, TASK_CHUNK);
    dma(dst + k * CHUNK, pool + s * CHUNK);
  }
  dma_end(wall, engine);
}

static void cold(double *wall, double *engine) {
  dma_begin();
  for (size_t k = 0; k < TOTAL / CHUNK; k++)
    dma(dst + k * CHUNK, pinned_src + k * CHUNK);
  dma_end(wall, engine);
}

/* The pool filled, treated, left 10 ms (the caller spinning when the threads do), then DMA'd. */
static void pool_dma(int evict, double *wall, double *engine) {
  for (size_t s = 0; s < POOL; s += CHUNK)
    post(s, s, TASK_CHUNK);
  if (evict) post(0, 0, TASK_EVICT);
  double t = now_ms();
  if (LOAD(W.spin))
    while (now_ms() - t < 10)
      relax();
  else
    usleep(10000);
  dma_begin();
  for (size_t s = 0; s < POOL; s += CHUNK)
    dma(dst + s, pool + s);
  dma_end(wall, engine);
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

enum { COLD, STAGE, POOL_DMA };
static const struct variant {
  const char *name;
  int what, spin, line, evict;
} VAR[] = {
    {"cold pinned memory", COLD, 0, LINE_NONE, 0},
    {"stage, threads spinning", STAGE, 1, LINE_NONE, 0},
    {"stage, threads sleeping", STAGE, 0, LINE_NONE, 0},
    {"stage, spinning, cldemote", STAGE, 1, LINE_CLDEMOTE, 0},
    {"stage, spinning, clwb", STAGE, 1, LINE_CLWB, 0},
    {"stage, spinning, clflushopt", STAGE, 1, LINE_CLFLUSHOPT, 0},
    {"pool, writers asleep", POOL_DMA, 0, LINE_NONE, 0},
    {"pool, writers spinning", POOL_DMA, 1, LINE_NONE, 0},
    {"pool, cldemote, spinning", POOL_DMA, 1, LINE_CLDEMOTE, 0},
    {"pool, pushed out, spinning", POOL_DMA, 1, LINE_NONE, 1},
    {"pool, clflush, spinning", POOL_DMA, 1, LINE_CLFLUSH, 0},
};
enum { V = sizeof VAR / sizeof VAR[0] };

/* One measurement of variant v; 0 where this CPU lacks its line instruction. */
static int run(const struct variant *x, double *wall, double *engine) {
  if (!has_line_op(x->line)) return 0;
  STORE(W.spin, x->spin);
  STORE(W.line, x->line);
  post(0, 0, TASK_NONE); /* every thread has seen `spin` before the measurement */
  if (x->what == COLD)
    cold(wall, engine);
  else if (x->what == STAGE)
    stage(wall, engine);
  else
    pool_dma(x->evict, wall, engine);
  return 1;
}

static int setup(int argc, char **argv, int *rounds) {
  *rounds = argc > 1 ? atoi(argv[1]) : 5;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  NT = argc > 2 ? atoi(argv[2]) : (int)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu); /* pinwheel's */
  long mib[3] = {argc > 3 ? atol(argv[3]) : 256, argc > 4 ? atol(argv[4]) : 48,
                 argc > 5 ? atol(argv[5]) : 4};
  for (int i = 0; i < 3; i++)
    if (mib[i] < 1 || mib[i] > 65536) mib[i] = 0; /* refused below */
  TOTAL = (size_t)mib[0] << 20, POOL = (size_t)mib[1] << 20, CHUNK = (size_t)mib[2] << 20;
  if (*rounds < 1 || *rounds > 64 || NT < 1 || NT > 256 || CHUNK == 0 || POOL < CHUNK ||
      TOTAL < POOL || TOTAL % CHUNK || POOL % CHUNK) {
    fprintf(stderr, "dma_probe: bad arguments (rounds 1-64, threads 1-256, whole chunks)\n");
    return 2;
  }
  D.max = TOTAL / CHUNK;
  D.a = (cudaEvent_t *)calloc(D.max, sizeof *D.a);
  D.b = (cudaEvent_t *)calloc(D.max, sizeof *D.b);
  src = (char *)malloc(TOTAL);
  scratch = (char *)malloc(SCRATCH * NT);
  if (!src || !scratch || !D.a || !D.b) {
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
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (size_t k = 0; k < D.max; k++) {
    CK(cudaEventCreate(&D.a[k]));
    CK(cudaEventCreate(&D.b[k]));
  }
  return 0;
}

int main(int argc, char **argv) {
  int rounds, rc = setup(argc, argv, &rounds);
  if (rc) return rc;
  static pthread_t th[256];
  for (int i = 1; i < NT; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)(long)i)) {
      fprintf(stderr, "dma_probe: cannot start thread %d\n", i);
      return 1;
    }
  printf("dma_probe: %zu MiB in %zu MiB chunks, pool %zu MiB, %d stage threads\n", TOTAL >> 20,
         CHUNK >> 20, POOL >> 20, NT);
  static double wall[V][64], engine[V][64];
  int bad = 0, ran[V];
  double w, e;
  cold(&w, &e); /* warm-up: the DMA path and the device pages */
  for (int k = 0; k < rounds; k++)
    for (int v = 0; v < V; v++) {
      if (k == 0) { /* the byte check reads only what this variant wrote */
        CK(cudaMemset(dst, 0xA5, TOTAL));
        memset(pool, 0x5A, POOL);
        CK(cudaDeviceSynchronize());
      }
      ran[v] = run(&VAR[v], &wall[v][k], &engine[v][k]);
      if (!ran[v]) continue;
      if (k == 0) bad |= !check(VAR[v].name, VAR[v].what == POOL_DMA ? POOL : TOTAL);
      printf("round %d: %-28s %6.1f GB/s, the engine %6.1f\n", k + 1, VAR[v].name, wall[v][k],
             engine[v][k]);
    }
  printf("\n| variant | GB/s | the engine's GB/s |\n|---|---|---|\n");
  for (int v = 0; v < V; v++) {
    if (!ran[v]) {
      printf("| %s | (no such instruction here) | |\n", VAR[v].name);
      continue;
    }
    qsort(wall[v], rounds, sizeof(double), cmp);
    qsort(engine[v], rounds, sizeof(double), cmp);
    printf("| %s | %.1f | %.1f |\n", VAR[v].name, wall[v][rounds / 2], engine[v][rounds / 2]);
  }
  pthread_mutex_lock(&W.mu);
  STORE(W.stop, 1);
  pthread_cond_broadcast(&W.cv);
  pthread_mutex_unlock(&W.mu);
  for (int i = 1; i < NT; i++)
    pthread_join(th[i], NULL);
  printf("bytes %s (medians of %d rounds)\n", bad ? "DIFFER" : "ok", rounds);
  return bad;
}
