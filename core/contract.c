#include "contract.h"

#include "dialect.h"

#include "hardware.h"
#include "sha256.h"
#include "spell.h"

#include <ctype.h>
#include <libconfig.h>
#include <math.h>
#include <moetune/plugin.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Field schema for the fixed groups. */
enum ftype { F_INT, F_FLOAT, F_BOOL, F_STR, F_LIST };

typedef struct field {
    const char *name;
    enum ftype type;
    int required;
    double min, max;      /* numeric range (inclusive)       */
    const char *def;      /* default written when absent      */
    const char *choices;  /* '|'-separated allowed strings    */
} field;

#define NOLIM -1e300, 1e300

static const field model_fields[] = {
    {"name", F_STR, 1, NOLIM, NULL, NULL},
    {"num_layers", F_INT, 1, 1, 100000, NULL, NULL},
    {"hidden_size", F_INT, 1, 1, 1e7, NULL, NULL},
    {"ffn_hidden_size", F_INT, 0, 1, 1e7, NULL, NULL},
    {"num_attention_heads", F_INT, 1, 1, 100000, NULL, NULL},
    {"num_query_groups", F_INT, 0, 1, 100000, NULL, NULL},
    {"kv_channels", F_INT, 0, 1, 100000, NULL, NULL},
    {"num_experts", F_INT, 1, 2, 100000, NULL, NULL},
    {"moe_router_topk", F_INT, 1, 1, 100000, NULL, NULL},
    {"moe_ffn_hidden_size", F_INT, 1, 1, 1e7, NULL, NULL},
    {"moe_shared_expert_intermediate_size", F_INT, 0, 0, 1e7, "0", NULL},
    {"first_k_dense", F_INT, 0, 0, 100000, "0", NULL},
    {"multi_latent_attention", F_BOOL, 0, NOLIM, "false", NULL},
    {"q_lora_rank", F_INT, 0, 0, 1e7, "0", NULL},
    {"kv_lora_rank", F_INT, 0, 0, 1e7, "0", NULL},
    {"qk_head_dim", F_INT, 0, 0, 1e7, "0", NULL},
    {"qk_pos_emb_head_dim", F_INT, 0, 0, 1e7, "0", NULL},
    {"v_head_dim", F_INT, 0, 0, 1e7, "0", NULL},
    {"vocab_size", F_INT, 1, 1, 1e8, NULL, NULL},
    {"mtp_num_layers", F_INT, 0, 0, 100, "0", NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field hardware_fields[] = {
    {"gpu", F_STR, 1, NOLIM, NULL, "H100|H200|B200|GB200|GB300"},
    {"gpus_per_node", F_INT, 1, 1, 72, NULL, NULL},
    {"nodes", F_INT, 1, 1, 100000, NULL, NULL},
    {"nvlink_domain", F_INT, 0, 1, 100000, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field data_fields[] = {
    {"routing", F_STR, 1, NOLIM, NULL, "forced|natural"},
    {"drop_and_pad", F_BOOL, 0, NOLIM, "false", NULL},
    {"seed", F_INT, 0, 0, 2147483647.0, "1234", NULL},
    {"dataset", F_STR, 0, NOLIM, "mock", NULL},
    /* with forced routing, validation also measures both arms with natural
     * routing where the backend can run it (search/engine.c) */
    {"natural_validation", F_BOOL, 0, NOLIM, "true", NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field batch_fields[] = {
    {"seq_length", F_INT, 1, 1, 1e7, NULL, NULL},
    /* 0 loads: the start-up rules say what Megatron says of it. */
    {"global_batch_size", F_INT, 1, 0, 1e8, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field screen_fields[] = {
    {"steps", F_INT, 1, 2, 100000, NULL, NULL},
    {"warmup", F_INT, 1, 1, 100000, NULL, NULL},
    {"window", F_INT, 1, 1, 100000, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field validate_fields[] = {
    {"steps", F_INT, 1, 50, 1000000, NULL, NULL},
    {"first", F_INT, 0, 1, 1000000, "41", NULL},
    {"last", F_INT, 0, 1, 1000000, "50", NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field interval_fields[] = {
    {"eval", F_INT, 0, 0, 1e9, "0", NULL},
    {"save", F_INT, 0, 0, 1e9, "0", NULL},
    {"log", F_INT, 0, 0, 1e9, "1", NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field gate_fields[] = {
    {"alpha", F_FLOAT, 1, 1e-6, 0.5, NULL, NULL},
    {"min_effect", F_FLOAT, 1, 0, 0.99, NULL, NULL},
    {"replicates", F_INT, 1, 1, 1000, NULL, NULL},
    {"memory_headroom", F_FLOAT, 1, 0, 0.9, NULL, NULL},
    /* the analytic estimate's declared relative error: core/memory.c is held
     * within 10% of every published peak (tests/test_memory.c), and what no
     * published peak pins down (allocator fragmentation, communicator and
     * dispatcher workspaces) adds a few points more */
    {"memory_uncertainty", F_FLOAT, 0, 0, 1, "0.15", NULL},
    {"loss_tolerance", F_FLOAT, 0, 0, 10, "0.02", NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field profile_fields[] = {
    {"comm_share", F_FLOAT, 0, 0.001, 1, "0.2", NULL},
    {"host_share", F_FLOAT, 0, 0.001, 1, "0.1", NULL},
    {"host_min_gaps", F_INT, 0, 0, 1e9, "20", NULL},
    {"gap_us", F_FLOAT, 0, 0.001, 1e9, "20", NULL},
    {"classes", F_LIST, 0, NOLIM, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field budget_fields[] = {
    {"gpu_hours", F_FLOAT, 1, 1e-6, 1e12, NULL, NULL},
    {"runs", F_INT, 1, 1, 1e9, NULL, NULL},
    {"deadline_hours", F_FLOAT, 1, 1e-6, 1e6, NULL, NULL},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const field launch_fields[] = {
    {"backend", F_STR, 1, NOLIM, NULL, "sim|command|cuda"},
    {"launcher", F_STR, 0, NOLIM, "local", "local|srun"},
    {"dialect", F_STR, 0, NOLIM, "mlm", "mlm|bridge"},
    {NULL, 0, 0, 0, 0, NULL, NULL}};

static const char *const top_groups[] = {
    "version", "name", "model", "hardware", "stack", "data", "batch", "base", "space",
    "windows", "intervals", "gates", "profile", "budget", "labels", "launch", "fixed_args"};
#define N_TOP (sizeof top_groups / sizeof top_groups[0])

typedef struct loader {
    mt_contract *c;
    mt_diag *d;
    mt_kv *canon;
    int errors;
} loader;

static void err(loader *L, const config_setting_t *s, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void err(loader *L, const config_setting_t *s, const char *field, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int line = s ? (int)config_setting_source_line(s) : 0;
    if (!line && field)
        line = mt_contract_line(L->c, field);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mt_diag_add(L->d, L->c->path, line, field, "%s", msg);
    L->errors++;
}

static const char *type_name(int t)
{
    switch (t) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_GROUP: return "a group { ... }";
    case CONFIG_TYPE_ARRAY: return "an array [ ... ]";
    case CONFIG_TYPE_LIST: return "a list ( ... )";
    default: return "an unknown type";
    }
}

/* Writes a scalar setting as its canonical string; 0, or -1 when not scalar. */
/* An integer literal past int64 on s's source line, as written (libconfig
 * 1.5 reads 99999999999999999999 as -1 without a word, so only a -1 is
 * looked up): 1 and the digits in out, or 0.  Only for settings read from
 * a file. */
static int huge_literal(const config_setting_t *s, char *out, size_t n)
{
    const char *file = config_setting_source_file(s);
    unsigned line = config_setting_source_line(s), at = 0;
    char text[4096];
    FILE *f;
    int found = 0;
    if (!file || !line || !(f = fopen(file, "r")))
        return 0;
    while (!found && fgets(text, sizeof text, f))
        if (++at == line) {
            const char *p = text;
            while (*p && *p != '#') {
                size_t len;
                if (*p == '"') { /* skip a string */
                    for (p++; *p && *p != '"'; p++)
                        if (*p == '\\' && p[1])
                            p++;
                    if (*p)
                        p++;
                    continue;
                }
                len = strspn(p, "0123456789");
                if (len >= 19 && (len > 19 || strncmp(p, "9223372036854775807", 19) > 0)) {
                    int neg = p > text && p[-1] == '-';
                    snprintf(out, n, "%s%.*s", neg ? "-" : "", (int)len, p);
                    found = 1;
                    break;
                }
                p += len ? len : 1;
            }
            break;
        }
    fclose(f);
    return found;
}

static int scalar_string(const config_setting_t *s, char *buf, size_t n)
{
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
        if (config_setting_get_int(s) != -1 || !huge_literal(s, buf, n))
            snprintf(buf, n, "%d", config_setting_get_int(s));
        return 0;
    case CONFIG_TYPE_INT64:
        if (config_setting_get_int64(s) != -1 || !huge_literal(s, buf, n))
            snprintf(buf, n, "%lld", config_setting_get_int64(s));
        return 0;
    case CONFIG_TYPE_FLOAT:
        snprintf(buf, n, "%.10g", config_setting_get_float(s));
        return 0;
    case CONFIG_TYPE_BOOL:
        snprintf(buf, n, "%s", config_setting_get_bool(s) ? "true" : "false");
        return 0;
    case CONFIG_TYPE_STRING: {
        const char *v = config_setting_get_string(s);
        if (strlen(v) >= n)
            return -2;
        snprintf(buf, n, "%s", v);
        return 0;
    }
    default:
        return -1;
    }
}

static void record_line(loader *L, const char *path, const config_setting_t *s)
{
    mt_kv_setf(L->c->lines, path, "%u", config_setting_source_line(s));
}

/* Records every setting's line under its dotted path. */
static void record_lines(loader *L, const config_setting_t *s, const char *prefix)
{
    int i, n = config_setting_length(s);
    for (i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *nm = config_setting_name(e);
        char path[512];
        if (!nm)
            continue;
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", nm);
        record_line(L, path, e);
        if (config_setting_type(e) == CONFIG_TYPE_GROUP)
            record_lines(L, e, path);
    }
}

static void unknown_name(loader *L, const config_setting_t *s, const char *group,
                         const char *const *known, size_t n)
{
    const char *nm = config_setting_name(s);
    const char *close = mt_spell_closest(nm, known, n);
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", group, *group ? "." : "", nm);
    if (close)
        err(L, s, path, "unknown setting '%s'; did you mean '%s'?", nm, close);
    else
        err(L, s, path, "unknown setting '%s' in %s; see core/CONTRACT.md for the fields",
            nm, *group ? group : "the top level");
}

/* Parses a fixed group against its schema into kv and the canonical form. */
static char **string_array(loader *L, const config_setting_t *e, const char *path, size_t *n,
                           int allow_empty);

/* A list field e at path: its strings joined by newlines into kv. */
static void list_field(loader *L, const config_setting_t *e, const char *path, const field *f,
                       mt_kv *kv)
{
    char buf[1024];
    size_t nv = 0, k, off = 0;
    char **v = string_array(L, e, path, &nv, 1);
    if (!v)
        return;
    buf[0] = '\0';
    for (k = 0; k < nv; k++) {
        if (off < sizeof buf)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", k ? "\n" : "", v[k]);
        free(v[k]);
    }
    free(v);
    if (off >= sizeof buf)
        err(L, e, path, "'%s' is too long (at most %zu bytes in all)", path, sizeof buf - 1);
    else
        mt_kv_set(kv, f->name, buf);
}

/* Whether scalar e (of libconfig type t) has f's type; says why not. */
static int type_matches(loader *L, const config_setting_t *e, int t, const char *path,
                        const field *f)
{
    if (f->type == F_INT && t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) {
        err(L, e, path, "'%s' must be an integer, found %s%s", path, type_name(t),
            t == CONFIG_TYPE_STRING ? " (write it without quotes)" : "");
        return 0;
    }
    if (f->type == F_FLOAT && t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT &&
        t != CONFIG_TYPE_INT64) {
        err(L, e, path, "'%s' must be a number, found %s", path, type_name(t));
        return 0;
    }
    if (f->type == F_BOOL && t != CONFIG_TYPE_BOOL) {
        err(L, e, path, "'%s' must be true or false, found %s", path, type_name(t));
        return 0;
    }
    if (f->type == F_STR && t != CONFIG_TYPE_STRING) {
        err(L, e, path, "'%s' must be a string in double quotes, found %s", path, type_name(t));
        return 0;
    }
    return 1;
}

/* Whether numeric e (text buf) lies in f's range; says why not. */
static int in_range(loader *L, const config_setting_t *e, int t, const char *path, const field *f,
                    const char *buf)
{
    double v = f->type == F_INT ? (double)config_setting_get_int64(e)
                                : (t == CONFIG_TYPE_FLOAT ? config_setting_get_float(e)
                                                          : (double)config_setting_get_int64(e));
    if (strspn(buf + (buf[0] == '-'), "0123456789") >= 19) /* past int64 */
        v = buf[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    if (v < f->min || v > f->max) {
        err(L, e, path, "'%s' = %s is out of range; it must be between %g and %g", path, buf,
            f->min, f->max);
        return 0;
    }
    return 1;
}

/* Whether buf is one of f's choices; says why not, with the closest. */
static int is_choice(loader *L, const config_setting_t *e, const char *path, const field *f,
                     const char *buf)
{
    char list[256], *tok, *save = NULL;
    const char *opts[16];
    size_t no = 0;
    const char *close;
    snprintf(list, sizeof list, "%s", f->choices);
    for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
        if (!strcmp(tok, buf))
            return 1;
    snprintf(list, sizeof list, "%s", f->choices);
    for (tok = strtok_r(list, "|", &save); tok && no < 16; tok = strtok_r(NULL, "|", &save))
        opts[no++] = tok;
    close = mt_spell_closest(buf, opts, no);
    err(L, e, path, "'%s' = \"%s\" is not one of %s%s%s%s", path, buf, f->choices,
        close ? "; did you mean \"" : "", close ? close : "", close ? "\"?" : "");
    return 0;
}

/* Field f of group g (named gname) into kv and the canonical form, or its
 * default; an error when it is missing, mistyped or out of its range. */
static void parse_field(loader *L, const config_setting_t *g, const char *gname, const field *f,
                        mt_kv *kv)
{
    const config_setting_t *e = config_setting_get_member(g, f->name);
    char path[512], buf[1024];
    int t;
    snprintf(path, sizeof path, "%s.%s", gname, f->name);
    if (!e) {
        if (f->required)
            err(L, g, path, "missing required setting '%s'", path);
        else if (f->def) {
            mt_kv_set(kv, f->name, f->def);
            mt_kv_set(L->canon, path, f->def);
        }
        return;
    }
    t = config_setting_type(e);
    if (f->type == F_LIST) {
        list_field(L, e, path, f, kv);
        return;
    }
    if (!type_matches(L, e, t, path, f))
        return;
    if (scalar_string(e, buf, sizeof buf)) {
        err(L, e, path, "'%s' is too long (at most %zu bytes)", path, sizeof buf - 1);
        return;
    }
    if ((f->type == F_INT || f->type == F_FLOAT) && !in_range(L, e, t, path, f, buf))
        return;
    if (f->choices && !is_choice(L, e, path, f, buf))
        return;
    mt_kv_set(kv, f->name, buf);
    mt_kv_set(L->canon, path, buf);
}

static void parse_group(loader *L, const config_setting_t *g, const char *gname,
                        const field *fields, mt_kv *kv)
{
    const char *known[64];
    size_t nk = 0;
    const field *f;
    int i, n;

    for (f = fields; f->name; f++)
        known[nk++] = f->name;
    if (!g) {
        for (f = fields; f->name; f++)
            if (f->required)
                err(L, NULL, gname, "missing required setting '%s.%s'", gname, f->name);
        return;
    }
    if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
        err(L, g, gname, "'%s' must be a group { ... }, found %s", gname,
            type_name(config_setting_type(g)));
        return;
    }
    n = config_setting_length(g);
    for (i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(g, (unsigned)i);
        const char *nm = config_setting_name(e);
        for (f = fields; f->name; f++)
            if (!strcmp(f->name, nm))
                break;
        if (!f->name)
            unknown_name(L, e, gname, known, nk);
    }
    for (f = fields; f->name; f++)
        parse_field(L, g, gname, f, kv);
}

static long kv_long(const mt_kv *kv, const char *key, long def)
{
    const char *v = mt_kv_get(kv, key);
    return v ? strtol(v, NULL, 10) : def;
}

static double kv_double(const mt_kv *kv, const char *key, double def)
{
    const char *v = mt_kv_get(kv, key);
    return v ? strtod(v, NULL) : def;
}

/* base: knob = scalar | [strings] (module lists); env/launcher groups nest. */
static void parse_base(loader *L, const config_setting_t *g, const char *prefix,
                       const char *keyprefix)
{
    int i, n = config_setting_length(g);
    char path[512], key[512], buf[2048];
    for (i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(g, (unsigned)i);
        const char *nm = config_setting_name(e);
        int t = config_setting_type(e);
        snprintf(path, sizeof path, "%s.%s", prefix, nm);
        snprintf(key, sizeof key, "%s%s", keyprefix, nm);
        if (t == CONFIG_TYPE_GROUP) {
            if (!*keyprefix && (!strcmp(nm, "env") || !strcmp(nm, "launcher"))) {
                char kp[64];
                snprintf(kp, sizeof kp, "%s.", nm);
                parse_base(L, e, path, kp);
            } else {
                err(L, e, path, "'%s' is a group; only 'env' and 'launcher' may be groups here",
                    path);
            }
            continue;
        }
        if (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) {
            /* A module list: ["moe_router", "moe_preprocess"] -> "moe_router moe_preprocess". */
            int j, m = config_setting_length(e);
            size_t off = 0;
            buf[0] = '\0';
            for (j = 0; j < m; j++) {
                const config_setting_t *x = config_setting_get_elem(e, (unsigned)j);
                char item[256];
                if (config_setting_type(x) != CONFIG_TYPE_STRING ||
                    scalar_string(x, item, sizeof item)) {
                    err(L, x, path, "'%s' lists must hold short strings (module names)", path);
                    break;
                }
                off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", j ? " " : "", item);
                if (off >= sizeof buf) {
                    err(L, e, path, "'%s' is too long", path);
                    break;
                }
            }
            if (j == m) {
                mt_kv_set(L->c->base, key, buf);
                mt_kv_set(L->canon, path, buf);
            }
            continue;
        }
        if (scalar_string(e, buf, sizeof buf)) {
            err(L, e, path, "'%s' value is too long", path);
            continue;
        }
        mt_kv_set(L->c->base, key, buf);
        mt_kv_set(L->canon, path, buf);
    }
}

/* Appends v to a canonical list text ["a","b"] (quotes and backslashes escaped). */
static void canon_append(char **text, size_t *len, const char *v)
{
    size_t need = *len + 2 * strlen(v) + 8, i;
    char *grown = realloc(*text, need);
    if (!grown)
        return;
    *text = grown;
    grown[*len] = *len ? ',' : '[';
    (*len)++;
    grown[(*len)++] = '"';
    for (i = 0; v[i]; i++) {
        if (v[i] == '"' || v[i] == '\\')
            grown[(*len)++] = '\\';
        grown[(*len)++] = v[i];
    }
    grown[(*len)++] = '"';
    grown[*len] = '\0';
}

/* space: knob = [v1, v2, ...] (scalars; a module list is one string).  The
 * values are joined with '\n', which no value may contain. */
static void parse_space(loader *L, const config_setting_t *g, const char *prefix,
                        const char *keyprefix)
{
    int i, n = config_setting_length(g);
    char path[512], key[512], item[512];
    for (i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(g, (unsigned)i);
        const char *nm = config_setting_name(e);
        int t = config_setting_type(e), j, m;
        char *joined = NULL, *canon = NULL;
        size_t len = 0, clen = 0;
        snprintf(path, sizeof path, "%s.%s", prefix, nm);
        snprintf(key, sizeof key, "%s%s", keyprefix, nm);
        if (t == CONFIG_TYPE_GROUP) {
            if (!*keyprefix && (!strcmp(nm, "env") || !strcmp(nm, "launcher"))) {
                char kp[64];
                snprintf(kp, sizeof kp, "%s.", nm);
                parse_space(L, e, path, kp);
            } else {
                err(L, e, path, "'%s' is a group; only 'env' and 'launcher' may be groups here",
                    path);
            }
            continue;
        }
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
            err(L, e, path, "'%s' must list the values to search, e.g. [1, 2], found %s", path,
                type_name(t));
            continue;
        }
        m = config_setting_length(e);
        if (m == 0) {
            err(L, e, path, "'%s' is empty; list at least one value or remove it", path);
            continue;
        }
        for (j = 0; j < m; j++) {
            const config_setting_t *x = config_setting_get_elem(e, (unsigned)j);
            char *grown;
            size_t il;
            if (scalar_string(x, item, sizeof item)) {
                err(L, x, path, "'%s' values must be short scalars (numbers, strings, booleans)",
                    path);
                break;
            }
            if (strchr(item, '\n')) {
                err(L, x, path, "'%s' value may not contain a newline", path);
                break;
            }
            /* duplicates make the grid lie about its size */
            if (j) {
                char *p = joined;
                int dup = 0;
                while (p) {
                    size_t sl = strcspn(p, "\n");
                    if (sl == strlen(item) && !strncmp(p, item, sl))
                        dup = 1;
                    p = p[sl] ? p + sl + 1 : NULL;
                }
                if (dup) {
                    err(L, x, path, "'%s' lists \"%s\" twice", path, item);
                    break;
                }
            }
            il = strlen(item);
            grown = realloc(joined, len + il + 2);
            if (!grown)
                break;
            joined = grown;
            if (j) /* by index: an empty first value still counts */
                joined[len++] = '\n';
            memcpy(joined + len, item, il + 1);
            len += il;
            canon_append(&canon, &clen, item);
        }
        if (j == m && joined && canon) {
            mt_kv_set(L->c->space, key, joined);
            mt_kv_setf(L->canon, path, "%s]", canon);
        }
        free(joined);
        free(canon);
    }
}

static char **string_array(loader *L, const config_setting_t *e, const char *path, size_t *n,
                           int allow_empty)
{
    int t = config_setting_type(e), i, m;
    char **out;
    size_t off = 0;
    char joined[4096];
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
        err(L, e, path, "'%s' must be an array of strings [\"a\", \"b\"], found %s", path,
            type_name(t));
        return NULL;
    }
    m = config_setting_length(e);
    if (!m && !allow_empty) {
        err(L, e, path, "'%s' must not be empty", path);
        return NULL;
    }
    out = calloc((size_t)m + 1, sizeof *out);
    if (!out)
        return NULL;
    joined[0] = '\0';
    for (i = 0; i < m; i++) {
        const config_setting_t *x = config_setting_get_elem(e, (unsigned)i);
        if (config_setting_type(x) != CONFIG_TYPE_STRING) {
            err(L, x, path, "'%s' element %d must be a string, found %s", path, i + 1,
                type_name(config_setting_type(x)));
            goto fail;
        }
        out[i] = strdup(config_setting_get_string(x));
        if (off < sizeof joined)
            off += (size_t)snprintf(joined + off, sizeof joined - off, "%s%s", i ? "|" : "",
                                    out[i]);
    }
    *n = (size_t)m;
    mt_kv_set(L->canon, path, joined);
    return out;
fail:
    for (i = 0; i < m; i++)
        free(out[i]);
    free(out);
    return NULL;
}

/* profile.classes: "class:pattern" kernel-name rules, checked here so a typo
 * fails at load time, not in the middle of a tune. */
static void parse_classes(loader *L, const char *joined)
{
    static const char *const classes[] = {"communication", "compute", "memcpy", "other"};
    const char *p = joined;
    size_t n = 0, k;
    char **v;
    if (!joined || !*joined)
        return;
    for (n = 1; *p; p++)
        n += *p == '\n';
    if (!(v = calloc(n + 1, sizeof *v)))
        return;
    L->c->trace_classes = v;
    for (p = joined, k = 0; k < n; k++) {
        const char *nl = strchr(p, '\n'), *colon;
        size_t len = nl ? (size_t)(nl - p) : strlen(p), i;
        v[k] = strndup(p, len);
        p += len + (nl ? 1 : 0);
        if (!v[k])
            return;
        L->c->n_trace_classes = k + 1;
        colon = strchr(v[k], ':');
        for (i = 0; colon && i < 4; i++)
            if (strlen(classes[i]) == (size_t)(colon - v[k]) &&
                !strncmp(v[k], classes[i], (size_t)(colon - v[k])))
                break;
        if (!colon || i == 4)
            err(L, NULL, "profile.classes",
                "'profile.classes' element %zu \"%s\" is not class:pattern with class one of "
                "communication, compute, memcpy, other",
                k + 1, v[k]);
        else if (!colon[1] || (colon[1] == '^' && !colon[2]))
            err(L, NULL, "profile.classes", "'profile.classes' element %zu \"%s\": empty pattern",
                k + 1, v[k]);
    }
}

static void parse_labels(loader *L, const config_setting_t *e)
{
    size_t n = 0, i;
    char **v;
    if (!e) {
        err(L, NULL, "labels", "missing 'labels': list the allowed candidate labels, e.g. "
                               "labels = [\"training_equivalent\"];");
        return;
    }
    v = string_array(L, e, "labels", &n, 0);
    if (!v)
        return;
    for (i = 0; i < n; i++) {
        if (!strcmp(v[i], "training_equivalent"))
            L->c->labels |= MT_LABEL_TRAINING_EQUIVALENT;
        else if (!strcmp(v[i], "benchmark_only"))
            L->c->labels |= MT_LABEL_BENCHMARK_ONLY;
        else
            err(L, e, "labels", "unknown label \"%s\"; use training_equivalent or benchmark_only",
                v[i]);
        free(v[i]);
    }
    free(v);
}

/* launch.plugins: the plugins the contract needs, by name, each "NAME" or
 * "NAME >= VERSION".  Only names: which file provides a plugin is the
 * operator's choice (built-ins, MOETUNE_PLUGIN_PATH). */
static void parse_plugins(loader *L, const config_setting_t *e)
{
    size_t n = 0, i;
    char **v = string_array(L, e, "launch.plugins", &n, 1);
    if (!v)
        return;
    L->c->plugins = calloc(n + 1, sizeof *L->c->plugins);
    L->c->plugin_min_versions = calloc(n + 1, sizeof *L->c->plugin_min_versions);
    for (i = 0; L->c->plugins && L->c->plugin_min_versions && i < n; i++) {
        const char *s = v[i], *ge = strstr(s, ">=");
        size_t nl = ge ? (size_t)(ge - s) : strlen(s), k;
        const char *ver = ge ? ge + 2 : NULL;
        int ok = 1;
        while (nl && s[nl - 1] == ' ')
            nl--;
        for (k = 0; k < nl; k++)
            ok &= (s[k] >= 'a' && s[k] <= 'z') || (s[k] >= '0' && s[k] <= '9') || s[k] == '_' ||
                  s[k] == '-';
        while (ver && *ver == ' ')
            ver++;
        if (!nl || !ok || (ver && (!*ver || strspn(ver, "0123456789.") != strlen(ver)))) {
            err(L, config_setting_get_elem(e, (unsigned)i), "launch.plugins",
                "'launch.plugins' element %zu (\"%s\") is not \"NAME\" or \"NAME >= VERSION\" "
                "(a plugin name [a-z0-9_-]+, a version of digits and dots)",
                i + 1, s);
            continue;
        }
        L->c->plugins[L->c->n_plugins] = strndup(s, nl);
        L->c->plugin_min_versions[L->c->n_plugins] = ver ? strdup(ver) : NULL;
        L->c->n_plugins++;
    }
    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The placeholders a launch template may name: those `measure`, `tune`
 * and `bisect` fill (workers/measure.c), {rev} and {work} only in bisect. */
static const char *const template_names[] = {"args",        "sim",      "run_dir", "nodes",
                                             "gpus_per_node", "world_size", "job_name", "rev",
                                             "work",        NULL};

/* Refuses a word naming a placeholder nothing fills, as `measure` would;
 * {{ and }} are literal braces. */
static void template_placeholders(loader *L, const config_setting_t *e, const char *t)
{
    const char *p = t;
    while (*p) {
        size_t n = 0, k;
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            p += 2;
            continue;
        }
        if (p[0] == '{' && (isalpha((unsigned char)p[1]) || p[1] == '_')) {
            while (isalnum((unsigned char)p[1 + n]) || p[1 + n] == '_' || p[1 + n] == '.')
                n++;
            if (p[1 + n] == '}') {
                for (k = 0; template_names[k]; k++)
                    if (strlen(template_names[k]) == n && !strncmp(template_names[k], p + 1, n))
                        break;
                if (!template_names[k])
                    err(L, e, "launch.template",
                        "unknown placeholder '{%.*s}' in template word \"%s\"; known: {args}, "
                        "{sim}, {run_dir}, {nodes}, {gpus_per_node}, {world_size}, {job_name}, "
                        "and in `moetune bisect` {rev}, {work} (write {{ and }} for literal "
                        "braces)",
                        (int)n, p + 1, t);
                else if (!strncmp(p + 1, "rev}", 4) || !strncmp(p + 1, "work}", 5))
                    L->c->template_bisect = 1;
                p += n + 2;
                continue;
            }
        }
        p++;
    }
}

/* A container setting of launch.srun may name {rev} and {work} (filled
 * by `moetune bisect`: each revision in its own image); {{ and }} are
 * literal braces, and any other brace is refused, as the launch refuses it
 * (workers/measure.c).  0, or -1 with the error added. */
static int srun_placeholders(loader *L, const config_setting_t *x, const char *path, const char *v)
{
    const char *p = v;
    while (*p) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            p += 2;
            continue;
        }
        if (!strncmp(p, "{rev}", 5) || !strncmp(p, "{work}", 6)) {
            L->c->srun_bisect = 1;
            p += p[1] == 'r' ? 5 : 6;
            continue;
        }
        if (*p == '{' || *p == '}') {
            size_t n = strcspn(p + 1, "{}");
            err(L, x, path,
                "unknown placeholder '%.*s' in '%s' (\"%s\"); a container setting takes {rev} "
                "(the revision `moetune bisect` measures: a tag, stack version or image) and "
                "{work} (its prepared work directory), nothing else (write {{ and }} for "
                "literal braces)",
                (int)(n + (p[1 + n] == '}' ? 2 : 1)), p, path, v);
            return -1;
        }
        p++;
    }
    return 0;
}

/* launch.srun: the srun launcher's static settings (workers/launch.h).
 * Checked here for names and types, so `check` refuses what a worker
 * would refuse at its first job. */
static void parse_launch_srun(loader *L, const config_setting_t *e)
{
    static const char *const known[] = {"ntasks_per_node", "rank_env", "rank_exec",
                                        "container_image", "container_mounts",
                                        "container_workdir"};
    int i;
    if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
        err(L, e, "launch.srun",
            "'launch.srun' must be a group, e.g. { ntasks_per_node = 1; rank_env = true; }");
        return;
    }
    if (strcmp(L->c->launcher, "srun") != 0) {
        err(L, e, "launch.srun",
            "'launch.srun' settings apply to the srun launcher only; this contract's launcher "
            "is \"%s\" (set launch.launcher = \"srun\", or drop the group)",
            L->c->launcher);
        return;
    }
    for (i = 0; i < config_setting_length(e); i++) {
        const config_setting_t *x = config_setting_get_elem(e, (unsigned)i);
        const char *nm = config_setting_name(x);
        char path[256], buf[1024];
        size_t k;
        for (k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!strcmp(known[k], nm))
                break;
        if (k == sizeof known / sizeof known[0]) {
            unknown_name(L, x, "launch.srun", known, sizeof known / sizeof known[0]);
            continue;
        }
        snprintf(path, sizeof path, "launch.srun.%s", nm);
        if (!strcmp(nm, "ntasks_per_node")) {
            if (config_setting_type(x) != CONFIG_TYPE_INT || config_setting_get_int(x) < 1 ||
                config_setting_get_int(x) > 4096) {
                err(L, x, path, "'%s' must be a whole number from 1 to 4096 (tasks per node; 1 "
                                "for a torchrun template)",
                    path);
                continue;
            }
            snprintf(buf, sizeof buf, "%d", config_setting_get_int(x));
        } else if (!strcmp(nm, "rank_env")) {
            if (config_setting_type(x) != CONFIG_TYPE_BOOL) {
                err(L, x, path, "'%s' must be true or false", path);
                continue;
            }
            snprintf(buf, sizeof buf, "%s", config_setting_get_bool(x) ? "true" : "false");
        } else {
            const char *c;
            if (config_setting_type(x) != CONFIG_TYPE_STRING || scalar_string(x, buf, sizeof buf)) {
                err(L, x, path, "'%s' must be a string", path);
                continue;
            }
            for (c = buf; *c && *c != ' ' && !iscntrl((unsigned char)*c); c++)
                ;
            if (!buf[0] || *c) {
                err(L, x, path, "'%s' must be one word, without blanks (srun takes it as one "
                                "option value)",
                    path);
                continue;
            }
            if (strncmp(nm, "container_", 10) == 0 && srun_placeholders(L, x, path, buf))
                continue;
        }
        mt_kv_set(L->c->launch_srun, nm, buf);
        mt_kv_set(L->canon, path, buf);
    }
    if ((mt_kv_get(L->c->launch_srun, "container_mounts") ||
         mt_kv_get(L->c->launch_srun, "container_workdir")) &&
        !mt_kv_get(L->c->launch_srun, "container_image"))
        err(L, e, "launch.srun.container_image",
            "'launch.srun' has container_mounts or container_workdir but no container_image "
            "(the image pyxis starts the tasks in)");
}

static void parse_launch(loader *L, const config_setting_t *g)
{
    mt_kv *kv = mt_kv_new();
    const config_setting_t *e;
    static const char *const known[] = {"backend", "launcher", "dialect", "template", "env",
                                        "plugin_path", "plugins", "srun"};
    int i, n;
    if (!g || config_setting_type(g) != CONFIG_TYPE_GROUP) {
        err(L, g, "launch", "missing group 'launch' (backend, launcher, dialect, template)");
        mt_kv_destroy(&kv);
        return;
    }
    /* parse_group would flag template/env/plugin_path as unknown: check names here. */
    n = config_setting_length(g);
    for (i = 0; i < n; i++) {
        const config_setting_t *x = config_setting_get_elem(g, (unsigned)i);
        size_t k;
        for (k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!strcmp(known[k], config_setting_name(x)))
                break;
        if (k == sizeof known / sizeof known[0])
            unknown_name(L, x, "launch", known, sizeof known / sizeof known[0]);
    }
    {
        /* Schema fields only. */
        const field *f;
        for (f = launch_fields; f->name; f++) {
            char path[128], buf[256];
            e = config_setting_get_member(g, f->name);
            snprintf(path, sizeof path, "launch.%s", f->name);
            if (!e) {
                if (f->required)
                    err(L, g, path, "missing required setting '%s' (one of %s)", path, f->choices);
                else
                    mt_kv_set(kv, f->name, f->def), mt_kv_set(L->canon, path, f->def);
                continue;
            }
            if (config_setting_type(e) != CONFIG_TYPE_STRING || scalar_string(e, buf, sizeof buf)) {
                err(L, e, path, "'%s' must be a string, one of %s", path, f->choices);
                continue;
            }
            {
                char list[64], *tok, *save = NULL;
                int ok = 0;
                snprintf(list, sizeof list, "%s", f->choices);
                for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
                    ok |= !strcmp(tok, buf);
                if (!ok) {
                    err(L, e, path, "'%s' = \"%s\" is not one of %s", path, buf, f->choices);
                    continue;
                }
            }
            mt_kv_set(kv, f->name, buf);
            mt_kv_set(L->canon, path, buf);
        }
    }
    L->c->backend = strdup(mt_kv_get(kv, "backend") ? mt_kv_get(kv, "backend") : "sim");
    L->c->launcher = strdup(mt_kv_get(kv, "launcher") ? mt_kv_get(kv, "launcher") : "local");
    L->c->dialect = mt_kv_get(kv, "dialect") && !strcmp(mt_kv_get(kv, "dialect"), "bridge")
                        ? MT_DIALECT_BRIDGE
                        : MT_DIALECT_MLM;
    e = config_setting_get_member(g, "template");
    if (!e)
        err(L, g, "launch.template",
            "missing 'launch.template': the command to run, e.g. [\"{sim}\", \"{args}\"]");
    else {
        L->c->launch_template = string_array(L, e, "launch.template", &L->c->n_template, 0);
        if (L->c->launch_template) {
            size_t k;
            int has_args = 0;
            const char *glued = NULL;
            for (k = 0; k < L->c->n_template; k++) {
                const char *t = L->c->launch_template[k];
                has_args |= !strcmp(t, "{args}");
                if (strcmp(t, "{args}") && strstr(t, "{args}") && !glued)
                    glued = t;
                template_placeholders(L, e, t);
            }
            if (glued)
                err(L, e, "launch.template",
                    "'launch.template' word \"%s\" holds {args} inside it; {args} becomes "
                    "several arguments and must be a word of its own: split the string into "
                    "words, e.g. [\"{sim}\", \"{args}\"] (the template is an argv, never run "
                    "by a shell)",
                    glued);
            else if (!has_args)
                err(L, e, "launch.template",
                    "'launch.template' never says where the rendered arguments go; add \"{args}\"");
        }
    }
    e = config_setting_get_member(g, "plugin_path");
    if (e)
        L->c->plugin_path = string_array(L, e, "launch.plugin_path", &L->c->n_plugin_path, 1);
    e = config_setting_get_member(g, "plugins");
    if (e)
        parse_plugins(L, e);
    e = config_setting_get_member(g, "env");
    if (e) {
        if (config_setting_type(e) != CONFIG_TYPE_GROUP)
            err(L, e, "launch.env", "'launch.env' must be a group { NAME = \"value\"; }");
        else
            for (i = 0; i < config_setting_length(e); i++) {
                const config_setting_t *x = config_setting_get_elem(e, (unsigned)i);
                char path[256], buf[1024];
                snprintf(path, sizeof path, "launch.env.%s", config_setting_name(x));
                if (config_setting_type(x) != CONFIG_TYPE_STRING ||
                    scalar_string(x, buf, sizeof buf)) {
                    err(L, x, path, "'%s' must be a string", path);
                    continue;
                }
                mt_kv_set(L->c->launch_env, config_setting_name(x), buf);
                mt_kv_set(L->canon, path, buf);
            }
    }
    e = config_setting_get_member(g, "srun");
    if (e)
        parse_launch_srun(L, e);
    mt_kv_destroy(&kv);
}

/* fixed_args: the training program's flags that are not knobs (data,
 * tokenizer, checkpoint, architecture details), rendered verbatim after the
 * knobs.  Their canonical form is exact (each token length-prefixed), so no
 * two lists share a fingerprint. */
static void parse_fixed_args(loader *L, const config_setting_t *e)
{
    size_t i, len = 0, cap = 64;
    char *canon;
    if (!e)
        return;
    L->c->fixed_args = string_array(L, e, "fixed_args", &L->c->n_fixed_args, 1);
    if (!L->c->fixed_args)
        return;
    for (i = 0; i < L->c->n_fixed_args; i++)
        cap += strlen(L->c->fixed_args[i]) + 24;
    canon = malloc(cap);
    if (!canon)
        return;
    canon[0] = 0;
    for (i = 0; i < L->c->n_fixed_args; i++) {
        const char *t = L->c->fixed_args[i];
        int bad = 0;
        const char *p;
        for (p = t; *p; p++)
            bad |= *p == '\n' || *p == '\r';
        if (bad)
            err(L, e, "fixed_args", "fixed_args element %zu holds a line break", i + 1);
        len += (size_t)snprintf(canon + len, cap - len, "%s%zu:%s", i ? " " : "", strlen(t), t);
    }
    mt_kv_set(L->canon, "fixed_args", canon);
    free(canon);
}

/* The fixed arguments must be flags of the stack's Megatron-LM version. */
static void check_fixed_args(loader *L, const mt_mlm_dialect *dl)
{
    mt_kv *ns;
    mt_argparse_result res;
    if (!L->c->n_fixed_args)
        return;
    ns = mt_kv_new();
    if (mt_argparse(dl, L->c->fixed_args, L->c->n_fixed_args, ns, &res))
        err(L, NULL, "fixed_args", "Megatron-LM %s refuses fixed_args: %s", mt_dialect_name(dl),
            res.error);
    mt_argparse_result_clear(&res);
    mt_kv_destroy(&ns);
}

/* Fills the view plugins see as ctx->contract, and the hardware view. */
static void fill_views(loader *L)
{
    mt_contract *c = L->c;
    const mt_gpu_spec *g = mt_gpu_find(mt_kv_get(c->hardware, "gpu"));
    size_t i;
    long gpn = kv_long(c->hardware, "gpus_per_node", 1), nodes = kv_long(c->hardware, "nodes", 1);
    const char *k, *v;
    char labels[64] = "";

    if (g) {
        if (!mt_kv_get(c->hardware, "nvlink_domain"))
            mt_kv_setf(c->hardware, "nvlink_domain", "%d", g->nvlink_domain);
        mt_kv_set(c->hardware, "arch", g->arch);
        mt_kv_setf(c->hardware, "hbm_gb", "%g", g->hbm_gb);
        mt_kv_setf(c->hardware, "sms", "%d", g->sms);
        if (gpn > g->nvlink_domain)
            err(L, NULL, "hardware.gpus_per_node",
                "%s nodes hold at most %d GPUs in one NVLink domain; gpus_per_node is %ld", g->name,
                g->nvlink_domain, gpn);
    }
    mt_kv_setf(c->hardware, "world_size", "%ld", gpn * nodes);
    /* Megatron's defaults for the optional shape fields, written out so every
     * consumer sees the same model. */
    if (!mt_kv_get(c->model, "num_query_groups"))
        mt_kv_set(c->model, "num_query_groups", mt_kv_get(c->model, "num_attention_heads"));
    if (!mt_kv_get(c->model, "kv_channels"))
        mt_kv_setf(c->model, "kv_channels", "%ld",
                   kv_long(c->model, "hidden_size", 0) /
                       (kv_long(c->model, "num_attention_heads", 1) ?: 1));
    if (!mt_kv_get(c->model, "ffn_hidden_size"))
        mt_kv_setf(c->model, "ffn_hidden_size", "%ld", 4 * kv_long(c->model, "hidden_size", 0));
    mt_kv_set(L->canon, "hardware.nvlink_domain", mt_kv_get(c->hardware, "nvlink_domain"));

    mt_kv_set(c->view, "routing", c->routing == MT_ROUTING_FORCED ? "forced" : "natural");
    mt_kv_set(c->view, "drop_and_pad", c->drop_and_pad ? "true" : "false");
    if (c->labels & MT_LABEL_TRAINING_EQUIVALENT)
        strcat(labels, "training_equivalent");
    if (c->labels & MT_LABEL_BENCHMARK_ONLY)
        strcat(labels, *labels ? " benchmark_only" : "benchmark_only");
    mt_kv_set(c->view, "labels", labels);
    mt_kv_set(c->view, "dialect", c->dialect == MT_DIALECT_BRIDGE ? "bridge" : "mlm");
    /* The stack, and the Megatron-LM dialect it is judged by. */
    {
        char why[512];
        const mt_mlm_dialect *dl = mt_dialect_for_stack(c->stack, why, sizeof why);
        for (i = 0; mt_kv_entry(c->stack, i, &k, &v) == 0; i++) {
            char key[512];
            snprintf(key, sizeof key, "stack.%s", k);
            mt_kv_set(c->view, key, v);
        }
        if (!dl) {
            err(L, NULL, mt_kv_get(c->stack, "dialect") ? "stack.dialect" : "stack.megatron_lm",
                "%s", why);
        } else {
            mt_kv_set(c->view, "stack.dialect", mt_dialect_name(dl));
            mt_kv_set(c->view, "stack.megatron_core", mt_dialect_core_version(dl));
            check_fixed_args(L, dl);
        }
    }
    if (g)
        mt_kv_set(c->hardware, "compute_capability", g->compute_capability);
    for (i = 0; mt_kv_entry(c->space, i, &k, &v) == 0; i++) {
        char key[512];
        snprintf(key, sizeof key, "space.%s", k);
        mt_kv_set(c->view, key, v);
    }
}

static void semantic_checks(loader *L)
{
    mt_contract *c = L->c;
    long layers = kv_long(c->model, "num_layers", 0);
    long experts = kv_long(c->model, "num_experts", 0);
    if (kv_long(c->model, "moe_router_topk", 0) > experts)
        err(L, NULL, "model.moe_router_topk", "moe_router_topk (%ld) exceeds num_experts (%ld)",
            kv_long(c->model, "moe_router_topk", 0), experts);
    if (kv_long(c->model, "first_k_dense", 0) >= layers && layers)
        err(L, NULL, "model.first_k_dense",
            "first_k_dense (%ld) leaves no MoE layer among %ld layers",
            kv_long(c->model, "first_k_dense", 0), layers);
    if (mt_kv_get(c->model, "multi_latent_attention") &&
        !strcmp(mt_kv_get(c->model, "multi_latent_attention"), "true")) {
        static const char *const mla[] = {"kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                                          "v_head_dim"};
        size_t i;
        for (i = 0; i < 4; i++)
            if (kv_long(c->model, mla[i], 0) <= 0) {
                char f[64];
                snprintf(f, sizeof f, "model.%s", mla[i]);
                err(L, NULL, f, "multi-latent attention needs '%s' > 0", f);
            }
    }
    if (c->screen_warmup + (c->screen.last - c->screen.first + 1) > c->screen.steps)
        err(L, NULL, "windows.screen.steps",
            "screen runs %d steps but warm-up %d plus window %d need %d; raise steps",
            c->screen.steps, c->screen_warmup, c->screen.last - c->screen.first + 1,
            c->screen_warmup + c->screen.last - c->screen.first + 1);
    if (c->validate.first > c->validate.last || c->validate.last > c->validate.steps)
        err(L, NULL, "windows.validate",
            "validate window %d-%d must lie inside the %d steps of the run", c->validate.first,
            c->validate.last, c->validate.steps);
    else if (c->validate.last - c->validate.first + 1 < 10)
        err(L, NULL, "windows.validate.first",
            "validate window %d-%d holds fewer than 10 steps; use 41-50", c->validate.first,
            c->validate.last);
    if (c->routing == MT_ROUTING_FORCED && !(c->labels & MT_LABEL_BENCHMARK_ONLY))
        err(L, NULL, "labels",
            "data.routing = \"forced\" makes every result benchmark-only, but 'labels' does not "
            "allow benchmark_only; add it or use routing = \"natural\"");
}

static char *canonical_text(const mt_kv *canon)
{
    size_t i, len = 0, off = 0;
    const char *k, *v;
    char *out;
    for (i = 0; mt_kv_entry(canon, i, &k, &v) == 0; i++)
        len += strlen(k) + strlen(v) + 2;
    out = malloc(len + 1);
    if (!out)
        return NULL;
    for (i = 0; mt_kv_entry(canon, i, &k, &v) == 0; i++)
        off += (size_t)sprintf(out + off, "%s=%s\n", k, v);
    out[off] = '\0';
    return out;
}

/* The top level: no unknown names, 'version = 1' and the contract's name. */
static void parse_top(loader *L, const config_setting_t *root)
{
    const config_setting_t *e;
    int i, n = config_setting_length(root);
    for (i = 0; i < n; i++) {
        size_t k;
        e = config_setting_get_elem(root, (unsigned)i);
        for (k = 0; k < N_TOP; k++)
            if (!strcmp(top_groups[k], config_setting_name(e)))
                break;
        if (k == N_TOP)
            unknown_name(L, e, "", top_groups, N_TOP);
    }
    e = config_setting_get_member(root, "version");
    if (!e || config_setting_type(e) != CONFIG_TYPE_INT || config_setting_get_int(e) != 1)
        err(L, e, "version", "the contract must start with 'version = 1;' (the only version)");
    e = config_setting_get_member(root, "name");
    if (!e || config_setting_type(e) != CONFIG_TYPE_STRING)
        err(L, e, "name", "missing 'name = \"...\";' (a short name for reports)");
    else
        L->c->name = strdup(config_setting_get_string(e));
}

/* The stack group e: component = "version" strings. */
static void parse_stack(loader *L, const config_setting_t *e)
{
    int i;
    if (!e || config_setting_type(e) != CONFIG_TYPE_GROUP)
        err(L, e, "stack",
            "missing group 'stack' (versions: megatron_lm, transformer_engine, "
            "container, ...)");
    else
        for (i = 0; i < config_setting_length(e); i++) {
            const config_setting_t *x = config_setting_get_elem(e, (unsigned)i);
            char path[256], buf[512];
            snprintf(path, sizeof path, "stack.%s", config_setting_name(x));
            if (config_setting_type(x) != CONFIG_TYPE_STRING || scalar_string(x, buf, sizeof buf))
                err(L, x, path, "'%s' must be a version string in double quotes", path);
            else
                mt_kv_set(L->c->stack, config_setting_name(x), buf), mt_kv_set(L->canon, path, buf);
        }
}

/* The windows group e: screen { steps; warmup; window; } and validate
 * { steps; first; last; }. */
static void parse_windows(loader *L, const config_setting_t *e)
{
    mt_contract *c = L->c;
    const config_setting_t *w;
    int i;
    if (!e || config_setting_type(e) != CONFIG_TYPE_GROUP)
        err(L, e, "windows",
            "missing group 'windows' with screen { steps; warmup; window; } "
            "and validate { steps; first; last; }");
    else {
        mt_kv *kv = mt_kv_new();
        static const char *const known[] = {"screen", "validate"};
        for (i = 0; i < config_setting_length(e); i++) {
            const config_setting_t *x = config_setting_get_elem(e, (unsigned)i);
            if (strcmp(config_setting_name(x), "screen") && strcmp(config_setting_name(x), "validate"))
                unknown_name(L, x, "windows", known, 2);
        }
        w = config_setting_get_member(e, "screen");
        parse_group(L, w, "windows.screen", screen_fields, kv);
        c->screen.steps = (int)kv_long(kv, "steps", 0);
        c->screen_warmup = (int)kv_long(kv, "warmup", 0);
        c->screen.first = c->screen_warmup + 1;
        c->screen.last = c->screen_warmup + (int)kv_long(kv, "window", 0);
        mt_kv_destroy(&kv);
        kv = mt_kv_new();
        w = config_setting_get_member(e, "validate");
        parse_group(L, w, "windows.validate", validate_fields, kv);
        c->validate.steps = (int)kv_long(kv, "steps", 50);
        c->validate.first = (int)kv_long(kv, "first", 41);
        c->validate.last = (int)kv_long(kv, "last", 50);
        mt_kv_destroy(&kv);
    }
}

/* The intervals, gates, profile and budget groups into the contract. */
static void parse_settings(loader *L, const config_setting_t *root)
{
    mt_contract *c = L->c;
    mt_kv *kv = mt_kv_new();
    parse_group(L, config_setting_get_member(root, "intervals"), "intervals", interval_fields, kv);
    c->eval_interval = (int)kv_long(kv, "eval", 0);
    c->save_interval = (int)kv_long(kv, "save", 0);
    c->log_interval = (int)kv_long(kv, "log", 1);
    mt_kv_destroy(&kv);
    kv = mt_kv_new();
    parse_group(L, config_setting_get_member(root, "gates"), "gates", gate_fields, kv);
    c->alpha = kv_double(kv, "alpha", 0.05);
    c->min_effect = kv_double(kv, "min_effect", 0.02);
    c->replicates = (int)kv_long(kv, "replicates", 3);
    c->memory_headroom = kv_double(kv, "memory_headroom", 0.1);
    c->memory_uncertainty = kv_double(kv, "memory_uncertainty", 0.15);
    c->loss_tolerance = kv_double(kv, "loss_tolerance", 0.02);
    mt_kv_destroy(&kv);
    kv = mt_kv_new();
    parse_group(L, config_setting_get_member(root, "profile"), "profile", profile_fields, kv);
    c->profile.comm_share = kv_double(kv, "comm_share", 0.2);
    c->profile.host_share = kv_double(kv, "host_share", 0.1);
    c->profile.host_min_gaps = (int)kv_long(kv, "host_min_gaps", 20);
    c->profile.gap_us = kv_double(kv, "gap_us", 20);
    parse_classes(L, mt_kv_get(kv, "classes"));
    mt_kv_destroy(&kv);
    kv = mt_kv_new();
    parse_group(L, config_setting_get_member(root, "budget"), "budget", budget_fields, kv);
    c->gpu_hours = kv_double(kv, "gpu_hours", 0);
    c->max_runs = (int)kv_long(kv, "runs", 0);
    c->deadline_hours = kv_double(kv, "deadline_hours", 0);
    mt_kv_destroy(&kv);
}

/* Every group of the root in the contract's order of fields. */
static void parse_root(loader *L, const config_setting_t *root)
{
    mt_contract *c = L->c;
    const config_setting_t *e;
    parse_top(L, root);
    parse_group(L, config_setting_get_member(root, "model"), "model", model_fields, c->model);
    parse_group(L, config_setting_get_member(root, "hardware"), "hardware", hardware_fields,
                c->hardware);
    parse_stack(L, config_setting_get_member(root, "stack"));
    parse_group(L, config_setting_get_member(root, "data"), "data", data_fields, c->data);
    parse_group(L, config_setting_get_member(root, "batch"), "batch", batch_fields, c->batch);

    e = config_setting_get_member(root, "base");
    if (!e || config_setting_type(e) != CONFIG_TYPE_GROUP)
        err(L, e, "base", "missing group 'base' (the starting configuration's knobs)");
    else
        parse_base(L, e, "base", "");
    e = config_setting_get_member(root, "space");
    if (e && config_setting_type(e) != CONFIG_TYPE_GROUP)
        err(L, e, "space", "'space' must be a group of knob = [values]");
    else if (e)
        parse_space(L, e, "space", "");

    parse_windows(L, config_setting_get_member(root, "windows"));
    parse_settings(L, root);
    parse_labels(L, config_setting_get_member(root, "labels"));
    parse_launch(L, config_setting_get_member(root, "launch"));
    parse_fixed_args(L, config_setting_get_member(root, "fixed_args"));

    c->routing = mt_kv_get(c->data, "routing") && !strcmp(mt_kv_get(c->data, "routing"), "natural")
                     ? MT_ROUTING_NATURAL
                     : MT_ROUTING_FORCED;
    c->drop_and_pad =
        mt_kv_get(c->data, "drop_and_pad") && !strcmp(mt_kv_get(c->data, "drop_and_pad"), "true");
    c->natural_validation = !mt_kv_get(c->data, "natural_validation") ||
                            strcmp(mt_kv_get(c->data, "natural_validation"), "false");
}

static mt_contract *load(config_t *cfg, int rc, const char *path, mt_diag *d)
{
    loader L = {0};
    mt_contract *c = calloc(1, sizeof *c);
    const config_setting_t *root;

    if (!c)
        return NULL;
    c->path = strdup(path);
    c->model = mt_kv_new(), c->hardware = mt_kv_new(), c->stack = mt_kv_new();
    c->data = mt_kv_new(), c->batch = mt_kv_new(), c->base = mt_kv_new();
    c->space = mt_kv_new(), c->view = mt_kv_new(), c->lines = mt_kv_new();
    c->launch_env = mt_kv_new();
    c->launch_srun = mt_kv_new();
    L.c = c, L.d = d, L.canon = mt_kv_new();

    if (rc != CONFIG_TRUE) {
        mt_diag_add(d, config_error_file(cfg) ? config_error_file(cfg) : path,
                    config_error_line(cfg), NULL, "%s%s", config_error_text(cfg),
                    config_error_type(cfg) == CONFIG_ERR_FILE_IO
                        ? ": cannot read the contract file"
                        : " (libconfig syntax: name = value; groups { }, arrays [ ])");
        goto fail;
    }
    root = config_root_setting(cfg);
    record_lines(&L, root, "");
    parse_root(&L, root);
    if (!L.errors)
        semantic_checks(&L);
    if (L.errors)
        goto fail;
    fill_views(&L);
    if (L.errors)
        goto fail;
    c->canonical = canonical_text(L.canon);
    if (!c->canonical)
        goto fail;
    mt_sha256_hex(c->canonical, strlen(c->canonical), c->fingerprint);
    mt_kv_destroy(&L.canon);
    return c;
fail:
    mt_kv_destroy(&L.canon);
    mt_contract_destroy(&c);
    return NULL;
}

mt_contract *mt_contract_load(const char *path, mt_diag *d)
{
    config_t cfg;
    mt_contract *c;
    int rc;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    config_init(&cfg);
    if (slash && (size_t)(slash - path) < sizeof dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        config_set_include_dir(&cfg, dir);
    }
    rc = config_read_file(&cfg, path);
    c = load(&cfg, rc, path, d);
    config_destroy(&cfg);
    return c;
}

mt_contract *mt_contract_load_string(const char *text, const char *path, mt_diag *d)
{
    config_t cfg;
    mt_contract *c;
    int rc;
    config_init(&cfg);
    rc = config_read_string(&cfg, text);
    c = load(&cfg, rc, path, d);
    config_destroy(&cfg);
    return c;
}

int mt_contract_line(const mt_contract *c, const char *field)
{
    const char *v = c ? mt_kv_get(c->lines, field) : NULL;
    return v ? atoi(v) : 0;
}

void mt_contract_destroy(mt_contract **cp)
{
    mt_contract *c;
    size_t i;
    if (!cp || !*cp)
        return;
    c = *cp;
    free(c->path);
    free(c->name);
    mt_kv_destroy(&c->model), mt_kv_destroy(&c->hardware), mt_kv_destroy(&c->stack);
    mt_kv_destroy(&c->data), mt_kv_destroy(&c->batch), mt_kv_destroy(&c->base);
    mt_kv_destroy(&c->space), mt_kv_destroy(&c->view), mt_kv_destroy(&c->lines);
    mt_kv_destroy(&c->launch_env);
    mt_kv_destroy(&c->launch_srun);
    free(c->backend);
    free(c->launcher);
    for (i = 0; c->launch_template && i < c->n_template; i++)
        free(c->launch_template[i]);
    free(c->launch_template);
    for (i = 0; c->plugin_path && i < c->n_plugin_path; i++)
        free(c->plugin_path[i]);
    free(c->plugin_path);
    for (i = 0; c->plugins && i < c->n_plugins; i++) {
        free(c->plugins[i]);
        free(c->plugin_min_versions[i]);
    }
    free(c->plugins);
    free(c->plugin_min_versions);
    for (i = 0; c->fixed_args && i < c->n_fixed_args; i++)
        free(c->fixed_args[i]);
    free(c->fixed_args);
    for (i = 0; c->trace_classes && i < c->n_trace_classes; i++)
        free(c->trace_classes[i]);
    free(c->trace_classes);
    free(c->canonical);
    free(c);
    *cp = NULL;
}
