/*
 * worker.c - `moetune worker` (see worker.h and PROTOCOL.md).
 */
#include "worker.h"

#include "clock.h"
#include "config.h"
#include "keys.h"
#include "launch.h"
#include "job_memo.h"
#include "measure.h"
#include "prepare.h"
#include "proto.h"
#include "render.h"
#include "sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_PENDING 64
#define LINES_MAX 256

typedef struct pending {
    char job_id[MT_PROTO_ID_MAX + 1];
    int retry;
    cJSON *body; /* the result message's body */
    double last_sent;
} pending;

typedef struct wk {
    mt_worker_opts o;
    void *ctx, *sock;
    int sfd;
    char host[128], name[MT_PROTO_ID_MAX + 1];
    /* the running job */
    int busy;
    pid_t pid;
    int pipe_fd;
    char job_id[MT_PROTO_ID_MAX + 1];
    int retry;
    char store_dir[PATH_MAX];
    mt_contract *contract;
    double started;
    char *lines[LINES_MAX];
    size_t nlines;
    char partial[8192];
    size_t npartial;
    long iteration;
    double last_progress;
    int cancelled; /* the coordinator cancelled the running job: no result */
    /* results held until acknowledged */
    pending pend[MAX_PENDING];
    size_t npend;
    double last_heard, last_hb;
    double last_ready; /* when ready (and every held result) went last */
    int lost;
    long long hb_seq;
    int stop;
    /* the DEALER's handshakes, from a socket monitor: a coordinator that
     * refuses this worker's key or security mechanism is not "unreachable" */
    void *mon;
    char refused[400]; /* why the last handshake failed, "" after one succeeded */
} wk;

static void logf_(wk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(wk *w, const char *fmt, ...)
{
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    va_list ap;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    fprintf(stderr, "[%s] worker %s: ", stamp, w->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- the allowlist --------------------------------------------------------------------- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Programs a worker never runs, and interpreters it runs only without inline
 * code.  A name matches itself and itself followed by a version
 * ("python3.12", "perl5.36.0"). */
static const char *const shells[] = {"sh",  "bash", "dash", "zsh",     "ksh", "mksh",
                                     "csh", "tcsh", "fish", "busybox", "env", NULL};
static const char *const interps[] = {"python", "python3", "perl", "ruby", "node", "nodejs",
                                      "lua",    "php",     "Rscript", "julia", NULL};

static int name_in(const char *const *list, const char *name)
{
    size_t i, l;
    for (i = 0; list[i]; i++) {
        l = strlen(list[i]);
        if (!strncmp(name, list[i], l) && strspn(name + l, "0123456789.") == strlen(name + l))
            return 1;
    }
    return 0;
}

/* A shell or interpreter found at start-up, by its identity. */
typedef struct known_prog {
    char *path; /* real path */
    off_t size;
    unsigned char sha[32];
    int shell; /* 1 shell, 0 interpreter */
} known_prog;

static known_prog *known;
static size_t n_known, cap_known;
static int known_scanned;

static int sha_file(const char *path, unsigned char out[32])
{
    mt_sha256 h;
    unsigned char buf[65536];
    ssize_t got;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    mt_sha256_init(&h);
    while ((got = read(fd, buf, sizeof buf)) > 0)
        mt_sha256_update(&h, buf, (size_t)got);
    close(fd);
    if (got < 0)
        return -1;
    mt_sha256_final(&h, out);
    return 0;
}

static void scan_dir(const char *dir)
{
    DIR *dh = opendir(dir);
    struct dirent *de;
    if (!dh)
        return;
    while ((de = readdir(dh))) {
        char full[PATH_MAX], real[PATH_MAX];
        struct stat st;
        int shell = name_in(shells, de->d_name);
        size_t i;
        if (!shell && !name_in(interps, de->d_name))
            continue;
        if (snprintf(full, sizeof full, "%s/%s", dir, de->d_name) >= (int)sizeof full ||
            !realpath(full, real) || stat(real, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        for (i = 0; i < n_known; i++)
            if (!strcmp(known[i].path, real))
                break;
        if (i < n_known) {
            known[i].shell |= shell; /* sh -> dash: a shell whatever else it is called */
            continue;
        }
        if (n_known == cap_known) {
            size_t cap = cap_known ? cap_known * 2 : 16;
            known_prog *nk = realloc(known, cap * sizeof *nk);
            if (!nk)
                break;
            known = nk, cap_known = cap;
        }
        /* a real file named like an interpreter but called by an odd name is
         * judged by the real name: bash reached as "sh" is a shell either way */
        shell |= name_in(shells, base_name(real));
        known[n_known].size = st.st_size;
        known[n_known].shell = shell;
        if (sha_file(real, known[n_known].sha) != 0 || !(known[n_known].path = strdup(real)))
            continue;
        n_known++;
    }
    closedir(dh);
}

void mt_worker_scan_interpreters(void)
{
    const char *path = getenv("PATH");
    char *copy, *tok, *save = NULL;
    if (known_scanned)
        return;
    known_scanned = 1;
    copy = strdup(path ? path : "");
    for (tok = copy ? strtok_r(copy, ":", &save) : NULL; tok; tok = strtok_r(NULL, ":", &save))
        if (*tok == '/')
            scan_dir(tok);
    free(copy);
    scan_dir("/bin");
    scan_dir("/usr/bin");
}

/* argv0 resolved the way the runner's execvp-style search does, with
 * search_path (the job's PATH); into out (absolute, links not resolved).
 * 0, or -1 when it names no executable file now. */
static int resolve_program(const char *argv0, const char *search_path, char *out, size_t n)
{
    const char *p, *colon;
    struct stat st;
    if (strchr(argv0, '/')) {
        if (stat(argv0, &st) != 0 || !S_ISREG(st.st_mode))
            return -1;
        snprintf(out, n, "%s", argv0);
        return 0;
    }
    if (!search_path)
        search_path = "/usr/local/bin:/usr/bin:/bin";
    for (p = search_path;; p = colon + 1) {
        size_t dl;
        colon = strchr(p, ':');
        dl = colon ? (size_t)(colon - p) : strlen(p);
        if (dl)
            snprintf(out, n, "%.*s/%s", (int)dl, p, argv0);
        else
            snprintf(out, n, "./%s", argv0);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        if (!colon)
            break;
    }
    return -1;
}

int mt_worker_allowed(const char *const *argv, const char *const *allow, size_t n_allow,
                      const char *search_path, char *why, size_t n)
{
    static const char *const inline_flags[] = {"-c", "-e", "-E", "--eval", "-r", "--command",
                                               NULL};
    const char *prog = argv && argv[0] ? argv[0] : NULL, *b, *rb = NULL;
    char found[PATH_MAX], real[PATH_MAX];
    int have_real = 0, is_interp, have_sha = 0;
    unsigned char sha[32];
    struct stat st;
    size_t i, j;
    int listed = 0;
    if (!prog || !*prog) {
        snprintf(why, n, "the job has no program to run");
        return 0;
    }
    mt_worker_scan_interpreters();
    b = base_name(prog);
    /* what the file is: every link resolved */
    if (resolve_program(prog, search_path, found, sizeof found) == 0 && realpath(found, real) &&
        stat(real, &st) == 0) {
        have_real = 1;
        rb = base_name(real);
    }
    if (name_in(shells, b) || (rb && name_in(shells, rb))) {
        snprintf(why, n, "program %.200s%s%.200s%s is a shell: a worker never runs a shell", prog,
                 rb ? " (" : "", rb ? real : "", rb ? ")" : "");
        return 0;
    }
    is_interp = name_in(interps, b) || (rb && name_in(interps, rb));
    for (i = 0; have_real && i < n_known; i++) {
        if (known[i].size != st.st_size)
            continue;
        if (!have_sha && sha_file(real, sha) != 0)
            break;
        have_sha = 1;
        if (memcmp(sha, known[i].sha, sizeof sha))
            continue;
        if (known[i].shell) {
            snprintf(why, n,
                     "program %.200s (%.200s) is the shell %.200s (same size and SHA-256): a "
                     "worker never runs a shell, whatever it is called",
                     prog, real, known[i].path);
            return 0;
        }
        is_interp = 1;
    }
    for (i = 0; i < n_allow && !listed; i++) {
        if (strchr(allow[i], '/')) {
            char areal[PATH_MAX];
            /* a path names a real file: links on either side resolved */
            listed = have_real ? realpath(allow[i], areal) && !strcmp(areal, real)
                               : !strcmp(allow[i], prog);
        } else
            listed = !strcmp(allow[i], b) || (rb && !strcmp(allow[i], rb));
    }
    if (!listed) {
        snprintf(why, n, "program %.200s is not on this worker's allowlist", prog);
        return 0;
    }
    for (j = 1; is_interp && argv[j]; j++) {
        const char *a = argv[j];
        size_t k;
        for (k = 0; inline_flags[k]; k++)
            if (!strcmp(a, inline_flags[k]))
                break;
        /* combined short flags such as -uc or -ne carry inline code too */
        if (inline_flags[k] || (a[0] == '-' && a[1] && a[1] != '-' && strpbrk(a + 1, "ce") != NULL)) {
            snprintf(why, n, "interpreter %.100s%s%.200s%s with inline code (%.40s) is refused", b,
                     rb ? " (" : "", rb ? real : "", rb ? ")" : "", a);
            return 0;
        }
    }
    return 1;
}

/* The PATH a job's program is looked up in: the contract's launch.env PATH,
 * else the worker's own (the runner's search, see launch.c). */
static const char *job_search_path(const mt_contract *c)
{
    const char *p = c && c->launch_env ? mt_kv_get(c->launch_env, "PATH") : NULL;
    return p ? p : getenv("PATH");
}

/* ---- handshakes ------------------------------------------------------------------------ */

static void monitor_start(wk *w)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://worker-monitor-%d", (int)getpid());
    if (zmq_socket_monitor(w->sock, ep,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
        return; /* without it, a refusal reads as "unreachable" */
    if (!(w->mon = zmq_socket(w->ctx, ZMQ_PAIR)) || zmq_connect(w->mon, ep)) {
        if (w->mon)
            zmq_close(w->mon);
        w->mon = NULL;
    }
}

/* Reads the monitor's events; logs each new reason a handshake failed. */
static void monitor_read(wk *w)
{
    for (;;) {
        zmq_msg_t ev, addr;
        uint16_t event;
        uint32_t value;
        char why[400];
        const int curve = w->o.key_dir || w->o.server_key;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, w->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        zmq_msg_init(&addr);
        zmq_msg_recv(&addr, w->mon, 0); /* the endpoint frame always follows */
        if (zmq_msg_size(&ev) < 6) {
            zmq_msg_close(&ev), zmq_msg_close(&addr);
            continue;
        }
        memcpy(&event, zmq_msg_data(&ev), 2);
        memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
        zmq_msg_close(&ev), zmq_msg_close(&addr);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            if (w->refused[0])
                logf_(w, "the handshake with the coordinator succeeded");
            w->refused[0] = '\0';
            continue;
        }
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            snprintf(why, sizeof why,
                     "the coordinator refused the handshake (ZAP status %u): %s", (unsigned)value,
                     value == 400 ? "this worker's public key is not one of its known worker "
                                    "keys (copy NAME.pub into the coordinator's KEYS/workers)"
                                  : "its authentication handler denied this worker");
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                 value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            snprintf(why, sizeof why,
                     "the coordinator refused the handshake: security mechanism mismatch (%s)",
                     curve ? "this worker uses CURVE and the coordinator does not: drop --key and "
                             "--server-key, or start the tune with --keys"
                           : "the coordinator requires CURVE: give this worker --key DIR/NAME and "
                             "--server-key FILE");
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            snprintf(why, sizeof why,
                     "the handshake with the coordinator failed: ZMTP protocol error 0x%08x%s",
                     (unsigned)value,
                     curve ? " (with CURVE: is --server-key the coordinator's public key?)" : "");
        else
            snprintf(why, sizeof why, "the handshake with the coordinator failed (%s)",
                     curve ? "CURVE: is --server-key the coordinator's public key?"
                           : "no detail from ZeroMQ; if the coordinator requires CURVE, give "
                             "this worker --key DIR/NAME and --server-key FILE");
        if (strcmp(why, w->refused)) {
            snprintf(w->refused, sizeof w->refused, "%s", why);
            logf_(w, "%s", why);
        }
    }
}

/* ---- sending ----------------------------------------------------------------------------- */

static void send_msg(wk *w, int cmd, cJSON *body)
{
    char err[256];
    int rc = mt_proto_send(w->sock, NULL, 0, cmd, body, err, sizeof err);
    if (rc && rc != -EAGAIN)
        logf_(w, "cannot send %s: %s", mt_proto_cmd_name(cmd), err);
    cJSON_Delete(body);
}

static void send_ready(wk *w)
{
    mt_proto_ready r;
    mt_proto_jobref running, fin[MAX_PENDING];
    const char *launch[4];
    char lbuf[128], *tok, *save = NULL;
    size_t nl = 0, i;
    memset(&r, 0, sizeof r);
    r.worker = w->name;
    r.host = w->host;
    r.gpus = w->o.gpus;
    r.gpu_type = w->o.gpu_type ? w->o.gpu_type : "";
    r.nodes = w->o.nodes > 0 ? w->o.nodes : 1;
    r.slots = 1;
    r.version = "0.1.0";
    snprintf(lbuf, sizeof lbuf, "%s", w->o.launchers ? w->o.launchers : "local");
    for (tok = strtok_r(lbuf, ",", &save); tok && nl < 4; tok = strtok_r(NULL, ",", &save))
        launch[nl++] = tok;
    running.job_id = w->job_id;
    running.retry = w->retry;
    for (i = 0; i < w->npend; i++) {
        fin[i].job_id = w->pend[i].job_id;
        fin[i].retry = w->pend[i].retry;
    }
    send_msg(w, MT_PROTO_READY,
             mt_proto_ready_body(&r, launch, nl, w->o.allow, w->o.n_allow, &running,
                                 w->busy ? 1 : 0, fin, w->npend));
    w->last_ready = mt_clock_wall_s();
}

static void send_heartbeat(wk *w)
{
    mt_proto_heartbeat h;
    mt_proto_jobref running;
    memset(&h, 0, sizeof h);
    h.seq = w->hb_seq++;
    h.time = mt_clock_wall_s();
    running.job_id = w->job_id;
    running.retry = w->retry;
    send_msg(w, MT_PROTO_HEARTBEAT, mt_proto_heartbeat_body(&h, &running, w->busy ? 1 : 0));
    w->last_hb = mt_clock_wall_s();
}

static void send_ack(wk *w, const char *job_id, int retry, int accepted, const char *reason)
{
    mt_proto_job_ack a;
    memset(&a, 0, sizeof a);
    a.job_id = job_id;
    a.retry = retry;
    a.accepted = accepted;
    a.reason = reason;
    send_msg(w, MT_PROTO_JOB_ACK, mt_proto_job_ack_body(&a));
}

static void flush_progress(wk *w)
{
    mt_proto_progress p;
    size_t i;
    if (!w->busy)
        return;
    memset(&p, 0, sizeof p);
    p.job_id = w->job_id;
    p.retry = w->retry;
    p.iteration = w->iteration;
    p.elapsed_s = mt_clock_wall_s() - w->started;
    p.step_ms = NAN;
    send_msg(w, MT_PROTO_PROGRESS,
             mt_proto_progress_body(&p, (const char *const *)w->lines, w->nlines));
    for (i = 0; i < w->nlines; i++)
        free(w->lines[i]);
    w->nlines = 0;
    w->last_progress = mt_clock_wall_s();
}

static void resend_results(wk *w, int all)
{
    size_t i;
    double t = mt_clock_wall_s();
    char err[256];
    for (i = 0; i < w->npend; i++) {
        if (!all && t - w->pend[i].last_sent < 2.0)
            continue;
        if (mt_proto_send(w->sock, NULL, 0, MT_PROTO_RESULT, w->pend[i].body, err, sizeof err) ==
            0)
            w->pend[i].last_sent = t;
    }
}

/* ---- running a job ----------------------------------------------------------------------- */

static void child_line(void *ctx, const char *line, size_t n)
{
    int fd = *(int *)ctx;
    struct part {
        const void *b;
        size_t n;
    } parts[2] = {{line, n}, {"\n", 1}};
    size_t i;
    for (i = 0; i < 2; i++) {
        const char *p = parts[i].b;
        size_t left = parts[i].n;
        while (left > 0) {
            ssize_t k = write(fd, p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return;
            p += k, left -= (size_t)k;
        }
    }
}

/* The job process's cancel flag: SIGTERM (the worker's cancel, or its
 * shutdown) stops the run through the runner, so that the launcher's stop
 * hook runs (scancel of the Slurm step) before any signal. */
static volatile sig_atomic_t job_cancel;

static void on_cancel_signal(int sig)
{
    (void)sig;
    job_cancel = 1;
}

static char *memo_cb(const mt_measure *m, void *ctx)
{
    (void)ctx;
    /* a cancelled run is not the job's result: nothing is stored, so a
     * later retry of the job runs again */
    if (job_cancel)
        return NULL;
    return mt_measure_memo_json(m);
}

static mt_kv *config_from_text(const char *text)
{
    mt_kv *kv = mt_kv_new();
    const char *p = text;
    while (kv && *p) {
        const char *nl = strchr(p, '\n'), *eq;
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        if (line && (eq = strchr(line, '=')) != NULL) {
            line[eq - line] = '\0';
            mt_kv_set(kv, line, eq + 1);
        }
        free(line);
        p += len + (nl ? 1 : 0);
    }
    return kv;
}

/* The job's plugins: the worker's own (built-ins, MOETUNE_PLUGIN_PATH), the
 * files of the contract's launch.plugin_path only with --trust-plugin-path
 * (each refusal logged), then the contract's launch.plugins must hold.
 * NULL with why filled when they do not. */
static mt_registry *load_registry(wk *w, const mt_contract *c, mt_diag *d, char *why, size_t n_why)
{
    mt_registry *r = mt_registry_new();
    char **extra = NULL;
    size_t n = 0, i;
    if (c->n_plugin_path && !w->o.trust_plugin_path)
        for (i = 0; i < c->n_plugin_path; i++)
            logf_(w, "refused to load \"%s\" (the job contract's launch.plugin_path): files a "
                     "contract names load only with --trust-plugin-path",
                  c->plugin_path[i]);
    if (c->n_plugin_path && w->o.trust_plugin_path) {
        const char *slash = strrchr(c->path, '/');
        extra = calloc(c->n_plugin_path, sizeof *extra);
        for (i = 0; extra && i < c->n_plugin_path; i++) {
            char buf[PATH_MAX];
            const char *p = c->plugin_path[i];
            if (p[0] == '/' || !slash)
                snprintf(buf, sizeof buf, "%s", p);
            else
                snprintf(buf, sizeof buf, "%.*s/%s", (int)(slash - c->path), c->path, p);
            extra[n++] = strdup(buf);
        }
    }
    mt_registry_load_default(r, (const char *const *)extra, n, d);
    mt_registry_finish(r, d);
    for (i = 0; i < n; i++)
        free(extra[i]);
    free(extra);
    for (i = 0; r && i < c->n_plugins; i++) {
        char need[1024];
        if (mt_registry_require(r, c->plugins[i], c->plugin_min_versions[i], need, sizeof need)) {
            snprintf(why, n_why, "launch.plugins on this worker: %.400s", need);
            mt_registry_destroy(&r);
        }
    }
    return r;
}

/* The program the job would run: the template expanded, before any
 * launcher the worker adds. */
static int job_argv(wk *w, mt_registry *reg, const mt_contract *c, const mt_kv *cfg,
                    mt_strlist *out, mt_diag *d)
{
    mt_rendered r;
    mt_kv *ph = mt_kv_new();
    int rc;
    mt_rendered_init(&r);
    rc = mt_render(reg, c, cfg, (uint32_t)c->dialect, &r, d);
    mt_kv_set(ph, "sim", w->o.sim_path ? w->o.sim_path : "moetune-sim");
    mt_kv_set(ph, "run_dir", w->o.dir);
    mt_kv_set(ph, "nodes", mt_kv_get(c->hardware, "nodes"));
    mt_kv_set(ph, "gpus_per_node", mt_kv_get(c->hardware, "gpus_per_node"));
    mt_kv_set(ph, "world_size", mt_kv_get(c->hardware, "world_size"));
    mt_kv_set(ph, "job_name", "moetune-job");
    if (!rc)
        rc = mt_launch_expand((const char *const *)c->launch_template, c->n_template, ph, &r.argv,
                              out, d);
    mt_kv_destroy(&ph);
    mt_rendered_clear(&r);
    return rc;
}

/* The key of a job's memo in the worker's store: the job id for its
 * first run, "JOB_ID@retry N" for a retry, so that a retry after an
 * infrastructure failure (PROTOCOL.md 5, "Infra results") runs again
 * instead of finding the failed attempt's memo. */
static void wk_memo_key(char *out, size_t n, const char *job_id, int retry)
{
    if (retry > 0)
        snprintf(out, n, "%s@retry %d", job_id, retry);
    else
        snprintf(out, n, "%s", job_id);
}

/* The finished job's result from the worker's store: its memo, run,
 * samples and GPU rows; NULL when the memo is missing. */
static cJSON *result_body(wk *w, const char *store_dir, const mt_contract *c, const char *job_id,
                          int retry, const char *why_missing)
{
    mt_diag *d = mt_diag_new();
    mt_store *st = mt_store_open(store_dir, c, d);
    char *memo = NULL, key[MT_PROTO_ID_MAX + 32];
    cJSON *body = NULL, *m;
    wk_memo_key(key, sizeof key, job_id, retry);
    if (st && mt_store_memo_get(st, key, &memo, d) == 1 && (m = cJSON_Parse(memo))) {
        double run_id = cJSON_IsNumber(cJSON_GetObjectItem(m, "run_id"))
                            ? cJSON_GetObjectItem(m, "run_id")->valuedouble
                            : -1;
        mt_store_run *runs = NULL;
        size_t nr = 0, i;
        cJSON_Delete(m);
        if (run_id >= 0 && mt_store_list_runs(st, NULL, NULL, &runs, &nr, d) == 0) {
            for (i = 0; i < nr; i++)
                if (runs[i].id == (int64_t)run_id) {
                    mt_store_result r;
                    mt_store_sample *s = NULL;
                    mt_store_gpu_mem *g = NULL;
                    size_t ns = 0, ng = 0;
                    memset(&r, 0, sizeof r);
                    mt_store_samples(st, runs[i].id, &s, &ns, d);
                    mt_store_gpu_memory(st, runs[i].id, &g, &ng, d);
                    r.run = runs[i];
                    r.run.retry = retry;
                    r.run.worker = w->name;
                    r.samples = s, r.n_samples = ns, r.gpus = g, r.n_gpus = ng;
                    body = mt_proto_result_body(job_id, retry, memo, &r);
                    mt_store_samples_free(s, ns);
                    mt_store_gpu_memory_free(g, ng);
                    break;
                }
            mt_store_runs_free(runs, nr);
        }
        if (!body)
            body = mt_proto_result_body(job_id, retry, memo, NULL);
    }
    if (!body && why_missing) {
        char *text = mt_job_memo_failed("infra", why_missing);
        body = text ? mt_proto_result_body(job_id, retry, text, NULL) : NULL;
        free(text);
    }
    free(memo);
    mt_store_destroy(&st);
    mt_diag_destroy(&d);
    return body;
}

static void hold_result(wk *w, const char *job_id, int retry, cJSON *body)
{
    char err[256];
    size_t i;
    if (!body)
        return;
    for (i = 0; i < w->npend; i++)
        if (!strcmp(w->pend[i].job_id, job_id) && w->pend[i].retry == retry) {
            cJSON_Delete(w->pend[i].body);
            w->pend[i].body = body;
            break;
        }
    if (i == w->npend) {
        if (w->npend == MAX_PENDING) {
            logf_(w, "too many unacknowledged results; dropping the oldest (it stays in the store)");
            cJSON_Delete(w->pend[0].body);
            memmove(w->pend, w->pend + 1, (MAX_PENDING - 1) * sizeof *w->pend);
            w->npend--;
        }
        snprintf(w->pend[w->npend].job_id, sizeof w->pend[0].job_id, "%s", job_id);
        w->pend[w->npend].retry = retry;
        w->pend[w->npend].body = body;
        w->npend++;
        i = w->npend - 1;
    }
    if (mt_proto_send(w->sock, NULL, 0, MT_PROTO_RESULT, w->pend[i].body, err, sizeof err) == 0)
        w->pend[i].last_sent = mt_clock_wall_s();
}

/* A job the worker already has: running (acknowledged again), another one
 * running (refused) or finished (its result again).  1 when msg's job j was
 * answered so, 0 when it is new. */
static int job_known(wk *w, const mt_proto_job *j)
{
    size_t i;
    if (w->busy) {
        if (!strcmp(w->job_id, j->job_id) && w->retry == j->retry)
            send_ack(w, j->job_id, j->retry, 1, NULL); /* a repeated job: already running */
        else
            send_ack(w, j->job_id, j->retry, 0, "no free slot");
        return 1;
    }
    for (i = 0; i < w->npend; i++)
        if (!strcmp(w->pend[i].job_id, j->job_id) && w->pend[i].retry == j->retry) {
            send_ack(w, j->job_id, j->retry, 1, NULL); /* finished: the result again */
            resend_results(w, 1);
            return 1;
        }
    return 0;
}

/* The job's contract, kept in the work directory by its fingerprint (into
 * fp, 17 bytes).  Caller owns the contract; NULL once the job is refused. */
static mt_contract *job_contract(wk *w, const mt_proto_job *j, mt_diag *d, char *fp)
{
    char path[PATH_MAX], why[512];
    mt_contract *c;
    FILE *f;
    snprintf(path, sizeof path, "%s/contracts", w->o.dir);
    mkdir(path, 0755);
    {
        mt_contract *probe = mt_contract_load_string(j->contract, "(job contract)", d);
        if (!probe) {
            snprintf(why, sizeof why, "the job's contract does not load: %s",
                     mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
            send_ack(w, j->job_id, j->retry, 0, why);
            return NULL;
        }
        memcpy(fp, probe->fingerprint, 16);
        fp[16] = '\0';
        mt_contract_destroy(&probe);
    }
    snprintf(path, sizeof path, "%s/contracts/%s.cfg", w->o.dir, fp);
    if ((f = fopen(path, "w"))) {
        fputs(j->contract, f);
        fclose(f);
    }
    if (!(c = mt_contract_load(path, d))) {
        send_ack(w, j->job_id, j->retry, 0, "the job's contract does not load");
        return NULL;
    }
    return c;
}

/* Whether argv's program is on the worker's allowlist; why says not. */
static int argv_allowed(wk *w, const mt_contract *c, const mt_strlist *argv, char *why,
                        size_t why_size)
{
    const char **av = calloc(argv->n + 1, sizeof *av);
    size_t i;
    int ok;
    for (i = 0; av && i < argv->n; i++)
        av[i] = argv->v[i];
    ok = av && mt_worker_allowed(av, w->o.allow, w->o.n_allow, job_search_path(c), why, why_size);
    free(av);
    return ok;
}

/* A bisect job: the revision's prepare templates into *tv / *n_tv (borrowed
 * from j, the array the caller's to free) and its work directory into work,
 * each expanded program on the allowlist like the job's own.  0, or -1 once
 * the job is refused. */
static int bisect_prepare(wk *w, const mt_proto_job *j, const mt_contract *c, mt_diag *d,
                          const char ***tv, size_t *n_tv, char *work, size_t work_size)
{
    mt_strlist *steps = NULL;
    char id[17], why[512];
    size_t i;
    int ok = 1;
    if (!j->rev) {
        send_ack(w, j->job_id, j->retry, 0, "a bisect job needs its revision (rev)");
        return -1;
    }
    *n_tv = j->prepare ? (size_t)cJSON_GetArraySize(j->prepare) : 0;
    *tv = calloc(*n_tv + 1, sizeof **tv);
    for (i = 0; *tv && i < *n_tv; i++)
        (*tv)[i] = mt_proto_str_at(j->prepare, i);
    mt_prepare_rev_id(j->rev, id);
    {
        /* absolute: the job runs in its own directory */
        char abs[PATH_MAX];
        if (!realpath(w->o.dir, abs))
            snprintf(abs, sizeof abs, "%s", w->o.dir);
        snprintf(work, work_size, "%.2000s/work/%s", abs, id);
    }
    if (!*tv || mt_prepare_expand(*tv, *n_tv, j->rev, j->repo, work, &steps, d)) {
        snprintf(why, sizeof why, "the job's prepare steps do not expand: %s",
                 mt_diag_count(d) ? mt_diag_at(d, mt_diag_count(d) - 1)->message : "?");
        send_ack(w, j->job_id, j->retry, 0, why);
        return -1;
    }
    for (i = 0; i < *n_tv; i++) {
        if (ok && !argv_allowed(w, c, &steps[i], why, sizeof why))
            ok = 0;
        mt_strlist_clear(&steps[i]);
    }
    free(steps);
    if (!ok) {
        logf_(w, "refused job %s: prepare: %s", j->job_id, why);
        send_ack(w, j->job_id, j->retry, 0, why);
        return -1;
    }
    return 0;
}

/* Finished before (a worker restart): 1 when the store has the job's
 * result, which is acknowledged and held for sending, not run again. */
static int job_finished_before(wk *w, const mt_proto_job *j, const mt_contract *c, mt_diag *d)
{
    cJSON *b;
    char sd[PATH_MAX];
    snprintf(sd, sizeof sd, "%s/stores", w->o.dir);
    mkdir(sd, 0755);
    b = NULL;
    {
        mt_store *st = mt_store_open(w->store_dir, c, d);
        char *memo = NULL;
        char key[MT_PROTO_ID_MAX + 32];
        int have;
        wk_memo_key(key, sizeof key, j->job_id, j->retry);
        have = st && mt_store_memo_get(st, key, &memo, d) == 1;
        free(memo);
        mt_store_destroy(&st);
        if (have)
            b = result_body(w, w->store_dir, c, j->job_id, j->retry, NULL);
    }
    if (b) {
        send_ack(w, j->job_id, j->retry, 1, NULL);
        hold_result(w, j->job_id, j->retry, b);
        return 1;
    }
    return 0;
}

/* The forked job: measure into the worker's own store, progress to the
 * pipe fds[1]; a bisect job (tv) prepares its revision first.  Exits. */
static void run_job_child(wk *w, const mt_proto_job *j, const mt_contract *c, mt_registry *reg,
                          mt_kv *cfg, const char **tv, size_t n_tv, char *work, size_t work_size,
                          int *fds, mt_diag *d)
{
    sigset_t none;
    struct sigaction sa;
    mt_store *st;
    mt_measure_spec spec;
    char memo_key[MT_PROTO_ID_MAX + 32];
    mt_measure m;
    char rundir[PATH_MAX];
    int rc;
    size_t i;
    unsigned long long seed = j->sim_seed ? strtoull(j->sim_seed, NULL, 10) : 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cancel_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close(fds[0]);
    st = mt_store_open(w->store_dir, c, d);
    snprintf(rundir, sizeof rundir, "%s/runs", w->o.dir);
    mkdir(rundir, 0755);
    /* one directory per job and retry: "screen_<config>_<rep>-<retry>" */
    snprintf(rundir, sizeof rundir, "%s/runs/%s-%d", w->o.dir,
             j->job_id + (strncmp(j->job_id, "job/", 4) ? 0 : 4), j->retry);
    for (i = strlen(w->o.dir) + 6; rundir[i]; i++)
        if (rundir[i] == '/')
            rundir[i] = '_';
    memset(&spec, 0, sizeof spec);
    spec.contract = c;
    spec.reg = reg;
    spec.config = cfg;
    spec.kind = j->kind;
    spec.replicate = j->replicate;
    spec.retry = j->retry;
    spec.run_dir = rundir;
    spec.sim_path = w->o.sim_path;
    spec.time_limit_s = j->time_limit_s;
    spec.hang_factor = j->hang_factor;
    spec.profile = j->profile;
    spec.sim_seed = seed;
    spec.routing = j->routing;
    spec.nodelist = j->nodelist;
    spec.on_line = child_line;
    spec.line_ctx = &fds[1];
    wk_memo_key(memo_key, sizeof memo_key, j->job_id, j->retry);
    spec.memo_key = memo_key;
    spec.memo = memo_cb;
    spec.cancel = &job_cancel;
    if (tv) {
        /* prepare the revision first (once per revision on this worker);
         * a skip or a failure is the job's typed outcome */
        char wr[PATH_MAX];
        snprintf(wr, sizeof wr, "%.3000s", work);
        *strrchr(wr, '/') = '\0';
        rc = mt_prepare_job(tv, n_tv, j->rev, j->repo, wr, j->prepare_timeout_s, st, j->job_id,
                            work, work_size, d);
        if (rc <= 0) {
            mt_store_destroy(&st);
            _exit(rc < 0 ? 1 : 0);
        }
        spec.rev = j->rev;
        spec.work = work;
    }
    rc = st ? mt_measure_run(&spec, st, &m, d) : -1;
    if (rc < 0)
        mt_diag_print(d, stderr);
    if (st)
        mt_measure_clear(&m); /* also when the store failed */
    mt_store_destroy(&st);
    _exit(rc < 0 ? 1 : 0);
}

/* The worker busy with job j, forked as pid, reading its progress from fd;
 * takes over the contract *c. */
static void job_running(wk *w, const mt_proto_job *j, pid_t pid, int fd, mt_contract **c)
{
    fcntl(fd, F_SETFL, O_NONBLOCK);
    w->busy = 1;
    w->pid = pid;
    w->pipe_fd = fd;
    snprintf(w->job_id, sizeof w->job_id, "%s", j->job_id);
    w->retry = j->retry;
    w->started = mt_clock_wall_s();
    w->iteration = -1;
    w->npartial = 0;
    w->cancelled = 0;
    mt_contract_destroy(&w->contract);
    w->contract = *c;
    *c = NULL;
    send_ack(w, j->job_id, j->retry, 1, NULL);
    if (j->nodelist)
        logf_(w, "running %s (retry %d) on nodes %s", j->job_id, j->retry, j->nodelist);
    else
        logf_(w, "running %s (retry %d)", j->job_id, j->retry);
}

static void start_job(wk *w, const mt_proto_msg *msg)
{
    mt_proto_job j;
    mt_diag *d = mt_diag_new();
    mt_contract *c = NULL;
    mt_registry *reg = NULL;
    mt_kv *cfg = NULL;
    mt_strlist argv = {0};
    char why[512], fp[17], work[PATH_MAX] = "";
    const char **tv = NULL; /* a bisect job's prepare templates (borrowed from msg) */
    size_t n_tv = 0;
    int fds[2];
    pid_t pid;
    if (mt_proto_get_job(msg, &j) || job_known(w, &j)) {
        mt_diag_destroy(&d);
        return;
    }
    if (!(c = job_contract(w, &j, d, fp))) {
        mt_diag_destroy(&d);
        return;
    }
    reg = load_registry(w, c, d, why, sizeof why);
    if (!reg) {
        logf_(w, "refused job %s: %s", j.job_id, why);
        send_ack(w, j.job_id, j.retry, 0, why);
        goto out;
    }
    mt_config_normalize_space(reg, c, d);
    cfg = config_from_text(j.config);
    if (job_argv(w, reg, c, cfg, &argv, d)) {
        snprintf(why, sizeof why, "the job cannot be rendered: %s",
                 mt_diag_count(d) ? mt_diag_at(d, mt_diag_count(d) - 1)->message : "?");
        send_ack(w, j.job_id, j.retry, 0, why);
        goto out;
    }
    if (!argv_allowed(w, c, &argv, why, sizeof why)) {
        logf_(w, "refused job %s: %s", j.job_id, why);
        send_ack(w, j.job_id, j.retry, 0, why);
        goto out;
    }
    if (!strcmp(j.kind, "bisect") && bisect_prepare(w, &j, c, d, &tv, &n_tv, work, sizeof work))
        goto out;
    snprintf(w->store_dir, sizeof w->store_dir, "%s/stores/%s", w->o.dir, fp);
    if (job_finished_before(w, &j, c, d))
        goto out;
    if (pipe(fds)) {
        send_ack(w, j.job_id, j.retry, 0, "cannot create a pipe");
        goto out;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        run_job_child(w, &j, c, reg, cfg, tv, n_tv, work, sizeof work, fds, d);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        send_ack(w, j.job_id, j.retry, 0, "cannot fork the job");
        goto out;
    }
    job_running(w, &j, pid, fds[0], &c);
out:
    free(tv);
    mt_strlist_clear(&argv);
    mt_kv_destroy(&cfg);
    mt_registry_destroy(&reg);
    mt_contract_destroy(&c);
    mt_diag_destroy(&d);
}

static void read_pipe(wk *w)
{
    char buf[4096];
    ssize_t k;
    while (w->pipe_fd >= 0 && (k = read(w->pipe_fd, buf, sizeof buf)) > 0) {
        ssize_t i;
        for (i = 0; i < k; i++) {
            if (buf[i] == '\n') {
                w->partial[w->npartial] = '\0';
                if (w->nlines < LINES_MAX)
                    w->lines[w->nlines++] = strdup(w->partial);
                {
                    const char *p = strstr(w->partial, " iteration ");
                    if (p)
                        w->iteration = strtol(p + 11, NULL, 10);
                }
                w->npartial = 0;
            } else if (w->npartial < sizeof w->partial - 1) {
                w->partial[w->npartial++] = buf[i];
            }
        }
    }
    if (w->nlines >= LINES_MAX)
        flush_progress(w);
}

static void job_done(wk *w, int status)
{
    char why[128];
    read_pipe(w);
    flush_progress(w);
    close(w->pipe_fd);
    w->pipe_fd = -1;
    w->busy = 0;
    if (w->cancelled) {
        /* PROTOCOL.md, cancel: the run is stopped and the job forgotten */
        logf_(w, "stopped %s (cancelled)", w->job_id);
        w->cancelled = 0;
        w->job_id[0] = '\0';
        return;
    }
    snprintf(why, sizeof why, "the worker's job process ended with status %d and stored nothing",
             status);
    hold_result(w, w->job_id, w->retry,
                result_body(w, w->store_dir, w->contract, w->job_id, w->retry, why));
    logf_(w, "finished %s", w->job_id);
    w->job_id[0] = '\0';
}

static void cancel_job(wk *w, const char *job_id, int retry, const char *reason)
{
    int st;
    if (!w->busy || strcmp(w->job_id, job_id) || w->retry != retry)
        return;
    if (waitpid(w->pid, &st, WNOHANG) == w->pid) {
        /* the run had already finished (its SIGCHLD not read yet, e.g. a
         * worker stopped and continued): PROTOCOL.md, cancel: its result
         * is still sent, and the coordinator answers discarded */
        job_done(w, st);
        return;
    }
    logf_(w, "cancelling %s: %s", job_id, reason ? reason : "");
    /* the job process stops its run (the launcher's scancel first) */
    w->cancelled = 1;
    kill(w->pid, SIGTERM);
}

/* ---- benchmark only: --bench-echo ---------------------------------------------------------- */

/* Answers a job at once with a synthetic result and runs nothing (see
 * mt_worker_opts.bench_echo).  The result goes through hold_result, so it
 * is re-sent until acknowledged, as a real one is. */
static void echo_job(wk *w, const mt_proto_msg *msg)
{
    static const char memo[] = "{\"outcome\":\"ok\",\"evidence\":\"bench-echo: no program ran\","
                               "\"gpu_hours\":0,\"run_id\":-1,\"verdicts\":{}}";
    mt_proto_job j;
    mt_store_result r;
    mt_store_sample s[20];
    mt_store_loss loss[20];
    mt_store_gpu_mem g[8];
    char config_id[17] = "0000000000000000";
    const char *p;
    double t = mt_clock_wall_s();
    size_t i;
    if (mt_proto_get_job(msg, &j))
        return;
    send_ack(w, j.job_id, j.retry, 1, NULL);
    /* job/KIND/CONFIG_ID/REP: the config id is the third part */
    if (!strncmp(j.job_id, "job/", 4) && (p = strchr(j.job_id + 4, '/')) && strlen(p + 1) > 16 &&
        p[17] == '/')
        memcpy(config_id, p + 1, 16);
    memset(&r, 0, sizeof r);
    memset(s, 0, sizeof s);
    memset(g, 0, sizeof g);
    r.run.config_id = config_id;
    r.run.config_canonical = j.config;
    r.run.kind = j.kind;
    r.run.replicate = j.replicate;
    r.run.retry = j.retry;
    r.run.outcome = "ok";
    r.run.evidence = "bench-echo";
    r.run.worker = w->name;
    r.run.fingerprint = "{\"hosts\":[]}";
    r.run.started = r.run.ended = t;
    r.run.wall_s = r.run.sim_s = r.run.gpu_hours = 0;
    r.run.log_path = NULL;
    for (i = 0; i < 20; i++) {
        loss[i].key = "lm loss";
        loss[i].value = 5.0 - 0.01 * (double)i;
        s[i].iteration = (long)i + 1;
        s[i].elapsed_ms = 1000.0 + (double)i;
        s[i].tflops = 400.0;
        s[i].grad_norm = 1.0;
        s[i].losses = &loss[i];
        s[i].n_losses = 1;
    }
    for (i = 0; i < 8; i++) {
        g[i].rank = (int)i;
        g[i].host = w->host;
        g[i].gpu = (int)i;
        g[i].peak_bytes = 60000000000LL;
        g[i].alloc_bytes = -1;
        g[i].source = "sim";
    }
    r.samples = s, r.n_samples = 20, r.gpus = g, r.n_gpus = 8;
    hold_result(w, j.job_id, j.retry, mt_proto_result_body(j.job_id, j.retry, memo, &r));
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void handle(wk *w, mt_proto_msg *m)
{
    mt_proto_jobref ref;
    size_t i;
    w->last_heard = mt_clock_wall_s();
    if (w->lost) {
        w->lost = 0;
        logf_(w, "the coordinator is back: re-announcing");
        send_ready(w);
        resend_results(w, 1);
    }
    switch (m->command) {
    case MT_PROTO_JOB:
        if (w->o.bench_echo)
            echo_job(w, m);
        else
            start_job(w, m);
        break;
    case MT_PROTO_RESULT_ACK:
        if (mt_proto_jobref_of(m, &ref) == 0)
            for (i = 0; i < w->npend; i++)
                if (!strcmp(w->pend[i].job_id, ref.job_id) && w->pend[i].retry == ref.retry) {
                    cJSON_Delete(w->pend[i].body);
                    memmove(w->pend + i, w->pend + i + 1, (w->npend - i - 1) * sizeof *w->pend);
                    w->npend--;
                    break;
                }
        break;
    case MT_PROTO_HEARTBEAT: {
        mt_proto_heartbeat h;
        /* a coordinator asks once per message it gets from a worker it
         * does not know: answered once per heartbeat interval, so a burst
         * of them does not send every held result again each time */
        if (mt_proto_get_heartbeat(m, &h) == 0 && h.reannounce &&
            mt_clock_wall_s() - w->last_ready >= MT_PROTO_HEARTBEAT_MS / 1000.0) {
            send_ready(w);
            resend_results(w, 1);
        }
        break;
    }
    case MT_PROTO_CANCEL: {
        mt_proto_cancel c;
        if (mt_proto_get_cancel(m, &c) == 0)
            cancel_job(w, c.job_id, c.retry, c.reason);
        break;
    }
    case MT_PROTO_DISCONNECT: {
        mt_proto_disconnect dc;
        if (mt_proto_get_disconnect(m, &dc) == 0)
            logf_(w, "the coordinator disconnects: %s", dc.reason);
        w->stop = 1;
        break;
    }
    default:
        logf_(w, "ignored %s from the coordinator", mt_proto_cmd_name(m->command));
    }
}

/* CURVE for the worker's socket when o asks for it; -1 (said on stderr)
 * when its keys are incomplete or do not load. */
static int curve_setup(wk *w, const mt_worker_opts *o)
{
    char err[512];
    mt_keypair kp;
    char pub[MT_KEY_Z85_LEN + 1];
    if (!o->key_dir && !o->server_key)
        return 0;
    if (!o->key_dir || !o->key_name || !o->server_key) {
        fprintf(stderr, "moetune worker: CURVE needs --key DIR/NAME and --server-key FILE\n");
        return -1;
    }
    if (mt_keys_load(o->key_dir, o->key_name, &kp, err, sizeof err) ||
        mt_keys_load_public(o->server_key, pub, err, sizeof err) ||
        mt_curve_client(w->sock, &kp, pub, err, sizeof err)) {
        fprintf(stderr, "moetune worker: %s\n", err);
        mt_keypair_wipe(&kp);
        return -1;
    }
    mt_keypair_wipe(&kp);
    return 0;
}

/* Handles up to 64 queued messages from the coordinator, stopping early
 * when none is left or one stops the worker. */
static void drain_messages(wk *w)
{
    char err[512];
    int j;
    for (j = 0; j < 64; j++) { /* drain what is queued */
        mt_proto_msg m;
        int rr;
        mt_proto_msg_init(&m);
        rr = mt_proto_recv_queued(w->sock, 0, &m, err, sizeof err);
        if (rr == -EAGAIN) {
            mt_proto_msg_clear(&m);
            break;
        }
        if (rr)
            logf_(w, "dropped a message: %s", err);
        else
            handle(w, &m);
        mt_proto_msg_clear(&m);
        if (w->stop)
            break;
    }
}

/* The signals on the worker's signalfd: a child's exit finishes its job,
 * SIGTERM or SIGINT stops the worker. */
static void read_signals(wk *w)
{
    struct signalfd_siginfo si;
    while (read(w->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
            int st;
            pid_t p;
            while ((p = waitpid(-1, &st, WNOHANG)) > 0)
                if (w->busy && p == w->pid)
                    job_done(w, st);
        } else {
            logf_(w, "signal %u: stopping", si.ssi_signo);
            w->stop = 1;
        }
    }
}

/* Heartbeats, progress and unacknowledged results every hb seconds, and
 * the coordinator's loss noticed.  1 when the worker should exit: lost and
 * idle past o->exit_when_idle_s. */
static int keep_alive(wk *w, const mt_worker_opts *o, double hb)
{
    double t = mt_clock_wall_s();
    if (t - w->last_hb >= hb)
        send_heartbeat(w);
    if (w->busy && t - w->last_progress >= hb)
        flush_progress(w);
    if (w->npend && !w->lost) /* while lost they wait: all go on re-contact */
        resend_results(w, 0);
    if (!w->lost && t - w->last_heard > MT_PROTO_LIVENESS * hb) {
        w->lost = 1;
        if (w->refused[0])
            logf_(w, "the coordinator is not talking to this worker: %s; %s, retrying", w->refused,
                  w->busy ? "the job keeps running" : "waiting");
        else
            logf_(w, "the coordinator is unreachable; %s, reconnecting",
                  w->busy ? "the job keeps running" : "waiting");
    }
    return o->exit_when_idle_s > 0 && w->lost && !w->busy && !w->npend &&
           t - w->last_heard > o->exit_when_idle_s;
}

/* Polls the socket, the signals, the job's pipe and the monitor until the
 * worker stops. */
static void serve(wk *w, const mt_worker_opts *o, double hb)
{
    while (!w->stop) {
        zmq_pollitem_t items[4];
        int n = 0, k, ip = -1;
        items[n].socket = w->sock, items[n].fd = 0, items[n].events = ZMQ_POLLIN, n++;
        items[n].socket = NULL, items[n].fd = w->sfd, items[n].events = ZMQ_POLLIN, n++;
        if (w->pipe_fd >= 0)
            ip = n, items[n].socket = NULL, items[n].fd = w->pipe_fd, items[n].events = ZMQ_POLLIN,
            n++;
        if (w->mon)
            items[n].socket = w->mon, items[n].fd = 0, items[n].events = ZMQ_POLLIN, n++;
        k = zmq_poll(items, n, 200);
        if (w->mon)
            monitor_read(w);
        if (k < 0 && zmq_errno() != EINTR)
            break;
        if (k > 0 && (items[0].revents & ZMQ_POLLIN))
            drain_messages(w);
        if (k > 0 && (items[1].revents & ZMQ_POLLIN))
            read_signals(w);
        if (ip >= 0 && k > 0 && (items[ip].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
            read_pipe(w);
        if (keep_alive(w, o, hb))
            break;
    }
}

/* Frees what the worker holds and closes its sockets and signalfd. */
static void worker_close(wk *w)
{
    {
        int linger = 200;
        size_t i;
        zmq_setsockopt(w->sock, ZMQ_LINGER, &linger, sizeof linger);
        for (i = 0; i < w->npend; i++)
            cJSON_Delete(w->pend[i].body);
        for (i = 0; i < w->nlines; i++)
            free(w->lines[i]);
    }
    mt_contract_destroy(&w->contract);
    if (w->mon) {
        int zero = 0;
        zmq_socket_monitor(w->sock, NULL, 0);
        zmq_setsockopt(w->mon, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(w->mon);
    }
    zmq_close(w->sock);
    zmq_ctx_term(w->ctx);
    close(w->sfd);
}

int mt_worker_main(const mt_worker_opts *o)
{
    wk w;
    sigset_t mask;
    char err[512];
    double hb;
    int rc = 1;
    memset(&w, 0, sizeof w);
    w.o = *o;
    w.pipe_fd = -1;
    hb = o->heartbeat_s > 0 ? o->heartbeat_s : MT_PROTO_HEARTBEAT_MS / 1000.0;
    mt_worker_scan_interpreters(); /* before any job: what a shell is, by identity */
    gethostname(w.host, sizeof w.host - 1);
    if (o->name)
        snprintf(w.name, sizeof w.name, "%s", o->name);
    else
        snprintf(w.name, sizeof w.name, "%s-%d", w.host, (int)getpid());
    mkdir(o->dir, 0755);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    if ((w.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "moetune worker: signalfd: %s\n", strerror(errno));
        return 1;
    }
    w.ctx = zmq_ctx_new();
    w.sock = zmq_socket(w.ctx, ZMQ_DEALER);
    if (mt_proto_socket_setup(w.sock, 0, w.name, err, sizeof err)) {
        fprintf(stderr, "moetune worker: %s\n", err);
        goto out;
    }
    if (curve_setup(&w, o))
        goto out;
    monitor_start(&w);
    if (zmq_connect(w.sock, o->connect)) {
        fprintf(stderr, "moetune worker: cannot connect to %s: %s\n", o->connect,
                zmq_strerror(zmq_errno()));
        goto out;
    }
    logf_(&w, "connecting to %s", o->connect);
    w.last_heard = mt_clock_wall_s();
    send_ready(&w);
    send_heartbeat(&w);
    serve(&w, o, hb);
    if (w.busy) {
        kill(w.pid, SIGTERM);
        waitpid(w.pid, NULL, 0);
    }
    send_msg(&w, MT_PROTO_DISCONNECT, mt_proto_disconnect_body("worker stopping"));
    rc = 0;
out:
    worker_close(&w);
    return rc;
}
