/* test_unmap.c — a shared-memory mapping's unmap moved off the calling thread
 * (shim/engine/unmap.c): the program's range is unmapped when the call returns, the bytes were the
 * file's until then, the moved mapping is gone once the thread ran; what is not one whole
 * shared-memory mapping, or finds the queue full, is left to the caller; a forked child unmaps what
 * is still queued. */
#define _GNU_SOURCE
#include "pw.h"
#include "unmap.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define MIB ((size_t)1 << 20)

/* A shared mapping of a new memfd named `name`, n bytes, every page written. */
static char *shm_map(const char *name, size_t n, int *fdp) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)n), 0);
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(p != MAP_FAILED);
  for (size_t i = 0; i < n; i += 4096)
    p[i] = (char)(i / 4096 * 7 + 1);
  *fdp = fd;
  return p;
}

static int mapped(const void *p) { /* msync answers ENOMEM for a range nothing maps */
  return msync((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, MS_ASYNC) == 0;
}

/* Mappings in /proc/self/maps whose name holds `name`. */
static int maps_with(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += strstr(line, name) != NULL;
  fclose(f);
  return n;
}

static int kernel_has_query(void) { /* PROCMAP_QUERY: Linux 6.11 */
  int fd;
  char *p = shm_map("pw-probe", PW_UNMAP_MIN, &fd);
  int ok = pw_unmap_defer(p, PW_UNMAP_MIN);
  if (!ok) munmap(p, PW_UNMAP_MIN);
  pw_unmap_drain();
  close(fd);
  return ok;
}

static int have_query;

static int setup(void **state) {
  (void)state;
  pw_unmap_start();
  have_query = kernel_has_query();
  if (!have_query) print_message("a kernel without PROCMAP_QUERY: nothing is deferred, skipped\n");
  return 0;
}

static void test_shared_mapping_moved_and_unmapped(void **state) {
  (void)state;
  if (!have_query) skip();
  int fd;
  size_t n = 32 * MIB;
  char *p = shm_map("pw-batch", n, &fd);
  uint64_t before = pw_get(&pw_st.shm_unmaps_deferred);
  pw_unmap_test_hold(1);
  errno = 1234;
  assert_int_equal(pw_unmap_defer(p, n), 1);
  assert_int_equal(errno, 1234);
  assert_false(mapped(p));                    /* the program's range: unmapped at return */
  assert_false(mapped(p + n - 1));            /* all of it */
  assert_int_equal(maps_with("pw-batch"), 1); /* the moved mapping, waiting for the thread */
  char b;
  assert_int_equal(pread(fd, &b, 1, 5 * 4096), 1);
  assert_int_equal(b, (char)(5 * 7 + 1));
  assert_int_equal(pw_get(&pw_st.shm_unmaps_deferred), before + 1);
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("pw-batch"), 0);
  /* the range can be mapped again, as after any munmap */
  char *r = mmap(p, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_ptr_equal(r, p);
  munmap(r, 4096);
  close(fd);
}

static void test_declined(void **state) {
  (void)state;
  if (!have_query) skip();
  size_t n = 32 * MIB;
  /* private anonymous memory */
  char *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  memset(a, 1, n);
  assert_int_equal(pw_unmap_defer(a, n), 0);
  assert_true(mapped(a));
  munmap(a, n);
  /* shared anonymous memory (not a /dev/shm file or memfd) */
  a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  assert_int_equal(pw_unmap_defer(a, n), 0);
  assert_true(mapped(a));
  munmap(a, n);
  int fd;
  char *p = shm_map("pw-part", n, &fd);
  assert_int_equal(pw_unmap_defer(p, n / 2), 0);               /* a part of the mapping */
  assert_int_equal(pw_unmap_defer(p + 4096, n - 4096), 0);     /* one that does not begin it */
  assert_int_equal(pw_unmap_defer(p, PW_UNMAP_MIN - 4096), 0); /* under the minimum */
  assert_true(mapped(p) && mapped(p + n - 1));
  munmap(p, n);
  close(fd);
  p = shm_map("pw-small", 4 * MIB, &fd); /* a whole mapping, too small */
  assert_int_equal(pw_unmap_defer(p, 4 * MIB), 0);
  assert_true(mapped(p));
  munmap(p, 4 * MIB);
  close(fd);
}

static void test_queue_full(void **state) {
  (void)state;
  if (!have_query) skip();
  enum { N = 6 };
  int fd[N], taken = 0;
  char *p[N];
  pw_unmap_test_hold(1);
  for (int i = 0; i < N; i++) {
    p[i] = shm_map("pw-full", 16 * MIB, &fd[i]);
    int t = pw_unmap_defer(p[i], 16 * MIB);
    if (!t) {
      assert_true(mapped(p[i])); /* declined: still the caller's */
      munmap(p[i], 16 * MIB);
    }
    taken += t;
  }
  assert_int_equal(taken, 4); /* the queue holds four */
  assert_int_equal(maps_with("pw-full"), 4);
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("pw-full"), 0);
  for (int i = 0; i < N; i++)
    close(fd[i]);
}

static void test_fork_child_unmaps_queued(void **state) {
  (void)state;
  if (!have_query) skip();
  int fd;
  char *p = shm_map("pw-fork", 16 * MIB, &fd);
  pw_unmap_test_hold(1);
  assert_int_equal(pw_unmap_defer(p, 16 * MIB), 1);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    pw_unmap_after_fork_child(); /* what the shim's atfork handler calls */
    int ok = maps_with("pw-fork") == 0 && !mapped(p);
    int fd2;
    char *q = shm_map("pw-fork2", 16 * MIB, &fd2);
    ok = ok && pw_unmap_defer(q, 16 * MIB) == 0; /* no thread in the child: nothing deferred */
    _exit(ok ? 0 : 1);
  }
  int st;
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(maps_with("pw-fork"), 1); /* the parent's is still queued */
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("pw-fork"), 0);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_mapping_moved_and_unmapped),
      cmocka_unit_test(test_declined),
      cmocka_unit_test(test_queue_full),
      cmocka_unit_test(test_fork_child_unmaps_queued),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
