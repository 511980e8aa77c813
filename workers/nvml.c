/*
 * nvml.c - NVML through dlopen, the memory sampling thread, and the sim's
 * per-GPU memory report.
 *
 * Only the few NVML entry points used here are declared, with the types of
 * nvml.h as NVIDIA documents them (nvmlReturn_t is an int-sized enum, a
 * device an opaque pointer, nvmlMemory_t three unsigned long long).
 */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nv_return;
typedef struct nv_device_st *nv_device;
typedef struct nv_memory {
    unsigned long long total, free, used;
} nv_memory;

#define NV_SUCCESS 0
#define NV_UUID_LEN 96
#define NV_NAME_LEN 96
#define NV_DRIVER_LEN 80

struct mt_nvml {
    void *lib;
    int ok;
    int inited; /* nvmlInit succeeded: nvmlShutdown is owed */
    int count;
    nv_device *dev;
    char **uuid, **name;
    char driver[NV_DRIVER_LEN];
    char *status;
    nv_return (*shutdown)(void);
    nv_return (*memory_info)(nv_device, nv_memory *);
};

void mt_gpu_mems_clear(mt_gpu_mems *m)
{
    size_t i;
    for (i = 0; i < m->n; i++) {
        free(m->v[i].host);
        free(m->v[i].uuid);
    }
    free(m->v);
    free(m->source);
    memset(m, 0, sizeof *m);
}

long mt_gpu_mems_hottest(const mt_gpu_mems *m)
{
    size_t i;
    long best = -1;
    for (i = 0; i < m->n; i++)
        if (best < 0 || m->v[i].peak_bytes > m->v[best].peak_bytes)
            best = (long)i;
    return best;
}

static mt_gpu_mem *mems_add(mt_gpu_mems *m)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 8;
        mt_gpu_mem *v = realloc(m->v, cap * sizeof *v);
        if (!v)
            return NULL;
        m->v = v;
        m->cap = cap;
    }
    memset(&m->v[m->n], 0, sizeof m->v[m->n]);
    m->v[m->n].rank = -1;
    return &m->v[m->n++];
}

static int set_source(mt_gpu_mems *m, const char *source)
{
    if (m->source && !strcmp(m->source, source))
        return 0;
    free(m->source);
    m->source = strdup(source);
    return m->source ? 0 : -ENOMEM;
}

/* ---- NVML ----------------------------------------------------------------------- */

static void set_status(mt_nvml *n, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void set_status(mt_nvml *n, const char *f, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, f);
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    free(n->status);
    n->status = s;
}

static const char *nv_error(void *lib, nv_return rc)
{
    const char *(*str)(nv_return) = (const char *(*)(nv_return))dlsym(lib, "nvmlErrorString");
    const char *s = str ? str(rc) : NULL;
    return s ? s : "unknown NVML error";
}

#define SYM(var, name)                                                                             \
    do {                                                                                           \
        *(void **)(&var) = dlsym(n->lib, name);                                                    \
        if (!var) {                                                                                \
            set_status(n, "no NVML: %s lacks %s (the sim's per-GPU report stands in)", lib, name); \
            return n;                                                                              \
        }                                                                                          \
    } while (0)

mt_nvml *mt_nvml_open(const char *library)
{
    mt_nvml *n = calloc(1, sizeof *n);
    const char *lib = library ? library : getenv("MOETUNE_NVML_LIBRARY");
    nv_return (*init)(void), (*count)(unsigned *), (*handle)(unsigned, nv_device *);
    nv_return (*uuid)(nv_device, char *, unsigned), (*driver)(char *, unsigned);
    nv_return (*name)(nv_device, char *, unsigned);
    unsigned cnt = 0, i;
    nv_return rc;
    if (!n)
        return NULL;
    if (!lib || !*lib)
        lib = "libnvidia-ml.so.1";
    n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *e = dlerror();
        set_status(n, "no NVML: %s (the sim's per-GPU report stands in)", e ? e : lib);
        return n;
    }
    SYM(init, "nvmlInit_v2");
    SYM(n->shutdown, "nvmlShutdown");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(n->memory_info, "nvmlDeviceGetMemoryInfo");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(driver, "nvmlSystemGetDriverVersion");
    *(void **)(&name) = dlsym(n->lib, "nvmlDeviceGetName"); /* optional */
    if ((rc = init()) != NV_SUCCESS) {
        set_status(n, "no NVML: nvmlInit failed: %s (the sim's per-GPU report stands in)",
                   nv_error(n->lib, rc));
        return n;
    }
    n->inited = 1;
    if ((rc = count(&cnt)) != NV_SUCCESS) {
        set_status(n, "no NVML: nvmlDeviceGetCount failed: %s", nv_error(n->lib, rc));
        return n;
    }
    if (driver(n->driver, sizeof n->driver) != NV_SUCCESS)
        n->driver[0] = '\0';
    n->driver[sizeof n->driver - 1] = '\0';
    n->dev = calloc(cnt ? cnt : 1, sizeof *n->dev);
    n->uuid = calloc(cnt ? cnt : 1, sizeof *n->uuid);
    n->name = calloc(cnt ? cnt : 1, sizeof *n->name);
    if (!n->dev || !n->uuid || !n->name) {
        set_status(n, "no NVML: out of memory");
        return n;
    }
    for (i = 0; i < cnt; i++) {
        char buf[NV_UUID_LEN];
        if ((rc = handle(i, &n->dev[i])) != NV_SUCCESS) {
            set_status(n, "no NVML: no handle for GPU %u: %s", i, nv_error(n->lib, rc));
            return n;
        }
        if (uuid(n->dev[i], buf, sizeof buf) == NV_SUCCESS) {
            buf[sizeof buf - 1] = '\0';
            n->uuid[i] = strdup(buf);
        }
        if (name && name(n->dev[i], buf, sizeof buf) == NV_SUCCESS) {
            buf[sizeof buf - 1] = '\0';
            n->name[i] = strdup(buf);
        }
    }
    n->count = (int)cnt;
    n->ok = 1;
    set_status(n, "NVML: %u GPU%s, driver %s", cnt, cnt == 1 ? "" : "s",
               n->driver[0] ? n->driver : "unknown");
    return n;
}

void mt_nvml_destroy(mt_nvml **np)
{
    mt_nvml *n;
    int i;
    if (!np || !*np)
        return;
    n = *np;
    if (n->inited)
        n->shutdown();
    for (i = 0; i < n->count; i++) {
        free(n->uuid[i]);
        free(n->name[i]);
    }
    free(n->uuid);
    free(n->name);
    free(n->dev);
    free(n->status);
    if (n->lib)
        dlclose(n->lib);
    free(n);
    *np = NULL;
}

int mt_nvml_available(const mt_nvml *n)
{
    return n && n->ok;
}

const char *mt_nvml_status(const mt_nvml *n)
{
    if (!n)
        return "no NVML";
    return n->status ? n->status : "no NVML";
}

int mt_nvml_device_count(const mt_nvml *n)
{
    return n && n->ok ? n->count : 0;
}

const char *mt_nvml_uuid(const mt_nvml *n, int i)
{
    return n && n->ok && i >= 0 && i < n->count ? n->uuid[i] : NULL;
}

const char *mt_nvml_name(const mt_nvml *n, int i)
{
    return n && n->ok && i >= 0 && i < n->count ? n->name[i] : NULL;
}

const char *mt_nvml_driver(const mt_nvml *n)
{
    return n && n->ok && n->driver[0] ? n->driver : NULL;
}

/* ---- the sampler -------------------------------------------------------------- */

struct mt_nvml_sampler {
    mt_nvml *nvml;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    long period_ms;
    long samples;
    uint64_t *peak, *base, *total;
};

static void sample(mt_nvml_sampler *s)
{
    int i;
    for (i = 0; i < s->nvml->count; i++) {
        nv_memory m;
        if (s->nvml->memory_info(s->nvml->dev[i], &m) != NV_SUCCESS)
            continue;
        if (s->samples == 0)
            s->base[i] = m.used;
        if (m.used > s->peak[i])
            s->peak[i] = m.used;
        s->total[i] = m.total;
    }
    s->samples++;
}

static void *sampler_main(void *arg)
{
    mt_nvml_sampler *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec until;
        sample(s);
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (s->period_ms % 1000) * 1000000L;
        until.tv_sec += s->period_ms / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock, &until) == 0)
            ;
    }
    sample(s); /* the last moment counts too */
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

mt_nvml_sampler *mt_nvml_sampler_start(mt_nvml *n, int period_ms, mt_diag *d)
{
    mt_nvml_sampler *s;
    pthread_condattr_t ca;
    int rc;
    if (!mt_nvml_available(n)) {
        mt_diag_add(d, NULL, 0, NULL, "GPU memory sampler: %s", mt_nvml_status(n));
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->nvml = n;
    s->period_ms = period_ms <= 0 ? 150 : period_ms < 10 ? 10 : period_ms;
    s->peak = calloc((size_t)n->count + 1, sizeof *s->peak);
    s->base = calloc((size_t)n->count + 1, sizeof *s->base);
    s->total = calloc((size_t)n->count + 1, sizeof *s->total);
    if (!s->peak || !s->base || !s->total)
        goto oom;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = pthread_create(&s->thread, NULL, sampler_main, s)) != 0) {
        mt_diag_add(d, NULL, 0, NULL, "GPU memory sampler: cannot start a thread: %s",
                    strerror(rc));
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        free(s->peak), free(s->base), free(s->total), free(s);
        return NULL;
    }
    return s;
oom:
    if (s)
        free(s->peak), free(s->base), free(s->total), free(s);
    mt_diag_add(d, NULL, 0, NULL, "GPU memory sampler: out of memory");
    return NULL;
}

int mt_nvml_sampler_stop(mt_nvml_sampler **sp, mt_gpu_mems *out)
{
    mt_nvml_sampler *s;
    char host[256] = "localhost";
    int i, rc = 0;
    if (!sp || !*sp)
        return 0;
    s = *sp;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    if (out && set_source(out, "nvml") != 0)
        rc = -ENOMEM;
    for (i = 0; out && rc == 0 && i < s->nvml->count; i++) {
        mt_gpu_mem *g = mems_add(out);
        if (!g || !(g->host = strdup(host)) ||
            (s->nvml->uuid[i] && !(g->uuid = strdup(s->nvml->uuid[i])))) {
            rc = -ENOMEM;
            break;
        }
        g->gpu = i;
        g->peak_bytes = s->peak[i];
        g->base_bytes = s->base[i];
        g->total_bytes = s->total[i];
    }
    if (out)
        out->samples += s->samples;
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s->peak), free(s->base), free(s->total), free(s);
    *sp = NULL;
    return rc;
}

/* ---- the sim's report ------------------------------------------------------------ */

/* Value of key=VALUE in a space-separated line, copied into val. */
static int field(const char *line, const char *key, char *val, size_t cap)
{
    size_t kl = strlen(key), i;
    const char *p = line;
    while ((p = strstr(p, key)) != NULL) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            p += kl + 1;
            for (i = 0; p[i] && p[i] != ' ' && p[i] != '\n' && p[i] != '\r'; i++)
                if (i + 1 >= cap)
                    return -1;
            if (i == 0)
                return -1;
            memcpy(val, p, i);
            val[i] = '\0';
            return 0;
        }
        p += kl;
    }
    return -1;
}

static int to_int(const char *s, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 24)
        return -1;
    *out = (int)v;
    return 0;
}

int mt_sim_memory_read(const char *path, mt_gpu_mems *out, mt_diag *d)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0, rc = 0;
    if (!f) {
        mt_diag_add(d, path, 0, NULL, "cannot read the sim's memory report: %s", strerror(errno));
        return -1;
    }
    if (set_source(out, "sim") != 0) {
        fclose(f);
        mt_diag_add(d, path, 0, NULL, "out of memory");
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char rank[32], host[256], gpu[32], mib[64], *end;
        size_t len = strlen(line);
        double peak;
        mt_gpu_mem *g;
        lineno++;
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            mt_diag_add(d, path, lineno, NULL, "line longer than %zu bytes", sizeof line - 2);
            rc = -1;
            break;
        }
        if (strspn(line, " \t\r\n") == len)
            continue;
        if (field(line, "rank", rank, sizeof rank) || field(line, "host", host, sizeof host) ||
            field(line, "gpu", gpu, sizeof gpu) || field(line, "peak_mib", mib, sizeof mib)) {
            mt_diag_add(d, path, lineno, NULL,
                        "expected \"rank=<r> host=<name> gpu=<local> peak_mib=<x>\"");
            rc = -1;
            break;
        }
        errno = 0;
        peak = strtod(mib, &end);
        if (!(g = mems_add(out))) {
            mt_diag_add(d, path, lineno, NULL, "out of memory");
            rc = -1;
            break;
        }
        if (to_int(rank, &g->rank) || to_int(gpu, &g->gpu) || errno || *end || !(peak >= 0) ||
            peak > 1e12) {
            out->n--;
            mt_diag_add(d, path, lineno, NULL, "bad number in \"%.*s\"", (int)strcspn(line, "\n"),
                        line);
            rc = -1;
            break;
        }
        g->peak_bytes = (uint64_t)(peak * 1048576.0 + 0.5);
        if (!(g->host = strdup(host))) {
            out->n--;
            mt_diag_add(d, path, lineno, NULL, "out of memory");
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}
