/* an_analyze.c — the analysis: the passes in their order, the steady state, and the thresholds.
 *
 * Owns: an_analyze (pinwheel's copies, the steps marked or inferred, the step zoom or the steady
 * state, then the figures, the what-if and the findings over that window, and the timelines when
 * a form draws them), the only reader of the analysis's options (an_options), freeing a report,
 * which steps are listed, and the thresholds table every pass reads.
 * Must never: compute a figure itself (each pass owns its own), hand a pass an option through
 * anything but the report, or print.
 */
#define _GNU_SOURCE
#include "an.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

an_threshold an_thresholds[AN_T_N] = {
#define AN_T_ROW(id, nm, val, un, lo, hi, kind, mean)                                              \
  [AN_T_##id] = {nm, val, un, lo, hi, kind, mean},
    AN_THRESHOLDS(AN_T_ROW)
#undef AN_T_ROW
};

void an_threshold_range(int i, char *out, size_t n) {
  const an_threshold *t = &an_thresholds[i];
  snprintf(out, n, "%s%.15g to %.15g",
           t->kind == AN_TR_INT     ? "integer "
           : t->kind == AN_TR_ABOVE ? ">"
                                    : "",
           t->lo, t->hi);
}

static int say(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int an_threshold_parse(const char *assign, char *err, size_t n) {
  const char *eq = strchr(assign, '=');
  if (!eq) return say(err, n, "--threshold %s: not NAME=VALUE", assign);
  size_t len = (size_t)(eq - assign);
  int i = 0;
  while (i < an_nthresholds &&
         (strlen(an_thresholds[i].name) != len || strncmp(an_thresholds[i].name, assign, len)))
    i++;
  if (i == an_nthresholds) {
    char names[1024];
    size_t k = 0;
    for (int j = 0; j < an_nthresholds && k < sizeof names; j++)
      k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", j ? ", " : "",
                            an_thresholds[j].name);
    return say(err, n, "unknown threshold '%.*s'; the thresholds are: %s", (int)len, assign, names);
  }
  const an_threshold *t = &an_thresholds[i];
  const char *s = eq + 1;
  if (!*s) return say(err, n, "--threshold %s: no value after '='", assign);
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || isnan(v))
    return say(err, n, "--threshold %s: '%s' is not a number", assign, s);
  int in = isfinite(v) && v <= t->hi && (t->kind == AN_TR_ABOVE ? v > t->lo : v >= t->lo);
  if (!in || (t->kind == AN_TR_INT && v != floor(v))) {
    if (t->kind == AN_TR_ABOVE)
      return say(err, n, "--threshold %s: must be a number above %.15g and at most %.15g", assign,
                 t->lo, t->hi);
    return say(err, n, "--threshold %s: must be %s from %.15g to %.15g", assign,
               t->kind == AN_TR_INT ? "an integer" : "a number", t->lo, t->hi);
  }
  an_thresholds[i].value = v;
  return 0;
}

int an_threshold_set(const char *assign) {
  return an_threshold_parse(assign, NULL, 0);
}

static int cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

static int device_ids(const an_trace *t, int **out) {
  int *ids = malloc((t->nops + 1) * sizeof *ids), n = 0;
  for (size_t i = 0; i < t->nops; i++) {
    int d = t->ops[i].dev, seen = 0;
    for (int k = n - 1; k >= 0 && k >= n - 4; k--)
      seen |= ids[k] == d; /* cheap dedupe first */
    if (!seen) ids[n++] = d;
  }
  qsort(ids, (size_t)n, sizeof *ids, cmp_int);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (!m || ids[m - 1] != ids[i]) ids[m++] = ids[i];
  *out = ids;
  return m;
}

/* Whether every step is listed (and drawn): what the writers and the timeline pass read. */
static int list_steps(const an_report *r, const an_options *opt) {
  return opt->all_steps || r->nsteps <= (size_t)an_threshold_value(AN_T_STEPS_SHOWN);
}

/* The steady state: from the first step's GPU window to the last one's end.  The headline
 * figures are computed over it (start-up — allocation, compilation, warm-up — and teardown are
 * no part of the loop a user asks about); what lies before and after is reported apart. */
static void steady_state(an_report *r, int64_t *w0, int64_t *w1) {
  int64_t a = INT64_MAX, b = INT64_MIN, s, e;
  for (size_t k = 0; k < r->nsteps; k++)
    if (an_step_window(&r->steps[k], &s, &e)) {
      if (s < a) a = s;
      if (e > b) b = e;
    }
  if (a >= b || !r->t->nops) return;
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (size_t i = 0; i < r->t->nops; i++) {
    if (r->t->ops[i].s < t0) t0 = r->t->ops[i].s;
    if (r->t->ops[i].e > t1) t1 = r->t->ops[i].e;
  }
  r->steady = 1;
  r->steady0 = *w0 = a, r->steady1 = *w1 = b;
  r->startup = a > t0 ? a - t0 : 0;
  r->teardown = t1 > b ? t1 - b : 0;
  int64_t *k = malloc((r->nsteps + 1) * sizeof *k);
  for (size_t j = 0; j < r->nsteps; j++) {
    k[j] = 0;
    for (int i = 0; i < r->steps[j].ndevs; i++)
      k[j] += (int64_t)r->steps[j].devs[i].kernels;
  }
  r->step_kernels = an_median(k, r->nsteps);
  free(k);
}

an_report *an_analyze(const an_trace *t, int only_step, const an_options *opt) {
  static const an_options defaults;
  if (!opt) opt = &defaults;
  an_report *r = calloc(1, sizeof *r);
  r->t = t;
  r->only_step = only_step;
  int *ids;
  r->ndevs = device_ids(t, &ids);
  r->devs = calloc((size_t)r->ndevs + 1, sizeof *r->devs);
  for (int i = 0; i < r->ndevs; i++)
    r->devs[i].dev = ids[i];
  free(ids);
  an_pass_pinwheel(r);
  an_pass_infer(r);
  an_pass_steps(r);
  int64_t w0 = INT64_MIN, w1 = INT64_MAX;
  if (only_step >= 0 && an_steps_zoom(r, only_step, &w0, &w1)) {
    an_report_free(r);
    return NULL;
  }
  if (only_step < 0 && !opt->whole_trace) steady_state(r, &w0, &w1);
  an_pass_figures(r, w0, w1);
  an_pass_whatif(r);
  an_pass_findings(r);
  r->list_steps = list_steps(r, opt);
  if (opt->timelines) an_pass_timeline(r);
  return r;
}

void an_report_free(an_report *r) {
  if (!r) return;
  for (size_t k = 0; k < r->nsteps; k++)
    free(r->steps[k].devs);
  free(r->steps);
  free(r->stepsum);
  for (int i = 0; r->kernel_union && i < r->ndevs; i++)
    free(r->kernel_union[i]);
  free(r->kernel_union);
  free(r->nkernel_union);
  free(r->op_step);
  free(r->idle);
  free(r->classes);
  free(r->kstats);
  free(r->whatif);
  free(r->isteps);
  free(r->staged_role);
  free(r->staged_group);
  free(r->staged_call);
  free(r->pw);
  free(r->devs);
  free(r->gaps);
  free(r->exposed);
  free(r->longest);
  for (size_t i = 0; i < r->ntimelines; i++) {
    for (size_t l = 0; l < r->timelines[i].nlanes; l++)
      free(r->timelines[i].lanes[l].runs);
    free(r->timelines[i].lanes);
  }
  free(r->timelines);
  free(r);
}
