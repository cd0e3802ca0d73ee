/* SPDX-License-Identifier: MIT */
/*
 * What the AMX provider's kernels share with other providers: whether this
 * process may use the tiles, and the int8 convolution's sums on them
 * (conv2d_int8_amx_avx2.c), which the conv2d_int8 provider runs in its bands
 * (providers/onednn/conv2d_int8_onednn.c: "amx_int8"). Only in builds with the
 * AVX2 providers on x86-64.
 */
#ifndef LY_PROVIDERS_AMX_AMX_H
#define LY_PROVIDERS_AMX_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Linux gives a process the tiles' state only when asked (arch_prctl
 * ARCH_REQ_XCOMP_PERM), once for all its threads: asks the first time. */
bool ly_amx_tiles_granted(void);

/* What ldtilecfg loads (palette 1): each tile's rows and bytes a row. */
typedef struct ly_amx_tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} ly_amx_tile_config;

/* A convolution of u8 codes (channels-last rows) by s8 weight codes, groups 1,
 * dilation 1: o output channels, c input channels, kh x kw taps, strides sh,
 * sw, wo outputs a row. */
typedef struct ly_amx_int8_shape {
    int64_t c, o, kh, kw, sh, sw, wo;
} ly_amx_int8_shape;

typedef struct ly_amx_int8_conv ly_amx_int8_conv;

/* The weight codes (OIHW, s8) packed into the tiles' layout, with what turns
 * a sum into oneDNN's float for it: (sum - zero_point * sum of o's codes), plus
 * bias_in_sum[o] where given, times scale[o], plus bias[o] where given (at
 * most one of the two). The arrays are copied. NULL: out of memory. */
ly_amx_int8_conv *ly_amx_int8_conv_create(const ly_amx_int8_shape *shape, const int8_t *weights,
                                          int32_t zero_point, const float *scale,
                                          const float *bias_in_sum, const float *bias);
void ly_amx_int8_conv_free(ly_amx_int8_conv *conv);

/* The weight codes back as OIHW. */
void ly_amx_int8_conv_weights(const ly_amx_int8_conv *conv, int8_t *weights);

/* Bytes the kernel may read past the input rows of a run (their values do
 * not reach any output): a caller's buffer holds them. */
size_t ly_amx_int8_conv_slack(const ly_amx_int8_conv *conv);

/* Output rows [0, rows), f32 channels-last into `dst` (rows x wo x o), from
 * `codes`: the input pixel of output (y, x) at tap (i, j) is codes[((y * sh +
 * i) * row_pixels + x * sw + j) * c] (padding already in the rows, as codes of
 * the zero point). `accumulate`: dst += the convolution (oneDNN's sum
 * post-op). On one thread; every call sets the tiles up and gives them back. */
void ly_amx_int8_conv_run(const ly_amx_int8_conv *conv, const uint8_t *codes, int64_t row_pixels,
                          int64_t rows, float *dst, bool accumulate);

#endif
