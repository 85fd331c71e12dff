/* an_diff.c — the comparison behind `pinwheel diff`: which device of one trace is compared with
 * which of the other, and the rows compared for each.
 *
 * Owns: pairing the devices (by id, or in order of id when the traces ran on as many devices but
 * not the same ones) and the rows' values, in the units the report shows them.
 * Must never: analyse a trace itself (it compares two finished reports), or print.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

static int same_devices(const an_report *a, const an_report *b) {
  if (a->ndevs != b->ndevs) return 0;
  for (int i = 0; i < a->ndevs; i++)
    if (a->devs[i].dev != b->devs[i].dev) return 0;
  return 1;
}

static int by_order(const an_report *a, const an_report *b) {
  return !same_devices(a, b) && a->ndevs == b->ndevs;
}

static int comparable(const an_report *a, const an_report *b) {
  return same_devices(a, b) || a->ndevs == b->ndevs;
}

static int peer(const an_report *a, const an_report *b, int i) {
  if (by_order(a, b)) return i; /* devices sorted by id: the i-th with the i-th */
  for (int j = 0; j < b->ndevs; j++)
    if (b->devs[j].dev == a->devs[i].dev) return j;
  return -1;
}

/* The rows of one device: device i of a against device j of b. */
static int device_rows(const an_report *a, const an_report *b, int i, int j, an_diff_row *rows) {
  const an_dev *x = &a->devs[i], *y = &b->devs[j];
  const an_stepsum *sx = &a->stepsum[i], *sy = &b->stepsum[j];
  an_diff_row v[] = {
      {"span_ms", "span ms", an_ms(x->span), an_ms(y->span), 0},
      {"gpu_step_ms_median", "GPU step ms (median)", an_ms(sx->step_med), an_ms(sy->step_med), 0},
      {"gpu_step_ms_p95", "GPU step ms (p95)", an_ms(sx->step_p95), an_ms(sy->step_p95), 0},
      {"h2d_ms_per_step_median", "H2D ms per step (median)", an_ms(sx->h2d_med), an_ms(sy->h2d_med),
       0},
      {"h2d_exposed_ms_per_step_median", "H2D exposed ms per step (median)", an_ms(sx->exposed_med),
       an_ms(sy->exposed_med), 0},
      {"h2d_hidden_pct_per_step_median", "H2D hidden % per step (median)",
       sx->hidden_med > 0 ? 100 * sx->hidden_med : 0, sy->hidden_med > 0 ? 100 * sy->hidden_med : 0,
       0},
      {"busy_pct", "busy %", an_pct(x->busy, x->span), an_pct(y->busy, y->span), 0},
      {"kernel_pct", "kernel %", an_pct(x->kernel, x->span), an_pct(y->kernel, y->span), 0},
      {"idle_ms", "idle ms", an_ms(x->idle), an_ms(y->idle), 0},
      {"h2d_copies", "H2D copies", (double)x->h2d.copies, (double)y->h2d.copies, 1},
      {"h2d_ms", "H2D ms", an_ms(x->h2d.time), an_ms(y->h2d.time), 0},
      {"h2d_hidden_pct", "H2D hidden %", an_pct(x->h2d.hidden, x->h2d.time),
       an_pct(y->h2d.hidden, y->h2d.time), 0},
      {"h2d_exposed_ms", "H2D exposed ms", an_ms(x->h2d.exposed), an_ms(y->h2d.exposed), 0},
      {"d2h_ms", "D2H ms", an_ms(x->d2h.time), an_ms(y->d2h.time), 0},
      {"pageable_copies", "pageable copies", (double)x->pg_copies, (double)y->pg_copies, 1},
      {"pageable_host_blocked_ms", "pageable host blocked ms", an_ms(x->pg_host), an_ms(y->pg_host),
       0},
  };
  _Static_assert(sizeof v / sizeof v[0] <= AN_DIFF_ROWS, "an_diff_dev holds every row");
  int n = (int)(sizeof v / sizeof v[0]);
  if (!sx->n || !sy->n) { /* no steps: the per-step rows say nothing */
    memmove(&v[1], &v[6], (size_t)(n - 6) * sizeof v[0]);
    n -= 5;
  }
  memcpy(rows, v, (size_t)n * sizeof *v);
  return n;
}

an_diff *an_compare(const an_report *a, const an_report *b) {
  if (!comparable(a, b)) return NULL;
  an_diff *d = calloc(1, sizeof *d);
  d->a = a, d->b = b;
  d->by_order = by_order(a, b);
  d->devs = calloc((size_t)a->ndevs + 1, sizeof *d->devs);
  for (int i = 0; i < a->ndevs; i++) {
    int j = peer(a, b, i);
    if (j < 0) continue;
    an_diff_dev *x = &d->devs[d->ndevs++];
    x->i = i, x->j = j;
    x->nrows = device_rows(a, b, i, j, x->rows);
  }
  return d;
}

void an_diff_free(an_diff *d) {
  if (!d) return;
  free(d->devs);
  free(d);
}
