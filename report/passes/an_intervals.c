/* an_intervals.c — interval arithmetic and order statistics: the leaf every pass stands on.
 *
 * Owns: unions, totals, intersections and covers of interval lists, a device's merged kernel
 * intervals, and the median and p95 of a list of times.
 * Must never: read the report or call a pass (the passes call it; of the rest it calls only the
 * model's binary search, an_model.c).
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>

static int cmp_iv(const void *a, const void *b) {
  const an_iv *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

size_t an_union(an_iv *v, size_t n) {
  size_t in = 1; /* lists made from the ops come in start order already: no sort then */
  while (in < n && v[in - 1].s <= v[in].s)
    in++;
  if (in < n) qsort(v, n, sizeof *v, cmp_iv);
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

static int64_t iv_end(const void *ctx, size_t i) {
  return ((const an_iv *)ctx)[i].e;
}

int64_t an_cover(const an_iv *v, size_t n, int64_t s, int64_t e) {
  size_t lo = an_upper_bound(0, n, s, iv_end, v); /* first interval ending after s */
  int64_t t = 0;
  for (size_t i = lo; i < n && v[i].s < e; i++) {
    int64_t a = v[i].s > s ? v[i].s : s, b = v[i].e < e ? v[i].e : e;
    if (b > a) t += b - a;
  }
  return t;
}

/* The merged kernel intervals of one device (communication kernels excluded: they do not hide
 * copies). */
an_iv *an_kernel_union(const an_trace *t, int dev, size_t *n) {
  an_iv *k = malloc((t->nops + 1) * sizeof *k);
  size_t m = 0;
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].dev == dev && t->ops[i].type == AN_KERNEL)
      k[m++] = (an_iv){t->ops[i].s, t->ops[i].e};
  *n = an_union(k, m);
  return k;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int64_t an_median(int64_t *v, size_t n) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_i64);
  return v[(n - 1) / 2] + (v[n / 2] - v[(n - 1) / 2]) / 2; /* sorted: no overflow */
}

int64_t an_p95(int64_t *v, size_t n) { /* nearest rank */
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_i64);
  size_t k = (n * 95 + 99) / 100;
  return v[k ? k - 1 : 0];
}
