/* SPDX-License-Identifier: MIT */
/*
 * The references of the network-op slots on small hand-computed cases, and the
 * validators' answers to bad calls (status codes).
 */
#include "libreyolo/nn.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAX_ELEMENTS 512

typedef struct buf {
    ly_tensor t;
    float data[MAX_ELEMENTS];
} buf;

/* A tensor of `ndim` dims over b->data, filled from `values` (or with 0..n-1
 * when values is NULL, or left as NaN when fill is false). */
static ly_tensor *make(buf *b, int ndim, const int64_t *shape, const float *values)
{
    assert_int_equal(ly_tensor_init(&b->t, b->data, LY_F32, ndim, shape), LY_OK);
    int64_t n = ly_tensor_numel(&b->t);
    assert_true(n <= MAX_ELEMENTS);
    for (int64_t i = 0; i < n; i++)
        b->data[i] = values ? values[i] : (float)i;
    return &b->t;
}

static ly_tensor *make_out(buf *b, int ndim, const int64_t *shape)
{
    assert_int_equal(ly_tensor_init(&b->t, b->data, LY_F32, ndim, shape), LY_OK);
    for (int i = 0; i < MAX_ELEMENTS; i++)
        b->data[i] = NAN;
    return &b->t;
}

static ly_kernel_call new_call(void)
{
    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.threads = 1;
    return call;
}

static void run_ref(const char *slot, ly_kernel_call *call)
{
    ly_status st = ly_kernel_run_impl(slot, "reference", call);
    if (st != LY_OK) fail_msg("%s: %s: %s", slot, ly_status_name(st), ly_last_error());
}

static void expect(const float *got, const float *want, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++) {
        bool ok = isnan(want[i]) ? isnan(got[i])
                                 : (isinf(want[i]) ? got[i] == want[i]
                                                   : fabs((double)got[i] - want[i]) <= tol);
        if (!ok)
            fail_msg("element %lld: got %.9g, expected %.9g", (long long)i, (double)got[i],
                     (double)want[i]);
    }
}

/* ---- conv2d ------------------------------------------------------------------------- */

static void test_conv2d_plain(void **state)
{
    (void)state;
    buf x, w, y;
    ly_kernel_call call = new_call();
    const float ones[4] = {1, 1, 1, 1};
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 3, 3}, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 2, 2}, ones);
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){12, 16, 24, 28}, 4, 0);
}

static void test_conv2d_padding(void **state)
{
    (void)state;
    buf x, w, y;
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    float nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 2, 3, 4});
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 3, 3}, nine);
    p.padding[0] = p.padding[1] = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){10, 10, 10, 10}, 4, 0);

    /* Asymmetric padding (h 0, w 1) with a 1x3 kernel [1, 10, 100]. */
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 1, 3}, (float[]){1, 10, 100});
    p.padding[0] = 0;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){210, 21, 430, 43}, 4, 0);
}

static void test_conv2d_stride2(void **state)
{
    (void)state;
    buf x, w, y;
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 4, 4}, NULL); /* 0..15 */
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 1, 1}, (float[]){2});
    p.stride[0] = p.stride[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){0, 4, 16, 20}, 4, 0);

    /* 3x3 stride 2 pad 1 on 4x4 ones: windows see 4, 6 / 6, 9 real elements. */
    float ones16[16], nine[9];
    for (int i = 0; i < 16; i++)
        ones16[i] = 1;
    for (int i = 0; i < 9; i++)
        nine[i] = 1;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 4, 4}, ones16);
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 3, 3}, nine);
    p.padding[0] = p.padding[1] = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){4, 6, 6, 9}, 4, 0);
}

static void test_conv2d_dilation(void **state)
{
    (void)state;
    buf x, w, y;
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 5, 5}, NULL); /* 0..24 */
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 1, 1, 1});
    p.dilation[0] = p.dilation[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 3, 3});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    float want[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = (float)(24 + 20 * i + 4 * j);
    expect(y.data, want, 9, 0);
}

static void test_conv2d_groups_and_channels(void **state)
{
    (void)state;
    buf x, w, y;
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    /* Two 1x2 input planes [1, 2] and [10, 20]. */
    call.in[0] = make(&x, 4, (int64_t[]){1, 2, 1, 2}, (float[]){1, 2, 10, 20});
    /* groups = 2: out0 = 3 * plane0, out1 = 5 * plane1, out2 = -1 * plane1. */
    call.in[1] = make(&w, 4, (int64_t[]){3, 1, 1, 1}, (float[]){3, 5, -1});
    p.groups = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 3, 1, 2});
    /* 3 output channels do not split into 2 groups. */
    p.groups = 2;
    assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), "reference", &call),
                     LY_E_INVALID_ARGUMENT);
    call.in[1] = make(&w, 4, (int64_t[]){4, 1, 1, 1}, (float[]){3, -2, 5, -1});
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 4, 1, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){3, 6, -2, -4, 50, 100, -10, -20}, 8, 0);

    /* groups = 1 sums over both channels in order: 1*a + 2*b. */
    p.groups = 1;
    call.in[1] = make(&w, 4, (int64_t[]){1, 2, 1, 1}, (float[]){1, 2});
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 1, 2});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){21, 42}, 2, 0);

    /* A batch of two images. */
    call.in[0] = make(&x, 4, (int64_t[]){2, 2, 1, 1}, (float[]){1, 2, 3, 4});
    call.out[0] = make_out(&y, 4, (int64_t[]){2, 1, 1, 1});
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){5, 11}, 2, 0);
}

static double silu_d(double v)
{
    return v / (1.0 + exp(-v));
}

static void test_conv2d_bias_activations_residual(void **state)
{
    (void)state;
    buf x, w, b, r, y;
    const float xs[4] = {-2.0f, -0.5f, 0.0f, 3.0f};
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 2, 2}, xs);
    call.in[1] = make(&w, 4, (int64_t[]){1, 1, 1, 1}, (float[]){1});
    call.in[2] = make(&b, 1, (int64_t[]){1}, (float[]){0.5f});
    int64_t ys[4] = {1, 1, 2, 2};
    float want[4];

    p.activation = LY_ACT_NONE;
    call.out[0] = make_out(&y, 4, ys);
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){-1.5f, 0.0f, 0.5f, 3.5f}, 4, 0);

    p.activation = LY_ACT_RELU;
    call.out[0] = make_out(&y, 4, ys);
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){0.0f, 0.0f, 0.5f, 3.5f}, 4, 0);

    p.activation = LY_ACT_SILU;
    call.out[0] = make_out(&y, 4, ys);
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    for (int i = 0; i < 4; i++)
        want[i] = (float)silu_d(xs[i] + 0.5);
    expect(y.data, want, 4, 1e-6);

    p.activation = LY_ACT_SIGMOID;
    call.out[0] = make_out(&y, 4, ys);
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    for (int i = 0; i < 4; i++)
        want[i] = (float)(1.0 / (1.0 + exp(-(xs[i] + 0.5))));
    expect(y.data, want, 4, 1e-6);

    /* The residual is added after the activation. */
    p.activation = LY_ACT_RELU;
    call.in[3] = make(&r, 4, ys, (float[]){10, 20, 30, 40});
    call.out[0] = make_out(&y, 4, ys);
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(y.data, (float[]){10.0f, 20.0f, 30.5f, 43.5f}, 4, 0);

    /* The output may be the residual itself. */
    call.out[0] = &r.t;
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    expect(r.data, (float[]){10.0f, 20.0f, 30.5f, 43.5f}, 4, 0);
}

/* Reference conv on a bigger case against a straightforward double loop. */
static void test_conv2d_matches_naive_loop(void **state)
{
    (void)state;
    enum { N = 2, C = 4, H = 7, W = 6, O = 6, KH = 3, KW = 2, G = 2 };
    const int SH = 2, SW = 1, PH = 1, PW = 1, DH = 1, DW = 2;
    static float xv[N * C * H * W], wv[O * (C / G) * KH * KW], bv[O];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof xv / sizeof xv[0]; i++) {
        s = s * 1664525u + 1013904223u;
        xv[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    for (size_t i = 0; i < sizeof wv / sizeof wv[0]; i++) {
        s = s * 1664525u + 1013904223u;
        wv[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < O; i++)
        bv[i] = 0.1f * (float)i;
    int HO = (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1,
        WO = (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1;
    ly_tensor x, w, b, y;
    float *out = malloc(sizeof(float) * N * O * (size_t)(HO * WO));
    assert_non_null(out);
    assert_int_equal(ly_tensor_init(&x, xv, LY_F32, 4, (int64_t[]){N, C, H, W}), LY_OK);
    assert_int_equal(ly_tensor_init(&w, wv, LY_F32, 4, (int64_t[]){O, C / G, KH, KW}), LY_OK);
    assert_int_equal(ly_tensor_init(&b, bv, LY_F32, 1, (int64_t[]){O}), LY_OK);
    assert_int_equal(ly_tensor_init(&y, out, LY_F32, 4, (int64_t[]){N, O, HO, WO}), LY_OK);
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    call.in[0] = &x;
    call.in[1] = &w;
    call.in[2] = &b;
    call.out[0] = &y;
    p.stride[0] = SH;
    p.stride[1] = SW;
    p.padding[0] = PH;
    p.padding[1] = PW;
    p.dilation[0] = DH;
    p.dilation[1] = DW;
    p.groups = G;
    run_ref(ly_op_name(LY_OP_CONV2D), &call);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int oy = 0; oy < HO; oy++)
                for (int ox = 0; ox < WO; ox++) {
                    float acc = 0.0f;
                    int g = o / (O / G);
                    for (int c = 0; c < C / G; c++)
                        for (int ky = 0; ky < KH; ky++)
                            for (int kx = 0; kx < KW; kx++) {
                                int iy = oy * SH - PH + ky * DH, ix = ox * SW - PW + kx * DW;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                acc += xv[((n * C + g * (C / G) + c) * H + iy) * W + ix] *
                                       wv[((o * (C / G) + c) * KH + ky) * KW + kx];
                            }
                    float want = acc + bv[o];
                    float got = out[((n * O + o) * HO + oy) * WO + ox];
                    /* Same order of operations: bit-identical. */
                    if (memcmp(&want, &got, sizeof want) != 0)
                        fail_msg("n%d o%d (%d, %d): %.9g vs naive %.9g", n, o, oy, ox, (double)got,
                                 (double)want);
                }
    free(out);
}

/* ---- pooling, upsample, concat -------------------------------------------------------- */

static void test_max_pool2d(void **state)
{
    (void)state;
    buf x, y;
    ly_kernel_call call = new_call();
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 3, 3}, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    p.kernel[0] = p.kernel[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_MAX_POOL2D), &call);
    expect(y.data, (float[]){5, 6, 8, 9}, 4, 0);

    /* Padding is -inf: it never wins, even over negative values. */
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 2, 2}, (float[]){-4, -3, -2, -1});
    p.kernel[0] = p.kernel[1] = 3;
    p.padding[0] = p.padding[1] = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_MAX_POOL2D), &call);
    expect(y.data, (float[]){-1, -1, -1, -1}, 4, 0);

    /* SPPELAN's 5x5 stride 1 pad 2, and NaN propagates. */
    float v[16];
    for (int i = 0; i < 16; i++)
        v[i] = (float)i;
    v[0] = NAN;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 4, 4}, v);
    p.kernel[0] = p.kernel[1] = 5;
    p.padding[0] = p.padding[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 4, 4});
    run_ref(ly_op_name(LY_OP_MAX_POOL2D), &call);
    expect(y.data,
           (float[]){NAN, NAN, NAN, 11, NAN, NAN, NAN, 15, NAN, NAN, NAN, 15, 14, 15, 15, 15}, 16,
           0);
}

static void test_avg_pool2d(void **state)
{
    (void)state;
    buf x, y;
    ly_kernel_call call = new_call();
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    call.params = &p;
    /* AConv's avg_pool2d(k=2, s=1, p=0). */
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 3, 3}, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    p.kernel[0] = p.kernel[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 2, 2});
    run_ref(ly_op_name(LY_OP_AVG_POOL2D), &call);
    expect(y.data, (float[]){3, 4, 6, 7}, 4, 0);

    /* k 3, pad 1: corner windows hold 4 real elements out of 9. */
    p.kernel[0] = p.kernel[1] = 3;
    p.padding[0] = p.padding[1] = 1;
    p.count_include_pad = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 3, 3});
    run_ref(ly_op_name(LY_OP_AVG_POOL2D), &call);
    expect(y.data,
           (float[]){12.0f / 9, 21.0f / 9, 16.0f / 9, 27.0f / 9, 45.0f / 9, 33.0f / 9, 24.0f / 9,
                     39.0f / 9, 28.0f / 9},
           9, 1e-6);
    p.count_include_pad = 0;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 3, 3});
    run_ref(ly_op_name(LY_OP_AVG_POOL2D), &call);
    expect(y.data,
           (float[]){12.0f / 4, 21.0f / 6, 16.0f / 4, 27.0f / 6, 45.0f / 9, 33.0f / 6, 24.0f / 4,
                     39.0f / 6, 28.0f / 4},
           9, 1e-6);

    /* Stride 2 over two channels. */
    call.in[0] = make(&x, 4, (int64_t[]){1, 2, 2, 2}, (float[]){1, 2, 3, 4, 10, 20, 30, 40});
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 0;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 2, 1, 1});
    run_ref(ly_op_name(LY_OP_AVG_POOL2D), &call);
    expect(y.data, (float[]){2.5f, 25.0f}, 2, 0);
}

static void test_upsample_nearest2d(void **state)
{
    (void)state;
    buf x, y;
    ly_kernel_call call = new_call();
    ly_upsample_nearest2d_params p = LY_UPSAMPLE_NEAREST2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 2, 3, 4});
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 4, 4});
    run_ref(ly_op_name(LY_OP_UPSAMPLE_NEAREST2D), &call); /* default scale 2 */
    expect(y.data, (float[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16, 0);

    p.scale = 3;
    call.in[0] = make(&x, 4, (int64_t[]){1, 2, 1, 1}, (float[]){5, 6});
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 2, 3, 3});
    run_ref(ly_op_name(LY_OP_UPSAMPLE_NEAREST2D), &call);
    expect(y.data, (float[]){5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6}, 18, 0);
}

static void test_concat(void **state)
{
    (void)state;
    buf a, b, c, y;
    ly_kernel_call call = new_call();
    ly_concat_params p = LY_CONCAT_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&a, 4, (int64_t[]){1, 2, 1, 2}, (float[]){1, 2, 3, 4});
    call.in[1] = make(&b, 4, (int64_t[]){1, 1, 1, 2}, (float[]){5, 6});
    call.in[2] = make(&c, 4, (int64_t[]){1, 1, 1, 2}, (float[]){7, 8});
    p.axis = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 4, 1, 2});
    run_ref(ly_op_name(LY_OP_CONCAT), &call);
    expect(y.data, (float[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0);

    /* The last axis, counted from the end. */
    call.in[0] = make(&a, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4});
    call.in[1] = make(&b, 2, (int64_t[]){2, 1}, (float[]){5, 6});
    call.in[2] = NULL;
    p.axis = -1;
    call.out[0] = make_out(&y, 2, (int64_t[]){2, 3});
    run_ref(ly_op_name(LY_OP_CONCAT), &call);
    expect(y.data, (float[]){1, 2, 5, 3, 4, 6}, 6, 0);

    /* Batch axis, with an empty input. */
    call.in[0] = make(&a, 2, (int64_t[]){1, 2}, (float[]){1, 2});
    call.in[1] = make(&b, 2, (int64_t[]){0, 2}, NULL);
    call.in[2] = make(&c, 2, (int64_t[]){1, 2}, (float[]){3, 4});
    p.axis = 0;
    call.out[0] = make_out(&y, 2, (int64_t[]){2, 2});
    run_ref(ly_op_name(LY_OP_CONCAT), &call);
    expect(y.data, (float[]){1, 2, 3, 4}, 4, 0);
}

/* ---- elementwise, dfl ------------------------------------------------------------------- */

static void test_silu_sigmoid(void **state)
{
    (void)state;
    buf x, y;
    const float xs[6] = {-100.0f, -2.0f, -0.5f, 0.0f, 1.0f, 100.0f};
    float want[6];
    ly_kernel_call call = new_call();
    call.in[0] = make(&x, 2, (int64_t[]){2, 3}, xs);
    call.out[0] = make_out(&y, 2, (int64_t[]){2, 3});
    run_ref(ly_op_name(LY_OP_SILU), &call);
    for (int i = 0; i < 6; i++)
        want[i] = (float)silu_d(xs[i]);
    expect(y.data, want, 6, 1e-6);
    assert_true(y.data[0] <= 0.0f && y.data[0] > -1e-30f); /* -100 / (1 + e^100) ~ -0 */

    call.out[0] = make_out(&y, 2, (int64_t[]){2, 3});
    run_ref(ly_op_name(LY_OP_SIGMOID), &call);
    for (int i = 0; i < 6; i++)
        want[i] = (float)(1.0 / (1.0 + exp(-(double)xs[i])));
    expect(y.data, want, 6, 1e-7);
    assert_true(y.data[3] == 0.5f && y.data[5] == 1.0f);

    /* Any shape, including 0-d and empty. */
    call.in[0] = make(&x, 0, NULL, (float[]){0.0f});
    call.out[0] = make_out(&y, 0, NULL);
    run_ref(ly_op_name(LY_OP_SILU), &call);
    assert_true(y.data[0] == 0.0f);
    call.in[0] = make(&x, 1, (int64_t[]){0}, NULL);
    call.out[0] = make_out(&y, 1, (int64_t[]){0});
    run_ref(ly_op_name(LY_OP_SIGMOID), &call);
}

static void test_dfl(void **state)
{
    (void)state;
    buf x, y;
    ly_kernel_call call = new_call();
    /* bins = 2, anchors = 2, side-major channels side*2 + bin. Softmax of
     * (0, 0) is (.5, .5) -> 0.5; of (0, ln 3) is (.25, .75) -> 0.75; of
     * (1000, 0) -> ~0 (subtracting the max keeps it finite). */
    float ln3 = logf(3.0f);
    call.in[0] = make(&x, 3, (int64_t[]){1, 8, 2},
                      (float[]){0, 0, 0, ln3,         /* side 0: bin 0 (a0,a1), bin 1 */
                                1000, 0, 0, 1000,     /* side 1 */
                                5, -5, 5, -5,         /* side 2 */
                                -1000, 2, -1000, 2}); /* side 3 */
    call.out[0] = make_out(&y, 3, (int64_t[]){1, 4, 2});
    run_ref(ly_op_name(LY_OP_DFL), &call);
    expect(y.data, (float[]){0.5f, 0.75f, 0.0f, 1.0f, 0.5f, 0.5f, 0.5f, 0.5f}, 8, 1e-6);

    /* 16 bins (YOLO9's reg_max): all mass on bin 7 -> 7. */
    static buf big, out;
    float v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i % 16 == 7) ? 50.0f : 0.0f;
    call.in[0] = make(&big, 3, (int64_t[]){1, 64, 1}, v);
    call.out[0] = make_out(&out, 3, (int64_t[]){1, 4, 1});
    run_ref(ly_op_name(LY_OP_DFL), &call);
    expect(out.data, (float[]){7, 7, 7, 7}, 4, 1e-4);
}

/* ---- bad calls ------------------------------------------------------------------------ */

static void expect_status(const char *slot, ly_kernel_call *call, ly_status want)
{
    ly_status st = ly_kernel_dispatch(slot, call);
    if (st != want)
        fail_msg("%s: got %s (%s), expected %s", slot, ly_status_name(st), ly_last_error(),
                 ly_status_name(want));
    assert_true(strlen(ly_last_error()) > 0);
}

static void test_conv2d_bad_calls(void **state)
{
    (void)state;
    buf x, w, b, r, y;
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    call.in[0] = make(&x, 4, (int64_t[]){1, 2, 3, 3}, NULL);
    call.in[1] = make(&w, 4, (int64_t[]){4, 2, 3, 3}, NULL);
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 4, 1, 1});
    ly_kernel_call good = call;
    const ly_conv2d_params good_params = p;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONV2D, &call), LY_OK);

    call.in[0] = NULL;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    p = good_params;
    x.t.ndim = 3;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    x.t.ndim = 4;
    x.t.dtype = LY_F64;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_DTYPE);
    x.t.dtype = LY_F32;
    w.t.shape[1] = 1; /* C / groups mismatch */
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    w.t.shape[1] = 2;
    p.groups = 3;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    p.groups = 0;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    p = good_params;
    p.stride[1] = 0;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    p = good_params;
    p.padding[0] = -1;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    p = good_params;
    p.dilation[0] = 2; /* a 5-tall window on a 3-tall input */
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    call = good;
    p = good_params;
    p.activation = 9;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    p = good_params;
    call.in[2] = make(&b, 1, (int64_t[]){3}, NULL);
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    call = good;
    p = good_params;
    call.in[3] = make(&r, 4, (int64_t[]){1, 4, 2, 1}, NULL);
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    call = good;
    p = good_params;
    y.t.shape[3] = 2; /* the caller's output has the wrong shape */
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_SHAPE);
    y.t.shape[3] = 1;
    w.t.data = NULL;
    expect_status(ly_op_name(LY_OP_CONV2D), &call, LY_E_INVALID_ARGUMENT);
}

/* conv2d_int8: the input quantized on [lo, hi] (scale 1/51, zero point -128 + 51:
 * here lo = -1, hi = 4), the codes times their channel's scale, then conv2d. */
static void test_conv2d_int8(void **state)
{
    (void)state;
    buf x, sc, lo, hi, y, bad;
    int8_t codes[2 * 2] = {1, -2, 127, -128};
    ly_tensor w;
    assert_int_equal(ly_tensor_init(&w, codes, LY_I8, 4, (int64_t[]){2, 2, 1, 1}), LY_OK);
    ly_kernel_call call = new_call();
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    call.params = &p;
    /* 0.5 and 10 (clamped to hi) on channel 0, -3 (clamped to lo) and 1 on channel 1 */
    call.in[0] = make(&x, 4, (int64_t[]){1, 2, 1, 2}, (const float[]){0.5f, 10.0f, -3.0f, 1.0f});
    call.in[1] = &w;
    call.in[4] = make(&sc, 1, (int64_t[]){2}, (const float[]){0.5f, 0.25f});
    call.in[5] = make(&lo, 1, (int64_t[]){1}, (const float[]){-1.0f});
    call.in[6] = make(&hi, 1, (int64_t[]){1}, (const float[]){4.0f});
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 2, 1, 2});
    run_ref(ly_op_name(LY_OP_CONV2D_INT8), &call);
    float s = 5.0f / 255.0f, zp = -128.0f + 51.0f;
    float xq[4];
    const float xv[4] = {0.5f, 10.0f, -3.0f, 1.0f};
    for (int i = 0; i < 4; i++) {
        float code = fminf(fmaxf(zp + nearbyintf(xv[i] * (1.0f / s)), -128.0f), 127.0f);
        xq[i] = (float)(((double)code - zp) * s);
    }
    float want[4];
    for (int o = 0; o < 2; o++)
        for (int px = 0; px < 2; px++)
            want[o * 2 + px] =
                xq[px] * (codes[o * 2] * sc.data[o]) + xq[2 + px] * (codes[o * 2 + 1] * sc.data[o]);
    expect(y.data, want, 4, 1e-6);
    assert_true(fabsf(y.data[1] - (xq[1] * 0.5f + xq[3] * -1.0f)) < 1e-6f);

    ly_kernel_call good = call;
    w.dtype = LY_F32; /* float weights: conv2d's, not this op's */
    expect_status(ly_op_name(LY_OP_CONV2D_INT8), &call, LY_E_DTYPE);
    w.dtype = LY_I8;
    call.in[4] = make(&bad, 1, (int64_t[]){3}, NULL);
    expect_status(ly_op_name(LY_OP_CONV2D_INT8), &call, LY_E_SHAPE);
    call = good;
    call.in[6] = NULL;
    expect_status(ly_op_name(LY_OP_CONV2D_INT8), &call, LY_E_INVALID_ARGUMENT);
    call = good;
    call.in[5] = make(&bad, 1, (int64_t[]){2}, NULL);
    expect_status(ly_op_name(LY_OP_CONV2D_INT8), &call, LY_E_SHAPE);
}

static void test_other_slots_bad_calls(void **state)
{
    (void)state;
    buf x, x2, y;
    ly_kernel_call call = new_call();
    ly_pool2d_params pool = LY_POOL2D_DEFAULTS;
    ly_upsample_nearest2d_params up = LY_UPSAMPLE_NEAREST2D_DEFAULTS;
    ly_concat_params cat = LY_CONCAT_DEFAULTS;
    call.params = &pool;
    call.in[0] = make(&x, 4, (int64_t[]){1, 1, 4, 4}, NULL);
    pool.kernel[0] = pool.kernel[1] = 2;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 3, 3});
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_MAX_POOL2D, &call), LY_OK);
    pool.padding[0] = 2; /* more than half the kernel */
    expect_status(ly_op_name(LY_OP_MAX_POOL2D), &call, LY_E_INVALID_ARGUMENT);
    pool.padding[0] = 0;
    pool.kernel[1] = 0;
    expect_status(ly_op_name(LY_OP_AVG_POOL2D), &call, LY_E_INVALID_ARGUMENT);
    pool.kernel[1] = 5; /* wider than the input */
    expect_status(ly_op_name(LY_OP_AVG_POOL2D), &call, LY_E_SHAPE);
    pool.kernel[1] = 2;
    pool.count_include_pad = 2;
    expect_status(ly_op_name(LY_OP_AVG_POOL2D), &call, LY_E_INVALID_ARGUMENT);
    pool.count_include_pad = 1;

    call.params = &up;
    up.scale = 0;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 8, 8});
    expect_status(ly_op_name(LY_OP_UPSAMPLE_NEAREST2D), &call, LY_E_INVALID_ARGUMENT);
    up.scale = 3;
    expect_status(ly_op_name(LY_OP_UPSAMPLE_NEAREST2D), &call, LY_E_SHAPE); /* out must be 12x12 */
    up.scale = 2;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_UPSAMPLE_NEAREST2D, &call), LY_OK);

    call.in[1] = make(&x2, 4, (int64_t[]){1, 1, 4, 3}, NULL);
    call.params = &cat;
    cat.axis = 1;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 2, 4, 4});
    expect_status(ly_op_name(LY_OP_CONCAT), &call, LY_E_SHAPE);
    cat.axis = 4;
    expect_status(ly_op_name(LY_OP_CONCAT), &call, LY_E_INVALID_ARGUMENT);
    cat.axis = 3;
    call.out[0] = make_out(&y, 4, (int64_t[]){1, 1, 4, 7});
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONCAT, &call), LY_OK);
    call.in[2] = NULL;
    call.in[3] = &x2.t; /* a gap before in[3] */
    expect_status(ly_op_name(LY_OP_CONCAT), &call, LY_E_INVALID_ARGUMENT);
    call.in[1] = call.in[3] = NULL;

    call.params = NULL;
    call.in[0] = make(&x, 3, (int64_t[]){1, 6, 2}, NULL);
    call.out[0] = make_out(&y, 3, (int64_t[]){1, 4, 2});
    expect_status(ly_op_name(LY_OP_DFL), &call, LY_E_SHAPE);
    call.in[0] = make(&x, 2, (int64_t[]){8, 2}, NULL);
    expect_status(ly_op_name(LY_OP_DFL), &call, LY_E_SHAPE);

    x.t.dtype = LY_I32;
    call.out[0] = make_out(&y, 2, (int64_t[]){8, 2});
    expect_status(ly_op_name(LY_OP_SILU), &call, LY_E_DTYPE);
    call.in[0] = NULL;
    expect_status(ly_op_name(LY_OP_SIGMOID), &call, LY_E_INVALID_ARGUMENT);
}

/* Every slot of nn.h exists and reports what its output must be. */
static void test_infer_outputs(void **state)
{
    (void)state;
    buf x, w;
    ly_kernel_call call = new_call();
    /* Shapes only: inferring reads no data. */
    assert_int_equal(ly_tensor_init(&x.t, x.data, LY_F32, 4, (int64_t[]){1, 3, 640, 640}), LY_OK);
    call.in[0] = &x.t;
    call.in[1] = make(&w, 4, (int64_t[]){16, 3, 3, 3}, NULL);
    ly_conv2d_params conv = LY_CONV2D_DEFAULTS;
    conv.stride[0] = conv.stride[1] = 2;
    conv.padding[0] = conv.padding[1] = 1;
    call.params = &conv;
    ly_tensor out[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    assert_int_equal(ly_kernel_infer_outputs(ly_op_name(LY_OP_CONV2D), &call, out, &n_out), LY_OK);
    assert_int_equal(n_out, 1);
    assert_int_equal(out[0].ndim, 4);
    assert_int_equal(out[0].shape[1], 16);
    assert_int_equal(out[0].shape[2], 320);
    assert_int_equal(out[0].shape[3], 320);
    const char *slots[] = {ly_op_name(LY_OP_CONV2D),     ly_op_name(LY_OP_MAX_POOL2D),
                           ly_op_name(LY_OP_AVG_POOL2D), ly_op_name(LY_OP_UPSAMPLE_NEAREST2D),
                           ly_op_name(LY_OP_CONCAT),     ly_op_name(LY_OP_SILU),
                           ly_op_name(LY_OP_SIGMOID),    ly_op_name(LY_OP_DFL)};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        const char *name = NULL;
        assert_int_equal(ly_kernel_resolve(slots[i], NULL, &name, NULL), LY_OK);
        assert_non_null(name);
    }
}

/* ---- resize_bilinear2d and add against their formulas ------------------------------- */

static uint64_t rng_state;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *random_buffer(int64_t n, float scale)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = uniform() * scale;
    return p;
}

/* resize_bilinear2d's reference against the formula of nn.h in double, for
 * each coordinate convention, up, down and uneven; add is exact. */
static double resize_source(int64_t d, int64_t in, int64_t out, int align, int half)
{
    if (align) return out > 1 ? (double)d * (double)(in - 1) / (double)(out - 1) : 0.0;
    double s = half ? ((double)d + 0.5) * (double)in / (double)out - 0.5
                    : (double)d * (double)in / (double)out;
    return s < 0 ? 0 : s;
}

static void test_resize_and_add_references(void **state)
{
    (void)state;
    static const struct {
        int64_t h, w, ho, wo;
        int align, half;
    } rs[] = {
        {13, 13, 26, 26, 0, 1}, {52, 52, 26, 26, 0, 1}, {26, 26, 13, 13, 0, 1}, {5, 7, 11, 3, 0, 1},
        {5, 7, 11, 3, 1, 0},    {5, 7, 11, 3, 0, 0},    {1, 1, 4, 4, 0, 1},     {4, 4, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        int64_t xs[4] = {1, 3, rs[i].h, rs[i].w}, ys[4] = {1, 3, rs[i].ho, rs[i].wo};
        rng_state = 500 + i;
        ly_tensor x, y;
        assert_int_equal(
            ly_tensor_init(&x, random_buffer(3 * rs[i].h * rs[i].w, 4.0f), LY_F32, 4, xs), LY_OK);
        assert_int_equal(
            ly_tensor_init(&y, random_buffer(3 * rs[i].ho * rs[i].wo, 1.0f), LY_F32, 4, ys), LY_OK);
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        call.in[0] = &x;
        call.out[0] = &y;
        ly_resize_bilinear2d_params rp = {.size = {rs[i].ho, rs[i].wo},
                                          .align_corners = rs[i].align,
                                          .half_pixel_centers = rs[i].half};
        call.params = &rp;
        ly_status st = ly_kernel_dispatch_op(LY_OP_RESIZE_BILINEAR2D, &call);
        if (st != LY_OK) fail_msg("resize %zu: %s", i, ly_last_error());
        const float *in = x.data, *out = y.data;
        for (int64_t c = 0; c < 3; c++)
            for (int64_t oy = 0; oy < rs[i].ho; oy++)
                for (int64_t ox = 0; ox < rs[i].wo; ox++) {
                    double sy = resize_source(oy, rs[i].h, rs[i].ho, rs[i].align, rs[i].half);
                    double sx = resize_source(ox, rs[i].w, rs[i].wo, rs[i].align, rs[i].half);
                    int64_t y0 = (int64_t)sy, x0 = (int64_t)sx;
                    int64_t y1 = y0 < rs[i].h - 1 ? y0 + 1 : y0,
                            x1 = x0 < rs[i].w - 1 ? x0 + 1 : x0;
                    double ly = sy - (double)y0, lx = sx - (double)x0;
                    const float *p = in + c * rs[i].h * rs[i].w;
                    double want =
                        (1 - ly) * ((1 - lx) * p[y0 * rs[i].w + x0] + lx * p[y0 * rs[i].w + x1]) +
                        ly * ((1 - lx) * p[y1 * rs[i].w + x0] + lx * p[y1 * rs[i].w + x1]);
                    double got = out[(c * rs[i].ho + oy) * rs[i].wo + ox];
                    if (fabs(got - want) > 1e-5)
                        fail_msg(
                            "resize %lldx%lld -> %lldx%lld (align %d, half %d) at (%lld, %lld, "
                            "%lld): %.9g, expected %.9g",
                            (long long)rs[i].h, (long long)rs[i].w, (long long)rs[i].ho,
                            (long long)rs[i].wo, rs[i].align, rs[i].half, (long long)c,
                            (long long)oy, (long long)ox, got, want);
                }
        free(x.data);
        free(y.data);
    }
    /* Both conventions at once, or no size, are refused. */
    int64_t s4[4] = {1, 1, 2, 2};
    float v[4] = {1, 2, 3, 4}, o[16];
    ly_tensor x, y;
    ly_tensor_init(&x, v, LY_F32, 4, s4);
    int64_t s16[4] = {1, 1, 4, 4};
    ly_tensor_init(&y, o, LY_F32, 4, s16);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &x;
    call.out[0] = &y;
    ly_resize_bilinear2d_params rp = {.size = {4, 4}, .align_corners = 1, .half_pixel_centers = 1};
    call.params = &rp;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_RESIZE_BILINEAR2D, &call), LY_E_INVALID_ARGUMENT);
    rp.align_corners = 0;
    rp.size[0] = 0;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_RESIZE_BILINEAR2D, &call), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "params.size"));

    /* add */
    int64_t shape[3] = {2, 3, 37};
    rng_state = 77;
    ly_tensor a, b, sum;
    ly_tensor_init(&a, random_buffer(222, 10.0f), LY_F32, 3, shape);
    ly_tensor_init(&b, random_buffer(222, 10.0f), LY_F32, 3, shape);
    ly_tensor_init(&sum, random_buffer(222, 1.0f), LY_F32, 3, shape);
    ly_kernel_call_init(&call);
    call.in[0] = &a;
    call.in[1] = &b;
    call.out[0] = &sum;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_ADD, &call), LY_OK);
    for (int i = 0; i < 222; i++)
        assert_true(((float *)sum.data)[i] == ((float *)a.data)[i] + ((float *)b.data)[i]);
    b.shape[2] = 36;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_ADD, &call), LY_E_SHAPE);
    free(a.data);
    free(b.data);
    free(sum.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_plain),
        cmocka_unit_test(test_conv2d_padding),
        cmocka_unit_test(test_conv2d_stride2),
        cmocka_unit_test(test_conv2d_dilation),
        cmocka_unit_test(test_conv2d_groups_and_channels),
        cmocka_unit_test(test_conv2d_bias_activations_residual),
        cmocka_unit_test(test_conv2d_matches_naive_loop),
        cmocka_unit_test(test_max_pool2d),
        cmocka_unit_test(test_avg_pool2d),
        cmocka_unit_test(test_upsample_nearest2d),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_silu_sigmoid),
        cmocka_unit_test(test_dfl),
        cmocka_unit_test(test_conv2d_bad_calls),
        cmocka_unit_test(test_conv2d_int8),
        cmocka_unit_test(test_other_slots_bad_calls),
        cmocka_unit_test(test_infer_outputs),
        cmocka_unit_test(test_resize_and_add_references),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
