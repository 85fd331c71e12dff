/* numa.c — the NUMA node of a device, its CPUs, and the staging placed there (numa.h).
 *
 * Memory: the device setup prefers the node for its own thread while the pinned pool is
 * allocated (set_mempolicy, MPOL_PREFERRED: a full node still gives pages elsewhere), puts the
 * thread's policy back, and reads where the pool's first page landed (get_mempolicy), which the
 * summary reports.  Threads: the pool's workers and the copy thread set their own affinity when
 * they see a new placement; the program's threads are never moved.  Share: the placement also
 * keeps how many of the node's CPUs are this process's (pw_numa_share), which whoever sizes the
 * staging threads may read lock-free; nothing here knows who does.  No libnuma: three system
 * calls and a few sysfs files.  Nothing here allocates after the first placement.
 */
#define _GNU_SOURCE
#include "numa.h"

#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"

enum { MPOL_DEFAULT_ = 0, MPOL_PREFERRED_ = 1, MPOL_F_NODE_ = 1, MPOL_F_ADDR_ = 2 };
#define MAXNODE (16 * 8 * sizeof(unsigned long))

const char *pw_numa_root = "/sys";

/* The first line of the file rel under pw_numa_root: 0, or -1 (also when the file fills the
 * buffer: a cut cpulist would still parse). */
static int read_line(const char *rel, char *buf, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", pw_numa_root, rel);
  if (pw_read_small(path, buf, len) || strlen(buf) >= len - 1) return -1;
  buf[strcspn(buf, "\n")] = 0;
  return 0;
}

static int parse_uint(const char **s, long *v) {
  long x = 0;
  if (!isdigit((unsigned char)**s)) return -1;
  for (; isdigit((unsigned char)**s); (*s)++)
    if ((x = x * 10 + (**s - '0')) >= CPU_SETSIZE) return -1;
  *v = x;
  return 0;
}

int pw_cpulist_parse(const char *s, cpu_set_t *set) {
  CPU_ZERO(set);
  if (!*s) return 0;
  for (;;) {
    long a, b;
    if (parse_uint(&s, &a)) return -1;
    b = a;
    if (*s == '-') {
      s++;
      if (parse_uint(&s, &b) || b < a) return -1;
    }
    for (long c = a; c <= b; c++)
      CPU_SET((int)c, set);
    if (!*s) return 0;
    if (*s++ != ',') return -1;
  }
}

int pw_cpulist_format(const cpu_set_t *set, char *buf, size_t len) {
  size_t at = 0;
  int n = 0;
  if (len) buf[0] = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
      e++;
    n += e - c + 1;
    char *p = at < len ? buf + at : NULL;
    size_t room = at < len ? len - at : 0;
    int w = e > c ? snprintf(p, room, "%s%d-%d", at ? "," : "", c, e)
                  : snprintf(p, room, "%s%d", at ? "," : "", c);
    at += w > 0 ? (size_t)w : 0;
    c = e;
  }
  return n;
}

int pw_numa_nodes(void) {
  char line[256];
  cpu_set_t nodes; /* a node list has a cpulist's syntax */
  if (read_line("devices/system/node/online", line, sizeof line) || pw_cpulist_parse(line, &nodes))
    return 1;
  int n = CPU_COUNT(&nodes);
  return n > 0 ? n : 1;
}

int pw_numa_node_of_pci(const char *busid) {
  unsigned dom, bus, dev, fn;
  char tail;
  if (!busid || sscanf(busid, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || dom > 0xffff ||
      bus > 0xff || dev > 0x1f || fn > 7)
    return -1;
  char rel[96], line[32];
  snprintf(rel, sizeof rel, "bus/pci/devices/%04x:%02x:%02x.%x/numa_node", dom, bus, dev, fn);
  if (read_line(rel, line, sizeof line)) return -1;
  char *end;
  long node = strtol(line, &end, 10);
  return end != line && !*end && node >= 0 && node < (long)MAXNODE ? (int)node : -1;
}

/* Node's CPUs as sysfs lists them: 0, or -1. */
static int node_cpulist(int node, cpu_set_t *set) {
  char rel[96], line[8192];
  snprintf(rel, sizeof rel, "devices/system/node/node%d/cpulist", node);
  return node < 0 || read_line(rel, line, sizeof line) || pw_cpulist_parse(line, set) ? -1 : 0;
}

/* Of set, the CPUs this thread may run on: their count (set is changed). */
static int usable(cpu_set_t *set) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine)) return 0;
  CPU_AND(set, set, &mine);
  return CPU_COUNT(set);
}

int pw_numa_cpus(int node, cpu_set_t *set) {
  return node_cpulist(node, set) ? 0 : usable(set);
}

int pw_numa_prefer(int node) {
  int mode = -1;
  unsigned long mask[16];
  if (node < 0 || node >= (int)MAXNODE) return -1;
  /* the kernel reads maxnode - 1 bits: MAXNODE + 1 covers every bit of the mask */
  if (syscall(SYS_get_mempolicy, &mode, mask, MAXNODE + 1, NULL, 0UL) != 0 || mode != MPOL_DEFAULT_)
    return -1;
  unsigned long want[16] = {0};
  want[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
  return syscall(SYS_set_mempolicy, MPOL_PREFERRED_, want, MAXNODE + 1) == 0 ? 0 : -1;
}

void pw_numa_unprefer(void) {
  (void)syscall(SYS_set_mempolicy, MPOL_DEFAULT_, NULL, 0UL);
}

int pw_numa_node_of_addr(const void *p) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, (unsigned long)(MPOL_F_NODE_ | MPOL_F_ADDR_)))
    return -1;
  return node;
}

/* ---- the staging threads' placement ---- */

static pthread_mutex_t place_lock = PTHREAD_MUTEX_INITIALIZER;
static int placed_node = -1;  /* under place_lock: -1 none, -2 several nodes */
static cpu_set_t placed_cpus; /* under place_lock: the node's CPUs; empty: none */
static _Atomic unsigned place_gen;
static atomic_int placed_share; /* written under place_lock, read without it: 0 none */
/* under place_lock: the affinity of the thread that placed first, before any placement (0: none) */
static int origin_known;
static cpu_set_t origin;

void pw_numa_place(int node) {
  cpu_set_t set, mine;
  if (node_cpulist(node, &set)) return;
  mine = set;
  int n = usable(&mine); /* for the summary and the share: within this thread's affinity */
  /* the local ranks are assumed spread evenly over the nodes: ceil(ranks / nodes) on this one */
  int nodes = pw_numa_nodes(), ranks = (pw_local_ranks() + nodes - 1) / nodes;
  int share = n > 0 ? n / ranks : 0; /* ranks >= 1: pw_local_ranks() and nodes are */
  if (n > 0 && share < 1) share = 1;
  cpu_set_t own;
  int own_ok = sched_getaffinity(0, sizeof own, &own) == 0;
  pthread_mutex_lock(&place_lock);
  if (!origin_known && own_ok) { /* the setup's thread is never a staging thread: not placed */
    origin = own;
    origin_known = 1;
  }
  if (placed_node == -1 && CPU_COUNT(&set)) {
    placed_node = node;
    placed_cpus = set;
    atomic_store(&placed_share, share);
    atomic_fetch_add(&place_gen, 1);
    atomic_store(&pw_st.numa_threads_node, (uint64_t)node + 1);
    atomic_store(&pw_st.numa_cpus, (uint64_t)n);
    pw_log(PW_LOG_INFO, "staging threads placed on NUMA node %d (%d CPUs, %d for this rank)", node,
           n, share);
  } else if (placed_node >= 0 && placed_node != node) { /* devices on two nodes: undo */
    placed_node = -2;
    CPU_ZERO(&placed_cpus);
    atomic_store(&placed_share, 0);
    atomic_fetch_add(&place_gen, 1);
    atomic_store(&pw_st.numa_threads_node, 0);
    atomic_store(&pw_st.numa_mixed, 1);
    pw_log(PW_LOG_INFO, "devices on several NUMA nodes: staging threads not placed");
  }
  pthread_mutex_unlock(&place_lock);
}

void pw_numa_apply(pw_numa_thread *t) {
  unsigned g = atomic_load_explicit(&place_gen, memory_order_acquire);
  if (g == t->seen) return;
  /* never waits: a fork while another thread held the lock leaves it held in the child (until
   * pw_numa_after_fork_child), whose threads then keep the affinity they have */
  if (pthread_mutex_trylock(&place_lock)) return;
  cpu_set_t set = placed_cpus;
  g = atomic_load(&place_gen);
  pthread_mutex_unlock(&place_lock);
  t->seen = g;
  if (!CPU_COUNT(&set)) { /* no placement (any more): back to the thread's own */
    if (t->saved) (void)pthread_setaffinity_np(pthread_self(), sizeof t->own, &t->own);
    return;
  }
  if (!t->saved) {
    if (pthread_getaffinity_np(pthread_self(), sizeof t->own, &t->own)) return;
    t->saved = 1;
  }
  CPU_AND(&set, &set, &t->own);
  if (CPU_COUNT(&set) && pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0)
    pw_add(&pw_st.numa_threads_placed, 1);
}

int pw_numa_placement(cpu_set_t *set) {
  pthread_mutex_lock(&place_lock);
  int node = placed_node;
  if (set) *set = placed_cpus;
  pthread_mutex_unlock(&place_lock);
  return node;
}

int pw_numa_share(void) {
  return atomic_load_explicit(&placed_share, memory_order_relaxed);
}

int pw_numa_origin(cpu_set_t *set) {
  pthread_mutex_lock(&place_lock);
  int known = origin_known;
  if (known) *set = origin;
  pthread_mutex_unlock(&place_lock);
  return known;
}

void pw_numa_reset(void) {
  pthread_mutex_lock(&place_lock);
  origin_known = 0;
  placed_node = -1;
  CPU_ZERO(&placed_cpus);
  atomic_store(&placed_share, 0);
  atomic_fetch_add(&place_gen, 1);
  pthread_mutex_unlock(&place_lock);
}

void pw_numa_after_fork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  place_lock = fresh;
  origin_known = 0;
  placed_node = -1;
  CPU_ZERO(&placed_cpus);
  atomic_store(&placed_share, 0);
  atomic_fetch_add(&place_gen, 1);
}
