/* an_out_html.c — the SVG timeline and the HTML report.
 *
 * Owns: the SVG, which draws a timeline the timeline pass worked out (an_timeline.c): a rectangle
 * per run of one class in a lane, never one element per event, so its size follows the picture's
 * width and the number of lanes, not the trace.  Each run carries a tooltip naming the longest
 * operation in it (name, duration, bytes, stream).  And the HTML, which says everything the text
 * report says, one function per section, and zooms to a step: each listed step has its own
 * timeline.
 * Must never: compute a figure (the passes did), or let a string from a trace through unescaped.
 */
#define _GNU_SOURCE
#include "an_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define AN_X_TL_LABEL(id, label) label,
static const char *const p_label[AN_TL_N] = {AN_TL_CLASSES(AN_X_TL_LABEL)};
static const char *const p_color[AN_TL_N] = {
    [AN_TL_KERNEL] = "#4c78a8",      [AN_TL_COMM] = "#72b7b2", [AN_TL_H2D_HIDDEN] = "#54a24b",
    [AN_TL_H2D_EXPOSED] = "#e45756", [AN_TL_D2H] = "#f58518",  [AN_TL_MEMSET] = "#9d9d9d",
    [AN_TL_COPY] = "#b279a2"};
/* the picture: the timeline pass's columns, between a margin for the lanes' names and one on
 * the right */
enum { LEFT = 130, COLS = AN_TL_COLS, W = LEFT + COLS + 40, LANE_H = 22, TOP = 40 };

static void tooltip(FILE *f, const an_trace *t, const an_op *o, int cls, int64_t run_ns) {
  char b[32], kind[64];
  fprintf(f, "<title>%s, %.3f ms here; longest: ", p_label[cls], an_ms(run_ns));
  if (o->type == AN_MEMCPY) {
    an_kind(kind, sizeof kind, o->ckind, o->srck, o->dstk);
    fprintf(f, "%s, %s", kind, an_bytes_h(o->bytes, b));
  } else {
    const char *nm = an_name(t, o->name);
    char cut[161];
    snprintf(cut, sizeof cut, "%s", nm);
    an_xml_escape(f, cut);
    if (strlen(nm) > 160) fputs("...", f);
    if (o->type == AN_MEMSET) fprintf(f, ", %s", an_bytes_h(o->bytes, b));
  }
  fprintf(f, ", %.3f ms, GPU %d stream %d</title>", an_ms(o->e - o->s), o->dev, o->stream);
}

/* The legend's rows, wrapped to the width. */
static int legend_rows(void) {
  int rows = 1, lx = LEFT;
  for (int p = 1; p < AN_TL_N; p++) {
    int wdt = 40 + 7 * (int)strlen(p_label[p]);
    if (lx + wdt > W - 10) rows++, lx = LEFT;
    lx += wdt;
  }
  return rows;
}

static void svg_head(FILE *f, const an_report *r, const an_timeline *tl, int standalone) {
  int height = TOP + (int)tl->nlanes * LANE_H + 50 + 18 * legend_rows();
  if (standalone) fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(
      f,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"#fff\"/>\n",
      W, height, W, height);
  fprintf(f, "<text x=\"8\" y=\"18\" font-size=\"14\" font-weight=\"bold\">");
  an_xml_escape(f, r->t->path);
  fprintf(f, " — %.3f ms</text>\n", an_ms(tl->w1 - tl->w0));
}

/* One lane: its name, its background, a rectangle per run with its tooltip. */
static void svg_lane(FILE *f, const an_trace *t, const an_tl_lane *lane, int l) {
  int y = TOP + l * LANE_H;
  fprintf(f, "<text x=\"8\" y=\"%d\">GPU %d stream %d</text>\n", y + 15, lane->dev, lane->stream);
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT, y + 2,
          COLS, LANE_H - 4);
  for (size_t k = 0; k < lane->nruns; k++) {
    const an_tl_run *run = &lane->runs[k];
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">", LEFT + run->c0,
            y + 3, run->c1 - run->c0, LANE_H - 6, p_color[run->cls]);
    if (run->top >= 0) tooltip(f, t, &t->ops[run->top], run->cls, run->ns);
    fprintf(f, "</rect>\n");
  }
}

/* Step markers: where each step's GPU work ended, on the first device. */
static void svg_step_marks(FILE *f, const an_report *r, const an_timeline *tl, int ay) {
  int64_t w0 = tl->w0, w1 = tl->w1;
  for (size_t s = 0; s < r->nsteps; s++) {
    const an_stepdev *sd = r->steps[s].ndevs ? &r->steps[s].devs[0] : NULL;
    if (!sd || !sd->has || sd->last < w0 || sd->last > w1) continue;
    int x = LEFT + (int)((double)(sd->last - w0) / (double)(w1 - w0) * COLS);
    fprintf(
        f,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\" stroke-dasharray=\"3,3\">"
        "<title>end of step %d on GPU %d: %.3f ms</title></line><text x=\"%d\" y=\"%d\" "
        "text-anchor=\"middle\" font-size=\"9\">%d</text>\n",
        x, TOP, x, ay, r->steps[s].num, sd->dev, an_ms(sd->gpu), x, TOP - 3, r->steps[s].num);
  }
}

/* The axis: the first label starts at the axis, the last ends at it, so none is clipped. */
static void svg_axis(FILE *f, const an_timeline *tl, int ay) {
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", LEFT, ay,
          LEFT + COLS, ay);
  for (int i = 0; i <= 10; i++) {
    int x = LEFT + COLS * i / 10;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/><text x=\"%d\" "
            "y=\"%d\" text-anchor=\"%s\">%.2f ms</text>\n",
            x, ay, x, ay + 4, x, ay + 16,
            i == 0    ? "start"
            : i == 10 ? "end"
                      : "middle",
            (double)(tl->w1 - tl->w0) * i / 10 / 1e6);
  }
}

static void svg_legend(FILE *f, int ay) {
  int lx = LEFT, ly = ay + 38;
  for (int p = 1; p < AN_TL_N; p++) {
    int wdt = 40 + 7 * (int)strlen(p_label[p]);
    if (lx + wdt > W - 10) lx = LEFT, ly += 18;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
            "y=\"%d\">%s</text>\n",
            lx, ly - 10, p_color[p], lx + 16, ly, p_label[p]);
    lx += wdt;
  }
}

void an_write_svg(an_out *o, const an_report *r, const an_timeline *tl, int standalone) {
  FILE *f = o->f;
  svg_head(f, r, tl, standalone);
  for (size_t l = 0; l < tl->nlanes; l++)
    svg_lane(f, r->t, &tl->lanes[l], (int)l);
  int ay = TOP + (int)tl->nlanes * LANE_H + 8;
  svg_step_marks(f, r, tl, ay);
  svg_axis(f, tl, ay);
  svg_legend(f, ay);
  fprintf(f, "</svg>\n");
}

/* ---- HTML ---- */

static void cell_host(FILE *f, int64_t ns, uint64_t copies, uint64_t unknown) {
  char b[32];
  fprintf(f, "<td>%s</td>", an_host_ms(ns, copies, unknown, b));
}

static void html_steps(FILE *f, const an_report *x) {
  if (!x->nsteps) return;
  fprintf(f, "<h2>Steps</h2><p>A step's GPU work: every operation whose runtime call began in its "
             "CPU range (<code>");
  if (x->step_src == AN_STEPS_INFERRED)
    fprintf(f, "inferred: an operation that recurs once per iteration, every %.3f ms",
            an_ms(x->iperiod));
  else
    an_xml_escape(f, x->t->step_regex ? x->t->step_regex : "ProfilerStep#N");
  fprintf(f, "</code>), on any host thread.  gpu_step = the end of its last operation − the end "
             "of the previous step's.</p>\n<table><tr><th>device</th><th>steps</th><th>gpu_step "
             "ms median</th><th>p95</th><th>H2D ms</th><th>H2D hidden</th><th>H2D exposed "
             "ms</th><th>pageable host ms</th></tr>\n");
  for (int i = 0; i < x->ndevs; i++) {
    const an_stepsum *s = &x->stepsum[i];
    if (!s->n) continue;
    fprintf(f, "<tr><td>%d</td><td>%d</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>", s->dev, s->n,
            an_ms(s->step_med), an_ms(s->step_p95), an_ms(s->h2d_med));
    if (s->hidden_med >= 0)
      fprintf(f, "<td>%.1f %%</td>", s->hidden_med * 100);
    else
      fprintf(f, "<td>-</td>");
    fprintf(f, "<td>%.3f</td><td>%.3f</td></tr>\n", an_ms(s->exposed_med), an_ms(s->pg_host_med));
  }
  fprintf(f, "</table>\n");
  if (!x->list_steps) {
    fprintf(f, "<p>%zu steps: medians above; <code>--steps all</code> lists each.</p>\n",
            x->nsteps);
    return;
  }
  fprintf(f, "<table><tr><th>step</th><th>device</th><th>gpu_step ms</th><th>H2D copies</th>"
             "<th>H2D ms</th><th>H2D hidden</th><th>exposed ms</th><th>D2H copies</th><th>D2H "
             "ms</th><th>D2H hidden</th><th>pageable</th><th>host blocked ms</th><th>kernels</th>"
             "</tr>\n");
  for (size_t k = 0; k < x->nsteps; k++)
    for (int d = 0; d < x->steps[k].ndevs; d++) {
      const an_stepdev *sd = &x->steps[k].devs[d];
      if (!sd->has) continue;
      fprintf(f,
              "<tr><td><a href=\"#step-%d\">%d</a></td><td>%d</td><td>%.3f</td><td>%" PRIu64
              "</td><td>%.3f</td>",
              x->steps[k].num, x->steps[k].num, sd->dev, an_ms(sd->gpu), sd->h2d.copies,
              an_ms(sd->h2d.time));
      if (sd->h2d.time > 0)
        fprintf(f, "<td>%.1f %%</td>", an_pct(sd->h2d.hidden, sd->h2d.time));
      else
        fprintf(f, "<td>-</td>");
      /* D2H: the main cost of an inference loop */
      fprintf(f, "<td>%.3f</td><td>%" PRIu64 "</td><td>%.3f</td>", an_ms(sd->h2d.exposed),
              sd->d2h.copies, an_ms(sd->d2h.time));
      if (sd->d2h.time > 0)
        fprintf(f, "<td>%.1f %%</td>", an_pct(sd->d2h.hidden, sd->d2h.time));
      else
        fprintf(f, "<td>-</td>");
      fprintf(f, "<td>%" PRIu64 "</td>", sd->pg_copies);
      cell_host(f, sd->pg_host, sd->pg_copies, sd->pg_unknown);
      fprintf(f, "<td>%" PRIu64 "</td></tr>\n", sd->kernels);
    }
  fprintf(f, "</table>\n");
}

static void html_kernels(FILE *f, const an_report *x) {
  if (x->nkstats) {
    fprintf(f, "<h2>Top kernels</h2><table><tr><th>device</th><th>name</th><th>count</th>"
               "<th>total ms</th><th>mean us</th><th>share</th></tr>\n");
    for (size_t k = 0; k < x->nkstats && k < 10; k++) {
      const an_kstat *s = &x->kstats[k];
      const char *nm = an_name(x->t, s->name);
      char cut[121];
      snprintf(cut, sizeof cut, "%s", nm);
      fprintf(f, "<tr><td>%d</td><td style=\"text-align:left\"><code title=\"", s->dev);
      an_xml_escape(f, nm);
      fprintf(f, "\">");
      an_xml_escape(f, cut);
      fprintf(
          f,
          "%s</code>%s</td><td>%" PRIu64 "</td><td>%.3f</td><td>%.3f</td><td>%.1f %%</td></tr>\n",
          strlen(nm) > 120 ? "..." : "", s->type == AN_COMM ? " (communication)" : "", s->count,
          an_ms(s->total), (double)s->total / (double)(s->count ? s->count : 1) / 1e3, s->share);
    }
    fprintf(f, "</table>\n");
  }
}

static void html_exposed(FILE *f, const an_report *x) {
  char b[32];
  if (x->nexposed) {
    fprintf(f,
            "<h2>Exposed copies</h2><p>the longest %zu of %zu</p><table><tr><th>device</th>"
            "<th>stream</th><th>kind</th><th>bytes</th><th>ms</th><th>hidden</th><th>host "
            "ms</th></tr>\n",
            x->nexposed < 20 ? x->nexposed : 20, x->nexposed);
    for (size_t k = 0; k < x->nexposed && k < 20; k++) {
      const an_exposed *e = &x->exposed[k];
      char kind[64];
      an_copy_kind(kind, sizeof kind, e);
      fprintf(f, "<tr><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%.3f</td><td>%.1f %%</td>",
              e->dev, e->stream, kind, an_bytes_h(e->bytes, b), an_ms(e->dur), e->hidden * 100);
      if (e->host >= 0)
        fprintf(f, "<td>%.3f</td></tr>\n", an_ms(e->host));
      else
        fprintf(f, "<td>unknown</td></tr>\n");
    }
    fprintf(f, "</table>\n");
  }
}

static void html_gaps(FILE *f, const an_report *x) {
  if (x->ngaps) {
    fprintf(f,
            "<h2>GPU idle gaps</h2><p>at least %.3g ms: %zu%s</p><table><tr><th>"
            "device</th><th>ms</th><th>at ms</th></tr>\n",
            an_threshold_value(AN_T_GAP_MS), x->ngaps, x->ngaps == 1 ? "" : "; the longest:");
    for (size_t k = 0; k < x->ngaps && k < 10; k++)
      fprintf(f, "<tr><td>%d</td><td>%.3f</td><td>+%.3f</td></tr>\n", x->gaps[k].dev,
              an_ms(x->gaps[k].e - x->gaps[k].s),
              an_ms(x->gaps[k].s - (x->ndevs ? x->devs[0].t0 : 0)));
    fprintf(f, "</table>\n");
  }
}

/* The what-if table and its assumptions. */
static void html_whatif(FILE *f, const an_report *x) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mf;
  if (x->whatif_any) {
    fprintf(f,
            "<h2>What-if under pinwheel</h2><table><tr><th>device</th><th>now ms per %s</th>"
            "<th>under pinwheel</th><th>speedup</th><th>with PINWHEEL_SYNC=keep</th><th>host "
            "ms</th><th>GPU busy ms</th><th>copies' host ms</th><th>bound</th></tr>\n",
            x->nsteps ? "step" : "trace");
    for (int i = 0; i < x->ndevs; i++) {
      const an_whatif *w = &x->whatif[i];
      if (!w->steps) continue;
      fprintf(f,
              "<tr><td>%d</td><td>%.3f</td><td>%.3f</td><td>%.2f x</td><td>%.3f</td><td>%.3f</td>"
              "<td>%.3f</td><td>%.3f</td><td>%s</td></tr>\n",
              w->dev, an_ms(w->baseline), an_ms(w->predicted), w->speedup, an_ms(w->predicted_keep),
              an_ms(w->host), an_ms(w->gpu), an_ms(w->copy_host), w->bound ? "GPU" : "host");
    }
    fprintf(f, "</table>\n<p class=\"note\">");
    mf = open_memstream(&buf, &len);
    an_whatif_assumptions(mf, "");
    fclose(mf);
    an_xml_escape(f, buf);
    free(buf);
    fprintf(f, "</p>\n");
  }
}

/* The devices table: each device's figures over the window. */
static void html_devices(FILE *f, const an_report *x) {
  fprintf(f, "<h2>Devices</h2><table><tr><th>device</th><th>span ms</th><th>busy</th>"
             "<th>kernels</th><th>H2D copies</th><th>H2D ms</th><th>H2D hidden</th><th>H2D "
             "exposed ms</th><th>D2H ms</th><th>D2H hidden</th><th>pageable copies</th><th>host "
             "blocked ms</th></tr>\n");
  for (int d = 0; d < x->ndevs; d++) {
    const an_dev *dv = &x->devs[d];
    fprintf(f,
            "<tr><td>%d</td><td>%.3f</td><td>%.1f %%</td><td>%.1f %%</td><td>%" PRIu64
            "</td><td>%.3f</td>",
            dv->dev, an_ms(dv->span), an_pct(dv->busy, dv->span), an_pct(dv->kernel, dv->span),
            dv->h2d.copies, an_ms(dv->h2d.time));
    if (dv->h2d.has)
      fprintf(f, "<td>%.1f %%</td>", an_pct(dv->h2d.hidden, dv->h2d.time));
    else
      fprintf(f, "<td>-</td>");
    fprintf(f, "<td>%.3f</td><td>%.3f</td>", an_ms(dv->h2d.exposed), an_ms(dv->d2h.time));
    if (dv->d2h.has)
      fprintf(f, "<td>%.1f %%</td>", an_pct(dv->d2h.hidden, dv->d2h.time));
    else
      fprintf(f, "<td>-</td>");
    fprintf(f, "<td>%" PRIu64 "</td>", dv->pg_copies);
    cell_host(f, dv->pg_host, dv->pg_copies, dv->pg_unknown);
    fprintf(f, "</tr>\n");
  }
  fprintf(f, "</table>\n");
}

/* Each device's busy fraction over time, one cell per bucket (the text's "utilization over
 * time" bars); darker is busier. */
static void util_strips(FILE *f, const an_report *x) {
  fprintf(f, "<h3>Utilization over time</h3>\n");
  for (int d = 0; d < x->ndevs; d++) {
    const an_dev *dv = &x->devs[d];
    int nb = dv->nbuckets, cw = nb ? 600 / nb : 0;
    fprintf(f,
            "<p>device %d<br><svg class=\"util\" width=\"%d\" height=\"20\" viewBox=\"0 0 %d "
            "20\">",
            dv->dev, cw * nb, cw * nb);
    for (int b = 0; b < nb; b++)
      fprintf(f,
              "<rect x=\"%d\" y=\"0\" width=\"%d\" height=\"20\" fill=\"#4c78a8\" "
              "fill-opacity=\"%.3f\" stroke=\"#fff\"><title>%.1f %% busy</title></rect>",
              b * cw, cw, 0.08 + 0.92 * dv->util[b], 100 * dv->util[b]);
    fprintf(f, "</svg></p>\n");
  }
}

/* Zoom: each listed step on its own timeline, from the previous step's end to its own. */
static void each_step(an_out *o, const an_report *x) {
  FILE *f = o->f;
  if (x->only_step >= 0 || !x->nsteps || !x->list_steps) return;
  fprintf(f, "<h3>Each step</h3>\n");
  for (size_t i = 1; i < x->ntimelines; i++) {
    const an_timeline *tl = &x->timelines[i];
    const struct an_stepfig *st = &x->steps[tl->step];
    /* the label is the step's own time, as in the table (the slowest device's gpu_step); the
     * timeline may start earlier, at a first operation that ran before the previous step's last
     * (a prefetch copy) */
    int64_t g = st->gpu;
    fprintf(f, "<details id=\"step-%d\"><summary>step %d: %.3f ms", st->num, st->num, an_ms(g));
    if (tl->w1 - tl->w0 != g)
      fprintf(f, " (timeline from its first operation: %.3f ms)", an_ms(tl->w1 - tl->w0));
    fprintf(f, "</summary>\n");
    an_write_svg(o, x, tl, 0);
    fprintf(f, "</details>\n");
  }
}

/* The answer (an_answer_lines), the first thing under the title: one line each. */
static void html_answer(FILE *f, const an_report *x) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&buf, &len);
  an_answer_lines(mf, x);
  fclose(mf);
  fprintf(f, "<div class=\"answer\">");
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    while (*line == ' ')
      line++;
    fprintf(f, "<p>");
    an_xml_escape(f, line);
    fprintf(f, "</p>");
  }
  fprintf(f, "</div>\n");
  free(buf);
}

/* The title, the trace's source, the answer, the steps line and the headline. */
static void html_head(FILE *f, const an_report *x) {
  fprintf(f, "<h1>pinwheel report: <code>");
  an_xml_escape(f, x->t->path);
  fprintf(f, "</code>");
  if (x->only_step >= 0) fprintf(f, " (step %d)", x->only_step);
  fprintf(f, "</h1>\n<p>");
  an_xml_escape(f, x->t->source ? x->t->source : x->t->format);
  fprintf(f, ", %zu GPU operation%s</p>\n", x->t->nops, x->t->nops == 1 ? "" : "s");
  html_answer(f, x);
  fprintf(f, "<p><b>");
  char *buf = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&buf, &len);
  an_steps_line(mf, x);
  an_headline(mf, x);
  fclose(mf);
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    an_xml_escape(f, line);
    fputs("<br>", f);
  }
  free(buf);
  fprintf(f, "</b></p>\n");
}

static void html_idle(FILE *f, const an_report *x) {
  fprintf(f, "<h3>Where idle time went</h3><table><tr><th>device</th><th>idle "
             "ms</th><th>host-bound (nothing queued)</th><th>waiting on copies</th><th>other "
             "(work queued)</th></tr>\n");
  for (int d = 0; d < x->ndevs; d++) {
    const an_idle *i = &x->idle[d];
    fprintf(
        f, "<tr><td>%d</td><td>%.3f</td><td>%.3f ms</td><td>%.3f ms</td><td>%.3f ms</td></tr>\n",
        x->devs[d].dev, an_ms(x->devs[d].idle), an_ms(i->host), an_ms(i->copy), an_ms(i->other));
  }
  fprintf(f, "</table>\n");
}

/* D2D, peer, memset and communication: each device's other operations. */
static void html_classes(FILE *f, const an_report *x) {
  char b[32];
  fprintf(f, "<h3>Other operations</h3><table><tr><th>device</th><th>class</th><th>count"
             "</th><th>bytes</th><th>ms</th></tr>\n");
  int any = 0;
  for (int d = 0; d < x->ndevs; d++)
    for (int c = 0; c < AN_OC_N; c++) {
      const an_opclass *k = &x->classes[d][c];
      if (!k->count) continue;
      any = 1;
      fprintf(f, "<tr><td>%d</td><td>%s%s</td><td>%" PRIu64 "</td><td>%s</td><td>%.3f</td></tr>\n",
              x->devs[d].dev, an_oc_name[c], c == AN_OC_COMM ? " (hides no copies)" : "", k->count,
              c == AN_OC_COMM ? "" : an_bytes_h(k->bytes, b), an_ms(k->time));
    }
  if (!any) fprintf(f, "<tr><td colspan=\"5\">none</td></tr>\n");
  fprintf(f, "</table>\n");
}

static void html_syncs(FILE *f, const an_report *x) {
  fprintf(f, "<h3>Host syncs</h3><table><tr><th>call</th><th>count</th><th>host "
             "ms</th></tr>\n");
  for (int a = AN_API_STREAM_SYNC; a <= AN_API_EVENT_SYNC; a++)
    fprintf(f, "<tr><td>%s</td><td>%" PRIu64 "</td><td>%.3f</td></tr>\n", an_api_name[a],
            x->api_calls[a], an_ms(x->api_time[a]));
  fprintf(f, "<tr><th>all</th><td>%" PRIu64 "</td><td>%.3f (longest %.3f)</td></tr></table>\n",
          x->sync_calls, an_ms(x->sync_time), an_ms(x->sync_longest));
}

static void html_findings(FILE *f, const an_report *x) {
  fprintf(f, "<h2>Findings</h2><ul>\n");
  for (int k = 0; k < x->nfindings; k++) {
    fprintf(f, "<li class=\"%s\"><b>%s</b>: ", x->findings[k].severity, x->findings[k].check);
    an_xml_escape(f, x->findings[k].message);
    fprintf(f, "</li>\n");
  }
  if (!x->nfindings) fprintf(f, "<li>none</li>\n");
  fprintf(f, "</ul>\n");
}

static void html_report(an_out *o, const an_report *x) {
  FILE *f = o->f;
  html_head(f, x);
  html_devices(f, x);
  util_strips(f, x);
  html_idle(f, x);
  html_classes(f, x);
  html_syncs(f, x);
  html_steps(f, x);
  html_kernels(f, x);
  html_exposed(f, x);
  html_gaps(f, x);
  html_whatif(f, x);
  html_findings(f, x);
  fprintf(f, "<h2>Timeline</h2>\n");
  if (x->ntimelines && x->steady && x->only_step < 0)
    fprintf(f,
            "<p class=\"note\">The timeline spans the whole trace (%.3f ms), start-up and "
            "teardown included; the devices table's span is the steps' only (start-up %.3f ms "
            "and teardown %.3f ms not counted).</p>\n",
            an_ms(x->timelines[0].w1 - x->timelines[0].w0), an_ms(x->startup), an_ms(x->teardown));
  if (x->ntimelines) an_write_svg(o, x, &x->timelines[0], 0);
  each_step(o, x);
}

/* Several ranks: one table, a row per file and the spread, as the text report has; each rank's
 * own report below it, folded. */
static void html_ranks(FILE *f, an_report **r, int n) {
  fprintf(f,
          "<h1>pinwheel report: %d ranks</h1>\n<table><tr><th>rank</th><th>trace</th><th>span "
          "ms</th><th>busy</th><th>H2D exposed ms</th><th>sync ms</th><th>pageable host "
          "ms</th><th>step median ms</th><th>staged</th></tr>\n",
          n);
  double sp[AN_RANK_COLS];
  an_rank_spread(r, n, sp);
  for (int i = 0; i < n; i++) {
    const double *v = r[i]->tot.rank;
    fprintf(f, "<tr><td><a href=\"#rank-%d\">%d</a></td><td><code>", i, i);
    an_xml_escape(f, r[i]->t->path);
    fprintf(f,
            "</code></td><td>%.3f</td><td>%.1f %%</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>"
            "<td>%.3f</td><td>%.0f</td></tr>\n",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
  }
  fprintf(f,
          "<tr><th>spread</th><td></td><td>%.3f</td><td>%.1f %%</td><td>%.3f</td><td>%.3f</td>"
          "<td>%.3f</td><td>%.3f</td><td>%.0f</td></tr></table>\n",
          sp[0], sp[1], sp[2], sp[3], sp[4], sp[5], sp[6]);
  for (int i = 0; i < n; i++) {
    fprintf(f, "<h3>rank %d</h3>\n", i);
    html_answer(f, r[i]);
  }
}

void an_write_html(an_out *o, an_report **r, int n) {
  FILE *f = o->f;
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pinwheel "
             "report</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
             "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px "
             "8px;text-align:right}th{background:#eee}.warning{color:#b00}.info{color:#246}"
             "code{background:#f4f4f4}.note{max-width:1100px;color:#444}svg{max-width:100%%;"
             "height:auto}.answer{border-left:4px solid #246;padding:2px 12px;margin:8px 0;"
             "background:#f6f8fb}.answer p{margin:4px 0}</style></head><body>\n");
  if (n > 1) html_ranks(f, r, n);
  for (int i = 0; i < n; i++) {
    if (n > 1) {
      fprintf(f, "<details id=\"rank-%d\"><summary>rank %d: <code>", i, i);
      an_xml_escape(f, r[i]->t->path);
      fprintf(f, "</code></summary>\n");
    }
    html_report(o, r[i]);
    if (n > 1) fprintf(f, "</details>\n");
  }
  fprintf(f, "</body></html>\n");
}
