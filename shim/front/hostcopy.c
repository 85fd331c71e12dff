/* hostcopy.c — frameworks that stage copies themselves: their large memcpy into or out of pinned
 * memory, spread over pinwheel's copy threads.
 *
 * XLA (JAX) never hands CUDA a pageable pointer: it copies a numpy array into a pinned buffer of
 * its own with one std::memcpy on one thread, then DMAs from there (and the reverse for a device
 * array read back).  The driver sees only pinned copies, and the host-side memcpy is the limit.
 * The driver front end records the pinned host memory the program allocates or registers
 * (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister; pinwheel's own pool is not among it), and
 * the shim's memcpy, for a copy of at least PW_HOSTCOPY_MIN bytes with one side in that memory,
 * in stage mode, does it with the staging threads: non-temporal stores into pinned memory, and
 * the fresh-destination handling of D2H staging (PINWHEEL_D2H_FRESH) out of it.  Every other
 * memcpy is glibc's (memmove: memcpy's semantics for the non-overlapping buffers memcpy is
 * defined for), after one comparison.
 *
 * Owns: the registry of the program's pinned host memory, the exported memcpy.
 * Must never: call CUDA, allocate, or take a lock a CUDA call may hold (the registry's lock is
 * taken only around a table lookup); a copy's bytes never depend on the registry, which only
 * chooses how to copy.
 */
#define _GNU_SOURCE
#include "front.h"

#include <pthread.h>
#include <string.h>

#define MAX_REGIONS 1024

typedef struct region {
  uintptr_t start, end;
} region;

static region regions[MAX_REGIONS];
static int nregions;
static atomic_int any_region; /* the memcpy fast path reads only this */
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

void pw_pinned_add(const void *p, size_t n) {
  if (!p || !n) return;
  pthread_rwlock_wrlock(&lock);
  if (nregions < MAX_REGIONS) {
    regions[nregions++] = (region){(uintptr_t)p, (uintptr_t)p + n};
    atomic_store_explicit(&any_region, 1, memory_order_release);
  }
  pthread_rwlock_unlock(&lock);
}

void pw_pinned_remove(const void *p) {
  pthread_rwlock_wrlock(&lock);
  for (int i = 0; i < nregions; i++)
    if (regions[i].start == (uintptr_t)p) {
      regions[i] = regions[--nregions];
      break;
    }
  atomic_store_explicit(&any_region, nregions > 0, memory_order_release);
  pthread_rwlock_unlock(&lock);
}

/* Whether [p, p+n) lies inside one recorded region. */
int pw_pinned_contains(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  int found = 0;
  pthread_rwlock_rdlock(&lock);
  for (int i = 0; i < nregions && !found; i++)
    found = a >= regions[i].start && b <= regions[i].end && b >= a;
  pthread_rwlock_unlock(&lock);
  return found;
}

void pw_pinned_after_fork_child(void) {
  pthread_rwlock_init(&lock, NULL);
}

/* glibc's memmove, through a pointer the compiler cannot turn back into a memcpy call. */
static void *(*volatile real_memmove)(void *, const void *, size_t) = memmove;

static void *hostcopy(void *dst, const void *src, size_t n) {
  int into = pw_pinned_contains(dst, n), out = !into && pw_pinned_contains(src, n);
  if (!into && !out) return real_memmove(dst, src, n);
  pw_depth++; /* whatever the copy reaches passes through */
  /* the copy threads write into dst: never onto a page a deferred copy still guards */
  if (!into) pw_engine_guard_wait(pw_eng, dst, n);
  uint64_t t0 = pw_now_ns();
  int threads = (int)pw_get(&pw_st.threads), flags = 0;
  int nt = into && pw_option_get(PW_OPT_NT_STORES) != 0;
  if (into) {
    flags = PW_PART_STREAM; /* read only by the DMA engine */
  } else if (pw_fresh_plan(dst, n, (int)pw_option_get(PW_OPT_D2H_FRESH)) & PW_DEST_MAP) {
    /* out of pinned memory into a fresh array (np.asarray of a device array): the page faults
     * spread over the threads, with huge pages where asked for, as D2H staging does */
    flags = PW_PART_PREFAULT;
  }
  pw_batch b;
  pw_batch_begin(&b, threads, nt);
  pw_batch_push(&b, dst, src, n, flags);
  pw_batch_end(&b);
  pw_counter3 *c = &pw_st.host_copies[into ? 0 : 1];
  pw_add(&c->calls, 1);
  pw_add(&c->bytes, n);
  pw_add(&c->ns, pw_now_ns() - t0);
  pw_depth--;
  return dst;
}

PW_EXPORT void *memcpy(void *dst, const void *src, size_t n) {
  if (PW_UNLIKELY(n >= PW_HOSTCOPY_MIN) &&
      atomic_load_explicit(&any_region, memory_order_acquire) && !pw_depth &&
      pw_mode == PW_MODE_STAGE && pw_host_copies)
    return hostcopy(dst, src, n);
  return real_memmove(dst, src, n);
}
