/* guard.c — the source guard of deferred staging (guard.h says what it promises).
 * Owns: the userfaultfd, its registrations, the slot table, the reader and helper threads.
 * Must never: allocate on the hooks' path or in its own threads, block a pinwheel thread, leave a
 * page protected after pw_guard_release, or guard memory another process can write.
 * How it works: the comment below.
 */

/* ---- Mechanism: userfaultfd write-protect ----
 * A guarded range is write-protected with UFFDIO_WRITEPROTECT on a userfaultfd that this process
 * owns.  A store to a protected page, from any thread, stops in the kernel until the page is
 * un-protected (which wakes it), then completes: nothing has to read a fault message for that.
 * Because the userfaultfd is created without UFFD_USER_MODE_ONLY, a write the kernel makes on the
 * program's behalf (read(2), pread, recv, fread's read into the buffer) waits the same way instead
 * of failing with EFAULT.  With UFFD_FEATURE_WP_UNPOPULATED a page never touched gets a marker and
 * is protected too (without it UFFDIO_WRITEPROTECT skips it silently: the guard is then refused).
 *
 * Why not mprotect with a SIGSEGV handler: a kernel-mode write into a PROT_READ page fails with
 * EFAULT instead of waiting (read(2) into the buffer would return an error to the program); the
 * handler would have to stay first in line against every library that installs its own (crash
 * reporters, the JVM, Python's faulthandler) and against threads that block SIGSEGV; and
 * mprotect splits mappings (vm.max_map_count).  userfaultfd needs no signal at all.
 *
 * Costs, for 256 MiB of populated 4 KiB pages: about 5 ms to write-protect and as much to release
 * on one thread (measured on kernel 6.18); the page-table walk splits over threads
 * (UFFDIO_WRITEPROTECT takes mmap_lock for reading only): about 1 ms with 4 threads on the
 * 16-core H200 machine, no better with more.  So a range of 8 MiB or more is split
 * over pw_guard_threads() threads (helpers started on first use, the caller takes a share; 4
 * where there are 8 CPUs or more, 2 below, 1 on one CPU), on 2 MiB boundaries.  Never-touched
 * pages cost about a tenth (markers only), and 2 MiB transparent huge pages about 1 % (0.03-0.05
 * ms each way), so releases go in 2 MiB-aligned steps that never split a huge page's mapping.
 * tests/test_guard prints the figures of the machine it runs on (protect, release, release in
 * 4 MiB steps; 1, 2, 4 and 8 threads).  guard.c adds nothing measurable to the ioctl itself.
 * Registration (UFFDIO_REGISTER) is cheap but unregistering and splitting mappings is not, so
 * each mapping is registered whole, once, and stays registered; a cache of registered mappings
 * (invalidated by the hooks' munmap, mremap, MAP_FIXED mmap, mprotect and shmat) spares the
 * lookup on the next copy from the same buffer.  Safety does not rest on the cache: only mappings
 * that were verified private anonymous are ever registered, and UFFDIO_WRITEPROTECT fails with
 * ENOENT on any mapping that is not registered (one glibc made anew, say), which sends the guard
 * back to look the mappings up again.
 *
 * What may be guarded: private anonymous mappings only (the heap, the stack, anonymous mmap).
 * userfaultfd write-protect also registers MAP_SHARED|MAP_ANONYMOUS, memfd and shmem mappings,
 * which another process can write behind the guard's back, so every mapping of the range is
 * checked (PROCMAP_QUERY on /proc/self/maps where the kernel has it, Linux 6.11+; else a parse of
 * /proc/self/maps into a stack buffer) and the range is refused (PW_GUARD_SHARED) unless each is
 * private, readable, without a file, and unnamed or [heap], [stack] or [anon:...].  The calling
 * thread's own stack is refused (PW_GUARD_OWN_STACK): its next frames would lie on the guarded
 * pages and it would stop before the copy is even queued; another thread's stack may be guarded
 * (that thread waits like any writer).  Everything that may allocate (pthread_atfork, starting a
 * thread) is done before the pages are protected: the protecting thread must never stop on them.
 *
 * What may not happen to a guarded range, and who stops it:
 *   - writes: the write-protection itself;
 *   - free / realloc of a block overlapping it, munmap, mremap, madvise(MADV_DONTNEED, FREE,
 *     REMOVE, DONTNEED_LOCKED, GUARD_INSTALL), MAP_FIXED mmap over it, mprotect that takes read
 *     access away, shmat(SHM_REMAP) over it: memhooks.c, exported from libpinwheel.so, waits for
 *     the release (pw_guard_wait) before calling the real function.  glibc's free unmaps a large
 *     block with an internal munmap that no interposer sees, which is why free itself is hooked.
 *     If free (or another hooked name) in this process is not ours (the program or a library
 *     preloaded earlier defines its own), the guard is unavailable (PW_GUARD_NOT_INTERPOSED);
 *   - fork: a pthread_atfork prepare handler refuses new guards (PW_GUARD_FORK) and waits for
 *     every guard to be released, revoking the revocable ones first; the child closes its copy
 *     of the userfaultfd (it belongs to the parent's address space) and starts afresh.  (The
 *     kernel also drops write-protection in a child of a userfaultfd without
 *     UFFD_FEATURE_EVENT_FORK.)  The handler is registered at the first protect, after CUDA's
 *     own, so that it runs before them.
 *
 * Revocable guards (pw_guard_protect_revocable: uploads made ahead of a copy the program has not
 * asked for yet) are guards like protect_inner's, whose owner would rather give them up than make
 * the program wait: whatever would wait for one calls its revoke(arg) first, and revoke releases
 * it (or leaves that to an owner that is releasing anyway; the two settle it by a
 * compare-and-swap of their own).  Who calls revoke:
 *   - the fault reader, for each fault message whose address lies in a revocable slot's pages
 *     still protected (a program write, user or kernel mode, stopped there);
 *   - pw_guard_wait (so every hook: free, munmap, ...) for each revocable slot overlapping its
 *     range, and pw_guard_wait_all (so the fork prepare handler) for every revocable slot, before
 *     they sleep, and again each time they wake to find the slot still there.
 * revoke and arg are stored in the slot with lo/hi/guarded, inside the slot's seqlock write, when
 * the slot is claimed (before any page is protected, so the reader finds them for every fault),
 * and never cleared: a reader takes them only from a consistent snapshot of a guarded slot, so it
 * never sees a torn pair, at worst a stale one (revoke late, after that guard's release, perhaps
 * while the slot serves another guard): guard.h lets revoke be called so.  Non-revocable slots
 * hold NULL, and everything about them is as before.
 *
 * Deadlock rules (guard.h repeats them for the caller): the threads that release must never
 * stop on a guarded page and never wait for a lock that a program thread can hold while it is
 * stopped on one; in glibc the arena lock is such a lock (a neighbour block's header can lie on
 * the first or last guarded page), so a releasing thread must not call malloc or free.  guard.c's
 * own threads (a fault reader, the protect helpers) never allocate.  Through revoke the fault
 * reader and the hooks (a program thread in free, munmap, ..., or in fork) may now release a
 * guard themselves; pw_guard_release is fit for that: it takes the slot's own mutex (held by an
 * owner only while it protects or releases, which never waits for the reader or a hook), the
 * pool's mutex only by trylock (busy: it un-protects alone), waits for the helper threads (which
 * only make UFFDIO_WRITEPROTECT calls) and takes the pending-faults spin lock (never held across
 * anything else; the reader calls revoke outside it); it never starts a thread (wp_range starts
 * helpers for a protect only) and never allocates.  Un-protecting never waits for fault messages
 * to be read (the kernel wakes the stopped threads from both its queues).  The reader never waits
 * for a slot's seqlock writer either (a program thread interrupted by a signal whose handler is
 * stopped on a revocable page would never finish): it looks again on a 1 ms poll timeout.  The
 * limit below about signal handlers holds for revoke too: a revoke that releases from a handler
 * that interrupted the owner inside protect or release would wait for the owner's slot mutex.
 *
 * Fault messages are never needed for progress for a plain guard (un-protecting wakes the threads
 * stopped in the range, whether their fault was read or not), but one reader thread (started at
 * the first protect, every signal blocked) reads them to count the program writes that waited and
 * approximate their wait (from the read to the release of the page), and, for a revocable guard,
 * to revoke it (a program write on a revocable page waits for the reader and revoke).
 *
 * The hooks may run in signal handlers and run millions of times a second: their fast path is one
 * relaxed load of pw_guard_nactive; pw_guard_wait takes no lock (a fixed table of slots, each
 * with a sequence word that is both a seqlock and a futex).
 *
 * ---- Limits: what the guard does not cover ----
 *   - raw system calls that bypass libc's exported functions (syscall(SYS_munmap, ...), inline
 *     assembly, a statically linked helper), brk/sbrk shrinking the heap over a guarded range;
 *   - another process writing through /proc/PID/mem or process_vm_writev (the kernel writes
 *     those with FOLL_FORCE through a remote mm, not through a fault of this process);
 *   - a program or an earlier preload that defines its own free, munmap, ... (detected: the guard
 *     is then unavailable), and a library opened with RTLD_DEEPBIND, whose calls bind past us;
 *   - a program that closes file descriptors it did not open (closefrom in the parent): the
 *     kernel then drops every registration and protection at once; the next protect notices
 *     (fstat identity) and starts a new userfaultfd, but guards in flight were lost;
 *   - a userfaultfd of the program's own on the same mappings (UFFDIO_REGISTER answers EBUSY:
 *     the copy is refused with PW_GUARD_ERROR, never guarded halfway);
 *   - a signal handler that unmaps a range that its own interrupted thread is guarding waits for
 *     a release that cannot come while the handler runs.
 */
#define _GNU_SOURCE
#include "pw.h"
#include "guard.h"
#include "guard_hooks.h"
#include "procmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Older headers (Debian 12's) lack what Linux 6.4+ offers. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef MADV_NOHUGEPAGE
#define MADV_NOHUGEPAGE 15
#endif

#define NSLOTS 64  /* guarded ranges at once (the used mask is one 64-bit word) */
#define MAXSEGS 16 /* mappings one guarded range may span */
#define NCACHE 32  /* registered mappings remembered */
#define MAXTHR 8   /* threads for one large protect or release */
#define NPENDING 128
#define THREAD_MIN (8u << 20) /* smaller ranges are protected by the caller alone */
#define PW_GUARD_TLS __thread __attribute__((tls_model("initial-exec")))

#ifdef PW_TESTING
int pw_guard_test_disable;
int pw_guard_test_maps_parse; /* 1: read /proc/self/maps as on a kernel without PROCMAP_QUERY */
#define QUERY_UNSUPPORTED()                                                                        \
  (pw_guard_test_maps_parse || __atomic_load_n(&query_unsupported, __ATOMIC_RELAXED))
#else
#define QUERY_UNSUPPORTED() __atomic_load_n(&query_unsupported, __ATOMIC_RELAXED)
#endif

/* ---- small tools ---- */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void futex_wait(atomic_uint *w, unsigned v, const struct timespec *timeout) {
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, v, timeout, NULL, 0);
}

static void futex_wake(atomic_uint *w) {
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static uintptr_t page_size(void) {
  static uintptr_t pg;
  if (!pg) pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  return pg;
}

/* ---- state ---- */

typedef struct seg {
  uintptr_t s, e;
} seg;

typedef void (*revoke_fn)(void *arg);

typedef struct slot {
  atomic_uint seq; /* odd while lo/hi/guarded/revoke/arg change; the futex word waiters sleep on */
  atomic_uint waiters;
  atomic_uintptr_t lo, hi; /* pages still protected: [lo, hi) */
  atomic_int guarded;
  /* pw_guard_protect_revocable's (NULL: not revocable): set with lo/hi/guarded when the slot is
   * claimed, so a reader that sees the slot guarded (an even, unchanged seq) sees its own pair;
   * left as they are at release (a late revoke with a stale pair is allowed) */
  _Atomic(revoke_fn) revoke;
  _Atomic(void *) arg;
  /* the owner's, under mu */
  pthread_mutex_t mu;
  unsigned gen;
  uintptr_t p, end; /* the source, unaligned */
  int nseg;
  seg segs[MAXSEGS]; /* the registered mappings the range spans */
} slot;

static slot slots[NSLOTS];
static atomic_uint_least64_t used; /* bit i: slot i is claimed */
atomic_int pw_guard_nactive;       /* claimed slots */
static atomic_uint all_waiters;    /* threads in pw_guard_wait_all */
static atomic_uint released_seq;   /* bumped whenever a slot is freed (wait_all's futex) */
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static int forking; /* under table_mu */

atomic_uint pw_guard_maps_gen;

static pthread_once_t avail_once = PTHREAD_ONCE_INIT;
static int avail_reason = -1;
static atomic_int uffd = -1;
static dev_t uffd_dev;
static ino_t uffd_ino;
static pthread_mutex_t uffd_mu = PTHREAD_MUTEX_INITIALIZER;
static int query_unsupported; /* PROCMAP_QUERY answered ENOTTY / EINVAL once */

/* counters */
static atomic_uint_least64_t c_protects, c_protect_bytes, c_protect_ns, c_release_ns, c_writes,
    c_wait_ns, c_hook_waits;

/* ---- the slots: seqlock writers (owner) and lock-free readers (any thread, signal handlers) ----
 */

static void slot_write_begin(slot *s) {
  atomic_fetch_add(&s->seq, 1);
}

static void slot_write_end(slot *s) {
  atomic_fetch_add(&s->seq, 1);
  if (atomic_load(&s->waiters)) futex_wake(&s->seq);
}

/* Whether s blocks [a, b); *q is the sequence value to sleep on.  When it blocks and is
 * revocable, *fn and *arg (if fn is not NULL) are its revoke and arg, read in the same snapshot;
 * else *fn is NULL (also while the slot changes: the caller looks again after its brief sleep). */
static int slot_blocks(slot *s, uintptr_t a, uintptr_t b, unsigned *q, revoke_fn *fn, void **arg) {
  for (;;) {
    unsigned q1 = atomic_load(&s->seq);
    int g = atomic_load(&s->guarded);
    uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
    revoke_fn f = fn ? atomic_load(&s->revoke) : NULL;
    void *x = fn ? atomic_load(&s->arg) : NULL;
    unsigned q2 = atomic_load(&s->seq);
    if (q1 != q2) continue;
    *q = q1;
    if (fn) *fn = NULL;
    if (q1 & 1) return 1; /* changing: wait for the change (short: no system call inside) */
    if (!(g && lo < b && a < hi)) return 0;
    if (fn) {
      *fn = f;
      *arg = x;
    }
    return 1;
  }
}

/* A consistent snapshot of s, waiting out a writer (never from a hook: writers are short, but a
 * hook may interrupt one). */
static void slot_read(slot *s, int *g, uintptr_t *lo, uintptr_t *hi) {
  for (;;) {
    unsigned q1 = atomic_load(&s->seq);
    *g = atomic_load(&s->guarded);
    *lo = atomic_load(&s->lo);
    *hi = atomic_load(&s->hi);
    if (!(q1 & 1) && atomic_load(&s->seq) == q1) return;
    sched_yield();
  }
}

static void slot_sleep(slot *s, unsigned q) {
  static const struct timespec brief = {0, 1000000};
  atomic_fetch_add(&s->waiters, 1);
  futex_wait(&s->seq, q, (q & 1) ? &brief : NULL);
  atomic_fetch_sub(&s->waiters, 1);
}

int pw_guard_active(void) {
  return atomic_load_explicit(&pw_guard_nactive, memory_order_relaxed);
}

/* Revoke every revocable guard that blocks [a, b) (the call may release the slot at once): the
 * first slot that blocks it (revoked or not) and its seq in *first / *first_q (-1: none), and
 * whether a blocking slot was seen changing (odd seq). */
static int revoke_blocking(uintptr_t a, uintptr_t b, int *first, unsigned *first_q) {
  int changing = 0;
  *first = -1;
  for (uint64_t m = atomic_load(&used); m; m &= m - 1) {
    int i = __builtin_ctzll(m);
    unsigned q;
    revoke_fn fn;
    void *arg;
    if (slot_blocks(&slots[i], a, b, &q, &fn, &arg)) {
      if (fn) fn(arg);
      changing |= (int)(q & 1);
      if (*first < 0) *first = i, *first_q = q;
    }
  }
  return changing;
}

/* Revoke every revocable guard that blocks [a, b), then sleep on the first slot that blocks it
 * (revoked or not: a released one returns at once).  0 when none blocks it. */
static int revoke_then_sleep(uintptr_t a, uintptr_t b) {
  int first;
  unsigned first_q = 0;
  (void)revoke_blocking(a, b, &first, &first_q);
  if (first < 0) return 0;
  slot_sleep(&slots[first], first_q);
  return 1;
}

static int wait_range(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p, b = a + n;
  int any = 0;
  if (!n) return 0;
  if (b < a) b = UINTPTR_MAX;
  while (atomic_load_explicit(&pw_guard_nactive, memory_order_acquire) && revoke_then_sleep(a, b))
    any = 1;
  return any;
}

void pw_guard_wait(const void *p, size_t n) {
  wait_range(p, n);
}

int pw_guard_hook_wait(const void *p, size_t n) {
  int e = errno; /* a hook leaves errno as the real function does (free: unchanged) */
  int waited = wait_range(p, n);
  errno = e;
  if (waited) atomic_fetch_add_explicit(&c_hook_waits, 1, memory_order_relaxed);
  return waited;
}

void pw_guard_wait_all(void) {
  static const struct timespec brief = {0, 1000000};
  for (;;) {
    unsigned q = atomic_load(&released_seq);
    if (!atomic_load(&pw_guard_nactive)) return;
    /* revoke every revocable guard first; a slot seen changing is looked at again shortly */
    int first;
    unsigned first_q;
    int changing = revoke_blocking(0, UINTPTR_MAX, &first, &first_q);
    atomic_fetch_add(&all_waiters, 1);
    futex_wait(&released_seq, q, changing ? &brief : NULL);
    atomic_fetch_sub(&all_waiters, 1);
  }
}

/* ---- the userfaultfd ---- */

/* A userfaultfd with write-protect of unpopulated pages and kernel-mode faults, or a reason. */
static int open_uffd(int *out) {
  *out = -1;
#ifndef SYS_userfaultfd
  return PW_GUARD_NO_UFFD;
#else
  int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) { /* not permitted to the process: /dev/userfaultfd may be */
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
      fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
      close(dev);
    }
  }
  if (fd < 0) {
    int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (u >= 0) {
      close(u);
      return PW_GUARD_USER_ONLY; /* read(2) into a guarded buffer would fail with EFAULT */
    }
    return PW_GUARD_NO_UFFD;
  }
  const uint64_t want = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED;
  struct uffdio_api api = {.api = UFFD_API, .features = want};
  if (ioctl(fd, UFFDIO_API, &api) || (api.features & want) != want) {
    int reason = PW_GUARD_ERROR;
    int fd2 = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    struct uffdio_api q = {.api = UFFD_API, .features = 0};
    if (fd2 >= 0 && !ioctl(fd2, UFFDIO_API, &q) && (q.features & want) != want)
      reason = PW_GUARD_NO_WP;
    if (fd2 >= 0) close(fd2);
    close(fd);
    return reason;
  }
  *out = fd;
  return PW_GUARD_OK;
#endif
}

/* A page registered, protected while unpopulated, released and unmapped: the kernel does what the
 * guard needs of it. */
static int self_test(int fd) {
  uintptr_t pg = page_size();
  void *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return PW_GUARD_ERROR;
  int r = PW_GUARD_ERROR;
  struct uffdio_register reg = {.range = {(uintptr_t)m, 2 * pg}, .mode = UFFDIO_REGISTER_MODE_WP};
  if (!ioctl(fd, UFFDIO_REGISTER, &reg) && (reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)m, 2 * pg},
                                     .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    if (!ioctl(fd, UFFDIO_WRITEPROTECT, &wp)) {
      wp.mode = 0;
      if (!ioctl(fd, UFFDIO_WRITEPROTECT, &wp)) r = PW_GUARD_OK;
    } else if (errno == EINVAL) {
      r = PW_GUARD_NO_WP;
    }
  }
  munmap(m, 2 * pg);
  return r;
}

static void remember_identity(int fd) {
  struct stat st;
  if (!fstat(fd, &st)) {
    uffd_dev = st.st_dev;
    uffd_ino = st.st_ino;
  }
}

static int is_ours(int fd) {
  struct stat st;
  return fd >= 0 && !fstat(fd, &st) && st.st_dev == uffd_dev && st.st_ino == uffd_ino;
}

static void cache_clear(void);

/* The process's userfaultfd, created anew where a forked child or a program that closed it left
 * none.  0 or a reason. */
static int ensure_uffd(void) {
  int fd = atomic_load(&uffd);
  if (fd >= 0 && is_ours(fd)) return 0;
  pthread_mutex_lock(&uffd_mu);
  fd = atomic_load(&uffd);
  int r = 0;
  if (fd < 0 || !is_ours(fd)) {
    /* the fd is not ours any more (closed, perhaps reused): never touch it again */
    atomic_store(&uffd, -1);
    cache_clear();
    r = open_uffd(&fd);
    if (!r) {
      remember_identity(fd);
      atomic_store(&uffd, fd);
    }
  }
  pthread_mutex_unlock(&uffd_mu);
  return r;
}

/* The log is core/log.c's in libpinwheel; the guard's test library is built without it. */
#pragma weak pw_log

/* ---- availability ---- */

static void available_once(void) {
  for (int i = 0; i < NSLOTS; i++)
    pthread_mutex_init(&slots[i].mu, NULL);
  if (pw_memhooks_check) {
    char where[256];
    const char *name = pw_memhooks_check(where, sizeof where);
    if (name) {
      /* said once, at info level: the summary counts the copies not deferred for it */
      if (pw_log)
        pw_log(PW_LOG_INFO, "deferral off: %s in this process is %s's, not pinwheel's", name,
               where[0] ? where : "another object");
      avail_reason = PW_GUARD_NOT_INTERPOSED;
      return;
    }
  } else {
#ifndef PW_TESTING /* the engine's simulator test links no hooks: it tests writes only */
    avail_reason = PW_GUARD_NOT_INTERPOSED;
    return;
#endif
  }
  int fd, r = open_uffd(&fd);
  if (!r) r = self_test(fd);
  if (r) {
    if (fd >= 0) close(fd);
    avail_reason = r;
    return;
  }
  remember_identity(fd);
  atomic_store(&uffd, fd);
  avail_reason = PW_GUARD_OK;
}

int pw_guard_available(void) {
  pthread_once(&avail_once, available_once);
  return avail_reason;
}

const char *pw_guard_reason_name(int reason) {
  static const char *const names[] = {"ok",
#define PW_GUARD_NAME(id, name) name,
                                      PW_GUARD_REASONS(PW_GUARD_NAME)
#undef PW_GUARD_NAME
  };
  return reason >= 0 && reason < PW_GUARD_NREASONS ? names[reason] : "unknown";
}

/* ---- the mappings of a range: verified private anonymous, registered ---- */

typedef struct vma {
  uintptr_t s, e;
  int ok; /* private, readable, anonymous */
} vma;

static int anon_name(const char *n) {
  return !n[0] || !strcmp(n, "[heap]") || !strcmp(n, "[stack]") || !strncmp(n, "[anon:", 6);
}

/* PROCMAP_QUERY: the mapping holding addr.  0, -ENOENT (none: a hole), or another -errno. */
static int query_vma(int fd, uintptr_t addr, uint64_t flags, vma *v) {
  char name[256];
  struct pw_procmap_query q;
  int r = pw_procmap_query(fd, addr, flags, &q, name, sizeof name);
  if (r) return r;
  v->s = (uintptr_t)q.vma_start;
  v->e = (uintptr_t)q.vma_end;
  v->ok = (q.vma_flags & PW_PROCMAP_READABLE) && !(q.vma_flags & PW_PROCMAP_SHARED) &&
          q.inode == 0 && q.dev_major == 0 && q.dev_minor == 0 && anon_name(name);
  return 0;
}

static uintptr_t hex(const char **p) {
  uintptr_t v = 0;
  for (;; (*p)++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + (uintptr_t)d;
  }
}

/* One line of /proc/self/maps: "start-end perms offset major:minor inode   name". */
static int parse_maps_line(const char *l, const char *end, vma *v) {
  const char *p = l;
  v->s = hex(&p);
  if (*p++ != '-') return -1;
  v->e = hex(&p);
  if (*p++ != ' ' || end - p < 5) return -1;
  int readable = p[0] == 'r', priv = p[3] == 'p';
  p += 4;
  while (p < end && *p == ' ')
    p++;
  hex(&p); /* offset */
  while (p < end && *p == ' ')
    p++;
  uintptr_t major = hex(&p);
  if (p >= end || *p++ != ':') return -1;
  uintptr_t minor = hex(&p);
  while (p < end && *p == ' ')
    p++;
  uintptr_t inode = 0;
  while (p < end && *p >= '0' && *p <= '9')
    inode = inode * 10 + (uintptr_t)(*p++ - '0');
  while (p < end && *p == ' ')
    p++;
  char name[64];
  size_t n = (size_t)(end - p) < sizeof name - 1 ? (size_t)(end - p) : sizeof name - 1;
  memcpy(name, p, n);
  name[n] = 0;
  v->ok = readable && priv && !major && !minor && !inode && anon_name(name);
  return 0;
}

/* The mappings overlapping [a, b), from /proc/self/maps read into a stack buffer (no malloc). */
static int maps_collect(uintptr_t a, uintptr_t b, vma *out, int max, int *n) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char buf[4096];
  size_t len = 0;
  int eof = 0, skipping = 0, k = 0, err = 0;
  while (!err) {
    if (!eof && len < sizeof buf) {
      ssize_t r = read(fd, buf + len, sizeof buf - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        eof = 1;
      else
        len += (size_t)r;
    }
    char *nl = memchr(buf, '\n', len);
    size_t line = nl ? (size_t)(nl - buf) : len;
    if (!nl && !eof && len < sizeof buf) continue; /* read more */
    if (!line && !nl) break;                       /* end of file */
    if (!skipping) {
      vma v;
      if (!parse_maps_line(buf, buf + line, &v)) {
        if (v.s >= b) break;
        if (v.e > a) {
          if (k == max)
            err = -E2BIG;
          else
            out[k++] = v;
        }
      }
    }
    skipping = !nl; /* an overlong line: the rest of it is of no use */
    size_t used_n = nl ? line + 1 : line;
    memmove(buf, buf + used_n, len - used_n);
    len -= used_n;
  }
  close(fd);
  *n = k;
  return err;
}

/* The mappings covering [a, b), each checked; 0 or a PW_GUARD_* reason. */
static int collect(uintptr_t a, uintptr_t b, vma *v, int *n) {
  int k = 0;
  if (!QUERY_UNSUPPORTED()) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? -errno : 0;
    uintptr_t x = a;
    while (!r && x < b) {
      if (k == MAXSEGS) {
        r = -E2BIG;
      } else if (!(r = query_vma(fd, x, 0, &v[k]))) {
        x = v[k].e;
        k++;
      }
    }
    if (fd >= 0) close(fd);
    if (r == -ENOTTY || r == -EINVAL) {
      __atomic_store_n(&query_unsupported, 1, __ATOMIC_RELAXED);
    } else {
      *n = k;
      return r == -ENOENT ? PW_GUARD_ERROR /* a hole */ : r ? PW_GUARD_ERROR : 0;
    }
  }
  if (maps_collect(a, b, v, MAXSEGS, &k)) return PW_GUARD_ERROR;
  *n = k;
  /* one after the other, no hole, covering [a, b) */
  if (!k || v[0].s > a || v[k - 1].e < b) return PW_GUARD_ERROR;
  for (int i = 1; i < k; i++)
    if (v[i].s != v[i - 1].e) return PW_GUARD_ERROR;
  return 0;
}

static struct {
  pthread_mutex_t mu;
  unsigned gen; /* pw_guard_maps_gen when filled */
  int n, next;
  seg e[NCACHE];
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void cache_clear(void) {
  pthread_mutex_lock(&cache.mu);
  cache.n = 0;
  pthread_mutex_unlock(&cache.mu);
}

/* The registered mappings covering [a, b) from the cache, if it holds them all and is current. */
static int cache_lookup(uintptr_t a, uintptr_t b, seg *out, int *n) {
  int k = 0, hit = 1;
  pthread_mutex_lock(&cache.mu);
  if (cache.gen != atomic_load(&pw_guard_maps_gen)) cache.n = 0;
  for (uintptr_t x = a; x < b && hit;) {
    hit = 0;
    for (int i = 0; i < cache.n && k < MAXSEGS; i++)
      if (cache.e[i].s <= x && x < cache.e[i].e) {
        out[k++] = cache.e[i];
        x = cache.e[i].e;
        hit = 1;
        break;
      }
  }
  pthread_mutex_unlock(&cache.mu);
  *n = k;
  return hit;
}

static void cache_insert(const seg *s, int n, unsigned gen) {
  pthread_mutex_lock(&cache.mu);
  if (gen == atomic_load(&pw_guard_maps_gen)) { /* nothing moved while we looked */
    if (cache.gen != gen) cache.n = 0;
    cache.gen = gen;
    for (int i = 0; i < n; i++) {
      int j = 0;
      while (j < cache.n && (cache.e[j].s != s[i].s || cache.e[j].e != s[i].e))
        j++;
      if (j < cache.n) continue;
      if (cache.n < NCACHE) {
        cache.e[cache.n++] = s[i];
      } else {
        cache.e[cache.next] = s[i];
        cache.next = (cache.next + 1) % NCACHE;
      }
    }
  }
  pthread_mutex_unlock(&cache.mu);
}

/* The mappings covering [a, b), verified and registered (whole: never split); 0 or a reason. */
static int verify_register(uintptr_t a, uintptr_t b, seg *segs, int *nseg, int use_cache) {
  if (use_cache && cache_lookup(a, b, segs, nseg)) return 0;
  unsigned gen = atomic_load(&pw_guard_maps_gen);
  vma v[MAXSEGS];
  int n = 0, r = collect(a, b, v, &n);
  if (r) return r;
  for (int i = 0; i < n; i++)
    if (!v[i].ok) return PW_GUARD_SHARED;
  int fd = atomic_load(&uffd);
  for (int i = 0; i < n; i++) {
    struct uffdio_register reg = {.range = {v[i].s, v[i].e - v[i].s},
                                  .mode = UFFDIO_REGISTER_MODE_WP};
    if (ioctl(fd, UFFDIO_REGISTER, &reg) || !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)))
      return PW_GUARD_ERROR;
    segs[i] = (seg){v[i].s, v[i].e};
  }
  *nseg = n;
  cache_insert(segs, n, gen);
  return 0;
}

/* ---- write-protect and release, over several threads for a large range ---- */

/* Protect (on) or release [x, y) within the registered mappings segs.  0 or an errno; a release
 * goes on past a failing mapping, a protect stops. */
static int wp_segs(const seg *segs, int nseg, uintptr_t x, uintptr_t y, int on) {
  int fd = atomic_load(&uffd), err = 0;
  for (int i = 0; i < nseg; i++) {
    uintptr_t s = x > segs[i].s ? x : segs[i].s, e = y < segs[i].e ? y : segs[i].e;
    if (s >= e) continue;
    struct uffdio_writeprotect w = {.range = {s, e - s},
                                    .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
    int tries = 0;
    while (ioctl(fd, UFFDIO_WRITEPROTECT, &w)) {
      if ((errno == EAGAIN || errno == EINTR) && ++tries < 100) continue;
      err = errno;
      break;
    }
    if (err && on) return err;
  }
  return err;
}

static struct {
  pthread_mutex_t mu; /* one job at a time; a second large range goes alone */
  atomic_uint go;     /* futex: bumped for each job */
  atomic_uint left;   /* futex: helpers still at the job */
  int nhelpers;       /* started */
  int threads;        /* wanted: 1 + helpers */
  struct {
    const seg *segs;
    int nseg, on;
    uintptr_t x, y;
    int err;
  } part[MAXTHR];
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static unsigned helper_seen[MAXTHR]; /* pool.go when helper i was started */

static void *helper_main(void *arg) {
  int i = (int)(intptr_t)arg;
  unsigned seen = helper_seen[i];
  for (;;) {
    unsigned g;
    while ((g = atomic_load(&pool.go)) == seen)
      futex_wait(&pool.go, seen, NULL);
    seen = g;
    if (pool.part[i].x < pool.part[i].y)
      pool.part[i].err = wp_segs(pool.part[i].segs, pool.part[i].nseg, pool.part[i].x,
                                 pool.part[i].y, pool.part[i].on);
    if (atomic_fetch_sub(&pool.left, 1) == 1) futex_wake(&pool.left);
  }
  return NULL;
}

/* A thread with every signal blocked (a program's handler must never run on it). */
static int start_thread(void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&at, 64 * 1024);
  pthread_t t;
  int r = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return r;
}

static int default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 8 ? 4 : n >= 2 ? 2 : 1;
}

void pw_guard_set_threads(int n) {
  pthread_mutex_lock(&pool.mu);
  pool.threads = n <= 0 ? default_threads() : n > MAXTHR ? MAXTHR : n;
  pthread_mutex_unlock(&pool.mu);
}

int pw_guard_threads(void) {
  pthread_mutex_lock(&pool.mu);
  if (!pool.threads) pool.threads = default_threads();
  int n = pool.threads;
  pthread_mutex_unlock(&pool.mu);
  return n;
}

static uintptr_t step(void) {
  return page_size() == 4096 ? (uintptr_t)2 << 20 : page_size();
}

size_t pw_guard_release_step(void) {
  return (size_t)step();
}

/* Protect or release [x, y) of slot s, split over the pool's threads when large. */
static int wp_range(const slot *s, uintptr_t x, uintptr_t y, int on) {
  if (y - x < THREAD_MIN || pthread_mutex_trylock(&pool.mu))
    return wp_segs(s->segs, s->nseg, x, y, on);
  if (!pool.threads) pool.threads = default_threads();
  /* helpers are started by a protect only: a release may run on the fault reader or in a hook
   * (through revoke), where starting a thread (which allocates) is not allowed */
  while (on && pool.nhelpers < pool.threads - 1) {
    helper_seen[pool.nhelpers + 1] = atomic_load(&pool.go);
    if (start_thread(helper_main, (void *)(intptr_t)(pool.nhelpers + 1))) break;
    pool.nhelpers++;
  }
  int k = pool.nhelpers + 1;
  if (k > pool.threads) k = pool.threads;
  /* k parts, their bounds on step() boundaries (no part ends inside a huge page) */
  uintptr_t st = step(), per = (y - x) / (uintptr_t)k, at = x;
  for (int i = 0; i <= pool.nhelpers; i++) {
    uintptr_t e = at;
    if (i == k - 1) {
      e = y;
    } else if (i < k - 1) {
      e = (x + per * (uintptr_t)(i + 1) + st - 1) & ~(st - 1);
      if (e > y) e = y;
      if (e < at) e = at;
    }
    pool.part[i].segs = s->segs;
    pool.part[i].nseg = s->nseg;
    pool.part[i].on = on;
    pool.part[i].x = at;
    pool.part[i].y = e;
    pool.part[i].err = 0;
    at = e;
  }
  int err = 0;
  if (pool.nhelpers) {
    atomic_store(&pool.left, (unsigned)pool.nhelpers);
    atomic_fetch_add(&pool.go, 1);
    futex_wake(&pool.go);
  }
  err = wp_segs(s->segs, s->nseg, pool.part[0].x, pool.part[0].y, on);
  unsigned l;
  while ((l = atomic_load(&pool.left)) != 0)
    futex_wait(&pool.left, l, NULL);
  for (int i = 1; i <= pool.nhelpers; i++)
    if (!err) err = pool.part[i].err;
  pthread_mutex_unlock(&pool.mu);
  return err;
}

/* Release [x, y) mapping by mapping as the kernel sees them now: for a release that failed (a
 * mapping split since it was registered, on a kernel whose UFFDIO_WRITEPROTECT takes one mapping
 * at a time).  Errors are ignored: a mapping that is no longer registered is no longer guarded. */
static void release_each(uintptr_t x, uintptr_t y) {
  int ufd = atomic_load(&uffd);
  while (x < y) {
    vma v[MAXSEGS];
    int n = 0;
    if (!QUERY_UNSUPPORTED()) {
      int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
      while (fd >= 0 && n < MAXSEGS && (n ? v[n - 1].e : x) < y &&
             !query_vma(fd, n ? v[n - 1].e : x, PW_PROCMAP_COVERING_OR_NEXT, &v[n]))
        n++;
      if (fd >= 0) close(fd);
    }
    if (!n && maps_collect(x, y, v, MAXSEGS, &n) && !n) return;
    if (!n) return;
    for (int i = 0; i < n; i++) {
      uintptr_t s = x > v[i].s ? x : v[i].s, e = y < v[i].e ? y : v[i].e;
      if (s >= e) continue;
      struct uffdio_writeprotect w = {.range = {s, e - s}, .mode = 0};
      ioctl(ufd, UFFDIO_WRITEPROTECT, &w);
    }
    if (v[n - 1].e <= x) return;
    x = v[n - 1].e;
  }
}

static void unprotect(const slot *s, uintptr_t x, uintptr_t y) {
  if (wp_range(s, x, y, 0)) release_each(x, y);
}

/* ---- the fault reader: counts program writes that waited ---- */

static struct {
  atomic_flag lock;
  atomic_int n; /* entries in use */
  struct {
    uintptr_t addr;
    uint64_t t;
  } e[NPENDING];
} pend = {.lock = ATOMIC_FLAG_INIT};
static atomic_int reader_started;

static void pend_lock(void) {
  while (atomic_flag_test_and_set_explicit(&pend.lock, memory_order_acquire)) {
  }
}
static void pend_unlock(void) {
  atomic_flag_clear_explicit(&pend.lock, memory_order_release);
}

/* Whether addr is in a page still protected. */
static int still_guarded(uintptr_t addr) {
  uint64_t m = atomic_load(&used);
  while (m) {
    int i = __builtin_ctzll(m);
    m &= m - 1;
    unsigned q;
    if (slot_blocks(&slots[i], addr, addr + 1, &q, NULL, NULL)) return 1;
  }
  return 0;
}

static void note_fault(uintptr_t addr, uint64_t t) {
  atomic_fetch_add_explicit(&c_writes, 1, memory_order_relaxed);
  pend_lock();
  int n = atomic_load_explicit(&pend.n, memory_order_relaxed);
  if (still_guarded(addr) && n < NPENDING) { /* else released already: a wait of ~0 */
    pend.e[n].addr = addr;
    pend.e[n].t = t;
    atomic_store(&pend.n, n + 1);
  }
  pend_unlock();
}

/* [x, y) was just released: the faults read in it waited until now. */
static void account_release(uintptr_t x, uintptr_t y) {
  if (!atomic_load(&pend.n)) return;
  uint64_t t = now_ns(), sum = 0;
  pend_lock();
  int n = atomic_load_explicit(&pend.n, memory_order_relaxed);
  for (int i = 0; i < n;) {
    if (pend.e[i].addr >= x && pend.e[i].addr < y) {
      sum += t > pend.e[i].t ? t - pend.e[i].t : 0;
      pend.e[i] = pend.e[--n];
    } else {
      i++;
    }
  }
  atomic_store(&pend.n, n);
  pend_unlock();
  atomic_fetch_add_explicit(&c_wait_ns, sum, memory_order_relaxed);
}

/* A write of the program stopped at addr: revoke the revocable guard holding it, if any.  The
 * reader never waits for a slot's writer (one may be a program thread that a signal handler
 * interrupted, the handler itself stopped on a revocable page): a slot seen changing a few times
 * over puts addr in retry[] (*nretry entries, NRETRY at most), to be looked at again shortly. */
#define NRETRY 16
static void revoke_at(uintptr_t addr, uintptr_t *retry, int *nretry) {
  for (uint64_t m = atomic_load(&used); m; m &= m - 1) {
    slot *s = &slots[__builtin_ctzll(m)];
    unsigned q;
    revoke_fn fn = NULL;
    void *arg = NULL;
    int blocks = 0, tries = 0;
    do {
      if (tries) sched_yield();
      blocks = slot_blocks(s, addr, addr + 1, &q, &fn, &arg);
    } while (blocks && (q & 1) && ++tries < 64);
    if (blocks && (q & 1)) {
      int k = 0;
      while (k < *nretry && retry[k] != addr)
        k++;
      if (k == *nretry && *nretry < NRETRY) retry[(*nretry)++] = addr;
    } else if (fn) {
      fn(arg); /* may release the slot here, on this thread: see the header's deadlock rules */
    }
  }
}

static void *reader_main(void *arg) {
  int fd = (int)(intptr_t)arg;
  struct uffd_msg msg[16];
  uintptr_t retry[NRETRY];
  int nretry = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, nretry ? 1 : -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p.revents & (POLLNVAL | POLLERR | POLLHUP))) break;
    if (nretry) {
      uintptr_t again[NRETRY];
      int k = nretry;
      memcpy(again, retry, sizeof again);
      nretry = 0;
      for (int i = 0; i < k; i++)
        revoke_at(again[i], retry, &nretry);
    }
    if (!r) continue;
    /* never read a descriptor that is no longer ours (a program that closed it, a reuse) */
    if (atomic_load(&uffd) != fd || !is_ours(fd)) break;
    ssize_t k = read(fd, msg, sizeof msg);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (k <= 0) break;
    uint64_t t = now_ns();
    for (size_t i = 0; i < (size_t)k / sizeof *msg; i++)
      if (msg[i].event == UFFD_EVENT_PAGEFAULT &&
          (msg[i].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)) {
        uintptr_t addr = (uintptr_t)msg[i].arg.pagefault.address;
        note_fault(addr, t); /* counted first: a release in revoke accounts its wait */
        revoke_at(addr, retry, &nretry);
      }
  }
  atomic_store(&reader_started, 0);
  return NULL;
}

static void start_reader(void) {
  if (atomic_load(&reader_started) || atomic_exchange(&reader_started, 1)) return;
  if (start_thread(reader_main, (void *)(intptr_t)atomic_load(&uffd)))
    atomic_store(&reader_started, 0);
}

void pw_guard_stats(uint64_t *writes_waited, uint64_t *wait_ns) {
  if (writes_waited) *writes_waited = atomic_load(&c_writes);
  if (wait_ns) *wait_ns = atomic_load(&c_wait_ns);
}

void pw_guard_counters_get(pw_guard_counters *c) {
  c->protects = atomic_load(&c_protects);
  c->protect_bytes = atomic_load(&c_protect_bytes);
  c->protect_ns = atomic_load(&c_protect_ns);
  c->release_ns = atomic_load(&c_release_ns);
  c->writes_waited = atomic_load(&c_writes);
  c->wait_ns = atomic_load(&c_wait_ns);
  c->hook_waits = atomic_load(&c_hook_waits);
}

/* ---- fork ---- */

static void fork_prepare(void) {
  pthread_mutex_lock(&table_mu);
  forking = 1;
  pthread_mutex_unlock(&table_mu);
  pw_guard_wait_all();
}

static void fork_parent(void) {
  pthread_mutex_lock(&table_mu);
  forking = 0;
  pthread_mutex_unlock(&table_mu);
}

/* The child has the parent's memory as it was with no guard left, none of guard.c's threads,
 * and a copy of a userfaultfd that belongs to the parent's address space: close it. */
static void fork_child(void) {
  pthread_mutex_init(&table_mu, NULL);
  pthread_mutex_init(&uffd_mu, NULL);
  pthread_mutex_init(&cache.mu, NULL);
  pthread_mutex_init(&pool.mu, NULL);
  forking = 0;
  int fd = atomic_exchange(&uffd, -1);
  if (fd >= 0) close(fd);
  cache.n = 0;
  pool.nhelpers = 0;
  atomic_store(&pool.left, 0);
  atomic_store(&reader_started, 0);
  atomic_flag_clear(&pend.lock);
  atomic_store(&pend.n, 0);
  for (int i = 0; i < NSLOTS; i++) {
    slot *s = &slots[i];
    pthread_mutex_init(&s->mu, NULL);
    atomic_store(&s->guarded, 0);
    atomic_store(&s->waiters, 0);
    if (atomic_load(&s->seq) & 1) atomic_fetch_add(&s->seq, 1);
  }
  atomic_store(&used, 0);
  atomic_store(&pw_guard_nactive, 0);
  atomic_store(&all_waiters, 0);
  /* the child's summary counts its own */
  atomic_store(&c_protects, 0);
  atomic_store(&c_protect_bytes, 0);
  atomic_store(&c_protect_ns, 0);
  atomic_store(&c_release_ns, 0);
  atomic_store(&c_writes, 0);
  atomic_store(&c_wait_ns, 0);
  atomic_store(&c_hook_waits, 0);
}

static void register_fork(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- protect and release ---- */

static void slot_free(slot *s, int i) {
  slot_write_begin(s);
  atomic_store(&s->guarded, 0);
  atomic_store(&s->lo, atomic_load(&s->hi));
  slot_write_end(s);
  atomic_fetch_and(&used, ~(1ull << i));
  atomic_fetch_sub(&pw_guard_nactive, 1);
  atomic_fetch_add(&released_seq, 1);
  if (atomic_load(&all_waiters)) futex_wake(&released_seq);
}

/* The calling thread's stack (found once per thread).  Guarding it would stop the thread on its
 * own frames before the copy is even queued. */
static PW_GUARD_TLS uintptr_t stack_lo, stack_hi;

static int on_own_stack(uintptr_t a, uintptr_t b) {
  if (!stack_hi) {
    pthread_attr_t at;
    void *addr;
    size_t size;
    if (!pthread_getattr_np(pthread_self(), &at)) {
      if (!pthread_attr_getstack(&at, &addr, &size)) {
        stack_lo = (uintptr_t)addr;
        stack_hi = (uintptr_t)addr + size;
      }
      pthread_attr_destroy(&at);
    }
    if (!stack_hi) { /* unknown: around the stack pointer, generously */
      uintptr_t sp = (uintptr_t)&at;
      stack_lo = sp > (64u << 20) ? sp - (64u << 20) : 0;
      stack_hi = sp + (64u << 20);
    }
  }
  uintptr_t sp = (uintptr_t)&a; /* a stack that moved (sigaltstack, a coroutine): guard nothing */
  if (sp < stack_lo || sp >= stack_hi) return a < sp + (1u << 20) && sp < b + (1u << 20);
  return a < stack_hi && stack_lo < b;
}

/* Guard the pages [a, b) for the source [p, p + n); revoke (NULL: none) and arg as
 * pw_guard_protect_revocable's. */
static int protect_pages(const void *p, size_t n, uintptr_t a, uintptr_t b, int *id, revoke_fn fn,
                         void *arg) {
  if (a >= b) return PW_GUARD_OK;
  uint64_t t0 = now_ns();
  if (on_own_stack(a, b)) return PW_GUARD_OWN_STACK;
  if ((uintptr_t)id + sizeof *id > a && (uintptr_t)id < b)
    return PW_GUARD_ERROR; /* *id would stop */
  int r;

  /* claim a slot: from here on the hooks wait for [a, b) */
  pthread_mutex_lock(&table_mu);
  if (forking) {
    pthread_mutex_unlock(&table_mu);
    return PW_GUARD_FORK;
  }
  uint64_t m = atomic_load(&used);
  for (uint64_t k = m; k;) {
    int i = __builtin_ctzll(k), g;
    k &= k - 1;
    uintptr_t lo, hi;
    slot_read(&slots[i], &g, &lo, &hi);
    if (g && lo < b && a < hi) {
      pthread_mutex_unlock(&table_mu);
      return PW_GUARD_OVERLAP;
    }
  }
  if (m == ~0ull) {
    pthread_mutex_unlock(&table_mu);
    return PW_GUARD_FULL;
  }
  int i = __builtin_ctzll(~m);
  slot *s = &slots[i];
  pthread_mutex_lock(&s->mu); /* a stale handle's release waits, then sees another gen */
  s->gen = (s->gen + 1) & 0xffffff;
  s->p = (uintptr_t)p;
  s->end = (uintptr_t)p + n;
  s->nseg = 0;
  slot_write_begin(s);
  atomic_store(&s->lo, a);
  atomic_store(&s->hi, b);
  atomic_store(&s->revoke, fn); /* with the range: never a torn or another guard's pair */
  atomic_store(&s->arg, arg);
  atomic_store(&s->guarded, 1);
  slot_write_end(s);
  atomic_fetch_or(&used, 1ull << i);
  atomic_fetch_add(&pw_guard_nactive, 1);
  pthread_mutex_unlock(&table_mu);

  /* whatever may allocate (pthread_atfork, a thread's creation) comes before the protection: the
   * range may share a page with the allocator's data, and this thread would stop on it */
  static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
  pthread_once(&fork_once, register_fork);
  r = ensure_uffd();
  if (!r) start_reader();
  /* the mappings (from the cache first), then the protection; a mapping made anew since the
   * cache was filled answers ENOENT: look again, once */
  for (int attempt = 0; !r && attempt < 2; attempt++) {
    r = verify_register(a, b, s->segs, &s->nseg, attempt == 0);
    if (r) break;
    int err = wp_range(s, a, b, 1);
    if (!err) break;
    r = PW_GUARD_ERROR;
    if (err != ENOENT) break;
    cache_clear();
    r = 0;
    if (attempt == 1) r = PW_GUARD_ERROR;
  }
  if (r) {
    if (s->nseg) unprotect(s, a, b); /* whatever part was protected */
    slot_free(s, i);
    pthread_mutex_unlock(&s->mu);
    return r;
  }
  atomic_fetch_add_explicit(&c_protects, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c_protect_bytes, b - a, memory_order_relaxed);
  atomic_fetch_add_explicit(&c_protect_ns, now_ns() - t0, memory_order_relaxed);
  *id = i + NSLOTS * (int)s->gen;
  pthread_mutex_unlock(&s->mu);
  return PW_GUARD_OK;
}

static int protect_start(size_t n, int *id) {
  *id = -1;
  int r = pw_guard_available();
  if (r) return r;
#ifdef PW_TESTING
  if (pw_guard_test_disable) return -1; /* on purpose: nothing guarded */
#endif
  return n ? 0 : -1;
}

int pw_guard_protect(const void *p, size_t n, int *id) {
  int r = protect_start(n, id);
  if (r) return r < 0 ? PW_GUARD_OK : r;
  uintptr_t pg = page_size(), a = (uintptr_t)p & ~(pg - 1), b = (uintptr_t)p + n;
  if (b < (uintptr_t)p || b > UINTPTR_MAX - pg) return PW_GUARD_ERROR;
  return protect_pages(p, n, a, (b + pg - 1) & ~(pg - 1), id, NULL, NULL);
}

static int protect_inner(const void *p, size_t n, int *id, const void **lo, const void **hi,
                         revoke_fn fn, void *arg) {
  uintptr_t pg = page_size(), a = ((uintptr_t)p + pg - 1) & ~(pg - 1),
            b = ((uintptr_t)p + n) & ~(pg - 1);
  if (a < (uintptr_t)p || b < a || (uintptr_t)p + n < (uintptr_t)p) a = b = (uintptr_t)p;
  *lo = (const void *)a;
  *hi = (const void *)b;
  int r = protect_start(b - a, id);
  if (r) return r < 0 ? PW_GUARD_OK : r;
  return protect_pages(p, n, a, b, id, fn, arg);
}

int pw_guard_protect_inner(const void *p, size_t n, int *id, const void **lo, const void **hi) {
  return protect_inner(p, n, id, lo, hi, NULL, NULL);
}

int pw_guard_protect_revocable(const void *p, size_t n, int *id, const void **lo, const void **hi,
                               void (*revoke)(void *arg), void *arg) {
  return protect_inner(p, n, id, lo, hi, revoke, arg);
}

/* The slot of a handle, locked, or NULL (stale, released, or none). */
static slot *slot_of(int id) {
  if (id < 0) return NULL;
  slot *s = &slots[id % NSLOTS];
  pthread_mutex_lock(&s->mu);
  if (s->gen != (unsigned)(id / NSLOTS) || !atomic_load(&s->guarded)) {
    pthread_mutex_unlock(&s->mu);
    return NULL;
  }
  return s;
}

void pw_guard_release_upto(int id, size_t done) {
  slot *s = slot_of(id);
  if (!s) return;
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  uintptr_t x = done >= s->end - s->p ? s->end : s->p + done;
  x &= ~(step() - 1); /* whole steps: never part of a huge page, never part of a page */
  if (x > hi) x = hi;
  if (x > lo) {
    uint64_t t0 = now_ns();
    unprotect(s, lo, x);
    slot_write_begin(s);
    atomic_store(&s->lo, x);
    slot_write_end(s);
    atomic_fetch_add_explicit(&c_release_ns, now_ns() - t0, memory_order_relaxed);
    account_release(lo, x);
  }
  pthread_mutex_unlock(&s->mu);
}

void pw_guard_release(int id) {
  slot *s = slot_of(id);
  if (!s) return;
  uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
  uint64_t t0 = now_ns();
  if (lo < hi) unprotect(s, lo, hi);
  atomic_fetch_add_explicit(&c_release_ns, now_ns() - t0, memory_order_relaxed);
  slot_free(s, id % NSLOTS);
  account_release(lo, hi);
  pthread_mutex_unlock(&s->mu);
}
