/* SPDX-License-Identifier: MIT */
/* PIL's Image.resize on 8-bit RGB (pil_resize.h). */
#include "models/pil_resize.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

typedef struct coeffs {
    int ksize;
    int *bounds; /* per output pixel: first input index, count */
    int32_t *k;  /* per output pixel: ksize fixed-point weights */
} coeffs;

static double bilinear(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Keys' cubic convolution with a = -0.5, Pillow's bicubic_filter. */
static double bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static bool precompute(int in_size, int out_size, ly_pil_filter filter, coeffs *c)
{
    double (*fn)(double) = filter == LY_PIL_BICUBIC ? bicubic : bilinear;
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = (filter == LY_PIL_BICUBIC ? 2.0 : 1.0) * filterscale;
    c->ksize = (int)ceil(support) * 2 + 1;
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * (size_t)c->ksize * sizeof *c->k);
    double *w = malloc((size_t)c->ksize * sizeof *w);
    if (!c->bounds || !c->k || !w) {
        free(w);
        return false;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            w[x] = fn((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = c->k + (size_t)xx * (size_t)c->ksize;
        for (int x = 0; x < c->ksize; x++) {
            double v = x < xmax ? (ww != 0.0 ? w[x] / ww : w[x]) : 0.0;
            k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
                         : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    free(w);
    return true;
}

/* Pillow's arithmetic: int32 sums from a half, 22 fraction bits (the sums of
 * 8-bit samples times these weights stay far inside int32). */
static uint8_t clip8(int32_t v)
{
    if (v >= (int32_t)1 << PRECISION_BITS << 8) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

ly_status ly_pil_resize(const ly_image_view *image, int out_w, int out_h, ly_pil_filter filter,
                        uint8_t *out)
{
    int in_w = image->width, in_h = image->height;
    coeffs ch = {0}, cv = {0};
    uint8_t *rows = NULL;
    int32_t *sums = NULL;
    ly_status st = LY_OK;
    if (out_w < 1 || out_h < 1 || in_w < 1 || in_h < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "resize: %dx%d to %dx%d", in_w, in_h, out_w,
                            out_h);
    if (!precompute(in_w, out_w, filter, &ch) || !precompute(in_h, out_h, filter, &cv)) {
        st = ly_set_error(LY_E_NO_MEMORY, "resize: out of memory");
        goto done;
    }
    /* the source rows the vertical pass reads */
    int first = cv.bounds[0], last = cv.bounds[(out_h - 1) * 2] + cv.bounds[(out_h - 1) * 2 + 1];
    bool horizontal = out_w != in_w, vertical = out_h != in_h;
    int n_rows = horizontal ? last - first : in_h;
    size_t row_len = (size_t)out_w * 3;
    rows = malloc((size_t)n_rows * row_len);
    sums = malloc(row_len * sizeof *sums);
    if (!rows || !sums) {
        st = ly_set_error(LY_E_NO_MEMORY, "resize: out of memory");
        goto done;
    }
    bool bgr = image->format == LY_PIXELS_BGR;
    const int32_t half = (int32_t)1 << (PRECISION_BITS - 1);
    for (int y = 0; y < n_rows; y++) {
        const uint8_t *src = image->pixels + (size_t)(y + (horizontal ? first : 0)) * image->stride;
        uint8_t *dst = rows + (size_t)y * row_len;
        for (int xx = 0; xx < out_w; xx++) {
            int32_t s[3] = {half, half, half};
            if (horizontal) {
                int xmin = ch.bounds[xx * 2], xmax = ch.bounds[xx * 2 + 1];
                const int32_t *k = ch.k + (size_t)xx * (size_t)ch.ksize;
                const uint8_t *p = src + (size_t)xmin * 3;
                for (int x = 0; x < xmax; x++, p += 3) {
                    s[0] += p[0] * k[x];
                    s[1] += p[1] * k[x];
                    s[2] += p[2] * k[x];
                }
                for (int c = 0; c < 3; c++)
                    dst[xx * 3 + c] = clip8(s[bgr ? 2 - c : c]);
            } else {
                for (int c = 0; c < 3; c++)
                    dst[xx * 3 + c] = src[xx * 3 + (bgr ? 2 - c : c)];
            }
        }
    }
    for (int yy = 0; yy < out_h; yy++) {
        uint8_t *dst = out + (size_t)yy * row_len;
        if (!vertical) {
            memcpy(dst, rows + (size_t)yy * row_len, row_len);
            continue;
        }
        int ymin = cv.bounds[yy * 2] - (horizontal ? first : 0), ymax = cv.bounds[yy * 2 + 1];
        const int32_t *k = cv.k + (size_t)yy * (size_t)cv.ksize;
        /* whole rows at a time: the same integer sums, in a loop that vectorises */
        for (size_t i = 0; i < row_len; i++)
            sums[i] = half;
        for (int y = 0; y < ymax; y++) {
            const uint8_t *r = rows + (size_t)(y + ymin) * row_len;
            int32_t ky = k[y];
            for (size_t i = 0; i < row_len; i++)
                sums[i] += r[i] * ky;
        }
        for (size_t i = 0; i < row_len; i++)
            dst[i] = clip8(sums[i]);
    }
done:
    free(ch.bounds);
    free(ch.k);
    free(cv.bounds);
    free(cv.k);
    free(rows);
    free(sums);
    return st;
}
