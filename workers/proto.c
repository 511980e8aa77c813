/*
 * proto.c - the coordinator <-> worker message layer (PROTOCOL.md): frame
 * decoding and validation, sending and receiving over ZeroMQ, typed views
 * and body builders.  See proto.h.
 */
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* ---- errors ------------------------------------------------------------------------ */

#define fail mt_proto_fail

/* Up to 40 bytes of untrusted data, printable: quotes, backslashes and
 * bytes outside 0x20..0x7e escaped, "..." when cut.  buf needs 200. */
static const char *show(const void *p, size_t n, char *buf, size_t cap)
{
    const unsigned char *s = p;
    size_t i, o = 0, lim = n < 40 ? n : 40;
    for (i = 0; i < lim && o + 8 < cap; i++) {
        unsigned c = s[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, cap - o, "\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (i < n && o + 4 < cap)
        o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

/* ---- commands ---------------------------------------------------------------------- */

static const char *const cmd_names[MT_PROTO_COMMANDS] = {
    [MT_PROTO_NONE] = "?",
    [MT_PROTO_READY] = "ready",
    [MT_PROTO_JOB] = "job",
    [MT_PROTO_JOB_ACK] = "job-ack",
    [MT_PROTO_PROGRESS] = "progress",
    [MT_PROTO_RESULT] = "result",
    [MT_PROTO_RESULT_ACK] = "result-ack",
    [MT_PROTO_HEARTBEAT] = "heartbeat",
    [MT_PROTO_CANCEL] = "cancel",
    [MT_PROTO_DISCONNECT] = "disconnect",
};

const char *mt_proto_cmd_name(int command)
{
    return command > 0 && command < MT_PROTO_COMMANDS ? cmd_names[command] : "?";
}

int mt_proto_cmd_parse(const char *name, size_t len)
{
    int i;
    if (!name)
        return MT_PROTO_NONE;
    for (i = 1; i < MT_PROTO_COMMANDS; i++)
        if (strlen(cmd_names[i]) == len && memcmp(cmd_names[i], name, len) == 0)
            return i;
    return MT_PROTO_NONE;
}

void mt_proto_msg_init(mt_proto_msg *m)
{
    memset(m, 0, sizeof *m);
}

void mt_proto_msg_clear(mt_proto_msg *m)
{
    if (!m)
        return;
    cJSON_Delete(m->body);
    mt_proto_msg_init(m);
}

/* ---- field rules ------------------------------------------------------------------- */

enum ftype {
    F_ID,       /* 1..MT_PROTO_ID_MAX of [A-Za-z0-9._:/@+=-] */
    F_STR,      /* any string, may be empty */
    F_NESTR,    /* non-empty string */
    F_DEC,      /* a decimal unsigned 64-bit integer as a string */
    F_INT0,     /* integer 0..INT_MAX */
    F_INT1,     /* integer 1..INT_MAX */
    F_I64,      /* integer within +-2^53 */
    F_I64_0,    /* integer 0..2^53 */
    F_NUM,      /* finite number */
    F_NUM0,     /* finite number >= 0 */
    F_BOOL,     /* true / false */
    F_OBJ,      /* object */
    F_OBJ_NULL, /* object or null */
    F_ARR,      /* array (contents checked elsewhere) */
    F_ARR_STR,  /* array of strings */
    F_ARR_REF,  /* array of jobrefs */
    F_STATUS,   /* stored | duplicate | discarded */
    F_HOSTS     /* "a,b,...": 1..MT_PROTO_HOSTS_MAX bytes, host names of [A-Za-z0-9._-] */
};

typedef struct field {
    const char *name;
    enum ftype type;
    int required;
} field;

#define REQ 1
#define OPT 0
#define END                                                                                        \
    {                                                                                              \
        NULL, F_STR, 0                                                                             \
    }

static const field f_ready[] = {
    {"worker", F_ID, REQ},        {"host", F_NESTR, REQ},      {"gpus", F_INT0, REQ},
    {"gpu_type", F_STR, REQ},     {"nodes", F_INT1, REQ},      {"launchers", F_ARR_STR, REQ},
    {"programs", F_ARR_STR, REQ}, {"running", F_ARR_REF, REQ}, {"finished", F_ARR_REF, REQ},
    {"slots", F_INT1, OPT},       {"version", F_STR, OPT},     END};
static const field f_job[] = {
    {"job_id", F_ID, REQ},         {"retry", F_INT0, REQ},   {"kind", F_ID, REQ},
    {"contract", F_NESTR, REQ},    {"config", F_STR, REQ},   {"replicate", F_INT0, REQ},
    {"time_limit_s", F_NUM0, REQ}, {"profile", F_BOOL, OPT}, {"hang_factor", F_NUM0, OPT},
    {"sim_seed", F_DEC, OPT},      {"launcher", F_ID, OPT},  {"rev", F_NESTR, OPT},
    {"repo", F_NESTR, OPT},        {"prepare", F_ARR_STR, OPT}, {"prepare_timeout_s", F_NUM0, OPT},
    {"routing", F_ID, OPT},        {"nodelist", F_HOSTS, OPT},  END};
static const field f_job_ack[] = {{"job_id", F_ID, REQ},     {"retry", F_INT0, REQ},
                                  {"accepted", F_BOOL, REQ}, {"reason", F_STR, OPT},
                                  {"slurm_step", F_ID, OPT}, END};
static const field f_progress[] = {{"job_id", F_ID, REQ},      {"retry", F_INT0, REQ},
                                   {"lines", F_ARR_STR, REQ},  {"iteration", F_I64_0, OPT},
                                   {"elapsed_s", F_NUM0, OPT}, {"step_ms", F_NUM0, OPT},
                                   {"slurm_step", F_ID, OPT},  END};
static const field f_result[] = {{"job_id", F_ID, REQ},
                                 {"retry", F_INT0, REQ},
                                 {"memo", F_OBJ, REQ},
                                 {"run", F_OBJ_NULL, REQ},
                                 {"samples", F_ARR, REQ},
                                 {"gpus", F_ARR, REQ},
                                 END};
static const field f_result_ack[] = {{"job_id", F_ID, REQ},
                                     {"retry", F_INT0, REQ},
                                     {"status", F_STATUS, REQ},
                                     {"run_id", F_I64, OPT},
                                     END};
static const field f_heartbeat[] = {{"seq", F_I64_0, OPT},
                                    {"time", F_NUM, OPT},
                                    {"running", F_ARR_REF, OPT},
                                    {"reannounce", F_BOOL, OPT},
                                    END};
static const field f_cancel[] = {
    {"job_id", F_ID, REQ}, {"retry", F_INT0, REQ}, {"reason", F_STR, REQ}, END};
static const field f_disconnect[] = {{"reason", F_STR, REQ}, END};

static const field *const rules[MT_PROTO_COMMANDS] = {
    [MT_PROTO_READY] = f_ready,           [MT_PROTO_JOB] = f_job,
    [MT_PROTO_JOB_ACK] = f_job_ack,       [MT_PROTO_PROGRESS] = f_progress,
    [MT_PROTO_RESULT] = f_result,         [MT_PROTO_RESULT_ACK] = f_result_ack,
    [MT_PROTO_HEARTBEAT] = f_heartbeat,   [MT_PROTO_CANCEL] = f_cancel,
    [MT_PROTO_DISCONNECT] = f_disconnect,
};

static const char *type_want(enum ftype t)
{
    switch (t) {
    case F_ID:
        return "an id (1-200 characters of A-Z a-z 0-9 . _ : / @ + = -)";
    case F_STR:
        return "a string";
    case F_NESTR:
        return "a non-empty string";
    case F_DEC:
        return "a decimal unsigned 64-bit integer as a string";
    case F_INT0:
        return "an integer >= 0";
    case F_INT1:
        return "an integer >= 1";
    case F_I64:
        return "an integer within +-2^53";
    case F_I64_0:
        return "an integer 0..2^53";
    case F_NUM:
        return "a finite number";
    case F_NUM0:
        return "a finite number >= 0";
    case F_BOOL:
        return "true or false";
    case F_OBJ:
        return "an object";
    case F_OBJ_NULL:
        return "an object or null";
    case F_ARR:
        return "an array";
    case F_ARR_STR:
        return "an array of strings";
    case F_ARR_REF:
        return "an array of {\"job_id\", \"retry\"} objects";
    case F_STATUS:
        return "\"stored\", \"duplicate\" or \"discarded\"";
    case F_HOSTS:
        return "a node list (host names of A-Z a-z 0-9 . _ - separated by commas)";
    }
    return "?";
}

/* What a JSON value is, for an error message (numbers shown). */
static const char *json_kind(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsNumber(v)) {
        snprintf(buf, cap, "%.17g", v->valuedouble);
        return buf;
    }
    if (cJSON_IsString(v))
        return v->valuestring[0] ? "a string" : "an empty string";
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsRaw(v))
        return "a raw value";
    return "an invalid value";
}

static int id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._:/@+=-", c) != NULL;
}

static int is_id(const char *s, char *why, size_t cap)
{
    size_t i, n = strlen(s);
    if (n == 0 || n > MT_PROTO_ID_MAX) {
        snprintf(why, cap, "a string of %zu characters", n);
        return 0;
    }
    for (i = 0; i < n; i++)
        if (!id_char((unsigned char)s[i])) {
            snprintf(why, cap, "a string with byte 0x%02x at offset %zu", (unsigned char)s[i], i);
            return 0;
        }
    return 1;
}

/* "a,b,c": non-empty host names of [A-Za-z0-9._-], nothing else. */
static int is_hosts(const char *s, char *why, size_t cap)
{
    size_t i, n = strlen(s), len = 0;
    if (n == 0 || n > MT_PROTO_HOSTS_MAX) {
        snprintf(why, cap, "a string of %zu characters", n);
        return 0;
    }
    for (i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ',' || c == '\0') {
            if (!len) {
                snprintf(why, cap, "a node list with an empty name at offset %zu", i);
                return 0;
            }
            len = 0;
        } else if (isalnum(c) || c == '.' || c == '_' || c == '-') {
            len++;
        } else {
            snprintf(why, cap, "a node list with byte 0x%02x at offset %zu", c, i);
            return 0;
        }
    }
    return 1;
}

static int is_int(double d, double lo, double hi)
{
    return isfinite(d) && d == floor(d) && d >= lo && d <= hi;
}

#define TWO53 9007199254740992.0

/* Checks one value against a type; why gets what it was instead. */
static int type_ok(const cJSON *v, enum ftype t, char *why, size_t cap)
{
    const char *s = json_kind(v, why, cap);
    size_t i;
    if (s != why)
        snprintf(why, cap, "%s", s);
    switch (t) {
    case F_ID:
        return cJSON_IsString(v) && is_id(v->valuestring, why, cap);
    case F_STR:
        return cJSON_IsString(v);
    case F_NESTR:
        return cJSON_IsString(v) && v->valuestring[0];
    case F_DEC:
        if (!cJSON_IsString(v))
            return 0;
        s = v->valuestring;
        for (i = 0; s[i]; i++)
            if (s[i] < '0' || s[i] > '9')
                break;
        if (i == 0 || s[i] || i > 20 || (i == 20 && strcmp(s, "18446744073709551615") > 0)) {
            snprintf(why, cap, "a string that is not one");
            return 0;
        }
        return 1;
    case F_INT0:
        return cJSON_IsNumber(v) && is_int(v->valuedouble, 0, INT_MAX);
    case F_INT1:
        return cJSON_IsNumber(v) && is_int(v->valuedouble, 1, INT_MAX);
    case F_I64:
        return cJSON_IsNumber(v) && is_int(v->valuedouble, -TWO53, TWO53);
    case F_I64_0:
        return cJSON_IsNumber(v) && is_int(v->valuedouble, 0, TWO53);
    case F_NUM:
        return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    case F_NUM0:
        return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0;
    case F_BOOL:
        return cJSON_IsBool(v);
    case F_OBJ:
        return cJSON_IsObject(v);
    case F_OBJ_NULL:
        return cJSON_IsObject(v) || cJSON_IsNull(v);
    case F_ARR:
    case F_ARR_STR:
    case F_ARR_REF:
        return cJSON_IsArray(v); /* elements: check_elements */
    case F_HOSTS:
        return cJSON_IsString(v) && is_hosts(v->valuestring, why, cap);
    case F_STATUS:
        return cJSON_IsString(v) &&
               (!strcmp(v->valuestring, "stored") || !strcmp(v->valuestring, "duplicate") ||
                !strcmp(v->valuestring, "discarded"));
    }
    return 0;
}

/* Occurrences of key directly in obj (duplicates make a message ambiguous). */
static int key_count(const cJSON *obj, const char *key)
{
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, obj)
    {
        if (e->string && !strcmp(e->string, key))
            n++;
    }
    return n;
}

static int check_jobref(const cJSON *v, const char *where, size_t i, const char *cmd, char *err,
                        size_t errlen)
{
    static const field f[] = {{"job_id", F_ID, REQ}, {"retry", F_INT0, REQ}};
    char why[160];
    size_t k;
    if (!cJSON_IsObject(v))
        return fail(err, errlen, -EINVAL, "%s: field \"%s[%zu]\": expected an object, got %s", cmd,
                    where, i, json_kind(v, why, sizeof why));
    for (k = 0; k < 2; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, f[k].name);
        if (!x)
            return fail(err, errlen, -EINVAL, "%s: field \"%s[%zu].%s\" is missing (%s)", cmd,
                        where, i, f[k].name, type_want(f[k].type));
        if (!type_ok(x, f[k].type, why, sizeof why))
            return fail(err, errlen, -EINVAL, "%s: field \"%s[%zu].%s\": expected %s, got %s", cmd,
                        where, i, f[k].name, type_want(f[k].type), why);
    }
    return 0;
}

static int check_elements(const cJSON *v, const field *f, const char *cmd, char *err, size_t errlen)
{
    const cJSON *e;
    char why[160];
    size_t i = 0;
    if (f->type != F_ARR_STR && f->type != F_ARR_REF)
        return 0;
    cJSON_ArrayForEach(e, v)
    {
        if (f->type == F_ARR_STR && !cJSON_IsString(e))
            return fail(err, errlen, -EINVAL, "%s: field \"%s[%zu]\": expected a string, got %s",
                        cmd, f->name, i, json_kind(e, why, sizeof why));
        if (f->type == F_ARR_REF && check_jobref(e, f->name, i, cmd, err, errlen))
            return -EINVAL;
        i++;
    }
    return 0;
}

/* Rules that span fields. */
static int check_command(int command, const cJSON *body, char *err, size_t errlen)
{
    const char *cmd = mt_proto_cmd_name(command);
    if (command == MT_PROTO_JOB_ACK) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(body, "reason");
        if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(body, "accepted")) &&
            (!cJSON_IsString(r) || !r->valuestring[0]))
            return fail(err, errlen, -EINVAL,
                        "%s: field \"reason\" is required (a non-empty string) when "
                        "\"accepted\" is false",
                        cmd);
    }
    if (command == MT_PROTO_RESULT) {
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(body, "run");
        const cJSON *samples = cJSON_GetObjectItemCaseSensitive(body, "samples");
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(body, "gpus");
        const cJSON *retry = cJSON_GetObjectItemCaseSensitive(body, "retry");
        mt_store_result r;
        char why[400];
        if (cJSON_IsNull(run)) {
            if (cJSON_GetArraySize(samples) || cJSON_GetArraySize(gpus))
                return fail(err, errlen, -EINVAL,
                            "%s: \"samples\" and \"gpus\" must be empty when \"run\" is null", cmd);
            return 0;
        }
        if (mt_proto_result_to_store(run, samples, gpus, &r, why, sizeof why) < 0)
            return fail(err, errlen, -EINVAL, "%s: %s", cmd, why);
        if (r.run.retry != (int)retry->valuedouble) {
            int rr = r.run.retry;
            mt_proto_result_release(&r);
            return fail(err, errlen, -EINVAL,
                        "%s: field \"run.retry\" (%d) differs from \"retry\" (%d)", cmd, rr,
                        (int)retry->valuedouble);
        }
        mt_proto_result_release(&r);
    }
    return 0;
}

int mt_proto_validate(int command, const cJSON *body, char *err, size_t errlen)
{
    const field *f;
    const char *cmd = mt_proto_cmd_name(command);
    char why[160];
    if (command <= MT_PROTO_NONE || command >= MT_PROTO_COMMANDS)
        return fail(err, errlen, -EINVAL, "unknown command %d", command);
    if (!cJSON_IsObject(body))
        return fail(err, errlen, -EINVAL, "%s: the body is %s, expected an object", cmd,
                    body ? json_kind(body, why, sizeof why) : "missing");
    for (f = rules[command]; f->name; f++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, f->name);
        if (!v) {
            if (f->required)
                return fail(err, errlen, -EINVAL, "%s: field \"%s\" is missing (%s)", cmd, f->name,
                            type_want(f->type));
            continue;
        }
        if (key_count(body, f->name) > 1)
            return fail(err, errlen, -EINVAL, "%s: field \"%s\" appears more than once", cmd,
                        f->name);
        if (!type_ok(v, f->type, why, sizeof why))
            return fail(err, errlen, -EINVAL, "%s: field \"%s\": expected %s, got %s", cmd, f->name,
                        type_want(f->type), why);
        if (check_elements(v, f, cmd, err, errlen))
            return -EINVAL;
    }
    return check_command(command, body, err, errlen);
}

/* ---- decoding ---------------------------------------------------------------------- */

/* Scans a body before parsing: nesting of objects/arrays and the number of
 * values (commas and openings outside strings), so no input can make the
 * parser recurse deep or build a huge tree.  0 when within the limits, else
 * 1 (too deep) or 2 (too many values) with the offset in *at. */
static int scan_body(const char *s, size_t n, size_t *at)
{
    size_t i, values = 1;
    int depth = 0, in_str = 0, esc = 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[') {
            values++;
            if (++depth > MT_PROTO_MAX_DEPTH) {
                *at = i;
                return 1;
            }
        } else if (c == '}' || c == ']')
            depth--;
        else if (c == ',')
            values++;
        if (values > MT_PROTO_MAX_VALUES) {
            *at = i;
            return 2;
        }
    }
    return 0;
}

static int json_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int mt_proto_decode(const void *const *frames, const size_t *lens, size_t n, mt_proto_msg *out,
                    char *err, size_t errlen)
{
    static const char tag[] = MT_PROTO_TAG;
    const size_t taglen = sizeof tag - 1;
    char buf[200], why[400];
    const char *body, *end = NULL;
    char *copy;
    size_t i, blen, at;
    cJSON *json;
    int cmd, rc;

    out->command = MT_PROTO_NONE;
    out->body = NULL;
    if (n != 3 || !frames || !lens)
        return fail(err, errlen, -EPROTO,
                    "message has %zu frame%s, expected 3 (tag, command, body)", n,
                    n == 1 ? "" : "s");
    for (i = 0; i < 3; i++)
        if (!frames[i] && lens[i])
            return fail(err, errlen, -EPROTO, "frame %zu: no data", i);
    /* frame 0: the tag */
    if (lens[0] != taglen || memcmp(frames[0], tag, taglen) != 0) {
        const char *t = frames[0];
        size_t k;
        if (lens[0] > 8 && memcmp(t, "moetune/", 8) == 0) {
            for (k = 8; k < lens[0] && t[k] >= '0' && t[k] <= '9'; k++)
                ;
            if (k == lens[0] && k - 8 <= 9)
                return fail(err, errlen, -EPROTONOSUPPORT,
                            "frame 0 (tag): protocol version %s is not supported (this side "
                            "speaks %s)",
                            show(t + 8, lens[0] - 8, buf, sizeof buf), MT_PROTO_TAG);
        }
        return fail(err, errlen, -EPROTO, "frame 0 (tag): expected \"%s\", got \"%s\"",
                    MT_PROTO_TAG, show(frames[0], lens[0], buf, sizeof buf));
    }
    /* frame 1: the command */
    cmd = mt_proto_cmd_parse(frames[1], lens[1]);
    if (cmd == MT_PROTO_NONE)
        return fail(err, errlen, -EPROTO, "frame 1 (command): unknown command \"%s\"",
                    show(frames[1], lens[1], buf, sizeof buf));
    /* frame 2: the body */
    body = frames[2];
    blen = lens[2];
    if (blen > MT_PROTO_MAX_BODY)
        return fail(err, errlen, -EMSGSIZE,
                    "frame 2 (body): %s: %zu bytes, over the limit of %u bytes", cmd_names[cmd],
                    blen, MT_PROTO_MAX_BODY);
    if (blen == 0)
        return fail(err, errlen, -EPROTO, "frame 2 (body): %s: empty, expected a JSON object",
                    cmd_names[cmd]);
    if (memchr(body, '\0', blen))
        return fail(err, errlen, -EPROTO, "frame 2 (body): %s: a NUL byte at offset %zu",
                    cmd_names[cmd], (size_t)((const char *)memchr(body, '\0', blen) - body));
    for (i = 0; i < blen && json_ws(body[i]); i++)
        ;
    if (i == blen || body[i] != '{')
        return fail(err, errlen, -EPROTO,
                    "frame 2 (body): %s: not a JSON object (starts with \"%s\")", cmd_names[cmd],
                    show(body + i, blen - i, buf, sizeof buf));
    switch (scan_body(body, blen, &at)) {
    case 1:
        return fail(err, errlen, -EPROTO,
                    "frame 2 (body): %s: nested deeper than %d levels at offset %zu",
                    cmd_names[cmd], MT_PROTO_MAX_DEPTH, at);
    case 2:
        return fail(err, errlen, -EMSGSIZE,
                    "frame 2 (body): %s: more than %d JSON values (at offset %zu)", cmd_names[cmd],
                    MT_PROTO_MAX_VALUES, at);
    default:
        break;
    }
    if (!(copy = malloc(blen + 1)))
        return fail(err, errlen, -ENOMEM, "frame 2 (body): out of memory");
    memcpy(copy, body, blen);
    copy[blen] = '\0';
    json = cJSON_ParseWithLengthOpts(copy, blen, &end, 0);
    if (!json) {
        size_t off = end && end >= copy && end <= copy + blen ? (size_t)(end - copy) : 0;
        free(copy);
        return fail(err, errlen, -EPROTO, "frame 2 (body): %s: not valid JSON (at offset %zu)",
                    cmd_names[cmd], off);
    }
    at = end ? (size_t)(end - copy) : blen;
    while (at < blen && json_ws(copy[at]))
        at++;
    free(copy);
    if (at < blen) {
        cJSON_Delete(json);
        return fail(err, errlen, -EPROTO,
                    "frame 2 (body): %s: trailing data after the JSON object at offset %zu",
                    cmd_names[cmd], at);
    }
    if ((rc = mt_proto_validate(cmd, json, why, sizeof why)) < 0) {
        cJSON_Delete(json);
        return fail(err, errlen, rc == -ENOMEM ? -ENOMEM : -EPROTO, "frame 2 (body): %s", why);
    }
    out->command = cmd;
    out->body = json;
    return 0;
}

/* ---- sockets ----------------------------------------------------------------------- */

static int zfail(char *err, size_t errlen, const char *what)
{
    int e = errno ? errno : EIO;
    return fail(err, errlen, -e, "%s: %s", what, zmq_strerror(e));
}

int mt_proto_socket_setup(void *socket, int router, const char *worker_name, char *err,
                          size_t errlen)
{
    int64_t max = (int64_t)MT_PROTO_MAX_BODY + 4096;
    int one = 1, ivl = MT_PROTO_RECONNECT_MS, ivl_max = MT_PROTO_RECONNECT_MAX_MS;
    char why[160];
    if (!socket)
        return fail(err, errlen, -EINVAL, "no socket");
    if (zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max, sizeof max))
        return zfail(err, errlen, "ZMQ_MAXMSGSIZE");
    if (router) {
        if (zmq_setsockopt(socket, ZMQ_ROUTER_MANDATORY, &one, sizeof one))
            return zfail(err, errlen, "ZMQ_ROUTER_MANDATORY");
        if (zmq_setsockopt(socket, ZMQ_ROUTER_HANDOVER, &one, sizeof one))
            return zfail(err, errlen, "ZMQ_ROUTER_HANDOVER");
        return 0;
    }
    if (!worker_name || !is_id(worker_name, why, sizeof why))
        return fail(err, errlen, -EINVAL, "worker name: expected %s, got %s", type_want(F_ID),
                    worker_name ? why : "none");
    if (zmq_setsockopt(socket, ZMQ_ROUTING_ID, worker_name, strlen(worker_name)))
        return zfail(err, errlen, "ZMQ_ROUTING_ID");
    if (zmq_setsockopt(socket, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl))
        return zfail(err, errlen, "ZMQ_RECONNECT_IVL");
    if (zmq_setsockopt(socket, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max))
        return zfail(err, errlen, "ZMQ_RECONNECT_IVL_MAX");
    return 0;
}

int mt_proto_send(void *socket, const void *identity, size_t idlen, int command, const cJSON *body,
                  char *err, size_t errlen)
{
    const char *name = mt_proto_cmd_name(command);
    char *text;
    size_t n;
    int rc;
    if (!socket)
        return fail(err, errlen, -EINVAL, "send: no socket");
    if ((rc = mt_proto_validate(command, body, err, errlen)) < 0)
        return rc;
    if (identity && (idlen == 0 || idlen > MT_PROTO_IDENTITY_MAX))
        return fail(err, errlen, -EINVAL, "send %s: a routing id of %zu bytes", name, idlen);
    if (!(text = cJSON_PrintUnformatted(body)))
        return fail(err, errlen, -ENOMEM, "send %s: out of memory", name);
    n = strlen(text);
    if (n > MT_PROTO_MAX_BODY) {
        free(text);
        return fail(err, errlen, -EMSGSIZE, "send %s: body of %zu bytes, over the limit of %u",
                    name, n, MT_PROTO_MAX_BODY);
    }
    /* a multipart message is delivered whole or not at all; once the first
     * frame is accepted the rest are too */
    if (identity && zmq_send(socket, identity, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        goto zerr;
    if (zmq_send(socket, MT_PROTO_TAG, sizeof MT_PROTO_TAG - 1, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(socket, name, strlen(name), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(socket, text, n, ZMQ_DONTWAIT) < 0)
        goto zerr;
    free(text);
    return 0;
zerr:
    rc = errno ? errno : EIO;
    free(text);
    return fail(err, errlen, -rc, "send %s: %s", name, zmq_strerror(rc));
}

#define KEEP 5 /* identity + 3 frames + one to see there are too many */

int mt_proto_recv(void *socket, int router, mt_proto_msg *out, char *err, size_t errlen)
{
    zmq_msg_t part[KEEP];
    const void *fr[KEEP];
    size_t ln[KEEP], kept = 0, total = 0, k, first;
    int more = 1, rc = 0;
    const char *p;

    mt_proto_msg_init(out);
    if (!socket)
        return fail(err, errlen, -EINVAL, "recv: no socket");
    while (more) {
        zmq_msg_t m, *dst = kept < KEEP ? &part[kept] : &m;
        zmq_msg_init(dst);
        while ((rc = zmq_msg_recv(dst, socket, 0)) < 0 && errno == EINTR && total > 0)
            ; /* the rest of a message is there: never leave it half read */
        if (rc < 0) {
            int e = errno;
            zmq_msg_close(dst);
            for (k = 0; k < kept; k++)
                zmq_msg_close(&part[k]);
            if (e == EAGAIN)
                return fail(err, errlen, -EAGAIN, "recv: no message");
            return fail(err, errlen, -e, "recv: %s", zmq_strerror(e));
        }
        /* metadata rides on the frames from the wire (a ROUTER's routing
         * id frame is made locally and carries none) */
        if (!out->user_id[0] && (p = zmq_msg_gets(dst, "User-Id")) != NULL)
            snprintf(out->user_id, sizeof out->user_id, "%s", p);
        if (!out->peer[0] && (p = zmq_msg_gets(dst, "Peer-Address")) != NULL)
            snprintf(out->peer, sizeof out->peer, "%s", p);
        total++;
        out->bytes += zmq_msg_size(dst);
        more = zmq_msg_more(dst);
        if (dst == &m)
            zmq_msg_close(&m);
        else
            kept++;
    }
    out->frames = total;
    first = 0;
    if (router) {
        size_t idl = zmq_msg_size(&part[0]);
        if (idl > MT_PROTO_IDENTITY_MAX)
            idl = MT_PROTO_IDENTITY_MAX;
        memcpy(out->identity, zmq_msg_data(&part[0]), idl);
        out->idlen = idl;
        first = 1;
    }
    for (k = first; k < kept; k++) {
        fr[k - first] = zmq_msg_data(&part[k]);
        ln[k - first] = zmq_msg_size(&part[k]);
    }
    rc = mt_proto_decode(fr, ln, total - first, out, err, errlen);
    for (k = 0; k < kept; k++)
        zmq_msg_close(&part[k]);
    return rc;
}

int mt_proto_recv_queued(void *socket, int router, mt_proto_msg *out, char *err, size_t errlen)
{
    int ev = 0;
    size_t evl = sizeof ev;
    if (zmq_getsockopt(socket, ZMQ_EVENTS, &ev, &evl) || !(ev & ZMQ_POLLIN))
        return -EAGAIN;
    return mt_proto_recv(socket, router, out, err, errlen);
}

/* ---- views ------------------------------------------------------------------------- */

static const cJSON *item(const mt_proto_msg *m, const char *k)
{
    return m && m->body ? cJSON_GetObjectItemCaseSensitive(m->body, k) : NULL;
}

static const char *str_or(const mt_proto_msg *m, const char *k, const char *dflt)
{
    const cJSON *v = item(m, k);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double num_or(const mt_proto_msg *m, const char *k, double dflt)
{
    const cJSON *v = item(m, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int int_or(const mt_proto_msg *m, const char *k, int dflt)
{
    const cJSON *v = item(m, k);
    return cJSON_IsNumber(v) && is_int(v->valuedouble, INT_MIN, INT_MAX) ? (int)v->valuedouble
                                                                         : dflt;
}

static int bool_or(const mt_proto_msg *m, const char *k, int dflt)
{
    const cJSON *v = item(m, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static const cJSON *arr_or_null(const mt_proto_msg *m, const char *k)
{
    const cJSON *v = item(m, k);
    return cJSON_IsArray(v) ? v : NULL;
}

static int is_cmd(const mt_proto_msg *m, int cmd)
{
    return m && m->body && m->command == cmd;
}

int mt_proto_get_ready(const mt_proto_msg *m, mt_proto_ready *o)
{
    if (!is_cmd(m, MT_PROTO_READY))
        return -EINVAL;
    o->worker = str_or(m, "worker", NULL);
    o->host = str_or(m, "host", NULL);
    o->gpus = int_or(m, "gpus", 0);
    o->gpu_type = str_or(m, "gpu_type", "");
    o->nodes = int_or(m, "nodes", 1);
    o->launchers = arr_or_null(m, "launchers");
    o->programs = arr_or_null(m, "programs");
    o->running = arr_or_null(m, "running");
    o->finished = arr_or_null(m, "finished");
    o->slots = int_or(m, "slots", 1);
    o->version = str_or(m, "version", NULL);
    return 0;
}

int mt_proto_get_job(const mt_proto_msg *m, mt_proto_job *o)
{
    if (!is_cmd(m, MT_PROTO_JOB))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->kind = str_or(m, "kind", NULL);
    o->contract = str_or(m, "contract", NULL);
    o->config = str_or(m, "config", NULL);
    o->replicate = int_or(m, "replicate", 0);
    o->time_limit_s = num_or(m, "time_limit_s", 0);
    o->profile = bool_or(m, "profile", 0);
    o->hang_factor = num_or(m, "hang_factor", 0);
    o->sim_seed = str_or(m, "sim_seed", NULL);
    o->launcher = str_or(m, "launcher", NULL);
    o->routing = str_or(m, "routing", NULL);
    o->nodelist = str_or(m, "nodelist", NULL);
    o->rev = str_or(m, "rev", NULL);
    o->repo = str_or(m, "repo", NULL);
    o->prepare = arr_or_null(m, "prepare");
    o->prepare_timeout_s = num_or(m, "prepare_timeout_s", 0);
    o->prepare_v = NULL;
    o->n_prepare = 0;
    return 0;
}

int mt_proto_get_job_ack(const mt_proto_msg *m, mt_proto_job_ack *o)
{
    if (!is_cmd(m, MT_PROTO_JOB_ACK))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->accepted = bool_or(m, "accepted", 0);
    o->reason = str_or(m, "reason", NULL);
    o->slurm_step = str_or(m, "slurm_step", NULL);
    return 0;
}

int mt_proto_get_progress(const mt_proto_msg *m, mt_proto_progress *o)
{
    const cJSON *it = item(m, "iteration");
    if (!is_cmd(m, MT_PROTO_PROGRESS))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->lines = arr_or_null(m, "lines");
    o->iteration = cJSON_IsNumber(it) && is_int(it->valuedouble, 0, (double)LONG_MAX / 2)
                       ? (long)it->valuedouble
                       : -1;
    o->elapsed_s = num_or(m, "elapsed_s", NAN);
    o->step_ms = num_or(m, "step_ms", NAN);
    o->slurm_step = str_or(m, "slurm_step", NULL);
    return 0;
}

int mt_proto_get_result(const mt_proto_msg *m, mt_proto_result *o)
{
    const cJSON *run = item(m, "run"), *memo = item(m, "memo");
    if (!is_cmd(m, MT_PROTO_RESULT))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->memo = cJSON_IsObject(memo) ? memo : NULL;
    o->run = cJSON_IsObject(run) ? run : NULL;
    o->samples = arr_or_null(m, "samples");
    o->gpus = arr_or_null(m, "gpus");
    return 0;
}

int mt_proto_get_result_ack(const mt_proto_msg *m, mt_proto_result_ack *o)
{
    const cJSON *id = item(m, "run_id");
    if (!is_cmd(m, MT_PROTO_RESULT_ACK))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->status = str_or(m, "status", NULL);
    o->run_id = cJSON_IsNumber(id) && is_int(id->valuedouble, -TWO53, TWO53)
                    ? (long long)id->valuedouble
                    : -1;
    return 0;
}

int mt_proto_get_heartbeat(const mt_proto_msg *m, mt_proto_heartbeat *o)
{
    const cJSON *seq = item(m, "seq");
    if (!is_cmd(m, MT_PROTO_HEARTBEAT))
        return -EINVAL;
    o->seq = cJSON_IsNumber(seq) && is_int(seq->valuedouble, 0, TWO53) ? (long long)seq->valuedouble
                                                                       : -1;
    o->time = num_or(m, "time", NAN);
    o->running = arr_or_null(m, "running");
    o->reannounce = bool_or(m, "reannounce", 0);
    return 0;
}

int mt_proto_get_cancel(const mt_proto_msg *m, mt_proto_cancel *o)
{
    if (!is_cmd(m, MT_PROTO_CANCEL))
        return -EINVAL;
    o->job_id = str_or(m, "job_id", NULL);
    o->retry = int_or(m, "retry", 0);
    o->reason = str_or(m, "reason", "");
    return 0;
}

int mt_proto_get_disconnect(const mt_proto_msg *m, mt_proto_disconnect *o)
{
    if (!is_cmd(m, MT_PROTO_DISCONNECT))
        return -EINVAL;
    o->reason = str_or(m, "reason", "");
    return 0;
}

int mt_proto_jobref_of(const mt_proto_msg *m, mt_proto_jobref *o)
{
    if (!m || !m->body)
        return -EINVAL;
    switch (m->command) {
    case MT_PROTO_JOB:
    case MT_PROTO_JOB_ACK:
    case MT_PROTO_PROGRESS:
    case MT_PROTO_RESULT:
    case MT_PROTO_RESULT_ACK:
    case MT_PROTO_CANCEL:
        o->job_id = str_or(m, "job_id", NULL);
        o->retry = int_or(m, "retry", 0);
        return o->job_id ? 0 : -EINVAL;
    default:
        return -EINVAL;
    }
}

size_t mt_proto_count(const cJSON *array)
{
    return cJSON_IsArray(array) ? (size_t)cJSON_GetArraySize(array) : 0;
}

const char *mt_proto_str_at(const cJSON *array, size_t i)
{
    const cJSON *v;
    if (!cJSON_IsArray(array) || i >= (size_t)INT_MAX)
        return NULL;
    v = cJSON_GetArrayItem(array, (int)i);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int mt_proto_jobref_at(const cJSON *array, size_t i, mt_proto_jobref *out)
{
    const cJSON *v, *id, *r;
    if (!cJSON_IsArray(array) || i >= (size_t)INT_MAX)
        return -EINVAL;
    v = cJSON_GetArrayItem(array, (int)i);
    id = cJSON_GetObjectItemCaseSensitive(v, "job_id");
    r = cJSON_GetObjectItemCaseSensitive(v, "retry");
    if (!cJSON_IsString(id) || !cJSON_IsNumber(r) || !is_int(r->valuedouble, 0, INT_MAX))
        return -EINVAL;
    out->job_id = id->valuestring;
    out->retry = (int)r->valuedouble;
    return 0;
}

/* ---- builders ---------------------------------------------------------------------- */

/* Each adder leaves *ok at 0 when an allocation fails. */
static void add_str(cJSON *o, const char *k, const char *v, int *ok)
{
    if (v && !cJSON_AddStringToObject(o, k, v))
        *ok = 0;
}

static void add_num(cJSON *o, const char *k, double v, int *ok)
{
    if (!cJSON_AddNumberToObject(o, k, v))
        *ok = 0;
}

static void add_bool(cJSON *o, const char *k, int v, int *ok)
{
    if (!cJSON_AddBoolToObject(o, k, v ? 1 : 0))
        *ok = 0;
}

static void add_item(cJSON *o, const char *k, cJSON *v, int *ok)
{
    if (!v || !cJSON_AddItemToObject(o, k, v)) {
        cJSON_Delete(v);
        *ok = 0;
    }
}

static cJSON *done(cJSON *o, int ok)
{
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *mt_proto_jobref_json(const mt_proto_jobref *j)
{
    cJSON *o;
    int ok = 1;
    if (!j || !j->job_id || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", j->job_id, &ok);
    add_num(o, "retry", j->retry, &ok);
    return done(o, ok);
}

static cJSON *str_array(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    size_t i;
    for (i = 0; a && i < n; i++) {
        cJSON *s = v[i] ? cJSON_CreateString(v[i]) : NULL;
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static cJSON *ref_array(const mt_proto_jobref *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    size_t i;
    for (i = 0; a && i < n; i++) {
        cJSON *s = mt_proto_jobref_json(&v[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

cJSON *mt_proto_ready_body(const mt_proto_ready *r, const char *const *launchers,
                           size_t n_launchers, const char *const *programs, size_t n_programs,
                           const mt_proto_jobref *running, size_t n_running,
                           const mt_proto_jobref *finished, size_t n_finished)
{
    cJSON *o;
    int ok = 1;
    if (!r || !r->worker || !r->host || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "worker", r->worker, &ok);
    add_str(o, "host", r->host, &ok);
    add_num(o, "gpus", r->gpus, &ok);
    add_str(o, "gpu_type", r->gpu_type ? r->gpu_type : "", &ok);
    add_num(o, "nodes", r->nodes, &ok);
    add_item(o, "launchers", str_array(launchers, n_launchers), &ok);
    add_item(o, "programs", str_array(programs, n_programs), &ok);
    add_item(o, "running", ref_array(running, n_running), &ok);
    add_item(o, "finished", ref_array(finished, n_finished), &ok);
    if (r->slots > 0)
        add_num(o, "slots", r->slots, &ok);
    add_str(o, "version", r->version, &ok);
    return done(o, ok);
}

cJSON *mt_proto_job_body(const mt_proto_job *j)
{
    cJSON *o;
    int ok = 1;
    if (!j || !j->job_id || !j->kind || !j->contract || !j->config || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", j->job_id, &ok);
    add_num(o, "retry", j->retry, &ok);
    add_str(o, "kind", j->kind, &ok);
    add_str(o, "contract", j->contract, &ok);
    add_str(o, "config", j->config, &ok);
    add_num(o, "replicate", j->replicate, &ok);
    add_num(o, "time_limit_s", j->time_limit_s, &ok);
    if (j->profile)
        add_bool(o, "profile", 1, &ok);
    if (j->hang_factor > 0)
        add_num(o, "hang_factor", j->hang_factor, &ok);
    add_str(o, "sim_seed", j->sim_seed, &ok);
    add_str(o, "launcher", j->launcher, &ok);
    add_str(o, "routing", j->routing, &ok);
    add_str(o, "nodelist", j->nodelist, &ok);
    add_str(o, "rev", j->rev, &ok);
    add_str(o, "repo", j->repo, &ok);
    if (j->rev) {
        cJSON *a = cJSON_AddArrayToObject(o, "prepare");
        size_t i;
        for (i = 0; a && i < j->n_prepare; i++)
            if (!cJSON_AddItemToArray(a, cJSON_CreateString(j->prepare_v[i])))
                ok = 0;
        if (!a)
            ok = 0;
        if (j->prepare_timeout_s > 0)
            add_num(o, "prepare_timeout_s", j->prepare_timeout_s, &ok);
    }
    return done(o, ok);
}

cJSON *mt_proto_job_ack_body(const mt_proto_job_ack *a)
{
    cJSON *o;
    int ok = 1;
    if (!a || !a->job_id || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", a->job_id, &ok);
    add_num(o, "retry", a->retry, &ok);
    add_bool(o, "accepted", a->accepted, &ok);
    add_str(o, "reason", a->reason, &ok);
    add_str(o, "slurm_step", a->slurm_step, &ok);
    return done(o, ok);
}

cJSON *mt_proto_progress_body(const mt_proto_progress *p, const char *const *lines, size_t n_lines)
{
    cJSON *o;
    int ok = 1;
    if (!p || !p->job_id || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", p->job_id, &ok);
    add_num(o, "retry", p->retry, &ok);
    add_item(o, "lines", str_array(lines, n_lines), &ok);
    if (p->iteration >= 0)
        add_num(o, "iteration", (double)p->iteration, &ok);
    if (isfinite(p->elapsed_s))
        add_num(o, "elapsed_s", p->elapsed_s, &ok);
    if (isfinite(p->step_ms))
        add_num(o, "step_ms", p->step_ms, &ok);
    add_str(o, "slurm_step", p->slurm_step, &ok);
    return done(o, ok);
}

cJSON *mt_proto_result_body(const char *job_id, int retry, const char *memo_json,
                            const mt_store_result *r)
{
    cJSON *o, *memo;
    int ok = 1;
    if (!job_id || !memo_json)
        return NULL;
    memo = cJSON_Parse(memo_json);
    if (!cJSON_IsObject(memo) || !(o = cJSON_CreateObject())) {
        cJSON_Delete(memo);
        return NULL;
    }
    add_str(o, "job_id", job_id, &ok);
    add_num(o, "retry", retry, &ok);
    add_item(o, "memo", memo, &ok);
    if (r) {
        add_item(o, "run", mt_proto_run_json(&r->run), &ok);
        add_item(o, "samples", mt_proto_samples_json(r->samples, r->n_samples), &ok);
        add_item(o, "gpus", mt_proto_gpus_json(r->gpus, r->n_gpus), &ok);
    } else {
        add_item(o, "run", cJSON_CreateNull(), &ok);
        add_item(o, "samples", cJSON_CreateArray(), &ok);
        add_item(o, "gpus", cJSON_CreateArray(), &ok);
    }
    return done(o, ok);
}

cJSON *mt_proto_result_ack_body(const mt_proto_result_ack *a)
{
    cJSON *o;
    int ok = 1;
    if (!a || !a->job_id || !a->status || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", a->job_id, &ok);
    add_num(o, "retry", a->retry, &ok);
    add_str(o, "status", a->status, &ok);
    if (a->run_id >= 0)
        add_num(o, "run_id", (double)a->run_id, &ok);
    return done(o, ok);
}

cJSON *mt_proto_heartbeat_body(const mt_proto_heartbeat *h, const mt_proto_jobref *running,
                               size_t n_running)
{
    cJSON *o;
    int ok = 1;
    if (!(o = cJSON_CreateObject()))
        return NULL;
    if (h && h->seq >= 0)
        add_num(o, "seq", (double)h->seq, &ok);
    if (h && isfinite(h->time))
        add_num(o, "time", h->time, &ok);
    if (running)
        add_item(o, "running", ref_array(running, n_running), &ok);
    if (h && h->reannounce)
        add_bool(o, "reannounce", 1, &ok);
    return done(o, ok);
}

cJSON *mt_proto_cancel_body(const mt_proto_cancel *c)
{
    cJSON *o;
    int ok = 1;
    if (!c || !c->job_id || !(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "job_id", c->job_id, &ok);
    add_num(o, "retry", c->retry, &ok);
    add_str(o, "reason", c->reason ? c->reason : "", &ok);
    return done(o, ok);
}

cJSON *mt_proto_disconnect_body(const char *reason)
{
    cJSON *o;
    int ok = 1;
    if (!(o = cJSON_CreateObject()))
        return NULL;
    add_str(o, "reason", reason ? reason : "", &ok);
    return done(o, ok);
}
