/*
 * cmd_workers.h - the `moetune` commands of the workers floor
 * (workers/cmd_workers.c): each takes main's argc/argv and returns the exit
 * code.  rank-exec is workers/rankexec.h's mt_rank_exec_main.
 */
#ifndef MT_CMD_WORKERS_H
#define MT_CMD_WORKERS_H

int mt_cmd_measure(int argc, char **argv);
int mt_cmd_profile(int argc, char **argv);
int mt_cmd_worker(int argc, char **argv);
int mt_cmd_keygen(int argc, char **argv);
int mt_cmd_calibration(int argc, char **argv);

#endif
