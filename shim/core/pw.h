/* pw.h — internal interfaces of libpinwheel shared by its subsystems.
 *
 * Subsystems and what each owns (shim/README.md says the same by folder):
 *   core/log.c          the one log function (level from PINWHEEL_LOG) and the stderr kept at
 *                       load; never calls CUDA, never mallocs.
 *   core/files.c        opening the summary and trace files: no symlink, only the user's files.
 *   core/options.c      the options table, parsed once from PINWHEEL_* variables.
 *   core/stats.c        counters (atomics only) and the exit summary (text / JSON).
 *   core/pw_ops.def     the one list of pw_ops' members, from which the struct and every
 *                       backend's table are generated.
 *   core/core.c         the lifecycle both front ends share: init at the first hooked call, the one
 *                       engine, the mode, the per-thread guard, fork and the exit summary.
 *   engine/memcpy.c     the copy routines (non-temporal stores, portable fallback), fresh-page
 *                       handling, the default thread count.
 *   engine/pool.c       the lazily started copy worker pool; batches of chunks streamed to it.
 *   engine/engine.c     the staging engine; reaches CUDA only through a pw_ops table.
 *   engine/guard.c      the source guard of deferred copies (userfaultfd write-protect).
 *   engine/numa.c       on a host of several NUMA nodes: a device's node, its pool and the
 *                       staging threads placed there.
 *   front/runtime.c     the runtime front end: the exported cuda* wrappers (hooks.def), pw_real.
 *   front/runtime_ops.c the pw_ops table over the real CUDA runtime functions.
 *   front/drv.c         the driver front end: cu* wrappers (drv_hooks.def), dlsym,
 *                       cuGetProcAddress.
 *   front/drv_ops.c     the pw_ops table over the real CUDA driver functions.
 *   front/app_memcpy.c  the program's own large memcpy into or out of its pinned memory.
 *   front/pjrt.c        JAX's CUDA plugin: XLA's own host-to-device staging turned off.
 *   front/memhooks.c    free, realloc, munmap, mremap, madvise, mmap, mprotect, shmat: they
 *                       wait for the source guard of an overlapping deferred copy.
 *   collector/trace.c   the CUPTI collector (PINWHEEL_TRACE); trace_json.c its JSON writer;
 *                       nvtx_inject.c the NVTX injection library of a traced run.
 *   collector/window.c  the capture window: delay, duration, profiler ranges, iterations.
 * The engine, pool, options, log and stats files know nothing of the CUDA headers, so the tests
 * can run them against a simulated backend.
 */
#ifndef PW_H
#define PW_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#ifndef PW_VERSION /* set by CMake from the project's version */
#error "PW_VERSION is not defined: build with CMake"
#endif

/* ---- log ---- */
enum { PW_LOG_ERROR = 0, PW_LOG_WARN = 1, PW_LOG_INFO = 2, PW_LOG_DEBUG = 3 };
void pw_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pw_log_set_level(int level);
void pw_log_mute_thread(void); /* this thread logs nothing from now on */
int pw_log_level(void);
/* Write all of buf to fd, retrying on EINTR and short writes. */
void pw_write_all(int fd, const char *buf, size_t n); /* fd < 0: nothing */
/* Keep a copy of fd 2 as it is now (the shim calls it once, at load): from then on the log and the
 * summary go to that copy, whatever fd 2 becomes. */
void pw_log_keep_stderr(void);
/* Where the log and the summary go: the kept copy of stderr (-1 when there is none, or the program
 * has closed it since), or fd 2 where nothing was kept. */
int pw_log_fd(void);

/* ---- files.c: the files pinwheel writes ---- */
enum {
  PW_OUT_APPEND = 0, /* a summary: appended, the file created if need be */
  PW_OUT_REPLACE,    /* a trace: the file emptied, unless another process is writing it */
  PW_OUT_NEW,        /* a trace under a name of its own: created, never an existing file */
};
/* Open path for writing without following a symlink; only a regular file of this user's with one
 * name is written.  REPLACE and NEW hold an flock on the file until it is closed.  Returns the
 * descriptor (close-on-exec); -2 when REPLACE found another process writing the file; -1 otherwise,
 * with why (n bytes) saying what was wrong. */
int pw_open_output(const char *path, int how, char *why, size_t n);

/* ---- the setup gate (core.c) ----
 * The engine's background setup (a device's pinned pool, ring, side stream) makes CUDA calls on a
 * thread of its own, which may still be running when the program exits.  Its calls go through the
 * gate: once exit has begun, each is refused at once (the backend returns its "unloading" error),
 * and exit waits only for the one call already inside CUDA, never for the rest of the setup, so
 * no setup call runs while CUDA tears down. */
int pw_setup_enter(void); /* 1: make the call, then pw_setup_leave(); 0: exit has begun */
void pw_setup_leave(void);
void pw_setup_mark_thread(void); /* this thread is a setup thread (its set_device call) */
int pw_setup_on_thread(void);    /* 1 on a setup thread: its other calls are gated too */
int pw_setup_busy(void);         /* 1 while a setup call is inside CUDA */
void pw_setup_arm(void);         /* a setup thread was started: exit must close the gate */
void pw_setup_after_fork_child(void);

/* ---- options ---- */
typedef enum pw_option_e {
  PW_OPT_MODE,         /* off | observe | stage */
  PW_OPT_LOG,          /* error | warn | info | debug */
  PW_OPT_STATS,        /* print the exit summary */
  PW_OPT_STATS_FILE,   /* summary destination, %p = pid */
  PW_OPT_STATS_FORMAT, /* text | json */
  PW_OPT_HELP,         /* print the options table once */
  PW_OPT_MIN_BYTES,    /* smallest copy the engine stages */
  PW_OPT_MAX_BYTES,    /* largest copy the engine stages (0 = no limit) */
  PW_OPT_HOST_POOL,    /* pinned staging memory per device */
  PW_OPT_DEVICE_RING,  /* device ring per device (0 = none) */
  PW_OPT_CHUNK,        /* staging chunk */
  PW_OPT_THREADS,      /* memcpy threads (0 = automatic) */
  PW_OPT_D2H,          /* stage device-to-pageable copies */
  PW_OPT_STRICT,       /* keep cudaMemcpy's host-side stream sync */
  PW_OPT_DEFER,        /* H2D copies return before their copy-in, the source guarded */
  PW_OPT_SYNC,         /* keep | elide */
  PW_OPT_NT_STORES,    /* non-temporal stores into pinned staging memory */
  PW_OPT_D2H_FRESH,    /* touch | populate | hugepages */
  PW_OPT_HOST_COPIES,  /* the program's memcpy into/out of its own pinned memory, threaded */
  PW_OPT_FILL_AHEAD,   /* device scratch for uploads ahead of the program's copies (0 = off) */
  PW_OPT_NUMA,         /* place pinned pools and staging threads on their GPU's NUMA node */
  PW_OPT_SETUP,        /* background | inline */
  PW_OPT_TRACE,        /* CUPTI trace destination, %p = pid, %r = rank */
  PW_OPT_CUPTI,        /* path of libcupti, when the usual search does not find it */
  PW_OPT_XLA_STAGING,  /* pinwheel | xla: who stages JAX's host-to-device copies */
  /* the trace's capture window: its start (ms after the first CUDA call), its length (ms, 0 = to
   * the end), none | cudaProfilerApi, iterations A-B (A << 32 | B; 0 = every one) */
  PW_OPT_TRACE_DELAY,
  PW_OPT_TRACE_DURATION,
  PW_OPT_TRACE_CAPTURE,
  PW_OPT_TRACE_STEPS,
  PW_OPT_COUNT
} pw_option_t;

enum { PW_MODE_OFF = 0, PW_MODE_OBSERVE = 1, PW_MODE_STAGE = 2 };
enum { PW_FMT_TEXT = 0, PW_FMT_JSON = 1 };
enum { PW_SYNC_KEEP = 0, PW_SYNC_ELIDE = 1 };
enum { PW_FRESH_TOUCH = 0, PW_FRESH_POPULATE = 1, PW_FRESH_HUGEPAGES = 2 };
enum { PW_SETUP_BACKGROUND = 0, PW_SETUP_INLINE = 1 };
enum { PW_XLA_PINWHEEL = 0, PW_XLA_XLA = 1 };

/* Parses the environment once (later calls return at once); warns on bad values.  Every reader
 * goes through it, so whichever thread comes first parses and the others wait for it. */
void pw_options_init(void);
void pw_options_reset(void); /* back to defaults, unread (tests, with no reader running) */
void pw_options_after_fork_child(void); /* the parse lock, in a forked child */
long long pw_option_get(pw_option_t opt);
const char *pw_option_str(pw_option_t opt); /* string options; NULL if unset */
const char *pw_option_name(pw_option_t opt);
/* Parse text as a value of opt.  0 and *out set on success, -1 when text is not valid. */
int pw_option_parse(pw_option_t opt, const char *text, long long *out);
/* The options table (name, default, meaning), one line each, to fd. */
void pw_options_print(int fd);

/* ---- memory kinds and directions ---- */
enum {
  PW_MEM_UNKNOWN = 0,
  PW_MEM_PAGEABLE,
  PW_MEM_PINNED,
  PW_MEM_DEVICE,
  PW_MEM_MANAGED,
  PW_MEM_N
};
enum { PW_DIR_H2D = 0, PW_DIR_D2H, PW_DIR_D2D, PW_DIR_H2H, PW_DIR_N };
extern const char *const pw_mem_names[PW_MEM_N];
extern const char *const pw_dir_names[PW_DIR_N];

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

/* ---- stats ---- */
enum {
  PW_PATH_RING = 0, /* pinned chunk -> device ring (side stream) -> dst (caller stream) */
  PW_PATH_PINNED,   /* pinned chunk -> dst on the caller stream (no ring) */
  PW_PATH_D2H,      /* device -> pinned chunks -> pageable dst */
  PW_PATH_N
};
#define PW_FALLBACK_LIST(X)                                                                        \
  X(MODE, "mode", "the mode does not stage")                                                       \
  X(DIRECTION, "direction", "not host-to-device (or device-to-host with PINWHEEL_D2H=1)")          \
  X(SRC_NOT_PAGEABLE, "src_not_pageable", "source is not pageable host memory")                    \
  X(DST_NOT_PAGEABLE, "dst_not_pageable", "destination is not pageable host memory")               \
  X(NOT_DEVICE, "not_device_memory", "device side is not plain device memory")                     \
  X(BAD_RANGE, "bad_range",                                                                        \
    "the size wraps the address space, or the device range leaves its allocation")                 \
  X(TOO_SMALL, "too_small", "below PINWHEEL_MIN_BYTES")                                            \
  X(TOO_LARGE, "too_large", "above PINWHEEL_MAX_BYTES")                                            \
  X(CAPTURING, "capturing", "stream is being captured into a graph")                               \
  X(OTHER_DEVICE, "other_device", "stream or current device differs from the memory's device")     \
  X(OTHER_CONTEXT, "other_context", "driver API: not the device's primary context")                \
  X(PENDING_ERROR, "pending_error", "a CUDA error was pending on the thread")                      \
  X(QUERY_FAILED, "query_failed", "pointer or stream query failed")                                \
  X(NO_STATE, "no_state", "engine state for the device could not be set up")                       \
  X(SETTING_UP, "setting_up", "engine state for the device was still being allocated")             \
  X(INTERNAL, "internal_error", "an engine CUDA call failed mid-copy")                             \
  X(FORKED, "forked_child", "process is a fork of a CUDA process")
/* Why a staged host-to-device copy was not deferred: the engine's reasons, then the guard's
 * (guard.h's list, after PW_ND_GUARD). */
#define PW_NOT_DEFERRED_LIST(X)                                                                    \
  X(OFF, "off", "PINWHEEL_DEFER=0")                                                                \
  X(NO_GUARD, "no_guard", "no source guard in this build or process")                              \
  X(SMALL, "small", "below the 1 MiB deferral minimum")                                            \
  X(NO_RING, "no_ring", "no device ring (the DMA would run on the caller's stream)")               \
  X(NO_WAIT_VALUE, "no_stream_wait_value", "the device cannot wait on a host value")               \
  X(LARGE, "larger_than_staging",                                                                  \
    "larger than half the ring (or half the pinned pool, where streams cannot store host values)") \
  X(BUSY, "staging_busy", "other copies held the pinned space it needed")
#define PW_ND_ENUM(id, name, text) PW_ND_##id,
enum { PW_NOT_DEFERRED_LIST(PW_ND_ENUM) PW_ND_GUARD };
#undef PW_ND_ENUM
#define PW_ND_N                                                                                    \
  (PW_ND_GUARD + 16) /* room for guard.h's reasons (PW_GUARD_NREASONS - 1 of them)                 \
                      */
extern const char *const pw_not_deferred_names[PW_ND_GUARD];
#define PW_FB_ENUM(id, name, text) PW_FB_##id,
enum { PW_FALLBACK_LIST(PW_FB_ENUM) PW_FB_N };
#undef PW_FB_ENUM
extern const char *const pw_fallback_names[PW_FB_N];

/* Why a host sync that could have been elided was made for real (engine/elide.h). */
#define PW_KEEP_LIST(X)                                                                            \
  X(HOST_WRITE, "host_write",                                                                      \
    "work queued on the stream since its last real sync can write host memory")                    \
  X(MAPPED, "mapped", "the program holds pinned, mapped or managed host memory kernels can write") \
  X(PAGEABLE_ACCESS, "pageable_access", "the device can access pageable host memory")              \
  X(IPC, "ipc", "the process exported memory or an event to another process")                      \
  X(DEVICE, "device", "the current device is not the stream's")                                    \
  X(FULL, "full", "too many streams had an elided sync in flight")                                 \
  X(ERROR, "error", "the elided sync's event could not be recorded")
#define PW_KEEP_ENUM(id, name, text) PW_KEEP_##id,
enum { PW_KEEP_LIST(PW_KEEP_ENUM) PW_KEEP_N };
#undef PW_KEEP_ENUM
extern const char *const pw_keep_names[PW_KEEP_N];

typedef struct pw_counter3 {
  _Atomic uint64_t calls, bytes, ns;
} pw_counter3;

/* The hooked functions' ids, from hooks.def (the runtime's) then drv_hooks.def (the driver's);
 * only the names are expanded, so no CUDA header is needed. */
enum {
#define PW_HOOK(name, class, params, args, stream) PW_H_##name,
#include "hooks.def"
  PW_RUNTIME_HOOK_COUNT,
  PW_DRV_HOOK_BEFORE_FIRST = PW_RUNTIME_HOOK_COUNT - 1,
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt) PW_H_##name,
#include "drv_hooks.def"
  PW_HOOK_COUNT
};
enum {
  PW_CLASS_COPY_BLOCKING = 0,
  PW_CLASS_COPY_ASYNC,
  PW_CLASS_LAUNCH,
  PW_CLASS_HOST_SYNC,
  PW_CLASS_HOST_MEM,
  PW_CLASS_PRIMARY_RELEASE,
  PW_CLASS_DEVICE_RESET,
  PW_CLASS_PROFILER,
  PW_CLASS_EVENT_SYNC,
  PW_CLASS_EVENT_RECORD,
  PW_CLASS_STREAM_WAIT,
  PW_CLASS_STREAM_QUERY,
  PW_CLASS_EVENT_QUERY,
  PW_CLASS_IPC_EXPORT,
  PW_CLASS_MANAGED
};

#define PW_NUMA_DEVICES 16
#define PW_FA_REASONS_MAX 16
typedef struct pw_stats {
  _Atomic uint64_t hook_calls[PW_HOOK_COUNT];
  _Atomic uint64_t hook_ns[PW_HOOK_COUNT];
  _Atomic uint64_t
      hook_ticks[PW_HOOK_COUNT]; /* launches in observe mode: time stamp counter ticks */
  pw_counter3 copies[PW_DIR_N][PW_MEM_N][PW_MEM_N];
  _Atomic uint64_t sync_longest_ns;
  pw_counter3 staged[PW_PATH_N]; /* ns = host time blocked in the call */
  _Atomic uint64_t staging_memcpy_ns;
  _Atomic uint64_t wait_space_ns, wait_space_events;
  _Atomic uint64_t wait_lock_ns; /* waiting for another copy's busy staging slots (no lock held) */
  _Atomic uint64_t ring_pieces;
  _Atomic uint64_t fallbacks[PW_FB_N];
  _Atomic uint64_t fallback_bytes[PW_FB_N];
  _Atomic uint64_t sync_elided;          /* host syncs that returned early (engine/elide.h) */
  _Atomic uint64_t sync_kept[PW_KEEP_N]; /* ... that were made for real, by reason */
  _Atomic uint64_t sync_fences;          /* streams made to wait for an elided sync */
  _Atomic uint64_t sync_settled;         /* waits for an elided sync before a question */
  _Atomic uint64_t pinned_bytes_allocated, ring_bytes_allocated;
  _Atomic uint64_t internal_errors;      /* broken engine invariants: must stay 0 */
  _Atomic uint64_t setup_ns;             /* allocating pinned pools, rings, side streams */
  _Atomic uint64_t d2h_fresh;            /* D2H copies into untouched destinations, prefaulted */
  _Atomic uint64_t d2h_advised;          /* of those, advised for huge pages */
  _Atomic uint64_t d2h_mapped_ahead;     /* of those, mapped while the GPU work before them ran */
  _Atomic uint64_t threads;              /* staging threads configured (caller included) */
  _Atomic uint64_t xla_unstaged_clients; /* XLA CUDA clients created without XLA's staging */
  pw_counter3 host_copies[2]; /* the program's memcpy into [0] / out of [1] its pinned memory */
  pw_counter3 deferred;       /* H2D copies that returned before their copy-in (ns: host blocked) */
  _Atomic uint64_t not_deferred[PW_ND_N]; /* staged H2D copies that were not deferred, by reason */
  _Atomic uint64_t defer_copyin_ns;       /* the copy thread's copy-ins of deferred copies */
  _Atomic uint64_t defer_aborted;         /* deferred copy-ins given up: their side stream failed */
  _Atomic uint64_t guard_writes_waited, guard_wait_ns; /* the guard's count, read at exit */
  _Atomic uint64_t device_resets; /* device states dropped: cudaDeviceReset, or the program's
                                   * release or reset of the primary context they were made in */
  _Atomic uint64_t pool_parts;    /* parts copied or mapped by the pool's worker threads */
  _Atomic uint64_t pool_busy;     /* batches that found every lane of the pool taken: alone */
  /* NUMA (hosts of several nodes, engine/numa.h): per device, 1 + the node of its PCI function
   * and 1 + the node its pinned pool's first page is on (0: not known); staging threads placed */
  _Atomic uint64_t numa_device_node[PW_NUMA_DEVICES], numa_pool_node[PW_NUMA_DEVICES];
  _Atomic uint64_t numa_threads_placed;          /* staging threads that moved there */
  _Atomic uint64_t numa_threads_node, numa_cpus; /* 1 + their node (0: none), its CPUs */
  _Atomic uint64_t numa_mixed;                   /* devices on several nodes: not placed */
  _Atomic uint64_t numa_copy_threads; /* a batch's copy threads, capped to the node (0: never) */
  /* Uploads ahead of the program's copies of its pinned memory (engine/fa.h) */
  pw_counter3 fa_fills;                           /* fills uploaded as they went (ns: the fill) */
  pw_counter3 fa_used;                            /* program copies made from an upload */
  _Atomic uint64_t fa_revoked[PW_FA_REASONS_MAX]; /* uploads given up, by reason (fa.h) */
  _Atomic uint64_t fa_no_room;                /* fills of such memory not uploaded: no scratch */
  _Atomic uint64_t fa_allocs, fa_alloc_bytes; /* the program's pinned allocations made so */
  _Atomic uint64_t fa_upload_bytes;           /* bytes DMAed to the scratch */
} pw_stats;

extern pw_stats pw_st;
static inline void pw_add(_Atomic uint64_t *c, uint64_t v) {
  atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}
static inline uint64_t pw_get(_Atomic uint64_t *c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}
void pw_stats_reset(void);
uint64_t pw_now_ns(void);
/* A cheap clock for the launch path (the CPU's time stamp counter where there is one); the
 * summary converts ticks to ns against CLOCK_MONOTONIC, anchored by pw_ticks_anchor(). */
static inline uint64_t pw_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return pw_now_ns();
#endif
}
void pw_ticks_anchor(void);

/* Hook descriptions, for the summary: filled by runtime.c from hooks.def. */
typedef struct pw_hook_info {
  const char *name;
  int klass; /* PW_CLASS_* */
} pw_hook_info;
extern const pw_hook_info pw_hook_table[];
extern const int pw_hook_count;

/* Write the exit summary (format PW_FMT_*) to fd. */
void pw_stats_write(int fd, int format);

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
/* What to do with dst[0, n), the destination of a copy out of pinned memory, under
 * PINWHEEL_D2H_FRESH=mode (PW_FRESH_*): 0 when mode is touch or dst is not freshly mapped; else
 * PW_DEST_FRESH, with PW_DEST_MAP when its pages are to be mapped before the copy writes them
 * (populate; hugepages for 4 MiB and more once advised, which adds PW_DEST_ADVISED). */
enum { PW_DEST_FRESH = 1, PW_DEST_MAP = 2, PW_DEST_ADVISED = 4 };
int pw_fresh_plan(void *dst, size_t n, int mode);
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
  size_t min_bytes, max_bytes; /* max 0 = no limit */
  size_t host_pool, device_ring, chunk;
  int threads, d2h, strict;
  int nt;               /* non-temporal stores into pinned memory where the CPU has them */
  int d2h_fresh;        /* PW_FRESH_*: what to do for an untouched D2H destination */
  int background_setup; /* allocate a device's state off the copying thread */
  int defer;            /* PINWHEEL_DEFER: H2D copies return before their copy-in (guard needed) */
  int numa;             /* PINWHEEL_NUMA: place pools and staging threads on their GPU's node */
  /* The source guard deferral relies on (guard.h's functions in libpinwheel; a test's own in the
   * simulator).  NULL: nothing is deferred. */
  const struct pw_guard_ops *guard;
} pw_engine_config;

/* guard.h's interface, as the engine reaches it (see guard.h for each function's contract). */
typedef struct pw_guard_ops {
  int (*available)(void);
  int (*protect_inner)(const void *p, size_t n, int *id, const void **lo, const void **hi);
  /* NULL: uploads ahead (fa.h) are off */
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
/* The device's context is about to be destroyed (cudaDeviceReset): the uploads ahead made there
 * are given up (pw_fa_device_reset), deferred copy-ins finish (or are given up when their side
 * stream failed or stalled 2 s) and the side stream drains, then the engine forgets the device;
 * the next copy sets it up anew. */
void pw_engine_device_reset(pw_engine *e, int device);
/* The program is about to release the context the device's state lives in, which may destroy it:
 * setups end, the deferred copy-ins queued so far finish (bounded as at a reset) and the side
 * stream drains (2 s at most); the state is kept (the release may not be the last). */
void pw_engine_device_quiesce(pw_engine *e, int device);
/* The context the device's state lived in is gone (destroyed by the program's release): the
 * engine forgets the state and gives up the jobs still queued for it without a CUDA call, so
 * nothing (exit included) uses its handles. */
void pw_engine_device_gone(pw_engine *e, int device);

#ifdef PW_TESTING
/* Test hook (the test build only): the engine leaves out one dependency, so a test can prove that
 * the byte comparison catches a missing one: 1 the ring-region wait, 2 a deferred chunk's DMA's
 * wait for its copy-in (the host flag), 3 the copy thread's wait for the side stream's store
 * before it reuses a chunk. */
extern int pw_engine_test_drop_dependency;
/* Test hook: the first ticket of a device set up from now on (0 outside the tests), so a test can
 * make the 32-bit tickets wrap within a few copies. */
extern uint32_t pw_engine_test_ticket_start;
#endif

#endif
