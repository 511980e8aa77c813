/*
 * trace.h - GPU activity from a Chrome/Kineto trace (the PyTorch profiler's
 * JSON, plain or gzip), read as a stream into compact intervals, and the
 * figures that decide which wall limits a run: interval unions of
 * communication and compute, their intersection (hidden communication), what
 * is left exposed, idle time and its gaps, and activation evidence (which
 * kernels ran).
 *
 * Times are integer nanoseconds, read exactly from the decimal-microsecond
 * text of "ts" and "dur" (a double loses the last digit at these
 * magnitudes).  Overlapping durations are never added: every figure is the
 * measure of a union or an intersection of unions, computed by a sweep over
 * intervals sorted by start, O(n log n).
 */
#ifndef MT_TRACE_H
#define MT_TRACE_H

#include "diag.h"
#include "kv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct mt_trace mt_trace;

/* What a kernel name counts as.  Memory-copy and memset events (cat
 * gpu_memcpy / gpu_memset) are always MT_TRACE_MEMCPY. */
typedef enum mt_trace_class {
    MT_TRACE_COMPUTE = 0,
    MT_TRACE_COMM = 1,
    MT_TRACE_MEMCPY = 2,
    MT_TRACE_OTHER = 3,
} mt_trace_class;

/* Reads a trace file; gzip is recognised by its magic (1f 8b).  Caller owns
 * the return value (free with mt_trace_destroy).  NULL on any problem, with
 * one entry in d naming the file, the line or event and the field; also
 * when two kernels or copies of one device and stream overlap by more than
 * 1 us (refused, not clipped: a stream runs one at a time). */
mt_trace *mt_trace_open(const char *path, mt_diag *d);
/* The same from memory (plain JSON text); label names it in messages.  The
 * one entry point a fuzzer drives. */
mt_trace *mt_trace_parse(const char *text, size_t len, const char *label, mt_diag *d);
/* Frees *t and sets it to NULL; NULL-safe. */
void mt_trace_destroy(mt_trace **t);

/* Adds a kernel-name rule "class:pattern", class one of communication,
 * compute, memcpy, other; a pattern starting with '^' matches a name prefix,
 * otherwise a substring.  Added rules win over the defaults (and earlier
 * added ones over later).  The default rules: communication for names
 * starting with "nccl" or containing deep_ep, hybrid_ep, nccl_ep, alltoall,
 * AllToAll, SendRecv; compute otherwise.  0, or -EINVAL with an entry in d. */
int mt_trace_add_class(mt_trace *t, const char *spec, mt_diag *d);

/* Counts over the whole trace. */
size_t mt_trace_kernel_count(const mt_trace *t);    /* cat kernel events */
size_t mt_trace_memcpy_count(const mt_trace *t);    /* gpu_memcpy + gpu_memset */
size_t mt_trace_graph_launches(const mt_trace *t);  /* cudaGraphLaunch / cuGraphLaunch */
size_t mt_trace_kernel_launches(const mt_trace *t); /* cudaLaunchKernel* / cuLaunchKernel* */
/* Devices with at least one kernel, ascending; writes up to max ids, returns
 * how many there are. */
size_t mt_trace_devices(const mt_trace *t, int *out, size_t max);
/* Class of a kernel name under t's rules. */
mt_trace_class mt_trace_classify(const mt_trace *t, const char *name);

/* What to measure: an explicit window (else first kernel start .. last
 * kernel end of the device) and the threshold above which an idle gap counts
 * as a host/launch gap. */
typedef struct mt_trace_query {
    int has_window;
    int64_t start_ns, end_ns;
    int64_t gap_threshold_ns; /* 0: 20 us */
} mt_trace_query;

#define MT_TRACE_TOP 5

typedef struct mt_trace_top {
    const char *name; /* borrowed from the trace */
    int64_t exposed_ns;
} mt_trace_top;

typedef struct mt_trace_metrics {
    int device;
    int64_t window_start_ns, window_end_ns, window_ns;
    size_t kernels, comm_kernels, compute_kernels, memcpys;
    int64_t active_ns;       /* union of all kernels */
    int64_t comm_ns;         /* union of communication kernels */
    int64_t compute_ns;      /* union of compute kernels */
    int64_t hidden_ns;       /* comm union intersect compute union */
    int64_t exposed_comm_ns; /* comm union minus compute union */
    int64_t memcpy_ns;       /* union of copies and memsets */
    int64_t idle_ns;         /* window minus active */
    int64_t gap_threshold_ns;
    size_t gaps;           /* idle gaps of any length inside the window */
    size_t gaps_above;     /* gaps longer than the threshold */
    int64_t gaps_above_ns; /* their total */
    int64_t max_gap_ns;
    /* communication kernels by exposed time: each instant of exposed
     * communication goes to exactly one kernel (the earliest-starting one
     * covering it), so the entries never double count. */
    size_t ntop;
    mt_trace_top top[MT_TRACE_TOP];
    /* NVTX / user-annotation ranges whose names contain "dispatch" or
     * "combine" (any case), as unions clipped to the window; ranges are host
     * marks and apply to every device of the trace */
    size_t dispatch_ranges, combine_ranges;
    int64_t dispatch_ns, combine_ns;
} mt_trace_metrics;

/* Figures of one device; q may be NULL (defaults).  0, -ENOENT when the
 * device has no kernel, -EINVAL for an empty or inverted window, -ENOMEM. */
int mt_trace_metrics_get(const mt_trace *t, int device, const mt_trace_query *q,
                         mt_trace_metrics *m);

/* Steps: the profiler's "ProfilerStep#N" ranges (Kineto user annotations or
 * NVTX ranges of that name).  Writes the lowest and highest step number
 * present and returns how many there are (0: no step marks). */
size_t mt_trace_steps(const mt_trace *t, int *first, int *last);
/* The window from the start of step first to the end of step last.  0, or
 * -ENOENT when either step has no mark, -EINVAL when last < first. */
int mt_trace_step_window(const mt_trace *t, int first, int last, int64_t *start_ns,
                         int64_t *end_ns);

/* Activation evidence: sets trace.available=true, trace.fp8_gemm,
 * trace.mxfp8_gemm, trace.nvfp4_gemm, trace.deepep_kernels,
 * trace.hybridep_kernels, trace.alltoall_kernels (kernel event counts),
 * trace.graph_launches, trace.kernel_launches and trace.comm_hidden_fraction
 * (hidden / communication union over every device, default windows, as a
 * decimal).  Where the trace marks steps, also trace.steps, and for CUDA
 * graph replay: trace.graph_first_step / trace.graph_last_step (the steps
 * whose marks hold a graph launch, absent without one), trace.graph_steps
 * (how many steps hold one), and the kernel launches per step in steps
 * with and without graph launches (trace.launches_per_graph_step,
 * trace.launches_per_eager_step, absent when there is no such step).
 * 0 or -ENOMEM. */
int mt_trace_evidence(const mt_trace *t, mt_kv *evidence);

/* Prints one device's figures as text lines or one JSON object. */
void mt_trace_metrics_print(const mt_trace_metrics *m, FILE *out, int json);
/* Nanoseconds as microseconds with three decimals, exactly. */
void mt_trace_print_us(FILE *out, int64_t ns);

/* Parses decimal microseconds text ("4458676983543.183", "1e3") exactly into
 * nanoseconds, rounding sub-nanosecond digits half away from zero.  0, or
 * -EINVAL for text that is not a number, -ERANGE when out of int64. */
int mt_trace_us_to_ns(const char *text, size_t len, int64_t *ns);

#endif
