/* an_steps.c — the steps pass: which GPU work belongs to which step, and the per-step figures.
 *
 * Owns DESIGN.md §5's step definition: a step's GPU work is every GPU operation whose runtime
 * call (joined by correlation id) started inside the step's CPU range, on any host thread (the
 * backward pass is launched from PyTorch's autograd thread).  Per step and device:
 * gpu_step = end of the step's last operation − end of the previous step's last operation (first
 * step: − its own first operation's start); the step's H2D / D2H time and their hidden part
 * against all kernels of the device (a prefetch issued in step N hides under step N−1's kernels).
 * Must never: call another pass, or print; it reads the steps the trace marks or the inference
 * pass found, and the staged copies the attribution pass found.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

/* The step whose CPU range holds time ts, or -1.  Steps are sorted by start. */
static int64_t step_start(const void *ctx, size_t i) {
  return ((const an_step *)ctx)[i].s;
}

static long step_at(const an_step *steps, size_t nst, int64_t ts) {
  size_t lo = an_upper_bound(0, nst, ts, step_start, steps); /* first step starting after ts */
  if (lo == 0) return -1;
  return ts < steps[lo - 1].e ? (long)lo - 1 : -1;
}

static void xfer_of(an_xfer *x, an_iv *v, size_t n, const an_iv *k, size_t nk) {
  n = an_union(v, n);
  x->time = an_total(v, n);
  /* a step's few copies against all kernels of the device: a binary search per copy, not a
   * walk through the whole kernel list per step */
  x->hidden = 0;
  for (size_t i = 0; i < n; i++)
    x->hidden += an_cover(k, nk, v[i].s, v[i].e);
  x->exposed = x->time - x->hidden;
}

static void fill_stepsum(an_report *r) {
  size_t ns = r->nsteps;
  int64_t *a = malloc((ns + 1) * sizeof *a), *b = malloc((ns + 1) * sizeof *b),
          *c = malloc((ns + 1) * sizeof *c), *d = malloc((ns + 1) * sizeof *d),
          *h = malloc((ns + 1) * sizeof *h);
  for (int i = 0; i < r->ndevs; i++) {
    an_stepsum *s = &r->stepsum[i];
    memset(s, 0, sizeof *s);
    s->dev = r->devs[i].dev;
    size_t n = 0, nh = 0;
    for (size_t k = 0; k < ns; k++) {
      const an_stepdev *sd = &r->steps[k].devs[i];
      if (!sd->has) continue;
      a[n] = sd->gpu, c[n] = sd->h2d.time, d[n] = sd->h2d.exposed, h[n] = sd->pg_host;
      if (sd->h2d.time > 0) /* hidden fraction in parts per billion, to share the median */
        b[nh++] = (int64_t)((double)sd->h2d.hidden / (double)sd->h2d.time * 1e9);
      n++;
    }
    s->n = (int)n;
    int64_t *a2 = malloc((n + 1) * sizeof *a2);
    memcpy(a2, a, n * sizeof *a);
    s->step_med = an_median(a, n);
    s->step_p95 = an_p95(a2, n);
    free(a2);
    s->h2d_med = an_median(c, n);
    s->exposed_med = an_median(d, n);
    s->pg_host_med = an_median(h, n);
    s->hidden_med = nh ? (double)an_median(b, nh) / 1e9 : -1;
  }
  free(a), free(b), free(c), free(d), free(h);
}

/* Scratch interval lists for one step on one device: its H2D and D2H copies, kernels, all. */
typedef struct step_lists {
  an_iv *h, *dd, *kk, *aa;
} step_lists;

/* One step on device i: its operations ops[0..n) (indices into the trace, the step's, in start
 * order); *prev: the end of the device's previous step, INT64_MIN before the first. */
static void step_device(an_report *r, int i, const size_t *ops, size_t n, step_lists *L,
                        int64_t *prev, an_stepdev *sd) {
  const an_trace *t = r->t;
  uint64_t pg_min = (uint64_t)(an_threshold_value(AN_T_PAGEABLE_MIN_KIB) * 1024);
  sd->dev = r->devs[i].dev;
  size_t nh = 0, nd = 0, nk = 0, na = 0;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t j = 0; j < n; j++) {
    const an_op *o = &t->ops[ops[j]];
    if (o->dev != sd->dev) continue;
    sd->has = 1;
    L->aa[na++] = (an_iv){o->s, o->e};
    if (o->s < first) first = o->s;
    if (o->e > last) last = o->e;
    if (o->type == AN_KERNEL) sd->kernels++, L->kk[nk++] = (an_iv){o->s, o->e};
    if (o->type != AN_MEMCPY) continue;
    uint64_t b;
    int counted = an_pw_counts(r, ops[j], &b); /* a staged copy counts once */
    int staged = r->staged_role && r->staged_role[ops[j]];
    uint8_t ck = staged ? r->pw[r->staged_group[ops[j]]].dir : o->ckind;
    an_xfer *x = ck == AN_CK_H2D ? &sd->h2d : ck == AN_CK_D2H ? &sd->d2h : NULL;
    if (x && counted) x->copies++, x->bytes += b, x->has = 1;
    if (o->ckind == AN_CK_H2D)
      L->h[nh++] = (an_iv){o->s, o->e}, sd->h2d.has = 1;
    else if (o->ckind == AN_CK_D2H)
      L->dd[nd++] = (an_iv){o->s, o->e}, sd->d2h.has = 1;
    if ((o->srck == AN_MK_PAGEABLE || o->dstk == AN_MK_PAGEABLE) && o->bytes >= pg_min) {
      const an_call *c = an_call_of(t, o->corr);
      sd->pg_copies++;
      if (c)
        an_sat_add(&sd->pg_host, c->e - c->s);
      else
        sd->pg_unknown++;
    }
  }
  if (!sd->has) return;
  xfer_of(&sd->h2d, L->h, nh, r->kernel_union[i], r->nkernel_union[i]);
  xfer_of(&sd->d2h, L->dd, nd, r->kernel_union[i], r->nkernel_union[i]);
  nk = an_union(L->kk, nk);
  sd->kernel_time = an_total(L->kk, nk);
  na = an_union(L->aa, na);
  sd->busy = an_total(L->aa, na);
  sd->first = first;
  sd->last = last;
  sd->gpu = last - (*prev != INT64_MIN ? *prev : first);
  *prev = last;
}

/* Each step on each device, from the operations joined to it (op_step); cnt: where each step's
 * operations start in that order, as counted by an_pass_steps. */
static void fill_steps(an_report *r, const an_step *cs, size_t nst, size_t *cnt) {
  const an_trace *t = r->t;
  for (size_t k = 0; k < nst; k++)
    cnt[k + 1] += cnt[k];
  size_t *order = malloc((cnt[nst] + 1) * sizeof *order), *fill = calloc(nst + 1, sizeof *fill),
         maxn = 0;
  for (size_t i = 0; i < t->nops; i++)
    if (r->op_step[i] >= 0) {
      size_t k = (size_t)r->op_step[i];
      order[cnt[k] + fill[k]++] = i;
    }
  for (size_t k = 0; k < nst; k++)
    if (cnt[k + 1] - cnt[k] > maxn) maxn = cnt[k + 1] - cnt[k];
  step_lists L = {malloc((maxn + 1) * sizeof(an_iv)), malloc((maxn + 1) * sizeof(an_iv)),
                  malloc((maxn + 1) * sizeof(an_iv)), malloc((maxn + 1) * sizeof(an_iv))};
  int64_t *prev = malloc(((size_t)r->ndevs + 1) * sizeof *prev);
  for (int i = 0; i < r->ndevs; i++)
    prev[i] = INT64_MIN;
  for (size_t k = 0; k < nst; k++) {
    struct an_stepfig *sf = &r->steps[k];
    sf->num = cs[k].num;
    sf->cpu_s = cs[k].s;
    sf->cpu_e = cs[k].e;
    sf->ndevs = r->ndevs;
    sf->devs = calloc((size_t)r->ndevs + 1, sizeof *sf->devs);
    for (int i = 0; i < r->ndevs; i++) {
      step_device(r, i, &order[cnt[k]], cnt[k + 1] - cnt[k], &L, &prev[i], &sf->devs[i]);
      if (sf->devs[i].has && sf->devs[i].gpu > sf->gpu) sf->gpu = sf->devs[i].gpu;
    }
  }
  free(prev), free(L.h), free(L.dd), free(L.kk), free(L.aa), free(order), free(fill);
}

void an_pass_steps(an_report *r) {
  const an_trace *t = r->t;
  /* the trace's marked steps, or the ones the inference pass found */
  const an_step *cs = r->step_src == AN_STEPS_INFERRED ? r->isteps : t->steps;
  size_t nst = r->step_src == AN_STEPS_INFERRED ? r->nisteps : t->nsteps;
  r->op_step = malloc((t->nops + 1) * sizeof *r->op_step);
  r->stepsum = calloc((size_t)r->ndevs + 1, sizeof *r->stepsum);
  size_t *cnt = calloc(nst + 2, sizeof *cnt);
  for (size_t i = 0; i < t->nops; i++) {
    const an_call *c = an_call_of(t, t->ops[i].corr);
    long k = c ? step_at(cs, nst, c->s) : -1;
    r->op_step[i] = (int32_t)k;
    if (k >= 0) cnt[k + 1]++;
  }
  r->nsteps = nst;
  r->steps = calloc(nst + 1, sizeof *r->steps);
  /* every device's kernel union, once: the steps, the copies' hidden % and the timeline use it */
  r->kernel_union = calloc((size_t)r->ndevs + 1, sizeof *r->kernel_union);
  r->nkernel_union = calloc((size_t)r->ndevs + 1, sizeof *r->nkernel_union);
  for (int i = 0; i < r->ndevs; i++)
    r->kernel_union[i] = an_kernel_union(t, r->devs[i].dev, &r->nkernel_union[i]);
  if (nst) {
    fill_steps(r, cs, nst, cnt);
    fill_stepsum(r);
  }
  free(cnt);
}

int an_step_window(const struct an_stepfig *sf, int64_t *w0, int64_t *w1) {
  int64_t a = INT64_MAX, b = INT64_MIN;
  for (int i = 0; i < sf->ndevs; i++) {
    const an_stepdev *sd = &sf->devs[i];
    if (!sd->has) continue;
    int64_t s = sd->last - sd->gpu < sd->first ? sd->last - sd->gpu : sd->first;
    if (s < a) a = s;
    if (sd->last > b) b = sd->last;
  }
  if (a > b) return 0;
  *w0 = a, *w1 = b;
  return 1;
}

const an_iv *an_dev_kernels(const an_report *r, int dev, size_t *n) {
  for (int i = 0; i < r->ndevs; i++)
    if (r->devs[i].dev == dev) return *n = r->nkernel_union[i], r->kernel_union[i];
  *n = 0;
  return NULL;
}

/* Zoom to one step: keep only it; *w0, *w1 = its GPU window (from the previous step's last
 * operation, or its own first, to its last).  Returns -1 if there is no such step. */
int an_steps_zoom(an_report *r, int num, int64_t *w0, int64_t *w1) {
  size_t k = 0;
  while (k < r->nsteps && r->steps[k].num != num)
    k++;
  if (k == r->nsteps) return -1;
  if (!an_step_window(&r->steps[k], w0, w1)) /* a step without GPU work: its CPU range */
    *w0 = r->steps[k].cpu_s, *w1 = r->steps[k].cpu_e;
  for (size_t j = 0; j < r->nsteps; j++)
    if (j != k) free(r->steps[j].devs);
  for (size_t i = 0; i < r->t->nops; i++)
    r->op_step[i] = r->op_step[i] == (int32_t)k ? 0 : -1;
  r->steps[0] = r->steps[k];
  r->nsteps = 1;
  fill_stepsum(r);
  return 0;
}
