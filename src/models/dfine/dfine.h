/* SPDX-License-Identifier: MIT */
/*
 * D-FINE (internal): the pieces of the deformable-attention DETR decoder built
 * as graph nodes from a LibreYOLO checkpoint (detr.md 4-6). The pieces so far:
 * the HGNetv2 backbone, the hybrid encoder, the decoder layer and the head
 * around the decoder loop; the family's recipe assembles them.
 */
#ifndef LY_MODELS_DFINE_DFINE_H
#define LY_MODELS_DFINE_DFINE_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "models/common/builder.h"
#include "models/recipe.h"

/* The graph values a decoder layer reads. */
typedef struct ly_dfine_layer_inputs {
    ly_graph_value target;         /* f32 [B, Q, C] */
    ly_graph_value reference;      /* f32 [B, Q, 1, 4]: cx, cy, w, h in [0, 1] */
    ly_graph_value query_pos;      /* f32 [B, Q, C] */
    ly_graph_value memory;         /* f32 [B, sum(h*w), C]: the value, levels flattened h-major */
    ly_graph_value spatial_shapes; /* i64 [L, 2]: (h, w) per level */
} ly_dfine_layer_inputs;

/* Decoder layer `index` (keys decoder.decoder.layers.<index>.*) appended to
 * `g` (detr.md 4.5, 5): self-attention (nn.MultiheadAttention, q = k =
 * target + pos, v = target) + residual -> norm1; MSDeformableAttention on
 * the memory (sampling_offsets / attention_weights linears, softmax over
 * every level's points per head, loc = ref_xy + offset * num_points_scale *
 * ref_wh * 0.5) -> Gate (sigmoid(Linear(concat)) halves, its norm) or, where
 * the layer has no gateway keys (DEIMv2 atto-pico), residual -> norm2; FFN
 * (Linear -> ReLU, or SiLU for `silu`, -> Linear; or DEIMv2's SwiGLU where
 * its keys are) + residual -> clamp +-65504 -> norm3. The norms are
 * LayerNorm or, where the keys hold a .scale, RMSNorm. `heads` is the
 * attention head count; the points per level come from num_points_scale.
 * Batch 1; any number of queries. Every missing or misshapen key is an error
 * naming it. */
ly_status ly_dfine_decoder_layer(ly_graph *g, const ly_checkpoint *ck, int index, int heads,
                                 bool silu, int levels, const ly_dfine_layer_inputs *in,
                                 ly_graph_value *out);

/* The same layer where another family's differs only in what the D-FINE
 * lineage fixes (RF-DETR: rfdetr.md 8): its keys' prefix, the heads of the
 * self- and of the cross-attention, and no clamp. */
typedef struct ly_detr_layer_config {
    const char *what; /* how messages name the decoder */
    char prefix[96];  /* of the layer's keys: "decoder.decoder.layers.0." */
    int self_heads, cross_heads;
    bool silu;  /* SiLU in the FFN (else ReLU) */
    bool clamp; /* D-FINE's clamp to +-65504 before norm3 */
    int levels;
} ly_detr_layer_config;
ly_status ly_detr_decoder_layer(ly_graph *g, const ly_checkpoint *ck,
                                const ly_detr_layer_config *cfg, const ly_dfine_layer_inputs *in,
                                ly_graph_value *out);

/* HGNetv2 `arch` ("B0" for D-FINE/DEIM n, "Atto" for DEIMv2 atto; keys
 * backbone.*) on `image` f32 [1, 3, height, width] (detr.md 4): the padded
 * stem, the stages (depthwise downsample, HG blocks of plain or light
 * ConvBNAct layers, "se" aggregation, residual after each stage's first
 * block), BN folded into each conv, ReLU, and the LearnableAffineBlock after
 * every activation when `use_lab`. outs[i] is stage return_idx[i]'s map. */
ly_status ly_dfine_hgnetv2(ly_graph *g, const ly_checkpoint *ck, const char *arch, bool use_lab,
                           ly_graph_value image, int64_t height, int64_t width, int n_out,
                           const int *return_idx, ly_graph_value *outs);

/* RT-DETR's HGNetv2 for its sizes l and x (`arch` "L" or "X"; rtdetr.md 2,
 * hgnetv2.py): the same network without LearnableAffineBlocks, frozen norms
 * folded like the others, its own key spelling. outs: stages 1, 2, 3
 * (512, 1024, 2048 channels at strides 8, 16, 32). */
ly_status ly_rtdetr_hgnetv2(ly_graph *g, const ly_checkpoint *ck, const char *arch,
                            ly_graph_value image, int64_t height, int64_t width,
                            ly_graph_value outs[3]);

/* The D-FINE/DEIM HybridEncoder (keys encoder.*; detr.md 4) on `levels`
 * backbone maps feats[l] of shapes[l] = (c, h, w): input_proj (1x1 conv +
 * BN), AIFI on level `aifi_level` (the sin-cos position embedding built as
 * LibreYOLO builds it, w-major; MHA with `heads` heads, GELU FFN, post-norm),
 * the top-down FPN (lateral 1x1, nearest x2, RepNCSPELAN4) and the bottom-up
 * PAN (SCDown, RepNCSPELAN4). RT-DETR's (rtdetr.md 3), told apart by its
 * keys, has Sequential input_proj keys, SiLU laterals, CSPRepLayer blocks and
 * a 3x3 stride-2 ConvNormLayer + SiLU to downsample. The hidden width, FFN
 * width, CSP widths and bottleneck counts are read from the keys. outs[l]
 * per level. */
ly_status ly_dfine_hybrid_encoder(ly_graph *g, const ly_checkpoint *ck, int levels,
                                  const ly_graph_value *feats, const int64_t (*shapes)[3],
                                  int aifi_level, int heads, ly_graph_value *outs);

/* DEIMv2's LiteEncoder (atto, femto, pico; keys encoder.*; detr.md 5) on the
 * one backbone map feat of shape (c, h, w): input_proj, down_sample1 (AvgPool
 * 3x3 s2, 1x1 conv + BN + SiLU) with GAP fusion, then the FPN and PAN
 * RepNCSPELAN4 blocks of the csp2 flavour. outs: the stride-16 and
 * stride-32 maps. */
ly_status ly_dfine_lite_encoder(ly_graph *g, const ly_checkpoint *ck, ly_graph_value feat,
                                const int64_t shape[3], ly_graph_value *outs);

/* What the head's code (not its keys) varies by family. */
typedef struct ly_dfine_head_config {
    int queries, heads;
    bool silu;            /* DEIM, RT-DETRv4, DEIMv2: SiLU in the MLPs and LQE (D-FINE: ReLU) */
    bool query_pos_once;  /* DEIMv2: query_pos_head once before the loop (D-FINE: every layer) */
    bool shared_box_head; /* DEIMv2 atto-pico: one dec_bbox_head for all layers */
} ly_dfine_head_config;

/* The D-FINE transformer head (keys decoder.*; detr.md 4.1-4.7, 5) on the
 * encoder's `levels` maps (shapes[l] = (h, w)): input_proj (1x1 conv + BN
 * where its keys are, Identity otherwise), memory, the stored anchors and
 * valid mask, enc_output (where its keys are: DEIMv2 has none) and
 * enc_score_head, top-`queries` selection on the best class logit (ties:
 * lower index), enc_bbox_head, then every decoder layer (query_pos_head
 * clamped to +-10, the layer, pre_bbox_head after the first, dec_bbox_head
 * corners accumulated, Integral with W(n) from decoder.up / reg_scale,
 * distance2bbox), the last layer's dec_score_head + LQE. Outputs
 * pred_logits [1, Q, classes] and pred_boxes [1, Q, 4] (cxcywh in [0, 1]). */
ly_status ly_dfine_head(ly_graph *g, const ly_checkpoint *ck, int levels,
                        const ly_graph_value *maps, const int64_t (*shapes)[2],
                        const ly_dfine_head_config *cfg, ly_graph_value *logits,
                        ly_graph_value *boxes);

/* The head's building blocks the RT-DETR head shares (head.c). */
/* MLP at prefix + `name`: `layers` linears (layers.<i>), dims[0] -> dims[layers], `act`
 * between them. */
ly_graph_value ly_dfine_mlp(ly_builder *b, const char *name, ly_graph_value x, int layers,
                            const int64_t *dims, ly_op act);
/* inverse_sigmoid(x, eps 1e-5): log(clip(x, eps) / clip(1 - x, eps)) of x clipped to [0, 1]. */
ly_graph_value ly_dfine_inverse_sigmoid(ly_builder *b, ly_graph_value x);
/* The decoder's input_proj of level l (1x1 conv + BN where its keys are, identity otherwise). */
ly_graph_value ly_dfine_input_proj(ly_builder *b, int l, ly_graph_value map, int64_t hidden,
                                   const int64_t shape[2]);

/* The decoder's memory [1, tokens, hidden]: every level's map (shapes[l] =
 * (h, w)) through its input_proj, flattened h-major, levels one after
 * another (at most 4). */
ly_graph_value ly_dfine_memory(ly_builder *b, int levels, const ly_graph_value *maps,
                               const int64_t (*shapes)[2], int64_t hidden);
/* The anchors [1, tokens, 4] and valid mask [1, tokens, 1] as a checkpoint
 * stores them (prefix + anchors, valid_mask: bool, f32 or i64), the mask as
 * f32 0/1. */
void ly_dfine_stored_anchors(ly_builder *b, int64_t tokens, ly_graph_value *anchors,
                             ly_graph_value *valid);
/* Query selection (detr.md 4.3): enc_score_head on `out_memory` [1, tokens,
 * hidden], the top `queries` tokens by their best class logit (ties: lower
 * index), their rows of out_memory (*target) and enc_bbox_head(target) +
 * their anchors (*ref_unact); *selected (may be NULL): the tokens chosen, i64
 * [queries], best first. */
void ly_dfine_select_queries(ly_builder *b, ly_graph_value out_memory, ly_graph_value anchors,
                             int64_t tokens, int64_t hidden, int64_t classes, int queries,
                             ly_op act, ly_graph_value *target, ly_graph_value *ref_unact,
                             ly_graph_value *selected);

/* Pre- and post-processing (detr.md 8, 9). The whole image resized to size
 * x size with PIL's bilinear (models/pil_resize.h), /255, NCHW float32. */
ly_status ly_dfine_preprocess(const ly_image_view *image, int size, float *input);
/* sigmoid scores, top max_det of queries x classes (ties: lower index),
 * score > conf, cxcywh -> xyxy times the original size; no NMS, no clamping. */
ly_status ly_dfine_postprocess(const ly_tensor *logits, const ly_tensor *boxes, int orig_w,
                               int orig_h, const ly_predict_options *options, ly_box **out,
                               size_t *count);

/* The recipe hooks every DETR of the two families shares (recipe.h): outputs
 * pred_logits [1, Q, nc] and pred_boxes [1, Q, 4], named so, post-processed
 * by ly_dfine_postprocess at the original image's size. */
ly_status ly_detr_bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path);
void ly_detr_output_name(int index, char *buf, size_t size);
ly_status ly_detr_postprocess(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                              const ly_prep *prep, const ly_image_view *image,
                              const ly_predict_options *options, ly_box **boxes, size_t *count);

/* Build a DETR's graph from `ck` under the strict key audit (`rules`: keys
 * read by nothing; may be NULL) and attach it as d's engine at the fixed size
 * imgsz x imgsz (the anchors and the AIFI position embedding are built for
 * it), the class names from the checkpoint. Errors start with `context`. */
typedef ly_status (*ly_detr_build_fn)(const void *const *what, const ly_checkpoint *ck,
                                      int64_t imgsz, ly_graph *g);
struct ly_key_rules;
ly_status ly_detr_load_graph(const ly_checkpoint *ck, const struct ly_key_rules *rules,
                             const char *context, int64_t imgsz, ly_detr_build_fn build,
                             const void *const *what, ly_model_desc *d);

#endif
