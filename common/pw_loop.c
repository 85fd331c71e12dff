/* pw_loop.c — the loop finder (pw_loop.h): the rule, and its two drivers.
 *
 * Owns: the rule (pw_loop_judge); the whole-sequence driver (pw_loop_find: every signature's
 * occurrences, the heaviest loop); the op-by-op driver (pw_loop_live_op: each stream's rolling
 * hashes in a ring, its signatures' last occurrences in a table, the candidates).
 * Must never: lock, log, or read a clock (the callers do); allocate in pw_loop_live_op but a
 * stream's tables the first time it is seen.
 */
#define _GNU_SOURCE
#include "pw_loop.h"

#include <stdlib.h>
#include <string.h>

uint64_t pw_loop_pow(uint64_t e) {
  uint64_t r = 1, b = PW_LOOP_B;
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return r;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void sort_i64(int64_t *a, uint32_t n) {
  if (n > 16) {
    qsort(a, n, sizeof *a, cmp_i64);
    return;
  }
  for (uint32_t i = 1; i < n; i++) /* the collector's two periods: no call */
    for (uint32_t j = i; j && a[j - 1] > a[j]; j--) {
      int64_t x = a[j];
      a[j] = a[j - 1], a[j - 1] = x;
    }
}

int pw_loop_judge(const int64_t *dt, const uint64_t *seq, uint32_t n, const pw_loop_params *p,
                  int64_t *scratch, uint32_t *lo_out, uint32_t *len_out, int64_t *period) {
  if (n < 2) return 0;
  int64_t *srt = scratch;
  memcpy(srt, dt, n * sizeof *dt);
  sort_i64(srt, n);
  int64_t P = srt[n / 2];
  if (P <= 0) return 0;
  double tol = p->tol_pct / 100.0;
  uint32_t best_lo = 0, best_len = 0, lo = 0;
  for (uint32_t j = 0; j < n; j++) {
    int ok = dt[j] >= P * (1 - tol) && dt[j] <= P * (1 + tol);
    if (!ok)
      lo = j + 1;
    else if (j + 1 - lo > best_len)
      best_lo = lo, best_len = j + 1 - lo;
  }
  /* a run of steady periods, most of the anchor's occurrences: a loop, not a coincidence */
  if (best_len < 2 || 2 * (best_len + 1) < n + 1) return 0;
  /* each period's sequence on the anchor's stream, against the most common one */
  int64_t *hb = scratch + n;
  for (uint32_t j = 0; j < best_len; j++)
    hb[j] = (int64_t)seq[best_lo + j];
  sort_i64(hb, best_len);
  uint32_t mode = 0;
  for (uint32_t j = 0, k; j < best_len; j = k) {
    for (k = j; k < best_len && hb[k] == hb[j]; k++)
      ;
    if (k - j > mode) mode = k - j;
  }
  if (mode * 100.0 < p->match_pct * best_len) return 0;
  *lo_out = best_lo, *len_out = best_len, *period = P;
  return 1;
}

/* ---- the whole sequence ---- */

typedef struct sigtab {        /* op -> signature id, and each signature's ops in issue order */
  uint32_t *sig, *first, *ops; /* sig[nops]; ops of signature s: ops[first[s] .. first[s+1]) */
  uint32_t nsig;
  uint32_t *pos;  /* pos[op]: its index in the ops ordered by stream, then issue */
  uint64_t *pre;  /* in that order: the prefix hash of the sequence of signatures */
  uint64_t *powb; /* B^k */
  int64_t *dpre;  /* in that order: the prefix sum of the ops' weights */
} sigtab;

static int cmp_u64idx(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

static void free_sigs(sigtab *S) {
  free(S->sig), free(S->ops), free(S->first), free(S->pos), free(S->pre), free(S->powb);
  free(S->dpre);
}

/* Signatures by sorting (key, op); streams likewise, for the sequence hashes.  gram 1: an op's
 * own signature; gram 2: with its stream's previous op's (when no op recurs once per iteration,
 * a pair may: identical blocks, each kernel of which runs several times an iteration, join the
 * next block or the loss in one place only). */
static int build_sigs(const pw_loop_op *o, size_t n, sigtab *S, int gram) {
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
    free(kv), free(key), free_sigs(S);
    return -1;
  }
  for (size_t i = 0; i < n; i++) /* streams: ops sorted by stream, then issue */
    kv[i][0] = o[i].stream, kv[i][1] = i;
  qsort(kv, n, sizeof *kv, cmp_u64idx);
  for (size_t i = 0; i < n; i++) {
    size_t op = kv[i][1];
    S->pos[op] = (uint32_t)i;
    key[op] = o[op].sig;
    if (gram == 2)
      key[op] = pw_loop_mix(key[op], i && kv[i - 1][0] == kv[i][0] ? o[kv[i - 1][1]].sig : 0);
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
  uint32_t *byp = (uint32_t *)key; /* reused: the op at each stream position */
  for (size_t i = 0; i < n; i++)
    byp[S->pos[i]] = (uint32_t)i;
  S->powb[0] = 1;
  for (size_t i = 0; i < n; i++) {
    uint32_t op = byp[i];
    S->powb[i + 1] = S->powb[i] * PW_LOOP_B;
    S->pre[i] = pw_loop_push(i ? S->pre[i - 1] : 0, S->sig[op]);
    S->dpre[i] = (i ? S->dpre[i - 1] : 0) + o[op].w;
  }
  free(kv), free(key);
  return 0;
}

/* The hash of the signatures at stream-order positions [a, b), a < b. */
static uint64_t seq_hash(const sigtab *S, uint32_t a, uint32_t b) {
  return S->pre[b - 1] - (a ? S->pre[a - 1] : 0) * S->powb[b - a];
}

typedef struct cand {
  uint32_t sig, lo, hi; /* occurrences lo..hi (indices into the signature's ops) are the run */
  int64_t period, score, start;
} cand;

/* The rule on one signature's occurrences; 0 if it is no anchor.  dt, hb: n values each;
 * scratch: 2 n. */
static int try_anchor(const pw_loop_op *o, const sigtab *S, uint32_t s, const pw_loop_params *p,
                      int64_t *dt, uint64_t *hb, int64_t *scratch, cand *out) {
  uint32_t f = S->first[s], n = S->first[s + 1] - f;
  if (n < 3) return 0;
  const uint32_t *oc = S->ops + f;
  if (o[oc[0]].skip) return 0;
  for (uint32_t j = 0; j + 1 < n; j++) {
    dt[j] = o[oc[j + 1]].t - o[oc[j]].t;
    hb[j] = seq_hash(S, S->pos[oc[j]], S->pos[oc[j + 1]]);
  }
  uint32_t lo, len;
  int64_t P;
  if (!pw_loop_judge(dt, hb, n - 1, p, scratch, &lo, &len, &P)) return 0;
  /* score: the anchor stream's work over the run (the loop doing the most work wins) */
  uint32_t a = S->pos[oc[lo]], b = S->pos[oc[lo + len]];
  int64_t sc = S->dpre[b - 1] - (a ? S->dpre[a - 1] : 0);
  *out = (cand){s, lo, lo + len, P, sc, o[oc[lo]].t};
  return 1;
}

/* Of the anchors: the loop doing the most work on its stream (within 30 %: the anchors of one
 * loop differ by an iteration or so); of that loop, the longest period (a kernel that recurs once
 * per layer is no iteration).  Then any anchor of that period, on any stream (a prefetcher's copy
 * on its side stream belongs to the loop too): an input copy (a loop iteration begins by copying
 * its batch in), then the earliest (the loop's first op: its iterations then start where the
 * program's do). */
static int better(const pw_loop_op *o, const sigtab *S, const cand *a, const cand *b) {
  int hx = o[S->ops[S->first[a->sig]]].h2d, hy = o[S->ops[S->first[b->sig]]].h2d;
  return hx != hy ? hx > hy : a->start < b->start;
}

static const cand *pick(const pw_loop_op *o, const sigtab *S, const cand *c, size_t n) {
  int64_t best = 0, per = 0;
  for (size_t i = 0; i < n; i++)
    if (c[i].score > best) best = c[i].score;
  for (size_t i = 0; i < n; i++)
    if (c[i].score >= best - best * 3 / 10 && c[i].period > per) per = c[i].period;
  const cand *p = NULL;
  for (size_t i = 0; i < n; i++)
    if (c[i].period >= per - per / 10 && c[i].period <= per + per / 10 &&
        (!p || better(o, S, &c[i], p)))
      p = &c[i];
  return p;
}

/* The iteration after the run's last occurrence, when its stream repeats a long enough prefix of
 * the period's sequence (the last iteration may end differently: no next batch to prefetch): its
 * length in ops, else 0. */
static uint32_t trailing(size_t nops, const sigtab *S, const cand *c, const pw_loop_params *p) {
  const uint32_t *oc = S->ops + S->first[c->sig];
  uint32_t a = S->pos[oc[c->hi - 1]], z = S->pos[oc[c->hi]], len = z - a;
  uint32_t hi = len < nops - z ? len : (uint32_t)(nops - z), lo = 0;
  while (lo < hi) { /* the longest prefix the two share */
    uint32_t m = lo + (hi - lo + 1) / 2;
    if (seq_hash(S, z, z + m) == seq_hash(S, a, a + m))
      lo = m;
    else
      hi = m - 1;
  }
  return lo * 100.0 < p->match_pct * len ? 0 : len;
}

int pw_loop_find(const pw_loop_op *ops, size_t n, const pw_loop_params *p, pw_loop_found *out) {
  memset(out, 0, sizeof *out);
  if (n < 3 || n > UINT32_MAX / 2) return 0;
  int64_t *dt = malloc((3 * n + 3) * sizeof *dt);
  uint64_t *hb = malloc((n + 1) * sizeof *hb);
  cand *cs = malloc((n + 1) * sizeof *cs);
  int done = 0;
  for (int gram = 1; gram <= 2 && !done && dt && hb && cs; gram++) {
    sigtab S;
    if (build_sigs(ops, n, &S, gram)) break;
    size_t nc = 0;
    for (uint32_t s = 0; s < S.nsig; s++)
      nc += try_anchor(ops, &S, s, p, dt, hb, dt + n + 1, &cs[nc]);
    const cand *c = pick(ops, &S, cs, nc);
    if (c) {
      uint32_t tail = trailing(n, &S, c, p), nocc = c->hi - c->lo + 1;
      if (nocc - 1 + (tail > 0) >= p->min_iters && (out->occ = malloc(nocc * sizeof *out->occ))) {
        memcpy(out->occ, S.ops + S.first[c->sig] + c->lo, nocc * sizeof *out->occ);
        out->nocc = nocc, out->tail = tail, out->period = c->period, out->gram = gram;
        out->h2d = ops[out->occ[0]].h2d;
        done = 1;
      }
    }
    free_sigs(&S);
  }
  free(dt), free(hb), free(cs);
  return done;
}

/* ---- op by op ---- */

#define RING 65536 /* signatures kept per stream: a period is at most RING / 2 - 1 */
#define SIGS 16384 /* signatures followed per stream (a hash table; cleared when full) */

typedef struct sig_ent {
  uint64_t sig;
  uint64_t last, prev; /* positions (1-based) of its last two occurrences */
  uint64_t count;      /* its occurrences */
} sig_ent;

struct pw_loop_stream {
  void *stream;
  uint64_t pos;        /* ops so far */
  uint64_t hash[RING]; /* prefix hash after position p: hash[p % RING] */
  uint64_t last_h2d;   /* position of its last H2D copy, 0: none */
  sig_ent *tab;
  size_t ntab;
};

void pw_loop_live_init(pw_loop_live *L, uint64_t last) {
  memset(L, 0, sizeof *L);
  L->chosen = -1;
  L->last = last;
}

void pw_loop_live_free(pw_loop_live *L) {
  for (int i = 0; i < L->ns; i++)
    free(L->s[i]->tab), free(L->s[i]);
  L->ns = 0;
  L->nc = 0;
  L->chosen = -1;
}

/* the hash of the stream's signatures at positions [a, b), 1 <= a < b <= pos */
static uint64_t live_seq(const pw_loop_stream *s, uint64_t a, uint64_t b) {
  return s->hash[(b - 1) % RING] - s->hash[(a - 1) % RING] * pw_loop_pow(b - a);
}

/* the signature at position p of the stream (1 <= p <= pos, pos - p < RING), from the hashes */
static uint64_t live_sig_at(const pw_loop_stream *s, uint64_t p) {
  return s->hash[p % RING] - s->hash[(p - 1) % RING] * PW_LOOP_B - 1;
}

static pw_loop_stream *stream_of(pw_loop_live *L, void *stream) {
  for (int i = 0; i < L->ns; i++)
    if (L->s[i]->stream == stream) return L->s[i];
  if (L->ns == PW_LOOP_STREAMS) return NULL;
  pw_loop_stream *s = calloc(1, sizeof *s);
  if (s) s->tab = calloc(SIGS, sizeof *s->tab);
  if (!s || !s->tab) {
    free(s);
    return NULL;
  }
  s->stream = stream;
  L->s[L->ns++] = s;
  return s;
}

static sig_ent *entry(pw_loop_stream *s, uint64_t sig) {
  if (s->ntab > SIGS * 3 / 4) { /* nothing repeats here: start afresh */
    memset(s->tab, 0, SIGS * sizeof *s->tab);
    s->ntab = 0;
  }
  size_t i = (size_t)(sig * 0x9E3779B97F4A7C15ull >> 40) & (SIGS - 1);
  while (s->tab[i].last && s->tab[i].sig != sig)
    i = (i + 1) & (SIGS - 1);
  if (!s->tab[i].last) s->tab[i].sig = sig, s->ntab++;
  return &s->tab[i];
}

/* Each candidate on this stream must still repeat its period: the op just made (at position i)
 * is the one made one period before.  One that does not was a repetition inside an iteration
 * (three casts in a row, the layers of a model): it is dropped, and with it the anchor it was. */
static int cands_check(pw_loop_live *L, const pw_loop_stream *s, uint64_t i, uint64_t sig,
                       pw_loop_ev *ev) {
  int n = 0, fl = 0;
  for (int c = 0; c < L->nc; c++) {
    pw_loop_cand *x = &L->c[c];
    if (x->s == s && live_sig_at(s, i - x->period) != sig) {
      if (c == L->chosen) ev->was = *x, L->chosen = -1, fl |= PW_LOOP_DROPPED;
      continue;
    }
    if (c == L->chosen) L->chosen = n;
    L->c[n++] = *x;
  }
  L->nc = n;
  return fl;
}

/* The rule on the last three occurrences k < j < i of the op just made: two periods in ops,
 * exactly equal, one sequence. */
static const pw_loop_params LIVE = {0, 100, 0};

/* A new candidate (the op at i, the rule holding on its last three occurrences k, j, i), taken as
 * the anchor when it is the best so far: an H2D copy at once (before any other), another only
 * when its stream made no H2D copy in its two periods nor in the period before them (such a
 * repetition is likelier one inside an iteration that began by copying its input in) and it is
 * not already past the last iteration asked for. */
static int cands_add(pw_loop_live *L, pw_loop_stream *s, uint64_t sig, int h2d, uint64_t k,
                     uint64_t i, uint64_t period, uint64_t count, pw_loop_ev *ev) {
  for (int c = 0; c < L->nc; c++)
    if (L->c[c].s == s && L->c[c].sig == sig) return 0;
  if (h2d && count > L->last + 1) { /* the loop, found after the iterations asked for */
    ev->iter = count;
    return PW_LOOP_LATE;
  }
  if (L->nc == PW_LOOP_CANDS || count > L->last) return 0;
  int c = L->nc++;
  L->c[c] = (pw_loop_cand){s, s->stream, sig, period, i, h2d};
  int chosen_h2d = L->chosen >= 0 && L->c[L->chosen].h2d;
  if ((h2d && !chosen_h2d) ||
      (!h2d && L->chosen < 0 && (!s->last_h2d || s->last_h2d + period < k))) {
    L->chosen = c;
    ev->anchor = L->c[c], ev->iter = count;
    /* an H2D anchor begins iteration count at once; another's next occurrence begins the next
     * iteration (4 at the earliest) */
    return PW_LOOP_TAKEN | (h2d ? PW_LOOP_ITER : 0);
  }
  return 0;
}

int pw_loop_live_op(pw_loop_live *L, void *stream, uint64_t sig, int h2d, pw_loop_ev *ev) {
  pw_loop_stream *s = stream_of(L, stream);
  if (!s) return 0;
  uint64_t i = ++s->pos;
  ev->at = i;
  s->hash[i % RING] = pw_loop_push(s->hash[(i - 1) % RING], sig);
  sig_ent *e = entry(s, sig);
  uint64_t j = e->last, k = e->prev;
  e->prev = j, e->last = i, e->count++;
  int fl = cands_check(L, s, i, sig, ev);
  if (h2d) s->last_h2d = i;
  if (L->chosen >= 0 && L->c[L->chosen].s == s && L->c[L->chosen].sig == sig) {
    ev->iter = e->count; /* the anchor again: the next iteration */
    return fl | PW_LOOP_ITER;
  }
  /* equal periods first: the rule's cheap necessary condition (one sequence, one length) */
  if (k && i - j == j - k && i - k < RING / 2) {
    int64_t dt[2] = {(int64_t)(j - k), (int64_t)(i - j)}, scratch[4];
    uint64_t sq[2] = {live_seq(s, k, j), live_seq(s, j, i)};
    uint32_t lo, len;
    int64_t P;
    if (pw_loop_judge(dt, sq, 2, &LIVE, scratch, &lo, &len, &P))
      fl |= cands_add(L, s, sig, h2d, k, i, (uint64_t)P, e->count, ev);
  }
  return fl;
}
