/* trace_writer.c — how fast the collector's writer (shim/collector/trace_json.c) turns CUPTI
 * records into JSON, on the CPU alone: records per second and MB of JSON per second.
 *
 *   bench_trace_writer [RECORDS]
 *
 * The mix is a copy-bound loop under pinwheel: per 4 MiB chunk of a staged copy, its DMA (a
 * memcpy record carrying the program's call) and the calls that issued it (cudaMemcpyAsync and
 * cudaEventRecord, each with the driver call beneath it), and a kernel with a PyTorch-length
 * name every eighth chunk.  The writer's output goes to memory; nothing is written to a file.
 * Must never: be mistaken for a test (it checks nothing but that the JSON came out).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace.h"

static size_t out_bytes;
static void sink(pw_trace_writer *w) {
  out_bytes += w->len;
  w->len = 0;
}

static const char *names(pw_trace_writer *w, int driver, uint32_t cbid) {
  (void)w, (void)cbid;
  return driver ? "cuMemcpyAsync" : "cudaMemcpyAsync";
}
static int own(pw_trace_writer *w, uint32_t corr) {
  (void)w;
  return corr & 1;
}
static uint64_t app(pw_trace_writer *w, uint32_t corr) {
  (void)w;
  return corr % 5 == 0 ? (1ull << 40) + corr : 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  static CUpti_ActivityAPI api;
  static CUpti_ActivityMemcpy6 mc;
  static CUpti_ActivityKernel10 k;
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.processId = 4242, api.threadId = 4243;
  mc.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  mc.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  mc.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  mc.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  mc.bytes = 4u << 20;
  mc.streamId = 13;
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
           "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
           "at::detail::Array<char*, 3>)";
  k.streamId = 7;
  k.gridX = 1024, k.gridY = k.gridZ = 1, k.blockX = 128, k.blockY = k.blockZ = 1;
  pw_trace_writer *w = calloc(1, sizeof *w);
  if (!w) return 1;
  w->flush = sink;
  w->pid = 4242;
  w->api_name = names;
  w->is_pinwheel_corr = own;
  w->app_corr = app;
  pw_trace_writer_begin(w);
  uint64_t t = 1700000000000000000ull;
  uint32_t corr = 1;
  double t0 = now();
  for (long i = 0; i < n;) {
    for (int j = 0; j < 4 && i < n; j++, i++) { /* two runtime calls, each with its driver call */
      api.kind = j & 1 ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
      api.cbid = 41 + (uint32_t)j;
      api.start = t, api.end = t + 2345;
      api.correlationId = corr++;
      pw_trace_writer_record(w, (const CUpti_Activity *)(const void *)&api);
      t += 3000;
    }
    if (i < n) {
      mc.start = t, mc.end = t + 170000, mc.correlationId = corr - 4;
      pw_trace_writer_record(w, (const CUpti_Activity *)(const void *)&mc);
      i++;
    }
    if (i < n && corr % 40 == 1) {
      k.start = t, k.end = t + 81234, k.correlationId = corr++;
      pw_trace_writer_record(w, (const CUpti_Activity *)(const void *)&k);
      i++;
    }
  }
  pw_trace_writer_end(w);
  double s = now() - t0;
  printf("%ld records in %.3f s: %.2f M records/s, %.1f MB/s of JSON (%.0f bytes a record)\n", n, s,
         n / s / 1e6, out_bytes / s / 1e6, (double)out_bytes / n);
  free(w);
  return out_bytes ? 0 : 1;
}
