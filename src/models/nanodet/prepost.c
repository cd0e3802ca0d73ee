/* SPDX-License-Identifier: MIT */
/* NanoDet's pre- and post-processing (nanodet.h). */
#include "models/nanodet/nanodet.h"

#include "core/core.h"
#include "models/nms.h"
#include "models/yolo9/prepost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* nanodet-g.yml, in BGR order and 0..255 scale. */
static const float MEAN[3] = {103.53f, 116.28f, 123.675f};
static const float STD[3] = {57.375f, 57.12f, 58.395f};

/* Bounds far beyond any detector's, so index arithmetic cannot overflow. */
#define MAX_SIZE 32768

ly_status ly_nanodet_letterbox_geometry(int width, int height, int size, ly_nanodet_letterbox *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_nanodet_letterbox: out is NULL");
    if (width <= 0 || height <= 0 || width > MAX_SIZE * 16 || height > MAX_SIZE * 16)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_nanodet_letterbox: image %dx%d: expected positive sizes", width,
                            height);
    if (size <= 0 || size > MAX_SIZE)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_nanodet_letterbox: input size %d: expected 1..%d", size, MAX_SIZE);
    double sw = (double)size / width, sh = (double)size / height;
    double scale = sw < sh ? sw : sh;
    int nw = (int)nearbyint(width * scale), nh = (int)nearbyint(height * scale);
    nw = nw < 1 ? 1 : nw > size ? size : nw;
    nh = nh < 1 ? 1 : nh > size ? size : nh;
    *out = (ly_nanodet_letterbox){scale, nw, nh, (size - nw) / 2, (size - nh) / 2};
    return LY_OK;
}

ly_status ly_nanodet_preprocess(const uint8_t *pixels, int width, int height, size_t stride,
                                bool bgr, int size, float *out, ly_nanodet_letterbox *geometry)
{
    if (!pixels || !out || !geometry)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_nanodet_preprocess: NULL argument");
    ly_status st = ly_nanodet_letterbox_geometry(width, height, size, geometry);
    if (st != LY_OK) return st;
    const ly_nanodet_letterbox *g = geometry;
    size_t row = (size_t)g->new_width * 3;
    uint8_t *resized = malloc(row * (size_t)g->new_height);
    if (!resized) return ly_set_error(LY_E_NO_MEMORY, "ly_nanodet_preprocess: out of memory");
    st = ly_resize_linear_u8c3(pixels, width, height, stride, resized, g->new_width, g->new_height,
                               row);
    if (st != LY_OK) {
        free(resized);
        return st;
    }
    size_t plane = (size_t)size * (size_t)size;
    for (int c = 0; c < 3; c++) {
        /* Channel c of the input is B, G, R in turn. */
        int src = bgr ? c : 2 - c;
        float *dst = out + (size_t)c * plane;
        float border = (0.0f - MEAN[c]) / STD[c];
        for (int y = 0; y < size; y++) {
            float *d = dst + (size_t)y * (size_t)size;
            int iy = y - g->offset_y;
            if (iy < 0 || iy >= g->new_height) {
                for (int x = 0; x < size; x++)
                    d[x] = border;
                continue;
            }
            const uint8_t *s = resized + (size_t)iy * row;
            for (int x = 0; x < size; x++) {
                int ix = x - g->offset_x;
                d[x] = ix < 0 || ix >= g->new_width ? border
                                                    : ((float)s[3 * ix + src] - MEAN[c]) / STD[c];
            }
        }
    }
    free(resized);
    return LY_OK;
}

/* ---- post-processing ------------------------------------------------------- */

static float clampf(float v, float lo, float hi)
{
    return fminf(fmaxf(v, lo), hi);
}

static ly_status check_level(const ly_tensor *cls, const ly_tensor *reg, int stride, int size,
                             int level, int64_t *nc, int64_t *bins)
{
    const char *fn = "ly_nanodet_postprocess";
    ly_status st = ly_check_tensor(cls, "ly_nanodet_postprocess: cls", LY_F32);
    if (st == LY_OK) st = ly_check_tensor(reg, "ly_nanodet_postprocess: reg", LY_F32);
    if (st != LY_OK) return st;
    if (stride < 1 || size % stride != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: stride %d of level %d does not divide %d",
                            fn, stride, level, size);
    int64_t side = size / stride, anchors = side * side;
    char a[96], b[96];
    if (cls->ndim != 3 || reg->ndim != 3 || cls->shape[0] != 1 || reg->shape[0] != 1 ||
        cls->shape[1] != anchors || reg->shape[1] != anchors || cls->shape[2] < 1 ||
        reg->shape[2] < 4 || reg->shape[2] % 4 != 0 || (level > 0 && cls->shape[2] != *nc) ||
        (level > 0 && reg->shape[2] / 4 != *bins))
        return ly_set_error(LY_E_SHAPE,
                            "%s: level %d (stride %d): cls %s and reg %s, expected [1, %lld, nc] "
                            "and [1, %lld, 4 * bins], the same for every level",
                            fn, level, stride, ly_shape_str(cls, a, sizeof a),
                            ly_shape_str(reg, b, sizeof b), (long long)anchors, (long long)anchors);
    *nc = cls->shape[2];
    *bins = reg->shape[2] / 4;
    return LY_OK;
}

/* The four distances of one anchor: expectation of softmax over the bins. */
static void integral(const float *logits, int64_t bins, float stride, float out[4])
{
    for (int side = 0; side < 4; side++) {
        const float *x = logits + side * bins;
        float m = -INFINITY, sum = 0.0f, acc = 0.0f;
        for (int64_t b = 0; b < bins; b++)
            m = fmaxf(m, x[b]);
        for (int64_t b = 0; b < bins; b++)
            sum += expf(x[b] - m);
        for (int64_t b = 0; b < bins; b++)
            acc += (float)b * (expf(x[b] - m) / sum);
        out[side] = acc * stride;
    }
}

/* Candidates of every level, anchor-major as NanoDet's mask lists them. */
static ly_status gather(const ly_tensor *const *cls, const ly_tensor *const *reg,
                        const int *strides, int levels, int size, const ly_predict_options *o,
                        ly_nms_candidate **out, size_t *count)
{
    size_t cap = 256, n = 0;
    ly_nms_candidate *c = malloc(cap * sizeof *c);
    if (!c) return ly_set_error(LY_E_NO_MEMORY, "ly_nanodet_postprocess: out of memory");
    int64_t order = 0;
    for (int l = 0; l < levels; l++) {
        int64_t nc = cls[l]->shape[2], bins = reg[l]->shape[2] / 4, side = size / strides[l];
        const float *scores = cls[l]->data, *logits = reg[l]->data;
        float s = (float)strides[l], limit = (float)size;
        for (int64_t a = 0; a < side * side; a++, order += nc) {
            const float *p = scores + a * nc;
            bool any = false;
            for (int64_t k = 0; k < nc && !any; k++)
                any = p[k] > o->conf;
            if (!any) continue;
            float d[4];
            integral(logits + a * 4 * bins, bins, s, d);
            float cx = ((float)(a % side) + 0.5f) * s, cy = ((float)(a / side) + 0.5f) * s;
            float box[4] = {clampf(cx - d[0], 0.0f, limit), clampf(cy - d[1], 0.0f, limit),
                            clampf(cx + d[2], 0.0f, limit), clampf(cy + d[3], 0.0f, limit)};
            for (int64_t k = 0; k < nc; k++) {
                if (!(p[k] > o->conf)) continue;
                if (n == cap) {
                    ly_nms_candidate *grown = realloc(c, 2 * cap * sizeof *c);
                    if (!grown) {
                        free(c);
                        return ly_set_error(LY_E_NO_MEMORY,
                                            "ly_nanodet_postprocess: out of memory");
                    }
                    c = grown;
                    cap *= 2;
                }
                memcpy(c[n].box, box, sizeof box);
                c[n].score = p[k];
                c[n].cls = (int)k;
                c[n].order = order + k;
                n++;
            }
        }
    }
    *out = c;
    *count = n;
    return LY_OK;
}

ly_status ly_nanodet_postprocess(const ly_tensor *const *cls, const ly_tensor *const *reg,
                                 const int *strides, int levels, int size,
                                 const ly_nanodet_letterbox *g, int orig_w, int orig_h,
                                 const ly_predict_options *options, ly_box **out, size_t *count)
{
    const char *fn = "ly_nanodet_postprocess";
    if (!out || !count) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: out or count is NULL", fn);
    *out = NULL;
    *count = 0;
    if (!cls || !reg || !strides || !g || levels < 1 || levels > LY_NANODET_MAX_LEVELS)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: expected 1..%d levels of outputs", fn,
                            LY_NANODET_MAX_LEVELS);
    if (orig_w <= 0 || orig_h <= 0 || !(g->scale > 0) || !isfinite(g->scale))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: image %dx%d, scale %g: expected positive",
                            fn, orig_w, orig_h, g->scale);
    if (!options) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: options is NULL", fn);
    ly_status st = LY_OK;
    int64_t nc = 0, bins = 0;
    for (int l = 0; st == LY_OK && l < levels; l++)
        st = check_level(cls[l], reg[l], strides[l], size, l, &nc, &bins);
    if (st != LY_OK) return st;

    ly_nms_candidate *c = NULL;
    size_t n = 0;
    st = gather(cls, reg, strides, levels, size, options, &c, &n);
    if (st != LY_OK) return st;
    ly_nms_sort(c, n);
    uint8_t *keep = malloc(n ? n : 1);
    if (!keep) {
        free(c);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", fn);
    }
    st = ly_nms_batched(c, n, (double)options->iou, keep, fn);
    size_t kept = 0;
    for (size_t i = 0; st == LY_OK && i < n; i++)
        kept += keep[i];
    if (kept > (size_t)options->max_det) kept = (size_t)options->max_det;
    ly_box *boxes = NULL;
    if (st == LY_OK && kept) {
        boxes = malloc(kept * sizeof *boxes);
        if (!boxes) st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", fn);
    }
    float ox = (float)g->offset_x, oy = (float)g->offset_y, scale = (float)g->scale;
    for (size_t i = 0, j = 0; st == LY_OK && j < kept; i++) {
        if (!keep[i]) continue;
        const float *b = c[i].box;
        boxes[j].xyxy[0] = clampf((b[0] - ox) / scale, 0.0f, (float)orig_w);
        boxes[j].xyxy[1] = clampf((b[1] - oy) / scale, 0.0f, (float)orig_h);
        boxes[j].xyxy[2] = clampf((b[2] - ox) / scale, 0.0f, (float)orig_w);
        boxes[j].xyxy[3] = clampf((b[3] - oy) / scale, 0.0f, (float)orig_h);
        boxes[j].conf = c[i].score;
        boxes[j].cls = c[i].cls;
        j++;
    }
    free(keep);
    free(c);
    if (st != LY_OK) {
        free(boxes);
        return st;
    }
    *out = boxes;
    *count = kept;
    return LY_OK;
}
