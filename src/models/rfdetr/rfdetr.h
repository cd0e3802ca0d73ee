/* SPDX-License-Identifier: MIT */
/*
 * RF-DETR (internal; rfdetr.md): LibreYOLO's LWDETR with a windowed DINOv2
 * backbone, a one-level projector, two-stage query selection and the D-FINE
 * lineage's decoder layer (models/dfine) with 8 self- and 16 cross-attention
 * heads.
 */
#ifndef LY_MODELS_RFDETR_RFDETR_H
#define LY_MODELS_RFDETR_RFDETR_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/model.h"

/* The windowed DINOv2-small and the projector (keys backbone.0.*; rfdetr.md
 * 4, 5) on `image` f32 [1, 3, size, size], size a multiple of 32: patch
 * embedding, CLS and positions (the table resized to the patch grid where
 * it is another's), 2x2 windows each with its CLS copy, 12 pre-norm blocks with
 * layer scale (global attention in blocks 3, 6 and 9), the shared LayerNorm
 * on stages 3, 6, 9 and 12, unwindowed; C2f with channels-first LayerNorms
 * and the final one. *map: [1, 256, size/16, size/16]. stages (may be NULL):
 * the four tapped stages as maps [1, 384, size/16, size/16]. */
ly_status ly_rfdetr_backbone(ly_graph *g, const ly_checkpoint *ck, ly_graph_value image,
                             int64_t size, ly_graph_value *map, ly_graph_value stages[4]);

/* DINOv2's position table for another grid (rfdetr.md 4): `table` [grid *
 * grid, c] (tokens h-major) resized to [h * w, c] at `out` as
 * F.interpolate(bicubic, align_corners False, antialias True) resizes it in
 * float32: Keys' kernel with a = -0.5, widened by the scale when shrinking,
 * normalised weights; the width first, then the height. Within 1e-7 of
 * PyTorch 1.13's values (24 -> 32: equal). */
ly_status ly_rfdetr_resize_positions(const float *table, int64_t grid, int64_t c, int64_t h,
                                     int64_t w, float *out);

/* The transformer and heads (keys transformer.*, refpoint_embed, query_feat,
 * class_embed, bbox_embed; rfdetr.md 6-9) on the projector's map of grid x
 * grid: proposals, group 0's two-stage heads, the top `queries` tokens, the
 * reparameterised reference boxes, `layers` post-norm decoder layers with the
 * sine embedding of those boxes as query position, the final norm, the class
 * head (classes + 1 columns) and the reparameterised boxes. *selected (may be
 * NULL): the tokens chosen, i64 [queries], best first. */
ly_status ly_rfdetr_head(ly_graph *g, const ly_checkpoint *ck, ly_graph_value map, int64_t grid,
                         int queries, int layers, ly_graph_value *logits, ly_graph_value *boxes,
                         ly_graph_value *selected);

/* LibreYOLO's preprocessing (rfdetr.md 3): PIL's bilinear resize of the whole
 * image to size x size, /255, ImageNet mean and std, RGB planes into input. */
ly_status ly_rfdetr_preprocess(const ly_image_view *image, int64_t size, float *input);

#endif
