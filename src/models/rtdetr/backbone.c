/* SPDX-License-Identifier: MIT */
/* PResNet-vd, the backbone of RT-DETR's and RT-DETRv2's r18-r101 (rtdetr.md 2). */
#include "models/rtdetr/rtdetr.h"

#include "core/core.h"
#include "models/common/builder.h"
#include "models/common/fold.h"

#include <stdio.h>

typedef struct presnet_arch {
    int depth;
    int blocks[4];
    bool bottleneck;
} presnet_arch;

static const presnet_arch archs[] = {
    {18, {2, 2, 2, 2}, false},
    {34, {3, 4, 6, 3}, false},
    {50, {3, 4, 6, 3}, true},
    {101, {3, 4, 23, 3}, true},
};

static ly_fmap relu(ly_builder *b, const char *what, ly_fmap x)
{
    x.v = ly_build_unary(b, LY_OP_RELU, what, x.v);
    return x;
}

/* ReLU(x + shortcut): the end of every block. */
static ly_fmap add_relu(ly_builder *b, const char *name, ly_fmap x, ly_fmap shortcut)
{
    char what[LY_KEY_MAX];
    snprintf(what, sizeof what, "%.100s.add", name);
    x.v = ly_build_binary(b, LY_OP_ADD, what, x.v, shortcut.v);
    snprintf(what, sizeof what, "%.100s.relu", name);
    return relu(b, what, x);
}

/* The projection shortcut of a stage's first block: a 1x1 ConvNormLayer,
 * after AvgPool2d(2, 2) where the block strides (variant d). */
static ly_fmap projection(ly_builder *b, const char *block, ly_fmap x, int64_t cout, bool strided)
{
    char name[LY_KEY_MAX];
    if (!strided) {
        snprintf(name, sizeof name, "%.100s.short", block);
        return ly_build_conv_norm(b, name, "norm", x, cout, 1, 1, false, LY_ACT_NONE, NULL);
    }
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 2;
    snprintf(name, sizeof name, "%.100s.short.pool", block);
    ly_fmap pooled = {ly_build_node(b, LY_OP_AVG_POOL2D, name, 1, &x.v, &p), x.c, x.h / 2, x.w / 2};
    snprintf(name, sizeof name, "%.100s.short.conv", block);
    return ly_build_conv_norm(b, name, "norm", pooled, cout, 1, 1, false, LY_ACT_NONE, NULL);
}

static ly_fmap block(ly_builder *b, const presnet_arch *a, int stage, int index, ly_fmap x)
{
    char name[LY_KEY_MAX], conv[LY_KEY_MAX];
    snprintf(name, sizeof name, "res_layers.%d.blocks.%d", stage, index);
    int64_t width = (int64_t)64 << stage, cout = a->bottleneck ? 4 * width : width;
    int64_t stride = index == 0 && stage > 0 ? 2 : 1;
    ly_fmap shortcut = index == 0 ? projection(b, name, x, cout, stride == 2) : x;
    ly_fmap y;
    if (a->bottleneck) {
        snprintf(conv, sizeof conv, "%.100s.branch2a", name);
        y = ly_build_conv_norm(b, conv, "norm", x, width, 1, 1, false, LY_ACT_RELU, NULL);
        snprintf(conv, sizeof conv, "%.100s.branch2b", name);
        y = ly_build_conv_norm(b, conv, "norm", y, width, 3, stride, false, LY_ACT_RELU, NULL);
        snprintf(conv, sizeof conv, "%.100s.branch2c", name);
        y = ly_build_conv_norm(b, conv, "norm", y, cout, 1, 1, false, LY_ACT_NONE, NULL);
    } else {
        snprintf(conv, sizeof conv, "%.100s.branch2a", name);
        y = ly_build_conv_norm(b, conv, "norm", x, width, 3, stride, false, LY_ACT_RELU, NULL);
        snprintf(conv, sizeof conv, "%.100s.branch2b", name);
        y = ly_build_conv_norm(b, conv, "norm", y, cout, 3, 1, false, LY_ACT_NONE, NULL);
    }
    return add_relu(b, name, y, shortcut);
}

ly_status ly_rtdetr_presnet(ly_graph *g, const ly_checkpoint *ck, int depth, ly_graph_value image,
                            int64_t height, int64_t width, ly_graph_value outs[3],
                            int64_t shapes[3][3])
{
    const presnet_arch *a = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].depth == depth) a = &archs[i];
    if (!a) return ly_set_error(LY_E_UNSUPPORTED, "PResNet: no depth %d (18, 34, 50, 101)", depth);
    if (height <= 0 || width <= 0 || height % 32 || width % 32)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "PResNet: input %lldx%lld, expected sides that are multiples of 32",
                            (long long)height, (long long)width);
    ly_builder b = {.g = g, .ck = ck, .what = "PResNet", .prefix = "backbone.", .st = LY_OK};
    static const struct {
        const char *name;
        int64_t cout, stride;
    } stem[3] = {{"conv1.conv1_1", 32, 2}, {"conv1.conv1_2", 32, 1}, {"conv1.conv1_3", 64, 1}};
    ly_fmap x = {image, 3, height, width};
    for (int i = 0; i < 3; i++)
        x = ly_build_conv_norm(&b, stem[i].name, "norm", x, stem[i].cout, 3, stem[i].stride, false,
                               LY_ACT_RELU, NULL);
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = p.kernel[1] = 3;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 1;
    x = (ly_fmap){ly_build_node(&b, LY_OP_MAX_POOL2D, "pool", 1, &x.v, &p), x.c, (x.h - 1) / 2 + 1,
                  (x.w - 1) / 2 + 1};
    for (int s = 0; s < 4 && b.st == LY_OK; s++) {
        for (int k = 0; k < a->blocks[s]; k++)
            x = block(&b, a, s, k, x);
        if (s >= 1) {
            outs[s - 1] = x.v;
            shapes[s - 1][0] = x.c;
            shapes[s - 1][1] = x.h;
            shapes[s - 1][2] = x.w;
        }
    }
    return b.st;
}
