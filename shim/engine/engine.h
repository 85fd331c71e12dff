/* engine.h — the staging engine's interface, for the front ends, the top file and the tests.
 *
 * Owns: pw_ops (the CUDA operations the engine needs, one member per entry of pw_ops.def), the
 * copy routines (memcpy.c), the copy worker pool (pool.c), the engine's copies (pw_transfer) and
 * its configuration, the source guard as the engine reaches it (pw_guard_ops), and the engine's
 * calls (engine.c).  Sees core (pw.h) and nothing above it: no CUDA header, no front end, no
 * collector, so the tests run the engine against a simulated backend (tests/sim/).
 */
#ifndef PW_ENGINE_H
#define PW_ENGINE_H

#include "pw.h"

/* ---- the CUDA operations the engine needs (filled from the real runtime, or simulated) ----
 * One member per entry of pw_ops.def, which says what each does. */
typedef struct pw_ops {
#define PW_OP(ret, name, params) ret(*name) params;
#include "pw_ops.def"
} pw_ops;
/* One entry of a backend's table: fn, which must have the member's type (the _Generic has no other
 * association), so a function of another type is a compile error, not a silent cast.  Each backend
 * builds its table from the list, so every member is named and a missing op_<name> does not build:
 * `#define PW_OP(ret, name, params) .name = PW_OPS_ENTRY(op_##name, ret, params),` then
 * `const pw_ops its_ops = {` `#include "pw_ops.def"` `};`. */
#define PW_OPS_ENTRY(fn, ret, params) _Generic((fn), ret(*) params : (fn))
/* What an op returns once CUDA is being torn down at exit (its exit handlers ran): the runtime's
 * cudaErrorCudartUnloading and the driver's CUDA_ERROR_DEINITIALIZED, both 4 (each real backend
 * checks it where it builds). */
#define PW_OPS_ERR_UNLOADING 4

/* The first cap-1 bytes of a small file (sysfs, cgroup), NUL-terminated: 0, or -1. */
int pw_read_small(const char *path, char *buf, size_t cap);

/* ---- copy routines (memcpy.c) ---- */
typedef void (*pw_memcpy_fn)(void *dst, const void *src, size_t n);
enum { PW_MEMCPY_PORTABLE = 0, PW_COPY_NT_SSE2, PW_MEMCPY_NT_AVX };
/* The copy routine `which`, or NULL where this CPU or build has none.  The non-temporal ones end
 * with a store fence. */
pw_memcpy_fn pw_memcpy_impl(int which);
int pw_memcpy_best(void); /* the fastest routine into DMA-only memory this CPU has */
/* glibc's memmove.  The shim exports memcpy and memmove (app_memcpy.c), so a plain call from inside
 * the shim comes back to them; the engine's copies and the exported ones' fallback use this. */
void *pw_libc_memmove(void *dst, const void *src, size_t n);
const char *pw_memcpy_name(int which);
/* Advise huge pages for the 2 MiB-aligned interior of [p, p+n) when nothing has touched it yet
 * (mincore); returns 1 when advised.  Only the page-table granularity changes: contents, size and
 * protection of the memory stay as they are. */
int pw_advise_fresh(void *p, size_t n);
/* 1 when the page holding p was never touched (mincore says it is not resident). */
int pw_untouched(const void *p);
/* 1 when the destination [p, p+n) looks freshly mapped: its middle and last pages were never
 * touched (the first page may hold the allocator's header).  Needs n >= 3 pages. */
int pw_fresh_dest(const void *p, size_t n);
/* What to do with dst[0, n), the destination of a copy out of pinned memory: 0 when dst is not
 * freshly mapped; else PW_DEST_FRESH, with PW_DEST_MAP | PW_DEST_ADVISED when it is 4 MiB or more
 * and huge pages were advised for it: its pages are then mapped before the copy writes them.
 * (Mapping 4 KiB pages ahead, or none, measured slower: docs/RESULTS.md, "D2H into an untouched
 * destination".) */
enum { PW_DEST_FRESH = 1, PW_DEST_MAP = 2, PW_DEST_ADVISED = 4 };
int pw_fresh_plan(void *dst, size_t n);
/* Map the whole pages inside [p, p+n) for writing in one call (MADV_POPULATE_WRITE, Linux 5.14);
 * does nothing where the kernel lacks it.  The copy that follows then takes no page fault. */
void pw_prefault(void *p, size_t n);
/* cgroup cpu.max text ("QUOTA PERIOD" or "max PERIOD") -> CPUs, rounded up; 0 = no limit. */
int pw_parse_cpu_max(const char *text);
/* Default staging threads: CPUs this process may run on (affinity, cgroup limit), divided among
 * LOCAL_WORLD_SIZE local ranks, at least 1, at most PW_THREADS_DEFAULT_MAX. */
#define PW_THREADS_DEFAULT_MAX 16
int pw_default_threads(void);
/* Local ranks sharing this machine: LOCAL_WORLD_SIZE when it is a number above 1, else 1. */
int pw_local_ranks(void);

static inline void pw_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

/* ---- copy worker pool (pool.c) ----
 * A batch streams segments to the workers: push returns a segment number at once, wait(s)
 * returns when every segment <= s is copied (the caller helps with those).  A batch holds one of
 * the pool's lanes only while it has segments not yet waited for, so a caller that waits for
 * anything else (the GPU) with nothing outstanding holds none.  When every lane is taken, the
 * pool is not wanted (threads <= 1) or cannot start, push copies in the caller. */
struct pw_lane;
typedef struct pw_batch {
  struct pw_lane *lane;           /* NULL: nothing outstanding (waited == next_seg) */
  int helpers, threads, nt, busy; /* busy: found every lane taken once (counted once) */
  pw_memcpy_fn copy;
  uint64_t next_seg, waited;
  uint64_t wait_ns, inline_ns; /* caller time in wait, and copying alone */
} pw_batch;
void pw_batch_begin(pw_batch *b, int threads, int stream_stores);
/* STREAM: non-temporal stores; PREFAULT: map dst's pages, then copy; MAP: only map dst's pages
 * (src unused), in parts of whole 2 MiB units. */
enum { PW_PART_STREAM = 1, PW_PART_PREFAULT = 2, PW_PART_MAP = 4 };
uint64_t pw_batch_push(pw_batch *b, void *dst, const void *src, size_t n, int flags);
int pw_batch_done(pw_batch *b, uint64_t seg);
/* Run one part of a segment up to max_seg that no thread has claimed yet, on the caller's thread;
 * 1 if there was one, 0 if not (or the batch has no pool). */
int pw_batch_help(pw_batch *b, uint64_t max_seg);
void pw_batch_wait(pw_batch *b, uint64_t seg);
void pw_batch_end(pw_batch *b); /* waits for everything pushed */
/* One copy with the pool (push + wait). */
void pw_pool_memcpy(void *dst, const void *src, size_t n, int threads, int stream_stores);
int pw_pool_workers(void);
/* The workers spin (never sleep) for ns more, at most 2 ms: the pinned lines they wrote stay
 * fast for the DMAs that read them after the copy returns (pool.c says why). */
void pw_pool_keep_awake(uint64_t ns);
/* 1 when a worker idle since idle_since may sleep at now (it spun 200 us, and no keep-awake
 * reaches past now); the workers ask it, the tests too. */
int pw_pool_may_sleep(uint64_t now, uint64_t idle_since);
unsigned long pw_pool_sleeps(void); /* times a worker went to sleep, for the tests */
/* keep-awakes asked so far, and the latest one's length (capped), for the tests */
unsigned long pw_pool_awake_asked(uint64_t *last_ns);
/* on: the batches' thread count is the default (pw_default_threads), not the user's; while the
 * staging threads are placed on a NUMA node a batch then uses at most pw_numa_share() threads,
 * the caller included (numa.h).  Kept across fork, like the options it comes from. */
void pw_pool_threads_auto(int on);
/* Start a detached thread with every signal blocked (stack 0: the default size); 0 or an errno. */
int pw_spawn(void *(*fn)(void *), void *arg, size_t stack);
void pw_pool_after_fork_child(void);

/* ---- engine ---- */
typedef struct pw_transfer {
  void *dst;
  const void *src;
  size_t n;
  int dir;      /* PW_DIR_* as requested (after resolving cudaMemcpyDefault) */
  void *stream; /* normalised */
  int sync_api; /* 1 for cudaMemcpy / cudaMemcpy_ptds */
  int src_kind, dst_kind, src_dev, dst_dev;
  int described;     /* PW_DESCRIBE_*, set by pw_describe */
  const pw_ops *ops; /* the backend of the front end the copy came through, set by pw_describe */
} pw_transfer;
enum { PW_DESCRIBE_OK = 1, PW_DESCRIBE_QUERY_FAILED, PW_DESCRIBE_ERROR_PENDING };

typedef struct pw_engine_config {
  int mode;
  size_t min_bytes;
  size_t host_pool, device_ring, chunk;
  int threads, strict;
  /* PINWHEEL_DEFER: H2D copies return before their copy-in (guard needed); only a copy whose
   * chunks fit in half the pinned pool, one pinned chunk each */
  int defer;
  int numa; /* PINWHEEL_NUMA: place pools and staging threads on their GPU's node */
  /* The source guard deferral relies on (guard.h's functions in libpinwheel; a test's own in the
   * simulator).  NULL: nothing is deferred. */
  const struct pw_guard_ops *guard;
} pw_engine_config;

/* guard.h's interface, as the engine reaches it (see guard.h for each function's contract). */
typedef struct pw_guard_ops {
  int (*available)(void);
  int (*protect_inner)(const void *p, size_t n, int *id, const void **lo, const void **hi);
  /* NULL: uploads ahead (fill/fa.h) are off */
  int (*protect_revocable)(const void *p, size_t n, int *id, const void **lo, const void **hi,
                           void (*revoke)(void *arg), void *arg);
  void (*release_upto)(int id, size_t done);
  void (*release)(int id);
  void (*wait)(const void *p, size_t n);
} pw_guard_ops;

typedef struct pw_engine pw_engine;
/* One engine per process, whichever front end a copy comes through: each copy carries its front
 * end's backend (pw_transfer.ops); ops is the one used when a copy carries none (tests). */
pw_engine *pw_engine_create(const pw_ops *ops, const pw_engine_config *cfg);
void pw_engine_destroy(pw_engine *e); /* tests only: frees everything, syncs first */
/* Fill the kind and device fields of c from its pointers (and the direction if dir < 0), and
 * note ops as the copy's backend.
 * Returns 0, or -1 when a query failed (fields are then PW_MEM_UNKNOWN). */
int pw_describe(const pw_ops *ops, pw_transfer *c);
/* Stage the copy.  Returns PW_PATH_* (>= 0) when it was staged and the caller must report
 * cudaSuccess, or -1 - PW_FB_* when the caller must make the real call instead. */
int pw_engine_copy(pw_engine *e, const pw_transfer *c);
void pw_engine_after_fork_child(pw_engine *e);
/* Wait until no deferred copy guards any of [p, p+n): pinwheel calls it before it writes into the
 * program's memory itself, so that none of its threads ever stops on a guarded page. */
void pw_engine_guard_wait(pw_engine *e, const void *p, size_t n);
/* The device's context is about to be destroyed (cudaDeviceReset): deferred copy-ins finish (or
 * are given up when their side stream failed or stalled 2 s) and the side stream drains, then the
 * engine forgets the device; the next copy sets it up anew.  (The front ends give the uploads ahead
 * made there up first: pw_fa_device_reset, fill/fa.h.) */
void pw_engine_device_reset(pw_engine *e, int device);
/* The program is about to release the context the device's state lives in, which may destroy it:
 * a setup under way ends, the deferred copy-ins queued so far finish (bounded as at a reset) and
 * the side stream drains (2 s at most); the state is kept (the release may not be the last). */
void pw_engine_device_quiesce(pw_engine *e, int device);
/* The context the device's state lived in is gone (destroyed by the program's release): the
 * engine forgets the state and gives up the jobs still queued for it without a CUDA call, so
 * nothing (exit included) uses its handles. */
void pw_engine_device_gone(pw_engine *e, int device);

#ifdef PW_TESTING
/* Test hook (the test build only): the engine leaves out one dependency, so a test can prove that
 * the byte comparison catches a missing one: 1 the ring-region wait, 2 a deferred chunk's DMA's
 * wait for its copy-in (the host flag). */
extern int pw_engine_test_drop_dependency;
/* Test hook: the first ticket of a device set up from now on (0 outside the tests), so a test can
 * make the 32-bit tickets wrap within a few copies. */
extern uint32_t pw_engine_test_ticket_start;
#endif

#endif
