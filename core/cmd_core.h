/*
 * cmd_core.h - the `moetune` commands of the core floor (core/cmd_core.c):
 * each takes main's argc/argv (argv[1] the command's name) and returns the
 * exit code.  core/cli.h has the parser and the exit codes they share.
 */
#ifndef MT_CMD_CORE_H
#define MT_CMD_CORE_H

int mt_cmd_plugins(int argc, char **argv);
int mt_cmd_check(int argc, char **argv);
int mt_cmd_import(int argc, char **argv);
int mt_cmd_candidates(int argc, char **argv);
int mt_cmd_parse(int argc, char **argv);
int mt_cmd_runs(int argc, char **argv);
int mt_cmd_space(int argc, char **argv);

/* check CONTRACT: exit 0 legal and the base fits, 2 not legal, 4 legal but
 * the base does not fit by the estimate (demo runs it first). */
int mt_cmd_check_contract(const char *path);

#endif
