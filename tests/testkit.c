#include "testkit.h"

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
