/* fake_cuda.c — a small stand-in for libcuda.so.1, for the driver front end's tests.
 *
 * The real library has no symbol versions, so neither has this one.  It defines every function
 * of shim/front/drv_hooks.def but the other entry points that enqueue work, of which it defines a
 * few (prototypes from that list: a definition whose types differ is a compile error), the
 * 32-bit-pointer cuMemcpyHtoD of CUDA < 3.2, and a cuGetProcAddress (_v2 and the CUDA 11.3 one)
 * that answers by name, version and per-thread flag as the driver does.  With
 * FAKE_GPA_THUNKS set, cuGetProcAddress hands out other addresses than the exported symbols'
 * (thunks), as a driver may.  Copies run at once (device memory is host memory); pointers are
 * classified from its own allocation table; each call is recorded so the test program can check
 * arguments and statuses.  One device, its primary context, and contexts of the program's own.
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress
#undef cuMemcpyHtoD

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda_api.h"
#include "fake_common.h"

#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt) CUresult name params;
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  CUresult name params;
#define PW_DRV_REAL(name, params) CUresult name params;
#include "drv_hooks.def"
CUresult cuMemcpyHtoD(unsigned int dst, const void *src, size_t count); /* CUDA < 3.2 */
CUresult cuInit(unsigned int flags);

static fake_drv_call last;

typedef struct fake_ctx {
  int magic, device, primary;
} fake_ctx;
static fake_ctx primary_ctx = {0xc7c7, 0, 1};
static int primary_active;
static __thread fake_ctx *current;
static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

typedef struct fake_stream {
  int magic, capturing;
  fake_ctx *ctx;
  int gen; /* the primary context's life it was made in */
} fake_stream;
/* The primary context's life: a new one each time its last reference goes or it is reset.  The
 * real driver crashes when given a stream of a destroyed context; so does this one, loudly. */
static int primary_gen;
static void stream_alive(const char *fn, CUstream s) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
  fake_stream *f = (fake_stream *)s;
  if (f->magic == 0x5eed && f->ctx == &primary_ctx &&
      f->gen != __atomic_load_n(&primary_gen, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "fake libcuda: %s: a stream of a destroyed primary context\n", fn);
    abort();
  }
}

static CUresult record(const fake_drv_call *c) {
  pthread_mutex_lock(&fake_mu);
  last = *c;
  CUresult e = (CUresult)fake_count_call(c->name);
  pthread_mutex_unlock(&fake_mu);
  return e;
}

#define CALL_RECORD(...)                                                                           \
  fake_drv_call c = {__VA_ARGS__};                                                                 \
  strncpy(c.name, __func__, sizeof c.name - 1);                                                    \
  CUresult e = record(&c)

fake_drv_call fake_drv_last(void) {
  pthread_mutex_lock(&fake_mu);
  fake_drv_call c = last;
  pthread_mutex_unlock(&fake_mu);
  return c;
}

long fake_drv_count(const char *name) {
  return fake_count_of(name);
}

void fake_drv_fail_next(CUresult err) {
  fake_set_fail((int)err);
}

CUcontext fake_drv_new_context(void) {
  fake_ctx *c = calloc(1, sizeof *c);
  c->magic = 0xc7c7;
  return (CUcontext)c;
}

void fake_drv_set_capturing(CUstream s, int on) {
  ((fake_stream *)s)->capturing = on;
}

/* the memory type (CU_MEMORYTYPE_*) of an address; 0: not allocated here */
static unsigned type_of(uintptr_t p) {
  return (unsigned)fake_region_type((const void *)p);
}

static long pinned_copies, pageable_copies;
void fake_drv_copies(long *pinned, long *pageable) {
  pthread_mutex_lock(&fake_mu);
  *pinned = pinned_copies;
  *pageable = pageable_copies;
  pthread_mutex_unlock(&fake_mu);
}

int fake_drv_is_pinned(const void *p) {
  return type_of((uintptr_t)p) == CU_MEMORYTYPE_HOST;
}

/* ---- copies: run at once ---- */

static CUresult do_copy(const char *fn, uintptr_t dst, uintptr_t src, size_t count,
                        CUstream stream) {
  stream_alive(fn, stream);
  fake_drv_call c = {.dst = dst, .src = src, .count = count, .stream = stream};
  strncpy(c.name, fn, sizeof c.name - 1);
  unsigned td = type_of(dst), ts = type_of(src);
  pthread_mutex_lock(&fake_mu);
  if (td == CU_MEMORYTYPE_HOST || ts == CU_MEMORYTYPE_HOST) pinned_copies++;
  if (!td || !ts) pageable_copies++;
  pthread_mutex_unlock(&fake_mu);
  CUresult e = record(&c);
  if (e == CUDA_SUCCESS && count && dst && src) memmove((void *)dst, (const void *)src, count);
  return e;
}

/* The copy entry points are generated from drv_hooks.def: their parameter names are part of its
 * contract (dst, src, count, and stream for COPY_ASYNC). */
#define FAKE_COPY_BLOCKING(name, params, args, stream_expr)                                        \
  CUresult name params {                                                                           \
    return do_copy(#name, (uintptr_t)dst, (uintptr_t)src, count, 0);                               \
  }
#define FAKE_COPY_ASYNC(name, params, args, stream_expr)                                           \
  CUresult name params {                                                                           \
    return do_copy(#name, (uintptr_t)dst, (uintptr_t)src, count, stream);                          \
  }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream stream) {
  return do_copy(__func__, dst, src, count, stream);
}
CUresult cuMemcpyHtoD(unsigned int dst, const void *src, size_t count) {
  return do_copy(__func__, dst, (uintptr_t)src, count, 0);
}

/* ---- launches, syncs and profiler calls: recorded ----
 * Generated from drv_hooks.def like the copies: which fields a call records follows from the
 * function's own type, FAKE_FIELDS(name) being the recorder of that type, called with the
 * function's arguments.  A hooked function of a type not listed here is a compile error until it
 * has a recorder. */
static fake_drv_call launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, CUstream stream,
                            void **params, void **extra) {
  return (fake_drv_call){.func = f,
                         .grid = {gx, gy, gz},
                         .block = {bx, by, bz},
                         .shared = shared,
                         .stream = stream,
                         .params = params,
                         .extra = extra};
}
static fake_drv_call launch_ex(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra) {
  return (fake_drv_call){.config = config, .func = f, .params = params, .extra = extra};
}
static fake_drv_call on_stream(CUstream stream) {
  return (fake_drv_call){.stream = stream};
}
static fake_drv_call on_context(CUcontext ctx) {
  return (fake_drv_call){.ctx = ctx};
}
static fake_drv_call on_event(CUevent event) {
  return (fake_drv_call){.event = event};
}
static fake_drv_call no_args(void) {
  return (fake_drv_call){.count = 0};
}
typedef CUresult launch_t(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, CUstream, void **, void **);
typedef CUresult launch_ex_t(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult on_stream_t(CUstream);
typedef CUresult on_context_t(CUcontext);
typedef CUresult on_event_t(CUevent);
typedef CUresult no_args_t(void);
/* one association a line: */
/* clang-format off */
#define FAKE_FIELDS(name)                                                                          \
  _Generic(&name,                                                                                  \
           launch_t *: launch,                                                                     \
           launch_ex_t *: launch_ex,                                                               \
           on_stream_t *: on_stream,                                                               \
           on_context_t *: on_context,                                                             \
           on_event_t *: on_event,                                                                 \
           no_args_t *: no_args)
/* clang-format on */
static CUresult record_as(const char *name, fake_drv_call *c) {
  stream_alive(name, c->stream);
  strncpy(c->name, name, sizeof c->name - 1);
  return record(c);
}
#define FAKE_LAUNCH(name, params, args, stream_expr)                                               \
  CUresult name params {                                                                           \
    fake_drv_call c = FAKE_FIELDS(name) args;                                                      \
    return record_as(#name, &c);                                                                   \
  }
#define FAKE_HOST_SYNC(name, params, args, stream_expr) FAKE_LAUNCH(name, params, args, stream_expr)
#define FAKE_EVENT_SYNC(name, params, args, stream_expr)                                           \
  FAKE_LAUNCH(name, params, args, stream_expr)
/* sync elision's entry points: below, with what the backend calls */
#define FAKE_EVENT_RECORD(name, params, args, stream_expr)
#define FAKE_STREAM_WAIT(name, params, args, stream_expr)
#define FAKE_STREAM_QUERY(name, params, args, stream_expr)
#define FAKE_EVENT_QUERY(name, params, args, stream_expr)
#define FAKE_IPC_EXPORT(name, params, args, stream_expr)
#define FAKE_MANAGED(name, params, args, stream_expr)
#define FAKE_STREAM_DESTROY(name, params, args, stream_expr)
#define FAKE_EVENT_DESTROY(name, params, args, stream_expr)
/* The profiler calls record which they are: 1 start, 0 stop (the list's stream column). */
#define FAKE_PROFILER(name, params, args, start)                                                   \
  CUresult name params {                                                                           \
    CALL_RECORD(.count = start);                                                                   \
    return e;                                                                                      \
  }
#define FAKE_HOST_MEM(name, params, args, stream_expr) /* below, with what the backend calls */
#define FAKE_PRIMARY_RELEASE(name, params, args, stream_expr) /* below */
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  FAKE_##class(name, params, args, stream)
#include "drv_hooks.def"

/* ---- what the driver backend calls ---- */

CUresult cuInit(unsigned int flags) {
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr) {
  if (getenv("FAKE_POINTER_ATTR_FAIL")) return CUDA_ERROR_INVALID_VALUE;
  unsigned t = type_of(ptr);
  for (unsigned i = 0; i < n; i++) {
    switch (attrs[i]) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data[i] = t;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *(int *)data[i] = t ? 0 : -2;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *(unsigned *)data[i] = 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext *pctx) {
  *pctx = (CUcontext)current;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext ctx) {
  current = (fake_ctx *)ctx;
  return CUDA_SUCCESS;
}
/* A short stack of contexts per thread: push makes ctx current, pop puts the one before back. */
static __thread fake_ctx *pushed[8];
static __thread int npushed;
CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!ctx || npushed == 8) return CUDA_ERROR_INVALID_VALUE;
  pushed[npushed++] = current;
  current = (fake_ctx *)ctx;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  if (!npushed) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = (CUcontext)current;
  current = pushed[--npushed];
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice *device) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current->device;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = (CUcontext)current;
    return CUDA_SUCCESS;
  }
  fake_stream *f = (fake_stream *)s;
  if (f->magic != 0x5eed) return CUDA_ERROR_INVALID_HANDLE;
  stream_alive(__func__, s);
  *pctx = (CUcontext)f->ctx;
  return CUDA_SUCCESS;
}
/* The primary context is counted as the driver counts it: active while retained at least once;
 * the last release frees it (fake_drv_primary_refs says how many references are held). */
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = __atomic_load_n(&primary_active, __ATOMIC_SEQ_CST) > 0;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&primary_active, 1, __ATOMIC_SEQ_CST);
  *pctx = (CUcontext)&primary_ctx;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  int left = __atomic_sub_fetch(&primary_active, 1, __ATOMIC_SEQ_CST);
  if (left < 0) {
    __atomic_store_n(&primary_active, 0, __ATOMIC_SEQ_CST);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (left == 0) __atomic_add_fetch(&primary_gen, 1, __ATOMIC_SEQ_CST); /* destroyed */
  return CUDA_SUCCESS;
}
/* Destroys the context's resources whoever holds it; the references stay. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&primary_gen, 1, __ATOMIC_SEQ_CST);
  return CUDA_SUCCESS;
}
int fake_drv_primary_refs(void) {
  return __atomic_load_n(&primary_active, __ATOMIC_SEQ_CST);
}
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
    fake_stream *f = (fake_stream *)s;
    if (f->magic != 0x5eed) return CUDA_ERROR_INVALID_HANDLE;
    if (f->capturing) *st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  /* slowed down on request: pinwheel's setup makes this call between selecting the device and
   * its first allocation, so a test can release the context in that window */
  const char *delay = getenv("FAKE_CAPTURE_MODE_DELAY_MS");
  if (delay) nanosleep(&(struct timespec){0, atol(delay) * 1000000L}, NULL);
  CUstreamCaptureMode old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags) {
  if (getenv("FAKE_HOSTALLOC_FAIL")) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!(*p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095))) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_region_add(*p, n, CU_MEMORYTYPE_HOST);
  return CUDA_SUCCESS;
}
CUresult cuMemFreeHost(void *p) {
  fake_region_drop(p);
  free(p);
  return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void **p, size_t n) {
  return cuMemHostAlloc(p, n, 0);
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
  if (type_of((uintptr_t)p)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  fake_region_add(p, n, CU_MEMORYTYPE_HOST);
  return CUDA_SUCCESS;
}
/* The flags of pinned memory here (recorded: the tests count who answered). */
CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
  CALL_RECORD(.dst = (uintptr_t)p);
  if (e) return e;
  if (!flags || fake_region_type(p) != CU_MEMORYTYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  *flags = CU_MEMHOSTALLOC_PORTABLE;
  return CUDA_SUCCESS;
}
CUresult cuMemHostUnregister(void *p) {
  if (type_of((uintptr_t)p) != CU_MEMORYTYPE_HOST) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  fake_region_drop(p);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  void *p = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *dptr = (CUdeviceptr)(uintptr_t)p;
  fake_region_add((void *)(uintptr_t)*dptr, n, CU_MEMORYTYPE_DEVICE);
  return CUDA_SUCCESS;
}
/* Streams run their work at the call here, so a wait for a host value blocks the caller until
 * another thread stores it (what deferred staging's copy thread does). */
CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                unsigned int flags) {
  (void)s;
  if (flags != CU_STREAM_WAIT_VALUE_GEQ) return CUDA_ERROR_NOT_SUPPORTED;
  while (__atomic_load_n((const uint32_t *)(uintptr_t)addr, __ATOMIC_ACQUIRE) < value)
    sched_yield();
  return CUDA_SUCCESS;
}
/* Streams run their work at the call: the value is stored now. */
CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                 unsigned int flags) {
  (void)s;
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) return CUDA_ERROR_NOT_SUPPORTED;
  __atomic_store_n((uint32_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags) {
  (void)flags;
  if (fake_region_type(p) != CU_MEMORYTYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  *d = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
  return CUDA_SUCCESS;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  uintptr_t b;
  if (!fake_region_range((const void *)(uintptr_t)p, &b, size)) return CUDA_ERROR_NOT_FOUND;
  *base = (CUdeviceptr)b;
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr dptr) {
  fake_region_drop((void *)(uintptr_t)dptr);
  free((void *)(uintptr_t)dptr);
  return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (current == &primary_ctx && !__atomic_load_n(&primary_active, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "fake libcuda: cuStreamCreate: in a destroyed primary context\n");
    abort(); /* the real driver: undefined */
  }
  fake_stream *f = calloc(1, sizeof *f);
  f->magic = 0x5eed;
  f->ctx = current;
  f->gen = __atomic_load_n(&primary_gen, __ATOMIC_SEQ_CST);
  *s = (CUstream)f;
  return CUDA_SUCCESS;
}
/* An event, made in the primary context's life `gen` (or in another context: magic 0). */
typedef struct fake_event {
  int magic, gen;
} fake_event;
CUresult cuEventCreate(CUevent *e, unsigned int flags) {
  fake_event *f = calloc(1, 16);
  if (current == &primary_ctx) {
    f->magic = 0xe7e7;
    f->gen = __atomic_load_n(&primary_gen, __ATOMIC_SEQ_CST);
  }
  *e = (CUevent)f;
  return CUDA_SUCCESS;
}
/* The real driver may crash when given an event of a destroyed context; this one does, loudly. */
static void event_alive(const char *fn, CUevent e) {
  fake_event *f = (fake_event *)e;
  if (f && f->magic == 0xe7e7 && f->gen != __atomic_load_n(&primary_gen, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "fake libcuda: %s: an event of a destroyed primary context\n", fn);
    abort();
  }
}
/* Events and streams: the work is done at once (copies run at their call), so every event is
 * complete and every stream idle; the calls are counted, not recorded as fake_last. */
static CUresult counted(const char *fn) {
  pthread_mutex_lock(&fake_mu);
  CUresult r = (CUresult)fake_count_call(fn);
  pthread_mutex_unlock(&fake_mu);
  return r;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
  event_alive(__func__, e);
  stream_alive(__func__, s);
  return counted(__func__);
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  event_alive(__func__, e);
  return counted(__func__);
}
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  event_alive(__func__, e);
  stream_alive(__func__, s);
  return counted(__func__);
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  event_alive(__func__, e);
  return counted(__func__);
}
CUresult cuEventQuery(CUevent e) {
  event_alive(__func__, e);
  return counted(__func__);
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  *ms = 1.0f;
  return counted(__func__);
}
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  event_alive(__func__, e);
  return counted(__func__);
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  event_alive(__func__, e);
  return counted(__func__);
}
CUresult cuStreamQuery(CUstream s) {
  return counted(__func__);
}
CUresult cuStreamQuery_ptsz(CUstream s) {
  return counted(__func__);
}
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
  memset(h, 0, sizeof *h);
  return counted(__func__);
}
CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) {
  memset(h, 0, sizeof *h);
  return counted(__func__);
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
  *p = 0;
  return counted(__func__);
}
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                        CUmemAllocationHandleType t) {
  *h = 0;
  return counted(__func__);
}
CUresult cuPointerSetAttribute(const void *v, CUpointer_attribute a, CUdeviceptr p) {
  return counted(__func__);
}
CUresult cuMemPoolExportToShareableHandle(void *h, CUmemoryPool pool, CUmemAllocationHandleType t,
                                          unsigned long long flags) {
  return counted(__func__);
}
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *h,
                                            CUmemAllocationHandleType t, unsigned long long flags) {
  *pool = NULL;
  return counted(__func__);
}
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *d, CUdeviceptr p) {
  memset(d, 0, sizeof *d);
  return counted(__func__);
}
CUresult cuMemPoolImportPointer(CUdeviceptr *p, CUmemoryPool pool, CUmemPoolPtrExportData *d) {
  *p = 0;
  return counted(__func__);
}
CUresult cuMemExportToShareableHandle(void *sh, CUmemGenericAllocationHandle h,
                                      CUmemAllocationHandleType t, unsigned long long flags) {
  return counted(__func__);
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags) {
  void *q = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!q) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_region_add(q, n, CU_MEMORYTYPE_UNIFIED);
  *p = (CUdeviceptr)(uintptr_t)q;
  return counted(__func__);
}
/* Three of the other entry points that enqueue work (drv_hooks.def's PW_DRV_ENQUEUE), for the
 * lookups. */
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  memset((void *)(uintptr_t)p, v, n);
  return counted(__func__);
}
CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg) {
  fn(arg);
  return counted(__func__);
}
CUresult cuGraphLaunch(CUgraphExec g, CUstream s) {
  return counted(__func__);
}
CUresult cuStreamDestroy_v2(CUstream s) {
  return counted(__func__);
}
/* The CUDA < 4.0 ABIs (cuda.h's names are aliases of the _v2 ones: undone by drv_hooks.def). */
CUresult cuStreamDestroy(CUstream s) {
  return counted(__func__);
}
CUresult cuEventDestroy_v2(CUevent e) {
  return counted(__func__);
}
CUresult cuEventDestroy(CUevent e) {
  return counted(__func__);
}
/* Pools and allocations: handles, wherever they are placed (the shim reads the properties). */
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  *pool = (CUmemoryPool)calloc(1, 16);
  return counted(__func__);
}
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  *h = 1;
  return counted(__func__);
}
/* Three more of them: a copy into an array (this fake has none: nothing is copied), an
 * external semaphore's signal, a graphics unmap. */
CUresult cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void *src, size_t n, CUstream s) {
  return counted(__func__);
}
CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *sems,
                                         const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *p,
                                         unsigned int n, CUstream s) {
  return counted(__func__);
}
CUresult cuGraphicsUnmapResources(unsigned int n, CUgraphicsResource *r, CUstream s) {
  return counted(__func__);
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  return counted(__func__);
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  *v = a == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS && getenv("FAKE_PAGEABLE_ACCESS") ? 1 : 0;
  return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- cuGetProcAddress ---- */

/* Thunks: the same functions at other addresses. */
static CUresult thunk_htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  return cuMemcpyHtoDAsync_v2(d, s, n, st);
}
static CUresult thunk_dtoh(void *d, CUdeviceptr s, size_t n) {
  return cuMemcpyDtoH_v2(d, s, n);
}
static CUresult thunk_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, CUstream s, void **p,
                             void **x) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, x);
}

typedef struct proc {
  const char *base;
  int since; /* the CUDA version that introduced this ABI */
  int pt;    /* the per-thread variant */
  void *fn, *thunk;
} proc;

static const proc procs[] = {
    {"cuInit", 2000, 0, (void *)cuInit, NULL},
    {"cuMemcpyHtoD", 2000, 0, (void *)cuMemcpyHtoD, NULL},
    {"cuMemcpyHtoD", 3020, 0, (void *)cuMemcpyHtoD_v2, NULL},
    {"cuMemcpyHtoD", 7000, 1, (void *)cuMemcpyHtoD_v2_ptds, NULL},
    {"cuMemcpyHtoDAsync", 3020, 0, (void *)cuMemcpyHtoDAsync_v2, (void *)thunk_htod_async},
    {"cuMemcpyHtoDAsync", 7000, 1, (void *)cuMemcpyHtoDAsync_v2_ptsz, NULL},
    {"cuMemcpyDtoH", 3020, 0, (void *)cuMemcpyDtoH_v2, (void *)thunk_dtoh},
    {"cuMemcpyDtoH", 7000, 1, (void *)cuMemcpyDtoH_v2_ptds, NULL},
    {"cuMemcpyDtoHAsync", 3020, 0, (void *)cuMemcpyDtoHAsync_v2, NULL},
    {"cuMemcpyDtoHAsync", 7000, 1, (void *)cuMemcpyDtoHAsync_v2_ptsz, NULL},
    {"cuMemcpy", 4000, 0, (void *)cuMemcpy, NULL},
    {"cuMemcpy", 7000, 1, (void *)cuMemcpy_ptds, NULL},
    {"cuMemcpyAsync", 4000, 0, (void *)cuMemcpyAsync, NULL},
    {"cuMemcpyAsync", 7000, 1, (void *)cuMemcpyAsync_ptsz, NULL},
    {"cuLaunchKernel", 4000, 0, (void *)cuLaunchKernel, (void *)thunk_launch},
    {"cuLaunchKernel", 7000, 1, (void *)cuLaunchKernel_ptsz, NULL},
    {"cuLaunchKernelEx", 11060, 0, (void *)cuLaunchKernelEx, NULL},
    {"cuLaunchKernelEx", 11060, 1, (void *)cuLaunchKernelEx_ptsz, NULL},
    {"cuStreamSynchronize", 2000, 0, (void *)cuStreamSynchronize, NULL},
    {"cuStreamSynchronize", 7000, 1, (void *)cuStreamSynchronize_ptsz, NULL},
    {"cuCtxSynchronize", 2000, 0, (void *)cuCtxSynchronize, NULL},
    {"cuCtxSynchronize", 13000, 0, (void *)cuCtxSynchronize_v2, NULL},
    {"cuEventSynchronize", 2000, 0, (void *)cuEventSynchronize, NULL},
    {"cuEventRecord", 2000, 0, (void *)cuEventRecord, NULL},
    {"cuEventRecord", 7000, 1, (void *)cuEventRecord_ptsz, NULL},
    {"cuEventRecordWithFlags", 11010, 0, (void *)cuEventRecordWithFlags, NULL},
    {"cuEventRecordWithFlags", 11010, 1, (void *)cuEventRecordWithFlags_ptsz, NULL},
    {"cuStreamWaitEvent", 3020, 0, (void *)cuStreamWaitEvent, NULL},
    {"cuStreamWaitEvent", 7000, 1, (void *)cuStreamWaitEvent_ptsz, NULL},
    {"cuStreamQuery", 2000, 0, (void *)cuStreamQuery, NULL},
    {"cuStreamQuery", 7000, 1, (void *)cuStreamQuery_ptsz, NULL},
    {"cuEventQuery", 2000, 0, (void *)cuEventQuery, NULL},
    {"cuEventElapsedTime", 12080, 0, (void *)cuEventElapsedTime_v2, NULL},
    {"cuIpcGetMemHandle", 4010, 0, (void *)cuIpcGetMemHandle, NULL},
    {"cuIpcGetEventHandle", 4010, 0, (void *)cuIpcGetEventHandle, NULL},
    {"cuMemExportToShareableHandle", 10020, 0, (void *)cuMemExportToShareableHandle, NULL},
    {"cuIpcOpenMemHandle", 11000, 0, (void *)cuIpcOpenMemHandle_v2, NULL},
    {"cuMemImportFromShareableHandle", 10020, 0, (void *)cuMemImportFromShareableHandle, NULL},
    {"cuPointerSetAttribute", 6000, 0, (void *)cuPointerSetAttribute, NULL},
    {"cuMemPoolExportToShareableHandle", 11020, 0, (void *)cuMemPoolExportToShareableHandle, NULL},
    {"cuMemPoolImportFromShareableHandle", 11020, 0, (void *)cuMemPoolImportFromShareableHandle,
     NULL},
    {"cuMemPoolExportPointer", 11020, 0, (void *)cuMemPoolExportPointer, NULL},
    {"cuMemPoolImportPointer", 11020, 0, (void *)cuMemPoolImportPointer, NULL},
    {"cuMemAllocManaged", 6000, 0, (void *)cuMemAllocManaged, NULL},
    {"cuMemsetD8Async", 3020, 0, (void *)cuMemsetD8Async, NULL},
    {"cuLaunchHostFunc", 10000, 0, (void *)cuLaunchHostFunc, NULL},
    {"cuGraphLaunch", 10000, 0, (void *)cuGraphLaunch, NULL},
    {"cuMemFreeAsync", 11020, 0, (void *)cuMemFreeAsync, NULL},
    {"cuStreamDestroy", 2000, 0, (void *)cuStreamDestroy, NULL},
    {"cuStreamDestroy", 4000, 0, (void *)cuStreamDestroy_v2, NULL},
    {"cuEventDestroy", 2000, 0, (void *)cuEventDestroy, NULL},
    {"cuEventDestroy", 4000, 0, (void *)cuEventDestroy_v2, NULL},
    {"cuMemPoolCreate", 11020, 0, (void *)cuMemPoolCreate, NULL},
    {"cuMemCreate", 10020, 0, (void *)cuMemCreate, NULL},
    {"cuMemcpyHtoAAsync", 3020, 0, (void *)cuMemcpyHtoAAsync_v2, NULL},
    {"cuSignalExternalSemaphoresAsync", 10000, 0, (void *)cuSignalExternalSemaphoresAsync, NULL},
    {"cuGraphicsUnmapResources", 3000, 0, (void *)cuGraphicsUnmapResources, NULL},
    {"cuGetProcAddress", 11030, 0, (void *)cuGetProcAddress, NULL},
    {"cuGetProcAddress", 12000, 0, (void *)cuGetProcAddress_v2, NULL},
    {"cuMemAlloc", 3020, 0, (void *)cuMemAlloc_v2, NULL},
    {"cuMemHostAlloc", 2020, 0, (void *)cuMemHostAlloc, NULL},
    {"cuMemAllocHost", 3020, 0, (void *)cuMemAllocHost_v2, NULL},
    {"cuMemHostRegister", 6050, 0, (void *)cuMemHostRegister_v2, NULL},
    {"cuMemFreeHost", 2000, 0, (void *)cuMemFreeHost, NULL},
    {"cuMemHostUnregister", 4000, 0, (void *)cuMemHostUnregister, NULL},
    {"cuDevicePrimaryCtxRelease", 11000, 0, (void *)cuDevicePrimaryCtxRelease_v2, NULL},
    {"cuDevicePrimaryCtxReset", 11000, 0, (void *)cuDevicePrimaryCtxReset_v2, NULL},
    {"cuMemHostGetFlags", 2030, 0, (void *)cuMemHostGetFlags, NULL},
    {"cuProfilerStart", 4000, 0, (void *)cuProfilerStart, NULL},
    {"cuProfilerStop", 4000, 0, (void *)cuProfilerStop, NULL},
};

/* The newest ABI of `symbol` not newer than version, the per-thread one when asked for. */
static CUresult lookup_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status) {
  if (getenv("FAKE_GPA_DLSYM")) { /* a driver that looks itself up while answering */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *volatile p = h ? dlsym(h, "cuMemcpyHtoD_v2") : NULL;
    (void)p;
    if (h) dlclose(h);
  }
  const proc *best = NULL;
  int found = 0, want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
    const proc *p = &procs[i];
    if (strcmp(p->base, symbol)) continue;
    found = 1;
    if (p->since > version) continue;
    int has_pt = 0;
    for (size_t k = 0; k < sizeof procs / sizeof *procs; k++)
      if (!strcmp(procs[k].base, symbol) && procs[k].pt && procs[k].since <= version) has_pt = 1;
    if (p->pt != (want_pt && has_pt)) continue;
    if (!best || p->since > best->since) best = p;
  }
  if (status)
    *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
              : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!best) {
    *pfn = NULL;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = getenv("FAKE_GPA_THUNKS") && best->thunk ? best->thunk : best->fn;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = lookup_proc(symbol, pfn, cudaVersion, flags, status);
  if (getenv("FAKE_GPA_LOG")) /* which entry points a program asks for, and how */
    fprintf(stderr, "fake cuGetProcAddress_v2 %s %d %llu -> %d\n", symbol, cudaVersion,
            (unsigned long long)flags, (int)r);
  return r;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  return lookup_proc(symbol, pfn, cudaVersion, flags, NULL);
}
