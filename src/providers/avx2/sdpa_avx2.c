/* SPDX-License-Identifier: MIT */
/*
 * The fused AVX2+FMA provider of the sdpa slot ("avx2"): bit-identical to
 * the reference (src/ops/sdpa/reference.c) on every shape and thread
 * count, because every output element goes through the same operation sequence;
 * only which elements run side by side changes:
 *
 *  - q.k^T: each lane holds one key and runs that score's own sequential fmaf
 *    chain over d (K is repacked as [key/8][d][8] panels); a 6-row x 16-key
 *    register tile gives 12 independent accumulators.
 *  - softmax per query row over a score row (no [Nq, Nk] matrix; no online
 *    softmax): lane t of a ymm sees keys j = t mod 8 in increasing j, which is
 *    exactly the reference's strided lane order, and the horizontal max/sum use
 *    the reference's tree.
 *  - P.v: lanes over output channels, each a sequential fmaf chain over keys (V is
 *    repacked as [channel/8][Nk][8] panels), the same 6 x 16 tile.
 *  - On AVX-512 CPUs both products run on 16-lane panels and an 8 x 32 tile:
 *    more elements side by side, each the same chain.
 *
 * Work items are (batch*head, block of MR or MR16 query rows), split across threads in
 * contiguous ranges; a thread repacks K and V when its range enters a new head.
 */
#include "core/core.h"
#include "ops/sdpa/sdpa_internal.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/avx2/transpose_avx2.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Query rows per register tile: 6 on 8 lanes; on AVX-512, 8 (16 accumulators
 * in q.k^T's 8 x 32 tile, and P.v's 8 x 16 tile for head dims up to 16 keeps
 * both FMA ports busy where six chains waited on the FMA latency). */
#define MR 6
#define MR16 8

static float *alloc_floats(int64_t n)
{
    size_t bytes = ((size_t)(n < 16 ? 16 : n) * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* C[MR][16] = A[MR][L] . [B0 | B1] where each B is a contiguous [L][8] panel;
 * every element is a sequential fmaf chain over l from +0. */
static inline void tile_6x16(int64_t L, const float *A, int64_t lda, const float *B0,
                             const float *B1, float *C, int64_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda, *a4 = A + 4 * lda,
                *a5 = A + 5 * lda;
    for (int64_t l = 0; l < L; l++) {
        __m256 b0 = _mm256_load_ps(B0 + 8 * l), b1 = _mm256_load_ps(B1 + 8 * l);
        __m256 a = _mm256_broadcast_ss(a0 + l);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(a1 + l);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(a2 + l);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(a3 + l);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(a4 + l);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(a5 + l);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    _mm256_store_ps(C, c00);
    _mm256_store_ps(C + 8, c01);
    _mm256_store_ps(C + ldc, c10);
    _mm256_store_ps(C + ldc + 8, c11);
    _mm256_store_ps(C + 2 * ldc, c20);
    _mm256_store_ps(C + 2 * ldc + 8, c21);
    _mm256_store_ps(C + 3 * ldc, c30);
    _mm256_store_ps(C + 3 * ldc + 8, c31);
    _mm256_store_ps(C + 4 * ldc, c40);
    _mm256_store_ps(C + 4 * ldc + 8, c41);
    _mm256_store_ps(C + 5 * ldc, c50);
    _mm256_store_ps(C + 5 * ldc + 8, c51);
}

/* The last odd panel: C[MR][8]. */
static inline void tile_6x8(int64_t L, const float *A, int64_t lda, const float *B0, float *C,
                            int64_t ldc)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps();
    __m256 c3 = _mm256_setzero_ps(), c4 = _mm256_setzero_ps(), c5 = _mm256_setzero_ps();
    for (int64_t l = 0; l < L; l++) {
        __m256 b0 = _mm256_load_ps(B0 + 8 * l);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + l), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + lda + l), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 2 * lda + l), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 3 * lda + l), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 4 * lda + l), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 5 * lda + l), b0, c5);
    }
    _mm256_store_ps(C, c0);
    _mm256_store_ps(C + ldc, c1);
    _mm256_store_ps(C + 2 * ldc, c2);
    _mm256_store_ps(C + 3 * ldc, c3);
    _mm256_store_ps(C + 4 * ldc, c4);
    _mm256_store_ps(C + 5 * ldc, c5);
}

/* C[MR][8 * panels] = A[MR][L] . panels, where panel t is B + t * panel_stride. */
static void gemm_rows(int64_t L, const float *A, int64_t lda, const float *B, int64_t panel_stride,
                      int64_t panels, float *C, int64_t ldc)
{
    int64_t t = 0;
    for (; t + 2 <= panels; t += 2)
        tile_6x16(L, A, lda, B + t * panel_stride, B + (t + 1) * panel_stride, C + 8 * t, ldc);
    if (t < panels) tile_6x8(L, A, lda, B + t * panel_stride, C + 8 * t, ldc);
}

/* ---- the same tiles on 16-lane registers (AVX-512 CPUs) ------------------------------- *
 *
 * Panels of 16 columns ([L][16]) and MR16 rows; every element still one
 * sequential fmaf chain over l from +0, so the bits are the 8-lane tiles'.
 * Twice the multiply-adds per instruction: ViT-Ti's attention at 1 thread ~40%
 * faster. */

/* C[R][32] and C[R][16] for R <= MR16 rows, R a constant at each use: a
 * block's last rows (RF-DETR's 145-token windows leave one) multiply only
 * the rows they have instead of a whole tile of zeros (~5% of its attention). */
LY_AVX512 static inline __attribute__((always_inline)) void
tile16_rx32(const int R, int64_t L, const float *A, int64_t lda, const float *B0, const float *B1,
            float *C, int64_t ldc)
{
    __m512 c[MR16][2];
    for (int r = 0; r < R; r++)
        c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (int64_t l = 0; l < L; l++) {
        __m512 b0 = _mm512_load_ps(B0 + 16 * l), b1 = _mm512_load_ps(B1 + 16 * l);
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(A[r * lda + l]);
            c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm512_store_ps(C + r * ldc, c[r][0]);
        _mm512_store_ps(C + r * ldc + 16, c[r][1]);
    }
}

LY_AVX512 static inline __attribute__((always_inline)) void tile16_rx16(const int R, int64_t L,
                                                                        const float *A, int64_t lda,
                                                                        const float *B0, float *C,
                                                                        int64_t ldc)
{
    __m512 c[MR16];
    for (int r = 0; r < R; r++)
        c[r] = _mm512_setzero_ps();
    for (int64_t l = 0; l < L; l++) {
        __m512 b0 = _mm512_load_ps(B0 + 16 * l);
        for (int r = 0; r < R; r++)
            c[r] = _mm512_fmadd_ps(_mm512_set1_ps(A[r * lda + l]), b0, c[r]);
    }
    for (int r = 0; r < R; r++)
        _mm512_store_ps(C + r * ldc, c[r]);
}

LY_AVX512 static inline __attribute__((always_inline)) void
gemm_rows16_r(const int R, int64_t L, const float *A, int64_t lda, const float *B,
              int64_t panel_stride, int64_t panels, float *C, int64_t ldc)
{
    int64_t t = 0;
    for (; t + 2 <= panels; t += 2)
        tile16_rx32(R, L, A, lda, B + t * panel_stride, B + (t + 1) * panel_stride, C + 16 * t,
                    ldc);
    if (t < panels) tile16_rx16(R, L, A, lda, B + t * panel_stride, C + 16 * t, ldc);
}

/* C[rows][16 * panels] = A[rows][L] . panels (rows 1 to MR16). */
LY_AVX512 static void gemm_rows16(int rows, int64_t L, const float *A, int64_t lda, const float *B,
                                  int64_t panel_stride, int64_t panels, float *C, int64_t ldc)
{
    switch (rows) {
    case 1:
        gemm_rows16_r(1, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 2:
        gemm_rows16_r(2, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 3:
        gemm_rows16_r(3, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 4:
        gemm_rows16_r(4, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 5:
        gemm_rows16_r(5, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 6:
        gemm_rows16_r(6, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    case 7:
        gemm_rows16_r(7, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    default:
        gemm_rows16_r(MR16, L, A, lda, B, panel_stride, panels, C, ldc);
        break;
    }
}

/* ---- softmax, in the reference's lane order ------------------------------------------- */

typedef struct row_mask {
    const ly_sdpa_mask *m;
    int64_t row;
    __m256 broadcast; /* the value when the mask broadcasts along keys */
} row_mask;

static inline __m256 mask8(const row_mask *rm, int64_t j)
{
    const ly_sdpa_mask *m = rm->m;
    if (m->sk == 0) return rm->broadcast;
    if (m->is_bool) {
        __m128i bytes = _mm_loadl_epi64((const __m128i *)((const uint8_t *)m->data + rm->row + j));
        __m256i zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setzero_si256());
        return _mm256_andnot_ps(_mm256_castsi256_ps(zero), _mm256_set1_ps(1.0f));
    }
    return _mm256_loadu_ps((const float *)m->data + rm->row + j);
}

/* Masks, max, exp, sum and normalisation of one score row s[0, n) (s is padded
 * to a multiple of 8 and 32-byte aligned; padding lanes are ignored). */
static void softmax_row(float *s, int64_t n, const ly_sdpa_problem *p, int64_t b, int64_t h,
                        int64_t i)
{
    row_mask masks[2];
    int n_masks = 0;
    for (int k = 0; k < 2; k++) {
        const ly_sdpa_mask *m = &p->mask[k];
        if (!m->data) continue;
        row_mask *rm = &masks[n_masks++];
        rm->m = m;
        rm->row = ly_sdpa_mask_row(m, b, h, i);
        rm->broadcast =
            m->sk == 0 ? _mm256_set1_ps(ly_sdpa_mask_value(m, rm->row)) : _mm256_setzero_ps();
    }
    int64_t full = n & ~(int64_t)7, rem = n - full;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < full; j += 8) {
        __m256 x = _mm256_load_ps(s + j);
        if (n_masks) {
            for (int k = 0; k < n_masks; k++)
                x = _mm256_add_ps(x, mask8(&masks[k], j));
            _mm256_store_ps(s + j, x);
        }
        mx = _mm256_max_ps(x, mx);
    }
    __m256 live = tail_mask(rem);
    if (rem) {
        __m256 x = _mm256_load_ps(s + full);
        for (int k = 0; k < n_masks; k++) {
            float vals[8] = {0};
            for (int64_t t = 0; t < rem; t++)
                vals[t] =
                    ly_sdpa_mask_value(masks[k].m, masks[k].row + (full + t) * masks[k].m->sk);
            x = _mm256_add_ps(x, _mm256_loadu_ps(vals));
        }
        _mm256_store_ps(s + full, x);
        mx = _mm256_max_ps(_mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, live), mx);
    }
    __m256 m = _mm256_set1_ps(hmax8(mx));

    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < full; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(s + j), m));
        _mm256_store_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (rem) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(s + full), m));
        _mm256_store_ps(s + full, e);
        sum = _mm256_add_ps(sum, _mm256_and_ps(e, live));
    }
    __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
    for (int64_t j = 0; j < n; j += 8)
        _mm256_store_ps(s + j, _mm256_mul_ps(_mm256_load_ps(s + j), inv));
}

/* ---- the same softmax on 16 lanes (AVX-512 CPUs; float masks) ------------------------- *
 *
 * exp is elementwise (exp16 is exp8's arithmetic lane for lane) and a row's max
 * does not depend on the order it is taken in (NaN scores never win a
 * comparison; a signed zero max changes no difference s - m), so both run on
 * 16 lanes. The sum keeps the reference's eight lanes: lanes 0-7 of a 16-key
 * chunk are added before lanes 8-15, which is the 8-lane order. Half the
 * instructions of the 8-lane exp loop, and no spills with 32 registers. */

/* Whether softmax_row16 takes the problem's masks: float masks read along
 * keys contiguously or broadcast (Swin's bias and shift mask), or none. */
static bool masks_on_16_lanes(const ly_sdpa_problem *p)
{
    for (int k = 0; k < 2; k++)
        if (p->mask[k].data && (p->mask[k].is_bool || (p->mask[k].sk != 0 && p->mask[k].sk != 1)))
            return false;
    return true;
}

/* The masks added to row i of (b, h) on 16 lanes, each element (s + mask0) +
 * mask1 as the 8-lane order; lanes past n (padding) are left as they are. */
LY_AVX512 static void add_masks16(float *s, int64_t n, const ly_sdpa_problem *p, int64_t b,
                                  int64_t h, int64_t i)
{
    for (int k = 0; k < 2; k++) {
        const ly_sdpa_mask *m = &p->mask[k];
        if (!m->data) continue;
        int64_t row = ly_sdpa_mask_row(m, b, h, i);
        if (m->sk == 0) {
            __m512 v = _mm512_set1_ps(ly_sdpa_mask_value(m, row));
            for (int64_t j = 0; j < n; j += 16)
                _mm512_store_ps(s + j, _mm512_add_ps(_mm512_load_ps(s + j), v));
            continue;
        }
        const float *src = (const float *)m->data + row;
        for (int64_t j = 0; j < n; j += 16) {
            __mmask16 live = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(live, src + j);
            _mm512_store_ps(s + j, _mm512_add_ps(_mm512_load_ps(s + j), v));
        }
    }
}

/* softmax_rows16 on MR16 rows of NV * 16 keys (NV a constant: SwinIR's and
 * Swin-style 64-key windows), every row held in registers from the scores'
 * load to the normalised store: the same operations in the same order,
 * without softmax_rows16's four passes through memory and its per-row mask
 * setup (SwinIR-s's softmax was ~80 cycles a 64-key row). */
LY_AVX512 static inline __attribute__((always_inline)) void
softmax_registers16(float *s, int64_t ld, const int NV, const ly_sdpa_problem *p, int64_t b,
                    int64_t h, int64_t i0)
{
    __m512 x[MR16][4];
    __m256 sum[MR16];
    float m[MR16];
#pragma GCC unroll 8
    for (int r = 0; r < MR16; r++) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            x[r][v] = _mm512_load_ps(s + r * ld + 16 * v);
        for (int k = 0; k < 2; k++) {
            const ly_sdpa_mask *mk = &p->mask[k];
            if (!mk->data) continue;
            int64_t row = ly_sdpa_mask_row(mk, b, h, i0 + r);
            const float *src = (const float *)mk->data + row;
            __m512 c = _mm512_set1_ps(src[0]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                x[r][v] = _mm512_add_ps(x[r][v], mk->sk == 0 ? c : _mm512_loadu_ps(src + 16 * v));
        }
        __m512 mx = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            mx = _mm512_max_ps(x[r][v], mx);
        m[r] = hmax8(_mm256_max_ps(_mm512_castps512_ps256(mx), high8(mx)));
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
#pragma GCC unroll 8
        for (int r = 0; r < MR16; r++) {
            if (v == 0) sum[r] = _mm256_setzero_ps();
            x[r][v] = exp16(_mm512_sub_ps(x[r][v], _mm512_set1_ps(m[r])));
            sum[r] = _mm256_add_ps(sum[r], _mm512_castps512_ps256(x[r][v]));
            sum[r] = _mm256_add_ps(sum[r], high8(x[r][v]));
        }
#pragma GCC unroll 8
    for (int r = 0; r < MR16; r++) {
        __m512 inv = _mm512_set1_ps(1.0f / hsum8(sum[r]));
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            _mm512_store_ps(s + r * ld + 16 * v, _mm512_mul_ps(x[r][v], inv));
    }
}

/* Whether softmax_registers16 takes a block: MR16 rows of 16 to 64 keys, a
 * multiple of 16. */
static bool softmax_in_registers(int64_t rows, int64_t n)
{
    return rows == MR16 && n % 16 == 0 && n >= 16 && n <= 64;
}

LY_AVX512 static void softmax_block16(float *s, int64_t ld, int64_t n, const ly_sdpa_problem *p,
                                      int64_t b, int64_t h, int64_t i0)
{
    switch (n / 16) {
    case 1:
        softmax_registers16(s, ld, 1, p, b, h, i0);
        break;
    case 2:
        softmax_registers16(s, ld, 2, p, b, h, i0);
        break;
    case 3:
        softmax_registers16(s, ld, 3, p, b, h, i0);
        break;
    default:
        softmax_registers16(s, ld, 4, p, b, h, i0);
        break;
    }
}

/* softmax_row for `rows` rows (ld floats apart; row r is query i0 + r of
 * (b, h)) whose masks masks_on_16_lanes takes (added first); s is padded to
 * a multiple of 16 and 64-byte aligned. Each row's arithmetic is
 * softmax_row's; the rows go side by side, phase by phase, because one row
 * alone is a chain of dependent steps (max tree, exp, the sum, its tree,
 * the division) that leaves the core waiting: short rows (Swin's 49 and 64
 * keys) took ~130 cycles each. */
LY_AVX512 static void softmax_rows16(float *s, int64_t ld, int rows, int64_t n,
                                     const ly_sdpa_problem *p, int64_t b, int64_t h, int64_t i0)
{
    int64_t full = n & ~(int64_t)15, full8 = n & ~(int64_t)7, rem = n - full8;
    __m256 live = tail_mask(rem);
    __m512 m16[MR16];
    __m256 m8[MR16], sum[MR16];
    for (int r = 0; r < rows; r++) {
        float *row = s + r * ld;
        add_masks16(row, n, p, b, h, i0 + r);
        __m512 mx16 = _mm512_set1_ps(-INFINITY);
        for (int64_t j = 0; j < full; j += 16)
            mx16 = _mm512_max_ps(_mm512_load_ps(row + j), mx16);
        __m256 mx = _mm256_max_ps(_mm512_castps512_ps256(mx16), high8(mx16));
        if (full8 > full) mx = _mm256_max_ps(_mm256_load_ps(row + full), mx);
        if (rem)
            mx = _mm256_max_ps(
                _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_load_ps(row + full8), live), mx);
        float m = hmax8(mx);
        m16[r] = _mm512_set1_ps(m);
        m8[r] = _mm256_set1_ps(m);
        sum[r] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < full; j += 16)
        for (int r = 0; r < rows; r++) {
            float *at = s + r * ld + j;
            __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(at), m16[r]));
            _mm512_store_ps(at, e);
            sum[r] = _mm256_add_ps(sum[r], _mm512_castps512_ps256(e));
            sum[r] = _mm256_add_ps(sum[r], high8(e));
        }
    for (int r = 0; r < rows; r++) {
        float *row = s + r * ld;
        if (full8 > full) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(row + full), m8[r]));
            _mm256_store_ps(row + full, e);
            sum[r] = _mm256_add_ps(sum[r], e);
        }
        if (rem) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(row + full8), m8[r]));
            _mm256_store_ps(row + full8, e);
            sum[r] = _mm256_add_ps(sum[r], _mm256_and_ps(e, live));
        }
    }
    for (int r = 0; r < rows; r++)
        m16[r] = _mm512_set1_ps(1.0f / hsum8(sum[r]));
    for (int64_t j = 0; j < n; j += 16)
        for (int r = 0; r < rows; r++)
            _mm512_store_ps(s + r * ld + j, _mm512_mul_ps(_mm512_load_ps(s + r * ld + j), m16[r]));
}

/* ---- small heads on AVX-512: queries on the lanes ----------------------------------- *
 *
 * With head dims of at most 16 (SwinIR's 10) the tiles above leave most of
 * each register idle in P.v (10 of 16 lanes) and spend their time storing
 * and reloading short tiles and reducing every score row across lanes. Here
 * a block of 16 queries runs side by side, one query a lane: a score of key
 * j is one register (its chain over c: qs[c] of the 16 queries times k[j][c]
 * broadcast, from +0), the softmax's eight strided lanes are eight registers
 * (key j adds into register j mod 8, the reference's tree after), and P.v's
 * chains over keys run one register per output channel. Every element still
 * goes through the reference's sequence, so the bits are the same; masks are
 * read through copies transposed to [block][key][16 queries]. */

#define QL 16 /* queries a block */
#define SMALL_KEYS 256

typedef struct small_mask {
    const ly_sdpa_mask *m;
    float *whole;   /* every slice transposed once a call, or NULL: per thread */
    int64_t n_h;    /* slices along heads: H or 1 */
    int64_t floats; /* one slice: blocks * Nk * QL */
} small_mask;

static bool small_heads(const ly_sdpa_problem *p)
{
    /* 32-bit gather offsets across a block of a mask */
    int64_t reach = 0;
    for (int k = 0; k < 2; k++)
        if (p->mask[k].data && (QL - 1) * p->mask[k].sq > reach) reach = (QL - 1) * p->mask[k].sq;
    return ly_cpu()->avx512f && p->d >= 1 && p->d <= 16 && p->dv >= 1 && p->dv <= 16 &&
           p->Nk >= 1 && p->Nk <= SMALL_KEYS && masks_on_16_lanes(p) && reach < INT32_MAX;
}

static int64_t slice_index(const small_mask *sm, int64_t b, int64_t h)
{
    return (sm->m->sb ? b : 0) * sm->n_h + (sm->m->sh ? h : 0);
}

/* Lanes [0, n) of a block. */
static inline __mmask16 first_lanes(int64_t n)
{
    return n >= QL ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* Slice (b, h) of a mask as [block][key][QL]; queries past Nq read 0. Rows
 * along keys (sk 1) go 16 x 16 at a time through registers, others (a
 * mask broadcast along keys) by gathers. */
LY_AVX512 static void transpose_mask(const ly_sdpa_problem *p, const ly_sdpa_mask *m, int64_t b,
                                     int64_t h, float *dst)
{
    const float *data = m->data;
    int64_t blocks = (p->Nq + QL - 1) / QL, Nk = p->Nk;
    const __m512i lanes =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int32_t)m->sq));
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t rows = p->Nq - blk * QL < QL ? p->Nq - blk * QL : QL;
        const float *row = data + ly_sdpa_mask_row(m, b, h, blk * QL);
        float *to = dst + blk * Nk * QL;
        if (m->sk != 1) {
            for (int64_t j = 0; j < Nk; j++)
                _mm512_store_ps(to + j * QL,
                                _mm512_mask_i32gather_ps(_mm512_setzero_ps(), first_lanes(rows),
                                                         lanes, row + j * m->sk, 4));
            continue;
        }
        for (int64_t j0 = 0; j0 < Nk; j0 += QL) {
            __mmask16 keys = first_lanes(Nk - j0);
            __m512 r[16];
            for (int64_t i = 0; i < QL; i++)
                r[i] = i < rows ? _mm512_maskz_loadu_ps(keys, row + i * m->sq + j0)
                                : _mm512_setzero_ps();
            ly_avx512_transpose16x16(r);
            for (int64_t j = j0; j < Nk && j < j0 + QL; j++)
                _mm512_store_ps(to + j * QL, r[j - j0]);
        }
    }
}

/* s[j] = the scores of key j for the block's queries (qt[c]: their scaled
 * q[c]), eight keys' chains side by side, plus mask 0 then mask 1 (m0, m1:
 * the block's transposed slices, or NULL); returns their max. */
LY_AVX512 static inline __attribute__((always_inline)) __m512
small_scores(const int D, const __m512 *qt, const float *k, int64_t k_row, int64_t Nk,
             const float *m0, const float *m1, float *s)
{
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= Nk; j += 8) {
        __m512 acc[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++)
            acc[u] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int c = 0; c < D; c++)
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++)
                acc[u] = _mm512_fmadd_ps(qt[c], _mm512_set1_ps(k[(j + u) * k_row + c]), acc[u]);
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            if (m0) acc[u] = _mm512_add_ps(acc[u], _mm512_load_ps(m0 + (j + u) * QL));
            if (m1) acc[u] = _mm512_add_ps(acc[u], _mm512_load_ps(m1 + (j + u) * QL));
            _mm512_store_ps(s + (j + u) * QL, acc[u]);
            mx = _mm512_max_ps(acc[u], mx);
        }
    }
    for (; j < Nk; j++) {
        __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int c = 0; c < D; c++)
            acc = _mm512_fmadd_ps(qt[c], _mm512_set1_ps(k[j * k_row + c]), acc);
        if (m0) acc = _mm512_add_ps(acc, _mm512_load_ps(m0 + j * QL));
        if (m1) acc = _mm512_add_ps(acc, _mm512_load_ps(m1 + j * QL));
        _mm512_store_ps(s + j * QL, acc);
        mx = _mm512_max_ps(acc, mx);
    }
    return mx;
}

/* o[c] = sum over keys of p[j] v[j][c], each a chain from +0 (p = e * inv). */
LY_AVX512 static inline __attribute__((always_inline)) void
small_values(const int DV, const float *e, __m512 inv, const float *v, int64_t v_row, int64_t Nk,
             float *ot)
{
    __m512 o[16];
#pragma GCC unroll 16
    for (int c = 0; c < DV; c++)
        o[c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < Nk; j++) {
        __m512 pj = _mm512_mul_ps(_mm512_load_ps(e + j * QL), inv);
#pragma GCC unroll 16
        for (int c = 0; c < DV; c++)
            o[c] = _mm512_fmadd_ps(pj, _mm512_set1_ps(v[j * v_row + c]), o[c]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < DV; c++)
        _mm512_store_ps(ot + c * QL, o[c]);
}

#define SMALL_CASES(X)                                                                             \
    X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)

LY_AVX512 static __m512 small_scores_any(int64_t d, const __m512 *qt, const float *k, int64_t k_row,
                                         int64_t Nk, const float *m0, const float *m1, float *s)
{
    switch (d) {
#define SCORES_CASE(D)                                                                             \
    case D:                                                                                        \
        return small_scores(D, qt, k, k_row, Nk, m0, m1, s);
        SMALL_CASES(SCORES_CASE)
#undef SCORES_CASE
    default:
        return _mm512_setzero_ps();
    }
}

LY_AVX512 static void small_values_any(int64_t dv, const float *e, __m512 inv, const float *v,
                                       int64_t v_row, int64_t Nk, float *ot)
{
    switch (dv) {
#define VALUES_CASE(D)                                                                             \
    case D:                                                                                        \
        small_values(D, e, inv, v, v_row, Nk, ot);                                                 \
        break;
        SMALL_CASES(VALUES_CASE)
#undef VALUES_CASE
    default:
        break;
    }
}

/* Block blk of head bh: masks[k] is mask k's slice for (b, h) (NULL: none). */
LY_AVX512 static void small_block(const ly_sdpa_problem *p, int64_t bh, int64_t blk,
                                  const float *const masks[2], float *s, float *ot)
{
    int64_t d = p->d, dv = p->dv, Nk = p->Nk, i0 = blk * QL;
    int64_t rows = p->Nq - i0 < QL ? p->Nq - i0 : QL;
    /* the block's scaled queries, one register per channel */
    const float *q = p->q + ly_sdpa_head_at(p, &p->qs, bh) + i0 * p->qs.row;
    const __m512 scale = _mm512_set1_ps(p->scale);
    __mmask16 channels = first_lanes(d);
    __m512 qt[16];
    for (int64_t r = 0; r < QL; r++)
        qt[r] = r < rows ? _mm512_mul_ps(_mm512_maskz_loadu_ps(channels, q + r * p->qs.row), scale)
                         : _mm512_setzero_ps();
    ly_avx512_transpose16x16(qt);
    __m512 mx = small_scores_any(d, qt, p->k + ly_sdpa_head_at(p, &p->ks, bh), p->ks.row, Nk,
                                 masks[0] ? masks[0] + blk * Nk * QL : NULL,
                                 masks[1] ? masks[1] + blk * Nk * QL : NULL, s);
    /* exp and the eight strided sums (key j into lane j mod 8), then their tree */
    __m512 lane[8];
    for (int t = 0; t < 8; t++)
        lane[t] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= Nk; j += 8)
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(s + (j + t) * QL), mx));
            _mm512_store_ps(s + (j + t) * QL, e);
            lane[t] = _mm512_add_ps(lane[t], e);
        }
    for (int t = 0; j < Nk; j++, t++) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(s + j * QL), mx));
        _mm512_store_ps(s + j * QL, e);
        lane[t] = _mm512_add_ps(lane[t], e);
    }
    __m512 t0 = _mm512_add_ps(lane[0], lane[4]), t1 = _mm512_add_ps(lane[1], lane[5]),
           t2 = _mm512_add_ps(lane[2], lane[6]), t3 = _mm512_add_ps(lane[3], lane[7]);
    __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f),
                               _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3)));
    small_values_any(dv, s, inv, p->v + ly_sdpa_head_at(p, &p->vs, bh), p->vs.row, Nk, ot);
    /* each channel back into the block's output rows */
    const __m512 canonical =
        _mm512_castsi512_ps(_mm512_set1_epi32((int)LY_SDPA_CANONICAL_NAN_BITS));
    float *out = p->out + ly_sdpa_head_at(p, &p->os, bh) + i0 * p->os.row;
    __m512 o[16];
    for (int64_t c = 0; c < QL; c++) {
        __m512 x = c < dv ? _mm512_load_ps(ot + c * QL) : _mm512_setzero_ps();
        o[c] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, canonical);
    }
    ly_avx512_transpose16x16(o);
    __mmask16 written = first_lanes(dv);
    for (int64_t r = 0; r < rows; r++)
        _mm512_mask_storeu_ps(out + r * p->os.row, written, o[r]);
}

typedef struct small_job {
    const ly_sdpa_problem *p;
    small_mask masks[2];
    int64_t blocks;
    atomic_bool out_of_memory;
} small_job;

static void small_range(void *ctx, int64_t begin, int64_t end)
{
    small_job *job = ctx;
    const ly_sdpa_problem *p = job->p;
    float *s = alloc_floats(p->Nk * QL), *buf = alloc_floats(QL * 16), *own[2] = {NULL, NULL};
    int64_t held[2] = {-1, -1};
    bool ok = s && buf;
    for (int k = 0; k < 2 && ok; k++)
        if (job->masks[k].m && !job->masks[k].whole) {
            own[k] = alloc_floats(job->masks[k].floats);
            ok = own[k] != NULL;
        }
    if (!ok) {
        atomic_store(&job->out_of_memory, true);
        goto done;
    }
    for (int64_t item = begin; item < end; item++) {
        int64_t bh = item / job->blocks, blk = item % job->blocks, b = bh / p->H, h = bh % p->H;
        const float *masks[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            const small_mask *sm = &job->masks[k];
            if (!sm->m) continue;
            int64_t at = slice_index(sm, b, h);
            if (sm->whole) {
                masks[k] = sm->whole + at * sm->floats;
                continue;
            }
            if (held[k] != at) { /* a thread's items run head after head: most reuse it */
                transpose_mask(p, sm->m, b, h, own[k]);
                held[k] = at;
            }
            masks[k] = own[k];
        }
        small_block(p, bh, blk, masks, s, buf);
    }
done:
    free(s);
    free(buf);
    free(own[0]);
    free(own[1]);
}

/* Masks of few slices (SwinIR's bias: one per head) are transposed once a
 * call; many (its shift mask: one per window) by each thread as it meets
 * them. */
enum { SMALL_WHOLE_FLOATS = 1 << 20 };

static ly_status small_heads_run(const ly_sdpa_problem *p)
{
    small_job job = {.p = p, .blocks = (p->Nq + QL - 1) / QL};
    atomic_init(&job.out_of_memory, false);
    ly_status st = LY_OK;
    for (int k = 0; k < 2 && st == LY_OK; k++) {
        small_mask *sm = &job.masks[k];
        if (!p->mask[k].data) continue;
        sm->m = &p->mask[k];
        sm->n_h = sm->m->sh ? p->H : 1;
        sm->floats = job.blocks * p->Nk * QL;
        int64_t slices = (sm->m->sb ? p->B : 1) * sm->n_h;
        if (slices * sm->floats > SMALL_WHOLE_FLOATS) continue;
        sm->whole = alloc_floats(slices * sm->floats);
        if (!sm->whole) {
            st = LY_E_NO_MEMORY;
            break;
        }
        for (int64_t b = 0; b < (sm->m->sb ? p->B : 1); b++)
            for (int64_t h = 0; h < sm->n_h; h++)
                transpose_mask(p, sm->m, b, h, sm->whole + slice_index(sm, b, h) * sm->floats);
    }
    if (st == LY_OK) {
        ly_parallel_for(p->B * p->H * job.blocks, 1, p->threads, small_range, &job);
        if (atomic_load(&job.out_of_memory)) st = LY_E_NO_MEMORY;
    }
    free(job.masks[0].whole);
    free(job.masks[1].whole);
    if (st != LY_OK)
        return ly_set_error(LY_E_NO_MEMORY, "%s/%s: out of memory for a block of %lld keys",
                            ly_op_name(LY_OP_SDPA), LY_SDPA_FUSED_AVX2, (long long)p->Nk);
    return LY_OK;
}

/* ---- driver ------------------------------------------------------------------------ */

typedef struct fused_job {
    const ly_sdpa_problem *p;
    int64_t row_blocks;
    int64_t width; /* panel width: 16 on AVX-512 CPUs, else 8 */
    int64_t mr;    /* rows a block: MR16 on AVX-512 CPUs, else MR */
    atomic_bool out_of_memory;
} fused_job;

typedef struct scratch {
    float *kp; /* [nkp][d][8] */
    float *vp; /* [ncp][Nk][8] */
    float *qs; /* [mr][d] */
    float *s;  /* [mr][nk8] */
    float *o;  /* [mr][dv8] */
} scratch;

/* K as [key/w][d][w] panels (w = 8 or 16), zero padded past Nk. Copies only:
 * no arithmetic. */
static void pack_k(const ly_sdpa_problem *p, int64_t bh, float *kp, int64_t nkp, int64_t w)
{
    int64_t d = p->d, Nk = p->Nk, row = p->ks.row;
    const float *k = p->k + ly_sdpa_head_at(p, &p->ks, bh);
    for (int64_t jp = 0; jp < nkp; jp++) {
        float *panel = kp + jp * d * w;
        int64_t keys = Nk - jp * w < w ? Nk - jp * w : w;
        int64_t c = 0;
        if (keys == w) /* whole panels: 8x8 transposes, two side by side on 16 lanes */
            for (; c + 8 <= d; c += 8)
                for (int64_t t = 0; t < w; t += 8)
                    ly_avx2_transpose8x8(k + (jp * w + t) * row + c, row, panel + c * w + t, w);
        for (; c < d; c++)
            for (int64_t t = 0; t < w; t++)
                panel[c * w + t] = t < keys ? k[(jp * w + t) * row + c] : 0.0f;
    }
}

/* `rows` rows of `cols` <= 16 floats (src rows ld apart) as a [rows][16] panel,
 * zero padded: one (masked) load a row instead of a lane at a time (SwinIR's
 * head dim 10: its attention ~6% faster at 1 thread; whole rows went through
 * a 64-byte memcpy call each). AVX-512 only: AVX's vmaskmovps is microcoded
 * on AMD and measured slower than the scalar copy. */
LY_AVX512 static void pack_partial16(const float *src, int64_t ld, int64_t rows, int64_t cols,
                                     float *panel)
{
    __mmask16 keep = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1);
    for (int64_t j = 0; j < rows; j++)
        _mm512_store_ps(panel + j * 16, _mm512_maskz_loadu_ps(keep, src + j * ld));
}

/* V as [channel/w][Nk][w] panels, zero padded past dv. Reading v in place (rows dv
 * apart) measured a third slower: the panels stream contiguously. */
static void pack_v(const ly_sdpa_problem *p, int64_t bh, float *vp, int64_t ncp, int64_t w)
{
    int64_t dv = p->dv, Nk = p->Nk, row = p->vs.row;
    const float *v = p->v + ly_sdpa_head_at(p, &p->vs, bh);
    for (int64_t cp = 0; cp < ncp; cp++) {
        float *panel = vp + cp * Nk * w;
        int64_t cols = dv - cp * w < w ? dv - cp * w : w;
        if (w == 16) {
            pack_partial16(v + cp * w, row, Nk, cols, panel);
            continue;
        }
        if (cols == w) {
            for (int64_t j = 0; j < Nk; j++)
                _mm256_store_ps(panel + j * w, _mm256_loadu_ps(v + j * row + cp * w));
            continue;
        }
        for (int64_t j = 0; j < Nk; j++)
            for (int64_t t = 0; t < w; t++)
                panel[j * w + t] = t < cols ? v[j * row + cp * w + t] : 0.0f;
    }
}

static void store_rows(const ly_sdpa_problem *p, const float *o, int64_t dv8, float *out,
                       int64_t rows)
{
    int64_t dv = p->dv, full = dv & ~(int64_t)7;
    const __m256 canonical =
        _mm256_castsi256_ps(_mm256_set1_epi32((int)LY_SDPA_CANONICAL_NAN_BITS));
    for (int64_t r = 0; r < rows; r++) {
        const float *src = o + r * dv8;
        float *dst = out + r * p->os.row;
        for (int64_t c = 0; c < full; c += 8) {
            __m256 x = _mm256_load_ps(src + c);
            x = _mm256_blendv_ps(x, canonical, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            _mm256_storeu_ps(dst + c, x);
        }
        for (int64_t c = full; c < dv; c++)
            dst[c] = ly_sdpa_canonical(src[c]);
    }
}

/* store_rows and the scaled queries on AVX-512 CPUs: 16 lanes, the last
 * partial vector of a row masked (SwinIR's head dim 10 went element by
 * element: ~15% of its attention's time). The same values, element-wise. */
LY_AVX512 static void store_rows16(const ly_sdpa_problem *p, const float *o, int64_t dv8,
                                   float *out, int64_t rows)
{
    const __m512 canonical =
        _mm512_castsi512_ps(_mm512_set1_epi32((int)LY_SDPA_CANONICAL_NAN_BITS));
    for (int64_t r = 0; r < rows; r++) {
        const float *src = o + r * dv8;
        float *dst = out + r * p->os.row;
        for (int64_t c = 0; c < p->dv; c += 16) {
            __mmask16 live =
                p->dv - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (p->dv - c)) - 1);
            __m512 x = _mm512_load_ps(src + c);
            x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, canonical);
            _mm512_mask_storeu_ps(dst + c, live, x);
        }
    }
}

LY_AVX512 static void scale_rows16(const ly_sdpa_problem *p, const float *q, int64_t rows,
                                   float *qs)
{
    const __m512 scale = _mm512_set1_ps(p->scale);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < p->d; c += 16) {
            __mmask16 live =
                p->d - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (p->d - c)) - 1);
            __m512 x = _mm512_maskz_loadu_ps(live, q + r * p->qs.row + c);
            _mm512_mask_storeu_ps(qs + r * p->d + c, live, _mm512_mul_ps(x, scale));
        }
}

static void items_range(void *ctx, int64_t begin, int64_t end)
{
    fused_job *job = ctx;
    const ly_sdpa_problem *p = job->p;
    int64_t d = p->d, Nk = p->Nk, dv = p->dv, pw = job->width, mr = job->mr;
    int64_t nkp = (Nk + pw - 1) / pw, ncp = (dv + pw - 1) / pw, nk8 = nkp * pw, dv8 = ncp * pw;
    scratch w = {alloc_floats(nkp * d * pw), alloc_floats(ncp * Nk * pw), alloc_floats(mr * d),
                 alloc_floats(mr * nk8), alloc_floats(mr * dv8)};
    if (!w.kp || !w.vp || !w.qs || !w.s || !w.o) {
        atomic_store(&job->out_of_memory, true);
        goto done;
    }
    /* Rows past Nq in the last block compute on zeros and are never stored. */
    memset(w.qs, 0, (size_t)(mr * d) * sizeof(float));
    memset(w.s, 0, (size_t)(mr * nk8) * sizeof(float));
    int64_t packed = -1;
    bool masks16 = masks_on_16_lanes(p);
    for (int64_t item = begin; item < end; item++) {
        int64_t bh = item / job->row_blocks, i0 = (item % job->row_blocks) * mr;
        int64_t rows = p->Nq - i0 < mr ? p->Nq - i0 : mr;
        if (bh != packed) {
            pack_k(p, bh, w.kp, nkp, pw);
            pack_v(p, bh, w.vp, ncp, pw);
            packed = bh;
        }
        const float *q = p->q + ly_sdpa_head_at(p, &p->qs, bh) + i0 * p->qs.row;
        if (pw == 16)
            scale_rows16(p, q, rows, w.qs);
        else
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < d; c++)
                    w.qs[r * d + c] = q[r * p->qs.row + c] * p->scale;
        if (rows < mr) memset(w.qs + rows * d, 0, (size_t)((mr - rows) * d) * sizeof(float));

        if (pw == 16)
            gemm_rows16((int)rows, d, w.qs, d, w.kp, d * 16, nkp, w.s, nk8);
        else
            gemm_rows(d, w.qs, d, w.kp, d * 8, nkp, w.s, nk8);
        if (pw == 16 && masks16 && softmax_in_registers(rows, Nk))
            softmax_block16(w.s, nk8, Nk, p, bh / p->H, bh % p->H, i0);
        else if (pw == 16 && masks16)
            softmax_rows16(w.s, nk8, (int)rows, Nk, p, bh / p->H, bh % p->H, i0);
        else
            for (int64_t r = 0; r < rows; r++)
                softmax_row(w.s + r * nk8, Nk, p, bh / p->H, bh % p->H, i0 + r);
        if (pw == 16)
            gemm_rows16((int)rows, Nk, w.s, nk8, w.vp, Nk * 16, ncp, w.o, dv8);
        else
            gemm_rows(Nk, w.s, nk8, w.vp, Nk * 8, ncp, w.o, dv8);
        float *out = p->out + ly_sdpa_head_at(p, &p->os, bh) + i0 * p->os.row;
        if (pw == 16)
            store_rows16(p, w.o, dv8, out, rows);
        else
            store_rows(p, w.o, dv8, out, rows);
    }
done:
    free(w.kp);
    free(w.vp);
    free(w.qs);
    free(w.s);
    free(w.o);
}

ly_status ly_sdpa_avx2_fused(const ly_kernel_call *call)
{
    ly_sdpa_problem p;
    ly_sdpa_problem_init(call, &p);
    if (p.B * p.H * p.Nq * p.dv == 0) return LY_OK;
    if (small_heads(&p)) return small_heads_run(&p);
    bool wide = ly_cpu()->avx512f;
    int64_t mr = wide ? MR16 : MR;
    fused_job job = {.p = &p, .row_blocks = (p.Nq + mr - 1) / mr, .width = wide ? 16 : 8, .mr = mr};
    atomic_init(&job.out_of_memory, false);
    ly_parallel_for(p.B * p.H * job.row_blocks, 1, p.threads, items_range, &job);
    if (atomic_load(&job.out_of_memory))
        return ly_set_error(LY_E_NO_MEMORY, "%s/%s: out of memory for a row block of %lld keys",
                            ly_op_name(LY_OP_SDPA), LY_SDPA_FUSED_AVX2, (long long)p.Nk);
    return LY_OK;
}
