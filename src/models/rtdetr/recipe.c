/* SPDX-License-Identifier: MIT */
/* The recipes of RT-DETR and RT-DETRv2 (recipe.h; rtdetr.md): LibreYOLO's
 * LibreRTDETR and LibreRTDETRv2 checkpoints with a PResNet backbone (r18,
 * r34, r50, r50m, r101) and RT-DETR's with HGNetv2 (l, x), OpenCV's bilinear resize of the whole
 * image, the D-FINE lineage's top-K post-processing, their defaults. */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "models/common/audit.h"
#include "models/dfine/dfine.h"
#include "models/rtdetr/rtdetr.h"
#include "models/yolo9/prepost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HEADS = 8, LEVELS = 3, QUERIES = 300, IMGSZ = 640 };

/* A size as LibreYOLO's RTDETR_CONFIGS builds it (rtdetr.md 1). */
typedef struct rtdetr_size {
    const char *size;
    int depth;           /* PResNet's; 0: HGNetv2 */
    const char *hgnetv2; /* its architecture where depth is 0 */
    int eval_idx;        /* the decoder layer whose outputs are the model's; -1: the last */
} rtdetr_size;

static const rtdetr_size sizes[] = {
    {"r18", 18, NULL, -1},   {"r34", 34, NULL, -1}, {"r50", 50, NULL, -1}, {"r50m", 50, NULL, 2},
    {"r101", 101, NULL, -1}, {"l", 0, "L", -1},     {"x", 0, "X", -1},
};

/* HGNetv2-L's and -X's channels at strides 8, 16, 32 */
static const int64_t hgnetv2_c[3] = {512, 1024, 2048};

typedef struct family {
    const char *name; /* in messages */
    bool v1;
} family;

static const family rtdetr = {"RT-DETR", true};
static const family rtdetrv2 = {"RT-DETRv2", false};

/* LibreYOLO's can_load (rtdetr.md 9): a ResNet or HGNetv2 backbone, both
 * input projections and a score head. The D-FINE lineage (which also has
 * these) keeps decoder.pre_bbox_head. RT-DETR comes first, so a v2 state dict
 * without metadata is read as v1, as LibreYOLO's factory does; the strict key
 * audit then refuses it by name, where LibreYOLO would load it non-strictly. */
static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    return (ly_model_has_key_starting(ck, "backbone.res_layers") ||
            ly_model_has_key_starting(ck, "backbone.stages")) &&
           ly_model_has_key_starting(ck, "encoder.input_proj") &&
           ly_model_has_key_starting(ck, "decoder.input_proj") &&
           (ly_model_has_key_starting(ck, "decoder.dec_score_head") ||
            ly_model_has_key_starting(ck, "decoder.enc_score_head")) &&
           !ly_model_has_key_starting(ck, "decoder.pre_bbox_head");
}

/* Block indices of a stage: 1 + the largest <i> of backbone.res_layers.<s>.blocks.<i>. */
static int blocks_of(const ly_checkpoint *ck, int stage)
{
    int n = 0;
    for (;; n++) {
        char key[96];
        snprintf(key, sizeof key, "backbone.res_layers.%d.blocks.%d.", stage, n);
        if (!ly_model_has_key_starting(ck, key)) break;
    }
    return n;
}

/* LibreYOLO's detect_size (rtdetr.md 9), in its order, checked against the
 * metadata's. */
static ly_status recognise_size(const family *f, const ly_checkpoint *ck, const char *path,
                                const rtdetr_size **out)
{
    bool wide = ly_model_key_extent(ck, "encoder.input_proj.0.0.weight", 0, 4) == 384;
    const char *by_keys;
    if (ly_model_has_key_starting(ck, "backbone.stages"))
        by_keys = wide ? "x" : "l";
    else if (wide)
        by_keys = "r101";
    else if (!ly_model_has_key_containing(ck, ".branch2c."))
        by_keys = blocks_of(ck, 0) <= 2 ? "r18" : "r34";
    else if (blocks_of(ck, 2) > 6)
        by_keys = "r101";
    else
        by_keys = ly_model_key_extent(ck, "encoder.fpn_blocks.0.conv1.conv.weight", 0, 4) == 128
                      ? "r50m"
                      : "r50";
    const rtdetr_size *found = NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(sizes[i].size, by_keys) == 0) found = &sizes[i];
    if (!f->v1 && found->depth == 0) /* rtdetrv2/model.py's _init_model */
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: LibreRTDETRv2 size '%s' uses an HGNetv2 "
                            "backbone (keys backbone.stages.*); use LibreRTDETR for HGNetv2 "
                            "variants",
                            path, found->size);
    *out = found;
    return ly_model_meta_size_agrees(ck, path, f->name, found->size);
}

/* r50m stores six decoder layers and runs three (eval_idx 2): the rest is
 * read by nothing. */
static const ly_key_rules r50m_rules = {
    .ignore_prefix = (const char *const[]){"decoder.decoder.layers.3.", "decoder.decoder.layers.4.",
                                           "decoder.decoder.layers.5.", "decoder.dec_score_head.3.",
                                           "decoder.dec_score_head.4.", "decoder.dec_score_head.5.",
                                           "decoder.dec_bbox_head.3.", "decoder.dec_bbox_head.4.",
                                           "decoder.dec_bbox_head.5.", NULL},
};

/* what[0]: the family, what[1]: the size */
static ly_status build(const void *const *what, const ly_checkpoint *ck, int64_t imgsz, ly_graph *g)
{
    const family *f = what[0];
    const rtdetr_size *z = what[1];
    ly_graph_value image, feats[LEVELS], maps[LEVELS];
    ly_graph_value logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE;
    int64_t shapes[LEVELS][3], hw[LEVELS][2];
    ly_status st = ly_graph_input(g, "images", LY_F32, 4, &image);
    if (st == LY_OK && z->depth)
        st = ly_rtdetr_presnet(g, ck, z->depth, image, imgsz, imgsz, feats, shapes);
    else if (st == LY_OK) {
        st = ly_rtdetr_hgnetv2(g, ck, z->hgnetv2, image, imgsz, imgsz, feats);
        for (int l = 0; l < LEVELS; l++) {
            shapes[l][0] = hgnetv2_c[l];
            shapes[l][1] = shapes[l][2] = imgsz >> (3 + l);
        }
    }
    if (st == LY_OK)
        st = ly_dfine_hybrid_encoder(g, ck, LEVELS, feats, (const int64_t(*)[3])shapes, 2, HEADS,
                                     maps);
    for (int l = 0; l < LEVELS; l++) {
        hw[l][0] = shapes[l][1];
        hw[l][1] = shapes[l][2];
    }
    ly_rtdetr_head_config head = {
        .queries = QUERIES, .heads = HEADS, .eval_idx = z->eval_idx, .v1 = f->v1};
    if (st == LY_OK)
        st = ly_rtdetr_head(g, ck, LEVELS, maps, (const int64_t(*)[2])hw, &head, &logits, &boxes);
    if (st == LY_OK) st = ly_graph_output(g, logits, "pred_logits");
    if (st == LY_OK) st = ly_graph_output(g, boxes, "pred_boxes");
    return st;
}

static ly_status load_family(const family *f, const ly_checkpoint *ck, const char *path,
                             ly_model_desc *d)
{
    const rtdetr_size *z = NULL;
    ly_status st = recognise_size(f, ck, path, &z);
    if (st != LY_OK) return st;
    snprintf(d->size, sizeof d->size, "%s", z->size);
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, IMGSZ, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    if (!f->v1 && imgsz != IMGSZ)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: RT-DETRv2 keeps its anchors for %dx%d only (its "
                            "metadata says imgsz %lld)",
                            path, IMGSZ, IMGSZ, (long long)imgsz);
    d->nc = ly_model_key_extent(ck, "decoder.dec_score_head.0.bias", 0, 1);
    if (d->nc <= 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: %s key 'decoder.dec_score_head.0.bias' missing "
                            "or not [classes]",
                            path, f->name);
    char context[600];
    snprintf(context, sizeof context, "ly_model_load: %s: %s-%s", path, f->name, z->size);
    const void *what[2] = {f, z};
    return ly_detr_load_graph(ck, z->eval_idx >= 0 ? &r50m_rules : NULL, context, imgsz, build,
                              what, d);
}

static ly_status load_rtdetr(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_family(&rtdetr, ck, path, d);
}

static ly_status load_rtdetrv2(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_family(&rtdetrv2, ck, path, d);
}

ly_status ly_rtdetr_preprocess(const ly_image_view *image, int64_t h, int64_t w, float *input)
{
    size_t plane = (size_t)h * (size_t)w;
    uint8_t *resized = malloc(plane * 3);
    if (!resized) return ly_set_error(LY_E_NO_MEMORY, "preprocess: out of memory");
    ly_status st = ly_resize_linear_u8c3(image->pixels, image->width, image->height, image->stride,
                                         resized, (int)w, (int)h, (size_t)w * 3);
    if (st == LY_OK) {
        bool bgr = image->format == LY_PIXELS_BGR;
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                input[(size_t)c * plane + i] =
                    (float)resized[i * 3 + (size_t)(bgr ? 2 - c : c)] / 255.0f;
    }
    free(resized);
    return st;
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    return ly_rtdetr_preprocess(image, h, w, input);
}

/* LibreYOLO validates both (executorch.md, its v1.6 support matrix). Here the
 * deformable attention is written in its portable form (src/export/msda_portable.c)
 * or, on request, as our custom operator. */
static const ly_export_rule export_rules[] = {
    {"detect", "executorch", LY_EXPORT_AVAILABLE,
     "The deformable attention is written in its portable form by default (ATen's "
     "grid_sampler_2d between XNNPACK partitions: ExecuTorch's own portable kernels run it), "
     "or with msda=custom as our operator libreyolo::ms_deform_attn.out (docs/attention.md; "
     "ExecuTorch runs it with plugins/executorch/) "
     "(LibreYOLO validates rtdetr and rtdetrv2 through its own grid-sample export).",
     LY_EXPORT_ET_CONSTRAINT
     "; both forms checked in ExecuTorch v1.4.1 (file and mmap "
     "loaders), v1.2.0 (file loader) and in libreyolo's runtime, RT-DETR-r18 and RT-DETRv2-r18: "
     "pred_logits within "
     "8.2e-5, pred_boxes within 5.6e-6 of LibreYOLO's max|ref| (2026-12-06)"},
    {NULL, NULL, LY_EXPORT_BLOCKED, NULL, NULL},
};

/* Not parameters: the anchors, the valid mask and MSDA's point scales (v2). */
static const char *const buffer_suffixes[] = {"decoder.anchors", "decoder.valid_mask",
                                              "num_points_scale", NULL};

#define RTDETR_RECIPE(name, loader, prefix, published)                                             \
    {                                                                                              \
        .family = name, .task = "detect",                                                          \
        .input_description = "float32 RGB /255, OpenCV bilinear resize (cv2.resize INTER_LINEAR "  \
                             "on uint8) of the whole image to the model's size, no letterbox",     \
        .batched = true, .default_conf = 0.25f, .default_iou = 0.45f /* unused: no NMS */,         \
        .default_max_det = 300, .accepts_keys = accepts_keys, .buffer_suffixes = buffer_suffixes,  \
        .load_checkpoint = loader, .bind = ly_detr_bind, .output_name = ly_detr_output_name,       \
        .preprocess = preprocess, .postprocess = ly_detr_postprocess, .file_prefix = prefix,       \
        .published_sizes = published, .export_rules = export_rules,                                \
    }

const ly_recipe ly_rtdetr_recipe =
    RTDETR_RECIPE("rtdetr", load_rtdetr, "LibreRTDETR",
                  ((const char *const[]){"r18", "r34", "r50", "r50m", "r101", "l", "x", NULL}));
/* RT-DETRv2 claims checkpoints by its metadata only (RT-DETR reads the keys first). */
const ly_recipe ly_rtdetrv2_recipe =
    RTDETR_RECIPE("rtdetrv2", load_rtdetrv2, "LibreRTDETRv2",
                  ((const char *const[]){"r18", "r34", "r50", "r50m", "r101", NULL}));
