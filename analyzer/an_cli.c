/* an_cli.c — `pinwheel report`, `pinwheel diff`, `pinwheel export`.
 *
 * Owns: argument parsing and exit statuses: 0 done; 2 a usage error or a trace that cannot be
 * read (one line on stderr naming the file and what is wrong).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "an.h"
#include "cli.h"

static const char report_usage[] =
    "usage: pinwheel report [--format text|json|html|svg] [-o FILE] [--step N]\n"
    "                       [--threshold NAME=VALUE]... TRACE...\n"
    "Reads torch.profiler (Kineto) Chrome trace JSON, plain or .gz, and Nsight Systems SQLite\n"
    "exports (format found from the content).  Several traces: one report, a row per rank.\n"
    "Thresholds (--threshold NAME=VALUE):\n";

static void print_rules(FILE *f) {
  for (int i = 0; i < an_nrules; i++)
    fprintf(f, "  %-24s %8g %-5s %s\n", an_rules[i].name, an_rules[i].value, an_rules[i].unit,
            an_rules[i].meaning);
}

static FILE *open_out(const char *path) {
  if (!path || !strcmp(path, "-")) return stdout;
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "pinwheel: cannot write %s: %m\n", path);
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

static an_trace *load_or_say(const char *path) {
  char err[512];
  an_trace *t = an_load(path, err, sizeof err);
  if (!t) fprintf(stderr, "pinwheel: %s\n", err);
  return t;
}

int pw_cmd_report(int argc, char **argv) {
  const char *format = "text", *out = NULL;
  int step = -1, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(report_usage, stdout);
      print_rules(stdout);
      return 0;
    } else if (!strcmp(a, "--format") && i + 1 < argc) {
      format = argv[++i];
      if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "html") &&
          strcmp(format, "svg")) {
        fprintf(stderr, "pinwheel report: unknown format '%s' (text, json, html, svg)\n", format);
        return 2;
      }
    } else if (!strcmp(a, "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(a, "--step") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 0 || v > 1000000000) {
        fprintf(stderr, "pinwheel report: --step needs a step number, not '%s'\n", argv[i]);
        return 2;
      }
      step = (int)v;
    } else if (!strcmp(a, "--threshold") && i + 1 < argc) {
      if (an_rule_set(argv[++i])) {
        fprintf(stderr, "pinwheel report: bad threshold '%s'; the thresholds are:\n", argv[i]);
        print_rules(stderr);
        return 2;
      }
    } else if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "pinwheel report: unknown option %s\n%s", a, report_usage);
      return 2;
    } else {
      break;
    }
  }
  int n = argc - i;
  if (n <= 0) {
    fprintf(stderr, "pinwheel report: no trace given\n%s", report_usage);
    return 2;
  }
  if (!strcmp(format, "svg") && n != 1) {
    fprintf(stderr, "pinwheel report: --format svg draws one trace; give one file\n");
    return 2;
  }
  an_trace **t = calloc((size_t)n, sizeof *t);
  an_report **r = calloc((size_t)n, sizeof *r);
  int rc = 0;
  for (int k = 0; k < n && !rc; k++) {
    if (!(t[k] = load_or_say(argv[i + k])))
      rc = 2;
    else if (t[k]->nops == 0) {
      fprintf(stderr, "pinwheel: %s: no GPU activity (kernels, memcpys, memsets) in this trace\n",
              argv[i + k]);
      rc = 2;
    } else if (!(r[k] = an_analyze(t[k], step))) {
      fprintf(stderr, "pinwheel: %s: no ProfilerStep#%d in this trace\n", argv[i + k], step);
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
  return rc;
}

int pw_cmd_diff(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    puts("usage: pinwheel diff BEFORE AFTER\nThe figures of two traces side by side, with deltas.");
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: pinwheel diff BEFORE AFTER\n");
    return 2;
  }
  an_trace *a = load_or_say(argv[1]), *b = a ? load_or_say(argv[2]) : NULL;
  int rc = 2;
  if (a && b) {
    an_report *ra = an_analyze(a, -1), *rb = an_analyze(b, -1);
    an_out o = {.f = stdout};
    an_write_diff(&o, ra, rb);
    rc = close_out(stdout, NULL);
    an_report_free(ra);
    an_report_free(rb);
  }
  an_free(a);
  an_free(b);
  return rc;
}

int pw_cmd_export(int argc, char **argv) {
  const char *out = NULL, *in = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc) {
      if (strcmp(argv[++i], "chrome")) {
        fprintf(stderr, "pinwheel export: the only format is chrome\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      puts("usage: pinwheel export --format chrome -o OUT TRACE\nChrome trace JSON that Perfetto "
           "opens: one "
           "process per device, one thread per stream.");
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "pinwheel export: unknown option %s\n", argv[i]);
      return 2;
    } else {
      in = argv[i];
    }
  }
  if (!in || !out) {
    fprintf(stderr, "usage: pinwheel export --format chrome -o OUT TRACE\n");
    return 2;
  }
  an_trace *t = load_or_say(in);
  if (!t) return 2;
  FILE *f = open_out(out);
  int rc = f ? (an_write_chrome(f, t), close_out(f, out)) : 2;
  an_free(t);
  return rc;
}
