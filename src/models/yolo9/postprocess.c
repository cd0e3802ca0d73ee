/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO's YOLO9 post-processing (yolo9.md 1.7), with torchvision's
 * batched_nms as it runs on the CPU (models/nms.h), so the same boxes survive:
 *  - candidates are the (anchor, class) pairs with score > conf, in anchor-major
 *    order as nonzero() lists them; beyond max(max_det, 30000) only the best
 *    scores stay;
 *  - boxes are divided by the letterbox ratio, clipped to the image, and
 *    dropped when not finite or without area;
 *  - batched_nms: up to 1000 boxes it offsets each box by class * (max
 *    coordinate + 1) in float32 and runs one NMS (the float rounding of that
 *    offset is part of the result near the IoU threshold); above, one NMS per
 *    class, then all kept boxes in descending score;
 *  - nms: stable sort by descending score, float32 areas and IoU
 *    inter / (area_i + area_j - inter), suppressed when IoU > iou.
 */
#include "models/yolo9/prepost.h"

#include "models/nms.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_TOPK = 30000 };

typedef ly_nms_candidate candidate;

static float clampf(float v, float lo, float hi)
{
    return fminf(fmaxf(v, lo), hi);
}

static ly_status check_args(const ly_tensor *p, double ratio, int orig_w, int orig_h,
                            const ly_predict_options *o, ly_box **out, size_t *count)
{
    const char *fn = "ly_yolo9_postprocess";
    if (!out || !count) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: out or count is NULL", fn);
    if (!o) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: options is NULL", fn);
    ly_status st = ly_check_tensor(p, "ly_yolo9_postprocess: predictions", LY_F32);
    if (st != LY_OK) return st;
    char shape[96];
    if (p->ndim != 3 || p->shape[0] != 1 || p->shape[1] <= 4)
        return ly_set_error(LY_E_SHAPE, "%s: predictions %s: expected [1, 4 + nc, anchors]", fn,
                            ly_shape_str(p, shape, sizeof shape));
    if (p->shape[2] > INT32_MAX || p->shape[1] > INT32_MAX)
        return ly_set_error(LY_E_SHAPE, "%s: predictions %s: too large", fn,
                            ly_shape_str(p, shape, sizeof shape));
    if (!(ratio > 0) || !isfinite(ratio))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: ratio %g: expected a positive number", fn,
                            ratio);
    if (orig_w <= 0 || orig_h <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: image size %dx%d: expected positive", fn,
                            orig_w, orig_h);
    return LY_OK;
}

/* Candidates with score > conf, anchor-major. */
static ly_status gather(const float *pred, int64_t nc, int64_t anchors, const ly_predict_options *o,
                        candidate **out, size_t *count)
{
    size_t cap = 1024, n = 0;
    candidate *c = malloc(cap * sizeof *c);
    if (!c) return ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_postprocess: out of memory");
    const float *scores = pred + 4 * anchors;
    for (int64_t a = 0; a < anchors; a++) {
        for (int64_t k = 0; k < nc; k++) {
            float s = scores[k * anchors + a];
            if (!(s > o->conf)) continue;
            if (n == cap) {
                candidate *grown = realloc(c, 2 * cap * sizeof *c);
                if (!grown) {
                    free(c);
                    return ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_postprocess: out of memory");
                }
                c = grown, cap *= 2;
            }
            for (int i = 0; i < 4; i++)
                c[n].box[i] = pred[i * anchors + a];
            c[n].score = s;
            c[n].cls = (int)k;
            c[n].order = a * nc + k;
            n++;
        }
    }
    *out = c;
    *count = n;
    return LY_OK;
}

/* Un-letterbox and clip in place, dropping what has no finite area. */
static size_t to_image_boxes(candidate *c, size_t n, double ratio, int orig_w, int orig_h)
{
    /* Tensor / Python float divides in float32. */
    float r = (float)ratio, w = (float)orig_w, h = (float)orig_h;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        float *b = c[i].box;
        bool finite = isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3]) &&
                      isfinite(c[i].score);
        if (!finite) continue;
        b[0] = clampf(b[0] / r, 0.f, w);
        b[1] = clampf(b[1] / r, 0.f, h);
        b[2] = clampf(b[2] / r, 0.f, w);
        b[3] = clampf(b[3] / r, 0.f, h);
        if (!(b[2] - b[0] > 0.f) || !(b[3] - b[1] > 0.f)) continue;
        c[kept++] = c[i];
    }
    return kept;
}

ly_status ly_yolo9_postprocess(const ly_tensor *predictions, double ratio, int orig_w, int orig_h,
                               const ly_predict_options *options, ly_box **out, size_t *count)
{
    ly_status st = check_args(predictions, ratio, orig_w, orig_h, options, out, count);
    if (st != LY_OK) return st;
    *out = NULL;
    *count = 0;
    int64_t nc = predictions->shape[1] - 4, anchors = predictions->shape[2];

    candidate *c = NULL;
    size_t n = 0;
    st = gather(predictions->data, nc, anchors, options, &c, &n);
    if (st != LY_OK) return st;

    size_t topk = options->max_det > MIN_TOPK ? (size_t)options->max_det : MIN_TOPK;
    if (n > topk) {
        ly_nms_sort(c, n);
        n = topk;
    }
    n = to_image_boxes(c, n, ratio, orig_w, orig_h);
    ly_nms_sort(c, n);

    uint8_t *keep = malloc(n ? n : 1);
    if (!keep) {
        free(c);
        return ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_postprocess: out of memory");
    }
    st = ly_nms_batched(c, n, (double)options->iou, keep, "ly_yolo9_postprocess");
    size_t kept = 0;
    for (size_t i = 0; st == LY_OK && i < n; i++)
        kept += keep[i];
    if (kept > (size_t)options->max_det) kept = (size_t)options->max_det;
    ly_box *boxes = NULL;
    if (st == LY_OK && kept) {
        boxes = malloc(kept * sizeof *boxes);
        if (!boxes) st = ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_postprocess: out of memory");
    }
    for (size_t i = 0, j = 0; st == LY_OK && j < kept; i++) {
        if (!keep[i]) continue;
        memcpy(boxes[j].xyxy, c[i].box, sizeof c[i].box);
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
