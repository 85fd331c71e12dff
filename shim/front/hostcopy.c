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
 * Must never: call CUDA, allocate, take a lock on the registry's read side (memcpy must stay
 * async-signal-safe), or take a lock a CUDA call may hold; a copy's bytes never depend on the
 * registry, which only chooses how to copy.
 */
#define _GNU_SOURCE
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
} region;

static region regions[MAX_REGIONS];
static atomic_int used;       /* slots [0, used) have ever held a region */
static atomic_int any_region; /* regions recorded now; the memcpy fast path reads only this */
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

void pw_pinned_add(const void *p, size_t n) {
  if (!p || !n || (uintptr_t)p + n < (uintptr_t)p) return;
  pthread_mutex_lock(&write_lock);
  int u = atomic_load_explicit(&used, memory_order_relaxed), i = 0;
  while (i < u && atomic_load_explicit(&regions[i].start, memory_order_relaxed))
    i++;
  if (i < MAX_REGIONS) {
    slot_set(&regions[i], (uintptr_t)p, (uintptr_t)p + n);
    if (i == u) atomic_store_explicit(&used, u + 1, memory_order_release);
    atomic_fetch_add_explicit(&any_region, 1, memory_order_release);
  }
  pthread_mutex_unlock(&write_lock);
}

void pw_pinned_remove(const void *p) {
  if (!p) return;
  pthread_mutex_lock(&write_lock);
  int u = atomic_load_explicit(&used, memory_order_relaxed);
  for (int i = 0; i < u; i++)
    if (atomic_load_explicit(&regions[i].start, memory_order_relaxed) == (uintptr_t)p) {
      slot_set(&regions[i], 0, 0);
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

/* glibc's memmove, through a pointer the compiler cannot turn back into a memcpy call. */
static void *(*volatile real_memmove)(void *, const void *, size_t) = memmove;

static void *hostcopy(void *dst, const void *src, size_t n) {
  int into = pw_pinned_contains(dst, n), out = !into && pw_pinned_contains(src, n);
  if (!into && !out) return real_memmove(dst, src, n);
  pw_depth++; /* whatever the copy reaches passes through */
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
