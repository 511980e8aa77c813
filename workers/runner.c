/*
 * runner.c - one run: a shepherd (child subreaper) per job, output streamed
 * to logs and a line callback, limits enforced, every descendant reaped.
 *
 * Processes:
 *   moetune --fork--> shepherd (subreaper) --fork+exec--> job (own process group)
 * moetune and the shepherd talk over a SOCK_SEQPACKET pair: moetune sends
 * 'T' (stop); the shepherd sends fixed-size messages (started, exec failed,
 * main process exited, done).  Either side sees the other's death as EOF.
 * The job's stdout and stderr are pipes read by moetune directly.
 *
 * Between fork and _exit the shepherd calls only async-signal-safe
 * functions: moetune may have threads, and a lock held by one of them at
 * fork time would never be released in the child.
 *
 * Stopping signals the job's process group and, separately, every
 * descendant found by walking /proc.  Either alone misses something: the
 * walk misses a process forked between its scan and the signal, one whose
 * /proc entry it cannot read, or a pid past its limit; the group misses a
 * descendant that left it (setsid).  The test hook MOETUNE_RUNNER_FAULT=
 * no_proc_walk (read in mt_runner_start, so a run started without it is
 * unaffected; any other value is ignored) makes the walk find nothing, so
 * that tests/test_runner.c can show the group signal alone still reaches a
 * grandchild in the job's group.  Never set it outside tests.
 */
#include "runner.h"

#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- outcomes ----------------------------------------------------------------- */

static const char *const outcome_names[MT_OUTCOME_COUNT] = {
    "ok", "oom", "nan", "hang", "timeout", "crash", "infra", "launch_error", "skipped"};

const char *mt_outcome_name(int outcome)
{
    return outcome >= 0 && outcome < MT_OUTCOME_COUNT ? outcome_names[outcome] : NULL;
}

int mt_outcome_parse(const char *name)
{
    int i;
    for (i = 0; name && i < MT_OUTCOME_COUNT; i++)
        if (!strcmp(name, outcome_names[i]))
            return i;
    return -1;
}

/* ---- the shepherd's protocol ---------------------------------------------------- */

enum { MSG_STARTED = 1, MSG_EXEC_FAILED, MSG_EXITED, MSG_DONE };
enum { STAGE_EXEC = 1, STAGE_CHDIR, STAGE_FORK };

typedef struct shep_msg {
    int32_t kind;
    int32_t a, b;
} shep_msg;

/* Everything the shepherd needs, prepared before fork (it cannot allocate). */
typedef struct shep_args {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int sock, out_w, err_w;
    int hold_fd; /* kept open by the shepherd alone; -1: none */
    long grace_ms;
    int no_walk; /* MOETUNE_RUNNER_FAULT=no_proc_walk (tests only) */
} shep_args;

#define PID_LIMIT (1 << 22) /* PID_MAX_LIMIT on 64-bit Linux */

typedef struct pid_pair {
    int32_t pid, ppid;
} pid_pair;

/* The shepherd's memory for walking /proc, mapped once (no malloc). */
typedef struct walk {
    unsigned char *mark; /* PID_LIMIT bits: descendant or self */
    pid_pair *pairs;
    size_t cap;
    int blind; /* the test hook: the walk finds no descendant */
} walk;

static void send_msg(int sock, int kind, int a, int b)
{
    shep_msg m;
    m.kind = kind;
    m.a = a;
    m.b = b;
    while (send(sock, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

/* Parses a decimal pid; -1 when s is not one. */
static long parse_pid(const char *s, const char *end)
{
    long v = 0;
    if (s >= end)
        return -1;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9' || v > PID_LIMIT)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* Parent pid from /proc/<pid>/stat: "pid (comm) S ppid ...".  The command
 * name may hold spaces and parentheses; nothing after it does, so the last
 * ')' in the first 256 bytes closes it. */
static long read_ppid(const char *name)
{
    char path[64], buf[256], *close_paren = NULL, *p, *q;
    size_t nl = strlen(name);
    ssize_t n;
    int fd, i;
    if (nl > 20)
        return -1;
    memcpy(path, "/proc/", 6);
    memcpy(path + 6, name, nl);
    memcpy(path + 6 + nl, "/stat", 6);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    for (i = 0; i < n; i++)
        if (buf[i] == ')')
            close_paren = buf + i;
    if (!close_paren || close_paren + 4 >= buf + n)
        return -1;
    p = close_paren + 4; /* ") S " */
    for (q = p; q < buf + n && *q >= '0' && *q <= '9'; q++)
        ;
    return parse_pid(p, q);
}

static int walk_init(walk *w)
{
    w->mark = mmap(NULL, PID_LIMIT / 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    w->cap = 1 << 16;
    w->pairs = mmap(NULL, w->cap * sizeof(pid_pair), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->mark == MAP_FAILED || w->pairs == MAP_FAILED)
        return -1;
    return 0;
}

#define MARKED(w, p) ((w)->mark[(p) >> 3] & (1u << ((p)&7)))
#define MARK(w, p) ((w)->mark[(p) >> 3] |= (unsigned char)(1u << ((p)&7)))

/* Sends sig to every descendant of this process (found from /proc: parent
 * links, followed transitively).  Returns how many there were. */
static int signal_descendants(walk *w, pid_t self, int sig)
{
    union {
        struct dirent64 d;
        char raw[8192];
    } buf;
    size_t n = 0, i;
    int fd, count = 0, changed;
    ssize_t got;
    if (w->blind)
        return 0;
    fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    while ((got = getdents64(fd, buf.raw, sizeof buf.raw)) > 0) {
        ssize_t off = 0;
        while (off < got) {
            struct dirent64 *d = (struct dirent64 *)(buf.raw + off);
            long pid = parse_pid(d->d_name, d->d_name + strlen(d->d_name)), ppid;
            off += d->d_reclen;
            if (pid <= 0 || pid >= PID_LIMIT || (ppid = read_ppid(d->d_name)) < 0 ||
                ppid >= PID_LIMIT)
                continue;
            if (n == w->cap) {
                void *more = mremap(w->pairs, w->cap * sizeof(pid_pair),
                                    2 * w->cap * sizeof(pid_pair), MREMAP_MAYMOVE);
                if (more == MAP_FAILED)
                    break;
                w->pairs = more;
                w->cap *= 2;
            }
            w->pairs[n].pid = (int32_t)pid;
            w->pairs[n].ppid = (int32_t)ppid;
            n++;
        }
    }
    close(fd);
    memset(w->mark, 0, PID_LIMIT / 8);
    MARK(w, self);
    do {
        changed = 0;
        for (i = 0; i < n; i++)
            if (MARKED(w, w->pairs[i].ppid) && !MARKED(w, w->pairs[i].pid)) {
                MARK(w, w->pairs[i].pid);
                changed = 1;
            }
    } while (changed);
    for (i = 0; i < n; i++)
        if (w->pairs[i].pid != self && MARKED(w, w->pairs[i].pid)) {
            kill(w->pairs[i].pid, sig);
            if (sig == SIGTERM)
                kill(w->pairs[i].pid, SIGCONT); /* a stopped process would not see it */
            count++;
        }
    return count;
}

/* Signals the job's process group and every descendant. */
static int signal_tree(walk *w, pid_t self, pid_t job, int sig)
{
    kill(-job, sig);
    if (sig == SIGTERM)
        kill(-job, SIGCONT);
    return signal_descendants(w, self, sig);
}

/* Moves fd to 3 or above (a caller with stdin closed gets fd 0 from pipe()). */
static int high_fd(int fd)
{
    int h;
    if (fd < 0 || fd > 2)
        return fd;
    h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return h;
}

/* Closes every descriptor from 3 up except the n in keep. */
static void close_except(int *keep, int n)
{
    int i, j, lo = 3;
    for (i = 1; i < n; i++) /* sort the few kept descriptors */
        for (j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    for (i = 0; i < n; i++) {
        if (keep[i] > lo)
            close_range((unsigned)lo, (unsigned)keep[i] - 1, 0);
        if (keep[i] >= lo)
            lo = keep[i] + 1;
    }
    close_range((unsigned)lo, ~0u, 0);
}

static void exec_report(int fd, int stage, int err)
{
    int32_t m[2];
    m[0] = stage;
    m[1] = err;
    while (write(fd, m, sizeof m) < 0 && errno == EINTR)
        ;
    _exit(127);
}

/* The job: its own process group, default signals, output to the pipes,
 * nothing else inherited. */
static void job_child(const shep_args *a, pid_t shepherd, int exec_w)
{
    struct sigaction dfl;
    sigset_t none;
    int s, devnull;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* should the shepherd itself be killed */
    if (getppid() != shepherd)
        _exit(127);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(a->out_w, 1) < 0 || dup2(a->err_w, 2) < 0)
        exec_report(exec_w, STAGE_EXEC, errno);
    if (exec_w != 3) {
        if (dup3(exec_w, 3, O_CLOEXEC) < 0)
            _exit(127);
        exec_w = 3;
    }
    close_range(4, ~0u, 0);
    if (a->cwd && chdir(a->cwd) != 0)
        exec_report(exec_w, STAGE_CHDIR, errno);
    execve(a->path, a->argv, a->envp);
    exec_report(exec_w, STAGE_EXEC, errno);
}

/* What the shepherd knows of the job it watches. */
typedef struct shep {
    const shep_args *a;
    walk w;
    pid_t self, job;
    int sfd, job_alive, stopping, killing, leftovers, parent_gone;
    double deadline;
} shep;

/* The shepherd's own signals: the terminal's are moetune's, SIGCHLD and
 * SIGTERM come through the returned signalfd (-1 when it failed). */
static int shepherd_signals(void)
{
    struct sigaction ign;
    sigset_t mask;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    /* moetune decides when the job stops: a terminal's ^C or hangup reaches
     * moetune, which tells the shepherd */
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGQUIT, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    sigaction(SIGTTOU, &ign, NULL);
    ign.sa_handler = SIG_DFL; /* an inherited SIG_IGN would auto-reap and hide exit statuses */
    sigaction(SIGCHLD, &ign, NULL);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Forks the job into its own process group and tells moetune whether its
 * exec worked; the job's pid into h->job.  Exits when it cannot fork. */
static void shepherd_fork(shep *h)
{
    const shep_args *a = h->a;
    int exec_pipe[2];
    int32_t rep[2];
    ssize_t n;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 || h->sfd < 0 || walk_init(&h->w) != 0 ||
        pipe2(exec_pipe, O_CLOEXEC) != 0) {
        send_msg(a->sock, MSG_EXEC_FAILED, STAGE_FORK, errno);
        send_msg(a->sock, MSG_DONE, 0, 0);
        _exit(1);
    }
    exec_pipe[0] = high_fd(exec_pipe[0]);
    exec_pipe[1] = high_fd(exec_pipe[1]);
    h->job = fork();
    if (h->job == 0)
        job_child(a, h->self, exec_pipe[1]);
    if (h->job < 0) {
        send_msg(a->sock, MSG_EXEC_FAILED, STAGE_FORK, errno);
        send_msg(a->sock, MSG_DONE, 0, 0);
        _exit(1);
    }
    setpgid(h->job, h->job); /* either side may win the race; both set the same */
    close(a->out_w);
    close(a->err_w);
    close(exec_pipe[1]);
    while ((n = read(exec_pipe[0], rep, sizeof rep)) < 0 && errno == EINTR)
        ;
    close(exec_pipe[0]);
    if (n == (ssize_t)sizeof rep)
        send_msg(a->sock, MSG_EXEC_FAILED, rep[0], rep[1]);
    else
        send_msg(a->sock, MSG_STARTED, h->job, 0);
}

/* Reaps whatever ended: the job (reported), or orphans reparented here.
 * 1 when no child, hence no descendant, is left. */
static int shepherd_reap(shep *h)
{
    int st;
    pid_t p;
    for (;;) {
        p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            if (p == h->job) {
                h->job_alive = 0;
                send_msg(h->a->sock, MSG_EXITED, st, 0);
            }
            continue;
        }
        if (p < 0 && errno == EINTR)
            continue;
        break;
    }
    return p < 0 && errno == ECHILD;
}

/* Starts stopping the job's tree (SIGTERM, then SIGKILL past the grace);
 * what signal_tree returns. */
static int shepherd_stop(shep *h)
{
    int r;
    h->stopping = 1;
    r = signal_tree(&h->w, h->self, h->job, SIGTERM);
    h->deadline = mt_clock_mono_s() + (double)h->a->grace_ms / 1000.0;
    return r;
}

/* moetune's byte on the socket: 'T' stops the job, and so does moetune
 * gone (nobody will stop the job but us). */
static void shepherd_read_parent(shep *h)
{
    char c = 0;
    int stop = 0;
    ssize_t n = recv(h->a->sock, &c, 1, MSG_DONTWAIT);
    if (n == 1 && c == 'T')
        stop = 1;
    else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        h->parent_gone = stop = 1; /* moetune died: nobody will stop the job but us */
    if (stop && !h->stopping)
        shepherd_stop(h);
}

static __attribute__((noreturn)) void shepherd_main(const shep_args *a)
{
    struct pollfd pf[2];
    int keep[4];
    shep h;

    memset(&h, 0, sizeof h);
    h.a = a;
    h.job_alive = 1;
    h.self = getpid();
    keep[0] = a->sock, keep[1] = a->out_w, keep[2] = a->err_w, keep[3] = a->hold_fd;
    close_except(keep, a->hold_fd > 2 ? 4 : 3);
    h.sfd = shepherd_signals();
    h.w.blind = a->no_walk;
    shepherd_fork(&h);

    for (;;) {
        int timeout = -1;
        if (shepherd_reap(&h))
            break;
        /* the main process is gone but something it started lives on */
        if (!h.job_alive && !h.stopping)
            h.leftovers = shepherd_stop(&h);
        if (h.stopping && !h.killing && mt_clock_mono_s() >= h.deadline)
            h.killing = 1;
        if (h.killing) {
            signal_tree(&h.w, h.self, h.job, SIGKILL);
            timeout = 20;
        } else if (h.stopping) {
            timeout = (int)((h.deadline - mt_clock_mono_s()) * 1000.0) + 1;
        }
        pf[0].fd = h.parent_gone ? -1 : a->sock;
        pf[0].events = POLLIN;
        pf[1].fd = h.sfd;
        pf[1].events = POLLIN;
        pf[0].revents = pf[1].revents = 0;
        if (poll(pf, 2, timeout) < 0 && errno != EINTR) {
            struct timespec pause_ts = {0, 20 * 1000000L}; /* do not spin on a failing poll */
            nanosleep(&pause_ts, NULL);
            continue;
        }
        if (!h.parent_gone && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            shepherd_read_parent(&h);
        if (pf[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(h.sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM && !h.stopping)
                    shepherd_stop(&h);
        }
    }
    send_msg(a->sock, MSG_DONE, h.leftovers, 0);
    _exit(0);
}

/* ---- moetune's side --------------------------------------------------------------- */

typedef struct line_buf {
    char *buf;
    size_t len, cap;
    int cut; /* the current line passed MT_RUNNER_LINE_MAX */
} line_buf;

struct mt_run {
    mt_line_fn on_line;
    void *line_ctx;
    mt_stop_fn on_stop;
    void *stop_ctx;
    volatile sig_atomic_t *cancel;
    double time_limit_s, step_s, hang_factor, startup_s, grace_s;
    char *path, *cwd;
    char **argv, **envp;
    char *log_path[3];
    int log_fd[3];
    int fd[3]; /* read ends of the job's stdout [1] and stderr [2] */
    int sock;
    pid_t shepherd, job;
    line_buf lb[3];
    char *chunk;
    double t_start, t_exit, t_last_progress, t_stop;
    int started, exited, done, waited, stop_pending, stopping, callbacks;
    int stop_outcome;
    char *stop_evidence;
    char *evidence;
    char *stop_note; /* why the stop hook failed */
    int infra;       /* the shepherd could not start the job */
    int log_errno;
    mt_run_result r;
};

#define CHUNK (1 << 16)

static char *dupstr(const char *s)
{
    size_t n;
    char *d;
    if (!s)
        return NULL;
    n = strlen(s) + 1;
    d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    char *s = NULL;
    int n;
    va_start(ap, f);
    n = vasprintf(&s, f, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

static void free_vec(char **v)
{
    size_t i;
    for (i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* mkdir -p; 0 or -errno. */
static int make_dirs(const char *dir)
{
    char *p = dupstr(dir), *s;
    int rc = 0;
    if (!p)
        return -ENOMEM;
    for (s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                rc = -errno;
                break;
            }
            *s = '/';
        }
    if (rc == 0 && mkdir(p, 0755) != 0 && errno != EEXIST)
        rc = -errno;
    free(p);
    return rc;
}

/* A usable executable at path: 0, or the errno execve would give. */
static int check_exec(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    if (S_ISDIR(st.st_mode))
        return EACCES;
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0)
        return EACCES;
    return 0;
}

/* p made absolute against this process's working directory (the job may
 * run in another one).  Caller frees; NULL on OOM. */
static char *absolute(const char *p)
{
    char *cwd, *r;
    if (p[0] == '/')
        return dupstr(p);
    cwd = getcwd(NULL, 0);
    r = cwd ? fmt("%s/%s", cwd, p) : NULL;
    free(cwd);
    return r;
}

/* Resolves argv0 the way execvp would, with the job's PATH; relative paths
 * against the caller's working directory.  Caller frees *out.  0 or an
 * errno (ENOENT, EACCES, ENOMEM). */
static int resolve(const char *argv0, const mt_kv *env, char **out)
{
    const char *path = env ? mt_kv_get(env, "PATH") : NULL, *p, *colon;
    int denied = 0, e;
    *out = NULL;
    if (!*argv0)
        return ENOENT;
    if (strchr(argv0, '/')) {
        e = check_exec(argv0);
        if (e == 0 && !(*out = absolute(argv0)))
            return ENOMEM;
        return e;
    }
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (p = path;; p = colon + 1) {
        size_t dl;
        char *cand;
        colon = strchr(p, ':');
        dl = colon ? (size_t)(colon - p) : strlen(p);
        cand = dl ? fmt("%.*s/%s", (int)dl, p, argv0) : fmt("./%s", argv0);
        if (!cand)
            return ENOMEM;
        e = check_exec(cand);
        if (e == 0) {
            *out = absolute(cand);
            free(cand);
            return *out ? 0 : ENOMEM;
        }
        denied |= e == EACCES;
        free(cand);
        if (!colon)
            break;
    }
    return denied ? EACCES : ENOENT;
}

static char **env_vector(const mt_kv *env)
{
    size_t n = env ? mt_kv_count(env) : 0, i;
    char **v = calloc(n + 1, sizeof *v);
    const char *k, *val;
    if (!v)
        return NULL;
    for (i = 0; i < n; i++) {
        mt_kv_entry(env, i, &k, &val);
        if (!(v[i] = fmt("%s=%s", k, val))) {
            free_vec(v);
            return NULL;
        }
    }
    return v;
}

static void set_evidence(mt_run *run, char *text)
{
    free(run->evidence);
    run->evidence = text;
}

/* Everything the parent needs before fork.  0, or negative with d filled. */
static int prepare(mt_run *run, const mt_run_spec *spec, mt_diag *d)
{
    size_t n, i;
    int s;
    for (n = 0; spec->argv[n]; n++)
        ;
    run->argv = calloc(n + 1, sizeof *run->argv);
    run->envp = env_vector(spec->env);
    if (!run->argv || !run->envp)
        goto oom;
    for (i = 0; i < n; i++)
        if (!(run->argv[i] = dupstr(spec->argv[i])))
            goto oom;
    if (spec->cwd && !(run->cwd = dupstr(spec->cwd)))
        goto oom;
    if (spec->run_dir) {
        int rc = make_dirs(spec->run_dir);
        if (rc != 0) {
            mt_diag_add(d, spec->run_dir, 0, NULL, "cannot create the run directory: %s",
                        strerror(-rc));
            return -1;
        }
        for (s = 1; s <= 2; s++) {
            run->log_path[s] =
                fmt("%s/%s", spec->run_dir, s == MT_STREAM_STDOUT ? "stdout.log" : "stderr.log");
            if (!run->log_path[s])
                goto oom;
            run->log_fd[s] = open(run->log_path[s], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (run->log_fd[s] < 0) {
                mt_diag_add(d, run->log_path[s], 0, NULL, "cannot create the log: %s",
                            strerror(errno));
                return -1;
            }
        }
    }
    return 0;
oom:
    mt_diag_add(d, NULL, 0, NULL, "runner: out of memory");
    return -1;
}

static void launch_error(mt_run *run, int err, char *evidence)
{
    run->r.launch_errno = err;
    set_evidence(run, evidence);
}

mt_run *mt_runner_start(const mt_run_spec *spec, mt_diag *d)
{
    mt_run *run;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, sp[2] = {-1, -1}, e, s;
    const char *fault;
    shep_args a;
    if (!spec || !spec->argv || !spec->argv[0]) {
        mt_diag_add(d, NULL, 0, NULL, "runner: no program to run (empty argv)");
        return NULL;
    }
    run = calloc(1, sizeof *run);
    if (!run) {
        mt_diag_add(d, NULL, 0, NULL, "runner: out of memory");
        return NULL;
    }
    run->fd[0] = run->fd[1] = run->fd[2] = -1;
    run->log_fd[0] = run->log_fd[1] = run->log_fd[2] = -1;
    run->sock = -1;
    run->on_line = spec->on_line;
    run->line_ctx = spec->line_ctx;
    run->on_stop = spec->on_stop;
    run->stop_ctx = spec->stop_ctx;
    run->cancel = spec->cancel;
    run->time_limit_s = spec->time_limit_s > 0 ? spec->time_limit_s : 0;
    run->step_s = spec->step_s > 0 ? spec->step_s : 0;
    run->hang_factor = spec->hang_factor > 0 ? spec->hang_factor : 10;
    run->startup_s = spec->startup_s > 0 ? spec->startup_s : 0;
    run->grace_s = spec->grace_s > 0 ? spec->grace_s : 10;
    run->callbacks = 1;
    run->stop_outcome = -1;
    run->t_start = mt_clock_mono_s();
    if (prepare(run, spec, d) != 0) {
        mt_runner_destroy(&run);
        return NULL;
    }
    if (!(run->chunk = malloc(CHUNK + 1))) {
        mt_diag_add(d, NULL, 0, NULL, "runner: out of memory");
        mt_runner_destroy(&run);
        return NULL;
    }
    e = resolve(run->argv[0], spec->env, &run->path);
    if (e == ENOMEM) {
        mt_diag_add(d, NULL, 0, NULL, "runner: out of memory");
        mt_runner_destroy(&run);
        return NULL;
    }
    if (e != 0) {
        const char *path = spec->env ? mt_kv_get(spec->env, "PATH") : NULL;
        run->done = 1; /* nothing was started */
        if (e == ENOENT && !strchr(run->argv[0], '/'))
            launch_error(run, e,
                         fmt("cannot run '%s': not found in PATH (%s)", run->argv[0],
                             path ? path : "unset; searched /usr/local/bin:/usr/bin:/bin"));
        else
            launch_error(run, e, fmt("cannot run '%s': %s", run->argv[0], strerror(e)));
        return run;
    }
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) {
        mt_diag_add(d, NULL, 0, NULL, "runner: cannot create pipes: %s", strerror(errno));
        goto fail;
    }
    out[0] = high_fd(out[0]), out[1] = high_fd(out[1]);
    err[0] = high_fd(err[0]), err[1] = high_fd(err[1]);
    sp[0] = high_fd(sp[0]), sp[1] = high_fd(sp[1]);
    if (out[0] < 0 || out[1] < 0 || err[0] < 0 || err[1] < 0 || sp[0] < 0 || sp[1] < 0) {
        mt_diag_add(d, NULL, 0, NULL, "runner: cannot create pipes: %s", strerror(errno));
        goto fail;
    }
    /* fewer stalls of a chatty job while the callback works (best effort) */
    fcntl(out[1], F_SETPIPE_SZ, 1 << 20);
    fcntl(err[1], F_SETPIPE_SZ, 1 << 20);
    a.path = run->path;
    a.argv = run->argv;
    a.envp = run->envp;
    a.cwd = run->cwd;
    a.sock = sp[1];
    a.out_w = out[1];
    a.err_w = err[1];
    a.hold_fd = spec->hold_fd > 2 ? spec->hold_fd : -1;
    a.grace_ms = (long)(run->grace_s * 1000.0);
    fault = getenv("MOETUNE_RUNNER_FAULT"); /* before fork: getenv is not async-signal-safe */
    a.no_walk = fault && !strcmp(fault, "no_proc_walk");
    run->shepherd = fork();
    if (run->shepherd < 0) {
        mt_diag_add(d, NULL, 0, NULL, "runner: cannot fork: %s", strerror(errno));
        goto fail;
    }
    if (run->shepherd == 0)
        shepherd_main(&a);
    close(out[1]);
    close(err[1]);
    close(sp[1]);
    run->fd[MT_STREAM_STDOUT] = out[0];
    run->fd[MT_STREAM_STDERR] = err[0];
    run->sock = sp[0];
    for (s = 1; s <= 2; s++)
        fcntl(run->fd[s], F_SETFL, fcntl(run->fd[s], F_GETFL) | O_NONBLOCK);
    return run;
fail:
    for (s = 0; s < 2; s++) {
        if (out[s] >= 0)
            close(out[s]);
        if (err[s] >= 0)
            close(err[s]);
        if (sp[s] >= 0)
            close(sp[s]);
    }
    mt_runner_destroy(&run);
    return NULL;
}

void mt_runner_progress(mt_run *run)
{
    if (!run)
        return;
    run->t_last_progress = mt_clock_mono_s();
    run->r.progress++;
}

void mt_runner_set_hang(mt_run *run, double step_s, double hang_factor)
{
    if (!run)
        return;
    run->step_s = step_s > 0 ? step_s : 0;
    if (hang_factor > 0)
        run->hang_factor = hang_factor;
}

void mt_runner_stop(mt_run *run, int outcome, const char *evidence)
{
    if (!run || run->stop_pending || run->stopping || run->done || run->r.launch_errno)
        return;
    run->stop_pending = 1;
    run->stop_outcome = outcome;
    run->stop_evidence = evidence ? dupstr(evidence) : NULL;
}

pid_t mt_runner_pid(const mt_run *run)
{
    return run ? run->job : 0;
}

/* ---- output ------------------------------------------------------------------- */

static void emit(mt_run *run, int stream, char *line, size_t n)
{
    char saved = line[n];
    run->r.lines[stream]++;
    if (!run->on_line || !run->callbacks)
        return;
    line[n] = '\0';
    run->on_line(run->line_ctx, stream, line, n);
    line[n] = saved;
}

/* Appends to the partial line, up to the cap; the rest of an overlong line
 * is dropped. */
static int lb_append(mt_run *run, line_buf *lb, const char *p, size_t n)
{
    size_t room = MT_RUNNER_LINE_MAX - lb->len;
    if (n > room) {
        if (!lb->cut)
            run->r.truncated++;
        lb->cut = 1;
        n = room;
    }
    if (n == 0)
        return 0;
    if (lb->len + n + 1 > lb->cap) {
        size_t cap = lb->cap ? lb->cap : 256;
        char *b;
        while (cap < lb->len + n + 1)
            cap *= 2;
        if (cap > MT_RUNNER_LINE_MAX + 1)
            cap = MT_RUNNER_LINE_MAX + 1;
        b = realloc(lb->buf, cap);
        if (!b)
            return -1;
        lb->buf = b;
        lb->cap = cap;
    }
    memcpy(lb->buf + lb->len, p, n);
    lb->len += n;
    return 0;
}

static void lb_flush(mt_run *run, int stream)
{
    line_buf *lb = &run->lb[stream];
    if (lb->buf && (lb->len || lb->cut))
        emit(run, stream, lb->buf, lb->len);
    lb->len = 0;
    lb->cut = 0;
}

static void write_log(mt_run *run, int stream, const char *p, size_t n)
{
    int fd = run->log_fd[stream];
    while (fd >= 0 && n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (!run->log_errno)
                run->log_errno = errno; /* disk full: the callback still sees every line */
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Splits a chunk into lines.  Whole lines in the chunk go to the callback
 * straight from it (the newline replaced by NUL for the call). */
static void feed(mt_run *run, int stream, char *p, size_t n)
{
    line_buf *lb = &run->lb[stream];
    char *end = p + n;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!nl) {
            if (lb_append(run, lb, p, seg) != 0)
                lb_flush(run, stream); /* no memory: deliver what we have */
            return;
        }
        if (lb->len == 0 && !lb->cut) {
            if (seg > MT_RUNNER_LINE_MAX) {
                run->r.truncated++;
                seg = MT_RUNNER_LINE_MAX;
            }
            emit(run, stream, p, seg);
        } else {
            if (lb_append(run, lb, p, seg) != 0)
                lb->cut = 1;
            lb_flush(run, stream);
        }
        p = nl + 1;
    }
}

/* Reads what is there (a bounded amount, so that one chatty stream does
 * not starve the other or the shepherd's messages); 1 at EOF. */
static int drain(mt_run *run, int stream)
{
    int rounds = 0;
    for (;;) {
        ssize_t n = read(run->fd[stream], run->chunk, CHUNK);
        if (n > 0) {
            write_log(run, stream, run->chunk, (size_t)n);
            feed(run, stream, run->chunk, (size_t)n);
            if (n < CHUNK || ++rounds == 16)
                return 0;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        lb_flush(run, stream);
        close(run->fd[stream]);
        run->fd[stream] = -1;
        return 1;
    }
}

/* ---- control ------------------------------------------------------------------ */

/* Starts stopping a live job; 1 when signals go out, 0 when it had ended. */
static int begin_stop(mt_run *run, mt_diag *hook_diag)
{
    char t = 'T';
    if (run->stopping)
        return 0;
    run->stopping = 1;
    run->t_stop = mt_clock_mono_s();
    if (run->exited || run->done)
        return 0;
    if (run->on_stop && hook_diag && run->on_stop(run->stop_ctx, hook_diag) != 0) {
        /* the local signals go on; the evidence says what the launcher
         * could not do (a Slurm step possibly left running) */
        size_t i;
        for (i = 0; i < mt_diag_count(hook_diag); i++) {
            char *more = fmt("%s%s%s", run->stop_note ? run->stop_note : "",
                             run->stop_note ? "; " : "", mt_diag_at(hook_diag, i)->message);
            if (more) {
                free(run->stop_note);
                run->stop_note = more;
            }
        }
        if (!run->stop_note)
            run->stop_note = dupstr("it failed");
    }
    if (run->sock >= 0)
        while (send(run->sock, &t, 1, MSG_NOSIGNAL) < 0 && errno == EINTR)
            ;
    return 1;
}

static void on_msg(mt_run *run, const shep_msg *m)
{
    switch (m->kind) {
    case MSG_STARTED:
        run->started = 1;
        run->job = m->a;
        break;
    case MSG_EXEC_FAILED:
        if (m->a == STAGE_CHDIR)
            launch_error(run, m->b,
                         fmt("cannot change to directory '%s': %s", run->cwd, strerror(m->b)));
        else if (m->a == STAGE_EXEC)
            launch_error(run, m->b, fmt("cannot run '%s': %s", run->argv[0], strerror(m->b)));
        else {
            run->infra = 1;
            set_evidence(run, fmt("the shepherd could not start the job: %s", strerror(m->b)));
        }
        break;
    case MSG_EXITED:
        run->exited = 1;
        run->t_exit = mt_clock_mono_s();
        if (WIFEXITED(m->a)) {
            run->r.exited = 1;
            run->r.exit_code = WEXITSTATUS(m->a);
        } else if (WIFSIGNALED(m->a)) {
            run->r.signaled = 1;
            run->r.signal = WTERMSIG(m->a);
        }
        break;
    case MSG_DONE:
        run->done = 1;
        run->r.leftovers = m->a;
        break;
    default:
        break;
    }
}

static void read_msgs(mt_run *run)
{
    for (;;) {
        shep_msg m;
        ssize_t n = recv(run->sock, &m, sizeof m, MSG_DONTWAIT);
        if (n == (ssize_t)sizeof m) {
            on_msg(run, &m);
            continue;
        }
        if (n < 0 && (errno == EINTR))
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        /* EOF without "done": the shepherd was killed */
        if (!run->done) {
            run->done = 1;
            if (!run->exited)
                set_evidence(run, fmt("the shepherd process died before the job ended"));
        }
        close(run->sock);
        run->sock = -1;
        return;
    }
}

static const char *sig_name(int s)
{
    const char *a = sigabbrev_np(s);
    return a ? a : "?";
}

/* Outcome and evidence from the process facts. */
static void conclude(mt_run *run)
{
    mt_run_result *r = &run->r;
    char *ev = NULL;
    if (r->launch_errno) {
        r->outcome = MT_OUTCOME_LAUNCH_ERROR;
        if (!run->evidence)
            set_evidence(run, fmt("cannot run '%s': %s", run->argv[0], strerror(r->launch_errno)));
        return;
    }
    if (run->infra) {
        r->outcome = MT_OUTCOME_INFRA;
        return;
    }
    if (run->stop_outcome >= 0) {
        r->outcome = run->stop_outcome;
        ev = dupstr(run->stop_evidence ? run->stop_evidence : "stopped by the caller");
    } else if (r->hung) {
        r->outcome = MT_OUTCOME_HANG;
        ev = r->progress
                 ? fmt("no new iteration for %.1f s (%g x the expected step of %g s) after %ld "
                       "iterations",
                       run->hang_factor * run->step_s, run->hang_factor, run->step_s, r->progress)
                 : fmt("no iteration within %.1f s of the start (start-up allowance %g s + %g x "
                       "the expected step of %g s)",
                       run->startup_s + run->hang_factor * run->step_s, run->startup_s,
                       run->hang_factor, run->step_s);
    } else if (r->timed_out) {
        r->outcome = MT_OUTCOME_TIMEOUT;
        ev = fmt("exceeded the time limit of %g s", run->time_limit_s);
    } else if (r->signaled) {
        r->outcome = MT_OUTCOME_CRASH;
        ev = fmt("killed by signal %d (SIG%s)", r->signal, sig_name(r->signal));
    } else if (r->exited && r->exit_code != 0) {
        r->outcome = MT_OUTCOME_CRASH;
        ev = fmt("exit status %d", r->exit_code);
    } else if (r->exited) {
        r->outcome = MT_OUTCOME_OK;
        ev = fmt("exit status 0");
    } else {
        r->outcome = MT_OUTCOME_INFRA;
        ev = dupstr(run->evidence ? run->evidence : "the job's end was never reported");
    }
    if (ev && r->leftovers) {
        char *more = fmt("%s; %d leftover process%s stopped after the main process exited", ev,
                         r->leftovers, r->leftovers == 1 ? "" : "es");
        if (more) {
            free(ev);
            ev = more;
        }
    }
    if (ev && r->unreaped) {
        char *more = fmt("%s; descendants survived SIGKILL", ev);
        if (more) {
            free(ev);
            ev = more;
        }
    }
    if (ev && run->stop_note) {
        char *more = fmt("%s; the launcher's stop: %s", ev, run->stop_note);
        if (more) {
            free(ev);
            ev = more;
        }
    }
    if (ev && run->log_errno) {
        char *more = fmt("%s; writing the log failed: %s", ev, strerror(run->log_errno));
        if (more) {
            free(ev);
            ev = more;
        }
    }
    if (ev)
        set_evidence(run, ev);
}

static int ms_until(double deadline, double now)
{
    double ms = (deadline - now) * 1000.0;
    if (ms <= 0)
        return 0;
    if (ms > 60000)
        return 60000;
    return (int)ms + 1;
}

int mt_runner_wait(mt_run *run, mt_run_result *res)
{
    double drain_until = 0;
    mt_diag *hook_diag = mt_diag_new();
    if (!run || run->waited) {
        mt_diag_destroy(&hook_diag);
        return -1;
    }
    run->waited = 1;
    while (run->sock >= 0 || run->fd[1] >= 0 || run->fd[2] >= 0) {
        struct pollfd pf[3];
        int np = 0, timeout = -1, i;
        double now = mt_clock_mono_s();
        if (run->cancel && *run->cancel)
            mt_runner_stop(run, MT_OUTCOME_INFRA, "cancelled");
        if (run->stop_pending && !run->stopping)
            run->r.stopped = begin_stop(run, hook_diag);
        /* limits apply while the main process lives */
        if (!run->done && !run->exited && !run->stopping) {
            double hang_at = 0;
            if (run->step_s > 0)
                hang_at = (run->t_last_progress > 0 ? run->t_last_progress
                                                    : run->t_start + run->startup_s) +
                          run->hang_factor * run->step_s;
            if (run->time_limit_s > 0 && now >= run->t_start + run->time_limit_s) {
                run->r.timed_out = 1;
                begin_stop(run, hook_diag);
            } else if (hang_at > 0 && now >= hang_at) {
                run->r.hung = 1;
                begin_stop(run, hook_diag);
            } else {
                if (run->time_limit_s > 0)
                    timeout = ms_until(run->t_start + run->time_limit_s, now);
                if (hang_at > 0 && (timeout < 0 || ms_until(hang_at, now) < timeout))
                    timeout = ms_until(hang_at, now);
            }
        }
        if (run->stopping && !run->done) {
            /* the shepherd should be done within the grace period; past it
             * and 30 s more, something is unkillable: report, do not block */
            double give_up = run->t_stop + run->grace_s + 30.0;
            if (now >= give_up) {
                run->r.unreaped = 1;
                break;
            }
            if (timeout < 0 || ms_until(give_up, now) < timeout)
                timeout = ms_until(give_up, now);
        }
        if (run->done && run->sock < 0) {
            /* every descendant is gone; a descriptor passed to some
             * unrelated process must not keep us here */
            if (drain_until == 0)
                drain_until = now + 1.0;
            if (now >= drain_until)
                break;
            timeout = ms_until(drain_until, now);
        }
        if (run->sock >= 0) {
            pf[np].fd = run->sock;
            pf[np++].events = POLLIN;
        }
        for (i = 1; i <= 2; i++)
            if (run->fd[i] >= 0) {
                pf[np].fd = run->fd[i];
                pf[np++].events = POLLIN;
            }
        /* a signal between the check above and poll would not wake it */
        if (run->cancel && !run->stopping && !run->done && (timeout < 0 || timeout > 200))
            timeout = 200;
        if (poll(pf, (nfds_t)np, timeout) < 0 && errno != EINTR) {
            struct timespec pause_ts = {0, 20 * 1000000L}; /* do not spin on a failing poll */
            nanosleep(&pause_ts, NULL);
            continue;
        }
        /* output first, so that lines printed before the exit are seen
         * before the exit is */
        for (i = 1; i <= 2; i++)
            if (run->fd[i] >= 0)
                drain(run, i);
        if (run->sock >= 0)
            read_msgs(run);
    }
    for (int i = 1; i <= 2; i++)
        if (run->fd[i] >= 0) {
            lb_flush(run, i);
            close(run->fd[i]);
            run->fd[i] = -1;
        }
    if (run->shepherd > 0 && !run->r.unreaped) {
        while (waitpid(run->shepherd, NULL, 0) < 0 && errno == EINTR)
            ;
        run->shepherd = 0;
    }
    run->r.wall_s = (run->exited ? run->t_exit : mt_clock_mono_s()) - run->t_start;
    if (run->r.launch_errno)
        run->r.wall_s = 0;
    conclude(run);
    mt_diag_destroy(&hook_diag);
    if (res) {
        *res = run->r;
        res->evidence = run->evidence ? run->evidence : "";
        res->stdout_log = run->log_path[MT_STREAM_STDOUT];
        res->stderr_log = run->log_path[MT_STREAM_STDERR];
    }
    return 0;
}

void mt_runner_destroy(mt_run **runp)
{
    mt_run *run;
    int i;
    if (!runp || !*runp)
        return;
    run = *runp;
    if (!run->waited && run->shepherd > 0) {
        run->callbacks = 0;
        mt_runner_stop(run, MT_OUTCOME_SKIPPED, "destroyed while running");
        mt_runner_wait(run, NULL);
    }
    if (run->shepherd > 0) /* unreaped: do not block; the shepherd keeps trying */
        waitpid(run->shepherd, NULL, WNOHANG);
    for (i = 0; i < 3; i++) {
        if (run->fd[i] >= 0)
            close(run->fd[i]);
        if (run->log_fd[i] >= 0)
            close(run->log_fd[i]);
        free(run->log_path[i]);
        free(run->lb[i].buf);
    }
    if (run->sock >= 0)
        close(run->sock);
    free(run->path);
    free(run->cwd);
    free_vec(run->argv);
    free_vec(run->envp);
    free(run->chunk);
    free(run->stop_evidence);
    free(run->stop_note);
    free(run->evidence);
    free(run);
    *runp = NULL;
}
