/* fake_cupti.c — a small stand-in for libcupti.so.13, for the collector's tests without a GPU.
 *
 * It keeps the buffer callbacks it is given, and on each flush fills one buffer with a few
 * records (a runtime call, its pageable H2D copy, a kernel) and completes it through them, as
 * CUPTI does.  Records sit in fixed 512-byte slots.  fake_cupti_flushes() tells how many flushes
 * reached which client.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdint.h>
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
/* an NVTX module handed to this CUPTI (cuptiNvtxInitialize2): the next flush has one range of it */
static void *nvtx_table;

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  (void)kind;
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
  if (pushed) { /* after the call's record: its external correlation */
    CUpti_ActivityExternalCorrelation *x = (void *)(buf + 3 * SLOT);
    x->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x->externalKind = pushed_kind;
    x->externalId = pushed;
    x->correlationId = c;
    valid += SLOT;
    pushed = 0;
  }
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
  (void)d;
  *name = cbid == 41 ? "cudaMemcpyAsync_v3020" : "cudaSomething_v1";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t id) {
  pushed = id, pushed_kind = k;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t *id) {
  (void)k;
  *id = 0;
  return CUPTI_SUCCESS;
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
