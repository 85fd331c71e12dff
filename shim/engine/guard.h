/* guard.h — the source guard of deferred staging (guard.c).
 *
 * Must never: block a thread of pinwheel's own on a guarded page (the engine calls pw_guard_wait
 * before it writes into program memory), take a lock that a copy thread holds while waiting, or
 * leave a page protected after pw_guard_release.
 */

/* A deferred host-to-device copy returns before its source is read.  CUDA's contract for a
 * pageable source still holds because, from pw_guard_protect until the range is released, nothing
 * the process does can change what its pages hold or unmap them:
 *   - a write to a guarded page, from any thread, in user mode or by the kernel on the program's
 *     behalf (read(2), pread, recv into the buffer), waits until the page is released;
 *   - free / realloc of a heap block overlapping a guarded range, and munmap / mremap /
 *     madvise(MADV_DONTNEED, MADV_FREE, MADV_REMOVE) of an overlapping range, wait until every
 *     overlapping guard is released, then run;
 *   - fork waits until every guard is released (pthread_atfork prepare).
 * A revocable guard (pw_guard_protect_revocable) is taken away instead of waited for: each of the
 * above (a write stopped on its pages, a free / munmap / ... overlapping it, a fork) calls its
 * revoke first, and waits only for the release that revoke brings about.
 * Memory another process can write (MAP_SHARED, shm, a mapped file, memfd, anything not private
 * anonymous) is never guarded: pw_guard_protect refuses it with a reason.
 *
 * Reads are never blocked: the copy threads read guarded memory freely.  The copy threads release
 * as they go (pw_guard_release_upto), so a writer waits for its chunk, not for the whole copy.
 *
 * What the caller must never do in turn (guard.c's header says why): a thread that has to run for
 * a guard to be released (a copy thread) must not call malloc / free or anything else that can
 * wait for a lock a program thread may hold while it is itself stopped on a guarded page (the
 * allocator's arena lock, when a neighbouring heap block shares a guarded page); and it must
 * never write to a guarded page.  The first and last pages of a range also hold bytes that are
 * not the source's (a heap neighbour's); a caller that wants no such neighbour to wait can copy
 * the partial head and tail pages itself and guard only the whole pages in between.
 */
#ifndef PW_GUARD_H
#define PW_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "pw.h" /* PW_GUARD_REASONS */

enum {
  PW_GUARD_OK = 0,
#define PW_GUARD_ENUM(id, name) PW_##id,
  PW_GUARD_REASONS(PW_GUARD_ENUM)
#undef PW_GUARD_ENUM
      PW_GUARD_NREASONS
};

/* The reason's name (as the summary prints it), "ok" for PW_GUARD_OK. */
const char *pw_guard_reason_name(int reason);

/* 0 when the guard can be had in this process (the first call sets it up: thread-safe, cheap
 * after), else the PW_GUARD_* reason, the same every time. */
int pw_guard_available(void);

/* Guard the pages covering [p, p + n).  Returns 0 and a handle in *id, or a PW_GUARD_* reason
 * (nothing guarded).  On 0, every page of the range is protected when it returns.  (n == 0 gives
 * 0 and a handle < 0, which the release functions ignore.) */
int pw_guard_protect(const void *p, size_t n, int *id);

/* Guard only the whole pages inside [p, p + n): [*lo, *hi) (equal, and *id < 0, when there is
 * none).  The bytes outside them ([p, *lo) and [*hi, p + n), under a page each) are not guarded:
 * the caller copies them itself before it returns.  Preferred over pw_guard_protect: the partial
 * first and last pages are the only ones that can hold other objects' bytes (a heap neighbour,
 * the allocator's chunk headers, pinwheel's own structures), whose writers would otherwise wait
 * too, and a writer that a release depends on would deadlock.  release_upto's done still counts
 * from p. */
int pw_guard_protect_inner(const void *p, size_t n, int *id, const void **lo, const void **hi);

/* As pw_guard_protect_inner, but the guard can be taken away: guard.c calls revoke(arg) — from
 * its fault-reader thread when a write of the program stops on a page of the range, from
 * pw_guard_wait / pw_guard_wait_all (and so the hooks' free, munmap, ... and the fork prepare
 * handler) when they find the range overlapping, before they wait — and revoke must then release
 * the guard (pw_guard_release(id)) promptly, unless its owner already did or is about to (the
 * owner and revoke settle who releases by a compare-and-swap of their own).  revoke may be called
 * more than once, late (after the release, even once the slot serves another guard with the same
 * arg), and concurrently with the owner's release: arg must stay valid for the process's life.
 * revoke must never block, allocate, or take a lock a program thread may hold.  revoke may also
 * be called before this returns (a write on a page protected already): *id is not known to it
 * yet, so the owner's side of the compare-and-swap must run after the return and release then. */
int pw_guard_protect_revocable(const void *p, size_t n, int *id, const void **lo, const void **hi,
                               void (*revoke)(void *arg), void *arg);

/* The copy has read [p, p + done): release the pages wholly inside it.  done only grows. */
void pw_guard_release_upto(int id, size_t done);

/* Release the rest of the range and free the handle. */
void pw_guard_release(int id);

/* Wait until no guarded range overlaps [p, p + n) (revoking the revocable ones first). */
void pw_guard_wait(const void *p, size_t n);

/* Wait until no range is guarded (revoking the revocable ones first). */
void pw_guard_wait_all(void);

/* Guarded ranges right now (a relaxed read: for fast paths that skip all work when 0). */
int pw_guard_active(void);

/* pw_guard_release_upto releases in steps of this many bytes (address-aligned: 2 MiB with 4 KiB
 * pages, so a range backed by transparent huge pages is never split into small pages by a
 * partial release); pw_guard_release releases the rest. */
size_t pw_guard_release_step(void);

/* Threads that write-protect and release one large range together (1 to 8; 0: the default). */
void pw_guard_set_threads(int n);
int pw_guard_threads(void);

/* For the summary.  Program writes (user-mode stores and the kernel's writes for read(2) and its
 * kind) that stopped on a guarded page, and their approximate total wait (from when the fault was
 * seen to the release of its page).  Counted by a reader thread, so approximate: never needed for
 * progress. */
void pw_guard_stats(uint64_t *writes_waited, uint64_t *wait_ns);

typedef struct pw_guard_counters {
  uint64_t protects, protect_bytes, protect_ns; /* successful pw_guard_protect calls */
  uint64_t release_ns;                          /* un-protecting (release_upto and release) */
  uint64_t writes_waited, wait_ns;              /* as pw_guard_stats */
  uint64_t hook_waits;                          /* free, munmap... that waited for a release */
} pw_guard_counters;
void pw_guard_counters_get(pw_guard_counters *c);

#ifdef PW_TESTING
/* Set to 1: pw_guard_protect answers 0 and guards nothing (the hazard tests must then fail). */
extern int pw_guard_test_disable;
/* Set to 1: mappings are read from /proc/self/maps, as on a kernel without PROCMAP_QUERY. */
extern int pw_guard_test_maps_parse;
#endif

#endif
