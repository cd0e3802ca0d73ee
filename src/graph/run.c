/* SPDX-License-Identifier: MIT */
/* Contexts and runs (graph.h): an arena laid out for a plan, and the nodes
 * executed on it in order. */
#include "graph/graph_internal.h"

#include "core/core.h"
#include "core/layout.h"
#include "ops/ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ly_graph_ctx {
    ly_graph *g;
    plan *plan;
    ly_graph_arena own;
    ly_graph_arena *mem; /* &own, or an arena shared with other contexts */
    ly_tensor *views;    /* per value, for the current plan */
    bool pooled;
    ly_graph_ctx *next_idle;
    /* LIBREYOLO_PROFILE=1: time per op, logged when the context goes;
     * LIBREYOLO_PROFILE=nodes: the slowest nodes too. */
    bool profile;
    double op_ms[LY_OP_COUNT];
    int64_t op_calls[LY_OP_COUNT];
    double *node_ms;     /* per node, when profiling nodes */
    int64_t *node_calls; /* whole runs of each node (slabs count once) */
};

enum { PROFILE_TOP_NODES = 400 };

/* "[1,16,160,160]" */
static void shape_text(const ly_tensor *t, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && len < size; d++)
        len +=
            (size_t)snprintf(buf + len, size - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* Multiply-adds x 2 of a node whose work is a product with its weights
 * (convolutions, linear layers); 0 for the rest. */
static double node_flops(const gnode *node, const plan *p)
{
    if (node->op != LY_OP_CONV2D && node->op != LY_OP_CONV2D_INT8 && node->op != LY_OP_LINEAR)
        return 0;
    if (node->n_in < 2 || node->in[1] == LY_GRAPH_NONE || node->out[0] == LY_GRAPH_NONE) return 0;
    const ly_tensor *w = &p->values[node->in[1]].shape, *y = &p->values[node->out[0]].shape;
    if (node->op == LY_OP_LINEAR) /* y [..., out], w [out, in] */
        return w->ndim == 2 ? 2.0 * (double)ly_tensor_numel(y) * (double)w->shape[1] : 0;
    /* y [N, O, H, W], w [O, C/groups, kh, kw] */
    return y->ndim == 4 && w->ndim == 4 ? 2.0 * (double)ly_tensor_numel(w) *
                                              (double)(y->shape[0] * y->shape[2] * y->shape[3])
                                        : 0;
}

static void log_profile(const ly_graph_ctx *c)
{
    double total = 0;
    for (int op = 0; op < LY_OP_COUNT; op++)
        total += c->op_ms[op];
    for (int op = 0; op < LY_OP_COUNT; op++)
        if (c->op_calls[op])
            ly_log(LY_LOG_INFO, "graph profile: %-20s %8lld calls %10.2f ms (%4.1f%%)",
                   ly_op_name((ly_op)op), (long long)c->op_calls[op], c->op_ms[op],
                   total > 0 ? 100.0 * c->op_ms[op] / total : 0.0);
    if (!c->node_ms) return;
    /* the slowest nodes, by selection (a log line per node, few of them) */
    size_t n = c->g->n_nodes;
    bool *shown = calloc(n ? n : 1, sizeof *shown);
    if (!shown) return;
    for (int rank = 0; rank < PROFILE_TOP_NODES && (size_t)rank < n; rank++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!shown[i] && (best == n || c->node_ms[i] > c->node_ms[best])) best = i;
        shown[best] = true;
        const gnode *node = &c->g->nodes[best];
        const pnode *pn = c->plan ? &c->plan->nodes[best] : NULL;
        /* what it read and wrote, and the rate of a product with weights */
        char shapes[160] = "", rate[32] = "";
        if (c->plan && node->n_in > 0 && node->in[0] != LY_GRAPH_NONE &&
            node->out[0] != LY_GRAPH_NONE) {
            char x[64], y[64];
            shape_text(&c->plan->values[node->in[0]].shape, x, sizeof x);
            shape_text(&c->plan->values[node->out[0]].shape, y, sizeof y);
            snprintf(shapes, sizeof shapes, " %s -> %s", x, y);
            double flops = node_flops(node, c->plan);
            if (flops > 0 && c->node_ms[best] > 0)
                snprintf(rate, sizeof rate, " %.1f GFLOP/s",
                         flops * (double)c->node_calls[best] / (c->node_ms[best] * 1e6));
        }
        ly_log(LY_LOG_INFO, "graph profile: node %-48s %-14s %-16s %10.2f ms (%4.1f%%)%s%s",
               node->name, ly_op_name(node->op),
               pn && pn->mode == NODE_KERNEL && pn->impl ? ly_impl_name(pn->impl) : "-",
               c->node_ms[best], total > 0 ? 100.0 * c->node_ms[best] / total : 0.0, rate, shapes);
    }
    free(shown);
}

ly_status ly_graph_ctx_create(ly_graph *g, ly_graph_ctx **out)
{
    if (!g || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_ctx_create: NULL argument");
    ly_graph_ctx *c = calloc(1, sizeof *c);
    if (!c) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_ctx_create: out of memory");
    c->g = g;
    c->mem = &c->own;
    const char *profile = getenv("LIBREYOLO_PROFILE");
    c->profile = profile && (strcmp(profile, "1") == 0 || strcmp(profile, "nodes") == 0);
    if (profile && strcmp(profile, "nodes") == 0) {
        c->node_ms = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c->node_ms);
        c->node_calls = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c->node_calls);
    }
    *out = c;
    return LY_OK;
}

static void ctx_destroy(ly_graph_ctx *c)
{
    if (c->profile) log_profile(c);
    ly_plan_release(c->g, c->plan);
    ly_graph_arena_release(&c->own);
    free(c->views);
    free(c->node_ms);
    free(c->node_calls);
    free(c);
}

void ly_graph_ctx_free(ly_graph_ctx *c)
{
    if (!c) return;
    if (c->pooled) {
        ly_graph_ctx_release(c);
        return;
    }
    ctx_destroy(c);
}

void ly_graph_arena_release(ly_graph_arena *a)
{
    if (!a) return;
    free(a->data);
    *a = (ly_graph_arena){0};
}

void ly_graph_ctx_share_arena(ly_graph_ctx *c, ly_graph_arena *arena)
{
    if (c) c->mem = arena ? arena : &c->own;
}

ly_status ly_graph_ctx_acquire(ly_graph *g, ly_graph_ctx **out)
{
    if (!g || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_ctx_acquire: NULL argument");
    pthread_mutex_lock(&g->lock);
    ly_graph_ctx *c = g->idle;
    if (c) g->idle = c->next_idle;
    pthread_mutex_unlock(&g->lock);
    if (!c) {
        ly_status st = ly_graph_ctx_create(g, &c);
        if (st != LY_OK) return st;
        c->pooled = true;
    }
    c->next_idle = NULL;
    *out = c;
    return LY_OK;
}

void ly_graph_ctx_release(ly_graph_ctx *c)
{
    if (!c) return;
    if (!c->pooled) {
        ctx_destroy(c);
        return;
    }
    ly_graph *g = c->g;
    pthread_mutex_lock(&g->lock);
    c->next_idle = g->idle;
    g->idle = c;
    pthread_mutex_unlock(&g->lock);
}

void ly_graph_ctx_pool_clear_locked(ly_graph *g)
{
    while (g->idle) {
        ly_graph_ctx *c = g->idle;
        g->idle = c->next_idle;
        if (c->profile) log_profile(c); /* while its plan names the nodes' kernels */
        c->profile = false;
        ly_plan_release_locked(g, c->plan);
        c->plan = NULL;
        ctx_destroy(c);
    }
}

/* Point every value into the arena, the inputs or the constants. */
static void resolve_views(ly_graph_ctx *c, const ly_tensor *inputs)
{
    const ly_graph *g = c->g;
    const plan *p = c->plan;
    for (size_t i = 0; i < g->n_values; i++) {
        int64_t off;
        ly_graph_value r = ly_plan_root(p, (ly_graph_value)i, &off);
        const gvalue *rv = &g->values[r];
        const pvalue *pr = &p->values[r];
        char *base = NULL;
        if (rv->kind == LY_GRAPH_VALUE_CONSTANT)
            base = rv->constant.data;
        else if (rv->kind == LY_GRAPH_VALUE_INPUT && inputs && inputs[rv->input_index].data)
            base = inputs[rv->input_index].data; /* read where the caller has it */
        else if (pr->buffer >= 0 && c->mem->data)
            base = (char *)c->mem->data + p->buffers[pr->buffer].offset;
        c->views[i] = p->values[i].shape;
        c->views[i].data = base ? base + off : NULL;
    }
}

ly_status ly_graph_prepare(ly_graph_ctx *c, int n_inputs, const ly_tensor *inputs, int threads)
{
    if (!c) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_prepare: ctx is NULL");
    plan *p;
    ly_status st = ly_plan_acquire(c->g, n_inputs, inputs, threads, &p);
    if (st != LY_OK) return st;
    if (p == c->plan) {
        ly_plan_release(c->g, p); /* the context holds one already */
    } else {
        ly_plan_release(c->g, c->plan);
        c->plan = p;
        if (!c->views) {
            c->views = calloc(c->g->n_values ? c->g->n_values : 1, sizeof *c->views);
            if (!c->views) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_prepare: out of memory");
        }
    }
    ly_graph_arena *a = c->mem;
    if (p->arena_bytes > a->capacity) {
        free(a->data);
        a->capacity = 0;
        a->data = aligned_alloc(LY_GRAPH_ALIGN, p->arena_bytes);
        if (!a->data)
            return ly_set_error(LY_E_NO_MEMORY,
                                "ly_graph_prepare: cannot allocate an arena of %zu bytes",
                                p->arena_bytes);
        a->capacity = p->arena_bytes;
        a->allocations++;
    }
    resolve_views(c, NULL);
    return LY_OK;
}

ly_status ly_graph_ctx_input_buffer(const ly_graph_ctx *c, int index, void **data)
{
    if (!c || !data || !c->plan || index < 0 || (size_t)index >= c->g->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_ctx_input_buffer: no input %d (or not prepared)", index);
    const pvalue *v = &c->plan->values[c->g->inputs[index]];
    if (v->buffer < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_ctx_input_buffer: input '%s' is not planned in the arena",
                            c->g->input_names[index]);
    *data = (char *)c->mem->data + c->plan->buffers[v->buffer].offset;
    return LY_OK;
}

static size_t bytes_of_view(const ly_tensor *t)
{
    return (size_t)ly_tensor_numel(t) * ly_dtype_size(t->dtype);
}

/* ---- one node ------------------------------------------------------------------------- */

static ly_status node_error(const gnode *n, ly_status st)
{
    char msg[640];
    snprintf(msg, sizeof msg, "%s", ly_last_error());
    return ly_set_error(st, "%s: %s", n->name, msg);
}

/* The node's implementation failed (or declined): the registry runs the call
 * on the next ones, on plain data (blocked operands reordered into copies and
 * back), with any constant's pages restored first. */
static ly_status fall_back(ly_graph_ctx *c, const gnode *n, const pnode *pn, ly_status failed,
                           ly_kernel_call *call)
{
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] == LY_GRAPH_NONE || c->g->values[n->in[k]].kind != LY_GRAPH_VALUE_CONSTANT)
            continue;
        const ly_tensor *t;
        ly_status st = ly_graph_constant_data(c->g, n->in[k], &t);
        if (st != LY_OK) return st;
    }
    if (!pn->blocked) return ly_kernel_fallback(n->op, &c->plan->selection, pn->impl, failed, call);
    ly_tensor in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
    void *temp[LY_KERNEL_MAX_INPUTS + LY_KERNEL_MAX_OUTPUTS] = {0};
    ly_kernel_call plain = *call;
    ly_status st = LY_OK;
    for (int k = 0; k < n->n_in && st == LY_OK; k++) {
        if (!call->in[k] || pn->in_layout[k] == LY_LAYOUT_PLAIN) continue;
        in[k] = *call->in[k];
        temp[k] = malloc(bytes_of_view(&in[k]) + 1);
        if (!temp[k]) {
            st = ly_set_error(LY_E_NO_MEMORY, "out of memory");
            break;
        }
        ly_layout_reorder(call->in[k]->data, pn->in_layout[k], temp[k], LY_LAYOUT_PLAIN,
                          in[k].shape);
        in[k].data = temp[k];
        plain.in[k] = &in[k];
    }
    for (int k = 0; k < n->n_out && st == LY_OK; k++) {
        if (pn->out_layout[k] == LY_LAYOUT_PLAIN) continue;
        out[k] = *call->out[k];
        temp[LY_KERNEL_MAX_INPUTS + k] = malloc(bytes_of_view(&out[k]) + 1);
        if (!temp[LY_KERNEL_MAX_INPUTS + k]) {
            st = ly_set_error(LY_E_NO_MEMORY, "out of memory");
            break;
        }
        out[k].data = temp[LY_KERNEL_MAX_INPUTS + k];
        plain.out[k] = &out[k];
    }
    if (st == LY_OK) st = ly_kernel_fallback(n->op, &c->plan->selection, pn->impl, failed, &plain);
    for (int k = 0; k < n->n_out && st == LY_OK; k++)
        if (pn->out_layout[k] != LY_LAYOUT_PLAIN)
            ly_layout_reorder(out[k].data, LY_LAYOUT_PLAIN, call->out[k]->data, pn->out_layout[k],
                              out[k].shape);
    for (size_t i = 0; i < sizeof temp / sizeof temp[0]; i++)
        free(temp[i]);
    return st;
}

/* Operand v's rows of slab `slab` of its span (a view moved along dimension 0). */
static ly_tensor *slab_view(const ly_graph_ctx *c, ly_graph_value v, int32_t span, int64_t slab,
                            ly_tensor *t)
{
    ly_tensor *whole = &c->views[v];
    if (slab < 0 || !ly_plan_span_slices(c->g, c->plan, span, v)) return whole;
    const pspan *s = &c->plan->spans[span];
    *t = *whole;
    t->shape[0] = whole->shape[0] / s->items * s->rows;
    if (whole->data)
        t->data = (char *)whole->data +
                  (size_t)slab * (bytes_of_view(whole) / (size_t)s->items) * (size_t)s->rows;
    return t;
}

/* Node `index` (a copy or a kernel), or its slab `slab`. */
static ly_status run_call(ly_graph_ctx *c, size_t index, int64_t slab)
{
    const gnode *n = &c->g->nodes[index];
    const pnode *pn = &c->plan->nodes[index];
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    ly_tensor sliced[LY_KERNEL_MAX_INPUTS + LY_KERNEL_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++)
        call.in[k] =
            n->in[k] != LY_GRAPH_NONE ? slab_view(c, n->in[k], pn->span, slab, &sliced[k]) : NULL;
    for (int k = 0; k < n->n_out; k++)
        call.out[k] = slab_view(c, n->out[k], pn->span, slab, &sliced[LY_KERNEL_MAX_INPUTS + k]);
    call.params = n->params;
    call.threads = c->plan->threads;
    /* The references copy whole ranges of each image, which in a blocked
     * layout, on whole channel blocks, are the bytes they are in NCHW. */
    if (pn->mode == NODE_COPY)
        return n->op == LY_OP_SLICE ? ly_ref_slice(&call) : ly_ref_concat(&call);
    ly_status st;
    if (pn->state)
        st = ly_impl_stateful(pn->impl)->run(pn->state, &call);
    else
        st = ly_impl_run(pn->impl, &call);
    if (st != LY_OK) {
        /* the implementations after it know nothing of the folded nodes */
        if (pn->residual_folded) {
            ly_status ran = run_call(c, (size_t)c->g->values[n->in[3]].producer, slab);
            if (ran != LY_OK) return ran;
        }
        st = fall_back(c, n, pn, st, &call);
        if (st == LY_OK && pn->folded_activation != LY_ACT_NONE) {
            ly_kernel_call act;
            ly_kernel_call_init(&act);
            act.in[0] = call.out[0];
            act.out[0] = call.out[0];
            act.threads = call.threads;
            st = ly_kernel_dispatch_op(
                pn->folded_activation == LY_ACT_SILU ? LY_OP_SILU : LY_OP_SIGMOID, &act);
        }
    }
    return st == LY_OK ? LY_OK : node_error(n, st);
}

/* Node `index`, or its slab `slab` (-1: the whole node). */
static ly_status run_node(ly_graph_ctx *c, size_t index, int64_t slab)
{
    const gnode *n = &c->g->nodes[index];
    const pnode *pn = &c->plan->nodes[index];
    ly_tensor *views = c->views;
    if (pn->mode == NODE_VIEW) return LY_OK;
    if (pn->mode == NODE_JOIN) {
        /* Parts not placed in the output are copied into their range (in a
         * blocked layout a range of whole channel blocks is contiguous too). */
        char *out = views[n->out[0]].data;
        for (int k = 0; k < n->n_in; k++)
            if (pn->copy_in[k])
                memmove(out + pn->part_offset[k], views[n->in[k]].data,
                        bytes_of_view(&views[n->in[k]]));
        return LY_OK;
    }
    return run_call(c, index, slab);
}

static ly_status timed_node(ly_graph_ctx *c, size_t i, int64_t slab)
{
    double t0 = c->profile ? ly_now_ms() : 0;
    ly_status st = run_node(c, i, slab);
    if (c->profile) {
        double ms = ly_now_ms() - t0;
        c->op_ms[c->g->nodes[i].op] += ms;
        c->op_calls[c->g->nodes[i].op] += slab <= 0;
        if (c->node_ms) c->node_ms[i] += ms;
        if (c->node_calls) c->node_calls[i] += slab <= 0;
    }
    return st;
}

ly_status ly_graph_run(ly_graph_ctx *c, int n_inputs, const ly_tensor *inputs, int threads)
{
    if (!c) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_run: ctx is NULL");
    ly_status st = ly_graph_prepare(c, n_inputs, inputs, threads);
    if (st != LY_OK) return st;
    const ly_graph *g = c->g;
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i].data && ly_tensor_numel(&inputs[i]) > 0 && !g->values[g->inputs[i]].in_arena)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_run: input '%s' has no data",
                                g->input_names[i]);
    resolve_views(c, inputs);
    for (size_t i = 0; i < g->n_nodes;) {
        int32_t span = c->plan->nodes[i].span;
        if (span < 0) {
            st = timed_node(c, i, -1);
            if (st != LY_OK) return st;
            i++;
            continue;
        }
        /* depth first: each slab through the whole span */
        const pspan *s = &c->plan->spans[span];
        size_t end = (size_t)g->spans[span].end;
        for (int64_t slab = 0; slab < s->items / s->rows; slab++)
            for (size_t j = i; j < end; j++) {
                st = timed_node(c, j, slab);
                if (st != LY_OK) return st;
            }
        i = end;
    }
    return LY_OK;
}

/* ---- inspection ------------------------------------------------------------------------ */

ly_status ly_graph_get_output(const ly_graph_ctx *c, int index, ly_tensor *view, const char **name)
{
    if (!c || !view || index < 0 || (size_t)index >= c->g->n_outputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_get_output: no output %d", index);
    if (!c->plan)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_get_output: the graph has not run");
    *view = c->views[c->g->outputs[index]];
    if (name) *name = c->g->output_names[index];
    return LY_OK;
}

ly_status ly_graph_value_view(const ly_graph_ctx *c, ly_graph_value v, ly_tensor *view)
{
    if (!c || !view || v < 0 || (size_t)v >= c->g->n_values)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_value_view: no value %d", (int)v);
    if (!c->plan) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_value_view: not prepared");
    *view = c->views[v];
    return LY_OK;
}

ly_status ly_graph_get_stats(const ly_graph_ctx *c, ly_graph_stats *stats)
{
    if (!c || !stats)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_get_stats: NULL argument");
    const plan *p = c->plan;
    *stats = (ly_graph_stats){.arena_bytes = p ? p->arena_bytes : 0,
                              .arena_capacity = c->mem->capacity,
                              .unplanned_bytes = p ? p->unplanned_bytes : 0,
                              .constant_bytes = c->g->constant_bytes,
                              .arena_allocations = c->mem->allocations,
                              .plans = c->g->plans_made,
                              .nodes = (int)c->g->n_nodes,
                              .values = (int)c->g->n_values,
                              .buffers = p ? (int)p->n_buffers : 0,
                              .blocked_nodes = p ? p->blocked_nodes : 0,
                              .folded_nodes = p ? p->folded_nodes : 0};
    for (size_t i = 0; p && p->spans && i < c->g->n_spans; i++)
        stats->slab_spans += p->spans[i].rows > 0;
    return LY_OK;
}
