/* an_out_common.c — escaping and the formatting every output form shares.
 *
 * Owns: escaping, the answer block, the headline and the steps line, the rank table's spread. Every
 * string that came from a trace goes through an_xml_escape or an_json_string before it reaches
 * HTML, SVG or JSON. Must never: compute a figure (it formats what the passes left in the report),
 * or print to a stream other than the one it is handed.
 */
#define _GNU_SOURCE
#include "an_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

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

const char *an_bytes_h(uint64_t v, char *buf) {
  static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = (double)v;
  int i = 0;
  while (x >= 1024 && i < 4)
    x /= 1024, i++;
  if (i == 0)
    snprintf(buf, 32, "%" PRIu64 " B", v);
  else
    snprintf(buf, 32, "%.1f %s", x, u[i]);
  return buf;
}

const char *an_host_ms(int64_t ns, uint64_t copies, uint64_t unknown, char *buf) {
  if (copies && unknown == copies)
    snprintf(buf, 32, "unknown");
  else
    snprintf(buf, 32, "%.3f%s", an_ms(ns), unknown ? "+?" : "");
  return buf;
}

void an_copy_kind(char *buf, size_t n, const an_exposed *x) {
  if (x->staged)
    snprintf(buf, n, "%s staged by pinwheel", an_ck_name[x->ckind < AN_CK_N ? x->ckind : 0]);
  else
    an_kind(buf, n, x->ckind, x->srck, x->dstk);
}

void an_kind(char *buf, size_t n, uint8_t ck, uint8_t src, uint8_t dst) {
  snprintf(buf, n, "%s %s->%s", an_ck_name[ck < AN_CK_N ? ck : 0],
           an_mk_name[src < AN_MK_N ? src : 0], an_mk_name[dst < AN_MK_N ? dst : 0]);
}

static const char *dur_h(int64_t ns, char *buf) { /* seconds from 1 s on, else ms */
  if (ns >= 1000000000)
    snprintf(buf, 32, "%.1f s", (double)ns / 1e9);
  else
    snprintf(buf, 32, "%.1f ms", an_ms(ns));
  return buf;
}

void an_steps_line(FILE *f, const an_report *r) {
  char a[32], b[32];
  if (r->only_step >= 0) return;
  if (r->step_src == AN_STEPS_NONE) {
    fprintf(f, "no repeating steps found: figures over the whole trace\n");
    return;
  }
  int64_t med = r->tot.step_med;
  if (r->step_src == AN_STEPS_INFERRED)
    fprintf(f, "steps inferred: %zu iterations of %" PRId64 " kernel%s, median %.1f ms", r->nsteps,
            r->step_kernels, r->step_kernels == 1 ? "" : "s", an_ms(med));
  else
    fprintf(f, "steps marked: %zu (%s), median %.1f ms", r->nsteps,
            r->t->step_regex ? r->t->step_regex : "ProfilerStep#N", an_ms(med));
  if (r->steady)
    fprintf(f, "; start-up %s and teardown %s not counted", dur_h(r->startup, a),
            dur_h(r->teardown, b));
  fprintf(f, "\n");
}

void an_headline(FILE *f, const an_report *r) {
  const an_totals *x = &r->tot;
  int64_t h = x->h2d_time, hid = x->h2d_hidden, pgh = x->pg_host;
  uint64_t pg = x->pg_copies, unk = x->pg_unknown, nh = x->h2d_copies;
  if (nh)
    fprintf(f, "H2D: %.3f ms, %.1f %% hidden under compute", an_ms(h), an_pct(hid, h));
  else
    fprintf(f, "no host-to-device copies");
  char b[32];
  if (pg)
    fprintf(f, "; %" PRIu64 " pageable cop%s blocked the host %s ms\n", pg, pg == 1 ? "y" : "ies",
            an_host_ms(pgh, pg, unk, b));
  else
    fprintf(f, "; no pageable copies\n");
  if (r->npw) {
    char b1[32], b2[32];
    fprintf(f, "pinwheel staged %" PRIu64 " copies (%s)", r->pw_h2d + r->pw_d2h,
            an_bytes_h(r->pw_h2d_bytes + r->pw_d2h_bytes, b1));
    if (r->pw_h2d) {
      fprintf(f, "; %.1f %% of their H2D DMA ran under compute",
              an_pct(r->pw_h2d_hidden, r->pw_h2d_dma));
      if (an_pct(r->pw_h2d_hideable, r->pw_h2d_dma) < 99.95)
        fprintf(f,
                " (at most %.1f %% could have: for the rest the GPU ran no kernel between the "
                "copy's call and its end)",
                an_pct(r->pw_h2d_hideable, r->pw_h2d_dma));
    }
    if (r->pw_d2h)
      fprintf(f, "; %" PRIu64 " of them D2H (%s)", r->pw_d2h, an_bytes_h(r->pw_d2h_bytes, b2));
    if (r->pw_sync_calls)
      fprintf(f,
              "; waiting for staging space or chunks, the host blocked %.3f ms in %" PRIu64
              " of pinwheel's syncs",
              an_ms(r->pw_sync_time), r->pw_sync_calls);
    fprintf(f, "\n  (found in the trace: %s)\n", an_pw_how(r));
  }
  for (int i = 0; i < r->ndevs; i++) {
    const an_stepsum *s = &r->stepsum[i];
    if (s->n < 1) continue;
    fprintf(f, "device %d: %d step%s, GPU step median %.3f ms (p95 %.3f)", s->dev, s->n,
            s->n == 1 ? "" : "s", an_ms(s->step_med), an_ms(s->step_p95));
    if (s->hidden_med >= 0)
      fprintf(f, ", H2D %.3f ms per step, %.1f %% hidden", an_ms(s->h2d_med), s->hidden_med * 100);
    fprintf(f, "\n");
  }
}

void an_answer_lines(FILE *f, const an_report *r) {
  const an_answer *a = &r->answer;
  if (a->h2d > 0)
    fprintf(f, "answer: H2D %.3f ms, %.1f %% hidden under compute, %.3f ms exposed", an_ms(a->h2d),
            an_pct(a->hidden, a->h2d), an_ms(a->exposed));
  else
    fprintf(f, "answer: no host-to-device copies");
  if (a->d2h > 0)
    fprintf(f, "; D2H %.3f ms, %.3f ms exposed", an_ms(a->d2h), an_ms(a->d2h_exposed));
  fprintf(f, "\n");
  if (a->top < 0) {
    fprintf(f, "  to do: nothing stands out (the findings below say what was seen)\n");
    return;
  }
  fprintf(f, "  to do: %s (finding %s)\n", a->todo, r->findings[a->top].check);
  if (a->effect == AN_DO_WHATIF)
    fprintf(f,
            "  predicted: a %s on device %d takes about %.3f ms instead of %.3f ms (%.2f x; the "
            "what-if below)\n",
            r->nsteps ? "step" : "trace", a->dev, an_ms(a->predicted), an_ms(a->now), a->speedup);
  else if (a->effect == AN_DO_HIDEABLE && !a->d2h_only && a->more_hidden > a->staged_exposed / 10)
    fprintf(f,
            "  predicted: up to %.3f ms of the %.3f ms of exposed DMA can run under compute where "
            "issued now (the kernel time from each copy's call to its end)\n",
            an_ms(a->more_hidden), an_ms(a->staged_exposed));
  else if (a->effect == AN_DO_HIDEABLE && a->d2h_only)
    fprintf(f,
            "  predicted: of the %.3f ms of exposed DMA, at most %.3f ms hidden under later "
            "compute (the kernel time not already hiding a copy)\n",
            an_ms(a->staged_exposed), an_ms(a->elsewhere));
  else if (a->effect == AN_DO_HIDEABLE)
    fprintf(f,
            "  predicted: of the %.3f ms of exposed DMA, at most %.3f ms hidden under earlier "
            "compute (the kernel time not already hiding a copy), %.3f ms where issued now\n",
            an_ms(a->staged_exposed), an_ms(a->elsewhere), an_ms(a->more_hidden));
}

const char *an_pw_how(const an_report *r) {
  if (r->pw_marked == r->npw)
    return "pinwheel's collector marked the operations it issued for each staged copy";
  if (r->pw_h2d && r->pw_d2h)
    return "runs of pinned DMAs on a side stream, each followed by a device-to-device copy of "
           "the same bytes; and device-to-pinned chunks issued back to back, each with an event";
  if (r->pw_h2d)
    return "runs of pinned DMAs on a side stream, each followed by a device-to-device copy of the "
           "same bytes onto the program's stream";
  return "device-to-pinned chunks of one size issued back to back from one thread, each followed "
         "by an event record";
}

void an_rank_spread(an_report **r, int n, double *spread) {
  double lo[AN_RANK_COLS], hi[AN_RANK_COLS];
  for (int k = 0; k < AN_RANK_COLS; k++)
    lo[k] = 1e300, hi[k] = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < AN_RANK_COLS; k++) {
      const double v = r[i]->tot.rank[k];
      lo[k] = v < lo[k] ? v : lo[k], hi[k] = v > hi[k] ? v : hi[k];
    }
  for (int k = 0; k < AN_RANK_COLS; k++)
    spread[k] = hi[k] - lo[k];
}
