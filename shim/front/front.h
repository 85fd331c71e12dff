/* front.h — what the two front ends share: the runtime's (runtime.c, the cuda* entry points) and
 * the driver's (drv.c, the cu* entry points, dlsym and cuGetProcAddress).  One engine, one set of
 * counters, one mode and one summary per process, whichever front end a call came through: the
 * state is front.c's, set by the top file (pinwheel.c) at init.  It brings CUPTI's headers (and
 * with them cuda.h) through trace.h, for the collector's records of the calls; the runtime's and
 * the driver's own headers each front end brings itself (real.h, drv.h).
 * Must never: add a call or an indirection to the wrappers' bodies below (every hooked call runs
 * them); be included by core/, engine/ or collector/.
 */
#ifndef PW_FRONT_H
#define PW_FRONT_H

#include "elide.h"
#include "engine.h"
#include "fa.h"
#include "pw.h"
#include "trace.h"

#define PW_EXPORT __attribute__((visibility("default")))
#define PW_TLS __thread __attribute__((tls_model("initial-exec")))
#define PW_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- front.c: set by the top file's init (pinwheel.c) ---- */
extern atomic_int pw_ready;
extern int pw_mode;      /* PW_MODE_*, fixed by init */
extern int pw_sync_mode; /* PW_SYNC_* */
extern pw_engine *pw_eng;
extern PW_TLS int pw_depth;          /* > 0 while the shim itself is working on this thread */
extern PW_TLS void *pw_elide_stream; /* a staged H2D copy on this stream was the last call */
extern PW_TLS int pw_elide_device;   /* ... into this device's memory */
extern atomic_int pw_mapped_seen;    /* the program made managed or host-located device memory */
/* pinwheel.c (the top file): init, once, at the first hooked call (idempotent, recursion-safe).
 * The front ends' one call upward: the first hooked call is what starts the library. */
void pw_init(void);
/* runtime.c: the real runtime function called name (libcudart.so.13's, else the next one's, else
 * that of a libcudart.so.13 loaded RTLD_LOCAL), or NULL. */
void *pw_runtime_lookup(const char *name);
/* drv.c: the driver front end's locks, in a forked child. */
void pw_drv_fork_child(void);
/* drv.c: what a lookup answering p (not NULL) to a caller at `caller` hands out: the wrapper when p
 * is a real driver function of drv_hooks.def and the caller is not the shared runtime, else p. */
void *pw_drv_offer(void *p, const void *caller);

/* drv_ops.c: 1 once the engine's state of `device` was made in its primary context and the
 * program released that context (the state went with it): nothing is staged there again. */
int pw_drv_state_gone(int device);

/* runtime.c: 1 and why (n bytes) when CUDA is unusable in this process: no driver, a driver older
 * than the program's runtime, no device.  Asked at exit of a process that intercepted no CUDA
 * call, only of the libraries it loaded itself (nothing is loaded for the question); 0: no
 * reason known (the program may not use CUDA). */
int pw_cuda_unusable(char *why, size_t n);
/* runtime.c: 1 when `device` can access pageable host memory (HMM, ATS), or cannot be asked;
 * drv_ops.c: the same asked of the driver (a program without the shared runtime). */
int pw_pageable_access(int device);
int pw_drv_pageable_access(int ordinal);

/* ---- app_memcpy.c: the program's pinned host memory, and the shim's memcpy and memmove ---- */
#define PW_HOSTCOPY_MIN (1u << 20) /* smaller copies are glibc's, at once */
void pw_pinned_add(const void *p, size_t n);
void pw_pinned_remove(const void *p);
int pw_pinned_contains(const void *p, size_t n);
int pw_pinned_any(void); /* 1 while the program holds pinned host memory (cuDNN's aside) */
/* 1 while this thread is inside cudnnCreate (cudnn.c): the pinned memory recorded meanwhile is
 * the handle's error storage, which pw_pinned_any leaves out. */
int pw_cudnn_creating(void);
void pw_pinned_after_fork_child(void);

/* ---- pjrt.c: JAX's CUDA plugin ---- */
/* What dlsym answers for a library's GetPjrtApi at p: a wrapper for the CUDA plugin's, else p. */
void *pw_pjrt_offer(void *p);
/* cudnn.c: what dlsym on a handle answers for name found at p: for cudnnQueryRuntimeError, a
 * wrapper that waits for the elided syncs and calls p; p when none is left, and from then on
 * pw_cudnn_query_unwrapped() is 1 (cuDNN's error storage counts as the program's); else p. */
void *pw_cudnn_dlsym(const char *name, void *p);
int pw_cudnn_query_unwrapped(void);

/* The mode in force for this call: PW_MODE_OFF when the call must go straight through (init not
 * possible yet, or the shim's own call on this thread). */
static inline int pw_enter(void) {
  if (PW_UNLIKELY(!atomic_load_explicit(&pw_ready, memory_order_acquire))) {
    pw_init();
    if (!atomic_load_explicit(&pw_ready, memory_order_acquire)) return PW_MODE_OFF;
  }
  return pw_depth ? PW_MODE_OFF : pw_mode;
}

static inline void pw_count_call(int id, uint64_t ns) {
  pw_add(&pw_st.hook_calls[id], 1);
  if (ns) pw_add(&pw_st.hook_ns[id], ns);
}

static inline void pw_count_copy(int id, const pw_transfer *c, uint64_t ns) {
  pw_count_call(id, ns);
  int d = c->dir >= 0 && c->dir < PW_DIR_N ? c->dir : PW_DIR_H2H;
  pw_counter3 *k = &pw_st.copies[d][c->src_kind][c->dst_kind];
  pw_add(&k->calls, 1);
  pw_add(&k->bytes, c->n);
  pw_add(&k->ns, ns);
}

static inline void pw_count_sync(int id, uint64_t ns) {
  pw_count_call(id, ns);
  uint64_t cur = pw_get(&pw_st.sync_longest_ns);
  while (ns > cur && !atomic_compare_exchange_weak(&pw_st.sync_longest_ns, &cur, ns)) {
  }
}

/* A real call returned: the trace's exit flush is registered the first time (then it runs before
 * CUDA's own exit handler, registered during CUDA's init). */
static inline void pw_after_real(void) {
  if (PW_UNLIKELY(atomic_load_explicit(&pw_trace_want_atexit, memory_order_relaxed)))
    pw_trace_after_call();
}

/* ---- the wrappers' bodies, one per class, shared by the two front ends ----
 * T is the status type (cudaError_t, CUresult) and OK its success value; real is the real function
 * (looked up on the spot if need be; NULL when there is none, and then the wrapper returns
 * missing); id the hook's PW_H_* id; args the call's arguments.  In mode off (or for the shim's
 * own calls) the real call goes straight through.  The engine's work and the real call of a copy
 * run with pw_depth raised, so whatever they reach (the other front end included) passes
 * straight through.  A copy's pw_transfer fields come last, as designated initializers. */
#define PW_FRONT_OFF(T, f, args)                                                                   \
  do {                                                                                             \
    T r_ = f args;                                                                                 \
    pw_after_real();                                                                               \
    return r_;                                                                                     \
  } while (0)

#define PW_FRONT_COPY_BODY(T, OK, real, missing, ops, id, name, args, ...)                         \
  int mode = pw_enter();                                                                           \
  __typeof__(real) f_ = (real);                                                                    \
  if (!f_) return missing;                                                                         \
  if (PW_UNLIKELY(atomic_load_explicit(&pw_trace_watch, memory_order_relaxed)) && !pw_depth) {     \
    pw_transfer w_ = {__VA_ARGS__};                                                                \
    pw_trace_step_op((uint64_t)w_.n << 3 | (uint64_t)(w_.dir & 7), w_.stream,                      \
                     w_.dir == PW_DIR_H2D);                                                        \
  }                                                                                                \
  if (mode == PW_MODE_OFF) PW_FRONT_OFF(T, f_, args);                                              \
  pw_elide_stream = NULL;                                                                          \
  pw_depth++;                                                                                      \
  pw_transfer c = {__VA_ARGS__};                                                                   \
  pw_elide_fence(ops, c.stream);                                                                   \
  uint64_t t0;                                                                                     \
  int path = pw_front_copy(ops, mode, &c, name, &t0);                                              \
  T r = path >= 0 ? OK : f_ args;                                                                  \
  pw_after_real();                                                                                 \
  pw_count_copy(id, &c, pw_now_ns() - t0);                                                         \
  pw_front_copy_done(mode, r == OK, &c, path);                                                     \
  return r;

/* Launches: counted; in observe mode also timed, with the cheap counter (launches are µs calls).
 * For a step range of the trace, a launch is told by its first argument (the kernel, or the
 * launch configuration) and its call site. */
#define PW_ARG1(a, ...) a
#define PW_ARGS(...) __VA_ARGS__ /* a parenthesised argument list, unwrapped */
#define PW_FRONT_LAUNCH_BODY(T, real, missing, ops, id, args, stream_expr)                         \
  int mode = pw_enter();                                                                           \
  __typeof__(real) f_ = (real);                                                                    \
  if (!f_) return missing;                                                                         \
  if (PW_UNLIKELY(atomic_load_explicit(&pw_trace_watch, memory_order_relaxed)) && !pw_depth)       \
    pw_trace_step_op((uint64_t)(uintptr_t)(PW_ARG1 args)*0x9E3779B97F4A7C15ull ^                   \
                         (uint64_t)(uintptr_t)__builtin_return_address(0),                         \
                     (void *)(stream_expr), 0);                                                    \
  if (mode == PW_MODE_OFF) PW_FRONT_OFF(T, f_, args);                                              \
  pw_elide_stream = NULL;                                                                          \
  pw_elide_fence(ops, (void *)(stream_expr));                                                      \
  if (PW_UNLIKELY(pw_fa_live())) pw_fa_revoke_all(PW_FA_LAUNCH); /* it may write pinned memory */  \
  uint64_t t0 = mode == PW_MODE_OBSERVE ? pw_ticks() : 0;                                          \
  T r = f_ args;                                                                                   \
  pw_after_real();                                                                                 \
  if (mode == PW_MODE_OBSERVE) pw_add(&pw_st.hook_ticks[id], pw_ticks() - t0);                     \
  pw_count_call(id, 0);                                                                            \
  return r;

/* Host syncs: timed.  A stream sync that directly follows a copy pinwheel staged on that stream
 * may be elided (engine/elide.h: it returns at once); a real one that succeeded tells the elision
 * what is done (stream_expr: the stream, NULL for a device sync). */
#define PW_FRONT_SYNC_BODY(T, OK, real, missing, ops, id, args, stream_expr)                       \
  int mode = pw_enter();                                                                           \
  __typeof__(real) f_ = (real);                                                                    \
  if (!f_) return missing;                                                                         \
  if (mode == PW_MODE_OFF) PW_FRONT_OFF(T, f_, args);                                              \
  void *s_ = (void *)(stream_expr);                                                                \
  if (pw_front_sync_elided(ops, id, s_)) return OK;                                                \
  uint64_t before_ = mode == PW_MODE_STAGE ? pw_elide_now() : 0;                                   \
  uint64_t t0 = pw_now_ns();                                                                       \
  T r = f_ args;                                                                                   \
  pw_count_sync(id, pw_now_ns() - t0);                                                             \
  /* cuCtxSynchronize_v2 may name another context than the current one: nothing is assumed */      \
  if (r == OK && mode == PW_MODE_STAGE && id != PW_H_cuCtxSynchronize_v2)                          \
    pw_elide_synced(ops, s_, before_);                                                             \
  return r;

/* ---- sync elision's entry points (hooks.def's EVENT_SYNC to EVENT_DESTROY) ----
 * Outside stage mode, or with PINWHEEL_SYNC=keep, nothing is elided, so they go straight through.
 */
#define PW_FRONT_ENTER(T, real, missing, args)                                                     \
  int mode = pw_enter();                                                                           \
  __typeof__(real) f_ = (real);                                                                    \
  if (!f_) return missing;                                                                         \
  if (mode == PW_MODE_OFF) PW_FRONT_OFF(T, f_, args);
#define PW_FRONT_ELIDE_ENTER(T, real, missing, args)                                               \
  PW_FRONT_ENTER(T, real, missing, args)                                                           \
  if (mode != PW_MODE_STAGE || pw_sync_mode != PW_SYNC_ELIDE) PW_FRONT_OFF(T, f_, args);

/* An event sync: what was elided after the event's record is waited for first; timed. */
#define PW_FRONT_EVENT_SYNC_BODY(T, OK, real, missing, ops, id, args, event_expr)                  \
  PW_FRONT_ELIDE_ENTER(T, real, missing, args)                                                     \
  pw_elide_settle_event(ops, (void *)(event_expr));                                                \
  uint64_t t0 = pw_now_ns();                                                                       \
  T r = f_ args;                                                                                   \
  pw_count_sync(id, pw_now_ns() - t0);                                                             \
  return r;

/* An event recorded on a stream, or a stream made to wait for an event: the stream is fenced
 * first; then the record is noted, or the stream inherits what the event follows (`then`). */
#define PW_FRONT_ENQUEUE_NOTED(T, OK, real, missing, ops, id, args, stream_expr, then)             \
  PW_FRONT_ELIDE_ENTER(T, real, missing, args)                                                     \
  void *s_ = (void *)(stream_expr);                                                                \
  pw_elide_fence(ops, s_);                                                                         \
  T r = f_ args;                                                                                   \
  pw_after_real();                                                                                 \
  pw_count_call(id, 0);                                                                            \
  if (r == OK) then;                                                                               \
  return r;
#define PW_ARG2(a, b, ...) b
#define PW_FRONT_EVENT_RECORD_BODY(T, OK, real, missing, ops, id, args, stream_expr)               \
  PW_FRONT_ENQUEUE_NOTED(T, OK, real, missing, ops, id, args, stream_expr,                         \
                         pw_elide_recorded(ops, (void *)(PW_ARG1 args), s_))
#define PW_FRONT_STREAM_WAIT_BODY(T, OK, real, missing, ops, id, args, stream_expr)                \
  PW_FRONT_ENQUEUE_NOTED(T, OK, real, missing, ops, id, args, stream_expr,                         \
                         pw_elide_waits(ops, s_, (void *)(PW_ARG2 args)))

/* Questions: what an elided sync would change the answer of is waited for first. */
#define PW_FRONT_STREAM_QUERY_BODY(T, real, missing, ops, id, args, stream_expr)                   \
  PW_FRONT_ELIDE_ENTER(T, real, missing, args)                                                     \
  pw_elide_settle_stream(ops, (void *)(stream_expr));                                              \
  pw_count_call(id, 0);                                                                            \
  return f_ args;
/* hooks.def's stream slot of an EVENT_QUERY: its two events (the same one twice for a query),
 * which reach the class's wrapper as two arguments. */
#define PW_EVENTS(a, b) (void *)(a), (void *)(b)
#define PW_FRONT_EVENT_QUERY_BODY(T, real, missing, ops, id, args, a, b)                           \
  PW_FRONT_ELIDE_ENTER(T, real, missing, args)                                                     \
  pw_elide_settle_event(ops, a);                                                                   \
  if ((b) != (a)) pw_elide_settle_event(ops, b);                                                   \
  pw_count_call(id, 0);                                                                            \
  return f_ args;

/* An export to other processes: every elided sync is waited for, and none is elided again.  In
 * any mode but off (the export is for good, whatever mode comes later: there is none). */
#define PW_FRONT_IPC_EXPORT_BODY(T, real, missing, ops, id, args)                                  \
  PW_FRONT_ENTER(T, real, missing, args)                                                           \
  pw_elide_stop(ops);                                                                              \
  pw_count_call(id, 0);                                                                            \
  return f_ args;

/* A stream destroyed: sync elision forgets its handle first (a stream made later may get it). */
#define PW_FRONT_STREAM_DESTROY_BODY(T, real, missing, ops, id, args, stream_expr)                 \
  PW_FRONT_ENTER(T, real, missing, args)                                                           \
  pw_elide_forget_stream((void *)(stream_expr));                                                   \
  pw_count_call(id, 0);                                                                            \
  return f_ args;

/* An event destroyed: sync elision forgets its handle once it is gone (an event made later may
 * get it; one made meanwhile by another thread and forgotten too is unknown, which is safe). */
#define PW_FRONT_EVENT_DESTROY_BODY(T, real, missing, ops, id, args, event_expr)                   \
  PW_FRONT_ENTER(T, real, missing, args)                                                           \
  T r = f_ args;                                                                                   \
  pw_after_real();                                                                                 \
  pw_elide_forget_event((void *)(event_expr));                                                     \
  pw_count_call(id, 0);                                                                            \
  return r;

/* Managed memory, or a pool or allocation located on the host (made: the call's expression):
 * from now on a kernel may write memory the host reads, so no sync is elided, for good (a pool
 * destroyed with allocations out, an allocation released while mapped, lives on). */
#define PW_FRONT_MANAGED_BODY(T, OK, real, missing, id, args, made)                                \
  PW_FRONT_ENTER(T, real, missing, args)                                                           \
  T r = f_ args;                                                                                   \
  pw_after_real();                                                                                 \
  pw_count_call(id, 0);                                                                            \
  if (r == OK && (made)) atomic_store_explicit(&pw_mapped_seen, 1, memory_order_release);          \
  return r;

/* ---- the other entry points that enqueue work (hooks.def's PW_ENQUEUE, drv_hooks.def's
 * PW_DRV_ENQUEUE): what fill-ahead (how) and sync elision (el) do around the real call ----
 * Never counted, and nothing but the relaxed loads below in front of the real call when both are
 * off.  The real function may be looked up on the spot (no real one: the library's own "symbol
 * not found"). */
/* TAINT: the program may order a write of its pinned memory after a fill from the GPU's side:
 * every upload is given up, for good.  A call before init first runs it (as every hooked entry
 * point does), so that fill-ahead, once on, knows of it.  Fill-ahead is on only in stage mode:
 * pw_enter's OFF is init recursing, or the shim's own call. */
static inline void pw_enqueue_fa_TAINT(const char *name) {
  if (pw_enter() != PW_MODE_OFF && PW_UNLIKELY(pw_fa_on())) pw_fa_taint(name);
}
/* REVOKE: the call may write the program's pinned memory: every live upload is given up (none
 * live: one relaxed load). */
static inline void pw_enqueue_fa_REVOKE(const char *name) {
  (void)name;
  if (PW_UNLIKELY(pw_fa_live()) && !pw_depth) pw_fa_revoke_all(PW_FA_OTHER_WRITE);
}
/* NOTHING: it writes only device memory (listed for sync elision). */
static inline void pw_enqueue_fa_NOTHING(const char *name) {
  (void)name;
}
/* FENCE, HOSTW: work on another stream than an elided sync's waits for it (no live elided sync:
 * one load).  HOSTW: host functions and graphs can write host memory, a semaphore's signal be
 * seen from the host: the stream's next sync is real. */
#define PW_ENQUEUE_EL_BEFORE_FENCE(ops, s)                                                         \
  if (!pw_depth) pw_elide_fence(ops, (void *)(s))
#define PW_ENQUEUE_EL_BEFORE_HOSTW(ops, s) PW_ENQUEUE_EL_BEFORE_FENCE(ops, s)
#define PW_ENQUEUE_EL_BEFORE_NONE(ops, s)
#define PW_ENQUEUE_EL_AFTER_HOSTW(ops, s, ok)                                                      \
  if ((ok) && !pw_depth && pw_mode == PW_MODE_STAGE && pw_sync_mode == PW_SYNC_ELIDE)              \
  pw_elide_host_write(ops, (void *)(s))
#define PW_ENQUEUE_EL_AFTER_FENCE(ops, s, ok)
#define PW_ENQUEUE_EL_AFTER_NONE(ops, s, ok)
#define PW_FRONT_ENQUEUE_BODY(T, OK, real, missing, ops, how, el, name, args, stream_expr)         \
  pw_enqueue_fa_##how(name);                                                                       \
  __typeof__(real) f_ = (real);                                                                    \
  if (!f_) return missing;                                                                         \
  PW_ENQUEUE_EL_BEFORE_##el(ops, stream_expr);                                                     \
  T r_ = f_ args;                                                                                  \
  PW_ENQUEUE_EL_AFTER_##el(ops, stream_expr, r_ == OK);                                            \
  return r_;

/* The front ends' common path for a copy (pw_depth already raised): describe it with the front
 * end's backend, stage it in stage mode.  Returns PW_PATH_* when staged, PW_PATH_N when made from
 * an upload ahead of it (fill/fa.h; either way the caller reports success), else < 0 (the caller
 * makes the real call).  *t0 is set to the start of the call's timing. */
static inline int pw_front_copy(const pw_ops *ops, int mode, pw_transfer *c, const char *name,
                                uint64_t *t0) {
  pw_describe(ops, c);
  *t0 = pw_now_ns();
  int path = -1;
  if (mode == PW_MODE_STAGE && pw_eng) { /* the calls it makes are marked in a trace */
    uint64_t app = pw_trace_own_begin();
    path = pw_engine_copy(pw_eng, c);
    /* not staged: made from an upload ahead of it, or what it may write is no longer one */
    if (path < 0 && PW_UNLIKELY(pw_fa_live()) && pw_fa_copy(c) == 0) path = PW_PATH_N;
    pw_trace_own_end(path >= 0 ? app : 0, name);
  }
  return path;
}

/* After a copy's real call or staging (path: pw_front_copy's answer): the bytes of a pageable
 * source were taken before the return (staged, or a real pageable copy, which CUDA stages before
 * returning), so a sync of its stream right after it may be elided (engine/elide.h).  Not after a
 * copy that met a capturing stream, an error or a query that failed: its sync stays the program's.
 */
static inline void pw_front_copy_done(int mode, int ok, const pw_transfer *c, int path) {
  pw_depth--;
  if (pw_sync_mode == PW_SYNC_ELIDE && ok && mode == PW_MODE_STAGE && c->dir == PW_DIR_H2D &&
      c->src_kind == PW_MEM_PAGEABLE && c->dst_kind == PW_MEM_DEVICE &&
      (path >= 0 || path == -1 - PW_FB_TOO_SMALL || path == -1 - PW_FB_NO_STATE)) {
    pw_elide_stream = c->stream;
    pw_elide_device = c->dst_dev;
  }
}

/* Why kernels may write host memory, which makes every sync real: PW_KEEP_MAPPED while the
 * program holds pinned or mapped host memory, or once it made managed memory or a pool or
 * allocation located on the host, PW_KEEP_PAGEABLE_ACCESS where the device
 * reaches pageable memory; -1 when neither. */
static inline int pw_front_kernels_write_host(int device) {
  if (pw_pinned_any() || atomic_load_explicit(&pw_mapped_seen, memory_order_acquire))
    return PW_KEEP_MAPPED;
  return pw_pageable_access(device) ? PW_KEEP_PAGEABLE_ACCESS : -1;
}

/* A host sync on stream s (NULL: the device) right after a staged copy on s: 1 when it returns at
 * once (counted as elided), 0 when the real sync is to be made. */
static inline int pw_front_sync_elided(const pw_ops *ops, int id, void *s) {
  void *last = pw_elide_stream;
  pw_elide_stream = NULL;
  if (!s || s != last) return 0;
  if (!pw_elide_sync(ops, s, pw_elide_device, pw_front_kernels_write_host(pw_elide_device)))
    return 0;
  pw_count_call(id, 0);
  return 1;
}

#endif
