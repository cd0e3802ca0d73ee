/* SPDX-License-Identifier: MIT */
/*
 * conv2d by Winograd F(4x4, 3x3) on AVX2 CPUs: 3x3, stride 1, padding 1,
 * channels in and out multiples of 8, maps in NCHW8C or plain.
 *
 * oneDNN 2.6 has Winograd kernels for AVX-512 only; on AVX2 its direct
 * jit:avx2 kernels ran LibreYOLO9t's 3x3 stride-1 convolutions (~60% of its
 * time at 1 thread on Zen 3) at 53-89 GFLOP/s. F(4x4, 3x3) does a 4x4 output
 * tile's 144 multiply-adds per channel pair in 36, as 36 small GEMMs (one per
 * transformed position) between the input tiles' transforms and the output's.
 * NNPACK, which has such kernels, is not packaged by Debian. LibreYOLO9t:
 * 0.71x the time at 1 and 2 threads (in-process pairs, Zen 3).
 *
 * Interpolation points 0, +-1, 1/2, -2 (and infinity), not the usual +-2:
 * half the rounding error (max |diff| 3.3e-5 against 7.4e-5 on conv2d's
 * cases; LibreYOLO9t's outputs then within 1.2e-3 of LibreYOLO's, against
 * 1.5e-3 with +-2 and 1.0e-3 direct). The weights' G g G^T once, in double,
 * when the graph prepares the node; per chunk of tiles the inputs' B^T d B
 * eight channels a register, the GEMMs six tiles by sixteen output channels
 * (twelve accumulators), the outputs' A^T m A with the bias, the activation
 * and the residual. Within conv2d's tolerance of the reference, not
 * bit-identical; an inf or NaN reaches the whole 4x4 tile around it (as in
 * any Winograd kernel).
 */
#include "core/core.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/avx2/transpose_avx2.h"
#include "providers/builtin.h"
#include "providers/op_cache.h"

#include <immintrin.h>
#include <stdlib.h>

#include <string.h>

#define TILE 4                  /* output pixels a tile side */
#define SPAN 6                  /* input pixels a tile side */
#define POINTS 36               /* transformed positions a tile */
#define ROWS 6                  /* tiles a GEMM step */
#define CHUNK_BYTES (384 << 10) /* a chunk's transformed inputs and outputs: within L2 */

typedef struct wino_state {
    int64_t cin, cout; /* multiples of 8 (the predicate) */
    int64_t h, w, tiles_w, tiles;
    int64_t chunk; /* tiles a chunk, a multiple of ROWS */
    int64_t activation;
    float alpha;
    int threads;
    bool plain_in, plain_out; /* maps a graph keeps plain: reordered around the blocked run */
    float *u;       /* [point][block of 16 outputs][cin][16, or 8 for the last of cout % 16 == 8] */
    float *bias;    /* [cout] */
    float *weights; /* the caller's, exactly ([cout][cin][3][3]): the graph gives its pages back */
    bool has_bias;
} wino_state;

typedef struct wino_run {
    const wino_state *s;
    const float *x, *residual;
    float *y;
} wino_run;

static void wino_release(void *state)
{
    wino_state *s = state;
    if (!s) return;
    free(s->u);
    free(s->bias);
    free(s->weights);
    free(s);
}

/* ---- transforms -------------------------------------------------------------------------- */

/* B^T on six registers (one column or row of the tile). */
static inline void input_1d(const __m256 d[6], __m256 t[6])
{
    __m256 half = _mm256_set1_ps(0.5f), two = _mm256_set1_ps(2.0f);
    __m256 three_halves = _mm256_set1_ps(1.5f), five_halves = _mm256_set1_ps(2.5f);
    __m256 odd = _mm256_sub_ps(d[3], d[1]), even = _mm256_sub_ps(d[4], d[2]);
    t[0] =
        _mm256_fmadd_ps(three_halves, odd, _mm256_fnmadd_ps(two, d[2], _mm256_add_ps(d[0], d[4])));
    t[1] =
        _mm256_add_ps(_mm256_fmadd_ps(half, d[2], d[4]), _mm256_fmsub_ps(five_halves, d[3], d[1]));
    t[2] =
        _mm256_add_ps(_mm256_fmadd_ps(half, d[3], d[4]), _mm256_fnmadd_ps(five_halves, d[2], d[1]));
    t[3] = _mm256_fmadd_ps(two, odd, even);
    t[4] = _mm256_fnmadd_ps(half, odd, even);
    t[5] =
        _mm256_fmadd_ps(three_halves, even, _mm256_fnmadd_ps(two, d[3], _mm256_add_ps(d[1], d[5])));
}

/* A^T on six registers: four. */
static inline void output_1d(const __m256 m[6], __m256 o[4])
{
    __m256 sum12 = _mm256_add_ps(m[1], m[2]), diff12 = _mm256_sub_ps(m[1], m[2]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], sum12), _mm256_add_ps(m[3], m[4]));
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(0.5f), m[3],
                           _mm256_fnmadd_ps(_mm256_set1_ps(2.0f), m[4], diff12));
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), m[3],
                           _mm256_fmadd_ps(_mm256_set1_ps(4.0f), m[4], sum12));
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.125f), m[3],
                                         _mm256_fnmadd_ps(_mm256_set1_ps(8.0f), m[4], diff12)),
                         m[5]);
}

/* One tile's eight channels (6x6 pixels from `src`, rows `row` floats apart,
 * pixels 8) into v[point * stride]. */
static inline void transform_input(const float *src, int64_t row, float *v, int64_t stride)
{
    __m256 t[SPAN][SPAN]; /* [column of the input][row of B^T d] */
    for (int j = 0; j < SPAN; j++) {
        __m256 d[SPAN];
        for (int i = 0; i < SPAN; i++)
            d[i] = _mm256_loadu_ps(src + i * row + j * 8);
        input_1d(d, t[j]);
    }
    for (int i = 0; i < SPAN; i++) {
        __m256 d[SPAN], r[SPAN];
        for (int j = 0; j < SPAN; j++)
            d[j] = t[j][i];
        input_1d(d, r);
        for (int j = 0; j < SPAN; j++)
            _mm256_storeu_ps(v + (i * SPAN + j) * stride, r[j]);
    }
}

/* ---- the GEMMs --------------------------------------------------------------------------- */

/* ROWS tiles' transformed inputs (rows `vstride` apart) times a block of 16
 * output channels' weights ([cin][16]), into m (rows `mstride` apart). */
static inline void gemm16(const float *v, int64_t vstride, const float *u, int64_t cin, float *m,
                          int64_t mstride)
{
    __m256 lo[ROWS], hi[ROWS];
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++)
        lo[r] = _mm256_setzero_ps(), hi[r] = _mm256_setzero_ps();
    for (int64_t ci = 0; ci < cin; ci++, u += 16) {
        __m256 w0 = _mm256_loadu_ps(u), w1 = _mm256_loadu_ps(u + 8);
#pragma GCC unroll 6
        for (int r = 0; r < ROWS; r++) {
            __m256 b = _mm256_broadcast_ss(v + r * vstride + ci);
            lo[r] = _mm256_fmadd_ps(b, w0, lo[r]);
            hi[r] = _mm256_fmadd_ps(b, w1, hi[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++) {
        _mm256_storeu_ps(m + r * mstride, lo[r]);
        _mm256_storeu_ps(m + r * mstride + 8, hi[r]);
    }
}

/* The same for a last block of 8 output channels ([cin][8]). */
static inline void gemm8(const float *v, int64_t vstride, const float *u, int64_t cin, float *m,
                         int64_t mstride)
{
    __m256 acc[ROWS];
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t ci = 0; ci < cin; ci++, u += 8) {
        __m256 w = _mm256_loadu_ps(u);
#pragma GCC unroll 6
        for (int r = 0; r < ROWS; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(v + r * vstride + ci), w, acc[r]);
    }
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++)
        _mm256_storeu_ps(m + r * mstride, acc[r]);
}

/* ---- a chunk of tiles -------------------------------------------------------------------- */

/* Tiles [first, first + count) of one image: v and m are [chunk][POINTS][cin or cout]. */
static void run_chunk(const wino_run *run, int64_t first, int64_t count, float *v, float *m)
{
    const wino_state *s = run->s;
    int64_t cin = s->cin, cout = s->cout, plane_in = s->h * s->w * 8;
    int64_t groups = (count + ROWS - 1) / ROWS;
    float edge[SPAN * SPAN * 8];
    /* a channel block at a time: the tiles along a row read each input row in order */
    for (int64_t cb = 0; cb < cin / 8; cb++) {
        const float *plane = run->x + cb * plane_in;
        for (int64_t t = 0; t < count; t++) {
            int64_t ty = (first + t) / s->tiles_w, tx = (first + t) % s->tiles_w;
            int64_t y0 = ty * TILE - 1, x0 = tx * TILE - 1;
            float *dst = v + t * POINTS * cin + cb * 8;
            if (y0 >= 0 && x0 >= 0 && y0 + SPAN <= s->h && x0 + SPAN <= s->w) {
                transform_input(plane + (y0 * s->w + x0) * 8, s->w * 8, dst, cin);
                continue;
            }
            memset(edge, 0, sizeof edge);
            for (int64_t i = 0; i < SPAN; i++) {
                int64_t iy = y0 + i;
                if (iy < 0 || iy >= s->h) continue;
                for (int64_t j = 0; j < SPAN; j++) {
                    int64_t ix = x0 + j;
                    if (ix >= 0 && ix < s->w)
                        memcpy(edge + (i * SPAN + j) * 8, plane + (iy * s->w + ix) * 8,
                               8 * sizeof(float));
                }
            }
            transform_input(edge, SPAN * 8, dst, cin);
        }
    }
    /* the last group's missing tiles: zeros, computed and not stored */
    memset(v + count * POINTS * cin, 0, (size_t)((groups * ROWS - count) * POINTS * cin) * 4);

    for (int64_t p = 0; p < POINTS; p++) {
        const float *u = s->u + p * cin * cout;
        for (int64_t o = 0; o < cout; o += 16) {
            bool full = o + 16 <= cout;
            for (int64_t g = 0; g < groups; g++) {
                const float *vg = v + (g * ROWS * POINTS + p) * cin;
                float *mg = m + (g * ROWS * POINTS + p) * cout + o;
                if (full)
                    gemm16(vg, POINTS * cin, u, cin, mg, POINTS * cout);
                else
                    gemm8(vg, POINTS * cin, u, cin, mg, POINTS * cout);
            }
            u += (full ? 16 : 8) * cin;
        }
    }

    int64_t plane_out = s->h * s->w * 8;
    /* a block of output channels at a time: the tiles along a row write each output row in order */
    for (int64_t b = 0; b < s->cout / 8; b++) {
        __m256 bias = _mm256_loadu_ps(s->bias + b * 8);
        for (int64_t t = 0; t < count; t++) {
            int64_t ty = (first + t) / s->tiles_w, tx = (first + t) % s->tiles_w;
            int64_t rows = s->h - ty * TILE < TILE ? s->h - ty * TILE : TILE;
            int64_t cols = s->w - tx * TILE < TILE ? s->w - tx * TILE : TILE;
            const float *mt = m + t * POINTS * cout + b * 8;
            __m256 half[TILE][SPAN]; /* [row of A^T m][column] */
            for (int j = 0; j < SPAN; j++) {
                __m256 col[SPAN], o[TILE];
                for (int i = 0; i < SPAN; i++)
                    col[i] = _mm256_loadu_ps(mt + (i * SPAN + j) * cout);
                output_1d(col, o);
                for (int i = 0; i < TILE; i++)
                    half[i][j] = o[i];
            }
            size_t base = (size_t)(b * plane_out + ((ty * TILE) * s->w + tx * TILE) * 8);
            for (int64_t i = 0; i < rows; i++) {
                __m256 o[TILE];
                output_1d(half[i], o);
                for (int64_t j = 0; j < cols; j++) {
                    size_t at = base + (size_t)((i * s->w + j) * 8);
                    __m256 out = ly_activate8(_mm256_add_ps(o[j], bias), s->activation, s->alpha);
                    if (run->residual)
                        out = _mm256_add_ps(out, _mm256_loadu_ps(run->residual + at));
                    _mm256_storeu_ps(run->y + at, out);
                }
            }
        }
    }
}

/* Workers [begin, end): worker k takes the k-th of `workers` near-equal runs
 * of groups of ROWS tiles, a chunk at a time, in its own part of the scratch. */
typedef struct wino_work {
    const wino_run *run;
    float *scratch;
    int64_t workers;
} wino_work;

static void wino_workers(void *ctx, int64_t begin, int64_t end)
{
    const wino_work *work = ctx;
    const wino_state *s = work->run->s;
    size_t v_floats = (size_t)(s->chunk * POINTS * s->cin),
           m_floats = (size_t)(s->chunk * POINTS * s->cout);
    int64_t groups = (s->tiles + ROWS - 1) / ROWS;
    for (int64_t k = begin; k < end; k++) {
        float *v = work->scratch + (size_t)k * (v_floats + m_floats), *m = v + v_floats;
        int64_t first = k * groups / work->workers * ROWS,
                last = (k + 1) * groups / work->workers * ROWS;
        if (last > s->tiles) last = s->tiles;
        for (; first < last; first += s->chunk)
            run_chunk(work->run, first, last - first < s->chunk ? last - first : s->chunk, v, m);
    }
}

/* Plain maps to and from 8-channel blocks, a block of channels a task. */
typedef struct reorder_job {
    const float *src;
    float *dst;
    int64_t pixels;
    bool to_blocked;
} reorder_job;

static void reorder_blocks(void *ctx, int64_t begin, int64_t end)
{
    const reorder_job *job = ctx;
    int64_t hw = job->pixels;
    for (int64_t cb = begin; cb < end; cb++) {
        const float *src = job->src + cb * 8 * hw;
        float *dst = job->dst + cb * 8 * hw;
        int64_t p = 0;
        for (; p + 8 <= hw; p += 8) {
            if (job->to_blocked)
                ly_avx2_transpose8x8(src + p, hw, dst + p * 8, 8);
            else
                ly_avx2_transpose8x8(src + p * 8, 8, dst + p, hw);
        }
        for (; p < hw; p++)
            for (int64_t c = 0; c < 8; c++) {
                if (job->to_blocked)
                    dst[p * 8 + c] = src[c * hw + p];
                else
                    dst[c * hw + p] = src[p * 8 + c];
            }
    }
}

static void reorder(const float *src, float *dst, int64_t channels, int64_t pixels, bool to_blocked,
                    int threads)
{
    reorder_job job = {src, dst, pixels, to_blocked};
    ly_parallel_for(channels / 8, 1, threads, reorder_blocks, &job);
}

static ly_status wino_run_state(void *state, const ly_kernel_call *call)
{
    const wino_state *s = state;
    if (s->tiles == 0 || call->in[0]->shape[0] == 0) return LY_OK;
    int64_t groups = (s->tiles + ROWS - 1) / ROWS;
    int64_t workers = s->threads < groups ? s->threads : groups;
    size_t per_worker = (size_t)(s->chunk * POINTS * (s->cin + s->cout));
    size_t in_image = (size_t)(s->cin * s->h * s->w), out_image = (size_t)(s->cout * s->h * s->w);
    size_t floats = (size_t)workers * per_worker + (s->plain_in ? in_image : 0) +
                    (s->plain_out ? out_image : 0);
    /* this thread's, kept between calls: a fresh map a call would cost
     * page faults (~2 ms a call on the head's 1.6 MB plain input) */
    float *scratch = ly_nn_scratch(0, floats * sizeof(float));
    if (!scratch)
        return ly_set_error(LY_E_NO_MEMORY,
                            "conv2d (avx2_winograd): out of memory for %lld tiles' transforms",
                            (long long)(workers * s->chunk));
    float *blocked_in = scratch + (size_t)workers * per_worker;
    float *blocked_out = blocked_in + (s->plain_in ? in_image : 0);
    for (int64_t n = 0; n < call->in[0]->shape[0]; n++) {
        const float *x = (const float *)call->in[0]->data + n * in_image;
        const float *residual =
            call->in[3] ? (const float *)call->in[3]->data + n * out_image : NULL;
        float *y = (float *)call->out[0]->data + n * out_image;
        if (s->plain_in) {
            reorder(x, blocked_in, s->cin, s->h * s->w, true, s->threads);
            x = blocked_in;
        }
        wino_run run = {s, x, s->plain_out ? NULL : residual, s->plain_out ? blocked_out : y};
        wino_work work = {&run, scratch, workers};
        ly_parallel_for(workers, 1, (int)workers, wino_workers, &work);
        if (s->plain_out) {
            reorder(blocked_out, y, s->cout, s->h * s->w, false, s->threads);
            if (residual)
                for (size_t i = 0; i < out_image; i++)
                    y[i] += residual[i];
        }
    }
    return LY_OK;
}

/* ---- preparing a node -------------------------------------------------------------------- */

static ly_status wino_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    memset(out, 0, sizeof *out);
    /* plain maps too (reordered around the run): a map a plain-only
     * kernel also reads (LibreYOLO9t's head reads the neck's outputs, which
     * its downsampling average pool reads plain) */
    uint32_t either = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C) | LY_LAYOUT_BIT(LY_LAYOUT_PLAIN);
    out->in[0] = either;
    out->out[0] = either;
    out->in[3] = either;
    out->tied = 1u << 3;
    out->preferred = LY_LAYOUT_NCHW8C;
    return LY_OK;
}

/* G g G^T of one 3x3 kernel, in double. */
static void transform_weights(const float g[9], double out[POINTS])
{
    static const double G[SPAN][3] = {{1, 0, 0},
                                      {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                      {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                      {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                      {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                      {0, 0, 1}};
    double gg[SPAN][3];
    for (int i = 0; i < SPAN; i++)
        for (int k = 0; k < 3; k++)
            gg[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
    for (int i = 0; i < SPAN; i++)
        for (int j = 0; j < SPAN; j++)
            out[i * SPAN + j] = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
}

static ly_status wino_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state)
{
    bool known_in = info->in_layout[0] == LY_LAYOUT_NCHW8C || info->in_layout[0] == LY_LAYOUT_PLAIN;
    bool known_out =
        info->out_layout[0] == LY_LAYOUT_NCHW8C || info->out_layout[0] == LY_LAYOUT_PLAIN;
    if (!known_in || !known_out || !(info->constant_inputs & (1u << 1)) ||
        (call->in[2] && !(info->constant_inputs & 4u)))
        return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = call->params;
    wino_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "conv2d (avx2_winograd): out of memory");
    s->plain_in = info->in_layout[0] == LY_LAYOUT_PLAIN;
    s->plain_out = info->out_layout[0] == LY_LAYOUT_PLAIN;
    s->cin = x->shape[1];
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->cout = w->shape[0];
    s->tiles_w = (s->w + TILE - 1) / TILE;
    s->tiles = (s->h + TILE - 1) / TILE * s->tiles_w;
    s->activation = p->activation;
    s->alpha = (float)p->alpha;
    int64_t per_tile = POINTS * (s->cin + s->cout) * (int64_t)sizeof(float);
    int64_t chunk = CHUNK_BYTES / per_tile / ROWS * ROWS;
    if (chunk < ROWS) chunk = ROWS;
    /* one thread where the GEMMs are a few MFLOP */
    double gemm_flops = 2.0 * POINTS * (double)(s->tiles * s->cin * s->cout);
    s->threads = info->threads > 1 && gemm_flops >= 1e6 ? info->threads : 1;
    /* every thread a share when the map is small */
    int64_t share = (s->tiles + s->threads - 1) / s->threads;
    share = (share + ROWS - 1) / ROWS * ROWS;
    s->chunk = chunk < share ? chunk : share;
    s->u = aligned_alloc(64, ((size_t)(POINTS * s->cin * s->cout) * sizeof(float) + 63) / 64 * 64);
    s->bias = calloc((size_t)s->cout, sizeof *s->bias);
    size_t weight_bytes = (size_t)(s->cout * s->cin * 9) * sizeof(float);
    s->weights = malloc(weight_bytes ? weight_bytes : 1);
    if (!s->u || !s->bias || !s->weights) {
        wino_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (avx2_winograd): out of memory");
    }
    const float *wt = w->data; /* [cout][cin][3][3] */
    for (int64_t o = 0; o < s->cout; o++) {
        int64_t block = o / 16, lane = o % 16;
        int64_t width = block * 16 + 16 <= s->cout ? 16 : 8;
        for (int64_t ci = 0; ci < s->cin; ci++) {
            double t[POINTS];
            transform_weights(wt + (o * s->cin + ci) * 9, t);
            for (int64_t q = 0; q < POINTS; q++)
                s->u[q * s->cin * s->cout + block * 16 * s->cin + ci * width + lane] = (float)t[q];
        }
    }
    memcpy(s->weights, wt, weight_bytes);
    s->has_bias = call->in[2] != NULL;
    if (s->has_bias) memcpy(s->bias, call->in[2]->data, (size_t)s->cout * sizeof *s->bias);
    *state = s;
    return LY_OK;
}

/* The transformed weights give no exact way back: the state keeps the
 * caller's too (what the graph would otherwise keep), and the bias. */
static uint32_t wino_held(void *state)
{
    const wino_state *s = state;
    return 1u << 1 | (s->has_bias ? 1u << 2 : 0u);
}

static ly_status wino_restore(void *state, int index, void *dst)
{
    const wino_state *s = state;
    if (index == 1)
        memcpy(dst, s->weights, (size_t)(s->cout * s->cin * 9) * sizeof(float));
    else if (index == 2 && s->has_bias)
        memcpy(dst, s->bias, (size_t)s->cout * sizeof(float));
    else
        return ly_set_error(LY_E_INVALID_ARGUMENT, "conv2d (avx2_winograd): input %d is not held",
                            index);
    return LY_OK;
}

const ly_kernel_stateful ly_avx2_conv2d_winograd_stateful = {.layouts = wino_layouts,
                                                             .prepare = wino_prepare,
                                                             .run = wino_run_state,
                                                             .release = wino_release,
                                                             .restore_constant = wino_restore,
                                                             .held_constants = wino_held};
