/*
 * cli.c - the option-table parser, the global options and the session
 * every `moetune` command shares (core/cli.h).
 */
#include "cli.h"

#include "callguard.h"
#include "config.h"
#include "dirlock.h"
#include "evaluate.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mt_cli_trust_plugin_path;

/* ---- the option-table parser ---- */

static void help_hint(const mt_cmd *c)
{
    fprintf(stderr, "(moetune %s --help lists every option)\n", c->name);
}

int mt_cli_usage(const mt_cmd *c)
{
    if (c->usage)
        fputs(c->usage, stderr);
    help_hint(c);
    return MT_EXIT_USAGE;
}

void mt_cli_list_clear(mt_cli_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static void print_help(const mt_cmd *c)
{
    const mt_opt *o;
    if (c->usage)
        fputs(c->usage, stdout);
    printf("options:\n");
    for (o = c->opts; o && o->name; o++) {
        char head[96];
        snprintf(head, sizeof head, "%s%s%s%s%s", o->name, o->alias ? ", " : "",
                 o->alias ? o->alias : "", o->metavar ? " " : "", o->metavar ? o->metavar : "");
        if (strlen(head) > 26)
            printf("  %s\n  %-26s", head, "");
        else
            printf("  %-26s", head);
        printf(" %s%s\n", o->help ? o->help : "", o->kind == MT_OPT_LIST ? " (repeatable)" : "");
    }
    printf("  %-26s %s\n", "--help", "this text");
    printf("every command also takes --trust-plugin-path and --plugin-timeout S\n");
}

static const mt_opt *find_opt(const mt_cmd *c, const char *word, size_t len)
{
    const mt_opt *o;
    for (o = c->opts; o && o->name; o++)
        if ((strlen(o->name) == len && !strncmp(o->name, word, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, word, len)))
            return o;
    return NULL;
}

/* v into o's destination; 0, or -1 after naming the value. */
static int take_value(const mt_cmd *c, const mt_opt *o, const char *v)
{
    char *end;
    errno = 0;
    switch (o->kind) {
    case MT_OPT_STR:
        *(const char **)o->dest = v;
        return 0;
    case MT_OPT_LIST: {
        mt_cli_list *l = o->dest;
        l->v[l->n++] = v;
        return 0;
    }
    case MT_OPT_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < (long)o->min || x > INT_MAX) {
            fprintf(stderr, "moetune %s: %s %s: write a whole number >= %ld\n", c->name, o->name,
                    v, (long)o->min);
            return -1;
        }
        *(int *)o->dest = (int)x;
        return 0;
    }
    case MT_OPT_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end || errno || v[0] == '-') {
            fprintf(stderr, "moetune %s: %s %s: write a whole number >= 0\n", c->name, o->name, v);
            return -1;
        }
        *(unsigned long long *)o->dest = x;
        return 0;
    }
    case MT_OPT_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x) || x < o->min ||
            (o->min_open && x == o->min)) {
            fprintf(stderr, "moetune %s: %s %s: write a number %s %g\n", c->name, o->name, v,
                    o->min_open ? ">" : ">=", o->min);
            return -1;
        }
        *(double *)o->dest = x;
        return 0;
    }
    case MT_OPT_FLAG:
        break;
    }
    return -1;
}

/* Room for every value of every list option (at most argc of them). */
static int lists_alloc(const mt_cmd *c, int argc)
{
    const mt_opt *o;
    for (o = c->opts; o && o->name; o++)
        if (o->kind == MT_OPT_LIST) {
            mt_cli_list *l = o->dest;
            l->n = 0;
            if (!(l->v = calloc((size_t)argc + 1, sizeof *l->v)))
                return -1;
        }
    if (c->rest) {
        c->rest->n = 0;
        if (!(c->rest->v = calloc((size_t)argc + 1, sizeof *c->rest->v)))
            return -1;
    }
    return 0;
}

static void lists_free(const mt_cmd *c)
{
    const mt_opt *o;
    for (o = c->opts; o && o->name; o++)
        if (o->kind == MT_OPT_LIST)
            mt_cli_list_clear(o->dest);
    if (c->rest)
        mt_cli_list_clear(c->rest);
}

static int parse_fail(const mt_cmd *c)
{
    lists_free(c);
    return mt_cli_usage(c);
}

int mt_cli_parse(const mt_cmd *c, int argc, char **argv, int first)
{
    int j, npos = 0;
    if (lists_alloc(c, argc)) {
        fprintf(stderr, "moetune %s: out of memory\n", c->name);
        return parse_fail(c);
    }
    for (j = first; j < argc; j++) {
        const char *a = argv[j], *eq, *v;
        const mt_opt *o;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(c);
            lists_free(c);
            return MT_CLI_HELP;
        }
        if (!strcmp(a, "--") && c->rest) {
            for (j++; j < argc; j++)
                c->rest->v[c->rest->n++] = argv[j];
            break;
        }
        if (a[0] != '-' || !a[1]) {
            if (npos >= c->max_pos) {
                fprintf(stderr, "moetune %s: unexpected argument '%s'\n", c->name, a);
                return parse_fail(c);
            }
            c->pos[npos++] = a;
            continue;
        }
        eq = a[1] == '-' ? strchr(a, '=') : NULL;
        o = find_opt(c, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!o || (eq && o->kind == MT_OPT_FLAG)) {
            fprintf(stderr, "moetune %s: unknown option '%s'\n", c->name, a);
            return parse_fail(c);
        }
        if (o->seen)
            *o->seen = 1;
        if (o->kind == MT_OPT_FLAG) {
            *(int *)o->dest = 1;
            continue;
        }
        v = eq ? eq + 1 : j + 1 < argc ? argv[++j] : NULL;
        if (!v) {
            fprintf(stderr, "moetune %s: incomplete option '%s': it needs a value%s%s\n", c->name,
                    a, o->metavar ? ", " : "", o->metavar ? o->metavar : "");
            return parse_fail(c);
        }
        if (take_value(c, o, v))
            return parse_fail(c);
    }
    if (npos < c->min_pos) {
        fprintf(stderr, "moetune %s: missing %s\n", c->name, c->pos_name ? c->pos_name : "argument");
        return parse_fail(c);
    }
    return 0;
}

int mt_cli_global_options(int *argc, char **argv)
{
    int i, o = 1;
    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            while (i < *argc)
                argv[o++] = argv[i++];
            break;
        }
        if (!strcmp(a, "--trust-plugin-path")) {
            mt_cli_trust_plugin_path = 1;
            continue;
        }
        if (!strcmp(a, "--plugin-timeout") || !strncmp(a, "--plugin-timeout=", 17)) {
            const char *v = a[16] == '=' ? a + 17 : i + 1 < *argc ? argv[++i] : NULL;
            char *end = NULL;
            double sec = v ? strtod(v, &end) : -1;
            if (!v || !*v || *end || mt_callguard_set_limit(sec)) {
                fprintf(stderr, "moetune: --plugin-timeout needs a number of seconds >= 0 "
                                "(0: no limit), got '%s'\n",
                        v ? v : "");
                return MT_EXIT_USAGE;
            }
            continue;
        }
        argv[o++] = argv[i];
    }
    argv[o] = NULL;
    *argc = o;
    return 0;
}

/* ---- the session ---- */

void mt_session_clear(mt_session *s)
{
    mt_kv_destroy(&s->cfg);
    mt_registry_destroy(&s->reg);
    mt_contract_destroy(&s->contract);
    mt_diag_destroy(&s->load_diag);
}

void mt_session_load_plugins(mt_session *s)
{
    char **extra = NULL;
    size_t n = 0, i;
    s->reg = mt_registry_new();
    s->load_diag = mt_diag_new();
    if (s->contract && s->contract->n_plugin_path && !mt_cli_trust_plugin_path)
        for (i = 0; i < s->contract->n_plugin_path; i++)
            mt_diag_add(s->load_diag, s->contract->path,
                        mt_contract_line(s->contract, "launch.plugin_path"), "launch.plugin_path",
                        "refused to load \"%s\": files a contract names load only with "
                        "--trust-plugin-path (or install the plugin in MOETUNE_PLUGIN_PATH and "
                        "name it in launch.plugins)",
                        s->contract->plugin_path[i]);
    if (s->contract && s->contract->n_plugin_path && mt_cli_trust_plugin_path) {
        const char *slash = strrchr(s->contract->path, '/');
        int dirlen = slash ? (int)(slash - s->contract->path) : 0;
        extra = calloc(s->contract->n_plugin_path, sizeof *extra);
        for (i = 0; extra && i < s->contract->n_plugin_path; i++) {
            const char *p = s->contract->plugin_path[i];
            char buf[PATH_MAX];
            if (p[0] == '/' || !slash)
                snprintf(buf, sizeof buf, "%s", p);
            else
                snprintf(buf, sizeof buf, "%.*s/%s", dirlen, s->contract->path, p);
            extra[n++] = strdup(buf);
        }
    }
    mt_registry_load_default(s->reg, (const char *const *)extra, n, s->load_diag);
    mt_registry_finish(s->reg, s->load_diag);
    for (i = 0; i < n; i++)
        free(extra[i]);
    free(extra);
}

/* The contract's launch.plugins, each loaded, enabled and new enough; a
 * problem goes to d (bad input: the contract cannot be judged without it). */
static void require_plugins(const mt_session *s, mt_diag *d)
{
    size_t i;
    char why[1024];
    for (i = 0; s->contract && i < s->contract->n_plugins; i++)
        if (mt_registry_require(s->reg, s->contract->plugins[i],
                                s->contract->plugin_min_versions[i], why, sizeof why))
            mt_diag_add(d, s->contract->path, mt_contract_line(s->contract, "launch.plugins"),
                        "launch.plugins", "%s", why);
}

void mt_session_warn_load(const mt_session *s)
{
    size_t i;
    for (i = 0; i < mt_diag_count(s->load_diag); i++) {
        const mt_diag_item *it = mt_diag_at(s->load_diag, i);
        fprintf(stderr, "moetune: warning: %s: %s\n", it->file ? it->file : "plugin", it->message);
    }
}

/* d's problems on stderr, d destroyed: MT_EXIT_BAD_INPUT. */
static int bad_input(mt_diag **d)
{
    mt_diag_print(*d, stderr);
    mt_diag_destroy(d);
    return MT_EXIT_BAD_INPUT;
}

int mt_session_open(mt_session *s, const char *path, int quiet_load)
{
    mt_diag *d = mt_diag_new();
    memset(s, 0, sizeof *s);
    s->contract = mt_contract_load(path, d);
    if (!s->contract)
        return bad_input(&d);
    mt_session_load_plugins(s);
    if (!quiet_load)
        mt_session_warn_load(s);
    require_plugins(s, d);
    if (mt_diag_count(d))
        return bad_input(&d);
    mt_config_normalize_space(s->reg, s->contract, d);
    s->cfg = mt_config_base(s->reg, s->contract, d);
    if (!s->cfg || mt_diag_count(d))
        return bad_input(&d);
    mt_diag_destroy(&d);
    return 0;
}

int mt_session_apply_sets(mt_session *s, const char *const *sets, size_t n)
{
    mt_diag *d = mt_diag_new();
    size_t i;
    int bad = 0;
    for (i = 0; i < n; i++) {
        const char *eq = strchr(sets[i], '=');
        char knob[256];
        if (!eq || (size_t)(eq - sets[i]) >= sizeof knob) {
            mt_diag_add(d, NULL, 0, "--set", "'%s' is not knob=value", sets[i]);
            bad = 1;
            continue;
        }
        snprintf(knob, sizeof knob, "%.*s", (int)(eq - sets[i]), sets[i]);
        if (mt_registry_is_core(knob) && strcmp(knob, "train_iters")) {
            mt_diag_add(d, NULL, 0, "--set",
                        "%s is fixed by the contract (model, batch, intervals or data); edit the "
                        "contract instead",
                        knob);
            bad = 1;
        } else if (mt_config_set(s->reg, s->cfg, knob, eq + 1, NULL, 0, "--set", d)) {
            bad = 1;
        }
    }
    mt_diag_print(d, stderr);
    mt_diag_destroy(&d);
    return bad ? MT_EXIT_BAD_INPUT : 0;
}

void mt_cli_print_violations(const mt_violations *vs, FILE *out, const char *indent)
{
    size_t i;
    for (i = 0; i < vs->n; i++)
        fprintf(out, "%s[%s, %s] %s (plugin %s)\n", indent, vs->v[i].rule,
                vs->v[i].rule_class == MT_RULE_RUNTIME ? "runtime" : "start-up", vs->v[i].message,
                vs->v[i].plugin);
}

static int require_legal(mt_session *s)
{
    mt_violations vs = {0};
    mt_diag *d = mt_diag_new();
    int rc = 0;
    mt_legality(s->reg, s->contract, s->cfg, &vs, d);
    mt_diag_print(d, stderr);
    if (vs.n) {
        fprintf(stderr, "moetune: the configuration is illegal:\n");
        mt_cli_print_violations(&vs, stderr, "  ");
        rc = MT_EXIT_BAD_INPUT;
    } else if (mt_diag_count(d)) {
        rc = 1;
    }
    mt_violations_clear(&vs);
    mt_diag_destroy(&d);
    return rc;
}

int mt_session_open_legal(mt_session *s, const char *path, mt_cli_list *sets)
{
    int rc = mt_session_open(s, path, 0);
    if (!rc)
        rc = mt_session_apply_sets(s, sets->v, sets->n);
    if (!rc)
        rc = require_legal(s);
    mt_cli_list_clear(sets);
    if (rc)
        mt_session_clear(s);
    return rc;
}

/* ---- small things several commands need ---- */

void mt_cli_sim_path(char *buf, size_t n)
{
    const char *env = getenv("MOETUNE_SIM");
    char exe[PATH_MAX];
    ssize_t len;
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        char *slash;
        exe[len] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            if ((size_t)snprintf(buf, n, "%.*s/moetune-sim", (int)(n > 13 ? n - 13 : 0), exe) < n &&
                access(buf, X_OK) == 0)
                return;
        }
    }
    snprintf(buf, n, "moetune-sim");
}

int mt_cli_make_dir(const char *cmd, const char *dir)
{
    char p[PATH_MAX], *q;
    struct stat sb;
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        fprintf(stderr, "moetune %s: %s: the path is too long\n", cmd, dir);
        return -1;
    }
    for (q = p + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                break; /* the last mkdir says why */
            *q = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "moetune %s: cannot create the %s directory %s: %s\n", cmd, cmd, dir,
                strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "moetune %s: %s is not a directory\n", cmd, dir);
        return -1;
    }
    if (access(dir, W_OK) != 0) {
        /* say why here: the errno of a file inside it would mislead */
        fprintf(stderr, "moetune %s: cannot write into the %s directory %s: %s\n", cmd, cmd, dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

int mt_cli_own_dir(const char *cmd, const char *dir, const char *what, int *rc)
{
    mt_diag *d = mt_diag_new();
    pid_t owner;
    int fd = mt_dirlock_acquire(dir, what, &owner, d);
    if (fd < 0) {
        fprintf(stderr, "moetune %s: ", cmd);
        mt_diag_print(d, stderr);
        *rc = fd == -EBUSY ? MT_EXIT_BUSY : EXIT_FAILURE;
        fd = -1;
    }
    mt_diag_destroy(&d);
    return fd;
}
