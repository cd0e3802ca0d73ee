/* SPDX-License-Identifier: MIT */
/*
 * linear on AMX tiles ("amx_bf16"): x [M, K] times weight [N, K] transposed as
 * bf16 dot products. Each float operand is split into bf16 terms: three
 * truncated ones (the default; together exactly its 24 bits), and each float
 * product summed on the tiles in f32 as the six products of terms whose orders
 * sum to at most two (hi*hi, hi*mid, mid*hi, hi*lo, mid*mid, lo*hi; the three
 * dropped are below the float's last bit). LIBREYOLO_MATMUL_PRECISION=high
 * (or medium, PyTorch's names) takes two terms rounded to nearest, three
 * products, ~16 bits.
 *
 * Why: a Sapphire Rapids core's tiles do 512 bf16 multiply-adds a cycle
 * against 32 f32 FMAs for AVX-512, so six products a float product still leave
 * ~2.7x the arithmetic. Measured (1 thread, a 2-core VM of an AMX Xeon), on
 * RF-DETR-n's MLP GEMM [580, 1536] x [1536, 384] + residual: 2.8-3.0 ms
 * against oneDNN 2.6's f32 matmul 4.7-4.9 (`bench kernels --slot linear`);
 * numbers against a double sum on [580, 384] x [384, 1536]: 3.5e-7 of max|y|
 * (oneDNN's f32 6.9e-7, the two-term split 4.0e-6).
 *
 * Nothing is packed at prepare: the plain weight stays the graph's (no second
 * copy of a transformer's largest tensors, nothing for restore to undo), and
 * every call splits what it reads: a chunk of rows of x for a block of k (at
 * most K_BLOCK, sized with a panel's split to stay in L2), then each panel of
 * 32 weight rows for that block of k into the tiles' pair-interleaved layout,
 * just before the rows use it. Sums over earlier blocks of k wait in f32 (a
 * tile stored and loaded back: exact). Threads take groups of panels, or parts
 * of the rows where that splits less twice; each task has its own buffers, so
 * a run needs no barrier. The split costs (m + n) k a call against m n k
 * products: the predicate (register.c) declines small GEMMs.
 */
#include "core/core.h"
#include "kernels/registry_internal.h"
#include "libreyolo/nn.h"
#include "providers/amx/amx.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/avx2/transpose_avx2.h"
#include "providers/op_cache.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(__x86_64__)

int ly_amx_planes(void); /* register.c */

#define LY_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

/* Rows and columns of one block of C (2 x 2 tiles of 16 x 16 f32) and the k
 * of one step (a tile row of 32 bf16). */
#define BLOCK 32
/* The most a task's split of x (a chunk of rows for a block of k, every
 * plane) takes, and the most k a block holds: with a panel's split (K_BLOCK x
 * 32 x 2 bytes a plane) and the sums carried between blocks of k, within a
 * 2 MiB L2. 768 KiB and 384 measured best of 512-3072 KiB and 192-1536 on
 * RF-DETR-n (1.01-1.02x its time with no blocks of k, in-process pairs). */
#define CHUNK_BYTES (768u << 10)
#define K_BLOCK 384

typedef struct amx_state {
    int threads, planes;
    int64_t activation; /* done in the epilogue; GELU by gelu_after */
    float alpha;
    bool gelu;                 /* GELU after the GEMM, on its output */
    const ly_impl *gelu_after; /* the gelu slot's kernel for it, or NULL: dispatched */
} amx_state;

typedef struct amx_job {
    const float *x, *w, *bias, *residual;
    float *y;
    int64_t m, k, n, kp; /* kp: k rounded up to BLOCK */
    int64_t part_rows, chunk_rows, groups, panels_per_group;
    int64_t k_block; /* k a split of x holds (a multiple of BLOCK) */
    int64_t activation;
    float alpha;
    int planes;                 /* bf16 terms a float is split into: 3 (every bit), or 2 */
    atomic_bool *out_of_memory; /* a worker's split buffers */
} amx_job;

/* The bf16 terms of 32 floats (x0 then x1), `planes` of them, each 32 bf16
 * in order; a remainder that is NaN (x infinite: the first term carries it)
 * is 0. Three: truncated terms, the floats' 24 bits exactly (the remainder
 * after two truncations has at most 8 significant bits), so the conversion
 * (rounding to nearest even) only packs them. Two: each the remainder
 * rounded to nearest even, the closest pair (~17 bits). `planes` a constant
 * where this is inlined. */
LY_AMX static inline __attribute__((always_inline)) __m512 rest_after(__m512 x, __m512 term)
{
    __m512 rest = _mm512_sub_ps(x, term);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(rest, rest, _CMP_ORD_Q), rest);
}

LY_AMX static inline __attribute__((always_inline)) void split32(__m512 x0, __m512 x1, int planes,
                                                                 __m512i out[3])
{
    const __m512i top = _mm512_set1_epi32((int32_t)0xffff0000u);
    for (int i = 0; i < planes; i++) {
        __m512 t0 = x0, t1 = x1;
        if (planes == 3 && i < 2) {
            t0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x0), top));
            t1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x1), top));
        }
        __m512bh packed = _mm512_cvtne2ps_pbh(t1, t0);
        out[i] = (__m512i)packed;
        if (i + 1 < planes) {
            if (planes != 3) { /* the rounded term back as floats */
                t0 = _mm512_castsi512_ps(
                    _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(out[i])), 16));
                t1 = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(out[i], 1)), 16));
            }
            x0 = rest_after(x0, t0);
            x1 = rest_after(x1, t1);
        }
    }
}

/* Rows [m0, m0 + rows) of x, k in [k0, k0 + steps * BLOCK), as j->planes
 * planes of A tiles `plane` elements apart: in a plane, 16 rows by 32 k a
 * tile (1 KiB, one load), a band of 16 rows' tiles in k order, zero past the
 * matrix (rows up to a multiple of BLOCK). */
LY_AMX static inline __attribute__((always_inline)) void
split_rows_n(const amx_job *j, int64_t m0, int64_t rows, int64_t k0, int64_t steps, uint16_t *a,
             size_t plane, const int planes)
{
    int64_t padded = (rows + BLOCK - 1) / BLOCK * BLOCK;
    for (int64_t r = 0; r < padded; r++) {
        uint16_t *row = a + ((r / 16) * steps * 16 + r % 16) * BLOCK;
        if (r >= rows) {
            for (int i = 0; i < planes; i++)
                for (int64_t s = 0; s < steps; s++)
                    memset(row + i * plane + s * 512, 0, BLOCK * 2);
            continue;
        }
        const float *x = j->x + (m0 + r) * j->k;
        for (int64_t s = 0; s < steps; s++) {
            int64_t c = k0 + s * BLOCK, n = j->k - c < BLOCK ? j->k - c : BLOCK;
            __mmask16 first = (__mmask16)(n >= 16 ? 0xffffu : n > 0 ? (1u << n) - 1u : 0u);
            __mmask16 second = (__mmask16)(n >= 32 ? 0xffffu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
            __m512i terms[3];
            split32(_mm512_maskz_loadu_ps(first, x + c), _mm512_maskz_loadu_ps(second, x + c + 16),
                    planes, terms);
            for (int i = 0; i < planes; i++)
                _mm512_storeu_si512(row + i * plane + s * 512, terms[i]);
        }
    }
}

LY_AMX static void split_rows(const amx_job *j, int64_t m0, int64_t rows, int64_t k0, int64_t steps,
                              uint16_t *a, size_t plane)
{
    if (j->planes == 3)
        split_rows_n(j, m0, rows, k0, steps, a, plane, 3);
    else
        split_rows_n(j, m0, rows, k0, steps, a, plane, 2);
}

/* Weight rows [n0, n0 + 16) (output columns; zero past N) as B tiles, one a
 * step of k, `planes` planes `plane` dwords apart: row p of a tile holds, for
 * each of the 16 columns, the pair (k = 2p, 2p + 1) — in a weight row those
 * two are adjacent, so a row's 32 k split to bf16 are 16 such pairs and the
 * tile is that 16 x 16 transposed. */
LY_AMX static inline __attribute__((always_inline)) void
split_panel16_n(const amx_job *j, int64_t n0, int64_t k0, int64_t steps, uint32_t *b, size_t plane,
                const int planes)
{
    /* a step's 16 rows, split, plane by plane: transposed from here one plane
     * at a time (all three in registers at once would spill) */
    uint16_t rows_split[3][16][BLOCK] __attribute__((aligned(64)));
    for (int64_t s = 0; s < steps; s++) {
        int64_t c = k0 + s * BLOCK, n = j->k - c < BLOCK ? j->k - c : BLOCK;
        __mmask16 first = (__mmask16)(n >= 16 ? 0xffffu : n > 0 ? (1u << n) - 1u : 0u);
        __mmask16 second = (__mmask16)(n >= 32 ? 0xffffu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
        for (int row = 0; row < 16; row++) {
            __m512i t[3];
            if (n0 + row >= j->n) {
                for (int i = 0; i < planes; i++)
                    t[i] = _mm512_setzero_si512();
            } else {
                const float *w = j->w + (n0 + row) * j->k + c;
                split32(_mm512_maskz_loadu_ps(first, w), _mm512_maskz_loadu_ps(second, w + 16),
                        planes, t);
            }
            for (int i = 0; i < planes; i++)
                _mm512_store_si512(rows_split[i][row], t[i]);
        }
        for (int i = 0; i < planes; i++) {
            __m512 r[16]; /* pairs of bf16 as dwords */
            for (int row = 0; row < 16; row++)
                r[row] = _mm512_load_ps(rows_split[i][row]);
            ly_avx512_transpose16x16(r);
            for (int p = 0; p < 16; p++)
                _mm512_store_ps(b + i * plane + (s * 16 + p) * 16, r[p]);
        }
    }
}

/* Both 16-column halves of panel `p` (output columns [p * BLOCK, + BLOCK)),
 * k in [k0, k0 + steps * BLOCK): plane i at b + i * 2 * half, the second
 * half `half` = steps * 256 dwords after the first. */
LY_AMX static void split_panel(const amx_job *j, int64_t p, int64_t k0, int64_t steps, uint32_t *b)
{
    size_t half = (size_t)steps * 256;
    for (int h = 0; h < 2; h++) {
        if (j->planes == 3)
            split_panel16_n(j, p * BLOCK + h * 16, k0, steps, b + h * half, 2 * half, 3);
        else
            split_panel16_n(j, p * BLOCK + h * 16, k0, steps, b + h * half, 2 * half, 2);
    }
}

/* Tiles 0-3 accumulate the block's 2 x 2 tiles of C, 4-5 hold its two bands
 * of rows of one plane of x, 6-7 its two 16-column halves of one plane of
 * the weights. One product of a plane of x and one of the weights, each tile
 * of the next pair loaded as soon as the last product reading its register
 * is issued (NULL: that side stays): loads of the next pair overlap this
 * pair's last products (the tiles have no renaming), 0.89-0.92x the time of
 * loading between the products (RF-DETR-n's MLP GEMMs, one thread). */
LY_AMX static inline __attribute__((always_inline)) void multiply_add(const uint16_t *next_x0,
                                                                      const uint16_t *next_x1,
                                                                      const uint32_t *next_w0,
                                                                      const uint32_t *next_w1)
{
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (next_x0) _tile_loadd(4, next_x0, 64);
    _tile_dpbf16ps(2, 5, 6);
    if (next_w0) _tile_loadd(6, next_w0, 64);
    _tile_dpbf16ps(3, 5, 7);
    if (next_x0) _tile_loadd(5, next_x1, 64);
    if (next_w0) _tile_loadd(7, next_w1, 64);
}

/* c[32][32] = 32 rows of split x (a: its first band of 16 rows; planes
 * `a_plane` apart) times a panel of split weights (b; planes `b_plane` apart,
 * the second 16 columns `b_half` after the first), as the products of the
 * planes whose orders sum to at most planes - 1: with three planes six (hi*hi,
 * hi*mid, hi*lo, mid*mid, mid*hi, lo*hi, in an order that changes one side
 * at a time), with two three. */
LY_AMX static void block(const amx_job *j, const uint16_t *a, size_t a_plane, int64_t steps,
                         const uint32_t *b, const float *init, size_t init_stride, float *out,
                         size_t out_stride)
{
    const uint16_t *a1 = a + steps * 512; /* the second band of 16 rows */
    const size_t b_half = (size_t)steps * 256, b_plane = 2 * b_half;
    if (init) { /* the sums over the k before these */
        _tile_loadd(0, init, init_stride * 4);
        _tile_loadd(1, init + 16, init_stride * 4);
        _tile_loadd(2, init + 16 * init_stride, init_stride * 4);
        _tile_loadd(3, init + 16 * init_stride + 16, init_stride * 4);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a1, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + b_half, 64);
    for (int64_t s = 0; s < steps; s++) {
        const uint16_t *x0 = a + s * 512, *x1 = a1 + s * 512;
        const uint32_t *w = b + s * 256;
        /* the next step's first pair; none after the last */
        bool more = s + 1 < steps;
        const uint16_t *n0 = more ? x0 + 512 : NULL, *n1 = x1 + 512;
        const uint32_t *nw = more ? w + 256 : NULL;
        if (j->planes == 3) {
            multiply_add(NULL, NULL, w + b_plane, w + b_plane + b_half);
            multiply_add(NULL, NULL, w + 2 * b_plane, w + 2 * b_plane + b_half);
            multiply_add(x0 + a_plane, x1 + a_plane, w + b_plane, w + b_plane + b_half);
            multiply_add(NULL, NULL, w, w + b_half);
            multiply_add(x0 + 2 * a_plane, x1 + 2 * a_plane, NULL, NULL);
        } else {
            multiply_add(NULL, NULL, w + b_plane, w + b_plane + b_half);
            multiply_add(x0 + a_plane, x1 + a_plane, w, w + b_half);
        }
        multiply_add(n0, n1, nw, nw ? nw + b_half : NULL);
    }
    _tile_stored(0, out, out_stride * 4);
    _tile_stored(1, out + 16, out_stride * 4);
    _tile_stored(2, out + 16 * out_stride, out_stride * 4);
    _tile_stored(3, out + 16 * out_stride + 16, out_stride * 4);
}

/* The block's valid rows and columns into y: + bias, the activation, +
 * residual (the reference's order). */
LY_AMX static void finish(const amx_job *j, const float *c, int64_t m0, int64_t rows, int64_t n0)
{
    int64_t cols = j->n - n0 < BLOCK ? j->n - n0 : BLOCK;
    for (int64_t r = 0; r < rows; r++) {
        float *y = j->y + (m0 + r) * j->n + n0;
        const float *res = j->residual ? j->residual + (m0 + r) * j->n + n0 : NULL;
        for (int64_t h = 0; h < cols; h += 16) {
            int64_t lanes = cols - h < 16 ? cols - h : 16;
            __mmask16 live = (__mmask16)(lanes == 16 ? 0xffffu : (1u << lanes) - 1u);
            __m512 v = _mm512_loadu_ps(c + r * BLOCK + h);
            if (j->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(live, j->bias + n0 + h));
            if (j->activation != LY_ACT_NONE) v = ly_activate16(v, j->activation, j->alpha);
            if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(live, res + h));
            _mm512_mask_storeu_ps(y + h, live, v);
        }
    }
}

/* What a task keeps: its chunk of rows of x split (every plane) for one
 * block of k, a panel split for that block of k (every plane, both halves),
 * the sums of its chunk's rows and panels over the blocks of k before (only
 * where k takes more than one block), and a block of C. */
static size_t x_elements(const amx_job *j)
{
    return (size_t)(j->chunk_rows * j->k_block);
}

static size_t panel_dwords(const amx_job *j)
{
    return (size_t)(j->k_block / BLOCK * 256) * 2 * (size_t)j->planes;
}

static size_t sums_stride(const amx_job *j)
{
    return (size_t)(j->panels_per_group * BLOCK);
}

static size_t task_bytes(const amx_job *j)
{
    size_t sums = j->kp > j->k_block ? (size_t)j->chunk_rows * sums_stride(j) * 4 : 0;
    return x_elements(j) * 2 * (size_t)j->planes + panel_dwords(j) * 4 + sums + BLOCK * BLOCK * 4;
}

/* Task t: group t % groups of the panels (output columns) on part t / groups
 * of the rows, a chunk of rows and a block of k at a time: each split once
 * per chunk. */
LY_AMX static void run_tasks(void *ctx, int64_t begin, int64_t end)
{
    const amx_job *j = ctx;
    uint8_t *scratch = ly_nn_scratch(0, task_bytes(j));
    if (!scratch) {
        atomic_store(j->out_of_memory, true);
        return;
    }
    size_t a_plane = x_elements(j);
    uint16_t *a = (uint16_t *)scratch;
    uint32_t *b = (uint32_t *)(a + a_plane * (size_t)j->planes);
    float *c = (float *)(b + panel_dwords(j)), *sums = c + BLOCK * BLOCK;
    ly_amx_tile_config config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) {
        config.rows[t] = 16;
        config.colsb[t] = 64;
    }
    _tile_loadconfig(&config);
    int64_t panels = (j->n + BLOCK - 1) / BLOCK;
    for (int64_t t = begin; t < end; t++) {
        int64_t group = t % j->groups, part = t / j->groups;
        int64_t p0 = group * j->panels_per_group;
        int64_t p1 = p0 + j->panels_per_group < panels ? p0 + j->panels_per_group : panels;
        int64_t r0 = part * j->part_rows, r1 = r0 + j->part_rows < j->m ? r0 + j->part_rows : j->m;
        for (int64_t m0 = r0; m0 < r1; m0 += j->chunk_rows) {
            int64_t rows = r1 - m0 < j->chunk_rows ? r1 - m0 : j->chunk_rows;
            for (int64_t k0 = 0; k0 < j->kp; k0 += j->k_block) {
                int64_t steps = (j->kp - k0 < j->k_block ? j->kp - k0 : j->k_block) / BLOCK;
                bool first = k0 == 0, last = k0 + j->k_block >= j->kp;
                split_rows(j, m0, rows, k0, steps, a, a_plane);
                for (int64_t p = p0; p < p1; p++) {
                    split_panel(j, p, k0, steps, b);
                    for (int64_t r = 0; r < rows; r += BLOCK) {
                        float *partial =
                            sums + (size_t)r * sums_stride(j) + (size_t)(p - p0) * BLOCK;
                        block(j, a + (r / 16) * steps * 512, a_plane, steps, b,
                              first ? NULL : partial, sums_stride(j), last ? c : partial,
                              last ? BLOCK : sums_stride(j));
                        if (last)
                            finish(j, c, m0 + r, rows - r < BLOCK ? rows - r : BLOCK, p * BLOCK);
                    }
                }
            }
        }
    }
    _tile_release();
}

static void amx_release(void *state)
{
    free(state);
}

static ly_status amx_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                             void **state)
{
    /* Every decline is the predicate's (a declined prepare would be tried
     * again on every call). */
    const ly_linear_params *p = LY_PARAMS(call, ly_linear_params);
    amx_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "linear (amx_bf16): out of memory");
    s->threads = info->threads;
    s->planes = ly_amx_planes();
    s->gelu = p->activation == LY_ACT_GELU;
    /* the gelu slot's kernel, as the oneDNN provider runs it (linear_onednn.c) */
    s->gelu_after =
        s->gelu ? ly_kernel_select_in_place(LY_OP_GELU, call->out[0], info->threads) : NULL;
    s->activation = s->gelu ? LY_ACT_NONE : p->activation;
    s->alpha = (float)p->alpha;
    *state = s;
    return LY_OK;
}

static ly_status amx_run(void *state, const ly_kernel_call *call)
{
    const amx_state *s = state;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    int64_t k = x->shape[x->ndim - 1], n = w->shape[0], m = k ? ly_tensor_numel(x) / k : 0;
    amx_job j = {.x = x->data,
                 .w = w->data,
                 .bias = call->in[2] ? call->in[2]->data : NULL,
                 .residual = call->in[3] ? call->in[3]->data : NULL,
                 .y = call->out[0]->data,
                 .m = m,
                 .k = k,
                 .n = n,
                 .kp = (k + BLOCK - 1) / BLOCK * BLOCK,
                 .activation = s->activation,
                 .alpha = s->alpha,
                 .planes = s->planes};
    if (m == 0) return LY_OK;
    /* Each task splits the rows of x and the weights it reads: threads take
     * groups of panels (every task splits all of x) or parts of the rows
     * (every task splits all the weights), whichever splits less twice. */
    int threads = s->threads > 0 ? s->threads : 1;
    int64_t panels = (n + BLOCK - 1) / BLOCK, blocks = (m + BLOCK - 1) / BLOCK;
    bool by_rows = m * k + k * n / threads > k * n + m * k / threads;
    j.groups = by_rows ? 1 : panels < threads ? panels : threads;
    int64_t parts = (threads + j.groups - 1) / j.groups;
    if (parts > blocks) parts = blocks;
    j.panels_per_group = (panels + j.groups - 1) / j.groups;
    j.part_rows = (blocks + parts - 1) / parts * BLOCK;
    /* Blocks of k of at most K_BLOCK, evenly; chunks of rows whose split
     * (every plane) for a block of k stays in L2. */
    int64_t k_blocks = (j.kp + K_BLOCK - 1) / K_BLOCK;
    j.k_block = ((j.kp + k_blocks - 1) / k_blocks + BLOCK - 1) / BLOCK * BLOCK;
    int64_t most = (int64_t)CHUNK_BYTES / (j.k_block * 2 * j.planes) / BLOCK * BLOCK;
    if (most < BLOCK) most = BLOCK;
    int64_t chunks = (j.part_rows + most - 1) / most;
    j.chunk_rows = ((j.part_rows + chunks - 1) / chunks + BLOCK - 1) / BLOCK * BLOCK;
    if (!ly_nn_scratch(0, task_bytes(&j)))
        return ly_set_error(LY_E_NO_MEMORY, "linear (amx_bf16): out of memory for the split "
                                            "operands");
    atomic_bool out_of_memory = false;
    j.out_of_memory = &out_of_memory;
    int64_t tasks = j.groups * ((m + j.part_rows - 1) / j.part_rows);
    ly_parallel_for(tasks, 1, tasks < threads ? (int)tasks : threads, run_tasks, &j);
    if (atomic_load(&out_of_memory))
        return ly_set_error(LY_E_NO_MEMORY, "linear (amx_bf16): out of memory for a thread's "
                                            "split operands");
    if (!s->gelu) return LY_OK;
    ly_kernel_call g; /* in place (an element-wise slot) */
    ly_kernel_call_init(&g);
    g.in[0] = call->out[0];
    g.out[0] = call->out[0];
    g.threads = s->threads;
    ly_status status = s->gelu_after ? ly_impl_run(s->gelu_after, &g) : LY_E_DECLINED;
    if (status != LY_OK) status = ly_kernel_dispatch_op(LY_OP_GELU, &g); /* its fallbacks */
    return status;
}

const ly_kernel_stateful ly_amx_linear_stateful = {
    .prepare = amx_prepare, .run = amx_run, .release = amx_release};

#endif
