/* SPDX-License-Identifier: MIT */
/* The ViT and DeiT recipes (recipe.h): LibreYOLO's LibreViT classifiers
 * (sizes ti, s, b, l; attention-families.md 3) and LibreDeiT (t, s, b: the
 * plain patch-16 224 models, ViT's layout exactly, no distillation token),
 * their eval transform (PIL bicubic resize of the shorter side to
 * floor(224 / crop_pct), centre crop, mean/std), softmax probabilities, and
 * the fused-attention flag every attention module carries (on by default, as
 * upstream). */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "libreyolo/sdpa.h"
#include "models/common/builder.h"
#include "models/common/classify.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IMGSZ = 224, PATCH = 16, TOKENS = 197 };
#define CROP_PCT 0.9

typedef struct vit_size {
    const char *size;
    int64_t width, depth, heads;
} vit_size;

/* What tells ViT and DeiT apart: names, sizes and normalisation. */
typedef struct vit_family {
    const char *name; /* in messages */
    const vit_size *sizes;
    size_t n_sizes;
    float mean[3], std[3];
} vit_family;

static const vit_size vit_sizes[] = {
    {"ti", 192, 12, 3}, {"s", 384, 12, 6}, {"b", 768, 12, 12}, {"l", 1024, 24, 16}};
static const vit_size deit_sizes[] = {{"t", 192, 12, 3}, {"s", 384, 12, 6}, {"b", 768, 12, 12}};

/* ViT: AugReg's 0.5 (V-UTIL). DeiT: timm's deit_*_patch16_224 configuration,
 * ImageNet's (LibreYOLO's deit/utils.py is not in the stored sources; its
 * crop_pct 0.9 and bicubic are from deit/model.py). */
static const vit_family vit = {"ViT", vit_sizes, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
static const vit_family deit = {
    "DeiT", deit_sizes, 3, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};

/* What a loaded model keeps: where to rebuild it from when the flag changes. */
typedef struct vit_data {
    ly_classify_flagged flag; /* first: the shared hooks read it */
    const vit_family *f;
    const vit_size *z;
} vit_data;

static int64_t extent(const ly_checkpoint *ck, const char *key, int dim, int ndim)
{
    return ly_model_key_extent(ck, key, dim, ndim);
}

/* detect_size (3.1): patch 16 on 3 channels, 197 position rows, the class
 * token, the head's columns and blocks 0..n-1. */
static const vit_size *detect_size(const vit_family *f, const ly_checkpoint *ck, char *why,
                                   size_t cap)
{
    int64_t e = extent(ck, "patch_embed.proj.weight", 0, 4);
    bool patch = e > 0 && extent(ck, "patch_embed.proj.weight", 1, 4) == 3 &&
                 extent(ck, "patch_embed.proj.weight", 2, 4) == PATCH &&
                 extent(ck, "patch_embed.proj.weight", 3, 4) == PATCH;
    bool rest = extent(ck, "pos_embed", 1, 3) == TOKENS && extent(ck, "pos_embed", 2, 3) == e &&
                extent(ck, "cls_token", 2, 3) == e && extent(ck, "head.weight", 1, 2) == e;
    int64_t depth = 0;
    for (;; depth++) {
        char key[64];
        snprintf(key, sizeof key, "blocks.%lld.norm1.weight", (long long)depth);
        if (extent(ck, key, 0, 1) < 0) break;
    }
    snprintf(why, cap,
             "patch_embed.proj.weight [E, 3, 16, 16], pos_embed [1, 197, E], cls_token [1, 1, E], "
             "head.weight [classes, E] and %lld blocks with E = %lld",
             (long long)depth, (long long)e);
    if (!patch || !rest) return NULL;
    for (size_t i = 0; i < f->n_sizes; i++)
        if (f->sizes[i].width == e && f->sizes[i].depth == depth) return &f->sizes[i];
    return NULL;
}

static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    char why[256];
    return detect_size(&vit, ck, why, sizeof why) != NULL;
}

/* nn.LayerNorm(eps 1e-6) at prefix + name. */
static ly_graph_value layer_norm(ly_builder *b, const char *name, ly_graph_value x, int64_t c)
{
    return ly_build_layer_norm(b, name, x, c, 1e-6);
}

/* Attention (3.3): q, k and v as three linears on the rows of attn.qkv's
 * weight and bias, each [B, tokens, heads, d] as it comes out, then sdpa
 * (fused) tokens first, or softmax((q * d^-0.5) @ k^T) @ v from the graph's
 * own ops on heads-first transposes (manual); the projection adds
 * `residual`. One qkv linear needs a 5-d transpose (a copy, on the
 * reference: no provider has 5-d) to split the heads and another to merge
 * them; three linears write the same rows where the attention reads them. */
static ly_graph_value attention(ly_builder *b, ly_graph_value x, ly_graph_value residual,
                                const vit_size *z, bool fused)
{
    int64_t e = z->width, h = z->heads, d = e / h;
    int64_t wshape[2] = {3 * e, e}, bshape = 3 * e;
    const float *w = ly_build_take(b, "attn.qkv.weight", 2, wshape);
    const float *bias = ly_build_take(b, "attn.qkv.bias", 1, &bshape);
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    int64_t split[4] = {LY_RESHAPE_KEEP, TOKENS, h, d};
    static const char *const names[3] = {"attn.q", "attn.k", "attn.v"};
    ly_graph_value part[3];
    for (int i = 0; i < 3; i++) {
        int64_t rows[2] = {e, e}; /* this part's rows of the [3e, e] weight */
        ly_graph_value in[3] = {x, ly_build_constant(b, 2, rows, w + (size_t)(i * e * e)),
                                ly_build_constant(b, 1, &e, bias + (size_t)(i * e))};
        part[i] = ly_build_reshape(b, names[i],
                                   ly_build_node(b, LY_OP_LINEAR, names[i], 3, in, NULL), 4, split);
    }
    ly_graph_value o;
    if (fused) {
        ly_sdpa_params p = LY_SDPA_DEFAULTS; /* 1/sqrt(d) */
        p.layout = LY_SDPA_BNHD;
        o = ly_build_node(b, LY_OP_SDPA, "attn.sdpa", 3, part, &p);
    } else {
        int64_t heads_first[4] = {0, 2, 1, 3};
        for (int i = 0; i < 3; i++)
            part[i] = ly_build_permute(b, names[i], part[i], 4, heads_first);
        ly_graph_value q = ly_build_binary(b, LY_OP_MUL, "attn.scale", part[0],
                                           ly_build_scalar(b, (float)(1.0 / sqrt((double)d))));
        ly_matmul_params t = {.transpose_b = 1};
        ly_graph_value qk[2] = {q, part[1]};
        ly_graph_value s = ly_build_node(b, LY_OP_MATMUL, "attn.scores", 2, qk, &t);
        ly_axis_params last = {.axis = -1};
        s = ly_build_node(b, LY_OP_SOFTMAX, "attn.softmax", 1, &s, &last);
        ly_matmul_params plain = LY_MATMUL_DEFAULTS;
        ly_graph_value pv[2] = {s, part[2]};
        o = ly_build_node(b, LY_OP_MATMUL, "attn.values", 2, pv, &plain);
        o = ly_build_permute(b, "attn.merge", o, 4, heads_first);
    }
    int64_t merged[3] = {LY_RESHAPE_KEEP, TOKENS, e};
    o = ly_build_reshape(b, "attn.merge", o, 3, merged);
    return ly_build_linear_fused(b, "attn.proj", o, e, e, LY_ACT_NONE, residual);
}

static ly_status build(const ly_checkpoint *ck, const vit_size *z, int64_t classes, bool fused,
                       ly_graph *g)
{
    ly_builder b = {.g = g, .ck = ck, .what = "ViT", .st = LY_OK};
    int64_t e = z->width;
    ly_graph_value image;
    ly_build_fail(&b, ly_graph_input(g, "images", LY_F32, 4, &image));

    /* patch embedding: conv 16x16 /16 with bias, tokens row-major */
    int64_t wshape[4] = {e, 3, PATCH, PATCH};
    ly_graph_value w = ly_build_weight(&b, "patch_embed.proj.weight", 4, wshape);
    ly_graph_value bias = ly_build_weight(&b, "patch_embed.proj.bias", 1, &e);
    ly_conv2d_params cp = LY_CONV2D_DEFAULTS;
    cp.stride[0] = cp.stride[1] = PATCH;
    ly_graph_value x = LY_GRAPH_NONE;
    if (b.st == LY_OK)
        ly_build_fail(
            &b, ly_graph_conv2d(g, "patch_embed.proj", image, w, bias, LY_GRAPH_NONE, &cp, &x));
    int64_t flat[3] = {LY_RESHAPE_KEEP, e, TOKENS - 1}, to_tokens[3] = {0, 2, 1};
    x = ly_build_permute(&b, "patch_embed.tokens",
                         ly_build_reshape(&b, "patch_embed.tokens", x, 3, flat), 3, to_tokens);
    int64_t cls_shape[3] = {1, 1, e}, pos_shape[3] = {1, TOKENS, e};
    ly_graph_value with_cls[2] = {ly_build_weight(&b, "cls_token", 3, cls_shape), x};
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_concat(g, "cls_token", 2, with_cls, 1, &x));
    x = ly_build_binary(&b, LY_OP_ADD, "pos_embed", x,
                        ly_build_weight(&b, "pos_embed", 3, pos_shape));

    for (int64_t i = 0; i < z->depth && b.st == LY_OK; i++) {
        snprintf(b.prefix, sizeof b.prefix, "blocks.%lld.", (long long)i);
        x = attention(&b, layer_norm(&b, "norm1", x, e), x, z, fused); /* + x */
        ly_graph_value m = ly_build_linear_fused(&b, "mlp.fc1", layer_norm(&b, "norm2", x, e),
                                                 4 * e, e, LY_ACT_GELU, LY_GRAPH_NONE);
        x = ly_build_linear_fused(&b, "mlp.fc2", m, e, 4 * e, LY_ACT_NONE, x); /* + x */
    }
    b.prefix[0] = '\0';
    x = layer_norm(&b, "norm", x, e);
    int64_t pooled[2] = {LY_RESHAPE_KEEP, e};
    x = ly_build_reshape(&b, "pool", ly_build_slice(&b, "pool", x, 1, 0, 1), 2,
                         pooled); /* the class token */
    ly_graph_value logits = ly_build_linear(&b, "head", x, classes, e);
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_output(g, logits, "logits"));
    return b.st;
}

static ly_status build_net(const ly_checkpoint *ck, const ly_classify_flagged *f, int64_t classes,
                           bool fused, ly_graph *g)
{
    return build(ck, ((const vit_data *)f)->z, classes, fused, g);
}

static ly_status load(const vit_family *f, const ly_checkpoint *ck, const char *path,
                      ly_model_desc *d)
{
    char why[256];
    const vit_size *z = detect_size(f, ck, why, sizeof why);
    if (!z)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: no %s size has these keys (expected %s; %s)", path,
                            f->name, why,
                            f == &vit ? "ti 192 x 12, s 384 x 12, b 768 x 12, l 1024 x 24"
                                      : "t 192, s 384, b 768, 12 blocks each");
    const char *meta;
    if (ly_checkpoint_meta_string(ck, "size", &meta) == LY_OK && strcmp(meta, z->size) != 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the metadata says size '%s', the keys are %s-%s's",
                            path, meta, f->name, z->size);
    ly_clear_error();
    int64_t imgsz;
    ly_status st = ly_model_meta_imgsz(ck, path, IMGSZ, PATCH, 4096, &imgsz);
    if (st != LY_OK) return st;
    if (imgsz != IMGSZ)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: %s takes 224x224 only (its position embedding "
                            "has 197 rows); the metadata says imgsz %lld",
                            path, f->name, (long long)imgsz);
    d->nc = extent(ck, "head.weight", 0, 2);
    vit_data *data = calloc(1, sizeof *data);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    snprintf(data->flag.path, sizeof data->flag.path, "%s", path);
    data->flag.what = f->name;
    data->flag.modules = (int)z->depth; /* every block's attention */
    data->flag.build = build_net;
    data->f = f;
    data->z = z;
    /* upstream's default: fused */
    return ly_classify_load(d, ck, &data->flag, true, z->size, IMGSZ);
}

/* torchvision's eval transform on a PIL image (3.5): models/common/classify.h. */
static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)prep;
    /* a program's model has no recipe data: its family is the recipe's */
    const vit_family *f = d->recipe_data ? ((const vit_data *)d->recipe_data)->f
                          : strcmp(d->recipe->family, "deit") == 0 ? &deit
                                                                   : &vit;
    if (h != IMGSZ || w != IMGSZ)
        return ly_set_error(LY_E_SHAPE, "ViT: the input is 224x224 (%lldx%lld asked)", (long long)h,
                            (long long)w);
    return ly_classify_eval_transform("ViT", image, IMGSZ, CROP_PCT, f->mean, f->std, input);
}

static ly_status load_vit(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load(&vit, ck, path, d);
}

static ly_status load_deit(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load(&deit, ck, path, d);
}

/* One recipe each; DeiT's keys are ViT's, so only its model_family
 * metadata names it (as LibreYOLO's own checkpoints carry). */
#define VIT_RECIPE(name, loader, keys, prefix, description, ...)                                   \
    {                                                                                              \
        .family = name, .task = "classify", .input_description = description, .batched = true,     \
        .default_conf = 0.0f, .default_iou = 0.0f, .default_max_det = 5, .accepts_keys = keys,     \
        .load_checkpoint = loader, .bind = ly_classify_bind, .free_data = free,                    \
        .output_name = ly_classify_output_name, .set_fused_attention = ly_classify_set_fused,      \
        .fused_attention = ly_classify_fused_state, .capture_graph = ly_classify_capture_graph,    \
        .preprocess = preprocess, .probabilities = ly_classify_probabilities,                      \
        .file_prefix = prefix, .published_sizes = (const char *const[]){__VA_ARGS__, NULL},        \
        .crop_pct = CROP_PCT, .interpolation = "bicubic",                                          \
    }

const ly_recipe ly_vit_recipe = VIT_RECIPE(
    "vit", load_vit, accepts_keys, "LibreViT",
    "float32 RGB, PIL bicubic resize (antialiased) of the shorter side to 248, centre crop 224, "
    "(x/255 - 0.5) / 0.5",
    "ti", "s", "b", "l");
const ly_recipe ly_deit_recipe = VIT_RECIPE(
    "deit", load_deit, NULL, "LibreDeiT",
    "float32 RGB, PIL bicubic resize (antialiased) of the shorter side to 248, centre crop 224, "
    "ImageNet mean/std",
    "t", "s", "b");
