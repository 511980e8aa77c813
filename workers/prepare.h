/*
 * prepare.h - a bisection's prepare step: argv templates run before a
 * revision is measured (check out, build, pull a container), never through
 * a shell, once per revision and work directory.
 *
 * A template is one string split into words at blanks; '...' and "..."
 * group words (no escapes, no expansion of any kind).  Placeholders:
 * {rev} (the revision), {work} (the revision's fresh work directory),
 * {repo} (the --repo path, when given).  Steps run in order, with cwd the
 * work directory and MOETUNE_REV / MOETUNE_WORK in the environment; the
 * first that does not exit 0 ends the prepare: exit 125 means skip (the
 * revision cannot be tested, as `git bisect run` reads it), anything else
 * is a typed failure (prepare_failed, or launch_error when the program
 * cannot be run, timeout past the limit).
 *
 * The result is recorded next to the work directory (WORK.prepared), so a
 * revision is prepared once however many replicates measure it and however
 * often the bisection is killed and resumed; concurrent jobs of the same
 * revision wait on a lock (WORK.lock).  A prepare killed half way left no
 * record: it is run again on a freshly emptied work directory.  The step's
 * own processes hold the lock as well (through their shepherd, until the
 * last of them is gone), so that run waits for a killed step's processes to
 * be stopped instead of racing them for the directory.
 */
#ifndef MT_PREPARE_H
#define MT_PREPARE_H

#include "diag.h"
#include "kv.h"
#include "sink.h"

#include <stddef.h>

enum mt_prepare_status { MT_PREP_OK = 0, MT_PREP_SKIP = 1, MT_PREP_FAILED = 2 };

/* Splits one template into words (appended to out).  0, or -EINVAL with the
 * problem in d (an unterminated quote, no words). */
int mt_prepare_split(const char *tmpl, mt_strlist *out, mt_diag *d);

/* The words of every template, placeholders expanded ({work} kept when
 * work is NULL), as argv lists: out[i] for template i (caller frees each
 * with mt_strlist_clear and the array with free).  0 or -EINVAL/-ENOMEM. */
int mt_prepare_expand(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                      const char *work, mt_strlist **out, mt_diag *d);

/* Runs the prepare of rev in work (see above).  outcome gets "ok", "skip"
 * or the typed failure, evidence one line.  Returns enum mt_prepare_status,
 * or negative (with d) when it could not be attempted at all (the work
 * directory cannot be made). */
int mt_prepare_run(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                   const char *work, double time_limit_s, char *outcome, size_t no,
                   char *evidence, size_t ne, mt_diag *d);

/* A bisect job's prepare (mt_prepare_run in WORK_ROOT/ID, ID from
 * mt_prepare_rev_id; WORK_ROOT is created), with the job's memo written
 * under memo_key in st when the revision cannot be measured: outcome skip,
 * prepare_failed, launch_error or timeout, or infra when the prepare could
 * not even be attempted.  work gets the revision's work directory.  1: go
 * on and measure; 0: the memo is written; negative: it could not be. */
struct mt_store;
int mt_prepare_job(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                   const char *work_root, double time_limit_s, struct mt_store *st,
                   const char *memo_key, char *work, size_t nwork, mt_diag *d);

/* A revision's id: the first 16 hex digits of the SHA-256 of its name (its
 * work directory's name and its jobs' memo id). */
void mt_prepare_rev_id(const char *rev, char id[17]);

/* Whether rev can be put into a command word or a container image name as
 * it is: a commit, tag, stack version or image (nvcr.io/nvidia/nemo:25.11,
 * sha256:..., a .sqsh path) of letters, digits and . _ - : / @ + ~ ^, at
 * most 200 characters, not starting with '-' (it would read as an option).
 * 0, or -EINVAL with why (the first character refused and where). */
int mt_prepare_rev_ok(const char *rev, char *why, size_t n);

#endif
