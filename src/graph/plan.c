/* SPDX-License-Identifier: MIT */
/*
 * Plans (graph.h): shapes, implementations and their states, views, layouts
 * and the arena, made once per (input shapes, threads, selection, registry
 * generation, capture) and shared by every context that runs them.
 */
#include "graph/graph_internal.h"

#include "core/core.h"
#include "core/layout.h"
#include "ops/ops_internal.h"
#include "ops/shape/shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define CONSTANT_PAGE 4096

static size_t align_up(size_t n)
{
    return (n + LY_GRAPH_ALIGN - 1) / LY_GRAPH_ALIGN * LY_GRAPH_ALIGN;
}

static size_t bytes_of(const ly_tensor *t)
{
    return (size_t)ly_tensor_numel(t) * ly_dtype_size(t->dtype);
}

ly_graph_value ly_plan_root(const plan *p, ly_graph_value v, int64_t *offset)
{
    int64_t off = 0;
    while (p->values[v].parent != LY_GRAPH_NONE) {
        off += p->values[v].offset;
        v = p->values[v].parent;
    }
    if (offset) *offset = off;
    return v;
}

static bool is_view_ancestor(const plan *p, ly_graph_value ancestor, ly_graph_value v)
{
    for (; v != LY_GRAPH_NONE; v = p->values[v].parent)
        if (v == ancestor) return true;
    return false;
}

/* Prefix the current error with the node's name. */
static ly_status node_error(const gnode *n, ly_status st)
{
    char msg[640];
    snprintf(msg, sizeof msg, "%s", ly_last_error());
    return ly_set_error(st, "%s: %s", n->name, msg);
}

/* A call of node `n` over the plan's shapes (data only for constants). */
static void node_call(ly_graph *g, const plan *p, const gnode *n,
                      ly_tensor in[LY_KERNEL_MAX_INPUTS], ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                      ly_kernel_call *call)
{
    ly_kernel_call_init(call);
    for (int i = 0; i < n->n_in; i++) {
        if (n->in[i] == LY_GRAPH_NONE) continue;
        in[i] = p->values[n->in[i]].shape;
        const gvalue *v = &g->values[n->in[i]];
        in[i].data = v->kind == LY_GRAPH_VALUE_CONSTANT ? v->constant.data : NULL;
        call->in[i] = &in[i];
    }
    for (int k = 0; k < n->n_out; k++) {
        out[k] = p->values[n->out[k]].shape;
        call->out[k] = &out[k];
    }
    int32_t span = p->spans ? p->nodes[n - g->nodes].span : -1;
    if (span >= 0 && p->spans[span].rows) { /* what each slab's call sees */
        const pspan *s = &p->spans[span];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] != LY_GRAPH_NONE && ly_plan_span_slices(g, p, span, n->in[i]))
                in[i].shape[0] = in[i].shape[0] / s->items * s->rows;
        for (int k = 0; k < n->n_out; k++)
            if (ly_plan_span_slices(g, p, span, n->out[k]))
                out[k].shape[0] = out[k].shape[0] / s->items * s->rows;
    }
    call->params = n->params;
    call->threads = p->threads;
}

/* ---- shapes ------------------------------------------------------------------------- */

static ly_status infer_shapes(ly_graph *g, plan *p, const ly_tensor *inputs)
{
    for (size_t i = 0; i < g->n_values; i++) {
        const gvalue *v = &g->values[i];
        pvalue *pv = &p->values[i];
        pv->parent = LY_GRAPH_NONE;
        pv->buffer = -1;
        if (v->kind == LY_GRAPH_VALUE_INPUT) {
            pv->shape = inputs[v->input_index];
            pv->shape.data = NULL;
        } else if (v->kind == LY_GRAPH_VALUE_CONSTANT) {
            pv->shape = v->constant;
            pv->shape.data = NULL;
        }
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        gnode *n = &g->nodes[i];
        ly_tensor in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
        ly_kernel_call call;
        node_call(g, p, n, in, out, &call);
        ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
        int n_out = 0;
        memset(shapes, 0, sizeof shapes);
        ly_status st = ly_op_def_of(n->op)->contract(&call, shapes, &n_out);
        if (st != LY_OK) return node_error(n, st);
        if (n_out != n->n_out)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %s has %d output%s, the node %d",
                                n->name, ly_op_name(n->op), n_out, n_out == 1 ? "" : "s", n->n_out);
        for (int k = 0; k < n_out; k++) {
            p->values[n->out[k]].shape = shapes[k];
            p->values[n->out[k]].shape.data = NULL;
            /* The same on every plan: written once, so concurrent readers see no race. */
            if (g->values[n->out[k]].dtype != shapes[k].dtype)
                g->values[n->out[k]].dtype = shapes[k].dtype;
        }
    }
    return LY_OK;
}

/* ---- views -------------------------------------------------------------------------- */

static int64_t outer_of(const ly_tensor *t, int64_t axis)
{
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; d++)
        outer *= t->shape[d];
    return outer;
}

static int64_t inner_bytes(const ly_tensor *t, int64_t axis)
{
    int64_t inner = (int64_t)ly_dtype_size(t->dtype);
    for (int64_t d = axis + 1; d < t->ndim; d++)
        inner *= t->shape[d];
    return inner;
}

/* Which nodes are views, which concats join in place and which parts they
 * place; offsets of views. */
static void decide_views(ly_graph *g, plan *p)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        pvalue *out = &p->values[n->out[0]];
        pn->mode = NODE_KERNEL;
        if (n->op == LY_OP_RESHAPE) {
            pn->mode = NODE_VIEW;
            out->parent = n->in[0];
            out->offset = 0;
        } else if (n->op == LY_OP_SLICE) {
            const ly_slice_params *sp = n->params;
            const ly_tensor *x = &p->values[n->in[0]].shape;
            int64_t axis = sp->axis < 0 ? sp->axis + x->ndim : sp->axis, start, count;
            ly_slice_resolve(sp, x->shape[axis], &start, &count);
            if ((sp->step == 1 || count <= 1) && outer_of(x, axis) == 1) {
                pn->mode = NODE_VIEW;
                out->parent = n->in[0];
                out->offset = start * inner_bytes(x, axis);
            } else if (sp->step == 1 || count <= 1) {
                pn->mode = NODE_COPY;
            }
        } else if (n->op == LY_OP_CONCAT) {
            const ly_tensor *y = &out->shape;
            int64_t axis = ((const ly_concat_params *)n->params)->axis;
            if (axis < 0) axis += y->ndim;
            if (outer_of(y, axis) == 1) {
                pn->mode = NODE_JOIN;
                int64_t offset = 0;
                for (int k = 0; k < n->n_in; k++) {
                    pn->part_offset[k] = offset;
                    offset += (int64_t)bytes_of(&p->values[n->in[k]].shape);
                }
            } else {
                pn->mode = NODE_COPY;
            }
        }
    }
    /* Which parts of a join are written in place: a buffer of its own, written
     * by a node, in no other join, given once, and not the output's own storage. */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_JOIN) continue;
        bool all_placed = true;
        for (int k = 0; k < n->n_in; k++) {
            ly_graph_value in = n->in[k];
            pvalue *v = &p->values[in];
            bool repeated = false;
            for (int j = 0; j < k; j++)
                repeated |= n->in[j] == in;
            bool placeable = g->values[in].kind == LY_GRAPH_VALUE_NODE &&
                             v->parent == LY_GRAPH_NONE && !v->in_join && !repeated &&
                             !is_view_ancestor(p, n->out[0], in) &&
                             !is_view_ancestor(p, in, n->out[0]);
            pn->copy_in[k] = !placeable;
            all_placed &= placeable;
            if (placeable) {
                v->in_join = true;
                v->parent = n->out[0];
                v->offset = pn->part_offset[k];
            }
        }
        if (all_placed) pn->mode = NODE_VIEW;
    }
}

/* ---- spans run in slabs (ly_graph_item_span) --------------------------------------------- */

enum {
    SLAB_BYTES = 4 << 20, /* a slab's intermediates (their sum) a thread */
    WHOLE_IN_CACHE = 8    /* slab budgets a span's intermediates may take to run whole */
};

static size_t slab_budget(void)
{
    const char *env = getenv("LIBREYOLO_SLAB_BYTES");
    if (!env || !*env) return SLAB_BYTES;
    char *end;
    unsigned long long v = strtoull(env, &end, 10);
    if (*end || *env == '-') {
        ly_warn_once("LIBREYOLO_SLAB_BYTES",
                     "LIBREYOLO_SLAB_BYTES='%.40s' is not a byte count (a whole number, 0 to "
                     "turn slabs off): using %d",
                     env, SLAB_BYTES);
        return SLAB_BYTES;
    }
    return (size_t)v;
}

static bool listed(const ly_graph_value *values, int n, ly_graph_value v)
{
    for (int i = 0; i < n; i++)
        if (values[i] == v) return true;
    return false;
}

/* Operand k of node n (inputs, then outputs). */
static ly_graph_value operand(const gnode *n, int k)
{
    return k < n->n_in ? n->in[k] : n->out[k - n->n_in];
}

/* Whether an operand is read or written item by item (before any slab is planned). */
static bool by_items(const ly_graph *g, const gspan *s, ly_graph_value v)
{
    if (v == LY_GRAPH_NONE) return false;
    if (g->values[v].kind == LY_GRAPH_VALUE_CONSTANT) return listed(s->sliced, s->n_sliced, v);
    return !listed(s->whole, s->n_whole, v);
}

bool ly_plan_span_slices(const ly_graph *g, const plan *p, int32_t span, ly_graph_value v)
{
    return by_items(g, &g->spans[span], v) && (g->values[v].kind == LY_GRAPH_VALUE_CONSTANT ||
                                               !p->values[ly_plan_root(p, v, NULL)].slab);
}

/* Whether the span's operands read by items lead with multiples of the
 * smallest of their extents (*items), views inside it being reshapes of
 * whole rows, the values read whole read by kernels only. */
static bool span_fits(const ly_graph *g, const plan *p, const gspan *s, int64_t *items)
{
    int64_t e = -1;
    if ((size_t)s->end > g->n_nodes) return false;
    for (int32_t i = s->first; i < s->end; i++) {
        const gnode *n = &g->nodes[i];
        const pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL && !(pn->mode == NODE_VIEW && n->op == LY_OP_RESHAPE))
            return false;
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            ly_graph_value v = operand(n, k);
            if (v != LY_GRAPH_NONE && !by_items(g, s, v) && pn->mode != NODE_KERNEL &&
                g->values[v].kind != LY_GRAPH_VALUE_CONSTANT)
                return false;
            if (!by_items(g, s, v)) continue;
            const ly_tensor *t = &p->values[v].shape;
            if (t->ndim < 1 || t->shape[0] < 1) return false;
            if (e < 0 || t->shape[0] < e) e = t->shape[0];
            for (ly_graph_value x = v; p->values[x].parent != LY_GRAPH_NONE;
                 x = p->values[x].parent)
                if (p->values[x].in_join || g->values[x].kind != LY_GRAPH_VALUE_NODE ||
                    g->nodes[g->values[x].producer].op != LY_OP_RESHAPE)
                    return false;
        }
    }
    for (int32_t i = s->first; i < s->end && e > 1; i++)
        for (int k = 0; k < g->nodes[i].n_in + g->nodes[i].n_out; k++) {
            ly_graph_value v = operand(&g->nodes[i], k);
            if (by_items(g, s, v) && p->values[v].shape.shape[0] % e) return false;
        }
    *items = e;
    return e > 1;
}

/* Each span's slab: the most items whose intermediates fit the budget, a
 * divisor of the extent (every slab the same shapes, so one prepared state
 * serves them all); the span's own values planned one slab large. */
static ly_status plan_spans(ly_graph *g, plan *p)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        p->nodes[i].span = -1;
    if (!g->n_spans) return LY_OK;
    p->spans = calloc(g->n_spans, sizeof *p->spans);
    bool *outside = calloc(g->n_values ? g->n_values : 1, sizeof *outside);
    if (!p->spans || !outside) {
        free(outside);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    }
    size_t budget = slab_budget() * (size_t)p->threads; /* each thread its share in its own cache */
    for (size_t si = 0; si < g->n_spans && budget && !p->capturing; si++) {
        const gspan *s = &g->spans[si];
        int64_t items;
        if (!span_fits(g, p, s, &items)) continue;
        /* roots read by any node outside the span, or outputs: whole values */
        memset(outside, 0, g->n_values * sizeof *outside);
        for (size_t i = 0; i < g->n_nodes; i++) {
            if ((int32_t)i >= s->first && (int32_t)i < s->end) continue;
            const gnode *n = &g->nodes[i];
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] != LY_GRAPH_NONE) outside[ly_plan_root(p, n->in[k], NULL)] = true;
        }
        for (size_t i = 0; i < g->n_outputs; i++)
            outside[ly_plan_root(p, g->outputs[i], NULL)] = true;
        size_t item_bytes = 0;
        for (int32_t i = s->first; i < s->end; i++) {
            const gnode *n = &g->nodes[i];
            if (p->nodes[i].mode != NODE_KERNEL) continue;
            for (int k = 0; k < n->n_out; k++)
                if (!outside[n->out[k]])
                    item_bytes += bytes_of(&p->values[n->out[k]].shape) / (size_t)items;
        }
        int64_t rows = 0;
        for (int64_t r = 1; r < items; r++)
            if (items % r == 0 && (rows == 0 || (size_t)r * item_bytes <= budget)) rows = r;
        /* Whole, where the span's intermediates stay in the last-level cache
         * anyway: Swin-T's 56 x 56 stage (13 MB) ran 2% slower in slabs,
         * SwinIR's 128 x 128 maps (35 MB) 1-5% faster, its 256 x 256 (141 MB)
         * 7-10%. */
        if (!rows || (size_t)items * item_bytes <= WHOLE_IN_CACHE * budget) continue;
        p->spans[si] = (pspan){.items = items, .rows = rows};
        ly_log(LY_LOG_DEBUG, "graph: nodes %d to %d (%s ...) run in %lld slabs of %lld items",
               s->first, s->end - 1, g->nodes[s->first].name, (long long)(items / rows),
               (long long)rows);
        for (int32_t i = s->first; i < s->end; i++) {
            const gnode *n = &g->nodes[i];
            p->nodes[i].span = (int32_t)si;
            if (p->nodes[i].mode != NODE_KERNEL) continue;
            for (int k = 0; k < n->n_out; k++)
                if (!outside[n->out[k]]) p->values[n->out[k]].slab = true;
        }
        /* the slab's own values and their views (reshapes in the span) are one slab large */
        for (int32_t i = s->first; i < s->end; i++) {
            const gnode *n = &g->nodes[i];
            for (int k = 0; k < n->n_out; k++)
                if (p->values[ly_plan_root(p, n->out[k], NULL)].slab) {
                    int64_t *extent = &p->values[n->out[k]].shape.shape[0];
                    *extent = *extent / items * rows;
                }
        }
    }
    free(outside);
    return LY_OK;
}

/* ---- implementations ------------------------------------------------------------------ */

static ly_status select_impls(ly_graph *g, plan *p)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL) continue;
        ly_tensor in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
        ly_kernel_call call;
        node_call(g, p, n, in, out, &call);
        ly_status st = ly_kernel_select(n->op, &p->selection, &call, &pn->impl);
        if (st != LY_OK) return node_error(n, st);
    }
    return LY_OK;
}

/* ---- layouts -------------------------------------------------------------------------- *
 *
 * A value stays in a channel-blocked layout when every node that writes or
 * reads it can take that layout: nodes whose implementation offers it
 * (ly_kernel_layouts), channel slices and joins on whole blocks (in blocked
 * layout the same contiguous ranges as in NCHW, at batch 1), element-wise
 * nodes on operands of one layout (elementwise_layouts). Anything else
 * (views of other shapes, graph inputs and outputs, constants, every other
 * node) sees plain data. Layouts only go down (16 -> 8 -> plain), so this
 * settles in a few passes. */

static int block_of(ly_layout l)
{
    return ly_layout_block(l);
}

/* The largest layout not above `at_most` that `t` fits and `allowed` holds. */
static ly_layout best_fit(ly_layout at_most, const ly_tensor *t, uint32_t allowed)
{
    for (int l = (int)at_most; l > LY_LAYOUT_PLAIN; l--)
        if ((allowed & LY_LAYOUT_BIT(l)) && ly_layout_fits((ly_layout)l, t)) return (ly_layout)l;
    return LY_LAYOUT_PLAIN;
}

static bool lower(plan *p, ly_graph_value v, ly_layout to)
{
    pvalue *r = &p->values[ly_plan_root(p, v, NULL)];
    if (r->layout <= to) return false;
    r->layout = to;
    return true;
}

static ly_layout layout_of(const plan *p, ly_graph_value v)
{
    return p->values[ly_plan_root(p, v, NULL)].layout;
}

/* What each blocked layout would cost a view or a copied range: it must
 * start and span whole blocks of channels of a 4-d map (then, in each image,
 * it is the same bytes as in NCHW; at batch 1 a view, else copied per image). */
static bool channel_range_fits(const ly_tensor *whole, int64_t axis, int64_t start, int64_t count,
                               ly_layout l)
{
    int64_t b = block_of(l);
    return whole->ndim == 4 && axis == 1 && start % b == 0 && count % b == 0;
}

/* Element-wise ops (the manifest's layout column): every implementation reads
 * element i of each input only to write element i of the output, so out may
 * alias an input of its own shape (libreyolo/kernels.h). */
static bool elementwise_in_place(ly_op op)
{
    const ly_op_def *def = ly_op_def_of(op);
    return def && def->layouts == LY_LAYOUTS_ELEMENTWISE;
}

static bool same_shape(const ly_tensor *a, const ly_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* An element-wise node computes element i from element i of its operands,
 * wherever that element lives: it takes any layout its full-size operands
 * and its output share (ties), with one-element operands (HGNetv2's
 * LearnableAffineBlock scale and bias) broadcast from plain storage. So the
 * convolutions around x * s + b keep their blocked layouts and their reorders
 * go. An operand of another shape (a per-channel broadcast) keeps it plain. */
static void elementwise_layouts(const plan *p, const gnode *n, ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    if (!elementwise_in_place(n->op) || n->n_out != 1) return;
    const ly_tensor *y = &p->values[n->out[0]].shape;
    if (y->ndim != 4 || y->dtype != LY_F32) return;
    ly_kernel_layouts l = {.out = {~0u}};
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] == LY_GRAPH_NONE) continue;
        const ly_tensor *x = &p->values[n->in[k]].shape;
        if (same_shape(x, y)) {
            l.in[k] = ~0u;
            l.tied |= 1u << k;
        } else if (ly_tensor_numel(x) != 1) {
            return;
        }
    }
    *out = l;
}

static void plan_layouts(ly_graph *g, plan *p, const bool *no_blocked)
{
    size_t nn = g->n_nodes;
    ly_kernel_layouts *lay = calloc(nn ? nn : 1, sizeof *lay);
    for (size_t i = 0; i < g->n_values; i++)
        p->values[i].layout = LY_LAYOUT_PLAIN;
    for (size_t i = 0; i < nn; i++) {
        p->nodes[i].blocked = false;
        for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++)
            p->nodes[i].in_layout[k] = LY_LAYOUT_PLAIN;
        for (int k = 0; k < LY_KERNEL_MAX_OUTPUTS; k++)
            p->nodes[i].out_layout[k] = LY_LAYOUT_PLAIN;
    }
    p->blocked_nodes = 0;
    if (!lay || !p->blocked_allowed) {
        free(lay);
        return;
    }
    /* What each node's implementation offers, and the layout to start from. */
    ly_layout preferred = LY_LAYOUT_PLAIN;
    bool any = false;
    for (size_t i = 0; i < nn; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL || no_blocked[i]) continue;
        const ly_kernel_stateful *sf = ly_impl_stateful(pn->impl);
        if (!sf || !sf->layouts) {
            elementwise_layouts(p, n, &lay[i]);
            continue;
        }
        ly_tensor in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
        ly_kernel_call call;
        node_call(g, p, n, in, out, &call);
        if (sf->layouts(&call, &lay[i]) != LY_OK) {
            memset(&lay[i], 0, sizeof lay[i]);
            ly_clear_error();
            continue;
        }
        any = true;
        if (lay[i].preferred > preferred) preferred = lay[i].preferred;
    }
    if (!any) {
        free(lay);
        return;
    }
    for (size_t i = 0; i < g->n_values; i++) {
        pvalue *v = &p->values[i];
        bool owner = g->values[i].kind == LY_GRAPH_VALUE_NODE && v->parent == LY_GRAPH_NONE &&
                     g->values[i].output_index < 0 && v->shape.dtype == LY_F32;
        v->layout = owner ? best_fit(preferred, &v->shape, ~0u) : LY_LAYOUT_PLAIN;
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        lower(p, g->outputs[i], LY_LAYOUT_PLAIN);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < nn; i++) {
            const gnode *n = &g->nodes[i];
            const pnode *pn = &p->nodes[i];
            if (pn->mode == NODE_KERNEL) {
                const ly_kernel_layouts *l = &lay[i];
                for (int k = 0; k < n->n_in; k++) {
                    if (n->in[k] == LY_GRAPH_NONE) continue;
                    const ly_tensor *t = &p->values[n->in[k]].shape;
                    changed |= lower(p, n->in[k], best_fit(layout_of(p, n->in[k]), t, l->in[k]));
                }
                for (int k = 0; k < n->n_out; k++) {
                    const ly_tensor *t = &p->values[n->out[k]].shape;
                    changed |= lower(p, n->out[k], best_fit(layout_of(p, n->out[k]), t, l->out[k]));
                }
                for (int k = 0; k < n->n_in; k++) {
                    if (n->in[k] == LY_GRAPH_NONE || !(l->tied & (1u << k))) continue;
                    ly_layout a = layout_of(p, n->in[k]), b = layout_of(p, n->out[0]);
                    ly_layout m = a < b ? a : b;
                    changed |= lower(p, n->in[k], m);
                    changed |= lower(p, n->out[0], m);
                }
            } else if (n->op == LY_OP_SLICE) { /* a view: its source's layout */
                const ly_slice_params *sp = n->params;
                const ly_tensor *x = &p->values[n->in[0]].shape;
                int64_t axis = sp->axis < 0 ? sp->axis + x->ndim : sp->axis, start, count;
                ly_slice_resolve(sp, x->shape[axis], &start, &count);
                ly_layout l = layout_of(p, n->in[0]);
                if (l != LY_LAYOUT_PLAIN && !channel_range_fits(x, axis, start, count, l))
                    changed |= lower(p, n->in[0], LY_LAYOUT_PLAIN);
                if (pn->mode == NODE_COPY) { /* its own buffer, the source's bytes */
                    ly_layout a = layout_of(p, n->in[0]), b = layout_of(p, n->out[0]);
                    ly_layout m = a < b ? a : b;
                    changed |= lower(p, n->in[0], m);
                    changed |= lower(p, n->out[0], m);
                }
            } else if (n->op == LY_OP_CONCAT) { /* parts and output in one layout */
                const ly_tensor *y = &p->values[n->out[0]].shape;
                int64_t axis = ((const ly_concat_params *)n->params)->axis;
                if (axis < 0) axis += y->ndim;
                ly_layout l = layout_of(p, n->out[0]);
                int64_t start = 0;
                for (int k = 0; k < n->n_in; k++) {
                    ly_layout lk = layout_of(p, n->in[k]);
                    if (lk < l) l = lk;
                    int64_t c = p->values[n->in[k]].shape.ndim == 4
                                    ? p->values[n->in[k]].shape.shape[1]
                                    : 0;
                    while (l != LY_LAYOUT_PLAIN && !channel_range_fits(y, axis, start, c, l))
                        l = (ly_layout)(l - 1);
                    start += c;
                }
                changed |= lower(p, n->out[0], l);
                for (int k = 0; k < n->n_in; k++)
                    changed |= lower(p, n->in[k], l);
            } else { /* reshape */
                changed |= lower(p, n->in[0], LY_LAYOUT_PLAIN);
                changed |= lower(p, n->out[0], LY_LAYOUT_PLAIN);
            }
        }
    }
    for (size_t i = 0; i < nn; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] != LY_GRAPH_NONE) pn->in_layout[k] = layout_of(p, n->in[k]);
        for (int k = 0; k < n->n_out; k++)
            pn->out_layout[k] = layout_of(p, n->out[k]);
        for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++)
            pn->blocked |= pn->in_layout[k] != LY_LAYOUT_PLAIN;
        for (int k = 0; k < LY_KERNEL_MAX_OUTPUTS; k++)
            pn->blocked |= pn->out_layout[k] != LY_LAYOUT_PLAIN;
        p->blocked_nodes += pn->blocked && pn->mode == NODE_KERNEL;
    }
    free(lay);
}

/* ---- memory ------------------------------------------------------------------------- */

/* An element-wise node writes over an input that nothing reads after it (a
 * plain buffer of its own or such an overwrite, the same shape, not a graph
 * output): the output shares its storage, and a chain such as conv -> x * s
 * -> + b (HGNetv2's LearnableAffineBlock) holds one map instead of three. */
static ly_status write_in_place(ly_graph *g, plan *p)
{
    size_t nv = g->n_values;
    int32_t *last_read = malloc((nv ? nv : 1) * sizeof *last_read);
    bool *pinned = calloc(nv ? nv : 1, sizeof *pinned);
    if (!last_read || !pinned) {
        free(last_read);
        free(pinned);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    }
    for (size_t v = 0; v < nv; v++)
        last_read[v] = -1;
    for (size_t i = 0; i < g->n_outputs; i++)
        pinned[ly_plan_root(p, g->outputs[i], NULL)] = true;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] != LY_GRAPH_NONE) last_read[ly_plan_root(p, n->in[k], NULL)] = (int32_t)i;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        const pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL || !elementwise_in_place(n->op) || n->n_out != 1) continue;
        ly_graph_value o = n->out[0];
        pvalue *out = &p->values[o];
        if (out->parent != LY_GRAPH_NONE || out->in_join || pinned[o]) continue;
        for (int k = 0; k < n->n_in; k++) {
            ly_graph_value in = n->in[k];
            if (in == LY_GRAPH_NONE || pn->in_layout[k] != pn->out_layout[0]) continue;
            int64_t offset;
            ly_graph_value root = ly_plan_root(p, in, &offset);
            const pvalue *r = &p->values[root];
            bool own = g->values[root].kind == LY_GRAPH_VALUE_NODE && !r->in_join;
            /* in a span run in slabs, a slab's value over a whole one would not be in place */
            bool mixed = pn->span >= 0 && out->slab != r->slab;
            if (!own || mixed || offset != 0 || pinned[root] || last_read[root] != (int32_t)i ||
                !same_shape(&p->values[in].shape, &out->shape) ||
                bytes_of(&r->shape) != bytes_of(&out->shape))
                continue;
            out->parent = in;
            out->offset = 0;
            last_read[root] = last_read[o];
            break;
        }
    }
    free(last_read);
    free(pinned);
    return LY_OK;
}

/* Whether value `r` reaches `u` through its views without passing `v`. */
static bool reads_before(const plan *p, ly_graph_value r, ly_graph_value u, ly_graph_value v)
{
    for (; r != LY_GRAPH_NONE; r = p->values[r].parent) {
        if (r == v) return false;
        if (r == u) return true;
    }
    return false;
}

/* Whether value u, read through views that do not pass v, has no reader but
 * input `input` of node `node`: no graph output, no other node's input. */
static bool read_only_by(const ly_graph *g, const plan *p, ly_graph_value u, ly_graph_value v,
                         size_t node, int input)
{
    for (size_t k = 0; k < g->n_outputs; k++)
        if (reads_before(p, g->outputs[k], u, v)) return false;
    for (size_t j = 0; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_in; k++)
            if (!(j == node && k == input) && reads_before(p, g->nodes[j].in[k], u, v))
                return false;
    return true;
}

/* An activation node (SiLU, sigmoid) that rewrites in place the output of a
 * node whose state takes the activation after its own epilogue, and that
 * nothing else reads before it: the state applies it, the node becomes a
 * view (the int8 LibreYOLO9t's RepConvN: SiLU after its two convolutions'
 * sum). Only on values written whole (no spans). */
static void fold_activations(ly_graph *g, plan *p)
{
    int folded = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        int64_t activation = n->op == LY_OP_SILU      ? LY_ACT_SILU
                             : n->op == LY_OP_SIGMOID ? LY_ACT_SIGMOID
                                                      : LY_ACT_NONE;
        if (activation == LY_ACT_NONE || pn->mode != NODE_KERNEL || pn->span >= 0) continue;
        ly_graph_value u = n->in[0], v = n->out[0];
        if (p->values[v].parent != u || p->values[v].offset != 0 ||
            p->values[u].parent != LY_GRAPH_NONE || g->values[u].kind != LY_GRAPH_VALUE_NODE)
            continue;
        int32_t producer = g->values[u].producer;
        pnode *pp = &p->nodes[producer];
        if (pp->mode != NODE_KERNEL || !pp->state || pp->span >= 0 ||
            g->nodes[producer].out[0] != u || pp->folded_activation != LY_ACT_NONE)
            continue;
        ly_kernel_folds take = ly_kernel_folds_of(ly_impl_stateful(pp->impl));
        if (!read_only_by(g, p, u, v, i, 0) || !take.activation ||
            !take.activation(pp->state, activation))
            continue;
        pp->folded_activation = activation;
        pn->mode = NODE_VIEW;
        folded++;
    }
    p->folded_nodes += folded;
    if (folded)
        ly_log(LY_LOG_DEBUG, "graph: %d activation nodes folded into their inputs' nodes", folded);
}

/* A node whose residual (input 3) a node of the same implementation writes
 * from the same input 0, read by nothing else: its state may run that
 * producer in its own pass (the int8 LibreYOLO9t's RepConvN: the 1x1 takes the
 * 3x3 of the same codes, quantized once). The producer becomes a view that
 * writes nothing; it runs again only if the node falls back (run.c). Only on
 * values written whole (no spans). */
static void fold_residuals(ly_graph *g, plan *p)
{
    int folded = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL || !pn->state || pn->span >= 0 || n->n_in < 4 ||
            n->in[3] == LY_GRAPH_NONE)
            continue;
        ly_graph_value u = n->in[3];
        if (g->values[u].kind != LY_GRAPH_VALUE_NODE || p->values[u].parent != LY_GRAPH_NONE ||
            p->values[u].in_join)
            continue;
        int32_t producer = g->values[u].producer;
        const gnode *a = &g->nodes[producer];
        pnode *pa = &p->nodes[producer];
        if (pa->mode != NODE_KERNEL || !pa->state || pa->span >= 0 || pa->impl != pn->impl ||
            a->n_out != 1 || a->out[0] != u || a->in[0] != n->in[0] || pa->residual_folded ||
            pa->folded_activation != LY_ACT_NONE)
            continue;
        ly_kernel_folds take = ly_kernel_folds_of(ly_impl_stateful(pn->impl));
        if (!read_only_by(g, p, u, n->out[0], i, 3) || !take.residual ||
            !take.residual(pn->state, pa->state))
            continue;
        pn->residual_folded = true;
        pa->mode = NODE_VIEW;
        folded++;
    }
    p->folded_nodes += folded;
    if (folded)
        ly_log(LY_LOG_DEBUG, "graph: %d residual producers folded into their readers", folded);
}

static void touch(plan *p, ly_graph_value v, int32_t step)
{
    const pvalue *r = &p->values[ly_plan_root(p, v, NULL)];
    if (r->buffer < 0) return; /* an input or a constant: not planned */
    pbuffer *b = &p->buffers[r->buffer];
    if (step < b->first) b->first = step;
    if (step > b->last) b->last = step;
}

/* Largest first (ties: earliest first), each at the best-fitting gap among the
 * placed buffers alive at the same time. */
static ly_status place_buffers(plan *p)
{
    size_t n = p->n_buffers;
    int32_t *order = malloc((n ? n : 1) * sizeof *order);
    int32_t *placed = malloc((n ? n : 1) * sizeof *placed);
    int32_t *overlap = malloc((n ? n : 1) * sizeof *overlap);
    if (!order || !placed || !overlap) {
        free(order);
        free(placed);
        free(overlap);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (int32_t)i;
    for (size_t i = 1; i < n; i++) {
        int32_t k = order[i];
        size_t j = i;
        while (j > 0) {
            const pbuffer *a = &p->buffers[order[j - 1]], *b = &p->buffers[k];
            bool before = b->bytes > a->bytes || (b->bytes == a->bytes && b->first < a->first);
            if (!before) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    size_t n_placed = 0, arena = 0;
    for (size_t i = 0; i < n; i++) {
        pbuffer *b = &p->buffers[order[i]];
        size_t m = 0;
        for (size_t j = 0; j < n_placed; j++) {
            const pbuffer *q = &p->buffers[placed[j]];
            if (q->first <= b->last && b->first <= q->last) {
                size_t k = m++;
                while (k > 0 && p->buffers[overlap[k - 1]].offset > q->offset) {
                    overlap[k] = overlap[k - 1];
                    k--;
                }
                overlap[k] = placed[j];
            }
        }
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, end = 0;
        for (size_t j = 0; j < m; j++) {
            const pbuffer *q = &p->buffers[overlap[j]];
            if (q->offset > end) {
                size_t gap = q->offset - end;
                if (gap >= b->bytes && gap < best_gap) {
                    best_gap = gap;
                    best = end;
                }
            }
            if (q->offset + q->bytes > end) end = q->offset + q->bytes;
        }
        b->offset = best != SIZE_MAX ? best : end;
        if (b->offset + b->bytes > arena) arena = b->offset + b->bytes;
        placed[n_placed++] = order[i];
    }
    free(order);
    free(placed);
    free(overlap);
    p->arena_bytes = arena;
    return LY_OK;
}

static ly_status plan_memory(ly_graph *g, plan *p)
{
    p->n_buffers = 0;
    p->unplanned_bytes = 0;
    free(p->buffers);
    p->buffers = calloc(g->n_values ? g->n_values : 1, sizeof *p->buffers);
    if (!p->buffers) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    for (size_t i = 0; i < g->n_values; i++) {
        const gvalue *v = &g->values[i];
        pvalue *pv = &p->values[i];
        pv->buffer = -1;
        bool owner =
            v->kind == LY_GRAPH_VALUE_NODE || (v->kind == LY_GRAPH_VALUE_INPUT && v->in_arena);
        if (!owner || pv->parent != LY_GRAPH_NONE) continue;
        size_t bytes = align_up(bytes_of(&pv->shape));
        p->buffers[p->n_buffers] = (pbuffer){bytes ? bytes : LY_GRAPH_ALIGN, INT32_MAX, -1, 0};
        p->unplanned_bytes += p->buffers[p->n_buffers].bytes;
        pv->buffer = (int32_t)p->n_buffers++;
    }
    int32_t end = (int32_t)g->n_nodes;
    for (size_t i = 0; i < g->n_inputs; i++) /* written before the first node */
        touch(p, g->inputs[i], 0);
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        const pnode *pn = &p->nodes[i];
        int32_t step = (int32_t)i;
        if (pn->mode == NODE_VIEW) continue; /* readers of views keep the source alive */
        for (int k = 0; k < n->n_out + n->n_in; k++) {
            ly_graph_value v = k < n->n_out ? n->out[k] : n->in[k - n->n_out];
            if (v == LY_GRAPH_NONE ||
                (k >= n->n_out && pn->mode == NODE_JOIN && !pn->copy_in[k - n->n_out]))
                continue;
            touch(p, v, step);
            /* a span run in slabs reads and writes whole values from its first
             * node to its last, slab after slab */
            if (pn->span >= 0 && !p->values[ly_plan_root(p, v, NULL)].slab) {
                touch(p, v, g->spans[pn->span].first);
                touch(p, v, g->spans[pn->span].end - 1);
            }
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        touch(p, g->outputs[i], end);
    for (size_t i = 0; i < p->n_buffers; i++)
        if (p->buffers[i].first > p->buffers[i].last) /* never used: keep it valid anyway */
            p->buffers[i].first = p->buffers[i].last = end;
    return place_buffers(p);
}

/* ---- prepared states and constants given back ---------------------------------------- */

static void release_states(ly_graph *g, plan *p)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        pnode *pn = &p->nodes[i];
        if (pn->state) ly_impl_stateful(pn->impl)->release(pn->state);
        pn->state = NULL;
    }
}

/* LY_OK, or LY_E_DECLINED with *redo when a blocked node must go plain, or a
 * failure that disabled an implementation (the caller plans again). */
static ly_status prepare_states(ly_graph *g, plan *p, bool *no_blocked, bool *redo)
{
    *redo = false;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        pnode *pn = &p->nodes[i];
        if (pn->mode != NODE_KERNEL) continue;
        const ly_kernel_stateful *sf = ly_impl_stateful(pn->impl);
        if (!sf) continue;
        ly_kernel_prepare_info info = {.threads = p->threads};
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] == LY_GRAPH_NONE) continue;
            if (g->values[n->in[k]].kind == LY_GRAPH_VALUE_CONSTANT) {
                ly_status st = ly_graph_constant_restore_locked(g, n->in[k]);
                if (st != LY_OK) return node_error(n, st);
                info.constant_inputs |= 1u << k;
            }
            info.in_layout[k] = pn->in_layout[k];
        }
        for (int k = 0; k < n->n_out; k++)
            info.out_layout[k] = pn->out_layout[k];
        ly_tensor in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
        ly_kernel_call call;
        node_call(g, p, n, in, out, &call);
        ly_shapes_only_begin();
        ly_status st = sf->prepare(&call, &info, &pn->state);
        ly_shapes_only_end();
        if (st == LY_OK) continue;
        pn->state = NULL;
        if (st == LY_E_DECLINED && pn->blocked) {
            /* Not on these layouts: this node runs on plain data. */
            no_blocked[i] = true;
            *redo = true;
            ly_clear_error();
            return LY_E_DECLINED;
        }
        if (st == LY_E_DECLINED) { /* runs through its function, or prepares per call */
            ly_clear_error();
            continue;
        }
        /* A failure: the implementation is disabled, the plan made again. */
        ly_kernel_disable(n->op, pn->impl, st);
        return node_error(n, LY_E_PROVIDER);
    }
    return LY_OK;
}

/* Whether node `pn`'s prepared state keeps its own copy of constant input k
 * and can write it back. */
static bool holds_constant(const pnode *pn, int k)
{
    /* a kernel's, or a producer folded into its reader's (a view that keeps its state) */
    const ly_kernel_stateful *sf = pn->state ? ly_impl_stateful(pn->impl) : NULL;
    return pn->state && sf && sf->restore_constant && sf->held_constants &&
           (sf->held_constants(pn->state) & (1u << k));
}

/* Whether every reader of constant `c`, in every live plan (the one being made
 * among them), holds it prepared in a state that can write it back. */
static bool only_prepared_readers(ly_graph *g, ly_graph_value c)
{
    for (const plan *p = g->live; p; p = p->next_live)
        for (size_t i = 0; i < g->n_nodes; i++) {
            const gnode *n = &g->nodes[i];
            for (int k = 0; k < n->n_in; k++) {
                if (n->in[k] != c) continue;
                if (!holds_constant(&p->nodes[i], k)) return false;
            }
        }
    return true;
}

/* A constant whose every reader holds a packed copy is not read again by any
 * run: its pages go back to the system (LibreYOLO9t's conv weights: ~7 MiB of
 * peak memory), to be written back exactly before anything else reads it. */
static void give_back_constants(ly_graph *g, plan *p)
{
#if defined(__linux__) && defined(MADV_DONTNEED)
    if (p->capturing) return;
    const char *env = getenv("LIBREYOLO_KEEP_WEIGHTS");
    if (env && strcmp(env, "1") == 0) return;
    for (size_t v = 0; v < g->n_values; v++) {
        gvalue *c = &g->values[v];
        if (c->kind != LY_GRAPH_VALUE_CONSTANT || atomic_load(&c->released) || !c->page_aligned ||
            c->constant_bytes < CONSTANT_PAGE)
            continue;
        if (!only_prepared_readers(g, (ly_graph_value)v)) continue;
        int keeper = -1, input = -1;
        for (size_t i = 0; i < g->n_nodes && keeper < 0; i++)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] == (ly_graph_value)v) {
                    keeper = (int)i;
                    input = k;
                    break;
                }
        if (keeper < 0) continue;
        if (madvise(c->constant.data, c->constant_bytes, MADV_DONTNEED) != 0) continue;
        c->keeper = p;
        c->keeper_node = keeper;
        c->keeper_input = input;
        atomic_fetch_add(&p->refs, 1);
        atomic_store_explicit(&c->released, true, memory_order_release);
    }
#else
    (void)g;
    (void)p;
#endif
}

/* Constants read as they are (by nodes without a state that holds them) must
 * have their pages. */
static ly_status restore_plain_readers(ly_graph *g, plan *p)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const gnode *n = &g->nodes[i];
        const pnode *pn = &p->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] == LY_GRAPH_NONE || holds_constant(pn, k)) continue;
            if (g->values[n->in[k]].kind != LY_GRAPH_VALUE_CONSTANT) continue;
            ly_status st = ly_graph_constant_restore_locked(g, n->in[k]);
            if (st != LY_OK) return node_error(n, st);
        }
    }
    return LY_OK;
}

/* ---- making and caching plans ----------------------------------------------------------- */

void ly_plan_free_locked(ly_graph *g, plan *p)
{
    if (!p) return;
    for (plan **at = &g->live; *at; at = &(*at)->next_live)
        if (*at == p) {
            *at = p->next_live;
            break;
        }
    release_states(g, p);
    free(p->input_shapes);
    free(p->values);
    free(p->nodes);
    free(p->buffers);
    free(p->spans);
    free(p);
}

void ly_plan_release_locked(ly_graph *g, plan *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) ly_plan_free_locked(g, p);
}

void ly_plan_release(ly_graph *g, plan *p)
{
    if (!p) return;
    pthread_mutex_lock(&g->lock);
    ly_plan_release_locked(g, p);
    pthread_mutex_unlock(&g->lock);
}

void ly_plans_clear(ly_graph *g)
{
    /* Constants come back first: their keepers' states are about to go. */
    for (size_t v = 0; v < g->n_values; v++)
        if (atomic_load(&g->values[v].released) &&
            ly_graph_constant_restore_locked(g, (ly_graph_value)v) != LY_OK)
            ly_log(LY_LOG_WARNING, "%s", ly_last_error());
    for (int i = 0; i < LY_GRAPH_MAX_PLANS; i++) {
        ly_plan_release_locked(g, g->plans[i]);
        g->plans[i] = NULL;
    }
}

static bool blocked_allowed(void)
{
    const char *env = getenv("LIBREYOLO_BLOCKED");
    return !(env && strcmp(env, "0") == 0) && !ly_kernels_capturing();
}

static bool plan_matches(const plan *p, int n_inputs, const ly_tensor *inputs, int threads,
                         const ly_selection *sel, uint64_t gen, bool capturing, bool blocked)
{
    if (p->n_inputs != n_inputs || p->threads != threads || p->generation != gen ||
        p->capturing != capturing || p->blocked_allowed != blocked ||
        !ly_selection_equal(&p->selection, sel))
        return false;
    for (int i = 0; i < n_inputs; i++)
        if (memcmp(p->input_shapes[i], inputs[i].shape, (size_t)inputs[i].ndim * sizeof(int64_t)) !=
            0)
            return false;
    return true;
}

static ly_status check_inputs(const ly_graph *g, int n_inputs, const ly_tensor *inputs)
{
    if ((size_t)n_inputs != g->n_inputs || (n_inputs > 0 && !inputs))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph: %d inputs given, the graph has %zu",
                            n_inputs, g->n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        const gvalue *v = &g->values[g->inputs[i]];
        char buf[128];
        if (inputs[i].dtype != v->dtype)
            return ly_set_error(LY_E_DTYPE, "ly_graph: input '%s' is %s, expected %s",
                                g->input_names[i], ly_dtype_name(inputs[i].dtype),
                                ly_dtype_name(v->dtype));
        if (inputs[i].ndim != v->ndim || ly_tensor_numel(&inputs[i]) < 0)
            return ly_set_error(LY_E_SHAPE, "ly_graph: input '%s' is %s, expected %d dimensions",
                                g->input_names[i], ly_shape_str(&inputs[i], buf, sizeof buf),
                                v->ndim);
    }
    return LY_OK;
}

static ly_status make_plan(ly_graph *g, plan *p, const ly_tensor *inputs)
{
    p->values = calloc(g->n_values ? g->n_values : 1, sizeof *p->values);
    p->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->nodes);
    bool *no_blocked = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *no_blocked);
    if (!p->values || !p->nodes || !no_blocked) {
        free(no_blocked);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    }
    ly_shapes_only_begin();
    ly_status st = infer_shapes(g, p, inputs);
    if (st == LY_OK) decide_views(g, p);
    if (st == LY_OK) st = plan_spans(g, p);
    if (st == LY_OK) st = select_impls(g, p);
    ly_shapes_only_end();
    for (size_t i = 0; i < g->n_nodes; i++) /* slabs are plain rows */
        no_blocked[i] |= p->nodes[i].span >= 0;
    for (int round = 0; st == LY_OK; round++) {
        plan_layouts(g, p, no_blocked);
        bool redo = false;
        st = prepare_states(g, p, no_blocked, &redo);
        if (st == LY_E_DECLINED && redo && round < (int)g->n_nodes) {
            release_states(g, p);
            st = LY_OK;
            continue;
        }
        break;
    }
    free(no_blocked);
    if (st == LY_OK) st = write_in_place(g, p);
    if (st == LY_OK) fold_residuals(g, p);
    if (st == LY_OK) fold_activations(g, p);
    if (st == LY_OK) st = plan_memory(g, p);
    if (st == LY_OK) st = restore_plain_readers(g, p);
    return st;
}

ly_status ly_plan_acquire(ly_graph *g, int n_inputs, const ly_tensor *inputs, int threads,
                          plan **out)
{
    *out = NULL;
    ly_status st = check_inputs(g, n_inputs, inputs);
    if (st != LY_OK) return st;
    threads = ly_threads_resolve(threads);
    ly_selection sel;
    ly_selection_read(&sel);
    bool capturing = ly_kernels_capturing(), blocked = blocked_allowed();
    pthread_mutex_lock(&g->lock);
    uint64_t gen = ly_kernel_generation();
    for (int i = 0; i < LY_GRAPH_MAX_PLANS; i++) {
        plan *p = g->plans[i];
        if (!p || !plan_matches(p, n_inputs, inputs, threads, &sel, gen, capturing, blocked))
            continue;
        memmove(&g->plans[1], &g->plans[0], (size_t)i * sizeof g->plans[0]);
        g->plans[0] = p;
        atomic_fetch_add(&p->refs, 1);
        pthread_mutex_unlock(&g->lock);
        *out = p;
        return LY_OK;
    }
    /* A failing implementation is disabled while planning: plan again without it. */
    plan *p = NULL;
    for (int attempt = 0; attempt < 4; attempt++) {
        p = calloc(1, sizeof *p);
        int64_t(*shapes)[LY_MAX_DIMS] = calloc(n_inputs ? (size_t)n_inputs : 1, sizeof *shapes);
        if (!p || !shapes) {
            free(p);
            free(shapes);
            pthread_mutex_unlock(&g->lock);
            return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
        }
        atomic_init(&p->refs, 1);
        p->n_inputs = n_inputs;
        p->input_shapes = shapes;
        for (int i = 0; i < n_inputs; i++)
            memcpy(shapes[i], inputs[i].shape, (size_t)inputs[i].ndim * sizeof(int64_t));
        p->threads = threads;
        p->selection = sel;
        p->capturing = capturing;
        p->blocked_allowed = blocked;
        p->next_live = g->live;
        g->live = p;
        uint64_t before = ly_kernel_generation();
        st = make_plan(g, p, inputs);
        if (st == LY_OK) {
            give_back_constants(g, p);
            break;
        }
        bool disabled = ly_kernel_generation() != before && st == LY_E_PROVIDER;
        ly_plan_release_locked(g, p);
        p = NULL;
        if (!disabled) break;
    }
    if (st != LY_OK) {
        pthread_mutex_unlock(&g->lock);
        return st;
    }
    /* Providers load on the first selection, which changes the generation: the
     * key is what the registry says now that the plan is made. */
    p->generation = ly_kernel_generation();
    ly_plan_release_locked(g, g->plans[LY_GRAPH_MAX_PLANS - 1]);
    memmove(&g->plans[1], &g->plans[0], (LY_GRAPH_MAX_PLANS - 1) * sizeof g->plans[0]);
    g->plans[0] = p;
    g->plans_made++;
    ly_log(LY_LOG_DEBUG,
           "graph: plan %zu: %zu nodes (%d on blocked data), %zu threads, arena %zu B",
           g->plans_made, g->n_nodes, p->blocked_nodes, (size_t)p->threads, p->arena_bytes);
    atomic_fetch_add(&p->refs, 1); /* the caller's; the cache keeps the first */
    pthread_mutex_unlock(&g->lock);
    *out = p;
    return LY_OK;
}

ly_status ly_graph_infer(ly_graph *g, int n_inputs, const ly_tensor *inputs, ly_tensor *shapes)
{
    if (!g || !shapes) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_infer: NULL argument");
    ly_status st = check_inputs(g, n_inputs, inputs);
    if (st != LY_OK) return st;
    plan p = {0};
    p.threads = 1;
    p.values = calloc(g->n_values ? g->n_values : 1, sizeof *p.values);
    if (!p.values) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_infer: out of memory");
    ly_shapes_only_begin();
    st = infer_shapes(g, &p, inputs);
    ly_shapes_only_end();
    for (size_t i = 0; st == LY_OK && i < g->n_values; i++)
        shapes[i] = p.values[i].shape;
    free(p.values);
    return st;
}
