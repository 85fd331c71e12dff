/* an_synth.h — for the analyzer's tests: a small synthetic trace written as torch.profiler writes
 * it and as an nsys SQLite export, its figures computed by hand (check_figures), a file of given
 * bytes, and the check that a bad trace is refused with one line and exit 2.  Include after
 * cmocka.h and helpers.h. */
#ifndef PW_AN_SYNTH_H
#define PW_AN_SYNTH_H
#include <sqlite3.h>
#include <sys/stat.h>

#include "an.h"

#define US 1000LL

/* ---- a synthetic trace, in both formats ----
 * device 0: kernels [0,100) and [150,300) us on stream 7; H2D pageable->device [50,200) on
 * stream 9, 1000 bytes, correlation 5, runtime call 170 us; memset [300,310); D2H device->pinned
 * [400,450) 2000 bytes.  Host: cudaStreamSynchronize 10 us and 30 us.  Steps (CPU ranges)
 * #1 [0,225), #2 [225,450).  By hand: span 450, |A| = 310 + 50 = 360, |K| = 250, |H| = 150,
 * |H∩K| = 100.  k2 is launched from another thread (as PyTorch's autograd thread does) inside
 * step 1, the memset and the D2H are launched in step 2, so step 1's GPU work ends at 300 and
 * step 2's at 450: gpu_step 300 (first step: from its first op) and 150.  Kineto's
 * gpu_user_annotation (#1 [0,100): the main thread's stream only) is not the step. */

static const char *const NAME = "k<script>alert('x')</script>\\\"é";

static inline char *write_kineto(const char *name, int reverse, const char *extra) {
  static char path[128];
  snprintf(path, sizeof path, "/tmp/pwtest-%s-%d.json", name, (int)getpid());
  const char *ev[] = {
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"KNAME\",\"pid\":0,\"tid\":7,\"ts\":1000000.000,"
      "\"dur\":100,"
      "\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}}",
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k2\",\"pid\":0,\"tid\":7,\"ts\":1000150,\"dur\":"
      "150.000,"
      "\"args\":{\"device\":0,\"stream\":7,\"correlation\":2}}",
      "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> "
      "Device)\",\"pid\":0,\"tid\":9,"
      "\"ts\":1000050,\"dur\":150,\"args\":{\"device\":0,\"stream\":9,\"correlation\":5,\"bytes\":"
      "1000}}",
      "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset "
      "(Device)\",\"pid\":0,\"tid\":7,\"ts\":1000300,"
      "\"dur\":10,\"args\":{\"device\":0,\"stream\":7,\"correlation\":7,\"bytes\":64}}",
      "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH (Device -> "
      "Pinned)\",\"pid\":0,\"tid\":9,"
      "\"ts\":1000400,\"dur\":50,\"args\":{\"device\":0,\"stream\":9,\"correlation\":6,\"bytes\":"
      "2000}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000040,"
      "\"dur\":170,\"args\":{\"correlation\":5}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"pid\":1,\"tid\":"
      "1,"
      "\"ts\":1000210,\"dur\":10,\"args\":{\"correlation\":8}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"pid\":1,\"tid\":"
      "1,"
      "\"ts\":1000460,\"dur\":30,\"args\":{\"correlation\":9}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000000,"
      "\"dur\":5,\"args\":{\"correlation\":1}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":2,"
      "\"ts\":1000100,\"dur\":5,\"args\":{\"correlation\":2}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemsetAsync\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000230,\"dur\":5,\"args\":{\"correlation\":7}}",
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000390,\"dur\":65,\"args\":{\"correlation\":6}}",
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000000,\"dur\":225}",
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,\"tid\":1,"
      "\"ts\":1000225,\"dur\":225}",
      "{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":0,"
      "\"tid\":7,\"ts\":1000000,\"dur\":100}",
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::copy_\",\"pid\":1,\"tid\":1,\"ts\":"
      "1000000,\"dur\":999,"
      "\"args\":{\"nested\":{\"device\":99,\"list\":[1,2,{\"stream\":3}]}}}",
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"GPU 0\"}}",
  };
  int n = (int)(sizeof ev / sizeof ev[0]);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0}],\"traceEvents\":[\n");
  for (int i = 0; i < n; i++) {
    const char *e = ev[reverse ? n - 1 - i : i];
    const char *k = strstr(e, "KNAME");
    if (k)
      fprintf(f, "%.*s%s%s", (int)(k - e), e, NAME, k + 5);
    else
      fputs(e, f);
    fputs(i + 1 < n ? ",\n" : "\n", f);
  }
  fprintf(f, "%s],\"traceName\":\"x\"}\n", extra ? extra : "");
  fclose(f);
  return path;
}

static inline char *write_nsys(void) {
  static char path[128];
  snprintf(path, sizeof path, "/tmp/pwtest-nsys-%d.sqlite", (int)getpid());
  unlink(path);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  /* the documented schema; memory kinds in nsys numbering: 0 Pageable, 1 Pinned, 2 Device */
  const char *sql =
      "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INT, end INT, deviceId INT, streamId INT, "
      "correlationId INT,"
      " shortName INT, demangledName INT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INT, end INT, deviceId INT, streamId INT, "
      "correlationId INT,"
      " copyKind INT, srcKind INT, dstKind INT, bytes INT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(start INT, end INT, deviceId INT, streamId INT, "
      "correlationId INT,"
      " bytes INT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INT, end INT, nameId INT, correlationId INT, "
      "globalTid INT);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(start INT, end INT, deviceId INT, streamId "
      "INT);"
      "CREATE TABLE NVTX_EVENTS(start INT, end INT, text TEXT);"
      "INSERT INTO StringIds "
      "VALUES(1,'k1'),(2,'k2'),(3,'cudaMemcpyAsync_v3020'),(4,'cudaStreamSynchronize_v3020'),"
      " (5,'cudaLaunchKernel_v7000'),(6,'cudaMemsetAsync_v3020');"
      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL "
      "VALUES(1000000000,1000100000,0,7,1,1,1),(1000150000,1000300000,0,7,2,2,2);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES(1000050000,1000200000,0,9,5,1,0,2,1000),"
      " (1000400000,1000450000,0,9,6,2,2,1,2000);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES(1000300000,1000310000,0,7,7,64);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME "
      "VALUES(1000040000,1000210000,3,5,1),(1000210000,1000220000,4,8,1),"
      " (1000460000,1000490000,4,9,1),(1000000000,1000005000,5,1,1),(1000100000,1000105000,5,2,2),"
      " (1000230000,1000235000,6,7,1),(1000390000,1000455000,3,6,1);"
      "INSERT INTO NVTX_EVENTS "
      "VALUES(1000000000,1000225000,'ProfilerStep#1'),(1000225000,1000450000,'ProfilerStep#2');";
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("sqlite: %s", err);
  sqlite3_close(db);
  return path;
}

static inline void check_figures(const char *path) {
  char err[512];
  an_trace *t = an_load(path, NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  an_report *r = an_analyze(t, -1, NULL);
  assert_int_equal(r->ndevs, 1);
  const an_dev *d = &r->devs[0];
  assert_true(d->span == 450 * US);
  assert_true(d->busy == 360 * US);
  assert_true(d->kernel == 250 * US);
  assert_true(d->idle == 90 * US);
  assert_int_equal(d->kernels, 2);
  assert_int_equal(d->h2d.copies, 1);
  assert_int_equal(d->h2d.bytes, 1000);
  assert_true(d->h2d.time == 150 * US && d->h2d.hidden == 100 * US && d->h2d.exposed == 50 * US);
  assert_int_equal(d->d2h.copies, 1);
  assert_true(d->d2h.time == 50 * US && d->d2h.hidden == 0 && d->d2h.exposed == 50 * US);
  assert_int_equal(d->pg_copies, 1);
  assert_int_equal(d->pg_bytes, 1000);
  assert_true(d->pg_time == 150 * US && d->pg_host == 170 * US);
  /* the steady state, the steps' GPU window [0, 450), holds one sync: the one at 460 is after
   * the last step's work (teardown); over the whole trace both count */
  assert_true(r->steady && r->steady1 - r->steady0 == 450 * US && r->steady0 == d->t0);
  assert_true(r->startup == 0 && r->teardown == 0);
  assert_int_equal(r->sync_calls, 1);
  assert_true(r->sync_time == 10 * US && r->sync_longest == 10 * US);
  an_options whole = {.whole_trace = 1};
  an_report *rw = an_analyze(t, -1, &whole);
  assert_int_equal(rw->sync_calls, 2);
  assert_true(rw->sync_time == 40 * US && rw->sync_longest == 30 * US && !rw->steady);
  an_report_free(rw);
  /* per step (DESIGN.md §5): #1 holds k1, k2 (other thread) and the H2D: [0,300); the H2D is
   * hidden under all kernels of the device: 100 of 150.  #2 holds the memset and the D2H. */
  assert_int_equal(r->nsteps, 2);
  assert_int_equal(r->steps[0].num, 1);
  const an_stepdev *s1 = &r->steps[0].devs[0], *s2 = &r->steps[1].devs[0];
  assert_true(s1->has && s1->gpu == 300 * US && s1->kernels == 2);
  assert_true(s1->h2d.time == 150 * US && s1->h2d.hidden == 100 * US && s1->h2d.exposed == 50 * US);
  assert_true(s1->pg_copies == 1 && s1->pg_host == 170 * US && s1->busy == 300 * US);
  assert_true(s2->has && s2->gpu == 150 * US && s2->kernels == 0 && s2->h2d.copies == 0);
  assert_true(s2->d2h.time == 50 * US && s2->d2h.hidden == 0);
  assert_true(r->stepsum[0].n == 2 && r->stepsum[0].step_med == 225 * US &&
              r->stepsum[0].step_p95 == 300 * US && r->stepsum[0].hidden_med > 0.666 &&
              r->stepsum[0].hidden_med < 0.667);
  /* idle [310,400): the D2H's call began at 390 (host-bound to there), under a memcpy call from
   * 390 (its own): host 80, copy 0 (the H2D call ended at 210), other 10 */
  assert_true(r->idle[0].host == 80 * US && r->idle[0].copy == 0 && r->idle[0].other == 10 * US);
  /* exposed transfers: the H2D is 150 us but 66.7 % hidden; the D2H is only 50 us: none */
  assert_int_equal(r->nexposed, 0);
  an_threshold_set("exposed_min_us=40");
  an_report *r2 = an_analyze(t, -1, NULL);
  assert_int_equal(r2->nexposed, 1); /* the D2H: 0 % hidden */
  assert_true(r2->exposed[0].dur == 50 * US);
  an_threshold_set("exposed_max_hidden_pct=70");
  an_report_free(r2);
  r2 = an_analyze(t, -1, NULL);
  assert_int_equal(r2->nexposed, 2);
  an_threshold_set("exposed_min_us=100");
  an_threshold_set("exposed_max_hidden_pct=50");
  an_report_free(r2);
  /* gaps: [310,400) is 90 us */
  an_threshold_set("gap_ms=0.05");
  r2 = an_analyze(t, -1, NULL);
  assert_int_equal(r2->ngaps, 1);
  assert_true(r2->gaps[0].e - r2->gaps[0].s == 90 * US);
  an_threshold_set("gap_ms=1");
  an_report_free(r2);
  /* what-if: eligible needs >= 64 KiB; with 0 the 1000-byte copy counts.  Step 1: host 225 - its
   * call 170 + 1000 B at 42 GB/s (23 ns) = 55 us; GPU 300 - the DMA 150 + 0 = 150: 150.  Step 2:
   * nothing eligible: max(host 225, GPU 60) = 225.  Medians: now 225, predicted 187.5. */
  assert_int_equal(r->whatif[0].copies, 0);
  an_threshold_set("eligible_min_kib=0");
  r2 = an_analyze(t, -1, NULL);
  assert_int_equal(r2->whatif[0].copies, 1);
  assert_int_equal(r2->whatif[0].steps, 2);
  assert_true(r2->whatif[0].baseline == 225 * US);
  assert_true(r2->whatif[0].predicted >= 187500 && r2->whatif[0].predicted <= 187501);
  an_threshold_set("eligible_min_kib=64");
  an_report_free(r2);
  /* --step 2: its GPU window runs from step 1's last op (300) to its own (450) */
  r2 = an_analyze(t, 2, NULL);
  assert_non_null(r2);
  assert_true(r2->devs[0].span == 150 * US && r2->devs[0].h2d.copies == 0 &&
              r2->devs[0].d2h.copies == 1);
  assert_true(r2->nsteps == 1 && r2->steps[0].num == 2 && r2->steps[0].devs[0].gpu == 150 * US);
  an_report_free(r2);
  assert_null(an_analyze(t, 7, NULL));
  an_report_free(r);
  an_free(t);
}

static inline void expect_error(const char *path, const char *what) {
  const char *argv[] = {PW_CLI, "report", path, NULL};
  result r = run(argv, NULL);
  if (r.status != 2) fail_msg("%s: status %d, expected 2; stderr: %s", path, r.status, r.err);
  if (!strstr(r.err, path) || !strstr(r.err, what))
    fail_msg("%s: stderr '%s' lacks '%s'", path, r.err, what);
  char *nl = strchr(r.err, '\n');
  assert_true(nl && nl[1] == 0); /* one line */
  free_result(&r);
}

static inline char *write_bytes(const char *name, const char *data, size_t n) {
  static char path[8][128];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 128, "/tmp/pwtest-bad-%s-%d", name, (int)getpid());
  FILE *f = fopen(p, "wb");
  fwrite(data, 1, n, f);
  fclose(f);
  return p;
}

/* The scratch files of this test program (named /tmp/pwtest-*-PID*), removed at its end. */
static inline int an_test_cleanup(int rc) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -f /tmp/pwtest-*-%d /tmp/pwtest-*-%d.*", (int)getpid(),
           (int)getpid());
  if (system(cmd) != 0) rc |= 0; /* leftovers in /tmp are harmless */
  return rc;
}
#endif
