/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO's preprocessing (yolo9.md 1.5): letterbox to the top-left of a
 * canvas of 114, cv2.resize INTER_LINEAR, /255, HWC -> CHW.
 *
 * The resize reproduces OpenCV 4's cv::resize for 8-bit images (imgproc
 * resize.cpp) so the network sees the same bytes as LibreYOLO:
 *  - equal sizes copy;
 *  - an exact 2x reduction on both axes (scale within DBL_EPSILON of 2) is
 *    turned into INTER_AREA's fast path: (a + b + c + d + 2) >> 2;
 *  - otherwise source coordinates fx = (float)((dx + 0.5) * scale - 0.5),
 *    sx = floor(fx), weights (1 - fx, fx) rounded to 11-bit shorts, clamped
 *    at the borders; a horizontal pass into ints (exact), then a vertical pass
 *    ((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16), then (+ 2) >> 2.
 * Checked against OpenCV 4.6 (Debian python3-opencv, SSE2 baseline) on 316
 * size pairs, letterbox and arbitrary, from 1x1 to 1920x1080, up and down,
 * odd and even widths: identical bytes. With PIL's JPEG decoding
 * (libjpeg-turbo) the fixture's input.npy is reproduced exactly.
 */
#include "models/yolo9/prepost.h"

#include "core/core.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    COEF_BITS = 11, /* INTER_RESIZE_COEF_BITS */
    COEF_SCALE = 1 << COEF_BITS,
    LETTERBOX_FILL = 114
};

/* cvRound: round half to even (the SSE conversion OpenCV uses). */
static int round_even(double v)
{
    return (int)lrint(v);
}

static int16_t saturate_short(float v)
{
    long r = lrintf(v);
    return (int16_t)(r < INT16_MIN ? INT16_MIN : r > INT16_MAX ? INT16_MAX : r);
}

static int floor_to_int(float v)
{
    int i = (int)v;
    return i - (i > v);
}

static uint8_t saturate_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* OpenCV's clip() for the rows a tap reads. */
static int clip_row(int y, int height)
{
    return y >= 0 ? (y < height ? y : height - 1) : 0;
}

static void resize_area_2x(const uint8_t *src, size_t src_stride, uint8_t *dst, int dw, int dh,
                           size_t dst_stride)
{
    for (int dy = 0; dy < dh; dy++) {
        const uint8_t *s0 = src + (size_t)(2 * dy) * src_stride;
        const uint8_t *s1 = s0 + src_stride;
        uint8_t *d = dst + (size_t)dy * dst_stride;
        for (int dx = 0; dx < dw; dx++)
            for (int c = 0; c < 3; c++) {
                int x = 6 * dx + c;
                d[3 * dx + c] = (uint8_t)((s0[x] + s0[x + 3] + s1[x] + s1[x + 3] + 2) >> 2);
            }
    }
}

/* Source positions and 11-bit weights, as OpenCV tabulates them. */
typedef struct axis_table {
    int *offset;     /* first source index of each destination index */
    int16_t *weight; /* two weights per destination index */
} axis_table;

/* Columns: OpenCV clamps the source index and zeroes the fraction at the
 * borders; *first_clamped_right receives OpenCV's xmax, from which on a column
 * is its last source pixel times the unit weight. */
static void tabulate_columns(int src_len, int dst_len, double scale, axis_table *t,
                             int *first_clamped_right)
{
    int hi = dst_len;
    for (int d = 0; d < dst_len; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        int s = floor_to_int(f);
        f -= (float)s;
        if (s < 0) f = 0, s = 0;
        if (s + 1 >= src_len) {
            if (d < hi) hi = d;
            if (s >= src_len - 1) f = 0, s = src_len - 1;
        }
        t->offset[d] = s;
        t->weight[2 * d] = saturate_short((1.f - f) * (float)COEF_SCALE);
        t->weight[2 * d + 1] = saturate_short(f * (float)COEF_SCALE);
    }
    *first_clamped_right = hi;
}

static void horizontal_pass(const uint8_t *row, const axis_table *x, int dw, int xmax, int32_t *out)
{
    for (int dx = 0; dx < dw; dx++) {
        const uint8_t *s = row + 3 * (size_t)x->offset[dx];
        int32_t a0 = x->weight[2 * dx], a1 = x->weight[2 * dx + 1];
        for (int c = 0; c < 3; c++)
            out[3 * dx + c] = dx < xmax ? s[c] * a0 + s[c + 3] * a1 : s[c] * COEF_SCALE;
    }
}

/* OpenCV's 8-bit specialisation of VResizeLinear: the same truncating
 * formula in its SIMD body and its scalar tail. S >> 4 <= 255 * 2048 / 16 fits
 * the 16-bit lanes, so no saturation happens before the multiply. */
static void vertical_pass(const int32_t *s0, const int32_t *s1, int16_t b0, int16_t b1, int width,
                          uint8_t *dst)
{
    for (int x = 0; x < width; x++)
        dst[x] = saturate_u8((((b0 * (s0[x] >> 4)) >> 16) + ((b1 * (s1[x] >> 4)) >> 16) + 2) >> 2);
}

static ly_status resize_bilinear(const uint8_t *src, int sw, int sh, size_t src_stride,
                                 uint8_t *dst, int dw, int dh, size_t dst_stride, double scale_x,
                                 double scale_y)
{
    int width = dw * 3;
    size_t ints = (size_t)dw + (size_t)dh + 2 * (size_t)width;
    size_t shorts = 2 * ((size_t)dw + (size_t)dh);
    void *mem = malloc(ints * sizeof(int32_t) + shorts * sizeof(int16_t));
    if (!mem)
        return ly_set_error(LY_E_NO_MEMORY, "resize: cannot allocate tables for %dx%d -> %dx%d", sw,
                            sh, dw, dh);
    int32_t *xoff = mem, *yoff = xoff + dw, *row0 = yoff + dh, *row1 = row0 + width;
    int16_t *xw = (int16_t *)(row1 + width), *yw = xw + 2 * dw;
    axis_table xt = {xoff, xw};
    int xmax;
    tabulate_columns(sw, dw, scale_x, &xt, &xmax);
    /* Rows keep their unclamped index and weights; clip_row picks the rows. */
    for (int dy = 0; dy < dh; dy++) {
        float f = (float)((dy + 0.5) * scale_y - 0.5);
        int s = floor_to_int(f);
        f -= (float)s;
        yoff[dy] = s;
        yw[2 * dy] = saturate_short((1.f - f) * (float)COEF_SCALE);
        yw[2 * dy + 1] = saturate_short(f * (float)COEF_SCALE);
    }
    int have0 = -1, have1 = -1; /* source rows now in row0 / row1 */
    for (int dy = 0; dy < dh; dy++) {
        int r0 = clip_row(yoff[dy], sh), r1 = clip_row(yoff[dy] + 1, sh);
        if (r0 != have0) {
            if (r0 == have1) {
                int32_t *t = row0;
                row0 = row1, row1 = t;
                have0 = have1, have1 = -1;
            } else {
                horizontal_pass(src + (size_t)r0 * src_stride, &xt, dw, xmax, row0);
                have0 = r0;
            }
        }
        if (r1 != have1) {
            if (r1 == have0)
                memcpy(row1, row0, (size_t)width * sizeof *row1);
            else
                horizontal_pass(src + (size_t)r1 * src_stride, &xt, dw, xmax, row1);
            have1 = r1;
        }
        vertical_pass(row0, row1, yw[2 * dy], yw[2 * dy + 1], width, dst + (size_t)dy * dst_stride);
    }
    free(mem);
    return LY_OK;
}

ly_status ly_resize_linear_u8c3(const uint8_t *src, int sw, int sh, size_t src_stride, uint8_t *dst,
                                int dw, int dh, size_t dst_stride)
{
    if (!src || !dst) return ly_set_error(LY_E_INVALID_ARGUMENT, "resize: src or dst is NULL");
    if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "resize: %dx%d -> %dx%d: sizes must be positive",
                            sw, sh, dw, dh);
    if (src_stride < (size_t)sw * 3 || dst_stride < (size_t)dw * 3)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "resize: row strides %zu and %zu are shorter than the rows", src_stride,
                            dst_stride);
    if (dw == sw && dh == sh) {
        for (int y = 0; y < sh; y++)
            memcpy(dst + (size_t)y * dst_stride, src + (size_t)y * src_stride, (size_t)sw * 3);
        return LY_OK;
    }
    double scale_x = 1. / ((double)dw / sw), scale_y = 1. / ((double)dh / sh);
    int iscale_x = round_even(scale_x), iscale_y = round_even(scale_y);
    bool area_fast =
        fabs(scale_x - iscale_x) < DBL_EPSILON && fabs(scale_y - iscale_y) < DBL_EPSILON;
    if (area_fast && iscale_x == 2 && iscale_y == 2 && sw >= 2 * dw && sh >= 2 * dh) {
        resize_area_2x(src, src_stride, dst, dw, dh, dst_stride);
        return LY_OK;
    }
    return resize_bilinear(src, sw, sh, src_stride, dst, dw, dh, dst_stride, scale_x, scale_y);
}

ly_status ly_letterbox_geometry(int width, int height, int target_h, int target_w,
                                ly_letterbox *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "letterbox: out is NULL");
    if (width <= 0 || height <= 0 || target_h <= 0 || target_w <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "letterbox: image %dx%d into %dx%d: sizes must be positive", width,
                            height, target_w, target_h);
    double r = fmin((double)target_h / height, (double)target_w / width);
    /* int() truncation, as in Python (w * r may land just below the target). */
    int new_w = (int)(width * r), new_h = (int)(height * r);
    out->ratio = r;
    out->new_width = new_w < 1 ? 1 : new_w;
    out->new_height = new_h < 1 ? 1 : new_h;
    return LY_OK;
}

ly_status ly_yolo9_preprocess(const uint8_t *pixels, int width, int height, size_t stride, bool bgr,
                              int target_h, int target_w, float *out, ly_letterbox *geometry)
{
    if (!pixels || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "preprocess: pixels or out is NULL");
    ly_letterbox g;
    ly_status st = ly_letterbox_geometry(width, height, target_h, target_w, &g);
    if (st != LY_OK) return st;
    if (stride < (size_t)width * 3)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "preprocess: stride %zu is shorter than a row of %d pixels", stride,
                            width);
    size_t row = (size_t)g.new_width * 3;
    uint8_t *resized = malloc(row * (size_t)g.new_height);
    if (!resized)
        return ly_set_error(LY_E_NO_MEMORY, "preprocess: cannot allocate %dx%d pixels", g.new_width,
                            g.new_height);
    st = ly_resize_linear_u8c3(pixels, width, height, stride, resized, g.new_width, g.new_height,
                               row);
    if (st != LY_OK) {
        free(resized);
        return st;
    }
    /* The float32 quotient numpy computes for uint8 / 255.0. */
    float level[256];
    for (int v = 0; v < 256; v++)
        level[v] = (float)v / 255.0f;
    size_t plane = (size_t)target_h * (size_t)target_w;
    for (int c = 0; c < 3; c++) {
        int src_c = bgr ? 2 - c : c;
        float *p = out + (size_t)c * plane;
        for (int y = 0; y < target_h; y++) {
            float *o = p + (size_t)y * (size_t)target_w;
            int x = 0;
            if (y < g.new_height) {
                const uint8_t *s = resized + (size_t)y * row + src_c;
                for (; x < g.new_width; x++)
                    o[x] = level[s[3 * x]];
            }
            for (; x < target_w; x++)
                o[x] = level[LETTERBOX_FILL];
        }
    }
    free(resized);
    if (geometry) *geometry = g;
    return LY_OK;
}
