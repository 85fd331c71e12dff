/* test_numa.c — NUMA placement (shim/engine/numa.c) on a fake sysfs tree: the topology read back,
 * and the engine on the simulator placing a device's staging threads on its node, leaving a host
 * of one node as it is, and undoing the placement when devices sit on two nodes; a batch of the
 * default thread count capped to the placed node's CPUs.  The simulator's device d has the PCI
 * bus id 0000:3B:dd.0. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "numa.h"
#include "pw.h"
#include "sim/sim.h"

static char tree[128];
static cpu_set_t mine, node0, node1; /* this process's CPUs; the fake nodes': first, the rest */

static void put(const char *rel, const char *text) {
  char path[512], dir[512];
  snprintf(path, sizeof path, "%s/%s", tree, rel);
  for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
    snprintf(dir, sizeof dir, "%.*s", (int)(p - path), path);
    if (mkdir(dir, 0755) && errno != EEXIST) fail_msg("mkdir %s: %s", dir, strerror(errno));
  }
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* A tree of `nodes` nodes (1 or 2); sim devices 0 and 1 on nodes dev0 and dev1. */
static void make_tree(int nodes, int dev0, int dev1) {
  char list[4096], num[16];
  snprintf(tree, sizeof tree, "/tmp/pwtest-numa-%d-%d-%d", (int)getpid(), nodes, dev1);
  put("devices/system/node/online", nodes == 2 ? "0-1\n" : "0\n");
  pw_cpulist_format(nodes == 2 ? &node0 : &mine, list, sizeof list);
  put("devices/system/node/node0/cpulist", list);
  if (nodes == 2) {
    pw_cpulist_format(&node1, list, sizeof list);
    put("devices/system/node/node1/cpulist", list);
  }
  snprintf(num, sizeof num, "%d\n", dev0);
  put("bus/pci/devices/0000:3b:00.0/numa_node", num);
  snprintf(num, sizeof num, "%d\n", dev1);
  put("bus/pci/devices/0000:3b:01.0/numa_node", num);
  pw_numa_root = tree;
}

static int setup_cpus(void **state) {
  (void)state;
  assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
  CPU_ZERO(&node0);
  CPU_ZERO(&node1);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &mine)) {
      if (first < 0) {
        first = c;
        CPU_SET(c, &node0);
      } else {
        CPU_SET(c, &node1);
      }
    }
  if (!CPU_COUNT(&node1)) CPU_SET(first, &node1); /* one CPU: both nodes have it */
  return 0;
}

static void test_cpulist(void **state) {
  (void)state;
  cpu_set_t s;
  char buf[64];
  assert_int_equal(pw_cpulist_parse("0-3,8,10-11", &s), 0);
  assert_int_equal(CPU_COUNT(&s), 7);
  assert_int_equal(pw_cpulist_format(&s, buf, sizeof buf), 7);
  assert_string_equal(buf, "0-3,8,10-11");
  assert_int_equal(pw_cpulist_parse("", &s), 0);
  assert_int_equal(CPU_COUNT(&s), 0);
  const char *bad[] = {"3-1", "a", "1,", "1-", "-1", "1;2", "99999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (pw_cpulist_parse(bad[i], &s) == 0) fail_msg("\"%s\" parsed", bad[i]);
}

static void test_topology(void **state) {
  (void)state;
  make_tree(2, 1, -1);
  assert_int_equal(pw_numa_nodes(), 2);
  assert_int_equal(pw_numa_node_of_pci("0000:3B:00.0"), 1);
  assert_int_equal(pw_numa_node_of_pci("00000000:3b:00.0"), 1); /* nvidia-smi's 8-digit domain */
  assert_int_equal(pw_numa_node_of_pci("0000:3B:01.0"), -1);    /* sysfs says -1 */
  assert_int_equal(pw_numa_node_of_pci("0000:3B:02.0"), -1);    /* no such device */
  assert_int_equal(pw_numa_node_of_pci("0000:3B:00.0 "), -1);   /* not a bus id */
  assert_int_equal(pw_numa_node_of_pci("../../x"), -1);
  cpu_set_t s;
  assert_int_equal(pw_numa_cpus(1, &s), CPU_COUNT(&node1));
  assert_true(CPU_EQUAL(&s, &node1));
  assert_int_equal(pw_numa_cpus(7, &s), 0);
  pw_numa_root = "/nonexistent";
  assert_int_equal(pw_numa_nodes(), 1);
}

/* Threads of this process whose affinity is exactly set. */
static int threads_on(const cpu_set_t *set) {
  char want[4096], path[300], line[4200];
  pw_cpulist_format(set, want, sizeof want);
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int n = 0;
  for (struct dirent *t; (t = readdir(d));) {
    if (t->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", t->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "Cpus_allowed_list:", 18)) {
        char *v = line + 18;
        v += strspn(v, " \t");
        v[strcspn(v, "\n")] = 0;
        n += !strcmp(v, want);
      }
    fclose(f);
  }
  closedir(d);
  return n;
}

/* Stage one 4 MiB H2D copy per device given, checked byte for byte, with 4 staging threads. */
static int numa_on = 1; /* PINWHEEL_NUMA */
static void stage(int devices) {
  pw_stats_reset();
  const char *root = pw_numa_root;
  sim_reset(1, devices);
  pw_numa_root = root;
  pw_engine_config cfg = {.mode = PW_MODE_STAGE,
                          .min_bytes = 1,
                          .host_pool = 6 << 20,
                          .device_ring = 8 << 20,
                          .chunk = 1 << 20,
                          .threads = 4,
                          .numa = numa_on};
  pw_engine *e = pw_engine_create(&sim_ops, &cfg);
  size_t n = 4 << 20;
  unsigned char *src = malloc(n);
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 7 + 3);
  for (int rep = 0; rep < 3; rep++) /* the workers see the placement when they next wake */
    for (int dev = 0; dev < devices; dev++) {
      assert_int_equal(sim_ops.set_device(dev), 0); /* the copy's device is the thread's */
      unsigned char *dst = sim_device_alloc(dev, n);
      pw_transfer c = {
          .dst = dst, .src = src, .n = n, .dir = PW_DIR_H2D, .stream = sim_stream_new(dev)};
      pw_describe(&sim_ops, &c);
      assert_true(pw_engine_copy(e, &c) >= 0);
      sim_drain();
      assert_memory_equal(dst, src, n);
    }
  assert_int_equal(sim_ops.set_device(0), 0);
  pw_engine_destroy(e);
  free(src);
}

/* The summary (PW_FMT_*) into buf. */
static void summary(int format, char *buf, size_t len) {
  char path[160];
  snprintf(path, sizeof path, "%s/summary", tree);
  FILE *out = fopen(path, "w+");
  assert_non_null(out);
  pw_stats_write(fileno(out), format, pw_memcpy_name(PW_MEMCPY_PORTABLE));
  fflush(out);
  rewind(out);
  size_t got = fread(buf, 1, len - 1, out);
  buf[got] = 0;
  fclose(out);
}

static void test_one_node_unchanged(void **state) {
  (void)state;
  make_tree(1, 0, 0);
  stage(1);
  assert_int_equal(pw_get(&pw_st.numa_device_node[0]), 0);
  assert_int_equal(pw_get(&pw_st.numa_threads_node), 0);
  assert_int_equal(pw_get(&pw_st.numa_threads_placed), 0);
  assert_int_equal(pw_numa_placement(NULL), -1);
}

static void test_placed_on_device_node(void **state) {
  (void)state;
  make_tree(2, 1, 0);
  stage(1);
  assert_int_equal(pw_get(&pw_st.numa_device_node[0]), 2); /* 1 + node 1 */
  assert_int_equal(pw_get(&pw_st.numa_threads_node), 2);
  assert_int_equal(pw_get(&pw_st.numa_cpus), CPU_COUNT(&node1));
  assert_true(pw_get(&pw_st.numa_threads_placed) >= 1);
  cpu_set_t s;
  assert_int_equal(pw_numa_placement(&s), 1);
  assert_true(CPU_EQUAL(&s, &node1));
  if (!CPU_EQUAL(&node1, &mine)) assert_true(threads_on(&node1) >= 1); /* workers moved */
  cpu_set_t me;
  assert_int_equal(sched_getaffinity(0, sizeof me, &me), 0);
  assert_true(CPU_EQUAL(&me, &mine)); /* the program's thread never moves */
  static char buf[1 << 16];
  summary(PW_FMT_JSON, buf, sizeof buf);
  assert_non_null(strstr(buf, "\"numa\":{\"devices\":[{\"device\":0,\"node\":1,\"pool_node\":"));
  assert_non_null(strstr(buf, "\"threads_node\":1,"));
  pw_numa_reset();
}

/* The memory policy of the thread that set the device up (the thread of the device's first
 * copy, here the test's) is what it was: default stays default, and an explicit one (numactl
 * --membind) is never replaced, the pool then goes where the user's policy puts it. */
static void test_thread_policy_kept(void **state) {
  (void)state;
  int mode = -1;
  unsigned long mask[16] = {0};
  make_tree(2, 0, 1); /* device 0 on node 0, which this machine has: the preference is made */
  stage(1);
  assert_int_equal(pw_get(&pw_st.numa_pool_node[0]), 1); /* the pool on node 0 */
  assert_int_equal(syscall(SYS_get_mempolicy, &mode, mask, 1025, NULL, 0UL), 0);
  assert_int_equal(mode, 0); /* MPOL_DEFAULT */
  pw_numa_reset();
  unsigned long node0_mask[16] = {1}; /* MPOL_BIND to node 0, the machine's own first node */
  if (syscall(SYS_set_mempolicy, 2, node0_mask, 1025) != 0) {
    print_message("set_mempolicy refused here (%s): explicit policy not checked\n",
                  strerror(errno));
    return;
  }
  stage(1);
  assert_int_equal(syscall(SYS_get_mempolicy, &mode, mask, 1025, NULL, 0UL), 0);
  assert_int_equal(mode, 2); /* still MPOL_BIND */
  assert_int_equal(mask[0], 1);
  assert_int_equal(syscall(SYS_set_mempolicy, 0, NULL, 0UL), 0);
  pw_numa_reset();
}

/* PINWHEEL_NUMA=0: a device on node 1 of two, and nothing is placed or preferred. */
static void test_numa_off(void **state) {
  (void)state;
  make_tree(2, 1, -1);
  numa_on = 0;
  stage(1);
  numa_on = 1;
  assert_int_equal(pw_get(&pw_st.numa_device_node[0]), 0);
  assert_int_equal(pw_get(&pw_st.numa_threads_node), 0);
  assert_int_equal(pw_numa_placement(NULL), -1);
  if (!CPU_EQUAL(&node1, &mine)) assert_int_equal(threads_on(&node1), 0);
  pw_numa_reset();
}

static void test_two_nodes_undone(void **state) {
  (void)state;
  make_tree(2, 1, 0);
  stage(2);
  assert_int_equal(pw_get(&pw_st.numa_device_node[0]), 2);
  assert_int_equal(pw_get(&pw_st.numa_device_node[1]), 1);
  assert_int_equal(pw_get(&pw_st.numa_threads_node), 0);
  assert_int_equal(pw_get(&pw_st.numa_mixed), 1);
  assert_int_equal(pw_numa_placement(NULL), -2);
  /* the workers went back to the affinity they had (they move when they next wake) */
  if (!CPU_EQUAL(&node1, &mine)) {
    assert_int_equal(threads_on(&node1), 0);
    assert_true(threads_on(&mine) >= 2); /* this thread and at least one worker */
  }
  pw_numa_reset();
}

/* The thread that starts the pool while placed (in pinwheel: the deferred copies' copy thread,
 * when the process's first staged copy was deferred). */
static void *start_pool_placed(void *arg) {
  (void)arg;
  pw_numa_thread me = {0};
  pw_numa_apply(&me);
  pw_pool_memcpy((char[8192]){0}, (char[8192]){0}, 8192, 4, 0); /* too small: no pool */
  size_t n = 4 << 20;
  char *a = calloc(1, n), *b = malloc(n);
  pw_pool_memcpy(b, a, n, 4, 0); /* starts 3 workers */
  free(a);
  free(b);
  return NULL;
}

/* Workers started by a thread already placed start with the affinity the process's threads had
 * before the placement, not the node's: when a device on another node undoes the placement, they
 * go back to all of it.  In a child, whose pool starts anew. */
static void test_workers_started_placed_go_back(void **state) {
  (void)state;
  if (CPU_EQUAL(&node1, &mine)) skip(); /* one CPU: the node is everything */
  make_tree(2, 1, 0);
  pid_t pid = fork();
  if (pid == 0) {
    pw_pool_after_fork_child();
    pw_numa_after_fork_child();
    pw_numa_place(1);
    pthread_t t;
    pthread_create(&t, NULL, start_pool_placed, NULL);
    pthread_join(t, NULL);
    int workers = pw_pool_workers(), placed = 0;
    struct timespec wait = {0, 10000000};
    for (int i = 0; i < 300 && (placed = threads_on(&node1)) < workers; i++) /* a loaded machine */
      nanosleep(&wait, NULL);
    pw_numa_place(0);                                     /* devices on two nodes: undone */
    for (int i = 0; i < 300 && threads_on(&node1); i++) { /* the workers move when they wake */
      size_t n = 4 << 20;
      char *a = calloc(1, n), *b = malloc(n);
      pw_pool_memcpy(b, a, n, 4, 0);
      free(a);
      free(b);
      nanosleep(&wait, NULL);
    }
    int left = threads_on(&node1), back = threads_on(&mine);
    fprintf(stderr, "workers %d, on node 1 while placed %d, after the undo %d; on all CPUs %d\n",
            workers, placed, left, back);
    _exit(workers >= 1 && placed >= workers && left == 0 && back >= workers + 1 ? 0 : 1);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* One batch of threads (8 here, more than the fake node has) pushing 4 MiB, checked byte for
 * byte: the helpers its lane got (0: no lane, it copied alone). */
static int batch_helpers(int threads) {
  size_t n = 4 << 20;
  unsigned char *src = malloc(n), *dst = malloc(n);
  assert_non_null(src);
  assert_non_null(dst);
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 13 + 1);
  pw_batch b;
  pw_batch_begin(&b, threads, 0);
  pw_batch_push(&b, dst, src, n, 0);
  int helpers = b.helpers;
  pw_batch_end(&b);
  assert_memory_equal(dst, src, n);
  free(src);
  free(dst);
  return helpers;
}

/* While the staging threads are placed on a node, a batch whose thread count is the default uses
 * at most the node's usable CPUs divided among the local ranks sharing it (ceil(LOCAL_WORLD_SIZE /
 * nodes)), the caller included; an explicit count stays; undone or reset, the cap goes. */
static void test_default_threads_capped_to_node(void **state) {
  (void)state;
  cpu_set_t two; /* node 1: two of this process's CPUs (one where it has only one) */
  CPU_ZERO(&two);
  for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&two) < 2; c++)
    if (CPU_ISSET(c, &mine)) CPU_SET(c, &two);
  cpu_set_t keep = node1;
  node1 = two;
  make_tree(2, 1, 0);
  node1 = keep;
  unsetenv("LOCAL_WORLD_SIZE");
  pw_stats_reset();
  atomic_store(&pw_st.threads, 8);
  atomic_store(&pw_st.hook_calls[0], 1); /* the text summary is printed for a CUDA program */
  pw_numa_reset();
  pw_pool_threads_auto(1);
  int expect = batch_helpers(8); /* no placement: the batch's 8 threads, as many as the pool has */
  assert_true(expect > 1);
  assert_int_equal(expect, 7 < pw_pool_workers() ? 7 : pw_pool_workers());
  assert_int_equal(pw_numa_share(), 0);

  pw_numa_place(1);
  assert_int_equal(pw_numa_placement(NULL), 1);
  assert_int_equal(pw_numa_share(), CPU_COUNT(&two));
  assert_int_equal(batch_helpers(8), CPU_COUNT(&two) - 1); /* 2 threads: the caller and one */
  assert_int_equal(pw_get(&pw_st.numa_copy_threads), CPU_COUNT(&two));
  static char buf[1 << 16];
  char want[160];
  summary(PW_FMT_TEXT, buf, sizeof buf);
  snprintf(want, sizeof want, "threads moved there): a batch uses %d copy threads of 8\n",
           CPU_COUNT(&two)); /* the workers move when they next wake: how many is not known */
  if (!strstr(buf, want)) fail_msg("no \"%s\" in\n%s", want, buf);
  summary(PW_FMT_JSON, buf, sizeof buf);
  snprintf(want, sizeof want, "\"copy_threads\":%d,\"mixed\":false}", CPU_COUNT(&two));
  if (!strstr(buf, want)) fail_msg("no %s in\n%s", want, buf);

  pw_pool_threads_auto(0); /* PINWHEEL_THREADS=8: the user's choice */
  assert_int_equal(batch_helpers(8), expect);
  pw_pool_threads_auto(1);

  pw_numa_reset(); /* reset: no cap */
  assert_int_equal(pw_numa_share(), 0);
  assert_int_equal(batch_helpers(8), expect);

  /* 4 local ranks on 2 nodes: 2 share node 1, one CPU each, the caller alone */
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  pw_numa_place(1);
  unsetenv("LOCAL_WORLD_SIZE");
  assert_int_equal(pw_numa_share(), 1);
  assert_int_equal(batch_helpers(8), 0);

  pw_numa_place(0); /* a device on node 0 too: undone, no cap */
  assert_int_equal(pw_numa_placement(NULL), -2);
  assert_int_equal(pw_numa_share(), 0);
  assert_int_equal(batch_helpers(8), expect);
  pw_numa_reset();
  pw_pool_threads_auto(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpulist),
      cmocka_unit_test(test_topology),
      cmocka_unit_test(test_one_node_unchanged),
      cmocka_unit_test(test_placed_on_device_node),
      cmocka_unit_test(test_thread_policy_kept),
      cmocka_unit_test(test_numa_off),
      cmocka_unit_test(test_two_nodes_undone),
      cmocka_unit_test(test_workers_started_placed_go_back),
      cmocka_unit_test(test_default_threads_capped_to_node),
  };
  int rc = cmocka_run_group_tests(tests, setup_cpus, NULL);
  if (tree[0]) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/pwtest-numa-%d-*", (int)getpid());
    if (system(cmd)) rc = rc ? rc : 1;
  }
  return rc;
}
