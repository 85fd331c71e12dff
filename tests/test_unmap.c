/* test_unmap.c — a shared-memory mapping's unmap moved off the calling thread
 * (shim/engine/unmap.c): the program's range is unmapped when the call returns, the bytes were the
 * file's until then, the moved mapping is gone once the thread ran; what is not one whole mapping
 * of a /dev/shm file, finds the queue full or /dev/shm short of 4 x what waits, is left to the
 * caller with errno untouched; a fork waits for a release under way, a forked child unmaps what is
 * still queued and leaves a slot being released; a failed move ends deferral.  Skipped where the
 * kernel lacks PROCMAP_QUERY or /dev/shm lacks room. */
#define _GNU_SOURCE
#include "pw.h"
#include "unmap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MIB ((size_t)1 << 20)

/* A shared mapping of a new /dev/shm file named `name` (unlinked, as PyTorch's are, unless
 * keep_name), n bytes, every page written; its descriptor in *fdp. */
static char *shm_map_named(const char *name, size_t n, int *fdp, int keep_name) {
  char path[128];
  snprintf(path, sizeof path, "/pwtest-%d-%s", (int)getpid(), name);
  int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  if (!keep_name) shm_unlink(path);
  assert_int_equal(ftruncate(fd, (off_t)n), 0);
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(p != MAP_FAILED);
  for (size_t i = 0; i < n; i += 4096)
    p[i] = (char)(i / 4096 * 7 + 1);
  *fdp = fd;
  return p;
}
static char *shm_map(const char *name, size_t n, int *fdp) {
  return shm_map_named(name, n, fdp, 0);
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

/* What the module needs, asked without it: PROCMAP_QUERY (the ioctl answers something other than
 * ENOTTY/EINVAL) and /dev/shm with 1 GiB free. */
static int usable(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t qa[13] = {sizeof qa, 0, (uintptr_t)&usable}; /* size, flags, address: the rest 0 */
  int r = ioctl(fd, _IOWR('f', 17, uint64_t[13]), qa), err = errno;
  close(fd);
  if (r && (err == ENOTTY || err == EINVAL)) return 0;
  struct statfs s;
  return statfs("/dev/shm", &s) == 0 && (uint64_t)s.f_bavail * (uint64_t)s.f_bsize >= 1024 * MIB;
}

static int have;

static int setup(void **state) {
  (void)state;
  pw_unmap_start();
  have = usable();
  if (!have)
    print_message("no PROCMAP_QUERY, or no room in /dev/shm: nothing is deferred, skipped\n");
  return 0;
}

static void test_shared_mapping_moved_and_unmapped(void **state) {
  (void)state;
  if (!have) skip();
  int fd;
  size_t n = 32 * MIB;
  char *p = shm_map("batch", n, &fd);
  uint64_t before = pw_get(&pw_st.shm_unmaps_deferred);
  pw_unmap_test_hold(1);
  errno = 1234;
  assert_int_equal(pw_unmap_defer(p, n - 100), 1); /* a length short of the last page: all of it */
  assert_int_equal(errno, 1234);
  assert_false(mapped(p));                  /* the program's range: unmapped at return */
  assert_false(mapped(p + n - 1));          /* all of it */
  assert_int_equal(maps_with("-batch"), 1); /* the moved mapping, waiting for the thread */
  char b;
  assert_int_equal(pread(fd, &b, 1, 5 * 4096), 1);
  assert_int_equal(b, (char)(5 * 7 + 1));
  assert_int_equal(pw_get(&pw_st.shm_unmaps_deferred), before + 1);
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("-batch"), 0);
  /* the range can be mapped again, as after any munmap */
  char *r = mmap(p, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_ptr_equal(r, p);
  munmap(r, 4096);
  close(fd);
  /* a file that still has its name */
  p = shm_map_named("named", n, &fd, 1);
  assert_int_equal(pw_unmap_defer(p, n), 1);
  assert_false(mapped(p));
  pw_unmap_drain();
  char path[128];
  snprintf(path, sizeof path, "/pwtest-%d-named", (int)getpid());
  shm_unlink(path);
  close(fd);
}

static void declined(char *a, size_t n) {
  errno = 4321;
  assert_int_equal(pw_unmap_defer(a, n), 0);
  assert_int_equal(errno, 4321);
  assert_true(mapped(a));
}

/* The batches left to the caller, every reason together. */
static uint64_t left_total(void) {
  uint64_t t = 0;
  for (int r = 0; r < PW_UNMAP_LEFT_N; r++)
    t += pw_get(&pw_st.shm_unmaps_left[r]);
  return t;
}

static void test_declined(void **state) {
  (void)state;
  if (!have) skip();
  size_t n = 32 * MIB;
  uint64_t left = left_total();
  /* private anonymous memory */
  char *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  memset(a, 1, n);
  declined(a, n);
  munmap(a, n);
  /* shared anonymous memory, and a memfd (its seals would see a mapping kept alive) */
  a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(a != MAP_FAILED);
  declined(a, n);
  munmap(a, n);
  int mfd = memfd_create("pw-memfd", MFD_CLOEXEC);
  assert_true(mfd >= 0 && ftruncate(mfd, (off_t)n) == 0);
  a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  assert_true(a != MAP_FAILED);
  declined(a, n);
  munmap(a, n);
  close(mfd);
  int fd;
  char *p = shm_map("part", n, &fd);
  declined(p, n / 2);               /* a part of the mapping */
  declined(p + 4096, n - 4096);     /* one that does not begin it */
  declined(p, PW_UNMAP_MIN - 4096); /* under the minimum */
  assert_true(mapped(p + n - 1));
  /* split in three by mprotect: the whole range is more than one mapping */
  assert_int_equal(mprotect(p + n / 2, 4096, PROT_READ), 0);
  declined(p, n);
  assert_true(mapped(p + n - 1));
  munmap(p, n);
  close(fd);
  p = shm_map("small", 4 * MIB, &fd); /* a whole mapping, too small */
  declined(p, 4 * MIB);
  munmap(p, 4 * MIB);
  close(fd);
  p = shm_map("private", n, &fd); /* a private mapping of a /dev/shm file */
  munmap(p, n);
  p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  assert_true(p != MAP_FAILED);
  declined(p, n);
  munmap(p, n);
  close(fd);
  /* none of these is a batch the queue was short of: nothing counted as left to the caller */
  assert_int_equal(left_total(), left);
}

static void test_queue_full(void **state) {
  (void)state;
  if (!have) skip();
  enum { N = 6 };
  int fd[N], taken = 0;
  char *p[N];
  uint64_t full = pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_QUEUE_FULL]);
  pw_unmap_test_hold(1);
  for (int i = 0; i < N; i++) {
    p[i] = shm_map(i ? "full" : "full0", 16 * MIB, &fd[i]);
    int t = pw_unmap_defer(p[i], 16 * MIB);
    if (!t) {
      assert_true(mapped(p[i])); /* declined: still the caller's */
      munmap(p[i], 16 * MIB);
    }
    taken += t;
  }
  assert_int_equal(taken, 4); /* the queue holds four */
  assert_int_equal(pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_QUEUE_FULL]),
                   full + N - 4); /* the others counted */
  char *anon = mmap(NULL, 16 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(anon != MAP_FAILED);
  declined(anon, 16 * MIB); /* not a batch: not counted, even with the queue full */
  munmap(anon, 16 * MIB);
  assert_int_equal(pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_QUEUE_FULL]), full + N - 4);
  assert_int_equal(maps_with("-full"), 4);
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("-full"), 0);
  for (int i = 0; i < N; i++)
    close(fd[i]);
}

/* /dev/shm must keep four times what waits, the new mapping included, free: a held batch must not
 * make another process's shared-memory allocation fail. */
static void test_room_in_dev_shm(void **state) {
  (void)state;
  if (!have) skip();
  int fd[3];
  char *p[3];
  for (int i = 0; i < 3; i++)
    p[i] = shm_map("room", 16 * MIB, &fd[i]);
  uint64_t no_room = pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_NO_ROOM]);
  pw_unmap_test_hold(1);
  pw_unmap_test_free(4 * 16 * MIB - 1); /* short of 4 x 16 MiB by a byte */
  declined(p[0], 16 * MIB);
  assert_int_equal(pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_NO_ROOM]), no_room + 1);
  pw_unmap_test_free(4 * 16 * MIB);
  assert_int_equal(pw_unmap_defer(p[0], 16 * MIB), 1);
  declined(p[1], 16 * MIB); /* 16 MiB waits: a second needs 4 x 32 MiB */
  pw_unmap_test_free(4 * 32 * MIB);
  assert_int_equal(pw_unmap_defer(p[1], 16 * MIB), 1);
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  pw_unmap_test_free(4 * 16 * MIB); /* nothing waits any more: room for one again */
  assert_int_equal(pw_unmap_defer(p[2], 16 * MIB), 1);
  pw_unmap_drain();
  pw_unmap_test_free(0);
  assert_int_equal(maps_with("-room"), 0);
  for (int i = 0; i < 3; i++)
    close(fd[i]);
}

static void test_fork_child_unmaps_queued(void **state) {
  (void)state;
  if (!have) skip();
  int fd;
  char *p = shm_map("fork", 16 * MIB, &fd);
  pw_unmap_test_hold(1);
  assert_int_equal(pw_unmap_defer(p, 16 * MIB), 1);
  pid_t c = fork();
  assert_true(c >= 0);
  if (c == 0) {
    pw_unmap_after_fork_child(); /* what the shim's atfork handler calls */
    int ok = maps_with("-fork ") == 0 && !mapped(p);
    int fd2;
    char *q = shm_map("fork2", 16 * MIB, &fd2);
    ok = ok && pw_unmap_defer(q, 16 * MIB) == 0; /* no thread in the child: nothing deferred */
    _exit(ok ? 0 : 1);
  }
  int st;
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(maps_with("-fork "), 1); /* the parent's is still queued */
  pw_unmap_test_hold(0);
  pw_unmap_drain();
  assert_int_equal(maps_with("-fork "), 0);
  close(fd);
}

/* fork's prepare waits while the thread releases a slot, and the thread starts no release while a
 * fork is under way: a child never finds a slot whose range the thread may have unmapped and
 * another thread mapped again.  Should the wait give up, the child leaves such a slot alone. */
static int child_after_fork(const char *name, int expect_mapped) {
  pid_t c = fork();
  if (c == 0) {
    pw_unmap_after_fork_child();
    _exit(maps_with(name) == expect_mapped ? 0 : 1);
  }
  int st;
  return c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static _Atomic int prepared;
static void *prepare_fork(void *arg) {
  (void)arg;
  pw_unmap_before_fork();
  atomic_store(&prepared, 1);
  return NULL;
}

static void test_fork_waits_for_release(void **state) {
  (void)state;
  if (!have) skip();
  int fd;
  size_t n = 16 * MIB;
  struct timespec ms30 = {0, 30000000};
  /* the thread is releasing a slot (begin_release stands for it): the prepare waits */
  pw_unmap_test_hold(1);
  char *p = shm_map("wait", n, &fd);
  assert_int_equal(pw_unmap_defer(p, n), 1);
  char *at = pw_unmap_test_begin_release(0);
  assert_non_null(at);
  atomic_store(&prepared, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, prepare_fork, NULL), 0);
  nanosleep(&ms30, NULL);
  assert_int_equal(atomic_load(&prepared), 0); /* still waiting */
  munmap(at, n);                               /* the release ends */
  pw_unmap_test_end_release();
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(atomic_load(&prepared), 1);
  /* while the fork is under way the thread starts no release */
  pw_unmap_test_hold(0);
  close(fd);
  p = shm_map("gate", n, &fd);
  assert_int_equal(pw_unmap_defer(p, n), 1);
  nanosleep(&ms30, NULL);
  assert_int_equal(maps_with("-gate"), 1);
  pw_unmap_after_fork_parent(); /* the fork is over: released */
  pw_unmap_drain();
  assert_int_equal(maps_with("-gate"), 0);
  close(fd);
}

static void test_child_leaves_slot_being_released(void **state) {
  (void)state;
  if (!have) skip();
  int fd, fd2;
  size_t n = 16 * MIB;
  pw_unmap_test_hold(1);
  /* the thread unmapped the slot's range and another batch of the same size took its place */
  char *p = shm_map("rel-gone", n, &fd);
  assert_int_equal(pw_unmap_defer(p, n), 1);
  char *at = pw_unmap_test_begin_release(1);
  assert_non_null(at);
  assert_int_equal(maps_with("-rel-gone"), 0);
  char path[128];
  snprintf(path, sizeof path, "/pwtest-%d-rel-other", (int)getpid());
  fd2 = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd2 >= 0);
  shm_unlink(path);
  assert_int_equal(ftruncate(fd2, (off_t)n), 0);
  char *other = mmap(at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd2, 0);
  if (other == MAP_FAILED) { /* something else took the hole first: nothing to test */
    pw_unmap_test_end_release();
    pw_unmap_test_hold(0);
    close(fd);
    close(fd2);
    skip();
  }
  assert_ptr_equal(other, at);
  assert_true(child_after_fork("-rel-other", 1)); /* the child keeps the other batch */
  pw_unmap_test_end_release();
  pw_unmap_test_hold(0);
  munmap(other, n);
  close(fd);
  close(fd2);
}

/* A move that fails (a sealed mapping: munmap and mremap both refuse it) leaves the program's
 * munmap its own answer and stops deferral for the process (run last). */
static void test_failed_move_stops_deferral(void **state) {
  (void)state;
  if (!have) skip();
  int fd;
  size_t n = 16 * MIB;
  char *p = shm_map("sealed", n, &fd);
  if (syscall(462 /* mseal, Linux 6.10 */, p, n, 0UL)) {
    munmap(p, n);
    close(fd);
    skip();
  }
  errno = 77;
  assert_int_equal(pw_unmap_defer(p, n), 0);
  assert_int_equal(errno, 77);
  assert_true(mapped(p));
  assert_int_equal(pw_unmap_test_stopped(), 1);
  assert_int_equal(pw_get(&pw_st.shm_unmaps_left[PW_UNMAP_MOVE_FAILED]), 1);
  close(fd);
  int fd2;
  char *q = shm_map("after", n, &fd2);
  declined(q, n); /* nothing more is deferred */
  munmap(q, n);
  close(fd2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_mapping_moved_and_unmapped),
      cmocka_unit_test(test_declined),
      cmocka_unit_test(test_queue_full),
      cmocka_unit_test(test_room_in_dev_shm),
      cmocka_unit_test(test_fork_child_unmaps_queued),
      cmocka_unit_test(test_fork_waits_for_release),
      cmocka_unit_test(test_child_leaves_slot_being_released),
      cmocka_unit_test(test_failed_move_stops_deferral), /* last: deferral ends here */
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
