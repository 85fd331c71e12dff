/* guard.h — the source guard of deferred staging (guard.c).
 *
 * A deferred host-to-device copy returns before its source is read.  CUDA's contract for a
 * pageable source still holds because, from pw_guard_protect until the range is released, nothing
 * the process does can change what its pages hold or unmap them:
 *   - a write to a guarded page, from any thread, in user mode or by the kernel on the program's
 *     behalf (read(2), pread, recv into the buffer), waits until the page is released;
 *   - free / realloc of a heap block overlapping a guarded range, and munmap / mremap /
 *     madvise(MADV_DONTNEED, MADV_FREE, MADV_REMOVE) of an overlapping range, wait until every
 *     overlapping guard is released, then run;
 *   - fork waits until every guard is released (pthread_atfork prepare).
 * Memory another process can write (MAP_SHARED, shm, a mapped file, memfd, anything not private
 * anonymous) is never guarded: pw_guard_protect refuses it with a reason.
 *
 * Reads are never blocked: the copy threads read guarded memory freely.  The copy threads release
 * as they go (pw_guard_release_upto), so a writer waits for its chunk, not for the whole copy.
 *
 * Must never: block a thread of pinwheel's own on a guarded page (the engine calls pw_guard_wait
 * before it writes into program memory), take a lock that a copy thread holds while waiting, or
 * leave a page protected after pw_guard_release.
 */
#ifndef PW_GUARD_H
#define PW_GUARD_H

#include <stddef.h>

/* Why a copy was not deferred (the guard's part of the list; the summary counts each). */
#define PW_GUARD_REASONS(X)                                                                        \
  X(GUARD_NO_UFFD, "no_userfaultfd")      /* userfaultfd missing or not permitted */               \
  X(GUARD_USER_ONLY, "uffd_user_only")    /* only user-mode faults: read(2) would fail */          \
  X(GUARD_NO_WP, "uffd_no_write_protect") /* kernel without write-protect of unpopulated pages */  \
  X(GUARD_SHARED, "shared_memory")        /* not private anonymous memory */                       \
  X(GUARD_OVERLAP, "overlaps_guarded")    /* the source overlaps a range already guarded */        \
  X(GUARD_FULL, "guard_slots_full")       /* too many guarded ranges at once */                    \
  X(GUARD_ERROR, "guard_error")           /* a userfaultfd call failed */

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
 * (nothing guarded).  On 0, every page of the range is protected when it returns. */
int pw_guard_protect(const void *p, size_t n, int *id);

/* The copy has read [p, p + done): release the pages wholly inside it.  done only grows. */
void pw_guard_release_upto(int id, size_t done);

/* Release the rest of the range and free the handle. */
void pw_guard_release(int id);

/* Wait until no guarded range overlaps [p, p + n). */
void pw_guard_wait(const void *p, size_t n);

/* Wait until no range is guarded. */
void pw_guard_wait_all(void);

/* Guarded ranges right now (a relaxed read: for fast paths that skip all work when 0). */
int pw_guard_active(void);

#endif
