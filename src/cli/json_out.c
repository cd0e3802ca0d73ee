/* SPDX-License-Identifier: MIT */
#include "cli/json_out.h"

#include <math.h>
#include <stdlib.h>

void ly_json_string(FILE *to, const char *s)
{
    if (!s) {
        fputs("null", to);
        return;
    }
    fputc('"', to);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", to);
            break;
        case '\\':
            fputs("\\\\", to);
            break;
        case '\n':
            fputs("\\n", to);
            break;
        case '\r':
            fputs("\\r", to);
            break;
        case '\t':
            fputs("\\t", to);
            break;
        default:
            if (*p < 0x20)
                fprintf(to, "\\u%04x", *p);
            else
                fputc(*p, to);
        }
    }
    fputc('"', to);
}

void ly_json_number(FILE *to, double v)
{
    if (isfinite(v))
        fprintf(to, "%.9g", v);
    else
        fputs("null", to);
}

void ly_json_float32(FILE *to, float v)
{
    if (!isfinite(v)) {
        fputs("null", to);
        return;
    }
    /* The fewest digits that read back as the same float. */
    char text[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, (double)v);
        if (strtof(text, NULL) == v) break;
    }
    fputs(text, to);
}
