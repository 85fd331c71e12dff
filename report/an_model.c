/* an_model.c — the model's queries, beside the model they read (an.h).
 *
 * Owns: the name tables of the model's lists (copy, memory and operation kinds, API classes,
 * operation classes), an interned name by id, the runtime call of a correlation id, the
 * operations that can overlap a window, a trace's (device, stream) lanes, and the one binary
 * search that these queries and the passes use.
 * Must never: read a file or parse a trace (readers/ fill the model), compute a report's figure
 * (passes/), or print (writers/).  It changes no trace: every query takes it const.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>

/* ---- the name tables ---- */

#define AN_X_RN(id, rn, tn) rn,
#define AN_X_TN(id, rn, tn) tn,
#define AN_X_API(id, rn) rn,
#define AN_X_CAT(id, cat) cat,
#define AN_X_OC_RN(id, rn, key) rn,
#define AN_X_OC_KEY(id, rn, key) key,
const char *const an_ck_name[AN_CK_N] = {AN_COPY_KINDS(AN_X_RN)};
const char *const an_ck_trace[AN_CK_N] = {AN_COPY_KINDS(AN_X_TN)};
const char *const an_mk_name[AN_MK_N] = {AN_MEM_KINDS(AN_X_RN)};
const char *const an_mk_trace[AN_MK_N] = {AN_MEM_KINDS(AN_X_TN)};
const char *const an_api_name[AN_API_N] = {AN_APIS(AN_X_API)};
const char *const an_op_cat[AN_OP_N] = {AN_OP_TYPES(AN_X_CAT)};
const char *const an_oc_name[AN_OC_N] = {AN_OP_CLASSES(AN_X_OC_RN)};
const char *const an_oc_key[AN_OC_N] = {AN_OP_CLASSES(AN_X_OC_KEY)};

/* ---- the binary search ---- */

static size_t bound(size_t lo, size_t hi, int64_t key, int upper, an_key_fn key_of,
                    const void *ctx) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t k = key_of(ctx, mid);
    if (k < key || (upper && k == key))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

size_t an_lower_bound(size_t lo, size_t hi, int64_t key, an_key_fn key_of, const void *ctx) {
  return bound(lo, hi, key, 0, key_of, ctx);
}

size_t an_upper_bound(size_t lo, size_t hi, int64_t key, an_key_fn key_of, const void *ctx) {
  return bound(lo, hi, key, 1, key_of, ctx);
}

/* ---- queries ---- */

const char *an_name(const an_trace *t, uint32_t id) {
  return id < t->nnames ? t->names[id] : "?";
}

static int64_t bycorr_corr(const void *ctx, size_t i) {
  const an_trace *t = ctx;
  return t->calls[t->bycorr[i]].corr;
}

const an_call *an_call_of(const an_trace *t, int64_t corr) {
  if (corr < 0) return NULL;
  size_t lo = an_lower_bound(0, t->nbycorr, corr, bycorr_corr, t);
  return lo < t->nbycorr && t->calls[t->bycorr[lo]].corr == corr ? &t->calls[t->bycorr[lo]] : NULL;
}

static int64_t op_start(const void *ctx, size_t i) {
  return ((const an_trace *)ctx)->ops[i].s;
}

static size_t first_at_or_after(const an_trace *t, int64_t s) {
  return an_lower_bound(0, t->nops, s, op_start, t);
}

void an_op_range(const an_trace *t, int64_t w0, int64_t w1, size_t *lo, size_t *hi) {
  *lo = w0 < INT64_MIN + t->maxdur + 1 ? 0 : first_at_or_after(t, w0 - t->maxdur);
  *hi = w1 == INT64_MAX ? t->nops : first_at_or_after(t, w1 + 1);
}

static int cmp_lane(const void *a, const void *b) {
  const an_lane *x = a, *y = b;
  return x->dev != y->dev ? x->dev - y->dev : x->stream - y->stream;
}

an_lane *an_lanes(const an_trace *t, size_t *n) {
  an_lane *lanes = malloc((t->nops + 1) * sizeof *lanes);
  size_t nl = 0, m = 0;
  for (size_t i = 0; i < t->nops; i++)
    lanes[nl++] = (an_lane){t->ops[i].dev, t->ops[i].stream};
  qsort(lanes, nl, sizeof *lanes, cmp_lane);
  for (size_t i = 0; i < nl; i++)
    if (!m || cmp_lane(&lanes[m - 1], &lanes[i])) lanes[m++] = lanes[i];
  *n = m;
  return lanes;
}
