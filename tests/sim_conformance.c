/*
 * sim_conformance.c - the simulator's start-up verdicts against Megatron-LM's
 * own, row by row, in-process.
 *
 * Each row of ../shared/facts/upstream/megatron-verdicts-V.tsv is a command
 * line with its GPU (capability major), world size, Transformer Engine
 * version and environment, and the verdict upstream's parse_args +
 * validate_args + micro-batch calculator + TransformerConfig gave.  The sim's
 * own start-up check (workers/sim/simlegal.c sim_startup_argv, the code
 * moetune-sim runs before its first iteration) judges the same row; a row
 * agrees when both accept or both reject.  Messages are compared too and
 * reported (a reject whose first line differs counts as "message differs",
 * not as a disagreement).
 *
 * usage: sim-conformance [--facts DIR] [--version V]... [--show N] [--id ID]
 *                        [--min PERCENT] [--messages]
 * Exit 0 when every version agrees on at least --min percent of its rows
 * (default 100), 1 otherwise, 77 when the corpus is absent.
 */
#include "kv.h"
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *field(char **p)
{
    char *s = *p, *e;
    if (!s)
        return NULL;
    e = strchr(s, '\t');
    if (e)
        *e = 0, *p = e + 1;
    else
        *p = NULL;
    return s;
}

static size_t split_argv(char *s, char **v, size_t cap)
{
    size_t n = 0;
    char *tok, *save = NULL;
    for (tok = strtok_r(s, " ", &save); tok && n + 1 < cap; tok = strtok_r(NULL, " ", &save))
        v[n++] = tok;
    v[n] = NULL;
    return n;
}

/* The message as the corpus records it: type prefix except for
 * AssertionError / ValueError / argparse text, at most 200 chars. */
static void corpus_message(const sim_verdict *v, char *out, size_t n)
{
    char buf[1200];
    if (!strcmp(v->type, "argparse") || !strcmp(v->type, "AssertionError") || !strcmp(v->type, "ValueError"))
        snprintf(buf, sizeof buf, "%s", v->msg);
    else
        snprintf(buf, sizeof buf, "%s: %s", v->type, v->msg);
    snprintf(out, n, "%.200s", buf);
}

/* Numbers in messages may be rendered differently; compare up to the first digit. */
static int same_message(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && b[i] && a[i] == b[i] && !(a[i] >= '0' && a[i] <= '9'))
        i++;
    return (!a[i] && !b[i]) || (a[i] >= '0' && a[i] <= '9') || i >= 60;
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"core_r0.15.0", "core_v0.18.0", "core_v0.19.0", "main", NULL};
    const char *versions[8];
    size_t nv = 0, vi;
    char facts[1024];
    const char *only_id = NULL;
    int show = 20, i, bad = 0, show_msg = 0;
    double min_pct = 100.0;
    long tot_rows = 0, tot_agree = 0;
    struct stat sb;

    snprintf(facts, sizeof facts, "%s/../shared/facts/upstream", MT_SOURCE_DIR);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--facts") && i + 1 < argc)
            snprintf(facts, sizeof facts, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--version") && i + 1 < argc && nv < 7)
            versions[nv++] = argv[++i];
        else if (!strcmp(argv[i], "--show") && i + 1 < argc)
            show = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--id") && i + 1 < argc)
            only_id = argv[++i];
        else if (!strcmp(argv[i], "--messages"))
            show_msg = 1;
        else if (!strcmp(argv[i], "--min") && i + 1 < argc)
            min_pct = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: sim-conformance [--facts DIR] [--version V]... [--show N] [--id ID] "
                            "[--min PERCENT] [--messages]\n");
            return 2;
        }
    }
    if (stat(facts, &sb) || !S_ISDIR(sb.st_mode)) {
        printf("sim-conformance: no verdict corpus at %s: skipped\n", facts);
        return 77;
    }
    if (!nv)
        for (nv = 0; all[nv]; nv++)
            versions[nv] = all[nv];

    for (vi = 0; vi < nv; vi++) {
        char path[1200], line[65536];
        FILE *f;
        long rows = 0, agree = 0, acc_rej = 0, rej_acc = 0, msg_diff = 0;
        int shown = 0;
        snprintf(path, sizeof path, "%s/megatron-verdicts-%s.tsv", facts, versions[vi]);
        f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "sim-conformance: cannot read %s\n", path);
            return 1;
        }
        while (fgets(line, sizeof line, f)) {
            char *p = line, *id, *gpu, *arch, *world, *te, *envs, *args, *verdict, *message;
            char *av[1024], mine[256];
            size_t ac;
            sim_stack st;
            sim_verdict v;
            mt_kv *env;
            int rej, up_rej;
            line[strcspn(line, "\r\n")] = 0;
            id = field(&p), gpu = field(&p), arch = field(&p), world = field(&p), te = field(&p);
            envs = field(&p), args = field(&p), verdict = field(&p), message = field(&p);
            if (!message || !strcmp(id, "id"))
                continue;
            if (only_id && strcmp(id, only_id))
                continue;
            (void)gpu;
            env = mt_kv_new();
            if (strcmp(envs, "-")) {
                char *e, *save = NULL;
                for (e = strtok_r(envs, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
                    char *eq = strchr(e, '=');
                    if (eq) {
                        *eq = 0;
                        mt_kv_set(env, e, eq + 1);
                    }
                }
            }
            memset(&st, 0, sizeof st);
            st.megatron = versions[vi];
            st.te = te;
            st.arch_major = atoi(arch);
            st.world = atol(world);
            st.env = env;
            ac = split_argv(args, av, sizeof av / sizeof av[0]);
            rej = sim_startup_argv(&st, av, ac, &v, NULL);
            mt_kv_destroy(&env);
            up_rej = strcmp(verdict, "accept") != 0;
            rows++;
            if (rej)
                corpus_message(&v, mine, sizeof mine);
            else
                mine[0] = 0;
            if (rej == up_rej) {
                agree++;
                if (rej && !same_message(mine, message)) {
                    msg_diff++;
                    if (show_msg)
                        printf("MESSAGE %s\n  upstream: %s\n  sim:      %s\n", id, message, mine);
                }
            } else {
                if (up_rej)
                    rej_acc++;
                else
                    acc_rej++;
                if (shown < show || only_id) {
                    printf("DISAGREE %s upstream=%s sim=%s\n  upstream: %s\n  sim:      %s\n", id,
                           up_rej ? "reject" : "accept", rej ? "reject" : "accept", message,
                           rej ? mine : "-");
                    shown++;
                }
            }
            if (only_id && rej == up_rej)
                printf("AGREE %s %s\n  upstream: %s\n  sim:      %s\n", id, rej ? "reject" : "accept",
                       message, rej ? mine : "-");
        }
        fclose(f);
        printf("%-14s rows %5ld  agree %5ld (%.1f%%)  upstream rejects/sim accepts %ld  upstream "
               "accepts/sim rejects %ld  (rejects with another first message: %ld)\n",
               versions[vi], rows, agree, rows ? 100.0 * agree / rows : 100.0, rej_acc, acc_rej, msg_diff);
        tot_rows += rows;
        tot_agree += agree;
        if (rows && 100.0 * agree / rows < min_pct)
            bad = 1;
    }
    printf("all            rows %5ld  agree %5ld (%.1f%%)\n", tot_rows, tot_agree,
           tot_rows ? 100.0 * tot_agree / tot_rows : 100.0);
    return bad;
}
