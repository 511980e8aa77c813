/*
 * cmd_search.h - the `moetune` commands of the search floor
 * (search/cmd_search.c, search/cmd_tune.c): each takes main's argc/argv and
 * returns the exit code (core/cli.h has the codes they share).
 */
#ifndef MT_CMD_SEARCH_H
#define MT_CMD_SEARCH_H

int mt_cmd_tune(int argc, char **argv);
int mt_cmd_status(int argc, char **argv);
int mt_cmd_demo(int argc, char **argv);
int mt_cmd_render(int argc, char **argv);
int mt_cmd_recipe(int argc, char **argv);
int mt_cmd_optimum(int argc, char **argv);
int mt_cmd_bisect(int argc, char **argv);
int mt_cmd_model_screen(int argc, char **argv);

#endif
