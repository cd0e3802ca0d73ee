/* SPDX-License-Identifier: MIT */
/* The recipes of the D-FINE lineage (recipe.h): LibreYOLO's LibreDFINE,
 * LibreDEIM, LibreRTDETRv4 and LibreDEIMv2 (atto-n) checkpoints, their PIL
 * resize and top-K post-processing, their defaults (detr.md 1, 3, 5, 8, 9,
 * 11). One builder serves them all: what the keys cannot say is in the size
 * tables below. */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "models/common/audit.h"
#include "models/dfine/dfine.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { HEADS = 8, MAX_LEVELS = 3 };

/* A size as LibreYOLO's SIZE_CONFIGS builds it (models/deim/nn.py,
 * models/deimv2/nn.py). */
typedef struct lineage_size {
    const char *size;
    const char *backbone;
    bool use_lab;
    int levels;
    int stages[MAX_LEVELS];     /* the backbone's return_idx */
    int64_t feat_c[MAX_LEVELS]; /* their channels */
    int64_t strides[MAX_LEVELS];
    bool lite;      /* DEIMv2's LiteEncoder on the one map (else the hybrid encoder) */
    int aifi_level; /* use_encoder_idx */
    int queries;
    int64_t imgsz;
    bool shared_box_head;
} lineage_size;

static const lineage_size dfine_sizes[] = {
    {"n", "B0", true, 2, {2, 3}, {512, 1024}, {16, 32}, false, 1, 300, 640, false},
    {"s", "B0", true, 3, {1, 2, 3}, {256, 512, 1024}, {8, 16, 32}, false, 2, 300, 640, false},
    {"m", "B2", true, 3, {1, 2, 3}, {384, 768, 1536}, {8, 16, 32}, false, 2, 300, 640, false},
    {"l", "B4", false, 3, {1, 2, 3}, {512, 1024, 2048}, {8, 16, 32}, false, 2, 300, 640, false},
    {"x", "B5", false, 3, {1, 2, 3}, {512, 1024, 2048}, {8, 16, 32}, false, 2, 300, 640, false},
};

static const lineage_size deimv2_sizes[] = {
    {"atto", "Atto", true, 1, {2}, {256}, {16}, true, 0, 100, 320, true},
    {"femto", "Femto", true, 1, {2}, {512}, {16}, true, 0, 150, 416, true},
    {"pico", "Pico", true, 1, {2}, {512}, {16}, true, 0, 200, 640, true},
    {"n", "B0", true, 2, {2, 3}, {512, 1024}, {16, 32}, false, 1, 300, 640, false},
};

/* What tells the families apart. */
typedef struct lineage {
    const char *name; /* in messages */
    const lineage_size *sizes;
    size_t n_sizes;
    const char *first_size; /* RT-DETRv4 has no n */
    bool silu;              /* D-FINE's decoder is ReLU's, the others SiLU's (detr.md 1) */
    bool deimv2;
} lineage;

static const lineage dfine = {"D-FINE", dfine_sizes, 5, "n", false, false};
static const lineage deim = {"DEIM", dfine_sizes, 5, "n", true, false};
static const lineage rtdetrv4 = {"RT-DETRv4", dfine_sizes + 1, 4, "s", true, false};
static const lineage deimv2 = {"DEIMv2", deimv2_sizes, 4, "atto", true, true};

static bool has_key(const ly_checkpoint *ck, const char *key)
{
    ly_tensor view;
    bool found = ly_checkpoint_find(ck, key, &view) == LY_OK;
    ly_clear_error();
    return found;
}

static int64_t extent(const ly_checkpoint *ck, const char *key, int dim)
{
    return ly_model_key_extent(ck, key, dim, -1);
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "";
}

/* LibreYOLO's can_load (detr.md 11): DEIMv2 has swish_ffn keys (or a DINOv3
 * backbone); D-FINE, DEIM and RT-DETRv4 share decoder.pre_bbox_head and their
 * keys, so without metadata the file name decides (LibreDEIM...,
 * LibreRTDETRv4... or rtv4_...), else D-FINE. */
static bool lineage_keys(const ly_checkpoint *ck)
{
    return has_key(ck, "decoder.pre_bbox_head.layers.0.weight") &&
           !ly_model_has_key_containing(ck, "swish_ffn");
}

static bool accepts_deimv2(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    return ly_model_has_key_containing(ck, "swish_ffn") ||
           ly_model_has_key_containing(ck, "backbone.dinov3.") ||
           ly_model_has_key_containing(ck, "backbone.sta.");
}

static bool accepts_deim(const ly_checkpoint *ck, const char *path)
{
    const char *name = base_name(path);
    return lineage_keys(ck) && strncasecmp(name, "LibreDEIM", 9) == 0 &&
           strncasecmp(name, "LibreDEIMv2", 11) != 0;
}

static bool accepts_rtdetrv4(const ly_checkpoint *ck, const char *path)
{
    const char *name = base_name(path);
    return lineage_keys(ck) &&
           (strncasecmp(name, "LibreRTDETRv4", 13) == 0 || strncasecmp(name, "rtv4_", 5) == 0);
}

static bool accepts_dfine(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    return lineage_keys(ck);
}

/* The size by the keys (detr.md 11), checked against the metadata's. */
static ly_status recognise_size(const lineage *f, const ly_checkpoint *ck, const char *path,
                                const lineage_size **out)
{
    const char *by_keys = NULL;
    char why[200] = "";
    if (f->deimv2) {
        int64_t c = extent(ck, "decoder.dec_score_head.0.weight", 1);
        by_keys = c == 64 ? "atto" : c == 96 ? "femto" : c == 112 ? "pico" : c == 128 ? "n" : NULL;
        if (c == 192 || c == 224 || c == 256)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "ly_model_load: %s: a DEIMv2 of hidden width %lld is size s, m, l "
                                "or x, whose DINOv3/ViT backbone this build does not run (it runs "
                                "atto, femto, pico and n)",
                                path, (long long)c);
        snprintf(why, sizeof why,
                 "decoder.dec_score_head.0.weight has %lld input features (atto 64, femto 96, "
                 "pico 112, n 128)",
                 (long long)c);
    } else {
        int64_t c = extent(ck, "encoder.lateral_convs.0.conv.weight", 1);
        bool two_levels = has_key(ck, "encoder.input_proj.1.conv.weight") &&
                          !has_key(ck, "encoder.input_proj.2.conv.weight");
        int64_t proj = extent(ck, "encoder.input_proj.0.conv.weight", 1);
        by_keys = c == 128 && two_levels ? "n"
                  : c == 384             ? "x"
                  : c == 256             ? (proj == 256   ? "s"
                                            : proj == 384 ? "m"
                                            : proj == 512 ? "l"
                                                          : NULL)
                                         : NULL;
        snprintf(why, sizeof why,
                 "encoder.lateral_convs.0.conv.weight has %lld input channels and "
                 "encoder.input_proj.0.conv.weight %lld (n 128 on 2 levels; s, m, l 256 with "
                 "256, 384, 512; x 384)",
                 (long long)c, (long long)proj);
    }
    const lineage_size *found = NULL;
    for (size_t i = 0; by_keys && i < f->n_sizes; i++)
        if (strcmp(f->sizes[i].size, by_keys) == 0) found = &f->sizes[i];
    if (!found)
        return ly_set_error(LY_E_FORMAT, "ly_model_load: %s: no %s size has these keys: %s", path,
                            f->name, by_keys ? "RT-DETRv4 has sizes s-x only" : why);
    *out = found;
    return ly_model_meta_size_agrees(ck, path, f->name, found->size);
}

/* Keys a LibreYOLO model of the lineage has that inference never reads. */
static const ly_key_rules lineage_keys_read_by_nothing = {
    .ignore_exact = (const char *const[]){"decoder.denoising_class_embed.weight",
                                          "decoder.decoder.up", "decoder.decoder.reg_scale", NULL},
};

/* what[0]: the lineage, what[1]: the size */
static ly_status build(const void *const *what, const ly_checkpoint *ck, int64_t imgsz, ly_graph *g)
{
    const lineage *f = what[0];
    const lineage_size *z = what[1];
    ly_graph_value image, feats[MAX_LEVELS], maps[MAX_LEVELS];
    ly_graph_value logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE;
    int64_t feat_shapes[MAX_LEVELS][3], map_shapes[MAX_LEVELS][2];
    int map_levels = z->lite ? 2 : z->levels;
    for (int l = 0; l < MAX_LEVELS; l++) {
        int64_t stride = l < z->levels ? z->strides[l] : z->strides[0] << l;
        feat_shapes[l][0] = z->feat_c[l];
        feat_shapes[l][1] = feat_shapes[l][2] = imgsz / stride;
        map_shapes[l][0] = map_shapes[l][1] = imgsz / stride;
    }
    ly_dfine_head_config head = {.queries = z->queries,
                                 .heads = HEADS,
                                 .silu = f->silu,
                                 .query_pos_once = f->deimv2,
                                 .shared_box_head = z->shared_box_head};
    ly_status st = ly_graph_input(g, "images", LY_F32, 4, &image);
    if (st == LY_OK)
        st = ly_dfine_hgnetv2(g, ck, z->backbone, z->use_lab, image, imgsz, imgsz, z->levels,
                              z->stages, feats);
    if (st == LY_OK && z->lite)
        st = ly_dfine_lite_encoder(g, ck, feats[0], feat_shapes[0], maps);
    else if (st == LY_OK)
        st = ly_dfine_hybrid_encoder(g, ck, z->levels, feats, (const int64_t(*)[3])feat_shapes,
                                     z->aifi_level, HEADS, maps);
    if (st == LY_OK)
        st = ly_dfine_head(g, ck, map_levels, maps, (const int64_t(*)[2])map_shapes, &head, &logits,
                           &boxes);
    if (st == LY_OK) st = ly_graph_output(g, logits, "pred_logits");
    if (st == LY_OK) st = ly_graph_output(g, boxes, "pred_boxes");
    return st;
}

static ly_status load_lineage(const lineage *f, const ly_checkpoint *ck, const char *path,
                              ly_model_desc *d)
{
    const lineage_size *z = NULL;
    ly_status st = recognise_size(f, ck, path, &z);
    if (st != LY_OK) return st;
    snprintf(d->size, sizeof d->size, "%s", z->size);
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, z->imgsz, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    if (f->deimv2 && imgsz != z->imgsz)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: DEIMv2-%s is built for %lldx%lld only (its "
                            "metadata says imgsz %lld)",
                            path, z->size, (long long)z->imgsz, (long long)z->imgsz,
                            (long long)imgsz);
    d->nc = extent(ck, "decoder.dec_score_head.0.bias", 0);
    if (d->nc <= 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: %s key 'decoder.dec_score_head.0.bias' missing "
                            "or not [classes]",
                            path, f->name);

    char context[600];
    snprintf(context, sizeof context, "ly_model_load: %s: %s-%s", path, f->name, z->size);
    const void *what[2] = {f, z};
    return ly_detr_load_graph(ck, &lineage_keys_read_by_nothing, context, imgsz, build, what, d);
}

static ly_status load_dfine(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(&dfine, ck, path, d);
}

static ly_status load_deim(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(&deim, ck, path, d);
}

static ly_status load_rtdetrv4(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(&rtdetrv4, ck, path, d);
}

static ly_status load_deimv2(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(&deimv2, ck, path, d);
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    if (h != w)
        return ly_set_error(LY_E_SHAPE, "D-FINE: the input is square (%lldx%lld asked)",
                            (long long)h, (long long)w);
    return ly_dfine_preprocess(image, (int)h, input);
}

/* LibreYOLO blocks dfine, deim and deimv2 export (executorch.md L-SUPPORT:
 * strict capture trips on the deformable attention; DEIM's and DEIMv2's
 * programs fail at run time) and validates rtdetrv4 through manual grid
 * sampling. Here the deformable attention is written in its portable form
 * (src/export/msda_portable.c) or, on request, as our custom operator. */
static const ly_export_rule export_rules[] = {
    {"detect", "executorch", LY_EXPORT_AVAILABLE,
     "The deformable attention is written in its portable form by default (ATen's "
     "grid_sampler_2d between XNNPACK partitions: ExecuTorch's own portable kernels run it), "
     "or with msda=custom as our operator libreyolo::ms_deform_attn.out (docs/attention.md; "
     "ExecuTorch runs it with plugins/executorch/) "
     "(LibreYOLO blocks dfine, deim and deimv2 export).",
     LY_EXPORT_ET_CONSTRAINT "; both forms checked in ExecuTorch v1.4.1 (file and mmap "
                             "loaders), v1.2.0 (file loader) and in libreyolo's runtime, D-FINE-n, "
                             "DEIM-n and DEIMv2-atto: pred_logits within "
                             "3e-5, pred_boxes within 2.5e-6 of LibreYOLO's max|ref| (2026-12-06)"},
    {NULL, NULL, LY_EXPORT_BLOCKED, NULL, NULL},
};

/* Not parameters: the anchors, the valid mask and MSDA's point scales. */
static const char *const buffer_suffixes[] = {"decoder.anchors", "decoder.valid_mask",
                                              "num_points_scale", NULL};

/* One lineage, four families: what differs is the name, the loader, the
 * weights' file prefix, the sizes and recognition by keys. */
#define LINEAGE_RECIPE(name, loader, prefix, keys, ...)                                            \
    {                                                                                              \
        .family = name, .task = "detect",                                                          \
        .input_description = "float32 RGB /255, PIL bilinear resize (antialiased) to the "         \
                             "model's size, no letterbox",                                         \
        .batched = true, .default_conf = 0.25f, .default_iou = 0.45f /* unused: no NMS */,         \
        .default_max_det = 300, .accepts_keys = keys, .buffer_suffixes = buffer_suffixes,          \
        .load_checkpoint = loader, .bind = ly_detr_bind, .output_name = ly_detr_output_name,       \
        .preprocess = preprocess, .postprocess = ly_detr_postprocess, .file_prefix = prefix,       \
        .published_sizes = (const char *const[]){__VA_ARGS__, NULL}, .export_rules = export_rules, \
    }

const ly_recipe ly_dfine_recipe =
    LINEAGE_RECIPE("dfine", load_dfine, "LibreDFINE", accepts_dfine, "n", "s", "m", "l", "x");
const ly_recipe ly_deim_recipe =
    LINEAGE_RECIPE("deim", load_deim, "LibreDEIM", accepts_deim, "n", "s", "m", "l", "x");
const ly_recipe ly_rtdetrv4_recipe = LINEAGE_RECIPE("rtdetrv4", load_rtdetrv4, "LibreRTDETRv4",
                                                    accepts_rtdetrv4, "s", "m", "l", "x");
const ly_recipe ly_deimv2_recipe = LINEAGE_RECIPE("deimv2", load_deimv2, "LibreDEIMv2",
                                                  accepts_deimv2, "atto", "femto", "pico", "n");
