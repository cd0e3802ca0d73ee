/* SPDX-License-Identifier: MIT */
/*
 * conv2d_int8's 1x1 convolutions on AVX-512 VNNI, sums and copy back in one
 * pass (conv1x1_vnni_avx2.c): the onednn_int8 provider's own path for them.
 */
#ifndef LY_PROVIDERS_ONEDNN_CONV1X1_VNNI_H
#define LY_PROVIDERS_ONEDNN_CONV1X1_VNNI_H

#include "providers/onednn/onednn_common.h"

#include <stdbool.h>
#include <stdint.h>

/* The weights packed for vpdpbusd, with what turns sums into values. */
typedef struct ly_vnni_1x1 {
    int64_t o, c;
    int64_t quads, blocks; /* ceil(c / 4), ceil(o / 16) */
    int8_t *weights;       /* [blocks][quads][16 outputs][4 channels], zeros past o and c */
    int32_t *compensation; /* [blocks * 16]: the zero point's code times the weights' sum */
    float *scales, *bias;  /* [blocks * 16] */
    bool bias_in_sum;      /* bias is bias / scale, added before the scale */
} ly_vnni_1x1;

/* Whether this CPU (AVX-512 with VNNI) runs it into blocks of `block`
 * channels with `epilogue` (o a multiple of the block). */
bool ly_vnni_1x1_supported(int64_t o, int block, const ly_onednn_epilogue *epilogue);

/* codes int8 [o][c], u8 zero point of the input, per-output scales (s_x *
 * s_w), bias (NULL: none) and where it goes; NULL when out of memory. */
ly_vnni_1x1 *ly_vnni_1x1_pack(const int8_t *codes, int64_t o, int64_t c, int32_t zero_point_u8,
                              const float *scales, const float *bias, bool bias_in_sum);
void ly_vnni_1x1_free(ly_vnni_1x1 *k);

/* Pixels [p0, p1) of one image: x (u8 channels-last codes, pixel 0 at x; 3
 * bytes readable past the last pixel when c is not a multiple of 4) into out
 * (that image's map in blocks of `block` channels, `plane` floats a block),
 * through `epilogue` with `residual` (out's layout, NULL: none; may be out). */
void ly_vnni_1x1_run(const ly_vnni_1x1 *k, const uint8_t *x, int64_t p0, int64_t p1, float *out,
                     const float *residual, int64_t plane, int block,
                     const ly_onednn_epilogue *epilogue);

#endif
