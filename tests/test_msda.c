/* SPDX-License-Identifier: MIT */
/*
 * ms_deform_attn: the reference against hand-computed cases and an independent
 * double-precision formulation (CUDA's loc*W - 0.5 unnormalisation, plain
 * bilinear), forward and backward, finite differences for the location
 * gradient; ragged == uniform when the counts are equal; discrete mode; the
 * contract's error messages; export capture; and the AVX2 provider
 * bit-identical to the reference on the slot's own cases (src/ops/msda/cases.c)
 * through the parity harness, on 2 threads (the gate runs 1 and 3).
 */
#include "kernels/check.h"
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"
#include "libreyolo/msda.h"
#include "ops/msda/msda_internal.h"
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

/* ---- A problem: every operand of both slots ------------------------------------- */

typedef struct problem {
    int64_t B, Lq, H, C, L, K, len_in;
    int64_t hw[8][2];
    int64_t points[8];
    bool ragged;
    int mode;
    float *value, *loc, *attn, *grad_out;
    int64_t *shapes, *npoints;
    ly_tensor t_value, t_shapes, t_loc, t_attn, t_np, t_grad;
} problem;

static uint64_t seed;

static float unit(void)
{
    return (float)(ly_test_splitmix64(&seed) >> 40) * 0x1p-24f;
}

static float normalish(void)
{
    return (unit() + unit() + unit() + unit() - 2.0f) * 1.7f;
}

/* levels: pairs (h, w); points: per level; ragged chooses the layout. */
static void problem_init(problem *p, int64_t B, int64_t Lq, int64_t H, int64_t C, int64_t L,
                         const int64_t (*hw)[2], const int64_t *points, bool ragged, int mode)
{
    memset(p, 0, sizeof *p);
    p->B = B;
    p->Lq = Lq;
    p->H = H;
    p->C = C;
    p->L = L;
    p->ragged = ragged;
    p->mode = mode;
    for (int64_t l = 0; l < L; l++) {
        p->hw[l][0] = hw[l][0];
        p->hw[l][1] = hw[l][1];
        p->points[l] = points[l];
        p->len_in += hw[l][0] * hw[l][1];
        p->K += points[l];
    }
    int64_t nv = B * p->len_in * H * C, rows = B * Lq * H;
    p->value = malloc((size_t)(nv + 1) * sizeof(float));
    p->loc = malloc((size_t)(rows * p->K * 2 + 1) * sizeof(float));
    p->attn = malloc((size_t)(rows * p->K + 1) * sizeof(float));
    p->grad_out = malloc((size_t)(rows * C + 1) * sizeof(float));
    p->shapes = malloc((size_t)L * 2 * sizeof(int64_t));
    p->npoints = malloc((size_t)L * sizeof(int64_t));
    assert_true(p->value && p->loc && p->attn && p->grad_out && p->shapes && p->npoints);
    for (int64_t l = 0; l < L; l++) {
        p->shapes[2 * l] = hw[l][0];
        p->shapes[2 * l + 1] = hw[l][1];
        p->npoints[l] = points[l];
    }
    for (int64_t i = 0; i < nv; i++)
        p->value[i] = normalish();
    for (int64_t i = 0; i < rows * p->K * 2; i++)
        p->loc[i] = unit() * 1.1f - 0.05f;
    for (int64_t r = 0; r < rows; r++) {
        float sum = 0.0f;
        for (int64_t k = 0; k < p->K; k++)
            sum += (p->attn[r * p->K + k] = expf(normalish()));
        for (int64_t k = 0; k < p->K; k++)
            p->attn[r * p->K + k] /= sum;
    }
    for (int64_t i = 0; i < rows * C; i++)
        p->grad_out[i] = normalish();
    ly_tensor_init(&p->t_value, p->value, LY_F32, 4, (int64_t[]){B, p->len_in, H, C});
    ly_tensor_init(&p->t_shapes, p->shapes, LY_I64, 2, (int64_t[]){L, 2});
    ly_tensor_init(&p->t_np, p->npoints, LY_I64, 1, (int64_t[]){L});
    ly_tensor_init(&p->t_grad, p->grad_out, LY_F32, 3, (int64_t[]){B, Lq, H * C});
    if (ragged) {
        ly_tensor_init(&p->t_loc, p->loc, LY_F32, 5, (int64_t[]){B, Lq, H, p->K, 2});
        ly_tensor_init(&p->t_attn, p->attn, LY_F32, 4, (int64_t[]){B, Lq, H, p->K});
    } else {
        int64_t P = points[0];
        ly_tensor_init(&p->t_loc, p->loc, LY_F32, 6, (int64_t[]){B, Lq, H, L, P, 2});
        ly_tensor_init(&p->t_attn, p->attn, LY_F32, 5, (int64_t[]){B, Lq, H, L, P});
    }
}

static void problem_free(problem *p)
{
    free(p->value);
    free(p->loc);
    free(p->attn);
    free(p->grad_out);
    free(p->shapes);
    free(p->npoints);
}

/* Outputs of one run. */
typedef struct result {
    float *out, *gv, *gl, *ga;
    ly_tensor t_out, t_gv, t_gl, t_ga;
} result;

static void result_init(result *r, const problem *p)
{
    int64_t rows = p->B * p->Lq * p->H;
    r->out = malloc((size_t)(rows * p->C + 1) * sizeof(float));
    r->gv = malloc((size_t)(p->B * p->len_in * p->H * p->C + 1) * sizeof(float));
    r->gl = malloc((size_t)(rows * p->K * 2 + 1) * sizeof(float));
    r->ga = malloc((size_t)(rows * p->K + 1) * sizeof(float));
    assert_true(r->out && r->gv && r->gl && r->ga);
    memset(r->out, 0xAB, (size_t)(rows * p->C + 1) * sizeof(float));
    ly_tensor_init(&r->t_out, r->out, LY_F32, 3, (int64_t[]){p->B, p->Lq, p->H * p->C});
    r->t_gv = p->t_value;
    r->t_gv.data = r->gv;
    r->t_gl = p->t_loc;
    r->t_gl.data = r->gl;
    r->t_ga = p->t_attn;
    r->t_ga.data = r->ga;
}

static void result_free(result *r)
{
    free(r->out);
    free(r->gv);
    free(r->gl);
    free(r->ga);
}

static ly_status run_forward(const problem *p, const char *impl, int threads, result *r)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p->t_value;
    call.in[1] = &p->t_shapes;
    call.in[2] = &p->t_loc;
    call.in[3] = &p->t_attn;
    call.in[4] = p->ragged ? &p->t_np : NULL;
    call.out[0] = &r->t_out;
    call.params = &(ly_ms_deform_attn_params){.mode = p->mode};
    call.threads = threads;
    return ly_kernel_run_impl(ly_op_name(LY_OP_MS_DEFORM_ATTN), impl, &call);
}

static ly_status run_backward(const problem *p, const char *impl, int threads, result *r)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p->t_grad;
    call.in[1] = &p->t_value;
    call.in[2] = &p->t_shapes;
    call.in[3] = &p->t_loc;
    call.in[4] = &p->t_attn;
    call.in[5] = p->ragged ? &p->t_np : NULL;
    call.out[0] = &r->t_gv;
    call.out[1] = &r->t_gl;
    call.out[2] = &r->t_ga;
    call.params = &(ly_ms_deform_attn_params){.mode = p->mode};
    call.threads = threads;
    return ly_kernel_run_impl(ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD), impl, &call);
}

/* ---- The independent formulation, in double ------------------------------------ */

static double vat(const problem *p, int64_t b, int64_t l, int64_t row, int64_t col, int64_t h,
                  int64_t c)
{
    if (row < 0 || col < 0 || row >= p->hw[l][0] || col >= p->hw[l][1]) return 0.0;
    int64_t start = 0;
    for (int64_t i = 0; i < l; i++)
        start += p->hw[i][0] * p->hw[i][1];
    int64_t pos = start + row * p->hw[l][1] + col;
    return p->value[((b * p->len_in + pos) * p->H + h) * p->C + c];
}

/* Sample value of channel c at (x, y) in pixels (CUDA's unnormalisation). */
static double bilinear_d(const problem *p, int64_t b, int64_t l, int64_t h, int64_t c, double x,
                         double y, double *dx, double *dy)
{
    double x0 = floor(x), y0 = floor(y), lx = x - x0, ly = y - y0;
    int64_t ix = (int64_t)x0, iy = (int64_t)y0;
    double v1 = vat(p, b, l, iy, ix, h, c), v2 = vat(p, b, l, iy, ix + 1, h, c);
    double v3 = vat(p, b, l, iy + 1, ix, h, c), v4 = vat(p, b, l, iy + 1, ix + 1, h, c);
    if (dx) *dx = (1 - ly) * (v2 - v1) + ly * (v4 - v3);
    if (dy) *dy = (1 - lx) * (v3 - v1) + lx * (v4 - v2);
    return (1 - ly) * (1 - lx) * v1 + (1 - ly) * lx * v2 + ly * (1 - lx) * v3 + ly * lx * v4;
}

/* The discrete index is a definition, not an approximation: computed as the
 * contract says (fp32 product, fp32 + 0.5, truncation, clamped to [0, last]). */
static int64_t nearest(double loc, int64_t size, int64_t last)
{
    float t = (float)loc * (float)size + 0.5f;
    if (!(t >= 1.0f)) return 0;
    if (t >= (float)(last + 1)) return last;
    return (int64_t)t;
}

/* Both coordinates to [0, H - 1] (LibreYOLO's clamp); x to [0, W - 1] as well. */
static int64_t discrete_row(double loc, int64_t H)
{
    return nearest(loc, H, H - 1);
}

static int64_t discrete_col(double loc, int64_t H, int64_t W)
{
    return nearest(loc, W, (H < W ? H : W) - 1);
}

static int64_t level_of(const problem *p, int64_t k)
{
    for (int64_t l = 0; l < p->L; l++) {
        if (k < p->points[l]) return l;
        k -= p->points[l];
    }
    return -1;
}

/* Forward output element (b, q, h, c), with the sample's loc replaced by
 * (lx_over, ly_over) when k_over >= 0 (finite differences). */
static double forward_d(const problem *p, int64_t b, int64_t q, int64_t h, int64_t c,
                        int64_t k_over, double x_over, double y_over)
{
    int64_t row = (b * p->Lq + q) * p->H + h;
    double acc = 0.0;
    for (int64_t k = 0; k < p->K; k++) {
        int64_t l = level_of(p, k);
        double lxn = p->loc[(row * p->K + k) * 2], lyn = p->loc[(row * p->K + k) * 2 + 1];
        if (k == k_over) {
            lxn = x_over;
            lyn = y_over;
        }
        double a = p->attn[row * p->K + k];
        if (p->mode == LY_MSDA_DISCRETE) {
            /* both coordinates to [0, H - 1]; x to [0, W - 1] as well */
            int64_t H = p->hw[l][0], W = p->hw[l][1];
            acc += a *
                   vat(p, b, l, nearest(lyn, H, H - 1), nearest(lxn, W, (H < W ? H : W) - 1), h, c);
            continue;
        }
        acc += a * bilinear_d(p, b, l, h, c, lxn * p->hw[l][1] - 0.5, lyn * p->hw[l][0] - 0.5, NULL,
                              NULL);
    }
    return acc;
}

static void expect_close(double got, double want, double tol, const char *what, int64_t i)
{
    if (fabs(got - want) <= tol) return;
    fail_msg("%s[%lld]: %.9g, expected %.9g (tolerance %g)", what, (long long)i, got, want, tol);
}

static double max_abs(const float *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static void check_forward_vs_double(const problem *p, const result *r)
{
    int64_t n = p->B * p->Lq * p->H * p->C;
    double tol = 2e-5 * (1.0 + max_abs(r->out, n));
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t q = 0; q < p->Lq; q++)
            for (int64_t h = 0; h < p->H; h++)
                for (int64_t c = 0; c < p->C; c++) {
                    int64_t i = ((b * p->Lq + q) * p->H + h) * p->C + c;
                    expect_close(r->out[i], forward_d(p, b, q, h, c, -1, 0, 0), tol, "out", i);
                }
}

/* The analytic gradients in double, compared with the reference's. */
static void check_backward_vs_double(const problem *p, const result *r)
{
    int64_t nv = p->B * p->len_in * p->H * p->C, rows = p->B * p->Lq * p->H;
    double *gv = calloc((size_t)nv + 1, sizeof(double));
    assert_non_null(gv);
    double tol_a = 1e-5 * (1.0 + max_abs(r->ga, rows * p->K));
    double tol_l = 1e-4 * (1.0 + max_abs(r->gl, rows * p->K * 2));
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t q = 0; q < p->Lq; q++)
            for (int64_t h = 0; h < p->H; h++) {
                int64_t row = (b * p->Lq + q) * p->H + h;
                for (int64_t k = 0; k < p->K; k++) {
                    int64_t l = level_of(p, k), W = p->hw[l][1], Hl = p->hw[l][0];
                    double lxn = p->loc[(row * p->K + k) * 2],
                           lyn = p->loc[(row * p->K + k) * 2 + 1];
                    double a = p->attn[row * p->K + k];
                    double x = lxn * W - 0.5, y = lyn * Hl - 0.5;
                    double ga = 0, gx = 0, gy = 0;
                    for (int64_t c = 0; c < p->C; c++) {
                        double g = p->grad_out[row * p->C + c], dx = 0, dy = 0, val;
                        if (p->mode == LY_MSDA_DISCRETE) {
                            val =
                                vat(p, b, l, discrete_row(lyn, Hl), discrete_col(lxn, Hl, W), h, c);
                        } else {
                            val = bilinear_d(p, b, l, h, c, x, y, &dx, &dy);
                        }
                        ga += g * val;
                        gx += g * a * dx * W;
                        gy += g * a * dy * Hl;
                    }
                    expect_close(r->ga[row * p->K + k], ga, tol_a, "grad_attn", row * p->K + k);
                    expect_close(r->gl[(row * p->K + k) * 2], gx, tol_l, "grad_loc_x",
                                 row * p->K + k);
                    expect_close(r->gl[(row * p->K + k) * 2 + 1], gy, tol_l, "grad_loc_y",
                                 row * p->K + k);
                    /* value gradient: scatter in double */
                    int64_t start = 0;
                    for (int64_t i = 0; i < l; i++)
                        start += p->hw[i][0] * p->hw[i][1];
                    double x0 = floor(x), y0 = floor(y), fx = x - x0, fy = y - y0;
                    int64_t cx[4], cy[4];
                    double w[4];
                    if (p->mode == LY_MSDA_DISCRETE) {
                        cx[0] = discrete_col(lxn, Hl, W);
                        cy[0] = discrete_row(lyn, Hl);
                        w[0] = 1;
                        w[1] = w[2] = w[3] = 0;
                        cx[1] = cx[2] = cx[3] = -1;
                        cy[1] = cy[2] = cy[3] = -1;
                    } else {
                        int64_t ix = (int64_t)x0, iy = (int64_t)y0;
                        int64_t xs[4] = {ix, ix + 1, ix, ix + 1}, ys[4] = {iy, iy, iy + 1, iy + 1};
                        double ws[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
                        memcpy(cx, xs, sizeof cx);
                        memcpy(cy, ys, sizeof cy);
                        memcpy(w, ws, sizeof w);
                    }
                    for (int i = 0; i < 4; i++) {
                        if (cx[i] < 0 || cy[i] < 0 || cx[i] >= W || cy[i] >= Hl) continue;
                        int64_t pos = start + cy[i] * W + cx[i];
                        for (int64_t c = 0; c < p->C; c++)
                            gv[((b * p->len_in + pos) * p->H + h) * p->C + c] +=
                                w[i] * a * p->grad_out[row * p->C + c];
                    }
                }
            }
    double tol_v = 1e-5 * (1.0 + max_abs(r->gv, nv));
    for (int64_t i = 0; i < nv; i++)
        expect_close(r->gv[i], gv[i], tol_v, "grad_value", i);
    free(gv);
}

/* ---- Hand-computed cases --------------------------------------------------------- */

/* One level 2 x 4, H 1, C 2, one query, points given; value(row, col, c) =
 * 10*row + col + 100*c (exact in binary). */
static void tiny(problem *p, int64_t P, int mode)
{
    const int64_t hw[1][2] = {{2, 4}};
    problem_init(p, 1, 1, 1, 2, 1, hw, (int64_t[]){P}, false, mode);
    for (int64_t row = 0; row < 2; row++)
        for (int64_t col = 0; col < 4; col++)
            for (int64_t c = 0; c < 2; c++)
                p->value[(row * 4 + col) * 2 + c] = (float)(10 * row + col + 100 * c);
}

static void test_hand_bilinear(void **state)
{
    (void)state;
    problem p;
    tiny(&p, 4, LY_MSDA_BILINEAR);
    /* pixel centre (row 1, col 2): loc = ((2 + 0.5) / 4, (1 + 0.5) / 2) */
    float locs[4][2] = {{0.625f, 0.75f}, {0.5f, 0.5f}, {-1.0f, -1.0f}, {0.0f, 0.25f}};
    float attn[4] = {1.0f, 0.5f, 7.0f, 2.0f};
    memcpy(p.loc, locs, sizeof locs);
    memcpy(p.attn, attn, sizeof attn);
    result r;
    result_init(&r, &p);
    assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
    /* 1 * v(1,2) + 0.5 * mean of v(0..1, 1..2) + 7 * 0 + 2 * (x = -0.5: half of column 0,
     * y = 0: row 0) */
    double want0 = 1.0 * 12 + 0.5 * (1 + 2 + 11 + 12) / 4.0 + 2 * 0.5 * 0;
    double want1 = 1.0 * 112 + 0.5 * (101 + 102 + 111 + 112) / 4.0 + 2 * 0.5 * 100;
    assert_true(r.out[0] == (float)want0);
    assert_true(r.out[1] == (float)want1);
    result_free(&r);
    problem_free(&p);
}

static void test_hand_discrete(void **state)
{
    (void)state;
    problem p;
    tiny(&p, 5, LY_MSDA_DISCRETE);
    /* int64(loc*size + 0.5), both coordinates clamped to [0, H - 1] = [0, 1] on this 2x4
     * level (LibreYOLO's clamp(0, h - 1); x never reaches columns 2 and 3) */
    float locs[5][2] = {{0.3f, 0.3f},  /* x 1.7 -> 1, y 1.1 -> 1 */
                        {1.0f, 1.0f},  /* 4.5 -> 4 -> 1, 2.5 -> 2 -> 1 */
                        {-0.4f, -5.f}, /* clamp 0, 0 */
                        {NAN, 0.1f},   /* NaN -> 0; 0.7 -> 0 */
                        {0.8f, 0.2f}}; /* 3.7 -> 3 -> 1; 0.9 -> 0 */
    float attn[5] = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
    memcpy(p.loc, locs, sizeof locs);
    memcpy(p.attn, attn, sizeof attn);
    result r;
    result_init(&r, &p);
    assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
    double want0 = 1 * 11 + 2 * 11 + 4 * 0 + 8 * 0 + 16 * 1;
    assert_true(r.out[0] == (float)want0);
    assert_true(r.out[1] == (float)(want0 + 100 * 31));
    /* Backward: grad_loc is 0, grad_attn = g . v, grad_value collects g * a. */
    p.grad_out[0] = 1.0f;
    p.grad_out[1] = 0.5f;
    assert_int_equal(run_backward(&p, "reference", 1, &r), LY_OK);
    for (int i = 0; i < 10; i++)
        assert_true(r.gl[i] == 0.0f);
    assert_true(r.ga[0] == 11.0f + 0.5f * 111.0f);
    assert_true(r.gv[(0 * 4 + 0) * 2 + 0] == 4.0f + 8.0f); /* (0, 0) from points 2 and 3 */
    assert_true(r.gv[(1 * 4 + 1) * 2 + 1] == 1.5f);        /* (1, 1) from points 0, 1; g 0.5 */
    assert_true(r.gv[(1 * 4 + 3) * 2 + 1] == 0.0f);        /* column 3 is never sampled */
    result_free(&r);
    problem_free(&p);
}

/* Edge coordinates x = loc*W - 0.5 in {-1, -0.5, 0, W-1, W-0.5, W}. */
static void test_edges(void **state)
{
    (void)state;
    problem p;
    tiny(&p, 6, LY_MSDA_BILINEAR);
    const float xs[6] = {-1.0f, -0.5f, 0.0f, 3.0f, 3.5f, 4.0f};
    for (int k = 0; k < 6; k++) {
        p.loc[2 * k] = (xs[k] + 0.5f) / 4.0f;
        p.loc[2 * k + 1] = 0.75f; /* row 1 exactly */
        p.attn[k] = (float)(1 << k);
    }
    result r;
    result_init(&r, &p);
    assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
    /* row 1: 10..13; -1 -> 0, -0.5 -> 5, 0 -> 10, 3 -> 13, 3.5 -> 6.5, 4 -> 0 */
    double want = 0 * 1 + 5 * 2 + 10 * 4 + 13 * 8 + 6.5 * 16 + 0 * 32;
    assert_true(r.out[0] == (float)want);
    check_forward_vs_double(&p, &r);
    result_free(&r);
    problem_free(&p);
}

/* ---- Against the double formulation ------------------------------------------------- */

typedef struct config {
    int64_t B, Lq, H, C, L;
    int64_t hw[4][2];
    int64_t points[4];
    bool ragged;
} config;

static const config configs[] = {
    {2, 3, 2, 4, 2, {{4, 6}, {2, 3}}, {2, 2}, false},             /* the classic test shape */
    {1, 7, 3, 13, 3, {{5, 7}, {3, 2}, {1, 1}}, {3, 3, 3}, false}, /* tails, 1x1 level */
    {1, 9, 8, 8, 2, {{20, 20}, {10, 10}}, {4, 2}, true},          /* DEIMv2-atto's ragged [4, 2] */
    {1, 4, 2, 40, 1, {{6, 5}}, {5}, false},                       /* two channel blocks */
    {2, 2, 2, 33, 2, {{2, 5}, {6, 1}}, {3, 0}, true},             /* a level without points */
    {1, 2, 2, 8, 4, {{8, 8}, {4, 4}, {2, 2}, {1, 1}}, {20, 20, 20, 20}, false}, /* K 80 */
    {1, 2, 3, 12, 2, {{5, 5}, {3, 3}}, {150, 150}, false}, /* K 300: prepared in chunks */
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

static void setup_config(problem *p, const config *c, int mode)
{
    problem_init(p, c->B, c->Lq, c->H, c->C, c->L, c->hw, c->points, c->ragged, mode);
}

static void test_reference_vs_double(void **state)
{
    (void)state;
    seed = 1;
    for (size_t i = 0; i < N_CONFIGS; i++)
        for (int mode = 0; mode < 2; mode++) {
            problem p;
            setup_config(&p, &configs[i], mode);
            result r;
            result_init(&r, &p);
            assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
            check_forward_vs_double(&p, &r);
            assert_int_equal(run_backward(&p, "reference", 1, &r), LY_OK);
            check_backward_vs_double(&p, &r);
            result_free(&r);
            problem_free(&p);
        }
}

/* d out / d loc by central differences of the double forward, against the
 * reference's grad_loc: sum over c of grad_out * d out_c / d loc. */
static void test_backward_finite_differences(void **state)
{
    (void)state;
    seed = 2;
    problem p;
    setup_config(&p, &configs[0], LY_MSDA_BILINEAR);
    result r;
    result_init(&r, &p);
    assert_int_equal(run_backward(&p, "reference", 1, &r), LY_OK);
    const double eps = 1e-4;
    int checked = 0;
    for (int64_t b = 0; b < p.B; b++)
        for (int64_t q = 0; q < p.Lq; q++)
            for (int64_t h = 0; h < p.H; h++) {
                int64_t row = (b * p.Lq + q) * p.H + h;
                for (int64_t k = 0; k < p.K; k++) {
                    int64_t l = level_of(&p, k);
                    double lx = p.loc[(row * p.K + k) * 2], ly = p.loc[(row * p.K + k) * 2 + 1];
                    /* skip samples within eps of a cell boundary: one-sided there */
                    double fx = lx * p.hw[l][1] - 0.5, fy = ly * p.hw[l][0] - 0.5;
                    double ex = eps * p.hw[l][1], ey = eps * p.hw[l][0];
                    if (floor(fx - ex) != floor(fx + ex) || floor(fy - ey) != floor(fy + ey))
                        continue;
                    double gx = 0, gy = 0;
                    for (int64_t c = 0; c < p.C; c++) {
                        double g = p.grad_out[row * p.C + c];
                        gx += g *
                              (forward_d(&p, b, q, h, c, k, lx + eps, ly) -
                               forward_d(&p, b, q, h, c, k, lx - eps, ly)) /
                              (2 * eps);
                        gy += g *
                              (forward_d(&p, b, q, h, c, k, lx, ly + eps) -
                               forward_d(&p, b, q, h, c, k, lx, ly - eps)) /
                              (2 * eps);
                    }
                    double tol = 1e-3 * (1.0 + fabs(gx) + fabs(gy));
                    expect_close(r.gl[(row * p.K + k) * 2], gx, tol, "fd grad_loc_x", k);
                    expect_close(r.gl[(row * p.K + k) * 2 + 1], gy, tol, "fd grad_loc_y", k);
                    checked++;
                }
            }
    assert_true(checked > 10);
    result_free(&r);
    problem_free(&p);
}

static void test_ragged_equals_uniform(void **state)
{
    (void)state;
    seed = 3;
    const int64_t hw[3][2] = {{6, 5}, {3, 3}, {1, 2}};
    for (int mode = 0; mode < 2; mode++) {
        problem u, g;
        seed = 3;
        problem_init(&u, 2, 5, 3, 12, 3, hw, (int64_t[]){3, 3, 3}, false, mode);
        seed = 3;
        problem_init(&g, 2, 5, 3, 12, 3, hw, (int64_t[]){3, 3, 3}, true, mode);
        result ru, rg;
        result_init(&ru, &u);
        result_init(&rg, &g);
        assert_int_equal(run_forward(&u, "reference", 1, &ru), LY_OK);
        assert_int_equal(run_forward(&g, "reference", 1, &rg), LY_OK);
        int64_t rows = u.B * u.Lq * u.H;
        assert_memory_equal(ru.out, rg.out, (size_t)(rows * u.C) * sizeof(float));
        assert_int_equal(run_backward(&u, "reference", 1, &ru), LY_OK);
        assert_int_equal(run_backward(&g, "reference", 1, &rg), LY_OK);
        assert_memory_equal(ru.gv, rg.gv, (size_t)(u.B * u.len_in * u.H * u.C) * sizeof(float));
        assert_memory_equal(ru.gl, rg.gl, (size_t)(rows * u.K * 2) * sizeof(float));
        assert_memory_equal(ru.ga, rg.ga, (size_t)(rows * u.K) * sizeof(float));
        result_free(&ru);
        result_free(&rg);
        problem_free(&u);
        problem_free(&g);
    }
}

/* NaN is written as the canonical quiet NaN; far-away samples give exactly 0. */
static void test_specials(void **state)
{
    (void)state;
    problem p;
    tiny(&p, 3, LY_MSDA_BILINEAR);
    float locs[3][2] = {{1e10f, 0.5f}, {-INFINITY, 0.5f}, {0.5f, 0.5f}};
    memcpy(p.loc, locs, sizeof locs);
    p.attn[0] = p.attn[1] = p.attn[2] = 1.0f;
    result r;
    result_init(&r, &p);
    p.attn[1] = 0.0f;
    p.loc[2] = 0.5f; /* the inf sample is moved inside, with weight 0 */
    assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
    double want = (1 + 2 + 11 + 12) / 4.0;
    assert_true(r.out[0] == (float)want);
    p.loc[2] = -INFINITY; /* inf - inf in the weights: NaN */
    assert_int_equal(run_forward(&p, "reference", 1, &r), LY_OK);
    uint32_t bits;
    memcpy(&bits, &r.out[0], 4);
    assert_int_equal(bits, LY_MSDA_NAN_BITS);
    result_free(&r);
    problem_free(&p);
}

/* While a graph is captured for export the provider is not eligible, and a
 * dispatch is served by the reference. */
static void test_capture(void **state)
{
    (void)state;
    if (!ly_test_have_avx2()) {
        skip();
        return;
    }
    seed = 4;
    problem p;
    setup_config(&p, &configs[0], LY_MSDA_BILINEAR);
    result r;
    result_init(&r, &p);
    assert_int_equal(ly_kernels_capture_begin(), LY_OK);
    assert_int_equal(run_forward(&p, "avx2", 1, &r), LY_E_UNAVAILABLE);
    assert_int_equal(ly_ms_deform_attn(&p.t_value, &p.t_shapes, &p.t_loc, &p.t_attn, NULL,
                                       LY_MSDA_BILINEAR, 1, &r.t_out),
                     LY_OK);
    assert_int_equal(ly_kernels_capture_end(), LY_OK);
    assert_int_equal(run_forward(&p, "avx2", 1, &r), LY_OK);
    result_free(&r);
    problem_free(&p);
}

/* The typed wrappers give the reference's bits. */
static void test_wrappers(void **state)
{
    (void)state;
    seed = 5;
    problem p;
    setup_config(&p, &configs[2], LY_MSDA_BILINEAR);
    result a, b;
    result_init(&a, &p);
    result_init(&b, &p);
    int64_t rows = p.B * p.Lq * p.H;
    assert_int_equal(run_forward(&p, "reference", 1, &a), LY_OK);
    assert_int_equal(ly_ms_deform_attn(&p.t_value, &p.t_shapes, &p.t_loc, &p.t_attn, &p.t_np,
                                       LY_MSDA_BILINEAR, 0, &b.t_out),
                     LY_OK);
    assert_memory_equal(a.out, b.out, (size_t)(rows * p.C) * sizeof(float));
    assert_int_equal(run_backward(&p, "reference", 1, &a), LY_OK);
    assert_int_equal(ly_ms_deform_attn_backward(&p.t_grad, &p.t_value, &p.t_shapes, &p.t_loc,
                                                &p.t_attn, &p.t_np, LY_MSDA_BILINEAR, 2, &b.t_gv,
                                                &b.t_gl, &b.t_ga),
                     LY_OK);
    assert_memory_equal(a.gl, b.gl, (size_t)(rows * p.K * 2) * sizeof(float));
    result_free(&a);
    result_free(&b);
    problem_free(&p);
}

/* ---- The contract ------------------------------------------------------------------- */

static void expect_error(ly_status got, ly_status want, const char *needle1, const char *needle2)
{
    if (got != want)
        fail_msg("status %s, expected %s (%s)", ly_status_name(got), ly_status_name(want),
                 ly_last_error());
    if (!strstr(ly_last_error(), needle1) || (needle2 && !strstr(ly_last_error(), needle2)))
        fail_msg("message '%s' lacks '%s'/'%s'", ly_last_error(), needle1, needle2 ? needle2 : "");
}

static void test_contract(void **state)
{
    (void)state;
    seed = 6;
    problem p;
    setup_config(&p, &configs[0], LY_MSDA_BILINEAR);
    result r;
    result_init(&r, &p);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &p.t_value;
    call.in[1] = &p.t_shapes;
    call.in[2] = &p.t_loc;
    call.in[3] = &p.t_attn;
    call.out[0] = &r.t_out;
    const char *slot = ly_op_name(LY_OP_MS_DEFORM_ATTN);
    assert_int_equal(ly_kernel_dispatch(slot, &call), LY_OK);

    ly_tensor t = p.t_value;
    t.dtype = LY_F64;
    call.in[0] = &t;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_DTYPE, "value", "expected f32");
    t = p.t_value;
    t.ndim = 3;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "value", "[B, Len_in, H, C]");
    t = p.t_value;
    t.shape[1] = 29;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "spatial_shapes", "Len_in = 29");
    call.in[0] = &p.t_value;

    t = p.t_shapes;
    t.dtype = LY_I32;
    call.in[1] = &t;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_DTYPE, "spatial_shapes", "expected i64");
    t = p.t_shapes;
    t.shape[1] = 3;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "spatial_shapes", "[L, 2]");
    int64_t bad_hw[4] = {4, 6, 0, 3};
    t = p.t_shapes;
    t.data = bad_hw;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "spatial_shapes", "level 1");
    call.in[1] = &p.t_shapes;

    t = p.t_loc;
    t.shape[3] = 3;
    call.in[2] = &t;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "sampling_locations",
                 "[B, Lq, H, L, P, 2]");
    t = p.t_loc;
    t.shape[5] = 3;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "sampling_locations", "2]");
    call.in[2] = &p.t_loc;

    t = p.t_attn;
    t.shape[4] = 1;
    call.in[3] = &t;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "attention_weights",
                 "[B, Lq, H, L, P]");
    call.in[3] = NULL;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_INVALID_ARGUMENT, "attention_weights",
                 "NULL");
    call.in[3] = &p.t_attn;

    /* num_points with a uniform layout: the ranks disagree */
    call.in[4] = &p.t_np;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "sampling_locations",
                 "[B, Lq, H, sum(P), 2]");
    int64_t np_bad[2] = {3, 1};
    t = p.t_np;
    t.data = np_bad;
    call.in[4] = &t;
    call.in[2] = &(ly_tensor){.data = p.loc, .dtype = LY_F32, .ndim = 5, .shape = {2, 3, 2, 4, 2}};
    call.in[3] = &(ly_tensor){.data = p.attn, .dtype = LY_F32, .ndim = 4, .shape = {2, 3, 2, 4}};
    assert_int_equal(ly_kernel_dispatch(slot, &call), LY_OK); /* 3 + 1 = 4 points */
    np_bad[1] = -1;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_INVALID_ARGUMENT, "num_points", "level 1");
    call.in[2] = &p.t_loc;
    call.in[3] = &p.t_attn;
    call.in[4] = NULL;

    call.in[5] = &p.t_np;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_INVALID_ARGUMENT, "in[5]", "NULL");
    call.in[5] = NULL;
    ly_ms_deform_attn_params bad_mode = {.mode = 2};
    call.params = &bad_mode;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_INVALID_ARGUMENT, "params.mode", "discrete");
    call.params = NULL;

    ly_tensor out = r.t_out;
    out.shape[2] = 7;
    call.out[0] = &out;
    expect_error(ly_kernel_dispatch(slot, &call), LY_E_SHAPE, "out[0]", "[2, 3, 8]");
    call.out[0] = &r.t_out;

    /* backward: grad_output and the outputs */
    ly_kernel_call bc;
    ly_kernel_call_init(&bc);
    bc.in[0] = &p.t_grad;
    bc.in[1] = &p.t_value;
    bc.in[2] = &p.t_shapes;
    bc.in[3] = &p.t_loc;
    bc.in[4] = &p.t_attn;
    bc.out[0] = &r.t_gv;
    bc.out[1] = &r.t_gl;
    bc.out[2] = &r.t_ga;
    slot = ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD);
    assert_int_equal(ly_kernel_dispatch(slot, &bc), LY_OK);
    t = p.t_grad;
    t.shape[2] = 9;
    bc.in[0] = &t;
    expect_error(ly_kernel_dispatch(slot, &bc), LY_E_SHAPE, "grad_output", "[B, Lq, H*C]");
    bc.in[0] = &p.t_grad;
    bc.out[1] = &r.t_ga;
    expect_error(ly_kernel_dispatch(slot, &bc), LY_E_SHAPE, "out[1]", "");
    result_free(&r);
    problem_free(&p);
}

/* ---- The parity harness' own cases --------------------------------------------------- */

typedef struct tally {
    int results, failed;
    char first[512];
} tally;

static void on_result(const ly_check_result *r, void *user)
{
    tally *t = user;
    t->results++;
    if (ly_check_result_failed(r) && t->failed++ == 0) {
        char verdict[160];
        ly_check_verdict(r, verdict, sizeof verdict);
        snprintf(t->first, sizeof t->first, "%s/%s: %s %s", r->slot, r->impl, verdict,
                 r->first_error);
    }
}

static void test_parity_harness(void **state)
{
    (void)state;
    const char *slots[2] = {ly_op_name(LY_OP_MS_DEFORM_ATTN),
                            ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD)};
    for (int s = 0; s < 2; s++) {
        tally t = {0};
        ly_check_options opt = {.slot = slots[s], .threads = 2, .size = LY_CHECK_QUICK};
        assert_int_equal(ly_check_parity_ex(&opt, on_result, &t), LY_OK);
        if (t.failed) fail_msg("%s", t.first);
        assert_int_equal(t.results, ly_test_have_avx2() ? 1 : 0);
        /* "reference" against itself: determinism */
        tally self = {0};
        opt.impl = "reference";
        assert_int_equal(ly_check_parity_ex(&opt, on_result, &self), LY_OK);
        if (self.failed) fail_msg("%s", self.first);
        assert_int_equal(self.results, 1);
    }
}

/* ---- LibreYOLO's own results (../shared/testdata/{rtdetr,rtdetrv2}/msda_unit) ------------ */

#define MSDA_UNIT_V1 LY_SHARED_DIR "/testdata/rtdetr/msda_unit"
#define MSDA_UNIT_V2 LY_SHARED_DIR "/testdata/rtdetrv2/msda_unit"

static bool unit_load(const char *dir, const char *name, ly_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    ly_status st = ly_npy_load(path, t);
    if (st == LY_E_NOT_FOUND) return false;
    if (st != LY_OK) fail_msg("%s: %s", path, ly_last_error());
    return true;
}

/* out within 1e-6 of max|want| (the gate on LibreYOLO's core). */
static void unit_compare(const char *what, const float *got, const ly_tensor *want)
{
    const float *w = want->data;
    int64_t n = ly_tensor_numel(want);
    double mag = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        mag = fmax(mag, fabs((double)w[i]));
        diff = fmax(diff, fabs((double)got[i] - (double)w[i]));
    }
    if (!(diff <= 1e-6 * mag)) fail_msg("%s: max |diff| %g > 1e-6 of max|ref| %g", what, diff, mag);
}

/* The core on the fixture's inputs through `impl` (NULL: the registry's choice). */
static void unit_run(const char *what, const char *impl, const ly_tensor *value,
                     const ly_tensor *shapes, const ly_tensor *loc, const ly_tensor *attn,
                     const ly_tensor *points, int mode, const ly_tensor *want)
{
    float *out = calloc((size_t)ly_tensor_numel(want), sizeof(float));
    ly_tensor o;
    assert_int_equal(ly_tensor_init(&o, out, LY_F32, want->ndim, want->shape), LY_OK);
    ly_ms_deform_attn_params params = {.mode = mode};
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = value;
    call.in[1] = shapes;
    call.in[2] = loc;
    call.in[3] = attn;
    call.in[4] = points;
    call.out[0] = &o;
    call.params = &params;
    call.threads = 2;
    ly_status st = impl ? ly_kernel_run_impl("ms_deform_attn", impl, &call)
                        : ly_kernel_dispatch_op(LY_OP_MS_DEFORM_ATTN, &call);
    if (st == LY_E_DECLINED) {
        print_message("%s: %s declined\n", what, impl);
    } else {
        if (st != LY_OK) fail_msg("%s: %s", what, ly_last_error());
        unit_compare(what, out, want);
    }
    free(out);
}

static void test_libreyolo_msda_unit(void **state)
{
    (void)state;
    ly_tensor value, shapes, attn;
    if (!unit_load(MSDA_UNIT_V2, "value", &value)) {
        print_message("skipped: the fixture " MSDA_UNIT_V2 " is absent\n");
        skip();
    }
    assert_true(unit_load(MSDA_UNIT_V2, "spatial_shapes", &shapes));
    assert_true(unit_load(MSDA_UNIT_V2, "attention_weights", &attn));
    const char *impls[] = {"reference", ly_test_have_avx2() ? "avx2" : NULL, NULL};
    /* RT-DETRv2: the flat layout, points per level [4, 4, 4] and [3, 6, 3], both methods;
     * levels [6, 10], [3, 5], [2, 3] (H, W): discrete's clamp of x to H - 1 shows. */
    static const struct {
        const char *name;
        int64_t points[3];
    } variants[] = {{"p444", {4, 4, 4}}, {"p363", {3, 6, 3}}};
    for (int v = 0; v < 2; v++) {
        int64_t three = 3;
        ly_tensor points, loc;
        assert_int_equal(ly_tensor_init(&points, (void *)variants[v].points, LY_I64, 1, &three),
                         LY_OK);
        char name[64];
        snprintf(name, sizeof name, "%s_sampling_locations", variants[v].name);
        assert_true(unit_load(MSDA_UNIT_V2, name, &loc));
        for (int mode = LY_MSDA_BILINEAR; mode <= LY_MSDA_DISCRETE; mode++) {
            ly_tensor want;
            snprintf(name, sizeof name, "%s_%s_core_out", variants[v].name,
                     mode == LY_MSDA_DISCRETE ? "discrete" : "default");
            assert_true(unit_load(MSDA_UNIT_V2, name, &want));
            for (int i = 0; i <= 2; i++) {
                if (i < 2 && !impls[i]) continue;
                char what[128];
                snprintf(what, sizeof what, "rtdetrv2 %s, %s", name, i < 2 ? impls[i] : "dispatch");
                unit_run(what, i < 2 ? impls[i] : NULL, &value, &shapes, &loc, &attn, &points, mode,
                         &want);
            }
            ly_npy_free(&want);
        }
        ly_npy_free(&loc);
    }
    ly_npy_free(&value);
    ly_npy_free(&shapes);
    ly_npy_free(&attn);
    /* RT-DETR: [levels, points] = [3, 4], bilinear only. */
    ly_tensor loc, want;
    if (!unit_load(MSDA_UNIT_V1, "value", &value)) {
        print_message("skipped: the fixture " MSDA_UNIT_V1 " is absent\n");
        return;
    }
    assert_true(unit_load(MSDA_UNIT_V1, "spatial_shapes", &shapes));
    assert_true(unit_load(MSDA_UNIT_V1, "attention_weights", &attn));
    assert_true(unit_load(MSDA_UNIT_V1, "p4_sampling_locations", &loc));
    assert_true(unit_load(MSDA_UNIT_V1, "p4_core_out", &want));
    attn.ndim = 5; /* softmax over L * P, viewed as [B, Lq, H, L, P] */
    attn.shape[3] = 3;
    attn.shape[4] = 4;
    for (int i = 0; i <= 2; i++) {
        if (i < 2 && !impls[i]) continue;
        char what[64];
        snprintf(what, sizeof what, "rtdetr p4_core_out, %s", i < 2 ? impls[i] : "dispatch");
        unit_run(what, i < 2 ? impls[i] : NULL, &value, &shapes, &loc, &attn, NULL,
                 LY_MSDA_BILINEAR, &want);
    }
    ly_npy_free(&value);
    ly_npy_free(&shapes);
    ly_npy_free(&attn);
    ly_npy_free(&loc);
    ly_npy_free(&want);
}

/* grid_sample by hand on [[0, 1, 2], [3, 4, 5]] (PyTorch's grid_sample gives
 * the same): pixel centres, a midpoint, the left edge (half a pixel of zeros),
 * outside, the far corner; align_corners; nearest (ties to even, as ATen's
 * nearbyint). A NaN coordinate samples nothing (0), as ExecuTorch's portable
 * kernel, where PyTorch's vectorized CPU kernel gives NaN. */
static void test_grid_sample_by_hand(void **state)
{
    (void)state;
    float in[6] = {0, 1, 2, 3, 4, 5};
    const float third = 1.0f / 3.0f;
    float grid[7][2] = {{-2.0f * third, -0.5f}, /* centre of (0, 0) */
                        {2.0f * third, 0.5f},   /* centre of (1, 2) */
                        {-third, -0.5f},        /* between (0, 0) and (0, 1) */
                        {-1.0f, 0.5f},          /* left edge of row 1: half of 3 */
                        {-3.0f, 0.0f},          /* outside */
                        {NAN, 0.0f},            /* NaN: nothing sampled */
                        {1.0f, 1.0f}};          /* the far corner */
    struct {
        int mode, corners;
        float want[7];
    } cases[] = {
        {0, 0, {0.0f, 5.0f, 0.5f, 1.5f, 0.0f, 0.0f, 1.25f}},
        {0, 1, {13.0f / 12.0f, 47.0f / 12.0f, 17.0f / 12.0f, 2.25f, 0.0f, 0.0f, 5.0f}},
        {1, 0, {0.0f, 5.0f, 0.0f, 3.0f, 0.0f, 0.0f, 0.0f}},
    };
    float out[7];
    ly_tensor x = {.data = in, .dtype = LY_F32, .ndim = 4, .shape = {1, 1, 2, 3}};
    ly_tensor g = {.data = grid, .dtype = LY_F32, .ndim = 4, .shape = {1, 1, 7, 2}};
    ly_tensor y = {.data = out, .dtype = LY_F32, .ndim = 4, .shape = {1, 1, 1, 7}};
    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = &x;
    call.in[1] = &g;
    call.out[0] = &y;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ly_grid_sample_params p = {.mode = cases[c].mode, .align_corners = cases[c].corners};
        call.params = &p;
        assert_int_equal(ly_kernel_dispatch("grid_sample", &call), LY_OK);
        for (int i = 0; i < 7; i++)
            if (fabsf(out[i] - cases[c].want[i]) > 1e-6f)
                fail_msg("mode %d align_corners %d point %d: %g, expected %g", cases[c].mode,
                         cases[c].corners, i, out[i], cases[c].want[i]);
    }
    /* refused: another padding, a grid of other pairs */
    ly_grid_sample_params border = {.padding_mode = 1};
    call.params = &border;
    assert_int_equal(ly_kernel_dispatch("grid_sample", &call), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "padding_mode is 1"));
    ly_tensor g3 = {.data = grid, .dtype = LY_F32, .ndim = 4, .shape = {1, 1, 2, 7}};
    call.in[1] = &g3;
    call.params = NULL;
    assert_int_equal(ly_kernel_dispatch("grid_sample", &call), LY_E_SHAPE);
    assert_non_null(strstr(ly_last_error(), "grid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_bilinear),
        cmocka_unit_test(test_grid_sample_by_hand),
        cmocka_unit_test(test_hand_discrete),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_reference_vs_double),
        cmocka_unit_test(test_backward_finite_differences),
        cmocka_unit_test(test_ragged_equals_uniform),
        cmocka_unit_test(test_specials),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_wrappers),
        cmocka_unit_test(test_contract),
        cmocka_unit_test(test_parity_harness),
        cmocka_unit_test(test_libreyolo_msda_unit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
