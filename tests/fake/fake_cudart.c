/* fake_cudart.c — a small stand-in for libcudart.so.13, for the interposition tests.
 *
 * It defines every function of shim/front/hooks.def with the real library's version node, executes
 * copies at once (every "device" is host memory, so any stream order is trivially respected),
 * classifies pointers from its own allocation table, and records each call so the test program
 * can check that the arguments arrived intact and the status came back unchanged.
 * FAKE_HOSTALLOC_SLEEP_MS makes cudaHostAlloc slow; a call made after the fake's exit teardown
 * (registered at its first call, as CUDA's is) says so on stderr and fails as CUDA's calls then do
 * (cudaErrorCudartUnloading).
 */
#define _GNU_SOURCE
#include "fake_api.h"
#include "fake_common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The hooked entry points' prototypes come from the shim's one list (hooks.def), so this fake
 * cannot drift from it: a definition below whose types differ is a compile error, and a missing
 * one a link error (fake_hooked at the end takes the address of every one; of the other entry
 * points that enqueue work, PW_ENQUEUE, it defines those the tests call). */
#define PW_HOOK(name, class, params, args, stream) cudaError_t name params;
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) cudaError_t name params;
#define PW_REAL(name, params) cudaError_t name params;
#include "hooks.def"

/* Like CUDA, the fake registers its teardown with atexit at its first call; a call that comes
 * after it (or a call in flight across it) is what pinwheel must never make, and says so.  Such a
 * call (the program's own too, from an exit handler registered before CUDA's) fails with
 * cudaErrorCudartUnloading, as CUDA's do; the queries that do not enter (pointer attributes, the
 * device, a stream's capture status and device, the last error) still answer. */
static atomic_int torn_down;
static pthread_once_t teardown_once = PTHREAD_ONCE_INIT;
static void teardown(void) {
  atomic_store(&torn_down, 1);
}
static void register_teardown(void) {
  atexit(teardown);
}
static int fake_enter(const char *name) { /* 1: torn down */
  pthread_once(&teardown_once, register_teardown);
  if (!atomic_load(&torn_down)) return 0;
  char b[160];
  int n = snprintf(b, sizeof b, "fake cudart: %s runs after CUDA's teardown\n", name);
  if (write(2, b, (size_t)n) < 0) return 1;
  return 1;
}
#define FAKE_ENTER()                                                                               \
  do {                                                                                             \
    if (fake_enter(__func__)) return last_error = cudaErrorCudartUnloading;                        \
  } while (0)

/* FAKE_HOSTALLOC_SLEEP_MS (nap's one variable): cudaHostAlloc sleeps this long, as pinning a large
 * pool takes a while. */
static void nap(const char *var) {
  const char *ms = getenv(var);
  if (!ms) return;
  struct timespec ts = {atoi(ms) / 1000, (atoi(ms) % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static fake_call last;
static __thread cudaError_t last_error = cudaSuccess;
static __thread enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

typedef struct fake_stream {
  int magic, capturing, gen;
} fake_stream;

/* cudaDeviceReset destroys every stream, event and allocation: handles made before it (an older
 * generation) fail with cudaErrorContextIsDestroyed, as in CUDA. */
static int generation;
static int stale_stream(cudaStream_t s) {
  return (uintptr_t)s > 2 && ((fake_stream *)s)->gen != generation;
}
static int stale_event(cudaEvent_t e) {
  return e && *(int *)e != generation; /* fake_event's first member */
}

/* With FAKE_CUPTI_CALLS set, each copy and launch is reported to the fake CUPTI (when loaded),
 * which makes the records CUPTI would: the API call and its GPU operation. */
static void report_to_cupti(const fake_call *c) {
  static void (*api)(const char *, int, size_t, const void *, const void *);
  static int looked;
  if (!looked) {
    looked = 1;
    void *h = getenv("FAKE_CUPTI_CALLS") ? dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (h) *(void **)&api = dlsym(h, "fake_cupti_api");
  }
  if (!api) return;
  if (strstr(c->name, "Memcpy"))
    api(c->name, 1 + (int)c->kind, c->count, NULL, c->stream);
  else if (strstr(c->name, "Launch"))
    api(c->name, 0, 0, c->func, c->stream);
}

/* Record a call; returns the error to report (one injected by fake_fail_next, else success). */
static cudaError_t record(const fake_call *c) {
  if (fake_enter(c->name)) return last_error = cudaErrorCudartUnloading;
  pthread_mutex_lock(&fake_mu);
  last = *c;
  cudaError_t e = (cudaError_t)fake_count_call(c->name);
  if (e == cudaSuccess) report_to_cupti(c);
  pthread_mutex_unlock(&fake_mu);
  if (e != cudaSuccess) last_error = e;
  return e;
}

fake_call fake_last(void) {
  pthread_mutex_lock(&fake_mu);
  fake_call c = last;
  pthread_mutex_unlock(&fake_mu);
  return c;
}

long fake_count(const char *name) {
  return fake_count_of(name);
}

void fake_fail_next(cudaError_t err) {
  fake_set_fail((int)err);
}

void fake_set_capturing(cudaStream_t s, int on) {
  ((fake_stream *)s)->capturing = on;
}

#define CALL_RECORD(...)                                                                           \
  fake_call c = {__VA_ARGS__};                                                                     \
  strncpy(c.name, __func__, sizeof c.name - 1);                                                    \
  cudaError_t e = record(&c)

static cudaError_t do_copy(const char *fn, void *dst, const void *src, size_t count,
                           enum cudaMemcpyKind kind, cudaStream_t stream) {
  fake_call c = {.dst = dst, .src = src, .count = count, .kind = kind, .stream = stream};
  strncpy(c.name, fn, sizeof c.name - 1);
  cudaError_t e = record(&c);
  if (e == cudaSuccess && stale_stream(stream)) e = last_error = cudaErrorContextIsDestroyed;
  /* as CUDA does: a range that wraps the address space is an invalid value, caught before any
   * byte moves */
  if (e == cudaSuccess &&
      (count > UINTPTR_MAX - (uintptr_t)dst || count > UINTPTR_MAX - (uintptr_t)src))
    e = last_error = cudaErrorInvalidValue;
  if (e == cudaSuccess && count && dst && src) memmove(dst, src, count);
  return e;
}

/* The copy entry points are generated from hooks.def: their parameter names are part of its
 * contract (dst, src, count, kind, and stream for COPY_ASYNC). */
#define FAKE_COPY_BLOCKING(name, params, args)                                                     \
  cudaError_t name params {                                                                        \
    return do_copy(#name, dst, src, count, kind, 0);                                               \
  }
#define FAKE_COPY_ASYNC(name, params, args)                                                        \
  cudaError_t name params {                                                                        \
    return do_copy(#name, dst, src, count, kind, stream);                                          \
  }

/* So are the launches, syncs and profiler calls: each records its arguments.  Which fields they
 * fill follows from the function's own type: FAKE_FIELDS(name) is the recorder of that type, called
 * with the function's arguments.  A hooked function of a type not listed here is a compile error
 * until it has a recorder. */
static fake_call launch(const void *func, dim3 grid, dim3 block, void **args, size_t shared,
                        cudaStream_t stream) {
  return (fake_call){
      .func = func, .grid = grid, .block = block, .args = args, .shared = shared, .stream = stream};
}
static fake_call launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args) {
  return (fake_call){.config = config, .func = func, .args = args};
}
static fake_call on_stream(cudaStream_t stream) {
  return (fake_call){.stream = stream};
}
static fake_call on_event(cudaEvent_t event) {
  return (fake_call){.event = event};
}
static fake_call no_args(void) {
  return (fake_call){.count = 0};
}
typedef cudaError_t launch_t(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t launch_kernel_t(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t launch_ex_t(const cudaLaunchConfig_t *, const void *, void **);
typedef cudaError_t on_stream_t(cudaStream_t);
typedef cudaError_t on_event_t(cudaEvent_t);
typedef cudaError_t no_args_t(void);
/* one association a line: */
/* clang-format off */
#define FAKE_FIELDS(name)                                                                          \
  _Generic(&name,                                                                                  \
           launch_t *: launch,                                                                     \
           launch_kernel_t *: launch,                                                              \
           launch_ex_t *: launch_ex,                                                               \
           on_stream_t *: on_stream,                                                               \
           on_event_t *: on_event,                                                                 \
           no_args_t *: no_args)
/* clang-format on */
static cudaError_t record_as(const char *name, fake_call *c) {
  strncpy(c->name, name, sizeof c->name - 1);
  return record(c);
}
#define FAKE_LAUNCH(name, params, args)                                                            \
  cudaError_t name params {                                                                        \
    fake_call c = FAKE_FIELDS(name) args;                                                          \
    return record_as(#name, &c);                                                                   \
  }
#define FAKE_PROFILER(name, params, args) FAKE_LAUNCH(name, params, args)
/* FAKE_LAZY_EVENTS: a recorded event stays pending (cudaEventQuery: not ready) until it is waited
 * for: its own sync, a sync of its stream, of the device, or a stream query that finds it done
 * never comes by itself.  So an elided sync's event is still pending when pinwheel's fences and
 * questions meet it, as on a busy GPU. */
typedef struct fake_event {
  int gen, pending;
  cudaStream_t stream;
  unsigned long order; /* when it was recorded: done implies every earlier one of its stream */
} fake_event;
static unsigned long records;
static fake_event *recorded[4096];
static int nrecorded;
static int lazy_events(void) {
  static int v = -1;
  if (v < 0) v = getenv("FAKE_LAZY_EVENTS") != NULL;
  return v;
}
/* Every event recorded on stream s (NULL: any) is done. */
static void settle(cudaStream_t s) {
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < nrecorded; i++)
    if (!s || recorded[i]->stream == s) recorded[i]->pending = 0;
  pthread_mutex_unlock(&fake_mu);
}
static int stream_pending(cudaStream_t s) {
  int p = 0;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < nrecorded && !p; i++)
    p = recorded[i]->stream == s && recorded[i]->pending;
  pthread_mutex_unlock(&fake_mu);
  return p;
}
static cudaStream_t last_wait_stream;
static cudaEvent_t last_wait_event;
cudaStream_t fake_last_wait(void) {
  pthread_mutex_lock(&fake_mu);
  cudaStream_t s = last_wait_stream;
  pthread_mutex_unlock(&fake_mu);
  return s;
}
int fake_stream_pending(cudaStream_t s) {
  return stream_pending(s);
}
int fake_event_pending(cudaEvent_t e) {
  pthread_mutex_lock(&fake_mu);
  int p = ((fake_event *)e)->pending;
  pthread_mutex_unlock(&fake_mu);
  return p;
}

/* Stream syncs: the stream's events (all of them for a device sync) are done. */
#define FAKE_HOST_SYNC(name, params, args)                                                         \
  cudaError_t name params {                                                                        \
    fake_call c = FAKE_FIELDS(name) args;                                                          \
    cudaError_t e = record_as(#name, &c);                                                          \
    if (e == cudaSuccess && (stale_stream(c.stream) || stale_event(c.event)))                      \
      e = last_error = cudaErrorContextIsDestroyed;                                                \
    if (e == cudaSuccess) settle(c.stream);                                                        \
    return e;                                                                                      \
  }
#define FAKE_EVENT_SYNC(name, params, args)     /* below */
#define FAKE_EVENT_RECORD(name, params, args)   /* below */
#define FAKE_STREAM_WAIT(name, params, args)    /* below */
#define FAKE_STREAM_QUERY(name, params, args)   /* below */
#define FAKE_EVENT_QUERY(name, params, args)    /* below */
#define FAKE_IPC_EXPORT(name, params, args)     /* below */
#define FAKE_MANAGED(name, params, args)        /* below */
#define FAKE_STREAM_DESTROY(name, params, args) /* below */
#define FAKE_EVENT_DESTROY(name, params, args)  /* below */
#define FAKE_HOST_MEM(name, params, args)       /* below, with the functions the shim only calls */
#define FAKE_DEVICE_RESET(name, params, args)   /* below */
#define PW_HOOK(name, class, params, args, stream) FAKE_##class(name, params, args)
#include "hooks.def"

cudaError_t cudaDeviceReset(void) {
  CALL_RECORD(.count = 0);
  pthread_mutex_lock(&fake_mu);
  generation++;
  fake_nregions = 0; /* every allocation is gone (its memory is leaked, never reused) */
  pthread_mutex_unlock(&fake_mu);
  return e;
}

/* ---- the functions the shim calls but does not wrap ---- */

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
  if (getenv("FAKE_POINTER_ATTR_FAIL")) return last_error = cudaErrorInvalidValue;
  memset(attr, 0, sizeof *attr);
  attr->type = (enum cudaMemoryType)fake_region_type(ptr); /* 0: cudaMemoryTypeUnregistered */
  attr->device = attr->type ? 0 : -2;
  if (attr->type) attr->devicePointer = (void *)ptr;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  return *device = 0, cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  FAKE_ENTER();
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
  *st = cudaStreamCaptureStatusNone;
  if (s && s != cudaStreamLegacy && s != cudaStreamPerThread) {
    fake_stream *f = (fake_stream *)s;
    if (f->magic != 0x5eed) return last_error = cudaErrorInvalidResourceHandle;
    if (f->capturing) *st = cudaStreamCaptureStatusActive;
  }
  return cudaSuccess;
}
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device) {
  return *device = 0, cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  FAKE_ENTER();
  enum cudaStreamCaptureMode old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return cudaSuccess;
}
cudaError_t cudaPeekAtLastError(void) {
  return last_error;
}
cudaError_t cudaGetLastError(void) {
  FAKE_ENTER();
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
/* The host-memory calls record their arguments (the shim wraps them) and honour an injected error;
 * the pinned allocations are host memory the pointer table calls pinned. */
static cudaError_t pinned_alloc(void **p, size_t n) {
  if (getenv("FAKE_HOSTALLOC_FAIL")) return last_error = cudaErrorMemoryAllocation;
  nap("FAKE_HOSTALLOC_SLEEP_MS");
  FAKE_ENTER(); /* still inside when CUDA tore down */
  if (!(*p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095))) return cudaErrorMemoryAllocation;
  fake_region_add(*p, n, cudaMemoryTypeHost);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
  FAKE_ENTER();
  CALL_RECORD(.args = p, .count = n, .kind = (int)flags);
  return e != cudaSuccess ? e : pinned_alloc(p, n);
}
cudaError_t cudaMallocHost(void **p, size_t n) {
  FAKE_ENTER();
  CALL_RECORD(.args = p, .count = n);
  return e != cudaSuccess ? e : pinned_alloc(p, n);
}
cudaError_t cudaFreeHost(void *p) {
  FAKE_ENTER();
  CALL_RECORD(.dst = p);
  if (e != cudaSuccess) return e;
  fake_region_drop(p);
  free(p);
  return cudaSuccess;
}
/* Registered memory stays the program's: only the pointer table learns it is pinned. */
cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags) {
  CALL_RECORD(.dst = p, .count = n, .kind = (int)flags);
  if (e == cudaSuccess) fake_region_add(p, n, cudaMemoryTypeHost);
  return e;
}
cudaError_t cudaHostUnregister(void *p) {
  CALL_RECORD(.dst = p);
  if (e == cudaSuccess) fake_region_drop(p);
  return e;
}
/* Unified addressing: pinned host memory's device pointer is the host pointer. */
cudaError_t cudaHostGetDevicePointer(void **d, void *p, unsigned flags) {
  uintptr_t base;
  size_t size;
  (void)flags;
  if (!fake_region_range(p, &base, &size)) return last_error = cudaErrorInvalidValue;
  *d = p;
  return cudaSuccess;
}
/* Every pinned allocation of the fake was made with flags 0 (as far as this answer goes). */
cudaError_t cudaHostGetFlags(unsigned *flags, void *p) {
  CALL_RECORD(.dst = p);
  uintptr_t base;
  size_t size;
  if (e != cudaSuccess) return e;
  if (!fake_region_range(p, &base, &size)) return last_error = cudaErrorInvalidValue;
  *flags = 0;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n) {
  FAKE_ENTER();
  if (getenv("FAKE_NO_DRIVER") || getenv("FAKE_OLD_DRIVER"))
    return last_error = cudaErrorInsufficientDriver;
  const char *lim = getenv("FAKE_MALLOC_FAIL_ABOVE");
  if (lim && n > strtoull(lim, NULL, 0)) return last_error = cudaErrorMemoryAllocation;
  if (!(*p = aligned_alloc(256, (n + 255) & ~(size_t)255))) return cudaErrorMemoryAllocation;
  fake_region_add(*p, n, cudaMemoryTypeDevice);
  return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
  FAKE_ENTER();
  fake_region_drop(p);
  free(p);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  FAKE_ENTER();
  fake_stream *f = calloc(1, sizeof *f);
  f->magic = 0x5eed;
  f->gen = generation;
  *s = (cudaStream_t)f;
  return cudaSuccess;
}
/* Destroyed events, handed out again by the next event made, newest first, as CUDA may reuse a
 * handle (their memory is kept). */
static fake_event *free_events[64];
static int nfree_events;
static cudaEvent_t new_event(void) {
  pthread_mutex_lock(&fake_mu);
  fake_event *f = nfree_events ? free_events[--nfree_events] : NULL;
  pthread_mutex_unlock(&fake_mu);
  if (!f)
    f = calloc(1, sizeof *f);
  else
    *f = (fake_event){0};
  f->gen = generation;
  return (cudaEvent_t)f;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  FAKE_ENTER();
  *e = new_event();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  CALL_RECORD(.event = ev);
  if (e != cudaSuccess) return e;
  if (!ev) return last_error = cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&fake_mu);
  if (nfree_events < 64) free_events[nfree_events++] = (fake_event *)ev;
  pthread_mutex_unlock(&fake_mu);
  return cudaSuccess;
}
/* Counted (and an injected failure taken) without becoming fake_last(): the engine's own events
 * and waits come between a copy and the test's look at it. */
static cudaError_t count_only(const char *fn) {
  fake_enter(fn);
  pthread_mutex_lock(&fake_mu);
  cudaError_t e = (cudaError_t)fake_count_call(fn);
  pthread_mutex_unlock(&fake_mu);
  if (e != cudaSuccess) last_error = e;
  return e;
}
static cudaError_t event_record(const char *fn, cudaEvent_t e, cudaStream_t s) {
  cudaError_t r = count_only(fn);
  if (r != cudaSuccess) return r;
  if (stale_event(e) || stale_stream(s)) return last_error = cudaErrorContextIsDestroyed;
  fake_event *f = (fake_event *)e;
  pthread_mutex_lock(&fake_mu);
  f->stream = s;
  f->pending = lazy_events();
  f->order = ++records;
  int known = 0;
  for (int i = 0; i < nrecorded && !known; i++)
    known = recorded[i] == f;
  if (!known && nrecorded < 4096) recorded[nrecorded++] = f;
  pthread_mutex_unlock(&fake_mu);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  return event_record(__func__, e, s);
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) {
  return event_record(__func__, e, s);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags) {
  return event_record(__func__, e, s);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned flags) {
  return event_record(__func__, e, s);
}
cudaError_t cudaEventQuery(cudaEvent_t ev) {
  cudaError_t e = count_only(__func__);
  if (e != cudaSuccess) return e;
  if (stale_event(ev)) return last_error = cudaErrorContextIsDestroyed;
  return fake_event_pending(ev) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  CALL_RECORD(.event = ev);
  if (e != cudaSuccess) return e;
  if (stale_event(ev)) return last_error = cudaErrorContextIsDestroyed;
  fake_event *f = (fake_event *)ev;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < nrecorded; i++) /* stream order: what was recorded before it is done */
    if (recorded[i]->stream == f->stream && recorded[i]->order <= f->order)
      recorded[i]->pending = 0;
  f->pending = 0;
  pthread_mutex_unlock(&fake_mu);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  CALL_RECORD(.event = a);
  if (e != cudaSuccess) return e;
  if (fake_event_pending(a) || fake_event_pending(b)) return last_error = cudaErrorNotReady;
  *ms = 1.0f;
  return cudaSuccess;
}
static cudaError_t stream_wait(const char *fn, cudaStream_t s, cudaEvent_t ev) {
  cudaError_t r = count_only(fn);
  if (r != cudaSuccess) return r;
  if (stale_event(ev) || stale_stream(s)) return last_error = cudaErrorContextIsDestroyed;
  pthread_mutex_lock(&fake_mu);
  last_wait_stream = s;
  last_wait_event = ev;
  pthread_mutex_unlock(&fake_mu);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  return stream_wait(__func__, s, e);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  return stream_wait(__func__, s, e);
}
/* A stream is busy while an event recorded on it is pending. */
cudaError_t cudaStreamQuery(cudaStream_t s) {
  CALL_RECORD(.stream = s);
  if (e != cudaSuccess) return e;
  return stream_pending(s ? s : cudaStreamLegacy) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) {
  CALL_RECORD(.stream = s);
  if (e != cudaSuccess) return e;
  return stream_pending(s ? s : cudaStreamPerThread) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
  CALL_RECORD(.dst = p);
  if (e == cudaSuccess) memset(h, 0, sizeof *h);
  return e;
}
cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags) {
  CALL_RECORD(.count = flags);
  if (e == cudaSuccess) *p = NULL;
  return e;
}
cudaError_t cudaMemPoolExportToShareableHandle(void *sh, cudaMemPool_t pool,
                                               enum cudaMemAllocationHandleType t,
                                               unsigned int flags) {
  CALL_RECORD(.count = flags);
  (void)sh, (void)pool, (void)t;
  return e;
}
cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t *pool, void *sh,
                                                 enum cudaMemAllocationHandleType t,
                                                 unsigned int flags) {
  CALL_RECORD(.count = flags);
  if (e == cudaSuccess) *pool = NULL;
  (void)sh, (void)t;
  return e;
}
cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *d, void *p) {
  CALL_RECORD(.dst = p);
  if (e == cudaSuccess) memset(d, 0, sizeof *d);
  return e;
}
cudaError_t cudaMemPoolImportPointer(void **p, cudaMemPool_t pool,
                                     struct cudaMemPoolPtrExportData *d) {
  CALL_RECORD(.count = 0);
  if (e == cudaSuccess) *p = NULL;
  (void)pool, (void)d;
  return e;
}
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *h, cudaEvent_t ev) {
  CALL_RECORD(.event = ev);
  if (e == cudaSuccess) memset(h, 0, sizeof *h);
  return e;
}
/* A pool: a handle, whatever its location (the shim reads the properties). */
cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props) {
  CALL_RECORD(.count = props ? (size_t)props->location.type : 0);
  if (e == cudaSuccess) *pool = (cudaMemPool_t)calloc(1, 16);
  return e;
}
/* Managed memory is host memory here; the pointer table calls it managed. */
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags) {
  CALL_RECORD(.count = n);
  if (e != cudaSuccess) return e;
  if (!(*p = aligned_alloc(256, (n + 255) & ~(size_t)255))) return cudaErrorMemoryAllocation;
  fake_region_add(*p, n, cudaMemoryTypeManaged);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  CALL_RECORD(.stream = s);
  if (e != cudaSuccess) return e;
  if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
    return last_error = cudaErrorInvalidResourceHandle;
  ((fake_stream *)s)->magic = 0; /* the memory is kept: a later stream never gets this handle */
  return cudaSuccess;
}

/* A __managed__ variable's registration: nothing to do here (recorded for the test). */
void __cudaRegisterManagedVar(void **h, void **host, char *dev, const char *name, int ext,
                              size_t size, int constant, int global) {
  fake_call c = {.count = size};
  strncpy(c.name, __func__, sizeof c.name - 1);
  record(&c);
}

/* The stream-ordered allocator's free: at once (every "device" is host memory). */
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  CALL_RECORD(.dst = p, .stream = s);
  if (e != cudaSuccess) return e;
  fake_region_drop(p);
  free(p);
  return cudaSuccess;
}

/* FAKE_NO_DRIVER: no NVIDIA driver (the runtime reports driver version 0, and its calls fail with
 * "insufficient driver" as CUDA's do); FAKE_OLD_DRIVER: a driver of CUDA 12.0. */
cudaError_t cudaDriverGetVersion(int *v) {
  *v = getenv("FAKE_NO_DRIVER") ? 0 : getenv("FAKE_OLD_DRIVER") ? 12000 : 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}

/* FAKE_PAGEABLE_ACCESS: the device reaches pageable memory (HMM). */
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int device) {
  *v = attr == cudaDevAttrPageableMemoryAccess && getenv("FAKE_PAGEABLE_ACCESS") ? 1 : 0;
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* What a driver entry point looks like to the runtime, which takes them as libcudart does: the
 * driver front end answers it as the driver would (test_driver checks). */
void *fake_cudart_driver_entry(const char *name) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *volatile p = h ? dlsym(h, name) : NULL; /* not a tail call: the caller is this library */
  return p;
}

/* The driver entry-point lookups: as the real runtime, they ask the driver's cuGetProcAddress
 * (taken with dlsym from this library, so the shim answers with the driver's own). */
typedef int (*fake_gpa_fn)(const char *, void **, int, unsigned long long, int *);
static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int version,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status) {
  fake_gpa_fn gpa = NULL;
  *(void **)&gpa = fake_cudart_driver_entry("cuGetProcAddress_v2");
  int st = 0;
  if (!gpa || !funcPtr) return cudaErrorInvalidValue;
  int r = gpa(symbol, funcPtr, (int)version, flags, &st);
  if (status)
    *status = r == 0 && *funcPtr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return r == 0 ? cudaSuccess : cudaErrorSymbolNotFound;
}
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, 13000, flags, driverStatus);
}
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, 13000, flags | 2 /* per-thread */, driverStatus);
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus);
}
cudaError_t
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                      unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *driverStatus) {
  return entry_point(symbol, funcPtr, cudaVersion, flags | 2, driverStatus);
}

/* Two of the other entry points that enqueue work (hooks.def's PW_ENQUEUE) that the tests call: a
 * host function runs at once (every stream's earlier work is done), a memset sets the bytes (every
 * "device" pointer is host memory). */
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  FAKE_ENTER();
  CALL_RECORD(.stream = stream);
  if (e != cudaSuccess) return e;
  if (stale_stream(stream)) return last_error = cudaErrorContextIsDestroyed;
  if (fn) fn(userData);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  FAKE_ENTER();
  CALL_RECORD(.dst = devPtr, .count = count, .stream = stream);
  if (e != cudaSuccess) return e;
  if (stale_stream(stream)) return last_error = cudaErrorContextIsDestroyed;
  if (devPtr && count) memset(devPtr, value, count);
  return cudaSuccess;
}

/* Some of the other entry points sync elision fences (hooks.def's PW_ENQUEUE), recorded: a copy
 * into a symbol or between arrays (this fake has neither: nothing is copied), an external
 * semaphore's signal, a graphics unmap; an IPC event opened (a new event to this process). */
cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream) {
  CALL_RECORD(.src = src, .count = count, .kind = kind, .stream = stream);
  return e;
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                   cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                   size_t count, enum cudaMemcpyKind kind) {
  CALL_RECORD(.count = count, .kind = kind);
  return e;
}
#pragma GCC diagnostic pop
cudaError_t cudaSignalExternalSemaphoresAsync(const cudaExternalSemaphore_t *sems,
                                              const struct cudaExternalSemaphoreSignalParams *p,
                                              unsigned int n, cudaStream_t stream) {
  CALL_RECORD(.count = n, .stream = stream);
  return e;
}
cudaError_t cudaGraphicsUnmapResources(int count, cudaGraphicsResource_t *resources,
                                       cudaStream_t stream) {
  CALL_RECORD(.count = (size_t)count, .stream = stream);
  return e;
}
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle) {
  CALL_RECORD(.count = 0);
  if (e == cudaSuccess) *event = new_event();
  return e;
}

/* cudaGetDriverEntryPoint is deprecated in CUDA 13, still exported, and wrapped. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Every function of hooks.def is defined above (the link fails otherwise). */
const void *const fake_hooked[] = {
#define PW_HOOK(name, class, params, args, stream) (const void *)name,
#define PW_REAL(name, params) (const void *)name,
#include "hooks.def"
};
