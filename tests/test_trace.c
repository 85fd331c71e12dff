/* test_trace.c — the CUPTI collector's writer on synthetic activity records (the CUDA toolkit's
 * CUPTI headers, no GPU): record → Chrome trace JSON → the analyzer's reader, figures exact;
 * records out of order; the writer flushed mid-document many times; NVTX ranges whose start and
 * end come apart; pinwheel's calls marked and its side stream named; the path template. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "an.h"
#include "pw.h"
#include "pw_driver_calls.h"
#include "trace.h"

#define US 1000LL

/* the writer's output, in memory */
static char *out;
static size_t out_len, out_cap;
static int flushes;

static void to_memory(pw_trace_writer *w) {
  if (out_len + w->len + 1 > out_cap) {
    out_cap = (out_len + w->len + 1) * 2;
    out = realloc(out, out_cap);
  }
  memcpy(out + out_len, w->buf, w->len);
  out_len += w->len;
  out[out_len] = 0;
  w->len = 0;
  flushes++;
}

static const char *names(pw_trace_writer *w, int driver, uint32_t cbid) {
  return cbid == 41    ? "cudaMemcpyAsync"
         : cbid == 211 ? "cudaLaunchKernel"
         : cbid == 131 ? "cudaEventSynchronize"
                       : NULL;
}
static int own(pw_trace_writer *w, uint32_t corr) {
  return corr == 77;
}

static pw_trace_writer *writer(void) {
  pw_trace_writer *w = calloc(1, sizeof *w);
  w->flush = to_memory;
  w->pid = 4242;
  w->api_name = names;
  w->is_pinwheel_corr = own;
  out_len = 0;
  flushes = 0;
  pw_trace_writer_begin(w);
  return w;
}

static void api(pw_trace_writer *w, uint32_t cbid, uint64_t s, uint64_t e, uint32_t tid,
                uint32_t corr) {
  CUpti_ActivityAPI a;
  memset(&a, 0, sizeof a);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = cbid;
  a.start = s, a.end = e;
  a.processId = 4242, a.threadId = tid;
  a.correlationId = corr;
  pw_trace_writer_record(w, (CUpti_Activity *)&a);
}

static void kernel(pw_trace_writer *w, const char *name, uint64_t s, uint64_t e, uint32_t stream,
                   uint32_t corr) {
  CUpti_ActivityKernel10 k;
  memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = s, k.end = e;
  k.deviceId = 0, k.streamId = stream, k.correlationId = corr;
  k.gridX = 2, k.gridY = k.gridZ = 1, k.blockX = 128, k.blockY = k.blockZ = 1;
  pw_trace_writer_record(w, (CUpti_Activity *)&k);
}

static void memcpy_rec(pw_trace_writer *w, uint8_t kind, uint8_t src, uint8_t dst, uint64_t bytes,
                       uint64_t s, uint64_t e, uint32_t stream, uint32_t corr) {
  CUpti_ActivityMemcpy6 m;
  memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = kind, m.srcKind = src, m.dstKind = dst;
  m.bytes = bytes;
  m.start = s, m.end = e;
  m.deviceId = 0, m.streamId = stream, m.correlationId = corr;
  pw_trace_writer_record(w, (CUpti_Activity *)&m);
}

static void sync_rec(pw_trace_writer *w, uint64_t s, uint64_t e, uint32_t corr) {
  CUpti_ActivitySynchronization2 y;
  memset(&y, 0, sizeof y);
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  y.start = s, y.end = e;
  y.correlationId = corr;
  pw_trace_writer_record(w, (CUpti_Activity *)&y);
}

static void marker(pw_trace_writer *w, int start, uint32_t id, uint64_t ts, const char *name) {
  CUpti_ActivityMarker2 m;
  memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = start ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
  m.id = id;
  m.timestamp = ts;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.threadId = 7;
  m.name = start ? name : NULL;
  pw_trace_writer_record(w, (CUpti_Activity *)&m);
}

/* The files save() wrote, removed when the test program exits (they once piled up in /tmp, four
 * more at every run). */
static char saved[16][128];
static int nsaved;
static void remove_saved(void) {
  for (int i = 0; i < nsaved; i++)
    unlink(saved[i]);
}

static char *save(const char *tag) {
  static char path[128];
  snprintf(path, sizeof path, "/tmp/pwtest-trace-%s-%d.json", tag, (int)getpid());
  int known = 0;
  for (int i = 0; i < nsaved && !known; i++)
    known = !strcmp(saved[i], path);
  if (!known && nsaved < 16) {
    if (!nsaved) atexit(remove_saved);
    strcpy(saved[nsaved++], path);
  }
  FILE *f = fopen(path, "w");
  fwrite(out, 1, out_len, f);
  fclose(f);
  return path;
}

/* One step (an NVTX range "ProfilerStep#1" from 0 to 500 us): a pageable H2D [100,250) us whose
 * call takes 160 us, a kernel [200,400) on another stream: 50 of the copy's 150 us hidden. */
static void test_records_read_back(void **state) {
  pw_trace_writer *w = writer();
  const uint64_t t0 = 1700000000000000000ull; /* epoch ns, as CUPTI gives */
  marker(w, 1, 9, t0, "ProfilerStep#1");
  /* out of order: the kernel and the copy before their calls */
  kernel(w, "gemm<\"x\">", t0 + 200 * US, t0 + 400 * US, 7, 2);
  memcpy_rec(w, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
             CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1 << 20, t0 + 100 * US, t0 + 250 * US, 13, 1);
  api(w, 41, t0 + 90 * US, t0 + 250 * US, 7, 1);
  api(w, 211, t0 + 260 * US, t0 + 265 * US, 8, 2); /* launched from another thread */
  api(w, 41, t0 + 270 * US, t0 + 280 * US, 7, 77); /* a call pinwheel made */
  /* an event sync pinwheel made (waiting for staging space), then one of the program's */
  api(w, 131, t0 + 281 * US, t0 + 290 * US, 7, 77);
  sync_rec(w, t0 + 282 * US, t0 + 289 * US, 77);
  api(w, 131, t0 + 300 * US, t0 + 320 * US, 7, 5);
  sync_rec(w, t0 + 301 * US, t0 + 319 * US, 5);
  marker(w, 0, 9, t0 + 500 * US, NULL);
  w->side[w->nside++] = (pw_trace_writer_lane){0, 13};
  pw_trace_writer_end(w);
  free(w);
  if (!strstr(out, "\"name\":\"Memcpy HtoD (Pageable -> Device)\"")) fail_msg("%s", out);
  assert_non_null(strstr(out, "\"name\":\"cudaMemcpyAsync\""));
  assert_non_null(strstr(out, "gemm<\\\"x\\\">"));
  assert_non_null(strstr(out, "\"correlation\":77,\"cbid\":41,\"pinwheel\":1"));
  assert_non_null(strstr(out, "\"name\":\"Event Sync\""));
  assert_non_null(strstr(out, "\"correlation\":77,\"stream\":0,\"pinwheel\":1}"));
  assert_non_null(strstr(out, "\"correlation\":5,\"stream\":0}"));
  assert_non_null(strstr(out, "\"name\":\"pinwheel side stream 13\""));
  assert_non_null(strstr(out, "\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\""));
  char err[512];
  an_trace *t = an_load(save("rb"), NULL, err, sizeof err);
  if (!t) fail_msg("%s\n%s", err, out);
  an_report *r = an_analyze(t, -1, NULL);
  assert_int_equal(r->ndevs, 1);
  const an_dev *d = &r->devs[0];
  assert_int_equal(d->h2d.copies, 1);
  assert_int_equal(d->h2d.bytes, 1 << 20);
  assert_true(d->h2d.time == 150 * US && d->h2d.hidden == 50 * US);
  assert_true(d->pg_copies == 1 && d->pg_host == 160 * US);
  assert_int_equal(r->nsteps, 1);
  assert_int_equal(r->steps[0].num, 1);
  assert_true(r->steps[0].devs[0].has && r->steps[0].devs[0].kernels == 1);
  assert_true(r->steps[0].devs[0].gpu == 300 * US); /* [100, 400) */
  /* the program's sync only: pinwheel's own is part of its staged copy */
  assert_int_equal(r->sync_calls, 1);
  assert_true(r->sync_time == 20 * US);
  an_report_free(r);
  an_free(t);
}

/* Kernel names as Kineto writes them: demangled when the program has libstdc++ (a program whose
 * kernels have C++ names does; here it is loaded as such a program has it), a name that only
 * looks mangled kept as it is; and the analyzer names the trace's source. */
static void test_kernel_names_demangled(void **state) {
  void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  if (!cxx) skip();
  static const char *mangled =
      "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_13BinaryFunctorIfffNS0_15binary_"
      "internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_";
  pw_trace_writer *w = writer();
  w->demangle = pw_trace_demangle;
  for (int i = 0; i < 3; i++) /* the second and third from the collector's cache */
    kernel(w, mangled, 1000000 + (uint64_t)i * 1000, 1000500 + (uint64_t)i * 1000, 7,
           (uint32_t)i + 1);
  kernel(w, "_Znot_a_name", 1004000, 1004500, 7, 9);
  pw_trace_writer_end(w);
  free(w);
  assert_null(strstr(out, mangled));
  const char *readable = "\"name\":\"void at::native::vectorized_elementwise_kernel<8, "
                         "at::native::BinaryFunctor<float, float, float, "
                         "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> "
                         ">(int, ";
  if (!strstr(out, readable)) fail_msg("%s", out);
  assert_non_null(strstr(out, "\"name\":\"_Znot_a_name\""));
  char err[512];
  an_trace *t = an_load(save("demangled"), NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  assert_string_equal(t->source, "pinwheel's collector");
  an_free(t);
  dlclose(cxx);
}

/* Thousands of events through a 64 KiB buffer: many flushes mid-document, one valid JSON. */
static void test_many_flushes_one_document(void **state) {
  pw_trace_writer *w = writer();
  for (int i = 0; i < 5000; i++) {
    kernel(w, "k", 1000000 + (uint64_t)i * 1000, 1000000 + (uint64_t)i * 1000 + 500, 7,
           (uint32_t)i + 1);
    api(w, 211, 999000 + (uint64_t)i * 1000, 999100 + (uint64_t)i * 1000, 7, (uint32_t)i + 1);
  }
  pw_trace_writer_end(w);
  assert_true(flushes > 10);
  assert_int_equal(w->events, 10000 + 3); /* and the M events: GPU 0, stream 7, host */
  free(w);
  char err[512];
  an_trace *t = an_load(save("many"), NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  assert_int_equal(t->nops, 5000);
  assert_int_equal(t->ncalls, 5000);
  an_free(t);
}

/* An NVTX end with no start (it began before tracing) is dropped; unknown kinds are skipped. */
static void test_unpaired_and_unknown(void **state) {
  pw_trace_writer *w = writer();
  marker(w, 0, 5, 1000, NULL);
  CUpti_Activity other = {.kind = CUPTI_ACTIVITY_KIND_OVERHEAD};
  pw_trace_writer_record(w, &other);
  api(w, 999, 1000, 2000, 3, 4); /* a cbid with no name */
  pw_trace_writer_end(w);
  free(w);
  assert_null(strstr(out, "user_annotation"));
  assert_non_null(strstr(out, "\"name\":\"cbid 999\""));
  char err[512];
  an_trace *t = an_load(save("unk"), NULL, err, sizeof err);
  assert_non_null(t);
  an_free(t);
}

/* A copy pinwheel staged, as the collector writes it: the program's call (written from the
 * shim's timing, correlation 2^40) and the operations issued for it, which carry that id and the
 * mark.  Without a ring (DMAs on the program's stream, no copy after them) it is still one
 * staged copy, and the step joins it through the program's call. */
static uint64_t app_map(pw_trace_writer *w, uint32_t corr) {
  return corr >= 10 && corr < 20 ? 1ull << 40 : 0;
}

static void test_staged_copy_carries_program_call(void **state) {
  pw_trace_writer *w = writer();
  w->app_corr = app_map;
  const uint64_t t0 = 1000000000;
  marker(w, 1, 3, t0, "ProfilerStep#4");
  pw_trace_writer_app_call(w, "cudaMemcpyAsync", t0 + 10 * US, t0 + 90 * US, 7, 1ull << 40);
  for (int i = 0; i < 3; i++) { /* pinwheel's own calls and their DMAs on the caller's stream */
    api(w, 41, t0 + (20 + 10 * i) * US, t0 + (21 + 10 * i) * US, 7, 10 + i);
    memcpy_rec(w, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4 << 20, t0 + (30 + 30 * i) * US,
               t0 + (55 + 30 * i) * US, 7, 10 + i);
  }
  marker(w, 0, 3, t0 + 200 * US, NULL);
  pw_trace_writer_end(w);
  free(w);
  assert_non_null(
      strstr(out, "\"correlation\":1099511627776,\"pinwheel\":1,\"cupti_correlation\":10"));
  assert_non_null(strstr(out, "\"correlation\":1099511627776,\"pinwheel_staged\":1"));
  char err[512];
  an_trace *t = an_load(save("staged"), NULL, err, sizeof err);
  if (!t) fail_msg("%s", err);
  an_report *r = an_analyze(t, -1, NULL);
  assert_int_equal(r->pw_h2d, 1);
  assert_int_equal(r->pw_marked, 1);
  assert_int_equal(r->pw_h2d_bytes, 12u << 20);
  assert_int_equal(r->devs[0].h2d.copies, 1);
  assert_int_equal(r->nsteps, 1);
  assert_int_equal(r->steps[0].devs[0].h2d.copies, 1);
  an_report_free(r);
  an_free(t);
}

/* The driver calls whose records the collector keeps (pw_driver_calls.h; the rest cost the program
 * time, and the runtime makes many of them): among all the calls CUPTI's header names, every call
 * the analyzer classifies (launches, copies, syncs: an_api_of) or groups by name (events), the
 * calls that do work, and none of the getters, setters and attribute queries. */
static void test_driver_calls_kept(void **state) {
  (void)state;
  FILE *f = fopen(PW_CUPTI_DRIVER_CBID_H, "r");
  assert_non_null(f);
  char line[512];
  int names = 0, kept = 0;
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "CUPTI_DRIVER_TRACE_CBID_");
    if (!p) continue;
    p += strlen("CUPTI_DRIVER_TRACE_CBID_");
    char nm[128];
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (n == 0 || n >= sizeof nm || strncmp(p, "cu", 2)) continue; /* INVALID, SIZE, ... */
    memcpy(nm, p, n);
    nm[n] = 0;
    names++;
    int k = pw_driver_call_recorded(nm);
    kept += k;
    /* what the report reads of a call: launches, copies, syncs (an_api_of), events */
    if ((an_api_of(nm, n) != AN_API_OTHER || !strncmp(nm, "cuEvent", 7)) && !k)
      fail_msg("the report reads %s, the collector leaves it out", nm);
  }
  fclose(f);
  assert_true(names > 500);
  assert_true(kept > 50 && kept < names / 2);
  static const char *const in[] = {"cuLaunchKernel",
                                   "cuLaunchKernelEx_ptsz",
                                   "cuGraphLaunch",
                                   "cuMemcpyHtoDAsync_v2",
                                   "cuMemcpy",
                                   "cuMemsetD32Async",
                                   "cuStreamSynchronize",
                                   "cuCtxSynchronize",
                                   "cuEventSynchronize",
                                   "cuEventQuery",
                                   "cuStreamWaitEvent",
                                   "cuStreamWaitValue32",
                                   "cuMemHostAlloc",
                                   "cuMemAllocHost_v2",
                                   "cuMemFreeHost",
                                   "cuMemAlloc_v2",
                                   "cuProfilerStart",
                                   "cuModuleLoadData",
                                   "cuLibraryLoadData",
                                   "cuLinkComplete",
                                   "cuMemMap",
                                   "cuMemCreate",
                                   "cuCtxRecordEvent",
                                   "cuStreamAddCallback",
                                   "cuDevicePrimaryCtxRetain",
                                   "cuGraphInstantiateWithFlags"};
  static const char *const left[] = {"cuCtxGetCurrent",
                                     "cuCtxSetCurrent",
                                     "cuCtxPushCurrent_v2",
                                     "cuPointerGetAttribute",
                                     "cuPointerGetAttributes",
                                     "cuStreamGetCtx",
                                     "cuStreamIsCapturing",
                                     "cuFuncGetAttribute",
                                     "cuModuleGetFunction",
                                     "cuLibraryGetKernel",
                                     "cuKernelGetName",
                                     "cuDeviceGetAttribute",
                                     "cuGetProcAddress_v2",
                                     "cuMemHostGetDevicePointer",
                                     "cuMemHostGetFlags",
                                     "cuStreamQuery",
                                     "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                     "cuDevicePrimaryCtxGetState",
                                     "cuMemGetAddressRange_v2"};
  for (size_t i = 0; i < sizeof in / sizeof *in; i++)
    if (!pw_driver_call_recorded(in[i])) fail_msg("%s left out", in[i]);
  for (size_t i = 0; i < sizeof left / sizeof *left; i++)
    if (pw_driver_call_recorded(left[i])) fail_msg("%s kept", left[i]);
  assert_false(pw_driver_call_recorded(NULL));
}

/* The driver's syncs and copies count as the runtime's do (JAX, numba and CuPy call the driver):
 * the host syncs, the sync share and the what-if see them. */
static void test_driver_api_classes(void **state) {
  (void)state;
  static const struct {
    const char *name;
    uint8_t api;
  } c[] = {{"cuStreamSynchronize", AN_API_STREAM_SYNC},
           {"cuStreamSynchronize_ptsz", AN_API_STREAM_SYNC},
           {"cuCtxSynchronize", AN_API_DEVICE_SYNC},
           {"cuCtxSynchronize_v2", AN_API_DEVICE_SYNC},
           {"cuEventSynchronize", AN_API_EVENT_SYNC},
           {"cuMemcpyHtoDAsync_v2", AN_API_MEMCPY},
           {"cuMemcpyHtoDAsync_v2_ptsz", AN_API_MEMCPY},
           {"cuMemcpyDtoH_v2", AN_API_MEMCPY},
           {"cuMemcpyAsync", AN_API_MEMCPY},
           {"cuMemcpy", AN_API_MEMCPY},
           {"cudaMemcpyAsync", AN_API_MEMCPY},
           {"cuMemcpy2D_v2", AN_API_OTHER}, /* as cudaMemcpy2D */
           {"cuMemcpyHtoDAsyncX", AN_API_OTHER},
           {"cuStreamSynchronizer", AN_API_OTHER},
           {"cuStreamQuery", AN_API_OTHER},
           {"cuLaunchKernel", AN_API_LAUNCH}};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    if (an_api_of(c[i].name, strlen(c[i].name)) != c[i].api)
      fail_msg("%s: %d, not %d", c[i].name, an_api_of(c[i].name, strlen(c[i].name)), c[i].api);
}

static void test_path_template(void **state) {
  char p[64];
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  assert_int_equal(pw_trace_path("t-%r-%p.json", p, sizeof p), 0);
  char want[64];
  snprintf(want, sizeof want, "t-0-%d.json", (int)getpid());
  assert_string_equal(p, want);
  setenv("LOCAL_RANK", "3", 1);
  assert_int_equal(pw_trace_path("t%r", p, sizeof p), 0);
  assert_string_equal(p, "t3");
  setenv("RANK", "11", 1); /* RANK first */
  assert_int_equal(pw_trace_path("t%r_100%%", p, sizeof p), 0);
  assert_string_equal(p, "t11_100%");
  char small[8];
  assert_int_equal(pw_trace_path("abcdefghij", small, sizeof small), -1); /* too long */
  /* ranks of one job with a template naming no process: each its own file, not one for all */
  assert_int_equal(pw_trace_path("out/trace.json", p, sizeof p), 0);
  assert_string_equal(p, "out/trace-rank11.json");
  assert_int_equal(pw_trace_path("t.json.gz", p, sizeof p), 0);
  assert_string_equal(p, "t-rank11.json.gz");
  assert_int_equal(pw_trace_path("dir.d/trace", p, sizeof p), 0);
  assert_string_equal(p, "dir.d/trace-rank11");
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  assert_int_equal(pw_trace_path("out/trace.json", p, sizeof p), 0);
  assert_string_equal(p, "out/trace.json"); /* one process: the name as given */
}

/* The capture window's judgement (window.c), on a window made by hand: a time range, spans (one
 * still open), what falls on each boundary. */
static void test_window_keep(void **state) {
  (void)state;
  pw_window w;
  memset(&w, 0, sizeof w);
  assert_true(pw_window_keep(&w, 5)); /* no window: everything */
  w.windowed = 1, w.lo = 100, w.hi = 200;
  assert_false(pw_window_keep(&w, 99));
  assert_true(pw_window_keep(&w, 100));
  assert_true(pw_window_keep(&w, 199));
  assert_false(pw_window_keep(&w, 200));
  w.use_spans = 1, w.nspans = 2, w.open = 1;
  w.on[0] = 110, w.off[0] = 120, w.on[1] = 150, w.off[1] = UINT64_MAX;
  assert_false(pw_window_keep(&w, 105));
  assert_true(pw_window_keep(&w, 110));
  assert_false(pw_window_keep(&w, 120));
  assert_false(pw_window_keep(&w, 149));
  assert_true(pw_window_keep(&w, 150));
  assert_false(pw_window_keep(&w, 250)); /* past the duration, though the span is open */
  w.nspans = 0;
  assert_false(pw_window_keep(&w, 150)); /* spans asked for, none yet: nothing */
}

/* The loop finder (window.c) on sequences given by hand, with PINWHEEL_TRACE_STEPS: start-up
 * operations, then iterations of (an input copy, three kernels, a result copy) on one stream and
 * a kernel on another; the window opens at the 4th input copy and closes at the 7th.  Without an
 * input copy, a kernel anchors the loop one period later (at iteration 4, not 3).  (No CUPTI here:
 * the spans' times are 0, so the test follows their number and whether the last is open.) */
static void feed_loop(int iters, int with_copy, int *opened_at, int *closed_at) {
  void *s1 = (void *)0x10, *s2 = (void *)0x20;
  for (uint64_t i = 0; i < 7; i++) /* start-up: copies of other sizes, a warm-up kernel */
    pw_trace_step_op(i & 1 ? 0x777 : (1000 + i) << 3 | 1, s1, !(i & 1));
  *opened_at = *closed_at = 0;
  for (int it = 1; it <= iters; it++) {
    if (with_copy) pw_trace_step_op(4096u << 3 | 1, s1, 1);
    pw_trace_step_op(0xa1, s1, 0);
    pw_trace_step_op(0xa2, s2, 0);
    pw_trace_step_op(0xa3, s1, 0);
    pw_trace_step_op(0xa4, s1, 0);
    pw_trace_step_op(64u << 3 | 2, s1, 0);
    pw_window w;
    pw_trace_window_get(&w);
    if (w.nspans && !*opened_at) *opened_at = it;
    if (w.nspans && !w.open && !*closed_at) *closed_at = it;
  }
}

static void test_window_steps(void **state) {
  (void)state;
  char what[128];
  int opened, closed;
  setenv("PINWHEEL_TRACE_STEPS", "4-6", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  assert_string_equal(what, "iterations 4-6");
  assert_true(atomic_load(&pw_trace_watch));
  feed_loop(10, 1, &opened, &closed);
  assert_int_equal(opened, 4);
  assert_int_equal(closed, 7);                /* by the copy that begins iteration 7 */
  assert_false(atomic_load(&pw_trace_watch)); /* done: the front ends stop reporting */
  /* no input copy: the first kernel is confirmed in iteration 3, taken at its 4th occurrence */
  setenv("PINWHEEL_TRACE_STEPS", "3-5", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  feed_loop(10, 0, &opened, &closed);
  assert_int_equal(opened, 4); /* later than asked: a warning says so */
  assert_int_equal(closed, 6);
  unsetenv("PINWHEEL_TRACE_STEPS");
  pw_options_reset();
}

/* The loop of samples/train_copybound.py (naive) as the front ends reported it on an H200 (read
 * from the trace of the GPU suite's trace_steps_off test): per iteration, on the
 * default stream, x.to('cuda') (256 MiB H2D) and y.to('cuda') (128 KiB H2D), then autocast's three
 * casts in a row (x, w1, b1: one kernel, one call site), a GEMM, GELU, two more casts, a GEMM, the
 * loss, the backward (the autograd thread, same stream: casts, GEMMs, reductions, copies two in a
 * row) and the optimizer's foreach kernel; a kernel on a second stream.  The first iteration
 * differs (cuBLAS's lazy choice: other GEMM kernels through other entry points, a split-K
 * reduction).  The bug: three casts in a row looked like a loop of period 1 in iteration 1, taken
 * at the fourth cast as iteration 4, so --trace-steps 5-9 held the end of iteration 1 and the start
 * of iteration 2.  The window must open at the 256 MiB copy that begins iteration A and close at
 * the one that begins B+1. */
enum { T_X = 1, T_Y, T_CAST, T_OTHER };
static void torch_op(uint64_t sig, int kind, int it, int *opened, int *closed, int *op) {
  void *s0 = (void *)0;
  pw_trace_step_op(sig, s0, kind == T_X || kind == T_Y);
  pw_window w;
  pw_trace_window_get(&w);
  int here = it * 1000 + *op;
  if (w.nspans && !*opened) *opened = here;
  if (w.nspans && !w.open && !*closed) *closed = here;
  ++*op;
}

static void feed_torch(int iters, int odd_first, int *opened, int *closed) {
  const uint64_t x = 268435456ull << 3 | 1, y = 131072ull << 3 | 1, cast = 0xc457, gelu = 0x6e1,
                 gemm = 0x9e77, gemm_ex = 0xe7e7, red = 0x4ed, dcopy = 0xdc0, opt = 0x0f7;
  *opened = *closed = 0;
  int op = 0;
  for (uint64_t i = 0; i < 4; i++) /* model.cuda(): the weights in, sizes of their own */
    torch_op((4096ull * (i + 1) + 7) << 3 | 1, T_X, 0, opened, closed, &op);
  for (int it = 1; it <= iters; it++) {
    op = 0;
    int odd = odd_first && it == 1;
    torch_op(x, T_X, it, opened, closed, &op);
    torch_op(y, T_Y, it, opened, closed, &op);
    for (int c = 0; c < 3; c++)
      torch_op(cast, T_CAST, it, opened, closed, &op);
    torch_op(odd ? 0xc07 : gemm_ex, T_OTHER, it, opened, closed, &op);
    torch_op(gelu, T_OTHER, it, opened, closed, &op);
    torch_op(cast, T_CAST, it, opened, closed, &op);
    torch_op(cast, T_CAST, it, opened, closed, &op);
    torch_op(odd ? 0xc08 : gemm_ex + 1, T_OTHER, it, opened, closed, &op);
    if (odd) torch_op(0x5b1, T_OTHER, it, opened, closed, &op); /* split-K reduction */
    for (uint64_t k = 0; k < 4; k++)                            /* softmax, copy, nll, fill */
      torch_op(0x1055 + k, T_OTHER, it, opened, closed, &op);
    torch_op(0xf111, T_OTHER, it, opened, closed, &op); /* backward: fill, nll, a cast */
    torch_op(0x2055, T_OTHER, it, opened, closed, &op);
    torch_op(cast, T_CAST, it, opened, closed, &op);
    torch_op(gemm, T_OTHER, it, opened, closed, &op);
    torch_op(odd ? 0xc09 : gemm + 1, T_OTHER, it, opened, closed, &op);
    torch_op(red, T_OTHER, it, opened, closed, &op);
    torch_op(dcopy, T_OTHER, it, opened, closed, &op);
    torch_op(dcopy, T_OTHER, it, opened, closed, &op);
    torch_op(gelu + 1, T_OTHER, it, opened, closed, &op);
    torch_op(gemm + 2, T_OTHER, it, opened, closed, &op);
    torch_op(red, T_OTHER, it, opened, closed, &op);
    torch_op(dcopy, T_OTHER, it, opened, closed, &op);
    torch_op(dcopy, T_OTHER, it, opened, closed, &op);
    pw_trace_step_op(0x5e2, (void *)0x20, 0); /* another stream's kernel */
    torch_op(opt, T_OTHER, it, opened, closed, &op);
  }
}

static void test_window_steps_torch(void **state) {
  (void)state;
  char what[128];
  int opened, closed;
  /* first iteration unlike the rest: iterations 2, 3, 4 recognise the loop at the 4th copy */
  setenv("PINWHEEL_TRACE_STEPS", "5-9", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  feed_torch(12, 1, &opened, &closed);
  assert_int_equal(opened, 5 * 1000);  /* at iteration 5's x copy, its first op */
  assert_int_equal(closed, 10 * 1000); /* at iteration 10's */
  assert_false(atomic_load(&pw_trace_watch));
  /* 4-4: the iteration of recognition itself, kept whole */
  setenv("PINWHEEL_TRACE_STEPS", "4-4", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  feed_torch(12, 1, &opened, &closed);
  assert_int_equal(opened, 4 * 1000);
  assert_int_equal(closed, 5 * 1000);
  /* every iteration alike: recognised at iteration 3 */
  setenv("PINWHEEL_TRACE_STEPS", "3-7", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  feed_torch(12, 0, &opened, &closed);
  assert_int_equal(opened, 3 * 1000);
  assert_int_equal(closed, 8 * 1000);
  unsetenv("PINWHEEL_TRACE_STEPS");
  pw_options_reset();
}

/* No loop: runs of one kernel (three, four, five in a row), the same few kernels in ever other
 * orders, copies of ever new sizes: no iteration is ever found, the window never opens. */
static void test_window_steps_no_loop(void **state) {
  (void)state;
  char what[128];
  setenv("PINWHEEL_TRACE_STEPS", "3-5", 1);
  pw_options_reset();
  pw_trace_window_init(0, what, sizeof what);
  unsigned r = 7;
  for (int n = 0; n < 3000; n++) {
    r = r * 1103515245u + 12345u;
    int run = 3 + (int)(r >> 16) % 3;
    for (int k = 0; k < run; k++)
      pw_trace_step_op(0xaa00 + (r >> 20) % 8, (void *)0, 0);
    pw_trace_step_op((uint64_t)(n + 1) << 3 | 1, (void *)0, 1);
  }
  pw_window w;
  pw_trace_window_get(&w);
  assert_int_equal(w.nspans, 0);
  unsetenv("PINWHEEL_TRACE_STEPS");
  pw_options_reset();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_records_read_back),
      cmocka_unit_test(test_kernel_names_demangled),
      cmocka_unit_test(test_many_flushes_one_document),
      cmocka_unit_test(test_unpaired_and_unknown),
      cmocka_unit_test(test_staged_copy_carries_program_call),
      cmocka_unit_test(test_path_template),
      cmocka_unit_test(test_driver_calls_kept),
      cmocka_unit_test(test_driver_api_classes),
      cmocka_unit_test(test_window_keep),
      cmocka_unit_test(test_window_steps),
      cmocka_unit_test(test_window_steps_torch),
      cmocka_unit_test(test_window_steps_no_loop),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(out);
  return rc;
}
