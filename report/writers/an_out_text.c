/* an_out_text.c — the text report, the rank table of several traces, and `pinwheel diff`.
 *
 * Owns: the text forms' layout, one function per section, in colour on a terminal.
 * Must never: compute a figure (it formats what the passes left in the report or the diff).
 */
#define _GNU_SOURCE
#include "an_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void xfer_row(FILE *f, const char *name, const an_xfer *x) {
  char b[32];
  if (!x->has) {
    fprintf(f, "  %-4s %8s %12s %12s %9s %12s\n", name, "0", "-", "-", "-", "-");
    return;
  }
  fprintf(f, "  %-4s %8" PRIu64 " %12s %9.3f ms %7.1f %% %9.3f ms\n", name, x->copies,
          an_bytes_h(x->bytes, b), an_ms(x->time), an_pct(x->hidden, x->time), an_ms(x->exposed));
}

static void dev_block(an_out *o, const an_report *r, int i) {
  FILE *f = o->f;
  const an_dev *d = &r->devs[i];
  char b[32], h[32];
  fprintf(f,
          "%sdevice %d%s: span %.3f ms, busy %.1f %%, kernels %.1f %%, idle %.3f ms, %" PRIu64
          " kernels\n",
          o->color ? "\033[1m" : "", d->dev, o->color ? "\033[0m" : "", an_ms(d->span),
          an_pct(d->busy, d->span), an_pct(d->kernel, d->span), an_ms(d->idle), d->kernels);
  fprintf(f, "  %-4s %8s %12s %12s %9s %12s\n", "", "copies", "bytes", "time", "hidden", "exposed");
  xfer_row(f, "H2D", &d->h2d);
  xfer_row(f, "D2H", &d->d2h);
  for (int c = 0; c < AN_OC_N; c++) {
    const an_opclass *x = &r->classes[i][c];
    if (!x->count) continue;
    fprintf(f, "  %-14s %8" PRIu64 " %12s %9.3f ms%s\n", an_oc_name[c], x->count,
            c == AN_OC_COMM ? "" : an_bytes_h(x->bytes, b), an_ms(x->time),
            c == AN_OC_COMM ? "  (not counted as compute that hides copies)" : "");
  }
  fprintf(f, "  pageable: %" PRIu64 " copies, %s, %.3f ms on the GPU, host blocked %s ms\n",
          d->pg_copies, an_bytes_h(d->pg_bytes, b), an_ms(d->pg_time),
          an_host_ms(d->pg_host, d->pg_copies, d->pg_unknown, h));
  const an_idle *x = &r->idle[i];
  fprintf(f,
          "  idle %.3f ms: host-bound %.3f ms (nothing queued), waiting on copies %.3f ms, "
          "other %.3f ms (work queued)\n",
          an_ms(d->idle), an_ms(x->host), an_ms(x->copy), an_ms(x->other));
  static const char *bars[] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                               "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
  fprintf(f, "  utilization over time: ");
  for (int k = 0; k < d->nbuckets; k++) {
    int v = (int)(d->util[k] * 7.999);
    fputs(bars[v < 0 ? 0 : v > 7 ? 7 : v], f);
  }
  fprintf(f, "\n");
}

static void steps_text(FILE *f, const an_report *r) {
  if (!r->nsteps) return;
  if (r->step_src == AN_STEPS_INFERRED)
    fprintf(f,
            "\nsteps (inferred: an operation that recurs once per iteration, every %.3f ms; GPU "
            "work joined to its step by the runtime call's start)\n",
            an_ms(r->iperiod));
  else
    fprintf(f, "\nsteps (%s; GPU work joined to its step by the runtime call's start)\n",
            r->t->step_regex ? r->t->step_regex : "ProfilerStep#N");
  fprintf(f, "  %-4s %6s %12s %10s %10s %8s %10s %10s\n", "dev", "steps", "gpu_step ms", "p95",
          "H2D ms", "hidden", "exposed", "pg host");
  for (int i = 0; i < r->ndevs; i++) {
    const an_stepsum *s = &r->stepsum[i];
    if (!s->n) continue;
    char hid[16];
    if (s->hidden_med >= 0)
      snprintf(hid, sizeof hid, "%.1f%%", s->hidden_med * 100);
    else
      snprintf(hid, sizeof hid, "-");
    fprintf(f, "  %-4d %6d %12.3f %10.3f %10.3f %8s %10.3f %10.3f   (medians over steps)\n", s->dev,
            s->n, an_ms(s->step_med), an_ms(s->step_p95), an_ms(s->h2d_med), hid,
            an_ms(s->exposed_med), an_ms(s->pg_host_med));
  }
  if (!r->list_steps) {
    fprintf(f, "  (%zu steps; --steps all lists each)\n", r->nsteps);
    return;
  }
  fprintf(f, "  %-6s %-4s %12s %10s %8s %10s %10s %8s\n", "step", "dev", "gpu_step ms", "H2D ms",
          "hidden", "exposed", "pg host", "kernels");
  for (size_t k = 0; k < r->nsteps; k++)
    for (int i = 0; i < r->steps[k].ndevs; i++) {
      const an_stepdev *d = &r->steps[k].devs[i];
      if (!d->has) continue;
      char hid[16], h[32];
      if (d->h2d.time > 0)
        snprintf(hid, sizeof hid, "%.1f%%", an_pct(d->h2d.hidden, d->h2d.time));
      else
        snprintf(hid, sizeof hid, "-");
      fprintf(f, "  %-6d %-4d %12.3f %10.3f %8s %10.3f %10s %8" PRIu64 "\n", r->steps[k].num,
              d->dev, an_ms(d->gpu), an_ms(d->h2d.time), hid, an_ms(d->h2d.exposed),
              an_host_ms(d->pg_host, d->pg_copies, d->pg_unknown, h), d->kernels);
    }
}

void an_whatif_assumptions(FILE *f, const char *indent) {
  fprintf(f,
          "%sassumptions: pageable copies of at least %.0f KiB are staged; a staged H2D copy "
          "blocks the host for its bytes at %.1f GB/s (%.1f GB/s with elision, where the sync "
          "right after it is gone too) and its DMA leaves the step's stream for a device copy at "
          "%.0f GB/s; a staged D2H copy waits for the GPU as before, then blocks the host for its "
          "bytes at %.1f GB/s, its DMA at %.0f GB/s; the GPU starvation after a blocking copy "
          "goes with its host time; a step takes the longer of its host and GPU parts "
          "(--threshold NAME=VALUE changes any of these)\n",
          indent, an_threshold_value(AN_T_ELIGIBLE_MIN_KIB), an_threshold_value(AN_T_H2D_GBPS),
          an_threshold_value(AN_T_H2D_ELIDE_GBPS), an_threshold_value(AN_T_D2D_GBPS),
          an_threshold_value(AN_T_D2H_GBPS), an_threshold_value(AN_T_LINK_GBPS));
}

static void whatif_text(FILE *f, const an_report *r) {
  if (!r->whatif_any) return;
  const char *per = r->nsteps ? "step" : "trace (no steps)";
  fprintf(f, "\nwhat-if under pinwheel (medians per %s)\n", per);
  fprintf(f, "  %-4s %12s %12s %8s %12s %10s %10s %12s\n", "dev", "now ms", "pinwheel ms",
          "speedup", "keep ms", "host ms", "GPU ms", "copies' host");
  for (int i = 0; i < r->ndevs; i++) {
    const an_whatif *w = &r->whatif[i];
    if (!w->steps) continue;
    fprintf(f, "  %-4d %12.3f %12.3f %7.2fx %12.3f %10.3f %10.3f %12.3f\n", w->dev,
            an_ms(w->baseline), an_ms(w->predicted), w->speedup, an_ms(w->predicted_keep),
            an_ms(w->host), an_ms(w->gpu), an_ms(w->copy_host));
  }
  an_whatif_assumptions(f, "  ");
}

static void kernels_text(FILE *f, const an_report *r) {
  if (!r->nkstats) return;
  fprintf(f, "\ntop kernels by total time\n  %-4s %8s %12s %10s %7s  %s\n", "dev", "count",
          "total ms", "mean us", "share", "name");
  for (size_t k = 0; k < r->nkstats && k < 10; k++) {
    const an_kstat *s = &r->kstats[k];
    const char *nm = an_name(r->t, s->name);
    fprintf(f, "  %-4d %8" PRIu64 " %12.3f %10.3f %6.1f%%  %.*s%s%s\n", s->dev, s->count,
            an_ms(s->total), (double)s->total / (double)(s->count ? s->count : 1) / 1e3, s->share,
            90, nm, strlen(nm) > 90 ? "..." : "", s->type == AN_COMM ? " [communication]" : "");
  }
}

static void report_text(an_out *o, const an_report *r) {
  FILE *f = o->f;
  const an_trace *t = r->t;
  fprintf(f, "%spinwheel report%s: %s (%s, %zu GPU operation%s)", o->color ? "\033[1m" : "",
          o->color ? "\033[0m" : "", t->path, t->source ? t->source : t->format, t->nops,
          t->nops == 1 ? "" : "s");
  if (r->only_step >= 0) fprintf(f, ", step %d only", r->only_step);
  fprintf(f, "\n");
  an_answer_lines(f, r);
  fprintf(f, "\n");
  an_steps_line(f, r);
  an_headline(f, r);
  fprintf(f, "\n");
  for (int i = 0; i < r->ndevs; i++)
    dev_block(o, r, i);
  fprintf(f, "\nhost syncs: %" PRIu64 " call%s, %.3f ms, longest %.3f ms", r->sync_calls,
          r->sync_calls == 1 ? "" : "s", an_ms(r->sync_time), an_ms(r->sync_longest));
  for (int a = AN_API_STREAM_SYNC; a <= AN_API_EVENT_SYNC; a++)
    if (r->api_calls[a])
      fprintf(f, "; %s %" PRIu64 " / %.3f ms", an_api_name[a], r->api_calls[a],
              an_ms(r->api_time[a]));
  fprintf(f, "\n");
  steps_text(f, r);
  kernels_text(f, r);
  if (r->nexposed) {
    char b[32];
    fprintf(f, "\nexposed copies (longest %zu of %zu):\n  %-4s %-6s %-26s %12s %10s %8s %10s\n",
            r->nexposed < 10 ? r->nexposed : 10, r->nexposed, "dev", "stream", "kind", "bytes",
            "ms", "hidden", "host ms");
    for (size_t k = 0; k < r->nexposed && k < 10; k++) {
      const an_exposed *x = &r->exposed[k];
      char kind[64], h[32];
      an_copy_kind(kind, sizeof kind, x);
      if (x->host >= 0)
        snprintf(h, sizeof h, "%.3f", an_ms(x->host));
      else
        snprintf(h, sizeof h, "unknown");
      fprintf(f, "  %-4d %-6d %-26s %12s %10.3f %7.1f%% %10s\n", x->dev, x->stream, kind,
              an_bytes_h(x->bytes, b), an_ms(x->dur), x->hidden * 100, h);
    }
  }
  if (r->ngaps == 1)
    fprintf(f, "\nGPU idle gaps >= %.3g ms: 1\n", an_threshold_value(AN_T_GAP_MS));
  else if (r->ngaps)
    fprintf(f, "\nGPU idle gaps >= %.3g ms (longest %zu of %zu):\n",
            an_threshold_value(AN_T_GAP_MS), r->ngaps < 5 ? r->ngaps : 5, r->ngaps);
  if (r->ngaps) {
    for (size_t k = 0; k < r->ngaps && k < 5; k++)
      fprintf(f, "  device %d: %.3f ms at +%.3f ms\n", r->gaps[k].dev,
              an_ms(r->gaps[k].e - r->gaps[k].s),
              an_ms(r->gaps[k].s - (r->ndevs ? r->devs[0].t0 : 0)));
  }
  whatif_text(f, r);
  fprintf(f, "\nfindings:\n");
  if (!r->nfindings) fprintf(f, "  none\n");
  for (int k = 0; k < r->nfindings; k++)
    fprintf(f, "  [%s] %s: %s\n", r->findings[k].severity, r->findings[k].check,
            r->findings[k].message);
}

/* Several traces: the rank table first, a row per file (the step median is the slowest
 * device's; "staged": copies pinwheel staged in that rank's run, 0 when it ran without pinwheel),
 * each rank's answer, then each rank's report. */
static void ranks_text(an_out *o, an_report **r, int n) {
  fprintf(o->f, "%spinwheel report%s: %d ranks (one per file)\n", o->color ? "\033[1m" : "",
          o->color ? "\033[0m" : "", n);
  fprintf(o->f, "  %-5s %10s %8s %12s %10s %12s %12s %8s\n", "rank", "span ms", "busy",
          "H2D exp ms", "sync ms", "pg host ms", "step med ms", "staged");
  double sp[AN_RANK_COLS];
  an_rank_spread(r, n, sp);
  for (int i = 0; i < n; i++) {
    const double *v = r[i]->tot.rank;
    fprintf(o->f, "  %-5d %10.3f %7.1f%% %12.3f %10.3f %12.3f %12.3f %8.0f\n", i, v[0], v[1], v[2],
            v[3], v[4], v[5], v[6]);
  }
  fprintf(o->f, "  %-5s %10.3f %7.1f%% %12.3f %10.3f %12.3f %12.3f %8.0f\n", "spread", sp[0], sp[1],
          sp[2], sp[3], sp[4], sp[5], sp[6]);
  for (int i = 0; i < n; i++) {
    fprintf(o->f, "\nrank %d: %s\n", i, r[i]->t->path);
    an_answer_lines(o->f, r[i]);
  }
  fprintf(o->f, "\neach rank's report follows.\n");
}

void an_write_text(an_out *o, an_report **r, int n) {
  if (n > 1) ranks_text(o, r, n);
  for (int i = 0; i < n; i++) {
    if (i || n > 1) fprintf(o->f, "\n");
    report_text(o, r[i]);
  }
}

/* ---- diff ---- */

/* What each side's figures cover: its steps (marked, inferred, none) and what was left out. */
static void diff_steps(FILE *f, const an_diff *d) {
  static const char *src[] = {"no steps", "marked", "inferred"};
  const an_report *a = d->a, *b = d->b;
  fprintf(f, "  steps:  %zu %s -> %zu %s", a->nsteps, src[a->step_src], b->nsteps,
          src[b->step_src]);
  if (a->steady || b->steady)
    fprintf(f, "; start-up %.3f -> %.3f ms and teardown %.3f -> %.3f ms not counted",
            an_ms(a->startup), an_ms(b->startup), an_ms(a->teardown), an_ms(b->teardown));
  fprintf(f, "\n");
  if (d->by_order)
    for (int i = 0; i < a->ndevs; i++)
      fprintf(f,
              "  the traces ran on different devices: before's device %d is compared with "
              "after's device %d\n",
              a->devs[i].dev, b->devs[i].dev);
}

void an_write_diff(an_out *o, const an_diff *d) {
  FILE *f = o->f;
  const an_report *a = d->a, *b = d->b;
  fprintf(f, "pinwheel diff\n  before: %s\n  after:  %s\n", a->t->path, b->t->path);
  diff_steps(f, d);
  for (int k = 0; k < d->ndevs; k++) {
    const an_diff_dev *dd = &d->devs[k];
    int i = dd->i, j = dd->j;
    char dn[32];
    if (a->devs[i].dev == b->devs[j].dev)
      snprintf(dn, sizeof dn, "device %d", a->devs[i].dev);
    else
      snprintf(dn, sizeof dn, "device %d -> %d", a->devs[i].dev, b->devs[j].dev);
    fprintf(f, "\n%-34s %14s %14s %14s %9s\n", dn, "before", "after", "delta", "change");
    for (int m = 0; m < dd->nrows; m++) {
      const an_diff_row *row = &dd->rows[m];
      double delta = row->vb - row->va;
      if (row->count)
        fprintf(f, "  %-32s %14.0f %14.0f %+14.0f", row->n, row->va, row->vb, delta);
      else
        fprintf(f, "  %-32s %14.3f %14.3f %+14.3f", row->n, row->va, row->vb, delta);
      if (row->va != 0)
        fprintf(f, " %+8.1f%%\n", 100.0 * delta / row->va);
      else
        fprintf(f, " %9s\n", "-");
    }
  }
  fprintf(f, "\nhost sync calls %" PRIu64 " -> %" PRIu64 ", sync ms %.3f -> %.3f\n", a->sync_calls,
          b->sync_calls, an_ms(a->sync_time), an_ms(b->sync_time));
}
