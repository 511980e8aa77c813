/*
 * layout.h - Megatron's explicit pipeline layout (--pipeline-model-parallel-layout):
 * stages separated by '|', E embedding, t transformer layer, m MTP layer,
 * L loss, "(...)*k" repeats a group (one level), "x*k" repeats a symbol,
 * commas and spaces are cosmetic.  "Et|(tt|)*30mL" is 32 stages.
 *
 * One reader for the core's meshes and memory estimate and the sim's cost
 * model.  (The plugins and the sim's legality keep their own readers on
 * purpose: legality is checked independently on both sides.)
 */
#ifndef MT_LAYOUT_H
#define MT_LAYOUT_H

#include <stddef.h>

typedef struct mt_layout_stage {
    int t, m, e, l; /* transformer layers, MTP layers, embedding, loss */
} mt_layout_stage;

/* Parses text into at most max stages.  Returns the number of stages, or -1
 * when malformed (then *err_pos gets the 0-based offending position) or when
 * it expands past max stages. */
int mt_layout_parse(const char *text, mt_layout_stage *stages, int max, int *err_pos);

#endif
