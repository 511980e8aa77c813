/*
 * diag.h - a list of user-facing problems, each naming where and what.
 *
 * Every loader and checker appends here instead of printing, so a command can
 * list every problem at once and tests can assert on them.
 */
#ifndef MT_DIAG_H
#define MT_DIAG_H

#include <stddef.h>
#include <stdio.h>

typedef struct mt_diag_item {
    char *file;  /* may be NULL */
    int line;    /* 0 when unknown */
    char *field; /* dotted path ("base.tensor_model_parallel_size") or NULL */
    char *message;
} mt_diag_item;

typedef struct mt_diag mt_diag;

/* Caller owns the return value; free with mt_diag_destroy. */
mt_diag *mt_diag_new(void);
void mt_diag_destroy(mt_diag **d);

/* Appends one problem; file/field may be NULL, line 0.  In the message and
 * the field, control bytes, bytes that are not UTF-8 and invisible code
 * points (zero-width and odd spaces, bidi controls, BOM) are escaped as
 * \x1b, \xff, \u200b, so a value that looks right but is not shows why. */
void mt_diag_add(mt_diag *d, const char *file, int line, const char *field,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
size_t mt_diag_count(const mt_diag *d);
/* Borrowed; valid until the next add or destroy. */
const mt_diag_item *mt_diag_at(const mt_diag *d, size_t i);
/* True when some message contains needle. */
int mt_diag_contains(const mt_diag *d, const char *needle);
/* One line per problem: "file:line: field: message". */
void mt_diag_print(const mt_diag *d, FILE *out);
void mt_diag_clear(mt_diag *d);

#endif
