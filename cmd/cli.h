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
    pw_help_export[], pw_help_thresholds[];

#endif
