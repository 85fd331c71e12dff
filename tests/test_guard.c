/* test_guard.c — the source guard (shim/engine/guard.c, shim/front/memhooks.c) against every
 * hazard of deferred staging, each in its own process: guard_prog under a real LD_PRELOAD of
 * libpwguard_test.so (the same two sources, built with PW_TESTING so the program can reach the
 * guard).  Every hazard runs twice: as built, it must wait and leave the copy's bytes intact; with
 * the guard disabled on purpose (pw_guard_test_disable), the same check must fail, so the test
 * can tell.  Revocable guards (guard_prog revoke_*) are checked to be taken away at once by a
 * write, pw_guard_wait, a hook and fork, to leave plain guards waiting for their owner, and to be
 * unharmed by a late revoke.  The real libpinwheel.so is checked to export the hooks.  The protect
 * / release costs for 256 MiB are printed, not asserted.
 *
 * Exit 77 (skipped) only where the kernel or the privileges give no guard (no userfaultfd, only
 * user-mode faults, no write-protect of unpopulated pages); any other reason is a failure. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#define PRELOAD "LD_PRELOAD=" PW_GUARD_LIB

static result guard_run(const char *a1, const char *a2) {
  const char *argv[] = {PW_GUARD_PROG, a1, a2, NULL};
  const char *env[] = {PRELOAD, NULL};
  return run(argv, env);
}

/* print_message formats into a fixed buffer: one line at a time */
static void print_lines(const char *s) {
  while (s && *s) {
    const char *nl = strchr(s, '\n');
    int len = nl ? (int)(nl - s) : (int)strlen(s);
    print_message("%.*s\n", len, s);
    s += len + (nl != NULL);
  }
}

static void show(const char *what, const result *r) {
  print_message("[%s] status %d\n", what, r->status);
  print_lines(r->out);
  print_lines(r->err);
}

/* As built: the hazard waits, the copy is intact, the hazard then completes. */
static void expect_guarded(const char *hazard) {
  result r = guard_run(hazard, NULL);
  if (r.status != 0) {
    show(hazard, &r);
    fail_msg("%s: status %d", hazard, r.status);
  }
  print_lines(r.out);
  free_result(&r);
}

/* Guard disabled on purpose: the same run must fail (wrong bytes, no wait, or a crash). */
static void expect_broken(const char *hazard) {
  result r = guard_run("--disable", hazard);
  if (r.status == 0) {
    show(hazard, &r);
    fail_msg("%s: passed with the guard disabled: the test cannot tell", hazard);
  }
  print_message("%s with the guard disabled fails as it must (status %d)\n", hazard, r.status);
  free_result(&r);
}

static const char *const hazards[] = {
    "write_self",  "write_child", "write_thread", "write_unpopulated",
    "read_pipe",   "pread",       "recv",         "fread",
    "free_malloc", "realloc",     "munmap",       "mremap",
    "madvise",     "mprotect",    "mmap_fixed",   "fork",
};

static void test_hazard(void **state) {
  const char *h = *state;
  expect_guarded(h);
  expect_broken(h);
}

static void test_plain(void **state) {
  expect_guarded(*state);
}

/* The same with the mappings read from /proc/self/maps (kernels before PROCMAP_QUERY, 6.11). */
static void test_maps_parse(void **state) {
  static const char *const cases[] = {"refuse", "release_upto", "free_malloc", "write_thread"};
  for (int i = 0; i < 4; i++) {
    result r = guard_run("--maps", cases[i]);
    if (r.status != 0) {
      show(cases[i], &r);
      fail_msg("%s with /proc/self/maps: status %d", cases[i], r.status);
    }
    print_message("%s with /proc/self/maps: passed\n", cases[i]);
    free_result(&r);
  }
}

/* An unprivileged process (vm.unprivileged_userfaultfd=0, no /dev/userfaultfd access) gets only
 * user-mode faults: the guard must say so rather than let read(2) fail with EFAULT. */
static void test_unprivileged(void **state) {
  if (geteuid() != 0) skip();
  char *sysctl = slurp("/proc/sys/vm/unprivileged_userfaultfd");
  int allowed = sysctl && sysctl[0] == '1';
  free(sysctl);
  result r = guard_run("unpriv", NULL);
  show("unpriv", &r);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, allowed ? "reason: ok" : "reason: uffd_user_only"));
  free_result(&r);
}

/* A program that defines its own free: the guard is unavailable, with the reason. */
static void test_own_free(void **state) {
  const char *argv[] = {PW_GUARD_PROG_OWN_FREE, "available", NULL};
  const char *env[] = {PRELOAD, NULL};
  result r = run(argv, env);
  show("own free", &r);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "reason: hooks_not_interposed"));
  free_result(&r);
}

/* A program built without PIE that takes free's address (Debian's and Ubuntu's python3): the
 * hooks are still what its calls reach, so the guard is available, and a freed source still
 * waits (the free hazard passes in it). */
static void test_nopie_free_address(void **state) {
  const char *env[] = {PRELOAD, NULL};
  const char *avail[] = {PW_GUARD_PROG_NOPIE, "available", NULL};
  result r = run(avail, env);
  show("non-PIE, free's address taken", &r);
  assert_int_equal(r.status, 0);
  assert_null(strstr(r.err, "no canonical PLT entry")); /* the case is the one meant */
  assert_null(strstr(r.out, "hooks_not_interposed"));
  int ok = strstr(r.out, "reason: ok") != NULL;
  free_result(&r);
  if (!ok) skip(); /* no userfaultfd here: test_unprivileged and the others say why */
  const char *hz[] = {PW_GUARD_PROG_NOPIE, "free_malloc", NULL};
  r = run(hz, env);
  show("non-PIE free_malloc", &r);
  assert_int_equal(r.status, 0);
  free_result(&r);
}

/* The real libpinwheel.so exports the hooks, and a process under it still allocates and maps. */
static void test_real_shim_exports(void **state) {
  const char *argv[] = {PW_GUARD_PROG, "exports", NULL};
  const char *env[] = {"LD_PRELOAD=" PW_SHIM, NULL};
  result r = run(argv, env);
  if (r.status != 0) show("exports", &r);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "exports ok"));
  free_result(&r);
}

static void test_bench(void **state) {
  result r = guard_run("bench", NULL);
  show("bench: protect and release of 256 MiB (not asserted)", &r);
  assert_int_equal(r.status, 0);
  free_result(&r);
}

int main(void) {
  result r = guard_run("available", NULL);
  if (r.status != 0 || !strstr(r.out, "reason: ")) {
    fprintf(stderr, "test_guard: guard_prog failed (status %d)\n%s%s", r.status, r.out, r.err);
    return 1;
  }
  const char *reason = strstr(r.out, "reason: ") + 8;
  if (!strncmp(reason, "no_userfaultfd", 14) || !strncmp(reason, "uffd_user_only", 14) ||
      !strncmp(reason, "uffd_no_write_protect", 21)) {
    fprintf(stderr, "test_guard: SKIPPED: this kernel or these privileges give no guard: %s",
            reason);
    return 77;
  }
  if (strncmp(reason, "ok", 2)) {
    fprintf(stderr, "test_guard: the guard is unavailable: %s", reason);
    return 1;
  }
  free_result(&r);

  enum { NH = sizeof hazards / sizeof *hazards };
  struct CMUnitTest tests[NH + 16];
  int k = 0;
  for (int i = 0; i < NH; i++)
    tests[k++] = (struct CMUnitTest){hazards[i], test_hazard, NULL, NULL, (void *)hazards[i]};
  static const char *const plain[] = {"refuse", "overlap", "release_upto", "inner"};
  for (int i = 0; i < 4; i++)
    tests[k++] = (struct CMUnitTest){plain[i], test_plain, NULL, NULL, (void *)plain[i]};
  /* revocable guards: as built, and failing with the guard disabled */
  static const char *const revocable[] = {"revoke_write", "revoke_wait", "revoke_plain",
                                          "revoke_fork", "revoke_late"};
  for (int i = 0; i < 5; i++)
    tests[k++] = (struct CMUnitTest){revocable[i], test_hazard, NULL, NULL, (void *)revocable[i]};
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_maps_parse);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_unprivileged);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_own_free);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_nopie_free_address);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_real_shim_exports);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_bench);
  return _cmocka_run_group_tests("guard", tests, (size_t)k, NULL, NULL);
}
