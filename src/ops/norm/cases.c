/* SPDX-License-Identifier: MIT */
/* Parity cases of the normalisations: decoder and ViT widths, every axis of a
 * softmax, rows far from zero mean, NaN. */
#include "ops/cases.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>

static ly_status build_softmax(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[4];
        int64_t axis;
        float scale;
    } cases[] = {
        {"attention rows [1,8,300,300]", 4, {1, 8, 300, 300}, -1, 8.0f},
        {"msda weights [1,300,8,12]", 4, {1, 300, 8, 12}, -1, 3.0f},
        {"dfl bins on axis 1 [1,16,4,100]", 4, {1, 16, 4, 100}, 1, 5.0f},
        {"large logits [3,33]", 2, {3, 33}, -1, 80.0f},
        {"with NaN [2,5]", 2, {2, 5}, 0, 1.0f},
    };
    if (index >= (int)(sizeof cases / sizeof cases[0])) return LY_E_NOT_FOUND;
    snprintf(c->name, sizeof c->name, "%s", cases[index].name);
    uint64_t seed = ly_check_seed("softmax", c->name);
    ly_status st = ly_check_case_random(c, 0, cases[index].ndim, cases[index].shape,
                                        cases[index].scale, &seed);
    if (st == LY_OK && index == 4) ((float *)c->in[0].data)[3] = NAN;
    ly_axis_params p = {.axis = cases[index].axis};
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

static ly_status norm_case(const char *op, bool rms, int index, ly_check_case *c)
{
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[3];
        float offset;
        bool affine;
    } cases[] = {
        {"decoder [1,300,128]", 3, {1, 300, 128}, 0.0f, true},
        {"vit [1,197,192], mean 50", 3, {1, 197, 192}, 50.0f, true},
        {"deimv2 [1,100,64], no affine", 3, {1, 100, 64}, 0.0f, false},
        {"one channel [4,1]", 2, {4, 1}, 1.0f, true},
        {"rf-detr tokens [4,145,384]", 3, {4, 145, 384}, 0.0f, true},
        {"every tail [7,29]", 2, {7, 29}, 2.0f, true},
        {"tails [3,12]", 2, {3, 12}, -1.0f, false},
    };
    if (index >= (int)(sizeof cases / sizeof cases[0])) return LY_E_NOT_FOUND;
    snprintf(c->name, sizeof c->name, "%s", cases[index].name);
    uint64_t seed = ly_check_seed(op, c->name);
    int nd = cases[index].ndim;
    int64_t ch = cases[index].shape[nd - 1];
    ly_status st = ly_check_case_random(c, 0, nd, cases[index].shape, 3.0f, &seed);
    if (st != LY_OK) return st;
    float *x = c->in[0].data;
    for (int64_t i = 0; i < ly_tensor_numel(&c->in[0]); i++)
        x[i] += cases[index].offset;
    if (cases[index].affine) {
        st = ly_check_case_random(c, 1, 1, &ch, 2.0f, &seed);
        c->constant[1] = true;
        if (st == LY_OK && !rms) {
            st = ly_check_case_random(c, 2, 1, &ch, 1.0f, &seed);
            c->constant[2] = true;
        }
    }
    ly_norm_params p = {.eps = rms ? 1e-6 : 1e-5};
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

static ly_status build_layer_norm(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    return norm_case("layer_norm", false, index, c);
}

static ly_status build_rms_norm(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    return norm_case("rms_norm", true, index, c);
}

/* Benchmark calls: rows of 1024, as an attention score row or a token's
 * channels; the norms without scale or shift (the row statistics are the work). */
static ly_status bench(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)b;
    snprintf(c->name, sizeof c->name, "[%zu,1024]", numel / 1024);
    if (op == LY_OP_SOFTMAX) {
        ly_axis_params p = LY_AXIS_DEFAULTS;
        ly_check_case_params(c, &p, sizeof p);
    } else {
        ly_norm_params p = LY_NORM_DEFAULTS;
        ly_check_case_params(c, &p, sizeof p);
    }
    return ly_check_case_normalish(c, 0, 2, (int64_t[]){(int64_t)(numel / 1024), 1024}, 1);
}

const ly_case_set ly_cases_softmax = {.build = build_softmax, .bench = bench};
const ly_case_set ly_cases_layer_norm = {.build = build_layer_norm, .bench = bench};
const ly_case_set ly_cases_rms_norm = {.build = build_rms_norm, .bench = bench};
