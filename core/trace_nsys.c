/*
 * trace_nsys.c - Nsight Systems SQLite exports (`nsys export --type sqlite`).
 *
 * Tables read, as the exporter names them (each one is created lazily, so any
 * but the kernel table may be absent):
 *
 *   CUPTI_ACTIVITY_KIND_KERNEL  start, end, deviceId, streamId, demangledName,
 *                               shortName (ids into StringIds)  -> kernels
 *   CUPTI_ACTIVITY_KIND_MEMCPY  start, end, deviceId, streamId, copyKind
 *   CUPTI_ACTIVITY_KIND_MEMSET  start, end, deviceId, streamId  -> copies
 *   NVTX_EVENTS                 start, end, eventType, text, textId
 *                               (push/pop and start/end ranges) -> ranges
 *   CUPTI_ACTIVITY_KIND_RUNTIME start, end, nameId: graph launches are kept,
 *                               kernel launches counted
 *   StringIds                   id, value
 *
 * Times are integer nanoseconds already.  Rows are stepped one at a time and
 * names resolved by a join on StringIds(id), its primary key, so memory
 * follows the kept events and never the size of the file.  Every value read
 * is checked for its type; the first bad one ends the read with one entry
 * naming the file, the table, the row (rowid) and the column.
 *
 * Its interface: core/trace_int.h (mt__trace_nsys_open), read through
 * mt_trace_open (core/trace.h).
 */
#include "trace_int.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define T_KERNEL "CUPTI_ACTIVITY_KIND_KERNEL"
#define T_MEMCPY "CUPTI_ACTIVITY_KIND_MEMCPY"
#define T_MEMSET "CUPTI_ACTIVITY_KIND_MEMSET"
#define T_RUNTIME "CUPTI_ACTIVITY_KIND_RUNTIME"
#define T_NVTX "NVTX_EVENTS"
#define T_STRINGS "StringIds"

/* ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxStartEndRange */
#define NVTX_PUSH_POP 59
#define NVTX_START_END 60

typedef struct nsys {
    sqlite3 *db;
    const char *path;
    mt_diag *d;
    mt_trace *t;
} nsys;

/* ---- messages --------------------------------------------------------------------------- */

static const char *nsys_type(int type)
{
    switch (type) {
    case SQLITE_INTEGER:
        return "an integer";
    case SQLITE_FLOAT:
        return "a real number";
    case SQLITE_TEXT:
        return "text";
    case SQLITE_BLOB:
        return "a blob";
    default:
        return "NULL";
    }
}

/* One entry about a cell: field "TABLE[rowid N].COLUMN", message "COLUMN ...". */
static int nsys_bad(nsys *n, const char *table, sqlite3_int64 rowid, const char *col,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int nsys_bad(nsys *n, const char *table, sqlite3_int64 rowid, const char *col,
                    const char *fmt, ...)
{
    char what[384], field[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(field, sizeof field, "%s[rowid %lld].%s", table, (long long)rowid, col);
    mt_diag_add(n->d, n->path, 0, field, "%s %s", col, what);
    return -1;
}

/* An SQLite failure while querying table (NULL: the schema). */
static int nsys_sql_fail(nsys *n, const char *table, sqlite3_int64 rowid, int rc)
{
    const char *msg = sqlite3_errmsg(n->db);
    int code = rc & 0xff;
    const char *hint =
        code == SQLITE_CORRUPT || code == SQLITE_NOTADB ? ": the file is damaged or truncated" : "";
    if (code == SQLITE_NOMEM)
        mt_diag_add(n->d, n->path, 0, table, "out of memory reading the Nsight Systems export");
    else if (!table)
        mt_diag_add(n->d, n->path, 0, NULL, "not a readable Nsight Systems SQLite export (%s)%s",
                    msg, hint);
    else if (rowid > 0)
        mt_diag_add(n->d, n->path, 0, table, "cannot read table %s after rowid %lld (%s)%s", table,
                    (long long)rowid, msg, hint);
    else
        mt_diag_add(n->d, n->path, 0, table, "cannot read table %s (%s)%s", table, msg, hint);
    return -1;
}

static int nsys_oom(nsys *n)
{
    mt_diag_add(n->d, n->path, 0, NULL, "out of memory reading the Nsight Systems export");
    return -1;
}

/* ---- schema ----------------------------------------------------------------------------- */

/* *has = whether a table of that name exists; 0 or -1. */
static int nsys_has_table(nsys *n, const char *name, int *has)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        n->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return nsys_sql_fail(n, NULL, 0, rc);
    }
    *has = rc == SQLITE_ROW;
    sqlite3_finalize(st);
    return 0;
}

/* Sets bit i of *mask for each cols[i] that table has; *pk_id = whether
 * "id" is the table's whole primary key.  0 or -1. */
static int nsys_columns(nsys *n, const char *table, const char *const *cols, unsigned *mask,
                        int *pk_id)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(n->db, "SELECT name, pk FROM pragma_table_info(?1)", -1, &st, NULL);
    int npk = 0, id_pk = 0;
    *mask = 0;
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        int pk = sqlite3_column_int(st, 1);
        size_t i;
        rc = SQLITE_OK;
        if (!name)
            continue;
        for (i = 0; cols[i]; i++)
            if (!sqlite3_stricmp(name, cols[i]))
                *mask |= 1u << i;
        if (pk > 0) {
            npk++;
            if (!sqlite3_stricmp(name, "id"))
                id_pk = 1;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return nsys_sql_fail(n, table, 0, rc);
    if (pk_id)
        *pk_id = id_pk && npk == 1;
    return 0;
}

/* Requires the columns of cols whose bit is in need; 0 or -1. */
static int nsys_require(nsys *n, const char *table, const char *const *cols, unsigned mask,
                        unsigned need)
{
    size_t i;
    for (i = 0; cols[i]; i++)
        if ((need & (1u << i)) && !(mask & (1u << i))) {
            mt_diag_add(n->d, n->path, 0, table,
                        "table %s has no column \"%s\": not an Nsight Systems export this "
                        "reader knows",
                        table, cols[i]);
            return -1;
        }
    return 0;
}

/* StringIds must map each id to one string: it is its primary key in every
 * export; a hand-made table without that key is checked for duplicates. */
static int nsys_check_strings(nsys *n)
{
    static const char *const cols[] = {"id", "value", NULL};
    unsigned mask;
    int pk_id, rc;
    sqlite3_stmt *st = NULL;
    if (nsys_columns(n, T_STRINGS, cols, &mask, &pk_id) ||
        nsys_require(n, T_STRINGS, cols, mask, 3))
        return -1;
    if (pk_id)
        return 0;
    rc = sqlite3_prepare_v2(n->db,
                            "SELECT id FROM " T_STRINGS " GROUP BY id HAVING count(*) > 1 LIMIT 1",
                            -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        mt_diag_add(n->d, n->path, 0, T_STRINGS ".id",
                    "table " T_STRINGS ": string id %lld appears more than once",
                    (long long)sqlite3_column_int64(st, 0));
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : nsys_sql_fail(n, T_STRINGS, 0, rc);
}

/* ---- cells ------------------------------------------------------------------------------ */

/* Column i as an integer.  *present = 0 for NULL when nullable, else NULL is
 * an error.  0 or -1. */
static int nsys_int(nsys *n, sqlite3_stmt *st, int i, const char *table, sqlite3_int64 rowid,
                    const char *col, int nullable, int64_t *out, int *present)
{
    int type = sqlite3_column_type(st, i);
    if (type == SQLITE_NULL) {
        if (present)
            *present = 0;
        if (nullable)
            return 0;
        return nsys_bad(n, table, rowid, col, "is NULL, expected an integer");
    }
    if (type != SQLITE_INTEGER)
        return nsys_bad(n, table, rowid, col, "must be an integer, not %s", nsys_type(type));
    *out = sqlite3_column_int64(st, i);
    if (present)
        *present = 1;
    return 0;
}

/* start and end (columns i, i + 1): non-negative nanoseconds, end >= start. */
static int nsys_times(nsys *n, sqlite3_stmt *st, int i, const char *table, sqlite3_int64 rowid,
                      int64_t *start, int64_t *end)
{
    if (nsys_int(n, st, i, table, rowid, "start", 0, start, NULL) ||
        nsys_int(n, st, i + 1, table, rowid, "end", 0, end, NULL))
        return -1;
    if (*start < 0)
        return nsys_bad(n, table, rowid, "start", "%" PRId64 " ns is negative", *start);
    if (*end < *start)
        return nsys_bad(n, table, rowid, "end", "%" PRId64 " ns is before start %" PRId64 " ns",
                        *end, *start);
    return 0;
}

/* An int32 column (device, stream). */
static int nsys_int32(nsys *n, sqlite3_stmt *st, int i, const char *table, sqlite3_int64 rowid,
                      const char *col, int *out)
{
    int64_t v = 0;
    if (nsys_int(n, st, i, table, rowid, col, 0, &v, NULL))
        return -1;
    if (v < INT32_MIN || v > INT32_MAX)
        return nsys_bad(n, table, rowid, col, "%" PRId64 " is out of range", v);
    *out = (int)v;
    return 0;
}

/* A name by string id: column i holds the id, i + 1 the joined StringIds.id
 * (NULL when no such string) and i + 2 its value.  1 when the id is NULL,
 * 0 with *s / *len set, -1 after an entry. */
static int nsys_string(nsys *n, sqlite3_stmt *st, int i, const char *table, sqlite3_int64 rowid,
                       const char *col, const char **s, size_t *len)
{
    int64_t id = 0;
    int present = 0, vt;
    if (nsys_int(n, st, i, table, rowid, col, 1, &id, &present))
        return -1;
    if (!present)
        return 1;
    if (sqlite3_column_type(st, i + 1) == SQLITE_NULL)
        return nsys_bad(n, table, rowid, col,
                        "string id %" PRId64 " is not in " T_STRINGS
                        " (the export is incomplete or damaged)",
                        id);
    vt = sqlite3_column_type(st, i + 2);
    if (vt != SQLITE_TEXT)
        return nsys_bad(n, table, rowid, col,
                        "string id %" PRId64 " has %s in " T_STRINGS ".value, not text", id,
                        nsys_type(vt));
    *s = (const char *)sqlite3_column_text(st, i + 2);
    if (!*s)
        return nsys_oom(n);
    /* a name ends at its first NUL, as the string table keeps it */
    *len = strnlen(*s, (size_t)sqlite3_column_bytes(st, i + 2));
    return 0;
}

/* ---- tables ----------------------------------------------------------------------------- */

static int nsys_prepare(nsys *n, const char *table, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(n->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return nsys_sql_fail(n, table, 0, rc);
    }
    return 0;
}

/* Steps st to its end, calling row() on each row; 0 or -1. */
static int nsys_each(nsys *n, const char *table, sqlite3_stmt *st,
                     int (*row)(nsys *, sqlite3_stmt *, sqlite3_int64))
{
    sqlite3_int64 last = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        last = sqlite3_column_int64(st, 0);
        if (row(n, st, last))
            return -1;
    }
    return rc == SQLITE_DONE ? 0 : nsys_sql_fail(n, table, last, rc);
}

/* CUPTI leaves both times 0 when it could not collect them: no interval. */
static int nsys_untimed(int64_t start, int64_t end)
{
    return start == 0 && end == 0;
}

static int nsys_kernel_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid)
{
    int64_t start = 0, end = 0;
    int dev = 0, stream = 0, r;
    const char *name = NULL;
    size_t len = 0;
    if (nsys_times(n, st, 1, T_KERNEL, rowid, &start, &end) ||
        nsys_int32(n, st, 3, T_KERNEL, rowid, "deviceId", &dev) ||
        nsys_int32(n, st, 4, T_KERNEL, rowid, "streamId", &stream))
        return -1;
    /* demangledName (the full name) when there is one, else shortName */
    if ((r = nsys_string(n, st, 5, T_KERNEL, rowid, "demangledName", &name, &len)) < 0)
        return -1;
    if (r > 0 && (r = nsys_string(n, st, 8, T_KERNEL, rowid, "shortName", &name, &len)) < 0)
        return -1;
    if (r > 0)
        return nsys_bad(n, T_KERNEL, rowid, "demangledName",
                        "and shortName are both NULL: the kernel has no name");
    if (nsys_untimed(start, end))
        return 0;
    if (mt__trace_add(n->t, KIND_KERNEL, start, end, name, len, dev, stream))
        return nsys_oom(n);
    return 0;
}

static int nsys_kernels(nsys *n)
{
    static const char *const cols[] = {"start",         "end",       "deviceId", "streamId",
                                       "demangledName", "shortName", NULL};
    unsigned mask;
    char sql[1024];
    sqlite3_stmt *st = NULL;
    int rc;
    if (nsys_columns(n, T_KERNEL, cols, &mask, NULL) || nsys_require(n, T_KERNEL, cols, mask, 0xf))
        return -1;
    if (!(mask & 0x30)) {
        mt_diag_add(n->d, n->path, 0, T_KERNEL,
                    "table " T_KERNEL " has neither \"demangledName\" nor \"shortName\": the "
                    "kernels have no names");
        return -1;
    }
    /* the shortName lookup only runs where demangledName is NULL */
    snprintf(sql, sizeof sql,
             "SELECT k.rowid, k.start, k.\"end\", k.deviceId, k.streamId, %s, %s "
             "FROM " T_KERNEL " AS k %s %s",
             mask & 0x10 ? "k.demangledName, a.id, a.value" : "NULL, NULL, NULL",
             mask & 0x20 ? "k.shortName, b.id, b.value" : "NULL, NULL, NULL",
             mask & 0x10 ? "LEFT JOIN " T_STRINGS " AS a ON a.id = k.demangledName" : "",
             mask & 0x20 ? mask & 0x10 ? "LEFT JOIN " T_STRINGS
                                         " AS b ON b.id = k.shortName AND k.demangledName IS NULL"
                                       : "LEFT JOIN " T_STRINGS " AS b ON b.id = k.shortName"
                         : "");
    if (nsys_prepare(n, T_KERNEL, sql, &st))
        return -1;
    rc = nsys_each(n, T_KERNEL, st, nsys_kernel_row);
    sqlite3_finalize(st);
    return rc;
}

/* ENUM_CUDA_MEMCPY_OPER ids (CUDA_MEMCPY_KIND_*) */
static const char *nsys_copy_name(int64_t kind)
{
    static const char *const names[] = {
        "Memcpy Unknown",        "Memcpy HtoD",           "Memcpy DtoH", "Memcpy HtoA",
        "Memcpy AtoH",           "Memcpy AtoA",           "Memcpy AtoD", "Memcpy DtoA",
        "Memcpy DtoD",           "Memcpy HtoH",           "Memcpy PtoP", "Memcpy HtoD (Unified)",
        "Memcpy DtoH (Unified)", "Memcpy DtoD (Unified)",
    };
    return kind >= 0 && kind < (int64_t)(sizeof names / sizeof names[0]) ? names[kind] : "Memcpy";
}

static int nsys_copy_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid, const char *table,
                         int is_memset)
{
    int64_t start = 0, end = 0, kind = 0;
    int dev = 0, stream = 0;
    const char *name = "Memset";
    if (nsys_times(n, st, 1, table, rowid, &start, &end) ||
        nsys_int32(n, st, 3, table, rowid, "deviceId", &dev) ||
        nsys_int32(n, st, 4, table, rowid, "streamId", &stream))
        return -1;
    if (!is_memset) {
        if (nsys_int(n, st, 5, table, rowid, "copyKind", 0, &kind, NULL))
            return -1;
        name = nsys_copy_name(kind);
    }
    if (nsys_untimed(start, end))
        return 0;
    if (mt__trace_add(n->t, KIND_MEMCPY, start, end, name, strlen(name), dev, stream))
        return nsys_oom(n);
    return 0;
}

static int nsys_memcpy_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid)
{
    return nsys_copy_row(n, st, rowid, T_MEMCPY, 0);
}

static int nsys_memset_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid)
{
    return nsys_copy_row(n, st, rowid, T_MEMSET, 1);
}

static int nsys_copies(nsys *n, const char *table, int is_memset)
{
    static const char *const cols[] = {"start", "end", "deviceId", "streamId", "copyKind", NULL};
    unsigned mask;
    char sql[512];
    sqlite3_stmt *st = NULL;
    int rc;
    if (nsys_columns(n, table, cols, &mask, NULL) ||
        nsys_require(n, table, cols, mask, is_memset ? 0xf : 0x1f))
        return -1;
    snprintf(sql, sizeof sql, "SELECT rowid, start, \"end\", deviceId, streamId%s FROM %s",
             is_memset ? "" : ", copyKind", table);
    if (nsys_prepare(n, table, sql, &st))
        return -1;
    rc = nsys_each(n, table, st, is_memset ? nsys_memset_row : nsys_memcpy_row);
    sqlite3_finalize(st);
    return rc;
}

static int nsys_nvtx_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid)
{
    int64_t start = 0, end = 0;
    const char *name = NULL;
    size_t len = 0;
    int tt = sqlite3_column_type(st, 3), r = 1;
    if (nsys_times(n, st, 1, T_NVTX, rowid, &start, &end))
        return -1;
    if (tt == SQLITE_TEXT) {
        name = (const char *)sqlite3_column_text(st, 3);
        if (!name)
            return nsys_oom(n);
        len = strnlen(name, (size_t)sqlite3_column_bytes(st, 3));
        r = 0;
    } else if (tt != SQLITE_NULL) {
        return nsys_bad(n, T_NVTX, rowid, "text", "must be text, not %s", nsys_type(tt));
    } else if ((r = nsys_string(n, st, 4, T_NVTX, rowid, "textId", &name, &len)) < 0) {
        return -1;
    }
    if (r > 0)
        return 0; /* a range without a name cannot mark anything */
    if (mt__trace_add(n->t, KIND_RANGE, start, end, name, len, -1, -1))
        return nsys_oom(n);
    return 0;
}

static int nsys_nvtx(nsys *n)
{
    static const char *const cols[] = {"start", "end", "eventType", "text", "textId", NULL};
    unsigned mask;
    char sql[768];
    sqlite3_stmt *st = NULL;
    int rc;
    if (nsys_columns(n, T_NVTX, cols, &mask, NULL) || nsys_require(n, T_NVTX, cols, mask, 0x7))
        return -1;
    /* ranges still open when the capture stopped have no end: nothing to place */
    snprintf(sql, sizeof sql,
             "SELECT e.rowid, e.start, e.\"end\", %s, %s FROM " T_NVTX " AS e %s "
             "WHERE e.eventType IN (%d, %d) AND e.\"end\" IS NOT NULL",
             mask & 0x8 ? "e.text" : "NULL",
             mask & 0x10 ? "e.textId, s.id, s.value" : "NULL, NULL, NULL",
             mask & 0x10 ? mask & 0x8 ? "LEFT JOIN " T_STRINGS
                                        " AS s ON s.id = e.textId AND e.text IS NULL"
                                      : "LEFT JOIN " T_STRINGS " AS s ON s.id = e.textId"
                         : "",
             NVTX_PUSH_POP, NVTX_START_END);
    if (nsys_prepare(n, T_NVTX, sql, &st))
        return -1;
    rc = nsys_each(n, T_NVTX, st, nsys_nvtx_row);
    sqlite3_finalize(st);
    return rc;
}

static int nsys_prefix(const char *s, size_t len, const char *p)
{
    size_t k = strlen(p);
    return len >= k && !memcmp(s, p, k);
}

static int nsys_runtime_row(nsys *n, sqlite3_stmt *st, sqlite3_int64 rowid)
{
    int64_t start = 0, end = 0;
    const char *name = NULL;
    size_t len = 0;
    int r;
    if (nsys_times(n, st, 1, T_RUNTIME, rowid, &start, &end))
        return -1;
    if ((r = nsys_string(n, st, 3, T_RUNTIME, rowid, "nameId", &name, &len)) < 0)
        return -1;
    if (r > 0)
        return nsys_bad(n, T_RUNTIME, rowid, "nameId", "is NULL, expected a string id");
    /* exported names carry a version suffix: cudaGraphLaunch_v10000 */
    if (nsys_prefix(name, len, "cudaGraphLaunch") || nsys_prefix(name, len, "cuGraphLaunch")) {
        if (mt__trace_add(n->t, KIND_GRAPH, start, end, name, len, -1, -1))
            return nsys_oom(n);
    } else if (nsys_prefix(name, len, "cudaLaunchKernel") ||
               nsys_prefix(name, len, "cuLaunchKernel")) {
        if (mt__trace_launch(n->t, start))
            return nsys_oom(n);
    }
    return 0;
}

static int nsys_runtime(nsys *n)
{
    static const char *const cols[] = {"start", "end", "nameId", NULL};
    unsigned mask;
    sqlite3_stmt *st = NULL;
    int rc;
    if (nsys_columns(n, T_RUNTIME, cols, &mask, NULL) ||
        nsys_require(n, T_RUNTIME, cols, mask, 0x7))
        return -1;
    if (nsys_prepare(n, T_RUNTIME,
                     "SELECT r.rowid, r.start, r.\"end\", r.nameId, s.id, s.value "
                     "FROM " T_RUNTIME " AS r LEFT JOIN " T_STRINGS " AS s ON s.id = r.nameId",
                     &st))
        return -1;
    rc = nsys_each(n, T_RUNTIME, st, nsys_runtime_row);
    sqlite3_finalize(st);
    return rc;
}

/* ---- entry ------------------------------------------------------------------------------ */

static int nsys_read(nsys *n)
{
    int has_kernel, has_strings, has;
    if (nsys_has_table(n, T_KERNEL, &has_kernel) || nsys_has_table(n, T_STRINGS, &has_strings))
        return -1;
    if (!has_kernel) {
        mt_diag_add(n->d, n->path, 0, NULL,
                    "not an Nsight Systems export: no " T_KERNEL
                    " table (was CUDA traced? profile with nsys profile --trace=cuda)");
        return -1;
    }
    if (!has_strings) {
        mt_diag_add(n->d, n->path, 0, NULL,
                    "not an Nsight Systems export: no " T_STRINGS
                    " table, so kernel names cannot be read");
        return -1;
    }
    if (nsys_check_strings(n) || nsys_kernels(n))
        return -1;
    if (nsys_has_table(n, T_MEMCPY, &has) || (has && nsys_copies(n, T_MEMCPY, 0)))
        return -1;
    if (nsys_has_table(n, T_MEMSET, &has) || (has && nsys_copies(n, T_MEMSET, 1)))
        return -1;
    if (nsys_has_table(n, T_NVTX, &has) || (has && nsys_nvtx(n)))
        return -1;
    if (nsys_has_table(n, T_RUNTIME, &has) || (has && nsys_runtime(n)))
        return -1;
    return 0;
}

mt_trace *mt__trace_nsys_open(const char *path, mt_diag *d)
{
    nsys n;
    int rc;
    memset(&n, 0, sizeof n);
    n.path = path;
    n.d = d;
    rc = sqlite3_open_v2(path, &n.db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        mt_diag_add(d, path, 0, NULL, "cannot open the Nsight Systems export: %s",
                    n.db ? sqlite3_errmsg(n.db) : sqlite3_errstr(rc));
        sqlite3_close(n.db);
        return NULL;
    }
    /* the file is data: its schema may not run functions with side effects */
    sqlite3_db_config(n.db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    if (!(n.t = calloc(1, sizeof *n.t))) {
        nsys_oom(&n);
        sqlite3_close(n.db);
        return NULL;
    }
    if (nsys_read(&n) || (mt__trace_finish(n.t) && nsys_oom(&n)) ||
        mt__trace_check_streams(n.t, path, d)) {
        mt_trace_destroy(&n.t);
        sqlite3_close(n.db);
        return NULL;
    }
    sqlite3_close(n.db);
    return n.t;
}
