/* pinwheel.c — the pinwheel command: dispatch to run / options / report / diff / export.
 *
 * Owns: the top-level --help (its texts are help.c's) and --version.  Must never: print usage to
 * stdout on an error (a usage error is one line on stderr, and a hint, with exit status 2).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pw.h"

static int is_help(const char *a) {
  return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* `pinwheel options`: no options but --help. */
static int cmd_options(int argc, char **argv) {
  if (argc > 1 && is_help(argv[1])) {
    fputs(pw_help_options, stdout);
    return 0;
  }
  if (argc > 1)
    return pw_usage("options", argv[1][0] == '-' ? "unknown option %s" : "unexpected argument '%s'",
                    argv[1]);
  fflush(stdout);
  pw_options_print(1);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return pw_usage(NULL, "no command given");
  const char *cmd = argv[1];
  int help = is_help(cmd) || !strcmp(cmd, "help"),
      version = !strcmp(cmd, "--version") || !strcmp(cmd, "version");
  if ((help || version) && argc > 2)
    return pw_usage(NULL, "%s takes no arguments, not '%s'", cmd, argv[2]);
  if (help) {
    printf("pinwheel - %s\n\n%s\n%s\nexit status:\n%s\nmore:\n%s", pw_help_summary, pw_help_about,
           pw_help_usage, pw_help_exit, pw_help_more);
    return 0;
  }
  if (version) {
    printf("pinwheel %s\n", PW_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "run")) return pw_cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "options")) return cmd_options(argc - 1, argv + 1);
#ifdef PW_HAVE_ANALYZER
  if (!strcmp(cmd, "report")) return pw_cmd_report(argc - 1, argv + 1);
  if (!strcmp(cmd, "diff")) return pw_cmd_diff(argc - 1, argv + 1);
  if (!strcmp(cmd, "export")) return pw_cmd_export(argc - 1, argv + 1);
#else
  if (!strcmp(cmd, "report") || !strcmp(cmd, "diff") || !strcmp(cmd, "export"))
    return pw_usage(
        NULL, "%s: this pinwheel was built without the analyzer (PINWHEEL_ANALYZER=OFF)", cmd);
#endif
  if (cmd[0] == '-') return pw_usage(NULL, "unknown option %s", cmd);
  return pw_usage(NULL, "unknown command '%s'", cmd);
}
