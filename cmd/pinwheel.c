/* pinwheel.c — the pinwheel command: dispatch to run / options / report / diff / export.
 *
 * Owns: the top-level --help (its texts are help.c's) and --version.  Must never: print usage to
 * stdout on an error (usage errors go to stderr with exit status 2).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pw.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(pw_help_usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    printf("pinwheel - %s\n\n%s\n%s\nexit status:\n%s\nmore:\n%s", pw_help_summary, pw_help_about,
           pw_help_usage, pw_help_exit, pw_help_more);
    return 0;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("pinwheel %s\n", PW_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "run")) return pw_cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "options")) {
    if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
      fputs(pw_help_options, stdout);
      return 0;
    }
    fflush(stdout);
    pw_options_print(1);
    return 0;
  }
#ifdef PW_HAVE_ANALYZER
  if (!strcmp(cmd, "report")) return pw_cmd_report(argc - 1, argv + 1);
  if (!strcmp(cmd, "diff")) return pw_cmd_diff(argc - 1, argv + 1);
  if (!strcmp(cmd, "export")) return pw_cmd_export(argc - 1, argv + 1);
#endif
  fprintf(stderr, "pinwheel: unknown command '%s'\n\n%s", cmd, pw_help_usage);
  return 2;
}
