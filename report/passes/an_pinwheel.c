/* an_pinwheel.c — the attribution pass: which operations of a trace pinwheel issued for a copy
 * it staged, so that the user's copy is counted once and its hidden % is measured on the DMAs
 * (DESIGN.md §5).
 *
 * Owns: the staged copies found in a trace (an_report.pw), each operation's part in one
 * (staged_role, staged_group) and the calls pinwheel made while staging (staged_call), by the
 * collector's marks first and else by the patterns described below.
 * Must never: change the trace, or take a program's own copy for pinwheel's (each pattern is
 * checked by bytes; what cannot be told apart counts as the program's).
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

/* What a torch.profiler or nsys trace of a run under pinwheel holds: the runtime calls pinwheel
 * made (the real cudaMemcpyAsync / cudaEventRecord it issued on the program's thread), and their
 * operations.  Two patterns, each checked by bytes:
 * - H2D through the device ring: a run of pinned -> device DMAs on a stream that carries nothing
 *   else (pinwheel's side stream), then, from the same thread, a device -> device copy on another
 *   stream (out of the ring, onto the program's stream) of exactly the run's bytes, or two such
 *   copies when the ring wrapped;
 * - D2H: two or more device -> pinned chunks issued back to back from one thread, each followed by
 *   a cudaEventRecord, all of one size but the last (the chunk size), with only event calls
 *   between them.
 * With PINWHEEL_DEVICE_RING=0 the H2D DMAs run on the program's stream with no copy after them:
 * such a trace cannot tell them from the program's own pinned copies, and they count as those.
 * pinwheel's own collector says it outright: every operation it issued for a staged copy is
 * marked (args.pinwheel) and carries the correlation id of the program's call; those are
 * grouped by that id first, ring or not.
 * A pattern found also names the calls pinwheel made on that thread while staging the copy, from
 * its first DMA (or chunk) to its ring copy (or its last chunk's event calls): its event syncs
 * while it waited for staging space or for a chunk to land are not the program's syncs
 * (staged_call).  Those it made before its first DMA cannot be told from the program's. */

typedef struct cix { /* an op by correlation id */
  int64_t corr;
  size_t op;
} cix;

static int cmp_cix(const void *a, const void *b) {
  const cix *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static int64_t cix_corr(const void *ctx, size_t i) {
  return ((const cix *)ctx)[i].corr;
}

static long op_of(const cix *v, size_t n, int64_t corr) {
  size_t lo = an_lower_bound(0, n, corr, cix_corr, v);
  return lo < n && v[lo].corr == corr ? (long)v[lo].op : -1;
}

typedef struct side { /* per (device, stream): does it carry only pinned -> device copies? */
  int dev, stream, only_dma;
} side;

static int cmp_side(const void *a, const void *b) {
  const side *x = a, *y = b;
  return x->dev != y->dev ? x->dev - y->dev : x->stream - y->stream;
}

static int is_side(const side *v, size_t n, int dev, int stream) {
  side k = {dev, stream, 0};
  const side *f = bsearch(&k, v, n, sizeof *v, cmp_side);
  return f && f->only_dma;
}

typedef struct thr { /* per host thread, while walking its calls */
  int32_t tid;
  size_t *dma; /* H2D DMAs issued and not yet matched to a ring copy */
  size_t ndma, capdma;
  uint64_t dma_bytes;
  long ring1; /* a first ring piece waiting for its second (the ring wrapped) */
  /* D2H chunks in a run */
  size_t *chunk;
  size_t nchunk, capchunk;
  int want_record; /* the last call was a chunk: an event record must follow */
  size_t call0;    /* the run's first call (its first DMA or chunk) */
  size_t last;     /* the run's last call so far (D2H) */
} thr;

static thr *thread_of(thr **ts, size_t *n, size_t *cap, int32_t tid) {
  for (size_t i = 0; i < *n; i++)
    if ((*ts)[i].tid == tid) return &(*ts)[i];
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    thr *q = realloc(*ts, nc * sizeof *q);
    if (!q) return NULL;
    *ts = q;
    *cap = nc;
  }
  thr *t = &(*ts)[(*n)++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  t->ring1 = -1;
  return t;
}

static int push(size_t **v, size_t *n, size_t *cap, size_t x) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    size_t *q = realloc(*v, nc * sizeof *q);
    if (!q) return -1;
    *v = q;
    *cap = nc;
  }
  (*v)[(*n)++] = x;
  return 0;
}

static an_pwgroup *new_group(an_report *r) {
  if (r->npw == r->cappw) {
    size_t nc = r->cappw ? r->cappw * 2 : 64;
    an_pwgroup *q = realloc(r->pw, nc * sizeof *q);
    if (!q) return NULL;
    r->pw = q;
    r->cappw = nc;
  }
  an_pwgroup *g = &r->pw[r->npw++];
  memset(g, 0, sizeof *g);
  return g;
}

/* The group's DMAs: flag them, and its span, bytes and DMA time (|union|). */
static void close_group(an_report *r, an_pwgroup *g, const size_t *dma, size_t n, uint8_t flag) {
  const an_trace *t = r->t;
  an_iv *iv = malloc((n + 1) * sizeof *iv);
  g->s = INT64_MAX, g->e = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    const an_op *o = &t->ops[dma[i]];
    r->staged_role[dma[i]] = flag;
    r->staged_group[dma[i]] = (uint32_t)(g - r->pw);
    iv[i] = (an_iv){o->s, o->e};
    if (o->s < g->s) g->s = o->s, g->first = dma[i];
    if (o->e > g->e) g->e = o->e;
    g->bytes += o->bytes;
  }
  g->ndma = n;
  size_t m = an_union(iv, n);
  g->dma_time = an_total(iv, m);
  free(iv);
}

/* The calls of thread tid from call a to call b (indices; calls are sorted by start): pinwheel's,
 * found by pattern. */
static void flag_calls(an_report *r, int32_t tid, size_t a, size_t b) {
  for (size_t k = a; k <= b && k < r->t->ncalls; k++)
    if (r->t->calls[k].tid == tid) r->staged_call[k] = 1;
}

/* The collector's marked operations: one staged copy per (device, correlation id). */
static void marked_groups(an_report *r, const cix *byc, size_t nc) {
  const an_trace *t = r->t;
  size_t *dma = malloc((nc + 1) * sizeof *dma);
  for (size_t i = 0; i < nc;) {
    size_t j = i;
    while (j < nc && byc[j].corr == byc[i].corr)
      j++;
    const an_call *call = an_call_of(t, byc[i].corr);
    if (!call || !call->staged) { /* not a program's call that pinwheel staged */
      i = j;
      continue;
    }
    size_t nd = 0;
    long ring = -1;
    int dir = -1, dev = -1;
    for (size_t k = i; k < j; k++) {
      size_t oi = byc[k].op;
      const an_op *o = &t->ops[oi];
      if (!o->pw || o->type != AN_MEMCPY || (dev >= 0 && o->dev != dev)) continue;
      dev = o->dev;
      if (o->ckind == AN_CK_D2D && dir != AN_CK_D2H) {
        if (ring < 0 || t->ops[oi].s > t->ops[ring].s) ring = (long)oi; /* the last piece */
        dir = AN_CK_H2D;
      } else if (o->ckind == AN_CK_H2D && o->srck == AN_MK_PINNED && dir != AN_CK_D2H) {
        dma[nd++] = oi, dir = AN_CK_H2D;
      } else if (o->ckind == AN_CK_D2H && o->dstk == AN_MK_PINNED && dir != AN_CK_H2D) {
        dma[nd++] = oi, dir = AN_CK_D2H;
      }
    }
    an_pwgroup *g = nd ? new_group(r) : NULL;
    if (g) {
      g->dir = (uint8_t)dir;
      g->dev = dev;
      close_group(r, g, dma, nd, AN_PW_DMA);
      g->stream = ring >= 0 ? t->ops[ring].stream : t->ops[g->first].stream;
      g->count_op = ring >= 0 ? (size_t)ring : g->first;
      for (size_t k = i; k < j; k++) { /* every ring piece of this copy */
        size_t oi = byc[k].op;
        if (t->ops[oi].pw && t->ops[oi].ckind == AN_CK_D2D && t->ops[oi].dev == dev) {
          r->staged_role[oi] = AN_PW_RING;
          r->staged_group[oi] = (uint32_t)(g - r->pw);
        }
      }
    }
    i = j;
  }
  free(dma);
}

/* D2H: one call of a thread in a run of chunks, each followed by an event record; a run that
 * ended becomes a staged copy when its chunks are all of one size but the last. */
static void d2h_chunks(an_report *r, thr *th, size_t k, long oi, int is_event, int is_record) {
  const an_trace *t = r->t;
  const an_op *o = oi >= 0 ? &t->ops[oi] : NULL;
  int chunk = o && o->type == AN_MEMCPY && o->ckind == AN_CK_D2H && o->srck == AN_MK_DEVICE &&
              o->dstk == AN_MK_PINNED && !r->staged_role[oi];
  if (th->want_record && !is_record) th->nchunk = 0; /* a chunk without its record: not ours */
  if (chunk && th->nchunk && t->ops[th->chunk[0]].bytes != o->bytes &&
      t->ops[th->chunk[th->nchunk - 1]].bytes != t->ops[th->chunk[0]].bytes)
    th->nchunk = 0;                        /* sizes: all equal but the last */
  if (!chunk && !is_event && th->nchunk) { /* the run ended */
    int ok = th->nchunk >= 2;
    for (size_t i = 0; ok && i + 1 < th->nchunk; i++)
      ok = t->ops[th->chunk[i]].bytes == t->ops[th->chunk[0]].bytes;
    if (ok && t->ops[th->chunk[th->nchunk - 1]].bytes > t->ops[th->chunk[0]].bytes) ok = 0;
    an_pwgroup *g = ok ? new_group(r) : NULL;
    if (g) {
      g->dir = AN_CK_D2H;
      g->dev = t->ops[th->chunk[0]].dev;
      g->stream = t->ops[th->chunk[0]].stream;
      close_group(r, g, th->chunk, th->nchunk, AN_PW_DMA);
      g->count_op = g->first;
      flag_calls(r, th->tid, th->call0, th->last);
    }
    th->nchunk = 0;
  }
  if (chunk && !th->nchunk) th->call0 = k;
  if (chunk) push(&th->chunk, &th->nchunk, &th->capchunk, (size_t)oi);
  if (th->nchunk) th->last = k;
  th->want_record = chunk;
}

/* H2D through the ring: one copy call of a thread, a DMA on a side stream or the ring copy (or
 * its first piece) that closes the DMAs before it. */
static void h2d_ring(an_report *r, thr *th, size_t k, long oi, const side *sides, size_t m) {
  const an_trace *t = r->t;
  const an_op *o = &t->ops[oi];
  if (o->ckind == AN_CK_H2D && o->srck == AN_MK_PINNED && o->dstk == AN_MK_DEVICE &&
      is_side(sides, m, o->dev, o->stream)) {
    if (!th->ndma) th->call0 = k;
    push(&th->dma, &th->ndma, &th->capdma, (size_t)oi);
    th->dma_bytes += o->bytes;
  } else if (o->ckind == AN_CK_D2D && th->ndma) {
    uint64_t want = o->bytes + (th->ring1 >= 0 ? t->ops[th->ring1].bytes : 0);
    if (want == th->dma_bytes && t->ops[th->dma[0]].dev == o->dev) {
      an_pwgroup *g = new_group(r);
      if (g) {
        g->dir = AN_CK_H2D;
        g->dev = o->dev;
        g->stream = o->stream;
        close_group(r, g, th->dma, th->ndma, AN_PW_DMA);
        g->count_op = (size_t)oi;
        r->staged_role[oi] = AN_PW_RING;
        r->staged_group[oi] = (uint32_t)(g - r->pw);
        if (th->ring1 >= 0) {
          r->staged_role[th->ring1] = AN_PW_RING;
          r->staged_group[th->ring1] = (uint32_t)(g - r->pw);
        }
        flag_calls(r, th->tid, th->call0, k);
      }
      th->ndma = 0, th->dma_bytes = 0, th->ring1 = -1;
    } else if (want < th->dma_bytes && th->ring1 < 0) {
      th->ring1 = oi; /* the ring wrapped: the second piece comes next */
    } else {          /* not the pattern: forget these DMAs */
      th->ndma = 0, th->dma_bytes = 0, th->ring1 = -1;
    }
  }
}

/* The streams that carry only pinned -> device copies (pinwheel's side streams), one entry per
 * stream, sorted for is_side. */
static side *side_streams(const an_trace *t, size_t *n) {
  side *sides = malloc((t->nops + 1) * sizeof *sides);
  size_t ns = 0, m = 0;
  for (size_t i = 0; i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    sides[ns++] = (side){o->dev, o->stream,
                         o->type == AN_MEMCPY && o->ckind == AN_CK_H2D && o->srck == AN_MK_PINNED &&
                             o->dstk == AN_MK_DEVICE};
  }
  qsort(sides, ns, sizeof *sides, cmp_side);
  for (size_t i = 0; i < ns; i++) { /* one entry per stream: only DMAs if every op was one */
    if (m && !cmp_side(&sides[m - 1], &sides[i]))
      sides[m - 1].only_dma &= sides[i].only_dma;
    else
      sides[m++] = sides[i];
  }
  *n = m;
  return sides;
}

void an_pass_pinwheel(an_report *r) {
  const an_trace *t = r->t;
  r->staged_role = calloc(t->nops + 1, 1);
  r->staged_group = calloc(t->nops + 1, sizeof *r->staged_group);
  r->staged_call = calloc(t->ncalls + 1, 1);
  cix *byc = malloc((t->nops + 1) * sizeof *byc);
  size_t nc = 0, m;
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].corr >= 0) byc[nc++] = (cix){t->ops[i].corr, i};
  qsort(byc, nc, sizeof *byc, cmp_cix);
  marked_groups(r, byc, nc);
  r->pw_marked = r->npw;
  side *sides = side_streams(t, &m);
  thr *ts = NULL;
  size_t nt = 0, capt = 0;
  for (size_t k = 0; k < t->ncalls; k++) { /* calls are sorted by start */
    const an_call *c = &t->calls[k];
    thr *th = thread_of(&ts, &nt, &capt, c->tid);
    if (!th) break;
    const char *nm = an_name(t, c->name);
    int is_record = !strncmp(nm, "cudaEventRecord", 15);
    int is_event = !strncmp(nm, "cudaEvent", 9) || !strncmp(nm, "cuEvent", 7);
    long oi = c->api == AN_API_MEMCPY ? op_of(byc, nc, c->corr) : -1;
    d2h_chunks(r, th, k, oi, is_event, is_record);
    if (oi < 0 || t->ops[oi].type != AN_MEMCPY) continue;
    if (r->staged_role[oi]) continue; /* the collector marked it: grouped above */
    h2d_ring(r, th, k, oi, sides, m);
  }
  for (size_t i = 0; i < nt; i++)
    free(ts[i].dma), free(ts[i].chunk);
  free(ts);
  free(byc);
  free(sides);
}

/* For figures: does op i count as a copy of its own (1), as the staged copy it belongs to (2:
 * count the group's bytes here), or not at all (0: a DMA of a staged copy, counted once)? */
int an_pw_counts(const an_report *r, size_t i, uint64_t *bytes) {
  if (!r->staged_role || !r->staged_role[i]) {
    *bytes = r->t->ops[i].bytes;
    return 1;
  }
  const an_pwgroup *g = &r->pw[r->staged_group[i]];
  *bytes = g->bytes;
  return g->count_op == i ? 2 : 0;
}
