/* an_timeline.c — the timeline pass: what the HTML and SVG forms draw.
 *
 * Owns: the windows drawn (the report's own, and each listed step's from the previous step's
 * end to its own), and for each (device, stream) lane of a window its AN_TL_COLS columns: the
 * time each class covers in each column (an H2D copy split into its part under the device's
 * kernels, hidden, and the rest, exposed), the class that covers most of each column, and the
 * runs of one class with the longest operation in each.  So the picture's size follows its
 * width and the number of lanes, never the number of operations.
 * Must never: call another pass (an_analyze runs it last, when an_options.timelines asks for it),
 * or print; it reads the kernel intervals the steps pass kept and the steps it numbered.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

static int tl_class(const an_op *op) {
  return op->type == AN_KERNEL    ? AN_TL_KERNEL
         : op->type == AN_COMM    ? AN_TL_COMM
         : op->type == AN_MEMSET  ? AN_TL_MEMSET
         : op->ckind == AN_CK_H2D ? AN_TL_H2D_EXPOSED
         : op->ckind == AN_CK_D2H ? AN_TL_D2H
                                  : AN_TL_COPY;
}

/* The time each class covers in each column of one lane, and the longest op of each column. */
static void lane_cover(const an_report *r, const an_timeline *tl, const an_lane *lane, size_t lo,
                       size_t hi, const an_iv *k, size_t nk, double *cov, long *top) {
  const an_trace *t = r->t;
  int64_t w0 = tl->w0, w1 = tl->w1;
  double colw = (double)(w1 - w0) / AN_TL_COLS;
  memset(cov, 0, (size_t)AN_TL_COLS * AN_TL_N * sizeof *cov);
  for (int c = 0; c < AN_TL_COLS; c++)
    top[c] = -1;
  for (size_t i = lo; i < hi; i++) {
    const an_op *op = &t->ops[i];
    if (op->dev != lane->dev || op->stream != lane->stream || op->e <= w0 || op->s >= w1) continue;
    int cls = tl_class(op);
    int64_t s = op->s > w0 ? op->s : w0, e = op->e < w1 ? op->e : w1;
    int c0 = (int)((double)(s - w0) / colw), c1 = (int)((double)(e - w0) / colw);
    if (c1 >= AN_TL_COLS) c1 = AN_TL_COLS - 1;
    for (int c = c0; c <= c1; c++) {
      if (top[c] < 0 || t->ops[top[c]].e - t->ops[top[c]].s < op->e - op->s) top[c] = (long)i;
      int64_t cs = w0 + (int64_t)(c * colw), ce = w0 + (int64_t)((c + 1) * colw);
      int64_t a = s > cs ? s : cs, b = e < ce ? e : ce;
      if (b <= a) {
        if (c == c0) cov[c * AN_TL_N + cls] += 1e-9; /* a very short event still shows */
        continue;
      }
      if (cls == AN_TL_H2D_EXPOSED) {
        int64_t hid = an_cover(k, nk, a, b);
        cov[c * AN_TL_N + AN_TL_H2D_HIDDEN] += (double)hid;
        cov[c * AN_TL_N + AN_TL_H2D_EXPOSED] += (double)(b - a - hid);
      } else {
        cov[c * AN_TL_N + cls] += (double)(b - a);
      }
    }
  }
}

/* Columns of one class joined into runs, each with the longest operation in it. */
static void lane_runs(const an_trace *t, double colw, const double *cov, const long *top,
                      an_tl_lane *lane) {
  lane->runs = malloc((AN_TL_COLS + 1) * sizeof *lane->runs);
  lane->nruns = 0;
  int run_cls = AN_TL_NONE, run_start = 0;
  long run_top = -1;
  for (int c = 0; c <= AN_TL_COLS; c++) {
    int best = AN_TL_NONE;
    if (c < AN_TL_COLS) {
      double bv = 0;
      for (int p = 1; p < AN_TL_N; p++)
        if (cov[c * AN_TL_N + p] > bv) bv = cov[c * AN_TL_N + p], best = p;
    }
    if (best != run_cls) {
      if (run_cls != AN_TL_NONE)
        lane->runs[lane->nruns++] =
            (an_tl_run){run_start, c, run_cls, run_top, (int64_t)((c - run_start) * colw)};
      run_cls = best;
      run_start = c;
      run_top = -1;
    }
    if (c < AN_TL_COLS && top[c] >= 0 &&
        (run_top < 0 ||
         t->ops[top[c]].e - t->ops[top[c]].s > t->ops[run_top].e - t->ops[run_top].s))
      run_top = top[c];
  }
}

/* One window: INT64_MIN for the span of the whole trace's operations. */
static void timeline(const an_report *r, int64_t w0, int64_t w1, int step, an_timeline *tl) {
  const an_trace *t = r->t;
  if (w0 == INT64_MIN) {
    w0 = INT64_MAX, w1 = INT64_MIN;
    for (size_t i = 0; i < t->nops; i++) {
      if (t->ops[i].s < w0) w0 = t->ops[i].s;
      if (t->ops[i].e > w1) w1 = t->ops[i].e;
    }
  }
  if (w1 <= w0) w0 = 0, w1 = 1; /* nothing to draw */
  tl->w0 = w0, tl->w1 = w1, tl->step = step;
  size_t nl;
  an_lane *lanes = an_lanes(t, &nl);
  if (nl > AN_TL_LANES) nl = AN_TL_LANES;
  tl->lanes = calloc(nl + 1, sizeof *tl->lanes);
  tl->nlanes = nl;
  double *cov = malloc((size_t)AN_TL_COLS * AN_TL_N * sizeof *cov);
  long *top = malloc((size_t)AN_TL_COLS * sizeof *top);
  size_t lo, hi, nk = 0;
  an_op_range(t, w0, w1, &lo, &hi);
  const an_iv *k = NULL;
  for (size_t l = 0; l < nl; l++) {
    tl->lanes[l].dev = lanes[l].dev, tl->lanes[l].stream = lanes[l].stream;
    if (l == 0 || lanes[l].dev != lanes[l - 1].dev) /* lanes are sorted by device */
      k = an_dev_kernels(r, lanes[l].dev, &nk);
    lane_cover(r, tl, &lanes[l], lo, hi, k, nk, cov, top);
    lane_runs(t, (double)(w1 - w0) / AN_TL_COLS, cov, top, &tl->lanes[l]);
  }
  free(cov);
  free(top);
  free(lanes);
}

void an_pass_timeline(an_report *r) {
  r->timelines = calloc(r->nsteps + 2, sizeof *r->timelines);
  int64_t w0 = INT64_MIN, w1 = INT64_MAX;
  if (r->only_step >= 0 && r->ndevs) w0 = r->devs[0].t0, w1 = r->devs[0].t1;
  timeline(r, w0, w1, -1, &r->timelines[r->ntimelines++]);
  if (r->only_step >= 0 || !r->nsteps || !r->list_steps) return;
  for (size_t k = 0; k < r->nsteps; k++) {
    int64_t a, e;
    if (!an_step_window(&r->steps[k], &a, &e) || a >= e) continue;
    timeline(r, a, e, (int)k, &r->timelines[r->ntimelines++]);
  }
}
