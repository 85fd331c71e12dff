/* memcpy.c — the byte-moving routines of the staging copy, and the CPU facts they depend on.
 *
 * Owns: the copy into pinned staging memory (non-temporal stores where the CPU has them: that
 * memory is read only by the DMA engine, so filling the cache with it only evicts the program's
 * data and costs a read-for-ownership per line), the portable fallback, the spin-wait hint, the
 * huge-page advice for a freshly mapped copy-out destination, and the default thread count.
 * Must never: call CUDA, allocate in the copy path, or return from a streaming copy before its
 * stores are fenced (the caller publishes the bytes to the DMA engine with a release store, which
 * does not order non-temporal stores by itself).
 */
#define _GNU_SOURCE
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* Below this a streaming copy is not worth its fence. */
#define NT_MIN 4096

/* A streaming copy: a plain head copy up to dst's 64-byte alignment, then UNROLL vectors of type
 * T per iteration loaded unaligned and stored with non-temporal stores, the store fence, and a
 * plain tail. */
#define NT_COPY(fname, attr, T, LOAD, STREAM, UNROLL, AFTER)                                       \
  attr static void fname(void *dst, const void *src, size_t n) {                                   \
    char *d = dst;                                                                                 \
    const char *s = src;                                                                           \
    if (n < NT_MIN) {                                                                              \
      memcpy(d, s, n);                                                                             \
      return;                                                                                      \
    }                                                                                              \
    size_t head = (64 - ((uintptr_t)d & 63)) & 63, step = UNROLL * sizeof(T);                      \
    memcpy(d, s, head);                                                                            \
    d += head, s += head, n -= head;                                                               \
    size_t body = n - n % step;                                                                    \
    for (size_t i = 0; i < body; i += step)                                                        \
      _Pragma("GCC unroll 8") for (int k = 0; k < UNROLL; k++)                                     \
          STREAM((T *)(d + i) + k, LOAD((const T *)(s + i) + k));                                  \
    _mm_sfence();                                                                                  \
    AFTER;                                                                                         \
    memcpy(d + body, s + body, n - body);                                                          \
  }

NT_COPY(copy_nt_sse2, , __m128i, _mm_loadu_si128, _mm_stream_si128, 4, (void)0)
NT_COPY(copy_nt_avx, __attribute__((target("avx"))), __m256i, _mm256_loadu_si256,
        _mm256_stream_si256, 4, _mm256_zeroupper())
#endif

/* glibc's own fortified entry, which the shim never exports: it checks the destination size (n
 * here, so the check always passes) and runs glibc's memmove.  Through a volatile pointer, so the
 * compiler cannot fold a check it can prove into a call of memmove, which is the shim's. */
extern void *__memmove_chk(void *dst, const void *src, size_t n, size_t dst_size);
static void *(*volatile libc_memmove_chk)(void *, const void *, size_t, size_t) = __memmove_chk;

void *pw_libc_memmove(void *dst, const void *src, size_t n) {
  return libc_memmove_chk(dst, src, n, n);
}

static void copy_portable(void *dst, const void *src, size_t n) {
  /* not memcpy or memmove: the shim's may hand work to the pool that calls this */
  pw_libc_memmove(dst, src, n);
}

pw_memcpy_fn pw_memcpy_impl(int which) {
  switch (which) {
  case PW_MEMCPY_PORTABLE:
    return copy_portable;
#if defined(__x86_64__)
  case PW_COPY_NT_SSE2:
    return copy_nt_sse2;
  case PW_MEMCPY_NT_AVX:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") ? copy_nt_avx : NULL;
#endif
  default:
    return NULL;
  }
}

/* The CPU's answer never changes: asked once, not at every staged copy. */
int pw_memcpy_best(void) {
#if defined(__x86_64__)
  static atomic_int best = -1;
  int b = atomic_load_explicit(&best, memory_order_relaxed);
  if (b < 0) {
    __builtin_cpu_init();
    b = __builtin_cpu_supports("avx") ? PW_MEMCPY_NT_AVX : PW_COPY_NT_SSE2;
    atomic_store_explicit(&best, b, memory_order_relaxed);
  }
  return b;
#else
  return PW_MEMCPY_PORTABLE;
#endif
}

const char *pw_memcpy_name(int which) {
  static const char *const names[] = {"memcpy", "sse2-nt", "avx-nt"};
  return which >= 0 && which < 3 ? names[which] : "?";
}

/* ---- huge pages for a fresh copy-out destination ---- */

#define HUGE_2M (2u << 20)

int pw_untouched(const void *p) {
  unsigned char v = 1;
  void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
  return mincore(page, 4096, &v) == 0 && !(v & 1);
}

int pw_fresh_dest(const void *p, size_t n) {
  /* Not the first page: an allocator keeps its header there (glibc writes the chunk size just
   * before the pointer it returns, so that page is touched even in a brand-new mapping). */
  if (n < 3 * 4096) return 0;
  return pw_untouched((const char *)p + n / 2) && pw_untouched((const char *)p + n - 1);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static atomic_int populate_unsupported;

void pw_prefault(void *p, size_t n) {
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
  uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  if (b <= a || atomic_load_explicit(&populate_unsupported, memory_order_relaxed)) return;
  int saved = errno;
  if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    atomic_store_explicit(&populate_unsupported, 1, memory_order_relaxed);
  errno = saved; /* the program's errno is not ours to change */
}

int pw_advise_fresh(void *p, size_t n) {
  uintptr_t a = ((uintptr_t)p + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1);
  uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_2M - 1);
  if (b <= a) return 0;
  /* Only memory nothing has touched yet: there the copy would take one fault per 4 KiB page. */
  if (!pw_untouched((void *)a)) return 0;
  int saved = errno;
#ifdef MADV_HUGEPAGE
  int ok = madvise((void *)a, b - a, MADV_HUGEPAGE) == 0;
#else
  int ok = 0;
#endif
  errno = saved;
  return ok;
}

int pw_fresh_plan(void *dst, size_t n) {
  if (!pw_fresh_dest(dst, n)) return 0;
  if (n >= (4u << 20) && pw_advise_fresh(dst, n))
    return PW_DEST_FRESH | PW_DEST_MAP | PW_DEST_ADVISED;
  return PW_DEST_FRESH;
}

/* ---- how many threads the staging copy may use ---- */

int pw_parse_cpu_max(const char *text) {
  /* cgroup v2 cpu.max: "max 100000" or "QUOTA PERIOD"; v1 gives the two numbers separately and
   * the caller joins them the same way. */
  char q[32];
  unsigned long long period = 0;
  if (!text || sscanf(text, "%31s %llu", q, &period) != 2 || period == 0) return 0;
  if (!strcmp(q, "max")) return 0;
  char *end;
  errno = 0;
  long long quota = strtoll(q, &end, 10);
  if (errno || *end || quota <= 0) return 0;
  unsigned long long cpus = ((unsigned long long)quota + period - 1) / period;
  return cpus > 4096 ? 4096 : (int)cpus;
}

int pw_read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t r = read(fd, buf, cap - 1);
  close(fd);
  if (r <= 0) return -1;
  buf[r] = 0;
  return 0;
}

/* The CPU limit of this process's cgroup (the smallest along its path), 0 when unlimited. */
static int cgroup_cpus(void) {
  char line[4096], path[4600], buf[128];
  int best = 0;
  if (pw_read_small("/proc/self/cgroup", line, sizeof line) == 0) {
    char *v2 = strstr(line, "0::");
    if (v2 && (v2 == line || v2[-1] == '\n')) {
      char *rel = v2 + 3;
      rel[strcspn(rel, "\n")] = 0;
      if (!rel[0]) rel = "/";
      for (;;) { /* the limit in force is the smallest on the way up to the root */
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", strcmp(rel, "/") ? rel : "");
        if (pw_read_small(path, buf, sizeof buf) == 0) {
          int c = pw_parse_cpu_max(buf);
          if (c > 0 && (best == 0 || c < best)) best = c;
        }
        char *slash = strrchr(rel, '/');
        if (!strcmp(rel, "/") || !slash) break;
        if (slash == rel)
          rel = "/";
        else
          *slash = 0;
      }
      if (best) return best;
    }
  }
  /* cgroup v1 (or a hybrid hierarchy whose cpu controller is still on v1) */
  char q[64], p[64];
  if (pw_read_small("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", q, sizeof q) == 0 &&
      pw_read_small("/sys/fs/cgroup/cpu/cpu.cfs_period_us", p, sizeof p) == 0) {
    q[strcspn(q, "\n")] = 0;
    p[strcspn(p, "\n")] = 0;
    snprintf(buf, sizeof buf, "%s %s", q, p);
    best = pw_parse_cpu_max(buf);
  }
  return best;
}

int pw_local_ranks(void) {
  const char *lws = getenv("LOCAL_WORLD_SIZE");
  if (lws && *lws) {
    char *end;
    long w = strtol(lws, &end, 10);
    if (!*end && w > 1 && w < 1000000) return (int)w;
  }
  return 1;
}

int pw_default_threads(void) {
  int n = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int limit = cgroup_cpus();
  if (limit > 0 && limit < n) n = limit;
  n /= pw_local_ranks();
  if (n < 1) n = 1;
  if (n > PW_THREADS_DEFAULT_MAX) n = PW_THREADS_DEFAULT_MAX;
  return n;
}
