/* an_infer.c — the step-inference pass: a loop's iterations, found in a trace that marks none.
 *
 * Owns: when a trace has no step ranges (no ProfilerStep#N, nothing matched --step-range), the
 * CPU ranges of the program's iterations, found from its repeating GPU work.  An anchor is an
 * operation signature (device, stream, type, name, copy kind and bytes) — or, when none will do,
 * the signatures of two consecutive operations of one stream — that recurs once per iteration:
 * its occurrences come at a steady period (each within step_period_tol_pct of the median), the
 * run of steady periods holds at least half of its occurrences, and the operations its stream
 * runs between two occurrences repeat one sequence in at least step_match_pct of the periods.
 * A step is then [the anchor's runtime call, the next one's); the steps pass joins GPU work to
 * it as it does to a marked step.
 * Must never: change the trace (the steps are the report's), or run when the trace marks steps.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

/* Why not gaps: pauses between inference requests, or inside one, are not iterations; a period
 * tolerance and a sequence match keep an irregular program from being cut into hundreds of
 * steps. */

static uint64_t mix(uint64_t h, uint64_t v) { /* FNV-1a over the 8 bytes of v */
  for (int i = 0; i < 8; i++)
    h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ULL;
  return h;
}

static uint64_t op_key(const an_op *o) {
  uint64_t h = 1469598103934665603ULL;
  h = mix(h, (uint64_t)(uint32_t)o->dev << 32 | (uint32_t)o->stream);
  h = mix(h, (uint64_t)o->type << 40 | (uint64_t)o->ckind << 32 | o->name);
  return mix(h, o->type == AN_KERNEL || o->type == AN_COMM ? 0 : o->bytes);
}

typedef struct sigtab {        /* op -> signature id, and each signature's ops in time order */
  uint32_t *sig, *first, *ops; /* sig[nops]; ops of signature s: ops[first[s] .. first[s+1]) */
  uint32_t nsig;
  uint32_t *pos;  /* pos[op]: its index in its stream's list */
  uint64_t *pre;  /* in stream order: the prefix hash of the sequence of signatures */
  uint64_t *powb; /* B^k */
  int64_t *dpre;  /* in stream order: the prefix sum of the ops' durations */
} sigtab;

static int cmp_u64idx(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Signatures by sorting (key, op); streams likewise by (dev, stream), for the sequence hashes.
 * gram 1: an operation's own signature; gram 2: with its stream's previous operation's (when no
 * operation recurs once per iteration, a pair of them may: identical blocks, each kernel of which
 * runs several times an iteration, join the next block or the loss in one place only). */
static int build_sigs(const an_trace *t, sigtab *S, int gram) {
  size_t n = t->nops;
  uint64_t(*kv)[2] = malloc((n + 1) * sizeof *kv);
  uint64_t *key = malloc((n + 1) * sizeof *key);
  S->sig = malloc((n + 1) * sizeof *S->sig);
  S->ops = malloc((n + 1) * sizeof *S->ops);
  S->first = malloc((n + 2) * sizeof *S->first);
  S->pos = malloc((n + 1) * sizeof *S->pos);
  S->pre = malloc((n + 1) * sizeof *S->pre);
  S->powb = malloc((n + 2) * sizeof *S->powb);
  S->dpre = malloc((n + 1) * sizeof *S->dpre);
  if (!kv || !key || !S->sig || !S->ops || !S->first || !S->pos || !S->pre || !S->powb ||
      !S->dpre) {
    free(kv), free(key);
    return -1;
  }
  for (size_t i = 0; i < n; i++) /* streams: ops sorted by (dev, stream), then time */
    kv[i][0] = (uint64_t)(uint32_t)t->ops[i].dev << 32 | (uint32_t)t->ops[i].stream, kv[i][1] = i;
  qsort(kv, n, sizeof *kv, cmp_u64idx);
  for (size_t i = 0; i < n; i++) {
    size_t op = kv[i][1];
    S->pos[op] = (uint32_t)i;
    key[op] = op_key(&t->ops[op]);
    if (gram == 2)
      key[op] = mix(key[op], i && kv[i - 1][0] == kv[i][0] ? op_key(&t->ops[kv[i - 1][1]]) : 0);
  }
  uint64_t(*sk)[2] = kv; /* reused: (key, op) */
  for (size_t i = 0; i < n; i++)
    sk[i][0] = key[i], sk[i][1] = i;
  qsort(sk, n, sizeof *sk, cmp_u64idx);
  S->nsig = 0;
  for (size_t i = 0; i < n; i++) {
    if (!i || sk[i][0] != sk[i - 1][0]) S->first[S->nsig++] = (uint32_t)i;
    S->sig[sk[i][1]] = S->nsig - 1;
    S->ops[i] = (uint32_t)sk[i][1];
  }
  S->first[S->nsig] = (uint32_t)n;
  /* in stream order: the prefix hash of the signatures and the prefix sum of the durations */
  uint32_t *byp = (uint32_t *)key; /* reused: the op at each stream position */
  for (size_t i = 0; i < n; i++)
    byp[S->pos[i]] = (uint32_t)i;
  const uint64_t B = 1000003;
  S->powb[0] = 1;
  for (size_t i = 0; i < n; i++) {
    uint32_t op = byp[i];
    S->powb[i + 1] = S->powb[i] * B;
    S->pre[i] = (i ? S->pre[i - 1] : 0) * B + S->sig[op] + 1;
    S->dpre[i] = (i ? S->dpre[i - 1] : 0) + (t->ops[op].e - t->ops[op].s);
  }
  free(kv), free(key);
  return 0;
}

static void free_sigs(sigtab *S) {
  free(S->sig), free(S->ops), free(S->first), free(S->pos), free(S->pre), free(S->powb);
  free(S->dpre);
}

/* The polynomial hash of the signatures at stream-order positions [a, b), a < b. */
static uint64_t seq_hash(const sigtab *S, uint32_t a, uint32_t b) {
  return S->pre[b - 1] - (a ? S->pre[a - 1] : 0) * S->powb[b - a];
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

typedef struct cand {
  uint32_t sig, lo, hi; /* occurrences lo..hi (indices into the signature's ops) are the run */
  int64_t period, score, start;
} cand;

static int cmp_i64v(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The longest run of steady periods of one signature; 0 if it is no anchor. */
static int try_anchor(const an_report *r, const sigtab *S, uint32_t s, int64_t *buf, uint64_t *hb,
                      cand *out) {
  uint32_t f = S->first[s], n = S->first[s + 1] - f;
  if (n < 3) return 0;
  const uint32_t *oc = S->ops + f;
  /* pinwheel's DMAs and ring copies come when its staging issues them: only the op where a
   * staged copy counts once stands for the program's copy */
  uint64_t bytes;
  if (r->staged_role && r->staged_role[oc[0]] && an_pw_counts(r, oc[0], &bytes) != 2) return 0;
  for (uint32_t j = 0; j + 1 < n; j++)
    buf[j] = host_start(r, oc[j + 1]) - host_start(r, oc[j]);
  int64_t *srt = buf + n;
  memcpy(srt, buf, (n - 1) * sizeof *buf);
  qsort(srt, n - 1, sizeof *srt, cmp_i64v);
  int64_t P = srt[(n - 1) / 2];
  if (P <= 0) return 0;
  double tol = an_threshold_value(AN_T_STEP_PERIOD_TOL_PCT) / 100.0;
  uint32_t best_lo = 0, best_len = 0, lo = 0;
  for (uint32_t j = 0; j + 1 < n; j++) {
    int ok = buf[j] >= P * (1 - tol) && buf[j] <= P * (1 + tol);
    if (!ok)
      lo = j + 1;
    else if (j + 1 - lo > best_len)
      best_lo = lo, best_len = j + 1 - lo;
  }
  /* a run of steady periods, most of the anchor's occurrences: a loop, not a coincidence */
  if (best_len < 2 || 2 * (best_len + 1) < n) return 0;
  /* each period's sequence on the anchor's stream, against the most common one */
  for (uint32_t j = 0; j < best_len; j++) {
    uint32_t a = S->pos[oc[best_lo + j]], b = S->pos[oc[best_lo + j + 1]];
    hb[j] = seq_hash(S, a, b);
  }
  qsort(hb, best_len, sizeof *hb, cmp_i64v);
  uint32_t mode = 0;
  for (uint32_t j = 0, k; j < best_len; j = k) {
    for (k = j; k < best_len && hb[k] == hb[j]; k++)
      ;
    if (k - j > mode) mode = k - j;
  }
  if (mode * 100.0 < an_threshold_value(AN_T_STEP_MATCH_PCT) * best_len) return 0;
  /* score: the anchor stream's GPU time over the run (the loop doing the most work wins) */
  uint32_t a = S->pos[oc[best_lo]], b = S->pos[oc[best_lo + best_len]];
  int64_t sc = S->dpre[b - 1] - (a ? S->dpre[a - 1] : 0);
  *out = (cand){s, best_lo, best_lo + best_len, P, sc, host_start(r, oc[best_lo])};
  return 1;
}

/* Of the anchors: the loop doing the most GPU work on its stream (within 30 %: the anchors of one
 * loop differ by an iteration or so); of that loop, the longest period (a kernel that recurs once
 * per layer is no iteration).  Then any anchor of that period, on any stream (a prefetcher's copy
 * on its side stream belongs to the loop too): an input copy (a loop iteration begins by copying
 * its batch in), then the earliest (the loop's first operation: its iterations then start where
 * the program's do).
 */
static int is_h2d(const an_report *r, uint32_t i) {
  const an_op *o = &r->t->ops[i];
  if (r->staged_role && r->staged_role[i]) return r->pw[r->staged_group[i]].dir == AN_CK_H2D;
  return o->type == AN_MEMCPY && o->ckind == AN_CK_H2D;
}

static int better(const an_report *r, const sigtab *S, const cand *a, const cand *b) {
  int hx = is_h2d(r, S->ops[S->first[a->sig]]), hy = is_h2d(r, S->ops[S->first[b->sig]]);
  return hx != hy ? hx > hy : a->start < b->start;
}

static const cand *pick(const an_report *r, const sigtab *S, const cand *c, size_t n) {
  int64_t best = 0, per = 0;
  for (size_t i = 0; i < n; i++)
    if (c[i].score > best) best = c[i].score;
  for (size_t i = 0; i < n; i++)
    if (c[i].score >= best - best * 3 / 10 && c[i].period > per) per = c[i].period;
  const cand *p = NULL;
  for (size_t i = 0; i < n; i++)
    if (c[i].period >= per - per / 10 && c[i].period <= per + per / 10 &&
        (!p || better(r, S, &c[i], p)))
      p = &c[i];
  return p;
}

/* Whether the first i + 1 operations of the stream from position z differ from those from a: 0
 * up to the longest prefix the two share, 1 after it. */
typedef struct prefix_at {
  const sigtab *S;
  uint32_t a, z;
} prefix_at;
static int64_t prefix_differs(const void *ctx, size_t i) {
  const prefix_at *p = ctx;
  uint32_t m = (uint32_t)i + 1;
  return seq_hash(p->S, p->z, p->z + m) != seq_hash(p->S, p->a, p->a + m);
}

/* The iteration after the run's last anchor, when its stream repeats the period's sequence:
 * its host range ends with the last runtime call of that sequence. */
static int64_t trailing_end(const an_trace *t, const sigtab *S, const cand *c) {
  const uint32_t *oc = S->ops + S->first[c->sig];
  uint32_t a = S->pos[oc[c->hi - 1]], b = S->pos[oc[c->hi]], len = b - a, z = S->pos[oc[c->hi]];
  /* the ops of the anchor's stream after its last occurrence: how long a prefix of the period's
   * sequence they repeat (the last iteration may end differently: no next batch to prefetch) */
  uint32_t hi = len < t->nops - z ? len : (uint32_t)(t->nops - z);
  prefix_at pa = {S, a, z};
  uint32_t lo = (uint32_t)an_lower_bound(0, hi, 1, prefix_differs, &pa); /* the prefix's length */
  if (lo * 100.0 < an_threshold_value(AN_T_STEP_MATCH_PCT) * len) return INT64_MIN;
  /* the op at stream position z + len - 1: found by its position (pos is a permutation) */
  int64_t end = INT64_MIN;
  const an_op *o0 = &t->ops[oc[c->hi]];
  for (size_t i = oc[c->hi]; i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != o0->dev || o->stream != o0->stream) continue;
    if (S->pos[i] >= z + len) break;
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

/* The steps of the chosen anchor: from each occurrence's call to the next one's, and the
 * trailing iteration when its stream repeats the period's sequence. */
static int make_steps(an_report *r, const sigtab *S, const cand *c) {
  const an_trace *t = r->t;
  const uint32_t *oc = S->ops + S->first[c->sig];
  int64_t tail = trailing_end(t, S, c);
  size_t nfull = c->hi - c->lo, n = nfull + (tail != INT64_MIN);
  if (n < (size_t)an_threshold_value(AN_T_STEP_MIN) ||
      !(r->isteps = calloc(n + 1, sizeof *r->isteps)))
    return 0;
  for (uint32_t j = c->lo; j < c->hi; j++)
    r->isteps[j - c->lo] =
        (an_step){host_start(r, oc[j]), host_start(r, oc[j + 1]), (int)(j - c->lo + 1)};
  if (tail != INT64_MIN) {
    /* its calls on other streams than the anchor's (a prefetcher's copy is an anchor on its
     * side stream) reach as far into it as they did into the others */
    int64_t s0 = host_start(r, oc[c->hi]), reach = step_reach(r, r->isteps, nfull);
    if (s0 + reach > tail) tail = s0 + reach;
    r->isteps[n - 1] = (an_step){s0, tail + 1, (int)n};
  }
  r->nisteps = n;
  r->step_src = AN_STEPS_INFERRED;
  r->iperiod = c->period;
  return 1;
}

void an_pass_infer(an_report *r) {
  const an_trace *t = r->t;
  r->step_src = t->nsteps ? AN_STEPS_MARKED : AN_STEPS_NONE;
  if (t->nsteps || t->nops < 6 || t->nops > UINT32_MAX / 2) return;
  int64_t *buf = malloc((2 * t->nops + 2) * sizeof *buf);
  uint64_t *hb = malloc((t->nops + 1) * sizeof *hb);
  cand *cs = malloc((t->nops + 1) * sizeof *cs);
  int done = 0;
  for (int gram = 1; gram <= 2 && !done && buf && hb && cs; gram++) {
    sigtab S;
    if (build_sigs(t, &S, gram)) break;
    size_t nc = 0;
    for (uint32_t s = 0; s < S.nsig; s++)
      nc += try_anchor(r, &S, s, buf, hb, &cs[nc]);
    const cand *c = pick(r, &S, cs, nc);
    done = c && make_steps(r, &S, c);
    free_sigs(&S);
  }
  free(buf), free(hb), free(cs);
}
