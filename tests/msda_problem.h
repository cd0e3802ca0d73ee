/* SPDX-License-Identifier: MIT */
/* ms_deform_attn operands for the CUDA tests (test_cuda_plugin, test_cuda_kernels):
 * a problem description, its random data, and calls of one implementation
 * through the registry. Header-only, everything static. */
#ifndef LY_TESTS_MSDA_PROBLEM_H
#define LY_TESTS_MSDA_PROBLEM_H

#include "libreyolo/msda.h"
#include "test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* The params of each mode (calls point at them; they outlive every call). */
static const ly_ms_deform_attn_params msda_modes[2] = {{.mode = LY_MSDA_BILINEAR},
                                                       {.mode = LY_MSDA_DISCRETE}};

typedef struct problem {
    int64_t B, Lq, H, C, L;
    int64_t shapes[2 * LY_MSDA_MAX_LEVELS];
    int64_t points[LY_MSDA_MAX_LEVELS]; /* per level */
    bool ragged;
    int mode;
    int64_t len_in, K;
    float *value, *loc, *attn, *grad_out;
    ly_tensor t_value, t_shapes, t_loc, t_attn, t_npts, t_grad_out;
} problem;

static inline float uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)(ly_test_splitmix64(s) >> 40) * (1.0f / 16777216.0f);
}

static inline void problem_init(problem *p, uint64_t seed)
{
    p->len_in = 0;
    p->K = 0;
    for (int64_t l = 0; l < p->L; l++) {
        p->len_in += p->shapes[2 * l] * p->shapes[2 * l + 1];
        p->K += p->points[l];
    }
    int64_t nv = p->B * p->len_in * p->H * p->C, ns = p->B * p->Lq * p->H * p->K,
            no = p->B * p->Lq * p->H * p->C;
    p->value = malloc((size_t)nv * sizeof(float));
    p->loc = malloc((size_t)ns * 2 * sizeof(float));
    p->attn = malloc((size_t)ns * sizeof(float));
    p->grad_out = malloc((size_t)no * sizeof(float));
    uint64_t s = seed;
    for (int64_t i = 0; i < nv; i++)
        p->value[i] = uniform(&s, -2.0f, 2.0f);
    for (int64_t i = 0; i < 2 * ns; i++)
        p->loc[i] = uniform(&s, -0.1f, 1.1f); /* some corners fall outside */
    for (int64_t i = 0; i < ns; i++)
        p->attn[i] = uniform(&s, 0.0f, 1.0f);
    for (int64_t i = 0; i < no; i++)
        p->grad_out[i] = uniform(&s, -1.0f, 1.0f);
    if (ns > 8) { /* the edges: exact borders, NaN, infinities, far away */
        p->loc[0] = 0.0f;
        p->loc[1] = 1.0f;
        p->loc[2] = NAN;
        p->loc[5] = INFINITY;
        p->loc[6] = -1e30f;
        p->loc[9] = 0.5f;
    }
    ly_tensor_init(&p->t_value, p->value, LY_F32, 4, (int64_t[]){p->B, p->len_in, p->H, p->C});
    ly_tensor_init(&p->t_shapes, p->shapes, LY_I64, 2, (int64_t[]){p->L, 2});
    ly_tensor_init(&p->t_npts, p->points, LY_I64, 1, (int64_t[]){p->L});
    if (p->ragged) {
        ly_tensor_init(&p->t_loc, p->loc, LY_F32, 5, (int64_t[]){p->B, p->Lq, p->H, p->K, 2});
        ly_tensor_init(&p->t_attn, p->attn, LY_F32, 4, (int64_t[]){p->B, p->Lq, p->H, p->K});
    } else {
        int64_t P = p->points[0];
        ly_tensor_init(&p->t_loc, p->loc, LY_F32, 6, (int64_t[]){p->B, p->Lq, p->H, p->L, P, 2});
        ly_tensor_init(&p->t_attn, p->attn, LY_F32, 5, (int64_t[]){p->B, p->Lq, p->H, p->L, P});
    }
    ly_tensor_init(&p->t_grad_out, p->grad_out, LY_F32, 3, (int64_t[]){p->B, p->Lq, p->H * p->C});
}

static inline void problem_free(problem *p)
{
    free(p->value);
    free(p->loc);
    free(p->attn);
    free(p->grad_out);
}

static inline ly_status forward(const problem *p, const char *impl, float *out, int threads)
{
    ly_tensor t_out;
    ly_tensor_init(&t_out, out, LY_F32, 3, (int64_t[]){p->B, p->Lq, p->H * p->C});
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p->t_value;
    call.in[1] = &p->t_shapes;
    call.in[2] = &p->t_loc;
    call.in[3] = &p->t_attn;
    call.in[4] = p->ragged ? &p->t_npts : NULL;
    call.out[0] = &t_out;
    call.params = &msda_modes[p->mode];
    call.threads = threads;
    return ly_kernel_run_impl(ly_op_name(LY_OP_MS_DEFORM_ATTN), impl, &call);
}

static inline ly_status backward(const problem *p, const char *impl, float *gv, float *gl,
                                 float *ga, int threads)
{
    ly_tensor t_gv = p->t_value, t_gl = p->t_loc, t_ga = p->t_attn;
    t_gv.data = gv;
    t_gl.data = gl;
    t_ga.data = ga;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p->t_grad_out;
    call.in[1] = &p->t_value;
    call.in[2] = &p->t_shapes;
    call.in[3] = &p->t_loc;
    call.in[4] = &p->t_attn;
    call.in[5] = p->ragged ? &p->t_npts : NULL;
    call.out[0] = &t_gv;
    call.out[1] = &t_gl;
    call.out[2] = &t_ga;
    call.params = &msda_modes[p->mode];
    call.threads = threads;
    return ly_kernel_run_impl(ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD), impl, &call);
}

/* Every element of `got` has the bits of `want` (NaN included: both canonical). */
static inline bool msda_same_bits(const float *want, const float *got, int64_t n, const char *what,
                                  char *why, size_t why_size)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0) {
            snprintf(why, why_size, "%s[%lld]: reference %.9g, got %.9g", what, (long long)i,
                     (double)want[i], (double)got[i]);
            return false;
        }
    return true;
}

#endif
