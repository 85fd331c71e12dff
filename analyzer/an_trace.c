/* an_trace.c — the trace container: growth, name interning, format detection, small parsers.
 *
 * Owns: an_load (opens the file through zlib, so plain and gzip JSON read the same; SQLite is
 * recognised by its header), and every error message that names the file.
 * Must never: trust the input (every size and number is checked) or crash on it.
 */
#define _GNU_SOURCE
#include "an.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define GROW(t, arr, n, cap, item)                                                                 \
  do {                                                                                             \
    if ((t)->n == (t)->cap) {                                                                      \
      size_t nc = (t)->cap ? (t)->cap * 2 : 1024;                                                  \
      void *q = realloc((t)->arr, nc * sizeof *(t)->arr);                                          \
      if (!q) return -1;                                                                           \
      (t)->arr = q;                                                                                \
      (t)->cap = nc;                                                                               \
    }                                                                                              \
    (t)->arr[(t)->n++] = *(item);                                                                  \
  } while (0)

int an_add_op(an_trace *t, const an_op *op) {
  GROW(t, ops, nops, capops, op);
  return 0;
}
int an_add_call(an_trace *t, const an_call *c) {
  GROW(t, calls, ncalls, capcalls, c);
  return 0;
}
int an_add_step(an_trace *t, const an_step *st) {
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
    if (strlen(c) == n && !memcmp(c, s, n)) return t->hash[j] - 1;
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
  return (uint32_t)(t->nnames - 1);
}

const char *an_name(const an_trace *t, uint32_t id) {
  return id < t->nnames ? t->names[id] : "?";
}

static uint8_t mem_kind(const char *s, size_t n) {
  static const struct {
    const char *w;
    uint8_t k;
  } k[] = {{"Pageable", AN_MK_PAGEABLE},
           {"Pinned", AN_MK_PINNED},
           {"Device", AN_MK_DEVICE},
           {"Managed", AN_MK_MANAGED},
           {"Array", AN_MK_ARRAY}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (n == strlen(k[i].w) && !memcmp(s, k[i].w, n)) return k[i].k;
  return AN_MK_UNKNOWN;
}

int an_parse_memcpy_name(const char *name, size_t n, uint8_t *ck, uint8_t *src, uint8_t *dst) {
  if (n < 11 || memcmp(name, "Memcpy ", 7)) return -1;
  const char *k = name + 7;
  *ck = !memcmp(k, "HtoD", 4)   ? AN_CK_H2D
        : !memcmp(k, "DtoH", 4) ? AN_CK_D2H
        : !memcmp(k, "DtoD", 4) ? AN_CK_D2D
        : !memcmp(k, "HtoH", 4) ? AN_CK_H2H
        : !memcmp(k, "PtoP", 4) ? AN_CK_P2P
                                : AN_CK_OTHER;
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

uint8_t an_api_of(const char *name, size_t n) {
  static const struct {
    const char *w;
    uint8_t a;
  } a[] = {{"cudaStreamSynchronize", AN_API_STREAM_SYNC},
           {"cudaDeviceSynchronize", AN_API_DEVICE_SYNC},
           {"cudaEventSynchronize", AN_API_EVENT_SYNC},
           {"cudaMemcpy", AN_API_MEMCPY},
           {"cudaMemcpyAsync", AN_API_MEMCPY}};
  /* version suffixes of nsys names (_v3020, _ptsz_v7000) do not change the API */
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
    size_t l = strlen(a[i].w);
    if (n >= l && !memcmp(name, a[i].w, l) && (n == l || name[l] == '_')) return a[i].a;
  }
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
  free(t->steps);
  free(t->path);
  free(t);
}

static int cmp_op(const void *a, const void *b) {
  const an_op *x = a, *y = b;
  return x->s < y->s ? -1 : x->s > y->s;
}

an_trace *an_load(const char *path, char *err, size_t errn) {
  an_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->path = strdup(path);
  an_intern(t, "", 0);
  FILE *raw = fopen(path, "rb");
  if (!raw) {
    snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno));
    an_free(t);
    return NULL;
  }
  unsigned char head[16] = {0};
  size_t got = fread(head, 1, sizeof head, raw);
  fclose(raw);
  int rc;
  if (got == 0) {
    snprintf(err, errn, "%s: the file is empty", path);
    rc = -1;
  } else if (got == 16 && !memcmp(head, "SQLite format 3", 16)) {
    t->format = "nsys";
    rc = an_read_nsys(t, err, errn);
  } else {
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
      snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno));
      rc = -1;
    } else {
      gzbuffer(gz, 1 << 20);
      t->format = "kineto";
      rc = an_read_kineto(t, gz, err, errn);
      gzclose(gz);
    }
  }
  if (rc != 0) {
    an_free(t);
    return NULL;
  }
  if (t->nops) qsort(t->ops, t->nops, sizeof *t->ops, cmp_op);
  for (size_t i = 0; i < t->nops; i++)
    if (t->ops[i].e - t->ops[i].s > t->maxdur) t->maxdur = t->ops[i].e - t->ops[i].s;
  return t;
}

static size_t first_at_or_after(const an_trace *t, int64_t s) {
  size_t lo = 0, hi = t->nops;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->ops[mid].s < s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void an_op_range(const an_trace *t, int64_t w0, int64_t w1, size_t *lo, size_t *hi) {
  *lo = w0 < INT64_MIN + t->maxdur + 1 ? 0 : first_at_or_after(t, w0 - t->maxdur);
  *hi = w1 == INT64_MAX ? t->nops : first_at_or_after(t, w1 + 1);
}
