/* an_out_chrome.c — `pinwheel export --format chrome`: Chrome trace JSON that Perfetto opens and
 * that the analyzer reads back to the same figures.
 *
 * Owns the layout: one process per device, one thread per stream (Kineto's form: pid = device,
 * tid = stream, names by "M" events); the step ranges as annotations on a "steps" track of every
 * device; the runtime calls on one host process, one track per host thread, under their own
 * names; launch -> operation flows ("s"/"f" events, id = correlation) where a call and its
 * operation are both present.
 * Must never: compute a figure (it writes the trace, no report: each operation and call as the
 * model holds it, through the model's queries); let a name from a trace through unescaped.
 */
#define _GNU_SOURCE
#include "an_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* "ts":µs,"dur":µs with the ns as exact decimals */
static void ts_dur(FILE *f, int64_t s, int64_t e) {
  int64_t d = e - s;
  fprintf(f, "\"ts\":%s%lld.%03lld,\"dur\":%lld.%03lld", s < 0 ? "-" : "",
          (long long)(llabs(s) / 1000), (long long)(llabs(s) % 1000), (long long)(d / 1000),
          (long long)(d % 1000));
}
static void ts(FILE *f, int64_t s) {
  fprintf(f, "\"ts\":%s%lld.%03lld", s < 0 ? "-" : "", (long long)(llabs(s) / 1000),
          (long long)(llabs(s) % 1000));
}

static int cmp_int(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  return (a > b) - (a < b);
}

/* Lanes: a process per device, a thread per stream (and a steps track), each named once.
 * Returns the devices, sorted; *first: no event written yet. */
static int *gpu_lanes(FILE *f, const an_trace *t, size_t *ndev, int *first) {
  size_t m;
  an_lane *lanes = an_lanes(t, &m);
  for (size_t i = 0; i < m; i++) {
    if (i == 0 || lanes[i].dev != lanes[i - 1].dev) {
      fprintf(f,
              "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
              "\"GPU %d\"}}",
              *first ? "" : ",\n", lanes[i].dev, lanes[i].dev);
      *first = 0;
      if (t->nsteps)
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":-1,\"args\":{"
                "\"name\":\"steps\"}}",
                lanes[i].dev);
    }
    fprintf(f,
            ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":"
            "\"stream %d\"}}",
            lanes[i].dev, lanes[i].stream, lanes[i].stream);
  }
  int *devs = malloc((m + 1) * sizeof *devs);
  *ndev = 0;
  for (size_t i = 0; i < m; i++)
    if (!*ndev || devs[*ndev - 1] != lanes[i].dev) devs[(*ndev)++] = lanes[i].dev;
  free(lanes);
  return devs;
}

/* The GPU operations, each with the end of its launch flow where its call is present. */
static void gpu_ops(FILE *f, const an_trace *t, int *first) {
  for (size_t i = 0; i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", *first ? "" : ",\n",
            an_op_cat[o->type < AN_OP_N ? o->type : AN_KERNEL]);
    *first = 0;
    if (o->type == AN_MEMCPY) /* Kineto's form, so the kinds survive a round trip */
      fprintf(f, "\"Memcpy %s (%s -> %s)\"", an_ck_trace[o->ckind], an_mk_trace[o->srck],
              an_mk_trace[o->dstk]);
    else
      an_json_string(f, an_name(t, o->name));
    fprintf(f, ",\"pid\":%d,\"tid\":%d,", o->dev, o->stream);
    ts_dur(f, o->s, o->e);
    fprintf(f, ",\"args\":{\"device\":%d,\"stream\":%d", o->dev, o->stream);
    if (o->type == AN_MEMCPY || o->type == AN_MEMSET) fprintf(f, ",\"bytes\":%" PRIu64, o->bytes);
    if (o->corr >= 0) fprintf(f, ",\"correlation\":%lld", (long long)o->corr);
    if (o->pw) fprintf(f, ",\"pinwheel\":1");
    fprintf(f, "}}");
    if (o->corr >= 0 && an_call_of(t, o->corr)) { /* the flow's end: binds to this slice */
      fprintf(f,
              ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%lld,"
              "\"pid\":%d,\"tid\":%d,",
              (long long)o->corr, o->dev, o->stream);
      ts(f, o->s);
      fputc('}', f);
    }
  }
}

/* Step ranges on every device's steps track (the CPU range: where its work was launched). */
static void step_ranges(FILE *f, const an_trace *t, const int *devs, size_t ndev) {
  for (size_t d = 0; d < ndev; d++)
    for (size_t i = 0; i < t->nsteps; i++) {
      const an_step *st = &t->steps[i];
      fprintf(f,
              ",\n{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
              "\"pid\":%d,\"tid\":-1,",
              st->num, devs[d]);
      ts_dur(f, st->s, st->e);
      fputc('}', f);
    }
}

/* The runtime calls: one host process, one track per thread, their own names; each starts the
 * flow to its operation. */
static void host_calls(FILE *f, const an_trace *t, int *first) {
  if (t->ncalls) {
    fprintf(f,
            "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
            "\"host\"}}",
            *first ? "" : ",\n", AN_HOST_PID);
    *first = 0;
    int *tids = malloc((t->ncalls + 1) * sizeof *tids);
    for (size_t i = 0; i < t->ncalls; i++)
      tids[i] = t->calls[i].tid;
    qsort(tids, t->ncalls, sizeof *tids, cmp_int);
    for (size_t i = 0; i < t->ncalls; i++)
      if (i == 0 || tids[i] != tids[i - 1])
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{"
                "\"name\":\"thread %d\"}}",
                AN_HOST_PID, tids[i], tids[i]);
    free(tids);
  }
  for (size_t i = 0; i < t->ncalls; i++) {
    const an_call *c = &t->calls[i];
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":");
    an_json_string(f, c->name ? an_name(t, c->name) : an_api_name[c->api]);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,", AN_HOST_PID, c->tid);
    ts_dur(f, c->s, c->e);
    fprintf(f, ",\"args\":{\"correlation\":%lld%s%s%s}}", (long long)c->corr,
            c->staged ? ",\"pinwheel_staged\":1" : "", c->pw ? ",\"pinwheel\":1" : "",
            c->cudnn ? ",\"pinwheel_cudnn\":1" : "");
    if (c->corr >= 0) { /* the flow's start, when some operation carries this correlation */
      fprintf(f,
              ",\n{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%lld,\"pid\":%d,"
              "\"tid\":%d,",
              (long long)c->corr, AN_HOST_PID, c->tid);
      ts(f, c->s);
      fputc('}', f);
    }
  }
}

int an_write_chrome(FILE *f, const an_trace *t) {
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  int first = 1;
  size_t ndev;
  int *devs = gpu_lanes(f, t, &ndev, &first);
  gpu_ops(f, t, &first);
  step_ranges(f, t, devs, ndev);
  host_calls(f, t, &first);
  fprintf(f, "\n]}\n");
  free(devs);
  return ferror(f) ? -1 : 0;
}
