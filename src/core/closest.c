/* SPDX-License-Identifier: MIT */
/* "Did you mean": the closest of some names (libreyolo.h, ly_closest_word), for
 * the library's own messages (a mistyped model name) and the command's. */
#include "libreyolo/libreyolo.h"

#include <string.h>

/* Matching characters as difflib.SequenceMatcher counts them: the longest
 * common block, then the same on each side of it. */
static size_t matches(const char *a, size_t na, const char *b, size_t nb)
{
    size_t best = 0, ai = 0, bi = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++) {
            size_t k = 0;
            while (i + k < na && j + k < nb && a[i + k] == b[j + k])
                k++;
            if (k > best) best = k, ai = i, bi = j;
        }
    if (best == 0) return 0;
    return best + matches(a, ai, b, bi) +
           matches(a + ai + best, na - ai - best, b + bi + best, nb - bi - best);
}

const char *ly_closest_word(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    double best_ratio = 0.6;
    if (!word || !candidates) return NULL;
    size_t nw = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i]) continue;
        size_t nc = strlen(candidates[i]);
        if (nw + nc == 0) continue;
        double ratio = 2.0 * (double)matches(word, nw, candidates[i], nc) / (double)(nw + nc);
        if (ratio >= best_ratio && (!best || ratio > best_ratio))
            best = candidates[i], best_ratio = ratio;
    }
    return best;
}
