/* SPDX-License-Identifier: MIT */
/*
 * The transformer ops' references against values worked out by hand or in
 * double from PyTorch's definitions: broadcasting, NaN and signed-zero rules,
 * Python slicing, gather/index_select bounds, topk's order, cumsum's
 * accumulation, the matrix products, softmax and the norms; and the manifest
 * (every op has a contract, a reference and a parity rule).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "libreyolo/kernels.h"
#include "ops/ops_internal.h"
#include "test_util.h"

#include <math.h>
#include <string.h>

static ly_tensor t_f32(float *data, int ndim, const int64_t *shape)
{
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, data, LY_F32, ndim, shape), LY_OK);
    return t;
}

static ly_tensor t_of(void *data, ly_dtype dtype, int ndim, const int64_t *shape)
{
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, data, dtype, ndim, shape), LY_OK);
    return t;
}

/* Dispatch `op` on in[0..n) into out[0..n_out) with `params`; LY_OK expected. */
static void run(ly_op op, int n, const ly_tensor *in, int n_out, ly_tensor *out, const void *params)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    for (int i = 0; i < n; i++)
        call.in[i] = in[i].data || ly_tensor_numel(&in[i]) == 0 ? &in[i] : NULL;
    for (int i = 0; i < n_out; i++)
        call.out[i] = &out[i];
    call.params = params;
    call.threads = 1;
    ly_status st = ly_kernel_run_impl(ly_op_name(op), "reference", &call);
    if (st != LY_OK) fail_msg("%s: %s", ly_op_name(op), ly_last_error());
}

static void same_bits(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("element %d: %.9g, expected %.9g", i, (double)got[i], (double)want[i]);
}

static void test_manifest(void **state)
{
    (void)state;
    for (int i = 0; i < LY_OP_COUNT; i++) {
        const ly_op_def *d = ly_op_def_of((ly_op)i);
        assert_non_null(d->name);
        assert_non_null(d->contract);
        assert_non_null(d->reference);
        assert_non_null(d->defaults);
        assert_true(d->params_size > 0);
        assert_non_null(d->cases);
        assert_non_null(d->cases->build);
        ly_op back;
        assert_int_equal(ly_op_from_name(d->name, &back), LY_OK);
        assert_int_equal((int)back, i);
    }
    ly_op none;
    assert_int_equal(ly_op_from_name("no_such_op", &none), LY_E_NOT_FOUND);
}

static void test_broadcasting(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c[2] = {100, 200}, y[6];
    ly_tensor in[2] = {t_f32(a, 2, (int64_t[]){2, 3}), t_f32(b, 1, (int64_t[]){3})};
    ly_tensor out = t_f32(y, 2, (int64_t[]){2, 3});
    run(LY_OP_ADD, 2, in, 1, &out, NULL);
    same_bits(y, (float[]){11, 22, 33, 14, 25, 36}, 6);
    /* [2, 1] - [3]: both sides broadcast. */
    in[0] = t_f32(c, 2, (int64_t[]){2, 1});
    run(LY_OP_SUB, 2, in, 1, &out, NULL);
    same_bits(y, (float[]){90, 80, 70, 190, 180, 170}, 6);
    /* Shapes that do not broadcast are refused, naming both. */
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    ly_tensor bad = t_f32(c, 1, (int64_t[]){2});
    call.in[0] = &in[1];
    call.in[1] = &bad;
    call.out[0] = &out;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_MUL, &call), LY_E_SHAPE);
    assert_non_null(strstr(ly_last_error(), "do not broadcast"));
}

static void test_nan_and_zero_rules(void **state)
{
    (void)state;
    float a[4] = {NAN, 1.0f, -0.0f, 2.0f}, b[4] = {1.0f, NAN, 0.0f, 3.0f}, y[4];
    ly_tensor in[2] = {t_f32(a, 1, (int64_t[]){4}), t_f32(b, 1, (int64_t[]){4})};
    ly_tensor out = t_f32(y, 1, (int64_t[]){4});
    run(LY_OP_MAXIMUM, 2, in, 1, &out, NULL);
    assert_true(isnan(y[0]) && isnan(y[1]));
    assert_true(y[2] == 0.0f && signbit(y[2])); /* std::max(-0, +0) keeps a: (a < b) ? b : a */
    assert_true(y[3] == 3.0f);
    run(LY_OP_MINIMUM, 2, in, 1, &out, NULL);
    assert_true(isnan(y[0]) && isnan(y[1]));
    assert_true(y[2] == 0.0f && signbit(y[2])); /* std::min keeps a as well */
    /* relu: NaN stays, -0 becomes +0; clamp passes NaN. */
    float x[4] = {-1.0f, -0.0f, NAN, 2.5f};
    ly_tensor xi = t_f32(x, 1, (int64_t[]){4});
    run(LY_OP_RELU, 1, &xi, 1, &out, NULL);
    assert_true(y[0] == 0.0f && y[1] == 0.0f && !signbit(y[1]) && isnan(y[2]) && y[3] == 2.5f);
    ly_clamp_params cp = {.min = -0.5, .max = 1.0};
    run(LY_OP_CLAMP, 1, &xi, 1, &out, &cp);
    assert_true(y[0] == -0.5f && y[1] == 0.0f && isnan(y[2]) && y[3] == 1.0f);
    /* where picks by a u8 condition, broadcast. */
    uint8_t cond[2] = {1, 0};
    ly_tensor w[3] = {t_of(cond, LY_U8, 2, (int64_t[]){2, 1}), t_f32(a, 1, (int64_t[]){4}),
                      t_f32(b, 1, (int64_t[]){4})};
    float z[8];
    ly_tensor wout = t_f32(z, 2, (int64_t[]){2, 4});
    run(LY_OP_WHERE, 3, w, 1, &wout, NULL);
    assert_true(isnan(z[0]) && z[1] == 1.0f && z[4] == 1.0f && isnan(z[5]) && z[7] == 3.0f);
}

static void test_gelu(void **state)
{
    (void)state;
    float x[3] = {-1.0f, 0.5f, 3.0f}, y[3];
    ly_tensor in = t_f32(x, 1, (int64_t[]){3}), out = t_f32(y, 1, (int64_t[]){3});
    run(LY_OP_GELU, 1, &in, 1, &out, NULL);
    for (int i = 0; i < 3; i++) {
        double want = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
        assert_true(fabs(y[i] - want) < 1e-6);
    }
}

static void test_slice_permute_reshape(void **state)
{
    (void)state;
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    ly_tensor in = t_f32(x, 3, (int64_t[]){2, 3, 4});
    float y[24];
    /* x[:, -2:, ::2] -> [2, 2, 2] in two slices. */
    ly_slice_params sp = {.axis = 1, .start = -2, .end = INT64_MAX, .step = 1};
    ly_tensor mid = t_f32(y, 3, (int64_t[]){2, 2, 4});
    run(LY_OP_SLICE, 1, &in, 1, &mid, &sp);
    same_bits(y, (float[]){4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}, 16);
    float z[8];
    ly_slice_params step = {.axis = 2, .start = 0, .end = 100, .step = 2};
    ly_tensor out = t_f32(z, 3, (int64_t[]){2, 2, 2});
    run(LY_OP_SLICE, 1, &mid, 1, &out, &step);
    same_bits(z, (float[]){4, 6, 8, 10, 16, 18, 20, 22}, 8);
    /* permute [2,3,4] -> [4,2,3] */
    ly_permute_params pp = {.ndim = 3, .perm = {2, 0, 1}};
    ly_tensor perm = t_f32(y, 3, (int64_t[]){4, 2, 3});
    run(LY_OP_PERMUTE, 1, &in, 1, &perm, &pp);
    assert_true(y[0] == 0 && y[1] == 4 && y[3] == 12 && y[6] == 1 && y[23] == 23);
    /* reshape with -1; a size that does not divide is refused. */
    ly_reshape_params rp = {.ndim = 2, .shape = {-1, 6}};
    ly_tensor flat = t_f32(y, 2, (int64_t[]){4, 6});
    run(LY_OP_RESHAPE, 1, &in, 1, &flat, &rp);
    same_bits(y, x, 24);
    ly_reshape_params bad = {.ndim = 2, .shape = {-1, 5}};
    ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
    int n_out;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &in;
    call.params = &bad;
    assert_int_equal(ly_kernel_infer_outputs("reshape", &call, shapes, &n_out), LY_E_SHAPE);
}

static void test_gather_index_select(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t idx[4] = {2, 0, 1, 2};
    ly_tensor in[2] = {t_f32(x, 2, (int64_t[]){2, 3}), t_of(idx, LY_I64, 2, (int64_t[]){2, 2})};
    float y[4];
    ly_tensor out = t_f32(y, 2, (int64_t[]){2, 2});
    ly_gather_params g = {.axis = 1};
    run(LY_OP_GATHER, 2, in, 1, &out, &g); /* out[i][j] = x[i][idx[i][j]] */
    same_bits(y, (float[]){3, 1, 5, 6}, 4);
    int64_t rows[3] = {1, 1, 0};
    ly_tensor sel[2] = {in[0], t_of(rows, LY_I64, 1, (int64_t[]){3})};
    float z[9];
    ly_tensor zout = t_f32(z, 2, (int64_t[]){3, 3});
    ly_gather_params s = {.axis = 0};
    run(LY_OP_INDEX_SELECT, 2, sel, 1, &zout, &s);
    same_bits(z, (float[]){4, 5, 6, 4, 5, 6, 1, 2, 3}, 9);
    /* An index out of range is an error naming it. */
    rows[2] = 2;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &sel[0];
    call.in[1] = &sel[1];
    call.out[0] = &zout;
    call.params = &s;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_INDEX_SELECT, &call), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "index[2] is 2"));
}

static void test_topk_order(void **state)
{
    (void)state;
    float x[7] = {1.0f, 3.0f, NAN, 3.0f, -2.0f, 3.0f, 0.5f};
    ly_tensor in = t_f32(x, 1, (int64_t[]){7});
    float v[4];
    int64_t i[4];
    ly_tensor out[2] = {t_f32(v, 1, (int64_t[]){4}), t_of(i, LY_I64, 1, (int64_t[]){4})};
    ly_topk_params p = {.k = 4, .axis = 0, .largest = 1};
    run(LY_OP_TOPK, 1, &in, 2, out, &p);
    /* NaN first, then the tied 3s by index. */
    assert_true(isnan(v[0]) && i[0] == 2);
    assert_true(v[1] == 3.0f && i[1] == 1 && i[2] == 3 && i[3] == 5);
    p.largest = 0;
    run(LY_OP_TOPK, 1, &in, 2, out, &p);
    assert_true(v[0] == -2.0f && i[0] == 4 && v[1] == 0.5f && v[2] == 1.0f && i[3] == 1);
}

static void test_cumsum(void **state)
{
    (void)state;
    /* 1 + 2^24 + 1 + 1: a float accumulator would lose the ones; PyTorch sums in double. */
    float x[4] = {1.0f, 16777216.0f, 1.0f, 1.0f}, y[4];
    ly_tensor in = t_f32(x, 1, (int64_t[]){4}), out = t_f32(y, 1, (int64_t[]){4});
    run(LY_OP_CUMSUM, 1, &in, 1, &out, NULL);
    assert_true(y[0] == 1.0f && y[1] == 16777216.0f && y[2] == 16777218.0f && y[3] == 16777220.0f);
}

static void test_linear_matmul(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, 1, 0, 1, 0}, b[2] = {0.5f, -1}, y[4];
    ly_tensor in[3] = {t_f32(x, 2, (int64_t[]){2, 3}), t_f32(w, 2, (int64_t[]){2, 3}),
                       t_f32(b, 1, (int64_t[]){2})};
    ly_tensor out = t_f32(y, 2, (int64_t[]){2, 2});
    run(LY_OP_LINEAR, 3, in, 1, &out, NULL);
    same_bits(y, (float[]){4.5f, 1.0f, 10.5f, 4.0f}, 4);
    /* matmul [2,1,2] x [1,2,2] broadcast to [2,2,2]; and q.kT. */
    float a[4] = {1, 2, 3, 4}, m[4] = {1, 1, 0, 2}, r[8];
    ly_tensor mm[2] = {t_f32(a, 3, (int64_t[]){2, 1, 2}), t_f32(m, 3, (int64_t[]){1, 2, 2})};
    ly_tensor mout = t_f32(r, 3, (int64_t[]){2, 1, 2});
    run(LY_OP_MATMUL, 2, mm, 1, &mout, NULL);
    same_bits(r, (float[]){1, 5, 3, 11}, 4);
    ly_matmul_params t = {.transpose_b = 1};
    run(LY_OP_MATMUL, 2, mm, 1, &mout, &t);
    same_bits(r, (float[]){3, 4, 7, 8}, 4);
}

static void test_softmax_and_norms(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 1000, 1000, 1000}, y[6];
    ly_tensor in = t_f32(x, 2, (int64_t[]){2, 3}), out = t_f32(y, 2, (int64_t[]){2, 3});
    run(LY_OP_SOFTMAX, 1, &in, 1, &out, NULL);
    double s = exp(-2.0) + exp(-1.0) + 1.0;
    assert_true(fabs(y[0] - exp(-2.0) / s) < 1e-7 && fabs(y[2] - 1.0 / s) < 1e-7);
    assert_true(fabs(y[3] - 1.0 / 3.0) < 1e-7); /* large logits stay finite */
    float w[3] = {2, 1, 0.5f}, b[3] = {0, 1, -1};
    ly_tensor ln[3] = {in, t_f32(w, 1, (int64_t[]){3}), t_f32(b, 1, (int64_t[]){3})};
    ly_norm_params eps = {.eps = 1e-5};
    run(LY_OP_LAYER_NORM, 3, ln, 1, &out, &eps);
    double var = 2.0 / 3.0, r = 1.0 / sqrt(var + 1e-5);
    assert_true(fabs(y[0] - (float)(-1.0 * r) * 2.0f) < 1e-6);
    assert_true(fabs(y[1] - 1.0f) < 1e-6);
    assert_true(fabs(y[5] - (float)(0.0 * r)) * 0.5f - 1.0f < 1e-6);
    ly_norm_params rms = {.eps = 1e-6};
    run(LY_OP_RMS_NORM, 2, ln, 1, &out, &rms);
    double ms = (1.0 + 4.0 + 9.0) / 3.0;
    assert_true(fabs(y[1] - (float)(2.0 / sqrt(ms + 1e-6)) * 1.0f) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest),
        cmocka_unit_test(test_broadcasting),
        cmocka_unit_test(test_nan_and_zero_rules),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_slice_permute_reshape),
        cmocka_unit_test(test_gather_index_select),
        cmocka_unit_test(test_topk_order),
        cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_linear_matmul),
        cmocka_unit_test(test_softmax_and_norms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
