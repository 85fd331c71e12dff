/* test_interpose.c — libpinwheel.so under a real LD_PRELOAD in front of a program linked against
 * the fake libcudart.so.13 (DESIGN.md §6).  Each case runs the program in a child process with a
 * clean environment and checks its output, its exit status and the exit summary. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "helpers.h"
#include "summary.h"

#define PRELOAD "LD_PRELOAD=" PW_SHIM

static char stats_path[256];
static char stats_env[300];

static int setup(void **state) {
  snprintf(stats_path, sizeof stats_path, "/tmp/pwtest-stats-%d.json", (int)getpid());
  snprintf(stats_env, sizeof stats_env, "PINWHEEL_STATS_FILE=%s", stats_path);
  return 0;
}

static void test_calls_pass_through_intact(void **state) {
  const char *modes[] = {"PINWHEEL_MODE=off", "PINWHEEL_MODE=observe", "PINWHEEL_MODE=stage"};
  const char *argv[] = {PW_PROG, "calls", NULL};
  for (int i = 0; i < 3; i++) {
    const char *env[] = {PRELOAD, modes[i], NULL};
    result r = run(argv, env);
    if (r.status != 0) fail_msg("%s: status %d\n%s%s", modes[i], r.status, r.out, r.err);
    assert_non_null(strstr(r.out, "calls ok"));
    assert_string_equal(r.err, "");
    free_result(&r);
  }
  /* and without the shim, the program's own checks hold too (the test can tell them apart) */
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  free_result(&r);
}

/* PINWHEEL_TRACE where CUPTI cannot be had: one warning, the program untouched (its output, its
 * exit status), no file.  In every mode. */
static void test_trace_without_cupti(void **state) {
  char trace[128], tenv[160];
  snprintf(trace, sizeof trace, "/tmp/pwtest-trace-%d-%%p.json", (int)getpid());
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", trace);
  const char *modes[] = {"PINWHEEL_MODE=off", "PINWHEEL_MODE=observe", "PINWHEEL_MODE=stage"};
  const char *argv[] = {PW_PROG, "calls", NULL};
  for (int i = 0; i < 3; i++) {
    const char *env[] = {PRELOAD, modes[i], tenv, "PINWHEEL_CUPTI=/nonexistent/libcupti.so.13",
                         NULL};
    result r = run(argv, env);
    if (r.status != 0) fail_msg("%s: status %d\n%s%s", modes[i], r.status, r.out, r.err);
    assert_non_null(strstr(r.out, "calls ok"));
    char *w = strstr(r.err, "cannot trace: PINWHEEL_CUPTI=/nonexistent/libcupti.so.13");
    if (!w) fail_msg("%s: no warning: '%s'", modes[i], r.err);
    assert_null(strstr(w + 1, "cannot trace")); /* once */
    free_result(&r);
  }
  /* a program that fails keeps its own status */
  const char *bad[] = {PW_PROG, "exit", "3", NULL};
  const char *env[] = {PRELOAD, tenv, "PINWHEEL_CUPTI=/nonexistent/libcupti.so.13", NULL};
  result r = run(bad, env);
  assert_int_equal(r.status, 3);
  free_result(&r);
  /* a process that never uses CUDA writes nothing, even where CUPTI exists */
  char fixed[160], fenv[200];
  snprintf(fixed, sizeof fixed, "/tmp/pwtest-trace-nocuda-%d.json", (int)getpid());
  snprintf(fenv, sizeof fenv, "PINWHEEL_TRACE=%s", fixed);
  const char *none[] = {PW_PROG, "none", NULL};
  const char *env2[] = {PRELOAD, fenv, NULL};
  r = run(none, env2);
  assert_int_equal(r.status, 3); /* what that program returns */
  assert_non_null(strstr(r.out, "threads 1"));
  assert_int_equal(access(fixed, F_OK), -1);
  free_result(&r);
}

/* The collector's whole path on a fake CUPTI: the trace is valid JSON with the records CUPTI
 * delivered (names as Kineto writes them), the forked child wrote no file, the exit status is
 * the program's; a CUPTI client of the program's own, starting mid-run (torch.profiler), gets
 * CUPTI after pinwheel has completed its file and said so once. */
static int count_files(const char *prefix) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls %s* 2>/dev/null | wc -l", prefix);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

/* What interpose_prog's CUPTI client prints when the handoff went right (see the first test) */
static const char prof_kinds_ok[] = "kinds enabled when the profiler registered: 1\n";
static const char prof_records_ok[] =
    "profiler got 2 buffers, 0 driver calls before it enabled their kind, 2 after";

static void test_trace_with_fake_cupti(void **state) {
  for (int prof = 0; prof < 2; prof++) {
    char prefix[128], tenv[200], path_glob[200];
    snprintf(prefix, sizeof prefix, "/tmp/pwtest-ftrace-%d-%d-", (int)getpid(), prof);
    snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s%%p.json", prefix);
    const char *argv[] = {PW_PROG, "traced", prof ? "profiler" : "plain", NULL};
    const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                         NULL};
    result r = run(argv, env);
    if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
    assert_non_null(strstr(r.out, "traced ok"));
    /* the writer thread takes only the CPU time the program leaves */
    assert_non_null(strstr(r.out, "idle threads 1\n"));
    assert_int_equal(count_files(prefix), 1); /* the forked child wrote nothing */
    snprintf(path_glob, sizeof path_glob, "ls %s*", prefix);
    FILE *p = popen(path_glob, "r");
    char path[256] = "";
    assert_non_null(fgets(path, sizeof path, p));
    pclose(p);
    path[strcspn(path, "\n")] = 0;
    yajl_val v = parse_file(path);
    yajl_val ev = yajl_tree_get(v, (const char *[]){"traceEvents", NULL}, yajl_t_array);
    assert_non_null(ev);
    char *text = slurp(path);
    assert_non_null(strstr(text, "\"name\":\"fake_kernel\""));
    assert_non_null(strstr(text, "\"name\":\"cudaMemcpyAsync\""));
    /* a query's record is switched off (each costs the program time; the report reads none) */
    assert_null(strstr(text, "cudaGetDevice"));
    /* of the driver's calls, those the report reads (a launch), not the runtime's many others */
    assert_non_null(strstr(text, "\"name\":\"cuLaunchKernel\""));
    assert_null(strstr(text, "cuCtxSetCurrent"));
    assert_non_null(strstr(text, "\"name\":\"Memcpy HtoD (Pageable -> Device)\""));
    assert_non_null(strstr(text, "\"dropped_records\":0"));
    free(text);
    yajl_tree_free(v);
    const char *w = strstr(r.err, "starts its own CUPTI profiler");
    if (prof) {
      assert_non_null(w);
      assert_null(strstr(w + 1, "starts its own CUPTI profiler"));
      /* pinwheel's kinds are disabled at the handoff, but the kernel kind the client enabled
       * before registering is kept (a bug once: every kind left on, so the client got records it
       * did not ask for, and CUPTI's cost went on after it stopped) */
      assert_non_null(strstr(r.out, prof_kinds_ok));
      /* no driver call's record until the client enables their kind (pinwheel switches none back
       * on by itself: call by call, that would record them with the kind off), then every one:
       * the calls pinwheel switched off are back (a cuLaunchKernel and a cuCtxSetCurrent) */
      assert_non_null(strstr(r.out, prof_records_ok));
    } else {
      assert_null(w);
      assert_string_equal(r.err, "");
    }
    unlink(path);
    free_result(&r);
  }
  /* without PINWHEEL_TRACE, in every mode: the program's own profiler (its libcupti in a local
   * scope, as PyTorch loads it) gets CUPTI through the shim's definition (a bug once:
   * torch.profiler recorded no GPU activity under the shim) */
  const char *modes[] = {"PINWHEEL_MODE=off", "PINWHEEL_MODE=observe", "PINWHEEL_MODE=stage"};
  for (int i = 0; i < 3; i++) {
    const char *pargv[] = {PW_PROG, "traced", "profiler", NULL};
    const char *penv[] = {PRELOAD, modes[i], "PINWHEEL_CUPTI=" PW_FAKE_CUPTI, NULL};
    result pr = run(pargv, penv);
    if (pr.status != 0 || !strstr(pr.out, prof_kinds_ok) || !strstr(pr.out, prof_records_ok))
      fail_msg("%s: status %d\n%s%s", modes[i], pr.status, pr.out, pr.err);
    assert_string_equal(pr.err, "");
    free_result(&pr);
  }
  /* the calls made inside cudnnCreate are marked as cuDNN's (the report's what-if leaves the
   * pinned memory it allocates out); no call of a run without cuDNN is */
  char cpath[160], cenv[200];
  snprintf(cpath, sizeof cpath, "/tmp/pwtest-ftrace-cudnn-%d.json", (int)getpid());
  snprintf(cenv, sizeof cenv, "PINWHEEL_TRACE=%s", cpath);
  for (int with = 0; with < 2; with++) {
    const char *cargv[] = {PW_PROG, "traced", with ? "cudnn" : "plain", NULL};
    const char *cnv[] = {PRELOAD, "PINWHEEL_MODE=observe", cenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                         NULL};
    result cr = run(cargv, cnv);
    if (cr.status != 0) fail_msg("status %d\n%s%s", cr.status, cr.out, cr.err);
    char *ctext = slurp(cpath);
    assert_true(!strstr(ctext, "\"pinwheel_cudnn\":1") == !with);
    free(ctext);
    unlink(cpath);
    free_result(&cr);
  }
  /* in stage mode, a copy pinwheel staged: the program's call is written with its own id, and
   * the operations issued for it carry that id and the mark */
  char tpath[160], tenv[200];
  snprintf(tpath, sizeof tpath, "/tmp/pwtest-ftrace-stage-%d.json", (int)getpid());
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", tpath);
  const char *argv[] = {PW_PROG, "traced", "plain", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI, NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  yajl_val v = parse_file(tpath);
  yajl_tree_free(v);
  char *text = slurp(tpath);
  assert_non_null(strstr(text, "\"correlation\":1099511627776,\"pinwheel_staged\":1"));
  /* the fake reports the last push: the second staged copy (ids count from 2^40) */
  assert_non_null(strstr(text, "\"correlation\":1099511627777,\"pinwheel_staged\":1"));
  assert_non_null(
      strstr(text, "\"correlation\":1099511627777,\"pinwheel\":1,\"cupti_correlation\":101"));
  free(text);
  unlink(tpath);
  free_result(&r);
}

static void test_observe_counts_exact(void **state) {
  const char *argv[] = {PW_PROG, "counts", "5", NULL};
  const char *env[] = {
      PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env,
      NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.err, "");
  yajl_val v = parse_summary(stats_path);
  assert_int_equal(jget(v, "calls", "cudaMemcpy", "calls", NULL), 10);
  assert_int_equal(jget(v, "calls", "cudaMemcpyAsync", "calls", NULL), 10);
  assert_int_equal(jget(v, "calls", "cudaLaunchKernel", "calls", NULL), 5);
  assert_int_equal(jget(v, "calls", "__cudaLaunchKernel", "calls", NULL), 10);
  assert_int_equal(jget(v, "calls", "cudaLaunchKernelExC", "calls", NULL), 0);
  assert_int_equal(jget(v, "calls", "cudaStreamSynchronize", "calls", NULL), 5);
  assert_int_equal(jget(v, "calls", "cudaDeviceSynchronize", "calls", NULL), 5);
  assert_int_equal(jget(v, "syncs", "calls", NULL), 10);
  assert_int_equal(jget(v, "launches", NULL), 15);
  assert_int_equal(copy_row(v, "H2D", "pageable", "device", "calls"), 5);
  assert_int_equal(copy_row(v, "H2D", "pageable", "device", "bytes"), 5000);
  assert_int_equal(copy_row(v, "H2D", "pinned", "device", "calls"), 5);
  assert_int_equal(copy_row(v, "H2D", "pinned", "device", "bytes"), 10000);
  assert_int_equal(copy_row(v, "D2H", "device", "pageable", "bytes"), 15000);
  assert_int_equal(copy_row(v, "D2D", "device", "device", "bytes"), 500);
  assert_int_equal(copy_row(v, "H2D", "pageable", "pinned", "calls"), -1);
  yajl_tree_free(v);
  free_result(&r);
}

/* NVTX ranges in a traced run: `pinwheel run --trace` points NVTX_INJECTION64_PATH at
 * libpinwheel_nvtx.so, whose InitializeInjectionNvtx2 hands the module's table to the collector's
 * CUPTI (the fake emits one range for it); the range is in the trace.  Not traced, no shim in the
 * process, or the variable set by another tool: NVTX gets 0 (its calls become no-ops) or the
 * other tool. */
static void test_trace_nvtx(void **state) {
  char tpath[128], tenv[160];
  snprintf(tpath, sizeof tpath, "/tmp/pwtest-nvtx-%d.json", (int)getpid());
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", tpath);
  const char *argv[] = {PW_CLI, "run", "--mode", "observe", "--trace",
                        tpath,  "--",  PW_PROG,  "nvtx",    NULL};
  const char *env[] = {"PINWHEEL_CUPTI=" PW_FAKE_CUPTI, NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  assert_non_null(strstr(r.out, "nvtx: libpinwheel_nvtx.so init 1"));
  free_result(&r);
  yajl_val v = parse_file(tpath);
  assert_non_null(yajl_tree_get(v, (const char *[]){"traceEvents", NULL}, yajl_t_array));
  yajl_tree_free(v);
  char *text = slurp(tpath);
  assert_non_null(strstr(text, "\"cat\":\"user_annotation\",\"name\":\"fake_range#1\""));
  free(text);
  unlink(tpath);
  /* no trace asked for: the launcher sets nothing */
  const char *plain[] = {PW_CLI, "run", "--", PW_PROG, "nvtx", NULL};
  r = run(plain, env);
  assert_non_null(strstr(r.out, "nvtx: no injection library"));
  free_result(&r);
  /* another tool's injection library is kept */
  const char *other[] = {"PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                         "NVTX_INJECTION64_PATH=/nonexistent/libtool.so", NULL};
  r = run(argv, other);
  assert_non_null(strstr(r.out, "nvtx: libtool.so init -1"));
  free_result(&r);
  unlink(tpath);
  /* the injection library with the shim but no trace asked for, and with a trace asked for but
   * no shim in the process: 0 */
  const char *direct[] = {PW_PROG, "nvtx", NULL};
  const char *untraced[] = {PRELOAD, "NVTX_INJECTION64_PATH=" PW_NVTX,
                            "PINWHEEL_CUPTI=" PW_FAKE_CUPTI, NULL};
  r = run(direct, untraced);
  assert_non_null(strstr(r.out, "nvtx: libpinwheel_nvtx.so init 0"));
  free_result(&r);
  const char *noshim[] = {"NVTX_INJECTION64_PATH=" PW_NVTX, tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                          NULL};
  r = run(direct, noshim);
  assert_non_null(strstr(r.out, "nvtx: libpinwheel_nvtx.so init 0"));
  free_result(&r);
}

/* How many times s occurs in the file at path. */
static int count_in(const char *path, const char *s) {
  char *text = slurp(path);
  int n = 0;
  for (const char *p = text; p && (p = strstr(p, s)); p += strlen(s))
    n++;
  free(text);
  return n;
}

/* The capture window (`pinwheel run --trace-*`): a program with a start-up phase and a loop of 10
 * iterations (its batch copied in, kernels 1-3, a result copied out), on the fake CUPTI, which
 * records every copy and launch.  --trace-steps 4-7 holds exactly iterations 4 to 7, in every
 * mode the loop is seen (off: the untouched program), and the report on it infers 4 steps;
 * cudaProfilerStart/Stop around iterations 4-6 hold those three; a delay into the pause after
 * iteration 5 holds iterations 6-10 and the teardown copy; a delay past the run's end holds no
 * call, and says nothing about it (no range was asked for). */
static void test_trace_window(void **state) {
  (void)state;
  char tpath[160];
  snprintf(tpath, sizeof tpath, "/tmp/pwtest-window-%d.json", (int)getpid());
  const char *env[] = {"PINWHEEL_CUPTI=" PW_FAKE_CUPTI, "FAKE_CUPTI_CALLS=1", NULL};
  static const struct {
    const char *mode, *flag, *value, *how;
    int kernels, startup, teardown;
  } cases[] = {
      {"observe", "--trace-steps", "4-7", "plain", 4, 0, 0},
      {"off", "--trace-steps", "4-7", "plain", 4, 0, 0},
      {"stage", "--trace-steps", "3-3", "plain", 1, 0, 0},
      {"observe", "--trace-capture", "cudaProfilerApi", "profiler", 3, 0, 0},
      {"observe", "--trace-delay", "0.3", "pause", 5, 0, 1},
      {"observe", "--trace-delay", "30s", "plain", 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *argv[] = {PW_CLI, "run",         "--mode",       cases[i].mode, "--trace",
                          tpath,  cases[i].flag, cases[i].value, "--",          PW_PROG,
                          "loop", "10",          cases[i].how,   NULL};
    result r = run(argv, env);
    if (r.status != 0) fail_msg("case %zu: status %d\n%s%s", i, r.status, r.out, r.err);
    yajl_val v = parse_file(tpath);
    assert_non_null(yajl_tree_get(v, (const char *[]){"traceEvents", NULL}, yajl_t_array));
    yajl_tree_free(v);
    int k[4];
    for (int j = 1; j <= 3; j++) {
      char name[64];
      snprintf(name, sizeof name, "\"name\":\"fake_kernel_%d\"", j);
      k[j] = count_in(tpath, name);
    }
    if (k[1] != cases[i].kernels || k[2] != k[1] || k[3] != k[1])
      fail_msg("case %zu (%s %s): kernels %d %d %d, want %d", i, cases[i].flag, cases[i].value,
               k[1], k[2], k[3], cases[i].kernels);
    assert_int_equal(count_in(tpath, "\"name\":\"fake_kernel_0\""), cases[i].startup);
    /* the file says which window it holds */
    assert_int_equal(count_in(tpath, "\"capture\":\""), 1);
    assert_int_equal(count_in(tpath, "\"bytes\":1000}"), cases[i].teardown);
    /* each kept copy and launch with its call: 5 calls an iteration (staged, the H2D copy is
     * pinwheel's calls and the program's) */
    if (cases[i].kernels && !cases[i].teardown && strcmp(cases[i].mode, "stage"))
      assert_int_equal(count_in(tpath, "\"cat\":\"cuda_runtime\""), 5 * cases[i].kernels);
    if (!strcmp(cases[i].flag, "--trace-steps") && cases[i].kernels >= 3) {
      const char *rargv[] = {PW_CLI, "report", tpath, NULL};
      result rr = run(rargv, NULL);
      char want[64];
      snprintf(want, sizeof want, "steps inferred: %d iterations", cases[i].kernels);
      if (!strstr(rr.out, want)) fail_msg("case %zu: report says\n%s%s", i, rr.out, rr.err);
      free_result(&rr);
    }
    assert_null(strstr(r.err, "never"));
    free_result(&r);
    unlink(tpath);
  }
  /* a first iteration unlike the others: the loop is recognised at iteration 4, which the trace
   * starts with, and a warning says so */
  const char *odd[] = {PW_CLI, "run",   "--trace", tpath, "--trace-steps", "3-6",
                       "--",   PW_PROG, "loop",    "10",  "odd",           NULL};
  result ro = run(odd, env);
  assert_int_equal(ro.status, 0);
  assert_non_null(strstr(ro.err, "recognised at iteration 4"));
  assert_int_equal(count_in(tpath, "\"capture\":\"iterations 3-6\"}"), 1);
  assert_int_equal(count_in(tpath, "\"name\":\"fake_kernel_1\""), 3);
  assert_int_equal(count_in(tpath, "\"name\":\"fake_kernel_0\""), 0);
  free_result(&ro);
  unlink(tpath);
  /* a range the loop never reaches: an empty trace, and one warning */
  const char *argv[] = {PW_CLI,  "run",  "--trace", tpath, "--trace-steps", "11-12", "--",
                        PW_PROG, "loop", "10",      NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "iterations 11-12 never came"));
  assert_int_equal(count_in(tpath, "\"cat\":\"kernel\""), 0);
  free_result(&r);
  unlink(tpath);
  /* an iteration range the loop cannot be recognised by (A < 3): a usage error */
  const char *bad[] = {PW_CLI,  "run",  "--trace", tpath, "--trace-steps", "2-5", "--",
                       PW_PROG, "loop", "10",      NULL};
  r = run(bad, env);
  assert_int_equal(r.status, 2);
  free_result(&r);
  /* a window without a trace: a usage error too */
  const char *notrace[] = {PW_CLI, "run", "--trace-delay", "1", "--", PW_PROG, "loop", "3", NULL};
  r = run(notrace, env);
  assert_int_equal(r.status, 2);
  assert_non_null(
      strstr(r.err, "pinwheel run: --trace-delay (PINWHEEL_TRACE_DELAY) needs a trace"));
  free_result(&r);
}

/* A trace named *.gz is gzip (a bug once: plain JSON under a .gz name, which the analyzer read but
 * gzip-only tools did not), and decompresses to the same valid trace. */
static void test_trace_gz(void **state) {
  char tpath[160], tenv[200], cmd[400];
  snprintf(tpath, sizeof tpath, "/tmp/pwtest-ftrace-gz-%d.json.gz", (int)getpid());
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", tpath);
  const char *argv[] = {PW_PROG, "traced", "plain", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                       NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  assert_string_equal(r.err, "");
  FILE *f = fopen(tpath, "rb");
  assert_non_null(f);
  unsigned char magic[2] = {0, 0};
  assert_int_equal(fread(magic, 1, 2, f), 2);
  fclose(f);
  assert_true(magic[0] == 0x1f && magic[1] == 0x8b);
  char plain[200];
  snprintf(plain, sizeof plain, "%s.plain", tpath);
  snprintf(cmd, sizeof cmd, "gzip -dc %s > %s", tpath, plain);
  assert_int_equal(system(cmd), 0);
  yajl_val v = parse_file(plain);
  assert_non_null(yajl_tree_get(v, (const char *[]){"traceEvents", NULL}, yajl_t_array));
  char *text = slurp(plain);
  assert_non_null(strstr(text, "\"name\":\"fake_kernel\""));
  free(text);
  yajl_tree_free(v);
  unlink(plain);
  unlink(tpath);
  free_result(&r);
}

static void test_text_summary(void **state) {
  const char *argv[] = {PW_PROG, "counts", "3", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "summary (pinwheel"));
  assert_non_null(strstr(r.err, "H2D pageable -> device"));
  assert_non_null(strstr(r.err, "D2H device -> pageable"));
  assert_non_null(strstr(r.err, "cudaStreamSynchronize"));
  assert_non_null(strstr(r.err, "__cudaLaunchKernel                      6"));
  free_result(&r);
}

static void test_off_counts_nothing(void **state) {
  const char *argv[] = {PW_PROG, "counts", "2", NULL};
  const char *env[] = {
      PRELOAD, "PINWHEEL_MODE=off", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env,
      NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  yajl_val v = parse_summary(stats_path);
  assert_int_equal(jget(v, "intercepted", NULL), 0);
  const char *pm[] = {"mode", NULL};
  assert_true(str_is(yajl_tree_get(v, pm, yajl_t_string), "off"));
  yajl_tree_free(v);
  free_result(&r);
}

static void test_unrelated_program_unchanged(void **state) {
  const char *sh[] = {"/bin/sh", "-c", "echo hi; ls / >/dev/null; echo err >&2; exit 3", NULL};
  const char *env[] = {PRELOAD, NULL};
  result a = run(sh, NULL), b = run(sh, env);
  assert_int_equal(a.status, 3);
  assert_int_equal(b.status, a.status);
  assert_string_equal(b.out, a.out);
  assert_string_equal(b.err, a.err);
  free_result(&a);
  free_result(&b);
  /* a program linked with CUDA that never calls it: same output, no thread started */
  const char *none[] = {PW_PROG, "none", NULL};
  a = run(none, NULL);
  b = run(none, env);
  assert_int_equal(b.status, 3);
  assert_string_equal(b.out, a.out);
  assert_non_null(strstr(b.out, "threads 1"));
  assert_string_equal(b.err, "");
  free_result(&a);
  free_result(&b);
  /* the command `pinwheel run --stats` started says plainly that nothing was intercepted */
  const char *launched[] = {PW_CLI, "run", "--stats", "--", PW_PROG, "none", NULL};
  b = run(launched, NULL);
  assert_non_null(strstr(b.err, "no CUDA call was intercepted"));
  free_result(&b);
  /* a helper process that is not the launched command stays quiet */
  const char *env3[] = {PRELOAD, "PINWHEEL_STATS=1", "PINWHEEL_ROOT_PID=1", NULL};
  b = run(none, env3);
  assert_string_equal(b.err, "");
  free_result(&b);
}

/* No driver (or one too old): the program's first CUDA call fails and it exits; pinwheel run's
 * summary names the cause, says nothing was staged or traced, and the trace that was asked for
 * says why it is not written (it once said "the program may not use CUDA", and nothing of the
 * trace). */
static void test_no_driver_named(void **state) {
  char tpath[96];
  snprintf(tpath, sizeof tpath, "/tmp/pwtest-nodriver-%d.json", (int)getpid());
  unlink(tpath);
  const char *argv[] = {PW_CLI, "run",   "--stats",  "--trace", tpath,
                        "--",   PW_PROG, "nodriver", NULL};
  const char *nodrv[] = {"FAKE_NO_DRIVER=1", NULL};
  result r = run(argv, nodrv);
  assert_int_equal(r.status, 1);
  if (!strstr(r.err, "CUDA is unusable here: no NVIDIA driver is installed") ||
      !strstr(r.err, "nothing was staged or traced") || !strstr(r.err, "no trace written to") ||
      strstr(r.err, "may not use CUDA"))
    fail_msg("stderr:\n%s", r.err);
  free_result(&r);
  assert_int_equal(access(tpath, F_OK), -1);
  const char *old[] = {"FAKE_OLD_DRIVER=1", NULL};
  const char *argv2[] = {PW_CLI, "run", "--stats", "--", PW_PROG, "nodriver", NULL};
  r = run(argv2, old);
  if (!strstr(r.err, "the NVIDIA driver supports CUDA 12.0, older than the program's runtime 13.0"))
    fail_msg("stderr:\n%s", r.err);
  free_result(&r);
  /* with a driver, a program that uses no CUDA gets the note it always got */
  const char *none[] = {PW_CLI, "run", "--stats", "--", PW_PROG, "none", NULL};
  r = run(none, NULL);
  assert_non_null(strstr(r.err, "no CUDA call was intercepted"));
  assert_null(strstr(r.err, "unusable"));
  free_result(&r);
  (void)state;
}

/* Stray summaries: under the manual LD_PRELOAD=... PINWHEEL_STATS=1, a process that never
 * intercepted a CUDA call prints nothing and writes no file (a bug once: every process printed
 * "no CUDA call was intercepted", 33 of them for `python3 -c pass` through a version manager's
 * scripts, and one landed in a subprocess's captured stderr). */
static void test_no_cuda_no_summary(void **state) {
  const char *none[] = {PW_PROG, "none", NULL};
  const char *sh[] = {"/bin/sh", "-c", "echo hi", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_STATS=1", NULL};
  result r = run(none, env);
  assert_int_equal(r.status, 3);
  assert_string_equal(r.err, "");
  free_result(&r);
  r = run(sh, env);
  assert_string_equal(r.out, "hi\n");
  assert_string_equal(r.err, "");
  free_result(&r);
  unlink(stats_path);
  const char *envf[] = {PRELOAD, "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env, NULL};
  r = run(none, envf);
  assert_int_equal(access(stats_path, F_OK), -1);
  free_result(&r);
}

/* Two processes share one PINWHEEL_STATS_FILE without %p, a shell that never uses CUDA runs them:
 * both summaries are there, whole, one JSON object a line, and the shell wrote none (a bug once:
 * a later process that never used CUDA replaced the summary of one that did). */
static void test_shared_summary_file(void **state) {
  char script[600];
  snprintf(script, sizeof script, "%s counts 1 & %s counts 2; wait; %s none; true", PW_PROG,
           PW_PROG, PW_PROG);
  const char *sh[] = {"/bin/sh", "-c", script, NULL};
  const char *env[] = {
      PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env,
      NULL};
  unlink(stats_path);
  result r = run(sh, env);
  assert_int_equal(r.status, 0);
  free_result(&r);
  char *text = slurp(stats_path);
  assert_non_null(text);
  long long memcpys = 0;
  int lines = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
    char eb[256];
    yajl_val v = yajl_tree_parse(line, eb, sizeof eb);
    if (!v) fail_msg("line %d is not JSON (%s): %s", lines, eb, line);
    memcpys += jget(v, "calls", "cudaMemcpy", "calls", NULL);
    yajl_tree_free(v);
  }
  free(text);
  unlink(stats_path);
  assert_int_equal(lines, 2);
  assert_int_equal(memcpys, 2 * 1 + 2 * 2);
}

/* pinwheel writes to the stderr the program had when pinwheel loaded: a program that closed
 * stderr and opened its data file as fd 2 finds nothing of pinwheel's in it (the warning and the
 * summary go to the original stderr); coreutils close stderr at exit, and the summary of
 * `pinwheel run --stats -- /bin/echo hi` still prints. */
static void test_stderr_as_loaded(void **state) {
  char data[128];
  snprintf(data, sizeof data, "/tmp/pwtest-data-%d.txt", (int)getpid());
  const char *argv[] = {PW_PROG, "reopen2", data, NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", "PINWHEEL_CHUNK=12Q",
                       NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  char *text = slurp(data);
  assert_non_null(text);
  assert_string_equal(text, "the program's data\n");
  free(text);
  unlink(data);
  assert_non_null(strstr(r.err, "PINWHEEL_CHUNK=12Q is not valid"));
  assert_non_null(strstr(r.err, "summary (pinwheel"));
  free_result(&r);
  if (access("/bin/echo", X_OK) != 0) return;
  const char *echo[] = {PW_CLI, "run", "--stats", "--", "/bin/echo", "hi", NULL};
  r = run(echo, NULL);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "hi\n");
  assert_non_null(strstr(r.err, "summary (pinwheel"));
  free_result(&r);
}

/* The summary and trace files are never opened through a symlink (one planted at a predictable
 * name would make pinwheel write into the file it points to): the target is untouched, the
 * summary goes to stderr with an error, the run is untraced with a warning. */
static void test_planted_symlinks(void **state) {
  char target[128], tlink[160], tenv[200];
  snprintf(target, sizeof target, "/tmp/pwtest-precious-%d", (int)getpid());
  FILE *f = fopen(target, "w");
  assert_non_null(f);
  fputs("precious\n", f);
  fclose(f);
  unlink(stats_path);
  assert_int_equal(symlink(target, stats_path), 0);
  const char *argv[] = {PW_PROG, "counts", "1", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", stats_env, NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "it is a symbolic link; summary goes to stderr"));
  assert_non_null(strstr(r.err, "summary (pinwheel"));
  free_result(&r);
  unlink(stats_path);
  snprintf(tlink, sizeof tlink, "/tmp/pwtest-tlink-%d.json", (int)getpid());
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", tlink);
  assert_int_equal(symlink(target, tlink), 0);
  const char *targv[] = {PW_PROG, "traced", "plain", NULL};
  const char *tenvs[] = {PRELOAD, "PINWHEEL_MODE=observe", tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                         NULL};
  r = run(targv, tenvs);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "it is a symbolic link; the program runs untraced"));
  free_result(&r);
  char *text = slurp(target);
  assert_string_equal(text, "precious\n");
  free(text);
  unlink(tlink);
  unlink(target);
}

/* A child exec'd with its parent's PINWHEEL_TRACE (no %p) while the parent's trace is open does
 * not truncate it: it writes NAME-pidN.json, says so, and both traces are whole. */
static void test_exec_child_trace(void **state) {
  char prefix[128], tpath[160], tenv[200];
  snprintf(prefix, sizeof prefix, "/tmp/pwtest-xtrace-%d", (int)getpid());
  snprintf(tpath, sizeof tpath, "%s.json", prefix);
  snprintf(tenv, sizeof tenv, "PINWHEEL_TRACE=%s", tpath);
  const char *argv[] = {PW_PROG, "exec-traced", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", tenv, "PINWHEEL_CUPTI=" PW_FAKE_CUPTI,
                       NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  assert_non_null(strstr(r.out, "exec-traced ok"));
  assert_non_null(strstr(r.err, "is being written by another process; this one's goes to"));
  free_result(&r);
  assert_int_equal(count_files(prefix), 2);
  char cmd[300], child[256] = "";
  snprintf(cmd, sizeof cmd, "ls %s-pid*.json", prefix);
  FILE *p = popen(cmd, "r");
  assert_non_null(fgets(child, sizeof child, p));
  pclose(p);
  child[strcspn(child, "\n")] = 0;
  const char *files[] = {tpath, child};
  for (int i = 0; i < 2; i++) {
    yajl_val v = parse_file(files[i]);
    assert_non_null(yajl_tree_get(v, (const char *[]){"traceEvents", NULL}, yajl_t_array));
    yajl_tree_free(v);
    char *text = slurp(files[i]);
    assert_non_null(strstr(text, "\"name\":\"fake_kernel\""));
    free(text);
    unlink(files[i]);
  }
}

static void test_fork_child_reports_only_its_own(void **state) {
  char dir[] = "/tmp/pwtest-fork-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char envf[300];
  snprintf(envf, sizeof envf, "PINWHEEL_STATS_FILE=%s/%%p.json", dir);
  const char *argv[] = {PW_PROG, "fork", NULL};
  const char *env[] = {
      PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", envf, NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "fork child status 0"));
  DIR *d = opendir(dir);
  struct dirent *de;
  int files = 0;
  long long memcpys[2] = {0, 0};
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    yajl_val v = parse_file(p);
    if (files < 2) memcpys[files] = jget(v, "calls", "cudaMemcpy", "calls", NULL);
    files++;
    yajl_tree_free(v);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
  assert_int_equal(files, 2);
  /* parent: two rounds (2 cudaMemcpy each); child: one round, counted from zero */
  assert_int_equal(memcpys[0] + memcpys[1], 6);
  assert_true(memcpys[0] == 2 || memcpys[1] == 2);
  free_result(&r);
}

static void test_threads_counts_exact(void **state) {
  const char *argv[] = {PW_PROG, "threads", "8", "3000", NULL};
  const char *env[] = {
      PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env,
      NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  yajl_val v = parse_summary(stats_path);
  assert_int_equal(jget(v, "calls", "__cudaLaunchKernel", "calls", NULL), 24000);
  assert_int_equal(jget(v, "calls", "cudaMemcpyAsync", "calls", NULL), 24000);
  assert_int_equal(copy_row(v, "H2D", "pageable", "device", "bytes"), 24000LL * 512);
  yajl_tree_free(v);
  free_result(&r);
}

/* Run argv in stage mode (the JSON summary to stats_path) with extra environment. */
static yajl_val run_staged(const char *const *argv, const char *const *extra, int expect_status) {
  const char *env[16] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_STATS=1",
                         "PINWHEEL_STATS_FORMAT=json", stats_env};
  int n = 5;
  for (int i = 0; extra && extra[i]; i++)
    env[n++] = extra[i];
  env[n] = NULL;
  result r = run(argv, env);
  if (r.status != expect_status) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  free_result(&r);
  return parse_summary(stats_path);
}

/* What the shim's unmap.c needs, asked without it: PROCMAP_QUERY and /dev/shm with 1 GiB free. */
static int shm_unmap_usable(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t q[13] = {sizeof q, 0, (uintptr_t)&shm_unmap_usable}; /* size, flags, address */
  int r = ioctl(fd, _IOWR('f', 17, uint64_t[13]), q), err = errno;
  close(fd);
  if (r && (err == ENOTTY || err == EINVAL)) return 0;
  struct statfs s;
  return statfs("/dev/shm", &s) == 0 && (uint64_t)s.f_bavail * (uint64_t)s.f_bsize >= (1ull << 30);
}

static yajl_val run_stage(const char *mode, const char *const *extra, int expect_status) {
  const char *argv[] = {PW_PROG, mode, NULL};
  return run_staged(argv, extra, expect_status);
}

/* Every fallback's calls in a summary, summed; no reason is named setting_up any more (a copy
 * that finds its device not set up sets it up and waits). */
static long long all_fallbacks(yajl_val v) {
  const char *p[] = {"fallbacks", NULL};
  yajl_val f = yajl_tree_get(v, p, yajl_t_object);
  assert_non_null(f);
  long long n = 0;
  for (size_t i = 0; i < f->u.object.len; i++) {
    assert_string_not_equal(f->u.object.keys[i], "setting_up");
    n += jget(f->u.object.values[i], "calls", NULL);
  }
  return n;
}

/* The first copies of `first T` (T threads, one H2D and one D2H copy of 1 MiB each, bytes
 * compared by the program): all staged, none a fallback, one pinned pool (8 MiB) allocated. */
static void check_first_copies(yajl_val v, long long t) {
  long long h2d =
      jget(v, "staging", "ring", "calls", NULL) + jget(v, "staging", "pinned_only", "calls", NULL);
  assert_int_equal(h2d, t);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), t);
  assert_int_equal(all_fallbacks(v), 0);
  assert_int_equal(jget(v, "staging", "pinned_bytes", NULL), 8 << 20);
  assert_true(jget(v, "staging", "setup_ns", NULL) > 0);
}

/* The very first eligible copy of a process is staged: it sets the device up (pool, ring, side
 * stream) on its own thread and waits, never goes to CUDA unchanged. */
static void test_first_copy_staged(void **state) {
  const char *argv[] = {PW_PROG, "first", "1", NULL};
  const char *extra[] = {"PINWHEEL_HOST_POOL=8M", NULL};
  yajl_val v = run_staged(argv, extra, 0);
  check_first_copies(v, 1);
  yajl_tree_free(v);
}

/* Eight threads make their first copies to one device at once, while the pool is being pinned
 * (slowly: 200 ms): one of them sets the device up, the others wait for it; every copy is staged
 * with the right bytes, and the pool is allocated once. */
static void test_first_copies_of_threads_staged(void **state) {
  const char *argv[] = {PW_PROG, "first", "8", NULL};
  const char *extra[] = {"PINWHEEL_HOST_POOL=8M", "FAKE_HOSTALLOC_SLEEP_MS=200", NULL};
  yajl_val v = run_staged(argv, extra, 0);
  check_first_copies(v, 8);
  assert_true(jget(v, "staging", "setup_ns", NULL) >= 200000000);
  yajl_tree_free(v);
}

/* The process's first eligible copy made at exit, after CUDA's teardown: a program's exit handler
 * registered before its first CUDA call runs after CUDA's (handlers run newest first; CUDA, and the
 * fake, registers its teardown at its first call), and pinwheel's own ran before both.  Here the
 * copy's checks pass (the fake's queries still answer), so the copy sets the device up, and the
 * pool's allocation answers cudaErrorCudartUnloading: pinwheel says so at INFO, not as a warning,
 * and the copy goes to CUDA, which answers it with the same error.  The process exits 0, and at the
 * default log level pinwheel prints nothing.  (Real CUDA may already refuse one of the checks'
 * queries there: the copy then falls back as query_failed, also without a word.) */
static void test_first_copy_at_exit(void **state) {
  const char *argv[] = {PW_PROG, "atexitcopy", NULL};
  for (int info = 0; info < 2; info++) {
    const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_HOST_POOL=8M",
                         info ? "PINWHEEL_LOG=info" : NULL, NULL};
    result r = run(argv, env);
    if (r.status != 0 || !strstr(r.out, "exit copy: status 4\n")) /* cudaErrorCudartUnloading */
      fail_msg("status %d\n%s%s", r.status, r.out, r.err);
    if (!info && strstr(r.err, "pinwheel["))
      fail_msg("pinwheel printed at the default level:\n%s", r.err);
    if (info && (strstr(r.err, "warning: ") || strstr(r.err, "error: ") ||
                 !strstr(r.err, "staging memory (CUDA error 4: CUDA is shutting down)")))
      fail_msg("not the setup's INFO line alone:\n%s", r.err);
    free_result(&r);
  }
}

/* PINWHEEL_SETUP was removed (setup is always on the first copy's thread): set, it warns once,
 * naming it removed, and is otherwise ignored: the first copy is staged all the same. */
static void test_setup_option_removed(void **state) {
  const char *argv[] = {PW_PROG, "first", "1", NULL};
  const char *env[] = {
      PRELOAD,   "PINWHEEL_MODE=stage",   "PINWHEEL_STATS=1",          "PINWHEEL_STATS_FORMAT=json",
      stats_env, "PINWHEEL_HOST_POOL=8M", "PINWHEEL_SETUP=background", NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  yajl_val v = parse_summary(stats_path); /* first: it removes the file, the next test's */
  const char *want = "PINWHEEL_SETUP was removed and is ignored (";
  const char *w = strstr(r.err, want);
  if (!w) fail_msg("no warning:\n%s", r.err);
  if (strstr(w + 1, want)) fail_msg("twice:\n%s", r.err);
  free_result(&r);
  check_first_copies(v, 1);
  yajl_tree_free(v);
}

/* The staging threads' default follows the CPUs the process may use and the local ranks: under
 * `taskset -c 0` one thread; two CPUs shared by LOCAL_WORLD_SIZE=2 ranks, one each; an explicit
 * PINWHEEL_THREADS wins.  Reported as staging.threads. */
static long long threads_under(const char *cpus, const char *const *extra) {
  const char *argv[] = {"/usr/bin/taskset", "-c", cpus, PW_PROG, "stage", NULL};
  yajl_val v = run_staged(argv, extra, 0);
  long long t = jget(v, "staging", "threads", NULL);
  assert_true(jget(v, "staging", "ring", "calls", NULL) > 0);
  yajl_tree_free(v);
  return t;
}

static void test_default_threads_follow_cpus(void **state) {
  if (access("/usr/bin/taskset", X_OK) != 0) skip();
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  assert_int_equal(threads_under("0", NULL), 1);
  if (ncpu >= 2) {
    assert_int_equal(threads_under("0,1", NULL), 2);
    const char *two_ranks[] = {"LOCAL_WORLD_SIZE=2", NULL};
    assert_int_equal(threads_under("0,1", two_ranks), 1);
  }
  const char *forced[] = {"PINWHEEL_THREADS=5", NULL};
  assert_int_equal(threads_under("0", forced), 5);
}

/* Regression: a pointer query that fails is counted as query_failed, not as a source that is not
 * pageable; the program's copies go to CUDA intact and its error state stays clean. */
static void test_failed_query_is_query_failed(void **state) {
  const char *fail[] = {"FAKE_POINTER_ATTR_FAIL=1", NULL};
  yajl_val v = run_stage("stage", fail, 0);
  assert_true(jget(v, "fallbacks", "query_failed", "calls", NULL) >= 21);
  assert_int_equal(jget(v, "fallbacks", "src_not_pageable", "calls", NULL), 0);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 0);
  yajl_tree_free(v);
}

static void test_stage_bytes_and_paths(void **state) {
  /* default sizes: ring path for H2D, staged D2H */
  yajl_val v = run_stage("stage", NULL, 0);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 21);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 21);
  assert_int_equal(jget(v, "staging", "pinned_only", "calls", NULL), 0);
  yajl_tree_free(v);
  /* a small ring and pool: pieces, wrap-around and back-pressure */
  const char *small[] = {"PINWHEEL_DEVICE_RING=4M", "PINWHEEL_HOST_POOL=1M", "PINWHEEL_CHUNK=128K",
                         NULL};
  v = run_stage("stage", small, 0);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 21);
  assert_true(jget(v, "staging", "ring_pieces", NULL) > 21);
  yajl_tree_free(v);
  /* no ring: pinned-only path */
  const char *noring[] = {"PINWHEEL_DEVICE_RING=0", NULL};
  v = run_stage("stage", noring, 0);
  assert_int_equal(jget(v, "staging", "pinned_only", "calls", NULL), 21);
  assert_int_equal(jget(v, "staging", "ring_bytes", NULL), 0);
  yajl_tree_free(v);
  /* the ring's cudaMalloc fails: pinned-only, still right */
  const char *ringfail[] = {"FAKE_MALLOC_FAIL_ABOVE=100000000", NULL};
  v = run_stage("stage", ringfail, 0);
  assert_int_equal(jget(v, "staging", "pinned_only", "calls", NULL), 21);
  yajl_tree_free(v);
  /* pinned allocation fails: every copy goes to CUDA unchanged, still right */
  const char *hostfail[] = {"FAKE_HOSTALLOC_FAIL=1", "PINWHEEL_LOG=error", NULL};
  v = run_stage("stage", hostfail, 0);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 0);
  assert_int_equal(jget(v, "fallbacks", "no_state", "calls", NULL), 42);
  yajl_tree_free(v);
}

/* The program's own staging through the runtime (CuPy's asarray, PyTorch's pin_memory): pinned
 * memory from cudaHostAlloc, cudaMallocHost and cudaHostRegister is recorded, and in stage mode
 * its large memmove and memcpy into (5) and out of (1) it run on the staging threads; overlapping,
 * small, and copies into memory unregistered or freed (the same addresses mapped again) are
 * glibc's; the program's byte checks pass throughout.  Observe mode threads none of them. */
static void test_runtime_host_copies(void **state) {
  const char *argv[] = {PW_PROG, "hostcopy", NULL};
  const char *four[] = {"PINWHEEL_THREADS=4", NULL};
  yajl_val v = run_staged(argv, four, 0);
  assert_int_equal(jget(v, "staging", "host_copies_into_pinned", "calls", NULL), 5);
  assert_int_equal(jget(v, "staging", "host_copies_into_pinned", "bytes", NULL),
                   4LL * ((8 << 20) + 3) + (8 << 20) - 2);
  assert_int_equal(jget(v, "staging", "host_copies_out_of_pinned", "calls", NULL), 1);
  assert_int_equal(jget(v, "calls", "cudaHostAlloc", "calls", NULL), 1);
  assert_int_equal(jget(v, "calls", "cudaMallocHost", "calls", NULL), 1);
  assert_int_equal(jget(v, "calls", "cudaHostRegister", "calls", NULL), 1);
  assert_int_equal(jget(v, "calls", "cudaHostUnregister", "calls", NULL), 1);
  assert_int_equal(jget(v, "calls", "cudaFreeHost", "calls", NULL), 2);
  yajl_tree_free(v);
  /* PINWHEEL_HOST_COPIES=0 was removed: set, it is ignored and the copies still threaded */
  const char *off[] = {"PINWHEEL_THREADS=4", "PINWHEEL_HOST_COPIES=0", NULL};
  v = run_staged(argv, off, 0);
  assert_int_equal(jget(v, "staging", "host_copies_into_pinned", "calls", NULL), 5);
  assert_int_equal(jget(v, "staging", "host_copies_out_of_pinned", "calls", NULL), 1);
  yajl_tree_free(v);
  const char *observe[] = {
      PRELOAD, "PINWHEEL_MODE=observe", "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json", stats_env,
      NULL};
  result o = run(argv, observe);
  if (o.status != 0) fail_msg("observe: status %d\n%s%s", o.status, o.out, o.err);
  free_result(&o);
  v = parse_summary(stats_path);
  assert_int_equal(jget(v, "staging", "host_copies_into_pinned", "calls", NULL), 0);
  assert_int_equal(jget(v, "calls", "cudaHostAlloc", "calls", NULL), 1);
  yajl_tree_free(v);
  /* and without the shim the program's checks pass too */
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  free_result(&r);
}

/* A fill-ahead run of interpose_prog `mode`, and its summary's counts: each of "allocs",
 * "fills.calls", "used.calls" and then the reasons given in pairs (name, count), NULL-ended.
 * An upload the program's copy did not come for within 100 ms (expired), or whose record the
 * upload thread did not make within the 50 ms a copy waits (upload_failed), is given up as it
 * must be, bytes right: that only a loaded machine does (the tests run in parallel on two
 * CPUs did), so such a run is made again, three times at most, and the counts are those of
 * the last. */
static void expect_fill_ahead(const char *mode, long long allocs, long long fills, long long used,
                              ...) {
  const char *argv[] = {PW_PROG, mode, NULL};
  const char *on[] = {"PINWHEEL_FILL_AHEAD=64M", "PINWHEEL_THREADS=4", NULL};
  yajl_val v = run_staged(argv, on, 0);
  for (int again = 0; again < 2 && jget(v, "fill_ahead", "revoked", "expired", NULL) +
                                       jget(v, "fill_ahead", "revoked", "upload_failed", NULL);
       again++) {
    print_message("%s: an upload expired or was not recorded in time (a loaded machine); again\n",
                  mode);
    yajl_tree_free(v);
    v = run_staged(argv, on, 0);
  }
  assert_int_equal(jget(v, "fill_ahead", "allocs", NULL), allocs);
  if (fills >= 0) assert_int_equal(jget(v, "fill_ahead", "fills", "calls", NULL), fills);
  assert_int_equal(jget(v, "fill_ahead", "used", "calls", NULL), used);
  va_list ap;
  va_start(ap, used);
  for (const char *why; (why = va_arg(ap, const char *));) {
    long long n = va_arg(ap, long long);
    if (jget(v, "fill_ahead", "revoked", why, NULL) != n)
      fail_msg("%s: %s %lld, expected %lld", mode, why, jget(v, "fill_ahead", "revoked", why, NULL),
               n);
  }
  va_end(ap);
  /* the real calls behind it: pinwheel's registration of its memory, no cudaHostAlloc */
  assert_int_equal(jget(v, "calls", "cudaHostAlloc", "calls", NULL), 1);
  yajl_tree_free(v);
}

/* Uploads ahead (PINWHEEL_FILL_AHEAD): the program's pinned allocation is pinwheel's, each of the
 * five fills is uploaded as it goes, rounds 0 and 4 copy from the upload, and the launch, the
 * write and the copy into the buffer of rounds 1 to 3 each give theirs up; the program checks the
 * device's bytes every round.  Without the option nothing of it happens. */
static void test_fill_ahead(void **state) {
  expect_fill_ahead("fillahead", 1, 5, 2, "launch", 1LL, "written_freed_or_fork", 1LL,
                    "copied_into", 1LL, "not_guarded", 0LL, (const char *)NULL);
  const char *argv[] = {PW_PROG, "fillahead", NULL};
  yajl_val v = run_staged(argv, NULL, 0);
  assert_int_equal(jget(v, "fill_ahead", "allocs", NULL), 0);
  assert_int_equal(jget(v, "fill_ahead", "fills", "calls", NULL), 0);
  yajl_tree_free(v);
  (void)state;
}

/* The calls no hook of the copy path sees (shim/front/hooks.def's PW_ENQUEUE): a cudaMemsetAsync
 * between fill and copy gives the upload up (memset_or_copy); a cudaLaunchHostFunc, whose function
 * writes the pinned buffer after the fill, gives every upload up for good (stream_ordered): of five
 * rounds only the two before it, and not the memset's, copy from an upload.  The program checks the
 * device's bytes every round (the host function's round included), and the memset's. */
static void test_fill_ahead_hazards(void **state) {
  expect_fill_ahead("fillahead_hazards", 1, -1, 2, "memset_or_copy", 1LL, "stream_ordered", 1LL,
                    "launch", 0LL, "written_freed_or_fork", 0LL, (const char *)NULL);
  (void)state;
}

/* Sync elision through the wrappers (interpose_prog's elide: every fence and rule, the fake's
 * events pending until waited for); the default elides, PINWHEEL_SYNC=keep never does. */
static void test_stage_sync_elision(void **state) {
  const char *lazy[] = {"FAKE_LAZY_EVENTS=1", NULL};
  yajl_val v = run_stage("elide", lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 4);
  assert_int_equal(jget(v, "sync_kept", "host_write", NULL), 1);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 2);
  assert_int_equal(jget(v, "sync_kept", "ipc", NULL), 1);
  /* the launch and the event record on t, the memset on the legacy stream, the free on u */
  assert_int_equal(jget(v, "sync_fences", NULL), 4);
  assert_true(jget(v, "sync_settled", NULL) >= 1);
  yajl_tree_free(v);
  const char *keep[] = {"FAKE_LAZY_EVENTS=1", "PINWHEEL_SYNC=keep", NULL};
  v = run_stage("elide", keep, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 0);
  assert_int_equal(jget(v, "sync_fences", NULL), 0);
  yajl_tree_free(v);
  /* a __managed__ variable: a kernel may write it and the host read it, so the sync is real */
  v = run_stage("managedvar", lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 0);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 1);
  yajl_tree_free(v);
  /* a shared-memory batch's unmap: moved off the thread once CUDA is in use (not before), the
   * program's range unmapped at return either way (the program checks); a kernel without
   * PROCMAP_QUERY or a /dev/shm without room defers nothing */
  v = run_stage("shmunmap", NULL, 0);
  assert_int_equal(jget(v, "staging", "shm_unmaps_deferred", NULL), shm_unmap_usable() ? 2 : 0);
  assert_int_equal(jget(v, "staging", "shm_unmaps_left", "queue_full", NULL), 0);
  assert_int_equal(jget(v, "staging", "shm_unmaps_left", "no_room", NULL), 0);
  assert_int_equal(jget(v, "staging", "shm_unmaps_left", "move_failed", NULL), 0);
  yajl_tree_free(v);
  const char *observe[] = {"PINWHEEL_MODE=observe", NULL};
  v = run_stage("shmunmap", observe, 0);
  assert_int_equal(jget(v, "staging", "shm_unmaps_deferred", NULL), 0);
  yajl_tree_free(v);
  /* copies into symbols and arrays, graphics unmaps, semaphore signals are fenced; a signal keeps
   * its stream's sync real, as does a wait for an event that got a destroyed event's handle; a
   * pool on the host is memory kernels write and the host reads */
  v = run_stage("elide_more", lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 2);
  assert_int_equal(jget(v, "sync_kept", "host_write", NULL), 2);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 1);
  assert_int_equal(jget(v, "sync_fences", NULL), 4);
  yajl_tree_free(v);
  /* a memory pool or one of its allocations handed to or taken from another process */
  const char *pools[] = {"export_pool", "import_pool", "export_pointer", "import_pointer"};
  for (int i = 0; i < 4; i++) {
    char which[64];
    snprintf(which, sizeof which, "POOL_IPC=%s", pools[i]);
    const char *env[] = {"FAKE_LAZY_EVENTS=1", which, NULL};
    v = run_stage("elide_pool_ipc", env, 0);
    assert_int_equal(jget(v, "staging", "sync_elided", NULL), 1);
    assert_int_equal(jget(v, "sync_kept", "ipc", NULL), 1);
    yajl_tree_free(v);
  }
  /* cuDNN's error storage keeps no sync, until the program can call a query past the shim;
   * what cudnnQueryRuntimeError reads is as after one */
  v = run_stage("elide_cudnn", lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 3);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 1);
  assert_true(jget(v, "sync_settled", NULL) >= 1);
  yajl_tree_free(v);
  v = run_stage("elide_cudnn", keep, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 0);
  yajl_tree_free(v);
  const char *many[] = {PW_PROG, "elide_cudnn", "many", NULL};
  v = run_staged(many, lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 1);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 2);
  yajl_tree_free(v);
  /* cuDNN linked only by a library the program opened with RTLD_LOCAL: the shim's wrappers find
   * it there (the program's calls work), and its storage keeps no sync */
  const char *local[] = {PW_CUDNN_LOCAL_PROG, PW_CUDNN_LOCAL, NULL};
  v = run_staged(local, lazy, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 1);
  assert_int_equal(jget(v, "sync_kept", "mapped", NULL), 0);
  yajl_tree_free(v);
  /* a device that reaches pageable memory: a kernel might write any host memory */
  const char *hmm[] = {"FAKE_LAZY_EVENTS=1", "FAKE_PAGEABLE_ACCESS=1", NULL};
  v = run_stage("elide", hmm, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 0);
  assert_true(jget(v, "sync_kept", "pageable_access", NULL) >= 3);
  yajl_tree_free(v);
  (void)state;
}

static void test_capture_passes_through(void **state) {
  yajl_val v = run_stage("capture", NULL, 0);
  assert_int_equal(jget(v, "fallbacks", "capturing", "calls", NULL), 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 0);
  yajl_tree_free(v);
}

/* Sizes that wrap the address space go to CUDA unchanged (no crash, no read past src under
 * AddressSanitizer) and come back as CUDA's own error. */
static void test_wrapped_size_passes_through(void **state) {
  yajl_val v = run_stage("wrap", NULL, 0);
  assert_int_equal(jget(v, "fallbacks", "bad_range", "calls", NULL), 3);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 0);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 0);
  yajl_tree_free(v);
}

/* Staging resumes after cudaDeviceReset (the fake's reset makes every older stream, event and
 * allocation fail, as CUDA's does): six H2D and six D2H copies staged, none fell back; the six
 * syncs elided, the three after the reset with new events (a sync elided before it once left an
 * event of the destroyed context for reuse: here each later one was kept for its failed record,
 * in CUDA the record crashed). */
static void test_staging_resumes_after_reset(void **state) {
  yajl_val v = run_stage("reset", NULL, 0);
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 6);
  assert_int_equal(jget(v, "sync_kept", "error", NULL), 0);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 6);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 6);
  assert_int_equal(jget(v, "fallbacks", "no_state", "calls", NULL), 0);
  assert_int_equal(jget(v, "fallbacks", "internal_error", "calls", NULL), 0);
  assert_int_equal(jget(v, "staging", "device_resets", NULL), 1);
  yajl_tree_free(v);
}

/* A device ring below four chunks is raised to four chunks, with one warning; bytes stay right
 * (the program checks them) and the run ends (a 1-byte ring once made pieces of 0 bytes). */
static void test_ring_clamped(void **state) {
  const char *argv[] = {PW_PROG, "stage", NULL};
  const char *env[] = {
      PRELOAD,   "PINWHEEL_MODE=stage",    "PINWHEEL_STATS=1",  "PINWHEEL_STATS_FORMAT=json",
      stats_env, "PINWHEEL_DEVICE_RING=1", "PINWHEEL_CHUNK=1M", NULL};
  result r = run(argv, env);
  if (r.status != 0) fail_msg("status %d\n%s%s", r.status, r.out, r.err);
  const char *w = strstr(r.err, "PINWHEEL_DEVICE_RING=1 is below 4 staging chunks");
  assert_non_null(w);
  assert_null(strstr(w + 1, "PINWHEEL_DEVICE_RING=1 is below")); /* once */
  yajl_val v = parse_summary(stats_path);
  assert_int_equal(jget(v, "staging", "ring_bytes", NULL), 4 << 20);
  assert_true(jget(v, "staging", "ring", "calls", NULL) > 0);
  yajl_tree_free(v);
  free_result(&r);
}

/* Bad values and removed options: one warning line each, the program runs on (never an abort),
 * and a removed option does nothing (PINWHEEL_HELP no longer prints the table). */
static void test_bad_values_and_removed_options(void **state) {
  const char *argv[] = {PW_PROG, "counts", "1", NULL};
  const char *env[] = {PRELOAD,
                       "PINWHEEL_MODE=bogus",
                       "PINWHEEL_CHUNK=12Q",
                       "PINWHEEL_HELP=1",
                       "PINWHEEL_NT_STORES=1",
                       "PINWHEEL_DEFER=large",
                       NULL};
  result r = run(argv, env);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "counts done"));
  const char *want[] = {
      "PINWHEEL_MODE=bogus is not valid; using the default, stage\n",
      "PINWHEEL_CHUNK=12Q is not valid; using the default, 4M\n",
      "PINWHEEL_HELP was removed and is ignored (`pinwheel options` prints the table)\n",
      "PINWHEEL_NT_STORES was removed and is ignored (plain stores into the pinned pool measured "
      "faster)\n",
      "PINWHEEL_DEFER=large was removed (deferring copies larger than half the pool measured "
      "slower); using the default, 1\n"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *w = strstr(r.err, want[i]);
    if (!w) fail_msg("want %s\ngot %s", want[i], r.err);
    if (strstr(w + 1, want[i])) fail_msg("twice: %s", want[i]); /* once per process */
  }
  assert_null(strstr(r.err, "PINWHEEL_DEVICE_RING")); /* no table */
  free_result(&r);
}

static void test_launcher(void **state) {
  const char *argv[] = {PW_CLI,     "run", "--mode", "observe", "--json", "--stats-file",
                        stats_path, "--",  PW_PROG,  "counts",  "2",      NULL};
  result r = run(argv, NULL);
  assert_int_equal(r.status, 0);
  yajl_val v = parse_summary(stats_path);
  assert_int_equal(jget(v, "calls", "cudaMemcpy", "calls", NULL), 4);
  yajl_tree_free(v);
  free_result(&r);
  /* exit status and environment */
  const char *sh[] = {
      PW_CLI, "run", "--", "/bin/sh", "-c", "echo \"$LD_PRELOAD|$PINWHEEL_MODE\"; exit 7", NULL};
  const char *env[] = {"LD_PRELOAD=libother.so", NULL};
  r = run(sh, env);
  assert_int_equal(r.status, 7);
  assert_non_null(strstr(r.out, "libpinwheel.so:libother.so|\n"));
  free_result(&r);
  const char *sh2[] = {PW_CLI, "run", "--mode", "off", "/bin/sh", "-c", "echo $PINWHEEL_MODE",
                       NULL};
  r = run(sh2, NULL);
  assert_string_equal(r.out, "off\n");
  free_result(&r);
  const char *sh3[] = {PW_CLI,    "run",
                       "--mode",  "off",
                       "--trace", "base-%r.json",
                       "--",      "/bin/sh",
                       "-c",      "echo \"$PINWHEEL_MODE $PINWHEEL_TRACE\"",
                       NULL};
  r = run(sh3, NULL);
  assert_string_equal(r.out, "off base-%r.json\n");
  free_result(&r);
  const char *bad[] = {PW_CLI, "run", "--mode", "fast", "--", "/bin/true", NULL};
  r = run(bad, NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "pinwheel run: --mode takes off, observe or stage, not 'fast'"));
  free_result(&r);
  const char *nocmd[] = {PW_CLI, "run", NULL};
  r = run(nocmd, NULL);
  assert_int_equal(r.status, 2);
  free_result(&r);
  const char *missing[] = {PW_CLI, "run", "--", "/nonexistent/program", NULL};
  r = run(missing, NULL);
  assert_int_equal(r.status, 127);
  free_result(&r);
  const char *ver[] = {PW_CLI, "--version", NULL};
  r = run(ver, NULL);
  assert_non_null(strstr(r.out, "pinwheel 0."));
  free_result(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_pass_through_intact),
      cmocka_unit_test(test_observe_counts_exact),
      cmocka_unit_test(test_trace_without_cupti),
      cmocka_unit_test(test_trace_with_fake_cupti),
      cmocka_unit_test(test_trace_gz),
      cmocka_unit_test(test_trace_window),
      cmocka_unit_test(test_trace_nvtx),
      cmocka_unit_test(test_text_summary),
      cmocka_unit_test(test_off_counts_nothing),
      cmocka_unit_test(test_unrelated_program_unchanged),
      cmocka_unit_test(test_no_driver_named),
      cmocka_unit_test(test_no_cuda_no_summary),
      cmocka_unit_test(test_shared_summary_file),
      cmocka_unit_test(test_stderr_as_loaded),
      cmocka_unit_test(test_planted_symlinks),
      cmocka_unit_test(test_exec_child_trace),
      cmocka_unit_test(test_fork_child_reports_only_its_own),
      cmocka_unit_test(test_threads_counts_exact),
      cmocka_unit_test(test_stage_bytes_and_paths),
      cmocka_unit_test(test_runtime_host_copies),
      cmocka_unit_test(test_fill_ahead),
      cmocka_unit_test(test_fill_ahead_hazards),
      cmocka_unit_test(test_first_copy_staged),
      cmocka_unit_test(test_first_copy_at_exit),
      cmocka_unit_test(test_first_copies_of_threads_staged),
      cmocka_unit_test(test_setup_option_removed),
      cmocka_unit_test(test_failed_query_is_query_failed),
      cmocka_unit_test(test_default_threads_follow_cpus),
      cmocka_unit_test(test_stage_sync_elision),
      cmocka_unit_test(test_capture_passes_through),
      cmocka_unit_test(test_wrapped_size_passes_through),
      cmocka_unit_test(test_ring_clamped),
      cmocka_unit_test(test_staging_resumes_after_reset),
      cmocka_unit_test(test_bad_values_and_removed_options),
      cmocka_unit_test(test_launcher),
  };
  int rc = cmocka_run_group_tests(tests, setup, NULL);
  unlink(stats_path);
  return rc;
}
