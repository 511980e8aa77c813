/*
 * test_store.c - the results store on real SQLite files in temporary
 * directories: schema and WAL mode, resume after reopening, a second process
 * writing while the first reads, contract fingerprint refusal with the
 * fields named, network filesystem refusal (simulated f_type) and the real
 * statfs path, de-duplication of re-sent results, CSV/JSON export parsed
 * back, crashes mid-transaction (_exit and SIGKILL), garbage files, and a
 * real sim run stored and read back.
 */
#include "testkit.h"

#include "store.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CONTRACT "qwen3-30b-a3b-h100x16.cfg"
#define SIM_BIN MT_BUILD_DIR "/moetune-sim"

/* ---- fixtures ------------------------------------------------------------------ */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static char *tmp_dir(void)
{
    char *p = strdup("/tmp/moetune-store-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(p));
    return p;
}

static void rm_rf(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *join(const char *a, const char *b)
{
    char *p = malloc(strlen(a) + strlen(b) + 2);
    sprintf(p, "%s/%s", a, b);
    return p;
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static mt_contract *load_contract(void)
{
    char *path = tk_example(CONTRACT);
    mt_diag *d = mt_diag_new();
    mt_contract *c = mt_contract_load(path, d);
    ck_assert_msg(c != NULL, "%s", mt_diag_count(d) ? mt_diag_at(d, 0)->message : "");
    mt_diag_destroy(&d);
    free(path);
    return c;
}

/* The example contract's text with one substring replaced. */
static mt_contract *load_contract_edited(const char *from, const char *to, mt_diag *d)
{
    char *path = tk_example(CONTRACT), *text = tk_slurp(path), *at, *out;
    mt_contract *c;
    ck_assert_ptr_nonnull(text);
    at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in %s", from, path);
    out = malloc(strlen(text) + strlen(to) + 1);
    memcpy(out, text, (size_t)(at - text));
    strcpy(out + (at - text), to);
    strcat(out, at + strlen(from));
    c = mt_contract_load_string(out, path, d);
    free(text);
    free(out);
    free(path);
    return c;
}

static mt_store *open_ok(const char *dir, const mt_contract *c)
{
    mt_diag *d = mt_diag_new();
    mt_store *s = mt_store_open(dir, c, d);
    if (!s)
        mt_diag_print(d, stderr);
    ck_assert_msg(s != NULL, "open %s: %s", dir,
                  mt_diag_count(d) ? mt_diag_at(d, 0)->message : "?");
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_diag_destroy(&d);
    return s;
}

/* A real config of the example contract, with one knob changed (or none). */
typedef struct cfgtext {
    char id[17];
    char *canonical;
} cfgtext;

static cfgtext config_of(tk *t, const char *knob, const char *value)
{
    mt_kv *cfg = mt_kv_dup(t->cfg);
    mt_diag *d = mt_diag_new();
    cfgtext r;
    if (knob)
        ck_assert_msg(mt_config_set(t->reg, cfg, knob, value, NULL, 0, "test", d) == 0, "set %s=%s",
                      knob, value);
    r.canonical = mt_config_canonical(cfg);
    mt_config_id(cfg, r.id);
    mt_kv_destroy(&cfg);
    mt_diag_destroy(&d);
    return r;
}

/* Samples shaped like Megatron's iteration lines (two loss keys). */
typedef struct fake {
    mt_store_sample s[64];
    mt_store_loss l[64][2];
    size_t n;
} fake;

static void fake_fill(fake *f, size_t n, double base_ms)
{
    size_t i;
    memset(f, 0, sizeof *f);
    ck_assert(n <= 64);
    for (i = 0; i < n; i++) {
        f->l[i][0].key = "lm loss";
        f->l[i][0].value = 11.6 - 0.01 * (double)i;
        f->l[i][1].key = "load_balancing_loss";
        f->l[i][1].value = 1.0 + 1e-4 * (double)i;
        f->s[i].iteration = (long)i + 1;
        f->s[i].elapsed_ms = base_ms + (double)(i % 7) * 3.1;
        f->s[i].tflops = 138.1 - (double)(i % 5) * 0.2;
        f->s[i].grad_norm = 6.331 - 0.01 * (double)i;
        f->s[i].losses = f->l[i];
        f->s[i].n_losses = 2;
    }
    f->n = n;
}

static mt_store_result result_of(const cfgtext *c, const char *kind, int rep, int retry,
                                 const char *outcome, const fake *f)
{
    mt_store_result r;
    memset(&r, 0, sizeof r);
    r.run.config_id = c->id;
    r.run.config_canonical = c->canonical;
    r.run.kind = kind;
    r.run.replicate = rep;
    r.run.retry = retry;
    r.run.outcome = outcome;
    r.run.worker = "node0";
    r.run.fingerprint = "{\"hosts\":[\"node0\",\"node1\"],\"gpu_uuids\":[\"GPU-1\"],"
                        "\"driver\":\"570.86\",\"cuda\":\"12.8\",\"nccl\":\"2.25.1\"}";
    r.run.started = 1767225600.25;
    r.run.ended = 1767225700.5;
    r.run.wall_s = 100.25;
    r.run.sim_s = 395.611;
    r.run.gpu_hours = 1.758272;
    r.run.log_path = "/tmp/logs/run.log";
    r.samples = f ? f->s : NULL;
    r.n_samples = f ? f->n : 0;
    return r;
}

static sqlite3 *raw_open(const char *dir)
{
    char *path = join(dir, MT_STORE_FILE);
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    free(path);
    return db;
}

/* First column of the first row of sql, as text; caller frees. */
static char *raw_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    char *r = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        r = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return r;
}

static long long raw_int(sqlite3 *db, const char *sql)
{
    char *t = raw_text(db, sql);
    long long v = t ? atoll(t) : -1;
    free(t);
    return v;
}

static long long count_rows(const char *dir, const char *table)
{
    sqlite3 *db = raw_open(dir);
    char sql[128];
    long long n;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    n = raw_int(db, sql);
    sqlite3_close(db);
    return n;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- schema and WAL ---------------------------------------------------------------- */

START_TEST(schema_and_wal_mode)
{
    char *dir = tmp_dir(), *sub = join(dir, "a/b/tune");
    mt_contract *c = load_contract();
    mt_store *s = open_ok(sub, c); /* creates the parents too */
    sqlite3 *db;
    char *mode, *fp;
    size_t i;

    ck_assert_str_eq(mt_store_fingerprint(s), c->fingerprint);
    ck_assert_str_eq(mt_store_contract_text(s), c->canonical);
    db = raw_open(sub);
    mode = raw_text(db, "PRAGMA journal_mode");
    ck_assert_str_eq(mode, "wal");
    for (i = 0; mt_store_tables[i]; i++) {
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM sqlite_master WHERE type='table' AND "
                 "name='%s'",
                 mt_store_tables[i]);
        ck_assert_msg(raw_int(db, sql) == 1, "table %s missing", mt_store_tables[i]);
    }
    ck_assert_int_eq(raw_int(db, "SELECT max(version) FROM schema_version"),
                     MT_STORE_SCHEMA_VERSION);
    ck_assert_int_eq(raw_int(db, "PRAGMA application_id"), 0x4D544E45);
    fp = raw_text(db, "SELECT fingerprint FROM meta");
    ck_assert_str_eq(fp, c->fingerprint);
    /* the unique key that de-duplicates results is in the schema itself */
    ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM pragma_index_list('runs') WHERE "
                                 "\"unique\" = 1 AND origin = 'u'"),
                     1);
    sqlite3_close(db);
    free(mode);
    free(fp);

    /* foreign keys are enforced: samples of a run that does not exist */
    {
        fake f;
        mt_diag *d = mt_diag_new();
        fake_fill(&f, 3, 100.0);
        ck_assert_int_lt(mt_store_add_samples(s, 999, f.s, f.n, d), 0);
        ck_assert(mt_diag_contains(d, "run 999 is not stored"));
        mt_diag_destroy(&d);
        ck_assert_int_eq(count_rows(sub, "samples"), 0);
    }
    mt_store_destroy(&s);
    ck_assert_ptr_null(s);
    mt_contract_destroy(&c);
    free(sub);
    rm_rf(dir);
}
END_TEST

/* ---- insert, reopen, resume ---------------------------------------------------------- */

START_TEST(insert_reopen_resume)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext base = config_of(t, NULL, NULL), mbs2 = config_of(t, "micro_batch_size", "2");
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    int64_t id_ok = 0, id_retry = 0, id_oom = 0, id_cand = 0, dec = 0;
    mt_store_gpu_mem gpus[3] = {
        {0, "node0", 0, 60000000000LL, 55999130000LL, "log"},
        {5, "node0", 5, 61370000000LL, -1, "nvml"},
        {-1, "node1", 2, 59000000000LL, -1, "nvml"},
    };
    mt_store_result r;
    mt_store_run run;
    mt_store_sample *sv;
    mt_store_gpu_mem *gv;
    mt_store_decision *dv;
    mt_store_event *ev;
    size_t n, i;

    ck_assert_str_ne(base.id, mbs2.id);
    fake_fill(&f, 20, 43678.1);
    /* odd values the store must keep: NaN and inf losses, absent numbers */
    f.l[3][0].value = NAN;
    f.l[3][1].value = INFINITY;
    f.l[4][1].value = -INFINITY;
    f.s[3].grad_norm = NAN;
    f.s[3].nan = 1;
    f.s[5].tflops = NAN;
    f.s[6].skipped = 2;
    f.s[7].n_losses = 0;

    /* replicate 0: an infra failure, then its retry */
    r = result_of(&base, "screen", 0, 0, "infra", NULL);
    r.run.evidence = "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0";
    ck_assert_int_eq(mt_store_put_result(s, &r, &id_retry, d), 0);
    r = result_of(&base, "screen", 0, 1, "ok", &f);
    r.gpus = gpus, r.n_gpus = 3;
    ck_assert_int_eq(mt_store_put_result(s, &r, &id_ok, d), 0);
    r = result_of(&mbs2, "screen", 0, 0, "oom", NULL);
    r.run.evidence = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    ck_assert_int_eq(mt_store_put_result(s, &r, &id_oom, d), 0);
    r = result_of(&mbs2, "screen", 1, 0, "ok", &f);
    r.run.fingerprint = NULL;
    r.run.started = r.run.ended = NAN;
    ck_assert_int_eq(mt_store_put_result(s, &r, &id_cand, d), 0);
    {
        int64_t cand[] = {id_cand}, ctrl[] = {id_ok};
        mt_store_decision x;
        memset(&x, 0, sizeof x);
        x.kind = "screen";
        x.variable = "mbs";
        x.candidate_id = mbs2.id;
        x.control_id = base.id;
        x.verdict = "unknown";
        x.statistics = "{\"p_mwu\":0.31,\"p_ks\":0.4,\"ci\":[-0.021,0.034],\"effect\":0.006,"
                       "\"replicates\":[1,1]}";
        x.evidence = "1 replicate per arm; more needed";
        x.created = NAN;
        x.candidate_runs = cand, x.n_candidate_runs = 1;
        x.control_runs = ctrl, x.n_control_runs = 1;
        ck_assert_int_eq(mt_store_add_decision(s, &x, &dec, d), 0);
    }
    ck_assert_int_eq(mt_store_add_event(s, NAN, "phase", "retune: memory wall", d), 0);
    ck_assert_int_eq(mt_store_add_event(s, 1.0, "start", "tune started", d), 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    mt_store_destroy(&s);

    /* resume: a new process would load the contract again and reopen */
    mt_contract_destroy(&c);
    c = load_contract();
    s = open_ok(dir, c);
    ck_assert_int_eq(mt_store_find_run(s, base.id, "screen", 0, 1, &run, d), 1);
    ck_assert_int_eq(run.id, id_ok);
    ck_assert_str_eq(run.outcome, "ok");
    ck_assert_str_eq(run.config_canonical, base.canonical);
    ck_assert_str_eq(run.worker, "node0");
    ck_assert_ptr_nonnull(strstr(run.fingerprint, "\"nccl\":\"2.25.1\""));
    ck_assert(run.started == 1767225600.25 && run.ended == 1767225700.5);
    ck_assert(run.wall_s == 100.25 && run.sim_s == 395.611 && run.gpu_hours == 1.758272);
    ck_assert_str_eq(run.log_path, "/tmp/logs/run.log");
    mt_store_run_clear(&run);
    /* retry -1: the latest retry of a replicate */
    ck_assert_int_eq(mt_store_find_run(s, base.id, "screen", 0, -1, &run, d), 1);
    ck_assert_int_eq(run.retry, 1);
    ck_assert_int_eq(run.id, id_ok);
    mt_store_run_clear(&run);
    ck_assert_int_eq(mt_store_find_run(s, base.id, "screen", 0, 0, &run, d), 1);
    ck_assert_str_eq(run.outcome, "infra");
    ck_assert_str_eq(run.evidence,
                     "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0");
    mt_store_run_clear(&run);
    ck_assert_int_eq(mt_store_find_run(s, mbs2.id, "screen", 1, 0, &run, d), 1);
    ck_assert_ptr_null(run.fingerprint);
    ck_assert(isnan(run.started) && isnan(run.ended));
    mt_store_run_clear(&run);
    /* not measured yet: the resume runs it */
    ck_assert_int_eq(mt_store_find_run(s, base.id, "screen", 1, -1, NULL, d), 0);
    ck_assert_int_eq(mt_store_find_run(s, base.id, "validate", 0, 0, NULL, d), 0);

    ck_assert_int_eq(mt_store_samples(s, id_ok, &sv, &n, d), 0);
    ck_assert_uint_eq(n, 20);
    for (i = 0; i < n; i++) {
        size_t j;
        ck_assert_int_eq(sv[i].iteration, f.s[i].iteration);
        ck_assert(sv[i].elapsed_ms == f.s[i].elapsed_ms);
        ck_assert(isnan(f.s[i].tflops) ? isnan(sv[i].tflops) : sv[i].tflops == f.s[i].tflops);
        ck_assert(isnan(f.s[i].grad_norm) ? isnan(sv[i].grad_norm)
                                          : sv[i].grad_norm == f.s[i].grad_norm);
        ck_assert_int_eq(sv[i].skipped, f.s[i].skipped);
        ck_assert_int_eq(sv[i].nan, f.s[i].nan);
        ck_assert_uint_eq(sv[i].n_losses, f.s[i].n_losses);
        for (j = 0; j < sv[i].n_losses; j++) {
            double want = f.l[i][j].value, got = sv[i].losses[j].value;
            ck_assert_str_eq(sv[i].losses[j].key, f.l[i][j].key);
            ck_assert_msg(isnan(want) ? isnan(got) : got == want, "iteration %zu %s: %g, want %g",
                          i + 1, f.l[i][j].key, got, want);
        }
    }
    mt_store_samples_free(sv, n);

    ck_assert_int_eq(mt_store_gpu_memory(s, id_ok, &gv, &n, d), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(gv[0].peak_bytes, 61370000000LL); /* hottest first */
    ck_assert_str_eq(gv[0].source, "nvml");
    ck_assert_int_eq(gv[0].rank, 5);
    ck_assert_int_eq(gv[1].alloc_bytes, 55999130000LL);
    ck_assert_int_eq(gv[2].rank, -1);
    ck_assert_str_eq(gv[2].host, "node1");
    mt_store_gpu_memory_free(gv, n);

    ck_assert_int_eq(mt_store_list_decisions(s, &dv, &n, d), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(dv[0].id, dec);
    ck_assert_str_eq(dv[0].verdict, "unknown");
    ck_assert_str_eq(dv[0].candidate_id, mbs2.id);
    ck_assert_str_eq(dv[0].control_canonical, base.canonical);
    ck_assert_uint_eq(dv[0].n_candidate_runs, 1);
    ck_assert_int_eq(dv[0].candidate_runs[0], id_cand);
    ck_assert_int_eq(dv[0].control_runs[0], id_ok);
    ck_assert_ptr_nonnull(strstr(dv[0].statistics, "\"p_mwu\":0.31"));
    mt_store_decisions_free(dv, n);

    ck_assert_int_eq(mt_store_list_events(s, &ev, &n, d), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(ev[0].kind, "start"); /* time order */
    ck_assert_str_eq(ev[1].text, "retune: memory wall");
    mt_store_events_free(ev, n);

    {
        mt_store_run *rv;
        ck_assert_int_eq(mt_store_list_runs(s, NULL, NULL, &rv, &n, d), 0);
        ck_assert_uint_eq(n, 4);
        mt_store_runs_free(rv, n);
        ck_assert_int_eq(mt_store_list_runs(s, mbs2.id, "screen", &rv, &n, d), 0);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(rv[0].outcome, "oom");
        mt_store_runs_free(rv, n);
    }
    ck_assert_uint_eq(mt_diag_count(d), 0);

    /* the store can be opened without a contract (moetune runs DIR) */
    mt_store_destroy(&s);
    s = open_ok(dir, NULL);
    ck_assert_str_eq(mt_store_fingerprint(s), c->fingerprint);
    mt_store_destroy(&s);

    mt_diag_destroy(&d);
    free(base.canonical);
    free(mbs2.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

START_TEST(bad_input_stores_nothing)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext base = config_of(t, NULL, NULL), other = config_of(t, "micro_batch_size", "2");
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    mt_store_result r;

    fake_fill(&f, 5, 100);
    r = result_of(&base, "scren", 0, 0, "ok", &f);
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "kind 'scren' is not one of fit, screen"));
    r = result_of(&base, "screen", 0, 0, "exploded", &f);
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "outcome 'exploded'"));
    r = result_of(&base, "screen", 0, 0, "ok", &f);
    r.run.fingerprint = "{\"hosts\": [node0]}";
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "run fingerprint is not a JSON object"));
    /* an id that is not its canonical text's id */
    r = result_of(&base, "screen", 0, 0, "ok", &f);
    r.run.config_canonical = other.canonical;
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "does not match its canonical text"));
    /* a new config without its text */
    r = result_of(&base, "screen", 0, 0, "ok", &f);
    r.run.config_canonical = NULL;
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "is not stored yet"));
    /* the same iteration twice: the whole result is refused, run row too */
    r = result_of(&base, "screen", 0, 0, "ok", &f);
    f.s[4].iteration = 4;
    ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert(mt_diag_contains(d, "iteration 4 is given twice"));
    {
        mt_store_gpu_mem g = {0, "node0", 0, 1, -1, "dmesg"};
        f.s[4].iteration = 5;
        r.gpus = &g, r.n_gpus = 1;
        ck_assert_int_lt(mt_store_put_result(s, &r, NULL, d), 0);
        ck_assert(mt_diag_contains(d, "source 'dmesg'"));
    }
    ck_assert_int_eq(count_rows(dir, "runs"), 0);
    ck_assert_int_eq(count_rows(dir, "samples"), 0);
    ck_assert_int_eq(count_rows(dir, "configs"), 0);
    {
        mt_store_decision x;
        memset(&x, 0, sizeof x);
        x.kind = "screen";
        x.candidate_id = base.id;
        x.candidate_canonical = base.canonical;
        x.verdict = "maybe";
        ck_assert_int_lt(mt_store_add_decision(s, &x, NULL, d), 0);
        ck_assert(mt_diag_contains(d, "verdict 'maybe'"));
        x.verdict = "better";
        x.statistics = "p=0.01";
        ck_assert_int_lt(mt_store_add_decision(s, &x, NULL, d), 0);
        ck_assert(mt_diag_contains(d, "decision statistics is not a JSON object"));
    }
    ck_assert_int_eq(count_rows(dir, "decisions"), 0);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(base.canonical);
    free(other.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- concurrency ------------------------------------------------------------------ */

#define WRITER_RUNS 150

/* The child: its own connection, WRITER_RUNS results of 20 samples each,
 * one transaction per result.  Exit status 0 when all went in. */
static void writer_child(const char *dir, const mt_contract *c, const cfgtext *cfg)
{
    mt_diag *d = mt_diag_new();
    mt_store *s = mt_store_open(dir, c, d);
    fake f;
    int i, bad = 0;
    if (!s)
        _exit(10);
    fake_fill(&f, 20, 500.0);
    for (i = 0; i < WRITER_RUNS; i++) {
        mt_store_result r = result_of(cfg, "screen", i, 0, "ok", &f);
        if (mt_store_put_result(s, &r, NULL, d) != 0)
            bad++;
    }
    if (bad)
        mt_diag_print(d, stderr);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    _exit(bad ? 11 : 0);
}

START_TEST(second_process_writes_while_first_reads)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    size_t last = 0, reads = 0, events = 0, seen_partial = 0;
    int st = 0;
    pid_t pid;

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        writer_child(dir, c, &cfg);
    /* The parent reads all the while, and writes events of its own. */
    while (waitpid(pid, &st, WNOHANG) == 0 || reads == 0) {
        mt_store_run *rv;
        size_t n, i;
        char text[64];
        ck_assert_int_eq(mt_store_list_runs(s, NULL, NULL, &rv, &n, d), 0);
        ck_assert_uint_ge(n, last); /* committed runs never disappear */
        /* a run is visible only with all its samples: one transaction */
        for (i = last; i < n; i++) {
            mt_store_sample *sv;
            size_t ns;
            ck_assert_int_eq(mt_store_samples(s, rv[i].id, &sv, &ns, d), 0);
            if (ns != 20)
                seen_partial++;
            mt_store_samples_free(sv, ns);
        }
        last = n;
        mt_store_runs_free(rv, n);
        snprintf(text, sizeof text, "reader pass %zu", reads);
        ck_assert_int_eq(mt_store_add_event(s, NAN, "test", text, d), 0);
        events++, reads++;
    }
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer exit status %d", st);
    ck_assert_uint_eq(seen_partial, 0);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    ck_assert_int_eq(count_rows(dir, "runs"), WRITER_RUNS);
    ck_assert_int_eq(count_rows(dir, "samples"), WRITER_RUNS * 20);
    ck_assert_int_eq(count_rows(dir, "events"), (long long)events);
    printf("concurrent: %zu reader passes while the writer stored %d runs\n", reads, WRITER_RUNS);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- contract fingerprint ------------------------------------------------------------- */

START_TEST(fingerprint_mismatch_names_fields)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract(), *c2;
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    const mt_diag_item *it;
    size_t i;
    int found = 0;
    mt_store_destroy(&s);

    c2 = load_contract_edited("global_batch_size = 1024;", "global_batch_size = 512;", d);
    ck_assert_ptr_nonnull(c2);
    ck_assert_str_ne(c2->fingerprint, c->fingerprint);
    s = mt_store_open(dir, c2, d);
    ck_assert_ptr_null(s);
    mt_diag_print(d, stdout);
    ck_assert_uint_eq(mt_diag_count(d), 2);
    ck_assert(mt_diag_contains(d, "1 field differs"));
    it = mt_diag_at(d, 1);
    ck_assert_str_eq(it->field, "batch.global_batch_size");
    ck_assert_str_eq(it->message, "1024 (store) vs 512 (contract)");
    ck_assert_int_eq(it->line, mt_contract_line(c2, "batch.global_batch_size"));
    ck_assert_int_gt(it->line, 0);
    mt_diag_destroy(&d);
    mt_contract_destroy(&c2);

    /* two fields: both listed */
    d = mt_diag_new();
    {
        char *path = tk_example(CONTRACT), *text = tk_slurp(path), *a, *b;
        a = strstr(text, "global_batch_size = 1024;");
        b = strstr(text, "seq_length = 4096;");
        ck_assert(a && b);
        memcpy(a + strlen("global_batch_size = "), "2048", 4);
        memcpy(b + strlen("seq_length = "), "8192", 4);
        c2 = mt_contract_load_string(text, path, d);
        ck_assert_ptr_nonnull(c2);
        free(text);
        free(path);
    }
    ck_assert_ptr_null(mt_store_open(dir, c2, d));
    ck_assert(mt_diag_contains(d, "2 fields differ"));
    for (i = 0; i < mt_diag_count(d); i++) {
        it = mt_diag_at(d, i);
        if (it->field && !strcmp(it->field, "batch.seq_length")) {
            ck_assert_str_eq(it->message, "4096 (store) vs 8192 (contract)");
            found++;
        }
        if (it->field && !strcmp(it->field, "batch.global_batch_size")) {
            ck_assert_str_eq(it->message, "1024 (store) vs 2048 (contract)");
            found++;
        }
    }
    ck_assert_int_eq(found, 2);
    mt_diag_destroy(&d);
    mt_contract_destroy(&c2);

    /* the refused opens changed nothing: the original contract still opens */
    s = open_ok(dir, c);
    mt_store_destroy(&s);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- filesystems -------------------------------------------------------------------- */

START_TEST(network_filesystems_refused)
{
    static const struct {
        unsigned long magic;
        const char *name;
    } net[] = {{0x6969, "NFS"},        {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},
               {0xFF534D42, "CIFS"},   {0xFE534D42, "SMB2"},   {0x517B, "SMB"},
               {0x00C36400, "CephFS"}, {0x5346414F, "AFS"},    {0x65735546, "FUSE"},
               {0x19830326, "BeeGFS"}, {0x01021997, "9P"}};
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    size_t i;
    for (i = 0; i < sizeof net / sizeof net[0]; i++) {
        char sub[32];
        char *tune, *db;
        const char *name = NULL;
        mt_diag *d = mt_diag_new();
        ck_assert_int_eq(mt_store_fs_classify(net[i].magic, &name), MT_FS_NETWORK);
        ck_assert_ptr_nonnull(strstr(name, net[i].name));
        /* f_type is a signed word: CIFS's magic may come back sign-extended */
        ck_assert_int_eq(mt_store_fs_classify((unsigned long)(long)(int)net[i].magic, NULL),
                         MT_FS_NETWORK);
        snprintf(sub, sizeof sub, "t%zu", i);
        tune = join(dir, sub);
        db = join(tune, MT_STORE_FILE);
        ck_assert_ptr_null(mt_store_open_fs(tune, c, net[i].magic, d));
        ck_assert_msg(mt_diag_contains(d, net[i].name) && mt_diag_contains(d, "WAL") &&
                          mt_diag_contains(d, "local disk"),
                      "message for %s: %s", net[i].name,
                      mt_diag_count(d) ? mt_diag_at(d, 0)->message : "(none)");
        ck_assert_msg(!exists(db), "%s: a database was created on a refused filesystem",
                      net[i].name);
        if (i == 0) {
            mt_diag_print(d, stdout);
            /* an existing store opened there is refused too, with or without contract */
            mt_store *s = open_ok(tune, c);
            mt_store_destroy(&s);
            mt_diag_clear(d);
            ck_assert_ptr_null(mt_store_open_fs(tune, NULL, net[i].magic, d));
            ck_assert(mt_diag_contains(d, "NFS"));
        }
        free(tune);
        free(db);
        mt_diag_destroy(&d);
    }
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

START_TEST(local_filesystems_allowed)
{
    static const unsigned long local[] = {0xEF53,     0x01021994, 0x794C7630,
                                          0x58465342, 0x9123683E, 0x2FC12FC1};
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    unsigned long magic = 0;
    const char *name = NULL;
    mt_store *s;
    size_t i;

    for (i = 0; i < sizeof local / sizeof local[0]; i++)
        ck_assert_int_eq(mt_store_fs_classify(local[i], NULL), MT_FS_LOCAL);
    ck_assert_int_eq(mt_store_fs_classify(0x12345678, &name), MT_FS_LOCAL);
    ck_assert_ptr_null(name);

    /* the real statfs path: the kernel's own answers for filesystems whose
     * type is certain on any Linux machine */
    ck_assert_int_eq(mt_store_fs_magic("/proc", &magic), 0);
    ck_assert_uint_eq(magic, 0x9FA0); /* PROC_SUPER_MAGIC */
    ck_assert_int_eq(mt_store_fs_magic("/no/such/dir", &magic), -ENOENT);

    /* the temporary directory, whatever it is here, is local: the real
     * check lets the store open (no forced type) */
    ck_assert_int_eq(mt_store_fs_magic(dir, &magic), 0);
    ck_assert_int_eq(mt_store_fs_classify(magic, &name), MT_FS_LOCAL);
    printf("local: %s is on %s (0x%lX)\n", dir, name ? name : "an unlisted filesystem", magic);
    s = open_ok(dir, c);
    mt_store_destroy(&s);

    /* /dev/shm is tmpfs on Linux machines that have it */
    if (mt_store_fs_magic("/dev/shm", &magic) == 0 && magic == 0x01021994) {
        char tmpl[] = "/dev/shm/moetune-store-XXXXXX";
        if (mkdtemp(tmpl)) {
            s = open_ok(tmpl, c);
            mt_store_destroy(&s);
            rm_rf(strdup(tmpl));
            printf("local: /dev/shm (tmpfs) allowed\n");
        }
    }
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- de-duplication -------------------------------------------------------------------- */

START_TEST(resent_result_deduplicated)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    mt_store_result r;
    int64_t a = 0, b = 0, e = 0;

    fake_fill(&f, 20, 1000);
    r = result_of(&cfg, "validate", 2, 0, "ok", &f);
    ck_assert_int_eq(mt_store_put_result(s, &r, &a, d), 0);
    ck_assert_int_eq(mt_store_put_result(s, &r, &b, d), 1); /* re-sent */
    ck_assert_int_eq(a, b);
    ck_assert_uint_eq(mt_diag_count(d), 0);
    /* re-sent with a different outcome: the first one stays, and d says so */
    r.run.outcome = "hang";
    ck_assert_int_eq(mt_store_put_result(s, &r, &b, d), 1);
    ck_assert_int_eq(a, b);
    ck_assert(mt_diag_contains(d, "already stored"));
    ck_assert(mt_diag_contains(d, "is ignored"));
    ck_assert_int_eq(count_rows(dir, "runs"), 1);
    ck_assert_int_eq(count_rows(dir, "samples"), 20);
    /* a retry and another replicate are new runs */
    r.run.outcome = "ok";
    r.run.retry = 1;
    ck_assert_int_eq(mt_store_put_result(s, &r, &e, d), 0);
    ck_assert_int_ne(e, a);
    r.run.retry = 0;
    r.run.replicate = 3;
    ck_assert_int_eq(mt_store_put_result(s, &r, &e, d), 0);
    ck_assert_int_eq(count_rows(dir, "runs"), 3);
    ck_assert_int_eq(count_rows(dir, "samples"), 60);
    /* inside a caller's transaction a duplicate is a no-op too */
    ck_assert_int_eq(mt_store_begin(s, d), 0);
    ck_assert_int_eq(mt_store_put_result(s, &r, &b, d), 1);
    ck_assert_int_eq(mt_store_commit(s, d), 0);
    ck_assert_int_eq(b, e);
    mt_store_destroy(&s);

    /* four processes send the same 20 results at once: each stored once */
    {
        pid_t pids[4];
        int i, inserted = 0;
        for (i = 0; i < 4; i++) {
            pids[i] = fork();
            ck_assert_int_ge(pids[i], 0);
            if (pids[i] == 0) {
                mt_diag *cd = mt_diag_new();
                mt_store *cs = mt_store_open(dir, c, cd);
                int k, mine = 0;
                if (!cs)
                    _exit(255);
                for (k = 0; k < 20; k++) {
                    mt_store_result x = result_of(&cfg, "screen", k, 0, "ok", &f);
                    int rc = mt_store_put_result(cs, &x, NULL, cd);
                    if (rc < 0)
                        _exit(254);
                    mine += rc == 0;
                }
                mt_store_destroy(&cs);
                mt_diag_destroy(&cd);
                _exit(mine);
            }
        }
        for (i = 0; i < 4; i++) {
            int st = 0;
            ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
            ck_assert(WIFEXITED(st) && WEXITSTATUS(st) <= 20);
            inserted += WEXITSTATUS(st);
        }
        ck_assert_int_eq(inserted, 20);
        ck_assert_int_eq(count_rows(dir, "runs"), 23);
        ck_assert_int_eq(count_rows(dir, "samples"), 23 * 20);
    }
    mt_diag_destroy(&d);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- export ----------------------------------------------------------------------------- */

/* An RFC 4180 reader: records of fields. */
typedef struct csv {
    char ***rec; /* rec[i][j] */
    size_t *nf;  /* fields per record */
    size_t n;
} csv;

static void csv_parse(const char *p, csv *out)
{
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    while (*p) {
        char **fields = NULL;
        size_t nf = 0;
        for (;;) {
            char *f = malloc(strlen(p) + 1);
            size_t k = 0;
            if (*p == '"') {
                p++;
                for (;;) {
                    ck_assert_msg(*p, "unterminated quoted field");
                    if (*p == '"' && p[1] == '"')
                        f[k++] = '"', p += 2;
                    else if (*p == '"') {
                        p++;
                        break;
                    } else
                        f[k++] = *p++;
                }
            } else {
                while (*p && *p != ',' && *p != '\r' && *p != '\n') {
                    ck_assert_msg(*p != '"', "quote inside an unquoted field");
                    f[k++] = *p++;
                }
            }
            f[k] = '\0';
            fields = realloc(fields, (nf + 1) * sizeof *fields);
            fields[nf++] = f;
            if (*p == ',') {
                p++;
                continue;
            }
            ck_assert_msg(*p == '\r' && p[1] == '\n', "record not ended by CRLF");
            p += 2;
            break;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->rec = realloc(out->rec, cap * sizeof *out->rec);
            out->nf = realloc(out->nf, cap * sizeof *out->nf);
        }
        out->rec[out->n] = fields;
        out->nf[out->n++] = nf;
    }
}

static void csv_free(csv *c)
{
    size_t i, j;
    for (i = 0; i < c->n; i++) {
        for (j = 0; j < c->nf[i]; j++)
            free(c->rec[i][j]);
        free(c->rec[i]);
    }
    free(c->rec);
    free(c->nf);
}

static int csv_col(const csv *c, const char *name)
{
    size_t j;
    for (j = 0; c->n && j < c->nf[0]; j++)
        if (!strcmp(c->rec[0][j], name))
            return (int)j;
    ck_abort_msg("no column %s", name);
    return -1;
}

/* Runs fn into a memory stream; caller frees. */
static char *capture_csv(mt_store *s, const char *table)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    mt_diag *d = mt_diag_new();
    ck_assert_int_eq(mt_store_export_csv(s, table, m, d), 0);
    fclose(m);
    mt_diag_destroy(&d);
    return text;
}

static const char tricky[] = "CUDA error: \"out of memory\", at step 7\r\nnext line, too \xff";

START_TEST(export_csv_and_json_parse_back)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext base = config_of(t, NULL, NULL), other = config_of(t, "micro_batch_size", "2");
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    mt_store_result r;
    mt_store_gpu_mem g[2] = {{0, "node0", 0, 123456789012LL, 100, "sim"},
                             {1, "node0", 1, 1, -1, "sim"}};
    int64_t id = 0;
    size_t i, k;
    char *text = NULL;
    size_t len = 0;
    FILE *m;
    cJSON *root, *runs, *samples, *x;

    fake_fill(&f, 10, 2.5);
    f.l[2][0].value = NAN;
    r = result_of(&base, "validate", 0, 0, "ok", &f);
    r.gpus = g, r.n_gpus = 2;
    ck_assert_int_eq(mt_store_put_result(s, &r, &id, d), 0);
    r = result_of(&other, "fit", 0, 0, "oom", NULL);
    r.run.evidence = tricky;
    r.run.worker = NULL;
    ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    {
        mt_store_decision x2;
        memset(&x2, 0, sizeof x2);
        x2.kind = "fit";
        x2.candidate_id = other.id;
        x2.verdict = "rejected";
        x2.evidence = tricky;
        x2.created = NAN;
        ck_assert_int_eq(mt_store_add_decision(s, &x2, NULL, d), 0);
    }
    ck_assert_int_eq(mt_store_add_event(s, NAN, "note", "a, \"b\"\nc", d), 0);

    /* every table: header + one record per row, same field count on each */
    for (i = 0; mt_store_tables[i]; i++) {
        csv cv;
        char sql[96];
        sqlite3 *db = raw_open(dir);
        long long rows, cols;
        text = capture_csv(s, mt_store_tables[i]);
        csv_parse(text, &cv);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", mt_store_tables[i]);
        rows = raw_int(db, sql);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM pragma_table_info('%s')",
                 mt_store_tables[i]);
        cols = raw_int(db, sql);
        sqlite3_close(db);
        ck_assert_msg((long long)cv.n == rows + 1, "%s: %zu records for %lld rows",
                      mt_store_tables[i], cv.n, rows);
        for (k = 0; k < cv.n; k++)
            ck_assert_msg((long long)cv.nf[k] == cols, "%s record %zu: %zu fields, want %lld",
                          mt_store_tables[i], k, cv.nf[k], cols);
        if (!strcmp(mt_store_tables[i], "runs")) {
            int ev = csv_col(&cv, "evidence"), ws = csv_col(&cv, "wall_s");
            ck_assert_str_eq(cv.rec[2][ev], tricky); /* quoted, doubled, CRLF kept */
            ck_assert(strtod(cv.rec[1][ws], NULL) == 100.25);
            ck_assert_str_eq(cv.rec[2][csv_col(&cv, "worker")], ""); /* NULL */
        }
        if (!strcmp(mt_store_tables[i], "samples"))
            ck_assert_ptr_nonnull(strstr(cv.rec[3][csv_col(&cv, "losses")], "\"nan\""));
        csv_free(&cv);
        free(text);
    }
    {
        mt_diag *d2 = mt_diag_new();
        FILE *null = fopen("/dev/null", "w");
        ck_assert_int_lt(mt_store_export_csv(s, "sqlite_master", null, d2), 0);
        ck_assert(mt_diag_contains(d2, "no table 'sqlite_master'"));
        fclose(null);
        mt_diag_destroy(&d2);
    }

    /* JSON: one document, JSON columns embedded, invalid UTF-8 replaced */
    m = open_memstream(&text, &len);
    ck_assert_int_eq(mt_store_export_json(s, m, d), 0);
    fclose(m);
    root = cJSON_Parse(text);
    ck_assert_msg(root != NULL, "export is not JSON: %.200s", text);
    ck_assert_str_eq(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "meta"), "fingerprint")->valuestring,
        c->fingerprint);
    runs = cJSON_GetObjectItem(root, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(runs), 2);
    x = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "fingerprint");
    ck_assert(cJSON_IsObject(x));
    ck_assert_str_eq(cJSON_GetObjectItem(x, "driver")->valuestring, "570.86");
    x = cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "evidence");
    ck_assert(cJSON_IsString(x));
    ck_assert_ptr_nonnull(strstr(x->valuestring, "\"out of memory\", at step 7\r\nnext"));
    ck_assert_ptr_nonnull(strstr(x->valuestring, "\xEF\xBF\xBD")); /* the 0xff byte */
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "worker")));
    samples = cJSON_GetObjectItem(root, "samples");
    ck_assert_int_eq(cJSON_GetArraySize(samples), 10);
    x = cJSON_GetObjectItem(cJSON_GetArrayItem(samples, 0), "losses");
    ck_assert(cJSON_IsObject(x));
    ck_assert(cJSON_GetObjectItem(x, "lm loss")->valuedouble == 11.6);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "gpu_memory")), 2);
    ck_assert(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "gpu_memory"), 0),
                                  "peak_bytes")
                  ->valuedouble == 123456789012.0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "decisions")), 1);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "events")), 1);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "configs")), 2);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "schema_version")), 1);
    cJSON_Delete(root);
    free(text);

    /* moetune runs: text, CSV, JSON */
    m = open_memstream(&text, &len);
    ck_assert_int_eq(mt_store_print_runs(s, m, MT_STORE_TEXT, d), 0);
    fclose(m);
    fputs(text, stdout);
    ck_assert_ptr_nonnull(strstr(text, base.id));
    ck_assert_ptr_nonnull(strstr(text, "2 runs: 1 ok, 1 oom"));
    ck_assert_ptr_nonnull(strstr(text, "114.98"));          /* hottest GPU in GiB */
    ck_assert_ptr_nonnull(strstr(text, "oom: CUDA error")); /* evidence, first line */
    ck_assert_ptr_null(strstr(text, "next line"));
    free(text);
    m = open_memstream(&text, &len);
    ck_assert_int_eq(mt_store_print_runs(s, m, MT_STORE_CSV, d), 0);
    fclose(m);
    {
        csv cv;
        csv_parse(text, &cv);
        ck_assert_uint_eq(cv.n, 3);
        ck_assert_str_eq(cv.rec[1][csv_col(&cv, "config_id")], base.id);
        csv_free(&cv);
    }
    free(text);
    m = open_memstream(&text, &len);
    ck_assert_int_eq(mt_store_print_runs(s, m, MT_STORE_JSON, d), 0);
    fclose(m);
    root = cJSON_Parse(text);
    ck_assert(cJSON_IsArray(root));
    ck_assert_int_eq(cJSON_GetArraySize(root), 2);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(root, 1), "outcome")->valuestring,
                     "oom");
    cJSON_Delete(root);
    free(text);
    ck_assert_uint_eq(mt_diag_count(d), 0);

    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(base.canonical);
    free(other.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- crashes -------------------------------------------------------------------------------- */

static int integrity_ok(const char *dir)
{
    sqlite3 *db = raw_open(dir);
    char *r = raw_text(db, "PRAGMA integrity_check");
    int ok = r && !strcmp(r, "ok");
    free(r);
    sqlite3_close(db);
    return ok;
}

START_TEST(exit_mid_transaction_loses_nothing_committed)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    mt_store_result r;
    int st = 0, i;
    pid_t pid;

    fake_fill(&f, 50, 900);
    for (i = 0; i < 3; i++) {
        r = result_of(&cfg, "validate", i, 0, "ok", &f);
        ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    }
    mt_store_destroy(&s);

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mt_store *cs = mt_store_open(dir, c, NULL);
        if (!cs || mt_store_begin(cs, NULL))
            _exit(1);
        for (i = 3; i < 6; i++) {
            mt_store_result x = result_of(&cfg, "validate", i, 0, "ok", &f);
            if (mt_store_put_result(cs, &x, NULL, NULL) != 0)
                _exit(2);
        }
        if (mt_store_add_event(cs, NAN, "never", "uncommitted", NULL))
            _exit(3);
        _exit(0); /* no commit, no close */
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    ck_assert(integrity_ok(dir));
    s = open_ok(dir, c);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(mt_store_find_run(s, cfg.id, "validate", i, 0, NULL, d), i < 3);
    ck_assert_int_eq(count_rows(dir, "samples"), 150);
    ck_assert_int_eq(count_rows(dir, "events"), 0);
    /* and the store keeps working */
    r = result_of(&cfg, "validate", 3, 0, "ok", &f);
    ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* Killed while holding the write lock with a large uncommitted transaction
 * (big enough that SQLite spills its pages into the WAL before commit). */
START_TEST(sigkill_holding_write_lock)
{
    char *dir = tmp_dir(), *walpath = join(dir, MT_STORE_FILE "-wal");
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    struct stat sb;
    int fds[2], st = 0;
    char byte = 0;
    fake f;
    mt_store_result r;
    pid_t pid;
    mt_store_destroy(&s);

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mt_store *cs = mt_store_open(dir, c, NULL);
        int k;
        close(fds[0]);
        if (!cs)
            _exit(1);
        fake_fill(&f, 50, 800);
        for (k = 0; k < 5; k++) {
            mt_store_result x = result_of(&cfg, "validate", k, 0, "ok", &f);
            if (mt_store_put_result(cs, &x, NULL, NULL) != 0)
                _exit(2);
        }
        if (mt_store_begin(cs, NULL))
            _exit(3);
        for (k = 5; k < 1500; k++) {
            mt_store_result x = result_of(&cfg, "validate", k, 0, "ok", &f);
            if (mt_store_put_result(cs, &x, NULL, NULL) != 0)
                _exit(4);
        }
        if (write(fds[1], "x", 1) != 1)
            _exit(5);
        pause(); /* holding the lock, uncommitted, until killed */
        _exit(6);
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], &byte, 1), 1);
    ck_assert_int_eq(stat(walpath, &sb), 0);
    printf("sigkill holding the lock: WAL is %lld bytes before the kill\n", (long long)sb.st_size);
    /* meanwhile `moetune runs` reads the committed state without waiting */
    {
        double t0 = mono();
        mt_store *rs = open_ok(dir, NULL);
        mt_store_run *rv;
        size_t n;
        ck_assert_int_eq(mt_store_list_runs(rs, NULL, NULL, &rv, &n, d), 0);
        ck_assert_uint_eq(n, 5);
        mt_store_runs_free(rv, n);
        mt_store_destroy(&rs);
        ck_assert_msg(mono() - t0 < 5.0, "a reader waited %.1f s for the writer", mono() - t0);
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));
    close(fds[0]);

    ck_assert(integrity_ok(dir));
    ck_assert_int_eq(count_rows(dir, "runs"), 5);
    ck_assert_int_eq(count_rows(dir, "samples"), 250);
    /* the dead process's lock is gone: writing works at once */
    s = open_ok(dir, c);
    fake_fill(&f, 50, 800);
    r = result_of(&cfg, "validate", 5, 0, "ok", &f);
    ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    ck_assert_int_eq(count_rows(dir, "runs"), 6);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(walpath);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

START_TEST(sigkill_while_writing_loses_nothing_committed)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    int fds[2], st = 0, reported = 0, rep;
    FILE *in;
    pid_t pid;
    mt_store_destroy(&s);

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mt_store *cs = mt_store_open(dir, c, NULL);
        fake f;
        int k;
        close(fds[0]);
        if (!cs)
            _exit(1);
        fake_fill(&f, 50, 700);
        for (k = 0;; k++) {
            mt_store_result x = result_of(&cfg, "screen", k, 0, "ok", &f);
            char line[32];
            int n;
            if (mt_store_put_result(cs, &x, NULL, NULL) != 0)
                _exit(2);
            /* told only after the commit returned: the store owes us this one */
            n = snprintf(line, sizeof line, "%d\n", k);
            if (write(fds[1], line, (size_t)n) != n)
                _exit(3);
        }
    }
    close(fds[1]);
    in = fdopen(fds[0], "r");
    while (reported < 40 && fscanf(in, "%d", &rep) == 1)
        ck_assert_int_eq(rep, reported++);
    /* kill it in the middle of whatever it is doing: likely inside a write */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    while (fscanf(in, "%d", &rep) == 1) /* reports still in the pipe */
        ck_assert_int_eq(rep, reported++);
    fclose(in);

    ck_assert(integrity_ok(dir));
    s = open_ok(dir, c);
    {
        mt_store_run *rv;
        size_t n, i;
        ck_assert_int_eq(mt_store_list_runs(s, NULL, NULL, &rv, &n, d), 0);
        /* everything reported is there; at most the one in flight beyond */
        ck_assert_msg(n == (size_t)reported || n == (size_t)reported + 1,
                      "%zu runs stored, %d reported committed", n, reported);
        for (i = 0; i < n; i++) {
            mt_store_sample *sv;
            size_t ns;
            ck_assert_int_eq(rv[i].replicate, (int)i);
            ck_assert_int_eq(mt_store_samples(s, rv[i].id, &sv, &ns, d), 0);
            ck_assert_uint_eq(ns, 50); /* never a run without its samples */
            mt_store_samples_free(sv, ns);
        }
        printf("sigkill: %d runs reported committed, %zu stored, integrity ok\n", reported, n);
        mt_store_runs_free(rv, n);
    }
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- files that are not a store ------------------------------------------------------------ */

START_TEST(garbage_file_refused_unchanged)
{
    char *dir = tmp_dir(), *db = join(dir, MT_STORE_FILE), *before, *after, *wal;
    mt_contract *c = load_contract();
    mt_diag *d = mt_diag_new();
    unsigned char junk[4096];
    unsigned x = 12345;
    size_t i;
    FILE *fp;

    for (i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (unsigned char)(x >> 16);
    }
    fp = fopen(db, "wb");
    fwrite(junk, 1, sizeof junk, fp);
    fclose(fp);
    before = tk_slurp(db);
    ck_assert_ptr_null(mt_store_open(dir, c, d));
    mt_diag_print(d, stdout);
    ck_assert(mt_diag_contains(d, "is not a moetune results store"));
    ck_assert(mt_diag_contains(d, "not an SQLite database"));
    ck_assert_str_eq(mt_diag_at(d, 0)->file, db);
    after = tk_slurp(db);
    ck_assert_int_eq(memcmp(before, after, sizeof junk), 0);
    wal = join(dir, MT_STORE_FILE "-wal");
    ck_assert(!exists(wal));
    free(before);
    free(after);
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_store_open(dir, NULL, d));
    ck_assert(mt_diag_contains(d, "not an SQLite database"));

    /* a short text file */
    fp = fopen(db, "w");
    fputs("results: none\n", fp);
    fclose(fp);
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_store_open(dir, c, d));
    ck_assert(mt_diag_contains(d, "is not a moetune results store"));
    unlink(db);

    /* somebody else's SQLite database: refused, not converted to WAL */
    {
        sqlite3 *other;
        char *mode;
        ck_assert_int_eq(sqlite3_open(db, &other), SQLITE_OK);
        ck_assert_int_eq(
            sqlite3_exec(other, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", NULL, NULL, NULL),
            SQLITE_OK);
        sqlite3_close(other);
        mt_diag_clear(d);
        ck_assert_ptr_null(mt_store_open(dir, c, d));
        ck_assert(mt_diag_contains(d, "is an SQLite database but not a moetune results store"));
        other = raw_open(dir);
        mode = raw_text(other, "PRAGMA journal_mode");
        ck_assert_str_eq(mode, "delete");
        free(mode);
        sqlite3_close(other);
        unlink(db);
    }

    /* a directory where the file should be */
    ck_assert_int_eq(mkdir(db, 0700), 0);
    mt_diag_clear(d);
    ck_assert_ptr_null(mt_store_open(dir, c, d));
    ck_assert(mt_diag_contains(d, "is not a regular file"));
    rmdir(db);

    /* a store from a newer moetune */
    {
        mt_store *s = open_ok(dir, c);
        sqlite3 *raw;
        mt_store_destroy(&s);
        raw = raw_open(dir);
        ck_assert_int_eq(
            sqlite3_exec(raw, "INSERT INTO schema_version VALUES (99, 0, 'x')", NULL, NULL, NULL),
            SQLITE_OK);
        sqlite3_close(raw);
        mt_diag_clear(d);
        ck_assert_ptr_null(mt_store_open(dir, c, d));
        ck_assert(mt_diag_contains(d, "newer moetune (store schema 99"));
    }

    /* no store, no contract: nothing is created */
    {
        char *none = join(dir, "nothing-here");
        mt_diag_clear(d);
        ck_assert_ptr_null(mt_store_open(none, NULL, d));
        ck_assert(mt_diag_contains(d, "no such tune directory"));
        ck_assert(!exists(none));
        ck_assert_int_eq(mkdir(none, 0700), 0);
        mt_diag_clear(d);
        ck_assert_ptr_null(mt_store_open(none, NULL, d));
        ck_assert(mt_diag_contains(d, "holds no results store"));
        /* an empty file (a crash right at creation): left alone without a
         * contract, made a store with one */
        {
            char *empty = join(none, MT_STORE_FILE);
            struct stat sb;
            mt_store *s;
            fclose(fopen(empty, "w"));
            mt_diag_clear(d);
            ck_assert_ptr_null(mt_store_open(none, NULL, d));
            ck_assert(mt_diag_contains(d, "holds no results store yet"));
            ck_assert_int_eq(stat(empty, &sb), 0);
            ck_assert_int_eq(sb.st_size, 0);
            s = open_ok(none, c);
            mt_store_destroy(&s);
            s = open_ok(none, NULL);
            mt_store_destroy(&s);
            free(empty);
        }
        free(none);
    }
    mt_diag_destroy(&d);
    mt_contract_destroy(&c);
    free(db);
    free(wal);
    rm_rf(dir);
}
END_TEST

/* ---- a real sim run ------------------------------------------------------------------------ */

/* Runs moetune-sim with t's rendered config plus extra args; stdout text,
 * caller frees. */
static char *sim_log(tk *t, const char *const *extra, int *code)
{
    char outp[] = "/tmp/moetune-store-log-XXXXXX";
    int fo = mkstemp(outp), st = 0;
    mt_rendered out;
    posix_spawn_file_actions_t fa;
    char **argv;
    size_t i, n = 0, k = 0;
    pid_t pid;
    char *text;
    ck_assert(fo >= 0);
    mt_rendered_init(&out);
    ck_assert_int_eq(mt_render(t->reg, t->contract, t->cfg, MT_DIALECT_MLM, &out, t->diag), 0);
    while (extra[n])
        n++;
    argv = calloc(out.argv.n + n + 2, sizeof *argv);
    argv[k++] = (char *)SIM_BIN;
    for (i = 0; i < out.argv.n; i++)
        argv[k++] = out.argv.v[i];
    for (i = 0; i < n; i++)
        argv[k++] = (char *)extra[i];
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fo, 2);
    ck_assert_int_eq(posix_spawn(&pid, SIM_BIN, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(fo);
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    text = tk_slurp(outp);
    unlink(outp);
    free(argv);
    mt_rendered_clear(&out);
    return text;
}

/* The fields of Megatron-LM's iteration lines this test needs (the log
 * parser proper is core/logparse.c; this reads only what the sim prints). */
static size_t iteration_lines(const char *log, fake *f)
{
    const char *p = log;
    memset(f, 0, sizeof *f);
    while ((p = strstr(p, "] iteration ")) && f->n < 64) {
        mt_store_sample *s = &f->s[f->n];
        const char *e = strchr(p, '\n'), *q;
        char num[32];
        s->iteration = strtol(p + 12, NULL, 10);
        q = strstr(p, "elapsed time per iteration (ms): ");
        s->elapsed_ms = q && q < e ? strtod(q + 33, NULL) : NAN;
        q = strstr(p, "(TFLOP/s/GPU): ");
        s->tflops = q && q < e ? strtod(q + 15, NULL) : NAN;
        q = strstr(p, "grad norm: ");
        s->grad_norm = q && q < e ? strtod(q + 11, NULL) : NAN;
        q = strstr(p, "number of nan iterations: ");
        s->nan = q && q < e ? strtol(q + 26, NULL, 10) : 0;
        q = strstr(p, "lm loss: ");
        if (q && q < e) {
            size_t l = strcspn(q + 9, " |");
            snprintf(num, sizeof num, "%.*s", (int)l, q + 9);
            f->l[f->n][0].key = "lm loss";
            f->l[f->n][0].value = strtod(num, NULL); /* "NAN" reads as NaN */
            s->losses = f->l[f->n];
            s->n_losses = 1;
        }
        f->n++;
        p = e ? e : p + 1;
    }
    return f->n;
}

START_TEST(real_sim_run_stored)
{
    static const char *const nan_run[] = {
        "--sim-nodes", "2", "--sim-inject", "nan", "--sim-inject-step", "14", NULL};
    char *dir = tmp_dir(), *memfile = join(dir, "mem.txt");
    const char *ok_run[] = {"--sim-nodes", "2", "--sim-memory-file", memfile, NULL};
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    mt_store_gpu_mem g[64];
    mt_store_result r;
    mt_store_sample *sv;
    fake f;
    char *log, *mem, *line;
    int code, ng = 0;
    size_t n, i;
    int64_t id;

    /* a screen run as the sim prints it, with its per-GPU peaks */
    log = sim_log(t, ok_run, &code);
    ck_assert_int_eq(code, 0);
    ck_assert_uint_eq(iteration_lines(log, &f), 20);
    mem = tk_slurp(memfile);
    ck_assert_ptr_nonnull(mem);
    for (line = strtok(mem, "\n"); line && ng < 64; line = strtok(NULL, "\n")) {
        int rank, gpu;
        double mib;
        char host[32];
        if (sscanf(line, "rank=%d host=%31s gpu=%d peak_mib=%lf", &rank, host, &gpu, &mib) == 4) {
            g[ng].rank = rank;
            g[ng].host = strdup(host);
            g[ng].gpu = gpu;
            g[ng].peak_bytes = (int64_t)(mib * 1048576.0);
            g[ng].alloc_bytes = -1;
            g[ng].source = "sim";
            ng++;
        }
    }
    ck_assert_int_eq(ng, 16);
    r = result_of(&cfg, "screen", 0, 0, "ok", &f);
    r.gpus = g, r.n_gpus = (size_t)ng;
    ck_assert_int_eq(mt_store_put_result(s, &r, &id, d), 0);
    ck_assert_int_eq(mt_store_samples(s, id, &sv, &n, d), 0);
    ck_assert_uint_eq(n, 20);
    for (i = 0; i < n; i++) {
        ck_assert(sv[i].elapsed_ms == f.s[i].elapsed_ms);
        ck_assert(sv[i].tflops == f.s[i].tflops);
        ck_assert(sv[i].losses[0].value == f.l[i][0].value);
    }
    mt_store_samples_free(sv, n);
    free(log);
    free(mem);

    /* the same config, replicate 1, dies of NaN at iteration 14 */
    log = sim_log(t, nan_run, &code);
    ck_assert_int_ne(code, 0);
    ck_assert_uint_eq(iteration_lines(log, &f), 14);
    r = result_of(&cfg, "screen", 1, 0, "nan", &f);
    line = strstr(log, "RuntimeError: ");
    ck_assert_ptr_nonnull(line);
    line[strcspn(line, "\n")] = '\0';
    r.run.evidence = line;
    ck_assert_int_eq(mt_store_put_result(s, &r, &id, d), 0);
    ck_assert_int_eq(mt_store_samples(s, id, &sv, &n, d), 0);
    ck_assert_uint_eq(n, 14);
    ck_assert(isnan(sv[13].losses[0].value));
    ck_assert(isnan(sv[13].grad_norm));
    ck_assert_int_eq(sv[13].nan, 1);
    mt_store_samples_free(sv, n);
    free(log);

    {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        ck_assert_int_eq(mt_store_print_runs(s, m, MT_STORE_TEXT, d), 0);
        fclose(m);
        fputs(text, stdout);
        ck_assert_ptr_nonnull(strstr(text, "nan: RuntimeError: Rank 0"));
        ck_assert_ptr_nonnull(strstr(text, "2 runs: 1 ok, 1 nan"));
        free(text);
    }
    ck_assert_uint_eq(mt_diag_count(d), 0);
    for (code = 0; code < ng; code++)
        free((char *)g[code].host);
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(memfile);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

/* ---- volume ---------------------------------------------------------------------------------- */

START_TEST(thousands_of_runs)
{
    char *dir = tmp_dir();
    mt_contract *c = load_contract();
    tk *t = tk_open(CONTRACT);
    cfgtext cfg = config_of(t, NULL, NULL);
    mt_store *s = open_ok(dir, c);
    mt_diag *d = mt_diag_new();
    fake f;
    double t0, t1, t2;
    int i;
    enum { BULK = 3000, EACH = 300 };

    fake_fill(&f, 50, 1234.5);
    /* a resume importing many finished runs: one transaction */
    t0 = mono();
    ck_assert_int_eq(mt_store_begin(s, d), 0);
    for (i = 0; i < BULK; i++) {
        mt_store_result r = result_of(&cfg, "screen", i, 0, "ok", &f);
        ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    }
    ck_assert_int_eq(mt_store_commit(s, d), 0);
    t1 = mono();
    /* runs arriving one by one: a durable commit each */
    for (i = 0; i < EACH; i++) {
        mt_store_result r = result_of(&cfg, "validate", i, 0, "ok", &f);
        ck_assert_int_eq(mt_store_put_result(s, &r, NULL, d), 0);
    }
    t2 = mono();
    ck_assert_int_eq(count_rows(dir, "samples"), (long long)(BULK + EACH) * 50);
    printf("store: %d runs x 50 samples in one transaction: %.2f s (%.0f samples/s); "
           "%d runs x 50 samples, one synchronous=FULL commit each: %.2f s (%.1f ms per "
           "run)\n",
           BULK, t1 - t0, BULK * 50 / (t1 - t0), EACH, t2 - t1, (t2 - t1) * 1000 / EACH);
    t0 = mono();
    {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        ck_assert_int_eq(mt_store_export_json(s, m, d), 0);
        fclose(m);
        t1 = mono();
        printf("store: JSON export of %zu bytes in %.2f s\n", len, t1 - t0);
        free(text);
    }
    mt_store_destroy(&s);
    mt_diag_destroy(&d);
    free(cfg.canonical);
    tk_close(&t);
    mt_contract_destroy(&c);
    rm_rf(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, schema_and_wal_mode);
    tcase_add_test(tc, insert_reopen_resume);
    tcase_add_test(tc, bad_input_stores_nothing);
    tcase_add_test(tc, second_process_writes_while_first_reads);
    tcase_add_test(tc, fingerprint_mismatch_names_fields);
    tcase_add_test(tc, network_filesystems_refused);
    tcase_add_test(tc, local_filesystems_allowed);
    tcase_add_test(tc, resent_result_deduplicated);
    tcase_add_test(tc, export_csv_and_json_parse_back);
    tcase_add_test(tc, exit_mid_transaction_loses_nothing_committed);
    tcase_add_test(tc, sigkill_while_writing_loses_nothing_committed);
    tcase_add_test(tc, sigkill_holding_write_lock);
    tcase_add_test(tc, garbage_file_refused_unchanged);
    tcase_add_test(tc, real_sim_run_stored);
    tcase_add_test(tc, thousands_of_runs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
