/* procmap.h — one mapping of this process by address, through PROCMAP_QUERY (Linux 6.11,
 * linux/fs.h), without reading /proc/self/maps; the guard (guard.c) and the unmapper (unmap.c).
 *
 * Must never: allocate or take a lock (both callers run in memory hooks, maybe in signal handlers).
 */
#ifndef PW_PROCMAP_H
#define PW_PROCMAP_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct pw_procmap_query {
  uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset,
      inode;
  uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
};
#define PW_PROCMAP_QUERY _IOWR('f', 17, struct pw_procmap_query)
#define PW_PROCMAP_READABLE 0x01
#define PW_PROCMAP_SHARED 0x08
#define PW_PROCMAP_COVERING_OR_NEXT 0x10

/* The mapping at addr (or, with PW_PROCMAP_COVERING_OR_NEXT, the next one) into *q, its name
 * (empty when it has none) into name[size]: 0, or -errno (ENOTTY/EINVAL: a kernel without it). fd
 * is open on /proc/self/maps. */
static inline int pw_procmap_query(int fd, uintptr_t addr, uint64_t flags,
                                   struct pw_procmap_query *q, char *name, size_t size) {
  *q = (struct pw_procmap_query){.size = sizeof *q,
                                 .query_flags = flags,
                                 .query_addr = addr,
                                 .vma_name_size = (uint32_t)size,
                                 .vma_name_addr = (uintptr_t)name};
  if (syscall(SYS_ioctl, fd, PW_PROCMAP_QUERY, q)) return -errno;
  if (q->vma_name_size == 0) name[0] = 0;
  name[size - 1] = 0;
  return 0;
}

#endif
