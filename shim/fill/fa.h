/* fa.h — uploads made ahead of the program's own copy (PINWHEEL_FILL_AHEAD; DESIGN.md §11): the
 * interface of fill-ahead's layer (shim/fill/), over the engine and core, called by the front ends
 * and the top file.
 *
 * Owns: the replaced allocations, the scratch buffers, the upload thread and its stream.
 * Must never: include anything but core, the engine and itself, or a CUDA header; call CUDA in the
 * fill (it runs in the program's memmove), let a copy use an upload that was revoked, reuse
 * scratch memory before the DMAs and device copies using it completed.
 */

/* CuPy's cp.asarray (like XLA's staging) fills a buffer of its own pinned memory with one memmove,
 * then copies that buffer to the device: the fill and the DMA come one after the other, and
 * nothing outside the program knows where the bytes go until the copy is asked for.  With
 * fill-ahead on:
 *   - the pinned allocations of FA_MIN_BYTES or more through the runtime (cudaHostAlloc without
 *     write-combining, cudaMallocHost) or the driver (cuMemHostAlloc, cuMemAllocHost: the static
 *     CUDA runtime's, CuPy's wheels among them) are pinwheel's: private anonymous memory
 *     registered with CUDA (portable, mapped), which the source guard can protect (guard.h), not
 *     inherited by a fork's child (MADV_DONTFORK; CUDA's own the child would share);
 *   - a large memmove or memcpy into such memory (the fill) runs on the staging threads in chunks,
 *     and pinwheel's upload thread DMAs each chunk, as soon as it is filled, into a scratch buffer
 *     on the allocation's device; when the fill returns, every byte is in place and the whole
 *     pages of its range are guarded (revocably);
 *   - the program's cudaMemcpyAsync (or the driver's copy) of bytes of that range to that
 *     device then becomes a device-to-device copy from the scratch, on the program's stream,
 *     after the uploads (the partial first and last pages, which the guard does not cover, come
 *     from the pinned memory itself); the guard is released.
 * An upload is revoked, and the program's copy is CUDA's own, as soon as anything may have
 * changed its bytes: a write of the program (the guard), a free, unmap or fork (the guard), a
 * new fill over it, a copy whose destination overlaps it, any kernel launch (a kernel may write
 * the memory through its device mapping), a device reset, or when it was not used within
 * FA_EXPIRE_MS.  Limits (docs/PROMISES.md): writes that no hook of pinwheel sees (a kernel
 * launched through a path pinwheel does not intercept, a memset through a device mapping of the
 * memory, another process) are not seen.
 */
#ifndef PW_FA_H
#define PW_FA_H

#include <stddef.h>

#include "engine.h"

#define FA_EXPIRE_MS 100        /* an upload not used within this is revoked */
#define FA_MIN_BYTES (1u << 20) /* smaller allocations and fills are CUDA's and glibc's */

/* From the options, once (pinwheel.c): scratch bytes per device (0: fill-ahead off), the staging
 * chunk, the staging threads, the guard (NULL: off). */
void pw_fa_configure(size_t scratch, size_t chunk, int threads, const pw_guard_ops *guard);
int pw_fa_on(void);

/* Uploads live now (being filled, or filled and not used): the hot paths' test, a relaxed load. */
extern atomic_int pw_fa_live_count;
static inline int pw_fa_live(void) {
  return atomic_load_explicit(&pw_fa_live_count, memory_order_relaxed) != 0;
}

/* ---- the program's pinned allocations (the runtime and driver front ends) ---- */
/* n bytes of pinwheel's pinned memory for an allocation made with these flags (given back by
 * pw_fa_host_flags) on the calling thread's current device, ops being the front end's: 0 and *p,
 * or -1 (nothing done: the caller makes the real call).  Refused where the front end would not
 * stage (context_ok: for the driver, a context other than the device's primary one) and on a
 * device whose uploads another front end set up (the first one's ops are the device's). */
int pw_fa_host_alloc(const pw_ops *ops, void **p, size_t n, unsigned flags);
/* p is the start of such an allocation: its uploads are revoked and waited for, it is unregistered
 * and unmapped: 1.  Else 0 (not pinwheel's: the caller makes the real call). */
int pw_fa_host_free(void *p);
/* p lies in such an allocation: 1 and its flags in *flags (may be NULL); else 0. */
int pw_fa_host_flags(const void *p, unsigned *flags);

/* ---- the fill (app_memcpy.c, pw_depth raised) ----
 * n bytes from src into dst, which do not overlap: 1 when done (with uploads), 0 when not taken
 * (dst is not in such an allocation, or no scratch is free: the caller copies as before). */
int pw_fa_fill(void *dst, const void *src, size_t n);

/* ---- copies and launches (the front ends) ---- */
/* A copy the engine did not stage: 0 when it was made from an upload (the caller reports
 * success), -1 when the caller makes the real call (having revoked what the copy may write). */
int pw_fa_copy(const pw_transfer *c);
/* Revoke every live upload (a kernel launch: reason PW_FA_LAUNCH). */
void pw_fa_revoke_all(int reason);
/* The program used something that can order a write of its pinned memory after a fill from the
 * GPU's side, out of pinwheel's sight (a host function or stream callback, a stream wait on a
 * host value, an external semaphore, a graph, an IPC event): every upload is given up and none
 * is made or used again in this process (PW_FA_STREAM_ORDERED); what is a name for the log. */
void pw_fa_taint(const char *what);
/* Revoke the uploads overlapping [p, p+n) (callers that write there). */
void pw_fa_revoke_range(const void *p, size_t n, int reason);
/* cudaDeviceReset of device: its uploads are revoked and waited for, its scratch, stream and
 * events forgotten (the reset frees them), its allocations forgotten (the reset ends them). */
void pw_fa_device_reset(int device);
/* The program is about to release device's primary context through the driver: the uploads made
 * there through ops (the driver's) are given up and their GPU work waited for (2 s at most); the
 * rest stays, as the release may not be the last. */
void pw_fa_device_quiesce(int device, const pw_ops *ops);
/* That release destroyed the context: what fill-ahead made there through ops goes as at a device
 * reset (no CUDA call); made through another front end (which holds its own reference), it
 * stays. */
void pw_fa_context_released(int device, const pw_ops *ops);
void pw_fa_after_fork_child(void);

#ifdef PW_TESTING
/* Tests: forget everything (threads included: the upload thread is asked to stop and waited
 * for), the options back to off. */
void pw_fa_test_reset(void);
/* Tests: called by a device reset once it gave the device's uploads up. */
extern void (*pw_fa_test_in_reset)(void);
/* Tests: what exit does (the upload thread stops calling CUDA). */
void pw_fa_test_exit(void);
/* Tests: uploads not used within ms are given up (FA_EXPIRE_MS otherwise). */
void pw_fa_test_expire_ms(unsigned ms);
/* Tests: a copy waits this long at most for its upload's record (50 ms otherwise). */
void pw_fa_test_take_wait_ms(unsigned ms);
#endif

#endif
