/* cudnn.c — cuDNN's per-handle error storage: pinned memory that keeps no sync.
 *
 * Owns: the wrappers of cudnnCreate (the small pinned regions recorded on its thread while it
 * runs are cuDNN's, app_memcpy.c) and cudnnQueryRuntimeError (every elided sync in flight is
 * waited for first, and none is elided inside it), the latter also for each query dlsym on a
 * handle finds (cuDNN 9's dispatcher reaches its graph library's so).
 * Must never: change either call's arguments or status, print unless asked (errors aside), or
 * make a CUDA call other than sync elision's waits.
 * Why: cudnnCreate allocates a few bytes of pinned host memory for each handle (cuDNN 9: 4 bytes
 * with cuMemHostAlloc), the handle's remote error storage, which cuDNN's kernels write and the
 * program reads only through cudnnQueryRuntimeError; it never learns its address.  Counted as the
 * program's pinned memory, it kept every sync of every program that uses cuDNN (reason mapped).
 * In a trace, the calls cudnnCreate makes are marked (args.pinwheel_cudnn), for the what-if.
 */
#define _GNU_SOURCE
#include "front.h"
#include "drv.h"
#include "real.h"
#include "trace.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef int cudnn_status; /* cudnnStatus_t: an enum, passed as an int */
/* Returned only when no cuDNN defines the function the program called (then it could not have
 * been called without the shim either): cuDNN 9's CUDNN_STATUS_NOT_INITIALIZED (cuDNN 8's is 1;
 * either way not success). */
enum { CUDNN_NOT_INITIALIZED = 1001 };
typedef cudnn_status (*create_fn)(void **handle); /* cudnnCreate(cudnnHandle_t *) */
typedef cudnn_status (*query_fn)(void *handle, cudnn_status *rstatus, int mode, void *tag);

static PW_TLS int creating;
int pw_cudnn_creating(void) {
  return creating > 0;
}

/* The definition the caller would have reached without the shim: in the scope of the object that
 * called, the file caller_file (its own dependencies: a library loaded with RTLD_LOCAL that links
 * cuDNN); else after this library in the global scope; else cuDNN by name.  NULL when none. */
static void *lookup(const char *name, void *self, const char *caller_file) {
  pw_dlsym_fn real_dlsym = pw_dlsym_resolve(); /* glibc's: never the shim's own wrapper */
  if (!real_dlsym) return NULL;
  void *p = NULL;
  void *h = caller_file ? dlopen(caller_file, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  if (h) {
    p = real_dlsym(h, name);
    dlclose(h);
  }
  if (!p || p == self) p = real_dlsym(RTLD_NEXT, name);
  static const char *const libs[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
  for (unsigned i = 0; (!p || p == self) && i < sizeof libs / sizeof *libs; i++) {
    h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    p = h ? real_dlsym(h, name) : NULL;
    if (h) dlclose(h);
  }
  return p == self ? NULL : p;
}

/* The real function for each calling object, by its load address (a process may hold two cuDNNs,
 * each linked by its own module); past the table's size, looked up at each call. */
#define CALLERS 16
typedef struct real_fn {
  const void *base; /* dladdr's dli_fbase; NULL: a free entry */
  void *fn;
} real_fn;
static real_fn reals[2][CALLERS];
static pthread_mutex_t reals_mu = PTHREAD_MUTEX_INITIALIZER;

/* This library's load address, asked once. */
static const void *own_base(void) {
  static _Atomic(const void *) base;
  const void *b = atomic_load_explicit(&base, memory_order_acquire);
  Dl_info di;
  if (!b && dladdr((void *)pw_cudnn_creating, &di)) {
    b = di.dli_fbase;
    atomic_store_explicit(&base, b, memory_order_release);
  }
  return b;
}

static void *real_for(int which, const char *name, void *self, const void *caller) {
  Dl_info at; /* the calling object, asked once */
  int known = caller && dladdr(caller, &at);
  const void *base = known ? at.dli_fbase : NULL;
  if (base && base == own_base())
    base = NULL; /* reached by a tail call from the shim's own call: the caller is unknown */
  void *f = NULL;
  int i = 0;
  pthread_mutex_lock(&reals_mu);
  for (; base && i < CALLERS && reals[which][i].base; i++)
    if (reals[which][i].base == base) {
      f = reals[which][i].fn;
      break;
    }
  pthread_mutex_unlock(&reals_mu);
  /* still the function it was (its library not closed since, another loaded there) */
  Dl_info fi;
  if (f && dladdr(f, &fi) && fi.dli_saddr == f && fi.dli_sname && !strcmp(fi.dli_sname, name))
    return f;
  f = lookup(name, self, known ? at.dli_fname : NULL);
  if (!f) {
    pw_log(PW_LOG_ERROR, "%s was called but no cuDNN defines it", name);
    return NULL;
  }
  pthread_mutex_lock(&reals_mu);
  for (i = 0; base && i < CALLERS; i++)
    if (!reals[which][i].base || reals[which][i].base == base) {
      reals[which][i] = (real_fn){base, f};
      break;
    }
  pthread_mutex_unlock(&reals_mu);
  return f;
}

PW_EXPORT cudnn_status cudnnCreate(void **handle) {
  (void)pw_enter(); /* the library started, so a trace that is asked for records what follows */
  create_fn f =
      (create_fn)real_for(0, "cudnnCreate", (void *)cudnnCreate, __builtin_return_address(0));
  if (!f) return CUDNN_NOT_INITIALIZED;
  creating++;
  int marked = pw_trace_cudnn_begin(); /* in a trace, its calls say they are cuDNN's */
  cudnn_status r = f(handle);
  pw_trace_cudnn_end(marked);
  creating--;
  return r;
}

static atomic_int unwrapped; /* a query pinwheel could not wrap was handed out */

/* Before the real query: every elided sync waited for; none elided inside it (BLOCKING syncs the
 * handle's stream before it reads the storage: not one right after this thread's staged copy). */
static void before_query(void) {
  /* nothing elided in flight: one load (pw_elide_live), as for every other question */
  if (!pw_depth) pw_elide_settle_all(pw_real.cudaEventSynchronize ? &pw_real_ops : &pw_drv_ops);
  pw_elide_stream = NULL;
}

PW_EXPORT cudnn_status cudnnQueryRuntimeError(void *handle, cudnn_status *rstatus, int mode,
                                              void *tag) {
  query_fn f = (query_fn)real_for(1, "cudnnQueryRuntimeError", (void *)cudnnQueryRuntimeError,
                                  __builtin_return_address(0));
  if (!f) return CUDNN_NOT_INITIALIZED;
  before_query();
  return f(handle, rstatus, mode, tag);
}

/* The queries dlsym on a handle found (cuDNN 9's dispatcher finds its graph library's so, stubs
 * the dispatcher's), each behind a wrapper of its own that calls it directly: no lookup, so none
 * can lead back to a wrapper.  More than there are wrappers: the later ones are handed out as they
 * are, and cuDNN's storage is the program's again from then on. */
#define QUERIES 4
static _Atomic(query_fn) queries[QUERIES];
#define QUERY_WRAPPER(i)                                                                           \
  static cudnn_status query_##i(void *h, cudnn_status *rstatus, int mode, void *tag) {             \
    before_query();                                                                                \
    return atomic_load_explicit(&queries[i], memory_order_acquire)(h, rstatus, mode, tag);         \
  }
QUERY_WRAPPER(0)
QUERY_WRAPPER(1)
QUERY_WRAPPER(2)
QUERY_WRAPPER(3)
static const query_fn query_wrappers[QUERIES] = {query_0, query_1, query_2, query_3};
static pthread_mutex_t queries_mu = PTHREAD_MUTEX_INITIALIZER;

void *pw_cudnn_dlsym(const char *name, void *p) {
  if (!p || strcmp(name, "cudnnQueryRuntimeError") || p == (void *)cudnnQueryRuntimeError) return p;
  query_fn q = (query_fn)p;
  for (int i = 0; i < QUERIES; i++)
    if ((void *)query_wrappers[i] == p) return p;
  pthread_mutex_lock(&queries_mu);
  int i = 0;
  for (; i < QUERIES; i++) {
    query_fn have = atomic_load_explicit(&queries[i], memory_order_relaxed);
    if (have == q) break;
    if (!have) {
      atomic_store_explicit(&queries[i], q, memory_order_release);
      break;
    }
  }
  pthread_mutex_unlock(&queries_mu);
  if (i < QUERIES) return (void *)query_wrappers[i];
  /* a query the program may call past the shim: cuDNN's storage is its own again, and what was
   * elided before is waited for now, as a query would */
  if (!atomic_exchange_explicit(&unwrapped, 1, memory_order_acq_rel)) before_query();
  return p;
}

int pw_cudnn_query_unwrapped(void) {
  return atomic_load_explicit(&unwrapped, memory_order_acquire);
}
