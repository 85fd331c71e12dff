/* an_kineto.c — streaming reader of torch.profiler (Kineto) Chrome trace JSON, plain or gzip.
 *
 * Owns: the yajl callbacks.  The document is never held in memory: each event of "traceEvents"
 * (or of a top-level array, Chrome's other trace form) is gathered field by field, kept if it is
 * a GPU operation, a memcpy/sync runtime call or a ProfilerStep window, and forgotten.
 * Uses only the fields DESIGN.md §5 names (ph, cat, name, pid, tid, ts, dur, args.device,
 * args.stream, args.correlation, args.bytes), so pinwheel's own collector output reads the same.
 * Must never: trust the input (every number and size is checked, and bad input is an error
 * message that names the file), or hold the document in memory.
 */
#define _GNU_SOURCE
#include "an.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

enum { C_OTHER, C_KERNEL, C_MEMCPY, C_MEMSET, C_RUNTIME, C_ANNOT, C_CPUOP };
enum { K_NONE, K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, K_TRACE_EVENTS };
enum { A_NONE, A_DEVICE, A_STREAM, A_CORR, A_BYTES, A_PW, A_STAGED, A_CUDNN };

typedef struct ev {
  char ph;
  int cat;
  char name[4097];
  size_t name_len;
  int64_t pid, tid, ts, dur, device, stream, corr, bytes;
  int pw, staged, cudnn;
  int has_ts, has_dur, has_device, has_stream, has_corr;
} ev;

typedef struct st {
  an_trace *t;
  int depth;        /* maps + arrays open */
  int events_depth; /* depth of the events array, 0 until found */
  int top_is_array, saw_events, in_event;
  int key, akey;
  int args_depth; /* depth of the args map while inside it */
  ev e;
  long nevents;
  char *err;
  size_t errn;
  int failed;
} st;

static int fail(st *s, const char *fmt, long a) {
  snprintf(s->err, s->errn, "%s: ", s->t->path);
  size_t l = strlen(s->err);
  snprintf(s->err + l, s->errn - l, fmt, a);
  s->failed = 1;
  return 0; /* stops the parse */
}

static int is(const unsigned char *k, size_t n, const char *w) {
  return n == strlen(w) && !memcmp(k, w, n);
}

static int cb_start_map(void *ctx) {
  st *s = ctx;
  s->depth++;
  if (s->events_depth && s->depth == s->events_depth + 1 && !s->in_event) {
    s->in_event = 1;
    memset(&s->e, 0, sizeof s->e);
    s->e.corr = -1;
    s->key = K_NONE;
  } else if (s->in_event && s->depth == s->events_depth + 2 && s->key == K_ARGS) {
    s->args_depth = s->depth;
    s->akey = A_NONE;
  }
  return 1;
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t n) {
  st *s = ctx;
  if (s->in_event && s->depth == s->events_depth + 1) {
    s->key = is(k, n, "ph")     ? K_PH
             : is(k, n, "cat")  ? K_CAT
             : is(k, n, "name") ? K_NAME
             : is(k, n, "pid")  ? K_PID
             : is(k, n, "tid")  ? K_TID
             : is(k, n, "ts")   ? K_TS
             : is(k, n, "dur")  ? K_DUR
             : is(k, n, "args") ? K_ARGS
                                : K_NONE;
  } else if (s->in_event && s->args_depth && s->depth == s->args_depth) {
    s->akey = is(k, n, "device")            ? A_DEVICE
              : is(k, n, "stream")          ? A_STREAM
              : is(k, n, "correlation")     ? A_CORR
              : is(k, n, "bytes")           ? A_BYTES
              : is(k, n, "pinwheel")        ? A_PW
              : is(k, n, "pinwheel_staged") ? A_STAGED
              : is(k, n, "pinwheel_cudnn")  ? A_CUDNN
                                            : A_NONE;
  } else if (s->depth == 1 && !s->top_is_array) {
    s->key = is(k, n, "traceEvents") ? K_TRACE_EVENTS : K_NONE;
    /* pinwheel's collector closes its document with a "pinwheel" object (trace_json.c) */
    if (is(k, n, "pinwheel")) s->t->source = "pinwheel's collector";
  }
  return 1;
}

static int parse_int(const char *v, size_t n, int64_t *out) {
  char buf[40];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, v, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  if (end == buf || (*end && *end != '.' && *end != 'e' && *end != 'E')) return -1;
  if (errno == ERANGE) return -1; /* beyond int64: not saturated into a wrong, huge value */
  if (*end) { /* a float where an integer was expected: accept whole values only */
    double d = strtod(buf, &end);
    if (*end || d > 9.2e18 || d < -9.2e18) return -1;
    x = (long long)d;
  }
  *out = x;
  return 0;
}

/* pid, tid and stream ids are 32-bit: signed in Kineto, unsigned in CUPTI (the collector writes
 * thread ids up to 2^32); kept as int32, so a wider value would alias another. */
static int fits32(int64_t x) {
  return x >= INT32_MIN && x <= (int64_t)UINT32_MAX;
}

static int cb_number(void *ctx, const char *v, size_t n) {
  st *s = ctx;
  if (!s->in_event) return 1;
  if (s->depth == s->events_depth + 1) {
    switch (s->key) {
    case K_TS:
    case K_DUR: {
      int64_t ns;
      if (an_us_to_ns(v, n, &ns))
        return fail(s, "event %ld: a time stamp or duration is out of range", s->nevents);
      if (s->key == K_TS)
        s->e.ts = ns, s->e.has_ts = 1;
      else
        s->e.dur = ns, s->e.has_dur = 1;
      break;
    }
    case K_PID:
      if (parse_int(v, n, &s->e.pid))
        return fail(s, "event %ld: pid is not an integer", s->nevents);
      if (!fits32(s->e.pid)) return fail(s, "event %ld: pid out of range", s->nevents);
      break;
    case K_TID:
      if (parse_int(v, n, &s->e.tid))
        return fail(s, "event %ld: tid is not an integer", s->nevents);
      if (!fits32(s->e.tid)) return fail(s, "event %ld: tid out of range", s->nevents);
      break;
    }
  } else if (s->args_depth && s->depth == s->args_depth) {
    int64_t x;
    if (s->akey == A_NONE) return 1;
    if (parse_int(v, n, &x))
      return fail(s, "event %ld: an args number is out of range", s->nevents);
    switch (s->akey) {
    case A_DEVICE:
      s->e.device = x, s->e.has_device = 1;
      break;
    case A_STREAM:
      if (!fits32(x)) return fail(s, "event %ld: stream out of range", s->nevents);
      s->e.stream = x, s->e.has_stream = 1;
      break;
    case A_CORR:
      s->e.corr = x, s->e.has_corr = 1;
      break;
    case A_BYTES:
      if (x < 0) return fail(s, "event %ld: negative byte count", s->nevents);
      s->e.bytes = x;
      break;
    case A_PW:
      s->e.pw = x != 0;
      break;
    case A_STAGED:
      s->e.staged = x != 0;
      break;
    case A_CUDNN:
      s->e.cudnn = x != 0;
      break;
    }
  }
  return 1;
}

static int cb_string(void *ctx, const unsigned char *v, size_t n) {
  st *s = ctx;
  if (!s->in_event || s->depth != s->events_depth + 1) return 1;
  switch (s->key) {
  case K_PH:
    s->e.ph = n ? (char)v[0] : 0;
    break;
  case K_CAT:
    /* the categories of today's Kineto, and (capitalised) of torch <= 1.9's */
    s->e.cat = is(v, n, "kernel") || is(v, n, "Kernel")       ? C_KERNEL
               : is(v, n, "gpu_memcpy") || is(v, n, "Memcpy") ? C_MEMCPY
               : is(v, n, "gpu_memset") || is(v, n, "Memset") ? C_MEMSET
               : is(v, n, "cuda_runtime") || is(v, n, "Runtime") || is(v, n, "cuda_driver")
                   ? C_RUNTIME
               : is(v, n, "user_annotation") ? C_ANNOT
               : is(v, n, "cpu_op")          ? C_CPUOP
                                             : C_OTHER;
    break;
  case K_NAME:
    s->e.name_len = n < 4096 ? n : 4096;
    memcpy(s->e.name, v, s->e.name_len);
    s->e.name[s->e.name_len] = 0;
    break;
  }
  return 1;
}

static int finish_event(st *s) {
  ev *e = &s->e;
  s->nevents++;
  if (e->ph != 'X' || e->cat == C_OTHER) return 1;
  if (!e->has_ts) return fail(s, "event %ld: complete event without ts", s->nevents - 1);
  an_trace *t = s->t;
  int rc = 0;
  int64_t end = an_end(e->ts, e->dur);
  if (e->cat == C_KERNEL || e->cat == C_MEMCPY || e->cat == C_MEMSET) {
    an_op op = {.s = e->ts,
                .e = end,
                .dev = (int32_t)(e->has_device ? e->device : e->pid),
                .stream = (int32_t)(e->has_stream ? e->stream : e->tid),
                .type = e->cat == C_KERNEL   ? AN_KERNEL
                        : e->cat == C_MEMCPY ? AN_MEMCPY
                                             : AN_MEMSET,
                .bytes = (uint64_t)e->bytes,
                .corr = e->has_corr ? e->corr : -1,
                .pw = (uint8_t)e->pw};
    if (e->has_device ? e->device != op.dev : e->pid != op.dev) op.dev = -1; /* did not fit */
    if (op.type == AN_MEMCPY)
      an_parse_memcpy_name(e->name, e->name_len, &op.ckind, &op.srck, &op.dstk);
    op.name = an_intern(t, e->name, e->name_len);
    rc = an_add_op(t, &op);
  } else if (e->cat == C_RUNTIME) {
    /* every call: launches join kernels to their step and thread, memcpys give host time */
    an_call c = {.s = e->ts,
                 .e = end,
                 .corr = e->has_corr ? e->corr : -1,
                 .tid = (int32_t)e->tid,
                 .name = an_intern(t, e->name, e->name_len),
                 .api = an_api_of(e->name, e->name_len),
                 .staged = (uint8_t)e->staged,
                 .pw = (uint8_t)e->pw,
                 .cudnn = (uint8_t)e->cudnn};
    rc = an_add_call(t, &c);
  } else if (e->cat == C_ANNOT || e->cat == C_CPUOP) {
    /* a CPU operator is its thread's own work (the what-if's host part) */
    if (e->cat == C_CPUOP) {
      an_busy b = {.s = e->ts, .e = end, .tid = (int32_t)e->tid};
      rc = an_add_busy(t, &b);
    }
    /* the CPU-side range only: Kineto's gpu_user_annotation covers one stream of the main
     * thread's work (DESIGN.md §5), so it is not a step */
    int num;
    if (!rc && an_step_match(t, e->name, e->name_len, &num)) {
      an_step stp = {.s = e->ts, .e = end, .num = num};
      rc = an_add_step(t, &stp);
    }
  }
  if (rc) {
    snprintf(s->err, s->errn, "%s: event %ld: %s", t->path, s->nevents - 1, an_add_error(rc));
    s->failed = 1;
    return 0;
  }
  return 1;
}

static int cb_end_map(void *ctx) {
  st *s = ctx;
  int r = 1;
  if (s->args_depth && s->depth == s->args_depth)
    s->args_depth = 0;
  else if (s->in_event && s->depth == s->events_depth + 1) {
    s->in_event = 0;
    r = finish_event(s);
  }
  s->depth--;
  return r;
}

static int cb_start_array(void *ctx) {
  st *s = ctx;
  s->depth++;
  if (s->depth == 1) {
    s->top_is_array = 1;
    s->events_depth = 1;
    s->saw_events = 1;
  } else if (s->depth == 2 && !s->top_is_array && s->key == K_TRACE_EVENTS && !s->events_depth) {
    s->events_depth = 2;
    s->saw_events = 1;
  }
  return 1;
}

static int cb_end_array(void *ctx) {
  st *s = ctx;
  if (s->depth == s->events_depth && !s->top_is_array) s->events_depth = 0;
  s->depth--;
  return 1;
}

static int cb_null(void *ctx) {
  return 1;
}
static int cb_bool(void *ctx, int b) {
  return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end_map,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end_array,
};

int an_read_kineto(an_trace *t, char *err, size_t errn) {
  gzFile gz = gzopen(t->path, "rb"); /* plain JSON reads through zlib too */
  if (!gz) return snprintf(err, errn, "%s: cannot open: %s", t->path, strerror(errno)), -1;
  gzbuffer(gz, 1 << 20);
  st s = {.t = t, .err = err, .errn = errn};
  err[0] = 0;
  yajl_handle h = yajl_alloc(&callbacks, NULL, &s);
  if (!h) {
    gzclose(gz);
    return snprintf(err, errn, "%s: out of memory", t->path), -1;
  }
  static unsigned char buf[1 << 20];
  struct stat sb;
  long long total = stat(t->path, &sb) == 0 ? (long long)sb.st_size : 0;
  int progress = total > (100LL << 20) && isatty(2);
  long long next_report = 0;
  long long read_total = 0;
  int rc = 0;
  for (;;) {
    int n = gzread(gz, buf, sizeof buf);
    if (n < 0) {
      int zerr;
      const char *m = gzerror(gz, &zerr);
      snprintf(err, errn, "%s: cannot decompress: %s", t->path, m);
      rc = -1;
      break;
    }
    if (n == 0) break;
    read_total += n;
    if (read_total == n && buf[0] != '{' && buf[0] != '[' && buf[0] != ' ' && buf[0] != '\n' &&
        buf[0] != '\t' && buf[0] != '\r') {
      snprintf(err, errn,
               "%s: not a trace: neither JSON (torch.profiler/Kineto) nor an nsys SQLite export",
               t->path);
      rc = -1;
      break;
    }
    if (yajl_parse(h, buf, (size_t)n) != yajl_status_ok) {
      rc = -1;
      break;
    }
    if (progress) {
      long long off = gzoffset(gz);
      if (off >= next_report) {
        fprintf(stderr, "\rpinwheel: reading %s: %3d%%", t->path, (int)(100 * off / total));
        next_report = off + total / 50;
      }
    }
  }
  if (progress) fprintf(stderr, "\r\033[K");
  if (rc == 0 && yajl_complete_parse(h) != yajl_status_ok) rc = -1;
  if (rc != 0 && !s.failed && err[0] == 0) {
    unsigned char *m = yajl_get_error(h, 0, NULL, 0);
    char *nl = strchr((char *)m, '\n');
    if (nl) *nl = 0;
    /* read_total counts what zlib gave: the file's bytes only when it is not compressed */
    if (gzdirect(gz))
      snprintf(err, errn,
               "%s: not valid JSON (truncated or corrupt) within its first %lld bytes: %s", t->path,
               read_total, (char *)m);
    else {
      int zerr = Z_OK;
      gzerror(gz, &zerr);
      snprintf(err, errn,
               "%s: not valid JSON (truncated or corrupt) by byte %lld of the decompressed data%s: "
               "%s",
               t->path, read_total,
               zerr == Z_BUF_ERROR ? " (the gzip file ends early: it was cut short)" : "",
               (char *)m);
    }
    yajl_free_error(h, m);
  }
  yajl_free(h);
  gzclose(gz);
  if (rc == 0 && !s.saw_events) {
    snprintf(err, errn, "%s: JSON, but not a torch.profiler/Kineto trace (no traceEvents array)",
             t->path);
    rc = -1;
  }
  return rc;
}
