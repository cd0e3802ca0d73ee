/* SPDX-License-Identifier: MIT */
/*
 * matmul eight outputs at a time: each lane one output's chain of fused
 * multiply-adds over k from +0, in the reference's order (ops/linear/
 * reference.c), so the results are its bits. b^T (transpose_b, as q.k^T) is
 * packed to [K, N] first so a row of eight outputs reads contiguous memory.
 */
#include "core/core.h"
#include "ops/elementwise/broadcast.h"
#include "providers/builtin.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct mm_job {
    const float *a, *b; /* a [M, K]; b [K, N] */
    float *y;
    int64_t k, n;
} mm_job;

static void mm_rows(void *ctx, int64_t begin, int64_t end)
{
    const mm_job *j = ctx;
    int64_t k = j->k, n = j->n;
    for (int64_t r = begin; r < end; r++) {
        const float *a = j->a + r * k;
        float *y = j->y + r * n;
        int64_t c = 0;
        for (; c + 32 <= n; c += 32) {
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t i = 0; i < k; i++) {
                __m256 ai = _mm256_set1_ps(a[i]);
                const float *b = j->b + i * n + c;
                s0 = _mm256_fmadd_ps(ai, _mm256_loadu_ps(b), s0);
                s1 = _mm256_fmadd_ps(ai, _mm256_loadu_ps(b + 8), s1);
                s2 = _mm256_fmadd_ps(ai, _mm256_loadu_ps(b + 16), s2);
                s3 = _mm256_fmadd_ps(ai, _mm256_loadu_ps(b + 24), s3);
            }
            _mm256_storeu_ps(y + c, s0);
            _mm256_storeu_ps(y + c + 8, s1);
            _mm256_storeu_ps(y + c + 16, s2);
            _mm256_storeu_ps(y + c + 24, s3);
        }
        for (; c + 8 <= n; c += 8) {
            __m256 s = _mm256_setzero_ps();
            for (int64_t i = 0; i < k; i++)
                s = _mm256_fmadd_ps(_mm256_set1_ps(a[i]), _mm256_loadu_ps(j->b + i * n + c), s);
            _mm256_storeu_ps(y + c, s);
        }
        for (; c < n; c++) {
            float s = 0.0f;
            for (int64_t i = 0; i < k; i++)
                s = fmaf(a[i], j->b[i * n + c], s);
            y[c] = s;
        }
    }
}

ly_status ly_avx2_matmul(const ly_kernel_call *call)
{
    const ly_tensor *a = call->in[0], *b = call->in[1];
    ly_tensor *y = call->out[0];
    bool tb = LY_PARAMS(call, ly_matmul_params)->transpose_b != 0;
    int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = y->shape[y->ndim - 1];
    ly_bcast bc;
    int64_t batches = ly_bcast_init_matrices(&bc, a, b, y);
    if (m == 0 || n == 0) return LY_OK;
    float *packed = NULL;
    if (tb && k > 0) {
        packed = malloc((size_t)(k * n) * sizeof *packed);
        if (!packed) return ly_set_error(LY_E_NO_MEMORY, "matmul (avx2): out of memory");
    }
    int threads = m * n * k >= (1 << 18) ? ly_threads_resolve(call->threads) : 1;
    for (int64_t t = 0; t < batches; t++) {
        int64_t off[LY_BCAST_MAX_INPUTS];
        ly_bcast_offsets(&bc, t, off);
        const float *bt = (const float *)b->data + off[1] * k * n;
        if (packed) {
            for (int64_t r = 0; r < n; r++)
                for (int64_t i = 0; i < k; i++)
                    packed[i * n + r] = bt[r * k + i];
            bt = packed;
        }
        mm_job j = {.a = (const float *)a->data + off[0] * m * k,
                    .b = bt,
                    .y = (float *)y->data + t * m * n,
                    .k = k,
                    .n = n};
        ly_parallel_for(m, 1, threads, mm_rows, &j);
    }
    free(packed);
    return LY_OK;
}
