/* an_figures.c — the figures pass of DESIGN.md §5.
 *
 * Owns: the definitions (K, H, D, A unions per device; overlap = |H ∩ K| / |H|; exposed = |H \ K|;
 * busy = |A| / span; hidden % per copy), where idle time goes, the kernel table and the other
 * operation classes, over a window (the steady state, a step, or the whole trace); the totals
 * over all devices (the headline's, the rank row), the longest copies of the whole trace, and
 * each exposed or long copy's host time (its runtime call's), which the writers print.
 * K never holds communication kernels.
 * Must never: call another pass (an_analyze runs them in order), or print.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

static void device_figures(const an_report *r, int dev, int64_t w0, int64_t w1, int windowed,
                           an_dev *out, an_opclass *cls) {
  const an_trace *t = r->t;
  memset(out, 0, sizeof *out);
  out->dev = dev;
  lists L;
  build_lists(t, dev, w0, w1, &L);
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  size_t lo, hi;
  an_op_range(t, w0, w1, &lo, &hi);
  uint64_t pg_min = (uint64_t)(an_threshold_value(AN_T_PAGEABLE_MIN_KIB) * 1024);
  for (size_t i = lo; i < hi; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != dev || o->e < w0 || o->s >= w1) continue;
    int64_t s = o->s > w0 ? o->s : w0, e = o->e < w1 ? o->e : w1;
    if (s < t0) t0 = s;
    if (e > t1) t1 = e;
    int c = -1;
    if (o->type == AN_KERNEL) out->kernels++;
    if (o->type == AN_COMM) c = AN_OC_COMM;
    if (o->type == AN_MEMSET) c = AN_OC_MEMSET;
    if (o->type == AN_MEMCPY) {
      /* a copy pinwheel staged counts once, as the program's copy (an_pinwheel.c) */
      uint64_t b;
      int cnt = an_pw_counts(r, i, &b);
      int staged = r->staged_role && r->staged_role[i];
      uint8_t ck = staged ? r->pw[r->staged_group[i]].dir : o->ckind;
      an_xfer *x = ck == AN_CK_H2D ? &out->h2d : ck == AN_CK_D2H ? &out->d2h : NULL;
      if (x && o->ckind != AN_CK_D2D) x->has = 1;
      if (x && cnt) x->copies++, x->bytes += b, x->has = 1;
      if (o->ckind == AN_CK_D2D && !staged) c = AN_OC_D2D;
      if (o->ckind == AN_CK_P2P) c = AN_OC_P2P;
      /* a staged copy's operations are pinwheel's (pinned or device memory): never pageable */
      if (!staged && (o->srck == AN_MK_PAGEABLE || o->dstk == AN_MK_PAGEABLE) &&
          o->bytes >= pg_min) {
        const an_call *k = an_call_of(t, o->corr);
        out->pg_copies++;
        out->pg_bytes += o->bytes;
        an_sat_add(&out->pg_time, e - s);
        if (k)
          an_sat_add(&out->pg_host, k->e - k->s);
        else
          out->pg_unknown++;
      }
    }
    if (c >= 0) cls[c].count++, cls[c].bytes += o->bytes, an_sat_add(&cls[c].time, e - s);
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
  int nb = (int)an_threshold_value(AN_T_BUCKETS);
  out->nbuckets = nb;
  for (int b = 0; b < nb && out->span > 0; b++) {
    int64_t bs = t0 + (int64_t)((double)out->span * b / nb),
            be = t0 + (int64_t)((double)out->span * (b + 1) / nb);
    if (b == nb - 1) be = t1;
    out->util[b] = be > bs ? (double)an_cover(L.a, L.na, bs, be) / (double)(be - bs) : 0;
  }
  free_lists(&L);
}

/* The host time of the runtime call with this correlation id, -1 when there is none. */
static int64_t call_host(const an_trace *t, int64_t corr) {
  const an_call *c = an_call_of(t, corr);
  return c ? c->e - c->s : -1;
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
static int cmp_kstat(const void *a, const void *b) {
  const an_kstat *x = a, *y = b;
  return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* Idle split of one device: every idle stretch [g0, g1) between its operations is host-bound up
 * to the moment the runtime call of the next operation began (nothing was queued: the host was
 * in a sync, a blocking copy or launching), "other" after it (work was queued, yet the GPU
 * waited: a dependency, launch latency); the host-bound part under a blocking memcpy call of
 * any thread is "copy". */
static void idle_split(const an_trace *t, int dev, int64_t w0, int64_t w1, const an_iv *mc,
                       size_t nmc, an_idle *out) {
  memset(out, 0, sizeof *out);
  size_t lo, hi;
  an_op_range(t, w0, w1, &lo, &hi);
  int64_t busy_end = INT64_MIN; /* end of the union of the device's ops so far */
  for (size_t i = lo; i < hi; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != dev || o->e <= w0 || o->s >= w1) continue;
    int64_t s = o->s > w0 ? o->s : w0, e = o->e < w1 ? o->e : w1;
    if (busy_end != INT64_MIN && s > busy_end) {
      int64_t g0 = busy_end, g1 = s;
      const an_call *c = an_call_of(t, o->corr);
      int64_t hb = c ? (c->s < g0 ? g0 : c->s > g1 ? g1 : c->s) : g0;
      int64_t cp = an_cover(mc, nmc, g0, hb);
      out->copy += cp;
      out->host += hb - g0 - cp;
      out->other += g1 - hb;
    }
    if (e > busy_end) busy_end = e;
  }
}

/* Host calls in the window: the program's syncs and calls by API (pinwheel's own syncs apart),
 * and the idle split, which needs the memcpy calls idle time may wait on. */
static void host_calls(an_report *r, int64_t w0, int64_t w1) {
  const an_trace *t = r->t;
  an_iv *mc = malloc((t->ncalls + 1) * sizeof *mc);
  size_t nmc = 0;
  for (size_t i = 0; i < t->ncalls; i++) {
    const an_call *k = &t->calls[i];
    if (k->e <= w0 || k->s >= w1) continue;
    /* pinwheel's own calls (its event syncs while it waits for staging space, the DMA chunks'
     * copies) run inside the program's staged copy, whose host time already holds them.  Found
     * by pattern (no program call in the trace: pinwheel replaced it), its copies stand for the
     * program's, but its syncs are still not the program's. */
    int sync =
        k->api == AN_API_STREAM_SYNC || k->api == AN_API_DEVICE_SYNC || k->api == AN_API_EVENT_SYNC;
    if (sync &&
        (k->pw || (r->staged_call && r->staged_call[i]))) { /* the staged copy's: own line */
      r->pw_sync_calls++;
      an_sat_add(&r->pw_sync_time, k->e - k->s);
      continue;
    }
    if (k->pw) continue;
    int64_t d = k->e - k->s;
    r->api_calls[k->api]++;
    an_sat_add(&r->api_time[k->api], d);
    if (k->api == AN_API_MEMCPY) mc[nmc++] = (an_iv){k->s, k->e};
    if (sync) {
      r->sync_calls++;
      an_sat_add(&r->sync_time, d);
      if (d > r->sync_longest) r->sync_longest = d;
    }
  }
  nmc = an_union(mc, nmc);
  for (int i = 0; i < r->ndevs; i++)
    idle_split(t, r->devs[i].dev, r->devs[i].t0, r->devs[i].t1, mc, nmc, &r->idle[i]);
  free(mc);
}

/* The copies pinwheel staged on a device in the window: counted, their DMA's hidden and hideable
 * parts (against the window's kernels, L), each exposed as a whole when little of it hid. */
static void staged_copies(an_report *r, int dev, int64_t w0, int64_t w1, const lists *L,
                          size_t *cape) {
  const an_trace *t = r->t;
  int64_t exp_min = (int64_t)(an_threshold_value(AN_T_EXPOSED_MIN_US) * 1e3);
  double exp_hidden = an_threshold_value(AN_T_EXPOSED_MAX_HIDDEN_PCT) / 100.0;
  for (size_t g = 0; g < r->npw; g++) {
    an_pwgroup *p = &r->pw[g];
    if (p->dev != dev || p->e <= w0 || p->s >= w1) continue;
    /* the staged copies of the window (the steady state: not those of the start-up) */
    if (p->dir == AN_CK_H2D)
      r->pw_h2d++, r->pw_h2d_bytes += p->bytes;
    else
      r->pw_d2h++, r->pw_d2h_bytes += p->bytes;
    int64_t hid = 0;
    for (size_t k = p->first; k < t->nops && t->ops[k].s <= p->e; k++)
      if (r->staged_role[k] == AN_PW_DMA && r->staged_group[k] == g)
        hid += an_cover(L->k, L->nk, t->ops[k].s, t->ops[k].e);
    if (hid > p->dma_time) hid = p->dma_time; /* DMAs of one copy may overlap each other */
    p->hidden = hid;
    /* The DMAs cannot start before the call that issued the first of them (the program's
     * call in a collector trace, pinwheel's first chunk call in another), nor end later than
     * they did; kernel time in that window bounds what any placement could hide. */
    const an_call *c0 = an_call_of(t, t->ops[p->first].corr);
    int64_t from = c0 && c0->s < p->s ? c0->s : p->s;
    int64_t can = an_cover(L->k, L->nk, from, p->e);
    if (can > p->dma_time) can = p->dma_time;
    if (can < hid) can = hid;
    p->hideable = can;
    if (p->dir == AN_CK_H2D)
      an_sat_add(&r->pw_h2d_dma, p->dma_time), an_sat_add(&r->pw_h2d_hidden, hid),
          an_sat_add(&r->pw_h2d_hideable, can);
    double hf = p->dma_time > 0 ? (double)hid / (double)p->dma_time : 1.0;
    if (p->dma_time > exp_min && hf <= exp_hidden) {
      if (r->nexposed == *cape) r->exposed = realloc(r->exposed, (*cape *= 2) * sizeof *r->exposed);
      int h2d = p->dir == AN_CK_H2D;
      an_exposed x = {.dev = dev,
                      .stream = p->stream,
                      .s = p->s,
                      .dur = p->dma_time,
                      .hidden = hf,
                      .bytes = p->bytes,
                      .ckind = p->dir,
                      .srck = h2d ? AN_MK_PAGEABLE : AN_MK_DEVICE,
                      .dstk = h2d ? AN_MK_DEVICE : AN_MK_PAGEABLE,
                      .corr = t->ops[p->count_op].corr,
                      .host = call_host(t, t->ops[p->count_op].corr),
                      .staged = 1,
                      .hideable = can};
      r->exposed[r->nexposed++] = x;
    }
  }
}

/* The kernel table: totals per (device, name) in the window, the top ones kept. */
static void kernel_table(an_report *r, int64_t w0, int64_t w1) {
  const an_trace *t = r->t;
  size_t nn = t->nnames, nd = (size_t)r->ndevs;
  an_kstat *all = calloc(nn * nd + 1, sizeof *all);
  size_t lo, hi;
  an_op_range(t, w0, w1, &lo, &hi);
  for (size_t k = lo; k < hi; k++) {
    const an_op *o = &t->ops[k];
    if ((o->type != AN_KERNEL && o->type != AN_COMM) || o->e <= w0 || o->s >= w1 || o->name >= nn)
      continue;
    int di = 0;
    while (di < r->ndevs && r->devs[di].dev != o->dev)
      di++;
    an_kstat *ks = &all[(size_t)di * nn + o->name];
    ks->dev = o->dev, ks->name = o->name, ks->type = o->type;
    ks->count++;
    an_sat_add(&ks->total, (o->e < w1 ? o->e : w1) - (o->s > w0 ? o->s : w0));
  }
  size_t m = 0;
  for (size_t k = 0; k < nn * nd; k++)
    if (all[k].count) all[m++] = all[k];
  qsort(all, m, sizeof *all, cmp_kstat);
  r->nkstats = m < 20 ? m : 20;
  r->kstats = realloc(all, (r->nkstats + 1) * sizeof *all);
  for (size_t k = 0; k < r->nkstats; k++) {
    int64_t kt = 0;
    for (int i = 0; i < r->ndevs; i++)
      if (r->devs[i].dev == r->kstats[k].dev) kt = r->devs[i].kernel;
    r->kstats[k].share = an_pct(r->kstats[k].total, kt);
  }
}

static int cmp_op_dur(const void *a, const void *b) {
  const an_op *x = *(const an_op *const *)a, *y = *(const an_op *const *)b;
  int64_t dx = x->e - x->s, dy = y->e - y->s;
  return dx < dy ? 1 : dx > dy ? -1 : 0;
}

/* The longest 100 copies of the whole trace, each with the part of it under its device's
 * kernels (whole trace, whatever the window). */
static void longest_copies(an_report *r) {
  const an_trace *t = r->t;
  size_t nc = 0;
  const an_op **cp = malloc((t->nops + 1) * sizeof *cp);
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].type == AN_MEMCPY) cp[nc++] = &t->ops[i];
  qsort(cp, nc, sizeof *cp, cmp_op_dur);
  r->nlongest = nc < 100 ? nc : 100;
  r->longest = calloc(r->nlongest + 1, sizeof *r->longest);
  for (size_t k = 0; k < r->nlongest; k++) {
    const an_op *o = cp[k];
    size_t nk;
    const an_iv *kernels = an_dev_kernels(r, o->dev, &nk);
    int64_t dur = o->e - o->s, hid = an_cover(kernels, nk, o->s, o->e);
    r->longest[k] = (an_exposed){.dev = o->dev,
                                 .stream = o->stream,
                                 .s = o->s,
                                 .dur = dur,
                                 .hidden = dur > 0 ? (double)hid / (double)dur : 1.0,
                                 .bytes = o->bytes,
                                 .ckind = o->ckind,
                                 .srck = o->srck,
                                 .dstk = o->dstk,
                                 .corr = o->corr,
                                 .host = call_host(t, o->corr),
                                 .staged = r->staged_role && r->staged_role[o - t->ops]};
  }
  free(cp);
}

/* The figures over all devices: the headline's totals and the rank row. */
static void totals(an_report *r) {
  an_totals *x = &r->tot;
  int64_t span = 0, busy = 0, exp = 0;
  for (int i = 0; i < r->ndevs; i++) {
    const an_dev *d = &r->devs[i];
    an_sat_add(&x->h2d_time, d->h2d.time), an_sat_add(&x->h2d_hidden, d->h2d.hidden);
    x->h2d_copies += d->h2d.copies;
    x->pg_copies += d->pg_copies, x->pg_unknown += d->pg_unknown,
        an_sat_add(&x->pg_host, d->pg_host);
    if (d->span > span) span = d->span;
    an_sat_add(&busy, d->busy), an_sat_add(&exp, d->h2d.exposed);
    if (r->stepsum[i].step_med > x->step_med) x->step_med = r->stepsum[i].step_med;
  }
  double v[AN_RANK_COLS] = {an_ms(span),       an_pct(busy, span) / (r->ndevs ? r->ndevs : 1),
                            an_ms(exp),        an_ms(r->sync_time),
                            an_ms(x->pg_host), an_ms(x->step_med),
                            (double)r->npw};
  memcpy(x->rank, v, sizeof v);
}

void an_pass_figures(an_report *r, int64_t w0, int64_t w1) {
  const an_trace *t = r->t;
  int windowed = w0 != INT64_MIN || w1 != INT64_MAX;
  r->classes = calloc((size_t)r->ndevs + 1, sizeof *r->classes);
  r->idle = calloc((size_t)r->ndevs + 1, sizeof *r->idle);
  for (int i = 0; i < r->ndevs; i++)
    device_figures(r, r->devs[i].dev, w0, w1, windowed, &r->devs[i], r->classes[i]);
  host_calls(r, w0, w1);
  /* gaps and exposed copies, per device */
  int64_t gap_min = (int64_t)(an_threshold_value(AN_T_GAP_MS) * 1e6);
  int64_t exp_min = (int64_t)(an_threshold_value(AN_T_EXPOSED_MIN_US) * 1e3);
  double exp_hidden = an_threshold_value(AN_T_EXPOSED_MAX_HIDDEN_PCT) / 100.0;
  size_t capg = 64, cape = 64;
  r->gaps = malloc(capg * sizeof *r->gaps);
  r->exposed = malloc(cape * sizeof *r->exposed);
  for (int i = 0; i < r->ndevs; i++) {
    lists L;
    int dev = r->devs[i].dev;
    build_lists(t, dev, w0, w1, &L);
    for (size_t g = 1; g < L.na; g++)
      if (L.a[g].s - L.a[g - 1].e >= gap_min && gap_min > 0) {
        if (r->ngaps == capg) r->gaps = realloc(r->gaps, (capg *= 2) * sizeof *r->gaps);
        r->gaps[r->ngaps++] = (an_gap){dev, L.a[g - 1].e, L.a[g].s};
      }
    size_t lo, hi;
    an_op_range(t, w0, w1, &lo, &hi);
    for (size_t k = lo; k < hi; k++) {
      const an_op *o = &t->ops[k];
      if (o->dev != dev || o->type != AN_MEMCPY || o->e <= w0 || o->s >= w1) continue;
      if (r->staged_role && r->staged_role[k]) continue; /* staged copies: one row each, below */
      int64_t dur = o->e - o->s;
      int64_t hid = an_cover(L.k, L.nk, o->s, o->e);
      double hf = dur > 0 ? (double)hid / (double)dur : 1.0;
      if (dur > exp_min && hf <= exp_hidden) {
        if (r->nexposed == cape) r->exposed = realloc(r->exposed, (cape *= 2) * sizeof *r->exposed);
        r->exposed[r->nexposed++] = (an_exposed){.dev = dev,
                                                 .stream = o->stream,
                                                 .s = o->s,
                                                 .dur = dur,
                                                 .hidden = hf,
                                                 .bytes = o->bytes,
                                                 .ckind = o->ckind,
                                                 .srck = o->srck,
                                                 .dstk = o->dstk,
                                                 .corr = o->corr,
                                                 .host = call_host(t, o->corr)};
      }
    }
    staged_copies(r, dev, w0, w1, &L, &cape);
    free_lists(&L);
  }
  qsort(r->gaps, r->ngaps, sizeof *r->gaps, cmp_gap);
  qsort(r->exposed, r->nexposed, sizeof *r->exposed, cmp_exposed);
  kernel_table(r, w0, w1);
  longest_copies(r);
  totals(r);
}
