/* SPDX-License-Identifier: MIT */
/*
 * What LibreYOLO's image classifiers share (internal): the eval transform
 * timm/torchvision run on a PIL image and the softmax of the logits.
 */
#ifndef LY_MODELS_COMMON_CLASSIFY_H
#define LY_MODELS_COMMON_CLASSIFY_H

#include "libreyolo/image.h"
#include "libreyolo/libreyolo.h"

#include <stdint.h>

/* Resize(floor(size / crop_pct)) of the shorter side (the longer one
 * int(short' * long / short)), PIL bicubic with antialias; CenterCrop(size)
 * at int(round((side - size) / 2)) (Python's round: halves to even);
 * ToTensor; Normalize(mean, std): input [3, size, size]. `what` names the
 * family in messages. */
ly_status ly_classify_eval_transform(const char *what, const ly_image_view *image, int size,
                                     double crop_pct, const float mean[3], const float std[3],
                                     float *input);

/* probs = softmax(logits), the sum in double. */
void ly_classify_softmax(const float *logits, int64_t n, float *probs);

#endif
