/* SPDX-License-Identifier: MIT */
/*
 * The AVX2 pools' rule for plain maps (pool_avx2.c), shared with their
 * predicate (register.c, baseline ISA): column stride 1, and for max a window
 * of up to 9 elements (the reference's single-pass order, so even a NaN's
 * payload is the same). Channel-blocked maps take any window.
 */
#ifndef LY_PROVIDERS_AVX2_POOL_H
#define LY_PROVIDERS_AVX2_POOL_H

#include "libreyolo/ops.h"

#include <stdbool.h>

static inline bool ly_avx2_pool_plain_takes(const ly_pool2d_params *p, bool max)
{
    return p->stride[1] == 1 && (!max || p->kernel[0] * p->kernel[1] <= 9);
}

#endif
