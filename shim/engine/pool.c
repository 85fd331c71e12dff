/* pool.c — the copy worker pool behind the staging copy.
 *
 * Owns: up to POOL_MAX-1 worker threads, started lazily at the first large copy (never before),
 * with every signal blocked; LANES batches at a time, the workers sharing themselves among them
 * (a caller that finds every lane taken copies alone instead of waiting); the rebuild after fork;
 * the keep-awake window (pw_pool_keep_awake: after an H2D copy the workers spin instead of sleeping
 * while its last DMAs read what they wrote, at most 2 ms);
 * the cap on a batch's threads while the staging threads are placed on a NUMA node (numa.h): when
 * the thread count is the default (pw_pool_threads_auto), a batch that takes a lane sizes itself
 * for at most pw_numa_share() threads, the caller included, so the placed node's CPUs are not
 * oversubscribed; an explicit count is the user's and stays, and the cap goes with the placement.
 * Must never: call CUDA, block a caller on a busy pool, let a worker touch a part that was not
 * published to it, let a batch hold a lane while it has nothing outstanding in it, or read the
 * NUMA topology itself (numa.c keeps the share; this file only loads it).
 */

/* A batch is a stream of segments (one staging chunk each) that the caller pushes while the
 * workers copy: the caller pushes chunk k+1.. and, as soon as chunk k is complete, hands it to
 * the DMA engine, so there is no fork-join barrier between chunks and the DMA of chunk k runs
 * while chunk k+1 is being copied.  A segment is cut into parts; a lane holds one batch's parts
 * in a ring of descriptors indexed by two monotone 64-bit counters, `published` and `claimed`: a
 * part is claimed by a CAS on `claimed` below `published`, so a worker that wakes late can never
 * claim a part that was not published to it (the counters never go back, so there is no ABA).
 * The caller keeps at most SEG_MAX segments outstanding, each of at most PART_MAX parts, so a
 * descriptor is rewritten only after the part that used it is done.  A worker takes the next part
 * of the next lane that has one, round robin, so batches side by side share the workers.
 *
 * Lanes: a batch takes a lane (trylock) at the first push that wants the pool, and gives it back
 * as soon as every segment it pushed was waited for.  A caller that waits for the GPU between its
 * pushes with nothing outstanding (the D2H's wait for its first DMA behind a long kernel, once its
 * destination is mapped) holds no lane; one that waits with parts in flight (chunk k copied out
 * during chunk k+1's DMA) holds one lane of LANES, and the workers serve the other batches.
 * Completion: a worker copies its part (a streaming copy ends with a store fence), then counts
 * it down in its segment with a release store; the caller's acquire load of a zero count makes
 * every byte of the segment visible before it enqueues the DMA that reads it.
 *
 * Locks: a lane's lock and start_lock are never held together; wake_lock is taken under neither
 * (a leaf).
 */
#define _GNU_SOURCE
#include "numa.h"
#include "engine.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#define POOL_MAX 64
#define SPIN_NS 200000       /* a worker spins this long after its last part before sleeping */
#define AWAKE_MAX_NS 2000000 /* the longest pw_pool_keep_awake asks the workers to spin */
#define MIN_PARALLEL (1u << 20)
#define MIN_PART (256u << 10)
#define MAP_PART ((size_t)2 << 20)
#define SEG_MAX 8
#define SEG_RING 16
#define PART_MAX (2 * POOL_MAX + 2)
#define PART_RING 2048 /* >= SEG_MAX * PART_MAX */
#define LANES 8        /* batches served at once */

_Static_assert(PART_RING >= SEG_MAX * PART_MAX, "part ring too small");
_Static_assert(SEG_RING >= SEG_MAX, "segment ring too small");

typedef struct pool_part {
  char *dst;
  const char *src;
  size_t len;
  uint64_t seg;
  int flags; /* PW_PART_* */
} pool_part;

/* One batch's parts.  Between two owners every published part is done (claimed == published)
 * and every segment count is zero. */
typedef struct pw_lane {
  pthread_mutex_t lock; /* held by the batch that owns the lane (taken with trylock) */
  pw_memcpy_fn copy;    /* the owner's streaming copy, set before it publishes a part */
  _Atomic uint64_t published, claimed;
  atomic_uint seg_left[SEG_RING]; /* parts of segment s not yet done, at s % SEG_RING */
  pool_part parts[PART_RING];
} pw_lane;

#define LANE_INIT                                                                                  \
  { .lock = PTHREAD_MUTEX_INITIALIZER }
_Static_assert(LANES == 8, "one initializer per lane");
static pw_lane lanes[LANES] = {LANE_INIT, LANE_INIT, LANE_INIT, LANE_INIT,
                               LANE_INIT, LANE_INIT, LANE_INIT, LANE_INIT};

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static atomic_int workers;     /* started workers */
static atomic_int start_tried; /* written under start_lock */
static atomic_uint wake_gen;   /* bumped when sleepers must look again (under wake_lock) */
static atomic_int sleepers;
static atomic_int threads_auto; /* the batches' thread count is the default: a placement caps it */

/* Claim the lane's next published part if its segment is at most max_seg; its index or -1. */
static int64_t claim(pw_lane *l, uint64_t max_seg) {
  uint64_t i = atomic_load_explicit(&l->claimed, memory_order_acquire);
  for (;;) {
    if (i >= atomic_load_explicit(&l->published, memory_order_acquire)) return -1;
    if (l->parts[i % PART_RING].seg > max_seg) return -1;
    if (atomic_compare_exchange_weak_explicit(&l->claimed, &i, i + 1, memory_order_acq_rel,
                                              memory_order_acquire))
      return (int64_t)i;
  }
}

/* One part's work, on whichever thread runs it: map dst's pages, copy, or both (PW_PART_*). */
static void part_work(char *dst, const char *src, size_t n, int flags, pw_memcpy_fn stream) {
  if (flags & (PW_PART_PREFAULT | PW_PART_MAP)) pw_prefault(dst, n);
  if (flags & PW_PART_MAP) return;
  if (flags & PW_PART_STREAM)
    stream(dst, src, n);
  else
    pw_libc_memmove(dst, src, n); /* the shim's memcpy and memmove may hand work to this pool */
}

static void run_part(pw_lane *l, uint64_t i) {
  const pool_part *p = &l->parts[i % PART_RING];
  part_work(p->dst, p->src, p->len, p->flags, l->copy);
  atomic_fetch_sub_explicit(&l->seg_left[p->seg % SEG_RING], 1, memory_order_release);
}

static int work_pending(void) {
  for (int k = 0; k < LANES; k++)
    if (atomic_load_explicit(&lanes[k].claimed, memory_order_acquire) <
        atomic_load_explicit(&lanes[k].published, memory_order_acquire))
      return 1;
  return 0;
}

/* Run one part of the first lane from *next on that has one; the lane after it is next. */
static int work_one(unsigned *next) {
  for (unsigned k = 0; k < LANES; k++) {
    unsigned at = (*next + k) % LANES;
    int64_t i = claim(&lanes[at], UINT64_MAX);
    if (i < 0) continue;
    pw_add(&pw_st.pool_parts, 1); /* before the part counts down: its batch then sees it */
    run_part(&lanes[at], (uint64_t)i);
    *next = (at + 1) % LANES;
    return 1;
  }
  return 0;
}

/* Until when (pw_now_ns) a worker that finds no part keeps spinning instead of sleeping. */
static _Atomic uint64_t awake_until;

/* The DMA engine may read pinned lines the workers just wrote several times slower once those
 * workers' cores sleep (docs/RESULTS.md, "The copy-bound loop's last DMAs"), so after an H2D
 * copy's last chunk is in, the engine keeps them awake about as long as the DMAs still to run
 * take.  Several callers: the latest end wins.  A worker already asleep is not woken. */
static atomic_ulong awake_asks;     /* keep-awakes asked, and the latest one's ns (capped): */
static _Atomic uint64_t awake_last; /* pw_pool_awake_asked, for the tests */

unsigned long pw_pool_awake_asked(uint64_t *last_ns) {
  if (last_ns) *last_ns = atomic_load(&awake_last);
  return atomic_load(&awake_asks);
}

void pw_pool_keep_awake(uint64_t ns) {
  if (ns > AWAKE_MAX_NS) ns = AWAKE_MAX_NS;
  atomic_store_explicit(&awake_last, ns, memory_order_relaxed);
  atomic_fetch_add_explicit(&awake_asks, 1, memory_order_relaxed);
  uint64_t until = pw_now_ns() + ns;
  uint64_t cur = atomic_load_explicit(&awake_until, memory_order_relaxed);
  while (cur < until && !atomic_compare_exchange_weak_explicit(
                            &awake_until, &cur, until, memory_order_relaxed, memory_order_relaxed))
    ;
}

int pw_pool_may_sleep(uint64_t now, uint64_t idle_since) {
  uint64_t until = atomic_load_explicit(&awake_until, memory_order_relaxed);
  /* a window far more than AWAKE_MAX_NS ahead is over: the clock went back (a restored process) */
  return now - idle_since >= SPIN_NS && (now >= until || until - now > 2 * AWAKE_MAX_NS);
}

static atomic_ulong sleeps; /* times a worker went to sleep (pw_pool_sleeps, for the tests) */

unsigned long pw_pool_sleeps(void) {
  return atomic_load(&sleeps);
}

static void *worker(void *arg) {
  unsigned next = (unsigned)(uintptr_t)arg % LANES;
  unsigned seen = atomic_load(&wake_gen);
  pw_numa_thread numa = {0}; /* the NUMA placement this worker follows (numa.h) */
  for (;;) {
    pw_numa_apply(&numa);
    while (work_one(&next))
      ;
    uint64_t t0 = pw_now_ns();
    int found = 0;
    while (!pw_pool_may_sleep(pw_now_ns(), t0)) {
      if (work_pending()) {
        found = 1;
        break;
      }
      pw_cpu_relax();
    }
    if (found) continue;
    pthread_mutex_lock(&wake_lock);
    atomic_fetch_add(&sleeps, 1);
    atomic_fetch_add(&sleepers, 1);
    /* sleepers is raised before `published` is read again, and the caller publishes before it
     * reads sleepers (both sequentially consistent): one of the two sees the other. */
    for (;;) {
      if (atomic_load(&wake_gen) != seen || work_pending()) break;
      pthread_cond_wait(&wake_cv, &wake_lock);
    }
    seen = atomic_load(&wake_gen);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&wake_lock);
  }
  return NULL;
}

/* pw_spawn, the thread starting on cpus (NULL: the caller's affinity, as pw_spawn). */
static int spawn_on(void *(*fn)(void *), void *arg, size_t stack, const cpu_set_t *cpus) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the full mask */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack) pthread_attr_setstacksize(&attr, stack);
  if (cpus) (void)pthread_attr_setaffinity_np(&attr, sizeof *cpus, cpus);
  pthread_t th;
  int rc = pthread_create(&th, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (rc && cpus) { /* an affinity the kernel refuses now (a cpuset changed): the caller's */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return spawn_on(fn, arg, stack, NULL);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

int pw_spawn(void *(*fn)(void *), void *arg, size_t stack) {
  return spawn_on(fn, arg, stack, NULL);
}

/* Start the workers once per process (after fork: once more). */
static void start_workers(int want) {
  pthread_mutex_lock(&start_lock);
  if (!atomic_load(&start_tried)) {
    /* a caller already placed on a node (the deferred copies' copy thread) would hand the node's
     * CPUs down as the workers' own affinity: they start on the process's instead */
    cpu_set_t origin;
    int placed = pw_numa_origin(&origin);
    int n = 0;
    while (n < want && n < POOL_MAX - 1 &&
           spawn_on(worker, (void *)(uintptr_t)n, 64 << 10, placed ? &origin : NULL) == 0)
      n++;
    atomic_store(&workers, n);
    atomic_store(&start_tried, 1);
    pw_log(PW_LOG_INFO, "copy pool started with %d worker threads (%s stores)", n,
           pw_memcpy_name(pw_memcpy_best()));
  }
  pthread_mutex_unlock(&start_lock);
}

int pw_pool_workers(void) {
  return atomic_load(&workers);
}

void pw_batch_begin(pw_batch *b, int threads, int stream_stores) {
  memset(b, 0, sizeof *b);
  b->threads = threads;
  int best = pw_memcpy_best();
  b->nt = stream_stores && best != PW_MEMCPY_PORTABLE;
  b->copy = pw_memcpy_impl(b->nt ? best : PW_MEMCPY_PORTABLE);
  if (threads > 1 && !atomic_load(&start_tried)) start_workers(threads - 1);
}

void pw_pool_threads_auto(int on) {
  atomic_store_explicit(&threads_auto, on, memory_order_relaxed);
}

/* The threads b may use now, the caller included: its own count, or, when that is the default
 * and the staging threads are placed on a NUMA node, at most this process's share of the node. */
static int batch_threads(const pw_batch *b) {
  if (!atomic_load_explicit(&threads_auto, memory_order_relaxed)) return b->threads;
  int cap = pw_numa_share();
  if (cap <= 0 || cap >= b->threads) return b->threads;
  if (pw_get(&pw_st.numa_copy_threads) != (uint64_t)cap)
    atomic_store_explicit(&pw_st.numa_copy_threads, (uint64_t)cap, memory_order_relaxed);
  return cap;
}

/* Take a free lane for b, which has nothing outstanding; never waits.  When every lane is taken
 * the batch's pushes copy alone until one is free (counted once per batch). */
static void take_lane(pw_batch *b) {
  int w = atomic_load(&workers), t = batch_threads(b);
  if (t <= 1 || w == 0) return;
  for (int k = 0; k < LANES; k++) {
    pw_lane *l = &lanes[k];
    if (pthread_mutex_trylock(&l->lock) != 0) continue;
    l->copy = b->copy;
    b->lane = l;
    b->helpers = t - 1 < w ? t - 1 : w;
    return;
  }
  if (!b->busy) pw_add(&pw_st.pool_busy, 1);
  b->busy = 1;
}

/* Every segment pushed was waited for: the lane holds nothing of b's, give it back. */
static void give_lane(pw_batch *b) {
  pthread_mutex_unlock(&b->lane->lock);
  b->lane = NULL;
}

int pw_batch_done(pw_batch *b, uint64_t seg) {
  if (!b->lane || seg < b->waited) return 1;
  return atomic_load_explicit(&b->lane->seg_left[seg % SEG_RING], memory_order_acquire) == 0;
}

void pw_batch_wait(pw_batch *b, uint64_t seg) {
  pw_lane *l = b->lane;
  if (!l || seg < b->waited || seg >= b->next_seg) return;
  uint64_t t0 = pw_now_ns();
  for (uint64_t s = b->waited; s <= seg; s++) {
    /* help with parts of the segments waited for, never later ones: the caller must be free to
     * hand a finished chunk to the DMA engine at once */
    while (atomic_load_explicit(&l->seg_left[s % SEG_RING], memory_order_acquire) != 0) {
      int64_t i = claim(l, seg);
      if (i >= 0)
        run_part(l, (uint64_t)i);
      else
        pw_cpu_relax();
    }
  }
  b->waited = seg + 1;
  b->wait_ns += pw_now_ns() - t0;
  if (b->waited == b->next_seg) give_lane(b);
}

int pw_batch_help(pw_batch *b, uint64_t max_seg) {
  if (!b->lane) return 0;
  int64_t i = claim(b->lane, max_seg); /* only parts this batch published can be claimed */
  if (i < 0) return 0;
  run_part(b->lane, (uint64_t)i);
  return 1;
}

uint64_t pw_batch_push(pw_batch *b, void *dst, const void *src, size_t n, int flags) {
  if (!b->nt) flags &= ~PW_PART_STREAM;
  if (!b->lane && n >= MIN_PARALLEL) take_lane(b);
  uint64_t seg = b->next_seg++;
  pw_lane *l = b->lane;
  /* a segment's counter slot is reused only once the segment SEG_RING back is done */
  if (l && seg - b->waited >= SEG_MAX) pw_batch_wait(b, seg - SEG_MAX);
  if (!l || n < MIN_PARALLEL) {
    /* no lane, or too small to share: the caller copies it now */
    uint64_t t0 = pw_now_ns();
    if (n) part_work(dst, src, n, flags, b->copy);
    b->inline_ns += pw_now_ns() - t0;
    if (l)
      atomic_store_explicit(&l->seg_left[seg % SEG_RING], 0, memory_order_release);
    else
      b->waited = seg + 1; /* without a lane nothing is outstanding */
    return seg;
  }
  size_t part;
  if (flags & PW_PART_MAP) { /* one kernel call per part, each whole huge pages where advised */
    part = (n / PART_MAX + MAP_PART - 1) / MAP_PART * MAP_PART;
    if (part < MAP_PART) part = MAP_PART;
  } else {
    part = n / ((size_t)(b->helpers + 1) * 2);
    if (part < MIN_PART) part = MIN_PART;
    part = (part + 4095) & ~(size_t)4095;
  }
  unsigned nparts = (unsigned)((n + part - 1) / part);
  if (nparts > PART_MAX) { /* cannot happen with the sizes above; kept as a guard */
    part = ((n + PART_MAX - 1) / PART_MAX + 4095) & ~(size_t)4095;
    nparts = (unsigned)((n + part - 1) / part);
  }
  atomic_store_explicit(&l->seg_left[seg % SEG_RING], nparts, memory_order_relaxed);
  uint64_t first = atomic_load_explicit(&l->published, memory_order_relaxed);
  for (unsigned k = 0; k < nparts; k++) {
    pool_part *p = &l->parts[(first + k) % PART_RING];
    size_t off = (size_t)k * part;
    p->dst = (char *)dst + off;
    p->src = (const char *)src + off;
    p->len = n - off < part ? n - off : part;
    p->seg = seg;
    p->flags = flags;
  }
  atomic_store(&l->published, first + nparts); /* seq_cst: see the sleepers comment in worker() */
  if (atomic_load(&sleepers) > 0) {
    pthread_mutex_lock(&wake_lock);
    atomic_fetch_add(&wake_gen, 1);
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&wake_lock);
  }
  return seg;
}

void pw_batch_end(pw_batch *b) {
  if (b->lane) pw_batch_wait(b, b->next_seg - 1); /* gives the lane back */
}

void pw_pool_memcpy(void *dst, const void *src, size_t n, int threads, int stream_stores) {
  pw_batch b;
  pw_batch_begin(&b, threads, stream_stores);
  uint64_t s = pw_batch_push(&b, dst, src, n, stream_stores ? PW_PART_STREAM : 0);
  pw_batch_wait(&b, s);
  pw_batch_end(&b);
}

/* The child of a fork has none of the workers: forget them, and the locks they may have held. */
void pw_pool_after_fork_child(void) {
  for (int k = 0; k < LANES; k++) {
    pw_lane *l = &lanes[k];
    pthread_mutex_init(&l->lock, NULL);
    atomic_store(&l->published, 0);
    atomic_store(&l->claimed, 0);
    for (int i = 0; i < SEG_RING; i++)
      atomic_store(&l->seg_left[i], 0);
  }
  pthread_mutex_init(&start_lock, NULL);
  pthread_mutex_init(&wake_lock, NULL);
  pthread_cond_init(&wake_cv, NULL);
  atomic_store(&workers, 0);
  atomic_store(&sleepers, 0);
  atomic_store(&awake_until, 0);
  atomic_store(&start_tried, 0);
}
