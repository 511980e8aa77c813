/*
 * test_rankexec.c - `moetune rank-exec` (workers/rankexec.c): Slurm host
 * lists, task counts per node, the rank environment from Slurm's variables,
 * the derived MASTER_PORT, and the command itself (a real child process:
 * its environment as /usr/bin/env prints it, its refusals).  The helper on
 * real srun tasks across two nodes is tests/slurm_multinode.sh.
 */
#include "rankexec.h"
#include "testkit.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *joined(const char *list, int *rc, char *err, size_t n)
{
    mt_strlist l = {0};
    size_t i, len = 1;
    char *s;
    *rc = mt_hostlist_expand(list, &l, err, n);
    for (i = 0; i < l.n; i++)
        len += strlen(l.v[i]) + 1;
    s = calloc(1, len);
    for (i = 0; i < l.n; i++) {
        if (i)
            strcat(s, " ");
        strcat(s, l.v[i]);
    }
    mt_strlist_clear(&l);
    return s;
}

START_TEST(hostlists_expand_as_slurm_writes_them)
{
    static const char *const cases[][2] = {
        {"gpu01", "gpu01"},
        {"node[01-03,07]", "node01 node02 node03 node07"},
        {"a[1-2],b3,c[9-11]", "a1 a2 b3 c9 c10 c11"},
        {"r[1-2]-n[08-09]", "r1-n08 r1-n09 r2-n08 r2-n09"},
        {"x[007]y", "x007y"},
        {"mtn[1-2]", "mtn1 mtn2"},
        {"h-1.example.com,h-2.example.com", "h-1.example.com h-2.example.com"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "", host[64];
        int rc;
        char *got = joined(cases[i][0], &rc, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: %s", cases[i][0], err);
        ck_assert_str_eq(got, cases[i][1]);
        free(got);
        ck_assert_int_eq(mt_hostlist_first(cases[i][0], host, sizeof host, err, sizeof err), 0);
        ck_assert_msg(!strncmp(host, cases[i][1], strlen(host)) &&
                          (cases[i][1][strlen(host)] == ' ' || !cases[i][1][strlen(host)]),
                      "%s: first %s", cases[i][0], host);
    }
}
END_TEST

START_TEST(bad_hostlists_are_named)
{
    static const char *const cases[][2] = {
        {"", "empty host list"},
        {"node[01-03", "'[' without ']'"},
        {"node01]", "']' without '['"},
        {"node[]", "empty brackets"},
        {"node[3-1]", "is not A-B with A <= B"},
        {"node[a-b]", "'a' in a range"},
        {"node[1-]", "an empty number"},
        {"a,,b", "an empty host name at offset 2"},
        {"a b", "a blank or control byte at offset 1"},
        {"n[0-99999]", "is not A-B"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        int rc;
        char *got = joined(cases[i][0], &rc, err, sizeof err);
        ck_assert_msg(rc == -1, "'%s' accepted as '%s'", cases[i][0], got);
        ck_assert_msg(strstr(err, cases[i][1]) != NULL, "'%s': '%s' lacks '%s'", cases[i][0], err,
                      cases[i][1]);
        free(got);
    }
}
END_TEST

START_TEST(tasks_per_node_lists)
{
    ck_assert_int_eq(mt_rank_tasks_on_node("4(x2)", 0), 4);
    ck_assert_int_eq(mt_rank_tasks_on_node("4(x2)", 1), 4);
    ck_assert_int_eq(mt_rank_tasks_on_node("4(x2)", 2), -1);
    ck_assert_int_eq(mt_rank_tasks_on_node("4(x2),3", 2), 3);
    ck_assert_int_eq(mt_rank_tasks_on_node("8", 0), 8);
    ck_assert_int_eq(mt_rank_tasks_on_node("2,1,1", 1), 1);
    ck_assert_int_eq(mt_rank_tasks_on_node("4(y2)", 0), -1);
    ck_assert_int_eq(mt_rank_tasks_on_node("x", 0), -1);
    ck_assert_int_eq(mt_rank_tasks_on_node("", 0), -1);
}
END_TEST

/* A task's Slurm variables, NAME=VALUE pairs, NULL-terminated. */
typedef struct vars {
    const char *const *kv;
} vars;

static const char *lookup(const char *name, void *ctx)
{
    const vars *v = ctx;
    size_t i, n = strlen(name);
    for (i = 0; v->kv[i]; i++)
        if (!strncmp(v->kv[i], name, n) && v->kv[i][n] == '=')
            return v->kv[i] + n + 1;
    return NULL;
}

static const char *got(const mt_strlist *env, const char *name)
{
    size_t i;
    for (i = 0; i + 1 < env->n; i += 2)
        if (!strcmp(env->v[i], name))
            return env->v[i + 1];
    return NULL;
}

START_TEST(rank_environment_of_a_second_node_task)
{
    /* task 6 of 8, the third on the second node of gpu[07-08] */
    static const char *const kv[] = {"SLURM_PROCID=6",
                                     "SLURM_NTASKS=8",
                                     "SLURM_LOCALID=2",
                                     "SLURM_NODEID=1",
                                     "SLURM_STEP_TASKS_PER_NODE=4(x2)",
                                     "SLURM_STEP_NODELIST=gpu[07-08]",
                                     "SLURM_JOB_NODELIST=gpu[01-08]",
                                     "SLURM_JOB_ID=4711",
                                     "SLURM_STEP_ID=3",
                                     NULL};
    vars v = {kv};
    mt_strlist env = {0};
    char err[512] = "", port[16];
    ck_assert_msg(mt_rank_env(lookup, &v, &env, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(got(&env, "RANK"), "6");
    ck_assert_str_eq(got(&env, "WORLD_SIZE"), "8");
    ck_assert_str_eq(got(&env, "LOCAL_RANK"), "2");
    ck_assert_str_eq(got(&env, "LOCAL_WORLD_SIZE"), "4");
    ck_assert_str_eq(got(&env, "NODE_RANK"), "1");
    /* the step's first node, not the allocation's */
    ck_assert_str_eq(got(&env, "MASTER_ADDR"), "gpu07");
    snprintf(port, sizeof port, "%d", mt_rank_port("4711", "3"));
    ck_assert_str_eq(got(&env, "MASTER_PORT"), port);
    ck_assert_str_eq(got(&env, "PET_MASTER_ADDR"), "gpu07");
    ck_assert_str_eq(got(&env, "PET_NODE_RANK"), "1");
    ck_assert_ptr_nonnull(strstr(got(&env, "PET_RDZV_ENDPOINT"), "gpu07:"));
    mt_strlist_clear(&env);
}
END_TEST

START_TEST(ports_are_per_step_and_in_range)
{
    int a = mt_rank_port("4711", "3"), b = mt_rank_port("4711", "4"), c = mt_rank_port("4712", "3");
    ck_assert_int_eq(a, mt_rank_port("4711", "3"));
    ck_assert(a != b && a != c);
    ck_assert(a >= 20000 && a < 40000 && b >= 20000 && b < 40000 && c >= 20000 && c < 40000);
}
END_TEST

START_TEST(missing_or_bad_variables_are_named)
{
    static const char *const nothing[] = {NULL};
    static const char *const big_rank[] = {"SLURM_PROCID=8", "SLURM_NTASKS=8", "SLURM_LOCALID=0",
                                           "SLURM_NODEID=0", NULL};
    static const char *const bad_list[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                           "SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=1(x2)",
                                           "SLURM_STEP_NODELIST=n[1-", "SLURM_JOB_ID=1", NULL};
    static const char *const bad_node[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                           "SLURM_NODEID=3", "SLURM_TASKS_PER_NODE=1(x2)",
                                           "SLURM_STEP_NODELIST=n[1-2]", "SLURM_JOB_ID=1", NULL};
    struct {
        const char *const *kv;
        const char *want;
    } cases[] = {
        {nothing, "SLURM_PROCID is not set: rank-exec runs as a task of a Slurm step"},
        {big_rank, "SLURM_PROCID=8 is not below SLURM_NTASKS=8"},
        {bad_list, "SLURM_STEP_NODELIST: 'n[1-': '[' without ']'"},
        {bad_node, "gives no task count for node 3"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vars v = {cases[i].kv};
        mt_strlist env = {0};
        char err[512] = "";
        ck_assert_int_eq(mt_rank_env(lookup, &v, &env, err, sizeof err), -1);
        ck_assert_msg(strstr(err, cases[i].want) != NULL, "'%s' lacks '%s'", err, cases[i].want);
        mt_strlist_clear(&env);
    }
}
END_TEST

START_TEST(the_command_execs_with_the_rank_environment)
{
    static const char *const args[] = {"rank-exec", "--", "/usr/bin/env", NULL};
    static const char *const noargs[] = {"rank-exec", "--", NULL};
    tk_proc r;
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_LOCALID", "0", 1);
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "1(x2)", 1);
    setenv("SLURM_STEP_NODELIST", "mtn[1-2]", 1);
    setenv("SLURM_JOB_ID", "12", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("RANK", "99", 1); /* the caller's is replaced */
    r = tk_spawn(MT_MOETUNE_BIN, args);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\nRANK=1\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "\nWORLD_SIZE=2\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "\nLOCAL_WORLD_SIZE=1\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "\nMASTER_ADDR=mtn1\n"));
    tk_proc_free(&r);
    r = tk_spawn(MT_MOETUNE_BIN, noargs);
    ck_assert_int_eq(r.status, 64);
    ck_assert_ptr_nonnull(strstr(r.err, "usage: moetune rank-exec -- PROGRAM"));
    tk_proc_free(&r);
    {
        static const char *const missing[] = {"rank-exec", "--", "/nonexistent/prog", NULL};
        r = tk_spawn(MT_MOETUNE_BIN, missing);
        ck_assert_int_eq(r.status, 127);
        ck_assert_ptr_nonnull(strstr(r.err, "cannot run '/nonexistent/prog'"));
        tk_proc_free(&r);
    }
    unsetenv("SLURM_PROCID");
    r = tk_spawn(MT_MOETUNE_BIN, args);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "moetune rank-exec: SLURM_PROCID is not set"));
    tk_proc_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rankexec");
    TCase *tc = tcase_create("rankexec");
    tcase_add_test(tc, hostlists_expand_as_slurm_writes_them);
    tcase_add_test(tc, bad_hostlists_are_named);
    tcase_add_test(tc, tasks_per_node_lists);
    tcase_add_test(tc, rank_environment_of_a_second_node_task);
    tcase_add_test(tc, ports_are_per_step_and_in_range);
    tcase_add_test(tc, missing_or_bad_variables_are_named);
    tcase_add_test(tc, the_command_execs_with_the_rank_environment);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
