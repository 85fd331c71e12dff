/* test_driver.c — the driver front end: libpinwheel.so under a real LD_PRELOAD in front of
 * driver_prog, a program linked against the fake libcuda.so.1 that takes its entry points directly,
 * through dlopen + dlsym, and through cuGetProcAddress (both versions).  Each case runs the program
 * in a child process with a clean environment and checks its output, status and exit summary. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "summary.h"
#include "gpa_other.h"

#define PRELOAD "LD_PRELOAD=" PW_SHIM

static const char *const ways[] = {"direct", "dlsym", "gpa", "gpa1", "rt"};
#define N_WAYS (sizeof ways / sizeof *ways)

static char stats_path[256];
static char stats_env[300];

static int setup(void **state) {
  snprintf(stats_path, sizeof stats_path, "/tmp/pwtest-drv-stats-%d.json", (int)getpid());
  snprintf(stats_env, sizeof stats_env, "PINWHEEL_STATS_FILE=%s", stats_path);
  return 0;
}

static result run_ok(const char *const *argv, const char *const *env, const char *want) {
  result r = run(argv, env);
  if (r.status != 0 || !strstr(r.out, want))
    fail_msg("%s %s %s: status %d\n%s%s", argv[1], argv[2] ? argv[2] : "",
             env && env[1] ? env[1] : "", r.status, r.out, r.err);
  return r;
}

/* run_ok with the JSON summary asked for (PINWHEEL_STATS, its format and file added to env);
 * stderr must be empty when quiet.  Returns the summary. */
static yajl_val run_summary(const char *const *argv, const char *const *env, const char *want,
                            int quiet) {
  const char *all[24];
  int n = 0;
  for (; env[n] && n < 20; n++)
    all[n] = env[n];
  all[n++] = "PINWHEEL_STATS=1";
  all[n++] = "PINWHEEL_STATS_FORMAT=json";
  all[n++] = stats_env;
  all[n] = NULL;
  result r = run_ok(argv, all, want);
  if (quiet) assert_string_equal(r.err, "");
  free_result(&r);
  return parse_summary(stats_path);
}

/* Arguments and statuses intact, every way, every mode, and without the shim. */
static void test_calls_intact(void **state) {
  const char *modes[] = {"PINWHEEL_MODE=off", "PINWHEEL_MODE=observe", "PINWHEEL_MODE=stage"};
  for (size_t w = 0; w < N_WAYS; w++) {
    const char *argv[] = {PW_DRV_PROG, "calls", ways[w], NULL};
    for (int i = 0; i < 3; i++) {
      const char *env[] = {PRELOAD, modes[i], NULL};
      result r = run_ok(argv, env, "calls ok");
      assert_string_equal(r.err, "");
      free_result(&r);
    }
    result r = run_ok(argv, NULL, "calls ok");
    free_result(&r);
  }
}

static void check_counts(yajl_val v, int n) {
  assert_int_equal(jget(v, "calls", "cuMemcpyHtoD_v2", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuMemcpyHtoDAsync_v2", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuMemcpyDtoHAsync_v2", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuMemcpy", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuMemcpyAsync", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuLaunchKernel", "calls", NULL), 2 * n);
  assert_int_equal(jget(v, "calls", "cuLaunchKernelEx", "calls", NULL), 0);
  assert_int_equal(jget(v, "calls", "cuStreamSynchronize", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cuCtxSynchronize", "calls", NULL), n);
  assert_int_equal(jget(v, "calls", "cudaMemcpy", "calls", NULL), 0);
  assert_int_equal(jget(v, "launches", NULL), 2 * n);
  assert_int_equal(jget(v, "syncs", "calls", NULL), 2 * n);
  assert_int_equal(copy_row(v, "H2D", "pageable", "device", "calls"), n);
  assert_int_equal(copy_row(v, "H2D", "pageable", "device", "bytes"), 1000 * n);
  assert_int_equal(copy_row(v, "H2D", "pinned", "device", "bytes"), 2000 * n);
  assert_int_equal(copy_row(v, "D2H", "device", "pageable", "calls"), 2 * n);
  assert_int_equal(copy_row(v, "D2H", "device", "pageable", "bytes"), 3050 * n);
  assert_int_equal(copy_row(v, "D2D", "device", "device", "bytes"), 100 * n);
}

/* Observe mode counts each driver call once and classifies its copies as the runtime's are, every
 * way, when cuGetProcAddress hands out other addresses than the exported symbols', and when the
 * driver calls dlsym while the shim asks it for its functions (a deadlock, were that not
 * handled). */
static void test_observe_counts_exact(void **state) {
  for (size_t w = 0; w <= N_WAYS + 1; w++) {
    const char *way = w < N_WAYS ? ways[w] : "gpa";
    const char *argv[] = {PW_DRV_PROG, "counts", way, "7", NULL};
    const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe",
                         w < N_WAYS    ? NULL
                         : w == N_WAYS ? "FAKE_GPA_THUNKS=1"
                                       : "FAKE_GPA_DLSYM=1", /* the driver calls dlsym itself */
                         NULL};
    yajl_val v = run_summary(argv, env, "counts 7", 1);
    check_counts(v, 7);
    yajl_tree_free(v);
  }
}

static void test_off_counts_nothing(void **state) {
  const char *argv[] = {PW_DRV_PROG, "counts", "gpa", "3", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=off", NULL};
  yajl_val v = run_summary(argv, env, "counts 3", 0);
  assert_int_equal(jget(v, "intercepted", NULL), 0);
  yajl_tree_free(v);
}

/* Stage mode: every size and API, every way; bytes intact with the source reused at once; the
 * large copies reached the fake from pinned memory; the summary counts each staged copy once. */
static void test_stage_bytes(void **state) {
  for (size_t w = 0; w < N_WAYS; w++) {
    for (int ring = 0; ring < 2; ring++) {
      const char *argv[] = {PW_DRV_PROG, "stage", ways[w], "expect-staged", NULL};
      const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage",
                           ring ? "PINWHEEL_DEVICE_RING=4M" : "PINWHEEL_DEVICE_RING=0",
                           "PINWHEEL_CHUNK=1M", /* the ring's minimum is 4 chunks */
                           NULL};
      yajl_val v = run_summary(argv, env, "stage ok", 1);
      /* 3 of 5 sizes >= 64 KiB, 6 H2D APIs and 6 D2H calls each */
      long long h2d = jget(v, "staging", ring ? "ring" : "pinned_only", "calls", NULL);
      assert_int_equal(h2d, 18);
      assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 18);
      assert_int_equal(jget(v, "staging", "internal_errors", NULL), 0);
      yajl_tree_free(v);
    }
  }
  /* observe mode: the same bytes, nothing staged (and the check of the pinned source fails) */
  const char *argv[] = {PW_DRV_PROG, "stage", "dlsym", "expect-staged", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=observe", NULL};
  result r = run(argv, env);
  assert_int_not_equal(r.status, 0);
  free_result(&r);
}

/* The copies a summary says were not deferred for want of the guard (no userfaultfd, or one
 * without kernel faults or write-protect). */
static long long no_guard(yajl_val v) {
  return jget(v, "not_deferred", "no_userfaultfd", NULL) +
         jget(v, "not_deferred", "uffd_user_only", NULL) +
         jget(v, "not_deferred", "uffd_no_write_protect", NULL);
}

/* 1 when this machine gives pinwheel no source guard (userfaultfd not permitted with kernel faults,
 * or an emulator without it): deferral says why in the summary, and fill-ahead, which needs the
 * guard, is off.  Asked once, of a staged run with deferral on. */
static int guard_missing(void) {
  static int known = -1;
  if (known >= 0) return known;
  const char *argv[] = {PW_DRV_PROG, "stage", "direct", "expect-staged", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_CHUNK=1M", "PINWHEEL_DEFER=1",
                       NULL};
  yajl_val v = run_summary(argv, env, "stage ok", 1);
  known = !jget(v, "deferred", "calls", NULL) && no_guard(v) > 0;
  yajl_tree_free(v);
  return known;
}

/* Deferred staging end to end: the real guard and copy thread, the side stream's wait for the
 * copy thread's flag (the fake driver's wait blocks until the flag is stored); the program checks
 * the bytes.  PINWHEEL_DEFER=0 defers nothing and says so.  Where this machine gives no guard
 * (userfaultfd not permitted with kernel faults), the summary says why and the test skips. */
static void test_deferred(void **state) {
  for (int defer = 1; defer >= 0; defer--) {
    const char *argv[] = {PW_DRV_PROG, "stage", "direct", "expect-staged", NULL};
    const char *env[] = {PRELOAD,
                         "PINWHEEL_MODE=stage",
                         "PINWHEEL_CHUNK=1M",
                         "PINWHEEL_DEVICE_RING=64M",
                         defer ? "PINWHEEL_DEFER=1" : "PINWHEEL_DEFER=0",
                         NULL};
    yajl_val v = run_summary(argv, env, "stage ok", 1);
    long long deferred = jget(v, "deferred", "calls", NULL);
    long long missing = no_guard(v);
    long long off = jget(v, "not_deferred", "off", NULL);
    yajl_tree_free(v);
    if (defer && !deferred && missing) skip();
    assert_true(defer ? deferred > 0 : deferred == 0);
    assert_true(defer ? off == 0 : off > 0);
  }
  /* memory another process can write is staged as before, never deferred */
  const char *argv[] = {PW_DRV_PROG, "shared", "direct", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_CHUNK=1M",
                       "PINWHEEL_DEVICE_RING=64M", NULL};
  yajl_val v = run_summary(argv, env, "shared ok", 1);
  assert_int_equal(jget(v, "deferred", "calls", NULL), 0);
  assert_int_equal(jget(v, "not_deferred", "shared_memory", NULL), 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 1);
  yajl_tree_free(v);
}

/* memcpy into and out of the program's pinned memory runs on the staging threads in stage mode
 * (counted), bytes intact; small copies and memory no longer pinned are glibc's; nothing is
 * counted in observe mode. */
static void test_host_copies(void **state) {
  for (size_t w = 0; w < N_WAYS; w++) {
    for (int stage = 0; stage < 2; stage++) {
      const char *argv[] = {PW_DRV_PROG, "hostcopy", ways[w], NULL};
      const char *env[] = {PRELOAD, stage ? "PINWHEEL_MODE=stage" : "PINWHEEL_MODE=observe",
                           "PINWHEEL_THREADS=4", NULL};
      yajl_val v = run_summary(argv, env, "hostcopy ok", 1);
      assert_int_equal(jget(v, "staging", "host_copies_into_pinned", "calls", NULL), stage ? 2 : 0);
      assert_int_equal(jget(v, "staging", "host_copies_out_of_pinned", "calls", NULL),
                       stage ? 1 : 0);
      assert_int_equal(jget(v, "calls", "cuMemHostAlloc", "calls", NULL), 1);
      assert_int_equal(jget(v, "calls", "cuMemHostUnregister", "calls", NULL), 1);
      yajl_tree_free(v);
    }
  }
}

/* A copy in a context that is not the device's primary one goes to the driver unchanged. */
static void test_other_context_not_staged(void **state) {
  const char *argv[] = {PW_DRV_PROG, "context", "dlsym", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  yajl_val v = run_summary(argv, env, "context ok", 0);
  assert_int_equal(jget(v, "fallbacks", "other_context", "calls", NULL), 1);
  yajl_tree_free(v);
}

/* A release that is not the last leaves the context alive: the program's copies keep their bytes
 * (no longer staged: the device's state is not used again, other_context), its pinned memory from
 * pinwheel is still answered for and unregistered at its free; the last release then destroys the
 * context, and nothing of pinwheel's touches it again (the fake aborts on a destroyed context's
 * stream), at exit neither. */
static void test_release_not_last(void **state) {
  const char *argv[] = {PW_DRV_PROG, "release-kept", "direct", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_FILL_AHEAD=64M", NULL};
  int fa = !guard_missing(); /* without the guard the allocation stays the driver's */
  yajl_val v = run_summary(argv, env,
                           fa ? "released once: references left 1\nflags answered by the driver: "
                                "0\nreleased again: references left 0\nrelease-kept ok"
                              : "released again: references left 0\nrelease-kept ok",
                           1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 1);
  assert_int_equal(jget(v, "fallbacks", "other_context", "calls", NULL), 2); /* H2D and D2H */
  assert_int_equal(jget(v, "fill_ahead", "allocs", NULL), fa);
  assert_int_equal(jget(v, "staging", "device_resets", NULL), 1); /* the last release */
  yajl_tree_free(v);
  (void)state;
}

/* A release of the primary context that comes while another thread's first copy sets pinwheel's
 * state up there (the fake slows the setup before its first allocation) waits for that setup, then
 * marks the state gone: that copy staged, the thread's three later ones CUDA's (other_context),
 * bytes right; the thread's last release destroys the context and the state is forgotten.  Without
 * the wait the state escaped the release and the later copies were staged in it. */
static void test_release_during_setup(void **state) {
  const char *argv[] = {PW_DRV_PROG, "release-in-setup", "direct", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "FAKE_CAPTURE_MODE_DELAY_MS=300", NULL};
  yajl_val v = run_summary(
      argv, env, "released in setup: references left 1\nreferences left 0\nrelease-in-setup ok", 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 1);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 0);
  assert_int_equal(jget(v, "fallbacks", "other_context", "calls", NULL), 3);
  assert_int_equal(jget(v, "staging", "device_resets", NULL), 1); /* made, then forgotten */
  yajl_tree_free(v);
  (void)state;
}

/* cuDevicePrimaryCtxReset between staged copies: pinwheel drains and forgets its state first (the
 * fake aborts if a stream or event of the reset context is used later) and stages the next copy in
 * a state set up anew; bytes right.  The syncs elided before the reset and after it: once the
 * event of one before it was recorded again after it (the fake aborted, CUDA crashed). */
static void test_primary_context_reset(void **state) {
  const char *argv[] = {PW_DRV_PROG, "reset", "gpa", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  /* the program's reference and pinwheel's, taken again for the second copy */
  yajl_val v = run_summary(argv, env, "references left 2\nreset ok", 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 6); /* 1 + 2 async a round */
  assert_int_equal(jget(v, "staging", "sync_elided", NULL), 4);
  assert_int_equal(jget(v, "sync_kept", "error", NULL), 0);
  assert_int_equal(jget(v, "staging", "device_resets", NULL), 1);
  assert_int_equal(jget(v, "calls", "cuDevicePrimaryCtxReset_v2", "calls", NULL), 1);
  yajl_tree_free(v);
  /* after a release that left the context alive (staging there stopped), a reset: staged anew */
  const char *again[] = {PW_DRV_PROG, "release-reset", "direct", NULL};
  v = run_summary(again, env, "release-reset ok", 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 2);
  assert_int_equal(jget(v, "fallbacks", "other_context", "calls", NULL), 2);
  yajl_tree_free(v);
  (void)state;
}

/* Uploads ahead (PINWHEEL_FILL_AHEAD) for a program whose pinned memory comes from the driver (the
 * static CUDA runtime's cudaHostAlloc, as in CuPy's wheels): its allocation in the primary context
 * is pinwheel's, its copies through the driver come from the uploads, and the launch and the write
 * between fill and copy give theirs up; the allocation in another context is the driver's.  The
 * program checks the device's bytes every round.  Without the option none of it. */
static void test_fill_ahead_driver(void **state) {
  if (guard_missing()) skip(); /* fill-ahead is off without the guard (test_deferred says so) */
  const char *by[] = {"direct", "gpa"};
  for (int w = 0; w < 2; w++) {
    const char *argv[] = {PW_DRV_PROG, "fillahead", by[w], NULL};
    const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_FILL_AHEAD=64M",
                         "PINWHEEL_THREADS=4", NULL};
    yajl_val v = run_summary(argv, env, "fillahead ok", 1);
    /* rounds 0 and 3 copy from their uploads, unless a loaded machine kept the upload thread from
     * recording in time (a copy waits 50 ms for it) or the copy from coming within 100 ms: then
     * that upload is given up as such, and the bytes are CUDA's copy's.  Such a run is made
     * again, three times at most; the last one's counts are checked. */
    for (int again = 0; again < 2 && jget(v, "fill_ahead", "revoked", "expired", NULL) +
                                         jget(v, "fill_ahead", "revoked", "upload_failed", NULL);
         again++) {
      yajl_tree_free(v);
      v = run_summary(argv, env, "fillahead ok", 1);
    }
    assert_int_equal(jget(v, "fill_ahead", "allocs", NULL), 1);
    assert_int_equal(jget(v, "fill_ahead", "fills", "calls", NULL), 4);
    long long used = jget(v, "fill_ahead", "used", "calls", NULL);
    assert_true(used >= 1);
    assert_int_equal(used + jget(v, "fill_ahead", "revoked", "upload_failed", NULL) +
                         jget(v, "fill_ahead", "revoked", "expired", NULL),
                     2);
    assert_int_equal(jget(v, "fill_ahead", "revoked", "launch", NULL), 1);
    assert_int_equal(jget(v, "fill_ahead", "revoked", "written_freed_or_fork", NULL), 1);
    yajl_tree_free(v);
  }
  const char *argv[] = {PW_DRV_PROG, "fillahead", "direct", NULL};
  const char *off[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  yajl_val v = run_summary(argv, off, "fillahead ok", 1);
  assert_int_equal(jget(v, "fill_ahead", "allocs", NULL), 0);
  assert_int_equal(jget(v, "fill_ahead", "used", "calls", NULL), 0);
  yajl_tree_free(v);
  (void)state;
}

/* The program's cuDevicePrimaryCtxRelease frees the primary context as it would without pinwheel:
 * pinwheel's own reference (taken to stage there) goes first, so none is left; the engine's state
 * went with the context, so after the program retains it again its copies go to CUDA unchanged
 * (other_context), bytes right.  In observe mode pinwheel never held one.  (A bug once: pinwheel's
 * reference was never released, so the program's last release could not free the context.) */
static void test_primary_context_released(void **state) {
  const char *argv[] = {PW_DRV_PROG, "release", NULL};
  const char *stage[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  yajl_val v =
      run_summary(argv, stage, "round 0: references left 0\nround 1: references left 0", 1);
  assert_int_equal(jget(v, "staging", "ring", "calls", NULL), 1);
  assert_int_equal(jget(v, "staging", "d2h", "calls", NULL), 1);
  assert_int_equal(jget(v, "fallbacks", "other_context", "calls", NULL), 2);
  assert_int_equal(jget(v, "calls", "cuDevicePrimaryCtxRelease_v2", "calls", NULL), 2);
  yajl_tree_free(v);
  const char *observe[] = {PRELOAD, "PINWHEEL_MODE=observe", NULL};
  v = run_summary(argv, observe, "round 0: references left 0\nround 1: references left 0", 1);
  yajl_tree_free(v);
}

/* An older ABI (CUDA 3.0's 32-bit cuMemcpyHtoD) is handed out untouched: not counted. */
static void test_old_abi_untouched(void **state) {
  const char *argv[] = {PW_DRV_PROG, "oldabi", NULL};
  const char *env[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  const char *all[] = {env[0],    env[1], "PINWHEEL_STATS=1", "PINWHEEL_STATS_FORMAT=json",
                       stats_env, NULL};
  unlink(stats_path);
  result r = run_ok(argv, all, "oldabi ok");
  free_result(&r);
  /* nothing intercepted: no summary at all (a process that never used CUDA prints nothing) */
  assert_int_equal(access(stats_path, F_OK), -1);
}

/* For every handle and every symbol pinwheel does not wrap, dlsym answers as glibc's does. */
static void test_dlsym_same_answers(void **state) {
  const char *argv[] = {PW_DRV_PROG, "dlsym-same", NULL};
  const char *env[] = {PRELOAD, NULL};
  result a = run(argv, NULL), b = run(argv, env);
  assert_int_equal(a.status, 0);
  assert_int_equal(b.status, 0);
  assert_true(strlen(a.out) > 500);
  assert_non_null(strstr(a.out, "next cuInit libcuda.so.1+"));
  assert_non_null(strstr(a.out, "libc no_such_sym NULL\n  error set"));
  assert_string_equal(b.out, a.out);
  free_result(&a);
  free_result(&b);
}

/* RTLD_NEXT and RTLD_DEFAULT are answered for the library that called, not for the shim. */
static void test_dlsym_caller_kept(void **state) {
  const char *argv[] = {PW_DRV_PROG, "dlsym-caller", NULL};
  const char *env[] = {PRELOAD, NULL};
  result r = run_ok(argv, NULL, "dlsym-caller ok");
  free_result(&r);
  r = run_ok(argv, env, "dlsym-caller ok");
  free_result(&r);
}

/* The program gets the wrapper; the shared CUDA runtime gets the driver's own function, so a copy
 * through cudaMemcpy* is counted once (by the runtime front end). */
/* The shared runtime's driver entry-point lookups lead to the wrappers (the program's own
 * lookups), to the driver without the shim. */
static void test_runtime_lookups(void **state) {
  const char *argv[] = {PW_DRV_PROG, "rt-entry", NULL};
  const char *env[] = {PRELOAD, NULL};
  result r = run_ok(argv, env, "rt-entry ok");
  for (int i = 0; i < 4; i++) {
    char want[64];
    snprintf(want, sizeof want, "lookup%d libpinwheel.so\n", i);
    if (!strstr(r.out, want)) fail_msg("want %s\ngot %s", want, r.out);
  }
  free_result(&r);
  r = run_ok(argv, NULL, "rt-entry ok");
  assert_non_null(strstr(r.out, "lookup0 libcuda.so.1\n"));
  assert_non_null(strstr(r.out, "lookup3 libcuda.so.1\n"));
  free_result(&r);
}

/* The other entry points that enqueue work reach pinwheel (sync elision fences them) when a
 * program takes them from cuGetProcAddress or dlsym, as the static CUDA runtime and libraries do;
 * without the shim, the driver's own. */
static void test_other_entry_points_offered(void **state) {
  const char *argv[] = {PW_DRV_PROG, "gpa-other", NULL};
  const char *env[] = {PRELOAD, NULL};
  result r = run_ok(argv, env, "gpa cuMemFreeAsync");
  for (size_t i = 0; i < sizeof gpa_other_names / sizeof *gpa_other_names; i++) {
    char line[96];
    snprintf(line, sizeof line, "gpa %s libpinwheel.so\n", gpa_other_names[i]);
    assert_non_null(strstr(r.out, line));
  }
  assert_non_null(strstr(r.out, "gpa-old cuStreamDestroy libpinwheel.so\n"));
  assert_non_null(strstr(r.out, "gpa-old cuEventDestroy libpinwheel.so\n"));
  assert_non_null(strstr(r.out, "dlsym cuMemsetD8Async libpinwheel.so\n"));
  free_result(&r);
  r = run_ok(argv, NULL, "gpa cuMemFreeAsync");
  assert_non_null(strstr(r.out, "gpa cuMemsetD8Async libcuda.so.1\n"));
  assert_non_null(strstr(r.out, "gpa-old cuEventDestroy libcuda.so.1\n"));
  free_result(&r);
  (void)state;
}

static void test_runtime_gets_real_driver(void **state) {
  const char *argv[] = {PW_DRV_PROG, "runtime-asks", NULL};
  const char *env[] = {PRELOAD, NULL};
  result r = run_ok(argv, env, "program");
  assert_non_null(strstr(r.out, "program libpinwheel.so"));
  assert_non_null(strstr(r.out, "runtime libcuda.so.1"));
  assert_non_null(strstr(r.out, "runtime-gpa libcuda.so.1"));
  free_result(&r);
  r = run_ok(argv, NULL, "program");
  assert_non_null(strstr(r.out, "program libcuda.so.1"));
  free_result(&r);
}

/* JAX's CUDA client: in stage mode pinwheel adds should_stage_host_to_device_transfers=false to
 * its creation, so XLA hands the driver its pageable arrays; nothing else changes, and nothing at
 * all in the other cases. */
static void pjrt_case(const char *lib, const char *platform, const char *set,
                      const char *const *env, const char *want_seen, int want_unstaged,
                      const char *want_tail) {
  const char *argv[] = {PW_DRV_PROG, "pjrt", lib, platform, set, NULL};
  /* a run in which pinwheel saw no CUDA use (another platform, or the client left alone before
   * any CUDA call) writes no summary: nothing was unstaged */
  unlink(stats_path);
  yajl_val v = NULL;
  const char *all[8] = {0};
  for (int i = 0; env[i] && i < 4; i++)
    all[i] = env[i];
  for (int i = 0; i < 8; i++)
    if (!all[i]) {
      all[i] = "PINWHEEL_STATS=1", all[i + 1] = "PINWHEEL_STATS_FORMAT=json",
      all[i + 2] = stats_env;
      break;
    }
  result q = run_ok(argv, all, "pjrt ok");
  if (want_tail == NULL) assert_string_equal(q.err, "");
  free_result(&q);
  if (access(stats_path, F_OK) == 0) v = parse_summary(stats_path);
  result r = run_ok(argv, env, "pjrt ok"); /* the same again, for the output */
  char line[512];
  snprintf(line, sizeof line, "pjrt seen: %s\n", want_seen);
  if (!strstr(r.out, line)) fail_msg("want %s\ngot %s", line, r.out);
  if (want_tail && !strstr(r.out, want_tail)) fail_msg("want %s\ngot %s", want_tail, r.out);
  assert_int_equal(v ? jget(v, "staging", "xla_unstaged_clients", NULL) : 0, want_unstaged);
  free_result(&r);
  if (v) yajl_tree_free(v);
}

static void test_pjrt_client_options(void **state) {
  const char *stage[] = {PRELOAD, "PINWHEEL_MODE=stage", NULL};
  const char *observe[] = {PRELOAD, "PINWHEEL_MODE=observe", NULL};
  /* PINWHEEL_XLA_STAGING was removed: set, it is ignored (warned about) and XLA's staging off */
  const char *xla[] = {PRELOAD, "PINWHEEL_MODE=stage", "PINWHEEL_XLA_STAGING=xla", NULL};
  const char *reject[] = {PRELOAD, "PINWHEEL_MODE=stage", "FAKE_PJRT_REJECT=1", NULL};
  const char *major1[] = {PRELOAD, "PINWHEEL_MODE=stage", "FAKE_PJRT_MAJOR=1", NULL};
  const char *none[] = {"PINWHEEL_MODE=stage", NULL};
  const char *plain = "platform_name=cuda preallocate=false";
  pjrt_case(PW_PJRT_CUDA, "cuda", NULL, stage,
            "platform_name=cuda preallocate=false should_stage_host_to_device_transfers=false", 1,
            "table (a copy)");
  pjrt_case(PW_PJRT_CUDA, "CUDA", NULL, stage,
            "platform_name=CUDA preallocate=false should_stage_host_to_device_transfers=false", 1,
            NULL);
  pjrt_case(PW_PJRT_CUDA, "cuda", NULL, observe, plain, 0, "table libxla_cuda_plugin.so");
  pjrt_case(PW_PJRT_CUDA, "cuda", NULL, xla,
            "platform_name=cuda preallocate=false should_stage_host_to_device_transfers=false", 1,
            "table (a copy)");
  pjrt_case(PW_PJRT_CUDA, "cuda", "set", stage,
            "platform_name=cuda preallocate=false should_stage_host_to_device_transfers=true", 0,
            NULL);
  pjrt_case(PW_PJRT_CUDA, "rocm", NULL, stage, "platform_name=rocm preallocate=false", 0, NULL);
  pjrt_case(PW_PJRT_OTHER, "cuda", NULL, stage, plain, 0, "table libxla_other_plugin.so");
  pjrt_case(PW_PJRT_CUDA, "cuda", NULL, major1, plain, 0, "table libxla_cuda_plugin.so");
  /* refused: the client is created again with the program's options, the error destroyed */
  pjrt_case(PW_PJRT_CUDA, "cuda", NULL, reject, plain, 0, "creates 2, errors destroyed 1");
  /* without the shim, for reference */
  const char *argv[] = {PW_DRV_PROG, "pjrt", PW_PJRT_CUDA, "cuda", NULL};
  result r = run_ok(argv, none, "pjrt ok");
  assert_non_null(strstr(r.out, "pjrt seen: platform_name=cuda preallocate=false\n"));
  assert_non_null(strstr(r.out, "creates 1, errors destroyed 0, table libxla_cuda_plugin.so"));
  free_result(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_intact),
      cmocka_unit_test(test_observe_counts_exact),
      cmocka_unit_test(test_off_counts_nothing),
      cmocka_unit_test(test_stage_bytes),
      cmocka_unit_test(test_other_context_not_staged),
      cmocka_unit_test(test_primary_context_released),
      cmocka_unit_test(test_fill_ahead_driver),
      cmocka_unit_test(test_release_not_last),
      cmocka_unit_test(test_primary_context_reset),
      cmocka_unit_test(test_release_during_setup),
      cmocka_unit_test(test_host_copies),
      cmocka_unit_test(test_deferred),
      cmocka_unit_test(test_old_abi_untouched),
      cmocka_unit_test(test_dlsym_same_answers),
      cmocka_unit_test(test_dlsym_caller_kept),
      cmocka_unit_test(test_runtime_gets_real_driver),
      cmocka_unit_test(test_other_entry_points_offered),
      cmocka_unit_test(test_runtime_lookups),
      cmocka_unit_test(test_pjrt_client_options),
  };
  int rc = cmocka_run_group_tests(tests, setup, NULL);
  unlink(stats_path);
  return rc;
}
