/*
 * report_md.c - REPORT.md: text and tables, from a model (report_int.h).
 * Every string from the bundle is escaped for Markdown: table cells ('|'),
 * code spans and fenced blocks.
 */
#include "report_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t longest_run(const char *s, char c)
{
    size_t run = 0, best = 0;
    for (; s && *s; s++) {
        run = *s == c ? run + 1 : 0;
        if (run > best)
            best = run;
    }
    return best;
}

/* A Markdown code span (knob names, values, flags), safe in a table cell. */
static void sb_mdcode(mt__sb *b, const char *s)
{
    size_t ticks, i;
    const char *p;
    if (!s) {
        mt__sb_puts(b, "n/a");
        return;
    }
    if (!*s) {
        mt__sb_puts(b, "(empty)");
        return;
    }
    ticks = longest_run(s, '`') + 1;
    for (i = 0; i < ticks; i++)
        mt__sb_putn(b, "`", 1);
    if (s[0] == '`' || s[0] == ' ')
        mt__sb_putn(b, " ", 1);
    for (p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '|')
            mt__sb_puts(b, "\\|");
        else if (c < 0x20 || c == 0x7f)
            mt__sb_putn(b, " ", 1);
        else
            mt__sb_putn(b, p, 1);
    }
    if (s[strlen(s) - 1] == '`' || s[strlen(s) - 1] == ' ')
        mt__sb_putn(b, " ", 1);
    for (i = 0; i < ticks; i++)
        mt__sb_putn(b, "`", 1);
}

/* A fenced Markdown block whose fence no line of body can close. */
static void sb_mdfence(mt__sb *b, const char *info, const char *body)
{
    size_t ticks = longest_run(body, '`') + 1, i;
    if (ticks < 3)
        ticks = 3;
    for (i = 0; i < ticks; i++)
        mt__sb_putn(b, "`", 1);
    mt__sb_printf(b, "%s\n%s", info, body);
    if (b->n && b->s[b->n - 1] != '\n')
        mt__sb_putn(b, "\n", 1);
    for (i = 0; i < ticks; i++)
        mt__sb_putn(b, "`", 1);
    mt__sb_puts(b, "\n\n");
}

/* ---- REPORT.md -------------------------------------------------------- */

const mt__markup mt__md_markup = {
    .text = mt__sb_md, .code = sb_mdcode, MT__MARKUP(MT__MARKUP_MD)};

static void md_header(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "# moetune report: ");
    mt__sb_md(b, m->contract_name);
    mt__sb_puts(b, "\n\nCreated ");
    mt__byline(b, &mt__md_markup, m);
    mt__sb_puts(b, ". Plots: report.html (self-contained).\n\n");
    mt__banner(b, &mt__md_markup, m);
}

static void md_summary(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "## Summary\n\n| | |\n|---|---|\n| Contract | ");
    mt__sb_md(b, m->contract_name);
    mt__sb_puts(b, " (");
    sb_mdcode(b, m->contract_path);
    mt__sb_puts(b, ") |\n");
    mt__summary_head_rows(b, &mt__md_markup, m);
    mt__sb_puts(b, "| Label | ");
    mt__sb_md(b, m->label);
    mt__sb_puts(b, " |\n| Total gain | ");
    mt__total_gain(b, m, " (validated)");
    mt__sb_puts(b, " |\n");
    mt__summary_rows(b, &mt__md_markup, m);
    mt__sb_puts(b, "\n### Stack\n\n");
    mt__map_table(b, &mt__md_markup, &m->stack, "component", "version");
}

/* A fenced block of lines (body: scratch text, emptied first). */
static void md_lines(mt__sb *b, mt__sb *body, const char *info, const mt__strs *l, const char *none)
{
    size_t i;
    body->n = 0;
    for (i = 0; i < l->n; i++) {
        mt__sb_puts(body, l->v[i]);
        mt__sb_putn(body, "\n", 1);
    }
    sb_mdfence(b, info, l->n && body->s ? body->s : none);
}

static void md_commands(mt__sb *b, const mt__model *m)
{
    mt__sb body = {0};
    mt__sb_puts(b, "### Megatron-LM flags\n\n");
    mt__sb_flags(&body, m);
    sb_mdfence(b, "sh", body.s ? body.s : "");
    body.n = 0;
    mt__sb_puts(b, "### Environment\n\n");
    mt__sb_env(&body, m);
    sb_mdfence(b, "sh", body.s ? body.s : "");
    mt__sb_puts(b, "### Megatron-Bridge overrides\n\n");
    md_lines(b, &body, "", &m->bridge_overrides, "(none)\n");
    mt__sb_puts(b, "### Command diff against the baseline\n\n");
    md_lines(b, &body, "diff", &m->command_diff, "(no difference)\n");
    if (body.oom)
        b->oom = 1;
    mt__sb_clear(&body);
}

static void md_recipe(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "## Recipe\n\nLabel: **");
    mt__sb_md(b, m->label);
    mt__sb_puts(b, "**: ");
    mt__sb_label_why(b, m->label, &m->reasons, mt__sb_md);
    mt__sb_puts(b, ".\n\n");
    mt__recipe_changes(b, &mt__md_markup, m);
    md_commands(b, m);
}

static void md_meshes(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "## Parallel folding meshes\n\n- Attention (TP x CP x DP x PP): ");
    sb_mdcode(b, m->mesh_attention);
    mt__sb_puts(b, "\n- MoE (ETP x EP x EDP x PP): ");
    sb_mdcode(b, m->mesh_moe);
    mt__sb_puts(b, "\n\n");
}

/* One decision's row of the decisions table. */
static void md_decision(mt__sb *b, const mt__decision *dc, size_t no)
{
    char aw[80];
    size_t j;
    mt__sb_printf(b, "| %zu | ", no);
    mt__sb_num(b, "%.0f", dc->index);
    mt__sb_puts(b, " | ");
    mt__sb_md(b, dc->phase);
    mt__sb_puts(b, " | ");
    sb_mdcode(b, dc->variable);
    mt__arm_words(dc, aw, sizeof aw);
    if (aw[0]) {
        mt__sb_puts(b, " (");
        mt__sb_md(b, aw);
        mt__sb_puts(b, ")");
    }
    mt__sb_puts(b, " | ");
    mt__sb_md(b, dc->wall ? dc->wall : "");
    mt__sb_puts(b, " | ");
    mt__change_cell(b, &mt__md_markup, &dc->change);
    mt__sb_puts(b, " | ");
    for (j = 0; j < dc->repairs.n; j++) {
        if (j)
            mt__sb_puts(b, "; ");
        mt__sb_md(b, dc->repairs.v[j]);
    }
    mt__sb_puts(b, " | ");
    mt__sb_md(b, dc->verdict);
    mt__sb_puts(b, " | ");
    mt__arm_median(b, &dc->control);
    mt__sb_puts(b, " | ");
    mt__arm_median(b, &dc->candidate);
    mt__sb_puts(b, " | ");
    mt__sb_pct(b, dc->gain);
    mt__sb_puts(b, " | ");
    mt__sb_ci(b, dc->has_ci, dc->ci);
    mt__sb_puts(b, " | ");
    mt__sb_p(b, dc->p);
    mt__sb_puts(b, " | ");
    for (j = 0; j < dc->evidence.n; j++) {
        if (j)
            mt__sb_puts(b, "; ");
        sb_mdcode(b, dc->evidence.key[j]);
        mt__sb_puts(b, " = ");
        mt__sb_md(b, dc->evidence.val[j]);
    }
    mt__sb_puts(b, " | ");
    mt__sb_md(b, dc->reason);
    mt__sb_puts(b, " |\n");
}

static void md_decisions(mt__sb *b, const mt__model *m)
{
    size_t i;
    mt__sb_puts(b, "## Decisions\n\n");
    if (!m->ndec) {
        mt__para_note(b, &mt__md_markup, MT__NO_DECISIONS);
        return;
    }
    mt__sb_puts(b, "| # | id | phase | variable | wall | change | repairs | verdict | "
                   "control median | candidate median | gain | CI | p | evidence | reason |\n"
                   "|---:|---:|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|---|\n");
    for (i = 0; i < m->ndec; i++)
        md_decision(b, &m->dec[i], i + 1);
    mt__decisions_note(b, &mt__md_markup);
    mt__sb_puts(b, "### Samples (step times, s)\n\n");
    for (i = 0; i < m->ndec; i++) {
        const mt__decision *dc = &m->dec[i];
        if (!mt__has_samples(dc))
            continue;
        mt__sb_printf(b, "- #%zu (id %.0f) ", i + 1, dc->index);
        sb_mdcode(b, dc->variable);
        mt__sb_puts(b, ": control ");
        mt__sb_samples(b, &dc->control.s);
        mt__sb_puts(b, "; candidate ");
        mt__sb_samples(b, &dc->candidate.s);
        mt__sb_puts(b, "\n");
    }
    mt__sb_puts(b, "\n");
}

static void md_throughput(mt__sb *b, const mt__model *m)
{
    size_t i;
    mt__sb_puts(b, "## Throughput over the tune\n\n");
    if (!m->ntl) {
        mt__para_note(b, &mt__md_markup, MT__NO_RUNS);
        return;
    }
    mt__sb_puts(b, "| run | phase | GPU hours | TFLOP/s per GPU | "
                   "incumbent, median of its runs so far |\n"
                   "|---:|---|---:|---:|---:|\n");
    for (i = 0; i < m->ntl; i++) {
        const mt__tpoint *t = &m->tl[i];
        mt__sb_puts(b, "| ");
        mt__sb_num(b, "%.0f", t->run);
        mt__sb_puts(b, " | ");
        mt__sb_md(b, t->phase);
        mt__sb_puts(b, " | ");
        mt__sb_num(b, "%.4g", t->gpu_hours);
        mt__sb_puts(b, " | ");
        if (isnan(t->tflops))
            mt__sb_puts(b, "failed");
        else
            mt__sb_num(b, "%.4g", t->tflops);
        mt__sb_puts(b, " | ");
        mt__sb_num(b, "%.4g", t->best);
        mt__sb_puts(b, " |\n");
    }
    mt__sb_puts(b, "\n");
}

/* Hundreds of GPUs: the hottest of each role (all in bundle.json). */
static void md_memory_roles(mt__sb *b, const mt__model *m, size_t maxg)
{
    size_t i, j;
    mt__sb_printf(b, "%zu GPUs: the hottest GPU of each role; every GPU's figure is in "
                     "bundle.json.\n\n",
                  maxg);
    for (i = 0; i < m->nmem; i++) {
        const mt__mem *e = &m->mem[i];
        mt__sb_puts(b, "| ");
        mt__sb_md(b, e->name);
        mt__sb_puts(b, ": role | GPU | peak | median GPU of its stage |\n|---|---:|---:|---:|\n");
        for (j = 0; j < e->nroles; j++) {
            mt__sb_puts(b, "| ");
            mt__sb_md(b, e->roles[j].role);
            mt__sb_printf(b, " | %.0f | %.2f | ", e->roles[j].rank, e->roles[j].peak);
            mt__sb_num(b, "%.2f", e->roles[j].median);
            mt__sb_puts(b, " |\n");
        }
        mt__sb_printf(b, "| capacity | | %.4g | |\n| limit (capacity - headroom) | | %.4g | |\n\n",
                      e->capacity, e->capacity - e->headroom);
    }
}

/* Every GPU's figure, a column per memory entry. */
static void md_memory_gpus(mt__sb *b, const mt__model *m, size_t maxg)
{
    size_t i, j;
    mt__sb_puts(b, "| GPU |");
    for (i = 0; i < m->nmem; i++) {
        mt__sb_puts(b, " ");
        mt__sb_md(b, m->mem[i].name);
        mt__sb_puts(b, " |");
    }
    mt__sb_puts(b, "\n|---:|");
    for (i = 0; i < m->nmem; i++)
        mt__sb_puts(b, "---:|");
    mt__sb_puts(b, "\n");
    for (j = 0; j < maxg; j++) {
        mt__sb_printf(b, "| %zu |", j);
        for (i = 0; i < m->nmem; i++) {
            mt__sb_puts(b, " ");
            if (j < m->mem[i].per_gpu.n)
                mt__sb_num(b, "%.2f", m->mem[i].per_gpu.v[j]);
            mt__sb_puts(b, " |");
        }
        mt__sb_puts(b, "\n");
    }
    mt__sb_puts(b, "| capacity |");
    for (i = 0; i < m->nmem; i++)
        mt__sb_printf(b, " %.4g |", m->mem[i].capacity);
    mt__sb_puts(b, "\n| limit (capacity - headroom) |");
    for (i = 0; i < m->nmem; i++)
        mt__sb_printf(b, " %.4g |", m->mem[i].capacity - m->mem[i].headroom);
    mt__sb_puts(b, "\n\n");
}

static void md_memory(mt__sb *b, const mt__model *m)
{
    size_t i, maxg = 0;
    mt__sb_puts(b, "## Per-GPU peak memory (GB)\n\n");
    for (i = 0; i < m->nmem; i++)
        if (m->mem[i].has_hot) {
            mt__sb_puts(b, "- ");
            mt__sb_md(b, m->mem[i].name);
            mt__sb_puts(b, ": hottest GPU: ");
            mt__sb_hottest(b, &m->mem[i], mt__sb_md);
            mt__sb_puts(b, "\n");
        }
    if (m->nmem && m->mem[0].has_hot)
        mt__sb_puts(b, "\n");
    for (i = 0; i < m->nmem; i++)
        if (m->mem[i].per_gpu.n > maxg)
            maxg = m->mem[i].per_gpu.n;
    if (m->nmem && maxg > MT__MEM_EVERY_GPU)
        md_memory_roles(b, m, maxg);
    else if (!m->nmem)
        mt__para_note(b, &mt__md_markup, MT__NO_MEMORY);
    else
        md_memory_gpus(b, m, maxg);
}

static void md_walls(mt__sb *b, const mt__model *m)
{
    const mt__wall *w[2] = {&m->before, &m->after};
    size_t i;
    int j;
    mt__sb_puts(b, "## Wall breakdown before and after\n\n");
    if (!m->before.present && !m->after.present) {
        mt__para_note(b, &mt__md_markup, MT__NO_PROFILE);
        return;
    }
    mt__sb_puts(b, MT__WALLS_NOTE "\n\n");
    mt__sb_puts(b, "| | before | after |\n|---|---:|---:|\n| dominant wall |");
    for (i = 0; i < 2; i++) {
        mt__sb_puts(b, " ");
        if (!w[i]->present)
            mt__sb_puts(b, "not profiled");
        else {
            mt__wall_words(b, &mt__md_markup, w[i]);
        }
        mt__sb_puts(b, " |");
    }
    mt__sb_puts(b, "\n| window |");
    for (i = 0; i < 2; i++) {
        mt__sb_puts(b, " ");
        if (w[i]->present)
            mt__sb_wall_window(b, w[i]);
        else
            mt__sb_puts(b, "n/a");
        mt__sb_puts(b, " |");
    }
    for (j = 0; j < MT__NSHARES; j++) {
        mt__sb_printf(b, "\n| %s |", mt__share_names[j]);
        for (i = 0; i < 2; i++) {
            mt__sb_puts(b, " ");
            mt__sb_num(b, "%.1f%%", w[i]->present ? w[i]->share[j] * 100 : NAN);
            mt__sb_puts(b, " |");
        }
    }
    mt__sb_puts(b, "\n\n" MT__SHARES_NOTE ".\n\n");
}

static void md_ablation(mt__sb *b, const mt__model *m)
{
    mt__sb_puts(b, "## Ablation (leave one out)\n\n");
    mt__ablation_table(b, &mt__md_markup, m);
}

static void md_validation(mt__sb *b, const mt__model *m)
{
    const mt__validation *v = &m->val;
    mt__sb_puts(b, "## Validation: baseline against winner\n\n");
    if (!v->present) {
        mt__sb_printf(b, "%s%s%s", mt__md_markup.note, MT__NO_VALIDATION, mt__md_markup.note_end);
        return;
    }
    if (!v->confirmed) {
        mt__sb_puts(b, "**Validation did not confirm the winner.** Recommendation: ");
        mt__sb_md(b, v->recommendation);
        mt__sb_puts(b, "\n\n");
    }
    mt__arm_rows(b, &mt__md_markup, &v->base, &v->win, 1);
    mt__validation_runs(b, &mt__md_markup, v);
    mt__validation_rows(b, &mt__md_markup, v);
    mt__sb_puts(b, "\nSamples (s): baseline ");
    mt__sb_samples(b, &v->base.s);
    mt__sb_puts(b, "; winner ");
    mt__sb_samples(b, &v->win.s);
    mt__sb_puts(b, "\n");
    mt__natural_section(b, &mt__md_markup, &v->nat);
}

void mt__report_md(mt__sb *b, const mt__model *m)
{
    md_header(b, m);
    md_summary(b, m);
    md_recipe(b, m);
    md_meshes(b, m);
    md_decisions(b, m);
    md_throughput(b, m);
    md_memory(b, m);
    md_walls(b, m);
    md_ablation(b, m);
    md_validation(b, m);
}
