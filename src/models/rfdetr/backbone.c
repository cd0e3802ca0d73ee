/* SPDX-License-Identifier: MIT */
/* RF-DETR's windowed DINOv2-small and projector as graph nodes (rfdetr.h;
 * rfdetr.md 4, 5; LibreYOLO's models/rfdetr/dinov2.py and backbone.py). */
#include "models/rfdetr/rfdetr.h"

#include "core/core.h"
#include "libreyolo/sdpa.h"
#include "models/common/builder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    WIDTH = 384, /* dinov2_windowed_small */
    HEADS = 6,   /* of 64 */
    BLOCKS = 12, /* the last tapped stage is block 11's output */
    PATCH = 16,  /* detection sizes */
    WINDOWS = 2, /* per side */
    PROJECTED = 256,
};

/* PyTorch's antialiased bicubic kernel (Keys, a = -0.5), in float. */
static float cubic(float x)
{
    const float a = -0.5f;
    if (x < 0.0f) x = -x;
    if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
    return 0.0f;
}

enum { MAX_TAPS = 64 };

/* The taps of output i when `in` samples become `out` (interpolate with
 * antialias, align_corners False): the filter widened by the scale when
 * shrinking, the window clipped to the input, the weights normalised. */
static int taps(int64_t i, int64_t in, int64_t out, float *w, int64_t *first)
{
    float scale = (float)in / (float)out;
    float support = scale >= 1.0f ? 2.0f * scale : 2.0f;
    float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
    float center = (float)((double)scale * ((double)i + 0.5));
    int64_t lo = (int64_t)((double)(center - support) + 0.5);
    int64_t hi = (int64_t)((double)(center + support) + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    int n = (int)(hi - lo < MAX_TAPS ? hi - lo : MAX_TAPS);
    float total = 0.0f;
    for (int j = 0; j < n; j++) {
        w[j] = cubic((float)(((double)((float)(j + lo) - center) + 0.5) * (double)invscale));
        total += w[j];
    }
    if (total != 0.0f)
        for (int j = 0; j < n; j++)
            w[j] /= total;
    *first = lo;
    return n;
}

ly_status ly_rfdetr_resize_positions(const float *table, int64_t grid, int64_t c, int64_t h,
                                     int64_t w, float *out)
{
    if (!table || !out || grid < 1 || c < 1 || h < 1 || w < 1 || grid / w >= MAX_TAPS / 4 ||
        grid / h >= MAX_TAPS / 4)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_rfdetr_resize_positions: bad argument");
    float *wide = malloc((size_t)(grid * w * c) * sizeof *wide); /* [grid, w, c] */
    if (!wide) return ly_set_error(LY_E_NO_MEMORY, "ly_rfdetr_resize_positions: out of memory");
    float k[MAX_TAPS];
    int64_t first;
    /* the width first, then the height; sums as fused multiply-adds */
    for (int64_t x = 0; x < w; x++) {
        int n = taps(x, grid, w, k, &first);
        for (int64_t y = 0; y < grid; y++)
            for (int64_t ch = 0; ch < c; ch++) {
                float acc = 0.0f;
                for (int j = 0; j < n; j++)
                    acc = fmaf(k[j], table[(y * grid + first + j) * c + ch], acc);
                wide[(y * w + x) * c + ch] = acc;
            }
    }
    for (int64_t y = 0; y < h; y++) {
        int n = taps(y, grid, h, k, &first);
        for (int64_t x = 0; x < w; x++)
            for (int64_t ch = 0; ch < c; ch++) {
                float acc = 0.0f;
                for (int j = 0; j < n; j++)
                    acc = fmaf(k[j], wide[((first + j) * w + x) * c + ch], acc);
                out[(y * w + x) * c + ch] = acc;
            }
    }
    free(wide);
    return LY_OK;
}

/* Stages 3, 6, 9, 12 are the outputs of blocks 2, 5, 8, 11; the block right
 * after each tapped stage but the last attends across windows. */
static bool tapped(int block)
{
    return block % 3 == 2;
}

static bool global_block(int block)
{
    return block == 3 || block == 6 || block == 9;
}

/* A linear's weights and bias, rows scaled by LayerScale's lambda (keys
 * <name>.weight, <name>.bias, <scale>.lambda1) and the residual h added in
 * its epilogue: lambda * (W x + b) + h computed as (lambda W) x + lambda b
 * + h, one GEMM instead of a GEMM and two passes (the products rounded once
 * more: within 1e-6 of max|ref| on the fixture). */
static ly_graph_value scaled_linear(ly_builder *b, const char *name, const char *scale,
                                    ly_graph_value x, int64_t k, ly_graph_value h)
{
    int64_t n = WIDTH, wshape[2] = {n, k};
    char key[LY_KEY_MAX];
    snprintf(key, sizeof key, "%s.weight", name);
    const float *w = ly_build_take(b, key, 2, wshape);
    snprintf(key, sizeof key, "%s.bias", name);
    const float *bias = ly_build_take(b, key, 1, &n);
    snprintf(key, sizeof key, "%s.lambda1", scale);
    const float *lambda = ly_build_take(b, key, 1, &n);
    if (!w || !bias || !lambda) return LY_GRAPH_NONE;
    float *sw = malloc((size_t)(n * k) * sizeof *sw), *sb = malloc((size_t)n * sizeof *sb);
    ly_graph_value out = LY_GRAPH_NONE;
    if (!sw || !sb) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    } else {
        for (int64_t o = 0; o < n; o++) {
            for (int64_t i = 0; i < k; i++)
                sw[o * k + i] = lambda[o] * w[o * k + i];
            sb[o] = lambda[o] * bias[o];
        }
        ly_graph_value in[4] = {x, ly_build_constant(b, 2, wshape, sw),
                                ly_build_constant(b, 1, &n, sb), h};
        ly_linear_params p = LY_LINEAR_DEFAULTS;
        out = ly_build_node(b, LY_OP_LINEAR, name, 4, in, &p);
    }
    free(sw);
    free(sb);
    return out;
}

/* Dinov2 attention on x [n, t, WIDTH] with the residual h: query, key and
 * value linears, sdpa per head (1/sqrt(64)), the output dense scaled by
 * layer_scale1, + h. The linears write [n, t, head, d] and the attention
 * reads and writes that layout (tokens first), so no transpose runs between
 * them. */
static ly_graph_value attention(ly_builder *b, ly_graph_value x, int64_t n, int64_t t,
                                ly_graph_value h)
{
    static const char *const names[3] = {"attention.attention.query", "attention.attention.key",
                                         "attention.attention.value"};
    int64_t c = WIDTH, d = WIDTH / HEADS, heads[4] = {n, t, HEADS, d}, merged[3] = {n, t, c};
    ly_graph_value qkv[3];
    for (int i = 0; i < 3; i++)
        qkv[i] = ly_build_reshape(b, names[i], ly_build_linear(b, names[i], x, c, c), 4, heads);
    ly_sdpa_params p = LY_SDPA_DEFAULTS;
    p.layout = LY_SDPA_BNHD;
    ly_graph_value o = ly_build_node(b, LY_OP_SDPA, "attention.sdpa", 3, qkv, &p);
    o = ly_build_reshape(b, "attention.merge", o, 3, merged);
    return scaled_linear(b, "attention.output.dense", "layer_scale1", o, c, h);
}

/* One pre-norm block on the windowed tokens h [WINDOWS^2, t, WIDTH]; a
 * global block's attention sees every window's tokens (CLS copies
 * included) as one sequence, window after window. */
static ly_graph_value block(ly_builder *b, int i, ly_graph_value h, int64_t t)
{
    int64_t n = WINDOWS * WINDOWS, c = WIDTH;
    snprintf(b->prefix, sizeof b->prefix, "backbone.0.encoder.encoder.encoder.layer.%d.", i);
    ly_graph_value y = ly_build_layer_norm(b, "norm1", h, c, 1e-6);
    if (global_block(i)) {
        int64_t joint[3] = {1, n * t, c}, windowed[3] = {n, t, c};
        ly_graph_value joined =
            attention(b, ly_build_reshape(b, "attention.joint", y, 3, joint), 1, n * t,
                      ly_build_reshape(b, "attention.joint", h, 3, joint));
        h = ly_build_reshape(b, "attention.joint", joined, 3, windowed);
    } else {
        h = attention(b, y, n, t, h);
    }
    y = ly_build_linear_fused(b, "mlp.fc1", ly_build_layer_norm(b, "norm2", h, c, 1e-6), 4 * c, c,
                              LY_ACT_GELU, LY_GRAPH_NONE);
    return scaled_linear(b, "mlp.fc2", "layer_scale2", y, 4 * c, h);
}

/* A tapped stage: the shared LayerNorm, the CLS copies dropped, the windows
 * put back in place, channels last: [1, grid, grid, WIDTH]. */
static ly_graph_value stage_map(ly_builder *b, ly_graph_value h, int64_t t, int64_t grid)
{
    int64_t c = WIDTH, per = grid / WINDOWS;
    snprintf(b->prefix, sizeof b->prefix, "backbone.0.encoder.encoder.");
    ly_graph_value y = ly_build_layer_norm(b, "layernorm", h, c, 1e-6);
    y = ly_build_slice(b, "stage.tokens", y, 1, 1, t - 1);
    /* (window row, window column, row, column, c) -> (window row, row, window column, column, c) */
    int64_t windows[5] = {WINDOWS, WINDOWS, per, per, c}, placed[5] = {0, 2, 1, 3, 4};
    y = ly_build_permute(b, "stage.unwindow", ly_build_reshape(b, "stage.unwindow", y, 5, windows),
                         5, placed);
    int64_t hwc[4] = {1, grid, grid, c};
    return ly_build_reshape(b, "stage.map", y, 4, hwc);
}

static const int64_t to_chw[4] = {0, 3, 1, 2}, to_hwc[4] = {0, 2, 3, 1};

/* The projector's ConvX (Conv2d without bias, padding k/2 -> LayerNorm over
 * the channels (key .bn) -> SiLU) at prefix + name, on and to a channels-last
 * map: the norm, the concatenations and the channel split of C2f all work on
 * the last axis there, so the 1x1 convolutions are linears over the pixels
 * (no transposes around them) and only the 3x3 ones see NCHW. */
static ly_graph_value conv_x(ly_builder *b, const char *name, ly_graph_value x, int64_t cin,
                             int64_t cout, int64_t k)
{
    char key[LY_KEY_MAX], node[LY_KEY_MAX];
    snprintf(key, sizeof key, "%s.conv.weight", name);
    snprintf(node, sizeof node, "%s.conv", name);
    int64_t wshape[4] = {cout, cin, k, k};
    ly_graph_value y = LY_GRAPH_NONE;
    if (k == 1) {
        int64_t flat[2] = {cout, cin};
        ly_graph_value in[2] = {x, ly_build_constant(b, 2, flat, ly_build_take(b, key, 4, wshape))};
        ly_linear_params p = LY_LINEAR_DEFAULTS;
        y = ly_build_node(b, LY_OP_LINEAR, node, 2, in, &p);
    } else {
        ly_graph_value w = ly_build_weight(b, key, 4, wshape);
        ly_conv2d_params p = LY_CONV2D_DEFAULTS;
        p.padding[0] = p.padding[1] = k / 2;
        x = ly_build_permute(b, node, x, 4, to_chw);
        char full[LY_KEY_MAX];
        snprintf(full, sizeof full, "%.60s%.100s", b->prefix, node);
        if (b->st == LY_OK)
            ly_build_fail(b,
                          ly_graph_conv2d(b->g, full, x, w, LY_GRAPH_NONE, LY_GRAPH_NONE, &p, &y));
        y = ly_build_permute(b, node, y, 4, to_hwc);
    }
    snprintf(key, sizeof key, "%s.bn", name);
    y = ly_build_layer_norm(b, key, y, cout, 1e-6);
    return ly_build_unary(b, LY_OP_SILU, key, y);
}

/* The projector (scale P4): C2f(1536 -> 256, 3 bottlenecks without
 * shortcut) over the four stages (channels last), then a channels-first
 * LayerNorm: [1, 256, grid, grid]. */
static ly_graph_value projector(ly_builder *b, const ly_graph_value stages[4])
{
    snprintf(b->prefix, sizeof b->prefix, "backbone.0.projector.stages.0.");
    int64_t half = PROJECTED / 2, cin = 4 * WIDTH;
    ly_graph_value x = ly_build_concat(b, "0.cat", 4, stages, 3);
    ly_graph_value y = conv_x(b, "0.cv1", x, cin, PROJECTED, 1);
    ly_graph_value parts[5];
    parts[0] = ly_build_slice(b, "0.a", y, 3, 0, half);
    parts[1] = ly_build_slice(b, "0.b", y, 3, half, half);
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "0.m.%d.cv1", i);
        ly_graph_value m = conv_x(b, name, parts[i + 1], half, half, 3);
        snprintf(name, sizeof name, "0.m.%d.cv2", i);
        parts[i + 2] = conv_x(b, name, m, half, half, 3);
    }
    y = conv_x(b, "0.cv2", ly_build_concat(b, "0.cat2", 5, parts, 3), 5 * half, PROJECTED, 1);
    y = ly_build_layer_norm(b, "1", y, PROJECTED, 1e-6);
    return ly_build_permute(b, "1", y, 4, to_chw);
}

ly_status ly_rfdetr_backbone(ly_graph *g, const ly_checkpoint *ck, ly_graph_value image,
                             int64_t size, ly_graph_value *map, ly_graph_value stages[4])
{
    if (!g || !ck || !map || size <= 0 || size % (PATCH * WINDOWS) != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "RF-DETR backbone: input size %lld, expected a multiple of %d",
                            (long long)size, PATCH * WINDOWS);
    ly_builder b = {.g = g, .ck = ck, .what = "RF-DETR backbone", .st = LY_OK};
    snprintf(b.prefix, sizeof b.prefix, "backbone.0.encoder.encoder.embeddings.");
    int64_t grid = size / PATCH, per = grid / WINDOWS, c = WIDTH, patches = grid * grid;
    int64_t rows = ly_build_extent(&b, "position_embeddings", 1), table = 1;
    while (table * table < rows - 1)
        table++;
    if (b.st == LY_OK && (rows < 2 || table * table != rows - 1))
        return ly_set_error(
            LY_E_FORMAT,
            "RF-DETR backbone: key '%sposition_embeddings' has %lld rows, expected 1 "
            "+ a square grid",
            b.prefix, (long long)rows);
    /* patch embedding (conv 16x16 /16 with bias) as what it is, a linear over
     * each patch's 768 values (c, ky, kx order, the weight's own): the
     * patches gathered by one permute come out as tokens, h-major, with no
     * transpose after it, and the GEMM runs ~1.5x the convolution's rate. */
    int64_t wshape[4] = {c, 3, PATCH, PATCH}, k = 3 * PATCH * PATCH, flat_w[2] = {c, k};
    const float *w = ly_build_take(&b, "patch_embeddings.projection.weight", 4, wshape);
    ly_graph_value weight = ly_build_constant(&b, 2, flat_w, w);
    ly_graph_value bias = ly_build_weight(&b, "patch_embeddings.projection.bias", 1, &c);
    int64_t cut[6] = {1, 3, grid, PATCH, grid, PATCH}, gather[6] = {0, 2, 4, 1, 3, 5};
    int64_t rows_of_patches[3] = {1, patches, k};
    snprintf(b.prefix, sizeof b.prefix, "backbone.");
    ly_graph_value x = ly_build_reshape(
        &b, "patch_embeddings",
        ly_build_permute(&b, "patch_embeddings",
                         ly_build_reshape(&b, "patch_embeddings", image, 6, cut), 6, gather),
        3, rows_of_patches);
    ly_linear_params lp = LY_LINEAR_DEFAULTS;
    ly_graph_value in[3] = {x, weight, bias};
    x = ly_build_node(&b, LY_OP_LINEAR, "patch_embeddings", 3, in, &lp);
    snprintf(b.prefix, sizeof b.prefix, "backbone.0.encoder.encoder.embeddings.");
    int64_t cls_shape[3] = {1, 1, c}, pos_shape[3] = {1, 1 + patches, c}, mask_shape[2] = {1, c};
    ly_build_expect(&b, "mask_token", 2, mask_shape); /* masked pretraining only */
    ly_graph_value with_cls[2] = {ly_build_weight(&b, "cls_token", 3, cls_shape), x};
    x = ly_build_concat(&b, "cls", 2, with_cls, 1);
    ly_graph_value positions;
    if (table == grid) { /* the table as it is */
        positions = ly_build_weight(&b, "position_embeddings", 3, pos_shape);
    } else { /* resized to the grid, the CLS row kept (dinov2.py's interpolate_pos_encoding) */
        int64_t stored[3] = {1, rows, c};
        const float *t = ly_build_take(&b, "position_embeddings", 3, stored);
        float *resized = malloc((size_t)((1 + patches) * c) * sizeof *resized);
        if (!resized) ly_build_fail(&b, ly_set_error(LY_E_NO_MEMORY, "RF-DETR: out of memory"));
        if (t && resized) {
            memcpy(resized, t, (size_t)c * sizeof *resized);
            ly_build_fail(&b, ly_rfdetr_resize_positions(t + c, table, c, grid, grid, resized + c));
        }
        positions = ly_build_constant(&b, 3, pos_shape, b.st == LY_OK ? resized : NULL);
        free(resized);
    }
    x = ly_build_binary(&b, LY_OP_ADD, "positions", x, positions);

    /* windows: (row, column) -> (window, row in it, column in it), each with
     * the CLS token (and its position) in front */
    ly_graph_value cls = ly_build_slice(&b, "windows.cls", x, 1, 0, 1);
    ly_graph_value pixels = ly_build_slice(&b, "windows.pixels", x, 1, 1, patches);
    int64_t split[5] = {WINDOWS, per, WINDOWS, per, c}, order[5] = {0, 2, 1, 3, 4};
    int64_t windowed[3] = {WINDOWS * WINDOWS, per * per, c};
    pixels = ly_build_reshape(&b, "windows",
                              ly_build_permute(&b, "windows",
                                               ly_build_reshape(&b, "windows", pixels, 5, split), 5,
                                               order),
                              3, windowed);
    ly_graph_value copies[WINDOWS * WINDOWS];
    for (int i = 0; i < WINDOWS * WINDOWS; i++)
        copies[i] = cls;
    ly_graph_value front[2] = {ly_build_concat(&b, "windows.cls", WINDOWS * WINDOWS, copies, 0),
                               pixels};
    ly_graph_value h = ly_build_concat(&b, "windows.tokens", 2, front, 1);
    int64_t t = 1 + per * per;

    ly_graph_value taps[4];
    int n_taps = 0;
    for (int i = 0; i < BLOCKS && b.st == LY_OK; i++) {
        h = block(&b, i, h, t);
        if (tapped(i)) taps[n_taps++] = stage_map(&b, h, t, grid);
    }
    ly_graph_value projected = projector(&b, taps);
    if (stages)
        for (int i = 0; i < 4; i++)
            stages[i] = ly_build_permute(&b, "stage.map", taps[i], 4, to_chw);
    if (b.st != LY_OK) return b.st;
    *map = projected;
    return LY_OK;
}
