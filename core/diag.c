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

/* A code point that prints as nothing, or as a space that is not one: a
 * zero-width space in "alltoall\u200b" would make "does not take
 * "alltoall"" read as nonsense. */
static int invisible(unsigned long c)
{
    return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x34f || c == 0x61c || c == 0x115f ||
           c == 0x1160 || c == 0x17b4 || c == 0x17b5 || (c >= 0x180b && c <= 0x180e) ||
           (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
           (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0x3164 ||
           (c >= 0xfe00 && c <= 0xfe0f) || c == 0xfeff || c == 0xffa0 ||
           (c >= 0xfff0 && c <= 0xfffb) || (c >= 0xe0000 && c <= 0xe0fff);
}

/* s with control bytes, bytes that are not UTF-8 and invisible code points
 * escaped (\x1b, \xff, \u200b); newlines and tabs kept.  Caller frees;
 * NULL on OOM. */
static char *escape_odd(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), o = 0;
    char *out = malloc(n * 10 + 1);
    if (!out)
        return NULL;
    while (*p) {
        unsigned long c = *p;
        size_t len = 1, k;
        if (c >= 0x80) {
            len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            c = len == 4 ? c & 7 : len == 3 ? c & 15 : c & 31;
            for (k = 1; k < len; k++) {
                if ((p[k] & 0xc0) != 0x80) {
                    len = 0;
                    break;
                }
                c = c << 6 | (p[k] & 0x3f);
            }
            if (len && ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
                        (c >= 0xd800 && c <= 0xdfff)))
                len = 0; /* overlong or a surrogate: not UTF-8 */
            if (!len) {
                o += (size_t)sprintf(out + o, "\\x%02x", *p++);
                continue;
            }
            if (invisible(c))
                o += (size_t)sprintf(out + o, c > 0xffff ? "\\U%08lx" : "\\u%04lx", c);
            else
                memcpy(out + o, p, len), o += len;
            p += len;
            continue;
        }
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
            o += (size_t)sprintf(out + o, "\\x%02x", (unsigned)c);
        else
            out[o++] = (char)c;
        p++;
    }
    out[o] = '\0';
    return out;
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
    {
        /* what the user typed, shown as it is: invisible characters escaped */
        char *esc = escape_odd(it->message);
        if (esc) {
            free(it->message);
            it->message = esc;
        }
    }
    it->file = file ? strdup(file) : NULL;
    it->field = field ? escape_odd(field) : NULL;
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
