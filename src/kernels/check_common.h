/* What the ms_deform_attn and sdpa parity checks share: the first error kept for
 * the report, and the one distance both compare outputs with. kernels/check.c holds
 * the same two for the nn slots; they belong in one place there once check.c
 * exports them. */
#ifndef LY_KERNELS_ATTENTION_CHECK_COMMON_H
#define LY_KERNELS_ATTENTION_CHECK_COMMON_H

#include "core/core.h"
#include "kernels/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* Counts an error; only the first one's text is kept. */
static inline void ly_attn_note_error(ly_check_result *r, const char *fmt, ...) LY_PRINTF(2, 3);
static inline void ly_attn_note_error(ly_check_result *r, const char *fmt, ...)
{
    if (r->errors++ > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_error, sizeof r->first_error, fmt, ap);
    va_end(ap);
}

/* |a - b| where NaN matches only NaN and an infinity only itself. */
static inline double ly_attn_abs_diff(float a, float b)
{
    if (isnan(a) && isnan(b)) return 0.0;
    if (isnan(a) || isnan(b)) return INFINITY;
    if (a == b) return 0.0;
    if (isinf(a) || isinf(b)) return INFINITY;
    return fabs((double)a - (double)b);
}

#endif
