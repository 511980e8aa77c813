/*
 * logparse.h - Megatron-LM and Megatron-Bridge training logs, read as a
 * stream.
 *
 * The runner feeds pipe reads as they arrive (any chunk boundaries, one line
 * buffer per source); `moetune parse` feeds a file.  Out come the iteration
 * lines (every field Megatron prints, losses by key), per-rank memory lines
 * (MB and Bridge's GB form, in bytes), the arguments dump as a map, the
 * world-size line, and events: OOM, NaN, NCCL and infrastructure errors,
 * watchdog timeouts, ImportErrors, CUDA graph capture, dispatcher fallback,
 * validation and theoretical-memory lines, crashes, exceptions, tracebacks.
 * Every format variant of shared/facts/megatron.md is understood:
 * timestamps with or without microseconds or trimmed away, optional fields
 * (skipped samples, throughput, energy and power per GPU, num zeros, params
 * norm, max attention logit; every "... loss" key: lm loss, mtp_1 loss,
 * load_balancing_loss, z_loss, ...), prints glued after the final '|',
 * `srun -l` and torchrun line prefixes (stripped, the rank kept), CR/LF line
 * ends.  Versions read: Megatron-LM core_r0.15.0, core_v0.18.0, core_v0.19.0
 * and main (the same arguments dump: "  name <48 - len dots> str(value)",
 * enums as Class.member or, in lists, <Class.member: N>); Megatron-Bridge's
 * training_log (Step Time line first, then the iteration line, the GB memory
 * line with all ten MEMORY_KEYS) and, in place of the arguments dump, its
 * configuration block: the "Non-default values" summary (Bridge >= 0.4) or
 * the "Task Configuration" YAML (up to 0.3), read into the same map under
 * Megatron's dest names (the mapping is documented in logparse.c above
 * bridge_sections).
 *
 * Hard-wraps: one rule for iteration and memory lines.  A line that may
 * continue (an iteration line without its closing "number of nan
 * iterations: N |", any memory line, which has no end mark) waits for the
 * next line of its source: when that one is a continuation (not prefixed,
 * begins nothing of its own, at most twice the first piece's width, and for
 * a memory line joins the cut field into a "key: number" again; for an
 * iteration line holds a '|'), the pieces are reassembled; otherwise the
 * line was cut and keeps the fields it has (an iteration line its fields
 * closed by '|', a memory line all its "key: number" fields).
 *
 * An iteration line of an interval whose iterations were all skipped
 * ("number of skipped iterations" > 0) prints each loss as 0.000000E+00:
 * those zeros are no loss and are not kept.  A Bridge Step Time line with no
 * iteration line of its own is a record one log interval past the last one
 * (the interval from the arguments or Bridge's logger.log_interval, else the
 * spacing of the iteration lines, else 1: moetune renders --log-interval 1);
 * it never counts iterations one by one past an interval of N.
 *
 * A restarted run (iteration numbers going back in the stream) is kept as
 * printed, every record in order; a Step Time line and an event belong to
 * the latest iteration line, not the highest.  Which pass counts is the
 * consumer's choice (workers/measure.c keeps the last one).
 *
 * Robustness: arbitrary bytes (NUL, non-UTF-8, binary) never crash it; a
 * line longer than MT_LOGPARSE_LINE_MAX is cut there and counted.  Memory
 * is bounded: at most MT_LOGPARSE_LINE_MAX + MT_LOGPARSE_WRAP_MAX bytes of
 * buffer per source (MT_LOGPARSE_MAX_SOURCES sources); iterations take about
 * 128 bytes each plus 16 per loss (capped, see
 * mt_logparse_set_max_iterations); events stop at MT_LOGPARSE_MAX_EVENTS
 * (the rest counted); argument values are cut at MT_LOGPARSE_ARG_MAX.
 * Speed: no regular expressions and no allocation per line (arrays grow
 * geometrically); tests/bench/bench_logparse prints the throughput.
 *
 * Every parser entry point is exercised by tests/fuzz/fuzz_logparse.c.
 * A parser is not thread-safe: feed it from one thread at a time.
 */
#ifndef MT_LOGPARSE_H
#define MT_LOGPARSE_H

#include "diag.h"
#include "kv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MT_LOGPARSE_LINE_MAX (1024 * 1024) /* bytes of one line kept */
#define MT_LOGPARSE_WRAP_MAX (64 * 1024)   /* a hard-wrapped line, reassembled */
#define MT_LOGPARSE_MAX_SOURCES 1024       /* (rank, channel) streams */
#define MT_LOGPARSE_MAX_EVENTS 10000       /* events kept; later ones counted */
#define MT_LOGPARSE_MAX_ARGS 4096          /* arguments dump entries */
#define MT_LOGPARSE_ARG_MAX 4096           /* bytes of one argument value */
#define MT_LOGPARSE_MAX_LOSSES 8           /* loss keys per iteration line */
#define MT_LOGPARSE_MAX_LOSS_KEYS 64       /* distinct loss keys per log */
#define MT_LOGPARSE_MAX_RANKS 65536        /* ranks with a memory line */
#define MT_LOGPARSE_TEXT_MAX 512           /* bytes of an event's line kept */

typedef struct mt_logparse mt_logparse;

/* Presence bits of mt_iteration.has: a field Megatron did not print is not
 * in `has` (its value is then 0 or NAN and means nothing). */
enum {
    MT_IT_TIMESTAMP = 1u << 0,
    MT_IT_TOTAL = 1u << 1,
    MT_IT_CONSUMED = 1u << 2,
    MT_IT_SKIPPED_SAMPLES = 1u << 3,
    MT_IT_ELAPSED = 1u << 4,
    MT_IT_TFLOPS = 1u << 5,
    MT_IT_ENERGY = 1u << 6,
    MT_IT_POWER = 1u << 7,
    MT_IT_LR = 1u << 8,
    MT_IT_GBS = 1u << 9,
    MT_IT_LOSS_SCALE = 1u << 10,
    MT_IT_GRAD_NORM = 1u << 11,
    MT_IT_NUM_ZEROS = 1u << 12,
    MT_IT_PARAMS_NORM = 1u << 13,
    MT_IT_MAX_LOGIT = 1u << 14,
    MT_IT_SKIPPED = 1u << 15,
    MT_IT_NAN = 1u << 16,
    MT_IT_STEP_TIME = 1u << 17,      /* Bridge "Step Time" line attached */
    MT_IT_STEP_LINE_ONLY = 1u << 18, /* no iteration line: made from a Step Time line */
    MT_IT_WRAPPED = 1u << 19,        /* reassembled from a terminal hard-wrap */
    MT_IT_GLUED = 1u << 20,          /* another print was glued after its final '|' */
    MT_IT_COMPLETE = 1u << 21        /* ended with "number of nan iterations: N |" */
};

/* One iteration line (one log interval; averages over it, as Megatron
 * prints them). */
typedef struct mt_iteration {
    int64_t iteration, total;
    int64_t consumed_samples, skipped_samples, global_batch;
    int64_t skipped, nan_count; /* "number of skipped / nan iterations" */
    /* (global batch and the two counts are kept to 32 bits: clamped) */
    double timestamp;     /* seconds since 1970-01-01 of the printed time, zone as printed */
    double elapsed_ms;    /* "elapsed time per iteration (ms)" */
    double tflops;        /* "throughput per GPU (TFLOP/s/GPU)" */
    double energy, power; /* J/iter/GPU, W/GPU */
    double lr, loss_scale, grad_norm, num_zeros, params_norm, max_attention_logit;
    double step_time_s; /* Bridge "Step Time : <s>s" */
    double step_tflops; /* Bridge "GPU utilization: <x>MODEL_TFLOP/s/GPU" */
    int n_losses;
    /* Key text owned by the parser, valid until it is destroyed.  A value
     * may be NAN or infinite: that is what the run printed. */
    const char *loss_key[MT_LOGPARSE_MAX_LOSSES];
    double loss[MT_LOGPARSE_MAX_LOSSES];
    int rank;      /* the rank that printed it (prefix or source), -1 unknown */
    uint32_t has;  /* MT_IT_* */
    uint64_t line; /* line number in its source where it began (1-based) */
} mt_iteration;

/* The value of a loss key, or NAN when the line has no such key (then
 * *found = 0; found may be NULL). */
double mt_iteration_loss(const mt_iteration *it, const char *key, int *found);

/* Per-rank memory from "[Rank r] (after i iterations) memory (MB|GB) | ...".
 * Bytes (MB lines are MiB as Megatron counts; Bridge GB lines are 1e9 bytes
 * with about 5 significant digits); -1 when the line lacked the key.  Over
 * several lines of one rank the max fields keep the maximum and the others
 * the latest value.  Megatron-LM's MB line has four keys (allocated, max
 * allocated, reserved, max reserved); Bridge's GB line the ten of its
 * MEMORY_KEYS, in this order: mem-allocated-gigabytes, mem-active-gigabytes,
 * mem-inactive-gigabytes, mem-reserved-gigabytes,
 * mem-max-allocated-gigabytes, mem-max-active-gigabytes,
 * mem-max-inactive-gigabytes, mem-max-reserved-gigabytes, mem-alloc-retires
 * (sic), mem-allocated-count (any order is read). */
typedef struct mt_rank_memory {
    int rank;
    int gigabytes; /* 1: from a Bridge GB line */
    int64_t after_iteration;
    int64_t allocated, max_allocated, reserved, max_reserved;
    /* Bridge's GB line only (-1 on MB lines): active and inactive-split
     * bytes, current and peak; "mem-alloc-retires" (cudaMalloc retries) and
     * "mem-allocated-count" (live allocations), counts not bytes, latest */
    int64_t active, max_active, inactive, max_inactive;
    int64_t alloc_retries, alloc_count;
} mt_rank_memory;

typedef enum mt_logevent_kind {
    MT_LOGEV_OOM,                /* torch[.cuda].OutOfMemoryError, CUDA out of memory */
    MT_LOGEV_NAN,                /* NaN RuntimeError / "found NaN" */
    MT_LOGEV_NCCL_ERROR,         /* DistBackendError, ncclSystemError, NCCL WARN, ... */
    MT_LOGEV_INFRA,              /* Xid, node failure / lost, InfiniBand errors */
    MT_LOGEV_WATCHDOG,           /* collective watchdog timeout (a symptom elsewhere) */
    MT_LOGEV_IMPORT_ERROR,       /* ImportError / ModuleNotFoundError */
    MT_LOGEV_CAPTURE,            /* CUDA graph capture (TE, local, full iteration) */
    MT_LOGEV_FALLBACK,           /* "... Falling back to ..." */
    MT_LOGEV_VALIDATION,         /* "validation loss at ..." */
    MT_LOGEV_THEORETICAL_MEMORY, /* "Theoretical memory footprints: ..." */
    MT_LOGEV_CRASH,              /* Segmentation fault, Fatal Python error, SIGSEGV, ... */
    MT_LOGEV_EXCEPTION,          /* any other "<Name>Error: ..." / "<Name>Exception: ..." line */
    MT_LOGEV_TRACEBACK,          /* "Traceback (most recent call last):" */
    MT_LOGEV_KINDS
} mt_logevent_kind;

/* mt_logevent.flags */
enum {
    /* IMPORT_ERROR naming DeepEP / HybridEP; FALLBACK of the MoE token
     * dispatcher (to alltoall or between flex backends) */
    MT_LOGEV_F_DISPATCHER = 1u << 0,
};

typedef struct mt_logevent {
    mt_logevent_kind kind;
    uint32_t flags;    /* MT_LOGEV_F_* */
    int rank;          /* prefix, source, or "[Rank N]"-style text; -1 unknown */
    int64_t iteration; /* VALIDATION: its iteration; else the last iteration logged before, -1 */
    double value;      /* VALIDATION: the loss; THEORETICAL_MEMORY: total MB; CAPTURE: seconds
                          (TE) or graphs created (local); otherwise NAN */
    uint64_t line;     /* line number in its source (1-based) */
    char text[MT_LOGPARSE_TEXT_MAX + 1]; /* the line without prefix, cut, control bytes as '?' */
} mt_logevent;

typedef struct mt_logworld {
    int world, dp, cp, tp, pp; /* -1 when the line lacked the field */
} mt_logworld;

typedef struct mt_logparse_counts {
    uint64_t bytes, lines;
    uint64_t truncated_lines;    /* cut at MT_LOGPARSE_LINE_MAX */
    uint64_t garbage_lines;      /* control bytes, or a known line form that did not parse */
    uint64_t wrapped_lines;      /* iteration and memory lines reassembled from a hard-wrap */
    uint64_t glued_lines;        /* prints found glued after an iteration line's final '|' */
    uint64_t iterations_dropped; /* past the iteration cap */
    uint64_t events_dropped;     /* past MT_LOGPARSE_MAX_EVENTS (still counted per kind) */
    uint64_t args_dropped, ranks_dropped, losses_dropped;
    uint64_t sources_dropped_bytes; /* fed for a source past MT_LOGPARSE_MAX_SOURCES */
} mt_logparse_counts;

/* Caller owns the return value; free with mt_logparse_destroy.  NULL on OOM. */
mt_logparse *mt_logparse_new(void);
/* Frees *p and sets it to NULL; NULL-safe. */
void mt_logparse_destroy(mt_logparse **p);

/* At most n iteration records are kept (default 1,048,576); the rest are
 * counted in iterations_dropped but still reach the callback. */
void mt_logparse_set_max_iterations(mt_logparse *p, size_t n);

/* Called once per iteration record as soon as it is complete (the runner's
 * hang detection).  `it` is valid during the call only.  cb NULL: none. */
void mt_logparse_on_iteration(mt_logparse *p, void (*cb)(void *ctx, const mt_iteration *it),
                              void *ctx);

/* torchrun under srun, one srun task starting n ranks (srun -l prints the
 * task T, torchrun --tee its local rank L): a line with both prefixes is
 * rank T * n + L.  0 (the default): the number as printed, the innermost
 * (L), which is the global rank only on one node. */
void mt_logparse_set_ranks_per_task(mt_logparse *p, int n);

/* Streaming input.  Chunks may split lines anywhere.  mt_logparse_feed is
 * one merged stream (ranks known from srun/torchrun prefixes only);
 * mt_logparse_feed_rank one rank's own stream; mt_logparse_feed_channel
 * tells several streams of one rank apart (e.g. 0 stdout, 1 stderr), each
 * with its own line buffer.  A negative rank means unknown. */
void mt_logparse_feed(mt_logparse *p, const char *data, size_t n);
void mt_logparse_feed_rank(mt_logparse *p, int rank, const char *data, size_t n);
void mt_logparse_feed_channel(mt_logparse *p, int rank, int channel, const char *data, size_t n);
/* End of input for now: parses every source's unterminated last line (a
 * truncated file), a pending hard-wrapped line and a pending Bridge Step
 * Time line.  Feeding may continue afterwards. */
void mt_logparse_finish(mt_logparse *p);

/* Feeds everything f holds (64 KiB reads) and finishes.  0, or -EIO when
 * reading failed. */
int mt_logparse_read(mt_logparse *p, FILE *f);
/* The same for a file by name ("-" is standard input); a failure to open or
 * read is added to d naming the path.  0 or negative errno. */
int mt_logparse_read_file(mt_logparse *p, const char *path, mt_diag *d);

/* 0, or -ENOMEM when an allocation failed at some point (data were lost). */
int mt_logparse_status(const mt_logparse *p);

/* ---- results (borrowed pointers are valid until the next feed/finish) ---- */

size_t mt_logparse_iterations(const mt_logparse *p);
/* Copies the i-th iteration record into *out (stored compactly inside, so
 * there is no pointer to hand out).  0, or -ERANGE. */
int mt_logparse_iteration(const mt_logparse *p, size_t i, mt_iteration *out);

/* Ranks with a memory line, ascending. */
size_t mt_logparse_ranks(const mt_logparse *p);
const mt_rank_memory *mt_logparse_rank_memory(const mt_logparse *p, size_t i);
/* The record of `rank`, or NULL. */
const mt_rank_memory *mt_logparse_memory_of(const mt_logparse *p, int rank);

/* The arguments dump: argparse dest -> printed value (e.g. "fp8" -> "None");
 * for Bridge, its configuration block under the same dests (a repr string
 * without its quotes, a YAML scalar as Python prints it: True, None). */
const mt_kv *mt_logparse_args(const mt_logparse *p);

/* 0 and *w filled when a "using world size" line was seen, else -ENOENT. */
int mt_logparse_world(const mt_logparse *p, mt_logworld *w);
/* 0 when a "Theoretical memory footprints" line was seen; MB, NAN when absent
 * from the line.  Any out-pointer may be NULL. */
int mt_logparse_theoretical(const mt_logparse *p, double *weight_opt_mb, double *activation_mb,
                            double *total_mb);

size_t mt_logparse_events(const mt_logparse *p);
const mt_logevent *mt_logparse_event(const mt_logparse *p, size_t i);
/* All events of a kind seen, kept or not. */
uint64_t mt_logparse_event_count(const mt_logparse *p, mt_logevent_kind kind);
/* The first event of a kind (kept even past the event cap), or NULL. */
const mt_logevent *mt_logparse_first(const mt_logparse *p, mt_logevent_kind kind);
/* "oom", "nan", "nccl_error", ...; "?" out of range. */
const char *mt_logevent_kind_name(mt_logevent_kind kind);

const mt_logparse_counts *mt_logparse_counts_get(const mt_logparse *p);

/* Adds the evidence keys the plugins' verify() reads (abi/moetune/plugin.h
 * lists them all, with the trace's):
 *   args.<name>              every entry of the arguments dump (or Bridge's
 *                            configuration block), as printed except that an
 *                            enum is its member name ("AttnBackend.auto",
 *                            "<AttnBackend.auto: 5>" -> "auto") and a list of
 *                            enums its names separated by spaces
 *                            ("moe_router moe_preprocess")
 *   log.world                the "using world size: ..." line
 *   log.dispatcher_fallback  the first dispatcher "Falling back to ..." line
 *   log.import_error         the first ImportError naming DeepEP / HybridEP
 *   log.cuda_graph_capture   the most telling capture line (time spent >
 *                            graphs created > full-iteration capture > start)
 * and, when present, the first line of each failure:
 *   log.oom, log.nan (a NaN error line, else "iteration N: ..." from the
 *   iteration lines), log.nccl_error, log.infra, log.watchdog.
 * 0, or -ENOMEM. */
int mt_logparse_evidence(const mt_logparse *p, mt_kv *evidence);

/* What was parsed, for people (json 0) or as one JSON object (json 1; NaN
 * and infinities as the strings "NaN", "Infinity", "-Infinity"; text that is
 * not UTF-8 has U+FFFD in place of the bad bytes).  0, or -EIO when out
 * failed. */
int mt_logparse_print(const mt_logparse *p, FILE *out, int json);

#endif
