/* an_whatif.c — the what-if pass: from a trace of a program without pinwheel, its step time
 * under pinwheel (defaults, and with PINWHEEL_SYNC=elide), per device.
 *
 * The model, per step (the whole trace is one step when it has no step ranges):
 * - the host's step time H is the step's CPU range; the GPU's is B, the union of the step's
 *   operations on the device;
 * - each eligible pageable H2D copy (at least eligible_min_kib) stops blocking the host for its
 *   call's duration and blocks it instead for bytes / h2d_gbps (the staging memcpy, and the DMA
 *   the program's sync then waits for; h2d_elide_gbps with elision, where the sync that directly
 *   follows the copy on its thread is gone too); on the GPU its DMA leaves the step's stream and
 *   a device-to-device copy at d2d_gbps takes its place;
 * - each eligible D2H copy into pageable memory still waits for the GPU work before it (the time
 *   from its call to its DMA), then blocks the host for bytes / d2h_gbps; on the GPU its DMA
 *   runs at link_gbps;
 * - the GPU starvation a blocking copy causes (the GPU idles until the host launches again) is
 *   in H, and goes with the copy's host time;
 * - the step then takes max(H', B'): host-bound or GPU-bound.
 * Reported: the medians over steps, and the assumptions with their values (the thresholds table).
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

/* The sync on the same thread that directly follows a copy call (within 50 us), if any. */
static const an_call *sync_after(const an_trace *t, const an_call *c) {
  size_t lo = 0, hi = t->ncalls; /* calls are sorted by start */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->calls[mid].s < c->e)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < t->ncalls && t->calls[i].s - c->e <= 50000; i++)
    if (t->calls[i].tid == c->tid) {
      return t->calls[i].api == AN_API_STREAM_SYNC ? &t->calls[i] : NULL;
    }
  return NULL;
}

static int64_t rate_ns(uint64_t bytes, double gbps) { /* bytes / (GB/s) = ns */
  double v = (double)bytes / gbps;
  return v < 9e18 ? (int64_t)v : INT64_MAX / 4;
}

void an_pass_whatif(an_report *r) {
  const an_trace *t = r->t;
  r->whatif = calloc((size_t)r->ndevs + 1, sizeof *r->whatif);
  size_t ns = r->nsteps ? r->nsteps : 1;
  int64_t *base = malloc(ns * sizeof *base), *pred = malloc(ns * sizeof *pred),
          *prede = malloc(ns * sizeof *prede), *host = malloc(ns * sizeof *host),
          *gpu = malloc(ns * sizeof *gpu), *ch = malloc(ns * sizeof *ch),
          *gp = malloc(ns * sizeof *gp);
  int64_t *hp = calloc(ns, sizeof *hp), *he = calloc(ns, sizeof *he), *g = calloc(ns, sizeof *g),
          *cph = calloc(ns, sizeof *cph);
  uint64_t *cc = calloc(ns, sizeof *cc), *cb = calloc(ns, sizeof *cb), *dc = calloc(ns, sizeof *dc),
           *db = calloc(ns, sizeof *db);
  uint64_t elig = (uint64_t)(an_th(AN_R_ELIGIBLE_MIN_KIB) * 1024);
  double r_h2d = an_th(AN_R_H2D_GBPS), r_h2de = an_th(AN_R_H2D_ELIDE_GBPS),
         r_d2h = an_th(AN_R_D2H_GBPS), r_link = an_th(AN_R_LINK_GBPS), r_d2d = an_th(AN_R_D2D_GBPS);
  for (int i = 0; i < r->ndevs; i++) {
    an_whatif *w = &r->whatif[i];
    int dev = r->devs[i].dev;
    w->dev = dev;
    memset(hp, 0, ns * sizeof *hp), memset(he, 0, ns * sizeof *he), memset(g, 0, ns * sizeof *g);
    memset(cph, 0, ns * sizeof *cph);
    memset(cc, 0, ns * sizeof *cc), memset(cb, 0, ns * sizeof *cb);
    memset(dc, 0, ns * sizeof *dc), memset(db, 0, ns * sizeof *db);
    /* the copies' changes, per step */
    for (size_t k = 0; k < t->nops; k++) {
      const an_op *o = &t->ops[k];
      if (o->dev != dev || o->type != AN_MEMCPY || o->bytes < elig) continue;
      long st = r->nsteps ? r->op_step[k] : 0;
      if (st < 0 || (size_t)st >= ns) continue;
      int h2d = o->ckind == AN_CK_H2D && o->srck == AN_MK_PAGEABLE && o->dstk == AN_MK_DEVICE;
      int d2h = o->ckind == AN_CK_D2H && o->srck == AN_MK_DEVICE && o->dstk == AN_MK_PAGEABLE;
      if (!h2d && !d2h) continue;
      const an_call *c = an_call_of(t, o->corr);
      if (!c) continue; /* host time unknown: not modelled */
      int64_t dur = c->e - c->s, dma = o->e - o->s;
      an_sat_add(&cph[st], dur);
      if (h2d) {
        cc[st]++, cb[st] += o->bytes;
        hp[st] += rate_ns(o->bytes, r_h2d) - dur;
        he[st] += rate_ns(o->bytes, r_h2de) - dur;
        const an_call *sy = sync_after(t, c);
        if (sy) he[st] -= sy->e - sy->s;
        g[st] += rate_ns(o->bytes, r_d2d) - dma;
      } else {
        dc[st]++, db[st] += o->bytes;
        int64_t wait = o->s > c->s ? o->s - c->s : 0;
        if (wait > dur) wait = dur;
        hp[st] += wait + rate_ns(o->bytes, r_d2h) - dur;
        he[st] += wait + rate_ns(o->bytes, r_d2h) - dur;
        g[st] += rate_ns(o->bytes, r_link) - dma;
      }
    }
    size_t n = 0;
    for (size_t k = 0; k < ns; k++) {
      int64_t H, B, base_k;
      if (r->nsteps) {
        const an_stepdev *sd = &r->steps[k].devs[i];
        if (!sd->has) continue;
        H = r->steps[k].cpu_e - r->steps[k].cpu_s;
        base_k = sd->gpu;
        B = sd->busy;
      } else {
        H = base_k = r->devs[i].span;
        B = r->devs[i].busy;
      }
      int64_t Hp = H + hp[k], He = H + he[k], G = B + g[k];
      if (Hp < 0) Hp = 0;
      if (He < 0) He = 0;
      if (G < 0) G = 0;
      base[n] = base_k, host[n] = H, gpu[n] = B, ch[n] = cph[k], gp[n] = G;
      pred[n] = Hp > G ? Hp : G;
      prede[n] = He > G ? He : G;
      w->copies += cc[k], w->bytes += cb[k], w->d2h_copies += dc[k], w->d2h_bytes += db[k];
      n++;
    }
    w->steps = (int)n;
    if (!n) continue;
    w->baseline = an_median(base, n);
    w->host = an_median(host, n);
    w->gpu = an_median(gpu, n);
    w->copy_host = an_median(ch, n);
    w->predicted = an_median(pred, n);
    w->predicted_elide = an_median(prede, n);
    /* GPU-bound when the predicted step is (within 1 %) its predicted GPU part */
    int64_t g_med = an_median(gp, n);
    w->bound = g_med >= w->predicted - w->predicted / 100;
  }
  free(base), free(pred), free(prede), free(host), free(gpu), free(ch), free(gp);
  free(hp), free(he), free(g), free(cph), free(cc), free(cb), free(dc), free(db);
}
