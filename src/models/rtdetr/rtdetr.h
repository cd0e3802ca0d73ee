/* SPDX-License-Identifier: MIT */
/*
 * RT-DETR and RT-DETRv2 (internal; rtdetr.md): the pieces of the two families
 * that are their own. The hybrid encoder's AIFI, the decoder layer and the
 * multi-scale deformable attention are the D-FINE lineage's (models/dfine).
 */
#ifndef LY_MODELS_RTDETR_RTDETR_H
#define LY_MODELS_RTDETR_RTDETR_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/model.h"

/* PResNet-vd of `depth` 18, 34 (BasicBlock) or 50, 101 (BottleNeck) (keys
 * backbone.*; rtdetr.md 2) on `image` f32 [1, 3, height, width]: the three
 * 3x3 stem convs and the 3x3 stride-2 max pool, four stages whose first block
 * has a projection shortcut (AvgPool 2x2 then a 1x1 ConvNormLayer where it
 * strides), every norm (BatchNorm, or FrozenBatchNorm without a step count)
 * folded into its conv. outs[i], shapes[i] = (c, h, w): stages 1, 2, 3
 * (strides 8, 16, 32). Heights and widths must be multiples of 32, where
 * the shortcut's ceil-mode pooling is the plain one. */
ly_status ly_rtdetr_presnet(ly_graph *g, const ly_checkpoint *ck, int depth, ly_graph_value image,
                            int64_t height, int64_t width, ly_graph_value outs[3],
                            int64_t shapes[3][3]);

/* What the head's code (not its keys) varies by family and size. */
typedef struct ly_rtdetr_head_config {
    int queries, heads;
    int eval_idx; /* the layer whose outputs are the model's; negative: from the end */
    bool v1;      /* RT-DETR: anchors and valid mask computed for the actual size (RT-DETRv2
                     stores them) */
    ly_graph_value *selected; /* where to put the query selection's token indices (may be NULL) */
} ly_rtdetr_head_config;

/* The RT-DETR / RT-DETRv2 transformer head (keys decoder.*; rtdetr.md 4, 5)
 * on the encoder's `levels` maps (shapes[l] = (h, w)): input_proj, memory,
 * anchors and valid mask (stored, or computed as RT-DETR computes them),
 * enc_output, query selection, then the decoder layers up to eval_idx
 * (query_pos_head every layer, unclamped; the D-FINE lineage's layer with
 * value and output projections; boxes sigmoid(dec_bbox_head(out) +
 * inverse_sigmoid(ref)), each the next layer's reference). Outputs
 * pred_logits [1, Q, classes] and pred_boxes [1, Q, 4] (cxcywh in [0, 1]). */
ly_status ly_rtdetr_head(ly_graph *g, const ly_checkpoint *ck, int levels,
                         const ly_graph_value *maps, const int64_t (*shapes)[2],
                         const ly_rtdetr_head_config *cfg, ly_graph_value *logits,
                         ly_graph_value *boxes);

/* LibreYOLO's predict preprocessing (rtdetr.md 7): cv2.resize of the whole
 * image to w x h (INTER_LINEAR on uint8, aspect not kept), /255, RGB planes
 * into input [3, h, w]. */
ly_status ly_rtdetr_preprocess(const ly_image_view *image, int64_t h, int64_t w, float *input);

#endif
