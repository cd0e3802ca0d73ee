/* SPDX-License-Identifier: MIT */
/* The recipe of RF-DETR (recipe.h; rfdetr.md): LibreYOLO's LibreRFDETR
 * detection checkpoints (n, s, m, l), PIL's bilinear resize of the whole
 * image with ImageNet's mean and std, the D-FINE lineage's top-K
 * post-processing over every column (the no-object one included, as
 * LibreYOLO's), its defaults. */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "models/dfine/dfine.h"
#include "models/pil_resize.h"
#include "models/rfdetr/rfdetr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { QUERIES = 300 };

/* RFDETR_CONFIGS (rfdetr.md 2): input size and decoder layers; the position
 * table has 1 + (size/16)^2 rows. */
typedef struct rfdetr_size {
    const char *size;
    int64_t imgsz;
    int layers;
} rfdetr_size;

static const rfdetr_size sizes[] = {{"n", 384, 2}, {"s", 512, 3}, {"m", 576, 4}, {"l", 704, 4}};

#define POSITIONS "backbone.0.encoder.encoder.embeddings.position_embeddings"

/* LibreYOLO imports RF-DETR only for checkpoints with these keys (or its
 * metadata; rfdetr.md 12), and its can_load then takes them. */
static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    return ly_model_has_key_containing(ck, "dinov2") ||
           ly_model_has_key_containing(ck, "query_embed") ||
           ly_model_has_key_containing(ck, "enc_out_class_embed") ||
           ly_model_has_key_containing(ck, "enc_out_bbox_embed");
}

/* The heads of the tasks this build does not run yet (rfdetr.md 11). */
static const char *task_by_keys(const ly_checkpoint *ck)
{
    if (ly_model_has_key_containing(ck, "segmentation_head")) return "segment";
    if (ly_model_has_key_containing(ck, "keypoint_head")) return "pose";
    if (ly_model_has_key_containing(ck, "angle_embed")) return "obb";
    return "detect";
}

/* detect_size (rfdetr.md 12): the metadata's size, else the position
 * table's rows; both where both are there, which must agree. */
static ly_status recognise(const ly_checkpoint *ck, const char *path, const rfdetr_size **out)
{
    const char *task = NULL;
    if (ly_checkpoint_meta_string(ck, "task", &task) != LY_OK || !task) {
        ly_clear_error();
        task = task_by_keys(ck);
    }
    if (strcmp(task, "detect") != 0)
        return ly_set_error(
            LY_E_UNSUPPORTED,
            "ly_model_load: %s: an RF-DETR for the task '%s', which this build does "
            "not run yet (it runs detect)",
            path, task);
    int64_t rows = ly_model_key_extent(ck, POSITIONS, 1, 3);
    const rfdetr_size *by_keys = NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t grid = sizes[i].imgsz / 16;
        if (rows == 1 + grid * grid) by_keys = &sizes[i];
    }
    if (!by_keys)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: RF-DETR key '" POSITIONS "' missing or of %lld "
                            "rows, expected 577 (n), 1025 (s), 1297 (m) or 1937 (l)",
                            path, (long long)rows);
    *out = by_keys;
    return ly_model_meta_size_agrees(ck, path, "RF-DETR", by_keys->size);
}

/* what[0]: the size */
static ly_status build(const void *const *what, const ly_checkpoint *ck, int64_t imgsz, ly_graph *g)
{
    const rfdetr_size *z = what[0];
    ly_graph_value image, map = LY_GRAPH_NONE, logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE;
    ly_status st = ly_graph_input(g, "images", LY_F32, 4, &image);
    if (st == LY_OK) st = ly_rfdetr_backbone(g, ck, image, imgsz, &map, NULL);
    if (st == LY_OK)
        st = ly_rfdetr_head(g, ck, map, imgsz / 16, QUERIES, z->layers, &logits, &boxes, NULL);
    if (st == LY_OK) st = ly_graph_output(g, logits, "pred_logits");
    if (st == LY_OK) st = ly_graph_output(g, boxes, "pred_boxes");
    return st;
}

static ly_status load(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    const rfdetr_size *z = NULL;
    ly_status st = recognise(ck, path, &z);
    if (st != LY_OK) return st;
    snprintf(d->size, sizeof d->size, "%s", z->size);
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, z->imgsz, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    int64_t columns = ly_model_key_extent(ck, "class_embed.bias", 0, 1);
    if (columns < 2)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: RF-DETR key 'class_embed.bias' missing or not "
                            "[classes + 1]",
                            path);
    d->nc = columns - 1;
    char context[600];
    snprintf(context, sizeof context, "ly_model_load: %s: RF-DETR-%s", path, z->size);
    const void *what[1] = {z};
    return ly_detr_load_graph(ck, NULL, context, imgsz, build, what, d);
}

/* pred_logits has a column more than the classes: LibreYOLO's no-object. */
static ly_status bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    bool ok = n_outputs >= 2 && outputs[0].ndim == 3 && outputs[0].shape[0] == 1 &&
              outputs[0].shape[2] == d->nc + 1 && outputs[1].ndim == 3 &&
              outputs[1].shape[1] == outputs[0].shape[1] && outputs[1].shape[2] == 4;
    if (!ok)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the network's outputs are not RF-DETR's "
                            "pred_logits [1, Q, %lld] and pred_boxes [1, Q, 4]",
                            path, (long long)(d->nc + 1));
    return LY_OK;
}

ly_status ly_rfdetr_preprocess(const ly_image_view *image, int64_t size, float *input)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    size_t plane = (size_t)size * (size_t)size;
    uint8_t *resized = malloc(plane * 3);
    if (!resized) return ly_set_error(LY_E_NO_MEMORY, "preprocess: out of memory");
    ly_status st = ly_pil_resize(image, (int)size, (int)size, LY_PIL_BILINEAR, resized);
    if (st == LY_OK)
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                input[(size_t)c * plane + i] =
                    ((float)resized[i * 3 + (size_t)c] / 255.0f - mean[c]) / std[c];
    free(resized);
    return st;
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)w;
    (void)prep;
    return ly_rfdetr_preprocess(image, h, input);
}

/* LibreYOLO validates detect (executorch.md, its support matrix). Here the
 * deformable attention is written in its portable form (src/export/msda_portable.c)
 * or, on request, as our custom operator; exp, sin and cos are ATen's. */
static const ly_export_rule export_rules[] = {
    {"detect", "executorch", LY_EXPORT_AVAILABLE,
     "The deformable attention is written in its portable form by default (ATen's "
     "grid_sampler_2d between XNNPACK partitions: ExecuTorch's own portable kernels run it), "
     "or with msda=custom as our operator libreyolo::ms_deform_attn.out (docs/attention.md; "
     "ExecuTorch runs it with plugins/executorch/).",
     LY_EXPORT_ET_CONSTRAINT "; both forms checked in ExecuTorch v1.4.1 (file and mmap "
                             "loaders), v1.2.0 (file loader) and in libreyolo's runtime, "
                             "RF-DETR-n: pred_logits within 1.5e-6, pred_boxes within "
                             "1.2e-7 of LibreYOLO's max|ref| (2026-12-06)"},
    {"segment", NULL, LY_EXPORT_BLOCKED, "This build does not run RF-DETR's segment task yet.",
     NULL},
    {"pose", NULL, LY_EXPORT_BLOCKED, "This build does not run RF-DETR's pose task yet.", NULL},
    {"obb", NULL, LY_EXPORT_BLOCKED, "This build does not run RF-DETR's obb task yet.", NULL},
    {NULL, NULL, LY_EXPORT_BLOCKED, NULL, NULL},
};

const ly_recipe ly_rfdetr_recipe = {
    .family = "rfdetr",
    .task = "detect",
    .input_description = "float32 RGB, PIL bilinear resize (antialiased when shrinking) of the "
                         "whole image to the model's size, /255, ImageNet mean and std",
    .default_conf = 0.25f,
    .default_iou = 0.45f, /* unused: no NMS */
    .default_max_det = 300,
    .no_object_class = true,
    .accepts_keys = accepts_keys,
    .load_checkpoint = load,
    .bind = bind,
    .output_name = ly_detr_output_name,
    .preprocess = preprocess,
    .postprocess = ly_detr_postprocess,
    .file_prefix = "LibreRFDETR",
    .published_sizes = (const char *const[]){"n", "s", "m", "l", NULL},
    .tasks = (const char *const[]){"detect", "segment", "pose", "obb", NULL},
    .export_rules = export_rules,
};
