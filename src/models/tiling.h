/* SPDX-License-Identifier: MIT */
/* Tiled detection as LibreYOLO's _predict_tiled (internal): the tiles'
 * boxes merged by class-wise NMS (its _merge_tile_detections). */
#ifndef LY_MODELS_TILING_H
#define LY_MODELS_TILING_H

#include "models/recipe.h"

/* The boxes of every tile, already shifted to the image, merged: rows with
 * a non-finite box or score dropped, the boxes moved to non-negative
 * coordinates for batched_nms's class offsets (IoU does not change), NMS at
 * `iou`, survivors in descending score. Writes the survivors to the front of
 * `boxes` (unshifted) and returns how many in *kept. */
ly_status ly_tiles_merge(ly_box *boxes, size_t n, double iou, size_t *kept);

/* What a tiled result ran with (model.c); false when it did not tile. */
bool ly_results_tiling(const ly_results *r, int *tile_size, double *overlap_ratio, float *conf,
                       float *iou);

#endif
