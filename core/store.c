#include "store.h"

#include "clock.h"
#include "sha256.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/* 'MTNE' in the database header: tells a moetune store from any other
 * SQLite file before moetune writes a byte to it. */
#define MT_STORE_APP_ID 0x4D544E45
#define BUSY_TIMEOUT_MS 30000

/* ---- filesystem check ------------------------------------------------- */

static const struct fs_type {
    unsigned long magic;
    const char *name;
    int cls;
} fs_types[] = {
    /* Shared (network or cluster) filesystems: the WAL index is an mmap'ed
     * file that must be coherent between every process using the database,
     * and the POSIX locks must be honoured between them; none of these
     * promise both. */
    {0x6969UL, "NFS", MT_FS_NETWORK},
    {0x0BD00BD0UL, "Lustre", MT_FS_NETWORK},
    {0x47504653UL, "GPFS (IBM Storage Scale)", MT_FS_NETWORK},
    {0x517BUL, "SMB", MT_FS_NETWORK},
    {0xFF534D42UL, "CIFS", MT_FS_NETWORK},
    {0xFE534D42UL, "SMB2/3", MT_FS_NETWORK},
    {0x00C36400UL, "CephFS", MT_FS_NETWORK},
    {0x5346414FUL, "AFS", MT_FS_NETWORK},
    {0x6B414653UL, "kAFS", MT_FS_NETWORK},
    {0x73757245UL, "Coda", MT_FS_NETWORK},
    {0x564CUL, "NCP", MT_FS_NETWORK},
    {0x01021997UL, "9P (v9fs)", MT_FS_NETWORK},
    {0x19830326UL, "BeeGFS", MT_FS_NETWORK},
    {0x20030528UL, "OrangeFS (PVFS2)", MT_FS_NETWORK},
    {0x7461636FUL, "OCFS2", MT_FS_NETWORK},
    {0x01161970UL, "GFS2", MT_FS_NETWORK},
    {0xAAD7AAEAUL, "PanFS", MT_FS_NETWORK},
    {0x61636673UL, "ACFS", MT_FS_NETWORK},
    {0xBEEFDEADUL, "StorNext", MT_FS_NETWORK},
    /* FUSE hides what is behind it; the common FUSE mounts on clusters and
     * clouds are shared (sshfs, gcsfuse, s3fs, ceph-fuse, GlusterFS,
     * JuiceFS, virtiofs), so FUSE is refused rather than guessed at. */
    {0x65735546UL, "FUSE", MT_FS_NETWORK},
    /* Local ones, named for messages. */
    {0xEF53UL, "ext2/3/4", MT_FS_LOCAL},
    {0x01021994UL, "tmpfs", MT_FS_LOCAL},
    {0x858458F6UL, "ramfs", MT_FS_LOCAL},
    {0x794C7630UL, "overlay", MT_FS_LOCAL},
    {0x58465342UL, "XFS", MT_FS_LOCAL},
    {0x9123683EUL, "Btrfs", MT_FS_LOCAL},
    {0x2FC12FC1UL, "ZFS", MT_FS_LOCAL},
    {0xF2F52010UL, "F2FS", MT_FS_LOCAL},
    {0xCA451A4EUL, "bcachefs", MT_FS_LOCAL},
};

int mt_store_fs_classify(unsigned long f_type, const char **name)
{
    size_t i;
    /* f_type is a signed word; CIFS's magic comes back negative on 32 bits. */
    f_type &= 0xFFFFFFFFUL;
    for (i = 0; i < sizeof fs_types / sizeof fs_types[0]; i++)
        if (fs_types[i].magic == f_type) {
            if (name)
                *name = fs_types[i].name;
            return fs_types[i].cls;
        }
    if (name)
        *name = NULL;
    return MT_FS_LOCAL;
}

int mt_store_fs_magic(const char *path, unsigned long *f_type)
{
    struct statfs sf;
    if (statfs(path, &sf) != 0)
        return -errno;
    *f_type = (unsigned long)sf.f_type & 0xFFFFFFFFUL;
    return 0;
}

/* 0 when path may hold a WAL database, -1 with the reason in d. */
static int check_fs(const char *path, unsigned long forced, mt_diag *d)
{
    unsigned long magic = forced;
    const char *name;
    int rc;
    if (!magic && (rc = mt_store_fs_magic(path, &magic)) != 0) {
        mt_diag_add(d, path, 0, NULL, "cannot tell which filesystem this is (statfs: %s)",
                    strerror(-rc));
        return -1;
    }
    if (mt_store_fs_classify(magic, &name) == MT_FS_LOCAL)
        return 0;
    mt_diag_add(d, path, 0, NULL,
                "is on %s (statfs type 0x%lX), a network or shared filesystem%s: the results "
                "store uses SQLite's WAL mode, which needs shared memory and file locks that "
                "%s does not guarantee between processes and hosts, so results could be lost "
                "or the database corrupted; use a tune directory on a local disk (for example "
                "under /tmp or the node's local scratch) and copy it to shared storage "
                "afterwards",
                name, magic,
                (magic & 0xFFFFFFFFUL) == 0x65735546UL
                    ? " as far as moetune can tell (FUSE may hide sshfs, gcsfuse, s3fs, "
                      "ceph-fuse, ...)"
                    : "",
                name);
    return -1;
}

/* ---- small helpers ---------------------------------------------------- */

struct mt_store {
    sqlite3 *db;
    char *dir;
    char *path;
    char *fingerprint;
    char *canonical;
    char *contract_name;
    sqlite3_stmt *st[16];
};

enum {
    ST_FIND_RUN,
    ST_GET_CONFIG,
    ST_PUT_CONFIG,
    ST_PUT_RUN,
    ST_PUT_SAMPLE,
    ST_PUT_GPU,
    ST_PUT_EVENT,
    ST_PUT_DECISION,
    ST_PUT_DECISION_RUN,
    ST_GET_MEMO,
    ST_PUT_MEMO,
    ST_COUNT
};

static const char *const st_sql[ST_COUNT] = {
    [ST_FIND_RUN] = "SELECT r.id, r.config_id, c.canonical, r.kind, r.replicate, r.retry, "
                    "r.outcome, r.evidence, r.worker, r.fingerprint, r.started, r.ended, "
                    "r.wall_s, r.sim_s, r.gpu_hours, r.log_path FROM runs r "
                    "JOIN configs c ON c.id = r.config_id "
                    "WHERE r.config_id = ?1 AND r.kind = ?2 AND r.replicate = ?3 "
                    "AND (?4 < 0 OR r.retry = ?4) ORDER BY r.retry DESC LIMIT 1",
    [ST_GET_CONFIG] = "SELECT canonical FROM configs WHERE id = ?1",
    [ST_PUT_CONFIG] = "INSERT INTO configs(id, canonical, created) VALUES (?1, ?2, ?3)",
    [ST_PUT_RUN] = "INSERT INTO runs(config_id, kind, replicate, retry, outcome, evidence, "
                   "worker, fingerprint, started, ended, wall_s, sim_s, gpu_hours, log_path) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [ST_PUT_SAMPLE] = "INSERT INTO samples(run_id, iteration, elapsed_ms, tflops, losses, "
                      "grad_norm, skipped, nan) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_PUT_GPU] = "INSERT INTO gpu_memory(run_id, rank, host, gpu, peak_bytes, alloc_bytes, "
                   "source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_PUT_EVENT] = "INSERT INTO events(time, kind, text) VALUES (?1, ?2, ?3)",
    [ST_PUT_DECISION] = "INSERT INTO decisions(kind, variable, candidate_id, control_id, "
                        "verdict, statistics, evidence, created) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_PUT_DECISION_RUN] =
        "INSERT INTO decision_runs(decision_id, run_id, arm) VALUES (?1, ?2, ?3)",
    [ST_GET_MEMO] = "SELECT value FROM memo WHERE key = ?1",
    [ST_PUT_MEMO] = "INSERT OR IGNORE INTO memo(key, value, created) VALUES (?1, ?2, ?3)",
};

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int one_of(const char *v, const char *const *set)
{
    size_t i;
    for (i = 0; v && set[i]; i++)
        if (!strcmp(v, set[i]))
            return 1;
    return 0;
}

static const char *const kinds[] = {"fit", "screen", "profile", "validate", "bisect", NULL};
static const char *const outcomes[] = {"ok",    "oom",   "nan",          "hang",    "timeout",
                                       "crash", "infra", "launch_error", "skipped", NULL};
static const char *const sources[] = {"nvml", "sim", "log", NULL};
static const char *const verdicts[] = {"better",   "worse",    "same", "unknown",
                                       "accepted", "rejected", NULL};

static void db_error(mt_store *s, mt_diag *d, const char *what)
{
    mt_diag_add(d, s->path, 0, NULL, "%s: %s (SQLite error %d)", what, sqlite3_errmsg(s->db),
                sqlite3_extended_errcode(s->db));
}

/* A cached statement, reset with its bindings cleared; NULL on error. */
static sqlite3_stmt *stmt(mt_store *s, int which, mt_diag *d)
{
    sqlite3_stmt *st = s->st[which];
    if (!st) {
        if (sqlite3_prepare_v3(s->db, st_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &s->st[which],
                               NULL) != SQLITE_OK) {
            db_error(s, d, "cannot prepare a statement");
            return NULL;
        }
        return s->st[which];
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

static int exec(mt_store *s, const char *sql, mt_diag *d, const char *what)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        db_error(s, d, what);
        return -1;
    }
    return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* A growable string. */
typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void buf_add(buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        char *np;
        while (cap < b->n + n + 1)
            cap *= 2;
        np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void buf_str(buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* Shortest "%g" spelling that reads back as exactly v. */
static void fmt_double(char out[40], double v)
{
    snprintf(out, 40, "%.15g", v);
    if (strtod(out, NULL) != v)
        snprintf(out, 40, "%.17g", v);
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F))
            return 0; /* overlong, surrogate */
        return 3;
    }
    if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] > 0x8F))
            return 0;
        return 4;
    }
    return 0;
}

/* Appends s as a JSON string literal; log text can hold any bytes, and JSON
 * must be UTF-8, so an invalid byte becomes U+FFFD. */
static void buf_json_string(buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    char esc[8];
    buf_add(b, "\"", 1);
    while (*p) {
        const unsigned char *run = p;
        size_t n;
        /* copy plain printable ASCII in one piece */
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            buf_add(b, (const char *)run, (size_t)(p - run));
        if (!*p)
            break;
        n = utf8_len(p);
        if (n == 0) {
            buf_add(b, "\xEF\xBF\xBD", 3);
            p++;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            buf_add(b, esc, 2);
            p++;
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            buf_add(b, esc, 6);
            p++;
        } else {
            buf_add(b, (const char *)p, n);
            p += n;
        }
    }
    buf_add(b, "\"", 1);
}

/* A copy of s with invalid UTF-8 bytes replaced by U+FFFD; caller frees. */
static char *utf8_clean(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    buf b = {0};
    size_t n;
    while (*p && (n = utf8_len(p)) != 0)
        p += n;
    if (!*p)
        return strdup(s);                          /* the common case: nothing to replace */
    buf_add(&b, s, (size_t)((const char *)p - s)); /* the valid prefix */
    while (*p) {
        n = utf8_len(p);
        if (n == 0)
            buf_add(&b, "\xEF\xBF\xBD", 3), p++;
        else
            buf_add(&b, (const char *)p, n), p += n;
    }
    if (!b.p && !b.oom)
        buf_add(&b, "", 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- transactions ----------------------------------------------------- */

/* Starts a write: its own IMMEDIATE transaction, or a savepoint inside the
 * caller's.  Returns 0 (own), 1 (savepoint) or -1. */
static int tx_begin(mt_store *s, mt_diag *d)
{
    if (sqlite3_get_autocommit(s->db))
        return exec(s, "BEGIN IMMEDIATE", d, "cannot start a write transaction");
    return exec(s, "SAVEPOINT mt_write", d, "cannot start a savepoint") ? -1 : 1;
}

/* Ends what tx_begin started: commits (or releases) when ok, else undoes
 * it.  0 when the work is kept, -1 when it is not (not ok, or the commit
 * failed). */
static int tx_end(mt_store *s, int tok, int ok, mt_diag *d)
{
    size_t i;
    /* A statement stopped by an error is still active until reset; reset
     * them all so the rollback below leaves nothing pending. */
    for (i = 0; !ok && i < ST_COUNT; i++)
        if (s->st[i])
            sqlite3_reset(s->st[i]);
    if (ok) {
        if (tok == 1)
            return exec(s, "RELEASE mt_write", d, "cannot release a savepoint");
        if (exec(s, "COMMIT", d, "cannot commit") == 0)
            return 0;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    if (tok == 1)
        sqlite3_exec(s->db, "ROLLBACK TO mt_write; RELEASE mt_write", NULL, NULL, NULL);
    else if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int mt_store_begin(mt_store *s, mt_diag *d)
{
    if (!sqlite3_get_autocommit(s->db)) {
        mt_diag_add(d, s->path, 0, NULL, "a transaction is already open on this store");
        return -1;
    }
    return exec(s, "BEGIN IMMEDIATE", d, "cannot start a write transaction");
}

int mt_store_commit(mt_store *s, mt_diag *d)
{
    if (sqlite3_get_autocommit(s->db)) {
        mt_diag_add(d, s->path, 0, NULL, "commit without a transaction");
        return -1;
    }
    if (exec(s, "COMMIT", d, "cannot commit") == 0)
        return 0;
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int mt_store_rollback(mt_store *s)
{
    if (sqlite3_get_autocommit(s->db))
        return 0;
    return sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* ---- schema ----------------------------------------------------------- */

/* The engine's memo: a finished job's or decision's summary by key, so a
 * resumed tune replays without re-running anything. */
#define MEMO_TABLE                                                                                 \
    "CREATE TABLE IF NOT EXISTS memo("                                                             \
    " key TEXT PRIMARY KEY,"                                                                       \
    " value TEXT NOT NULL CHECK (json_valid(value)),"                                              \
    " created REAL NOT NULL);"

static const char schema_v1[] =
    "CREATE TABLE schema_version("
    " version INTEGER PRIMARY KEY,"
    " applied REAL NOT NULL,"
    " note TEXT NOT NULL);"
    "CREATE TABLE meta("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " fingerprint TEXT NOT NULL CHECK (length(fingerprint) = 64),"
    " contract_name TEXT,"
    " contract_path TEXT,"
    " canonical TEXT NOT NULL,"
    " created REAL NOT NULL);"
    "CREATE TABLE configs("
    " id TEXT PRIMARY KEY CHECK (length(id) = 16),"
    " canonical TEXT NOT NULL,"
    " created REAL NOT NULL);"
    "CREATE TABLE runs("
    " id INTEGER PRIMARY KEY,"
    " config_id TEXT NOT NULL REFERENCES configs(id),"
    " kind TEXT NOT NULL CHECK (kind IN ('fit','screen','profile','validate','bisect')),"
    " replicate INTEGER NOT NULL CHECK (replicate >= 0),"
    " retry INTEGER NOT NULL CHECK (retry >= 0),"
    " outcome TEXT NOT NULL CHECK (outcome IN ('ok','oom','nan','hang','timeout','crash',"
    "'infra','launch_error','skipped')),"
    " evidence TEXT,"
    " worker TEXT,"
    " fingerprint TEXT CHECK (fingerprint IS NULL OR json_valid(fingerprint)),"
    " started REAL,"
    " ended REAL,"
    " wall_s REAL,"
    " sim_s REAL,"
    " gpu_hours REAL,"
    " log_path TEXT,"
    " UNIQUE (config_id, kind, replicate, retry));"
    "CREATE TABLE samples("
    " run_id INTEGER NOT NULL REFERENCES runs(id),"
    " iteration INTEGER NOT NULL,"
    " elapsed_ms REAL,"
    " tflops REAL,"
    " losses TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(losses)),"
    " grad_norm REAL,"
    " skipped INTEGER NOT NULL DEFAULT 0,"
    " nan INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (run_id, iteration)) WITHOUT ROWID;"
    "CREATE TABLE gpu_memory("
    " id INTEGER PRIMARY KEY,"
    " run_id INTEGER NOT NULL REFERENCES runs(id),"
    " rank INTEGER,"
    " host TEXT,"
    " gpu INTEGER,"
    " peak_bytes INTEGER NOT NULL CHECK (peak_bytes >= 0),"
    " alloc_bytes INTEGER,"
    " source TEXT NOT NULL CHECK (source IN ('nvml','sim','log')));"
    "CREATE INDEX gpu_memory_run ON gpu_memory(run_id);"
    "CREATE TABLE decisions("
    " id INTEGER PRIMARY KEY,"
    " kind TEXT NOT NULL CHECK (length(kind) > 0),"
    " variable TEXT,"
    " candidate_id TEXT NOT NULL REFERENCES configs(id),"
    " control_id TEXT REFERENCES configs(id),"
    " verdict TEXT NOT NULL CHECK (verdict IN ('better','worse','same','unknown',"
    "'accepted','rejected')),"
    " statistics TEXT CHECK (statistics IS NULL OR json_valid(statistics)),"
    " evidence TEXT,"
    " created REAL NOT NULL);"
    "CREATE TABLE decision_runs("
    " decision_id INTEGER NOT NULL REFERENCES decisions(id),"
    " run_id INTEGER NOT NULL REFERENCES runs(id),"
    " arm TEXT NOT NULL CHECK (arm IN ('candidate','control')),"
    " PRIMARY KEY (decision_id, run_id)) WITHOUT ROWID;"
    "CREATE INDEX decision_runs_run ON decision_runs(run_id);"
    "CREATE TABLE events("
    " id INTEGER PRIMARY KEY,"
    " time REAL NOT NULL,"
    " kind TEXT NOT NULL,"
    " text TEXT NOT NULL);"
    "CREATE INDEX events_time ON events(time);"
    MEMO_TABLE;

/* Runs a one-row, one-column integer query; 0, or -1 (errors in d). */
static int query_int(mt_store *s, const char *sql, long long *out, mt_diag *d, const char *what)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        db_error(s, d, what);
        return -1;
    }
    if (sqlite3_step(st) == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = 0;
    } else {
        db_error(s, d, what);
    }
    sqlite3_finalize(st);
    return rc;
}

/* A canonical contract text split into "key=value" lines, sorted by key. */
typedef struct canon_line {
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
} canon_line;

static int cmp_line(const void *a, const void *b)
{
    const canon_line *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static canon_line *split_canon(const char *text, size_t *n)
{
    size_t cap = 64, k = 0;
    canon_line *v = malloc(cap * sizeof *v);
    const char *p = text;
    while (v && p && *p) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (end > p) {
            if (k == cap) {
                canon_line *nv = realloc(v, (cap *= 2) * sizeof *v);
                if (!nv) {
                    free(v);
                    return NULL;
                }
                v = nv;
            }
            v[k].key = p;
            v[k].klen = (size_t)((eq ? eq : end) - p);
            v[k].val = eq ? eq + 1 : end;
            v[k].vlen = (size_t)(end - v[k].val);
            k++;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (v)
        qsort(v, k, sizeof *v, cmp_line);
    *n = k;
    return v;
}

/* One diag item per field that differs between the stored and the given
 * canonical contract; returns how many. */
static size_t diff_contract(const char *stored, const mt_contract *c, mt_diag *d)
{
    size_t na = 0, nb = 0, i = 0, j = 0, n = 0;
    canon_line *a = split_canon(stored, &na), *b = split_canon(c->canonical, &nb);
    while (a && b && (i < na || j < nb)) {
        int cmp = i == na ? 1 : j == nb ? -1 : cmp_line(&a[i], &b[j]);
        const canon_line *l = cmp <= 0 ? &a[i] : &b[j];
        char *key = strndup(l->key, l->klen);
        if (!key)
            break;
        if (cmp < 0) {
            mt_diag_add(d, c->path, mt_contract_line(c, key), key,
                        "%.*s (store) vs absent (contract)", (int)a[i].vlen, a[i].val);
            n++;
        } else if (cmp > 0) {
            mt_diag_add(d, c->path, mt_contract_line(c, key), key,
                        "absent (store) vs %.*s (contract)", (int)b[j].vlen, b[j].val);
            n++;
        } else if (a[i].vlen != b[j].vlen || memcmp(a[i].val, b[j].val, a[i].vlen)) {
            mt_diag_add(d, c->path, mt_contract_line(c, key), key,
                        "%.*s (store) vs %.*s (contract)", (int)a[i].vlen, a[i].val, (int)b[j].vlen,
                        b[j].val);
            n++;
        }
        free(key);
        if (cmp <= 0)
            i++;
        if (cmp >= 0)
            j++;
    }
    free(a);
    free(b);
    return n;
}

/* A new database gets the schema and its version (only with a contract);
 * any store gets the memo table (with a contract) and has its version
 * checked.  0, or -1 with the reason in d. */
static int schema_version_check(mt_store *s, const mt_contract *c, mt_diag *d)
{
    long long ntab = 0, version = 0;
    if (query_int(s, "SELECT count(*) FROM sqlite_master", &ntab, d, "cannot read the schema"))
        return -1;
    if (ntab == 0) {
        char sql[160];
        if (!c) {
            mt_diag_add(d, s->path, 0, NULL,
                        "holds no results store yet (an empty database); run a tune into "
                        "this directory first");
            return -1;
        }
        if (exec(s, schema_v1, d, "cannot create the schema"))
            return -1;
        snprintf(sql, sizeof sql,
                 "PRAGMA application_id = %d; INSERT INTO schema_version VALUES (%d, %.6f, "
                 "'created')",
                 MT_STORE_APP_ID, MT_STORE_SCHEMA_VERSION, mt_clock_wall_s());
        if (exec(s, sql, d, "cannot record the schema version"))
            return -1;
    }
    /* stores made before the memo existed get it on first open */
    if (c && exec(s, MEMO_TABLE, d, "cannot create the memo table"))
        return -1;
    if (query_int(s, "SELECT coalesce(max(version), 0) FROM schema_version", &version, d,
                  "cannot read the schema version"))
        return -1;
    if (version > MT_STORE_SCHEMA_VERSION) {
        mt_diag_add(d, s->path, 0, NULL,
                    "was written by a newer moetune (store schema %lld; this build knows up "
                    "to %d); use that moetune or a new tune directory",
                    version, MT_STORE_SCHEMA_VERSION);
        return -1;
    }
    if (version < 1) {
        mt_diag_add(d, s->path, 0, NULL,
                    "has no schema version; it is damaged or not a moetune store");
        return -1;
    }
    /* Versions below MT_STORE_SCHEMA_VERSION would be migrated here. */
    return 0;
}

/* The store's recorded contract (the row st stands on) into s, checked
 * against c when given.  0, or -1 with the differing fields in d. */
static int check_recorded_contract(mt_store *s, const mt_contract *c, sqlite3_stmt *st, mt_diag *d)
{
    s->fingerprint = col_dup(st, 0);
    s->canonical = col_dup(st, 1);
    s->contract_name = col_dup(st, 2);
    if (!s->fingerprint || !s->canonical)
        return -1;
    if (c && strcmp(s->fingerprint, c->fingerprint) != 0) {
        /* The summary comes first but needs the count: diff into a
         * scratch list, then copy it after the summary. */
        mt_diag *fields = mt_diag_new();
        size_t i, n = diff_contract(s->canonical, c, fields);
        mt_diag_add(d, s->path, 0, NULL,
                    "was made for contract '%s' (fingerprint %.12s), not for %s "
                    "(fingerprint %.12s): %zu field%s differ%s%s; resume with the original "
                    "contract, or use a new tune directory for this one",
                    s->contract_name ? s->contract_name : "?", s->fingerprint,
                    c->path ? c->path : "this contract", c->fingerprint, n, n == 1 ? "" : "s",
                    n == 1 ? "s" : "",
                    n ? ""
                      : " (the canonical texts are equal: the fingerprint is computed "
                        "differently by this moetune)");
        for (i = 0; i < mt_diag_count(fields); i++) {
            const mt_diag_item *it = mt_diag_at(fields, i);
            mt_diag_add(d, it->file, it->line, it->field, "%s", it->message);
        }
        mt_diag_destroy(&fields);
        return -1;
    }
    return 0;
}

/* Records contract c as the store's (a new store) and keeps it in s.  0,
 * or -1 with the reason in d. */
static int record_contract(mt_store *s, const mt_contract *c, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO meta(id, fingerprint, contract_name, contract_path, "
                           "canonical, created) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
                           -1, &st, NULL) != SQLITE_OK) {
        db_error(s, d, "cannot record the contract");
        goto out;
    }
    bind_text(st, 1, c->fingerprint);
    bind_text(st, 2, c->name);
    bind_text(st, 3, c->path);
    bind_text(st, 4, c->canonical);
    sqlite3_bind_double(st, 5, mt_clock_wall_s());
    if (sqlite3_step(st) != SQLITE_DONE) {
        db_error(s, d, "cannot record the contract");
        goto out;
    }
    s->fingerprint = strdup(c->fingerprint);
    s->canonical = strdup(c->canonical);
    s->contract_name = dupstr(c->name);
    if (s->fingerprint && s->canonical)
        rc = 0;
out:
    sqlite3_finalize(st);
    return rc;
}

/* Creates the schema in a new database, or checks an existing one's version,
 * then records or checks the contract.  Runs in one IMMEDIATE transaction so
 * that two processes creating the same store at once cannot both do it
 * (the second finds the first one's schema). */
static int init_schema(mt_store *s, const mt_contract *c, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    int ok = 0, tok, rc;

    /* Without a contract nothing will be written: a read transaction, so
     * `moetune runs` does not queue behind a tune that is writing. */
    if (!c)
        tok = exec(s, "BEGIN", d, "cannot start a read transaction");
    else
        tok = tx_begin(s, d);
    if (tok < 0)
        return -1;
    if (schema_version_check(s, c, d))
        goto out;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT fingerprint, canonical, contract_name FROM meta WHERE id = 1",
                           -1, &st, NULL) != SQLITE_OK) {
        db_error(s, d, "cannot read the contract of the store");
        goto out;
    }
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        db_error(s, d, "cannot read the contract of the store");
        goto out;
    }
    if (rc == SQLITE_ROW) {
        if (check_recorded_contract(s, c, st, d))
            goto out;
    } else if (!c) {
        mt_diag_add(d, s->path, 0, NULL, "records no contract; it is damaged");
        goto out;
    } else {
        sqlite3_finalize(st);
        st = NULL;
        if (record_contract(s, c, d))
            goto out;
    }
    ok = 1;
out:
    sqlite3_finalize(st);
    return tx_end(s, tok, ok, d);
}

/* ---- open / close ----------------------------------------------------- */

static int mkdir_p(const char *dir, mt_diag *d)
{
    char *p = strdup(dir), *q;
    struct stat sb;
    int rc = 0;
    if (!p)
        return -1;
    for (q = p + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                break; /* the final mkdir reports it */
            *q = '/';
        }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        mt_diag_add(d, dir, 0, NULL, "cannot create the tune directory: %s", strerror(errno));
        rc = -1;
    } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        mt_diag_add(d, dir, 0, NULL, "is not a directory; give a tune directory");
        rc = -1;
    }
    free(p);
    return rc;
}

/* The tune directory made (with a contract) or found, on a filesystem
 * SQLite can lock, and the store file in it a regular file (or absent,
 * with a contract: *flags then let SQLite create it).  0, or -1 with the
 * reason in d. */
static int locate_store(mt_store *s, const char *dir, const mt_contract *c, unsigned long fs_magic,
                        int *flags, mt_diag *d)
{
    struct stat sb;
    int exists;
    if (c) {
        if (mkdir_p(dir, d))
            return -1;
        *flags |= SQLITE_OPEN_CREATE;
    } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        mt_diag_add(d, dir, 0, NULL, "no such tune directory");
        return -1;
    }
    if (check_fs(dir, fs_magic, d))
        return -1;
    exists = stat(s->path, &sb) == 0;
    if (exists && !S_ISREG(sb.st_mode)) {
        mt_diag_add(d, s->path, 0, NULL, "is not a regular file; move it away");
        return -1;
    }
    if (!exists && !c) {
        mt_diag_add(d, s->path, 0, NULL,
                    "not found: this directory holds no results store; give the directory "
                    "a tune wrote to");
        return -1;
    }
    /* The file may be a link onto another filesystem. */
    if (exists && !fs_magic && check_fs(s->path, 0, d))
        return -1;
    return 0;
}

/* Look before writing anything: a garbage file or someone else's database
 * must come out unchanged.  0 when the open database is empty (and c may
 * create the store) or carries moetune's application id; -1 otherwise. */
static int check_app_id(mt_store *s, const mt_contract *c, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    long long appid = 0, ntab = 0;
    if (sqlite3_prepare_v2(s->db, "PRAGMA application_id", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        int code = sqlite3_extended_errcode(s->db);
        if ((code & 0xFF) == SQLITE_NOTADB || (code & 0xFF) == SQLITE_CORRUPT)
            mt_diag_add(d, s->path, 0, NULL,
                        "is not a moetune results store (not an SQLite database: %s); move "
                        "it away or choose another tune directory",
                        sqlite3_errmsg(s->db));
        else
            db_error(s, d, "cannot read the results store");
        sqlite3_finalize(st);
        return -1;
    }
    appid = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (query_int(s, "SELECT count(*) FROM sqlite_master", &ntab, d,
                  "cannot read the results store"))
        return -1;
    if (ntab == 0 && !c) {
        mt_diag_add(d, s->path, 0, NULL,
                    "holds no results store yet (an empty database); run a tune into this "
                    "directory first");
        return -1;
    }
    if (ntab > 0 && appid != MT_STORE_APP_ID) {
        mt_diag_add(d, s->path, 0, NULL,
                    "is an SQLite database but not a moetune results store (application_id "
                    "0x%llX); move it away or choose another tune directory",
                    (unsigned long long)appid);
        return -1;
    }
    return 0;
}

/* WAL mode, full sync and enforced foreign keys on the open database.
 * 0, or -1 with the reason in d. */
static int configure_db(mt_store *s, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    long long fk = 0;
    {
        const unsigned char *mode = NULL;
        if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            mode = sqlite3_column_text(st, 0);
        if (!mode || strcmp((const char *)mode, "wal") != 0) {
            if (mode)
                mt_diag_add(d, s->path, 0, NULL,
                            "SQLite would not switch to WAL mode (journal_mode stays '%s'); "
                            "use a tune directory on a local disk",
                            mode);
            else
                db_error(s, d, "cannot switch the results store to WAL mode");
            sqlite3_finalize(st);
            return -1;
        }
        sqlite3_finalize(st);
    }
    if (exec(s, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON", d,
             "cannot configure the results store"))
        return -1;
    if (query_int(s, "PRAGMA foreign_keys", &fk, d, "cannot read foreign_keys") || fk != 1) {
        mt_diag_add(d, s->path, 0, NULL,
                    "this SQLite library does not enforce foreign keys; rebuild against one "
                    "that does");
        return -1;
    }
    return 0;
}

mt_store *mt_store_open_fs(const char *dir, const mt_contract *c, unsigned long fs_magic,
                           mt_diag *d)
{
    mt_store *s;
    int flags = SQLITE_OPEN_READWRITE;

    if (!dir || !*dir) {
        mt_diag_add(d, NULL, 0, NULL, "no tune directory given");
        return NULL;
    }
    if (c && (!c->canonical || !c->fingerprint[0])) {
        mt_diag_add(d, c->path, 0, NULL, "contract has no canonical form; load it first");
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dir = strdup(dir);
    s->path = malloc(strlen(dir) + sizeof "/" MT_STORE_FILE);
    if (!s->dir || !s->path)
        goto fail;
    sprintf(s->path, "%s/%s", dir, MT_STORE_FILE);
    if (locate_store(s, dir, c, fs_magic, &flags, d))
        goto fail;

    if (sqlite3_open_v2(s->path, &s->db, flags, NULL) != SQLITE_OK) {
        if (s->db)
            db_error(s, d, "cannot open the results store");
        else
            mt_diag_add(d, s->path, 0, NULL, "cannot open the results store: out of memory");
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    if (check_app_id(s, c, d) || configure_db(s, d) || init_schema(s, c, d))
        goto fail;
    return s;
fail:
    mt_store_destroy(&s);
    return NULL;
}

mt_store *mt_store_open(const char *dir, const mt_contract *c, mt_diag *d)
{
    return mt_store_open_fs(dir, c, 0, d);
}

void mt_store_destroy(mt_store **sp)
{
    mt_store *s;
    size_t i;
    if (!sp || !*sp)
        return;
    s = *sp;
    for (i = 0; i < sizeof s->st / sizeof s->st[0]; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db) {
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(s->db);
    }
    free(s->dir);
    free(s->path);
    free(s->fingerprint);
    free(s->canonical);
    free(s->contract_name);
    free(s);
    *sp = NULL;
}

const char *mt_store_path(const mt_store *s)
{
    return s->path;
}

const char *mt_store_fingerprint(const mt_store *s)
{
    return s->fingerprint;
}

const char *mt_store_contract_text(const mt_store *s)
{
    return s->canonical;
}

/* ---- writes ----------------------------------------------------------- */

static int is_config_id(const char *id)
{
    size_t i;
    if (!id || strlen(id) != 16)
        return 0;
    for (i = 0; i < 16; i++)
        if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
            return 0;
    return 1;
}

/* JSON object text (or NULL) from outside: 0 when acceptable. */
static int check_json_object(mt_store *s, const char *text, const char *what, mt_diag *d)
{
    cJSON *j;
    if (!text)
        return 0;
    j = cJSON_ParseWithOpts(text, NULL, 1); /* nothing may follow the object */
    if (!j || !cJSON_IsObject(j)) {
        mt_diag_add(d, s->path, 0, NULL, "%s is not a JSON object: %.80s", what, text);
        cJSON_Delete(j);
        return -1;
    }
    cJSON_Delete(j);
    return 0;
}

/* Makes sure config id is stored, with canonical text when new. */
static int put_config(mt_store *s, const char *id, const char *canonical, mt_diag *d)
{
    sqlite3_stmt *st = stmt(s, ST_GET_CONFIG, d);
    char hex[65];
    int rc;
    if (!st)
        return -1;
    bind_text(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *have = (const char *)sqlite3_column_text(st, 0);
        if (canonical && have && strcmp(have, canonical) != 0) {
            mt_diag_add(d, s->path, 0, NULL,
                        "config %s is stored with a different canonical text than the one "
                        "given; config ids must be mt_config_id of their canonical text",
                        id);
            sqlite3_reset(st);
            return -1;
        }
        sqlite3_reset(st);
        return 0;
    }
    if (rc != SQLITE_DONE) {
        db_error(s, d, "cannot look up a config");
        return -1;
    }
    sqlite3_reset(st);
    if (!canonical) {
        mt_diag_add(d, s->path, 0, NULL,
                    "config %s is not stored yet; pass its canonical text with it", id);
        return -1;
    }
    mt_sha256_hex(canonical, strlen(canonical), hex);
    if (memcmp(hex, id, 16) != 0) {
        mt_diag_add(d, s->path, 0, NULL,
                    "config id %s does not match its canonical text (whose id is %.16s)", id, hex);
        return -1;
    }
    if (!(st = stmt(s, ST_PUT_CONFIG, d)))
        return -1;
    bind_text(st, 1, id);
    bind_text(st, 2, canonical);
    sqlite3_bind_double(st, 3, mt_clock_wall_s());
    if (sqlite3_step(st) != SQLITE_DONE) {
        db_error(s, d, "cannot store a config");
        return -1;
    }
    return 0;
}

static int check_run(mt_store *s, const mt_store_run *r, mt_diag *d)
{
    if (!is_config_id(r->config_id)) {
        mt_diag_add(d, s->path, 0, NULL, "run: config id '%s' is not 16 lowercase hex digits",
                    r->config_id ? r->config_id : "(null)");
        return -1;
    }
    if (!one_of(r->kind, kinds)) {
        mt_diag_add(d, s->path, 0, NULL,
                    "run: kind '%s' is not one of fit, screen, profile, validate, bisect",
                    r->kind ? r->kind : "(null)");
        return -1;
    }
    if (!one_of(r->outcome, outcomes)) {
        mt_diag_add(d, s->path, 0, NULL,
                    "run: outcome '%s' is not one of ok, oom, nan, hang, timeout, crash, "
                    "infra, launch_error, skipped",
                    r->outcome ? r->outcome : "(null)");
        return -1;
    }
    if (r->replicate < 0 || r->retry < 0) {
        mt_diag_add(d, s->path, 0, NULL, "run: replicate (%d) and retry (%d) must not be negative",
                    r->replicate, r->retry);
        return -1;
    }
    return check_json_object(s, r->fingerprint, "run fingerprint", d);
}

/* The losses of a sample as a JSON object; non-finite values, which JSON
 * cannot spell, as the strings "nan", "inf", "-inf".  Caller frees. */
static char *losses_json(const mt_store_sample *v)
{
    buf b = {0};
    size_t i;
    char num[40];
    buf_str(&b, "{");
    for (i = 0; i < v->n_losses; i++) {
        double x = v->losses[i].value;
        if (i)
            buf_str(&b, ",");
        buf_json_string(&b, v->losses[i].key ? v->losses[i].key : "");
        buf_str(&b, ":");
        if (isnan(x))
            buf_str(&b, "\"nan\"");
        else if (isinf(x))
            buf_str(&b, x > 0 ? "\"inf\"" : "\"-inf\"");
        else {
            fmt_double(num, x);
            buf_str(&b, num);
        }
    }
    buf_str(&b, "}");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static int put_samples(mt_store *s, int64_t run_id, const mt_store_sample *v, size_t n, mt_diag *d)
{
    size_t i;
    for (i = 0; i < n; i++) {
        sqlite3_stmt *st = stmt(s, ST_PUT_SAMPLE, d);
        char *losses;
        int rc;
        if (!st)
            return -1;
        if (v[i].n_losses && !v[i].losses) {
            mt_diag_add(d, s->path, 0, NULL, "sample of iteration %ld: losses missing",
                        v[i].iteration);
            return -1;
        }
        if (!(losses = losses_json(&v[i])))
            return -1;
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, v[i].iteration);
        bind_real(st, 3, v[i].elapsed_ms);
        bind_real(st, 4, v[i].tflops);
        sqlite3_bind_text(st, 5, losses, -1, free);
        bind_real(st, 6, v[i].grad_norm);
        sqlite3_bind_int64(st, 7, v[i].skipped);
        sqlite3_bind_int64(st, 8, v[i].nan);
        rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) {
            if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
                mt_diag_add(d, s->path, 0, NULL,
                            "run %lld: iteration %ld is given twice; the parser must give one "
                            "sample per iteration",
                            (long long)run_id, v[i].iteration);
            else if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
                mt_diag_add(d, s->path, 0, NULL, "run %lld is not stored", (long long)run_id);
            else
                db_error(s, d, "cannot store a sample");
            return -1;
        }
    }
    return 0;
}

static int put_gpus(mt_store *s, int64_t run_id, const mt_store_gpu_mem *v, size_t n, mt_diag *d)
{
    size_t i;
    for (i = 0; i < n; i++) {
        sqlite3_stmt *st;
        int rc;
        if (!one_of(v[i].source, sources)) {
            mt_diag_add(d, s->path, 0, NULL,
                        "GPU memory row %zu: source '%s' is not nvml, sim or log", i,
                        v[i].source ? v[i].source : "(null)");
            return -1;
        }
        if (v[i].peak_bytes < 0) {
            mt_diag_add(d, s->path, 0, NULL,
                        "GPU memory row %zu (source %s, rank %d): the peak (%lld bytes) is "
                        "negative",
                        i, v[i].source, v[i].rank, (long long)v[i].peak_bytes);
            return -1;
        }
        if (!(st = stmt(s, ST_PUT_GPU, d)))
            return -1;
        sqlite3_bind_int64(st, 1, run_id);
        if (v[i].rank >= 0)
            sqlite3_bind_int(st, 2, v[i].rank);
        bind_text(st, 3, v[i].host);
        if (v[i].gpu >= 0)
            sqlite3_bind_int(st, 4, v[i].gpu);
        sqlite3_bind_int64(st, 5, v[i].peak_bytes);
        if (v[i].alloc_bytes >= 0)
            sqlite3_bind_int64(st, 6, v[i].alloc_bytes);
        bind_text(st, 7, v[i].source);
        rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) {
            if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
                mt_diag_add(d, s->path, 0, NULL, "run %lld is not stored", (long long)run_id);
            else
                db_error(s, d, "cannot store GPU memory");
            return -1;
        }
    }
    return 0;
}

static void fill_run(sqlite3_stmt *st, mt_store_run *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->config_id = col_dup(st, 1);
    r->config_canonical = col_dup(st, 2);
    r->kind = col_dup(st, 3);
    r->replicate = sqlite3_column_int(st, 4);
    r->retry = sqlite3_column_int(st, 5);
    r->outcome = col_dup(st, 6);
    r->evidence = col_dup(st, 7);
    r->worker = col_dup(st, 8);
    r->fingerprint = col_dup(st, 9);
    r->started = col_real(st, 10);
    r->ended = col_real(st, 11);
    r->wall_s = col_real(st, 12);
    r->sim_s = col_real(st, 13);
    r->gpu_hours = col_real(st, 14);
    r->log_path = col_dup(st, 15);
}

void mt_store_run_clear(mt_store_run *r)
{
    if (!r)
        return;
    free((char *)r->config_id);
    free((char *)r->config_canonical);
    free((char *)r->kind);
    free((char *)r->outcome);
    free((char *)r->evidence);
    free((char *)r->worker);
    free((char *)r->fingerprint);
    free((char *)r->log_path);
    memset(r, 0, sizeof *r);
}

int mt_store_put_result(mt_store *s, const mt_store_result *res, int64_t *run_id, mt_diag *d)
{
    const mt_store_run *r = &res->run;
    sqlite3_stmt *st;
    int64_t id = 0;
    int tok, ok = 0, dup = 0, rc;

    if (check_run(s, r, d))
        return -1;
    if ((res->n_samples && !res->samples) || (res->n_gpus && !res->gpus)) {
        mt_diag_add(d, s->path, 0, NULL, "result: samples or GPU rows counted but missing");
        return -1;
    }
    if ((tok = tx_begin(s, d)) < 0)
        return -1;
    /* The look-up runs inside the write transaction, so a result re-sent by
     * another process at the same moment is seen here, not inserted twice. */
    if (!(st = stmt(s, ST_FIND_RUN, d)))
        goto out;
    bind_text(st, 1, r->config_id);
    bind_text(st, 2, r->kind);
    sqlite3_bind_int(st, 3, r->replicate);
    sqlite3_bind_int(st, 4, r->retry);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *outcome = (const char *)sqlite3_column_text(st, 6);
        id = sqlite3_column_int64(st, 0);
        if (outcome && strcmp(outcome, r->outcome) != 0)
            mt_diag_add(d, s->path, 0, NULL,
                        "run %s %s replicate %d retry %d is already stored (run %lld, "
                        "outcome %s); the re-sent result (outcome %s) is ignored",
                        r->config_id, r->kind, r->replicate, r->retry, (long long)id, outcome,
                        r->outcome);
        sqlite3_reset(st);
        dup = ok = 1;
        goto out;
    }
    if (rc != SQLITE_DONE) {
        db_error(s, d, "cannot look up a run");
        goto out;
    }
    sqlite3_reset(st);
    if (put_config(s, r->config_id, r->config_canonical, d))
        goto out;
    if (!(st = stmt(s, ST_PUT_RUN, d)))
        goto out;
    bind_text(st, 1, r->config_id);
    bind_text(st, 2, r->kind);
    sqlite3_bind_int(st, 3, r->replicate);
    sqlite3_bind_int(st, 4, r->retry);
    bind_text(st, 5, r->outcome);
    bind_text(st, 6, r->evidence);
    bind_text(st, 7, r->worker);
    bind_text(st, 8, r->fingerprint);
    bind_real(st, 9, r->started);
    bind_real(st, 10, r->ended);
    bind_real(st, 11, r->wall_s);
    bind_real(st, 12, r->sim_s);
    bind_real(st, 13, r->gpu_hours);
    bind_text(st, 14, r->log_path);
    if (sqlite3_step(st) != SQLITE_DONE) {
        db_error(s, d, "cannot store a run");
        goto out;
    }
    id = sqlite3_last_insert_rowid(s->db);
    if (put_samples(s, id, res->samples, res->n_samples, d) ||
        put_gpus(s, id, res->gpus, res->n_gpus, d))
        goto out;
    ok = 1;
out:
    if (tx_end(s, tok, ok, d))
        return -1;
    if (run_id)
        *run_id = id;
    return dup;
}

int mt_store_add_samples(mt_store *s, int64_t run_id, const mt_store_sample *v, size_t n,
                         mt_diag *d)
{
    int tok = tx_begin(s, d);
    if (tok < 0)
        return -1;
    return tx_end(s, tok, put_samples(s, run_id, v, n, d) == 0, d);
}

int mt_store_add_gpu_memory(mt_store *s, int64_t run_id, const mt_store_gpu_mem *v, size_t n,
                            mt_diag *d)
{
    int tok = tx_begin(s, d);
    if (tok < 0)
        return -1;
    return tx_end(s, tok, put_gpus(s, run_id, v, n, d) == 0, d);
}

int mt_store_add_event(mt_store *s, double time, const char *kind, const char *text, mt_diag *d)
{
    sqlite3_stmt *st;
    int tok, ok = 0;
    if (!kind || !*kind || !text) {
        mt_diag_add(d, s->path, 0, NULL, "event: kind and text are required");
        return -1;
    }
    if ((tok = tx_begin(s, d)) < 0)
        return -1;
    if ((st = stmt(s, ST_PUT_EVENT, d))) {
        sqlite3_bind_double(st, 1, isnan(time) ? mt_clock_wall_s() : time);
        bind_text(st, 2, kind);
        bind_text(st, 3, text);
        ok = sqlite3_step(st) == SQLITE_DONE;
        if (!ok)
            db_error(s, d, "cannot store an event");
    }
    return tx_end(s, tok, ok, d);
}

int mt_store_memo_get(mt_store *s, const char *key, char **value, mt_diag *d)
{
    sqlite3_stmt *st = stmt(s, ST_GET_MEMO, d);
    int rc;
    *value = NULL;
    if (!st)
        return -1;
    bind_text(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        *value = strdup(v ? v : "null");
        sqlite3_reset(st);
        return *value ? 1 : -1;
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return 0;
    db_error(s, d, "cannot read the memo");
    return -1;
}

int mt_store_memo_put(mt_store *s, const char *key, const char *value, mt_diag *d)
{
    sqlite3_stmt *st;
    int tok, ok = 0, existed = 0;
    if (!key || !*key || !value) {
        mt_diag_add(d, s->path, 0, NULL, "memo: key and value are required");
        return -1;
    }
    if ((tok = tx_begin(s, d)) < 0)
        return -1;
    if ((st = stmt(s, ST_PUT_MEMO, d))) {
        bind_text(st, 1, key);
        bind_text(st, 2, value);
        sqlite3_bind_double(st, 3, mt_clock_wall_s());
        ok = sqlite3_step(st) == SQLITE_DONE;
        if (!ok)
            db_error(s, d, "cannot store the memo (is the value valid JSON?)");
        else
            existed = sqlite3_changes(s->db) == 0;
    }
    if (tx_end(s, tok, ok, d))
        return -1;
    return existed;
}

static int put_links(mt_store *s, int64_t dec, const int64_t *runs, size_t n, const char *arm,
                     mt_diag *d)
{
    size_t i;
    for (i = 0; i < n; i++) {
        sqlite3_stmt *st = stmt(s, ST_PUT_DECISION_RUN, d);
        int rc;
        if (!st)
            return -1;
        sqlite3_bind_int64(st, 1, dec);
        sqlite3_bind_int64(st, 2, runs[i]);
        bind_text(st, 3, arm);
        rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) {
            if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
                mt_diag_add(d, s->path, 0, NULL, "decision: %s run %lld is not stored", arm,
                            (long long)runs[i]);
            else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
                mt_diag_add(d, s->path, 0, NULL, "decision: run %lld is listed twice",
                            (long long)runs[i]);
            else
                db_error(s, d, "cannot link a decision to its runs");
            return -1;
        }
    }
    return 0;
}

int mt_store_add_decision(mt_store *s, const mt_store_decision *x, int64_t *id, mt_diag *d)
{
    sqlite3_stmt *st;
    int tok, ok = 0;
    int64_t did = 0;

    if (!x->kind || !*x->kind || !is_config_id(x->candidate_id) ||
        (x->control_id && !is_config_id(x->control_id)) || !one_of(x->verdict, verdicts)) {
        mt_diag_add(d, s->path, 0, NULL,
                    "decision: needs a kind, a candidate config id (16 hex digits), an "
                    "optional control config id and a verdict (better, worse, same, unknown, "
                    "accepted, rejected); got kind '%s', candidate '%s', control '%s', "
                    "verdict '%s'",
                    x->kind ? x->kind : "(null)", x->candidate_id ? x->candidate_id : "(null)",
                    x->control_id ? x->control_id : "(null)", x->verdict ? x->verdict : "(null)");
        return -1;
    }
    if ((x->n_candidate_runs && !x->candidate_runs) || (x->n_control_runs && !x->control_runs)) {
        mt_diag_add(d, s->path, 0, NULL, "decision: runs counted but missing");
        return -1;
    }
    if (check_json_object(s, x->statistics, "decision statistics", d))
        return -1;
    if ((tok = tx_begin(s, d)) < 0)
        return -1;
    if (put_config(s, x->candidate_id, x->candidate_canonical, d) ||
        (x->control_id && put_config(s, x->control_id, x->control_canonical, d)))
        goto out;
    if (!(st = stmt(s, ST_PUT_DECISION, d)))
        goto out;
    bind_text(st, 1, x->kind);
    bind_text(st, 2, x->variable);
    bind_text(st, 3, x->candidate_id);
    bind_text(st, 4, x->control_id);
    bind_text(st, 5, x->verdict);
    bind_text(st, 6, x->statistics);
    bind_text(st, 7, x->evidence);
    sqlite3_bind_double(st, 8, isnan(x->created) ? mt_clock_wall_s() : x->created);
    if (sqlite3_step(st) != SQLITE_DONE) {
        db_error(s, d, "cannot store a decision");
        goto out;
    }
    did = sqlite3_last_insert_rowid(s->db);
    if (put_links(s, did, x->candidate_runs, x->n_candidate_runs, "candidate", d) ||
        put_links(s, did, x->control_runs, x->n_control_runs, "control", d))
        goto out;
    ok = 1;
out:
    if (tx_end(s, tok, ok, d))
        return -1;
    if (id)
        *id = did;
    return 0;
}

/* ---- reads ------------------------------------------------------------ */

int mt_store_find_run(mt_store *s, const char *config_id, const char *kind, int replicate,
                      int retry, mt_store_run *out, mt_diag *d)
{
    sqlite3_stmt *st = stmt(s, ST_FIND_RUN, d);
    int rc;
    if (!st)
        return -1;
    bind_text(st, 1, config_id);
    bind_text(st, 2, kind);
    sqlite3_bind_int(st, 3, replicate);
    sqlite3_bind_int(st, 4, retry);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (out)
            fill_run(st, out);
        sqlite3_reset(st);
        return 1;
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return 0;
    db_error(s, d, "cannot look up a run");
    return -1;
}

/* Grows *v (of elem bytes each) to hold one more; 0 or -1. */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    void *nv;
    size_t nc;
    if (n < *cap)
        return 0;
    nc = *cap ? *cap * 2 : 16;
    nv = realloc(*v, nc * elem);
    if (!nv)
        return -1;
    memset((char *)nv + *cap * elem, 0, (nc - *cap) * elem);
    *v = nv, *cap = nc;
    return 0;
}

/* Fills one element from the current row; 0, or -1 to stop with an error. */
typedef int (*row_fill)(mt_store *s, sqlite3_stmt *st, void *elem);
/* Frees n elements read so far (the list's own _free). */
typedef void (*rows_free)(void *v, size_t n);

/* Every row of st (prepared and bound; finalized here) into a new array of
 * elem-sized elements, each filled by fill.  0 with *out and *n set, or -1
 * with what said in d and nothing kept. */
static int read_rows(mt_store *s, sqlite3_stmt *st, size_t elem, row_fill fill, rows_free release,
                     void **out, size_t *n, const char *what, mt_diag *d)
{
    char *v = NULL;
    size_t k = 0, cap = 0;
    int rc, bad = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)&v, &cap, k, elem))
            break;
        if (fill(s, st, v + elem * k++)) {
            bad = 1;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE || bad) {
        db_error(s, d, what);
        release(v, k);
        return -1;
    }
    *out = v, *n = k;
    return 0;
}

/* The rows_free of each list: its public _free. */
#define ROWS_FREE(name, fn)                                                                      \
    static void name(void *v, size_t n)                                                          \
    {                                                                                            \
        fn(v, n);                                                                                \
    }
ROWS_FREE(free_runs, mt_store_runs_free)
ROWS_FREE(free_samples, mt_store_samples_free)
ROWS_FREE(free_gpu_mems, mt_store_gpu_memory_free)
ROWS_FREE(free_decisions, mt_store_decisions_free)
ROWS_FREE(free_events, mt_store_events_free)
#undef ROWS_FREE

/* sql prepared into *st; 0, or -1 with what said in d. */
static int prepare_list(mt_store *s, const char *sql, sqlite3_stmt **st, const char *what,
                        mt_diag *d)
{
    *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK)
        return 0;
    db_error(s, d, what);
    return -1;
}

static int fill_run_row(mt_store *s, sqlite3_stmt *st, void *elem)
{
    (void)s;
    fill_run(st, elem);
    return 0;
}

int mt_store_list_runs(mt_store *s, const char *config_id, const char *kind, mt_store_run **out,
                       size_t *n, mt_diag *d)
{
    sqlite3_stmt *st;
    *out = NULL, *n = 0;
    if (prepare_list(s,
                     "SELECT r.id, r.config_id, c.canonical, r.kind, r.replicate, r.retry, "
                     "r.outcome, r.evidence, r.worker, r.fingerprint, r.started, r.ended, "
                     "r.wall_s, r.sim_s, r.gpu_hours, r.log_path FROM runs r "
                     "JOIN configs c ON c.id = r.config_id "
                     "WHERE (?1 IS NULL OR r.config_id = ?1) AND (?2 IS NULL OR r.kind = "
                     "?2) ORDER BY r.id",
                     &st, "cannot list runs", d))
        return -1;
    bind_text(st, 1, config_id);
    bind_text(st, 2, kind);
    return read_rows(s, st, sizeof **out, fill_run_row, free_runs, (void **)out, n,
                     "cannot list runs", d);
}

void mt_store_runs_free(mt_store_run *v, size_t n)
{
    size_t i;
    for (i = 0; v && i < n; i++)
        mt_store_run_clear(&v[i]);
    free(v);
}

static double loss_value(const cJSON *j)
{
    if (cJSON_IsNumber(j))
        return j->valuedouble;
    if (cJSON_IsString(j)) {
        if (!strcmp(j->valuestring, "inf"))
            return INFINITY;
        if (!strcmp(j->valuestring, "-inf"))
            return -INFINITY;
    }
    return NAN;
}

/* Parses a stored losses object into v->losses; 0 or -1 (out of memory). */
static int parse_losses(const char *text, mt_store_sample *v)
{
    cJSON *root = text ? cJSON_Parse(text) : NULL, *e;
    size_t k = 0, n = (size_t)cJSON_GetArraySize(root);
    if (root && n) {
        v->losses = calloc(n, sizeof *v->losses);
        if (!v->losses) {
            cJSON_Delete(root);
            return -1;
        }
        cJSON_ArrayForEach(e, root)
        {
            v->losses[k].key = strdup(e->string ? e->string : "");
            v->losses[k].value = loss_value(e);
            if (!v->losses[k].key)
                break;
            k++;
        }
    }
    v->n_losses = k;
    cJSON_Delete(root);
    return k == n ? 0 : -1;
}

static int fill_sample(mt_store *s, sqlite3_stmt *st, void *elem)
{
    mt_store_sample *x = elem;
    (void)s;
    x->iteration = (long)sqlite3_column_int64(st, 0);
    x->elapsed_ms = col_real(st, 1);
    x->tflops = col_real(st, 2);
    x->grad_norm = col_real(st, 4);
    x->skipped = (long)sqlite3_column_int64(st, 5);
    x->nan = (long)sqlite3_column_int64(st, 6);
    return parse_losses((const char *)sqlite3_column_text(st, 3), x) ? -1 : 0;
}

int mt_store_samples(mt_store *s, int64_t run_id, mt_store_sample **out, size_t *n, mt_diag *d)
{
    sqlite3_stmt *st;
    *out = NULL, *n = 0;
    if (prepare_list(s,
                     "SELECT iteration, elapsed_ms, tflops, losses, grad_norm, skipped, "
                     "nan FROM samples WHERE run_id = ?1 ORDER BY iteration",
                     &st, "cannot read samples", d))
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    return read_rows(s, st, sizeof **out, fill_sample, free_samples, (void **)out, n,
                     "cannot read samples", d);
}

void mt_store_samples_free(mt_store_sample *v, size_t n)
{
    size_t i, j;
    for (i = 0; v && i < n; i++) {
        for (j = 0; j < v[i].n_losses; j++)
            free((char *)v[i].losses[j].key);
        free(v[i].losses);
    }
    free(v);
}

static int fill_gpu_mem(mt_store *s, sqlite3_stmt *st, void *elem)
{
    mt_store_gpu_mem *x = elem;
    (void)s;
    x->rank = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 0);
    x->host = col_dup(st, 1);
    x->gpu = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 2);
    x->peak_bytes = sqlite3_column_int64(st, 3);
    x->alloc_bytes = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 4);
    x->source = col_dup(st, 5);
    return 0;
}

int mt_store_gpu_memory(mt_store *s, int64_t run_id, mt_store_gpu_mem **out, size_t *n, mt_diag *d)
{
    sqlite3_stmt *st;
    *out = NULL, *n = 0;
    if (prepare_list(s,
                     "SELECT rank, host, gpu, peak_bytes, alloc_bytes, source FROM "
                     "gpu_memory WHERE run_id = ?1 ORDER BY peak_bytes DESC, id",
                     &st, "cannot read GPU memory", d))
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    return read_rows(s, st, sizeof **out, fill_gpu_mem, free_gpu_mems, (void **)out, n,
                     "cannot read GPU memory", d);
}

void mt_store_gpu_memory_free(mt_store_gpu_mem *v, size_t n)
{
    size_t i;
    for (i = 0; v && i < n; i++) {
        free((char *)v[i].host);
        free((char *)v[i].source);
    }
    free(v);
}

/* Reads the runs of one arm of decision dec into a new array. */
static int read_links(mt_store *s, int64_t dec, const char *arm, const int64_t **out, size_t *n)
{
    sqlite3_stmt *st = NULL;
    int64_t *v = NULL;
    size_t k = 0, cap = 0;
    int rc;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT run_id FROM decision_runs WHERE decision_id = ?1 AND arm = "
                           "?2 ORDER BY run_id",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, dec);
    bind_text(st, 2, arm);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)&v, &cap, k, sizeof *v))
            break;
        v[k++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    *out = v, *n = k;
    return rc == SQLITE_DONE ? 0 : -1;
}

static int fill_decision(mt_store *s, sqlite3_stmt *st, void *elem)
{
    mt_store_decision *x = elem;
    x->id = sqlite3_column_int64(st, 0);
    x->kind = col_dup(st, 1);
    x->variable = col_dup(st, 2);
    x->candidate_id = col_dup(st, 3);
    x->candidate_canonical = col_dup(st, 4);
    x->control_id = col_dup(st, 5);
    x->control_canonical = col_dup(st, 6);
    x->verdict = col_dup(st, 7);
    x->statistics = col_dup(st, 8);
    x->evidence = col_dup(st, 9);
    x->created = col_real(st, 10);
    return read_links(s, x->id, "candidate", &x->candidate_runs, &x->n_candidate_runs) |
           read_links(s, x->id, "control", &x->control_runs, &x->n_control_runs);
}

int mt_store_list_decisions(mt_store *s, mt_store_decision **out, size_t *n, mt_diag *d)
{
    sqlite3_stmt *st;
    *out = NULL, *n = 0;
    if (prepare_list(s,
                     "SELECT d.id, d.kind, d.variable, d.candidate_id, a.canonical, "
                     "d.control_id, b.canonical, d.verdict, d.statistics, d.evidence, "
                     "d.created FROM decisions d JOIN configs a ON a.id = d.candidate_id "
                     "LEFT JOIN configs b ON b.id = d.control_id ORDER BY d.id",
                     &st, "cannot list decisions", d))
        return -1;
    return read_rows(s, st, sizeof **out, fill_decision, free_decisions, (void **)out, n,
                     "cannot list decisions", d);
}

void mt_store_decisions_free(mt_store_decision *v, size_t n)
{
    size_t i;
    for (i = 0; v && i < n; i++) {
        free((char *)v[i].kind);
        free((char *)v[i].variable);
        free((char *)v[i].candidate_id);
        free((char *)v[i].candidate_canonical);
        free((char *)v[i].control_id);
        free((char *)v[i].control_canonical);
        free((char *)v[i].verdict);
        free((char *)v[i].statistics);
        free((char *)v[i].evidence);
        free((void *)v[i].candidate_runs);
        free((void *)v[i].control_runs);
    }
    free(v);
}

static int fill_event(mt_store *s, sqlite3_stmt *st, void *elem)
{
    mt_store_event *x = elem;
    (void)s;
    x->id = sqlite3_column_int64(st, 0);
    x->time = col_real(st, 1);
    x->kind = col_dup(st, 2);
    x->text = col_dup(st, 3);
    return 0;
}

int mt_store_list_events(mt_store *s, mt_store_event **out, size_t *n, mt_diag *d)
{
    sqlite3_stmt *st;
    *out = NULL, *n = 0;
    if (prepare_list(s, "SELECT id, time, kind, text FROM events ORDER BY time, id", &st,
                     "cannot list events", d))
        return -1;
    return read_rows(s, st, sizeof **out, fill_event, free_events, (void **)out, n,
                     "cannot list events", d);
}

void mt_store_events_free(mt_store_event *v, size_t n)
{
    size_t i;
    for (i = 0; v && i < n; i++) {
        free(v[i].kind);
        free(v[i].text);
    }
    free(v);
}

/* ---- export ----------------------------------------------------------- */

const char *const mt_store_tables[] = {
    "meta",       "schema_version", "configs",       "runs",   "samples",
    "gpu_memory", "decisions",      "decision_runs", "events", NULL};

/* SELECT for a table, in a stable order; NULL when the table is unknown (so
 * no caller text ever reaches SQL). */
static const char *table_sql(const char *table)
{
    static const struct {
        const char *name, *sql;
    } t[] = {
        {"meta", "SELECT * FROM meta"},
        {"schema_version", "SELECT * FROM schema_version ORDER BY version"},
        {"configs", "SELECT * FROM configs ORDER BY created, id"},
        {"runs", "SELECT * FROM runs ORDER BY id"},
        {"samples", "SELECT * FROM samples ORDER BY run_id, iteration"},
        {"gpu_memory", "SELECT * FROM gpu_memory ORDER BY id"},
        {"decisions", "SELECT * FROM decisions ORDER BY id"},
        {"decision_runs", "SELECT * FROM decision_runs ORDER BY decision_id, run_id"},
        {"events", "SELECT * FROM events ORDER BY time, id"},
    };
    size_t i;
    for (i = 0; table && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].name, table))
            return t[i].sql;
    return NULL;
}

/* RFC 4180: quote a field holding a comma, a quote or a line break. */
static void csv_field(FILE *out, const char *v)
{
    const char *p;
    if (!strpbrk(v, ",\"\r\n")) {
        fputs(v, out);
        return;
    }
    fputc('"', out);
    for (p = v; *p; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

static void csv_value(FILE *out, sqlite3_stmt *st, int i)
{
    char num[40];
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
        break;
    case SQLITE_INTEGER:
        fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i));
        break;
    case SQLITE_FLOAT:
        fmt_double(num, sqlite3_column_double(st, i));
        fputs(num, out);
        break;
    default:
        csv_field(out, (const char *)sqlite3_column_text(st, i));
    }
}

static int prepare_table(mt_store *s, const char *table, sqlite3_stmt **st, mt_diag *d)
{
    const char *sql = table_sql(table);
    if (!sql) {
        mt_diag_add(d, s->path, 0, NULL,
                    "no table '%s' to export; the tables are meta, schema_version, configs, "
                    "runs, samples, gpu_memory, decisions, decision_runs, events",
                    table ? table : "(null)");
        return -1;
    }
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) {
        db_error(s, d, "cannot read a table");
        return -1;
    }
    return 0;
}

static int csv_rows(mt_store *s, sqlite3_stmt *st, FILE *out, mt_diag *d)
{
    int i, nc = sqlite3_column_count(st), rc;
    for (i = 0; i < nc; i++) {
        if (i)
            fputc(',', out);
        csv_field(out, sqlite3_column_name(st, i));
    }
    fputs("\r\n", out);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (i = 0; i < nc; i++) {
            if (i)
                fputc(',', out);
            csv_value(out, st, i);
        }
        fputs("\r\n", out);
    }
    if (rc != SQLITE_DONE) {
        db_error(s, d, "cannot read a table");
        return -1;
    }
    return ferror(out) ? -1 : 0;
}

int mt_store_export_csv(mt_store *s, const char *table, FILE *out, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (prepare_table(s, table, &st, d))
        return -1;
    rc = csv_rows(s, st, out, d);
    sqlite3_finalize(st);
    if (rc && ferror(out))
        mt_diag_add(d, NULL, 0, NULL, "cannot write the CSV export: %s", strerror(errno));
    return rc;
}

/* Columns holding JSON text, embedded as JSON on export. */
static int json_column(const char *table, const char *col)
{
    return (!strcmp(table, "runs") && !strcmp(col, "fingerprint")) ||
           (!strcmp(table, "decisions") && !strcmp(col, "statistics")) ||
           (!strcmp(table, "samples") && !strcmp(col, "losses"));
}

/* The current row as a JSON object; caller owns it (NULL on OOM). */
static cJSON *row_json(sqlite3_stmt *st, const char *table)
{
    cJSON *o = cJSON_CreateObject();
    int i, nc = sqlite3_column_count(st);
    for (i = 0; o && i < nc; i++) {
        const char *name = sqlite3_column_name(st, i);
        cJSON *v = NULL;
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_NULL:
            v = cJSON_CreateNull();
            break;
        case SQLITE_INTEGER:
            v = cJSON_CreateNumber((double)sqlite3_column_int64(st, i));
            break;
        case SQLITE_FLOAT:
            v = cJSON_CreateNumber(sqlite3_column_double(st, i));
            break;
        default: {
            const char *t = (const char *)sqlite3_column_text(st, i);
            char *clean = utf8_clean(t ? t : "");
            if (clean && json_column(table, name))
                v = cJSON_Parse(clean);
            if (!v && clean)
                v = cJSON_CreateString(clean);
            free(clean);
        }
        }
        if (!v || !cJSON_AddItemToObject(o, name, v)) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* Streams the rows of st as a JSON array (or, when single, the first row as
 * an object, null when none). */
static int json_rows(mt_store *s, sqlite3_stmt *st, const char *table, int single, FILE *out,
                     mt_diag *d)
{
    int rc, first = 1;
    if (!single)
        fputc('[', out);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cJSON *o = row_json(st, table);
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        if (!text) {
            mt_diag_add(d, s->path, 0, NULL, "out of memory exporting %s", table);
            return -1;
        }
        fputs(first ? (single ? "" : "\n") : ",\n", out);
        fputs(text, out);
        free(text);
        first = 0;
        if (single)
            break;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        db_error(s, d, "cannot read a table");
        return -1;
    }
    if (single && first)
        fputs("null", out);
    if (!single)
        fputs(first ? "]" : "\n]", out);
    return 0;
}

int mt_store_export_json(mt_store *s, FILE *out, mt_diag *d)
{
    size_t i;
    int tok = -1, rc = 0;
    /* One read transaction, so the export is one consistent snapshot even
     * while another process writes. */
    if (sqlite3_get_autocommit(s->db)) {
        if (exec(s, "BEGIN", d, "cannot start a read transaction"))
            return -1;
        tok = 0;
    }
    fputs("{", out);
    for (i = 0; mt_store_tables[i] && rc == 0; i++) {
        sqlite3_stmt *st = NULL;
        const char *t = mt_store_tables[i];
        if (prepare_table(s, t, &st, d)) {
            rc = -1;
            break;
        }
        fprintf(out, "%s\n\"%s\": ", i ? "," : "", t);
        rc = json_rows(s, st, t, !strcmp(t, "meta"), out, d);
        sqlite3_finalize(st);
    }
    fputs("\n}\n", out);
    if (tok == 0)
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc == 0 && ferror(out)) {
        mt_diag_add(d, NULL, 0, NULL, "cannot write the JSON export: %s", strerror(errno));
        rc = -1;
    }
    return rc;
}

/* ---- moetune runs ----------------------------------------------------- */

/* Integer value of key in the stored canonical contract, or def. */
static long canon_long(const char *text, const char *key, long def)
{
    size_t kl = strlen(key);
    const char *p = text;
    while (p && *p) {
        if (!strncmp(p, key, kl) && p[kl] == '=')
            return strtol(p + kl + 1, NULL, 10);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return def;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Medians of elapsed_ms and tflops of run id over iterations [lo, hi]. */
static void window_medians(sqlite3_stmt *st, int64_t id, long lo, long hi, double *ms, double *tf)
{
    double *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, ca = 0, cb = 0;
    *ms = *tf = NAN;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) != SQLITE_NULL && !grow((void **)&a, &ca, na, sizeof *a))
            a[na++] = sqlite3_column_double(st, 0);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL && !grow((void **)&b, &cb, nb, sizeof *b))
            b[nb++] = sqlite3_column_double(st, 1);
    }
    if (na) {
        qsort(a, na, sizeof *a, cmp_double);
        *ms = na % 2 ? a[na / 2] : (a[na / 2 - 1] + a[na / 2]) / 2;
    }
    if (nb) {
        qsort(b, nb, sizeof *b, cmp_double);
        *tf = nb % 2 ? b[nb / 2] : (b[nb / 2 - 1] + b[nb / 2]) / 2;
    }
    free(a);
    free(b);
}

static void print_num(FILE *out, int width, int prec, double v)
{
    if (isnan(v))
        fprintf(out, " %*s", width, "-");
    else
        fprintf(out, " %*.*f", width, prec, v);
}

static int print_text(mt_store *s, FILE *out, mt_diag *d)
{
    sqlite3_stmt *st = NULL, *win = NULL;
    long scr_lo, scr_hi, val_lo, val_hi;
    long counts[sizeof outcomes / sizeof outcomes[0]] = {0};
    size_t i, total = 0;
    int rc;

    scr_lo = canon_long(s->canonical, "windows.screen.warmup", 0) + 1;
    scr_hi = scr_lo + canon_long(s->canonical, "windows.screen.window", 0) - 1;
    val_lo = canon_long(s->canonical, "windows.validate.first", 0);
    val_hi = canon_long(s->canonical, "windows.validate.last", -1);

    if (sqlite3_prepare_v2(s->db,
                           "SELECT r.id, r.config_id, r.kind, r.replicate, r.retry, r.outcome, "
                           "(SELECT count(*) FROM samples x WHERE x.run_id = r.id), "
                           "(SELECT max(peak_bytes) FROM gpu_memory g WHERE g.run_id = r.id), "
                           "r.wall_s, r.worker, r.evidence FROM runs r ORDER BY r.id",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "SELECT elapsed_ms, tflops FROM samples WHERE run_id = ?1 AND "
                           "iteration BETWEEN ?2 AND ?3",
                           -1, &win, NULL) != SQLITE_OK) {
        db_error(s, d, "cannot list runs");
        sqlite3_finalize(st);
        return -1;
    }
    fprintf(out, "runs in %s (contract %s, fingerprint %.12s)\n", s->path,
            s->contract_name ? s->contract_name : "?", s->fingerprint);
    fprintf(out, "%6s %-16s %-8s %3s %3s %-12s %5s %10s %8s %9s %9s  %s\n", "id", "config", "kind",
            "rep", "try", "outcome", "steps", "median_ms", "tflops", "peak_GiB", "wall_s",
            "worker");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(st, 2);
        const char *outcome = (const char *)sqlite3_column_text(st, 5);
        const char *worker = (const char *)sqlite3_column_text(st, 9);
        const char *evidence = (const char *)sqlite3_column_text(st, 10);
        double ms = NAN, tf = NAN, peak = NAN;
        int64_t id = sqlite3_column_int64(st, 0);
        if (!strcmp(kind, "screen") && scr_hi >= scr_lo)
            window_medians(win, id, scr_lo, scr_hi, &ms, &tf);
        else if (!strcmp(kind, "validate") && val_hi >= val_lo)
            window_medians(win, id, val_lo, val_hi, &ms, &tf);
        if (sqlite3_column_type(st, 7) != SQLITE_NULL)
            peak = (double)sqlite3_column_int64(st, 7) / (1024.0 * 1024 * 1024);
        fprintf(out, "%6lld %-16s %-8s %3d %3d %-12s %5lld", (long long)id,
                (const char *)sqlite3_column_text(st, 1), kind, sqlite3_column_int(st, 3),
                sqlite3_column_int(st, 4), outcome, (long long)sqlite3_column_int64(st, 6));
        print_num(out, 10, 1, ms);
        print_num(out, 8, 1, tf);
        print_num(out, 9, 2, peak);
        print_num(out, 9, 1, col_real(st, 8));
        fprintf(out, "  %s\n", worker ? worker : "-");
        if (evidence && strcmp(outcome, "ok") != 0) {
            /* One line of evidence, cut short: logs can carry megabyte lines. */
            int len = (int)strcspn(evidence, "\r\n");
            fprintf(out, "       %s: %.*s%s\n", outcome, len > 160 ? 160 : len, evidence,
                    len > 160 ? "..." : "");
        }
        for (i = 0; outcomes[i]; i++)
            if (!strcmp(outcome, outcomes[i]))
                counts[i]++;
        total++;
    }
    sqlite3_finalize(st);
    sqlite3_finalize(win);
    if (rc != SQLITE_DONE) {
        db_error(s, d, "cannot list runs");
        return -1;
    }
    fprintf(out, "%zu run%s", total, total == 1 ? "" : "s");
    for (i = 0, rc = 0; outcomes[i]; i++)
        if (counts[i])
            fprintf(out, "%s %ld %s", rc++ ? "," : ":", counts[i], outcomes[i]);
    fprintf(out,
            "\nmedian_ms and tflops are medians over the contract's timing window "
            "(screen iterations %ld-%ld, validate %ld-%ld); peak_GiB is the hottest GPU\n",
            scr_lo, scr_hi, val_lo, val_hi);
    return ferror(out) ? -1 : 0;
}

int mt_store_print_runs(mt_store *s, FILE *out, int format, mt_diag *d)
{
    sqlite3_stmt *st = NULL;
    int rc;
    switch (format) {
    case MT_STORE_TEXT:
        return print_text(s, out, d);
    case MT_STORE_CSV:
        return mt_store_export_csv(s, "runs", out, d);
    case MT_STORE_JSON:
        if (prepare_table(s, "runs", &st, d))
            return -1;
        rc = json_rows(s, st, "runs", 0, out, d);
        sqlite3_finalize(st);
        fputc('\n', out);
        return rc || ferror(out) ? -1 : 0;
    }
    mt_diag_add(d, NULL, 0, NULL, "unknown output format %d", format);
    return -1;
}
