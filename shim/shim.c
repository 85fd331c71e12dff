/* shim.c — the exported wrappers of libpinwheel, the lookup of the real functions, init, fork and
 * exit handling.
 *
 * Owns: the wrappers generated from hooks.def; pw_real; the mode; the per-thread guard and
 * sync-elision state; the exit summary.
 * Must never: do anything before the first hooked call (the constructor is empty; the destructor
 * only reads PINWHEEL_STATS), change a real call's arguments or status, print unless asked
 * (errors aside), or exit/abort the host process.
 */
#define _GNU_SOURCE
#include "real.h"
#include "trace.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PW_EXPORT __attribute__((visibility("default")))
#define PW_TLS __thread __attribute__((tls_model("initial-exec")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

pw_real_table pw_real;

static atomic_int pw_ready;
static pthread_once_t pw_once = PTHREAD_ONCE_INIT;
static int pw_mode = PW_MODE_OBSERVE;
static int pw_sync_mode = PW_SYNC_KEEP;
static pw_engine *pw_eng;
static atomic_int pw_forked;
static PW_TLS int pw_depth;          /* > 0 while the shim itself is working on this thread */
static PW_TLS int pw_in_init;        /* init running on this thread: fall through */
static PW_TLS void *pw_elide_stream; /* staged H2D copies on this stream were the last calls */

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

/* ---- init, fork ---- */

static void after_fork_child(void) {
  atomic_store(&pw_forked, 1);
  pw_stats_reset();
  pw_ticks_anchor();
  pw_pool_after_fork_child();
  pw_engine_after_fork_child(pw_eng);
  pw_elide_stream = NULL;
}

static void init_once(void) {
  pw_ticks_anchor();
  pw_options_init();
  pw_resolve_real();
  pw_mode = (int)pw_option_get(PW_OPT_MODE);
  pw_trace_start(); /* PINWHEEL_TRACE, in every mode: the first CUDA call is now */
  pw_sync_mode = (int)pw_option_get(PW_OPT_SYNC);
  if (pw_option_get(PW_OPT_HELP)) pw_options_print(2);
  if (pw_mode == PW_MODE_STAGE) {
    long long threads = pw_option_get(PW_OPT_THREADS);
    if (threads <= 0) threads = pw_default_threads();
    if (threads > 64) threads = 64;
    atomic_store(&pw_st.threads, (uint64_t)threads);
    pw_engine_config cfg = {
        .mode = pw_mode,
        .min_bytes = (size_t)pw_option_get(PW_OPT_MIN_BYTES),
        .max_bytes = (size_t)pw_option_get(PW_OPT_MAX_BYTES),
        .host_pool = (size_t)pw_option_get(PW_OPT_HOST_POOL),
        .device_ring = (size_t)pw_option_get(PW_OPT_DEVICE_RING),
        .chunk = (size_t)pw_option_get(PW_OPT_CHUNK),
        .threads = (int)threads,
        .d2h = (int)pw_option_get(PW_OPT_D2H),
        .strict = (int)pw_option_get(PW_OPT_STRICT),
        .nt = (int)pw_option_get(PW_OPT_NT_STORES),
        .d2h_fresh = (int)pw_option_get(PW_OPT_D2H_FRESH),
        .background_setup = pw_option_get(PW_OPT_SETUP) == PW_SETUP_BACKGROUND,
    };
    pw_eng = pw_engine_create(&pw_real_ops, &cfg);
    if (!pw_eng) {
      pw_log(PW_LOG_ERROR, "cannot allocate the staging engine; observing only");
      pw_mode = PW_MODE_OBSERVE;
    }
  }
  pthread_atfork(NULL, NULL, after_fork_child);
  pw_log(PW_LOG_INFO, "pinwheel %s active, mode %d", PW_VERSION, pw_mode);
  atomic_store_explicit(&pw_ready, 1, memory_order_release);
}

static void pw_init(void) {
  if (pw_in_init) return; /* If init ends up recursing, pthread_once would deadlock. */
  pw_in_init = 1;
  pthread_once(&pw_once, init_once);
  pw_in_init = 0;
}

/* The real function, looked up on the spot if init has not run yet on a recursing path. */
#define REAL(name)                                                                                 \
  (pw_real.name ? pw_real.name : (*(void **)&pw_real.name = lookup(#name), pw_real.name))

static cudaError_t missing(const char *name) {
  pw_log(PW_LOG_ERROR, "%s was called but no CUDA runtime defines it", name);
  return cudaErrorSharedObjectSymbolNotFound;
}

/* Returns the mode in force for this call: PW_MODE_OFF when the call must go straight through. */
static inline int enter(void) {
  if (UNLIKELY(!atomic_load_explicit(&pw_ready, memory_order_acquire))) {
    pw_init();
    if (!atomic_load_explicit(&pw_ready, memory_order_acquire)) return PW_MODE_OFF;
  }
  return pw_depth ? PW_MODE_OFF : pw_mode;
}

/* ---- accounting ---- */

static inline void count_call(int id, uint64_t ns) {
  pw_add(&pw_st.hook_calls[id], 1);
  if (ns) pw_add(&pw_st.hook_ns[id], ns);
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

static void count_copy(int id, const pw_copy *c, uint64_t ns) {
  count_call(id, ns);
  int d = c->dir >= 0 && c->dir < PW_DIR_N ? c->dir : PW_DIR_H2H;
  pw_counter3 *k = &pw_st.copies[d][c->src_kind][c->dst_kind];
  pw_add(&k->calls, 1);
  pw_add(&k->bytes, c->n);
  pw_add(&k->ns, ns);
}

static void count_sync(int id, uint64_t ns) {
  count_call(id, ns);
  uint64_t cur = pw_get(&pw_st.sync_longest_ns);
  while (ns > cur && !atomic_compare_exchange_weak(&pw_st.sync_longest_ns, &cur, ns)) {
  }
}

/* ---- the wrappers ---- */

/* A real call's status, after which the trace's exit flush is registered the first time (then
 * it runs before the CUDA runtime's own exit handler, registered during the runtime's init). */
static inline cudaError_t pw_trace_after(cudaError_t r) {
  if (UNLIKELY(atomic_load_explicit(&pw_trace_want_atexit, memory_order_relaxed)))
    pw_trace_after_call();
  return r;
}

#define PW_HOOK(name, class, params, args, stream) PW_EXPORT cudaError_t name params;
#include "hooks.def"

#define WRAP_COPY(name, params, args, stream_expr, is_sync)                                        \
  cudaError_t name params {                                                                        \
    int mode = enter();                                                                            \
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
    pw_describe(&pw_real_ops, &c);                                                                 \
    uint64_t t0 = pw_now_ns();                                                                     \
    int path = -1;                                                                                 \
    if (mode == PW_MODE_STAGE && pw_eng) { /* the calls it makes are marked in a trace */          \
      uint64_t app = pw_trace_own_begin();                                                         \
      path = pw_engine_copy(pw_eng, &c);                                                           \
      pw_trace_own_end(path >= 0 ? app : 0, #name);                                                \
    }                                                                                              \
    cudaError_t r = pw_trace_after(path >= 0 ? cudaSuccess : pw_real.name args);                   \
    count_copy(PW_H_##name, &c, pw_now_ns() - t0);                                                 \
    pw_depth--;                                                                                    \
    /* src was consumed before the return (staged, or a real pageable copy, which CUDA stages      \
     * before returning): a sync right after it may be elided */                                   \
    if (pw_sync_mode == PW_SYNC_ELIDE && r == cudaSuccess && c.dir == PW_DIR_H2D &&                \
        c.src_kind == PW_MEM_PAGEABLE && mode == PW_MODE_STAGE)                                    \
      pw_elide_stream = c.stream;                                                                  \
    return r;                                                                                      \
  }

#define WRAP_LAUNCH(name, params, args)                                                            \
  cudaError_t name params {                                                                        \
    int mode = enter();                                                                            \
    if (!REAL(name)) return missing(#name);                                                        \
    if (mode == PW_MODE_OFF) return pw_trace_after(pw_real.name args);                             \
    pw_elide_stream = NULL;                                                                        \
    if (mode == PW_MODE_OBSERVE) { /* timed with the cheap counter: launches are µs calls */      \
      uint64_t t0 = pw_ticks();                                                                    \
      cudaError_t r = pw_trace_after(pw_real.name args);                                           \
      pw_add(&pw_st.hook_ticks[PW_H_##name], pw_ticks() - t0);                                     \
      count_call(PW_H_##name, 0);                                                                  \
      return r;                                                                                    \
    }                                                                                              \
    count_call(PW_H_##name, 0);                                                                    \
    return pw_trace_after(pw_real.name args);                                                      \
  }

#define WRAP_SYNC(name, params, args, stream_expr)                                                 \
  cudaError_t name params {                                                                        \
    int mode = enter();                                                                            \
    if (!REAL(name)) return missing(#name);                                                        \
    if (mode == PW_MODE_OFF) return pw_trace_after(pw_real.name args);                             \
    void *s = (void *)(stream_expr);                                                               \
    if (s && s == pw_elide_stream) {                                                               \
      pw_elide_stream = NULL;                                                                      \
      pw_add(&pw_st.sync_elided, 1);                                                               \
      count_call(PW_H_##name, 0);                                                                  \
      return cudaSuccess;                                                                          \
    }                                                                                              \
    pw_elide_stream = NULL;                                                                        \
    uint64_t t0 = pw_now_ns();                                                                     \
    cudaError_t r = pw_real.name args;                                                             \
    count_sync(PW_H_##name, pw_now_ns() - t0);                                                     \
    return r;                                                                                      \
  }

/* One wrapper-generating macro per class of hooks.def, named PW_WRAP_<class>. */
#define PW_WRAP_COPY_BLOCKING(name, params, args, stream) WRAP_COPY(name, params, args, stream, 1)
#define PW_WRAP_COPY_ASYNC(name, params, args, stream) WRAP_COPY(name, params, args, stream, 0)
#define PW_WRAP_LAUNCH(name, params, args, stream) WRAP_LAUNCH(name, params, args)
#define PW_WRAP_HOST_SYNC(name, params, args, stream) WRAP_SYNC(name, params, args, stream)
#define PW_HOOK(name, class, params, args, stream) PW_WRAP_##class(name, params, args, stream)
#include "hooks.def"

/* ---- exit ---- */

static void open_stats_target(int *fd, int *close_it) {
  const char *tmpl = pw_option_str(PW_OPT_STATS_FILE);
  *fd = 2;
  *close_it = 0;
  if (!tmpl) return;
  char path[4096];
  size_t o = 0;
  for (const char *p = tmpl; *p && o < sizeof path - 24; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = 0;
  int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f < 0) {
    pw_log(PW_LOG_ERROR, "cannot open PINWHEEL_STATS_FILE %s: %m; summary goes to stderr", path);
    return;
  }
  *fd = f;
  *close_it = 1;
}

__attribute__((destructor)) static void pw_fini(void) {
  static atomic_int done;
  const char *s = getenv("PINWHEEL_STATS");
  if (!s || atomic_exchange(&done, 1)) return;
  /* Only the process the user started speaks when nothing was intercepted: forked workers and
   * helper programs that inherited LD_PRELOAD stay quiet unless they used CUDA themselves. */
  uint64_t calls = 0;
  for (int i = 0; i < PW_HOOK_COUNT; i++)
    calls += pw_get(&pw_st.hook_calls[i]);
  const char *root = getenv("PINWHEEL_ROOT_PID");
  int is_root = !atomic_load(&pw_forked) && (!root || atoi(root) == (int)getpid());
  if (!calls && !is_root) return;
  if (!pw_option_get(PW_OPT_STATS)) return;
  int fd, close_it;
  open_stats_target(&fd, &close_it);
  pw_stats_write(fd, (int)pw_option_get(PW_OPT_STATS_FORMAT));
  if (close_it) close(fd);
}
