/* cli.h — subcommands of the pinwheel command. Each returns the process exit status. */
#ifndef PW_CLI_H
#define PW_CLI_H

int pw_cmd_run(int argc, char **argv);
int pw_cmd_report(int argc, char **argv);
int pw_cmd_diff(int argc, char **argv);
int pw_cmd_export(int argc, char **argv);

/* help.c: the texts of --help, from which the man page is generated too. */
extern const char pw_help_summary[], pw_help_about[], pw_help_usage[], pw_help_exit[],
    pw_help_more[], pw_help_options[], pw_help_run[], pw_help_report[], pw_help_diff[],
    pw_help_export[], pw_help_thresholds[], pw_help_library_meaning[], pw_help_library_default[];

/* help.c: the options each subcommand accepts, beside its --help text.  The parsers take an
 * option only from its command's table (args.c), and a test checks that every one is in the
 * command's --help with its value, so that --help lists all that is accepted. */
typedef struct pw_opt {
  const char *name;  /* "--format", "-o" */
  const char *value; /* as --help shows it ("FILE", "text|json"); NULL: a flag.  A value with no
                      * capital letter is its words: "all|summary" takes all or summary only */
} pw_opt;
typedef struct pw_cmd_opts {
  const char *cmd;  /* "report" */
  const char *help; /* its --help text */
  const pw_opt *opts;
  int nopts;
} pw_cmd_opts;
extern const pw_cmd_opts pw_cmd_run_opts, pw_cmd_options_opts, pw_cmd_report_opts, pw_cmd_diff_opts,
    pw_cmd_export_opts;
extern const pw_cmd_opts *const pw_cmds[]; /* all of them, NULL-terminated */

/* args.c: a usage error, said on standard error in one line, "pinwheel CMD: MESSAGE", and the
 * hint "see 'pinwheel CMD --help'" (cmd NULL: the top level); returns 2, the exit status. */
int pw_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* argv[*i], an option of c: its entry, with *value its value (argv[*i + 1]; *i moves past it);
 * NULL when argv[*i] is no option of c, lacks its value or its value is not one of the option's
 * words, after pw_usage has said so. */
const pw_opt *pw_opt_take(const pw_cmd_opts *c, int argc, char **argv, int *i, const char **value);

#endif
