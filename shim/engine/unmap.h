/* unmap.h — a large shared-memory mapping released off the calling thread.
 *
 * A DataLoader's batch reaches the main process as a mapping of a shared-memory file; dropping it
 * unmaps every page the copy faulted in and frees the file's pages (about 15 ms for 147 MiB,
 * docs/RESULTS.md), on the thread that runs the training loop.  munmap (front/memhooks.c) asks
 * pw_unmap_defer first: the mapping is moved out of the program's range at once (mremap), so the
 * range is unmapped when munmap returns, as the program expects, and a thread of pinwheel's unmaps
 * the moved mapping.  Only the memory is freed later, by at most UNMAP_QUEUE mappings.
 * Must never: take a lock or allocate in pw_unmap_defer (munmap may run in a signal handler);
 * move anything but a whole shared mapping of a /dev/shm file; change munmap's result or errno.
 */
#ifndef PW_UNMAP_H
#define PW_UNMAP_H

#include <stddef.h>
#include <stdint.h>

/* Start the releasing thread (stage mode, at the first CUDA call).  Until then, and in a forked
 * child until it starts its own, pw_unmap_defer declines everything. */
void pw_unmap_start(void);

/* munmap(a, n) of the program: 1 when [a, a+n) was one whole shared-memory mapping (at least
 * PW_UNMAP_MIN bytes) and is now unmapped, its pages queued for the releasing thread; 0 when the
 * caller must unmap it itself.  errno is left as it was. */
int pw_unmap_defer(void *a, size_t n);
#define PW_UNMAP_MIN ((size_t)16 << 20)

/* fork's prepare: wait (at most 2 s) until the thread is releasing no mapping, and let it start
 * none until the parent's or the child's handler; the parent's lets it go on. */
void pw_unmap_before_fork(void);
void pw_unmap_after_fork_parent(void);
/* In a forked child: the mappings still queued (copies of the parent's) are unmapped here, and
 * nothing more is deferred (the thread did not follow the fork). */
void pw_unmap_after_fork_child(void);

#ifdef PW_TESTING
/* Tests: wait until nothing is queued; hold or let go the releasing thread; take /dev/shm's free
 * bytes to be `bytes` (0: what statfs says). */
void pw_unmap_drain(void);
void pw_unmap_test_hold(int hold);
void pw_unmap_test_free(uint64_t bytes);
/* Tests: the thread's first step on the first READY slot (RELEASING, and its range unmapped if
 * unmap_now), its address returned; then the last step (the slots RELEASING made FREE, the range
 * left as it is); 1 once deferral stopped for the process. */
void *pw_unmap_test_begin_release(int unmap_now);
void pw_unmap_test_end_release(void);
int pw_unmap_test_stopped(void);
#endif

#endif
