/*
 * report.h - the evidence bundle's human views: REPORT.md and a
 * self-contained report.html (inline CSS and SVG plots, no network), rendered
 * from bundle.json alone (schema: search/BUNDLE.md).
 *
 * report.html has one element per section, with ids summary, recipe, meshes,
 * decisions, distributions, throughput, memory, walls, ablation, validation,
 * and every plot is an <svg class="plot" data-plot="NAME">: ab-INDEX (each
 * A/B's step times), throughput, memory-NAME (per memory entry), walls,
 * validation.  An inline script sets <body data-check="ok"> once every
 * section and plot is there ("missing:..." otherwise).
 */
#ifndef MT_REPORT_H
#define MT_REPORT_H

#include "diag.h"

/* Reads DIR/bundle.json and writes DIR/REPORT.md and DIR/report.html, each
 * through a temporary file renamed into place.  0, or a negative errno with
 * entries in d naming DIR/bundle.json and the JSON path of every problem
 * ("decisions[3].control.samples"; at most 40, then a count): -EINVAL for a
 * bundle that is not JSON, not schema 1, or has a missing or mistyped field
 * (nothing is written then), -ENOENT and the like when a file cannot be read
 * or written. */
int mt_report_write(const char *dir, mt_diag *d);

#endif
