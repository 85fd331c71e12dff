/* window.c — the capture window of a trace: which CUDA calls it holds (DESIGN.md §8).
 * Owns: PINWHEEL_TRACE_DELAY / _DURATION (a time window from the first CUDA call),
 * PINWHEEL_TRACE_CAPTURE=cudaProfilerApi (the program's cudaProfilerStart/Stop ranges) and
 * PINWHEEL_TRACE_STEPS=A-B (iterations A to B of the program's loop, found from the launches and
 * copies the front ends report while it runs); the writer asks it which records to keep.
 * The window is a set of intervals of CUPTI time.  A call is in when its API record starts in
 * it; its GPU work goes with it (trace.c); other records by their start.  Records are dropped
 * in the writer, never by switching CUPTI's activity kinds: the boundaries are then exact, a
 * call never loses its GPU operations, and the file holds whole calls only.
 * Must never: slow the program's calls when no step range is asked (the front ends test
 * pw_trace_watch, a relaxed load), or keep watching once the last iteration asked for ended.
 * How it works: the comment below.
 */

/* The loop, cheaply: per stream, each launch (the kernel's function and call site) or copy (its
 * size and direction) is a signature; a rolling hash of the stream's sequence of signatures is
 * kept in a ring.  A signature whose last three occurrences are one period apart, the stream
 * running one same sequence in both periods, is a candidate; each op on its stream must then be
 * the op one period before, else the candidate was a repetition inside one iteration (autocast's
 * casts of x, w1 and b1 in a row looked like a loop of period 1 in a PyTorch loop's first
 * iteration) and is dropped.  The anchor is an H2D candidate, taken at once (a loop iteration
 * begins by copying its batch in, as the report's step inference prefers), else another one whose
 * stream made no H2D copy in its two periods nor in the period before them (a repetition right
 * after an input copy is likelier the layers of one iteration).  Until the window opens, the
 * anchor is checked op by op too, and an H2D candidate replaces another.  Iteration N begins at
 * the anchor's Nth occurrence on its stream (start-up included, should the anchor occur there):
 * an H2D anchor is recognised at iteration 3 (4 when the first iteration differs from the
 * others), any other begins iteration 4 at the earliest: A >= 3.  PINWHEEL_LOG=debug says which
 * anchor was taken (kind, period in ops, iteration) and which were dropped.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw.h"

#define MAX_SPANS 256
#define RING 65536   /* signatures kept per stream: a period is at most RING / 2 - 1 */
#define SIGS 16384   /* signatures followed per stream (a hash table; cleared when full) */
#define STREAMS 16   /* streams followed */
#define B 1000003ULL /* the rolling hash's base */
#define CANDS 32     /* candidates followed at once */

_Atomic int pw_trace_watch;

static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int det_committed; /* the window opened: det.a_stream and det.a_sig are set */
static pw_window win;            /* the live window; the writer takes copies of it */

typedef struct sig_ent {
  uint64_t sig;
  uint64_t last, prev; /* positions (1-based) of its last two occurrences */
  uint64_t count;      /* its occurrences */
} sig_ent;

typedef struct stream_st {
  void *stream;
  uint64_t pos;        /* ops so far */
  uint64_t hash[RING]; /* prefix hash after position p: hash[p % RING] */
  uint64_t last_h2d;   /* position of its last H2D copy, 0: none */
  sig_ent *tab;
  size_t ntab;
} stream_st;

/* A signature whose last three occurrences on its stream were one period apart: the anchor of the
 * loop, or a repetition inside one iteration, until the stream stops repeating its period. */
typedef struct cand {
  stream_st *s;
  uint64_t sig, period, found; /* found: its position when it became a candidate */
  int h2d;
} cand;

static struct {
  stream_st *s[STREAMS];
  int ns;
  cand c[CANDS];
  int nc, chosen; /* chosen: the anchor among them, -1: none yet */
  void *a_stream; /* the anchor, once final (the window opened) */
  uint64_t a_sig, iter, first, last;
} det;

static uint64_t powb(uint64_t e) {
  uint64_t r = 1, b = B;
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return r;
}

/* the hash of the stream's signatures at positions [a, b), 1 <= a < b <= pos */
static uint64_t seq(const stream_st *s, uint64_t a, uint64_t b) {
  return s->hash[(b - 1) % RING] - s->hash[(a - 1) % RING] * powb(b - a);
}

static void span_open(void) {
  if (win.open || win.nspans >= MAX_SPANS) return;
  win.on[win.nspans] = pw_trace_now();
  win.off[win.nspans] = UINT64_MAX;
  win.nspans++;
  win.open = 1;
}

static void span_close(void) {
  if (!win.open) return;
  win.off[win.nspans - 1] = pw_trace_now();
  win.open = 0;
}

void pw_trace_window_init(uint64_t t0, char *what, size_t n) {
  pthread_mutex_lock(&wlock);
  memset(&win, 0, sizeof win);
  for (int i = 0; i < det.ns; i++) /* afresh (once per process, but the tests run it again) */
    free(det.s[i]->tab), free(det.s[i]);
  memset(&det, 0, sizeof det);
  det.chosen = -1;
  atomic_store(&det_committed, 0);
  long long delay = pw_option_get(PW_OPT_TRACE_DELAY), dur = pw_option_get(PW_OPT_TRACE_DURATION);
  win.lo = t0 + (uint64_t)delay * 1000000ull;
  win.hi = dur ? win.lo + (uint64_t)dur * 1000000ull : UINT64_MAX;
  win.use_spans = pw_option_get(PW_OPT_TRACE_CAPTURE) == 1;
  long long steps = pw_option_get(PW_OPT_TRACE_STEPS);
  if (steps) {
    win.use_spans = 1;
    det.first = (uint64_t)steps >> 32;
    det.last = (uint64_t)steps & 0xffffffffu;
    atomic_store(&pw_trace_watch, 1);
  }
  win.windowed = delay || dur || win.use_spans;
  pthread_mutex_unlock(&wlock);
  size_t o = 0;
  what[0] = 0;
  if (steps)
    o += (size_t)snprintf(what + o, n - o, "iterations %llu-%llu", (unsigned long long)det.first,
                          (unsigned long long)det.last);
  else if (win.use_spans)
    o += (size_t)snprintf(what + o, n - o, "cudaProfilerStart-Stop");
  if ((delay || dur) && o < n)
    o += (size_t)snprintf(what + o, n - o, "%scalls from %lld.%03lld s", o ? ", " : "",
                          delay / 1000, delay % 1000);
  if (dur && o < n) snprintf(what + o, n - o, " for %lld.%03lld s", dur / 1000, dur % 1000);
}

void pw_trace_window_get(pw_window *out) {
  pthread_mutex_lock(&wlock);
  *out = win;
  pthread_mutex_unlock(&wlock);
}

int pw_window_keep(const pw_window *w, uint64_t ts) {
  if (!w->windowed) return 1;
  if (ts < w->lo || ts >= w->hi) return 0;
  if (!w->use_spans) return 1;
  for (int i = w->nspans - 1; i >= 0; i--)
    if (ts >= w->on[i]) return ts < w->off[i];
  return 0;
}

void pw_trace_profiler(int on) {
  if (!pw_trace_active() || pw_option_get(PW_OPT_TRACE_CAPTURE) != 1 ||
      pw_option_get(PW_OPT_TRACE_STEPS))
    return;
  pthread_mutex_lock(&wlock);
  if (on)
    span_open();
  else
    span_close();
  pthread_mutex_unlock(&wlock);
}

static stream_st *stream_of(void *stream) {
  for (int i = 0; i < det.ns; i++)
    if (det.s[i]->stream == stream) return det.s[i];
  if (det.ns == STREAMS) return NULL;
  stream_st *s = calloc(1, sizeof *s);
  if (s) s->tab = calloc(SIGS, sizeof *s->tab);
  if (!s || !s->tab) {
    if (s) free(s);
    return NULL;
  }
  s->stream = stream;
  det.s[det.ns++] = s;
  return s;
}

static sig_ent *entry(stream_st *s, uint64_t sig) {
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

/* An occurrence of the anchor: iteration iter begins. */
static void anchor_at(void) {
  if (det.iter >= det.first && det.iter <= det.last && !win.open && !win.nspans) {
    if (det.iter > det.first)
      pw_log(PW_LOG_WARN,
             "trace steps: the loop was recognised at iteration %llu; the trace "
             "starts there",
             (unsigned long long)det.iter);
    span_open();
  }
  if (det.iter == det.last + 1) {
    span_close();
    atomic_store(&pw_trace_watch, 0);
    for (int i = 0; i < det.ns; i++)
      free(det.s[i]->tab), free(det.s[i]);
    det.ns = 0;
  }
}

/* the signature at position p of the stream (1 <= p <= pos, pos - p < RING), from the hashes */
static uint64_t sig_at(const stream_st *s, uint64_t p) {
  return s->hash[p % RING] - s->hash[(p - 1) % RING] * B - 1;
}

static const char *cand_kind(const cand *c) {
  return c->h2d ? "an H2D copy" : "a launch or copy";
}

/* Each candidate on this stream must still repeat its period: the op just made (at position i)
 * is the one made one period before.  One that does not was a repetition inside an iteration
 * (three casts in a row, the layers of a model): it is dropped, and with it the anchor it was. */
static void cands_check(const stream_st *s, uint64_t i, uint64_t sig) {
  int n = 0;
  for (int c = 0; c < det.nc; c++) {
    cand *x = &det.c[c];
    if (x->s == s && sig_at(s, i - x->period) != sig) {
      if (c == det.chosen) {
        pw_log(PW_LOG_DEBUG,
               "trace steps: the anchor (%s, period %llu ops) stopped repeating at op %llu of "
               "its stream; looking again",
               cand_kind(x), (unsigned long long)x->period, (unsigned long long)i);
        det.chosen = -1;
      }
      continue;
    }
    if (c == det.chosen) det.chosen = n;
    det.c[n++] = *x;
  }
  det.nc = n;
}

/* The anchor is taken: iteration iter (its occurrences so far on its stream) begins now. */
static void choose(int c, uint64_t count) {
  cand *x = &det.c[c];
  det.chosen = c;
  det.iter = count;
  pw_log(PW_LOG_DEBUG,
         "trace steps: loop recognised: anchor %s (signature %#llx) on stream %p, period %llu "
         "ops, found at op %llu of its stream, iteration %llu begins",
         cand_kind(x), (unsigned long long)x->sig, x->s->stream, (unsigned long long)x->period,
         (unsigned long long)x->found, (unsigned long long)count);
}

/* A new candidate (the op at i, whose last three occurrences k, j, i are one period apart with
 * one same sequence in both periods), taken as the anchor when it is the best so far: an H2D copy
 * at once (before any other), another only when its stream made no H2D copy in its two periods
 * nor in the period before them (such a repetition is likelier one inside an iteration that began
 * by copying its input in) and it is not already past the last iteration asked for. */
static void cands_add(stream_st *s, uint64_t sig, int h2d, uint64_t k, uint64_t i, uint64_t count) {
  uint64_t period = (i - k) / 2;
  for (int c = 0; c < det.nc; c++)
    if (det.c[c].s == s && det.c[c].sig == sig) return;
  if (h2d && count > det.last + 1) { /* the loop, found after the iterations asked for */
    pw_log(PW_LOG_DEBUG, "trace steps: the loop was recognised at iteration %llu, past %llu",
           (unsigned long long)count, (unsigned long long)det.last);
    atomic_store(&pw_trace_watch, 0);
    return;
  }
  if (det.nc == CANDS || count > det.last) return;
  int c = det.nc++;
  det.c[c] = (cand){s, sig, period, i, h2d};
  int chosen_h2d = det.chosen >= 0 && det.c[det.chosen].h2d;
  if (h2d && !chosen_h2d) {
    choose(c, count);
    anchor_at(); /* an H2D anchor may begin iteration A at once */
  } else if (!h2d && det.chosen < 0 && (!s->last_h2d || s->last_h2d + period < k)) {
    choose(c, count); /* its next occurrence begins the next iteration (4 at the earliest) */
  }
}

void pw_trace_step_op(uint64_t sig, void *stream, int h2d) {
  /* once the window opened, only the anchor's occurrences take the lock */
  if (atomic_load_explicit(&det_committed, memory_order_acquire) &&
      (stream != det.a_stream || sig != det.a_sig))
    return;
  pthread_mutex_lock(&wlock);
  if (!atomic_load_explicit(&pw_trace_watch, memory_order_relaxed)) goto out;
  if (atomic_load_explicit(&det_committed, memory_order_relaxed)) {
    det.iter++;
    anchor_at();
    goto out;
  }
  stream_st *s = stream_of(stream);
  if (!s) goto out;
  uint64_t i = ++s->pos;
  s->hash[i % RING] = s->hash[(i - 1) % RING] * B + sig + 1;
  sig_ent *e = entry(s, sig);
  uint64_t j = e->last, k = e->prev;
  e->prev = j, e->last = i, e->count++;
  cands_check(s, i, sig);
  if (h2d) s->last_h2d = i;
  if (det.chosen >= 0 && det.c[det.chosen].s == s && det.c[det.chosen].sig == sig) {
    det.iter = e->count; /* the anchor again: the next iteration */
    anchor_at();
  } else if (k && i - j == j - k && i - k < RING / 2 && seq(s, k, j) == seq(s, j, i)) {
    cands_add(s, sig, h2d, k, i, e->count);
  }
  if (win.nspans && det.chosen >= 0 &&
      atomic_load_explicit(&pw_trace_watch, memory_order_relaxed)) {
    det.a_stream = det.c[det.chosen].s->stream, det.a_sig = det.c[det.chosen].sig;
    atomic_store_explicit(&det_committed, 1, memory_order_release); /* final: the fast path */
  }
out:
  pthread_mutex_unlock(&wlock);
}

void pw_trace_window_end(const char *path) {
  pthread_mutex_lock(&wlock);
  int never = win.use_spans && !win.nspans;
  unsigned long long a = det.first, b = det.last;
  pthread_mutex_unlock(&wlock);
  if (never && a)
    pw_log(PW_LOG_WARN,
           "trace %s: iterations %llu-%llu never came (no repeating launches or copies found, or "
           "fewer iterations); it holds no calls",
           path, a, b);
  else if (never)
    pw_log(PW_LOG_WARN, "trace %s: the program never called cudaProfilerStart; it holds no calls",
           path);
}

void pw_trace_window_fork_child(void) {
  pthread_mutex_init(&wlock, NULL);
  atomic_store(&pw_trace_watch, 0);
}
