/* trace.c — pinwheel's CUPTI collector: PINWHEEL_TRACE=PATH (pinwheel run --trace PATH).
 *
 * Owns: loading CUPTI with dlopen (only when tracing is asked for), the activity kinds, the
 * buffers (handed to a writer thread, off the application's threads), the exit flush and fork.
 * Must never: stop the program or change its exit status (CUPTI missing or unusable: one warning,
 * the program runs untraced), print unless something is wrong, or write into a file a forked
 * child shares with its parent.
 *
 * Order at exit: the flush is registered with atexit right after the first real CUDA call
 * returned, so it runs before the CUDA runtime's own exit handler (registered during that call)
 * tears the contexts down; it flushes every buffer, waits for the writer and closes the JSON.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"

#ifndef PW_CUPTI_DIR
#define PW_CUPTI_DIR ""
#endif

#define BUF_SIZE (8u << 20)
#define OWN_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1

/* The CUPTI functions used, resolved with dlsym. */
static struct {
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*flush_all)(uint32_t);
  CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
  CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
  CUptiResult (*result_string)(CUptiResult, const char **);
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
  CUptiResult (*push_ext)(CUpti_ExternalCorrelationKind, uint64_t);
  CUptiResult (*pop_ext)(CUpti_ExternalCorrelationKind, uint64_t *);
  CUptiResult (*stream_id)(CUcontext, CUstream, uint8_t, uint32_t *);
} cu;

typedef struct qbuf {
  uint8_t *buf;
  size_t valid;
  struct qbuf *next;
} qbuf;

static atomic_int active;         /* collecting */
_Atomic int pw_trace_want_atexit; /* the exit flush is still to be registered */
static int fd = -1;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static qbuf *qhead, *qtail;
static int writer_busy, writer_stop;
static pthread_t writer;
static pw_tw *tw;
static char path[4096];
/* correlation ids of the calls pinwheel made itself (an open-addressing set) */
static uint32_t *own;
static size_t own_cap, own_n;
static __thread int own_depth;

static int is_own(pw_tw *w, uint32_t corr) {
  (void)w;
  if (!own_n || !corr) return 0;
  size_t i = (corr * 2654435761u) & (own_cap - 1);
  while (own[i]) {
    if (own[i] == corr) return 1;
    i = (i + 1) & (own_cap - 1);
  }
  return 0;
}

static void add_own(uint32_t corr) {
  if (!corr) return;
  if ((own_n + 1) * 2 > own_cap) {
    size_t nc = own_cap ? own_cap * 2 : 4096;
    uint32_t *q = calloc(nc, sizeof *q);
    if (!q) return;
    for (size_t i = 0; i < own_cap; i++)
      if (own[i]) {
        size_t j = (own[i] * 2654435761u) & (nc - 1);
        while (q[j])
          j = (j + 1) & (nc - 1);
        q[j] = own[i];
      }
    free(own);
    own = q;
    own_cap = nc;
  }
  size_t i = (corr * 2654435761u) & (own_cap - 1);
  while (own[i]) {
    if (own[i] == corr) return;
    i = (i + 1) & (own_cap - 1);
  }
  own[i] = corr;
  own_n++;
}

static const char *api_name(pw_tw *w, int driver, uint32_t cbid) {
  (void)w;
  const char *nm = NULL;
  if (!cu.callback_name ||
      cu.callback_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                       &nm) != CUPTI_SUCCESS)
    return NULL;
  /* "cudaMemcpyAsync_v3020" -> "cudaMemcpyAsync", as Kineto names it */
  static __thread char b[128];
  snprintf(b, sizeof b, "%s", nm ? nm : "");
  char *v = strstr(b, "_v");
  if (v && v[2] >= '0' && v[2] <= '9') *v = 0;
  return b;
}

static void write_all(const char *p, size_t n) {
  while (n && fd >= 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      pw_log(PW_LOG_ERROR, "writing the trace %s failed: %m; tracing stops", path);
      close(fd);
      fd = -1;
      return;
    }
    p += k;
    n -= (size_t)k;
  }
}

static void flush_file(pw_tw *w) {
  write_all(w->buf, w->len);
  w->len = 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUF_SIZE);
  *size = *buffer ? BUF_SIZE : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)ctx, (void)stream, (void)size;
  qbuf *q = malloc(sizeof *q);
  if (!q) {
    free(buffer);
    return;
  }
  *q = (qbuf){buffer, valid, NULL};
  pthread_mutex_lock(&qlock);
  if (qtail)
    qtail->next = q;
  else
    qhead = q;
  qtail = q;
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
}

/* Convert one buffer: the external-correlation records first mark pinwheel's own calls. */
static void convert(qbuf *q) {
  CUpti_Activity *rec = NULL;
  while (cu.next_record(q->buf, q->valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const CUpti_ActivityExternalCorrelation *x = (const void *)rec;
      if (x->externalKind == OWN_KIND) add_own(x->correlationId);
      continue;
    }
    pw_tw_record(tw, rec);
  }
  free(q->buf);
  free(q);
}

static void *writer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&qlock);
  for (;;) {
    while (!qhead && !writer_stop)
      pthread_cond_wait(&qcond, &qlock);
    if (!qhead && writer_stop) break;
    qbuf *q = qhead;
    qhead = q->next;
    if (!qhead) qtail = NULL;
    writer_busy = 1;
    pthread_mutex_unlock(&qlock);
    convert(q);
    pthread_mutex_lock(&qlock);
    writer_busy = 0;
    pthread_cond_broadcast(&qcond);
  }
  pthread_mutex_unlock(&qlock);
  return NULL;
}

int pw_trace_path(const char *tmpl, char *out, size_t n) {
  const char *rank = getenv("RANK");
  if (!rank || !*rank) rank = getenv("LOCAL_RANK");
  if (!rank || !*rank) rank = "0";
  size_t o = 0;
  for (const char *p = tmpl; *p; p++) {
    char tmp[32];
    const char *ins = NULL;
    if (p[0] == '%' && p[1] == 'p') {
      snprintf(tmp, sizeof tmp, "%d", (int)getpid());
      ins = tmp;
    } else if (p[0] == '%' && p[1] == 'r') {
      ins = rank;
    } else if (p[0] == '%' && p[1] == '%') {
      ins = "%";
    }
    if (ins) {
      size_t l = strlen(ins);
      if (o + l >= n) return -1;
      memcpy(out + o, ins, l);
      o += l;
      p++;
    } else {
      if (o + 1 >= n) return -1;
      out[o++] = *p;
    }
  }
  out[o] = 0;
  return o ? 0 : -1;
}

/* libcupti: one already in the process, PINWHEEL_CUPTI, the usual search, the toolkit's. */
static void *open_cupti(char *why, size_t n) {
  static const char *const names[] = {"libcupti.so.13", "libcupti.so"};
  for (size_t i = 0; i < 2; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (h) return h;
  }
  const char *env = pw_option_str(PW_OPT_CUPTI);
  if (env && *env) {
    void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(why, n, "PINWHEEL_CUPTI=%s: %s", env, dlerror());
    return NULL;
  }
  for (size_t i = 0; i < 2; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  if (PW_CUPTI_DIR[0]) {
    char p[1024];
    snprintf(p, sizeof p, "%s/libcupti.so.13", PW_CUPTI_DIR);
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  snprintf(why, n, "libcupti.so.13 not found (set PINWHEEL_CUPTI to its path)");
  return NULL;
}

static void finish(void) {
  if (!atomic_exchange(&active, 0)) return;
  if (cu.flush_all) cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&qlock);
  writer_stop = 1;
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
  pthread_join(writer, NULL);
  size_t dropped = 0;
  if (cu.dropped && cu.dropped(NULL, 0, &dropped) == CUPTI_SUCCESS) tw->dropped = dropped;
  pw_tw_end(tw);
  if (fd >= 0) close(fd);
  fd = -1;
  if (tw->dropped)
    pw_log(PW_LOG_WARN, "trace %s: CUPTI dropped %llu records", path,
           (unsigned long long)tw->dropped);
}

static void child_after_fork(void) {
  /* the child must not write into its parent's file: it is untraced (a CUDA program may not use
   * CUDA across fork anyway); the writer thread does not exist here */
  if (!atomic_exchange(&active, 0)) return;
  if (fd >= 0) close(fd);
  fd = -1;
  pthread_mutex_init(&qlock, NULL);
  pthread_cond_init(&qcond, NULL);
}

static void prepare_fork(void) {
  pthread_mutex_lock(&qlock); /* no child inherits a queue in the middle of a change */
}
static void parent_after_fork(void) {
  pthread_mutex_unlock(&qlock);
}
static void child_unlock(void) {
  pthread_mutex_unlock(&qlock);
  child_after_fork();
}

static int other_profiler(void) {
  /* Nsight Systems and other tools inject CUPTI through the driver's injection variable */
  const char *inj = getenv("CUDA_INJECTION64_PATH");
  return inj && *inj;
}

void pw_trace_start(void) {
  const char *tmpl = pw_option_str(PW_OPT_TRACE);
  if (!tmpl || !*tmpl) return;
  if (other_profiler()) {
    pw_log(PW_LOG_WARN, "another CUDA profiler is attached (CUDA_INJECTION64_PATH): pinwheel "
                        "does not trace, that profiler keeps working");
    return;
  }
  if (pw_trace_path(tmpl, path, sizeof path)) {
    pw_log(PW_LOG_WARN, "PINWHEEL_TRACE=%s: not a usable path; not tracing", tmpl);
    return;
  }
  char why[512] = "";
  void *h = open_cupti(why, sizeof why);
  if (!h) {
    pw_log(PW_LOG_WARN, "cannot trace: %s; the program runs untraced", why);
    return;
  }
#define SYM(f, n) *(void **)&cu.f = dlsym(h, n)
  SYM(enable, "cuptiActivityEnable");
  SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
  SYM(flush_all, "cuptiActivityFlushAll");
  SYM(next_record, "cuptiActivityGetNextRecord");
  SYM(dropped, "cuptiActivityGetNumDroppedRecords");
  SYM(result_string, "cuptiGetResultString");
  SYM(callback_name, "cuptiGetCallbackName");
  SYM(push_ext, "cuptiActivityPushExternalCorrelationId");
  SYM(pop_ext, "cuptiActivityPopExternalCorrelationId");
  SYM(stream_id, "cuptiGetStreamIdEx");
#undef SYM
  if (!cu.enable || !cu.register_callbacks || !cu.flush_all || !cu.next_record) {
    pw_log(PW_LOG_WARN, "cannot trace: the CUPTI found lacks its activity API; untraced");
    return;
  }
  tw = calloc(1, sizeof *tw);
  if (!tw) return;
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    pw_log(PW_LOG_WARN, "cannot write the trace %s: %m; the program runs untraced", path);
    free(tw);
    tw = NULL;
    return;
  }
  tw->flush = flush_file;
  tw->pid = (uint32_t)getpid();
  tw->api_name = api_name;
  tw->is_pinwheel_corr = is_own;
  CUptiResult r = cu.register_callbacks(buffer_requested, buffer_completed);
  static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                             CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMCPY2,
                                             CUPTI_ACTIVITY_KIND_MEMSET,
                                             CUPTI_ACTIVITY_KIND_RUNTIME,
                                             CUPTI_ACTIVITY_KIND_DRIVER,
                                             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                             CUPTI_ACTIVITY_KIND_MARKER,
                                             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof kinds[0]; i++) {
    CUptiResult e = cu.enable(kinds[i]);
    if (e != CUPTI_SUCCESS && kinds[i] != CUPTI_ACTIVITY_KIND_MARKER &&
        kinds[i] != CUPTI_ACTIVITY_KIND_DRIVER)
      r = e;
  }
  if (r != CUPTI_SUCCESS) {
    const char *m = "?";
    if (cu.result_string) cu.result_string(r, &m);
    pw_log(PW_LOG_WARN, "cannot trace: CUPTI says %s; the program runs untraced", m);
    close(fd);
    fd = -1;
    unlink(path);
    return;
  }
  pw_tw_begin(tw);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&writer, NULL, writer_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    pw_log(PW_LOG_WARN, "cannot start the trace writer; untraced");
    close(fd);
    fd = -1;
    return;
  }
  pthread_atfork(prepare_fork, parent_after_fork, child_unlock);
  atomic_store(&active, 1);
  atomic_store(&pw_trace_want_atexit, 1);
  pw_log(PW_LOG_INFO, "tracing to %s", path);
}

void pw_trace_after_call(void) {
  if (atomic_load_explicit(&pw_trace_want_atexit, memory_order_relaxed) &&
      atomic_exchange(&pw_trace_want_atexit, 0))
    atexit(finish);
}

int pw_trace_active(void) {
  return atomic_load_explicit(&active, memory_order_relaxed);
}

void pw_trace_side_stream(int dev, void *stream) {
  uint32_t id;
  if (!pw_trace_active() || !cu.stream_id) return;
  /* the stream's context: the calling thread's current one (it just created the stream) */
  CUcontext ctx = NULL;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CUresult (*get_ctx)(CUcontext *) = NULL;
  if (lib) *(void **)&get_ctx = dlsym(lib, "cuCtxGetCurrent");
  if (get_ctx) get_ctx(&ctx);
  if (lib) dlclose(lib);
  if (cu.stream_id(ctx, (CUstream)stream, 0, &id) != CUPTI_SUCCESS) return;
  pthread_mutex_lock(&qlock);
  if (tw->nside < 16) tw->side[tw->nside++] = (pw_tw_lane){(uint32_t)dev, id};
  pthread_mutex_unlock(&qlock);
}

void pw_trace_own_begin(void) {
  if (pw_trace_active() && cu.push_ext && !own_depth++) cu.push_ext(OWN_KIND, 1);
}

void pw_trace_own_end(void) {
  uint64_t id;
  if (own_depth && !--own_depth && cu.pop_ext) cu.pop_ext(OWN_KIND, &id);
}
