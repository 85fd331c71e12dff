/* runtime.c — the runtime front end: the exported cuda* wrappers generated from hooks.def and the
 * lookup of the real runtime functions.
 *
 * Owns: the wrappers of every entry point hooks.def lists (the pinned memory the program allocates
 * through the runtime is recorded here for app_memcpy.c); pw_real.  The lifecycle (init, mode,
 * engine, fork, exit) is pinwheel.c's, shared with the driver front end (drv.c). Must never: change
 * a real call's arguments or status, print unless asked (errors aside), or exit/abort the host
 * process.
 */
#define _GNU_SOURCE
#include "real.h"
#include "front.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pw_real_table pw_real;

/* ---- looking up the real functions ---- */

void *pw_runtime_lookup(const char *name) {
  void *p = dlvsym(RTLD_NEXT, name, "libcudart.so.13");
  if (!p) p = dlsym(RTLD_NEXT, name);
  if (!p) {
    /* libcudart loaded by dlopen with RTLD_LOCAL is not on RTLD_NEXT's path; find it by name. */
    void *h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      p = dlsym(h, name);
      dlclose(h);
    }
  }
  return p;
}

void pw_resolve_real(void) {
#define PW_RESOLVE(name)                                                                           \
  if (!pw_real.name) *(void **)&pw_real.name = pw_runtime_lookup(#name);
#define PW_HOOK(name, class, params, args, stream) PW_RESOLVE(name)
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) PW_RESOLVE(name)
#define PW_REAL(name, params) PW_RESOLVE(name)
#include "hooks.def"
#undef PW_RESOLVE
  if (pw_log_level() >= PW_LOG_DEBUG) {
#define PW_MISSING(name)                                                                           \
  if (!pw_real.name) pw_log(PW_LOG_DEBUG, "real %s not found", #name);
#define PW_HOOK(name, class, params, args, stream) PW_MISSING(name)
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) PW_MISSING(name)
#define PW_REAL(name, params) PW_MISSING(name)
#include "hooks.def"
#undef PW_MISSING
  }
}

/* The real function, looked up on the spot if init has not run yet on a recursing path. */
#define REAL(name)                                                                                 \
  (pw_real.name ? pw_real.name : (*(void **)&pw_real.name = pw_runtime_lookup(#name), pw_real.name))

cudaError_t pw_runtime_missing(const char *name) {
  pw_log(PW_LOG_ERROR, "%s was called but no CUDA runtime defines it", name);
  return cudaErrorSharedObjectSymbolNotFound;
}

static int dir_of_kind(enum cudaMemcpyKind k) {
  switch (k) {
  case cudaMemcpyHostToDevice:
    return PW_DIR_H2D;
  case cudaMemcpyDeviceToHost:
    return PW_DIR_D2H;
  case cudaMemcpyDeviceToDevice:
    return PW_DIR_D2D;
  case cudaMemcpyHostToHost:
    return PW_DIR_H2H;
  default:
    return -1;
  }
}

/* ---- the wrappers ---- */

#define PW_HOOK(name, class, params, args, stream) PW_EXPORT cudaError_t name params;
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) PW_EXPORT cudaError_t name params;
#include "hooks.def"

#define WRAP_COPY(name, params, args, stream_expr, is_sync)                                        \
  cudaError_t name params {                                                                        \
    PW_FRONT_COPY_BODY(cudaError_t, cudaSuccess, REAL(name), pw_runtime_missing(#name),            \
                       &pw_real_ops, PW_H_##name, #name, args, .dst = dst, .src = src, .n = count, \
                       .dir = dir_of_kind(kind), .stream = (void *)(stream_expr),                  \
                       .sync_api = is_sync)                                                        \
  }
#define WRAP_LAUNCH(name, params, args, stream_expr)                                               \
  cudaError_t name params {                                                                        \
    PW_FRONT_LAUNCH_BODY(cudaError_t, REAL(name), pw_runtime_missing(#name), &pw_real_ops,         \
                         PW_H_##name, args, stream_expr)                                           \
  }
#define WRAP_SYNC(name, params, args, stream_expr)                                                 \
  cudaError_t name params {                                                                        \
    PW_FRONT_SYNC_BODY(cudaError_t, cudaSuccess, REAL(name), pw_runtime_missing(#name),            \
                       &pw_real_ops, PW_H_##name, args, stream_expr)                               \
  }
/* Sync elision's entry points (front.h's bodies), with the runtime's backend. */
#define RT_ELIDE(kind, name, params, args, ...)                                                    \
  cudaError_t name params {                                                                        \
    PW_FRONT_##kind##_BODY(cudaError_t, REAL(name), pw_runtime_missing(#name), &pw_real_ops,       \
                           PW_H_##name, args, __VA_ARGS__)                                         \
  }
#define RT_ELIDE_OK(kind, name, params, args, ...)                                                 \
  cudaError_t name params {                                                                        \
    PW_FRONT_##kind##_BODY(cudaError_t, cudaSuccess, REAL(name), pw_runtime_missing(#name),        \
                           &pw_real_ops, PW_H_##name, args, __VA_ARGS__)                           \
  }

/* The program's pinned host memory (HOST_MEM in hooks.def): the real call, then the region
 * recorded or forgotten when it succeeded, as the driver front end does; not in mode off, nor for
 * the shim's own calls.  The real call runs with pw_depth raised, so the driver call it makes is
 * never recorded a second time. */
#define PW_REGION(start, size) ((const void *)(start), (size_t)(size))
static void host_mem_done(const void *start, size_t size) {
  if (size)
    pw_pinned_add(start, size);
  else
    pw_pinned_remove(start);
}
/* Uploads ahead (PINWHEEL_FILL_AHEAD, fill/fa.h): the runtime's large pinned allocations are
 * pinwheel's, and what the program asks of one is answered as CUDA answers it for its own: 1 when
 * *r holds the answer, 0 when the real call is made. */
static int fa_cudaHostAlloc(cudaError_t *r, void **p, size_t n, unsigned flags) {
  /* write-combined memory, and flags CUDA refuses, stay CUDA's */
  if (!p || (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped)) ||
      pw_fa_host_alloc(&pw_real_ops, p, n, flags))
    return 0;
  return *r = cudaSuccess, 1;
}
static int fa_cudaMallocHost(cudaError_t *r, void **p, size_t n) {
  return fa_cudaHostAlloc(r, p, n, cudaHostAllocDefault);
}
static int fa_cudaHostRegister(cudaError_t *r, void *p, size_t n, unsigned flags) {
  (void)r, (void)p, (void)n, (void)flags; /* CUDA answers "already registered" for it too */
  return 0;
}
static int fa_cudaFreeHost(cudaError_t *r, void *p) {
  return pw_fa_host_free(p) ? (*r = cudaSuccess, 1) : 0;
}
/* Not registered, allocated: CUDA's own answer for memory it never registered (and its last
 * error with it), asked of a byte of pinwheel's that no one registers. */
static char never_registered;
static int fa_cudaHostUnregister(cudaError_t *r, void *p) {
  if (!pw_fa_host_flags(p, NULL)) return 0;
  *r = pw_real.cudaHostUnregister(&never_registered);
  if (*r == cudaSuccess) *r = cudaErrorHostMemoryNotRegistered; /* not expected */
  return 1;
}
static int fa_cudaHostGetFlags(cudaError_t *r, unsigned *flags, void *p) {
  return flags && pw_fa_host_flags(p, flags) ? (*r = cudaSuccess, 1) : 0;
}
#define WRAP_HOST_MEM(name, params, args, region)                                                  \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return pw_runtime_missing(#name);                                             \
    if (mode == PW_MODE_OFF) PW_FRONT_OFF(cudaError_t, pw_real.name, args);                        \
    pw_depth++;                                                                                    \
    cudaError_t r = cudaSuccess;                                                                   \
    if (!(mode == PW_MODE_STAGE && pw_fa_on() && fa_##name(&r, PW_ARGS args)))                     \
      r = pw_real.name args;                                                                       \
    pw_depth--;                                                                                    \
    pw_after_real();                                                                               \
    pw_count_call(PW_H_##name, 0);                                                                 \
    if (r == cudaSuccess) host_mem_done region;                                                    \
    return r;                                                                                      \
  }

/* cudaProfilerStart / Stop (PROFILER in hooks.def): the real call, then the trace's capture
 * window follows it (PINWHEEL_TRACE_CAPTURE=cudaProfilerApi), in every mode. */
#define WRAP_PROFILER(name, params, args, on)                                                      \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return pw_runtime_missing(#name);                                             \
    cudaError_t r = pw_real.name args;                                                             \
    pw_after_real();                                                                               \
    if (mode != PW_MODE_OFF) pw_count_call(PW_H_##name, 0);                                        \
    if (!pw_depth) pw_trace_profiler(on);                                                          \
    return r;                                                                                      \
  }

/* The runtime's driver entry-point lookups: the driver's functions of drv_hooks.def they hand
 * out become the driver front end's wrappers, as cuGetProcAddress's answers do (drv.c), so a
 * program that takes cuMemcpyHtoD from the shared runtime is seen too.  (The runtime asks the
 * driver itself, and its own lookups get the driver's functions: drv.c answers libcudart so.) */
#define WRAP_ENTRY_POINT(name, params, args)                                                       \
  PW_EXPORT cudaError_t name params {                                                              \
    if (!REAL(name)) return pw_runtime_missing(#name);                                             \
    cudaError_t r = pw_real.name args;                                                             \
    if (r == cudaSuccess && funcPtr && *funcPtr)                                                   \
      *funcPtr = pw_drv_offer(*funcPtr, __builtin_return_address(0));                              \
    return r;                                                                                      \
  }
#undef cudaGetDriverEntryPoint
#undef cudaGetDriverEntryPointByVersion
WRAP_ENTRY_POINT(cudaGetDriverEntryPoint,
                 (const char *symbol, void **funcPtr, unsigned long long flags,
                  enum cudaDriverEntryPointQueryResult *driverStatus),
                 (symbol, funcPtr, flags, driverStatus))
WRAP_ENTRY_POINT(cudaGetDriverEntryPoint_ptsz,
                 (const char *symbol, void **funcPtr, unsigned long long flags,
                  enum cudaDriverEntryPointQueryResult *driverStatus),
                 (symbol, funcPtr, flags, driverStatus))
WRAP_ENTRY_POINT(cudaGetDriverEntryPointByVersion,
                 (const char *symbol, void **funcPtr, unsigned int cudaVersion,
                  unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),
                 (symbol, funcPtr, cudaVersion, flags, driverStatus))
WRAP_ENTRY_POINT(cudaGetDriverEntryPointByVersion_ptsz,
                 (const char *symbol, void **funcPtr, unsigned int cudaVersion,
                  unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),
                 (symbol, funcPtr, cudaVersion, flags, driverStatus))

/* cudaDeviceReset destroys the context and everything pinwheel allocated in it (pinned pool, ring,
 * side stream, events, the events of elided syncs): the syncs elided there are waited for, the
 * engine lets its deferred copy-ins finish and its side stream drain, then both forget the device,
 * so the next staged copy sets it up anew. */
#define WRAP_RESET(name, params, args)                                                             \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return pw_runtime_missing(#name);                                             \
    int dev = -1;                                                                                  \
    if (mode == PW_MODE_STAGE && pw_eng && REAL(cudaGetDevice) &&                                  \
        pw_real.cudaGetDevice(&dev) == cudaSuccess) {                                              \
      pw_elide_device_wait(&pw_real_ops, dev); /* the syncs elided there first (elide.h) */        \
      pw_elide_device_forget(dev);                                                                 \
      pw_fa_device_reset(dev); /* then the uploads ahead made there (fa.h) */                      \
      pw_engine_device_reset(pw_eng, dev);                                                         \
    }                                                                                              \
    pw_elide_stream = NULL; /* no sync after it follows a copy (its stream is gone) */             \
    cudaError_t r = pw_real.name args;                                                             \
    pw_after_real();                                                                               \
    if (mode != PW_MODE_OFF) pw_count_call(PW_H_##name, 0);                                        \
    return r;                                                                                      \
  }

/* One wrapper-generating macro per class of hooks.def, named PW_WRAP_<class>. */
#define PW_WRAP_COPY_BLOCKING(name, params, args, stream) WRAP_COPY(name, params, args, stream, 1)
#define PW_WRAP_COPY_ASYNC(name, params, args, stream) WRAP_COPY(name, params, args, stream, 0)
#define PW_WRAP_LAUNCH(name, params, args, stream) WRAP_LAUNCH(name, params, args, stream)
#define PW_WRAP_PROFILER(name, params, args, on) WRAP_PROFILER(name, params, args, on)
#define PW_WRAP_HOST_SYNC(name, params, args, stream) WRAP_SYNC(name, params, args, stream)
#define PW_WRAP_EVENT_SYNC(name, params, args, event)                                              \
  RT_ELIDE_OK(EVENT_SYNC, name, params, args, event)
#define PW_WRAP_EVENT_RECORD(name, params, args, stream)                                           \
  RT_ELIDE_OK(EVENT_RECORD, name, params, args, stream)
#define PW_WRAP_STREAM_WAIT(name, params, args, stream)                                            \
  RT_ELIDE_OK(STREAM_WAIT, name, params, args, stream)
#define PW_WRAP_STREAM_QUERY(name, params, args, stream)                                           \
  RT_ELIDE(STREAM_QUERY, name, params, args, stream)
#define PW_WRAP_EVENT_QUERY(name, params, args, a, b)                                              \
  RT_ELIDE(EVENT_QUERY, name, params, args, a, b)
#define PW_WRAP_IPC_EXPORT(name, params, args, none)                                               \
  cudaError_t name params {                                                                        \
    PW_FRONT_IPC_EXPORT_BODY(cudaError_t, REAL(name), pw_runtime_missing(#name), &pw_real_ops,     \
                             PW_H_##name, args)                                                    \
  }
#define PW_WRAP_STREAM_DESTROY(name, params, args, stream)                                         \
  RT_ELIDE(STREAM_DESTROY, name, params, args, stream)
#define PW_WRAP_EVENT_DESTROY(name, params, args, event)                                           \
  RT_ELIDE(EVENT_DESTROY, name, params, args, event)
/* hooks.def's MANAGED entries: props (a pool's) places the memory on the host */
#define PW_HOST_LOCATED(props)                                                                     \
  ((props) && ((props)->location.type == cudaMemLocationTypeHost ||                                \
               (props)->location.type == cudaMemLocationTypeHostNuma ||                            \
               (props)->location.type == cudaMemLocationTypeHostNumaCurrent))
#define PW_WRAP_MANAGED(name, params, args, made)                                                  \
  cudaError_t name params {                                                                        \
    PW_FRONT_MANAGED_BODY(cudaError_t, cudaSuccess, REAL(name), pw_runtime_missing(#name),         \
                          PW_H_##name, args, made)                                                 \
  }
#define PW_WRAP_HOST_MEM(name, params, args, region) WRAP_HOST_MEM(name, params, args, region)
#define PW_WRAP_DEVICE_RESET(name, params, args, stream) WRAP_RESET(name, params, args)
#define PW_HOOK(name, class, params, args, stream) PW_WRAP_##class(name, params, args, stream)
#include "hooks.def"

/* The other entry points that enqueue work (PW_ENQUEUE: front.h's body), each checked against the
 * header's declaration of its prototype (proto).  cudaMemcpyFromArray(Async), cudaMemcpyToArray
 * (Async) and cudaMemcpyArrayToArray are deprecated, still exported, and still copy. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define PW_ENQUEUE(name, how, el, proto, params, args, stream)                                     \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), __typeof__(&proto)),              \
                 #name " has the prototype of " #proto);                                           \
  cudaError_t name params {                                                                        \
    PW_FRONT_ENQUEUE_BODY(cudaError_t, cudaSuccess, REAL(name), pw_runtime_missing(#name),         \
                          &pw_real_ops, how, el, #name, args, stream)                              \
  }
#include "hooks.def"
#pragma GCC diagnostic pop

/* A __managed__ variable of the program (its registration, made when the program's CUDA code is
 * loaded): memory a kernel may write and the host read, which no allocation call names, so sync
 * elision counts it as managed memory held (pw_mapped_seen).  Then the runtime's own. */
PW_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global) {
  atomic_store_explicit(&pw_mapped_seen, 1, memory_order_release);
  void (*f)(void **, void **, char *, const char *, int, size_t, int, int) = NULL;
  *(void **)&f = pw_runtime_lookup("__cudaRegisterManagedVar");
  if (f)
    f(fatCubinHandle, hostVarPtrAddress, deviceAddress, deviceName, ext, size, constant, global);
}

int pw_cuda_unusable(char *why, size_t n) {
  void *rt = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
  void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  int found = 0;
  pw_depth++;
  if (rt) {
    cudaError_t (*dv)(int *) = NULL, (*rv)(int *) = NULL;
    *(void **)&dv = dlsym(rt, "cudaDriverGetVersion");
    *(void **)&rv = dlsym(rt, "cudaRuntimeGetVersion");
    int d = -1, r = 0;
    if (dv && dv(&d) == cudaSuccess && d == 0) {
      snprintf(why, n, "no NVIDIA driver is installed (the CUDA runtime finds none)");
      found = 1;
    } else if (dv && rv && d > 0 && rv(&r) == cudaSuccess && d < r) {
      snprintf(why, n,
               "the NVIDIA driver supports CUDA %d.%d, older than the program's runtime %d.%d",
               d / 1000, d % 1000 / 10, r / 1000, r % 1000 / 10);
      found = 1;
    }
  }
  if (!found && drv) {            /* the program reached the driver: does it start? */
    int (*init)(unsigned) = NULL; /* CUresult cuInit(unsigned) */
    *(void **)&init = dlsym(drv, "cuInit");
    int rc = init ? init(0) : 0;
    if (rc == 100) /* CUDA_ERROR_NO_DEVICE */
      snprintf(why, n, "no CUDA device is visible (cuInit: no device)"), found = 1;
    else if (rc == 35) /* CUDA_ERROR_INSUFFICIENT_DRIVER */
      snprintf(why, n, "the NVIDIA driver is too old for this CUDA (cuInit)"), found = 1;
    else if (rc)
      snprintf(why, n, "the NVIDIA driver does not start (cuInit: error %d)", rc), found = 1;
  }
  pw_depth--;
  if (rt) dlclose(rt);
  if (drv) dlclose(drv);
  return found;
}

/* 1 when the device can access pageable host memory (cudaDevAttrPageableMemoryAccess: HMM, ATS),
 * asked once per device; in doubt (the runtime cannot say, a device number out of range), 1: a
 * kernel might then write any host memory, and no sync is elided. */
#define PW_ATTR_DEVICES 64
static atomic_int pageable_access[PW_ATTR_DEVICES]; /* 0 not asked, 1 no, 2 yes */
int pw_pageable_access(int device) {
  if (device < 0 || device >= PW_ATTR_DEVICES) return 1;
  int v = atomic_load_explicit(&pageable_access[device], memory_order_relaxed);
  if (v) return v == 2;
  int on = 1;
  if (REAL(cudaDeviceGetAttribute)) {
    pw_depth++;
    if (pw_real.cudaDeviceGetAttribute(&on, cudaDevAttrPageableMemoryAccess, device) !=
        cudaSuccess) {
      on = 1;
      if (REAL(cudaGetLastError)) pw_real.cudaGetLastError(); /* our question, not the program's */
    }
    pw_depth--;
  } else {
    on = pw_drv_pageable_access(device);
  }
  atomic_store_explicit(&pageable_access[device], on ? 2 : 1, memory_order_relaxed);
  return on != 0;
}
