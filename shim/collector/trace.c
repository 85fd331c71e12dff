/* trace.c — pinwheel's CUPTI collector: PINWHEEL_TRACE=PATH (pinwheel run --trace PATH).
 *
 * Owns: loading CUPTI with dlopen (only when tracing is asked for), the activity kinds, the
 * buffers (handed to a writer thread at SCHED_IDLE, off the application's threads), the capture
 * window's filtering of records (window.c decides), the exit flush and fork, and kernel names
 * demangled (pw_demangle.h) when the program has libstdc++ loaded (never loaded for that).
 * Must never: stop the program or change its exit status (CUPTI missing or unusable: one warning,
 * the program runs untraced), print unless something is wrong, write into a file a forked
 * child shares with its parent, or truncate a trace another process is writing (files.c: an
 * exec'd child given its parent's name writes NAME-pidN.json instead, and says so), or write
 * through a symlink.
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
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pw_demangle.h"

#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "pw_driver_calls.h"
#include "pw.h"

#ifndef PW_CUPTI_DIR
#define PW_CUPTI_DIR ""
#endif

#define BUF_SIZE (8u << 20)
#define OWN_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1
#define CUDNN_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 /* calls made inside cudnnCreate */

/* The CUPTI functions used, resolved with dlsym. */
static struct {
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind); /* optional: kinds left enabled at the handoff */
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
  CUptiResult (*timestamp)(uint64_t *);
  CUptiResult (*runtime_api)(CUpti_CallbackId, uint8_t); /* optional: per-call record switches */
  CUptiResult (*driver_api)(CUpti_CallbackId, uint8_t);
  /* the driver's, found at trace start when libcuda is loaded by then (else NULL: see
   * pw_trace_side_stream) */
  CUresult (*ctx_current)(CUcontext *);
} cu;

typedef struct qbuf {
  uint8_t *buf; /* a CUPTI buffer; NULL: a program's call pinwheel handled (the fields below) */
  size_t valid;
  struct qbuf *next;
  const char *name;
  uint64_t start, end, corr;
  uint32_t tid;
} qbuf;

static atomic_int active; /* collecting */
#ifdef PW_TRACE_DIAG
static atomic_int diag_detached; /* pw_diag_cupti detached CUPTI (a measuring aid, below) */
__attribute__((visibility("default"))) int pw_diag_cupti(int mask, int on);
#endif
_Atomic int pw_trace_want_atexit; /* the exit flush is still to be registered */
static int fd = -1;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static qbuf *qhead, *qtail;
static int writer_stop, queued; /* queued: CUPTI buffers waiting */
static atomic_int queued_hint;  /* CUPTI buffers waiting, read without the lock */
static pthread_t writer;
static pw_trace_writer *tw;
static char path[4096];
/* Correlation ids, in open-addressing maps used by the writer thread only: the calls pinwheel
 * made itself (value: the program's call they were for, or 1), and the API calls seen so far. */
typedef struct cmap {
  uint32_t *key;
  uint64_t *val;
  size_t cap, n;
} cmap;
static cmap own, seen, cudnn_made; /* cudnn_made: calls made inside cudnnCreate */
static __thread int own_depth;
static __thread uint64_t own_app, own_t0;
static _Atomic uint64_t next_app = 1ull << 40; /* above every CUPTI correlation id (32 bits) */

static uint64_t cmap_get(const cmap *m, uint32_t k) {
  if (!m->n || !k) return 0;
  size_t i = (k * 2654435761u) & (m->cap - 1);
  while (m->key[i]) {
    if (m->key[i] == k) return m->val[i];
    i = (i + 1) & (m->cap - 1);
  }
  return 0;
}

static void cmap_put(cmap *m, uint32_t k, uint64_t v) {
  if (!k) return;
  if ((m->n + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 4096;
    uint32_t *nk = calloc(nc, sizeof *nk);
    uint64_t *nv = calloc(nc, sizeof *nv);
    if (!nk || !nv) {
      free(nk), free(nv);
      return;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->key[i]) {
        size_t j = (m->key[i] * 2654435761u) & (nc - 1);
        while (nk[j])
          j = (j + 1) & (nc - 1);
        nk[j] = m->key[i], nv[j] = m->val[i];
      }
    free(m->key), free(m->val);
    m->key = nk, m->val = nv, m->cap = nc;
  }
  size_t i = (k * 2654435761u) & (m->cap - 1);
  while (m->key[i] && m->key[i] != k)
    i = (i + 1) & (m->cap - 1);
  if (!m->key[i]) m->n++;
  m->key[i] = k, m->val[i] = v;
}

static int is_own(pw_trace_writer *w, uint32_t corr) {
  (void)w;
  return cmap_get(&own, corr) != 0;
}
static int is_cudnn(pw_trace_writer *w, uint32_t corr) {
  (void)w;
  return cmap_get(&cudnn_made, corr) != 0;
}
static uint64_t app_of(pw_trace_writer *w, uint32_t corr) {
  (void)w;
  uint64_t v = cmap_get(&own, corr);
  return v >= (1ull << 40) ? v : 0;
}

/* GPU records whose API call has not been seen yet: held, so that the external correlation
 * (which comes with the call) is known when they are written. */
static CUpti_Activity **pending;
static size_t npending, cappending;

static uint32_t gpu_corr(const CUpti_Activity *r) {
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    return ((const CUpti_ActivityKernel10 *)(const void *)r)->correlationId;
  case CUPTI_ACTIVITY_KIND_MEMCPY:
    return ((const CUpti_ActivityMemcpy6 *)(const void *)r)->correlationId;
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
    return ((const CUpti_ActivityMemcpyPtoP4 *)(const void *)r)->correlationId;
  case CUPTI_ACTIVITY_KIND_MEMSET:
    return ((const CUpti_ActivityMemset4 *)(const void *)r)->correlationId;
  default:
    return 0;
  }
}

/* The capture window as the writer last saw it (window.c): API calls are kept when they start in
 * it (seen: 1 kept, 2 left out), GPU operations with their call, other records by their start. */
static pw_window cw;

static uint64_t gpu_start(const CUpti_Activity *r) {
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    return ((const CUpti_ActivityKernel10 *)(const void *)r)->start;
  case CUPTI_ACTIVITY_KIND_MEMCPY:
    return ((const CUpti_ActivityMemcpy6 *)(const void *)r)->start;
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
    return ((const CUpti_ActivityMemcpyPtoP4 *)(const void *)r)->start;
  case CUPTI_ACTIVITY_KIND_MEMSET:
    return ((const CUpti_ActivityMemset4 *)(const void *)r)->start;
  default:
    return 0;
  }
}

/* A GPU record whose call is known (or never comes): written when its call is in the window (or,
 * with no call, when it starts in it). */
static void write_gpu(const CUpti_Activity *r) {
  uint64_t in = cmap_get(&seen, gpu_corr(r));
  if (in ? in == 1 : pw_window_keep(&cw, gpu_start(r))) pw_trace_writer_record(tw, r);
}

#define MAX_PENDING_RECORDS 100000

static void hold(const CUpti_Activity *r) {
  if (npending >= MAX_PENDING_RECORDS) { /* calls that never come (a kind CUPTI did not enable):
                                          * the oldest half goes out as it is; memory stays
                                          * bounded */
    size_t half = npending / 2;
    for (size_t i = 0; i < half; i++) {
      write_gpu(pending[i]);
      free(pending[i]);
    }
    memmove(pending, pending + half, (npending - half) * sizeof *pending);
    npending -= half;
  }
  size_t sz = pw_trace_writer_record_size(r);
  CUpti_Activity *c = sz ? malloc(sz) : NULL;
  if (c && npending == cappending) {
    size_t nc = cappending ? cappending * 2 : 256;
    CUpti_Activity **q = realloc(pending, nc * sizeof *q);
    if (q) pending = q, cappending = nc;
  }
  if (!c || npending == cappending) { /* no memory: write it as it is */
    free(c);
    write_gpu(r);
    return;
  }
  memcpy(c, r, sz);
  pending[npending++] = c;
}

static void release_pending(int all) {
  size_t m = 0;
  for (size_t i = 0; i < npending; i++) {
    if (all || cmap_get(&seen, gpu_corr(pending[i]))) {
      write_gpu(pending[i]);
      free(pending[i]);
    } else {
      pending[m++] = pending[i];
    }
  }
  npending = m;
}

static int keep_marker(pw_trace_writer *w, uint64_t start, uint64_t end) {
  (void)w;
  return pw_window_keep(&cw, start) && (end == start || pw_window_keep(&cw, end - 1));
}

/* Names by callback id, looked up once (writer thread only): a CUPTI call, a copy and a search
 * per record cost more than the rest of its conversion. */
#define NAME_CACHE 2048
static char *name_cache[2][NAME_CACHE];
static const char *api_name_uncached(int driver, uint32_t cbid);

static const char *api_name(pw_trace_writer *w, int driver, uint32_t cbid) {
  (void)w;
  if (cbid >= NAME_CACHE) return api_name_uncached(driver, cbid);
  char **slot = &name_cache[driver != 0][cbid];
  if (!*slot) {
    const char *nm = api_name_uncached(driver, cbid);
    if (!nm) return NULL;
    *slot = strdup(nm);
    if (!*slot) return nm;
  }
  return *slot;
}

/* Kernel names demangled, a few hundred kept (used by conversions, which convert_lock makes one
 * at a time): a loop launches the same kernels again and again, and each demangling costs
 * microseconds. */
#define DEMANGLE_CACHE 256
static struct { char *mangled, *readable; } demangled[DEMANGLE_CACHE];

char *pw_trace_demangle(pw_trace_writer *w, const char *name) {
  (void)w;
  static int resolved;
  static pw_cxa_demangle_fn fn;
  if (name[0] != '_' || name[1] != 'Z') return NULL;
  if (!resolved) fn = pw_demangle_resolve(0), resolved = 1;
  if (!fn) return NULL;
  uint32_t h = 2166136261u;
  for (const char *c = name; *c; c++)
    h = (h ^ (unsigned char)*c) * 16777619u;
  __typeof__(demangled[0]) *e = &demangled[h % DEMANGLE_CACHE];
  if (!e->mangled || strcmp(e->mangled, name)) {
    char *d = pw_demangle(fn, name), *m = d ? strdup(name) : NULL;
    if (!m) {
      free(d);
      return NULL;
    }
    free(e->mangled);
    free(e->readable);
    e->mangled = m, e->readable = d;
  }
  return strdup(e->readable);
}

static const char *api_name_uncached(int driver, uint32_t cbid) {
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

/* A trace named *.gz is written through zlib, opened with dlopen like CUPTI (the shim keeps no
 * NEEDED entry beyond libc): gzdopen on the file's descriptor, level 1 (the writer thread keeps
 * up with CUPTI). */
static struct {
  void *(*dopen)(int, const char *);
  int (*write)(void *, const void *, unsigned);
  int (*close)(void *);
} gz;
static void *gzf;

static int ends_with_gz(const char *p) {
  size_t n = strlen(p);
  return n > 3 && !strcmp(p + n - 3, ".gz");
}

static void open_gz(void) {
  void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    *(void **)&gz.dopen = dlsym(h, "gzdopen");
    *(void **)&gz.write = dlsym(h, "gzwrite");
    *(void **)&gz.close = dlsym(h, "gzclose");
  }
  if (h && gz.dopen && gz.write && gz.close) gzf = gz.dopen(fd, "wb1");
  if (!gzf)
    pw_log(PW_LOG_WARN, "trace %s: zlib (libz.so.1) not usable: the trace is written uncompressed",
           path);
}

/* Close the trace file: the gzip stream's end, then the descriptor. */
static void close_out(void) {
  if (gzf) {
    gz.close(gzf); /* closes fd */
    gzf = NULL;
  } else if (fd >= 0) {
    close(fd);
  }
  fd = -1;
}

static void write_all(const char *p, size_t n) {
  if (gzf && n) {
    if (gz.write(gzf, p, (unsigned)n) != (int)n) {
      pw_log(PW_LOG_ERROR, "writing the trace %s failed; tracing stops", path);
      close_out();
    }
    return;
  }
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

static void flush_file(pw_trace_writer *w) {
  write_all(w->buf, w->len);
  w->len = 0;
}

/* Hand work to the writer thread: a completed CUPTI buffer, or a program's call pinwheel staged. */
static void enqueue(qbuf *q) {
  pthread_mutex_lock(&qlock);
  if (qtail)
    qtail->next = q;
  else
    qhead = q;
  qtail = q;
  /* a staged call's record waits for the next buffer (or the exit): waking the writer for it
   * would cost the program's thread a wake-up per staged copy */
  if (q->buf) {
    atomic_store_explicit(&queued_hint, ++queued, memory_order_relaxed);
    pthread_cond_broadcast(&qcond);
  }
  pthread_mutex_unlock(&qlock);
}

static void catch_up(void);

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
  *q = (qbuf){.buf = buffer, .valid = valid};
  enqueue(q);
  catch_up();
}

/* Convert one buffer.  An external-correlation record (it comes with its call) marks the calls
 * pinwheel made itself; a GPU record waits until its call has been seen. */
static void convert(qbuf *q) {
  pw_trace_window_get(&cw); /* after the buffer completed: every change before its records */
  if (!q->buf) {            /* a program's call pinwheel handled */
    if (pw_window_keep(&cw, q->start))
      pw_trace_writer_app_call(tw, q->name, q->start, q->end, q->tid, q->corr);
    free(q);
    return;
  }
  /* first the external correlations of the whole buffer: a call's may come after the call */
  CUpti_Activity *rec = NULL;
  while (cu.next_record(q->buf, q->valid, &rec) == CUPTI_SUCCESS)
    if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const CUpti_ActivityExternalCorrelation *x = (const void *)rec;
      if (x->externalKind == OWN_KIND) cmap_put(&own, x->correlationId, x->externalId);
      if (x->externalKind == CUDNN_KIND) cmap_put(&cudnn_made, x->correlationId, 1);
    }
  rec = NULL;
  while (cu.next_record(q->buf, q->valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const CUpti_ActivityAPI *a = (const void *)rec;
      int in = pw_window_keep(&cw, a->start);
      cmap_put(&seen, a->correlationId, in ? 1 : 2);
      if (in) pw_trace_writer_record(tw, rec);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      if (pw_window_keep(&cw, ((const CUpti_ActivitySynchronization2 *)(const void *)rec)->start))
        pw_trace_writer_record(tw, rec);
      break;
    default:
      if (gpu_corr(rec) && !cmap_get(&seen, gpu_corr(rec)))
        hold(rec);
      else if (gpu_corr(rec))
        write_gpu(rec);
      else
        pw_trace_writer_record(tw, rec); /* markers: the writer keeps a range inside the window */
    }
  }
  free(q->buf);
  free(q);
  release_pending(0);
}

/* The writer runs at SCHED_IDLE: the collector's work (conversion, gzip) must not take a core
 * from the staging threads, whose batch waits for its slowest thread; a CPU that runs only
 * SCHED_IDLE work counts as idle when the scheduler places a waking thread.  It converts in the
 * CPU time the program leaves.  Should the program leave none for long, the queue is bounded all
 * the same: past BACKLOG buffers, the thread that completes one (CUPTI's) converts the oldest
 * itself when no conversion is under way.  convert_lock keeps the buffers in order. */
#define BACKLOG 16 /* buffers of BUF_SIZE waiting: 128 MiB */
static pthread_mutex_t convert_lock = PTHREAD_MUTEX_INITIALIZER;

/* The oldest queued item (qlock held), or NULL. */
static qbuf *pop(void) {
  qbuf *q = qhead;
  if (!q) return NULL;
  qhead = q->next;
  if (!qhead) qtail = NULL;
  if (q->buf) queued--;
  return q;
}

static void catch_up(void) {
  if (atomic_load_explicit(&queued_hint, memory_order_relaxed) <= BACKLOG ||
      pthread_mutex_trylock(&convert_lock))
    return;
  pthread_mutex_lock(&qlock);
  qbuf *q = queued > BACKLOG && !writer_stop ? pop() : NULL;
  atomic_store_explicit(&queued_hint, queued, memory_order_relaxed);
  pthread_mutex_unlock(&qlock);
  if (q) convert(q);
  pthread_mutex_unlock(&convert_lock);
}

/* Convert the oldest queued item, if any: 1 when there was one. */
static int convert_one(void) {
  pthread_mutex_lock(&convert_lock);
  pthread_mutex_lock(&qlock);
  qbuf *q = pop();
  atomic_store_explicit(&queued_hint, queued, memory_order_relaxed);
  pthread_mutex_unlock(&qlock);
  if (q) convert(q);
  pthread_mutex_unlock(&convert_lock);
  return q != NULL;
}

static void *writer_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&qlock);
    while (!qhead && !writer_stop)
      pthread_cond_wait(&qcond, &qlock);
    int stop = !qhead && writer_stop;
    pthread_mutex_unlock(&qlock);
    if (stop) break;
    convert_one();
  }
  return NULL;
}

/* Put suffix before the extension of the file name in out (before ".json.gz" for a .gz);
 * -1 when it does not fit. */
static int insert_before_ext(char *out, size_t n, const char *suffix) {
  size_t o = strlen(out);
  char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
  if (!dot || (slash && dot < slash) || dot == out || (slash && dot == slash + 1)) dot = out + o;
  if (!strcmp(dot, ".gz") && dot > out) { /* trace.json.gz: before ".json.gz" */
    char *d2 = dot - 1;
    while (d2 > out && *d2 != '.' && *d2 != '/')
      d2--;
    if (*d2 == '.' && d2 > out) dot = d2;
  }
  char tail[4096];
  snprintf(tail, sizeof tail, "%s", dot);
  int w = snprintf(dot, n - (size_t)(dot - out), "%s%s", suffix, tail);
  return w < 0 || (size_t)w >= n - (size_t)(dot - out) ? -1 : 0;
}

int pw_trace_path(const char *tmpl, char *out, size_t n) {
  const char *rank = getenv("RANK");
  if (!rank || !*rank) rank = getenv("LOCAL_RANK");
  int distributed = rank && *rank;
  if (!distributed) rank = "0";
  size_t o = 0;
  int personal = 0; /* the template names a process or a rank */
  for (const char *p = tmpl; *p; p++) {
    char tmp[32];
    const char *ins = NULL;
    if (p[0] == '%' && p[1] == 'p') {
      snprintf(tmp, sizeof tmp, "%d", (int)getpid());
      ins = tmp, personal = 1;
    } else if (p[0] == '%' && p[1] == 'r') {
      ins = rank, personal = 1;
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
  if (!o) return -1;
  /* ranks of one job share the environment: without %p or %r they would all write one file;
   * each gets "-rankN" before the extension instead */
  if (distributed && !personal) {
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-rank%s", rank);
    return insert_before_ext(out, n, suffix);
  }
  return 0;
}

/* libcupti: one already in the process, PINWHEEL_CUPTI, the usual search, the toolkit's. */
static const char *const cupti_names[] = {"libcupti.so.13", "libcupti.so"};

/* A libcupti already in the process (in any scope), or NULL. */
static void *loaded_cupti(void) {
  for (size_t i = 0; i < 2; i++) {
    void *h = dlopen(cupti_names[i], RTLD_NOW | RTLD_NOLOAD);
    if (h) return h;
  }
  return NULL;
}

static void *open_cupti(char *why, size_t n) {
  void *loaded = loaded_cupti();
  if (loaded) return loaded;
  const char *env = pw_option_str(PW_OPT_CUPTI);
  if (env && *env) {
    void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(why, n, "PINWHEEL_CUPTI=%s: %s", env, dlerror());
    return NULL;
  }
  for (size_t i = 0; i < 2; i++) {
    void *h = dlopen(cupti_names[i], RTLD_NOW | RTLD_LOCAL);
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
#ifdef PW_TRACE_DIAG
  if (atomic_load(&diag_detached)) pw_diag_cupti(0x400, 1); /* the trace ends as it would have */
#endif
  if (!atomic_exchange(&active, 0)) return;
  atomic_store(&pw_trace_watch, 0); /* the front ends stop reporting to a finished trace */
  if (cu.flush_all) cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&qlock);
  writer_stop = 1;
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
  /* what is queued is converted here too, at the exiting thread's priority, not the writer's */
  while (convert_one()) {
  }
  pthread_join(writer, NULL);
  pthread_mutex_lock(&convert_lock); /* a catch-up conversion still under way ends first */
  pw_trace_window_get(&cw);
  release_pending(1); /* GPU records whose call never came (not traced): by their own start */
  size_t dropped = 0;
  if (cu.dropped && cu.dropped(NULL, 0, &dropped) == CUPTI_SUCCESS) tw->dropped = dropped;
  pw_trace_writer_end(tw);
  close_out();
  pthread_mutex_unlock(&convert_lock);
  pw_trace_window_end(path);
  if (tw->dropped)
    pw_log(PW_LOG_WARN, "trace %s: CUPTI dropped %llu records", path,
           (unsigned long long)tw->dropped);
}

void pw_trace_fork_child(void) {
  pthread_mutex_unlock(&qlock); /* taken by pw_trace_fork_prepare */
  /* the child must not write into its parent's file: it is untraced (a CUDA program may not use
   * CUDA across fork anyway); the writer thread does not exist here */
  pw_trace_window_fork_child();
  if (!atomic_exchange(&active, 0)) return;
  gzf = NULL; /* its stream is the parent's: never ended here */
  if (fd >= 0) close(fd);
  fd = -1;
  pthread_mutex_init(&qlock, NULL);
  pthread_mutex_init(&convert_lock, NULL);
  pthread_cond_init(&qcond, NULL);
}

void pw_trace_fork_prepare(void) {
  pthread_mutex_lock(&qlock); /* no child inherits a queue in the middle of a change */
}
void pw_trace_fork_parent(void) {
  pthread_mutex_unlock(&qlock);
}

static int other_profiler(void) {
  /* Nsight Systems and other tools inject CUPTI through the driver's injection variable */
  const char *inj = getenv("CUDA_INJECTION64_PATH");
  return inj && *inj;
}

/* libpinwheel_nvtx.so's InitializeInjectionNvtx2 (a module's first NVTX call, NVTX_INJECTION64_PATH
 * set by `pinwheel run --trace`) lands here: the module's NVTX table goes to the CUPTI the
 * collector uses, which records the ranges as marker activity.  Only when a trace is asked for and
 * no other profiler is attached; 1 on success, 0 makes NVTX a no-op for that module (as without a
 * tool). This can come before the first CUDA call: it loads CUPTI, starts nothing. */
__attribute__((visibility("default"))) int pw_trace_nvtx_init(void *export_table);
int pw_trace_nvtx_init(void *export_table) {
  const char *tmpl = pw_option_str(PW_OPT_TRACE);
  if (!tmpl || !*tmpl || other_profiler() || !export_table) return 0;
  char why[512] = "";
  void *h = open_cupti(why, sizeof why);
  if (!h) {
    pw_log(PW_LOG_INFO, "NVTX ranges not traced: %s", why);
    return 0;
  }
  CUptiResult (*init)(void *);
  *(void **)&init = dlsym(h, "cuptiNvtxInitialize2");
  CUptiResult r = init ? init(export_table) : CUPTI_ERROR_NOT_SUPPORTED;
  if (r != CUPTI_SUCCESS) {
    pw_log(PW_LOG_WARN, "NVTX ranges not traced: CUPTI's cuptiNvtxInitialize2 %s",
           init ? "failed" : "is missing");
    return 0;
  }
  pw_log(PW_LOG_INFO, "NVTX ranges of a module handed to CUPTI");
  return 1;
}

/* CUPTI's activity API from the library h: 0, or -1 (with a warning) when it lacks the calls the
 * collector cannot do without. */
static int bind_cupti(void *h) {
#define SYM(f, n) *(void **)&cu.f = dlsym(h, n)
  SYM(enable, "cuptiActivityEnable");
  SYM(disable, "cuptiActivityDisable");
  SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
  SYM(flush_all, "cuptiActivityFlushAll");
  SYM(next_record, "cuptiActivityGetNextRecord");
  SYM(dropped, "cuptiActivityGetNumDroppedRecords");
  SYM(result_string, "cuptiGetResultString");
  SYM(callback_name, "cuptiGetCallbackName");
  SYM(push_ext, "cuptiActivityPushExternalCorrelationId");
  SYM(pop_ext, "cuptiActivityPopExternalCorrelationId");
  SYM(stream_id, "cuptiGetStreamIdEx");
  SYM(timestamp, "cuptiGetTimestamp");
  SYM(runtime_api, "cuptiActivityEnableRuntimeApi");
  SYM(driver_api, "cuptiActivityEnableDriverApi");
#undef SYM
  /* looked up here, not where it is used: pw_trace_side_stream runs under the engine's setup lock,
   * where no dlopen may come (a first copy from a library constructor, which holds the loader's
   * lock, may be waiting for that lock).  The handle stays open: the pointer lives in it. */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (drv) *(void **)&cu.ctx_current = dlsym(drv, "cuCtxGetCurrent");
  if (!cu.enable || !cu.register_callbacks || !cu.flush_all || !cu.next_record) {
    pw_log(PW_LOG_WARN, "cannot trace: the CUPTI found lacks its activity API; untraced");
    return -1;
  }
  return 0;
}

/* Open the trace file at `path` (an exec'd child whose parent still writes that name gets a name
 * of its own): 0, or -1 with a warning. */
static int open_trace_file(void) {
  char why[512] = "";
  fd = pw_open_output(path, PW_OUT_REPLACE, why, sizeof why);
  if (fd == -2) { /* an ancestor's trace, still being written (an exec'd child): one of its own */
    char taken[sizeof path], pid[32];
    snprintf(taken, sizeof taken, "%s", path);
    snprintf(pid, sizeof pid, "-pid%d", (int)getpid());
    fd = insert_before_ext(path, sizeof path, pid)
             ? -1
             : pw_open_output(path, PW_OUT_NEW, why, sizeof why);
    if (fd >= 0)
      pw_log(PW_LOG_WARN, "trace %s is being written by another process; this one's goes to %s",
             taken, path);
  }
  if (fd < 0) {
    pw_log(PW_LOG_WARN, "cannot write the trace %s: %s; the program runs untraced", path, why);
    return -1;
  }
  if (ends_with_gz(path)) open_gz();
  return 0;
}

/* The runtime's queries, which launch, copy and wait for nothing: their records are left out of
 * the trace (the driver's calls left out are pw_driver_calls.h's).  PyTorch makes about 14,000 such
 * calls per ResNet-50 step (10,000 of them cudaGetDevice) against 900 launches, and CUPTI's record
 * of each costs the calling thread time: +3.5 % on that loop with every call recorded
 * (docs/RESULTS.md).  The report reads launches, copies, memsets and synchronizations, never these.
 */
#define R(n) CUPTI_RUNTIME_TRACE_CBID_##n
static const CUpti_CallbackId quiet_runtime[] = {
    R(cudaGetDevice_v3020),
    R(cudaGetDeviceCount_v3020),
    R(cudaGetDeviceFlags_v7000),
    R(cudaDeviceGetAttribute_v5000),
    R(cudaGetLastError_v3020),
    R(cudaPeekAtLastError_v3020),
    R(cudaDriverGetVersion_v3020),
    R(cudaRuntimeGetVersion_v3020),
    R(cudaStreamIsCapturing_v10000),
    R(cudaStreamIsCapturing_ptsz_v10000),
    R(cudaStreamGetCaptureInfo_v10010),
    R(cudaStreamGetCaptureInfo_ptsz_v10010),
    R(cudaStreamGetCaptureInfo_v2_v11030),
    R(cudaStreamGetCaptureInfo_v2_ptsz_v11030),
    R(cudaStreamGetCaptureInfo_v12030),
    R(cudaStreamGetCaptureInfo_ptsz_v12030),
    R(cudaStreamGetDevice_v12080),
    R(cudaStreamGetDevice_ptsz_v12080),
};
#undef R
/* The driver's callback ids looked at: this header's (a newer CUPTI's further calls keep their
 * records: nothing is lost, they cost what they did before) */
#define DRIVER_IDS CUPTI_DRIVER_TRACE_CBID_SIZE

/* Switch the records of the runtime's queries and of the driver's calls that are not recorded
 * (pw_driver_calls.h) off, after their kinds were enabled: enabling a kind resets the per-call
 * switches.  A CUPTI without the switches records every call. */
static void quiet_queries(void) {
  size_t n = 0;
  for (size_t i = 0; cu.runtime_api && i < sizeof quiet_runtime / sizeof *quiet_runtime; i++)
    n += cu.runtime_api(quiet_runtime[i], 0) == CUPTI_SUCCESS;
  /* an id CUPTI does not name is skipped */
  for (uint32_t cbid = 1; cu.driver_api && cu.callback_name && cbid < DRIVER_IDS; cbid++) {
    const char *nm = NULL;
    if (cu.callback_name(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &nm) != CUPTI_SUCCESS || !nm ||
        pw_driver_call_recorded(nm))
      continue;
    n += cu.driver_api(cbid, 0) == CUPTI_SUCCESS;
  }
  pw_log(PW_LOG_DEBUG, "trace: records of %zu calls left out", n);
}

/* The activity kinds the collector enables. */
static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMCPY2,
                                           CUPTI_ACTIVITY_KIND_MEMSET,
                                           CUPTI_ACTIVITY_KIND_RUNTIME,
                                           CUPTI_ACTIVITY_KIND_DRIVER,
                                           CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                           CUPTI_ACTIVITY_KIND_MARKER,
                                           CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

/* Register the buffer callbacks and enable the activity kinds whose bits `only` sets (bit i:
 * kinds[i]; 0: all of them, as the collector does): CUPTI_SUCCESS or its error (NVTX markers and
 * driver calls are optional). */
static CUptiResult enable_activities(unsigned only) {
  CUptiResult r = cu.register_callbacks(buffer_requested, buffer_completed);
  for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof kinds[0]; i++) {
    if (only && !(only & (1u << i))) continue;
    CUptiResult e = cu.enable(kinds[i]);
    if (e != CUPTI_SUCCESS && kinds[i] == CUPTI_ACTIVITY_KIND_MARKER)
      pw_log(PW_LOG_INFO, "CUPTI records no NVTX ranges here (enabling them failed: %d)", (int)e);
    else if (e != CUPTI_SUCCESS && kinds[i] != CUPTI_ACTIVITY_KIND_DRIVER)
      r = e;
  }
  if (r == CUPTI_SUCCESS) quiet_queries();
  return r;
}

/* The kinds the program enabled itself, through this library's cuptiActivityEnable (bit k: kind
 * k), which the handoff leaves enabled. */
static _Atomic uint64_t program_kinds;

static int kept(CUpti_ActivityKind k, uint64_t keep) {
  return (unsigned)k < 64 && (keep >> k & 1);
}

/* Disable the collector's kinds but those whose bits `keep` sets: the number CUPTI refused (the
 * driver kind, optional, aside). */
static int disable_activities(uint64_t keep) {
  int bad = 0;
  for (size_t i = 0; cu.disable && i < sizeof kinds / sizeof kinds[0]; i++)
    if (!kept(kinds[i], keep))
      bad += cu.disable(kinds[i]) != CUPTI_SUCCESS && kinds[i] != CUPTI_ACTIVITY_KIND_DRIVER;
  return bad;
}

/* The writer thread, every signal blocked, at idle priority (set before the first buffer comes):
 * 0, or -1 with a warning. */
static int start_writer(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&writer, NULL, writer_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  struct sched_param sp = {0};
  if (!rc && pthread_setschedparam(writer, SCHED_IDLE, &sp))
    pw_log(PW_LOG_INFO, "trace writer: SCHED_IDLE refused; it runs at normal priority");
  if (rc) {
    pw_log(PW_LOG_WARN, "cannot start the trace writer; untraced");
    return -1;
  }
  return 0;
}

#ifdef PW_TRACE_DIAG
/* A measuring aid, built only with -DPINWHEEL_TRACE_DIAG=ON (bench/collector_kinds.py): switch
 * the kinds whose bits mask sets (bit i: kinds[i]) off (on: 0) or back on, in a running traced
 * process, so that one process measures what each costs (its own rounds cancel the machine's
 * drift, which two processes do not).  Bit 9: every driver call's record (on), or those the
 * collector records (off).  Bit 10: the whole collector (off: every kind disabled, the records
 * flushed, CUPTI detached with cuptiFinalize and pinwheel's own calls to it stopped; on: attached
 * again as at the start, or with the kinds of the bits beside it only, detached first when
 * attached with others, which measures what attaching with them costs, work CUPTI keeps doing
 * once a kind was enabled included; a process that exits detached is attached again first, so
 * that its trace ends).  The number of calls CUPTI refused; -1 when not tracing.  Call it from
 * the program's only CUDA thread, between its CUDA calls (no staged copy under way), and not in a
 * forked child. */
static void *diag_cupti;
static unsigned diag_with; /* the kinds CUPTI was attached again with (0: all) */
int pw_diag_cupti(int mask, int on) {
  CUptiResult (*finalize)(void) = NULL;
  if (diag_cupti) *(void **)&finalize = dlsym(diag_cupti, "cuptiFinalize");
  if (!tw || !cu.disable || !finalize) return -1;
  if (mask & 0x400) {
    unsigned with = (unsigned)mask & 0x1ff;
    int detached = atomic_load(&diag_detached);
    if (!on && detached) return 0;
    if (on && !detached) {
      if (with == diag_with) return 0;
      int bad = pw_diag_cupti(0x400, 0); /* attached with other kinds: detached first */
      if (bad) return bad;
    }
    if (on) {
      CUptiResult r = enable_activities(with);
      diag_with = with;
      atomic_store(&diag_detached, 0);
      atomic_store(&active, 1);
      return r != CUPTI_SUCCESS;
    }
    atomic_store(&active, 0); /* pinwheel's own calls to CUPTI stop (pw_trace_own_begin) */
    atomic_store(&diag_detached, 1);
    int bad = disable_activities(0);
    cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    while (convert_one()) { /* nothing of CUPTI's is touched after it is detached */
    }
    return bad + (finalize() != CUPTI_SUCCESS);
  }
  if (!pw_trace_active()) return -1;
  int bad = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (mask & (1 << i)) bad += (on ? cu.enable(kinds[i]) : cu.disable(kinds[i])) != CUPTI_SUCCESS;
  if (on && (mask & 0x1ff)) quiet_queries(); /* enabling a kind switched every call back on */
  if (mask & 0x200) {
    if (on)
      for (uint32_t cbid = 1; cu.driver_api && cbid < DRIVER_IDS; cbid++)
        cu.driver_api(cbid, 1);
    else
      quiet_queries();
  }
  return bad;
}
#endif

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
  if (bind_cupti(h)) return;
#ifdef PW_TRACE_DIAG
  diag_cupti = h;
#endif
  tw = calloc(1, sizeof *tw);
  if (!tw) return;
  if (open_trace_file()) {
    free(tw);
    tw = NULL;
    return;
  }
  tw->flush = flush_file;
  tw->pid = (uint32_t)getpid();
  tw->api_name = api_name;
  tw->demangle = pw_trace_demangle;
  tw->is_pinwheel_corr = is_own;
  tw->is_cudnn_corr = is_cudnn;
  tw->app_corr = app_of;
  CUptiResult r = enable_activities(0);
  if (r != CUPTI_SUCCESS) {
    const char *m = "?";
    if (cu.result_string) cu.result_string(r, &m);
    pw_log(PW_LOG_WARN, "cannot trace: CUPTI says %s; the program runs untraced", m);
    close_out();
    unlink(path);
    return;
  }
  pw_trace_writer_begin(tw);
  if (start_writer()) {
    close_out();
    unlink(path);
    return;
  }
  uint64_t t0 = 0;
  if (cu.timestamp) cu.timestamp(&t0);
  pw_trace_window_init(t0, tw->capture, sizeof tw->capture);
  tw->keep = keep_marker;
  atomic_store(&active, 1);
  atomic_store(&pw_trace_want_atexit, 1);
  pw_log(PW_LOG_INFO, "tracing to %s", path);
}

/* The program's own libcupti's definition of name (not the shim's).  It is often not in the global
 * scope, where RTLD_NEXT looks: PyTorch's comes as a dependency of an extension module, which
 * Python opens RTLD_LOCAL; it is then found by its name. */
static void *program_cupti(const char *name, void *self) {
  void *p = dlsym(RTLD_NEXT, name);
  if (p && p != self) return p;
  /* PINWHEEL_CUPTI read here directly: this can come before the first CUDA call */
  const char *env = getenv("PINWHEEL_CUPTI");
  for (int i = 0; i < 2; i++) {
    void *h = i ? (env ? dlopen(env, RTLD_NOW | RTLD_NOLOAD) : NULL) : loaded_cupti();
    if (!h) continue;
    p = dlsym(h, name);
    dlclose(h);
    if (p && p != self) return p;
  }
  return NULL;
}

/* What the shim's CUPTI entry points pass a call on to: the CUPTI pinwheel traces with (ours),
 * else the program's own. */
static void *real_cupti(void *ours, const char *name, void *self) {
  return ours ? ours : program_cupti(name, self);
}

/* torch.profiler (Kineto) and other in-process CUPTI clients register their own buffer
 * callbacks, which would take CUPTI's records away from pinwheel's trace in the middle of the run.
 * The call reaches this definition first (the shim is preloaded): pinwheel completes its trace,
 * says so once, and passes the call on, so the program's profiler works as it would without
 * pinwheel.  (A client that calls through a dlopen handle of its own reaches CUPTI directly.) */
__attribute__((visibility("default"))) CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp) {
  if (atomic_load(&active) && req != buffer_requested) {
    pw_log(PW_LOG_WARN,
           "the program starts its own CUPTI profiler (torch.profiler?): pinwheel's trace %s "
           "ends here, complete, and CUPTI goes to the program's profiler",
           path);
    /* the program's profiler gets CUPTI as it would without pinwheel: none of pinwheel's kinds
     * left enabled but those the program enabled itself (some clients enable before they
     * register), or it would get records it did not ask for, and CUPTI's cost on every call
     * would go on after it stops.  The per-call switches (quiet_queries) stay: the profiler's
     * enabling a kind overrides them, and switched on one by one they would record those calls
     * with their kind off.  Disabled before the trace's last flush, so that no record comes
     * after it. */
    disable_activities(atomic_load(&program_kinds));
    finish();
  }
  CUptiResult (*real)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  *(void **)&real = real_cupti((void *)cu.register_callbacks, "cuptiActivityRegisterCallbacks",
                               (void *)cuptiActivityRegisterCallbacks);
  return real ? real(req, comp) : CUPTI_ERROR_NOT_INITIALIZED;
}

/* A kind the program enables or disables itself through this definition (a client that enables
 * before it registers keeps that kind at the handoff), passed on as the call above is. */
__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiActivityEnable(CUpti_ActivityKind kind) {
  if ((unsigned)kind < 64) atomic_fetch_or(&program_kinds, 1ull << kind);
  CUptiResult (*real)(CUpti_ActivityKind);
  *(void **)&real =
      real_cupti((void *)cu.enable, "cuptiActivityEnable", (void *)cuptiActivityEnable);
  return real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiActivityDisable(CUpti_ActivityKind kind) {
  if ((unsigned)kind < 64) atomic_fetch_and(&program_kinds, ~(1ull << kind));
  CUptiResult (*real)(CUpti_ActivityKind);
  *(void **)&real =
      real_cupti((void *)cu.disable, "cuptiActivityDisable", (void *)cuptiActivityDisable);
  return real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
}

void pw_trace_after_call(void) {
  if (atomic_load_explicit(&pw_trace_want_atexit, memory_order_relaxed) &&
      atomic_exchange(&pw_trace_want_atexit, 0))
    atexit(finish);
}

uint64_t pw_trace_now(void) {
  uint64_t t = 0;
  if (cu.timestamp) cu.timestamp(&t);
  return t;
}

int pw_trace_active(void) {
  return atomic_load_explicit(&active, memory_order_relaxed);
}

void pw_trace_side_stream(int dev, void *stream) {
  uint32_t id;
  if (!pw_trace_active() || !cu.stream_id) return;
  /* Runs under the engine's setup lock (setup_dev): no dlopen or dlsym here, the driver's call was
   * found at trace start.  The stream's context: the calling thread's current one (it just created
   * the stream); NULL when the driver was not loaded at trace start, which CUPTI takes as "do not
   * check the stream's context" (cupti_activity.h: "typically this parameter should be null"). */
  CUcontext ctx = NULL;
  if (cu.ctx_current) cu.ctx_current(&ctx);
  if (cu.stream_id(ctx, (CUstream)stream, 0, &id) != CUPTI_SUCCESS) return;
  pthread_mutex_lock(&qlock);
  if (tw->nside < 16) tw->side[tw->nside++] = (pw_trace_writer_lane){(uint32_t)dev, id};
  pthread_mutex_unlock(&qlock);
}

int pw_trace_cudnn_begin(void) {
  if (!pw_trace_active() || !cu.push_ext) return 0;
  return cu.push_ext(CUDNN_KIND, 1) == CUPTI_SUCCESS;
}

void pw_trace_cudnn_end(int pushed) {
  uint64_t id;
  if (pushed && cu.pop_ext) cu.pop_ext(CUDNN_KIND, &id);
}

uint64_t pw_trace_own_begin(void) {
  if (!pw_trace_active() || !cu.push_ext || own_depth++) return 0;
  own_app = atomic_fetch_add(&next_app, 1);
  own_t0 = 0;
  if (cu.timestamp) cu.timestamp(&own_t0); /* CUPTI's clock, as its records have */
  cu.push_ext(OWN_KIND, own_app);
  return own_app;
}

void pw_trace_own_end(uint64_t app, const char *name) {
  uint64_t id;
  if (!own_depth || --own_depth) return;
  if (cu.pop_ext) cu.pop_ext(OWN_KIND, &id);
  if (!app || !name || !pw_trace_active()) return;
  qbuf *q = calloc(1, sizeof *q);
  if (!q) return;
  q->name = name; /* a string literal of the wrapper */
  q->start = own_t0;
  if (cu.timestamp) cu.timestamp(&q->end);
  if (q->end < q->start) q->end = q->start;
  q->corr = app;
  q->tid = (uint32_t)gettid();
  enqueue(q);
}
