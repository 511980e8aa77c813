/*
 * upstream_conformance.c - moetune's start-up verdicts against Megatron-LM's
 * own, row by row.
 *
 * Each row of ../shared/facts/upstream/megatron-verdicts-V.tsv is a command
 * line with its hardware, world size, Transformer Engine version and
 * environment, and the verdict upstream's parse_args + validate_args +
 * TransformerConfig gave.  Every row is imported exactly as
 *
 *     moetune import --stack megatron_lm=V --stack transformer_engine=T
 *         --hardware gpu=G,gpus_per_node=P,nodes=N [--env K=V]... -- ARGV
 *
 * would (same library call), then judged like `moetune check --startup-only`.
 * moetune accepts a row when both succeed.  A row agrees when the verdicts are
 * equal and, for a reject, moetune's violations include the rule that
 * core/dialects/mlm/messages/<owner>.tsv maps upstream's message to.
 *
 * usage: upstream-conformance [--facts DIR] [--version V]... [--rows FILE]
 *                             [--show N] [--id ID]
 * Exit 0 when every row agrees, 1 when some do not, 77 when the verdict
 * corpus is absent (a user's clone has no ../shared).
 */
#include "config.h"
#include "contract.h"
#include "diag.h"
#include "evaluate.h"
#include "import.h"
#include "registry.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_RULES 1024

typedef struct mapping {
    char *rule, *message, *where;
} mapping;

static mapping maps[MAX_RULES];
static size_t n_maps;

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

static int load_maps(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    if (!f) {
        fprintf(stderr, "upstream-conformance: cannot read %s\n", path);
        return -1;
    }
    while (fgets(line, sizeof line, f) && n_maps < MAX_RULES) {
        char *p = line, *r, *m, *w;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        r = field(&p), m = field(&p), w = field(&p);
        if (!r || !m) {
            fprintf(stderr, "upstream-conformance: %s: malformed line '%s'\n", path, line);
            fclose(f);
            return -1;
        }
        maps[n_maps].rule = strdup(r);
        maps[n_maps].message = strdup(m);
        maps[n_maps].where = strdup(w && strcmp(w, "*") ? w : "");
        n_maps++;
    }
    fclose(f);
    return 0;
}

/* The rule id upstream's message names, or NULL. */
static const char *rule_for(const char *message, const char *where)
{
    size_t i;
    for (i = 0; i < n_maps; i++)
        if (strstr(message, maps[i].message) && (!maps[i].where[0] || strstr(where, maps[i].where)))
            return maps[i].rule;
    return NULL;
}

static char **split_argv(char *s, size_t *n)
{
    size_t cap = 64;
    char **v = malloc(cap * sizeof *v), *tok, *save = NULL;
    *n = 0;
    for (tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (*n + 1 >= cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = tok;
    }
    v[*n] = NULL;
    return v;
}

typedef struct verdict {
    int accept;
    char rules[2048]; /* our start-up rule ids, space-separated */
    char first[600];  /* our first message */
} verdict;

static void judge(mt_registry *reg, const char *version, const char *gpu, int world,
                  const char *te, const char *env, char *argvs, verdict *out)
{
    mt_import_opts o;
    char **argv;
    size_t argc, i;
    char *text = NULL;
    size_t tlen = 0;
    FILE *mem;
    mt_diag *d = mt_diag_new();
    int gpn = !strcmp(gpu, "GB200") || !strcmp(gpu, "GB300") ? 4 : 8, rc;
    memset(&o, 0, sizeof o);
    memset(out, 0, sizeof *out);
    o.stack = mt_kv_new(), o.hardware = mt_kv_new(), o.env = mt_kv_new();
    mt_kv_set(o.stack, "megatron_lm", version);
    mt_kv_set(o.stack, "transformer_engine", te);
    mt_kv_set(o.hardware, "gpu", gpu);
    mt_kv_setf(o.hardware, "gpus_per_node", "%d", gpn);
    mt_kv_setf(o.hardware, "nodes", "%d", world / gpn > 0 ? world / gpn : 1);
    if (strcmp(env, "-")) {
        char buf[2048], *tok, *save = NULL;
        snprintf(buf, sizeof buf, "%s", env);
        for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
            char *eq = strchr(tok, '=');
            if (eq)
                *eq = 0, mt_kv_set(o.env, tok, eq + 1);
        }
    }
    argv = split_argv(argvs, &argc);
    mem = open_memstream(&text, &tlen);
    rc = mt_import(reg, &o, argv, argc, mem, d);
    fclose(mem);
    if (rc) {
        const char *msg = mt_diag_count(d) ? mt_diag_at(d, 0)->message : "import failed";
        snprintf(out->first, sizeof out->first, "import: %s", msg);
        if (strstr(msg, "unrecognized arguments"))
            snprintf(out->rules, sizeof out->rules, "core.args_unrecognized");
        else if (strstr(msg, ": invalid choice: "))
            snprintf(out->rules, sizeof out->rules, "core.args_invalid_choice");
        else if (strstr(msg, ": expected "))
            snprintf(out->rules, sizeof out->rules, "core.args_arity");
        else if (strstr(msg, "KeyError: "))
            snprintf(out->rules, sizeof out->rules, "core.args_unknown_enum_member");
        else if (strstr(msg, "argument parser refuses"))
            snprintf(out->rules, sizeof out->rules, "core.args_invalid_value");
        else
            snprintf(out->rules, sizeof out->rules, "core.import");
    } else {
        mt_contract *c = mt_contract_load_string(text, "imported", d);
        mt_kv *cfg = NULL;
        if (c)
            cfg = mt_config_base(reg, c, d);
        if (!c || !cfg) {
            snprintf(out->first, sizeof out->first, "contract: %s",
                     mt_diag_count(d) ? mt_diag_at(d, 0)->message : "does not load");
            snprintf(out->rules, sizeof out->rules, "core.contract");
        } else {
            mt_violations vs = {0};
            size_t len = 0;
            mt_legality(reg, c, cfg, &vs, d);
            out->accept = 1;
            for (i = 0; i < vs.n; i++) {
                if (vs.v[i].rule_class != MT_RULE_STARTUP)
                    continue;
                if (out->accept)
                    snprintf(out->first, sizeof out->first, "%s", vs.v[i].message);
                out->accept = 0;
                if (len < sizeof out->rules)
                    len += (size_t)snprintf(out->rules + len, sizeof out->rules - len, "%s%s",
                                            len ? " " : "", vs.v[i].rule);
            }
            mt_violations_clear(&vs);
        }
        mt_kv_destroy(&cfg);
        mt_contract_destroy(&c);
    }
    free(text);
    free(argv);
    mt_diag_destroy(&d);
    mt_kv_destroy(&o.stack), mt_kv_destroy(&o.hardware), mt_kv_destroy(&o.env);
}

static int has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    const char *p = list;
    while ((p = strstr(p, w))) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
            return 1;
        p += n;
    }
    return 0;
}

typedef struct tally {
    int rows, agree, accept_both, reject_both, cause_ok, we_reject, we_accept, unmapped;
} tally;

static int run_file(mt_registry *reg, const char *path, const char *version, int show,
                    const char *only, tally *t)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int shown = 0;
    if (!f)
        return -1;
    while (getline(&line, &cap, f) > 0) {
        char *p = line, *id, *gpu, *arch, *ws, *te, *env, *argv, *ver, *msg, *where;
        verdict v;
        const char *want = NULL;
        int up_accept, ok;
        line[strcspn(line, "\r\n")] = 0;
        id = field(&p), gpu = field(&p), arch = field(&p), ws = field(&p), te = field(&p);
        env = field(&p), argv = field(&p), ver = field(&p), msg = field(&p), where = field(&p);
        if (!where || !strcmp(id, "id"))
            continue;
        if (only && strcmp(only, id))
            continue;
        (void)arch;
        up_accept = !strcmp(ver, "accept");
        {
            char *copy = strdup(argv);
            judge(reg, version, gpu, atoi(ws), te, env, copy, &v);
            free(copy);
        }
        t->rows++;
        if (up_accept) {
            ok = v.accept;
            t->accept_both += ok;
            t->we_reject += !ok;
        } else {
            want = rule_for(msg, where);
            t->unmapped += !want;
            ok = !v.accept && want && has_word(v.rules, want);
            if (!v.accept) {
                t->reject_both++;
                t->cause_ok += ok;
            } else {
                t->we_accept++;
            }
        }
        t->agree += ok;
        if (!ok && shown < show) {
            shown++;
            printf("DISAGREE %s upstream=%s%s%s%s [%s] | moetune=%s [%s] %s\n  argv: %s env: %s\n",
                   id, ver, up_accept ? "" : " \"", up_accept ? "" : msg, up_accept ? "" : "\"",
                   want ? want : up_accept ? "-" : "UNMAPPED", v.accept ? "accept" : "reject",
                   v.rules, v.first, argv, env);
        }
    }
    free(line);
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"core_r0.15.0", "core_v0.18.0", "core_v0.19.0", "main"};
    const char *facts = getenv("MOETUNE_UPSTREAM_FACTS");
    const char *versions[8], *rows = NULL, *only = NULL;
    size_t nv = 0, i;
    int show = 20, bad = 0;
    char path[4096];
    struct stat st;
    mt_registry *reg;
    mt_diag *d;
    for (i = 1; i < (size_t)argc; i++) {
        if (!strcmp(argv[i], "--facts") && i + 1 < (size_t)argc)
            facts = argv[++i];
        else if (!strcmp(argv[i], "--version") && i + 1 < (size_t)argc && nv < 8)
            versions[nv++] = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < (size_t)argc)
            rows = argv[++i];
        else if (!strcmp(argv[i], "--show") && i + 1 < (size_t)argc)
            show = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--id") && i + 1 < (size_t)argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: upstream-conformance [--facts DIR] [--version V]... "
                            "[--rows FILE] [--show N] [--id ID]\n");
            return 64;
        }
    }
    if (!facts)
        facts = MT_SOURCE_DIR "/../shared/facts/upstream";
    if (!rows && stat(facts, &st)) {
        printf("upstream-conformance: SKIP: no verdict corpus at %s (it lives in the project's "
               "shared/ folder, beside a developer's checkout; set MOETUNE_UPSTREAM_FACTS)\n",
               facts);
        return 77;
    }
    if (!nv)
        for (nv = 0; nv < 4; nv++)
            versions[nv] = all[nv];
    {
        /* One table per owner: core/dialects/mlm/messages/<owner>.tsv. */
        struct dirent **ents;
        int n, k;
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/core/dialects/mlm/messages", MT_SOURCE_DIR);
        n = scandir(dir, &ents, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "upstream-conformance: cannot read %s\n", dir);
            return 1;
        }
        for (k = 0; k < n; k++) {
            size_t len = strlen(ents[k]->d_name);
            if (len > 4 && !strcmp(ents[k]->d_name + len - 4, ".tsv")) {
                snprintf(path, sizeof path, "%s/%s", dir, ents[k]->d_name);
                if (load_maps(path))
                    return 1;
            }
            free(ents[k]);
        }
        free(ents);
    }
    reg = mt_registry_new();
    d = mt_diag_new();
    mt_registry_load_default(reg, NULL, 0, d);
    mt_registry_finish(reg, d);
    if (mt_diag_count(d)) {
        fprintf(stderr, "upstream-conformance: plugin problem: %s\n", mt_diag_at(d, 0)->message);
        return 1;
    }
    for (i = 0; i < nv; i++) {
        tally t = {0};
        if (rows)
            snprintf(path, sizeof path, "%s", rows);
        else
            snprintf(path, sizeof path, "%s/megatron-verdicts-%s.tsv", facts, versions[i]);
        if (run_file(reg, path, versions[i], show, only, &t)) {
            fprintf(stderr, "upstream-conformance: cannot read %s\n", path);
            bad = 1;
            continue;
        }
        printf("%s: %d/%d rows agree (accept both %d, reject both %d of which same cause %d; "
               "moetune rejects %d upstream accepts, accepts %d upstream rejects; %d upstream "
               "messages unmapped)\n",
               versions[i], t.agree, t.rows, t.accept_both, t.reject_both, t.cause_ok,
               t.we_reject, t.we_accept, t.unmapped);
        bad |= t.agree != t.rows;
    }
    mt_diag_destroy(&d);
    mt_registry_destroy(&reg);
    for (i = 0; i < n_maps; i++)
        free(maps[i].rule), free(maps[i].message), free(maps[i].where);
    return bad;
}
