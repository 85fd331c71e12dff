/* help.c — every text the pinwheel command prints for --help, in one place.
 *
 * Owns: the usage texts of pinwheel and of each subcommand, the exit statuses, and the options
 * each subcommand accepts (the tables its parser takes them from, checked against its text).
 * `--help` prints them; the pinwheel(1) man page is generated from them at build time (man.c),
 * together with the options table (`pinwheel options`) and the report's thresholds, so the two
 * cannot drift.  Must never: use words a user has not met (a tool's internal label, a file of
 * ours).
 */
#include <stddef.h>

#include "cli.h"

const char pw_help_summary[] =
    "overlap a CUDA program's pageable copies to the GPU with its compute, and report on it";

const char pw_help_about[] =
    "pinwheel makes the pageable host-to-device copies of an unmodified CUDA program (PyTorch,\n"
    "JAX, a CUDA binary) overlap its GPU compute, with no change to the program, and shows from a\n"
    "trace of the run how much copy time was hidden and what is still exposed.\n";

const char pw_help_usage[] =
    "usage: pinwheel <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [--stats] [--json] [--stats-file F] [--mode M] [--sync keep] [--trace PATH]\n"
    "      [--trace-delay S] [--trace-duration S] [--trace-capture cudaProfilerApi]\n"
    "      [--trace-steps A-B] [--] CMD ARGS...\n"
    "                 run CMD under pinwheel (its exit status is CMD's)\n"
    "  options        list the PINWHEEL_* environment variables: name, default, meaning\n"
#ifdef PW_HAVE_ANALYZER
    "  report [--format text|json|html|svg] [-o FILE] [--step N] [--steps all|summary]\n"
    "         [--step-range REGEX] [--whole-trace] [--threshold NAME=VALUE] TRACE...\n"
    "                 how much copy time hid under GPU compute, per GPU and per training step,\n"
    "                 where the GPU sat idle, and what pinwheel would gain; TRACE is a\n"
    "                 torch.profiler trace (JSON or .json.gz), an Nsight Systems SQLite export\n"
    "                 or a trace of `pinwheel run --trace`; - reads standard input\n"
    "  diff [--format text|json] [--step-range REGEX] [--whole-trace] BEFORE AFTER\n"
    "                 two traces' figures side by side (e.g. without and with pinwheel)\n"
    "  export [--format chrome] [--step-range REGEX] -o OUT TRACE\n"
    "                 the trace for the Perfetto viewer: a track per GPU stream and host thread\n"
#endif
    "\n"
    "  --help         this text (COMMAND --help: that command's)\n"
    "  --version      the version\n";

const char pw_help_exit[] =
    "pinwheel run exits with the status of CMD; with 2 on a usage error, 127 when CMD or\n"
    "libpinwheel.so cannot be found and 126 when CMD cannot be run.  The other commands exit with\n"
    "0 when done and 2 on a usage error or a trace that cannot be read (one line on standard\n"
    "error names the file and the problem).\n";

const char pw_help_more[] =
    "README.md (what pinwheel does, how to run it, how to read a report), docs/DESIGN.md (how\n"
    "it works) and docs/RESULTS.md (what was measured), installed with pinwheel's documentation\n"
    "(/usr/share/doc/pinwheel in the Debian package).\n";

const char pw_help_options[] =
    "usage: pinwheel options\n"
    "Prints the PINWHEEL_* environment variables pinwheel reads: name, default, meaning.  They\n"
    "are read once, at the program's first CUDA call; sizes take K, M or G suffixes; a bad value\n"
    "prints one warning naming the variable and the default kept; a removed one, one warning\n"
    "naming it removed; any other PINWHEEL_* variable, one warning naming the closest option\n"
    "if one is close.  `pinwheel run` passes them on.\n";

#define PW_LIBRARY_MEANING "the libpinwheel.so that `pinwheel run` preloads"
#define PW_LIBRARY_DEFAULT "the one installed beside the command"

const char pw_help_run[] =
    "usage: pinwheel run [--stats] [--json] [--stats-file F] [--mode off|observe|stage]\n"
    "                    [--sync keep|elide] [--trace PATH] [--trace-delay S]\n"
    "                    [--trace-duration S] [--trace-capture cudaProfilerApi]\n"
    "                    [--trace-steps A-B] [--] CMD ARGS...\n"
    "Runs CMD with pinwheel (libpinwheel.so) preloaded.  In stage mode, the default, its\n"
    "copies from pageable memory to the GPU are staged through pinned memory so that they\n"
    "overlap its compute; observe only counts and times its CUDA calls; off changes nothing.\n"
    "The exit status is CMD's.\n"
    "  --stats         print a summary of what pinwheel saw and did when CMD exits\n"
    "  --json          the summary as JSON\n"
    "  --stats-file F  write the summary to file F, not standard error; F starts afresh and\n"
    "                  each process of CMD that uses CUDA appends its own (%p = process id)\n"
    "  --mode M        off, observe or stage\n"
    "  --sync S        elide (the default): a stream sync right after a staged copy on that\n"
    "                  stream returns at once, fenced from every other stream, query and host\n"
    "                  read; keep: every sync waits\n"
    "  --trace PATH    record a trace of the run that `pinwheel report` reads, in every mode\n"
    "                  (--mode off: the program as it is); %p = process id, %r = rank; the\n"
    "                  program's NVTX ranges are included (NVTX_INJECTION64_PATH is set to\n"
    "                  libpinwheel_nvtx.so unless already set)\n"
    "  --trace-delay S     the trace holds only the CUDA calls made S seconds or more after\n"
    "                      the program's first one (and their GPU work)\n"
    "  --trace-duration S  ... and less than S seconds after the delay's end\n"
    "  --trace-capture cudaProfilerApi\n"
    "                      ... and between the program's cudaProfilerStart and cudaProfilerStop\n"
    "  --trace-steps A-B   ... and in iterations A to B (3 <= A <= B) of the program's loop, "
    "which\n"
    "                      pinwheel finds from its repeating launches and copies as it runs\n"
    "PINWHEEL_LIBRARY: " PW_LIBRARY_MEANING "\n"
    "(default: " PW_LIBRARY_DEFAULT ").\n"
    "Every other PINWHEEL_* variable in the environment is passed on (`pinwheel options`).\n";

const char pw_help_library_meaning[] = PW_LIBRARY_MEANING,
           pw_help_library_default[] = PW_LIBRARY_DEFAULT;

const char pw_help_report[] =
    "usage: pinwheel report [--format text|json|html|svg] [-o FILE] [--step N]\n"
    "                       [--steps all|summary] [--step-range REGEX] [--whole-trace]\n"
    "                       [--threshold NAME=VALUE]... TRACE...\n"
    "Reads a trace of a CUDA program and says how much of its copy time was hidden under GPU\n"
    "compute, what is still exposed, which copies came from pageable memory, where the GPU sat\n"
    "idle and why, and how long a step would take under pinwheel.  TRACE is a torch.profiler\n"
    "trace (JSON, plain or .gz), an Nsight Systems SQLite export (nsys export --type sqlite) or a\n"
    "trace of `pinwheel run --trace`; `-` reads standard input.  Several traces (one per rank):\n"
    "one report, a row per rank.  A step is one training iteration: torch.profiler's\n"
    "ProfilerStep#N, or the NVTX ranges whose names match --step-range; its GPU work is what its\n"
    "CPU code launched, from any thread.  Without either, the steps are the loop's iterations,\n"
    "found from its repeating GPU work.  The figures cover the steps; start-up and teardown are\n"
    "reported apart.\n"
    "  --format F      text (the default), json, html (one self-contained page) or svg (a\n"
    "                  timeline)\n"
    "  -o FILE         write to FILE, not standard output\n"
    "  --step N        figures of step N only (its GPU work, from the previous step's end)\n"
    "  --steps all|summary  all: list every step; summary: none (by default, every step when\n"
    "                  there are at most steps_shown)\n"
    "  --step-range R  steps are the NVTX ranges (or annotations) whose names match R\n"
    "  --whole-trace   figures over the whole trace, start-up and teardown included\n"
    "  --threshold NAME=VALUE  change one of the thresholds and assumptions below\n";

const char pw_help_thresholds[] =
    "Thresholds and what-if assumptions (--threshold NAME=VALUE), each with its default, unit,\n"
    "range (a value outside it is refused) and meaning:\n";

const char pw_help_diff[] =
    "usage: pinwheel diff [--format text|json] [--step-range REGEX] [--whole-trace] BEFORE AFTER\n"
    "The figures of two traces side by side, per GPU, with their differences: step time\n"
    "(median and p95), copy time per step, the part hidden under compute, the part exposed, and\n"
    "the time the host was blocked in pageable copies; over each trace's steps (marked, or\n"
    "inferred from its repeating GPU work), start-up and teardown apart.  --step-range and\n"
    "--whole-trace as for report.  Traces of different GPUs: as many GPUs are compared in order\n"
    "of id; a different number of GPUs is an error (exit 2).\n";

const char pw_help_export[] =
    "usage: pinwheel export [--format chrome] [--step-range REGEX] -o OUT TRACE\n"
    "Writes TRACE as a Chrome trace JSON file that the Perfetto viewer opens: one process per\n"
    "GPU, one track per stream and a track of the steps; the host's CUDA calls under their own\n"
    "names, one track per thread; arrows from each launch to its GPU work.  --step-range as for\n"
    "report.\n";

/* ---- the options each command accepts; every one is in its --help (test_cli_help) ---- */

#define OPTS(c, h, ...)                                                                            \
  static const pw_opt c##_list[] = {__VA_ARGS__};                                                  \
  const pw_cmd_opts pw_cmd_##c##_opts = {#c, h, c##_list, sizeof c##_list / sizeof(pw_opt)}

OPTS(run, pw_help_run, {"--stats", NULL}, {"--json", NULL}, {"--stats-file", "F"},
     {"--mode", "off|observe|stage"}, {"--sync", "keep|elide"}, {"--trace", "PATH"},
     {"--trace-delay", "S"}, {"--trace-duration", "S"}, {"--trace-capture", "cudaProfilerApi"},
     {"--trace-steps", "A-B"});
static const pw_opt options_list[] = {{NULL, NULL}};
const pw_cmd_opts pw_cmd_options_opts = {"options", pw_help_options, options_list, 0};
OPTS(report, pw_help_report, {"--format", "text|json|html|svg"}, {"-o", "FILE"}, {"--step", "N"},
     {"--steps", "all|summary"}, {"--step-range", "REGEX"}, {"--whole-trace", NULL},
     {"--threshold", "NAME=VALUE"});
OPTS(diff, pw_help_diff, {"--format", "text|json"}, {"--step-range", "REGEX"},
     {"--whole-trace", NULL});
OPTS(export, pw_help_export, {"--format", "chrome"}, {"--step-range", "REGEX"}, {"-o", "OUT"});

const pw_cmd_opts *const pw_cmds[] = {&pw_cmd_run_opts,  &pw_cmd_options_opts, &pw_cmd_report_opts,
                                      &pw_cmd_diff_opts, &pw_cmd_export_opts,  NULL};
