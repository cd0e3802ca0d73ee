/* SPDX-License-Identifier: MIT */
/*
 * The reference of the sdpa slot: manual attention (scores = (q*scale).k^T
 * [+ masks], softmax, P.v) written as plain loops in the order
 * include/libreyolo/sdpa.h defines. It keeps one [Nq, Nk] score matrix per
 * (batch, head) and runs heads in parallel; each head's numbers do not depend on
 * which thread computes them.
 *
 * The lane structure of the max and the sum looks odd in scalar code: it is the
 * order eight SIMD lanes reach naturally, chosen so a fused kernel can reproduce
 * it without a horizontal reduction per element.
 */
#include "core/core.h"
#include "ops/sdpa/sdpa_internal.h"

#include <stdatomic.h>
#include <stdlib.h>

static void softmax_row(float *s, int64_t n)
{
    float lane[8];
    for (int t = 0; t < 8; t++)
        lane[t] = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        lane[j & 7] = ly_sdpa_max(s[j], lane[j & 7]);
    float m = ly_sdpa_lanes_max(lane);

    for (int t = 0; t < 8; t++)
        lane[t] = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        s[j] = ly_sdpa_expf_inline(s[j] - m);
        lane[j & 7] += s[j];
    }
    float inv = 1.0f / ly_sdpa_lanes_sum(lane);
    for (int64_t j = 0; j < n; j++)
        s[j] = s[j] * inv;
}

static void head(const ly_sdpa_problem *p, int64_t bh, float *scores, float *qs)
{
    int64_t b = bh / p->H, h = bh % p->H, d = p->d, dv = p->dv, Nk = p->Nk;
    const float *q = p->q + ly_sdpa_head_at(p, &p->qs, bh);
    const float *k = p->k + ly_sdpa_head_at(p, &p->ks, bh);
    const float *v = p->v + ly_sdpa_head_at(p, &p->vs, bh);
    float *out = p->out + ly_sdpa_head_at(p, &p->os, bh);
    int64_t q_row = p->qs.row, k_row = p->ks.row, v_row = p->vs.row, o_row = p->os.row;

    for (int64_t i = 0; i < p->Nq; i++) {
        for (int64_t c = 0; c < d; c++)
            qs[c] = q[i * q_row + c] * p->scale;
        float *s = scores + i * Nk;
        for (int64_t j = 0; j < Nk; j++) {
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++)
                acc = fmaf(qs[c], k[j * k_row + c], acc);
            s[j] = acc;
        }
        for (int m = 0; m < 2; m++) {
            const ly_sdpa_mask *mask = &p->mask[m];
            if (!mask->data) continue;
            int64_t row = ly_sdpa_mask_row(mask, b, h, i);
            for (int64_t j = 0; j < Nk; j++)
                s[j] = s[j] + ly_sdpa_mask_value(mask, row + j * mask->sk);
        }
    }

    for (int64_t i = 0; i < p->Nq; i++)
        softmax_row(scores + i * Nk, Nk);

    for (int64_t i = 0; i < p->Nq; i++) {
        float *o = out + i * o_row;
        for (int64_t c = 0; c < dv; c++)
            o[c] = 0.0f;
        for (int64_t j = 0; j < Nk; j++) {
            float pj = scores[i * Nk + j];
            for (int64_t c = 0; c < dv; c++)
                o[c] = fmaf(pj, v[j * v_row + c], o[c]);
        }
        for (int64_t c = 0; c < dv; c++)
            o[c] = ly_sdpa_canonical(o[c]);
    }
}

typedef struct ref_job {
    const ly_sdpa_problem *p;
    atomic_bool out_of_memory;
} ref_job;

static void heads_range(void *ctx, int64_t begin, int64_t end)
{
    ref_job *job = ctx;
    const ly_sdpa_problem *p = job->p;
    float *scores = malloc(((size_t)(p->Nq * p->Nk) + (size_t)p->d + 1) * sizeof(float));
    if (!scores) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    for (int64_t bh = begin; bh < end; bh++)
        head(p, bh, scores, scores + p->Nq * p->Nk);
    free(scores);
}

ly_status ly_ref_sdpa(const ly_kernel_call *call)
{
    ly_sdpa_problem p;
    ly_sdpa_problem_init(call, &p);
    if (p.B * p.H * p.Nq * p.dv == 0) return LY_OK;
    ref_job job = {.p = &p};
    atomic_init(&job.out_of_memory, false);
    ly_parallel_for(p.B * p.H, 1, p.threads, heads_range, &job);
    if (atomic_load(&job.out_of_memory))
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory for the [%lld, %lld] scores",
                            ly_op_name(LY_OP_SDPA), (long long)p.Nq, (long long)p.Nk);
    return LY_OK;
}
