/* numa.h — where a GPU sits on a host of several NUMA nodes, and placing staging there.
 *
 * On a host with more than one NUMA node, a device's pinned pool is allocated on the node of the
 * device's PCI function (sysfs numa_node), and the threads that copy into it (the pool's workers,
 * the deferred copies' copy thread) run on that node's CPUs, intersected with the process's
 * affinity.  A host of one node, or a device whose node sysfs does not know (-1), is left as it
 * is.  The files read, under pw_numa_root ("/sys"; tests point it at a fake tree):
 *   devices/system/node/online              nodes online ("0-1")
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

/* The calling thread's memory policy, saved so it can be put back. */
typedef struct {
  int mode, ok;
  unsigned long mask[16];
} pw_numa_policy;
/* Prefer node for this thread's new pages: 0, or -1 (the policy is unchanged). */
int pw_numa_prefer(int node, pw_numa_policy *saved);
void pw_numa_restore(const pw_numa_policy *saved);
/* The node of the page at p (resident), or -1. */
int pw_numa_node_of_addr(const void *p);

/* Placement of the staging threads: the node of every device set up so far when they agree (a
 * second node: the threads go back to the process's affinity).  pw_numa_place is called by the
 * device setup; pw_numa_apply by a staging thread before it works, with its own generation
 * counter (starting at 0): a relaxed load when nothing changed. */
void pw_numa_place(int node);
void pw_numa_apply(unsigned *seen);
/* The placement: the node (-1: none; -2: devices on several nodes) and its CPUs' count. */
int pw_numa_placement(cpu_set_t *set);
/* Forget the placement (tests; after fork the threads are new anyway). */
void pw_numa_reset(void);

#endif
