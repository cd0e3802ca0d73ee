/*
 * Parity cases of the network-op slots (conv2d, pools, upsample, activations,
 * dfl) for `libreyolo kernels check`.
 *
 * Libraries sum in their own order and bring their own exp, so these slots are
 * gated by a tolerance instead of bit identity: every output element must be
 * within LY_CHECK_NN_TOLERANCE * max(1, max |reference|) of the reference.
 * Shapes are LibreYOLO9t and NanoDet-g layers at reduced resolution, plus odd
 * sizes; inputs are seeded from the case name, so a reported case reproduces.
 */
#include "kernels/check.h"

#include "core/core.h"
#include "libreyolo/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nn_case {
    const char *slot;
    const char *name;
    int64_t n, c, h, w; /* input x */
    int64_t o, kh, kw;  /* conv2d: output channels and kernel; pools: window */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t activation;
    bool bias, residual;
} nn_case;

#define CONV(name, c, h, w, o, k, s, p, g, act, bias, res)                                         \
    {                                                                                              \
        LY_SLOT_CONV2D, name, 1, c, h, w, o, k, k, s, s, p, p, 1, 1, g, act, bias, res             \
    }
#define POOL(slot, name, c, h, w, k, s, p)                                                         \
    {                                                                                              \
        slot, name, 1, c, h, w, 0, k, k, s, s, p, p, 1, 1, 1, LY_ACT_NONE, false, false            \
    }
#define UNARY(slot, name, c, h, w)                                                                 \
    {                                                                                              \
        slot, name, 1, c, h, w, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, LY_ACT_NONE, false, false            \
    }

static const nn_case cases[] = {
    CONV("conv0 3->16 3x3 s2 64x64", 3, 64, 64, 16, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV("bottleneck 16->16 3x3 +res 24x24", 16, 24, 24, 16, 3, 1, 1, 1, LY_ACT_SILU, true, true),
    CONV("elan 48->24 1x1 20x20", 48, 20, 20, 24, 1, 1, 0, 1, LY_ACT_SILU, true, false),
    CONV("head box 64->64 3x3 g4 20x20", 64, 20, 20, 64, 3, 1, 1, 4, LY_ACT_SILU, true, false),
    CONV("down 96->128 3x3 s2 19x19", 96, 19, 19, 128, 3, 2, 1, 1, LY_ACT_SILU, true, false),
    CONV("odd 24->24 3x3 sigmoid 17x13", 24, 17, 13, 24, 3, 1, 1, 1, LY_ACT_SIGMOID, true, false),
    CONV("depthwise 6 3x3 +res 9x9", 6, 9, 9, 6, 3, 1, 1, 6, LY_ACT_NONE, true, true),
    CONV("relu 8->12 3x3 no bias 15x15", 8, 15, 15, 12, 3, 1, 1, 1, LY_ACT_RELU, false, false),
    CONV("nanodet 128->128 3x3 leaky 13x13", 128, 13, 13, 128, 3, 1, 1, 1, LY_ACT_LEAKY_RELU, true,
         false),
    CONV("nanodet head 128->124 1x1 13x13", 128, 13, 13, 124, 1, 1, 0, 1, LY_ACT_NONE, true, false),
    {LY_SLOT_CONV2D, "odd 5->7 3x5 s(2,1) p(1,2) d(1,2)", 1, 5, 11, 13, 7, 3, 5, 2, 1, 1, 2, 1, 2,
     1, LY_ACT_NONE, false, false},
    POOL(LY_SLOT_MAX_POOL2D, "sppf 5x5 s1 p2 20x20", 64, 20, 20, 5, 1, 2),
    POOL(LY_SLOT_MAX_POOL2D, "stem 3x3 s2 p1 33x33", 32, 33, 33, 3, 2, 1),
    POOL(LY_SLOT_AVG_POOL2D, "avg 2x2 s2 40x40", 32, 40, 40, 2, 2, 0),
    POOL(LY_SLOT_AVG_POOL2D, "avg 3x3 s1 p1 13x11", 16, 13, 11, 3, 1, 1),
    UNARY(LY_SLOT_UPSAMPLE_NEAREST2D, "x2 64ch 20x20", 64, 20, 20),
    UNARY(LY_SLOT_SILU, "silu 64x40x40", 64, 40, 40),
    UNARY(LY_SLOT_SILU, "silu 7 elements", 7, 1, 1),
    UNARY(LY_SLOT_SIGMOID, "sigmoid 80x80x80", 80, 80, 80),
    UNARY(LY_SLOT_SIGMOID, "sigmoid 13 elements", 13, 1, 1),
    {.slot = LY_SLOT_DFL, .name = "dfl 4x16 x 8400", .n = 1, .c = 64, .h = 8400},
    {.slot = LY_SLOT_DFL, .name = "dfl 4x16 x 7", .n = 1, .c = 64, .h = 7},
};

static uint64_t seed_of(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    return h;
}

static float next_uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

typedef struct case_data {
    ly_tensor in[4];
    ly_tensor ref, out;
    ly_kernel_call call;
} case_data;

static void case_data_free(case_data *d)
{
    for (int i = 0; i < 4; i++)
        free(d->in[i].data);
    free(d->ref.data);
    free(d->out.data);
    memset(d, 0, sizeof *d);
}

static ly_status random_tensor(ly_tensor *t, int ndim, const int64_t *shape, float scale,
                               uint64_t *seed)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    for (int64_t i = 0; i < n; i++)
        p[i] = next_uniform(seed) * scale;
    return ly_tensor_init(t, p, LY_F32, ndim, shape);
}

static ly_status build_case(const nn_case *c, case_data *d)
{
    memset(d, 0, sizeof *d);
    uint64_t seed = seed_of(c->name);
    ly_kernel_call_init(&d->call);
    ly_kernel_params *p = &d->call.params;
    int64_t xs[4] = {c->n, c->c, c->h, c->w};
    ly_status st;
    if (strcmp(c->slot, LY_SLOT_DFL) == 0) {
        int64_t ds[3] = {c->n, c->c, c->h};
        st = random_tensor(&d->in[0], 3, ds, 4.0f, &seed);
    } else {
        st = random_tensor(&d->in[0], 4, xs, 3.0f, &seed);
    }
    if (st != LY_OK) return st;
    d->call.in[0] = &d->in[0];
    if (strcmp(c->slot, LY_SLOT_CONV2D) == 0) {
        int64_t ws[4] = {c->o, c->c / c->groups, c->kh, c->kw}, bs[1] = {c->o};
        float fan_in = (float)(ws[1] * c->kh * c->kw);
        if ((st = random_tensor(&d->in[1], 4, ws, 2.0f / sqrtf(fan_in), &seed)) != LY_OK ||
            (st = random_tensor(&d->in[2], 1, bs, 0.5f, &seed)) != LY_OK)
            return st;
        d->call.in[1] = &d->in[1];
        d->call.in[2] = c->bias ? &d->in[2] : NULL;
        p->dilation[0] = c->dh, p->dilation[1] = c->dw;
        p->groups = c->groups;
        p->activation = c->activation;
        p->alpha = 0.1;
    }
    if (strcmp(c->slot, LY_SLOT_CONV2D) == 0 || strcmp(c->slot, LY_SLOT_MAX_POOL2D) == 0 ||
        strcmp(c->slot, LY_SLOT_AVG_POOL2D) == 0) {
        p->stride[0] = c->sh, p->stride[1] = c->sw;
        p->padding[0] = c->ph, p->padding[1] = c->pw;
        p->kernel[0] = c->kh, p->kernel[1] = c->kw;
    }
    ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    st = ly_kernel_infer_outputs(c->slot, &d->call, shapes, &n_out);
    if (st != LY_OK) return st;
    if (c->residual) {
        if ((st = random_tensor(&d->in[3], shapes[0].ndim, shapes[0].shape, 1.0f, &seed)) != LY_OK)
            return st;
        d->call.in[3] = &d->in[3];
    }
    if ((st = random_tensor(&d->ref, shapes[0].ndim, shapes[0].shape, 1.0f, &seed)) != LY_OK ||
        (st = random_tensor(&d->out, shapes[0].ndim, shapes[0].shape, 1.0f, &seed)) != LY_OK)
        return st;
    return LY_OK;
}

static int64_t numel(const ly_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static void compare(const nn_case *c, const case_data *d, ly_check_result *r)
{
    const float *ref = d->ref.data, *got = d->out.data;
    int64_t n = numel(&d->ref);
    double scale = 1.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)ref[i]) > scale) scale = fabs((double)ref[i]);
    r->cases++;
    r->elements += n;
    for (int64_t i = 0; i < n; i++) {
        double diff = isnan(ref[i]) && isnan(got[i]) ? 0.0 : fabs((double)ref[i] - (double)got[i]);
        if (isnan(diff)) diff = INFINITY;
        if (diff != 0.0) r->bit_differences++;
        if (diff > r->max_abs_diff) r->max_abs_diff = diff;
        if (!(diff <= LY_CHECK_NN_TOLERANCE * scale)) {
            r->mismatches++;
            if (r->n_shown < LY_CHECK_MAX_SHOWN) {
                ly_check_mismatch *m = &r->shown[r->n_shown++];
                memset(m, 0, sizeof *m);
                snprintf(m->case_name, sizeof m->case_name, "%s", c->name);
                ly_shape_str(&d->ref, m->shape, sizeof m->shape);
                m->index = i;
                snprintf(m->inputs, sizeof m->inputs, "tolerance %.3g",
                         LY_CHECK_NN_TOLERANCE * scale);
                m->reference = ref[i];
                m->impl = got[i];
                memcpy(&m->reference_bits, &ref[i], 4);
                memcpy(&m->impl_bits, &got[i], 4);
            }
        }
    }
}

typedef struct impl_names {
    char names[16][32];
    int n;
} impl_names;

static void collect(const char *slot, const char *impl, bool eligible, const char *why_not,
                    void *user)
{
    (void)slot;
    (void)eligible;
    (void)why_not;
    impl_names *l = user;
    if (l->n < 16) snprintf(l->names[l->n++], sizeof l->names[0], "%s", impl);
}

bool ly_check_is_nn_slot(const char *slot)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].slot, slot) == 0) return true;
    return false;
}

ly_status ly_check_nn_slot(const char *slot, const ly_check_options *opt, ly_check_report_fn report,
                           void *user, int *n_matched)
{
    impl_names impls = {0};
    ly_status st = ly_kernel_list(slot, collect, &impls);
    if (st != LY_OK) return st;
    for (int k = 0; k < impls.n; k++) {
        const char *impl = impls.names[k];
        bool is_reference = strcmp(impl, "reference") == 0;
        if (opt->impl ? strcmp(opt->impl, impl) != 0 : is_reference) continue;
        (*n_matched)++;
        ly_check_result r;
        memset(&r, 0, sizeof r);
        r.slot = slot;
        r.impl = impl;
        r.exact = false;
        r.tolerance = LY_CHECK_NN_TOLERANCE;
        int64_t total = 0, done = 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            total += strcmp(cases[i].slot, slot) == 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const nn_case *c = &cases[i];
            if (strcmp(c->slot, slot) != 0) continue;
            case_data d;
            st = build_case(c, &d);
            if (st == LY_E_NO_MEMORY) {
                case_data_free(&d);
                return st;
            }
            if (st != LY_OK) { /* the contract refuses it: nobody runs it */
                r.rejected++;
                case_data_free(&d);
                continue;
            }
            d.call.threads = opt->threads;
            d.call.out[0] = &d.ref;
            ly_status ref_st = ly_kernel_run_impl(slot, "reference", &d.call);
            d.call.out[0] = &d.out;
            ly_status got = ref_st == LY_OK ? ly_kernel_run_impl(slot, impl, &d.call) : ref_st;
            if (ref_st != LY_OK ||
                (got != LY_OK && got != LY_E_DECLINED && got != LY_E_UNAVAILABLE)) {
                if (r.errors++ == 0)
                    snprintf(r.first_error, sizeof r.first_error, "%s: %s", c->name,
                             ly_last_error());
            } else if (got == LY_OK) {
                compare(c, &d, &r);
            } else {
                r.declined++;
            }
            case_data_free(&d);
            if (opt->progress) opt->progress(slot, ++done, total, opt->progress_user);
        }
        ly_clear_error();
        report(&r, user);
    }
    return LY_OK;
}
