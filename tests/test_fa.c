/* test_fa.c — uploads made ahead of the program's copy (shim/fill/fa.c) against the simulated
 * CUDA backend (tests/sim): the program's pinned allocation made by pinwheel, a fill uploaded as
 * it goes, the program's copy made from the upload, and every way an upload must be given up.
 * Bytes are compared at the destination after the stream ran, in random order.
 *
 * The guard here is the test's own (what the real one, userfaultfd write-protect, does for a
 * program write is test_guard's): a table of ranges, and tg_write, the test's "program write",
 * which calls the range's revoke before it writes, as the real guard's fault reader does.
 * tg_broken makes tg_write skip that: the checks must then see a stale byte. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fa.h"
#include "guard.h"
#include "pw.h"
#include "sim/sim.h"

#define MiB (1u << 20)

typedef struct tg_range {
  const char *lo, *hi;
  void (*revoke)(void *);
  void *arg;
  atomic_int used;
} tg_range;
static tg_range tg[64];
static int tg_broken;

static int tg_available(void) {
  return 0;
}
static int tg_protect_revocable(const void *p, size_t n, int *id, const void **lo, const void **hi,
                                void (*revoke)(void *), void *arg) {
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, z = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  *lo = *hi = p;
  *id = -1;
  if (z <= a) return 0;
  for (int i = 0; i < 64; i++) {
    int zero = 0;
    if (atomic_compare_exchange_strong(&tg[i].used, &zero, 2)) {
      tg[i].lo = (const char *)a, tg[i].hi = (const char *)z;
      tg[i].revoke = revoke, tg[i].arg = arg;
      atomic_store(&tg[i].used, 1);
      *lo = (const void *)a, *hi = (const void *)z, *id = i;
      return 0;
    }
  }
  return PW_GUARD_FULL;
}
static void tg_release(int id) {
  if (id >= 0) atomic_store(&tg[id].used, 0);
}
/* A write of the program at p: the guard takes the upload away first. */
static void tg_write(char *p, char v) {
  for (int i = 0; i < 64 && !tg_broken; i++)
    if (atomic_load(&tg[i].used) == 1 && p >= tg[i].lo && p < tg[i].hi) tg[i].revoke(tg[i].arg);
  *p = v;
}
static void tg_wait(const void *p, size_t n) {
  const char *a = p, *z = a + n;
  for (int i = 0; i < 64; i++)
    if (atomic_load(&tg[i].used) == 1 && a < tg[i].hi && tg[i].lo < z) tg[i].revoke(tg[i].arg);
  for (int i = 0; i < 64; i++)
    while (atomic_load(&tg[i].used) == 1 && a < tg[i].hi && tg[i].lo < z)
      sched_yield();
}
static const pw_guard_ops test_guard = {.available = tg_available,
                                        .protect_revocable = tg_protect_revocable,
                                        .release = tg_release,
                                        .wait = tg_wait};

static void fill_pattern(char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (char)(i * 2654435761u >> 13 ^ seed);
}

/* A fresh simulation and fill-ahead with `scratch` bytes of scratch per device, 1 MiB chunks. */
static void start(unsigned seed, int ndev, size_t scratch) {
  pw_fa_test_reset();
  sim_reset(seed, ndev);
  sim_set_device(0);
  pw_stats_reset();
  memset(tg, 0, sizeof tg);
  tg_broken = 0;
  pw_fa_configure(scratch, MiB, 3, &test_guard);
  pw_fa_test_expire_ms(60000);    /* a loaded machine (or ThreadSanitizer) must not expire the */
  pw_fa_test_take_wait_ms(60000); /* tests' uploads, nor make a copy give up waiting for one */
}

/* Until every upload of the bytes filled so far is enqueued, then run them: a write of the test
 * after this cannot race a DMA still reading (the order the tests of stale bytes need). */
static void uploads_run(void) {
  for (int i = 0; i < 2000 && pw_get(&pw_st.fa_upload_bytes) < pw_get(&pw_st.fa_fills.bytes); i++) {
    struct timespec t = {0, 10000000};
    nanosleep(&t, NULL);
  }
  assert_int_equal(pw_get(&pw_st.fa_upload_bytes), pw_get(&pw_st.fa_fills.bytes));
  sim_drain();
}

static pw_transfer h2d(void *dst, const void *src, size_t n, void *stream, int dev) {
  return (pw_transfer){.dst = dst,
                       .src = src,
                       .n = n,
                       .dir = PW_DIR_H2D,
                       .stream = stream,
                       .src_kind = PW_MEM_PINNED,
                       .dst_kind = PW_MEM_DEVICE,
                       .src_dev = -1,
                       .dst_dev = dev,
                       .ops = &sim_ops};
}

/* The program's copy: from the upload when fa takes it, else the real one; then the stream runs.
 * Returns 1 when it was made from the upload. */
static int program_copy(void *dst, const void *src, size_t n, void *stream, int dev) {
  pw_transfer c = h2d(dst, src, n, stream, dev);
  int ahead = pw_fa_copy(&c) == 0;
  if (!ahead) sim_real_copy(dst, src, n, stream);
  assert_int_equal(sim_stream_sync(stream), 0);
  return ahead;
}

static void test_fill_then_copy(void **state) {
  (void)state;
  for (unsigned seed = 1; seed <= 6; seed++) {
    start(seed, 1, 64 * MiB);
    size_t n = 9 * MiB + 12345;
    char *pinned = NULL, *src = malloc(n + 8192);
    assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n + 8192, 5), 0);
    unsigned flags = 0;
    assert_true(pw_fa_host_flags(pinned + 100, &flags));
    assert_int_equal(flags, 5);
    char *dev = sim_device_alloc(0, n);
    void *s = sim_stream_new(0);
    char *at = pinned + 777; /* neither end on a page boundary */
    fill_pattern(src, n, seed);
    assert_int_equal(pw_fa_fill(at, src, n), 1);
    assert_memory_equal(at, src, n);
    assert_int_equal(program_copy(dev, at, n, s, 0), 1);
    assert_memory_equal(dev, src, n);
    assert_int_equal(pw_get(&pw_st.fa_used.calls), 1);
    assert_int_equal(pw_get(&pw_st.fa_fills.bytes), n);
    assert_int_equal(sim_pageable_dma, 0);
    assert_int_equal(pw_fa_host_free(pinned), 1);
    assert_false(pw_fa_host_flags(pinned, NULL));
    free(src);
  }
}

/* After the fill the program writes one byte in the middle (guarded) and one in the first page
 * (not guarded: a partial page), then copies: both bytes must arrive.  With the guard broken, the
 * middle one arrives stale: the test can fail. */
static long write_then_copy(unsigned seed, int broken) {
  start(seed, 1, 64 * MiB);
  size_t n = 6 * MiB + 999;
  char *pinned = NULL, *src = malloc(n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n + 4096, 0), 0);
  char *dev = sim_device_alloc(0, n), *at = pinned + 100;
  void *s = sim_stream_new(0);
  fill_pattern(src, n, seed);
  assert_int_equal(pw_fa_fill(at, src, n), 1);
  uploads_run(); /* before the writes (else a DMA that runs late reads the new bytes anyway) */
  tg_broken = broken;
  tg_write(at + n / 2, (char)(src[n / 2] ^ 0x5a));
  tg_write(at + 10, (char)(src[10] ^ 0x33));
  src[n / 2] ^= 0x5a, src[10] ^= 0x33;
  int ahead = program_copy(dev, at, n, s, 0);
  long bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += dev[i] != src[i];
  if (!broken) {
    assert_int_equal(ahead, 0); /* given up at the write */
    assert_int_equal(pw_get(&pw_st.fa_revoked[PW_FA_GUARD]), 1);
  }
  free(src);
  return bad;
}

static void test_write_after_fill(void **state) {
  (void)state;
  for (unsigned seed = 1; seed <= 4; seed++)
    assert_int_equal(write_then_copy(seed, 0), 0);
}

static void test_write_without_guard_is_caught(void **state) {
  (void)state;
  assert_int_equal(write_then_copy(9, 1), 1); /* the middle byte: stale */
}

/* A write to the partial first page only (the guard does not cover it, nothing is revoked): the
 * copy is made from the upload, and that byte comes from the pinned memory itself. */
static void test_partial_page_from_pinned(void **state) {
  (void)state;
  start(3, 1, 64 * MiB);
  size_t n = 5 * MiB;
  char *pinned = NULL, *src = malloc(n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n + 8192, 0), 0);
  char *dev = sim_device_alloc(0, n), *at = pinned + 3000;
  void *s = sim_stream_new(0);
  fill_pattern(src, n, 3);
  assert_int_equal(pw_fa_fill(at, src, n), 1);
  uploads_run();             /* before the writes */
  tg_write(at + 5, 'x');     /* first page: not guarded */
  tg_write(at + n - 3, 'y'); /* last page: not guarded */
  src[5] = 'x', src[n - 3] = 'y';
  assert_int_equal(program_copy(dev, at, n, s, 0), 1);
  assert_memory_equal(dev, src, n);
  free(src);
}

/* Each of these gives the upload up before the program's copy; the copy is then the real one. */
static void test_revoked_by(void **state) {
  (void)state;
  for (int how = 0; how < 5; how++) {
    start(11 + how, 2, 64 * MiB);
    size_t n = 4 * MiB;
    char *pinned = NULL, *src = malloc(n);
    assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n, 0), 0);
    char *dev = sim_device_alloc(0, n), *dev1 = sim_device_alloc(1, n);
    void *s = sim_stream_new(0);
    fill_pattern(src, n, how);
    assert_int_equal(pw_fa_fill(pinned, src, n), 1);
    int reason = -1;
    if (how == 0) { /* a launch */
      pw_fa_revoke_all(PW_FA_LAUNCH);
      reason = PW_FA_LAUNCH;
    } else if (how == 1) { /* a copy into it (device to host): the real copy writes it */
      pw_transfer d = {.dst = pinned + MiB,
                       .src = dev,
                       .n = 4096,
                       .dir = PW_DIR_D2H,
                       .stream = s,
                       .src_kind = PW_MEM_DEVICE,
                       .dst_kind = PW_MEM_PINNED,
                       .src_dev = 0,
                       .dst_dev = -1,
                       .ops = &sim_ops};
      memset(dev, 7, 4096);
      assert_int_equal(pw_fa_copy(&d), -1);
      sim_real_copy(pinned + MiB, dev, 4096, s);
      assert_int_equal(sim_stream_sync(s), 0);
      memset(src + MiB, 7, 4096);
      reason = PW_FA_COPY_INTO;
    } else if (how == 2) { /* a new fill of other bytes over it: the copy gets those */
      fill_pattern(src, n, 99);
      assert_int_equal(pw_fa_fill(pinned, src, n), 1);
      reason = PW_FA_REFILL;
    } else if (how == 3) { /* not used in time */
      pw_fa_test_expire_ms(50);
      struct timespec t = {0, 150 * 1000000L};
      nanosleep(&t, NULL);
      reason = PW_FA_EXPIRED;
    } else { /* copied to another device: not from this upload (it stays) */
      assert_int_equal(program_copy(dev1, pinned, n, sim_stream_new(1), 1), 0);
      assert_memory_equal(dev1, src, n);
    }
    if (how == 2) {
      assert_int_equal(program_copy(dev, pinned, n, s, 0), 1); /* the second fill's */
    } else if (how == 4) {
      assert_int_equal(program_copy(dev, pinned, n, s, 0), 1); /* still there for device 0 */
    } else {
      assert_int_equal(program_copy(dev, pinned, n, s, 0), 0);
    }
    assert_memory_equal(dev, src, n);
    if (reason >= 0) assert_int_equal(pw_get(&pw_st.fa_revoked[reason]), 1);
    free(src);
  }
}

/* A graph being captured gets the real copy, and the upload stays for a later copy. */
static void test_capture_keeps_upload(void **state) {
  (void)state;
  start(5, 1, 64 * MiB);
  size_t n = 3 * MiB;
  char *pinned = NULL, *src = malloc(n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n, 0), 0);
  char *dev = sim_device_alloc(0, n);
  void *s = sim_stream_new(0);
  fill_pattern(src, n, 5);
  assert_int_equal(pw_fa_fill(pinned, src, n), 1);
  sim_set_capturing(s, 1);
  pw_transfer c = h2d(dev, pinned, n, s, 0);
  assert_int_equal(pw_fa_copy(&c), -1);
  sim_set_capturing(s, 0);
  assert_int_equal(program_copy(dev, pinned, n, s, 0), 1);
  assert_memory_equal(dev, src, n);
  free(src);
}

/* Fills and copies in turn, sizes and offsets varied, a scratch that holds only a few: every
 * range is reused, only once its device copies ran; a fill that finds no scratch free is not
 * uploaded (the caller copies it) and its copy is the real one. */
static void test_scratch_reused(void **state) {
  (void)state;
  for (unsigned seed = 1; seed <= 3; seed++) {
    start(seed, 1, 16 * MiB);
    size_t cap = 12 * MiB;
    char *pinned = NULL, *src = malloc(cap), *dev = sim_device_alloc(0, cap);
    assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, cap, 0), 0);
    void *s = sim_stream_new(0);
    unsigned x = seed;
    int ahead = 0;
    for (int it = 0; it < 24; it++) {
      x = x * 1103515245 + 12345;
      size_t off = (x >> 8) % 8192, n = MiB + (x >> 4) % (10 * MiB);
      fill_pattern(src, n, x);
      if (!pw_fa_fill(pinned + off, src, n)) memcpy(pinned + off, src, n);
      ahead += program_copy(dev, pinned + off, n, s, 0);
      assert_memory_equal(dev, src, n);
    }
    assert_true(ahead > 0);
    free(src);
  }
}

/* A DMA of the uploads fails: the copy is the real one, the bytes right. */
static void test_upload_fails(void **state) {
  (void)state;
  start(8, 1, 64 * MiB);
  size_t n = 4 * MiB;
  char *pinned = NULL, *src = malloc(n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n, 0), 0);
  char *dev = sim_device_alloc(0, n);
  void *s = sim_stream_new(0);
  fill_pattern(src, n, 8);
  sim_fail_copy_after(0); /* the first DMA of the uploads */
  assert_int_equal(pw_fa_fill(pinned, src, n), 1);
  struct timespec t = {0, 20000000};
  nanosleep(&t, NULL);
  sim_fail_copy_after(-1);
  assert_int_equal(program_copy(dev, pinned, n, s, 0), 0);
  assert_memory_equal(dev, src, n);
  assert_int_equal(pw_get(&pw_st.fa_revoked[PW_FA_UPLOAD_FAILED]), 1);
  free(src);
}

/* cudaDeviceReset: the device's uploads given up and waited for, its allocations forgotten (their
 * registration ends with the context), the next allocation sets the device up again.  At exit,
 * once the upload thread has stopped, a free still returns (it waits for the GPU itself). */
static void test_reset_and_exit(void **state) {
  (void)state;
  start(4, 1, 64 * MiB);
  size_t n = 4 * MiB;
  char *pinned = NULL, *src = malloc(n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n, 0), 0);
  fill_pattern(src, n, 4);
  assert_int_equal(pw_fa_fill(pinned, src, n), 1);
  pw_fa_device_reset(0);
  assert_int_equal(pw_get(&pw_st.fa_revoked[PW_FA_RESET]), 1);
  assert_false(pw_fa_host_flags(pinned, NULL)); /* ended by the reset, as CUDA's */
  assert_false(pw_fa_live());
  assert_int_equal(pw_fa_fill(pinned, src, n), 0); /* not uploaded any more */
  assert_int_equal(pw_fa_host_free(pinned), 1);    /* unmapped at its free */
  char *again = NULL, *dev = sim_device_alloc(0, n);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&again, n, 0), 0);
  void *s = sim_stream_new(0);
  assert_int_equal(pw_fa_fill(again, src, n), 1);
  assert_int_equal(program_copy(dev, again, n, s, 0), 1);
  assert_memory_equal(dev, src, n);
  sim_set_lazy(1); /* from here, queued work runs only when someone waits for it */
  /* a reset does not wait for the GPU work of an upload: the program's stream never moves */
  assert_int_equal(pw_fa_fill(again, src, n), 1);
  pw_transfer c = h2d(dev, again, n, s, 0);
  assert_int_equal(pw_fa_copy(&c), 0);
  alarm(20);
  pw_fa_device_reset(0);
  alarm(0);
  sim_set_lazy(0);
  sim_drain(); /* what the reset drops in CUDA; the simulation runs it, before the memory goes */
  assert_int_equal(pw_fa_host_free(again), 1);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&again, n, 0), 0);
  sim_set_lazy(1);
  assert_int_equal(pw_fa_fill(again, src, n), 1);
  pw_fa_test_exit();
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&pinned, n, 0), -1); /* exiting */
  alarm(20); /* a free that waited for the stopped thread would hang */
  assert_int_equal(pw_fa_host_free(again), 1);
  alarm(0);
  sim_set_lazy(0);
  free(src);
}

/* A reset while another thread fills, again and again: whatever the interleaving, once both are
 * done no guard is left held and no upload is left live (a fill that reserved while the reset
 * gave uploads up once kept its guard for ever: every later write to the pages would hang). */
typedef struct {
  char *pinned, *src;
  size_t n;
  atomic_int stop, fills;
} filler_arg;
static void *filler(void *p) {
  filler_arg *f = p;
  while (!atomic_load(&f->stop)) {
    if (!pw_fa_fill(f->pinned, f->src, f->n)) memcpy(f->pinned, f->src, f->n);
    atomic_fetch_add(&f->fills, 1);
  }
  return NULL;
}
static filler_arg *in_reset_fill;
static void fill_in_reset(void) {
  filler_arg *f = in_reset_fill;
  if (!pw_fa_fill(f->pinned, f->src, f->n)) memcpy(f->pinned, f->src, f->n);
}
static void test_reset_while_filling(void **state) {
  (void)state;
  /* deterministic: a fill in the middle of the reset (after it gave the uploads up) */
  start(19, 1, 64 * MiB);
  filler_arg g = {.n = 2 * MiB};
  g.src = malloc(g.n);
  fill_pattern(g.src, g.n, 19);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&g.pinned, g.n, 0), 0);
  in_reset_fill = &g;
  pw_fa_test_in_reset = fill_in_reset;
  pw_fa_device_reset(0);
  pw_fa_test_in_reset = NULL;
  assert_memory_equal(g.pinned, g.src, g.n);
  assert_false(pw_fa_live());
  for (int i = 0; i < 64; i++)
    if (atomic_load(&tg[i].used)) fail_msg("guard slot %d still held after the reset", i);
  sim_drain();
  assert_int_equal(pw_fa_host_free(g.pinned), 1);
  free(g.src);
  /* and with a thread filling all the while, the reset anywhere among its fills.  Not under
   * ThreadSanitizer: each fill over the buffer gives the last one's upload up while that upload's
   * DMA may still read the buffer, by design (a given-up upload is never used); the simulation
   * makes that DMA a host copy, which the sanitizer reports as a race with the refill. */
#if defined(__SANITIZE_THREAD__)
  return;
#endif
  for (int round = 0; round < 8; round++) {
    start(20 + round, 1, 64 * MiB);
    filler_arg f = {.n = 2 * MiB};
    f.src = malloc(f.n);
    fill_pattern(f.src, f.n, round);
    assert_int_equal(pw_fa_host_alloc(&sim_ops, (void **)&f.pinned, f.n, 0), 0);
    pthread_t t;
    pthread_create(&t, NULL, filler, &f);
    while (atomic_load(&f.fills) < 1 + round)
      sched_yield();
    alarm(30);
    pw_fa_device_reset(0);
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    alarm(0);
    sim_drain();
    assert_false(pw_fa_live());
    for (int i = 0; i < 64; i++)
      if (atomic_load(&tg[i].used)) fail_msg("round %d: guard slot %d still held", round, i);
    assert_int_equal(pw_fa_host_free(f.pinned), 1);
    free(f.src);
  }
}

/* Off, small, or refused: nothing is replaced. */
static void test_not_replaced(void **state) {
  (void)state;
  start(1, 1, 0); /* off */
  void *p = NULL;
  assert_int_equal(pw_fa_host_alloc(&sim_ops, &p, 8 * MiB, 0), -1);
  start(1, 1, 64 * MiB);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, &p, FA_MIN_BYTES - 1, 0), -1);
  sim_fail_host_alloc(1); /* the registration fails */
  assert_int_equal(pw_fa_host_alloc(&sim_ops, &p, 8 * MiB, 0), -1);
  sim_fail_host_alloc(0);
  assert_false(pw_fa_host_free(&p)); /* not pinwheel's */
  sim_reset(2, 2);
  sim_fail_device_alloc(1); /* no scratch on a device not set up yet */
  sim_set_device(1);
  assert_int_equal(pw_fa_host_alloc(&sim_ops, &p, 8 * MiB, 0), -1);
  sim_fail_device_alloc(0);
  sim_set_device(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill_then_copy),
      cmocka_unit_test(test_write_after_fill),
      cmocka_unit_test(test_write_without_guard_is_caught),
      cmocka_unit_test(test_partial_page_from_pinned),
      cmocka_unit_test(test_revoked_by),
      cmocka_unit_test(test_capture_keeps_upload),
      cmocka_unit_test(test_scratch_reused),
      cmocka_unit_test(test_upload_fails),
      cmocka_unit_test(test_reset_and_exit),
      cmocka_unit_test(test_reset_while_filling),
      cmocka_unit_test(test_not_replaced),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  pw_fa_test_reset();
  return rc;
}
