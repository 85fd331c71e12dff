/* fake_cudart.c — a small stand-in for libcudart.so.13, for the interposition tests.
 *
 * It defines every function of shim/front/hooks.def with the real library's version node, executes
 * copies at once (every "device" is host memory, so any stream order is trivially respected),
 * classifies pointers from its own allocation table, and records each call so the test program
 * can check that the arguments arrived intact and the status came back unchanged.
 */
#define _GNU_SOURCE
#include "fake_api.h"
#include "fake_common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The hooked entry points' prototypes come from the shim's one list (hooks.def), so this fake
 * cannot drift from it: a definition below whose types differ is a compile error, and a missing
 * one a link error (fake_hooked at the end takes the address of every one). */
#define PW_HOOK(name, class, params, args, stream) cudaError_t name params;
#define PW_REAL(name, params) cudaError_t name params;
#include "hooks.def"

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
  return e && *(int *)e != generation;
}

/* Record a call; returns the error to report (one injected by fake_fail_next, else success). */
static cudaError_t record(const fake_call *c) {
  pthread_mutex_lock(&fake_mu);
  last = *c;
  cudaError_t e = (cudaError_t)fake_count_call(c->name);
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
#define FAKE_COPY_BLOCKING(name, params)                                                           \
  cudaError_t name params {                                                                        \
    return do_copy(#name, dst, src, count, kind, 0);                                               \
  }
#define FAKE_COPY_ASYNC(name, params)                                                              \
  cudaError_t name params {                                                                        \
    return do_copy(#name, dst, src, count, kind, stream);                                          \
  }
#define FAKE_LAUNCH(name, params)       /* below: each records its own arguments */
#define FAKE_HOST_SYNC(name, params)    /* below */
#define FAKE_DEVICE_RESET(name, params) /* below */
#define PW_HOOK(name, class, params, args, stream) FAKE_##class(name, params)
#include "hooks.def"

#define LAUNCH6(fn, T)                                                                             \
  cudaError_t fn(T func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t stream);            \
  cudaError_t fn(T func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t stream) {           \
    CALL_RECORD(.func = (const void *)func, .grid = g, .block = b, .args = args, .shared = shm,    \
                .stream = stream);                                                                 \
    return e;                                                                                      \
  }
LAUNCH6(cudaLaunchKernel, const void *)
LAUNCH6(cudaLaunchKernel_ptsz, const void *)
LAUNCH6(__cudaLaunchKernel, cudaKernel_t)
LAUNCH6(__cudaLaunchKernel_ptsz, cudaKernel_t)

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
  CALL_RECORD(.config = config, .func = func, .args = args);
  return e;
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                     void **args) {
  CALL_RECORD(.config = config, .func = func, .args = args);
  return e;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CALL_RECORD(.stream = stream);
  if (e == cudaSuccess && stale_stream(stream)) e = last_error = cudaErrorContextIsDestroyed;
  return e;
}
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  CALL_RECORD(.stream = stream);
  return e;
}
cudaError_t cudaDeviceSynchronize(void) {
  CALL_RECORD(.count = 0);
  return e;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CALL_RECORD(.event = event);
  if (e == cudaSuccess && stale_event(event)) e = last_error = cudaErrorContextIsDestroyed;
  return e;
}
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
  enum cudaStreamCaptureMode old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return cudaSuccess;
}
cudaError_t cudaPeekAtLastError(void) {
  return last_error;
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
  if (getenv("FAKE_HOSTALLOC_FAIL")) return last_error = cudaErrorMemoryAllocation;
  const char *slow = getenv("FAKE_HOSTALLOC_SLEEP_MS"); /* pinning large pools takes a while */
  if (slow) {
    struct timespec ts = {atoi(slow) / 1000, (atoi(slow) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (!(*p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095))) return cudaErrorMemoryAllocation;
  fake_region_add(*p, n, cudaMemoryTypeHost);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
  fake_region_drop(p);
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n) {
  const char *lim = getenv("FAKE_MALLOC_FAIL_ABOVE");
  if (lim && n > strtoull(lim, NULL, 0)) return last_error = cudaErrorMemoryAllocation;
  if (!(*p = aligned_alloc(256, (n + 255) & ~(size_t)255))) return cudaErrorMemoryAllocation;
  fake_region_add(*p, n, cudaMemoryTypeDevice);
  return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
  fake_region_drop(p);
  free(p);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  fake_stream *f = calloc(1, sizeof *f);
  f->magic = 0x5eed;
  f->gen = generation;
  *s = (cudaStream_t)f;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  *e = (cudaEvent_t)calloc(1, 16);
  *(int *)*e = generation;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  return stale_event(e) || stale_stream(s) ? (last_error = cudaErrorContextIsDestroyed)
                                           : cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  return stale_event(e) ? (last_error = cudaErrorContextIsDestroyed) : cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  return stale_event(e) || stale_stream(s) ? (last_error = cudaErrorContextIsDestroyed)
                                           : cudaSuccess;
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

/* cudaGetDriverEntryPoint is deprecated in CUDA 13, still exported, and wrapped. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Every function of hooks.def is defined above (the link fails otherwise). */
const void *const fake_hooked[] = {
#define PW_HOOK(name, class, params, args, stream) (const void *)name,
#define PW_REAL(name, params) (const void *)name,
#include "hooks.def"
};
