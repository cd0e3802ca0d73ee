/* SPDX-License-Identifier: MIT */
/* The SwinIR recipe (recipe.h): LibreYOLO's LibreSwinIR x4 super-resolution
 * models (sizes s, m, l; ../shared/specs/swin.md §4), task restore. The
 * shallow conv, residual Swin transformer blocks (RSTB: six shifted-window
 * blocks and a conv), the norm, the conv after the body with the shallow
 * features added, and the size's upsampler, between the mean taken off and
 * put back. Window attention runs through the sdpa slot, as LibreYOLO runs
 * torch's SDPA by default (its WindowAttention has no fused_attn flag:
 * set_fused_attention counts 0); our sdpa gives the manual expression's bits.
 *
 * A map of Hp x Wp has its own window count and shift mask, so the network is
 * built per input size (the sized graph engine) from the weights the model
 * keeps: every float tensor but the shift masks, which equal their formula
 * (a checkpoint whose stored mask differs keeps that one: LibreYOLO uses the
 * stored mask at its 64 x 64 canvas and computes it at every other size).
 * Padding to multiples of 8, tiling and the uint8 image are the restore
 * task's (models/restore.c). */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "importers/checkpoint/container.h"
#include "models/common/builder.h"
#include "models/common/windows.h"
#include "models/restore.h"
#include "models/swinir/swinir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CANVAS = 64, WINDOW = 8, SHIFT = 4, SCALE = 4, DEPTH = 6, MAX_RSTB = 9, BIAS_ROWS = 225 };

typedef enum upsampler { PIXELSHUFFLE_DIRECT, NEAREST_CONV } upsampler;

typedef struct swinir_size {
    const char *size;
    int64_t width; /* C */
    int rstbs, heads;
    upsampler up;
    bool three_conv; /* resi_connection "3conv" (else "1conv") */
} swinir_size;

static const swinir_size sizes[] = {
    {"s", 60, 4, 6, PIXELSHUFFLE_DIRECT, false},
    {"m", 180, 6, 6, NEAREST_CONV, false},
    {"l", 240, 9, 8, NEAREST_CONV, true},
};

static const float rgb_mean[3] = {0.4488f, 0.4371f, 0.4040f};

/* What the engine builds every size's graph from. */
typedef struct swinir_net {
    const swinir_size *z;
    ly_checkpoint *weights;            /* the kept tensors */
    bool stored_mask[MAX_RSTB][DEPTH]; /* an odd block's own 64 x 64 mask, kept */
    bool whole_file;      /* `weights` is the checkpoint itself: its buffers are expected too */
    bool manual;          /* the manual attention expression (captures), else the sdpa slot */
    ly_graph_value *taps; /* NULL, or where the stages go (ly_swinir_build_taps) */
} swinir_net;

static void net_free(void *user)
{
    swinir_net *n = user;
    if (n) ly_checkpoint_close(n->weights);
    free(n);
}

/* _swinir_fingerprint (§4.2): conv_first [C, 3, 3, 3], the two norms, a
 * relative position bias table, RSTBs layers.0..n-1, (C, n) a size's. */
static const swinir_size *detect_size(const ly_checkpoint *ck, int *rstbs)
{
    int64_t c = ly_model_key_extent(ck, "conv_first.weight", 0, 4);
    *rstbs = 0;
    if (c <= 0 || ly_model_key_extent(ck, "conv_first.weight", 1, 4) != 3 ||
        ly_model_key_extent(ck, "conv_first.weight", 2, 4) != 3 ||
        ly_model_key_extent(ck, "conv_first.weight", 3, 4) != 3)
        return NULL;
    if (ly_model_key_extent(ck, "patch_embed.norm.weight", 0, -1) < 0 ||
        ly_model_key_extent(ck, "norm.weight", 0, -1) < 0 ||
        !ly_model_has_key_containing(ck, "attn.relative_position_bias_table"))
        return NULL;
    /* the layer indices present, which must be exactly 0..n-1 */
    size_t count = 0;
    if (ly_checkpoint_tensor_count(ck, &count) != LY_OK) return NULL;
    bool seen[64] = {false};
    int highest = -1;
    for (size_t i = 0; i < count; i++) {
        const char *name;
        ly_tensor view;
        if (ly_checkpoint_tensor_at(ck, i, &name, &view) != LY_OK) break;
        if (strncmp(name, "layers.", 7) != 0) continue;
        char *end;
        long index = strtol(name + 7, &end, 10);
        if (end == name + 7 || *end != '.' || index < 0 || index >= 64) return NULL;
        seen[index] = true;
        if (index > highest) highest = (int)index;
    }
    ly_clear_error();
    for (int i = 0; i <= highest; i++)
        if (!seen[i]) return NULL;
    *rstbs = highest + 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].width == c && sizes[i].rstbs == highest + 1) return &sizes[i];
    return NULL;
}

static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    int rstbs;
    return detect_size(ck, &rstbs) != NULL;
}

/* A 3x3 (pad 1) or 1x1 Conv2d with bias at prefix + name, LeakyReLU(alpha)
 * after it when alpha > 0, + residual (NONE: none). */
static ly_graph_value conv(ly_builder *b, const char *name, ly_graph_value x, int64_t out,
                           int64_t in, int k, double alpha, ly_graph_value residual)
{
    char key[96];
    int64_t wshape[4] = {out, in, k, k};
    snprintf(key, sizeof key, "%s.weight", name);
    ly_graph_value w = ly_build_weight(b, key, 4, wshape);
    snprintf(key, sizeof key, "%s.bias", name);
    ly_graph_value bias = ly_build_weight(b, key, 1, &out);
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.padding[0] = p.padding[1] = k / 2;
    if (alpha > 0) {
        p.activation = LY_ACT_LEAKY_RELU;
        p.alpha = alpha;
    }
    ly_graph_value y = LY_GRAPH_NONE;
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    char full[160];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    ly_build_fail(b, ly_graph_conv2d(b->g, full, x, w, bias, residual, &p, &y));
    return y;
}

/* resi_connection (§4.3 5): "1conv" one 3x3 C -> C; "3conv" 3x3 C -> C/4,
 * LeakyReLU 0.2, 1x1, LeakyReLU 0.2, 3x3 C/4 -> C. `name` "conv" or
 * "conv_after_body"; + residual. */
static ly_graph_value resi_conv(ly_builder *b, const swinir_size *z, const char *name,
                                ly_graph_value x, ly_graph_value residual)
{
    int64_t c = z->width, q = c / 4;
    if (!z->three_conv) return conv(b, name, x, c, c, 3, 0, residual);
    char part[64];
    snprintf(part, sizeof part, "%s.0", name);
    x = conv(b, part, x, q, c, 3, 0.2, LY_GRAPH_NONE);
    snprintf(part, sizeof part, "%s.2", name);
    x = conv(b, part, x, q, q, 1, 0.2, LY_GRAPH_NONE);
    snprintf(part, sizeof part, "%s.4", name);
    return conv(b, part, x, c, q, 3, 0, residual);
}

/* The network for an input [1, 3, h, w] (multiples of 8). */
static ly_status build(void *user, int64_t h, int64_t w, ly_graph *g)
{
    const swinir_net *net = user;
    const swinir_size *z = net->z;
    ly_builder b = {.g = g, .ck = net->weights, .what = "SwinIR", .st = LY_OK};
    int64_t c = z->width, mean_shape[4] = {1, 3, 1, 1}, tokens[3] = {1, h * w, c};
    int64_t to_hwc[4] = {0, 2, 3, 1}, to_chw[4] = {0, 3, 1, 2};
    ly_graph_value x;
    ly_build_fail(&b, ly_graph_input(g, "images", LY_F32, 4, &x));
    ly_graph_value mean = ly_build_constant(&b, 4, mean_shape, rgb_mean);
    x = ly_build_binary(&b, LY_OP_SUB, "mean", x, mean); /* (x - mean) * img_range 1.0 */
    ly_graph_value shallow = conv(&b, "conv_first", x, c, 3, 3, 0, LY_GRAPH_NONE);
    if (net->taps) net->taps[0] = shallow;

    /* forward_features: tokens, patch_embed's norm, the RSTBs, the norm */
    x = ly_build_permute(&b, "patch_embed", shallow, 4, to_hwc);
    x = ly_build_reshape(&b, "patch_embed", x, 3, tokens);
    x = ly_build_layer_norm(&b, "patch_embed.norm", x, c, 1e-5);
    ly_window_block k = {.h = h,
                         .w = w,
                         .c = c,
                         .heads = z->heads,
                         .window = WINDOW,
                         .hidden = 2 * c,
                         .mask = ly_build_shift_mask(&b, h, w, WINDOW, SHIFT),
                         .fused = !net->manual};
    ly_build_shifted_window_order(&b, k.h, k.w, WINDOW, SHIFT, k.order);
    ly_graph_value computed_mask = k.mask;
    for (int i = 0; i < z->rstbs && b.st == LY_OK; i++) {
        ly_graph_value y = x;
        k.to = LY_TOKENS_MAP;
        for (int j = 0; j < DEPTH && b.st == LY_OK; j++) {
            snprintf(b.prefix, sizeof b.prefix, "layers.%d.residual_group.blocks.%d.", i, j);
            k.shift = j % 2 == 1 ? SHIFT : 0;
            k.from = k.to; /* the last block's order: each block hands on its windows */
            k.to = j + 1 < DEPTH ? ly_window_block_order(&k) : LY_TOKENS_MAP;
            k.mask = computed_mask;
            int64_t n = WINDOW * WINDOW, stored[3] = {CANVAS, n, n}, used[4] = {CANVAS, 1, n, n};
            if (net->whole_file) {
                ly_tensor index;
                ly_build_take_view(&b, "attn.relative_position_index", 2, stored + 1, &index);
                if (k.shift) ly_build_expect(&b, "attn_mask", 3, stored);
            }
            if (k.shift && net->stored_mask[i][j] && h == CANVAS && w == CANVAS)
                k.mask = ly_build_constant(&b, 4, used, ly_build_take(&b, "attn_mask", 3, stored));
            y = ly_build_window_block(&b, y, &k);
        }
        snprintf(b.prefix, sizeof b.prefix, "layers.%d.", i);
        y = ly_build_permute(&b, "unembed", y, 4, to_chw); /* [1, h, w, c] -> NCHW */
        y = resi_conv(&b, z, "conv", y, LY_GRAPH_NONE);
        y = ly_build_reshape(&b, "embed", ly_build_permute(&b, "embed", y, 4, to_hwc), 3, tokens);
        x = ly_build_binary(&b, LY_OP_ADD, "residual", y, x);
        if (net->taps) net->taps[1 + i] = x;
    }
    b.prefix[0] = '\0';
    int64_t map[4] = {1, h, w, c};
    x = ly_build_layer_norm(&b, "norm", x, c, 1e-5);
    x = ly_build_permute(&b, "unembed", ly_build_reshape(&b, "unembed", x, 4, map), 4, to_chw);
    x = resi_conv(&b, z, "conv_after_body", x, shallow); /* + conv_first's */
    if (net->taps) net->taps[1 + z->rstbs] = x;

    if (z->up == PIXELSHUFFLE_DIRECT) {
        /* Conv C -> 3 * 16, PixelShuffle(4): out[c][4y + i][4x + j] = conv[16c + 4i + j][y][x] */
        x = conv(&b, "upsample.0", x, 3 * SCALE * SCALE, c, 3, 0, LY_GRAPH_NONE);
        int64_t split[6] = {3, SCALE, SCALE, h, w, 1}, order[6] = {5, 0, 3, 1, 4, 2};
        int64_t image[4] = {1, 3, SCALE * h, SCALE * w};
        x = ly_build_permute(&b, "upsample.1", ly_build_reshape(&b, "upsample.1", x, 6, split), 6,
                             order);
        x = ly_build_reshape(&b, "upsample.1", x, 4, image);
    } else {
        enum { FEAT = 64 };
        x = conv(&b, "conv_before_upsample.0", x, FEAT, c, 3, 0.01, LY_GRAPH_NONE);
        ly_graph_value up = LY_GRAPH_NONE;
        if (b.st == LY_OK) ly_build_fail(&b, ly_graph_upsample_nearest2d(g, "up1", x, 2, &up));
        x = conv(&b, "conv_up1", up, FEAT, FEAT, 3, 0.2, LY_GRAPH_NONE);
        if (b.st == LY_OK) ly_build_fail(&b, ly_graph_upsample_nearest2d(g, "up2", x, 2, &up));
        x = conv(&b, "conv_up2", up, FEAT, FEAT, 3, 0.2, LY_GRAPH_NONE);
        x = conv(&b, "conv_hr", x, FEAT, FEAT, 3, 0.2, LY_GRAPH_NONE);
        x = conv(&b, "conv_last", x, 3, FEAT, 3, 0, LY_GRAPH_NONE);
    }
    x = ly_build_binary(&b, LY_OP_ADD, "mean", x, mean); /* y / img_range 1.0 + mean */
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_output(g, x, "output"));
    return b.st;
}

/* The weights a model keeps: every tensor but the int64 index and the masks
 * (kept only where they differ from the formula). */
static bool keep_weight(const char *key, void *user)
{
    const swinir_net *net = user;
    size_t n = strlen(key);
    if (n >= 28 && strcmp(key + n - 28, "attn.relative_position_index") == 0) return false;
    if (n < 9 || strcmp(key + n - 9, "attn_mask") != 0) return true;
    int i, j;
    if (sscanf(key, "layers.%d.residual_group.blocks.%d.", &i, &j) != 2 || i < 0 || i >= MAX_RSTB ||
        j < 0 || j >= DEPTH)
        return false;
    return net->stored_mask[i][j];
}

/* The stored index and masks against their formulas (§1): an index that
 * differs is refused (it would gather other bias rows than any SwinIR's);
 * a mask that differs is kept and used at the 64 x 64 canvas. */
static ly_status check_buffers(const ly_checkpoint *ck, const char *path, swinir_net *net)
{
    enum { N = WINDOW * WINDOW };
    int64_t index[N * N];
    ly_window_relative_index(WINDOW, index);
    float *mask = malloc((size_t)CANVAS * N * N * sizeof *mask);
    if (!mask) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    ly_window_shift_mask(CANVAS, CANVAS, WINDOW, SHIFT, mask);
    ly_status st = LY_OK;
    for (int i = 0; st == LY_OK && i < net->z->rstbs; i++)
        for (int j = 0; st == LY_OK && j < DEPTH; j++) {
            char key[96];
            ly_tensor t;
            snprintf(key, sizeof key,
                     "layers.%d.residual_group.blocks.%d.attn.relative_position_index", i, j);
            if (ly_checkpoint_find(ck, key, &t) == LY_OK && t.dtype == LY_I64 && t.ndim == 2 &&
                t.shape[0] == N && t.shape[1] == N && memcmp(t.data, index, sizeof index) != 0)
                st = ly_set_error(LY_E_FORMAT,
                                  "ly_model_load: %s: %s differs from the relative position index "
                                  "of an 8x8 window (expected (yi - yj + 7) * 15 + (xi - xj + 7))",
                                  path, key);
            snprintf(key, sizeof key, "layers.%d.residual_group.blocks.%d.attn_mask", i, j);
            if (st == LY_OK && j % 2 == 1 && ly_checkpoint_find(ck, key, &t) == LY_OK &&
                t.dtype == LY_F32 && ly_tensor_numel(&t) == (int64_t)CANVAS * N * N)
                net->stored_mask[i][j] =
                    memcmp(t.data, mask, (size_t)CANVAS * N * N * sizeof *mask) != 0;
        }
    free(mask);
    if (st == LY_OK) ly_clear_error(); /* the lookups of absent keys */
    return st;
}

static ly_status load(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    int rstbs;
    const swinir_size *z = detect_size(ck, &rstbs);
    if (!z)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: no SwinIR size has these keys (expected "
                            "conv_first.weight [C, 3, 3, 3] and RSTBs layers.0..n-1 with (C, n) "
                            "(60, 4) s, (180, 6) m or (240, 9) l; found C = %lld, n = %d)",
                            path, (long long)ly_model_key_extent(ck, "conv_first.weight", 0, 4),
                            rstbs);
    ly_status st = ly_model_meta_size_agrees(ck, path, "SwinIR", z->size);
    if (st != LY_OK) return st;
    swinir_net *net = calloc(1, sizeof *net);
    if (!net) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    net->z = z;
    st = check_buffers(ck, path, net);
    /* Strict, as LibreYOLO's load: every key the network reads, and the
     * buffers it carries, by name and shape, nothing else; a build at the
     * canvas checks them through the audit before the weights are kept. */
    if (st == LY_OK) {
        char context[PATH_MAX + 64];
        snprintf(context, sizeof context, "ly_model_load: %s: SwinIR-%s", path, z->size);
        swinir_net probe = *net;
        probe.weights = (ly_checkpoint *)ck;
        probe.whole_file = true;
        ly_graph *g = NULL;
        ly_state_dict dict;
        st = ly_state_dict_of(ck, &dict);
        if (st == LY_OK) st = ly_audit_begin(&dict, NULL);
        if (st == LY_OK) {
            st = ly_graph_create(&g);
            if (st == LY_OK) st = build(&probe, CANVAS, CANVAS, g);
            st = ly_audit_end(st, context);
        }
        ly_graph_free(g);
    }
    if (st == LY_OK) st = ly_checkpoint_subset(ck, keep_weight, net, &net->weights);
    if (st != LY_OK) {
        net_free(net);
        return st;
    }
    snprintf(d->size, sizeof d->size, "%s", z->size);
    d->nc = 1;
    d->imgsz = CANVAS;
    d->stride = WINDOW; /* any multiple of 8: the restore task pads to it */
    static const char *const image_name[1] = {"image"};
    st = ly_model_names_copy(d, image_name, 1);
    if (st != LY_OK) {
        net_free(net);
        return st;
    }
    d->recipe_data = net; /* the engine's to free */
    return ly_sized_graph_engine_attach(d, build, net, net_free, CANVAS, CANVAS);
}

/* Captures take the manual expression (LibreYOLO's SwinIR under capture:
 * manual_attention_required()), at the size exported. */
static ly_status capture_graph(const ly_model_desc *d, int64_t h, int64_t w, ly_graph **out)
{
    *out = NULL;
    if (!d->recipe_data) return LY_OK; /* a program: its attention lowered already */
    swinir_net manual = *(const swinir_net *)d->recipe_data;
    manual.manual = true;
    ly_graph *g = NULL;
    ly_status st = ly_graph_create(&g);
    if (st == LY_OK) st = build(&manual, h, w, g);
    if (st != LY_OK) {
        ly_graph_free(g);
        return st;
    }
    *out = g;
    return LY_OK;
}

ly_status ly_swinir_build_taps(ly_graph *g, const ly_checkpoint *ck, int64_t h, int64_t w,
                               ly_graph_value *taps, int *n_taps)
{
    int rstbs;
    swinir_net net = {.weights = (ly_checkpoint *)ck, .taps = taps};
    net.z = detect_size(ck, &rstbs);
    if (!net.z) return ly_set_error(LY_E_FORMAT, "ly_swinir_build_taps: not a SwinIR checkpoint");
    ly_status st = check_buffers(ck, "ly_swinir_build_taps", &net);
    if (st == LY_OK) st = build(&net, h, w, g);
    *n_taps = net.z->rstbs + 2;
    return st;
}

/* One output [1, 3, 4h, 4w]. */
static ly_status bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    if (n_outputs != 1 || outputs[0].ndim != 4 || outputs[0].shape[1] != 3 ||
        outputs[0].shape[2] != SCALE * d->imgsz || outputs[0].shape[3] != SCALE * d->imgsz)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: expected one output [1, 3, %lld, %lld] (a x4 "
                            "image)",
                            path, (long long)(SCALE * d->imgsz), (long long)(SCALE * d->imgsz));
    return LY_OK;
}

static void output_name(int index, char *buf, size_t size)
{
    snprintf(buf, size, index == 0 ? "output" : "output%d", index);
}

static const ly_export_rule export_rules[] = {
    {"restore", "executorch", LY_EXPORT_AVAILABLE,
     "a fixed canvas: the program runs one input size (smaller images are padded to it); "
     "LibreYOLO's own program fails in ExecuTorch 1.2's runtime (alias_copy.out with mismatched "
     "dim orders)",
     "fixed canvas"},
    {NULL, NULL, 0, NULL, NULL},
};

const ly_recipe ly_swinir_recipe = {
    .family = "swinir",
    .task = "restore",
    .input_description = "float32 RGB in [0, 1] (pixel / 255), reflect-padded bottom and right to "
                         "multiples of 8 (replicate where a pad is not smaller than its side); "
                         "the mean is taken off inside the network",
    .default_conf = 0.0f,
    .default_iou = 0.0f,
    .default_max_det = 1,
    .accepts_keys = accepts_keys,
    .buffer_suffixes = (const char *const[]){"attn.relative_position_index", "attn_mask", NULL},
    .load_checkpoint = load,
    .bind = bind,
    .output_name = output_name,
    .capture_graph = capture_graph,
    .preprocess = ly_restore_preprocess,
    .restore_scale = SCALE,
    .export_rules = export_rules,
    .file_prefix = "LibreSwinIR",
    .published_sizes = (const char *const[]){"s", "m", "l", NULL},
    .rectangular = true,
};
