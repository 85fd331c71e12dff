/* cudnn.c — cuDNN's per-handle error storage: pinned memory that keeps no sync.
 *
 * Owns: the wrappers of cudnnCreate (the pinned memory recorded while it runs is marked cuDNN's,
 * app_memcpy.c) and cudnnQueryRuntimeError (every elided sync in flight is waited for first).
 * Must never: change either call's arguments or status, print unless asked (errors aside), or
 * make a CUDA call other than sync elision's waits.
 * Why: cudnnCreate allocates a few bytes of pinned host memory for each handle (cuDNN 9: 4 bytes
 * with cuMemHostAlloc), the handle's remote error storage, which cuDNN's kernels write and the
 * program reads only through cudnnQueryRuntimeError; it never learns its address.  Counted as the
 * program's pinned memory, it kept every sync of every program that uses cuDNN (reason mapped).
 * Waiting in cudnnQueryRuntimeError keeps what that call reads as after a real sync.  In a trace,
 * the calls cudnnCreate makes are marked (args.pinwheel_cudnn), for the report's what-if.
 */
#define _GNU_SOURCE
#include "front.h"
#include "drv.h"
#include "real.h"
#include "trace.h"

#include <dlfcn.h>
#include <stdatomic.h>

typedef int cudnn_status;                         /* cudnnStatus_t: an enum, passed as an int */
enum { CUDNN_NOT_INITIALIZED = 1001 };            /* cuDNN 9's CUDNN_STATUS_NOT_INITIALIZED */
typedef cudnn_status (*create_fn)(void **handle); /* cudnnCreate(cudnnHandle_t *) */
typedef cudnn_status (*query_fn)(void *handle, cudnn_status *rstatus, int mode, void *tag);

static __thread int creating;
int pw_cudnn_creating(void) {
  return creating > 0;
}

/* The real definition of name: after this library in the global scope; else in the scope of the
 * library that called (a library loaded with RTLD_LOCAL that links cuDNN); else cuDNN by name. */
static void *real_of(const char *name, void *self, const void *caller) {
  void *p = dlsym(RTLD_NEXT, name);
  Dl_info di;
  if (!p && caller && dladdr(caller, &di) && di.dli_fname) {
    void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      p = dlsym(h, name);
      dlclose(h);
    }
  }
  static const char *const libs[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
  for (unsigned i = 0; (!p || p == self) && i < sizeof libs / sizeof *libs; i++) {
    void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    p = h ? dlsym(h, name) : NULL;
    if (h) dlclose(h);
  }
  if (p == self) p = NULL;
  if (!p) pw_log(PW_LOG_ERROR, "%s was called but no cuDNN defines it", name);
  return p;
}

static _Atomic(create_fn) real_create;
static _Atomic(query_fn) real_query;

PW_EXPORT cudnn_status cudnnCreate(void **handle) {
  create_fn f = atomic_load_explicit(&real_create, memory_order_acquire);
  if (!f) {
    f = (create_fn)real_of("cudnnCreate", (void *)cudnnCreate, __builtin_return_address(0));
    if (!f) return CUDNN_NOT_INITIALIZED;
    atomic_store_explicit(&real_create, f, memory_order_release);
  }
  creating++;
  int marked = pw_trace_cudnn_begin(); /* in a trace, its calls say they are cuDNN's */
  cudnn_status r = f(handle);
  pw_trace_cudnn_end(marked);
  creating--;
  return r;
}

PW_EXPORT cudnn_status cudnnQueryRuntimeError(void *handle, cudnn_status *rstatus, int mode,
                                              void *tag) {
  query_fn f = atomic_load_explicit(&real_query, memory_order_acquire);
  if (!f) {
    f = (query_fn)real_of("cudnnQueryRuntimeError", (void *)cudnnQueryRuntimeError,
                          __builtin_return_address(0));
    if (!f) return CUDNN_NOT_INITIALIZED;
    atomic_store_explicit(&real_query, f, memory_order_release);
  }
  /* nothing elided in flight: one load (pw_elide_live), as for every other question */
  if (!pw_depth) pw_elide_settle_all(pw_real.cudaEventSynchronize ? &pw_real_ops : &pw_drv_ops);
  return f(handle, rstatus, mode, tag);
}
