#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct mt_diag {
    mt_diag_item *items;
    size_t n, cap;
};

mt_diag *mt_diag_new(void) { return calloc(1, sizeof(mt_diag)); }

void mt_diag_clear(mt_diag *d)
{
    size_t i;
    for (i = 0; d && i < d->n; i++) {
        free(d->items[i].file);
        free(d->items[i].field);
        free(d->items[i].message);
    }
    if (d)
        d->n = 0;
}

void mt_diag_destroy(mt_diag **dp)
{
    if (!dp || !*dp)
        return;
    mt_diag_clear(*dp);
    free((*dp)->items);
    free(*dp);
    *dp = NULL;
}

void mt_diag_add(mt_diag *d, const char *file, int line, const char *field,
                 const char *fmt, ...)
{
    mt_diag_item *it;
    va_list ap;
    int n;
    if (!d)
        return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        mt_diag_item *ni = realloc(d->items, cap * sizeof *ni);
        if (!ni)
            return;
        d->items = ni;
        d->cap = cap;
    }
    it = &d->items[d->n];
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    it->message = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (!it->message)
        return;
    va_start(ap, fmt);
    vsnprintf(it->message, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    va_end(ap);
    it->file = file ? strdup(file) : NULL;
    it->field = field ? strdup(field) : NULL;
    it->line = line;
    d->n++;
}

size_t mt_diag_count(const mt_diag *d) { return d ? d->n : 0; }

const mt_diag_item *mt_diag_at(const mt_diag *d, size_t i)
{
    return d && i < d->n ? &d->items[i] : NULL;
}

int mt_diag_contains(const mt_diag *d, const char *needle)
{
    size_t i;
    for (i = 0; d && i < d->n; i++)
        if (strstr(d->items[i].message, needle) ||
            (d->items[i].field && strstr(d->items[i].field, needle)))
            return 1;
    return 0;
}

void mt_diag_print(const mt_diag *d, FILE *out)
{
    size_t i;
    for (i = 0; d && i < d->n; i++) {
        const mt_diag_item *it = &d->items[i];
        if (it->file)
            fprintf(out, "%s:", it->file);
        if (it->line > 0)
            fprintf(out, "%d:", it->line);
        if (it->file || it->line > 0)
            fputc(' ', out);
        if (it->field)
            fprintf(out, "%s: ", it->field);
        fprintf(out, "%s\n", it->message);
    }
}
