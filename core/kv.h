/*
 * kv.h - a sorted string-to-string map.
 *
 * The host's implementation of the ABI's opaque mt_kv: configs, hardware,
 * model, contract and evidence views handed to plugins are all mt_kv.  Keys
 * are kept in ascending byte order so iteration (and therefore every
 * canonical serialization built on it) is deterministic.
 */
#ifndef MT_KV_H
#define MT_KV_H

#include <moetune/plugin.h>
#include <stddef.h>

/* Caller owns the return value; free with mt_kv_destroy.  NULL on OOM. */
mt_kv *mt_kv_new(void);
/* Frees *kv and sets it to NULL; NULL-safe. */
void mt_kv_destroy(mt_kv **kv);
/* Deep copy; caller owns the return value. */
mt_kv *mt_kv_dup(const mt_kv *kv);

/* Removes every entry (keeps the allocation). */
void mt_kv_clear(mt_kv *kv);
/* Makes dst a copy of src (entries copied in order, no lookups).  0 or
 * -ENOMEM (dst then holds a prefix of src). */
int mt_kv_assign(mt_kv *dst, const mt_kv *src);
/* As mt_kv_assign, but dst's entries point at src's strings until they are
 * set again: src must not change, and must outlive dst (a cache of
 * defaults).  Keys added or values set later are dst's own. */
int mt_kv_borrow(mt_kv *dst, const mt_kv *src);

/* Sets key to a copy of value (replacing any previous value). 0 or -ENOMEM. */
int mt_kv_set(mt_kv *kv, const char *key, const char *value);
int mt_kv_setf(mt_kv *kv, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Removes key; 0 when removed, -ENOENT when absent. */
int mt_kv_unset(mt_kv *kv, const char *key);

/* Borrowed pointer valid until the key is changed or the map destroyed. */
const char *mt_kv_get(const mt_kv *kv, const char *key);
size_t mt_kv_count(const mt_kv *kv);
/* i-th entry in key order; 0, or -1 when out of range. */
int mt_kv_entry(const mt_kv *kv, size_t i, const char **key, const char **value);

#endif
