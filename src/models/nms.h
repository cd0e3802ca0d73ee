/* SPDX-License-Identifier: MIT */
/*
 * Class-wise non-maximum suppression shared by the detector families
 * (internal), as torchvision's batched_nms runs on the CPU, so the same boxes
 * survive:
 *  - up to 1000 boxes it offsets each box by class * (max coordinate + 1) in
 *    float32 and runs one NMS (the float rounding of that offset is part of
 *    the result near the IoU threshold); above, one NMS per class;
 *  - nms: boxes in descending score (stable), float32 areas and IoU
 *    inter / (area_i + area_j - inter), suppressed when IoU > iou.
 */
#ifndef LY_MODELS_NMS_H
#define LY_MODELS_NMS_H

#include "libreyolo/libreyolo.h"

typedef struct ly_nms_candidate {
    float box[4]; /* x1, y1, x2, y2 */
    float score;
    int cls;
    int64_t order; /* position among the candidates: ties keep it */
} ly_nms_candidate;

/* Descending score, then ascending order (a stable descending sort). */
void ly_nms_sort(ly_nms_candidate *c, size_t n);

/* batched_nms over c[0..n) already sorted by ly_nms_sort; keep[i] is set to 1
 * for the survivors, 0 for the others. `who` prefixes error messages. */
ly_status ly_nms_batched(const ly_nms_candidate *c, size_t n, double iou, uint8_t *keep,
                         const char *who);

#endif
