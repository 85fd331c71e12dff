/* pool.c — the memcpy worker pool behind the staging copy.
 *
 * Owns: up to 63 worker threads, started lazily at the first large copy (never before), with
 * every signal blocked; one job at a time (a second caller copies alone instead of waiting);
 * the rebuild after fork.  Must never: call CUDA, block the caller on a busy pool, or let a
 * worker touch a job that is not the current one.
 *
 * A job is split into parts; a part is claimed by a CAS on one 64-bit ticket that holds
 * [generation:24 | parts:20 | next part:20], so a worker that wakes late can never claim a part
 * of a job it has not seen published.  Lock order: submit_lock, then wake_lock.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#define POOL_MAX 64
#define SPIN_NS 200000 /* a worker spins this long after a job before sleeping */
#define MIN_PARALLEL (1u << 20)

static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static atomic_int workers;  /* started workers */
static int start_tried;     /* under submit_lock */
static atomic_uint wake_gen; /* bumped for every job (under wake_lock) */
static atomic_int sleepers;

static struct {
  char *dst;
  const char *src;
  size_t n, part;
} job;
static _Atomic uint64_t ticket;
static atomic_uint done_parts;
static unsigned job_gen;

#define T_PARTS(t) ((unsigned)(((t) >> 20) & 0xFFFFF))
#define T_NEXT(t) ((unsigned)((t)&0xFFFFF))

/* Claim one part of the current job; returns its index or -1. */
static int claim(void) {
  uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
  while (T_NEXT(t) < T_PARTS(t)) {
    if (atomic_compare_exchange_weak_explicit(&ticket, &t, t + 1, memory_order_acq_rel,
                                              memory_order_acquire))
      return (int)T_NEXT(t);
  }
  return -1;
}

static void run_parts(void) {
  int i;
  while ((i = claim()) >= 0) {
    size_t off = (size_t)i * job.part;
    size_t len = job.n - off < job.part ? job.n - off : job.part;
    memcpy(job.dst + off, job.src + off, len);
    atomic_fetch_add_explicit(&done_parts, 1, memory_order_release);
  }
}

static void *worker(void *arg) {
  (void)arg;
  unsigned seen = atomic_load(&wake_gen);
  for (;;) {
    run_parts();
    uint64_t t0 = pw_now_ns();
    int found = 0;
    while (pw_now_ns() - t0 < SPIN_NS) {
      uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
      if (T_NEXT(t) < T_PARTS(t)) {
        found = 1;
        break;
      }
      __builtin_ia32_pause();
    }
    if (found) continue;
    pthread_mutex_lock(&wake_lock);
    atomic_fetch_add(&sleepers, 1);
    /* sleepers is raised before the ticket is read again, and the caller publishes the ticket
     * before it reads sleepers (both sequentially consistent): one of the two sees the other. */
    for (;;) {
      uint64_t t = atomic_load(&ticket);
      if (atomic_load(&wake_gen) != seen || T_NEXT(t) < T_PARTS(t)) break;
      pthread_cond_wait(&wake_cv, &wake_lock);
    }
    seen = atomic_load(&wake_gen);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&wake_lock);
  }
  return NULL;
}

/* Under submit_lock. */
static void start_workers(int want) {
  start_tried = 1;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int n = 0;
  for (; n < want && n < POOL_MAX - 1; n++) {
    pthread_t th;
    if (pthread_create(&th, &attr, worker, NULL) != 0) break;
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  atomic_store(&workers, n);
  pw_log(PW_LOG_INFO, "memcpy pool started with %d worker threads", n);
}

void pw_pool_memcpy(void *dst, const void *src, size_t n, int threads) {
  if (threads <= 1 || n < MIN_PARALLEL || pthread_mutex_trylock(&submit_lock) != 0) {
    memcpy(dst, src, n);
    return;
  }
  if (!start_tried) start_workers(threads - 1);
  int w = atomic_load(&workers);
  if (w == 0) {
    pthread_mutex_unlock(&submit_lock);
    memcpy(dst, src, n);
    return;
  }
  int helpers = threads - 1 < w ? threads - 1 : w;
  size_t part = n / ((size_t)(helpers + 1) * 2);
  if (part < (256u << 10)) part = 256u << 10;
  part = (part + 4095) & ~(size_t)4095;
  unsigned parts = (unsigned)((n + part - 1) / part);
  job.dst = dst;
  job.src = src;
  job.n = n;
  job.part = part;
  atomic_store_explicit(&done_parts, 0, memory_order_relaxed);
  job_gen = (job_gen + 1) & 0xFFFFFF;
  atomic_store(&ticket, ((uint64_t)job_gen << 40) | ((uint64_t)parts << 20));
  if (atomic_load(&sleepers) > 0) {
    pthread_mutex_lock(&wake_lock);
    atomic_fetch_add(&wake_gen, 1);
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&wake_lock);
  }
  run_parts();
  while (atomic_load_explicit(&done_parts, memory_order_acquire) < parts) __builtin_ia32_pause();
  pthread_mutex_unlock(&submit_lock);
}

/* The child of a fork has none of the workers: forget them, and the locks they may have held. */
void pw_pool_after_fork_child(void) {
  pthread_mutex_init(&submit_lock, NULL);
  pthread_mutex_init(&wake_lock, NULL);
  pthread_cond_init(&wake_cv, NULL);
  atomic_store(&workers, 0);
  atomic_store(&sleepers, 0);
  atomic_store(&ticket, 0);
  start_tried = 0;
}
