/* SPDX-License-Identifier: MIT */
/*
 * Channel-blocked layouts (ly_layout, libreyolo/kernels.h): a 4-d map of NCHW
 * shape [N, C, H, W] stored as [N][C/B][H][W][B]. The graph and the parity
 * harness move data between a blocked layout and plain NCHW with these.
 */
#ifndef LY_CORE_LAYOUT_H
#define LY_CORE_LAYOUT_H

#include "libreyolo/kernels.h"

/* Channels per block (1 for plain). */
int ly_layout_block(ly_layout layout);

/* Whether a tensor of this shape can be stored in `layout` (plain: always;
 * blocked: 4-d with C a multiple of the block). */
bool ly_layout_fits(ly_layout layout, const ly_tensor *shape);

/* dst (in `to`) = src (in `from`), both holding an f32 map of NCHW `shape`
 * (which both layouts fit). dst and src must not overlap. */
void ly_layout_reorder(const float *src, ly_layout from, float *dst, ly_layout to,
                       const int64_t shape[4]);

/* The layouts of an op that maps each channel of in[0] to the same channel of
 * out[0] (pools, resizes): both in either blocked layout the map fits, tied,
 * NCHW8C preferred but asked for by nothing (it takes what the convolutions
 * around it prefer); plain only where C is no multiple of 8. */
void ly_layouts_channelwise(const ly_kernel_call *call, ly_kernel_layouts *out);

#endif
