/*
 * fuzz_logparse.c - libFuzzer target for the Megatron log parser
 * (core/logparse.c): arbitrary bytes through the streaming entry points
 * (mt_logparse_feed / _feed_rank / _feed_channel, at input-chosen chunk
 * boundaries), then every reader of the result: iterations, losses, per-rank
 * memory, arguments, world, events, evidence, and both printers.
 *
 * Build (clang from Debian, libclang-rt-*-dev for the fuzzer runtime):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore -Iabi \
 *       tests/fuzz/fuzz_logparse.c core/logparse.c core/kv.c core/diag.c -lm \
 *       -o fuzz_logparse
 * Run:
 *   ./fuzz_logparse -dict=tests/fuzz/logparse.dict -max_len=65536 \
 *       -max_total_time=60 CORPUS_DIR tests/fuzz/corpus_logparse
 *
 * The first two bytes pick how the rest is fed: chunk size, whether lines
 * go to one merged stream or rotate over per-rank / per-channel streams,
 * and a small iteration cap; the rest is the log.
 */
#include "logparse.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *sink;

static void on_iteration(void *ctx, const mt_iteration *it)
{
    size_t *n = ctx;
    int i;
    /* touch every field the runner reads */
    *n += (size_t)(it->iteration & 1) + (it->has & MT_IT_ELAPSED ? 1 : 0);
    for (i = 0; i < it->n_losses; i++)
        *n += strlen(it->loss_key[i]) + (isnan(it->loss[i]) ? 1 : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mt_logparse *p;
    mt_kv *ev;
    unsigned mode = size > 0 ? data[0] : 0, step = size > 1 ? data[1] : 0;
    size_t chunk, o = 0, seen = 0, i;
    int src = 0;
    const char *k, *v;

    if (!sink && !(sink = fopen("/dev/null", "w")))
        abort();
    if (size >= 2) {
        data += 2;
        size -= 2;
    }
    chunk = 1 + (size_t)(step % 97) * (mode & 0x40 ? 701 : 1);
    p = mt_logparse_new();
    if (!p)
        return 0;
    if (mode & 0x20)
        mt_logparse_set_max_iterations(p, mode & 3);
    mt_logparse_on_iteration(p, on_iteration, &seen);
    while (o < size) {
        size_t n = size - o < chunk ? size - o : chunk;
        const char *d = (const char *)data + o;
        switch (mode & 0x80 ? src++ % 4 : 0) {
        case 0:
            mt_logparse_feed(p, d, n);
            break;
        case 1:
            mt_logparse_feed_rank(p, 3, d, n);
            break;
        case 2:
            mt_logparse_feed_channel(p, 3, 1, d, n);
            break;
        default:
            mt_logparse_feed_channel(p, (int)(mode & 0x0f) - 1, 2, d, n);
            break;
        }
        o += n;
        if (mode & 0x10 && o < size && data[o] == '\n')
            mt_logparse_finish(p); /* finish mid-stream, then keep feeding */
    }
    mt_logparse_finish(p);

    for (i = 0; i < mt_logparse_iterations(p); i++) {
        mt_iteration it;
        int found;
        if (mt_logparse_iteration(p, i, &it))
            abort();
        if (it.n_losses)
            (void)mt_iteration_loss(&it, it.loss_key[it.n_losses - 1], &found);
        (void)mt_iteration_loss(&it, "lm loss", NULL);
    }
    if (mt_logparse_iteration(p, i, &(mt_iteration){0}) != -ERANGE)
        abort();
    for (i = 0; i < mt_logparse_ranks(p); i++) {
        const mt_rank_memory *m = mt_logparse_rank_memory(p, i);
        if (mt_logparse_memory_of(p, m->rank) != m)
            abort();
    }
    for (i = 0; i < MT_LOGEV_KINDS; i++) {
        const mt_logevent *e = mt_logparse_first(p, (mt_logevent_kind)i);
        if ((e != NULL) != (mt_logparse_event_count(p, (mt_logevent_kind)i) > 0))
            abort();
        if (e && strlen(e->text) > MT_LOGPARSE_TEXT_MAX)
            abort();
    }
    for (i = 0; i < mt_logparse_events(p); i++)
        seen += strlen(mt_logparse_event(p, i)->text);
    {
        mt_logworld w;
        double a, b, c;
        (void)mt_logparse_world(p, &w);
        (void)mt_logparse_theoretical(p, &a, &b, &c);
    }
    ev = mt_kv_new();
    if (ev) {
        (void)mt_logparse_evidence(p, ev);
        for (i = 0; mt_kv_entry(ev, i, &k, &v) == 0; i++)
            seen += strlen(k) + strlen(v);
        mt_kv_destroy(&ev);
    }
    (void)mt_logparse_print(p, sink, 1);
    (void)mt_logparse_print(p, sink, 0);
    (void)seen;
    mt_logparse_destroy(&p);
    return 0;
}
