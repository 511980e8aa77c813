#include "kv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* own[i]: which of entry i's strings the map allocated (KEY_OWNED,
 * VALUE_OWNED); the others are borrowed from a map that outlives this one
 * (mt_kv_borrow). */
enum { KEY_OWNED = 1, VALUE_OWNED = 2 };

struct mt_kv {
    char **keys;
    char **values;
    unsigned char *own;
    size_t n, cap;
};

static void entry_free(mt_kv *kv, size_t i)
{
    if (kv->own[i] & KEY_OWNED)
        free(kv->keys[i]);
    if (kv->own[i] & VALUE_OWNED)
        free(kv->values[i]);
}

static int grow(mt_kv *kv, size_t want)
{
    size_t cap = kv->cap ? kv->cap : 16;
    char **nk, **nv;
    unsigned char *no;
    if (want <= kv->cap)
        return 0;
    while (cap < want)
        cap *= 2;
    if (!(nk = realloc(kv->keys, cap * sizeof *nk)))
        return -ENOMEM;
    kv->keys = nk;
    if (!(nv = realloc(kv->values, cap * sizeof *nv)))
        return -ENOMEM;
    kv->values = nv;
    if (!(no = realloc(kv->own, cap)))
        return -ENOMEM;
    kv->own = no;
    kv->cap = cap;
    return 0;
}

mt_kv *mt_kv_new(void) { return calloc(1, sizeof(mt_kv)); }

void mt_kv_destroy(mt_kv **kvp)
{
    mt_kv *kv;
    size_t i;
    if (!kvp || !*kvp)
        return;
    kv = *kvp;
    for (i = 0; i < kv->n; i++)
        entry_free(kv, i);
    free(kv->keys);
    free(kv->values);
    free(kv->own);
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
        if (kv->own[at] & VALUE_OWNED)
            free(kv->values[at]);
        kv->values[at] = v;
        kv->own[at] |= VALUE_OWNED;
        return 0;
    }
    if (grow(kv, kv->n + 1))
        goto oom;
    k = strdup(key);
    if (!k)
        goto oom;
    pos = (size_t)(-at - 1);
    memmove(kv->keys + pos + 1, kv->keys + pos, (kv->n - pos) * sizeof *kv->keys);
    memmove(kv->values + pos + 1, kv->values + pos, (kv->n - pos) * sizeof *kv->values);
    memmove(kv->own + pos + 1, kv->own + pos, kv->n - pos);
    kv->keys[pos] = k;
    kv->values[pos] = v;
    kv->own[pos] = KEY_OWNED | VALUE_OWNED;
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
    entry_free(kv, i);
    memmove(kv->keys + i, kv->keys + i + 1, (kv->n - i - 1) * sizeof *kv->keys);
    memmove(kv->values + i, kv->values + i + 1, (kv->n - i - 1) * sizeof *kv->values);
    memmove(kv->own + i, kv->own + i + 1, kv->n - i - 1);
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

void mt_kv_clear(mt_kv *kv)
{
    size_t i;
    if (!kv)
        return;
    for (i = 0; i < kv->n; i++)
        entry_free(kv, i);
    kv->n = 0;
}

static int copy_from(mt_kv *dst, const mt_kv *src, int borrow)
{
    size_t i, n = src ? src->n : 0;
    mt_kv_clear(dst);
    if (grow(dst, n))
        return -ENOMEM;
    /* src is sorted already: copy in order, no searches */
    for (i = 0; i < n; i++) {
        if (borrow) {
            dst->keys[i] = src->keys[i];
            dst->values[i] = src->values[i];
            dst->own[i] = 0;
            continue;
        }
        dst->keys[i] = strdup(src->keys[i]);
        dst->values[i] = strdup(src->values[i]);
        dst->own[i] = KEY_OWNED | VALUE_OWNED;
        if (!dst->keys[i] || !dst->values[i]) {
            entry_free(dst, i);
            dst->n = i;
            return -ENOMEM;
        }
    }
    dst->n = n;
    return 0;
}

int mt_kv_assign(mt_kv *dst, const mt_kv *src) { return copy_from(dst, src, 0); }

int mt_kv_borrow(mt_kv *dst, const mt_kv *src) { return copy_from(dst, src, 1); }

mt_kv *mt_kv_dup(const mt_kv *kv)
{
    mt_kv *d = mt_kv_new();
    if (d && mt_kv_assign(d, kv))
        mt_kv_destroy(&d);
    return d;
}
