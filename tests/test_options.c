/* test_options.c — the options table: good and bad values, suffixes, env parsing, warnings. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pw.h"

static void test_sizes(void **state) {
  long long v;
  assert_int_equal(pw_option_parse(PW_OPT_HOST_POOL, "256M", &v), 0);
  assert_int_equal(v, 256LL << 20);
  assert_int_equal(pw_option_parse(PW_OPT_HOST_POOL, "1g", &v), 0);
  assert_int_equal(v, 1LL << 30);
  assert_int_equal(pw_option_parse(PW_OPT_HOST_POOL, "64KiB", &v), 0);
  assert_int_equal(v, 64LL << 10);
  assert_int_equal(pw_option_parse(PW_OPT_MIN_BYTES, "4096", &v), 0);
  assert_int_equal(v, 4096);
  assert_int_equal(pw_option_parse(PW_OPT_DEVICE_RING, "0", &v), 0);
  assert_int_equal(v, 0);
  const char *bad[] = {"", "M", "-1", "12Q", "1.5G", "99999999999999999999", "9000000000G", " 4 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 42;
    if (pw_option_parse(PW_OPT_HOST_POOL, bad[i], &v) == 0) fail_msg("'%s' accepted", bad[i]);
    assert_int_equal(v, 42); /* untouched on failure */
  }
}

static void test_enums_bools_ints(void **state) {
  long long v;
  assert_int_equal(pw_option_parse(PW_OPT_MODE, "observe", &v), 0);
  assert_int_equal(v, PW_MODE_OBSERVE);
  assert_int_equal(pw_option_parse(PW_OPT_MODE, "STAGE", &v), 0);
  assert_int_equal(v, PW_MODE_STAGE);
  assert_int_equal(pw_option_parse(PW_OPT_MODE, "fast", &v), -1);
  assert_int_equal(pw_option_parse(PW_OPT_LOG, "debug", &v), 0);
  assert_int_equal(v, PW_LOG_DEBUG);
  assert_int_equal(pw_option_parse(PW_OPT_SYNC, "elide", &v), 0);
  assert_int_equal(v, PW_SYNC_ELIDE);
  const char *yes[] = {"1", "on", "YES", "true"}, *no[] = {"0", "off", "No", "false"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pw_option_parse(PW_OPT_STATS, yes[i], &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(pw_option_parse(PW_OPT_STATS, no[i], &v), 0);
    assert_int_equal(v, 0);
  }
  assert_int_equal(pw_option_parse(PW_OPT_STATS, "2", &v), -1);
  assert_int_equal(pw_option_parse(PW_OPT_THREADS, "16", &v), 0);
  assert_int_equal(v, 16);
  assert_int_equal(pw_option_parse(PW_OPT_THREADS, "8K", &v), -1); /* no suffix for counts */
  assert_int_equal(pw_option_parse(PW_OPT_THREADS, "5000", &v), -1);
  assert_int_equal(pw_option_parse(PW_OPT_STATS_FILE, "/tmp/x-%p", &v), 0);
  assert_int_equal(pw_option_parse(PW_OPT_STATS_FILE, "", &v), -1);
}

/* Capture what fn writes on fd 2. */
static char *capture_stderr(void (*fn)(void)) {
  char path[] = "/tmp/pwtest-opt-XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  dup2(fd, 2);
  fn();
  dup2(saved, 2);
  close(saved);
  static char buf[8192];
  memset(buf, 0, sizeof buf);
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  (void)n;
  close(fd);
  unlink(path);
  return buf;
}

static void init_opts(void) {
  pw_options_reset();
  pw_options_init();
}
static void print_opts(void) {
  pw_options_print(2);
}

static void test_environment(void **state) {
  setenv("PINWHEEL_MODE", "observe", 1);
  setenv("PINWHEEL_HOST_POOL", "2G", 1);
  setenv("PINWHEEL_CHUNK", "lots", 1);
  setenv("PINWHEEL_STATS_FILE", "/tmp/s-%p.json", 1);
  char *err = capture_stderr(init_opts);
  assert_int_equal(pw_option_get(PW_OPT_MODE), PW_MODE_OBSERVE);
  assert_int_equal(pw_option_get(PW_OPT_HOST_POOL), 2LL << 30);
  assert_int_equal(pw_option_get(PW_OPT_CHUNK), 4LL << 20); /* default kept */
  assert_string_equal(pw_option_str(PW_OPT_STATS_FILE), "/tmp/s-%p.json");
  assert_non_null(strstr(err, "PINWHEEL_CHUNK=lots is not valid; using the default, 4M"));
  assert_null(strstr(err, "PINWHEEL_MODE")); /* good values are silent */
  /* PINWHEEL_LOG=error silences the warning, whichever order the variables come in */
  setenv("PINWHEEL_LOG", "error", 1);
  err = capture_stderr(init_opts);
  assert_string_equal(err, "");
  unsetenv("PINWHEEL_LOG");
  pw_log_set_level(PW_LOG_WARN);
  unsetenv("PINWHEEL_MODE");
  unsetenv("PINWHEEL_HOST_POOL");
  unsetenv("PINWHEEL_CHUNK");
  unsetenv("PINWHEEL_STATS_FILE");
  pw_options_init(); /* parsed once: a second call reads nothing new */
  assert_int_equal(pw_option_get(PW_OPT_MODE), PW_MODE_OBSERVE);
  pw_options_reset();
  pw_options_init();
  assert_int_equal(pw_option_get(PW_OPT_MODE), PW_MODE_STAGE);
}

/* A removed option, or a removed value of a kept one: one warning line naming it removed, the
 * default kept; none of them is parsed as an option; PINWHEEL_LOG=error silences them too. */
static void test_removed_options_warn(void **state) {
  const char *gone[] = {"PINWHEEL_HELP",        "PINWHEEL_MAX_BYTES", "PINWHEEL_D2H",
                        "PINWHEEL_NT_STORES",   "PINWHEEL_D2H_FRESH", "PINWHEEL_HOST_COPIES",
                        "PINWHEEL_XLA_STAGING", "PINWHEEL_SETUP",     NULL};
  for (int i = 0; gone[i]; i++)
    setenv(gone[i], "0", 1);
  setenv("PINWHEEL_DEFER", "large", 1);
  char *err = capture_stderr(init_opts);
  for (int i = 0; gone[i]; i++) {
    char want[96];
    snprintf(want, sizeof want, "warning: %s was removed and is ignored (", gone[i]);
    const char *w = strstr(err, want);
    if (!w) fail_msg("no warning for %s:\n%s", gone[i], err);
    if (strstr(w + 1, want)) fail_msg("%s warned twice", gone[i]);
    if (!strchr(w, '\n') || strchr(w, '\n') - w > 200) fail_msg("%s: not one line", gone[i]);
  }
  assert_non_null(strstr(err, "PINWHEEL_DEFER=large was removed ("));
  assert_non_null(strstr(err, "; using the default, 1\n"));
  assert_null(strstr(err, "not valid")); /* removed, not merely bad */
  assert_int_equal(pw_option_get(PW_OPT_DEFER), 1);
  for (int i = 0; i < PW_OPT_COUNT; i++) /* the table no longer has them */
    for (int k = 0; gone[k]; k++)
      assert_string_not_equal(pw_option_name((pw_option_t)i), gone[k]);
  /* a kept option's good value is silent; PINWHEEL_LOG=error silences the removed ones */
  setenv("PINWHEEL_LOG", "error", 1);
  err = capture_stderr(init_opts);
  assert_string_equal(err, "");
  unsetenv("PINWHEEL_LOG");
  pw_log_set_level(PW_LOG_WARN);
  for (int i = 0; gone[i]; i++)
    unsetenv(gone[i]);
  unsetenv("PINWHEEL_DEFER");
  pw_options_reset();
}

/* A PINWHEEL_* variable pinwheel does not know: one warning line, naming the closest option when
 * one is close (a typo, a swap, a prefix), whatever the case; none for an option, a removed option
 * or a name pinwheel itself sets or reads; once per name; PINWHEEL_LOG=error silences it. */
static void test_unknown_variables_warn(void **state) {
  /* every option, with a value it accepts: silent */
  static const char *const values[] = {"0", "3-4", "stage", "warn", "text", "keep", "none"};
  for (int i = 0; i < PW_OPT_COUNT; i++) {
    long long v;
    size_t k = 0;
    while (pw_option_parse((pw_option_t)i, values[k], &v))
      k++;
    setenv(pw_option_name((pw_option_t)i), values[k], 1);
  }
  const char *mine[] = {"PINWHEEL_ROOT_PID", "PINWHEEL_LIBRARY", "PINWHEEL_HELP",
                        "PINWHEEL_MAX_BYTES", NULL}; /* set or read by pinwheel; removed ones */
  for (int i = 0; mine[i]; i++)
    setenv(mine[i], "1", 1);
  static const struct {
    const char *name, *near; /* near NULL: no option is close */
  } typos[] = {{"PINWHEEL_THREAD", "PINWHEEL_THREADS"},
               {"PINWHEEL_SYNC_MODE", "PINWHEEL_SYNC"},
               {"PINWHEEL_TRHEADS", "PINWHEEL_THREADS"},
               {"PINWHEEL_Host_Pool", "PINWHEEL_HOST_POOL"},
               {"PINWHEEL_STATS_FROMAT", "PINWHEEL_STATS_FORMAT"},
               {"PINWHEEL_LIBARY", "PINWHEEL_LIBRARY"},
               {"PINWHEEL_QZXW", NULL}};
  for (size_t i = 0; i < sizeof typos / sizeof *typos; i++)
    setenv(typos[i].name, "4", 1);
  char *err = capture_stderr(init_opts);
  for (size_t i = 0; i < sizeof typos / sizeof *typos; i++) {
    char want[160];
    if (typos[i].near)
      snprintf(want, sizeof want,
               "warning: %s is not an option (did you mean %s?); see `pinwheel options`\n",
               typos[i].name, typos[i].near);
    else
      snprintf(want, sizeof want, "warning: %s is not an option; see `pinwheel options`\n",
               typos[i].name);
    const char *w = strstr(err, want);
    if (!w) fail_msg("no warning for %s (want: %s):\n%s", typos[i].name, want, err);
    if (strstr(w + 1, want)) fail_msg("%s warned twice", typos[i].name);
  }
  for (int i = 0; i < PW_OPT_COUNT; i++) {
    char bad[96];
    snprintf(bad, sizeof bad, "%s is not an option", pw_option_name((pw_option_t)i));
    if (strstr(err, bad)) fail_msg("an option was warned about:\n%s", err);
  }
  for (int i = 0; mine[i]; i++) {
    char bad[96];
    snprintf(bad, sizeof bad, "%s is not an option", mine[i]);
    if (strstr(err, bad)) fail_msg("%s was warned about:\n%s", mine[i], err);
  }
  assert_null(strstr(err, "not valid"));
  assert_int_equal(pw_option_get(PW_OPT_THREADS), 0); /* nothing taken from the typo */
  /* PINWHEEL_LOG=error silences it */
  setenv("PINWHEEL_LOG", "error", 1);
  err = capture_stderr(init_opts);
  assert_string_equal(err, "");
  pw_log_set_level(PW_LOG_WARN);
  for (int i = 0; i < PW_OPT_COUNT; i++)
    unsetenv(pw_option_name((pw_option_t)i));
  for (int i = 0; mine[i]; i++)
    unsetenv(mine[i]);
  for (size_t i = 0; i < sizeof typos / sizeof *typos; i++)
    unsetenv(typos[i].name);
  /* a name twice in the environment (setenv never makes one; execve may pass one): one warning */
  extern char **environ;
  char **saved = environ;
  char *twice[] = {"PINWHEEL_THREAD=1", "HOME=/", "PINWHEEL_THREAD=2", "PINWHEEL_THREADX", NULL};
  environ = twice;
  err = capture_stderr(init_opts);
  environ = saved;
  const char *w = strstr(err, "PINWHEEL_THREAD is not an option");
  assert_non_null(w);
  assert_null(strstr(w + 1, "PINWHEEL_THREAD is not an option"));
  assert_non_null(
      strstr(err, "PINWHEEL_THREADX is not an option (did you mean PINWHEEL_THREADS?)"));
  pw_options_reset();
}

static void test_table_lists_every_option(void **state) {
  char *out = capture_stderr(print_opts);
  for (int i = 0; i < PW_OPT_COUNT; i++)
    if (!strstr(out, pw_option_name((pw_option_t)i))) fail_msg("%s missing", pw_option_name(i));
  assert_non_null(strstr(out, "PINWHEEL_DEVICE_RING     512M"));
}

/* Options are parsed once, before anyone reads them: threads that read an option while init
 * parses the environment see the parsed value, never the default (a bug once: init reset every
 * option while a thread on the NVTX path read one lazily). */
#define READERS 4
static pthread_barrier_t start;
static atomic_int wrong;
static void *reader(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  for (int i = 0; i < 200; i++)
    if (pw_option_get(PW_OPT_MIN_BYTES) != 12345 || pw_option_get(PW_OPT_MODE) != PW_MODE_OFF)
      atomic_fetch_add(&wrong, 1);
  return NULL;
}

static void test_parsed_once_before_any_read(void **state) {
  setenv("PINWHEEL_MIN_BYTES", "12345", 1);
  setenv("PINWHEEL_MODE", "off", 1);
  for (int round = 0; round < 300; round++) {
    pw_options_reset();
    pthread_t t[READERS];
    pthread_barrier_init(&start, NULL, READERS + 1);
    for (int i = 0; i < READERS; i++)
      pthread_create(&t[i], NULL, reader, NULL);
    pthread_barrier_wait(&start);
    pw_options_init(); /* init, racing the readers */
    for (int i = 0; i < READERS; i++)
      pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
  }
  unsetenv("PINWHEEL_MIN_BYTES");
  unsetenv("PINWHEEL_MODE");
  pw_options_reset();
  assert_int_equal(atomic_load(&wrong), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_enums_bools_ints),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_removed_options_warn),
      cmocka_unit_test(test_unknown_variables_warn),
      cmocka_unit_test(test_table_lists_every_option),
      cmocka_unit_test(test_parsed_once_before_any_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
