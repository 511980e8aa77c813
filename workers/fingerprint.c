/*
 * fingerprint.c - the per-run fingerprint as JSON (cJSON).
 */
#include "fingerprint.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- library versions, once per process ------------------------------------------ */

static char cuda_version[32], nccl_version[32];
static pthread_once_t versions_once = PTHREAD_ONCE_INIT;

/* Calls int fn(int *) from the first library of names that loads.  The
 * library stays loaded: unloading CUDA libraries is not reliably safe, and
 * what they allocate at load stays reachable. */
static int lib_version(const char *const *names, const char *symbol, int *out)
{
    size_t i;
    for (i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        int (*fn)(int *);
        if (!h)
            continue;
        *(void **)(&fn) = dlsym(h, symbol);
        if (fn && fn(out) == 0 && *out > 0)
            return 0;
    }
    return -1;
}

static void load_versions(void)
{
    static const char *const cudart[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                         "libcudart.so.11.0", NULL};
    static const char *const nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
    int v = 0;
    /* cudaRuntimeGetVersion: 1000 x major + 10 x minor */
    if (lib_version(cudart, "cudaRuntimeGetVersion", &v) == 0)
        snprintf(cuda_version, sizeof cuda_version, "%d.%d", v / 1000, (v % 1000) / 10);
    v = 0;
    /* ncclGetVersion: major x 10000 + minor x 100 + patch since 2.9, x 1000 before */
    if (lib_version(nccl, "ncclGetVersion", &v) == 0) {
        if (v >= 10000)
            snprintf(nccl_version, sizeof nccl_version, "%d.%d.%d", v / 10000, (v % 10000) / 100,
                     v % 100);
        else
            snprintf(nccl_version, sizeof nccl_version, "%d.%d.%d", v / 1000, (v % 1000) / 100,
                     v % 100);
    }
}

static int copy_version(const char *v, char *buf, size_t cap)
{
    pthread_once(&versions_once, load_versions);
    if (cap)
        snprintf(buf, cap, "%s", v);
    return v[0] ? 0 : -1;
}

int mt_fingerprint_cuda_runtime(char *buf, size_t cap)
{
    return copy_version(cuda_version, buf, cap);
}

int mt_fingerprint_nccl(char *buf, size_t cap)
{
    return copy_version(nccl_version, buf, cap);
}

/* ---- container ---------------------------------------------------------------- */

/* Value of key="..." in podman's /run/.containerenv, or NULL. */
static char *containerenv_value(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[1024], *out = NULL;
    size_t kl = strlen(key);
    if (!f)
        return NULL;
    while (!out && fgets(line, sizeof line, f)) {
        char *v, *end;
        if (strncmp(line, key, kl) != 0 || line[kl] != '=')
            continue;
        v = line + kl + 1;
        if (*v == '"')
            v++;
        end = v + strcspn(v, "\"\n");
        *end = '\0';
        if (*v)
            out = strdup(v);
    }
    fclose(f);
    return out;
}

static cJSON *container_json(const mt_kv *env)
{
    cJSON *c = cJSON_CreateObject();
    const char *digest =
        env ? mt_kv_get(env, "MOETUNE_CONTAINER_DIGEST") : getenv("MOETUNE_CONTAINER_DIGEST");
    char *id = NULL, *image = NULL;
    const char *kind = "none";
    if (!c)
        return NULL;
    if (access("/run/.containerenv", F_OK) == 0) {
        kind = "podman";
        id = containerenv_value("/run/.containerenv", "imageid");
        image = containerenv_value("/run/.containerenv", "image");
    } else if (access("/.dockerenv", F_OK) == 0) {
        kind = "docker";
    }
    if (digest && *digest && !strcmp(kind, "none"))
        kind = "declared";
    cJSON_AddStringToObject(c, "kind", kind);
    if (digest && *digest)
        cJSON_AddStringToObject(c, "digest", digest);
    else if (id)
        cJSON_AddStringToObject(c, "digest", id);
    else
        cJSON_AddNullToObject(c, "digest");
    if (image)
        cJSON_AddStringToObject(c, "image", image);
    else
        cJSON_AddNullToObject(c, "image");
    free(id);
    free(image);
    return c;
}

/* ---- the fingerprint ---------------------------------------------------------- */

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

char *mt_fingerprint_json(const mt_fingerprint_in *in, mt_diag *d)
{
    cJSON *root = cJSON_CreateObject(), *hosts, *gpus, *stack, *cont;
    const mt_nvml *nv = in ? in->nvml : NULL;
    char ver[32], *text = NULL;
    size_t i;
    int g;
    if (!root)
        goto oom;
    hosts = in && in->hosts_unknown ? cJSON_AddNullToObject(root, "hosts")
                                    : cJSON_AddArrayToObject(root, "hosts");
    if (!hosts)
        goto oom;
    if (in && in->hosts_unknown) {
        /* null: where the launcher ran it is not known */
    } else if (in && in->hosts && in->n_hosts) {
        for (i = 0; i < in->n_hosts; i++)
            cJSON_AddItemToArray(hosts, cJSON_CreateString(in->hosts[i]));
    } else {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0)
            strcpy(host, "unknown");
        host[sizeof host - 1] = '\0';
        cJSON_AddItemToArray(hosts, cJSON_CreateString(host));
    }
    gpus = cJSON_AddArrayToObject(root, "gpus");
    if (!gpus)
        goto oom;
    for (g = 0; g < mt_nvml_device_count(nv); g++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto oom;
        cJSON_AddNumberToObject(o, "index", g);
        add_str_or_null(o, "uuid", mt_nvml_uuid(nv, g));
        add_str_or_null(o, "name", mt_nvml_name(nv, g));
        cJSON_AddItemToArray(gpus, o);
    }
    add_str_or_null(root, "driver", mt_nvml_driver(nv));
    cJSON_AddStringToObject(root, "nvml", nv ? mt_nvml_status(nv) : "not sampled");
    add_str_or_null(root, "cuda_runtime",
                    mt_fingerprint_cuda_runtime(ver, sizeof ver) == 0 ? ver : NULL);
    add_str_or_null(root, "nccl", mt_fingerprint_nccl(ver, sizeof ver) == 0 ? ver : NULL);
    cont = container_json(in ? in->env : NULL);
    if (!cont)
        goto oom;
    cJSON_AddItemToObject(root, "container", cont);
    stack = cJSON_AddObjectToObject(root, "stack");
    if (!stack)
        goto oom;
    if (in && in->stack) {
        const char *k, *v;
        for (i = 0; mt_kv_entry(in->stack, i, &k, &v) == 0; i++)
            cJSON_AddStringToObject(stack, k, v);
    }
    text = cJSON_PrintUnformatted(root);
    if (!text)
        goto oom;
    cJSON_Delete(root);
    return text;
oom:
    cJSON_Delete(root);
    mt_diag_add(d, NULL, 0, "fingerprint", "out of memory");
    return NULL;
}

/* The value of item as compact text for a message; caller frees. */
static char *show(const cJSON *item)
{
    char *s = item ? cJSON_PrintUnformatted(item) : NULL;
    if (!s)
        return strdup("(absent)");
    if (strlen(s) > 200)
        strcpy(s + 190, "...");
    return s;
}

int mt_fingerprint_compare(const char *a, const char *b, mt_diag *d)
{
    static const char *const keys[] = {"hosts", "gpus",      "driver", "cuda_runtime",
                                       "nccl",  "container", "stack",  NULL};
    cJSON *ja = cJSON_Parse(a ? a : ""), *jb = cJSON_Parse(b ? b : "");
    int i, differ = 0;
    if (!cJSON_IsObject(ja) || !cJSON_IsObject(jb) || !cJSON_HasObjectItem(ja, "hosts") ||
        !cJSON_HasObjectItem(jb, "hosts")) {
        mt_diag_add(d, NULL, 0, "fingerprint", "not a run fingerprint (JSON with \"hosts\")");
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        return -1;
    }
    for (i = 0; keys[i]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(ja, keys[i]);
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(jb, keys[i]);
        if ((!x && !y) || (x && y && cJSON_Compare(x, y, 1)))
            continue;
        {
            char *sx = show(x), *sy = show(y);
            mt_diag_add(d, NULL, 0, "fingerprint", "fingerprint differs in %s: %s vs %s", keys[i],
                        sx ? sx : "?", sy ? sy : "?");
            free(sx);
            free(sy);
        }
        differ = 1;
    }
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    return differ;
}
