/* test_infer.c — steps found without annotations (report/passes/an_infer.c), on synthetic
 * traces written as torch.profiler writes them: a loop after a start-up, requests separated by
 * pauses (no loop: a gap-based finder would cut them into hundreds of steps), a single iteration,
 * two loops interleaved on two streams, and a loop whose layers repeat inside each iteration.
 * The real traces with their step ranges removed are checked by test_report_real.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "an.h"
#include "helpers.h"

#define MS 1000000LL

typedef struct gen {
  FILE *f;
  char path[128];
  int corr, n;
} gen;

static void gen_open(gen *g, const char *name) {
  snprintf(g->path, sizeof g->path, "/tmp/pwinfer-%s-%d.json", name, (int)getpid());
  g->f = fopen(g->path, "w");
  g->corr = 1, g->n = 0;
  fprintf(g->f, "{\"schemaVersion\":1,\"traceEvents\":[\n");
}

static void ev(gen *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(g->n++ ? ",\n" : "", g->f);
  vfprintf(g->f, fmt, ap);
  va_end(ap);
}

/* One GPU operation at [s, s + d) ns, launched by host thread tid 5 us before it starts. */
static void op(gen *g, const char *cat, const char *name, int stream, int tid, int64_t s, int64_t d,
               uint64_t bytes) {
  int c = g->corr++;
  ev(g,
     "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
     "\"args\":{\"device\":0,\"stream\":%d,\"correlation\":%d,\"bytes\":%llu}}",
     cat, name, stream, (double)s / 1e3, (double)d / 1e3, stream, c, (unsigned long long)bytes);
  ev(g,
     "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,"
     "\"dur\":2,\"args\":{\"correlation\":%d}}",
     strcmp(cat, "kernel") ? "cudaMemcpyAsync" : "cudaLaunchKernel", tid, (double)(s - 5000) / 1e3,
     c);
}

static void kern(gen *g, const char *name, int stream, int tid, int64_t s, int64_t d) {
  op(g, "kernel", name, stream, tid, s, d, 0);
}

static an_report *gen_close(gen *g, an_trace **t) {
  fprintf(g->f, "\n]}\n");
  fclose(g->f);
  char err[512];
  *t = an_load(g->path, NULL, err, sizeof err);
  if (!*t) fail_msg("%s", err);
  return an_analyze(*t, -1, NULL);
}

static void done(gen *g, an_trace *t, an_report *r) {
  an_report_free(r);
  an_free(t);
  unlink(g->path);
}

static const char *KN[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};

/* Start-up (other kernels over 50 ms), 24 iterations of 10 ms (an input copy, 10 kernels), a
 * teardown copy: 24 steps of 10 ms, the start-up and teardown left out of the figures. */
static void test_loop_after_startup(void **state) {
  gen g;
  gen_open(&g, "loop");
  for (int i = 0; i < 5; i++)
    kern(&g, i % 2 ? "init_a" : "init_b", 7, 1, i * 10 * MS, 2 * MS);
  int64_t t0 = 60 * MS;
  for (int it = 0; it < 24; it++) {
    int64_t s = t0 + it * 10 * MS;
    op(&g, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 7, 1, s, 1 * MS, 1 << 20);
    for (int k = 0; k < 10; k++)
      kern(&g, KN[k], 7, 1, s + 1 * MS + k * 800000, 700000);
  }
  op(&g, "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 7, 1, t0 + 245 * MS, 1 * MS, 4096);
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_INFERRED);
  assert_int_equal(r->nsteps, 24);
  assert_true(r->iperiod == 10 * MS);
  assert_int_equal(r->step_kernels, 10);
  /* each step from the end of the previous one's last kernel to its own: 10 ms (the first:
   * from its own first operation, the copy, to its last kernel: 9 ms) */
  assert_true(r->stepsum[0].step_med == 10 * MS);
  assert_true(r->steps[0].devs[0].gpu == 1 * MS + 9 * 800000 + 700000);
  /* the steady state: from the first iteration's copy to the last one's last kernel */
  assert_true(r->steady && r->steady0 == t0 && r->startup == t0);
  assert_true(r->teardown == 245 * MS + 1 * MS - (23 * 10 * MS + 1 * MS + 9 * 800000 + 700000));
  assert_true(r->devs[0].span == r->steady1 - r->steady0);
  assert_int_equal(r->devs[0].kernels, 240); /* the start-up's 5 are not counted */
  /* --step N names an inferred step; a number past them says which there are */
  const char *one[] = {PW_CLI, "report", "--step", "24", g.path, NULL};
  result res = run(one, NULL);
  assert_int_equal(res.status, 0);
  assert_non_null(strstr(res.out, ", step 24 only\n"));
  assert_non_null(strstr(res.out, "device 0: 1 step, GPU step median 10.000 ms"));
  free_result(&res);
  const char *past[] = {PW_CLI, "report", "--step", "25", g.path, NULL};
  res = run(past, NULL);
  assert_int_equal(res.status, 2);
  assert_non_null(strstr(res.err, "no step 25 in this trace (it has steps 1 to 24, inferred from "
                                  "its repeating GPU work)\n"));
  free_result(&res);
  done(&g, t, r);
}

/* 200 inference requests of 5 kernels, each after a pause of 0 to 40 ms: no loop.  Every
 * request repeats the same kernels, but at no steady period. */
static void test_pauses_are_no_steps(void **state) {
  gen g;
  gen_open(&g, "pauses");
  uint32_t x = 12345;
  int64_t s = 0;
  for (int q = 0; q < 200; q++) {
    for (int k = 0; k < 5; k++)
      kern(&g, KN[k], 7, 1, s + k * MS, MS - 100000);
    x = x * 1103515245u + 12345u;
    s += 5 * MS + (int64_t)((x >> 8) % 40000) * 1000;
  }
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_NONE);
  assert_int_equal(r->nsteps, 0);
  assert_false(r->steady);
  assert_int_equal(r->devs[0].kernels, 1000); /* whole-trace figures */
  const char *argv[] = {PW_CLI, "report", g.path, NULL};
  result res = run(argv, NULL);
  assert_int_equal(res.status, 0);
  assert_non_null(strstr(res.out, "\nno repeating steps found: figures over the whole trace\n"));
  free_result(&res);
  done(&g, t, r);
}

/* One iteration between a start-up and a teardown: nothing repeats. */
static void test_single_iteration(void **state) {
  gen g;
  gen_open(&g, "single");
  kern(&g, "init", 7, 1, 0, MS);
  for (int k = 0; k < 10; k++)
    kern(&g, KN[k], 7, 1, 5 * MS + k * MS, MS / 2);
  kern(&g, "fini", 7, 1, 30 * MS, MS);
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_NONE);
  assert_int_equal(r->nsteps, 0);
  done(&g, t, r);
}

/* Two loops at once, from two host threads on two streams: a training loop (10 ms, 8 ms of
 * kernels) and a light side loop (7 ms, 0.5 ms).  The steps are the heavier loop's. */
static void test_two_interleaved_loops(void **state) {
  gen g;
  gen_open(&g, "two");
  for (int it = 0; it < 20; it++)
    for (int k = 0; k < 4; k++)
      kern(&g, KN[k], 7, 1, it * 10 * MS + k * 2 * MS, 2 * MS - 200000);
  for (int it = 0; it < 28; it++)
    kern(&g, "side", 8, 2, 3 * MS + it * 7 * MS, MS / 2);
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_INFERRED);
  assert_true(r->iperiod == 10 * MS);
  assert_true(r->nsteps >= 19 && r->nsteps <= 20);
  for (size_t k = 0; k < r->nsteps; k++) /* each step holds one iteration of the main loop */
    assert_true(r->steps[k].devs[0].kernels >= 4 && r->steps[k].devs[0].kernels <= 6);
  done(&g, t, r);
}

/* Each iteration runs 4 identical layers, then a head: a layer's kernels recur 4 times per
 * iteration, nearly steadily.  The steps are the iterations, not the layers: the head is the one
 * kernel that recurs once per iteration, so a step runs from one head to the next (11 of them;
 * the first iteration's layers come before any head). */
static void test_layers_are_not_iterations(void **state) {
  gen g;
  gen_open(&g, "layers");
  for (int it = 0; it < 12; it++) {
    int64_t s = it * 20 * MS;
    for (int l = 0; l < 4; l++) {
      kern(&g, "layer_a", 7, 1, s + l * 4 * MS, 2 * MS);
      kern(&g, "layer_b", 7, 1, s + l * 4 * MS + 2 * MS, 2 * MS);
    }
    kern(&g, "head", 7, 1, s + 16 * MS, 3 * MS);
  }
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_INFERRED);
  assert_true(r->iperiod == 20 * MS);
  assert_int_equal(r->nsteps, 11);
  assert_int_equal(r->step_kernels, 9);
  assert_true(r->stepsum[0].step_med == 20 * MS);
  done(&g, t, r);
}

/* No kernel recurs once per iteration: 10 kernels cycling through 3 names (k0 k1 k2 k0 ... k0),
 * as identical blocks do.  A pair recurs once: the iteration's last k0 followed by the next one's
 * first k0; from it, the 11 iterations after the first. */
static void test_no_unique_kernel(void **state) {
  gen g;
  gen_open(&g, "blocks");
  for (int it = 0; it < 12; it++)
    for (int k = 0; k < 10; k++)
      kern(&g, KN[k % 3], 7, 1, it * 12 * MS + k * MS, MS / 2);
  an_trace *t;
  an_report *r = gen_close(&g, &t);
  assert_int_equal(r->step_src, AN_STEPS_INFERRED);
  assert_true(r->iperiod == 12 * MS);
  assert_int_equal(r->nsteps, 11);
  assert_int_equal(r->step_kernels, 10);
  assert_true(r->stepsum[0].step_med == 12 * MS);
  done(&g, t, r);
}

/* An Nsight Systems export of a loop without NVTX ranges: start-up, 8 iterations of 20 ms (an
 * input copy from pageable memory, 3 kernels), found as in a torch.profiler trace. */
static void test_nsys_export(void **state) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/pwinfer-nsys-%d.sqlite", (int)getpid());
  unlink(path);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  char *sql = NULL;
  size_t len = 0;
  FILE *q = open_memstream(&sql, &len);
  fprintf(q, "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
             "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INT, end INT, deviceId INT, streamId "
             "INT, correlationId INT, shortName INT, demangledName INT);"
             "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INT, end INT, deviceId INT, streamId "
             "INT, correlationId INT, copyKind INT, srcKind INT, dstKind INT, bytes INT);"
             "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INT, end INT, nameId INT, "
             "correlationId INT, globalTid INT);"
             "INSERT INTO StringIds VALUES(1,'init'),(2,'ka'),(3,'kb'),(4,'kc'),"
             "(5,'cudaLaunchKernel_v7000'),(6,'cudaMemcpy_v3020');");
  int c = 1;
  for (int i = 0; i < 3; i++, c++) /* start-up: one kernel every 7 ms */
    fprintf(q,
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(%lld,%lld,0,7,%d,1,1);"
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%lld,%lld,5,%d,1);",
            i * 7 * MS, i * 7 * MS + MS, c, i * 7 * MS - 5000, i * 7 * MS - 3000, c);
  for (int it = 0; it < 8; it++) {
    int64_t s = 30 * MS + it * 20 * MS;
    fprintf(q,
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES(%lld,%lld,0,7,%d,1,0,2,%d);"
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%lld,%lld,6,%d,1);",
            (long long)s, (long long)(s + 2 * MS), c, 8 << 20, (long long)(s - 10000),
            (long long)(s + 2 * MS + 10000), c);
    c++;
    for (int k = 0; k < 3; k++, c++) {
      int64_t ks = s + 3 * MS + k * 5 * MS;
      fprintf(q,
              "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(%lld,%lld,0,7,%d,%d,%d);"
              "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES(%lld,%lld,5,%d,1);",
              (long long)ks, (long long)(ks + 4 * MS), c, k + 2, k + 2, (long long)(ks - 5000),
              (long long)(ks - 3000), c);
    }
  }
  fclose(q);
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("sqlite: %s", err);
  sqlite3_close(db);
  free(sql);
  char e[512];
  an_trace *t = an_load(path, NULL, e, sizeof e);
  if (!t) fail_msg("%s", e);
  assert_string_equal(t->format, "nsys");
  assert_int_equal(t->nsteps, 0);
  an_report *r = an_analyze(t, -1, NULL);
  assert_int_equal(r->step_src, AN_STEPS_INFERRED);
  assert_int_equal(r->nsteps, 8);
  assert_true(r->iperiod == 20 * MS);
  assert_int_equal(r->step_kernels, 3);
  assert_true(r->stepsum[0].step_med == 20 * MS);
  assert_true(r->startup == 30 * MS && r->devs[0].kernels == 24);
  an_report_free(r);
  an_free(t);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loop_after_startup),
      cmocka_unit_test(test_pauses_are_no_steps),
      cmocka_unit_test(test_single_iteration),
      cmocka_unit_test(test_two_interleaved_loops),
      cmocka_unit_test(test_layers_are_not_iterations),
      cmocka_unit_test(test_nsys_export),
      cmocka_unit_test(test_no_unique_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
