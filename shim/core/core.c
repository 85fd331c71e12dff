/* core.c — the lifecycle of libpinwheel, shared by its two front ends (runtime.c: the CUDA
 * runtime's entry points; drv.c: the driver's): init at the first CUDA call, the one engine, the
 * mode, the per-thread guard and sync-elision state, fork and the exit summary.
 *
 * Must never: do anything before the first hooked call (there is no constructor; the destructor
 * only reads PINWHEEL_STATS), print unless asked (errors aside), or exit/abort the host process.
 */
#define _GNU_SOURCE
#include "real.h"
#include "front.h"
#include "guard.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

atomic_int pw_ready;
int pw_mode = PW_MODE_OBSERVE;
int pw_sync_mode = PW_SYNC_KEEP;
pw_engine *pw_eng;
int pw_host_copies;
PW_TLS int pw_depth;
PW_TLS void *pw_elide_stream;
static pthread_once_t pw_once = PTHREAD_ONCE_INIT;
static atomic_int pw_forked;
static PW_TLS int pw_in_init; /* init running on this thread: fall through */

/* The source guard that deferred staging relies on (engine/guard.c, hooks in front/memhooks.c). */
static const pw_guard_ops guard_ops = {.available = pw_guard_available,
                                       .protect_inner = pw_guard_protect_inner,
                                       .release_upto = pw_guard_release_upto,
                                       .release = pw_guard_release,
                                       .wait = pw_guard_wait};

/* ---- init, fork ---- */

static void after_fork_child(void) {
  atomic_store(&pw_forked, 1);
  pw_stats_reset();
  pw_ticks_anchor();
  pw_pool_after_fork_child();
  pw_engine_after_fork_child(pw_eng);
  pw_drv_fork_child();
  pw_pinned_after_fork_child();
  pw_elide_stream = NULL;
}

static void init_once(void) {
  pw_ticks_anchor();
  pw_options_init();
  pw_resolve_real();
  pw_mode = (int)pw_option_get(PW_OPT_MODE);
  pw_trace_start(); /* PINWHEEL_TRACE, in every mode: the first CUDA call is now */
  pw_sync_mode = (int)pw_option_get(PW_OPT_SYNC);
  pw_host_copies = (int)pw_option_get(PW_OPT_HOST_COPIES);
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
        .defer = (int)pw_option_get(PW_OPT_DEFER),
        .guard = &guard_ops,
    };
    pw_eng = pw_engine_create(&pw_real_ops, &cfg); /* each copy brings its front end's ops */
    if (!pw_eng) {
      pw_log(PW_LOG_ERROR, "cannot allocate the staging engine; observing only");
      pw_mode = PW_MODE_OBSERVE;
    }
  }
  pthread_atfork(NULL, NULL, after_fork_child);
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
  uint64_t waited = 0, wait_ns = 0;
  if (pw_eng) pw_guard_stats(&waited, &wait_ns); /* the guard ran only if the engine deferred */
  atomic_store(&pw_st.guard_writes_waited, waited);
  atomic_store(&pw_st.guard_wait_ns, wait_ns);
  open_stats_target(&fd, &close_it);
  pw_stats_write(fd, (int)pw_option_get(PW_OPT_STATS_FORMAT));
  if (close_it) close(fd);
}
