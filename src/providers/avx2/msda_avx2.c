/* SPDX-License-Identifier: MIT */
/*
 * ms_deform_attn, AVX2+FMA, multi-threaded: bit-identical to the reference.
 *
 * Vectors run across channels only, so every output element sees the
 * reference's operations in the reference's order: per (b, q, h, c) the
 * accumulation over (level, point) is the same chain of fmaf, and a vector
 * lane computes exactly what the scalar code computes for its channel. The
 * coordinates of a sample are computed once per (b, q, h, point): eight
 * samples at a time with the reference's IEEE steps lane by lane (prep8; a
 * vroundps floor is floorf, a vfmadd is fmaf), or, for more than 256 points
 * per row or offsets beyond 32 bits, with the reference's own inline code
 * (msda_internal.h). Either way the weights and corners are the reference's.
 *
 * Forward: threads split the rows (b, q, h). Backward: the value gradient of
 * one (b, h) accumulates over every query in order, so threads split (b, h),
 * never q. Either way the bits do not depend on the thread count.
 */
#include "core/core.h"
#include "ops/msda/msda_internal.h"

#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* Samples prepared at a time (stack-resident). */
#define SOA 256
/* Channels whose accumulators stay in registers across a chunk. */
#define BLOCK 32
/* Below this much work (samples x channels) a call stays on the calling thread. */
#define PARALLEL_MIN_WORK ((int64_t)1 << 17)

/* Invalid corners read from here; its 32 zeros cover one channel block. */
static const float zeros[BLOCK] __attribute__((aligned(32)));

static __m256i lane_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

INLINE __m256 load(const float *p, bool tail, __m256i mask)
{
    return tail ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

INLINE void store(float *p, bool tail, __m256i mask, __m256 v)
{
    if (tail)
        _mm256_maskstore_ps(p, mask, v);
    else
        _mm256_storeu_ps(p, v);
}

INLINE __m256 canon(__m256 v)
{
    __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)LY_MSDA_NAN_BITS));
    return _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* ((p0+p4) + (p2+p6)) + ((p1+p5) + (p3+p7)), as ly_msda_tree8. */
static float tree8(__m256 v)
{
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps(r, r, 1)));
}

static int threads_for(const ly_kernel_call *call, int64_t work)
{
    return work < PARALLEL_MIN_WORK ? 1 : ly_threads_resolve(call->threads);
}

/* ---- Forward ------------------------------------------------------------------------ */

/* Prepared samples, structure of arrays: corner weights and the element
 * offsets of the corners' channel 0 from the row's (b, h) base, -1 for a corner
 * outside its level (discrete mode: off[0] only). */
typedef struct soa {
    float w[4][SOA + 8];
    int64_t off[4][SOA + 8];
    float f[4][SOA + 8];                    /* lx, ly, hx, hy (the backward's derivatives) */
    float size_w[SOA + 8], size_h[SOA + 8]; /* of the sample's level (scalar preparation) */
} soa;

/* Per-point constants of the level of point k, for k in [0, K + 8) (periodic
 * in K), so that eight consecutive samples of consecutive rows read theirs
 * with one unaligned load. */
typedef struct tables {
    float half_w[SOA + 8], half_h[SOA + 8], max_col[SOA + 8], max_row[SOA + 8];
    float max_col1[SOA + 8], max_row1[SOA + 8], size_w[SOA + 8], size_h[SOA + 8], xcap[SOA + 8];
    int32_t w[SOA + 8], start[SOA + 8], whc[SOA + 8], xlast[SOA + 8], hm1[SOA + 8];
    int32_t hc;
} tables;

typedef struct fwd_job {
    const ly_msda_geom *g;
    float *out;
    const tables *t; /* NULL: the scalar preparation */
} fwd_job;

/* Channels [cc, cc + 8*nv) (the last vector with `tail` lanes only) of one row
 * over samples i0..i0+n of s. `first`: the accumulators start at +0, else from
 * `acc` in memory; `last`: NaN is canonicalised on the way out. */
INLINE void fwd_block(const soa *s, int64_t i0, int64_t n, const float *attn, const float *vbh,
                      int64_t cc, float *acc_mem, int nv, bool tail, __m256i mask, bool first,
                      bool last, bool discrete)
{
    __m256 acc[4];
    for (int j = 0; j < nv; j++)
        acc[j] = first ? _mm256_setzero_ps() : load(acc_mem + 8 * j, tail && j == nv - 1, mask);
    for (int64_t k = 0; k < n; k++) {
        int64_t i = i0 + k;
        __m256 a = _mm256_set1_ps(attn[k]);
        if (discrete) {
            const float *p0 = vbh + s->off[0][i] + cc;
            for (int j = 0; j < nv; j++)
                acc[j] = _mm256_fmadd_ps(a, load(p0 + 8 * j, tail && j == nv - 1, mask), acc[j]);
            continue;
        }
        const float *p[4];
        __m256 w[4];
        for (int c = 0; c < 4; c++) {
            int64_t o = s->off[c][i];
            p[c] = o >= 0 ? vbh + o + cc : zeros;
            w[c] = _mm256_set1_ps(s->w[c][i]);
        }
        for (int j = 0; j < nv; j++) {
            bool tl = tail && j == nv - 1;
            __m256 val = _mm256_mul_ps(load(p[0] + 8 * j, tl, mask), w[0]);
            val = _mm256_fmadd_ps(load(p[1] + 8 * j, tl, mask), w[1], val);
            val = _mm256_fmadd_ps(load(p[2] + 8 * j, tl, mask), w[2], val);
            val = _mm256_fmadd_ps(load(p[3] + 8 * j, tl, mask), w[3], val);
            acc[j] = _mm256_fmadd_ps(a, val, acc[j]);
        }
    }
    for (int j = 0; j < nv; j++)
        store(acc_mem + 8 * j, tail && j == nv - 1, mask, last ? canon(acc[j]) : acc[j]);
}

/* One row over samples i0..i0+n, every channel block; the vector count and
 * tail of each block known to the compiler. */
static void fwd_row(const soa *s, int64_t i0, int64_t n, const float *attn, const float *vbh,
                    int64_t C, float *out, bool first, bool last, bool discrete)
{
    for (int64_t cc = 0; cc < C; cc += BLOCK) {
        int64_t width = C - cc < BLOCK ? C - cc : BLOCK;
        int nv = (int)((width + 7) / 8);
        bool tail = width % 8 != 0;
        __m256i mask = lane_mask(width % 8);
        float *acc = out + cc;
#define FWD_CASE(NV, TAIL)                                                                         \
    do {                                                                                           \
        if (discrete)                                                                              \
            fwd_block(s, i0, n, attn, vbh, cc, acc, NV, TAIL, mask, first, last, true);            \
        else                                                                                       \
            fwd_block(s, i0, n, attn, vbh, cc, acc, NV, TAIL, mask, first, last, false);           \
    } while (0)
        switch (nv * 2 + (tail ? 1 : 0)) {
        case 2:
            FWD_CASE(1, false);
            break;
        case 3:
            FWD_CASE(1, true);
            break;
        case 4:
            FWD_CASE(2, false);
            break;
        case 5:
            FWD_CASE(2, true);
            break;
        case 6:
            FWD_CASE(3, false);
            break;
        case 7:
            FWD_CASE(3, true);
            break;
        case 8:
            FWD_CASE(4, false);
            break;
        default:
            FWD_CASE(4, true);
            break;
        }
#undef FWD_CASE
    }
}

/* Eight samples at once (n of them real, loc pointing at the first), k0 the
 * point index of the first: the reference's scalar steps lane by lane. */
static void prep8(const tables *t, const float *loc, int n, int64_t k0, bool discrete, soa *s,
                  int64_t i)
{
    __m256 xy0, xy1;
    if (n == 8) {
        xy0 = _mm256_loadu_ps(loc);
        xy1 = _mm256_loadu_ps(loc + 8);
    } else {
        xy0 = _mm256_maskload_ps(loc, lane_mask(2 * n));
        xy1 = _mm256_maskload_ps(loc + 8, lane_mask(2 * n - 8));
    }
    /* (x, y) pairs -> x[8], y[8] */
    __m256 X = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(xy0, xy1, _MM_SHUFFLE(2, 0, 2, 0))),
        _MM_SHUFFLE(3, 1, 2, 0)));
    __m256 Y = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(xy0, xy1, _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0)));
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256i W = _mm256_loadu_si256((const __m256i *)(t->w + k0));
    __m256i start = _mm256_loadu_si256((const __m256i *)(t->start + k0));
    __m256i hc = _mm256_set1_epi32(t->hc);
    if (discrete) {
        __m256 sw = _mm256_loadu_ps(t->size_w + k0), sh = _mm256_loadu_ps(t->size_h + k0);
        __m256 tx = _mm256_add_ps(_mm256_mul_ps(X, sw), _mm256_set1_ps(0.5f));
        __m256 ty = _mm256_add_ps(_mm256_mul_ps(Y, sh), _mm256_set1_ps(0.5f));
        __m256i ix = _mm256_and_si256(_mm256_cvttps_epi32(tx),
                                      _mm256_castps_si256(_mm256_cmp_ps(tx, one, _CMP_GE_OQ)));
        __m256i iy = _mm256_and_si256(_mm256_cvttps_epi32(ty),
                                      _mm256_castps_si256(_mm256_cmp_ps(ty, one, _CMP_GE_OQ)));
        ix = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(ix),
            _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(t->xlast + k0))),
            _mm256_cmp_ps(tx, _mm256_loadu_ps(t->xcap + k0), _CMP_GE_OQ)));
        iy = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(iy),
            _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(t->hm1 + k0))),
            _mm256_cmp_ps(ty, sh, _CMP_GE_OQ)));
        __m256i off = _mm256_mullo_epi32(
            _mm256_add_epi32(start, _mm256_add_epi32(_mm256_mullo_epi32(iy, W), ix)), hc);
        _mm256_storeu_si256((__m256i *)(s->off[0] + i),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(off)));
        _mm256_storeu_si256((__m256i *)(s->off[0] + i + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(off, 1)));
        return;
    }
    __m256 gx = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), X), one);
    __m256 gy = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), Y), one);
    __m256 x = _mm256_fmadd_ps(_mm256_add_ps(gx, one), _mm256_loadu_ps(t->half_w + k0),
                               _mm256_set1_ps(-0.5f));
    __m256 y = _mm256_fmadd_ps(_mm256_add_ps(gy, one), _mm256_loadu_ps(t->half_h + k0),
                               _mm256_set1_ps(-0.5f));
    __m256 x0 = _mm256_floor_ps(x), y0 = _mm256_floor_ps(y);
    __m256 lx = _mm256_sub_ps(x, x0), ly = _mm256_sub_ps(y, y0);
    __m256 hx = _mm256_sub_ps(one, lx), hy = _mm256_sub_ps(one, ly);
    _mm256_storeu_ps(s->f[0] + i, lx);
    _mm256_storeu_ps(s->f[1] + i, ly);
    _mm256_storeu_ps(s->f[2] + i, hx);
    _mm256_storeu_ps(s->f[3] + i, hy);
    _mm256_storeu_ps(s->w[0] + i, _mm256_mul_ps(hy, hx));
    _mm256_storeu_ps(s->w[1] + i, _mm256_mul_ps(hy, lx));
    _mm256_storeu_ps(s->w[2] + i, _mm256_mul_ps(ly, hx));
    _mm256_storeu_ps(s->w[3] + i, _mm256_mul_ps(ly, lx));
    const __m256 zero = _mm256_setzero_ps(), m_one = _mm256_set1_ps(-1.0f);
    __m256 maxc = _mm256_loadu_ps(t->max_col + k0), maxr = _mm256_loadu_ps(t->max_row + k0);
    __m256 c0 =
        _mm256_and_ps(_mm256_cmp_ps(x0, zero, _CMP_GE_OQ), _mm256_cmp_ps(x0, maxc, _CMP_LE_OQ));
    __m256 c1 = _mm256_and_ps(_mm256_cmp_ps(x0, m_one, _CMP_GE_OQ),
                              _mm256_cmp_ps(x0, _mm256_loadu_ps(t->max_col1 + k0), _CMP_LE_OQ));
    __m256 r0 =
        _mm256_and_ps(_mm256_cmp_ps(y0, zero, _CMP_GE_OQ), _mm256_cmp_ps(y0, maxr, _CMP_LE_OQ));
    __m256 r1 = _mm256_and_ps(_mm256_cmp_ps(y0, m_one, _CMP_GE_OQ),
                              _mm256_cmp_ps(y0, _mm256_loadu_ps(t->max_row1 + k0), _CMP_LE_OQ));
    /* Integer corners only matter where a corner is inside; elsewhere (NaN,
     * 1e30) they are clamped first so the conversion stays in range. */
    __m256i ix = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(x0, m_one), maxc));
    __m256i iy = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(y0, m_one), maxr));
    __m256i o0 = _mm256_mullo_epi32(
        _mm256_add_epi32(start, _mm256_add_epi32(_mm256_mullo_epi32(iy, W), ix)), hc);
    __m256i o2 = _mm256_add_epi32(o0, _mm256_loadu_si256((const __m256i *)(t->whc + k0)));
    __m256i o[4] = {o0, _mm256_add_epi32(o0, hc), o2, _mm256_add_epi32(o2, hc)};
    __m256 valid[4] = {_mm256_and_ps(r0, c0), _mm256_and_ps(r0, c1), _mm256_and_ps(r1, c0),
                       _mm256_and_ps(r1, c1)};
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)),
                                                         _mm256_castsi256_ps(o[c]), valid[c]));
        _mm256_storeu_si256((__m256i *)(s->off[c] + i),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)));
        _mm256_storeu_si256((__m256i *)(s->off[c] + i + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)));
    }
}

/* Rows [r0, r1) with K <= SOA and 32-bit offsets: the samples of as many whole
 * rows as fit in one soa are prepared eight at a time, then each row runs. */
static void fwd_range_vector(const fwd_job *job, int64_t r0, int64_t r1)
{
    const ly_msda_geom *g = job->g;
    const int64_t C = g->C, K = g->K, LqH = g->Lq * g->H, per = SOA / K;
    const bool discrete = g->mode == LY_MSDA_DISCRETE;
    soa s;
    for (int64_t row0 = r0; row0 < r1; row0 += per) {
        int64_t rows = r1 - row0 < per ? r1 - row0 : per, n = rows * K;
        const float *loc = g->loc + row0 * K * 2;
        for (int64_t i = 0; i < n; i += 8)
            prep8(job->t, loc + 2 * i, n - i < 8 ? (int)(n - i) : 8, i % K, discrete, &s, i);
        for (int64_t j = 0; j < rows; j++) {
            int64_t row = row0 + j, b = row / LqH, h = row % g->H;
            const float *vbh = g->value + b * g->len_in * g->H * C + h * C;
            fwd_row(&s, j * K, K, g->attn + row * K, vbh, C, job->out + row * C, true, true,
                    discrete);
        }
    }
}

/* Samples k0..k0+n of a row (head h), with the reference's scalar code, into
 * s[0..n); (*l, *p) is the level and point of sample k0 and moves along. */
static void prep_scalar(const ly_msda_geom *g, int64_t h, const float *loc, int64_t k0, int64_t n,
                        int64_t *l, int64_t *p, soa *s)
{
    const int64_t hC = h * g->C;
    for (int64_t i = 0; i < n; i++, (*p)++) {
        while (*p >= g->lvl_points[*l]) {
            (*l)++;
            *p = 0;
        }
        int64_t k = k0 + i;
        s->size_w[i] = g->size_w[*l];
        s->size_h[i] = g->size_h[*l];
        if (g->mode == LY_MSDA_DISCRETE) {
            s->off[0][i] = ly_msda_discrete_offset(g, *l, h, loc[2 * k], loc[2 * k + 1]) - hC;
            continue;
        }
        ly_msda_sample smp;
        ly_msda_bilinear(g, *l, h, loc[2 * k], loc[2 * k + 1], &smp);
        for (int c = 0; c < 4; c++) {
            s->off[c][i] = smp.off[c] >= 0 ? smp.off[c] - hC : -1;
            s->w[c][i] = smp.w[c];
        }
        s->f[0][i] = smp.lx;
        s->f[1][i] = smp.ly;
        s->f[2][i] = smp.hx;
        s->f[3][i] = smp.hy;
    }
}

/* Any K, any offsets: each row's samples prepared SOA at a time. */
static void fwd_range_scalar(const fwd_job *job, int64_t r0, int64_t r1)
{
    const ly_msda_geom *g = job->g;
    const int64_t C = g->C, K = g->K, LqH = g->Lq * g->H;
    const bool discrete = g->mode == LY_MSDA_DISCRETE;
    soa s;
    for (int64_t row = r0; row < r1; row++) {
        int64_t b = row / LqH, h = row % g->H;
        const float *vbh = g->value + b * g->len_in * g->H * C + h * C;
        const float *loc = g->loc + row * K * 2, *attn = g->attn + row * K;
        int64_t l = 0, p = 0;
        for (int64_t k0 = 0; k0 < K; k0 += SOA) {
            int64_t n = K - k0 < SOA ? K - k0 : SOA;
            prep_scalar(g, h, loc, k0, n, &l, &p, &s);
            fwd_row(&s, 0, n, attn + k0, vbh, C, job->out + row * C, k0 == 0, k0 + n == K,
                    discrete);
        }
    }
}

static void fwd_range(void *ctx, int64_t r0, int64_t r1)
{
    const fwd_job *job = ctx;
    const ly_msda_geom *g = job->g;
    if (g->K == 0) {
        memset(job->out + r0 * g->C, 0, (size_t)((r1 - r0) * g->C) * sizeof(float));
        return;
    }
    if (job->t)
        fwd_range_vector(job, r0, r1);
    else
        fwd_range_scalar(job, r0, r1);
}

/* The vector preparation's tables, when its 32-bit offsets cannot overflow
 * (corners one row and column past a level included) and K fits one soa. */
static bool tables_init(const ly_msda_geom *g, tables *t)
{
    if (g->K < 1 || g->K > SOA) return false;
    int64_t max_w = 0;
    for (int64_t l = 0; l < g->L; l++)
        max_w = g->lvl_w[l] > max_w ? g->lvl_w[l] : max_w;
    int64_t hc = g->H * g->C;
    if (hc > INT32_MAX || (g->len_in + 2 * max_w + 2) > INT32_MAX / (hc > 0 ? hc : 1)) return false;
    int64_t level[SOA];
    for (int64_t l = 0, k = 0; l < g->L; l++)
        for (int64_t p = 0; p < g->lvl_points[l]; p++)
            level[k++] = l;
    for (int64_t i = 0; i < g->K + 8; i++) {
        int64_t l = level[i % g->K];
        t->half_w[i] = g->half_w[l];
        t->half_h[i] = g->half_h[l];
        t->max_col[i] = g->max_col[l];
        t->max_row[i] = g->max_row[l];
        t->max_col1[i] = g->max_col[l] - 1.0f;
        t->max_row1[i] = g->max_row[l] - 1.0f;
        t->size_w[i] = g->size_w[l];
        t->size_h[i] = g->size_h[l];
        t->w[i] = (int32_t)g->lvl_w[l];
        t->start[i] = (int32_t)g->lvl_start[l];
        t->whc[i] = (int32_t)(g->lvl_w[l] * hc);
        int64_t xlast = ly_msda_discrete_last_col(g, l);
        t->xlast[i] = (int32_t)xlast;
        t->xcap[i] = (float)(xlast + 1);
        t->hm1[i] = (int32_t)(g->lvl_h[l] - 1);
    }
    t->hc = (int32_t)hc;
    return true;
}

ly_status ly_msda_avx2_forward(const ly_kernel_call *call)
{
    ly_msda_geom g;
    ly_msda_geom_init(call, false, &g);
    tables t;
    fwd_job job = {&g, call->out[0]->data, tables_init(&g, &t) ? &t : NULL};
    int64_t rows = g.B * g.Lq * g.H;
    int64_t work = rows * (g.K > 0 ? g.K : 1) * (g.C > 0 ? g.C : 1);
    ly_parallel_for(rows, 16, threads_for(call, work), fwd_range, &job);
    return LY_OK;
}

/* ---- Backward ----------------------------------------------------------------------- */

typedef struct bwd_job {
    const ly_msda_geom *g;
    float *grad_value, *grad_loc, *grad_attn;
    const tables *t; /* NULL: the scalar preparation */
} bwd_job;

/* The gradients of one bilinear sample, channels [0, C): the value gradient
 * in place, and the lane partial sums of the three channel reductions. */
INLINE void bwd_vector(const float *const vp[4], float *const gp[4], const float *go, int64_t c,
                       bool tail, __m256i mask, __m256 a, const __m256 w[4], __m256 lx, __m256 ly,
                       __m256 hx, __m256 hy, __m256 *pa, __m256 *px, __m256 *py)
{
    /* Corners outside the level (NULL) read zeros. */
    __m256 v0 = load(vp[0] ? vp[0] + c : zeros, tail, mask),
           v1 = load(vp[1] ? vp[1] + c : zeros, tail, mask),
           v2 = load(vp[2] ? vp[2] + c : zeros, tail, mask),
           v3 = load(vp[3] ? vp[3] + c : zeros, tail, mask);
    __m256 g = load(go + c, tail, mask);
    __m256 val = _mm256_mul_ps(v0, w[0]);
    val = _mm256_fmadd_ps(v1, w[1], val);
    val = _mm256_fmadd_ps(v2, w[2], val);
    val = _mm256_fmadd_ps(v3, w[3], val);
    __m256 dx =
        _mm256_fmadd_ps(ly, _mm256_sub_ps(v3, v2), _mm256_mul_ps(hy, _mm256_sub_ps(v1, v0)));
    __m256 dy =
        _mm256_fmadd_ps(lx, _mm256_sub_ps(v3, v1), _mm256_mul_ps(hx, _mm256_sub_ps(v2, v0)));
    __m256 na = _mm256_fmadd_ps(g, val, *pa), nx = _mm256_fmadd_ps(g, dx, *px),
           ny = _mm256_fmadd_ps(g, dy, *py);
    if (tail) {
        /* Lanes past C are not channels: their partial sums stay as they are. */
        __m256 m = _mm256_castsi256_ps(mask);
        na = _mm256_blendv_ps(*pa, na, m);
        nx = _mm256_blendv_ps(*px, nx, m);
        ny = _mm256_blendv_ps(*py, ny, m);
    }
    *pa = na;
    *px = nx;
    *py = ny;
    __m256 tg = _mm256_mul_ps(g, a);
    for (int i = 0; i < 4; i++)
        if (gp[i])
            store(gp[i] + c, tail, mask, _mm256_fmadd_ps(w[i], tg, load(gp[i] + c, tail, mask)));
}

INLINE void bwd_vector_discrete(const float *vp, float *gp, const float *go, int64_t c, bool tail,
                                __m256i mask, __m256 a, __m256 *pa)
{
    __m256 v = load(vp + c, tail, mask), g = load(go + c, tail, mask);
    __m256 na = _mm256_fmadd_ps(g, v, *pa);
    *pa = tail ? _mm256_blendv_ps(*pa, na, _mm256_castsi256_ps(mask)) : na;
    store(gp + c, tail, mask, _mm256_add_ps(load(gp + c, tail, mask), _mm256_mul_ps(g, a)));
}

/* Samples s[0..n) of one row: the value gradient in place, the weight and
 * location gradients out. sw, sh: the level sizes of each sample. */
static void bwd_samples(const soa *s, int64_t n, const float *sw, const float *sh, bool discrete,
                        int64_t C, const float *vbh, float *gvbh, const float *go,
                        const float *attn, float *gl, float *ga)
{
    const int64_t full = C / 8 * 8, rest = C - full;
    const __m256i mask = lane_mask(rest);
    for (int64_t i = 0; i < n; i++) {
        __m256 a = _mm256_set1_ps(attn[i]);
        __m256 pa = _mm256_setzero_ps(), px = pa, py = pa;
        if (discrete) {
            int64_t off = s->off[0][i];
            int64_t c = 0;
            for (; c < full; c += 8)
                bwd_vector_discrete(vbh + off, gvbh + off, go, c, false, mask, a, &pa);
            if (rest) bwd_vector_discrete(vbh + off, gvbh + off, go, c, true, mask, a, &pa);
            ga[i] = ly_msda_canon(tree8(pa));
            gl[2 * i] = 0.0f;
            gl[2 * i + 1] = 0.0f;
            continue;
        }
        const float *vp[4];
        float *gp[4];
        __m256 w[4];
        for (int c = 0; c < 4; c++) {
            int64_t o = s->off[c][i];
            vp[c] = o >= 0 ? vbh + o : NULL;
            gp[c] = o >= 0 ? gvbh + o : NULL;
            w[c] = _mm256_set1_ps(s->w[c][i]);
        }
        __m256 lx = _mm256_set1_ps(s->f[0][i]), ly = _mm256_set1_ps(s->f[1][i]),
               hx = _mm256_set1_ps(s->f[2][i]), hy = _mm256_set1_ps(s->f[3][i]);
        int64_t c = 0;
        for (; c < full; c += 8)
            bwd_vector(vp, gp, go, c, false, mask, a, w, lx, ly, hx, hy, &pa, &px, &py);
        if (rest) bwd_vector(vp, gp, go, c, true, mask, a, w, lx, ly, hx, hy, &pa, &px, &py);
        ga[i] = ly_msda_canon(tree8(pa));
        gl[2 * i] = ly_msda_canon(tree8(px) * attn[i] * sw[i]);
        gl[2 * i + 1] = ly_msda_canon(tree8(py) * attn[i] * sh[i]);
    }
}

static void bwd_slice(const bwd_job *job, int64_t b, int64_t h)
{
    const ly_msda_geom *g = job->g;
    const int64_t C = g->C, K = g->K, HC = g->H * C;
    const int64_t full = C / 8 * 8, rest = C - full;
    const __m256i mask = lane_mask(rest);
    const bool discrete = g->mode == LY_MSDA_DISCRETE;
    const float *vbh = g->value + b * g->len_in * HC + h * C;
    float *gvbh = job->grad_value + b * g->len_in * HC + h * C;
    for (int64_t pos = 0; pos < g->len_in; pos++)
        memset(gvbh + pos * HC, 0, (size_t)C * sizeof(float));
    soa s;
    for (int64_t q = 0; q < g->Lq; q++) {
        int64_t row = (b * g->Lq + q) * g->H + h;
        const float *go = g->grad_out + row * C;
        const float *loc = g->loc + row * K * 2, *attn = g->attn + row * K;
        float *gl = job->grad_loc + row * K * 2, *ga = job->grad_attn + row * K;
        if (job->t) {
            for (int64_t i = 0; i < K; i += 8)
                prep8(job->t, loc + 2 * i, K - i < 8 ? (int)(K - i) : 8, i, discrete, &s, i);
            bwd_samples(&s, K, job->t->size_w, job->t->size_h, discrete, C, vbh, gvbh, go, attn, gl,
                        ga);
            continue;
        }
        int64_t l = 0, p = 0;
        for (int64_t k0 = 0; k0 < K; k0 += SOA) {
            int64_t n = K - k0 < SOA ? K - k0 : SOA;
            prep_scalar(g, h, loc, k0, n, &l, &p, &s);
            bwd_samples(&s, n, s.size_w, s.size_h, discrete, C, vbh, gvbh, go, attn + k0,
                        gl + 2 * k0, ga + k0);
        }
    }
    for (int64_t pos = 0; pos < g->len_in; pos++) {
        float *p = gvbh + pos * HC;
        int64_t c = 0;
        for (; c < full; c += 8)
            _mm256_storeu_ps(p + c, canon(_mm256_loadu_ps(p + c)));
        if (rest) _mm256_maskstore_ps(p + c, mask, canon(_mm256_maskload_ps(p + c, mask)));
    }
}

static void bwd_range(void *ctx, int64_t t0, int64_t t1)
{
    const bwd_job *job = ctx;
    for (int64_t t = t0; t < t1; t++)
        bwd_slice(job, t / job->g->H, t % job->g->H);
}

ly_status ly_msda_avx2_backward(const ly_kernel_call *call)
{
    ly_msda_geom g;
    ly_msda_geom_init(call, true, &g);
    tables t;
    bwd_job job = {&g, call->out[0]->data, call->out[1]->data, call->out[2]->data,
                   tables_init(&g, &t) ? &t : NULL};
    int64_t tasks = g.B * g.H;
    int64_t work = g.B * g.Lq * g.H * (g.K > 0 ? g.K : 1) * (g.C > 0 ? g.C : 1);
    ly_parallel_for(tasks, 1, threads_for(call, work), bwd_range, &job);
    return LY_OK;
}
