/* SPDX-License-Identifier: MIT */
#include "core/layout.h"

#include <string.h>

int ly_layout_block(ly_layout layout)
{
    return layout == LY_LAYOUT_NCHW16C ? 16 : layout == LY_LAYOUT_NCHW8C ? 8 : 1;
}

bool ly_layout_fits(ly_layout layout, const ly_tensor *shape)
{
    if (layout == LY_LAYOUT_PLAIN) return true;
    return shape->ndim == 4 && shape->shape[1] % ly_layout_block(layout) == 0;
}

/* Offset of element (n, c, h, w) in `layout`. */
static int64_t offset_of(ly_layout layout, const int64_t s[4], int64_t n, int64_t c, int64_t h,
                         int64_t w)
{
    int64_t b = ly_layout_block(layout);
    if (b == 1) return ((n * s[1] + c) * s[2] + h) * s[3] + w;
    return (((n * (s[1] / b) + c / b) * s[2] + h) * s[3] + w) * b + c % b;
}

void ly_layout_reorder(const float *src, ly_layout from, float *dst, ly_layout to,
                       const int64_t shape[4])
{
    if (from == to) {
        memcpy(dst, src, (size_t)(shape[0] * shape[1] * shape[2] * shape[3]) * sizeof(float));
        return;
    }
    for (int64_t n = 0; n < shape[0]; n++)
        for (int64_t c = 0; c < shape[1]; c++)
            for (int64_t h = 0; h < shape[2]; h++)
                for (int64_t w = 0; w < shape[3]; w++)
                    dst[offset_of(to, shape, n, c, h, w)] = src[offset_of(from, shape, n, c, h, w)];
}

void ly_layouts_channelwise(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    const ly_tensor *x = call->in[0];
    if (x->ndim != 4 || x->shape[1] % 8 != 0) return;
    uint32_t blocked = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    if (x->shape[1] % 16 == 0) blocked |= LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C);
    out->in[0] = blocked;
    out->out[0] = blocked;
    out->tied = 1u << 0;
    out->preferred = LY_LAYOUT_NCHW8C;
}
