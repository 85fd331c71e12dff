/* an_output.c — the report's forms: text, JSON (schema pinwheel-report/1), SVG timeline, HTML,
 * diff, and the Chrome trace export.
 *
 * Owns: escaping.  Every string that came from a trace goes through an_xml_escape or
 * an_json_string.  The SVG is drawn from per-pixel coverage, never one element per event, so its
 * size follows the picture's width and the number of lanes, not the trace.
 */
#define _GNU_SOURCE
#include "an.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define AN_HOST_PID 1000000

static const char *ck_name[] = {"other", "H2D", "D2H", "D2D", "H2H", "P2P"};
static const char *mk_name[] = {"unknown", "pageable", "pinned", "device", "managed", "array"};
static const char *api_name[] = {"other", "cudaMemcpy*", "cudaStreamSynchronize",
                                 "cudaDeviceSynchronize", "cudaEventSynchronize"};

void an_xml_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    switch (c) {
    case '&':
      fputs("&amp;", f);
      break;
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&#39;", f);
      break;
    default:
      if (c >= 0x20 || c == '\t' || c == '\n') fputc(c, f);
    }
  }
}

void an_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else if (c == '<')
      fputs("\\u003c", f); /* safe to embed in HTML too */
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static double ms(int64_t ns) {
  return (double)ns / 1e6;
}
static double pct(int64_t a, int64_t b) {
  return b > 0 ? 100.0 * (double)a / (double)b : 0;
}

static const char *bytes_h(uint64_t v, char *buf) {
  static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = (double)v;
  int i = 0;
  while (x >= 1024 && i < 4)
    x /= 1024, i++;
  if (i == 0)
    sprintf(buf, "%" PRIu64 " B", v);
  else
    sprintf(buf, "%.1f %s", x, u[i]);
  return buf;
}

static void headline(FILE *f, const an_report *r) {
  int64_t h = 0, hid = 0, pgh = 0;
  uint64_t pg = 0;
  for (int i = 0; i < r->ndevs; i++) {
    an_sat_add(&h, r->devs[i].h2d.time), an_sat_add(&hid, r->devs[i].h2d.hidden);
    pg += r->devs[i].pg_copies, an_sat_add(&pgh, r->devs[i].pg_host);
  }
  fprintf(f,
          "H2D: %.3f ms, %.1f %% hidden under compute; %" PRIu64
          " pageable copies blocked the host %.3f ms\n",
          ms(h), pct(hid, h), pg, ms(pgh));
}

static void xfer_row(FILE *f, const char *name, const an_xfer *x) {
  char b[32];
  if (!x->has) {
    fprintf(f, "  %-4s %8s %12s %12s %9s %12s\n", name, "0", "-", "-", "-", "-");
    return;
  }
  fprintf(f, "  %-4s %8" PRIu64 " %12s %9.3f ms %7.1f %% %9.3f ms\n", name, x->copies,
          bytes_h(x->bytes, b), ms(x->time), pct(x->hidden, x->time), ms(x->exposed));
}

static void dev_block(an_out *o, const an_dev *d) {
  FILE *f = o->f;
  char b[32];
  fprintf(f,
          "%sdevice %d%s: span %.3f ms, busy %.1f %%, kernels %.1f %%, idle %.3f ms, %" PRIu64
          " kernels\n",
          o->color ? "\033[1m" : "", d->dev, o->color ? "\033[0m" : "", ms(d->span),
          pct(d->busy, d->span), pct(d->kernel, d->span), ms(d->idle), d->kernels);
  fprintf(f, "  %-4s %8s %12s %12s %9s %12s\n", "", "copies", "bytes", "time", "overlap",
          "exposed");
  xfer_row(f, "H2D", &d->h2d);
  xfer_row(f, "D2H", &d->d2h);
  fprintf(f, "  pageable: %" PRIu64 " copies, %s, %.3f ms on the GPU, host blocked %.3f ms\n",
          d->pg_copies, bytes_h(d->pg_bytes, b), ms(d->pg_time), ms(d->pg_host));
  static const char *bars[] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                               "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
  fprintf(f, "  utilization over time: ");
  for (int i = 0; i < d->nbuckets; i++) {
    int k = (int)(d->util[i] * 7.999);
    fputs(bars[k < 0 ? 0 : k > 7 ? 7 : k], f);
  }
  fprintf(f, "\n");
}

static void report_text(an_out *o, const an_report *r) {
  FILE *f = o->f;
  const an_trace *t = r->t;
  fprintf(f, "%spinwheel report%s: %s (%s, %zu GPU operations)\n", o->color ? "\033[1m" : "",
          o->color ? "\033[0m" : "", t->path, t->format, t->nops);
  headline(f, r);
  fprintf(f, "\n");
  for (int i = 0; i < r->ndevs; i++)
    dev_block(o, &r->devs[i]);
  fprintf(f, "\nhost syncs: %" PRIu64 " calls, %.3f ms, longest %.3f ms", r->sync_calls,
          ms(r->sync_time), ms(r->sync_longest));
  for (int a = AN_API_STREAM_SYNC; a < AN_API_N; a++)
    if (r->api_calls[a])
      fprintf(f, "; %s %" PRIu64 " / %.3f ms", api_name[a], r->api_calls[a], ms(r->api_time[a]));
  fprintf(f, "\n");
  if (r->nsteps) {
    fprintf(f, "\n%-6s %-4s %10s %7s %10s %8s %10s %10s\n", "step", "dev", "span ms", "busy",
            "H2D ms", "hidden", "exposed", "pg host");
    for (size_t k = 0; k < r->nsteps; k++)
      for (int i = 0; i < r->steps[k].ndevs; i++) {
        const an_dev *d = &r->steps[k].devs[i];
        fprintf(f, "%-6d %-4d %10.3f %6.1f%% %10.3f %7.1f%% %10.3f %10.3f\n", r->steps[k].num,
                d->dev, ms(d->span), pct(d->busy, d->span), ms(d->h2d.time),
                pct(d->h2d.hidden, d->h2d.time), ms(d->h2d.exposed), ms(d->pg_host));
      }
  }
  if (r->nexposed) {
    char b[32];
    fprintf(f, "\nexposed copies (longest %zu of %zu):\n  %-4s %-6s %-24s %12s %10s %8s\n",
            r->nexposed < 10 ? r->nexposed : 10, r->nexposed, "dev", "stream", "kind", "bytes",
            "ms", "hidden");
    for (size_t k = 0; k < r->nexposed && k < 10; k++) {
      const an_exposed *x = &r->exposed[k];
      char kind[64];
      snprintf(kind, sizeof kind, "%s %s->%s", ck_name[x->ckind], mk_name[x->srck],
               mk_name[x->dstk]);
      fprintf(f, "  %-4d %-6d %-24s %12s %10.3f %7.1f%%\n", x->dev, x->stream, kind,
              bytes_h(x->bytes, b), ms(x->dur), x->hidden * 100);
    }
  }
  if (r->ngaps) {
    fprintf(f, "\nGPU idle gaps >= %.3g ms (longest %zu of %zu):\n", an_rule_get("gap_ms"),
            r->ngaps < 5 ? r->ngaps : 5, r->ngaps);
    for (size_t k = 0; k < r->ngaps && k < 5; k++)
      fprintf(f, "  device %d: %.3f ms at +%.3f ms\n", r->gaps[k].dev,
              ms(r->gaps[k].e - r->gaps[k].s), ms(r->gaps[k].s - (r->ndevs ? r->devs[0].t0 : 0)));
  }
  fprintf(f, "\nfindings:\n");
  if (!r->nfindings) fprintf(f, "  none\n");
  for (int k = 0; k < r->nfindings; k++)
    fprintf(f, "  [%s] %s: %s\n", r->findings[k].severity, r->findings[k].rule,
            r->findings[k].message);
  if (r->whatif.copies)
    fprintf(f,
            "  what-if assumptions: every pageable H2D copy of at least %.0f KiB is staged; the "
            "staging memcpy "
            "runs under earlier compute; a blocking copy costs the larger of its exposed GPU time "
            "and its host "
            "time, not both; the device-to-device copy that replaces it runs at %.0f GB/s.\n",
            an_rule_get("eligible_min_kib"), an_rule_get("d2d_gbps"));
}

void an_write_text(an_out *o, an_report **r, int n) {
  for (int i = 0; i < n; i++) {
    if (i) fprintf(o->f, "\n");
    report_text(o, r[i]);
  }
  if (n > 1) {
    fprintf(o->f, "\nranks (one per file):\n  %-5s %10s %8s %12s %10s %12s\n", "rank", "span ms",
            "busy", "H2D exp ms", "sync ms", "pg host ms");
    double lo[5] = {1e300, 1e300, 1e300, 1e300, 1e300}, hi[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < n; i++) {
      int64_t span = 0, busy = 0, exp = 0, pgh = 0;
      for (int d = 0; d < r[i]->ndevs; d++) {
        if (r[i]->devs[d].span > span) span = r[i]->devs[d].span;
        an_sat_add(&busy, r[i]->devs[d].busy), an_sat_add(&exp, r[i]->devs[d].h2d.exposed);
        an_sat_add(&pgh, r[i]->devs[d].pg_host);
      }
      double v[5] = {ms(span), pct(busy, span) / (r[i]->ndevs ? r[i]->ndevs : 1), ms(exp),
                     ms(r[i]->sync_time), ms(pgh)};
      fprintf(o->f, "  %-5d %10.3f %7.1f%% %12.3f %10.3f %12.3f\n", i, v[0], v[1], v[2], v[3],
              v[4]);
      for (int k = 0; k < 5; k++)
        lo[k] = v[k] < lo[k] ? v[k] : lo[k], hi[k] = v[k] > hi[k] ? v[k] : hi[k];
    }
    fprintf(o->f, "  %-5s %10.3f %7.1f%% %12.3f %10.3f %12.3f\n", "spread", hi[0] - lo[0],
            hi[1] - lo[1], hi[2] - lo[2], hi[3] - lo[3], hi[4] - lo[4]);
  }
}

/* ---- JSON ---- */

static void json_xfer(FILE *f, const an_xfer *x) {
  fprintf(f, "{\"copies\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"time_us\":%.3f,\"overlap_fraction\":",
          x->copies, x->bytes, x->time / 1e3);
  if (x->has && x->time > 0)
    fprintf(f, "%.6f", (double)x->hidden / (double)x->time);
  else
    fprintf(f, "null");
  fprintf(f, ",\"exposed_us\":%.3f}", x->exposed / 1e3);
}

static void json_dev(FILE *f, const an_dev *d) {
  fprintf(f,
          "{\"device\":%d,\"span_us\":%.3f,\"busy_fraction\":%.6f,\"kernel_fraction\":%.6f,\"idle_"
          "us\":%.3f,"
          "\"kernels\":%" PRIu64 ",\"h2d\":",
          d->dev, d->span / 1e3, d->span ? (double)d->busy / (double)d->span : 0.0,
          d->span ? (double)d->kernel / (double)d->span : 0.0, d->idle / 1e3, d->kernels);
  json_xfer(f, &d->h2d);
  fprintf(f, ",\"d2h\":");
  json_xfer(f, &d->d2h);
  fprintf(f,
          ",\"pageable\":{\"copies\":%" PRIu64 ",\"bytes\":%" PRIu64
          ",\"time_us\":%.3f,\"host_blocked_us\":%.3f}",
          d->pg_copies, d->pg_bytes, d->pg_time / 1e3, d->pg_host / 1e3);
  fprintf(f, ",\"utilization\":[");
  for (int i = 0; i < d->nbuckets; i++)
    fprintf(f, "%s%.4f", i ? "," : "", d->util[i]);
  fprintf(f, "]}");
}

static int cmp_op_dur(const void *a, const void *b) {
  const an_op *x = *(const an_op *const *)a, *y = *(const an_op *const *)b;
  int64_t dx = x->e - x->s, dy = y->e - y->s;
  return dx < dy ? 1 : dx > dy ? -1 : 0;
}

static void json_report(FILE *f, const an_report *r) {
  fprintf(f, "{\"schema\":\"pinwheel-report/1\",\"trace\":");
  an_json_string(f, r->t->path);
  fprintf(f, ",\"format\":\"%s\",\"devices\":[", r->t->format);
  for (int i = 0; i < r->ndevs; i++) {
    if (i) fputc(',', f);
    json_dev(f, &r->devs[i]);
  }
  fprintf(f,
          "],\"host\":{\"sync_calls\":%" PRIu64
          ",\"sync_us\":%.3f,\"sync_longest_us\":%.3f,\"by_api\":{",
          r->sync_calls, r->sync_time / 1e3, r->sync_longest / 1e3);
  int first = 1;
  for (int a = AN_API_MEMCPY; a < AN_API_N; a++) {
    fprintf(f, "%s\"%s\":{\"calls\":%" PRIu64 ",\"us\":%.3f}", first ? "" : ",", api_name[a],
            r->api_calls[a], r->api_time[a] / 1e3);
    first = 0;
  }
  fprintf(f, "}},\"steps\":[");
  for (size_t k = 0; k < r->nsteps; k++) {
    fprintf(f, "%s{\"step\":%d,\"devices\":[", k ? "," : "", r->steps[k].num);
    for (int i = 0; i < r->steps[k].ndevs; i++) {
      if (i) fputc(',', f);
      json_dev(f, &r->steps[k].devs[i]);
    }
    fprintf(f, "]}");
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
            "\"bytes\":%" PRIu64 ",\"start_us\":%.3f,\"dur_us\":%.3f,\"hidden_fraction\":%.4f}",
            k ? "," : "", x->dev, x->stream, ck_name[x->ckind], mk_name[x->srck], mk_name[x->dstk],
            x->bytes, x->s / 1e3, x->dur / 1e3, x->hidden);
  }
  /* per copy: hidden % (RATELProf hidden_transfers), the longest 100 copies */
  fprintf(f, "],\"copies\":[");
  {
    const an_trace *t = r->t;
    size_t nc = 0;
    const an_op **cp = malloc((t->nops + 1) * sizeof *cp);
    for (size_t i = 0; i < t->nops; i++)
      if (t->ops[i].type == AN_MEMCPY) cp[nc++] = &t->ops[i];
    qsort(cp, nc, sizeof *cp, cmp_op_dur);
    /* one kernel union per device, not one per copy (each is a sort of the whole trace) */
    an_iv **ku = calloc((size_t)r->ndevs + 1, sizeof *ku);
    size_t *nku = calloc((size_t)r->ndevs + 1, sizeof *nku);
    for (size_t k = 0; k < nc && k < 100; k++) {
      const an_op *o = cp[k];
      int di = 0;
      while (di < r->ndevs && r->devs[di].dev != o->dev)
        di++;
      if (!ku[di]) ku[di] = an_kernel_union(t, o->dev, &nku[di]);
      int64_t dur = o->e - o->s, hid = an_cover(ku[di], nku[di], o->s, o->e);
      fprintf(f,
              "%s{\"device\":%d,\"stream\":%d,\"kind\":\"%s\",\"src\":\"%s\",\"dst\":\"%s\","
              "\"bytes\":%" PRIu64 ",\"start_us\":%.3f,\"dur_us\":%.3f,\"hidden_fraction\":%.4f}",
              k ? "," : "", o->dev, o->stream, ck_name[o->ckind], mk_name[o->srck],
              mk_name[o->dstk], o->bytes, o->s / 1e3, dur / 1e3,
              dur > 0 ? (double)hid / (double)dur : 1.0);
    }
    for (int di = 0; di <= r->ndevs; di++)
      free(ku[di]);
    free(ku);
    free(nku);
    free(cp);
  }
  const an_whatif *w = &r->whatif;
  fprintf(f,
          "],\"what_if\":{\"eligible_copies\":%" PRIu64 ",\"eligible_bytes\":%" PRIu64
          ",\"per\":\"%s\","
          "\"exposed_us\":%.3f,\"host_blocked_us\":%.3f,\"d2d_us\":%.3f,\"saving_us\":%.3f},"
          "\"thresholds\":{",
          w->copies, w->bytes, r->nsteps ? "step" : "trace", w->exposed / 1e3, w->host / 1e3,
          w->d2d / 1e3, w->saving / 1e3);
  for (int i = 0; i < an_nrules; i++)
    fprintf(f, "%s\"%s\":%g", i ? "," : "", an_rules[i].name, an_rules[i].value);
  fprintf(f, "},\"findings\":[");
  for (int k = 0; k < r->nfindings; k++) {
    fprintf(f, "%s{\"rule\":\"%s\",\"severity\":\"%s\",\"message\":", k ? "," : "",
            r->findings[k].rule, r->findings[k].severity);
    an_json_string(f, r->findings[k].message);
    fputc('}', f);
  }
  fprintf(f, "]}");
}

void an_write_json(an_out *o, an_report **r, int n) {
  if (n == 1) {
    json_report(o->f, r[0]);
  } else {
    fprintf(o->f, "{\"schema\":\"pinwheel-report-ranks/1\",\"ranks\":[");
    for (int i = 0; i < n; i++) {
      if (i) fputc(',', o->f);
      json_report(o->f, r[i]);
    }
    fprintf(o->f, "]}");
  }
  fputc('\n', o->f);
}

/* ---- SVG timeline ---- */

enum { P_NONE, P_KERNEL, P_H2D_HIDDEN, P_H2D_EXPOSED, P_D2H, P_MEMSET, P_COPY, P_N };
static const char *p_color[P_N] = {"",        "#4c78a8", "#54a24b", "#e45756",
                                   "#f58518", "#9d9d9d", "#b279a2"};
static const char *p_label[P_N] = {
    "", "kernel", "H2D hidden under compute", "H2D exposed", "D2H", "memset", "other copy"};

typedef struct lane {
  int dev, stream;
} lane;

static int cmp_lane(const void *a, const void *b) {
  const lane *x = a, *y = b;
  return x->dev != y->dev ? x->dev - y->dev : x->stream - y->stream;
}

/* The distinct (device, stream) pairs of a trace, sorted. */
static lane *collect_lanes(const an_trace *t, size_t *n) {
  lane *lanes = malloc((t->nops + 1) * sizeof *lanes);
  size_t nl = 0, m = 0;
  for (size_t i = 0; i < t->nops; i++)
    lanes[nl++] = (lane){t->ops[i].dev, t->ops[i].stream};
  qsort(lanes, nl, sizeof *lanes, cmp_lane);
  for (size_t i = 0; i < nl; i++)
    if (!m || cmp_lane(&lanes[m - 1], &lanes[i])) lanes[m++] = lanes[i];
  *n = m;
  return lanes;
}

void an_write_svg(an_out *o, const an_report *r, int64_t w0, int64_t w1, int standalone) {
  FILE *f = o->f;
  const an_trace *t = r->t;
  enum { W = 1200, LEFT = 130, COLS = W - LEFT - 20, LANE_H = 22, TOP = 40 };
  if (w0 == INT64_MIN) {
    w0 = INT64_MAX, w1 = INT64_MIN;
    for (size_t i = 0; i < t->nops; i++) {
      if (t->ops[i].s < w0) w0 = t->ops[i].s;
      if (t->ops[i].e > w1) w1 = t->ops[i].e;
    }
  }
  if (w1 <= w0) w0 = 0, w1 = 1; /* nothing to draw */
  size_t nl;
  lane *lanes = collect_lanes(t, &nl);
  if (nl > 64) nl = 64;
  int height = TOP + (int)nl * LANE_H + 70;
  if (standalone) fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(
      f,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"#fff\"/>\n",
      W, height, W, height);
  fprintf(f, "<text x=\"8\" y=\"18\" font-size=\"14\" font-weight=\"bold\">");
  an_xml_escape(f, t->path);
  fprintf(f, " — %.3f ms</text>\n", ms(w1 - w0));
  /* coverage per lane and column, per class */
  double *cov = calloc((size_t)COLS * P_N, sizeof *cov);
  double colw = (double)(w1 - w0) / COLS;
  size_t lo, hi, nk = 0;
  an_op_range(t, w0, w1, &lo, &hi);
  an_iv *k = NULL;
  for (size_t l = 0; l < nl; l++) {
    memset(cov, 0, (size_t)COLS * P_N * sizeof *cov);
    if (l == 0 || lanes[l].dev != lanes[l - 1].dev) { /* lanes are sorted by device */
      free(k);
      k = an_kernel_union(t, lanes[l].dev, &nk);
    }
    for (size_t i = lo; i < hi; i++) {
      const an_op *op = &t->ops[i];
      if (op->dev != lanes[l].dev || op->stream != lanes[l].stream || op->e <= w0 || op->s >= w1)
        continue;
      int cls = op->type == AN_KERNEL    ? P_KERNEL
                : op->type == AN_MEMSET  ? P_MEMSET
                : op->ckind == AN_CK_H2D ? P_H2D_EXPOSED
                : op->ckind == AN_CK_D2H ? P_D2H
                                         : P_COPY;
      int64_t s = op->s > w0 ? op->s : w0, e = op->e < w1 ? op->e : w1;
      int c0 = (int)((double)(s - w0) / colw), c1 = (int)((double)(e - w0) / colw);
      if (c1 >= COLS) c1 = COLS - 1;
      for (int c = c0; c <= c1; c++) {
        int64_t cs = w0 + (int64_t)(c * colw), ce = w0 + (int64_t)((c + 1) * colw);
        int64_t a = s > cs ? s : cs, b = e < ce ? e : ce;
        if (b <= a) {
          if (c == c0) cov[c * P_N + cls] += 1e-9; /* a very short event still shows */
          continue;
        }
        if (cls == P_H2D_EXPOSED) {
          int64_t hid = an_cover(k, nk, a, b);
          cov[c * P_N + P_H2D_HIDDEN] += (double)hid;
          cov[c * P_N + P_H2D_EXPOSED] += (double)(b - a - hid);
        } else {
          cov[c * P_N + cls] += (double)(b - a);
        }
      }
    }
    int y = TOP + (int)l * LANE_H;
    fprintf(f, "<text x=\"8\" y=\"%d\">GPU %d stream %d</text>\n", y + 15, lanes[l].dev,
            lanes[l].stream);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT,
            y + 2, COLS, LANE_H - 4);
    int run_cls = P_NONE, run_start = 0;
    for (int c = 0; c <= COLS; c++) {
      int best = P_NONE;
      if (c < COLS) {
        double bv = 0;
        for (int p = 1; p < P_N; p++)
          if (cov[c * P_N + p] > bv) bv = cov[c * P_N + p], best = p;
      }
      if (best != run_cls) {
        if (run_cls != P_NONE)
          fprintf(f,
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                  "fill=\"%s\"><title>%s</title></rect>\n",
                  LEFT + run_start, y + 3, c - run_start, LANE_H - 6, p_color[run_cls],
                  p_label[run_cls]);
        run_cls = best;
        run_start = c;
      }
    }
  }
  free(cov);
  free(k);
  /* axis */
  int ay = TOP + (int)nl * LANE_H + 8;
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", LEFT, ay,
          LEFT + COLS, ay);
  for (int i = 0; i <= 10; i++) {
    int x = LEFT + COLS * i / 10;
    fprintf(
        f,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/><text x=\"%d\" y=\"%d\" "
        "text-anchor=\"middle\">%.2f ms</text>\n",
        x, ay, x, ay + 4, x, ay + 16, (double)(w1 - w0) * i / 10 / 1e6);
  }
  int lx = LEFT, ly = ay + 34;
  for (int p = 1; p < P_N; p++) {
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
            "y=\"%d\">%s</text>\n",
            lx, ly - 10, p_color[p], lx + 16, ly, p_label[p]);
    lx += 40 + 7 * (int)strlen(p_label[p]);
  }
  fprintf(f, "</svg>\n");
  free(lanes);
}

/* ---- HTML ---- */

static void html_dev_rows(FILE *f, const an_dev *d, int step) {
  fprintf(f, "<tr>");
  if (step >= 0) fprintf(f, "<td>%d</td>", step);
  fprintf(f,
          "<td>%d</td><td>%.3f</td><td>%.1f %%</td><td>%.1f %%</td><td>%" PRIu64
          "</td><td>%.3f</td><td>%s</td>"
          "<td>%.3f</td><td>%" PRIu64 "</td><td>%.3f</td></tr>\n",
          d->dev, ms(d->span), pct(d->busy, d->span), pct(d->kernel, d->span), d->h2d.copies,
          ms(d->h2d.time), d->h2d.has ? "" : "-", ms(d->h2d.exposed), d->pg_copies, ms(d->pg_host));
}

void an_write_html(an_out *o, an_report **r, int n, int step) {
  FILE *f = o->f;
  fprintf(f,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pinwheel "
          "report</title>\n"
          "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:"
          "collapse;margin:8px 0}"
          "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
          ".warning{color:#b00}.info{color:#246}code{background:#f4f4f4}</style></head><body>\n");
  for (int i = 0; i < n; i++) {
    const an_report *x = r[i];
    fprintf(f, "<h1>pinwheel report: <code>");
    an_xml_escape(f, x->t->path);
    fprintf(f, "</code></h1>\n<p><b>");
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    headline(mf, x);
    fclose(mf);
    an_xml_escape(f, buf);
    free(buf);
    fprintf(f, "</b></p>\n<table><tr><th>device</th><th>span "
               "ms</th><th>busy</th><th>kernels</th><th>H2D copies</th>"
               "<th>H2D ms</th><th>H2D hidden</th><th>exposed ms</th><th>pageable "
               "copies</th><th>host blocked ms</th></tr>\n");
    for (int d = 0; d < x->ndevs; d++) {
      const an_dev *dv = &x->devs[d];
      fprintf(f,
              "<tr><td>%d</td><td>%.3f</td><td>%.1f %%</td><td>%.1f %%</td><td>%" PRIu64
              "</td><td>%.3f</td>"
              "<td>%.1f %%</td><td>%.3f</td><td>%" PRIu64 "</td><td>%.3f</td></tr>\n",
              dv->dev, ms(dv->span), pct(dv->busy, dv->span), pct(dv->kernel, dv->span),
              dv->h2d.copies, ms(dv->h2d.time), pct(dv->h2d.hidden, dv->h2d.time),
              ms(dv->h2d.exposed), dv->pg_copies, ms(dv->pg_host));
    }
    fprintf(f, "</table>\n<p>host syncs: %" PRIu64 " calls, %.3f ms, longest %.3f ms</p>\n",
            x->sync_calls, ms(x->sync_time), ms(x->sync_longest));
    if (x->nsteps) {
      fprintf(f, "<h2>Steps</h2><table><tr><th>step</th><th>device</th><th>span "
                 "ms</th><th>busy</th><th>kernels</th>"
                 "<th>H2D copies</th><th>H2D ms</th><th></th><th>exposed "
                 "ms</th><th>pageable</th><th>host blocked ms</th></tr>\n");
      for (size_t k = 0; k < x->nsteps; k++)
        for (int d = 0; d < x->steps[k].ndevs; d++)
          html_dev_rows(f, &x->steps[k].devs[d], x->steps[k].num);
      fprintf(f, "</table>\n");
    }
    fprintf(f, "<h2>Findings</h2><ul>\n");
    for (int k = 0; k < x->nfindings; k++) {
      fprintf(f, "<li class=\"%s\"><b>%s</b>: ", x->findings[k].severity, x->findings[k].rule);
      an_xml_escape(f, x->findings[k].message);
      fprintf(f, "</li>\n");
    }
    if (!x->nfindings) fprintf(f, "<li>none</li>\n");
    fprintf(f, "</ul>\n<h2>Timeline</h2>\n");
    int64_t w0 = INT64_MIN, w1 = INT64_MAX;
    if (step >= 0 && x->nsteps) w0 = x->devs[0].t0, w1 = x->devs[0].t1;
    an_write_svg(o, x, w0, w1, 0);
  }
  fprintf(f, "</body></html>\n");
}

/* ---- diff ---- */

void an_write_diff(an_out *o, an_report *a, an_report *b) {
  FILE *f = o->f;
  fprintf(f, "pinwheel diff\n  before: %s\n  after:  %s\n", a->t->path, b->t->path);
  for (int i = 0; i < a->ndevs; i++) {
    const an_dev *x = &a->devs[i], *y = NULL;
    for (int j = 0; j < b->ndevs; j++)
      if (b->devs[j].dev == x->dev) y = &b->devs[j];
    if (!y) continue;
    int sa = a->nsteps ? (int)a->nsteps : 1, sb = b->nsteps ? (int)b->nsteps : 1;
    fprintf(f, "\ndevice %d %28s %14s %14s %9s\n", x->dev, "before", "after", "delta", "change");
    struct {
      const char *n;
      double va, vb;
    } rows[] = {
        {"span ms", ms(x->span), ms(y->span)},
        {"span ms per step", ms(x->span) / sa, ms(y->span) / sb},
        {"busy %", pct(x->busy, x->span), pct(y->busy, y->span)},
        {"kernel %", pct(x->kernel, x->span), pct(y->kernel, y->span)},
        {"idle ms", ms(x->idle), ms(y->idle)},
        {"H2D copies", (double)x->h2d.copies, (double)y->h2d.copies},
        {"H2D ms", ms(x->h2d.time), ms(y->h2d.time)},
        {"H2D hidden %", pct(x->h2d.hidden, x->h2d.time), pct(y->h2d.hidden, y->h2d.time)},
        {"H2D exposed ms", ms(x->h2d.exposed), ms(y->h2d.exposed)},
        {"D2H ms", ms(x->d2h.time), ms(y->d2h.time)},
        {"pageable copies", (double)x->pg_copies, (double)y->pg_copies},
        {"pageable host blocked ms", ms(x->pg_host), ms(y->pg_host)},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
      double d = rows[k].vb - rows[k].va;
      fprintf(f, "  %-32s %14.3f %14.3f %+14.3f", rows[k].n, rows[k].va, rows[k].vb, d);
      if (rows[k].va != 0)
        fprintf(f, " %+8.1f%%\n", 100.0 * d / rows[k].va);
      else
        fprintf(f, " %9s\n", "-");
    }
  }
  fprintf(f, "\nhost sync calls %" PRIu64 " -> %" PRIu64 ", sync ms %.3f -> %.3f\n", a->sync_calls,
          b->sync_calls, ms(a->sync_time), ms(b->sync_time));
}

/* ---- Chrome trace export ---- */

/* "ts":µs,"dur":µs with the ns as exact decimals */
static void ts_dur(FILE *f, int64_t s, int64_t e) {
  int64_t d = e - s;
  fprintf(f, "\"ts\":%s%lld.%03lld,\"dur\":%lld.%03lld", s < 0 ? "-" : "",
          (long long)(llabs(s) / 1000), (long long)(llabs(s) % 1000), (long long)(d / 1000),
          (long long)(d % 1000));
}

int an_write_chrome(FILE *f, const an_trace *t) {
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  size_t m;
  lane *lanes = collect_lanes(t, &m);
  int first = 1;
  for (size_t i = 0; i < m; i++) {
    if (i == 0 || lanes[i].dev != lanes[i - 1].dev) {
      fprintf(f,
              "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
              "\"GPU %d\"}}",
              first ? "" : ",\n", lanes[i].dev, lanes[i].dev);
      first = 0;
    }
    fprintf(f,
            ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":"
            "\"stream %d\"}}",
            lanes[i].dev, lanes[i].stream, lanes[i].stream);
  }
  free(lanes);
  static const char *cat[] = {"kernel", "gpu_memcpy", "gpu_memset"};
  for (size_t i = 0; i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", first ? "" : ",\n", cat[o->type]);
    first = 0;
    if (o->type == AN_MEMCPY) { /* Kineto's form, so the kinds survive a round trip */
      static const char *ck[] = {"Memcpy", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"};
      static const char *mk[] = {"Unknown", "Pageable", "Pinned", "Device", "Managed", "Array"};
      fprintf(f, "\"Memcpy %s (%s -> %s)\"", ck[o->ckind], mk[o->srck], mk[o->dstk]);
    } else {
      an_json_string(f, an_name(t, o->name));
    }
    fprintf(f, ",\"pid\":%d,\"tid\":%d,", o->dev, o->stream);
    ts_dur(f, o->s, o->e);
    fprintf(f, ",\"args\":{\"device\":%d,\"stream\":%d", o->dev, o->stream);
    if (o->type != AN_KERNEL) fprintf(f, ",\"bytes\":%" PRIu64, o->bytes);
    if (o->corr >= 0) fprintf(f, ",\"correlation\":%lld", (long long)o->corr);
    fprintf(f, "}}");
  }
  /* step windows, as annotations on a track of their own */
  int sdev = t->nops ? t->ops[0].dev : 0;
  if (t->nsteps)
    fprintf(f,
            "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":-1,\"args\":{\"name\":"
            "\"steps\"}}",
            first ? "" : ",\n", sdev),
        first = 0;
  for (size_t i = 0; i < t->nsteps; i++) {
    const an_step *st = &t->steps[i];
    fprintf(f,
            ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"ProfilerStep#%d\",\"pid\":%d,\"tid\":-1,",
            st->gpu ? "gpu_user_annotation" : "user_annotation", st->num, sdev);
    ts_dur(f, st->s, st->e);
    fputc('}', f);
  }
  /* the memcpy and sync runtime calls, on one host track, so correlations and stalls survive */
  static const char *call_name[] = {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize",
                                    "cudaDeviceSynchronize", "cudaEventSynchronize"};
  if (t->ncalls)
    fprintf(f,
            "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
            "\"host: CUDA "
            "runtime calls\"}}",
            first ? "" : ",\n", AN_HOST_PID),
        first = 0;
  for (size_t i = 0; i < t->ncalls; i++) {
    const an_call *c = &t->calls[i];
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,",
            call_name[c->api], AN_HOST_PID);
    ts_dur(f, c->s, c->e);
    fprintf(f, ",\"args\":{\"correlation\":%lld}}", (long long)c->corr);
  }
  fprintf(f, "\n]}\n");
  return ferror(f) ? -1 : 0;
}
