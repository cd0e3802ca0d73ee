/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>

const char *ly_shortest_decimal(double v, bool single, char *buf, size_t size)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    return buf;
}
