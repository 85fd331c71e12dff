/* args.c — the options every subcommand shares the handling of: finding one in its command's
 * table (help.c), taking its value, and saying a usage error.
 *
 * Owns: the wording of the usage errors that are the same for every command (an unknown option,
 * a value missing, a value that is not one of the option's words) and the hint after each.
 * Must never: print the whole usage text on an error (one line names the problem).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int pw_usage(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pinwheel%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nsee 'pinwheel%s%s --help'\n", cmd ? " " : "", cmd ? cmd : "");
  return 2;
}

/* A value with no capital letter lists the words the option takes, "a|b|c". */
static int is_words(const char *v) {
  for (; *v; v++)
    if (*v >= 'A' && *v <= 'Z') return 0;
  return 1;
}

static int is_word(const char *words, const char *v) {
  size_t n = strlen(v);
  for (const char *w = words; *w;) {
    size_t len = strcspn(w, "|");
    if (len == n && !strncmp(w, v, n)) return 1;
    w += len + (w[len] == '|');
  }
  return 0;
}

/* "a|b|c" as "a, b or c" */
static void words_said(const char *words, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (const char *w = words; *w && k < n;) {
    size_t len = strcspn(w, "|");
    const char *sep = w == words ? "" : w[len] ? ", " : " or ";
    k += (size_t)snprintf(out + k, n - k, "%s%.*s", sep, (int)len, w);
    w += len + (w[len] == '|');
  }
}

const pw_opt *pw_opt_take(const pw_cmd_opts *c, int argc, char **argv, int *i, const char **value) {
  const char *a = argv[*i];
  const pw_opt *o = NULL;
  for (int k = 0; k < c->nopts && !o; k++)
    if (!strcmp(c->opts[k].name, a)) o = &c->opts[k];
  *value = NULL;
  if (!o) {
    pw_usage(c->cmd, "unknown option %s", a);
    return NULL;
  }
  if (!o->value) return o;
  if (*i + 1 >= argc) {
    pw_usage(c->cmd, "a value is missing after the option %s (%s %s)", a, a, o->value);
    return NULL;
  }
  const char *v = argv[++*i];
  if (is_words(o->value) && !is_word(o->value, v)) {
    char said[256];
    words_said(o->value, said, sizeof said);
    pw_usage(c->cmd, "%s takes %s%s, not '%s'", a, strchr(o->value, '|') ? "" : "only ", said, v);
    return NULL;
  }
  *value = v;
  return o;
}
