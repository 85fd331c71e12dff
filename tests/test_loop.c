/* test_loop.c — the loop finder both halves share (common/pw_loop.h), on synthetic op sequences,
 * through both of its drivers: the whole sequence (pw_loop_find, as the report feeds it) and op
 * by op (pw_loop_live_op, as the collector feeds it).  A clean loop (the input copy is the
 * anchor, though a kernel comes first), a loop whose first iteration differs (cuBLAS's first
 * choice), autocast-like repetition inside an iteration (three casts in a row), and irregular
 * programs that hold no loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pw_loop.h"

#define MS 1000000LL

static const pw_loop_params P = {50, 80, 3}; /* the report's defaults */

typedef struct seq {
  pw_loop_op op[4096];
  size_t n;
} seq;

static void add(seq *q, uint64_t sig, int64_t t, int h2d) {
  q->op[q->n++] = (pw_loop_op){1, sig, t, MS / 2, (uint8_t)h2d, 0};
}

/* What the op-by-op driver made of a sequence: its events, in order. */
typedef struct live_log {
  int taken, dropped, iters;         /* how many of each */
  size_t first_iter_at;              /* the op that began the first iteration */
  uint64_t first_iter, last_iter;    /* their numbers */
  pw_loop_cand anchor, first_anchor; /* the last and first anchors taken */
  uint64_t dropped_period;
} live_log;

static live_log live(const seq *q) {
  pw_loop_live L;
  pw_loop_live_init(&L, 1000);
  live_log g;
  memset(&g, 0, sizeof g);
  for (size_t i = 0; i < q->n; i++) {
    pw_loop_ev ev;
    int fl =
        pw_loop_live_op(&L, (void *)(uintptr_t)q->op[i].stream, q->op[i].sig, q->op[i].h2d, &ev);
    if (fl & PW_LOOP_DROPPED) g.dropped++, g.dropped_period = ev.was.period;
    if (fl & PW_LOOP_TAKEN) {
      if (!g.taken++) g.first_anchor = ev.anchor;
      g.anchor = ev.anchor;
    }
    if (fl & PW_LOOP_ITER) {
      if (!g.iters++) g.first_iter_at = i, g.first_iter = ev.iter;
      assert_true(g.iters == 1 || ev.iter == g.last_iter + 1); /* one iteration after another */
      g.last_iter = ev.iter;
    }
  }
  pw_loop_live_free(&L);
  return g;
}

/* Start-up (5 kernels of their own), then 10 iterations of 10 ms: a kernel, the input copy, two
 * kernels.  The anchor is the copy (an input copy is preferred over the earlier kernel of the
 * same period); 10 occurrences, 9 full iterations (the last one's 2 ops after the copy are too
 * short a prefix of an iteration to count as one). */
static void test_clean_loop(void **state) {
  (void)state;
  static seq q;
  q.n = 0;
  for (int i = 0; i < 5; i++)
    add(&q, 100 + i, i * MS, 0);
  for (int it = 0; it < 10; it++) {
    int64_t s = 10 * MS + it * 10 * MS;
    add(&q, 1, s, 0);
    add(&q, 2, s + MS, 1);
    add(&q, 3, s + 2 * MS, 0);
    add(&q, 4, s + 3 * MS, 0);
  }
  pw_loop_found f;
  assert_int_equal(pw_loop_find(q.op, q.n, &P, &f), 1);
  assert_int_equal(f.h2d, 1);
  assert_int_equal(f.gram, 1);
  assert_int_equal(f.nocc, 10);
  assert_int_equal(f.tail, 0);
  assert_true(f.period == 10 * MS);
  for (uint32_t k = 0; k < f.nocc; k++)
    assert_int_equal(f.occ[k], 6 + 4 * k); /* each input copy */
  free(f.occ);
  /* op by op: the copy recognised at its third occurrence, iteration 3, then every one after */
  live_log g = live(&q);
  assert_int_equal(g.taken, 1);
  assert_int_equal(g.first_anchor.h2d, 1);
  assert_int_equal(g.first_anchor.period, 4);
  assert_int_equal(g.first_iter_at, 6 + 4 * 2);
  assert_int_equal(g.first_iter, 3);
  assert_int_equal(g.last_iter, 10);
  assert_int_equal(g.dropped, 0);
}

/* The first iteration runs other kernels (cuBLAS's first choice) in its place: the whole
 * sequence still finds every iteration (8 of 9 periods repeat one sequence: >= 80 %); op by op,
 * the first iteration's sequence differs from the second's, so the loop is recognised one
 * iteration later (4). */
static void test_first_iteration_differs(void **state) {
  (void)state;
  static seq q;
  q.n = 0;
  for (int it = 0; it < 10; it++) {
    int64_t s = it * 10 * MS;
    add(&q, 2, s, 1);
    add(&q, it ? 3 : 33, s + 1 * MS, 0);
    add(&q, it ? 4 : 44, s + 2 * MS, 0);
    add(&q, 5, s + 3 * MS, 0);
  }
  pw_loop_found f;
  assert_int_equal(pw_loop_find(q.op, q.n, &P, &f), 1);
  assert_int_equal(f.h2d, 1);
  assert_int_equal(f.nocc, 10);
  assert_int_equal(f.occ[0], 0);
  assert_int_equal(f.tail, 4); /* the last iteration, whole after its copy */
  assert_true(f.period == 10 * MS);
  free(f.occ);
  live_log g = live(&q);
  assert_int_equal(g.taken, 1);
  assert_int_equal(g.first_anchor.h2d, 1);
  assert_int_equal(g.first_iter, 4);
  assert_int_equal(g.first_iter_at, 12);
  assert_int_equal(g.last_iter, 10);
}

/* No input copy; each iteration casts three tensors in a row (autocast: one kernel, one call
 * site) between its other kernels.  Three casts in a row look like a loop of period 1: op by op,
 * taken and then dropped at the next op; the loop is the iteration (period 6).  The whole
 * sequence never takes the cast (its periods are 1, 1, 8 ms: no steady run). */
static void test_autocast_repetition(void **state) {
  (void)state;
  static seq q;
  q.n = 0;
  for (int it = 0; it < 10; it++) {
    int64_t s = it * 10 * MS;
    add(&q, 0xa, s, 0);
    for (int c = 0; c < 3; c++)
      add(&q, 0xca57, s + (1 + c) * MS, 0);
    add(&q, 0xb, s + 4 * MS, 0);
    add(&q, 0xc, s + 5 * MS, 0);
  }
  live_log g = live(&q);
  assert_true(g.dropped >= 1); /* in each iteration until another anchor is taken */
  assert_int_equal(g.dropped_period, 1);
  assert_int_equal(g.first_anchor.sig, 0xca57); /* taken at first: no copy near it */
  assert_int_equal(g.anchor.sig, 0xa);
  assert_int_equal(g.anchor.period, 6);
  assert_int_equal(g.first_iter, 4); /* the kernel's 4th occurrence: a non-copy anchor's first */
  assert_int_equal(g.first_iter_at, 18);
  assert_int_equal(g.last_iter, 10);
  pw_loop_found f;
  assert_int_equal(pw_loop_find(q.op, q.n, &P, &f), 1);
  assert_int_equal(f.occ[0], 0); /* the iteration's first kernel, the earliest of period 10 ms */
  assert_true(f.period == 10 * MS);
  assert_int_equal(f.nocc, 10);
  free(f.occ);
}

/* Irregular programs.  Requests of the same 5 kernels after pauses of 0 to 40 ms: the same
 * sequence again and again, at no steady period, is no loop for the whole sequence (the op-by-op
 * driver counts ops, not time: for it, such requests are iterations).  Runs of one kernel (3 to
 * 5 in a row), kernels in ever other orders, copies of ever new sizes: neither driver finds a
 * loop (op by op, the first run, before any copy, is taken and dropped at the next op). */
static void test_irregular_no_loop(void **state) {
  (void)state;
  static seq q;
  q.n = 0;
  uint32_t x = 12345;
  int64_t s = 0;
  for (int r = 0; r < 200; r++) {
    for (int k = 0; k < 5; k++)
      add(&q, 10 + k, s + k * MS, 0);
    x = x * 1103515245u + 12345u;
    s += 5 * MS + (int64_t)((x >> 8) % 40000) * 1000;
  }
  pw_loop_found f;
  assert_int_equal(pw_loop_find(q.op, q.n, &P, &f), 0);
  q.n = 0;
  unsigned r = 7;
  s = 0;
  for (int n = 0; n < 600; n++) {
    r = r * 1103515245u + 12345u;
    int run = 3 + (int)(r >> 16) % 3;
    for (int k = 0; k < run; k++)
      add(&q, 0xaa00 + (r >> 20) % 8, s += MS, 0);
    add(&q, (uint64_t)(n + 1) << 3 | 1, s += MS, 1);
  }
  live_log g = live(&q);
  assert_int_equal(g.iters, 0);         /* no iteration ever begins */
  assert_int_equal(g.taken, g.dropped); /* the first run, before any copy: taken, dropped */
  assert_int_equal(pw_loop_find(q.op, q.n, &P, &f), 0);
}

/* The rule itself: two periods of one sequence (the collector's test), a sequence that differs,
 * a period off by more than the tolerance. */
static void test_judge(void **state) {
  (void)state;
  const pw_loop_params exact = {0, 100, 0};
  int64_t dt[6] = {4, 4}, scratch[12], per;
  uint64_t sq[6] = {77, 77};
  uint32_t lo, len;
  assert_int_equal(pw_loop_judge(dt, sq, 2, &exact, scratch, &lo, &len, &per), 1);
  assert_true(lo == 0 && len == 2 && per == 4);
  sq[1] = 78;
  assert_int_equal(pw_loop_judge(dt, sq, 2, &exact, scratch, &lo, &len, &per), 0);
  /* 100 100 100 300 100 100 (median 100, 50 %): the first three periods, 4 of 7 occurrences, are
   * a run; with a second period of 300, no run holds half of them */
  int64_t dt6[6] = {100, 100, 100, 300, 100, 100};
  uint64_t s6[6] = {1, 1, 1, 1, 1, 1};
  assert_int_equal(pw_loop_judge(dt6, s6, 6, &P, scratch, &lo, &len, &per), 1);
  assert_true(lo == 0 && len == 3 && per == 100);
  dt6[1] = 300;
  assert_int_equal(pw_loop_judge(dt6, s6, 6, &P, scratch, &lo, &len, &per), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_judge),
      cmocka_unit_test(test_clean_loop),
      cmocka_unit_test(test_first_iteration_differs),
      cmocka_unit_test(test_autocast_repetition),
      cmocka_unit_test(test_irregular_no_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
