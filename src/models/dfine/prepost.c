/* D-FINE's pre- and post-processing, as LibreYOLO's (dfine.h; detr.md 8, 9). */
#include "models/dfine/dfine.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- PIL's Image.resize(BILINEAR) on 8-bit RGB ----------------------------
 * Pillow's Resample.c, bit for bit: per output pixel a triangle filter whose
 * support grows with the downscaling ratio (antialiasing), weights normalised
 * in double then rounded to 22-bit fixed point, a horizontal pass into 8-bit
 * rows (rounded, clipped), then a vertical pass. */

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

static bool precompute(int in_size, int out_size, coeffs *c)
{
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
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
            w[x] = bilinear((x + xmin - center + 0.5) * ss);
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

static uint8_t clip8(int64_t v)
{
    if (v >= ((int64_t)1 << PRECISION_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

ly_status ly_dfine_pil_resize(const ly_image_view *image, int out_w, int out_h, uint8_t *out)
{
    int in_w = image->width, in_h = image->height;
    coeffs ch = {0}, cv = {0};
    uint8_t *rows = NULL;
    ly_status st = LY_OK;
    if (!precompute(in_w, out_w, &ch) || !precompute(in_h, out_h, &cv)) {
        st = ly_set_error(LY_E_NO_MEMORY, "resize: out of memory");
        goto done;
    }
    /* the source rows the vertical pass reads */
    int first = cv.bounds[0], last = cv.bounds[(out_h - 1) * 2] + cv.bounds[(out_h - 1) * 2 + 1];
    bool horizontal = out_w != in_w, vertical = out_h != in_h;
    int n_rows = horizontal ? last - first : in_h;
    rows = malloc((size_t)n_rows * (size_t)out_w * 3);
    if (!rows) {
        st = ly_set_error(LY_E_NO_MEMORY, "resize: out of memory");
        goto done;
    }
    bool bgr = image->format == LY_PIXELS_BGR;
    for (int y = 0; y < n_rows; y++) {
        const uint8_t *src = image->pixels + (size_t)(y + (horizontal ? first : 0)) * image->stride;
        uint8_t *dst = rows + (size_t)y * (size_t)out_w * 3;
        for (int xx = 0; xx < out_w; xx++) {
            int xmin = ch.bounds[xx * 2], xmax = ch.bounds[xx * 2 + 1];
            const int32_t *k = ch.k + (size_t)xx * (size_t)ch.ksize;
            for (int c = 0; c < 3; c++) {
                int sc = bgr ? 2 - c : c;
                if (!horizontal) {
                    dst[xx * 3 + c] = src[xx * 3 + sc];
                    continue;
                }
                int64_t ss = (int64_t)1 << (PRECISION_BITS - 1);
                for (int x = 0; x < xmax; x++)
                    ss += (int64_t)src[(x + xmin) * 3 + sc] * k[x];
                dst[xx * 3 + c] = clip8(ss);
            }
        }
    }
    for (int yy = 0; yy < out_h; yy++) {
        uint8_t *dst = out + (size_t)yy * (size_t)out_w * 3;
        if (!vertical) {
            memcpy(dst, rows + (size_t)yy * (size_t)out_w * 3, (size_t)out_w * 3);
            continue;
        }
        int ymin = cv.bounds[yy * 2] - (horizontal ? first : 0), ymax = cv.bounds[yy * 2 + 1];
        const int32_t *k = cv.k + (size_t)yy * (size_t)cv.ksize;
        for (int i = 0; i < out_w * 3; i++) {
            int64_t ss = (int64_t)1 << (PRECISION_BITS - 1);
            for (int y = 0; y < ymax; y++)
                ss += (int64_t)rows[(size_t)(y + ymin) * (size_t)out_w * 3 + (size_t)i] * k[y];
            dst[i] = clip8(ss);
        }
    }
done:
    free(ch.bounds);
    free(ch.k);
    free(cv.bounds);
    free(cv.k);
    free(rows);
    return st;
}

ly_status ly_dfine_preprocess(const ly_image_view *image, int size, float *input)
{
    uint8_t *rgb = malloc((size_t)size * (size_t)size * 3);
    if (!rgb) return ly_set_error(LY_E_NO_MEMORY, "preprocess: out of memory");
    ly_status st = ly_dfine_pil_resize(image, size, size, rgb);
    if (st == LY_OK) {
        size_t plane = (size_t)size * (size_t)size;
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                input[(size_t)c * plane + i] = (float)rgb[i * 3 + (size_t)c] / 255.0f;
    }
    free(rgb);
    return st;
}

typedef struct scored {
    float score;
    int64_t index;
} scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index); /* ties: lower index, as torch.topk */
}

ly_status ly_dfine_postprocess(const ly_tensor *logits, const ly_tensor *boxes, int orig_w,
                               int orig_h, const ly_predict_options *options, ly_box **out,
                               size_t *count)
{
    *out = NULL;
    *count = 0;
    int64_t q = logits->shape[1], nc = logits->shape[2], n = q * nc;
    scored *all = malloc((size_t)n * sizeof *all);
    if (!all) return ly_set_error(LY_E_NO_MEMORY, "postprocess: out of memory");
    const float *l = logits->data, *bx = boxes->data;
    for (int64_t i = 0; i < n; i++) {
        all[i].score = 1.0f / (1.0f + expf(-l[i]));
        all[i].index = i;
    }
    qsort(all, (size_t)n, sizeof *all, by_score);
    int64_t k = options->max_det < n ? options->max_det : n;
    ly_box *kept = malloc((size_t)(k ? k : 1) * sizeof *kept);
    if (!kept) {
        free(all);
        return ly_set_error(LY_E_NO_MEMORY, "postprocess: out of memory");
    }
    size_t m = 0;
    for (int64_t i = 0; i < k; i++) {
        if (!(all[i].score > options->conf)) continue;
        int64_t query = all[i].index / nc;
        const float *b = bx + query * 4;
        float cx = b[0], cy = b[1], w = b[2], h = b[3];
        ly_box *o = &kept[m++];
        /* box_cxcywh_to_xyxy, then x (W, H, W, H); no clamping, as LibreYOLO */
        o->xyxy[0] = (cx - 0.5f * w) * (float)orig_w;
        o->xyxy[1] = (cy - 0.5f * h) * (float)orig_h;
        o->xyxy[2] = (cx + 0.5f * w) * (float)orig_w;
        o->xyxy[3] = (cy + 0.5f * h) * (float)orig_h;
        o->conf = all[i].score;
        o->cls = (int)(all[i].index % nc);
    }
    free(all);
    *out = kept;
    *count = m;
    return LY_OK;
}
