/* fa.c — uploads made ahead of the program's own copy (fa.h says what and why; DESIGN.md §11).
 *
 * Owns: the table of replaced allocations (lock-free readers, as app_memcpy.c's registry), the
 * per-device state (scratch, upload stream, events; kept for the process's life once made: the
 * upload thread may be reading it), the upload thread.  Locks: `dev_lock` serialises a device's
 * setup and is held across its CUDA calls; `lock` (entries, allocations) is a leaf, never held
 * across a CUDA call or a wait, so the fill, in the program's memmove, only ever waits for
 * pinwheel's own short critical sections (and the guard's, guard.h).
 */

/* An upload (an entry) lives in one device's table and goes through these states:
 *   FREE -> FILLING      the fill reserved it and its scratch range (under `lock`)
 *   FILLING -> FILLED    the fill is done and its whole pages are guarded (the filler)
 *   FILLED -> USING      a copy of the program takes it (a compare-and-swap: one taker)
 *   USING -> USED        the device copy from the scratch is enqueued (the taker)
 *   FILLING, FILLED -> REVOKED   anything that may have changed its bytes (a compare-and-swap)
 *   USING -> REVOKED     the taker could not use it
 *   USED, REVOKED -> FREE        the upload thread, once the filler is done with it and every DMA
 *                        into its scratch and device copy out of it completed (under `lock`)
 * Whoever moves an entry out of FILLED releases its guard (the reader of a guard fault, a
 * revoker, the taker); an entry revoked while FILLING is released by its filler, whose own move
 * to FILLED then fails.  `live` counts FILLING and FILLED entries: the hot paths (every launch and
 * copy) test only it.
 *
 * The fill runs in the program's memmove: it never calls CUDA and never allocates; it publishes
 * each filled chunk (filled, a release store) and wakes the upload thread, which enqueues the
 * DMAs on the device's upload stream and, once the fill is done and nothing more will be
 * enqueued, records the entry's event: a copy that takes the entry waits (host side, bounded)
 * for that record, then makes its stream wait for the event.
 *
 * Scratch: one buffer per device, ranges handed out first-fit among the entries not FREE, so a
 * range is reused only after the upload thread saw its DMAs and device copies complete.
 */
#define _GNU_SOURCE
#include "fa.h"
#include "guard.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FA_DEVICES 64
#define FA_ENTRIES 8 /* per device: each holds a guard slot (64 in all) while it waits */
#define FA_ALLOCS 256
#define FA_ALIGN ((size_t)2 << 20)  /* replaced allocations: whole, aligned huge pages */
#define FA_AHEAD 4                  /* fill segments outstanding */
#define FA_TAKE_WAIT_NS 50000000ull /* a taker waits this long at most for the uploads' record */
#define FA_EXPIRE_NS ((uint64_t)FA_EXPIRE_MS * 1000000)

_Static_assert(PW_FA_NREASONS <= PW_FA_REASONS_MAX, "pw_stats.fa_revoked too small");

enum { E_FREE = 0, E_FILLING, E_FILLED, E_USING, E_USED, E_REVOKED };

typedef struct fa_dev fa_dev;
typedef struct fa_entry {
  atomic_int state;
  /* the fill's range [host, host + n): written under `lock` while FREE, read without it (a
   * reader checks gen before and after) */
  _Atomic uintptr_t host;
  _Atomic size_t n;
  atomic_uint gen;       /* bumped by each reservation */
  size_t off;            /* where its bytes go in the scratch */
  const char *lo, *hi;   /* the whole pages the guard covers */
  int gid;               /* the guard's handle (< 0: none) */
  uint64_t t_filled;     /* when the fill ended (before FILLED is published) */
  _Atomic size_t filled; /* bytes from host filled so far (filler -> upload thread) */
  atomic_int fill_done;  /* the filler no longer touches the entry */
  atomic_int recorded;   /* ev recorded after the last DMA (upload thread -> taker) */
  atomic_int failed;     /* a DMA or the record failed: never to be used */
  int no_ev;             /* the record failed: the DMAs were waited for instead */
  size_t issued;         /* upload thread only: bytes whose DMA is enqueued */
  void *ev, *used_ev;    /* after the DMAs (upload stream); after the device copy (taker's) */
} fa_entry;

struct fa_dev {
  int device;
  atomic_int dead; /* reset: made anew (the struct kept: the upload thread may read it) */
  const pw_ops *ops;
  char *scratch;
  size_t size;
  void *stream;
  fa_entry e[FA_ENTRIES];
};

typedef struct fa_alloc {
  atomic_uint seq; /* odd while a writer changes the slot (readers take no lock) */
  _Atomic uintptr_t base, end;
  unsigned flags;
  int device;
  int orphan; /* its device was reset: no longer registered, still mapped until freed */
} fa_alloc;

static size_t scratch_size, chunk_size = 4u << 20;
static _Atomic uint64_t expire_ns = FA_EXPIRE_NS; /* tests may change both */
static _Atomic uint64_t take_wait_ns = FA_TAKE_WAIT_NS;
static int threads = 1;
static const pw_guard_ops *guard;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;     /* entries, allocations: a leaf */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER; /* a device's setup (calls CUDA) */
static atomic_int dev_failed[FA_DEVICES];                    /* its setup failed (until a reset) */
static fa_dev *_Atomic devs[FA_DEVICES];
/* The device's uploads ahead, or NULL (none, or a device number out of range). */
static fa_dev *dev_at(int device) {
  return device >= 0 && device < FA_DEVICES
             ? atomic_load_explicit(&devs[device], memory_order_acquire)
             : NULL;
}
static fa_alloc allocs[FA_ALLOCS];
static atomic_int allocs_used;
atomic_int pw_fa_live_count;
/* Once the program used something that can order a write after a fill out of sight (fa.h). */
static atomic_int tainted;
static atomic_int exiting;      /* exit began: the upload thread stops, nothing new is uploaded */
static atomic_uint work;        /* bumped to wake the upload thread */
static atomic_int sleeping;     /* the upload thread waits on `work` */
static atomic_int thread_on;    /* 1 the upload thread runs, -1 it could not start */
static atomic_int thread_stop;  /* tests: the thread ends */
static atomic_int serving = -1; /* the device whose entries the upload thread works on, or -1 */

/* The waits for another thread's short step (a call in flight, the upload thread's turn). */
static void nap_us(long us) {
  struct timespec t = {0, us * 1000};
  nanosleep(&t, NULL);
}

static void wake(void) {
  atomic_fetch_add(&work, 1);
  if (atomic_load(&sleeping))
    syscall(SYS_futex, (unsigned *)&work, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void pw_fa_configure(size_t scratch, size_t chunk, int nthreads, const pw_guard_ops *g) {
  scratch_size = g && g->protect_revocable ? scratch : 0;
  int why = scratch_size && g->available ? g->available() : 0;
  if (why) { /* every upload would be given up: nothing is replaced or uploaded */
    pw_log(PW_LOG_INFO, "uploads ahead are off: the guard cannot be had here (%s)",
           pw_guard_reason_name(why));
    scratch_size = 0;
  }
  if (chunk) chunk_size = chunk;
  /* one CPU of the staging threads' is left to the upload thread, which issues each chunk's DMA
   * as soon as the chunk is filled: with every staging CPU filling, it was scheduled only near
   * the fill's end, and the upload came after the fill (CuPy's cp.asarray at 28 GB/s) */
  threads = nthreads > 1 ? nthreads - 1 : 1;
  guard = g;
}

int pw_fa_on(void) {
  return scratch_size != 0;
}

/* ---- the replaced allocations ---- */

static void alloc_set(fa_alloc *a, uintptr_t base, uintptr_t end, unsigned flags, int device) {
  atomic_fetch_add(&a->seq, 1);
  a->flags = flags;
  a->device = device;
  a->orphan = 0;
  atomic_store(&a->base, base);
  atomic_store(&a->end, end);
  atomic_fetch_add(&a->seq, 1);
}

/* The allocation holding [p, p+n) (n 0: p itself): 1 and a copy of it, else 0.  Lock-free. */
static int alloc_find(const void *p, size_t n, fa_alloc *out) {
  uintptr_t a = (uintptr_t)p, b = a + (n ? n : 1);
  if (b < a) return 0;
  int u = atomic_load_explicit(&allocs_used, memory_order_acquire);
  for (int i = 0; i < u; i++) {
    fa_alloc *s = &allocs[i];
    unsigned s1 = atomic_load(&s->seq);
    if (s1 & 1) continue;
    uintptr_t base = atomic_load(&s->base), end = atomic_load(&s->end);
    unsigned flags = s->flags;
    int device = s->device, orphan = s->orphan;
    if (atomic_load(&s->seq) != s1 || !base || a < base || b > end) continue;
    atomic_store_explicit(&out->base, base, memory_order_relaxed);
    atomic_store_explicit(&out->end, end, memory_order_relaxed);
    out->flags = flags;
    out->device = device;
    out->orphan = orphan;
    return 1;
  }
  return 0;
}

/* ---- entries ---- */

static void fa_revoke(fa_entry *e, int reason) {
  int st = E_FILLED;
  if (atomic_compare_exchange_strong(&e->state, &st, E_REVOKED)) {
    atomic_fetch_sub(&pw_fa_live_count, 1);
    if (e->gid >= 0) guard->release(e->gid);
  } else if (st == E_FILLING && atomic_compare_exchange_strong(&e->state, &st, E_REVOKED)) {
    atomic_fetch_sub(&pw_fa_live_count, 1); /* the filler releases the guard it may take */
  } else {
    return;
  }
  pw_add(&pw_st.fa_revoked[reason], 1);
  wake();
}

/* The guard's call: a write, free, unmap or fork met the entry's range.  Never blocks. */
static void revoke_cb(void *arg) {
  fa_revoke((fa_entry *)arg, PW_FA_GUARD);
}

static int live_state(int st) {
  return st == E_FILLING || st == E_FILLED;
}

void pw_fa_revoke_range(const void *p, size_t n, int reason) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  for (int d = 0; d < FA_DEVICES && pw_fa_live(); d++) {
    fa_dev *dv = atomic_load_explicit(&devs[d], memory_order_acquire);
    for (int i = 0; dv && i < FA_ENTRIES; i++) {
      fa_entry *e = &dv->e[i];
      if (!live_state(atomic_load(&e->state))) continue;
      uintptr_t h = atomic_load_explicit(&e->host, memory_order_relaxed);
      if (h < b && a < h + atomic_load_explicit(&e->n, memory_order_relaxed)) fa_revoke(e, reason);
    }
  }
}

void pw_fa_taint(const char *what) {
  if (!scratch_size || atomic_load_explicit(&tainted, memory_order_relaxed) ||
      atomic_exchange(&tainted, 1))
    return; /* once off, a relaxed load per call */
  pw_log(PW_LOG_INFO, "%s: uploads ahead of the program's copies are off from now on", what);
  pw_fa_revoke_all(PW_FA_STREAM_ORDERED);
}

/* Every live upload of d given up. */
static void revoke_dev(fa_dev *d, int reason) {
  for (int i = 0; i < FA_ENTRIES; i++)
    if (live_state(atomic_load(&d->e[i].state))) fa_revoke(&d->e[i], reason);
}

void pw_fa_revoke_all(int reason) {
  for (int d = 0; d < FA_DEVICES && pw_fa_live(); d++) {
    fa_dev *dv = atomic_load_explicit(&devs[d], memory_order_acquire);
    if (dv) revoke_dev(dv, reason);
  }
}

/* A free entry and n bytes of scratch (first fit among the entries not FREE), FILLING: or NULL. */
static fa_entry *reserve(fa_dev *d, char *host, size_t n) {
  fa_entry *got = NULL;
  pthread_mutex_lock(&lock);
  if (atomic_load(&d->dead)) { /* reset meanwhile */
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  /* under `lock` no entry leaves FREE but here, and none enters it (serve takes the lock) */
  for (int i = 0; i < FA_ENTRIES && !got; i++)
    if (atomic_load(&d->e[i].state) == E_FREE) got = &d->e[i];
  size_t at = 0;
  int fit = 0;
  for (int pass = 0; got && pass <= FA_ENTRIES && !fit; pass++) {
    /* candidates: 0, then the end of each entry in use */
    if (pass > 0) {
      fa_entry *x = &d->e[pass - 1];
      if (atomic_load(&x->state) == E_FREE) continue;
      at = (x->off + atomic_load(&x->n) + 255) & ~(size_t)255;
    }
    if (at > d->size || d->size - at < n) continue;
    fit = 1;
    for (int i = 0; i < FA_ENTRIES && fit; i++) {
      fa_entry *x = &d->e[i];
      fit = !(atomic_load(&x->state) != E_FREE && x->off < at + n &&
              at < x->off + atomic_load(&x->n));
    }
  }
  if (!fit) got = NULL;
  if (got) {
    atomic_fetch_add(&got->gen, 1);
    atomic_store(&got->host, (uintptr_t)host);
    atomic_store(&got->n, n);
    got->off = at;
    got->lo = got->hi = host;
    got->gid = -1;
    got->issued = 0;
    got->no_ev = 0;
    atomic_store(&got->filled, 0);
    atomic_store(&got->fill_done, 0);
    atomic_store(&got->recorded, 0);
    atomic_store(&got->failed, 0);
    atomic_fetch_add(&pw_fa_live_count, 1);
    atomic_store(&got->state, E_FILLING);
  }
  pthread_mutex_unlock(&lock);
  return got;
}

/* ---- the upload thread ---- */

static int event_done(const pw_ops *ops, void *ev) {
  int r = ops->event_query(ev);
  if (r == 0) return 1;
  if (r == 1) return 0;
  ops->clear_error(); /* a dead context: nothing of it will run any more */
  return 1;
}

/* Enqueue what was filled, record once nothing more will be; reclaim; expire.  1 if it did
 * something. */
static int serve(fa_dev *d, fa_entry *e, int *cur, uint64_t now, int *pending) {
  int st = atomic_load(&e->state);
  if (st == E_FREE) return 0;
  *pending = 1;
  const pw_ops *ops = d->ops;
  int did = 0;
  if (!atomic_load(&e->recorded)) {
    size_t f = atomic_load_explicit(&e->filled, memory_order_acquire);
    int done = atomic_load_explicit(&e->fill_done, memory_order_acquire);
    if (e->issued < f && (st == E_FILLING || st == E_FILLED || st == E_USING) &&
        !atomic_load(&e->failed)) {
      if (*cur != d->device && ops->set_device(d->device) == 0) *cur = d->device;
      if (ops->copy_async(d->scratch + e->off + e->issued,
                          (const char *)atomic_load(&e->host) + e->issued, f - e->issued,
                          PW_DIR_H2D, d->stream)) {
        ops->clear_error();
        atomic_store(&e->failed, 1);
        fa_revoke(e, PW_FA_UPLOAD_FAILED);
      } else {
        pw_add(&pw_st.fa_upload_bytes, f - e->issued);
        e->issued = f;
      }
      did = 1;
    }
    st = atomic_load(&e->state);
    if (done && (e->issued == atomic_load(&e->n) || st == E_REVOKED || atomic_load(&e->failed))) {
      if (*cur != d->device && ops->set_device(d->device) == 0) *cur = d->device;
      if (ops->event_record(e->ev, d->stream)) { /* then wait for the DMAs here */
        ops->clear_error();
        atomic_store(&e->failed, 1);
        (void)ops->stream_sync(d->stream);
        ops->clear_error();
        e->no_ev = 1;
      }
      atomic_store_explicit(&e->recorded, 1, memory_order_release);
      did = 1;
    }
  }
  st = atomic_load(&e->state);
  if (st == E_FILLED && now > e->t_filled &&
      now - e->t_filled > atomic_load_explicit(&expire_ns, memory_order_relaxed)) /* now: older */
    fa_revoke(e, PW_FA_EXPIRED);
  if ((st == E_REVOKED || st == E_USED) && atomic_load(&e->fill_done) &&
      atomic_load(&e->recorded) && (e->no_ev || event_done(ops, e->ev)) &&
      (st != E_USED || event_done(ops, e->used_ev))) {
    pthread_mutex_lock(&lock);
    atomic_store(&e->state, E_FREE);
    pthread_mutex_unlock(&lock);
    did = 1;
  }
  return did;
}

static void *upload_thread(void *arg) {
  (void)arg;
  int cur = -1; /* its CUDA calls go to pw_ops, never to the hooks */
  while (!atomic_load(&thread_stop)) {
    unsigned seen = atomic_load(&work);
    int did = 0, pending = 0;
    uint64_t now = pw_now_ns();
    for (int i = 0; i < FA_DEVICES; i++) {
      fa_dev *d = atomic_load_explicit(&devs[i], memory_order_acquire);
      if (!d) continue;
      atomic_store(&serving, i); /* before the check: a reset waits for it to move on */
      if (!atomic_load(&d->dead))
        for (int k = 0; k < FA_ENTRIES; k++)
          did |= serve(d, &d->e[k], &cur, now, &pending);
      atomic_store(&serving, -1);
    }
    if (did) continue;
    /* idle: wait for a wake, polling every ms while an entry waits for its GPU work */
    struct timespec ms = {0, 1000000};
    atomic_store(&sleeping, 1);
    if (atomic_load(&work) == seen && !atomic_load(&thread_stop))
      syscall(SYS_futex, (unsigned *)&work, FUTEX_WAIT_PRIVATE, seen, pending ? &ms : NULL, NULL,
              0);
    atomic_store(&sleeping, 0);
  }
  atomic_store(&thread_on, 0);
  return NULL;
}

/* At exit, before CUDA's own teardown (registered after CUDA's, at the first device's state: the
 * handlers run newest first): the upload thread stops calling CUDA (bounded: it is never long in
 * a call). */
static void fa_exit(void) {
  atomic_store(&exiting, 1);
  if (atomic_load(&thread_on) != 1) return;
  atomic_store(&thread_stop, 1);
  uint64_t t0 = pw_now_ns();
  while (atomic_load(&thread_on) == 1 && pw_now_ns() - t0 < 200000000ull) {
    wake();
    nap_us(100);
  }
}

/* The device's state, made on first use (on the caller's thread, in a CUDA call of the program),
 * the upload thread started with the first: NULL when it cannot be had. */
static fa_dev *dev_get(const pw_ops *ops, int device) {
  if (device < 0 || device >= FA_DEVICES) return NULL;
  fa_dev *d = atomic_load_explicit(&devs[device], memory_order_acquire);
  if (d && !atomic_load(&d->dead)) return d->ops == ops ? d : NULL; /* one front end a device */
  if (atomic_load(&dev_failed[device]) || atomic_load(&exiting))
    return NULL; /* a failure is said once, and tried again after a reset */
  /* dev_lock, never `lock`: CUDA is called under it, and the fill (in the program's memmove)
   * takes `lock` */
  pthread_mutex_lock(&dev_lock);
  d = atomic_load(&devs[device]);
  if (d && !atomic_load(&d->dead)) {
    if (d->ops != ops) d = NULL;
    goto out;
  }
  if (!atomic_load(&thread_on)) {
    static atomic_int at_exit;
    atomic_store(&thread_stop, 0);
    /* the default stack: it calls CUDA (and, tracing, CUPTI's callbacks run on it) */
    atomic_store(&thread_on, pw_spawn(upload_thread, NULL, 0) == 0 ? 1 : -1);
    if (atomic_load(&thread_on) == 1 && !atomic_exchange(&at_exit, 1)) atexit(fa_exit);
  }
  if (atomic_load(&thread_on) != 1) goto fail;
  fa_dev *fresh = d ? d : calloc(1, sizeof *fresh);
  if (!fresh) goto fail;
  int mode = ops->relax_capture(0, 0);
  int pending = ops->error_pending(); /* the program's: never cleared by pinwheel */
  void *scratch = NULL, *stream = NULL;
  int rc = ops->device_alloc(&scratch, scratch_size);
  if (rc == 0 && scratch) rc = ops->stream_create(&stream);
  for (int i = 0; rc == 0 && i < FA_ENTRIES; i++) {
    rc = ops->event_create(&fresh->e[i].ev);
    if (rc == 0) rc = ops->event_create(&fresh->e[i].used_ev);
  }
  ops->relax_capture(1, mode);
  if (rc != 0 || !scratch) {
    if (!pending) ops->clear_error();
    if (scratch) ops->device_free(scratch);
    atomic_store(&dev_failed[device], 1);
    pw_log(PW_LOG_WARN,
           "cannot allocate %zu MiB of device memory for uploads ahead on device %d (CUDA error "
           "%d): pinned allocations there stay CUDA's",
           scratch_size >> 20, device, rc);
    if (!d) free(fresh); /* its stream and events, if any, stay with the context */
    goto fail;
  }
  fresh->device = device;
  fresh->ops = ops;
  fresh->scratch = scratch;
  fresh->size = scratch_size;
  fresh->stream = stream;
  atomic_store(&fresh->dead, 0);
  d = fresh;
  atomic_store_explicit(&devs[device], d, memory_order_release);
out:
  pthread_mutex_unlock(&dev_lock);
  return d;
fail:
  pthread_mutex_unlock(&dev_lock);
  return NULL;
}

/* ---- allocations ---- */

/* Forget slot i of the allocations (under no lock). */
static void alloc_drop(int i) {
  pthread_mutex_lock(&lock);
  alloc_set(&allocs[i], 0, 0, 0, -1);
  pthread_mutex_unlock(&lock);
}

int pw_fa_host_alloc(const pw_ops *ops, void **p, size_t n, unsigned flags) {
  if (!scratch_size || atomic_load(&tainted) || atomic_load(&exiting) || n < FA_MIN_BYTES ||
      n > SIZE_MAX - 2 * FA_ALIGN)
    return -1;
  int pending = ops->error_pending(); /* the program's: never cleared by pinwheel */
  int device = -1;
  if (ops->get_device(&device) || (ops->context_ok && !ops->context_ok(NULL, device))) {
    /* the driver's: only in the device's primary context, where its copies are staged */
    if (!pending) ops->clear_error();
    return -1;
  }
  if (!dev_get(ops, device)) return -1;
  size_t len = (n + FA_ALIGN - 1) & ~(FA_ALIGN - 1);
  char *m = mmap(NULL, len + FA_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return -1;
  char *at = (char *)(((uintptr_t)m + FA_ALIGN - 1) & ~(uintptr_t)(FA_ALIGN - 1));
  if (at > m) munmap(m, (size_t)(at - m));
  if (m + len + FA_ALIGN > at + len) munmap(at + len, (size_t)(m + len + FA_ALIGN - (at + len)));
  /* MADV_DONTFORK: a fork's child does not get this memory (CUDA's it would share).  Inherited,
   * it would be copy-on-write: where the kernel does not copy pinned pages at the fork (before
   * Linux 5.9, or a driver that pins without FOLL_PIN) the parent's next write would move it to a
   * new page while the GPU kept the old one (DESIGN.md §11). */
  (void)madvise(at, len, MADV_DONTFORK);
  (void)madvise(at, len, MADV_HUGEPAGE);
  pthread_mutex_lock(&lock);
  int u = atomic_load(&allocs_used), i = 0;
  while (i < u && atomic_load(&allocs[i].base))
    i++;
  if (i < FA_ALLOCS) {
    alloc_set(&allocs[i], (uintptr_t)at, (uintptr_t)at + len, flags, device);
    if (i == u) atomic_store_explicit(&allocs_used, u + 1, memory_order_release);
  }
  pthread_mutex_unlock(&lock);
  if (i >= FA_ALLOCS) {
    munmap(at, len);
    return -1;
  }
  int mode = ops->relax_capture(0, 0);
  int rc = ops->host_register(at, len);
  void *dptr = NULL;
  int same = rc == 0 && ops->host_device_pointer(at, &dptr) == 0 && dptr == at;
  if (rc == 0 && !same) /* kernels given the host pointer would miss: CUDA's memory then */
    (void)ops->host_unregister(at);
  ops->relax_capture(1, mode);
  if (!same) {
    if (!pending) ops->clear_error();
    alloc_drop(i);
    munmap(at, len);
    pw_log(PW_LOG_INFO,
           rc ? "cannot register %zu MiB of host memory (CUDA error %d): CUDA allocates it"
              : "registered host memory's device pointer is not its host pointer here (%zu MiB, "
                "%d): CUDA allocates pinned memory",
           len >> 20, rc);
    return -1;
  }
  pw_add(&pw_st.fa_allocs, 1);
  pw_add(&pw_st.fa_alloc_bytes, len);
  *p = at;
  return 0;
}

/* Wait until e (given up, or taken by a copy that is about to end) is FREE: the upload thread
 * reclaims it; once that thread has stopped (exit), this thread waits for its GPU work itself. */
static void wait_free(fa_dev *d, fa_entry *e) {
  const pw_ops *ops = d->ops;
  uint64_t t0 = pw_now_ns();
  while (atomic_load(&e->state) != E_FREE) {
    int st = atomic_load(&e->state);
    /* an upload thread that exit asked to stop and that is still in a CUDA call after 2 s is
     * taken as gone */
    int thread = atomic_load(&thread_on) == 1 &&
                 !(atomic_load(&thread_stop) && pw_now_ns() - t0 > 2000000000ull);
    if (live_state(st) && !thread) fa_revoke(e, PW_FA_FREE); /* filled after the thread stopped */
    if (thread || !atomic_load(&e->fill_done) || st == E_USING || live_state(st)) {
      wake();
      nap_us(50);
      continue;
    }
    /* the upload thread is gone: nothing else touches the entry */
    if (!atomic_load(&e->recorded) || e->no_ev ? ops->stream_sync(d->stream)
                                               : ops->event_sync(e->ev))
      ops->clear_error();
    if (st == E_USED && ops->event_sync(e->used_ev)) ops->clear_error();
    pthread_mutex_lock(&lock);
    atomic_store(&e->state, E_FREE);
    pthread_mutex_unlock(&lock);
  }
}

/* Wait until no entry of the range is in use (given up first). */
static void wait_range_free(uintptr_t a, uintptr_t b) {
  for (int d = 0; d < FA_DEVICES; d++) {
    fa_dev *dv = atomic_load_explicit(&devs[d], memory_order_acquire);
    for (int i = 0; dv && i < FA_ENTRIES; i++) {
      fa_entry *e = &dv->e[i];
      uintptr_t h = atomic_load(&e->host);
      if (atomic_load(&e->state) != E_FREE && h < b && a < h + atomic_load(&e->n)) wait_free(dv, e);
    }
  }
}

int pw_fa_host_free(void *p) {
  fa_alloc a;
  if (!p || !alloc_find(p, 0, &a) || atomic_load(&a.base) != (uintptr_t)p) return 0;
  uintptr_t base = atomic_load(&a.base), end = atomic_load(&a.end);
  pw_fa_revoke_range(p, end - base, PW_FA_FREE);
  wait_range_free(base, end);
  fa_dev *d = dev_at(a.device);
  if (d && !a.orphan) {
    /* as cudaFreeHost: the program's own copies from it are waited for before it goes, on its
     * device (its context pushed for the wait, the thread's own back after: never the thread's
     * current device, which may be another, nor a context made for it) */
    const pw_ops *ops = d->ops;
    int pending = ops->error_pending();
    int mode = ops->relax_capture(0, 0);
    int rc = 0;
    if (ops->push_context(d->stream) == 0) {
      rc |= ops->device_sync();
      ops->pop_context();
    }
    rc |= ops->host_unregister(p);
    if (rc && !pending) ops->clear_error();
    ops->relax_capture(1, mode);
  }
  pthread_mutex_lock(&lock);
  for (int i = 0; i < atomic_load(&allocs_used); i++)
    if (atomic_load(&allocs[i].base) == base) alloc_set(&allocs[i], 0, 0, 0, -1);
  pthread_mutex_unlock(&lock);
  munmap(p, end - base);
  return 1;
}

int pw_fa_host_flags(const void *p, unsigned *flags) {
  fa_alloc a;
  if (!p || !alloc_find(p, 0, &a) || a.orphan) return 0; /* a reset ended it, as CUDA's */
  if (flags) *flags = a.flags;
  return 1;
}

/* ---- the fill ---- */

static void publish(fa_entry *e, size_t upto) {
  atomic_store_explicit(&e->filled, upto, memory_order_release);
  wake();
}

int pw_fa_fill(void *dst, const void *src, size_t n) {
  fa_alloc a;
  if (!scratch_size) return 0;
  pw_fa_revoke_range(dst, n, PW_FA_REFILL); /* before any thread writes there, */
  guard->wait(dst, n);                      /* and a copy taking one has let it go */
  if (atomic_load(&tainted) || atomic_load(&exiting) || !alloc_find(dst, n, &a) || a.orphan)
    return 0;
  fa_dev *d = dev_at(a.device);
  if (!d || atomic_load(&d->dead)) return 0;
  fa_entry *e = n <= d->size ? reserve(d, dst, n) : NULL;
  if (!e) {
    pw_add(&pw_st.fa_no_room, 1);
    return 0;
  }
  uint64_t t0 = pw_now_ns();
  pw_batch b;
  pw_batch_begin(&b, threads, 1);
  uint64_t seg[FA_AHEAD];
  size_t end[FA_AHEAD], off = 0;
  unsigned pushed = 0, waited = 0;
  char *to = dst;
  const char *from = src;
  while (off < n || waited < pushed) {
    if (off < n && pushed - waited < FA_AHEAD) {
      size_t len = n - off < chunk_size ? n - off : chunk_size;
      seg[pushed % FA_AHEAD] = pw_batch_push(&b, to + off, from + off, len, PW_PART_STREAM);
      end[pushed % FA_AHEAD] = off + len;
      off += len;
      pushed++;
      continue;
    }
    pw_batch_wait(&b, seg[waited % FA_AHEAD]);
    publish(e, end[waited % FA_AHEAD]);
    waited++;
  }
  pw_batch_end(&b);
  /* every byte is in place: guard the whole pages, then publish FILLED */
  const void *lo = dst, *hi = dst;
  int gid = -1;
  int rc = guard->protect_revocable(dst, n, &gid, &lo, &hi, revoke_cb, e);
  e->lo = lo;
  e->hi = hi;
  e->gid = rc == 0 ? gid : -1;
  e->t_filled = pw_now_ns();
  int st = E_FILLING;
  if (rc == 0) {
    if (!atomic_compare_exchange_strong(&e->state, &st, E_FILLED) && gid >= 0)
      guard->release(gid); /* revoked while it filled */
  } else if (atomic_compare_exchange_strong(&e->state, &st, E_REVOKED)) {
    atomic_fetch_sub(&pw_fa_live_count, 1);
    pw_add(&pw_st.fa_revoked[PW_FA_UNGUARDED], 1);
  }
  atomic_store_explicit(&e->fill_done, 1, memory_order_release);
  wake();
  pw_add(&pw_st.fa_fills.calls, 1);
  pw_add(&pw_st.fa_fills.bytes, n);
  pw_add(&pw_st.fa_fills.ns, pw_now_ns() - t0);
  return 1;
}

/* ---- the program's copy ---- */

/* Give up an entry taken (USING): its guard released, counted. */
static void untake(fa_entry *e, int reason) {
  atomic_store(&e->state, E_REVOKED);
  if (e->gid >= 0) guard->release(e->gid);
  pw_add(&pw_st.fa_revoked[reason], 1);
  wake();
}

/* Whether an entry of d is FILLED with [p, p+n) (a glance, no take: a copy of other bytes then
 * makes no CUDA query here). */
static int holds(fa_dev *d, const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  for (int i = 0; i < FA_ENTRIES; i++) {
    fa_entry *e = &d->e[i];
    uintptr_t h = atomic_load(&e->host);
    if (atomic_load(&e->state) == E_FILLED && h <= a && b <= h + atomic_load(&e->n)) return 1;
  }
  return 0;
}

/* Take (FILLED -> USING) the entry of device `device` that holds [p, p+n): it, or NULL.  The
 * range is read without the lock, so the take is checked against a reservation in between (the
 * entry's gen): one that took a later fill's entry gives it up (revoked, never used). */
static fa_entry *take(const void *p, size_t n, int device) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  fa_dev *d = dev_at(device);
  for (int i = 0; d && !atomic_load(&d->dead) && i < FA_ENTRIES; i++) {
    fa_entry *e = &d->e[i];
    unsigned g = atomic_load(&e->gen);
    uintptr_t h = atomic_load(&e->host);
    size_t len = atomic_load(&e->n);
    if (atomic_load(&e->state) != E_FILLED || a < h || b > h + len || atomic_load(&e->gen) != g)
      continue;
    int st = E_FILLED;
    if (!atomic_compare_exchange_strong(&e->state, &st, E_USING)) continue;
    atomic_fetch_sub(&pw_fa_live_count, 1);
    if (atomic_load(&e->gen) == g) return e;
    untake(e, PW_FA_USE_FAILED); /* another fill's: its guard released, not used */
  }
  return NULL;
}

/* Enqueue on the stream: the wait for the uploads, the device copy of the guarded part from the
 * scratch, the partial pages at either end from the pinned memory itself, the record of used_ev.
 * 0, or a CUDA error (something may have been enqueued). */
static int use(fa_dev *d, fa_entry *e, const pw_ops *ops, char *dst, const char *src, size_t n,
               void *stream) {
  const char *end = src + n;
  const char *mid0 = src > e->lo ? src : e->lo, *mid1 = end < e->hi ? end : e->hi;
  if (mid1 < mid0) mid1 = mid0 = src; /* nothing guarded inside: all from the pinned memory */
  int rc = ops->stream_wait_event(stream, e->ev);
  if (!rc && mid0 > src) rc = ops->copy_async(dst, src, (size_t)(mid0 - src), PW_DIR_H2D, stream);
  if (!rc && mid1 > mid0)
    rc = ops->copy_async(dst + (mid0 - src),
                         d->scratch + e->off + (size_t)((uintptr_t)mid0 - atomic_load(&e->host)),
                         (size_t)(mid1 - mid0), PW_DIR_D2D, stream);
  if (!rc && end > mid1)
    rc = ops->copy_async(dst + (mid1 - src), mid1, (size_t)(end - mid1), PW_DIR_H2D, stream);
  if (!rc) rc = ops->event_record(e->used_ev, stream);
  return rc;
}

int pw_fa_copy(const pw_transfer *c) {
  if (!pw_fa_live() || !c->n) return -1;
  int wanted = !c->sync_api && c->dir == PW_DIR_H2D && c->src_kind == PW_MEM_PINNED &&
               c->dst_kind == PW_MEM_DEVICE && c->ops && c->dst_dev >= 0 && c->dst_dev < FA_DEVICES;
  fa_dev *d = wanted && !atomic_load(&tainted) ? dev_at(c->dst_dev) : NULL;
  if (!d || d->ops != c->ops) {
    pw_fa_revoke_range(c->dst, c->n, PW_FA_COPY_INTO); /* what the real copy may write */
    return -1;
  }
  if (!holds(d, c->src, c->n)) return -1; /* not bytes of an upload */
  const pw_ops *ops = c->ops;
  if (ops->context_ok && !ops->context_ok(c->stream, c->dst_dev))
    return -1;                        /* a driver copy in another context than the scratch's */
  int pending = ops->error_pending(); /* the program's: never cleared by pinwheel */
  int capturing = 0;
  if (ops->stream_capturing(c->stream, &capturing) || capturing) {
    if (!pending) ops->clear_error();
    return -1; /* a graph being captured gets the real copy: the upload stays */
  }
  fa_entry *e = take(c->src, c->n, c->dst_dev);
  if (!e) return -1;
  uint64_t t0 = pw_now_ns();
  while (!atomic_load_explicit(&e->recorded, memory_order_acquire) &&
         pw_now_ns() - t0 < atomic_load_explicit(&take_wait_ns, memory_order_relaxed)) {
    wake();
    sched_yield();
  }
  if (!atomic_load_explicit(&e->recorded, memory_order_acquire) || atomic_load(&e->failed)) {
    untake(e, PW_FA_UPLOAD_FAILED);
    return -1;
  }
  int mode = ops->relax_capture(0, 0);
  int rc = use(d, e, ops, c->dst, c->src, c->n, c->stream);
  if (rc) { /* the real copy comes after whatever was enqueued: wait for that here */
    if (!pending) ops->clear_error();
    if (ops->stream_sync(c->stream) && !pending) ops->clear_error();
  }
  ops->relax_capture(1, mode);
  if (rc) {
    untake(e, PW_FA_USE_FAILED);
    return -1;
  }
  atomic_store(&e->state, E_USED);
  if (e->gid >= 0) guard->release(e->gid);
  wake();
  pw_add(&pw_st.fa_used.calls, 1);
  pw_add(&pw_st.fa_used.bytes, c->n);
  pw_add(&pw_st.fa_used.ns, pw_now_ns() - t0);
  return 0;
}

/* ---- reset, fork, tests ---- */

void pw_fa_device_quiesce(int device, const pw_ops *ops) {
  fa_dev *d = dev_at(device);
  if (!d || d->ops != ops || atomic_load(&d->dead)) return;
  revoke_dev(d, PW_FA_RESET);
  /* the upload thread reclaims each entry once its DMAs and device copy are done (2 s at most:
   * a stalled stream is not waited for) */
  uint64_t t0 = pw_now_ns();
  for (int i = 0; i < FA_ENTRIES && atomic_load(&thread_on) == 1; i++)
    while (atomic_load(&d->e[i].state) != E_FREE && pw_now_ns() - t0 < 2000000000ull) {
      wake();
      nap_us(50);
    }
}

void pw_fa_context_released(int device, const pw_ops *ops) {
  fa_dev *d = dev_at(device);
  if (d && d->ops == ops) pw_fa_device_reset(device);
}

void pw_fa_device_reset(int device) {
  if (device < 0 || device >= FA_DEVICES) return;
  /* dev_lock for the whole reset: no allocation sets the device up again meanwhile (this makes
   * no CUDA call) */
  pthread_mutex_lock(&dev_lock);
  fa_dev *d = atomic_load_explicit(&devs[device], memory_order_acquire);
  if (!d || atomic_load(&d->dead)) {
    pthread_mutex_unlock(&dev_lock);
    return;
  }
  pthread_mutex_lock(&lock);
  atomic_store(&d->dead, 1); /* first: no fill reserves an entry of it from now on */
  atomic_store(&dev_failed[device], 0);
  for (int i = 0; i < atomic_load(&allocs_used); i++) /* registrations end with the context */
    if (atomic_load(&allocs[i].base) && allocs[i].device == device && !allocs[i].orphan) {
      atomic_fetch_add(&allocs[i].seq, 1);
      allocs[i].orphan = 1; /* unmapped at its free, never used for a fill again */
      atomic_fetch_add(&allocs[i].seq, 1);
    }
  pthread_mutex_unlock(&lock);
  revoke_dev(d, PW_FA_RESET);
#ifdef PW_TESTING
  if (pw_fa_test_in_reset) pw_fa_test_in_reset(); /* a fill here must not reserve */
#endif
  /* a taker and a filler are inside a call of the program's: they end at once (a filler given up
   * releases its own guard); the GPU work of the entries is not waited for (a reset is the way
   * out of a device that stopped) */
  for (int i = 0; i < FA_ENTRIES; i++) {
    fa_entry *e = &d->e[i];
    for (;;) {
      int st = atomic_load(&e->state);
      if (st != E_USING && (st == E_FREE || atomic_load(&e->fill_done))) break;
      nap_us(50);
    }
  }
  while (atomic_load(&serving) == device) /* the upload thread is done with it */
    nap_us(50);
  /* every entry is FREE, REVOKED or USED now (nothing reserves, nothing is taken): FREE */
  pthread_mutex_lock(&lock);
  for (int i = 0; i < FA_ENTRIES; i++)
    atomic_store(&d->e[i].state, E_FREE);
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&dev_lock);
}

/* Off, with no device, allocation, upload or thread known (the devices' structs are the caller's:
 * forgotten, or freed). */
static void forget_state(void) {
  scratch_size = 0;
  for (int i = 0; i < FA_DEVICES; i++) {
    atomic_store(&devs[i], NULL);
    atomic_store(&dev_failed[i], 0);
  }
  for (int i = 0; i < FA_ALLOCS; i++)
    alloc_set(&allocs[i], 0, 0, 0, -1);
  atomic_store(&allocs_used, 0);
  atomic_store(&pw_fa_live_count, 0);
  atomic_store(&thread_on, 0);
}

void pw_fa_after_fork_child(void) {
  /* no upload thread, no CUDA: the child uploads nothing (its copies are CUDA's own); the
   * allocations are MADV_DONTFORK: not mapped here */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER, fresh_dev = PTHREAD_MUTEX_INITIALIZER;
  lock = fresh;
  dev_lock = fresh_dev;
  forget_state();
  atomic_store(&sleeping, 0);
  atomic_store(&serving, -1);
}

#ifdef PW_TESTING
void (*pw_fa_test_in_reset)(void);

void pw_fa_test_exit(void) {
  fa_exit();
}

void pw_fa_test_expire_ms(unsigned ms) {
  atomic_store(&expire_ns, (uint64_t)ms * 1000000);
}

void pw_fa_test_take_wait_ms(unsigned ms) {
  atomic_store(&take_wait_ns, (uint64_t)ms * 1000000);
}

void pw_fa_test_reset(void) {
  if (atomic_load(&thread_on) == 1) {
    atomic_store(&thread_stop, 1);
    while (atomic_load(&thread_on) == 1) {
      wake();
      sched_yield();
    }
  }
  atomic_store(&thread_stop, 0);
  atomic_store(&exiting, 0);
  for (int i = 0; i < FA_DEVICES; i++)
    free(atomic_load(&devs[i]));
  forget_state();
  atomic_store(&tainted, 0);
  guard = NULL;
  atomic_store(&expire_ns, FA_EXPIRE_NS);
  atomic_store(&take_wait_ns, FA_TAKE_WAIT_NS);
}
#endif
