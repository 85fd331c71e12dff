/* fake_common.h — what the fake CUDA libraries of the tests (fake_cudart.c, fake_cuda.c) share:
 * calls counted by name, the injected failure of the next call, and the table of allocations
 * that classifies pointers.  Each fake has its own copy (static): one lock, `fake_mu`, guards all
 * of it. */
#ifndef FAKE_COMMON_H
#define FAKE_COMMON_H
#include <pthread.h>
#include <stdint.h>
#include <string.h>

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
/* A fork while another thread holds fake_mu (a copy recorded, an allocation added) left the child
 * a lock no one would release: a forked child of driver_prog's stress test hung in cuMemAlloc.
 * fake_mu is held across the fork, as a real library's locks are. */
static void fake_mu_lock(void) {
  pthread_mutex_lock(&fake_mu);
}
static void fake_mu_unlock(void) {
  pthread_mutex_unlock(&fake_mu);
}
__attribute__((constructor)) static void fake_mu_atfork(void) {
  pthread_atfork(fake_mu_lock, fake_mu_unlock, fake_mu_unlock);
}

static struct {
  char name[64];
  long n;
} fake_counts[96];
static int fake_fail_code; /* the status the next recorded call returns, once; 0: success */

/* Count a call by name; returns the injected status (and forgets it).  Hold fake_mu. */
static int fake_count_call(const char *name) {
  int i = 0;
  while (i < 96 && fake_counts[i].name[0] && strcmp(fake_counts[i].name, name))
    i++;
  if (i < 96) {
    strcpy(fake_counts[i].name, name);
    fake_counts[i].n++;
  }
  int e = fake_fail_code;
  fake_fail_code = 0;
  return e;
}

static long fake_count_of(const char *name) {
  long n = 0;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < 96 && fake_counts[i].name[0]; i++)
    if (!strcmp(fake_counts[i].name, name)) n = fake_counts[i].n;
  pthread_mutex_unlock(&fake_mu);
  return n;
}

static void fake_set_fail(int code) {
  pthread_mutex_lock(&fake_mu);
  fake_fail_code = code;
  pthread_mutex_unlock(&fake_mu);
}

/* Allocations: [p, p+n) of a memory type (non-zero). */
static struct {
  uintptr_t p;
  size_t n;
  int type;
} fake_regions[4096];
static int fake_nregions;

static void fake_region_add(const void *p, size_t n, int type) {
  pthread_mutex_lock(&fake_mu);
  if (fake_nregions < 4096) {
    fake_regions[fake_nregions].p = (uintptr_t)p;
    fake_regions[fake_nregions].n = n;
    fake_regions[fake_nregions++].type = type;
  }
  pthread_mutex_unlock(&fake_mu);
}

static void fake_region_drop(const void *p) {
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < fake_nregions; i++)
    if (fake_regions[i].p == (uintptr_t)p) {
      fake_regions[i] = fake_regions[--fake_nregions];
      break;
    }
  pthread_mutex_unlock(&fake_mu);
}

/* The allocation holding p: 1 and its base and size, or 0. */
static inline int fake_region_range(const void *p, uintptr_t *base, size_t *size) {
  uintptr_t a = (uintptr_t)p;
  int found = 0;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < fake_nregions && !found; i++)
    if (a >= fake_regions[i].p && a < fake_regions[i].p + fake_regions[i].n) {
      *base = fake_regions[i].p;
      *size = fake_regions[i].n;
      found = 1;
    }
  pthread_mutex_unlock(&fake_mu);
  return found;
}

/* The type of the allocation holding p; 0 for none. */
static int fake_region_type(const void *p) {
  uintptr_t a = (uintptr_t)p;
  int t = 0;
  pthread_mutex_lock(&fake_mu);
  for (int i = 0; i < fake_nregions && !t; i++)
    if (a >= fake_regions[i].p && a < fake_regions[i].p + fake_regions[i].n)
      t = fake_regions[i].type;
  pthread_mutex_unlock(&fake_mu);
  return t;
}
#endif
