/* SPDX-License-Identifier: MIT */
/*
 * Export: a loaded model written as an ExecuTorch program (.pte) with the
 * XNNPACK delegate, plus its metadata sidecar (<program>.pte.json), as
 * LibreYOLO's `model.export(format="executorch", ...)` does.
 *
 *   ly_model *m;
 *   ly_model_load("LibreYOLO9t.pt", NULL, &m);
 *   ly_export_options o;
 *   ly_export_options_init(&o);
 *   o.model_path = "LibreYOLO9t.pt";           // for the default output name
 *   char written[4096];
 *   ly_model_export(m, &o, written, sizeof written);   // weights/LibreYOLO9t.pte
 *
 * Options are validated in LibreYOLO's order and with its messages; every
 * refusal happens before anything is written. The program and its sidecar are
 * committed as a pair: a failure at any step leaves the previous pair (or
 * nothing) in place, never a new program next to an old sidecar.
 *
 * The program runs back through ly_model_load("X.pte", ...): the .pte suffix
 * selects the ExecuTorch runtime, which needs the sidecar next to it.
 *
 * Threads and ownership: an export only reads the model, which other threads
 * may be using at the same time; exports to different paths may run at once
 * (not two to the same path). Strings in the options stay the caller's; the
 * format table (ly_export_formats) is static.
 */
#ifndef LIBREYOLO_EXPORT_H
#define LIBREYOLO_EXPORT_H

#include "libreyolo/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ly_export_options {
    const char *format; /* "executorch" (NULL: "executorch") */
    /* Input size: NULL/0 entries: the model's native size; 1 entry: (n, n);
     * 2 entries: (height, width). Other counts are refused as upstream does. */
    const int64_t *imgsz;
    size_t imgsz_len;
    int batch;            /* must be 1 (the default) */
    bool dynamic;         /* must be false (the default) */
    const char *delegate; /* "xnnpack" (NULL: "xnnpack"), case-insensitive */
    const char *device;   /* "cpu" or "auto" (NULL: "cpu"), case-insensitive */
    bool half, int8;      /* refused: ExecuTorch export is FP32 */
    bool nms;             /* refused: no embedded NMS */
    /* Where the program goes (NULL: weights/<stem>.pte, <stem> from model_path
     * when it ends in .pt/.pth/.safetensors, else <prefix><size>, e.g.
     * LibreYOLO9t). The sidecar is this path with ".json" appended. */
    const char *output_path;
    const char *model_path; /* the file the model was loaded from (may be NULL) */
    /* How multi-scale deformable attention (the DETR families) is written:
     * "portable" (NULL: the default) as ATen's grid_sampler_2d and ops the
     * XNNPACK delegate takes, so that a stock ExecuTorch runs the program; or
     * "custom", one call of our operator libreyolo::ms_deform_attn.out per
     * attention (faster; ExecuTorch needs our kernel library for it). Ignored
     * by programs without such attention. */
    const char *msda;
} ly_export_options;

LY_API ly_status ly_export_options_init(ly_export_options *options);

/* Export `model`. `out_path` (may be NULL) receives the program's path. */
LY_API ly_status ly_model_export(ly_model *model, const ly_export_options *options, char *out_path,
                                 size_t out_size);

/* ---- What can be exported (LibreYOLO's `formats` matrix) ------------------- */

typedef enum ly_export_tier {
    LY_EXPORT_VALIDATED = 0, /* conversion and runtime parity are tested */
    LY_EXPORT_AVAILABLE = 1, /* conversion is implemented; parity not recorded */
    LY_EXPORT_BLOCKED = 2    /* refused, with a reason */
} ly_export_tier;

typedef struct ly_export_format_info {
    const char *name;      /* "executorch" */
    const char *extension; /* ".pte" */
    bool fp16, int8, dynamic, requires_onnx;
    const char *const *aliases; /* NULL-terminated, may be empty */
    /* Which runtimes its programs were run on, and how (this project's note,
     * not upstream's matrix); NULL when none is recorded. */
    const char *checked_on;
} ly_export_format_info;

/* The export formats of this build, in name order. */
LY_API ly_status ly_export_formats(const ly_export_format_info **formats, size_t *count);

/* Model families and their tasks (first is the default task). */
LY_API ly_status ly_export_families(const char *const **families, size_t *count);
/* LY_E_NOT_FOUND for an unknown family ("Unknown model family: 'x'"). */
LY_API ly_status ly_export_family_tasks(const char *family, const char *const **tasks,
                                        size_t *count);

/* The canonical task for a spelling LibreYOLO accepts ("detection" ->
 * "detect", static); LY_E_NOT_FOUND for none. */
LY_API ly_status ly_export_task(const char *spelling, const char **canonical);

/* The support tier of (family, task, format) with its reason and constraint
 * (constraint may be NULL). Strings are static. */
LY_API ly_status ly_export_support(const char *family, const char *task, const char *format,
                                   ly_export_tier *tier, const char **reason,
                                   const char **constraint);
LY_API const char *ly_export_tier_name(ly_export_tier tier); /* "validated", ... */

#ifdef __cplusplus
}
#endif

#endif
