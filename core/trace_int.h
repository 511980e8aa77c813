/*
 * trace_int.h - the trace's internals, shared by the readers (trace.c for
 * Chrome/Kineto JSON, trace_nsys.c for Nsight Systems SQLite exports) and
 * by trace_open.c above both, which tells a file's format and picks one.
 * Not part of any public interface.
 */
#ifndef MT_TRACE_INT_H
#define MT_TRACE_INT_H

#include "trace.h"

/* GPU activity (iv): kernels and copies. */
enum { KIND_KERNEL = 0, KIND_MEMCPY = 1 };
/* Host-side marks (rg): NVTX / user-annotation ranges and graph launches. */
enum { KIND_RANGE = 2, KIND_GRAPH = 3 };

typedef struct mt__trace_ival {
    int64_t start, end;
    uint32_t name;
    int32_t stream;
    int32_t device; /* -1 for host-side marks */
    uint8_t kind;
} mt__trace_ival;

typedef struct mt__trace_rule {
    char *pattern; /* without the '^' */
    int prefix;
    mt_trace_class cls;
} mt__trace_rule;

struct mt_trace {
    mt__trace_ival *iv; /* GPU activity, sorted by device, start, end */
    size_t n, cap;
    mt__trace_ival *rg; /* ranges and graph launches, sorted by start */
    size_t nrg, rg_cap;
    /* string table: names[i] is an offset into pool */
    char *pool;
    size_t pool_len, pool_cap;
    size_t *names;
    uint8_t *cls, *facts;
    size_t nnames, names_cap;
    uint32_t *hash; /* open addressing, id + 1, 0 = empty */
    size_t hash_cap;
    mt__trace_rule *rules;
    size_t nrules;
    size_t kernels, memcpys, graph_launches, kernel_launches;
    int64_t *lts; /* kernel launch (runtime API) start times, sorted at finish */
    size_t nlts, lts_cap;
};

/* Appends one interval of kind (KIND_*) named by the n bytes at name.
 * Kernels and copies go to iv, ranges and graph launches to rg (graph
 * launches are also counted).  0 or -ENOMEM. */
int mt__trace_add(mt_trace *t, int kind, int64_t start, int64_t end, const char *name, size_t n,
                  int device, int stream);
/* Records one kernel launch (cudaLaunchKernel and kin) at host time ts and
 * counts it.  0 or -ENOMEM. */
int mt__trace_launch(mt_trace *t, int64_t ts);
/* Sorts what was added and classifies the names; 0 or -ENOMEM. */
int mt__trace_finish(mt_trace *t);

/* Refuses a trace in which two kernels or copies of one device and stream
 * overlap by more than 1 us (a GPU stream runs one at a time): -EINVAL with
 * one entry in d naming both events, or 0.  Called after mt__trace_finish. */
int mt__trace_check_streams(const mt_trace *t, const char *label, mt_diag *d);

/* Reads an Nsight Systems SQLite export (trace_nsys.c).  NULL with one
 * entry in d on any problem. */
mt_trace *mt__trace_nsys_open(const char *path, mt_diag *d);

/* Reads a Chrome/Kineto JSON trace, plain or gzip (trace.c).  NULL with
 * entries in d on any problem. */
mt_trace *mt__trace_json_open(const char *path, mt_diag *d);

#endif
