/* SPDX-License-Identifier: MIT */
/* The Swin V1 recipe (recipe.h): LibreYOLO's LibreSwin classifiers (sizes t,
 * s, b, l; ../shared/specs/swin.md §3): patch embedding, four stages of
 * shifted-window blocks with patch merging between them, the final norm,
 * the mean over the map and the head; the eval transform ViT's (crop 0.9,
 * bicubic, ImageNet mean/std); window attention in the manual form by default
 * (fused_attn False on every WindowAttention, as LibreYOLO), the sdpa slot
 * after set_fused_attention, both the same bits. */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "libreyolo/sdpa.h"
#include "models/common/builder.h"
#include "models/common/classify.h"
#include "models/common/windows.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IMGSZ = 224, PATCH = 4, WINDOW = 7, SHIFT = 3, STAGES = 4, TABLE_ROWS = 169 };
#define CROP_PCT 0.9
#define NORM_EPS 1e-5

typedef struct swin_size {
    const char *size;
    int64_t width; /* C: stage s is C * 2^s wide */
    int depths[STAGES], heads[STAGES];
} swin_size;

static const swin_size sizes[] = {
    {"t", 96, {2, 2, 6, 2}, {3, 6, 12, 24}},
    {"s", 96, {2, 2, 18, 2}, {3, 6, 12, 24}},
    {"b", 128, {2, 2, 18, 2}, {4, 8, 16, 32}},
    {"l", 192, {2, 2, 18, 2}, {6, 12, 24, 48}},
};

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f},
                   imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* What a loaded model keeps: where to rebuild it from when the flag changes. */
typedef struct swin_data {
    ly_classify_flagged flag; /* first: the shared hooks read it */
    const swin_size *z;
} swin_data;

static int window_attentions(const swin_size *z)
{
    return z->depths[0] + z->depths[1] + z->depths[2] + z->depths[3];
}

static int64_t extent(const ly_checkpoint *ck, const char *key, int dim, int ndim)
{
    return ly_model_key_extent(ck, key, dim, ndim);
}

/* detect_size (§3.3): patch [C, 3, 4, 4], 169 bias-table rows, head.fc [nc,
 * 8C], stage 2's depth by its blocks 0..n-1. */
static const swin_size *detect_size(const ly_checkpoint *ck, char *why, size_t cap)
{
    int64_t c = extent(ck, "patch_embed.proj.weight", 0, 4);
    bool patch = c > 0 && extent(ck, "patch_embed.proj.weight", 1, 4) == 3 &&
                 extent(ck, "patch_embed.proj.weight", 2, 4) == PATCH &&
                 extent(ck, "patch_embed.proj.weight", 3, 4) == PATCH;
    bool rest =
        extent(ck, "layers.0.blocks.0.attn.relative_position_bias_table", 0, 2) == TABLE_ROWS &&
        extent(ck, "head.fc.weight", 1, 2) == 8 * c;
    int depth = 0;
    for (;; depth++) {
        char key[64];
        snprintf(key, sizeof key, "layers.2.blocks.%d.norm1.weight", depth);
        if (extent(ck, key, 0, 1) < 0) break;
    }
    snprintf(why, cap,
             "patch_embed.proj.weight [C, 3, 4, 4], a 169-row relative position bias table, "
             "head.fc.weight [classes, 8C] and stage 2 of 6 or 18 blocks; found C = %lld, %d "
             "blocks",
             (long long)c, depth);
    if (!patch || !rest) return NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].width == c && sizes[i].depths[2] == depth) return &sizes[i];
    return NULL;
}

/* can_load: Swin V1's keys (SwinV2's cpb_mlp and logit_scale refused) and a size. */
static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    static const char *const needed[] = {"patch_embed.proj.weight",
                                         "layers.0.blocks.0.attn.relative_position_bias_table",
                                         "norm.weight", "head.fc.weight"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        ly_tensor view;
        if (ly_checkpoint_find(ck, needed[i], &view) != LY_OK) {
            ly_clear_error();
            return false;
        }
    }
    if (ly_model_has_key_containing(ck, "cpb_mlp") ||
        ly_model_has_key_containing(ck, "logit_scale"))
        return false;
    char why[256];
    return detect_size(ck, why, sizeof why) != NULL;
}

/* PatchMerging (§3.2 2): the 2x2 quadrants (0,0), (1,0), (0,1), (1,1) as
 * (dy, dx) side by side, LayerNorm(4c), Linear 4c -> 2c without bias. */
static ly_graph_value merge(ly_builder *b, ly_graph_value x, int64_t side, int64_t c)
{
    int64_t split[6] = {1, side / 2, 2, side / 2, 2, c}, order[6] = {0, 1, 3, 4, 2, 5};
    int64_t merged[4] = {1, side / 2, side / 2, 4 * c};
    x = ly_build_permute(b, "quadrants", ly_build_reshape(b, "quadrants", x, 6, split), 6, order);
    x = ly_build_reshape(b, "quadrants", x, 4, merged);
    x = ly_build_layer_norm(b, "norm", x, 4 * c, NORM_EPS);
    int64_t wshape[2] = {2 * c, 4 * c};
    ly_graph_value in[2] = {x, ly_build_weight(b, "reduction.weight", 2, wshape)};
    return ly_build_node(b, LY_OP_LINEAR, "reduction", 2, in, NULL);
}

static ly_status build(const ly_checkpoint *ck, const swin_size *z, int64_t classes, bool fused,
                       ly_graph *g)
{
    ly_builder b = {.g = g, .ck = ck, .what = "Swin", .st = LY_OK};
    int64_t c = z->width, side = IMGSZ / PATCH;
    ly_graph_value image;
    ly_build_fail(&b, ly_graph_input(g, "images", LY_F32, 4, &image));

    /* PatchEmbed: conv 4x4 /4 with bias, NCHW -> NHWC, LayerNorm */
    int64_t wshape[4] = {c, 3, PATCH, PATCH}, to_hwc[4] = {0, 2, 3, 1};
    ly_graph_value w = ly_build_weight(&b, "patch_embed.proj.weight", 4, wshape);
    ly_graph_value bias = ly_build_weight(&b, "patch_embed.proj.bias", 1, &c);
    ly_conv2d_params cp = LY_CONV2D_DEFAULTS;
    cp.stride[0] = cp.stride[1] = PATCH;
    ly_graph_value x = LY_GRAPH_NONE;
    if (b.st == LY_OK)
        ly_build_fail(
            &b, ly_graph_conv2d(g, "patch_embed.proj", image, w, bias, LY_GRAPH_NONE, &cp, &x));
    snprintf(b.prefix, sizeof b.prefix, "patch_embed.");
    x = ly_build_layer_norm(&b, "norm", ly_build_permute(&b, "proj", x, 4, to_hwc), c, NORM_EPS);

    for (int s = 0; s < STAGES && b.st == LY_OK; s++) {
        if (s > 0) {
            snprintf(b.prefix, sizeof b.prefix, "layers.%d.downsample.", s);
            x = merge(&b, x, side, c);
            side /= 2;
            c *= 2;
        }
        ly_window_block k = {.h = side,
                             .w = side,
                             .c = c,
                             .heads = z->heads[s],
                             .window = WINDOW,
                             .hidden = 4 * c,
                             .mask = ly_build_shift_mask(&b, side, side, WINDOW, SHIFT),
                             .fused = fused};
        ly_build_shifted_window_order(&b, k.h, k.w, WINDOW, SHIFT, k.order);
        k.to = LY_TOKENS_MAP;
        for (int j = 0; j < z->depths[s] && b.st == LY_OK; j++) {
            snprintf(b.prefix, sizeof b.prefix, "layers.%d.blocks.%d.", s, j);
            k.shift = j % 2 == 1 ? SHIFT : 0;
            k.from = k.to; /* the last block's order: each block hands on its windows */
            k.to = j + 1 < z->depths[s] ? ly_window_block_order(&k) : LY_TOKENS_MAP;
            x = ly_build_window_block(&b, x, &k);
        }
    }
    /* head (§3.2 4): LayerNorm(8C), mean over H and W, head.fc */
    b.prefix[0] = '\0';
    x = ly_build_layer_norm(&b, "norm", x, c, NORM_EPS);
    int64_t to_chw[4] = {0, 3, 1, 2}, pooled[2] = {1, c};
    x = ly_build_permute(&b, "pool", x, 4, to_chw);
    ly_pool2d_params pp = LY_POOL2D_DEFAULTS;
    pp.kernel[0] = pp.kernel[1] = pp.stride[0] = pp.stride[1] = side;
    x = ly_build_reshape(&b, "pool", ly_build_node(&b, LY_OP_AVG_POOL2D, "pool", 1, &x, &pp), 2,
                         pooled);
    ly_graph_value logits = ly_build_linear(&b, "head.fc", x, classes, c);
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_output(g, logits, "logits"));
    return b.st;
}

static ly_status build_net(const ly_checkpoint *ck, const ly_classify_flagged *f, int64_t classes,
                           bool fused, ly_graph *g)
{
    return build(ck, ((const swin_data *)f)->z, classes, fused, g);
}

static ly_status load(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    char why[256];
    const swin_size *z = detect_size(ck, why, sizeof why);
    if (!z)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: no Swin size has these keys (expected %s; t 96 "
                            "with 6, s 96, b 128, l 192 with 18)",
                            path, why);
    ly_status st = ly_model_meta_size_agrees(ck, path, "Swin", z->size);
    if (st != LY_OK) return st;
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, IMGSZ, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    if (imgsz != IMGSZ)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: Swin takes 224x224 only; the metadata says imgsz "
                            "%lld",
                            path, (long long)imgsz);
    d->nc = extent(ck, "head.fc.weight", 0, 2);
    swin_data *data = calloc(1, sizeof *data);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    snprintf(data->flag.path, sizeof data->flag.path, "%s", path);
    data->flag.what = "Swin";
    data->flag.modules = window_attentions(z); /* every WindowAttention: 12 on t, 24 on s-l */
    data->flag.build = build_net;
    data->z = z;
    /* LibreYOLO's fused_attn False: the manual form */
    return ly_classify_load(d, ck, &data->flag, false, z->size, IMGSZ);
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    if (h != IMGSZ || w != IMGSZ)
        return ly_set_error(LY_E_SHAPE, "Swin: the input is 224x224 (%lldx%lld asked)",
                            (long long)h, (long long)w);
    return ly_classify_eval_transform("Swin", image, IMGSZ, CROP_PCT, imagenet_mean, imagenet_std,
                                      input);
}

const ly_recipe ly_swin_recipe = {
    .family = "swin",
    .task = "classify",
    .input_description = "float32 RGB, PIL bicubic resize (antialiased) of the shorter side to "
                         "248, centre crop 224, ImageNet mean/std",
    .default_conf = 0.0f,
    .default_iou = 0.0f,
    .default_max_det = 5,
    .accepts_keys = accepts_keys,
    .load_checkpoint = load,
    .bind = ly_classify_bind,
    .free_data = free,
    .output_name = ly_classify_output_name,
    .set_fused_attention = ly_classify_set_fused,
    .fused_attention = ly_classify_fused_state,
    .capture_graph = ly_classify_capture_graph,
    .preprocess = preprocess,
    .probabilities = ly_classify_probabilities,
    .file_prefix = "LibreSwin",
    .published_sizes = (const char *const[]){"t", "s", "b", "l", NULL},
    .crop_pct = CROP_PCT,
    .interpolation = "bicubic",
};
