/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO's pre- and post-processing around the YOLO9 network (internal;
 * yolo9.md 1.5 and 1.7).
 */
#ifndef LY_MODELS_YOLO9_PREPOST_H
#define LY_MODELS_YOLO9_PREPOST_H

#include "models/recipe.h"

/* ---- Preprocessing ------------------------------------------------------ */

/* cv::resize(src, dst, (dw, dh), interpolation=INTER_LINEAR) of an interleaved
 * 8-bit 3-channel image, bit for bit as OpenCV 4 computes it on x86-64
 * (exact 2x reductions become 2x2 averages, everything else is 11-bit
 * fixed-point bilinear). Strides are in bytes. */
ly_status ly_resize_linear_u8c3(const uint8_t *src, int sw, int sh, size_t src_stride, uint8_t *dst,
                                int dw, int dh, size_t dst_stride);

/* Where an image lands in the letterboxed input: scaled by `ratio` to
 * new_width x new_height, pasted at the top-left. */
typedef struct ly_letterbox {
    double ratio;
    int new_width, new_height;
} ly_letterbox;

/* r = min(target_h / h, target_w / w); new = (max(int(w r), 1), max(int(h r), 1)). */
ly_status ly_letterbox_geometry(int width, int height, int target_h, int target_w,
                                ly_letterbox *out);

/* Letterbox an RGB (or BGR, when `bgr`) image of width x height pixels, rows
 * `stride` bytes apart, into `out` = f32 [3, target_h, target_w] (RGB planes,
 * /255, 114 outside the pasted image) and report the geometry. */
ly_status ly_yolo9_preprocess(const uint8_t *pixels, int width, int height, size_t stride, bool bgr,
                              int target_h, int target_w, float *out, ly_letterbox *geometry);

/* ---- Postprocessing ----------------------------------------------------- */

/* Decode `predictions` [1, 4 + nc, A] (xyxy in input pixels, then class
 * scores) of an image letterboxed with `ratio` from orig_w x orig_h:
 * candidates (anchor, class) with score > conf, at most max(max_det, 30000) of
 * them, boxes divided by `ratio` and clipped to the image, degenerate and
 * non-finite ones dropped, class-wise NMS as torchvision's batched_nms (IoU >
 * iou suppresses), at most max_det kept, in descending score. `options` are
 * resolved (models/predict_options.h); their classes are not read: the class
 * filter follows postprocessing (model.c), as LibreYOLO's _wrap_results.
 * *out (free() it) receives *count boxes; it may be NULL when there are none. */
ly_status ly_yolo9_postprocess(const ly_tensor *predictions, double ratio, int orig_w, int orig_h,
                               const ly_predict_options *options, ly_box **out, size_t *count);

#endif
