/*
 * callguard.c - see callguard.h.
 *
 * Everything the signal handler, the watchdog thread and the exit hook read
 * is prepared by mt_callguard_enter on the calling thread: three messages in
 * static buffers and a few atomics.  None of them takes a lock, so a fork or
 * a signal at any moment finds nothing half-held.
 */
#include "callguard.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MSG_MAX 1024

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS};
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])

static struct sigaction previous[N_FATAL];
static char alt_stack[64 * 1024];

/* the current call */
static atomic_int in_call;
static atomic_int call_pid;
static atomic_llong started_ns;
static atomic_ulong generation;
/* what the messages were built for */
static char cur_plugin[256], cur_path[512], cur_call[64];
static int built;

/* prebuilt messages: crash (the signal's name follows), time limit, exit */
static char msg_crash[MSG_MAX], msg_time[MSG_MAX], msg_exit[MSG_MAX];
static size_t len_crash, len_time, len_exit;

static double limit_s = -1; /* < 0: not read yet */
/* set up in this process (handlers, watchdog); a fork's child clears it, so
 * a plugin call there sets up its own watchdog */
static int installed;
static pid_t installed_pid;
static int once_added; /* atexit and atfork, once for good */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double mt_callguard_limit(void)
{
    if (limit_s < 0) {
        const char *e = getenv("MOETUNE_PLUGIN_TIMEOUT");
        char *end = NULL;
        double v = e && *e ? strtod(e, &end) : MT_CALLGUARD_DEFAULT_S;
        if (e && *e && (!end || *end || !isfinite(v) || v < 0)) {
            fprintf(stderr, "moetune: warning: MOETUNE_PLUGIN_TIMEOUT=%s is not a number of "
                            "seconds >= 0; using %g s\n",
                    e, MT_CALLGUARD_DEFAULT_S);
            v = MT_CALLGUARD_DEFAULT_S;
        }
        limit_s = v;
    }
    return limit_s;
}

int mt_callguard_set_limit(double seconds)
{
    if (!isfinite(seconds) || seconds < 0)
        return -1;
    limit_s = seconds;
    built = 0; /* the time-limit message quotes it */
    return 0;
}

static void put(const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

static const char *signal_text(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGABRT: return "SIGABRT (abort)";
    case SIGSYS: return "SIGSYS (bad system call)";
    default: return "a fatal signal";
    }
}

static void on_fatal(int sig)
{
    size_t i;
    if (atomic_load(&in_call) && atomic_load(&call_pid) == (int)getpid()) {
        const char *t = signal_text(sig);
        put(msg_crash, len_crash);
        put(t, strlen(t));
        put("; moetune stops\n", 16);
    }
    /* the handler that was there before (the default: die of the signal) */
    for (i = 0; i < N_FATAL; i++)
        if (fatal_signals[i] == sig)
            sigaction(sig, &previous[i], NULL);
    raise(sig);
}

static void on_exit_hook(void)
{
    if (atomic_load(&in_call) && atomic_load(&call_pid) == (int)getpid()) {
        fflush(stdout);
        put(msg_exit, len_exit);
        _exit(1);
    }
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        double lim = limit_s;
        long long step = (long long)(lim > 0 ? lim * 1e9 / 20 : 2.5e8);
        struct timespec ts;
        unsigned long g;
        if (step < 5000000LL)
            step = 5000000LL;
        if (step > 250000000LL)
            step = 250000000LL;
        ts.tv_sec = (time_t)(step / 1000000000LL);
        ts.tv_nsec = (long)(step % 1000000000LL);
        nanosleep(&ts, NULL);
        if (lim <= 0 || !atomic_load(&in_call))
            continue;
        g = atomic_load(&generation);
        if ((double)(now_ns() - atomic_load(&started_ns)) > lim * 1e9 && atomic_load(&in_call) &&
            atomic_load(&generation) == g) {
            /* no stdio here: the stuck call may hold its lock */
            put(msg_time, len_time);
            _exit(1);
        }
    }
    return NULL;
}

static void after_fork_child(void) { installed = 0; }

/* Once per process (again in a forked child, which has no watchdog). */
static void install(void)
{
    struct sigaction sa;
    stack_t ss;
    sigset_t all, old;
    pthread_t t;
    pthread_attr_t attr;
    size_t i;
    installed = 1;
    installed_pid = getpid();
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = alt_stack;
    ss.ss_size = sizeof alt_stack;
    sigaltstack(&ss, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < N_FATAL; i++) {
        struct sigaction cur;
        /* a second install (a forked child) keeps the first one's previous */
        if (sigaction(fatal_signals[i], NULL, &cur) == 0 && cur.sa_handler != on_fatal)
            previous[i] = cur;
        sigaction(fatal_signals[i], &sa, NULL);
    }
    if (!once_added) {
        atexit(on_exit_hook);
        pthread_atfork(NULL, NULL, after_fork_child);
        once_added = 1;
    }
    if (mt_callguard_limit() <= 0)
        return;
    /* the watchdog takes no signal: the host's own handling (signalfd,
     * SIGTERM handlers) stays with the threads that set it up */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&t, &attr, watchdog, NULL) != 0)
        fprintf(stderr, "moetune: warning: cannot start the plugin watchdog; plugin calls run "
                        "without a time limit\n");
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static size_t build(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t build(char *buf, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, MSG_MAX, fmt, ap);
    va_end(ap);
    if (n < 0)
        return 0;
    if ((size_t)n >= MSG_MAX) {
        buf[MSG_MAX - 2] = '\n';
        return MSG_MAX - 1;
    }
    return (size_t)n;
}

void mt_callguard_enter(const char *plugin, const char *path, const char *call)
{
    if (!installed)
        install();
    if (!path)
        path = "";
    if (!built || strcmp(plugin, cur_plugin) || strcmp(path, cur_path) || strcmp(call, cur_call)) {
        char who[600];
        if (*path && strcmp(path, plugin))
            snprintf(who, sizeof who, "%s (%s)", plugin, path);
        else
            snprintf(who, sizeof who, "%s", plugin);
        len_crash = build(msg_crash, "moetune: plugin %s crashed in %s: ", who, call);
        len_time = build(msg_time,
                         "moetune: plugin %s did not return from %s within %g s (the per-call "
                         "limit: --plugin-timeout S or MOETUNE_PLUGIN_TIMEOUT); moetune stops "
                         "(exit 1)\n",
                         who, call, mt_callguard_limit());
        len_exit = build(msg_exit,
                         "moetune: plugin %s called exit() inside %s; moetune stops (exit 1)\n",
                         who, call);
        snprintf(cur_plugin, sizeof cur_plugin, "%s", plugin);
        snprintf(cur_path, sizeof cur_path, "%s", path);
        snprintf(cur_call, sizeof cur_call, "%s", call);
        built = 1;
    }
    atomic_store(&started_ns, now_ns());
    atomic_fetch_add(&generation, 1);
    atomic_store(&call_pid, (int)installed_pid);
    atomic_store(&in_call, 1);
}

void mt_callguard_leave(void)
{
    atomic_store(&in_call, 0);
    atomic_fetch_add(&generation, 1);
}
