/* SPDX-License-Identifier: MIT */
/*
 * The sdpa slot: the reference against double-precision attention, its exp
 * against libm, the validator's errors, the fused-attention policy (which code
 * runs for each flag, and under capture), and the fused AVX2 provider against
 * the reference bit for bit on the slot's own cases (model shapes, tails, masks,
 * hostile values) through the parity harness, on 2 and 5 threads.
 */
#include "kernels/check.h"
#include "libreyolo/kernels.h"
#include "libreyolo/sdpa.h"
#include "ops/sdpa/sdpa_internal.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

static float normal(uint64_t *s)
{
    double u1 = (double)(ly_test_splitmix64(s) >> 11) * 0x1.0p-53;
    double u2 = (double)(ly_test_splitmix64(s) >> 11) * 0x1.0p-53;
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* One attention problem with owned buffers. */
typedef struct problem {
    int64_t B, H, Nq, Nk, d, dv;
    float *q, *k, *v, *mask, *mask2, *out;
    uint8_t *bool_mask;
    ly_tensor tq, tk, tv, tm, tm2, tout;
    ly_sdpa_params params;
    ly_kernel_call call;
} problem;

static void problem_init(problem *p, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d,
                         int64_t dv, uint64_t seed, float gain)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->H = H, p->Nq = Nq, p->Nk = Nk, p->d = d, p->dv = dv;
    size_t nq = (size_t)(B * H * Nq * d), nk = (size_t)(B * H * Nk * d),
           nv = (size_t)(B * H * Nk * dv), no = (size_t)(B * H * Nq * dv);
    p->q = malloc((nq + 1) * sizeof(float));
    p->k = malloc((nk + 1) * sizeof(float));
    p->v = malloc((nv + 1) * sizeof(float));
    p->out = malloc((no + 1) * sizeof(float));
    assert_non_null(p->q);
    assert_non_null(p->k);
    assert_non_null(p->v);
    assert_non_null(p->out);
    for (size_t i = 0; i < nq; i++)
        p->q[i] = gain * normal(&seed);
    for (size_t i = 0; i < nk; i++)
        p->k[i] = normal(&seed);
    for (size_t i = 0; i < nv; i++)
        p->v[i] = normal(&seed);
    ly_tensor_init(&p->tq, p->q, LY_F32, 4, (int64_t[]){B, H, Nq, d});
    ly_tensor_init(&p->tk, p->k, LY_F32, 4, (int64_t[]){B, H, Nk, d});
    ly_tensor_init(&p->tv, p->v, LY_F32, 4, (int64_t[]){B, H, Nk, dv});
    ly_tensor_init(&p->tout, p->out, LY_F32, 4, (int64_t[]){B, H, Nq, dv});
    ly_kernel_call_init(&p->call);
    p->params = (ly_sdpa_params)LY_SDPA_DEFAULTS;
    p->call.params = &p->params;
    p->call.in[0] = &p->tq;
    p->call.in[1] = &p->tk;
    p->call.in[2] = &p->tv;
    p->call.out[0] = &p->tout;
}

/* An f32 mask of `ndim` dims `shape` in in[index], filled by fn(i). */
static float *problem_mask(problem *p, int index, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *m = calloc((size_t)n + 1, sizeof(float));
    assert_non_null(m);
    ly_tensor *t = index == 3 ? &p->tm : &p->tm2;
    ly_tensor_init(t, m, LY_F32, ndim, shape);
    p->call.in[index] = t;
    if (index == 3)
        p->mask = m;
    else
        p->mask2 = m;
    return m;
}

static void problem_free(problem *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->out);
    free(p->mask);
    free(p->mask2);
    free(p->bool_mask);
}

static int64_t out_numel(const problem *p)
{
    return p->B * p->H * p->Nq * p->dv;
}

/* Run `impl` into a fresh buffer and return it (caller frees). */
static float *run(problem *p, const char *impl, int threads)
{
    float *saved = p->out;
    float *dst = malloc(((size_t)out_numel(p) + 1) * sizeof(float));
    assert_non_null(dst);
    memset(dst, 0xA5, ((size_t)out_numel(p) + 1) * sizeof(float));
    p->tout.data = dst;
    p->call.threads = threads;
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), impl, &p->call);
    if (st != LY_OK) fail_msg("%s: %s: %s", impl, ly_status_name(st), ly_last_error());
    p->tout.data = saved;
    return dst;
}

static void assert_bits_equal(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = ly_sdpa_f32_bits(a[i]), y = ly_sdpa_f32_bits(b[i]);
        if (x != y)
            fail_msg("%s: element %lld differs: %.9g (0x%08x) vs %.9g (0x%08x)", what, (long long)i,
                     (double)a[i], x, (double)b[i], y);
    }
}

/* ---- exp ----------------------------------------------------------------------- */

static void test_expf(void **state)
{
    (void)state;
    assert_true(ly_sdpa_expf(0.0f) == 1.0f);
    assert_true(ly_sdpa_expf(-0.0f) == 1.0f);
    assert_true(ly_sdpa_expf(-INFINITY) == 0.0f);
    assert_true(ly_sdpa_f32_bits(ly_sdpa_expf(-100.0f)) == 0u);
    assert_true(isnan(ly_sdpa_expf(NAN)));
    double worst = 0.0;
    uint64_t seed = 1;
    for (int i = 0; i < 400000; i++) {
        float x = i < 1000 ? -87.0f * (float)i / 1000.0f
                           : -(float)((double)(ly_test_splitmix64(&seed) >> 11) * 0x1.0p-53 * 87.0);
        double want = exp((double)x);
        float got = ly_sdpa_expf(x);
        double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
        double err = fabs((double)got - want) / ulp;
        if (err > worst) worst = err;
    }
    if (worst > 2.0) fail_msg("ly_sdpa_expf: %.3f ulp on [-87, 0], expected <= 2", worst);
}

/* ---- reference ------------------------------------------------------------------- */

/* Manual attention in double, for the reference's accuracy. */
static void attention_f64(const problem *p, float scale, double *out)
{
    int64_t d = p->d, dv = p->dv, Nk = p->Nk;
    double *s = malloc((size_t)(Nk + 1) * sizeof(double));
    assert_non_null(s);
    for (int64_t bh = 0; bh < p->B * p->H; bh++)
        for (int64_t i = 0; i < p->Nq; i++) {
            double m = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < Nk; j++) {
                double acc = 0.0;
                for (int64_t c = 0; c < d; c++)
                    acc += (double)(p->q[(bh * p->Nq + i) * d + c] * scale) *
                           (double)p->k[(bh * Nk + j) * d + c];
                if (p->mask) acc += (double)p->mask[i * Nk + j];
                s[j] = acc;
                if (acc > m) m = acc;
            }
            for (int64_t j = 0; j < Nk; j++)
                sum += (s[j] = exp(s[j] - m));
            for (int64_t c = 0; c < dv; c++) {
                double o = 0.0;
                for (int64_t j = 0; j < Nk; j++)
                    o += s[j] / sum * (double)p->v[(bh * Nk + j) * dv + c];
                out[(bh * p->Nq + i) * dv + c] = o;
            }
        }
    free(s);
}

static void test_reference_accuracy(void **state)
{
    (void)state;
    static const int64_t shapes[][6] = {
        {1, 1, 1, 1, 1, 1}, {2, 3, 5, 13, 7, 9}, {1, 2, 49, 49, 32, 32}, {1, 1, 20, 197, 64, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *sh = shapes[s];
        problem p;
        problem_init(&p, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], 7 + s, 1.5f);
        if (s == 2) {
            float *m = problem_mask(&p, 3, 2, (int64_t[]){sh[2], sh[3]});
            for (int64_t i = 0; i < sh[2] * sh[3]; i++)
                m[i] = i % 5 == 0 ? -100.0f : 0.25f * (float)(i % 3);
        }
        float *got = run(&p, "reference", 1);
        int64_t n = out_numel(&p);
        double *want = malloc((size_t)n * sizeof(double));
        assert_non_null(want);
        attention_f64(&p, (float)(1.0 / sqrt((double)sh[4])), want);
        for (int64_t i = 0; i < n; i++) {
            double err = fabs((double)got[i] - want[i]);
            if (err > 1e-5 * (1.0 + fabs(want[i])))
                fail_msg("shape %zu element %lld: %.9g vs %.9g", s, (long long)i, (double)got[i],
                         want[i]);
        }
        free(want);
        free(got);
        problem_free(&p);
    }
}

/* The scale applies to q (then q.k), not to the scores: with d = 32 the two differ. */
static void test_scale_on_q(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 1, 1, 1, 2, 3, 1, 11, 1.0f);
    float q[3] = {0.3f, -1.7f, 2.9f}, k[6] = {1.1f, 0.2f, -0.7f, -2.0f, 0.9f, 0.4f},
          v[2] = {1.0f, -3.0f};
    memcpy(p.q, q, sizeof q);
    memcpy(p.k, k, sizeof k);
    memcpy(p.v, v, sizeof v);
    p.params.scale = 0.1767767f;
    float *got = run(&p, "reference", 1);
    float s[2];
    for (int j = 0; j < 2; j++) {
        float acc = 0.0f;
        for (int c = 0; c < 3; c++)
            acc = fmaf(q[c] * 0.1767767f, k[j * 3 + c], acc);
        s[j] = acc;
    }
    float m = s[0] > s[1] ? s[0] : s[1];
    float e0 = ly_sdpa_expf(s[0] - m), e1 = ly_sdpa_expf(s[1] - m);
    float inv = 1.0f / (e0 + e1);
    float want = fmaf(e1 * inv, v[1], fmaf(e0 * inv, v[0], 0.0f));
    assert_true(ly_sdpa_f32_bits(got[0]) == ly_sdpa_f32_bits(want));
    free(got);
    problem_free(&p);
}

/* A u8 mask adds 1.0 where non-zero: the same bits as the f32 mask of 1/0. */
static void test_bool_mask_adds_one(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 2, 2, 9, 11, 8, 8, 21, 1.5f);
    int64_t shape[4] = {2, 1, 9, 11};
    float *m = problem_mask(&p, 3, 4, shape);
    p.bool_mask = malloc(2 * 9 * 11);
    assert_non_null(p.bool_mask);
    for (int i = 0; i < 2 * 9 * 11; i++) {
        p.bool_mask[i] = (uint8_t)(i % 3 == 0 ? 0 : i % 7);
        m[i] = p.bool_mask[i] ? 1.0f : 0.0f;
    }
    float *with_float = run(&p, "reference", 1);
    ly_tensor tb;
    ly_tensor_init(&tb, p.bool_mask, LY_U8, 4, shape);
    p.call.in[3] = &tb;
    float *with_bool = run(&p, "reference", 1);
    assert_bits_equal(with_float, with_bool, out_numel(&p), "u8 vs f32 mask");
    if (ly_test_have_avx2()) {
        float *fused = run(&p, LY_SDPA_FUSED_AVX2, 2);
        assert_bits_equal(with_bool, fused, out_numel(&p), "u8 mask fused");
        free(fused);
    }
    free(with_float);
    free(with_bool);
    problem_free(&p);
}

/* A fully masked row is NaN (canonical), as manual attention gives. */
static void test_masked_row_nan(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 1, 1, 3, 5, 4, 4, 31, 1.0f);
    float *m = problem_mask(&p, 3, 2, (int64_t[]){3, 5});
    for (int j = 0; j < 5; j++)
        m[5 + j] = -INFINITY;
    float *got = run(&p, "reference", 1);
    for (int c = 0; c < 4; c++) {
        assert_true(isfinite(got[c]));
        assert_true(ly_sdpa_f32_bits(got[4 + c]) == LY_SDPA_CANONICAL_NAN_BITS);
    }
    free(got);
    problem_free(&p);
}

static void test_reference_thread_invariant(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 2, 3, 19, 23, 10, 6, 5, 1.5f);
    float *one = run(&p, "reference", 1);
    float *three = run(&p, "reference", 3);
    assert_bits_equal(one, three, out_numel(&p), "reference 1 vs 3 threads");
    free(one);
    free(three);
    problem_free(&p);
}

/* ---- validation ---------------------------------------------------------------------- */

static void expect_error(problem *p, ly_status want, const char *fragment)
{
    ly_status st = ly_kernel_dispatch_op(LY_OP_SDPA, &p->call);
    if (st != want || !strstr(ly_last_error(), fragment))
        fail_msg("expected %s with '%s', got %s: %s", ly_status_name(want), fragment,
                 ly_status_name(st), ly_last_error());
}

static void test_validation(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 2, 3, 4, 5, 6, 7, 1, 1.0f);
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_SDPA, &p.call), LY_OK);

    ly_tensor bad = p.tk;
    bad.shape[3] = 5;
    p.call.in[1] = &bad;
    expect_error(&p, LY_E_SHAPE, "sdpa: k: shape [2, 3, 5, 5]");
    p.call.in[1] = &p.tk;

    bad = p.tv;
    bad.shape[2] = 4;
    p.call.in[2] = &bad;
    expect_error(&p, LY_E_SHAPE, "sdpa: v");
    p.call.in[2] = &p.tv;

    bad = p.tq;
    bad.ndim = 3;
    p.call.in[0] = &bad;
    expect_error(&p, LY_E_SHAPE, "expected 4 dims");
    p.call.in[0] = &p.tq;

    float *m = problem_mask(&p, 3, 3, (int64_t[]){3, 4, 5});
    (void)m;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_SDPA, &p.call), LY_OK);
    p.tm.shape[0] = 2;
    expect_error(&p, LY_E_SHAPE, "does not broadcast");
    p.tm.shape[0] = 3;
    p.tm.dtype = LY_I32;
    expect_error(&p, LY_E_DTYPE, "mask (in[3])");
    p.tm.dtype = LY_F32;

    p.call.in[5] = &p.tq;
    expect_error(&p, LY_E_INVALID_ARGUMENT, "in[5] must be NULL");
    p.call.in[5] = NULL;

    p.params.scale = INFINITY;
    expect_error(&p, LY_E_INVALID_ARGUMENT, "params.scale");
    p.params.scale = 0.0;

    ly_tensor wrong_out = p.tout;
    wrong_out.shape[3] = 6;
    p.call.out[0] = &wrong_out;
    expect_error(&p, LY_E_SHAPE, "out[0]");
    problem_free(&p);
}

/* [A, B1, B2, C] -> [A, B2, B1, C] (swaps the middle axes: heads <-> tokens). */
static float *swap_middle(const float *x, int64_t a, int64_t b1, int64_t b2, int64_t c)
{
    float *y = malloc(((size_t)(a * b1 * b2 * c) + 1) * sizeof(float));
    assert_non_null(y);
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b1; j++)
            for (int64_t k = 0; k < b2; k++)
                memcpy(y + ((i * b2 + k) * b1 + j) * c, x + ((i * b1 + j) * b2 + k) * c,
                       (size_t)c * sizeof(float));
    return y;
}

/* Tokens first (LY_SDPA_BNHD) is a layout, not other numbers: every
 * implementation gives the bits of heads first on the same values, masks
 * (indexed [B, H, Nq, Nk] in both) included. */
static void test_tokens_first(void **state)
{
    (void)state;
    static const char *const impls[2] = {"reference", LY_SDPA_FUSED_AVX2};
    problem p;
    problem_init(&p, 2, 3, 37, 29, 20, 12, 17, 1.5f);
    float *m = problem_mask(&p, 3, 4, (int64_t[]){2, 1, 37, 29});
    for (int64_t i = 0; i < 2 * 37 * 29; i++)
        m[i] = i % 7 == 0 ? -100.0f : 0.25f * (float)(i % 5);
    float *q = swap_middle(p.q, 2, 3, 37, 20), *k = swap_middle(p.k, 2, 3, 29, 20),
          *v = swap_middle(p.v, 2, 3, 29, 12);
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !ly_test_have_avx2()) continue;
        p.params.layout = LY_SDPA_BHND;
        float *heads_first = run(&p, impls[i], 2);
        problem t = p;
        t.params.layout = LY_SDPA_BNHD;
        t.call.params = &t.params;
        ly_tensor_init(&t.tq, q, LY_F32, 4, (int64_t[]){2, 37, 3, 20});
        ly_tensor_init(&t.tk, k, LY_F32, 4, (int64_t[]){2, 29, 3, 20});
        ly_tensor_init(&t.tv, v, LY_F32, 4, (int64_t[]){2, 29, 3, 12});
        ly_tensor_init(&t.tout, NULL, LY_F32, 4, (int64_t[]){2, 37, 3, 12});
        t.call.in[0] = &t.tq, t.call.in[1] = &t.tk, t.call.in[2] = &t.tv;
        t.call.in[3] = &t.tm;
        t.call.out[0] = &t.tout;
        float *tokens_first = run(&t, impls[i], 2);
        float *back = swap_middle(tokens_first, 2, 37, 3, 12);
        assert_bits_equal(back, heads_first, out_numel(&p), impls[i]);
        free(heads_first);
        free(tokens_first);
        free(back);
    }
    p.params.layout = 2;
    expect_error(&p, LY_E_INVALID_ARGUMENT, "params.layout is 2");
    p.params.layout = LY_SDPA_BNHD; /* q [2, 3, 37, 20] read as [B, Nq, H, d]: k's H differs */
    expect_error(&p, LY_E_SHAPE, "expected [B, Nk, H, d]");
    free(q);
    free(k);
    free(v);
    problem_free(&p);
}

/* ---- the fused-attention policy -------------------------------------------------------- */

static int spy_calls;

static ly_status spy(const ly_kernel_call *call)
{
    spy_calls++;
    return ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), "reference", call);
}

static void test_policy(void **state)
{
    (void)state;
    problem p;
    problem_init(&p, 1, 2, 9, 9, 8, 8, 3, 1.5f);
    float *ref = run(&p, "reference", 1);

    /* A spy registered on top shows which path a call takes. */
    assert_int_equal(ly_kernel_register(ly_op_name(LY_OP_SDPA), "spy", spy, NULL), LY_OK);
    ly_attention_module module = {.fused_attn = false};
    spy_calls = 0;
    assert_int_equal(ly_sdpa_run(&module, &p.call), LY_OK);
    assert_int_equal(spy_calls, 0);
    assert_bits_equal(ref, p.out, out_numel(&p), "flag off");

    module.fused_attn = true;
    assert_int_equal(ly_sdpa_run(&module, &p.call), LY_OK);
    assert_int_equal(spy_calls, 1);
    assert_bits_equal(ref, p.out, out_numel(&p), "flag on (spy)");

    assert_int_equal(ly_kernels_capture_begin(), LY_OK);
    assert_int_equal(ly_sdpa_run(&module, &p.call), LY_OK);
    assert_int_equal(ly_kernels_capture_end(), LY_OK);
    assert_int_equal(spy_calls, 1);
    assert_bits_equal(ref, p.out, out_numel(&p), "capture");
    assert_int_equal(ly_kernel_unregister(ly_op_name(LY_OP_SDPA), "spy"), LY_OK);

    /* Without the spy the flag reaches the fused provider (when this machine has it). */
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve(ly_op_name(LY_OP_SDPA), &p.call, &name, NULL), LY_OK);
    assert_string_equal(name, ly_test_have_avx2() ? LY_SDPA_FUSED_AVX2 : "reference");
    memset(p.out, 0, (size_t)out_numel(&p) * sizeof(float));
    assert_int_equal(ly_sdpa_run(&module, &p.call), LY_OK);
    assert_bits_equal(ref, p.out, out_numel(&p), "flag on (fused)");

    /* While capturing, the fused provider's predicate declines too. */
    if (ly_test_have_avx2()) {
        assert_int_equal(ly_kernels_capture_begin(), LY_OK);
        assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), LY_SDPA_FUSED_AVX2, &p.call),
                         LY_E_UNAVAILABLE);
        assert_int_equal(ly_kernels_capture_end(), LY_OK);
    }
    assert_int_equal(ly_sdpa_run(NULL, &p.call), LY_E_INVALID_ARGUMENT);
    free(ref);
    problem_free(&p);
}

static void test_set_fused(void **state)
{
    (void)state;
    ly_attention_module a = {false}, b = {true}, c = {false};
    ly_attention_module *mods[4] = {&a, NULL, &b, &c};
    int count = -1;
    assert_int_equal(ly_attention_set_fused(mods, 4, true, &count), LY_OK);
    assert_int_equal(count, 3); /* b already on: still counted */
    assert_true(a.fused_attn && b.fused_attn && c.fused_attn);
    assert_int_equal(ly_attention_set_fused(mods, 4, false, NULL), LY_OK);
    assert_true(!a.fused_attn && !b.fused_attn && !c.fused_attn);
    assert_int_equal(ly_attention_set_fused(NULL, 0, true, &count), LY_OK);
    assert_int_equal(count, 0);
    assert_int_equal(ly_attention_set_fused(NULL, 2, true, &count), LY_E_INVALID_ARGUMENT);
}

/* ---- the parity harness's cases -------------------------------------------------------- */

typedef struct harness_seen {
    int reports, fused_reports;
    bool failed;
    char why[1024];
} harness_seen;

static void on_result(const ly_check_result *r, void *user)
{
    harness_seen *s = user;
    s->reports++;
    if (strcmp(r->impl, LY_SDPA_FUSED_AVX2) == 0) {
        s->fused_reports++;
        if (r->skipped || r->cases == 0) {
            s->failed = true;
            snprintf(s->why, sizeof s->why, "no cases ran: %s", r->why_skipped);
        }
    }
    if (ly_check_result_failed(r)) {
        s->failed = true;
        char verdict[128];
        ly_check_verdict(r, verdict, sizeof verdict);
        snprintf(s->why, sizeof s->why, "%s: %s, %lld mismatches, first error: %s%s%s", r->impl,
                 verdict, (long long)r->mismatches, r->first_error,
                 r->n_shown ? ", first mismatch in " : "", r->n_shown ? r->shown[0].case_name : "");
    }
}

/* The fused kernel against the reference on sdpa's cases (src/ops/sdpa/cases.c:
 * the model shapes, tails, every mask layout, hostile values) through the
 * parity harness, on the thread counts the gate (1 and 3) leaves out. */
static void test_parity_harness(void **state)
{
    (void)state;
    for (int threads = 2; threads <= 5; threads += 3) {
        harness_seen seen = {0};
        ly_check_options opt = {
            .slot = ly_op_name(LY_OP_SDPA), .threads = threads, .size = LY_CHECK_QUICK};
        assert_int_equal(ly_check_parity_ex(&opt, on_result, &seen), LY_OK);
        if (seen.failed) fail_msg("%d threads: %s", threads, seen.why);
        assert_int_equal(seen.fused_reports, ly_test_have_avx2() ? 1 : 0);
    }

    /* "reference" against itself: determinism. */
    harness_seen seen = {0};
    ly_check_options opt = {
        .slot = ly_op_name(LY_OP_SDPA), .impl = "reference", .threads = 2, .size = LY_CHECK_QUICK};
    assert_int_equal(ly_check_parity_ex(&opt, on_result, &seen), LY_OK);
    if (seen.failed) fail_msg("%s", seen.why);
    assert_int_equal(seen.reports, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf),           cmocka_unit_test(test_reference_accuracy),
        cmocka_unit_test(test_scale_on_q),     cmocka_unit_test(test_bool_mask_adds_one),
        cmocka_unit_test(test_masked_row_nan), cmocka_unit_test(test_reference_thread_invariant),
        cmocka_unit_test(test_validation),     cmocka_unit_test(test_policy),
        cmocka_unit_test(test_set_fused),      cmocka_unit_test(test_parity_harness),
        cmocka_unit_test(test_tokens_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
