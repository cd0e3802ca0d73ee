/* SPDX-License-Identifier: MIT */
/*
 * conv2d by Winograd F(4x4, 3x3): 3x3, stride 1, padding 1. avx2_winograd on
 * AVX2 CPUs, channels in and out multiples of 8, maps in NCHW8C or plain;
 * avx512_winograd on AVX-512 CPUs, multiples of 16, maps in NCHW16C or plain.
 * Grouped convolutions too, where each group's channels are such multiples:
 * every group is then its own convolution on its own blocks. The vector part,
 * winograd_simd.h, is one text compiled for both widths (the arithmetic is the
 * same, lane for lane). On a 2-core AVX-512 Xeon oneDNN 2.6's Winograd took 3
 * of LibreYOLO9t's 3x3s and its direct kernels ran the rest at 150-180
 * GFLOP/s; the 16-lane form runs them at 220-445 (LibreYOLO9t 0.74x the time
 * at 1 thread).
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
 * a channel block a register, the GEMMs six (AVX2) or twelve (AVX-512) tiles
 * by two registers of output channels, the outputs' A^T m A with the bias,
 * the activation and the residual. Within conv2d's tolerance of the reference, not
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
#define CHUNK_BYTES (384 << 10) /* a chunk's transformed inputs and outputs: within L2 */

typedef struct wino_run wino_run;

typedef struct wino_state {
    int64_t vl;        /* lanes a register: 8 (AVX2, NCHW8C) or 16 (AVX-512, NCHW16C) */
    int64_t rows;      /* tiles a GEMM step */
    int64_t cin, cout; /* a group's: multiples of vl (the predicate) */
    int64_t groups;    /* each its own convolution on its own blocks of channels */
    int64_t h, w, tiles_w, tiles;
    int64_t chunk; /* tiles a chunk, a multiple of rows */
    int64_t activation;
    float alpha;
    int threads;
    bool plain_in, plain_out; /* maps a graph keeps plain: reordered around the blocked run */
    /* [group][point][block of 2 vl outputs][cin][2 vl, or vl for the last of cout % 2 vl == vl] */
    float *u;
    float *bias;    /* [groups * cout] */
    float *weights; /* the caller's, exactly ([groups * cout][cin][3][3]): the graph gives its
                       pages back */
    bool has_bias;
    void (*run_chunk)(const wino_run *run, int64_t first, int64_t count, float *v, float *m);
    const char *name;
} wino_state;

/* One group of one image: its maps, transformed weights and bias. */
struct wino_run {
    const wino_state *s;
    const float *x, *residual;
    float *y;
    const float *u, *bias;
};

/* The caller's weights, [groups * cout][cin][3][3], counted. */
static size_t weight_floats(const wino_state *s)
{
    return (size_t)(s->groups * s->cout * s->cin * 9);
}

static void wino_release(void *state)
{
    wino_state *s = state;
    if (!s) return;
    free(s->u);
    free(s->bias);
    free(s->weights);
    free(s);
}

/* ---- the vector part, once a width -------------------------------------------------------- */

#define WG_VL 8
#define WG_ROWS 6 /* twelve accumulators of the sixteen registers */
#define WG_V __m256
#define WG_ATTR
#define WG_NAME(x) x##_8
#define WG_LOAD _mm256_loadu_ps
#define WG_STORE _mm256_storeu_ps
#define WG_SET1 _mm256_set1_ps
#define WG_ZERO _mm256_setzero_ps
#define WG_ADD _mm256_add_ps
#define WG_SUB _mm256_sub_ps
#define WG_FMADD _mm256_fmadd_ps
#define WG_FNMADD _mm256_fnmadd_ps
#define WG_FMSUB _mm256_fmsub_ps
#define WG_BCAST _mm256_broadcast_ss
#define WG_ACTIVATE ly_activate8
#include "providers/avx2/winograd_simd.h"
#undef WG_VL
#undef WG_ROWS
#undef WG_V
#undef WG_ATTR
#undef WG_NAME
#undef WG_LOAD
#undef WG_STORE
#undef WG_SET1
#undef WG_ZERO
#undef WG_ADD
#undef WG_SUB
#undef WG_FMADD
#undef WG_FNMADD
#undef WG_FMSUB
#undef WG_BCAST
#undef WG_ACTIVATE

#define WG_VL 16
#define WG_ROWS 12 /* twenty-four accumulators of the thirty-two registers */
#define WG_V __m512
#define WG_ATTR LY_AVX512
#define WG_NAME(x) x##_16
#define WG_LOAD _mm512_loadu_ps
#define WG_STORE _mm512_storeu_ps
#define WG_SET1 _mm512_set1_ps
#define WG_ZERO _mm512_setzero_ps
#define WG_ADD _mm512_add_ps
#define WG_SUB _mm512_sub_ps
#define WG_FMADD _mm512_fmadd_ps
#define WG_FNMADD _mm512_fnmadd_ps
#define WG_FMSUB _mm512_fmsub_ps
#define WG_BCAST(p) _mm512_set1_ps(*(p))
#define WG_ACTIVATE ly_activate16
#include "providers/avx2/winograd_simd.h"

/* Workers [begin, end): worker k takes the k-th of `workers` near-equal runs
 * of groups of `rows` tiles, a chunk at a time, in its own part of the scratch. */
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
    int64_t tile_groups = (s->tiles + s->rows - 1) / s->rows;
    for (int64_t k = begin; k < end; k++) {
        float *v = work->scratch + (size_t)k * (v_floats + m_floats), *m = v + v_floats;
        int64_t first = k * tile_groups / work->workers * s->rows,
                last = (k + 1) * tile_groups / work->workers * s->rows;
        if (last > s->tiles) last = s->tiles;
        for (; first < last; first += s->chunk)
            s->run_chunk(work->run, first, last - first < s->chunk ? last - first : s->chunk, v, m);
    }
}

/* Plain maps to and from blocks of vl channels, a block a task, 8 x 8
 * transposes (a block of 16 is two of 8 channels side by side). */
typedef struct reorder_job {
    const float *src;
    float *dst;
    int64_t pixels, vl;
    bool to_blocked;
} reorder_job;

static void reorder_blocks(void *ctx, int64_t begin, int64_t end)
{
    const reorder_job *job = ctx;
    int64_t hw = job->pixels, vl = job->vl;
    for (int64_t cb = begin; cb < end; cb++) {
        const float *src = job->src + cb * vl * hw;
        float *dst = job->dst + cb * vl * hw;
        for (int64_t half = 0; half < vl; half += 8) {
            int64_t p = 0;
            for (; p + 8 <= hw; p += 8) {
                if (job->to_blocked)
                    ly_avx2_transpose8x8(src + half * hw + p, hw, dst + p * vl + half, vl);
                else
                    ly_avx2_transpose8x8(src + p * vl + half, vl, dst + half * hw + p, hw);
            }
            for (; p < hw; p++)
                for (int64_t c = half; c < half + 8; c++) {
                    if (job->to_blocked)
                        dst[p * vl + c] = src[c * hw + p];
                    else
                        dst[c * hw + p] = src[p * vl + c];
                }
        }
    }
}

static void reorder(const float *src, float *dst, int64_t channels, int64_t pixels, int64_t vl,
                    bool to_blocked, int threads)
{
    reorder_job job = {src, dst, pixels, vl, to_blocked};
    ly_parallel_for(channels / vl, 1, threads, reorder_blocks, &job);
}

static ly_status wino_run_state(void *state, const ly_kernel_call *call)
{
    const wino_state *s = state;
    if (s->tiles == 0 || call->in[0]->shape[0] == 0) return LY_OK;
    int64_t tile_groups = (s->tiles + s->rows - 1) / s->rows;
    int64_t workers = s->threads < tile_groups ? s->threads : tile_groups;
    size_t per_worker = (size_t)(s->chunk * POINTS * (s->cin + s->cout));
    size_t in_group = (size_t)(s->cin * s->h * s->w), out_group = (size_t)(s->cout * s->h * s->w);
    size_t in_image = in_group * (size_t)s->groups, out_image = out_group * (size_t)s->groups;
    size_t floats = (size_t)workers * per_worker + (s->plain_in ? in_image : 0) +
                    (s->plain_out ? out_image : 0);
    /* this thread's, kept between calls: a fresh map a call would cost
     * page faults (~2 ms a call on the head's 1.6 MB plain input) */
    float *scratch = ly_nn_scratch(0, floats * sizeof(float));
    if (!scratch)
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (%s): out of memory for %lld tiles' transforms",
                            s->name, (long long)(workers * s->chunk));
    float *blocked_in = scratch + (size_t)workers * per_worker;
    float *blocked_out = blocked_in + (s->plain_in ? in_image : 0);
    for (int64_t n = 0; n < call->in[0]->shape[0]; n++) {
        const float *x = (const float *)call->in[0]->data + n * in_image;
        const float *residual =
            call->in[3] ? (const float *)call->in[3]->data + n * out_image : NULL;
        float *y = (float *)call->out[0]->data + n * out_image;
        if (s->plain_in) {
            reorder(x, blocked_in, s->cin * s->groups, s->h * s->w, s->vl, true, s->threads);
            x = blocked_in;
        }
        /* plain out: the residual is added after the reorder */
        float *into = s->plain_out ? blocked_out : y;
        const float *added = s->plain_out ? NULL : residual;
        /* a group's channels are whole blocks in a row (the predicate) */
        for (int64_t g = 0; g < s->groups; g++) {
            wino_run run = {s,
                            x + g * in_group,
                            added ? added + g * out_group : NULL,
                            into + g * out_group,
                            s->u + g * POINTS * s->cin * s->cout,
                            s->bias + g * s->cout};
            wino_work work = {&run, scratch, workers};
            ly_parallel_for(workers, 1, (int)workers, wino_workers, &work);
        }
        if (s->plain_out) {
            reorder(blocked_out, y, s->cout * s->groups, s->h * s->w, s->vl, false, s->threads);
            if (residual)
                for (size_t i = 0; i < out_image; i++)
                    y[i] += residual[i];
        }
    }
    return LY_OK;
}

/* ---- preparing a node -------------------------------------------------------------------- */

static void layouts_with(ly_layout blocked, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    /* plain maps too (reordered around the run): a map a plain-only
     * kernel also reads (LibreYOLO9t's head reads the neck's outputs, which
     * its downsampling average pool reads plain) */
    uint32_t either = LY_LAYOUT_BIT(blocked) | LY_LAYOUT_BIT(LY_LAYOUT_PLAIN);
    out->in[0] = either;
    out->out[0] = either;
    out->in[3] = either;
    out->tied = 1u << 3;
    out->preferred = blocked;
}

static ly_status layouts_8(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    layouts_with(LY_LAYOUT_NCHW8C, out);
    return LY_OK;
}

static ly_status layouts_16(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    layouts_with(LY_LAYOUT_NCHW16C, out);
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

static ly_status prepare_with(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                              void **state, ly_layout blocked, int64_t vl, int64_t rows,
                              void (*run_chunk)(const wino_run *, int64_t, int64_t, float *,
                                                float *),
                              const char *name)
{
    bool known_in = info->in_layout[0] == blocked || info->in_layout[0] == LY_LAYOUT_PLAIN;
    bool known_out = info->out_layout[0] == blocked || info->out_layout[0] == LY_LAYOUT_PLAIN;
    if (!known_in || !known_out || !(info->constant_inputs & (1u << 1)) ||
        (call->in[2] && !(info->constant_inputs & 4u)))
        return LY_E_DECLINED;
    const ly_tensor *x = call->in[0], *w = call->in[1];
    const ly_conv2d_params *p = call->params;
    wino_state *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "conv2d (%s): out of memory", name);
    s->vl = vl;
    s->rows = rows;
    s->run_chunk = run_chunk;
    s->name = name;
    s->plain_in = info->in_layout[0] == LY_LAYOUT_PLAIN;
    s->plain_out = info->out_layout[0] == LY_LAYOUT_PLAIN;
    s->groups = p->groups;
    s->cin = x->shape[1] / s->groups;
    s->h = x->shape[2];
    s->w = x->shape[3];
    s->cout = w->shape[0] / s->groups;
    s->tiles_w = (s->w + TILE - 1) / TILE;
    s->tiles = (s->h + TILE - 1) / TILE * s->tiles_w;
    s->activation = p->activation;
    s->alpha = (float)p->alpha;
    int64_t per_tile = POINTS * (s->cin + s->cout) * (int64_t)sizeof(float);
    int64_t chunk = CHUNK_BYTES / per_tile / rows * rows;
    if (chunk < rows) chunk = rows;
    /* one thread where the GEMMs are a few MFLOP */
    double gemm_flops = 2.0 * POINTS * (double)(s->tiles * s->cin * s->cout * s->groups);
    s->threads = info->threads > 1 && gemm_flops >= 1e6 ? info->threads : 1;
    /* every thread a share when the map is small */
    int64_t share = (s->tiles + s->threads - 1) / s->threads;
    share = (share + rows - 1) / rows * rows;
    s->chunk = chunk < share ? chunk : share;
    size_t u_floats = (size_t)(s->groups * POINTS * s->cin * s->cout);
    s->u = aligned_alloc(64, (u_floats * sizeof(float) + 63) / 64 * 64);
    s->bias = calloc((size_t)(s->groups * s->cout), sizeof *s->bias);
    size_t weight_bytes = weight_floats(s) * sizeof(float);
    s->weights = malloc(weight_bytes ? weight_bytes : 1);
    if (!s->u || !s->bias || !s->weights) {
        wino_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "conv2d (%s): out of memory", name);
    }
    const float *wt = w->data; /* [groups * cout][cin][3][3] */
    for (int64_t g = 0; g < s->groups; g++) {
        float *u = s->u + g * POINTS * s->cin * s->cout;
        for (int64_t o = 0; o < s->cout; o++) {
            int64_t block = o / (2 * vl), lane = o % (2 * vl);
            int64_t width = (block + 1) * 2 * vl <= s->cout ? 2 * vl : vl;
            for (int64_t ci = 0; ci < s->cin; ci++) {
                double t[POINTS];
                transform_weights(wt + ((g * s->cout + o) * s->cin + ci) * 9, t);
                for (int64_t q = 0; q < POINTS; q++)
                    u[q * s->cin * s->cout + block * 2 * vl * s->cin + ci * width + lane] =
                        (float)t[q];
            }
        }
    }
    memcpy(s->weights, wt, weight_bytes);
    s->has_bias = call->in[2] != NULL;
    if (s->has_bias)
        memcpy(s->bias, call->in[2]->data, (size_t)(s->groups * s->cout) * sizeof *s->bias);
    *state = s;
    return LY_OK;
}

static ly_status prepare_8(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                           void **state)
{
    return prepare_with(call, info, state, LY_LAYOUT_NCHW8C, 8, 6, run_chunk_8, "avx2_winograd");
}

static ly_status prepare_16(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                            void **state)
{
    return prepare_with(call, info, state, LY_LAYOUT_NCHW16C, 16, 12, run_chunk_16,
                        "avx512_winograd");
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
        memcpy(dst, s->weights, weight_floats(s) * sizeof(float));
    else if (index == 2 && s->has_bias)
        memcpy(dst, s->bias, (size_t)(s->groups * s->cout) * sizeof(float));
    else
        return ly_set_error(LY_E_INVALID_ARGUMENT, "conv2d (%s): input %d is not held", s->name,
                            index);
    return LY_OK;
}

const ly_kernel_stateful ly_avx2_conv2d_winograd_stateful = {.layouts = layouts_8,
                                                             .prepare = prepare_8,
                                                             .run = wino_run_state,
                                                             .release = wino_release,
                                                             .restore_constant = wino_restore,
                                                             .held_constants = wino_held};

const ly_kernel_stateful ly_avx512_conv2d_winograd_stateful = {.layouts = layouts_16,
                                                               .prepare = prepare_16,
                                                               .run = wino_run_state,
                                                               .release = wino_release,
                                                               .restore_constant = wino_restore,
                                                               .held_constants = wino_held};
