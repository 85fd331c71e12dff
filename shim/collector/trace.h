/* trace.h — pinwheel's CUPTI collector (PINWHEEL_TRACE): the JSON writer (trace_json.c) and the
 * collector (trace.c).  Only the CUPTI headers are used at build time: the library is opened
 * with dlopen when tracing is asked for, so the shim keeps no NEEDED entry on it. */
#ifndef PW_TRACE_H
#define PW_TRACE_H

#include <cupti_activity.h>
#include <stddef.h>
#include <stdint.h>

#define PW_TRACE_WRITER_LANES 256
#define PW_TRACE_WRITER_MARKERS 64

typedef struct pw_trace_writer_lane {
  uint32_t dev, stream;
} pw_trace_writer_lane;

/* The writer: events go into buf, flush() empties it (to a file, or to a test's memory). */
typedef struct pw_trace_writer {
  char buf[1 << 16];
  size_t len;
  void (*flush)(struct pw_trace_writer *w);
  void *ctx;
  uint64_t events, dropped;
  uint32_t pid;
  /* runtime / driver API names by callback id; NULL: "cbid N" */
  const char *(*api_name)(struct pw_trace_writer *w, int driver, uint32_t cbid);
  /* a kernel's name made readable (malloc'd), or NULL to write it as CUPTI gave it; NULL: none */
  char *(*demangle)(struct pw_trace_writer *w, const char *name);
  /* whether pinwheel itself made the call with this correlation id (its args get "pinwheel":1) */
  int (*is_pinwheel_corr)(struct pw_trace_writer *w, uint32_t corr);
  /* whether the call was made inside cudnnCreate (its args get "pinwheel_cudnn":1) */
  int (*is_cudnn_corr)(struct pw_trace_writer *w, uint32_t corr);
  /* the program's call a pinwheel operation was issued for (a staged copy): its correlation id
   * in the trace, or 0.  GPU operations then carry that id, so they join the program's call. */
  uint64_t (*app_corr)(struct pw_trace_writer *w, uint32_t corr);
  /* the capture window, said in the document's "pinwheel" object; empty: the whole run */
  char capture[128];
  /* whether an NVTX range [start, end] is in the capture window; NULL: every one */
  int (*keep)(struct pw_trace_writer *w, uint64_t start, uint64_t end);
  pw_trace_writer_lane lanes[PW_TRACE_WRITER_LANES];
  int nlanes;
  uint32_t threads[PW_TRACE_WRITER_LANES];
  int nthreads;
  pw_trace_writer_lane side[16]; /* pinwheel's side streams, named as such */
  int nside;
  struct {
    int used;
    uint32_t id, tid;
    uint64_t start;
    char name[128];
  } marks[PW_TRACE_WRITER_MARKERS];
} pw_trace_writer;

void pw_trace_writer_begin(pw_trace_writer *w);
void pw_trace_writer_record(pw_trace_writer *w, const CUpti_Activity *rec);
/* A call of the program that pinwheel handled itself (a staged copy): CUPTI never saw it, so it
 * is written from the shim's own timing, with the correlation id its operations carry. */
void pw_trace_writer_app_call(pw_trace_writer *w, const char *name, uint64_t start, uint64_t end,
                              uint32_t tid, uint64_t corr);
/* The size of a record of a kind pw_trace_writer_record converts (0: not converted). */
size_t pw_trace_writer_record_size(const CUpti_Activity *rec);
void pw_trace_writer_end(pw_trace_writer *w); /* names, the frame's end; flushes */

/* The collector (trace.c). */
/* PINWHEEL_TRACE's path with %p = pid and %r = RANK, else LOCAL_RANK, else 0; 0 on success. */
int pw_trace_path(const char *tmpl, char *out, size_t n);
/* The collector's pw_trace_writer.demangle (one conversion at a time): __cxa_demangle when the
 * program has libstdc++ loaded (common/pw_demangle.h; never loaded for it), recent names kept. */
char *pw_trace_demangle(pw_trace_writer *w, const char *name);
/* Start tracing if PINWHEEL_TRACE asks for it: called once, at the first CUDA call. */
void pw_trace_start(void);
/* Fork, called from pinwheel.c's one set of handlers: the queue lock across fork; the child is
 * untraced and writes nothing into its parent's file. */
void pw_trace_fork_prepare(void);
void pw_trace_fork_parent(void);
void pw_trace_fork_child(void);
/* After a real CUDA call returned: registers the exit flush once CUDA has registered its own.
 * The wrappers test pw_trace_want_atexit first (a relaxed load). */
extern _Atomic int pw_trace_want_atexit;
void pw_trace_after_call(void);
int pw_trace_active(void);
/* Name pinwheel's side stream of a device in the trace. */
void pw_trace_side_stream(int dev, void *stream);
/* Mark the calls the shim makes itself (between begin and end, on this thread).  For a program's
 * copy that pinwheel stages, begin returns the id the trace gives that call (0 when not
 * tracing), and end writes the call with the shim's timing. */
uint64_t pw_trace_own_begin(void);
void pw_trace_own_end(uint64_t app, const char *name);
/* Mark the calls made inside cudnnCreate (front/cudnn.c), so the report does not take the pinned
 * memory it allocates for the program's: begin returns whether it marked, end takes that. */
int pw_trace_cudnn_begin(void);
void pw_trace_cudnn_end(int pushed);
/* CUPTI's clock now (its records' time base), 0 when not tracing. */
uint64_t pw_trace_now(void);

/* The capture window (window.c): intervals of CUPTI time; a call is in when it starts in one. */
typedef struct pw_window {
  int windowed;     /* 0: everything is kept */
  uint64_t lo, hi;  /* PINWHEEL_TRACE_DELAY / _DURATION */
  int use_spans;    /* also within one of the spans (profiler ranges, or the steps asked) */
  int nspans, open; /* open: the last span has no end yet */
  uint64_t on[256], off[256];
} pw_window;
/* 1 while the front ends must report launches and copies (PINWHEEL_TRACE_STEPS): a relaxed load */
extern _Atomic int pw_trace_watch;
/* at the trace's start; t0 = CUPTI time then.  Says the window in what (empty: the whole run). */
void pw_trace_window_init(uint64_t t0, char *what, size_t n);
void pw_trace_window_get(pw_window *out); /* a copy of the window, for the writer */
int pw_window_keep(const pw_window *w, uint64_t ts);
/* cudaProfilerStart (on = 1) / Stop (0) or the driver's, from the program */
void pw_trace_profiler(int on);
/* One of the program's launches or copies on stream (sig: what it is); h2d: a host-to-device
 * copy.  Only while pw_trace_watch is set. */
void pw_trace_step_op(uint64_t sig, void *stream, int h2d);
void pw_trace_window_fork_child(void);
void pw_trace_window_end(const char *path); /* at the exit flush: a window that never opened */

#endif
