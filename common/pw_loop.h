/* pw_loop.h — the loop finder: a program's iterations, found in its stream of GPU operations.
 *
 * Owns: the one rule both halves use (docs/DESIGN.md §5, §8).  An op is a signature on a stream;
 * an anchor is a signature that recurs once per iteration: its periods are steady (within
 * tol_pct of their median) over a run holding at least half of its occurrences, and its stream
 * runs one same sequence of signatures (a rolling hash) in at least match_pct of them; an input
 * (H2D) copy is the preferred anchor.  Two drivers of that rule: pw_loop_find, over a whole
 * sequence (the report: periods in host time, the heaviest loop); pw_loop_live, op by op (the
 * collector: the rule on an anchor's last three occurrences, periods in ops, then every op on
 * its stream checked against the op one period before).
 * Must never: include a CUDA, CUPTI, shim or report header, lock, or log (the callers do);
 * pw_loop_live_op allocates only a stream's tables, once, the first time it sees that stream.
 */
#ifndef PW_LOOP_H
#define PW_LOOP_H

#include <stddef.h>
#include <stdint.h>

#define PW_LOOP_B 1000003ULL /* the rolling hash's base */

/* FNV-1a over the 8 bytes of v, after h (start: PW_LOOP_FNV): signatures made of several fields */
#define PW_LOOP_FNV 1469598103934665603ULL
static inline uint64_t pw_loop_mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++)
    h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ULL;
  return h;
}

/* The rolling hash of a stream's sequence of signatures: h after one more signature. */
static inline uint64_t pw_loop_push(uint64_t h, uint64_t sig) {
  return h * PW_LOOP_B + sig + 1;
}
uint64_t pw_loop_pow(uint64_t e); /* PW_LOOP_B^e */

typedef struct pw_loop_params {
  double tol_pct;     /* a period is steady within this % of the median */
  double match_pct;   /* this % of the run's periods repeat one sequence */
  uint32_t min_iters; /* pw_loop_find: fewer iterations are no loop */
} pw_loop_params;

/* The rule, on the n periods between n + 1 occurrences of one signature: dt[j] the length of
 * period j (time or ops), seq[j] the hash of its stream's sequence over it.  Sets *lo and *len
 * (periods lo .. lo + len - 1: the run) and *period (the median), and returns 1 when they are a
 * loop.  scratch: 2 n values.  With n = 2, tolerance 0 and match 100: the last two periods are
 * one sequence (the collector's test). */
int pw_loop_judge(const int64_t *dt, const uint64_t *seq, uint32_t n, const pw_loop_params *p,
                  int64_t *scratch, uint32_t *lo, uint32_t *len, int64_t *period);

/* ---- the whole sequence (the report) ---- */
typedef struct pw_loop_op {
  uint64_t stream; /* ops of one stream are one sequence */
  uint64_t sig;    /* what the op runs (not when) */
  int64_t t;       /* when its iteration would begin (host time): periods are measured in it */
  int64_t w;       /* its weight (GPU time): the loop doing the most work wins */
  uint8_t h2d;     /* an input copy: preferred as the anchor */
  uint8_t skip;    /* never an anchor (it still counts in its stream's sequence) */
} pw_loop_op;

typedef struct pw_loop_found {
  uint32_t *occ;  /* the anchor's occurrences (op indices): iteration k is [occ[k], occ[k + 1]) */
  uint32_t nocc;  /* nocc - 1 full iterations */
  uint32_t tail;  /* > 0: one more iteration after occ[nocc - 1], its stream's first tail ops */
  int64_t period; /* in t */
  int gram;       /* 1: an op's own signature; 2: with its stream's previous op's */
  int h2d;
} pw_loop_found;

/* The loop of ops[0 .. n) (in issue order), if any: 1 and *out filled (free out->occ), else 0.
 * Of the anchors: the loop doing the most work on its stream (within 30 %), its longest period
 * (within 10 %), an H2D copy, the earliest.  When no signature recurs once per iteration, the
 * pairs of consecutive ops of a stream are tried. */
int pw_loop_find(const pw_loop_op *ops, size_t n, const pw_loop_params *p, pw_loop_found *out);

/* ---- op by op (the collector) ---- */
#define PW_LOOP_CANDS 32 /* candidates followed at once */
#define PW_LOOP_STREAMS 16
typedef struct pw_loop_stream pw_loop_stream;

typedef struct pw_loop_cand {
  pw_loop_stream *s;
  void *stream;
  uint64_t sig, period, found; /* period in ops; found: its position when it became a candidate */
  int h2d;
} pw_loop_cand;

typedef struct pw_loop_live {
  pw_loop_stream *s[PW_LOOP_STREAMS];
  int ns;
  pw_loop_cand c[PW_LOOP_CANDS];
  int nc, chosen; /* chosen: the anchor among them, -1: none yet */
  uint64_t last;  /* no anchor is taken past this iteration */
} pw_loop_live;

/* What one op did; flags of pw_loop_live_op. */
enum {
  PW_LOOP_DROPPED = 1, /* the anchor stopped repeating (ev->was: it); looking again */
  PW_LOOP_TAKEN = 2,   /* an anchor was taken (ev->anchor) */
  PW_LOOP_ITER = 4,    /* iteration ev->iter begins at this op */
  PW_LOOP_LATE = 8,    /* an H2D anchor found at iteration ev->iter, past last + 1: give up */
};
typedef struct pw_loop_ev {
  pw_loop_cand was, anchor;
  uint64_t iter, at; /* at: the op's position on its stream */
} pw_loop_ev;

void pw_loop_live_init(pw_loop_live *L, uint64_t last);
void pw_loop_live_free(pw_loop_live *L); /* the streams' tables */
/* One op (sig on stream; h2d: an input copy); returns PW_LOOP_* flags.  Iteration N begins at
 * the anchor's Nth occurrence on its stream; an H2D anchor is taken when found (PW_LOOP_TAKEN |
 * PW_LOOP_ITER), another one only when its stream made no H2D copy in its two periods nor the
 * one before them, its next occurrence beginning the next iteration. */
int pw_loop_live_op(pw_loop_live *L, void *stream, uint64_t sig, int h2d, pw_loop_ev *ev);

#endif
