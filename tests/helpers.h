/* helpers.h — for the tests that run programs: run one with a given environment, capture its
 * output and exit status; read a file whole. */
#ifndef PW_TEST_HELPERS_H
#define PW_TEST_HELPERS_H
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
 * standard input from the file `in` (NULL: inherited). */
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
    clearenv();
    setenv("PATH", "/usr/bin:/bin", 1);
    for (int i = 0; env && env[i]; i++)
      putenv((char *)env[i]);
    execv(argv[0], (char *const *)argv);
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
