/* engine.c — the staging engine: pageable copies rewritten into pinned chunks, a device ring and a
 * side stream (DESIGN.md §2–3).
 *
 * Owns: eligibility, per-device state (pinned pool, device ring, side stream, events), the two
 * circular arenas and their back-pressure, the H2D ring / pinned-only paths and the D2H path.
 * Must never: call CUDA except through its pw_ops table, print except through pw_log, exit or
 * abort, or return "staged" for a copy whose bytes are not guaranteed (any doubt: the caller
 * makes the real call).
 */

/* Ordering argument, per piece of an H2D copy through the ring:
 *   side stream:   wait(free event of every older ring region this piece overlaps)
 *                  DMA pinned chunk -> ring, record chunk event   (for each chunk)
 *   caller stream: wait(last chunk event); D2D ring -> dst; record the region's free event
 * A pinned chunk is reused only after its chunk event completed (host waits: back-pressure).
 * A ring region is reused only by a DMA ordered after its free event (device waits).
 *
 * Concurrency: a reservation takes a BUSY slot under the device's lock, so no one else can
 * reserve over that memory; the owner publishes the slot's event (a chunk event, a region's
 * free event) under the lock once it is recorded.  A reservation goes where no BUSY slot is (the
 * head first, else any gap), and first retires every published slot its range overlaps: a ring
 * region by enqueuing the side stream's wait on its free event (under the lock, so every DMA
 * enqueued afterwards, by any thread, follows it); a pinned chunk by waiting for its event with
 * the lock dropped (the slot is SYNCING: only that thread frees it).  When BUSY slots of other
 * copies leave no room, it waits, lock dropped, until one is published.  So a region's free event
 * is always recorded and ordered before anyone reserves over it, and no lock is ever held across a
 * wait on the GPU or on another copy: copies on different streams proceed as independently as the
 * shared pinned pool and ring allow. No deadlock between copies: a copy waits for another's BUSY
 * slot only while it holds no BUSY slot of the same arena (otherwise reserve returns AGAIN and the
 * copy first moves its own oldest chunk on: issues its DMA, or copies it out), and a copy holding a
 * BUSY ring region reserves pinned chunks only.  The owner of a BUSY slot therefore never waits for
 * the waiter.
 *
 * Lock order: init_lock, then a device's lock.  init_lock is held across a device's setup (its
 * CUDA allocations, about 30 ms once, on the thread of the device's first eligible copy), and a
 * reset, quiesce or loss of a device's context takes it before it looks at the device's state, so
 * none runs beside a setup: each waits for the one under way, then sees the state it published.
 */
#define _GNU_SOURCE
#include "numa.h"
#include "engine.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEVICES 64
#define ARENA_SLOTS 256
#define RING_MIN_CHUNKS 4 /* the smallest device ring, in staging chunks (pw_engine_create) */
#define AHEAD 3           /* H2D: chunks being copied in while the oldest one's DMA is issued */
#define D2H_DEPTH 4       /* D2H: chunks held between their DMA and the end of their copy-out */
/* Pinned chunks a copy holds BUSY at most; the pinned arena fits MAX_PENDING + 2 chunks, so a
 * copy alone in the arena never meets its own BUSY chunks (AGAIN is for copies side by side). */
#define MAX_PENDING (AHEAD > D2H_DEPTH ? AHEAD : D2H_DEPTH)

#ifdef PW_TESTING
int pw_engine_test_drop_dependency;
uint32_t pw_engine_test_ticket_start;
#define DROP_DEPENDENCY pw_engine_test_drop_dependency
#define TICKET_START pw_engine_test_ticket_start
#else
#define DROP_DEPENDENCY 0 /* the switch exists only in the test build */
#define TICKET_START 0u   /* a device's first ticket (the tests start near 2^32) */
#endif

typedef struct slot {
  size_t off, len;
  void *ev;  /* the memory is free once it completed (NULL: free) */
  int state; /* SLOT_* */
} slot;

typedef struct arena {
  size_t size, head; /* head: where the last reservation ended */
  unsigned count;    /* slots not FREE */
  slot q[ARENA_SLOTS];
} arena;

enum { DEV_READY = 1, DEV_FAILED = -1 };
enum { ARENA_HOST, ARENA_RING };

typedef struct pw_engine pw_engine_t;
typedef struct dev_state {
  int device;
  atomic_int status; /* DEV_*: written once by the setup, then only to DEV_FAILED */
  pw_engine_t *engine;
  const pw_ops *ops;    /* the front end's whose copy set the device up */
  pthread_mutex_t lock; /* the arenas and the event lists; never held across a wait */
  pthread_cond_t cv;    /* a slot was published or retired */
  void *side;
  char *pinned, *ring;
  arena host, dring;
  void **free_ev;
  int nfree, capfree;
  void **all_ev; /* every event created, for destroy */
  int nall, capall;
  /* Deferral: the copy thread stores ticket t into *flag once chunk t is in pinned memory; the
   * side stream waits for it (wait_host_value).  Tickets are handed out under the lock, in the
   * order the jobs are queued, so the stored value only grows (cyclically: 32-bit tickets wrap,
   * and the side stream's wait, cuStreamWaitValue32 GEQ, compares (int32_t)(*flag - value) >= 0).
   */
  _Atomic uint32_t *flag; /* in the pinned allocation, past the arena; NULL: no deferral */
  uint32_t ticket;        /* under the lock: the last ticket handed out */
  /* Set by a reset of the device once its drain is over (drain_jobs): the copy thread skips the
   * device's jobs it has not begun, releasing their guards without touching the pinned pool (the
   * reset frees it). */
  atomic_int skip;
} dev_state;

/* A deferred copy's copy-in, run by the copy thread.  Fixed slots (the copy thread must never call
 * malloc or free: a program thread stopped on a guarded page may hold the allocator's lock). */
#define JOB_MAX 16
#define JOB_CHUNKS 256
#define DEFER_MIN ((size_t)1 << 20)
typedef struct defer_job {
  dev_state *d;
  const char *src;
  size_t lo, hi; /* the guarded part of src: [lo, hi); the rest was copied in at the call */
  int guard_id;
  unsigned nchunks; /* each in a pinned chunk of its own (defer_chunks) */
  uint32_t ticket0; /* chunk k's ticket is ticket0 + k + 1 */
  struct {
    size_t hoff, at, len;
  } ch[JOB_CHUNKS];
} defer_job;

struct pw_engine {
  const pw_ops *ops;
  pw_engine_config cfg;
  pthread_mutex_t init_lock;
  dev_state *_Atomic dev[MAX_DEVICES];
  atomic_int forked;
  pid_t pid; /* the process that created the engine (its copy thread lives there) */
  /* The deferred copies' queue: FIFO, served by one copy thread (started at the first). */
  pthread_mutex_t qlock;
  pthread_cond_t qcv; /* a job was queued, or one finished */
  defer_job jobs[JOB_MAX];
  uint64_t qhead, qtail; /* under qlock: jobs[qhead % JOB_MAX] is the one being copied */
  int copier;            /* under qlock: 1 the copy thread runs, -1 it could not start */
  int stop;              /* under qlock: pw_engine_destroy asks the copy thread to end */
  dev_state *running;    /* under qlock: the device of the job being copied in, NULL between */
  /* Held from a deferred copy's queueing to the last of its side-stream work: the side streams
   * then see the jobs' work in ticket order, the copy thread's order (a later job's wait queued
   * first would hold an earlier job's DMAs behind it until the later copy-in is done). */
  pthread_mutex_t elock;
  _Atomic uint64_t progress; /* tickets the copy thread stored: drain_jobs sees it move */
};

pw_engine *pw_engine_create(const pw_ops *ops, const pw_engine_config *cfg) {
  pw_engine *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->ops = ops;
  e->cfg = *cfg;
  e->pid = getpid();
  if (e->cfg.chunk < 64 * 1024) e->cfg.chunk = 64 * 1024;
  /* The ring is used in pieces of half its size, each pipelined through chunks.  With at least
   * RING_MIN_CHUNKS chunks, a piece holds two, so the copy-in of one overlaps the DMA of the other,
   * and one piece's D2D runs while the next is being filled.  Below it every piece pays a wait and
   * a D2D for a sliver (a 64-byte ring took 1.1 s per 16 MiB; 1 byte made pieces of 0 bytes and
   * never finished). */
  size_t ring_min = RING_MIN_CHUNKS * e->cfg.chunk;
  if (e->cfg.device_ring && e->cfg.device_ring < ring_min) {
    pw_log(PW_LOG_WARN,
           "PINWHEEL_DEVICE_RING=%zu is below %d staging chunks (PINWHEEL_CHUNK=%zu): using %zu "
           "(0 turns the ring off)",
           e->cfg.device_ring, RING_MIN_CHUNKS, e->cfg.chunk, ring_min);
    e->cfg.device_ring = ring_min;
  }
  pthread_mutex_init(&e->init_lock, NULL);
  pthread_mutex_init(&e->qlock, NULL);
  pthread_mutex_init(&e->elock, NULL);
  pthread_cond_init(&e->qcv, NULL);
  return e;
}

/* ---- events ---- */

static int push_ptr(void ***v, int *n, int *cap, void *p) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    void **q = realloc(*v, (size_t)nc * sizeof *q);
    if (!q) return -1;
    *v = q;
    *cap = nc;
  }
  (*v)[(*n)++] = p;
  return 0;
}

/* Every event created can be in the free list at once (a large reservation retires hundreds of
 * slots together), so the free list's capacity follows the number of events. */
static void *get_event(const pw_ops *ops, dev_state *d) {
  if (d->nfree > 0) return d->free_ev[--d->nfree];
  void *ev = NULL;
  if (ops->event_create(&ev) != 0 || !ev) return NULL;
  if (push_ptr(&d->all_ev, &d->nall, &d->capall, ev) != 0) return NULL;
  if (d->capfree < d->nall) {
    void **q = realloc(d->free_ev, (size_t)d->capall * sizeof *q);
    if (!q) return NULL;
    d->free_ev = q;
    d->capfree = d->capall;
  }
  return ev;
}

static void put_event(dev_state *d, void *ev) {
  d->free_ev[d->nfree++] = ev;
}

/* ---- arenas ----
 * A slot is taken at reservation (BUSY: its owner is writing the memory, or has a DMA or a copy-out
 * in flight on it) and becomes EVENT when its owner publishes the event after which the memory is
 * free.  A reservation goes where no BUSY slot is: at the head if it can (round robin), else in
 * any gap between busy slots, so a copy whose chunks wait on the GPU (a D2H behind a long kernel)
 * does not hold up copies that find room elsewhere.  Every EVENT slot the new range overlaps is
 * retired first.  Reservations and publications happen under the device's lock; waits happen
 * without it: the host wait on a pinned chunk's event (SYNCING: one thread waits, the others wait
 * for it), and the wait for another copy's BUSY slot. */

enum { SLOT_FREE = 0, SLOT_BUSY, SLOT_EVENT, SLOT_SYNCING };
/* reserve: only busy slots are in the way, and the caller holds some itself */
#define AGAIN (-1000)
/* retire: the lock was dropped for a wait (the slot is free, the arena may have changed) */
#define DROPPED (-1001)

static void ev_put(dev_state *d, void *ev) {
  pthread_mutex_lock(&d->lock);
  put_event(d, ev);
  pthread_mutex_unlock(&d->lock);
}

static void *ev_get(const pw_ops *ops, dev_state *d) {
  pthread_mutex_lock(&d->lock);
  void *ev = get_event(ops, d);
  pthread_mutex_unlock(&d->lock);
  return ev;
}

static int hits(const slot *s, size_t off, size_t len) {
  return s->state != SLOT_FREE && s->off < off + len && off < s->off + s->len;
}

/* 1 when [off, off+len) meets a slot in one of the states of mask (1 << SLOT_*). */
static int meets(const arena *a, size_t off, size_t len, unsigned mask) {
  for (unsigned i = 0; i < ARENA_SLOTS; i++)
    if ((mask >> a->q[i].state) & 1 && hits(&a->q[i], off, len)) return 1;
  return 0;
}

static void free_slot(dev_state *d, arena *a, slot *s) {
  if (s->ev) put_event(d, s->ev);
  s->ev = NULL;
  s->state = SLOT_FREE;
  a->count--;
}

/* Make an EVENT slot's memory reusable, the lock held (dropped while waiting).  Returns 0 when it
 * is free, DROPPED when the lock was dropped (then it is free too, but the arena may have
 * changed), or a CUDA error. */
static int retire(const pw_ops *ops, dev_state *d, arena *a, int which, slot *s) {
  if (!s->ev) {
    free_slot(d, a, s);
    return 0;
  }
  if (which == ARENA_RING) { /* the device waits: enqueued, under the lock, before the reuse */
    int rc = DROP_DEPENDENCY == 1 ? 0 : ops->stream_wait_event(d->side, s->ev);
    if (!rc) free_slot(d, a, s);
    return rc;
  }
  int q = ops->event_query(s->ev);
  if (q == 0) {
    free_slot(d, a, s);
    return 0;
  }
  if (q != 1) return q;
  /* Only this thread frees a SYNCING slot, so its event cannot be recycled meanwhile. */
  s->state = SLOT_SYNCING;
  void *ev = s->ev;
  pthread_mutex_unlock(&d->lock);
  uint64_t t0 = pw_now_ns();
  int rc = ops->event_sync(ev);
  pw_add(&pw_st.wait_space_ns, pw_now_ns() - t0);
  pw_add(&pw_st.wait_space_events, 1);
  pthread_mutex_lock(&d->lock);
  if (rc)
    s->state = SLOT_EVENT;
  else
    free_slot(d, a, s);
  pthread_cond_broadcast(&d->cv);
  return rc ? rc : DROPPED;
}

/* Where len bytes can go without meeting a slot of mask, trying the head first; -1 if nowhere. */
static long long place(const arena *a, size_t len, unsigned mask) {
  size_t o = a->head + len > a->size ? 0 : a->head;
  if (!meets(a, o, len, mask)) return (long long)o;
  if (!meets(a, 0, len, mask)) return 0;
  for (unsigned i = 0; i < ARENA_SLOTS; i++) { /* right after a live slot */
    const slot *s = &a->q[i];
    if (s->state == SLOT_FREE || s->off + s->len + len > a->size) continue;
    if (!meets(a, s->off + s->len, len, mask)) return (long long)(s->off + s->len);
  }
  return -1;
}

/* Reserve len bytes of arena a for the calling copy, which holds `mine` busy slots of it already:
 * a BUSY slot is taken, its index in *idx.  Returns 0, AGAIN (only busy slots are in the way:
 * the caller must move its own copy on first, since waiting could deadlock when those are its
 * own, or another copy waits for one of its) or a CUDA error. */
static int reserve(const pw_ops *ops, dev_state *d, arena *a, int which, size_t len, int mine,
                   size_t *off, unsigned *idx) {
  const unsigned busy = 1u << SLOT_BUSY | 1u << SLOT_SYNCING, live = busy | 1u << SLOT_EVENT;
  int rc = 0;
  pthread_mutex_lock(&d->lock);
  for (;;) {
    long long o = place(a, len, live); /* a gap: nothing to retire */
    if (o < 0) o = place(a, len, busy);
    if (o >= 0 && a->count == ARENA_SLOTS) { /* no slot record left: retire some published one */
      unsigned i = 0;
      while (i < ARENA_SLOTS && a->q[i].state != SLOT_EVENT)
        i++;
      if (i == ARENA_SLOTS) {
        o = -1;
      } else {
        if ((rc = retire(ops, d, a, which, &a->q[i])) && rc != DROPPED) break;
        rc = 0;
        continue;
      }
    }
    if (o < 0) { /* busy slots everywhere: another copy moves them on without any lock of ours */
      if (mine) {
        rc = AGAIN;
        break;
      }
      uint64_t t0 = pw_now_ns();
      pthread_cond_wait(&d->cv, &d->lock);
      pw_add(&pw_st.wait_lock_ns, pw_now_ns() - t0);
      continue;
    }
    int again = 0;
    for (unsigned i = 0; i < ARENA_SLOTS && !again; i++) {
      slot *s = &a->q[i];
      if (s->state != SLOT_EVENT || !hits(s, (size_t)o, len)) continue;
      rc = retire(ops, d, a, which, s);
      if (rc == DROPPED)
        again = 1; /* the lock was dropped: look again */
      else if (rc)
        break;
    }
    if (rc && rc != DROPPED) break;
    rc = 0;
    if (again) continue;
    unsigned i = 0;
    while (a->q[i].state != SLOT_FREE) /* count < ARENA_SLOTS: there is one */
      i++;
    a->q[i] = (slot){.off = (size_t)o, .len = len, .ev = NULL, .state = SLOT_BUSY};
    a->count++;
    a->head = (size_t)o + len;
    *off = (size_t)o;
    *idx = i;
    break;
  }
  pthread_mutex_unlock(&d->lock);
  return rc;
}

/* The slot's memory is free once ev completed (NULL: free now); wakes those waiting for it. */
static void publish(dev_state *d, arena *a, unsigned idx, void *ev) {
  pthread_mutex_lock(&d->lock);
  a->q[idx].ev = ev;
  a->q[idx].state = SLOT_EVENT;
  if (!ev) free_slot(d, a, &a->q[idx]);
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->lock);
}

/* ---- per-device state ---- */

/* The device's NUMA node on a host of several (-1: one node, or unknown): the pool is allocated
 * with that node preferred (numa.h), and the staging threads are placed there. */
static int numa_node_of(const pw_ops *ops, int device) {
  char bus[64];
  if (pw_numa_nodes() < 2) return -1;
  if (ops->pci_bus_id(device, bus, (int)sizeof bus) != 0) {
    ops->clear_error();
    return -1;
  }
  return pw_numa_node_of_pci(bus);
}

/* After the pool's allocation: where it landed, for the summary, and the threads' placement. */
static void numa_after_pool(int device, int node, const void *pool) {
  if (node < 0) return;
  int on = pw_numa_node_of_addr(pool);
  if (device >= 0 && device < PW_NUMA_DEVICES) {
    atomic_store(&pw_st.numa_device_node[device], (uint64_t)node + 1);
    atomic_store(&pw_st.numa_pool_node[device], on >= 0 ? (uint64_t)on + 1 : 0);
  }
  pw_log(PW_LOG_INFO, "device %d on NUMA node %d: pinned pool on node %d", device, node, on);
  pw_numa_place(node);
}

/* Allocate a device's pinned pool, ring and side stream, in the calling thread's current context
 * (the device's, checked_reason saw to it); publishes the status last.  Runs under init_lock, on
 * the thread of the device's first eligible copy, which waits for it (about 30 ms, once). */
static void setup_dev(pw_engine *e, dev_state *d) {
  const pw_ops *ops = d->ops;
  int device = d->device, status = DEV_READY;
  uint64_t t_setup = pw_now_ns();
  /* allocations must not break a stream capture another thread runs in global mode */
  int mode = ops->relax_capture(0, 0);
  size_t pool = e->cfg.host_pool;
  if (pool < (MAX_PENDING + 2) * (size_t)(64 << 10)) pool = (MAX_PENDING + 2) * (size_t)(64 << 10);
  void *p = NULL;
  int node = e->cfg.numa ? numa_node_of(ops, device) : -1;
  cpu_set_t cpus;
  /* a node whose CPUs this process may not use (numactl --cpunodebind elsewhere, a memory-only
   * node) gets neither the pool nor the threads */
  if (node >= 0 && pw_numa_cpus(node, &cpus) == 0) node = -1;
  int prefer = node >= 0 && pw_numa_prefer(node) == 0;
  /* one page more than the arena: the deferral flag lives there, in pinned, mapped memory */
  int rc = ops->host_alloc(&p, pool + 4096);
  if (prefer) pw_numa_unprefer();
  if (rc != 0 || !p) {
    ops->clear_error();
    /* a first copy made at exit, after CUDA's own exit handlers tore it down: nothing is wrong
     * with the program, and its copy goes to CUDA, which answers it as it answers any call then */
    pw_log(rc == PW_OPS_ERR_UNLOADING ? PW_LOG_INFO : PW_LOG_WARN,
           "cannot allocate %zu MiB of pinned staging memory (CUDA error %d%s); copies to device "
           "%d go to CUDA unchanged",
           pool >> 20, rc, rc == PW_OPS_ERR_UNLOADING ? ": CUDA is shutting down" : "", device);
    status = DEV_FAILED;
  } else {
    d->pinned = p;
    d->host.size = pool;
    numa_after_pool(device, node, p);
    pw_add(&pw_st.pinned_bytes_allocated, pool);
    size_t ring = e->cfg.device_ring;
    if (ring) {
      void *r = NULL, *s = NULL;
      if ((rc = ops->device_alloc(&r, ring)) != 0 || !r) {
        ops->clear_error();
        pw_log(PW_LOG_INFO,
               "cannot allocate a %zu MiB device ring on device %d (CUDA error %d): staging "
               "without it (the DMA runs on the caller's stream)",
               ring >> 20, device, rc);
      } else if ((rc = ops->stream_create(&s)) != 0) {
        ops->clear_error();
        ops->device_free(r);
        pw_log(PW_LOG_INFO, "cannot create a side stream (CUDA error %d): staging without ring",
               rc);
      } else {
        d->ring = r;
        d->side = s;
        d->dring.size = ring;
        pw_add(&pw_st.ring_bytes_allocated, ring);
        /* deferral needs the side stream to wait on a host value: try it once (it holds) */
        _Atomic uint32_t *flag = (_Atomic uint32_t *)(void *)((char *)p + pool);
        atomic_store(flag, TICKET_START);
        d->ticket = TICKET_START;
        if (ops->wait_host_value &&
            ops->wait_host_value(s, (const uint32_t *)flag, TICKET_START) == 0) {
          d->flag = flag;
        } else {
          ops->clear_error();
        }
      }
    } else {
      pw_log(PW_LOG_INFO, "device ring disabled: the DMA runs on the caller's stream");
    }
    pw_log(PW_LOG_INFO, "device %d: %zu MiB pinned staging, %zu MiB device ring", device,
           pool >> 20, d->dring.size >> 20);
  }
  ops->relax_capture(1, mode);
  pw_add(&pw_st.setup_ns, pw_now_ns() - t_setup);
  atomic_store_explicit(&d->status, status, memory_order_release);
}

static pw_engine *_Atomic exit_engine;
static void drain_jobs(pw_engine *e, int only, int forsake);

/* At exit, once the deferred copy-ins are done: what pinwheel queued on each device's side stream
 * finishes first (at most 2 s a device: its DMAs may wait for the program's own streams), so a
 * trace flushed after this has the records of the last copies' DMAs, and CUDA tears down no
 * stream with a deferred DMA still in flight.  The probe of side_error needs no device switch (it
 * pushes the side stream's context and pops it after).  An event still pending at the end is not
 * given back: the process is ending. */
static int side_error(dev_state *d, void **probe);
/* d's side stream's work done, or an error of it, or 2 s passed: the probe event still pending
 * then, else NULL. */
static void *settle_side(dev_state *d) {
  void *probe = NULL;
  for (int t = 0; t < 2000 && !side_error(d, &probe) && probe; t++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  return probe;
}
static void settle_side_streams(pw_engine *e) {
  for (int i = 0; i < MAX_DEVICES; i++) {
    dev_state *d = atomic_load(&e->dev[i]);
    if (d && atomic_load(&d->status) == DEV_READY && d->side) (void)settle_side(d);
  }
}

/* At exit, before CUDA's own exit handlers (registered after them, at the first deferred copy):
 * every deferred copy-in done (its DMAs wait for it), and the side streams' work with it. */
static void drain_at_exit(void) {
  pw_engine *e = atomic_load(&exit_engine);
  if (e && getpid() == e->pid) {
    drain_jobs(e, -1, 0);
    settle_side_streams(e);
  }
}
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void register_exit(void) {
  atexit(drain_at_exit);
}

/* The device's state when it is ready; otherwise NULL and *reason says why.  The first call for a
 * device sets it up on the calling thread, under init_lock (other threads' first copies to any
 * device wait for it there), and publishes it once set up: a thread that finds it published never
 * takes the lock. */
static dev_state *get_dev(pw_engine *e, const pw_ops *ops, int device, int *reason) {
  *reason = PW_FB_NO_STATE;
  if (device < 0 || device >= MAX_DEVICES) return NULL;
  dev_state *d = atomic_load(&e->dev[device]);
  if (!d) {
    pthread_mutex_lock(&e->init_lock);
    d = atomic_load(&e->dev[device]);
    if (!d && (d = calloc(1, sizeof *d)) != NULL) {
      pthread_mutex_init(&d->lock, NULL);
      pthread_cond_init(&d->cv, NULL);
      d->device = device;
      d->engine = e;
      d->ops = ops;
      setup_dev(e, d);
      atomic_store(&e->dev[device], d);
    }
    pthread_mutex_unlock(&e->init_lock);
    if (!d) return NULL;
  }
  return atomic_load_explicit(&d->status, memory_order_acquire) == DEV_READY ? d : NULL;
}

/* Something failed after part of a copy was enqueued: drain what we enqueued, stop staging on
 * this device (its arenas can no longer be trusted), and let the caller make the real call. */
static int fail_device(const pw_ops *ops, dev_state *d, void *stream, int rc) {
  if (d->side) ops->stream_sync(d->side);
  ops->stream_sync(stream);
  ops->clear_error();
  atomic_store_explicit(&d->status, DEV_FAILED, memory_order_release);
  pw_log(PW_LOG_ERROR,
         "a CUDA call of the staging engine failed (error %d); device %d's copies go to CUDA "
         "unchanged from now on",
         rc, d->device);
  return -1 - PW_FB_INTERNAL;
}

/* The staging chunk: no larger than the option, and small enough that MAX_PENDING + 2 chunks
 * fit in the pinned arena. */
static size_t chunk_size(pw_engine *e, dev_state *d) {
  size_t c = e->cfg.chunk, fit = d->host.size / (MAX_PENDING + 2);
  if (c > fit)
    c = fit & ~(size_t)0xFFFF; /* whole 64 KiB units: pool >= (MAX_PENDING + 2) x 64 KiB */
  return c;
}

static void batch_begin(pw_engine *e, pw_batch *b) {
  pw_batch_begin(b, e->cfg.threads, 0); /* plain stores: the pool stays in the cache */
}

/* Ends the batch (every pushed segment copied) and accounts its time. */
static void batch_end(pw_batch *b, uint64_t t0) {
  pw_batch_end(b);
  pw_add(&pw_st.staging_memcpy_ns, pw_now_ns() - t0);
}

/* A chunk being copied in (segment seg of the batch) whose DMA is not issued yet; idx is its
 * BUSY slot in the pinned arena. */
typedef struct h2d_pending {
  size_t hoff, len, at; /* at: offset of the DMA's destination from the piece's base */
  uint64_t seg;
  unsigned idx;
} h2d_pending;

/* The chunks a copy holds BUSY in the pinned arena, oldest first. */
typedef struct h2d_pipe {
  h2d_pending q[AHEAD];
  int head, nq;
} h2d_pipe;

/* After a failure, once fail_device drained the streams: every slot still held is free. */
static void abandon_pipe(dev_state *d, h2d_pipe *p) {
  for (int k = 0; k < p->nq; k++)
    publish(d, &d->host, p->q[(p->head + k) % AHEAD].idx, NULL);
  p->nq = 0;
}

/* Wait for the oldest pending chunk to be copied in, then DMA it to dst on stream; its slot is
 * published behind the DMA's event.  Returns 0 or a CUDA error (the chunk then stays pending). */
static int issue_dma(const pw_ops *ops, dev_state *d, pw_batch *b, h2d_pipe *pp, char *dst,
                     void *stream, void **last) {
  const h2d_pending *p = &pp->q[pp->head];
  pw_batch_wait(b, p->seg);
  void *ev = ev_get(ops, d);
  if (!ev) return -1;
  int rc;
  if ((rc = ops->copy_async(dst + p->at, d->pinned + p->hoff, p->len, PW_DIR_H2D, stream)) ||
      (rc = ops->event_record(ev, stream))) {
    ev_put(d, ev);
    return rc;
  }
  publish(d, &d->host, p->idx, ev);
  *last = ev;
  pp->head = (pp->head + 1) % AHEAD;
  pp->nq--;
  return 0;
}

/* Copy [src, src+n) into pinned chunks and DMA each to dst on `stream` as soon as it is in:
 * up to AHEAD chunks are being copied by the pool while the oldest is handed to the DMA engine.
 * When the pinned arena's front is busy while this copy holds chunks, the oldest one's DMA is
 * issued first (AGAIN).  On failure the batch's segments are waited for (no worker writes pinned
 * memory afterwards), the chunks still pending stay in pp, and the CUDA error is returned. */
static int pipeline_h2d(pw_engine *e, const pw_ops *ops, dev_state *d, pw_batch *b, h2d_pipe *pp,
                        char *dst, const char *src, size_t n, void *stream, void **last) {
  size_t chunk = chunk_size(e, d);
  int rc = 0;
  for (size_t pos = 0; pos < n || pp->nq > 0;) {
    if (pos < n && pp->nq < AHEAD) {
      size_t clen = n - pos < chunk ? n - pos : chunk, hoff;
      unsigned idx;
      rc = reserve(ops, d, &d->host, ARENA_HOST, clen, pp->nq, &hoff, &idx);
      if (rc && rc != AGAIN) break;
      if (!rc) {
        h2d_pending *p = &pp->q[(pp->head + pp->nq) % AHEAD];
        p->hoff = hoff, p->len = clen, p->at = pos, p->idx = idx;
        p->seg = pw_batch_push(b, d->pinned + hoff, src + pos, clen, PW_PART_STREAM);
        pp->nq++;
        pos += clen;
        if (pos < n && pp->nq < AHEAD) continue; /* keep the pool fed before waiting on it */
      }
    }
    if ((rc = issue_dma(ops, d, b, pp, dst, stream, last))) break;
  }
  if (rc && b->next_seg > 0) pw_batch_wait(b, b->next_seg - 1);
  return rc;
}

/* A staged H2D copy is over once its last chunk is in pinned memory; up to a pool of its chunks
 * are still to be DMA'd.  If the pool's workers copied them, they stay awake for about as long
 * as those DMAs take (pw_pool_keep_awake; the bytes at 24 GB/s, at most 2 ms): DMAs of lines
 * written by cores that went to sleep can run several times slower (measured:
 * docs/RESULTS.md, "The copy-bound loop's last DMAs").  The price: the workers spin, taking CPUs.
 */
static void keep_workers_awake(const dev_state *d, const pw_batch *b, size_t n) {
  if (b->helpers <= 0) return;
  pw_pool_keep_awake((n < d->host.size ? n : d->host.size) / 24); /* 24 bytes a ns */
}

static int stage_h2d_ring(pw_engine *e, dev_state *d, const pw_transfer *c) {
  const pw_ops *ops = c->ops;
  size_t piece_max = d->dring.size / 2;
  char *dst = c->dst;
  const char *src = c->src;
  int rc = 0, held = 0; /* held: ridx is this copy's BUSY ring slot */
  unsigned ridx = 0;
  h2d_pipe pp = {.head = 0, .nq = 0};
  pw_batch b;
  uint64_t t0 = pw_now_ns();
  batch_begin(e, &b);
  for (size_t pos = 0; pos < c->n;) {
    size_t plen = c->n - pos < piece_max ? c->n - pos : piece_max, roff;
    void *last = NULL;
    /* no busy slot of this copy is left in either arena here: the previous piece published its */
    if ((rc = reserve(ops, d, &d->dring, ARENA_RING, plen, 0, &roff, &ridx))) break;
    held = 1;
    if ((rc = pipeline_h2d(e, ops, d, &b, &pp, d->ring + roff, src + pos, plen, d->side, &last)))
      break;
    void *fev = ev_get(ops, d);
    if (!fev) {
      rc = -1;
      break;
    }
    if ((rc = ops->stream_wait_event(c->stream, last)) ||
        (rc = ops->copy_async(dst + pos, d->ring + roff, plen, PW_DIR_D2D, c->stream)) ||
        (rc = ops->event_record(fev, c->stream))) {
      ev_put(d, fev);
      break;
    }
    publish(d, &d->dring, ridx, fev);
    held = 0;
    pw_add(&pw_st.ring_pieces, 1);
    pos += plen;
  }
  batch_end(&b, t0);
  if (!rc) {
    keep_workers_awake(d, &b, c->n);
    return PW_PATH_RING;
  }
  int r = fail_device(ops, d, c->stream, rc);
  abandon_pipe(d, &pp);
  if (held) publish(d, &d->dring, ridx, NULL);
  return r;
}

static int stage_h2d_pinned(pw_engine *e, dev_state *d, const pw_transfer *c) {
  pw_batch b;
  void *last = NULL;
  h2d_pipe pp = {.head = 0, .nq = 0};
  uint64_t t0 = pw_now_ns();
  batch_begin(e, &b);
  int rc = pipeline_h2d(e, c->ops, d, &b, &pp, c->dst, c->src, c->n, c->stream, &last);
  batch_end(&b, t0);
  if (!rc) {
    keep_workers_awake(d, &b, c->n);
    return PW_PATH_PINNED;
  }
  int r = fail_device(c->ops, d, c->stream, rc);
  abandon_pipe(d, &pp);
  return r;
}

/* Device -> pageable: up to D2H_DEPTH chunks are between their DMA and the end of their copy-out;
 * the copy-out of chunk k (spread over the pool) runs while the DMA of chunk k+1.. fills the next
 * ones.  An untouched destination is mapped ahead: once the first DMAs are queued, its pages are
 * mapped by the pool and by the caller while the stream's earlier work (the kernels that produce
 * the bytes) still runs, and the copy-out writes into mapped memory.  Returns when every byte is
 * in dst.  A chunk's slot stays BUSY until it is copied out; the waits on the DMAs hold no lock.
 * When the pinned arena's front is busy while this copy holds chunks (AGAIN), the oldest chunk is
 * copied out before anything more is reserved. */
static int stage_d2h(pw_engine *e, dev_state *d, const pw_transfer *c) {
  const pw_ops *ops = c->ops;
  size_t chunk = chunk_size(e, d);
  struct {
    size_t hoff, pos, len;
    void *ev;
    uint64_t seg;
    unsigned idx;
  } q[D2H_DEPTH];
  int head = 0, nq = 0, nout = 0, rc = 0; /* q[head .. head+nout) are being copied out */
  size_t pos = 0;
  /* An untouched destination (what `.cpu()` hands us every step): hugepages (the default)
   * advises huge pages for its 2 MiB-aligned interior — 1/512 of the faults, and the program's
   * later free unmaps 2 MiB pages (measured: 134 MB freed in 0.8 ms instead of 8.8) — and maps it
   * ahead, in whole huge pages; populate maps 4 KiB pages ahead; touch lets the copy-out fault
   * them.  Measured in docs/RESULTS.md: hugepages fastest, touch slowest. */
  /* pinwheel writes into dst below: never onto a page a deferred copy still guards (the
   * destination of this copy may be the source of an earlier one) */
  if (e->cfg.guard) e->cfg.guard->wait(c->dst, c->n);
  int plan = pw_fresh_plan(c->dst, c->n);
  if (plan & PW_DEST_FRESH) pw_add(&pw_st.d2h_fresh, 1);
  if (plan & PW_DEST_ADVISED) pw_add(&pw_st.d2h_advised, 1);
  int map = (plan & PW_DEST_MAP) != 0; /* the destination is still to be mapped ahead */
  pw_batch b;
  uint64_t t0 = pw_now_ns();
  batch_begin(e, &b);
  uint64_t map_seg = UINT64_MAX; /* the mapping's segment, while the caller can help with it */
  while (pos < c->n || nq > 0) {
    int stuck = 0; /* the arena's front is busy: move this copy's own chunks on first */
    while (pos < c->n && nq < D2H_DEPTH) {
      size_t clen = c->n - pos < chunk ? c->n - pos : chunk, hoff;
      unsigned idx;
      rc = reserve(ops, d, &d->host, ARENA_HOST, clen, nq, &hoff, &idx);
      if (rc == AGAIN) {
        rc = 0;
        stuck = 1;
        break;
      }
      if (rc) goto fail;
      int i = (head + nq) % D2H_DEPTH;
      q[i].hoff = hoff, q[i].pos = pos, q[i].len = clen, q[i].idx = idx, q[i].ev = NULL;
      nq++;
      void *ev = ev_get(ops, d);
      if (!ev) {
        rc = -1;
        goto fail;
      }
      if ((rc = ops->copy_async(d->pinned + hoff, (const char *)c->src + pos, clen, PW_DIR_D2H,
                                c->stream)) ||
          (rc = ops->event_record(ev, c->stream))) {
        ev_put(d, ev);
        goto fail;
      }
      q[i].ev = ev;
      pos += clen;
    }
    if (map) { /* the first DMAs are queued: map the pages while they wait for the GPU */
      map = 0;
      map_seg = pw_batch_push(&b, c->dst, NULL, c->n, PW_PART_MAP);
      pw_add(&pw_st.d2h_mapped_ahead, 1);
    }
    if (nout < nq) { /* the oldest chunk not yet handed to the pool: wait for its DMA */
      int i = (head + nout) % D2H_DEPTH;
      if (map_seg != UINT64_MAX) { /* help map until the DMA is done or nothing is left */
        while ((rc = ops->event_query(q[i].ev)) == 1 && pw_batch_help(&b, map_seg))
          ;
        if (rc != 0 && rc != 1) goto fail;
        if (rc == 1) { /* every part taken: see them done, then wait for the GPU holding no lane */
          pw_batch_wait(&b, map_seg);
          map_seg = UINT64_MAX;
        }
      }
      if ((rc = ops->event_sync(q[i].ev))) goto fail;
      q[i].seg = pw_batch_push(&b, (char *)c->dst + q[i].pos, d->pinned + q[i].hoff, q[i].len, 0);
      nout++;
    }
    /* retire what the pool finished; block on the oldest only when nothing else can move */
    while (nout > 0 && (pw_batch_done(&b, q[head].seg) ||
                        (nout == nq && (nq == D2H_DEPTH || pos >= c->n || stuck)))) {
      pw_batch_wait(&b, q[head].seg);
      publish(d, &d->host, q[head].idx, q[head].ev);
      head = (head + 1) % D2H_DEPTH;
      nq--, nout--;
    }
  }
  batch_end(&b, t0);
  return PW_PATH_D2H;
fail:
  batch_end(&b, t0); /* no worker touches pinned memory or dst after this */
  int r = fail_device(ops, d, c->stream, rc);
  /* the streams are drained: the chunks still held are free, their events complete */
  for (int k = 0; k < nq; k++)
    publish(d, &d->host, q[(head + k) % D2H_DEPTH].idx, q[(head + k) % D2H_DEPTH].ev);
  return r;
}

/* ---- deferred H2D staging ---- */

/* The copy thread's work for one job: each chunk's guarded bytes into its pinned chunk, the pages
 * read released, then the chunk's ticket stored (release order, after the copy routine's store
 * fence), which lets the side stream's DMA of that chunk go.  A job of a device a reset forsook
 * (skip) is not begun, or not finished: its guard is released (if the reset has not already), and
 * its pinned pool not touched; all its tickets are stored.  No CUDA call, no wait for the GPU, no
 * lock a program thread can hold, no malloc. */
/* Chunk p of the job into its pinned chunk, by the pool: the guarded bytes from src (the rest was
 * copied at the call).  Returns the batch segment, or UINT64_MAX when the pool has nothing to copy.
 */
static uint64_t push_chunk(pw_batch *b, const defer_job *j, unsigned p) {
  size_t at = j->ch[p].at, end = at + j->ch[p].len;
  char *to = j->d->pinned + j->ch[p].hoff;
  size_t a = at < j->lo ? j->lo : at, z = end > j->hi ? j->hi : end;
  return a < z ? pw_batch_push(b, to + (a - at), j->src + a, z - a, PW_PART_STREAM) : UINT64_MAX;
}

static void run_job(pw_engine *e, defer_job *j) {
  const pw_guard_ops *g = e->cfg.guard;
  dev_state *d = j->d;
  if (atomic_load(&d->skip)) { /* its device was reset: its pinned pool may be gone already */
    if (j->guard_id >= 0) g->release(j->guard_id);
    pw_add(&pw_st.defer_aborted, 1);
    return;
  }
  uint64_t t0 = pw_now_ns();
  pw_batch b;
  batch_begin(e, &b);
  uint64_t seg[JOB_CHUNKS];
  unsigned pushed = 0;
  int aborted = 0;
  for (unsigned k = 0; k < j->nchunks && !aborted; k++) {
    /* keep a few chunks ahead in the pool, then finish the oldest */
    for (; pushed < j->nchunks && pushed < k + AHEAD; pushed++) {
      if (atomic_load(&d->skip)) { /* a reset waits for this job to end: the pool is still there */
        aborted = 1;
        break;
      }
      seg[pushed] = push_chunk(&b, j, pushed);
    }
    if (aborted) break;
    if (seg[k] != UINT64_MAX) pw_batch_wait(&b, seg[k]);
    size_t end = j->ch[k].at + j->ch[k].len;
    if (j->guard_id >= 0) g->release_upto(j->guard_id, end < j->hi ? end : j->hi);
    atomic_store_explicit(d->flag, j->ticket0 + k + 1, memory_order_release);
    atomic_fetch_add_explicit(&e->progress, 1, memory_order_relaxed);
  }
  pw_batch_end(&b); /* aborted: no worker writes the job's chunks after this */
  if (aborted) {    /* every ticket of the job, so no wait of the side stream's is left for it */
    atomic_store_explicit(d->flag, j->ticket0 + j->nchunks, memory_order_release);
    pw_add(&pw_st.defer_aborted, 1);
  }
  if (j->guard_id >= 0) g->release(j->guard_id);
  pw_add(&pw_st.defer_copyin_ns, pw_now_ns() - t0);
}

static void *copier_main(void *arg) {
  pw_engine *e = arg;
  pw_numa_thread numa = {0}; /* the staging threads' NUMA placement this thread follows */
  pthread_mutex_lock(&e->qlock);
  for (;;) {
    while (e->qhead == e->qtail && !e->stop)
      pthread_cond_wait(&e->qcv, &e->qlock);
    if (e->qhead == e->qtail) { /* stopping, nothing left */
      e->copier = 0;
      pthread_cond_broadcast(&e->qcv);
      pthread_mutex_unlock(&e->qlock);
      return NULL;
    }
    defer_job *j = &e->jobs[e->qhead % JOB_MAX];
    e->running = j->d; /* a reset of that device waits for the job (drain_jobs) */
    pthread_mutex_unlock(&e->qlock);
    pw_numa_apply(&numa);
    run_job(e, j);
    pthread_mutex_lock(&e->qlock);
    e->running = NULL;
    e->qhead++;
    pthread_cond_broadcast(&e->qcv);
  }
  return NULL;
}

/* Start the copy thread if it is not running (qlock held); 1 when it runs. */
static int copier_start(pw_engine *e) {
  if (!e->copier) {
    e->copier = pw_spawn(copier_main, e, 0) == 0 ? 1 : -1;
    atomic_store(&exit_engine, e); /* the exit handler waits for the queue */
    pthread_once(&exit_once, register_exit);
  }
  return e->copier > 0;
}

/* Queue a job (FIFO) and hand out its tickets; returns its position in the queue.  Without a copy
 * thread (it could not be started) the job runs here. */
static uint64_t queue_job(pw_engine *e, defer_job *j) {
  pthread_mutex_lock(&e->qlock);
  while (e->qtail - e->qhead >= JOB_MAX) /* the copy thread moves on: only its own DMAs delay it */
    pthread_cond_wait(&e->qcv, &e->qlock);
  j->ticket0 = j->d->ticket; /* under qlock: tickets follow the queue's order */
  j->d->ticket += j->nchunks;
  uint64_t pos = e->qtail;
  if (copier_start(e)) {
    e->jobs[e->qtail % JOB_MAX] = *j;
    e->qtail++;
    pthread_cond_broadcast(&e->qcv);
    pthread_mutex_unlock(&e->qlock);
  } else {
    pthread_mutex_unlock(&e->qlock);
    run_job(e, j);
  }
  return pos;
}

/* Wait until the queue holds nothing up to position pos (UINT64_MAX: nothing at all). */
static void wait_jobs(pw_engine *e, uint64_t pos) {
  pthread_mutex_lock(&e->qlock);
  while (e->copier > 0 && e->qhead != e->qtail && (pos == UINT64_MAX || e->qhead <= pos))
    pthread_cond_wait(&e->qcv, &e->qlock);
  pthread_mutex_unlock(&e->qlock);
}

/* An error of d's side stream, 0 if none is known: an event recorded on it and queried (never a
 * wait), with the stream's context pushed above the calling thread's own and popped after
 * (push_context: the thread's context, primary or not, comes back as it was).  *probe keeps the
 * event between calls (NULL once it completed); it is d's.  What cannot be learnt (the push, or the
 * event's creation, failed) counts as no error.  An error the calling thread had pending is left
 * for the program to read. */
static int side_error(dev_state *d, void **probe) {
  const pw_ops *ops = d->ops;
  int pending = ops->error_pending(), rc = 0;
  if (ops->push_context(d->side)) {
    if (!pending) ops->clear_error();
    return 0;
  }
  if (!*probe && (*probe = ev_get(ops, d)) != NULL && (rc = ops->event_record(*probe, d->side)))
    ev_put(d, *probe), *probe = NULL;
  if (*probe && (rc = ops->event_query(*probe)) != 1) ev_put(d, *probe), *probe = NULL;
  ops->pop_context();
  if (rc == 1) rc = 0; /* pending */
  if (rc && !pending) ops->clear_error();
  return rc;
}

/* The drain of a device reset is over: the copy thread skips the device's jobs it has not begun,
 * and the rest of the one it is in (skip), and this thread waits until it is out of that job.  The
 * guards of the device's jobs still queued are released here (the program may write their sources
 * now; the copy thread, in other devices' jobs first, may reach them later), and, while the pool
 * lives (pool_lives: a reset not yet made), every ticket handed out is stored, so the side stream's
 * waits run through (its DMAs copy whatever the chunks hold: the memory they copy into goes with
 * the reset); once the context is gone, nothing is stored into its freed pool.  Afterwards nothing
 * of pinwheel's touches the pinned pool. */
static void forsake_device(pw_engine *e, dev_state *d, int pool_lives) {
  const pw_guard_ops *g = e->cfg.guard;
  atomic_store(&d->skip, 1);
  pthread_mutex_lock(&e->qlock);
  while (e->copier > 0 && e->running == d)
    pthread_cond_wait(&e->qcv, &e->qlock);
  /* under qlock the copy thread begins no job: those past the one it runs are untouched */
  int ids[JOB_MAX], n = 0;
  for (uint64_t q = e->qhead + (e->running ? 1 : 0); q < e->qtail; q++) {
    defer_job *j = &e->jobs[q % JOB_MAX];
    if (j->d == d && j->guard_id >= 0) ids[n++] = j->guard_id, j->guard_id = -1;
  }
  if (d->flag && pool_lives) atomic_store_explicit(d->flag, d->ticket, memory_order_release);
  pthread_mutex_unlock(&e->qlock);
  for (int i = 0; i < n; i++)
    g->release(ids[i]);
}

#define DRAIN_STALL_NS 2000000000ull

/* Wait for the deferred copy-ins (the copy thread waits for nothing on the GPU: only for its
 * copies of the sources).  At exit and destroy (only -1) the queue is drained until empty.  A
 * device reset (only = its device) waits only for the jobs queued before it began (later ones
 * cannot starve it), and for no more than DRAIN_STALL_NS without a ticket stored; then, with
 * forsake, the reset device is forsaken (forsake_device); without (a quiesce: the context lives
 * on), its later jobs run as they come. */
static void drain_jobs(pw_engine *e, int only, int forsake) {
  uint64_t seen = atomic_load(&e->progress), t0 = pw_now_ns();
  pthread_mutex_lock(&e->qlock);
  uint64_t end = e->qtail; /* a reset waits for the jobs queued before it */
  while (e->copier > 0 && e->qhead != e->qtail && (only < 0 || e->qhead < end)) {
    pthread_mutex_unlock(&e->qlock);
    uint64_t p = atomic_load(&e->progress), now = pw_now_ns();
    if (p != seen) seen = p, t0 = now;
    if (only >= 0 && now - t0 > DRAIN_STALL_NS) {
      pthread_mutex_lock(&e->qlock);
      break;
    }
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    pthread_mutex_lock(&e->qlock);
  }
  pthread_mutex_unlock(&e->qlock);
  dev_state *d = forsake && only >= 0 && only < MAX_DEVICES ? atomic_load(&e->dev[only]) : NULL;
  if (d) forsake_device(e, d, 1);
}

/* [from, to) of src into the job's chunks, on the calling thread. */
static void copy_now(dev_state *d, const defer_job *j, const char *src, size_t from, size_t to) {
  for (unsigned k = 0; k < j->nchunks && from < to; k++) {
    size_t at = j->ch[k].at, end = at + j->ch[k].len;
    size_t a = from > at ? from : at, z = to < end ? to : end;
    if (a < z) memcpy(d->pinned + j->ch[k].hoff + (a - at), src + a, z - a);
  }
}

/* The pinned chunks a deferred copy of n bytes takes: one per chunk, in half the pool (the other
 * half stays for the copies staged at once), at most JOB_CHUNKS.  0 when they do not fit: half the
 * pool is counted in whole chunks, so a copy no larger than half the pool in bytes may still not
 * fit (its last chunk a partial one).  defer_reason and reserve_slots both ask here. */
static unsigned defer_chunks(const dev_state *d, size_t n, size_t chunk) {
  size_t nchunks = (n + chunk - 1) / chunk, cap = d->host.size / 2 / chunk;
  return nchunks <= cap && nchunks <= JOB_CHUNKS ? (unsigned)nchunks : 0;
}

/* Why this H2D copy cannot be deferred, before anything is reserved; -1 when it may be. */
static int defer_reason(const pw_engine *e, const dev_state *d, const pw_transfer *c,
                        size_t chunk) {
  if (!e->cfg.defer) return PW_ND_OFF;
  if (!e->cfg.guard) return PW_ND_NO_GUARD;
  if (c->n < DEFER_MIN) return PW_ND_SMALL;
  if (!d->ring) return PW_ND_NO_RING;
  if (!d->flag) return PW_ND_NO_WAIT_VALUE;
  if (!defer_chunks(d, c->n, chunk) || c->n > d->dring.size / 2) return PW_ND_LARGE;
  int g = e->cfg.guard->available();
  if (g) return PW_ND_GUARD + g;
  return -1;
}

/* The pinned chunks of a deferred copy, one slot per chunk (defer_chunks: defer_reason said they
 * fit).  Fills j's nchunks and ch[].  0, AGAIN (another copy's chunks were in the way while this
 * one held some), or a CUDA error; on failure nothing is held. */
static int reserve_slots(const pw_ops *ops, dev_state *d, defer_job *j, size_t n, size_t chunk,
                         unsigned *idx) {
  unsigned nchunks = defer_chunks(d, n, chunk);
  j->nchunks = nchunks;
  for (unsigned k = 0; k < nchunks; k++) {
    j->ch[k].at = (size_t)k * chunk;
    j->ch[k].len = n - j->ch[k].at < chunk ? n - j->ch[k].at : chunk;
    int rc = reserve(ops, d, &d->host, ARENA_HOST, j->ch[k].len, (int)k, &j->ch[k].hoff, &idx[k]);
    if (rc) {
      for (unsigned i = 0; i < k; i++)
        publish(d, &d->host, idx[i], NULL);
      return rc;
    }
  }
  return 0;
}

/* The side stream's work for a queued job, in ticket order (elock held): per chunk, wait for its
 * ticket, DMA it into the ring, record an event and publish the chunk behind it (pub[k] = 1).  0,
 * or a CUDA error (what was enqueued stays). */
static int enqueue_job(const pw_ops *ops, dev_state *d, const defer_job *j, size_t roff,
                       const unsigned *idx, unsigned char *pub, void **last) {
  for (unsigned k = 0; k < j->nchunks; k++) {
    uint32_t t = j->ticket0 + k + 1;
    int rc;
    if ((DROP_DEPENDENCY != 2 &&
         (rc = ops->wait_host_value(d->side, (const uint32_t *)d->flag, t))) ||
        (rc = ops->copy_async(d->ring + roff + j->ch[k].at, d->pinned + j->ch[k].hoff, j->ch[k].len,
                              PW_DIR_H2D, d->side)))
      return rc;
    void *ev = ev_get(ops, d);
    if (!ev) return -1;
    if ((rc = ops->event_record(ev, d->side))) {
      ev_put(d, ev);
      return rc;
    }
    publish(d, &d->host, idx[k], ev);
    pub[k] = 1;
    *last = ev;
  }
  return 0;
}

/* Deferred staging through the ring (the ordering argument is at the top of the file).  Returns
 * PW_PATH_RING when the copy is queued, 1 + a PW_ND_* reason when it was not deferred (nothing
 * was enqueued or kept: the caller stages it as before), or fail_device's answer. */
static int defer_h2d(pw_engine *e, dev_state *d, const pw_transfer *c) {
  const pw_ops *ops = c->ops;
  const pw_guard_ops *g = e->cfg.guard;
  size_t chunk = chunk_size(e, d), n = c->n, roff;
  int why = defer_reason(e, d, c, chunk), rc;
  if (why >= 0) return 1 + why;
  const char *src = c->src;
  unsigned ridx, idx[JOB_CHUNKS];
  unsigned char pub[JOB_CHUNKS] = {0};
  defer_job j = {.d = d, .src = src, .guard_id = -1};
  /* every byte of ring the copy needs, now: back-pressure waits on older copies only */
  if ((rc = reserve(ops, d, &d->dring, ARENA_RING, n, 0, &roff, &ridx)))
    return fail_device(ops, d, c->stream, rc);
  if ((rc = reserve_slots(ops, d, &j, n, chunk, idx))) {
    publish(d, &d->dring, ridx, NULL);
    /* AGAIN: another copy's chunks were in the way while we held ours */
    return rc == AGAIN ? 1 + PW_ND_BUSY : fail_device(ops, d, c->stream, rc);
  }
  const void *lo = src, *hi = src;
  if ((why = g->protect_inner(src, n, &j.guard_id, &lo, &hi)) != 0) {
    for (unsigned k = 0; k < j.nchunks; k++)
      publish(d, &d->host, idx[k], NULL);
    publish(d, &d->dring, ridx, NULL);
    return 1 + PW_ND_GUARD + why;
  }
  j.lo = (size_t)((const char *)lo - src), j.hi = (size_t)((const char *)hi - src);
  if (j.lo >= j.hi) j.lo = j.hi = n; /* no whole page: everything is copied now */
  /* the partial first and last pages are not guarded: their bytes are copied before we return */
  copy_now(d, &j, src, 0, j.lo);
  copy_now(d, &j, src, j.hi, n);
  if (!pw_pool_workers()) { /* the pool starts here, never on the copy thread (it would malloc) */
    pw_batch b;
    batch_begin(e, &b);
    pw_batch_end(&b);
  }
  pthread_mutex_lock(&e->elock);
  uint64_t qpos = queue_job(e, &j);
  void *last = NULL, *fev = NULL;
  if (!(rc = enqueue_job(ops, d, &j, roff, idx, pub, &last)) && !(fev = ev_get(ops, d))) rc = -1;
  if (!rc && ((rc = ops->stream_wait_event(c->stream, last)) ||
              (rc = ops->copy_async(c->dst, d->ring + roff, n, PW_DIR_D2D, c->stream)) ||
              (rc = ops->event_record(fev, c->stream))))
    ev_put(d, fev);
  if (!rc) {
    pthread_mutex_unlock(&e->elock);
    publish(d, &d->dring, ridx, fev);
    pw_add(&pw_st.ring_pieces, 1);
    return PW_PATH_RING;
  }
  /* Drain what was enqueued (the copy thread stores every ticket the side stream waits for), and
   * wait for the copy thread: afterwards no DMA reads and no worker writes this copy's chunks. */
  int r = fail_device(ops, d, c->stream, rc);
  pthread_mutex_unlock(&e->elock);
  wait_jobs(e, qpos);
  for (unsigned k = 0; k < j.nchunks; k++)
    if (!pub[k]) publish(d, &d->host, idx[k], NULL);
  publish(d, &d->dring, ridx, NULL);
  return r;
}

int pw_describe(const pw_ops *ops, pw_transfer *c) {
  int rc = 0;
  c->src_kind = c->dst_kind = PW_MEM_UNKNOWN;
  c->src_dev = c->dst_dev = -1;
  c->described = PW_DESCRIBE_ERROR_PENDING;
  c->ops = ops;
  if (ops->error_pending()) return -1; /* a failed query would hide the program's own error */
  if (ops->pointer_info(c->src, &c->src_kind, &c->src_dev)) rc = -1;
  if (ops->pointer_info(c->dst, &c->dst_kind, &c->dst_dev)) rc = -1;
  if (rc) {
    ops->clear_error();
    c->src_kind = c->dst_kind = PW_MEM_UNKNOWN;
  }
  if (c->dir < 0) {
    int sh = c->src_kind == PW_MEM_PAGEABLE || c->src_kind == PW_MEM_PINNED;
    int dh = c->dst_kind == PW_MEM_PAGEABLE || c->dst_kind == PW_MEM_PINNED;
    c->dir = sh ? (dh ? PW_DIR_H2H : PW_DIR_H2D) : (dh ? PW_DIR_D2H : PW_DIR_D2D);
  }
  c->described = rc ? PW_DESCRIBE_QUERY_FAILED : PW_DESCRIBE_OK;
  return rc;
}

/* Checks that need no CUDA call. */
static int cheap_reason(const pw_engine *e, const pw_transfer *c) {
  if (e->cfg.mode != PW_MODE_STAGE) return PW_FB_MODE;
  if (atomic_load(&e->forked)) return PW_FB_FORKED;
  /* kinds we could not learn are no reason of their own: say what went wrong */
  if (c->described == PW_DESCRIBE_ERROR_PENDING) return PW_FB_PENDING_ERROR;
  if (c->described == PW_DESCRIBE_QUERY_FAILED) return PW_FB_QUERY_FAILED;
  if (c->dir == PW_DIR_H2D) {
    if (c->src_kind != PW_MEM_PAGEABLE) return PW_FB_SRC_NOT_PAGEABLE;
    if (c->dst_kind != PW_MEM_DEVICE) return PW_FB_NOT_DEVICE;
  } else if (c->dir == PW_DIR_D2H) {
    if (c->dst_kind != PW_MEM_PAGEABLE) return PW_FB_DST_NOT_PAGEABLE;
    if (c->src_kind != PW_MEM_DEVICE) return PW_FB_NOT_DEVICE;
  } else {
    return PW_FB_DIRECTION;
  }
  /* a range that wraps the address space is CUDA's to refuse (cudaErrorInvalidValue) */
  if (c->n > UINTPTR_MAX - (uintptr_t)c->src || c->n > UINTPTR_MAX - (uintptr_t)c->dst)
    return PW_FB_BAD_RANGE;
  if (c->n < e->cfg.min_bytes || c->n == 0) return PW_FB_TOO_SMALL;
  return -1;
}

static int checked_reason(const pw_transfer *c, int device) {
  const pw_ops *ops = c->ops;
  int cap = 0, cur = -1, sdev = -1, kind = PW_MEM_UNKNOWN, kdev = -1;
  if (ops->error_pending()) return PW_FB_PENDING_ERROR;
  if (ops->stream_capturing(c->stream, &cap)) {
    ops->clear_error();
    return PW_FB_QUERY_FAILED;
  }
  if (cap) return PW_FB_CAPTURING;
  if (ops->get_device(&cur) || ops->stream_device(c->stream, &sdev)) {
    ops->clear_error();
    return PW_FB_QUERY_FAILED;
  }
  if (cur != device || sdev != device) return PW_FB_OTHER_DEVICE;
  /* the driver front end stages only in the device's primary context, where the engine's state
   * of the device lives, whichever front end set it up */
  if (ops->context_ok && !ops->context_ok(c->stream, device)) return PW_FB_OTHER_CONTEXT;
  /* The device range must lie inside one allocation (a range that runs into the next one is
   * CUDA's to refuse): otherwise the real call reports the error, before anything was written.
   * Without the allocation's range, it must at least end in device memory of the same device. */
  const char *dptr = c->dir == PW_DIR_H2D ? (const char *)c->dst : (const char *)c->src;
  void *base = NULL;
  size_t size = 0;
  if (ops->alloc_range) {
    if (!ops->alloc_range(dptr, &base, &size))
      return (size_t)(dptr - (const char *)base) > size ||
                     c->n > size - (size_t)(dptr - (const char *)base)
                 ? PW_FB_BAD_RANGE
                 : -1;
    ops->clear_error();
  }
  if (ops->pointer_info(dptr + c->n - 1, &kind, &kdev)) {
    ops->clear_error();
    return PW_FB_QUERY_FAILED;
  }
  if (kind != PW_MEM_DEVICE || kdev != device) return PW_FB_NOT_DEVICE;
  return -1;
}

int pw_engine_copy(pw_engine *e, const pw_transfer *copy) {
  uint64_t t0 = pw_now_ns();
  pw_transfer cc = *copy, *c = &cc;
  if (!c->ops) c->ops = e->ops; /* the front end's backend, which pw_describe noted */
  const pw_ops *ops = c->ops;
  int r = cheap_reason(e, c);
  int device = c->dir == PW_DIR_H2D ? c->dst_dev : c->src_dev;
  if (r < 0) r = checked_reason(c, device);
  dev_state *d = NULL;
  if (r < 0) {
    int why;
    if (!(d = get_dev(e, ops, device, &why))) r = why;
  }
  if (r >= 0) {
    pw_add(&pw_st.fallbacks[r], 1);
    pw_add(&pw_st.fallback_bytes[r], c->n);
    return -1 - r;
  }
  if (c->sync_api && e->cfg.strict && c->dir == PW_DIR_H2D) {
    int rc = ops->stream_sync(c->stream);
    if (rc) {
      ops->clear_error();
      pw_add(&pw_st.fallbacks[PW_FB_QUERY_FAILED], 1);
      return -1 - PW_FB_QUERY_FAILED;
    }
  }
  int mode = ops->relax_capture(0, 0);
  int path, deferred = 0;
  if (atomic_load_explicit(&d->status, memory_order_acquire) != DEV_READY) {
    path = -1 - PW_FB_NO_STATE;
  } else if (c->dir == PW_DIR_D2H) {
    path = stage_d2h(e, d, c);
  } else {
    int dr = defer_h2d(e, d, c); /* PW_PATH_RING (0) when deferred */
    if (dr > 0) {                /* not deferred: staged as before, the reason counted */
      pw_add(&pw_st.not_deferred[dr - 1], 1);
      path = d->ring ? stage_h2d_ring(e, d, c) : stage_h2d_pinned(e, d, c);
    } else {
      path = dr;
      deferred = dr >= 0;
    }
  }
  ops->relax_capture(1, mode);
  if (path >= 0) {
    pw_add(&pw_st.staged[path].calls, 1);
    pw_add(&pw_st.staged[path].bytes, c->n);
    pw_add(&pw_st.staged[path].ns, pw_now_ns() - t0);
    if (deferred) {
      pw_add(&pw_st.deferred.calls, 1);
      pw_add(&pw_st.deferred.bytes, c->n);
      pw_add(&pw_st.deferred.ns, pw_now_ns() - t0);
    }
  } else {
    pw_add(&pw_st.fallbacks[-1 - path], 1);
    pw_add(&pw_st.fallback_bytes[-1 - path], c->n);
  }
  return path;
}

/* The device's state forgotten (under init_lock): DEV_FAILED, its slot empty, counted; the state
 * or NULL.  Never freed: a thread still inside a copy of this device (a program that resets or
 * releases while it copies) keeps a valid struct; its CUDA resources die with the context. */
static dev_state *forget_device(pw_engine *e, int device) {
  dev_state *d = atomic_load(&e->dev[device]);
  if (d) {
    atomic_store_explicit(&d->status, DEV_FAILED, memory_order_release);
    atomic_store(&e->dev[device], NULL);
    pw_add(&pw_st.device_resets, 1);
  }
  return d;
}

void pw_engine_device_reset(pw_engine *e, int device) {
  if (!e || device < 0 || device >= MAX_DEVICES || atomic_load(&e->forked)) return;
  drain_jobs(e, device, 1); /* no copy thread writes into the pinned pool the reset frees */
  /* after a setup under way (it holds init_lock), which would allocate into the dying context */
  pthread_mutex_lock(&e->init_lock);
  dev_state *d = atomic_load(&e->dev[device]);
  if (d && atomic_load_explicit(&d->status, memory_order_acquire) == DEV_READY && d->side) {
    int pending = d->ops->error_pending(); /* the program's, unread: not ours to clear */
    d->ops->stream_sync(d->side);
    if (!pending) d->ops->clear_error();
  }
  forget_device(e, device);
  pthread_mutex_unlock(&e->init_lock);
}

void pw_engine_device_quiesce(pw_engine *e, int device) {
  if (!e || device < 0 || device >= MAX_DEVICES || atomic_load(&e->forked)) return;
  /* a setup under way (it holds init_lock) ends first, in the context that still lives: the
   * state it made is then published and quiesced below */
  pthread_mutex_lock(&e->init_lock);
  pthread_mutex_unlock(&e->init_lock);
  drain_jobs(e, device, 0); /* the copy-ins queued so far are done: none writes the pool later */
  dev_state *d = atomic_load(&e->dev[device]);
  if (!d || atomic_load_explicit(&d->status, memory_order_acquire) != DEV_READY || !d->side) return;
  /* the side stream's work done, waited for 2 s at most: its DMAs may wait for the program's own
   * streams, which may wait for the host (a release that is not the last never waits for the GPU
   * without pinwheel) */
  void *probe = settle_side(d);
  if (probe) ev_put(d, probe);
}

void pw_engine_device_gone(pw_engine *e, int device) {
  if (!e || device < 0 || device >= MAX_DEVICES || atomic_load(&e->forked)) return;
  pthread_mutex_lock(&e->init_lock);
  dev_state *d = forget_device(e, device);
  pthread_mutex_unlock(&e->init_lock);
  /* jobs the quiesce left queued (its drain gave up on a stalled copy thread) are never run: their
   * pinned chunks and side stream went with the context (no ticket stored: the pool is gone) */
  if (d) forsake_device(e, d, 0);
}

void pw_engine_guard_wait(pw_engine *e, const void *p, size_t n) {
  if (e && e->cfg.guard) e->cfg.guard->wait(p, n);
}

void pw_engine_after_fork_child(pw_engine *e) {
  if (!e) return;
  atomic_store(&e->forked, 1);
  pthread_mutex_init(&e->init_lock, NULL);
  /* the copy thread stayed in the parent: the child never defers (forked) nor waits for it */
  pthread_mutex_init(&e->qlock, NULL);
  pthread_cond_init(&e->qcv, NULL);
  e->copier = 0;
  e->running = NULL;
  e->qhead = e->qtail;
}

void pw_engine_destroy(pw_engine *e) {
  if (!e) return;
  drain_jobs(e, -1, 0);
  pthread_mutex_lock(&e->qlock);
  e->stop = 1;
  pthread_cond_broadcast(&e->qcv);
  while (e->copier > 0)
    pthread_cond_wait(&e->qcv, &e->qlock);
  pthread_mutex_unlock(&e->qlock);
  pw_engine *expect = e;
  atomic_compare_exchange_strong(&exit_engine, &expect, NULL);
  for (int i = 0; i < MAX_DEVICES; i++) {
    dev_state *d = atomic_load(&e->dev[i]);
    if (!d) continue;
    const pw_ops *ops = d->ops;
    if (d->side) ops->stream_sync(d->side);
    for (int k = 0; k < d->nall; k++)
      ops->event_sync(d->all_ev[k]);
    if (d->ring) ops->device_free(d->ring);
    if (d->pinned) ops->host_free(d->pinned);
    free(d->free_ev);
    free(d->all_ev);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cv);
    free(d);
  }
  free(e);
}
