/* app_memcpy.c — frameworks that stage copies themselves: their large copies into or out of pinned
 * memory, spread over pinwheel's copy threads.
 * Owns: the registry of the program's pinned host memory, the exported memcpy and memmove.
 * Must never: call CUDA, allocate, take a lock on the registry's read side, or take a lock a CUDA
 * call may hold; a copy's bytes never depend on the registry, which only chooses how to copy.
 * The test of a copy (HOSTCOPY_WANTED, the registry) is async-signal-safe, and so is every copy it
 * leaves to glibc; a copy of 1 MiB or more into or out of the program's pinned memory is not (the
 * staging threads' batch takes the pool's locks; fa.c's fill its leaf lock and the guard's): a
 * signal handler that makes one is the limit.
 * How it works: the comment below.
 */

/* XLA (JAX) never hands CUDA a pageable pointer: it copies a numpy array into a pinned buffer of
 * its own with one std::memcpy on one thread, then DMAs from there (and the reverse for a device
 * array read back).  CuPy's cp.asarray does the same through the runtime: a buffer from its pinned
 * pool (cudaHostAlloc), filled by a NumPy assignment, then cudaMemcpyAsync from it.  The driver
 * and the runtime see only pinned copies, and the host-side copy is the limit.  Both front ends
 * record the pinned host memory the program allocates or registers (cuMemHostAlloc,
 * cuMemAllocHost, cuMemHostRegister in drv.c; cudaHostAlloc, cudaMallocHost, cudaHostRegister in
 * runtime.c; forgotten again at their frees; pinwheel's own pool is not among it), and the shim's
 * memcpy and memmove, for a copy of at least PW_HOSTCOPY_MIN bytes with one side in that memory
 * and no overlap, in stage mode, do it with the staging threads: non-temporal stores into pinned
 * memory (pinwheel's own pool takes plain stores), and the fresh-destination handling of D2H
 * staging (pw_fresh_plan) out of it.
 * Every other call is glibc's memmove (memcpy's semantics for the non-overlapping buffers memcpy
 * is defined for), after one comparison; overlapping ranges always are, so memmove keeps glibc's
 * semantics.
 *
 * What reaches these two functions, and what does not:
 *   - NumPy's copy of a contiguous array into one of the same dtype (arr[...] = other,
 *     np.copyto, CuPy's fill of its transfer buffer) is one memmove of the whole array
 *     (_contig_to_contig): reached.  A copy whose rows are contiguous but apart (a slice of
 *     columns) is one memmove per row: reached only for rows of PW_HOSTCOPY_MIN bytes or more.
 *   - NumPy's strided, casting (another dtype) and byte-swapping copies run its own element
 *     loops, in buffers of a few thousand elements: never reached.  CuPy converts such an array
 *     first, into a new pageable array (not reached), then fills its pinned buffer from that with
 *     the reached memmove.
 *   - glibc's fortified entries (__memcpy_chk, __memmove_chk: a program built with
 *     _FORTIFY_SOURCE where the destination's size is known), and copies inside glibc itself:
 *     never reached.
 *   - PyTorch's CPU copy_ (pin_memory(), the DataLoader's pin thread) runs its own vectorised loop
 *     when the tensors are contiguous: that loop is not reached, and pays only for the recorded
 *     allocation; any memcpy it makes of 1 MiB or more into pinned memory is.
 *
 * With PINWHEEL_FILL_AHEAD, a copy into pinned memory pinwheel allocated for the program is
 * fa.c's: uploaded to the device as it is filled (fa.h).  Any other copy into such memory that is
 * not taken (too small, no scratch free) is made here as before; the guard of an upload it
 * overlaps takes the upload away when the copy writes.
 */
#define _GNU_SOURCE
/* This file defines memcpy and memmove: the fortified inline wrappers of <string.h> for those very
 * names (on by default in some distributions' compilers) must not be in its way. */
#undef _FORTIFY_SOURCE
#include "front.h"

#include <pthread.h>
#include <string.h>

#define MAX_REGIONS 1024

/* The registry is read by the exported memcpy, which may run in a signal handler that interrupted
 * a thread inside pw_pinned_add or _remove (memcpy is async-signal-safe, and programs rely on
 * it): its read side takes no lock and never waits.  Each slot carries a sequence number, odd
 * while its writer changes it; a reader that finds it odd, or changed under it, skips the slot,
 * since the answer only chooses how to copy, never which bytes arrive.  Writers serialise on
 * write_lock among themselves. */
typedef struct region {
  atomic_uint seq;
  _Atomic uintptr_t start, end; /* start 0: a free slot */
  atomic_int cudnn;             /* made inside cudnnCreate (written under write_lock only) */
} region;

static region regions[MAX_REGIONS];
static atomic_int used;        /* slots [0, used) have ever held a region */
static atomic_int any_region;  /* regions recorded now; the memcpy fast path reads only this */
static atomic_int lost_region; /* a region that did not fit the table: pinned memory is held */
static atomic_int app_regions; /* regions recorded now that are not cuDNN's error storage */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sequentially consistent throughout (no separate fences, which ThreadSanitizer cannot follow):
 * a reader that saw the same even number before and after reading start and end read no half of
 * a change. */
static void slot_set(region *r, uintptr_t start, uintptr_t end) {
  atomic_fetch_add(&r->seq, 1); /* odd: being changed */
  atomic_store(&r->start, start);
  atomic_store(&r->end, end);
  atomic_fetch_add(&r->seq, 1); /* even: stable */
}

/* The largest region made inside cudnnCreate taken for cuDNN's error storage (4 bytes in cuDNN 9):
 * anything larger made on that thread meanwhile (a callback of the program's, another version's
 * buffer) counts as the program's. */
#define CUDNN_STORAGE_MAX 256

void pw_pinned_add(const void *p, size_t n) {
  if (!p || !n || (uintptr_t)p + n < (uintptr_t)p) return;
  int cudnn = n <= CUDNN_STORAGE_MAX && pw_cudnn_creating();
  pthread_mutex_lock(&write_lock);
  int u = atomic_load_explicit(&used, memory_order_relaxed), i = 0;
  while (i < u && atomic_load_explicit(&regions[i].start, memory_order_relaxed))
    i++;
  if (i < MAX_REGIONS) {
    atomic_store_explicit(&regions[i].cudnn, cudnn, memory_order_relaxed);
    slot_set(&regions[i], (uintptr_t)p, (uintptr_t)p + n);
    if (i == u) atomic_store_explicit(&used, u + 1, memory_order_release);
    if (!cudnn) atomic_fetch_add_explicit(&app_regions, 1, memory_order_release);
    atomic_fetch_add_explicit(&any_region, 1, memory_order_release);
  } else if (!cudnn) { /* not recorded: held for good (cuDNN's storage need not be) */
    atomic_store_explicit(&lost_region, 1, memory_order_release);
  }
  pthread_mutex_unlock(&write_lock);
}

/* Sync elision asks: while any is held, a kernel may write host memory the program reads.  Not
 * counted: what cudnnCreate allocates, each handle's error storage, which cuDNN's kernels write
 * and the program reads only through cudnnQueryRuntimeError (cudnn.c waits for every elided sync
 * before it), unless the program may call that past the wrapper. */
int pw_pinned_any(void) {
  return atomic_load_explicit(&app_regions, memory_order_acquire) > 0 ||
         (pw_cudnn_query_unwrapped() && atomic_load_explicit(&any_region, memory_order_acquire)) ||
         atomic_load_explicit(&lost_region, memory_order_acquire);
}

void pw_pinned_remove(const void *p) {
  if (!p) return;
  pthread_mutex_lock(&write_lock);
  int u = atomic_load_explicit(&used, memory_order_relaxed);
  for (int i = 0; i < u; i++)
    if (atomic_load_explicit(&regions[i].start, memory_order_relaxed) == (uintptr_t)p) {
      slot_set(&regions[i], 0, 0);
      if (!atomic_load_explicit(&regions[i].cudnn, memory_order_relaxed))
        atomic_fetch_sub_explicit(&app_regions, 1, memory_order_release);
      atomic_fetch_sub_explicit(&any_region, 1, memory_order_release);
      break;
    }
  pthread_mutex_unlock(&write_lock);
}

/* Whether [p, p+n) lies inside one recorded region.  Lock-free and wait-free: safe in a signal
 * handler, whatever the interrupted thread was doing. */
int pw_pinned_contains(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  if (b < a) return 0;
  int u = atomic_load_explicit(&used, memory_order_acquire);
  for (int i = 0; i < u; i++) {
    region *r = &regions[i];
    unsigned s1 = atomic_load(&r->seq);
    if (s1 & 1) continue;
    uintptr_t start = atomic_load(&r->start), end = atomic_load(&r->end);
    if (atomic_load(&r->seq) != s1) continue;
    if (start && a >= start && b <= end) return 1;
  }
  return 0;
}

void pw_pinned_after_fork_child(void) {
  pthread_mutex_init(&write_lock, NULL);
}

/* Whether [a, a+n) and [b, b+n) share a byte: such a copy is glibc's, which is defined for it. */
static int overlap(const void *a, const void *b, size_t n) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x - y < n || y - x < n;
}

static void *hostcopy(void *dst, const void *src, size_t n) {
  if (overlap(dst, src, n)) return pw_libc_memmove(dst, src, n);
  int into = pw_pinned_contains(dst, n), out = !into && pw_pinned_contains(src, n);
  if (!into && !out) return pw_libc_memmove(dst, src, n);
  pw_depth++; /* whatever the copy reaches passes through */
  /* the copy threads write into dst: never onto a page a deferred copy still guards */
  if (!into) pw_engine_guard_wait(pw_eng, dst, n);
  uint64_t t0 = pw_now_ns();
  /* into memory pinwheel allocated for the program: uploaded as it is filled (fa.h); out of it:
   * the bytes may be an upload's, whose guard stays (the copy only reads) */
  if (!(into && pw_fa_on() && pw_fa_fill(dst, src, n))) {
    int threads = (int)pw_get(&pw_st.threads), flags = 0;
    /* Into the program's pinned memory always with non-temporal stores where the CPU has them:
     * the buffer is written for the DMA engine, and a fill that passes through the cache ran
     * slower at every size measured (cp.asarray, 16 to 256 MiB: 18-24 against 25-26 GB/s;
     * docs/RESULTS.md).  pinwheel's own pool, reused while it sits in the cache, takes plain
     * stores. */
    int nt = into;
    if (into) {
      flags = PW_PART_STREAM; /* read only by the DMA engine */
    } else if (pw_fresh_plan(dst, n) & PW_DEST_MAP) {
      /* out of pinned memory into a fresh array (np.asarray of a device array): the page faults
       * spread over the threads, with huge pages, as D2H staging does */
      flags = PW_PART_PREFAULT;
    }
    pw_batch b;
    pw_batch_begin(&b, threads, nt);
    pw_batch_push(&b, dst, src, n, flags);
    pw_batch_end(&b);
  }
  pw_counter3 *c = &pw_st.host_copies[into ? 0 : 1];
  pw_add(&c->calls, 1);
  pw_add(&c->bytes, n);
  pw_add(&c->ns, pw_now_ns() - t0);
  pw_depth--;
  return dst;
}

/* One test for both: a large copy, some pinned memory recorded, not the shim's own, stage mode. */
#define HOSTCOPY_WANTED(n)                                                                         \
  (PW_UNLIKELY((n) >= PW_HOSTCOPY_MIN) &&                                                          \
   atomic_load_explicit(&any_region, memory_order_acquire) && !pw_depth &&                         \
   pw_mode == PW_MODE_STAGE)

PW_EXPORT void *memcpy(void *dst, const void *src, size_t n) {
  if (HOSTCOPY_WANTED(n)) return hostcopy(dst, src, n);
  return pw_libc_memmove(dst, src, n);
}

/* NumPy's contiguous assignment ends here, not in memcpy. */
PW_EXPORT void *memmove(void *dst, const void *src, size_t n) {
  if (HOSTCOPY_WANTED(n)) return hostcopy(dst, src, n);
  return pw_libc_memmove(dst, src, n);
}
