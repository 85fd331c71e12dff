/* trace_json.c — CUPTI activity records to Chrome trace JSON, as Kineto (torch.profiler) writes
 * it, so that one reader (pinwheel report) serves both and Perfetto opens it.
 *
 * Owns: the record → event conversion and the document's frame.  Pure: no CUPTI call, no I/O
 * but the writer callback, so the tests feed it synthetic records (tests/test_trace.c).
 * Layout (DESIGN.md §5): GPU operations are "X" events with pid = device, tid = stream, cat
 * kernel / gpu_memcpy / gpu_memset, memcpy names like "Memcpy HtoD (Pageable -> Device)", args
 * device, stream, correlation, bytes; runtime and driver calls are cat cuda_runtime /
 * cuda_driver on pid = the process, tid = the thread, with args.correlation; NVTX ranges are
 * user_annotation events; names by "M" events.  Times: µs with the ns as exact decimals.
 * Kernel names go through the writer's demangle callback (trace.c's), as Kineto demangles them.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(pw_trace_writer *w, const char *s, size_t n) {
  while (n) {
    size_t room = sizeof w->buf - w->len;
    if (!room) {
      w->flush(w);
      continue;
    }
    size_t k = n < room ? n : room;
    memcpy(w->buf + w->len, s, k);
    w->len += k;
    s += k;
    n -= k;
  }
}

#define PUTS(w, lit) put((w), (lit), sizeof(lit) - 1)

static void putf(pw_trace_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(pw_trace_writer *w, const char *fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  put(w, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

/* Numbers and strings are formatted by hand: vsnprintf per field was most of a record's cost
 * (bench/trace_writer.c measures it). */
static void put_u64(pw_trace_writer *w, uint64_t v) {
  char b[20];
  int i = sizeof b;
  do {
    b[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put(w, b + i, sizeof b - (size_t)i);
}

static void put_i64(pw_trace_writer *w, int64_t v) {
  if (v < 0) {
    PUTS(w, "-");
    put_u64(w, (uint64_t)0 - (uint64_t)v);
  } else {
    put_u64(w, (uint64_t)v);
  }
}

static void put_cstr(pw_trace_writer *w, const char *s) {
  put(w, s, strlen(s));
}

static void put_str(pw_trace_writer *w, const char *s) {
  PUTS(w, "\"");
  while (s && *s) {
    size_t n = 0; /* a run of characters that need no escape */
    while (s[n] && s[n] != '"' && s[n] != '\\' && (unsigned char)s[n] >= 0x20)
      n++;
    put(w, s, n);
    s += n;
    if (!*s) break;
    unsigned char c = (unsigned char)*s++;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      put(w, e, 2);
    } else {
      putf(w, "\\u%04x", c);
    }
  }
  PUTS(w, "\"");
}

/* µs with the ns as three exact decimals */
static void put_us(pw_trace_writer *w, uint64_t ns) {
  char d[4] = {'.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10), (char)('0' + ns % 10)};
  put_u64(w, ns / 1000);
  put(w, d, 4);
}

/* "ts":µs,"dur":µs, exact: ns as three decimals */
static void put_time(pw_trace_writer *w, uint64_t s, uint64_t e) {
  PUTS(w, "\"ts\":");
  put_us(w, s);
  PUTS(w, ",\"dur\":");
  put_us(w, e > s ? e - s : 0);
}

/* ,"pid":P,"tid":T, */
static void put_ids(pw_trace_writer *w, uint64_t pid, uint64_t tid) {
  PUTS(w, ",\"pid\":");
  put_u64(w, pid);
  PUTS(w, ",\"tid\":");
  put_u64(w, tid);
  PUTS(w, ",");
}

static void begin_event(pw_trace_writer *w) {
  if (w->events++) PUTS(w, ",\n");
}

void pw_trace_writer_begin(pw_trace_writer *w) {
  w->events = 0;
  PUTS(w, "{\"schemaVersion\":1,\"traceName\":\"pinwheel\",\"traceEvents\":[\n");
}

static const char *copy_kind(uint8_t k) {
  switch (k) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
    return "HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "PtoP";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
    return "HtoA";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
    return "AtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    return "AtoA";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    return "AtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    return "DtoA";
  default:
    return "Unknown";
  }
}

/* CUPTI's memory kinds (0 Unknown, 1 Pageable, 2 Pinned, 3 Device, ...): the names Kineto uses */
static const char *mem_kind(uint8_t k) {
  switch (k) {
  case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
    return "Pageable";
  case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
    return "Pinned";
  case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
  case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    return "Device";
  case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
    return "Array";
  case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
  case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
    return "Managed";
  default:
    return "Unknown";
  }
}

/* Remember a (device, stream) pair for the "M" events at the end. */
static void note_lane(pw_trace_writer *w, uint32_t dev, uint32_t stream) {
  for (int i = 0; i < w->nlanes; i++)
    if (w->lanes[i].dev == dev && w->lanes[i].stream == stream) return;
  if (w->nlanes < PW_TRACE_WRITER_LANES)
    w->lanes[w->nlanes++] = (pw_trace_writer_lane){dev, stream};
}

static void note_thread(pw_trace_writer *w, uint32_t tid) {
  for (int i = 0; i < w->nthreads; i++)
    if (w->threads[i] == tid) return;
  if (w->nthreads < PW_TRACE_WRITER_LANES) w->threads[w->nthreads++] = tid;
}

static void gpu_args(pw_trace_writer *w, uint32_t dev, uint32_t stream, uint32_t corr) {
  uint64_t app = w->app_corr ? w->app_corr(w, corr) : 0;
  PUTS(w, ",\"args\":{\"device\":");
  put_u64(w, dev);
  PUTS(w, ",\"stream\":");
  put_u64(w, stream);
  PUTS(w, ",\"correlation\":");
  if (app) { /* issued by pinwheel for the program's call app: joined to that call */
    put_u64(w, app);
    PUTS(w, ",\"pinwheel\":1,\"cupti_correlation\":");
    put_u64(w, corr);
  } else {
    put_u64(w, corr);
    if (w->is_pinwheel_corr && w->is_pinwheel_corr(w, corr)) PUTS(w, ",\"pinwheel\":1");
  }
}

void pw_trace_writer_app_call(pw_trace_writer *w, const char *name, uint64_t start, uint64_t end,
                              uint32_t tid, uint64_t corr) {
  begin_event(w);
  PUTS(w, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":");
  put_str(w, name);
  putf(w, ",\"pid\":%u,\"tid\":%u,", w->pid, tid);
  put_time(w, start, end);
  putf(w, ",\"args\":{\"correlation\":%" PRIu64 ",\"pinwheel_staged\":1}}", corr);
  note_thread(w, tid);
}

size_t pw_trace_writer_record_size(const CUpti_Activity *rec) {
  switch (rec->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    return sizeof(CUpti_ActivityKernel10);
  case CUPTI_ACTIVITY_KIND_MEMCPY:
    return sizeof(CUpti_ActivityMemcpy6);
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
    return sizeof(CUpti_ActivityMemcpyPtoP4);
  case CUPTI_ACTIVITY_KIND_MEMSET:
    return sizeof(CUpti_ActivityMemset4);
  default:
    return 0;
  }
}

/* An NVTX range: its start is kept until its end arrives (they can come in separate buffers). */
static void marker(pw_trace_writer *w, const CUpti_ActivityMarker2 *m) {
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    int slot = -1;
    for (int i = 0; i < PW_TRACE_WRITER_MARKERS; i++)
      if (!w->marks[i].used) {
        slot = i;
        break;
      }
    if (slot < 0) return; /* more open ranges than we follow: this one is dropped */
    w->marks[slot].used = 1;
    w->marks[slot].id = m->id;
    w->marks[slot].start = m->timestamp;
    w->marks[slot].tid =
        m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
    snprintf(w->marks[slot].name, sizeof w->marks[slot].name, "%s", m->name ? m->name : "");
  } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    for (int i = 0; i < PW_TRACE_WRITER_MARKERS; i++)
      if (w->marks[i].used && w->marks[i].id == m->id) {
        w->marks[i].used = 0;
        if (w->keep && !w->keep(w, w->marks[i].start, m->timestamp)) return;
        begin_event(w);
        PUTS(w, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":");
        put_str(w, w->marks[i].name);
        putf(w, ",\"pid\":%u,\"tid\":%u,", w->pid, w->marks[i].tid);
        put_time(w, w->marks[i].start, m->timestamp);
        PUTS(w, "}");
        note_thread(w, w->marks[i].tid);
        w->marks[i].used = 0;
        return;
      }
  }
}

/* A kernel: grid and block in its args. */
static void record_kernel(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivityKernel10 *k = (const void *)rec;
  begin_event(w);
  PUTS(w, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":");
  /* demangled, as Kineto writes kernels ("void at::native::...", not "_ZN2at6native...") */
  char *readable = k->name && w->demangle ? w->demangle(w, k->name) : NULL;
  put_str(w, readable ? readable : k->name ? k->name : "kernel");
  free(readable);
  put_ids(w, k->deviceId, k->streamId);
  put_time(w, k->start, k->end);
  gpu_args(w, k->deviceId, k->streamId, k->correlationId);
  const int32_t dims[6] = {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ};
  for (int i = 0; i < 6; i++) {
    if (i % 3 == 0)
      put_cstr(w, i ? "],\"block\":[" : ",\"grid\":[");
    else
      PUTS(w, ",");
    put_i64(w, dims[i]);
  }
  PUTS(w, "]}}");
  note_lane(w, k->deviceId, k->streamId);
}

/* A copy, named as Kineto names it: "Memcpy HtoD (Pageable -> Device)". */
static void record_memcpy(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivityMemcpy6 *m = (const void *)rec;
  begin_event(w);
  PUTS(w, "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy ");
  put_cstr(w, copy_kind(m->copyKind));
  PUTS(w, " (");
  put_cstr(w, mem_kind(m->srcKind));
  PUTS(w, " -> ");
  put_cstr(w, mem_kind(m->dstKind));
  PUTS(w, ")\"");
  put_ids(w, m->deviceId, m->streamId);
  put_time(w, m->start, m->end);
  gpu_args(w, m->deviceId, m->streamId, m->correlationId);
  PUTS(w, ",\"bytes\":");
  put_u64(w, m->bytes);
  PUTS(w, "}}");
  note_lane(w, m->deviceId, m->streamId);
}

/* A peer-to-peer copy, with both devices. */
static void record_peer_copy(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivityMemcpyPtoP4 *m = (const void *)rec;
  begin_event(w);
  putf(w,
       "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy PtoP (%s -> %s)\",\"pid\":%u,"
       "\"tid\":%u,",
       mem_kind(m->srcKind), mem_kind(m->dstKind), m->deviceId, m->streamId);
  put_time(w, m->start, m->end);
  gpu_args(w, m->deviceId, m->streamId, m->correlationId);
  putf(w, ",\"bytes\":%" PRIu64 ",\"src_device\":%u,\"dst_device\":%u}}", (uint64_t)m->bytes,
       m->srcDeviceId, m->dstDeviceId);
  note_lane(w, m->deviceId, m->streamId);
}

/* A memset. */
static void record_memset(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivityMemset4 *m = (const void *)rec;
  begin_event(w);
  putf(w, "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset (%s)\",\"pid\":%u,\"tid\":%u,",
       mem_kind((uint8_t)m->memoryKind), m->deviceId, m->streamId);
  put_time(w, m->start, m->end);
  gpu_args(w, m->deviceId, m->streamId, m->correlationId);
  putf(w, ",\"bytes\":%" PRIu64 "}}", (uint64_t)m->bytes);
  note_lane(w, m->deviceId, m->streamId);
}

/* A runtime or driver call, on the host thread that made it; pinwheel's own calls marked. */
static void record_api(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivityAPI *a = (const void *)rec;
  const char *nm =
      w->api_name ? w->api_name(w, rec->kind == CUPTI_ACTIVITY_KIND_DRIVER, a->cbid) : NULL;
  begin_event(w);
  if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
    PUTS(w, "{\"ph\":\"X\",\"cat\":\"cuda_driver\",\"name\":");
  else
    PUTS(w, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":");
  if (nm)
    put_str(w, nm);
  else
    putf(w, "\"cbid %u\"", a->cbid);
  put_ids(w, a->processId, a->threadId);
  put_time(w, a->start, a->end);
  PUTS(w, ",\"args\":{\"correlation\":");
  put_u64(w, a->correlationId);
  PUTS(w, ",\"cbid\":");
  put_u64(w, a->cbid);
  if (w->is_pinwheel_corr && w->is_pinwheel_corr(w, a->correlationId)) PUTS(w, ",\"pinwheel\":1");
  if (w->is_cudnn_corr && w->is_cudnn_corr(w, a->correlationId)) PUTS(w, ",\"pinwheel_cudnn\":1");
  PUTS(w, "}}");
  note_thread(w, a->threadId);
}

/* A host synchronisation, on the process's track; pinwheel's own marked. */
static void record_sync(pw_trace_writer *w, const CUpti_Activity *rec) {
  const CUpti_ActivitySynchronization2 *s = (const void *)rec;
  static const char *const names[] = {"Unknown Sync", "Event Sync", "Stream Wait Event",
                                      "Stream Sync", "Context Sync"};
  begin_event(w);
  putf(w, "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,",
       s->type < 5 ? names[s->type] : "Sync", w->pid, w->pid);
  put_time(w, s->start, s->end);
  putf(w, ",\"args\":{\"correlation\":%u,\"stream\":%u", s->correlationId, s->streamId);
  if (w->is_pinwheel_corr && w->is_pinwheel_corr(w, s->correlationId)) PUTS(w, ",\"pinwheel\":1");
  PUTS(w, "}}");
}

void pw_trace_writer_record(pw_trace_writer *w, const CUpti_Activity *rec) {
  switch (rec->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    record_kernel(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_MEMCPY:
    record_memcpy(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
    record_peer_copy(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_MEMSET:
    record_memset(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER:
    record_api(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
    record_sync(w, rec);
    break;
  case CUPTI_ACTIVITY_KIND_MARKER:
    marker(w, (const CUpti_ActivityMarker2 *)(const void *)rec);
    break;
  default:
    break;
  }
}

void pw_trace_writer_end(pw_trace_writer *w) {
  /* names: a process per device, a thread per stream (pinwheel's side stream by name), the
   * process's threads */
  for (int i = 0; i < w->nlanes; i++) {
    uint32_t d = w->lanes[i].dev;
    int seen = 0;
    for (int k = 0; k < i; k++)
      seen |= w->lanes[k].dev == d;
    if (!seen) {
      begin_event(w);
      putf(w,
           "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":"
           "\"GPU %u\"}}",
           d, d);
    }
    int side = 0;
    for (int k = 0; k < w->nside; k++)
      side |= w->side[k].dev == d && w->side[k].stream == w->lanes[i].stream;
    begin_event(w);
    putf(w,
         "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
         "\"%sstream %u\"}}",
         d, w->lanes[i].stream, side ? "pinwheel side " : "", w->lanes[i].stream);
  }
  begin_event(w);
  putf(w,
       "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":"
       "\"host (pid %u)\"}}",
       w->pid, w->pid);
  PUTS(w, "\n],\"pinwheel\":{\"dropped_records\":");
  putf(w, "%" PRIu64, w->dropped);
  if (w->capture[0]) { /* a window of the run, not all of it */
    PUTS(w, ",\"capture\":");
    put_str(w, w->capture);
  }
  PUTS(w, "}}\n");
  w->flush(w);
}
