/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO9 from a state dict with the toolkit of models/common: the size
 * table, the key names, RepConvN merging, the quantized modules' places, and
 * the graph (yolo9.md 1.1-1.6, LibreYOLO's libreyolo/models/yolo9/nn.py).
 *
 * Numeric effect of folding (fold.h). Every Conv+BN becomes one conv (BN eps
 * 1e-3), each RepConvN one 3x3 conv whose kernel is the folded 3x3 plus the
 * folded 1x1 at its centre (biases summed), both accumulated from zero in
 * double and rounded once to f32. What differs from LibreYOLO's unfused f32
 * forward is the order of rounding inside each layer, a few ulps per layer;
 * through 100+ layers this grows to about 2-5e-4 relative on the fixture's
 * outputs, the figure the fixture README gives for fused against unfused
 * PyTorch.
 */
#include "models/yolo9/build.h"

#include "core/core.h"
#include "models/common/fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_EPS 1e-3
#define REG_MAX 16

/* ---- the size table (nn.py YOLO9_CONFIGS) -------------------------------- */

typedef struct yolo9_config {
    const char *size;
    int conv0, conv1;
    bool first_is_elan; /* ELAN for t and s, RepNCSPELAN for m and c */
    int first_out, first_part;
    bool adown;      /* ADown for c, AConv otherwise */
    int stage[3][3]; /* per backbone stage: down out, RepNCSPELAN out, part */
    int spp_out;
    int repeat;         /* RepNCSP bottlenecks */
    int up1[2], up2[2]; /* neck RepNCSPELANs: out, part */
    int down1_out, down1[2];
    int down2_out, down2[2];
} yolo9_config;

static const yolo9_config configs[] = {
    {"t",
     16,
     32,
     true,
     32,
     32,
     false,
     {{64, 64, 64}, {96, 96, 96}, {128, 128, 128}},
     128,
     3,
     {96, 96},
     {64, 64},
     48,
     {96, 96},
     64,
     {128, 128}},
    {"s",
     32,
     64,
     true,
     64,
     64,
     false,
     {{128, 128, 128}, {192, 192, 192}, {256, 256, 256}},
     256,
     3,
     {192, 192},
     {128, 128},
     96,
     {192, 192},
     128,
     {256, 256}},
    {"m",
     32,
     64,
     false,
     128,
     128,
     false,
     {{240, 240, 240}, {360, 360, 360}, {480, 480, 480}},
     480,
     1,
     {360, 360},
     {240, 240},
     184,
     {360, 360},
     240,
     {480, 480}},
    {"c",
     64,
     128,
     false,
     256,
     128,
     true,
     {{256, 512, 256}, {512, 512, 512}, {512, 512, 512}},
     512,
     1,
     {512, 512},
     {256, 256},
     256,
     {512, 512},
     512,
     {512, 512}},
};

static const yolo9_config *find_config(const char *size)
{
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (size && strcmp(configs[i].size, size) == 0) return &configs[i];
    return NULL;
}

/* ---- the builder ------------------------------------------------------------ */

typedef struct builder {
    ly_builder base; /* no graph: only list the keys (ly_yolo9_expected_keys) */
    const yolo9_config *cfg;
    int64_t nc, box_hidden, class_hidden;
    const ly_conv_quant *quant; /* NULL: float */
    ly_quant_scratch qs;
    int quant_modules;
    /* a block's kernel accumulated from its folded branches, one fold, and
     * that fold's BN factors gamma / sqrt(var + eps) per channel */
    double *acc_w, *acc_b, *fold_w, *fold_b, *bn_factor;
    size_t weights_cap, channels_cap;
} builder;

static void free_builder(builder *b)
{
    free(b->acc_w);
    free(b->acc_b);
    free(b->fold_w);
    free(b->fold_b);
    free(b->bn_factor);
    ly_quant_scratch_free(&b->qs);
}

/* Keys are built from this file's own short names, far below LY_KEY_MAX. */
static void key_of(char *out, const char *prefix, const char *suffix)
{
    int n = snprintf(out, LY_KEY_MAX, "%s%s", prefix, suffix);
    if (n < 0 || n >= LY_KEY_MAX) out[0] = '\0';
}

static const float *take1(builder *b, const char *key, int64_t n)
{
    return ly_build_take(&b->base, key, 1, &n);
}

/* LibreYOLO's legacy "detect." head prefix and DDP's "module." (the checkpoint
 * reader strips it already; a test's state may not); the keys that carry no
 * weights here: buffers the head derives itself (DFL projection, anchors,
 * strides). */
static const ly_key_rules yolo9_keys = {
    .renames = (const char *const[][2]){{"module.", ""}, {"detect.", "head."}, {NULL, NULL}},
    .ignore_exact = (const char *const[]){"head.anchors", "head.strides", "head.stride", NULL},
    .ignore_prefix = (const char *const[]){"head.dfl.", NULL},
};

/* ---- folding ----------------------------------------------------------- */

static bool grow(double **p, size_t n)
{
    double *grown = realloc(*p, n * sizeof **p);
    if (grown) *p = grown;
    return grown != NULL;
}

static bool reserve(builder *b, size_t weights, size_t channels)
{
    if (weights > b->weights_cap) {
        if (!grow(&b->acc_w, weights) || !grow(&b->fold_w, weights)) return false;
        b->weights_cap = weights;
    }
    if (channels > b->channels_cap) {
        if (!grow(&b->acc_b, channels) || !grow(&b->fold_b, channels) ||
            !grow(&b->bn_factor, channels))
            return false;
        b->channels_cap = channels;
    }
    return true;
}

/* The weight [c2, cin, k, k] of Conv2d `module` as the model computes with it
 * (f32), and what the module does to its input; NULL with the problem recorded. */
static const float *module_weight(builder *b, const char *module, const int64_t *wshape,
                                  ly_qinput *q)
{
    *q = (ly_qinput){0};
    if (!ly_quant_selects(b->quant, module)) {
        char key[LY_KEY_MAX];
        key_of(key, module, ".weight");
        return ly_build_take(&b->base, key, 4, wshape);
    }
    b->quant_modules++;
    return ly_quant_conv_weight(&b->base, &b->qs, b->quant, module, wshape, q);
}

/* Add Conv `p` (conv.weight [c2, cin, k, k] + bn.*) folded with its BatchNorm
 * (b->bn_factor gets its factors) into the accumulators [c2, cin, kd, kd]
 * (the k x k kernel centred) and [c2]; with `accumulate` false (no graph)
 * the keys are only taken. */
static void fold_conv_bn(builder *b, const char *p, int64_t c2, int64_t cin, int64_t k, int64_t kd,
                         bool accumulate, ly_qinput *q)
{
    char key[LY_KEY_MAX], bn[LY_KEY_MAX];
    int64_t wshape[4] = {c2, cin, k, k};
    key_of(key, p, ".conv");
    const float *w = module_weight(b, key, wshape, q);
    key_of(bn, p, ".bn");
    if (!ly_fold_bn(&b->base, bn, c2, cin * k * k, w, b->fold_w, b->fold_b, b->bn_factor) ||
        !accumulate)
        return;
    ly_fold_add_centred(b->acc_w, b->acc_b, b->fold_w, b->fold_b, c2, cin, k, kd);
}

/* Zeroed accumulators for a [c2, cin, kd, kd] kernel (room for its folds too). */
static bool start_fold(builder *b, int64_t c2, int64_t cin, int64_t kd)
{
    if (!b->base.g) return true;
    size_t nw = (size_t)(c2 * cin * kd * kd);
    if (!reserve(b, nw, (size_t)c2)) {
        ly_build_fail(&b->base, ly_set_error(LY_E_NO_MEMORY, "out of memory"));
        return false;
    }
    memset(b->acc_w, 0, nw * sizeof *b->acc_w);
    memset(b->acc_b, 0, (size_t)c2 * sizeof *b->acc_b);
    return true;
}

/* ---- blocks ------------------------------------------------------------ */

static ly_graph_value add_conv(builder *b, const char *name, ly_graph_value x, ly_graph_value w,
                               ly_graph_value bias, int64_t stride, int64_t pad, int64_t groups,
                               bool silu, ly_graph_value residual)
{
    ly_conv2d_params p = ly_conv_params(stride, pad, groups, silu ? LY_ACT_SILU : LY_ACT_NONE);
    return ly_build_conv(&b->base, name, x, w, bias, residual, &p);
}

/* The last module read as conv2d_int8: its weight scales times the fold's BN
 * factors when `bn`, the bias `bias` or else the accumulated one. */
static ly_graph_value add_conv_int8(builder *b, const char *name, ly_graph_value x,
                                    const int64_t *wshape, bool bn, const float *bias,
                                    int64_t stride, int64_t pad, int64_t groups, bool silu,
                                    ly_graph_value residual, const ly_qinput *q)
{
    ly_conv2d_params p = ly_conv_params(stride, pad, groups, silu ? LY_ACT_SILU : LY_ACT_NONE);
    return ly_quant_conv_int8(&b->base, &b->qs, name, x, wshape, bn ? b->bn_factor : NULL, bias,
                              b->acc_b, &p, residual, q);
}

static bool int8_execute(const builder *b, const ly_qinput *q)
{
    return ly_quant_int8_executes(&b->base, b->quant, q);
}

/* Conv(c1, c2, k, s, p=(k-1)/2 unless given, groups): Conv2d + BN + SiLU. */
static ly_graph_value conv(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                           int64_t k, int64_t stride, int64_t groups, ly_graph_value residual)
{
    if (b->base.st != LY_OK) return LY_GRAPH_NONE;
    int64_t cin = c1 / groups;
    if (!start_fold(b, c2, cin, k)) return LY_GRAPH_NONE;
    ly_qinput q;
    fold_conv_bn(b, p, c2, cin, k, k, b->base.g != NULL, &q);
    if (!b->base.g) return LY_GRAPH_NONE;
    if (int8_execute(b, &q))
        return add_conv_int8(b, p, x, (int64_t[4]){c2, cin, k, k}, true, NULL, stride, (k - 1) / 2,
                             groups, true, residual, &q);
    ly_graph_value w, bias;
    if (!ly_build_folded(&b->base, b->acc_w, b->acc_b, c2, cin, k, &w, &bias)) return LY_GRAPH_NONE;
    char module[LY_KEY_MAX];
    key_of(module, p, ".conv");
    x = ly_quant_input(&b->base, b->quant, module, x, &q);
    return add_conv(b, p, x, w, bias, stride, (k - 1) / 2, groups, true, residual);
}

/* RepConvN(c1, c2): SiLU(BN(conv3x3(x)) + BN(conv1x1(x))) as one 3x3 conv. */
static ly_graph_value rep_conv(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2)
{
    if (b->base.st != LY_OK) return LY_GRAPH_NONE;
    char q[2][LY_KEY_MAX], module[2][LY_KEY_MAX];
    if (!start_fold(b, c2, c1, 3)) return LY_GRAPH_NONE;
    bool accumulate = b->base.g != NULL;
    ly_qinput in[2];
    key_of(q[0], p, ".conv1");
    fold_conv_bn(b, q[0], c2, c1, 3, 3, accumulate, &in[0]);
    key_of(q[1], p, ".conv2");
    fold_conv_bn(b, q[1], c2, c1, 1, 3, accumulate, &in[1]);
    if (!b->base.g) return LY_GRAPH_NONE;
    ly_graph_value w, bias;
    key_of(module[0], q[0], ".conv");
    key_of(module[1], q[1], ".conv");
    /* On integer codes the branches keep their own scales: two convolutions. */
    if (ly_qinput_same(&in[0], &in[1]) && !int8_execute(b, &in[0])) {
        /* one input quantizer (calibration saw the same input twice): one conv */
        if (!ly_build_folded(&b->base, b->acc_w, b->acc_b, c2, c1, 3, &w, &bias))
            return LY_GRAPH_NONE;
        x = ly_quant_input(&b->base, b->quant, module[0], x, &in[0]);
        return add_conv(b, p, x, w, bias, 1, 1, 1, true, LY_GRAPH_NONE);
    }
    /* Two quantizers: the branches convolve apart, SiLU(conv3x3 + conv1x1). */
    ly_graph_value branch = LY_GRAPH_NONE;
    for (int i = 0; i < 2 && b->base.st == LY_OK; i++) {
        int64_t k = i == 0 ? 3 : 1;
        if (!start_fold(b, c2, c1, k)) return LY_GRAPH_NONE;
        ly_qinput again;
        fold_conv_bn(b, q[i], c2, c1, k, k, true, &again);
        b->quant_modules--; /* counted in the merged attempt */
        if (b->base.st != LY_OK) return LY_GRAPH_NONE;
        if (int8_execute(b, &in[i])) {
            branch = add_conv_int8(b, q[i], x, (int64_t[4]){c2, c1, k, k}, true, NULL, 1, k / 2, 1,
                                   false, branch, &in[i]);
            continue;
        }
        if (!ly_build_folded(&b->base, b->acc_w, b->acc_b, c2, c1, k, &w, &bias))
            return LY_GRAPH_NONE;
        ly_graph_value xq = ly_quant_input(&b->base, b->quant, module[i], x, &in[i]);
        branch = add_conv(b, q[i], xq, w, bias, 1, k / 2, 1, false, branch);
    }
    return ly_build_unary(&b->base, LY_OP_SILU, p, branch);
}

/* nn.Conv2d(c1, c2, 1, groups) with bias, no BN, no activation (head outputs). */
static ly_graph_value plain_conv(builder *b, const char *p, ly_graph_value x, int64_t c1,
                                 int64_t c2, int64_t groups)
{
    if (b->base.st != LY_OK) return LY_GRAPH_NONE;
    char key[LY_KEY_MAX];
    int64_t wshape[4] = {c2, c1 / groups, 1, 1};
    ly_qinput q;
    const float *w = module_weight(b, p, wshape, &q);
    key_of(key, p, ".bias");
    const float *bias = take1(b, key, c2);
    if (!b->base.g) return LY_GRAPH_NONE;
    if (w && bias && int8_execute(b, &q))
        return add_conv_int8(b, p, x, wshape, false, bias, 1, 0, groups, false, LY_GRAPH_NONE, &q);
    ly_graph_value wt, bt;
    void *wv, *bv;
    ly_build_fail(&b->base, ly_graph_constant(b->base.g, LY_F32, 4, wshape, &wt, &wv));
    if (b->base.st == LY_OK)
        ly_build_fail(&b->base, ly_graph_constant(b->base.g, LY_F32, 1, &c2, &bt, &bv));
    if (b->base.st != LY_OK) return LY_GRAPH_NONE;
    if (w) memcpy(wv, w, (size_t)(wshape[0] * wshape[1]) * sizeof(float));
    if (bias) memcpy(bv, bias, (size_t)c2 * sizeof(float));
    x = ly_quant_input(&b->base, b->quant, p, x, &q);
    return add_conv(b, p, x, wt, bt, 1, 0, groups, false, LY_GRAPH_NONE);
}

static ly_graph_value slice(builder *b, const char *name, ly_graph_value x, int64_t start,
                            int64_t count)
{
    return ly_build_slice(&b->base, name, x, 1, start, count);
}

static ly_graph_value concat(builder *b, const char *name, int n, const ly_graph_value *in)
{
    return ly_build_concat(&b->base, name, n, in, 1);
}

static ly_graph_value pool(builder *b, const char *name, bool max, ly_graph_value x, int64_t k,
                           int64_t stride, int64_t pad)
{
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = p.kernel[1] = k;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = pad;
    p.count_include_pad = 1; /* F.avg_pool2d's default; no padding is used anyway */
    return ly_build_node(&b->base, max ? LY_OP_MAX_POOL2D : LY_OP_AVG_POOL2D, name, 1, &x, &p);
}

static ly_graph_value upsample(builder *b, const char *name, ly_graph_value x)
{
    ly_upsample_nearest2d_params p = {.scale = 2};
    return ly_build_node(&b->base, LY_OP_UPSAMPLE_NEAREST2D, name, 1, &x, &p);
}

/* RepNCSP(c1, c2, n): cv3(cat(m(cv1(x)), cv2(x))), m = n RepNBottlenecks
 * y = x + cv2(cv1(x)) with cv1 a RepConvN; the add is the conv's residual. */
static ly_graph_value rep_ncsp(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                               int n)
{
    char q[LY_KEY_MAX], r[LY_KEY_MAX];
    int64_t h = c2 / 2;
    key_of(q, p, ".cv1");
    ly_graph_value a = conv(b, q, x, c1, h, 1, 1, 1, LY_GRAPH_NONE);
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q, "%s.m.%d.cv1", p, i);
        ly_graph_value t = rep_conv(b, q, a, h, h);
        snprintf(r, sizeof r, "%s.m.%d.cv2", p, i);
        a = conv(b, r, t, h, h, 3, 1, 1, a);
    }
    key_of(q, p, ".cv2");
    ly_graph_value c = conv(b, q, x, c1, h, 1, 1, 1, LY_GRAPH_NONE);
    ly_graph_value parts[2] = {a, c};
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 2, parts);
    key_of(q, p, ".cv3");
    return conv(b, q, cat, 2 * h, c2, 1, 1, 1, LY_GRAPH_NONE);
}

/* ELAN (n = 1) and RepNCSPELAN(c1, c2, c3, c4, n): cv1 splits into halves
 * (a, b); cv4 over cat(a, b, cv2(b), cv3(cv2(b))). cat(a, b) is cv1's output
 * itself, so the concat takes it whole and its producer writes in place. */
static ly_graph_value elan(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                           int64_t c3, int64_t c4, bool rep, int n)
{
    char q[LY_KEY_MAX], r[LY_KEY_MAX];
    key_of(q, p, ".cv1");
    ly_graph_value y1 = conv(b, q, x, c1, c2, 1, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".split");
    ly_graph_value half = slice(b, q, y1, c2 / 2, c2 / 2);
    ly_graph_value y2, y3;
    if (rep) {
        key_of(q, p, ".cv2.0");
        ly_graph_value t = rep_ncsp(b, q, half, c2 / 2, c3, n);
        key_of(r, p, ".cv2.1");
        y2 = conv(b, r, t, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
        key_of(q, p, ".cv3.0");
        t = rep_ncsp(b, q, y2, c3, c3, n);
        key_of(r, p, ".cv3.1");
        y3 = conv(b, r, t, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
    } else {
        key_of(q, p, ".cv2");
        y2 = conv(b, q, half, c2 / 2, c3, 3, 1, 1, LY_GRAPH_NONE);
        key_of(q, p, ".cv3");
        y3 = conv(b, q, y2, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
    }
    ly_graph_value parts[3] = {y1, y2, y3};
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 3, parts);
    key_of(q, p, ".cv4");
    return conv(b, q, cat, c2 + 2 * c3, c4, 1, 1, 1, LY_GRAPH_NONE);
}

/* AConv: avg_pool2d(2, 1, 0) then Conv 3x3 s2 p1. ADown (size c): the pooled
 * map's halves go through Conv 3x3 s2 and max_pool2d(3, 2, 1) + Conv 1x1. */
static ly_graph_value down(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2)
{
    char q[LY_KEY_MAX];
    key_of(q, p, ".avg_pool");
    ly_graph_value pooled = pool(b, q, false, x, 2, 1, 0);
    if (!b->cfg->adown) {
        key_of(q, p, ".cv");
        return conv(b, q, pooled, c1, c2, 3, 2, 1, LY_GRAPH_NONE);
    }
    key_of(q, p, ".x1");
    ly_graph_value x1 = slice(b, q, pooled, 0, c1 / 2);
    key_of(q, p, ".x2");
    ly_graph_value x2 = slice(b, q, pooled, c1 / 2, c1 / 2);
    key_of(q, p, ".cv1");
    ly_graph_value y1 = conv(b, q, x1, c1 / 2, c2 / 2, 3, 2, 1, LY_GRAPH_NONE);
    key_of(q, p, ".max_pool");
    ly_graph_value m = pool(b, q, true, x2, 3, 2, 1);
    key_of(q, p, ".cv2");
    ly_graph_value y2 = conv(b, q, m, c1 / 2, c2 / 2, 1, 1, 1, LY_GRAPH_NONE);
    ly_graph_value parts[2] = {y1, y2};
    key_of(q, p, ".cat");
    return concat(b, q, 2, parts);
}

/* SPPELAN(c1, c2, c3): cv5(cat(y, mp(y), mp(mp(y)), mp(mp(mp(y))))), y = cv1(x),
 * mp = max_pool2d(5, 1, 2). */
static ly_graph_value sppelan(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                              int64_t c3)
{
    char q[LY_KEY_MAX];
    ly_graph_value f[4];
    key_of(q, p, ".cv1");
    f[0] = conv(b, q, x, c1, c2, 1, 1, 1, LY_GRAPH_NONE);
    for (int i = 1; i < 4; i++) {
        snprintf(q, sizeof q, "%s.pool%d", p, i);
        f[i] = pool(b, q, true, f[i - 1], 5, 1, 2);
    }
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 4, f);
    key_of(q, p, ".cv5");
    return conv(b, q, cat, 4 * c2, c3, 1, 1, 1, LY_GRAPH_NONE);
}

/* ---- head decode ----------------------------------------------------------- *
 *
 * predictions [N, 4 + nc, A] from the head levels P3, P4, P5 (raw [N, 64 + nc,
 * h, w]), in standard ops, so every engine and exporter sees what it computes:
 * per level the DFL distances of the 64 box channels, boxes = (anchor -/+
 * distances) * stride as xyxy, anchors row-major at (x + 0.5, y + 0.5) grid
 * units; the levels joined, then the sigmoid of the class logits. */

/* The decode (levels at strides 8, 16, 32); the anchor grids follow each
 * level's shape, so one graph serves every input size. */
static ly_graph_value decode(builder *b, const ly_graph_value raw[3])
{
    int64_t nc = b->nc, R = REG_MAX;
    ly_graph_value boxes[3], logits[3];
    for (int l = 0; l < 3 && b->base.st == LY_OK; l++) {
        int64_t stride = (int64_t)8 << l;
        char q[LY_KEY_MAX];
        snprintf(q, sizeof q, "head.decode%d", l);
        int64_t flat_shape[3] = {LY_RESHAPE_KEEP, 4 * R + nc, -1};
        ly_graph_value flat = ly_build_reshape(&b->base, q, raw[l], 3, flat_shape);
        ly_graph_value box = ly_build_slice(&b->base, q, flat, 1, 0, 4 * R);
        logits[l] = ly_build_slice(&b->base, q, flat, 1, 4 * R, nc);
        ly_graph_value dist = ly_build_unary(&b->base, LY_OP_DFL, q, box);
        ly_graph_value lt = ly_build_slice(&b->base, q, dist, 1, 0, 2),
                       rb = ly_build_slice(&b->base, q, dist, 1, 2, 2);
        ly_graph_value grid = ly_build_unary(&b->base, LY_OP_ANCHOR_GRID, q, raw[l]);
        ly_graph_value corners[2] = {ly_build_binary(&b->base, LY_OP_SUB, q, grid, lt),
                                     ly_build_binary(&b->base, LY_OP_ADD, q, grid, rb)};
        ly_graph_value xyxy = ly_build_concat(&b->base, q, 2, corners, 1);
        boxes[l] =
            ly_build_binary(&b->base, LY_OP_MUL, q, xyxy, ly_build_scalar(&b->base, (float)stride));
    }
    if (b->base.st != LY_OK) return LY_GRAPH_NONE;
    ly_graph_value parts[2] = {
        ly_build_concat(&b->base, "head.decode.boxes", 3, boxes, 2),
        ly_build_unary(&b->base, LY_OP_SIGMOID, "head.decode.scores",
                       ly_build_concat(&b->base, "head.decode.logits", 3, logits, 2))};
    return ly_build_concat(&b->base, "head.decode", 2, parts, 1);
}

/* ---- the network ---------------------------------------------------------- */

static ly_graph_value head_level(builder *b, int level, ly_graph_value x, int64_t ch)
{
    char p[LY_KEY_MAX], q[LY_KEY_MAX];
    int64_t bh = b->box_hidden, ch_ = b->class_hidden;
    snprintf(p, sizeof p, "head.cv2.%d", level);
    key_of(q, p, ".0");
    ly_graph_value t = conv(b, q, x, ch, bh, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".1");
    t = conv(b, q, t, bh, bh, 3, 1, 4, LY_GRAPH_NONE);
    key_of(q, p, ".2");
    ly_graph_value box = plain_conv(b, q, t, bh, 4 * REG_MAX, 4);
    snprintf(p, sizeof p, "head.cv3.%d", level);
    key_of(q, p, ".0");
    t = conv(b, q, x, ch, ch_, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".1");
    t = conv(b, q, t, ch_, ch_, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".2");
    ly_graph_value cls = plain_conv(b, q, t, ch_, b->nc, 1);
    ly_graph_value parts[2] = {box, cls};
    snprintf(p, sizeof p, "head.raw_p%d", level + 3);
    return concat(b, p, 2, parts);
}

static void build_network(builder *b)
{
    const yolo9_config *c = b->cfg;
    int n = c->repeat;
    ly_graph_value x = 0;
    if (b->base.g) ly_build_fail(&b->base, ly_graph_input(b->base.g, "images", LY_F32, 4, &x));

    /* Backbone. */
    x = conv(b, "backbone.conv0", x, 3, c->conv0, 3, 2, 1, LY_GRAPH_NONE);
    x = conv(b, "backbone.conv1", x, c->conv0, c->conv1, 3, 2, 1, LY_GRAPH_NONE);
    if (c->first_is_elan)
        x = elan(b, "backbone.elan1", x, c->conv1, c->first_out, c->first_out / 2, c->first_out,
                 false, 1);
    else
        x = elan(b, "backbone.elan1", x, c->conv1, c->first_part, c->first_part / 2, c->first_out,
                 true, n);
    x = down(b, "backbone.down2", x, c->first_out, c->stage[0][0]);
    ly_graph_value b3 = elan(b, "backbone.elan2", x, c->stage[0][0], c->stage[0][2],
                             c->stage[0][2] / 2, c->stage[0][1], true, n);
    x = down(b, "backbone.down3", b3, c->stage[0][1], c->stage[1][0]);
    ly_graph_value b4 = elan(b, "backbone.elan3", x, c->stage[1][0], c->stage[1][2],
                             c->stage[1][2] / 2, c->stage[1][1], true, n);
    x = down(b, "backbone.down4", b4, c->stage[1][1], c->stage[2][0]);
    x = elan(b, "backbone.elan4", x, c->stage[2][0], c->stage[2][2], c->stage[2][2] / 2,
             c->stage[2][1], true, n);
    ly_graph_value b5 = sppelan(b, "backbone.spp", x, c->stage[2][1], c->spp_out / 2, c->spp_out);

    /* Neck: top-down, then bottom-up (upsampled or downsampled map first in each concat). */
    ly_graph_value parts[2];
    parts[0] = upsample(b, "neck.up1", b5);
    parts[1] = b4;
    x = concat(b, "neck.cat_up1", 2, parts);
    ly_graph_value n4 = elan(b, "neck.elan_up1", x, c->spp_out + c->stage[1][1], c->up1[1],
                             c->up1[1] / 2, c->up1[0], true, n);
    parts[0] = upsample(b, "neck.up2", n4);
    parts[1] = b3;
    x = concat(b, "neck.cat_up2", 2, parts);
    ly_graph_value p3 = elan(b, "neck.elan_up2", x, c->up1[0] + c->stage[0][1], c->up2[1],
                             c->up2[1] / 2, c->up2[0], true, n);
    parts[0] = down(b, "neck.down1", p3, c->up2[0], c->down1_out);
    parts[1] = n4;
    x = concat(b, "neck.cat_down1", 2, parts);
    ly_graph_value p4 = elan(b, "neck.elan_down1", x, c->down1_out + c->up1[0], c->down1[1],
                             c->down1[1] / 2, c->down1[0], true, n);
    parts[0] = down(b, "neck.down2", p4, c->down1[0], c->down2_out);
    parts[1] = b5;
    x = concat(b, "neck.cat_down2", 2, parts);
    ly_graph_value p5 = elan(b, "neck.elan_down2", x, c->down2_out + c->spp_out, c->down2[1],
                             c->down2[1] / 2, c->down2[0], true, n);

    /* Head and decode. */
    int64_t ch[3] = {c->up2[0], c->down1[0], c->down2[0]};
    ly_graph_value feats[3] = {p3, p4, p5}, raw[3];
    for (int i = 0; i < 3; i++)
        raw[i] = head_level(b, i, feats[i], ch[i]);
    if (!b->base.g || b->base.st != LY_OK) return;

    ly_graph_value pred = decode(b, raw);
    if (b->base.st != LY_OK) return;
    ly_build_fail(&b->base, ly_graph_output(b->base.g, pred, "predictions"));
    ly_build_fail(&b->base, ly_graph_output(b->base.g, raw[0], "raw_p3"));
    ly_build_fail(&b->base, ly_graph_output(b->base.g, raw[1], "raw_p4"));
    ly_build_fail(&b->base, ly_graph_output(b->base.g, raw[2], "raw_p5"));
}

/* Head widths (DDetect): the box tower is a quarter of the first level's
 * channels rounded up to the 4 groups, at least 4 * reg_max; the class tower
 * is max(ch0, min(nc, 100)) unless the checkpoint says otherwise (LibreYOLO
 * reads it from the tensors, for towers reused under a new nc). */
/* Head widths (DDetect): the box tower is a quarter of the first level's
 * channels rounded up to the 4 groups, at least 4 * reg_max; the class tower
 * is max(ch0, min(nc, 100)) unless the checkpoint says otherwise (LibreYOLO
 * reads it from the tensors, for towers reused under a new nc). */
static void head_widths(builder *b, const ly_tensor *class_tower)
{
    int64_t ch0 = b->cfg->up2[0];
    int64_t quarter = (ch0 / 4 + 3) / 4 * 4;
    b->box_hidden = quarter > 4 * REG_MAX ? quarter : 4 * REG_MAX;
    int64_t floor_nc = b->nc < 100 ? b->nc : 100;
    b->class_hidden = ch0 > floor_nc ? ch0 : floor_nc;
    if (class_tower && class_tower->ndim == 4 && class_tower->shape[0] > 0)
        b->class_hidden = class_tower->shape[0];
}

/* Extent 0 of a 4-d key of the state dict, or -1. */
static int64_t out_channels(const char *key)
{
    ly_tensor view;
    return ly_audit_find(key, &view, NULL) && view.ndim == 4 ? view.shape[0] : -1;
}

static const char *detect_size(void)
{
    switch (out_channels("backbone.conv0.conv.weight")) {
    case 16:
        return "t";
    case 64:
        return "c";
    case 32: {
        int64_t c = out_channels("backbone.elan1.cv1.conv.weight");
        return c == 64 ? "s" : c == 128 ? "m" : NULL;
    }
    default:
        return NULL;
    }
}

/* The configuration of `size`, or told from the shapes; the class count. */
static ly_status recognise(builder *b, const char *size, int64_t nc_meta)
{
    if (size) {
        b->cfg = find_config(size);
        if (!b->cfg)
            return ly_set_error(
                LY_E_UNSUPPORTED,
                "ly_yolo9_build: size '%s' unsupported (LibreYOLO9 sizes: t, s, m, c)", size);
    } else {
        const char *detected = detect_size();
        if (!detected)
            return ly_set_error(
                LY_E_FORMAT,
                "ly_yolo9_build: cannot tell the LibreYOLO9 size: no metadata 'size', and "
                "backbone.conv0.conv.weight / backbone.elan1.cv1.conv.weight have "
                "widths no size has (t 16, s 32/64, m 32/128, c 64)");
        b->cfg = find_config(detected);
    }
    int64_t classes = out_channels("head.cv3.0.2.weight");
    b->nc = classes > 0 ? classes : nc_meta > 0 ? nc_meta : 80; /* a missing key is reported */
    if (nc_meta > 0 && nc_meta != b->nc)
        return ly_set_error(
            LY_E_FORMAT,
            "ly_yolo9_build: metadata nc is %lld but head.cv3.0.2.weight has %lld classes",
            (long long)nc_meta, (long long)b->nc);
    ly_tensor class_tower;
    head_widths(b, ly_audit_find("head.cv3.0.0.conv.weight", &class_tower, NULL) ? &class_tower
                                                                                 : NULL);
    return LY_OK;
}

ly_status ly_yolo9_build_state(const ly_yolo9_state *state, const char *size, int64_t nc_meta,
                               ly_yolo9 **out)
{
    if (!state || !out || (state->count > 0 && !state->at))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_build: NULL argument");
    *out = NULL;
    /* LibreYOLO's yolo9 default: the whole head and the stem conv stay float */
    ly_conv_quant quant = state->quant ? *state->quant : (ly_conv_quant){0};
    if (!quant.keep) quant.keep = "head.\nbackbone.conv0.";
    builder b = {.base = {.what = "LibreYOLO9", .bn_eps = BN_EPS},
                 .quant = state->quant ? &quant : NULL};
    ly_state_dict dict = {.count = state->count,
                          .at = state->at,
                          .stored_dtype = state->stored_dtype,
                          .user = state->user};
    ly_status st = ly_audit_begin(&dict, &yolo9_keys);
    if (st != LY_OK) return st;
    st = recognise(&b, size, nc_meta);
    if (st != LY_OK) {
        ly_audit_cancel();
        return st;
    }
    ly_yolo9 *net = calloc(1, sizeof *net);
    if (net) st = ly_graph_create(&net->graph);
    if (!net || st != LY_OK) {
        free(net);
        ly_audit_cancel();
        return net ? st : ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
    }
    snprintf(net->size, sizeof net->size, "%s", b.cfg->size);
    net->nc = b.nc;
    net->reg_max = REG_MAX;
    b.base.g = net->graph;
    build_network(&b);
    char context[96];
    snprintf(context, sizeof context, "ly_yolo9_build: LibreYOLO9%s with %lld classes", b.cfg->size,
             (long long)b.nc);
    st = ly_audit_end(b.base.st, context);
    free_builder(&b);
    if (st != LY_OK) {
        ly_graph_free(net->graph);
        free(net);
        return st;
    }
    net->quant_modules = b.quant_modules;
    *out = net;
    return LY_OK;
}

ly_status ly_yolo9_expected_keys(const char *size, int64_t nc, ly_yolo9_key_fn visit, void *user)
{
    builder b = {.base = {.what = "LibreYOLO9", .visit = visit, .visit_user = user}, .nc = nc};
    b.cfg = find_config(size);
    if (!b.cfg)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_expected_keys: size '%s' unsupported (t, s, m, c)",
                            size ? size : "(null)");
    if (nc < 1 || !visit)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_expected_keys: nc %lld or visit NULL",
                            (long long)nc);
    head_widths(&b, NULL);
    build_network(&b);
    free_builder(&b);
    return b.base.st;
}
