/* an_cli.c — `pinwheel report`, `pinwheel diff`, `pinwheel export`.
 *
 * Owns: argument parsing (options anywhere on the line, `--` ends them, `-` is standard input)
 * into the analysis's options (an_options, handed to an_load and an_analyze) and the output form,
 * and exit statuses: 0 done; 2 a usage error or a trace that cannot be read (one line on stderr
 * naming the file and what is wrong).
 * Must never: compute a figure or format a report (report/ does); keep an option in a global.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "an.h"
#include "cli.h"

/* The thresholds as `pinwheel report --help` shows them: name, default, unit, range, meaning. */
static void print_thresholds(FILE *f) {
  for (int i = 0; i < an_nthresholds; i++) {
    char range[64];
    an_threshold_range(i, range, sizeof range);
    fprintf(f, "  %-24s %8g %-5s %-19s %s\n", an_thresholds[i].name, an_thresholds[i].value,
            an_thresholds[i].unit, range, an_thresholds[i].meaning);
  }
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
static an_trace *load_or_say(const char *path, const an_options *opt) {
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
  an_trace *t = an_load(path, opt, err, sizeof err);
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

/* --step-range RE: checked here, so a bad one is said before any trace is read. */
static int step_range(const char *cmd, an_options *opt, const char *re) {
  char err[300];
  if (an_step_regex_check(re, err, sizeof err)) {
    pw_usage(cmd, "%s", err);
    return -1;
  }
  opt->step_regex = re;
  return 0;
}

/* --step N named no step: say which steps there are (marked, or inferred from the loop). */
static void no_step(const an_trace *t, int step, const an_options *opt) {
  an_report *all = an_analyze(t, -1, opt);
  if (all && all->nsteps)
    fprintf(stderr, "pinwheel: %s: no step %d in this trace (it has steps %d to %d%s)\n", t->path,
            step, all->steps[0].num, all->steps[all->nsteps - 1].num,
            all->step_src == AN_STEPS_INFERRED ? ", inferred from its repeating GPU work" : "");
  else
    fprintf(stderr,
            "pinwheel: %s: --step %d, but this trace has no steps (%s, and no repeating GPU work "
            "to infer them from)\n",
            t->path, step,
            t->step_regex ? "no annotation matches --step-range" : "no ProfilerStep#N");
  an_report_free(all);
}

/* ---- the output forms: one table dispatches them ---- */

static void write_html(an_out *o, an_report **r, int n) {
  an_write_html(o, r, n);
}
static void write_svg(an_out *o, an_report **r, int n) { /* one trace: checked before */
  (void)n;
  an_write_svg(o, r[0], &r[0]->timelines[0], 1);
}

static const struct out_format {
  const char *name;
  void (*report)(an_out *, an_report **, int); /* pinwheel report --format NAME */
  void (*diff)(an_out *, const an_diff *);     /* pinwheel diff --format NAME */
  int (*export)(FILE *, const an_trace *);     /* pinwheel export --format NAME */
  int draws;     /* it draws the timelines: an_analyze runs the timeline pass */
  int one_trace; /* it shows one trace only */
  int color;     /* in colour on a terminal (NO_COLOR unset) */
} formats[] = {
    {"text", an_write_text, an_write_diff, NULL, 0, 0, 1},
    {"json", an_write_json, an_write_diff_json, NULL, 0, 0, 0},
    {"html", write_html, NULL, NULL, 1, 0, 0},
    {"svg", write_svg, NULL, NULL, 1, 1, 0},
    {"chrome", NULL, NULL, an_write_chrome, 0, 0, 0},
};
enum { NFORMATS = sizeof formats / sizeof formats[0] };
enum { FOR_REPORT, FOR_DIFF, FOR_EXPORT };

static int offers(const struct out_format *fm, int cmd) {
  return cmd == FOR_REPORT ? fm->report != NULL
         : cmd == FOR_DIFF ? fm->diff != NULL
                           : fm->export != NULL;
}

/* The format named, if the subcommand offers it; else NULL, and *names lists those it offers. */
static const struct out_format *format_of(const char *name, int cmd, char *names, size_t n) {
  size_t len = 0;
  names[0] = 0;
  for (int i = 0; i < NFORMATS; i++) {
    if (!offers(&formats[i], cmd)) continue;
    if (!strcmp(formats[i].name, name)) return &formats[i];
    len += (size_t)snprintf(names + len, len < n ? n - len : 0, "%s%s", len ? ", " : "",
                            formats[i].name);
  }
  return NULL;
}

/* ---- pinwheel report ---- */

typedef struct report_args {
  const struct out_format *format;
  const char *out;
  int step;
  an_options opt; /* the analysis's options: --step-range, --whole-trace, --steps, the form */
  const char **files;
  int nfiles;
} report_args;

/* One option of `pinwheel report` at argv[*i] (and its value after it): -1 taken (and *i past
 * its value), else the exit status. */
static int report_option(report_args *ra, int argc, char **argv, int *i) {
  const char *v;
  const pw_opt *o = pw_opt_take(&pw_cmd_report_opts, argc, argv, i, &v);
  if (!o) return 2;
  const char *a = o->name;
  char names[128], err[1400];
  if (!strcmp(a, "--whole-trace")) {
    ra->opt.whole_trace = 1;
  } else if (!strcmp(a, "--format")) {
    if (!(ra->format = format_of(v, FOR_REPORT, names, sizeof names)))
      return pw_usage("report", "unknown format '%s' (%s)", v, names);
  } else if (!strcmp(a, "-o")) {
    ra->out = v;
  } else if (!strcmp(a, "--step")) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > 1000000000)
      return pw_usage("report", "--step needs a step number (0 or more), not '%s'", v);
    ra->step = (int)n;
  } else if (!strcmp(a, "--steps")) {
    ra->opt.all_steps = !strcmp(v, "all");
    if (!ra->opt.all_steps) an_thresholds[AN_T_STEPS_SHOWN].value = 0;
  } else if (!strcmp(a, "--step-range")) {
    if (step_range("report", &ra->opt, v)) return 2;
  } else if (!strcmp(a, "--threshold")) {
    if (an_threshold_parse(v, err, sizeof err)) return pw_usage("report", "%s", err);
  } else {
    return pw_usage("report", "unknown option %s", a);
  }
  return -1;
}

/* The command line of `pinwheel report`: -1 to go on, else the exit status. */
static int report_args_parse(report_args *ra, int argc, char **argv) {
  int opts = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      ra->files[ra->nfiles++] = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_report, stdout);
      fputs(pw_help_thresholds, stdout);
      print_thresholds(stdout);
      return 0;
    } else {
      int rc = report_option(ra, argc, argv, &i);
      if (rc >= 0) return rc;
    }
  }
  if (ra->nfiles <= 0) return pw_usage("report", "no trace given");
  if (ra->format->one_trace && ra->nfiles != 1)
    return pw_usage("report", "--format %s draws one trace, not %d", ra->format->name, ra->nfiles);
  int stdins = 0;
  for (int k = 0; k < ra->nfiles; k++)
    stdins += !strcmp(ra->files[k], "-");
  if (stdins > 1) return pw_usage("report", "standard input (-) can be given once");
  return -1;
}

/* Each trace read and analysed, in order; 0, or 2 after saying what went wrong. */
static int report_analyze(report_args *ra, an_trace **t, an_report **r) {
  ra->opt.timelines = ra->format->draws;
  for (int k = 0; k < ra->nfiles; k++) {
    if (!(t[k] = load_or_say(ra->files[k], &ra->opt)) || !usable(t[k], t[k]->path)) return 2;
    if (!(r[k] = an_analyze(t[k], ra->step, &ra->opt))) {
      no_step(t[k], ra->step, &ra->opt);
      return 2;
    }
  }
  return 0;
}

static int report_write(const report_args *ra, an_report **r) {
  FILE *f = open_out(ra->out);
  if (!f) return 2;
  an_out o = {.f = f,
              .color = ra->format->color && f == stdout && isatty(1) && !getenv("NO_COLOR")};
  ra->format->report(&o, r, ra->nfiles);
  return close_out(f, ra->out);
}

int pw_cmd_report(int argc, char **argv) {
  report_args ra = {.format = &formats[0], .step = -1};
  ra.files = calloc((size_t)argc + 1, sizeof *ra.files);
  int rc = report_args_parse(&ra, argc, argv);
  if (rc >= 0) {
    free(ra.files);
    return rc;
  }
  int n = ra.nfiles;
  an_trace **t = calloc((size_t)n, sizeof *t);
  an_report **r = calloc((size_t)n, sizeof *r);
  rc = report_analyze(&ra, t, r);
  if (!rc) rc = report_write(&ra, r);
  for (int k = 0; k < n; k++) {
    an_report_free(r[k]);
    an_free(t[k]);
  }
  free(r);
  free(t);
  free(ra.files);
  return rc;
}

int pw_cmd_diff(int argc, char **argv) {
  const char *files[2] = {NULL, NULL};
  const struct out_format *format = &formats[0];
  an_options opt = {0};
  char names[128];
  int nf = 0, opts = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    const pw_opt *o;
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      if (nf == 2) return pw_usage("diff", "two traces, not more ('%s')", a);
      files[nf++] = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_diff, stdout);
      return 0;
    } else if (!(o = pw_opt_take(&pw_cmd_diff_opts, argc, argv, &i, &v))) {
      return 2;
    } else if (!strcmp(o->name, "--format")) {
      if (!(format = format_of(v, FOR_DIFF, names, sizeof names)))
        return pw_usage("diff", "unknown format '%s' (%s)", v, names);
    } else if (!strcmp(o->name, "--step-range")) {
      if (step_range("diff", &opt, v)) return 2;
    } else if (!strcmp(o->name, "--whole-trace")) {
      opt.whole_trace = 1;
    } else {
      return pw_usage("diff", "unknown option %s", a);
    }
  }
  if (nf == 0) return pw_usage("diff", "no traces given (two are compared: BEFORE AFTER)");
  if (nf == 1)
    return pw_usage("diff", "one trace given, '%s'; two are compared: BEFORE AFTER", files[0]);
  if (!strcmp(files[0], "-") && !strcmp(files[1], "-"))
    return pw_usage("diff", "standard input (-) can be given once");
  an_trace *a = load_or_say(files[0], &opt),
           *b = a && usable(a, a->path) ? load_or_say(files[1], &opt) : NULL;
  int rc = 2;
  if (a && b && usable(b, b->path)) {
    an_report *ra = an_analyze(a, -1, &opt), *rb = an_analyze(b, -1, &opt);
    an_out o = {.f = stdout};
    an_diff *d = an_compare(ra, rb);
    if (!d) {
      fprintf(stderr,
              "pinwheel diff: the traces ran on different devices (%s: %d, %s: %d "
              "devices); no device of one maps to one of the other\n",
              a->path, ra->ndevs, b->path, rb->ndevs);
    } else {
      format->diff(&o, d);
      rc = close_out(stdout, NULL);
    }
    an_diff_free(d);
    an_report_free(ra);
    an_report_free(rb);
  }
  an_free(a);
  an_free(b);
  return rc;
}

int pw_cmd_export(int argc, char **argv) {
  const char *out = NULL, *in = NULL;
  const struct out_format *format = &formats[NFORMATS - 1];
  an_options opt = {0};
  char names[128];
  int opts = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    const pw_opt *o;
    if (!opts || !strcmp(a, "-") || a[0] != '-') {
      if (in) return pw_usage("export", "one trace, not more ('%s')", a);
      in = a;
    } else if (!strcmp(a, "--")) {
      opts = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(pw_help_export, stdout);
      return 0;
    } else if (!(o = pw_opt_take(&pw_cmd_export_opts, argc, argv, &i, &v))) {
      return 2;
    } else if (!strcmp(o->name, "--format")) {
      if (!(format = format_of(v, FOR_EXPORT, names, sizeof names)))
        return pw_usage("export", "unknown format '%s' (%s)", v, names);
    } else if (!strcmp(o->name, "-o")) {
      out = v;
    } else if (!strcmp(o->name, "--step-range")) {
      if (step_range("export", &opt, v)) return 2;
    } else {
      return pw_usage("export", "unknown option %s", a);
    }
  }
  if (!in) return pw_usage("export", "no trace given");
  if (!out) return pw_usage("export", "no output file given (-o OUT)");
  an_trace *t = load_or_say(in, &opt);
  if (!t) return 2;
  FILE *f = open_out(out);
  int rc = f ? (format->export(f, t), close_out(f, out)) : 2;
  an_free(t);
  return rc;
}
