/* SPDX-License-Identifier: MIT */
/*
 * conv2d_int8 as its definition, on the float convolution ("dequant"): the
 * input through the fake_quant_int8_affine slot, the codes times their
 * channel's scale once at prepare, then the conv2d slot's own choice for that
 * float call (Winograd, the thin kernels, oneDNN, ..., its layouts and its
 * prepared state). Where no integer kernel serves the module (onednn_int8
 * needs VNNI) it runs at the speed of a float model plus one element-wise
 * pass; it was oneDNN's direct convolution alone, and LibreYOLO9t's int8
 * checkpoint took 1.31x its float model's time on an AVX2 Zen 3, whose float
 * 3x3 convolutions run on Winograd.
 *
 * The state keeps the codes only as the inner state's f32 weights: where that
 * state holds its own copy (held_constants bit 1) and every code comes back
 * from it exactly, the codes are held too and the graph may give their pages
 * back.
 */
#include "core/core.h"
#include "kernels/registry_internal.h"
#include "providers/builtin.h"
#include "providers/op_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { QUANTIZED_INPUT_SCRATCH = 3 }; /* ly_nn_scratch's index no conv2d kernel uses */

static const char *slot(void)
{
    return ly_op_name(LY_OP_CONV2D_INT8);
}

/* The conv2d call of a conv2d_int8 call: `weight` (f32, the codes' shape),
 * no quantizer operands. */
static ly_kernel_call float_call(const ly_kernel_call *call, const ly_tensor *weight)
{
    ly_kernel_call c = *call;
    c.in[1] = weight;
    c.in[4] = c.in[5] = c.in[6] = NULL;
    return c;
}

/* The codes' shape as f32, without data (what choosing needs). */
static ly_tensor weight_shape(const ly_kernel_call *call)
{
    ly_tensor w = *call->in[1];
    w.dtype = LY_F32;
    w.data = NULL;
    return w;
}

/* The conv2d implementation this build picks for the float call. */
static const ly_impl *inner_impl(const ly_kernel_call *fc)
{
    ly_selection selection;
    ly_selection_read(&selection);
    const ly_impl *impl = NULL;
    if (ly_kernel_select(LY_OP_CONV2D, &selection, fc, &impl) != LY_OK) {
        ly_clear_error();
        return NULL;
    }
    return impl;
}

/* codes * scale[o], one f32 product each, as the reference. */
static void dequantize(const ly_kernel_call *call, float *w)
{
    const int8_t *c = call->in[1]->data;
    const float *scale = call->in[4]->data;
    int64_t n = ly_tensor_numel(call->in[1]), per_channel = n / call->in[1]->shape[0];
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)c[i] * scale[i / per_channel];
}

/* x through the int8 affine fake-quant, into this thread's scratch. */
static ly_status quantize_input(const ly_kernel_call *call, int threads, ly_tensor *xq)
{
    *xq = *call->in[0];
    /* element-wise, so whatever the layout (blocked maps hold whole blocks) */
    xq->data = ly_nn_scratch(QUANTIZED_INPUT_SCRATCH,
                             (size_t)ly_tensor_numel(call->in[0]) * sizeof(float));
    if (!xq->data) return ly_set_error(LY_E_NO_MEMORY, "%s (dequant): out of memory", slot());
    ly_kernel_call quant;
    ly_kernel_call_init(&quant);
    quant.in[0] = call->in[0];
    quant.in[1] = call->in[5];
    quant.in[2] = call->in[6];
    quant.out[0] = xq;
    quant.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_FAKE_QUANT_INT8_AFFINE, &quant);
}

/* Outside a graph: the weights dequantized for this call. */
static ly_status dequant_call(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[1]);
    ly_tensor weight = weight_shape(call);
    weight.data = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!weight.data) return ly_set_error(LY_E_NO_MEMORY, "%s (dequant): out of memory", slot());
    dequantize(call, weight.data);
    ly_tensor xq;
    ly_status st = quantize_input(call, call->threads, &xq);
    if (st == LY_OK) {
        ly_kernel_call fc = float_call(call, &weight);
        fc.in[0] = &xq;
        st = ly_kernel_dispatch_op(LY_OP_CONV2D, &fc);
    }
    free(weight.data);
    return st;
}

typedef struct dequant_state {
    const ly_kernel_stateful *inner; /* the float convolution's prepared form */
    void *inner_state;
    int threads;
    float *weights; /* codes * scale[o]; freed where the inner state holds its own copy */
    float *scale;   /* scale[o], kept while the codes are held */
    bool codes_held;
    ly_tensor weight;
} dequant_state;

static ly_status dequant_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    ly_tensor w = weight_shape(call);
    ly_kernel_call fc = float_call(call, &w);
    const ly_impl *impl = inner_impl(&fc);
    const ly_kernel_stateful *sf = impl ? ly_impl_stateful(impl) : NULL;
    if (!sf || !sf->layouts) return LY_OK;
    ly_status st = sf->layouts(&fc, out);
    out->in[4] = out->in[5] = out->in[6] = 0; /* the quantizer's operands: plain */
    return st;
}

static void dequant_release(void *state)
{
    dequant_state *s = state;
    if (!s) return;
    if (s->inner_state) s->inner->release(s->inner_state);
    free(s->weights);
    free(s->scale);
    free(s);
}

/* Whether every code comes back from its f32 weight as round(w / scale[o]):
 * true unless a scale is zero, infinite or so small that c * s lost the code. */
static bool codes_recoverable(const int8_t *codes, const float *weights, const float *scale,
                              int64_t o, int64_t per_channel)
{
    for (int64_t i = 0; i < o * per_channel; i++) {
        float back = weights[i] / scale[i / per_channel];
        if (!(fabsf(back) <= 128.0f) || (int8_t)lrintf(back) != codes[i]) return false;
    }
    return true;
}

static ly_status dequant_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                 void **state)
{
    uint32_t need = (1u << 1) | (1u << 4) | (1u << 5) | (1u << 6);
    if ((info->constant_inputs & need) != need) return LY_E_DECLINED;
    dequant_state *s = calloc(1, sizeof *s);
    int64_t n = ly_tensor_numel(call->in[1]), o = call->in[1]->shape[0];
    if (s) s->weights = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!s || !s->weights) {
        dequant_release(s);
        return ly_set_error(LY_E_NO_MEMORY, "%s (dequant): out of memory", slot());
    }
    dequantize(call, s->weights);
    s->weight = weight_shape(call);
    s->weight.data = s->weights;
    s->threads = info->threads;
    ly_kernel_call fc = float_call(call, &s->weight);
    const ly_impl *impl = inner_impl(&fc);
    s->inner = impl ? ly_impl_stateful(impl) : NULL;
    if (s->inner) {
        ly_kernel_prepare_info inner_info = *info;
        inner_info.constant_inputs &= (1u << 1) | (1u << 2) | (1u << 3);
        for (int k = 4; k < LY_KERNEL_MAX_INPUTS; k++)
            inner_info.in_layout[k] = LY_LAYOUT_PLAIN;
        ly_status st = s->inner->prepare(&fc, &inner_info, &s->inner_state);
        if (st != LY_OK) { /* declined (these layouts) or failed: the caller decides */
            s->inner_state = NULL;
            dequant_release(s);
            return st;
        }
    } else if (info->in_layout[0] != LY_LAYOUT_PLAIN || info->out_layout[0] != LY_LAYOUT_PLAIN) {
        dequant_release(s);
        return LY_E_DECLINED;
    }
    uint32_t inner_held =
        s->inner && s->inner->held_constants ? s->inner->held_constants(s->inner_state) : 0;
    if (inner_held & (1u << 1)) {
        /* only the inner state's copy is read from now on */
        int64_t per_channel = n / o;
        s->scale = malloc((size_t)(o > 0 ? o : 1) * sizeof(float));
        if (s->scale) memcpy(s->scale, call->in[4]->data, (size_t)o * sizeof(float));
        s->codes_held =
            s->scale && codes_recoverable(call->in[1]->data, s->weights, s->scale, o, per_channel);
        free(s->weights);
        s->weights = NULL;
        s->weight.data = NULL;
    }
    *state = s;
    return LY_OK;
}

static ly_status dequant_run(void *state, const ly_kernel_call *call)
{
    const dequant_state *s = state;
    ly_tensor xq;
    ly_status st = quantize_input(call, s->threads, &xq);
    if (st != LY_OK) return st;
    ly_kernel_call fc = float_call(call, &s->weight);
    fc.in[0] = &xq;
    return s->inner_state ? s->inner->run(s->inner_state, &fc)
                          : ly_kernel_dispatch_op(LY_OP_CONV2D, &fc);
}

static uint32_t dequant_held(void *state)
{
    const dequant_state *s = state;
    uint32_t inner_held =
        s->inner_state && s->inner->held_constants ? s->inner->held_constants(s->inner_state) : 0;
    return (inner_held & (1u << 2)) | (s->codes_held ? 1u << 1 : 0u);
}

/* The bias as the inner state restores it; the codes from its f32 weights,
 * divided by their scale (exact, as codes_recoverable checked at prepare). */
static ly_status dequant_restore(void *state, int index, void *dst)
{
    const dequant_state *s = state;
    if (index == 2 && s->inner_state && s->inner->restore_constant)
        return s->inner->restore_constant(s->inner_state, index, dst);
    if (index != 1 || !s->codes_held)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s (dequant): input %d is not held", slot(),
                            index);
    int64_t n = ly_tensor_numel(&s->weight), per_channel = n / s->weight.shape[0];
    float *w = malloc((size_t)n * sizeof(float));
    if (!w) return ly_set_error(LY_E_NO_MEMORY, "%s (dequant): out of memory", slot());
    ly_status st = s->inner->restore_constant(s->inner_state, 1, w);
    if (st == LY_OK)
        for (int64_t i = 0; i < n; i++)
            ((int8_t *)dst)[i] = (int8_t)lrintf(w[i] / s->scale[i / per_channel]);
    free(w);
    return st;
}

static const ly_kernel_stateful dequant_stateful = {
    .layouts = dequant_layouts,
    .prepare = dequant_prepare,
    .run = dequant_run,
    .release = dequant_release,
    .restore_constant = dequant_restore,
    .held_constants = dequant_held,
};

void ly_dequant_register(void)
{
    ly_provider_add(LY_OP_CONV2D_INT8, "dequant", dequant_call, NULL, /* any call */
                    &dequant_stateful);
}
