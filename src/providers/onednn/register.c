/* SPDX-License-Identifier: MIT */
/*
 * The oneDNN provider ("onednn"): conv2d (bias, activation and residual fused),
 * silu and sigmoid, where its vectorised exp replaces libm's expf (~10x), dfl
 * (~3x), linear on its matmul with packed weights, the pools on AVX-512 machines (2-4x;
 * elsewhere its NCHW pooling is slower than the reference and declines), and pools and nearest
 * upsampling on channel-blocked maps, so the convolutions around them keep their layout. On plain
 * maps upsample and concat stay on the references: they only move memory. Running these on oneDNN
 * also keeps them on its OpenMP threads, which otherwise spin while our own threads want the cores.
 * Each implementation declines, through its predicate, what it cannot do.
 */
#include "providers/onednn/onednn_common.h"

void ly_onednn_register(void)
{
    ly_onednn_register_conv2d();
    ly_onednn_register_eltwise();
    ly_onednn_register_dfl();
    ly_onednn_register_pool();
    ly_onednn_register_resample();
    ly_onednn_register_linear();
    ly_onednn_register_conv2d_int8();
}
