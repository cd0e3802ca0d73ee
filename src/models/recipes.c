/* SPDX-License-Identifier: MIT */
/* Every recipe this build has (recipe.h): the one list a new family joins. */
#include "models/recipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern const ly_recipe ly_nanodet_recipe, ly_yolo9_recipe, ly_deimv2_recipe, ly_deim_recipe,
    ly_rtdetrv4_recipe, ly_dfine_recipe, ly_vit_recipe, ly_deit_recipe;

/* Own formats first (a TF.js graph is no checkpoint); checkpoints by family.
 * D-FINE last: DEIM and RT-DETRv4 have its keys, and only a file name hint
 * claims them before it. */
const ly_recipe *const ly_recipes[] = {&ly_nanodet_recipe, &ly_yolo9_recipe,    &ly_deimv2_recipe,
                                       &ly_deim_recipe,    &ly_rtdetrv4_recipe, &ly_dfine_recipe,
                                       &ly_vit_recipe,     &ly_deit_recipe};
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
