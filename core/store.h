/*
 * store.h - the results store: one SQLite database per tune directory
 * (DIR/moetune.db) holding every run, raw per-step sample, per-GPU memory
 * peak, decision and event of a tune, keyed by the contract's fingerprint.
 *
 * Durability: WAL journal with synchronous=FULL, so every committed write
 * transaction has been fsync'ed to the WAL before the commit returns and
 * survives a crash of the process, the OS or the power.  (NORMAL would only
 * survive a process crash: a power cut could roll back the last results a
 * worker was told were saved, and resume would silently run them again.  A
 * run costs minutes of GPU time and writes one transaction, so the fsync per
 * commit costs nothing that matters.)  Every write is one transaction
 * (BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout instead
 * of failing with SQLITE_BUSY on a lock upgrade); a result's run row, its
 * samples and its memory peaks commit together or not at all.
 *
 * WAL needs shared memory (an mmap'ed -shm file) and POSIX locks that work
 * between every process using the database; network and cluster filesystems
 * (NFS, Lustre, GPFS, CIFS/SMB, CephFS, AFS, BeeGFS, FUSE mounts, ...) do not
 * guarantee that, so opening a store on one is refused (checked with statfs).
 *
 * Idempotency: a run is identified by (config id, kind, replicate, retry);
 * re-sending the same result stores nothing new and answers "duplicate".
 * A replicate is an independent run for statistics; a retry is a re-run of
 * the same replicate after an infrastructure failure.  They are separate
 * columns and never mixed.
 *
 * Times are Unix seconds (UTC, fractional); an absent number is NAN in the
 * structs and NULL in the database.  One mt_store per thread; several
 * processes may open the same store at once, but an mt_store never crosses
 * fork(): a child opens its own.
 */
#ifndef MT_STORE_H
#define MT_STORE_H

#include "contract.h"
#include "diag.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MT_STORE_FILE "moetune.db"
#define MT_STORE_SCHEMA_VERSION 1

typedef struct mt_store mt_store;

/* ---- filesystem check ------------------------------------------------- */

enum mt_fs_class {
    MT_FS_LOCAL = 0,   /* a local filesystem (or one not known to be shared) */
    MT_FS_NETWORK = 1, /* network, cluster or FUSE filesystem: WAL unsafe */
};

/* Classifies a statfs() f_type.  *name (may be NULL) receives a static name
 * ("NFS", "Lustre", "ext4", ...) or NULL when the type is not known; unknown
 * types are MT_FS_LOCAL, since only the listed shared ones are known bad. */
int mt_store_fs_classify(unsigned long f_type, const char **name);

/* statfs(path) -> *f_type; 0, or -errno. */
int mt_store_fs_magic(const char *path, unsigned long *f_type);

/* ---- open / close ----------------------------------------------------- */

/* Opens DIR/moetune.db for contract c, creating DIR (and parents) and the
 * database when absent.  Refuses, with a message in d and NULL:
 *   - DIR on a network filesystem;
 *   - a file that is not a SQLite database, or a SQLite database that is not
 *     a moetune store, or one from a newer schema;
 *   - a store made for another contract: one diag item per differing field,
 *     "batch.global_batch_size: 1024 (store) vs 512 (contract)", with the
 *     contract's file and line.
 * c may be NULL to open an existing store without checking its contract
 * (`moetune runs DIR`); then a missing store is an error, not created.
 * Caller owns the return value; close with mt_store_destroy. */
mt_store *mt_store_open(const char *dir, const mt_contract *c, mt_diag *d);

/* mt_store_open as if DIR lay on a filesystem whose statfs f_type is
 * fs_magic (0: ask statfs).  For tests of the network-filesystem refusal. */
mt_store *mt_store_open_fs(const char *dir, const mt_contract *c, unsigned long fs_magic,
                           mt_diag *d);

/* Closes the database and frees *s; sets *s to NULL.  NULL-safe. */
void mt_store_destroy(mt_store **s);

/* Path of the database file; borrowed, valid until close. */
const char *mt_store_path(const mt_store *s);
/* The stored contract: fingerprint and canonical text; borrowed. */
const char *mt_store_fingerprint(const mt_store *s);
const char *mt_store_contract_text(const mt_store *s);

/* Groups several writes into one transaction.  Each write function also
 * runs alone in its own transaction, or inside the caller's (as a
 * savepoint, so a failed write undoes only itself).  0 or negative. */
int mt_store_begin(mt_store *s, mt_diag *d);
int mt_store_commit(mt_store *s, mt_diag *d);
int mt_store_rollback(mt_store *s);

/* ---- records ---------------------------------------------------------- */

/* One run (job).  On write, strings are borrowed from the caller; on read,
 * the store fills them with strings the struct owns: release with
 * mt_store_run_clear. */
typedef struct mt_store_run {
    int64_t id;                   /* row id; set by the store */
    const char *config_id;        /* 16 hex digits (mt_config_id) */
    const char *config_canonical; /* the config's canonical text; needed the
                                     first time a config id is stored, may be
                                     NULL after.  Read: always filled. */
    const char *kind;             /* fit | screen | profile | validate | bisect */
    int replicate;                /* independent run index for statistics, >= 0 */
    int retry;                    /* re-run after an infra failure, >= 0 */
    const char *outcome;          /* ok|oom|nan|hang|timeout|crash|infra|launch_error|skipped */
    const char *evidence;         /* the line that decided the outcome, or NULL */
    const char *worker;           /* worker name, or NULL */
    const char *fingerprint;      /* JSON object (hosts, gpu_uuids, driver, cuda,
                                     nccl, container, commits), or NULL */
    double started, ended;        /* Unix seconds */
    double wall_s;                /* wall-clock seconds of the run */
    double sim_s;                 /* simulated seconds charged (sim backend) */
    double gpu_hours;             /* GPU-hours charged to the budget */
    const char *log_path;         /* where the rank logs are, or NULL */
} mt_store_run;

/* A loss value by its key in the log ("lm loss", "load_balancing_loss"). */
typedef struct mt_store_loss {
    const char *key;
    double value; /* may be NAN or +-inf: stored as "nan"/"inf"/"-inf" */
} mt_store_loss;

/* One training iteration as parsed from the log.  Read: keys are owned by
 * the array (mt_store_samples_free). */
typedef struct mt_store_sample {
    long iteration;
    double elapsed_ms; /* elapsed time per iteration; NAN when absent */
    double tflops;     /* TFLOP/s/GPU; NAN when absent */
    double grad_norm;  /* NAN when absent or not a number */
    long skipped;      /* skipped iterations reported on this line */
    long nan;          /* NaN iterations reported on this line */
    mt_store_loss *losses;
    size_t n_losses;
} mt_store_sample;

/* The peak memory of one GPU during a run. */
typedef struct mt_store_gpu_mem {
    int rank;            /* global rank, -1 when unknown (NVML sees GPUs) */
    const char *host;    /* may be NULL */
    int gpu;             /* local GPU index, -1 when unknown */
    int64_t peak_bytes;  /* peak used (nvml) / reserved (log) / sim peak */
    int64_t alloc_bytes; /* max allocated (log), -1 when unknown */
    const char *source;  /* nvml | sim | log */
} mt_store_gpu_mem;

/* A run with everything measured in it: stored in one transaction. */
typedef struct mt_store_result {
    mt_store_run run;
    const mt_store_sample *samples;
    size_t n_samples;
    const mt_store_gpu_mem *gpus;
    size_t n_gpus;
} mt_store_result;

/* Stores a result (config if new, run, samples, GPU memory) atomically.
 * Returns 0 when stored, 1 when a run with the same (config id, kind,
 * replicate, retry) is already stored (nothing changes; *run_id gets the
 * stored run's id; when the stored outcome differs from r's, d gets a note
 * naming both), negative with a message in d on bad input or a database
 * error (nothing stored).  Inside mt_store_begin/commit it is a savepoint.
 * run_id may be NULL. */
int mt_store_put_result(mt_store *s, const mt_store_result *r, int64_t *run_id, mt_diag *d);

/* Appends samples / GPU memory rows to an existing run, all in one
 * transaction.  0 or negative (nothing stored). */
int mt_store_add_samples(mt_store *s, int64_t run_id, const mt_store_sample *v, size_t n,
                         mt_diag *d);
int mt_store_add_gpu_memory(mt_store *s, int64_t run_id, const mt_store_gpu_mem *v, size_t n,
                            mt_diag *d);

/* Finds the run (config_id, kind, replicate, retry) for resume; retry -1
 * means the highest retry stored for that replicate.  Returns 1 and fills
 * *out (release with mt_store_run_clear) when found, 0 when not, negative on
 * error. */
int mt_store_find_run(mt_store *s, const char *config_id, const char *kind, int replicate,
                      int retry, mt_store_run *out, mt_diag *d);

/* Every run in id order, optionally only one config and/or kind (NULL =
 * any).  Caller owns *out: mt_store_runs_free(*out, *n).  0 or negative. */
int mt_store_list_runs(mt_store *s, const char *config_id, const char *kind, mt_store_run **out,
                       size_t *n, mt_diag *d);
void mt_store_run_clear(mt_store_run *r);
void mt_store_runs_free(mt_store_run *v, size_t n);

/* A run's samples in iteration order; caller owns *out
 * (mt_store_samples_free).  0 or negative. */
int mt_store_samples(mt_store *s, int64_t run_id, mt_store_sample **out, size_t *n, mt_diag *d);
void mt_store_samples_free(mt_store_sample *v, size_t n);

/* A run's GPU memory rows, hottest first; caller owns *out
 * (mt_store_gpu_memory_free).  0 or negative. */
int mt_store_gpu_memory(mt_store *s, int64_t run_id, mt_store_gpu_mem **out, size_t *n, mt_diag *d);
void mt_store_gpu_memory_free(mt_store_gpu_mem *v, size_t n);

/* A gate decision with its statistics and the runs it rests on. */
typedef struct mt_store_decision {
    int64_t id;               /* set by the store */
    const char *kind;         /* the phase: fit, screen, ablate, validate, bisect, ... */
    const char *variable;     /* the variable changed ("dispatcher"), or NULL */
    const char *candidate_id; /* config id; must be stored (by a run) or given below */
    const char *candidate_canonical;
    const char *control_id; /* config id, or NULL when there is no control */
    const char *control_canonical;
    const char *verdict;    /* better | worse | same | unknown | accepted | rejected */
    const char *statistics; /* JSON object (p values, CI, effect, replicates) or NULL */
    const char *evidence;   /* human-readable evidence, or NULL */
    double created;         /* Unix seconds; NAN = now */
    const int64_t *candidate_runs;
    size_t n_candidate_runs;
    const int64_t *control_runs;
    size_t n_control_runs;
} mt_store_decision;

/* Stores a decision (and its run links) in one transaction; 0 or negative.
 * id may be NULL. */
int mt_store_add_decision(mt_store *s, const mt_store_decision *dec, int64_t *id, mt_diag *d);
/* Every decision in id order, run links filled; caller owns *out
 * (mt_store_decisions_free). */
int mt_store_list_decisions(mt_store *s, mt_store_decision **out, size_t *n, mt_diag *d);
void mt_store_decisions_free(mt_store_decision *v, size_t n);

/* The engine's memo: a JSON summary of a finished job or decision by key.
 * get: 1 and *value (caller frees) when found, 0 when not, negative on
 * error.  put: 0 stored, 1 the key existed (nothing changes), negative on
 * error (a value that is not JSON is refused).  Inside mt_store_begin/commit
 * a put is part of the caller's transaction. */
int mt_store_memo_get(mt_store *s, const char *key, char **value, mt_diag *d);
int mt_store_memo_put(mt_store *s, const char *key, const char *value, mt_diag *d);

/* An event of the tune ("phase", "resume", "worker-lost", ...); time NAN =
 * now.  0 or negative. */
int mt_store_add_event(mt_store *s, double time, const char *kind, const char *text, mt_diag *d);

typedef struct mt_store_event {
    int64_t id;
    double time;
    char *kind;
    char *text;
} mt_store_event;

/* Every event in time order; caller owns *out (mt_store_events_free). */
int mt_store_list_events(mt_store *s, mt_store_event **out, size_t *n, mt_diag *d);
void mt_store_events_free(mt_store_event *v, size_t n);

/* ---- export ----------------------------------------------------------- */

enum mt_store_format { MT_STORE_TEXT = 0, MT_STORE_CSV = 1, MT_STORE_JSON = 2 };

/* The tables export knows, NULL-terminated: meta, configs, runs, samples,
 * gpu_memory, decisions, decision_runs, events, schema_version. */
extern const char *const mt_store_tables[];

/* One table as CSV (RFC 4180: header row, CRLF, fields with a comma, quote
 * or line break quoted, quotes doubled; NULL is an empty field).  0 or
 * negative (unknown table named in d). */
int mt_store_export_csv(mt_store *s, const char *table, FILE *out, mt_diag *d);

/* The whole store as one JSON object, one snapshot: {"meta": {...},
 * "schema_version": [...], "configs": [...], "runs": [...], "samples": [...],
 * "gpu_memory": [...], "decisions": [...], "decision_runs": [...],
 * "events": [...]}, each row an object keyed by column name; JSON columns
 * (runs.fingerprint, decisions.statistics, samples.losses) are embedded as
 * JSON, not strings; NULL is null; text that is not UTF-8 gets U+FFFD.
 * Streams row by row.  0 or negative. */
int mt_store_export_json(mt_store *s, FILE *out, mt_diag *d);

/* `moetune runs DIR`: the runs as a text table (one line per run with its
 * step count, median step time and hottest GPU, then counts by outcome),
 * CSV (the runs table) or JSON (an array of runs).  0 or negative. */
int mt_store_print_runs(mt_store *s, FILE *out, int format, mt_diag *d);

#endif
