/* SPDX-License-Identifier: MIT */
/*
 * The export support matrix (executorch.md A6, LibreYOLO's export/support.py)
 * restricted to the families this library runs. Resolution follows upstream's
 * order: unknown task or format, explicit (family, task, format) rows, family
 * and task blocks, then the default for the format.
 */
#include "export/export_internal.h"

#include "core/core.h"

#include <string.h>
#include <strings.h>

#define ET_CONSTRAINT "ExecuTorch 1.2, XNNPACK, CPU, FP32, batch 1, fixed input shape"

static const char *const no_aliases[] = {NULL};

#define DETR_REASON                                                                                \
    "The deformable attention is a portable call of the custom operator "                          \
    "libreyolo::ms_deform_attn.out between XNNPACK partitions (schema in docs/attention.md); "     \
    "libreyolo's runtime runs these programs, no ExecuTorch kernel for the operator ships yet "    \
    "(LibreYOLO blocks dfine, deim and deimv2 export)."
#define DETR_CONSTRAINT ET_CONSTRAINT "; runs in libreyolo's runtime only"

/* Kept true by hand: what README.md says under ExecuTorch export. */
#define ET_CHECKED_ON                                                                              \
    "libreyolo's runtime (every test); ExecuTorch 1.2.0 and 1.4.1 built from source with "         \
    "XNNPACK, file and mmap data loaders: YOLO9t within 1.4e-7 of max|out|, NanoDet-g "            \
    "bit-identical (2026-12-01); ViT-Ti (classify) in 1.4.1: logits within 6.1e-6 of LibreYOLO's " \
    "max|ref|, the same top-5 (2026-12-02)"

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

/* Families this library runs. YOLO9 lists segment as LibreYOLO's registry does
 * (its segmentation export is blocked with a reason), so `formats` can say why. */
static const char *const yolo9_tasks[] = {"detect", "segment", NULL};
static const char *const detect_only[] = {"detect", NULL};
static const char *const classify_only[] = {"classify", NULL};
static const char *const family_names[] = {"deim",    "deimv2",   "deit", "dfine",
                                           "nanodet", "rtdetrv4", "vit",  "yolo9"};

static const struct {
    const char *name;
    const char *const *tasks;
} families[] = {{"deim", detect_only},     {"deimv2", detect_only}, {"dfine", detect_only},
                {"rtdetrv4", detect_only}, {"vit", classify_only},  {"deit", classify_only},
                {"nanodet", detect_only},  {"yolo9", yolo9_tasks}};

typedef struct support_row {
    const char *family, *task, *format;
    ly_export_tier tier;
    const char *reason, *constraint;
} support_row;

static const support_row rows[] = {
    {"yolo9", "detect", "executorch", LY_EXPORT_VALIDATED,
     "Runtime and raw-output parity are covered in tests/e2e/test_executorch.py; "
     "trained-checkpoint "
     "detection parity is covered by its external-data flagship test.",
     ET_CONSTRAINT},
    /* LibreYOLO blocks dfine, deim and deimv2 (executorch.md L-SUPPORT: strict
     * capture trips on the deformable attention; DEIM's and DEIMv2's programs
     * fail at run time) and validates rtdetrv4 through manual grid sampling.
     * Here the deformable attention is one portable call of a custom operator,
     * which only libreyolo's runtime has a kernel for. */
    {"dfine", "detect", "executorch", LY_EXPORT_AVAILABLE, DETR_REASON, DETR_CONSTRAINT},
    {"deim", "detect", "executorch", LY_EXPORT_AVAILABLE, DETR_REASON, DETR_CONSTRAINT},
    {"deimv2", "detect", "executorch", LY_EXPORT_AVAILABLE, DETR_REASON, DETR_CONSTRAINT},
    {"rtdetrv4", "detect", "executorch", LY_EXPORT_AVAILABLE, DETR_REASON, DETR_CONSTRAINT},
    {"yolo9", "segment", NULL, LY_EXPORT_BLOCKED,
     "YOLO9 segmentation export is not supported; YOLO9 is detection-only in LibreYOLO.", NULL},
};

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
    *out = family_names;
    *count = sizeof family_names / sizeof family_names[0];
    return LY_OK;
}

ly_status ly_export_family_tasks(const char *family, const char *const **tasks, size_t *count)
{
    if (!family || !tasks || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_family_tasks: NULL argument");
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcasecmp(families[i].name, family) == 0) {
            size_t n = 0;
            while (families[i].tasks[n])
                n++;
            *tasks = families[i].tasks;
            *count = n;
            return LY_OK;
        }
    return ly_set_error(LY_E_NOT_FOUND, "Unknown model family: '%s'", family);
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
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const support_row *r = &rows[i];
        if (strcasecmp(r->family, family) != 0 || strcmp(r->task, canonical) != 0) continue;
        if (r->format && strcmp(r->format, f->name) != 0) continue;
        *tier = r->tier;
        *reason = r->reason;
        if (constraint) *constraint = r->constraint;
        return LY_OK;
    }
    *tier = LY_EXPORT_AVAILABLE;
    *reason = "Conversion is implemented; numeric runtime parity has not been recorded for this "
              "combination.";
    if (constraint && strcmp(f->name, "executorch") == 0) *constraint = ET_CONSTRAINT;
    return LY_OK;
}
