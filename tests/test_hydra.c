/*
 * test_hydra.c - core/hydra.c against Hydra 1.3's override grammar
 * (OverrideLexer.g4 / OverrideParser.g4 at v1.3.2): what the grammar accepts
 * and rejects, what Megatron-Bridge additionally refuses, the error
 * positions, and the quoting helpers' round trips.  Cases are written from
 * the grammar's rules and the override syntax Hydra documents; every
 * grammar-level verdict here was also confirmed against an ANTLR build of
 * those two .g4 files.
 */
#include "hydra.h"
#include "testkit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* accepted by the grammar and by Bridge */
static const char *accept_both[] = {
    "model.tensor_model_parallel_size=2",
    "mixed_precision=bf16_mixed",
    "model.cuda_graph_modules=[attn,moe_router]",
    "model.cuda_graph_modules=[ attn , moe_router ]",
    "model.recompute_modules=[moe_act,layernorm]",
    "model.pipeline_model_parallel_layout='Et|(tt|)*30mL'",
    "model.pipeline_model_parallel_layout=\"Et*2|(tt|)*22t|(tt|)*7mL\"",
    "model.pipeline_model_parallel_layout=Et|t*3|mL",
    "model.moe_layer_freq=[0,0,0,1,1,1]",
    "ddp.overlap_grad_reduce=true",
    "ddp.overlap_param_gather=True",
    "model.delay_wgrad_compute=FALSE",
    "train.manual_gc_interval=0",
    "validation.eval_iters=0",
    "optimizer.lr=3e-4",
    "optimizer.min_lr=.5",
    "optimizer.min_lr=1.",
    "train.train_iters=1_000_000",
    "model.x=-20.0",
    "model.x=+7",
    "model.x=inf",
    "model.x=-NaN",
    "model.moe_router_dtype=fp32",
    "model.fp8=e4m3",
    "model.x=null",
    "model.x=",
    "model.x= value",
    "model.x=a b c",
    "model.x=/path/to-x.y_z",
    "model.x=a:b",
    "model.x=a\\,b",
    "model.x=\\(x\\)",
    "model.x=C:\\new",
    "model.x=$HOME%?*@|",
    "model.x=${oc.env:USER,me}",
    "model.x=${a.b}c",
    "model.x={a:10,b:20}",
    "model.x={}",
    "model.x=[]",
    "model.x=[a,[1,2],{k:v}]",
    "model.x={a b:1}",
    "model.x=\"it's\"",
    "model.x='a\\'b'",
    "model.x='\\\\'",
    "model.x=''",
    "model.x=int(3)",
    "model.x=str(3)",
    "model.x=float(1)",
    "model.x=sort([3,1,2])",
    "model.x=sort([3,1,2],reverse=true)",
    "+model.new_field=1",
    "++model.new_field=1",
    "~model.old_field",
    "~model.old_field=3",
    "~model.old_field=",
    "$key=1",
    "a.0.b=1",
    "a-b.c_d=1",
    "x=y",
};

/* accepted by the grammar, refused by Bridge (or by Hydra's visitor) */
static const char *accept_grammar_only[] = {
    "model.x=a,b,c",        /* a sweep */
    "model.x=1, 2",         /* a sweep */
    "model.x=choice(a,b)",  /* a sweep */
    "model.x=range(1,10,step=2)",
    "model.x=foo(1)",       /* no such function */
    "model.x=f (x)",
    "model.x=int(x=1, 2)",  /* positional after keyword */
    "model.x=[choice(1,2)]",
    "db@pkg=mysql",
    "db@=mysql",
    "hydra/launcher=basic",
    "a/b/c=x",
    "=value",
    "@pkg=x",
};

/* refused by the grammar */
static const char *reject_grammar[] = {
    "model.pipeline_model_parallel_layout=Et|(tt|)*30mL",
    "model.moe_layer_freq=([0]*3+[1]*58)",
    "model.x",
    "",
    "a b=1",
    " a=1",
    "a=1\n",
    "a..b=1",
    "a.=1",
    ".a=1",
    "01.a=1",
    "1=1",
    "a/b.c=1",
    "a/=1",
    "a:b=1",
    "+~a=1",
    "+a",
    "a==1",
    "model.x=a=b",
    "model.x='abc",
    "model.x='a' ",
    "model.x='a'b",
    "model.x=a'b'",
    "model.x='a''b'",
    "model.x=\"a\\\"",
    "model.x=[a,b",
    "model.x=[a,]",
    "model.x=a]",
    "model.x=a)",
    "model.x=(a)",
    "model.x=a,,b",
    "model.x=a,",
    "model.x={a}",
    "model.x={'a':1}",
    "model.x={${x}:1}",
    "model.x={a:1",
    "model.x=${}",
    "model.x=#x",
    "model.x=a!b",
    "model.x=a;b",
    "model.x=a&b",
    "model.x=~a",
    "model.x=a<b",
    "model.x=\xc3\xa9",
    "model.x=a\nb",
    "model.x=f(a b=1)",
    "model.x=f(a,)",
    "model.x=[a b(c)]",
};

START_TEST(grammar_accepts)
{
    char err[256];
    size_t i;
    for (i = 0; i < sizeof accept_both / sizeof accept_both[0]; i++) {
        const char *o = accept_both[i];
        ck_assert_msg(mt_hydra_check(o, err, sizeof err) == 0, "%s: %s", o, err);
        ck_assert_msg(mt_hydra_check_bridge(o, err, sizeof err) == 0, "bridge %s: %s", o, err);
    }
    for (i = 0; i < sizeof accept_grammar_only / sizeof accept_grammar_only[0]; i++) {
        const char *o = accept_grammar_only[i];
        ck_assert_msg(mt_hydra_check(o, err, sizeof err) == 0, "%s: %s", o, err);
        ck_assert_msg(mt_hydra_check_bridge(o, err, sizeof err) == -1, "bridge took %s", o);
        ck_assert_msg(strstr(err, "at byte ") == err, "%s: %s", o, err);
    }
}
END_TEST

START_TEST(grammar_rejects)
{
    char err[256];
    size_t i;
    for (i = 0; i < sizeof reject_grammar / sizeof reject_grammar[0]; i++) {
        const char *o = reject_grammar[i];
        err[0] = '\0';
        ck_assert_msg(mt_hydra_check(o, err, sizeof err) == -1, "took %s", o);
        ck_assert_msg(strstr(err, "at byte ") == err && strlen(err) > 12, "%s: '%s'", o, err);
        ck_assert_msg(mt_hydra_check_bridge(o, NULL, 0) == -1, "bridge took %s", o);
    }
    /* NULL input is the empty string: no '=' */
    ck_assert_int_eq(mt_hydra_check(NULL, err, sizeof err), -1);
}
END_TEST

START_TEST(error_positions)
{
    char err[256];
    /* the '(' of the layout, after "Et|": byte 40 */
    ck_assert_int_eq(mt_hydra_check("model.pipeline_model_parallel_layout=Et|(tt|)*30mL", err,
                                    sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 40:") && strstr(err, "function call") &&
                      strstr(err, "quote the value"),
                  "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.moe_layer_freq=([0]*3+[1]*58)", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 21:") && strstr(err, "list"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("a b=1", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 1:") && strstr(err, "whitespace"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.x='abc", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 8:") && strstr(err, "unterminated"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.x=a#b", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 9:") && strstr(err, "'#'"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.x=[a,b", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 12:") && strstr(err, "ends early"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.x=a=b", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 9:") && strstr(err, "'='"), "%s", err);
    ck_assert_int_eq(mt_hydra_check("model.x", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 7:") && strstr(err, "no '='"), "%s", err);
    ck_assert_int_eq(mt_hydra_check_bridge("model.x=a,b", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 8:") && strstr(err, "sweep"), "%s", err);
    ck_assert_int_eq(mt_hydra_check_bridge("model.x=foo(1)", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 8:") && strstr(err, "'foo('"), "%s", err);
    ck_assert_int_eq(mt_hydra_check_bridge("db@pkg=x", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 2:") && strstr(err, "@package"), "%s", err);
    /* a small buffer truncates, never overflows */
    ck_assert_int_eq(mt_hydra_check("model.x=a#b", err, 8), -1);
    ck_assert_uint_eq(strlen(err), 7);
}
END_TEST

START_TEST(values_alone)
{
    char err[256];
    ck_assert_int_eq(mt_hydra_check_value("bf16_mixed", 1, err, sizeof err), 0);
    ck_assert_int_eq(mt_hydra_check_value("", 1, err, sizeof err), 0);
    ck_assert_int_eq(mt_hydra_check_value("[attn,moe_router]", 1, err, sizeof err), 0);
    ck_assert_int_eq(mt_hydra_check_value("'Et|(tt|)*30mL'", 1, err, sizeof err), 0);
    ck_assert_int_eq(mt_hydra_check_value("Et|(tt|)*30mL", 0, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "at byte 3:"), "%s", err);
    ck_assert_int_eq(mt_hydra_check_value("a,b", 0, err, sizeof err), 0);
    ck_assert_int_eq(mt_hydra_check_value("a,b", 1, err, sizeof err), -1);
    /* value mode from the start: '=' and '~' are no key syntax here */
    ck_assert_int_eq(mt_hydra_check_value("a=b", 0, err, sizeof err), -1);
    ck_assert_int_eq(mt_hydra_check_value("~a", 0, err, sizeof err), -1);
}
END_TEST

static void quote_is(const char *v, const char *want)
{
    char out[256], ov[300], err[256];
    ck_assert_int_eq(mt_hydra_quote(v, out, sizeof out), (int)strlen(want));
    ck_assert_str_eq(out, want);
    snprintf(ov, sizeof ov, "model.x=%s", out);
    ck_assert_msg(mt_hydra_check_bridge(ov, err, sizeof err) == 0, "%s: %s", ov, err);
}

START_TEST(quoting)
{
    char out[64];
    quote_is("Et|(tt|)*30mL", "'Et|(tt|)*30mL'");
    quote_is("Et*2|(tt|)*22t|(tt|)*7mL", "'Et*2|(tt|)*22t|(tt|)*7mL'");
    quote_is("", "''");
    quote_is("a b", "'a b'");
    quote_is("it's", "\"it's\"");
    quote_is("a'b\"c", "'a\\'b\"c'");  /* both kinds: single quotes, \' inside */
    quote_is("a\\'b\"", "'a\\\\\\'b\"'"); /* \ then ' : three backslashes */
    quote_is("a\\", "'a\\\\'");          /* a trailing backslash doubles */
    quote_is("a\\\\", "'a\\\\\\\\'");
    quote_is("a\\b", "'a\\b'");          /* a backslash before no quote stays */
    quote_is("x\\'", "\"x\\'\"");        /* double quotes: the \ precedes no " */
    quote_is("[a,b]", "'[a,b]'");
    quote_is("f(x)=1", "'f(x)=1'");
    quote_is(NULL, "''");
    ck_assert_int_eq(mt_hydra_quote("abc", out, 5), -1);
    ck_assert_int_eq(mt_hydra_quote("abc", out, 6), 5);
}
END_TEST

static void string_is(const char *v, const char *want)
{
    char out[256], ov[300], err[256];
    ck_assert_int_eq(mt_hydra_string(v, out, sizeof out), (int)strlen(want));
    ck_assert_str_eq(out, want);
    snprintf(ov, sizeof ov, "model.x=%s", out);
    ck_assert_msg(mt_hydra_check_bridge(ov, err, sizeof err) == 0, "%s: %s", ov, err);
}

START_TEST(strings)
{
    string_is("bf16_mixed", "bf16_mixed");
    string_is("e4m3", "e4m3");
    string_is("transformer_engine", "transformer_engine");
    string_is("/data/my-set.idx", "/data/my-set.idx");
    string_is("Et|t*3|mL", "Et|t*3|mL");
    string_is("1.5.6", "1.5.6"); /* two floats: a string */
    string_is("Et|(tt|)*30mL", "'Et|(tt|)*30mL'");
    string_is("1", "'1'");       /* bare: an int */
    string_is("3.5", "'3.5'");
    string_is("true", "'true'");
    string_is("None", "None");   /* Python's None is no Hydra null */
    string_is("null", "'null'");
    string_is("inf", "'inf'");
    string_is("a b", "'a b'");
    string_is("a,b", "'a,b'");
    string_is("a\\,b", "'a\\,b'");
    string_is("${x}", "'${x}'");
    string_is("", "''");
    string_is("a:b", "a:b");
}
END_TEST

START_TEST(lists)
{
    char out[256], err[256], ov[300];
    ck_assert_int_eq(mt_hydra_list("attn moe_router", 1, out, sizeof out), 17);
    ck_assert_str_eq(out, "[attn,moe_router]");
    mt_hydra_list("0 0 0 1 1", 0, out, sizeof out);
    ck_assert_str_eq(out, "[0,0,0,1,1]");
    mt_hydra_list("1 x", 1, out, sizeof out);
    ck_assert_str_eq(out, "['1',x]");
    mt_hydra_list("  a,b   (c) ", 0, out, sizeof out);
    ck_assert_str_eq(out, "['a,b','(c)']");
    snprintf(ov, sizeof ov, "model.x=%s", out);
    ck_assert_msg(mt_hydra_check_bridge(ov, err, sizeof err) == 0, "%s: %s", ov, err);
    ck_assert_int_eq(mt_hydra_list("", 0, out, sizeof out), 2);
    ck_assert_str_eq(out, "[]");
    ck_assert_int_eq(mt_hydra_list(NULL, 0, out, sizeof out), 2);
    ck_assert_int_eq(mt_hydra_list("attn moe_router", 1, out, 10), -1);
    ck_assert_int_eq(mt_hydra_list("a", 1, out, 2), -1);
}
END_TEST

/* Every printable ASCII character alone as a value: the ones the grammar
 * lets stand unquoted, and every one of them quoted. */
START_TEST(single_characters)
{
    char ov[32], q[16];
    int ch;
    const char *bare = "abcxyzABCXYZ_0123456789/-\\+.$%*@?|: ";
    for (ch = 0x20; ch < 0x7f; ch++) {
        char v[2] = {(char)ch, 0};
        int want = strchr(bare, ch) != NULL;
        snprintf(ov, sizeof ov, "k=%c", ch);
        if (ch == 'a' || ch == 'z' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'))
            want = 1;
        ck_assert_msg((mt_hydra_check(ov, NULL, 0) == 0) == want, "'%c'", ch);
        mt_hydra_quote(v, q, sizeof q);
        snprintf(ov, sizeof ov, "k=%s", q);
        ck_assert_msg(mt_hydra_check_bridge(ov, NULL, 0) == 0, "quoted '%c': %s", ch, ov);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hydra");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, grammar_accepts);
    tcase_add_test(tc, grammar_rejects);
    tcase_add_test(tc, error_positions);
    tcase_add_test(tc, values_alone);
    tcase_add_test(tc, quoting);
    tcase_add_test(tc, strings);
    tcase_add_test(tc, lists);
    tcase_add_test(tc, single_characters);
    suite_add_tcase(s, tc);
    return tk_run(s);
}
