/* SPDX-License-Identifier: MIT */
/*
 * The CUDA provider's arithmetic (plugins/cuda/msda_cuda_kernels.h), run on the
 * CPU: every GPU thread of its kernels becomes one call here, in index order,
 * and the results must have the portable reference's bits. On the GPU each
 * thread runs the same operations with explicit round-to-nearest intrinsics, so
 * this checks the kernels' numbers and indexing on machines without a GPU
 * (test_cuda_plugin runs the real thing where there is one). Under ASan it also
 * catches out-of-bounds indexing in the kernels.
 */
/* cmocka.h needs these first. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
/* clang-format on */

#include "../plugins/cuda/msda_cuda_kernels.h"
#include "msda_problem.h"

static ly_kernel_call forward_call(const problem *p, ly_tensor *t_out, float *out)
{
    ly_tensor_init(t_out, out, LY_F32, 3, (int64_t[]){p->B, p->Lq, p->H * p->C});
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p->t_value;
    call.in[1] = &p->t_shapes;
    call.in[2] = &p->t_loc;
    call.in[3] = &p->t_attn;
    call.in[4] = p->ragged ? &p->t_npts : NULL;
    call.out[0] = t_out;
    call.params = &msda_modes[p->mode];
    return call;
}

static void emulate_forward(const problem *p, float *out)
{
    ly_tensor t_out;
    ly_kernel_call call = forward_call(p, &t_out, out);
    msda_geometry g;
    const char *why = msda_read_geometry(&call, false, &g);
    if (why) fail_msg("the provider would decline: %s", why);
    long long n = g.B * g.queries * g.heads * g.channels;
    for (long long idx = 0; idx < n; idx++)
        msda_forward_at(idx, p->value, p->loc, p->attn, out, &g);
}

static void emulate_backward(const problem *p, float *gv, float *gl, float *ga)
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
    msda_geometry g;
    const char *why = msda_read_geometry(&call, true, &g);
    if (why) fail_msg("the provider would decline: %s", why);
    long long values = g.B * g.len_in * g.heads * g.channels;
    long long samples = g.B * g.queries * g.heads * g.points;
    /* The launches of msda_backward, in order: cudaMemset, value gradient,
     * canonicalisation, sample gradients. */
    memset(gv, 0, (size_t)values * sizeof(float));
    for (long long idx = 0; idx < g.B * g.heads * g.channels; idx++)
        msda_grad_value_at(idx, p->grad_out, p->loc, p->attn, gv, &g);
    for (long long idx = 0; idx < values; idx++)
        msda_canon_at(idx, gv);
    for (long long idx = 0; idx < samples; idx++)
        msda_grad_sample_at(idx, p->grad_out, p->value, p->loc, p->attn, gl, ga, &g);
}

static void expect_same_bits(const float *want, const float *got, int64_t n, const char *what)
{
    char why[256];
    if (!msda_same_bits(want, got, n, what, why, sizeof why)) fail_msg("%s", why);
}

static void check_problem(problem *p, uint64_t seed)
{
    problem_init(p, seed);
    int64_t nv = p->B * p->len_in * p->H * p->C, ns = p->B * p->Lq * p->H * p->K,
            no = p->B * p->Lq * p->H * p->C;
    float *want = malloc((size_t)no * sizeof(float)), *got = malloc((size_t)no * sizeof(float));
    assert_int_equal(forward(p, "reference", want, 1), LY_OK);
    emulate_forward(p, got);
    expect_same_bits(want, got, no, "forward");
    free(want);
    free(got);
    float *gv[2], *gl[2], *ga[2];
    for (int i = 0; i < 2; i++) {
        gv[i] = malloc((size_t)nv * sizeof(float));
        gl[i] = malloc((size_t)ns * 2 * sizeof(float));
        ga[i] = malloc((size_t)ns * sizeof(float));
    }
    assert_int_equal(backward(p, "reference", gv[0], gl[0], ga[0], 1), LY_OK);
    emulate_backward(p, gv[1], gl[1], ga[1]);
    expect_same_bits(gv[0], gv[1], nv, "grad_value");
    expect_same_bits(gl[0], gl[1], 2 * ns, "grad_locations");
    expect_same_bits(ga[0], ga[1], ns, "grad_attention_weights");
    for (int i = 0; i < 2; i++) {
        free(gv[i]);
        free(gl[i]);
        free(ga[i]);
    }
    problem_free(p);
}

static void test_classic(void **state)
{
    (void)state;
    problem p = {.B = 2, .Lq = 3, .H = 2, .C = 4, .L = 2, .shapes = {4, 6, 2, 3}, .points = {2, 2}};
    check_problem(&p, 0);
}

static void test_discrete(void **state)
{
    (void)state;
    problem p = {.B = 2,
                 .Lq = 3,
                 .H = 2,
                 .C = 4,
                 .L = 2,
                 .shapes = {4, 6, 2, 3},
                 .points = {2, 2},
                 .mode = LY_MSDA_DISCRETE};
    check_problem(&p, 1);
    problem q = {.B = 1,
                 .Lq = 9,
                 .H = 3,
                 .C = 19,
                 .L = 2,
                 .shapes = {7, 5, 3, 2},
                 .points = {3, 1},
                 .ragged = true,
                 .mode = LY_MSDA_DISCRETE};
    check_problem(&q, 2);
}

static void test_ragged_and_channel_tails(void **state)
{
    (void)state;
    problem p = {.B = 1,
                 .Lq = 7,
                 .H = 3,
                 .C = 13,
                 .L = 2,
                 .shapes = {10, 12, 5, 6},
                 .points = {4, 2},
                 .ragged = true};
    check_problem(&p, 3);
    problem one = {.B = 2, .Lq = 4, .H = 1, .C = 1, .L = 1, .shapes = {3, 3}, .points = {5}};
    check_problem(&one, 4);
}

static void test_level_without_points(void **state)
{
    (void)state;
    problem p = {.B = 1,
                 .Lq = 5,
                 .H = 2,
                 .C = 9,
                 .L = 3,
                 .shapes = {8, 8, 4, 4, 2, 2},
                 .points = {3, 0, 2},
                 .ragged = true};
    check_problem(&p, 5);
    problem first = {.B = 1,
                     .Lq = 4,
                     .H = 2,
                     .C = 8,
                     .L = 3,
                     .shapes = {8, 8, 4, 4, 2, 2},
                     .points = {0, 2, 2},
                     .ragged = true};
    check_problem(&first, 6);
}

static void test_model_shapes(void **state)
{
    (void)state;
    /* RT-DETR's levels and heads, fewer queries to stay quick under ASan. */
    problem rtdetr = {.B = 1,
                      .Lq = 24,
                      .H = 8,
                      .C = 32,
                      .L = 3,
                      .shapes = {80, 80, 40, 40, 20, 20},
                      .points = {4, 4, 4}};
    check_problem(&rtdetr, 7);
    problem rfdetr = {
        .B = 1, .Lq = 40, .H = 16, .C = 16, .L = 1, .shapes = {24, 24}, .points = {2}};
    check_problem(&rfdetr, 8);
    problem deimv2 = {.B = 2,
                      .Lq = 10,
                      .H = 8,
                      .C = 32,
                      .L = 2,
                      .shapes = {20, 20, 10, 10},
                      .points = {4, 2},
                      .ragged = true};
    check_problem(&deimv2, 9);
}

int main(void)
{
    unsetenv("LIBREYOLO_KERNELS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classic),
        cmocka_unit_test(test_discrete),
        cmocka_unit_test(test_ragged_and_channel_tails),
        cmocka_unit_test(test_level_without_points),
        cmocka_unit_test(test_model_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
