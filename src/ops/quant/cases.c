/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the quant ops (fake quant forward and backward, unpack):
 * one set, ly_cases_quant (ops/cases.h), whose cases are the grid, sweep and
 * stream families in that order (quant_cases.h), plus each op's benchmark call.
 */
#include "ops/quant/quant_cases.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void describe_value(char *buf, size_t size, const char *what, float v)
{
    ly_quant_append(buf, size, "%s%s=%.9g (0x%08" PRIx32 ")", buf[0] ? " " : "", what, (double)v,
                    ly_nm_f32_bits(v));
}

static const float *f32_in(const ly_check_case *c, int i)
{
    if (!c->present[i] || c->in[i].dtype != LY_F32) return NULL;
    return c->in[i].data;
}

/* The params of a case, read back from the op's own struct. */
typedef struct case_params {
    int64_t axis, bits, group_size, in_features;
} case_params;

static case_params params_in(quant_kind kind, const ly_check_case *c)
{
    case_params p = {.axis = 0, .bits = 4, .group_size = 128, .in_features = -1};
    if (!c->has_params) return p;
    if (kind == K_INT8_PER_CHANNEL) {
        p.axis = ((const ly_fake_quant_int8_per_channel_params *)(const void *)c->params)->axis;
    } else if (kind == K_INT_GROUPED) {
        const ly_fake_quant_int_grouped_params *g = (const void *)c->params;
        p.bits = g->bits;
        p.group_size = g->group_size;
    } else if (kind == K_UNPACK_INT_GROUPED) {
        const ly_unpack_int_grouped_params *g = (const void *)c->params;
        p.bits = g->bits;
        p.group_size = g->group_size;
        p.in_features = g->in_features;
    } else if (kind == K_UNPACK_NVFP4) {
        p.in_features = ((const ly_unpack_nvfp4_params *)(const void *)c->params)->in_features;
    }
    return p;
}

/* The inputs behind element `index` of the op's output (of shape `out`). */
static void describe(ly_op op, const ly_check_case *c, int out_index, const ly_tensor *out,
                     int64_t index, char *buf, size_t size)
{
    (void)out_index;
    buf[0] = '\0';
    bool backward;
    quant_kind kind = ly_quant_case_kind(op, &backward);
    case_params cp = params_in(kind, c);
    int64_t out_numel = ly_tensor_numel(out);
    if (index >= out_numel) {
        ly_quant_append(buf, size, "(past the end of the output)");
        return;
    }
    if (quant_unpacks(kind)) {
        int64_t cols = out->ndim == 2 ? out->shape[1] : out_numel;
        int64_t row = cols ? index / cols : 0, col = cols ? index % cols : 0;
        const ly_tensor *payload = &c->in[0];
        int64_t pcols = payload->ndim == 2 ? payload->shape[1] : 0;
        int64_t bits = kind == K_UNPACK_NVFP4 ? 4 : cp.bits;
        int64_t g = kind == K_UNPACK_NVFP4 ? 16 : cp.group_size;
        int64_t byte = col * bits / 8;
        if (byte < pcols)
            ly_quant_append(buf, size, "payload[%" PRId64 ",%" PRId64 "]=0x%02x", row, byte,
                            ((const uint8_t *)payload->data)[row * pcols + byte]);
        const ly_tensor *scale = &c->in[1];
        int64_t ng = scale->ndim == 2 ? scale->shape[1] : 0;
        if (col / g < ng) {
            int64_t si = row * ng + col / g;
            if (scale->dtype == LY_F32)
                describe_value(buf, size, "scale", ((const float *)scale->data)[si]);
            else
                ly_quant_append(buf, size, " block_scale=0x%02x (%.9g)",
                                ((const uint8_t *)scale->data)[si],
                                (double)ly_quant_e4m3_value(((const uint8_t *)scale->data)[si]));
        }
        if (kind == K_UNPACK_NVFP4 && f32_in(c, 2))
            describe_value(buf, size, "tensor_amax", f32_in(c, 2)[0]);
        return;
    }
    int base = backward ? 1 : 0;
    if (backward && f32_in(c, 0)) describe_value(buf, size, "grad", f32_in(c, 0)[index]);
    const float *x = f32_in(c, base);
    if (!x) return;
    describe_value(buf, size, "x", x[index]);
    const ly_tensor *xt = &c->in[base];
    const float *operand = f32_in(c, base + 1);
    int64_t numel = ly_tensor_numel(xt);
    switch (kind) {
    case K_INT8_PER_CHANNEL:
        if (operand) {
            int64_t axis = cp.axis < 0 ? cp.axis + xt->ndim : cp.axis, inner = 1;
            for (int i = (int)axis + 1; i < xt->ndim; i++)
                inner *= xt->shape[i];
            int64_t ch = xt->ndim > 0 ? (index / inner) % xt->shape[axis] : 0;
            describe_value(buf, size, "scale", operand[ch]);
        }
        break;
    case K_INT8_AFFINE:
        if (operand && f32_in(c, base + 2)) {
            describe_value(buf, size, "lo", operand[0]);
            describe_value(buf, size, "hi", f32_in(c, base + 2)[0]);
        }
        break;
    case K_FP8:
        if (operand) {
            int64_t sn = ly_tensor_numel(&c->in[base + 1]);
            int64_t per = sn > 0 ? numel / sn : 1;
            describe_value(buf, size, "scale", operand[sn == 1 || per == 0 ? 0 : index / per]);
        }
        break;
    case K_INT_GROUPED:
        if (operand) {
            int64_t cols = xt->shape[1], g = cp.group_size;
            int64_t ng = (cols + g - 1) / g;
            describe_value(buf, size, "scale", operand[(index / cols) * ng + (index % cols) / g]);
        }
        break;
    case K_NVFP4_WEIGHT:
        if (operand) describe_value(buf, size, "tensor_amax", operand[0]);
        break;
    default:
        break;
    }
}

/* ---- The set: its families in order -------------------------------------------- */

static const quant_family *const families[] = {&ly_quant_grid_cases, &ly_quant_sweep_cases,
                                               &ly_quant_stream_cases};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

static int64_t count_cases(ly_op op, bool full)
{
    bool backward;
    quant_kind kind = ly_quant_case_kind(op, &backward);
    int64_t total = 0;
    for (int f = 0; f < N_FAMILIES; f++)
        total += families[f]->count(kind, backward, full);
    return total;
}

/* The family of case `*index`, which becomes the index within it; NULL past the last. */
static const quant_family *family_of(quant_kind kind, bool backward, bool full, int64_t *index)
{
    for (int f = 0; f < N_FAMILIES; f++) {
        int64_t n = families[f]->count(kind, backward, full);
        if (*index < n) return families[f];
        *index -= n;
    }
    return NULL;
}

static bool case_name(ly_op op, int64_t index, bool full, char *buf, size_t size)
{
    bool backward;
    quant_kind kind = ly_quant_case_kind(op, &backward);
    int offset = (int)(index & 1);
    const quant_family *f = family_of(kind, backward, full, &index);
    return f && f->name(kind, backward, index, full, offset, buf, size);
}

static ly_status build(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    bool backward;
    quant_kind kind = ly_quant_case_kind(op, &backward);
    const quant_family *f = family_of(kind, backward, full, &index);
    return f ? f->build(op, kind, backward, index, full, c) : LY_E_NOT_FOUND;
}

/* ---- Benchmark calls ------------------------------------------------------------ */

enum { BENCH_COLS = 1024 }; /* fp32 columns of every benchmark tensor */

/* A [numel/1024, 1024] weight (x, and grad for a backward): per-channel and
 * per-group scales of its rows, dynamic scales where the op has them, int4 in
 * groups of 128; unpack writes a matrix of that size. */
static ly_status bench(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b)
{
    bool backward;
    quant_kind kind = ly_quant_case_kind(op, &backward);
    int64_t rows = (int64_t)(numel / BENCH_COLS), mat[2] = {rows, BENCH_COLS};
    snprintf(c->name, sizeof c->name, "[%" PRId64 ",%d]", rows, BENCH_COLS);
    b->speed_target = true;
    ly_status st = LY_OK;
    bool oom = false;
    if (quant_unpacks(kind)) {
        uint8_t *payload = add_input(c, 0, LY_U8, 2, (int64_t[]){rows, BENCH_COLS / 2}, &oom);
        rng r = {.state = 3};
        for (int64_t i = 0; payload && i < rows * BENCH_COLS / 2; i++)
            payload[i] = (uint8_t)ly_check_rng_next(&r);
        if (kind == K_UNPACK_INT_GROUPED) {
            float *scale = add_input(c, 1, LY_F32, 2, (int64_t[]){rows, BENCH_COLS / 128}, &oom);
            for (int64_t i = 0; scale && i < rows * BENCH_COLS / 128; i++)
                scale[i] = 0.5f;
            ly_unpack_int_grouped_params p = {.bits = 4, .group_size = 128, .in_features = -1};
            ly_check_case_params(c, &p, sizeof p);
        } else {
            uint8_t *codes =
                add_input(c, 1, LY_F8E4M3, 2, (int64_t[]){rows, BENCH_COLS / 16}, &oom);
            r.state = 4;
            for (int64_t i = 0; codes && i < rows * BENCH_COLS / 16; i++)
                codes[i] = (uint8_t)(0x30 + ly_check_rng_next(&r) % 0x20);
            float *amax = add_input(c, 2, LY_F32, 1, (int64_t[]){1}, &oom);
            if (amax) amax[0] = 2688.0f;
        }
        return oom ? ly_set_error(LY_E_NO_MEMORY, "benchmark case: out of memory") : LY_OK;
    }
    int base = backward ? 1 : 0;
    if (backward) st = ly_check_case_normalish(c, 0, 2, mat, 2);
    if (st == LY_OK) st = ly_check_case_normalish(c, base, 2, mat, 1);
    if (st != LY_OK) return st;
    switch (kind) {
    case K_INT8_AFFINE: {
        float *lo = add_input(c, base + 1, LY_F32, 1, (int64_t[]){1}, &oom);
        float *hi = add_input(c, base + 2, LY_F32, 1, (int64_t[]){1}, &oom);
        if (lo && hi) *lo = -3.0f, *hi = 3.0f;
        break;
    }
    case K_FP8: {
        float *scale = add_input(c, base + 1, LY_F32, 1, &rows, &oom);
        for (int64_t i = 0; scale && i < rows; i++)
            scale[i] = 4.0f / 448.0f;
        break;
    }
    case K_NVFP4_WEIGHT: {
        float *amax = add_input(c, base + 1, LY_F32, 1, (int64_t[]){1}, &oom);
        if (amax) amax[0] = 4.0f;
        break;
    }
    default: /* int8 per channel and int grouped: the dynamic scale training runs */
        break;
    }
    if (oom) return ly_set_error(LY_E_NO_MEMORY, "benchmark case: out of memory");
    /* An identity backward (quant.h) reads only the gradient. */
    if (backward && (kind == K_FP8 || kind == K_INT_GROUPED)) b->bytes = 2.0 * (double)numel * 4.0;
    return LY_OK;
}

const ly_case_set ly_cases_quant = {
    .build = build, .count = count_cases, .name = case_name, .describe = describe, .bench = bench};
