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

#endif
