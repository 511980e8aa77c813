#include "spell.h"

#include <string.h>

size_t mt_spell_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i, j;
    size_t row[256];
    if (la > 255 || lb > 255)
        return 255;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

const char *mt_spell_closest(const char *word, const char *const *cands, size_t n)
{
    size_t i, best = (size_t)-1, limit = strlen(word) / 3;
    const char *pick = NULL;
    if (limit < 2)
        limit = 2;
    for (i = 0; i < n; i++) {
        size_t d;
        if (!cands[i])
            continue;
        d = mt_spell_distance(word, cands[i]);
        if (d < best) {
            best = d;
            pick = cands[i];
        }
    }
    return best <= limit ? pick : NULL;
}
