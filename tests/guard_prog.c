/* guard_prog.c — the source guard's hazards, one per run, under a real LD_PRELOAD of the guard
 * (libpwguard_test.so: guard.c and memhooks.c, built with PW_TESTING so that the guard API and
 * pw_guard_test_disable are reachable with dlsym).  test_guard runs it.
 *
 *   guard_prog [--disable] HAZARD   protect a range, start the hazard, check that it waits and
 *                                   that a copy made after its attempt still reads the bytes the
 *                                   range held at protect; release; check the hazard completes.
 *                                   Exit 0 when all holds, 1 when the copy saw other bytes or the
 *                                   hazard did not wait, 2 when the hazard failed after release.
 *                                   --disable sets pw_guard_test_disable (nothing is guarded):
 *                                   every hazard must then fail (or the copy crash).
 *   guard_prog --maps HAZARD        the same, the mappings read from /proc/self/maps (kernels
 *                                   without PROCMAP_QUERY)
 *   guard_prog available            print the guard's reason ("reason: ok")
 *   guard_prog unpriv               the same, after dropping root (user nobody)
 *   guard_prog refuse|overlap|release_upto|inner   the guard's other promises
 *   guard_prog revoke_write|revoke_wait|revoke_plain|revoke_fork|revoke_late
 *                                   revocable guards: a write, pw_guard_wait and the hooks, fork
 *                                   take one away at once; a plain guard still waits for its owner;
 *                                   a revoke after the owner's release does nothing
 *   guard_prog bench                protect/release of 256 MiB with 1, 2 and 4 threads (printed)
 *   guard_prog exports              under libpinwheel.so: the hooked names resolve into it and
 *                                   the process's memory calls still work
 * Built a second time with GUARD_PROG_OWN_FREE (a program that defines free): "available" must
 * then say hooks_not_interposed.  Built a third time without PIE and with GUARD_PROG_FREE_ADDRESS
 * (a program that takes free's address, as Debian's and Ubuntu's python3 does: the program then
 * holds free's canonical PLT entry, and dlsym(RTLD_DEFAULT, "free") returns it): the guard must
 * be available, and free must still be hooked.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"

#ifdef GUARD_PROG_FREE_ADDRESS
void (*volatile guard_prog_free)(void *);
#endif

#ifdef GUARD_PROG_OWN_FREE
void __libc_free(void *);
void free(void *p) {
  __libc_free(p);
}
#endif

/* ---- the guard, from the preloaded library ---- */

static struct {
  int (*available)(void);
  const char *(*reason_name)(int);
  int (*protect)(const void *, size_t, int *);
  int (*protect_inner)(const void *, size_t, int *, const void **, const void **);
  int (*protect_revocable)(const void *, size_t, int *, const void **, const void **,
                           void (*)(void *), void *);
  void (*wait)(const void *, size_t);
  void (*release_upto)(int, size_t);
  void (*release)(int);
  void (*wait_all)(void);
  int (*active)(void);
  size_t (*release_step)(void);
  void (*set_threads)(int);
  int (*threads)(void);
  void (*stats)(uint64_t *, uint64_t *);
  int *test_disable, *test_maps_parse;
} g;

static void resolve(void) {
#define R(field, name)                                                                             \
  do {                                                                                             \
    *(void **)&g.field = dlsym(RTLD_DEFAULT, name);                                                \
    if (!g.field) {                                                                                \
      fprintf(stderr, "guard_prog: %s not found: run me with LD_PRELOAD=libpwguard_test.so\n",     \
              name);                                                                               \
      exit(3);                                                                                     \
    }                                                                                              \
  } while (0)
  R(available, "pw_guard_available");
  R(reason_name, "pw_guard_reason_name");
  R(protect, "pw_guard_protect");
  R(protect_inner, "pw_guard_protect_inner");
  R(protect_revocable, "pw_guard_protect_revocable");
  R(wait, "pw_guard_wait");
  R(release_upto, "pw_guard_release_upto");
  R(release, "pw_guard_release");
  R(wait_all, "pw_guard_wait_all");
  R(active, "pw_guard_active");
  R(release_step, "pw_guard_release_step");
  R(set_threads, "pw_guard_set_threads");
  R(threads, "pw_guard_threads");
  R(stats, "pw_guard_stats");
  R(test_disable, "pw_guard_test_disable");
  R(test_maps_parse, "pw_guard_test_maps_parse");
#undef R
}

/* ---- tools ---- */

#define MiB ((size_t)1 << 20)
#define HOLD_MS 200
static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "guard_prog:%d: %s: ", __LINE__, #cond);                                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&t, &t) && errno == EINTR) {
  }
}

/* Wait up to ms for *flag; 1 when it was set. */
static int wait_flag(atomic_int *flag, int ms) {
  double end = now_ms() + ms;
  while (!atomic_load(flag) && now_ms() < end)
    sleep_ms(1);
  return atomic_load(flag);
}

static char *map_anon(size_t n) {
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(3);
  }
  return p;
}

/* A range 2 MiB-aligned (so that release steps fall where the test expects). */
static char *map_aligned(size_t n) {
  char *p = map_anon(n + 2 * MiB);
  char *a = (char *)(((uintptr_t)p + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
  return a;
}

static void fill(char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (char)(seed * 31u + i * 7u + (i >> 12));
}

/* ---- the hazard harness ---- */

typedef struct hazard {
  char *buf; /* the guarded source */
  size_t n;
  int fd;          /* for the I/O hazards */
  size_t io;       /* bytes the I/O hazard moves */
  char *moved;     /* realloc / mremap: the block afterwards */
  atomic_int done; /* the hazard's call returned */
  double done_at;
  int status; /* 0: the call succeeded, else what failed (errno or -1) */
} hazard;

static char pattern_b(size_t i) {
  return (char)(0xB0 ^ (i & 0xff));
}

static void finish(hazard *h, int status) {
  h->status = status;
  h->done_at = now_ms();
  atomic_store(&h->done, 1);
}

static void *hz_write(void *arg) {
  hazard *h = arg;
  for (size_t i = 0; i < h->n; i += 4096)
    h->buf[i] = pattern_b(i);
  h->buf[h->n - 1] = 'B';
  finish(h, 0);
  return NULL;
}

static void *hz_read(void *arg) {
  hazard *h = arg;
  ssize_t r = read(h->fd, h->buf + 100, h->io);
  finish(h, r == (ssize_t)h->io ? 0 : r < 0 ? errno : -1);
  return NULL;
}

static void *hz_pread(void *arg) {
  hazard *h = arg;
  ssize_t r = pread(h->fd, h->buf + 100, h->io, 0);
  finish(h, r == (ssize_t)h->io ? 0 : r < 0 ? errno : -1);
  return NULL;
}

static void *hz_recv(void *arg) {
  hazard *h = arg;
  ssize_t r = recv(h->fd, h->buf + 100, h->io, MSG_WAITALL);
  finish(h, r == (ssize_t)h->io ? 0 : r < 0 ? errno : -1);
  return NULL;
}

static void *hz_fread(void *arg) {
  hazard *h = arg;
  FILE *f = fdopen(h->fd, "rb");
  size_t r = f ? fread(h->buf + 100, 1, h->io, f) : 0;
  int e = errno;
  finish(h, r == h->io ? 0 : f && ferror(f) ? e : -1);
  return NULL;
}

static void *hz_free_malloc(void *arg) {
  hazard *h = arg;
  free(h->buf);
  char *q = malloc(h->n);
  for (size_t i = 0; q && i < h->n; i++)
    q[i] = pattern_b(i);
  h->moved = q;
  finish(h, q ? 0 : ENOMEM);
  return NULL;
}

static void *hz_realloc(void *arg) {
  hazard *h = arg;
  char *q = realloc(h->buf, 2 * h->n);
  for (size_t i = 0; q && i < h->n; i++)
    q[i] = pattern_b(i); /* whatever realloc did, the old contents change now */
  h->moved = q;
  finish(h, q ? 0 : ENOMEM);
  return NULL;
}

static void *hz_munmap(void *arg) {
  hazard *h = arg;
  finish(h, munmap(h->buf, h->n) ? errno : 0);
  return NULL;
}

static void *hz_mremap(void *arg) {
  hazard *h = arg;
  char *q = mremap(h->buf, h->n, 2 * h->n, MREMAP_MAYMOVE);
  if (q != MAP_FAILED)
    for (size_t i = 0; i < h->n; i += 4096)
      q[i] = pattern_b(i);
  h->moved = q == MAP_FAILED ? NULL : q;
  finish(h, q == MAP_FAILED ? errno : 0);
  return NULL;
}

static void *hz_madvise(void *arg) {
  hazard *h = arg;
  finish(h, madvise(h->buf, h->n, MADV_DONTNEED) ? errno : 0);
  return NULL;
}

static void *hz_mprotect(void *arg) {
  hazard *h = arg;
  finish(h, mprotect(h->buf, h->n, PROT_NONE) ? errno : 0);
  return NULL;
}

static void *hz_mmap_fixed(void *arg) {
  hazard *h = arg;
  char *q =
      mmap(h->buf, h->n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (q != MAP_FAILED) memset(q, 'B', h->n);
  finish(h, q == MAP_FAILED ? errno : 0);
  return NULL;
}

/* Protect h->buf, start fn on a new thread, then: the hazard has not returned after HOLD_MS; a copy
 * of the range equals the bytes at protect; release; the hazard returns, successfully. */
static void run_hazard(const char *name, hazard *h, void *(*fn)(void *)) {
  char *snap = malloc(h->n), *copy = malloc(h->n);
  memcpy(snap, h->buf, h->n);
  int id, r = g.protect(h->buf, h->n, &id);
  CHECK(r == 0, "%s: protect: %s", name, g.reason_name(r));
  double t_release = 0;
  pthread_t t;
  pthread_create(&t, NULL, fn, h);
  int early = wait_flag(&h->done, HOLD_MS);
  CHECK(!early, "%s: the hazard did not wait for the guard", name);
  memcpy(copy, h->buf, h->n); /* what a copy thread reads after the hazard's attempt */
  size_t bad = 0;
  while (bad < h->n && copy[bad] == snap[bad])
    bad++;
  CHECK(bad == h->n, "%s: the copy saw other bytes at offset %zu", name, bad);
  t_release = now_ms();
  g.release(id);
  pthread_join(t, NULL);
  CHECK(atomic_load(&h->done), "%s: the hazard never returned", name);
  if (h->status) {
    fprintf(stderr, "guard_prog: %s: after release the hazard failed: %s\n", name,
            h->status > 0 ? strerror(h->status) : "short count");
    exit(2);
  }
  if (!early)
    printf("%s: waited, copy intact, completed %.1f ms after release\n", name,
           h->done_at - t_release);
  free(snap);
  free(copy);
}

/* ---- hazards ---- */

/* The protecting thread itself writes right after protect; a "copy thread" reads and releases. */
typedef struct {
  hazard *h;
  char *snap;
  int id;
  int intact;
  double released_at;
} copier;

static void *copy_then_release(void *arg) {
  copier *c = arg;
  sleep_ms(HOLD_MS);
  c->intact = !memcmp(c->h->buf, c->snap, c->h->n);
  c->released_at = now_ms();
  g.release(c->id);
  return NULL;
}

static void hazard_write_self(hazard *h) {
  copier c = {.h = h, .snap = malloc(h->n)};
  memcpy(c.snap, h->buf, h->n);
  int r = g.protect(h->buf, h->n, &c.id);
  CHECK(r == 0, "protect: %s", g.reason_name(r));
  pthread_t t;
  pthread_create(&t, NULL, copy_then_release, &c);
  double t0 = now_ms();
  hz_write(h); /* this thread, right after protect */
  pthread_join(t, NULL);
  CHECK(c.intact, "write_self: the copy saw the new bytes");
  CHECK(h->done_at - t0 >= HOLD_MS * 0.9, "write_self: the write did not wait (%.1f ms)",
        h->done_at - t0);
  CHECK(h->buf[h->n - 1] == 'B', "write_self: the write was lost");
  if (!failures) printf("write_self: waited %.1f ms, copy intact\n", h->done_at - t0);
}

static void *child_thread_writer(void *arg) {
  return hz_write(arg);
}

int main(int argc, char **argv) {
  alarm(120);
#ifdef GUARD_PROG_FREE_ADDRESS
  guard_prog_free = free; /* in code built without PIE: free's address is its canonical PLT entry */
  if (dlsym(RTLD_DEFAULT, "free") != (void *)guard_prog_free)
    fprintf(stderr, "guard_prog: free has no canonical PLT entry in this build\n");
#endif
  setvbuf(stdout, NULL, _IONBF, 0);
  int disable = argc > 1 && !strcmp(argv[1], "--disable");
  int maps = argc > 1 && !strcmp(argv[1], "--maps"); /* the /proc/self/maps parser */
  const char *what = argc > 1 + disable + maps ? argv[1 + disable + maps] : "";
  if (!strcmp(what, "freebench")) {
    extern int freebench_main(void);
    return freebench_main();
  }
  if (!strcmp(what, "exports")) {
    extern int exports_main(void);
    return exports_main();
  }
  if (!strcmp(what, "unpriv")) {
    if (getuid() == 0) {
      if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) {
        perror("setuid");
        return 3;
      }
    }
  }
  resolve();
  *g.test_disable = disable;
  *g.test_maps_parse = maps;
  int avail = g.available();
  if (!strcmp(what, "available") || !strcmp(what, "unpriv")) {
    printf("reason: %s\n", g.reason_name(avail));
    return 0;
  }
  if (avail) {
    fprintf(stderr, "guard_prog: the guard is unavailable: %s\n", g.reason_name(avail));
    return 77;
  }
  extern int others_main(const char *);
  if (!strcmp(what, "refuse") || !strcmp(what, "overlap") || !strcmp(what, "release_upto") ||
      !strcmp(what, "inner") || !strcmp(what, "bench") || !strcmp(what, "fork"))
    return others_main(what);
  if (!strncmp(what, "revoke_", 7)) {
    extern int revoke_main(const char *);
    return revoke_main(what);
  }

  size_t n = 64 * MiB;
  hazard h = {.n = n, .fd = -1};
  if (!strcmp(what, "free_malloc") || !strcmp(what, "realloc")) {
    h.buf = malloc(n); /* above glibc's mmap threshold: unmapped by free */
  } else if (!strcmp(what, "write_unpopulated")) {
    h.buf = map_anon(n); /* never touched: every page unpopulated */
  } else {
    h.buf = map_anon(n);
  }
  if (strcmp(what, "write_unpopulated")) fill(h.buf, n, 1);

  if (!strcmp(what, "write_self")) {
    hazard_write_self(&h);
  } else if (!strcmp(what, "write_child") || !strcmp(what, "write_unpopulated")) {
    run_hazard(what, &h, child_thread_writer); /* a thread started right after protect */
  } else if (!strcmp(what, "write_thread")) {
    /* a thread that already ran before protect, released by a flag */
    extern void hazard_write_thread(hazard *);
    hazard_write_thread(&h);
  } else if (!strcmp(what, "read_pipe")) {
    int p[2];
    if (pipe(p)) return 3;
    h.io = 32 * 1024;
    char *b = malloc(h.io);
    for (size_t i = 0; i < h.io; i++)
      b[i] = pattern_b(i);
    if (write(p[1], b, h.io) != (ssize_t)h.io) return 3;
    h.fd = p[0];
    run_hazard(what, &h, hz_read);
    CHECK(!memcmp(h.buf + 100, b, h.io), "read_pipe: the data did not arrive");
  } else if (!strcmp(what, "pread") || !strcmp(what, "fread")) {
    char path[] = "/tmp/pwguard-XXXXXX";
    int fd = mkstemp(path);
    h.io = 4 * MiB;
    char *b = malloc(h.io);
    for (size_t i = 0; i < h.io; i++)
      b[i] = pattern_b(i);
    if (write(fd, b, h.io) != (ssize_t)h.io) return 3;
    unlink(path);
    lseek(fd, 0, SEEK_SET);
    h.fd = fd;
    run_hazard(what, &h, !strcmp(what, "pread") ? hz_pread : hz_fread);
    CHECK(!memcmp(h.buf + 100, b, h.io), "%s: the data did not arrive", what);
  } else if (!strcmp(what, "recv")) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 3;
    h.io = 32 * 1024;
    char *b = malloc(h.io);
    for (size_t i = 0; i < h.io; i++)
      b[i] = pattern_b(i);
    if (send(sv[1], b, h.io, 0) != (ssize_t)h.io) return 3;
    h.fd = sv[0];
    run_hazard(what, &h, hz_recv);
    CHECK(!memcmp(h.buf + 100, b, h.io), "recv: the data did not arrive");
  } else if (!strcmp(what, "free_malloc")) {
    run_hazard(what, &h, hz_free_malloc);
  } else if (!strcmp(what, "realloc")) {
    run_hazard(what, &h, hz_realloc);
  } else if (!strcmp(what, "munmap")) {
    run_hazard(what, &h, hz_munmap);
  } else if (!strcmp(what, "mremap")) {
    run_hazard(what, &h, hz_mremap);
  } else if (!strcmp(what, "madvise")) {
    run_hazard(what, &h, hz_madvise);
  } else if (!strcmp(what, "mprotect")) {
    run_hazard(what, &h, hz_mprotect);
  } else if (!strcmp(what, "mmap_fixed")) {
    run_hazard(what, &h, hz_mmap_fixed);
  } else {
    fprintf(stderr, "guard_prog: unknown hazard '%s'\n", what);
    return 3;
  }
  CHECK(g.active() == 0, "a guard is left after release");
  return failures ? 1 : 0;
}

/* ---- write from a thread that existed before protect ---- */

static atomic_int go;
static void *waiting_writer(void *arg) {
  while (!atomic_load(&go))
    sleep_ms(1);
  return hz_write(arg);
}

void hazard_write_thread(hazard *h) {
  char *snap = malloc(h->n);
  memcpy(snap, h->buf, h->n);
  pthread_t t;
  pthread_create(&t, NULL, waiting_writer, h);
  sleep_ms(20);
  int id, r = g.protect(h->buf, h->n, &id);
  CHECK(r == 0, "protect: %s", g.reason_name(r));
  atomic_store(&go, 1);
  int early = wait_flag(&h->done, HOLD_MS);
  CHECK(!early, "write_thread: the write did not wait");
  CHECK(!memcmp(h->buf, snap, h->n), "write_thread: the copy saw the new bytes");
  double t0 = now_ms();
  g.release(id);
  pthread_join(t, NULL);
  CHECK(h->buf[h->n - 1] == 'B', "write_thread: the write was lost");
  uint64_t writes = 0, ns = 0;
  g.stats(&writes, &ns);
  if (!early) {
    CHECK(writes >= 1, "write_thread: no waiting write counted");
    CHECK(ns >= (uint64_t)HOLD_MS / 2 * 1000000, "write_thread: wait counted %.1f ms", ns / 1e6);
    printf("write_thread: waited, copy intact, completed %.1f ms after release; counted %llu "
           "write(s) that waited, %.1f ms\n",
           h->done_at - t0, (unsigned long long)writes, ns / 1e6);
  }
  free(snap);
}

/* ---- refusals ---- */

static void expect_refused(const char *what, void *p, size_t n, int want) {
  int id, r = g.protect(p, n, &id);
  CHECK(r == want, "%s: protect answered %s, not %s", what, g.reason_name(r), g.reason_name(want));
  if (!r) g.release(id);
  CHECK(g.active() == 0, "%s: a guard is left", what);
  if (r == want) printf("refused %s: %s\n", what, g.reason_name(r));
}

static char *volatile other_stack;
static atomic_int stack_ready, stack_go, stack_written;
static void *stack_owner(void *arg) {
  char buf[10000];
  memset(buf, 2, sizeof buf);
  other_stack = buf;
  atomic_store(&stack_ready, 1);
  sleep_ms(20);
  buf[5000] = 3; /* after protect: waits */
  atomic_store(&stack_written, 1);
  while (!atomic_load(&stack_go))
    sleep_ms(1);
  return (void *)(uintptr_t)buf[0];
}

static void refuse(void) {
  size_t n = 4 * MiB;
  char *s = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memset(s, 1, n);
  expect_refused("MAP_SHARED|MAP_ANONYMOUS", s + 100, n - 200, PW_GUARD_SHARED);
  int mfd = memfd_create("pwguard", 0);
  if (ftruncate(mfd, (off_t)n)) exit(3);
  char *ms = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  char *mp = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, mfd, 0);
  memset(mp, 1, n);
  expect_refused("memfd MAP_SHARED", ms, n, PW_GUARD_SHARED);
  expect_refused("memfd MAP_PRIVATE", mp, n, PW_GUARD_SHARED);
  char path[] = "/tmp/pwguard-XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  if (ftruncate(fd, (off_t)n)) exit(3);
  char *fs = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  char *fp = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  memset(fp, 1, n);
  expect_refused("file MAP_SHARED", fs, n, PW_GUARD_SHARED);
  expect_refused("file MAP_PRIVATE", fp, n, PW_GUARD_SHARED);
  int shm = shmget(IPC_PRIVATE, n, IPC_CREAT | 0600);
  char *sh = shmat(shm, NULL, 0);
  shmctl(shm, IPC_RMID, NULL);
  expect_refused("System V shm", sh, n, PW_GUARD_SHARED);
  /* private anonymous followed by shared: the whole range is refused, nothing left protected */
  char *both = map_anon(2 * n);
  if (mmap(both + n, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
      MAP_FAILED)
    exit(3);
  expect_refused("private then shared", both, 2 * n, PW_GUARD_SHARED);
  hazard h = {.buf = both, .n = 4096};
  pthread_t t;
  pthread_create(&t, NULL, hz_write, &h);
  CHECK(wait_flag(&h.done, 2000), "private then shared: the private part was left protected");
  pthread_join(t, NULL);
  /* a hole */
  char *hole = map_anon(3 * 4096);
  munmap(hole + 4096, 4096);
  expect_refused("a range with a hole", hole, 3 * 4096, PW_GUARD_ERROR);
  /* heap, stack and named anonymous memory may be guarded */
  char *heap = malloc(10000);
  memset(heap, 1, 10000);
  int id, r = g.protect(heap, 10000, &id);
  CHECK(r == 0, "heap block: %s", g.reason_name(r));
  if (!r) g.release(id);
  /* the calling thread's own stack: it would stop on its own frames */
  char stack[10000];
  memset(stack, 1, sizeof stack);
  expect_refused("the caller's own stack", stack, sizeof stack, PW_GUARD_OWN_STACK);
  /* another thread's stack may be guarded: that thread waits, like any writer */
  pthread_t t2;
  pthread_create(&t2, NULL, stack_owner, NULL);
  while (!atomic_load(&stack_ready))
    sleep_ms(1);
  r = g.protect(other_stack, 10000, &id);
  CHECK(r == 0, "another thread's stack: %s", g.reason_name(r));
  int early = wait_flag(&stack_written, 100);
  CHECK(!early, "another thread's stack: its write did not wait");
  if (!r) g.release(id);
  atomic_store(&stack_go, 1);
  pthread_join(t2, NULL);
  CHECK(atomic_load(&stack_written), "another thread's stack: its write never completed");
  free(heap);
  CHECK(g.active() == 0, "a guard is left");
}

/* ---- overlaps, slots, handles ---- */

static void overlap(void) {
  char *b = map_aligned(8 * MiB);
  memset(b, 1, 8 * MiB);
  int a, c, r = g.protect(b, MiB, &a);
  CHECK(r == 0, "first: %s", g.reason_name(r));
  r = g.protect(b + MiB / 2, MiB, &c);
  CHECK(r == PW_GUARD_OVERLAP, "overlapping: %s", g.reason_name(r));
  r = g.protect(b + MiB - 100, 1000, &c);
  CHECK(r == PW_GUARD_OVERLAP, "sharing the last page: %s", g.reason_name(r));
  r = g.protect(b + MiB, 1000, &c);
  CHECK(r == 0, "the next page: %s", g.reason_name(r));
  CHECK(g.active() == 2, "active %d", g.active());
  g.release(c);
  g.release(a);
  g.release(a); /* a stale handle: ignored */
  g.release_upto(a, MiB);
  r = g.protect(b + MiB / 2, MiB, &c);
  CHECK(r == 0, "after release: %s", g.reason_name(r));
  /* a handle of a reused slot is not the new guard's */
  int d;
  r = g.protect(b + 4 * MiB, MiB, &d);
  CHECK(r == 0, "another: %s", g.reason_name(r));
  g.release(a);
  CHECK(g.active() == 2, "a stale handle released a live guard (active %d)", g.active());
  g.release(c);
  g.release(d);
  /* 64 at once, then full */
  int ids[65], k = 0;
  for (; k < 65; k++) {
    r = g.protect(b + (size_t)k * 8192, 100, &ids[k]);
    if (r) break;
  }
  CHECK(k == 64 && r == PW_GUARD_FULL, "%d guards, then %s", k, g.reason_name(r));
  for (int i = 0; i < k; i++)
    g.release(ids[i]);
  CHECK(g.active() == 0, "a guard is left");
  r = g.protect(b, 0, &a);
  CHECK(r == 0 && a < 0, "an empty range: %s, handle %d", g.reason_name(r), a);
  g.release(a);
  if (!failures) printf("overlap: refused, slots and handles right\n");
}

/* ---- release_upto: whole pages, in steps ---- */

typedef struct {
  char *p;
  atomic_int done;
} probe;

static void *probe_write(void *arg) {
  probe *pr = arg;
  pr->p[0] = 'W';
  atomic_store(&pr->done, 1);
  return NULL;
}

/* Start a one-byte write at p; 1 when it completes within ms (the page is not protected). */
static int writable(probe *pr, pthread_t *t, char *p, int ms) {
  pr->p = p;
  atomic_store(&pr->done, 0);
  pthread_create(t, NULL, probe_write, pr);
  return wait_flag(&pr->done, ms);
}

static void release_upto(void) {
  size_t st = g.release_step(), pg = 4096;
  CHECK(st >= pg && !(st & (st - 1)), "release step %zu", st);
  char *b = map_aligned(16 * MiB);
  memset(b, 1, 16 * MiB);
  char *p = b + 100;
  size_t n = 12 * MiB;
  int id, r = g.protect(p, n, &id);
  CHECK(r == 0, "protect: %s", g.reason_name(r));
  probe early, pr[8];
  pthread_t te, t[8];
  /* a writer stopped in the first step before any release */
  CHECK(!writable(&early, &te, b + st / 2, 50), "a protected page was writable");
  /* done ends one byte short of a step boundary: only the whole steps below it go */
  g.release_upto(id, 2 * st - 101); /* p + done = b + 2 st - 1 */
  CHECK(wait_flag(&early.done, 2000), "a writer in a released step was not woken");
  CHECK(writable(&pr[0], &t[0], b + st - pg, 2000), "the last page of the released step");
  CHECK(!writable(&pr[1], &t[1], b + st, 50), "the first page past the release");
  CHECK(!writable(&pr[2], &t[2], b + 2 * st - pg, 50), "the page holding p + done - 1");
  /* done ends 50 bytes past a step boundary: the page holding them is not whole, stays */
  g.release_upto(id, 2 * st - 50); /* p + done = b + 2 st + 50 */
  CHECK(wait_flag(&pr[1].done, 2000) && wait_flag(&pr[2].done, 2000),
        "writers below the release were not woken");
  CHECK(!writable(&pr[3], &t[3], b + 2 * st, 50), "the page only partly copied was released");
  CHECK(!writable(&pr[4], &t[4], b + 12 * MiB, 50), "a page far past done was released");
  g.release_upto(id, st); /* done never goes back: nothing changes */
  CHECK(!atomic_load(&pr[3].done), "release_upto went back");
  g.release(id);
  CHECK(wait_flag(&pr[3].done, 2000) && wait_flag(&pr[4].done, 2000),
        "release did not wake the last writers");
  pthread_join(te, NULL);
  for (int i = 0; i < 5; i++)
    pthread_join(t[i], NULL);
  /* the last page (holding the source's last byte and bytes past it) is guarded and released */
  r = g.protect(p, n, &id);
  CHECK(!writable(&pr[5], &t[5], p + n, 50), "the page holding the end was not guarded");
  g.release_upto(id, n);
  CHECK(!atomic_load(&pr[5].done), "release_upto(n) released the partial last page");
  g.release(id);
  CHECK(wait_flag(&pr[5].done, 2000), "the last page was not released");
  pthread_join(t[5], NULL);
  if (!failures) printf("release_upto: whole pages, in steps of %zu KiB\n", st >> 10);
}

/* ---- protect_inner: only whole pages; the caller's partial pages stay writable ---- */

static void inner(void) {
  char *b = map_aligned(8 * MiB);
  memset(b, 1, 8 * MiB);
  char *p = b + 100;
  size_t n = 4 * MiB;
  int id;
  const void *lo, *hi;
  int r = g.protect_inner(p, n, &id, &lo, &hi);
  CHECK(r == 0, "protect_inner: %s", g.reason_name(r));
  CHECK(lo == b + 4096 && hi == b + 4 * MiB, "inner range %p-%p for %p+%zu", lo, hi, (void *)p, n);
  probe head, tail, mid;
  pthread_t th, tt, tm;
  CHECK(writable(&head, &th, b, 2000), "the partial head page was guarded");
  CHECK(writable(&tail, &tt, b + 4 * MiB, 2000), "the partial tail page was guarded");
  CHECK(!writable(&mid, &tm, b + 4096, 50), "the first whole page was not guarded");
  g.release(id);
  CHECK(wait_flag(&mid.done, 2000), "the whole page was not released");
  pthread_join(th, NULL);
  pthread_join(tt, NULL);
  pthread_join(tm, NULL);
  r = g.protect_inner(b + 100, 4000, &id, &lo, &hi); /* no whole page: nothing to guard */
  CHECK(r == 0 && id < 0 && lo == hi, "no whole page: %s, id %d", g.reason_name(r), id);
  if (!failures) printf("inner: whole pages only\n");
}

/* ---- fork while guarded ---- */

static char *fork_buf;
static size_t fork_n;
static atomic_int fork_done;
static int child_status = -1;

static void *forker(void *arg) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10); /* a child left with protected pages would hang here */
    char *snap = arg;
    int ok = !memcmp(fork_buf, snap, fork_n);
    memset(fork_buf, 'C', fork_n); /* must not wait */
    _exit(ok ? 0 : 4);
  }
  atomic_store(&fork_done, 1);
  int st = 0;
  waitpid(pid, &st, 0);
  child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return NULL;
}

static void fork_hazard(void) {
  fork_n = 64 * MiB;
  fork_buf = map_anon(fork_n);
  fill(fork_buf, fork_n, 3);
  char *snap = malloc(fork_n);
  memcpy(snap, fork_buf, fork_n);
  int id, r = g.protect(fork_buf, fork_n, &id);
  CHECK(r == 0, "protect: %s", g.reason_name(r));
  pthread_t t;
  pthread_create(&t, NULL, forker, snap);
  int early = wait_flag(&fork_done, HOLD_MS);
  CHECK(!early, "fork: did not wait for the guard");
  CHECK(!memcmp(fork_buf, snap, fork_n), "fork: the copy saw other bytes");
  g.release(id);
  pthread_join(t, NULL);
  CHECK(child_status == 0, "fork: the child's memory was wrong or it hung (status %d)",
        child_status);
  CHECK(!memcmp(fork_buf, snap, fork_n), "fork: the parent's memory changed");
  memset(fork_buf, 'P', fork_n); /* the parent writes freely again */
  /* protect after the fork works in the parent too */
  r = g.protect(fork_buf, fork_n, &id);
  CHECK(r == 0, "protect after fork: %s", g.reason_name(r));
  g.release(id);
  /* and in a child: a userfaultfd of its own */
  pid_t pid = fork();
  if (pid == 0) {
    int cid, cr = g.protect(fork_buf, fork_n, &cid);
    hazard h = {.buf = fork_buf, .n = fork_n};
    pthread_t ct;
    pthread_create(&ct, NULL, hz_write, &h);
    int waited = !wait_flag(&h.done, 100);
    g.release(cid);
    pthread_join(ct, NULL);
    _exit(cr == 0 && waited ? 0 : 5);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a guard in a forked child did not work (%d)", st);
  if (!failures) printf("fork: waited for the guard; child and parent memory right\n");
}

/* ---- bench: protect and release of 256 MiB ---- */

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void bench_one(const char *kind, char *b, size_t n, int threads) {
  g.set_threads(threads);
  enum { REPS = 7 };
  double pt[REPS], rt[REPS], st[REPS];
  int id;
  g.protect(b, n, &id); /* registration and helper threads out of the way */
  g.release(id);
  for (int i = 0; i < REPS; i++) {
    double t0 = now_ms();
    int r = g.protect(b, n, &id);
    double t1 = now_ms();
    g.release(id);
    double t2 = now_ms();
    CHECK(r == 0, "bench protect: %s", g.reason_name(r));
    pt[i] = t1 - t0;
    rt[i] = t2 - t1;
    /* released as the engine would: every 4 MiB chunk, then the rest */
    g.protect(b, n, &id);
    double t3 = now_ms();
    for (size_t d = 4 * MiB; d <= n; d += 4 * MiB)
      g.release_upto(id, d);
    g.release(id);
    st[i] = now_ms() - t3;
  }
  qsort(pt, REPS, sizeof *pt, cmp_d);
  qsort(rt, REPS, sizeof *rt, cmp_d);
  qsort(st, REPS, sizeof *st, cmp_d);
  printf("bench %-22s %zu MiB, %d thread(s): protect %6.2f ms, release %6.2f ms, released in "
         "4 MiB steps %6.2f ms (medians of %d)\n",
         kind, n >> 20, threads, pt[REPS / 2], rt[REPS / 2], st[REPS / 2], REPS);
}

static void bench(void) {
  size_t n = 256 * MiB;
  char *small = map_aligned(n);
  madvise(small, n, MADV_NOHUGEPAGE);
  memset(small, 1, n);
  printf("bench: default threads %d, release step %zu KiB\n", g.threads(), g.release_step() >> 10);
  for (int t = 1; t <= 8; t *= 2)
    bench_one("4 KiB pages, populated", small, n, t);
  char *fresh = map_aligned(n);
  madvise(fresh, n, MADV_NOHUGEPAGE);
  for (int t = 1; t <= 4; t *= 2)
    bench_one("4 KiB, unpopulated", fresh, n, t); /* markers only */
  char *huge = map_aligned(n);
  madvise(huge, n, MADV_HUGEPAGE);
  memset(huge, 1, n);
  for (int t = 1; t <= 4; t *= 2)
    bench_one("2 MiB THP (if granted)", huge, n, t);
  g.set_threads(0);
}

int others_main(const char *what) {
  if (!strcmp(what, "refuse")) refuse();
  if (!strcmp(what, "overlap")) overlap();
  if (!strcmp(what, "release_upto")) release_upto();
  if (!strcmp(what, "fork")) fork_hazard();
  if (!strcmp(what, "inner")) inner();
  if (!strcmp(what, "bench")) bench();
  CHECK(g.active() == 0, "a guard is left");
  return failures ? 1 : 0;
}

/* ---- exports: the real libpinwheel.so defines the hooks, and the process still works ---- */

int exports_main(void) {
  static const char *const names[] = {"free",    "realloc", "reallocarray", "munmap",   "mremap",
                                      "madvise", "mmap",    "mmap64",       "mprotect", "shmat"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    Dl_info info = {0};
    void *f = dlsym(RTLD_DEFAULT, names[i]);
    CHECK(f && dladdr(f, &info) && info.dli_fname && strstr(info.dli_fname, "libpinwheel"),
          "%s resolves to %s", names[i], info.dli_fname ? info.dli_fname : "nothing");
  }
  /* the allocator and the mapping calls, through the hooks */
  for (int i = 0; i < 200000; i++) {
    char *p = malloc((size_t)(i % 5000) + 1);
    p[0] = 1;
    p = realloc(p, (size_t)(i % 7000) + 2);
    free(p);
  }
  char *big = malloc(64 * MiB);
  memset(big, 1, 64 * MiB);
  big = reallocarray(big, 2, 64 * MiB);
  CHECK(big && big[64 * MiB - 1] == 1, "reallocarray");
  free(big);
  char *m = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(m, 2, 8 * MiB);
  CHECK(!madvise(m, 8 * MiB, MADV_DONTNEED) && m[0] == 0, "madvise");
  char *m2 = mremap(m, 8 * MiB, 16 * MiB, MREMAP_MAYMOVE);
  CHECK(m2 != MAP_FAILED, "mremap");
  CHECK(!mprotect(m2, 4096, PROT_READ), "mprotect");
  CHECK(mmap(m2, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == m2,
        "MAP_FIXED");
  CHECK(!munmap(m2, 16 * MiB), "munmap");
  errno = 0;
  CHECK(munmap((void *)1, 4096) == -1 && errno == EINVAL, "munmap's errno");
  if (!failures) printf("exports ok\n");
  return failures ? 1 : 0;
}

/* ---- freebench: what the hooked free costs when nothing is guarded (printed) ---- */

int freebench_main(void) {
  enum { N = 20000000, K = 64 };
  static void *ring[K];
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
      free(ring[i % K]);
      ring[i % K] = malloc(32 + (size_t)(i % 7) * 16);
    }
    double t = now_ms() - t0;
    if (t < best) best = t;
  }
  for (int i = 0; i < K; i++)
    free(ring[i]);
  Dl_info info = {0};
  dladdr(dlsym(RTLD_DEFAULT, "free"), &info);
  printf("freebench: free(%s) + malloc pairs: %.2f ns each (best of 5 x %d)\n",
         info.dli_fname ? strrchr(info.dli_fname, '/') + 1 : "?", best * 1e6 / N, N);
  return 0;
}

/* ---- revocable guards ----
 *
 * The owner's side and revoke settle who releases with a compare-and-swap on the guard's state,
 * as guard.h asks: PROTECTING (revoke may come before protect returns: the owner releases after),
 * ACTIVE (revoke releases), REVOKED (revoked while protecting: the owner releases), DONE. */

enum { RV_PROTECTING, RV_ACTIVE, RV_REVOKED, RV_DONE };

typedef struct rv {
  atomic_int state;
  int id;
  atomic_int calls; /* revoke(arg) with this arg */
  atomic_int
      releases;    /* of them, the ones that released (counted once pw_guard_release returned) */
  atomic_int busy; /* revoke calls running */
} rv;

static rv rvs[4];
static atomic_int rv_bad_arg; /* revoke called with an arg that is none of rvs */

static void rv_revoke(void *arg) {
  rv *r = arg;
  if (r < rvs || r >= rvs + 4) {
    atomic_fetch_add(&rv_bad_arg, 1);
    return;
  }
  atomic_fetch_add(&r->busy, 1);
  atomic_fetch_add(&r->calls, 1);
  int s = atomic_load(&r->state);
  while (s == RV_PROTECTING || s == RV_ACTIVE) {
    int to = s == RV_ACTIVE ? RV_DONE : RV_REVOKED;
    if (atomic_compare_exchange_weak(&r->state, &s, to)) {
      if (to == RV_DONE) {
        g.release(r->id);
        atomic_fetch_add(&r->releases, 1);
      }
      break;
    }
  }
  atomic_fetch_sub(&r->busy, 1);
}

/* The writer of a revoked guard is woken by the un-protect, a moment before pw_guard_release
 * (on the reader thread) frees the slot: wait up to ms for no guard at all; 1 when so. */
static int wait_inactive(int ms) {
  double end = now_ms() + ms;
  while (g.active() && now_ms() < end)
    sleep_ms(1);
  return g.active() == 0;
}

/* Counts to 0 (atomically: a late revoke of the previous guard may be reading them). */
static void rv_reset(rv *r) {
  atomic_store(&r->calls, 0);
  atomic_store(&r->releases, 0);
}

/* Protect [p, p + n) revocably for r; 0 or the reason. */
static int rv_protect(rv *r, char *p, size_t n) {
  atomic_store(&r->state, RV_PROTECTING);
  const void *lo, *hi;
  int id, e = g.protect_revocable(p, n, &id, &lo, &hi, rv_revoke, r);
  r->id = id;
  int s = RV_PROTECTING;
  if (e || !atomic_compare_exchange_strong(&r->state, &s, RV_ACTIVE)) {
    atomic_store(&r->state, RV_DONE); /* refused, or revoked while protecting: release it here */
    g.release(id);
  }
  return e;
}

/* The owner's release: only if revoke has not taken the guard. */
static void rv_release(rv *r) {
  int s = RV_ACTIVE;
  if (atomic_compare_exchange_strong(&r->state, &s, RV_DONE)) g.release(r->id);
}

static void *rv_wait_thread(void *arg) {
  hazard *h = arg;
  g.wait(h->buf + 4096, 4096);
  finish(h, 0);
  return NULL;
}

static void *rv_fork_thread(void *arg) {
  hazard *h = arg;
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    memset(h->buf, 'C', h->n); /* the child writes its copy freely */
    _exit(h->buf[h->n - 1] == 'C' ? 0 : 4);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  finish(h, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return NULL;
}

/* 1 when the hazard h, started on a thread against a revocable guard, returned within 2 s (the
 * guard then released by revoke alone, once or more, with its arg); the guard is released anyway
 * after, so that a failing build ends. */
static int rv_hazard(const char *name, void *(*fn)(void *), size_t n, int *status) {
  char *b = map_aligned(n);
  memset(b, 1, n);
  rv *r = &rvs[0];
  rv_reset(r);
  hazard h = {.buf = b, .n = n};
  int e = rv_protect(r, b, n);
  CHECK(e == 0, "%s: protect: %s", name, g.reason_name(e));
  CHECK(atomic_load(&r->state) == RV_ACTIVE, "%s: revoked before any hazard", name);
  pthread_t t;
  double t0 = now_ms();
  pthread_create(&t, NULL, fn, &h);
  int prompt = wait_flag(&h.done, 2000);
  double took = h.done_at - t0;
  atomic_int *released = &r->releases;
  double end = now_ms() + 2000;
  while (prompt && !atomic_load(released) && now_ms() < end)
    sleep_ms(1);
  CHECK(prompt, "%s: the hazard still waits after 2 s: the guard was not revoked", name);
  CHECK(atomic_load(&r->calls) >= 1 && atomic_load(&r->releases) == 1,
        "%s: revoke called %d times, released %d times", name, atomic_load(&r->calls),
        atomic_load(&r->releases));
  CHECK(!atomic_load(&rv_bad_arg), "%s: revoke called with another arg", name);
  rv_release(r); /* a broken build: the owner ends it */
  pthread_join(t, NULL);
  if (fn == hz_write)
    CHECK(b[0] == pattern_b(0) && b[n - 1] == 'B', "%s: the write is not there", name);
  CHECK(wait_inactive(2000), "%s: a guard is left", name);
  if (prompt)
    printf("%s: revoked (%d call(s)), the hazard returned after %.1f ms\n", name,
           atomic_load(&r->calls), took);
  *status = h.status;
  return prompt;
}

static void *rv_munmap_thread(void *arg) {
  hazard *h = arg;
  finish(h, munmap(h->buf, h->n) ? errno : 0);
  return NULL;
}

int revoke_main(const char *what) {
  alarm(30); /* whatever hangs fails */
  size_t n = 8 * MiB;
  int st = 0;
  if (!strcmp(what, "revoke_write")) {
    /* a write from another thread stops, the reader revokes, the write completes */
    rv_hazard(what, hz_write, n, &st);
    CHECK(st == 0, "revoke_write: the write failed");
  } else if (!strcmp(what, "revoke_wait")) {
    /* pw_guard_wait on a range overlapping it revokes it, then returns */
    rv_hazard(what, rv_wait_thread, n, &st);
    /* and a hook: munmap of the range */
    rv_hazard("revoke_munmap", rv_munmap_thread, n, &st);
    CHECK(st == 0, "revoke_munmap: munmap failed: %s", strerror(st));
  } else if (!strcmp(what, "revoke_fork")) {
    /* fork (the prepare handler's wait) revokes it; the child runs and exits normally */
    rv_hazard(what, rv_fork_thread, n, &st);
    CHECK(st == 0, "revoke_fork: the child ended with status %d", st);
  } else if (!strcmp(what, "revoke_plain")) {
    /* a plain guard next to a revocable one still waits for its owner's release */
    char *b = map_aligned(2 * n);
    memset(b, 1, 2 * n);
    rv *r = &rvs[1];
    int e = rv_protect(r, b + n, n), id;
    CHECK(e == 0, "revocable: %s", g.reason_name(e));
    const void *lo, *hi;
    e = g.protect_inner(b, n, &id, &lo, &hi);
    CHECK(e == 0, "plain: %s", g.reason_name(e));
    hazard h = {.buf = b, .n = n};
    pthread_t t;
    pthread_create(&t, NULL, hz_write, &h);
    int early = wait_flag(&h.done, HOLD_MS);
    CHECK(!early, "revoke_plain: a write on a plain guard did not wait");
    CHECK(atomic_load(&r->calls) == 0, "revoke_plain: the revocable guard beside was revoked");
    double t0 = now_ms();
    g.release(id);
    CHECK(wait_flag(&h.done, 2000), "revoke_plain: the write did not complete after release");
    pthread_join(t, NULL);
    CHECK(h.buf[n - 1] == 'B', "revoke_plain: the write was lost");
    /* a pw_guard_wait on the plain guard's range waits for its owner too */
    e = g.protect_inner(b, n, &id, &lo, &hi);
    hazard w = {.buf = b, .n = n};
    pthread_create(&t, NULL, rv_wait_thread, &w);
    CHECK(!wait_flag(&w.done, HOLD_MS), "revoke_plain: pw_guard_wait did not wait");
    g.release(id);
    CHECK(wait_flag(&w.done, 2000), "revoke_plain: pw_guard_wait did not return after release");
    pthread_join(t, NULL);
    CHECK(atomic_load(&r->calls) == 0, "revoke_plain: the revocable guard beside was revoked");
    rv_release(r);
    if (!failures)
      printf("revoke_plain: the plain guard's writer waited, completed %.1f ms after release\n",
             h.done_at - t0);
  } else if (!strcmp(what, "revoke_late")) {
    char *b = map_aligned(2 * n);
    memset(b, 1, 2 * n);
    rv *a = &rvs[2], *c = &rvs[3];
    /* revoke after the owner's release: nothing released, the state stays the owner's */
    int e = rv_protect(a, b, n);
    CHECK(e == 0, "protect: %s", g.reason_name(e));
    rv_release(a);
    CHECK(g.active() == 0, "revoke_late: the owner's release left a guard");
    rv_revoke(a);
    CHECK(atomic_load(&a->releases) == 0 && atomic_load(&a->state) == RV_DONE,
          "revoke_late: a late revoke released (%d) or changed the state (%d)",
          atomic_load(&a->releases), atomic_load(&a->state));
    /* the slot serves another guard (the first free slot again): the stale revoke leaves it be */
    e = rv_protect(c, b, n);
    CHECK(e == 0, "protect again: %s", g.reason_name(e));
    rv_revoke(a);
    CHECK(g.active() == 1 && atomic_load(&c->state) == RV_ACTIVE,
          "revoke_late: a stale revoke took the next guard (active %d)", g.active());
    /* a stale handle's release is ignored too (the guard's generations) */
    g.release(a->id);
    CHECK(g.active() == 1, "revoke_late: a stale handle released the next guard");
    rv_release(c);
    CHECK(g.active() == 0 && atomic_load(&c->releases) == 0, "revoke_late: release");
    /* revoke and the owner's release racing: a writer and the owner at once, many times */
    int revoked = 0;
    for (int i = 0; i < 300; i++) {
      rv_reset(a);
      char *p = b + (size_t)(i % 64) * 4096 * 8;
      e = rv_protect(a, p, 4096 * 4);
      CHECK(e == 0, "race %d: protect: %s", i, g.reason_name(e));
      hazard h = {.buf = p, .n = 4096 * 4};
      pthread_t t;
      pthread_create(&t, NULL, hz_write, &h);
      if (i & 1) sched_yield();
      rv_release(a);
      pthread_join(t, NULL);
      double end = now_ms() + 2000; /* a revoke that took the guard ends its release */
      while (atomic_load(&a->busy) && now_ms() < end)
        sleep_ms(1);
      CHECK(h.buf[h.n - 1] == 'B', "race %d: the write was lost", i);
      revoked += atomic_load(&a->releases);
      CHECK(atomic_load(&a->releases) <= 1, "race %d: released twice", i);
      if (failures) break;
    }
    CHECK(wait_inactive(2000), "revoke_late: a guard is left after the races");
    CHECK(!atomic_load(&rv_bad_arg), "revoke_late: revoke called with another arg");
    if (!failures)
      printf("revoke_late: a late revoke does nothing; 300 races, %d released by revoke\n",
             revoked);
  } else {
    fprintf(stderr, "guard_prog: unknown '%s'\n", what);
    return 3;
  }
  CHECK(g.active() == 0, "a guard is left");
  return failures ? 1 : 0;
}
