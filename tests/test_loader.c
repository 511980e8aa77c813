/*
 * test_loader.c - every plugin loader error, each naming the file: not a
 * shared object, missing symbol, ABI mismatch, descriptor too small, table
 * entries of another ABI's size, a file
 * writable by other users, two plugins owning one knob, a plugin claiming a
 * core knob, an extension of a knob nobody owns, init failure (that plugin
 * disabled, the rest go on), a name loaded twice; the permission check
 * looks at the very file dlopen opens (a bare name is not searched on
 * LD_LIBRARY_PATH, a link is resolved) and at every directory above it.
 * A real v1 plugin loads through the newest-first symbol table and the v1
 * adapter (core/plugin_abi.h).
 */
#include "testkit.h"

#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIX(name) MT_BUILD_DIR "/tests/fixtures/" name ".so"

/* Loads path beside the built-ins; returns the diag (caller frees). */
static mt_diag *load_with_builtins(const char *path, mt_registry **out)
{
    mt_diag *d = mt_diag_new();
    mt_registry *r = mt_registry_new();
    mt_registry_load_path(r, MT_BUILD_DIR "/plugins", d);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_registry_load_file(r, path, d);
    mt_registry_finish(r, d);
    if (out)
        *out = r;
    else
        mt_registry_destroy(&r);
    return d;
}

static void expect(mt_diag *d, const char *file, const char *needle)
{
    size_t i;
    int hit = 0;
    for (i = 0; i < mt_diag_count(d); i++) {
        const mt_diag_item *it = mt_diag_at(d, i);
        if (strstr(it->message, needle)) {
            ck_assert_msg(it->file && strstr(it->file, file), "error does not name %s: %s", file,
                          it->file ? it->file : "(none)");
            hit = 1;
        }
    }
    ck_assert_msg(hit, "no error containing \"%s\" (got %zu: %s)", needle, mt_diag_count(d),
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
}

START_TEST(builtins_load_clean)
{
    mt_registry *r;
    mt_diag *d = mt_diag_new();
    size_t i;
    static const char *const names[] = {"cudagraph", "dispatcher", "folding", "host",
                                        "overlap",   "precision",  "recompute"};
    r = tk_registry(d);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    ck_assert_uint_eq(mt_registry_count(r), 7);
    for (i = 0; i < 7; i++) {
        const mt_plugin *p = mt_registry_at(r, i);
        ck_assert_str_eq(p->desc->name, names[i]); /* sorted by name */
        ck_assert(p->enabled);
        ck_assert_uint_gt(p->desc->n_knobs, 0);
        ck_assert_uint_gt(p->desc->n_variables, 0);
    }
    ck_assert_ptr_nonnull(mt_registry_knob(r, "moe_token_dispatcher_type", NULL));
    ck_assert_ptr_nonnull(mt_registry_knob(r, "env.CUDA_DEVICE_MAX_CONNECTIONS", NULL));
    ck_assert_ptr_nonnull(mt_registry_knob(r, "num_layers", NULL));
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(not_a_shared_object)
{
    char *path = tk_write_temp("notso", "this is not an ELF file\n");
    mt_diag *d;
    chmod(path, 0644);
    d = load_with_builtins(path, NULL);
    expect(d, path, "not a shared object: no ELF header");
    mt_diag_destroy(&d);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(missing_symbol)
{
    mt_diag *d = load_with_builtins(FIX("no_symbol"), NULL);
    expect(d, "no_symbol.so", "missing symbol moetune_plugin_v1");
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(abi_mismatch)
{
    mt_diag *d = load_with_builtins(FIX("bad_abi"), NULL);
    expect(d, "bad_abi.so", "ABI version mismatch: expected 1, found 99");
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(descriptor_too_small)
{
    mt_diag *d = load_with_builtins(FIX("small"), NULL);
    expect(d, "small.so", "descriptor too small: struct_size 16");
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(table_entry_size)
{
    mt_diag *d = load_with_builtins(FIX("bad_table"), NULL);
    expect(d, "bad_table.so", "wrong struct_size for ABI version 1");
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(writable_by_others)
{
    char path[] = "/tmp/moetune-test-ww-XXXXXX";
    char *src = tk_slurp(FIX("init_fail"));
    int fd = mkstemp(path);
    FILE *f;
    struct stat st;
    mt_diag *d;
    ck_assert_ptr_nonnull(src);
    stat(FIX("init_fail"), &st);
    f = fdopen(fd, "wb");
    fwrite(src, 1, (size_t)st.st_size, f);
    fclose(f);
    chmod(path, 0666);
    d = load_with_builtins(path, NULL);
    expect(d, path, "writable by other users (mode 0666)");
    mt_diag_destroy(&d);
    unlink(path);
    free(src);
}
END_TEST

START_TEST(two_owners)
{
    mt_registry *r;
    mt_diag *d = load_with_builtins(FIX("dup_knob"), &r);
    expect(d, "dup_knob.so", "two plugins own knob moe_token_dispatcher_type: dispatcher");
    ck_assert_ptr_null(mt_registry_find(r, "dupknob"));
    ck_assert_ptr_nonnull(mt_registry_find(r, "dispatcher"));
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(claims_core_knob)
{
    mt_diag *d = load_with_builtins(FIX("core_knob"), NULL);
    expect(d, "core_knob.so", "claims knob num_layers, which the core owns");
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(extension_of_unowned_knob)
{
    mt_registry *r;
    mt_diag *d = load_with_builtins(FIX("ext_orphan"), &r);
    const mt_plugin *p;
    expect(d, "ext_orphan.so", "extends knob no_such_knob, which no plugin owns");
    p = mt_registry_find(r, "fixture-ext_orphan");
    ck_assert_ptr_nonnull(p);
    ck_assert(!p->enabled);
    /* its own knob is gone with it */
    ck_assert_ptr_null(mt_registry_knob(r, "fixture_knob_ext_orphan", NULL));
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(init_failure_disables_only_that_plugin)
{
    mt_registry *r;
    mt_diag *d = load_with_builtins(FIX("init_fail"), &r);
    size_t i, enabled = 0;
    expect(d, "init_fail.so", "init failed: license server unreachable");
    for (i = 0; i < mt_registry_count(r); i++)
        enabled += mt_registry_at(r, i)->enabled;
    ck_assert_uint_eq(enabled, 7);
    ck_assert(!mt_registry_find(r, "fixture-init_fail")->enabled);
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(loaded_twice)
{
    mt_diag *d = mt_diag_new();
    mt_registry *r = mt_registry_new();
    ck_assert_int_eq(mt_registry_load_file(r, MT_BUILD_DIR "/plugins/host.so", d), 0);
    ck_assert_int_lt(mt_registry_load_file(r, MT_BUILD_DIR "/plugins/host.so", d), 0);
    expect(d, "host.so", "plugin host is already loaded from");
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

START_TEST(missing_file)
{
    mt_diag *d = mt_diag_new();
    mt_registry *r = mt_registry_new();
    ck_assert_int_ne(mt_registry_load_path(r, "/nonexistent/plugins", d), 0);
    expect(d, "/nonexistent/plugins", "does not exist");
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
}
END_TEST

/* Copies the file at src to dst with the given mode. */
static void copy_file(const char *src, const char *dst, mode_t mode)
{
    char *data = tk_slurp(src);
    struct stat st;
    FILE *f;
    ck_assert_ptr_nonnull(data);
    ck_assert_int_eq(stat(src, &st), 0);
    f = fopen(dst, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    ck_assert_int_eq(chmod(dst, mode), 0);
    free(data);
}

/* `moetune plugins` in cwd with MOETUNE_PLUGIN_PATH=plugin_path and
 * LD_LIBRARY_PATH=ld_path; the marker plugin's constructor writes the file it
 * was opened from to marker.  Returns the exit status. */
static int plugins_in(const char *cwd, const char *plugin_path, const char *ld_path,
                      const char *marker)
{
    pid_t pid = fork();
    int st;
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        if (chdir(cwd) != 0)
            _exit(127);
        setenv("MOETUNE_PLUGIN_PATH", plugin_path, 1);
        setenv("LD_LIBRARY_PATH", ld_path, 1);
        setenv("MT_FIXTURE_MARKER", marker, 1);
        execl(MT_MOETUNE_BIN, "moetune", "plugins", (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The bypass: a bare name whose ./NAME passes the check while dlopen would
 * search LD_LIBRARY_PATH and open a world-writable copy in a world-writable
 * directory.  The loader resolves ./NAME itself and opens only that file. */
START_TEST(bare_name_is_not_searched)
{
    char safe[] = "/tmp/moetune-test-safe-XXXXXX", evil[] = "/tmp/moetune-test-evil-XXXXXX";
    char sp[256], ep[256], marker[256], *got, want[300];
    ck_assert_ptr_nonnull(mkdtemp(safe));
    ck_assert_ptr_nonnull(mkdtemp(evil));
    ck_assert_int_eq(chmod(evil, 0777), 0);
    snprintf(sp, sizeof sp, "%s/marker.so", safe);
    snprintf(ep, sizeof ep, "%s/marker.so", evil);
    snprintf(marker, sizeof marker, "%s/ran", safe);
    copy_file(FIX("marker"), sp, 0644);
    copy_file(FIX("marker"), ep, 0666);
    plugins_in(safe, "marker.so", evil, marker);
    got = tk_slurp(marker);
    ck_assert_msg(got != NULL, "the plugin in the working directory was not loaded");
    snprintf(want, sizeof want, "%s\n", sp);
    ck_assert_str_eq(got, want); /* the checked file, never the one on LD_LIBRARY_PATH */
    free(got);
    unlink(marker), unlink(sp), unlink(ep);
    rmdir(safe), rmdir(evil);
}
END_TEST

/* A 0644 plugin in a directory anyone may write (no sticky bit) is refused
 * before it is opened; a link to it from a safe directory is resolved and
 * refused the same way; a sticky world-writable directory (as /tmp) is safe. */
START_TEST(directories_above_are_checked)
{
    char dir[] = "/tmp/moetune-test-dir-XXXXXX", safe[] = "/tmp/moetune-test-link-XXXXXX";
    char inner[256], so[300], link[300], marker[300], msg[600];
    mt_diag *d;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_nonnull(mkdtemp(safe));
    snprintf(inner, sizeof inner, "%s/open", dir);
    ck_assert_int_eq(mkdir(inner, 0755), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    snprintf(so, sizeof so, "%s/marker.so", inner);
    snprintf(link, sizeof link, "%s/marker.so", safe);
    snprintf(marker, sizeof marker, "%s/ran", safe);
    copy_file(FIX("marker"), so, 0644);
    ck_assert_int_eq(symlink(so, link), 0);
    setenv("MT_FIXTURE_MARKER", marker, 1);

    d = load_with_builtins(so, NULL);
    snprintf(msg, sizeof msg, "the directory above the plugin %s is writable by other users "
             "(mode 0777) and has no sticky bit", dir);
    expect(d, so, msg);
    mt_diag_destroy(&d);
    d = load_with_builtins(link, NULL);
    expect(d, link, msg);
    mt_diag_destroy(&d);
    ck_assert_int_ne(access(marker, F_OK), 0); /* nothing of it ran */

    ck_assert_int_eq(chmod(dir, 01777), 0);
    d = load_with_builtins(link, NULL);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
    ck_assert_int_eq(access(marker, F_OK), 0);
    unsetenv("MT_FIXTURE_MARKER");
    unlink(marker), unlink(link), unlink(so);
    rmdir(inner), rmdir(dir), rmdir(safe);
}
END_TEST

/* A real v1 plugin goes through the newest-first symbol lookup and the v1
 * adapter: it is seen as v1, its exported descriptor is the internal form
 * unchanged (v1 is the newest), and it works: its knobs are known and it
 * renders the contract's config. */
START_TEST(v1_plugin_loads_through_the_v1_adapter)
{
    tk *t = tk_open("qwen3-30b-a3b-h100x16.cfg");
    mt_diag *d = mt_diag_new();
    mt_registry *r = mt_registry_new();
    const mt_plugin *p;
    mt_rendered out;
    mt_ctx_v1 ctx;
    char canon[64], why[256];
    size_t i;
    int hit = 0;
    ck_assert_int_eq(mt_registry_load_file(r, MT_BUILD_DIR "/plugins/dispatcher.so", d), 0);
    ck_assert_int_eq(mt_registry_finish(r, d), 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    p = mt_registry_find(r, "dispatcher");
    ck_assert_ptr_nonnull(p);
    ck_assert(p->enabled);
    ck_assert_uint_eq(p->abi_version, 1);
    ck_assert_ptr_eq(p->desc, dlsym(p->handle, MT_PLUGIN_SYMBOL_V1));
    ck_assert_uint_eq(p->desc->abi_version, MT_PLUGIN_ABI_VERSION);
    ck_assert_int_eq(mt_registry_normalize(r, "moe_token_dispatcher_type", "alltoall", canon,
                                           sizeof canon, why, sizeof why),
                     0);
    mt_rendered_init(&out);
    ctx = mt_ctx_make(t->contract, t->cfg, NULL, NULL);
    ck_assert_int_eq(mt_registry_render(r, &ctx, MT_DIALECT_MLM, &out, d), 0);
    for (i = 0; i < out.argv.n; i++)
        hit |= !strcmp(out.argv.v[i], "--moe-token-dispatcher-type");
    ck_assert_msg(hit, "dispatcher did not render --moe-token-dispatcher-type");
    mt_rendered_clear(&out);
    mt_registry_destroy(&r);
    mt_diag_destroy(&d);
    tk_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, builtins_load_clean);
    tcase_add_test(tc, not_a_shared_object);
    tcase_add_test(tc, missing_symbol);
    tcase_add_test(tc, abi_mismatch);
    tcase_add_test(tc, descriptor_too_small);
    tcase_add_test(tc, table_entry_size);
    tcase_add_test(tc, writable_by_others);
    tcase_add_test(tc, two_owners);
    tcase_add_test(tc, claims_core_knob);
    tcase_add_test(tc, extension_of_unowned_knob);
    tcase_add_test(tc, init_failure_disables_only_that_plugin);
    tcase_add_test(tc, loaded_twice);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, bare_name_is_not_searched);
    tcase_add_test(tc, directories_above_are_checked);
    tcase_add_test(tc, v1_plugin_loads_through_the_v1_adapter);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
