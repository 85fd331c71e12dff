/* options.c — the one options table of libpinwheel (PINWHEEL_* environment variables).
 *
 * Owns: names, defaults, meanings and parsing; the table `pinwheel options` prints (the README's
 * options table is this table); the options and values removed, each warned about once when set;
 * the PINWHEEL_* variables it does not know (a misspelt option), each warned about once at parse.
 * Values are parsed once, by whichever thread asks first (init at the first hooked call, or a
 * thread that reads an option before it, as the NVTX path may), and only read through
 * pw_option_get: a reader either parses them or waits until they are parsed, so no thread ever sees
 * a value being reset or half-parsed.
 * Must never: abort on a bad, removed or unknown variable (it warns once, naming the variable and
 * what is kept), or scan the environment anywhere but in the one parse.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { T_ENUM, T_BOOL, T_SIZE, T_INT, T_STRING, T_SECONDS, T_RANGE };

typedef struct pw_option_desc {
  const char *name;
  int type;
  long long def;
  const char *const *choices; /* T_ENUM: NULL-terminated, index = value */
  const char *meaning;
} pw_option_desc;

static const char *const mode_choices[] = {"off", "observe", "stage", NULL};
static const char *const log_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const fmt_choices[] = {"text", "json", NULL};
static const char *const sync_choices[] = {"keep", "elide", NULL};
static const char *const capture_choices[] = {"none", "cudaProfilerApi", NULL};

#define KiB 1024LL
#define MiB (1024LL * 1024)
static const pw_option_desc table[PW_OPT_COUNT] = {
    [PW_OPT_MODE] = {"PINWHEEL_MODE", T_ENUM, PW_MODE_STAGE, mode_choices,
                     "off: pass every call through; observe: count, classify and time calls; "
                     "stage: also stage eligible pageable copies through pinned memory"},
    [PW_OPT_LOG] = {"PINWHEEL_LOG", T_ENUM, PW_LOG_WARN, log_choices,
                    "log level on stderr: error, warn, info, debug"},
    [PW_OPT_STATS] = {"PINWHEEL_STATS", T_BOOL, 0, NULL, "print a summary at exit"},
    [PW_OPT_STATS_FILE] =
        {"PINWHEEL_STATS_FILE", T_STRING, 0, NULL,
         "append the summary to this file instead of stderr, one per process that "
         "used CUDA, each in one write (json: one object a line; %p = pid)"},
    [PW_OPT_STATS_FORMAT] = {"PINWHEEL_STATS_FORMAT", T_ENUM, PW_FMT_TEXT, fmt_choices,
                             "summary format: text or json"},
    [PW_OPT_MIN_BYTES] = {"PINWHEEL_MIN_BYTES", T_SIZE, 64 * KiB, NULL,
                          "smallest copy that is staged (smaller ones go to CUDA unchanged)"},
    [PW_OPT_HOST_POOL] = {"PINWHEEL_HOST_POOL", T_SIZE, 96 * MiB, NULL,
                          "pinned staging memory per device, allocated at the first staged copy; a "
                          "copy larger than it returns with this much of its DMA still queued, "
                          "which keeps the DMA engine busy while the program prepares the next"},
    [PW_OPT_DEVICE_RING] =
        {"PINWHEEL_DEVICE_RING", T_SIZE, 512 * MiB, NULL,
         "device ring per device that lets the DMA run under earlier compute, at "
         "least 4 chunks (a smaller value is raised, with a warning); 0 = no "
         "ring (DMA on the caller's stream)"},
    [PW_OPT_CHUNK] = {"PINWHEEL_CHUNK", T_SIZE, 4 * MiB, NULL,
                      "staging chunk: the DMA of one chunk overlaps the memcpy of the next"},
    [PW_OPT_THREADS] = {"PINWHEEL_THREADS", T_INT, 0, NULL,
                        "threads for the staging copies, the calling thread included; 0 = the "
                        "CPUs this process may use (affinity, cgroup limit) divided by "
                        "LOCAL_WORLD_SIZE, at most 16; placed on a GPU's NUMA node, at most "
                        "that node's CPUs divided among the local ranks sharing it"},
    [PW_OPT_STRICT] = {"PINWHEEL_STRICT", T_BOOL, 0, NULL,
                       "cudaMemcpy waits for the stream before staging, as CUDA documents"},
    [PW_OPT_DEFER] =
        {"PINWHEEL_DEFER", T_BOOL, 1, NULL,
         "in stage mode, a staged host-to-device copy of 1 MiB or more that fits in half the "
         "pinned pool returns once it is queued: its copy into pinned memory runs afterwards on "
         "a pinwheel thread, and until a page of the source is copied every write to it waits "
         "(the source guard, userfaultfd write-protect; see README); 0 = copy in before "
         "returning"},
    [PW_OPT_SYNC] = {"PINWHEEL_SYNC", T_ENUM, PW_SYNC_ELIDE, sync_choices,
                     "elide: in stage mode, a stream sync right after a pageable host-to-device "
                     "copy on that stream returns at once, and pinwheel keeps every other stream, "
                     "query and host read from seeing it (see README); keep: every sync waits"},
    [PW_OPT_NUMA] = {"PINWHEEL_NUMA", T_BOOL, 1, NULL,
                     "on a host of several NUMA nodes, allocate each device's pinned pool on its "
                     "GPU's node and run the staging threads on that node's CPUs; 0 = leave "
                     "memory and threads where they are"},
    [PW_OPT_FILL_AHEAD] =
        {"PINWHEEL_FILL_AHEAD", T_SIZE, 0, NULL,
         "in stage mode, device memory per device for uploads made ahead of the program's own "
         "copies (CuPy's cp.asarray): the pinned allocations of 1 MiB or more (runtime or "
         "driver) become pinwheel's, a large memcpy or memmove into one is uploaded as it is "
         "filled, and the program's cudaMemcpyAsync (or cuMemcpyHtoDAsync) of those bytes "
         "becomes a device copy; 0 = off"},
    [PW_OPT_TRACE] = {"PINWHEEL_TRACE", T_STRING, 0, NULL,
                      "write a CUPTI trace (Chrome trace JSON, as torch.profiler writes it) of the "
                      "run to this file, in every mode (%p = pid, %r = RANK, else LOCAL_RANK, "
                      "else 0; ranks given a name without either get -rankN); a process that "
                      "never uses CUDA writes nothing"},
    [PW_OPT_CUPTI] = {"PINWHEEL_CUPTI", T_STRING, 0, NULL,
                      "libcupti to trace with, when none is loaded and the usual search (then "
                      "the toolkit's directory known at build time) finds none"},
    [PW_OPT_TRACE_DELAY] = {"PINWHEEL_TRACE_DELAY", T_SECONDS, 0, NULL,
                            "the trace holds only the CUDA calls made this many seconds or more "
                            "after the first one (and their GPU work)"},
    [PW_OPT_TRACE_DURATION] = {"PINWHEEL_TRACE_DURATION", T_SECONDS, 0, NULL,
                               "the trace holds only the calls made in this many seconds from "
                               "the delay's end; 0 = to the end of the run"},
    [PW_OPT_TRACE_CAPTURE] = {"PINWHEEL_TRACE_CAPTURE", T_ENUM, 0, capture_choices,
                              "cudaProfilerApi: the trace holds only the calls made between "
                              "the program's cudaProfilerStart and cudaProfilerStop (or "
                              "cuProfilerStart/Stop), every such range"},
    [PW_OPT_TRACE_STEPS] = {"PINWHEEL_TRACE_STEPS", T_RANGE, 0, NULL,
                            "A-B: the trace holds only iterations A to B of the program's loop "
                            "(A >= 3), counted from the repeating launches and copies pinwheel "
                            "sees (see README)"},
};

/* Options and values that were removed: each is ignored with one warning naming it removed and
 * why (docs/RESULTS.md, "Options, decided by measurement"), never an abort.  value NULL: the whole
 * variable; else that value of a kept option (the default is kept). */
static const struct {
  const char *name, *value, *why;
} removed[] = {
    {"PINWHEEL_HELP", NULL, "`pinwheel options` prints the table"},
    {"PINWHEEL_MAX_BYTES", NULL, "every copy size measured was faster staged"},
    {"PINWHEEL_D2H", NULL,
     "device-to-host copies are always staged: faster at every size measured"},
    {"PINWHEEL_NT_STORES", NULL, "plain stores into the pinned pool measured faster"},
    {"PINWHEEL_D2H_FRESH", NULL, "huge pages, mapped ahead, measured fastest; always used"},
    {"PINWHEEL_HOST_COPIES", NULL, "threaded copies into pinned memory measured faster; always on"},
    {"PINWHEEL_XLA_STAGING", NULL, "pinwheel's staging of JAX's copies measured faster than XLA's"},
    {"PINWHEEL_SETUP", NULL,
     "a device's staging state is always set up by its first staged copy: faster than in the "
     "background"},
    {"PINWHEEL_DEFER", "large", "deferring copies larger than half the pool measured slower"},
};

/* PINWHEEL_* names that are not options but are set or read by pinwheel's own parts: never
 * warned about as unknown.  The build's switches (PINWHEEL_TSAN, PINWHEEL_TESTS, ...) are CMake
 * cache variables, never read from the environment, so an exported one is reported. */
static const char *const not_options[] = {
    "PINWHEEL_ROOT_PID", /* set by `pinwheel run` for the shim: the process whose summary prints */
    "PINWHEEL_LIBRARY",  /* read by `pinwheel run`, set by the Python package */
};

/* 1 when name=s is a removed option, or a removed value (def: the default kept); warned about. */
static int warn_removed(const char *name, const char *s, const char *def) {
  for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
    if (strcmp(removed[i].name, name) || (removed[i].value && strcasecmp(removed[i].value, s)))
      continue;
    if (removed[i].value)
      pw_log(PW_LOG_WARN, "%s=%s was removed (%s); using the default, %s", name, s, removed[i].why,
             def);
    else
      pw_log(PW_LOG_WARN, "%s was removed and is ignored (%s)", name, removed[i].why);
    return 1;
  }
  return 0;
}

/* Edit distance between a and b, ignoring case, with a swap of two neighbours counted as one
 * edit; names longer than NAME_MAX_CMP count as far from everything. */
#define NAME_MAX_CMP 64
static int name_distance(const char *a, size_t na, const char *b, size_t nb) {
  if (na > NAME_MAX_CMP || nb > NAME_MAX_CMP) return NAME_MAX_CMP;
  int row[3][NAME_MAX_CMP + 1]; /* rows i-2, i-1 and i of the table, by i % 3 */
  for (size_t j = 0; j <= nb; j++)
    row[0][j] = (int)j;
  for (size_t i = 1; i <= na; i++) {
    int *cur = row[i % 3], *up = row[(i - 1) % 3], *up2 = row[(i + 1) % 3];
    cur[0] = (int)i;
    for (size_t j = 1; j <= nb; j++) {
      int same = toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 1]);
      int d = up[j - 1] + !same;
      if (up[j] + 1 < d) d = up[j] + 1;
      if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
      if (i > 1 && j > 1 && toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 2]) &&
          toupper((unsigned char)a[i - 2]) == toupper((unsigned char)b[j - 1]) &&
          up2[j - 2] + 1 < d)
        d = up2[j - 2] + 1;
      cur[j] = d;
    }
  }
  return row[na % 3][nb];
}

/* The names pinwheel knows, by index: the options, then the names it reads that are not options
 * (the names a misspelling may mean), then the removed options; NULL past the end. */
#define NOT_OPTIONS (sizeof not_options / sizeof *not_options)
static const char *known(size_t i) {
  if (i < PW_OPT_COUNT) return table[i].name;
  if ((i -= PW_OPT_COUNT) < NOT_OPTIONS) return not_options[i];
  if ((i -= NOT_OPTIONS) < sizeof removed / sizeof *removed) return removed[i].name;
  return NULL;
}

/* The known name closest to name[0, n) (an option, or a name pinwheel reads): within 2 edits, or
 * one a prefix of the other past "PINWHEEL_"; NULL when none is. */
static const char *closest_name(const char *name, size_t n) {
  const char *best = NULL;
  int best_d = NAME_MAX_CMP + 1;
  size_t base = strlen("PINWHEEL_");
  for (size_t i = 0; i < PW_OPT_COUNT + NOT_OPTIONS; i++) {
    const char *k = known(i);
    size_t nk = strlen(k), shorter = n < nk ? n : nk;
    int d = name_distance(name, n, k, nk);
    int prefix = shorter > base && !strncasecmp(name, k, shorter);
    if ((d <= 2 || prefix) && d < best_d) best = k, best_d = d;
  }
  return best;
}

/* 1 when name[0, n) is an option, a removed option or a name pinwheel reads. */
static int known_name(const char *name, size_t n) {
  const char *k;
  for (size_t i = 0; (k = known(i)); i++)
    if (strlen(k) == n && !memcmp(k, name, n)) return 1;
  return 0;
}

/* One warning for each PINWHEEL_* variable of the environment that pinwheel does not know (a
 * misspelt option would otherwise be ignored without a word), naming the closest option. */
static void warn_unknown(void) {
  extern char **environ;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "PINWHEEL_", 9)) continue;
    const char *eq = strchr(*e, '=');
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    if (known_name(*e, n)) continue;
    int again = 0; /* the same name twice in the environment: warned once */
    for (char **f = environ; f < e && !again; f++)
      again = !strncmp(*f, *e, n) && ((*f)[n] == '=' || !(*f)[n]);
    if (again) continue;
    const char *near = closest_name(*e, n);
    if (near)
      pw_log(PW_LOG_WARN, "%.*s is not an option (did you mean %s?); see `pinwheel options`",
             (int)n, *e, near);
    else
      pw_log(PW_LOG_WARN, "%.*s is not an option; see `pinwheel options`", (int)n, *e);
  }
}

static long long values[PW_OPT_COUNT];
static const char *strings[PW_OPT_COUNT];
/* 0 unread, 1 parsed.  Readers check it with acquire; the parse runs under parse_lock, so two
 * threads asking at once parse once, and the release store publishes every value. */
static atomic_int parsed;
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

const char *pw_option_name(pw_option_t opt) {
  return table[opt].name;
}

static int parse_bool(const char *s, long long *out) {
  static const char *const yes[] = {"1", "on", "yes", "true", NULL};
  static const char *const no[] = {"0", "off", "no", "false", NULL};
  for (int i = 0; yes[i]; i++)
    if (!strcasecmp(s, yes[i])) return *out = 1, 0;
  for (int i = 0; no[i]; i++)
    if (!strcasecmp(s, no[i])) return *out = 0, 0;
  return -1;
}

static int parse_size(const char *s, long long *out, int allow_suffix) {
  while (isspace((unsigned char)*s))
    s++;
  if (!isdigit((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1;
  unsigned long long mul = 1;
  if (allow_suffix && *end) {
    switch (toupper((unsigned char)*end)) {
    case 'K':
      mul = 1ULL << 10;
      break;
    case 'M':
      mul = 1ULL << 20;
      break;
    case 'G':
      mul = 1ULL << 30;
      break;
    case 'T':
      mul = 1ULL << 40;
      break;
    default:
      return -1;
    }
    end++;
    if (toupper((unsigned char)*end) == 'I') end++;
    if (toupper((unsigned char)*end) == 'B') end++;
  }
  if (*end) return -1;
  if (v > (unsigned long long)(9223372036854775807LL) / mul) return -1;
  *out = (long long)(v * mul);
  return 0;
}

int pw_option_parse(pw_option_t opt, const char *text, long long *out) {
  if (opt < 0 || opt >= PW_OPT_COUNT || !text) return -1;
  const pw_option_desc *d = &table[opt];
  switch (d->type) {
  case T_ENUM:
    for (int i = 0; d->choices[i]; i++)
      if (!strcasecmp(text, d->choices[i])) return *out = i, 0;
    return -1;
  case T_BOOL:
    return parse_bool(text, out);
  case T_SIZE:
    return parse_size(text, out, 1);
  case T_INT: {
    long long v;
    if (parse_size(text, &v, 0) || v > 1024) return -1;
    return *out = v, 0;
  }
  case T_STRING:
    return *text ? (*out = 1, 0) : -1;
  case T_SECONDS: { /* seconds, decimals allowed, an optional "s": kept in ms */
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0) || v > 1e9) return -1;
    if (*end == 's') end++;
    if (*end) return -1;
    return *out = (long long)(v * 1000 + 0.5), 0;
  }
  case T_RANGE: { /* A-B, 3 <= A <= B: the loop is recognised during its first two iterations */
    long long a, b;
    const char *dash = strchr(text, '-');
    char first[32];
    if (!dash || (size_t)(dash - text) >= sizeof first) return -1;
    memcpy(first, text, (size_t)(dash - text));
    first[dash - text] = 0;
    if (parse_size(first, &a, 0) || parse_size(dash + 1, &b, 0)) return -1;
    if (a < 3 || b < a || b > 0x7fffffff) return -1;
    return *out = a << 32 | b, 0;
  }
  }
  return -1;
}

static void default_text(const pw_option_desc *d, char *buf, size_t n) {
  switch (d->type) {
  case T_ENUM:
    snprintf(buf, n, "%s", d->choices[d->def]);
    break;
  case T_BOOL:
    snprintf(buf, n, "%d", (int)d->def);
    break;
  case T_SECONDS:
    snprintf(buf, n, "%llds", d->def / 1000);
    break;
  case T_RANGE:
    snprintf(buf, n, "(all)");
    break;
  case T_STRING: /* unset: the summary goes to stderr; no trace is written; CUPTI is searched */
    snprintf(buf, n, "%s", d == &table[PW_OPT_STATS_FILE] ? "(stderr)" : "(none)");
    break;
  case T_SIZE:
    if (d->def && d->def % MiB == 0)
      snprintf(buf, n, "%lldM", d->def / MiB);
    else if (d->def && d->def % KiB == 0)
      snprintf(buf, n, "%lldK", d->def / KiB);
    else
      snprintf(buf, n, "%lld", d->def);
    break;
  default:
    snprintf(buf, n, "%lld", d->def);
  }
}

void pw_options_reset(void) {
  for (int i = 0; i < PW_OPT_COUNT; i++)
    values[i] = table[i].def, strings[i] = NULL;
  atomic_store_explicit(&parsed, 0, memory_order_release);
}

/* Parse the environment into values[] and strings[] (parse_lock held, parsed still 0). */
static void parse_env(void) {
  for (int i = 0; i < PW_OPT_COUNT; i++)
    values[i] = table[i].def, strings[i] = NULL;
  /* The log level first, so that warnings about other options obey it. */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < PW_OPT_COUNT; i++) {
      if ((pass == 0) != (i == PW_OPT_LOG)) continue;
      const char *s = getenv(table[i].name);
      if (!s) continue;
      long long v;
      if (pw_option_parse((pw_option_t)i, s, &v) == 0) {
        values[i] = v;
        if (table[i].type == T_STRING) strings[i] = s;
      } else {
        char def[32];
        default_text(&table[i], def, sizeof def);
        if (!warn_removed(table[i].name, s, def))
          pw_log(PW_LOG_WARN, "%s=%s is not valid; using the default, %s", table[i].name, s, def);
      }
      if (i == PW_OPT_LOG) pw_log_set_level((int)values[i]);
    }
  }
  for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
    const char *s = removed[i].value ? NULL : getenv(removed[i].name);
    if (s) warn_removed(removed[i].name, s, NULL);
  }
  warn_unknown();
}

void pw_options_init(void) {
  if (atomic_load_explicit(&parsed, memory_order_acquire)) return;
  pthread_mutex_lock(&parse_lock);
  if (!atomic_load_explicit(&parsed, memory_order_relaxed)) {
    parse_env();
    atomic_store_explicit(&parsed, 1, memory_order_release);
  }
  pthread_mutex_unlock(&parse_lock);
}

void pw_options_after_fork_child(void) {
  pthread_mutex_init(&parse_lock, NULL);
}

long long pw_option_get(pw_option_t opt) {
  pw_options_init();
  return values[opt];
}

const char *pw_option_str(pw_option_t opt) {
  pw_options_init();
  return strings[opt];
}

void pw_options_print(int fd) {
  char line[512];
  int n = snprintf(line, sizeof line, "%-24s %-10s %s\n", "variable", "default", "meaning");
  pw_write_all(fd, line, (size_t)n);
  for (int i = 0; i < PW_OPT_COUNT; i++) {
    char def[32];
    default_text(&table[i], def, sizeof def);
    n = snprintf(line, sizeof line, "%-24s %-10s %s\n", table[i].name, def, table[i].meaning);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    pw_write_all(fd, line, (size_t)n);
  }
}
