/* SPDX-License-Identifier: MIT */
/* Where annotation labels go (internal; src/models/annotate.c, and the test
 * that checks no label hides another or leaves the image). */
#ifndef LY_MODELS_ANNOTATE_H
#define LY_MODELS_ANNOTATE_H

#include "libreyolo/model.h"

typedef struct ly_label_place {
    bool drawn;     /* false: no room left for it (its box is still drawn) */
    int x, y, w, h; /* the label's rectangle, inside the image */
    int scale;      /* the font scale it is drawn at */
} ly_label_place;

/* Labels of detections d[0..n) (descending score) on a width x height image:
 * each placed above its box, else inside its top edge, below it, inside its
 * bottom edge (left- or right-aligned), at the first spot inside the image
 * that no better-scored label covers; at a smaller font where none fits; left
 * out where nothing fits. */
void ly_annotate_layout(int width, int height, const ly_detection *d, size_t n,
                        ly_label_place *out);
/* The same for tracked detections, whose labels are "#<id> 0.87" (ids NULL:
 * the detections' own labels). */
void ly_annotate_layout_tracks(int width, int height, const ly_detection *d, const int64_t *ids,
                               size_t n, ly_label_place *out);

#endif
