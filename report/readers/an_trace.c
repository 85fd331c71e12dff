/* an_trace.c — the trace container: growth, name interning, format detection, small parsers.
 *
 * Owns: an_load (opens the file through zlib, so plain and gzip JSON read the same; SQLite is
 * recognised by its header), which annotations are steps (an_options.step_regex, kept in the
 * trace), the order and indexes a loaded trace keeps (ops and calls by start, calls by
 * correlation id, steps, merged CPU work), C++ names demangled once per name as Kineto shows
 * them (pw_demangle.h), and every error message that names the file.
 * Must never: trust the input (every size and number is checked) or crash on it; answer the
 * passes' queries (an_model.c does, over what this file leaves).
 */
#define _GNU_SOURCE
#include "an.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "pw_demangle.h"

#define GROW(t, arr, n, cap, item)                                                                 \
  do {                                                                                             \
    if ((t)->n == (t)->cap) {                                                                      \
      size_t nc = (t)->cap ? (t)->cap * 2 : 1024;                                                  \
      void *q = realloc((t)->arr, nc * sizeof *(t)->arr);                                          \
      if (!q) return AN_ADD_NOMEM;                                                                 \
      (t)->arr = q;                                                                                \
      (t)->cap = nc;                                                                               \
    }                                                                                              \
    (t)->arr[(t)->n++] = *(item);                                                                  \
  } while (0)

static int check_span(int64_t s, int64_t e) {
  if (e < s) return AN_ADD_NEGATIVE;
  if (s < -AN_TS_LIMIT || s > AN_TS_LIMIT || e - s > AN_DUR_LIMIT) return AN_ADD_RANGE;
  return AN_ADD_OK;
}

const char *an_add_error(int rc) {
  switch (rc) {
  case AN_ADD_NOMEM:
    return "out of memory";
  case AN_ADD_NEGATIVE:
    return "negative duration (ends before it starts)";
  case AN_ADD_RANGE:
    return "a time stamp or duration out of range";
  case AN_ADD_DEVICE:
    return "a device id out of range (0 to 4096)";
  default:
    return "no error";
  }
}

int an_add_op(an_trace *t, const an_op *op) {
  int rc = check_span(op->s, op->e);
  if (rc) return rc;
  if (op->dev < 0 || op->dev > 4096) return AN_ADD_DEVICE;
  GROW(t, ops, nops, capops, op);
  return 0;
}
int an_add_call(an_trace *t, const an_call *c) {
  int rc = check_span(c->s, c->e);
  if (rc) return rc;
  GROW(t, calls, ncalls, capcalls, c);
  return 0;
}
int an_add_busy(an_trace *t, const an_busy *b) {
  int rc = check_span(b->s, b->e);
  if (rc) return rc;
  GROW(t, busy, nbusy, capbusy, b);
  return 0;
}
int an_add_step(an_trace *t, const an_step *st) {
  int rc = check_span(st->s, st->e);
  if (rc) return rc;
  GROW(t, steps, nsteps, capsteps, st);
  return 0;
}

static uint32_t fnv(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

/* Names are interned (a trace repeats a few thousand kernel names millions of times). */
uint32_t an_intern(an_trace *t, const char *s, size_t n) {
  if (n > 4096) n = 4096;
  /* the same name again (a run of cudaLaunchKernel, of one kernel): no hashing */
  if (t->last_name < t->nnames && strnlen(t->names[t->last_name], n + 1) == n &&
      !memcmp(t->names[t->last_name], s, n))
    return t->last_name;
  if (t->nnames * 2 >= t->hcap) {
    size_t nc = t->hcap ? t->hcap * 2 : 4096;
    uint32_t *h = calloc(nc, sizeof *h);
    if (!h) return 0;
    for (size_t i = 0; i < t->nnames; i++) {
      size_t j = fnv(t->names[i], strlen(t->names[i])) & (nc - 1);
      while (h[j])
        j = (j + 1) & (nc - 1);
      h[j] = (uint32_t)i + 1;
    }
    free(t->hash);
    t->hash = h;
    t->hcap = nc;
  }
  size_t j = fnv(s, n) & (t->hcap - 1);
  while (t->hash[j]) {
    const char *c = t->names[t->hash[j] - 1];
    if (strlen(c) == n && !memcmp(c, s, n)) return t->last_name = t->hash[j] - 1;
    j = (j + 1) & (t->hcap - 1);
  }
  if (t->nnames == t->capnames) {
    size_t nc = t->capnames ? t->capnames * 2 : 1024;
    char **q = realloc(t->names, nc * sizeof *q);
    if (!q) return 0;
    t->names = q;
    t->capnames = nc;
  }
  char *c = strndup(s, n);
  if (!c) return 0;
  t->names[t->nnames] = c;
  t->hash[j] = (uint32_t)++t->nnames;
  return t->last_name = (uint32_t)(t->nnames - 1);
}

static uint8_t mem_kind(const char *s, size_t n) {
  for (int i = 1; i < AN_MK_N; i++)
    if (n == strlen(an_mk_trace[i]) && !memcmp(s, an_mk_trace[i], n)) return (uint8_t)i;
  return AN_MK_UNKNOWN;
}

int an_parse_memcpy_name(const char *name, size_t n, uint8_t *ck, uint8_t *src, uint8_t *dst) {
  if (n < 11 || memcmp(name, "Memcpy ", 7)) return -1;
  const char *k = name + 7;
  *ck = AN_CK_OTHER;
  for (int i = 1; i < AN_CK_N; i++)
    if (!memcmp(k, an_ck_trace[i], 4)) *ck = (uint8_t)i;
  *src = *dst = AN_MK_UNKNOWN;
  const char *lp = memchr(name, '(', n), *end = name + n;
  if (lp) {
    const char *arrow = memmem(lp, (size_t)(end - lp), " -> ", 4);
    const char *rp = memchr(lp, ')', (size_t)(end - lp));
    if (arrow && rp && arrow < rp) {
      *src = mem_kind(lp + 1, (size_t)(arrow - lp - 1));
      *dst = mem_kind(arrow + 4, (size_t)(rp - arrow - 4));
    }
  }
  return 0;
}

/* ---- steps ---- */

/* re compiled into *out: 0, else -1 and err says why. */
static int step_compile(regex_t *out, const char *re, char *err, size_t errn) {
  int rc = regcomp(out, re, REG_EXTENDED | REG_NOSUB);
  if (rc) {
    char m[200];
    regerror(rc, out, m, sizeof m);
    snprintf(err, errn, "--step-range '%s' is not a regular expression: %s", re, m);
    return -1;
  }
  return 0;
}

int an_step_regex_check(const char *re, char *err, size_t errn) {
  regex_t r;
  if (step_compile(&r, re, err, errn)) return -1;
  regfree(&r);
  return 0;
}

int an_step_match(const an_trace *t, const char *name, size_t n, int *num) {
  if (!t->step_re) {
    if (n <= 13 || memcmp(name, "ProfilerStep#", 13)) return 0;
  } else {
    char buf[4097];
    if (n > 4096) n = 4096;
    memcpy(buf, name, n);
    buf[n] = 0;
    if (regexec(t->step_re, buf, 0, NULL, 0)) return 0;
  }
  *num = -1;
  const char *h = NULL;
  for (size_t i = 0; i < n; i++)
    if (name[i] == '#') h = name + i;
  if (h && h + 1 < name + n && h[1] >= '0' && h[1] <= '9') {
    long v = 0;
    for (const char *p = h + 1; p < name + n && *p >= '0' && *p <= '9' && v < 1000000000; p++)
      v = v * 10 + (*p - '0');
    *num = (int)v;
  }
  return 1;
}

uint8_t an_api_of(const char *name, size_t n) {
  static const struct {
    const char *w;
    uint8_t a;
  } a[] = {{"cudaStreamSynchronize", AN_API_STREAM_SYNC},
           {"cudaDeviceSynchronize", AN_API_DEVICE_SYNC},
           {"cudaEventSynchronize", AN_API_EVENT_SYNC},
           {"cudaMemcpy", AN_API_MEMCPY},
           {"cudaMemcpyAsync", AN_API_MEMCPY},
           /* the driver's, as JAX, numba and CuPy call them: counted with the runtime's */
           {"cuStreamSynchronize", AN_API_STREAM_SYNC},
           {"cuCtxSynchronize", AN_API_DEVICE_SYNC},
           {"cuEventSynchronize", AN_API_EVENT_SYNC},
           {"cuMemcpy", AN_API_MEMCPY},
           {"cuMemcpyAsync", AN_API_MEMCPY},
           {"cuMemcpyHtoD", AN_API_MEMCPY},
           {"cuMemcpyHtoDAsync", AN_API_MEMCPY},
           {"cuMemcpyDtoH", AN_API_MEMCPY},
           {"cuMemcpyDtoHAsync", AN_API_MEMCPY},
           {"cuMemcpyDtoD", AN_API_MEMCPY},
           {"cuMemcpyDtoDAsync", AN_API_MEMCPY}};
  /* version suffixes of nsys names (_v3020, _ptsz_v7000) do not change the API */
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    size_t l = strlen(a[i].w);
    if (n >= l && !memcmp(name, a[i].w, l) && (n == l || name[l] == '_')) return a[i].a;
  }
  /* cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex), cudaGraphLaunch, ... */
  if (n >= 6 && memmem(name, n, "Launch", 6) &&
      (!memcmp(name, "cuda", 4) || !memcmp(name, "cu", 2)))
    return AN_API_LAUNCH;
  return AN_API_OTHER;
}

int an_us_to_ns(const char *num, size_t n, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (i < n && (num[i] == '-' || num[i] == '+')) neg = num[i++] == '-';
  if (i >= n) return -1;
  int64_t v = 0;
  int digits = 0;
  for (; i < n && num[i] >= '0' && num[i] <= '9'; i++, digits++) {
    if (v > (INT64_MAX / 1000 - 9) / 10) return -1; /* would overflow once in ns */
    v = v * 10 + (num[i] - '0');
  }
  int64_t frac = 0;
  int fd = 0;
  if (i < n && num[i] == '.') {
    for (i++; i < n && num[i] >= '0' && num[i] <= '9'; i++) {
      if (fd < 3) frac = frac * 10 + (num[i] - '0');
      fd++;
    }
  }
  if (i < n && (num[i] == 'e' || num[i] == 'E')) return -1; /* no timestamp is written so */
  if (i != n || (!digits && !fd)) return -1;
  while (fd < 3)
    frac *= 10, fd++;
  *out = (v * 1000 + frac) * (neg ? -1 : 1);
  return 0;
}

void an_free(an_trace *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nnames; i++)
    free(t->names[i]);
  free(t->names);
  free(t->hash);
  free(t->ops);
  free(t->calls);
  free(t->bycorr);
  free(t->steps);
  free(t->busy);
  free(t->path);
  free(t->step_regex);
  free(t);
}

int an_is_comm(const char *name, size_t n) {
  static const char *const w[] = {"nccl",           "allreduce",  "all_reduce",
                                  "allgather",      "all_gather", "reducescatter",
                                  "reduce_scatter", "alltoall",   "all_to_all"};
  char low[256];
  if (n > sizeof low - 1) n = sizeof low - 1;
  for (size_t i = 0; i < n; i++)
    low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
  low[n] = 0;
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
    if (strstr(low, w[i])) return 1;
  return 0;
}

static const an_trace *corr_sort_t;
static int cmp_bycorr(const void *a, const void *b) {
  int64_t x = corr_sort_t->calls[*(const uint32_t *)a].corr,
          y = corr_sort_t->calls[*(const uint32_t *)b].corr;
  return x < y ? -1 : x > y;
}

static int is_sqlite(const unsigned char *h, size_t n) {
  return n == 16 && !memcmp(h, "SQLite format 3", 16);
}
static int any_file(const unsigned char *h, size_t n) {
  (void)h;
  return n > 0;
}

static int cmp_step(const void *a, const void *b) {
  const an_step *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->num > y->num) - (x->num < y->num);
}

static int cmp_busy(const void *a, const void *b) {
  const an_busy *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return x->s < y->s ? -1 : x->s > y->s;
}

/* Each thread's CPU operators merged into disjoint intervals: nested operators (aten::conv2d
 * holding aten::convolution ...) are one stretch of work, and memory follows the stretches. */
static void merge_busy(an_trace *t) {
  if (!t->nbusy) return;
  qsort(t->busy, t->nbusy, sizeof *t->busy, cmp_busy);
  size_t m = 0;
  for (size_t i = 0; i < t->nbusy; i++) {
    an_busy b = t->busy[i];
    if (m && t->busy[m - 1].tid == b.tid && b.s <= t->busy[m - 1].e) {
      if (b.e > t->busy[m - 1].e) t->busy[m - 1].e = b.e;
    } else {
      t->busy[m++] = b;
    }
  }
  t->nbusy = m;
}

static int cmp_call_s(const void *a, const void *b) {
  const an_call *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s;
}

static int cmp_op(const void *a, const void *b) {
  const an_op *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s;
}

/* The file's first bytes, to pick its reader: how many were read, 0 after saying why none. */
static size_t file_head(const char *path, unsigned char *head, size_t n, char *err, size_t errn) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(err, errn, "%s: a directory, not a trace file", path);
    return 0;
  }
  FILE *raw = fopen(path, "rb");
  if (!raw) {
    snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno));
    return 0;
  }
  size_t got = fread(head, 1, n, raw);
  fclose(raw);
  if (got == 0) snprintf(err, errn, "%s: the file is empty", path);
  return got;
}

/* The readers, tried in order: the first whose signature matches reads the file. */
static int read_trace(an_trace *t, const unsigned char *head, size_t got, char *err, size_t errn) {
  static const struct {
    const char *format, *source; /* the source a reader may refine (an_kineto.c) */
    int (*match)(const unsigned char *head, size_t n);
    int (*read)(an_trace *t, char *err, size_t errn);
  } readers[] = {
      {"nsys", "Nsight Systems", is_sqlite, an_read_nsys},
      {"kineto", "torch.profiler/Kineto", any_file,
       an_read_kineto}, /* JSON, or gzip of it: it says which it is not */
  };
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
    if (readers[i].match(head, got)) {
      t->format = readers[i].format, t->source = readers[i].source;
      return readers[i].read(t, err, errn);
    }
  return -1;
}

/* Operations and calls sorted by start, and the calls indexed by correlation id.  Sorts only
 * what is not in order already (a trace written in time order is common). */
static int sort_trace(an_trace *t, char *err, size_t errn) {
  size_t in = 1;
  while (in < t->nops && cmp_op(&t->ops[in - 1], &t->ops[in]) <= 0)
    in++;
  if (in < t->nops) qsort(t->ops, t->nops, sizeof *t->ops, cmp_op);
  for (in = 1; in < t->ncalls && cmp_call_s(&t->calls[in - 1], &t->calls[in]) <= 0;)
    in++;
  if (in < t->ncalls) qsort(t->calls, t->ncalls, sizeof *t->calls, cmp_call_s);
  if (t->ncalls > UINT32_MAX) t->ncalls = UINT32_MAX; /* 4 G calls: far beyond any memory here */
  t->bycorr = malloc((t->ncalls + 1) * sizeof *t->bycorr);
  if (!t->bycorr) {
    snprintf(err, errn, "%s: out of memory", t->path);
    return -1;
  }
  for (size_t i = 0; i < t->ncalls; i++)
    if (t->calls[i].corr >= 0) t->bycorr[t->nbycorr++] = (uint32_t)i;
  corr_sort_t = t; /* an_load is not reentrant across threads; the CLI is single-threaded */
  for (in = 1; in < t->nbycorr && cmp_bycorr(&t->bycorr[in - 1], &t->bycorr[in]) <= 0;)
    in++;
  if (in < t->nbycorr) qsort(t->bycorr, t->nbycorr, sizeof *t->bycorr, cmp_bycorr);
  return 0;
}

/* Mangled C++ names ("_ZN2at6native...", as CUPTI and so pinwheel's collector give kernels)
 * demangled once per name, as torch.profiler's traces carry them; one that cannot be demangled
 * stays as it is.  The names' hash is rebuilt for the new strings. */
static void demangle_names(an_trace *t) {
  pw_cxa_demangle_fn fn = NULL;
  int resolved = 0, changed = 0;
  for (size_t i = 0; i < t->nnames; i++) {
    if (t->names[i][0] != '_' || t->names[i][1] != 'Z') continue;
    if (!resolved) fn = pw_demangle_resolve(1), resolved = 1;
    char *d = pw_demangle(fn, t->names[i]);
    if (!d) continue;
    if (strlen(d) > 4096) d[4096] = 0; /* the longest name an_intern keeps */
    free(t->names[i]);
    t->names[i] = d;
    changed = 1;
  }
  if (!changed || !t->hcap) return;
  memset(t->hash, 0, t->hcap * sizeof *t->hash); /* as large as before: as many names */
  for (size_t i = 0; i < t->nnames; i++) {
    size_t j = fnv(t->names[i], strlen(t->names[i])) & (t->hcap - 1);
    while (t->hash[j])
      j = (j + 1) & (t->hcap - 1);
    t->hash[j] = (uint32_t)i + 1;
  }
  t->last_name = 0;
}

/* Communication kernels, decided once per name. */
static int mark_comm(an_trace *t, char *err, size_t errn) {
  uint8_t *comm = malloc(t->nnames + 1);
  if (!comm) {
    snprintf(err, errn, "%s: out of memory", t->path);
    return -1;
  }
  for (size_t i = 0; i < t->nnames; i++)
    comm[i] = (uint8_t)an_is_comm(t->names[i], strlen(t->names[i]));
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].type == AN_KERNEL && t->ops[i].name < t->nnames && comm[t->ops[i].name])
      t->ops[i].type = AN_COMM;
  free(comm);
  return 0;
}

/* Steps in time order; a range written twice (one per thread or per pass) counts once;
 * unnumbered ones take their position. */
static void order_steps(an_trace *t) {
  if (!t->nsteps) return;
  qsort(t->steps, t->nsteps, sizeof *t->steps, cmp_step);
  size_t m = 0;
  for (size_t i = 0; i < t->nsteps; i++) {
    an_step st = t->steps[i];
    if (st.num < 0) st.num = (int)m;
    int dup = 0;
    for (size_t k = m > 4 ? m - 4 : 0; k < m; k++)
      dup |= t->steps[k].num == st.num;
    if (!dup) t->steps[m++] = st;
  }
  t->nsteps = m;
}

/* The reader, with the steps' regex compiled while it reads. */
static int read_with_steps(an_trace *t, const unsigned char *head, size_t got, char *err,
                           size_t errn) {
  if (!t->step_regex) return read_trace(t, head, got, err, errn);
  regex_t re;
  if (step_compile(&re, t->step_regex, err, errn)) return -1;
  t->step_re = &re;
  int rc = read_trace(t, head, got, err, errn);
  t->step_re = NULL;
  regfree(&re);
  return rc;
}

an_trace *an_load(const char *path, const an_options *opt, char *err, size_t errn) {
  an_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->path = strdup(path);
  if (opt && opt->step_regex && !(t->step_regex = strdup(opt->step_regex))) {
    snprintf(err, errn, "%s: out of memory", path);
    an_free(t);
    return NULL;
  }
  an_intern(t, "", 0);
  unsigned char head[16] = {0};
  size_t got = file_head(path, head, sizeof head, err, errn);
  if (!got || read_with_steps(t, head, got, err, errn) != 0 || sort_trace(t, err, errn) ||
      (demangle_names(t), mark_comm(t, err, errn))) {
    an_free(t);
    return NULL;
  }
  order_steps(t);
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].e - t->ops[i].s > t->maxdur) t->maxdur = t->ops[i].e - t->ops[i].s;
  merge_busy(t);
  return t;
}
