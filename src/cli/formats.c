/* SPDX-License-Identifier: MIT */
/* `libreyolo formats`: the export formats of this build and, for a model
 * family and task, whether each is validated, available or blocked, and why
 * (LibreYOLO's formats command over its support matrix). */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/export.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

void ly_cli_usage_formats(FILE *to)
{
    fputs("usage: libreyolo formats [--family F] [--task T] [--json] [--quiet]\n"
          "\n"
          "Lists the export formats (extension, FP16, INT8). With a model family it also\n"
          "says, for the task (default: the family's), whether each format is validated,\n"
          "available or blocked, and why.\n"
          "  --family F       model family (--model is an alias)\n"
          "  --task T         task (detect, segment, ...)\n"
          "  --json           {\"formats\": [...], \"family\": ..., \"task\": ...}\n"
          "  --quiet          format names only\n"
          "Families:",
          to);
    const char *const *families;
    size_t n = 0;
    if (ly_export_families(&families, &n) != LY_OK) n = 0;
    for (size_t i = 0; i < n; i++)
        fprintf(to, "%s %s", i ? "," : "", families[i]);
    fputc('\n', to);
}

int ly_cli_formats(int argc, char **argv)
{
    const char *cmd = "formats";
    const char *family = NULL, *task = NULL;
    bool json = false, quiet = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_formats(stdout);
            return 0;
        }
        if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            quiet = true;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--family", &missing)) ||
                   (v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            family = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--task", &missing))) {
            task = v;
        } else if (missing) {
            return ly_cli_usage_error(cmd, "missing the value of %s", arg);
        } else {
            return ly_cli_unknown_argument(cmd, arg);
        }
    }
    const char *canonical = NULL;
    if (task) {
        if (ly_export_task(task, &canonical) != LY_OK)
            return ly_cli_usage_error(cmd, "'%s' is not a canonical LibreYOLO task.", task);
    }
    if (family) {
        const char *const *tasks;
        size_t n_tasks;
        if (ly_export_family_tasks(family, &tasks, &n_tasks) != LY_OK)
            return ly_cli_usage_error(cmd, "Unknown model family: '%s'", family);
        if (!canonical) canonical = tasks[0];
        bool ok = false;
        for (size_t i = 0; i < n_tasks; i++)
            if (strcmp(tasks[i], canonical) == 0) ok = true;
        if (!ok)
            return ly_cli_usage_error(cmd, "'%s' does not support task '%s'.", family, canonical);
    }
    const ly_export_format_info *formats;
    size_t n;
    ly_export_formats(&formats, &n);
    if (json)
        fputs("{\"formats\":[", stdout);
    else if (!quiet)
        fputs("Supported export formats:\n\n", stdout);
    for (size_t i = 0; i < n; i++) {
        const ly_export_format_info *f = &formats[i];
        ly_export_tier tier = LY_EXPORT_AVAILABLE;
        const char *reason = NULL, *constraint = NULL;
        if (family &&
            ly_export_support(family, canonical, f->name, &tier, &reason, &constraint) != LY_OK) {
            fprintf(stderr, "libreyolo formats: %s\n", ly_last_error());
            return 1;
        }
        if (json) {
            if (i) fputc(',', stdout);
            fputs("{\"name\":", stdout);
            ly_json_string(stdout, f->name);
            fputs(",\"extension\":", stdout);
            ly_json_string(stdout, f->extension);
            printf(",\"int8\":%s,\"fp16\":%s,\"dynamic\":%s,\"requires_onnx\":%s",
                   f->int8 ? "true" : "false", f->fp16 ? "true" : "false",
                   f->dynamic ? "true" : "false", f->requires_onnx ? "true" : "false");
            if (f->aliases[0]) {
                fputs(",\"aliases\":[", stdout);
                for (size_t k = 0; f->aliases[k]; k++) {
                    if (k) fputc(',', stdout);
                    ly_json_string(stdout, f->aliases[k]);
                }
                fputc(']', stdout);
            }
            if (family) {
                fputs(",\"tier\":", stdout);
                ly_json_string(stdout, ly_export_tier_name(tier));
                fputs(",\"reason\":", stdout);
                ly_json_string(stdout, reason);
                fputs(",\"constraint\":", stdout);
                ly_json_string(stdout, constraint);
            }
            fputs(",\"checked_on\":", stdout);
            ly_json_string(stdout, f->checked_on);
            fputc('}', stdout);
        } else if (quiet) {
            printf("%s\n", f->name);
        } else {
            printf("  %s", f->name);
            if (f->aliases[0]) {
                fputs(" (alias: ", stdout);
                for (size_t k = 0; f->aliases[k]; k++)
                    printf("%s%s", k ? ", " : "", f->aliases[k]);
                fputc(')', stdout);
            }
            printf("\n    Extension: %s, FP16: %s, INT8: %s\n", f->extension,
                   f->fp16 ? "True" : "False", f->int8 ? "True" : "False");
            if (family) {
                printf("    Tier: %s (%s)\n", ly_export_tier_name(tier), reason);
                if (constraint) printf("    Constraint: %s\n", constraint);
                if (f->checked_on) printf("    Checked on: %s\n", f->checked_on);
            }
        }
    }
    if (json) {
        fputs("],\"family\":", stdout);
        ly_json_string(stdout, family);
        fputs(",\"task\":", stdout);
        ly_json_string(stdout, family ? canonical : task ? canonical : NULL);
        fputs("}\n", stdout);
    }
    return 0;
}
