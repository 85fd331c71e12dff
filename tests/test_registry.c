/* test_registry.c — the registry of the program's pinned memory (shim/front/app_memcpy.c), which
 * the shim's exported memcpy reads.  memcpy is async-signal-safe and programs rely on it, so its
 * read side must be too: a signal handler that interrupts a thread inside pw_pinned_add or _remove,
 * and copies, must neither deadlock nor get a wrong answer about memory recorded before (a bug
 * once: the read side took the registry's rwlock, held for writing by the interrupted thread). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "front.h"

/* What front.c defines in the shim: the memcpy runs its pinned-memory path in stage mode. */
atomic_int pw_ready = 1;
int pw_mode = PW_MODE_STAGE;
int pw_sync_mode;
pw_engine *pw_eng;
PW_TLS int pw_depth;
PW_TLS void *pw_elide_stream;
/* cudnn.c's answer: whether this thread is inside cudnnCreate */
static int in_cudnn_create, query_unwrapped;
int pw_cudnn_creating(void) {
  return in_cudnn_create;
}
int pw_cudnn_query_unwrapped(void) {
  return query_unwrapped;
}

#define WRITERS 2
#define COPY (2u << 20) /* above PW_HOSTCOPY_MIN: the handler's memcpy asks the registry */
static char keep[1 << 16];
static char *src;
static __thread char *dst; /* each writer's own: the handlers of two threads copy at once */
static atomic_int stop, handled, wrong;
static pthread_t writers[WRITERS];

static void on_signal(int sig) {
  (void)sig;
  if (!dst) return; /* not a writer yet */
  if (!pw_pinned_contains(keep + 100, 1000) || pw_pinned_contains(src, COPY))
    atomic_fetch_add(&wrong, 1);
  memcpy(dst, src, COPY);
  if (dst[0] != 'x' || dst[COPY - 1] != 'y') atomic_fetch_add(&wrong, 1);
  atomic_fetch_add(&handled, 1);
}

static void *writer(void *arg) {
  char *mine = arg;
  dst = malloc(COPY);
  while (!atomic_load(&stop))
    for (int i = 0; i < 64; i++) {
      pw_pinned_add(mine + i * 4096, 4096);
      pw_pinned_remove(mine + i * 4096);
    }
  return NULL;
}

/* The stress, in a child process: WRITERS threads add and remove regions without pause while
 * another thread signals them as fast as it can, for a second. */
static int stress(void) {
  src = malloc(COPY);
  memset(src, 'x', COPY - 1);
  src[COPY - 1] = 'y';
  pw_pinned_add(keep, sizeof keep);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGUSR1, &sa, NULL);
  static char spaces[WRITERS][64 * 4096];
  for (int i = 0; i < WRITERS; i++)
    pthread_create(&writers[i], NULL, writer, spaces[i]);
  struct timespec t0, now, nap = {0, 20000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < WRITERS; i++)
      pthread_kill(writers[i], SIGUSR1);
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 1000000000L);
  atomic_store(&stop, 1);
  for (int i = 0; i < WRITERS; i++)
    pthread_join(writers[i], NULL);
  fprintf(stderr, "handled %d, wrong %d\n", atomic_load(&handled), atomic_load(&wrong));
  return atomic_load(&handled) < 100 ? 2 : atomic_load(&wrong) != 0;
}

static void test_signal_handler_copies_while_registering(void **state) {
  (void)state;
  pid_t p = fork();
  if (p == 0) {
    alarm(10); /* a deadlock ends here, killed by SIGALRM */
    _exit(stress());
  }
  int st = 0;
  waitpid(p, &st, 0);
  if (WIFSIGNALED(st)) fail_msg("the stress died of signal %d (deadlocked?)", WTERMSIG(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Regions come and go: a range is found only while it is recorded, and only inside one region. */
static void test_contains(void **state) {
  (void)state;
  static char a[8192], b[8192];
  assert_false(pw_pinned_contains(a, 10));
  pw_pinned_add(a, sizeof a);
  pw_pinned_add(b, sizeof b);
  assert_true(pw_pinned_contains(a, sizeof a));
  assert_true(pw_pinned_contains(b + 100, 100));
  assert_false(pw_pinned_contains(a + 1, sizeof a)); /* runs past its end */
  assert_false(pw_pinned_contains(a, (size_t)-1));   /* wraps around */
  pw_pinned_remove(a);
  assert_false(pw_pinned_contains(a, 10));
  assert_true(pw_pinned_contains(b, 10));
  pw_pinned_remove(b);
  assert_false(pw_pinned_contains(b, 10));
}

/* Pinned memory made inside cudnnCreate (each handle's error storage, a few bytes) is found like
 * any other, but does not count as the program's for sync elision (pw_pinned_any); the program's
 * does, alone or beside it, until freed, whichever is freed first; so does a region of more than
 * 256 bytes made inside cudnnCreate, and the storage itself once the query may be called past the
 * shim's wrapper. */
static void test_cudnn_storage_not_the_programs(void **state) {
  (void)state;
  static char flag[4096], app[4096];
  assert_false(pw_pinned_any());
  in_cudnn_create = 1;
  pw_pinned_add(flag, 4);
  in_cudnn_create = 0;
  assert_true(pw_pinned_contains(flag, 4));
  assert_false(pw_pinned_any());
  pw_pinned_add(app, sizeof app);
  assert_true(pw_pinned_any());
  pw_pinned_remove(flag); /* the handle destroyed first: the program's still counts */
  assert_true(pw_pinned_any());
  in_cudnn_create = 1; /* a handle made again, then the program's region freed */
  pw_pinned_add(flag, 4);
  in_cudnn_create = 0;
  pw_pinned_remove(app);
  assert_false(pw_pinned_any());
  pw_pinned_add(app, sizeof app); /* the slot app had, reused outside cudnnCreate: counted */
  assert_true(pw_pinned_any());
  pw_pinned_remove(app);
  pw_pinned_remove(flag);
  assert_false(pw_pinned_any());
  in_cudnn_create = 1; /* a larger region made on that thread meanwhile is not the storage */
  pw_pinned_add(app, sizeof app);
  in_cudnn_create = 0;
  assert_true(pw_pinned_any());
  pw_pinned_remove(app);
  assert_false(pw_pinned_any());
  in_cudnn_create = 1; /* the query reachable past the wrapper: the storage is the program's */
  pw_pinned_add(flag, 4);
  in_cudnn_create = 0;
  assert_false(pw_pinned_any());
  query_unwrapped = 1;
  assert_true(pw_pinned_any());
  pw_pinned_remove(flag);
  assert_false(pw_pinned_any());
  query_unwrapped = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_contains),
      cmocka_unit_test(test_cudnn_storage_not_the_programs),
      cmocka_unit_test(test_signal_handler_copies_while_registering),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
