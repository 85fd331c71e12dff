/* elide.c — sync elision (elide.h): which host syncs may return early, and the fences that make
 * the early return invisible to a correct program (docs/DESIGN.md, "Sync elision").
 *
 * Owns: the elided syncs still in flight (a slot per stream: the event recorded on it at the sync),
 * the streams whose queued work can write host memory, the events the program recorded (when, and
 * whether what they follow can write host memory; forgotten when destroyed), the streams fenced
 * for every elision so far (the fence's lock-free path), the IPC stop.
 * Must never: call CUDA except through the pw_ops a call brings; hold `mu` across a wait on the GPU
 * (fences and queries are enqueues and polls, made under it; event waits are made without it);
 * make a call that would break a graph capture (its calls run with the capture mode relaxed, and
 * a capturing stream is not fenced: the graph's launch is);
 * elide when in doubt (a full table, an unknown event, a failed record all make the sync real).
 * Lock order: `mu` is a leaf (nothing else is taken under it but CUDA's own).
 */
#define _GNU_SOURCE
#include "elide.h"

#include <pthread.h>
#include <string.h>

#define SLOTS 16        /* streams with an elided sync in flight */
#define DEPTH 4         /* elided syncs of one stream in flight at most: the host's run-ahead */
#define FENCED 8        /* streams remembered per slot as already waiting for it */
#define DIRTY 128       /* streams whose queued work can write host memory */
#define EVENTS 1024     /* the program's recorded events */
#define FREE_EVENTS 64  /* events of retired slots, kept for reuse (per device) */
#define MAX_DEVICE 4096 /* a device number above it is not a device: keep the sync */
#define FORGOTTEN 3     /* the handle of a destroyed stream's slot: no stream has it */
#define DONE 256        /* stream objects remembered as waiting for every elided sync so far */

typedef struct key {
  void *h;       /* the normalised handle */
  int dev;       /* legacy and per-thread handles: the device; else -1 */
  uintptr_t tid; /* per-thread handle: the thread; else 0 */
} key;

typedef struct slot {
  int live;
  key k;
  int dev; /* the events' device */
  int n;   /* events in flight, oldest first: evs[n - 1] is the latest elided sync's */
  void *evs[DEPTH];
  const pw_ops *ops;
  uint64_t seq; /* when it was elided (the order of elisions and event records) */
  int nfenced;
  void *fenced[FENCED]; /* streams that already wait for the latest (stream objects only) */
} slot;
#define LATEST(sl) ((sl)->evs[(sl)->n - 1])

typedef struct dirty_entry {
  key k;
  int used;
  uint64_t seq; /* when the last host write was queued on it */
} dirty_entry;

typedef struct event_entry {
  void *e; /* NULL: free */
  uint64_t seq;
  int host_write; /* the stream it was recorded on could write host memory before it */
} event_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
atomic_int pw_elide_live; /* live slots: the fast path of the fence */
/* With one live slot, its stream (else 0): work on it needs no fence, told without the lock. */
static _Atomic uintptr_t sole_h, sole_tid;
static atomic_int sole_dev;
static int enabled = 1, stopped;
/* The order of elisions, event records and host writes: advanced under mu; read without it by
 * pw_elide_now, which every real sync asks. */
static _Atomic uint64_t seq;
static slot slots[SLOTS];
static dirty_entry dirty[DIRTY];
static int dirty_overflow; /* a stream could not be remembered: every stream counts as dirty */
static event_entry events[EVENTS];
static struct {
  void *ev;
  int dev;
} free_events[FREE_EVENTS];
static int nfree_events;
/* Elisions made so far: advanced under mu (release) with each one, read without it. */
static _Atomic uint64_t elisions;
/* Stream objects that waited, by their last fence, for every elided sync of other streams in
 * flight when `elisions` was gen: a later fence of one finds it here without the lock while no
 * stream was elided since.  Written under mu (h 0, then gen, then h); a reader loads gen before h,
 * sequentially consistent, so a gen it reads with h == t is t's own (a later writer's gen comes
 * after that writer's h = 0, which the reader would have seen instead of t). */
static struct {
  _Atomic uintptr_t h;
  _Atomic uint64_t gen;
} done[DONE];

#ifdef PW_TESTING
int pw_elide_test_drop;
#define DROP(n) (pw_elide_test_drop == (n))
#else
#define DROP(n) 0
#endif

void pw_elide_configure(int on) {
  pthread_mutex_lock(&mu);
  enabled = on;
  pthread_mutex_unlock(&mu);
}

/* The lock, with this thread's capture mode relaxed while it is held: the module's own event
 * queries, records and waits must not break a graph capture the program runs on another stream or
 * thread (CUDA refuses them, and ends the capture, in its global mode).  Returns the mode to put
 * back with unlock(). */
static int lock(const pw_ops *ops) {
  pthread_mutex_lock(&mu);
  return ops->relax_capture(0, 0);
}

/* Forget the error a call of ours left as the thread's last error, unless the program had one
 * pending before (asked first: error_pending), which stays the program's to read. */
static void clear_ours(const pw_ops *ops, int pending) {
  if (!pending) ops->clear_error();
}
static void unlock(const pw_ops *ops, int mode) {
  ops->relax_capture(1, mode);
  pthread_mutex_unlock(&mu);
}

/* ---- keys ---- */

/* This thread's number, never reused in the process (pthread_self is: a thread started after
 * another ended may get its id, and would be taken for the owner of its per-thread stream). */
static _Atomic uintptr_t threads_seen;
static __thread uintptr_t thread_no;
static uintptr_t this_thread(void) {
  if (!thread_no) thread_no = atomic_fetch_add(&threads_seen, 1) + 1;
  return thread_no;
}

static key key_of(const pw_ops *ops, void *h) {
  key k = {h, -1, 0};
  if ((uintptr_t)h <= 2) { /* legacy (1) or per-thread (2): the current device's */
    int d = -1;
    if (ops->get_device(&d)) d = -1;
    k.dev = d;
    if ((uintptr_t)h == 2) k.tid = this_thread();
  }
  return k;
}

static int same(key a, key b) {
  return a.h == b.h && a.dev == b.dev && a.tid == b.tid;
}

/* ---- streams whose work can write host memory (under mu) ---- */

static dirty_entry *dirty_find(key k) {
  for (int i = 0; i < DIRTY; i++)
    if (dirty[i].used && same(dirty[i].k, k)) return &dirty[i];
  return NULL;
}

static void dirty_set(key k) {
  dirty_entry *d = dirty_find(k);
  if (d) {
    d->seq = ++seq;
    return;
  }
  for (int i = 0; i < DIRTY; i++)
    if (!dirty[i].used) {
      dirty[i] = (dirty_entry){k, 1, ++seq};
      return;
    }
  dirty_overflow = 1;
}

/* Work on the stream k can write host memory: its own, or, through the legacy default stream's
 * implicit synchronisation, the legacy stream's for any other stream and any stream's for the
 * legacy one (a stream created non-blocking is spared neither: its flags are not known here). */
static int is_dirty(key k) {
  if (dirty_overflow || dirty_find(k)) return 1;
  for (int i = 0; i < DIRTY; i++)
    if (dirty[i].used && ((uintptr_t)k.h == 1 || (uintptr_t)dirty[i].k.h == 1)) return 1;
  return 0;
}

/* A real sync that began at `before` covered what was queued until then. */
static void dirty_clear(key k, uint64_t before) {
  dirty_entry *d = dirty_find(k);
  if (d && d->seq <= before) d->used = 0;
}

/* ---- the program's events (under mu) ---- */

static size_t ev_hash(void *e) {
  uintptr_t x = (uintptr_t)e;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 20) % EVENTS;
}

/* The entry of e, or NULL when e is not known (never recorded through pinwheel, or forgotten). */
static event_entry *event_find(void *e) {
  size_t h = ev_hash(e);
  for (int i = 0; i < 8; i++) {
    event_entry *x = &events[(h + (size_t)i) % EVENTS];
    if (x->e == e) return x;
  }
  return NULL;
}

static void event_note(void *e, uint64_t when, int host_write) {
  event_entry *x = event_find(e);
  if (!x) {
    size_t h = ev_hash(e);
    x = &events[h]; /* no free place among 8: the oldest guess is replaced (then unknown: safe) */
    for (int i = 0; i < 8; i++)
      if (!events[(h + (size_t)i) % EVENTS].e) {
        x = &events[(h + (size_t)i) % EVENTS];
        break;
      }
  }
  *x = (event_entry){e, when, host_write};
}

/* ---- slots (under mu) ---- */

static slot *slot_of(key k) {
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].live && same(slots[i].k, k)) return &slots[i];
  return NULL;
}

/* After a change of the live slots: the sole slot's stream, published before the count (release),
 * so a reader that sees the count (acquire) sees the stream that goes with it. */
static void publish(int live) {
  slot *one = NULL;
  for (int i = 0; i < SLOTS && live == 1; i++)
    if (slots[i].live) one = &slots[i];
  atomic_store_explicit(&sole_h, one ? (uintptr_t)one->k.h : 0, memory_order_relaxed);
  atomic_store_explicit(&sole_dev, one ? one->k.dev : -1, memory_order_relaxed);
  atomic_store_explicit(&sole_tid, one ? one->k.tid : 0, memory_order_relaxed);
  atomic_store_explicit(&pw_elide_live, live, memory_order_release);
}

static int count_live(void) {
  int n = 0;
  for (int i = 0; i < SLOTS; i++)
    n += slots[i].live;
  return n;
}

static void give_event(void *ev, int dev) {
  if (nfree_events < FREE_EVENTS) {
    free_events[nfree_events].ev = ev;
    free_events[nfree_events++].dev = dev;
  } /* else the event is leaked: at most a few, never reused */
}

static void retire(slot *s) {
  if (!s->live) return;
  s->live = 0;
  publish(count_live());
  for (int i = 0; i < s->n; i++)
    give_event(s->evs[i], s->dev);
  s->n = 0;
}

/* The oldest event of a slot is done: it leaves the slot. */
static void pop_oldest(slot *s) {
  give_event(s->evs[0], s->dev);
  memmove(s->evs, s->evs + 1, (size_t)(s->n - 1) * sizeof *s->evs);
  s->n--;
}

static void *take_event(const pw_ops *ops, int dev) {
  for (int i = 0; i < nfree_events; i++)
    if (free_events[i].dev == dev) {
      void *e = free_events[i].ev;
      free_events[i] = free_events[--nfree_events];
      return e;
    }
  void *e = NULL;
  return ops->event_create(&e) ? NULL : e;
}

/* ---- the sync ---- */

static int keep(int why) {
  pw_add(&pw_st.sync_kept[why], 1);
  return 0;
}

/* Wait (mu dropped and taken again) until the record of slot s is done, then retire it unless it
 * was elided again meanwhile.  A failed wait (an error of earlier work: the context cannot run
 * anything after it either) retires it too; returns the wait's status. */
static int wait_slot(slot *s) {
  void *ev = LATEST(s);
  const pw_ops *ops = s->ops;
  uint64_t when = s->seq;
  pthread_mutex_unlock(&mu);
  int rc = ops->event_sync(ev);
  pthread_mutex_lock(&mu);
  if (s->live && s->seq == when) retire(s);
  return rc;
}

int pw_elide_sync(const pw_ops *ops, void *s, int device, int why) {
  /* asked before the lock, which is a leaf (the driver's answer may take its primary_lock) */
  int primary = !ops->context_ok || ops->context_ok(s, device) || DROP(8);
  int cm = lock(ops), pend = ops->error_pending();
  int r = 0;
  key k = key_of(ops, s);
  int cur = -1;
  if (!enabled) goto out;
  if (stopped && !DROP(4)) {
    r = keep(PW_KEEP_IPC);
    goto out;
  }
  if (is_dirty(k) && !DROP(2)) {
    r = keep(PW_KEEP_HOST_WRITE);
    goto out;
  }
  if (why >= 0 && why < PW_KEEP_N && !DROP(2)) {
    r = keep(why);
    goto out;
  }
  /* the event is made in the thread's current context: only the device's primary one, whose
   * end (a reset, a release) pw_elide_device_forget hears of */
  if (ops->get_device(&cur) || cur != device || device < 0 || device > MAX_DEVICE || !primary) {
    r = keep(PW_KEEP_DEVICE);
    goto out;
  }
  slot *sl = slot_of(k);
  if (sl && !ops->event_query(LATEST(sl))) /* everything elided on it is done */
    retire(sl), sl = NULL;
  while (sl && sl->n == DEPTH && !DROP(5)) {
    /* the host runs at most DEPTH syncs ahead: the oldest elided sync in flight is done first;
     * where that fails (an error of the program's earlier work) the real sync reports it */
    void *old = sl->evs[0];
    pthread_mutex_unlock(&mu);
    int rc = ops->event_sync(old);
    pthread_mutex_lock(&mu);
    if (rc) {
      r = keep(PW_KEEP_ERROR);
      goto out;
    }
    sl = slot_of(k); /* it may have changed while mu was dropped */
    if (sl && sl->evs[0] == old) pop_oldest(sl);
  }
  if (sl && sl->n == DEPTH) pop_oldest(sl); /* DROP(5): the test's early return, forgotten */
  if (!sl)
    for (int i = 0; i < SLOTS && !sl; i++)
      if (!slots[i].live) sl = &slots[i];
  if (!sl) {
    r = keep(PW_KEEP_FULL);
    goto out;
  }
  void *ev = take_event(ops, device);
  if (!ev || ops->event_record(ev, s)) {
    if (ev) give_event(ev, device);
    clear_ours(ops, pend); /* the failure was ours: the real sync reports the program's own */
    r = keep(PW_KEEP_ERROR);
    goto out;
  }
  if (!sl->live) *sl = (slot){.live = 1, .k = k, .dev = device, .ops = ops};
  sl->evs[sl->n++] = ev;
  sl->seq = ++seq;
  sl->nfenced = 0; /* the streams fenced so far waited for an earlier record only */
  /* and no stream is done with the elisions any more: published before the sync returns */
  if (!DROP(7))
    atomic_store_explicit(&elisions, atomic_load_explicit(&elisions, memory_order_relaxed) + 1,
                          memory_order_release);
  publish(count_live());
  pw_add(&pw_st.sync_elided, 1);
  r = 1;
out:
  unlock(ops, cm);
  return r;
}

uint64_t pw_elide_now(void) {
  return atomic_load_explicit(&seq, memory_order_acquire);
}

void pw_elide_synced(const pw_ops *ops, void *s, uint64_t before) {
  pthread_mutex_lock(&mu);
  if (s) {
    key k = key_of(ops, s);
    slot *sl = slot_of(k);
    if (sl && sl->seq <= before) retire(sl); /* not one another thread elided meanwhile */
    dirty_clear(k, before);
  } else { /* a device sync: the current device's elided syncs before it are done */
    int d = -1;
    if (!ops->get_device(&d))
      for (int i = 0; i < SLOTS; i++)
        if (slots[i].live && slots[i].dev == d && slots[i].seq <= before) retire(&slots[i]);
  }
  pthread_mutex_unlock(&mu);
}

/* ---- the fence ---- */

static size_t done_index(void *t) {
  return ev_hash(t) % DONE;
}

/* t (a stream object) waits for every elided sync made until now (mu held). */
static void done_set(void *t) {
  size_t i = done_index(t);
  atomic_store(&done[i].h, 0);
  atomic_store(&done[i].gen, atomic_load_explicit(&elisions, memory_order_relaxed));
  atomic_store(&done[i].h, (uintptr_t)t);
}

/* t is remembered no more (mu held): it was destroyed, and its handle may name a new stream. */
static void done_forget(void *t) {
  size_t i = done_index(t);
  if (atomic_load(&done[i].h) == (uintptr_t)t) atomic_store(&done[i].h, 0);
}

/* 1 when t's last fence covered every elision made since (read without the lock): no stream was
 * elided after it, so t waits already for everything in flight. */
static int done_now(void *t) {
  if ((uintptr_t)t <= 2) return 0; /* default streams: keyed by device and thread, never here */
  size_t i = done_index(t);
  uint64_t g = atomic_load(&done[i].gen);
  return atomic_load(&done[i].h) == (uintptr_t)t &&
         g == atomic_load_explicit(&elisions, memory_order_acquire);
}

/* 1 when t is the sole live slot's stream (read without the lock). */
static int sole_stream(const pw_ops *ops, void *t) {
  if (atomic_load_explicit(&pw_elide_live, memory_order_acquire) != 1) return 0;
  uintptr_t h = atomic_load_explicit(&sole_h, memory_order_relaxed);
  if (h != (uintptr_t)t || !h) return 0;
  if (h > 2) return 1;
  int d = -1;
  if (ops->get_device(&d) || d != atomic_load_explicit(&sole_dev, memory_order_relaxed)) return 0;
  return h == 1 || atomic_load_explicit(&sole_tid, memory_order_relaxed) == this_thread();
}

void pw_elide_fence_slow(const pw_ops *ops, void *t) {
  if (DROP(1) || sole_stream(ops, t) || done_now(t)) return;
  int cm = lock(ops), cap = 0, pend = ops->error_pending();
  /* work captured into a graph runs when the graph is launched, and that launch is fenced */
  int crc = ops->stream_capturing(t, &cap);
  if (crc) clear_ours(ops, pend);
  if (!crc && cap) {
    unlock(ops, cm);
    return;
  }
  key k = {0};
  int have_key = 0;
  for (int i = 0; i < SLOTS; i++) {
    slot *sl = &slots[i];
    if (!sl->live) continue;
    if (sl->k.h == t) { /* the same handle: the same stream, unless a default stream elsewhere */
      if ((uintptr_t)t > 2) continue;
      if (!have_key) k = key_of(ops, t), have_key = 1;
      if (same(sl->k, k)) continue;
    }
    int q = ops->event_query(LATEST(sl));
    if (q == 0) {
      retire(sl);
      continue;
    }
    int known = 0;
    for (int j = 0; j < sl->nfenced && !known; j++)
      known = sl->fenced[j] == t;
    if (known) continue;
    if (q == 1 && !ops->stream_wait_event(t, LATEST(sl))) {
      pw_add(&pw_st.sync_fences, 1);
      if ((uintptr_t)t > 2 && sl->nfenced < FENCED) sl->fenced[sl->nfenced++] = t;
      continue;
    }
    /* the query or the wait failed (an error of earlier work, a bad handle): wait here, so that
     * nothing runs before the elided work whatever the device says */
    clear_ours(ops, pend);
    wait_slot(sl);
    i = -1; /* the table may have changed while mu was dropped: look again */
  }
  /* every live slot is waited for (or done) now, under mu: until the next elision, t's next fence
   * has nothing to do */
  if ((uintptr_t)t > 2) done_set(t);
  unlock(ops, cm);
}

/* ---- what the program's work can write, and its events ---- */

void pw_elide_host_write(const pw_ops *ops, void *s) {
  pthread_mutex_lock(&mu);
  dirty_set(key_of(ops, s));
  pthread_mutex_unlock(&mu);
}

void pw_elide_recorded(const pw_ops *ops, void *e, void *s) {
  pthread_mutex_lock(&mu);
  event_note(e, ++seq, is_dirty(key_of(ops, s)));
  pthread_mutex_unlock(&mu);
}

void pw_elide_waits(const pw_ops *ops, void *s, void *e) {
  pthread_mutex_lock(&mu);
  event_entry *x = event_find(e);
  if (!x || x->host_write) dirty_set(key_of(ops, s)); /* unknown: it may follow host writes */
  pthread_mutex_unlock(&mu);
}

/* ---- questions ---- */

/* Wait for every live slot elided after `after` (mu held). */
static void settle_after(uint64_t after) {
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].live && slots[i].seq > after) {
      pw_add(&pw_st.sync_settled, 1);
      wait_slot(&slots[i]);
      i = -1; /* look again from the start: mu was dropped */
    }
}

void pw_elide_settle_event(const pw_ops *ops, void *e) {
  if (!atomic_load_explicit(&pw_elide_live, memory_order_acquire) || DROP(3)) return;
  int cm = lock(ops);
  event_entry *x = event_find(e);
  settle_after(x ? x->seq : 0);
  unlock(ops, cm);
}

void pw_elide_settle_stream(const pw_ops *ops, void *s) {
  if (!atomic_load_explicit(&pw_elide_live, memory_order_acquire) || DROP(3)) return;
  int cm = lock(ops);
  slot *sl = slot_of(key_of(ops, s));
  if (sl) {
    pw_add(&pw_st.sync_settled, 1);
    wait_slot(sl);
  }
  unlock(ops, cm);
}

void pw_elide_settle_all(const pw_ops *ops) {
  if (!atomic_load_explicit(&pw_elide_live, memory_order_acquire) || DROP(3)) return;
  int cm = lock(ops);
  settle_after(0);
  unlock(ops, cm);
}

void pw_elide_stop(const pw_ops *ops) {
  if (DROP(4)) return;
  int cm = lock(ops);
  stopped = 1;
  settle_after(0);
  unlock(ops, cm);
}

/* ---- a destroyed stream ---- */

void pw_elide_forget_stream(void *s) {
  if ((uintptr_t)s <= 2) return; /* default streams are never destroyed */
  pthread_mutex_lock(&mu);
  for (int i = 0; i < SLOTS; i++) {
    slot *sl = &slots[i];
    if (!sl->live) continue;
    /* its elided work stays fenced for every stream, a new one with this handle included */
    if (sl->k.h == s) sl->k.h = (void *)FORGOTTEN;
    for (int j = 0; j < sl->nfenced; j++)
      if (sl->fenced[j] == s) sl->fenced[j--] = sl->fenced[--sl->nfenced];
  }
  dirty_entry *d = dirty_find((key){s, -1, 0});
  if (d) d->used = 0;
  done_forget(s);
  publish(count_live());
  pthread_mutex_unlock(&mu);
}

/* ---- a device's context goes ---- */

void pw_elide_device_wait(const pw_ops *ops, int dev) {
  int cm = lock(ops);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].live && slots[i].dev == dev) {
      wait_slot(&slots[i]); /* retired: its events join the free list */
      i = -1;               /* look again from the start: mu was dropped */
    }
  unlock(ops, cm);
}

void pw_elide_device_forget(int dev) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].live && slots[i].dev == dev) { /* elided since the wait: its events go too */
      slots[i].live = 0;
      slots[i].n = 0;
    }
  publish(count_live());
  for (int i = 0; i < nfree_events; i++)
    if (free_events[i].dev == dev) free_events[i--] = free_events[--nfree_events];
  /* the context's streams and events go with it, and one made later may get one of their
   * handles: no stream is taken for fenced or done any more (its next fence is made anew), no
   * event for known (unknown is the safe answer), and the device's default streams have no host
   * writes queued (the reset ended them) */
  for (int i = 0; i < SLOTS; i++)
    slots[i].nfenced = 0;
  for (int i = 0; i < DONE; i++)
    atomic_store(&done[i].h, 0);
  memset(events, 0, sizeof events);
  for (int i = 0; i < DIRTY; i++)
    if (dirty[i].used && (uintptr_t)dirty[i].k.h <= 2 && dirty[i].k.dev == dev) dirty[i].used = 0;
  pthread_mutex_unlock(&mu);
}

/* ---- a destroyed event ---- */

void pw_elide_forget_event(void *e) {
  if (!e || DROP(6)) return;
  pthread_mutex_lock(&mu);
  event_entry *x = event_find(e);
  if (x) *x = (event_entry){0}; /* a later find looks at all 8 places: a hole is no end */
  pthread_mutex_unlock(&mu);
}

/* ---- fork ---- */

/* The child has none of its parent's streams, events or GPU work: nothing is in flight. */
void pw_elide_after_fork_child(void) {
  pthread_mutex_init(&mu, NULL);
  memset(slots, 0, sizeof slots);
  memset(dirty, 0, sizeof dirty);
  memset(events, 0, sizeof events);
  nfree_events = 0;
  dirty_overflow = 0;
  for (int i = 0; i < DONE; i++)
    atomic_store(&done[i].h, 0);
  publish(0);
}

#ifdef PW_TESTING
void pw_elide_test_reset(void) {
  pw_elide_after_fork_child();
  stopped = 0;
  enabled = 1;
  atomic_store(&seq, 0);
  atomic_store(&elisions, 0);
}
#endif
