/* pinwheel.c — the pinwheel command: dispatch to run / options / report / diff / export.
 *
 * Owns: the top-level --help and --version.  Must never: print usage to stdout on an error
 * (usage errors go to stderr with exit status 2).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pw.h"

static const char usage[] =
    "usage: pinwheel <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [--stats] [--json] [--stats-file F] [--mode M] [--sync elide] [--trace PATH]\n"
    "      [--] CMD ARGS...\n"
    "                 run CMD with libpinwheel.so preloaded (exit status: CMD's)\n"
    "  options        print the PINWHEEL_* options table (name, default, meaning)\n"
#ifdef PW_HAVE_ANALYZER
    "  report [--format text|json|html|svg] [-o FILE] [--step N] [--steps all]\n"
    "         [--step-range REGEX] [--threshold NAME=VALUE] TRACE...\n"
    "                 overlap report from CUPTI traces (torch.profiler JSON[.gz], nsys SQLite;\n"
    "                 - = standard input): per device and per step, idle split, kernels, what-if\n"
    "  diff [--format text|json] BEFORE AFTER\n"
    "                 the figures of two traces side by side, per-step medians included\n"
    "  export --format chrome -o OUT TRACE\n"
    "                 Chrome trace JSON for Perfetto: a track per device stream and host thread\n"
#endif
    "\n"
    "  --help         this text\n"
    "  --version      the version\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("pinwheel %s\n", PW_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "run")) return pw_cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "options")) {
    fflush(stdout);
    pw_options_print(1);
    return 0;
  }
#ifdef PW_HAVE_ANALYZER
  if (!strcmp(cmd, "report")) return pw_cmd_report(argc - 1, argv + 1);
  if (!strcmp(cmd, "diff")) return pw_cmd_diff(argc - 1, argv + 1);
  if (!strcmp(cmd, "export")) return pw_cmd_export(argc - 1, argv + 1);
#endif
  fprintf(stderr, "pinwheel: unknown command '%s'\n\n%s", cmd, usage);
  return 2;
}
