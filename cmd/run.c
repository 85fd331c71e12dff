/* run.c — `pinwheel run`: the launcher (libfaketime's faketime, for pinwheel).
 *
 * Owns: finding libpinwheel.so next to this program (build tree, or the install prefix's
 * library directory), putting it first in LD_PRELOAD, setting the PINWHEEL_* options asked for,
 * and exec'ing the command, whose exit status is then ours.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pw.h"

/* Where libpinwheel.so is: $PINWHEEL_LIBRARY, else beside this program (build tree), else in
 * the library directory of the prefix this program is installed in. */
static int find_library(char *out, size_t n) {
  const char *env = getenv("PINWHEEL_LIBRARY");
  if (env && *env) {
    if (access(env, R_OK) == 0) return snprintf(out, n, "%s", env), 0;
    fprintf(stderr, "pinwheel run: PINWHEEL_LIBRARY=%s cannot be read: %s\n", env, strerror(errno));
    return -1;
  }
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = 0;
  char *dir = dirname(self);
  const char *rel[] = {".", PW_BIN_TO_LIB, "../lib", "../lib64", NULL};
  for (int i = 0; rel[i]; i++) {
    char cand[PATH_MAX];
    snprintf(cand, sizeof cand, "%s/%s/libpinwheel.so", dir, rel[i]);
    char resolved[PATH_MAX];
    if (realpath(cand, resolved) && access(resolved, R_OK) == 0)
      return snprintf(out, n, "%s", resolved), 0;
  }
  fprintf(stderr,
          "pinwheel run: cannot find libpinwheel.so beside %s (set PINWHEEL_LIBRARY to the "
          "libpinwheel.so to preload)\n",
          dir);
  return -1;
}

/* A traced run: the program's NVTX ranges reach the trace through libpinwheel_nvtx.so (beside
 * libpinwheel.so), which NVTX loads from NVTX_INJECTION64_PATH — unless something else (Nsight
 * Systems) has set that variable already. */
static void set_nvtx_injection(const char *lib) {
  const char *trace = getenv("PINWHEEL_TRACE"), *cur = getenv("NVTX_INJECTION64_PATH");
  if (!trace || !*trace || (cur && *cur)) return;
  char dir[PATH_MAX], nvtx[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", lib);
  snprintf(nvtx, sizeof nvtx, "%s/libpinwheel_nvtx.so", dirname(dir));
  if (access(nvtx, R_OK) == 0) setenv("NVTX_INJECTION64_PATH", nvtx, 1);
}

/* The options that take a value, and the PINWHEEL_* variable each sets; -1: not one. */
static int value_option(const char *a) {
  static const struct {
    const char *flag;
    pw_option_t opt;
  } v[] = {{"--mode", PW_OPT_MODE},
           {"--sync", PW_OPT_SYNC},
           {"--stats-file", PW_OPT_STATS_FILE},
           {"--trace", PW_OPT_TRACE},
           {"--trace-delay", PW_OPT_TRACE_DELAY},
           {"--trace-duration", PW_OPT_TRACE_DURATION},
           {"--trace-capture", PW_OPT_TRACE_CAPTURE},
           {"--trace-steps", PW_OPT_TRACE_STEPS}};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++)
    if (!strcmp(a, v[i].flag)) return (int)v[i].opt;
  return -1;
}

int pw_cmd_run(int argc, char **argv) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_run, stdout);
      return 0;
    } else if (a[0] != '-') {
      break; /* the command */
    } else if (!pw_opt_take(&pw_cmd_run_opts, argc, argv, &i, &v)) {
      return 2;
    } else if (!strcmp(a, "--stats")) {
      setenv("PINWHEEL_STATS", "1", 1);
    } else if (!strcmp(a, "--json")) {
      setenv("PINWHEEL_STATS", "1", 1);
      setenv("PINWHEEL_STATS_FORMAT", "json", 1);
    } else {
      pw_option_t opt = (pw_option_t)value_option(a);
      long long parsed;
      if (value_option(a) < 0) return pw_usage("run", "unknown option %s", a);
      if (pw_option_parse(opt, v, &parsed) != 0)
        return pw_usage("run", "%s %s: not a valid value (%s in 'pinwheel options')", a, v,
                        pw_option_name(opt));
      setenv(pw_option_name(opt), v, 1);
      if (opt == PW_OPT_STATS_FILE) setenv("PINWHEEL_STATS", "1", 1);
      /* summaries are appended (several processes may share the name): this run's file starts
       * afresh.  unlink removes a symlink, never its target. */
      if (opt == PW_OPT_STATS_FILE && !strstr(v, "%p")) unlink(v);
    }
  }
  if (i >= argc)
    return pw_usage("run", "no command given (pinwheel run [OPTIONS] [--] CMD ARGS...)");
  static const struct {
    pw_option_t opt;
    const char *flag;
  } window[] = {{PW_OPT_TRACE_DELAY, "--trace-delay"},
                {PW_OPT_TRACE_DURATION, "--trace-duration"},
                {PW_OPT_TRACE_CAPTURE, "--trace-capture"},
                {PW_OPT_TRACE_STEPS, "--trace-steps"}};
  const char *trace = getenv("PINWHEEL_TRACE");
  for (size_t k = 0; k < sizeof window / sizeof *window && (!trace || !*trace); k++)
    if (getenv(pw_option_name(window[k].opt))) /* a window of no trace: surely a mistake */
      return pw_usage("run", "%s (%s) needs a trace: --trace PATH", window[k].flag,
                      pw_option_name(window[k].opt));
  char lib[PATH_MAX];
  if (find_library(lib, sizeof lib) != 0) return 127;
  const char *old = getenv("LD_PRELOAD");
  size_t need = strlen(lib) + (old ? strlen(old) : 0) + 2;
  char *preload = malloc(need);
  if (!preload) return 127;
  if (old && *old)
    snprintf(preload, need, "%s:%s", lib, old);
  else
    snprintf(preload, need, "%s", lib);
  setenv("LD_PRELOAD", preload, 1);
  free(preload);
  set_nvtx_injection(lib);
  /* exec keeps the pid: the command is the root process, the one whose summary always prints */
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv("PINWHEEL_ROOT_PID", pid, 1);
  execvp(argv[i], argv + i);
  int err = errno;
  fprintf(stderr, "pinwheel run: cannot run %s: %s\n", argv[i], strerror(err));
  return err == ENOENT ? 127 : 126;
}
