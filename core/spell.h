/*
 * spell.h - "did you mean" suggestions for unknown names.
 */
#ifndef MT_SPELL_H
#define MT_SPELL_H

#include <stddef.h>

/* Levenshtein distance, capped at 255 for long strings. */
size_t mt_spell_distance(const char *a, const char *b);
/* The closest of n candidates when close enough to be a plausible typo
 * (distance <= max(2, len/3)), else NULL.  Borrowed pointer into cands. */
const char *mt_spell_closest(const char *word, const char *const *cands, size_t n);

#endif
