/* SPDX-License-Identifier: MIT */
/*
 * The export support matrix (internal; the public side is libreyolo/export.h):
 * LibreYOLO's canonical tasks and their spellings, the format registry, and
 * the tier of (family, task, format) resolved over the recipes' tasks and
 * export rules (recipe.h).
 */
#ifndef LY_MODELS_EXPORT_SUPPORT_H
#define LY_MODELS_EXPORT_SUPPORT_H

#include "libreyolo/export.h"

/* What an ExecuTorch program of this build is: the constraint of the
 * format's default tier, and the start of the recipes' own constraints. */
#define LY_EXPORT_ET_CONSTRAINT "ExecuTorch 1.2, XNNPACK, CPU, FP32, batch 1, fixed input shape"

/* The canonical task for a spelling LibreYOLO accepts ("detection" -> "detect"),
 * NULL if none. */
const char *ly_export_canonical_task(const char *task);
/* A registered format by name or alias (case-insensitive), NULL if none. */
const ly_export_format_info *ly_export_find_format(const char *name);

#endif
