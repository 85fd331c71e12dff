/* sim.c — the simulated CUDA backend; see sim.h. */
#define _GNU_SOURCE
#include "sim.h"

#include "numa.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_COPY, OP_RECORD, OP_WAIT, OP_CALLBACK, OP_FREE, OP_WAIT_VALUE };

/* One cudaEventRecord: a wait captures the record current at its call, as CUDA does, so a later
 * re-record of the event (on another stream, possibly running first) cannot release it. */
typedef struct token {
  int done;
} token;

typedef struct sim_event {
  token *latest; /* NULL: never recorded (complete) */
  int device;    /* made on this device, in its context's life `life` (sim_device_reset) */
  unsigned life;
} sim_event;

typedef struct op {
  int type;
  void *dst;
  const void *src;
  size_t n;
  token *tok;
  const uint32_t *flag; /* OP_WAIT_VALUE: runs once *flag >= value, compared cyclically as CUDA's
                         * GEQ does: (int32_t)(*flag - value) >= 0 (a host store releases it) */
  uint32_t value;
  void (*fn)(void *);
  void *arg;
  struct op *next;
} op;

typedef struct sim_stream {
  int device, capturing, busy; /* busy: a callback of this stream runs outside the lock */
  op *head, *tail;
  long queued;
} sim_stream;

typedef struct region {
  char *p;
  size_t n;
  int kind, device;
  int foreign; /* registered host memory: not the simulation's to free */
} region;

#define MAX_STREAMS 256
#define MAX_REGIONS 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned rng;
static sim_stream *streams[MAX_STREAMS];
static int nstreams;
static sim_stream builtin[8][2]; /* per device: legacy, per-thread */
static region regions[MAX_REGIONS];
static int nregions, ndev;
static int fail_host, fail_dev;
static atomic_int host_alloc_delay_ms;
static long fail_copy_in = -1;
static __thread int cur_dev;
/* The thread's current context: 0 the primary one of cur_dev, else one of the thread's own (a test
 * names it); push_context stacks the ones it replaced. */
static __thread int cur_ctx, npushed, pushed_dev[8], pushed_ctx[8];
static __thread int pending_error; /* the thread's unread error (sim_set_pending_error) */
long sim_deadlocks, sim_pageable_dma, sim_bad_handles;
atomic_int sim_host_waiters;
static int no_wait_value;
/* Each device's context life: sim_device_reset starts a new one (never reset: an event of an
 * earlier test's life stays stale). */
static unsigned lives[8];

static unsigned rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}

void sim_reset(unsigned seed, int ndevices) {
  /* the simulated devices' bus ids may name real ones: the host's own NUMA topology stays out of
   * the simulation (tests/test_numa.c points this at its fake tree after the reset) */
  pw_numa_root = "/nonexistent-pinwheel-sim";
  pthread_mutex_lock(&mu);
  rng = seed * 2654435761u + 1;
  for (int i = 0; i < nstreams; i++)
    free(streams[i]);
  nstreams = 0;
  memset(builtin, 0, sizeof builtin);
  for (int d = 0; d < 8; d++)
    builtin[d][0].device = builtin[d][1].device = d;
  for (int i = 0; i < nregions; i++)
    if (!regions[i].foreign &&
        (!i ||
         regions[i].p != regions[i - 1].p + regions[i - 1].n)) /* a pair's second: not a block */
      free(regions[i].p);
  nregions = 0;
  ndev = ndevices;
  fail_host = fail_dev = 0;
  atomic_store(&host_alloc_delay_ms, 0);
  fail_copy_in = -1;
  no_wait_value = 0;
  sim_deadlocks = sim_pageable_dma = sim_bad_handles = 0;
  pthread_mutex_unlock(&mu);
  cur_dev = cur_ctx = npushed = pending_error = 0;
}

static sim_stream *resolve(void *h) {
  if (h == NULL || h == (void *)1) return &builtin[cur_dev][0];
  if (h == (void *)2) return &builtin[cur_dev][1];
  for (int i = 0; i < nstreams; i++)
    if (streams[i] == h) return h;
  sim_bad_handles++;
  return NULL;
}

static const region *find(const void *p) {
  for (int i = 0; i < nregions; i++)
    if ((const char *)p >= regions[i].p && (const char *)p < regions[i].p + regions[i].n)
      return &regions[i];
  return NULL;
}

static void *add_region(size_t n, int kind, int device) {
  char *p = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (p && nregions < MAX_REGIONS) regions[nregions++] = (region){p, n, kind, device, 0};
  return p;
}

static void push(sim_stream *s, op *o) {
  o->next = NULL;
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  s->queued++;
}

static int runnable(sim_stream *s) {
  op *o = s->head;
  if (!o || s->busy) return 0;
  if (o->type == OP_WAIT_VALUE) /* cyclic, as cuStreamWaitValue32's GEQ: tickets wrap at 2^32 */
    return (int32_t)(atomic_load_explicit((_Atomic uint32_t *)o->flag, memory_order_acquire) -
                     o->value) >= 0;
  return o->type != OP_WAIT || o->tok->done;
}

static void exec_head(sim_stream *s) {
  op *o = s->head;
  s->head = o->next;
  if (!s->head) s->tail = NULL;
  s->queued--;
  switch (o->type) {
  case OP_COPY:
    memmove(o->dst, o->src, o->n);
    break;
  case OP_RECORD:
    o->tok->done = 1;
    break;
  case OP_CALLBACK:
    s->busy = 1; /* the stream's next op must wait for the callback, as in CUDA */
    pthread_mutex_unlock(&mu);
    o->fn(o->arg);
    pthread_mutex_lock(&mu);
    s->busy = 0;
    break;
  case OP_FREE:
    free((void *)o->src);
    break;
  }
  free(o);
}

static sim_stream *all_streams(int i) {
  if (i < nstreams) return streams[i];
  i -= nstreams;
  return &builtin[i / 2][i % 2];
}

/* One step: the head of a random runnable stream.  Returns 0 when nothing can run. */
static int step(void) {
  int total = nstreams + 2 * ndev, cand[MAX_STREAMS + 16], nc = 0;
  for (int i = 0; i < total; i++)
    if (runnable(all_streams(i))) cand[nc++] = i;
  if (!nc) return 0;
  exec_head(all_streams(cand[rnd() % (unsigned)nc]));
  return 1;
}

static int lazy; /* queued work runs only when the host waits for it (under mu) */
void sim_set_lazy(int on) {
  pthread_mutex_lock(&mu);
  lazy = on;
  pthread_mutex_unlock(&mu);
}

static void some_steps(void) {
  int k = lazy ? 0 : (int)(rnd() % 4);
  while (k-- > 0 && step()) {
  }
}

void sim_drain(void) {
  pthread_mutex_lock(&mu);
  while (step()) {
  }
  pthread_mutex_unlock(&mu);
}

/* 1 when another thread can still move a stream on: it runs a callback, or a stream waits for a
 * host value that a host thread may store. */
static int host_can_move(void) {
  for (int i = 0; i < nstreams + 2 * ndev; i++) {
    sim_stream *s = all_streams(i);
    if (s->busy || (s->head && s->head->type == OP_WAIT_VALUE)) return 1;
  }
  return 0;
}

#define HOST_WAIT_LIMIT_NS 5000000000ull /* then the wait counts as a deadlock */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int run_until(int (*done)(void *), void *arg) {
  uint64_t t0 = 0;
  while (!done(arg))
    if (!step()) {
      if (!t0) t0 = now_ns();
      if (host_can_move() && now_ns() - t0 < HOST_WAIT_LIMIT_NS) {
        atomic_fetch_add(&sim_host_waiters, 1);
        pthread_mutex_unlock(&mu);
        sched_yield();
        pthread_mutex_lock(&mu);
        atomic_fetch_sub(&sim_host_waiters, 1);
        continue;
      }
      sim_deadlocks++;
      return 999;
    }
  return 0;
}

static int ev_done(void *e) {
  token *t = ((sim_event *)e)->latest;
  return !t || t->done;
}
static int st_empty(void *s) {
  return ((sim_stream *)s)->head == NULL && !((sim_stream *)s)->busy;
}

/* ---- pw_ops ---- */

static int op_pointer_info(const void *p, int *kind, int *device) {
  pthread_mutex_lock(&mu);
  const region *r = find(p);
  *kind = r ? r->kind : PW_MEM_PAGEABLE;
  *device = r ? r->device : -2;
  pthread_mutex_unlock(&mu);
  return 0;
}
static int op_stream_capturing(void *h, int *cap) {
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  *cap = s ? s->capturing : 0;
  pthread_mutex_unlock(&mu);
  return s ? 0 : 400;
}
static int op_stream_device(void *h, int *dev) {
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  *dev = s ? (s->device < 0 ? cur_dev : s->device) : -1;
  pthread_mutex_unlock(&mu);
  return s ? 0 : 400;
}
static int op_get_device(int *d) {
  return *d = cur_dev, 0;
}
static int op_host_alloc(void **p, size_t n) {
  int ms = atomic_load(&host_alloc_delay_ms);
  if (ms) nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
  pthread_mutex_lock(&mu);
  *p = fail_host ? NULL : add_region(n, PW_MEM_PINNED, -1);
  pthread_mutex_unlock(&mu);
  return *p ? 0 : 2;
}
static int op_device_alloc(void **p, size_t n) {
  pthread_mutex_lock(&mu);
  *p = fail_dev ? NULL : add_region(n, PW_MEM_DEVICE, cur_dev);
  pthread_mutex_unlock(&mu);
  return *p ? 0 : 2;
}
static int op_host_register(void *p, size_t n) {
  pthread_mutex_lock(&mu);
  int ok = !fail_host && nregions < MAX_REGIONS;
  if (ok) regions[nregions++] = (region){p, n, PW_MEM_PINNED, -1, 1};
  pthread_mutex_unlock(&mu);
  return ok ? 0 : 2;
}
static int op_host_unregister(void *p) {
  pthread_mutex_lock(&mu);
  int found = 0;
  for (int i = 0; i < nregions && !found; i++)
    if (regions[i].p == p && regions[i].foreign) { /* the order of the others is kept */
      memmove(&regions[i], &regions[i + 1], (size_t)(nregions - i - 1) * sizeof *regions);
      nregions--;
      found = 1;
    }
  pthread_mutex_unlock(&mu);
  return found ? 0 : 712;
}
static int op_host_device_pointer(void *p, void **dptr) {
  *dptr = p; /* unified addressing, host pointers usable by the device */
  return 0;
}
static int op_device_sync(void) {
  sim_drain();
  return 0;
}
static void op_host_free(void *p) {
  (void)p; /* freed at sim_reset */
}
static void op_device_free(void *p) {
  (void)p; /* freed at sim_reset */
}
static int op_stream_create(void **h) {
  *h = sim_stream_new(cur_dev);
  return 0;
}
static int op_event_create(void **e) {
  sim_event *x = calloc(1, sizeof *x);
  pthread_mutex_lock(&mu);
  x->device = cur_dev;
  x->life = lives[cur_dev];
  pthread_mutex_unlock(&mu);
  *e = x;
  return 0;
}
/* An event of a context that a reset destroyed since (under mu): counted, and the call fails with
 * cudaErrorContextIsDestroyed (real CUDA may crash instead). */
static int stale(void *e) {
  sim_event *x = e;
  if (x->life == lives[x->device]) return 0;
  sim_bad_handles++;
  return 709;
}
void sim_device_reset(int device) {
  pthread_mutex_lock(&mu);
  lives[device]++;
  pthread_mutex_unlock(&mu);
}
static int op_event_record(void *e, void *h) {
  pthread_mutex_lock(&mu);
  int bad = stale(e);
  sim_stream *s = bad ? NULL : resolve(h);
  if (s) {
    op *o = calloc(1, sizeof *o);
    o->type = OP_RECORD;
    o->tok = calloc(1, sizeof(token));
    ((sim_event *)e)->latest = o->tok;
    push(s, o);
    some_steps();
  }
  pthread_mutex_unlock(&mu);
  return bad ? bad : s ? 0 : 400;
}
static int op_event_query(void *e) {
  pthread_mutex_lock(&mu);
  int r = stale(e);
  if (!r) {
    some_steps();
    r = ev_done(e) ? 0 : 1;
  }
  pthread_mutex_unlock(&mu);
  return r;
}
static int op_event_sync(void *e) {
  pthread_mutex_lock(&mu);
  int r = stale(e);
  if (!r) r = run_until(ev_done, e);
  pthread_mutex_unlock(&mu);
  return r;
}
static int op_stream_wait_event(void *h, void *e) {
  pthread_mutex_lock(&mu);
  int bad = stale(e);
  sim_stream *s = bad ? NULL : resolve(h);
  if (s && ((sim_event *)e)->latest) {
    op *o = calloc(1, sizeof *o);
    o->type = OP_WAIT;
    o->tok = ((sim_event *)e)->latest; /* the record current at the call, as in CUDA */
    push(s, o);
  }
  pthread_mutex_unlock(&mu);
  return bad ? bad : s ? 0 : 400;
}
static int op_copy_async(void *dst, const void *src, size_t n, int dir, void *h) {
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  int rc = s ? 0 : 400;
  if (s && fail_copy_in >= 0 && fail_copy_in-- == 0) rc = 700;
  if (!rc) {
    const region *a = find(dst), *b = find(src);
    /* the engine must only DMA between pinned and device memory: a pageable side would make
     * the copy synchronous (and slow) in real CUDA */
    if (!a || !b || a->kind == PW_MEM_PAGEABLE || b->kind == PW_MEM_PAGEABLE) sim_pageable_dma++;
    op *o = calloc(1, sizeof *o);
    o->type = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->n = n;
    push(s, o);
    some_steps();
  }
  pthread_mutex_unlock(&mu);
  return rc;
}
static int op_stream_sync(void *h) {
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  int r = s ? run_until(st_empty, s) : 400;
  pthread_mutex_unlock(&mu);
  return r;
}
/* A wait for a host value, queued on stream h. */
static int op_wait_host_value(void *h, const uint32_t *flag, uint32_t value) {
  if (no_wait_value) return 801; /* cudaErrorNotSupported */
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  if (s) {
    op *o = calloc(1, sizeof *o);
    o->type = OP_WAIT_VALUE;
    o->flag = flag;
    o->value = value;
    push(s, o);
    some_steps();
  }
  pthread_mutex_unlock(&mu);
  return s ? 0 : 400;
}
/* Device d's PCI bus id: 0000:3B:0d.0 (a test's fake sysfs tree gives it a NUMA node). */
static int op_pci_bus_id(int device, char *buf, int len) {
  snprintf(buf, (size_t)len, "0000:3B:%02X.0", device & 0x1f);
  return 0;
}
static int op_alloc_range(const void *p, void **base, size_t *size) {
  pthread_mutex_lock(&mu);
  const region *r = find(p);
  if (r) {
    *base = r->p;
    *size = r->n;
  }
  pthread_mutex_unlock(&mu);
  return r ? 0 : 1; /* cudaErrorInvalidValue */
}
static void op_clear_error(void) {
  pending_error = 0;
}
static int op_error_pending(void) {
  return pending_error != 0;
}
static int op_relax_capture(int restore, int mode) {
  return 0;
}

/* The thread's current device, its primary context current (the upload thread's, fill/fa.c). */
static int op_set_device(int device) {
  cur_dev = device;
  cur_ctx = 0;
  return 0;
}
/* The stream's device's primary context above the thread's own; pop puts that one back. */
static int op_push_context(void *h) {
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  int dev = s ? (s->device < 0 ? cur_dev : s->device) : -1;
  pthread_mutex_unlock(&mu);
  if (!s || npushed == 8) return 400;
  pushed_dev[npushed] = cur_dev, pushed_ctx[npushed++] = cur_ctx;
  cur_dev = dev;
  cur_ctx = 0;
  return 0;
}
static void op_pop_context(void) {
  if (npushed > 0) cur_dev = pushed_dev[--npushed], cur_ctx = pushed_ctx[npushed];
}
/* The engine's state of a device is usable while the thread's current context is the device's
 * primary one (the simulation's only context, unless a test names another: sim_set_context). */
static int op_context_ok(void *h, int device) {
  return cur_ctx == 0;
}

/* The table, one entry per member of pw_ops.def (PW_OPS_ENTRY, engine.h). */
#define PW_OP(ret, name, params) .name = PW_OPS_ENTRY(op_##name, ret, params),
const pw_ops sim_ops = {
#include "pw_ops.def"
};

/* ---- test-side helpers ---- */

void *sim_device_alloc(int device, size_t n) {
  pthread_mutex_lock(&mu);
  void *p = add_region(n, PW_MEM_DEVICE, device);
  pthread_mutex_unlock(&mu);
  return p;
}

void *sim_device_alloc_pair(int device, size_t n, void **second) {
  pthread_mutex_lock(&mu);
  char *p = add_region(2 * n, PW_MEM_DEVICE, device);
  if (p) { /* one block, two allocations: the first ends where the second begins */
    regions[nregions - 1].n = n;
    if (nregions < MAX_REGIONS) regions[nregions++] = (region){p + n, n, PW_MEM_DEVICE, device, 0};
    *second = p + n;
  }
  pthread_mutex_unlock(&mu);
  return p;
}

void *sim_stream_new(int device) {
  sim_stream *s = calloc(1, sizeof *s);
  s->device = device;
  pthread_mutex_lock(&mu);
  streams[nstreams++] = s;
  pthread_mutex_unlock(&mu);
  return s;
}

void sim_set_device(int device) {
  cur_dev = device;
  cur_ctx = 0;
}
void sim_set_context(int ctx) {
  cur_ctx = ctx;
}
int sim_context(void) {
  return cur_ctx;
}
int sim_get_device(void) {
  return cur_dev;
}
void sim_set_pending_error(int err) {
  pending_error = err;
}
int sim_pending_error(void) {
  return pending_error;
}

void sim_enqueue_callback(void *h, void (*fn)(void *), void *arg) {
  pthread_mutex_lock(&mu);
  op *o = calloc(1, sizeof *o);
  o->type = OP_CALLBACK;
  o->fn = fn;
  o->arg = arg;
  push(resolve(h), o);
  some_steps();
  pthread_mutex_unlock(&mu);
}

void sim_real_copy(void *dst, const void *src, size_t n, void *h) {
  void *tmp = malloc(n);
  memcpy(tmp, src, n);
  pthread_mutex_lock(&mu);
  sim_stream *s = resolve(h);
  op *o = calloc(1, sizeof *o);
  o->type = OP_COPY;
  o->dst = dst;
  o->src = tmp;
  o->n = n;
  push(s, o);
  op *f = calloc(1, sizeof *f);
  f->type = OP_FREE;
  f->src = tmp;
  push(s, f);
  pthread_mutex_unlock(&mu);
}

int sim_stream_sync(void *h) {
  return op_stream_sync(h);
}

void sim_set_capturing(void *h, int on) {
  pthread_mutex_lock(&mu);
  resolve(h)->capturing = on;
  pthread_mutex_unlock(&mu);
}
void sim_set_host_alloc_delay_ms(int ms) {
  atomic_store(&host_alloc_delay_ms, ms);
}
void sim_fail_host_alloc(int on) {
  fail_host = on;
}
void sim_fail_device_alloc(int on) {
  fail_dev = on;
}
void sim_fail_copy_after(long n) {
  pthread_mutex_lock(&mu);
  fail_copy_in = n;
  pthread_mutex_unlock(&mu);
}
void sim_no_wait_value(int on) {
  no_wait_value = on;
}
