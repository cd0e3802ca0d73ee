#include "cli/json_out.h"

#include <math.h>

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
