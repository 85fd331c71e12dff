/* man.c — writes the pinwheel(1) man page (roff) from the texts `pinwheel --help` prints.
 *
 * Built and run at build time (CMake target `manpage`), never installed: the page holds help.c's
 * usage texts, the options table as `pinwheel options` prints it and the report's thresholds as
 * `pinwheel report --help` prints them, so the page and --help cannot say different things.
 * Must never: add words of its own beyond the section names and the page's title line.
 *   pinwheel_man OUT.1
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pw.h"
#ifdef PW_HAVE_ANALYZER
#include "an.h"
#endif

/* One line of text, escaped for roff: a backslash is \e, a hyphen \- (so that it is not a
 * hyphenation point and searches find "--help"), and a line starting with a control character
 * gets \& in front. */
static void line(FILE *f, const char *s, size_t n) {
  if (n && (s[0] == '.' || s[0] == '\'')) fputs("\\&", f);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\')
      fputs("\\e", f);
    else if (s[i] == '-')
      fputs("\\-", f);
    else
      fputc(s[i], f);
  }
  fputc('\n', f);
}

/* Text, line by line; an empty line starts a new paragraph. */
static void text(FILE *f, const char *s) {
  while (*s) {
    const char *e = strchr(s, '\n');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n)
      line(f, s, n);
    else
      fputs(".PP\n", f);
    s += n + (e != NULL);
  }
}

/* Text as it is laid out for a terminal (usage lines, option lists). */
static void verbatim(FILE *f, const char *s) {
  fputs(".PP\n.nf\n", f);
  text(f, s);
  fputs(".fi\n", f);
}

static void entry(FILE *f, const char *name, const char *def, const char *meaning) {
  char b[1024];
  int n = snprintf(b, sizeof b, "(default: %s) %s", def, meaning);
  fputs(".TP\n.B ", f);
  line(f, name, strlen(name));
  line(f, b, n < (int)sizeof b ? (size_t)n : sizeof b - 1);
}

/* The options table, as `pinwheel options` prints it: a header, then "NAME DEFAULT MEANING". */
static int options(FILE *f) {
  FILE *t = tmpfile();
  if (!t) return -1;
  fflush(t);
  pw_options_print(fileno(t));
  rewind(t);
  char *buf = NULL;
  size_t cap = 0;
  ssize_t n;
  int rows = 0;
  while ((n = getline(&buf, &cap, t)) > 0) {
    if (buf[n - 1] == '\n') buf[--n] = 0;
    if (rows++ == 0) continue; /* the header */
    char *name = buf, *def = name + strcspn(name, " ");
    if (!*def) return free(buf), fclose(t), -1;
    *def++ = 0;
    def += strspn(def, " ");
    char *meaning = def + strcspn(def, " ");
    if (*meaning) *meaning++ = 0;
    meaning += strspn(meaning, " ");
    entry(f, name, def, meaning);
  }
  free(buf);
  fclose(t);
  return rows > 1 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fputs("usage: pinwheel_man OUT.1\n", stderr);
    return 2;
  }
  FILE *f = fopen(argv[1], "w");
  if (!f) return perror(argv[1]), 1;
  fprintf(f, ".TH PINWHEEL 1 \"\" \"pinwheel %s\" \"User Commands\"\n.nh\n", PW_VERSION);
  fputs(".SH NAME\npinwheel \\- ", f);
  line(f, pw_help_summary, strlen(pw_help_summary));
  fputs(".SH SYNOPSIS\n", f);
  verbatim(f, pw_help_usage);
  fputs(".SH DESCRIPTION\n", f);
  text(f, pw_help_about);
  fputs(".SH COMMANDS\n.SS run\n", f);
  verbatim(f, pw_help_run);
  fputs(".SS options\n", f);
  verbatim(f, pw_help_options);
#ifdef PW_HAVE_ANALYZER
  fputs(".SS report\n", f);
  verbatim(f, pw_help_report);
  fputs(".SS diff\n", f);
  verbatim(f, pw_help_diff);
  fputs(".SS export\n", f);
  verbatim(f, pw_help_export);
#endif
  fputs(".SH ENVIRONMENT\n", f);
  if (options(f)) {
    fprintf(stderr, "pinwheel_man: the options table could not be read\n");
    fclose(f);
    return 1;
  }
  entry(f, "PINWHEEL_LIBRARY", pw_help_library_default, pw_help_library_meaning);
#ifdef PW_HAVE_ANALYZER
  fputs(".SH REPORT THRESHOLDS\n", f);
  text(f, pw_help_thresholds);
  for (int i = 0; i < an_nthresholds; i++) {
    char def[128], range[64];
    an_threshold_range(i, range, sizeof range);
    snprintf(def, sizeof def, "%g%s%s; range: %s", an_thresholds[i].value,
             *an_thresholds[i].unit ? " " : "", an_thresholds[i].unit, range);
    entry(f, an_thresholds[i].name, def, an_thresholds[i].meaning);
  }
#endif
  fputs(".SH EXIT STATUS\n", f);
  text(f, pw_help_exit);
  fputs(".SH SEE ALSO\n", f);
  text(f, pw_help_more);
  if (fclose(f)) return perror(argv[1]), 1;
  return 0;
}
