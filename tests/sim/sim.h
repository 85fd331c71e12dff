/* sim.h — a simulated CUDA backend for the staging engine (DESIGN.md §6).
 *
 * Streams are FIFO queues.  Queued work runs only when the simulation takes a step, and each step
 * runs the head of a random runnable stream (seeded), so any order CUDA could choose can occur;
 * an event wait holds its stream until the event's recorded work has run.  A missing dependency
 * therefore shows up as wrong bytes.  "Device" and "pinned" memory are plain host memory that the
 * simulation remembers the kind of. */
#ifndef PW_SIM_H
#define PW_SIM_H
#include <stddef.h>

#include "engine.h"

extern const pw_ops sim_ops;

void sim_reset(unsigned seed, int ndevices);
void *sim_device_alloc(int device, size_t n); /* memory the simulation calls device memory */
/* Two device allocations of n bytes each, the second right after the first (*second). */
void *sim_device_alloc_pair(int device, size_t n, void **second);
void *sim_stream_new(int device);
void sim_set_device(int device); /* this thread's current device (its primary context) */
int sim_get_device(void);
/* This thread's current context: 0 its device's primary one, else one of the thread's own (the
 * test's name for it, on the current device).  set_device makes the primary one current;
 * push_context / pop_context put back exactly the context the thread had. */
void sim_set_context(int ctx);
int sim_context(void);
/* An error this thread has not read yet (the runtime's last error): error_pending reports it,
 * clear_error forgets it.  sim_pending_error() is what is left of it. */
void sim_set_pending_error(int err);
int sim_pending_error(void);
/* Queue fn(arg) on a stream, to run in stream order (a "kernel" of the test). */
void sim_enqueue_callback(void *stream, void (*fn)(void *), void *arg);
/* What the runtime would do for a copy it was not asked to stage: pageable source consumed at
 * the call, the transfer queued on the stream. */
void sim_real_copy(void *dst, const void *src, size_t n, void *stream);
int sim_stream_sync(void *stream); /* runs steps until the stream is empty */
void sim_drain(void);              /* runs every queued op */

/* Lazy device: queued work runs only when the host waits (event or stream sync), so every
 * reservation that wraps the pinned arena meets a DMA still in flight. */
void sim_set_lazy(int on);

/* Fault injection. */
void sim_set_capturing(void *stream, int on);
void sim_fail_host_alloc(int on);
/* Each host_alloc (a device's pool) takes ms milliseconds first, as pinning a large pool does: the
 * first copies of other threads meet a setup in progress.  0 (sim_reset's) : at once. */
void sim_set_host_alloc_delay_ms(int ms);
void sim_fail_device_alloc(int on);
void sim_fail_copy_after(long n); /* the n-th copy_async from now fails (-1: never) */
void sim_no_wait_value(int on);   /* wait_host_value reports "not supported" */
/* The device's context goes (cudaDeviceReset): every event made there before is stale from now
 * on, and a call given one fails and counts in sim_bad_handles (its streams and memory stay). */
void sim_device_reset(int device);

/* What went wrong inside the simulation (engine misuse), counted.  A host wait that nothing can
 * move on counts as a deadlock; while a stream waits for a host value (wait_host_value) or a
 * callback runs, the wait yields to other threads for up to 5 s first. */
extern long sim_deadlocks, sim_pageable_dma, sim_bad_handles;
extern atomic_int sim_host_waiters; /* threads inside such a yielding wait right now */
#endif
