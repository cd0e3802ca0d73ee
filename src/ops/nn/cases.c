/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the network ops (conv2d, pools, upsample, activations, dfl,
 * resize) for the shared harness. Shapes are LibreYOLO9t
 * and NanoDet-g layers at reduced resolution, plus odd sizes; inputs are seeded
 * from the case name, so a reported case reproduces.
 */
#include "ops/cases.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct nn_case {
    ly_op op;
    const char *name;
    int64_t n, c, h, w; /* input x */
    int64_t o, kh, kw;  /* conv2d: output channels and kernel; pools: window */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t activation;
    bool bias, residual;
    bool affine;      /* conv2d's post_affine (scale and shift drawn per case) */
    float scale;      /* x in [-scale, scale); 0: the op's default */
    bool extremes;    /* x's first elements 0, -88 and 88 (dfl: its ends +-80) */
    bool exclude_pad; /* avg_pool2d with count_include_pad 0 */
} nn_case;

/* conv2d of any geometry: batch n, stride (sh, sw), padding (ph, pw), dilation (dh, dw) */
#define CONV_ANY(label, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, act, bias, res)          \
    {                                                                                              \
        LY_OP_CONV2D, label, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, act, bias, res,     \
            false, 0.0f, false, false                                                              \
    }
#define CONV(label, c, h, w, o, k, s, p, g, act, bias, res)                                        \
    CONV_ANY(label, 1, c, h, w, o, k, k, s, s, p, p, 1, 1, g, act, bias, res)
/* HGNetv2's ConvBNAct with its LearnableAffineBlock */
#define LAB(label, c, h, w, o, k, s, p, g, res)                                                    \
    {                                                                                              \
        LY_OP_CONV2D, label, 1, c, h, w, o, k, k, s, s, p, p, 1, 1, g, LY_ACT_RELU, true, res,     \
            true, 0.0f, false, false                                                               \
    }
#define INT8_BATCH(label, n, c, h, w, o, k, s, p, g, act, bias, res)                               \
    {                                                                                              \
        LY_OP_CONV2D_INT8, label, n, c, h, w, o, k, k, s, s, p, p, 1, 1, g, act, bias, res, false, \
            0.0f, false, false                                                                     \
    }
#define INT8(label, c, h, w, o, k, s, p, g, act, bias, res)                                        \
    INT8_BATCH(label, 1, c, h, w, o, k, s, p, g, act, bias, res)
/* with a post_affine after the activation */
#define INT8_AFFINE(label, c, h, w, o, k, s, p, act, res)                                          \
    {                                                                                              \
        LY_OP_CONV2D_INT8, label, 1, c, h, w, o, k, k, s, s, p, p, 1, 1, 1, act, true, res, true,  \
            0.0f, false, false                                                                     \
    }
#define POOL_ANY(op, label, c, h, w, k, s, p, exclude_pad)                                         \
    {                                                                                              \
        op, label, 1, c, h, w, 0, k, k, s, s, p, p, 1, 1, 1, LY_ACT_NONE, false, false, false,     \
            0.0f, false, exclude_pad                                                               \
    }
#define POOL(op, label, c, h, w, k, s, p) POOL_ANY(op, label, c, h, w, k, s, p, false)
/* x of [n, c, h, w] in [-scale, scale) (0: 3), with the extremes where asked */
#define WIDE(op, label, n, c, h, w, scale, extremes)                                               \
    {                                                                                              \
        op, label, n, c, h, w, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, LY_ACT_NONE, false, false, false,     \
            scale, extremes, false                                                                 \
    }
#define UNARY(op, label, c, h, w) WIDE(op, label, 1, c, h, w, 0.0f, false)
/* resize_bilinear2d of [n, c, h, w] to (ho, wo): those ride in o and kw, the
 * flags in ph (align_corners) and pw (half_pixel_centers) */
#define RESIZE(label, n, c, h, w, ho, wo, align, half)                                             \
    {                                                                                              \
        LY_OP_RESIZE_BILINEAR2D, label, n, c, h, w, ho, 1, wo, 1, 1, align, half, 1, 1, 1,         \
            LY_ACT_NONE, false, false, false, 0.0f, false, false                                   \
    }

static const nn_case cases[] = {
    CONV("conv0 3->16 3x3 s2 64x64", 3, 64, 64, 16, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV("bottleneck 16->16 3x3 +res 24x24", 16, 24, 24, 16, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    CONV("elan 48->24 1x1 20x20", 48, 20, 20, 24, 1, 1, 0, 1, LY_ACT_SILU, true, false),
    CONV("head box 64->64 3x3 g4 20x20", 64, 20, 20, 64, 3, 1, 1, 4, LY_ACT_SILU, true, false),
    /* groups of 32 (with a residual) and of 8 channels: Winograd group by group */
    CONV("grouped 64->96 3x3 g2 +res 11x13", 64, 11, 13, 96, 3, 1, 1, 2, LY_ACT_SILU, true, true),
    CONV("grouped 32->32 3x3 g4 no bias 9x9", 32, 9, 9, 32, 3, 1, 1, 4, LY_ACT_NONE, false, false),
    CONV("down 96->128 3x3 s2 19x19", 96, 19, 19, 128, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV("odd 24->24 3x3 sigmoid 17x13", 24, 17, 13, 24, 3, 1, 1, 1, LY_ACT_SIGMOID, true, false),
    CONV("depthwise 6 3x3 +res 9x9", 6, 9, 9, 6, 3, 1, 1, 6, LY_ACT_NONE, true, true),
    CONV("relu 8->12 3x3 no bias 15x15", 8, 15, 15, 12, 3, 1, 1, 1, LY_ACT_RELU, false, false),
    CONV("nanodet 128->128 3x3 leaky 13x13", 128, 13, 13, 128, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, true,
         false),
    CONV("nanodet head 128->124 1x1 13x13", 128, 13, 13, 124, 1, 1, 0, 1, LY_ACT_NONE, true, false),
    CONV("blocked 16->32 3x3 +res silu 12x12", 16, 12, 12, 32, 3, 1, 1, 1, LY_ACT_SILU, true,
         false),
    CONV("blocked 32->32 3x3 +res silu 10x10", 32, 10, 10, 32, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    CONV("blocked 32->16 1x1 s1 8x8", 32, 8, 8, 16, 1, 1, 0, 1, LY_ACT_NONE, true, true),
    LAB("lab 16->16 3x3 relu+affine 20x20", 16, 20, 20, 16, 3, 1, 1, 1, false),
    LAB("lab 32->16 1x1 relu+affine 12x12", 32, 12, 12, 16, 1, 1, 0, 1, false),
    LAB("lab 16->16 3x3 dw relu+affine +res 10x10", 16, 10, 10, 16, 3, 1, 1, 16, true),
    LAB("lab 24->21 1x1 relu+affine +res 9x7", 24, 9, 7, 21, 1, 1, 0, 1, true),
    CONV_ANY("odd 5->7 3x5 s(2,1) p(1,2) d(1,2)", 1, 5, 11, 13, 7, 3, 5, 2, 1, 1, 2, 1, 2, 1,
             LY_ACT_NONE, false, false),
    /* YOLO9t and NanoDet-g layers of the provider tests (threads, caches) */
    CONV("conv1 16->32 3x3 s2 33x33", 16, 33, 33, 32, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV("head box 64->64 1x1 g4 bias 20x20", 64, 20, 20, 64, 1, 1, 0, 4, LY_ACT_NONE, true, false),
    CONV("elan4 cv4 128->256 1x1 10x10", 128, 10, 10, 256, 1, 1, 0, 1, LY_ACT_SILU, true, false),
    CONV("head cls 80->80 3x3 12x12", 80, 12, 12, 80, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    CONV("1x1 s2 16->8 10x10 (trailing input dropped)", 16, 10, 10, 8, 1, 2, 0, 1, LY_ACT_NONE,
         true, false),
    CONV("5x5 p2 s3 4->4 +res 14x14", 4, 14, 14, 4, 5, 3, 2, 1, LY_ACT_RELU, false, true),
    CONV("nanodet 3x3 leaky 32->64 13x13", 32, 13, 13, 64, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, true,
         false),
    CONV("nanodet 1x1 leaky 64->32 13x13", 64, 13, 13, 32, 1, 1, 0, 1, LY_ACT_LEAKY_RELU, true,
         false),
    CONV("nanodet stem 3->16 3x3 s2 leaky 26x26", 3, 26, 26, 16, 3, 2, 1, 1, LY_ACT_LEAKY_RELU,
         true, false),
    /* stems of other shapes: stride 1, padding 0 and 2, one and four
     * channels, 32 outputs, each activation, widths of 1 and 2, batch 2 */
    CONV("stem 3->32 3x3 s1 sigmoid 19x23", 3, 19, 23, 32, 3, 1, 1, 1, LY_ACT_SIGMOID, true, false),
    CONV("stem 1->16 3x3 s2 p0 relu 17x16", 1, 17, 16, 16, 3, 2, 0, 1, LY_ACT_RELU, true, false),
    CONV("stem 4->16 3x3 s2 p2 none 9x5", 4, 9, 5, 16, 3, 2, 2, 1, LY_ACT_NONE, false, false),
    CONV("stem 3->16 3x3 s1 silu 6x1", 3, 6, 1, 16, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    CONV("stem 3->16 3x3 s2 silu 5x2", 3, 5, 2, 16, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV_ANY("stem batch 2 3->32 3x3 s2 leaky 31x45", 2, 3, 31, 45, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1,
             LY_ACT_LEAKY_RELU, true, false),
    CONV("nanodet 1x1 lateral 48->16 +res 9x9", 48, 9, 9, 16, 1, 1, 0, 1, LY_ACT_NONE, true, true),
    /* 24 output channels in 8-channel blocks (LibreYOLO9t's 40x40 bottlenecks): residual,
     * wider inputs, every activation, rows narrower than a pixel group */
    CONV("thin 24->24 3x3 +res silu 40x40", 24, 40, 40, 24, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    CONV("thin 48->24 3x3 relu 14x27", 48, 14, 27, 24, 3, 1, 1, 1, LY_ACT_RELU, true, false),
    CONV("thin 64->24 3x3 leaky +res 5x13", 64, 5, 13, 24, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, false,
         true),
    CONV("thin 8->24 3x3 none 3x2", 8, 3, 2, 24, 3, 1, 1, 1, LY_ACT_NONE, true, false),
    CONV_ANY("thin batch 2 24->24 3x3 silu 7x1", 2, 24, 7, 1, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1,
             LY_ACT_SILU, true, false),
    /* 16 output channels in 8-channel blocks (LibreYOLO9t's 80x80 bottlenecks) */
    CONV("thin 16->16 3x3 silu 20x17", 16, 20, 17, 16, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    CONV("thin 32->16 3x3 sigmoid +res 9x14", 32, 9, 14, 16, 3, 1, 1, 1, LY_ACT_SIGMOID, true,
         true),
    CONV("thin 64->16 3x3 leaky 6x8", 64, 6, 8, 16, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, true, false),
    CONV("thin 8->16 3x3 relu no bias 4x3", 8, 4, 3, 16, 3, 1, 1, 1, LY_ACT_RELU, false, false),
    CONV_ANY("thin batch 2 16->16 3x3 +res none 3x1", 2, 16, 3, 1, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1,
             LY_ACT_NONE, true, true),
    CONV_ANY("dilated 8->12 3x3 d2 relu 15x15", 1, 8, 15, 15, 12, 3, 3, 1, 1, 2, 2, 2, 2, 1,
             LY_ACT_RELU, true, false),
    CONV_ANY("odd 5->7 3x5 s(2,1) p(1,2) no bias 11x9", 1, 5, 11, 9, 7, 3, 5, 2, 1, 1, 2, 1, 1, 1,
             LY_ACT_NONE, false, false),
    /* 3x3 stride-1 of 1 GFLOP and more (the Winograd kernels'): RT-DETR's PResNet (ReLU fused,
     * tiles cut by the edges), its CSPRep (SiLU after the kernel, as a post-affine would be) */
    CONV("presnet 64->64 3x3 relu 121x119", 64, 121, 119, 64, 3, 1, 1, 1, LY_ACT_RELU, true, false),
    /* its shortcut as the exported program writes it: the residual fused, ReLU after */
    CONV("presnet 64->64 3x3 +res 81x79", 64, 81, 79, 64, 3, 1, 1, 1, LY_ACT_NONE, true, true),
    CONV("csprep 128->128 3x3 silu 60x60", 128, 60, 60, 128, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    /* and under 1 GFLOP with 128 channels on a small map: RF-DETR's projector (no bias) */
    CONV("rf-detr c2f 128->128 3x3 no bias 24x24", 128, 24, 24, 128, 3, 1, 1, 1, LY_ACT_NONE, false,
         false),
    /* avx2_winograd's: LibreYOLO9t's head (64 -> 80, full 16-channel blocks), a last block of
     * 8 with a residual on a map its 4x4 tiles do not divide, 8 inputs */
    CONV("head 64->80 3x3 silu 42x38", 64, 42, 38, 80, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    CONV("elan 48->40 3x3 +res silu 23x21", 48, 23, 21, 40, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    CONV("8->32 3x3 leaky 9x10", 8, 9, 10, 32, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, true, false),
    CONV_ANY("batch 2 16->24 3x3 12x12", 2, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, LY_ACT_SILU,
             true, false),
    INT8("int8 16->16 3x3 +res 24x24", 16, 24, 24, 16, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    INT8("int8 elan 48->24 1x1 20x20", 48, 20, 20, 24, 1, 1, 0, 1, LY_ACT_SILU, true, false),
    INT8("int8 1x1 in parts 32->48 +res 12x12", 32, 12, 12, 48, 1, 1, 0, 1, LY_ACT_SILU, true,
         true),
    INT8("int8 1x1 in parts 64->32 no bias 10x10", 64, 10, 10, 32, 1, 1, 0, 1, LY_ACT_NONE, false,
         false),
    INT8("int8 down 32->64 3x3 s2 19x19", 32, 19, 19, 64, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    INT8("int8 64->64 3x3 silu 16x16", 64, 16, 16, 64, 3, 1, 1, 1, LY_ACT_SILU, true, false),
    INT8("int8 depthwise 8 3x3 9x9", 8, 9, 9, 8, 3, 1, 1, 8, LY_ACT_NONE, true, false),
    INT8("int8 odd 5->7 3x3 no bias 11x13", 5, 11, 13, 7, 3, 1, 1, 1, LY_ACT_NONE, false, false),
    /* the activations an execute provider may run after the kernel, with what follows them */
    INT8_AFFINE("int8 8->8 3x3 sigmoid *a+b +res 13x11", 8, 13, 11, 8, 3, 1, 1, LY_ACT_SIGMOID,
                true),
    INT8_AFFINE("int8 24->40 1x1 silu *a+b 9x7", 24, 9, 7, 40, 1, 1, 0, LY_ACT_SILU, false),
    INT8_BATCH("int8 batch 3 24->16 3x3 +res 13x10", 3, 24, 13, 10, 16, 3, 1, 1, 1, LY_ACT_SILU,
               true, true),
    POOL(LY_OP_MAX_POOL2D, "sppf 5x5 s1 p2 20x20", 64, 20, 20, 5, 1, 2),
    POOL(LY_OP_MAX_POOL2D, "stem 3x3 s2 p1 33x33", 32, 33, 33, 3, 2, 1),
    POOL(LY_OP_MAX_POOL2D, "hgnetv2 stem 2x2 s1 41x37", 16, 41, 37, 2, 1, 0),
    POOL(LY_OP_MAX_POOL2D, "3x3 s1 p1 13x11", 8, 13, 11, 3, 1, 1),
    POOL(LY_OP_AVG_POOL2D, "avg 2x2 s2 40x40", 32, 40, 40, 2, 2, 0),
    POOL(LY_OP_AVG_POOL2D, "avg 3x3 s1 p1 13x11", 16, 13, 11, 3, 1, 1),
    POOL(LY_OP_MAX_POOL2D, "3x3 s2 p1 17x17", 16, 17, 17, 3, 2, 1),
    POOL(LY_OP_AVG_POOL2D, "aconv avg 2x2 s1 33x33", 32, 33, 33, 2, 1, 0),
    POOL(LY_OP_AVG_POOL2D, "aconv avg 2x2 s1 20x20", 64, 20, 20, 2, 1, 0),
    POOL(LY_OP_AVG_POOL2D, "avg 3x3 s2 p1 15x15", 16, 15, 15, 3, 2, 1),
    POOL_ANY(LY_OP_AVG_POOL2D, "avg 3x3 s2 p1 excluding padding 15x14", 24, 15, 14, 3, 2, 1, true),
    POOL(LY_OP_MAX_POOL2D, "nanodet stem 3x3 s2 p1 52x52", 24, 52, 52, 3, 2, 1),
    POOL(LY_OP_MAX_POOL2D, "7x7 s2 p3 19x18", 16, 19, 18, 7, 2, 3),
    POOL_ANY(LY_OP_AVG_POOL2D, "avg 3x3 s2 p1 15x15 without the padding", 16, 15, 15, 3, 2, 1,
             true),
    UNARY(LY_OP_UPSAMPLE_NEAREST2D, "x2 64ch 20x20", 64, 20, 20),
    UNARY(LY_OP_SILU, "silu 64x40x40", 64, 40, 40),
    UNARY(LY_OP_SILU, "silu 7 elements", 7, 1, 1),
    UNARY(LY_OP_SIGMOID, "sigmoid 80x80x80", 80, 80, 80),
    UNARY(LY_OP_SIGMOID, "sigmoid 13 elements", 13, 1, 1),
    WIDE(LY_OP_SILU, "silu [2,3,37,41] in [-30, 30), 0 and +-88", 2, 3, 37, 41, 30.0f, true),
    WIDE(LY_OP_SIGMOID, "sigmoid [2,3,37,41] in [-30, 30), 0 and +-88", 2, 3, 37, 41, 30.0f, true),
    WIDE(LY_OP_DFL, "dfl 4x16 x 8400", 1, 64, 8400, 1, 0.0f, false),
    WIDE(LY_OP_DFL, "dfl 4x16 x 7", 1, 64, 7, 1, 0.0f, false),
    WIDE(LY_OP_DFL, "dfl [2,64,333], logits to +-80", 2, 64, 333, 1, 10.0f, true),
    WIDE(LY_OP_DFL, "dfl 4x2 bins x 37, logits to +-80", 1, 8, 37, 1, 10.0f, true),
    RESIZE("bilinear 13x13 -> 26x26", 1, 16, 13, 13, 26, 26, 0, 1),
    /* NanoDet's FPN: up by 2 and down by 2, legacy TF sampling */
    RESIZE("bilinear 13x13 -> 26x26 legacy", 1, 32, 13, 13, 26, 26, 0, 0),
    RESIZE("bilinear 52x52 -> 26x26 legacy", 1, 32, 52, 52, 26, 26, 0, 0),
    RESIZE("bilinear 24ch 9x11 -> 20x7 align", 2, 24, 9, 11, 20, 7, 1, 0),
    RESIZE("bilinear 16ch 1x1 -> 5x3", 1, 16, 1, 1, 5, 3, 0, 1),
    UNARY(LY_OP_ANCHOR_GRID, "grid of an 80x64 level", 3, 80, 64),
};

/* The index-th case of `op`. */
static const nn_case *find_case(ly_op op, int64_t index)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].op == op && index-- == 0) return &cases[i];
    return NULL;
}

/* conv2d_int8's codes (every int8 value, -128 included), scales near a
 * per-channel absmax / 127 and an input range that clamps some of x (drawn in
 * [-3, 3]) and, for most cases, has a zero point other than 0. */
static ly_status int8_operands(ly_check_case *out, const int64_t ws[4], float fan_in,
                               uint64_t *seed)
{
    ly_check_rng r = {.state = *seed};
    int8_t *codes = ly_check_case_input(out, 1, LY_I8, 4, ws);
    int64_t one = 1, o = ws[0];
    float *scale = ly_check_case_input(out, 4, LY_F32, 1, &o);
    float *lo = ly_check_case_input(out, 5, LY_F32, 1, &one);
    float *hi = ly_check_case_input(out, 6, LY_F32, 1, &one);
    if (!codes || !scale || !lo || !hi)
        return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    int64_t n = ws[0] * ws[1] * ws[2] * ws[3];
    for (int64_t i = 0; i < n; i++)
        codes[i] = (int8_t)((int)ly_check_rng_below(&r, 256) - 128);
    for (int64_t i = 0; i < o; i++)
        scale[i] = (float)(0.5 + ly_check_rng_unit(&r)) * (2.0f / sqrtf(fan_in)) / 127.0f;
    static const float ranges[][2] = {{-2.5f, 2.5f}, {-0.2785f, 2.9f}, {-1.0f, 1.75f}};
    const float *range = ranges[ly_check_rng_below(&r, 3)];
    *lo = range[0];
    *hi = range[1];
    out->constant[4] = out->constant[5] = out->constant[6] = true;
    *seed = r.state;
    return LY_OK;
}

static ly_status build(ly_op op, int64_t index, bool full, ly_check_case *out)
{
    (void)full;
    const nn_case *c = find_case(op, index);
    if (!c) return LY_E_NOT_FOUND;
    snprintf(out->name, sizeof out->name, "%s", c->name);
    uint64_t seed = ly_check_seed(ly_op_name(op), c->name);
    int64_t xs[4] = {c->n, c->c, c->h, c->w};
    ly_status st;
    switch (op) {
    case LY_OP_DFL: {
        int64_t ds[3] = {c->n, c->c, c->h};
        ly_status st = ly_check_case_random(out, 0, 3, ds, c->scale ? c->scale : 4.0f, &seed);
        float *x = out->in[0].data;
        int64_t n = c->n * c->c * c->h;
        if (st == LY_OK && c->extremes) x[0] = 80.0f, x[n - 1] = -80.0f;
        return st;
    }
    case LY_OP_CONV2D:
    case LY_OP_CONV2D_INT8: {
        ly_conv2d_params p = LY_CONV2D_DEFAULTS;
        p.stride[0] = c->sh, p.stride[1] = c->sw;
        p.padding[0] = c->ph, p.padding[1] = c->pw;
        p.dilation[0] = c->dh, p.dilation[1] = c->dw;
        p.groups = c->groups;
        p.activation = c->activation;
        p.alpha = 0.1;
        if (c->affine) {
            ly_check_rng r = {.state = seed};
            p.post_affine = 1;
            p.post_scale = (float)(ly_check_rng_unit(&r) * 3.0 - 1.0); /* either sign */
            p.post_shift = (float)(ly_check_rng_unit(&r) - 0.5);
            seed = r.state;
        }
        ly_check_case_params(out, &p, sizeof p);
        int64_t ws[4] = {c->o, c->c / c->groups, c->kh, c->kw}, bs[1] = {c->o};
        float fan_in = (float)(ws[1] * c->kh * c->kw);
        if ((st = ly_check_case_random(out, 0, 4, xs, 3.0f, &seed)) != LY_OK) return st;
        if (op == LY_OP_CONV2D_INT8) {
            if ((st = int8_operands(out, ws, fan_in, &seed)) != LY_OK) return st;
        } else if ((st = ly_check_case_random(out, 1, 4, ws, 2.0f / sqrtf(fan_in), &seed)) !=
                   LY_OK) {
            return st;
        }
        out->constant[1] = true;
        if (c->bias) {
            if ((st = ly_check_case_random(out, 2, 1, bs, 0.5f, &seed)) != LY_OK) return st;
            out->constant[2] = true;
        }
        if (c->residual) {
            int64_t ho = (c->h + 2 * c->ph - c->dh * (c->kh - 1) - 1) / c->sh + 1;
            int64_t wo = (c->w + 2 * c->pw - c->dw * (c->kw - 1) - 1) / c->sw + 1;
            int64_t rs[4] = {c->n, c->o, ho, wo};
            return ly_check_case_random(out, 3, 4, rs, 1.0f, &seed);
        }
        return LY_OK;
    }
    case LY_OP_MAX_POOL2D:
    case LY_OP_AVG_POOL2D: {
        ly_pool2d_params p = LY_POOL2D_DEFAULTS;
        p.kernel[0] = c->kh, p.kernel[1] = c->kw;
        p.stride[0] = c->sh, p.stride[1] = c->sw;
        p.padding[0] = c->ph, p.padding[1] = c->pw;
        if (c->exclude_pad) p.count_include_pad = 0;
        ly_check_case_params(out, &p, sizeof p);
        return ly_check_case_random(out, 0, 4, xs, 3.0f, &seed);
    }
    case LY_OP_RESIZE_BILINEAR2D: {
        ly_resize_bilinear2d_params p = LY_RESIZE_BILINEAR2D_DEFAULTS;
        p.size[0] = c->o, p.size[1] = c->kw;
        p.align_corners = c->ph, p.half_pixel_centers = c->pw;
        ly_check_case_params(out, &p, sizeof p);
        return ly_check_case_random(out, 0, 4, xs, 3.0f, &seed);
    }
    default: {
        ly_status st = ly_check_case_random(out, 0, 4, xs, c->scale ? c->scale : 3.0f, &seed);
        float *x = out->in[0].data;
        if (st == LY_OK && c->extremes) x[0] = 0.0f, x[1] = -88.0f, x[2] = 88.0f;
        return st;
    }
    }
}

/* Benchmark calls on YOLO9-like activations of `numel` elements: activations
 * on a [numel/1024, 1024] matrix, dfl on [1, 64, A], pools on [1, 64, s, s] as
 * AConv (avg 2x2 s1) and SPPELAN (max 5x5 s1 p2) run them. */
static ly_status bench(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)b;
    snprintf(c->name, sizeof c->name, "%zu elements", numel);
    switch (op) {
    case LY_OP_SILU:
    case LY_OP_SIGMOID:
        return ly_check_case_normalish(c, 0, 2, (int64_t[]){(int64_t)(numel / 1024), 1024}, 1);
    case LY_OP_DFL:
        return ly_check_case_normalish(c, 0, 3, (int64_t[]){1, 64, (int64_t)(numel / 64)}, 1);
    case LY_OP_MAX_POOL2D:
    case LY_OP_AVG_POOL2D: {
        bool max_pool = op == LY_OP_MAX_POOL2D;
        int64_t side = (int64_t)sqrt((double)(numel / 64));
        ly_pool2d_params p = LY_POOL2D_DEFAULTS;
        p.kernel[0] = p.kernel[1] = max_pool ? 5 : 2;
        p.padding[0] = p.padding[1] = max_pool ? 2 : 0;
        ly_check_case_params(c, &p, sizeof p);
        return ly_check_case_normalish(c, 0, 4, (int64_t[]){1, 64, side, side}, 1);
    }
    default:
        return LY_E_NOT_FOUND;
    }
}

const ly_case_set ly_cases_nn = {.build = build, .bench = bench};
