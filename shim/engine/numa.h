/* numa.h — where a GPU sits on a host of several NUMA nodes, and placing staging there.
 *
 * On a host with more than one NUMA node, a device's pinned pool is allocated with the node of
 * the device's PCI function (sysfs numa_node) preferred, unless the setting-up thread has a
 * memory policy of its own, and the threads that copy into it (the pool's workers, the deferred
 * copies' copy thread) run on that node's CPUs within their own affinity, and the placement
 * says how many of those CPUs are this process's (pw_numa_share).  A node none of whose
 * CPUs the setting-up thread may use is left alone.  A host of one node, or a device whose node
 * sysfs does not know (-1), is left as it is.  The files read, under pw_numa_root ("/sys"; tests
 * point it at a fake tree): devices/system/node/online              nodes online ("0-1")
 *   devices/system/node/nodeN/cpulist       node N's CPUs ("0-15,32-47")
 *   bus/pci/devices/DDDD:BB:DD.F/numa_node  the node of a PCI function ("1", or "-1")
 */
#ifndef PW_NUMA_H
#define PW_NUMA_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stddef.h>

extern const char *pw_numa_root;

/* "0-3,8,10-11" into set (cleared first): 0, or -1 when malformed or beyond CPU_SETSIZE. */
int pw_cpulist_parse(const char *s, cpu_set_t *set);
/* set as a cpulist ("0-3,8"; "" when empty), cut at len: the number of CPUs. */
int pw_cpulist_format(const cpu_set_t *set, char *buf, size_t len);

/* Online nodes (1 when sysfs does not say). */
int pw_numa_nodes(void);
/* The node of the PCI function busid as CUDA writes it ("0000:3B:00.0", "00000000:3b:00.0"):
 * the node, or -1 (unknown, or not a bus id). */
int pw_numa_node_of_pci(const char *busid);
/* Node's CPUs that this process may run on: their count (0: none, or unknown). */
int pw_numa_cpus(int node, cpu_set_t *set);

/* Prefer node for this thread's new pages: 0, or -1 (the policy is unchanged).  Only a thread
 * with the default policy is changed: an explicit one (numactl --membind, --interleave, ...) is
 * the user's choice and stays.  pw_numa_unprefer puts the default back. */
int pw_numa_prefer(int node);
void pw_numa_unprefer(void);
/* The node of the page at p (resident), or -1. */
int pw_numa_node_of_addr(const void *p);

/* Placement of the staging threads: the node of every device set up so far when they agree (a
 * second node: each thread goes back to the affinity it had).  pw_numa_place is called by the
 * device setup; pw_numa_apply by a staging thread before it works, with its own state (zeroed
 * at the thread's start): a relaxed load when nothing changed.  A thread runs on the node's
 * CPUs within the affinity it had before; none there: it stays as it is. */
typedef struct {
  unsigned seen;
  int saved; /* own holds the thread's affinity before its first placement */
  cpu_set_t own;
} pw_numa_thread;
void pw_numa_place(int node);
void pw_numa_apply(pw_numa_thread *t);
/* The affinity the placing thread had at the first placement (a device's setup, on a thread that
 * is never placed itself): what a staging thread started by a thread already placed (the pool's
 * workers, when the deferred copies' copy thread starts them) is given to start with, so that
 * "back to the affinity it had" means the process's, not the node's.  1 and it in *set, or 0
 * (nothing placed since start, fork or reset). */
int pw_numa_origin(cpu_set_t *set);
/* The placement: the node (-1: none; -2: devices on several nodes) and the node's CPUs. */
int pw_numa_placement(cpu_set_t *set);
/* This process's share of the placed node: the node's CPUs the placing thread may use, divided
 * among the local ranks assumed to share the node (ceil(LOCAL_WORLD_SIZE / nodes), at least 1),
 * at least 1; 0 while there is no placement (none yet, undone, reset, a forked child).  A relaxed
 * load, for any thread at any time. */
int pw_numa_share(void);
/* Forget the placement: the threads go back (tests). */
void pw_numa_reset(void);
/* In a forked child: no placement, the lock new (the parent's may have been held). */
void pw_numa_after_fork_child(void);

#endif
