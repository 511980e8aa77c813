/*
 * rankexec.c - Slurm task variables to torch.distributed's, then exec.
 */
#include "rankexec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- host lists ------------------------------------------------------------------ */

/* One item of a host list (no top-level comma), every bracket group in it
 * expanded, appended to out.  depth bounds the recursion (bracket groups). */
static int expand_item(const char *item, size_t len, mt_strlist *out, char *err, size_t n,
                       int depth)
{
    const char *open = memchr(item, '[', len), *close;
    const char *p;
    if (!open) {
        char *h;
        if (memchr(item, ']', len)) {
            snprintf(err, n, "'%.*s': ']' without '['", (int)len, item);
            return -1;
        }
        if (out->n >= MT_HOSTLIST_MAX) {
            snprintf(err, n, "more than %d hosts", MT_HOSTLIST_MAX);
            return -1;
        }
        if (!(h = strndup(item, len)) || mt_strlist_push(out, h)) {
            free(h);
            snprintf(err, n, "out of memory");
            return -1;
        }
        free(h);
        return 0;
    }
    if (depth > 8) {
        snprintf(err, n, "'%.*s': more than 8 bracket groups", (int)len, item);
        return -1;
    }
    close = memchr(open, ']', (size_t)(item + len - open));
    if (!close) {
        snprintf(err, n, "'%.*s': '[' without ']'", (int)len, item);
        return -1;
    }
    if (close == open + 1) {
        snprintf(err, n, "'%.*s': empty brackets", (int)len, item);
        return -1;
    }
    /* each comma-separated range of the group: A or A-B */
    for (p = open + 1; p < close;) {
        const char *q = p, *dash = NULL, *e;
        unsigned long a, b, v;
        int width;
        char *end;
        while (q < close && *q != ',')
            q++;
        for (e = p; e < q; e++) {
            if (*e == '-' && !dash)
                dash = e;
            else if (!isdigit((unsigned char)*e)) {
                snprintf(err, n, "'%.*s': '%c' in a range (digits, '-' and ',' only)", (int)len,
                         item, *e);
                return -1;
            }
        }
        if (q == p || dash == p || dash == q - 1) {
            snprintf(err, n, "'%.*s': an empty number in '[%.*s]'", (int)len, item,
                     (int)(close - open - 1), open + 1);
            return -1;
        }
        width = (int)((dash ? dash : q) - p);
        errno = 0;
        a = strtoul(p, &end, 10);
        b = dash ? strtoul(dash + 1, &end, 10) : a;
        if (errno || width > 18 || b < a || b - a >= MT_HOSTLIST_MAX) {
            snprintf(err, n, "'%.*s': range '%.*s' is not A-B with A <= B (at most %d)",
                     (int)len, item, (int)(q - p), p, MT_HOSTLIST_MAX);
            return -1;
        }
        for (v = a; v <= b; v++) {
            size_t pre = (size_t)(open - item), post = (size_t)(item + len - close - 1);
            char num[32], *h;
            int k = snprintf(num, sizeof num, "%0*lu", width, v);
            int rc;
            h = malloc(pre + (size_t)k + post + 1);
            if (!h) {
                snprintf(err, n, "out of memory");
                return -1;
            }
            memcpy(h, item, pre);
            memcpy(h + pre, num, (size_t)k);
            memcpy(h + pre + k, close + 1, post);
            h[pre + k + post] = '\0';
            rc = expand_item(h, pre + (size_t)k + post, out, err, n, depth + 1);
            free(h);
            if (rc)
                return rc;
        }
        p = q < close ? q + 1 : q;
    }
    return 0;
}

int mt_hostlist_expand(const char *list, mt_strlist *out, char *err, size_t n)
{
    const char *p = list, *start;
    int depth = 0;
    if (!list || !*list) {
        snprintf(err, n, "empty host list");
        return -1;
    }
    for (start = p; ; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']')
            depth--;
        if (*p == '\0' || (*p == ',' && depth == 0)) {
            size_t len = (size_t)(p - start);
            size_t i;
            if (len == 0) {
                snprintf(err, n, "'%s': an empty host name at offset %zu", list,
                         (size_t)(start - list));
                return -1;
            }
            for (i = 0; i < len; i++)
                if (isspace((unsigned char)start[i]) || !isprint((unsigned char)start[i])) {
                    snprintf(err, n, "'%s': a blank or control byte at offset %zu", list,
                             (size_t)(start - list) + i);
                    return -1;
                }
            if (expand_item(start, len, out, err, n, 0))
                return -1;
            if (*p == '\0')
                break;
            start = p + 1;
        }
    }
    return 0;
}

int mt_hostlist_first(const char *list, char *host, size_t hn, char *err, size_t n)
{
    mt_strlist hosts = {0};
    const char *p;
    int depth = 0;
    char *first;
    size_t len;
    if (!list || !*list) {
        snprintf(err, n, "empty host list");
        return -1;
    }
    /* only the first item is expanded (a list of 10,000 nodes is not) */
    for (p = list; *p && !(*p == ',' && depth == 0); p++)
        depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
    len = (size_t)(p - list);
    if (!(first = strndup(list, len))) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    if (mt_hostlist_expand(first, &hosts, err, n)) {
        free(first);
        mt_strlist_clear(&hosts);
        return -1;
    }
    free(first);
    if (strlen(hosts.v[0]) >= hn) {
        snprintf(err, n, "host name '%.64s...' too long", hosts.v[0]);
        mt_strlist_clear(&hosts);
        return -1;
    }
    snprintf(host, hn, "%s", hosts.v[0]);
    mt_strlist_clear(&hosts);
    return 0;
}

int mt_rank_port(const char *job_id, const char *step_id)
{
    /* FNV-1a over "JOB.STEP" */
    uint32_t h = 2166136261u;
    const char *p;
    for (p = job_id ? job_id : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ '.') * 16777619u;
    for (p = step_id ? step_id : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return 20000 + (int)(h % 20000u);
}

int mt_rank_tasks_on_node(const char *s, int node_id)
{
    int node = 0;
    const char *p = s;
    if (!s || !*s || node_id < 0)
        return -1;
    while (*p) {
        char *end;
        long count, rep = 1;
        errno = 0;
        count = strtol(p, &end, 10);
        if (errno || end == p || count < 1)
            return -1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x')
                return -1;
            rep = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || rep < 1)
                return -1;
            p = end + 1;
        }
        if (node_id < node + rep)
            return (int)count;
        node += (int)rep;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

/* ---- the environment ----------------------------------------------------------------- */

/* A count variable: a decimal integer in [lo, 1<<24]. */
static int count_var(const char *(*get)(const char *, void *), void *ctx, const char *name, int lo,
                     int *out, char *err, size_t n)
{
    const char *v = get(name, ctx);
    char *end;
    long x;
    if (!v || !*v) {
        snprintf(err, n,
                 "%s is not set: rank-exec runs as a task of a Slurm step (srun ... moetune "
                 "rank-exec -- PROGRAM ...), where srun sets it",
                 name);
        return -1;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > (1L << 24)) {
        snprintf(err, n, "%s='%.64s' is not a whole number >= %d", name, v, lo);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int add(mt_strlist *out, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int add(mt_strlist *out, const char *name, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    return mt_strlist_push(out, name) || mt_strlist_push(out, v) ? -1 : 0;
}

int mt_rank_env(const char *(*get)(const char *, void *), void *ctx, mt_strlist *out, char *err,
                size_t n)
{
    int rank, world, local, node, local_world, port;
    const char *tpn, *list, *job, *step, *which;
    char master[256], herr[300];
    if (count_var(get, ctx, "SLURM_PROCID", 0, &rank, err, n) ||
        count_var(get, ctx, "SLURM_NTASKS", 1, &world, err, n) ||
        count_var(get, ctx, "SLURM_LOCALID", 0, &local, err, n) ||
        count_var(get, ctx, "SLURM_NODEID", 0, &node, err, n))
        return -1;
    if (rank >= world) {
        snprintf(err, n, "SLURM_PROCID=%d is not below SLURM_NTASKS=%d", rank, world);
        return -1;
    }
    which = get("SLURM_STEP_TASKS_PER_NODE", ctx) ? "SLURM_STEP_TASKS_PER_NODE"
                                                   : "SLURM_TASKS_PER_NODE";
    tpn = get(which, ctx);
    if (!tpn) {
        snprintf(err, n, "neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set: "
                         "rank-exec runs as a task of a Slurm step");
        return -1;
    }
    if ((local_world = mt_rank_tasks_on_node(tpn, node)) < 1) {
        snprintf(err, n, "%s='%.64s' gives no task count for node %d (SLURM_NODEID)", which, tpn,
                 node);
        return -1;
    }
    if (local >= local_world) {
        snprintf(err, n, "SLURM_LOCALID=%d is not below the %d tasks %s gives node %d", local,
                 local_world, which, node);
        return -1;
    }
    which = get("SLURM_STEP_NODELIST", ctx)  ? "SLURM_STEP_NODELIST"
            : get("SLURM_JOB_NODELIST", ctx) ? "SLURM_JOB_NODELIST"
                                             : "SLURM_NODELIST";
    list = get(which, ctx);
    if (!list) {
        snprintf(err, n, "no node list: SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and "
                         "SLURM_NODELIST are all unset");
        return -1;
    }
    if (mt_hostlist_first(list, master, sizeof master, herr, sizeof herr)) {
        snprintf(err, n, "%s: %s", which, herr);
        return -1;
    }
    job = get("SLURM_JOB_ID", ctx);
    if (!job)
        job = get("SLURM_JOBID", ctx);
    step = get("SLURM_STEP_ID", ctx);
    if (!step)
        step = get("SLURM_STEPID", ctx);
    if (!job || !*job) {
        snprintf(err, n, "SLURM_JOB_ID is not set: MASTER_PORT is derived from it");
        return -1;
    }
    port = mt_rank_port(job, step ? step : "");
    if (add(out, "RANK", "%d", rank) || add(out, "WORLD_SIZE", "%d", world) ||
        add(out, "LOCAL_RANK", "%d", local) || add(out, "LOCAL_WORLD_SIZE", "%d", local_world) ||
        add(out, "NODE_RANK", "%d", node) || add(out, "GROUP_RANK", "%d", node) ||
        add(out, "MASTER_ADDR", "%s", master) || add(out, "MASTER_PORT", "%d", port) ||
        add(out, "PET_NODE_RANK", "%d", node) || add(out, "PET_MASTER_ADDR", "%s", master) ||
        add(out, "PET_MASTER_PORT", "%d", port) ||
        add(out, "PET_RDZV_ENDPOINT", "%s:%d", master, port)) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    return 0;
}

static const char *env_get(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

int mt_rank_exec_main(int argc, char **argv)
{
    mt_strlist env = {0};
    char err[600];
    size_t i;
    int first = 2;
    static const char usage[] =
        "usage: moetune rank-exec -- PROGRAM [ARGS...]\n"
        "  (run as an srun task: sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
        "  MASTER_ADDR, MASTER_PORT from Slurm's variables, then runs PROGRAM without a\n"
        "  shell; every word after -- is the program's)\n"
        "options:\n"
        "  --help                     this text\n";
    /* moetune rank-exec -- ARGV... (options of its own: --help alone) */
    if (argc > first && (!strcmp(argv[first], "--help") || !strcmp(argv[first], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc > first && !strcmp(argv[first], "--"))
        first++;
    else if (argc > first && argv[first][0] == '-') {
        fprintf(stderr, "moetune rank-exec: unknown option '%s'\n%s(moetune rank-exec --help lists "
                        "every option)\n", argv[first], usage);
        return 64;
    }
    if (argc <= first || argv[first][0] == '\0') {
        fputs(usage, stderr);
        return 64;
    }
    if (mt_rank_env(env_get, NULL, &env, err, sizeof err)) {
        fprintf(stderr, "moetune rank-exec: %s\n", err);
        mt_strlist_clear(&env);
        return 2;
    }
    for (i = 0; i + 1 < env.n; i += 2)
        if (setenv(env.v[i], env.v[i + 1], 1)) {
            fprintf(stderr, "moetune rank-exec: cannot set %s: %s\n", env.v[i], strerror(errno));
            mt_strlist_clear(&env);
            return 2;
        }
    mt_strlist_clear(&env);
    fflush(NULL);
    execvp(argv[first], argv + first);
    fprintf(stderr, "moetune rank-exec: cannot run '%s': %s\n", argv[first], strerror(errno));
    return 127;
}
