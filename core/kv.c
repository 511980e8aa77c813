#include "kv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mt_kv {
    char **keys;
    char **values;
    size_t n, cap;
};

mt_kv *mt_kv_new(void) { return calloc(1, sizeof(mt_kv)); }

void mt_kv_destroy(mt_kv **kvp)
{
    mt_kv *kv;
    size_t i;
    if (!kvp || !*kvp)
        return;
    kv = *kvp;
    for (i = 0; i < kv->n; i++) {
        free(kv->keys[i]);
        free(kv->values[i]);
    }
    free(kv->keys);
    free(kv->values);
    free(kv);
    *kvp = NULL;
}

/* Binary search: index of key, or -(insertion point) - 1. */
static long kv_find(const mt_kv *kv, const char *key)
{
    size_t lo = 0, hi = kv->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(kv->keys[mid], key);
        if (!c)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

int mt_kv_set(mt_kv *kv, const char *key, const char *value)
{
    long at = kv_find(kv, key);
    char *v = strdup(value ? value : ""), *k;
    size_t pos;
    if (!v)
        return -ENOMEM;
    if (at >= 0) {
        free(kv->values[at]);
        kv->values[at] = v;
        return 0;
    }
    if (kv->n == kv->cap) {
        size_t cap = kv->cap ? kv->cap * 2 : 16;
        char **nk = realloc(kv->keys, cap * sizeof *nk);
        char **nv;
        if (!nk)
            goto oom;
        kv->keys = nk;
        nv = realloc(kv->values, cap * sizeof *nv);
        if (!nv)
            goto oom;
        kv->values = nv;
        kv->cap = cap;
    }
    k = strdup(key);
    if (!k)
        goto oom;
    pos = (size_t)(-at - 1);
    memmove(kv->keys + pos + 1, kv->keys + pos, (kv->n - pos) * sizeof *kv->keys);
    memmove(kv->values + pos + 1, kv->values + pos, (kv->n - pos) * sizeof *kv->values);
    kv->keys[pos] = k;
    kv->values[pos] = v;
    kv->n++;
    return 0;
oom:
    free(v);
    return -ENOMEM;
}

int mt_kv_setf(mt_kv *kv, const char *key, const char *fmt, ...)
{
    char buf[256], *big = NULL;
    int n, rc;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= sizeof buf) {
        big = malloc((size_t)n + 1);
        if (!big)
            return -ENOMEM;
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    rc = mt_kv_set(kv, key, big ? big : buf);
    free(big);
    return rc;
}

int mt_kv_unset(mt_kv *kv, const char *key)
{
    long at = kv_find(kv, key);
    size_t i;
    if (at < 0)
        return -ENOENT;
    i = (size_t)at;
    free(kv->keys[i]);
    free(kv->values[i]);
    memmove(kv->keys + i, kv->keys + i + 1, (kv->n - i - 1) * sizeof *kv->keys);
    memmove(kv->values + i, kv->values + i + 1, (kv->n - i - 1) * sizeof *kv->values);
    kv->n--;
    return 0;
}

const char *mt_kv_get(const mt_kv *kv, const char *key)
{
    long at;
    if (!kv || !key)
        return NULL;
    at = kv_find(kv, key);
    return at >= 0 ? kv->values[at] : NULL;
}

size_t mt_kv_count(const mt_kv *kv) { return kv ? kv->n : 0; }

int mt_kv_entry(const mt_kv *kv, size_t i, const char **key, const char **value)
{
    if (!kv || i >= kv->n)
        return -1;
    if (key)
        *key = kv->keys[i];
    if (value)
        *value = kv->values[i];
    return 0;
}

mt_kv *mt_kv_dup(const mt_kv *kv)
{
    mt_kv *d = mt_kv_new();
    size_t i;
    if (!d)
        return NULL;
    for (i = 0; kv && i < kv->n; i++)
        if (mt_kv_set(d, kv->keys[i], kv->values[i])) {
            mt_kv_destroy(&d);
            return NULL;
        }
    return d;
}
