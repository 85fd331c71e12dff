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

/* The loop: common/pw_loop.h's finder, op by op (pw_loop_live_op): per stream, each launch (the
 * kernel's function and call site) or copy (its size and direction) is a signature; the finder's
 * rule on a signature's last three occurrences (two equal periods in ops, one sequence) makes a
 * candidate, and each op on its stream must then be the op one period before, else the candidate
 * was a repetition inside one iteration (autocast's casts of x, w1 and b1 in a row looked like a
 * loop of period 1 in a PyTorch loop's first iteration) and is dropped.  The anchor is an H2D
 * candidate, taken at once (as the report's inference prefers), else another whose stream made no
 * H2D copy near it.  Iteration N begins at the anchor's Nth occurrence on its stream (start-up
 * included): an H2D anchor is recognised at iteration 3 (4 when the first iteration differs),
 * any other begins iteration 4 at the earliest: A >= 3.  Here: the window and the lock; once the
 * window opened, only the anchor's occurrences are counted.  PINWHEEL_LOG=debug says which anchor
 * was taken (kind, period in ops, iteration) and which were dropped.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw.h"
#include "pw_loop.h"

#define MAX_SPANS 256

_Atomic int pw_trace_watch;

static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int det_committed; /* the window opened: det.a_stream and det.a_sig are set */
static pw_window win;            /* the live window; the writer takes copies of it */

static struct {
  pw_loop_live L;
  void *a_stream; /* the anchor, once final (the window opened) */
  uint64_t a_sig, iter, first, last;
} det;

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
  pw_loop_live_free(&det.L); /* afresh (once per process, but the tests run it again) */
  memset(&det, 0, sizeof det);
  pw_loop_live_init(&det.L, 0);
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
    det.L.last = det.last;
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
    pw_loop_live_free(&det.L);
  }
}

static const char *cand_kind(const pw_loop_cand *c) {
  return c->h2d ? "an H2D copy" : "a launch or copy";
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
  pw_loop_ev ev;
  int fl = pw_loop_live_op(&det.L, stream, sig, h2d, &ev);
  if (fl & PW_LOOP_DROPPED)
    pw_log(PW_LOG_DEBUG,
           "trace steps: the anchor (%s, period %llu ops) stopped repeating at op %llu of "
           "its stream; looking again",
           cand_kind(&ev.was), (unsigned long long)ev.was.period, (unsigned long long)ev.at);
  if (fl & PW_LOOP_LATE) {
    pw_log(PW_LOG_DEBUG, "trace steps: the loop was recognised at iteration %llu, past %llu",
           (unsigned long long)ev.iter, (unsigned long long)det.last);
    atomic_store(&pw_trace_watch, 0);
  }
  if (fl & PW_LOOP_TAKEN) {
    det.iter = ev.iter;
    pw_log(PW_LOG_DEBUG,
           "trace steps: loop recognised: anchor %s (signature %#llx) on stream %p, period %llu "
           "ops, found at op %llu of its stream, iteration %llu begins",
           cand_kind(&ev.anchor), (unsigned long long)ev.anchor.sig, ev.anchor.stream,
           (unsigned long long)ev.anchor.period, (unsigned long long)ev.anchor.found,
           (unsigned long long)ev.iter);
  }
  if (fl & PW_LOOP_ITER) {
    det.iter = ev.iter;
    anchor_at();
  }
  if (win.nspans && det.L.chosen >= 0 &&
      atomic_load_explicit(&pw_trace_watch, memory_order_relaxed)) {
    det.a_stream = det.L.c[det.L.chosen].stream, det.a_sig = det.L.c[det.L.chosen].sig;
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
