/* SPDX-License-Identifier: MIT */
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

bool ly_json_int(const cJSON *item, int64_t *out)
{
    if (cJSON_IsNumber(item)) {
        double v = item->valuedouble;
        /* -2^63 <= v < 2^63, both exact in a double. */
        if (!isfinite(v) || v != floor(v) || v < -9223372036854775808.0 ||
            v >= 9223372036854775808.0)
            return false;
        *out = (int64_t)v;
        return true;
    }
    if (cJSON_IsString(item) && item->valuestring && *item->valuestring) {
        char *end;
        errno = 0;
        long long v = strtoll(item->valuestring, &end, 10);
        if (errno || *end || end == item->valuestring) return false;
        *out = v;
        return true;
    }
    return false;
}
