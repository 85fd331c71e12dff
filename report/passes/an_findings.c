/* an_findings.c — the findings pass: one table of checks, each of which may write a message.
 *
 * Owns: the checks and their messages, and the answer the forms lead with (the first finding
 * that names an action, with its predicted effect).  A check reads only the report (the figures,
 * steps, idle split and what-if passes ran before) and its thresholds from the table in
 * an_analyze.c. Messages give the figure, the threshold it crossed and what to do, in the per-step
 * unit when the trace has steps. Must never: compute a figure of its own (a check compares what the
 * passes left), or print.
 */
#define _GNU_SOURCE
#include "an.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static double ms(int64_t ns) {
  return (double)ns / 1e6;
}

static int64_t span_of(const an_report *r) {
  int64_t span = 0;
  for (int i = 0; i < r->ndevs; i++)
    if (r->devs[i].span > span) span = r->devs[i].span;
  return span;
}

/* A check returns 0 (nothing to say), 1 (a finding of the table's severity) or AN_AS_INFO. */
enum { AN_AS_INFO = 2 };

static int check_pageable(const an_report *r, char *m, size_t n) {
  uint64_t pg = 0, unk = 0, pgb = 0;
  int64_t pgh = 0;
  for (int i = 0; i < r->ndevs; i++) {
    pg += r->devs[i].pg_copies, pgb += r->devs[i].pg_bytes, unk += r->devs[i].pg_unknown;
    an_sat_add(&pgh, r->devs[i].pg_host);
  }
  if (!pg) return 0;
  char host[96];
  if (unk == pg)
    snprintf(host, sizeof host,
             "blocked the host for an unknown time (no runtime calls in the "
             "trace)");
  else if (unk)
    snprintf(host, sizeof host, "blocked the host %.3f ms (%" PRIu64 " more with no runtime call)",
             ms(pgh), unk);
  else
    snprintf(host, sizeof host, "blocked the host %.3f ms", ms(pgh));
  const char *cp = pg == 1 ? "copy" : "copies";
  if (r->npw) /* a run under pinwheel: say what it left, not to use it */
    snprintf(m, n,
             "pinwheel left %" PRIu64 " %s from or to pageable host memory (%.1f MiB) "
             "unstaged; %s %s (smaller than PINWHEEL_MIN_BYTES or not eligible: the summary's "
             "'not staged' line says which)",
             pg, cp, (double)pgb / 1048576.0, pg == 1 ? "it" : "they", host);
  else
    snprintf(m, n,
             "%" PRIu64 " %s from or to pageable host memory (%.1f MiB) %s; run under "
             "pinwheel (or pin the memory) to stage them",
             pg, cp, (double)pgb / 1048576.0, host);
  /* a warning only when they cost a meaningful share of the span: a few tiny copies (three of
   * 0.0 MiB taking 0.11 ms) are worth a line, not a red one */
  int64_t cost = pgh, span = span_of(r), gpu = 0;
  for (int i = 0; i < r->ndevs; i++)
    an_sat_add(&gpu, r->devs[i].pg_time);
  if (gpu > cost) cost = gpu;
  return (double)cost >= an_threshold_value(AN_T_PAGEABLE_WARN_PCT) / 100.0 * (double)span
             ? 1
             : AN_AS_INFO;
}

static int check_staged(const an_report *r, char *m, size_t n) {
  if (!r->npw) return 0;
  int64_t dt = r->pw_h2d_dma, hid = r->pw_h2d_hidden;
  size_t l = 0;
  if (r->pw_h2d)
    l = (size_t)snprintf(m, n,
                         "pinwheel staged %" PRIu64 " H2D copies (%.1f MiB); %.1f %% of their DMA "
                         "ran under compute, %.1f %% at most could have (the GPU ran no kernel "
                         "during the rest, from the copy's call to its end)",
                         r->pw_h2d, (double)r->pw_h2d_bytes / 1048576.0,
                         dt ? 100.0 * (double)hid / (double)dt : 0.0,
                         dt ? 100.0 * (double)r->pw_h2d_hideable / (double)dt : 0.0);
  if (r->pw_d2h && l < n)
    l += (size_t)snprintf(m + l, n - l, "%spinwheel staged %" PRIu64 " D2H copies (%.1f MiB)",
                          l ? "; " : "", r->pw_d2h, (double)r->pw_d2h_bytes / 1048576.0);
  if (r->pw_sync_calls && l < n)
    snprintf(m + l, n - l,
             "; its own syncs (waiting for staging space, or for D2H chunks to land) blocked the "
             "host %.3f ms in %" PRIu64 " calls, part of the staged copies' time, not the "
             "program's syncs",
             ms(r->pw_sync_time), r->pw_sync_calls);
  return 1;
}

/* The exposed copies pinwheel did not stage (a staged copy has its own check below). */
static int check_exposed(const an_report *r, char *m, size_t n) {
  size_t cnt = 0, pageable = 0;
  const an_exposed *top = NULL;
  for (size_t k = 0; k < r->nexposed; k++) {
    const an_exposed *x = &r->exposed[k];
    if (x->staged) continue;
    cnt++, pageable += x->srck == AN_MK_PAGEABLE || x->dstk == AN_MK_PAGEABLE;
    if (!top) top = x; /* the list is sorted, longest first */
  }
  if (!cnt) return 0;
  const char *what = pageable == cnt
                         ? (r->npw ? "; they are pageable copies pinwheel left unstaged "
                                     "(see pageable_copies)"
                                   : "; they are pageable: staging them (run under "
                                     "pinwheel, or pin the memory) lets them overlap")
                     : pageable ? "; the pageable ones can be staged, the others issued earlier on "
                                  "a side stream while compute runs"
                                : "; issue them earlier on a side stream, while compute runs";
  snprintf(m, n,
           "%zu cop%s longer than %.0f us ran with at most %.0f %% of %s time under compute; "
           "the longest: %.3f ms (%.1f %% hidden)%s",
           cnt, cnt == 1 ? "y" : "ies", an_threshold_value(AN_T_EXPOSED_MIN_US),
           an_threshold_value(AN_T_EXPOSED_MAX_HIDDEN_PCT), cnt == 1 ? "its" : "their",
           ms(top->dur), top->hidden * 100, what);
  return 1;
}

/* The copies pinwheel staged whose DMAs still ran mostly outside compute, summed: their DMA
 * time, its part under compute, the kernel time between each copy's call and its end (hideable:
 * what an earlier start where it is issued could hide), the longest of them, and the kernels of
 * its device per step (the trace as one step when it has none). */
typedef struct staged_sum {
  size_t n, d2h;
  int64_t dur, hid, can, step_kernels;
  const an_exposed *top;
} staged_sum;

static int staged_exposed(const an_report *r, staged_sum *x) {
  memset(x, 0, sizeof *x);
  for (size_t k = 0; k < r->nexposed; k++) {
    const an_exposed *e = &r->exposed[k];
    if (!e->staged) continue;
    x->n++, x->d2h += e->ckind == AN_CK_D2H;
    an_sat_add(&x->dur, e->dur), an_sat_add(&x->hid, (int64_t)(e->hidden * (double)e->dur));
    an_sat_add(&x->can, e->hideable);
    if (!x->top) x->top = e; /* sorted, longest first */
  }
  if (!x->n) return 0;
  for (int i = 0; i < r->ndevs; i++)
    if (r->devs[i].dev == x->top->dev)
      x->step_kernels = r->devs[i].kernel / (int64_t)(r->nsteps ? r->nsteps : 1);
  return 1;
}

/* What would hide them, one clause: the DMA waited while kernels ran (start it sooner), or no
 * kernel ran from the call to its end (issue it earlier); and whether the longest outlasts a
 * step's compute, which no placement hides. */
static void staged_remedy(const an_report *r, const staged_sum *x, char *m, size_t n) {
  const char *it = x->n == 1 ? "it" : "them";
  size_t l;
  if (x->d2h == x->n) /* a D2H copy cannot start before the kernels that produce its bytes */
    l = (size_t)snprintf(m, n,
                         "a D2H copy starts when the kernels that produce its bytes end, so it "
                         "hides only under work queued after it: let the next step's kernels "
                         "start before the host waits for %s (no sync right after %s)",
                         it, it);
  else if (x->can - x->hid > x->dur / 10)
    l = (size_t)snprintf(
        m, n,
        "kernels ran %.3f ms of %s DMA time from %s call to %s end while the "
        "DMA waited%s: a bigger PINWHEEL_HOST_POOL or PINWHEEL_DEVICE_RING "
        "lets %s start sooner",
        ms(x->can - x->hid), x->n == 1 ? "its" : "their", x->n == 1 ? "its" : "each copy's", "its",
        r->pw_sync_calls ? " (pinwheel's syncs waited for staging space)" : "", it);
  else
    l = (size_t)snprintf(m, n,
                         "almost no kernel ran from %s call to %s end: issue %s earlier, under "
                         "the compute before %s (prefetch the next batch)",
                         x->n == 1 ? "its" : "each copy's", "its", it, it);
  if (l < n && x->top->dur > x->step_kernels)
    snprintf(m + l, n - l,
             "; the longest (%.3f ms) outlasts a %s's compute on device %d (%.3f ms of kernels): "
             "no placement hides all of it",
             ms(x->top->dur), r->nsteps ? "step" : "trace", x->top->dev, ms(x->step_kernels));
}

static int check_staged_exposed(const an_report *r, char *m, size_t n) {
  staged_sum x;
  if (!staged_exposed(r, &x)) return 0;
  size_t l = (size_t)snprintf(
      m, n,
      "%zu cop%s pinwheel staged (not left pageable) ran %s DMA mostly outside compute: %.3f ms "
      "of DMA, %.1f %% hidden; ",
      x.n, x.n == 1 ? "y" : "ies", x.n == 1 ? "its" : "their", ms(x.dur), an_pct(x.hid, x.dur));
  if (x.n > 1 && l < n)
    l += (size_t)snprintf(m + l, n - l, "the longest %.3f ms, %.1f %% hidden; ", ms(x.top->dur),
                          x.top->hidden * 100);
  if (l < n) staged_remedy(r, &x, m + l, n - l);
  return 1;
}

static int check_sync(const an_report *r, char *m, size_t n) {
  int64_t span = span_of(r);
  if (span <= 0 || (r->sync_time * 100.0 / (double)span < an_threshold_value(AN_T_SYNC_SHARE_PCT) &&
                    r->sync_longest < (int64_t)(an_threshold_value(AN_T_SYNC_LONGEST_MS) * 1e6)))
    return 0;
  snprintf(m, n,
           "the host waited %.3f ms in %" PRIu64 " sync call%s (%.1f %% of the span; longest "
           "%.3f ms)",
           ms(r->sync_time), r->sync_calls, r->sync_calls == 1 ? "" : "s",
           r->sync_time * 100.0 / (double)span, ms(r->sync_longest));
  return 1;
}

static int check_gaps(const an_report *r, char *m, size_t n) {
  if (!r->ngaps) return 0;
  int64_t tot = 0;
  for (size_t g = 0; g < r->ngaps; g++)
    an_sat_add(&tot, r->gaps[g].e - r->gaps[g].s);
  if (r->ngaps == 1)
    snprintf(m, n, "1 GPU idle gap of at least %.3g ms: %.3f ms", an_threshold_value(AN_T_GAP_MS),
             ms(tot));
  else
    snprintf(m, n, "%zu GPU idle gaps of at least %.3g ms, %.3f ms in all; the longest %.3f ms",
             r->ngaps, an_threshold_value(AN_T_GAP_MS), ms(tot), ms(r->gaps[0].e - r->gaps[0].s));
  return 1;
}

static int check_idle(const an_report *r, char *m, size_t n) {
  size_t l = 0;
  m[0] = 0;
  for (int i = 0; i < r->ndevs && l < n; i++) {
    const an_dev *d = &r->devs[i];
    const an_idle *x = &r->idle[i];
    if (d->span <= 0 || d->idle < d->span / 10) continue; /* under 10 % idle: nothing to say */
    int64_t tot = x->host + x->copy + x->other;
    if (tot <= 0) continue;
    const char *why = x->copy >= x->host && x->copy >= x->other
                          ? "the host was blocked in copies: stage or pin them"
                      : x->host >= x->other
                          ? "nothing was queued while the host synced or launched: "
                            "fewer syncs, or larger / captured launches"
                          : "work was queued but waited (dependencies, launch latency)";
    l += (size_t)snprintf(m + l, n - l,
                          "%sdevice %d idle %.1f %% of the span: host-bound %.1f %%, waiting on "
                          "copies %.1f %%, other %.1f %%; mostly %s",
                          l ? "; " : "", d->dev, 100.0 * (double)d->idle / (double)d->span,
                          100.0 * (double)x->host / (double)tot,
                          100.0 * (double)x->copy / (double)tot,
                          100.0 * (double)x->other / (double)tot, why);
  }
  return m[0] != 0;
}

static int check_low_util(const an_report *r, char *m, size_t n) {
  size_t l = 0;
  m[0] = 0;
  for (int i = 0; i < r->ndevs && l < n; i++) {
    int low = 0;
    for (int b = 0; b < r->devs[i].nbuckets; b++)
      low += r->devs[i].util[b] * 100 < an_threshold_value(AN_T_LOW_UTIL_PCT);
    if (low)
      l += (size_t)snprintf(m + l, n - l, "%sdevice %d: %d of %d time buckets below %.0f %% busy",
                            l ? "; " : "", r->devs[i].dev, low, r->devs[i].nbuckets,
                            an_threshold_value(AN_T_LOW_UTIL_PCT));
  }
  return m[0] != 0;
}

static int check_comm(const an_report *r, char *m, size_t n) {
  uint64_t c = 0;
  int64_t tm = 0;
  for (int i = 0; i < r->ndevs; i++)
    c += r->classes[i][AN_OC_COMM].count, an_sat_add(&tm, r->classes[i][AN_OC_COMM].time);
  if (!c) return 0;
  snprintf(m, n,
           "%" PRIu64 " communication kernels (NCCL and the like, %.3f ms) are counted as their "
           "own class: copies that ran under them are not counted as hidden",
           c, ms(tm));
  return 1;
}

static int check_whatif(const an_report *r, char *m, size_t n) {
  size_t l = 0;
  m[0] = 0;
  for (int i = 0; i < r->ndevs && l < n; i++) {
    const an_whatif *w = &r->whatif[i];
    if (!w->steps || (!w->copies && !w->d2h_copies)) continue;
    const char *per = r->nsteps ? "step" : "trace";
    l += (size_t)snprintf(
        m + l, n - l,
        "%sdevice %d: under pinwheel a %s would take about %.3f ms instead of %.3f ms (%.2f x), "
        "%.3f ms with PINWHEEL_SYNC=keep; per %s: %.1f eligible H2D copies (%.1f MiB) "
        "and %.1f D2H copies (%.1f MiB) blocked the host %.3f ms; it is %s-bound then",
        l ? "; " : "", w->dev, per, ms(w->predicted), ms(w->baseline),
        w->predicted > 0 ? (double)w->baseline / (double)w->predicted : 0.0, ms(w->predicted_keep),
        per, (double)w->copies / w->steps, (double)w->bytes / w->steps / 1048576.0,
        (double)w->d2h_copies / w->steps, (double)w->d2h_bytes / w->steps / 1048576.0,
        ms(w->copy_host), w->bound ? "GPU" : "host");
  }
  return m[0] != 0;
}

static const struct {
  const char *name, *severity;
  int (*run)(const an_report *, char *, size_t);
} checks[] = {
    {"pinwheel_staged", "info", check_staged},
    {"pageable_copies", "warning", check_pageable},
    {"exposed_transfers", "warning", check_exposed},
    {"staged_exposed", "warning", check_staged_exposed},
    {"sync_stalls", "info", check_sync},
    {"gpu_gaps", "info", check_gaps},
    {"idle_time", "info", check_idle},
    {"low_utilization", "info", check_low_util},
    {"communication", "info", check_comm},
    {"what_if_pinwheel", "info", check_whatif},
};

static const an_finding *finding(const an_report *r, const char *check, int *at) {
  for (int k = 0; k < r->nfindings; k++)
    if (!strcmp(r->findings[k].check, check)) return *at = k, &r->findings[k];
  return NULL;
}

/* The answer the forms lead with: the totals, and the first finding that names an action, in
 * this order: pageable copies to stage (a warning, or the what-if gains), staged copies still
 * exposed, other exposed copies, host syncs; with the what-if's or the hideable figure. */
static void answer(an_report *r) {
  an_answer *a = &r->answer;
  memset(a, 0, sizeof *a);
  a->top = -1;
  a->h2d = r->tot.h2d_time, a->hidden = r->tot.h2d_hidden, a->exposed = a->h2d - a->hidden;
  for (int i = 0; i < r->ndevs; i++)
    an_sat_add(&a->d2h, r->devs[i].d2h.time), an_sat_add(&a->d2h_exposed, r->devs[i].d2h.exposed);
  const an_whatif *w = r->whatif_top >= 0 ? &r->whatif[r->whatif_top] : NULL;
  int gain = w && (w->copies || w->d2h_copies) && w->predicted > 0;
  const an_finding *f;
  int k;
  uint64_t pg = r->tot.pg_copies;
  const char *cp = pg == 1 ? "copy" : "copies";
  if ((f = finding(r, "pageable_copies", &k)) &&
      (!strcmp(f->severity, "warning") || (gain && w->speedup >= 1.01))) {
    a->top = k;
    if (gain)
      a->effect = AN_DO_WHATIF, a->dev = w->dev, a->now = w->baseline, a->predicted = w->predicted,
      a->speedup = w->speedup;
    if (r->npw)
      snprintf(a->todo, sizeof a->todo,
               "see why pinwheel left %" PRIu64 " pageable %s unstaged (its summary's 'not "
               "staged' line: too small or not eligible)",
               pg, cp);
    else
      snprintf(a->todo, sizeof a->todo,
               "stage the %" PRIu64 " pageable %s: run under pinwheel (or pin the memory)", pg, cp);
  } else if ((f = finding(r, "staged_exposed", &k))) {
    staged_sum x;
    staged_exposed(r, &x);
    a->top = k;
    char rem[256];
    staged_remedy(r, &x, rem, sizeof rem);
    snprintf(a->todo, sizeof a->todo, "hide the copies pinwheel staged: %s", rem);
    /* started sooner where they are issued: the kernel time they missed; issued earlier: their
     * exposed DMA, at most the kernel time of the window not already hiding a copy */
    int64_t free_k = 0;
    for (int i = 0; i < r->ndevs; i++)
      an_sat_add(&free_k, r->devs[i].kernel - r->devs[i].h2d.hidden - r->devs[i].d2h.hidden);
    a->effect = AN_DO_HIDEABLE, a->d2h_only = x.d2h == x.n;
    a->more_hidden = x.can > x.hid && !a->d2h_only ? x.can - x.hid : 0;
    a->staged_exposed = x.dur - x.hid;
    a->elsewhere = free_k < a->staged_exposed ? (free_k > 0 ? free_k : 0) : a->staged_exposed;
  } else if ((f = finding(r, "exposed_transfers", &k))) {
    a->top = k;
    const char *semi = strrchr(f->message, ';');
    snprintf(a->todo, sizeof a->todo, "overlap the exposed copies with compute: %.270s",
             semi ? semi + 2 : f->message);
  } else if ((f = finding(r, "sync_stalls", &k))) {
    a->top = k;
    snprintf(a->todo, sizeof a->todo,
             "sync the host less often: it waited %.3f ms in %" PRIu64 " sync call%s",
             ms(r->sync_time), r->sync_calls, r->sync_calls == 1 ? "" : "s");
  } else if ((f = finding(r, "idle_time", &k))) {
    a->top = k;
    const char *why = strstr(f->message, "; mostly ");
    snprintf(a->todo, sizeof a->todo, "keep the GPU fed: %.280s",
             why ? why + strlen("; mostly ") : f->message);
  }
}

void an_pass_findings(an_report *r) {
  for (size_t i = 0; i < sizeof checks / sizeof checks[0] && r->nfindings < 16; i++) {
    an_finding *f = &r->findings[r->nfindings];
    int rc = checks[i].run(r, f->message, sizeof f->message);
    if (rc) {
      f->check = checks[i].name;
      f->severity = rc == AN_AS_INFO ? "info" : checks[i].severity;
      r->nfindings++;
    }
  }
  answer(r);
}
