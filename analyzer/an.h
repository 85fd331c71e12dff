/* an.h — the trace analyzer's model and interfaces.
 *
 * A trace is reduced, while it streams in, to what DESIGN.md §5 needs: GPU operations (kernels,
 * memcpys, memsets) with device, stream, times in integer ns, memcpy kind and memory kinds; host
 * runtime calls (memcpy and sync calls, with their correlation ids); and step windows.  Nothing
 * else of the document is kept, so memory follows the number of GPU operations, not the file size.
 */
#ifndef PW_AN_H
#define PW_AN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { AN_KERNEL = 0, AN_MEMCPY, AN_MEMSET };
enum { AN_CK_OTHER = 0, AN_CK_H2D, AN_CK_D2H, AN_CK_D2D, AN_CK_H2H, AN_CK_P2P };
enum { AN_MK_UNKNOWN = 0, AN_MK_PAGEABLE, AN_MK_PINNED, AN_MK_DEVICE, AN_MK_MANAGED, AN_MK_ARRAY };
enum {
  AN_API_OTHER = 0,
  AN_API_MEMCPY,
  AN_API_STREAM_SYNC,
  AN_API_DEVICE_SYNC,
  AN_API_EVENT_SYNC,
  AN_API_N
};

typedef struct an_op {
  int64_t s, e; /* ns */
  int32_t dev, stream;
  uint8_t type, ckind, srck, dstk;
  uint32_t name; /* interned */
  uint64_t bytes;
  int64_t corr; /* -1: none */
} an_op;

typedef struct an_call {
  int64_t s, e, corr;
  uint8_t api;
} an_call;

typedef struct an_step {
  int64_t s, e;
  int num;
  int gpu; /* window taken from the GPU-side annotation */
} an_step;

typedef struct an_trace {
  char *path;
  const char *format; /* "kineto" or "nsys" */
  an_op *ops;         /* sorted by start once loaded */
  size_t nops, capops;
  int64_t maxdur; /* the longest operation: bounds the search for ops overlapping a window */
  an_call *calls;
  size_t ncalls, capcalls;
  an_step *steps;
  size_t nsteps, capsteps;
  /* interned names */
  char **names;
  size_t nnames, capnames;
  uint32_t *hash;
  size_t hcap;
} an_trace;

/* Reading.  On failure: NULL, and err holds one line naming the file and what is wrong. */
an_trace *an_load(const char *path, char *err, size_t errn);
/* [*lo, *hi): the ops (sorted by start) that can overlap [w0, w1]. */
void an_op_range(const an_trace *t, int64_t w0, int64_t w1, size_t *lo, size_t *hi);
void an_free(an_trace *t);
int an_read_kineto(an_trace *t, void *gz, char *err, size_t errn); /* gzFile */
int an_read_nsys(an_trace *t, char *err, size_t errn);
/* Builders used by the readers. */
int an_add_op(an_trace *t, const an_op *op);
int an_add_call(an_trace *t, const an_call *c);
int an_add_step(an_trace *t, const an_step *st);
uint32_t an_intern(an_trace *t, const char *s, size_t n);
const char *an_name(const an_trace *t, uint32_t id);
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
  uint64_t pg_copies, pg_bytes;
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
} an_exposed;

typedef struct an_finding {
  const char *rule, *severity;
  char message[512];
} an_finding;

typedef struct an_whatif {
  int64_t exposed, host, d2d, saving; /* per step, ns */
  uint64_t copies, bytes;
  int steps;
} an_whatif;

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
    an_dev *devs;
    int ndevs;
  } * steps;
  size_t nsteps;
  an_finding findings[16];
  int nfindings;
  an_whatif whatif;
} an_report;

/* Thresholds of the findings, one table; overridable by name. */
typedef struct an_rule {
  const char *name;
  double value;
  const char *unit, *meaning;
} an_rule;
extern an_rule an_rules[];
extern const int an_nrules;
double an_rule_get(const char *name);
int an_rule_set(const char *assign); /* "name=value"; 0 ok */

an_report *an_analyze(const an_trace *t, int only_step);
void an_report_free(an_report *r);
an_iv *an_kernel_union(const an_trace *t, int dev, size_t *n);

/* ---- outputs ---- */
typedef struct an_out {
  FILE *f;
  int color;
} an_out;
void an_write_text(an_out *o, an_report **r, int n);
void an_write_json(an_out *o, an_report **r, int n);
void an_write_svg(an_out *o, const an_report *r, int64_t w0, int64_t w1, int standalone);
void an_write_html(an_out *o, an_report **r, int n, int step);
void an_write_diff(an_out *o, an_report *a, an_report *b);
int an_write_chrome(FILE *f, const an_trace *t);
/* Escape for XML/HTML text and attributes. */
void an_xml_escape(FILE *f, const char *s);
void an_json_string(FILE *f, const char *s);

#endif
