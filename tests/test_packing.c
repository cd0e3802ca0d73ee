/* SPDX-License-Identifier: MIT */
/*
 * The packed checkpoint formats (kernels.md section 3): the verified round trips
 * unpack(pack(W)) == fake-quant(W) (value equality, so -0 == +0), the byte layouts
 * on hand-made inputs, and bad inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "libreyolo/quant.h"

/* ---- Helpers -------------------------------------------------------------------- */

/* Roughly normal (sum of four uniforms), like the randn weights of the upstream tests. */
static void fill_weights(float *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = 0; k < 4; k++)
            sum += (double)(ly_test_splitmix64(&seed) >> 11) * 0x1p-53;
        x[i] = (float)((sum - 2.0) * 1.7);
    }
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

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

static void run_slot(const char *slot, const ly_tensor *a, const ly_tensor *b, ly_tensor *out,
                     int64_t bits, int64_t group_size)
{
    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = a;
    call.in[1] = b;
    call.out[0] = out;
    ly_fake_quant_int_grouped_params grouped = {.bits = bits, .group_size = group_size};
    if (strcmp(slot, ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED)) == 0) call.params = &grouped;
    assert_int_equal(ly_kernel_run_impl(slot, "reference", &call), LY_OK);
}

/* Value equality: == (so -0 == +0), and NaN only with NaN. */
static void assert_values_equal(const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) && isnan(got[i])) continue;
        if (!(got[i] == want[i]))
            fail_msg("element %lld: unpacked %a, fake-quant %a", (long long)i, (double)got[i],
                     (double)want[i]);
    }
}

static void expect_failure(ly_status got, ly_status want, const char *mentions)
{
    if (got != want)
        fail_msg("got %s (%s), expected %s", ly_status_name(got), ly_last_error(),
                 ly_status_name(want));
    if (!strstr(ly_last_error(), mentions))
        fail_msg("message '%s' does not mention '%s'", ly_last_error(), mentions);
}

/* ---- Round trips (spec 3.6) ------------------------------------------------------------ */

static void test_int8_round_trip(void **state)
{
    (void)state;
    enum { N = 16 * 8 * 3 * 3 };
    const int64_t *shape = SHAPE(16, 8, 3, 3);
    float *w = xcalloc(N, sizeof *w), *fq = xcalloc(N, sizeof *fq), *un = xcalloc(N, sizeof *un);
    int8_t *codes = xcalloc(N, 1);
    float scale[16];
    fill_weights(w, N, 1);
    ly_tensor wt = mk(w, LY_F32, 4, shape), st = mk(scale, LY_F32, 1, SHAPE(16));
    ly_tensor ct = mk(codes, LY_I8, 4, shape), ut = mk(un, LY_F32, 4, shape);
    ly_tensor ft = mk(fq, LY_F32, 4, shape);
    assert_int_equal(ly_int8_weight_qparams(&wt, 0, &st), LY_OK);
    assert_int_equal(ly_pack_int8(&wt, &st, &ct), LY_OK);
    assert_int_equal(ly_unpack_int8(&ct, &st, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), &wt, NULL, &ft, 4, 128);
    assert_values_equal(un, fq, N);
    free(w);
    free(fq);
    free(un);
    free(codes);
}

static void test_fp8_round_trip(void **state)
{
    (void)state;
    enum { N = 16 * 8 * 3 * 3 };
    const int64_t *shape = SHAPE(16, 8, 3, 3);
    float *w = xcalloc(N, sizeof *w), *fq = xcalloc(N, sizeof *fq), *un = xcalloc(N, sizeof *un);
    uint8_t *codes = xcalloc(N, 1);
    float scale[16];
    fill_weights(w, N, 2);
    ly_tensor wt = mk(w, LY_F32, 4, shape), st = mk(scale, LY_F32, 1, SHAPE(16));
    ly_tensor ct = mk(codes, LY_F8E4M3, 4, shape), ut = mk(un, LY_F32, 4, shape);
    ly_tensor ft = mk(fq, LY_F32, 4, shape);
    assert_int_equal(ly_fp8_weight_qparams(&wt, false, &st), LY_OK);
    assert_int_equal(ly_pack_fp8(&wt, &st, &ct), LY_OK);
    assert_int_equal(ly_unpack_fp8(&ct, &st, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_FP8), &wt, &st, &ft, 4, 128);
    assert_values_equal(un, fq, N);
    /* Tensorwise scaling keeps the per-channel shape with equal entries. */
    assert_int_equal(ly_fp8_weight_qparams(&wt, true, &st), LY_OK);
    for (int i = 1; i < 16; i++)
        assert_int_equal(bits_of(scale[i]), bits_of(scale[0]));
    assert_int_equal(ly_pack_fp8(&wt, &st, &ct), LY_OK);
    assert_int_equal(ly_unpack_fp8(&ct, &st, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_FP8), &wt, &st, &ft, 4, 128);
    assert_values_equal(un, fq, N);
    free(w);
    free(fq);
    free(un);
    free(codes);
}

static void nvfp4_round_trip(int64_t rows, int64_t in, uint64_t seed)
{
    int64_t blocks = (in + 15) / 16, n = rows * in;
    float *w = xcalloc((size_t)n, sizeof *w), *fq = xcalloc((size_t)n, sizeof *fq);
    float *un = xcalloc((size_t)n, sizeof *un);
    uint8_t *payload = xcalloc((size_t)(rows * blocks * 8), 1);
    uint8_t *bscale = xcalloc((size_t)(rows * blocks), 1);
    fill_weights(w, n, seed);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(w[i]));
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(rows, in)), at = mk(&amax, LY_F32, 1, SHAPE(1));
    ly_tensor pt = mk(payload, LY_U8, 2, SHAPE(rows, blocks * 8));
    ly_tensor bt = mk(bscale, LY_F8E4M3, 2, SHAPE(rows, blocks));
    ly_tensor ut = mk(un, LY_F32, 2, SHAPE(rows, in)), ft = mk(fq, LY_F32, 2, SHAPE(rows, in));
    assert_int_equal(ly_pack_nvfp4(&wt, &at, &pt, &bt), LY_OK);
    assert_int_equal(ly_unpack_nvfp4(&pt, &bt, &at, in, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &wt, &at, &ft, 4, 128);
    assert_values_equal(un, fq, n);
    free(w);
    free(fq);
    free(un);
    free(payload);
    free(bscale);
}

static void test_nvfp4_round_trip(void **state)
{
    (void)state;
    nvfp4_round_trip(8, 48, 3);
    nvfp4_round_trip(8, 20, 4);
}

static void int_grouped_round_trip(int64_t rows, int64_t in, int64_t bits, int64_t g, uint64_t seed)
{
    int64_t groups = (in + g - 1) / g, width = groups * g * bits / 8, n = rows * in;
    float *w = xcalloc((size_t)n, sizeof *w), *fq = xcalloc((size_t)n, sizeof *fq);
    float *un = xcalloc((size_t)n, sizeof *un),
          *scale = xcalloc((size_t)(rows * groups), sizeof *scale);
    uint8_t *payload = xcalloc((size_t)(rows * width), 1);
    fill_weights(w, n, seed);
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(rows, in)),
              st = mk(scale, LY_F32, 2, SHAPE(rows, groups));
    ly_tensor pt = mk(payload, LY_U8, 2, SHAPE(rows, width));
    ly_tensor ut = mk(un, LY_F32, 2, SHAPE(rows, in)), ft = mk(fq, LY_F32, 2, SHAPE(rows, in));
    assert_int_equal(ly_int_group_qparams(&wt, bits, g, &st), LY_OK);
    assert_int_equal(ly_pack_int_grouped(&wt, &st, bits, g, &pt), LY_OK);
    assert_int_equal(ly_unpack_int_grouped(&pt, &st, bits, g, in, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &wt, NULL, &ft, bits, g);
    assert_values_equal(un, fq, n);
    /* Every group holds at most 2^bits distinct levels (in fact 2^bits - 1: qmin is
     * unreachable with a dynamic scale). */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t gi = 0; gi < groups; gi++) {
            float seen[16];
            int distinct = 0;
            for (int64_t c = gi * g; c < (gi + 1) * g && c < in; c++) {
                float v = un[r * in + c];
                bool found = false;
                for (int k = 0; k < distinct; k++)
                    found |= seen[k] == v;
                if (!found) {
                    assert_true(distinct < (1 << bits));
                    seen[distinct++] = v;
                }
            }
        }
    free(w);
    free(fq);
    free(un);
    free(scale);
    free(payload);
}

static void test_int_grouped_round_trip(void **state)
{
    (void)state;
    int_grouped_round_trip(8, 300, 4, 128, 5);
    int_grouped_round_trip(8, 100, 2, 64, 6);
}

static void mxfp4_round_trip(int64_t rows, int64_t in, uint64_t seed)
{
    int64_t blocks = (in + 31) / 32, n = rows * in;
    float *w = xcalloc((size_t)n, sizeof *w), *fq = xcalloc((size_t)n, sizeof *fq);
    float *un = xcalloc((size_t)n, sizeof *un);
    uint8_t *payload = xcalloc((size_t)(rows * blocks * 16), 1);
    int8_t *exps = xcalloc((size_t)(rows * blocks), 1);
    fill_weights(w, n, seed);
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(rows, in));
    ly_tensor pt = mk(payload, LY_U8, 2, SHAPE(rows, blocks * 16));
    ly_tensor et = mk(exps, LY_I8, 2, SHAPE(rows, blocks));
    ly_tensor ut = mk(un, LY_F32, 2, SHAPE(rows, in)), ft = mk(fq, LY_F32, 2, SHAPE(rows, in));
    assert_int_equal(ly_pack_mxfp4(&wt, &pt, &et), LY_OK);
    assert_int_equal(ly_unpack_mxfp4(&pt, &et, in, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), &wt, NULL, &ft, 4, 128);
    assert_values_equal(un, fq, n);
    free(w);
    free(fq);
    free(un);
    free(payload);
    free(exps);
}

static void test_mxfp4_round_trip(void **state)
{
    (void)state;
    mxfp4_round_trip(8, 64, 7);
    mxfp4_round_trip(8, 40, 8);
}

/* ---- Byte layouts on hand-made inputs ------------------------------------------------- */

static void test_int_grouped_layout(void **state)
{
    (void)state;
    float one = 1.0f;
    ly_tensor s11 = mk(&one, LY_F32, 2, SHAPE(1, 1));
    /* 4-bit: code = q + 8, even column in the low nibble. */
    float w4[4] = {-8.0f, 7.0f, 0.0f, 1.0f};
    uint8_t p4[2];
    ly_tensor w4t = mk(w4, LY_F32, 2, SHAPE(1, 4)), p4t = mk(p4, LY_U8, 2, SHAPE(1, 2));
    assert_int_equal(ly_pack_int_grouped(&w4t, &s11, 4, 4, &p4t), LY_OK);
    assert_int_equal(p4[0], 0xF0);
    assert_int_equal(p4[1], 0x98);
    float back[4];
    ly_tensor bt = mk(back, LY_F32, 2, SHAPE(1, 4));
    assert_int_equal(ly_unpack_int_grouped(&p4t, &s11, 4, 4, -1, &bt), LY_OK);
    assert_memory_equal(back, w4, sizeof w4);
    /* Padding columns store q = 0, code 8. */
    float w3[3] = {1.0f, 2.0f, 3.0f};
    ly_tensor w3t = mk(w3, LY_F32, 2, SHAPE(1, 3));
    assert_int_equal(ly_pack_int_grouped(&w3t, &s11, 4, 4, &p4t), LY_OK);
    assert_int_equal(p4[0], 0xA9);
    assert_int_equal(p4[1], 0x8B);
    /* 2-bit: code = q + 2, lowest bit pair first. */
    float w2[5] = {-2.0f, -1.0f, 0.0f, 1.0f, 1.0f};
    uint8_t p2[2];
    ly_tensor w2t = mk(w2, LY_F32, 2, SHAPE(1, 4)), p21 = mk(p2, LY_U8, 2, SHAPE(1, 1));
    assert_int_equal(ly_pack_int_grouped(&w2t, &s11, 2, 4, &p21), LY_OK);
    assert_int_equal(p2[0], 0xE4);
    float ones[5] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    ly_tensor w5t = mk(ones, LY_F32, 2, SHAPE(1, 5)), p22 = mk(p2, LY_U8, 2, SHAPE(1, 2));
    assert_int_equal(ly_pack_int_grouped(&w5t, &s11, 2, 8, &p22), LY_OK);
    assert_int_equal(p2[0], 0xFF);
    assert_int_equal(p2[1], 0xAB);
    /* Unpack applies clamp(scale, 1e-12) and slices to in_features. */
    float zero_scale = 0.0f, back5[5];
    ly_tensor zs = mk(&zero_scale, LY_F32, 2, SHAPE(1, 1)), b5 = mk(back5, LY_F32, 2, SHAPE(1, 5));
    assert_int_equal(ly_unpack_int_grouped(&p22, &zs, 2, 8, 5, &b5), LY_OK);
    for (int i = 0; i < 5; i++)
        assert_true(back5[i] == 1e-12f);
}

static void test_nvfp4_layout_and_sign_of_zero(void **state)
{
    (void)state;
    /* tensor_amax 2688 gives ts = 1; block amax 6 gives bs = e4m3(1) = 1: eff = 1. */
    float w[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f, 4.0f,  6.0f,
                   -0.5f, -6.0f, -0.1f, 0.25f, 0.75f, 5.0f, -0.0f, 0.0f};
    float amax = 2688.0f;
    uint8_t payload[8], bs;
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(1, 16)), at = mk(&amax, LY_F32, 1, SHAPE(1));
    ly_tensor pt = mk(payload, LY_U8, 2, SHAPE(1, 8)), bt = mk(&bs, LY_F8E4M3, 2, SHAPE(1, 1));
    assert_int_equal(ly_pack_nvfp4(&wt, &at, &pt, &bt), LY_OK);
    const uint8_t want[8] = {0x10, 0x32, 0x54, 0x76, 0xF9, 0x08, 0x61, 0x00};
    assert_memory_equal(payload, want, 8);
    assert_int_equal(bs, 0x38);
    float un[16], fq[16];
    ly_tensor ut = mk(un, LY_F32, 2, SHAPE(1, 16)), ft = mk(fq, LY_F32, 2, SHAPE(1, 16));
    assert_int_equal(ly_unpack_nvfp4(&pt, &bt, &at, -1, &ut), LY_OK);
    run_slot(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), &wt, &at, &ft, 4, 128);
    assert_values_equal(un, fq, 16);
    /* -0.1 stores code 8: the unpack gives -0.0, the fake quant +0.0; equal values. */
    assert_int_equal(bits_of(un[10]), 0x80000000u);
    assert_int_equal(bits_of(fq[10]), 0x00000000u);
    /* -0.0 stores sign 0 (only a strictly negative value sets it). */
    assert_int_equal(bits_of(un[14]), 0x00000000u);
    /* An fp32 block scale unpacks the same. */
    float bs_f32 = 1.0f;
    ly_tensor bft = mk(&bs_f32, LY_F32, 2, SHAPE(1, 1));
    float un2[16];
    ly_tensor u2t = mk(un2, LY_F32, 2, SHAPE(1, 16));
    assert_int_equal(ly_unpack_nvfp4(&pt, &bft, &at, -1, &u2t), LY_OK);
    assert_memory_equal(un, un2, sizeof un);
    /* A NaN block stores the E4M3 NaN scale and unpacks to NaN. */
    w[3] = NAN;
    assert_int_equal(ly_pack_nvfp4(&wt, &at, &pt, &bt), LY_OK);
    assert_int_equal(bs, 0x7F);
    assert_int_equal(ly_unpack_nvfp4(&pt, &bt, &at, -1, &ut), LY_OK);
    for (int i = 0; i < 16; i++)
        assert_true(isnan(un[i]));
}

static void test_mxfp4_layout(void **state)
{
    (void)state;
    float w[40] = {0};
    w[0] = 0.75f;   /* block 0: amax 0.75 -> e = floor(log2 0.75) - 2 = -3, eff 1/8 */
    w[1] = -0.125f; /* -1 * eff: code 8 | 2 */
    w[32] = 6.0f;   /* block 1: e = 0 */
    w[33] = 2.5f;   /* tie: down to 2, idx 4 */
    uint8_t payload[32];
    int8_t exps[2];
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(1, 40)), pt = mk(payload, LY_U8, 2, SHAPE(1, 32));
    ly_tensor et = mk(exps, LY_I8, 2, SHAPE(1, 2));
    assert_int_equal(ly_pack_mxfp4(&wt, &pt, &et), LY_OK);
    assert_int_equal(exps[0], -3);
    assert_int_equal(exps[1], 0);
    assert_int_equal(payload[0], 0xA7);  /* low: 0.75 / 0.125 = 6 -> 7; high: -1 -> 0xA */
    assert_int_equal(payload[16], 0x47); /* low: 6 -> 7; high: 2.5 -> 4 */
    for (int i = 1; i < 16; i++)
        assert_int_equal(payload[i], 0);
    for (int i = 17; i < 32; i++)
        assert_int_equal(payload[i], 0);
    /* An all-zero block stores e = -102 (the 1e-30 floor). */
    float z[32] = {0};
    ly_tensor zt = mk(z, LY_F32, 2, SHAPE(1, 32)), pz = mk(payload, LY_U8, 2, SHAPE(1, 16));
    ly_tensor ez = mk(exps, LY_I8, 2, SHAPE(1, 1));
    assert_int_equal(ly_pack_mxfp4(&zt, &pz, &ez), LY_OK);
    assert_int_equal(exps[0], -102);
    /* Unpack of hand-made bytes: codes 0xF (-6) and 0x1 (0.5) at e = 2. */
    uint8_t hand[16] = {0x1F};
    int8_t e2 = 2;
    float out[3];
    ly_tensor ht = mk(hand, LY_U8, 2, SHAPE(1, 16)), e2t = mk(&e2, LY_I8, 2, SHAPE(1, 1));
    ly_tensor ot = mk(out, LY_F32, 2, SHAPE(1, 3));
    assert_int_equal(ly_unpack_mxfp4(&ht, &e2t, 3, &ot), LY_OK);
    assert_true(out[0] == -24.0f && out[1] == 2.0f && out[2] == 0.0f);
}

static void test_int8_fp8_layout(void **state)
{
    (void)state;
    float w[6] = {127.0f, -127.0f, 64.0f, 2.0f, -3.0f, 1.0f}, scale[2];
    int8_t codes[6];
    ly_tensor wt = mk(w, LY_F32, 2, SHAPE(2, 3)), st = mk(scale, LY_F32, 1, SHAPE(2));
    ly_tensor ct = mk(codes, LY_I8, 2, SHAPE(2, 3));
    assert_int_equal(ly_int8_weight_qparams(&wt, 0, &st), LY_OK);
    assert_int_equal(ly_pack_int8(&wt, &st, &ct), LY_OK);
    const int8_t want[6] = {127, -127, 64, 85, -127, 42};
    assert_memory_equal(codes, want, 6);
    /* fp8: codes are e4m3(clamp(W / s, +-448)); u8 codes are accepted too. */
    float f[3] = {896.0f, -2.0f, 0.125f}, fs = 2.0f;
    uint8_t fc[3];
    ly_tensor ft = mk(f, LY_F32, 2, SHAPE(1, 3)), fst = mk(&fs, LY_F32, 1, SHAPE(1));
    ly_tensor fct = mk(fc, LY_U8, 2, SHAPE(1, 3));
    assert_int_equal(ly_pack_fp8(&ft, &fst, &fct), LY_OK);
    assert_int_equal(fc[0], 0x7E);
    assert_int_equal(fc[1], 0xB8);
    assert_int_equal(fc[2], 0x18);
    float back[3];
    ly_tensor bt = mk(back, LY_F32, 2, SHAPE(1, 3));
    assert_int_equal(ly_unpack_fp8(&fct, &fst, &bt), LY_OK);
    assert_true(back[0] == 896.0f && back[1] == -2.0f && back[2] == 0.125f);
}

/* ---- Bad inputs ------------------------------------------------------------------------ */

static void test_bad_inputs(void **state)
{
    (void)state;
    float w[64] = {0}, scale[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[64], amax = 1.0f;
    uint8_t bytes[64] = {0};
    int8_t exps[8] = {0};
    ly_tensor w2 = mk(w, LY_F32, 2, SHAPE(2, 16)), s21 = mk(scale, LY_F32, 2, SHAPE(2, 1));
    ly_tensor p8 = mk(bytes, LY_U8, 2, SHAPE(2, 8)), p7 = mk(bytes, LY_U8, 2, SHAPE(2, 7));
    ly_tensor o2 = mk(out, LY_F32, 2, SHAPE(2, 16)), at = mk(&amax, LY_F32, 1, SHAPE(1));

    /* int grouped */
    expect_failure(ly_pack_int_grouped(&w2, &s21, 3, 16, &p8), LY_E_INVALID_ARGUMENT, "bits");
    expect_failure(ly_pack_int_grouped(&w2, &s21, 4, 0, &p8), LY_E_INVALID_ARGUMENT, "group_size");
    expect_failure(ly_pack_int_grouped(&w2, &s21, 4, 16, &p7), LY_E_SHAPE, "payload");
    expect_failure(ly_pack_int_grouped(NULL, &s21, 4, 16, &p8), LY_E_INVALID_ARGUMENT, "weight");
    expect_failure(ly_pack_int_grouped(&w2, NULL, 4, 16, &p8), LY_E_INVALID_ARGUMENT, "scale");
    expect_failure(ly_pack_int_grouped(&w2, &s21, 4, 17, &p8), LY_E_INVALID_ARGUMENT, "bytes");
    ly_tensor s22 = mk(scale, LY_F32, 2, SHAPE(2, 2));
    expect_failure(ly_pack_int_grouped(&w2, &s22, 4, 16, &p8), LY_E_SHAPE, "scale");
    w[5] = NAN;
    expect_failure(ly_pack_int_grouped(&w2, &s21, 4, 16, &p8), LY_E_INVALID_ARGUMENT, "NaN");
    w[5] = 0.0f;
    assert_int_equal(ly_pack_int_grouped(&w2, &s21, 4, 16, &p8), LY_OK);
    expect_failure(ly_unpack_int_grouped(&p8, &s21, 3, 16, -1, &o2), LY_E_INVALID_ARGUMENT, "bits");
    expect_failure(ly_unpack_int_grouped(&p8, &s21, 4, 0, -1, &o2), LY_E_INVALID_ARGUMENT,
                   "group_size");
    expect_failure(ly_unpack_int_grouped(&p7, &s21, 4, 16, -1, &o2), LY_E_SHAPE, "payload");
    expect_failure(ly_unpack_int_grouped(&p8, &s21, 4, 16, 17, &o2), LY_E_INVALID_ARGUMENT,
                   "in_features");
    expect_failure(ly_unpack_int_grouped(&p8, &s21, 4, 16, -1, NULL), LY_E_INVALID_ARGUMENT, "out");
    expect_failure(ly_unpack_int_grouped(NULL, &s21, 4, 16, -1, &o2), LY_E_INVALID_ARGUMENT,
                   "payload");
    ly_tensor o_wrong = mk(out, LY_F32, 2, SHAPE(2, 15));
    expect_failure(ly_unpack_int_grouped(&p8, &s21, 4, 16, -1, &o_wrong), LY_E_SHAPE, "out");
    assert_int_equal(ly_unpack_int_grouped(&p8, &s21, 4, 16, -1, &o2), LY_OK);

    /* nvfp4: 16 columns = 1 block -> 8 bytes and 1 scale per row */
    ly_tensor bs = mk(bytes + 32, LY_F8E4M3, 2, SHAPE(2, 1)),
              bs_f32 = mk(scale, LY_F32, 2, SHAPE(2, 1));
    ly_tensor bs2 = mk(bytes + 32, LY_F8E4M3, 2, SHAPE(2, 2));
    expect_failure(ly_pack_nvfp4(&w2, &at, &p7, &bs), LY_E_SHAPE, "payload");
    expect_failure(ly_pack_nvfp4(&w2, &at, &p8, &bs_f32), LY_E_DTYPE, "block_scale");
    expect_failure(ly_pack_nvfp4(&w2, NULL, &p8, &bs), LY_E_INVALID_ARGUMENT, "tensor_amax");
    expect_failure(ly_pack_nvfp4(&w2, &at, &p8, &bs2), LY_E_SHAPE, "block_scale");
    assert_int_equal(ly_pack_nvfp4(&w2, &at, &p8, &bs), LY_OK);
    expect_failure(ly_unpack_nvfp4(&p8, &bs2, &at, -1, &o2), LY_E_SHAPE, "payload");
    expect_failure(ly_unpack_nvfp4(&p8, &bs, &at, 17, &o2), LY_E_INVALID_ARGUMENT, "in_features");
    expect_failure(ly_unpack_nvfp4(&p8, NULL, &at, -1, &o2), LY_E_INVALID_ARGUMENT, "block_scale");

    /* mxfp4: 16 columns = 1 block -> 16 bytes and 1 exponent per row */
    ly_tensor p16 = mk(bytes, LY_U8, 2, SHAPE(2, 16)), e21 = mk(exps, LY_I8, 2, SHAPE(2, 1));
    ly_tensor e_u8 = mk(exps, LY_U8, 2, SHAPE(2, 1));
    expect_failure(ly_pack_mxfp4(&w2, &p8, &e21), LY_E_SHAPE, "payload");
    expect_failure(ly_pack_mxfp4(&w2, &p16, &e_u8), LY_E_DTYPE, "block_exp");
    w[3] = NAN;
    expect_failure(ly_pack_mxfp4(&w2, &p16, &e21), LY_E_INVALID_ARGUMENT, "NaN");
    w[3] = 0.0f;
    assert_int_equal(ly_pack_mxfp4(&w2, &p16, &e21), LY_OK);
    expect_failure(ly_unpack_mxfp4(&p8, &e21, -1, &o2), LY_E_SHAPE, "payload");
    expect_failure(ly_unpack_mxfp4(&p16, &e21, 33, &o2), LY_E_INVALID_ARGUMENT, "in_features");
    expect_failure(ly_unpack_mxfp4(&p16, &e21, 16, NULL), LY_E_INVALID_ARGUMENT, "out");
    assert_int_equal(ly_unpack_mxfp4(&p16, &e21, 16, &o2), LY_OK);

    /* int8 / fp8 */
    ly_tensor s3 = mk(scale, LY_F32, 1, SHAPE(3)), s2 = mk(scale, LY_F32, 1, SHAPE(2));
    ly_tensor c_i8 = mk(bytes, LY_I8, 2, SHAPE(2, 16)), c_u8 = mk(bytes, LY_U8, 2, SHAPE(2, 16));
    ly_tensor c_f8 = mk(bytes, LY_F8E4M3, 2, SHAPE(2, 16)),
              c_small = mk(bytes, LY_I8, 2, SHAPE(2, 8));
    expect_failure(ly_pack_int8(&w2, &s3, &c_i8), LY_E_SHAPE, "scale");
    expect_failure(ly_pack_int8(&w2, &s2, &c_u8), LY_E_DTYPE, "codes");
    expect_failure(ly_pack_int8(&w2, &s2, &c_small), LY_E_SHAPE, "codes");
    expect_failure(ly_pack_int8(&w2, NULL, &c_i8), LY_E_INVALID_ARGUMENT, "scale");
    expect_failure(ly_unpack_int8(&c_i8, &s2, NULL), LY_E_INVALID_ARGUMENT, "out");
    expect_failure(ly_pack_fp8(&w2, &s2, &c_i8), LY_E_DTYPE, "codes");
    expect_failure(ly_unpack_fp8(&c_f8, &s3, &o2), LY_E_SHAPE, "scale");
    assert_int_equal(ly_pack_fp8(&w2, &s2, &c_f8), LY_OK);
    assert_int_equal(ly_unpack_fp8(&c_f8, &s2, &o2), LY_OK);

    /* qparams */
    float sc;
    int32_t zp;
    expect_failure(ly_int8_weight_qparams(&w2, 2, &s2), LY_E_INVALID_ARGUMENT, "axis");
    expect_failure(ly_int8_weight_qparams(&w2, 1, &s2), LY_E_SHAPE, "scale");
    assert_int_equal(ly_int8_weight_qparams(&w2, -2, &s2), LY_OK);
    expect_failure(ly_int8_act_qparams(0.0f, 1.0f, NULL, &zp), LY_E_INVALID_ARGUMENT, "scale");
    expect_failure(ly_fp8_act_qparams(0.0f, 1.0f, NULL), LY_E_INVALID_ARGUMENT, "scale");
    assert_int_equal(ly_fp8_act_qparams(-896.0f, 1.0f, &sc), LY_OK);
    assert_true(sc == 2.0f);
    expect_failure(ly_fp8_weight_qparams(NULL, false, &s2), LY_E_INVALID_ARGUMENT, "weight");
    expect_failure(ly_int_group_qparams(&w2, 3, 16, &s21), LY_E_INVALID_ARGUMENT, "bits");
    expect_failure(ly_int_group_qparams(&w2, 4, -1, &s21), LY_E_INVALID_ARGUMENT, "group_size");
    expect_failure(ly_int_group_qparams(&w2, 4, 8, &s21), LY_E_SHAPE, "scale");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_round_trip),
        cmocka_unit_test(test_fp8_round_trip),
        cmocka_unit_test(test_nvfp4_round_trip),
        cmocka_unit_test(test_int_grouped_round_trip),
        cmocka_unit_test(test_mxfp4_round_trip),
        cmocka_unit_test(test_int_grouped_layout),
        cmocka_unit_test(test_nvfp4_layout_and_sign_of_zero),
        cmocka_unit_test(test_mxfp4_layout),
        cmocka_unit_test(test_int8_fp8_layout),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
