/* SPDX-License-Identifier: MIT */
/* What the quant case families share (quant_cases.h): the kind of an op, names,
 * the E4M3 table of the format's definition. */
#include "ops/quant/quant_cases.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- Kinds ------------------------------------------------------------------------ */

static const char *const kind_slot_names[K_UNKNOWN] = {
    "fake_quant_int8_per_channel",
    "fake_quant_int8_affine",
    "fake_quant_fp8",
    "fake_quant_int_grouped",
    "fake_quant_nvfp4_weight",
    "fake_quant_nvfp4_dynamic",
    "fake_quant_mxfp4_weight",
    "fake_quant_mxfp4_dynamic",
    "unpack_int_grouped",
    "unpack_nvfp4",
};

static const char BACKWARD_SUFFIX[] = "_backward";

quant_kind ly_quant_case_kind(ly_op op, bool *backward)
{
    const char *slot = ly_op_name(op);
    size_t n = slot ? strlen(slot) : 0, s = sizeof BACKWARD_SUFFIX - 1;
    *backward = n > s && strcmp(slot + n - s, BACKWARD_SUFFIX) == 0;
    if (*backward) n -= s;
    for (int k = 0; k < K_UNKNOWN; k++)
        if (strlen(kind_slot_names[k]) == n && strncmp(kind_slot_names[k], slot, n) == 0)
            return (quant_kind)k;
    return K_UNKNOWN;
}

void ly_quant_append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

void ly_quant_shape_text(int ndim, const int64_t *dim, char *buf, size_t size)
{
    buf[0] = '\0';
    ly_quant_append(buf, size, "[");
    for (int i = 0; i < ndim; i++)
        ly_quant_append(buf, size, "%s%" PRId64, i ? "," : "", dim[i]);
    ly_quant_append(buf, size, "]");
}

/* ---- Describing the inputs behind one output element ----------------------------- */

/* Written here from the format definition so the cases do not lean on the code
 * they check. */
float ly_quant_e4m3_value(unsigned code)
{
    unsigned e = (code >> 3) & 15, m = code & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), (int)e - 10);
    if ((code & 0x7F) == 0x7F) v = NAN;
    return (code & 0x80) ? -v : v;
}
