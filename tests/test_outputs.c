/* test_outputs.c — what the analyzer prints: the JSON schema keys and escaping of hostile names,
 * the text report, diff and rank table, the HTML report, the command line's messages, and a
 * clear exit 2 (one line naming the file) for every kind of bad input. */
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
#include <zlib.h>

#include "an.h"
#include "helpers.h"
#include "an_synth.h"

/* ---- CLI: outputs and errors ---- */

static void test_json_schema_and_escaping(void **state) {
  char *p = write_kineto("esc", 0, NULL);
  const char *argv[] = {PW_CLI, "report", "--format", "json", p, NULL};
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  char eb[256];
  yajl_val v = yajl_tree_parse(r.out, eb, sizeof eb);
  if (!v) fail_msg("report JSON does not parse: %s", eb);
  const char *keys[][4] = {{"schema"},          {"devices"}, {"host", "sync_calls"},
                           {"host", "sync_us"}, {"steps"},   {"findings"}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!yajl_tree_get(v, keys[i], yajl_t_any)) fail_msg("key %s missing", keys[i][0]);
  yajl_val dev =
      YAJL_GET_ARRAY(yajl_tree_get(v, (const char *[]){"devices", NULL}, yajl_t_array))->values[0];
  const char *dk[] = {"device",  "span_us", "busy_fraction", "kernel_fraction",
                      "idle_us", "h2d",     "d2h",           "pageable"};
  for (size_t i = 0; i < 8; i++)
    if (!yajl_tree_get(dev, (const char *[]){dk[i], NULL}, yajl_t_any))
      fail_msg("devices[0].%s missing", dk[i]);
  const char *xk[] = {"copies", "bytes", "time_us", "overlap_fraction", "exposed_us"};
  for (size_t i = 0; i < 5; i++)
    if (!yajl_tree_get(dev, (const char *[]){"h2d", xk[i], NULL}, yajl_t_any))
      fail_msg("h2d.%s missing", xk[i]);
  double of = YAJL_GET_DOUBLE(
      yajl_tree_get(dev, (const char *[]){"h2d", "overlap_fraction", NULL}, yajl_t_number));
  assert_true(of > 0.6666 && of < 0.6667);
  const char *pk[] = {"copies", "bytes", "time_us", "host_blocked_us"};
  for (size_t i = 0; i < 4; i++)
    if (!yajl_tree_get(dev, (const char *[]){"pageable", pk[i], NULL}, yajl_t_any))
      fail_msg("pageable.%s", pk[i]);
  assert_string_equal(
      YAJL_GET_STRING(yajl_tree_get(v, (const char *[]){"schema", NULL}, yajl_t_string)),
      "pinwheel-report/3");
  assert_string_equal(
      YAJL_GET_STRING(yajl_tree_get(v, (const char *[]){"steps_source", NULL}, yajl_t_string)),
      "marked");
  assert_string_equal(
      YAJL_GET_STRING(yajl_tree_get(v, (const char *[]){"window", "over", NULL}, yajl_t_string)),
      "steps");
  /* steps[i].devices[j]: gpu_step_us and h2d.overlap_fraction (DESIGN.md §5) */
  yajl_val st = yajl_tree_get(v, (const char *[]){"steps", NULL}, yajl_t_array);
  assert_int_equal(YAJL_GET_ARRAY(st)->len, 2);
  yajl_val sd0 = YAJL_GET_ARRAY(yajl_tree_get(YAJL_GET_ARRAY(st)->values[0],
                                              (const char *[]){"devices", NULL}, yajl_t_array))
                     ->values[0];
  assert_true(YAJL_GET_DOUBLE(yajl_tree_get(sd0, (const char *[]){"gpu_step_us", NULL},
                                            yajl_t_number)) == 300.0);
  double sof = YAJL_GET_DOUBLE(
      yajl_tree_get(sd0, (const char *[]){"h2d", "overlap_fraction", NULL}, yajl_t_number));
  assert_true(sof > 0.6666 && sof < 0.6667);
  const char *wk[] = {"baseline_step_us", "predicted_step_us", "predicted_keep_step_us",
                      "assumptions"};
  for (size_t i = 0; i < 4; i++)
    if (!yajl_tree_get(v, (const char *[]){"what_if", wk[i], NULL}, yajl_t_any))
      fail_msg("what_if.%s missing", wk[i]);
  /* per copy hidden %: the H2D [50,200) is 100 of 150 us under kernels; the D2H none */
  yajl_val cps = yajl_tree_get(v, (const char *[]){"copies", NULL}, yajl_t_array);
  assert_non_null(cps);
  assert_int_equal(YAJL_GET_ARRAY(cps)->len, 2);
  double h0 = YAJL_GET_DOUBLE(yajl_tree_get(
      YAJL_GET_ARRAY(cps)->values[0], (const char *[]){"hidden_fraction", NULL}, yajl_t_number));
  double h1 = YAJL_GET_DOUBLE(yajl_tree_get(
      YAJL_GET_ARRAY(cps)->values[1], (const char *[]){"hidden_fraction", NULL}, yajl_t_number));
  assert_true(h0 > 0.666 && h0 < 0.667); /* the longest first */
  assert_true(h1 == 0.0);
  yajl_tree_free(v);
  free_result(&r);
  /* HTML and SVG: the hostile kernel name never appears raw */
  const char *html[] = {PW_CLI, "report", "--format", "html", p, NULL};
  r = run(html, NULL);
  assert_int_equal(r.status, 0);
  assert_null(strstr(r.out, "<script"));
  assert_non_null(strstr(r.out, "<svg"));
  free_result(&r);
  char out[200];
  snprintf(out, sizeof out, "/tmp/pwtest-chrome-%d.json", (int)getpid());
  const char *exp[] = {PW_CLI, "export", "--format", "chrome", "-o", out, p, NULL};
  r = run(exp, NULL);
  assert_int_equal(r.status, 0);
  free_result(&r);
  char *text = slurp(out);
  v = yajl_tree_parse(text, eb, sizeof eb);
  if (!v) fail_msg("export does not parse: %s", eb);
  yajl_tree_free(v);
  assert_non_null(strstr(text, "\"thread_name\""));
  assert_non_null(strstr(text, "\"process_name\""));
  assert_non_null(strstr(text, "\\u003cscript"));
  /* Perfetto: runtime calls under their own names, one track per host thread, launch -> kernel
   * flows, the steps track */
  assert_non_null(strstr(text, "\"name\":\"cudaMemcpyAsync\""));
  assert_non_null(strstr(text, "\"name\":\"thread 2\""));
  assert_non_null(strstr(text, "\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":2,"));
  assert_non_null(
      strstr(text, "\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":2,"));
  assert_non_null(strstr(text, "\"name\":\"steps\""));
  free(text);
  check_figures(out); /* the export reads back with the same figures */
}

static void test_text_diff_and_ranks(void **state) {
  char *p = strdup(write_kineto("t1", 0, NULL));
  const char *argv[] = {PW_CLI, "report", p, p, NULL};
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(
      r.out,
      "H2D: 0.150 ms, 66.7 % hidden under compute; 1 pageable copy blocked the host 0.170 ms"));
  assert_non_null(strstr(r.out, "steps marked: 2 (ProfilerStep#N), median 0.2 ms; start-up "
                                "0.0 ms and teardown 0.0 ms not counted\n"));
  assert_non_null(strstr(r.out, "spread"));
  assert_null(strstr(r.out, "\033[")); /* not a terminal: no colour */
  free_result(&r);
  /* pageable copies: a warning when they cost a share of the span (here 170 of 450 us of
   * host time), else a line of information; one copy is "1 copy" */
  const char *pw1[] = {PW_CLI, "report", p, NULL};
  r = run(pw1, NULL);
  assert_non_null(strstr(r.out, "[warning] pageable_copies: 1 copy from or to pageable host "
                                "memory (0.0 MiB) blocked the host 0.170 ms;"));
  free_result(&r);
  const char *pw2[] = {PW_CLI, "report", "--threshold", "pageable_warn_pct=40", p, NULL};
  r = run(pw2, NULL);
  assert_non_null(strstr(r.out, "[info] pageable_copies: 1 copy "));
  free_result(&r);
  /* the real case: three tiny copies pinwheel left unstaged, 0.017 ms in a 33 ms span */
  const char *pw3[] = {PW_CLI, "report", PW_FIXTURES "/kineto_naive_pinwheel.json.gz", NULL};
  r = run(pw3, NULL);
  assert_non_null(strstr(r.out, "[info] pageable_copies: pinwheel left 3 copies"));
  free_result(&r);
  /* the per-step hidden fraction of H2D, a row of the diff (the trace against itself) */
  const char *self[] = {PW_CLI, "diff", p, p, NULL};
  r = run(self, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(
      strstr(r.out, "  H2D hidden % per step (median)           66.667         66.667"));
  free_result(&r);
  const char *d[] = {PW_CLI, "diff", PW_FIXTURES "/kineto_naive.json.gz",
                     PW_FIXTURES "/kineto_naive_pinwheel.json.gz", NULL};
  r = run(d, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "pageable host blocked ms"));
  free_result(&r);
  /* --whole-trace: the sync after the last step (teardown) is counted too */
  const char *dw[] = {PW_CLI, "diff", "--whole-trace", p, p, NULL};
  r = run(dw, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "\nhost sync calls 2 -> 2,"));
  free_result(&r);
  r = run(self, NULL);
  assert_non_null(strstr(r.out, "\nhost sync calls 1 -> 1,"));
  free_result(&r);
  /* traces of different devices: as many devices, compared in order and said so; a different
   * number of devices, an error (it printed no rows and exited 0) */
  char *txt = slurp(p), *q;
  while ((q = strstr(txt, "\"device\":0")))
    q[9] = '3';
  char p3[160];
  snprintf(p3, sizeof p3, "%s.dev3.json", p);
  FILE *f = fopen(p3, "w");
  fputs(txt, f);
  fclose(f);
  free(txt);
  const char *dd[] = {PW_CLI, "diff", p, p3, NULL};
  r = run(dd, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "before's device 0 is compared with after's device 3\n"));
  assert_non_null(strstr(r.out, "\ndevice 0 -> 3 "));
  free_result(&r);
  char *p2 = strdup(write_kineto(
      "t2dev", 0,
      ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":1,\"tid\":7,\"ts\":1000000,"
      "\"dur\":5,\"args\":{\"device\":1,\"stream\":7,\"correlation\":99}}"));
  const char *d2[] = {PW_CLI, "diff", p, p2, NULL};
  r = run(d2, NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "ran on different devices"));
  assert_string_equal(r.out, "");
  free_result(&r);
  unlink(p3);
  unlink(p2);
  free(p2);
  free(p);
}

static void test_bad_inputs(void **state) {
  char *good = slurp(write_kineto("src", 0, NULL));
  size_t n = strlen(good);
  expect_error(write_bytes("trunc", good, n / 2), "truncated or corrupt");
  expect_error(write_bytes("empty", "", 0), "empty");
  expect_error(write_bytes("png", "\x89PNG\r\n\x1a\n0000", 12), "not a trace");
  expect_error(write_bytes("wrong", "{\"a\":[1,2,3]}", 13), "no traceEvents");
  const char *huge =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,"
      "\"ts\":100000000000000000000000000000,\"dur\":1}]}";
  expect_error(write_bytes("huge", huge, strlen(huge)), "out of range");
  const char *neg =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,"
      "\"ts\":10,\"dur\":-5}]}";
  expect_error(write_bytes("neg", neg, strlen(neg)), "negative duration");
  /* numbers beyond their range: an error, not a saturated value (a byte count beyond 2^63 was
   * read as 2^63 - 1 and reported as 8388608 TiB) */
  static const struct {
    const char *field, *what;
  } wide[] = {{"\"args\":{\"bytes\":9223372036854775808}", "an args number is out of range"},
              {"\"args\":{\"bytes\":99999999999999999999}", "an args number is out of range"},
              {"\"args\":{\"stream\":4294967296}", "stream out of range"},
              {"\"args\":{\"device\":9223372036854775808}", "an args number is out of range"},
              {"\"args\":{\"device\":4294967296}", "device id out of range"},
              {"\"args\":{\"correlation\":1e300}", "an args number is out of range"}};
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
    char doc[512], nm[32];
    snprintf(doc, sizeof doc,
             "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD "
             "(Pageable -> Device)\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":1,%s}]}",
             wide[i].field);
    snprintf(nm, sizeof nm, "wide%zu", i);
    expect_error(write_bytes(nm, doc, strlen(doc)), wide[i].what);
  }
  const char *widetid = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
                        "\"pid\":0,\"tid\":4294967296,\"ts\":1,\"dur\":1}]}";
  expect_error(write_bytes("widetid", widetid, strlen(widetid)), "tid out of range");
  const char *widepid = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
                        "\"pid\":-4294967296,\"tid\":1,\"ts\":1,\"dur\":1}]}";
  expect_error(write_bytes("widepid", widepid, strlen(widepid)), "pid out of range");
  /* the collector's thread ids go up to 2^32 - 1: still read */
  const char *tid32 = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
                      "\"pid\":0,\"tid\":4294967295,\"ts\":1,\"dur\":1}]}";
  const char *ok32[] = {PW_CLI, "report", write_bytes("tid32", tid32, strlen(tid32)), NULL};
  result r32 = run(ok32, NULL);
  assert_int_equal(r32.status, 0);
  free_result(&r32);
  const char *nogpu = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"k\",\"pid\":0,"
                      "\"tid\":1,\"ts\":1,\"dur\":1}]}";
  expect_error(write_bytes("nogpu", nogpu, strlen(nogpu)), "no GPU activity");
  char *corrupt = strdup(good);
  for (size_t i = 200; i < n; i += 97)
    corrupt[i] = (char)(0x80 | i);
  expect_error(write_bytes("corrupt", corrupt, n), "not valid JSON");
  free(corrupt);
  expect_error("/nonexistent/trace.json", "cannot open");
  /* SQLite without nsys tables */
  char db[128];
  snprintf(db, sizeof db, "/tmp/pwtest-bad-db-%d.sqlite", (int)getpid());
  unlink(db);
  sqlite3 *h;
  sqlite3_open(db, &h);
  sqlite3_exec(h, "CREATE TABLE t(x INT);", NULL, NULL, NULL);
  sqlite3_close(h);
  expect_error(db, "not an nsys export");
  free(good);
  const char *step[] = {PW_CLI, "report", "--step", "9", write_kineto("st", 0, NULL), NULL};
  result r = run(step, NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "no step 9 in this trace"));
  free_result(&r);
  const char *thr[] = {PW_CLI, "report", "--threshold", "nope=3", "x", NULL};
  r = run(thr, NULL);
  assert_int_equal(r.status, 2);
  free_result(&r);
}

/* Each misleading message of the past names the real problem now; the command line takes
 * options anywhere and `-` for standard input. */
static void test_messages_and_command_line(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "/tmp/pwtest-dir-%d", (int)getpid());
  mkdir(dir, 0700);
  expect_error(dir, "a directory, not a trace file"); /* was "the file is empty" */
  rmdir(dir);
  /* a damaged SQLite header: not "SQLite, but not an nsys export" */
  char *good = strdup(write_nsys());
  char *db = slurp(good);
  FILE *f = fopen(good, "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  memset(db + 16, 0xff, 8);    /* page size and format bytes */
  memset(db + 100, 0x5a, 400); /* the schema page's header */
  expect_error(write_bytes("damaged-db", db, (size_t)n), "a damaged SQLite file");
  free(db);
  /* an nsys byte count far beyond 2^63: exit 2, not a silent clamp to 8 EiB */
  sqlite3 *h;
  sqlite3_open(good, &h);
  sqlite3_exec(h, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 1.2e29 WHERE correlationId = 5",
               NULL, NULL, NULL);
  sqlite3_close(h);
  expect_error(good, "byte count out of range");
  free(good);
  /* Kineto's old capitalised categories read as the new ones */
  const char *old =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"Kernel\",\"name\":\"k\",\"pid\":0,"
      "\"tid\":7,\"ts\":0,\"dur\":100,\"args\":{\"device\":0,\"stream\":7}},"
      "{\"ph\":\"X\",\"cat\":\"Memcpy\",\"name\":\"Memcpy HtoD (Pageable -> Device)\","
      "\"pid\":0,\"tid\":8,\"ts\":50,\"dur\":100,\"args\":{\"device\":0,"
      "\"stream\":8,\"bytes\":10}}]}";
  char *op = write_bytes("old-cats", old, strlen(old));
  /* options after the file name; no runtime calls: host time "unknown", not 0.000 */
  const char *a1[] = {PW_CLI, "report", op, "--format", "text", NULL};
  result r = run(a1, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "H2D: 0.100 ms, 50.0 % hidden"));
  assert_non_null(strstr(r.out, "blocked the host unknown ms"));
  free_result(&r);
  /* `-` is standard input */
  const char *a2[] = {PW_CLI, "report", "--format", "json", "-", NULL};
  r = run_in(a2, NULL, op);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "\"trace\":\"(standard input)\""));
  free_result(&r);
  const char *a3[] = {PW_CLI, "report", "-", NULL};
  r = run_in(a3, NULL, "/dev/null");
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "(standard input): the file is empty"));
  free_result(&r);
  /* no H2D at all: the headline says so instead of "0.0 % hidden" */
  const char *d2h = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH "
                    "(Device -> Pinned)\",\"pid\":0,\"tid\":8,\"ts\":50,\"dur\":100,\"args\":{"
                    "\"device\":0,\"stream\":8,\"bytes\":10}}]}";
  const char *a4[] = {PW_CLI, "report", write_bytes("d2h-only", d2h, strlen(d2h)), NULL};
  r = run(a4, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "no host-to-device copies"));
  assert_null(strstr(r.out, "% hidden under compute"));
  free_result(&r);
  /* a missing value, and a bad --step-range, are usage errors */
  const char *a5[] = {PW_CLI, "report", op, "--format", NULL};
  r = run(a5, NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "a value is missing after the option --format"));
  free_result(&r);
  const char *a6[] = {PW_CLI, "report", "--step-range", "(", op, NULL};
  r = run(a6, NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "not a regular expression"));
  free_result(&r);
  /* diff --format json: counts are integers */
  const char *a7[] = {PW_CLI,
                      "diff",
                      "--format",
                      "json",
                      PW_FIXTURES "/kineto_naive.json.gz",
                      PW_FIXTURES "/kineto_naive_pinwheel.json.gz",
                      NULL};
  r = run(a7, NULL);
  assert_int_equal(r.status, 0);
  char eb[256];
  yajl_val v = yajl_tree_parse(r.out, eb, sizeof eb);
  if (!v) fail_msg("diff JSON does not parse: %s", eb);
  /* rows keyed by stable names, not the text's labels */
  assert_non_null(strstr(r.out, "\"h2d_copies\":{\"before\":6,\"after\":6,\"delta\":0"));
  assert_non_null(strstr(r.out, "\"gpu_step_ms_median\":{"));
  assert_null(strstr(r.out, "GPU step ms"));
  assert_non_null(strstr(r.out, "\"h2d_hidden_pct_per_step_median\":{\"before\":0.000000,"));
  yajl_tree_free(v);
  free_result(&r);
}

/* The HTML report: several ranks give one table with the spread (not reports one after
 * another); each step's label is its own time, as the step table says; the step table has D2H
 * columns; the utilization strip is drawn. */
static void test_html_report(void **state) {
  char *p = strdup(write_kineto("html2", 0, NULL));
  const char *two[] = {PW_CLI, "report", "--format", "html", p, p, NULL};
  result r = run(two, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "<h1>pinwheel report: 2 ranks</h1>"));
  char *sp = strstr(r.out, "<tr><th>spread</th>");
  assert_non_null(sp);
  assert_true(sp < strstr(r.out, "<details id=\"rank-0\">")); /* the table first */
  assert_non_null(strstr(r.out, "<details id=\"rank-1\">"));
  free_result(&r);
  /* a prefetch: step 2's copy (on stream 9) runs before step 1's kernel ends, so step 2's
   * timeline (from its first operation, 120 ms, to its last, 260) is longer than its time
   * (from step 1's last end, 200, to 260: 60 ms); the label says 60 ms, as the table */
  const char *doc =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"pid\":0,\"tid\":7,\"ts\":10000,"
      "\"dur\":190000,\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}},"
      "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pinned -> Device)\","
      "\"pid\":0,\"tid\":9,\"ts\":120000,\"dur\":60000,\"args\":{\"device\":0,\"stream\":9,"
      "\"correlation\":2,\"bytes\":1048576}},"
      "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH (Device -> Pageable)\","
      "\"pid\":0,\"tid\":7,\"ts\":200000,\"dur\":10000,\"args\":{\"device\":0,\"stream\":7,"
      "\"correlation\":4,\"bytes\":4096}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"pid\":0,\"tid\":7,\"ts\":210000,"
      "\"dur\":50000,\"args\":{\"device\":0,\"stream\":7,\"correlation\":3}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
      "\"tid\":1,\"ts\":5000,\"dur\":1,\"args\":{\"correlation\":1}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,"
      "\"tid\":1,\"ts\":110000,\"dur\":1,\"args\":{\"correlation\":2}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
      "\"tid\":1,\"ts\":120000,\"dur\":1,\"args\":{\"correlation\":3}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,"
      "\"tid\":1,\"ts\":115000,\"dur\":96000,\"args\":{\"correlation\":4}},"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,"
      "\"tid\":1,\"ts\":0,\"dur\":100000},"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,"
      "\"tid\":1,\"ts\":100000,\"dur\":200000}]}";
  const char *pf[] = {PW_CLI, "report", "--format", "html", write_bytes("pf", doc, strlen(doc)),
                      NULL};
  r = run(pf, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "<summary>step 2: 60.000 ms (timeline from its first operation: "
                                "140.000 ms)</summary>"));
  assert_non_null(strstr(r.out, "<summary>step 1: 190.000 ms</summary>"));
  /* the table row of step 2: 60 ms; its prefetch copy hidden under step 1's kernel; its D2H
   * (10 ms, not hidden) in the D2H columns */
  assert_non_null(strstr(r.out, "<a href=\"#step-2\">2</a></td><td>0</td><td>60.000</td><td>1</td>"
                                "<td>60.000</td><td>100.0 %</td><td>0.000</td><td>1</td><td>10.000"
                                "</td><td>0.0 %</td>"));
  /* D2H columns and the utilization strip (20 buckets) */
  assert_non_null(strstr(r.out, "<th>D2H copies</th><th>D2H ms</th><th>D2H hidden</th>"));
  char *u = strstr(r.out, "<svg class=\"util\"");
  assert_non_null(u);
  int cells = 0;
  for (char *c = strstr(u, "<rect"); c && c < strstr(u, "</svg>"); c = strstr(c + 1, "<rect"))
    cells++;
  assert_int_equal(cells, 20);
  free_result(&r);
  free(p);
}

/* Issue 37: the report leads with the answer; with several ranks the rank table comes first;
 * kernel names are demangled once read; pinwheel's staged copies are never called pageable;
 * one of a thing is singular; a cut .gz says its offset is in the decompressed data. */
static void test_answer_first(void **state) {
  char *p = strdup(write_kineto("ans", 0, NULL));
  /* the what-if counts copies of 64 KiB and more: this one's 1000 bytes count at 0 KiB */
  const char *one[] = {PW_CLI, "report", "--threshold", "eligible_min_kib=0", p, NULL};
  result r = run(one, NULL);
  assert_int_equal(r.status, 0);
  /* line 2: hidden and exposed; line 3: the thing to do; line 4: its predicted effect */
  static const char lead[] =
      "answer: H2D 0.150 ms, 66.7 % hidden under compute, 0.050 ms exposed; D2H 0.050 ms, 0.050 "
      "ms exposed\n  to do: stage the 1 pageable copy: run under pinwheel (or pin the memory) "
      "(finding pageable_copies)\n  predicted: a step on device 0 takes about 0.188 ms instead of "
      "0.225 ms (1.20 x; the what-if below)\n\n";
  assert_true(!strncmp(strchr(r.out, '\n') + 1, lead, sizeof lead - 1));
  assert_true(strstr(r.out, "\nanswer: ") < strstr(r.out, "\nsteps marked: "));
  /* the header names the trace's source; one sync call is "1 call" */
  assert_non_null(strstr(r.out, " (torch.profiler/Kineto, 5 GPU operations)\n"));
  assert_non_null(strstr(r.out, "\nhost syncs: 1 call, "));
  free_result(&r);
  /* two ranks: the table and each rank's answer before any rank's own report */
  const char *two[] = {PW_CLI, "report", p, p, NULL};
  r = run(two, NULL);
  assert_int_equal(r.status, 0);
  assert_true(!strncmp(r.out, "pinwheel report: 2 ranks (one per file)\n", 40));
  char *spread = strstr(r.out, "\n  spread "), *ans1 = strstr(r.out, "\nrank 1: /tmp/");
  char *rep0 = strstr(r.out, "\npinwheel report: /tmp/");
  assert_non_null(spread);
  assert_non_null(ans1);
  assert_non_null(rep0);
  assert_true(spread < ans1 && ans1 < rep0);
  assert_true(!strncmp(strchr(ans1 + 1, '\n'), "\nanswer: H2D 0.150 ms", 21));
  free_result(&r);
  /* HTML: the answer under the title, before the devices table; the timeline's span said */
  const char *html[] = {PW_CLI, "report", "--format", "html", p, NULL};
  r = run(html, NULL);
  assert_int_equal(r.status, 0);
  char *a = strstr(r.out, "<div class=\"answer\"><p>answer: H2D 0.150 ms, 66.7 % hidden under "
                          "compute, 0.050 ms exposed");
  assert_non_null(a);
  assert_non_null(strstr(a, "<p>to do: stage the 1 pageable copy"));
  assert_true(a < strstr(r.out, "<h2>Devices</h2>"));
  assert_non_null(strstr(r.out, "The timeline spans the whole trace"));
  free_result(&r);
  /* JSON: the same answer, as an object */
  const char *js[] = {PW_CLI, "report", "--threshold", "eligible_min_kib=0", "--format",
                      "json", p,        NULL};
  r = run(js, NULL);
  char eb[256];
  yajl_val v = yajl_tree_parse(r.out, eb, sizeof eb);
  assert_non_null(v);
  assert_string_equal(
      YAJL_GET_STRING(yajl_tree_get(v, (const char *[]){"answer", "rule", NULL}, yajl_t_string)),
      "pageable_copies");
  assert_string_equal(YAJL_GET_STRING(yajl_tree_get(
                          v, (const char *[]){"answer", "effect", "kind", NULL}, yajl_t_string)),
                      "what_if");
  assert_string_equal(
      YAJL_GET_STRING(yajl_tree_get(v, (const char *[]){"trace_source", NULL}, yajl_t_string)),
      "torch.profiler/Kineto");
  yajl_tree_free(v);
  free_result(&r);
  free(p);
}

/* Mangled kernel names (pinwheel's collector writes CUPTI's) come out demangled in every form,
 * as torch.profiler writes them; a name that only looks mangled stays as it was. */
static void test_demangled_names(void **state) {
  static const char *mangled =
      "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_13BinaryFunctorIfffNS0_15binary_"
      "internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_";
  char extra[1024];
  snprintf(extra, sizeof extra,
           ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":7,\"ts\":1000320,"
           "\"dur\":20,\"args\":{\"device\":0,\"stream\":7,\"correlation\":40}},"
           "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"_Znot_a_name\",\"pid\":0,\"tid\":7,"
           "\"ts\":1000345,\"dur\":10,\"args\":{\"device\":0,\"stream\":7,\"correlation\":41}}",
           mangled);
  char *p = write_kineto("mangled", 0, extra);
  const char *txt[] = {PW_CLI, "report", p, NULL};
  result r = run(txt, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "  void at::native::vectorized_elementwise_kernel<8, "
                                "at::native::BinaryFunctor<float, float, ...\n"));
  assert_non_null(strstr(r.out, "  _Znot_a_name\n"));
  assert_null(strstr(r.out, mangled));
  free_result(&r);
  const char *js[] = {PW_CLI, "report", "--format", "json", p, NULL};
  r = run(js, NULL);
  assert_non_null(strstr(r.out, "\"name\":\"void at::native::vectorized_elementwise_kernel"
                                "\\u003c8, at::native::BinaryFunctor\\u003cfloat, float, float, "
                                "at::native::binary_internal::MulFunctor\\u003cfloat> >, "
                                "std::array\\u003cchar*, 3ul> >(int, "));
  assert_null(strstr(r.out, mangled));
  free_result(&r);
  /* the model: the name is demangled once, at read time */
  char err[256];
  an_trace *t = an_load(p, NULL, err, sizeof err);
  assert_non_null(t);
  int found = 0;
  for (size_t i = 0; i < t->nops; i++)
    found |= !strncmp(an_name(t, t->ops[i].name), "void at::native::vectorized_", 28);
  assert_true(found);
  an_free(t);
}

/* One of a thing is singular: one GPU idle gap, one sync call in a finding. */
static void test_singular(void **state) {
  const char *doc =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"pid\":0,\"tid\":7,\"ts\":0,"
      "\"dur\":1000,\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"pid\":0,\"tid\":7,\"ts\":5000,"
      "\"dur\":1000,\"args\":{\"device\":0,\"stream\":7,\"correlation\":2}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaDeviceSynchronize\",\"pid\":1,"
      "\"tid\":1,\"ts\":1000,\"dur\":3500,\"args\":{\"correlation\":3}}]}";
  const char *argv[] = {PW_CLI, "report", write_bytes("one", doc, strlen(doc)), NULL};
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "\nGPU idle gaps >= 1 ms: 1\n"));
  assert_non_null(strstr(r.out, "gpu_gaps: 1 GPU idle gap of at least 1 ms: 4.000 ms\n"));
  assert_non_null(strstr(r.out, "in 1 sync call ("));
  assert_non_null(strstr(r.out, "\nhost syncs: 1 call, "));
  assert_null(strstr(r.out, " 1 calls"));
  assert_null(strstr(r.out, "1 GPU idle gaps"));
  free_result(&r);
}

/* A gzip file cut short: the offset is the decompressed data's, and said so. */
static void test_truncated_gz(void **state) {
  char *doc = slurp(write_kineto("gzsrc", 0, NULL));
  char gzp[128];
  snprintf(gzp, sizeof gzp, "/tmp/pwtest-cut-%d.json.gz", (int)getpid());
  gzFile gz = gzopen(gzp, "wb");
  gzwrite(gz, doc, (unsigned)strlen(doc));
  gzclose(gz);
  char *whole = NULL;
  FILE *f = fopen(gzp, "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  whole = malloc((size_t)n);
  assert_int_equal(fread(whole, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  char *cut = write_bytes("cut.json.gz", whole, (size_t)n / 2);
  expect_error(cut, "of the decompressed data (the gzip file ends early: it was cut short)");
  free(whole);
  free(doc);
  unlink(gzp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_schema_and_escaping),
      cmocka_unit_test(test_text_diff_and_ranks),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_messages_and_command_line),
      cmocka_unit_test(test_html_report),
      cmocka_unit_test(test_answer_first),
      cmocka_unit_test(test_demangled_names),
      cmocka_unit_test(test_singular),
      cmocka_unit_test(test_truncated_gz),
  };
  return an_test_cleanup(cmocka_run_group_tests(tests, NULL, NULL));
}
