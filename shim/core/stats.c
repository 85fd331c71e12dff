/* stats.c — counters and the exit summary.
 *
 * Owns: pw_st (atomics only, so any thread may count without a lock), the names of its counters
 * (the hook table from pw_hook_ids.def, the fallback, not-deferred and upload-ahead reasons), and
 * the text and JSON summaries.  Must never: call CUDA (the summary runs at exit, when the runtime
 * may already be torn down); include or call anything of engine/, front/ or collector/ (what the
 * summary needs from above, the copy routine's name, its caller hands to pw_stats_write).
 */
#define _GNU_SOURCE
#include "pw.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

pw_stats pw_st;

const char *const pw_mem_names[PW_MEM_N] = {"unknown", "pageable", "pinned", "device", "managed"};
const char *const pw_dir_names[PW_DIR_N] = {"H2D", "D2H", "D2D", "H2H"};
static const char *const path_names[PW_PATH_N] = {"ring", "pinned_only", "d2h"};

#define PW_FB_NAME(id, name, text) name,
const char *const pw_fallback_names[PW_FB_N] = {PW_FALLBACK_LIST(PW_FB_NAME)};
const char *const pw_not_deferred_names[PW_ND_GUARD] = {PW_NOT_DEFERRED_LIST(PW_FB_NAME)};
const char *const pw_keep_names[PW_KEEP_N] = {PW_KEEP_LIST(PW_FB_NAME)};
#undef PW_FB_NAME
const char *const pw_fa_reason_names[PW_FA_NREASONS] = {
#define PW_FA_NAME(id, name) name,
    PW_FA_REASONS(PW_FA_NAME)
#undef PW_FA_NAME
};
/* The guard's reasons follow the engine's in pw_st.not_deferred (PW_ND_GUARD + reason). */
#define PW_GUARD_NAME(id, name) name,
static const char *const guard_reason_names[] = {"ok", PW_GUARD_REASONS(PW_GUARD_NAME)};
#undef PW_GUARD_NAME
_Static_assert(sizeof guard_reason_names / sizeof *guard_reason_names <= PW_ND_N - PW_ND_GUARD,
               "pw_st.not_deferred has no room for every reason of the guard");
#define ND_COUNT (PW_ND_GUARD + (int)(sizeof guard_reason_names / sizeof *guard_reason_names))

static const char *not_deferred_name(int r) {
  return r < PW_ND_GUARD ? pw_not_deferred_names[r] : guard_reason_names[r - PW_ND_GUARD];
}

/* The hook table needs only names and classes: pw_hook_ids.def lists them, so this file needs
 * neither front's lists nor a CUDA header. */
#define PW_HOOK_ID(name, klass) [PW_H_##name] = {#name, PW_CLASS_##klass},
const pw_hook_info pw_hook_table[PW_HOOK_COUNT] = {
#include "pw_hook_ids.def"
};
#undef PW_HOOK_ID
const int pw_hook_count = PW_HOOK_COUNT;

uint64_t pw_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pw_stats_reset(void) {
  memset(&pw_st, 0, sizeof pw_st);
}

static uint64_t anchor_ticks, anchor_ns;
void pw_ticks_anchor(void) {
  anchor_ns = pw_now_ns();
  anchor_ticks = pw_ticks();
}

/* Nanoseconds of a hook: clock time plus counter ticks converted at the rate measured between
 * the anchor and now. */
static uint64_t hook_ns(int i) {
  uint64_t ns = pw_get(&pw_st.hook_ns[i]), ticks = pw_get(&pw_st.hook_ticks[i]);
  if (!ticks) return ns;
  uint64_t dt = pw_ticks() - anchor_ticks, dn = pw_now_ns() - anchor_ns;
  if (!anchor_ticks || !dt) return ns;
  return ns + (uint64_t)((double)ticks * (double)dn / (double)dt);
}

/* A growing text buffer; the summary is written once, at exit, so malloc is fine here. */
typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static void bprintf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf_t *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->p && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + (size_t)n + 1)
      cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return;
    b->p = q;
    b->cap = cap;
  }
}

static const char *human_bytes(uint64_t v, char *buf, size_t n) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = (double)v;
  int u = 0;
  while (x >= 1024 && u < 4)
    x /= 1024, u++;
  if (u == 0)
    snprintf(buf, n, "%llu B", (unsigned long long)v);
  else
    snprintf(buf, n, "%.2f %s", x, units[u]);
  return buf;
}

static double ms(uint64_t ns) {
  return (double)ns / 1e6;
}

static uint64_t total_hook_calls(void) {
  uint64_t t = 0;
  for (int i = 0; i < pw_hook_count; i++)
    t += pw_get(&pw_st.hook_calls[i]);
  return t;
}

static const char *mode_name(void) {
  static const char *const m[] = {"off", "observe", "stage"};
  long long v = pw_option_get(PW_OPT_MODE);
  return v >= 0 && v <= 2 ? m[v] : "?";
}

static const char *no_calls_note =
    "no CUDA call was intercepted: the program may not use CUDA, or reach it in a way pinwheel "
    "does not see; see README, 'Programs without the shared CUDA runtime'";

static const char *off_note = "mode off: calls pass straight through and are not counted";

/* Why CUDA could not be used, when the top file found out (pw_stats_set_cause). */
static char cause_note[256];

void pw_stats_set_cause(const char *why) {
  snprintf(cause_note, sizeof cause_note, "CUDA is unusable here: %s; nothing was staged or traced",
           why);
}

static const char *empty_note(void) {
  if (pw_option_get(PW_OPT_MODE) == PW_MODE_OFF) return off_note;
  return cause_note[0] ? cause_note : no_calls_note;
}

/* The staging copy routine's name, as pw_stats_write was given it (the engine's, engine.h). */
static const char *copy_routine_name = "";
static const char *copy_routine(void) {
  return copy_routine_name;
}

/* The copies the program made, by direction and memory kinds. */
static void text_copies(buf_t *b) {
  char h1[32];
  bprintf(b, "  %-30s %10s %12s %14s\n", "copies", "calls", "bytes", "host blocked");
  for (int d = 0; d < PW_DIR_N; d++)
    for (int s = 0; s < PW_MEM_N; s++)
      for (int t = 0; t < PW_MEM_N; t++) {
        pw_counter3 *c = &pw_st.copies[d][s][t];
        uint64_t calls = pw_get(&c->calls);
        if (!calls) continue;
        char label[64];
        snprintf(label, sizeof label, "%s %s -> %s", pw_dir_names[d], pw_mem_names[s],
                 pw_mem_names[t]);
        bprintf(b, "  %-30s %10llu %12s %11.3f ms\n", label, (unsigned long long)calls,
                human_bytes(pw_get(&c->bytes), h1, sizeof h1), ms(pw_get(&c->ns)));
      }
}

/* Sync elision: the syncs that returned early, those made for real by reason, the fences. */
static void text_elision(buf_t *b) {
  uint64_t kept = 0;
  for (int k = 0; k < PW_KEEP_N; k++)
    kept += pw_get(&pw_st.sync_kept[k]);
  bprintf(b, "  syncs elided %llu, kept %llu", (unsigned long long)pw_get(&pw_st.sync_elided),
          (unsigned long long)kept);
  int any = 0;
  for (int k = 0; k < PW_KEEP_N; k++)
    if (pw_get(&pw_st.sync_kept[k]))
      bprintf(b, "%s%s %llu", any++ ? ", " : " (", pw_keep_names[k],
              (unsigned long long)pw_get(&pw_st.sync_kept[k]));
  bprintf(b, "%s; streams fenced %llu, waits before a query %llu\n", any ? ")" : "",
          (unsigned long long)pw_get(&pw_st.sync_fences),
          (unsigned long long)pw_get(&pw_st.sync_settled));
}

/* A host sync: of a stream or the device (HOST_SYNC), or of an event (EVENT_SYNC). */
static int is_sync(int i) {
  return pw_hook_table[i].klass == PW_CLASS_HOST_SYNC ||
         pw_hook_table[i].klass == PW_CLASS_EVENT_SYNC;
}

/* Its host syncs and kernel launches. */
static void text_calls(buf_t *b) {
  bprintf(b, "  %-30s %10s %27s\n", "host syncs", "calls", "host blocked");
  for (int i = 0; i < pw_hook_count; i++) {
    if (!is_sync(i) || !pw_get(&pw_st.hook_calls[i])) continue;
    bprintf(b, "  %-30s %10llu %24.3f ms\n", pw_hook_table[i].name,
            (unsigned long long)pw_get(&pw_st.hook_calls[i]), ms(hook_ns(i)));
  }
  bprintf(b, "  %-30s %51.3f ms\n", "longest sync", ms(pw_get(&pw_st.sync_longest_ns)));
  bprintf(b, "  %-30s %10s\n", "kernel launches", "calls");
  for (int i = 0; i < pw_hook_count; i++) {
    if (pw_hook_table[i].klass != PW_CLASS_LAUNCH || !pw_get(&pw_st.hook_calls[i])) continue;
    bprintf(b, "  %-30s %10llu\n", pw_hook_table[i].name,
            (unsigned long long)pw_get(&pw_st.hook_calls[i]));
  }
}

/* On a host of several NUMA nodes: each device's node, where its pool landed, the threads. */
static void text_numa(buf_t *b) {
  for (int d = 0; d < PW_NUMA_DEVICES; d++) {
    uint64_t node = pw_get(&pw_st.numa_device_node[d]), pool = pw_get(&pw_st.numa_pool_node[d]);
    if (!node) continue;
    bprintf(b, "  NUMA: device %d on node %llu, its pinned pool on node ", d,
            (unsigned long long)node - 1);
    bprintf(b, pool ? "%llu\n" : "unknown\n", (unsigned long long)pool - 1);
  }
  uint64_t tn = pw_get(&pw_st.numa_threads_node), ct = pw_get(&pw_st.numa_copy_threads);
  if (tn) {
    bprintf(b, "  NUMA: staging threads on node %llu (%llu CPUs; %llu threads moved there)",
            (unsigned long long)tn - 1, (unsigned long long)pw_get(&pw_st.numa_cpus),
            (unsigned long long)pw_get(&pw_st.numa_threads_placed));
    if (ct) { /* the default thread count, capped to this process's share of the node */
      uint64_t all = pw_get(&pw_st.threads);
      bprintf(b, ": a batch uses %llu copy threads", (unsigned long long)ct);
      if (all > ct) bprintf(b, " of %llu", (unsigned long long)all);
    }
    bprintf(b, "\n");
  } else if (pw_get(&pw_st.numa_mixed))
    bprintf(b, "  NUMA: devices on several nodes; staging threads not placed\n");
}

/* "numa": the devices' nodes and their pools' (null: unknown, or a host of one node), the
 * staging threads' node (null: not placed) and CPUs, the copy threads a batch uses when the
 * default count was capped to the node (null: not capped), "mixed" when devices sit on several. */
static void json_numa(buf_t *b) {
  bprintf(b, "\"numa\":{\"devices\":[");
  int first = 1;
  for (int d = 0; d < PW_NUMA_DEVICES; d++) {
    uint64_t node = pw_get(&pw_st.numa_device_node[d]), pool = pw_get(&pw_st.numa_pool_node[d]);
    if (!node) continue;
    bprintf(b, "%s{\"device\":%d,\"node\":%llu,\"pool_node\":", first ? "" : ",", d,
            (unsigned long long)node - 1);
    bprintf(b, pool ? "%llu}" : "null}", (unsigned long long)pool - 1);
    first = 0;
  }
  uint64_t tn = pw_get(&pw_st.numa_threads_node), ct = tn ? pw_get(&pw_st.numa_copy_threads) : 0;
  bprintf(b, "],\"threads_node\":");
  bprintf(b, tn ? "%llu" : "null", (unsigned long long)tn - 1);
  bprintf(b, ",\"threads_cpus\":%llu,\"threads_placed\":%llu,\"copy_threads\":",
          (unsigned long long)pw_get(&pw_st.numa_cpus),
          (unsigned long long)pw_get(&pw_st.numa_threads_placed));
  bprintf(b, ct ? "%llu" : "null", (unsigned long long)ct);
  bprintf(b, ",\"mixed\":%s},", pw_get(&pw_st.numa_mixed) ? "true" : "false");
}

/* Uploads ahead of the program's copies (PINWHEEL_FILL_AHEAD, fa.h): a line when there were any. */
static void text_fill_ahead(buf_t *b) {
  char h1[32], h2[32], h3[32];
  if (!pw_get(&pw_st.fa_allocs) && !pw_get(&pw_st.fa_fills.calls)) return;
  bprintf(b,
          "  uploads ahead: the program's pinned allocations made by pinwheel %llu (%s); fills "
          "uploaded as they went %llu (%s, %.3f ms), its copies made from them %llu (%s)",
          (unsigned long long)pw_get(&pw_st.fa_allocs),
          human_bytes(pw_get(&pw_st.fa_alloc_bytes), h1, sizeof h1),
          (unsigned long long)pw_get(&pw_st.fa_fills.calls),
          human_bytes(pw_get(&pw_st.fa_fills.bytes), h2, sizeof h2), ms(pw_get(&pw_st.fa_fills.ns)),
          (unsigned long long)pw_get(&pw_st.fa_used.calls),
          human_bytes(pw_get(&pw_st.fa_used.bytes), h3, sizeof h3));
  if (pw_get(&pw_st.fa_no_room))
    bprintf(b, "; fills not uploaded (no scratch free) %llu",
            (unsigned long long)pw_get(&pw_st.fa_no_room));
  int any = 0;
  for (int r = 0; r < PW_FA_NREASONS; r++) {
    uint64_t n = pw_get(&pw_st.fa_revoked[r]);
    if (!n) continue;
    bprintf(b, "%s%s %llu", any ? ", " : "; given up: ", pw_fa_reason_names[r],
            (unsigned long long)n);
    any = 1;
  }
  bprintf(b, "\n");
}

/* What the engine staged: paths, time, memory, the program's own host copies. */
static void text_staging(buf_t *b) {
  char h1[32], h2[32];
  bprintf(b, "  %-30s %10s %12s %14s\n", "staged copies", "calls", "bytes", "host blocked");
  for (int p = 0; p < PW_PATH_N; p++) {
    pw_counter3 *c = &pw_st.staged[p];
    bprintf(b, "  %-30s %10llu %12s %11.3f ms\n", path_names[p],
            (unsigned long long)pw_get(&c->calls), human_bytes(pw_get(&c->bytes), h1, sizeof h1),
            ms(pw_get(&c->ns)));
  }
  bprintf(b,
          "  staging copies %.3f ms (%llu threads, %s; %llu parts by the pool's workers, %llu "
          "batches alone with the pool busy); waiting for space %.3f ms (%llu waits); "
          "other copies %.3f ms; setup %.3f ms\n",
          ms(pw_get(&pw_st.staging_memcpy_ns)), (unsigned long long)pw_get(&pw_st.threads),
          copy_routine(), (unsigned long long)pw_get(&pw_st.pool_parts),
          (unsigned long long)pw_get(&pw_st.pool_busy), ms(pw_get(&pw_st.wait_space_ns)),
          (unsigned long long)pw_get(&pw_st.wait_space_events), ms(pw_get(&pw_st.wait_lock_ns)),
          ms(pw_get(&pw_st.setup_ns)));
  bprintf(b, "  pinned staging %s, device ring %s\n",
          human_bytes(pw_get(&pw_st.pinned_bytes_allocated), h1, sizeof h1),
          human_bytes(pw_get(&pw_st.ring_bytes_allocated), h2, sizeof h2));
  uint64_t left[PW_UNMAP_LEFT_N];
  for (int i = 0; i < PW_UNMAP_LEFT_N; i++)
    left[i] = pw_get(&pw_st.shm_unmaps_left[i]);
  if (pw_get(&pw_st.shm_unmaps_deferred) || left[PW_UNMAP_QUEUE_FULL] || left[PW_UNMAP_NO_ROOM] ||
      left[PW_UNMAP_MOVE_FAILED])
    bprintf(b,
            "  shared-memory batches unmapped off the calling thread: %llu (left to it: queue "
            "full %llu, no room in /dev/shm %llu, move failed %llu)\n",
            (unsigned long long)pw_get(&pw_st.shm_unmaps_deferred),
            (unsigned long long)left[PW_UNMAP_QUEUE_FULL],
            (unsigned long long)left[PW_UNMAP_NO_ROOM],
            (unsigned long long)left[PW_UNMAP_MOVE_FAILED]);
  text_elision(b);
  text_numa(b);
  text_fill_ahead(b);
  if (pw_get(&pw_st.host_copies[0].calls) || pw_get(&pw_st.host_copies[1].calls))
    bprintf(b,
            "  the program's memcpy into its pinned memory %llu (%s), out of it %llu (%s), on the "
            "staging threads: %.3f ms\n",
            (unsigned long long)pw_get(&pw_st.host_copies[0].calls),
            human_bytes(pw_get(&pw_st.host_copies[0].bytes), h1, sizeof h1),
            (unsigned long long)pw_get(&pw_st.host_copies[1].calls),
            human_bytes(pw_get(&pw_st.host_copies[1].bytes), h2, sizeof h2),
            ms(pw_get(&pw_st.host_copies[0].ns) + pw_get(&pw_st.host_copies[1].ns)));
}

/* Deferral, and what was not deferred or not staged, by reason. */
static void text_reasons(buf_t *b) {
  char h1[32];
  if (pw_get(&pw_st.deferred.calls) || pw_get(&pw_st.guard_writes_waited))
    bprintf(b,
            "  deferred copies %llu (%s), host blocked %.3f ms, their copy-in %.3f ms; program "
            "writes that waited for the guard %llu (%.3f ms)\n",
            (unsigned long long)pw_get(&pw_st.deferred.calls),
            human_bytes(pw_get(&pw_st.deferred.bytes), h1, sizeof h1),
            ms(pw_get(&pw_st.deferred.ns)), ms(pw_get(&pw_st.defer_copyin_ns)),
            (unsigned long long)pw_get(&pw_st.guard_writes_waited),
            ms(pw_get(&pw_st.guard_wait_ns)));
  int nd_any = 0;
  for (int r = 0; r < ND_COUNT; r++) {
    uint64_t n = pw_get(&pw_st.not_deferred[r]);
    if (!n) continue;
    bprintf(b, "%s%s %llu", nd_any ? ", " : "  staged, not deferred: ", not_deferred_name(r),
            (unsigned long long)n);
    nd_any = 1;
  }
  if (nd_any) bprintf(b, "\n");
  if (pw_get(&pw_st.xla_unstaged_clients))
    bprintf(b, "  XLA's CUDA clients created with XLA's own staging off: %llu\n",
            (unsigned long long)pw_get(&pw_st.xla_unstaged_clients));
  if (pw_get(&pw_st.defer_aborted))
    bprintf(b, "  deferred copy-ins abandoned (their side stream failed or stalled): %llu\n",
            (unsigned long long)pw_get(&pw_st.defer_aborted));
  if (pw_get(&pw_st.internal_errors))
    bprintf(b, "  INTERNAL ERRORS: %llu (please report)\n",
            (unsigned long long)pw_get(&pw_st.internal_errors));
  int any = 0;
  for (int f = 0; f < PW_FB_N; f++) {
    uint64_t n = pw_get(&pw_st.fallbacks[f]);
    if (!n) continue;
    bprintf(b, "%s%s %llu (%s)", any ? ", " : "  not staged: ", pw_fallback_names[f],
            (unsigned long long)n, human_bytes(pw_get(&pw_st.fallback_bytes[f]), h1, sizeof h1));
    any = 1;
  }
  if (any) bprintf(b, "\n");
}

static void write_text(buf_t *b) {
  int pid = (int)getpid();
  bprintf(b, "pinwheel[%d]: summary (pinwheel %s, mode %s)\n", pid, PW_VERSION, mode_name());
  if (total_hook_calls() == 0) {
    bprintf(b, "pinwheel[%d]: %s\n", pid, empty_note());
    return;
  }
  text_copies(b);
  text_calls(b);
  if (pw_option_get(PW_OPT_MODE) == PW_MODE_STAGE) {
    text_staging(b);
    text_reasons(b);
  }
}

static void json_counter(buf_t *b, pw_counter3 *c) {
  bprintf(b, "\"calls\":%llu,\"bytes\":%llu,\"host_ns\":%llu",
          (unsigned long long)pw_get(&c->calls), (unsigned long long)pw_get(&c->bytes),
          (unsigned long long)pw_get(&c->ns));
}

/* Uploads ahead of the program's copies (fa.h): the "fill_ahead" object, and a comma. */
static void json_fill_ahead(buf_t *b) {
  bprintf(
      b,
      "\"fill_ahead\":{\"allocs\":%llu,\"alloc_bytes\":%llu,\"upload_bytes\":%llu,\"no_room\":%llu,"
      "\"fills\":{",
      (unsigned long long)pw_get(&pw_st.fa_allocs),
      (unsigned long long)pw_get(&pw_st.fa_alloc_bytes),
      (unsigned long long)pw_get(&pw_st.fa_upload_bytes),
      (unsigned long long)pw_get(&pw_st.fa_no_room));
  json_counter(b, &pw_st.fa_fills);
  bprintf(b, "},\"used\":{");
  json_counter(b, &pw_st.fa_used);
  bprintf(b, "},\"revoked\":{");
  for (int r = 0; r < PW_FA_NREASONS; r++)
    bprintf(b, "%s\"%s\":%llu", r ? "," : "", pw_fa_reason_names[r],
            (unsigned long long)pw_get(&pw_st.fa_revoked[r]));
  bprintf(b, "}},");
}

typedef struct {
  const char *key;
  _Atomic uint64_t *v;
} json_scalar;

/* "key":value,... of n counters, no comma after the last */
static void json_scalars(buf_t *b, const json_scalar *t, size_t n) {
  for (size_t i = 0; i < n; i++)
    bprintf(b, "%s\"%s\":%llu", i ? "," : "", t[i].key, (unsigned long long)pw_get(t[i].v));
}

/* The "staging" object: the paths' counters, the program's copies to and from its pinned memory,
 * the engine's times and sizes, the unmapper's counts. */
static void json_staging(buf_t *b) {
  bprintf(b, "\"staging\":{");
  for (int p = 0; p < PW_PATH_N; p++) {
    bprintf(b, "\"%s\":{", path_names[p]);
    json_counter(b, &pw_st.staged[p]);
    bprintf(b, "},");
  }
  bprintf(b, "\"host_copies_into_pinned\":{");
  json_counter(b, &pw_st.host_copies[0]);
  bprintf(b, "},\"host_copies_out_of_pinned\":{");
  json_counter(b, &pw_st.host_copies[1]);
  bprintf(b, "},");
  static const json_scalar before[] = {
      {"memcpy_ns", &pw_st.staging_memcpy_ns},
      {"wait_space_ns", &pw_st.wait_space_ns},
      {"wait_space_events", &pw_st.wait_space_events},
      {"wait_lock_ns", &pw_st.wait_lock_ns},
      {"ring_pieces", &pw_st.ring_pieces},
      {"sync_elided", &pw_st.sync_elided},
      {"pinned_bytes", &pw_st.pinned_bytes_allocated},
      {"ring_bytes", &pw_st.ring_bytes_allocated},
      {"internal_errors", &pw_st.internal_errors},
      {"threads", &pw_st.threads},
  };
  static const json_scalar after[] = {
      {"setup_ns", &pw_st.setup_ns},
      {"d2h_fresh", &pw_st.d2h_fresh},
      {"d2h_advised", &pw_st.d2h_advised},
      {"d2h_mapped_ahead", &pw_st.d2h_mapped_ahead},
      {"xla_unstaged_clients", &pw_st.xla_unstaged_clients},
      {"device_resets", &pw_st.device_resets},
      {"pool_parts", &pw_st.pool_parts},
      {"pool_busy", &pw_st.pool_busy},
      {"shm_unmaps_deferred", &pw_st.shm_unmaps_deferred},
  };
  static const json_scalar left[PW_UNMAP_LEFT_N] = {
      {"queue_full", &pw_st.shm_unmaps_left[PW_UNMAP_QUEUE_FULL]},
      {"no_room", &pw_st.shm_unmaps_left[PW_UNMAP_NO_ROOM]},
      {"move_failed", &pw_st.shm_unmaps_left[PW_UNMAP_MOVE_FAILED]},
  };
  json_scalars(b, before, sizeof before / sizeof before[0]);
  bprintf(b, ",\"copy_routine\":\"%s\",", copy_routine());
  json_scalars(b, after, sizeof after / sizeof after[0]);
  bprintf(b, ",\"shm_unmaps_left\":{");
  json_scalars(b, left, PW_UNMAP_LEFT_N);
  bprintf(b, "}},");
}

static void write_json(buf_t *b) {
  bprintf(b, "{\"schema\":\"pinwheel-stats/1\",\"version\":\"%s\",\"pid\":%d,\"mode\":\"%s\",",
          PW_VERSION, (int)getpid(), mode_name());
  bprintf(b, "\"intercepted\":%llu,", (unsigned long long)total_hook_calls());
  if (total_hook_calls() == 0) bprintf(b, "\"note\":\"%s\",", empty_note());
  bprintf(b, "\"calls\":{");
  for (int i = 0, n = 0; i < pw_hook_count; i++)
    if (pw_hook_table[i].klass != PW_CLASS_ENQUEUE) /* never counted */
      bprintf(b, "%s\"%s\":{\"calls\":%llu,\"host_ns\":%llu}", n++ ? "," : "",
              pw_hook_table[i].name, (unsigned long long)pw_get(&pw_st.hook_calls[i]),
              (unsigned long long)hook_ns(i));
  bprintf(b, "},\"copies\":[");
  int first = 1;
  for (int d = 0; d < PW_DIR_N; d++)
    for (int s = 0; s < PW_MEM_N; s++)
      for (int t = 0; t < PW_MEM_N; t++) {
        pw_counter3 *c = &pw_st.copies[d][s][t];
        if (!pw_get(&c->calls)) continue;
        bprintf(b, "%s{\"direction\":\"%s\",\"src\":\"%s\",\"dst\":\"%s\",", first ? "" : ",",
                pw_dir_names[d], pw_mem_names[s], pw_mem_names[t]);
        json_counter(b, c);
        bprintf(b, "}");
        first = 0;
      }
  uint64_t sync_calls = 0, sync_ns = 0, launches = 0;
  for (int i = 0; i < pw_hook_count; i++) {
    if (is_sync(i)) {
      sync_calls += pw_get(&pw_st.hook_calls[i]);
      sync_ns += pw_get(&pw_st.hook_ns[i]);
    } else if (pw_hook_table[i].klass == PW_CLASS_LAUNCH) {
      launches += pw_get(&pw_st.hook_calls[i]);
    }
  }
  bprintf(b, "],\"syncs\":{\"calls\":%llu,\"host_ns\":%llu,\"longest_ns\":%llu},",
          (unsigned long long)sync_calls, (unsigned long long)sync_ns,
          (unsigned long long)pw_get(&pw_st.sync_longest_ns));
  bprintf(b, "\"launches\":%llu,", (unsigned long long)launches);
  json_staging(b);
  bprintf(b, "\"fallbacks\":{");
  for (int f = 0; f < PW_FB_N; f++)
    bprintf(b, "%s\"%s\":{\"calls\":%llu,\"bytes\":%llu}", f ? "," : "", pw_fallback_names[f],
            (unsigned long long)pw_get(&pw_st.fallbacks[f]),
            (unsigned long long)pw_get(&pw_st.fallback_bytes[f]));
  bprintf(b, "},\"sync_kept\":{");
  for (int k = 0; k < PW_KEEP_N; k++)
    bprintf(b, "%s\"%s\":%llu", k ? "," : "", pw_keep_names[k],
            (unsigned long long)pw_get(&pw_st.sync_kept[k]));
  bprintf(b, "},\"sync_fences\":%llu,\"sync_settled\":%llu",
          (unsigned long long)pw_get(&pw_st.sync_fences),
          (unsigned long long)pw_get(&pw_st.sync_settled));
  bprintf(b, ",\"deferred\":{");
  json_counter(b, &pw_st.deferred);
  bprintf(b, ",\"copyin_ns\":%llu,\"guard_writes_waited\":%llu,\"guard_wait_ns\":%llu},",
          (unsigned long long)pw_get(&pw_st.defer_copyin_ns),
          (unsigned long long)pw_get(&pw_st.guard_writes_waited),
          (unsigned long long)pw_get(&pw_st.guard_wait_ns));
  json_numa(b);
  json_fill_ahead(b);
  bprintf(b, "\"not_deferred\":{");
  for (int r = 0; r < ND_COUNT; r++)
    if (r != PW_ND_GUARD) /* the guard's "ok" */
      bprintf(b, "%s\"%s\":%llu", r ? "," : "", not_deferred_name(r),
              (unsigned long long)pw_get(&pw_st.not_deferred[r]));
  bprintf(b, "}}\n");
}

void pw_stats_write(int fd, int format, const char *routine) {
  buf_t b = {0};
  copy_routine_name = routine ? routine : "";
  if (format == PW_FMT_JSON)
    write_json(&b);
  else
    write_text(&b);
  if (b.p) pw_write_all(fd, b.p, b.len);
  free(b.p);
}
