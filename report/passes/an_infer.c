/* an_infer.c — the step-inference pass: a loop's iterations, found in a trace that marks none.
 *
 * Owns: when a trace has no step ranges (no ProfilerStep#N, nothing matched --step-range), the
 * CPU ranges of the program's iterations.  The loop itself is common/pw_loop.h's (the finder the
 * collector's --trace-steps uses too), fed the trace's operations in order: signature (device,
 * stream, type, name, copy kind and bytes), host time (the runtime call), GPU time, whether it is
 * an input copy; with step_period_tol_pct, step_match_pct and step_min.  A step is then [the
 * anchor's runtime call, the next one's); the steps pass joins GPU work to it as it does to a
 * marked step.
 * Must never: change the trace (the steps are the report's), or run when the trace marks steps.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

#include "pw_loop.h"

/* Why not gaps: pauses between inference requests, or inside one, are not iterations; a period
 * tolerance and a sequence match keep an irregular program from being cut into hundreds of
 * steps. */

static uint64_t op_key(const an_op *o) {
  uint64_t h = PW_LOOP_FNV;
  h = pw_loop_mix(h, (uint64_t)(uint32_t)o->dev << 32 | (uint32_t)o->stream);
  h = pw_loop_mix(h, (uint64_t)o->type << 40 | (uint64_t)o->ckind << 32 | o->name);
  return pw_loop_mix(h, o->type == AN_KERNEL || o->type == AN_COMM ? 0 : o->bytes);
}

/* Where an iteration starts on the host: the anchor's runtime call, else the op itself; for a
 * copy pinwheel staged, the call that issued its first DMA (inside the program's copy call). */
static int64_t host_start(const an_report *r, uint32_t i) {
  const an_trace *t = r->t;
  const an_op *o = &t->ops[i];
  if (r->staged_role && r->staged_role[i]) o = &t->ops[r->pw[r->staged_group[i]].first];
  const an_call *c = an_call_of(t, o->corr);
  return c ? c->s : o->s;
}

static int is_h2d(const an_report *r, uint32_t i) {
  const an_op *o = &r->t->ops[i];
  if (r->staged_role && r->staged_role[i]) return r->pw[r->staged_group[i]].dir == AN_CK_H2D;
  return o->type == AN_MEMCPY && o->ckind == AN_CK_H2D;
}

/* The finder's view of the trace's operations.  pinwheel's DMAs and ring copies come when its
 * staging issues them: only the op where a staged copy counts once stands for the program's
 * copy, the others are never anchors. */
static pw_loop_op *loop_ops(const an_report *r) {
  const an_trace *t = r->t;
  pw_loop_op *lo = malloc(t->nops * sizeof *lo);
  for (size_t i = 0; lo && i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    uint64_t bytes;
    lo[i] = (pw_loop_op){(uint64_t)(uint32_t)o->dev << 32 | (uint32_t)o->stream,
                         op_key(o),
                         host_start(r, (uint32_t)i),
                         o->e - o->s,
                         (uint8_t)is_h2d(r, (uint32_t)i),
                         r->staged_role && r->staged_role[i] &&
                             an_pw_counts(r, (uint32_t)i, &bytes) != 2};
  }
  return lo;
}

/* The end of the trailing iteration on the host: the last runtime call of its ops (the first
 * f->tail ops of the anchor's stream from its last occurrence). */
static int64_t trailing_end(const an_trace *t, const pw_loop_found *f) {
  int64_t end = INT64_MIN;
  const an_op *o0 = &t->ops[f->occ[f->nocc - 1]];
  uint32_t seen = 0;
  for (size_t i = f->occ[f->nocc - 1]; i < t->nops && seen < f->tail; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != o0->dev || o->stream != o0->stream) continue;
    seen++;
    const an_call *k = an_call_of(t, o->corr);
    int64_t e = k ? k->e : o->s;
    if (e > end) end = e;
  }
  return end;
}

static int64_t step_start(const void *ctx, size_t i) {
  return ((const an_step *)ctx)[i].s;
}

/* How far into a step its runtime calls that issued GPU work reach, at most over the full steps
 * [0, nfull): the last, trailing step (no next anchor closes it) reaches as far. */
static int64_t step_reach(const an_report *r, const an_step *st, size_t nfull) {
  const an_trace *t = r->t;
  int64_t reach = 0;
  for (size_t i = 0; i < t->nops && nfull; i++) {
    const an_call *c = an_call_of(t, t->ops[i].corr);
    if (!c || c->s < st[0].s || c->s >= st[nfull - 1].e) continue;
    size_t lo = an_upper_bound(0, nfull, c->s, step_start, st) - 1; /* the step holding it */
    if (c->e - st[lo].s > reach) reach = c->e - st[lo].s;
  }
  return reach;
}

/* The steps of the loop found: from each occurrence's call to the next one's, and the trailing
 * iteration when the finder found one. */
static int make_steps(an_report *r, const pw_loop_op *lo, const pw_loop_found *f) {
  size_t nfull = f->nocc - 1, n = nfull + (f->tail > 0);
  if (!(r->isteps = calloc(n + 1, sizeof *r->isteps))) return 0;
  for (size_t j = 0; j < nfull; j++)
    r->isteps[j] = (an_step){lo[f->occ[j]].t, lo[f->occ[j + 1]].t, (int)(j + 1)};
  if (f->tail) {
    /* its calls on other streams than the anchor's (a prefetcher's copy is an anchor on its
     * side stream) reach as far into it as they did into the others */
    int64_t s0 = lo[f->occ[nfull]].t, reach = step_reach(r, r->isteps, nfull);
    int64_t tail = trailing_end(r->t, f);
    if (s0 + reach > tail) tail = s0 + reach;
    r->isteps[n - 1] = (an_step){s0, tail + 1, (int)n};
  }
  r->nisteps = n;
  r->step_src = AN_STEPS_INFERRED;
  r->iperiod = f->period;
  return 1;
}

void an_pass_infer(an_report *r) {
  const an_trace *t = r->t;
  r->step_src = t->nsteps ? AN_STEPS_MARKED : AN_STEPS_NONE;
  if (t->nsteps || t->nops < 6 || t->nops > UINT32_MAX / 2) return;
  pw_loop_params p = {an_threshold_value(AN_T_STEP_PERIOD_TOL_PCT),
                      an_threshold_value(AN_T_STEP_MATCH_PCT),
                      (uint32_t)an_threshold_value(AN_T_STEP_MIN)};
  pw_loop_op *lo = loop_ops(r);
  pw_loop_found f;
  if (lo && pw_loop_find(lo, t->nops, &p, &f)) {
    make_steps(r, lo, &f);
    free(f.occ);
  }
  free(lo);
}
