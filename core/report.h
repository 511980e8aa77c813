/*
 * report.h - the evidence bundle's human views: REPORT.md and a
 * self-contained report.html (inline SVG plots, no network), rendered from
 * bundle.json.  (Being written.)
 */
#ifndef MT_REPORT_H
#define MT_REPORT_H

#include "diag.h"

/* Reads DIR/bundle.json and writes DIR/REPORT.md and DIR/report.html.
 * 0, or a negative error with an entry in d naming the file and field. */
int mt_report_write(const char *dir, mt_diag *d);

#endif
