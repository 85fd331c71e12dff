/* gate.c — the setup gate: the engine's background setup calls CUDA only through it (pw.h).
 *
 * Owns: the gate's state (closed at exit, the one call inside CUDA, the setup threads marked),
 * and close_gate, the atexit handler that stops new setup calls.  Must never: wait at exit for
 * more than the one setup call already inside CUDA; call CUDA itself, or anything of engine/,
 * front/ or collector/ (the backends in front/ call pw_setup_enter and pw_setup_leave).
 */
#define _GNU_SOURCE
#include "pw.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* ---- the setup gate (pw.h) ----
 * Exit runs the atexit handlers newest first.  CUDA registers its teardown at its first call,
 * before any setup; the engine registers its bounded wait for setups when it starts the first
 * setup thread; close_gate is registered after that (pw_setup_arm, once a copy found a setup
 * under way, and again by the setup thread's first gated call, in case exit began before the
 * copy returned), so it runs first: no new setup call starts, the one inside CUDA is waited for,
 * the setup ends at its next call, and the engine's wait then returns at once. */
static atomic_int gate_closed, gate_inflight, gate_armed;
static __thread __attribute__((tls_model("initial-exec"))) int on_setup_thread;

static void close_gate(void) {
  if (atomic_exchange(&gate_closed, 1)) return;
  struct timespec ms = {0, 1000000};
  while (atomic_load(&gate_inflight) > 0)
    nanosleep(&ms, NULL);
}

void pw_setup_arm(void) {
  if (atomic_load_explicit(&gate_armed, memory_order_relaxed) >= 2) return;
  if (atomic_fetch_add(&gate_armed, 1) < 2) atexit(close_gate);
}

int pw_setup_enter(void) {
  /* the setup thread's own registration: the copy that started it may not have returned yet */
  if (on_setup_thread) pw_setup_arm();
  atomic_fetch_add(&gate_inflight, 1);
  if (atomic_load(&gate_closed)) {
    atomic_fetch_sub(&gate_inflight, 1);
    /* its refused calls would warn about a pool nobody will use */
    if (on_setup_thread) pw_log_mute_thread();
    return 0;
  }
  return 1;
}

void pw_setup_leave(void) {
  atomic_fetch_sub(&gate_inflight, 1);
}

int pw_setup_busy(void) {
  return atomic_load(&gate_inflight) > 0;
}

void pw_setup_mark_thread(void) {
  on_setup_thread = 1;
}

int pw_setup_on_thread(void) {
  return on_setup_thread;
}

void pw_setup_after_fork_child(void) {
  atomic_store(&gate_inflight, 0); /* the setup threads are the parent's */
  atomic_store(&gate_closed, 0);
}
