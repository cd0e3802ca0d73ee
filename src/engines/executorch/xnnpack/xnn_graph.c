/* SPDX-License-Identifier: MIT */
/*
 * The XNNPACK delegate's XNNGraph as one of our graphs (src/graph), so that a
 * .pte program runs on the providers the checkpoint path runs on (oneDNN's
 * convolutions on channel-blocked maps with the activation and the residual
 * fused, our pooling, resize and element-wise kernels) instead of Debian's
 * 2022 XNNPACK operators and our loops between them.
 *
 * Layouts. XNNPACK's convolutions read and write NHWC values (and the
 * exporter keeps 3-D values [N, L, C] where it made them channels-last); ours
 * take NCHW. So each XNNGraph value may have two forms in our graph: as it
 * is, and its twin, the permutation that puts its channels second ([0,3,1,2]
 * of a 4-D value, [0,2,1] of a 3-D one). Convolutions, pooling and resizing
 * read and write twins; a static transpose between the two orders makes the
 * other form of the same value, no node; element-wise ops, slices and
 * concatenations run on whichever form their inputs have; a permute node is
 * made only where a consumer needs a form that does not exist yet.
 *
 * Fusions, as the exporter wrote them out (ops/nn/export.c): a convolution
 * followed by Sigmoid and Multiply (SiLU), a LeakyReLU or a Sigmoid takes it
 * as its activation, then an Add of a value made before it as its residual.
 *
 * Anything else (constant padding, asymmetric padding, quantized values,
 * node types without an op of ours: RMSNorm's Square and reciprocal square
 * root among them) declines: the delegate keeps its operators
 * (xnn_kernels.c).
 */
#include "engines/executorch/xnnpack/xnn_internal.h"

#include "graph/graph.h"
#include "libreyolo/sdpa.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int TO_TWIN4[4] = {0, 3, 1, 2}, FROM_TWIN4[4] = {0, 2, 3, 1}, SWAP3[3] = {0, 2, 1},
                 SWAP2[2] = {1, 0};

typedef struct builder {
    ly_et_xnnpack *d;
    const ly_xnn_graph *xg;
    ly_graph *g;
    ly_graph_value *as_is, *twin;
    int *uses;  /* reads of each value (an external output counts one) */
    bool *done; /* ops folded into an earlier one */
    bool declined;
    ly_status st;
    char why[200];
    char name[64];
    /* appending to a graph several calls share: the delegate's number in node
     * names, the values its externals read and write */
    int tag;
    const ly_graph_value *bound;
    ly_graph_value *produced;
} builder;

static bool decline(builder *b, const xop *o, const char *why)
{
    if (!b->declined && b->st == LY_OK)
        snprintf(b->why, sizeof b->why, "%s%s%s", o ? o->name : "", o ? ": " : "", why);
    b->declined = true;
    return false;
}

static bool ok(builder *b, ly_status st)
{
    if (st != LY_OK && b->st == LY_OK) b->st = st;
    return st == LY_OK;
}

static bool failed(const builder *b)
{
    return b->declined || b->st != LY_OK;
}

static const char *node_name(builder *b, const xop *o, const char *what)
{
    char tag[16] = "";
    if (b->tag >= 0) snprintf(tag, sizeof tag, "d%d.", b->tag);
    snprintf(b->name, sizeof b->name, "%sxnn%d.%s%s%s", tag, (int)(o - b->d->ops), o->name,
             what ? "." : "", what ? what : "");
    return b->name;
}

static const int *to_twin(int ndim)
{
    return ndim == 4 ? TO_TWIN4 : SWAP3;
}

static const int *from_twin(int ndim)
{
    return ndim == 4 ? FROM_TWIN4 : SWAP3;
}

static bool has_twin_rank(int ndim)
{
    return ndim == 3 || ndim == 4;
}

/* Axis `axis` of a value as it is, in its twin. */
static int twin_axis(int ndim, int axis)
{
    const int *p = to_twin(ndim);
    for (int i = 0; i < ndim; i++)
        if (p[i] == axis) return i;
    return axis;
}

/* dst = src (dims `dims`, rank n) permuted: dst.shape[i] = dims[perm[i]]. */
static void permute_copy(const float *src, const int64_t *dims, int n, const int *perm, float *dst)
{
    int64_t stride[MAX_DIMS], out_dims[MAX_DIMS], idx[MAX_DIMS] = {0}, total = 1;
    for (int64_t i = n - 1, s = 1; i >= 0; i--) {
        stride[i] = s;
        s *= dims[i];
    }
    for (int i = 0; i < n; i++) {
        out_dims[i] = dims[perm[i]];
        total *= out_dims[i];
    }
    for (int64_t k = 0; k < total; k++) {
        int64_t at = 0;
        for (int i = 0; i < n; i++)
            at += idx[i] * stride[perm[i]];
        dst[k] = src[at];
        for (int i = n - 1; i >= 0; i--) {
            if (++idx[i] < out_dims[i]) break;
            idx[i] = 0;
        }
    }
}

/* A constant of value `id`'s data, its dims left-padded with ones to `ndim`,
 * then in its twin's order when `twin`. */
static ly_graph_value constant(builder *b, int id, int ndim, bool twin)
{
    const xval *v = &b->d->v[id];
    int64_t dims[MAX_DIMS] = {0}, shape[MAX_DIMS] = {0};
    int pad = ndim - v->ndim;
    for (int i = 0; i < ndim; i++)
        dims[i] = i < pad ? 1 : v->dims[i - pad];
    const int *perm = twin ? to_twin(ndim) : NULL;
    for (int i = 0; i < ndim; i++)
        shape[i] = perm ? dims[perm[i]] : dims[i];
    ly_graph_value out = LY_GRAPH_NONE;
    void *data = NULL;
    if (!ok(b, ly_graph_constant(b->g, LY_F32, ndim, shape, &out, &data))) return LY_GRAPH_NONE;
    if (perm)
        permute_copy(v->cdata, dims, ndim, perm, data);
    else
        memcpy(data, v->cdata, (size_t)v->numel * sizeof(float));
    return out;
}

static ly_graph_value permute(builder *b, ly_graph_value x, int ndim, const int *perm)
{
    ly_graph_value out = LY_GRAPH_NONE;
    char name[32];
    snprintf(name, sizeof name, "xnn.permute%d", ly_graph_node_count(b->g));
    ok(b, ly_graph_permute(b->g, name, x, ndim, perm, &out));
    return out;
}

static ly_graph_value get_as_is(builder *b, int id)
{
    const xval *v = &b->d->v[id];
    if (b->as_is[id] != LY_GRAPH_NONE) return b->as_is[id];
    if (v->kind == V_CONST)
        b->as_is[id] = constant(b, id, v->ndim, false);
    else if (b->twin[id] != LY_GRAPH_NONE)
        b->as_is[id] = permute(b, b->twin[id], v->ndim, from_twin(v->ndim));
    else
        decline(b, NULL, "a value is read before it is made");
    return b->as_is[id];
}

static ly_graph_value get_twin(builder *b, int id)
{
    const xval *v = &b->d->v[id];
    if (!has_twin_rank(v->ndim)) {
        decline(b, NULL, "a channels-first form of a value that is not 3-D or 4-D");
        return LY_GRAPH_NONE;
    }
    if (b->twin[id] != LY_GRAPH_NONE) return b->twin[id];
    if (v->kind == V_CONST)
        b->twin[id] = constant(b, id, v->ndim, true);
    else if (b->as_is[id] != LY_GRAPH_NONE)
        b->twin[id] = permute(b, b->as_is[id], v->ndim, to_twin(v->ndim));
    else
        decline(b, NULL, "a value is read before it is made");
    return b->twin[id];
}

/* Whether a value is (or will be) held as a twin rather than as it is. */
static bool prefers_twin(const builder *b, int id)
{
    return b->twin[id] != LY_GRAPH_NONE && b->as_is[id] == LY_GRAPH_NONE;
}

static void set_out(builder *b, int id, bool twin, ly_graph_value v)
{
    if (twin)
        b->twin[id] = v;
    else
        b->as_is[id] = v;
}

/* The single op after `after` that reads value `id` and is of `type`; -1. */
static int only_reader(const builder *b, int id, int after, ly_xnn_node_type type)
{
    int found = -1;
    for (size_t i = (size_t)after + 1; i < b->d->n_ops; i++) {
        const xop *o = &b->d->ops[i];
        for (int k = 0; k < o->n_in; k++)
            if (o->in[k] == id) {
                if (found >= 0 && found != (int)i) return -1;
                found = (int)i;
            }
    }
    return found >= 0 && b->d->ops[found].type == type ? found : -1;
}

/* ---- ops ---------------------------------------------------------------------- */

static bool same_padding(const builder *b, const xop *o, uint32_t top, uint32_t right,
                         uint32_t bottom, uint32_t left)
{
    if (top == bottom && left == right) return true;
    return decline((builder *)b, o, "asymmetric padding");
}

/* The output range XNNPACK fused into node `o` (none: nothing); [0, inf) is
 * the ReLU a checkpoint runs (ResNet's after its residual Add). */
static void clamp_after(builder *b, const xop *o, ly_graph_value *v)
{
    if (!o || !o->clamp || failed(b)) return;
    ly_graph_value out = LY_GRAPH_NONE;
    if (o->lo == 0 && o->hi == INFINITY) {
        if (ok(b, ly_graph_unary(b->g, LY_OP_RELU, node_name(b, o, "relu"), *v, &out))) *v = out;
        return;
    }
    ly_clamp_params p = {.min = o->lo, .max = o->hi};
    if (ok(b, ly_graph_node(b->g, LY_OP_CLAMP, node_name(b, o, "clamp"), 1, v, &p, 1, &out)))
        *v = out;
}

/* An Add of `*out` (which it alone reads) and a value made before op `index`
 * of the same dims: that value, with the Add done and *out its result; -1
 * where there is none. *range: the Add, when it carries an output range the
 * caller applies after the residual, else NULL. */
static int residual_of(builder *b, int index, int *out, const xop **range)
{
    *range = NULL;
    const xval *y = &b->d->v[*out];
    if (b->uses[*out] != 1 || y->kind != V_INTERNAL) return -1;
    int a = only_reader(b, *out, index, LY_XNN_ADD);
    const xop *ao = a >= 0 ? &b->d->ops[a] : NULL;
    if (!ao || ao->in[0] == ao->in[1]) return -1;
    int r = ao->in[0] == *out ? ao->in[1] : ao->in[0];
    const xval *rv = &b->d->v[r];
    bool made =
        rv->kind == V_EXT_IN || (rv->kind != V_CONST && rv->producer >= 0 && rv->producer < index);
    if (!made || rv->ndim != y->ndim ||
        memcmp(rv->dims, y->dims, (size_t)rv->ndim * sizeof rv->dims[0]))
        return -1;
    b->done[a] = true;
    *out = ao->out;
    if (ao->clamp) *range = ao;
    return r;
}

/* HGNetv2's LearnableAffineBlock as the exporter writes it after the
 * activation: a 1x1 depthwise convolution whose filter and bias each hold
 * one value: conv2d's post-affine. */
static void post_affine(builder *b, int index, ly_conv2d_params *p, int *out)
{
    if (b->uses[*out] != 1) return;
    int a = only_reader(b, *out, index, LY_XNN_DEPTHWISE_CONV2D);
    if (a < 0 || b->d->ops[a].clamp) return;
    const __typeof__(b->xg->xnodes[a].u.conv) *c = &b->xg->xnodes[a].u.conv;
    if (c->kernel_height != 1 || c->kernel_width != 1 || c->subsampling_height != 1 ||
        c->subsampling_width != 1 || c->padding_top || c->padding_right || c->padding_bottom ||
        c->padding_left || c->group_output_channels != 1 || c->bias_id == NONE)
        return;
    const xval *f = &b->d->v[c->filter_id], *t = &b->d->v[c->bias_id];
    for (int64_t i = 1; i < f->numel; i++)
        if (f->cdata[i] != f->cdata[0]) return;
    for (int64_t i = 1; i < t->numel; i++)
        if (t->cdata[i] != t->cdata[0]) return;
    p->post_affine = 1;
    p->post_scale = f->cdata[0];
    p->post_shift = t->cdata[0];
    b->done[a] = true;
    *out = b->d->ops[a].out;
}

static void conv(builder *b, int index, const ly_xnn_node *n)
{
    const xop *o = &b->d->ops[index];
    const __typeof__(n->u.conv) *c = &n->u.conv;
    bool dw = n->type == LY_XNN_DEPTHWISE_CONV2D;
    if (!same_padding(b, o, c->padding_top, c->padding_right, c->padding_bottom, c->padding_left))
        return;
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.stride[0] = c->subsampling_height, p.stride[1] = c->subsampling_width;
    p.padding[0] = c->padding_top, p.padding[1] = c->padding_left;
    p.dilation[0] = c->dilation_height, p.dilation[1] = c->dilation_width;
    p.groups = c->groups;
    int64_t O = (int64_t)c->groups * c->group_output_channels, gic = c->group_input_channels;
    int64_t KH = c->kernel_height, KW = c->kernel_width;
    /* weights: XNNPACK's [O, KH, KW, I/g] (depthwise [1, KH, KW, O]) as [O, I/g, KH, KW] */
    int64_t wshape[4] = {O, gic, KH, KW};
    ly_graph_value w = LY_GRAPH_NONE, bias = LY_GRAPH_NONE, residual = LY_GRAPH_NONE;
    void *wdata = NULL;
    if (!ok(b, ly_graph_constant(b->g, LY_F32, 4, wshape, &w, &wdata))) return;
    const float *f = b->d->v[c->filter_id].cdata;
    float *wd = wdata;
    for (int64_t oc = 0; oc < O; oc++)
        for (int64_t ic = 0; ic < gic; ic++)
            for (int64_t y = 0; y < KH; y++)
                for (int64_t x = 0; x < KW; x++)
                    wd[((oc * gic + ic) * KH + y) * KW + x] =
                        dw ? f[(y * KW + x) * O + oc] : f[((oc * KH + y) * KW + x) * gic + ic];
    if (c->bias_id != NONE) bias = get_as_is(b, (int)c->bias_id);
    /* what follows, folded in */
    int out = o->out;
    if (o->clamp) {
        if (o->lo == 0 && o->hi == INFINITY)
            p.activation = LY_ACT_RELU;
        else
            p.activation = -1;
    } else if (b->uses[out] == 2) {
        /* SiLU: Sigmoid(y) then Multiply(y, s) */
        int s = -1;
        for (size_t i = (size_t)index + 1; i < b->d->n_ops && s < 0; i++)
            if (b->d->ops[i].type == LY_XNN_SIGMOID && b->d->ops[i].in[0] == out) s = (int)i;
        if (s >= 0 && !b->d->ops[s].clamp && b->uses[b->d->ops[s].out] == 1) {
            int m = only_reader(b, b->d->ops[s].out, s, LY_XNN_MULTIPLY);
            const xop *mo = m >= 0 ? &b->d->ops[m] : NULL;
            if (mo && !mo->clamp &&
                ((mo->in[0] == out && mo->in[1] == b->d->ops[s].out) ||
                 (mo->in[1] == out && mo->in[0] == b->d->ops[s].out))) {
                p.activation = LY_ACT_SILU;
                b->done[s] = b->done[m] = true;
                out = mo->out;
            }
        }
    } else if (b->uses[out] == 1) {
        int l = only_reader(b, out, index, LY_XNN_LEAKY_RELU);
        int s = only_reader(b, out, index, LY_XNN_SIGMOID);
        if (l >= 0 && !b->d->ops[l].clamp) {
            p.activation = LY_ACT_LEAKY_RELU;
            p.alpha = b->d->ops[l].alpha;
            b->done[l] = true;
            out = b->d->ops[l].out;
        } else if (s >= 0 && !b->d->ops[s].clamp) {
            p.activation = LY_ACT_SIGMOID;
            b->done[s] = true;
            out = b->d->ops[s].out;
        }
    }
    bool clamp = p.activation == -1;
    if (clamp) p.activation = LY_ACT_NONE;
    if (!clamp) post_affine(b, index, &p, &out);
    const xop *range = NULL;
    int r = clamp ? -1 : residual_of(b, index, &out, &range);
    if (r >= 0) residual = get_twin(b, r);
    ly_graph_value x = get_twin(b, o->in[0]), y = LY_GRAPH_NONE;
    if (failed(b)) return;
    if (!ok(b, ly_graph_conv2d(b->g, node_name(b, o, NULL), x, w, bias, residual, &p, &y))) return;
    clamp_after(b, clamp ? o : range, &y);
    b->twin[out] = y;
}

static void pool(builder *b, const xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.pooling) *c = &n->u.pooling;
    if (!same_padding(b, o, c->padding_top, c->padding_right, c->padding_bottom, c->padding_left))
        return;
    if (c->dilation_height != 1 || c->dilation_width != 1) {
        decline(b, o, "dilated pooling");
        return;
    }
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = c->pooling_height, p.kernel[1] = c->pooling_width;
    p.stride[0] = c->stride_height, p.stride[1] = c->stride_width;
    p.padding[0] = c->padding_top, p.padding[1] = c->padding_left;
    /* XNNPACK's average leaves padding out (without padding: the same, and
     * what our providers take) */
    p.count_include_pad = c->padding_top == 0 && c->padding_left == 0;
    ly_graph_value x = get_twin(b, o->in[0]), y = LY_GRAPH_NONE;
    if (failed(b)) return;
    ly_status st = n->type == LY_XNN_MAX_POOLING_2D
                       ? ly_graph_max_pool2d(b->g, node_name(b, o, NULL), x, &p, &y)
                       : ly_graph_avg_pool2d(b->g, node_name(b, o, NULL), x, &p, &y);
    if (!ok(b, st)) return;
    clamp_after(b, o, &y);
    b->twin[o->out] = y;
}

static ly_op binary_op(ly_xnn_node_type t)
{
    switch (t) {
    case LY_XNN_ADD:
        return LY_OP_ADD;
    case LY_XNN_SUBTRACT:
        return LY_OP_SUB;
    case LY_XNN_MULTIPLY:
        return LY_OP_MUL;
    case LY_XNN_DIV:
        return LY_OP_DIV;
    case LY_XNN_MINIMUM:
        return LY_OP_MINIMUM;
    default:
        return LY_OP_MAXIMUM;
    }
}

static void binary(builder *b, const xop *o)
{
    const xval *y = &b->d->v[o->out];
    /* on twins where every operand that is not a constant or a single
     * element has one */
    bool twin = has_twin_rank(y->ndim), any_twin = false;
    for (int k = 0; k < 2; k++) {
        const xval *v = &b->d->v[o->in[k]];
        if (v->kind == V_CONST || (v->numel == 1 && v->ndim != y->ndim)) continue;
        if (v->ndim != y->ndim || b->twin[o->in[k]] == LY_GRAPH_NONE) twin = false;
        any_twin = true;
    }
    twin = twin && any_twin;
    ly_graph_value in[2], out = LY_GRAPH_NONE;
    for (int k = 0; k < 2; k++) {
        const xval *v = &b->d->v[o->in[k]];
        if (v->kind == V_CONST) {
            in[k] = constant(b, o->in[k], twin ? y->ndim : v->ndim, twin);
        } else if (twin && v->ndim != y->ndim) {
            int64_t ones[MAX_DIMS] = {1, 1, 1, 1, 1, 1};
            ly_graph_value x = get_as_is(b, o->in[k]);
            in[k] = LY_GRAPH_NONE;
            if (!failed(b))
                ok(b, ly_graph_reshape(b->g, node_name(b, o, "scalar"), x, y->ndim, ones, &in[k]));
        } else {
            in[k] = twin ? get_twin(b, o->in[k]) : get_as_is(b, o->in[k]);
        }
    }
    if (failed(b)) return;
    if (!ok(b,
            ly_graph_binary(b->g, binary_op(o->type), node_name(b, o, NULL), in[0], in[1], &out)))
        return;
    clamp_after(b, o, &out);
    set_out(b, o->out, twin, out);
}

static void unary(builder *b, const xop *o)
{
    bool twin = prefers_twin(b, o->in[0]);
    ly_graph_value x = twin ? get_twin(b, o->in[0]) : get_as_is(b, o->in[0]), y = x;
    if (failed(b)) return;
    ly_op op = LY_OP_COUNT;
    switch (o->type) {
    case LY_XNN_SIGMOID:
        op = LY_OP_SIGMOID;
        break;
    case LY_XNN_GELU:
        op = LY_OP_GELU;
        break;
    case LY_XNN_EXP:
        op = LY_OP_EXP;
        break;
    case LY_XNN_LOG:
        op = LY_OP_LOG;
        break;
    case LY_XNN_SQUARE_ROOT:
        op = LY_OP_SQRT;
        break;
    case LY_XNN_SIN:
        op = LY_OP_SIN;
        break;
    case LY_XNN_COS:
        op = LY_OP_COS;
        break;
    case LY_XNN_CLAMP:
    case LY_XNN_COPY:
    case LY_XNN_CONVERT:
        break; /* the clamp below, or nothing */
    default:
        decline(b, o, "no op of ours computes it");
        return;
    }
    if (op != LY_OP_COUNT && !ok(b, ly_graph_unary(b->g, op, node_name(b, o, NULL), x, &y))) return;
    clamp_after(b, o, &y);
    set_out(b, o->out, twin, y);
}

static void transpose(builder *b, const xop *o)
{
    int in = o->in[0], out = o->out, nd = b->d->v[in].ndim;
    if (nd == 4 && !memcmp(o->perm, FROM_TWIN4, sizeof FROM_TWIN4)) {
        b->twin[out] = get_as_is(b, in);
    } else if (nd == 4 && !memcmp(o->perm, TO_TWIN4, sizeof TO_TWIN4)) {
        b->as_is[out] = get_twin(b, in);
    } else if (nd == 3 && !memcmp(o->perm, SWAP3, sizeof SWAP3)) {
        if (prefers_twin(b, in))
            b->as_is[out] = get_twin(b, in);
        else
            b->twin[out] = get_as_is(b, in);
    } else {
        ly_graph_value x = get_as_is(b, in);
        if (!failed(b)) b->as_is[out] = permute(b, x, nd, o->perm);
    }
}

static void slice(builder *b, const xop *o)
{
    int in = o->in[0];
    const xval *x = &b->d->v[in], *y = &b->d->v[o->out];
    bool twin = prefers_twin(b, in);
    ly_graph_value v = twin ? get_twin(b, in) : get_as_is(b, in);
    for (int i = 0; i < x->ndim && !failed(b); i++) {
        int axis = twin ? twin_axis(x->ndim, i) : i;
        if (o->offsets[i] == 0 && y->dims[i] == x->dims[i]) continue;
        ly_graph_value cut = LY_GRAPH_NONE;
        if (ok(b, ly_graph_slice(b->g, node_name(b, o, NULL), v, axis, o->offsets[i], y->dims[i],
                                 &cut)))
            v = cut;
    }
    if (!failed(b)) set_out(b, o->out, twin, v);
}

static void concat(builder *b, const xop *o)
{
    const xval *y = &b->d->v[o->out];
    bool twin = has_twin_rank(y->ndim);
    for (int k = 0; k < o->n_in; k++)
        if (!prefers_twin(b, o->in[k])) twin = false;
    ly_graph_value in[5], out = LY_GRAPH_NONE;
    for (int k = 0; k < o->n_in; k++)
        in[k] = twin ? get_twin(b, o->in[k]) : get_as_is(b, o->in[k]);
    if (failed(b)) return;
    int axis = twin ? twin_axis(y->ndim, o->axis) : o->axis;
    if (ok(b, ly_graph_concat(b->g, node_name(b, o, NULL), o->n_in, in, axis, &out)))
        set_out(b, o->out, twin, out);
}

static void binary(builder *b, const xop *o);

/* Attention as the exporter writes it out: q scaled (ops/sdpa/export.c: a
 * FullyConnected with a diagonal filter; a model's own manual form, such as
 * ViT's: a Multiply by one constant), BatchMatrixMultiply with kᵀ (a static
 * transpose), Softmax, BatchMatrixMultiply with v: our sdpa op, heads first
 * (its providers are byte-identical to that manual form). */
static bool sdpa(builder *b, int index)
{
    const xop *f = &b->d->ops[index], *ops = b->d->ops;
    const xval *q = NULL;
    float scale = 0;
    if (f->clamp || b->uses[f->out] != 1) return false;
    if (f->type == LY_XNN_FULLY_CONNECTED) {
        const __typeof__(b->xg->xnodes[index].u.fc) *c = &b->xg->xnodes[index].u.fc;
        const xval *w = &b->d->v[c->filter_id];
        q = &b->d->v[f->in[0]];
        if (c->bias_id != NONE || c->flags || w->ndim != 2 || w->dims[0] != w->dims[1])
            return false;
        int64_t d = w->dims[0];
        scale = w->cdata[0];
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < d; j++)
                if (w->cdata[i * d + j] != (i == j ? scale : 0.0f)) return false;
    } else {
        const xval *a = &b->d->v[f->in[0]], *c = &b->d->v[f->in[1]];
        if (a->kind == V_CONST) {
            const xval *t = a;
            a = c, c = t;
        }
        if (c->numel != 1) return false;
        q = a;
        /* a scale the program passes in at run time: the Multiply stays, and
         * sdpa scales by 1 (exact) */
        scale = c->kind == V_CONST ? c->cdata[0] : 1.0f;
        if (c->kind != V_CONST) q = &b->d->v[f->out];
    }
    if (q->ndim != 4) return false;
    int qid = (int)(q - b->d->v);
    int b1 = only_reader(b, f->out, index, LY_XNN_BATCH_MATRIX_MULTIPLY);
    if (b1 < 0 || ops[b1].in[0] != f->out || ops[b1].clamp || b->uses[ops[b1].out] != 1)
        return false;
    int kt = ops[b1].in[1], t = b->d->v[kt].producer;
    static const int swap_last[4] = {0, 1, 3, 2};
    if (t < 0 || ops[t].type != LY_XNN_STATIC_TRANSPOSE || b->uses[kt] != 1 ||
        memcmp(ops[t].perm, swap_last, sizeof swap_last))
        return false;
    int s = only_reader(b, ops[b1].out, b1, LY_XNN_SOFTMAX);
    if (s < 0 || ops[s].clamp || b->uses[ops[s].out] != 1) return false;
    int b2 = only_reader(b, ops[s].out, s, LY_XNN_BATCH_MATRIX_MULTIPLY);
    if (b2 < 0 || ops[b2].in[0] != ops[s].out || ops[b2].clamp) return false;
    if (qid == f->out) binary(b, f);
    ly_graph_value in[3] = {get_as_is(b, qid), get_as_is(b, ops[t].in[0]),
                            get_as_is(b, ops[b2].in[1])},
                   out = LY_GRAPH_NONE;
    ly_sdpa_params p = {.scale = scale, .layout = LY_SDPA_BHND};
    if (!failed(b) &&
        ok(b, ly_graph_node(b->g, LY_OP_SDPA, node_name(b, f, "sdpa"), 3, in, &p, 1, &out))) {
        b->as_is[ops[b2].out] = out;
        b->done[t] = b->done[b1] = b->done[s] = b->done[b2] = true;
    }
    return true;
}

static void fully_connected(builder *b, int index, const ly_xnn_node *n)
{
    const xop *o = &b->d->ops[index];
    if (sdpa(b, index)) return;
    const __typeof__(n->u.fc) *c = &n->u.fc;
    const xval *f = &b->d->v[c->filter_id];
    bool transposed = c->flags & 1u;
    int64_t out_c = transposed ? f->dims[1] : f->dims[0],
            in_c = transposed ? f->dims[0] : f->dims[1];
    int64_t wshape[2] = {out_c, in_c};
    ly_graph_value w = LY_GRAPH_NONE, bias = LY_GRAPH_NONE, y = LY_GRAPH_NONE;
    void *wdata = NULL;
    if (!ok(b, ly_graph_constant(b->g, LY_F32, 2, wshape, &w, &wdata))) return;
    if (transposed)
        permute_copy(f->cdata, f->dims, 2, SWAP2, wdata);
    else
        memcpy(wdata, f->cdata, (size_t)f->numel * sizeof(float));
    if (c->bias_id != NONE) bias = get_as_is(b, (int)c->bias_id);
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    int out = o->out, r = -1, g = -1;
    const xop *range = NULL;
    if (!o->clamp) {
        if (b->uses[out] == 1 && (g = only_reader(b, out, index, LY_XNN_GELU)) >= 0 &&
            !b->d->ops[g].clamp) {
            p.activation = LY_ACT_GELU;
            b->done[g] = true;
            out = b->d->ops[g].out;
        }
        r = residual_of(b, index, &out, &range);
    }
    ly_graph_value x = get_as_is(b, o->in[0]);
    ly_graph_value in[4] = {x, w, bias, r >= 0 ? get_as_is(b, r) : LY_GRAPH_NONE};
    if (failed(b)) return;
    if (!ok(b, ly_graph_node(b->g, LY_OP_LINEAR, node_name(b, o, NULL), r >= 0 ? 4 : 3, in, &p, 1,
                             &y)))
        return;
    clamp_after(b, o, &y);
    clamp_after(b, range, &y);
    b->as_is[out] = y;
}

/* [N, H, W, C] <-> [N, H * W, C]: the same reshape of the twins, [N, C, H, W]
 * <-> [N, C, H * W], a view. */
static bool reshape_twin(builder *b, const xop *o)
{
    const xval *x = &b->d->v[o->in[0]], *y = &b->d->v[o->out];
    if (!prefers_twin(b, o->in[0]) || !has_twin_rank(y->ndim) || x->ndim + y->ndim != 7 ||
        x->dims[0] != y->dims[0] || x->last != y->last)
        return false;
    const int *perm = to_twin(y->ndim);
    int64_t shape[4];
    for (int i = 0; i < y->ndim; i++)
        shape[i] = y->dims[perm[i]];
    ly_graph_value out = LY_GRAPH_NONE;
    if (ok(b,
           ly_graph_reshape(b->g, node_name(b, o, NULL), b->twin[o->in[0]], y->ndim, shape, &out)))
        b->twin[o->out] = out;
    return true;
}

/* The exporter's distribution focal loss (ops/nn/export.c): Reshape [N, A, 4R]
 * -> [N, 4A, R], Softmax, FullyConnected with the row 0..R-1, Reshape [N, A,
 * 4]: our dfl op on the twins, [N, 4R, A] -> [N, 4, A]. */
static bool dfl(builder *b, int index)
{
    const xop *r1 = &b->d->ops[index];
    const xval *x = &b->d->v[r1->in[0]], *y = &b->d->v[r1->out];
    if (x->ndim != 3 || y->ndim != 3 || x->dims[2] % 4 != 0 || b->uses[r1->out] != 1) return false;
    int64_t A = x->dims[1], R = x->dims[2] / 4;
    if (y->dims[1] != 4 * A || y->dims[2] != R) return false;
    int s = only_reader(b, r1->out, index, LY_XNN_SOFTMAX);
    if (s < 0 || b->d->ops[s].clamp || b->uses[b->d->ops[s].out] != 1) return false;
    int f = only_reader(b, b->d->ops[s].out, s, LY_XNN_FULLY_CONNECTED);
    if (f < 0 || b->d->ops[f].clamp || b->uses[b->d->ops[f].out] != 1) return false;
    const __typeof__(b->xg->xnodes[f].u.fc) *fc = &b->xg->xnodes[f].u.fc;
    const xval *w = &b->d->v[fc->filter_id];
    if (fc->bias_id != NONE || fc->flags || w->numel != R || w->dims[0] != 1) return false;
    for (int64_t i = 0; i < R; i++)
        if (w->cdata[i] != (float)i) return false;
    int r2 = only_reader(b, b->d->ops[f].out, f, LY_XNN_STATIC_RESHAPE);
    const xval *z = r2 >= 0 ? &b->d->v[b->d->ops[r2].out] : NULL;
    if (!z || z->ndim != 3 || z->dims[1] != A || z->dims[2] != 4) return false;
    ly_graph_value in = get_twin(b, r1->in[0]), out = LY_GRAPH_NONE;
    if (!failed(b) && ok(b, ly_graph_unary(b->g, LY_OP_DFL, node_name(b, r1, "dfl"), in, &out))) {
        b->twin[b->d->ops[r2].out] = out;
        b->done[s] = b->done[f] = b->done[r2] = true;
    }
    return true;
}

/* RMSNorm as the exporter writes it (ops/norm/export.c): Square, the mean and
 * eps as one FullyConnected (a filter of 1/C, a bias of eps), reciprocal
 * square root, Multiply by x, then (optionally) by the scale: our rms_norm. */
static bool rms_norm(builder *b, int index)
{
    const xop *ops = b->d->ops, *sq = &ops[index];
    int x = sq->in[0];
    const xval *xv = &b->d->v[x];
    if (sq->clamp || b->uses[sq->out] != 1 || xv->ndim < 1) return false;
    int f = only_reader(b, sq->out, index, LY_XNN_FULLY_CONNECTED);
    if (f < 0 || ops[f].clamp || b->uses[ops[f].out] != 1) return false;
    const __typeof__(b->xg->xnodes[f].u.fc) *c = &b->xg->xnodes[f].u.fc;
    const xval *w = &b->d->v[c->filter_id];
    if (c->flags || c->bias_id == NONE || w->numel != xv->last || w->dims[0] != 1) return false;
    for (int64_t i = 1; i < w->numel; i++)
        if (w->cdata[i] != w->cdata[0]) return false;
    if (w->cdata[0] != 1.0f / (float)xv->last) return false;
    float eps = b->d->v[c->bias_id].cdata[0];
    int r = only_reader(b, ops[f].out, f, LY_XNN_RECIPROCAL_SQUARE_ROOT);
    if (r < 0 || ops[r].clamp || b->uses[ops[r].out] != 1) return false;
    int m = only_reader(b, ops[r].out, r, LY_XNN_MULTIPLY);
    if (m < 0 || ops[m].clamp) return false;
    if (!((ops[m].in[0] == x && ops[m].in[1] == ops[r].out) ||
          (ops[m].in[1] == x && ops[m].in[0] == ops[r].out)))
        return false;
    int out = ops[m].out, scale = -1, m2 = -1;
    if (b->uses[out] == 1 && b->d->v[out].kind == V_INTERNAL &&
        (m2 = only_reader(b, out, m, LY_XNN_MULTIPLY)) >= 0 && !ops[m2].clamp) {
        int other = ops[m2].in[0] == out ? ops[m2].in[1] : ops[m2].in[0];
        const xval *sv = &b->d->v[other];
        if (other != out && sv->ndim == 1 && sv->numel == xv->last) scale = other;
    }
    ly_graph_value in[2] = {get_as_is(b, x), scale >= 0 ? get_as_is(b, scale) : LY_GRAPH_NONE},
                   y = LY_GRAPH_NONE;
    ly_norm_params p = {.eps = eps};
    if (!failed(b) && ok(b, ly_graph_node(b->g, LY_OP_RMS_NORM, node_name(b, sq, "rms_norm"),
                                          scale >= 0 ? 2 : 1, in, &p, 1, &y))) {
        b->done[f] = b->done[r] = b->done[m] = true;
        if (scale >= 0) {
            b->done[m2] = true;
            out = ops[m2].out;
        }
        b->as_is[out] = y;
    }
    return true;
}

static void op(builder *b, int index, const ly_xnn_node *n)
{
    const xop *o = &b->d->ops[index];
    const xval *y = &b->d->v[o->out];
    switch (o->type) {
    case LY_XNN_CONV2D:
    case LY_XNN_DEPTHWISE_CONV2D:
        conv(b, index, n);
        return;
    case LY_XNN_MAX_POOLING_2D:
    case LY_XNN_AVG_POOLING_2D:
        pool(b, o, n);
        return;
    case LY_XNN_STATIC_RESIZE_BILINEAR_2D: {
        ly_resize_bilinear2d_params p = LY_RESIZE_BILINEAR2D_DEFAULTS;
        p.size[0] = o->oh, p.size[1] = o->ow;
        p.align_corners = (o->binop & 0x8) != 0;      /* XNN_FLAG_ALIGN_CORNERS */
        p.half_pixel_centers = (o->binop & 0x4) == 0; /* XNN_FLAG_TENSORFLOW_LEGACY_MODE */
        ly_graph_value x = get_twin(b, o->in[0]), out = LY_GRAPH_NONE;
        if (!failed(b) && ok(b, ly_graph_resize_bilinear2d(b->g, node_name(b, o, NULL), x, o->oh,
                                                           o->ow, &p, &out)))
            b->twin[o->out] = out;
        return;
    }
    case LY_XNN_FULLY_CONNECTED:
        fully_connected(b, index, n);
        return;
    case LY_XNN_SOFTMAX: {
        bool twin = prefers_twin(b, o->in[0]);
        ly_graph_value x = twin ? get_twin(b, o->in[0]) : get_as_is(b, o->in[0]),
                       out = LY_GRAPH_NONE;
        ly_axis_params p = {.axis = twin ? twin_axis(y->ndim, y->ndim - 1) : y->ndim - 1};
        if (!failed(b) &&
            ok(b, ly_graph_node(b->g, LY_OP_SOFTMAX, node_name(b, o, NULL), 1, &x, &p, 1, &out)))
            set_out(b, o->out, twin, out);
        return;
    }
    case LY_XNN_BATCH_MATRIX_MULTIPLY: {
        ly_graph_value in[2] = {get_as_is(b, o->in[0]), get_as_is(b, o->in[1])},
                       out = LY_GRAPH_NONE;
        ly_matmul_params p = LY_MATMUL_DEFAULTS;
        if (!failed(b) &&
            ok(b, ly_graph_node(b->g, LY_OP_MATMUL, node_name(b, o, NULL), 2, in, &p, 1, &out)))
            b->as_is[o->out] = out;
        return;
    }
    case LY_XNN_STATIC_TRANSPOSE:
        transpose(b, o);
        return;
    case LY_XNN_STATIC_RESHAPE: {
        if (dfl(b, index) || reshape_twin(b, o)) return;
        ly_graph_value x = get_as_is(b, o->in[0]), out = LY_GRAPH_NONE;
        if (!failed(b) &&
            ok(b, ly_graph_reshape(b->g, node_name(b, o, NULL), x, y->ndim, y->dims, &out)))
            b->as_is[o->out] = out;
        return;
    }
    case LY_XNN_STATIC_SLICE:
        slice(b, o);
        return;
    case LY_XNN_SQUARE:
        if (!rms_norm(b, index)) decline(b, o, "no op of ours computes it");
        return;
    default:
        break;
    }
    switch (o->kind) {
    case K_BINARY:
        if (o->type == LY_XNN_MULTIPLY && sdpa(b, index)) return;
        binary(b, o);
        return;
    case K_UNARY:
    case K_XNN: /* sigmoid, leaky ReLU left alone */
        unary(b, o);
        return;
    case K_CONCAT:
        concat(b, o);
        return;
    default:
        decline(b, o, "no op of ours computes it");
        return;
    }
}

/* The delegate's nodes into b->g. Its externals become the graph's inputs
 * and outputs (ext_input/ext_output: their ids), or, where b->bound is set,
 * read the values it gives and leave what they hold in b->produced. */
static ly_status build(builder *b, int *ext_input, int *ext_output, int *n_inputs, int *n_outputs)
{
    ly_et_xnnpack *d = b->d;
    for (size_t i = 0; i < d->n_ops; i++)
        for (int k = 0; k < d->ops[i].n_in; k++)
            b->uses[d->ops[i].in[k]]++;
    char name[32];
    for (uint32_t e = 0; e < d->num_externs; e++) {
        int id = d->ext_value[e];
        if (d->v[id].kind == V_EXT_OUT) {
            b->uses[id]++;
            continue;
        }
        if (b->bound) {
            b->as_is[id] = b->bound[e];
            continue;
        }
        snprintf(name, sizeof name, "external%u", e);
        if (!ok(b, ly_graph_input(b->g, name, LY_F32, d->v[id].ndim, &b->as_is[id]))) return b->st;
        ext_input[(*n_inputs)++] = (int)e;
    }
    for (size_t i = 0; i < d->n_ops && !failed(b); i++)
        if (!b->done[i]) op(b, (int)i, &b->xg->xnodes[i]);
    for (uint32_t e = 0; e < d->num_externs && !failed(b); e++) {
        int id = d->ext_value[e];
        if (d->v[id].kind != V_EXT_OUT) continue;
        ly_graph_value v = get_as_is(b, id);
        if (failed(b)) break;
        if (b->produced) {
            b->produced[e] = v;
            continue;
        }
        snprintf(name, sizeof name, "external%u", e);
        if (ok(b, ly_graph_output(b->g, v, name))) ext_output[(*n_outputs)++] = (int)e;
    }
    return b->st;
}

static ly_status builder_init(builder *b, ly_et_xnnpack *d, const ly_xnn_graph *xg)
{
    *b = (builder){.d = d, .xg = xg, .tag = -1};
    b->as_is = malloc((d->n_v + 1) * sizeof *b->as_is);
    b->twin = malloc((d->n_v + 1) * sizeof *b->twin);
    b->uses = calloc(d->n_v + 1, sizeof *b->uses);
    b->done = calloc(d->n_ops + 1, sizeof *b->done);
    if (!b->as_is || !b->twin || !b->uses || !b->done)
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    for (size_t i = 0; i < d->n_v; i++)
        b->as_is[i] = b->twin[i] = LY_GRAPH_NONE;
    return LY_OK;
}

static void builder_free(builder *b)
{
    free(b->as_is);
    free(b->twin);
    free(b->uses);
    free(b->done);
}

ly_status ly_xd_graph_build(ly_et_xnnpack *d, const ly_xnn_graph *xg)
{
    builder b;
    ly_status st = builder_init(&b, d, xg);
    d->graph_inputs = calloc(d->num_externs + 1, sizeof *d->graph_inputs);
    d->graph_outputs = calloc(d->num_externs + 1, sizeof *d->graph_outputs);
    d->graph_input_views = calloc(d->num_externs + 1, sizeof *d->graph_input_views);
    if (st == LY_OK && (!d->graph_inputs || !d->graph_outputs || !d->graph_input_views))
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    if (st == LY_OK) st = ly_graph_create(&b.g);
    if (st == LY_OK)
        st = build(&b, d->graph_inputs, d->graph_outputs, &d->n_graph_inputs, &d->n_graph_outputs);
    if (st == LY_OK && b.declined) {
        ly_log(LY_LOG_DEBUG, "%s: the XNNPACK delegate runs its operators (%s)", d->what, b.why);
        ly_graph_free(b.g);
        b.g = NULL;
    }
    if (st == LY_OK && b.g) st = ly_graph_ctx_create(b.g, &d->graph_ctx);
    if (st == LY_OK && b.g) {
        d->graph = b.g;
        ly_log(LY_LOG_DEBUG, "%s: the XNNPACK delegate runs as a graph of %d nodes", d->what,
               ly_graph_node_count(b.g));
    } else if (b.g) {
        ly_graph_free(b.g);
    }
    builder_free(&b);
    return st;
}

ly_status ly_xd_graph_append(ly_et_xnnpack *d, ly_graph *g, int tag, const ly_graph_value *bound,
                             ly_graph_value *produced)
{
    if (!d->xg) return ly_set_error(LY_E_DECLINED, "%s: the delegate is finished", d->what);
    builder b;
    ly_status st = builder_init(&b, d, d->xg);
    b.g = g;
    b.tag = tag;
    b.bound = bound;
    b.produced = produced;
    if (st == LY_OK) st = build(&b, NULL, NULL, NULL, NULL);
    if (st == LY_OK && b.declined) /* it built alone: a wrong binding */
        st = ly_set_error(LY_E_DECLINED, "%s: %s", d->what, b.why);
    builder_free(&b);
    return st;
}

ly_status ly_xd_graph_execute(ly_et_xnnpack *d, ly_tensor *const *args, int threads)
{
    ly_tensor *inputs = d->graph_input_views;
    for (int i = 0; i < d->n_graph_inputs; i++) {
        const xval *v = &d->v[d->ext_value[d->graph_inputs[i]]];
        ly_tensor *t = &inputs[i];
        memset(t, 0, sizeof *t);
        t->data = args[d->graph_inputs[i]]->data;
        t->dtype = LY_F32;
        t->ndim = v->ndim;
        memcpy(t->shape, v->dims, (size_t)v->ndim * sizeof *t->shape);
    }
    ly_status st = ly_graph_run(d->graph_ctx, d->n_graph_inputs, inputs, threads);
    for (int i = 0; st == LY_OK && i < d->n_graph_outputs; i++) {
        ly_tensor view;
        st = ly_graph_get_output(d->graph_ctx, i, &view, NULL);
        const xval *v = &d->v[d->ext_value[d->graph_outputs[i]]];
        if (st == LY_OK && ly_tensor_numel(&view) != v->numel)
            st = ly_set_error(LY_E_INTERNAL, "%s: output %d has %lld elements, %lld expected",
                              d->what, i, (long long)ly_tensor_numel(&view), (long long)v->numel);
        if (st == LY_OK)
            memcpy(args[d->graph_outputs[i]]->data, view.data, (size_t)v->numel * sizeof(float));
    }
    return st;
}
