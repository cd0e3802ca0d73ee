/* SPDX-License-Identifier: MIT */
/*
 * The export support matrix (executorch.md A6, LibreYOLO's export/support.py)
 * over the families this library runs: their tasks and rows are the recipes'
 * (recipe.h). Resolution follows upstream's order: unknown task or format,
 * the family's explicit (task, format) rows, then the default for the format.
 */
#include "models/export_support.h"

#include "core/core.h"
#include "models/recipe.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const no_aliases[] = {NULL};

/* Kept true by hand: what README.md says under ExecuTorch export. */
#define ET_CHECKED_ON                                                                              \
    "libreyolo's runtime (every test); ExecuTorch 1.2.0 and 1.4.1 built from source with "         \
    "XNNPACK, file and mmap data loaders: against our runtime's XNNPACK operators YOLO9t within "  \
    "1.4e-7 of max|out| and NanoDet-g bit-identical in 1.4.1, within 3.8e-4 and 1.5e-6 in 1.2.0; " \
    "against our default (the checkpoint's numbers) in 1.4.1 YOLO9t within 1.3e-3, NanoDet-g "     \
    "within 2.4e-6 (2026-12-06); ViT-Ti (classify) in 1.4.1: logits within 6.1e-6 of LibreYOLO's " \
    "max|ref|, the same top-5 (2026-12-02); the DETR families: their rows"

static const ly_export_format_info formats[] = {
    {"executorch", ".pte", false, false, false, false, no_aliases, ET_CHECKED_ON},
};

/* LibreYOLO's canonical tasks (libreyolo/tasks.py). */
static const char *const canonical_tasks[] = {
    "detect", "segment",  "pose",     "obb",    "classify", "embed",   "restore",
    "point",  "semantic", "depth",    "normal", "gaze",     "edge",    "matte",
    "ocr",    "mesh",     "panoptic", "albedo", "act",      "detect3d"};

/* Task spellings LibreYOLO normalises. */
static const struct {
    const char *alias, *task;
} task_aliases[] = {
    {"detection", "detect"},        {"det", "detect"},
    {"segmentation", "segment"},    {"seg", "segment"},
    {"classification", "classify"}, {"cls", "classify"},
    {"keypoints", "pose"},          {"embedding", "embed"},
};

/* The recipe of `family`, spelled in any case, or NULL. */
static const ly_recipe *recipe_named(const char *family)
{
    for (int i = 0; i < ly_recipe_count; i++)
        if (strcasecmp(ly_recipes[i]->family, family) == 0) return ly_recipes[i];
    return NULL;
}

const char *ly_export_tier_name(ly_export_tier tier)
{
    switch (tier) {
    case LY_EXPORT_VALIDATED:
        return "validated";
    case LY_EXPORT_AVAILABLE:
        return "available";
    case LY_EXPORT_BLOCKED:
        return "blocked";
    }
    return "?";
}

ly_status ly_export_formats(const ly_export_format_info **out, size_t *count)
{
    if (!out || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_formats: NULL argument");
    *out = formats;
    *count = sizeof formats / sizeof formats[0];
    return LY_OK;
}

ly_status ly_export_families(const char *const **out, size_t *count)
{
    if (!out || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_families: NULL argument");
    *out = ly_recipe_families(count);
    return LY_OK;
}

ly_status ly_export_family_tasks(const char *family, const char *const **tasks, size_t *count)
{
    if (!family || !tasks || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_family_tasks: NULL argument");
    const ly_recipe *r = recipe_named(family);
    if (!r) return ly_set_error(LY_E_NOT_FOUND, "Unknown model family: '%s'", family);
    if (!r->tasks) { /* the one task it runs */
        *tasks = &r->task;
        *count = 1;
        return LY_OK;
    }
    size_t n = 0;
    while (r->tasks[n])
        n++;
    *tasks = r->tasks;
    *count = n;
    return LY_OK;
}

ly_status ly_export_task(const char *spelling, const char **canonical)
{
    if (!canonical) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_task: NULL argument");
    *canonical = spelling ? ly_export_canonical_task(spelling) : NULL;
    if (!*canonical)
        return ly_set_error(LY_E_NOT_FOUND, "'%s' is not a canonical LibreYOLO task.",
                            spelling ? spelling : "(null)");
    return LY_OK;
}

const char *ly_export_canonical_task(const char *task)
{
    if (!task) return NULL;
    for (size_t i = 0; i < sizeof canonical_tasks / sizeof canonical_tasks[0]; i++)
        if (strcasecmp(canonical_tasks[i], task) == 0) return canonical_tasks[i];
    for (size_t i = 0; i < sizeof task_aliases / sizeof task_aliases[0]; i++)
        if (strcasecmp(task_aliases[i].alias, task) == 0) return task_aliases[i].task;
    return NULL;
}

const ly_export_format_info *ly_export_find_format(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcasecmp(formats[i].name, name) == 0) return &formats[i];
        for (const char *const *a = formats[i].aliases; *a; a++)
            if (strcasecmp(*a, name) == 0) return &formats[i];
    }
    return NULL;
}

ly_status ly_export_support(const char *family, const char *task, const char *format,
                            ly_export_tier *tier, const char **reason, const char **constraint)
{
    if (!family || !task || !format || !tier || !reason)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_support: NULL argument");
    if (constraint) *constraint = NULL;
    *tier = LY_EXPORT_BLOCKED;
    const char *canonical = ly_export_canonical_task(task);
    if (!canonical) {
        /* Static storage for the message, as the other reasons are static. */
        static _Thread_local char text[160];
        snprintf(text, sizeof text, "'%.100s' is not a canonical LibreYOLO task.", task);
        *reason = text;
        return LY_OK;
    }
    const ly_export_format_info *f = ly_export_find_format(format);
    if (!f) {
        static _Thread_local char text[160];
        snprintf(text, sizeof text, "'%.100s' is not a registered export format.", format);
        *reason = text;
        return LY_OK;
    }
    const ly_recipe *r = recipe_named(family);
    for (const ly_export_rule *row = r ? r->export_rules : NULL; row && row->task; row++) {
        if (strcmp(row->task, canonical) != 0) continue;
        if (row->format && strcmp(row->format, f->name) != 0) continue;
        *tier = row->tier;
        *reason = row->reason;
        if (constraint) *constraint = row->constraint;
        return LY_OK;
    }
    *tier = LY_EXPORT_AVAILABLE;
    *reason = "Conversion is implemented; numeric runtime parity has not been recorded for this "
              "combination.";
    if (constraint && strcmp(f->name, "executorch") == 0) *constraint = LY_EXPORT_ET_CONSTRAINT;
    return LY_OK;
}
