/* engine.c — the staging engine: pageable copies rewritten into pinned chunks, a device ring and a
 * side stream (DESIGN.md §2–3).
 *
 * Owns: eligibility, per-device state (pinned pool, device ring, side stream, events), the two
 * circular arenas and their back-pressure, the H2D ring / pinned-only paths and the D2H path.
 * Must never: call CUDA except through its pw_ops table, print except through pw_log, exit or
 * abort, or return "staged" for a copy whose bytes are not guaranteed (any doubt: the caller
 * makes the real call).
 *
 * Ordering argument, per piece of an H2D copy through the ring:
 *   side stream:   wait(free event of every older ring region this piece overlaps)
 *                  DMA pinned chunk -> ring, record chunk event   (for each chunk)
 *   caller stream: wait(last chunk event); D2D ring -> dst; record the region's free event
 * A pinned chunk is reused only after its chunk event completed (host waits: back-pressure).
 * A ring region is reused only by a DMA ordered after its free event (device waits).
 *
 * Lock order: init_lock, then a device's lock.  A device's lock is held for a whole staged copy,
 * so a region's free event is always recorded before anyone can reserve over it.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64
#define ARENA_SLOTS 256
#define D2H_DEPTH 3

int pw_engine_test_drop_dependency;

typedef struct slot {
  size_t off, len;
  void *ev;
} slot;

typedef struct arena {
  size_t size, head;
  unsigned first, count;
  slot q[ARENA_SLOTS];
} arena;

enum { DEV_READY = 1, DEV_FAILED = -1 };
enum { ARENA_HOST, ARENA_RING };

typedef struct dev_state {
  int device, status;
  pthread_mutex_t lock;
  void *side;
  char *pinned, *ring;
  arena host, dring;
  void **free_ev;
  int nfree, capfree;
  void **all_ev; /* every event created, for destroy */
  int nall, capall;
} dev_state;

struct pw_engine {
  const pw_ops *ops;
  pw_engine_config cfg;
  pthread_mutex_t init_lock;
  dev_state *_Atomic dev[MAX_DEVICES];
  atomic_int forked;
};

pw_engine *pw_engine_create(const pw_ops *ops, const pw_engine_config *cfg) {
  pw_engine *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->ops = ops;
  e->cfg = *cfg;
  if (e->cfg.chunk < 64 * 1024) e->cfg.chunk = 64 * 1024;
  pthread_mutex_init(&e->init_lock, NULL);
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
static void *get_event(pw_engine *e, dev_state *d) {
  if (d->nfree > 0) return d->free_ev[--d->nfree];
  void *ev = NULL;
  if (e->ops->event_create(&ev) != 0 || !ev) return NULL;
  if (push_ptr(&d->all_ev, &d->nall, &d->capall, ev) != 0) return NULL;
  if (d->capfree < d->nall) {
    void **q = realloc(d->free_ev, (size_t)d->capall * sizeof *q);
    if (!q) return NULL;
    d->free_ev = q;
    d->capfree = d->capall;
  }
  return ev;
}

static void put_event(dev_state *d, void *ev) { d->free_ev[d->nfree++] = ev; }

/* ---- arenas ---- */

static int overlaps(const arena *a, size_t off, size_t len) {
  for (unsigned i = 0; i < a->count; i++) {
    const slot *s = &a->q[(a->first + i) % ARENA_SLOTS];
    if (s->off < off + len && off < s->off + s->len) return 1;
  }
  return 0;
}

/* Make the oldest slot's memory reusable: the host waits for a pinned chunk's DMA; the side
 * stream waits for a ring region's free event. */
static int retire_oldest(pw_engine *e, dev_state *d, arena *a, int which) {
  slot *s = &a->q[a->first];
  int rc = 0;
  if (which == ARENA_HOST) {
    int q = e->ops->event_query(s->ev);
    if (q == 1) {
      uint64_t t0 = pw_now_ns();
      rc = e->ops->event_sync(s->ev);
      pw_add(&pw_st.wait_space_ns, pw_now_ns() - t0);
      pw_add(&pw_st.wait_space_events, 1);
    } else if (q != 0) {
      rc = q;
    }
  } else if (!pw_engine_test_drop_dependency) {
    rc = e->ops->stream_wait_event(d->side, s->ev);
  }
  if (rc != 0) return rc;
  put_event(d, s->ev);
  a->first = (a->first + 1) % ARENA_SLOTS;
  a->count--;
  return 0;
}

static int reserve(pw_engine *e, dev_state *d, arena *a, int which, size_t len, size_t *off) {
  size_t o = a->head;
  if (o + len > a->size) o = 0;
  /* Room is kept for the D2H_DEPTH reservations a D2H copy holds before it commits them: a
   * queue that overflowed would hand out one event twice. */
  while (a->count > 0 && (overlaps(a, o, len) || a->count >= ARENA_SLOTS - D2H_DEPTH)) {
    int rc = retire_oldest(e, d, a, which);
    if (rc) return rc;
  }
  a->head = o + len;
  *off = o;
  return 0;
}

static void commit(arena *a, size_t off, size_t len, void *ev) {
  if (a->count >= ARENA_SLOTS) { /* cannot happen (reserve keeps room); counted, never silent */
    pw_add(&pw_st.internal_errors, 1);
    return;
  }
  slot *s = &a->q[(a->first + a->count) % ARENA_SLOTS];
  s->off = off;
  s->len = len;
  s->ev = ev;
  a->count++;
}

/* ---- per-device state ---- */

static dev_state *get_dev(pw_engine *e, int device) {
  if (device < 0 || device >= MAX_DEVICES) return NULL;
  dev_state *d = atomic_load(&e->dev[device]);
  if (d) return d->status == DEV_READY ? d : NULL;
  pthread_mutex_lock(&e->init_lock);
  d = atomic_load(&e->dev[device]);
  if (!d && (d = calloc(1, sizeof *d)) != NULL) {
    const pw_ops *ops = e->ops;
    pthread_mutex_init(&d->lock, NULL);
    d->device = device;
    d->status = DEV_READY;
    size_t pool = e->cfg.host_pool;
    if (pool < 2 * e->cfg.chunk) pool = 2 * e->cfg.chunk;
    void *p = NULL;
    int rc = ops->host_alloc(&p, pool);
    if (rc != 0 || !p) {
      ops->clear_error();
      pw_log(PW_LOG_WARN,
             "cannot allocate %zu MiB of pinned staging memory (CUDA error %d); copies to device "
             "%d go to CUDA unchanged",
             pool >> 20, rc, device);
      d->status = DEV_FAILED;
    } else {
      d->pinned = p;
      d->host.size = pool;
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
        }
      } else {
        pw_log(PW_LOG_INFO, "device ring disabled: the DMA runs on the caller's stream");
      }
      pw_log(PW_LOG_INFO, "device %d: %zu MiB pinned staging, %zu MiB device ring", device,
             pool >> 20, d->dring.size >> 20);
    }
    atomic_store(&e->dev[device], d);
  }
  pthread_mutex_unlock(&e->init_lock);
  return d && d->status == DEV_READY ? d : NULL;
}

/* Something failed after part of a copy was enqueued: drain what we enqueued, stop staging on
 * this device (its arenas can no longer be trusted), and let the caller make the real call. */
static int fail_device(pw_engine *e, dev_state *d, void *stream, int rc) {
  const pw_ops *ops = e->ops;
  if (d->side) ops->stream_sync(d->side);
  ops->stream_sync(stream);
  ops->clear_error();
  d->status = DEV_FAILED;
  pw_log(PW_LOG_ERROR,
         "a CUDA call of the staging engine failed (error %d); device %d's copies go to CUDA "
         "unchanged from now on",
         rc, d->device);
  return -1 - PW_FB_INTERNAL;
}

static void timed_memcpy(pw_engine *e, void *dst, const void *src, size_t n) {
  uint64_t t0 = pw_now_ns();
  pw_pool_memcpy(dst, src, n, e->cfg.threads);
  pw_add(&pw_st.staging_memcpy_ns, pw_now_ns() - t0);
}

static size_t h2d_chunk(pw_engine *e, dev_state *d) {
  size_t c = e->cfg.chunk;
  return c > d->host.size / 2 ? d->host.size / 2 : c;
}

static int stage_h2d_ring(pw_engine *e, dev_state *d, const pw_copy *c) {
  const pw_ops *ops = e->ops;
  size_t piece_max = d->dring.size / 2, chunk = h2d_chunk(e, d);
  char *dst = c->dst;
  const char *src = c->src;
  int rc = 0;
  for (size_t pos = 0; pos < c->n;) {
    size_t plen = c->n - pos < piece_max ? c->n - pos : piece_max, roff, hoff;
    if ((rc = reserve(e, d, &d->dring, ARENA_RING, plen, &roff))) return fail_device(e, d, c->stream, rc);
    void *last = NULL;
    for (size_t cpos = 0; cpos < plen;) {
      size_t clen = plen - cpos < chunk ? plen - cpos : chunk;
      if ((rc = reserve(e, d, &d->host, ARENA_HOST, clen, &hoff)))
        return fail_device(e, d, c->stream, rc);
      timed_memcpy(e, d->pinned + hoff, src + pos + cpos, clen);
      void *ev = get_event(e, d);
      if (!ev) return fail_device(e, d, c->stream, -1);
      if ((rc = ops->copy_async(d->ring + roff + cpos, d->pinned + hoff, clen, PW_DIR_H2D, d->side)) ||
          (rc = ops->event_record(ev, d->side))) {
        put_event(d, ev);
        return fail_device(e, d, c->stream, rc);
      }
      commit(&d->host, hoff, clen, ev);
      last = ev;
      cpos += clen;
    }
    void *fev = get_event(e, d);
    if (!fev) return fail_device(e, d, c->stream, -1);
    if ((rc = ops->stream_wait_event(c->stream, last)) ||
        (rc = ops->copy_async(dst + pos, d->ring + roff, plen, PW_DIR_D2D, c->stream)) ||
        (rc = ops->event_record(fev, c->stream))) {
      put_event(d, fev);
      return fail_device(e, d, c->stream, rc);
    }
    commit(&d->dring, roff, plen, fev);
    pw_add(&pw_st.ring_pieces, 1);
    pos += plen;
  }
  return PW_PATH_RING;
}

static int stage_h2d_pinned(pw_engine *e, dev_state *d, const pw_copy *c) {
  const pw_ops *ops = e->ops;
  size_t chunk = h2d_chunk(e, d), hoff;
  int rc;
  for (size_t pos = 0; pos < c->n;) {
    size_t clen = c->n - pos < chunk ? c->n - pos : chunk;
    if ((rc = reserve(e, d, &d->host, ARENA_HOST, clen, &hoff))) return fail_device(e, d, c->stream, rc);
    timed_memcpy(e, d->pinned + hoff, (const char *)c->src + pos, clen);
    void *ev = get_event(e, d);
    if (!ev) return fail_device(e, d, c->stream, -1);
    if ((rc = ops->copy_async((char *)c->dst + pos, d->pinned + hoff, clen, PW_DIR_H2D, c->stream)) ||
        (rc = ops->event_record(ev, c->stream))) {
      put_event(d, ev);
      return fail_device(e, d, c->stream, rc);
    }
    commit(&d->host, hoff, clen, ev);
    pos += clen;
  }
  return PW_PATH_PINNED;
}

/* Device -> pageable: DMA chunk k+1.. while chunk k is copied out; returns when every byte is in
 * dst.  A chunk is committed to the arena only once copied out, and D2H_DEPTH + 2 chunks fit in
 * the pool, so a reservation can never land on a chunk still waiting to be copied out. */
static int stage_d2h(pw_engine *e, dev_state *d, const pw_copy *c) {
  const pw_ops *ops = e->ops;
  size_t chunk = e->cfg.chunk;
  if (chunk > d->host.size / (D2H_DEPTH + 2)) chunk = d->host.size / (D2H_DEPTH + 2);
  struct {
    size_t hoff, pos, len;
    void *ev;
  } fly[D2H_DEPTH];
  int head = 0, nfly = 0, rc;
  size_t pos = 0;
  while (pos < c->n || nfly > 0) {
    while (pos < c->n && nfly < D2H_DEPTH) {
      size_t clen = c->n - pos < chunk ? c->n - pos : chunk, hoff;
      if ((rc = reserve(e, d, &d->host, ARENA_HOST, clen, &hoff))) return fail_device(e, d, c->stream, rc);
      void *ev = get_event(e, d);
      if (!ev) return fail_device(e, d, c->stream, -1);
      if ((rc = ops->copy_async(d->pinned + hoff, (const char *)c->src + pos, clen, PW_DIR_D2H,
                                c->stream)) ||
          (rc = ops->event_record(ev, c->stream))) {
        put_event(d, ev);
        return fail_device(e, d, c->stream, rc);
      }
      int i = (head + nfly) % D2H_DEPTH;
      fly[i].hoff = hoff, fly[i].pos = pos, fly[i].len = clen, fly[i].ev = ev;
      nfly++;
      pos += clen;
    }
    int i = head;
    if ((rc = ops->event_sync(fly[i].ev))) {
      /* the chunks still in flight were never committed: give their events back */
      for (int k = 0; k < nfly; k++) put_event(d, fly[(head + k) % D2H_DEPTH].ev);
      return fail_device(e, d, c->stream, rc);
    }
    timed_memcpy(e, (char *)c->dst + fly[i].pos, d->pinned + fly[i].hoff, fly[i].len);
    commit(&d->host, fly[i].hoff, fly[i].len, fly[i].ev);
    head = (head + 1) % D2H_DEPTH;
    nfly--;
  }
  return PW_PATH_D2H;
}

int pw_describe(const pw_ops *ops, pw_copy *c) {
  int rc = 0;
  c->src_kind = c->dst_kind = PW_MEM_UNKNOWN;
  c->src_dev = c->dst_dev = -1;
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
  return rc;
}

/* Checks that need no CUDA call. */
static int cheap_reason(const pw_engine *e, const pw_copy *c) {
  if (e->cfg.mode != PW_MODE_STAGE) return PW_FB_MODE;
  if (atomic_load(&e->forked)) return PW_FB_FORKED;
  if (c->dir == PW_DIR_H2D) {
    if (c->src_kind != PW_MEM_PAGEABLE) return PW_FB_SRC_NOT_PAGEABLE;
    if (c->dst_kind != PW_MEM_DEVICE) return PW_FB_NOT_DEVICE;
  } else if (c->dir == PW_DIR_D2H && e->cfg.d2h) {
    if (c->dst_kind != PW_MEM_PAGEABLE) return PW_FB_DST_NOT_PAGEABLE;
    if (c->src_kind != PW_MEM_DEVICE) return PW_FB_NOT_DEVICE;
  } else {
    return PW_FB_DIRECTION;
  }
  if (c->n < e->cfg.min_bytes || c->n == 0) return PW_FB_TOO_SMALL;
  if (e->cfg.max_bytes && c->n > e->cfg.max_bytes) return PW_FB_TOO_LARGE;
  return -1;
}

static int checked_reason(pw_engine *e, const pw_copy *c, int device) {
  const pw_ops *ops = e->ops;
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
  /* The device range must end inside device memory of the same device: otherwise the real call
   * reports the error, before anything was written. */
  const char *dptr = c->dir == PW_DIR_H2D ? (const char *)c->dst : (const char *)c->src;
  if (ops->pointer_info(dptr + c->n - 1, &kind, &kdev)) {
    ops->clear_error();
    return PW_FB_QUERY_FAILED;
  }
  if (kind != PW_MEM_DEVICE || kdev != device) return PW_FB_NOT_DEVICE;
  return -1;
}

int pw_engine_copy(pw_engine *e, const pw_copy *c) {
  uint64_t t0 = pw_now_ns();
  int r = cheap_reason(e, c);
  int device = c->dir == PW_DIR_H2D ? c->dst_dev : c->src_dev;
  if (r < 0) r = checked_reason(e, c, device);
  dev_state *d = NULL;
  if (r < 0 && !(d = get_dev(e, device))) r = PW_FB_NO_STATE;
  if (r >= 0) {
    pw_add(&pw_st.fallbacks[r], 1);
    pw_add(&pw_st.fallback_bytes[r], c->n);
    return -1 - r;
  }
  const pw_ops *ops = e->ops;
  if (c->sync_api && e->cfg.strict && c->dir == PW_DIR_H2D) {
    int rc = ops->stream_sync(c->stream);
    if (rc) {
      ops->clear_error();
      pw_add(&pw_st.fallbacks[PW_FB_QUERY_FAILED], 1);
      return -1 - PW_FB_QUERY_FAILED;
    }
  }
  int mode = ops->relax_capture(0, 0);
  uint64_t tl = pw_now_ns();
  pthread_mutex_lock(&d->lock);
  pw_add(&pw_st.wait_lock_ns, pw_now_ns() - tl);
  int path;
  if (d->status != DEV_READY) path = -1 - PW_FB_NO_STATE;
  else if (c->dir == PW_DIR_D2H) path = stage_d2h(e, d, c);
  else if (d->ring) path = stage_h2d_ring(e, d, c);
  else path = stage_h2d_pinned(e, d, c);
  pthread_mutex_unlock(&d->lock);
  ops->relax_capture(1, mode);
  if (path >= 0) {
    pw_add(&pw_st.staged[path].calls, 1);
    pw_add(&pw_st.staged[path].bytes, c->n);
    pw_add(&pw_st.staged[path].ns, pw_now_ns() - t0);
  } else {
    pw_add(&pw_st.fallbacks[-1 - path], 1);
    pw_add(&pw_st.fallback_bytes[-1 - path], c->n);
  }
  return path;
}

void pw_engine_after_fork_child(pw_engine *e) {
  if (!e) return;
  atomic_store(&e->forked, 1);
  pthread_mutex_init(&e->init_lock, NULL);
}

void pw_engine_destroy(pw_engine *e) {
  if (!e) return;
  for (int i = 0; i < MAX_DEVICES; i++) {
    dev_state *d = atomic_load(&e->dev[i]);
    if (!d) continue;
    if (d->side) e->ops->stream_sync(d->side);
    for (int k = 0; k < d->nall; k++) e->ops->event_sync(d->all_ev[k]);
    if (d->ring) e->ops->device_free(d->ring);
    if (d->pinned) e->ops->host_free(d->pinned);
    free(d->free_ev);
    free(d->all_ev);
    pthread_mutex_destroy(&d->lock);
    free(d);
  }
  free(e);
}
