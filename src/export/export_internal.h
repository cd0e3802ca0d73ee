/* SPDX-License-Identifier: MIT */
/* Export internals shared by the exporter, the `formats` command and the .pte loader. */
#ifndef LY_EXPORT_EXPORT_INTERNAL_H
#define LY_EXPORT_EXPORT_INTERNAL_H

#include "libreyolo/export.h"

#include <stdio.h>

/* The canonical task for a spelling LibreYOLO accepts ("detection" -> "detect"),
 * NULL if none. */
const char *ly_export_canonical_task(const char *task);
/* A registered format by name or alias (case-insensitive), NULL if none. */
const ly_export_format_info *ly_export_find_format(const char *name);

#endif
