#include "import.h"

#include "dialect.h"
#include "evaluate.h"
#include "hardware.h"

#include <stdlib.h>
#include <string.h>

/* Contract model fields, by the dest Megatron stores them in. */
static const char *const model_dests[] = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "kv_channels", "num_experts", "moe_router_topk", "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size", "multi_latent_attention", "q_lora_rank",
    "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "vocab_size",
    "mtp_num_layers", NULL};

/* Flags every moetune run sets itself (core/render.c). */
static const char *const forced_dests[] = {"log_throughput", "train_iters", "eval_interval",
                                           "save_interval", NULL};

static int in(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (!strcmp(*list, s))
            return 1;
    return 0;
}

/* libconfig string literal. */
static void put_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if (*s == '\n')
            fputs("\\n", out);
        else if (*s == '\t')
            fputs("\\t", out);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

/* "--moe-router-topk" -> "moe_router_topk". */
static void knob_of_flag(const char *flag, char *buf, size_t n)
{
    size_t i;
    while (*flag == '-')
        flag++;
    for (i = 0; flag[i] && i + 1 < n; i++)
        buf[i] = flag[i] == '-' ? '_' : flag[i];
    buf[i] = 0;
}

/* The plugin knob a flag occurrence sets, or NULL: by the flag's own name,
 * then (for --no-x style aliases) by its dest. */
static const mt_knob_v1 *knob_for(const mt_registry *r, const mt_flag *f, char *name, size_t n)
{
    const mt_knob_v1 *k;
    knob_of_flag(f->flag, name, n);
    k = mt_registry_is_core(name) ? NULL : mt_registry_knob(r, name, NULL);
    if (k && k->kind == MT_KNOB_FLAG)
        return k;
    snprintf(name, n, "%s", f->dest);
    k = mt_registry_is_core(name) ? NULL : mt_registry_knob(r, name, NULL);
    return k && k->kind == MT_KNOB_FLAG ? k : NULL;
}

/* The knob's value from the namespace: what the parsed command line means
 * for it. */
static const char *knob_value(const mt_knob_v1 *k, const mt_flag *f, const mt_kv *ns,
                              char *buf, size_t n)
{
    const char *v = mt_kv_get(ns, f->dest);
    if (!v)
        return k->type == MT_TYPE_ENUM && k->values && in(k->values, "none") ? "none" : NULL;
    snprintf(buf, n, "%s", v);
    return buf;
}

typedef struct importer {
    const mt_registry *r;
    const mt_mlm_dialect *dl;
    mt_kv *ns;
    mt_kv *model, *batch, *base, *data, *env_knobs, *launch_env, *intervals;
    char **fixed;
    size_t n_fixed;
    char *dropped; /* flags moetune sets itself, as given */
    size_t dropped_len;
    char *notes;   /* why a knob's flag was kept verbatim */
    size_t notes_len;
} importer;

static void keep_fixed(importer *im, char *const *argv, const mt_argtok *t)
{
    size_t j;
    char **nf = realloc(im->fixed, (im->n_fixed + t->count) * sizeof *nf);
    if (!nf)
        return;
    im->fixed = nf;
    for (j = 0; j < t->count; j++)
        im->fixed[im->n_fixed++] = strdup(argv[t->first + j]);
}

static void append(char **buf, size_t *len, const char *s)
{
    size_t n = strlen(s);
    char *nb = realloc(*buf, *len + n + 2);
    if (!nb)
        return;
    *buf = nb;
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[(*len)++] = '\n';
    (*buf)[*len] = 0;
}

/* "([0]*3+[1]*58)" over num_layers 61 is first_k_dense 3. */
static long first_k_dense(const char *freq, long layers)
{
    long k, m;
    char tail;
    if (sscanf(freq, "([0]*%ld+[1]*%ld)%c", &k, &m, &tail) == 2 && k > 0 && m > 0 &&
        k + m == layers)
        return k;
    return -1;
}

static void place(importer *im, char *const *argv, const mt_argtok *t)
{
    const mt_flag *f = t->flag;
    const char *dest = f->dest, *v = mt_kv_get(im->ns, dest);
    char name[256], val[2048], canon[2048], why[512];
    const mt_knob_v1 *k;
    if (in(forced_dests, dest)) {
        size_t j;
        char tok[1024] = "";
        for (j = 0; j < t->count; j++)
            snprintf(tok + strlen(tok), sizeof tok - strlen(tok), "%s%s", j ? " " : "",
                     argv[t->first + j]);
        append(&im->dropped, &im->dropped_len, tok);
        return;
    }
    if (in(model_dests, dest)) {
        if (!strcmp(dest, "num_query_groups") &&
            strcmp(mt_kv_get(im->ns, "group_query_attention") ?: "false", "true"))
            return; /* read only with --group-query-attention */
        if (v)
            mt_kv_set(im->model, dest, v);
        return;
    }
    if (!strcmp(dest, "group_query_attention"))
        return; /* the core renders it from num_query_groups */
    if (!strcmp(dest, "seq_length") || !strcmp(dest, "global_batch_size")) {
        if (v)
            mt_kv_set(im->batch, dest, v);
        return;
    }
    if (!strcmp(dest, "log_interval") && v) {
        mt_kv_set(im->intervals, "log", v);
        return;
    }
    if (!strcmp(dest, "seed") && v) {
        mt_kv_set(im->data, "seed", v);
        return;
    }
    if (!strcmp(dest, "mock_data") && v && !strcmp(v, "true")) {
        mt_kv_set(im->data, "dataset", "mock");
        return;
    }
    if (!strcmp(dest, "moe_layer_freq") && v) {
        long layers = strtol(mt_kv_get(im->ns, "num_layers") ?: "0", NULL, 10);
        long kd = first_k_dense(v, layers);
        if (kd > 0) {
            mt_kv_setf(im->model, "first_k_dense", "%ld", kd);
            return;
        }
        if (!strcmp(v, "1"))
            return;
    }
    k = knob_for(im->r, f, name, sizeof name);
    if (k) {
        const char *kv = knob_value(k, f, im->ns, val, sizeof val);
        if (kv && mt_registry_normalize(im->r, name, kv, canon, sizeof canon, why, sizeof why) == 0) {
            mt_kv_set(im->base, name, canon);
            return;
        }
        {
            char note[1024];
            snprintf(note, sizeof note, "%s kept verbatim: %s", f->flag,
                     kv ? why : "no value the knob can hold");
            append(&im->notes, &im->notes_len, note);
        }
    }
    keep_fixed(im, argv, t);
}

/* A knob whose flag the command line does not give has upstream's
 * default there, which need not be the knob's own default (a plugin may
 * default bf16 to true; upstream's --bf16 defaults to false): write it. */
static void knobs_at_upstream_defaults(importer *im)
{
    size_t n = 0, i;
    const char **names = mt_registry_knob_names(im->r, &n);
    for (i = 0; names && i < n; i++) {
        const mt_knob_v1 *k = mt_registry_knob(im->r, names[i], NULL);
        const mt_flag *f;
        const char *v;
        char flag[256], canon[2048], why[256];
        size_t j;
        if (!k || k->kind != MT_KNOB_FLAG || mt_registry_is_core(names[i]) ||
            mt_kv_get(im->base, names[i]))
            continue;
        snprintf(flag, sizeof flag, "--%s", names[i]);
        for (j = 2; flag[j]; j++)
            if (flag[j] == '_')
                flag[j] = '-';
        f = mt_dialect_flag(im->dl, flag);
        if (!f || (k->type != MT_TYPE_BOOL && k->type != MT_TYPE_INT && k->type != MT_TYPE_ENUM))
            continue;
        v = mt_kv_get(im->ns, f->dest);
        if (!v || !strcmp(v, k->default_value ? k->default_value : ""))
            continue;
        if (mt_registry_normalize(im->r, names[i], v, canon, sizeof canon, why, sizeof why) == 0 &&
            strcmp(canon, k->default_value ? k->default_value : ""))
            mt_kv_set(im->base, names[i], canon);
    }
    free(names);
}

static void put_group(FILE *out, const char *name, const mt_kv *kv, int quote_all)
{
    size_t i;
    const char *k, *v;
    fprintf(out, "%s = {\n", name);
    for (i = 0; mt_kv_entry(kv, i, &k, &v) == 0; i++) {
        char *end;
        fprintf(out, "  %s = ", k);
        if (!quote_all && (!strcmp(v, "true") || !strcmp(v, "false")))
            fputs(v, out);
        else if (!quote_all && *v && (strtol(v, &end, 10), !*end) && strlen(v) < 10)
            fputs(v, out);
        else
            put_str(out, v);
        fputs(";\n", out);
    }
    fputs("};\n\n", out);
}

/* The base group: knobs, then env = { ... } for environment knobs. */
static void put_base(FILE *out, const mt_registry *r, const mt_kv *base, const mt_kv *env_knobs)
{
    size_t i;
    const char *k, *v;
    fputs("base = {\n", out);
    for (i = 0; mt_kv_entry(base, i, &k, &v) == 0; i++) {
        const mt_knob_v1 *kd = mt_registry_knob(r, k, NULL);
        fprintf(out, "  %s = ", k);
        if (kd && (kd->type == MT_TYPE_BOOL || kd->type == MT_TYPE_INT))
            fputs(v, out);
        else
            put_str(out, v);
        fputs(";\n", out);
    }
    if (mt_kv_count(env_knobs)) {
        fputs("  env = {\n", out);
        for (i = 0; mt_kv_entry(env_knobs, i, &k, &v) == 0; i++) {
            fprintf(out, "    %s = ", k);
            put_str(out, v);
            fputs(";\n", out);
        }
        fputs("  };\n", out);
    }
    fputs("};\n\n", out);
}

static void put_comment_lines(FILE *out, const char *head, const char *lines)
{
    const char *p = lines;
    if (!lines || !*lines)
        return;
    fprintf(out, "# %s\n", head);
    while (*p) {
        size_t n = strcspn(p, "\n");
        fprintf(out, "#   %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static int write_contract(importer *im, const mt_import_opts *o, FILE *out)
{
    size_t i;
    const char *k, *v;
    const char *name = o->name;
    char auto_name[128];
    if (!name) {
        snprintf(auto_name, sizeof auto_name, "imported-%s-%sx%s", mt_dialect_name(im->dl),
                 mt_kv_get(o->hardware, "gpu"), mt_kv_get(o->hardware, "world_size"));
        name = auto_name;
    }
    fputs("# moetune measurement contract, written by `moetune import` from a Megatron-LM\n"
          "# command line.  Reference: core/CONTRACT.md.  Check it with `moetune check`.\n",
          out);
    put_comment_lines(out, "moetune sets these itself on every run, so they were left out:",
                      im->dropped);
    put_comment_lines(out, "flags of knobs whose value the knob cannot hold:", im->notes);
    fputs("version = 1;\nname = ", out);
    put_str(out, name);
    fputs(";\n\n", out);
    mt_kv_set(im->model, "name", name);
    put_group(out, "model", im->model, 0);
    fputs("hardware = {\n", out);
    fprintf(out, "  gpu = ");
    put_str(out, mt_kv_get(o->hardware, "gpu"));
    fprintf(out, ";\n  gpus_per_node = %s;\n  nodes = %s;\n};\n\n",
            mt_kv_get(o->hardware, "gpus_per_node"), mt_kv_get(o->hardware, "nodes"));
    put_group(out, "stack", o->stack, 1);
    put_group(out, "data", im->data, 0);
    put_group(out, "batch", im->batch, 0);
    put_base(out, im->r, im->base, im->env_knobs);
    fputs("space = {\n};\n\n", out);
    put_group(out, "intervals", im->intervals, 0);
    fputs(""
          "windows = {\n  screen = { steps = 20; warmup = 10; window = 10; };\n"
          "  validate = { steps = 50; first = 41; last = 50; };\n};\n\n"
          "gates = {\n  alpha = 0.05;\n  min_effect = 0.02;\n  replicates = 3;\n"
          "  memory_headroom = 0.10;\n  loss_tolerance = 0.02;\n};\n\n"
          "budget = {\n  gpu_hours = 100.0;\n  runs = 200;\n  deadline_hours = 10.0;\n};\n\n",
          out);
    fprintf(out, "labels = [\"training_equivalent\"%s];\n\n",
            strcmp(mt_kv_get(im->data, "routing"), "forced") ? "" : ", \"benchmark_only\"");
    fputs("launch = {\n", out);
    if (o->backend && !strcmp(o->backend, "command"))
        fputs("  backend = \"command\";\n  launcher = \"local\";\n", out);
    else
        fputs("  backend = \"sim\";\n  launcher = \"local\";\n", out);
    fprintf(out, "  dialect = \"%s\";\n",
            o->dialect && !strcmp(o->dialect, "bridge") ? "bridge" : "mlm");
    if (o->backend && !strcmp(o->backend, "command"))
        fputs("  template = [\"python\", \"pretrain_gpt.py\", \"{args}\"];\n", out);
    else
        fputs("  template = [\"{sim}\", \"{args}\"];\n", out);
    if (mt_kv_count(im->launch_env)) {
        fputs("  env = {\n", out);
        for (i = 0; mt_kv_entry(im->launch_env, i, &k, &v) == 0; i++) {
            fprintf(out, "    %s = ", k);
            put_str(out, v);
            fputs(";\n", out);
        }
        fputs("  };\n", out);
    }
    fputs("};\n", out);
    if (im->n_fixed) {
        fputs("\n# Flags that are not knobs, rendered verbatim after the knobs.\nfixed_args = [", out);
        for (i = 0; i < im->n_fixed; i++) {
            fputs(i ? (i % 4 ? ", " : ",\n  ") : "\n  ", out);
            put_str(out, im->fixed[i]);
        }
        fputs("\n];\n", out);
    }
    return ferror(out) ? 1 : 0;
}

static int hardware_ok(const mt_import_opts *o, mt_diag *d)
{
    const char *gpu = mt_kv_get(o->hardware, "gpu");
    long gpn = strtol(mt_kv_get(o->hardware, "gpus_per_node") ?: "0", NULL, 10);
    long nodes = strtol(mt_kv_get(o->hardware, "nodes") ?: "0", NULL, 10);
    if (!gpu || !mt_gpu_find(gpu) || gpn < 1 || nodes < 1) {
        mt_diag_add(d, NULL, 0, "--hardware",
                    "give the hardware as --hardware gpu=G,gpus_per_node=P,nodes=N "
                    "(G one of H100 H200 B200 GB200 GB300)");
        return 0;
    }
    mt_kv_setf(o->hardware, "world_size", "%ld", gpn * nodes);
    return 1;
}

int mt_import(const mt_registry *r, const mt_import_opts *o, char *const *argv, size_t argc,
              FILE *out, mt_diag *d)
{
    importer im;
    mt_argparse_result res = {0};
    mt_kv *extra = NULL;
    char why[512];
    size_t i;
    int rc = 2;
    const char *k, *v;
    memset(&im, 0, sizeof im);
    im.r = r;
    im.dl = mt_dialect_for_stack(o->stack, why, sizeof why);
    if (!im.dl) {
        mt_diag_add(d, NULL, 0, "--stack", "%s", why);
        return 2;
    }
    if (!hardware_ok(o, d))
        return 2;
    im.ns = mt_kv_new();
    im.model = mt_kv_new(), im.batch = mt_kv_new(), im.base = mt_kv_new();
    im.data = mt_kv_new(), im.env_knobs = mt_kv_new(), im.launch_env = mt_kv_new();
    im.intervals = mt_kv_new();
    mt_kv_set(im.intervals, "eval", "0");
    mt_kv_set(im.intervals, "save", "0");
    extra = mt_extension_choices(r);
    if (mt_argparse_ext(im.dl, argv, argc, im.ns, &res, extra)) {
        mt_diag_add(d, NULL, 0, "argv", "Megatron-LM %s's argument parser refuses the command "
                    "line: %s", mt_dialect_name(im.dl), res.error);
        goto done;
    }
    if (!mt_kv_get(im.ns, "num_experts")) {
        mt_diag_add(d, NULL, 0, "argv", "the command line sets no --num-experts: moetune tunes "
                    "Mixture-of-Experts models");
        goto done;
    }
    mt_kv_set(im.data, "routing",
              !strcmp(mt_kv_get(im.ns, "moe_router_force_load_balancing") ?: "false", "true")
                  ? "forced" : "natural");
    for (i = 0; i < res.n_toks; i++)
        if (res.toks[i].flag)
            place(&im, argv, &res.toks[i]);
    knobs_at_upstream_defaults(&im);
    /* Megatron's own defaults for shape fields the command line left out and
     * the contract needs. */
    if (!mt_kv_get(im.model, "ffn_hidden_size")) {
        long h = strtol(mt_kv_get(im.ns, "hidden_size") ?: "0", NULL, 10);
        int swiglu = !strcmp(mt_kv_get(im.ns, "swiglu") ?: "false", "true");
        mt_kv_setf(im.model, "ffn_hidden_size", "%ld", swiglu ? (4 * h * 2 / 3 / 64) * 64 : 4 * h);
    }
    if (!mt_kv_get(im.model, "moe_ffn_hidden_size"))
        mt_kv_set(im.model, "moe_ffn_hidden_size", mt_kv_get(im.model, "ffn_hidden_size"));
    if (!mt_kv_get(im.batch, "global_batch_size")) {
        long world = strtol(mt_kv_get(o->hardware, "world_size"), NULL, 10);
        long tp = strtol(mt_kv_get(im.ns, "tensor_model_parallel_size") ?: "1", NULL, 10);
        long pp = strtol(mt_kv_get(im.ns, "pipeline_model_parallel_size") ?: "1", NULL, 10);
        long cp = strtol(mt_kv_get(im.ns, "context_parallel_size") ?: "1", NULL, 10);
        long mbs = strtol(mt_kv_get(im.ns, "micro_batch_size") ?: "1", NULL, 10);
        long mp = tp * pp * cp;
        mt_kv_setf(im.batch, "global_batch_size", "%ld", mp > 0 ? mbs * (world / mp) : mbs);
    }
    for (i = 0; mt_kv_entry(o->env, i, &k, &v) == 0; i++) {
        char knob[300];
        snprintf(knob, sizeof knob, "env.%s", k);
        if (mt_registry_knob(r, knob, NULL))
            mt_kv_set(im.env_knobs, k, v);
        else
            mt_kv_set(im.launch_env, k, v);
    }
    {
        static const char *const need[] = {"num_layers", "hidden_size", "num_attention_heads",
                                           "moe_router_topk", "vocab_size", NULL};
        const char *const *n;
        int missing = 0;
        for (n = need; *n; n++)
            if (!mt_kv_get(im.model, *n)) {
                mt_diag_add(d, NULL, 0, "argv", "the command line does not give --%s, which the "
                            "contract's model needs", *n);
                missing = 1;
            }
        if (!mt_kv_get(im.batch, "seq_length")) {
            mt_diag_add(d, NULL, 0, "argv", "the command line does not give --seq-length");
            missing = 1;
        }
        if (missing)
            goto done;
    }
    rc = write_contract(&im, o, out);
done:
    mt_argparse_result_clear(&res);
    mt_kv_destroy(&extra);
    for (i = 0; i < im.n_fixed; i++)
        free(im.fixed[i]);
    free(im.fixed);
    free(im.dropped);
    free(im.notes);
    mt_kv_destroy(&im.ns);
    mt_kv_destroy(&im.model), mt_kv_destroy(&im.batch), mt_kv_destroy(&im.base);
    mt_kv_destroy(&im.data), mt_kv_destroy(&im.env_knobs), mt_kv_destroy(&im.launch_env);
    mt_kv_destroy(&im.intervals);
    return rc;
}
