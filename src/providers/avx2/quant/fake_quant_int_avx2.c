/* SPDX-License-Identifier: MIT */
/*
 * AVX2 fake-quant of the integer formats: int8 per channel, int8 affine and the
 * grouped int4/int2. Bit-identical to src/ops/quant/reference.c: the same IEEE
 * operations per element (reciprocal-multiply for int8, division for grouped),
 * the x86 float->int64 conversion reproduced by compares, and the scales reduced
 * with an order-independent max so any thread split gives the same bits.
 */
#include "ops/quant/numerics.h"
#include "ops/quant/reference.h"
#include "providers/avx2/quant/quant_avx2.h"

#include <stdlib.h>

/* ---- fake_quant_int8_per_channel ------------------------------------------------ */

/* The tensor as [outer, channels, inner]. With inner >= 8 a vector stays inside
 * one channel (one broadcast scale); below that the scales are expanded along a
 * row of channels * inner elements and loaded like data. */
typedef struct int8pc_job {
    const float *x, *grad;
    float *out;
    int64_t outer, channels, inner, row; /* row = channels * inner */
    const float *scale, *inv;            /* per channel; NULL: computed per unit (outer == 1) */
    float *scale_row, *inv_row;          /* per row position (inner < 8) */
    int32_t *amax_row;                   /* amax scratch per row position (inner < 8) */
    float *scale_out;                    /* dynamic scales being computed */
    ly_avx2_store store;
} int8pc_job;

LY_AVX2_INLINE __m256 int8pc_apply(__m256 x, __m256 inv, __m256 s, const float *grad_p, int64_t n)
{
    /* The reference adds its zero point 0.0f: that turns a -0 code into +0. */
    __m256 r = _mm256_add_ps(_mm256_setzero_ps(), ly_avx2_rint(_mm256_mul_ps(x, inv)));
    if (grad_p) {
        /* grad * (in range ? 1 : 0): a NaN gradient stays NaN, as in torch. */
        __m256 keep = _mm256_and_ps(ly_avx2_int8_in_range(r), _mm256_set1_ps(1.0f));
        return _mm256_mul_ps(ly_avx2_load_n(grad_p, n), keep);
    }
    return _mm256_mul_ps(ly_avx2_int8_code(r), s);
}

/* The reference's amax order is o, then i within a channel; its NaN (if any) is
 * the last one in that order, i.e. the one with the largest flat index. */
static int32_t int8pc_last_nan_bits(const int8pc_job *job, int64_t c)
{
    for (int64_t o = job->outer - 1; o >= 0; o--) {
        const float *p = job->x + (o * job->channels + c) * job->inner;
        for (int64_t i = job->inner - 1; i >= 0; i--)
            if (p[i] != p[i]) return (int32_t)(ly_nm_f32_bits(p[i]) & 0x7FFFFFFFu);
    }
    return LY_AVX2_INF_BITS + 1;
}

/* The dynamic scale of channel c from the integer max of its |x| bits. */
static float int8pc_scale_of(const int8pc_job *job, int64_t c, int32_t amax_bits)
{
    if (amax_bits > LY_AVX2_INF_BITS) amax_bits = int8pc_last_nan_bits(job, c);
    float amax = ly_avx2_bits_to_float(amax_bits);
    return ly_nm_clamp_min(amax / 127.0f, LY_QUANT_EPS);
}

/* Units are (o, c) rows of `inner` contiguous elements. A dynamic scale with
 * outer == 1 is computed here, unit by unit, while the unit is in L1: the input
 * is read from memory once. Streamed calls have inner % 8 == 0. */
LY_AVX2_INLINE void int8pc_wide(const int8pc_job *job, ly_avx2_store store, bool backward,
                                bool fused, int64_t begin, int64_t end)
{
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin * job->inner);
    for (int64_t unit = begin; unit < end; unit++) {
        int64_t c = unit % job->channels, base = unit * job->inner;
        float scale, inv;
        if (fused) {
            scale = int8pc_scale_of(job, c, ly_avx2_amax_bits(job->x + base, job->inner));
            inv = 1.0f / scale;
        } else {
            scale = job->scale[c];
            inv = job->inv[c];
        }
        const __m256 iv = _mm256_set1_ps(inv), sv = _mm256_set1_ps(scale);
        const float *x = job->x + base, *g = backward ? job->grad + base : NULL;
        float *out = job->out + base;
        int64_t i = 0;
        for (; i + 8 <= job->inner; i += 8)
            ly_avx2_put(&w, store, out + i,
                        int8pc_apply(_mm256_loadu_ps(x + i), iv, sv, backward ? g + i : NULL, 8));
        if (i < job->inner) {
            int64_t n = job->inner - i;
            ly_avx2_store_n(
                out + i, n,
                int8pc_apply(ly_avx2_load_n(x + i, n), iv, sv, backward ? g + i : NULL, n));
        }
    }
    ly_avx2_writer_end(&w, store, NULL, 0, _mm256_setzero_ps());
}

#define INT8PC_WIDE(backward, fused)                                                               \
    do {                                                                                           \
        if (job->store == LY_AVX2_NT)                                                              \
            int8pc_wide(job, LY_AVX2_NT, backward, fused, begin, end);                             \
        else if (job->store == LY_AVX2_NT_SHIFTED)                                                 \
            int8pc_wide(job, LY_AVX2_NT_SHIFTED, backward, fused, begin, end);                     \
        else                                                                                       \
            int8pc_wide(job, LY_AVX2_CACHED, backward, fused, begin, end);                         \
    } while (0)

static void int8pc_wide_range(void *ctx, int64_t begin, int64_t end)
{
    const int8pc_job *job = ctx;
    bool fused = job->scale == NULL;
    if (job->grad) {
        if (fused)
            INT8PC_WIDE(true, true);
        else
            INT8PC_WIDE(true, false);
    } else {
        if (fused)
            INT8PC_WIDE(false, true);
        else
            INT8PC_WIDE(false, false);
    }
}

/* Elements [begin, end) of the flat tensor, scales expanded per row position.
 * Streamed calls have row % 8 == 0. */
LY_AVX2_INLINE void int8pc_narrow(const int8pc_job *job, ly_avx2_store store, int64_t begin,
                                  int64_t end)
{
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin);
    for (int64_t i = begin; i < end;) {
        int64_t pos = i % job->row;
        int64_t stop = i - pos + job->row < end ? i - pos + job->row : end;
        for (int64_t j = i; j < stop; j += 8, pos += 8) {
            int64_t n = stop - j;
            const float *g = job->grad ? job->grad + j : NULL;
            __m256 inv = ly_avx2_load_n(job->inv_row + pos, n);
            __m256 s = ly_avx2_load_n(job->scale_row + pos, n);
            __m256 y = int8pc_apply(ly_avx2_load_n(job->x + j, n), inv, s, g, n);
            if (n >= 8)
                ly_avx2_put(&w, store, job->out + j, y);
            else
                ly_avx2_store_n(job->out + j, n, y);
        }
        i = stop;
    }
    ly_avx2_writer_end(&w, store, NULL, 0, _mm256_setzero_ps());
}

static void int8pc_narrow_range(void *ctx, int64_t begin, int64_t end)
{
    const int8pc_job *job = ctx;
    if (job->store == LY_AVX2_NT)
        int8pc_narrow(job, LY_AVX2_NT, begin, end);
    else if (job->store == LY_AVX2_NT_SHIFTED)
        int8pc_narrow(job, LY_AVX2_NT_SHIFTED, begin, end);
    else
        int8pc_narrow(job, LY_AVX2_CACHED, begin, end);
}

/* Dynamic scales, inner >= 8: channels [begin, end). */
static void int8pc_wide_scale_range(void *ctx, int64_t begin, int64_t end)
{
    const int8pc_job *job = ctx;
    for (int64_t c = begin; c < end; c++) {
        int32_t m = 0;
        for (int64_t o = 0; o < job->outer; o++) {
            int32_t b =
                ly_avx2_amax_bits(job->x + (o * job->channels + c) * job->inner, job->inner);
            m = b > m ? b : m;
        }
        job->scale_out[c] = int8pc_scale_of(job, c, m);
    }
}

/* Dynamic scales, inner < 8: a running max per row position over the outer
 * rows, positions [begin, end). */
static void int8pc_narrow_amax_range(void *ctx, int64_t begin, int64_t end)
{
    const int8pc_job *job = ctx;
    for (int64_t p = begin; p < end; p += 8) {
        int64_t n = end - p;
        __m256i m = _mm256_setzero_si256();
        for (int64_t o = 0; o < job->outer; o++)
            m = _mm256_max_epi32(m, ly_avx2_abs_bits(ly_avx2_load_n(job->x + o * job->row + p, n)));
        int32_t lanes[8];
        _mm256_storeu_si256((__m256i *)lanes, m);
        for (int64_t k = 0; k < 8 && k < n; k++)
            job->amax_row[p + k] = lanes[k];
    }
}

static ly_status int8_per_channel(const ly_kernel_call *call, const ly_tensor *w,
                                  const ly_tensor *given_scale, const float *grad, float *out)
{
    int64_t n = ly_tensor_numel(w);
    if (n == 0) return LY_OK;
    int64_t axis = LY_PARAMS(call, ly_fake_quant_int8_per_channel_params)->axis;
    if (axis < 0) axis += w->ndim;
    ly_axis_view view = ly_quant_axis_view(w, axis);
    int threads = ly_avx2_threads(call, n);
    int8pc_job job = {.x = (const float *)w->data,
                      .grad = grad,
                      .out = out,
                      .outer = view.outer,
                      .channels = view.channels,
                      .inner = view.inner,
                      .row = view.channels * view.inner};
    bool narrow = view.inner < 8;
    /* Streaming needs whole vectors: units (wide) or rows (narrow) of 8k elements. */
    job.store =
        (narrow ? job.row : view.inner) % 8 == 0 ? ly_avx2_store_mode(out, n) : LY_AVX2_CACHED;
    if (!narrow && !given_scale && view.outer == 1) {
        int64_t grain = 8192 / view.inner + 1;
        ly_parallel_for(view.channels, grain, threads, int8pc_wide_range, &job);
        return LY_OK;
    }

    size_t channels = (size_t)view.channels;
    size_t floats = 2 * channels + (narrow ? 2 * (size_t)job.row : 0);
    float *mem = malloc(floats * sizeof(float) + (narrow ? (size_t)job.row * sizeof(int32_t) : 0));
    if (!mem) return ly_set_error(LY_E_NO_MEMORY, "fake_quant_int8_per_channel: out of memory");
    float *scale = mem, *inv = mem + channels;
    if (narrow) {
        job.scale_row = inv + channels;
        job.inv_row = job.scale_row + job.row;
        job.amax_row = (int32_t *)(job.inv_row + job.row);
    }

    if (given_scale) {
        memcpy(scale, given_scale->data, channels * sizeof(float));
    } else {
        job.scale_out = scale;
        if (!narrow) {
            ly_parallel_for(view.channels, 1, threads, int8pc_wide_scale_range, &job);
        } else {
            ly_parallel_for(job.row, 64, threads, int8pc_narrow_amax_range, &job);
            for (int64_t c = 0; c < view.channels; c++) {
                int32_t m = 0;
                for (int64_t i = 0; i < view.inner; i++) {
                    int32_t b = job.amax_row[c * view.inner + i];
                    m = b > m ? b : m;
                }
                scale[c] = int8pc_scale_of(&job, c, m);
            }
        }
    }
    for (size_t c = 0; c < channels; c++)
        inv[c] = 1.0f / scale[c];
    job.scale = scale;
    job.inv = inv;

    if (!narrow) {
        int64_t grain = 8192 / view.inner + 1;
        ly_parallel_for(view.outer * view.channels, grain, threads, int8pc_wide_range, &job);
    } else {
        for (int64_t p = 0; p < job.row; p++) {
            job.scale_row[p] = scale[p / view.inner];
            job.inv_row[p] = inv[p / view.inner];
        }
        ly_parallel_for(n, 64, threads, int8pc_narrow_range, &job);
    }
    free(mem);
    return LY_OK;
}

ly_status ly_avx2_fake_quant_int8_per_channel(const ly_kernel_call *call)
{
    return int8_per_channel(call, call->in[0], call->in[1], NULL, (float *)call->out[0]->data);
}

ly_status ly_avx2_fake_quant_int8_per_channel_backward(const ly_kernel_call *call)
{
    return int8_per_channel(call, call->in[1], call->in[2], (const float *)call->in[0]->data,
                            (float *)call->out[0]->data);
}

/* ---- fake_quant_int8_affine ------------------------------------------------------ */

typedef struct int8aff_job {
    const float *x, *grad;
    float *out;
    float scale, inv, zero_point;
    ly_avx2_store store;
} int8aff_job;

LY_AVX2_INLINE __m256 int8aff_apply(const int8aff_job *job, bool backward, int64_t i, int64_t n)
{
    const __m256 inv = _mm256_set1_ps(job->inv), zp = _mm256_set1_ps(job->zero_point);
    __m256 r = _mm256_add_ps(zp, ly_avx2_rint(_mm256_mul_ps(ly_avx2_load_n(job->x + i, n), inv)));
    if (backward) {
        __m256 keep = _mm256_and_ps(ly_avx2_int8_in_range(r), _mm256_set1_ps(1.0f));
        return _mm256_mul_ps(ly_avx2_load_n(job->grad + i, n), keep);
    }
    /* The reference evaluates (code - zp) * scale in double. For a zero point in
     * [-128, 127] code - zp is exact in fp32 and the double product of two fp32
     * values is exact, so one fp32 multiply rounds the same. The NaN zero point
     * (INT32_MIN) only arises with a NaN or infinite scale, where both give the
     * same NaN or inf. */
    return _mm256_mul_ps(_mm256_sub_ps(ly_avx2_int8_code(r), zp), _mm256_set1_ps(job->scale));
}

LY_AVX2_INLINE void int8aff(const int8aff_job *job, ly_avx2_store store, bool backward,
                            int64_t begin, int64_t end)
{
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->out + begin);
    int64_t i = begin;
    for (; i + 8 <= end; i += 8)
        ly_avx2_put(&w, store, job->out + i, int8aff_apply(job, backward, i, 8));
    __m256 tail = i < end ? int8aff_apply(job, backward, i, end - i) : _mm256_setzero_ps();
    ly_avx2_writer_end(&w, store, job->out + i, end - i, tail);
}

static void int8aff_range(void *ctx, int64_t begin, int64_t end)
{
    const int8aff_job *job = ctx;
    bool backward = job->grad != NULL;
    if (job->store == LY_AVX2_NT) {
        if (backward)
            int8aff(job, LY_AVX2_NT, true, begin, end);
        else
            int8aff(job, LY_AVX2_NT, false, begin, end);
    } else if (job->store == LY_AVX2_NT_SHIFTED) {
        if (backward)
            int8aff(job, LY_AVX2_NT_SHIFTED, true, begin, end);
        else
            int8aff(job, LY_AVX2_NT_SHIFTED, false, begin, end);
    } else {
        if (backward)
            int8aff(job, LY_AVX2_CACHED, true, begin, end);
        else
            int8aff(job, LY_AVX2_CACHED, false, begin, end);
    }
}

static ly_status int8_affine(const ly_kernel_call *call, const ly_tensor *x, float lo, float hi,
                             const float *grad, float *out)
{
    int64_t n = ly_tensor_numel(x);
    if (n == 0) return LY_OK;
    int8aff_job job = {
        .x = (const float *)x->data, .grad = grad, .out = out, .store = ly_avx2_store_mode(out, n)};
    int32_t zp;
    ly_quant_int8_act_qparams(lo, hi, &job.scale, &zp);
    job.inv = 1.0f / job.scale;
    job.zero_point = (float)zp;
    ly_parallel_for(n, 64, ly_avx2_threads(call, n), int8aff_range, &job);
    return LY_OK;
}

ly_status ly_avx2_fake_quant_int8_affine(const ly_kernel_call *call)
{
    return int8_affine(call, call->in[0], ((const float *)call->in[1]->data)[0],
                       ((const float *)call->in[2]->data)[0], NULL, (float *)call->out[0]->data);
}

ly_status ly_avx2_fake_quant_int8_affine_backward(const ly_kernel_call *call)
{
    return int8_affine(call, call->in[1], ((const float *)call->in[2]->data)[0],
                       ((const float *)call->in[3]->data)[0], (const float *)call->in[0]->data,
                       (float *)call->out[0]->data);
}

/* ---- fake_quant_int_grouped ------------------------------------------------------ */

typedef struct grouped_job {
    const float *w, *scale;
    float *out;
    int64_t cols, group, groups;
    float qmin, qmax;
} grouped_job;

/* Units are (row, group) pairs. */
static void grouped_range(void *ctx, int64_t begin, int64_t end)
{
    const grouped_job *job = ctx;
    const __m256 qmin = _mm256_set1_ps(job->qmin), qmax = _mm256_set1_ps(job->qmax);
    for (int64_t unit = begin; unit < end; unit++) {
        int64_t r = unit / job->groups, gi = unit % job->groups;
        int64_t c0 = gi * job->group;
        int64_t len = job->cols - c0 < job->group ? job->cols - c0 : job->group;
        const float *w = job->w + r * job->cols + c0;
        float *out = job->out + r * job->cols + c0;
        float s;
        if (job->scale) {
            s = ly_nm_clamp_min(job->scale[unit], LY_QUANT_EPS);
        } else {
            float amax = ly_avx2_bits_to_float(ly_avx2_amax_exact_bits(w, len));
            s = ly_nm_clamp_min(ly_nm_clamp_min(amax / job->qmax, LY_QUANT_EPS), LY_QUANT_EPS);
        }
        const __m256 sv = _mm256_set1_ps(s);
        for (int64_t i = 0; i < len; i += 8) {
            int64_t n = len - i;
            __m256 v = ly_avx2_load_n(w + i, n);
            __m256 q = ly_avx2_rint(_mm256_div_ps(v, sv));
            q = _mm256_min_ps(qmax, _mm256_max_ps(qmin, q));
            q = ly_avx2_nan_first(_mm256_mul_ps(sv, q), sv);
            ly_avx2_store_n(out + i, n, ly_avx2_ste(v, q));
        }
    }
}

ly_status ly_avx2_fake_quant_int_grouped(const ly_kernel_call *call)
{
    const ly_tensor *w = call->in[0];
    int64_t rows = w->shape[0], cols = w->shape[1];
    if (rows == 0 || cols == 0) return LY_OK;
    const ly_fake_quant_int_grouped_params *p = call->params;
    int64_t bits = p->bits, g = p->group_size;
    grouped_job job = {.w = (const float *)w->data,
                       .scale = call->in[1] ? (const float *)call->in[1]->data : NULL,
                       .out = (float *)call->out[0]->data,
                       .cols = cols,
                       .group = g,
                       .groups = (cols + g - 1) / g,
                       .qmin = (float)(-(1 << (bits - 1))),
                       .qmax = (float)((1 << (bits - 1)) - 1)};
    int64_t grain = 8192 / g + 1;
    ly_parallel_for(rows * job.groups, grain, ly_avx2_threads(call, rows * cols), grouped_range,
                    &job);
    return LY_OK;
}

/* ---- identity gradients ------------------------------------------------------------ */

typedef struct copy_job {
    const float *src;
    float *dst;
    ly_avx2_store store;
} copy_job;

LY_AVX2_INLINE void stream_copy(const copy_job *job, ly_avx2_store store, int64_t begin,
                                int64_t end)
{
    ly_avx2_writer w;
    ly_avx2_writer_begin(&w, store, job->dst + begin);
    int64_t i = begin;
    for (; i + 32 <= end; i += 32) {
        __m256 a = _mm256_loadu_ps(job->src + i), b = _mm256_loadu_ps(job->src + i + 8);
        __m256 c = _mm256_loadu_ps(job->src + i + 16), d = _mm256_loadu_ps(job->src + i + 24);
        ly_avx2_put(&w, store, job->dst + i, a);
        ly_avx2_put(&w, store, job->dst + i + 8, b);
        ly_avx2_put(&w, store, job->dst + i + 16, c);
        ly_avx2_put(&w, store, job->dst + i + 24, d);
    }
    for (; i + 8 <= end; i += 8)
        ly_avx2_put(&w, store, job->dst + i, _mm256_loadu_ps(job->src + i));
    ly_avx2_writer_end(&w, store, job->dst + i, end - i, ly_avx2_load_n(job->src + i, end - i));
}

static void copy_range(void *ctx, int64_t begin, int64_t end)
{
    const copy_job *job = ctx;
    if (job->store == LY_AVX2_NT)
        stream_copy(job, LY_AVX2_NT, begin, end);
    else if (job->store == LY_AVX2_NT_SHIFTED)
        stream_copy(job, LY_AVX2_NT_SHIFTED, begin, end);
    else
        memmove(job->dst + begin, job->src + begin, (size_t)(end - begin) * sizeof(float));
}

ly_status ly_avx2_copy_grad(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    copy_job job = {(const float *)call->in[0]->data, (float *)call->out[0]->data, LY_AVX2_CACHED};
    if (n == 0 || job.src == job.dst) return LY_OK;
    /* Streaming only between buffers that do not overlap (memmove handles the rest). */
    uintptr_t src = (uintptr_t)job.src, dst = (uintptr_t)job.dst,
              bytes = (uintptr_t)n * sizeof(float);
    if (src + bytes <= dst || dst + bytes <= src) job.store = ly_avx2_store_mode(job.dst, n);
    ly_parallel_for(n, 4096, ly_avx2_threads(call, n), copy_range, &job);
    return LY_OK;
}

ly_status ly_avx2_fake_quant_int_grouped_backward(const ly_kernel_call *call)
{
    return ly_avx2_copy_grad(call);
}
