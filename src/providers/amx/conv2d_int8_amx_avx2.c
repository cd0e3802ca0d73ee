/* SPDX-License-Identifier: MIT */
/*
 * The int8 convolution's sums on AMX tiles (amx.h), for the conv2d_int8
 * provider's bands. A tile product (tdpbusd) sums 16 rows x 64 u8 codes
 * against 64 x 16 s8 weight codes into 16 x 16 int32: exact, as oneDNN's
 * VNNI kernels.
 *
 * The rows of an A tile are 16 neighbouring output pixels; each reads 64
 * bytes of the input row a tap row (i) covers, starting where its window
 * does: channels-last, the kw taps of that row are kw x c contiguous bytes, so
 * the tile's row stride is sw x c bytes and its rows overlap. Those kw x c
 * bytes go in chunks of 64; the weights past them are zero, so whatever the
 * chunk reads beyond (the next pixels, or the slack) adds nothing. A 3x3 over
 * 16 channels is then 3 tile products for 16 pixels x 16 outputs: no im2col,
 * no channel padding to 64 (oneDNN 2.6's AMX kernels pad c and took longer than
 * its VNNI ones on LibreYOLO9t's thin maps).
 *
 * Blocks of 2 x 16 pixels x 2 x 16 outputs: four C tiles, two A tiles, two B
 * tiles. Each C tile is stored and turned into floats at once, as oneDNN's
 * kernels do: (float)(sum - zero point compensation), + the bias in the sum,
 * x the channel's scale, + a bias after it.
 *
 * Measured (1 thread, a 2-core VM of an AMX Xeon, against oneDNN 2.6's
 * kernels in the int8 LibreYOLO9t, ONEDNN_VERBOSE times): 16->16 3x3 on
 * 80x80 0.033 ms against 0.066, 24->24 on 40x40 0.022 against 0.049, the
 * stride-2 16->32 on 320x320 0.27 against 1.0, 128->64 1x1 on 80x80 0.12
 * against 0.21.
 */
#include "core/core.h"
#include "providers/amx/amx.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(__x86_64__)

#define LY_AMX_INT8 __attribute__((target("avx512f,avx512bw,avx512dq,amx-tile,amx-int8")))

/* One B tile: 16 rows of 4 codes for each of 16 outputs. */
#define TILE_BYTES 1024

struct ly_amx_int8_conv {
    ly_amx_int8_shape shape;
    int64_t chunks; /* 64-byte chunks of a tap row's kw x c codes */
    int64_t blocks; /* 16-output blocks */
    int8_t *packed; /* [kh][chunks][blocks] B tiles */
    /* per output, blocks x 16 (zeros past o) */
    int32_t *compensation;
    float *scale, *bias_in_sum, *bias;
};

static int8_t *weight_at(const ly_amx_int8_conv *k, int8_t *packed, int64_t o, int64_t ch,
                         int64_t i, int64_t j)
{
    const ly_amx_int8_shape *s = &k->shape;
    int64_t t = j * s->c + ch, chunk = t / 64, r = t % 64;
    int8_t *tile = packed + ((i * k->chunks + chunk) * k->blocks + o / 16) * TILE_BYTES;
    return tile + (r / 4) * 64 + (o % 16) * 4 + r % 4;
}

static float *copy_floats(const float *from, int64_t n)
{
    float *to = malloc((size_t)n * sizeof *to);
    if (to) memcpy(to, from, (size_t)n * sizeof *to);
    return to;
}

ly_amx_int8_conv *ly_amx_int8_conv_create(const ly_amx_int8_shape *shape, const int8_t *weights,
                                          int32_t zero_point, const float *scale,
                                          const float *bias_in_sum, const float *bias)
{
    ly_amx_int8_conv *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->shape = *shape;
    const ly_amx_int8_shape *s = &k->shape;
    k->chunks = (s->kw * s->c + 63) / 64;
    k->blocks = (s->o + 15) / 16;
    size_t packed_bytes = (size_t)(s->kh * k->chunks * k->blocks) * TILE_BYTES;
    k->packed = aligned_alloc(64, packed_bytes);
    k->compensation = calloc((size_t)(k->blocks * 16), sizeof *k->compensation);
    k->scale = copy_floats(scale, s->o);
    if (bias_in_sum) k->bias_in_sum = copy_floats(bias_in_sum, s->o);
    if (bias) k->bias = copy_floats(bias, s->o);
    if (!k->packed || !k->compensation || !k->scale || (bias_in_sum && !k->bias_in_sum) ||
        (bias && !k->bias)) {
        ly_amx_int8_conv_free(k);
        return NULL;
    }
    memset(k->packed, 0, packed_bytes);
    for (int64_t o = 0; o < s->o; o++)
        for (int64_t ch = 0; ch < s->c; ch++)
            for (int64_t i = 0; i < s->kh; i++)
                for (int64_t j = 0; j < s->kw; j++) {
                    int8_t w = weights[((o * s->c + ch) * s->kh + i) * s->kw + j];
                    *weight_at(k, k->packed, o, ch, i, j) = w;
                    k->compensation[o] += zero_point * w;
                }
    return k;
}

void ly_amx_int8_conv_free(ly_amx_int8_conv *k)
{
    if (!k) return;
    free(k->packed);
    free(k->compensation);
    free(k->scale);
    free(k->bias_in_sum);
    free(k->bias);
    free(k);
}

void ly_amx_int8_conv_weights(const ly_amx_int8_conv *k, int8_t *weights)
{
    const ly_amx_int8_shape *s = &k->shape;
    for (int64_t o = 0; o < s->o; o++)
        for (int64_t ch = 0; ch < s->c; ch++)
            for (int64_t i = 0; i < s->kh; i++)
                for (int64_t j = 0; j < s->kw; j++)
                    weights[((o * s->c + ch) * s->kh + i) * s->kw + j] =
                        *weight_at(k, k->packed, o, ch, i, j);
}

size_t ly_amx_int8_conv_slack(const ly_amx_int8_conv *k)
{
    /* the last block's pixels past wo (up to 31) and its last chunk's bytes */
    return (size_t)(32 * k->shape.sw * k->shape.c + k->chunks * 64);
}

/* C tile `sums` (16 pixels from x0 of row y, outputs of block `block`) into floats. */
LY_AMX_INT8 static void store_sums(const ly_amx_int8_conv *k, const int32_t *sums, float *row,
                                   int64_t x0, int64_t block, bool accumulate)
{
    const ly_amx_int8_shape *s = &k->shape;
    int64_t o0 = block * 16, live = s->o - o0 < 16 ? s->o - o0 : 16;
    __mmask16 lanes = (__mmask16)((1u << live) - 1);
    __m512i compensation = _mm512_loadu_si512(k->compensation + o0);
    __m512 scale = _mm512_maskz_loadu_ps(lanes, k->scale + o0);
    __m512 in_sum =
        k->bias_in_sum ? _mm512_maskz_loadu_ps(lanes, k->bias_in_sum + o0) : _mm512_setzero_ps();
    __m512 after = k->bias ? _mm512_maskz_loadu_ps(lanes, k->bias + o0) : _mm512_setzero_ps();
    int64_t pixels = s->wo - x0 < 16 ? s->wo - x0 : 16;
    for (int64_t p = 0; p < pixels; p++) {
        __m512i sum = _mm512_sub_epi32(_mm512_load_si512(sums + p * 16), compensation);
        __m512 v = _mm512_cvtepi32_ps(sum);
        if (k->bias_in_sum) v = _mm512_add_ps(v, in_sum);
        v = _mm512_mul_ps(v, scale);
        if (k->bias) v = _mm512_add_ps(v, after);
        float *at = row + (x0 + p) * s->o + o0;
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, at));
        _mm512_mask_storeu_ps(at, lanes, v);
    }
}

LY_AMX_INT8 void ly_amx_int8_conv_run(const ly_amx_int8_conv *k, const uint8_t *codes,
                                      int64_t row_pixels, int64_t rows, float *dst, bool accumulate)
{
    const ly_amx_int8_shape *s = &k->shape;
    ly_amx_tile_config config = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        config.rows[t] = 16;
        config.colsb[t] = 64;
    }
    _tile_loadconfig(&config);
    int32_t sums[4][256] __attribute__((aligned(64)));
    size_t pixel_step = (size_t)(s->sw * s->c), row_bytes = (size_t)(row_pixels * s->c);
    for (int64_t y = 0; y < rows; y++) {
        float *row = dst + y * s->wo * s->o;
        for (int64_t x0 = 0; x0 < s->wo; x0 += 32) {
            bool second_pixels = x0 + 16 < s->wo;
            for (int64_t b = 0; b < k->blocks; b += 2) {
                bool second_block = b + 1 < k->blocks;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                for (int64_t i = 0; i < s->kh; i++) {
                    const uint8_t *a =
                        codes + (size_t)(y * s->sh + i) * row_bytes + (size_t)x0 * pixel_step;
                    for (int64_t q = 0; q < k->chunks; q++, a += 64) {
                        const int8_t *w =
                            k->packed + ((i * k->chunks + q) * k->blocks + b) * TILE_BYTES;
                        _tile_loadd(4, a, pixel_step);
                        _tile_loadd(6, w, 64);
                        _tile_dpbusd(0, 4, 6);
                        if (second_block) {
                            _tile_loadd(7, w + TILE_BYTES, 64);
                            _tile_dpbusd(1, 4, 7);
                        }
                        if (second_pixels) {
                            _tile_loadd(5, a + 16 * pixel_step, pixel_step);
                            _tile_dpbusd(2, 5, 6);
                            if (second_block) _tile_dpbusd(3, 5, 7);
                        }
                    }
                }
                _tile_stored(0, sums[0], 64);
                store_sums(k, sums[0], row, x0, b, accumulate);
                if (second_block) {
                    _tile_stored(1, sums[1], 64);
                    store_sums(k, sums[1], row, x0, b + 1, accumulate);
                }
                if (second_pixels) {
                    _tile_stored(2, sums[2], 64);
                    store_sums(k, sums[2], row, x0 + 16, b, accumulate);
                    if (second_block) {
                        _tile_stored(3, sums[3], 64);
                        store_sums(k, sums[3], row, x0 + 16, b + 1, accumulate);
                    }
                }
            }
        }
    }
    _tile_release();
}

#endif
