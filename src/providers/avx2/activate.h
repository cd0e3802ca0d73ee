/* SPDX-License-Identifier: MIT */
/*
 * The convolutions' activation (ly_activate16: silu, sigmoid, relu, leaky
 * relu with slope 0) over a flat f32 array in place, on AVX-512 CPUs, for
 * other providers' epilogues (sigmoid_avx2.c). Only in builds with the AVX2
 * providers (LY_HAVE_AVX2_PROVIDERS); callers check ly_cpu()->avx512f.
 */
#ifndef LY_PROVIDERS_AVX2_ACTIVATE_H
#define LY_PROVIDERS_AVX2_ACTIVATE_H

#include <stdint.h>

void ly_avx512_activate(float *x, int64_t n, int64_t activation, int threads);

#endif
