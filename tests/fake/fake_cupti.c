/* fake_cupti.c — a small stand-in for libcupti.so.13, for the collector's tests without a GPU.
 *
 * It keeps the buffer callbacks it is given, and on each flush fills one buffer with a few
 * records (a runtime call, its pageable H2D copy, a kernel) and completes it through them, as
 * CUPTI does.  Records sit in fixed 512-byte slots.  fake_cupti_flushes() tells how many flushes
 * reached which client.  The fake runtime reports its copies and launches (fake_cupti_api, with
 * FAKE_CUPTI_CALLS set): each becomes a runtime-call record and its GPU operation's, in the next
 * flush's buffer.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT 512

static CUpti_BuffersCallbackRequestFunc req;
static CUpti_BuffersCallbackCompleteFunc comp;
static uint32_t corr = 100;
/* the last external correlation id pushed (what pinwheel does around a staged copy): the next
 * flush says that its call and copy were made under it, as CUPTI would */
static uint64_t pushed;
static CUpti_ExternalCorrelationKind pushed_kind;
/* ids pushed and not yet popped, per kind (fake_cupti_ext_depth): a push left open would mark
 * every later call of its thread */
static int ext_depth[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
/* an NVTX module handed to this CUPTI (cuptiNvtxInitialize2): the next flush has one range of it */
static void *nvtx_table;

/* The activity kinds enabled now (fake_cupti_enabled_kinds counts them). */
static uint8_t kind_on[CUPTI_ACTIVITY_KIND_COUNT];

/* Each runtime call's record switch (cuptiActivityEnableRuntimeApi), as CUPTI has them: SW_KIND
 * follows the runtime kind, SW_ON and SW_OFF were set call by call, and enabling or disabling the
 * kind resets them all to SW_KIND.  Each flush has a cudaGetDevice record when its switch says
 * so. */
enum { SW_KIND, SW_ON, SW_OFF };
static uint8_t runtime_sw[1024];
/* The same for the driver's calls (cuptiActivityEnableDriverApi): each flush has a record of a
 * cuLaunchKernel and of a cuCtxSetCurrent (the runtime makes many such calls) when theirs say so.
 */
static uint8_t driver_sw[1024];

/* A flush's records stand for the calls made since the last one: those made before their kind
 * was disabled are delivered too, by the switches they had (kept here at the disable, until the
 * next flush). */
static uint8_t runtime_before[1024], driver_before[1024];

static int recorded_now(const uint8_t *sw, CUpti_CallbackId cbid, CUpti_ActivityKind kind) {
  return sw[cbid] == SW_ON || (sw[cbid] == SW_KIND && kind_on[kind]);
}

static int recorded(const uint8_t *sw, const uint8_t *before, CUpti_CallbackId cbid,
                    CUpti_ActivityKind kind) {
  return before[cbid] || recorded_now(sw, cbid, kind);
}

static void set_domain(uint8_t *sw, uint8_t *before, size_t n, CUpti_ActivityKind kind,
                       uint8_t on) {
  for (size_t i = 0; !on && i < n; i++)
    before[i] |= (uint8_t)recorded_now(sw, (CUpti_CallbackId)i, kind);
  kind_on[kind] = on;
  memset(sw, SW_KIND, n);
}

static CUptiResult set_kind(CUpti_ActivityKind kind, uint8_t on) {
  if ((unsigned)kind >= sizeof kind_on) return CUPTI_ERROR_INVALID_KIND;
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME)
    set_domain(runtime_sw, runtime_before, sizeof runtime_sw, kind, on);
  else if (kind == CUPTI_ACTIVITY_KIND_DRIVER)
    set_domain(driver_sw, driver_before, sizeof driver_sw, kind, on);
  else
    kind_on[kind] = on;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  return set_kind(kind, 1);
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  return set_kind(kind, 0);
}

__attribute__((visibility("default"))) int fake_cupti_ext_depth(int kind);
int fake_cupti_ext_depth(int kind) {
  pthread_mutex_lock(&calls_mu);
  int d = kind >= 0 && kind < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE ? ext_depth[kind] : -1;
  pthread_mutex_unlock(&calls_mu);
  return d;
}

int fake_cupti_enabled_kinds(void) {
  int n = 0;
  for (size_t i = 0; i < sizeof kind_on; i++)
    n += kind_on[i];
  return n;
}

/* Detached: the buffer callbacks are forgotten until a client registers again. */
CUptiResult cuptiFinalize(void) {
  req = NULL, comp = NULL;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (cbid >= sizeof driver_sw) return CUPTI_ERROR_INVALID_PARAMETER;
  driver_sw[cbid] = enable ? SW_ON : SW_OFF;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (cbid >= sizeof runtime_sw) return CUPTI_ERROR_INVALID_PARAMETER;
  runtime_sw[cbid] = enable ? SW_ON : SW_OFF;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                           CUpti_BuffersCallbackCompleteFunc c) {
  req = r, comp = c;
  return CUPTI_SUCCESS;
}

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Calls the fake runtime reported, waiting for the next flush: (API record, GPU record) pairs. */
#define MAX_CALLS 4096
static uint8_t calls[MAX_CALLS][2][SLOT];
static int ncalls;
static uint64_t gpu_clock;
static const void *funcs[64], *streams[64];
static char names[64][32];

static int index_of(const void **tab, const void *p) {
  for (int i = 0; i < 64; i++) {
    if (tab[i] == p) return i;
    if (!tab[i]) {
      tab[i] = p;
      return i;
    }
  }
  return 63;
}

/* what: 0 a launch of func; 1 + cudaMemcpyKind a copy of bytes.  On stream. */
__attribute__((visibility("default"))) void fake_cupti_api(const char *name, int what, size_t bytes,
                                                           const void *func, const void *stream);
static uint64_t now(void);
void fake_cupti_api(const char *name, int what, size_t bytes, const void *func,
                    const void *stream) {
  (void)name;
  pthread_mutex_lock(&calls_mu);
  if (ncalls == MAX_CALLS) {
    pthread_mutex_unlock(&calls_mu);
    return;
  }
  memset(calls[ncalls], 0, sizeof calls[ncalls]);
  uint64_t t = now();
  uint32_t c = ++corr;
  CUpti_ActivityAPI *a = (void *)calls[ncalls][0];
  a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a->cbid = what ? 41 : 211;
  a->start = t, a->end = t + 1000;
  a->processId = 1, a->threadId = 1;
  a->correlationId = c;
  uint64_t g = gpu_clock > t + 200 ? gpu_clock : t + 200;
  gpu_clock = g + 2000;
  uint32_t sid = 10 + (uint32_t)index_of(streams, stream);
  if (what) {
    CUpti_ActivityMemcpy6 *m = (void *)calls[ncalls][1];
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = what == 2   ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
                  : what == 3 ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
                              : CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m->srcKind =
        what == 2 ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->dstKind =
        what == 3 ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->bytes = bytes;
    m->start = g, m->end = g + 2000;
    m->streamId = sid, m->correlationId = c;
  } else {
    int f = index_of(funcs, func);
    snprintf(names[f], sizeof names[f], "fake_kernel_%d", f);
    CUpti_ActivityKernel10 *k = (void *)calls[ncalls][1];
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = names[f];
    k->start = g, k->end = g + 2000;
    k->streamId = sid, k->correlationId = c;
  }
  ncalls++;
  pthread_mutex_unlock(&calls_mu);
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  if (!req || !comp) return CUPTI_SUCCESS;
  uint8_t *buf;
  size_t size, maxr;
  req(&buf, &size, &maxr);
  if (!buf || size < 4 * SLOT) return CUPTI_ERROR_UNKNOWN;
  memset(buf, 0, 4 * SLOT);
  uint64_t t = now();
  uint32_t c = ++corr;
  CUpti_ActivityAPI *a = (void *)buf;
  a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a->cbid = 41;
  a->start = t, a->end = t + 2000;
  a->processId = 1, a->threadId = 1;
  a->correlationId = c;
  CUpti_ActivityMemcpy6 *m = (void *)(buf + SLOT);
  m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m->bytes = 1 << 20;
  m->start = t + 100, m->end = t + 1900;
  m->streamId = 7, m->correlationId = c;
  CUpti_ActivityKernel10 *k = (void *)(buf + 2 * SLOT);
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->name = "fake_kernel";
  k->start = t + 2000, k->end = t + 3000;
  k->streamId = 7, k->correlationId = c + 1000;
  size_t valid = 3 * SLOT;
  if (recorded(runtime_sw, runtime_before, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
               CUPTI_ACTIVITY_KIND_RUNTIME)) { /* a query, before the copy */
    CUpti_ActivityAPI *q = (void *)(buf + valid);
    memset(q, 0, SLOT);
    q->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    q->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
    q->start = t - 500, q->end = t - 400;
    q->processId = 1, q->threadId = 1;
    q->correlationId = c + 2000;
    valid += SLOT;
  }
  static const CUpti_CallbackId drv[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                                         CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent};
  for (int i = 0; i < 2; i++) { /* driver calls of their own (no GPU operation of them here) */
    if (!recorded(driver_sw, driver_before, drv[i], CUPTI_ACTIVITY_KIND_DRIVER)) continue;
    CUpti_ActivityAPI *q = (void *)(buf + valid);
    memset(q, 0, SLOT);
    q->kind = CUPTI_ACTIVITY_KIND_DRIVER;
    q->cbid = drv[i];
    q->start = t - 300 + 100 * (uint64_t)i, q->end = q->start + 50;
    q->processId = 1, q->threadId = 1;
    q->correlationId = c + 3000 + (uint32_t)i;
    valid += SLOT;
  }
  memset(runtime_before, 0, sizeof runtime_before); /* delivered */
  memset(driver_before, 0, sizeof driver_before);
  if (nvtx_table && size >= valid + 2 * SLOT) { /* "fake_range#1": its start and end records */
    for (int i = 0; i < 2; i++) {
      CUpti_ActivityMarker2 *mk = (void *)(buf + valid);
      mk->kind = CUPTI_ACTIVITY_KIND_MARKER;
      mk->flags = i ? CUPTI_ACTIVITY_FLAG_MARKER_END : CUPTI_ACTIVITY_FLAG_MARKER_START;
      mk->timestamp = t + (i ? 3000 : 0);
      mk->id = 77;
      mk->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
      mk->objectId.pt.threadId = 1;
      mk->name = i ? NULL : "fake_range#1";
      valid += SLOT;
    }
    nvtx_table = NULL;
  }
  pthread_mutex_lock(&calls_mu);
  uint64_t ext = pushed;
  CUpti_ExternalCorrelationKind ext_kind = pushed_kind;
  pushed = 0;
  pthread_mutex_unlock(&calls_mu);
  if (ext) { /* after the call's record: its external correlation */
    CUpti_ActivityExternalCorrelation *x = (void *)(buf + valid);
    memset(x, 0, SLOT);
    x->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x->externalKind = ext_kind;
    x->externalId = ext;
    x->correlationId = c;
    valid += SLOT;
  }
  pthread_mutex_lock(&calls_mu);
  for (int i = 0; i < ncalls && valid + 2 * SLOT <= size; i++) {
    memcpy(buf + valid, calls[i], 2 * SLOT);
    valid += 2 * SLOT;
  }
  ncalls = 0;
  pthread_mutex_unlock(&calls_mu);
  comp(NULL, 0, buf, size, valid);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
  uint8_t *next = *record ? (uint8_t *)*record + SLOT : buffer;
  if (next + SLOT > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
  (void)ctx, (void)stream;
  *dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name) {
  if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (cbid >= 1500) return CUPTI_ERROR_INVALID_PARAMETER; /* ids this CUPTI does not have */
    *name = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel    ? "cuLaunchKernel"
            : cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent ? "cuCtxSetCurrent"
                                                              : "cuSomething";
    return CUPTI_SUCCESS;
  }
  *name = cbid == 41                                             ? "cudaMemcpyAsync_v3020"
          : cbid == 211                                          ? "cudaLaunchKernel_v7000"
          : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 ? "cudaGetDevice_v3020"
                                                                 : "cudaSomething_v1";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t id) {
  pthread_mutex_lock(&calls_mu); /* staging threads push at once */
  pushed = id, pushed_kind = k;
  if (k >= 0 && k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) ext_depth[k]++;
  pthread_mutex_unlock(&calls_mu);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t *id) {
  pthread_mutex_lock(&calls_mu);
  int ok = k >= 0 && k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE && ext_depth[k] > 0;
  if (ok) ext_depth[k]--;
  pthread_mutex_unlock(&calls_mu);
  *id = 0;
  return ok ? CUPTI_SUCCESS : CUPTI_ERROR_QUEUE_EMPTY;
}

CUptiResult cuptiGetTimestamp(uint64_t *ts) {
  *ts = now();
  return CUPTI_SUCCESS;
}

/* What a profiling library that loads CUPTI itself hands a module's NVTX table to. */
CUptiResult cuptiNvtxInitialize2(void *table) {
  nvtx_table = table;
  return CUPTI_SUCCESS;
}
