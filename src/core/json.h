/* SPDX-License-Identifier: MIT */
/* Reading cJSON values the way every reader here needs them (internal). */
#ifndef LY_CORE_JSON_H
#define LY_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* An integer from a JSON number with no fraction that fits in int64, or from a
 * decimal string (TF's int64 fields, LibreYOLO's int() of a metadata string).
 * False for anything else: never a conversion out of range. */
bool ly_json_int(const cJSON *item, int64_t *out);

#endif
