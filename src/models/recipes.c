/* SPDX-License-Identifier: MIT */
/* Every recipe this build has (recipe.h): the one list a new family joins. */
#include "models/recipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One line per family: its recipe is ly_<family>_recipe (<family>/recipe.c).
 * The order is the one loading asks them in: own formats first (a TF.js graph
 * is no checkpoint), then checkpoints by family; D-FINE last, since DEIM and
 * RT-DETRv4 have its keys and only a file name hint claims them before it. */
#define RECIPES(X)                                                                                 \
    X(nanodet)                                                                                     \
    X(yolo9)                                                                                       \
    X(rtdetr)                                                                                      \
    X(rtdetrv2)                                                                                    \
    X(rfdetr)                                                                                      \
    X(deimv2)                                                                                      \
    X(deim)                                                                                        \
    X(rtdetrv4)                                                                                    \
    X(dfine)                                                                                       \
    X(vit)                                                                                         \
    X(deit)                                                                                        \
    X(swin)                                                                                        \
    X(swinir)                                                                                      \
    /* end of the list: a new family is one X line above, where loading should ask it */

#define DECLARE(family) extern const ly_recipe ly_##family##_recipe;
#define ENTRY(family) &ly_##family##_recipe,
RECIPES(DECLARE)
const ly_recipe *const ly_recipes[] = {RECIPES(ENTRY)};
const int ly_recipe_count = (int)(sizeof ly_recipes / sizeof ly_recipes[0]);

const ly_recipe *ly_recipe_find(const char *family)
{
    for (int i = 0; family && i < ly_recipe_count; i++)
        if (strcmp(ly_recipes[i]->family, family) == 0) return ly_recipes[i];
    return NULL;
}

static const char *families[sizeof ly_recipes / sizeof ly_recipes[0]];
static pthread_once_t families_once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void sort_families(void)
{
    for (int i = 0; i < ly_recipe_count; i++)
        families[i] = ly_recipes[i]->family;
    qsort(families, (size_t)ly_recipe_count, sizeof families[0], by_name);
}

const char *const *ly_recipe_families(size_t *count)
{
    pthread_once(&families_once, sort_families);
    *count = (size_t)ly_recipe_count;
    return families;
}
