/*
 * launch.c - launch templates, the local and srun launchers, and stopping a
 * Slurm step with scancel.
 */
#include "launch.h"

#include "runner.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- a growing string ----------------------------------------------------------- */

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static int buf_add(buf *b, const char *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        char *s;
        while (cap < b->n + n + 1)
            cap *= 2;
        s = realloc(b->s, cap);
        if (!s)
            return -ENOMEM;
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
    return 0;
}

static int push_fmt(mt_strlist *out, const char *f, ...) __attribute__((format(printf, 2, 3)));
static int push_fmt(mt_strlist *out, const char *f, ...)
{
    va_list ap;
    char *s = NULL;
    int n, rc;
    va_start(ap, f);
    n = vasprintf(&s, f, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    rc = mt_strlist_push(out, s);
    free(s);
    return rc;
}

/* ---- templates ---------------------------------------------------------------- */

/* Length of a placeholder name at p ("name}" follows), or 0. */
static size_t name_len(const char *p)
{
    size_t i = 0;
    if (!(isalpha((unsigned char)p[0]) || p[0] == '_'))
        return 0;
    while (isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == '.')
        i++;
    return p[i] == '}' ? i : 0;
}

static void known_names(const mt_kv *ph, buf *b)
{
    const char *k, *v;
    size_t i;
    buf_add(b, "{args}", 6);
    for (i = 0; ph && mt_kv_entry(ph, i, &k, &v) == 0; i++) {
        buf_add(b, ", {", 3);
        buf_add(b, k, strlen(k));
        buf_add(b, "}", 1);
    }
}

/* One token with its placeholders substituted into b. */
static int expand_token(const char *tok, const mt_kv *ph, buf *b, mt_diag *d)
{
    const char *p = tok;
    b->n = 0;
    if (buf_add(b, "", 0) != 0)
        return -ENOMEM;
    while (*p) {
        size_t nl;
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            if (buf_add(b, p, 1) != 0)
                return -ENOMEM;
            p += 2;
            continue;
        }
        if (p[0] == '{' && (nl = name_len(p + 1)) > 0) {
            char name[256];
            const char *val;
            if (nl >= sizeof name) {
                mt_diag_add(d, NULL, 0, "launch.template",
                            "placeholder name too long in template token \"%s\"", tok);
                return -EINVAL;
            }
            memcpy(name, p + 1, nl);
            name[nl] = '\0';
            if (!strcmp(name, "args")) {
                mt_diag_add(d, NULL, 0, "launch.template",
                            "\"{args}\" must be a template token of its own (it becomes "
                            "several arguments), not part of \"%s\"",
                            tok);
                return -EINVAL;
            }
            val = ph ? mt_kv_get(ph, name) : NULL;
            if (!val && (!strcmp(name, "rev") || !strcmp(name, "work"))) {
                /* the words `check` prints for this contract too */
                mt_diag_add(d, NULL, 0, "launch.template",
                            "the template word \"%s\" names {%s}, which only `moetune bisect` "
                            "fills (the revision it measures and its prepared work directory); "
                            "run this contract with `moetune bisect`, or drop {%s} from the "
                            "template for `tune` and `measure`",
                            tok, name, name);
                return -EINVAL;
            }
            if (!val) {
                buf k = {0};
                known_names(ph, &k);
                mt_diag_add(d, NULL, 0, "launch.template",
                            "unknown placeholder '{%s}' in template token \"%s\"; known: %s "
                            "(write {{ and }} for literal braces)",
                            name, tok, k.s ? k.s : "{args}");
                free(k.s);
                return -EINVAL;
            }
            if (buf_add(b, val, strlen(val)) != 0)
                return -ENOMEM;
            p += nl + 2;
            continue;
        }
        if (buf_add(b, p, 1) != 0)
            return -ENOMEM;
        p++;
    }
    return 0;
}

int mt_launch_expand(const char *const *tmpl, size_t n, const mt_kv *placeholders,
                     const mt_strlist *args, mt_strlist *out, mt_diag *d)
{
    buf b = {0};
    size_t i, j;
    int rc = 0, seen_args = 0;
    for (i = 0; i < n && rc == 0; i++) {
        if (!strcmp(tmpl[i], "{args}")) {
            seen_args = 1;
            for (j = 0; args && j < args->n && rc == 0; j++)
                rc = mt_strlist_push(out, args->v[j]);
            continue;
        }
        rc = expand_token(tmpl[i], placeholders, &b, d);
        if (rc == 0)
            rc = mt_strlist_push(out, b.s);
    }
    if (rc == 0 && !seen_args) {
        mt_diag_add(d, NULL, 0, "launch.template",
                    "the template never says where the rendered arguments go; add \"{args}\"");
        rc = -EINVAL;
    }
    if (rc == -ENOMEM)
        mt_diag_add(d, NULL, 0, "launch.template", "out of memory expanding the template");
    free(b.s);
    return rc;
}

/* ---- environment and names -------------------------------------------------------- */

int mt_launch_kind(const char *name)
{
    if (name && !strcmp(name, "local"))
        return MT_LAUNCHER_LOCAL;
    if (name && !strcmp(name, "srun"))
        return MT_LAUNCHER_SRUN;
    return -1;
}

static int is_one_of(const char *const *names, const char *name, size_t n)
{
    size_t i;
    for (i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !strncmp(names[i], name, n))
            return 1;
    return 0;
}

static int has_prefix(const char *const *prefixes, const char *name, size_t n)
{
    size_t i;
    for (i = 0; prefixes[i]; i++) {
        size_t k = strlen(prefixes[i]);
        if (n > k && !strncmp(prefixes[i], name, k))
            return 1;
    }
    return 0;
}

int mt_launch_env_class(const char *name, size_t n)
{
    static const char *const result[] = {"CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF",
                                         NULL};
    static const char *const result_prefix[] = {"MOETUNE_SIM_", "NCCL_", "NVTE_", NULL};
    static const char *const pass[] = {"PATH",
                                       "HOME",
                                       "USER",
                                       "LOGNAME",
                                       "LANG",
                                       "LC_ALL",
                                       "TZ",
                                       "TMPDIR",
                                       "LD_LIBRARY_PATH",
                                       "RANK",
                                       "LOCAL_RANK",
                                       "WORLD_SIZE",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "CUDA_VISIBLE_DEVICES",
                                       "MOETUNE_CONTAINER_DIGEST",
                                       NULL};
    static const char *const pass_prefix[] = {"SLURM_", NULL};
    if (is_one_of(result, name, n) || has_prefix(result_prefix, name, n))
        return MT_ENV_RESULT;
    if (is_one_of(pass, name, n) || has_prefix(pass_prefix, name, n))
        return MT_ENV_PLACEMENT;
    return MT_ENV_DROPPED;
}

static int keep_var(int kind, const char *name, size_t n)
{
    int cls = mt_launch_env_class(name, n);
    /* SLURM_* only where srun reads it: a local run inside an allocation
     * must not look like one of its steps */
    if (cls == MT_ENV_PLACEMENT && n > 6 && !strncmp(name, "SLURM_", 6))
        return kind == MT_LAUNCHER_SRUN;
    return cls != MT_ENV_DROPPED;
}

int mt_launch_result_env(const mt_kv *knobs, mt_kv *out)
{
    char **e;
    for (e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        char *name, knob[600];
        int rc;
        if (!eq || eq == *e || mt_launch_env_class(*e, (size_t)(eq - *e)) != MT_ENV_RESULT)
            continue;
        if (!(name = strndup(*e, (size_t)(eq - *e))))
            return -ENOMEM;
        snprintf(knob, sizeof knob, "env.%s", name);
        rc = knobs && mt_kv_get(knobs, knob) ? 0 : mt_kv_set(out, name, eq + 1);
        free(name);
        if (rc != 0)
            return -ENOMEM;
    }
    return 0;
}

int mt_launch_environment(int kind, int inherit, const mt_kv *rendered, mt_kv *out)
{
    char **e;
    const char *k, *v;
    size_t i;
    for (e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        char *name;
        int rc;
        if (!eq || eq == *e || (!inherit && !keep_var(kind, *e, (size_t)(eq - *e))))
            continue;
        name = strndup(*e, (size_t)(eq - *e));
        if (!name)
            return -ENOMEM;
        rc = mt_kv_set(out, name, eq + 1);
        free(name);
        if (rc != 0)
            return rc;
    }
    for (i = 0; rendered && mt_kv_entry(rendered, i, &k, &v) == 0; i++)
        if (mt_kv_set(out, k, v) != 0)
            return -ENOMEM;
    return 0;
}

char *mt_launch_job_name(const char *tag)
{
    static unsigned counter;
    char host[256] = "host", *s = NULL, *p;
    unsigned char rnd[4] = {0, 0, 0, 0};
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "host");
    host[sizeof host - 1] = '\0';
    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
        unsigned x = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
        memcpy(rnd, &x, sizeof rnd);
    }
    if (asprintf(&s, "mt-%s-%s-%ld-%u-%02x%02x%02x%02x", tag && *tag ? tag : "run", host,
                 (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), rnd[0], rnd[1],
                 rnd[2], rnd[3]) < 0)
        return NULL;
    for (p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            *p = '_';
    return s;
}

/* ---- the launcher ------------------------------------------------------------- */

/* A positive integer setting; -1 when value is not one. */
static int parse_count(const char *value)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < 1 || v > 1 << 20)
        return -1;
    return (int)v;
}

/* One of srun's one-word settings k = v (rank_exec, container_*) into l.
 * 0, 1 when v is not one word (said in d), -1 out of memory. */
static int word_setting(mt_launch *l, const char *k, const char *v, const char *field, mt_diag *d)
{
    char **dst = !strcmp(k, "rank_exec")          ? &l->rank_exec
                 : !strcmp(k, "container_image")  ? &l->container_image
                 : !strcmp(k, "container_mounts") ? &l->container_mounts
                                                  : &l->container_workdir;
    const char *c;
    for (c = v; *c && !iscntrl((unsigned char)*c) && *c != ' '; c++)
        ;
    if (!*v || *c) {
        mt_diag_add(d, NULL, 0, field, "%s must be one word (no blank or control byte), not '%s'",
                    k, v);
        return 1;
    }
    free(*dst);
    if (!(*dst = strdup(v)))
        return -1;
    return 0;
}

/* Launcher setting k = v into l (ntasks_per_node into *ntasks).  0, 1
 * when the launcher has no such setting or v is not one of its values
 * (said in d), -1 out of memory. */
static int apply_setting(mt_launch *l, int kind, const char *k, const char *v, int *ntasks,
                         mt_diag *d)
{
    char field[300];
    snprintf(field, sizeof field, "launcher.%s", k);
    if (!strcmp(k, "cpu_bind")) {
        if (!strcmp(v, "numa"))
            l->cpu_bind_numa = 1;
        else if (strcmp(v, "none") != 0) {
            mt_diag_add(d, NULL, 0, field, "cpu_bind takes none or numa, not '%s'", v);
            return 1;
        }
    } else if (kind == MT_LAUNCHER_SRUN && !strcmp(k, "rank_env")) {
        if (!strcmp(v, "true") || !strcmp(v, "1"))
            l->rank_env = 1;
        else if (strcmp(v, "false") && strcmp(v, "0")) {
            mt_diag_add(d, NULL, 0, field, "rank_env takes true or false, not '%s'", v);
            return 1;
        }
    } else if (kind == MT_LAUNCHER_SRUN &&
               (!strcmp(k, "rank_exec") || !strcmp(k, "container_image") ||
                !strcmp(k, "container_mounts") || !strcmp(k, "container_workdir"))) {
        return word_setting(l, k, v, field, d);
    } else if (!strcmp(k, "ntasks_per_node")) {
        if ((*ntasks = parse_count(v)) < 0) {
            mt_diag_add(d, NULL, 0, field, "ntasks_per_node takes a count >= 1, not '%s'", v);
            return 1;
        }
    } else {
        mt_diag_add(d, NULL, 0, field,
                    "the %s launcher has no setting '%s' (it knows %s); a setting it cannot "
                    "apply is refused rather than ignored",
                    kind == MT_LAUNCHER_SRUN ? "srun" : "local", k,
                    kind == MT_LAUNCHER_SRUN
                        ? "cpu_bind, ntasks_per_node, rank_env, rank_exec, container_image, "
                          "container_mounts and container_workdir"
                        : "cpu_bind and ntasks_per_node");
        return 1;
    }
    return 0;
}

/* rank_env without rank_exec: this moetune program runs `rank-exec`.  0,
 * 1 when /proc/self/exe cannot be read (said in d), -1 out of memory. */
static int default_rank_exec(mt_launch *l, mt_diag *d)
{
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        mt_diag_add(d, NULL, 0, "launcher.rank_exec",
                    "rank_env needs the moetune program for `rank-exec`, and /proc/self/exe "
                    "cannot be read: set launch.srun.rank_exec to its path");
        return 1;
    }
    self[k] = '\0';
    if (!(l->rank_exec = strdup(self)))
        return -1;
    return 0;
}

mt_launch *mt_launch_new(int kind, int nodes, int gpus_per_node, const mt_kv *settings,
                         const char *job_name, const mt_kv *env, mt_diag *d)
{
    mt_launch *l;
    const char *k, *v;
    size_t i;
    int bad = 0, ntasks = 0, rc;
    if (kind != MT_LAUNCHER_LOCAL && kind != MT_LAUNCHER_SRUN) {
        mt_diag_add(d, NULL, 0, "launch.launcher", "unknown launcher; use \"local\" or \"srun\"");
        return NULL;
    }
    if (nodes < 1 || gpus_per_node < 0) {
        mt_diag_add(d, NULL, 0, "hardware",
                    "launcher needs nodes >= 1 and gpus_per_node >= 0 "
                    "(got %d and %d)",
                    nodes, gpus_per_node);
        return NULL;
    }
    if (kind == MT_LAUNCHER_SRUN && (!job_name || !*job_name)) {
        mt_diag_add(d, NULL, 0, "launch.launcher",
                    "the srun launcher needs a job name (mt_launch_job_name) to cancel its step");
        return NULL;
    }
    l = calloc(1, sizeof *l);
    if (!l)
        goto oom;
    l->kind = kind;
    l->nodes = nodes;
    l->gpus_per_node = gpus_per_node;
    l->cancel_timeout_s = 15;
    for (i = 0; settings && mt_kv_entry(settings, i, &k, &v) == 0; i++) {
        if ((rc = apply_setting(l, kind, k, v, &ntasks, d)) < 0)
            goto oom;
        if (rc)
            bad = 1;
    }
    if (bad) {
        mt_launch_destroy(&l);
        return NULL;
    }
    if (!bad && (l->container_mounts || l->container_workdir) && !l->container_image) {
        mt_diag_add(d, NULL, 0, "launcher.container_image",
                    "container_mounts and container_workdir need container_image (the image "
                    "pyxis starts the tasks in)");
        bad = 1;
    }
    if (bad) {
        mt_launch_destroy(&l);
        return NULL;
    }
    if (l->rank_env && !l->rank_exec) {
        if ((rc = default_rank_exec(l, d)) < 0)
            goto oom;
        if (rc) {
            mt_launch_destroy(&l);
            return NULL;
        }
    }
    l->ntasks_per_node = ntasks > 0 ? ntasks : gpus_per_node > 0 ? gpus_per_node : 1;
    l->env = env ? mt_kv_dup(env) : mt_kv_new();
    if (!l->env || (job_name && !(l->job_name = strdup(job_name))))
        goto oom;
    if ((v = mt_kv_get(l->env, "SLURM_JOB_ID")) != NULL && *v && !(l->slurm_job_id = strdup(v)))
        goto oom;
    return l;
oom:
    mt_diag_add(d, NULL, 0, NULL, "launcher: out of memory");
    mt_launch_destroy(&l);
    return NULL;
}

void mt_launch_destroy(mt_launch **lp)
{
    mt_launch *l;
    if (!lp || !*lp)
        return;
    l = *lp;
    free(l->job_name);
    free(l->nodelist);
    free(l->slurm_job_id);
    free(l->rank_exec);
    free(l->container_image);
    free(l->container_mounts);
    free(l->container_workdir);
    mt_kv_destroy(&l->env);
    free(l);
    *lp = NULL;
}

int mt_launch_wrap(const mt_launch *l, const mt_strlist *argv, mt_strlist *out)
{
    size_t i;
    int rc = 0;
    if (l->kind == MT_LAUNCHER_SRUN) {
        rc = mt_strlist_push(out, "srun");
        if (!rc)
            rc = mt_strlist_push(out, "-l"); /* "<task>: " before each line: the rank */
        if (!rc)
            rc = push_fmt(out, "--nodes=%d", l->nodes);
        /* a comparison's later replicates on its first control run's nodes */
        if (!rc && l->nodelist)
            rc = push_fmt(out, "--nodelist=%s", l->nodelist);
        if (!rc)
            rc = push_fmt(out, "--ntasks-per-node=%d", l->ntasks_per_node);
        /* explicit, because srun reads SLURM_NTASKS from its environment:
         * a worker started as a task of an allocation (srun or sbatch
         * --ntasks-per-node=1) passes its own task count on, and srun -n 1
         * --ntasks-per-node=8 would start one task */
        if (!rc)
            rc = push_fmt(out, "--ntasks=%d", l->nodes * l->ntasks_per_node);
        if (!rc && l->gpus_per_node > 0)
            rc = push_fmt(out, "--gpus-per-node=%d", l->gpus_per_node);
        if (!rc)
            rc = push_fmt(out, "--job-name=%s", l->job_name);
        /* one rank's death (an OOM) ends the step instead of leaving the
         * others waiting in a collective until a watchdog fires */
        if (!rc)
            rc = mt_strlist_push(out, "--kill-on-bad-exit=1");
        if (!rc && l->cpu_bind_numa)
            rc = mt_strlist_push(out, "--cpu-bind=ldoms"); /* each task to its NUMA domain */
        /* the container is Slurm's business (pyxis), never a shell wrapper */
        if (!rc && l->container_image)
            rc = push_fmt(out, "--container-image=%s", l->container_image);
        if (!rc && l->container_mounts)
            rc = push_fmt(out, "--container-mounts=%s", l->container_mounts);
        if (!rc && l->container_workdir)
            rc = push_fmt(out, "--container-workdir=%s", l->container_workdir);
        if (!rc && l->rank_env) {
            rc = mt_strlist_push(out, l->rank_exec);
            if (!rc)
                rc = mt_strlist_push(out, "rank-exec");
            if (!rc)
                rc = mt_strlist_push(out, "--");
        }
    }
    for (i = 0; argv && i < argv->n && rc == 0; i++)
        rc = mt_strlist_push(out, argv->v[i]);
    return rc;
}

int mt_launch_query_argv(const mt_launch *l, mt_strlist *out)
{
    int rc;
    if (l->kind != MT_LAUNCHER_SRUN || !l->slurm_job_id)
        return 0;
    rc = mt_strlist_push(out, "squeue");
    if (!rc)
        rc = mt_strlist_push(out, "--noheader");
    if (!rc)
        rc = mt_strlist_push(out, "--steps");
    if (!rc)
        rc = push_fmt(out, "--jobs=%s", l->slurm_job_id);
    if (!rc)
        rc = push_fmt(out, "--name=%s", l->job_name);
    if (!rc)
        rc = mt_strlist_push(out, "--format=%j %i");
    return rc;
}

int mt_launch_cancel_argv(const mt_launch *l, const char *step, mt_strlist *out)
{
    int rc;
    if (l->kind != MT_LAUNCHER_SRUN)
        return 0;
    if (l->slurm_job_id && !step)
        return 0;
    rc = mt_strlist_push(out, "scancel");
    if (!rc)
        rc = step ? mt_strlist_push(out, step) : push_fmt(out, "--name=%s", l->job_name);
    return rc;
}

/* ---- stopping a Slurm run ------------------------------------------------------------ */

typedef struct capture {
    char step[64];     /* "JOBID.STEPID" from squeue */
    char err[512];     /* first line of stderr */
    mt_strlist *lines; /* every non-empty stdout line, trimmed, when set */
    const char *name;  /* when set: only lines "NAME REST" count, as REST */
} capture;

static void capture_line(void *ctx, int stream, const char *line, size_t n)
{
    capture *c = ctx;
    size_t i = 0, j, dots = 0;
    if (stream == MT_STREAM_STDERR) {
        if (!c->err[0])
            snprintf(c->err, sizeof c->err, "%.*s", (int)(n < 400 ? n : 400), line);
        return;
    }
    while (i < n && isspace((unsigned char)line[i]))
        i++;
    if (c->name) {
        /* squeue --steps does not filter steps by --name (Slurm 22.05 lists
         * every step of the job, the worker's own included): match here */
        size_t k = strlen(c->name);
        if (n - i <= k || strncmp(line + i, c->name, k) || !isspace((unsigned char)line[i + k]))
            return;
        i += k;
        while (i < n && isspace((unsigned char)line[i]))
            i++;
    }
    if (c->lines && i < n && c->lines->n < 100000) {
        size_t e = n;
        char *t;
        while (e > i && isspace((unsigned char)line[e - 1]))
            e--;
        if ((t = strndup(line + i, e - i)) != NULL) {
            mt_strlist_push(c->lines, t);
            free(t);
        }
    }
    for (j = i; j < n && (isdigit((unsigned char)line[j]) || line[j] == '.'); j++)
        dots += line[j] == '.';
    if (dots == 1 && j > i + 2 && j - i < sizeof c->step && !c->step[0])
        snprintf(c->step, sizeof c->step, "%.*s", (int)(j - i), line + i);
}

/* Runs a Slurm client command; 0 when it exited 0. */
static int slurm_cmd(const mt_launch *l, const mt_strlist *argv, capture *c, mt_diag *d)
{
    mt_run_spec spec;
    mt_run_result res;
    mt_run *run;
    char **v = calloc(argv->n + 1, sizeof *v);
    int rc;
    if (!v)
        return -1;
    memcpy(v, argv->v, argv->n * sizeof *v);
    memset(&spec, 0, sizeof spec);
    spec.argv = (const char *const *)v;
    spec.env = l->env;
    spec.time_limit_s = l->cancel_timeout_s > 0 ? l->cancel_timeout_s : 15;
    spec.grace_s = 2;
    spec.on_line = capture_line;
    spec.line_ctx = c;
    run = mt_runner_start(&spec, d);
    free(v);
    if (!run)
        return -1;
    mt_runner_wait(run, &res);
    rc = res.outcome == MT_OUTCOME_OK ? 0 : -1;
    if (rc)
        mt_diag_add(d, NULL, 0, NULL, "%s (for %s): %s%s%s", argv->v[0], l->job_name, res.evidence,
                    c->err[0] ? ": " : "", c->err);
    mt_runner_destroy(&run);
    return rc;
}

int mt_launch_stop(void *ctx, mt_diag *d)
{
    mt_launch *l = ctx;
    mt_strlist q = {0}, cancel = {0};
    capture c;
    int rc = 0, attempt;
    if (!l || l->kind != MT_LAUNCHER_SRUN)
        return 0;
    memset(&c, 0, sizeof c);
    c.name = l->job_name;
    if (mt_launch_query_argv(l, &q) != 0)
        goto oom;
    /* a step that was just launched may not be listed yet */
    for (attempt = 0; q.n && attempt < 3 && !c.step[0]; attempt++) {
        if (attempt)
            usleep(300 * 1000);
        if (slurm_cmd(l, &q, &c, d) != 0)
            break;
    }
    if (mt_launch_cancel_argv(l, c.step[0] ? c.step : NULL, &cancel) != 0)
        goto oom;
    if (cancel.n) {
        memset(c.err, 0, sizeof c.err);
        rc = slurm_cmd(l, &cancel, &c, d);
    }
    mt_strlist_clear(&q);
    mt_strlist_clear(&cancel);
    return rc;
oom:
    mt_strlist_clear(&q);
    mt_strlist_clear(&cancel);
    mt_diag_add(d, NULL, 0, NULL, "launcher: out of memory");
    return -1;
}

int mt_launch_hosts(const mt_launch *l, mt_strlist *out, mt_diag *d)
{
    mt_strlist q = {0}, expand = {0}, nodes = {0};
    capture c;
    int rc = -1;
    if (l->kind != MT_LAUNCHER_SRUN) {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0)
            strcpy(host, "localhost");
        host[sizeof host - 1] = '\0';
        return mt_strlist_push(out, host) == 0 ? 0 : -1;
    }
    memset(&c, 0, sizeof c);
    c.lines = &nodes;
    c.name = l->job_name;
    /* the step's (or the job's) compressed node list, e.g. "gpu[01-04]"; a
     * job of its own is listed in every state, so that one that has already
     * ended is still found (slurmctld keeps it for MinJobAge, 300 s unless
     * set); an ended step of an allocation is not listed */
    if (mt_strlist_push(&q, "squeue") || mt_strlist_push(&q, "--noheader") ||
        (l->slurm_job_id &&
         (mt_strlist_push(&q, "--steps") || push_fmt(&q, "--jobs=%s", l->slurm_job_id))) ||
        (!l->slurm_job_id && mt_strlist_push(&q, "--states=all")) ||
        push_fmt(&q, "--name=%s", l->job_name) || mt_strlist_push(&q, "--format=%j %N"))
        goto done;
    if (slurm_cmd(l, &q, &c, d) != 0)
        goto done;
    if (nodes.n == 0) {
        mt_diag_add(d, NULL, 0, NULL, "srun launcher: %s %s is not in the queue (yet)",
                    l->slurm_job_id ? "step" : "job", l->job_name);
        goto done;
    }
    memset(&c, 0, sizeof c);
    c.lines = out;
    if (mt_strlist_push(&expand, "scontrol") || mt_strlist_push(&expand, "show") ||
        mt_strlist_push(&expand, "hostnames") || mt_strlist_push(&expand, nodes.v[0]))
        goto done;
    rc = slurm_cmd(l, &expand, &c, d);
done:
    mt_strlist_clear(&q);
    mt_strlist_clear(&expand);
    mt_strlist_clear(&nodes);
    return rc;
}
