/* SPDX-License-Identifier: MIT */
/* What the shape ops' contract, references and the graph (which runs some of
 * them as views) agree on. */
#ifndef LY_OPS_SHAPE_SHAPE_H
#define LY_OPS_SHAPE_SHAPE_H

#include "libreyolo/kernels.h"

/* A slice's first index and element count on an axis of `extent` (Python's
 * slicing: negative bounds count from the end, both clamped to [0, extent]). */
void ly_slice_resolve(const ly_slice_params *p, int64_t extent, int64_t *start, int64_t *count);

#endif
