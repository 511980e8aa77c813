/*
 * profile.c - a profiled run's figures across devices, its wall, and the
 * side-by-side comparison of two runs (see profile.h).
 */
#include "profile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void mt_profile_opts_init(mt_profile_opts *o)
{
    memset(o, 0, sizeof *o);
    o->device = -1;
    o->headroom = -1;
    mt_wall_default_rules(&o->rules);
}

static void span_add(mt_profile_span *s, int64_t v, int dev, int first)
{
    if (first || v < s->min)
        s->min = v, s->min_dev = dev;
    if (first || v > s->max)
        s->max = v, s->max_dev = dev;
}

/* The step window o asks for into q (and p); 0, or an error said in d. */
static int profile_window(const mt_trace *t, const char *label, const mt_profile_opts *o,
                          mt_trace_query *q, mt_profile *p, mt_diag *d)
{
    int lo = 0, hi = 0, rc;
    size_t ns = mt_trace_steps(t, &lo, &hi);
    rc = mt_trace_step_window(t, o->first, o->last, &q->start_ns, &q->end_ns);
    if (rc == -EINVAL) {
        mt_diag_add(d, label, 0, "--window", "the window %d:%d ends before it starts", o->first,
                    o->last);
        return rc;
    }
    if (rc) {
        if (ns)
            mt_diag_add(d, label, 0, "--window",
                        "the trace marks steps %d to %d (ProfilerStep#N), not %d:%d", lo, hi,
                        o->first, o->last);
        else
            mt_diag_add(d, label, 0, "--window",
                        "the trace marks no steps (no ProfilerStep#N range): a window of "
                        "steps cannot be placed");
        return rc;
    }
    q->has_window = 1;
    p->has_steps = 1, p->first = o->first, p->last = o->last;
    return 0;
}

/* Device metrics m, the profile's next device, into its spans and sums;
 * its gaps above the threshold into *gaps. */
static void profile_add(mt_profile *p, const mt_trace_metrics *m, double *gaps)
{
    span_add(&p->comm, m->comm_ns, m->device, !p->ndev);
    span_add(&p->exposed, m->exposed_comm_ns, m->device, !p->ndev);
    span_add(&p->hidden, m->hidden_ns, m->device, !p->ndev);
    span_add(&p->idle, m->idle_ns, m->device, !p->ndev);
    span_add(&p->active, m->active_ns, m->device, !p->ndev);
    span_add(&p->dispatch, m->dispatch_ns, m->device, !p->ndev);
    span_add(&p->combine, m->combine_ns, m->device, !p->ndev);
    p->window_ns += m->window_ns;
    p->exposed_ns += m->exposed_comm_ns;
    p->hidden_ns += m->hidden_ns;
    p->comm_ns += m->comm_ns;
    p->compute_ns += m->compute_ns;
    p->idle_ns += m->idle_ns;
    *gaps += (double)m->gaps_above;
    p->ndev++;
}

/* The top kernels' names are the trace's: copies them into p->names.
 * 0 or -ENOMEM (the first failure said in d). */
static int profile_copy_names(mt_profile *p, const char *label, mt_diag *d)
{
    size_t i;
    if (!(p->names = calloc(p->ndev * MT_TRACE_TOP + 1, sizeof *p->names))) {
        mt_diag_add(d, label, 0, NULL, "out of memory profiling the trace");
        return -ENOMEM;
    }
    for (i = 0; i < p->ndev; i++) {
        size_t k;
        for (k = 0; k < p->dev[i].ntop; k++) {
            char *c = strdup(p->dev[i].top[k].name);
            if (!c)
                return -ENOMEM;
            p->names[p->nnames++] = c;
            p->dev[i].top[k].name = c;
        }
    }
    return 0;
}

/* The wall the profile p hits, by o's rules, with gaps summed over its
 * devices. */
static void profile_classify(mt_profile *p, const mt_profile_opts *o, double gaps)
{
    mt_wall_input in;
    p->bubble_share = o->bubble_share;
    memset(&in, 0, sizeof in);
    in.window_ns = p->window_ns;
    in.exposed_comm_ns = p->exposed_ns;
    in.idle_ns = p->idle_ns;
    in.bubble_share = o->bubble_share;
    in.gaps_per_device = gaps / (double)p->ndev;
    in.oom = o->oom;
    in.full_recompute_only = o->full_recompute_only;
    in.headroom = o->headroom;
    in.headroom_gate = o->headroom_gate;
    mt_wall_classify(&in, &o->rules, &p->wall);
}

int mt_profile_build(const mt_trace *t, const char *label, const mt_profile_opts *o,
                     mt_profile *p, mt_diag *d)
{
    size_t nd = mt_trace_devices(t, NULL, 0), i;
    int *dev = NULL, rc = 0;
    mt_trace_query q;
    double gaps = 0;
    memset(p, 0, sizeof *p);
    memset(&q, 0, sizeof q);
    q.gap_threshold_ns = (int64_t)llround(o->rules.gap_us * 1000.0);
    p->label = strdup(label ? label : "(trace)");
    p->evidence = mt_kv_new();
    dev = malloc((nd ? nd : 1) * sizeof *dev);
    p->dev = calloc(nd ? nd : 1, sizeof *p->dev);
    if (!p->label || !p->evidence || !dev || !p->dev) {
        rc = -ENOMEM;
        mt_diag_add(d, label, 0, NULL, "out of memory profiling the trace");
        goto out;
    }
    mt_trace_devices(t, dev, nd);
    if (!nd) {
        rc = -ENOENT;
        mt_diag_add(d, label, 0, NULL, "the trace holds no GPU kernel: nothing to profile");
        goto out;
    }
    if (o->has_steps && (rc = profile_window(t, label, o, &q, p, d)))
        goto out;
    for (i = 0; i < nd; i++) {
        mt_trace_metrics *m;
        if (o->device >= 0 && dev[i] != o->device)
            continue;
        m = &p->dev[p->ndev];
        if ((rc = mt_trace_metrics_get(t, dev[i], &q, m))) {
            if (rc == -ENOMEM)
                mt_diag_add(d, label, 0, NULL, "out of memory profiling the trace");
            else
                mt_diag_add(d, label, 0, NULL, "device %d: %s", dev[i],
                            rc == -EINVAL ? "the window is empty" : "no kernel");
            goto out;
        }
        profile_add(p, m, &gaps);
    }
    if (!p->ndev) {
        rc = -ENOENT;
        mt_diag_add(d, label, 0, "--device", "device %d has no kernel in this trace", o->device);
        goto out;
    }
    if ((rc = profile_copy_names(p, label, d)))
        goto out;
    if ((rc = mt_trace_evidence(t, p->evidence))) {
        mt_diag_add(d, label, 0, NULL, "out of memory profiling the trace");
        goto out;
    }
    profile_classify(p, o, gaps);
out:
    free(dev);
    if (rc)
        mt_profile_clear(p);
    return rc;
}

void mt_profile_clear(mt_profile *p)
{
    if (!p)
        return;
    free(p->label);
    free(p->dev);
    while (p->names && p->nnames > 0)
        free(p->names[--p->nnames]);
    free(p->names);
    mt_kv_destroy(&p->evidence);
    memset(p, 0, sizeof *p);
}

static double share(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

static const char *const span_names[] = {"comm",   "exposed_comm", "hidden_comm", "idle",
                                         "active", "dispatch",     "combine"};

static const mt_profile_span *span_at(const mt_profile *p, size_t i)
{
    const mt_profile_span *v[] = {&p->comm,   &p->exposed,  &p->hidden, &p->idle,
                                  &p->active, &p->dispatch, &p->combine};
    return v[i];
}

static void print_wall_json(const mt_profile *p, FILE *out)
{
    const mt_wall_verdict *w = &p->wall;
    int i;
    fputs("{\"wall\": ", out);
    json_str(out, mt_wall_name(w->wall));
    fputs(", \"runner_up\": ", out);
    json_str(out, mt_wall_name(w->runner_up));
    fprintf(out, ", \"confidence\": %.4f, \"ratios\": {", w->confidence);
    for (i = 0; i < MT_WALL_N; i++) {
        fprintf(out, "%s\"%s\": ", i ? ", " : "", mt_wall_name(i));
        if (isinf(w->ratio[i]))
            fputs("null", out);
        else
            fprintf(out, "%.4f", w->ratio[i]);
    }
    fprintf(out,
            "}, \"shares\": {\"compute\": %.6f, \"exposed_comm\": %.6f, \"hidden_comm\": %.6f, "
            "\"idle\": %.6f, \"bubble\": %.6f}, \"reason\": ",
            share(p->compute_ns, p->window_ns), w->exposed_share,
            share(p->hidden_ns, p->window_ns), w->idle_share, p->bubble_share);
    json_str(out, w->reason);
    fputc('}', out);
}

void mt_profile_print(const mt_profile *p, FILE *out, int json)
{
    size_t i;
    const char *key, *val;
    if (json) {
        fputs("{\"trace\": ", out);
        json_str(out, p->label);
        if (p->has_steps)
            fprintf(out, ", \"steps\": [%d, %d]", p->first, p->last);
        fputs(", \"devices\": [", out);
        for (i = 0; i < p->ndev; i++) {
            if (i)
                fputs(", ", out);
            mt_trace_metrics_print(&p->dev[i], out, 1);
        }
        fputs("], \"across_ranks\": {", out);
        for (i = 0; i < 7; i++) {
            const mt_profile_span *s = span_at(p, i);
            fprintf(out, "%s\"%s\": {\"min_us\": ", i ? ", " : "", span_names[i]);
            mt_trace_print_us(out, s->min);
            fprintf(out, ", \"min_device\": %d, \"max_us\": ", s->min_dev);
            mt_trace_print_us(out, s->max);
            fprintf(out, ", \"max_device\": %d}", s->max_dev);
        }
        fputs("}, \"wall\": ", out);
        print_wall_json(p, out);
        fputs(", \"evidence\": {", out);
        for (i = 0; mt_kv_entry(p->evidence, i, &key, &val) == 0; i++) {
            fputs(i ? ", " : "", out);
            json_str(out, key);
            fputs(": ", out);
            json_str(out, val);
        }
        fputs("}}\n", out);
        return;
    }
    fprintf(out, "trace %s", p->label);
    if (p->has_steps)
        fprintf(out, ", steps %d to %d", p->first, p->last);
    fputc('\n', out);
    for (i = 0; i < p->ndev; i++)
        mt_trace_metrics_print(&p->dev[i], out, 0);
    if (p->ndev > 1) {
        fprintf(out, "across %zu ranks (min on device, max on device):\n", p->ndev);
        for (i = 0; i < 7; i++) {
            const mt_profile_span *s = span_at(p, i);
            if (i >= 5 && !s->max)
                continue;
            fprintf(out, "  %-16s ", span_names[i]);
            mt_trace_print_us(out, s->min);
            fprintf(out, " us (device %d) .. ", s->min_dev);
            mt_trace_print_us(out, s->max);
            fprintf(out, " us (device %d)\n", s->max_dev);
        }
    }
    fprintf(out, "wall: %s (runner-up %s, confidence %.2f): %s\n", mt_wall_name(p->wall.wall),
            mt_wall_name(p->wall.runner_up), p->wall.confidence, p->wall.reason);
    fputs("evidence:\n", out);
    for (i = 0; mt_kv_entry(p->evidence, i, &key, &val) == 0; i++)
        fprintf(out, "  %s = %s\n", key, val);
}

/* One compared figure: name, value in a and b (ns, or a plain number). */
typedef struct cmp_row {
    const char *name;
    double a, b;
    int us; /* print as microseconds */
} cmp_row;

void mt_profile_compare(const mt_profile *a, const mt_profile *b, FILE *out, int json)
{
    const cmp_row rows[] = {
        {"window", (double)a->window_ns, (double)b->window_ns, 1},
        {"compute", (double)a->compute_ns, (double)b->compute_ns, 1},
        {"comm", (double)a->comm_ns, (double)b->comm_ns, 1},
        {"hidden_comm", (double)a->hidden_ns, (double)b->hidden_ns, 1},
        {"exposed_comm", (double)a->exposed_ns, (double)b->exposed_ns, 1},
        {"idle", (double)a->idle_ns, (double)b->idle_ns, 1},
        {"hidden_share_of_comm", share(a->hidden_ns, a->comm_ns), share(b->hidden_ns, b->comm_ns),
         0},
        {"exposed_share", a->wall.exposed_share, b->wall.exposed_share, 0},
        {"idle_net_share", a->wall.idle_net_share, b->wall.idle_net_share, 0},
        {"exposed_comm_max_rank", (double)a->exposed.max, (double)b->exposed.max, 1},
        {"dispatch", (double)a->dispatch.max, (double)b->dispatch.max, 1},
        {"combine", (double)a->combine.max, (double)b->combine.max, 1},
    };
    size_t i, n = sizeof rows / sizeof rows[0];
    if (json) {
        fputs("{\"a\": ", out);
        mt_profile_print(a, out, 1);
        fputs(", \"b\": ", out);
        mt_profile_print(b, out, 1);
        fputs(", \"delta\": {", out);
        for (i = 0; i < n; i++) {
            double dv = rows[i].b - rows[i].a;
            fprintf(out, "%s\"%s%s\": %.6f", i ? ", " : "", rows[i].name, rows[i].us ? "_us" : "",
                    rows[i].us ? dv / 1000.0 : dv);
        }
        fputs("}, \"wall\": [", out);
        json_str(out, mt_wall_name(a->wall.wall));
        fputs(", ", out);
        json_str(out, mt_wall_name(b->wall.wall));
        fputs("]}\n", out);
        return;
    }
    fprintf(out, "A %s\nB %s\n", a->label, b->label);
    fprintf(out, "%-24s %16s %16s %16s %9s\n", "", "A", "B", "B - A", "change");
    for (i = 0; i < n; i++) {
        const cmp_row *r = &rows[i];
        double sc = r->us ? 1e-3 : 100.0;
        const char *unit = r->us ? "us" : "%";
        fprintf(out, "%-24s %13.3f %-2s %13.3f %-2s %+13.3f %-2s", r->name, r->a * sc, unit,
                r->b * sc, unit, (r->b - r->a) * sc, unit);
        if (r->us && r->a > 0)
            fprintf(out, " %+8.1f%%", 100.0 * (r->b - r->a) / r->a);
        fputc('\n', out);
    }
    fprintf(out, "%-24s %16s %16s\n", "wall", mt_wall_name(a->wall.wall),
            mt_wall_name(b->wall.wall));
    fprintf(out, "%-24s %16.2f %16.2f\n", "confidence", a->wall.confidence, b->wall.confidence);
}
