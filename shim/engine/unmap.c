/* unmap.c — a large shared-memory mapping released off the calling thread (unmap.h).
 *
 * Owns: the queue of moved mappings and the thread that unmaps them.
 * Must never: take a lock or allocate in pw_unmap_defer; call the program's (hooked) mmap family;
 * leave the program's range mapped when it reports 1.
 */

/* pw_unmap_defer: PROCMAP_QUERY (Linux 6.11+; older kernels: nothing is deferred) tells whether
 * [a, a+n) is exactly one shared mapping of a /dev/shm file or a memfd.  A slot of the queue is
 * claimed (CAS), a PROT_NONE range of n + 2 MiB reserved, and the mapping moved into it with
 * mremap(MREMAP_FIXED) at the same offset modulo 2 MiB (whole page tables move, not each entry);
 * the reservation's ends are unmapped and the slot published.  A failure anywhere gives the slot
 * back and the caller unmaps as usual.  The thread sleeps on a futex word and unmaps what is
 * published.  At most UNMAP_QUEUE mappings, of at most UNMAP_BYTES in all, wait at once: beyond
 * that munmap frees on the calling thread, as without pinwheel. */
#define _GNU_SOURCE
#include "unmap.h"

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
#include <sys/syscall.h>
#include <unistd.h>

#define UNMAP_QUEUE 4
#define UNMAP_BYTES ((size_t)2 << 30)
#define ALIGN ((uintptr_t)2 << 20)

struct pw_procmap_q { /* PROCMAP_QUERY's argument (linux/fs.h, Linux 6.11) */
  uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset,
      inode;
  uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY_IOC _IOWR('f', 17, struct pw_procmap_q)
#define PROCMAP_SHARED 0x08

enum { FREE, CLAIMED, READY };
static struct {
  _Atomic int state;
  void *at;
  size_t len;
} q[UNMAP_QUEUE];
static _Atomic size_t queued_bytes;
static _Atomic int started, hold, unsupported; /* started: 1 running, 2 starting */
static size_t page = 4096;
static _Atomic uint32_t wake; /* futex word: bumped when a slot is published or hold changes */

static long sys_futex(_Atomic uint32_t *w, int op, uint32_t v) {
  return syscall(SYS_futex, (uint32_t *)w, op, v, NULL, NULL, 0);
}

static void *raw_mmap(size_t n) {
  return (void *)syscall(SYS_mmap, NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
}
static void raw_munmap(void *a, size_t n) {
  if (n) syscall(SYS_munmap, a, n);
}

static int shm_name(const char *s) {
  return !strncmp(s, "/dev/shm/", 9) || !strncmp(s, "/memfd:", 7);
}

/* [a, a+n) is exactly one shared mapping of a shared-memory file. */
static int whole_shm_mapping(uintptr_t a, size_t n) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char name[256];
  struct pw_procmap_q m = {.size = sizeof m,
                           .query_addr = a,
                           .vma_name_size = sizeof name,
                           .vma_name_addr = (uintptr_t)name};
  int r = (int)syscall(SYS_ioctl, fd, PROCMAP_QUERY_IOC, &m), err = errno;
  syscall(SYS_close, fd);
  if (r) {
    if (err == ENOTTY || err == EINVAL) atomic_store(&unsupported, 1);
    return 0;
  }
  if (m.vma_name_size == 0) return 0;
  name[sizeof name - 1] = 0;
  return m.vma_start == a && m.vma_end == a + n && (m.vma_flags & PROCMAP_SHARED) &&
         m.dev_major == 0 && shm_name(name);
}

static void release(int i) {
  raw_munmap(q[i].at, q[i].len);
  atomic_fetch_sub(&queued_bytes, q[i].len);
  atomic_store_explicit(&q[i].state, FREE, memory_order_release);
}

int pw_unmap_defer(void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr;
  size_t n = (len + page - 1) & ~(page - 1);
  if (len < PW_UNMAP_MIN || (a & (page - 1)) ||
      atomic_load_explicit(&started, memory_order_relaxed) != 1 ||
      atomic_load_explicit(&unsupported, memory_order_relaxed))
    return 0;
  int saved = errno, slot = -1;
  for (int i = 0; i < UNMAP_QUEUE && slot < 0; i++) {
    int want = FREE;
    if (atomic_compare_exchange_strong(&q[i].state, &want, CLAIMED)) slot = i;
  }
  if (slot < 0) goto out;
  if (atomic_fetch_add(&queued_bytes, n) + n > UNMAP_BYTES || !whole_shm_mapping(a, n)) goto give;
  char *base = raw_mmap(n + ALIGN);
  if (base == MAP_FAILED) goto give;
  char *to = base + (((a & (ALIGN - 1)) - ((uintptr_t)base & (ALIGN - 1))) & (ALIGN - 1));
  if ((void *)syscall(SYS_mremap, addr, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, to) != to) {
    raw_munmap(base, n + ALIGN);
    goto give;
  }
  raw_munmap(base, (size_t)(to - base));
  raw_munmap(to + n, (size_t)(base + n + ALIGN - (to + n)));
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

static void *reaper(void *arg) {
  (void)arg;
  for (;;) {
    uint32_t w = atomic_load(&wake);
    int did = 0;
    if (!atomic_load(&hold))
      for (int i = 0; i < UNMAP_QUEUE; i++)
        if (atomic_load_explicit(&q[i].state, memory_order_acquire) == READY) {
          release(i);
          did = 1;
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
  atomic_store(&started, ok);
}

void pw_unmap_after_fork_child(void) {
  atomic_store(&started, 0);
  atomic_store(&hold, 0);
  for (int i = 0; i < UNMAP_QUEUE; i++) {
    if (atomic_load(&q[i].state) == READY) release(i);
    atomic_store(&q[i].state, FREE); /* one another thread was moving: left mapped in the child */
  }
  atomic_store(&queued_bytes, 0);
}

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

void pw_unmap_test_hold(int h) {
  atomic_store(&hold, h);
  atomic_fetch_add(&wake, 1);
  sys_futex(&wake, FUTEX_WAKE_PRIVATE, 1);
}
