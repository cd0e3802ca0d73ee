/* SPDX-License-Identifier: MIT */
/*
 * The reference's literal behaviours (kernels.md section 2), one test each, run on
 * the "reference" implementation of each slot; plus the validators' status codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ops/ops_internal.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "libreyolo/quant.h"
#include "ops/quant/numerics.h"
#include "ops/quant/reference.h"

/* ---- Helpers -------------------------------------------------------------------- */

/* Uniform in [-1, 1). */
static float uniform(uint64_t *state)
{
    return (float)((double)(ly_test_splitmix64(state) >> 11) * 0x1p-52 - 1.0);
}

static void fill_uniform(float *x, int64_t n, float scale, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = uniform(&seed) * scale;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static ly_tensor mk(void *data, ly_dtype dtype, int ndim, const int64_t *shape)
{
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, data, dtype, ndim, shape), LY_OK);
    return t;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static ly_kernel_call make_call(const ly_tensor *a, const ly_tensor *b, const ly_tensor *c,
                                const ly_tensor *d, ly_tensor *out)
{
    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = a;
    call.in[1] = b;
    call.in[2] = c;
    call.in[3] = d;
    call.out[0] = out;
    return call;
}

static ly_status run_ref(const char *slot, const ly_kernel_call *call)
{
    return ly_kernel_run_impl(slot, "reference", call);
}

static void assert_same_bits(float got, float want)
{
    if (bits_of(got) != bits_of(want))
        fail_msg("got %a (0x%08x), expected %a (0x%08x)", (double)got, bits_of(got), (double)want,
                 bits_of(want));
}

/* ---- E2M1 and the STE ------------------------------------------------------------------ */

static void test_e2m1_vector(void **state)
{
    (void)state;
    const float in[] = {0.0f, 0.24f, 0.26f, 0.5f, 1.2f,  1.6f,   2.4f,
                        3.4f, 4.9f,  5.1f,  7.5f, -2.6f, 100.0f, -100.0f};
    const float want[] = {0.0f, 0.0f, 0.5f, 0.5f, 1.0f,  1.5f, 2.0f,
                          3.0f, 4.0f, 6.0f, 6.0f, -3.0f, 6.0f, -6.0f};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        assert_same_bits(ly_nm_fake_quant_e2m1(in[i]), want[i]);
    /* Ties go to the lower magnitude (not to even: RNE would give 0.75 -> 1). */
    const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float down[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f};
    for (int i = 0; i < 7; i++) {
        assert_same_bits(ly_nm_fake_quant_e2m1(ties[i]), down[i]);
        assert_same_bits(ly_nm_fake_quant_e2m1(-ties[i]), ties[i] == 0.25f ? 0.0f : -down[i]);
    }
    assert_true(isnan(ly_nm_fake_quant_e2m1(NAN)));
}

static void test_ste_literal(void **state)
{
    (void)state;
    /* x + (q - x) is not q when q - x rounds. */
    assert_same_bits(ly_nm_ste(1e9f, 6.0f), 0.0f);
    assert_same_bits(ly_nm_fake_quant_e2m1(1e9f), 0.0f);
    assert_true(isnan(ly_nm_ste(INFINITY, 6.0f)));
    assert_true(isnan(ly_nm_ste(-INFINITY, -6.0f)));
    /* Through a slot: fp8 of +-inf is NaN, of NaN is NaN. */
    float x[3] = {INFINITY, -INFINITY, NAN}, s = 1.0f, out[3];
    ly_tensor xt = mk(x, LY_F32, 1, SHAPE(3)), st = mk(&s, LY_F32, 1, SHAPE(1));
    ly_tensor ot = mk(out, LY_F32, 1, SHAPE(3));
    ly_kernel_call call = make_call(&xt, &st, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_FP8), &call), LY_OK);
    for (int i = 0; i < 3; i++)
        assert_true(isnan(out[i]));
}

/* ---- int8 per channel ----------------------------------------------------------------- */

static void test_int8_per_channel_nan_inf_code(void **state)
{
    (void)state;
    /* NaN, +-inf and anything past int64 convert to INT64_MIN: code -128. */
    float w[5] = {NAN, INFINITY, -INFINITY, 1e30f, 3.0f}, scale = 0.5f, out[5];
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(1, 5)), st = mk(&scale, LY_F32, 1, SHAPE(1));
    ly_tensor ot = mk(out, LY_F32, 2, SHAPE(1, 5));
    ly_kernel_call call = make_call(&wt, &st, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    for (int i = 0; i < 4; i++)
        assert_same_bits(out[i], -64.0f);
    assert_same_bits(out[4], 3.0f);
}

static void test_int8_per_channel_backward_mask(void **state)
{
    (void)state;
    float w[6] = {-128.4f, -128.6f, 127.4f, 127.6f, NAN, 0.0f};
    float grad[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, NAN}, scale = 1.0f, out[6], fwd[6];
    /* One channel (axis 0 of [1, 6]) with the frozen scale 1: the codes are the values. */
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(1, 6)), st = mk(&scale, LY_F32, 1, SHAPE(1));
    ly_tensor gt = mk(grad, LY_F32, 2, SHAPE(1, 6)), ot = mk(out, LY_F32, 2, SHAPE(1, 6));
    ly_tensor ft = mk(fwd, LY_F32, 2, SHAPE(1, 6));
    ly_kernel_call call = make_call(&gt, &wt, &st, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL_BACKWARD), &call), LY_OK);
    assert_same_bits(out[0], 1.0f);
    assert_same_bits(out[1], 0.0f);
    assert_same_bits(out[2], 1.0f);
    assert_same_bits(out[3], 0.0f);
    assert_same_bits(out[4], 0.0f);
    assert_true(isnan(out[5])); /* torch multiplies by the mask: NaN * 1 */
    /* The frozen scale reaches code -128 in the forward. */
    call = make_call(&wt, &st, NULL, NULL, &ft);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    assert_same_bits(fwd[0], -128.0f);
    assert_same_bits(fwd[1], -128.0f);
    assert_same_bits(fwd[2], 127.0f);
    assert_same_bits(fwd[3], 127.0f);
}

static void test_int8_reciprocal_multiply(void **state)
{
    (void)state;
    /* x / s rounds to 46, x * (1/s) to 47: torch multiplies by the reciprocal. */
    float x = 0x1.49d2fap+5f, s = 0x1.c5f394p-1f, out;
    assert_true(nearbyintf(x / s) == 46.0f);
    assert_true(nearbyintf(x * (1.0f / s)) == 47.0f);
    ly_tensor xt = mk(&x, LY_F32, 2, SHAPE(1, 1)), st = mk(&s, LY_F32, 1, SHAPE(1));
    ly_tensor ot = mk(&out, LY_F32, 2, SHAPE(1, 1));
    ly_kernel_call call = make_call(&xt, &st, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    assert_same_bits(out, 47.0f * s);
}

static void test_int8_per_channel_dynamic_scale_and_axis(void **state)
{
    (void)state;
    enum { C = 3, K = 4 };
    float w[C * K], out_a[C * K], out_b[C * K], out_t[C * K], wt_data[K * C];
    fill_uniform(w, C * K, 2.0f, 7);
    /* Axis 0 on [C, K] equals axis -1 (= 1) on its transpose [K, C]. */
    for (int c = 0; c < C; c++)
        for (int k = 0; k < K; k++)
            wt_data[k * C + c] = w[c * K + k];
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(C, K)), ot = mk(out_a, LY_F32, 2, SHAPE(C, K));
    ly_kernel_call call = make_call(&wt, NULL, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    ly_tensor wtt = mk(wt_data, LY_F32, 2, SHAPE(K, C)), ott = mk(out_t, LY_F32, 2, SHAPE(K, C));
    call = make_call(&wtt, NULL, NULL, NULL, &ott);
    call.params = &(ly_fake_quant_int8_per_channel_params){.axis = -1};
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    for (int c = 0; c < C; c++)
        for (int k = 0; k < K; k++)
            assert_same_bits(out_t[k * C + c], out_a[c * K + k]);
    /* The dynamic scale is int8_weight_qparams: passing it frozen changes nothing, and
     * the channel maximum maps to code 127 exactly. */
    float scale[C];
    ly_tensor sc = mk(scale, LY_F32, 1, SHAPE(C));
    assert_int_equal(ly_int8_weight_qparams(&wt, 0, &sc), LY_OK);
    ly_tensor obt = mk(out_b, LY_F32, 2, SHAPE(C, K));
    call = make_call(&wt, &sc, NULL, NULL, &obt);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &call), LY_OK);
    assert_memory_equal(out_a, out_b, sizeof out_a);
    for (int c = 0; c < C; c++) {
        float amax = 0.0f;
        for (int k = 0; k < K; k++)
            amax = fmaxf(amax, fabsf(w[c * K + k]));
        assert_same_bits(scale[c], amax / 127.0f);
        for (int k = 0; k < K; k++) {
            float code = out_a[c * K + k] / scale[c];
            assert_true(code >= -127.0f && code <= 127.0f);
        }
    }
}

/* ---- int8 affine ---------------------------------------------------------------------- */

static void test_int8_affine(void **state)
{
    (void)state;
    float scale;
    int32_t zp;
    assert_int_equal(ly_int8_act_qparams(-1.0f, 3.0f, &scale, &zp), LY_OK);
    assert_int_equal(zp, -64);
    assert_same_bits(scale, 4.0f / 255.0f);
    enum { N = 1001 };
    float x[N], out[N], lo = -1.0f, hi = 3.0f;
    for (int i = 0; i < N; i++)
        x[i] = (float)(-1.0 + 4.0 * i / (N - 1));
    ly_tensor xt = mk(x, LY_F32, 1, SHAPE(N)), ot = mk(out, LY_F32, 1, SHAPE(N));
    ly_tensor lt = mk(&lo, LY_F32, 1, SHAPE(1)), ht = mk(&hi, LY_F32, 1, SHAPE(1));
    ly_kernel_call call = make_call(&xt, &lt, &ht, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &call), LY_OK);
    for (int i = 0; i < N; i++) {
        assert_true(fabsf(x[i] - out[i]) < 4.0f / 255.0f);
        /* out = (code - zp) * scale with an integer code in [-128, 127]. */
        float code = nearbyintf(out[i] / scale) + (float)zp;
        assert_true(code >= -128.0f && code <= 127.0f);
    }
    /* Out of range: clamped forward, masked backward. NaN: code -128. */
    float y[4] = {10.0f, -10.0f, NAN, 0.5f}, g[4] = {1.0f, 1.0f, 1.0f, 1.0f}, fy[4], gy[4];
    ly_tensor yt = mk(y, LY_F32, 1, SHAPE(4)), gt = mk(g, LY_F32, 1, SHAPE(4));
    ly_tensor fyt = mk(fy, LY_F32, 1, SHAPE(4)), gyt = mk(gy, LY_F32, 1, SHAPE(4));
    call = make_call(&yt, &lt, &ht, NULL, &fyt);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &call), LY_OK);
    assert_same_bits(fy[0], (float)(127 + 64) * scale);
    assert_same_bits(fy[1], (float)(-128 + 64) * scale);
    assert_same_bits(fy[2], (float)(-128 + 64) * scale);
    call = make_call(&gt, &yt, &lt, &ht, &gyt);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE_BACKWARD), &call), LY_OK);
    assert_same_bits(gy[0], 0.0f);
    assert_same_bits(gy[1], 0.0f);
    assert_same_bits(gy[2], 0.0f);
    assert_same_bits(gy[3], 1.0f);
    /* A NaN range has a NaN scale and the x86 cast's zero point. */
    assert_int_equal(ly_int8_act_qparams(NAN, 1.0f, &scale, &zp), LY_OK);
    assert_true(isnan(scale));
    assert_int_equal(zp, INT32_MIN);
}

/* ---- fp8 ----------------------------------------------------------------------------------- */

static void test_fp8_forward_and_broadcast(void **state)
{
    (void)state;
    enum { R = 4, K = 6 };
    float x[R * K], scale[R], one = 0.01f, out[R * K], grad[R * K], gout[R * K];
    fill_uniform(x, R * K, 3.0f, 11);
    x[0] = 1e9f; /* saturates: the STE moves it away from 448 * s */
    x[1] = -0.0f;
    ly_tensor xt = mk(x, LY_F32, 2, SHAPE(R, K)), ot = mk(out, LY_F32, 2, SHAPE(R, K));
    ly_tensor sc = mk(scale, LY_F32, 1, SHAPE(R));
    assert_int_equal(ly_fp8_weight_qparams(&xt, false, &sc), LY_OK);
    scale[2] = -1.0f; /* clamped to 1e-12 */
    ly_kernel_call call = make_call(&xt, &sc, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_FP8), &call), LY_OK);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            float s = ly_nm_clamp_min(scale[r], 1e-12f), v = x[r * K + k];
            float y = fminf(fmaxf(v / s, -448.0f), 448.0f);
            float q = ly_e4m3_to_fp32(ly_fp32_to_e4m3(y)) * s;
            assert_same_bits(out[r * K + k], v + (q - v));
        }
    assert_same_bits(out[1], 0.0f); /* -0 + (-0 - -0) = +0 */
    /* One scale for every row. */
    ly_tensor one_t = mk(&one, LY_F32, 1, SHAPE(1));
    call = make_call(&xt, &one_t, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_FP8), &call), LY_OK);
    for (int i = 0; i < R * K; i++) {
        float y = fminf(fmaxf(x[i] / one, -448.0f), 448.0f);
        float q = ly_e4m3_to_fp32(ly_fp32_to_e4m3(y)) * one;
        assert_same_bits(out[i], x[i] + (q - x[i]));
    }
    /* Backward is the identity. */
    fill_uniform(grad, R * K, 1.0f, 12);
    grad[3] = NAN;
    ly_tensor gt = mk(grad, LY_F32, 2, SHAPE(R, K)), got = mk(gout, LY_F32, 2, SHAPE(R, K));
    call = make_call(&gt, &xt, &sc, NULL, &got);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_FP8_BACKWARD), &call), LY_OK);
    assert_memory_equal(grad, gout, sizeof grad);
}

/* ---- int grouped -------------------------------------------------------------------------- */

static void test_int_grouped(void **state)
{
    (void)state;
    enum { R = 3, IN = 20, G = 8, NG = 3 };
    float w[R * IN], out[R * IN], scale[R * NG];
    fill_uniform(w, R * IN, 1.0f, 21);
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(R, IN)), ot = mk(out, LY_F32, 2, SHAPE(R, IN));
    ly_fake_quant_int_grouped_params grouped = {.bits = 4, .group_size = G};
    ly_kernel_call call = make_call(&wt, NULL, NULL, NULL, &ot);
    call.params = &grouped;
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &call), LY_OK);
    ly_tensor sc = mk(scale, LY_F32, 2, SHAPE(R, NG));
    assert_int_equal(ly_int_group_qparams(&wt, 4, G, &sc), LY_OK);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < IN; c++) {
            float s = scale[r * NG + c / G], v = w[r * IN + c];
            float q = fminf(fmaxf(nearbyintf(v / s), -8.0f), 7.0f) * s;
            assert_same_bits(out[r * IN + c], v + (q - v));
            /* A dynamic scale never reaches qmin. */
            assert_true(out[r * IN + c] / s > -7.5f);
        }
    /* A frozen small scale reaches qmin = -8 (4-bit) and clamps at qmax. */
    float frozen[R * NG];
    for (int i = 0; i < R * NG; i++)
        frozen[i] = 0.01f;
    ly_tensor ft = mk(frozen, LY_F32, 2, SHAPE(R, NG));
    call = make_call(&wt, &ft, NULL, NULL, &ot);
    call.params = &grouped;
    w[0] = -1.0f;
    w[1] = 1.0f;
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &call), LY_OK);
    assert_same_bits(out[0], -1.0f + (-8.0f * 0.01f - -1.0f));
    assert_same_bits(out[1], 1.0f + (7.0f * 0.01f - 1.0f));
    /* IEEE division, not a reciprocal: x / s rounds to 7 where x * (1/s) gives 6. */
    float x = 0x1.4cd334p+2f, s = 0x1.99a17ap-1f, o;
    assert_true(nearbyintf(x / s) == 7.0f && nearbyintf(x * (1.0f / s)) == 6.0f);
    ly_tensor xt = mk(&x, LY_F32, 2, SHAPE(1, 1)), st = mk(&s, LY_F32, 2, SHAPE(1, 1));
    ly_tensor o_t = mk(&o, LY_F32, 2, SHAPE(1, 1));
    call = make_call(&xt, &st, NULL, NULL, &o_t);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &call), LY_OK);
    assert_same_bits(o, x + (7.0f * s - x));
    /* Backward: identity, even where the forward clamped. */
    float g[R * IN], gout[R * IN];
    fill_uniform(g, R * IN, 1.0f, 22);
    ly_tensor gt = mk(g, LY_F32, 2, SHAPE(R, IN)), got = mk(gout, LY_F32, 2, SHAPE(R, IN));
    call = make_call(&gt, &wt, &ft, NULL, &got);
    call.params = &grouped;
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED_BACKWARD), &call), LY_OK);
    assert_memory_equal(g, gout, sizeof g);
}

/* ---- nvfp4 ------------------------------------------------------------------------------------
 */

static ly_status run_nvfp4_weight(float *w, int64_t rows, int64_t cols, float amax, float *out)
{
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(rows, cols)), ot = mk(out, LY_F32, 2, SHAPE(rows, cols));
    ly_tensor at = mk(&amax, LY_F32, 1, SHAPE(1));
    ly_kernel_call call = make_call(&wt, &at, NULL, NULL, &ot);
    return run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &call);
}

static void test_nvfp4_tiny_block_saturates(void **state)
{
    (void)state;
    float w[32] = {0}, out[32];
    w[0] = 2688.0f; /* block 0 holds the tensor maximum: ts = 1 */
    w[16] = 1e-6f;  /* block 1: amax / 6 is far under the smallest E4M3: bs = 0 */
    w[17] = -3e-7f;
    assert_int_equal(run_nvfp4_weight(w, 1, 32, 2688.0f, out), LY_OK);
    assert_same_bits(ly_nm_nvfp4_block_scale(1e-6f, 1.0f), 0.0f);
    assert_same_bits(out[16], 6.0f * 1e-12f); /* eff = 1e-12: the element saturates */
    assert_same_bits(out[17], -6.0f * 1e-12f);
    assert_same_bits(out[18], 0.0f);
    assert_same_bits(out[0], 2688.0f);
}

static void test_nvfp4_nan_poisons(void **state)
{
    (void)state;
    enum { N = 48 };
    float w[N], out[N];
    fill_uniform(w, N, 1.0f, 31);
    w[20] = NAN;
    assert_int_equal(run_nvfp4_weight(w, 1, N, 1.0f, out), LY_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(isnan(out[i]) != 0, i >= 16 && i < 32);
    /* Dynamic: the tensor amax is NaN, so everything is. */
    ly_tensor xt = mk(w, LY_F32, 2, SHAPE(2, 24)), ot = mk(out, LY_F32, 2, SHAPE(2, 24));
    ly_kernel_call call = make_call(&xt, NULL, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), &call), LY_OK);
    for (int i = 0; i < N; i++)
        assert_true(isnan(out[i]));
    /* Which NaN comes out is fixed by the source, not by the compiler's operand order:
     * a signaling tensor_amax gives ts = 0x7FC00001, but bs is the E4M3 NaN
     * (0x7FC00000), and eff and every output take bs's NaN. */
    float signaling;
    uint32_t snan_bits = 0x7F800001u;
    memcpy(&signaling, &snan_bits, sizeof signaling);
    fill_uniform(w, N, 1.0f, 32);
    assert_int_equal(run_nvfp4_weight(w, 1, N, signaling, out), LY_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(bits_of(out[i]), 0x7FC00000u);
    float nan_a = ly_nm_bits_f32(0xFFC00123u), nan_b = ly_nm_bits_f32(0x7F800456u);
    assert_int_equal(bits_of(ly_nm_mul_nan_first(nan_a, nan_b)), 0xFFC00123u);
    assert_int_equal(bits_of(ly_nm_mul_nan_first(nan_b, nan_a)), 0x7FC00456u);
    assert_int_equal(bits_of(ly_nm_add_nan_first(1.0f, nan_b)), 0x7FC00456u);
    assert_int_equal(bits_of(ly_nm_ste(nan_b, 0.0f)), 0x7FC00456u);
}

static void test_nvfp4_sign_of_zero_and_formula(void **state)
{
    (void)state;
    enum { R = 3, IN = 40 };
    float w[R * IN], out[R * IN], dyn[R * IN];
    fill_uniform(w, R * IN, 2.0f, 41);
    w[1] = -1e-4f; /* rounds to level 0: +0.0 through the STE */
    float amax = 0.0f;
    for (int i = 0; i < R * IN; i++)
        amax = fmaxf(amax, fabsf(w[i]));
    assert_int_equal(run_nvfp4_weight(w, R, IN, amax, out), LY_OK);
    assert_int_equal(bits_of(out[1]), 0x00000000u);
    float ts = fmaxf(amax / 2688.0f, 1e-12f);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < IN; b += 16) {
            float bamax = 0.0f;
            for (int c = b; c < b + 16 && c < IN; c++)
                bamax = fmaxf(bamax, fabsf(w[r * IN + c]));
            float bs =
                ly_e4m3_to_fp32(ly_fp32_to_e4m3(fminf(fmaxf(bamax / (6.0f * ts), 1e-12f), 448.0f)));
            float eff = fmaxf(bs * ts, 1e-12f);
            for (int c = b; c < b + 16 && c < IN; c++)
                assert_same_bits(out[r * IN + c], ly_nm_fake_quant_e2m1(w[r * IN + c] / eff) * eff);
        }
    /* The dynamic op is the weight op with tensor_amax = max|x|. */
    ly_tensor xt = mk(w, LY_F32, 2, SHAPE(R, IN)), dt = mk(dyn, LY_F32, 2, SHAPE(R, IN));
    ly_kernel_call call = make_call(&xt, NULL, NULL, NULL, &dt);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), &call), LY_OK);
    assert_memory_equal(out, dyn, sizeof out);
}

/* ---- mxfp4 --------------------------------------------------------------------------------------
 */

static float mxfp4_one(float amax_element)
{
    float w[32] = {0}, out[32];
    w[0] = amax_element;
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(1, 32)), ot = mk(out, LY_F32, 2, SHAPE(1, 32));
    ly_kernel_call call = make_call(&wt, NULL, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), &call), LY_OK);
    for (int i = 1; i < 32; i++)
        assert_int_equal(bits_of(out[i]), 0);
    return out[0];
}

static void test_mxfp4_log2_hazards(void **state)
{
    (void)state;
    /* fp32 log2 rounds these to the power of two above, so floor takes the larger
     * exponent: the reference's scale is twice the OCP one. */
    const struct {
        float amax;
        int e_reference, e_exact;
        float out;
    } cases[] = {
        {0x1p3f * (1.0f - 0x1p-24f), 1, 0, 8.0f},
        {0x1p-3f * (1.0f - 0x1p-24f), -5, -6, 0x1p-3f},
        {0x1p7f * (1.0f - 0x1p-23f), 5, 4, 0x1p7f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int e;
        assert_true(ly_nm_mxfp4_exponent(cases[i].amax, &e));
        assert_int_equal(e, cases[i].e_reference);
        int exact;
        (void)frexpf(cases[i].amax, &exact);
        assert_int_equal(exact - 1 - 2, cases[i].e_exact);
        /* y = amax / 2^e is just under 4: level 4, and the STE adds back exactly. */
        assert_same_bits(mxfp4_one(cases[i].amax), cases[i].out);
    }
    /* At the power of two itself both agree. */
    int e;
    assert_true(ly_nm_mxfp4_exponent(8.0f, &e));
    assert_int_equal(e, 1);
    assert_true(ly_nm_mxfp4_exponent(INFINITY, &e));
    assert_int_equal(e, 127);
    assert_false(ly_nm_mxfp4_exponent(NAN, &e));
    /* A zero block: the 1e-30 floor gives e = -102, and outputs stay +0. */
    assert_same_bits(ly_nm_mxfp4_eff(0.0f), ldexpf(1.0f, -102));
    assert_same_bits(mxfp4_one(0.0f), 0.0f);
    assert_same_bits(mxfp4_one(-0.0f), 0.0f);
}

static void test_mxfp4_formula_and_dynamic(void **state)
{
    (void)state;
    enum { R = 2, IN = 40 };
    float w[R * IN], out[R * IN], dyn[R * IN];
    fill_uniform(w, R * IN, 5.0f, 51);
    w[70] = NAN;
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(R, IN)), ot = mk(out, LY_F32, 2, SHAPE(R, IN));
    ly_kernel_call call = make_call(&wt, NULL, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), &call), LY_OK);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < IN; b += 32) {
            float bamax = 0.0f;
            bool nan = false;
            for (int c = b; c < b + 32 && c < IN; c++) {
                bamax = fmaxf(bamax, fabsf(w[r * IN + c]));
                nan |= isnan(w[r * IN + c]) != 0;
            }
            for (int c = b; c < b + 32 && c < IN; c++) {
                if (nan) {
                    assert_true(isnan(out[r * IN + c]));
                    continue;
                }
                float eff = ldexpf(1.0f, (int)floorf((float)log2((double)bamax)) - 2);
                assert_same_bits(out[r * IN + c], ly_nm_fake_quant_e2m1(w[r * IN + c] / eff) * eff);
            }
        }
    ly_tensor dt = mk(dyn, LY_F32, 2, SHAPE(R, IN));
    call = make_call(&wt, NULL, NULL, NULL, &dt);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_DYNAMIC), &call), LY_OK);
    assert_memory_equal(out, dyn, sizeof out);
}

/* ---- FP4 backward -----------------------------------------------------------------------------
 */

static void test_fp4_backward(void **state)
{
    (void)state;
    enum { R = 2, IN = 40 };
    float w[R * IN], g[R * IN], out[R * IN], amax = 3.0f;
    fill_uniform(w, R * IN, 3.0f, 61);
    fill_uniform(g, R * IN, 1.0f, 62);
    w[5] = 1e-9f; /* a tiny element in an otherwise large block */
    for (int i = 40; i < 56; i++)
        w[i] *= 1e-7f; /* a block with eff = 1e-12 */
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(R, IN)), gt = mk(g, LY_F32, 2, SHAPE(R, IN));
    ly_tensor ot = mk(out, LY_F32, 2, SHAPE(R, IN)), at = mk(&amax, LY_F32, 1, SHAPE(1));
    /* MXFP4: eff is a power of two, so (grad * eff) / eff is grad. */
    ly_kernel_call call = make_call(&gt, &wt, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD), &call), LY_OK);
    assert_memory_equal(g, out, sizeof g);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_DYNAMIC_BACKWARD), &call), LY_OK);
    assert_memory_equal(g, out, sizeof g);
    /* NVFP4: (grad * eff) / eff with that block's eff, within 1 ulp of grad. */
    call = make_call(&gt, &wt, &at, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT_BACKWARD), &call), LY_OK);
    float ts = ly_nm_nvfp4_tensor_scale(amax);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < IN; b += 16) {
            float bamax = 0.0f;
            for (int c = b; c < b + 16 && c < IN; c++)
                bamax = fmaxf(bamax, fabsf(w[r * IN + c]));
            float eff = ly_nm_nvfp4_eff(ly_nm_nvfp4_block_scale(bamax, ts), ts);
            for (int c = b; c < b + 16 && c < IN; c++) {
                float gi = g[r * IN + c];
                assert_same_bits(out[r * IN + c], (gi * eff) / eff);
                assert_true(fabsf(out[r * IN + c] - gi) <= 1e-6f);
            }
        }
    call = make_call(&gt, &wt, NULL, NULL, &ot);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC_BACKWARD), &call), LY_OK);
    for (int i = 0; i < R * IN; i++)
        assert_true(fabsf(out[i] - g[i]) <= 1e-6f);
}

/* ---- Empty tensors, the slot table --------------------------------------------------------- */

static void test_empty_tensors(void **state)
{
    (void)state;
    float one = 1.0f, lo = -1.0f, hi = 1.0f;
    ly_tensor x = mk(NULL, LY_F32, 2, SHAPE(0, 5)), out = mk(NULL, LY_F32, 2, SHAPE(0, 5));
    ly_tensor x2 = mk(NULL, LY_F32, 2, SHAPE(3, 0)), out2 = mk(NULL, LY_F32, 2, SHAPE(3, 0));
    ly_tensor s1 = mk(&one, LY_F32, 1, SHAPE(1)), lt = mk(&lo, LY_F32, 1, SHAPE(1));
    ly_tensor ht = mk(&hi, LY_F32, 1, SHAPE(1));
    const char *unary[] = {
        ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT),
        ly_op_name(LY_OP_FAKE_QUANT_MXFP4_DYNAMIC), ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED),
        ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL)};
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
        ly_kernel_call call = make_call(&x, NULL, NULL, NULL, &out);
        assert_int_equal(run_ref(unary[i], &call), LY_OK);
        call = make_call(&x2, NULL, NULL, NULL, &out2);
        assert_int_equal(run_ref(unary[i], &call), LY_OK);
    }
    ly_kernel_call call = make_call(&x, &s1, NULL, NULL, &out);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_FP8), &call), LY_OK);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &call), LY_OK);
    call = make_call(&x2, &s1, NULL, NULL, &out2);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &call), LY_OK);
    call = make_call(&x, &lt, &ht, NULL, &out);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &call), LY_OK);
    call = make_call(&x, &x, NULL, NULL, &out);
    assert_int_equal(run_ref(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD), &call), LY_OK);
}

/* The quant slots carry the spec's names, first in the manifest, in this order,
 * each with a contract and a reference. */
static void test_slot_table(void **state)
{
    (void)state;
    static const char *const names[] = {
        "fake_quant_int8_per_channel",
        "fake_quant_int8_affine",
        "fake_quant_fp8",
        "fake_quant_int_grouped",
        "fake_quant_nvfp4_weight",
        "fake_quant_nvfp4_dynamic",
        "fake_quant_mxfp4_weight",
        "fake_quant_mxfp4_dynamic",
        "unpack_int_grouped",
        "unpack_nvfp4",
        "fake_quant_int8_per_channel_backward",
        "fake_quant_int8_affine_backward",
        "fake_quant_fp8_backward",
        "fake_quant_int_grouped_backward",
        "fake_quant_nvfp4_weight_backward",
        "fake_quant_nvfp4_dynamic_backward",
        "fake_quant_mxfp4_weight_backward",
        "fake_quant_mxfp4_dynamic_backward",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ly_op op;
        assert_int_equal(ly_op_from_name(names[i], &op), LY_OK);
        assert_int_equal((int)op, (int)i);
        const ly_op_def *def = ly_op_def_of(op);
        assert_non_null(def->contract);
        assert_non_null(def->reference);
        const char *slot = NULL;
        assert_int_equal(ly_kernel_slot_name(i, &slot), LY_OK);
        assert_string_equal(slot, names[i]);
    }
}

/* ---- Bad input ------------------------------------------------------------------------------ */

static void expect_status(const char *slot, const ly_kernel_call *call, ly_status want,
                          const char *mentions)
{
    ly_status got = ly_kernel_dispatch(slot, call);
    if (got != want)
        fail_msg("%s: got %s (%s), expected %s", slot, ly_status_name(got), ly_last_error(),
                 ly_status_name(want));
    const char *msg = ly_last_error();
    if (!strstr(msg, slot)) fail_msg("message '%s' does not name the slot %s", msg, slot);
    if (mentions && !strstr(msg, mentions))
        fail_msg("message '%s' does not mention '%s'", msg, mentions);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    float data[256] = {0};
    uint8_t bytes[256] = {0};
    float one = 1.0f;
    ly_tensor w = mk(data, LY_F32, 2, SHAPE(4, 8)), out = mk(data + 64, LY_F32, 2, SHAPE(4, 8));
    ly_tensor w_i8 = mk(bytes, LY_I8, 2, SHAPE(4, 8)), w0d = mk(data, LY_F32, 0, NULL);
    ly_tensor out0d = mk(data + 64, LY_F32, 0, NULL);
    ly_tensor w3d = mk(data, LY_F32, 3, SHAPE(2, 2, 8)),
              out3d = mk(data + 64, LY_F32, 3, SHAPE(2, 2, 8));
    ly_tensor s1 = mk(&one, LY_F32, 1, SHAPE(1)), s3 = mk(data + 128, LY_F32, 1, SHAPE(3));
    ly_tensor s4 = mk(data + 128, LY_F32, 1, SHAPE(4)), s2 = mk(data + 128, LY_F32, 1, SHAPE(2));
    ly_tensor w_f64 = mk(data, LY_F64, 2, SHAPE(4, 4));
    ly_tensor out_wrong = mk(data + 64, LY_F32, 2, SHAPE(4, 7));
    ly_kernel_call c;

    ly_fake_quant_int8_per_channel_params pc = LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    ly_fake_quant_int_grouped_params gp = LY_FAKE_QUANT_INT_GROUPED_DEFAULTS;
    ly_unpack_int_grouped_params up = LY_UNPACK_INT_GROUPED_DEFAULTS;
    ly_unpack_nvfp4_params np4 = LY_UNPACK_NVFP4_DEFAULTS;
    /* int8 per channel */
    c = make_call(NULL, NULL, NULL, NULL, &out);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_INVALID_ARGUMENT,
                  "weight");
    c = make_call(&w_i8, NULL, NULL, NULL, &out);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_DTYPE, "weight");
    c = make_call(&w0d, NULL, NULL, NULL, &out0d);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_SHAPE, "weight");
    c = make_call(&w, NULL, NULL, NULL, &out);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    pc.axis = 2;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_INVALID_ARGUMENT, "axis");
    pc.axis = -3;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_INVALID_ARGUMENT, "axis");
    pc.axis = -1;
    assert_int_equal(
        ly_kernel_run_impl(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), "reference", &c), LY_OK);
    c = make_call(&w, &s3, NULL, NULL, &out);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_SHAPE, "scale");
    c = make_call(&w, NULL, NULL, NULL, &out_wrong);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_SHAPE, "out");
    c = make_call(&w, NULL, NULL, NULL, NULL);
    pc = (ly_fake_quant_int8_per_channel_params)LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS;
    c.params = &pc;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &c, LY_E_INVALID_ARGUMENT, "out");

    /* int8 affine */
    c = make_call(&w, NULL, &s1, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &c, LY_E_INVALID_ARGUMENT, "lo");
    c = make_call(&w, &s1, &s3, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &c, LY_E_SHAPE, "hi");

    /* fp8 */
    c = make_call(&w, NULL, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_FP8), &c, LY_E_INVALID_ARGUMENT, "scale");
    c = make_call(&w, &s3, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_FP8), &c, LY_E_SHAPE, "scale");
    c = make_call(&w, &s4, NULL, NULL, &out);
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_FAKE_QUANT_FP8, &c), LY_OK);

    /* int grouped */
    c = make_call(&w3d, NULL, NULL, NULL, &out3d);
    gp = (ly_fake_quant_int_grouped_params)LY_FAKE_QUANT_INT_GROUPED_DEFAULTS;
    c.params = &gp;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &c, LY_E_SHAPE, "weight");
    c = make_call(&w, NULL, NULL, NULL, &out);
    gp = (ly_fake_quant_int_grouped_params)LY_FAKE_QUANT_INT_GROUPED_DEFAULTS;
    c.params = &gp;
    gp.bits = 3;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "bits");
    gp.bits = 2;
    gp.group_size = 0;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT,
                  "group_size");
    gp.group_size = -4;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT,
                  "group_size");
    c = make_call(&w, &s4, NULL, NULL, &out); /* [4] instead of [4, 1] */
    gp = (ly_fake_quant_int_grouped_params)LY_FAKE_QUANT_INT_GROUPED_DEFAULTS;
    c.params = &gp;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &c, LY_E_SHAPE, "scale");
    gp.group_size = INT64_MAX; /* one group per row: extreme but valid */
    ly_tensor s41 = mk(data + 128, LY_F32, 2, SHAPE(4, 1));
    c.in[1] = &s41;
    assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), "reference", &c),
                     LY_OK);

    /* nvfp4 / mxfp4 */
    c = make_call(&w, NULL, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &c, LY_E_INVALID_ARGUMENT,
                  "tensor_amax");
    c = make_call(&w, &s2, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &c, LY_E_SHAPE, "tensor_amax");
    c = make_call(&w0d, NULL, NULL, NULL, &out0d);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), &c, LY_E_SHAPE, "x");
    c = make_call(&w_f64, NULL, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), &c, LY_E_DTYPE, "weight");
    c = make_call(NULL, NULL, NULL, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_DYNAMIC), &c, LY_E_INVALID_ARGUMENT, "x");

    /* backward: grad must have the input's shape */
    ly_tensor g_wrong = mk(data + 128, LY_F32, 2, SHAPE(4, 7));
    const char *backward[] = {ly_op_name(LY_OP_FAKE_QUANT_FP8_BACKWARD),
                              ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD),
                              ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT_BACKWARD)};
    for (size_t i = 0; i < 3; i++) {
        c = make_call(&g_wrong, &w, &s1, NULL, &out);
        expect_status(backward[i], &c, LY_E_SHAPE, "grad");
        c = make_call(NULL, &w, &s1, NULL, &out);
        expect_status(backward[i], &c, LY_E_INVALID_ARGUMENT, "grad");
    }
    c = make_call(&w, &w, &s3, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL_BACKWARD), &c, LY_E_SHAPE, "scale");
    c = make_call(&w, &w, NULL, NULL, &out);
    gp = (ly_fake_quant_int_grouped_params)LY_FAKE_QUANT_INT_GROUPED_DEFAULTS;
    c.params = &gp;
    gp.bits = 8;
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED_BACKWARD), &c, LY_E_INVALID_ARGUMENT,
                  "bits");
    c = make_call(&w, &w, &s1, NULL, &out);
    expect_status(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE_BACKWARD), &c, LY_E_INVALID_ARGUMENT,
                  "hi");
    c = make_call(&w, &w, NULL, NULL, &out);
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC_BACKWARD, &c), LY_OK);

    /* unpack_int_grouped: 4 rows, g 8, 2 groups -> 16 codes, 8 bytes at 4 bits */
    ly_tensor payload = mk(bytes, LY_U8, 2, SHAPE(4, 8)),
              gscale = mk(data + 128, LY_F32, 2, SHAPE(4, 2));
    ly_tensor uout = mk(data, LY_F32, 2, SHAPE(4, 16)), uout10 = mk(data, LY_F32, 2, SHAPE(4, 10));
    c = make_call(&payload, &gscale, NULL, NULL, &uout);
    up = (ly_unpack_int_grouped_params)LY_UNPACK_INT_GROUPED_DEFAULTS;
    c.params = &up;
    up.group_size = 8;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_UNPACK_INT_GROUPED, &c), LY_OK);
    up.bits = 2; /* 8 bytes would hold 32 2-bit codes */
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_SHAPE, "payload");
    up.bits = 3;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "bits");
    up.bits = 4;
    up.group_size = 0;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "group_size");
    up.group_size = INT64_MAX; /* the product overflows: a mismatch, not UB */
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_SHAPE, "payload");
    up.group_size = 8;
    up.in_features = 17;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "in_features");
    up.in_features = -2;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "in_features");
    up.in_features = 10;
    c.out[0] = &uout10;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_UNPACK_INT_GROUPED, &c), LY_OK);
    ly_tensor payload7 = mk(bytes, LY_U8, 2, SHAPE(4, 7)),
              payload_f32 = mk(data, LY_F32, 2, SHAPE(4, 8));
    c = make_call(&payload7, &gscale, NULL, NULL, &uout);
    up = (ly_unpack_int_grouped_params)LY_UNPACK_INT_GROUPED_DEFAULTS;
    c.params = &up;
    up.group_size = 8;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_SHAPE, "payload");
    c.in[0] = &payload_f32;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_DTYPE, "payload");
    ly_tensor gscale3 = mk(data + 128, LY_F32, 2, SHAPE(3, 2));
    c.in[0] = &payload;
    c.in[1] = &gscale3;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_SHAPE, "scale");
    c.in[1] = NULL;
    expect_status(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, LY_E_INVALID_ARGUMENT, "scale");

    /* unpack_nvfp4: 4 rows, 1 block -> 8 bytes */
    ly_tensor bs = mk(bytes + 64, LY_F8E4M3, 2, SHAPE(4, 1)),
              bs_i8 = mk(bytes + 64, LY_I8, 2, SHAPE(4, 1));
    ly_tensor bs2 = mk(bytes + 64, LY_F8E4M3, 2, SHAPE(4, 2));
    c = make_call(&payload, &bs, &s1, NULL, &uout);
    np4 = (ly_unpack_nvfp4_params)LY_UNPACK_NVFP4_DEFAULTS;
    c.params = &np4;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_UNPACK_NVFP4, &c), LY_OK);
    c.in[1] = &bs2;
    expect_status(ly_op_name(LY_OP_UNPACK_NVFP4), &c, LY_E_SHAPE, "payload");
    c.in[1] = &bs_i8;
    expect_status(ly_op_name(LY_OP_UNPACK_NVFP4), &c, LY_E_DTYPE, "block_scale");
    c.in[1] = &bs;
    c.in[2] = NULL;
    expect_status(ly_op_name(LY_OP_UNPACK_NVFP4), &c, LY_E_INVALID_ARGUMENT, "tensor_amax");
    c.in[2] = &s1;
    np4.in_features = 17;
    expect_status(ly_op_name(LY_OP_UNPACK_NVFP4), &c, LY_E_INVALID_ARGUMENT, "in_features");
    np4.in_features = -1;
    c.in[0] = &payload7;
    expect_status(ly_op_name(LY_OP_UNPACK_NVFP4), &c, LY_E_SHAPE, "payload");

    /* The inferred output shape follows in_features. */
    ly_tensor inferred[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    c = make_call(&payload, &gscale, NULL, NULL, NULL);
    up = (ly_unpack_int_grouped_params)LY_UNPACK_INT_GROUPED_DEFAULTS;
    c.params = &up;
    up.group_size = 8;
    assert_int_equal(
        ly_kernel_infer_outputs(ly_op_name(LY_OP_UNPACK_INT_GROUPED), &c, inferred, &n_out), LY_OK);
    assert_int_equal(n_out, 1);
    assert_int_equal(inferred[0].ndim, 2);
    assert_int_equal(inferred[0].shape[0], 4);
    assert_int_equal(inferred[0].shape[1], 16);
    assert_int_equal(inferred[0].dtype, LY_F32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2m1_vector),
        cmocka_unit_test(test_ste_literal),
        cmocka_unit_test(test_int8_per_channel_nan_inf_code),
        cmocka_unit_test(test_int8_per_channel_backward_mask),
        cmocka_unit_test(test_int8_reciprocal_multiply),
        cmocka_unit_test(test_int8_per_channel_dynamic_scale_and_axis),
        cmocka_unit_test(test_int8_affine),
        cmocka_unit_test(test_fp8_forward_and_broadcast),
        cmocka_unit_test(test_int_grouped),
        cmocka_unit_test(test_nvfp4_tiny_block_saturates),
        cmocka_unit_test(test_nvfp4_nan_poisons),
        cmocka_unit_test(test_nvfp4_sign_of_zero_and_formula),
        cmocka_unit_test(test_mxfp4_log2_hazards),
        cmocka_unit_test(test_mxfp4_formula_and_dynamic),
        cmocka_unit_test(test_fp4_backward),
        cmocka_unit_test(test_empty_tensors),
        cmocka_unit_test(test_slot_table),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
