/* SPDX-License-Identifier: MIT */
/* Model names, as LibreYOLO's CLI resolves them (cli/config.py and the
 * weights lookup of models/__init__.py): "<family>-<size>" is the file
 * "<prefix><size>.pt", found in the current folder or weights/ (and here also
 * the cache's weights/), and otherwise downloaded from LibreYOLO's Hugging
 * Face repository, which this library names instead of fetching. */
#include "core/core.h"
#include "libreyolo/fetch.h"
#include "models/recipe.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define HF_URL "https://huggingface.co/LibreYOLO/%s/resolve/main/%s.pt"

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The weights stem ("LibreYOLO9t") that `name` spells, or false. */
static bool stem_of(const char *name, char *stem, size_t size)
{
    size_t n = strlen(name);
    if (n > 3 && strcasecmp(name + n - 3, ".pt") == 0) n -= 3;
    for (int r = 0; r < ly_recipe_count; r++) {
        const ly_recipe *rc = ly_recipes[r];
        if (!rc->file_prefix || !rc->published_sizes) continue;
        size_t nf = strlen(rc->family), np = strlen(rc->file_prefix);
        for (const char *const *s = rc->published_sizes; *s; s++) {
            size_t ns = strlen(*s);
            bool by_family = n == nf + 1 + ns && strncasecmp(name, rc->family, nf) == 0 &&
                             name[nf] == '-' && strncasecmp(name + nf + 1, *s, ns) == 0;
            bool by_file = n == np + ns && strncasecmp(name, rc->file_prefix, np) == 0 &&
                           strncasecmp(name + np, *s, ns) == 0;
            if (by_family || by_file) {
                snprintf(stem, size, "%s%s", rc->file_prefix, *s);
                return true;
            }
        }
    }
    return false;
}

ly_status ly_model_name_resolve(const char *name, char *out, size_t size)
{
    char stem[64];
    if (!name || strchr(name, '/') || is_file(name) || !stem_of(name, stem, sizeof stem))
        return LY_E_DECLINED;
    char cache[4096] = "";
    if (ly_cache_dir(cache, sizeof cache) != LY_OK) cache[0] = '\0';
    ly_clear_error();
    char places[3][4200];
    snprintf(places[0], sizeof places[0], "%s.pt", stem);
    snprintf(places[1], sizeof places[1], "weights/%s.pt", stem);
    snprintf(places[2], sizeof places[2], "%s/weights/%s.pt", cache, stem);
    for (int i = 0; i < (*cache ? 3 : 2); i++)
        if (is_file(places[i])) {
            if ((size_t)snprintf(out, size, "%s", places[i]) >= size)
                return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: %s: path too long",
                                    places[i]);
            return LY_OK;
        }
    char url[256];
    snprintf(url, sizeof url, HF_URL, stem, stem);
    return ly_set_error(LY_E_NOT_FOUND,
                        "ly_model_load: model '%s' is the file %s.pt, which is not in the current "
                        "folder, weights/%s%s%s; LibreYOLO downloads it from %s: put it in one of "
                        "those folders",
                        name, stem, *cache ? " or " : "", cache, *cache ? "/weights/" : "", url);
}

void ly_model_names_known(char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (int r = 0; r < ly_recipe_count; r++) {
        const ly_recipe *rc = ly_recipes[r];
        if (rc->load_path && !rc->published_sizes)
            len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", len ? ", " : "",
                                    rc->family);
        for (const char *const *s = rc->published_sizes; s && *s; s++)
            len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s-%s",
                                    len ? ", " : "", rc->family, *s);
    }
}
