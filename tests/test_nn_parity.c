/* SPDX-License-Identifier: MIT */
/*
 * Every registered conv2d implementation against the reference on YOLO9t-like
 * layer shapes (small spatial sizes), plus odd shapes, dilation, batches and
 * the operator caches (a second call, weights replaced at the same address, the
 * output aliasing the residual). Tolerance: max |diff| <= 1e-4 * max(1, max|ref|),
 * since libraries sum in another order (and oneDNN has its own exp).
 * LIBREYOLO_TEST_VERBOSE=1 prints the max abs and rel error per provider and shape.
 */
#include "libreyolo/nn.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define TOLERANCE 1e-4

typedef struct conv_case {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t activation;
    bool bias, residual;
} conv_case;

/* Mostly LibreYOLO9t layers (yolo9.md §1.2) at reduced resolution. */
static const conv_case cases[] = {
    {"conv0 3->16 3x3 s2 64x64", 1, 3, 64, 64, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"conv1 16->32 3x3 s2 33x33", 1, 16, 33, 33, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"bottleneck 16->16 3x3 +res 24x24", 1, 16, 24, 24, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, LY_ACT_SILU,
     true, true},
    {"elan 48->24 1x1 20x20", 1, 48, 20, 20, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"head box 64->64 3x3 g4 20x20", 1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, 1, 1, 4, LY_ACT_SILU,
     true, false},
    {"head box 64->64 1x1 g4 bias 20x20", 1, 64, 20, 20, 64, 1, 1, 1, 1, 0, 0, 1, 1, 4, LY_ACT_NONE,
     true, false},
    {"elan4 cv4 128->256 1x1 10x10", 1, 128, 10, 10, 256, 1, 1, 1, 1, 0, 0, 1, 1, 1, LY_ACT_SILU,
     true, false},
    {"down4 96->128 3x3 s2 19x19", 1, 96, 19, 19, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"head cls 80->80 3x3 12x12", 1, 80, 12, 12, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"odd 24->24 3x3 sigmoid 17x13", 1, 24, 17, 13, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, LY_ACT_SIGMOID,
     true, false},
    {"dilated 8->12 3x3 d2 relu 15x15", 1, 8, 15, 15, 12, 3, 3, 1, 1, 2, 2, 2, 2, 1, LY_ACT_RELU,
     true, false},
    {"odd 5->7 3x5 s(2,1) p(1,2) no bias", 1, 5, 11, 9, 7, 3, 5, 2, 1, 1, 2, 1, 1, 1, LY_ACT_NONE,
     false, false},
    {"depthwise 6 3x3 +res 9x9", 1, 6, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, LY_ACT_NONE, true, true},
    {"batch 2 16->24 3x3 12x12", 2, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, LY_ACT_SILU, true,
     false},
    {"1x1 s2 16->8 10x10 (trailing input dropped)", 1, 16, 10, 10, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1,
     LY_ACT_NONE, true, false},
    {"5x5 p2 s3 4->4 14x14", 1, 4, 14, 14, 4, 5, 5, 3, 3, 2, 2, 1, 1, 1, LY_ACT_RELU, false, true},
    /* NanoDet-g: LeakyReLU(0.1) after 3x3 and 1x1 convolutions, strided stem. */
    {"nanodet 3x3 leaky 32->64 13x13", 1, 32, 13, 13, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1,
     LY_ACT_LEAKY_RELU, true, false},
    {"nanodet 1x1 leaky 64->32 13x13", 1, 64, 13, 13, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1,
     LY_ACT_LEAKY_RELU, true, false},
    {"nanodet stem 3->16 3x3 s2 leaky 26x26", 1, 3, 26, 26, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1,
     LY_ACT_LEAKY_RELU, true, false},
    {"nanodet 1x1 lateral 48->16 +res 9x9", 1, 48, 9, 9, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, LY_ACT_NONE,
     true, true},
};

static bool verbose(void)
{
    const char *v = getenv("LIBREYOLO_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

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

typedef struct conv_data {
    ly_tensor x, w, b, r, ref, out;
    ly_conv2d_params params;
    ly_kernel_call call;
} conv_data;

static void conv_data_init(conv_data *d, const conv_case *c)
{
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)strlen(c->name) * 977u;
    int64_t ho = (c->h + 2 * c->ph - c->dh * (c->kh - 1) - 1) / c->sh + 1;
    int64_t wo = (c->w + 2 * c->pw - c->dw * (c->kw - 1) - 1) / c->sw + 1;
    int64_t xs[4] = {c->n, c->c, c->h, c->w}, ws[4] = {c->o, c->c / c->groups, c->kh, c->kw};
    int64_t bs[1] = {c->o}, ys[4] = {c->n, c->o, ho, wo};
    float fan_in = (float)(c->c / c->groups * c->kh * c->kw);
    assert_int_equal(
        ly_tensor_init(&d->x, random_buffer(c->n * c->c * c->h * c->w, 2.0f), LY_F32, 4, xs),
        LY_OK);
    assert_int_equal(
        ly_tensor_init(&d->w, random_buffer(ws[0] * ws[1] * ws[2] * ws[3], 2.0f / sqrtf(fan_in)),
                       LY_F32, 4, ws),
        LY_OK);
    assert_int_equal(ly_tensor_init(&d->b, random_buffer(c->o, 0.5f), LY_F32, 1, bs), LY_OK);
    int64_t out_n = ys[0] * ys[1] * ys[2] * ys[3];
    assert_int_equal(ly_tensor_init(&d->r, random_buffer(out_n, 1.0f), LY_F32, 4, ys), LY_OK);
    assert_int_equal(ly_tensor_init(&d->ref, random_buffer(out_n, 1.0f), LY_F32, 4, ys), LY_OK);
    assert_int_equal(ly_tensor_init(&d->out, random_buffer(out_n, 1.0f), LY_F32, 4, ys), LY_OK);
    assert_int_equal(ly_kernel_call_init(&d->call), LY_OK);
    d->call.in[0] = &d->x;
    d->call.in[1] = &d->w;
    d->call.in[2] = c->bias ? &d->b : NULL;
    d->call.in[3] = c->residual ? &d->r : NULL;
    d->params = (ly_conv2d_params)LY_CONV2D_DEFAULTS;
    d->params.stride[0] = c->sh;
    d->params.stride[1] = c->sw;
    d->params.padding[0] = c->ph;
    d->params.padding[1] = c->pw;
    d->params.dilation[0] = c->dh;
    d->params.dilation[1] = c->dw;
    d->params.groups = c->groups;
    d->params.activation = c->activation;
    d->params.alpha = 0.1;
    d->call.params = &d->params;
    d->call.threads = 1;
}

static void conv_data_free(conv_data *d)
{
    free(d->x.data);
    free(d->w.data);
    free(d->b.data);
    free(d->r.data);
    free(d->ref.data);
    free(d->out.data);
}

static void run_reference(conv_data *d)
{
    d->call.out[0] = &d->ref;
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), "reference", &d->call);
    if (st != LY_OK) fail_msg("reference: %s: %s", ly_status_name(st), ly_last_error());
}

/* Max |diff| and max |ref|; fails the test beyond the tolerance. */
static void compare(const char *impl, const char *what, const ly_tensor *ref, const ly_tensor *got)
{
    int64_t n = ly_tensor_numel(ref);
    const float *a = ref->data, *b = got->data;
    double max_diff = 0, max_ref = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (!(diff <= max_diff)) { /* NaN counts as the worst */
            max_diff = isnan(diff) ? INFINITY : diff;
            worst = i;
        }
        if (fabs(a[i]) > max_ref) max_ref = fabs(a[i]);
    }
    double scale = max_ref > 1.0 ? max_ref : 1.0;
    if (verbose())
        printf("  %-9s %-46s max abs %.3g  rel %.3g\n", impl, what, max_diff, max_diff / scale);
    if (!(max_diff <= TOLERANCE * scale))
        fail_msg("%s on '%s': max |diff| %g at %lld (ref %.9g, got %.9g) > %g * %g", impl, what,
                 max_diff, (long long)worst, (double)a[worst], (double)b[worst], TOLERANCE, scale);
}

typedef struct impl_list {
    const char *names[16];
    int count;
} impl_list;

static bool collect_impl(const char *name, ly_kernel_fn fn, void *user)
{
    (void)fn;
    impl_list *list = user;
    if (strcmp(name, "reference") != 0 && list->count < 16) list->names[list->count++] = name;
    return true;
}

static impl_list providers_for(const ly_kernel_call *call)
{
    impl_list list = {.count = 0};
    assert_int_equal(ly_kernel_iter(ly_op_name(LY_OP_CONV2D), call, collect_impl, &list), LY_OK);
    return list;
}

static void run_impl_into_out(conv_data *d, const char *impl)
{
    memset(d->out.data, 0xff, (size_t)ly_tensor_numel(&d->out) * sizeof(float)); /* NaN canary */
    d->call.out[0] = &d->out;
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), impl, &d->call);
    if (st != LY_OK) fail_msg("%s: %s: %s", impl, ly_status_name(st), ly_last_error());
}

static void test_conv2d_providers_match_reference(void **state)
{
    (void)state;
    int tested = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *c = &cases[i];
        conv_data d;
        conv_data_init(&d, c);
        run_reference(&d);
        impl_list list = providers_for(&d.call);
        for (int k = 0; k < list.count; k++) {
            for (int threads = 1; threads <= 2; threads++) {
                d.call.threads = threads;
                char what[128];
                snprintf(what, sizeof what, "%s, %d thread%s", c->name, threads,
                         threads > 1 ? "s" : "");
                run_impl_into_out(&d, list.names[k]);
                compare(list.names[k], what, &d.ref, &d.out);
                /* Second call: served from the operator cache. */
                run_impl_into_out(&d, list.names[k]);
                compare(list.names[k], what, &d.ref, &d.out);
                tested++;
            }
            d.call.threads = 1;
        }
        conv_data_free(&d);
    }
    if (verbose()) printf("  %d provider x shape x thread runs compared\n", tested);
}

/* New weight values at the same address must not be served stale packed weights. */
static void test_conv2d_weights_replaced_in_place(void **state)
{
    (void)state;
    const conv_case *c = &cases[2];
    conv_data d;
    conv_data_init(&d, c);
    impl_list list = providers_for(&d.call);
    for (int k = 0; k < list.count; k++) {
        run_impl_into_out(&d, list.names[k]); /* caches an operator for these weights */
        float *w = d.w.data, *b = d.b.data;
        for (int64_t i = 0; i < ly_tensor_numel(&d.w); i++)
            w[i] = uniform() * 0.3f;
        for (int64_t i = 0; i < ly_tensor_numel(&d.b); i++)
            b[i] = uniform();
        run_reference(&d);
        run_impl_into_out(&d, list.names[k]);
        compare(list.names[k], "weights replaced at the same address", &d.ref, &d.out);
    }
    conv_data_free(&d);
}

/* The output may be the residual buffer itself (in-place residual add). */
static void test_conv2d_output_aliases_residual(void **state)
{
    (void)state;
    const conv_case *c = &cases[2];
    conv_data d;
    conv_data_init(&d, c);
    run_reference(&d);
    impl_list list = providers_for(&d.call);
    size_t bytes = (size_t)ly_tensor_numel(&d.r) * sizeof(float);
    float *saved = malloc(bytes);
    assert_non_null(saved);
    memcpy(saved, d.r.data, bytes);
    for (int k = 0; k < list.count; k++) {
        memcpy(d.r.data, saved, bytes);
        d.call.out[0] = &d.r;
        ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), list.names[k], &d.call);
        if (st != LY_OK) fail_msg("%s: %s: %s", list.names[k], ly_status_name(st), ly_last_error());
        compare(list.names[k], "output aliases the residual", &d.ref, &d.r);
    }
    memcpy(d.r.data, saved, bytes);
    free(saved);
    conv_data_free(&d);
}

/* Each optional library, when built, is registered under its name and is what
 * LIBREYOLO_KERNELS=<name> selects for conv2d. */
static void test_conv2d_providers_registered_by_name(void **state)
{
    (void)state;
    const char *built[3];
    int n = 0;
#ifdef LY_HAVE_ONEDNN
    built[n++] = "onednn";
#endif
#ifdef LY_HAVE_XNNPACK
    built[n++] = "xnnpack";
#endif
#ifdef LY_HAVE_OPENBLAS
    built[n++] = "openblas";
#endif
    if (n == 0) skip();
    for (int i = 0; i < n; i++) {
        setenv("LIBREYOLO_KERNELS", built[i], 1);
        const char *name = NULL;
        ly_status st = ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &name, NULL);
        if (st != LY_OK) fail_msg("%s: %s", built[i], ly_last_error());
        assert_string_equal(name, built[i]);
    }
    setenv("LIBREYOLO_KERNELS", "off", 1);
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &name, NULL), LY_OK);
    assert_string_equal(name, "reference");
    unsetenv("LIBREYOLO_KERNELS");
}

/* The LeakyReLU slope is part of what a cached operator was built for. */
static void test_conv2d_leaky_alpha_not_cached_stale(void **state)
{
    (void)state;
    const conv_case *c = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strstr(cases[i].name, "1x1 leaky")) c = &cases[i];
    assert_non_null(c);
    conv_data d;
    conv_data_init(&d, c);
    impl_list list = providers_for(&d.call);
    for (int k = 0; k < list.count; k++) {
        for (int round = 0; round < 2; round++) {
            d.params.alpha = round == 0 ? 0.1 : 0.25;
            run_reference(&d);
            run_impl_into_out(&d, list.names[k]);
            compare(list.names[k], round == 0 ? "leaky 0.1" : "leaky 0.25 after 0.1", &d.ref,
                    &d.out);
        }
    }
    /* A slope that is not a number is refused by the slot. */
    d.params.alpha = NAN;
    d.call.out[0] = &d.out;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONV2D, &d.call), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "params.alpha"));
    conv_data_free(&d);
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

/* Dispatch (the path a model takes) gives the reference's numbers too. */
static void test_conv2d_dispatch(void **state)
{
    (void)state;
    const conv_case *c = &cases[4];
    conv_data d;
    conv_data_init(&d, c);
    run_reference(&d);
    d.call.out[0] = &d.out;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONV2D, &d.call), LY_OK);
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), &d.call, &name, NULL), LY_OK);
    compare(name, "dispatch", &d.ref, &d.out);
    conv_data_free(&d);
}

/* Threads sharing one weight tensor (hence one cached operator) each get the
 * reference's answer. */
typedef struct worker {
    conv_data *shared;
    const char *impl;
    ly_tensor out;
    ly_status status;
} worker;

static void *worker_run(void *arg)
{
    worker *wk = arg;
    ly_kernel_call call = wk->shared->call;
    call.out[0] = &wk->out;
    call.threads = 1;
    for (int i = 0; i < 8 && wk->status == LY_OK; i++)
        wk->status = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), wk->impl, &call);
    return NULL;
}

static void test_conv2d_concurrent_callers(void **state)
{
    (void)state;
    enum { WORKERS = 4 };
    conv_data d;
    conv_data_init(&d, &cases[8]);
    run_reference(&d);
    impl_list list = providers_for(&d.call);
    for (int k = 0; k < list.count; k++) {
        worker workers[WORKERS];
        pthread_t ids[WORKERS];
        for (int i = 0; i < WORKERS; i++) {
            workers[i] = (worker){&d, list.names[k], d.ref, LY_OK};
            workers[i].out.data = random_buffer(ly_tensor_numel(&d.ref), 1.0f);
            assert_int_equal(pthread_create(&ids[i], NULL, worker_run, &workers[i]), 0);
        }
        for (int i = 0; i < WORKERS; i++)
            assert_int_equal(pthread_join(ids[i], NULL), 0);
        for (int i = 0; i < WORKERS; i++) {
            if (workers[i].status != LY_OK)
                fail_msg("%s: %s", list.names[k], ly_status_name(workers[i].status));
            compare(list.names[k], "concurrent callers", &d.ref, &workers[i].out);
            free(workers[i].out.data);
        }
    }
    conv_data_free(&d);
}

/* Every other implementation of the elementwise slots (oneDNN's have their own
 * exp) against the reference, on an odd-sized tensor with values from -30 to 30. */
static void test_elementwise_providers_match_reference(void **state)
{
    (void)state;
    const char *slots[] = {ly_op_name(LY_OP_SILU), ly_op_name(LY_OP_SIGMOID)};
    int64_t shape[4] = {2, 3, 37, 41};
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    rng_state = 42;
    float *x = random_buffer(n, 30.0f);
    x[0] = 0.0f;
    x[1] = -88.0f;
    x[2] = 88.0f;
    conv_data holder;
    assert_int_equal(ly_tensor_init(&holder.x, x, LY_F32, 4, shape), LY_OK);
    assert_int_equal(ly_tensor_init(&holder.ref, random_buffer(n, 1.0f), LY_F32, 4, shape), LY_OK);
    assert_int_equal(ly_tensor_init(&holder.out, random_buffer(n, 1.0f), LY_F32, 4, shape), LY_OK);
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        ly_kernel_call call;
        assert_int_equal(ly_kernel_call_init(&call), LY_OK);
        call.threads = 1;
        call.in[0] = &holder.x;
        call.out[0] = &holder.ref;
        assert_int_equal(ly_kernel_run_impl(slots[i], "reference", &call), LY_OK);
        impl_list list = {.count = 0};
        assert_int_equal(ly_kernel_iter(slots[i], &call, collect_impl, &list), LY_OK);
        call.out[0] = &holder.out;
        for (int k = 0; k < list.count; k++) {
            for (int threads = 1; threads <= 2; threads++) {
                call.threads = threads;
                ly_status st = ly_kernel_run_impl(slots[i], list.names[k], &call);
                if (st != LY_OK)
                    fail_msg("%s/%s: %s: %s", slots[i], list.names[k], ly_status_name(st),
                             ly_last_error());
                compare(list.names[k], slots[i], &holder.ref, &holder.out);
            }
        }
    }
    free(x);
    free(holder.ref.data);
    free(holder.out.data);
}

/* dfl's other implementations against the reference: YOLO9's 16 bins and a
 * small odd case, logits from -10 to 10 with a few far larger. */
static void test_dfl_providers_match_reference(void **state)
{
    (void)state;
    const int64_t shapes[][3] = {{2, 64, 333}, {1, 8, 37}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t n = shapes[i][0] * shapes[i][1] * shapes[i][2];
        int64_t out_shape[3] = {shapes[i][0], 4, shapes[i][2]};
        rng_state = 7 + i;
        float *x = random_buffer(n, 10.0f);
        x[0] = 80.0f;
        x[n - 1] = -80.0f;
        ly_tensor xt, ref, got;
        assert_int_equal(ly_tensor_init(&xt, x, LY_F32, 3, shapes[i]), LY_OK);
        assert_int_equal(ly_tensor_init(&ref, random_buffer(n / 4 * 4, 1.0f), LY_F32, 3, out_shape),
                         LY_OK);
        assert_int_equal(ly_tensor_init(&got, random_buffer(n / 4 * 4, 1.0f), LY_F32, 3, out_shape),
                         LY_OK);
        ly_kernel_call call;
        assert_int_equal(ly_kernel_call_init(&call), LY_OK);
        call.threads = 1;
        call.in[0] = &xt;
        call.out[0] = &ref;
        assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_DFL), "reference", &call), LY_OK);
        impl_list list = {.count = 0};
        assert_int_equal(ly_kernel_iter(ly_op_name(LY_OP_DFL), &call, collect_impl, &list), LY_OK);
        call.out[0] = &got;
        for (int k = 0; k < list.count; k++) {
            ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_DFL), list.names[k], &call);
            if (st != LY_OK) fail_msg("dfl/%s: %s", list.names[k], ly_last_error());
            compare(list.names[k], i == 0 ? "dfl [2, 64, 333]" : "dfl [1, 8, 37]", &ref, &got);
        }
        free(x);
        free(ref.data);
        free(got.data);
    }
}

/* Pools' other implementations against the reference, on finite inputs; an
 * implementation may decline a shape it has no fast kernel for. */
static void test_pool_providers_match_reference(void **state)
{
    (void)state;
    const struct {
        const char *slot;
        int64_t c, h, k, s, p, count_include_pad;
    } pools[] = {
        {ly_op_name(LY_OP_MAX_POOL2D), 64, 20, 5, 1, 2, 1},
        {ly_op_name(LY_OP_MAX_POOL2D), 16, 17, 3, 2, 1, 1},
        {ly_op_name(LY_OP_AVG_POOL2D), 32, 33, 2, 1, 0, 1},
        {ly_op_name(LY_OP_AVG_POOL2D), 64, 20, 2, 1, 0, 1},
        {ly_op_name(LY_OP_AVG_POOL2D), 16, 15, 3, 2, 1, 1},
        {ly_op_name(LY_OP_AVG_POOL2D), 16, 15, 3, 2, 1, 0},
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        int64_t ho = (pools[i].h + 2 * pools[i].p - pools[i].k) / pools[i].s + 1;
        int64_t xs[4] = {1, pools[i].c, pools[i].h, pools[i].h}, ys[4] = {1, pools[i].c, ho, ho};
        rng_state = 99 + i;
        ly_tensor x, ref, got;
        assert_int_equal(
            ly_tensor_init(&x, random_buffer(xs[1] * xs[2] * xs[3], 5.0f), LY_F32, 4, xs), LY_OK);
        assert_int_equal(ly_tensor_init(&ref, random_buffer(ys[1] * ho * ho, 1.0f), LY_F32, 4, ys),
                         LY_OK);
        assert_int_equal(ly_tensor_init(&got, random_buffer(ys[1] * ho * ho, 1.0f), LY_F32, 4, ys),
                         LY_OK);
        ly_kernel_call call;
        assert_int_equal(ly_kernel_call_init(&call), LY_OK);
        call.threads = 1;
        call.in[0] = &x;
        call.out[0] = &ref;
        ly_pool2d_params pp = {.kernel = {pools[i].k, pools[i].k},
                               .stride = {pools[i].s, pools[i].s},
                               .padding = {pools[i].p, pools[i].p},
                               .count_include_pad = pools[i].count_include_pad};
        call.params = &pp;
        assert_int_equal(ly_kernel_run_impl(pools[i].slot, "reference", &call), LY_OK);
        impl_list list = {.count = 0};
        assert_int_equal(ly_kernel_iter(pools[i].slot, &call, collect_impl, &list), LY_OK);
        call.out[0] = &got;
        for (int k = 0; k < list.count; k++) {
            for (int threads = 1; threads <= 2; threads++) {
                call.threads = threads;
                ly_status st = ly_kernel_run_impl(pools[i].slot, list.names[k], &call);
                if (st == LY_E_DECLINED) continue;
                if (st != LY_OK)
                    fail_msg("%s/%s: %s", pools[i].slot, list.names[k], ly_last_error());
                char what[96];
                snprintf(what, sizeof what, "%s k%lld s%lld p%lld on %lldx%lld^2", pools[i].slot,
                         (long long)pools[i].k, (long long)pools[i].s, (long long)pools[i].p,
                         (long long)pools[i].c, (long long)pools[i].h);
                compare(list.names[k], what, &ref, &got);
            }
        }
        free(x.data);
        free(ref.data);
        free(got.data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_providers_match_reference),
        cmocka_unit_test(test_conv2d_weights_replaced_in_place),
        cmocka_unit_test(test_conv2d_output_aliases_residual),
        cmocka_unit_test(test_conv2d_providers_registered_by_name),
        cmocka_unit_test(test_conv2d_dispatch),
        cmocka_unit_test(test_conv2d_leaky_alpha_not_cached_stale),
        cmocka_unit_test(test_resize_and_add_references),
        cmocka_unit_test(test_conv2d_concurrent_callers),
        cmocka_unit_test(test_elementwise_providers_match_reference),
        cmocka_unit_test(test_dfl_providers_match_reference),
        cmocka_unit_test(test_pool_providers_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
