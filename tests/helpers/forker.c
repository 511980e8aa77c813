/*
 * forker.c - a misbehaving job for the runner's tests: exits with a code,
 * dies of a signal, sleeps, prints iteration lines then only chatter, and
 * leaves descendants behind that ignore SIGTERM (directly, or after setsid
 * so they are neither in its process group nor its session).
 *
 *   forker lines N CODE          N lines to stdout and stderr, exit CODE
 *   forker raise SIG             die of signal SIG
 *   forker sleep SECONDS [MARKER]  "ready", then sleeps
 *   forker chatter MS ITERS      ITERS "iteration" lines every MS, then
 *                                only "chatter" lines every MS, forever
 *   forker tree N MARKER         N children and N grandchildren, all (and
 *                                itself) ignoring SIGTERM; then waits forever
 *   forker setsid MARKER         a child calls setsid(), leaves a grandchild
 *                                ignoring SIGTERM, exits; then waits forever
 *   forker daemon MARKER         as setsid, but exits 0 0.3 s after "ready"
 *   forker longline BYTES        one line of BYTES 'x', then "after", then a
 *                                last line without a newline
 *
 * MARKER only sits in argv: forked children keep their parent's command
 * line, so a test finds every survivor in /proc/<pid>/cmdline.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ignore_term(void)
{
    signal(SIGTERM, SIG_IGN);
}

static void forever(void)
{
    for (;;)
        pause();
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A grandchild that outlives its parent, in a session of its own. */
static void setsid_grandchild(void)
{
    int p[2];
    char c;
    pid_t child;
    if (pipe(p) != 0)
        exit(3);
    child = fork();
    if (child == 0) {
        close(p[0]);
        if (setsid() < 0)
            _exit(4);
        if (fork() == 0) {
            ignore_term();
            if (write(p[1], "g", 1) != 1)
                _exit(5);
            close(p[1]);
            forever();
        }
        _exit(0); /* the grandchild is orphaned: reparented to the subreaper */
    }
    close(p[1]);
    if (read(p[0], &c, 1) != 1) /* the grandchild is set up */
        exit(6);
    close(p[0]);
    waitpid(child, NULL, 0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int i;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "lines") && argc > 3) {
        int n = atoi(argv[2]);
        for (i = 0; i < n; i++) {
            printf("out %d\n", i);
            fprintf(stderr, "err %d\n", i);
        }
        return atoi(argv[3]);
    }
    if (!strcmp(mode, "raise") && argc > 2) {
        int sig = atoi(argv[2]);
        signal(sig, SIG_DFL);
        raise(sig);
        return 99;
    }
    if (!strcmp(mode, "sleep") && argc > 2) {
        printf("ready\n");
        sleep_ms((long)(atof(argv[2]) * 1000));
        return 0;
    }
    if (!strcmp(mode, "chatter") && argc > 3) {
        long ms = atol(argv[2]);
        int iters = atoi(argv[3]);
        for (i = 1;; i++) {
            if (i <= iters)
                printf(" [2025-01-01 00:00:00] iteration %8d/%8d | elapsed time per iteration "
                       "(ms): %.1f |\n",
                       i, 1000, (double)ms);
            else
                printf("chatter %d: still waiting in all-to-all\n", i);
            sleep_ms(ms);
        }
    }
    if (!strcmp(mode, "tree") && argc > 3) {
        int n = atoi(argv[2]), p[2];
        char c;
        ignore_term();
        if (pipe(p) != 0)
            return 3;
        for (i = 0; i < n; i++)
            if (fork() == 0) {
                if (fork() == 0) { /* grandchild: SIG_IGN is inherited */
                    if (write(p[1], "g", 1) != 1)
                        _exit(5);
                    forever();
                }
                if (write(p[1], "c", 1) != 1)
                    _exit(5);
                forever();
            }
        for (i = 0; i < 2 * n; i++) /* every descendant is up */
            if (read(p[0], &c, 1) != 1)
                return 6;
        printf("ready\n");
        forever();
    }
    if ((!strcmp(mode, "setsid") || !strcmp(mode, "daemon")) && argc > 2) {
        setsid_grandchild();
        printf("ready\n");
        if (!strcmp(mode, "daemon")) {
            sleep_ms(300); /* long enough for the test to count both */
            return 0;
        }
        forever();
    }
    if (!strcmp(mode, "longline") && argc > 2) {
        long n = atol(argv[2]), k;
        for (k = 0; k < n; k++)
            putchar('x');
        printf("\nafter\nno newline at the end");
        return 0;
    }
    fprintf(stderr, "usage: forker lines|raise|sleep|chatter|tree|setsid|daemon|longline ...\n");
    return 64;
}
