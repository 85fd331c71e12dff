// elide_check.cu — a correct program that would see an early-returning cudaStreamSynchronize.
//
//   elide_check SUBTEST [rounds=3] [MiB=32] [spin_ms=30]
//   SUBTEST: other_stream other_thread cublas legacy d2h_pinned mapped_kernel host_func queries
//            event_reuse ipc all
//
// Every subtest queues a busy-wait kernel of about spin_ms on a non-blocking stream s, then a
// host-to-device copy of MiB from pageable malloc memory on s (one pinwheel stages), then
// cudaStreamSynchronize(s) — the sync pinwheel may let return early — and then looks, at once, at
// something a correct program may rely on after that sync:
//   other_stream   a kernel on another non-blocking stream t reads the copy's destination
//   other_thread   the same kernel, launched by another thread once the sync has returned
//   cublas         cublasScopy on t (cublasSetStream) reads the destination
//   legacy         the reading kernel on the legacy default stream (0)
//   d2h_pinned     a kernel filled a device buffer and a D2H copy into cudaMallocHost memory was
//                  queued on s before the staged copy: the host reads the pinned bytes
//   mapped_kernel  a kernel on s wrote a pattern through a cudaHostAllocMapped pointer: the host
//                  reads it
//   host_func      a cudaLaunchHostFunc on s wrote a host variable: the host reads it
//   queries        cudaStreamQuery(s), cudaEventQuery of an event recorded on s before the copy,
//                  cudaEventElapsedTime across the spin, and the driver's cuStreamQuery /
//                  cuEventQuery (linked, and taken with cudaGetDriverEntryPointByVersion)
//   event_reuse    an event destroyed, a new one (often the same handle) recorded by a graph after
//                  a host function behind a spin on a third stream; s waits for it: the host
//                  reads what the host function wrote
//   ipc            cudaIpcGetMemHandle first: the sync must wait for the spin (timed), and
//                  cudaStreamQuery(s) right after it answers cudaSuccess
//   all            each of the above in turn (ipc last: an IPC export ends elision for good)
// Each round has fresh patterns and every byte is compared; a mismatch exits 1 with what differed.
// Prints "elide_check NAME: ok" per subtest, and for every round how long the sync took against
// the spin (a sync that returned early took less than the spin).
#include "common.cuh"

#include <cublas_v2.h>
#include <cuda.h>
#include <pthread.h>

#include <functional>
#include <string>

static size_t g_bytes;     // the staged copy's size
static int g_rounds;       // rounds per subtest
static double g_spin_ms;   // the busy-wait's length
static long long g_cycles; // clock64 cycles of that length

__global__ void spin_kernel(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

__host__ __device__ static inline uint64_t pat(size_t i, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 1;
  x ^= x >> 29;
  return x * 0xBF58476D1CE4E5B9ull;
}

__global__ void fill_kernel(uint64_t *p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = pat(i, seed);
}

__global__ void copy_kernel(const uint64_t *src, uint64_t *dst, size_t words) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

static void die(const char *name, int round, const char *what) {
  fprintf(stderr, "elide_check %s: round %d: FAILED: %s\n", name, round, what);
  exit(1);
}

// Compares n bytes; on a difference, exits with the first differing word and the count.
static void expect_same(const char *name, int round, const char *what, const void *want,
                        const void *got, size_t n) {
  if (memcmp(want, got, n) == 0) return;
  const uint64_t *a = (const uint64_t *)want, *b = (const uint64_t *)got;
  size_t words = n / 8, first = (size_t)-1, bad = 0;
  for (size_t i = 0; i < words; i++)
    if (a[i] != b[i]) {
      if (first == (size_t)-1) first = i;
      bad++;
    }
  char msg[512];
  snprintf(msg, sizeof msg,
           "%s: %zu of %zu 8-byte words differ, the first at byte %zu: expected %016llx, got %016llx",
           what, bad, words, first == (size_t)-1 ? 0 : first * 8,
           (unsigned long long)(first == (size_t)-1 ? 0 : a[first]),
           (unsigned long long)(first == (size_t)-1 ? 0 : b[first]));
  die(name, round, msg);
}

static void fill_host(uint64_t *p, size_t words, uint64_t seed) {
  for (size_t i = 0; i < words; i++) p[i] = pat(i, seed);
}

// Cycles of clock64 for about ms, measured with events (the SM clock is not the rated one).
static long long calibrate(double ms) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  long long cycles = 1000000;
  for (int it = 0; it < 3; it++) {
    CK(cudaEventRecord(a));
    spin_kernel<<<1, 1>>>(cycles);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (t > 0.01f) cycles = (long long)(cycles * ms / t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return cycles;
}

// What every subtest has: streams s and t, the pageable source, the destination and a reader.
struct ctx {
  const char *name;
  cudaStream_t s, t;
  uint64_t *src;  // pageable (malloc)
  uint64_t *back; // pageable, the reader's bytes copied back
  uint64_t *dst;  // device: the staged copy's destination
  uint64_t *out;  // device: what the reader wrote
  size_t words;
};

static void ctx_init(ctx &c, const char *name) {
  c.name = name;
  c.words = g_bytes / 8;
  CK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c.t, cudaStreamNonBlocking));
  c.src = (uint64_t *)malloc(g_bytes);
  c.back = (uint64_t *)malloc(g_bytes);
  if (!c.src || !c.back) die(name, 0, "malloc");
  CK(cudaMalloc(&c.dst, g_bytes));
  CK(cudaMalloc(&c.out, g_bytes));
  CK(cudaDeviceSynchronize());
}

static void ctx_free(ctx &c) {
  CK(cudaDeviceSynchronize());
  CK(cudaStreamDestroy(c.s));
  CK(cudaStreamDestroy(c.t));
  CK(cudaFree(c.dst));
  CK(cudaFree(c.out));
  free(c.src);
  free(c.back);
}

// The usual start of a round: a fresh source; the destination overwritten on s (so stale bytes
// differ from the new ones); the spin; [before_copy, still on s]; the staged copy; the sync.
// Returns how long the sync call took (ms) and sets *since_spin to the time from the spin's launch
// to the sync's return.
static double staged_round(ctx &c, int round, uint64_t seed, double *since_spin,
                           const std::function<void()> &before_copy = nullptr) {
  fill_host(c.src, c.words, seed);
  CK(cudaMemsetAsync(c.dst, 0xEE, g_bytes, c.s));
  double t0 = now_ms();
  spin_kernel<<<1, 1, 0, c.s>>>(g_cycles);
  CK(cudaGetLastError());
  if (before_copy) before_copy();
  CK(cudaMemcpyAsync(c.dst, c.src, g_bytes, cudaMemcpyHostToDevice, c.s));
  double t1 = now_ms();
  CK(cudaStreamSynchronize(c.s));
  double t2 = now_ms();
  if (since_spin) *since_spin = t2 - t0;
  printf("  %s round %d: sync %.2f ms, %.2f ms after the %.0f ms spin was queued\n", c.name, round,
         t2 - t1, t2 - t0, g_spin_ms);
  return t2 - t1;
}

// The reader's bytes (out) back on the host, compared with the source.
static void check_out(ctx &c, int round) {
  CK(cudaMemcpy(c.back, c.out, g_bytes, cudaMemcpyDeviceToHost));
  expect_same(c.name, round, "the bytes another stream read from the copy's destination", c.src,
              c.back, g_bytes);
}

// The destination itself back on the host (after the reader, or for the subtests without one).
static void check_dst(ctx &c, int round) {
  CK(cudaMemcpy(c.back, c.dst, g_bytes, cudaMemcpyDeviceToHost));
  expect_same(c.name, round, "the copy's destination", c.src, c.back, g_bytes);
}

static void launch_copy(ctx &c, cudaStream_t st) {
  copy_kernel<<<264, 256, 0, st>>>(c.dst, c.out, c.words);
  CK(cudaGetLastError());
}

static void t_other_stream() {
  ctx c;
  ctx_init(c, "other_stream");
  for (int r = 0; r < g_rounds; r++) {
    staged_round(c, r, 100 + r, NULL);
    launch_copy(c, c.t);
    CK(cudaStreamSynchronize(c.t));
    check_out(c, r);
  }
  ctx_free(c);
  printf("elide_check other_stream: ok\n");
}

struct reader_arg {
  ctx *c;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;
};

static void *reader_thread(void *p) {
  reader_arg *a = (reader_arg *)p;
  pthread_mutex_lock(&a->mu);
  while (!a->go) pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
  launch_copy(*a->c, a->c->t);
  CK(cudaStreamSynchronize(a->c->t));
  return NULL;
}

static void t_other_thread() {
  ctx c;
  ctx_init(c, "other_thread");
  for (int r = 0; r < g_rounds; r++) {
    reader_arg a;
    a.c = &c;
    a.go = 0;
    pthread_mutex_init(&a.mu, NULL);
    pthread_cond_init(&a.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, reader_thread, &a)) die(c.name, r, "pthread_create");
    staged_round(c, r, 200 + r, NULL);
    pthread_mutex_lock(&a.mu);
    a.go = 1;
    pthread_cond_signal(&a.cv);
    pthread_mutex_unlock(&a.mu);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&a.mu);
    pthread_cond_destroy(&a.cv);
    check_out(c, r);
  }
  ctx_free(c);
  printf("elide_check other_thread: ok\n");
}

static void t_cublas() {
  ctx c;
  ctx_init(c, "cublas");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) die(c.name, 0, "cublasCreate");
  if (cublasSetStream(h, c.t) != CUBLAS_STATUS_SUCCESS) die(c.name, 0, "cublasSetStream");
  int nf = (int)(g_bytes / sizeof(float));
  for (int r = 0; r < g_rounds; r++) {
    staged_round(c, r, 300 + r, NULL);
    // the source's words read as floats: a copy moves their bits unchanged
    if (cublasScopy(h, nf, (const float *)c.dst, 1, (float *)c.out, 1) != CUBLAS_STATUS_SUCCESS)
      die(c.name, r, "cublasScopy");
    CK(cudaStreamSynchronize(c.t));
    check_out(c, r);
  }
  cublasDestroy(h);
  ctx_free(c);
  printf("elide_check cublas: ok\n");
}

static void t_legacy() {
  ctx c;
  ctx_init(c, "legacy");
  for (int r = 0; r < g_rounds; r++) {
    staged_round(c, r, 400 + r, NULL);
    launch_copy(c, cudaStreamLegacy);
    CK(cudaStreamSynchronize(cudaStreamLegacy));
    check_out(c, r);
  }
  ctx_free(c);
  printf("elide_check legacy: ok\n");
}

static void t_d2h_pinned() {
  ctx c;
  ctx_init(c, "d2h_pinned");
  size_t words = c.words;
  uint64_t *pinned, *dbuf, *want = (uint64_t *)malloc(g_bytes);
  CK(cudaMallocHost(&pinned, g_bytes));
  CK(cudaMalloc(&dbuf, g_bytes));
  for (int r = 0; r < g_rounds; r++) {
    uint64_t seed = 500 + r;
    CK(cudaDeviceSynchronize()); // a real sync: nothing of an earlier round is left
    memset(pinned, 0, g_bytes);
    fill_host(want, words, seed ^ 0x55);
    double since;
    staged_round(c, r, seed, &since, [&] {
      fill_kernel<<<264, 256, 0, c.s>>>(dbuf, words, seed ^ 0x55);
      CK(cudaGetLastError());
      CK(cudaMemcpyAsync(pinned, dbuf, g_bytes, cudaMemcpyDeviceToHost, c.s));
    });
    expect_same(c.name, r, "the pinned buffer a D2H copy queued before the sync wrote", want, pinned,
                g_bytes);
    if (since < 0.8 * g_spin_ms) die(c.name, r, "the sync returned before the spin could end");
    check_dst(c, r);
  }
  CK(cudaFreeHost(pinned));
  CK(cudaFree(dbuf));
  free(want);
  ctx_free(c);
  printf("elide_check d2h_pinned: ok\n");
}

static void t_mapped_kernel() {
  ctx c;
  ctx_init(c, "mapped_kernel");
  size_t mbytes = 8 << 20, mwords = mbytes / 8;
  uint64_t *mapped, *dmapped, *want = (uint64_t *)malloc(mbytes);
  CK(cudaHostAlloc(&mapped, mbytes, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&dmapped, mapped, 0));
  for (int r = 0; r < g_rounds; r++) {
    uint64_t seed = 600 + r;
    CK(cudaDeviceSynchronize());
    memset(mapped, 0, mbytes);
    fill_host(want, mwords, seed ^ 0x66);
    double since;
    staged_round(c, r, seed, &since, [&] {
      fill_kernel<<<264, 256, 0, c.s>>>(dmapped, mwords, seed ^ 0x66);
      CK(cudaGetLastError());
    });
    expect_same(c.name, r, "the mapped host memory a kernel queued before the sync wrote", want,
                mapped, mbytes);
    if (since < 0.8 * g_spin_ms) die(c.name, r, "the sync returned before the spin could end");
    check_dst(c, r);
  }
  CK(cudaFreeHost(mapped));
  free(want);
  ctx_free(c);
  printf("elide_check mapped_kernel: ok\n");
}

static volatile int g_host_var;

static void CUDART_CB host_fn(void *p) { g_host_var = (int)(intptr_t)p; }

static void t_host_func() {
  ctx c;
  ctx_init(c, "host_func");
  for (int r = 0; r < g_rounds; r++) {
    CK(cudaDeviceSynchronize());
    g_host_var = 0;
    double since;
    staged_round(c, r, 700 + r, &since, [&] {
      CK(cudaLaunchHostFunc(c.s, host_fn, (void *)(intptr_t)(r + 1)));
    });
    if (g_host_var != r + 1) {
      char msg[128];
      snprintf(msg, sizeof msg, "the host function queued before the sync had not run (%d, expected %d)",
               g_host_var, r + 1);
      die(c.name, r, msg);
    }
    if (since < 0.8 * g_spin_ms) die(c.name, r, "the sync returned before the spin could end");
    check_dst(c, r);
  }
  ctx_free(c);
  printf("elide_check host_func: ok\n");
}

// A destroyed event's handle, reused: an event made after the destruction (CUDA often hands out
// the same handle), recorded by a graph right after a host function (a record pinwheel does not
// see), behind a spin on a third stream; s waits for it, then the staged copy and its sync: the
// sync must be real, and the host then reads what the host function wrote.  Before pinwheel forgot
// destroyed events, a new event with the old handle inherited "follows nothing that writes host
// memory" and the sync was elided.
static void t_event_reuse() {
  ctx c;
  ctx_init(c, "event_reuse");
  cudaStream_t u;
  CK(cudaStreamCreateWithFlags(&u, cudaStreamNonBlocking));
  int reused = 0;
  for (int r = 0; r < g_rounds; r++) {
    CK(cudaDeviceSynchronize());
    g_host_var = 0;
    cudaEvent_t old, ev;
    CK(cudaEventCreateWithFlags(&old, cudaEventDisableTiming));
    CK(cudaEventRecord(old, c.t)); // after nothing that writes host memory
    CK(cudaEventSynchronize(old));
    CK(cudaEventDestroy(old));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    reused += ev == old;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaGraphNode_t host_node, record_node;
    cudaHostNodeParams hp = {host_fn, (void *)(intptr_t)(r + 1)};
    CK(cudaGraphCreate(&g, 0));
    CK(cudaGraphAddHostNode(&host_node, g, NULL, 0, &hp));
    CK(cudaGraphAddEventRecordNode(&record_node, g, &host_node, 1, ev));
    CK(cudaGraphInstantiate(&ge, g, 0));
    spin_kernel<<<1, 1, 0, u>>>(g_cycles);
    CK(cudaGetLastError());
    CK(cudaGraphLaunch(ge, u));
    staged_round(c, r, 1000 + r, NULL, [&] { CK(cudaStreamWaitEvent(c.s, ev, 0)); });
    if (g_host_var != r + 1)
      die(c.name, r, "the host function the stream waited for had not run when its sync returned");
    check_dst(c, r);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(ev));
  }
  CK(cudaStreamDestroy(u));
  ctx_free(c);
  printf("elide_check event_reuse: ok (a destroyed event's handle reused in %d of %d rounds)\n",
         reused, g_rounds);
}

typedef CUresult (*query_fn)(void *);

static void t_queries() {
  ctx c;
  ctx_init(c, "queries");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  query_fn ep_stream = NULL, ep_event = NULL;
  cudaDriverEntryPointQueryResult st;
  CK(cudaGetDriverEntryPointByVersion("cuStreamQuery", (void **)&ep_stream, 12000, cudaEnableDefault,
                                      &st));
  CK(cudaGetDriverEntryPointByVersion("cuEventQuery", (void **)&ep_event, 12000, cudaEnableDefault,
                                      &st));
  if (!ep_stream || !ep_event) die(c.name, 0, "no driver entry point for cuStreamQuery/cuEventQuery");
  for (int r = 0; r < g_rounds; r++) {
    staged_round(c, r, 800 + r, NULL, [&] {
      // after the round's spin: e0, a second spin, e1 (the elapsed time covers one whole spin)
      CK(cudaEventRecord(e0, c.s));
      spin_kernel<<<1, 1, 0, c.s>>>(g_cycles);
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1, c.s));
    });
    char msg[256];
    cudaError_t q = cudaStreamQuery(c.s);
    if (q != cudaSuccess) {
      snprintf(msg, sizeof msg, "cudaStreamQuery(s) after its sync: %s", cudaGetErrorName(q));
      die(c.name, r, msg);
    }
    q = cudaEventQuery(e1);
    if (q != cudaSuccess) {
      snprintf(msg, sizeof msg, "cudaEventQuery of an event recorded before the sync: %s",
               cudaGetErrorName(q));
      die(c.name, r, msg);
    }
    CUresult d = cuStreamQuery((CUstream)c.s);
    if (d != CUDA_SUCCESS) {
      snprintf(msg, sizeof msg, "cuStreamQuery(s) after its sync: %d", (int)d);
      die(c.name, r, msg);
    }
    d = cuEventQuery((CUevent)e1);
    if (d != CUDA_SUCCESS) {
      snprintf(msg, sizeof msg, "cuEventQuery of an event recorded before the sync: %d", (int)d);
      die(c.name, r, msg);
    }
    d = ep_stream((void *)c.s);
    if (d != CUDA_SUCCESS) {
      snprintf(msg, sizeof msg, "cuStreamQuery (from cudaGetDriverEntryPointByVersion): %d", (int)d);
      die(c.name, r, msg);
    }
    d = ep_event((void *)e1);
    if (d != CUDA_SUCCESS) {
      snprintf(msg, sizeof msg, "cuEventQuery (from cudaGetDriverEntryPointByVersion): %d", (int)d);
      die(c.name, r, msg);
    }
    float ms = -1;
    q = cudaEventElapsedTime(&ms, e0, e1);
    if (q != cudaSuccess || ms < 0.5 * g_spin_ms) {
      snprintf(msg, sizeof msg, "cudaEventElapsedTime(e0, e1) across a %.0f ms spin: %s, %.3f ms",
               g_spin_ms, cudaGetErrorName(q), ms);
      die(c.name, r, msg);
    }
    check_dst(c, r);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  ctx_free(c);
  printf("elide_check queries: ok\n");
}

static void t_ipc() {
  ctx c;
  ctx_init(c, "ipc");
  cudaIpcMemHandle_t hnd;
  CK(cudaIpcGetMemHandle(&hnd, c.dst));
  for (int r = 0; r < g_rounds; r++) {
    double since;
    staged_round(c, r, 900 + r, &since);
    cudaError_t q = cudaStreamQuery(c.s);
    if (q != cudaSuccess) {
      char msg[128];
      snprintf(msg, sizeof msg, "cudaStreamQuery(s) right after its sync: %s", cudaGetErrorName(q));
      die(c.name, r, msg);
    }
    if (since < 0.8 * g_spin_ms)
      die(c.name, r, "the sync returned before the spin could end, after an IPC export");
    check_dst(c, r);
  }
  ctx_free(c);
  printf("elide_check ipc: ok\n");
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "all";
  g_rounds = argc > 2 ? atoi(argv[2]) : 3;
  g_bytes = (size_t)(argc > 3 ? atol(argv[3]) : 32) << 20;
  g_spin_ms = argc > 4 ? atof(argv[4]) : 30;
  if (g_rounds < 1 || g_bytes < 8) {
    fprintf(stderr, "usage: elide_check SUBTEST [rounds] [MiB] [spin_ms]\n");
    return 2;
  }
  int dev = 0, pageable = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, dev));
  CK(cudaFree(0));
  g_cycles = calibrate(g_spin_ms);
  printf("elide_check: %d rounds of %zu MiB, spin %.0f ms (%lld cycles); device pageable memory "
         "access %d\n",
         g_rounds, g_bytes >> 20, g_spin_ms, g_cycles, pageable);
  struct {
    const char *name;
    void (*fn)();
  } tests[] = {{"other_stream", t_other_stream}, {"other_thread", t_other_thread},
               {"cublas", t_cublas},             {"legacy", t_legacy},
               {"queries", t_queries},           {"d2h_pinned", t_d2h_pinned},
               {"mapped_kernel", t_mapped_kernel}, {"host_func", t_host_func},
               {"event_reuse", t_event_reuse},   {"ipc", t_ipc}};
  bool all = strcmp(which, "all") == 0, found = false;
  for (auto &t : tests)
    if (all || strcmp(which, t.name) == 0) {
      t.fn();
      found = true;
    }
  if (!found) {
    fprintf(stderr, "elide_check: no subtest %s\n", which);
    return 2;
  }
  if (all) printf("elide_check all: ok\n");
  return 0;
}
