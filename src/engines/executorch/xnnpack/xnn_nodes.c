/* SPDX-License-Identifier: MIT */
/*
 * The XNNPACK delegate's nodes (see xnn_internal.h): each XNNGraph node
 * checked into an op, its inputs defined before it reads them and its output
 * dims what it computes; sizes read from the blob are combined in checked
 * arithmetic (src/core/checked.h), so a hostile graph is refused, never
 * undefined behaviour. Then the XNNPACK operators of the ops that run on them.
 */
#include "engines/executorch/xnnpack/xnn_internal.h"

#include "core/checked.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ly_status ly_xd_fail(const ly_et_xnnpack *d, const xop *o, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o) return ly_set_error(LY_E_FORMAT, "%s: node %s: %s", d->what, o->name, msg);
    return ly_set_error(LY_E_FORMAT, "%s: %s", d->what, msg);
}

static bool dims_equal(const xval *a, int nd, const int64_t *dims)
{
    if (a->ndim != nd) return false;
    for (int i = 0; i < nd; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}

static void dims_text(const xval *v, char *out, size_t size)
{
    size_t k = (size_t)snprintf(out, size, "[");
    for (int i = 0; i < v->ndim && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)v->dims[i]);
    if (k < size) snprintf(out + k, size - k, "]");
}

/* ---- nodes -> ops --------------------------------------------------------------- */

static ly_status check_id(const ly_et_xnnpack *d, const xop *o, uint32_t id, const char *role)
{
    if (id >= d->n_v) return ly_xd_fail(d, o, "%s id %u is not a value", role, id);
    return LY_OK;
}

/* An input must exist when the op runs: an external input, a constant, or the
 * output of an earlier op. */
static ly_status use(ly_et_xnnpack *d, xop *o, uint32_t id, const char *role)
{
    ly_status st = check_id(d, o, id, role);
    if (st != LY_OK) return st;
    const xval *v = &d->v[id];
    if (v->kind == V_INTERNAL || v->kind == V_EXT_OUT) {
        if (v->producer < 0)
            return ly_xd_fail(d, o, "%s (value %u) is read before any node writes it", role, id);
    }
    if (o->n_in == 5) return ly_xd_fail(d, o, "too many inputs");
    o->in[o->n_in++] = (int)id;
    return LY_OK;
}

static ly_status define(ly_et_xnnpack *d, xop *o, uint32_t id, int nd, const int64_t *dims)
{
    ly_status st = check_id(d, o, id, "output");
    if (st != LY_OK) return st;
    xval *v = &d->v[id];
    if (v->kind == V_EXT_IN || v->kind == V_CONST)
        return ly_xd_fail(d, o, "output value %u is an input or a constant", id);
    if (v->producer >= 0) return ly_xd_fail(d, o, "value %u is written twice", id);
    if (dims && !dims_equal(v, nd, dims)) {
        char got[96], want[96];
        dims_text(v, got, sizeof got);
        xval tmp = {.ndim = nd};
        memcpy(tmp.dims, dims, (size_t)nd * sizeof *dims);
        dims_text(&tmp, want, sizeof want);
        return ly_xd_fail(d, o, "output value %u has dims %s, the node computes %s", id, got, want);
    }
    v->producer = (int)(o - d->ops);
    o->out = (int)id;
    return LY_OK;
}

/* The output extent of a window sliding over `in` + `pad`; 0 when the window
 * does not fit (its span overflowing included). */
static int64_t conv_out(int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil)
{
    int64_t span, padded;
    if (!ly_checked_mul(dil, k - 1, &span) || !ly_checked_add(span, 1, &span) ||
        !ly_checked_add(in, pad, &padded) || padded < span)
        return 0;
    return (padded - span) / stride + 1;
}

static ly_status xnn_failed(const ly_et_xnnpack *d, const xop *o, const char *call,
                            enum xnn_status s)
{
    return ly_set_error(s == xnn_status_out_of_memory ? LY_E_NO_MEMORY : LY_E_FORMAT,
                        "%s: node %s: %s failed with status %d (parameters XNNPACK refuses)",
                        d->what, o->name, call, (int)s);
}

static ly_status make_conv(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    bool dw = n->type == LY_XNN_DEPTHWISE_CONV2D;
    const __typeof__(n->u.conv) *c = &n->u.conv;
    ly_status st = use(d, o, c->input1_id, "input");
    if (st == LY_OK) st = check_id(d, o, c->filter_id, "filter");
    if (st == LY_OK && c->bias_id != NONE) st = check_id(d, o, c->bias_id, "bias");
    if (st != LY_OK) return st;
    const xval *x = &d->v[c->input1_id], *f = &d->v[c->filter_id];
    const xval *b = c->bias_id != NONE ? &d->v[c->bias_id] : NULL;
    if (x->ndim != 4) return ly_xd_fail(d, o, "input must be 4-D NHWC");
    if (c->groups == 0 || c->group_input_channels == 0 || c->group_output_channels == 0 ||
        c->kernel_height == 0 || c->kernel_width == 0 || c->subsampling_height == 0 ||
        c->subsampling_width == 0 || c->dilation_height == 0 || c->dilation_width == 0 ||
        c->adjustment_height || c->adjustment_width)
        return ly_xd_fail(d, o, "zero groups, channels, kernel, stride or dilation");
    int64_t groups = c->groups, gic = c->group_input_channels, goc = c->group_output_channels;
    int64_t O, in_channels, KH = c->kernel_height, KW = c->kernel_width;
    if (!ly_checked_mul(groups, goc, &O) || !ly_checked_mul(groups, gic, &in_channels))
        return ly_xd_fail(d, o,
                          "%lld groups of %lld input and %lld output channels overflow 64 bits",
                          (long long)groups, (long long)gic, (long long)goc);
    if (x->dims[3] != in_channels)
        return ly_xd_fail(d, o, "input has %lld channels, groups x group_input_channels = %lld",
                          (long long)x->dims[3], (long long)in_channels);
    if (f->kind != V_CONST || (b && b->kind != V_CONST))
        return ly_xd_fail(d, o, "filter and bias must be constants");
    int64_t want_f[4] = {dw ? 1 : O, KH, KW, dw ? O : gic};
    if (dw && gic != 1)
        return ly_xd_fail(d, o, "depthwise convolution needs group_input_channels 1");
    if (!dims_equal(f, 4, want_f))
        return ly_xd_fail(d, o, "filter dims do not fit the convolution");
    if (b && (b->ndim != 1 || b->dims[0] != O))
        return ly_xd_fail(d, o, "bias must be [%lld]", (long long)O);
    int64_t ho = conv_out(x->dims[1], (int64_t)c->padding_top + c->padding_bottom, KH,
                          c->subsampling_height, c->dilation_height);
    int64_t wo = conv_out(x->dims[2], (int64_t)c->padding_left + c->padding_right, KW,
                          c->subsampling_width, c->dilation_width);
    if (ho <= 0 || wo <= 0) return ly_xd_fail(d, o, "the kernel does not fit the padded input");
    int64_t od[4] = {x->dims[0], ho, wo, O};
    st = define(d, o, c->output_id, 4, od);
    if (st != LY_OK) return st;
    o->kind = K_XNN;
    o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
    return LY_OK;
}

/* Create the conv operator once strides are known (after placement). */
static ly_status create_conv(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.conv) *c = &n->u.conv;
    const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
    const float *bias = c->bias_id != NONE ? d->v[c->bias_id].cdata : NULL;
    enum xnn_status s = xnn_create_convolution2d_nhwc_f32(
        c->padding_top, c->padding_right, c->padding_bottom, c->padding_left, c->kernel_height,
        c->kernel_width, c->subsampling_height, c->subsampling_width, c->dilation_height,
        c->dilation_width, c->groups, c->group_input_channels, c->group_output_channels,
        (size_t)x->ld, (size_t)y->ld, d->v[c->filter_id].cdata, bias, o->lo, o->hi,
        n->type == LY_XNN_DEPTHWISE_CONV2D ? XNN_FLAG_DEPTHWISE_CONVOLUTION : 0, &o->op);
    return s == xnn_status_success ? LY_OK
                                   : xnn_failed(d, o, "xnn_create_convolution2d_nhwc_f32", s);
}

static ly_status make_pool(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.pooling) *p = &n->u.pooling;
    ly_status st = use(d, o, p->input_id, "input");
    if (st != LY_OK) return st;
    const xval *x = &d->v[p->input_id];
    if (x->ndim != 4) return ly_xd_fail(d, o, "input must be 4-D NHWC");
    if (p->pooling_height == 0 || p->pooling_width == 0 || p->stride_height == 0 ||
        p->stride_width == 0 || (p->pooling_height == 1 && p->pooling_width == 1))
        return ly_xd_fail(d, o, "pooling window and stride must be positive (and not 1x1)");
    uint32_t dh = p->dilation_height ? p->dilation_height : 1,
             dwv = p->dilation_width ? p->dilation_width : 1;
    if (n->type == LY_XNN_AVG_POOLING_2D && (dh != 1 || dwv != 1))
        return ly_xd_fail(d, o, "average pooling has no dilation");
    int64_t ho = conv_out(x->dims[1], (int64_t)p->padding_top + p->padding_bottom,
                          p->pooling_height, p->stride_height, dh);
    int64_t wo = conv_out(x->dims[2], (int64_t)p->padding_left + p->padding_right, p->pooling_width,
                          p->stride_width, dwv);
    if (ho <= 0 || wo <= 0) return ly_xd_fail(d, o, "the window does not fit the padded input");
    int64_t od[4] = {x->dims[0], ho, wo, x->dims[3]};
    st = define(d, o, p->output_id, 4, od);
    if (st != LY_OK) return st;
    o->kind = K_XNN;
    o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
    return LY_OK;
}

static ly_status create_pool(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.pooling) *p = &n->u.pooling;
    const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
    enum xnn_status s;
    if (n->type == LY_XNN_MAX_POOLING_2D)
        s = xnn_create_max_pooling2d_nhwc_f32(
            p->padding_top, p->padding_right, p->padding_bottom, p->padding_left, p->pooling_height,
            p->pooling_width, p->stride_height, p->stride_width,
            p->dilation_height ? p->dilation_height : 1, p->dilation_width ? p->dilation_width : 1,
            (size_t)x->dims[3], (size_t)x->ld, (size_t)y->ld, o->lo, o->hi, 0, &o->op);
    else
        s = xnn_create_average_pooling2d_nhwc_f32(
            p->padding_top, p->padding_right, p->padding_bottom, p->padding_left, p->pooling_height,
            p->pooling_width, p->stride_height, p->stride_width, (size_t)x->dims[3], (size_t)x->ld,
            (size_t)y->ld, o->lo, o->hi, 0, &o->op);
    return s == xnn_status_success ? LY_OK : xnn_failed(d, o, "xnn_create_*_pooling2d_nhwc_f32", s);
}

/* numpy broadcasting of a and b (right-aligned). */
static ly_status broadcast(const ly_et_xnnpack *d, const xop *o, const xval *a, const xval *b,
                           int *nd, int64_t *dims)
{
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < *nd; i++) {
        int ia = i - (*nd - a->ndim), ib = i - (*nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return ly_xd_fail(d, o, "operands do not broadcast (dimension %d: %lld vs %lld)", i,
                              (long long)da, (long long)db);
        dims[i] = da > db ? da : db;
    }
    return LY_OK;
}

ly_status ly_xd_make_node(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    o->type = n->type;
    o->lo = -INFINITY;
    o->hi = INFINITY;
    if (n->has_output_min_max) {
        if (!(n->output_min <= n->output_max)) return ly_xd_fail(d, o, "output_min > output_max");
        o->clamp = true;
        o->lo = n->output_min;
        o->hi = n->output_max;
    }
    ly_status st;
    switch (n->type) {
    case LY_XNN_CONV2D:
    case LY_XNN_DEPTHWISE_CONV2D:
        return make_conv(d, o, n);
    case LY_XNN_MAX_POOLING_2D:
    case LY_XNN_AVG_POOLING_2D:
        return make_pool(d, o, n);
    case LY_XNN_GLOBAL_AVG_POOLING_2D: {
        st = use(d, o, n->u.n1x1.input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim != 4) return ly_xd_fail(d, o, "input must be 4-D NHWC");
        int64_t od[4] = {x->dims[0], 1, 1, x->dims[3]};
        o->kind = K_XNN;
        return define(d, o, n->u.n1x1.output_id, 4, od);
    }
    case LY_XNN_FULLY_CONNECTED: {
        const __typeof__(n->u.fc) *c = &n->u.fc;
        st = use(d, o, c->input1_id, "input");
        if (st == LY_OK) st = check_id(d, o, c->filter_id, "filter");
        if (st == LY_OK && c->bias_id != NONE) st = check_id(d, o, c->bias_id, "bias");
        if (st != LY_OK) return st;
        const xval *x = &d->v[c->input1_id], *f = &d->v[c->filter_id];
        if (c->flags & ~1u) return ly_xd_fail(d, o, "flags 0x%x are not supported", c->flags);
        bool transposed = c->flags & 1u;
        if (f->kind != V_CONST || f->ndim != 2)
            return ly_xd_fail(d, o, "filter must be a 2-D constant");
        int64_t out_c = transposed ? f->dims[1] : f->dims[0],
                in_c = transposed ? f->dims[0] : f->dims[1];
        if (x->last != in_c)
            return ly_xd_fail(d, o, "input has %lld channels, the filter %lld", (long long)x->last,
                              (long long)in_c);
        if (c->bias_id != NONE) {
            const xval *b = &d->v[c->bias_id];
            if (b->kind != V_CONST || b->numel != out_c)
                return ly_xd_fail(d, o, "bias must be [%lld]", (long long)out_c);
        }
        int64_t od[MAX_DIMS];
        memcpy(od, x->dims, sizeof od);
        od[x->ndim - 1] = out_c;
        o->kind = K_XNN;
        o->batch = x->rows;
        return define(d, o, c->output_id, x->ndim, od);
    }
    case LY_XNN_SOFTMAX:
    case LY_XNN_SIGMOID: {
        st = use(d, o, n->u.n1x1.input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim < 1) return ly_xd_fail(d, o, "input must have a dimension");
        o->kind = K_XNN;
        o->batch = x->rows;
        return define(d, o, n->u.n1x1.output_id, x->ndim, x->dims);
    }
    case LY_XNN_STATIC_RESIZE_BILINEAR_2D: {
        const __typeof__(n->u.resize) *r = &n->u.resize;
        st = use(d, o, r->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim != 4 || r->new_height == 0 || r->new_width == 0)
            return ly_xd_fail(d, o, "input must be 4-D NHWC and the new size positive");
        if ((r->flags & ~0xCu) || (r->flags & 0xC) == 0xC)
            return ly_xd_fail(d, o, "flags 0x%x are not supported", r->flags);
        int64_t od[4] = {x->dims[0], r->new_height, r->new_width, x->dims[3]};
        o->kind = K_XNN;
        o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
        o->oh = r->new_height, o->ow = r->new_width;
        o->binop = (int)r->flags;
        return define(d, o, r->output_id, 4, od);
    }
    case LY_XNN_ADD:
    case LY_XNN_SUBTRACT:
    case LY_XNN_MULTIPLY:
    case LY_XNN_DIV:
    case LY_XNN_MINIMUM:
    case LY_XNN_MAXIMUM: {
        const __typeof__(n->u.n2x1) *b = &n->u.n2x1;
        st = use(d, o, b->input1_id, "input1");
        if (st == LY_OK) st = use(d, o, b->input2_id, "input2");
        if (st != LY_OK) return st;
        int nd;
        int64_t od[MAX_DIMS];
        st = broadcast(d, o, &d->v[o->in[0]], &d->v[o->in[1]], &nd, od);
        if (st != LY_OK) return st;
        o->kind = K_BINARY;
        o->binop = n->type;
        return define(d, o, b->output_id, nd, od);
    }
    case LY_XNN_ABS:
    case LY_XNN_NEGATE:
    case LY_XNN_SQUARE:
    case LY_XNN_SQUARE_ROOT:
    case LY_XNN_RECIPROCAL_SQUARE_ROOT:
    case LY_XNN_FLOOR:
    case LY_XNN_CEILING:
    case LY_XNN_EXP:
    case LY_XNN_LOG:
    case LY_XNN_TANH:
    case LY_XNN_GELU:
    case LY_XNN_SIN:
    case LY_XNN_COS:
    case LY_XNN_HARDSWISH:
    case LY_XNN_CLAMP:
    case LY_XNN_COPY:
    case LY_XNN_CONVERT:
    case LY_XNN_LEAKY_RELU:
    case LY_XNN_ELU: {
        uint32_t in = n->u.n1x1.input_id, out = n->u.n1x1.output_id;
        if (n->type == LY_XNN_LEAKY_RELU) {
            in = n->u.leaky_relu.input_id, out = n->u.leaky_relu.output_id;
            o->alpha = n->u.leaky_relu.negative_slope;
        } else if (n->type == LY_XNN_ELU) {
            in = n->u.elu.input_id, out = n->u.elu.output_id;
            o->alpha = n->u.elu.alpha;
        }
        st = use(d, o, in, "input");
        if (st != LY_OK) return st;
        static const struct {
            ly_xnn_node_type t;
            unary_fn f;
        } map[] = {{LY_XNN_ABS, U_ABS},
                   {LY_XNN_NEGATE, U_NEG},
                   {LY_XNN_SQUARE, U_SQUARE},
                   {LY_XNN_SQUARE_ROOT, U_SQRT},
                   {LY_XNN_RECIPROCAL_SQUARE_ROOT, U_RSQRT},
                   {LY_XNN_FLOOR, U_FLOOR},
                   {LY_XNN_CEILING, U_CEIL},
                   {LY_XNN_EXP, U_EXP},
                   {LY_XNN_LOG, U_LOG},
                   {LY_XNN_TANH, U_TANH},
                   {LY_XNN_GELU, U_GELU},
                   {LY_XNN_SIN, U_SIN},
                   {LY_XNN_COS, U_COS},
                   {LY_XNN_HARDSWISH, U_HARDSWISH},
                   {LY_XNN_CLAMP, U_CLAMP},
                   {LY_XNN_COPY, U_COPY},
                   {LY_XNN_CONVERT, U_COPY},
                   {LY_XNN_LEAKY_RELU, U_LEAKY},
                   {LY_XNN_ELU, U_ELU}};
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (map[i].t == n->type) o->fn = map[i].f;
        o->kind = K_UNARY;
        const xval *x = &d->v[o->in[0]];
        if (n->type == LY_XNN_LEAKY_RELU && x->ndim >= 1) {
            /* XNNPACK's own, vectorized */
            o->kind = K_XNN;
            o->batch = x->rows;
        }
        return define(d, o, out, x->ndim, x->dims);
    }
    case LY_XNN_STATIC_TRANSPOSE: {
        const __typeof__(n->u.transpose) *t = &n->u.transpose;
        st = use(d, o, t->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (t->num_dims != (uint32_t)x->ndim || t->n_perm != t->num_dims)
            return ly_xd_fail(d, o, "perm has %u entries for a %d-D input", t->num_dims, x->ndim);
        int64_t od[MAX_DIMS];
        bool seen[MAX_DIMS] = {false};
        for (int i = 0; i < x->ndim; i++) {
            uint32_t p = t->perm[i];
            if (p >= (uint32_t)x->ndim || seen[p])
                return ly_xd_fail(d, o, "perm is not a permutation");
            seen[p] = true;
            o->perm[i] = (int)p;
            od[i] = x->dims[p];
        }
        o->kind = K_TRANSPOSE;
        return define(d, o, t->output_id, x->ndim, od);
    }
    case LY_XNN_STATIC_RESHAPE: {
        const __typeof__(n->u.reshape) *r = &n->u.reshape;
        st = use(d, o, r->input_id, "input");
        st = st == LY_OK ? check_id(d, o, r->output_id, "output") : st;
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]], *y = &d->v[r->output_id];
        /* XNNPACK takes the output value's dims; new_shape may hold a 0 for
         * "inferred", so the element counts are what must agree. */
        if (x->numel != y->numel) return ly_xd_fail(d, o, "reshape changes the number of elements");
        o->kind = K_COPY;
        o->binop = 1; /* reshape: a view when the input is dense */
        return define(d, o, r->output_id, y->ndim, y->dims);
    }
    case LY_XNN_STATIC_SLICE: {
        const __typeof__(n->u.slice) *s = &n->u.slice;
        st = use(d, o, s->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (s->num_dims != (uint32_t)x->ndim || s->n_offsets != s->num_dims ||
            s->n_sizes != s->num_dims)
            return ly_xd_fail(d, o, "offsets and sizes must have the input's %d dimensions",
                              x->ndim);
        int64_t od[MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) {
            int64_t size = s->sizes[i] == 0 ? x->dims[i] - s->offsets[i] : s->sizes[i];
            int64_t end;
            if (s->offsets[i] >= x->dims[i] || size <= 0 ||
                !ly_checked_add(s->offsets[i], size, &end) || end > x->dims[i])
                return ly_xd_fail(d, o, "slice [%u, +%lld) of dimension %d (size %lld)",
                                  s->offsets[i], (long long)size, i, (long long)x->dims[i]);
            o->offsets[i] = s->offsets[i];
            od[i] = size;
        }
        o->kind = K_COPY;
        o->binop = 2; /* slice: a view when only the last dimension is cut */
        return define(d, o, s->output_id, x->ndim, od);
    }
    case LY_XNN_CONCATENATE2:
    case LY_XNN_CONCATENATE3:
    case LY_XNN_CONCATENATE4:
    case LY_XNN_CONCATENATE5: {
        const __typeof__(n->u.cat) *c = &n->u.cat;
        int count = n->type == LY_XNN_CONCATENATE5 ? 5 : (int)n->type - LY_XNN_CONCATENATE2 + 2;
        uint32_t ids[5] = {c->input1_id, c->input2_id, c->input3_id, c->input4_id, c->input5_id};
        for (int i = 0; i < count; i++) {
            st = use(d, o, ids[i], "input");
            if (st != LY_OK) return st;
        }
        const xval *x0 = &d->v[o->in[0]];
        if (c->axis >= (uint32_t)x0->ndim)
            return ly_xd_fail(d, o, "axis %u of a %d-D input", c->axis, x0->ndim);
        int64_t od[MAX_DIMS];
        memcpy(od, x0->dims, sizeof od);
        od[c->axis] = 0;
        for (int i = 0; i < count; i++) {
            const xval *xi = &d->v[o->in[i]];
            for (int k = 0; k < x0->ndim; k++)
                if (xi->ndim != x0->ndim || (k != (int)c->axis && xi->dims[k] != x0->dims[k]))
                    return ly_xd_fail(d, o, "input %d does not match input 1 off the axis", i + 1);
            if (!ly_checked_add(od[c->axis], xi->dims[c->axis], &od[c->axis]))
                return ly_xd_fail(d, o, "the inputs' extents along the axis overflow");
        }
        o->axis = (int)c->axis;
        o->kind = K_CONCAT;
        return define(d, o, c->output_id, x0->ndim, od);
    }
    case LY_XNN_STATIC_CONSTANT_PAD: {
        const __typeof__(n->u.pad) *p = &n->u.pad;
        st = use(d, o, p->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (p->n_pre_paddings != (size_t)x->ndim || p->n_post_paddings != (size_t)x->ndim)
            return ly_xd_fail(d, o, "paddings must have the input's %d dimensions", x->ndim);
        int64_t od[MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) {
            if (!ly_checked_add(x->dims[i], p->pre_paddings[i], &od[i]) ||
                !ly_checked_add(od[i], p->post_paddings[i], &od[i]))
                return ly_xd_fail(d, o, "padded dimension %d overflows", i);
            o->offsets[i] = p->pre_paddings[i];
        }
        o->pad_value = p->padding_value;
        o->kind = K_PAD;
        return define(d, o, p->output_id, x->ndim, od);
    }
    case LY_XNN_BATCH_MATRIX_MULTIPLY: {
        const __typeof__(n->u.n2x1) *b = &n->u.n2x1;
        st = use(d, o, b->input1_id, "input1");
        if (st == LY_OK) st = use(d, o, b->input2_id, "input2");
        if (st != LY_OK) return st;
        const xval *a = &d->v[o->in[0]], *bb = &d->v[o->in[1]];
        if (a->ndim < 2 || a->ndim != bb->ndim)
            return ly_xd_fail(d, o, "operands must have the same rank, at least 2");
        for (int i = 0; i < a->ndim - 2; i++)
            if (a->dims[i] != bb->dims[i]) return ly_xd_fail(d, o, "batch dimensions differ");
        if (a->dims[a->ndim - 1] != bb->dims[bb->ndim - 2])
            return ly_xd_fail(d, o, "inner dimensions differ");
        if (b->flags & ~1u) return ly_xd_fail(d, o, "flags 0x%x are not supported", b->flags);
        if (b->flags & 1u) return ly_xd_fail(d, o, "transposed right operand is not supported");
        int64_t od[MAX_DIMS];
        memcpy(od, a->dims, sizeof od);
        od[a->ndim - 1] = bb->dims[bb->ndim - 1];
        o->kind = K_BMM;
        return define(d, o, b->output_id, a->ndim, od);
    }
    default:
        return ly_xd_fail(d, o, "%s (tag %d) is not supported by this runtime",
                          ly_xnn_node_name(n->type), (int)n->type);
    }
}

/* ---- XNNPACK operators ---------------------------------------------------------- */

ly_status ly_xd_create_operators(ly_et_xnnpack *d, const ly_xnn_graph *xg)
{
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind != K_XNN) continue;
        const ly_xnn_node *n = &xg->xnodes[i];
        const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
        enum xnn_status s = xnn_status_success;
        const char *call = "";
        ly_status st = LY_OK;
        switch (n->type) {
        case LY_XNN_CONV2D:
        case LY_XNN_DEPTHWISE_CONV2D:
            st = create_conv(d, o, n);
            break;
        case LY_XNN_MAX_POOLING_2D:
        case LY_XNN_AVG_POOLING_2D:
            st = create_pool(d, o, n);
            break;
        case LY_XNN_GLOBAL_AVG_POOLING_2D:
            call = "xnn_create_global_average_pooling_nwc_f32";
            s = xnn_create_global_average_pooling_nwc_f32((size_t)x->last, (size_t)x->ld,
                                                          (size_t)y->ld, o->lo, o->hi, 0, &o->op);
            break;
        case LY_XNN_FULLY_CONNECTED: {
            const float *bias = n->u.fc.bias_id != NONE ? d->v[n->u.fc.bias_id].cdata : NULL;
            call = "xnn_create_fully_connected_nc_f32";
            s = xnn_create_fully_connected_nc_f32((size_t)x->last, (size_t)y->last, (size_t)x->ld,
                                                  (size_t)y->ld, d->v[n->u.fc.filter_id].cdata,
                                                  bias, o->lo, o->hi, n->u.fc.flags & 1u, &o->op);
            break;
        }
        case LY_XNN_SOFTMAX:
            call = "xnn_create_softmax_nc_f32";
            s = xnn_create_softmax_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld, 0, &o->op);
            break;
        case LY_XNN_SIGMOID:
            call = "xnn_create_sigmoid_nc_f32";
            s = xnn_create_sigmoid_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld, 0, &o->op);
            break;
        case LY_XNN_LEAKY_RELU:
            call = "xnn_create_leaky_relu_nc_f32";
            s = xnn_create_leaky_relu_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld,
                                             o->alpha, 0, &o->op);
            break;
        case LY_XNN_STATIC_RESIZE_BILINEAR_2D:
            call = "xnn_create_resize_bilinear2d_nhwc_f32";
            s = xnn_create_resize_bilinear2d_nhwc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld,
                                                      (uint32_t)o->binop, &o->op);
            break;
        default:
            break;
        }
        if (st != LY_OK) return st;
        if (s != xnn_status_success) return xnn_failed(d, o, call, s);
        /* Ops with a native clamp took it; the others clamp after running. */
        if (n->type == LY_XNN_CONV2D || n->type == LY_XNN_DEPTHWISE_CONV2D ||
            n->type == LY_XNN_MAX_POOLING_2D || n->type == LY_XNN_AVG_POOLING_2D ||
            n->type == LY_XNN_GLOBAL_AVG_POOLING_2D || n->type == LY_XNN_FULLY_CONNECTED)
            o->clamp = false;
    }
    return LY_OK;
}
