/* an_out_json.c — the JSON report (schema pinwheel-report/3) and the JSON diff
 * (pinwheel-diff/2).
 *
 * Owns: the schemas' keys and units: times in µs with ns decimals; fractions as numbers, null when
 * undefined.
 * Must never: compute a figure (it formats what the passes left in the report or the diff), or
 * let a string from a trace through without an_json_string.
 */
#define _GNU_SOURCE
#include "an_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void json_xfer(FILE *f, const an_xfer *x) {
  fprintf(f, "{\"copies\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"time_us\":%.3f,\"overlap_fraction\":",
          x->copies, x->bytes, x->time / 1e3);
  if (x->has && x->time > 0)
    fprintf(f, "%.6f", (double)x->hidden / (double)x->time);
  else
    fprintf(f, "null");
  fprintf(f, ",\"exposed_us\":%.3f}", x->exposed / 1e3);
}

static void json_host(FILE *f, int64_t ns, uint64_t copies, uint64_t unknown) {
  if (copies && unknown == copies)
    fprintf(f, "null");
  else
    fprintf(f, "%.3f", ns / 1e3);
}

static void json_dev(FILE *f, const an_report *r, int i) {
  const an_dev *d = &r->devs[i];
  fprintf(f,
          "{\"device\":%d,\"span_us\":%.3f,\"busy_fraction\":%.6f,\"kernel_fraction\":%.6f,"
          "\"idle_us\":%.3f,\"kernels\":%" PRIu64 ",\"h2d\":",
          d->dev, d->span / 1e3, d->span ? (double)d->busy / (double)d->span : 0.0,
          d->span ? (double)d->kernel / (double)d->span : 0.0, d->idle / 1e3, d->kernels);
  json_xfer(f, &d->h2d);
  fprintf(f, ",\"d2h\":");
  json_xfer(f, &d->d2h);
  fprintf(f,
          ",\"pageable\":{\"copies\":%" PRIu64 ",\"bytes\":%" PRIu64
          ",\"time_us\":%.3f,\"no_runtime_call\":%" PRIu64 ",\"host_blocked_us\":",
          d->pg_copies, d->pg_bytes, d->pg_time / 1e3, d->pg_unknown);
  json_host(f, d->pg_host, d->pg_copies, d->pg_unknown);
  const an_idle *x = &r->idle[i];
  fprintf(f, "},\"idle_split_us\":{\"host_bound\":%.3f,\"waiting_on_copies\":%.3f,\"other\":%.3f}",
          x->host / 1e3, x->copy / 1e3, x->other / 1e3);
  fprintf(f, ",\"other_operations\":{");
  for (int c = 0; c < AN_OC_N; c++)
    fprintf(f, "%s\"%s\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"time_us\":%.3f}",
            c ? "," : "", an_oc_key[c], r->classes[i][c].count, r->classes[i][c].bytes,
            r->classes[i][c].time / 1e3);
  fprintf(f, "},\"utilization\":[");
  for (int k = 0; k < d->nbuckets; k++)
    fprintf(f, "%s%.4f", k ? "," : "", d->util[k]);
  fprintf(f, "]}");
}

static void json_stepdev(FILE *f, const an_stepdev *d) {
  fprintf(f,
          "{\"device\":%d,\"gpu_step_us\":%.3f,\"first_op_us\":%.3f,\"last_op_end_us\":%.3f,"
          "\"h2d\":",
          d->dev, d->gpu / 1e3, d->first / 1e3, d->last / 1e3);
  json_xfer(f, &d->h2d);
  fprintf(f, ",\"d2h\":");
  json_xfer(f, &d->d2h);
  fprintf(f,
          ",\"pageable\":{\"copies\":%" PRIu64 ",\"no_runtime_call\":%" PRIu64
          ",\"host_blocked_us\":",
          d->pg_copies, d->pg_unknown);
  json_host(f, d->pg_host, d->pg_copies, d->pg_unknown);
  fprintf(f, "},\"kernels\":%" PRIu64 ",\"kernel_us\":%.3f,\"busy_us\":%.3f}", d->kernels,
          d->kernel_time / 1e3, d->busy / 1e3);
}

static void json_copies(FILE *f, const an_report *r) {
  for (size_t k = 0; k < r->nlongest; k++) {
    const an_exposed *x = &r->longest[k];
    fprintf(f,
            "%s{\"device\":%d,\"stream\":%d,\"kind\":\"%s\",\"src\":\"%s\",\"dst\":\"%s\","
            "\"bytes\":%" PRIu64 ",\"start_us\":%.3f,\"dur_us\":%.3f,\"hidden_fraction\":%.4f,"
            "\"staged_by_pinwheel\":%s,\"host_us\":",
            k ? "," : "", x->dev, x->stream, an_ck_name[x->ckind], an_mk_name[x->srck],
            an_mk_name[x->dstk], x->bytes, x->s / 1e3, x->dur / 1e3, x->hidden,
            x->staged ? "true" : "false");
    if (x->host >= 0)
      fprintf(f, "%.3f}", x->host / 1e3);
    else
      fprintf(f, "null}");
  }
}

static void json_whatif(FILE *f, const an_report *r) {
  /* the top-level figures: the slowest device, as the step waits for it */
  int top = r->whatif_top;
  fprintf(f, "{\"per\":\"%s\",\"baseline_step_us\":", r->nsteps ? "step" : "trace");
  if (top >= 0)
    fprintf(f, "%.3f,\"predicted_step_us\":%.3f,\"predicted_keep_step_us\":%.3f",
            r->whatif[top].baseline / 1e3, r->whatif[top].predicted / 1e3,
            r->whatif[top].predicted_keep / 1e3);
  else
    fprintf(f, "null,\"predicted_step_us\":null,\"predicted_keep_step_us\":null");
  fprintf(f,
          ",\"assumptions\":{\"eligible_min_kib\":%g,\"h2d_gbps\":%g,\"h2d_elide_gbps\":%g,"
          "\"d2h_gbps\":%g,\"link_gbps\":%g,\"d2d_gbps\":%g},\"devices\":[",
          an_threshold_value(AN_T_ELIGIBLE_MIN_KIB), an_threshold_value(AN_T_H2D_GBPS),
          an_threshold_value(AN_T_H2D_ELIDE_GBPS), an_threshold_value(AN_T_D2H_GBPS),
          an_threshold_value(AN_T_LINK_GBPS), an_threshold_value(AN_T_D2D_GBPS));
  int first = 1;
  for (int i = 0; i < r->ndevs; i++) {
    const an_whatif *w = &r->whatif[i];
    if (!w->steps) continue;
    fprintf(f,
            "%s{\"device\":%d,\"steps\":%d,\"baseline_step_us\":%.3f,\"predicted_step_us\":%.3f,"
            "\"predicted_keep_step_us\":%.3f,\"host_us\":%.3f,\"gpu_busy_us\":%.3f,"
            "\"copies_host_us\":%.3f,\"h2d_copies_per_step\":%.3f,\"h2d_bytes_per_step\":%.0f,"
            "\"d2h_copies_per_step\":%.3f,\"d2h_bytes_per_step\":%.0f,\"bound\":\"%s\","
            "\"syncs_elided\":%s}",
            first ? "" : ",", w->dev, w->steps, w->baseline / 1e3, w->predicted / 1e3,
            w->predicted_keep / 1e3, w->host / 1e3, w->gpu / 1e3, w->copy_host / 1e3,
            (double)w->copies / w->steps, (double)w->bytes / w->steps,
            (double)w->d2h_copies / w->steps, (double)w->d2h_bytes / w->steps,
            w->bound ? "gpu" : "host", w->elides ? "true" : "false");
    first = 0;
  }
  fprintf(f, "]}");
}

/* Where the steps came from, and the window the figures cover. */
static void json_window(FILE *f, const an_report *r) {
  static const char *src[] = {"none", "marked", "inferred"};
  fprintf(f, ",\"steps_source\":\"%s\",\"step_period_us\":", src[r->step_src]);
  if (r->step_src == AN_STEPS_INFERRED)
    fprintf(f, "%.3f", r->iperiod / 1e3);
  else
    fprintf(f, "null");
  fprintf(f, ",\"window\":");
  if (r->steady)
    fprintf(f,
            "{\"over\":\"steps\",\"start_us\":%.3f,\"end_us\":%.3f,\"startup_us\":%.3f,"
            "\"teardown_us\":%.3f}",
            r->steady0 / 1e3, r->steady1 / 1e3, r->startup / 1e3, r->teardown / 1e3);
  else
    fprintf(f, "{\"over\":\"%s\"}", r->only_step >= 0 ? "step" : "trace");
}

static void json_host_syncs(FILE *f, const an_report *r) {
  fprintf(f,
          ",\"host\":{\"sync_calls\":%" PRIu64
          ",\"sync_us\":%.3f,\"sync_longest_us\":%.3f,\"by_api\":{",
          r->sync_calls, r->sync_time / 1e3, r->sync_longest / 1e3);
  for (int a = AN_API_MEMCPY; a < AN_API_N; a++)
    fprintf(f, "%s\"%s\":{\"calls\":%" PRIu64 ",\"us\":%.3f}", a == AN_API_MEMCPY ? "" : ",",
            an_api_name[a], r->api_calls[a], r->api_time[a] / 1e3);
  fprintf(f, "}}");
}

static void json_steps(FILE *f, const an_report *r) {
  fprintf(f, ",\"step_summary\":[");
  int first = 1;
  for (int i = 0; i < r->ndevs; i++) {
    const an_stepsum *s = &r->stepsum[i];
    if (!s->n) continue;
    fprintf(f,
            "%s{\"device\":%d,\"steps\":%d,\"gpu_step_us\":{\"median\":%.3f,\"p95\":%.3f},"
            "\"h2d_us_median\":%.3f,\"h2d_exposed_us_median\":%.3f,\"pageable_host_us_median\":"
            "%.3f,\"h2d_overlap_fraction_median\":",
            first ? "" : ",", s->dev, s->n, s->step_med / 1e3, s->step_p95 / 1e3, s->h2d_med / 1e3,
            s->exposed_med / 1e3, s->pg_host_med / 1e3);
    if (s->hidden_med >= 0)
      fprintf(f, "%.6f}", s->hidden_med);
    else
      fprintf(f, "null}");
    first = 0;
  }
  fprintf(f, "],\"steps\":[");
  for (size_t k = 0; k < r->nsteps; k++) {
    fprintf(f, "%s{\"step\":%d,\"cpu_start_us\":%.3f,\"cpu_dur_us\":%.3f,\"devices\":[",
            k ? "," : "", r->steps[k].num, r->steps[k].cpu_s / 1e3,
            (r->steps[k].cpu_e - r->steps[k].cpu_s) / 1e3);
    int fd = 1;
    for (int i = 0; i < r->steps[k].ndevs; i++) {
      if (!r->steps[k].devs[i].has) continue;
      if (!fd) fputc(',', f);
      json_stepdev(f, &r->steps[k].devs[i]);
      fd = 0;
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]");
}

/* The kernel table, the GPU's idle gaps and the exposed copies. */
static void json_lists(FILE *f, const an_report *r) {
  fprintf(f, ",\"kernels\":[");
  for (size_t k = 0; k < r->nkstats; k++) {
    const an_kstat *s = &r->kstats[k];
    fprintf(f, "%s{\"device\":%d,\"name\":", k ? "," : "", s->dev);
    an_json_string(f, an_name(r->t, s->name));
    fprintf(f, ",\"class\":\"%s\",\"count\":%" PRIu64 ",\"total_us\":%.3f,\"mean_us\":%.3f}",
            s->type == AN_COMM ? "communication" : "compute", s->count, s->total / 1e3,
            (double)s->total / (double)(s->count ? s->count : 1) / 1e3);
  }
  fprintf(f, "],\"gaps\":[");
  for (size_t k = 0; k < r->ngaps && k < 100; k++)
    fprintf(f, "%s{\"device\":%d,\"start_us\":%.3f,\"dur_us\":%.3f}", k ? "," : "", r->gaps[k].dev,
            r->gaps[k].s / 1e3, (r->gaps[k].e - r->gaps[k].s) / 1e3);
  fprintf(f, "],\"exposed_copies\":[");
  for (size_t k = 0; k < r->nexposed && k < 100; k++) {
    const an_exposed *x = &r->exposed[k];
    fprintf(f,
            "%s{\"device\":%d,\"stream\":%d,\"kind\":\"%s\",\"src\":\"%s\",\"dst\":\"%s\","
            "\"bytes\":%" PRIu64 ",\"start_us\":%.3f,\"dur_us\":%.3f,\"hidden_fraction\":%.4f,"
            "\"staged_by_pinwheel\":%s}",
            k ? "," : "", x->dev, x->stream, an_ck_name[x->ckind], an_mk_name[x->srck],
            an_mk_name[x->dstk], x->bytes, x->s / 1e3, x->dur / 1e3, x->hidden,
            x->staged ? "true" : "false");
  }
  fprintf(f, "]");
}

/* The copies pinwheel staged in this run, when it ran under pinwheel (an_pinwheel.c). */
static void json_pinwheel(FILE *f, const an_report *r) {
  int64_t dt = r->pw_h2d_dma, dh = r->pw_h2d_hidden;
  fprintf(f,
          ",\"pinwheel\":{\"staged_h2d\":%" PRIu64 ",\"staged_h2d_bytes\":%" PRIu64
          ",\"staged_d2h\":%" PRIu64 ",\"staged_d2h_bytes\":%" PRIu64
          ",\"h2d_dma_hidden_fraction\":",
          r->pw_h2d, r->pw_h2d_bytes, r->pw_d2h, r->pw_d2h_bytes);
  if (dt > 0)
    fprintf(f, "%.6f,\"h2d_dma_hideable_fraction\":%.6f", (double)dh / (double)dt,
            (double)r->pw_h2d_hideable / (double)dt);
  else
    fprintf(f, "null,\"h2d_dma_hideable_fraction\":null");
  fprintf(f, ",\"own_syncs\":%" PRIu64 ",\"own_sync_ms\":%.6f", r->pw_sync_calls,
          an_ms(r->pw_sync_time));
  fprintf(f, ",\"found_by\":%s}",
          !r->npw                  ? "null"
          : r->pw_marked == r->npw ? "\"collector marks\""
                                   : "\"pattern\"");
}

static void json_findings(FILE *f, const an_report *r) {
  fprintf(f, ",\"thresholds\":{");
  for (int i = 0; i < an_nthresholds; i++)
    fprintf(f, "%s\"%s\":%g", i ? "," : "", an_thresholds[i].name, an_thresholds[i].value);
  fprintf(f, "},\"findings\":[");
  for (int k = 0; k < r->nfindings; k++) {
    fprintf(f, "%s{\"rule\":\"%s\",\"severity\":\"%s\",\"message\":", k ? "," : "",
            r->findings[k].check, r->findings[k].severity);
    an_json_string(f, r->findings[k].message);
    fputc('}', f);
  }
  fprintf(f, "]");
}

/* The answer the text and HTML lead with (an_report.answer). */
static void json_answer(FILE *f, const an_report *r) {
  const an_answer *a = &r->answer;
  fprintf(f,
          ",\"answer\":{\"h2d_us\":%.3f,\"h2d_hidden_us\":%.3f,\"h2d_exposed_us\":%.3f,"
          "\"d2h_us\":%.3f,\"d2h_exposed_us\":%.3f,\"rule\":",
          a->h2d / 1e3, a->hidden / 1e3, a->exposed / 1e3, a->d2h / 1e3, a->d2h_exposed / 1e3);
  if (a->top < 0) {
    fprintf(f, "null,\"todo\":null,\"effect\":null}");
    return;
  }
  fprintf(f, "\"%s\",\"todo\":", r->findings[a->top].check);
  an_json_string(f, a->todo);
  if (a->effect == AN_DO_WHATIF)
    fprintf(f,
            ",\"effect\":{\"kind\":\"what_if\",\"device\":%d,\"now_us\":%.3f,"
            "\"predicted_us\":%.3f,\"speedup\":%.4f}}",
            a->dev, a->now / 1e3, a->predicted / 1e3, a->speedup);
  else if (a->effect == AN_DO_HIDEABLE)
    fprintf(f,
            ",\"effect\":{\"kind\":\"more_hidden\",\"more_hidden_us\":%.3f,"
            "\"staged_exposed_us\":%.3f,\"elsewhere_us\":%.3f}}",
            a->more_hidden / 1e3, a->staged_exposed / 1e3, a->elsewhere / 1e3);
  else
    fprintf(f, ",\"effect\":null}");
}

static void json_report(FILE *f, const an_report *r) {
  fprintf(f, "{\"schema\":\"pinwheel-report/3\",\"trace\":");
  an_json_string(f, r->t->path);
  fprintf(f, ",\"format\":\"%s\",\"trace_source\":", r->t->format);
  an_json_string(f, r->t->source ? r->t->source : r->t->format);
  fprintf(f, ",\"step_filter\":");
  if (r->only_step >= 0)
    fprintf(f, "%d", r->only_step);
  else
    fprintf(f, "null");
  json_window(f, r);
  json_answer(f, r);
  fprintf(f, ",\"devices\":[");
  for (int i = 0; i < r->ndevs; i++) {
    if (i) fputc(',', f);
    json_dev(f, r, i);
  }
  fprintf(f, "]");
  json_host_syncs(f, r);
  json_steps(f, r);
  json_lists(f, r);
  /* per copy: how much of it ran under compute, the longest 100 copies */
  fprintf(f, ",\"copies\":[");
  json_copies(f, r);
  fprintf(f, "],\"what_if\":");
  json_whatif(f, r);
  json_pinwheel(f, r);
  json_findings(f, r);
  fprintf(f, "}");
}

void an_write_json(an_out *o, an_report **r, int n) {
  if (n == 1) {
    json_report(o->f, r[0]);
  } else {
    fprintf(o->f, "{\"schema\":\"pinwheel-report-ranks/2\",\"ranks\":[");
    for (int i = 0; i < n; i++) {
      if (i) fputc(',', o->f);
      json_report(o->f, r[i]);
    }
    fprintf(o->f, "]}");
  }
  fputc('\n', o->f);
}

void an_write_diff_json(an_out *o, const an_diff *d) {
  FILE *f = o->f;
  const an_report *a = d->a, *b = d->b;
  fprintf(f, "{\"schema\":\"pinwheel-diff/2\",\"before\":");
  an_json_string(f, a->t->path);
  fprintf(f, ",\"after\":");
  an_json_string(f, b->t->path);
  fprintf(f, ",\"devices\":[");
  for (int k = 0; k < d->ndevs; k++) {
    const an_diff_dev *dd = &d->devs[k];
    fprintf(f, "%s{\"device\":%d,\"device_after\":%d,\"rows\":{", k ? "," : "", a->devs[dd->i].dev,
            b->devs[dd->j].dev);
    for (int m = 0; m < dd->nrows; m++) {
      const an_diff_row *row = &dd->rows[m];
      fprintf(f, "%s\"%s\":{", m ? "," : "", row->key);
      if (row->count)
        fprintf(f, "\"before\":%.0f,\"after\":%.0f,\"delta\":%.0f", row->va, row->vb,
                row->vb - row->va);
      else
        fprintf(f, "\"before\":%.6f,\"after\":%.6f,\"delta\":%.6f", row->va, row->vb,
                row->vb - row->va);
      if (row->va != 0)
        fprintf(f, ",\"change_fraction\":%.6f}", (row->vb - row->va) / row->va);
      else
        fprintf(f, ",\"change_fraction\":null}");
    }
    fprintf(f, "}}");
  }
  static const char *src[] = {"none", "marked", "inferred"};
  fprintf(f, "],\"steps\":{\"before\":%zu,\"after\":%zu,\"source\":[\"%s\",\"%s\"]}", a->nsteps,
          b->nsteps, src[a->step_src], src[b->step_src]);
  fprintf(f, ",\"host\":{\"sync_calls\":[%" PRIu64 ",%" PRIu64 "],\"sync_us\":[%.3f,%.3f]}}\n",
          a->sync_calls, b->sync_calls, a->sync_time / 1e3, b->sync_time / 1e3);
}
