/*
 * cli.h - what every `moetune` command shares: the exit codes, one
 * option-table parser (the same --help, the same errors and exit 64 for
 * every command), and the session most commands open (contract, plugins,
 * base config).
 *
 * The commands live with the floor they serve (core/cmd_core.c,
 * workers/cmd_workers.c, search/cmd_search.c); search/main.c dispatches.
 *
 * Parsing: options may stand anywhere among the positional words; a value
 * is the next word whatever it looks like ("--seed -3" is the value -3,
 * refused by the number check) or follows '=' ("--format=env").  A word
 * that starts with '-' and is no option of the command is an error, as is a
 * positional word past the command's last.  "--" ends the options where the
 * command takes a program after it (import, rank-exec); elsewhere it is an
 * unexpected argument.
 */
#ifndef MT_CLI_H
#define MT_CLI_H

#include "contract.h"
#include "diag.h"
#include "kv.h"
#include "registry.h"

#include <stddef.h>
#include <stdio.h>

#define MT_EXIT_BAD_INPUT 2
/* check: the contract is legal but its base does not fit by the estimate
 * (the code `tune` uses when nothing fits) */
#define MT_EXIT_NO_FIT 4
/* tune: a validated winner that is not ablated (the budget left at least
 * one accepted change without its leave-one-out A/B) */
#define MT_EXIT_NOT_ABLATED 5
#define MT_EXIT_USAGE 64
/* tune, bisect: another moetune process owns the directory (core/dirlock.h);
 * sysexits' EX_TEMPFAIL: try again once it has ended */
#define MT_EXIT_BUSY 75

typedef enum mt_opt_kind {
    MT_OPT_FLAG,   /* int *: set to 1                                     */
    MT_OPT_STR,    /* const char **: the last one given wins              */
    MT_OPT_LIST,   /* mt_cli_list *: every one given, in order            */
    MT_OPT_INT,    /* int *: whole, >= min, <= INT_MAX                    */
    MT_OPT_U64,    /* unsigned long long *: whole, >= 0                   */
    MT_OPT_DOUBLE  /* double *: finite, >= min (> min when min_open)      */
} mt_opt_kind;

/* Every value of a repeated option (MT_OPT_LIST); mt_cli_parse allocates
 * v, mt_cli_list_clear frees it (the words stay argv's). */
typedef struct mt_cli_list {
    const char **v;
    size_t n;
} mt_cli_list;

typedef struct mt_opt {
    const char *name;    /* "--dir"                                        */
    const char *alias;   /* another spelling ("-o"), or NULL               */
    const char *metavar; /* "DIR" in --help; NULL for a flag               */
    mt_opt_kind kind;
    void *dest;
    double min; /* INT, DOUBLE: the least value                            */
    int min_open;
    int *seen;  /* when not NULL: set to 1 when the option is given        */
    const char *help;
} mt_opt;

/* A command's table: usage is the synopsis printed on a usage error and
 * at the head of --help ("usage: moetune ..." lines); opts ends with an
 * entry whose name is NULL.  Positional words fill pos[0..max_pos-1]; fewer
 * than min_pos is "missing POS_NAME".  rest, when not NULL, takes the words
 * after "--". */
typedef struct mt_cmd {
    const char *name;
    const char *usage;
    const mt_opt *opts;
    const char **pos;
    int min_pos, max_pos;
    const char *pos_name;
    mt_cli_list *rest;
} mt_cmd;

#define MT_CLI_HELP 1

/* Parses argv[first..argc-1] by c.  0; MT_CLI_HELP after printing --help
 * to stdout (exit 0); or MT_EXIT_USAGE after naming the problem and the
 * usage on stderr. */
int mt_cli_parse(const mt_cmd *c, int argc, char **argv, int first);

/* Prints c's usage to stderr and returns MT_EXIT_USAGE: for the checks a
 * command makes after parsing (options that go together). */
int mt_cli_usage(const mt_cmd *c);

void mt_cli_list_clear(mt_cli_list *l);

/* --trust-plugin-path (any command): load the files a contract names in
 * launch.plugin_path.  Without it a contract names plugins only by name
 * (launch.plugins), and its files are refused: checking or rendering an
 * untrusted contract must never run code from it. */
extern int mt_cli_trust_plugin_path;

/* The options every command takes, anywhere before a "--"
 * (--trust-plugin-path, --plugin-timeout S): removed from argv.  0, or
 * MT_EXIT_USAGE with a message. */
int mt_cli_global_options(int *argc, char **argv);

/* ---- the session: contract + plugins + base config ---- */
typedef struct mt_session {
    mt_contract *contract;
    mt_registry *reg;
    mt_kv *cfg;
    mt_diag *load_diag; /* plugin load problems: warnings for most commands */
} mt_session;

void mt_session_clear(mt_session *s);

/* The built-ins and MOETUNE_PLUGIN_PATH (the operator's), and with
 * --trust-plugin-path the contract's plugin_path, resolved against the
 * contract's directory; without it each of those is a refusal in
 * s->load_diag. */
void mt_session_load_plugins(mt_session *s);

/* s's plugin load problems as warnings on stderr. */
void mt_session_warn_load(const mt_session *s);

/* Contract + plugins + base config; an exit code (0 = go on).  quiet_load:
 * no warnings for plugin load problems. */
int mt_session_open(mt_session *s, const char *path, int quiet_load);

/* The --set knob=value changes on s->cfg; 0 or MT_EXIT_BAD_INPUT. */
int mt_session_apply_sets(mt_session *s, const char *const *sets, size_t n);

/* mt_session_open, the sets (cleared, whatever the outcome), and the
 * result checked legal.  0, or an exit code with s cleared. */
int mt_session_open_legal(mt_session *s, const char *path, mt_cli_list *sets);

/* One line a violation: "[rule, class] message (plugin P)". */
void mt_cli_print_violations(const mt_violations *vs, FILE *out, const char *indent);

/* The simulator beside this executable (build tree or install), unless
 * MOETUNE_SIM names another. */
void mt_cli_sim_path(char *buf, size_t n);

/* mkdir -p DIR (0755); 0, or -1 after saying why on stderr, naming cmd. */
int mt_cli_make_dir(const char *cmd, const char *dir);

/* Takes DIR for this process (core/dirlock.h): the lock's descriptor, kept
 * open until the process ends; or -1 after printing the refusal, with the
 * exit code in *rc (MT_EXIT_BUSY when another process owns DIR). */
int mt_cli_own_dir(const char *cmd, const char *dir, const char *what, int *rc);

#endif
