/*
 * trace_open.c - mt_trace_open (core/trace.h): tells a trace file's format
 * from its first bytes and hands it to its reader, trace_nsys.c for an
 * Nsight Systems SQLite export, trace.c for Chrome/Kineto JSON (plain or
 * gzip).  It sits above both readers, so neither calls the other.
 */
#include "trace.h"
#include "trace_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

mt_trace *mt_trace_open(const char *path, mt_diag *d)
{
    unsigned char magic[16] = {0};
    size_t got;
    FILE *f = fopen(path, "rb");
    if (!f) {
        mt_diag_add(d, path, 0, NULL, "cannot open the trace: %s", strerror(errno));
        return NULL;
    }
    got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (got == sizeof magic && !memcmp(magic, "SQLite format 3", 16))
        return mt__trace_nsys_open(path, d);
    return mt__trace_json_open(path, d);
}
