/* elide.h — sync elision: a host sync of a stream that returns before the stream's work is done,
 * and the fences that keep the early return from being seen (docs/DESIGN.md, "Sync elision").
 *
 * The front ends call these around the program's calls; the module reaches CUDA only through the
 * pw_ops table each call brings.  Streams are the front ends' normalised handles: 1 is a device's
 * legacy stream, 2 a thread's per-thread stream (both told apart by the calling thread's current
 * device, and the per-thread one by the thread), anything else a stream object.
 * Must never: hold its lock across a wait on the GPU, or answer "elided" when in doubt.
 */
#ifndef PW_ELIDE_H
#define PW_ELIDE_H

#include "engine.h"

#include <stdatomic.h>

/* The reasons a sync is kept (made for real) are pw.h's PW_KEEP_LIST, counted in pw_st.sync_kept.
 */

/* PINWHEEL_SYNC: 1 elide (the default), 0 never. */
void pw_elide_configure(int on);

/* A host sync of stream s (its device `device`) that directly follows a copy pinwheel staged on s,
 * on this thread.  keep: -1, or the PW_KEEP_* reason the front end found why kernels may write
 * host memory (MAPPED: the program holds pinned, mapped or managed host memory; PAGEABLE_ACCESS:
 * the device reaches pageable memory), which makes the sync real.  Kept too (PW_KEEP_DEVICE) unless
 * the thread's current device is `device` and ops->context_ok holds (the driver front end: the
 * current context is the device's primary one; both: its state there was not released), since the
 * event recorded is made in the current context (runtime calls are taken to run in the primary
 * one).  Returns 1 when the sync may
 * return at once (an event was recorded on s: later work on other streams waits for it), else 0 and
 * the caller makes the real sync (the reason counted). Before an elision the previous one of s is
 * waited for: the host runs at most one sync ahead. */
int pw_elide_sync(const pw_ops *ops, void *s, int device, int keep);
/* A real sync of s (stream sync: s; device sync: s NULL) that began when pw_elide_now() said
 * `before` returned success: what was elided there until then is done, and the stream's host
 * writes queued until then with it (not what another thread queued or elided meanwhile). */
uint64_t pw_elide_now(void);
void pw_elide_synced(const pw_ops *ops, void *s, uint64_t before);

/* Work is about to be enqueued on stream t: it first waits for every elided sync of another
 * stream that may still be running.  With none in flight, one load; for a stream object whose
 * last fence covered every elision made since, a few loads and no lock or CUDA call. */
extern atomic_int pw_elide_live;
void pw_elide_fence_slow(const pw_ops *ops, void *t);
static inline void pw_elide_fence(const pw_ops *ops, void *t) {
  if (__builtin_expect(atomic_load_explicit(&pw_elide_live, memory_order_acquire) != 0, 0))
    pw_elide_fence_slow(ops, t);
}

/* Work that can write host memory was queued on s (a host function, a graph). */
void pw_elide_host_write(const pw_ops *ops, void *s);
/* Event e was recorded on s (after its fence). */
void pw_elide_recorded(const pw_ops *ops, void *e, void *s);
/* s was made to wait for event e (after its fence): s inherits e's host writes. */
void pw_elide_waits(const pw_ops *ops, void *s, void *e);

/* Before a question whose answer an elided sync would change: a query, sync or elapsed time of
 * event e (its elided syncs after e's record are waited for), a query of stream s. */
void pw_elide_settle_event(const pw_ops *ops, void *e);
void pw_elide_settle_stream(const pw_ops *ops, void *s);
/* Before a question about host memory some elided sync's work may write (cuDNN's error storage):
 * every elided sync in flight is waited for. */
void pw_elide_settle_all(const pw_ops *ops);
/* Memory or an event leaves the process (an IPC export): every elided sync is waited for and no
 * sync is elided any more. */
void pw_elide_stop(const pw_ops *ops);

/* Stream s (a stream object, not a default stream) is being destroyed: its handle, which a stream
 * made later may get, names no slot, no fenced stream and no stream with host writes any more. */
void pw_elide_forget_stream(void *s);
/* Event e is being destroyed: its handle, which an event made later may get, names no recorded
 * event any more (a new one must not inherit when e was recorded, or what e followed). */
void pw_elide_forget_event(void *e);

/* Device dev's primary context is about to go, or may (a reset, a release): its elided syncs in
 * flight are waited for while it surely lives (their events then kept for reuse). */
void pw_elide_device_wait(const pw_ops *ops, int dev);
/* ... and it is gone (before a reset's real call, or after a release that left it inactive): every
 * event made there is forgotten, in the slots and among those kept for reuse (the context freed
 * them: a later elision there makes its own), and no stream or event handle stays known (one made
 * later may get it).  No CUDA call. */
void pw_elide_device_forget(int dev);

void pw_elide_after_fork_child(void);

#ifdef PW_TESTING
/* Test hook: 1 the fence of other streams, 2 the host-write rule, 3 the settling of queries, 4 the
 * IPC stop, 5 the wait for the previous elided sync, 6 the forgetting of a destroyed event, 7 the
 * count of elisions that the fence's lock-free path trusts, 8 the primary-context rule: left out,
 * so a test proves it catches it. */
extern int pw_elide_test_drop;
/* Test: forget everything (between tests). */
void pw_elide_test_reset(void);
#endif

#endif
