/* test_analyzer.c — the analyzer's model and figures: interval arithmetic, every figure on a small
 * synthetic trace with hand-computed expectations (Kineto JSON and the same trace as an nsys
 * SQLite export, whose memory-kind numbering differs), the real torch.profiler fixtures' headline
 * figures, steps by --step-range in an nsys export, and arithmetic at the limits.  The outputs:
 * test_outputs.c; pinwheel's staged copies: test_staged.c; steps inferred: test_infer.c; the
 * what-if's host part: test_whatif.c. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <yajl/yajl_tree.h>

#include "an.h"
#include "helpers.h"
#include "an_synth.h"

/* ---- intervals ---- */

static void test_intervals(void **state) {
  an_iv v[] = {{50, 60}, {0, 10}, {5, 8}, {10, 20}, {30, 30}, {25, 40}, {35, 45}};
  size_t n = an_union(v, 7); /* nested, touching, zero-length, overlapping, unsorted */
  assert_int_equal(n, 3);
  assert_true(v[0].s == 0 && v[0].e == 20);
  assert_true(v[1].s == 25 && v[1].e == 45);
  assert_true(v[2].s == 50 && v[2].e == 60);
  assert_int_equal(an_total(v, n), 50);
  an_iv k[] = {{15, 30}, {40, 55}};
  assert_int_equal(an_intersect(v, n, k, 2), 5 + 5 + 5 + 5);
  assert_int_equal(an_cover(v, n, 18, 52), 2 + 20 + 2);
  assert_int_equal(an_cover(v, n, 60, 70), 0);
  /* huge timestamps (ns since the epoch) keep their ns */
  an_iv big[] = {{1790857026000000001LL, 1790857026000000501LL},
                 {1790857026000000500LL, 1790857026000000900LL}};
  assert_int_equal(an_union(big, 2), 1);
  assert_int_equal(an_total(big, 1), 899);
}

static void test_us_to_ns(void **state) {
  int64_t v;
  assert_int_equal(an_us_to_ns("5169126442813.341", 17, &v), 0);
  assert_true(v == 5169126442813341LL);
  assert_int_equal(an_us_to_ns("12", 2, &v), 0);
  assert_true(v == 12000);
  assert_int_equal(an_us_to_ns("0.0005", 6, &v), 0); /* below a ns: truncated */
  assert_true(v == 0);
  assert_int_equal(an_us_to_ns("-3.5", 4, &v), 0);
  assert_true(v == -3500);
  assert_int_equal(an_us_to_ns("1e5", 3, &v), -1);
  assert_int_equal(an_us_to_ns("99999999999999999999", 20, &v), -1);
  assert_int_equal(an_us_to_ns("", 0, &v), -1);
  assert_int_equal(an_us_to_ns(".", 1, &v), -1);
}

static void test_kineto_figures(void **state) {
  check_figures(write_kineto("k", 0, NULL));
}
static void test_kineto_unsorted_same(void **state) {
  check_figures(write_kineto("rev", 1, NULL));
}
static void test_nsys_figures(void **state) {
  check_figures(write_nsys());
}

/* The timeline pass: the H2D copy [50,200) us under kernels [0,100) and [150,300) is drawn
 * hidden, exposed for [100,150), hidden again; the D2H after it; each of the two steps gets a
 * timeline of its own. */
static void test_timeline(void **state) {
  char err[512];
  an_trace *t = an_load(write_kineto("tl", 0, NULL), NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  an_options draw = {.timelines = 1};
  an_report *r = an_analyze(t, -1, &draw);
  assert_int_equal(r->ntimelines, 3);
  assert_int_equal(r->timelines[1].step, 0);
  assert_int_equal(r->timelines[2].step, 1);
  const an_timeline *tl = &r->timelines[0];
  assert_int_equal(tl->w1 - tl->w0, 450 * US);
  assert_int_equal(tl->nlanes, 2);
  const an_tl_lane *copies = &tl->lanes[1];
  assert_int_equal(copies->stream, 9);
  static const int want[] = {AN_TL_H2D_HIDDEN, AN_TL_H2D_EXPOSED, AN_TL_H2D_HIDDEN, AN_TL_D2H};
  assert_int_equal(copies->nruns, 4);
  for (int k = 0; k < 4; k++)
    assert_int_equal(copies->runs[k].cls, want[k]);
  const an_tl_run *x = &copies->runs[1];
  double col = 450.0 * US / AN_TL_COLS;
  assert_true(llabs(x->ns - 50 * US) <= 2 * col); /* [100,150): 50 us exposed */
  assert_true(llabs((int64_t)(x->c0 * col) - 100 * US) <= 2 * col);
  assert_int_equal(t->ops[copies->runs[1].top].ckind, AN_CK_H2D); /* named by the copy */
  an_report_free(r);
  an_free(t);
}

static void test_gzip_same(void **state) {
  char *p = write_kineto("gz", 0, NULL), cmd[400];
  snprintf(cmd, sizeof cmd, "gzip -kf %s", p);
  assert_int_equal(system(cmd), 0);
  char gz[200];
  snprintf(gz, sizeof gz, "%s.gz", p);
  check_figures(gz);
}

/* ---- the real fixtures (torch.profiler on an H200, see tests/gpu/make_traces.py) ---- */

static void test_real_fixtures(void **state) {
  char err[512];
  an_trace *t = an_load(PW_FIXTURES "/kineto_naive.json.gz", NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  an_report *r = an_analyze(t, -1, NULL);
  assert_int_equal(r->ndevs, 1);
  assert_int_equal(r->devs[0].h2d.copies, 6); /* 3 steps x (images + labels) */
  assert_int_equal(r->devs[0].h2d.bytes, 28902912);
  assert_int_equal(r->devs[0].h2d.hidden, 0);
  assert_int_equal(r->devs[0].pg_copies, 6);
  assert_int_equal(r->nsteps, 3);
  assert_int_equal(r->devs[0].kernels, 1017);
  an_report_free(r);
  an_free(t);
  t = an_load(PW_FIXTURES "/kineto_prefetch.json.gz", NULL, err, sizeof err);
  r = an_analyze(t, -1, NULL);
  assert_int_equal(r->devs[0].pg_copies, 0); /* pinned + non_blocking */
  assert_int_equal(r->devs[0].h2d.copies, 6);
  an_report_free(r);
  an_free(t);
}

/* Steps chosen by --step-range in an nsys export: NVTX ranges by regular expression. */
static void test_nsys_step_range(void **state) {
  char *p = write_nsys();
  sqlite3 *h;
  sqlite3_open(p, &h);
  sqlite3_exec(h, "UPDATE NVTX_EVENTS SET text = 'train iter ' || rowid", NULL, NULL, NULL);
  sqlite3_close(h);
  char err[512];
  an_trace *t = an_load(p, NULL, err, sizeof err);
  assert_non_null(t);
  assert_int_equal(t->nsteps, 0); /* not ProfilerStep#: no steps by default */
  an_free(t);
  assert_int_equal(an_step_regex_check("^train iter [0-9]+$", err, sizeof err), 0);
  an_options opt = {.step_regex = "^train iter [0-9]+$"};
  t = an_load(p, &opt, err, sizeof err);
  assert_int_equal(t->nsteps, 2);
  assert_int_equal(t->steps[0].num, 0); /* no '#': numbered by position */
  an_report *r = an_analyze(t, -1, NULL);
  assert_true(r->steps[0].devs[0].gpu == 300 * US && r->steps[1].devs[0].gpu == 150 * US);
  an_report_free(r);
  an_free(t);
}

/* Regressions found by the fuzzer: a trace with no GPU operation drawn as SVG (an overflow of
 * the empty window), and time arithmetic at the limits of what a trace may hold. */
static void test_extremes_no_overflow(void **state) {
  FILE *null = fopen("/dev/null", "w");
  an_out o = {.f = null};
  char *p = write_bytes("empty-gpu", "{\"traceEvents\":[{\"ph\":\"X\",\"r\":9}]}", 34);
  char err[512];
  an_trace *t = an_load(p, NULL, err, sizeof err);
  assert_non_null(t);
  an_options draw = {.timelines = 1};
  an_report *r = an_analyze(t, -1, &draw);
  an_write_svg(&o, r, &r->timelines[0], 1);
  an_write_text(&o, &r, 1);
  an_report_free(r);
  an_free(t);
  /* the widest trace allowed: -2^61 .. 2^61 + 2^45 ns, with ranks, buckets, what-if */
  const char *wide = "{\"traceEvents\":["
                     "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,\"ts\":-"
                     "2305843009213693.952,\"dur\":35184372088.832},"
                     "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> "
                     "Device)\",\"pid\":0,\"tid\":2,"
                     "\"ts\":2305843009213693.952,\"dur\":35184372088.832,\"args\":{\"bytes\":"
                     "9223372036854775807,\"correlation\":1}},"
                     "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpy\",\"pid\":1,"
                     "\"tid\":1,\"ts\":2305843009213693.952,"
                     "\"dur\":35184372088.832,\"args\":{\"correlation\":1}}]}";
  p = write_bytes("wide", wide, strlen(wide));
  t = an_load(p, NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  an_threshold_set("d2d_gbps=0.000001");
  an_threshold_set("eligible_min_kib=0");
  r = an_analyze(t, -1, &draw);
  assert_true(r->devs[0].span > (1LL << 62));
  an_report *two[2] = {r, r};
  an_write_text(&o, two, 2);
  an_write_json(&o, two, 2);
  an_write_html(&o, &r, 1);
  an_write_svg(&o, r, &r->timelines[0], 1);
  an_write_chrome(null, t);
  an_threshold_set("d2d_gbps=2000");
  an_threshold_set("eligible_min_kib=64");
  an_report_free(r);
  an_free(t);
  /* one step past the limits is refused, with a message */
  const char *past =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,"
      "\"ts\":2305843009213694,\"dur\":1}]}";
  expect_error(write_bytes("past", past, strlen(past)), "out of range");
  fclose(null);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intervals),       cmocka_unit_test(test_us_to_ns),
      cmocka_unit_test(test_kineto_figures),  cmocka_unit_test(test_kineto_unsorted_same),
      cmocka_unit_test(test_nsys_figures),    cmocka_unit_test(test_gzip_same),
      cmocka_unit_test(test_timeline),        cmocka_unit_test(test_real_fixtures),
      cmocka_unit_test(test_nsys_step_range), cmocka_unit_test(test_extremes_no_overflow),
  };
  return an_test_cleanup(cmocka_run_group_tests(tests, NULL, NULL));
}
