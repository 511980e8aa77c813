#include "registry.h"

#include "callguard.h"
#include "dialect.h"
#include "plugin_abi.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MOETUNE_INSTALL_PLUGIN_DIR
#define MOETUNE_INSTALL_PLUGIN_DIR "/usr/local/lib/moetune/plugins"
#endif
#ifndef MOETUNE_PLUGIN_RELDIR /* relative to the install prefix */
#define MOETUNE_PLUGIN_RELDIR "lib/moetune/plugins"
#endif

/* The core's base knobs: the contract's model, batch and run settings.  No
 * plugin may own them and no candidate may change them. */
#define CK(n, t, def) {sizeof(mt_knob_v1), MT_KNOB_FLAG, t, n, NULL, def, NULL}
static const mt_knob_v1 core_knobs[] = {
    CK("num_layers", MT_TYPE_INT, "1"),
    CK("hidden_size", MT_TYPE_INT, "1"),
    CK("ffn_hidden_size", MT_TYPE_INT, "0"),
    CK("num_attention_heads", MT_TYPE_INT, "1"),
    CK("num_query_groups", MT_TYPE_INT, "0"),
    CK("kv_channels", MT_TYPE_INT, "0"),
    CK("num_experts", MT_TYPE_INT, "0"),
    CK("moe_router_topk", MT_TYPE_INT, "2"),
    CK("moe_ffn_hidden_size", MT_TYPE_INT, "0"),
    CK("moe_shared_expert_intermediate_size", MT_TYPE_INT, "0"),
    CK("moe_layer_freq", MT_TYPE_STRING, "1"),
    CK("multi_latent_attention", MT_TYPE_BOOL, "false"),
    CK("q_lora_rank", MT_TYPE_INT, "0"),
    CK("kv_lora_rank", MT_TYPE_INT, "0"),
    CK("qk_head_dim", MT_TYPE_INT, "0"),
    CK("qk_pos_emb_head_dim", MT_TYPE_INT, "0"),
    CK("v_head_dim", MT_TYPE_INT, "0"),
    CK("vocab_size", MT_TYPE_INT, "0"),
    CK("mtp_num_layers", MT_TYPE_INT, "0"),
    CK("seq_length", MT_TYPE_INT, "4096"),
    CK("global_batch_size", MT_TYPE_INT, "1"),
    CK("train_iters", MT_TYPE_INT, "0"),
    CK("log_interval", MT_TYPE_INT, "1"),
    CK("log_throughput", MT_TYPE_BOOL, "true"),
    CK("moe_expert_capacity_factor", MT_TYPE_STRING, ""),
    CK("moe_pad_expert_input_to_capacity", MT_TYPE_BOOL, "false"),
    CK("eval_interval", MT_TYPE_INT, "0"),
    CK("save_interval", MT_TYPE_INT, "0"),
    CK("seed", MT_TYPE_INT, "1234"),
};
#define N_CORE (sizeof core_knobs / sizeof core_knobs[0])

/* The descriptor symbols this host loads, newest first, each with the
 * adapter that turns it into the internal form (core/plugin_abi.h).  A new
 * ABI version is one more line here, at the top, and one adapter file. */
static const mt_plugin_abi abis[] = {
    {1, MT_PLUGIN_SYMBOL_V1, mt_plugin_adapt_v1},
};
#define N_ABIS (sizeof abis / sizeof abis[0])

typedef struct ext_entry {
    const char *knob;
    const char *value;
    mt_plugin *by;
} ext_entry;

struct mt_registry {
    mt_plugin **plugins;
    size_t n, cap;
    const char *origin; /* what the files being loaded now are (mt_plugin.origin) */
    ext_entry *ext;
    size_t n_ext, cap_ext;
    int finished;
};

mt_registry *mt_registry_new(void) { return calloc(1, sizeof(mt_registry)); }

static void plugin_free(mt_plugin *p)
{
    if (!p)
        return;
    if (p->enabled && p->desc && p->desc->fini) {
        mt_callguard_enter(p->desc->name, p->path, "fini()");
        p->desc->fini(p->state);
        mt_callguard_leave();
    }
    if (p->handle)
        dlclose(p->handle);
    free(p->path);
    free(p->why_disabled);
    free(p);
}

void mt_registry_destroy(mt_registry **rp)
{
    size_t i;
    if (!rp || !*rp)
        return;
    for (i = 0; i < (*rp)->n; i++)
        plugin_free((*rp)->plugins[i]);
    free((*rp)->plugins);
    free((*rp)->ext);
    free(*rp);
    *rp = NULL;
}

int mt_registry_is_core(const char *knob)
{
    size_t i;
    for (i = 0; i < N_CORE; i++)
        if (!strcmp(core_knobs[i].name, knob))
            return 1;
    return 0;
}

/* Owner of knob among registered (not necessarily initialised) plugins. */
static mt_plugin *owner_of(const mt_registry *r, const char *knob, const mt_knob_v1 **decl,
                           int enabled_only)
{
    size_t i;
    uint32_t k;
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        if (enabled_only && !p->enabled)
            continue;
        for (k = 0; k < p->desc->n_knobs; k++)
            if (!strcmp(p->desc->knobs[k].name, knob)) {
                if (decl)
                    *decl = &p->desc->knobs[k];
                return p;
            }
    }
    return NULL;
}

static int valid_name(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int valid_knob_name(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.'))
            return 0;
    return 1;
}

/* Refuses a file or directory another user could change: a plugin runs with
 * our privileges.  what is "plugin file" or "directory above the plugin". */
static int safe_owner_mode(const char *path, const struct stat *st, const char *what,
                           const char *plugin, mt_diag *d)
{
    int dir = S_ISDIR(st->st_mode);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(dir && (st->st_mode & S_ISVTX))) {
        mt_diag_add(d, plugin, 0, NULL,
                    "refused: the %s %s is writable by other users (mode %04o)%s; run chmod go-w "
                    "on it",
                    what, path, (unsigned)(st->st_mode & 07777),
                    dir ? " and has no sticky bit" : "");
        return -EPERM;
    }
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        mt_diag_add(d, plugin, 0, NULL,
                    "refused: the %s %s belongs to another user (uid %u); plugins load only from "
                    "files and directories owned by root or by you",
                    what, path, (unsigned)st->st_uid);
        return -EPERM;
    }
    return 0;
}

/* Resolves path to the one absolute file it names (realpath: every symbolic
 * link and "..", a relative path or a bare name against the working
 * directory, never a library search path) into abs, and checks exactly that
 * file and every directory above it up to "/".  The caller dlopens abs and
 * nothing else, so what was checked is what runs. */
static int resolve_file(const char *path, char abs[PATH_MAX], mt_diag *d)
{
    struct stat st;
    unsigned char hdr[18];
    char dir[PATH_MAX], *slash;
    int fd, rc;
    ssize_t got;
    if (!realpath(path, abs)) {
        mt_diag_add(d, path, 0, NULL, "cannot read plugin: %s", strerror(errno));
        return -ENOENT;
    }
    if (stat(abs, &st) != 0) {
        mt_diag_add(d, path, 0, NULL, "cannot read plugin %s: %s", abs, strerror(errno));
        return -ENOENT;
    }
    if (!S_ISREG(st.st_mode)) {
        mt_diag_add(d, path, 0, NULL, "not a shared object: not a regular file");
        return -EINVAL;
    }
    if ((rc = safe_owner_mode(abs, &st, "plugin file", path, d)))
        return rc;
    snprintf(dir, sizeof dir, "%s", abs);
    while ((slash = strrchr(dir, '/'))) {
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        if (stat(dir, &st) != 0) {
            mt_diag_add(d, path, 0, NULL, "cannot read the directory %s above the plugin: %s", dir,
                        strerror(errno));
            return -ENOENT;
        }
        if ((rc = safe_owner_mode(dir, &st, "directory above the plugin", path, d)))
            return rc;
        if (slash == dir)
            break;
    }
    fd = open(abs, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        mt_diag_add(d, path, 0, NULL, "cannot open plugin: %s", strerror(errno));
        return -EIO;
    }
    got = read(fd, hdr, sizeof hdr);
    close(fd);
    if (got < (ssize_t)sizeof hdr || memcmp(hdr, "\177ELF", 4) != 0) {
        mt_diag_add(d, path, 0, NULL, "not a shared object: no ELF header");
        return -ENOEXEC;
    }
    /* e_type is at offset 16 in both ELF classes; 3 = ET_DYN. */
    if ((hdr[5] == 1 ? hdr[16] | hdr[17] << 8 : hdr[17] | hdr[16] << 8) != 3) {
        mt_diag_add(d, path, 0, NULL, "not a shared object: ELF file of another type "
                                      "(an executable or object file?); build it with -shared");
        return -ENOEXEC;
    }
    return 0;
}

/* The newest plugin descriptor symbol the open file h exports; its ABI
 * index into *v.  NULL (said in d) when it exports none. */
static const void *find_descriptor(void *h, const char *path, size_t *v, mt_diag *d)
{
    const void *sym = NULL;
    for (*v = 0; *v < N_ABIS && !(sym = dlsym(h, abis[*v].symbol)); (*v)++)
        ;
    if (!sym) {
        char tried[256];
        size_t off = 0, k;
        for (k = 0; k < N_ABIS && off < sizeof tried; k++)
            off += (size_t)snprintf(tried + off, sizeof tried - off, "%s%s", k ? " or " : "",
                                    abis[k].symbol);
        mt_diag_add(d, path, 0, NULL,
                    "missing symbol %s: not a moetune plugin, or the descriptor is not exported "
                    "(declare it MT_PLUGIN_EXPORT)",
                    tried);
    }
    return sym;
}

/* The descriptor's name, entry points and table element sizes, and that
 * no loaded plugin has its name.  0 or a negative code (said in d). */
static int check_desc(const mt_registry *r, const mt_plugin_desc *desc, const char *path,
                      mt_diag *d)
{
    size_t i;
    if (!valid_name(desc->name)) {
        mt_diag_add(d, path, 0, NULL, "invalid plugin name \"%s\": use [a-z0-9_-]+",
                    desc->name ? desc->name : "(null)");
        return -EINVAL;
    }
    if (!desc->check || !desc->render || !desc->propose) {
        mt_diag_add(d, path, 0, NULL, "plugin %s lacks a required entry point (check, render "
                                      "and propose are required)",
                    desc->name);
        return -EINVAL;
    }
    for (i = 0; i < r->n; i++)
        if (!strcmp(r->plugins[i]->desc->name, desc->name)) {
            mt_diag_add(d, path, 0, NULL, "plugin %s is already loaded from %s; skipped",
                        desc->name, r->plugins[i]->path);
            return -EEXIST;
        }
    /* Tables are arrays: their element size is part of the ABI version. */
    if ((desc->n_knobs && (!desc->knobs || desc->knobs[0].struct_size != sizeof(mt_knob_v1))) ||
        (desc->n_extends &&
         (!desc->extends || desc->extends[0].struct_size != sizeof(mt_extension_v1))) ||
        (desc->n_variables &&
         (!desc->variables || desc->variables[0].struct_size != sizeof(mt_variable_v1)))) {
        mt_diag_add(d, path, 0, NULL,
                    "plugin %s: a knob, extension or variable table entry has the wrong "
                    "struct_size for ABI version 1; rebuild against this moetune/plugin.h",
                    desc->name);
        return -EPROTO;
    }
    return 0;
}

/* Each knob the descriptor declares: named, with a default, not the
 * core's, not another plugin's, declared once.  0 or a negative code. */
static int check_knobs(mt_registry *r, const mt_plugin_desc *desc, const char *path, mt_diag *d)
{
    uint32_t k;
    for (k = 0; k < desc->n_knobs; k++) {
        const mt_knob_v1 *kd = &desc->knobs[k];
        mt_plugin *other;
        uint32_t j;
        if (!valid_knob_name(kd->name) || !kd->default_value) {
            mt_diag_add(d, path, 0, NULL, "plugin %s declares knob %u with %s", desc->name, k,
                        kd->name ? "no default value" : "no name");
            return -EINVAL;
        }
        if (mt_registry_is_core(kd->name)) {
            mt_diag_add(d, path, 0, NULL,
                        "plugin %s claims knob %s, which the core owns (a base contract setting)",
                        desc->name, kd->name);
            return -EEXIST;
        }
        other = owner_of(r, kd->name, NULL, 0);
        if (other) {
            mt_diag_add(d, path, 0, NULL,
                        "two plugins own knob %s: %s (%s) and %s (%s); the second is not loaded",
                        kd->name, other->desc->name, other->path, desc->name, path);
            return -EEXIST;
        }
        for (j = 0; j < k; j++)
            if (!strcmp(desc->knobs[j].name, kd->name)) {
                mt_diag_add(d, path, 0, NULL, "plugin %s declares knob %s twice", desc->name,
                            kd->name);
                return -EINVAL;
            }
    }
    return 0;
}

/* Appends the plugin loaded from abs (handle h, ABI index v) to r; a
 * descriptor adapted into *converted is copied into the plugin.  0 or
 * -ENOMEM (h is then the caller's to close). */
static int add_plugin(mt_registry *r, const char *abs, size_t v, void *h,
                      const mt_plugin_desc *desc, const mt_plugin_desc *converted)
{
    mt_plugin *p;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        mt_plugin **np = realloc(r->plugins, cap * sizeof *np);
        if (!np)
            return -ENOMEM;
        r->plugins = np;
        r->cap = cap;
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->path = strdup(abs);
    p->origin = r->origin ? r->origin : "file";
    p->abi_version = abis[v].version;
    if (desc == converted) {
        p->converted = *converted;
        desc = &p->converted;
    }
    p->desc = desc;
    p->handle = h;
    r->plugins[r->n++] = p;
    return 0;
}

int mt_registry_load_file(mt_registry *r, const char *path, mt_diag *d)
{
    const mt_plugin_desc *desc = NULL;
    mt_plugin_desc converted;
    const void *sym = NULL;
    void *h;
    size_t v;
    int rc;
    char abs[PATH_MAX];

    if (r->finished) {
        mt_diag_add(d, path, 0, NULL, "internal: plugin loaded after the registry was finished");
        return -EINVAL;
    }
    rc = resolve_file(path, abs, d);
    if (rc)
        return rc;
    /* the file's constructors run inside dlopen */
    mt_callguard_enter(abs, NULL, "its constructors (dlopen)");
    h = dlopen(abs, RTLD_NOW | RTLD_LOCAL);
    mt_callguard_leave();
    if (!h) {
        const char *e = dlerror();
        mt_diag_add(d, path, 0, NULL, "cannot load plugin: %s", e ? e : "dlopen failed");
        return -ENOEXEC;
    }
    if (!(sym = find_descriptor(h, path, &v, d))) {
        dlclose(h);
        return -ENOENT;
    }
    rc = abis[v].adapt(sym, path, &converted, &desc, d);
    if (!rc)
        rc = check_desc(r, desc, path, d);
    if (!rc)
        rc = check_knobs(r, desc, path, d);
    if (!rc)
        rc = add_plugin(r, abs, v, h, desc, &converted);
    if (rc)
        dlclose(h);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int mt_registry_load_path(mt_registry *r, const char *path, mt_diag *d)
{
    struct stat st;
    DIR *dir;
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int failed = 0;

    if (stat(path, &st) != 0) {
        mt_diag_add(d, path, 0, NULL, "plugin path does not exist");
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return mt_registry_load_file(r, path, d) ? 1 : 0;
    dir = opendir(path);
    if (!dir) {
        mt_diag_add(d, path, 0, NULL, "cannot list plugin directory: %s", strerror(errno));
        return 1;
    }
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so"))
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(dir);
    qsort(names, n, sizeof *names, cmp_str);
    for (i = 0; i < n; i++) {
        char full[PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (mt_registry_load_file(r, full, d))
            failed++;
        free(names[i]);
    }
    free(names);
    return failed;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int mt_registry_load_default(mt_registry *r, const char *const *extra, size_t n_extra,
                             mt_diag *d)
{
    const char *env = getenv("MOETUNE_BUILTIN_DIR");
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    int failed = 0;
    size_t i;
    ssize_t len;

    r->origin = "built-in";
    if (env && *env) {
        failed += mt_registry_load_path(r, env, d);
    } else {
        dir[0] = '\0';
        len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            char *slash;
            exe[len] = '\0';
            slash = strrchr(exe, '/');
            if (slash)
                *slash = '\0';
            /* build tree: <build>/moetune and <build>/plugins/ */
            snprintf(dir, sizeof dir, "%s/plugins", exe);
            if (!is_dir(dir))
                snprintf(dir, sizeof dir, "%s/../%s", exe, MOETUNE_PLUGIN_RELDIR);
            if (!is_dir(dir))
                dir[0] = '\0';
        }
        if (!dir[0])
            snprintf(dir, sizeof dir, "%s", MOETUNE_INSTALL_PLUGIN_DIR);
        failed += mt_registry_load_path(r, dir, d);
        if (!r->n)
            mt_diag_add(d, dir, 0, NULL,
                        "no built-in plugins found here: every knob they own will be unknown; "
                        "install moetune or set MOETUNE_BUILTIN_DIR to the build's plugins/");
    }
    r->origin = "MOETUNE_PLUGIN_PATH";
    env = getenv("MOETUNE_PLUGIN_PATH");
    if (env && *env) {
        char *copy = strdup(env), *tok, *save = NULL;
        for (tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            if (*tok)
                failed += mt_registry_load_path(r, tok, d);
        free(copy);
    }
    r->origin = "launch.plugin_path";
    for (i = 0; i < n_extra; i++)
        failed += mt_registry_load_path(r, extra[i], d);
    r->origin = NULL;
    return failed;
}

int mt_registry_require(const mt_registry *r, const char *name, const char *min_version,
                        char *why, size_t why_len)
{
    const mt_plugin *p = mt_registry_find(r, name);
    if (!p) {
        snprintf(why, why_len,
                 "plugin %s is not loaded: install it among the built-ins or in a directory of "
                 "MOETUNE_PLUGIN_PATH (a file the contract names in launch.plugin_path loads "
                 "only with --trust-plugin-path)",
                 name);
        return -1;
    }
    if (!p->enabled) {
        snprintf(why, why_len, "plugin %s (%s) is disabled: %s", name, p->path,
                 p->why_disabled ? p->why_disabled : "?");
        return -1;
    }
    if (min_version && mt_version_cmp(p->desc->version ? p->desc->version : "", min_version) < 0) {
        snprintf(why, why_len, "plugin %s %s (%s) is older than the %s the contract needs", name,
                 p->desc->version ? p->desc->version : "(no version)", p->path, min_version);
        return -1;
    }
    return 0;
}

static void disable(mt_plugin *p, mt_diag *d, const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    p->enabled = 0;
    free(p->why_disabled);
    p->why_disabled = strdup(msg);
    mt_diag_add(d, p->path, 0, NULL, "plugin %s disabled: %s", p->desc->name, msg);
}

static int cmp_plugin(const void *a, const void *b)
{
    const mt_plugin *x = *(const mt_plugin *const *)a, *y = *(const mt_plugin *const *)b;
    return strcmp(x->desc->name, y->desc->name);
}

int mt_registry_finish(mt_registry *r, mt_diag *d)
{
    size_t i;
    uint32_t e;
    int disabled = 0;

    qsort(r->plugins, r->n, sizeof *r->plugins, cmp_plugin);
    for (i = 0; i < r->n; i++)
        r->plugins[i]->enabled = 1;
    /* Extensions: the knob must exist and be a value-list knob; values new. */
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        for (e = 0; p->enabled && e < p->desc->n_extends; e++) {
            const mt_extension_v1 *x = &p->desc->extends[e];
            const mt_knob_v1 *decl = NULL;
            mt_plugin *own = x->knob ? owner_of(r, x->knob, &decl, 0) : NULL;
            const char *const *v;
            char what[512];
            if (!own) {
                snprintf(what, sizeof what, "it extends knob %s, which no plugin owns",
                         x->knob ? x->knob : "(null)");
                disable(p, d, "%s", what);
                break;
            }
            if (own == p) {
                disable(p, d, "it extends its own knob %s; list the values in its knob table",
                        x->knob);
                break;
            }
            if (decl->type != MT_TYPE_ENUM && decl->type != MT_TYPE_LIST) {
                disable(p, d, "it extends knob %s, which takes no list of values", x->knob);
                break;
            }
            for (v = x->values; v && *v; v++) {
                size_t j;
                const char *const *ov;
                for (ov = decl->values; ov && *ov; ov++)
                    if (!strcmp(*ov, *v))
                        break;
                if (ov && *ov) {
                    snprintf(what, sizeof what, "it adds value %s to knob %s, which %s already has",
                             *v, x->knob, own->desc->name);
                    disable(p, d, "%s", what);
                    break;
                }
                for (j = 0; j < r->n_ext; j++)
                    if (!strcmp(r->ext[j].knob, x->knob) && !strcmp(r->ext[j].value, *v))
                        break;
                if (j < r->n_ext) {
                    snprintf(what, sizeof what, "value %s of knob %s is already added by %s", *v,
                             x->knob, r->ext[j].by->desc->name);
                    disable(p, d, "%s", what);
                    break;
                }
                if (r->n_ext == r->cap_ext) {
                    ext_entry *ne = realloc(r->ext, (r->cap_ext = r->cap_ext ? r->cap_ext * 2 : 8) *
                                                        sizeof *ne);
                    if (!ne)
                        return -ENOMEM;
                    r->ext = ne;
                }
                r->ext[r->n_ext].knob = x->knob;
                r->ext[r->n_ext].value = *v;
                r->ext[r->n_ext].by = p;
                r->n_ext++;
            }
        }
    }
    /* Variables must name known knobs. */
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        uint32_t k;
        for (k = 0; p->enabled && k < p->desc->n_variables; k++) {
            char copy[1024], *tok, *save = NULL;
            snprintf(copy, sizeof copy, "%s", p->desc->variables[k].knobs ? p->desc->variables[k].knobs : "");
            for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
                if (!owner_of(r, tok, NULL, 0)) {
                    char what[512];
                    snprintf(what, sizeof what, "its variable %s names knob %s, which no plugin owns",
                             p->desc->variables[k].name, tok);
                    disable(p, d, "%s", what);
                    break;
                }
        }
    }
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        mt_sink s;
        int rc;
        if (!p->enabled)
            continue;
        if (!p->desc->init)
            continue;
        mt_sink_init(&s, MT_SINK_INIT, p->desc->name);
        mt_callguard_enter(p->desc->name, p->path, "init()");
        rc = p->desc->init(mt_host_table(), &s, &p->state);
        mt_callguard_leave();
        if (rc < 0) {
            char *why = mt_strlist_join(&s.errors, "; ");
            p->enabled = 1; /* so disable() records it; fini is not called */
            disable(p, d, "init failed: %s", why && *why ? why : "(no reason given)");
            free(why);
        }
        mt_sink_fini(&s);
    }
    /* Drop extensions made by disabled plugins. */
    {
        size_t j, keep = 0;
        for (j = 0; j < r->n_ext; j++)
            if (r->ext[j].by->enabled)
                r->ext[keep++] = r->ext[j];
        r->n_ext = keep;
    }
    for (i = 0; i < r->n; i++)
        disabled += !r->plugins[i]->enabled;
    r->finished = 1;
    return disabled;
}

size_t mt_registry_count(const mt_registry *r) { return r->n; }
const mt_plugin *mt_registry_at(const mt_registry *r, size_t i)
{
    return i < r->n ? r->plugins[i] : NULL;
}

const mt_plugin *mt_registry_find(const mt_registry *r, const char *name)
{
    size_t i;
    for (i = 0; i < r->n; i++)
        if (!strcmp(r->plugins[i]->desc->name, name))
            return r->plugins[i];
    return NULL;
}

const mt_knob_v1 *mt_registry_knob(const mt_registry *r, const char *name,
                                   const mt_plugin **owner)
{
    size_t i;
    const mt_knob_v1 *decl = NULL;
    mt_plugin *p;
    for (i = 0; i < N_CORE; i++)
        if (!strcmp(core_knobs[i].name, name)) {
            if (owner)
                *owner = NULL;
            return &core_knobs[i];
        }
    p = owner_of(r, name, &decl, 1);
    if (!p)
        return NULL;
    if (owner)
        *owner = p;
    return decl;
}

const char **mt_registry_knob_names(const mt_registry *r, size_t *n)
{
    size_t i, total = N_CORE, at = 0;
    uint32_t k;
    const char **out;
    for (i = 0; i < r->n; i++)
        if (r->plugins[i]->enabled)
            total += r->plugins[i]->desc->n_knobs;
    out = calloc(total + 1, sizeof *out);
    if (!out)
        return NULL;
    for (i = 0; i < N_CORE; i++)
        out[at++] = core_knobs[i].name;
    for (i = 0; i < r->n; i++)
        for (k = 0; r->plugins[i]->enabled && k < r->plugins[i]->desc->n_knobs; k++)
            out[at++] = r->plugins[i]->desc->knobs[k].name;
    if (n)
        *n = at;
    return out;
}

const mt_plugin *mt_registry_extender(const mt_registry *r, const char *knob, const char *value)
{
    size_t i;
    for (i = 0; i < r->n_ext; i++)
        if (!strcmp(r->ext[i].knob, knob) && !strcmp(r->ext[i].value, value))
            return r->ext[i].by;
    return NULL;
}

/* Whether v is a legal value word for knob (declared or extended). */
static int value_known(const mt_registry *r, const mt_knob_v1 *decl, const char *v)
{
    const char *const *p;
    for (p = decl->values; p && *p; p++)
        if (!strcmp(*p, v))
            return 1;
    return mt_registry_extender(r, decl->name, v) != NULL;
}

static void list_values(const mt_registry *r, const mt_knob_v1 *decl, char *buf, size_t n)
{
    const char *const *p;
    size_t off = 0, i;
    buf[0] = '\0';
    for (p = decl->values; p && *p && off < n; p++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? ", " : "", *p);
    for (i = 0; i < r->n_ext && off < n; i++)
        if (!strcmp(r->ext[i].knob, decl->name))
            off += (size_t)snprintf(buf + off, n - off, "%s%s (%s)", off ? ", " : "",
                                    r->ext[i].value, r->ext[i].by->desc->name);
}

int mt_registry_normalize(const mt_registry *r, const char *knob, const char *value,
                          char *canon, size_t canon_len, char *why, size_t why_len)
{
    const mt_knob_v1 *decl = mt_registry_knob(r, knob, NULL);
    char vals[1024];
    if (!decl) {
        snprintf(why, why_len, "unknown knob %s", knob);
        return -1;
    }
    if (strlen(value) >= canon_len) {
        snprintf(why, why_len, "value of %s is too long", knob);
        return -1;
    }
    switch (decl->type) {
    case MT_TYPE_INT: {
        const char *p = value;
        if (!*p) {
            snprintf(why, why_len, "%s needs an integer, got an empty value", knob);
            return -1;
        }
        for (; *p; p++)
            if (*p < '0' || *p > '9') {
                snprintf(why, why_len, "%s needs a non-negative integer, got \"%s\"", knob, value);
                return -1;
            }
        if (strlen(value) > 9) {
            snprintf(why, why_len, "%s = %s is out of range (at most 999999999)", knob, value);
            return -1;
        }
        snprintf(canon, canon_len, "%ld", strtol(value, NULL, 10));
        return 0;
    }
    case MT_TYPE_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "True") || !strcmp(value, "1"))
            snprintf(canon, canon_len, "true");
        else if (!strcmp(value, "false") || !strcmp(value, "False") || !strcmp(value, "0"))
            snprintf(canon, canon_len, "false");
        else {
            snprintf(why, why_len, "%s needs true or false, got \"%s\"", knob, value);
            return -1;
        }
        return 0;
    case MT_TYPE_ENUM:
        if (!value_known(r, decl, value)) {
            list_values(r, decl, vals, sizeof vals);
            snprintf(why, why_len, "%s does not take \"%s\"; legal values: %s", knob, value, vals);
            return -1;
        }
        snprintf(canon, canon_len, "%s", value);
        return 0;
    case MT_TYPE_LIST: {
        /* Accept spaces or commas; emit declared order, then extension values
         * in the order given; refuse unknown and repeated words. */
        char copy[2048], *tok, *save = NULL;
        const char *words[64];
        size_t nw = 0, i, off = 0;
        const char *const *p;
        snprintf(copy, sizeof copy, "%s", value);
        for (tok = strtok_r(copy, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
            if (!value_known(r, decl, tok)) {
                list_values(r, decl, vals, sizeof vals);
                snprintf(why, why_len, "%s does not take \"%s\"; legal values: %s", knob, tok,
                         vals);
                return -1;
            }
            for (i = 0; i < nw; i++)
                if (!strcmp(words[i], tok)) {
                    snprintf(why, why_len, "%s lists \"%s\" twice", knob, tok);
                    return -1;
                }
            if (nw == 64) {
                snprintf(why, why_len, "%s lists too many values", knob);
                return -1;
            }
            words[nw++] = tok;
        }
        canon[0] = '\0';
        for (p = decl->values; p && *p; p++)
            for (i = 0; i < nw; i++)
                if (!strcmp(words[i], *p))
                    off += (size_t)snprintf(canon + off, canon_len - off, "%s%s", off ? " " : "", *p);
        for (i = 0; i < nw; i++) {
            const char *const *q;
            int own = 0;
            for (q = decl->values; q && *q; q++)
                own |= !strcmp(*q, words[i]);
            if (!own)
                off += (size_t)snprintf(canon + off, canon_len - off, "%s%s", off ? " " : "",
                                        words[i]);
        }
        return 0;
    }
    default:
        if (strchr(value, '\n')) {
            snprintf(why, why_len, "%s may not contain a newline", knob);
            return -1;
        }
        snprintf(canon, canon_len, "%s", value);
        return 0;
    }
}

static void report_errors(mt_sink *s, const mt_plugin *p, const char *call, int rc, mt_diag *d)
{
    size_t i;
    for (i = 0; i < s->errors.n; i++)
        mt_diag_add(d, p->path, 0, NULL, "plugin %s: %s(): %s", p->desc->name, call,
                    s->errors.v[i]);
    if (rc < 0 && !s->errors.n)
        mt_diag_add(d, p->path, 0, NULL, "plugin %s: %s() failed (%d) without a reason",
                    p->desc->name, call, rc);
}

/* Calls one entry point of every enabled plugin with a sink of the given
 * kind; a plugin's failure is reported and the others still run. */
static int call_all(mt_registry *r, int kind, const mt_ctx_v1 *ctx, uint32_t dialect,
                    mt_sink *proto, mt_diag *d)
{
    static const char *const names[] = {"init", "propose", "repair", "check", "render", "verify"};
    static const char *const calls[] = {"init()",  "propose()", "repair()",
                                        "check()", "render()",  "verify()"};
    size_t i;
    int failed = 0;
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        mt_sink s = *proto;
        int rc;
        if (!p->enabled)
            continue;
        mt_sink_init(&s, kind, p->desc->name);
        s.viol = proto->viol;
        s.rendered = proto->rendered;
        s.verdicts = proto->verdicts;
        mt_callguard_enter(p->desc->name, p->path, calls[kind]);
        if (kind == MT_SINK_CHECK)
            rc = p->desc->check(p->state, ctx, &s);
        else if (kind == MT_SINK_RENDER)
            rc = p->desc->render(p->state, ctx, dialect, &s);
        else if (p->desc->verify)
            rc = p->desc->verify(p->state, ctx, &s);
        else
            rc = 0;
        mt_callguard_leave();
        if (rc < 0 || s.errors.n) {
            report_errors(&s, p, names[kind], rc, d);
            failed++;
        }
        mt_sink_fini(&s);
    }
    return failed ? -EIO : 0;
}

int mt_registry_check(mt_registry *r, const mt_ctx_v1 *ctx, mt_violations *out, mt_diag *d)
{
    mt_sink proto;
    mt_sink_init(&proto, MT_SINK_CHECK, NULL);
    proto.viol = out;
    return call_all(r, MT_SINK_CHECK, ctx, 0, &proto, d);
}

int mt_registry_render(mt_registry *r, const mt_ctx_v1 *ctx, uint32_t dialect,
                       mt_rendered *out, mt_diag *d)
{
    mt_sink proto;
    mt_sink_init(&proto, MT_SINK_RENDER, NULL);
    proto.rendered = out;
    return call_all(r, MT_SINK_RENDER, ctx, dialect, &proto, d);
}

static const mt_variable_v1 *find_variable(const mt_plugin *p, const char *name)
{
    uint32_t i;
    for (i = 0; i < p->desc->n_variables; i++)
        if (p->desc->variables[i].name && !strcmp(p->desc->variables[i].name, name))
            return &p->desc->variables[i];
    return NULL;
}

/* Host-side validation of a fresh candidate. */
static void vet_candidate(const mt_registry *r, const mt_plugin *p, mt_candidate *c)
{
    const mt_variable_v1 *var = find_variable(p, c->variable);
    const char *k, *v;
    size_t i;
    char canon[2048], why[1024], msg[1400];
    if (!var) {
        snprintf(msg, sizeof msg, "changes variable %s, which plugin %s does not declare",
                 c->variable, p->desc->name);
        c->reject = strdup(msg);
        return;
    }
    if (!mt_kv_count(c->sets)) {
        c->reject = strdup("changes no knob");
        return;
    }
    if (c->label != MT_LABEL_TRAINING_EQUIVALENT && c->label != MT_LABEL_BENCHMARK_ONLY) {
        c->reject = strdup("has no label (training_equivalent or benchmark_only)");
        return;
    }
    for (i = 0; mt_kv_entry(c->sets, i, &k, &v) == 0; i++) {
        char vknobs[1024];
        snprintf(vknobs, sizeof vknobs, "%s", var->knobs ? var->knobs : "");
        if (mt_registry_is_core(k)) {
            snprintf(msg, sizeof msg, "sets %s, a base knob fixed by the contract", k);
            c->reject = strdup(msg);
            return;
        }
        {
            char *tok, *save = NULL;
            int in = 0;
            for (tok = strtok_r(vknobs, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
                in |= !strcmp(tok, k);
            if (!in) {
                snprintf(msg, sizeof msg, "sets %s, which is not part of its variable %s", k,
                         c->variable);
                c->reject = strdup(msg);
                return;
            }
        }
        if (mt_registry_normalize(r, k, v, canon, sizeof canon, why, sizeof why)) {
            snprintf(msg, sizeof msg, "sets an illegal value: %s", why);
            c->reject = strdup(msg);
            return;
        }
        if (strcmp(canon, v))
            mt_kv_set(c->sets, k, canon);
    }
}

int mt_registry_propose(mt_registry *r, const char *plugin, const mt_ctx_v1 *ctx,
                        mt_candidates *out, mt_diag *d)
{
    size_t i, j;
    int failed = 0;
    for (i = 0; i < r->n; i++) {
        mt_plugin *p = r->plugins[i];
        mt_sink s;
        size_t first = out->n;
        int rc;
        if (!p->enabled || (plugin && strcmp(plugin, p->desc->name)))
            continue;
        mt_sink_init(&s, MT_SINK_PROPOSE, p->desc->name);
        s.cands = out;
        mt_callguard_enter(p->desc->name, p->path, "propose()");
        rc = p->desc->propose(p->state, ctx, &s);
        mt_callguard_leave();
        if (rc < 0 || s.errors.n) {
            report_errors(&s, p, "propose", rc, d);
            failed++;
        }
        mt_sink_fini(&s);
        for (j = first; j < out->n; j++)
            vet_candidate(r, p, &out->v[j]);
    }
    return failed ? -EIO : 0;
}

int mt_registry_repair(mt_registry *r, const mt_plugin *p, const mt_ctx_v1 *ctx, mt_kv *sets,
                       mt_strlist *notes, mt_diag *d)
{
    mt_sink s;
    mt_kv *got = mt_kv_new();
    const char *k, *v;
    size_t i;
    int rc;
    char canon[2048], why[1024];
    if (!p->enabled || !p->desc->repair || !got) {
        mt_kv_destroy(&got);
        return 0;
    }
    mt_sink_init(&s, MT_SINK_REPAIR, p->desc->name);
    s.sets = got;
    s.notes = notes;
    mt_callguard_enter(p->desc->name, p->path, "repair()");
    rc = p->desc->repair(p->state, ctx, &s);
    mt_callguard_leave();
    if (rc < 0 || s.errors.n)
        report_errors(&s, p, "repair", rc, d);
    mt_sink_fini(&s);
    for (i = 0; rc >= 0 && mt_kv_entry(got, i, &k, &v) == 0; i++) {
        const mt_plugin *own = NULL;
        int mine = mt_registry_knob(r, k, &own) && own == p;
        if (!mine)
            for (size_t e = 0; e < r->n_ext; e++)
                mine |= r->ext[e].by == p && !strcmp(r->ext[e].knob, k);
        if (!mine) {
            mt_diag_add(d, p->path, 0, NULL,
                        "plugin %s: repair() set %s, which it neither owns nor extends; ignored",
                        p->desc->name, k);
            continue;
        }
        if (ctx->changed && mt_kv_get(ctx->changed, k)) {
            mt_diag_add(d, p->path, 0, NULL,
                        "plugin %s: repair() tried to undo the candidate's own change of %s; "
                        "ignored",
                        p->desc->name, k);
            continue;
        }
        if (mt_registry_normalize(r, k, v, canon, sizeof canon, why, sizeof why)) {
            mt_diag_add(d, p->path, 0, NULL, "plugin %s: repair(): %s", p->desc->name, why);
            continue;
        }
        mt_kv_set(sets, k, canon);
    }
    mt_kv_destroy(&got);
    return rc < 0 ? -EIO : 0;
}

int mt_registry_verify(mt_registry *r, const mt_ctx_v1 *ctx, mt_verdicts *out, mt_diag *d)
{
    mt_sink proto;
    mt_sink_init(&proto, MT_SINK_VERIFY, NULL);
    proto.verdicts = out;
    return call_all(r, MT_SINK_VERIFY, ctx, 0, &proto, d);
}
