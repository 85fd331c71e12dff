/* an.h — the trace analyzer's model and interfaces.
 *
 * A trace is reduced, while it streams in, to what DESIGN.md §5 needs: GPU operations (kernels,
 * memcpys, memsets) with device, stream, times in integer ns, memcpy kind and memory kinds; host
 * runtime calls (memcpy and sync calls, with their correlation ids); and step windows.  Nothing
 * else of the document is kept, so memory follows the number of GPU operations, not the file size.
 * Owns: the model (the trace and its name lists), the options of the analysis (an_options), the
 * thresholds table, the report the passes fill, and the entry points of every part: the readers
 * fill the model (readers/), its queries and name tables are an_model.c's, the passes fill the
 * report (passes/), and the writers print that report (writers/).
 * Must never: define data or code beyond an inline helper of a few lines (an_model.c and the
 * passes define what it declares).
 */
#ifndef PW_AN_H
#define PW_AN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The operation types of the model: (id, the category `pinwheel export` gives it in Chrome trace
 * JSON).  AN_COMM: a communication kernel (NCCL and the like): not compute that hides a copy. */
#define AN_OP_TYPES(X)                                                                             \
  X(KERNEL, "kernel")                                                                              \
  X(MEMCPY, "gpu_memcpy")                                                                          \
  X(MEMSET, "gpu_memset")                                                                          \
  X(COMM, "kernel")
/* The "other operations" each device reports beside its kernels and H2D/D2H copies: (id, the
 * report's name, its JSON key).  Communication kernels move no bytes of their own. */
#define AN_OP_CLASSES(X)                                                                           \
  X(D2D, "D2D", "d2d")                                                                             \
  X(P2P, "P2P", "p2p")                                                                             \
  X(MEMSET, "memset", "memset")                                                                    \
  X(COMM, "communication", "communication")
#define AN_X_ID_OP(id, cat) AN_##id,
#define AN_X_ID_OC(id, rn, key) AN_OC_##id,
enum { AN_OP_TYPES(AN_X_ID_OP) AN_OP_N };
enum { AN_OP_CLASSES(AN_X_ID_OC) AN_OC_N };
extern const char *const an_op_cat[AN_OP_N];
extern const char *const an_oc_name[AN_OC_N], *const an_oc_key[AN_OC_N];
/* The analyzer's name tables, each from one list: (id, the report's name, the trace's name).
 * Copy kinds and memory kinds as Kineto writes them in "Memcpy HtoD (Pageable -> Device)". */
#define AN_COPY_KINDS(X)                                                                           \
  X(OTHER, "other", "Memcpy")                                                                      \
  X(H2D, "H2D", "HtoD")                                                                            \
  X(D2H, "D2H", "DtoH")                                                                            \
  X(D2D, "D2D", "DtoD")                                                                            \
  X(H2H, "H2H", "HtoH")                                                                            \
  X(P2P, "P2P", "PtoP")
#define AN_MEM_KINDS(X)                                                                            \
  X(UNKNOWN, "unknown", "Unknown")                                                                 \
  X(PAGEABLE, "pageable", "Pageable")                                                              \
  X(PINNED, "pinned", "Pinned")                                                                    \
  X(DEVICE, "device", "Device")                                                                    \
  X(MANAGED, "managed", "Managed")                                                                 \
  X(ARRAY, "array", "Array")
/* Runtime API classes: (id, the report's name) */
#define AN_APIS(X)                                                                                 \
  X(OTHER, "other")                                                                                \
  X(MEMCPY, "cudaMemcpy*")                                                                         \
  X(STREAM_SYNC, "cudaStreamSynchronize")                                                          \
  X(DEVICE_SYNC, "cudaDeviceSynchronize")                                                          \
  X(EVENT_SYNC, "cudaEventSynchronize")                                                            \
  X(LAUNCH, "launches")

#define AN_X_ID_CK(id, rn, tn) AN_CK_##id,
#define AN_X_ID_MK(id, rn, tn) AN_MK_##id,
#define AN_X_ID_API(id, rn) AN_API_##id,
enum { AN_COPY_KINDS(AN_X_ID_CK) AN_CK_N };
enum { AN_MEM_KINDS(AN_X_ID_MK) AN_MK_N };
enum { AN_APIS(AN_X_ID_API) AN_API_N };
extern const char *const an_ck_name[AN_CK_N], *const an_ck_trace[AN_CK_N];
extern const char *const an_mk_name[AN_MK_N], *const an_mk_trace[AN_MK_N];
extern const char *const an_api_name[AN_API_N];

typedef struct an_op {
  int64_t s, e; /* ns */
  int32_t dev, stream;
  uint8_t type, ckind, srck, dstk;
  uint32_t name; /* interned */
  uint64_t bytes;
  int64_t corr; /* -1: none */
  uint8_t pw;   /* pinwheel's collector marked it as issued by pinwheel (args.pinwheel) */
} an_op;

/* Every runtime / driver API call of the trace: the join of GPU work to host time and threads. */
typedef struct an_call {
  int64_t s, e, corr;
  int32_t tid;   /* host thread */
  uint32_t name; /* interned: cudaMemcpyAsync stays cudaMemcpyAsync in an export */
  uint8_t api;
  uint8_t staged; /* a program's call pinwheel staged, written by its collector */
  uint8_t pw;     /* a call pinwheel itself made while staging (args.pinwheel): not the program's */
  uint8_t cudnn;  /* made inside cudnnCreate (args.pinwheel_cudnn): cuDNN's error storage */
} an_call;

/* A step: a CPU range (ProfilerStep#N, or an NVTX / user annotation chosen by --step-range; or,
 * when the trace marks none, an iteration the inference pass found: an_infer.c). */
typedef struct an_step {
  int64_t s, e;
  int num; /* -1 until numbered: the digits after the name's last '#', else its position */
} an_step;

/* A host thread's own work: a CPU operator (torch.profiler's cpu_op events), merged per thread
 * once loaded (sorted by thread, then start; disjoint within a thread). */
typedef struct an_busy {
  int64_t s, e;
  int32_t tid;
} an_busy;

/* The options of the analysis, filled by the command (cmd/an_cli.c) from its command line and
 * handed to an_load and an_analyze; all zero (or a NULL pointer) is the default. */
typedef struct an_options {
  /* --step-range: the annotations that are steps, a POSIX extended regex; NULL: the names that
   * start with "ProfilerStep#" (an_load) */
  const char *step_regex;
  /* --whole-trace: the headline figures over the whole trace, start-up and teardown included;
   * 0: over the steps' steady state when the trace has steps, marked or inferred (an_analyze) */
  int whole_trace;
  int all_steps; /* --steps all: every step listed (and drawn), however many (an_analyze) */
  int timelines; /* the form draws the timelines (HTML, SVG): an_analyze runs that pass */
} an_options;
/* 0 if re is a regular expression --step-range takes; else -1, and err says why. */
int an_step_regex_check(const char *re, char *err, size_t errn);

typedef struct an_trace {
  char *path;
  const char *format; /* "kineto" or "nsys" */
  const char *source; /* who wrote it, for people: "pinwheel's collector", "torch.profiler/Kineto"
                         (Chrome trace JSON without the collector's "pinwheel" object) or
                         "Nsight Systems" */
  char *step_regex;   /* an_options.step_regex it was read with: which annotations are steps */
  void *step_re;      /* while it is read: step_regex compiled (a regex_t), else NULL */
  an_op *ops;         /* sorted by start once loaded */
  size_t nops, capops;
  int64_t maxdur; /* the longest operation: bounds the search for ops overlapping a window */
  an_call *calls;
  size_t ncalls, capcalls;
  an_step *steps;
  size_t nsteps, capsteps;
  an_busy *busy; /* empty when the trace has no CPU operators (trimmed, collector, nsys) */
  size_t nbusy, capbusy;
  /* interned names */
  char **names;
  size_t nnames, capnames;
  uint32_t *hash;
  size_t hcap;
  uint32_t last_name; /* the name interned last: a run of one name skips the hash */
  uint32_t *bycorr;   /* call indices sorted by correlation id (calls with one) */
  size_t nbycorr;
} an_trace;

/* ---- the model's queries (an_model.c; the name tables above are defined there too) ---- */
/* The one binary search: the first index i in [lo, hi) whose key_of(ctx, i) is not below key
 * (an_lower_bound) or is above it (an_upper_bound), hi when there is none; the keys must not
 * decrease from lo to hi. */
typedef int64_t (*an_key_fn)(const void *ctx, size_t i);
size_t an_lower_bound(size_t lo, size_t hi, int64_t key, an_key_fn key_of, const void *ctx);
size_t an_upper_bound(size_t lo, size_t hi, int64_t key, an_key_fn key_of, const void *ctx);
/* An interned name by id ("?" for none). */
const char *an_name(const an_trace *t, uint32_t id);
/* The runtime call with this correlation id, or NULL. */
const an_call *an_call_of(const an_trace *t, int64_t corr);
/* [*lo, *hi): the ops (sorted by start) that can overlap [w0, w1]. */
void an_op_range(const an_trace *t, int64_t w0, int64_t w1, size_t *lo, size_t *hi);
/* The distinct (device, stream) pairs of a trace, sorted; the caller frees them. */
typedef struct an_lane {
  int dev, stream;
} an_lane;
an_lane *an_lanes(const an_trace *t, size_t *n);

/* ---- reading (readers/) ---- */
/* Reading (opt: its step_regex; NULL: the defaults).  On failure: NULL, and err holds one line
 * naming the file and what is wrong. */
an_trace *an_load(const char *path, const an_options *opt, char *err, size_t errn);
void an_free(an_trace *t);
/* The readers: one contract.  Each reads t->path into t through the add functions below, and on
 * failure returns -1 with err holding one line that names the file and what is wrong.  an_load
 * picks the reader from the file's first bytes (its table of readers). */
int an_read_kineto(an_trace *t, char *err, size_t errn); /* Chrome trace JSON, plain or gzip */
int an_read_nsys(an_trace *t, char *err, size_t errn);   /* nsys SQLite export */
/* Builders used by the readers.  They validate what they add (every reader gets the same
 * limits): 0, or an AN_ADD_* error that an_add_error names for the reader's message. */
enum { AN_ADD_OK = 0, AN_ADD_NOMEM, AN_ADD_NEGATIVE, AN_ADD_RANGE, AN_ADD_DEVICE };
int an_add_op(an_trace *t, const an_op *op);
int an_add_call(an_trace *t, const an_call *c);
int an_add_step(an_trace *t, const an_step *st);
int an_add_busy(an_trace *t, const an_busy *b);
/* 1 if an annotation's name is a step's (t->step_regex); *num = its number or -1. */
int an_step_match(const an_trace *t, const char *name, size_t n, int *num);
const char *an_add_error(int rc);
/* start + duration, saturated (an out-of-range end is then refused by the add functions) */
static inline int64_t an_end(int64_t s, int64_t dur) {
  int64_t e;
  return __builtin_add_overflow(s, dur, &e) ? INT64_MAX : e;
}
uint32_t an_intern(an_trace *t, const char *s, size_t n);
/* "Memcpy HtoD (Pageable -> Device)" -> kind, src, dst.  Returns 0 if it is a memcpy name. */
int an_parse_memcpy_name(const char *name, size_t n, uint8_t *ck, uint8_t *src, uint8_t *dst);
uint8_t an_api_of(const char *name, size_t n);
/* Parse a JSON number of microseconds (decimal, ns in the decimals) into integer ns exactly. */
int an_us_to_ns(const char *num, size_t n, int64_t *out);

/* Limits on what a trace may hold, so that every difference and sum of times stays in int64:
 * time stamps within ±2^61 ns (epoch nanoseconds fit), one operation at most 2^45 ns (9.7 h). */
#define AN_TS_LIMIT (1LL << 61)
#define AN_DUR_LIMIT (1LL << 45)
static inline void an_sat_add(int64_t *a, int64_t b) {
  if (__builtin_add_overflow(*a, b, a)) *a = b > 0 ? INT64_MAX : INT64_MIN;
}
/* ns as ms; a as a percentage of b (0 when b is not positive) */
static inline double an_ms(int64_t ns) {
  return (double)ns / 1e6;
}
static inline double an_pct(int64_t a, int64_t b) {
  return b > 0 ? 100.0 * (double)a / (double)b : 0;
}

/* ---- intervals ---- */
typedef struct an_iv {
  int64_t s, e;
} an_iv;
/* Sort and merge in place; returns the new count.  Zero-length intervals are dropped. */
size_t an_union(an_iv *v, size_t n);
int64_t an_total(const an_iv *v, size_t n);
/* |a ∩ b| for two merged lists. */
int64_t an_intersect(const an_iv *a, size_t na, const an_iv *b, size_t nb);
/* |[s,e) ∩ merged list| */
int64_t an_cover(const an_iv *v, size_t n, int64_t s, int64_t e);

/* ---- figures ---- */
typedef struct an_xfer {
  uint64_t copies, bytes;
  int64_t time, hidden, exposed; /* ns; time = |union of copies| */
  int has;                       /* 0 when there were no copies: overlap_fraction is null */
} an_xfer;

typedef struct an_dev {
  int dev;
  int64_t t0, t1, span, busy, kernel, idle;
  an_xfer h2d, d2h;
  uint64_t pg_copies, pg_bytes, pg_unknown; /* pg_unknown: no correlated call, host time unknown */
  int64_t pg_time, pg_host;
  uint64_t kernels;
  int nbuckets;
  double util[64];
} an_dev;

typedef struct an_gap {
  int dev;
  int64_t s, e;
} an_gap;

typedef struct an_exposed {
  int dev, stream;
  int64_t s, dur;
  double hidden;
  uint64_t bytes;
  uint8_t ckind, srck, dstk;
  int64_t corr;
  int64_t host;     /* ns in the runtime call that issued it (the figures pass); -1: no such call */
  int staged;       /* a copy pinwheel staged (or, in the longest copies, one of its DMAs or ring
                       copies): dur is its DMAs' time, hidden measured on them */
  int64_t hideable; /* staged: of dur, the most that could have run under compute (an_pwgroup) */
} an_exposed;

typedef struct an_finding {
  const char *check, *severity; /* the check that found it (JSON: "rule") */
  char message[512];
} an_finding;

/* The answer every form leads with (the findings pass): what was hidden and what exposed, and
 * the one thing to do, the first finding that names an action, with its predicted effect. */
enum { AN_DO_NONE = 0, AN_DO_WHATIF, AN_DO_HIDEABLE };
typedef struct an_answer {
  int64_t h2d, hidden, exposed; /* the H2D copy time over all devices, under compute, and not */
  int64_t d2h, d2h_exposed;
  int top;        /* the finding to act on: an index into findings, or -1 (nothing to do) */
  char todo[320]; /* that action, one sentence ("" when there is none) */
  int effect;     /* AN_DO_WHATIF: the what-if's figures below; AN_DO_HIDEABLE: more_hidden */
  int dev;        /* the what-if's device (the slowest), when effect is AN_DO_WHATIF */
  int64_t now, predicted; /* its step (or trace) now and under pinwheel (ns) */
  double speedup;
  int64_t more_hidden;    /* of the exposed staged copies' DMA, the kernel time it missed (ns) */
  int64_t staged_exposed; /* their DMA time not under compute (ns) */
  int64_t elsewhere; /* of it, what issuing them earlier (D2H: more work queued after them) could
                        hide: at most the window's kernel time not already hiding a copy (ns) */
  int d2h_only;      /* they are all D2H: only compute queued after them can hide them */
} an_answer;

/* The what-if of one device, per step (DESIGN.md §5 steps; the whole trace as one step when
 * it has none). */
typedef struct an_whatif {
  int dev, steps;
  uint64_t copies, bytes, d2h_copies, d2h_bytes; /* eligible, over all its steps */
  int64_t baseline;                              /* median gpu_step (ns) */
  int64_t predicted;      /* median predicted step (ns) under pinwheel's defaults */
  int64_t predicted_keep; /* ... with PINWHEEL_SYNC=keep (every sync waits) */
  int elides;             /* the default elides the syncs after staged copies: the program holds no
                           * pinned or managed memory and launches no host function in the trace */
  int64_t host, gpu;      /* median of the baseline step's host and busy time */
  int64_t copy_host;      /* median host time in eligible copy calls */
  int bound;              /* predicted step is host- (0) or GPU-bound (1) */
  double speedup;         /* baseline / predicted, 0 when nothing is predicted */
} an_whatif;

/* One step on one device (DESIGN.md §5). */
typedef struct an_stepdev {
  int dev, has;                   /* has: the step ran GPU work on this device */
  int64_t first, last, gpu;       /* first op start, last op end, gpu_step (ns) */
  an_xfer h2d, d2h;               /* the step's copies; hidden against all kernels of the device */
  uint64_t pg_copies, pg_unknown; /* pageable copies; of them, with no correlated call */
  int64_t pg_host;
  uint64_t kernels;
  int64_t kernel_time, busy; /* |union| of the step's kernels, of all its operations */
} an_stepdev;

/* Median and p95 over the steps of one device. */
typedef struct an_stepsum {
  int dev, n;
  int64_t step_med, step_p95, h2d_med, exposed_med, pg_host_med;
  double hidden_med; /* -1: no step copied */
} an_stepsum;

/* Where a device's idle time went (DESIGN.md §5, HTA's idle-time breakdown from runtime calls). */
typedef struct an_idle {
  int64_t host, copy, other; /* nothing queued and the host in a sync / launching / blocked: host;
                                waiting for a copy to finish: copy; the rest: other */
} an_idle;

typedef struct an_kstat {
  int dev;
  uint32_t name;
  uint8_t type; /* AN_KERNEL or AN_COMM */
  uint64_t count;
  int64_t total;
  double share; /* % of its device's kernel time */
} an_kstat;

typedef struct an_opclass { /* D2D, peer, memset and communication rows */
  uint64_t count, bytes;
  int64_t time;
} an_opclass;

/* A copy pinwheel staged, found in the trace (an_pinwheel.c): its DMAs, and for H2D the
 * device-to-device copy out of its ring. */
enum { AN_PW_NONE = 0, AN_PW_DMA, AN_PW_RING };
typedef struct an_pwgroup {
  int dev, stream; /* stream: of the DMAs (D2H) or of the ring copy, the program's (H2D) */
  uint8_t dir;     /* AN_CK_H2D or AN_CK_D2H */
  size_t first, count_op, ndma; /* first DMA; the op where the copy is counted once */
  int64_t s, e, dma_time;       /* span of the DMAs, |union| of their intervals */
  int64_t hidden;               /* of dma_time, under compute (the figures pass) */
  int64_t hideable; /* of dma_time, the most that could be: kernel time from the call that
                       issued the first DMA to the last DMA's end (the figures pass) */
  uint64_t bytes;
} an_pwgroup;

/* The timelines the HTML and SVG forms draw (an_timeline.c): per (device, stream) lane, the
 * window cut into AN_TL_COLS columns, each of the class that covers most of it; the classes:
 * (id, the name a legend gives it). */
#define AN_TL_CLASSES(X)                                                                           \
  X(NONE, "")                                                                                      \
  X(KERNEL, "kernel")                                                                              \
  X(COMM, "communication")                                                                         \
  X(H2D_HIDDEN, "H2D hidden under compute")                                                        \
  X(H2D_EXPOSED, "H2D exposed")                                                                    \
  X(D2H, "D2H")                                                                                    \
  X(MEMSET, "memset")                                                                              \
  X(COPY, "other copy")
#define AN_X_ID_TL(id, label) AN_TL_##id,
enum { AN_TL_CLASSES(AN_X_ID_TL) AN_TL_N };
enum { AN_TL_COLS = 1030, AN_TL_LANES = 64 };
typedef struct an_tl_run {
  int c0, c1; /* columns [c0, c1) */
  int cls;    /* AN_TL_* */
  long top;   /* the longest operation in it, or -1 */
  int64_t ns; /* the time its columns stand for */
} an_tl_run;
typedef struct an_tl_lane {
  int dev, stream;
  an_tl_run *runs;
  size_t nruns;
} an_tl_lane;
typedef struct an_timeline {
  int64_t w0, w1; /* the window drawn */
  int step;       /* the step's index, or -1: the report's own window */
  an_tl_lane *lanes;
  size_t nlanes;
} an_timeline;

/* The report's figures over all its devices (the figures pass): what the headline and the rank
 * table of several traces say. */
enum { AN_RANK_COLS = 7 };
typedef struct an_totals {
  int64_t h2d_time, h2d_hidden, pg_host; /* summed over the devices */
  uint64_t h2d_copies, pg_copies, pg_unknown;
  int64_t step_med; /* the slowest device's median step */
  /* the rank row: span ms (the longest device's), busy % (the devices' mean), H2D exposed ms,
   * sync ms, pageable host ms, step median ms and the copies pinwheel staged */
  double rank[AN_RANK_COLS];
} an_totals;

typedef struct an_report {
  const an_trace *t;
  an_dev *devs;
  int ndevs;
  uint64_t sync_calls;
  int64_t sync_time, sync_longest;
  uint64_t api_calls[AN_API_N];
  int64_t api_time[AN_API_N];
  an_gap *gaps;
  size_t ngaps;
  an_exposed *exposed;
  size_t nexposed;
  struct an_stepfig {
    int num;
    int64_t cpu_s, cpu_e;
    an_stepdev *devs;
    int ndevs;
    int64_t gpu; /* the slowest device's gpu_step */
  } * steps;
  size_t nsteps;
  an_stepsum *stepsum;  /* [ndevs] */
  an_iv **kernel_union; /* [ndevs] the merged kernel intervals of each device, whole trace */
  size_t *nkernel_union;
  int32_t *op_step;               /* [nops]: the step index of each op, -1 if none */
  an_idle *idle;                  /* [ndevs] */
  an_opclass (*classes)[AN_OC_N]; /* [ndevs][AN_OC_*] */
  an_kstat *kstats;               /* top kernels, by total time */
  size_t nkstats;
  int only_step;  /* -1, or the step the report is zoomed to */
  int list_steps; /* every step is listed (and drawn): --steps all, or no more than steps_shown
                     of them (an_analyze) */
  /* pinwheel's staged copies (an_pinwheel.c); staged_role NULL before that pass */
  uint8_t *staged_role;   /* [nops] AN_PW_*: the op's part in a staged copy, if any */
  uint32_t *staged_group; /* [nops] the staged copy it belongs to: an index into pw */
  uint8_t *staged_call;   /* [ncalls] 1: a call pinwheel made for a staged copy, by pattern (calls
                          the collector marked carry an_call.pw instead) */
  an_pwgroup *pw;
  size_t npw, cappw;
  uint64_t pw_h2d, pw_d2h, pw_h2d_bytes, pw_d2h_bytes; /* staged in the window (figures pass) */
  int64_t pw_h2d_dma, pw_h2d_hidden; /* the staged H2D copies' DMA time and its part under
                                        compute (the figures pass) */
  int64_t pw_h2d_hideable;           /* and the most of it that could be (an_pwgroup.hideable) */
  size_t pw_marked;       /* of npw, found by the collector's marks (the rest: by pattern) */
  uint64_t pw_sync_calls; /* pinwheel's own host syncs while staging (the figures pass) */
  int64_t pw_sync_time;
  an_totals tot;
  an_finding findings[16];
  int nfindings;
  an_answer answer;  /* what the forms lead with (the findings pass) */
  an_whatif *whatif; /* [ndevs] */
  int whatif_any;    /* a device has steps with copies pinwheel would stage */
  int whatif_top;    /* the slowest device's what-if (the step waits for it), or -1 */
  /* where the steps came from (an_infer.c): marked in the trace, inferred, or none */
  int step_src;    /* AN_STEPS_* */
  an_step *isteps; /* the inferred steps' host ranges (the trace's own when marked) */
  size_t nisteps;
  int64_t iperiod; /* inferred: the anchor's median period (ns) */
  /* the steady state (an_analyze): the steps' GPU window, and what lies before and after it;
   * the headline figures are over [steady0, steady1) when there are steps */
  int steady;
  int64_t steady0, steady1, startup, teardown;
  int64_t step_kernels; /* the median step's kernels, all devices */
  an_exposed *longest;  /* the longest copies of the whole trace (at most 100), hidden measured
                           against all the device's kernels (the figures pass) */
  size_t nlongest;
  an_timeline *timelines; /* [0]: the report's window; then each listed step's (an_timeline.c) */
  size_t ntimelines;
} an_report;
enum { AN_STEPS_NONE = 0, AN_STEPS_MARKED, AN_STEPS_INFERRED };

/* Thresholds and what-if assumptions: one table, indexed by enum, overridable by name.  Each row:
 * its name, default, unit, range (lo to hi; AN_TR_INT: a whole number, AN_TR_ABOVE: above lo,
 * never lo itself, as a rate of 0 would divide by zero) and meaning.  --help, the man page and
 * the README print the range; an_threshold_parse refuses a value outside it. */
enum { AN_TR_NUM, AN_TR_INT, AN_TR_ABOVE };
#define AN_THRESHOLDS(X)                                                                           \
  X(EXPOSED_MIN_US, "exposed_min_us", 100, "us", 0, 60e6, AN_TR_NUM,                               \
    "copies longer than this are checked for exposure")                                            \
  X(EXPOSED_MAX_HIDDEN_PCT, "exposed_max_hidden_pct", 50, "%", 0, 100, AN_TR_NUM,                  \
    "a copy hidden this much or less under compute is exposed")                                    \
  X(GAP_MS, "gap_ms", 1, "ms", 0, 60000, AN_TR_NUM, "GPU idle gaps at least this long are listed") \
  X(SYNC_SHARE_PCT, "sync_share_pct", 5, "%", 0, 100, AN_TR_NUM,                                   \
    "host time in sync calls above this share of the span is a finding")                           \
  X(SYNC_LONGEST_MS, "sync_longest_ms", 1, "ms", 0, 60000, AN_TR_NUM,                              \
    "a single sync call at least this long is a finding")                                          \
  X(LOW_UTIL_PCT, "low_util_pct", 50, "%", 0, 100, AN_TR_NUM,                                      \
    "utilization buckets below this are low")                                                      \
  X(BUCKETS, "buckets", 20, "", 1, 64, AN_TR_INT, "utilization buckets over the span")             \
  X(PAGEABLE_MIN_KIB, "pageable_min_kib", 0, "KiB", 0, 1048576, AN_TR_NUM,                         \
    "pageable copies at least this large are reported")                                            \
  X(PAGEABLE_WARN_PCT, "pageable_warn_pct", 1, "%", 0, 100, AN_TR_NUM,                             \
    "pageable copies are a warning when their host or GPU time is this share of the span")         \
  X(ELIGIBLE_MIN_KIB, "eligible_min_kib", 64, "KiB", 0, 1048576, AN_TR_NUM,                        \
    "what-if: pageable copies pinwheel stages (PINWHEEL_MIN_BYTES)")                               \
  X(H2D_GBPS, "h2d_gbps", 42, "GB/s", 0, 100000, AN_TR_ABOVE,                                      \
    "what-if: a staged H2D copy until its bytes are on the device (measured on 16 CPU cores): "    \
    "the program's sync after the copy waits for the DMA")                                         \
  X(H2D_ELIDE_GBPS, "h2d_elide_gbps", 53.6, "GB/s", 0, 100000, AN_TR_ABOVE,                        \
    "what-if, PINWHEEL_SYNC=elide: a staged H2D copy until the call returns (measured on 16 CPU "  \
    "cores)")                                                                                      \
  X(D2H_GBPS, "d2h_gbps", 50, "GB/s", 0, 100000, AN_TR_ABOVE,                                      \
    "what-if: a staged D2H copy after the GPU is done (a fresh destination is mapped while the "   \
    "GPU computes; measured on 16 CPU cores)")                                                     \
  X(LINK_GBPS, "link_gbps", 50, "GB/s", 0, 100000, AN_TR_ABOVE,                                    \
    "what-if: a D2H DMA into pinned memory")                                                       \
  X(D2D_GBPS, "d2d_gbps", 2000, "GB/s", 0, 100000, AN_TR_ABOVE,                                    \
    "what-if: the device-to-device copy out of pinwheel's ring")                                   \
  X(STEP_MIN, "step_min", 3, "", 2, 10000, AN_TR_INT,                                              \
    "inferred steps: a loop has at least this many iterations")                                    \
  X(STEP_PERIOD_TOL_PCT, "step_period_tol_pct", 50, "%", 0, 100, AN_TR_NUM,                        \
    "inferred steps: each period of the anchor within this of the median period")                  \
  X(STEP_MATCH_PCT, "step_match_pct", 80, "%", 0, 100, AN_TR_NUM,                                  \
    "inferred steps: the periods whose operations on the anchor's stream repeat one sequence")     \
  X(STEPS_SHOWN, "steps_shown", 12, "", 0, 100000, AN_TR_INT,                                      \
    "text and HTML list every step when there are this many or fewer")

enum {
#define AN_T_ENUM(id, name, val, unit, lo, hi, kind, meaning) AN_T_##id,
  AN_THRESHOLDS(AN_T_ENUM)
#undef AN_T_ENUM
      AN_T_N
};

typedef struct an_threshold {
  const char *name;
  double value;
  const char *unit;
  double lo, hi; /* the range: lo to hi, both included (AN_TR_ABOVE: lo excluded) */
  int kind;      /* AN_TR_NUM, AN_TR_INT or AN_TR_ABOVE */
  const char *meaning;
} an_threshold;
extern an_threshold an_thresholds[AN_T_N];
#define an_nthresholds AN_T_N
static inline double an_threshold_value(int id) {
  return an_thresholds[id].value;
}
/* "name=value": 0 and the threshold set, or -1 and err (when not NULL) says what is wrong in
 * words a user reads after "--threshold name=value: " (an unknown name, not a number, out of
 * range: "must be an integer from 1 to 64"). */
int an_threshold_parse(const char *assign, char *err, size_t n);
int an_threshold_set(const char *assign); /* an_threshold_parse without the words; 0 ok */
/* Threshold i's range as --help's table shows it: "0 to 100", "integer 1 to 64", ">0 to 100000"
 * (above 0, at most 100000). */
void an_threshold_range(int i, char *out, size_t n);

/* 1 for communication kernels (NCCL, and collectives by name). */
int an_is_comm(const char *name, size_t n);

/* The analysis, as passes over the model (an_analyze runs them in this order); only_step: -1,
 * or the step the report is zoomed to (NULL when it has no such step); opt NULL: the defaults. */
an_report *an_analyze(const an_trace *t, int only_step, const an_options *opt);
void an_pass_pinwheel(an_report *r); /* an_pinwheel.c: pinwheel's staged copies */
/* 1: op i is a copy of its own; 2: the op where a staged copy is counted (bytes: the copy's);
 * 0: one of a staged copy's DMAs or ring copies, counted at that op instead */
int an_pw_counts(const an_report *r, size_t i, uint64_t *bytes);
/* an_infer.c: when the trace marks no steps, the loop's iterations from its repeating GPU work
 * (isteps, step_src, iperiod) */
void an_pass_infer(an_report *r);
void an_pass_steps(an_report *r); /* an_steps.c: op_step, steps, stepsum */
int an_steps_zoom(an_report *r, int num, int64_t *w0, int64_t *w1);
/* A step's GPU window: from the previous step's last operation (or its own first) to its last;
 * 0 when it ran no GPU work. */
int an_step_window(const struct an_stepfig *sf, int64_t *w0, int64_t *w1);
/* The merged kernel intervals of a device over the whole trace (kept by the steps pass). */
const an_iv *an_dev_kernels(const an_report *r, int dev, size_t *n);
void an_pass_figures(an_report *r, int64_t w0, int64_t w1); /* an_figures.c: devices, host, gaps,
                                                               exposed, idle, classes, kernels */
void an_pass_whatif(an_report *r);                          /* an_whatif.c */
void an_pass_findings(an_report *r);                        /* an_findings.c */
void an_pass_timeline(an_report *r); /* an_timeline.c: when an_options.timelines asks */
void an_report_free(an_report *r);
an_iv *an_kernel_union(const an_trace *t, int dev, size_t *n);
int64_t an_median(int64_t *v, size_t n); /* sorts v */
int64_t an_p95(int64_t *v, size_t n);    /* sorts v */

/* ---- pinwheel diff (an_diff.c) ---- */
typedef struct an_diff_row {
  const char *key, *n; /* key: stable, for JSON; n: the text's label */
  double va, vb;       /* before and after, in the unit the label names */
  int count;           /* printed as integers */
} an_diff_row;
enum { AN_DIFF_ROWS = 16 };
typedef struct an_diff_dev {
  int i, j; /* device i of before (a->devs) against device j of after */
  an_diff_row rows[AN_DIFF_ROWS];
  int nrows;
} an_diff_dev;
typedef struct an_diff {
  const an_report *a, *b; /* before, after */
  int by_order; /* they ran on as many devices, but not the same ones: compared in order of id */
  an_diff_dev *devs;
  int ndevs;
} an_diff;
/* NULL when the traces ran on different numbers of devices: no device maps to one other. */
an_diff *an_compare(const an_report *a, const an_report *b);
void an_diff_free(an_diff *d);

/* ---- outputs ---- */
typedef struct an_out {
  FILE *f;
  int color;
} an_out;
void an_write_text(an_out *o, an_report **r, int n);
void an_write_json(an_out *o, an_report **r, int n);
/* One of the report's timelines (an_timeline.c), drawn as SVG; standalone: a file of its own. */
void an_write_svg(an_out *o, const an_report *r, const an_timeline *tl, int standalone);
void an_write_html(an_out *o, an_report **r, int n);
void an_write_diff(an_out *o, const an_diff *d);
void an_write_diff_json(an_out *o, const an_diff *d);
int an_write_chrome(FILE *f, const an_trace *t);
/* Escape for XML/HTML text and attributes. */
void an_xml_escape(FILE *f, const char *s);
void an_json_string(FILE *f, const char *s);

#endif
