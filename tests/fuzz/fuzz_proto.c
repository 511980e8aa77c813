/*
 * fuzz_proto.c - libFuzzer target for the worker protocol's message
 * decoding (workers/proto.c, workers/result_json.c): arbitrary bytes split
 * into frames at every "|#|", then mt_proto_decode, and for a message that
 * decodes, every typed view, every array accessor, the result's run JSON
 * into an mt_store_result, and the sender's validation, which must agree
 * with the decoder (a decoded body that the sender would refuse aborts).
 *
 * Build (clang from Debian, libclang-rt-*-dev for the fuzzer runtime):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *       -Iworkers -Icore -Iabi tests/fuzz/fuzz_proto.c workers/proto.c \
 *       workers/result_json.c $(pkg-config --cflags --libs libzmq libcjson) -lm \
 *       -o fuzz_proto
 * Run:
 *   ./fuzz_proto -dict=tests/fuzz/proto.dict -max_len=65536 \
 *       -max_total_time=60 CORPUS_DIR tests/fuzz/corpus_proto
 */
#include "proto.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEP "|#|"
#define MAXF 16

static void walk_strings(const cJSON *a, size_t *seen)
{
    size_t i, n = mt_proto_count(a);
    for (i = 0; i <= n; i++) {
        const char *s = mt_proto_str_at(a, i);
        if ((s == NULL) != (i == n))
            abort();
        if (s)
            *seen += strlen(s);
    }
}

static void walk_refs(const cJSON *a, size_t *seen)
{
    size_t i, n = mt_proto_count(a);
    for (i = 0; i <= n; i++) {
        mt_proto_jobref r;
        int rc = mt_proto_jobref_at(a, i, &r);
        if ((rc != 0) != (i == n))
            abort();
        if (rc == 0)
            *seen += strlen(r.job_id) + (size_t)r.retry;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const void *fr[MAXF];
    size_t ln[MAXF], n = 0, o = 0, seen = 0;
    const char *p = (const char *)data;
    char err[512];
    mt_proto_msg m;
    int rc, matched = 0;

    /* split at SEP; at most MAXF frames (the last takes the rest) */
    while (n < MAXF) {
        const char *at = NULL;
        size_t k;
        if (n + 1 < MAXF)
            for (k = o; k + 3 <= size; k++)
                if (memcmp(p + k, SEP, 3) == 0) {
                    at = p + k;
                    break;
                }
        fr[n] = p + o;
        ln[n] = at ? (size_t)(at - (p + o)) : size - o;
        n++;
        if (!at)
            break;
        o = (size_t)(at - p) + 3;
    }
    err[0] = '\0';
    rc = mt_proto_decode(fr, ln, n, &m, err, sizeof err);
    if (strlen(err) >= sizeof err || strchr(err, '\n'))
        abort(); /* errors are one line */
    if (rc != 0) {
        if (m.body || m.command != MT_PROTO_NONE || !err[0])
            abort();
        if (rc != -EPROTO && rc != -EPROTONOSUPPORT && rc != -EMSGSIZE && rc != -ENOMEM)
            abort();
        return 0;
    }
    if (!m.body || m.command <= MT_PROTO_NONE || m.command >= MT_PROTO_COMMANDS)
        abort();
    /* what the decoder accepts, the sender accepts */
    if (mt_proto_validate(m.command, m.body, err, sizeof err) != 0)
        abort();
    {
        mt_proto_ready r;
        if (mt_proto_get_ready(&m, &r) == 0) {
            matched++;
            seen += strlen(r.worker) + strlen(r.host) + strlen(r.gpu_type);
            walk_strings(r.launchers, &seen);
            walk_strings(r.programs, &seen);
            walk_refs(r.running, &seen);
            walk_refs(r.finished, &seen);
        }
    }
    {
        mt_proto_job j;
        if (mt_proto_get_job(&m, &j) == 0) {
            matched++;
            seen += strlen(j.job_id) + strlen(j.kind) + strlen(j.contract) + strlen(j.config);
            if (j.retry < 0 || j.replicate < 0 || !(j.time_limit_s >= 0))
                abort();
        }
    }
    {
        mt_proto_job_ack a;
        if (mt_proto_get_job_ack(&m, &a) == 0) {
            matched++;
            if (!a.accepted && (!a.reason || !a.reason[0]))
                abort();
        }
    }
    {
        mt_proto_progress pr;
        if (mt_proto_get_progress(&m, &pr) == 0) {
            matched++;
            walk_strings(pr.lines, &seen);
        }
    }
    {
        mt_proto_result r;
        if (mt_proto_get_result(&m, &r) == 0) {
            mt_store_result sr;
            matched++;
            if (!r.memo)
                abort();
            if (r.run) {
                if (mt_proto_result_to_store(r.run, r.samples, r.gpus, &sr, err, sizeof err) != 0)
                    abort(); /* validated already */
                if (sr.run.retry != r.retry)
                    abort();
                seen += sr.n_samples + sr.n_gpus;
                mt_proto_result_release(&sr);
            } else if (mt_proto_count(r.samples) || mt_proto_count(r.gpus)) {
                abort();
            }
        }
    }
    {
        mt_proto_result_ack a;
        if (mt_proto_get_result_ack(&m, &a) == 0) {
            matched++;
            seen += strlen(a.status);
        }
    }
    {
        mt_proto_heartbeat h;
        if (mt_proto_get_heartbeat(&m, &h) == 0) {
            matched++;
            walk_refs(h.running, &seen);
        }
    }
    {
        mt_proto_cancel c;
        if (mt_proto_get_cancel(&m, &c) == 0)
            matched++;
    }
    {
        mt_proto_disconnect d;
        if (mt_proto_get_disconnect(&m, &d) == 0)
            matched++;
    }
    {
        mt_proto_jobref j;
        if (mt_proto_jobref_of(&m, &j) == 0)
            seen += strlen(j.job_id);
    }
    if (matched != 1)
        abort();
    (void)seen;
    mt_proto_msg_clear(&m);
    return 0;
}
