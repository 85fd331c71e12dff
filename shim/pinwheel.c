/* pinwheel.c — the top file: wires libpinwheel.so; everything else sits below it.
 *
 * Owns: the constructor (a copy of stderr kept, the one set of fork handlers registered), init at
 * the first hooked call (pw_init: options, the real functions, the mode, the trace, the one engine
 * made with the runtime's ops and the source guard's), the fork resets and their order, and the
 * exit summary.  Fork order: prepare and parent: the trace's queue lock; child: counters, clock
 * anchor, options, driver front end, pinned registry, copy pool, NUMA, uploads ahead,
 * engine (after the pool it uses), trace (last: it may log), sync elision (nothing of the
 * parent's is in flight in the child), this thread's elided stream.  The guard registers its own
 * handlers at its first protect, after CUDA's (guard.c).
 * Must never: do more at load than the constructor's two things (memhooks.c resolves the real
 * memory functions); print unless asked (errors aside); print a summary for a process that never
 * intercepted a CUDA call (unless `pinwheel run` started it); exit or abort the host process; be
 * included or called by core/ or engine/ (front/ calls pw_init only, declared in front.h).
 */
#define _GNU_SOURCE
#include "engine.h"
#include "fa.h"
#include "front.h"
#include "guard.h"
#include "numa.h"
#include "real.h"
#include "trace.h"
#include "unmap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t pw_once = PTHREAD_ONCE_INIT;
static atomic_int pw_forked;
static PW_TLS int pw_in_init; /* init running on this thread: fall through */

/* The source guard that deferred staging relies on (engine/guard.c, hooks in front/memhooks.c). */
static const pw_guard_ops guard_ops = {.available = pw_guard_available,
                                       .protect_inner = pw_guard_protect_inner,
                                       .protect_revocable = pw_guard_protect_revocable,
                                       .release_upto = pw_guard_release_upto,
                                       .release = pw_guard_release,
                                       .wait = pw_guard_wait};

/* ---- init, fork ---- */

static void before_fork(void) {
  pw_unmap_before_fork(); /* first: it may wait for a release, with no lock of ours held */
  pw_trace_fork_prepare();
}
static void parent_after_fork(void) {
  pw_unmap_after_fork_parent();
  pw_trace_fork_parent();
}
static void child_after_fork(void) {
  atomic_store(&pw_forked, 1);
  pw_stats_reset();
  pw_ticks_anchor();
  pw_options_after_fork_child();
  pw_drv_fork_child();
  pw_pinned_after_fork_child();
  pw_pool_after_fork_child();
  pw_unmap_after_fork_child();
  pw_numa_after_fork_child();
  pw_fa_after_fork_child();
  pw_engine_after_fork_child(pw_eng);
  pw_trace_fork_child();
  pw_elide_after_fork_child();
  pw_elide_stream = NULL;
}

__attribute__((constructor)) static void pw_load(void) {
  pw_log_keep_stderr();
  pthread_atfork(before_fork, parent_after_fork, child_after_fork);
}

static void init_once(void) {
  pw_ticks_anchor();
  pw_options_init();
  pw_resolve_real();
  pw_mode = (int)pw_option_get(PW_OPT_MODE);
  pw_trace_start(); /* PINWHEEL_TRACE, in every mode: the first CUDA call is now */
  pw_sync_mode = (int)pw_option_get(PW_OPT_SYNC);
  pw_elide_configure(pw_sync_mode == PW_SYNC_ELIDE);
  if (pw_mode == PW_MODE_STAGE) {
    long long threads = pw_option_get(PW_OPT_THREADS);
    /* the default: a NUMA placement may cap it (pool.c); an explicit count stays */
    if (threads <= 0) {
      threads = pw_default_threads();
      pw_pool_threads_auto(1);
    }
    if (threads > 64) threads = 64;
    atomic_store(&pw_st.threads, (uint64_t)threads);
    pw_engine_config cfg = {
        .mode = pw_mode,
        .min_bytes = (size_t)pw_option_get(PW_OPT_MIN_BYTES),
        .host_pool = (size_t)pw_option_get(PW_OPT_HOST_POOL),
        .device_ring = (size_t)pw_option_get(PW_OPT_DEVICE_RING),
        .chunk = (size_t)pw_option_get(PW_OPT_CHUNK),
        .threads = (int)threads,
        .strict = (int)pw_option_get(PW_OPT_STRICT),
        .defer = (int)pw_option_get(PW_OPT_DEFER),
        .numa = (int)pw_option_get(PW_OPT_NUMA),
        .guard = &guard_ops,
    };
    pw_eng = pw_engine_create(&pw_real_ops, &cfg); /* each copy brings its front end's ops */
    if (pw_eng)
      pw_fa_configure((size_t)pw_option_get(PW_OPT_FILL_AHEAD), cfg.chunk, (int)threads,
                      &guard_ops);
    if (pw_eng) pw_unmap_start(); /* a DataLoader's batches dropped off the training thread */
    if (!pw_eng) {
      pw_log(PW_LOG_ERROR, "cannot allocate the staging engine; observing only");
      pw_mode = PW_MODE_OBSERVE;
    }
  }
  pw_log(PW_LOG_INFO, "pinwheel %s active, mode %d", PW_VERSION, pw_mode);
  atomic_store_explicit(&pw_ready, 1, memory_order_release);
}

void pw_init(void) {
  if (pw_in_init) return; /* If init ends up recursing, pthread_once would deadlock. */
  pw_in_init = 1;
  pthread_once(&pw_once, init_once);
  pw_in_init = 0;
}

/* ---- exit ---- */

/* The summary's destination: PINWHEEL_STATS_FILE (%p = pid), appended to, or the kept stderr. */
static void open_stats_target(int *fd, int *close_it) {
  const char *tmpl = pw_option_str(PW_OPT_STATS_FILE);
  *fd = pw_log_fd();
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
  char why[160];
  int f = pw_open_output(path, PW_OUT_APPEND, why, sizeof why);
  if (f < 0) {
    pw_log(PW_LOG_ERROR, "cannot write PINWHEEL_STATS_FILE %s: %s; summary goes to stderr", path,
           why);
    return;
  }
  *fd = f;
  *close_it = 1;
}

/* The command `pinwheel run` started used no CUDA: when CUDA is unusable here, the summary says
 * why, and so does a trace that was asked for and is not written. */
static void say_why_unused(void) {
  char why[200];
  const char *trace = getenv("PINWHEEL_TRACE");
  struct stat st;
  /* a trace another process of the run wrote (a child of a shell) is no trace missing */
  if (trace && (strchr(trace, '%') || (stat(trace, &st) == 0 && st.st_size > 0))) trace = NULL;
  if (!pw_cuda_unusable(why, sizeof why)) {
    if (trace && *trace)
      pw_log(PW_LOG_ERROR, "no trace written to %s: no CUDA call was intercepted", trace);
    return;
  }
  pw_stats_set_cause(why);
  if (trace && *trace)
    pw_log(PW_LOG_ERROR, "no trace written to %s: CUDA is unusable here: %s", trace, why);
}

__attribute__((destructor)) static void pw_fini(void) {
  static atomic_int done;
  if (atomic_exchange(&done, 1)) return;
  /* Only a process that intercepted a CUDA call speaks (init runs at the first one; in mode off
   * nothing is counted, so init is the sign), and the command `pinwheel run` started, whose user
   * asked for its summary.  Forked workers count from zero, so their own calls decide; helper
   * programs, shells and interpreters that inherited LD_PRELOAD stay quiet. */
  uint64_t calls = 0;
  for (int i = 0; i < PW_HOOK_COUNT; i++)
    calls += pw_get(&pw_st.hook_calls[i]);
  int forked = atomic_load(&pw_forked);
  int used = calls || (!forked && atomic_load_explicit(&pw_ready, memory_order_acquire));
  const char *root = getenv("PINWHEEL_ROOT_PID");
  int launched = !forked && root && atoi(root) == (int)getpid();
  if (!used && launched) say_why_unused();
  if (!getenv("PINWHEEL_STATS") || (!used && !launched)) return;
  if (!pw_option_get(PW_OPT_STATS)) return;
  int fd, close_it;
  uint64_t waited = 0, wait_ns = 0;
  if (pw_eng) pw_guard_stats(&waited, &wait_ns); /* the guard ran only if the engine deferred */
  atomic_store(&pw_st.guard_writes_waited, waited);
  atomic_store(&pw_st.guard_wait_ns, wait_ns);
  open_stats_target(&fd, &close_it);
  pw_stats_write(fd, (int)pw_option_get(PW_OPT_STATS_FORMAT), pw_memcpy_name(PW_MEMCPY_PORTABLE));
  if (close_it) close(fd);
}
