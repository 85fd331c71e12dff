/* an_figures.c — interval arithmetic, the figures of DESIGN.md §5, the findings and the what-if.
 *
 * Owns: the definitions (K, H, D, A unions per device; overlap = |H ∩ K| / |H|; exposed = |H \ K|;
 * busy = |A| / span; hidden % per copy) and the rules table with its thresholds.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- intervals ---- */

static int cmp_iv(const void *a, const void *b) {
  const an_iv *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

size_t an_union(an_iv *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_iv);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i].e <= v[i].s) continue;
    if (m && v[i].s <= v[m - 1].e) {
      if (v[i].e > v[m - 1].e) v[m - 1].e = v[i].e;
    } else {
      v[m++] = v[i];
    }
  }
  return m;
}

int64_t an_total(const an_iv *v, size_t n) {
  int64_t t = 0;
  for (size_t i = 0; i < n; i++)
    t += v[i].e - v[i].s;
  return t;
}

int64_t an_intersect(const an_iv *a, size_t na, const an_iv *b, size_t nb) {
  int64_t t = 0;
  size_t i = 0, j = 0;
  while (i < na && j < nb) {
    int64_t s = a[i].s > b[j].s ? a[i].s : b[j].s, e = a[i].e < b[j].e ? a[i].e : b[j].e;
    if (e > s) t += e - s;
    if (a[i].e < b[j].e)
      i++;
    else
      j++;
  }
  return t;
}

int64_t an_cover(const an_iv *v, size_t n, int64_t s, int64_t e) {
  size_t lo = 0, hi = n; /* first interval ending after s */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v[mid].e <= s)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t t = 0;
  for (size_t i = lo; i < n && v[i].s < e; i++) {
    int64_t a = v[i].s > s ? v[i].s : s, b = v[i].e < e ? v[i].e : e;
    if (b > a) t += b - a;
  }
  return t;
}

/* ---- rules ---- */

an_rule an_rules[] = {
    {"exposed_min_us", 100, "us",
     "copies longer than this are checked for exposure (RATELProf hidden_transfers)"},
    {"exposed_max_hidden_pct", 50, "%", "a copy hidden this much or less under compute is exposed"},
    {"gap_ms", 1, "ms", "GPU idle gaps at least this long are reported (nsys gpu_gaps)"},
    {"sync_share_pct", 5, "%",
     "host time in sync calls above this share of the span is a finding (nsys cuda_api_sync)"},
    {"sync_longest_ms", 1, "ms", "a single sync call at least this long is a finding"},
    {"low_util_pct", 50, "%", "utilization buckets below this are low (nsys gpu_time_util)"},
    {"buckets", 20, "", "utilization buckets over the span"},
    {"pageable_min_kib", 0, "KiB",
     "pageable copies at least this large are reported (nsys cuda_memcpy_async)"},
    {"eligible_min_kib", 64, "KiB",
     "what-if: pageable H2D copies pinwheel stages (PINWHEEL_MIN_BYTES)"},
    {"d2d_gbps", 2000, "GB/s", "what-if: device-to-device copy rate that replaces a staged copy"},
};
const int an_nrules = (int)(sizeof an_rules / sizeof an_rules[0]);

double an_rule_get(const char *name) {
  for (int i = 0; i < an_nrules; i++)
    if (!strcmp(an_rules[i].name, name)) return an_rules[i].value;
  return 0;
}

int an_rule_set(const char *assign) {
  const char *eq = strchr(assign, '=');
  if (!eq) return -1;
  for (int i = 0; i < an_nrules; i++)
    if (strlen(an_rules[i].name) == (size_t)(eq - assign) &&
        !strncmp(an_rules[i].name, assign, (size_t)(eq - assign))) {
      char *end;
      double v = strtod(eq + 1, &end);
      if (end == eq + 1 || *end || v < 0) return -1;
      if (!strcmp(an_rules[i].name, "buckets") && (v < 1 || v > 64)) return -1;
      an_rules[i].value = v;
      return 0;
    }
  return -1;
}

/* ---- correlation join ---- */

typedef struct corr_dur {
  int64_t corr, dur;
} corr_dur;

static int cmp_cd(const void *a, const void *b) {
  const corr_dur *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

typedef struct ctx {
  const an_trace *t;
  corr_dur *cd;
  size_t ncd;
} ctx;

static int64_t host_time_of(const ctx *c, int64_t corr) {
  if (corr < 0) return 0;
  size_t lo = 0, hi = c->ncd;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->cd[mid].corr < corr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->ncd && c->cd[lo].corr == corr ? c->cd[lo].dur : 0;
}

static ctx *make_ctx(const an_trace *t) {
  ctx *c = calloc(1, sizeof *c);
  c->t = t;
  c->cd = malloc((t->ncalls + 1) * sizeof *c->cd);
  for (size_t i = 0; i < t->ncalls; i++)
    if (t->calls[i].api == AN_API_MEMCPY)
      c->cd[c->ncd++] = (corr_dur){t->calls[i].corr, t->calls[i].e - t->calls[i].s};
  qsort(c->cd, c->ncd, sizeof *c->cd, cmp_cd);
  return c;
}

static void free_ctx(ctx *c) {
  free(c->cd);
  free(c);
}

/* ---- per-device figures ---- */

typedef struct lists {
  an_iv *k, *h, *d, *a;
  size_t nk, nh, nd, na;
} lists;

static void build_lists(const an_trace *t, int dev, int64_t w0, int64_t w1, lists *L) {
  memset(L, 0, sizeof *L);
  size_t lo, hi;
  an_op_range(t, w0, w1, &lo, &hi);
  size_t n = hi - lo + 1;
  L->k = malloc(n * sizeof(an_iv));
  L->h = malloc(n * sizeof(an_iv));
  L->d = malloc(n * sizeof(an_iv));
  L->a = malloc(n * sizeof(an_iv));
  for (size_t i = lo; i < hi; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != dev) continue;
    an_iv v = {o->s > w0 ? o->s : w0, o->e < w1 ? o->e : w1};
    if (v.e <= v.s) continue;
    L->a[L->na++] = v;
    if (o->type == AN_KERNEL)
      L->k[L->nk++] = v;
    else if (o->type == AN_MEMCPY && o->ckind == AN_CK_H2D)
      L->h[L->nh++] = v;
    else if (o->type == AN_MEMCPY && o->ckind == AN_CK_D2H)
      L->d[L->nd++] = v;
  }
  L->nk = an_union(L->k, L->nk);
  L->nh = an_union(L->h, L->nh);
  L->nd = an_union(L->d, L->nd);
  L->na = an_union(L->a, L->na);
}

static void free_lists(lists *L) {
  free(L->k);
  free(L->h);
  free(L->d);
  free(L->a);
}

static void fill_xfer(an_xfer *x, const an_iv *v, size_t n, const lists *L) {
  x->time = an_total(v, n);
  x->hidden = an_intersect(v, n, L->k, L->nk);
  x->exposed = x->time - x->hidden;
}

static void device_figures(const ctx *c, int dev, int64_t w0, int64_t w1, int windowed,
                           an_dev *out) {
  const an_trace *t = c->t;
  memset(out, 0, sizeof *out);
  out->dev = dev;
  lists L;
  build_lists(t, dev, w0, w1, &L);
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  size_t lo, hi;
  an_op_range(t, w0, w1, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != dev || o->e < w0 || o->s >= w1) continue;
    int64_t s = o->s > w0 ? o->s : w0, e = o->e < w1 ? o->e : w1;
    if (s < t0) t0 = s;
    if (e > t1) t1 = e;
    if (o->type == AN_KERNEL) out->kernels++;
    if (o->type == AN_MEMCPY) {
      an_xfer *x = o->ckind == AN_CK_H2D ? &out->h2d : o->ckind == AN_CK_D2H ? &out->d2h : NULL;
      if (x) x->copies++, x->bytes += o->bytes, x->has = 1;
      if ((o->srck == AN_MK_PAGEABLE || o->dstk == AN_MK_PAGEABLE) &&
          o->bytes >= (uint64_t)(an_rule_get("pageable_min_kib") * 1024)) {
        out->pg_copies++;
        out->pg_bytes += o->bytes;
        an_sat_add(&out->pg_time, e - s);
        an_sat_add(&out->pg_host, host_time_of(c, o->corr));
      }
    }
  }
  if (windowed) t0 = w0, t1 = w1;
  if (t0 > t1) t0 = t1 = 0;
  out->t0 = t0;
  out->t1 = t1;
  out->span = t1 - t0;
  out->busy = an_total(L.a, L.na);
  out->kernel = an_total(L.k, L.nk);
  out->idle = out->span - out->busy;
  fill_xfer(&out->h2d, L.h, L.nh, &L);
  fill_xfer(&out->d2h, L.d, L.nd, &L);
  int nb = (int)an_rule_get("buckets");
  out->nbuckets = nb;
  for (int b = 0; b < nb && out->span > 0; b++) {
    int64_t bs = t0 + (int64_t)((double)out->span * b / nb),
            be = t0 + (int64_t)((double)out->span * (b + 1) / nb);
    if (b == nb - 1) be = t1;
    out->util[b] = be > bs ? (double)an_cover(L.a, L.na, bs, be) / (double)(be - bs) : 0;
  }
  free_lists(&L);
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

static int cmp_exposed(const void *a, const void *b) {
  const an_exposed *x = a, *y = b;
  return x->dur < y->dur ? 1 : x->dur > y->dur ? -1 : 0;
}
static int cmp_gap(const void *a, const void *b) {
  const an_gap *x = a, *y = b;
  int64_t lx = x->e - x->s, ly = y->e - y->s;
  return lx < ly ? 1 : lx > ly ? -1 : 0;
}

static void add_finding(an_report *r, const char *rule, const char *sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_finding(an_report *r, const char *rule, const char *sev, const char *fmt, ...) {
  if (r->nfindings >= 16) return;
  an_finding *f = &r->findings[r->nfindings++];
  f->rule = rule;
  f->severity = sev;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
}

/* The steps to report: GPU-side ProfilerStep windows when the trace has them, else host-side. */
static size_t pick_steps(const an_trace *t, an_step *out) {
  int gpu = 0;
  for (size_t i = 0; i < t->nsteps; i++)
    gpu |= t->steps[i].gpu;
  size_t n = 0;
  for (size_t i = 0; i < t->nsteps; i++) {
    if (t->steps[i].gpu != gpu) continue;
    int dup = 0;
    for (size_t k = 0; k < n; k++)
      dup |= out[k].num == t->steps[i].num;
    if (!dup) out[n++] = t->steps[i];
  }
  return n;
}

an_report *an_analyze(const an_trace *t, int only_step) {
  an_report *r = calloc(1, sizeof *r);
  r->t = t;
  ctx *c = make_ctx(t);
  int *ids;
  r->ndevs = device_ids(t, &ids);
  an_step *steps = malloc((t->nsteps + 1) * sizeof *steps);
  size_t nsteps = pick_steps(t, steps);
  int64_t w0 = INT64_MIN, w1 = INT64_MAX;
  if (only_step >= 0) {
    size_t k = 0;
    while (k < nsteps && steps[k].num != only_step)
      k++;
    if (k == nsteps) {
      free(ids), free(steps), free_ctx(c), free(r);
      return NULL;
    }
    w0 = steps[k].s, w1 = steps[k].e;
    steps[0] = steps[k];
    nsteps = 1;
  }
  int windowed = only_step >= 0;
  r->devs = calloc((size_t)r->ndevs + 1, sizeof *r->devs);
  for (int i = 0; i < r->ndevs; i++)
    device_figures(c, ids[i], w0, w1, windowed, &r->devs[i]);
  /* host syncs */
  for (size_t i = 0; i < t->ncalls; i++) {
    const an_call *k = &t->calls[i];
    if (k->e <= w0 || k->s >= w1) continue;
    int64_t d = k->e - k->s;
    r->api_calls[k->api]++;
    an_sat_add(&r->api_time[k->api], d);
    if (k->api == AN_API_STREAM_SYNC || k->api == AN_API_DEVICE_SYNC ||
        k->api == AN_API_EVENT_SYNC) {
      r->sync_calls++;
      an_sat_add(&r->sync_time, d);
      if (d > r->sync_longest) r->sync_longest = d;
    }
  }
  /* gaps and exposed copies, per device */
  int64_t gap_min = (int64_t)(an_rule_get("gap_ms") * 1e6);
  int64_t exp_min = (int64_t)(an_rule_get("exposed_min_us") * 1e3);
  double exp_hidden = an_rule_get("exposed_max_hidden_pct") / 100.0;
  size_t capg = 64, cape = 64;
  r->gaps = malloc(capg * sizeof *r->gaps);
  r->exposed = malloc(cape * sizeof *r->exposed);
  uint64_t elig_min = (uint64_t)(an_rule_get("eligible_min_kib") * 1024);
  an_whatif *w = &r->whatif;
  for (int i = 0; i < r->ndevs; i++) {
    lists L;
    build_lists(t, ids[i], w0, w1, &L);
    for (size_t g = 1; g < L.na; g++)
      if (L.a[g].s - L.a[g - 1].e >= gap_min && gap_min > 0) {
        if (r->ngaps == capg) r->gaps = realloc(r->gaps, (capg *= 2) * sizeof *r->gaps);
        r->gaps[r->ngaps++] = (an_gap){ids[i], L.a[g - 1].e, L.a[g].s};
      }
    for (size_t k = 0; k < t->nops; k++) {
      const an_op *o = &t->ops[k];
      if (o->dev != ids[i] || o->type != AN_MEMCPY || o->e <= w0 || o->s >= w1) continue;
      int64_t dur = o->e - o->s;
      int64_t hid = an_cover(L.k, L.nk, o->s, o->e);
      double hf = dur > 0 ? (double)hid / (double)dur : 1.0;
      if (dur > exp_min && hf <= exp_hidden) {
        if (r->nexposed == cape) r->exposed = realloc(r->exposed, (cape *= 2) * sizeof *r->exposed);
        r->exposed[r->nexposed++] =
            (an_exposed){ids[i], o->stream, o->s, dur, hf, o->bytes, o->ckind, o->srck, o->dstk};
      }
      if (o->ckind == AN_CK_H2D && o->srck == AN_MK_PAGEABLE && o->dstk == AN_MK_DEVICE &&
          o->bytes >= elig_min) {
        w->copies++;
        w->bytes += o->bytes;
        an_sat_add(&w->exposed, dur - hid);
        an_sat_add(&w->host, host_time_of(c, o->corr));
      }
    }
    free_lists(&L);
  }
  qsort(r->gaps, r->ngaps, sizeof *r->gaps, cmp_gap);
  qsort(r->exposed, r->nexposed, sizeof *r->exposed, cmp_exposed);
  /* steps */
  r->steps = calloc(nsteps + 1, sizeof *r->steps);
  for (size_t k = 0; k < nsteps; k++) {
    r->steps[k].num = steps[k].num;
    r->steps[k].ndevs = r->ndevs;
    r->steps[k].devs = calloc((size_t)r->ndevs + 1, sizeof(an_dev));
    for (int i = 0; i < r->ndevs; i++)
      device_figures(c, ids[i], steps[k].s, steps[k].e, 1, &r->steps[k].devs[i]);
  }
  r->nsteps = nsteps;
  /* what-if, per step */
  w->steps = nsteps ? (int)nsteps : 1;
  double rate = an_rule_get("d2d_gbps");
  double d2d = rate > 0 ? (double)w->bytes / rate : 0; /* bytes / (GB/s) = ns */
  w->d2d = d2d < 9e18 ? (int64_t)d2d : INT64_MAX;
  int64_t gain = (w->exposed > w->host ? w->exposed : w->host) - w->d2d;
  w->saving = (gain > 0 ? gain : 0) / w->steps;
  w->exposed /= w->steps;
  w->host /= w->steps;
  w->d2d /= w->steps;
  /* findings */
  uint64_t pg = 0, pgb = 0;
  int64_t pgh = 0, span = 0;
  for (int i = 0; i < r->ndevs; i++) {
    pg += r->devs[i].pg_copies, pgb += r->devs[i].pg_bytes, an_sat_add(&pgh, r->devs[i].pg_host);
    if (r->devs[i].span > span) span = r->devs[i].span;
  }
  if (pg)
    add_finding(
        r, "pageable_copies", "warning",
        "%llu copies from or to pageable host memory (%.1f MiB) blocked the host %.3f ms; run "
        "under pinwheel (or pin the memory) to stage them",
        (unsigned long long)pg, (double)pgb / 1048576.0, (double)pgh / 1e6);
  if (r->nexposed)
    add_finding(
        r, "exposed_transfers", "warning",
        "%zu copies longer than %.0f us ran with at most %.0f %% of their time under compute; "
        "the longest: %.3f ms (%.1f %% hidden)",
        r->nexposed, an_rule_get("exposed_min_us"), an_rule_get("exposed_max_hidden_pct"),
        (double)r->exposed[0].dur / 1e6, r->exposed[0].hidden * 100);
  if (span > 0 && (r->sync_time * 100.0 / (double)span >= an_rule_get("sync_share_pct") ||
                   r->sync_longest >= (int64_t)(an_rule_get("sync_longest_ms") * 1e6)))
    add_finding(r, "sync_stalls", "info",
                "the host waited %.3f ms in %llu sync calls (%.1f %% of the span; longest %.3f ms)",
                (double)r->sync_time / 1e6, (unsigned long long)r->sync_calls,
                span ? r->sync_time * 100.0 / (double)span : 0.0, (double)r->sync_longest / 1e6);
  if (r->ngaps) {
    int64_t tot = 0;
    for (size_t g = 0; g < r->ngaps; g++)
      an_sat_add(&tot, r->gaps[g].e - r->gaps[g].s);
    add_finding(r, "gpu_gaps", "info",
                "%zu GPU idle gaps of at least %.3g ms, %.3f ms in all; the longest %.3f ms",
                r->ngaps, an_rule_get("gap_ms"), (double)tot / 1e6,
                (double)(r->gaps[0].e - r->gaps[0].s) / 1e6);
  }
  for (int i = 0; i < r->ndevs; i++) {
    int low = 0;
    for (int b = 0; b < r->devs[i].nbuckets; b++)
      low += r->devs[i].util[b] * 100 < an_rule_get("low_util_pct");
    if (low)
      add_finding(r, "low_utilization", "info",
                  "device %d: %d of %d time buckets below %.0f %% busy", r->devs[i].dev, low,
                  r->devs[i].nbuckets, an_rule_get("low_util_pct"));
  }
  if (w->copies)
    add_finding(
        r, "what_if_pinwheel", "info",
        "pinwheel could save about %.3f ms per %s: %llu eligible pageable H2D copies (%.1f MiB) "
        "expose %.3f ms and block the host %.3f ms per %s; their device-to-device "
        "replacement costs %.3f ms",
        (double)w->saving / 1e6, nsteps ? "step" : "trace", (unsigned long long)w->copies,
        (double)w->bytes / 1048576.0, (double)w->exposed / 1e6, (double)w->host / 1e6,
        nsteps ? "step" : "trace", (double)w->d2d / 1e6);
  free(ids);
  free(steps);
  free_ctx(c);
  return r;
}

void an_report_free(an_report *r) {
  if (!r) return;
  for (size_t k = 0; k < r->nsteps; k++)
    free(r->steps[k].devs);
  free(r->steps);
  free(r->devs);
  free(r->gaps);
  free(r->exposed);
  free(r);
}

/* The merged kernel intervals of one device (for the timeline's hidden/exposed marking). */
an_iv *an_kernel_union(const an_trace *t, int dev, size_t *n) {
  an_iv *k = malloc((t->nops + 1) * sizeof *k);
  size_t m = 0;
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].dev == dev && t->ops[i].type == AN_KERNEL)
      k[m++] = (an_iv){t->ops[i].s, t->ops[i].e};
  *n = an_union(k, m);
  return k;
}
