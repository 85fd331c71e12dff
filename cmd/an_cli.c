/* an_cli.c — `pinwheel report`, `pinwheel diff`, `pinwheel export`.
 *
 * Owns: argument parsing (options anywhere on the line, `--` ends them, `-` is standard input)
 * and exit statuses: 0 done; 2 a usage error or a trace that cannot be read (one line on stderr
 * naming the file and what is wrong).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "an_out.h"
#include "cli.h"

static void print_thresholds(FILE *f) {
  for (int i = 0; i < an_nthresholds; i++)
    fprintf(f, "  %-24s %8g %-5s %s\n", an_thresholds[i].name, an_thresholds[i].value,
            an_thresholds[i].unit, an_thresholds[i].meaning);
}

static FILE *open_out(const char *path) {
  if (!path || !strcmp(path, "-")) return stdout;
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "pinwheel: cannot write %s: %s\n", path, strerror(errno));
  return f;
}

static int close_out(FILE *f, const char *path) {
  int bad = ferror(f);
  if (f != stdout)
    bad |= fclose(f) != 0;
  else
    bad |= fflush(f) != 0;
  if (bad) {
    fprintf(stderr, "pinwheel: writing %s failed\n", path ? path : "stdout");
    return 2;
  }
  return 0;
}

/* `-`: standard input, copied to a temporary file first (the SQLite and gzip readers need a
 * file); the report names it "(standard input)". */
static an_trace *load_or_say(const char *path) {
  char err[512];
  char *tmp = NULL;
  if (!strcmp(path, "-")) {
    const char *dir = getenv("TMPDIR");
    if (asprintf(&tmp, "%s/pinwheel-stdin-XXXXXX", dir && *dir ? dir : "/tmp") < 0) tmp = NULL;
    int fd = tmp ? mkstemp(tmp) : -1;
    if (fd < 0) {
      fprintf(stderr, "pinwheel: cannot make a temporary file for standard input: %s\n",
              strerror(errno));
      free(tmp);
      return NULL;
    }
    static char buf[1 << 16];
    ssize_t n;
    int bad = 0;
    while ((n = read(0, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0 && write(fd, buf, (size_t)n) != n) bad = 1;
    if (n < 0 || bad || close(fd)) {
      fprintf(stderr, "pinwheel: reading standard input into %s failed: %s\n", tmp,
              strerror(errno));
      unlink(tmp);
      free(tmp);
      return NULL;
    }
    path = tmp;
  }
  an_trace *t = an_load(path, err, sizeof err);
  if (tmp) {
    unlink(tmp);
    size_t l = strlen(tmp);
    free(tmp);
    if (t) {
      free(t->path);
      t->path = strdup("(standard input)");
    } else { /* say "(standard input)", not the temporary name */
      fprintf(stderr, "pinwheel: (standard input)%s\n", strlen(err) > l ? err + l : "");
      return NULL;
    }
  }
  if (!t) fprintf(stderr, "pinwheel: %s\n", err);
  return t;
}

/* A trace that reads but has nothing to report on. */
static int usable(const an_trace *t, const char *path) {
  if (t->nops == 0) {
    fprintf(stderr,
            "pinwheel: %s: no GPU activity (kernels, memcpys, memsets) in this trace: was the "
            "profiler's CUDA activity on (torch.profiler: ProfilerActivity.CUDA)?\n",
            path);
    return 0;
  }
  return 1;
}

static int step_range(const char *re) {
  char err[300];
  if (an_step_set_regex(re, err, sizeof err)) {
    fprintf(stderr, "pinwheel: %s\n", err);
    return -1;
  }
  return 0;
}

/* --step N named no step: say which steps there are (marked, or inferred from the loop). */
static void no_step(const an_trace *t, int step) {
  an_report *all = an_analyze(t, -1);
  if (all && all->nsteps)
    fprintf(stderr, "pinwheel: %s: no step %d in this trace (it has steps %d to %d%s)\n", t->path,
            step, all->steps[0].num, all->steps[all->nsteps - 1].num,
            all->step_src == AN_STEPS_INFERRED ? ", inferred from its repeating GPU work" : "");
  else
    fprintf(stderr,
            "pinwheel: %s: --step %d, but this trace has no steps (%s, and no repeating GPU work "
            "to infer them from)\n",
            t->path, step,
            an_step_regex ? "no annotation matches --step-range" : "no ProfilerStep#N");
  an_report_free(all);
}

int pw_cmd_report(int argc, char **argv) {
  const char *format = "text", *out = NULL;
  int step = -1, nfiles = 0, opts = 1;
  const char **files = calloc((size_t)argc + 1, sizeof *files);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_val = i + 1 < argc;
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      files[nfiles++] = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_report, stdout);
      fputs(pw_help_thresholds, stdout);
      print_thresholds(stdout);
      free(files);
      return 0;
    } else if (!strcmp(a, "--format") && has_val) {
      format = argv[++i];
      if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "html") &&
          strcmp(format, "svg")) {
        fprintf(stderr, "pinwheel report: unknown format '%s' (text, json, html, svg)\n", format);
        free(files);
        return 2;
      }
    } else if (!strcmp(a, "-o") && has_val) {
      out = argv[++i];
    } else if (!strcmp(a, "--step") && has_val) {
      char *end;
      errno = 0;
      long v = strtol(argv[++i], &end, 10);
      if (errno || end == argv[i] || *end || v < 0 || v > 1000000000) {
        fprintf(stderr, "pinwheel report: --step needs a step number, not '%s'\n", argv[i]);
        free(files);
        return 2;
      }
      step = (int)v;
    } else if (!strcmp(a, "--steps") && has_val) {
      const char *v = argv[++i];
      if (strcmp(v, "all") && strcmp(v, "summary")) {
        fprintf(stderr, "pinwheel report: --steps takes 'all' or 'summary', not '%s'\n", v);
        free(files);
        return 2;
      }
      an_all_steps = !strcmp(v, "all");
      if (!an_all_steps) an_thresholds[AN_T_STEPS_SHOWN].value = 0;
    } else if (!strcmp(a, "--step-range") && has_val) {
      if (step_range(argv[++i])) {
        free(files);
        return 2;
      }
    } else if (!strcmp(a, "--whole-trace")) {
      an_whole_trace = 1;
    } else if (!strcmp(a, "--threshold") && has_val) {
      if (an_threshold_set(argv[++i])) {
        fprintf(stderr, "pinwheel report: bad threshold '%s'; the thresholds are:\n", argv[i]);
        print_thresholds(stderr);
        free(files);
        return 2;
      }
    } else {
      fprintf(stderr, "pinwheel report: %s option %s\n%s",
              has_val || (strcmp(a, "--format") && strcmp(a, "-o") && strcmp(a, "--step") &&
                          strcmp(a, "--steps") && strcmp(a, "--step-range") &&
                          strcmp(a, "--threshold"))
                  ? "unknown"
                  : "a value is missing after the",
              a, pw_help_report);
      free(files);
      return 2;
    }
  }
  int n = nfiles;
  if (n <= 0) {
    fprintf(stderr, "pinwheel report: no trace given\n%s", pw_help_report);
    free(files);
    return 2;
  }
  if (!strcmp(format, "svg") && n != 1) {
    fprintf(stderr, "pinwheel report: --format svg draws one trace; give one file\n");
    free(files);
    return 2;
  }
  int stdins = 0;
  for (int k = 0; k < n; k++)
    stdins += !strcmp(files[k], "-");
  if (stdins > 1) {
    fprintf(stderr, "pinwheel report: standard input (-) can be given once\n");
    free(files);
    return 2;
  }
  an_trace **t = calloc((size_t)n, sizeof *t);
  an_report **r = calloc((size_t)n, sizeof *r);
  int rc = 0;
  for (int k = 0; k < n && !rc; k++) {
    if (!(t[k] = load_or_say(files[k])) || !usable(t[k], t[k]->path))
      rc = 2;
    else if (!(r[k] = an_analyze(t[k], step))) {
      no_step(t[k], step);
      rc = 2;
    }
  }
  if (!rc) {
    FILE *f = open_out(out);
    if (!f)
      rc = 2;
    else {
      an_out o = {.f = f,
                  .color =
                      !strcmp(format, "text") && f == stdout && isatty(1) && !getenv("NO_COLOR")};
      if (!strcmp(format, "text"))
        an_write_text(&o, r, n);
      else if (!strcmp(format, "json"))
        an_write_json(&o, r, n);
      else if (!strcmp(format, "html"))
        an_write_html(&o, r, n, step);
      else {
        int64_t w0 = INT64_MIN, w1 = INT64_MAX;
        if (step >= 0 && r[0]->ndevs) w0 = r[0]->devs[0].t0, w1 = r[0]->devs[0].t1;
        an_write_svg(&o, r[0], w0, w1, 1);
      }
      rc = close_out(f, out);
    }
  }
  for (int k = 0; k < n; k++) {
    an_report_free(r[k]);
    an_free(t[k]);
  }
  free(r);
  free(t);
  free(files);
  return rc;
}

int pw_cmd_diff(int argc, char **argv) {
  const char *files[2] = {NULL, NULL}, *format = "text";
  int nf = 0, opts = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      if (nf == 2) {
        fprintf(stderr, "pinwheel diff: two traces, not more ('%s')\n%s", a, pw_help_diff);
        return 2;
      }
      files[nf++] = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_diff, stdout);
      return 0;
    } else if (!strcmp(a, "--format") && i + 1 < argc) {
      format = argv[++i];
      if (strcmp(format, "text") && strcmp(format, "json")) {
        fprintf(stderr, "pinwheel diff: unknown format '%s' (text, json)\n", format);
        return 2;
      }
    } else if (!strcmp(a, "--step-range") && i + 1 < argc) {
      if (step_range(argv[++i])) return 2;
    } else if (!strcmp(a, "--whole-trace")) {
      an_whole_trace = 1;
    } else {
      fprintf(stderr, "pinwheel diff: unknown option %s\n%s", a, pw_help_diff);
      return 2;
    }
  }
  if (nf != 2) {
    fprintf(stderr, "%s", pw_help_diff);
    return 2;
  }
  if (!strcmp(files[0], "-") && !strcmp(files[1], "-")) {
    fprintf(stderr, "pinwheel diff: standard input (-) can be given once\n");
    return 2;
  }
  an_trace *a = load_or_say(files[0]), *b = a && usable(a, a->path) ? load_or_say(files[1]) : NULL;
  int rc = 2;
  if (a && b && usable(b, b->path)) {
    an_report *ra = an_analyze(a, -1), *rb = an_analyze(b, -1);
    an_out o = {.f = stdout};
    if (!an_diff_comparable(ra, rb)) {
      fprintf(stderr,
              "pinwheel diff: the traces ran on different devices (%s: %d, %s: %d "
              "devices); no device of one maps to one of the other\n",
              a->path, ra->ndevs, b->path, rb->ndevs);
    } else {
      if (!strcmp(format, "json"))
        an_write_diff_json(&o, ra, rb);
      else
        an_write_diff(&o, ra, rb);
      rc = close_out(stdout, NULL);
    }
    an_report_free(ra);
    an_report_free(rb);
  }
  an_free(a);
  an_free(b);
  return rc;
}

int pw_cmd_export(int argc, char **argv) {
  const char *out = NULL, *in = NULL;
  int opts = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      if (in) {
        fprintf(stderr, "pinwheel export: one trace, not more ('%s')\n", a);
        return 2;
      }
      in = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--format") && i + 1 < argc) {
      if (strcmp(argv[++i], "chrome")) {
        fprintf(stderr, "pinwheel export: the only format is chrome\n");
        return 2;
      }
    } else if (!strcmp(a, "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(a, "--step-range") && i + 1 < argc) {
      if (step_range(argv[++i])) return 2;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_export, stdout);
      return 0;
    } else {
      fprintf(stderr, "pinwheel export: unknown option %s\n%s", a, pw_help_export);
      return 2;
    }
  }
  if (!in || !out) {
    fputs(pw_help_export, stderr);
    return 2;
  }
  an_trace *t = load_or_say(in);
  if (!t) return 2;
  FILE *f = open_out(out);
  int rc = f ? (an_write_chrome(f, t), close_out(f, out)) : 2;
  an_free(t);
  return rc;
}
