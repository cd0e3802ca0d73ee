/* SPDX-License-Identifier: MIT */
/*
 * The convolutions' SiLU or sigmoid over a flat f32 array in place, on AVX-512 CPUs
 * sixteen lanes a vector (ly_activate16), on AVX2+FMA ones eight
 * (ly_activate8), for other providers' epilogues (sigmoid_avx2.c). Only in
 * builds with the AVX2 providers (LY_HAVE_AVX2_PROVIDERS); callers check
 * ly_cpu()->avx2 && ly_cpu()->fma. One thread below 65536 elements.
 */
#ifndef LY_PROVIDERS_AVX2_ACTIVATE_H
#define LY_PROVIDERS_AVX2_ACTIVATE_H

#include <stdint.h>

void ly_simd_activate(float *x, int64_t n, int64_t activation, int threads);

#endif
