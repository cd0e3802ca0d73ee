/* SPDX-License-Identifier: MIT */
/*
 * The in-tree accelerated quant implementations. Declarations only: this header
 * is included by providers.c, which registers them and is compiled WITHOUT
 * -mavx2 (registration and predicates run on every CPU, before anyone knows the
 * CPU has AVX2); the kernels themselves live in *_avx2.c files.
 */
#ifndef LY_KERNELS_QUANT_PROVIDERS_H
#define LY_KERNELS_QUANT_PROVIDERS_H

#include "libreyolo/kernels.h"

#define LY_AVX2_DECLARE(op)                                                                        \
    ly_status ly_avx2_##op(const ly_kernel_call *call);                                            \
    ly_status ly_avx2_##op##_backward(const ly_kernel_call *call)

LY_AVX2_DECLARE(fake_quant_int8_per_channel);
LY_AVX2_DECLARE(fake_quant_int8_affine);
LY_AVX2_DECLARE(fake_quant_fp8);
LY_AVX2_DECLARE(fake_quant_int_grouped);
LY_AVX2_DECLARE(fake_quant_nvfp4_weight);
LY_AVX2_DECLARE(fake_quant_nvfp4_dynamic);
LY_AVX2_DECLARE(fake_quant_mxfp4_weight);
LY_AVX2_DECLARE(fake_quant_mxfp4_dynamic);
ly_status ly_avx2_unpack_int_grouped(const ly_kernel_call *call);
ly_status ly_avx2_unpack_nvfp4(const ly_kernel_call *call);

/* Shared by the backward kernels whose gradient is the identity. */
ly_status ly_avx2_copy_grad(const ly_kernel_call *call);

#endif
