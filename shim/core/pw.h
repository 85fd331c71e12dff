/* pw.h — core's interface: what every part of libpinwheel may use, and what core owns.
 *
 * Owns: the log (log.c), the files pinwheel writes (files.c), the options (options.c), and the
 * counters with their vocabulary and the exit summary (stats.c): memory kinds, directions, staging
 * paths, the reasons a copy was not staged or not deferred, the reasons an upload ahead was given
 * up and the hooked functions' ids (pw_hook_ids.def, generated at configure time from
 * front/hooks.def and front/drv_hooks.def: names and classes only).
 * Must never: include a header of engine/, front/, collector/ or the top file (pinwheel.c), or
 * any CUDA header; the engine's interface is engine/engine.h, the front ends' front/front.h.
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

/* ---- options ---- */
typedef enum pw_option_e {
  PW_OPT_MODE,         /* off | observe | stage */
  PW_OPT_LOG,          /* error | warn | info | debug */
  PW_OPT_STATS,        /* print the exit summary */
  PW_OPT_STATS_FILE,   /* summary destination, %p = pid */
  PW_OPT_STATS_FORMAT, /* text | json */
  PW_OPT_MIN_BYTES,    /* smallest copy the engine stages */
  PW_OPT_HOST_POOL,    /* pinned staging memory per device */
  PW_OPT_DEVICE_RING,  /* device ring per device (0 = none) */
  PW_OPT_CHUNK,        /* staging chunk */
  PW_OPT_THREADS,      /* memcpy threads (0 = automatic) */
  PW_OPT_STRICT,       /* keep cudaMemcpy's host-side stream sync */
  PW_OPT_DEFER,        /* H2D copies return before their copy-in, the source guarded */
  PW_OPT_SYNC,         /* keep | elide */
  PW_OPT_FILL_AHEAD,   /* device scratch for uploads ahead of the program's copies (0 = off) */
  PW_OPT_NUMA,         /* place pinned pools and staging threads on their GPU's NUMA node */
  PW_OPT_TRACE,        /* CUPTI trace destination, %p = pid, %r = rank */
  PW_OPT_CUPTI,        /* path of libcupti, when the usual search does not find it */
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

/* Parses the environment once (later calls return at once); warns on bad values and on options
 * that were removed.  Every reader goes through it, so whichever thread comes first parses and
 * the others wait for it. */
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

/* ---- stats ---- */
enum {
  PW_PATH_RING = 0, /* pinned chunk -> device ring (side stream) -> dst (caller stream) */
  PW_PATH_PINNED,   /* pinned chunk -> dst on the caller stream (no ring) */
  PW_PATH_D2H,      /* device -> pinned chunks -> pageable dst */
  PW_PATH_N
};
#define PW_FALLBACK_LIST(X)                                                                        \
  X(MODE, "mode", "the mode does not stage")                                                       \
  X(DIRECTION, "direction", "not host-to-device or device-to-host")                                \
  X(SRC_NOT_PAGEABLE, "src_not_pageable", "source is not pageable host memory")                    \
  X(DST_NOT_PAGEABLE, "dst_not_pageable", "destination is not pageable host memory")               \
  X(NOT_DEVICE, "not_device_memory", "device side is not plain device memory")                     \
  X(BAD_RANGE, "bad_range",                                                                        \
    "the size wraps the address space, or the device range leaves its allocation")                 \
  X(TOO_SMALL, "too_small", "below PINWHEEL_MIN_BYTES")                                            \
  X(CAPTURING, "capturing", "stream is being captured into a graph")                               \
  X(OTHER_DEVICE, "other_device", "stream or current device differs from the memory's device")     \
  X(OTHER_CONTEXT, "other_context", "driver API: not the device's primary context")                \
  X(PENDING_ERROR, "pending_error", "a CUDA error was pending on the thread")                      \
  X(QUERY_FAILED, "query_failed", "pointer or stream query failed")                                \
  X(NO_STATE, "no_state", "engine state for the device could not be set up")                       \
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

/* Why a copy was not deferred: the source guard's part of the list (engine/guard.h's reasons;
 * the summary counts each). */
#define PW_GUARD_REASONS(X)                                                                        \
  X(GUARD_NO_UFFD, "no_userfaultfd")      /* userfaultfd missing or not permitted */               \
  X(GUARD_USER_ONLY, "uffd_user_only")    /* only user-mode faults: read(2) would fail */          \
  X(GUARD_NO_WP, "uffd_no_write_protect") /* kernel without write-protect of unpopulated pages */  \
  X(GUARD_SHARED, "shared_memory")        /* not private anonymous memory */                       \
  X(GUARD_OVERLAP, "overlaps_guarded")    /* the source overlaps a range already guarded */        \
  X(GUARD_FULL, "guard_slots_full")       /* too many guarded ranges at once */                    \
  X(GUARD_ERROR, "guard_error")           /* a userfaultfd call failed */                          \
  X(GUARD_NOT_INTERPOSED, "hooks_not_interposed") /* free, munmap... here are not pinwheel's */    \
  X(GUARD_FORK, "fork_in_progress")  /* a fork is waiting for every guard to be released */        \
  X(GUARD_OWN_STACK, "caller_stack") /* on the calling thread's own stack: it would stop */

/* Why an upload ahead was given up (fill/fa.h's reasons; the summary counts each). */
#define PW_FA_REASONS(X)                                                                           \
  X(FA_GUARD, "written_freed_or_fork") /* the guard: a write, free, unmap or fork */               \
  X(FA_REFILL, "refilled")             /* a new fill over it */                                    \
  X(FA_COPY_INTO, "copied_into")       /* a copy's destination overlapped it */                    \
  X(FA_LAUNCH, "launch")               /* a kernel launch */                                       \
  X(FA_FREE, "freed")                  /* cudaFreeHost of its allocation */                        \
  X(FA_RESET, "device_reset")          /* cudaDeviceReset of its device */                         \
  X(FA_EXPIRED, "expired")             /* not used within FA_EXPIRE_MS */                          \
  X(FA_UNGUARDED, "not_guarded")       /* the guard refused the range */                           \
  X(FA_UPLOAD_FAILED, "upload_failed") /* a DMA or event call failed */                            \
  X(FA_USE_FAILED, "use_failed")       /* the device copy could not be enqueued */                 \
  X(FA_STREAM_ORDERED,                                                                             \
    "stream_ordered")                 /* a host function, stream wait, graph...: off for good */   \
  X(FA_OTHER_WRITE, "memset_or_copy") /* a memset, or a copy not of pinwheel's list */

enum {
#define PW_FA_ENUM(id, name) PW_##id,
  PW_FA_REASONS(PW_FA_ENUM)
#undef PW_FA_ENUM
      PW_FA_NREASONS
};
extern const char *const pw_fa_reason_names[PW_FA_NREASONS];

/* Why a host sync that could have been elided was made for real (engine/elide.h). */
#define PW_KEEP_LIST(X)                                                                            \
  X(HOST_WRITE, "host_write",                                                                      \
    "work queued on the stream since its last real sync can write host memory")                    \
  X(MAPPED, "mapped", "the program holds pinned, mapped or managed host memory kernels can write") \
  X(PAGEABLE_ACCESS, "pageable_access", "the device can access pageable host memory")              \
  X(IPC, "ipc", "the process exported memory or an event to another process")                      \
  X(DEVICE, "device",                                                                              \
    "the current device is not the stream's, or its context not the primary one, or released")     \
  X(FULL, "full", "too many streams had an elided sync in flight")                                 \
  X(ERROR, "error", "the elided sync's event could not be recorded")
#define PW_KEEP_ENUM(id, name, text) PW_KEEP_##id,
enum { PW_KEEP_LIST(PW_KEEP_ENUM) PW_KEEP_N };
#undef PW_KEEP_ENUM
extern const char *const pw_keep_names[PW_KEEP_N];

typedef struct pw_counter3 {
  _Atomic uint64_t calls, bytes, ns;
} pw_counter3;

/* The hooked functions' ids: the runtime's (front/hooks.def), then the driver's
 * (front/drv_hooks.def), from pw_hook_ids.def, which the build generates from those two lists
 * (PW_HOOK_ID(name, class) for each, in their order): core needs neither list nor a CUDA header. */
enum {
#define PW_HOOK_ID(name, klass) PW_H_##name,
#include "pw_hook_ids.def"
#undef PW_HOOK_ID
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
  PW_CLASS_MANAGED,
  PW_CLASS_STREAM_DESTROY,
  PW_CLASS_EVENT_DESTROY,
  /* the other entry points that enqueue work (front's PW_ENQUEUE, PW_DRV_ENQUEUE): wrapped for
   * fill-ahead and sync elision, never counted (nor listed in the summary) */
  PW_CLASS_ENQUEUE
};

#define PW_NUMA_DEVICES 16
#define PW_FA_REASONS_MAX 16
/* why a /dev/shm unmap was left to the calling thread (engine/unmap.c) */
enum { PW_UNMAP_QUEUE_FULL, PW_UNMAP_NO_ROOM, PW_UNMAP_MOVE_FAILED, PW_UNMAP_LEFT_N };

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
  _Atomic uint64_t internal_errors;     /* broken engine invariants: must stay 0 */
  _Atomic uint64_t setup_ns;            /* allocating pinned pools, rings, side streams */
  _Atomic uint64_t d2h_fresh;           /* D2H copies into untouched destinations, prefaulted */
  _Atomic uint64_t d2h_advised;         /* of those, advised for huge pages */
  _Atomic uint64_t d2h_mapped_ahead;    /* of those, mapped while the GPU work before them ran */
  _Atomic uint64_t shm_unmaps_deferred; /* /dev/shm mappings unmapped off the caller (unmap.c) */
  _Atomic uint64_t shm_unmaps_left[PW_UNMAP_LEFT_N]; /* ones left to the caller, by reason */
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
  /* Uploads ahead of the program's copies of its pinned memory (fill/fa.h) */
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

/* Hook descriptions, for the summary: filled by stats.c from pw_hook_ids.def. */
typedef struct pw_hook_info {
  const char *name;
  int klass; /* PW_CLASS_* */
} pw_hook_info;
extern const pw_hook_info pw_hook_table[];
extern const int pw_hook_count;

/* Write the exit summary (format PW_FMT_*) to fd; copy_routine names the staging copy routine
 * (the engine's, engine.h: pw_memcpy_name). */
void pw_stats_write(int fd, int format, const char *copy_routine);
/* No CUDA call was intercepted because CUDA is unusable (no driver, no device, too old a
 * driver): the summary says so instead of "the program may not use CUDA". */
void pw_stats_set_cause(const char *why);

#endif
