/* cli.h — subcommands of the pinwheel command. Each returns the process exit status. */
#ifndef PW_CLI_H
#define PW_CLI_H

int pw_cmd_run(int argc, char **argv);
int pw_cmd_report(int argc, char **argv);
int pw_cmd_diff(int argc, char **argv);
int pw_cmd_export(int argc, char **argv);

#endif
