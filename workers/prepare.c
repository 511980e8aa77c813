/*
 * prepare.c - a bisection's prepare step (see prepare.h).
 */
#include "prepare.h"

#include "launch.h"
#include "job_memo.h"
#include "store.h"
#include "runner.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int mt_prepare_split(const char *tmpl, mt_strlist *out, mt_diag *d)
{
    const char *p = tmpl;
    char *w = malloc(strlen(tmpl) + 1);
    size_t words = 0;
    if (!w)
        return -ENOMEM;
    for (;;) {
        size_t k = 0;
        int any = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                const char *e = strchr(p, q);
                if (!e) {
                    mt_diag_add(d, "--prepare", 0, NULL,
                                "unterminated %c quote in the prepare step \"%.200s\"", q, tmpl);
                    free(w);
                    return -EINVAL;
                }
                memcpy(w + k, p, (size_t)(e - p));
                k += (size_t)(e - p);
                p = e + 1;
                any = 1;
            } else {
                w[k++] = *p++;
                any = 1;
            }
        }
        w[k] = '\0';
        if (any) {
            if (mt_strlist_push(out, w)) {
                free(w);
                return -ENOMEM;
            }
            words++;
        }
    }
    free(w);
    if (!words) {
        mt_diag_add(d, "--prepare", 0, NULL, "a prepare step has no words");
        return -EINVAL;
    }
    return 0;
}

int mt_prepare_rev_ok(const char *rev, char *why, size_t n)
{
    static const char extra[] = "._-:/@+~^";
    size_t i;
    if (!rev || !*rev) {
        snprintf(why, n, "the revision is empty");
        return -EINVAL;
    }
    if (strlen(rev) > 200) {
        snprintf(why, n, "the revision \"%.60s...\" is longer than 200 characters", rev);
        return -EINVAL;
    }
    if (rev[0] == '-') {
        snprintf(why, n,
                 "the revision \"%.200s\" starts with '-' (a command would read it as an "
                 "option)",
                 rev);
        return -EINVAL;
    }
    for (i = 0; rev[i]; i++) {
        unsigned char ch = (unsigned char)rev[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr(extra, ch))
            continue;
        if (ch < 0x20 || ch >= 0x7f)
            snprintf(why, n,
                     "the revision \"%.200s\" has the byte 0x%02x at character %zu; a revision "
                     "(commit, tag, stack version or container image) is letters, digits and "
                     ". _ - : / @ + ~ ^",
                     rev, ch, i + 1);
        else
            snprintf(why, n,
                     "the revision \"%.200s\" has '%c' at character %zu, which cannot go in an "
                     "image name or a command word as it is; a revision (commit, tag, stack "
                     "version or container image) is letters, digits and . _ - : / @ + ~ ^",
                     rev, ch, i + 1);
        return -EINVAL;
    }
    return 0;
}

/* One word with {rev}, {work} and {repo} substituted, appended to out. */
static int expand_word(const char *w, const char *rev, const char *repo, const char *work,
                       mt_strlist *out, mt_diag *d)
{
    size_t cap = strlen(w) + 1, len = 0;
    const char *p;
    char *b;
    int rc;
    for (p = w; (p = strchr(p, '{')); p++)
        cap += strlen(rev) + strlen(work) + (repo ? strlen(repo) : 0);
    if (!(b = malloc(cap)))
        return -ENOMEM;
    for (p = w; *p;) {
        const char *val = NULL;
        size_t k = 0;
        if (*p == '{') {
            if (!strncmp(p, "{rev}", 5)) {
                char why[400];
                if (mt_prepare_rev_ok(rev, why, sizeof why)) {
                    mt_diag_add(d, "--prepare", 0, NULL, "{rev} in the prepare word \"%.200s\": %s",
                                w, why);
                    free(b);
                    return -EINVAL;
                }
                val = rev, k = 5;
            } else if (!strncmp(p, "{work}", 6))
                val = work, k = 6;
            else if (!strncmp(p, "{repo}", 6) && repo)
                val = repo, k = 6;
            else if (strchr(p, '}')) {
                mt_diag_add(d, "--prepare", 0, NULL,
                            "unknown placeholder in prepare word \"%.200s\"; known: {rev} {work}%s",
                            w, repo ? " {repo}" : " ({repo} needs --repo)");
                free(b);
                return -EINVAL;
            }
        }
        if (val) {
            memcpy(b + len, val, strlen(val));
            len += strlen(val);
            p += k;
        } else {
            b[len++] = *p++;
        }
    }
    b[len] = '\0';
    rc = mt_strlist_push(out, b) ? -ENOMEM : 0;
    free(b);
    return rc;
}

int mt_prepare_expand(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                      const char *work, mt_strlist **out, mt_diag *d)
{
    mt_strlist *v = calloc(n ? n : 1, sizeof *v);
    size_t i, j;
    int rc = 0;
    *out = NULL;
    if (!v)
        return -ENOMEM;
    for (i = 0; i < n && !rc; i++) {
        mt_strlist words = {0};
        rc = mt_prepare_split(tmpl[i], &words, d);
        for (j = 0; !rc && j < words.n; j++)
            rc = expand_word(words.v[j], rev, repo, work ? work : "{work}", &v[i], d);
        mt_strlist_clear(&words);
    }
    if (rc) {
        for (i = 0; i < n; i++)
            mt_strlist_clear(&v[i]);
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path) && errno != ENOENT ? -1 : 0;
}

/* The last line of stderr (evidence of a failed step). */
typedef struct lastline {
    char line[200];
} lastline;

static void on_line(void *ctx, int stream, const char *line, size_t n)
{
    lastline *l = ctx;
    if (stream == MT_STREAM_STDERR && n > 0)
        snprintf(l->line, sizeof l->line, "%.*s", (int)(n < 190 ? n : 190), line);
}

static int read_record(const char *path, char *outcome, size_t no, char *evidence, size_t ne)
{
    FILE *f = fopen(path, "r");
    char buf[600];
    int st = -1;
    if (!f)
        return -1;
    if (fgets(buf, sizeof buf, f)) {
        char *tab = strchr(buf, '\t'), *nl;
        if ((nl = strchr(buf, '\n')))
            *nl = '\0';
        if (tab) {
            *tab = '\0';
            snprintf(outcome, no, "%s", buf);
            snprintf(evidence, ne, "%s", tab + 1);
            st = !strcmp(buf, "ok") ? MT_PREP_OK : !strcmp(buf, "skip") ? MT_PREP_SKIP
                                                                         : MT_PREP_FAILED;
        }
    }
    fclose(f);
    return st;
}

static void write_record(const char *path, const char *outcome, const char *evidence)
{
    char tmp[4200];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w")))
        return;
    fprintf(f, "%s\t%s\n", outcome, evidence);
    if (fflush(f) == 0 && fsync(fileno(f)) == 0) {
        fclose(f);
        rename(tmp, path);
        return;
    }
    fclose(f);
    unlink(tmp);
}

int mt_prepare_run(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                   const char *work, double time_limit_s, char *outcome, size_t no,
                   char *evidence, size_t ne, mt_diag *d)
{
    char rec[4096], lock[4096], logs[4096];
    mt_strlist *steps = NULL;
    mt_kv *env = NULL;
    size_t i;
    int fd, st;
    snprintf(outcome, no, "ok");
    snprintf(evidence, ne, "no prepare step");
    if (n == 0)
        return MT_PREP_OK;
    snprintf(rec, sizeof rec, "%s.prepared", work);
    snprintf(lock, sizeof lock, "%s.lock", work);
    snprintf(logs, sizeof logs, "%s.log", work);
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        mt_diag_add(d, lock, 0, NULL, "cannot open the prepare lock: %s", strerror(errno));
        return -errno;
    }
    while (flock(fd, LOCK_EX) && errno == EINTR)
        ;
    st = read_record(rec, outcome, no, evidence, ne);
    if (st >= 0) {
        close(fd);
        return st;
    }
    /* a fresh, empty work directory */
    nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (mkdir(work, 0755) && errno != EEXIST) {
        mt_diag_add(d, work, 0, NULL, "cannot create the work directory: %s", strerror(errno));
        close(fd);
        return -EIO;
    }
    if (mt_prepare_expand(tmpl, n, rev, repo, work, &steps, d)) {
        snprintf(outcome, no, "prepare_failed");
        snprintf(evidence, ne, "%.*s", (int)(ne > 1 ? ne - 1 : 0),
                 mt_diag_count(d) ? mt_diag_at(d, mt_diag_count(d) - 1)->message : "bad template");
        write_record(rec, outcome, evidence);
        close(fd);
        return MT_PREP_FAILED;
    }
    env = mt_kv_new();
    mt_launch_environment(MT_LAUNCHER_LOCAL, 1, NULL, env);
    mt_kv_set(env, "MOETUNE_REV", rev);
    mt_kv_set(env, "MOETUNE_WORK", work);
    st = MT_PREP_OK;
    snprintf(evidence, ne, "%zu prepare step%s exited 0", n, n == 1 ? "" : "s");
    for (i = 0; i < n && st == MT_PREP_OK; i++) {
        mt_run_spec rs;
        mt_run_result res;
        mt_run *run;
        lastline last = {{0}};
        char dir[4200];
        const char **argv = calloc(steps[i].n + 1, sizeof *argv);
        size_t j;
        if (!argv) {
            st = -ENOMEM;
            break;
        }
        for (j = 0; j < steps[i].n; j++)
            argv[j] = steps[i].v[j];
        snprintf(dir, sizeof dir, "%s/step-%zu", logs, i + 1);
        mkdir(logs, 0755);
        memset(&rs, 0, sizeof rs);
        rs.argv = argv;
        rs.env = env;
        rs.run_dir = dir;
        rs.cwd = work;
        rs.time_limit_s = time_limit_s > 0 ? time_limit_s : 3600;
        rs.on_line = on_line;
        rs.line_ctx = &last;
        /* the step's processes hold the lock too: should this process be
         * killed, the next one to prepare the revision waits until the
         * step's shepherd has stopped them, not racing a dying clone for
         * the work directory */
        rs.hold_fd = fd;
        run = mt_runner_start(&rs, d);
        if (!run) {
            snprintf(outcome, no, "launch_error");
            snprintf(evidence, ne, "prepare step %zu (%.100s) could not start", i + 1, argv[0]);
            st = MT_PREP_FAILED;
        } else {
            mt_runner_wait(run, &res);
            if (res.outcome == MT_OUTCOME_OK && res.exited && res.exit_code == 0) {
                /* next step */
            } else if (res.exited && res.exit_code == 125) {
                snprintf(outcome, no, "skip");
                snprintf(evidence, ne, "prepare step %zu (%.100s) exited 125: skip%s%.150s", i + 1,
                         argv[0], last.line[0] ? ": " : "", last.line);
                st = MT_PREP_SKIP;
            } else {
                const char *t = res.outcome == MT_OUTCOME_LAUNCH_ERROR ? "launch_error"
                                : res.timed_out                        ? "timeout"
                                                                       : "prepare_failed";
                snprintf(outcome, no, "%s", t);
                snprintf(evidence, ne, "prepare step %zu (%.100s): %.100s%s%.150s", i + 1, argv[0],
                         res.evidence ? res.evidence : "failed", last.line[0] ? ": " : "",
                         last.line);
                st = MT_PREP_FAILED;
            }
            mt_runner_destroy(&run);
        }
        free(argv);
    }
    if (st >= 0)
        write_record(rec, outcome, evidence);
    for (i = 0; i < n; i++)
        mt_strlist_clear(&steps[i]);
    free(steps);
    mt_kv_destroy(&env);
    close(fd);
    return st;
}

void mt_prepare_rev_id(const char *rev, char id[17])
{
    mt_sha256 h;
    uint8_t dg[32];
    int i;
    mt_sha256_init(&h);
    mt_sha256_update(&h, rev, strlen(rev));
    mt_sha256_final(&h, dg);
    for (i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", dg[i]);
}

int mt_prepare_job(const char *const *tmpl, size_t n, const char *rev, const char *repo,
                   const char *work_root, double time_limit_s, struct mt_store *st,
                   const char *memo_key, char *work, size_t nwork, mt_diag *d)
{
    char id[17], outcome[32], evidence[512], *text;
    int ps, rc;
    mt_prepare_rev_id(rev, id);
    mkdir(work_root, 0755);
    snprintf(work, nwork, "%.3000s/%s", work_root, id);
    ps = mt_prepare_run(tmpl, n, rev, repo, work, time_limit_s, outcome, sizeof outcome, evidence,
                        sizeof evidence, d);
    if (ps == MT_PREP_OK)
        return 1;
    if (ps < 0) {
        snprintf(outcome, sizeof outcome, "infra");
        snprintf(evidence, sizeof evidence, "%s",
                 mt_diag_count(d) ? mt_diag_at(d, mt_diag_count(d) - 1)->message
                                  : "the prepare step could not be attempted");
    }
    text = mt_job_memo_failed(outcome, evidence);
    rc = st && text ? mt_store_memo_put(st, memo_key, text, d) : -1;
    free(text);
    return rc < 0 ? rc : 0;
}
