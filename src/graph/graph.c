/* SPDX-License-Identifier: MIT */
/* Building and walking a graph (graph.h); plans live in plan.c, runs in run.c. */
#include "graph/graph_internal.h"

#include "core/core.h"
#include "ops/ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ----------------------------------------------------- */

static bool grow(void **items, size_t *cap, size_t need, size_t item_size)
{
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*items, n * item_size);
    if (!p) return false;
    memset((char *)p + *cap * item_size, 0, (n - *cap) * item_size);
    *items = p;
    *cap = n;
    return true;
}

static char *copy_string(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static bool valid_value(const ly_graph *g, ly_graph_value v)
{
    return v >= 0 && (size_t)v < g->n_values;
}

static ly_status new_value(ly_graph *g, ly_graph_value_kind kind, ly_dtype dtype,
                           ly_graph_value *out)
{
    if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(gvalue)))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph: out of memory");
    gvalue *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->dtype = dtype;
    v->producer = -1;
    v->input_index = -1;
    v->output_index = -1;
    atomic_init(&v->released, false);
    *out = (ly_graph_value)g->n_values++;
    return LY_OK;
}

/* Plans are made from the graph as it is: building more voids them. */
static void built(ly_graph *g)
{
    pthread_mutex_lock(&g->lock);
    ly_plans_clear(g);
    pthread_mutex_unlock(&g->lock);
}

/* ---- building ---------------------------------------------------------- */

ly_status ly_graph_create(ly_graph **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_create: out is NULL");
    ly_graph *g = calloc(1, sizeof *g);
    if (!g) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_create: out of memory");
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return LY_OK;
}

void ly_graph_free(ly_graph *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->lock);
    ly_graph_ctx_pool_clear_locked(g);
    ly_plans_clear(g);
    pthread_mutex_unlock(&g->lock);
    for (size_t i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].params);
    }
    for (size_t i = 0; i < g->n_values; i++)
        if (g->values[i].kind == LY_GRAPH_VALUE_CONSTANT) free(g->values[i].constant.data);
    for (size_t i = 0; i < g->n_inputs; i++)
        free(g->input_names[i]);
    for (size_t i = 0; i < g->n_outputs; i++)
        free(g->output_names[i]);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->input_names);
    free(g->outputs);
    free(g->output_names);
    free(g->spans);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

ly_status ly_graph_input(ly_graph *g, const char *name, ly_dtype dtype, int ndim,
                         ly_graph_value *out)
{
    if (!g || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input: graph or out is NULL");
    if (ndim < 0 || ndim > LY_MAX_DIMS || ly_dtype_size(dtype) == 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_input: ndim %d (expected 0 to %d) or dtype %d unknown", ndim,
                            LY_MAX_DIMS, (int)dtype);
    size_t n = g->n_inputs + 1;
    if (!grow((void **)&g->inputs, &g->cap_inputs, n, sizeof *g->inputs) ||
        !grow((void **)&g->input_names, &g->cap_input_names, n, sizeof *g->input_names))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_input: out of memory");
    char *name_copy = copy_string(name);
    if (!name_copy) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_input: out of memory");
    ly_graph_value v;
    ly_status st = new_value(g, LY_GRAPH_VALUE_INPUT, dtype, &v);
    if (st != LY_OK) {
        free(name_copy);
        return st;
    }
    g->values[v].input_index = (int)g->n_inputs;
    g->values[v].ndim = ndim;
    g->inputs[g->n_inputs] = v;
    g->input_names[g->n_inputs] = name_copy;
    g->n_inputs++;
    built(g);
    *out = v;
    return LY_OK;
}

ly_status ly_graph_input_in_arena(ly_graph *g, int index)
{
    if (!g || index < 0 || (size_t)index >= g->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input_in_arena: no input %d", index);
    g->values[g->inputs[index]].in_arena = true;
    built(g);
    return LY_OK;
}

/* Constants of at least a page are page-aligned and sized in whole pages, so a
 * constant a prepared state holds a packed copy of can give its pages back
 * (plan.c) without touching a neighbour's. */
#define CONSTANT_PAGE 4096

ly_status ly_graph_constant(ly_graph *g, ly_dtype dtype, int ndim, const int64_t *shape,
                            ly_graph_value *out, void **data)
{
    if (!g || !out || !data || (ndim > 0 && !shape))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_constant: NULL argument");
    ly_tensor t;
    ly_status st = ly_tensor_init(&t, NULL, dtype, ndim, shape);
    if (st != LY_OK) return st;
    int64_t numel = ly_tensor_numel(&t);
    size_t elem = ly_dtype_size(dtype);
    if (numel > (int64_t)(SIZE_MAX / 2 / elem))
        return ly_set_error(LY_E_SHAPE, "ly_graph_constant: the constant overflows memory");
    size_t bytes = ((size_t)numel * elem + LY_GRAPH_ALIGN - 1) / LY_GRAPH_ALIGN * LY_GRAPH_ALIGN;
    size_t alignment = LY_GRAPH_ALIGN;
    if (bytes == 0) bytes = LY_GRAPH_ALIGN;
    if (bytes >= CONSTANT_PAGE) {
        bytes = (bytes + CONSTANT_PAGE - 1) / CONSTANT_PAGE * CONSTANT_PAGE;
        alignment = CONSTANT_PAGE;
    }
    t.data = aligned_alloc(alignment, bytes);
    if (!t.data)
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_constant: out of memory (%zu bytes)", bytes);
    memset(t.data, 0, bytes);
    ly_graph_value v;
    st = new_value(g, LY_GRAPH_VALUE_CONSTANT, dtype, &v);
    if (st != LY_OK) {
        free(t.data);
        return st;
    }
    gvalue *c = &g->values[v];
    c->constant = t;
    c->ndim = ndim;
    c->constant_bytes = bytes;
    c->page_aligned = alignment == CONSTANT_PAGE;
    g->constant_bytes += bytes;
    built(g);
    *out = v;
    *data = t.data;
    return LY_OK;
}

/* A node's own copies of its name and parameters (NULL params: the op's defaults). */
static ly_status copy_name_params(const ly_op_def *def, const char *name, const void *params,
                                  const char *who, char **name_copy, void **params_copy)
{
    *name_copy = copy_string(name);
    *params_copy = malloc(def->params_size);
    if (!*name_copy || !*params_copy) {
        free(*name_copy);
        free(*params_copy);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
    }
    memcpy(*params_copy, params ? params : def->defaults, def->params_size);
    return LY_OK;
}

ly_status ly_graph_node(ly_graph *g, ly_op op, const char *name, int n_in, const ly_graph_value *in,
                        const void *params, int n_out, ly_graph_value *out)
{
    const char *who = name && *name ? name : "ly_graph_node";
    const ly_op_def *def = ly_op_def_of(op);
    if (!g || !out || !def)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: graph, out or op %d is invalid", who,
                            (int)op);
    if (n_in < 1 || n_in > LY_KERNEL_MAX_INPUTS || !in)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %d inputs, expected 1 to %d", who, n_in,
                            LY_KERNEL_MAX_INPUTS);
    if (n_out < 1 || n_out > LY_KERNEL_MAX_OUTPUTS)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %d outputs, expected 1 to %d", who, n_out,
                            LY_KERNEL_MAX_OUTPUTS);
    for (int i = 0; i < n_in; i++)
        if (in[i] != LY_GRAPH_NONE && !valid_value(g, in[i]))
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: input %d is not a value of this graph",
                                who, i);
    if (in[0] == LY_GRAPH_NONE)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: input 0 is required", who);
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(gnode)))
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
    char *name_copy = NULL;
    void *params_copy = NULL;
    ly_status copied = copy_name_params(def, name, params, who, &name_copy, &params_copy);
    if (copied != LY_OK) return copied;
    gnode n = {.op = op, .name = name_copy, .n_in = n_in, .n_out = n_out, .params = params_copy};
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        n.in[i] = i < n_in ? in[i] : LY_GRAPH_NONE;
    for (int k = 0; k < LY_KERNEL_MAX_OUTPUTS; k++)
        n.out[k] = LY_GRAPH_NONE;
    for (int k = 0; k < n_out; k++) {
        /* The dtype is the contract's, known once planned. */
        ly_status st = new_value(g, LY_GRAPH_VALUE_NODE, LY_F32, &n.out[k]);
        if (st != LY_OK) {
            free(name_copy);
            free(params_copy);
            return st;
        }
        g->values[n.out[k]].producer = (int32_t)g->n_nodes;
        g->values[n.out[k]].out_index = k;
        out[k] = n.out[k];
    }
    g->nodes[g->n_nodes++] = n;
    built(g);
    return LY_OK;
}

ly_status ly_graph_conv2d(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value weight,
                          ly_graph_value bias, ly_graph_value residual,
                          const ly_conv2d_params *params, ly_graph_value *out)
{
    if (!g || !params)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: graph or params is NULL", name);
    if (!valid_value(g, weight) || g->values[weight].kind != LY_GRAPH_VALUE_CONSTANT ||
        (bias != LY_GRAPH_NONE &&
         (!valid_value(g, bias) || g->values[bias].kind != LY_GRAPH_VALUE_CONSTANT)))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: weight and bias must be constants of this graph", name);
    ly_graph_value in[4] = {x, weight, bias, residual};
    return ly_graph_node(g, LY_OP_CONV2D, name, 4, in, params, 1, out);
}

ly_status ly_graph_max_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out)
{
    return ly_graph_node(g, LY_OP_MAX_POOL2D, name, 1, &x, params, 1, out);
}

ly_status ly_graph_avg_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out)
{
    return ly_graph_node(g, LY_OP_AVG_POOL2D, name, 1, &x, params, 1, out);
}

ly_status ly_graph_upsample_nearest2d(ly_graph *g, const char *name, ly_graph_value x,
                                      int64_t scale, ly_graph_value *out)
{
    ly_upsample_nearest2d_params p = {.scale = scale};
    return ly_graph_node(g, LY_OP_UPSAMPLE_NEAREST2D, name, 1, &x, &p, 1, out);
}

ly_status ly_graph_resize_bilinear2d(ly_graph *g, const char *name, ly_graph_value x,
                                     int64_t height, int64_t width,
                                     const ly_resize_bilinear2d_params *params, ly_graph_value *out)
{
    if (!params) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params is NULL", name);
    ly_resize_bilinear2d_params p = *params;
    p.size[0] = height;
    p.size[1] = width;
    return ly_graph_node(g, LY_OP_RESIZE_BILINEAR2D, name, 1, &x, &p, 1, out);
}

ly_status ly_graph_unary(ly_graph *g, ly_op op, const char *name, ly_graph_value x,
                         ly_graph_value *out)
{
    return ly_graph_node(g, op, name, 1, &x, NULL, 1, out);
}

ly_status ly_graph_binary(ly_graph *g, ly_op op, const char *name, ly_graph_value a,
                          ly_graph_value b, ly_graph_value *out)
{
    ly_graph_value in[2] = {a, b};
    return ly_graph_node(g, op, name, 2, in, NULL, 1, out);
}

ly_status ly_graph_concat(ly_graph *g, const char *name, int n, const ly_graph_value *inputs,
                          int64_t axis, ly_graph_value *out)
{
    ly_concat_params p = {.axis = axis};
    return ly_graph_node(g, LY_OP_CONCAT, name, n, inputs, &p, 1, out);
}

ly_status ly_graph_slice(ly_graph *g, const char *name, ly_graph_value x, int64_t axis,
                         int64_t start, int64_t count, ly_graph_value *out)
{
    if (start < 0 || count < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: slice [%lld, +%lld) is negative", name,
                            (long long)start, (long long)count);
    ly_slice_params p = {.axis = axis, .start = start, .end = start + count, .step = 1};
    return ly_graph_node(g, LY_OP_SLICE, name, 1, &x, &p, 1, out);
}

ly_status ly_graph_reshape(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int64_t *shape, ly_graph_value *out)
{
    if (ndim < 0 || ndim > LY_MAX_DIMS || (ndim > 0 && !shape))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: reshape to %d dimensions, expected 0 to %d",
                            name, ndim, LY_MAX_DIMS);
    ly_reshape_params p = {.ndim = ndim};
    for (int i = 0; i < ndim; i++)
        p.shape[i] = shape[i];
    return ly_graph_node(g, LY_OP_RESHAPE, name, 1, &x, &p, 1, out);
}

ly_status ly_graph_permute(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int *perm, ly_graph_value *out)
{
    if (ndim < 0 || ndim > LY_MAX_DIMS || (ndim > 0 && !perm))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: permute of %d axes, expected 0 to %d", name,
                            ndim, LY_MAX_DIMS);
    ly_permute_params p = {.ndim = ndim};
    for (int i = 0; i < ndim; i++)
        p.perm[i] = perm[i];
    return ly_graph_node(g, LY_OP_PERMUTE, name, 1, &x, &p, 1, out);
}

ly_status ly_graph_output(ly_graph *g, ly_graph_value v, const char *name)
{
    if (!g || !valid_value(g, v))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_output: '%s' is not a value of this graph", name ? name : "");
    if (g->values[v].output_index >= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_output: '%s' is already an output",
                            name ? name : "");
    size_t n = g->n_outputs + 1;
    if (!grow((void **)&g->outputs, &g->cap_outputs, n, sizeof *g->outputs) ||
        !grow((void **)&g->output_names, &g->cap_output_names, n, sizeof *g->output_names))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_output: out of memory");
    char *name_copy = copy_string(name);
    if (!name_copy) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_output: out of memory");
    g->outputs[g->n_outputs] = v;
    g->output_names[g->n_outputs] = name_copy;
    g->values[v].output_index = (int)g->n_outputs;
    g->n_outputs++;
    built(g);
    return LY_OK;
}

ly_status ly_graph_item_span(ly_graph *g, const ly_item_span *span)
{
    if (!g || !span || span->first < 0 || span->end <= span->first ||
        (size_t)span->end > g->n_nodes || span->n_sliced < 0 ||
        span->n_sliced > LY_GRAPH_SPAN_VALUES || span->n_whole < 0 ||
        span->n_whole > LY_GRAPH_SPAN_VALUES)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_item_span: nodes [%d, %d), %d sliced or %d whole invalid",
                            span ? span->first : 0, span ? span->end : 0, span ? span->n_sliced : 0,
                            span ? span->n_whole : 0);
    for (int i = 0; i < span->n_sliced; i++)
        if (!valid_value(g, span->sliced[i]) ||
            g->values[span->sliced[i]].kind != LY_GRAPH_VALUE_CONSTANT)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "ly_graph_item_span: sliced value %d is not a constant", i);
    for (int i = 0; i < span->n_whole; i++)
        if (!valid_value(g, span->whole[i]) ||
            g->values[span->whole[i]].kind == LY_GRAPH_VALUE_CONSTANT)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "ly_graph_item_span: whole value %d is not a node's or an input",
                                i);
    for (size_t i = 0; i < g->n_spans; i++)
        if (span->first < g->spans[i].end && g->spans[i].first < span->end)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "ly_graph_item_span: nodes [%d, %d) overlap another span",
                                span->first, span->end);
    if (!grow((void **)&g->spans, &g->cap_spans, g->n_spans + 1, sizeof *g->spans))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_item_span: out of memory");
    g->spans[g->n_spans++] = *span;
    built(g);
    return LY_OK;
}

/* ---- rewriting ----------------------------------------------------------- */

ly_status ly_graph_node_replace(ly_graph *g, int index, ly_op op, const char *name, int n_in,
                                const ly_graph_value *in, const void *params)
{
    const char *who = name && *name ? name : "ly_graph_node_replace";
    const ly_op_def *def = ly_op_def_of(op);
    if (!g || !def || index < 0 || (size_t)index >= g->n_nodes || !in || n_in < 1 ||
        n_in > LY_KERNEL_MAX_INPUTS || in[0] == LY_GRAPH_NONE)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: node %d, op %d or inputs invalid", who,
                            index, (int)op);
    for (int i = 0; i < n_in; i++) {
        if (in[i] == LY_GRAPH_NONE) continue;
        if (!valid_value(g, in[i]) ||
            (g->values[in[i]].kind == LY_GRAPH_VALUE_NODE && g->values[in[i]].producer >= index))
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: input %d is not a value made before node %d", who, i, index);
    }
    char *name_copy = NULL;
    void *params_copy = NULL;
    ly_status copied = copy_name_params(def, name, params, who, &name_copy, &params_copy);
    if (copied != LY_OK) return copied;
    gnode *n = &g->nodes[index];
    free(n->name);
    free(n->params);
    n->op = op;
    n->name = name_copy;
    n->params = params_copy;
    n->n_in = n_in;
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        n->in[i] = i < n_in ? in[i] : LY_GRAPH_NONE;
    g->n_spans = 0; /* what a span promised of its nodes may not hold any more */
    built(g);
    return LY_OK;
}

ly_status ly_graph_prune(ly_graph *g, int *removed)
{
    if (!g) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_prune: graph is NULL");
    size_t nv = g->n_values, nn = g->n_nodes;
    bool *read = calloc(nv ? nv : 1, sizeof *read), *live = calloc(nn ? nn : 1, sizeof *live);
    ly_graph_value *renumber = malloc((nv ? nv : 1) * sizeof *renumber);
    int32_t *node_at = malloc((nn ? nn : 1) * sizeof *node_at);
    if (!read || !live || !renumber || !node_at) {
        free(read);
        free(live);
        free(renumber);
        free(node_at);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_prune: out of memory");
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        read[g->outputs[i]] = true;
    for (size_t i = nn; i-- > 0;) {
        const gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++)
            live[i] |= read[n->out[k]];
        for (int k = 0; live[i] && k < n->n_in; k++)
            if (n->in[k] != LY_GRAPH_NONE) read[n->in[k]] = true;
    }
    size_t kept_nodes = 0;
    for (size_t i = 0; i < nn; i++) {
        node_at[i] = live[i] ? (int32_t)kept_nodes : -1;
        if (live[i]) {
            g->nodes[kept_nodes++] = g->nodes[i];
        } else {
            free(g->nodes[i].name);
            free(g->nodes[i].params);
        }
    }
    size_t kept_values = 0;
    for (size_t v = 0; v < nv; v++) {
        gvalue *x = &g->values[v];
        bool keep = x->kind == LY_GRAPH_VALUE_INPUT ||
                    (x->kind == LY_GRAPH_VALUE_CONSTANT && read[v]) ||
                    (x->kind == LY_GRAPH_VALUE_NODE && node_at[x->producer] >= 0);
        renumber[v] = keep ? (ly_graph_value)kept_values : LY_GRAPH_NONE;
        if (!keep) {
            if (x->kind == LY_GRAPH_VALUE_CONSTANT) {
                free(x->constant.data);
                g->constant_bytes -= x->constant_bytes;
            }
            continue;
        }
        if (x->kind == LY_GRAPH_VALUE_NODE) x->producer = node_at[x->producer];
        /* A plain copy: no plan exists yet, so nothing reads `released` meanwhile. */
        if (kept_values != v) memcpy(&g->values[kept_values], x, sizeof *x);
        kept_values++;
    }
    for (size_t i = 0; i < kept_nodes; i++) {
        gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] != LY_GRAPH_NONE) n->in[k] = renumber[n->in[k]];
        for (int k = 0; k < n->n_out; k++)
            n->out[k] = renumber[n->out[k]];
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        g->inputs[i] = renumber[g->inputs[i]];
    for (size_t i = 0; i < g->n_outputs; i++)
        g->outputs[i] = renumber[g->outputs[i]];
    if (removed) *removed = (int)(nn - kept_nodes);
    /* Spans name nodes and values by number: a rewritten graph runs whole. */
    g->n_spans = 0;
    g->n_nodes = kept_nodes;
    g->n_values = kept_values;
    free(read);
    free(live);
    free(renumber);
    free(node_at);
    built(g);
    return LY_OK;
}

/* ---- constants given back -------------------------------------------------- */

ly_status ly_graph_constant_restore_locked(ly_graph *g, ly_graph_value v)
{
    gvalue *c = &g->values[v];
    if (!atomic_load(&c->released)) return LY_OK;
    plan *keeper = c->keeper;
    const pnode *n = &keeper->nodes[c->keeper_node];
    ly_status st =
        ly_impl_stateful(n->impl)->restore_constant(n->state, c->keeper_input, c->constant.data);
    if (st != LY_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ly_last_error());
        return ly_set_error(st, "ly_graph: restoring a constant whose pages were given back: %s",
                            msg);
    }
    c->keeper = NULL;
    atomic_store_explicit(&c->released, false, memory_order_release);
    /* The keeper held a reference for this constant; dropped under the lock. */
    if (atomic_fetch_sub(&keeper->refs, 1) == 1) ly_plan_free_locked(g, keeper);
    return LY_OK;
}

ly_status ly_graph_constant_data(ly_graph *g, ly_graph_value v, const ly_tensor **out)
{
    gvalue *c = &g->values[v];
    ly_status st = LY_OK;
    if (atomic_load_explicit(&c->released, memory_order_acquire)) {
        pthread_mutex_lock(&g->lock);
        st = ly_graph_constant_restore_locked(g, v);
        pthread_mutex_unlock(&g->lock);
    }
    *out = &c->constant;
    return st;
}

/* ---- walking ---------------------------------------------------------------- */

int ly_graph_output_count(const ly_graph *g)
{
    return g ? (int)g->n_outputs : 0;
}

int ly_graph_node_count(const ly_graph *g)
{
    return g ? (int)g->n_nodes : 0;
}

int ly_graph_value_count(const ly_graph *g)
{
    return g ? (int)g->n_values : 0;
}

ly_status ly_graph_value_at(const ly_graph *g, ly_graph_value v, ly_graph_value_info *info)
{
    if (!g || !info || !valid_value(g, v))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_value_at: no value %d", (int)v);
    const gvalue *x = &g->values[v];
    *info = (ly_graph_value_info){.kind = x->kind,
                                  .dtype = x->dtype,
                                  .producer = x->producer,
                                  .output_index = x->output_index};
    if (x->kind == LY_GRAPH_VALUE_CONSTANT) {
        info->ndim = x->constant.ndim;
        memcpy(info->shape, x->constant.shape, sizeof info->shape);
    } else if (x->kind == LY_GRAPH_VALUE_INPUT) {
        info->ndim = x->ndim;
    }
    return LY_OK;
}

ly_status ly_graph_constant_read(ly_graph *g, ly_graph_value v, const ly_tensor **data)
{
    if (!g || !data || !valid_value(g, v) || g->values[v].kind != LY_GRAPH_VALUE_CONSTANT)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_constant_read: value %d is not a "
                            "constant",
                            (int)v);
    return ly_graph_constant_data(g, v, data);
}

ly_status ly_graph_node_at(const ly_graph *g, int index, ly_graph_node_info *info)
{
    if (!g || !info) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_node_at: NULL argument");
    if (index < 0 || (size_t)index >= g->n_nodes)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_node_at: node %d of %zu", index,
                            g->n_nodes);
    const gnode *n = &g->nodes[index];
    memset(info, 0, sizeof *info);
    info->op = n->op;
    info->name = n->name;
    info->n_inputs = n->n_in;
    memcpy(info->inputs, n->in, sizeof info->inputs);
    info->n_outputs = n->n_out;
    memcpy(info->outputs, n->out, sizeof info->outputs);
    info->params = n->params;
    return LY_OK;
}

int ly_graph_input_count(const ly_graph *g)
{
    return g ? (int)g->n_inputs : 0;
}

ly_status ly_graph_input_at(const ly_graph *g, int index, ly_graph_value *value, const char **name)
{
    if (!g || index < 0 || (size_t)index >= g->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input_at: no input %d", index);
    if (value) *value = g->inputs[index];
    if (name) *name = g->input_names[index];
    return LY_OK;
}

ly_status ly_graph_output_value(const ly_graph *g, int index, ly_graph_value *value,
                                const char **name)
{
    if (!g || index < 0 || (size_t)index >= g->n_outputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_output_value: no output %d", index);
    if (value) *value = g->outputs[index];
    if (name) *name = g->output_names[index];
    return LY_OK;
}
