/* test_elide.c — sync elision (shim/engine/elide.c) against the simulated CUDA backend.
 *
 * A staged copy is made on stream s with the engine, then s's sync is elided: it returns with the
 * copy (and everything before it) still queued.  Each observer the elision must fence is then
 * tried, and every byte it sees compared: another stream's work, the legacy default stream, a
 * second thread's default stream, host memory written by the stream's work, event and stream
 * queries, an IPC export, the bound on run-ahead.  Streams run in a random valid order (many
 * seeds), or lazily (work runs only when the host waits), so an early return shows as wrong bytes.
 * Each fence is also left out on purpose (pw_elide_test_drop) to prove the same check catches it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "elide.h"
#include "pw.h"
#include "sim/sim.h"

static atomic_long mismatches;

typedef struct check {
  const unsigned char *where;
  unsigned char *expect;
  size_t n;
} check;

static void check_cb(void *arg) {
  check *c = arg;
  if (memcmp(c->where, c->expect, c->n)) atomic_fetch_add(&mismatches, 1);
  free(c->expect);
  free(c);
}

/* A "kernel" on stream t that reads where[0, n) and compares it with expect. */
static void read_on(void *t, const void *where, const void *expect, size_t n) {
  check *c = malloc(sizeof *c);
  c->where = where;
  c->expect = malloc(n);
  memcpy(c->expect, expect, n);
  c->n = n;
  sim_enqueue_callback(t, check_cb, c);
}

static unsigned xs(unsigned *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* Device memory of the simulation, cleared: a block the allocator hands out again may still hold
 * an earlier run's bytes, the very bytes a copy of the same seed writes (seen under
 * ThreadSanitizer, whose allocator reuses at once), and a check of dst would pass early. */
static char *device_buf(size_t n) {
  char *p = sim_device_alloc(0, n);
  memset(p, 0, n);
  return p;
}

static pw_engine *engine(void) {
  pw_engine_config c = {.mode = PW_MODE_STAGE,
                        .min_bytes = 1,
                        .host_pool = 64 << 10,
                        .device_ring = 256 << 10,
                        .chunk = 8 << 10,
                        .threads = 1};
  return pw_engine_create(&sim_ops, &c);
}

/* One staged copy of n fresh random bytes into dst on stream s; *expect gets them (the caller
 * frees it).  The source is overwritten and freed at once, as the program may. */
static void staged_copy(pw_engine *e, void *dst, size_t n, void *s, unsigned *seed,
                        unsigned char **expect) {
  unsigned char *src = malloc(n);
  for (size_t k = 0; k < n; k++)
    src[k] = (unsigned char)xs(seed);
  *expect = malloc(n);
  memcpy(*expect, src, n);
  pw_transfer c = {.dst = dst, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
  assert_int_equal(pw_describe(&sim_ops, &c), 0);
  assert_true(pw_engine_copy(e, &c) >= 0);
  memset(src, 0xEE, n);
  free(src);
}

/* One staged copy of 4 KiB into a new destination on stream s (its bytes not looked at). */
static void one_copy(pw_engine *e, void *s, unsigned *seed) {
  unsigned char *expect;
  staged_copy(e, device_buf(4096), 4096, s, seed, &expect);
  free(expect);
}

static void setup_run(unsigned seed, int lazy) {
  sim_reset(seed, 2);
  sim_set_device(0);
  sim_set_lazy(lazy);
  pw_elide_test_reset();
  pw_stats_reset();
  atomic_store(&mismatches, 0);
}

static void end_run(pw_engine *e) {
  sim_drain();
  pw_engine_destroy(e);
  sim_set_lazy(0);
  assert_int_equal(sim_deadlocks, 0);
  assert_int_equal(sim_bad_handles, 0);
}

/* ---- 1. other streams ---- */

enum { OTHER_STREAM, LEGACY, PER_THREAD_OTHER, SAME_STREAM };

typedef struct reader {
  void *t;
  const void *where;
  const unsigned char *expect;
  size_t n;
} reader;

static void *read_from_thread(void *p) {
  reader *r = p;
  sim_set_device(0);
  pw_elide_fence(&sim_ops, r->t);
  read_on(r->t, r->where, r->expect, r->n);
  sim_stream_sync(r->t);
  return NULL;
}

/* s: the stream of the copy and the elided sync; the reader reads dst on `who`. */
static long run_other(unsigned seed, int who, int rounds, int lazy) {
  setup_run(seed, lazy);
  pw_engine *e = engine();
  void *s = who == PER_THREAD_OTHER ? (void *)2 : sim_stream_new(0);
  void *t = who == OTHER_STREAM ? sim_stream_new(0) : who == LEGACY ? (void *)1 : (void *)2;
  if (who == SAME_STREAM) t = s;
  size_t n = 96 << 10;
  for (int i = 0; i < rounds; i++) {
    /* a new destination each round: the reader of the last one has not run yet (lazily) */
    char *dst = device_buf(n);
    unsigned char *expect;
    staged_copy(e, dst, n, s, &seed, &expect);
    assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
    reader r = {t, dst, expect, n};
    if (who == PER_THREAD_OTHER) { /* the per-thread stream of another thread: another stream */
      pthread_t th;
      pthread_create(&th, NULL, read_from_thread, &r);
      pthread_join(th, NULL);
    } else {
      pw_elide_fence(&sim_ops, t);
      read_on(t, dst, expect, n);
    }
    free(expect);
  }
  end_run(e);
  return atomic_load(&mismatches);
}

static void test_other_stream_sees_the_copy(void **state) {
  for (unsigned seed = 1; seed <= 60; seed++) {
    long bad = run_other(seed, OTHER_STREAM, 4, seed % 4 == 0);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
  }
  assert_true(pw_get(&pw_st.sync_elided) > 0);
}

static void test_legacy_stream_sees_the_copy(void **state) {
  for (unsigned seed = 1; seed <= 60; seed++) {
    long bad = run_other(seed, LEGACY, 4, seed % 4 == 0);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
  }
}

static void test_other_threads_default_stream_sees_the_copy(void **state) {
  for (unsigned seed = 1; seed <= 40; seed++) {
    long bad = run_other(seed, PER_THREAD_OTHER, 3, 1);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    /* the simulator has one per-thread stream per device, so only the fence count tells: each
     * round's reader, on its own thread, waited for the elided sync */
    assert_int_equal(pw_get(&pw_st.sync_fences), 3);
  }
}

/* Work on the stream itself needs no fence: stream order; and none is enqueued. */
static void test_same_stream_needs_no_fence(void **state) {
  for (unsigned seed = 1; seed <= 30; seed++) {
    long bad = run_other(seed, SAME_STREAM, 4, seed % 2);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(pw_get(&pw_st.sync_fences), 0);
  }
}

static void test_dropped_fence_is_caught(void **state) {
  long total = 0;
  pw_elide_test_drop = 1;
  for (unsigned seed = 1; seed <= 40; seed++)
    total += run_other(seed, OTHER_STREAM, 4, 0) + run_other(seed, LEGACY, 2, seed % 2);
  pw_elide_test_drop = 0;
  if (total == 0) fail_msg("a missing fence went unnoticed");
}

/* A stream fenced once for an elided sync is not fenced again; a new elided sync fences again. */
static void test_fence_once_per_elision(void **state) {
  setup_run(5, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *t = sim_stream_new(0);
  char *dst = device_buf(4096);
  unsigned seed = 5;
  unsigned char *expect;
  staged_copy(e, dst, 4096, s, &seed, &expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  for (int i = 0; i < 5; i++)
    pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 1);
  free(expect);
  staged_copy(e, dst, 4096, s, &seed, &expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 2);
  read_on(t, dst, expect, 4096);
  free(expect);
  sim_stream_sync(t);
  assert_int_equal(atomic_load(&mismatches), 0);
  /* once everything ran, the next stream to ask finds it done (t, fenced for it, need not ask):
   * nothing is in flight and fences cost nothing */
  sim_drain();
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 2);
  pw_elide_fence(&sim_ops, sim_stream_new(0));
  assert_int_equal(atomic_load(&pw_elide_live), 0);
  assert_int_equal(pw_get(&pw_st.sync_fences), 2);
  end_run(e);
}

/* ---- 2. host-visible writes ---- */

static void host_store(void *p) {
  *(volatile int *)p = 42;
}

enum { HOST_FUNC_ON_S, WAIT_ON_HOST_WRITER, UNKNOWN_EVENT, FRONT_SAYS_MAPPED, EVENT_REUSED };

/* Returns 1 when the host saw what the stream's work wrote once the sync returned. */
static int run_host_write(unsigned seed, int how) {
  setup_run(seed, 1); /* lazy: nothing runs before the host waits */
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *u = sim_stream_new(0);
  char *dst = device_buf(8192);
  static int value;
  value = 0;
  void *ev = NULL;
  int why = -1;
  switch (how) {
  case HOST_FUNC_ON_S:
    sim_enqueue_callback(s, host_store, &value);
    pw_elide_host_write(&sim_ops, s);
    break;
  case WAIT_ON_HOST_WRITER:
  case UNKNOWN_EVENT:
    sim_enqueue_callback(u, host_store, &value);
    pw_elide_host_write(&sim_ops, u);
    sim_ops.event_create(&ev);
    sim_ops.event_record(ev, u);
    if (how == WAIT_ON_HOST_WRITER) pw_elide_recorded(&sim_ops, ev, u);
    sim_ops.stream_wait_event(s, ev);
    pw_elide_waits(&sim_ops, s, ev);
    break;
  case FRONT_SAYS_MAPPED:
    sim_enqueue_callback(s, host_store, &value); /* a kernel writing mapped memory */
    why = PW_KEEP_MAPPED;
    break;
  case EVENT_REUSED:
    /* an event recorded after nothing that writes host memory, then destroyed ... */
    sim_ops.event_create(&ev);
    sim_ops.event_record(ev, u);
    pw_elide_recorded(&sim_ops, ev, u);
    pw_elide_forget_event(ev);
    /* ... and its handle a new event's, recorded where pinwheel does not look (an IPC event of
     * another process, a graph's record node) after a host write: unknown, so s may follow it */
    sim_enqueue_callback(u, host_store, &value);
    pw_elide_host_write(&sim_ops, u);
    sim_ops.event_record(ev, u);
    sim_ops.stream_wait_event(s, ev);
    pw_elide_waits(&sim_ops, s, ev);
    break;
  }
  unsigned char *expect;
  staged_copy(e, dst, 8192, s, &seed, &expect);
  free(expect);
  if (!pw_elide_sync(&sim_ops, s, 0, why)) { /* kept: the front end makes the real sync */
    uint64_t before = pw_elide_now();
    sim_stream_sync(s);
    pw_elide_synced(&sim_ops, s, before);
  }
  int seen = value == 42;
  end_run(e);
  return seen;
}

static void test_host_writes_keep_the_sync(void **state) {
  for (int how = HOST_FUNC_ON_S; how <= EVENT_REUSED; how++)
    for (unsigned seed = 1; seed <= 5; seed++)
      if (!run_host_write(seed, how))
        fail_msg("case %d seed %u: the host read too early", how, seed);
  assert_int_equal(pw_get(&pw_st.sync_elided), 0);
}

static void test_host_write_counted_by_reason(void **state) {
  run_host_write(1, HOST_FUNC_ON_S);
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_HOST_WRITE]), 1);
  run_host_write(1, FRONT_SAYS_MAPPED);
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_MAPPED]), 1);
}

/* After the real sync the stream is clean again: its next sync is elided. */
static void test_real_sync_cleans_the_stream(void **state) {
  setup_run(3, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  char *dst = device_buf(4096);
  unsigned seed = 3;
  static int value;
  sim_enqueue_callback(s, host_store, &value);
  pw_elide_host_write(&sim_ops, s);
  unsigned char *expect;
  staged_copy(e, dst, 4096, s, &seed, &expect);
  free(expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 0);
  uint64_t before = pw_elide_now();
  sim_stream_sync(s);
  pw_elide_synced(&sim_ops, s, before);
  staged_copy(e, dst, 4096, s, &seed, &expect);
  free(expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  end_run(e);
}

static void test_dropped_host_write_rule_is_caught(void **state) {
  int missed = 0;
  pw_elide_test_drop = 2;
  for (int how = HOST_FUNC_ON_S; how <= EVENT_REUSED; how++)
    missed += !run_host_write(1, how);
  pw_elide_test_drop = 0;
  assert_int_equal(missed, 5);
}

/* A destroyed event is forgotten: a new event that gets its handle does not inherit "follows no
 * host write" (it once did, and the stream waiting for it had its sync elided). */
static void test_destroyed_event_forgotten(void **state) {
  for (unsigned seed = 1; seed <= 3; seed++)
    assert_true(run_host_write(seed, EVENT_REUSED));
  pw_elide_test_drop = 6;
  int seen = run_host_write(1, EVENT_REUSED);
  pw_elide_test_drop = 0;
  assert_false(seen);
}

/* ---- 3. questions about the stream and its events ---- */

enum { EVENT_QUERY, STREAM_QUERY, UNKNOWN_EVENT_QUERY, LATER_EVENT };

/* Returns 1 when the answer is as after a real sync. */
static int run_question(unsigned seed, int how) {
  setup_run(seed, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  char *dst = device_buf(8192);
  void *ev = NULL;
  sim_ops.event_create(&ev);
  sim_ops.event_record(ev, s); /* before the copy: the program expects it done after the sync */
  if (how != UNKNOWN_EVENT_QUERY) pw_elide_recorded(&sim_ops, ev, s);
  unsigned char *expect;
  staged_copy(e, dst, 8192, s, &seed, &expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  int right = 0;
  switch (how) {
  case EVENT_QUERY:
  case UNKNOWN_EVENT_QUERY:
    pw_elide_settle_event(&sim_ops, ev);
    right = sim_ops.event_query(ev) == 0 && !memcmp(dst, expect, 8192);
    break;
  case STREAM_QUERY:
    pw_elide_settle_stream(&sim_ops, s);
    right = !memcmp(dst, expect, 8192); /* everything before the sync has run */
    break;
  case LATER_EVENT: { /* an event recorded after the sync waits for nothing more */
    void *later = NULL;
    sim_ops.event_create(&later);
    sim_ops.event_record(later, s);
    pw_elide_recorded(&sim_ops, later, s);
    pw_elide_settle_event(&sim_ops, later);
    right = pw_get(&pw_st.sync_settled) == 0;
    break;
  }
  }
  free(expect);
  end_run(e);
  return right;
}

static void test_questions_answer_as_after_a_real_sync(void **state) {
  for (int how = EVENT_QUERY; how <= LATER_EVENT; how++)
    for (unsigned seed = 1; seed <= 4; seed++)
      if (!run_question(seed, how)) fail_msg("case %d seed %u: answered early", how, seed);
}

static void test_dropped_settling_is_caught(void **state) {
  int missed = 0;
  pw_elide_test_drop = 3;
  for (int how = EVENT_QUERY; how <= UNKNOWN_EVENT_QUERY; how++)
    missed += !run_question(1, how);
  pw_elide_test_drop = 0;
  assert_int_equal(missed, 3);
}

/* ---- 4. other processes ---- */

static int run_ipc(unsigned seed) {
  setup_run(seed, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  char *dst = device_buf(8192);
  unsigned char *expect;
  staged_copy(e, dst, 8192, s, &seed, &expect);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  pw_elide_stop(&sim_ops); /* an export: another process may look at dst from now on */
  int right = !memcmp(dst, expect, 8192);
  free(expect);
  staged_copy(e, dst, 8192, s, &seed, &expect);
  free(expect);
  right &= pw_elide_sync(&sim_ops, s, 0, -1) == 0;
  end_run(e);
  return right;
}

static void test_ipc_export_stops_eliding(void **state) {
  assert_true(run_ipc(1));
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_IPC]), 1);
  pw_elide_test_drop = 4;
  int caught = !run_ipc(1);
  pw_elide_test_drop = 0;
  assert_true(caught);
}

/* ---- 5. bounded run-ahead ---- */

/* Five elided syncs of one stream: when the fifth returns, the first is done (the host runs at most
 * four syncs ahead), and the fourth need not be. */
static int run_ahead(unsigned seed) {
  setup_run(seed, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  char *dst[5];
  unsigned char *expect[5];
  for (int i = 0; i < 5; i++) {
    dst[i] = device_buf(8192);
    staged_copy(e, dst[i], 8192, s, &seed, &expect[i]);
    assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  }
  int right = !memcmp(dst[0], expect[0], 8192);
  for (int i = 0; i < 5; i++)
    free(expect[i]);
  end_run(e);
  return right;
}

static void test_run_ahead_is_bounded(void **state) {
  assert_true(run_ahead(2));
  pw_elide_test_drop = 5;
  int caught = !run_ahead(2);
  pw_elide_test_drop = 0;
  assert_true(caught);
}

/* Two syncs a step (a batch and its labels, as PyTorch's loops make): the second does not wait
 * for the first, which would drain the queue as a real sync does. */
static void test_second_sync_does_not_wait_for_the_first(void **state) {
  setup_run(4, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  char *x = device_buf(8192), *y = device_buf(8192);
  unsigned seed = 4;
  unsigned char *ex, *ey;
  staged_copy(e, x, 8192, s, &seed, &ex);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  staged_copy(e, y, 8192, s, &seed, &ey);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  assert_true(memcmp(x, ex, 8192) != 0); /* lazy: nothing ran, nothing was waited for */
  free(ex);
  free(ey);
  end_run(e);
}

/* ---- limits ---- */

static void test_full_table_keeps_the_sync(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  char *dst = device_buf(4096);
  unsigned seed = 1;
  int elided = 0;
  for (int i = 0; i < 20; i++) {
    void *s = sim_stream_new(0);
    unsigned char *expect;
    staged_copy(e, dst, 4096, s, &seed, &expect);
    free(expect);
    elided += pw_elide_sync(&sim_ops, s, 0, -1);
  }
  assert_int_equal(elided, 16);
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_FULL]), 4);
  end_run(e);
}

/* A sync of a stream of device 0 after a staged copy, made while the thread is elsewhere: on
 * device 1 (other_context 0) or in a context of its own on device 0 (1).  Kept, for "device"; with
 * the primary-context rule left out (pw_elide_test_drop 8), the other context's is elided. */
static void sync_elsewhere(int other_context) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  if (other_context)
    sim_set_context(1);
  else
    sim_set_device(1);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 0);
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_DEVICE]), 1);
  if (other_context) {
    pw_elide_test_drop = 8; /* the rule left out: the test sees it */
    assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
    pw_elide_test_drop = 0;
  }
  sim_set_device(0); /* the primary context of device 0 again */
  end_run(e);
}

static void test_other_device_current_keeps_the_sync(void **state) {
  sync_elsewhere(0);
}

/* A device sync retires what was elided on its device: no fence follows. */
static void test_device_sync_retires(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *t = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  assert_int_equal(atomic_load(&pw_elide_live), 1);
  uint64_t before = pw_elide_now();
  sim_ops.device_sync();
  pw_elide_synced(&sim_ops, NULL, before);
  assert_int_equal(atomic_load(&pw_elide_live), 0);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 0);
  end_run(e);
}

/* A reset of the device (cudaDeviceReset, cuDevicePrimaryCtxReset; a release that ends its
 * primary context alike) destroys the events and streams made there.  Before it the elided syncs
 * there are waited for (pw_elide_device_wait) and everything of the device forgotten
 * (pw_elide_device_forget): the next elision there records a new event, no fence of another
 * device's stream asks a destroyed one, and a stream made later with an old handle is fenced
 * anew.  Once the event of a retired elision, kept for reuse, was recorded after cudaDeviceReset
 * (a crash inside CUDA); with the slot still live at the reset, a fence would have queried it.
 * The simulation fails a stale event's every use and counts it. */
static void test_device_reset_forgets_its_events(void **state) {
  for (int live = 0; live < 2; live++) {
    setup_run(3, 1);
    pw_engine *e = engine();
    void *s = sim_stream_new(0), *x = sim_stream_new(0), *s1 = sim_stream_new(1);
    unsigned seed = 3;
    size_t n = 96 << 10;
    char *dst = device_buf(n);
    unsigned char *expect;
    staged_copy(e, dst, n, s, &seed, &expect);
    assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
    if (!live) { /* the program's real sync retires it: its event is kept for the next elision */
      uint64_t before = pw_elide_now();
      sim_stream_sync(s);
      pw_elide_synced(&sim_ops, s, before);
    }
    /* a sync elided on device 1 stays in flight across device 0's reset; x (device 0) is fenced
     * for it, and a stream made after the reset with x's handle must be fenced again */
    sim_set_device(1);
    static uint32_t held; /* device 1's stream waits for it: its elided sync stays in flight */
    __atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
    assert_int_equal(sim_ops.wait_host_value(s1, &held, 1), 0);
    char *dst1 = sim_device_alloc(1, 4096);
    unsigned char *expect1;
    staged_copy(e, dst1, 4096, s1, &seed, &expect1);
    free(expect1);
    assert_int_equal(pw_elide_sync(&sim_ops, s1, 1, -1), 1);
    sim_set_device(0);
    pw_elide_fence(&sim_ops, x);
    uint64_t fences = pw_get(&pw_st.sync_fences);
    /* an event is recorded on s (known: it follows no host write), then device 0's legacy stream
     * queues a host write (every stream of the device counts as writing host memory until a real
     * sync) */
    void *ev = NULL;
    sim_ops.event_create(&ev);
    pw_elide_recorded(&sim_ops, ev, s);
    pw_elide_host_write(&sim_ops, (void *)1);
    pw_elide_device_wait(&sim_ops, 0);
    assert_memory_equal(dst, expect, n); /* lazily: only a wait ran it */
    free(expect);
    pw_engine_device_reset(e, 0);
    pw_elide_device_forget(0);
    sim_device_reset(0);
    assert_int_equal(atomic_load(&pw_elide_live), 1); /* device 1's */
    pw_elide_fence(&sim_ops, x);
    assert_int_equal(pw_get(&pw_st.sync_fences), fences + 1);
    __atomic_store_n(&held, 1, __ATOMIC_SEQ_CST);
    void *s2 = sim_stream_new(0), *t = sim_stream_new(0);
    dst = device_buf(n);
    staged_copy(e, dst, n, s2, &seed, &expect);
    /* not kept for a failed record, nor for the legacy stream's host write: the reset ended it */
    assert_int_equal(pw_elide_sync(&sim_ops, s2, 0, -1), 1);
    pw_elide_fence(&sim_ops, t);
    read_on(t, dst, expect, n);
    free(expect);
    /* an event made after the reset may get ev's handle: unknown, so a stream that waits for it
     * may follow host writes and keeps its sync (known, it would pass as following none) */
    void *s3 = sim_stream_new(0);
    one_copy(e, s3, &seed);
    pw_elide_waits(&sim_ops, s3, ev);
    uint64_t kept = pw_get(&pw_st.sync_kept[PW_KEEP_HOST_WRITE]);
    assert_int_equal(pw_elide_sync(&sim_ops, s3, 0, -1), 0);
    assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_HOST_WRITE]), kept + 1);
    assert_int_equal(sim_bad_handles, 0);
    end_run(e);
    assert_int_equal(atomic_load(&mismatches), 0);
  }
}

/* The event of an elision is made in the thread's current context: only the device's primary one,
 * whose end pinwheel hears of, ever holds one (a context of the program's own may be destroyed
 * unseen, and its events with it); in another the sync is real, kept for "device". */
static void test_other_context_keeps_the_sync(void **state) {
  sync_elsewhere(1);
}

/* Work captured into a graph is not fenced (a wait on an event from outside would break the
 * capture): it runs when the graph is launched, and that launch is. */
static void test_capturing_stream_not_fenced(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *t = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  sim_set_capturing(t, 1);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 0);
  sim_set_capturing(t, 0);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 1);
  end_run(e);
}

/* A destroyed stream's handle may come back as a new stream's: as the elided stream, or as one
 * fenced already, it must not spare the new stream its fence. */
static void test_destroyed_stream_forgotten(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *t = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 1);
  pw_elide_forget_stream(t); /* t destroyed, its handle a new stream's: fenced again */
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 2);
  pw_elide_forget_stream(s); /* s destroyed, its handle a new stream's: fenced too */
  pw_elide_fence(&sim_ops, s);
  assert_int_equal(pw_get(&pw_st.sync_fences), 3);
  end_run(e);
}

/* ---- the fence's lock-free path ---- */

/* sim_ops, with the calls the fence makes counted. */
static atomic_long ops_calls;
static int counted_capturing(void *st, int *cap) {
  atomic_fetch_add(&ops_calls, 1);
  return sim_ops.stream_capturing(st, cap);
}
static int counted_query(void *ev) {
  atomic_fetch_add(&ops_calls, 1);
  return sim_ops.event_query(ev);
}
static int counted_relax(int restore, int mode) {
  atomic_fetch_add(&ops_calls, 1);
  return sim_ops.relax_capture(restore, mode);
}
static int counted_pending(void) {
  atomic_fetch_add(&ops_calls, 1);
  return sim_ops.error_pending();
}
static pw_ops counting_ops(void) {
  pw_ops o = sim_ops;
  o.stream_capturing = counted_capturing;
  o.event_query = counted_query;
  o.relax_capture = counted_relax;
  o.error_pending = counted_pending;
  return o;
}

/* A stream fenced for every elision so far is fenced again without a CUDA call; a new elision,
 * or the stream's destruction, sends it back to the slow path. */
static void test_fenced_stream_needs_no_call(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  pw_ops o = counting_ops();
  void *s = sim_stream_new(0), *t = sim_stream_new(0), *u = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&o, s, 0, -1), 1);
  one_copy(e, u, &seed); /* two streams elided: the sole-stream path is not the one taken */
  assert_int_equal(pw_elide_sync(&o, u, 0, -1), 1);
  atomic_store(&ops_calls, 0);
  pw_elide_fence(&o, t);
  assert_true(atomic_load(&ops_calls) > 0);
  assert_int_equal(pw_get(&pw_st.sync_fences), 2);
  atomic_store(&ops_calls, 0);
  for (int i = 0; i < 100; i++)
    pw_elide_fence(&o, t);
  assert_int_equal(atomic_load(&ops_calls), 0);
  one_copy(e, s, &seed); /* a new elision: t waits for it too */
  assert_int_equal(pw_elide_sync(&o, s, 0, -1), 1);
  pw_elide_fence(&o, t);
  assert_true(atomic_load(&ops_calls) > 0);
  assert_int_equal(pw_get(&pw_st.sync_fences), 3);
  pw_elide_forget_stream(t); /* t destroyed, its handle a new stream's: fenced for everything */
  pw_elide_fence(&o, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 5);
  end_run(e);
}

static void test_dropped_elision_count_is_caught(void **state) {
  long total = 0;
  pw_elide_test_drop = 7;
  for (unsigned seed = 1; seed <= 20; seed++)
    total += run_other(seed, OTHER_STREAM, 4, 1);
  pw_elide_test_drop = 0;
  if (total == 0) fail_msg("a fence skipped by the lock-free path went unnoticed");
}

/* Readers on other threads, each on its own stream, fence and read what the main thread copied
 * and elided the sync of, round after round, while it goes on: every byte as after a real sync
 * (and, under ThreadSanitizer, no race between the lock-free path and the elisions). */
enum { READERS = 2, ROUNDS = 12 };
typedef struct round_board {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready;                     /* rounds posted */
  char *dst[ROUNDS];             /* each round's destination */
  unsigned char *expect[ROUNDS]; /* and its bytes */
  void *t[READERS];
} round_board;
typedef struct reader_arg {
  round_board *b;
  int who;
} reader_arg;

static void *round_reader(void *p) {
  reader_arg *a = p;
  round_board *b = a->b;
  sim_set_device(0);
  for (int r = 0; r < ROUNDS; r++) {
    pthread_mutex_lock(&b->mu);
    while (b->ready <= r)
      pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    for (int k = 0; k < 3; k++) /* fenced once, then the lock-free path */
      pw_elide_fence(&sim_ops, b->t[a->who]);
    read_on(b->t[a->who], b->dst[r], b->expect[r], 8192);
  }
  sim_stream_sync(b->t[a->who]);
  return NULL;
}

static long run_round_readers(unsigned seed) {
  setup_run(seed, 0);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  round_board b = {.ready = 0};
  pthread_mutex_init(&b.mu, NULL);
  pthread_cond_init(&b.cv, NULL);
  for (int i = 0; i < READERS; i++)
    b.t[i] = sim_stream_new(0);
  pthread_t th[READERS];
  reader_arg args[READERS];
  for (int i = 0; i < READERS; i++) {
    args[i] = (reader_arg){&b, i};
    pthread_create(&th[i], NULL, round_reader, &args[i]);
  }
  for (int r = 0; r < ROUNDS; r++) {
    b.dst[r] = device_buf(8192);
    staged_copy(e, b.dst[r], 8192, s, &seed, &b.expect[r]);
    assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
    pthread_mutex_lock(&b.mu);
    b.ready = r + 1;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
  }
  for (int i = 0; i < READERS; i++)
    pthread_join(th[i], NULL);
  for (int r = 0; r < ROUNDS; r++)
    free(b.expect[r]);
  end_run(e);
  pthread_cond_destroy(&b.cv);
  pthread_mutex_destroy(&b.mu);
  return atomic_load(&mismatches);
}

static void test_readers_on_other_threads_see_each_round(void **state) {
  for (unsigned seed = 1; seed <= 10; seed++) {
    long bad = run_round_readers(seed);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
  }
}

/* A real sync covers what was queued before it began: an elision or a host write that another
 * thread made while it waited stays (it once retired them: a later launch on another stream went
 * unfenced, a host function's stream was taken as clean). */
static void test_real_sync_covers_only_before_it(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0), *t = sim_stream_new(0);
  unsigned seed = 1;
  uint64_t before = pw_elide_now(); /* thread A's real sync of s begins */
  one_copy(e, s, &seed);            /* thread B: a copy and its elided sync */
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 1);
  static int value;
  sim_enqueue_callback(s, host_store, &value); /* and a host function */
  pw_elide_host_write(&sim_ops, s);
  pw_elide_synced(&sim_ops, s, before); /* A's sync returns */
  assert_int_equal(atomic_load(&pw_elide_live), 1);
  pw_elide_fence(&sim_ops, t);
  assert_int_equal(pw_get(&pw_st.sync_fences), 1);
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 0); /* still dirty: kept */
  assert_int_equal(pw_get(&pw_st.sync_kept[PW_KEEP_HOST_WRITE]), 1);
  end_run(e);
}

/* The legacy default stream synchronises with every blocking stream: a host function queued on it
 * keeps another stream's sync real, and one queued on another stream the legacy stream's. */
static void test_legacy_host_write_reaches_other_streams(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  unsigned seed = 1;
  static int value;
  sim_enqueue_callback((void *)1, host_store, &value);
  pw_elide_host_write(&sim_ops, (void *)1);
  one_copy(e, s, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 0);
  end_run(e);
  setup_run(1, 1);
  e = engine();
  s = sim_stream_new(0);
  sim_enqueue_callback(s, host_store, &value);
  pw_elide_host_write(&sim_ops, s);
  one_copy(e, (void *)1, &seed);
  assert_int_equal(pw_elide_sync(&sim_ops, (void *)1, 0, -1), 0);
  end_run(e);
}

static void test_off_never_elides(void **state) {
  setup_run(1, 1);
  pw_engine *e = engine();
  void *s = sim_stream_new(0);
  unsigned seed = 1;
  one_copy(e, s, &seed);
  pw_elide_configure(0);
  assert_int_equal(pw_elide_sync(&sim_ops, s, 0, -1), 0);
  pw_elide_configure(1);
  assert_int_equal(pw_get(&pw_st.sync_elided), 0);
  end_run(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_other_stream_sees_the_copy),
      cmocka_unit_test(test_legacy_stream_sees_the_copy),
      cmocka_unit_test(test_other_threads_default_stream_sees_the_copy),
      cmocka_unit_test(test_same_stream_needs_no_fence),
      cmocka_unit_test(test_dropped_fence_is_caught),
      cmocka_unit_test(test_fence_once_per_elision),
      cmocka_unit_test(test_host_writes_keep_the_sync),
      cmocka_unit_test(test_host_write_counted_by_reason),
      cmocka_unit_test(test_real_sync_cleans_the_stream),
      cmocka_unit_test(test_dropped_host_write_rule_is_caught),
      cmocka_unit_test(test_destroyed_event_forgotten),
      cmocka_unit_test(test_questions_answer_as_after_a_real_sync),
      cmocka_unit_test(test_dropped_settling_is_caught),
      cmocka_unit_test(test_ipc_export_stops_eliding),
      cmocka_unit_test(test_run_ahead_is_bounded),
      cmocka_unit_test(test_second_sync_does_not_wait_for_the_first),
      cmocka_unit_test(test_full_table_keeps_the_sync),
      cmocka_unit_test(test_other_device_current_keeps_the_sync),
      cmocka_unit_test(test_device_sync_retires),
      cmocka_unit_test(test_capturing_stream_not_fenced),
      cmocka_unit_test(test_destroyed_stream_forgotten),
      cmocka_unit_test(test_fenced_stream_needs_no_call),
      cmocka_unit_test(test_dropped_elision_count_is_caught),
      cmocka_unit_test(test_readers_on_other_threads_see_each_round),
      cmocka_unit_test(test_real_sync_covers_only_before_it),
      cmocka_unit_test(test_legacy_host_write_reaches_other_streams),
      cmocka_unit_test(test_off_never_elides),
      cmocka_unit_test(test_device_reset_forgets_its_events),
      cmocka_unit_test(test_other_context_keeps_the_sync),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
