/* test_copy.c — the staging copy routines and the worker pool, against memcpy.
 *
 * Every routine this CPU has (the portable one, SSE2 and AVX non-temporal stores) at every size
 * class from 1 byte to 64 MiB, with unaligned heads and tails on both sides, bytes compared and
 * the guard bytes around the destination checked; the pool's batches with many segments and
 * threads (parts that meet at unaligned thread boundaries), each segment checked the moment its
 * wait returns while later ones are still being copied; the workers' keep-awake window; the pool
 * after fork; the default thread count's parts. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <time.h>

#include <cmocka.h>

#include "engine.h"

static unsigned xs(unsigned *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  unsigned s = seed | 1;
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)xs(&s);
}

#define GUARD 64

/* Copy n bytes from src+soff to dst+doff with fn; the bytes must equal memcpy's, and the guard
 * bytes on both sides of the destination must be untouched. */
static void check_one(pw_memcpy_fn fn, const char *name, size_t n, size_t soff, size_t doff,
                      unsigned seed) {
  unsigned char *src = malloc(n + soff + GUARD), *dst = malloc(n + doff + 2 * GUARD);
  fill(src, n + soff + GUARD, seed);
  memset(dst, 0xA5, n + doff + 2 * GUARD);
  fn(dst + GUARD + doff, src + soff, n);
  if (memcmp(dst + GUARD + doff, src + soff, n))
    fail_msg("%s: %zu bytes, src+%zu, dst+%zu: bytes differ", name, n, soff, doff);
  for (size_t i = 0; i < GUARD + doff; i++)
    if (dst[i] != 0xA5) fail_msg("%s: %zu bytes: wrote before dst", name, n);
  for (size_t i = 0; i < GUARD; i++)
    if (dst[GUARD + doff + n + i] != 0xA5) fail_msg("%s: %zu bytes: wrote past the end", name, n);
  free(src);
  free(dst);
}

static void test_routines_every_size_and_alignment(void **state) {
  static const size_t sizes[] = {1,
                                 2,
                                 3,
                                 7,
                                 15,
                                 16,
                                 17,
                                 31,
                                 63,
                                 64,
                                 65,
                                 127,
                                 128,
                                 129,
                                 255,
                                 256,
                                 257,
                                 4095,
                                 4096,
                                 4097,
                                 8191,
                                 12345,
                                 65535,
                                 65536,
                                 65537,
                                 1 << 20,
                                 (1 << 20) + 3,
                                 (3 << 20) - 1,
                                 8 << 20,
                                 (8 << 20) + 77};
  static const size_t offs[] = {0, 1, 3, 8, 15, 16, 31, 32, 33, 63};
  int tested = 0;
  for (int which = PW_MEMCPY_PORTABLE; which <= PW_MEMCPY_NT_AVX; which++) {
    pw_memcpy_fn fn = pw_memcpy_impl(which);
    if (!fn) continue; /* not on this CPU */
    tested++;
    unsigned seed = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
      for (size_t a = 0; a < sizeof offs / sizeof *offs; a++)
        check_one(fn, pw_memcpy_name(which), sizes[i], offs[a], offs[(a * 7 + i) % 10], seed++);
    check_one(fn, pw_memcpy_name(which), 64u << 20, 5, 11, seed++);
  }
#if defined(__x86_64__)
  assert_true(tested >= 2); /* SSE2 is part of x86-64: the fast path must be there */
  assert_int_not_equal(pw_memcpy_best(), PW_MEMCPY_PORTABLE);
#else
  assert_int_equal(pw_memcpy_best(), PW_MEMCPY_PORTABLE);
#endif
  assert_non_null(pw_memcpy_impl(pw_memcpy_best()));
}

/* A batch of many segments of random sizes (some below the parallel threshold, copied by the
 * caller) with 4 threads; each segment is compared the moment its wait returns. */
static void batch_round(int threads, int flags, unsigned seed, int segments) {
  size_t total = 0, sz[64], off[64];
  unsigned s = seed;
  for (int i = 0; i < segments; i++) {
    sz[i] = 1 + xs(&s) % (3u << 20);
    off[i] = total + xs(&s) % 61; /* parts meet at unaligned boundaries */
    total = off[i] + sz[i];
  }
  unsigned char *src = malloc(total), *dst = malloc(total);
  fill(src, total, seed);
  memset(dst, 0, total);
  pw_batch b;
  pw_batch_begin(&b, threads, flags & PW_PART_STREAM);
  uint64_t ids[64];
  for (int i = 0; i < segments; i++) {
    ids[i] = pw_batch_push(&b, dst + off[i], src + off[i], sz[i], flags);
    if (i >= 3) { /* keep three in flight, check the oldest as soon as it is done */
      int k = i - 3;
      pw_batch_wait(&b, ids[k]);
      assert_true(pw_batch_done(&b, ids[k]));
      if (memcmp(dst + off[k], src + off[k], sz[k])) fail_msg("segment %d differs at its wait", k);
    }
  }
  pw_batch_end(&b);
  for (int k = 0; k < segments; k++)
    if (memcmp(dst + off[k], src + off[k], sz[k])) fail_msg("segment %d differs at the end", k);
  free(src);
  free(dst);
}

static void test_pool_batches(void **state) {
  for (unsigned seed = 1; seed <= 30; seed++)
    batch_round(1 + (int)(seed % 6), seed % 2 ? PW_PART_STREAM : 0, seed, 12 + (int)(seed % 40));
  pw_pool_memcpy(NULL, NULL, 0, 4, 0); /* nothing to copy: no crash */
}

/* Regression: small segments are copied by the caller at once; twenty of them after one large
 * segment once reused the large one's counter slot, and its wait returned before its bytes were
 * in. */
static void test_small_segments_after_a_large_one(void **state) {
  size_t big = 48u << 20, small = 4096;
  unsigned char *src = malloc(big + 20 * small), *dst = calloc(1, big + 20 * small);
  fill(src, big + 20 * small, 11);
  pw_batch b;
  pw_batch_begin(&b, 3, 0);
  uint64_t id = pw_batch_push(&b, dst, src, big, 0);
  for (int i = 0; i < 20; i++)
    pw_batch_push(&b, dst + big + (size_t)i * small, src + big + (size_t)i * small, small, 0);
  pw_batch_wait(&b, id);
  int ok = memcmp(dst, src, big) == 0;
  pw_batch_end(&b);
  assert_true(ok);
  assert_memory_equal(dst, src, big + 20 * small);
  free(src);
  free(dst);
}

/* Two threads submit at once, each with a lane of the pool; both right. */
static void *racer(void *arg) {
  for (unsigned r = 0; r < 6; r++)
    batch_round(4, PW_PART_STREAM, (unsigned)(uintptr_t)arg + r, 10);
  return NULL;
}

static void test_pool_two_submitters(void **state) {
  pthread_t a, b;
  pthread_create(&a, NULL, racer, (void *)(uintptr_t)100);
  pthread_create(&b, NULL, racer, (void *)(uintptr_t)200);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
}

/* Batches side by side each get a lane of the pool, and a batch holds one only while it has
 * segments not waited for: one that waited for everything it pushed (as a copy does before it
 * waits for the GPU) keeps nobody out.  With every lane taken, a batch copies alone (counted),
 * and its bytes are right as well. */
static void test_pool_lanes(void **state) {
  enum { OPEN = 8, N = 4u << 20 };
  unsigned char *src = malloc((size_t)(OPEN + 2) * N), *dst = calloc(OPEN + 2, N);
  fill(src, (size_t)(OPEN + 2) * N, 5);
  batch_round(4, 0, 1, 4); /* workers started */
  uint64_t busy = pw_get(&pw_st.pool_busy);
  pw_batch idle;
  pw_batch_begin(&idle, 4, 0);
  pw_batch_wait(&idle, pw_batch_push(&idle, dst, src, N, 0));
  assert_null(idle.lane); /* everything waited for: no lane held while it waits elsewhere */
  pw_batch open[OPEN];
  for (int k = 0; k < OPEN; k++) {
    pw_batch_begin(&open[k], 4, 0);
    pw_batch_push(&open[k], dst + (size_t)(k + 1) * N, src + (size_t)(k + 1) * N, N, 0);
    assert_non_null(open[k].lane);
  }
  assert_int_equal(pw_get(&pw_st.pool_busy), busy);
  pw_batch alone;
  pw_batch_begin(&alone, 4, 0);
  size_t at = (size_t)(OPEN + 1) * N;
  pw_batch_wait(&alone, pw_batch_push(&alone, dst + at, src + at, N, 0));
  pw_batch_end(&alone);
  assert_null(alone.lane);
  assert_int_equal(pw_get(&pw_st.pool_busy), busy + 1);
  for (int k = 0; k < OPEN; k++)
    pw_batch_end(&open[k]);
  pw_batch_end(&idle);
  assert_memory_equal(dst, src, (size_t)(OPEN + 2) * N);
  free(src);
  free(dst);
}

/* The workers' sleep: after their 200 us of spinning, unless a keep-awake reaches past now; a
 * keep-awake is capped at 2 ms, a later and shorter one never shortens it, and a window far ahead
 * of the clock (which went back) is over.  Each window is placed between clock reads taken just
 * before and just after the call, so no delay of this thread can fail the test. */
static void test_keep_awake_window(void **state) {
  struct timespec ms3 = {0, 3000000};
  nanosleep(&ms3, NULL); /* any earlier keep-awake is over */
  uint64_t t = pw_now_ns();
  assert_false(pw_pool_may_sleep(t, t - 100000)); /* still spinning */
  assert_true(pw_pool_may_sleep(t, t - 300000));  /* spun enough, nothing asked */
  uint64_t before = pw_now_ns();
  pw_pool_keep_awake(1000000);
  uint64_t after = pw_now_ns();
  assert_false(pw_pool_may_sleep(before + 900000, 0));
  assert_true(pw_pool_may_sleep(after + 1000000, 0));
  before = pw_now_ns();
  pw_pool_keep_awake(50000000); /* capped */
  after = pw_now_ns();
  assert_false(pw_pool_may_sleep(before + 1900000, 0));
  assert_true(pw_pool_may_sleep(after + 2000000, 0));
  pw_pool_keep_awake(10);
  assert_false(pw_pool_may_sleep(before + 1900000, 0));
  assert_true(pw_pool_may_sleep(before - 3000000, 0)); /* the clock went back 5 ms */
}

/* One batch the workers help with, inside a keep-awake window of 2 ms or none: 1 when a worker
 * went to sleep in the millisecond after it (without a window: from its start until 200 ms after
 * it, since on a loaded machine a worker may not run at all for a while), 0 when none did, -1 when
 * the attempt tells nothing (this thread was held up until the window was nearly over). */
static int worker_slept(int window, unsigned char *dst, const unsigned char *src, size_t n) {
  uint64_t t0 = pw_now_ns();
  /* without a window, sleeps are counted from before the batch: on a loaded machine a worker
   * woken for it may run, find the batch done and sleep again before this thread reads the count
   * after it (3 of 7 attempts missed so, with another build beside the test on two CPUs) */
  unsigned long s0 = pw_pool_sleeps();
  if (window) pw_pool_keep_awake(2000000);
  unsigned long asked = pw_pool_awake_asked(NULL);
  pw_batch b;
  pw_batch_begin(&b, 3, 0);
  pw_batch_wait(&b, pw_batch_push(&b, dst, src, n, 0));
  pw_batch_end(&b);
  assert_int_equal(pw_pool_awake_asked(NULL), asked); /* a plain batch asks for no window */
  if (window) s0 = pw_pool_sleeps();
  uint64_t t1 = pw_now_ns();
  struct timespec us50 = {0, 50000};
  while (pw_now_ns() < t1 + (window ? 1000000 : 200000000) && (window || pw_pool_sleeps() == s0))
    nanosleep(&us50, NULL);
  unsigned long s1 = pw_pool_sleeps();
  if (window && pw_now_ns() > t0 + 1800000) return -1;
  return s1 > s0;
}

/* The workers themselves: inside a keep-awake window none goes to sleep after a batch; without
 * one they do, 200 us after their last part.  Attempts a delayed thread spoils are not counted
 * (on two CPUs with two busy loops beside the test, 39 of 40 were spoiled once): attempts for
 * up to 5 s, until 7 count; the majority of those that count decides. */
static void test_workers_stay_awake(void **state) {
  size_t n = 2u << 20;
  unsigned char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 21);
  batch_round(3, 0, 2, 4); /* the workers exist */
  for (int window = 0; window <= 1; window++) {
    int counted = 0, slept = 0;
    for (uint64_t give_up = pw_now_ns() + 5000000000ull; counted < 7 && pw_now_ns() < give_up;) {
      struct timespec ms3 = {0, 3000000};
      nanosleep(&ms3, NULL); /* the previous window is over */
      int r = worker_slept(window, dst, src, n);
      if (r < 0) continue;
      counted++, slept += r;
    }
    if (counted < 3) fail_msg("window %d: only %d attempts counted", window, counted);
    if (window ? slept * 2 >= counted : slept * 2 <= counted)
      fail_msg("window %d: a worker slept in %d of %d attempts", window, slept, counted);
  }
  assert_memory_equal(dst, src, n);
  free(src);
  free(dst);
}

/* Prefaulting an untouched mapping: the bytes land, and the mapping was untouched before. */
static void test_prefault_fresh_destination(void **state) {
  size_t n = 8u << 20;
  unsigned char *src = malloc(n);
  fill(src, n, 7);
  unsigned char *dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(dst != MAP_FAILED);
  assert_true(pw_untouched(dst));
  pw_batch b;
  pw_batch_begin(&b, 4, 0);
  uint64_t id = pw_batch_push(&b, dst + 1, src, n - 1, PW_PART_PREFAULT);
  pw_batch_wait(&b, id);
  pw_batch_end(&b);
  assert_false(pw_untouched(dst));
  assert_memory_equal(dst + 1, src, n - 1);
  /* huge-page advice only for untouched memory: touched memory is left alone */
  assert_int_equal(pw_advise_fresh(dst, n), 0);
  munmap(dst, n);
  unsigned char *f =
      mmap(NULL, 8u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(f != MAP_FAILED);
  (void)pw_advise_fresh(f, 8u << 20); /* 1 where the kernel has THP, 0 where not; never harmful */
  memcpy(f, src, 8u << 20);
  assert_memory_equal(f, src, 8u << 20);
  munmap(f, 8u << 20);
  free(src);
}

/* A MAP part maps dst's pages and copies nothing (src is not read); the caller can take parts
 * of a segment itself with pw_batch_help, never parts of a later segment. */
static void test_map_parts_and_help(void **state) {
  size_t n = (13u << 20) + 4096 * 3;
  unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  m[0] = 9; /* touched before: must stay */
  unsigned char *src = malloc(1 << 20);
  fill(src, 1 << 20, 3);
  pw_batch b;
  pw_batch_begin(&b, 4, 0);
  uint64_t map = pw_batch_push(&b, m, NULL, n, PW_PART_MAP);
  uint64_t cp = pw_batch_push(&b, m + 4096, src, 1 << 20, 0);
  int helped = 0;
  while (pw_batch_help(&b, map))
    helped++;
  pw_batch_wait(&b, map);
  assert_true(pw_batch_done(&b, map));
  pw_batch_wait(&b, cp);
  pw_batch_end(&b);
  assert_int_equal(pw_batch_help(&b, map), 0); /* ended: nothing to take */
  assert_int_equal(m[0], 9);
  assert_memory_equal(m + 4096, src, 1 << 20);
  /* mapped (where the kernel maps on MADV_POPULATE_WRITE: not under qemu-user) before read */
  unsigned char *probe =
      mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pw_prefault(probe, 8192);
  if (!pw_untouched(probe))
    for (size_t off = (2u << 20); off < n; off += 4096)
      assert_false(pw_untouched(m + off));
  munmap(probe, 8192);
  for (size_t off = (2u << 20); off < n; off += 4096)
    assert_int_equal(m[off], 0);
  print_message("map: the caller took %d parts\n", helped);
  munmap(m, n);
  free(src);
}

/* Bug: the fresh-destination test looked at the first page, which glibc's header makes resident
 * in every new mapping, so populate/hugepages never applied to a `.cpu()` output. */
static void test_fresh_dest_ignores_header_page(void **state) {
  size_t n = 8u << 20;
  unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  assert_true(pw_fresh_dest(m + 64, n - 64));
  memset(m, 1, 64); /* what malloc does: the chunk header, just before the pointer */
  assert_false(pw_untouched(m + 64));
  assert_true(pw_fresh_dest(m + 64, n - 64));
  m[n / 2] = 1; /* a written middle: not fresh */
  assert_false(pw_fresh_dest(m + 64, n - 64));
  assert_false(pw_fresh_dest(m, 8192)); /* too small to tell */
  munmap(m, n);
}

/* The workers do not survive fork: the child must copy right with a rebuilt pool. */
static void test_fork_while_workers_exist(void **state) {
  /* qemu-user aborts in its own code when a multithreaded guest forks */
  if (getenv("PW_TEST_UNDER_QEMU")) skip();
  batch_round(4, PW_PART_STREAM, 3, 20); /* workers started */
  assert_true(pw_pool_workers() > 0);
  pid_t pid = fork();
  if (pid == 0) {
    pw_pool_after_fork_child(); /* what the shim's atfork handler does */
    int bad = 0;
    for (unsigned r = 0; r < 4; r++) {
      size_t n = 5u << 20;
      unsigned char *a = malloc(n), *b = malloc(n);
      fill(a, n, r + 1);
      pw_pool_memcpy(b, a, n, 4, r % 2);
      bad |= memcmp(a, b, n) != 0;
      free(a);
      free(b);
    }
    _exit(bad ? 3 : pw_pool_workers() > 0 ? 0 : 4);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  batch_round(4, 0, 9, 20); /* the parent's pool still works */
}

static void test_cpu_max_parsing(void **state) {
  assert_int_equal(pw_parse_cpu_max("max 100000\n"), 0);
  assert_int_equal(pw_parse_cpu_max("200000 100000\n"), 2);
  assert_int_equal(pw_parse_cpu_max("150000 100000"), 2); /* 1.5 CPUs: rounded up */
  assert_int_equal(pw_parse_cpu_max("50000 100000"), 1);
  assert_int_equal(pw_parse_cpu_max("-1 100000"), 0); /* cgroup v1: no quota */
  assert_int_equal(pw_parse_cpu_max("100000 0"), 0);
  assert_int_equal(pw_parse_cpu_max("lots 100000"), 0);
  assert_int_equal(pw_parse_cpu_max(""), 0);
  assert_int_equal(pw_parse_cpu_max(NULL), 0);
}

/* The default follows the affinity mask and LOCAL_WORLD_SIZE (the launcher-level checks under
 * `taskset` are in test_interpose). */
static void test_default_threads(void **state) {
  cpu_set_t old, one;
  assert_int_equal(sched_getaffinity(0, sizeof old, &old), 0);
  unsetenv("LOCAL_WORLD_SIZE");
  int all = pw_default_threads();
  assert_true(all >= 1 && all <= PW_THREADS_DEFAULT_MAX);
  assert_true(all <= CPU_COUNT(&old));
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &old)) {
      CPU_SET(c, &one);
      break;
    }
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  assert_int_equal(pw_default_threads(), 1);
  assert_int_equal(sched_setaffinity(0, sizeof old, &old), 0);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  if (all < PW_THREADS_DEFAULT_MAX)
    assert_int_equal(pw_default_threads(), all / 2 > 0 ? all / 2 : 1);
  else
    assert_true(pw_default_threads() >= PW_THREADS_DEFAULT_MAX / 2);
  setenv("LOCAL_WORLD_SIZE", "1000", 1);
  assert_int_equal(pw_default_threads(), 1);
  setenv("LOCAL_WORLD_SIZE", "nonsense", 1);
  assert_int_equal(pw_default_threads(), all);
  unsetenv("LOCAL_WORLD_SIZE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routines_every_size_and_alignment),
      cmocka_unit_test(test_pool_batches),
      cmocka_unit_test(test_small_segments_after_a_large_one),
      cmocka_unit_test(test_pool_two_submitters),
      cmocka_unit_test(test_pool_lanes),
      cmocka_unit_test(test_keep_awake_window),
      cmocka_unit_test(test_workers_stay_awake),
      cmocka_unit_test(test_prefault_fresh_destination),
      cmocka_unit_test(test_fresh_dest_ignores_header_page),
      cmocka_unit_test(test_map_parts_and_help),
      cmocka_unit_test(test_fork_while_workers_exist),
      cmocka_unit_test(test_cpu_max_parsing),
      cmocka_unit_test(test_default_threads),
  };
  /* PW_TEST_SKIP=PATTERN leaves out the tests whose names match (the ThreadSanitizer tree skips
   * the single-threaded sweep of every size, which ASan and UBSan cover) */
  if (getenv("PW_TEST_SKIP")) cmocka_set_skip_filter(getenv("PW_TEST_SKIP"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
