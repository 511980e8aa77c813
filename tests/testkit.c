#include "testkit.h"

#include "hydra.h"

#include <check.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *tk_example(const char *name)
{
    char *p = malloc(strlen(MT_SOURCE_DIR) + strlen(name) + 32);
    sprintf(p, "%s/examples/contracts/%s", MT_SOURCE_DIR, name);
    return p;
}

mt_registry *tk_registry(mt_diag *d)
{
    mt_registry *r = mt_registry_new();
    mt_registry_load_path(r, MT_BUILD_DIR "/plugins", d);
    mt_registry_finish(r, d);
    return r;
}

tk *tk_open_path(const char *path, mt_diag *d)
{
    tk *t = calloc(1, sizeof *t);
    t->diag = mt_diag_new();
    t->contract = mt_contract_load(path, d);
    if (!t->contract) {
        mt_diag_destroy(&t->diag);
        free(t);
        return NULL;
    }
    t->reg = tk_registry(t->diag);
    ck_assert_msg(mt_diag_count(t->diag) == 0, "plugin load problem: %s",
                  mt_diag_count(t->diag) ? mt_diag_at(t->diag, 0)->message : "");
    mt_config_normalize_space(t->reg, t->contract, d);
    t->cfg = mt_config_base(t->reg, t->contract, d);
    return t;
}

tk *tk_open(const char *name)
{
    char *path = tk_example(name);
    mt_diag *d = mt_diag_new();
    tk *t = tk_open_path(path, d);
    ck_assert_msg(t && t->cfg && mt_diag_count(d) == 0, "%s: %s", path,
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "cannot open");
    mt_diag_destroy(&d);
    free(path);
    return t;
}

void tk_close(tk **tp)
{
    tk *t = *tp;
    if (!t)
        return;
    mt_kv_destroy(&t->cfg);
    mt_registry_destroy(&t->reg);
    mt_contract_destroy(&t->contract);
    mt_diag_destroy(&t->diag);
    free(t);
    *tp = NULL;
}

void tk_set(tk *t, const char *assignment)
{
    char *copy = strdup(assignment), *eq = strchr(copy, '='), *p;
    mt_diag *d = mt_diag_new();
    ck_assert_msg(eq != NULL, "bad assignment %s", assignment);
    *eq = '\0';
    for (p = eq + 1; *p; p++)
        if (*p == ',')
            *p = ' ';
    ck_assert_msg(mt_config_set(t->reg, t->cfg, copy, eq + 1, NULL, 0, "test", d) == 0,
                  "set %s: %s", assignment, mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    free(copy);
}

char *tk_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    char *buf;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

char *tk_write_temp(const char *tag, const char *text)
{
    char *path = malloc(256);
    int fd;
    FILE *f;
    snprintf(path, 256, "/tmp/moetune-test-%s-XXXXXX", tag);
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

int tk_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

cJSON *tk_bundle(const char *dir)
{
    char p[4096], *text;
    cJSON *b;
    snprintf(p, sizeof p, "%s/bundle.json", dir);
    text = tk_slurp(p);
    ck_assert_msg(text != NULL, "%s: no bundle", p);
    b = cJSON_Parse(text);
    ck_assert_msg(b != NULL, "%s: not JSON", p);
    free(text);
    return b;
}

extern char **environ;

tk_proc tk_spawn(const char *program, const char *const *args)
{
    char outp[] = "/tmp/moetune-tk-out-XXXXXX", errp[] = "/tmp/moetune-tk-err-XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp), st = 0;
    posix_spawn_file_actions_t fa;
    char *argv[96];
    pid_t pid;
    size_t i;
    tk_proc r;
    ck_assert(fo >= 0 && fe >= 0);
    argv[0] = (char *)program;
    for (i = 0; args[i] && i < 94; i++)
        argv[i + 1] = (char *)args[i];
    argv[i + 1] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    ck_assert_int_eq(posix_spawn(&pid, program, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(fo), close(fe);
    ck_assert(WIFEXITED(st));
    r.status = WEXITSTATUS(st);
    r.out = tk_slurp(outp);
    r.err = tk_slurp(errp);
    unlink(outp), unlink(errp);
    ck_assert_ptr_nonnull(r.out);
    ck_assert_ptr_nonnull(r.err);
    return r;
}

void tk_proc_free(tk_proc *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* ---- Megatron-Bridge overrides against the Bridge dialect's rules ---------------------- */

/* Whether tok is one of a's words. */
static int has(const mt_strlist *a, const char *tok)
{
    size_t i;
    for (i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], tok))
            return 1;
    return 0;
}

/* The override paths of core/dialects/bridge/<table>.tsv, one per line
 * between newlines ("\npath\n"), read at test time. */
static char *bridge_paths(const char *table)
{
    char file[1024], *text, *line, *save = NULL, *paths;
    size_t o = 1;
    snprintf(file, sizeof file, "%s/core/dialects/bridge/%s.tsv", MT_SOURCE_DIR, table);
    text = tk_slurp(file);
    ck_assert_ptr_nonnull(text);
    paths = malloc(strlen(text) + 2);
    paths[0] = '\n';
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strcspn(line, "\t");
        if (!strncmp(line, "path\t", 5))
            continue;
        memcpy(paths + o, line, n);
        o += n;
        paths[o++] = '\n';
    }
    paths[o] = 0;
    free(text);
    return paths;
}

/* Contract facts the tables do not list (they hold the knobs' paths; the
 * architecture is the recipe's, rendered so that it is stated). */
static const char *const arch_paths[] = {
    "model.hidden_size", "model.ffn_hidden_size", "model.num_attention_heads",
    "model.num_query_groups", "model.kv_channels", "model.moe_router_topk",
    "model.moe_ffn_hidden_size", "model.moe_shared_expert_intermediate_size",
    "model.multi_latent_attention", "model.q_lora_rank", "model.kv_lora_rank",
    "model.qk_head_dim", "model.qk_pos_emb_head_dim", "model.v_head_dim", "model.vocab_size",
    "dataset.mock"};

/* Every override parses as Bridge's Hydra takes it, its path is in the
 * version's table, and none of the known-wrong forms is there. */
void tk_check_bridge(const mt_strlist *a, const char *table)
{
    char *paths = bridge_paths(table);
    int is_main = !strcmp(table, "main");
    size_t i, j;
    for (i = 0; i < a->n; i++) {
        const char *o = a->v[i], *eq = strchr(o, '=');
        char err[512], key[256];
        int ok = 0;
        ck_assert_msg(strncmp(o, "--", 2), "MLM flag %s in a Bridge rendering", o);
        ck_assert_msg(eq != NULL, "%s is not an override", o);
        ck_assert_msg(mt_hydra_check_bridge(o, err, sizeof err) == 0, "%s: Hydra: %s", o, err);
        snprintf(key, sizeof key, "\n%.*s\n", (int)(eq - o), o);
        ok = strstr(paths, key) != NULL;
        for (j = 0; j < sizeof arch_paths / sizeof arch_paths[0]; j++)
            ok |= (size_t)(eq - o) == strlen(arch_paths[j]) && !strncmp(o, arch_paths[j], eq - o);
        ck_assert_msg(ok, "%s: path not in core/dialects/bridge/%s.tsv", o, table);
        ck_assert_msg(strncmp(o, "mixed_precision.", 16), "%s: library recipes hold a name", o);
        ck_assert_msg(strncmp(o, "comm_overlap.", 13), "%s: comm_overlap is None there", o);
        ck_assert_msg(strncmp(o, "model.pipeline_model_parallel_layout=", 37) || eq[1] == '\'',
                      "%s: unquoted layout", o);
        if (is_main)
            ck_assert_msg(strncmp(o, "train.eval_", 11), "%s: main reads validation.*", o);
        else
            ck_assert_msg(strncmp(o, "validation.", 11), "%s: 0.2.x has no validation", o);
    }
    /* sequence length: 0.2.x asserts model == dataset; main copies dataset's */
    for (i = 0; i < a->n; i++) {
        char want[300];
        if (strncmp(a->v[i], "model.seq_length=", 17))
            continue;
        snprintf(want, sizeof want, "%s=%s", is_main ? "dataset.seq_length" : "dataset.sequence_length",
                 a->v[i] + 17);
        ck_assert_msg(has(a, want), "%s: %s without %s", table, a->v[i], want);
    }
    free(paths);
}
