/* SPDX-License-Identifier: MIT */
/*
 * Portable "out" kernels for KernelCalls, on contiguous f32 tensors: what an
 * XNNPACK program keeps outside its delegate (nearest upsample, layer norm, average
 * pooling that counts padding) and the small glue ops ExecuTorch's emitter
 * leaves between partitions: one per row of the operator schemas
 * (src/pte/op_schema.h), which type-check a call's arguments before its
 * kernel's `check` sees their values. Both run at load, so `run` never meets
 * an argument it cannot handle.
 */
#include "engines/executorch/method_internal.h"

#include "core/core.h"
#include "libreyolo/msda.h"
#include "libreyolo/nn.h"
#include "pte/op_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static ly_status refuse(const char *what, const char *fmt, ...) LY_PRINTF(2, 3);
static ly_status refuse(const char *what, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ly_set_error(LY_E_UNSUPPORTED, "%s: %s", what, msg);
}

static ly_status f32(const et_value *v, int32_t i, const char *what, const char *role,
                     bool writable)
{
    const et_value *x = &v[i];
    if (x->type != LY_PTE_EVALUE_TENSOR || x->scalar_type != LY_PTE_FLOAT || !x->contiguous)
        return refuse(what, "%s must be a contiguous float tensor", role);
    if (writable && !x->writable) return refuse(what, "%s must not be a constant", role);
    return LY_OK;
}

static bool same_shape(const ly_tensor *a, const ly_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static ly_status expect_shape(const ly_tensor *out, int nd, const int64_t *dims, const char *what)
{
    ly_tensor want = {.ndim = nd};
    memcpy(want.shape, dims, (size_t)nd * sizeof *dims);
    if (!same_shape(out, &want)) {
        char a[96], b[96];
        return refuse(what, "out is %s, the op computes %s", ly_shape_str(out, a, sizeof a),
                      ly_shape_str(&want, b, sizeof b));
    }
    return LY_OK;
}

static bool is_null(const et_value *v, int32_t i)
{
    return v[i].type == LY_PTE_EVALUE_NULL;
}

static int64_t dim_arg(int64_t d, int nd)
{
    return d < 0 ? d + nd : d;
}

/* ---- upsample_nearest2d.vec_out(input, output_size?, scale_factors?, *, out) ---- */

static ly_status upsample_size(const et_value *v, const int32_t *a, int64_t *oh, int64_t *ow,
                               const char *what)
{
    const ly_tensor *x = &v[a[0]].t;
    if (!is_null(v, a[1])) {
        if (v[a[1]].n_items != 2) return refuse(what, "output_size must be two ints or None");
        *oh = v[a[1]].ints[0];
        *ow = v[a[1]].ints[1];
    } else {
        if (is_null(v, a[2]) || v[a[2]].n_items != 2)
            return refuse(what, "scale_factors must be two floats when output_size is None");
        double sh = v[a[2]].doubles[0], sw = v[a[2]].doubles[1];
        if (!(sh > 0 && sh < 1e6 && sw > 0 && sw < 1e6))
            return refuse(what, "scale_factors (%g, %g) must be positive", sh, sw);
        *oh = (int64_t)floor((double)x->shape[2] * sh);
        *ow = (int64_t)floor((double)x->shape[3] * sw);
    }
    if (*oh <= 0 || *ow <= 0 || *oh > 1 << 20 || *ow > 1 << 20)
        return refuse(what, "output size %lldx%lld", (long long)*oh, (long long)*ow);
    return LY_OK;
}

static ly_status upsample_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "input", false);
    if (st == LY_OK) st = f32(v, a[3], what, "out", true);
    if (st != LY_OK) return st;
    const ly_tensor *x = &v[a[0]].t;
    if (x->ndim != 4) return refuse(what, "input must be [N, C, H, W]");
    int64_t oh = 0, ow = 0;
    st = upsample_size(v, a, &oh, &ow, what);
    if (st != LY_OK) return st;
    int64_t dims[4] = {x->shape[0], x->shape[1], oh, ow};
    return expect_shape(&v[a[3]].t, 4, dims, what);
}

static ly_status upsample_run(et_value *v, const int32_t *a, int threads)
{
    const ly_tensor *x = &v[a[0]].t;
    ly_tensor *y = &v[a[3]].t;
    int64_t H = x->shape[2], W = x->shape[3], oh = y->shape[2], ow = y->shape[3];
    if (oh % H == 0 && ow % W == 0 && oh / H == ow / W) {
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        call.in[0] = x;
        call.out[0] = y;
        ly_upsample_nearest2d_params params = {.scale = oh / H};
        call.params = &params;
        call.threads = threads;
        return ly_kernel_dispatch_op(LY_OP_UPSAMPLE_NEAREST2D, &call);
    }
    /* PyTorch's nearest: src = min(floor(dst * in / out), in - 1). */
    const float *src = x->data;
    float *dst = y->data;
    int64_t planes = x->shape[0] * x->shape[1];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < oh; i++) {
            int64_t si = (int64_t)floorf((float)i * ((float)H / (float)oh));
            si = si < H - 1 ? si : H - 1;
            for (int64_t j = 0; j < ow; j++) {
                int64_t sj = (int64_t)floorf((float)j * ((float)W / (float)ow));
                sj = sj < W - 1 ? sj : W - 1;
                dst[(p * oh + i) * ow + j] = src[(p * H + si) * W + sj];
            }
        }
    return LY_OK;
}

static ly_status upsample_node(const et_value *v, const int32_t *a, ly_graph *g,
                               ly_graph_value *map)
{
    const ly_tensor *x = &v[a[0]].t, *y = &v[a[3]].t;
    int64_t H = x->shape[2], W = x->shape[3], oh = y->shape[2], ow = y->shape[3];
    if (!(oh % H == 0 && ow % W == 0 && oh / H == ow / W)) return LY_E_DECLINED;
    if (!g) return LY_OK;
    ly_upsample_nearest2d_params params = {.scale = oh / H};
    char name[48];
    snprintf(name, sizeof name, "upsample_nearest2d.%d", (int)a[3]);
    return ly_graph_node(g, LY_OP_UPSAMPLE_NEAREST2D, name, 1, &map[a[0]], &params, 1, &map[a[3]]);
}

/* ---- avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode,
 *                     count_include_pad, divisor_override?, *, out) ---------------- */

static bool pair(const et_value *v, int32_t i, int64_t out[2], bool empty_ok)
{
    if (v[i].n_items == 0 && empty_ok) return true;
    if (v[i].n_items == 1)
        out[0] = out[1] = v[i].ints[0];
    else if (v[i].n_items == 2)
        out[0] = v[i].ints[0], out[1] = v[i].ints[1];
    else
        return false;
    return true;
}

static ly_status avg_pool_call(const et_value *v, const int32_t *a, ly_kernel_call *call,
                               ly_pool2d_params *p, const char *what)
{
    ly_kernel_call_init(call);
    *p = (ly_pool2d_params)LY_POOL2D_DEFAULTS;
    call->params = p;
    if (!pair(v, a[1], p->kernel, false)) return refuse(what, "kernel_size must be 1 or 2 ints");
    p->stride[0] = p->kernel[0], p->stride[1] = p->kernel[1];
    if (!pair(v, a[2], p->stride, true)) return refuse(what, "stride must be 0, 1 or 2 ints");
    if (!pair(v, a[3], p->padding, false)) return refuse(what, "padding must be 1 or 2 ints");
    if (v[a[4]].b) return refuse(what, "ceil_mode=True is not supported");
    if (!is_null(v, a[6])) return refuse(what, "divisor_override is not supported");
    p->count_include_pad = v[a[5]].b;
    call->in[0] = &v[a[0]].t;
    return LY_OK;
}

/* The shape `op`'s contract gives `call`'s output `index`, which `out` must have. */
static ly_status expect_inferred(ly_op op, const ly_kernel_call *call, int index,
                                 const ly_tensor *out, const char *what)
{
    ly_tensor outs[LY_KERNEL_MAX_OUTPUTS];
    int n_out;
    ly_status st = ly_kernel_infer_outputs(ly_op_name(op), call, outs, &n_out);
    if (st != LY_OK) return ly_error_prefix(st, what);
    return expect_shape(out, outs[index].ndim, outs[index].shape, what);
}

static ly_status avg_pool_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[7], what, "out", true);
    ly_kernel_call call;
    ly_pool2d_params params;
    if (st == LY_OK) st = avg_pool_call(v, a, &call, &params, what);
    if (st != LY_OK) return st;
    return expect_inferred(LY_OP_AVG_POOL2D, &call, 0, &v[a[7]].t, what);
}

static ly_status avg_pool_run(et_value *v, const int32_t *a, int threads)
{
    ly_kernel_call call;
    ly_pool2d_params params;
    ly_status st = avg_pool_call(v, a, &call, &params, "avg_pool2d");
    if (st != LY_OK) return st;
    call.out[0] = &v[a[7]].t;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_AVG_POOL2D, &call);
}

static ly_status avg_pool_node(const et_value *v, const int32_t *a, ly_graph *g,
                               ly_graph_value *map)
{
    if (!g) return LY_OK;
    ly_kernel_call call;
    ly_pool2d_params params;
    ly_status st = avg_pool_call(v, a, &call, &params, "avg_pool2d");
    if (st != LY_OK) return st;
    char name[48];
    snprintf(name, sizeof name, "avg_pool2d.%d", (int)a[7]);
    return ly_graph_node(g, LY_OP_AVG_POOL2D, name, 1, &map[a[0]], &params, 1, &map[a[7]]);
}

/* ---- elementwise: add.out(self, other, alpha), sub.out, mul.out, sigmoid.out ---- */

/* Broadcast a and b (numpy, right-aligned) into out's shape. */
static bool broadcasts(const ly_tensor *a, const ly_tensor *b, const ly_tensor *out)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (out->ndim != nd) return false;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        if (out->shape[i] != (da > db ? da : db)) return false;
    }
    return true;
}

static ly_status binary_check(const et_value *v, const int32_t *a, const char *what, bool alpha)
{
    size_t base = alpha ? 5 : 4;
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[1], what, "other", false);
    if (st == LY_OK) st = f32(v, a[base - 2], what, "out", true);
    if (st != LY_OK) return st;
    if (!broadcasts(&v[a[0]].t, &v[a[1]].t, &v[a[base - 2]].t))
        return refuse(what, "operands do not broadcast to out");
    return LY_OK;
}

static ly_status add_check(const et_value *v, const int32_t *a, const char *what)
{
    return binary_check(v, a, what, true);
}

static ly_status mul_check(const et_value *v, const int32_t *a, const char *what)
{
    return binary_check(v, a, what, false);
}

static void binary_run(et_value *v, const int32_t *a, int32_t out, int op, float alpha)
{
    const ly_tensor *x = &v[a[0]].t, *y = &v[a[1]].t;
    ly_tensor *o = &v[out].t;
    int nd = o->ndim;
    int64_t sx[LY_MAX_DIMS], sy[LY_MAX_DIMS], ix = 1, iy = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int kx = i - (nd - x->ndim), ky = i - (nd - y->ndim);
        int64_t dx = kx >= 0 ? x->shape[kx] : 1, dy = ky >= 0 ? y->shape[ky] : 1;
        sx[i] = dx == 1 ? 0 : ix;
        sy[i] = dy == 1 ? 0 : iy;
        ix *= dx;
        iy *= dy;
    }
    const float *px = x->data, *py = y->data;
    float *po = o->data;
    int64_t total = ly_tensor_numel(o), idx[LY_MAX_DIMS] = {0};
    for (int64_t k = 0; k < total; k++) {
        int64_t ox = 0, oy = 0;
        for (int i = 0; i < nd; i++)
            ox += idx[i] * sx[i], oy += idx[i] * sy[i];
        float p = px[ox], q = py[oy];
        po[k] = op == 0 ? p + alpha * q : op == 1 ? p - alpha * q : p * q;
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < o->shape[i]) break;
            idx[i] = 0;
        }
    }
}

static float alpha_of(const et_value *v, int32_t i)
{
    return v[i].type == LY_PTE_EVALUE_INT ? (float)v[i].i : (float)v[i].d;
}

static ly_status add_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    binary_run(v, a, a[3], 0, alpha_of(v, a[2]));
    return LY_OK;
}

static ly_status sub_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    binary_run(v, a, a[3], 1, alpha_of(v, a[2]));
    return LY_OK;
}

static ly_status mul_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    binary_run(v, a, a[2], 2, 1.0f);
    return LY_OK;
}

static ly_status sigmoid_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[1], what, "out", true);
    if (st == LY_OK && !same_shape(&v[a[0]].t, &v[a[1]].t))
        st = refuse(what, "out must have self's shape");
    return st;
}

/* sigmoid, silu, exp, sin, cos: the slot's kernels on the flat tensor */
static ly_status unary_run(et_value *v, const int32_t *a, int threads, ly_op op)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    ly_tensor x = v[a[0]].t, y = v[a[1]].t;
    int64_t numel = ly_tensor_numel(&x);
    x.ndim = y.ndim = 1;
    x.shape[0] = y.shape[0] = numel;
    call.in[0] = &x;
    call.out[0] = &y;
    call.threads = threads;
    return ly_kernel_dispatch_op(op, &call);
}

static ly_status unary_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map,
                            ly_op op)
{
    (void)v;
    if (!g) return LY_OK;
    char name[48];
    snprintf(name, sizeof name, "%s.%d", ly_op_name(op), (int)a[1]);
    return ly_graph_unary(g, op, name, map[a[0]], &map[a[1]]);
}

static ly_status sigmoid_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    return unary_node(v, a, g, map, LY_OP_SIGMOID);
}

static ly_status silu_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    return unary_node(v, a, g, map, LY_OP_SILU);
}

static ly_status exp_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    return unary_node(v, a, g, map, LY_OP_EXP);
}

static ly_status sin_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    return unary_node(v, a, g, map, LY_OP_SIN);
}

static ly_status cos_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    return unary_node(v, a, g, map, LY_OP_COS);
}

static ly_status sigmoid_run(et_value *v, const int32_t *a, int threads)
{
    return unary_run(v, a, threads, LY_OP_SIGMOID);
}

static ly_status silu_run(et_value *v, const int32_t *a, int threads)
{
    return unary_run(v, a, threads, LY_OP_SILU);
}

static ly_status exp_run(et_value *v, const int32_t *a, int threads)
{
    return unary_run(v, a, threads, LY_OP_EXP);
}

static ly_status sin_run(et_value *v, const int32_t *a, int threads)
{
    return unary_run(v, a, threads, LY_OP_SIN);
}

static ly_status cos_run(et_value *v, const int32_t *a, int threads)
{
    return unary_run(v, a, threads, LY_OP_COS);
}

static ly_status relu_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    const float *x = v[a[0]].t.data;
    float *y = v[a[1]].t.data;
    int64_t numel = ly_tensor_numel(&v[a[0]].t);
    for (int64_t i = 0; i < numel; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return LY_OK;
}

/* ---- copies: view_copy.out(self, size), clone.out(self, memory_format?),
 *      _to_dim_order_copy.out(self, non_blocking, dim_order?) --------------------- */

/* A contiguous tensor of `scalar_type` (writable: not a constant). */
static ly_status typed(const et_value *v, int32_t i, const char *what, const char *role,
                       int scalar_type, bool writable)
{
    const et_value *x = &v[i];
    if (x->type != LY_PTE_EVALUE_TENSOR || x->scalar_type != scalar_type || !x->contiguous)
        return refuse(what, "%s must be a contiguous %s tensor", role,
                      scalar_type == LY_PTE_LONG ? "int64" : "float");
    if (writable && !x->writable) return refuse(what, "%s must not be a constant", role);
    return LY_OK;
}

static ly_status view_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = LY_OK;
    if (st == LY_OK && v[a[0]].type == LY_PTE_EVALUE_TENSOR && v[a[0]].scalar_type == LY_PTE_LONG) {
        /* indices between portable kernels */
        st = typed(v, a[0], what, "self", LY_PTE_LONG, false);
        if (st == LY_OK) st = typed(v, a[2], what, "out", LY_PTE_LONG, true);
    } else {
        if (st == LY_OK) st = f32(v, a[0], what, "self", false);
        if (st == LY_OK) st = f32(v, a[2], what, "out", true);
    }
    if (st != LY_OK) return st;
    if (ly_tensor_numel(&v[a[0]].t) != ly_tensor_numel(&v[a[2]].t))
        return refuse(what, "out must hold as many elements as self");
    return LY_OK;
}

static ly_status copy_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[2], what, "out", true);
    if (st != LY_OK) return st;
    if (!same_shape(&v[a[0]].t, &v[a[2]].t)) return refuse(what, "out must have self's shape");
    return LY_OK;
}

static ly_status dim_order_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[3], what, "out", true);
    if (st != LY_OK) return st;
    if (!same_shape(&v[a[0]].t, &v[a[3]].t)) return refuse(what, "out must have self's shape");
    const et_value *order = &v[a[2]];
    if (order->type == LY_PTE_EVALUE_INT_LIST)
        for (size_t i = 0; i < order->n_items; i++)
            if (order->ints[i] != (int64_t)i)
                return refuse(what, "only the contiguous dim order is supported");
    return LY_OK;
}

static ly_status copy2_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    memmove(v[a[2]].t.data, v[a[0]].t.data, (size_t)v[a[0]].nbytes);
    return LY_OK;
}

/* view_copy as a reshape: no copy inside a graph. */
static ly_status view_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    if (!g) return LY_OK;
    const ly_tensor *o = &v[a[2]].t;
    char name[48];
    snprintf(name, sizeof name, "view_copy.%d", (int)a[2]);
    return ly_graph_reshape(g, name, map[a[0]], o->ndim, o->shape, &map[a[2]]);
}

static ly_status copy3_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    memmove(v[a[3]].t.data, v[a[0]].t.data, (size_t)v[a[0]].nbytes);
    return LY_OK;
}

/* ---- cat.out(tensors, dim) ------------------------------------------------------ */

static ly_status cat_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[2], what, "out", true);
    if (st != LY_OK) return st;
    if (v[a[0]].n_items == 0) return refuse(what, "tensors must not be empty");
    const ly_tensor *o = &v[a[2]].t;
    int64_t d = dim_arg(v[a[1]].i, o->ndim), total = 0;
    if (d < 0 || d >= o->ndim)
        return refuse(what, "dim %lld of a %d-D out", (long long)v[a[1]].i, o->ndim);
    for (size_t k = 0; k < v[a[0]].n_items; k++) {
        int32_t t = v[a[0]].tensors[k];
        if (t < 0) return refuse(what, "tensor %zu is None", k);
        st = f32(v, t, what, "a tensor", false);
        if (st != LY_OK) return st;
        const ly_tensor *x = &v[t].t;
        if (x->ndim != o->ndim) return refuse(what, "tensor %zu has another rank", k);
        for (int i = 0; i < o->ndim; i++)
            if (i != d && x->shape[i] != o->shape[i])
                return refuse(what, "tensor %zu does not match out off dim %lld", k, (long long)d);
        total += x->shape[d];
    }
    if (total != o->shape[d]) return refuse(what, "the tensors do not add up to out along dim");
    return LY_OK;
}

static ly_status cat_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    const ly_tensor *o = &v[a[2]].t;
    int64_t d = dim_arg(v[a[1]].i, o->ndim), outer = 1, inner = 1;
    for (int i = 0; i < d; i++)
        outer *= o->shape[i];
    for (int i = (int)d + 1; i < o->ndim; i++)
        inner *= o->shape[i];
    float *dst = o->data;
    int64_t at = 0;
    for (size_t k = 0; k < v[a[0]].n_items; k++) {
        const ly_tensor *x = &v[v[a[0]].tensors[k]].t;
        int64_t block = x->shape[d] * inner;
        for (int64_t r = 0; r < outer; r++)
            memmove(dst + r * o->shape[d] * inner + at * inner, (const float *)x->data + r * block,
                    (size_t)block * sizeof(float));
        at += x->shape[d];
    }
    return LY_OK;
}

/* ---- permute_copy.out(self, dims) ------------------------------------------------- */

static ly_status permute_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[2], what, "out", true);
    if (st != LY_OK) return st;
    const ly_tensor *x = &v[a[0]].t;
    const et_value *p = &v[a[1]];
    if (p->n_items != (size_t)x->ndim)
        return refuse(what, "dims must list self's %d dimensions", x->ndim);
    bool seen[LY_MAX_DIMS] = {false};
    int64_t dims[LY_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int64_t k = dim_arg(p->ints[i], x->ndim);
        if (k < 0 || k >= x->ndim || seen[k]) return refuse(what, "dims is not a permutation");
        seen[k] = true;
        dims[i] = x->shape[k];
    }
    return expect_shape(&v[a[2]].t, x->ndim, dims, what);
}

static ly_status permute_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    const ly_tensor *x = &v[a[0]].t;
    ly_tensor *o = &v[a[2]].t;
    int nd = x->ndim;
    int64_t sx[LY_MAX_DIMS], s[LY_MAX_DIMS], idx[LY_MAX_DIMS] = {0};
    int64_t acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        sx[i] = acc;
        acc *= x->shape[i];
    }
    for (int i = 0; i < nd; i++)
        s[i] = sx[dim_arg(v[a[1]].ints[i], nd)];
    const float *src = x->data;
    float *dst = o->data;
    int64_t total = ly_tensor_numel(o);
    for (int64_t k = 0; k < total; k++) {
        int64_t off = 0;
        for (int i = 0; i < nd; i++)
            off += idx[i] * s[i];
        dst[k] = src[off];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < o->shape[i]) break;
            idx[i] = 0;
        }
    }
    return LY_OK;
}

/* ---- _softmax.out(self, dim, half_to_float) -------------------------------------- */

static ly_status softmax_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[3], what, "out", true);
    if (st != LY_OK) return st;
    const ly_tensor *x = &v[a[0]].t;
    int64_t d = dim_arg(v[a[1]].i, x->ndim);
    if (d < 0 || d >= x->ndim) return refuse(what, "dim out of range");
    if (!same_shape(x, &v[a[3]].t)) return refuse(what, "out must have self's shape");
    return LY_OK;
}

static ly_status softmax_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    const ly_tensor *x = &v[a[0]].t;
    int64_t d = dim_arg(v[a[1]].i, x->ndim), outer = 1, len = x->shape[d], inner = 1;
    for (int i = 0; i < d; i++)
        outer *= x->shape[i];
    for (int i = (int)d + 1; i < x->ndim; i++)
        inner *= x->shape[i];
    const float *src = x->data;
    float *dst = v[a[3]].t.data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *p = src + o * len * inner + i;
            float *q = dst + o * len * inner + i;
            float m = p[0];
            for (int64_t k = 1; k < len; k++)
                m = p[k * inner] > m ? p[k * inner] : m;
            float sum = 0.0f;
            for (int64_t k = 0; k < len; k++) {
                q[k * inner] = expf(p[k * inner] - m);
                sum += q[k * inner];
            }
            for (int64_t k = 0; k < len; k++)
                q[k * inner] /= sum;
        }
    return LY_OK;
}

/* ---- slice_copy.Tensor_out(self, dim, start?, end?, step) ------------------------- */

static void slice_bounds(const et_value *v, const int32_t *a, int64_t size, int64_t *start,
                         int64_t *end, int64_t *step)
{
    *start = is_null(v, a[2]) ? 0 : v[a[2]].i;
    *end = is_null(v, a[3]) ? size : v[a[3]].i;
    *step = v[a[4]].i;
    if (*start < 0) *start += size;
    if (*end < 0) *end += size;
    *start = *start < 0 ? 0 : *start > size ? size : *start;
    *end = *end < *start ? *start : *end > size ? size : *end;
}

static ly_status slice_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[5], what, "out", true);
    if (st != LY_OK) return st;
    const ly_tensor *x = &v[a[0]].t;
    int64_t d = dim_arg(v[a[1]].i, x->ndim);
    if (d < 0 || d >= x->ndim || v[a[4]].i < 1) return refuse(what, "bad dim or step");
    int64_t start, end, step, dims[LY_MAX_DIMS];
    slice_bounds(v, a, x->shape[d], &start, &end, &step);
    memcpy(dims, x->shape, sizeof dims);
    dims[d] = (end - start + step - 1) / step;
    return expect_shape(&v[a[5]].t, x->ndim, dims, what);
}

static ly_status slice_run(et_value *v, const int32_t *a, int threads)
{
    (void)threads;
    const ly_tensor *x = &v[a[0]].t;
    const ly_tensor *o = &v[a[5]].t;
    int64_t d = dim_arg(v[a[1]].i, x->ndim), start, end, step, outer = 1, inner = 1;
    slice_bounds(v, a, x->shape[d], &start, &end, &step);
    for (int i = 0; i < d; i++)
        outer *= x->shape[i];
    for (int i = (int)d + 1; i < x->ndim; i++)
        inner *= x->shape[i];
    const float *src = x->data;
    float *dst = o->data;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t k = 0; k < o->shape[d]; k++)
            memcpy(dst + (r * o->shape[d] + k) * inner,
                   src + (r * x->shape[d] + start + k * step) * inner,
                   (size_t)inner * sizeof(float));
    return LY_OK;
}

/* ---- native_layer_norm.out(input, normalized_shape, weight?, bias?, eps, *,
 *                            out0, out1, out2) -------------------------------------- */

static ly_status layer_norm_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "input", false);
    for (int k = 5; k < 8 && st == LY_OK; k++)
        st = f32(v, a[k], what, k == 5 ? "out0" : k == 6 ? "out1" : "out2", true);
    if (st != LY_OK) return st;
    const ly_tensor *x = &v[a[0]].t;
    if (x->ndim < 1) return refuse(what, "input must have a dimension");
    int64_t c = x->shape[x->ndim - 1];
    if (v[a[1]].n_items != 1 || v[a[1]].ints[0] != c)
        return refuse(what, "normalized_shape must be [%lld] (the last dimension only)",
                      (long long)c);
    for (int k = 2; k <= 3; k++) {
        if (is_null(v, a[k])) continue;
        st = f32(v, a[k], what, k == 2 ? "weight" : "bias", false);
        if (st != LY_OK) return st;
        if (v[a[k]].t.ndim != 1 || v[a[k]].t.shape[0] != c)
            return refuse(what, "%s must be [%lld]", k == 2 ? "weight" : "bias", (long long)c);
    }
    if (!(v[a[4]].d >= 0)) return refuse(what, "eps must be a non-negative float");
    if (!same_shape(x, &v[a[5]].t)) return refuse(what, "out0 must have input's shape");
    int64_t stats[LY_MAX_DIMS];
    memcpy(stats, x->shape, sizeof stats);
    stats[x->ndim - 1] = 1;
    st = expect_shape(&v[a[6]].t, x->ndim, stats, what);
    return st == LY_OK ? expect_shape(&v[a[7]].t, x->ndim, stats, what) : st;
}

static ly_status layer_norm_run(et_value *v, const int32_t *a, int threads)
{
    const ly_tensor *x = &v[a[0]].t;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    ly_norm_params params = {.eps = v[a[4]].d};
    call.in[0] = x;
    call.in[1] = is_null(v, a[2]) ? NULL : &v[a[2]].t;
    call.in[2] = is_null(v, a[3]) ? NULL : &v[a[3]].t;
    call.out[0] = &v[a[5]].t;
    call.params = &params;
    call.threads = threads;
    ly_status st = ly_kernel_dispatch_op(LY_OP_LAYER_NORM, &call);
    if (st != LY_OK || (v[a[6]].unread && v[a[7]].unread)) return st;
    /* the saved statistics, as ATen keeps them for the backward pass */
    int64_t c = x->shape[x->ndim - 1], rows = ly_tensor_numel(x) / (c ? c : 1);
    const float *src = x->data;
    float *mean = v[a[6]].t.data, *rstd = v[a[7]].t.data;
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < c; i++)
            sum += src[r * c + i];
        double m = c ? sum / (double)c : 0;
        for (int64_t i = 0; i < c; i++)
            sq += (src[r * c + i] - m) * (src[r * c + i] - m);
        mean[r] = (float)m;
        rstd[r] = (float)(1.0 / sqrt((c ? sq / (double)c : 0) + params.eps));
    }
    return LY_OK;
}

/* Only where no instruction reads the saved statistics. */
static ly_status layer_norm_node(const et_value *v, const int32_t *a, ly_graph *g,
                                 ly_graph_value *map)
{
    if (!v[a[6]].unread || !v[a[7]].unread) return LY_E_DECLINED;
    if (!g) return LY_OK;
    ly_norm_params params = LY_NORM_DEFAULTS;
    params.eps = v[a[4]].d;
    ly_graph_value in[3] = {map[a[0]], is_null(v, a[2]) ? LY_GRAPH_NONE : map[a[2]],
                            is_null(v, a[3]) ? LY_GRAPH_NONE : map[a[3]]};
    char name[48];
    snprintf(name, sizeof name, "native_layer_norm.%d", (int)a[5]);
    return ly_graph_node(g, LY_OP_LAYER_NORM, name, 3, in, &params, 1, &map[a[5]]);
}

/* ---- topk.values(self, k, dim, largest, sorted, *, values, indices) --------------- */

static ly_status topk_call(const et_value *v, const int32_t *a, ly_kernel_call *call,
                           ly_topk_params *p, const char *what)
{
    if (!v[a[4]].b) return refuse(what, "sorted=False is not supported");
    ly_kernel_call_init(call);
    *p = (ly_topk_params){.k = v[a[1]].i, .axis = v[a[2]].i, .largest = v[a[3]].b};
    call->params = p;
    call->in[0] = &v[a[0]].t;
    return LY_OK;
}

static ly_status topk_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = f32(v, a[5], what, "values", true);
    if (st == LY_OK) st = typed(v, a[6], what, "indices", LY_PTE_LONG, true);
    ly_kernel_call call;
    ly_topk_params p;
    if (st == LY_OK) st = topk_call(v, a, &call, &p, what);
    if (st == LY_OK) st = expect_inferred(LY_OP_TOPK, &call, 0, &v[a[5]].t, what);
    return st == LY_OK ? expect_inferred(LY_OP_TOPK, &call, 1, &v[a[6]].t, what) : st;
}

static ly_status topk_run(et_value *v, const int32_t *a, int threads)
{
    ly_kernel_call call;
    ly_topk_params p;
    ly_status st = topk_call(v, a, &call, &p, "topk");
    if (st != LY_OK) return st;
    call.out[0] = &v[a[5]].t;
    call.out[1] = &v[a[6]].t;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_TOPK, &call);
}

static ly_status topk_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    if (!g) return LY_OK;
    ly_kernel_call call;
    ly_topk_params p;
    ly_status st = topk_call((et_value *)v, a, &call, &p, "topk");
    if (st != LY_OK) return st;
    char name[48];
    snprintf(name, sizeof name, "topk.%d", (int)a[5]);
    ly_graph_value out[2];
    st = ly_graph_node(g, LY_OP_TOPK, name, 1, &map[a[0]], &p, 2, out);
    if (st == LY_OK) {
        map[a[5]] = out[0];
        map[a[6]] = out[1];
    }
    return st;
}

/* ---- index_select.out(self, dim, index, *, out) ---------------------------------- */

static void index_select_call(et_value *v, const int32_t *a, ly_kernel_call *call,
                              ly_gather_params *p)
{
    ly_kernel_call_init(call);
    *p = (ly_gather_params){.axis = v[a[1]].i};
    call->params = p;
    call->in[0] = &v[a[0]].t;
    call->in[1] = &v[a[2]].t;
}

static ly_status index_select_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "self", false);
    if (st == LY_OK) st = typed(v, a[2], what, "index", LY_PTE_LONG, false);
    if (st == LY_OK) st = f32(v, a[3], what, "out", true);
    if (st != LY_OK) return st;
    ly_kernel_call call;
    ly_gather_params p;
    index_select_call((et_value *)v, a, &call, &p);
    return expect_inferred(LY_OP_INDEX_SELECT, &call, 0, &v[a[3]].t, what);
}

static ly_status index_select_node(const et_value *v, const int32_t *a, ly_graph *g,
                                   ly_graph_value *map)
{
    if (!g) return LY_OK;
    ly_gather_params p = {.axis = v[a[1]].i};
    ly_graph_value in[2] = {map[a[0]], map[a[2]]};
    char name[48];
    snprintf(name, sizeof name, "index_select.%d", (int)a[3]);
    return ly_graph_node(g, LY_OP_INDEX_SELECT, name, 2, in, &p, 1, &map[a[3]]);
}

static ly_status index_select_run(et_value *v, const int32_t *a, int threads)
{
    ly_kernel_call call;
    ly_gather_params p;
    index_select_call(v, a, &call, &p);
    call.out[0] = &v[a[3]].t;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_INDEX_SELECT, &call); /* checks every index */
}

/* ---- libreyolo::ms_deform_attn.out(value, spatial_shapes, sampling_locations,
 *      attention_weights, num_points?, mode, *, out) (docs/attention.md) ------------ */

static void msda_call(et_value *v, const int32_t *a, ly_kernel_call *call,
                      ly_ms_deform_attn_params *p)
{
    ly_kernel_call_init(call);
    *p = (ly_ms_deform_attn_params){.mode = v[a[5]].i};
    call->params = p;
    for (int i = 0; i < 4; i++)
        call->in[i] = &v[a[i]].t;
    call->in[4] = is_null(v, a[4]) ? NULL : &v[a[4]].t;
}

static ly_status msda_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "value", false);
    if (st == LY_OK) st = typed(v, a[1], what, "spatial_shapes", LY_PTE_LONG, false);
    if (st == LY_OK) st = f32(v, a[2], what, "sampling_locations", false);
    if (st == LY_OK) st = f32(v, a[3], what, "attention_weights", false);
    if (st == LY_OK && !is_null(v, a[4]))
        st = typed(v, a[4], what, "num_points", LY_PTE_LONG, false);
    if (st == LY_OK) st = f32(v, a[6], what, "out", true);
    if (st != LY_OK) return st;
    ly_kernel_call call;
    ly_ms_deform_attn_params p;
    msda_call((et_value *)v, a, &call, &p);
    return expect_inferred(LY_OP_MS_DEFORM_ATTN, &call, 0, &v[a[6]].t, what);
}

static ly_status msda_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    if (!g) return LY_OK;
    ly_ms_deform_attn_params p = {.mode = v[a[5]].i};
    ly_graph_value in[5];
    for (int i = 0; i < 5; i++)
        in[i] = i == 4 && is_null(v, a[4]) ? LY_GRAPH_NONE : map[a[i]];
    char name[48];
    snprintf(name, sizeof name, "ms_deform_attn.%d", (int)a[6]);
    return ly_graph_node(g, LY_OP_MS_DEFORM_ATTN, name, 5, in, &p, 1, &map[a[6]]);
}

static ly_status msda_run(et_value *v, const int32_t *a, int threads)
{
    ly_kernel_call call;
    ly_ms_deform_attn_params p;
    msda_call(v, a, &call, &p);
    call.out[0] = &v[a[6]].t;
    call.threads = threads;
    /* the slot: the AVX2 provider, the CUDA plugin and hub artifacts serve it */
    return ly_kernel_dispatch_op(LY_OP_MS_DEFORM_ATTN, &call);
}

/* ---- grid_sampler_2d.out(input, grid, interpolation_mode, padding_mode,
 *                         align_corners, *, out) ------------------------------------------- */

static void grid_call(et_value *v, const int32_t *a, ly_kernel_call *call, ly_grid_sample_params *p)
{
    ly_kernel_call_init(call);
    *p = (ly_grid_sample_params){
        .mode = v[a[2]].i, .padding_mode = v[a[3]].i, .align_corners = v[a[4]].b ? 1 : 0};
    call->params = p;
    call->in[0] = &v[a[0]].t;
    call->in[1] = &v[a[1]].t;
}

static ly_status grid_check(const et_value *v, const int32_t *a, const char *what)
{
    ly_status st = f32(v, a[0], what, "input", false);
    if (st == LY_OK) st = f32(v, a[1], what, "grid", false);
    if (st == LY_OK) st = f32(v, a[5], what, "out", true);
    if (st != LY_OK) return st;
    ly_kernel_call call;
    ly_grid_sample_params p;
    grid_call((et_value *)v, a, &call, &p);
    return expect_inferred(LY_OP_GRID_SAMPLE, &call, 0, &v[a[5]].t, what);
}

static ly_status grid_node(const et_value *v, const int32_t *a, ly_graph *g, ly_graph_value *map)
{
    if (!g) return LY_OK;
    ly_kernel_call call;
    ly_grid_sample_params p;
    grid_call((et_value *)v, a, &call, &p);
    ly_graph_value in[2] = {map[a[0]], map[a[1]]};
    char name[48];
    snprintf(name, sizeof name, "grid_sampler_2d.%d", (int)a[5]);
    return ly_graph_node(g, LY_OP_GRID_SAMPLE, name, 2, in, &p, 1, &map[a[5]]);
}

static ly_status grid_run(et_value *v, const int32_t *a, int threads)
{
    ly_kernel_call call;
    ly_grid_sample_params p;
    grid_call(v, a, &call, &p);
    call.out[0] = &v[a[5]].t;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_GRID_SAMPLE, &call);
}

/* ---- the table: a kernel for every row of the operator schemas ---------------------- */

#define KERNEL(op, check, run) [op] = {&ly_pte_op_schemas[op], check, run, NULL}
#define KERNEL_NODE(op, check, run, node) [op] = {&ly_pte_op_schemas[op], check, run, node}

static const et_kernel kernels[LY_PTE_PORTABLE_COUNT] = {
    KERNEL_NODE(LY_PTE_UPSAMPLE_NEAREST2D, upsample_check, upsample_run, upsample_node),
    KERNEL_NODE(LY_PTE_AVG_POOL2D, avg_pool_check, avg_pool_run, avg_pool_node),
    KERNEL(LY_PTE_ADD, add_check, add_run),
    KERNEL(LY_PTE_SUB, add_check, sub_run),
    KERNEL(LY_PTE_MUL, mul_check, mul_run),
    KERNEL_NODE(LY_PTE_SIGMOID, sigmoid_check, sigmoid_run, sigmoid_node),
    KERNEL_NODE(LY_PTE_SILU, sigmoid_check, silu_run, silu_node),
    KERNEL(LY_PTE_RELU, sigmoid_check, relu_run),
    KERNEL_NODE(LY_PTE_EXP, sigmoid_check, exp_run, exp_node),
    KERNEL_NODE(LY_PTE_SIN, sigmoid_check, sin_run, sin_node),
    KERNEL_NODE(LY_PTE_COS, sigmoid_check, cos_run, cos_node),
    KERNEL_NODE(LY_PTE_VIEW_COPY, view_check, copy2_run, view_node),
    KERNEL(LY_PTE_CLONE, copy_check, copy2_run),
    KERNEL(LY_PTE_TO_DIM_ORDER_COPY, dim_order_check, copy3_run),
    KERNEL(LY_PTE_CAT, cat_check, cat_run),
    KERNEL(LY_PTE_PERMUTE_COPY, permute_check, permute_run),
    KERNEL(LY_PTE_SOFTMAX, softmax_check, softmax_run),
    KERNEL(LY_PTE_SLICE_COPY, slice_check, slice_run),
    KERNEL_NODE(LY_PTE_NATIVE_LAYER_NORM, layer_norm_check, layer_norm_run, layer_norm_node),
    KERNEL_NODE(LY_PTE_TOPK, topk_check, topk_run, topk_node),
    KERNEL_NODE(LY_PTE_INDEX_SELECT, index_select_check, index_select_run, index_select_node),
    KERNEL_NODE(LY_PTE_MS_DEFORM_ATTN, msda_check, msda_run, msda_node),
    KERNEL_NODE(LY_PTE_GRID_SAMPLER_2D, grid_check, grid_run, grid_node),
};

const et_kernel *ly_et_find_kernel(const char *name, const char *overload)
{
    ly_pte_portable_op op;
    if (!ly_pte_op_find(name, overload, &op) || !kernels[op].check) return NULL;
    return &kernels[op];
}

static int et_value_type(const void *values, int32_t index)
{
    return (int)((const et_value *)values)[index].type;
}

ly_status ly_et_kernel_check(const et_kernel *k, const et_value *v, const int32_t *args, size_t n,
                             const char *what)
{
    ly_status st = ly_pte_call_check(k->schema, args, n, et_value_type, v, what);
    return st == LY_OK ? k->check(v, args, what) : st;
}
