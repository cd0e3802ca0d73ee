/* SPDX-License-Identifier: MIT */
/*
 * cJSON trees printed exactly as Python's json.dumps(obj, indent=2,
 * sort_keys=True) prints them (ensure_ascii: non-ASCII as \uXXXX escapes;
 * ", " never appears, items end in "," before a newline; empty containers
 * are "[]" and "{}"; keys sorted by code point). Numbers that are whole and
 * within 2^53 print as integers; other numbers should be raw items
 * (cJSON_CreateRaw) holding Python's repr, see ly_json_float_repr.
 */
#ifndef LY_PTE_JSON_TEXT_H
#define LY_PTE_JSON_TEXT_H

#include "libreyolo/libreyolo.h"

#include <cjson/cJSON.h>

/* *text (malloc'd, NUL-terminated, no trailing newline) and its length. */
ly_status ly_json_python_dumps(const cJSON *root, char **text, size_t *length);

/* Python's repr(float(v)) ("0.875", "1e-05", "1.0"), into out (32 bytes). */
void ly_json_float_repr(double v, char out[32]);

#endif
