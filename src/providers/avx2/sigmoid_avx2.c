/* SPDX-License-Identifier: MIT */
/*
 * silu and sigmoid: the convolutions' activation on sixteen lanes (AVX-512,
 * ly_activate16) or eight (AVX2+FMA, ly_activate8), two vectors a step: exp
 * of -|x| as exp_avx2.h's, 1 / (1 + t) a 14- or 12-bit reciprocal and a
 * Newton step. Within the slots' tolerance of the reference
 * (x / (1 + expf(-x))), not bit-identical. oneDNN's eltwise took 0.48-0.56
 * ns an element and ~2.6 us a call to make its primitive, memory objects and
 * stream (the AVX-512 kernel: 0.32 ns, ~0.5 us); the int8 LibreYOLO9t runs
 * 42 of these (RepConvN's SiLU after its two integer branches) and the float
 * models their sigmoid scores.
 */
#include "core/core.h"
#include "providers/avx2/activate.h"
#include "providers/avx2/exp_avx2.h"
#include "providers/builtin.h"

typedef struct activation_job {
    const float *x;
    float *y;
    int64_t activation;
} activation_job;

LY_AVX512 static void activation_range16(void *ctx, int64_t begin, int64_t end)
{
    const activation_job *j = ctx;
    int64_t i = begin;
    for (; i + 32 <= end; i += 32) {
        __m512 y0 = ly_activate16(_mm512_loadu_ps(j->x + i), j->activation, 0.0f);
        __m512 y1 = ly_activate16(_mm512_loadu_ps(j->x + i + 16), j->activation, 0.0f);
        _mm512_storeu_ps(j->y + i, y0);
        _mm512_storeu_ps(j->y + i + 16, y1);
    }
    for (; i < end; i += 16) {
        __mmask16 live = end - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (end - i)) - 1u);
        __m512 y = ly_activate16(_mm512_maskz_loadu_ps(live, j->x + i), j->activation, 0.0f);
        _mm512_mask_storeu_ps(j->y + i, live, y);
    }
}

static void activation_range8(void *ctx, int64_t begin, int64_t end)
{
    const activation_job *j = ctx;
    int64_t i = begin;
    for (; i + 16 <= end; i += 16) {
        __m256 y0 = ly_activate8(_mm256_loadu_ps(j->x + i), j->activation, 0.0f);
        __m256 y1 = ly_activate8(_mm256_loadu_ps(j->x + i + 8), j->activation, 0.0f);
        _mm256_storeu_ps(j->y + i, y0);
        _mm256_storeu_ps(j->y + i + 8, y1);
    }
    for (; i < end; i += 8) {
        __m256i live = _mm256_castps_si256(tail_mask(end - i >= 8 ? 8 : end - i));
        __m256 y = ly_activate8(_mm256_maskload_ps(j->x + i, live), j->activation, 0.0f);
        _mm256_maskstore_ps(j->y + i, live, y);
    }
}

void ly_simd_activate(float *x, int64_t n, int64_t activation, int threads)
{
    activation_job j = {x, x, activation};
    if (n < (1 << 16)) threads = 1;
    if (n > 0)
        ly_parallel_for(n, 4096, threads,
                        ly_cpu()->avx512f ? activation_range16 : activation_range8, &j);
}

static ly_status run_activation(const ly_kernel_call *call, int64_t activation,
                                void (*range)(void *, int64_t, int64_t))
{
    int64_t n = ly_tensor_numel(call->in[0]);
    activation_job j = {call->in[0]->data, call->out[0]->data, activation};
    int threads = n >= (1 << 16) ? ly_threads_resolve(call->threads) : 1;
    if (n > 0) ly_parallel_for(n, 4096, threads, range, &j);
    return LY_OK;
}

ly_status ly_avx512_silu(const ly_kernel_call *call)
{
    return run_activation(call, LY_ACT_SILU, activation_range16);
}

ly_status ly_avx512_sigmoid(const ly_kernel_call *call)
{
    return run_activation(call, LY_ACT_SIGMOID, activation_range16);
}

ly_status ly_avx2_silu(const ly_kernel_call *call)
{
    return run_activation(call, LY_ACT_SILU, activation_range8);
}

ly_status ly_avx2_sigmoid(const ly_kernel_call *call)
{
    return run_activation(call, LY_ACT_SIGMOID, activation_range8);
}
