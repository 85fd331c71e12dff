/* shim.c — the runtime front end: the exported cuda* wrappers generated from hooks.def and the
 * lookup of the real runtime functions.
 *
 * Owns: the wrappers of hooks.def; pw_real.  The lifecycle (init, mode, engine, fork, exit) is
 * core.c's, shared with the driver front end (drv.c).
 * Must never: change a real call's arguments or status, print unless asked (errors aside), or
 * exit/abort the host process.
 */
#define _GNU_SOURCE
#include "real.h"
#include "front.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

pw_real_table pw_real;

/* ---- looking up the real functions ---- */

static void *lookup(const char *name) {
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
#define PW_HOOK(name, class, params, args, stream)                                                 \
  if (!pw_real.name) *(void **)&pw_real.name = lookup(#name);
#define PW_REAL(name, params)                                                                      \
  if (!pw_real.name) *(void **)&pw_real.name = lookup(#name);
#include "hooks.def"
  if (pw_log_level() >= PW_LOG_DEBUG) {
#define PW_HOOK(name, class, params, args, stream)                                                 \
  if (!pw_real.name) pw_log(PW_LOG_DEBUG, "real %s not found", #name);
#define PW_REAL(name, params)                                                                      \
  if (!pw_real.name) pw_log(PW_LOG_DEBUG, "real %s not found", #name);
#include "hooks.def"
  }
}

/* The real function, looked up on the spot if init has not run yet on a recursing path. */
#define REAL(name)                                                                                 \
  (pw_real.name ? pw_real.name : (*(void **)&pw_real.name = lookup(#name), pw_real.name))

static cudaError_t missing(const char *name) {
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

/* A real call's status, after the trace's exit-flush registration (front.h). */
static inline cudaError_t pw_trace_after(cudaError_t r) {
  pw_after_real();
  return r;
}

#define PW_HOOK(name, class, params, args, stream) PW_EXPORT cudaError_t name params;
#include "hooks.def"

/* The engine's work and the real call of a copy run with pw_depth raised, so whatever they reach
 * (the driver front end included) passes straight through. */
#define WRAP_COPY(name, params, args, stream_expr, is_sync)                                        \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return missing(#name);                                                        \
    if (mode == PW_MODE_OFF) return pw_trace_after(pw_real.name args);                             \
    pw_elide_stream = NULL;                                                                        \
    pw_depth++;                                                                                    \
    pw_copy c = {.dst = dst,                                                                       \
                 .src = src,                                                                       \
                 .n = count,                                                                       \
                 .dir = dir_of_kind(kind),                                                         \
                 .stream = (void *)(stream_expr),                                                  \
                 .sync_api = is_sync};                                                             \
    uint64_t t0;                                                                                   \
    int path = pw_front_copy(&pw_real_ops, mode, &c, #name, &t0);                                  \
    cudaError_t r = pw_trace_after(path >= 0 ? cudaSuccess : pw_real.name args);                   \
    pw_count_copy(PW_H_##name, &c, pw_now_ns() - t0);                                              \
    pw_front_copy_done(mode, r == cudaSuccess, &c);                                                \
    return r;                                                                                      \
  }

#define WRAP_LAUNCH(name, params, args)                                                            \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return missing(#name);                                                        \
    if (mode == PW_MODE_OFF) return pw_trace_after(pw_real.name args);                             \
    pw_elide_stream = NULL;                                                                        \
    if (mode == PW_MODE_OBSERVE) { /* timed with the cheap counter: launches are µs calls */      \
      uint64_t t0 = pw_ticks();                                                                    \
      cudaError_t r = pw_trace_after(pw_real.name args);                                           \
      pw_add(&pw_st.hook_ticks[PW_H_##name], pw_ticks() - t0);                                     \
      pw_count_call(PW_H_##name, 0);                                                               \
      return r;                                                                                    \
    }                                                                                              \
    pw_count_call(PW_H_##name, 0);                                                                 \
    return pw_trace_after(pw_real.name args);                                                      \
  }

#define WRAP_SYNC(name, params, args, stream_expr)                                                 \
  cudaError_t name params {                                                                        \
    int mode = pw_enter();                                                                         \
    if (!REAL(name)) return missing(#name);                                                        \
    if (mode == PW_MODE_OFF) return pw_trace_after(pw_real.name args);                             \
    if (pw_front_sync_elided(PW_H_##name, (void *)(stream_expr))) return cudaSuccess;              \
    uint64_t t0 = pw_now_ns();                                                                     \
    cudaError_t r = pw_real.name args;                                                             \
    pw_count_sync(PW_H_##name, pw_now_ns() - t0);                                                  \
    return r;                                                                                      \
  }

/* One wrapper-generating macro per class of hooks.def, named PW_WRAP_<class>. */
#define PW_WRAP_COPY_BLOCKING(name, params, args, stream) WRAP_COPY(name, params, args, stream, 1)
#define PW_WRAP_COPY_ASYNC(name, params, args, stream) WRAP_COPY(name, params, args, stream, 0)
#define PW_WRAP_LAUNCH(name, params, args, stream) WRAP_LAUNCH(name, params, args)
#define PW_WRAP_HOST_SYNC(name, params, args, stream) WRAP_SYNC(name, params, args, stream)
#define PW_HOOK(name, class, params, args, stream) PW_WRAP_##class(name, params, args, stream)
#include "hooks.def"
