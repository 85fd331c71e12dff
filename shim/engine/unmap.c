/* unmap.c — a large shared-memory mapping released off the calling thread (unmap.h).
 *
 * Owns: the queue of moved mappings and the thread that unmaps them.
 * Must never: take a lock or allocate in pw_unmap_defer; call the program's (hooked) mmap family;
 * leave the program's range mapped when it reports 1; unmap a range it does not own.
 */

/* pw_unmap_defer: PROCMAP_QUERY (Linux 6.11+; older kernels: nothing is deferred) tells whether
 * [a, a+n) is exactly one shared mapping of a file of the /dev/shm file system (its device, and a
 * name under /dev/shm/: POSIX shared memory, what PyTorch's DataLoader uses; not memfds, whose
 * seals a mapping left alive would refuse).  A slot of the queue is claimed (CAS), a PROT_NONE
 * range of n + 2 MiB reserved, and the mapping moved into it with mremap(MREMAP_FIXED) at the same
 * offset modulo 2 MiB (whole page tables move, not each entry); the reservation's ends are
 * unmapped and the slot published.  A failure gives the slot back and the caller unmaps as usual
 * (a failed move also ends deferral for the process).
 * The thread sleeps on a futex word and unmaps what is published (READY -> RELEASING -> FREE).
 * At most UNMAP_QUEUE mappings wait at once, and only while /dev/shm keeps four times what waits
 * free: a held batch must not make another process's allocation of shared memory fail.  What the
 * program can see: the file's pages are freed (and the memory cgroup uncharged) when the thread
 * gets to them, the moved mappings count in its address space until then; a userfaultfd monitor
 * of the range sees a remap, not an unmap. */
#define _GNU_SOURCE
#include "unmap.h"

#include "procmap.h"
#include "pw.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define UNMAP_QUEUE 4
#define ALIGN ((uintptr_t)2 << 20)

enum { FREE, CLAIMED, READY, RELEASING };
static struct {
  _Atomic int state;
  void *at;
  size_t len;
} q[UNMAP_QUEUE];
static _Atomic size_t queued_bytes;
static _Atomic int started, hold, unsupported; /* started: 1 running, 2 starting */
static _Atomic int forking;                    /* forks under way: the thread starts no release */
static size_t page = 4096;                     /* set before started is 1 (release) */
static unsigned shm_major, shm_minor;          /* /dev/shm's device */
static _Atomic uint32_t wake; /* futex word: bumped when a slot is published or hold changes */

static long sys_futex(_Atomic uint32_t *w, int op, uint32_t v) {
  return syscall(SYS_futex, (uint32_t *)w, op, v, NULL, NULL, 0);
}

static void *raw_mmap(void *at, size_t n, int fixed) {
  return (void *)syscall(
      SYS_mmap, at, n, PROT_NONE,
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED_NOREPLACE : 0), -1, 0);
}
static void raw_munmap(void *a, size_t n) {
  if (n) syscall(SYS_munmap, a, n);
}

/* [a, a+n) is exactly one shared mapping of a file on /dev/shm. */
static int whole_shm_mapping(uintptr_t a, size_t n) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char name[288]; /* a 255-byte name, "/dev/shm/" and " (deleted)" */
  struct pw_procmap_query m;
  int r = pw_procmap_query(fd, a, 0, &m, name, sizeof name);
  syscall(SYS_close, fd);
  if (r) {
    if (r == -ENOTTY || r == -EINVAL) atomic_store(&unsupported, 1);
    return 0;
  }
  return m.vma_start == a && m.vma_end == a + n && (m.vma_flags & PW_PROCMAP_SHARED) &&
         m.dev_major == shm_major && m.dev_minor == shm_minor && !strncmp(name, "/dev/shm/", 9);
}

#ifdef PW_TESTING
static _Atomic uint64_t test_free; /* pw_unmap_test_free: /dev/shm's free bytes, 0 = the real */
#endif

/* /dev/shm keeps at least four times what would wait, with n more, free. */
static int room_for(size_t n) {
  struct statfs f;
  if (syscall(SYS_statfs, "/dev/shm", &f)) return 0;
  uint64_t free_bytes = (uint64_t)f.f_bavail * (uint64_t)f.f_bsize;
#ifdef PW_TESTING
  if (atomic_load(&test_free)) free_bytes = atomic_load(&test_free);
#endif
  return free_bytes >= 4 * (uint64_t)n;
}

int pw_unmap_defer(void *addr, size_t len) {
  if (len < PW_UNMAP_MIN || atomic_load_explicit(&started, memory_order_acquire) != 1 ||
      atomic_load_explicit(&unsupported, memory_order_relaxed))
    return 0;
  uintptr_t a = (uintptr_t)addr;
  size_t n = (len + page - 1) & ~(page - 1);
  if (a & (page - 1)) return 0;
  int saved = errno, slot = -1;
  for (int i = 0; i < UNMAP_QUEUE && slot < 0; i++) {
    int want = FREE;
    if (atomic_compare_exchange_strong(&q[i].state, &want, CLAIMED)) slot = i;
  }
  if (slot < 0) { /* counted when it is a batch the queue would have taken */
    if (whole_shm_mapping(a, n)) pw_add(&pw_st.shm_unmaps_left[PW_UNMAP_QUEUE_FULL], 1);
    goto out;
  }
  size_t waiting = atomic_fetch_add(&queued_bytes, n) + n;
  if (!whole_shm_mapping(a, n)) goto give;
  if (!room_for(waiting)) {
    pw_add(&pw_st.shm_unmaps_left[PW_UNMAP_NO_ROOM], 1);
    goto give;
  }
  char *base = raw_mmap(NULL, n + ALIGN, 0);
  if (base == MAP_FAILED) {
    pw_add(&pw_st.shm_unmaps_left[PW_UNMAP_MOVE_FAILED], 1);
    goto give;
  }
  char *to = base + (((a & (ALIGN - 1)) - ((uintptr_t)base & (ALIGN - 1))) & (ALIGN - 1));
  raw_munmap(base, (size_t)(to - base));
  raw_munmap(to + n, (size_t)(base + n + ALIGN - (to + n)));
  if ((void *)syscall(SYS_mremap, addr, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, to) != to) {
    /* The kernel may have unmapped [to, to+n) before failing, and another thread may map there
     * since: only a range this thread maps again is known to be its own.  A reservation left in
     * place costs address space only; deferral stops for the process, so few are left (one per
     * caller that got this far). */
    atomic_store(&unsupported, 1);
    pw_add(&pw_st.shm_unmaps_left[PW_UNMAP_MOVE_FAILED], 1);
    char *r = raw_mmap(to, n, 1);
    if (r == to)
      raw_munmap(to, n);
    else if (r != MAP_FAILED)
      raw_munmap(r, n); /* a kernel that ignored the flag: not at `to` */
    goto give;          /* EEXIST: still the reservation or another's; left (address space only) */
  }
  q[slot].at = to;
  q[slot].len = n;
  atomic_store_explicit(&q[slot].state, READY, memory_order_release);
  pw_add(&pw_st.shm_unmaps_deferred, 1);
  atomic_fetch_add(&wake, 1);
  sys_futex(&wake, FUTEX_WAKE_PRIVATE, 1);
  errno = saved;
  return 1;
give:
  atomic_fetch_sub(&queued_bytes, n);
  atomic_store(&q[slot].state, FREE);
out:
  errno = saved;
  return 0;
}

static void release(int i) {
  raw_munmap(q[i].at, q[i].len);
  atomic_fetch_sub(&queued_bytes, q[i].len);
  atomic_store_explicit(&q[i].state, FREE, memory_order_release);
}

static void *reaper(void *arg) {
  (void)arg;
  for (;;) {
    uint32_t w = atomic_load(&wake);
    int did = 0;
    for (int i = 0; i < UNMAP_QUEUE && !atomic_load(&hold); i++) {
      int want = READY;
      if (atomic_compare_exchange_strong(&q[i].state, &want, RELEASING)) {
        /* RELEASING is stored before forking is read, and a fork's prepare raises forking before
         * it reads the states (all sequentially consistent): a fork sees the slot, or we see it */
        if (atomic_load(&forking)) {
          atomic_store(&q[i].state, READY);
          break;
        }
        release(i);
        did = 1;
      }
    }
    if (!did) sys_futex(&wake, FUTEX_WAIT_PRIVATE, w);
  }
  return NULL;
}

void pw_unmap_start(void) {
  int no = 0;
  if (!atomic_compare_exchange_strong(&started, &no, 2)) return;
  long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0) page = (size_t)ps;
  struct stat st;
  if (stat("/dev/shm", &st)) { /* no /dev/shm: nothing to defer */
    atomic_store(&started, 0);
    return;
  }
  shm_major = major(st.st_dev), shm_minor = minor(st.st_dev);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes none of the program's signals */
  pthread_attr_t at;
  pthread_t t;
  int ok = !pthread_attr_init(&at) && !pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) &&
           !pthread_attr_setstacksize(&at, 64 << 10) && !pthread_create(&t, &at, reaper, NULL);
  pthread_attr_destroy(&at);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (ok) pthread_setname_np(t, "pw-unmap");
  atomic_store_explicit(&started, ok, memory_order_release);
}

/* A fork waits until no slot is being released (the thread starts no release meanwhile), so the
 * child never finds a range the thread may have unmapped and another thread mapped again; at most
 * 2 s, then the child leaves such a slot alone. */
void pw_unmap_before_fork(void) {
  atomic_fetch_add(&forking, 1);
  for (int tries = 0; tries < 2000; tries++) {
    int busy = 0;
    for (int i = 0; i < UNMAP_QUEUE; i++)
      busy |= atomic_load(&q[i].state) == RELEASING;
    if (!busy) return;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

void pw_unmap_after_fork_parent(void) {
  atomic_fetch_sub(&forking, 1);
  if (atomic_load(&started) != 1) return; /* no thread: no system call (a process without CUDA) */
  atomic_fetch_add(&wake, 1);
  sys_futex(&wake, FUTEX_WAKE_PRIVATE, 1);
}

/* A READY slot's mapping is the child's copy: unmapped.  A RELEASING one (a fork that waited 2 s
 * in vain) or a CLAIMED one (another thread was moving a mapping) is left: its mapping, if the
 * child has it, stays for the child's life; never a range that may be another's. */
void pw_unmap_after_fork_child(void) {
  atomic_store(&started, 0);
  atomic_store(&hold, 0);
  atomic_store(&forking, 0);
  for (int i = 0; i < UNMAP_QUEUE; i++) {
    int s = atomic_load(&q[i].state);
    if (s == READY) raw_munmap(q[i].at, q[i].len);
    atomic_store(&q[i].state, FREE);
  }
  atomic_store(&queued_bytes, 0);
}

#ifdef PW_TESTING
void pw_unmap_drain(void) {
  if (atomic_load(&started) != 1) return;
  for (;;) {
    int busy = 0;
    for (int i = 0; i < UNMAP_QUEUE; i++)
      busy |= atomic_load(&q[i].state) != FREE;
    if (!busy) return;
    usleep(1000);
  }
}

void *pw_unmap_test_begin_release(int unmap_now) {
  for (int i = 0; i < UNMAP_QUEUE; i++) {
    int want = READY;
    if (atomic_compare_exchange_strong(&q[i].state, &want, RELEASING)) {
      if (unmap_now) raw_munmap(q[i].at, q[i].len);
      return q[i].at;
    }
  }
  return NULL;
}

void pw_unmap_test_end_release(void) {
  for (int i = 0; i < UNMAP_QUEUE; i++)
    if (atomic_load(&q[i].state) == RELEASING) {
      atomic_fetch_sub(&queued_bytes, q[i].len);
      atomic_store(&q[i].state, FREE);
    }
}

int pw_unmap_test_stopped(void) {
  return atomic_load(&unsupported);
}

void pw_unmap_test_free(uint64_t bytes) {
  atomic_store(&test_free, bytes);
}

void pw_unmap_test_hold(int h) {
  atomic_store(&hold, h);
  atomic_fetch_add(&wake, 1);
  sys_futex(&wake, FUTEX_WAKE_PRIVATE, 1);
}
#endif
