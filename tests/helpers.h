/* helpers.h — for the tests that run programs: run one with a given environment, capture its
 * output and exit status; read a file whole. */
#ifndef PW_TEST_HELPERS_H
#define PW_TEST_HELPERS_H
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  int status;
  char *out, *err;
} result;

static inline char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = calloc(1, (size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  return b;
}

/* Run argv with exactly the given environment (plus PATH), stdout and stderr captured, and
 * standard input from the file `in` (NULL: inherited).  Under PW_TEST_EMULATOR (qemu-user, for
 * a cross build) the program runs in the emulator, LD_PRELOAD given to the guest only. */
static inline result run_in(const char *const *argv, const char *const *env, const char *in) {
  char out[] = "/tmp/pwtest-out-XXXXXX", err[] = "/tmp/pwtest-err-XXXXXX";
  int fo = mkstemp(out), fe = mkstemp(err);
  pid_t p = fork();
  if (p == 0) {
    if (in) {
      int fi = open(in, O_RDONLY);
      if (fi < 0) _exit(125);
      dup2(fi, 0);
    }
    dup2(fo, 1);
    dup2(fe, 2);
    const char *emu = getenv("PW_TEST_EMULATOR");
    char emu_copy[64] = "";
    if (emu) snprintf(emu_copy, sizeof emu_copy, "%s", emu);
    clearenv();
    setenv("PATH", "/usr/bin:/bin", 1);
    const char *preload = NULL;
    for (int i = 0; env && env[i]; i++) {
      if (emu_copy[0] && !strncmp(env[i], "LD_PRELOAD=", 11))
        preload = env[i];
      else
        putenv((char *)env[i]);
    }
    if (emu_copy[0]) {
      const char *eargv[64] = {emu_copy};
      int k = 1;
      if (preload) eargv[k++] = "-E", eargv[k++] = preload;
      for (int i = 0; argv[i] && k < 63; i++)
        eargv[k++] = argv[i];
      eargv[k] = NULL;
      execvp(emu_copy, (char *const *)eargv);
    } else {
      execv(argv[0], (char *const *)argv);
    }
    _exit(126);
  }
  int st = 0;
  waitpid(p, &st, 0);
  close(fo);
  close(fe);
  result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), slurp(out), slurp(err)};
  unlink(out);
  unlink(err);
  return r;
}

static inline result run(const char *const *argv, const char *const *env) {
  return run_in(argv, env, NULL);
}

static inline void free_result(result *r) {
  free(r->out);
  free(r->err);
}

#endif
