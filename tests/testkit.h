/*
 * testkit.h - shared set-up for the Check suites: a contract from
 * examples/contracts (or text), the built-in plugins of this build, and the
 * base config, all real.
 */
#ifndef MT_TESTKIT_H
#define MT_TESTKIT_H

#include "config.h"
#include "contract.h"
#include "diag.h"
#include "evaluate.h"
#include "registry.h"
#include "render.h"

#include <cjson/cJSON.h>

typedef struct tk {
    mt_contract *contract;
    mt_registry *reg;
    mt_kv *cfg;
    mt_diag *diag;
} tk;

/* Opens examples/contracts/<name>; aborts the test on any problem. */
tk *tk_open(const char *name);
/* Same from a path; returns NULL (diag kept in *d) on contract problems. */
tk *tk_open_path(const char *path, mt_diag *d);
void tk_close(tk **t);

/* Applies "knob=value" sets (commas in a value stand for spaces); aborts on a
 * bad knob or value. */
void tk_set(tk *t, const char *assignment);

/* The built-in plugins of this build (MT_BUILD_DIR/plugins), finished. */
mt_registry *tk_registry(mt_diag *d);

/* Runs a suite with the default fork mode; the exit status for main(). */
struct Suite;
int tk_run(struct Suite *s);

/* DIR/bundle.json parsed (the test fails when it is missing or not JSON);
 * caller frees with cJSON_Delete. */
cJSON *tk_bundle(const char *dir);

/* Path helpers: caller frees. */
char *tk_example(const char *name);

/* Reads a whole file; caller frees. NULL when unreadable. */
char *tk_slurp(const char *path);
/* Writes text to a new temporary file named after tag; caller frees path. */
char *tk_write_temp(const char *tag, const char *text);

/* A finished child: its exit status and both captured streams. */
typedef struct tk_proc {
    int status;
    char *out, *err;
} tk_proc;
/* Runs program with args (NULL-terminated, at most 94), stdout and stderr
 * captured in temporary files; aborts the test when it cannot start or is
 * killed by a signal.  Free with tk_proc_free. */
tk_proc tk_spawn(const char *program, const char *const *args);
void tk_proc_free(tk_proc *r);

/* Every word of a (a Bridge rendering) is an override that Megatron-Bridge's
 * Hydra accepts (mt_hydra_check_bridge) on a path of
 * core/dialects/bridge/<table>.tsv ("main", "v0.2.2") or a model fact the
 * table does not list, in none of the known-wrong forms (mixed_precision.*,
 * comm_overlap.*, an unquoted layout, the other version's eval paths), with
 * the dataset's sequence length beside model.seq_length; fails the test
 * naming the first word that is not. */
void tk_check_bridge(const mt_strlist *a, const char *table);

#endif
