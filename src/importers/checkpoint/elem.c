/* SPDX-License-Identifier: MIT */
/* Element types as checkpoint files store them (elem.h). */
#include "importers/checkpoint/elem.h"

#include "libreyolo/quant.h"

#include <string.h>

/* ---- Element types ---------------------------------------------------------- */

size_t ly_elem_size(ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_F32:
        return 4;
    case LY_ELEM_F64:
        return 8;
    case LY_ELEM_F16:
        return 2;
    case LY_ELEM_BF16:
        return 2;
    case LY_ELEM_I64:
        return 8;
    case LY_ELEM_I32:
        return 4;
    case LY_ELEM_I16:
        return 2;
    case LY_ELEM_I8:
        return 1;
    case LY_ELEM_U8:
        return 1;
    case LY_ELEM_BOOL:
        return 1;
    case LY_ELEM_F8E4M3:
        return 1;
    case LY_ELEM_UNTYPED:
        return 1;
    }
    return 0;
}

const char *ly_elem_name(ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_F32:
        return "float32";
    case LY_ELEM_F64:
        return "float64";
    case LY_ELEM_F16:
        return "float16";
    case LY_ELEM_BF16:
        return "bfloat16";
    case LY_ELEM_I64:
        return "int64";
    case LY_ELEM_I32:
        return "int32";
    case LY_ELEM_I16:
        return "int16";
    case LY_ELEM_I8:
        return "int8";
    case LY_ELEM_U8:
        return "uint8";
    case LY_ELEM_BOOL:
        return "bool";
    case LY_ELEM_F8E4M3:
        return "float8_e4m3fn";
    case LY_ELEM_UNTYPED:
        return "untyped";
    }
    return "?";
}

bool ly_elem_is_float(ly_elem elem)
{
    return elem == LY_ELEM_F32 || elem == LY_ELEM_F64 || elem == LY_ELEM_F16 ||
           elem == LY_ELEM_BF16 || elem == LY_ELEM_F8E4M3;
}

/* ---- Element conversion --------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            /* Subnormal: shift the mantissa up to a leading 1, lowering the exponent. */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) {
                mant <<= 1;
                exp--;
            }
            bits = sign | exp << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float load_float(const uint8_t *p, ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_F32: {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    case LY_ELEM_F64: {
        double d;
        memcpy(&d, p, sizeof d);
        return (float)d;
    }
    case LY_ELEM_F16:
        return half_to_float((uint16_t)(p[0] | p[1] << 8));
    case LY_ELEM_BF16: {
        uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    case LY_ELEM_F8E4M3:
        return ly_e4m3_to_fp32(p[0]); /* exact: every code is an f32 */
    default:
        return 0.0f;
    }
}

static int64_t load_int(const uint8_t *p, ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I16: {
        int16_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I8:
        return (int8_t)p[0];
    case LY_ELEM_U8:
        return p[0];
    case LY_ELEM_BOOL:
        return p[0] != 0;
    default:
        return 0;
    }
}

void ly_elem_convert(void *dst, const uint8_t *src, int64_t n, int64_t stride, ly_elem elem,
                     bool to_float)
{
    size_t esize = ly_elem_size(elem);
    size_t step = (size_t)stride * esize;
    if (to_float) {
        float *out = dst;
        if (elem == LY_ELEM_F32 && stride == 1) {
            memcpy(out, src, (size_t)n * sizeof *out);
            return;
        }
        for (int64_t i = 0; i < n; i++, src += step)
            out[i] = load_float(src, elem);
    } else {
        int64_t *out = dst;
        if (elem == LY_ELEM_I64 && stride == 1) {
            memcpy(out, src, (size_t)n * sizeof *out);
            return;
        }
        for (int64_t i = 0; i < n; i++, src += step)
            out[i] = load_int(src, elem);
    }
}

/* ---- Text --------------------------------------------------------------------- */

bool ly_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1fu;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0fu;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07u;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0u) != 0x80u) return false;
            cp = cp << 6 | (s[i + k] & 0x3fu);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) return false;
        i += len;
    }
    return true;
}
