/* SPDX-License-Identifier: MIT */
/*
 * NanoDet's own pre- and post-processing (nanodet.md 2.4), around the network
 * imported from TF.js (internal).
 */
#ifndef LY_MODELS_NANODET_NANODET_H
#define LY_MODELS_NANODET_NANODET_H

#include "models/recipe.h"

#define LY_NANODET_MAX_LEVELS 8

/* The recipe's loader of its own paths (recipe.h, load_path). */
ly_status ly_nanodet_load_path(const char *path, ly_model_desc *d);

/* Where an image lands in the input: scaled by `scale` to new_width x
 * new_height and pasted at (offset_x, offset_y) on a zero size x size canvas. */
typedef struct ly_nanodet_letterbox {
    double scale;
    int new_width, new_height;
    int offset_x, offset_y;
} ly_nanodet_letterbox;

/* scale = min(size / w, size / h); new = round(w scale), round(h scale)
 * (at least 1, half to even); offsets (size - new) / 2, rounded down. */
ly_status ly_nanodet_letterbox_geometry(int width, int height, int size, ly_nanodet_letterbox *out);

/* The input f32 [3, size, size]: BGR planes of the image resized with OpenCV's
 * INTER_LINEAR (bit-exact), centred on zeros, then (x - mean) / std with mean
 * (103.53, 116.28, 123.675) and std (57.375, 57.12, 58.395) in 0..255 scale.
 * `pixels` are RGB, or BGR when `bgr`, rows `stride` bytes apart. */
ly_status ly_nanodet_preprocess(const uint8_t *pixels, int width, int height, size_t stride,
                                bool bgr, int size, float *out, ly_nanodet_letterbox *geometry);

/* The head's outputs per level (strides ascending): cls[l] [1, A_l, nc] class
 * probabilities, reg[l] [1, A_l, 4 * (R + 1)] GFL logits (l, t, r, b, side-major)
 * for an input of size x size, A_l = (size / strides[l])^2, row-major.
 * Decode: centres ((x + 0.5) s, (y + 0.5) s), per side the expectation of
 * softmax over the R + 1 bins times s, boxes clipped to [0, size]; candidates
 * (anchor, class) with score > conf, class-wise NMS (IoU > iou suppresses) in
 * input pixels, at most max_det in descending score; then mapped to the
 * original image ((v - offset) / scale) and clipped to it. `options` are
 * resolved (models/predict_options.h); their classes are not read: the class
 * filter follows postprocessing (model.c). *out (free() it) may be NULL when
 * there are none. */
ly_status ly_nanodet_postprocess(const ly_tensor *const *cls, const ly_tensor *const *reg,
                                 const int *strides, int levels, int size,
                                 const ly_nanodet_letterbox *geometry, int orig_w, int orig_h,
                                 const ly_predict_options *options, ly_box **out, size_t *count);

#endif
