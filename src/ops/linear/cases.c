/* SPDX-License-Identifier: MIT */
/* Parity cases of the matrix products: DETR and ViT shapes, tails of the
 * 4-wide loop, broadcast batches, q·kᵀ. */
#include "ops/cases.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>

static ly_status build_linear(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    static const struct {
        const char *name;
        int ndim;
        int64_t x[3], n;
        bool bias, residual;
        int64_t activation;
    } cases[] = {
        {"decoder ffn [1,300,128] -> 512", 3, {1, 300, 128}, 512, true, false, LY_ACT_NONE},
        {"sampling offsets [1,300,128] -> 192", 3, {1, 300, 128}, 192, true, false, LY_ACT_NONE},
        {"vit qkv [1,197,192] -> 576", 3, {1, 197, 192}, 576, true, false, LY_ACT_NONE},
        {"vit fc1 gelu [1,197,192] -> 768", 3, {1, 197, 192}, 768, true, false, LY_ACT_GELU},
        {"vit fc2 +res [1,197,768] -> 192", 3, {1, 197, 768}, 192, true, true, LY_ACT_NONE},
        /* GELU on blocks of rows (onednn: three of 176 rows and a tail of 52; one of
         * 2192 and a tail; two whole blocks) */
        {"rf-detr fc1 gelu [1,580,384] -> 1536", 3, {1, 580, 384}, 1536, true, false, LY_ACT_GELU},
        {"swinir fc1 gelu [1,4100,60] -> 120", 3, {1, 4100, 60}, 120, true, false, LY_ACT_GELU},
        /* weights past L2: onednn's bands of columns (at 1 and 2 threads), the
         * last one narrower */
        {"bands +res [1,520,384] -> 1000", 3, {1, 520, 384}, 1000, true, true, LY_ACT_NONE},
        {"bands relu +res [520,2048] -> 200", 2, {520, 2048}, 200, true, true, LY_ACT_RELU},
        {"gelu, no bias [704,64] -> 768", 2, {704, 64}, 768, false, false, LY_ACT_GELU},
        /* k not a multiple of 32 (amx_bf16: the split's masked tails), once past
         * one block of k (sums carried between blocks, the last block short) */
        {"k tail silu +res [300,100] -> 260", 2, {300, 100}, 260, true, true, LY_ACT_SILU},
        {"k tail leaky relu, no bias [320,777] -> 300",
         2,
         {320, 777},
         300,
         false,
         false,
         LY_ACT_LEAKY_RELU},
        {"ffn relu [1,300,128] -> 512", 3, {1, 300, 128}, 512, true, false, LY_ACT_RELU},
        {"silu +res [5,33] -> 17", 2, {5, 33}, 17, true, true, LY_ACT_SILU},
        {"leaky relu, no bias, +res [9,7] -> 6", 2, {9, 7}, 6, false, true, LY_ACT_LEAKY_RELU},
        {"odd [7,13] -> 5, no bias", 2, {7, 13}, 5, false, false, LY_ACT_NONE},
        {"one row [1,1] -> 1", 2, {1, 1}, 1, true, false, LY_ACT_NONE},
        {"empty [0,8] -> 3", 2, {0, 8}, 3, true, false, LY_ACT_NONE},
    };
    if (index >= (int)(sizeof cases / sizeof cases[0])) return LY_E_NOT_FOUND;
    snprintf(c->name, sizeof c->name, "%s", cases[index].name);
    uint64_t seed = ly_check_seed("linear", c->name);
    int nd = cases[index].ndim;
    int64_t k = cases[index].x[nd - 1], n = cases[index].n;
    ly_status st = ly_check_case_random(c, 0, nd, cases[index].x, 2.0f, &seed);
    if (st == LY_OK)
        st = ly_check_case_random(c, 1, 2, (int64_t[]){n, k}, 1.0f / sqrtf((float)k), &seed);
    c->constant[1] = true;
    if (st == LY_OK && cases[index].bias) {
        st = ly_check_case_random(c, 2, 1, (int64_t[]){n}, 0.5f, &seed);
        c->constant[2] = true;
    }
    if (st == LY_OK && cases[index].residual) {
        int64_t y[3];
        for (int d = 0; d < nd; d++)
            y[d] = cases[index].x[d];
        y[nd - 1] = n;
        st = ly_check_case_random(c, 3, nd, y, 1.0f, &seed);
    }
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    p.activation = cases[index].activation;
    p.alpha = 0.1;
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

static ly_status build_matmul(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    (void)op;
    (void)full;
    static const struct {
        const char *name;
        int na, nb;
        int64_t a[4], b[4];
        int64_t transpose_b;
    } cases[] = {
        {"attention q.kT [1,8,300,16] x [1,8,300,16]", 4, 4, {1, 8, 300, 16}, {1, 8, 300, 16}, 1},
        {"attention p.v [1,8,300,300] x [1,8,300,16]", 4, 4, {1, 8, 300, 300}, {1, 8, 300, 16}, 0},
        {"broadcast batch [3,1,5,7] x [4,7,6]", 4, 3, {3, 1, 5, 7}, {4, 7, 6}, 0},
        {"plain [13,9] x [9,11]", 2, 2, {13, 9}, {9, 11}, 0},
        {"empty K [4,0] x [0,3]", 2, 2, {4, 0}, {0, 3}, 0},
    };
    if (index >= (int)(sizeof cases / sizeof cases[0])) return LY_E_NOT_FOUND;
    snprintf(c->name, sizeof c->name, "%s", cases[index].name);
    uint64_t seed = ly_check_seed("matmul", c->name);
    ly_status st = ly_check_case_random(c, 0, cases[index].na, cases[index].a, 1.0f, &seed);
    if (st == LY_OK) st = ly_check_case_random(c, 1, cases[index].nb, cases[index].b, 1.0f, &seed);
    ly_matmul_params p = {.transpose_b = cases[index].transpose_b};
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

/* RF-DETR-n's MLP output, [580, 1536] x [1536, 384] + residual: a weight past
 * L2, which onednn multiplies in bands of columns. One shape whatever the size
 * asked (the reference's loops take ~0.5 s on it). */
static ly_status bench_linear(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    (void)numel;
    (void)b;
    if (op != LY_OP_LINEAR) return LY_E_NOT_FOUND;
    const int64_t m = 580, k = 1536, n = 384;
    snprintf(c->name, sizeof c->name, "[%lld,%lld] -> %lld +res", (long long)m, (long long)k,
             (long long)n);
    ly_status st = ly_check_case_normalish(c, 0, 2, (int64_t[]){m, k}, 1);
    if (st == LY_OK) st = ly_check_case_normalish(c, 1, 2, (int64_t[]){n, k}, 2);
    c->constant[1] = true;
    if (st == LY_OK) st = ly_check_case_normalish(c, 2, 1, (int64_t[]){n}, 3);
    c->constant[2] = true;
    if (st == LY_OK) st = ly_check_case_normalish(c, 3, 2, (int64_t[]){m, n}, 4);
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    ly_check_case_params(c, &p, sizeof p);
    return st;
}

const ly_case_set ly_cases_linear = {.build = build_linear, .bench = bench_linear};
const ly_case_set ly_cases_matmul = {.build = build_matmul};
