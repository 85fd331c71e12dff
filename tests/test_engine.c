/* test_engine.c — the staging engine against the simulated CUDA backend (tests/sim).
 *
 * Every staged copy is checked in stream order on the caller's stream: a callback queued before
 * the copy must still see the old bytes of dst (work ordered before the copy completes first), a
 * callback queued after it must see exactly the bytes src held at the call (src is overwritten
 * and freed right after the call returns).  Streams run in a random valid order, many seeds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <dlfcn.h>

#include <cmocka.h>

#include "pw.h"
#include "guard.h"
#include "sim/sim.h"
#include "numa.h"

static atomic_long mismatches, checks;

typedef struct check {
  const char *where;
  unsigned char *expect;
  size_t n;
} check;

static void check_cb(void *arg) {
  check *c = arg;
  atomic_fetch_add(&checks, 1);
  if (memcmp(c->where, c->expect, c->n)) atomic_fetch_add(&mismatches, 1);
  free(c->expect);
  free(c);
}

static void enqueue_check(void *stream, const char *where, const void *expect, size_t n) {
  check *c = malloc(sizeof *c);
  c->where = where;
  c->expect = malloc(n ? n : 1);
  memcpy(c->expect, expect, n);
  c->n = n;
  sim_enqueue_callback(stream, check_cb, c);
}

static unsigned xs(unsigned *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static pw_engine_config small_cfg(size_t ring, size_t pool, size_t chunk) {
  pw_engine_config c = {.mode = PW_MODE_STAGE,
                        .min_bytes = 1,
                        .host_pool = pool,
                        .device_ring = ring,
                        .chunk = chunk,
                        .threads = 1,
                        .strict = 0};
  return c;
}

/* One program thread: `copies` H2D copies of random sizes into its own device buffer on its own
 * stream (or a default stream), each checked before and after in stream order. */
typedef struct worker_arg {
  pw_engine *e;
  void *stream;
  int device, copies;
  size_t max;
  unsigned seed;
  long staged, fallbacks;
} worker_arg;

static pthread_barrier_t *start_line; /* set: the workers make their first copies together */
static int setup_delay_ms; /* run_h2d's pool allocation takes this long (sim_reset clears it) */

static void *h2d_worker(void *p) {
  worker_arg *w = p;
  sim_set_device(w->device);
  char *dev = sim_device_alloc(w->device, w->max + 64);
  unsigned char *shadow = calloc(1, w->max + 64); /* what dev holds, in stream order */
  memset(dev, 0, w->max + 64);
  if (start_line) pthread_barrier_wait(start_line);
  unsigned s = w->seed | 1;
  for (int i = 0; i < w->copies; i++) {
    size_t n = 1 + xs(&s) % w->max, off = xs(&s) % 64;
    unsigned char *src = malloc(n);
    for (size_t k = 0; k < n; k++)
      src[k] = (unsigned char)xs(&s);
    enqueue_check(w->stream, dev + off, shadow + off, n); /* earlier work sees the old bytes */
    pw_transfer c = {.dst = dev + off, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = w->stream};
    assert_int_equal(pw_describe(&sim_ops, &c), 0);
    int r = pw_engine_copy(w->e, &c);
    if (r < 0) {
      sim_real_copy(dev + off, src, n, w->stream); /* what the shim does on a fallback */
      w->fallbacks++;
    } else {
      w->staged++;
    }
    memcpy(shadow + off, src, n);
    memset(src, 0xEE, n); /* the caller may overwrite and free src at once */
    free(src);
    enqueue_check(w->stream, dev + off, shadow + off, n);
    if (xs(&s) % 16 == 0) sim_stream_sync(w->stream);
  }
  sim_stream_sync(w->stream);
  if (memcmp(dev, shadow, w->max + 64)) atomic_fetch_add(&mismatches, 1);
  free(shadow);
  return NULL;
}

static long run_h2d(unsigned seed, pw_engine_config cfg, int threads, int copies, size_t max,
                    int devices, long *staged) {
  sim_reset(seed, devices);
  sim_set_host_alloc_delay_ms(setup_delay_ms);
  atomic_store(&mismatches, 0);
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  pthread_t th[16];
  worker_arg w[16];
  for (int t = 0; t < threads; t++) {
    int dev = t % devices;
    sim_set_device(dev);
    w[t] = (worker_arg){.e = e,
                        .device = dev,
                        .copies = copies,
                        .max = max,
                        .seed = seed * 97 + t,
                        .stream = t == 0 ? NULL : (t == 1 ? (void *)2 : sim_stream_new(dev))};
    pthread_create(&th[t], NULL, h2d_worker, &w[t]);
  }
  long st = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(th[t], NULL);
    st += w[t].staged;
  }
  sim_drain();
  pw_engine_destroy(e);
  assert_int_equal(sim_deadlocks, 0);
  assert_int_equal(sim_pageable_dma, 0);
  assert_int_equal(sim_bad_handles, 0);
  assert_int_equal(pw_get(&pw_st.internal_errors), 0);
  if (staged) *staged = st;
  return atomic_load(&mismatches);
}

static void test_ring_many_seeds(void **state) {
  for (unsigned seed = 1; seed <= 150; seed++) {
    long staged;
    /* the smallest ring (4 chunks of 64 KiB) and pool (6 chunks): copies up to 300K go in pieces
     * and wrap the ring and the pool constantly */
    long bad = run_h2d(seed, small_cfg(256 << 10, 48 << 10, 8 << 10), 1, 60, 300 << 10, 1, &staged);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 60);
  }
}

static void test_copies_larger_than_ring_and_pool(void **state) {
  for (unsigned seed = 1; seed <= 20; seed++) {
    long bad = run_h2d(seed, small_cfg(256 << 10, 16 << 10, 4 << 10), 1, 30, 700 << 10, 1, NULL);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
  }
}

static void test_pinned_only_path(void **state) {
  pw_stats_reset();
  for (unsigned seed = 1; seed <= 60; seed++) {
    long staged;
    long bad = run_h2d(seed, small_cfg(0, 40 << 10, 8 << 10), 1, 60, 100 << 10, 1, &staged);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 60);
  }
  assert_int_equal(pw_get(&pw_st.staged[PW_PATH_RING].calls), 0);
}

static void test_threads_and_devices(void **state) {
  for (unsigned seed = 1; seed <= 12; seed++) {
    long staged;
    long bad = run_h2d(seed, small_cfg(128 << 10, 64 << 10, 16 << 10), 8, 40, 90 << 10, 2, &staged);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 8 * 40);
  }
}

/* The copy pool: chunks of 1 MiB cut into parts copied by 3 workers and the caller, each DMA
 * issued as soon as its chunk is in while later chunks are still being copied; ring and
 * pinned-only paths, the device lazy (every wrap of the pool meets a DMA in flight) or not. */
static void test_pool_pipeline_h2d(void **state) {
  for (unsigned seed = 1; seed <= 16; seed++) {
    long staged;
    pw_engine_config cfg = small_cfg(seed % 4 == 3 ? 0 : 8 << 20, 6 << 20, 1 << 20);
    cfg.threads = 4;
    sim_set_lazy(seed % 3 == 0);
    long bad = run_h2d(seed, cfg, 2, 12, 5 << 20, 1, &staged);
    sim_set_lazy(0);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 2 * 12);
  }
}

/* A copy the pool's workers staged asks them to stay awake while its last DMAs run (their cores'
 * lines are read several times slower once they sleep), through the ring and on the pinned-only
 * path, for its bytes at 24 GB/s (4 MiB: 174762 ns), or a pool's (6 MiB) when it is larger; a copy
 * the caller staged alone asks nothing. */
static void test_h2d_keeps_workers_awake(void **state) {
  for (int round = 0; round < 4; round++) {
    int threads = round == 0 ? 1 : 4;
    size_t n = round == 3 ? 10u << 20 : 4u << 20;
    sim_reset(7, 1);
    pw_engine_config cfg = small_cfg(round == 2 ? 0 : 32 << 20, 6 << 20, 1 << 20);
    cfg.threads = threads;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    char *dev = sim_device_alloc(0, n);
    unsigned char *src = malloc(n);
    memset(src, 0x5A, n);
    pw_transfer c = {.dst = dev, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = NULL};
    assert_int_equal(pw_describe(&sim_ops, &c), 0);
    uint64_t last = 0;
    unsigned long asked = pw_pool_awake_asked(NULL);
    assert_int_equal(pw_engine_copy(e, &c), round == 2 ? PW_PATH_PINNED : PW_PATH_RING);
    unsigned long now_asked = pw_pool_awake_asked(&last);
    if (now_asked != asked + (threads > 1))
      fail_msg("round %d: %lu asked", round, now_asked - asked);
    if (threads > 1) assert_int_equal(last, (round == 3 ? 6u << 20 : n) / 24);
    sim_stream_sync(NULL);
    assert_int_equal(dev[n - 1], 0x5A);
    sim_drain();
    pw_engine_destroy(e);
    free(src);
  }
}

static long all_fallbacks(void) {
  long n = 0;
  for (int f = 0; f < PW_FB_N; f++)
    n += (long)pw_get(&pw_st.fallbacks[f]);
  return n;
}

/* No copy goes around a setup: the first copy to a device sets the device up on its own thread
 * and is staged; when the first copies of eight threads to one device come at once, one sets it
 * up and the others wait for it, all are staged, and the pool is allocated once; bytes right.
 * The pool's allocation takes 50 ms there, so the other seven meet the setup in progress: a
 * get_dev that gave up on a busy setup (trylock) would send their copies to CUDA unchanged. */
static void test_first_copies_staged(void **state) {
  pw_engine_config cfg = small_cfg(96 << 10, 1 << 20, 8 << 10);
  for (unsigned seed = 1; seed <= 20; seed++) {
    long staged;
    pw_stats_reset();
    long bad = run_h2d(seed, cfg, 1, 1, 100 << 10, 1, &staged);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 1);
    assert_int_equal(all_fallbacks(), 0);
    pw_stats_reset();
    pthread_barrier_t line;
    pthread_barrier_init(&line, NULL, 8);
    start_line = &line;
    setup_delay_ms = 50;
    bad = run_h2d(seed, cfg, 8, 10, 100 << 10, 1, &staged);
    setup_delay_ms = 0;
    start_line = NULL;
    pthread_barrier_destroy(&line);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_int_equal(staged, 8 * 10);
    assert_int_equal(all_fallbacks(), 0);
    assert_int_equal(pw_get(&pw_st.pinned_bytes_allocated), 1 << 20);
  }
}

/* A ring below four chunks is raised to four (a 1-byte ring once made pieces of 0 bytes). */
static void test_ring_clamped(void **state) {
  pw_stats_reset();
  long staged;
  long bad = run_h2d(3, small_cfg(1, 48 << 10, 8 << 10), 1, 20, 300 << 10, 1, &staged);
  assert_int_equal(bad, 0);
  assert_int_equal(staged, 20);
  assert_int_equal(pw_get(&pw_st.ring_bytes_allocated), 4 * (64 << 10));
}

/* The test of the test: leave out the ring-region wait and the same checks must catch it. */
static void test_dropped_dependency_is_caught(void **state) {
  long total = 0;
  pw_engine_test_drop_dependency = 1;
  for (unsigned seed = 1; seed <= 40; seed++)
    total += run_h2d(seed, small_cfg(256 << 10, 48 << 10, 8 << 10), 1, 60, 300 << 10, 1, NULL);
  pw_engine_test_drop_dependency = 0;
  if (total == 0) fail_msg("a missing event dependency went unnoticed");
}

static void test_back_pressure_counted(void **state) {
  pw_stats_reset();
  /* the pinned pool is raised to its minimum (6 chunks of 64 KiB): copies of up to 2 MiB wrap it */
  sim_set_lazy(1);
  long bad = run_h2d(7, small_cfg(8 << 20, 16 << 10, 4 << 10), 1, 40, 2 << 20, 1, NULL);
  sim_set_lazy(0);
  assert_int_equal(bad, 0);
  assert_true(pw_get(&pw_st.wait_space_events) > 0);
}

static void d2h_blocking_and_exact(pw_engine_config cfg, size_t max, int seeds) {
  for (unsigned seed = 1; seed <= (unsigned)seeds; seed++) {
    sim_reset(seed, 1);
    sim_set_lazy(seed % 3 == 0);
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    void *s = sim_stream_new(0);
    char *dev = sim_device_alloc(0, max);
    unsigned char *want = malloc(max), *host = malloc(max);
    unsigned r = seed;
    for (int i = 0; i < 20; i++) {
      size_t n = 1 + xs(&r) % max;
      for (size_t k = 0; k < n; k++)
        want[k] = (unsigned char)xs(&r);
      /* the device bytes are written by earlier work on the stream, still queued */
      sim_real_copy(dev, want, n, s);
      memset(host, 0, n);
      pw_transfer c = {.dst = host, .src = dev, .n = n, .dir = PW_DIR_D2H, .stream = s};
      pw_describe(&sim_ops, &c);
      assert_int_equal(pw_engine_copy(e, &c), PW_PATH_D2H);
      /* later work overwrites the device bytes: the call must already have returned them */
      unsigned char junk[64] = {0};
      sim_real_copy(dev, junk, sizeof junk < n ? sizeof junk : n, s);
      if (memcmp(host, want, n)) fail_msg("seed %u copy %d: D2H bytes differ", seed, i);
    }
    sim_drain();
    sim_set_lazy(0);
    pw_engine_destroy(e);
    free(want);
    free(host);
    assert_int_equal(sim_deadlocks, 0);
  }
}

static void test_d2h_blocking_and_exact(void **state) {
  d2h_blocking_and_exact(small_cfg(64 << 10, 40 << 10, 8 << 10), 150 << 10, 40);
}

/* D2H through the pool: the copy-out of chunk k spread over the workers while the DMA of the
 * next chunks runs. */
static void test_d2h_pool(void **state) {
  pw_engine_config cfg = small_cfg(8 << 20, 6 << 20, 1 << 20);
  cfg.threads = 4;
  d2h_blocking_and_exact(cfg, 7 << 20, 8);
}

/* Regression: many small copies fill the arena's slot queue long before its bytes; a D2H copy
 * holds reservations before committing them, which once overflowed the queue (an event handed
 * out twice, corrupt bytes, then a corrupt heap).  Small H2D and D2H copies interleaved. */
static void test_many_small_copies_fill_slot_queue(void **state) {
  pw_stats_reset();
  for (unsigned seed = 1; seed <= 4; seed++) {
    sim_reset(seed, 1);
    pw_engine_config cfg = small_cfg(64 << 20, 64 << 20, 64 << 10);
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    void *s = sim_stream_new(0);
    size_t big = 200 << 10; /* four chunks: three held in flight */
    char *dev = sim_device_alloc(0, 1 << 16), *dbig = sim_device_alloc(0, big);
    unsigned char src[3000], *want = malloc(big), *back = malloc(big);
    unsigned r = seed;
    for (int i = 0; i < 1200; i++) {
      size_t n = 1 + xs(&r) % sizeof src;
      for (size_t k = 0; k < n; k++)
        src[k] = (unsigned char)xs(&r);
      pw_transfer c = {.dst = dev, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
      pw_describe(&sim_ops, &c);
      assert_true(pw_engine_copy(e, &c) >= 0);
      if (i % 7) continue;
      for (size_t k = 0; k < big; k++)
        want[k] = (unsigned char)xs(&r);
      sim_real_copy(dbig, want, big, s);
      pw_transfer d = {.dst = back, .src = dbig, .n = big, .dir = PW_DIR_D2H, .stream = s};
      pw_describe(&sim_ops, &d);
      assert_int_equal(pw_engine_copy(e, &d), PW_PATH_D2H);
      if (memcmp(back, want, big)) fail_msg("seed %u copy %d: D2H bytes differ", seed, i);
    }
    /* one large copy retires hundreds of small slots at once: every event returns to the free
     * list together (a free list sized for 64 once overflowed here) */
    size_t huge = 64 << 20; /* two ring pieces: the second wraps over every small slot */
    char *hsrc = malloc(huge), *hdev = sim_device_alloc(0, huge);
    memset(hsrc, 0x3c, huge);
    pw_transfer h = {.dst = hdev, .src = hsrc, .n = huge, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &h);
    assert_true(pw_engine_copy(e, &h) >= 0);
    enqueue_check(s, hdev, hsrc, huge);
    free(hsrc);
    sim_stream_sync(s);
    sim_drain();
    pw_engine_destroy(e);
    free(want);
    free(back);
    assert_int_equal(sim_deadlocks, 0);
  }
  assert_int_equal(pw_get(&pw_st.internal_errors), 0);
}

static void test_eligibility_and_capture(void **state) {
  sim_reset(3, 1);
  pw_engine_config cfg = small_cfg(64 << 10, 32 << 10, 8 << 10);
  cfg.min_bytes = 1024;
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  void *s = sim_stream_new(0);
  char *dev = sim_device_alloc(0, 4 << 20), host[4096];
  void *pinned;
  sim_ops.host_alloc(&pinned, 8192);
  pw_transfer c = {.dst = dev, .src = host, .n = 2048, .dir = PW_DIR_H2D, .stream = s};
  pw_describe(&sim_ops, &c);
  assert_int_equal(c.src_kind, PW_MEM_PAGEABLE);
  assert_int_equal(c.dst_kind, PW_MEM_DEVICE);
  /* capturing: untouched, before any engine state exists */
  sim_set_capturing(s, 1);
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_CAPTURING);
  sim_set_capturing(s, 0);
  c.n = 100;
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_TOO_SMALL);
  c.n = 2048;
  pw_transfer p = c;
  p.src = pinned;
  pw_describe(&sim_ops, &p);
  assert_int_equal(pw_engine_copy(e, &p), -1 - PW_FB_SRC_NOT_PAGEABLE);
  pw_transfer hh = {.dst = host, .src = host + 2048, .n = 2048, .dir = -1, .stream = s};
  pw_describe(&sim_ops, &hh);
  assert_int_equal(hh.dir, PW_DIR_H2H);
  assert_int_equal(pw_engine_copy(e, &hh), -1 - PW_FB_DIRECTION);
  /* the device range runs past device memory: the real call must report it */
  pw_transfer past = c;
  past.dst = dev + (4 << 20) - 100;
  pw_describe(&sim_ops, &past);
  assert_int_equal(pw_engine_copy(e, &past), -1 - PW_FB_BAD_RANGE);
  /* ...or into the next allocation, device memory of the same device: still CUDA's to refuse */
  void *next;
  char *first = sim_device_alloc_pair(0, 64 << 10, &next);
  memset(next, 0x11, 64 << 10);
  pw_transfer over = c;
  over.dst = first + (64 << 10) - 1000;
  pw_describe(&sim_ops, &over);
  assert_int_equal(pw_engine_copy(e, &over), -1 - PW_FB_BAD_RANGE);
  sim_drain();
  assert_int_equal(((unsigned char *)next)[0], 0x11); /* nothing written past the allocation */
  /* a size that wraps the address space (dst + n - 1 lands just before dst) */
  pw_transfer wrap = c;
  wrap.dst = dev + 64;
  wrap.n = (size_t)-16;
  pw_engine *e2 = pw_engine_create(&sim_ops, &cfg);
  assert_int_equal(pw_engine_copy(e2, &wrap), -1 - PW_FB_BAD_RANGE);
  pw_engine_destroy(e2);
  /* the stream belongs to another device than the memory */
  sim_reset(4, 2);
  pw_engine_destroy(e);
  e = pw_engine_create(&sim_ops, &cfg);
  char *dev1 = sim_device_alloc(1, 1 << 20);
  void *s0 = sim_stream_new(0);
  pw_transfer od = {.dst = dev1, .src = host, .n = 2048, .dir = PW_DIR_H2D, .stream = s0};
  pw_describe(&sim_ops, &od);
  assert_int_equal(pw_engine_copy(e, &od), -1 - PW_FB_OTHER_DEVICE);
  pw_engine_destroy(e);
  cfg.mode = PW_MODE_OBSERVE;
  e = pw_engine_create(&sim_ops, &cfg);
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_MODE);
  pw_engine_destroy(e);
}

static void test_allocation_failures(void **state) {
  /* pinned memory cannot be had: every copy falls back, nothing is staged */
  sim_reset(5, 1);
  sim_fail_host_alloc(1);
  long staged;
  pw_engine_config cfg = small_cfg(64 << 10, 32 << 10, 8 << 10);
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  char *dev = sim_device_alloc(0, 1 << 20), host[8192];
  memset(host, 1, sizeof host);
  pw_transfer c = {.dst = dev, .src = host, .n = sizeof host, .dir = PW_DIR_H2D, .stream = NULL};
  pw_describe(&sim_ops, &c);
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_NO_STATE);
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_NO_STATE);
  pw_engine_destroy(e);
  /* the ring cannot be had: pinned-only path, bytes right */
  pw_stats_reset();
  for (unsigned seed = 1; seed <= 10; seed++) {
    sim_reset(seed, 1);
    sim_fail_device_alloc(1);
    /* run_h2d resets the sim; emulate with a config that asks for a ring the sim refuses */
    pw_engine_config rc = small_cfg(64 << 10, 32 << 10, 8 << 10);
    pw_engine *e2 = pw_engine_create(&sim_ops, &rc);
    void *s = sim_stream_new(0);
    sim_fail_device_alloc(0);
    char *d2 = sim_device_alloc(0, 64 << 10);
    sim_fail_device_alloc(1);
    unsigned char src[50000];
    for (size_t k = 0; k < sizeof src; k++)
      src[k] = (unsigned char)(k * seed);
    pw_transfer cc = {.dst = d2, .src = src, .n = sizeof src, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &cc);
    assert_int_equal(pw_engine_copy(e2, &cc), PW_PATH_PINNED);
    enqueue_check(s, d2, src, sizeof src);
    sim_stream_sync(s);
    pw_engine_destroy(e2);
  }
  (void)staged;
}

static void test_failure_mid_copy_falls_back(void **state) {
  atomic_store(&mismatches, 0);
  sim_reset(9, 1);
  pw_engine_config cfg = small_cfg(64 << 10, 32 << 10, 4 << 10);
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  void *s = sim_stream_new(0);
  char *dev = sim_device_alloc(0, 64 << 10);
  unsigned char src[40000];
  for (size_t k = 0; k < sizeof src; k++)
    src[k] = (unsigned char)(k * 7);
  pw_transfer c = {.dst = dev, .src = src, .n = sizeof src, .dir = PW_DIR_H2D, .stream = s};
  pw_describe(&sim_ops, &c);
  sim_fail_copy_after(1); /* the chunk's DMA is queued, the D2D out of the ring fails */
  int r = pw_engine_copy(e, &c);
  assert_int_equal(r, -1 - PW_FB_INTERNAL);
  sim_real_copy(dev, src, sizeof src, s); /* the shim's real call */
  enqueue_check(s, dev, src, sizeof src);
  /* the device is retired: later copies go to CUDA unchanged */
  assert_int_equal(pw_engine_copy(e, &c), -1 - PW_FB_NO_STATE);
  sim_stream_sync(s);
  assert_int_equal(atomic_load(&mismatches), 0);
  pw_engine_destroy(e);
}

/* Issue 20: no lock is held across a wait on the GPU.  Thread A's staged D2H on stream SA sits
 * behind work that waits for a host flag, which thread B stores only after its own staged H2D on
 * stream SB has returned: CUDA keeps the two streams independent, so both must finish.  With a
 * device lock held across A's event wait, B could not start, and A's wait would never end (the
 * simulation gives up after 5 s and counts a deadlock; the join is bounded as well). */
typedef struct cross_arg {
  pw_engine *e;
  void *stream;
  char *dev;
  unsigned char *host;
  size_t n;
  _Atomic uint32_t *flag;
  int path;
} cross_arg;

static void *cross_d2h(void *p) {
  cross_arg *a = p;
  pw_transfer c = {
      .dst = a->host, .src = a->dev, .n = a->n, .dir = PW_DIR_D2H, .stream = a->stream};
  pw_describe(&sim_ops, &c);
  a->path = pw_engine_copy(a->e, &c);
  return NULL;
}

static void *cross_h2d(void *p) {
  cross_arg *b = p;
  while (atomic_load(&sim_host_waiters) == 0) /* A is waiting on its stream */
    sched_yield();
  pw_transfer c = {
      .dst = b->dev, .src = b->host, .n = b->n, .dir = PW_DIR_H2D, .stream = b->stream};
  pw_describe(&sim_ops, &c);
  b->path = pw_engine_copy(b->e, &c);
  enqueue_check(b->stream, b->dev, b->host, b->n);
  atomic_store_explicit(b->flag, 1, memory_order_release); /* A's stream may go on */
  return NULL;
}

static void test_no_lock_across_gpu_wait(void **state) {
  for (unsigned seed = 1; seed <= 6; seed++) {
    sim_reset(seed, 1);
    atomic_store(&mismatches, 0);
    /* B's copy goes round the pinned pool several times while A's chunks sit BUSY in it */
    pw_engine_config cfg = small_cfg(8 << 20, 1 << 20, 64 << 10);
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    size_t n = (300 << 10) + seed, nb = (3 << 20) + seed;
    _Atomic uint32_t *flag = calloc(1, sizeof *flag);
    cross_arg a = {.e = e, .stream = sim_stream_new(0), .dev = sim_device_alloc(0, n), .n = n};
    cross_arg b = {.e = e, .stream = sim_stream_new(0), .dev = sim_device_alloc(0, nb), .n = nb};
    a.host = calloc(1, n), b.host = malloc(nb);
    unsigned char *want = malloc(n);
    for (size_t k = 0; k < n; k++)
      want[k] = (unsigned char)(k * 13 + seed);
    for (size_t k = 0; k < nb; k++)
      b.host[k] = (unsigned char)(k * 7 + seed);
    /* set up the device state first: the wait must meet a ready engine */
    pw_transfer warm = {.dst = a.dev, .src = want, .n = n, .dir = PW_DIR_H2D, .stream = b.stream};
    pw_describe(&sim_ops, &warm);
    assert_true(pw_engine_copy(e, &warm) >= 0);
    sim_stream_sync(b.stream);
    sim_real_copy(a.dev, want, n, a.stream);
    assert_int_equal(sim_ops.wait_host_value(a.stream, (const uint32_t *)flag, 1), 0);
    a.flag = b.flag = flag;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, cross_d2h, &a);
    pthread_create(&tb, NULL, cross_h2d, &b);
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 30;
    if (pthread_timedjoin_np(tb, NULL, &limit) || pthread_timedjoin_np(ta, NULL, &limit))
      fail_msg("seed %u: the two copies hang", seed);
    assert_int_equal(sim_deadlocks, 0);
    assert_int_equal(b.path, PW_PATH_RING);
    assert_int_equal(a.path, PW_PATH_D2H);
    assert_memory_equal(a.host, want, n);
    sim_stream_sync(b.stream);
    assert_int_equal(atomic_load(&mismatches), 0);
    sim_drain();
    pw_engine_destroy(e);
    free(a.host), free(b.host), free(want), free((void *)flag);
  }
}

/* The pool is not held across a wait on the GPU either: A's D2H waits for its first DMA behind
 * a long "kernel" (its stream waits for a host value that only B sets), its untouched destination
 * mapped ahead (or not, under touch); meanwhile B's 24 MiB H2D on its own stream must be copied by
 * the pool's workers, not by B's thread alone, and finish while A still waits.  The pool once
 * served one batch at a time and A's stayed open across its wait: B found it busy and copied
 * alone (10.5 ms instead of 1.3 on the GPU). */
typedef struct waiting_d2h {
  cross_arg c;
  atomic_int returned;
} waiting_d2h;

static void *waiting_d2h_main(void *p) {
  waiting_d2h *w = p;
  cross_d2h(&w->c);
  atomic_store(&w->returned, 1);
  return NULL;
}

typedef struct pooled_h2d {
  cross_arg c;
  const waiting_d2h *a;
  uint64_t worker_parts, busy;
  int a_waited; /* A had not returned when B's copy was done */
} pooled_h2d;

static void *pooled_h2d_main(void *p) {
  pooled_h2d *b = p;
  while (atomic_load(&sim_host_waiters) == 0) /* A is waiting on its stream */
    sched_yield();
  uint64_t parts = pw_get(&pw_st.pool_parts), busy = pw_get(&pw_st.pool_busy);
  pw_transfer c = {
      .dst = b->c.dev, .src = b->c.host, .n = b->c.n, .dir = PW_DIR_H2D, .stream = b->c.stream};
  pw_describe(&sim_ops, &c);
  b->c.path = pw_engine_copy(b->c.e, &c);
  b->worker_parts = pw_get(&pw_st.pool_parts) - parts;
  b->busy = pw_get(&pw_st.pool_busy) - busy;
  b->a_waited = !atomic_load(&b->a->returned);
  enqueue_check(b->c.stream, b->c.dev, b->c.host, b->c.n);
  atomic_store_explicit(b->c.flag, 1, memory_order_release); /* A's stream may go on */
  return NULL;
}

static void test_no_pool_held_across_gpu_wait(void **state) {
  for (unsigned seed = 1; seed <= 6; seed++) {
    sim_reset(seed, 1);
    atomic_store(&mismatches, 0);
    pw_engine_config cfg = small_cfg(16 << 20, 16 << 20, 1 << 20);
    cfg.threads = 4;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    size_t n = (6u << 20) + seed, nb = (24u << 20) + seed;
    _Atomic uint32_t *flag = calloc(1, sizeof *flag);
    waiting_d2h a = {.c = {.e = e,
                           .stream = sim_stream_new(0),
                           .dev = sim_device_alloc(0, n),
                           .n = n,
                           .flag = flag}};
    pooled_h2d b = {.c = {.e = e,
                          .stream = sim_stream_new(0),
                          .dev = sim_device_alloc(0, nb),
                          .n = nb,
                          .flag = flag},
                    .a = &a};
    a.c.host = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(a.c.host != MAP_FAILED);
    if (seed % 3 == 0) memset(a.c.host, 0, n); /* a destination touched before: not mapped ahead */
    b.c.host = malloc(nb);
    unsigned char *want = malloc(n);
    for (size_t k = 0; k < n; k++)
      want[k] = (unsigned char)(k * 13 + seed);
    for (size_t k = 0; k < nb; k++)
      b.c.host[k] = (unsigned char)(k * 7 + seed);
    /* set up the device state and start the workers first: the wait must meet a ready engine */
    pw_transfer warm = {
        .dst = a.c.dev, .src = want, .n = n, .dir = PW_DIR_H2D, .stream = b.c.stream};
    pw_describe(&sim_ops, &warm);
    assert_true(pw_engine_copy(e, &warm) >= 0);
    sim_stream_sync(b.c.stream);
    assert_true(pw_pool_workers() > 0);
    sim_real_copy(a.c.dev, want, n, a.c.stream);
    assert_int_equal(sim_ops.wait_host_value(a.c.stream, (const uint32_t *)flag, 1), 0);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, waiting_d2h_main, &a);
    pthread_create(&tb, NULL, pooled_h2d_main, &b);
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 30;
    if (pthread_timedjoin_np(tb, NULL, &limit) || pthread_timedjoin_np(ta, NULL, &limit))
      fail_msg("seed %u: the two copies hang", seed);
    assert_int_equal(sim_deadlocks, 0);
    assert_int_equal(b.c.path, PW_PATH_RING);
    assert_int_equal(a.c.path, PW_PATH_D2H);
    assert_true(b.a_waited);
    if (b.busy || !b.worker_parts)
      fail_msg("seed %u: B's copy found the pool busy %llu times; the workers did %llu of its "
               "parts",
               seed, (unsigned long long)b.busy, (unsigned long long)b.worker_parts);
    assert_memory_equal(a.c.host, want, n);
    sim_stream_sync(b.c.stream);
    assert_int_equal(atomic_load(&mismatches), 0);
    sim_drain();
    pw_engine_destroy(e);
    munmap(a.c.host, n);
    free(b.c.host), free(want), free((void *)flag);
  }
}

/* Copies side by side on one device, each thread on its own stream, H2D and D2H mixed, through a
 * pinned arena of the minimum size (6 chunks) and a ring of a few pieces: copies meet each other's
 * busy chunks constantly (a copy holding chunks moves its own on; one holding none waits), and
 * every byte must still be right. */
typedef struct mixed_arg {
  pw_engine *e;
  unsigned seed;
  long staged;
} mixed_arg;

static void *mixed_worker(void *p) {
  mixed_arg *m = p;
  void *s = sim_stream_new(0);
  size_t max = 400 << 10;
  char *dev = sim_device_alloc(0, max);
  unsigned char *src = malloc(max), *back = malloc(max);
  unsigned r = m->seed | 1;
  for (int i = 0; i < 24; i++) {
    size_t n = 1 + xs(&r) % max;
    for (size_t k = 0; k < n; k++)
      src[k] = (unsigned char)xs(&r);
    pw_transfer c = {.dst = dev, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &c);
    if (pw_engine_copy(m->e, &c) >= 0) m->staged++;
    memset(back, 0, n);
    pw_transfer d = {.dst = back, .src = dev, .n = n, .dir = PW_DIR_D2H, .stream = s};
    pw_describe(&sim_ops, &d);
    if (pw_engine_copy(m->e, &d) >= 0) m->staged++;
    if (memcmp(back, src, n)) atomic_fetch_add(&mismatches, 1);
  }
  free(src);
  free(back);
  return NULL;
}

static void test_copies_side_by_side(void **state) {
  for (unsigned seed = 1; seed <= 8; seed++) {
    sim_reset(seed, 1);
    sim_set_lazy(seed % 2);
    atomic_store(&mismatches, 0);
    pw_stats_reset();
    pw_engine_config cfg = small_cfg(256 << 10, 64 << 10, 64 << 10);
    cfg.threads = seed % 3 == 0 ? 3 : 1;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    pthread_t th[6];
    mixed_arg m[6];
    for (int t = 0; t < 6; t++) {
      m[t] = (mixed_arg){.e = e, .seed = seed * 131 + (unsigned)t};
      pthread_create(&th[t], NULL, mixed_worker, &m[t]);
    }
    long staged = 0;
    for (int t = 0; t < 6; t++) {
      pthread_join(th[t], NULL);
      staged += m[t].staged;
    }
    sim_drain();
    sim_set_lazy(0);
    pw_engine_destroy(e);
    if (atomic_load(&mismatches))
      fail_msg("seed %u: %ld mismatches", seed, atomic_load(&mismatches));
    assert_int_equal(staged, 6 * 24 * 2);
    assert_int_equal(sim_deadlocks, 0);
    assert_int_equal(pw_get(&pw_st.internal_errors), 0);
  }
}

/* ---- deferred staging ----
 * The real guard (userfaultfd write-protect) needs pinwheel's free/munmap hooks interposed, which
 * this test process does not have; so the engine's side of the contract runs here against a
 * guard of the test's own: a table of ranges whose released prefix grows with release_upto, and
 * a wait that the test's writers call before they write (what the write-protect does for them in
 * libpinwheel).  The hazards the kernel side must catch (read(2), munmap, fork) are test_guard's.
 * tg_broken turns the wait off: the same checks must then see wrong bytes. */
typedef struct tg_range {
  const char *p;
  size_t n;
  _Atomic size_t done;
  atomic_int used;
} tg_range;
static tg_range tg[64];
static int tg_broken;

static int tg_available(void) {
  return 0;
}
static int tg_protect_inner(const void *p, size_t n, int *id, const void **lo, const void **hi) {
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, z = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  *lo = *hi = p;
  *id = -1;
  if (z <= a) return 0;
  for (int i = 0; i < 64; i++) /* an overlap with a range still guarded is refused */
    if (atomic_load(&tg[i].used) && (const char *)p < tg[i].p + tg[i].n &&
        tg[i].p < (const char *)p + n)
      return PW_GUARD_OVERLAP;
  for (int i = 0; i < 64; i++) {
    int zero = 0;
    if (!atomic_load(&tg[i].used) && atomic_compare_exchange_strong(&tg[i].used, &zero, 2)) {
      tg[i].p = p, tg[i].n = n;
      atomic_store(&tg[i].done, 0);
      atomic_store(&tg[i].used, 1);
      *lo = (const void *)a, *hi = (const void *)z, *id = i;
      return 0;
    }
  }
  return PW_GUARD_FULL;
}
static void tg_release_upto(int id, size_t done) {
  atomic_store(&tg[id].done, done);
}
static void tg_release(int id) {
  atomic_store(&tg[id].done, tg[id].n);
  atomic_store(&tg[id].used, 0);
}
static void tg_wait_always(const void *p, size_t n) {
  const char *a = p, *z = a + n;
  for (int i = 0; i < 64; i++)
    while (atomic_load(&tg[i].used) == 1 && a < tg[i].p + tg[i].n && tg[i].p < z &&
           tg[i].p + atomic_load(&tg[i].done) < (z < tg[i].p + tg[i].n ? z : tg[i].p + tg[i].n))
      sched_yield();
}
/* What a write waits for (broken: nothing).  A free always waits: the hooks' part, not tested
 * here (a copy thread reading freed memory would only crash the test). */
static void tg_wait(const void *p, size_t n) {
  if (!tg_broken) tg_wait_always(p, n);
}
static const pw_guard_ops test_guard = {.available = tg_available,
                                        .protect_inner = tg_protect_inner,
                                        .release_upto = tg_release_upto,
                                        .release = tg_release,
                                        .wait = tg_wait};

/* Deferred copies of random sizes and offsets into one device buffer, random-order execution: the
 * source is overwritten (and then freed) as soon as the call returns, after the guard's wait, as
 * a program's store would wait on a protected page.  Every device byte must equal what the
 * source held at the call.  Now and then the same source is copied twice (the second overlaps a
 * guarded range: staged at once), and the source is first the destination of a D2H (pinwheel's
 * own copy-out must wait for the guard too).  Returns the mismatches. */
static long deferred_run(unsigned seed, int copies, long *deferred) {
  size_t pool = 16 << 20, max = 5 << 20;
  sim_reset(seed, 1);
  sim_set_lazy(seed % 2);
  atomic_store(&mismatches, 0);
  pw_stats_reset();
  pw_engine_config cfg = small_cfg(24 << 20, pool, 1 << 20);
  cfg.threads = seed % 3 == 0 ? 3 : 1;
  cfg.defer = 1;
  cfg.guard = &test_guard;
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  void *s = sim_stream_new(0);
  char *dev = sim_device_alloc(0, max + 64), *dev2 = sim_device_alloc(0, max);
  unsigned char *shadow = calloc(1, max + 64);
  memset(dev, 0, max + 64);
  unsigned r = seed * 7919;
  for (int i = 0; i < copies; i++) {
    size_t n = (1 << 20) + xs(&r) % (max - (1 << 20)), off = xs(&r) % 64;
    unsigned char *src = malloc(n);
    for (size_t k = 0; k < n; k += 8)
      memcpy(src + k, &(uint64_t){((uint64_t)xs(&r) << 32) | xs(&r)}, n - k < 8 ? n - k : 8);
    if (i % 4 == 3) { /* the source is first the destination of a D2H */
      sim_real_copy(dev2, src, n, s);
      pw_transfer d = {.dst = src, .src = dev2, .n = n, .dir = PW_DIR_D2H, .stream = s};
      pw_describe(&sim_ops, &d);
      assert_int_equal(pw_engine_copy(e, &d), PW_PATH_D2H);
    }
    enqueue_check(s, dev + off, shadow + off, n);
    pw_transfer c = {.dst = dev + off, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &c);
    assert_int_equal(pw_engine_copy(e, &c), PW_PATH_RING);
    memcpy(shadow + off, src, n);
    if (i % 5 == 4) { /* two copies from one source */
      pw_transfer c2 = {.dst = dev2, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
      pw_describe(&sim_ops, &c2);
      assert_int_equal(pw_engine_copy(e, &c2), PW_PATH_RING);
      enqueue_check(s, dev2, shadow + off, n);
    }
    if (i % 4 == 1) { /* the source is the destination of the next D2H, at once */
      pw_transfer d = {.dst = src, .src = dev2, .n = n, .dir = PW_DIR_D2H, .stream = s};
      pw_describe(&sim_ops, &d);
      assert_int_equal(pw_engine_copy(e, &d), PW_PATH_D2H);
    } else {
      tg_wait(src, n);
      memset(src, 0xEE, n); /* the write right after the call returns */
    }
    tg_wait_always(src, n);
    free(src);
    enqueue_check(s, dev + off, shadow + off, n);
  }
  sim_stream_sync(s);
  if (memcmp(dev, shadow, max + 64)) atomic_fetch_add(&mismatches, 1);
  sim_drain();
  sim_set_lazy(0);
  *deferred = (long)pw_get(&pw_st.deferred.calls);
  /* a second copy from one source is deferred only when the first one's guard is gone */
  assert_int_equal(pw_get(&pw_st.deferred.calls) +
                       pw_get(&pw_st.not_deferred[PW_ND_GUARD + PW_GUARD_OVERLAP]),
                   (uint64_t)(copies + copies / 5));
  pw_engine_destroy(e);
  free(shadow);
  assert_int_equal(sim_deadlocks, 0);
  assert_int_equal(pw_get(&pw_st.internal_errors), 0);
  return atomic_load(&mismatches);
}

static void test_deferred_bytes(void **state) {
  for (unsigned seed = 1; seed <= 12; seed++) {
    long deferred;
    long bad = deferred_run(seed, 15, &deferred);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_true(deferred >= 15);
  }
}

/* The tests of the test: without the guard's wait, or without the side stream's wait for the
 * copy thread's flag, the same checks see wrong bytes. */
static long deferred_mismatches_over_seeds(void) {
  long total = 0, deferred;
  for (unsigned seed = 1; seed <= 6; seed++)
    total += deferred_run(seed, 15, &deferred);
  return total;
}

static void test_deferred_without_guard_is_caught(void **state) {
  tg_broken = 1;
  long total = deferred_mismatches_over_seeds();
  tg_broken = 0;
  if (total == 0) fail_msg("writes into a deferred source went unnoticed");
}

static void test_deferred_without_flag_wait_is_caught(void **state) {
  pw_engine_test_drop_dependency = 2;
  long total = deferred_mismatches_over_seeds();
  pw_engine_test_drop_dependency = 0;
  if (total == 0) fail_msg("a DMA that does not wait for its copy-in went unnoticed");
}

/* The 32-bit tickets wrap: a device whose tickets start 12 below 2^32 wraps within the first copy
 * or two.  The side stream's wait compares cyclically (the simulator as CUDA's GEQ): every device
 * byte is checked across the wrap. */
static void test_deferred_tickets_wrap(void **state) {
  pw_engine_test_ticket_start = 0xFFFFFFF4u;
  for (unsigned seed = 1; seed <= 8; seed++) {
    long deferred;
    long bad = deferred_run(seed, 15, &deferred);
    if (bad) fail_msg("seed %u: %ld mismatches", seed, bad);
    assert_true(deferred >= 15);
  }
  pw_engine_test_ticket_start = 0;
}

/* Deferred only when its chunks fit in half the pool, counted in whole chunks: a 10 MiB pool
 * (PINWHEEL_HOST_POOL=10M) stages in chunks of 1.625 MiB (a sixth of the pool, in 64 KiB units),
 * and half of it holds 3 of them (4.875 MiB).  A 5 MiB copy fits in half the pool by its bytes but
 * needs 4 chunks: staged at once, not deferred (too large, counted), its bytes right though the
 * source is overwritten as soon as the call returns.  A 4.5 MiB copy (3 chunks) is deferred. */
static void test_deferred_only_in_whole_chunks(void **state) {
  size_t sizes[] = {5 << 20, 9 << 19};
  for (int k = 0; k < 2; k++) {
    sim_reset(3, 1);
    pw_stats_reset();
    atomic_store(&mismatches, 0);
    pw_engine_config cfg = small_cfg(24 << 20, 10 << 20, 4 << 20);
    cfg.defer = 1;
    cfg.guard = &test_guard;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    void *s = sim_stream_new(0);
    size_t n = sizes[k];
    char *dev = sim_device_alloc(0, n);
    unsigned char *src = malloc(n);
    for (size_t i = 0; i < n; i++)
      src[i] = (unsigned char)(i / (1 << 20) * 37 + i % 251);
    pw_transfer c = {.dst = dev, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &c);
    assert_int_equal(pw_engine_copy(e, &c), PW_PATH_RING);
    enqueue_check(s, dev, src, n);
    tg_wait(src, n);      /* a deferred source: the program's write waits for the guard */
    memset(src, 0xEE, n); /* the write right after the call returns */
    assert_int_equal(sim_stream_sync(s), 0);
    assert_int_equal(atomic_load(&mismatches), 0);
    assert_int_equal(pw_get(&pw_st.deferred.calls), k == 0 ? 0 : 1);
    assert_int_equal(pw_get(&pw_st.not_deferred[PW_ND_LARGE]), k == 0 ? 1 : 0);
    pw_engine_destroy(e);
    assert_int_equal(sim_deadlocks, 0);
    assert_int_equal(pw_get(&pw_st.internal_errors), 0);
    free(src);
  }
}

/* A deferred H2D copy of n bytes (a byte pattern that differs per MiB) into new memory of device
 * dev on a new stream of it (*s), from a new malloc block (*src), made with dev current (its
 * primary context); it must be deferred.  The check of the bytes is queued behind it (checked). */
static void deferred_on(pw_engine *e, int dev, size_t n, int checked, void **s, char **dst,
                        unsigned char **src) {
  sim_set_device(dev);
  *s = sim_stream_new(dev);
  *dst = sim_device_alloc(dev, n);
  *src = malloc(n);
  for (size_t i = 0; i < n; i++)
    (*src)[i] = (unsigned char)(i / (1 << 20) * 37 + i % 251 + dev);
  pw_transfer c = {.dst = *dst, .src = *src, .n = n, .dir = PW_DIR_H2D, .stream = *s};
  pw_describe(&sim_ops, &c);
  long before = pw_get(&pw_st.deferred.calls);
  assert_int_equal(pw_engine_copy(e, &c), PW_PATH_RING);
  assert_int_equal(pw_get(&pw_st.deferred.calls), before + 1);
  if (checked) enqueue_check(*s, *dst, *src, n);
}

static pw_engine *defer_engine(void) {
  pw_engine_config cfg = small_cfg(24 << 20, 4 << 20, 1 << 20);
  cfg.defer = 1;
  cfg.guard = &test_guard;
  return pw_engine_create(&sim_ops, &cfg);
}

/* A device reset does not clear an error the program's thread has not read (its sync of the side
 * stream is followed by a clear only when nothing was pending before). */
static void test_reset_keeps_program_error(void **state) {
  sim_reset(12, 1);
  pw_stats_reset();
  pw_engine *e = defer_engine();
  void *s;
  char *dev;
  unsigned char *src;
  deferred_on(e, 0, 3 << 19, 0, &s, &dev, &src); /* 1.5 MiB: 3 chunks of 640 KiB */
  sim_set_pending_error(77);
  pw_engine_device_reset(e, 0);
  assert_int_equal(sim_pending_error(), 77);
  sim_set_pending_error(0);
  pw_engine_destroy(e);
  free(src);
  sim_reset(1, 1);
}

/* Not deferred, staged as before, the reason counted: off, below the minimum, no way for the
 * stream to wait on a host value, a guard that refuses. */
static int tg_refuse(void) {
  return PW_GUARD_NO_UFFD;
}
static void test_not_deferred_reasons(void **state) {
  pw_guard_ops refusing = test_guard;
  refusing.available = tg_refuse;
  struct {
    int defer, no_wait;
    const pw_guard_ops *g;
    size_t n;
    int reason;
  } cases[] = {{0, 0, &test_guard, 2 << 20, PW_ND_OFF},
               {1, 0, NULL, 2 << 20, PW_ND_NO_GUARD},
               {1, 0, &test_guard, 100 << 10, PW_ND_SMALL},
               {1, 1, &test_guard, 2 << 20, PW_ND_NO_WAIT_VALUE},
               {1, 0, &test_guard, 20 << 20, PW_ND_LARGE},
               {1, 0, &refusing, 2 << 20, PW_ND_GUARD + PW_GUARD_NO_UFFD}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    sim_reset(5, 1);
    sim_no_wait_value(cases[k].no_wait);
    pw_stats_reset();
    atomic_store(&mismatches, 0);
    pw_engine_config cfg = small_cfg(24 << 20, 16 << 20, 1 << 20);
    cfg.defer = cases[k].defer;
    cfg.guard = cases[k].g;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    void *s = sim_stream_new(0);
    size_t n = cases[k].n;
    char *dev = sim_device_alloc(0, n);
    unsigned char *src = malloc(n);
    memset(src, (int)k + 1, n);
    pw_transfer c = {.dst = dev, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = s};
    pw_describe(&sim_ops, &c);
    assert_int_equal(pw_engine_copy(e, &c), PW_PATH_RING);
    enqueue_check(s, dev, src, n);
    memset(src, 0xEE, n); /* staged as before: the source is free at once */
    sim_stream_sync(s);
    assert_int_equal(atomic_load(&mismatches), 0);
    assert_int_equal(pw_get(&pw_st.deferred.calls), 0);
    assert_int_equal(pw_get(&pw_st.not_deferred[cases[k].reason]), 1);
    pw_engine_destroy(e);
    free(src);
  }
  sim_no_wait_value(0);
}

/* Whether this kernel (or emulator) maps pages on MADV_POPULATE_WRITE. */
static int populate_works(void) {
  size_t n = 1 << 20;
  char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0;
  pw_prefault(m, n);
  int ok = !pw_untouched(m + n / 2);
  munmap(m, n);
  return ok;
}

typedef struct mapped_probe {
  const char *p;
  size_t n;
  int all_mapped;
} mapped_probe;

/* Queued on the stream before the copy: the "kernel" that produces the bytes still runs. */
static void probe_mapped(void *arg) {
  mapped_probe *m = arg;
  m->all_mapped = 1;
  for (size_t off = 4096; off + 4096 <= m->n; off += 4096)
    if (pw_untouched(m->p + off)) m->all_mapped = 0;
}

/* An untouched destination (what `.cpu()` hands over every step) is mapped while the GPU work
 * before the copy still runs, not after its DMA: on a lazy device the work before the copy runs
 * only when the engine waits for the first DMA, and by then every page of dst must be mapped
 * (one thread: deterministic).  With a pool, the bytes and the bytes around dst. */
static void test_d2h_fresh_destination_mapped_ahead(void **state) {
  if (!populate_works()) skip();
  for (int threads = 1; threads <= 4; threads += 3) {
    sim_reset(11, 1);
    sim_set_lazy(threads == 1);
    pw_stats_reset();
    pw_engine_config cfg = small_cfg(8 << 20, 6 << 20, 1 << 20);
    cfg.threads = threads;
    pw_engine *e = pw_engine_create(&sim_ops, &cfg);
    void *s = sim_stream_new(0);
    size_t n = (9u << 20) + 12345, map = n + (4u << 20);
    char *dev = sim_device_alloc(0, n);
    unsigned char *want = malloc(n);
    for (size_t i = 0; i < n; i++)
      want[i] = (unsigned char)(i * 131 + 7);
    unsigned char *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    unsigned char *host = m + 100;
    memset(m, 0x5a, 100); /* an allocator's header before dst */
    sim_real_copy(dev, want, n, s);
    mapped_probe mp = {(const char *)host, n, -1};
    sim_enqueue_callback(s, probe_mapped, &mp);
    pw_transfer c = {.dst = host, .src = dev, .n = n, .dir = PW_DIR_D2H, .stream = s};
    pw_describe(&sim_ops, &c);
    assert_int_equal(pw_engine_copy(e, &c), PW_PATH_D2H);
    assert_memory_equal(host, want, n);
    for (int i = 0; i < 100; i++)
      assert_int_equal(m[i], 0x5a);
    for (size_t i = 100 + n; i < map; i += 4096)
      assert_int_equal(m[i], 0); /* past dst: still zero */
    assert_int_equal(pw_get(&pw_st.d2h_fresh), 1);
    /* mapped ahead where huge pages could be advised (THP not "never") */
    assert_int_equal(pw_get(&pw_st.d2h_mapped_ahead), pw_get(&pw_st.d2h_advised));
    if (threads == 1 && pw_get(&pw_st.d2h_mapped_ahead)) assert_int_equal(mp.all_mapped, 1);
    if (threads == 1 && !pw_get(&pw_st.d2h_mapped_ahead))
      assert_int_equal(mp.all_mapped, 0); /* the probe can tell: nothing maps dst early */
    sim_drain();
    sim_set_lazy(0);
    pw_engine_destroy(e);
    munmap(m, map);
    free(want);
    assert_int_equal(sim_deadlocks, 0);
  }
}

/* The system calls of the engine (numa.c's memory policy, guard.c's futexes) go through this
 * binary's syscall(), which counts the memory-policy ones while count_mempolicy is set and hands
 * every call to libc's (all six argument registers passed on: the unused ones are ignored). */
static atomic_int count_mempolicy, mempolicy_calls;
long syscall(long n, ...) {
  static long (*real)(long, ...);
  va_list ap;
  long a[6];
  va_start(ap, n);
  for (int i = 0; i < 6; i++)
    a[i] = va_arg(ap, long);
  va_end(ap);
  if (atomic_load(&count_mempolicy) && (n == SYS_get_mempolicy || n == SYS_set_mempolicy))
    atomic_fetch_add(&mempolicy_calls, 1);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "syscall");
  return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* pw_numa_prefer takes every node its mask of 1024 bits holds: node 1023 is asked of the kernel
 * (which refuses a node this host lacks), node 1024 is not. */
static void test_numa_prefer_last_node(void **state) {
  atomic_store(&count_mempolicy, 1);
  atomic_store(&mempolicy_calls, 0);
  if (pw_numa_prefer(1023) == 0) pw_numa_unprefer();
  int asked = atomic_load(&mempolicy_calls);
  atomic_store(&mempolicy_calls, 0);
  assert_int_equal(pw_numa_prefer(1024), -1);
  int asked_past = atomic_load(&mempolicy_calls);
  atomic_store(&count_mempolicy, 0);
  assert_true(asked > 0);
  assert_int_equal(asked_past, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_many_seeds),
      cmocka_unit_test(test_copies_larger_than_ring_and_pool),
      cmocka_unit_test(test_pinned_only_path),
      cmocka_unit_test(test_threads_and_devices),
      cmocka_unit_test(test_h2d_keeps_workers_awake),
      cmocka_unit_test(test_pool_pipeline_h2d),
      cmocka_unit_test(test_d2h_pool),
      cmocka_unit_test(test_first_copies_staged),
      cmocka_unit_test(test_dropped_dependency_is_caught),
      cmocka_unit_test(test_ring_clamped),
      cmocka_unit_test(test_back_pressure_counted),
      cmocka_unit_test(test_d2h_blocking_and_exact),
      cmocka_unit_test(test_d2h_fresh_destination_mapped_ahead),
      cmocka_unit_test(test_many_small_copies_fill_slot_queue),
      cmocka_unit_test(test_eligibility_and_capture),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_failure_mid_copy_falls_back),
      cmocka_unit_test(test_no_lock_across_gpu_wait),
      cmocka_unit_test(test_no_pool_held_across_gpu_wait),
      cmocka_unit_test(test_copies_side_by_side),
      cmocka_unit_test(test_deferred_bytes),
      cmocka_unit_test(test_deferred_without_guard_is_caught),
      cmocka_unit_test(test_deferred_without_flag_wait_is_caught),
      cmocka_unit_test(test_deferred_tickets_wrap),
      cmocka_unit_test(test_deferred_only_in_whole_chunks),
      cmocka_unit_test(test_reset_keeps_program_error),
      cmocka_unit_test(test_numa_prefer_last_node),
      cmocka_unit_test(test_not_deferred_reasons),
  };
  pw_log_set_level(PW_LOG_ERROR - 1); /* the failure tests log errors on purpose */
  /* PW_TEST_SKIP=PATTERN leaves out the tests whose names match: the ThreadSanitizer tree skips the
   * tests of the tests (a guard or a flag wait left out on purpose must show wrong bytes), whose
   * deliberate race TSan reports and whose timing its instrumentation changes; the ASan and UBSan
   * build runs them */
  if (getenv("PW_TEST_SKIP")) cmocka_set_skip_filter(getenv("PW_TEST_SKIP"));
  if (getenv("PW_TEST_ONLY"))
    cmocka_set_test_filter(getenv("PW_TEST_ONLY")); /* one test, by name */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
