#include "graph/graph.h"

#include "core/core.h"
#include "libreyolo/nn.h"
#include "providers/nn_providers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

typedef enum value_kind {
    VALUE_INPUT, /* external: the caller's buffer */
    VALUE_NODE,  /* written by a node */
    VALUE_SLICE  /* a view of another value: a channel range, or a reshape */
} value_kind;

typedef ly_graph_op node_op;

typedef struct value {
    value_kind kind;
    int input_index;  /* VALUE_INPUT */
    int32_t producer; /* node index for VALUE_NODE and VALUE_SLICE */
    ly_tensor t;      /* shape after planning; data points into the arena */
    /* Storage: a view of `parent` at `offset` elements, or a buffer of its own
     * (parent LY_GRAPH_NONE). Slices are views of their source; a concat
     * input placed in its output is a view of that output. */
    ly_graph_value parent;
    int64_t offset;
    int32_t buffer;       /* planned buffer index for owners, -1 otherwise */
    bool in_concat;       /* placed in a concat's output */
    bool in_arena;        /* VALUE_INPUT: stored in the arena (ly_graph_input_in_arena) */
    int block;            /* buffer owners: channel block of the data, 0 NCHW (plan_layouts) */
    int32_t output_index; /* -1 if not a graph output */
} value;

typedef struct node {
    node_op op;
    char *name;
    int n_in;
    ly_graph_value in[LY_GRAPH_MAX_NODE_INPUTS];
    ly_graph_value out;
    ly_graph_value residual;
    const ly_tensor *weight, *bias;
    ly_graph_params params;
    int64_t slice_start, slice_count;
    int shape_ndim;                         /* reshape target / transpose rank */
    int64_t shape[LY_MAX_DIMS];             /* reshape */
    int perm[LY_MAX_DIMS];                  /* transpose */
    bool copy_in[LY_GRAPH_MAX_NODE_INPUTS]; /* concat: input copied, not placed */
    ly_graph_custom_op custom;
    void *custom_ctx;
    size_t scratch_bytes;
    int32_t scratch_buffer;
    unsigned layout;           /* conv2d: LY_NN_*_BLOCKED bits; nonzero runs the blocked provider */
    ly_nn_conv_weights packed; /* conv2d: the blocked provider's copy of the weights */
} node;

typedef struct buffer {
    size_t bytes;
    int32_t first, last; /* live range over node indices, inclusive */
    size_t offset;
} buffer;

typedef struct output {
    ly_graph_value v;
    char *name;
} output;

struct ly_graph {
    value *values;
    size_t n_values, cap_values;
    node *nodes;
    size_t n_nodes, cap_nodes;
    ly_tensor **constants;
    size_t n_constants, cap_constants;
    size_t constant_bytes;
    ly_graph_value *inputs;
    char **input_names;
    size_t n_inputs, cap_inputs, cap_input_names;
    output *outputs;
    size_t n_outputs, cap_outputs;

    /* The plan. */
    bool planned;
    bool planned_blocked; /* the plan may use blocked layouts (see blocked_wanted) */
    bool aliases_decided;
    int64_t (*planned_shapes)[LY_MAX_DIMS]; /* per input */
    buffer *buffers;
    size_t n_buffers, cap_buffers;
    size_t arena_bytes, unplanned_bytes;
    void *arena;
    size_t arena_capacity;
    size_t arena_allocations, plans;
};

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

static size_t align_up(size_t n)
{
    return (n + LY_GRAPH_ALIGN - 1) / LY_GRAPH_ALIGN * LY_GRAPH_ALIGN;
}

/* Constants of at least a page are page-aligned and sized in whole pages, so
 * that a conv's weights can give their pages back (release_weights) without
 * touching a neighbour's. */
#define CONSTANT_PAGE 4096

static size_t constant_bytes(int64_t numel, size_t *alignment)
{
    size_t bytes = align_up((size_t)numel * sizeof(float));
    if (bytes == 0) bytes = LY_GRAPH_ALIGN;
    *alignment = LY_GRAPH_ALIGN;
    if (bytes >= CONSTANT_PAGE) {
        bytes = (bytes + CONSTANT_PAGE - 1) / CONSTANT_PAGE * CONSTANT_PAGE;
        *alignment = CONSTANT_PAGE;
    }
    return bytes;
}

static bool valid_value(const ly_graph *g, ly_graph_value v)
{
    return v >= 0 && (size_t)v < g->n_values;
}

static ly_status new_value(ly_graph *g, value_kind kind, ly_graph_value *out)
{
    if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(value)))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph: out of memory");
    value *v = &g->values[g->n_values];
    *v = (value){.kind = kind,
                 .input_index = -1,
                 .producer = -1,
                 .parent = LY_GRAPH_NONE,
                 .buffer = -1,
                 .output_index = -1};
    *out = (ly_graph_value)g->n_values++;
    return LY_OK;
}

/* A node whose output value is created with it. The graph changed: any plan is void. */
static ly_status new_node(ly_graph *g, node_op op, const char *name, int n_in,
                          const ly_graph_value *in, node **out_node, ly_graph_value *out_value)
{
    const char *who = name && *name ? name : "ly_graph";
    if (!g || !out_value)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: graph or out is NULL", who);
    if (n_in < 1 || n_in > LY_GRAPH_MAX_NODE_INPUTS)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %d inputs, expected 1 to %d", who, n_in,
                            LY_GRAPH_MAX_NODE_INPUTS);
    for (int i = 0; i < n_in; i++)
        if (!in || !valid_value(g, in[i]))
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: input %d is not a value of this graph",
                                who, i);
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(node)))
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
    char *name_copy = copy_string(name);
    if (!name_copy) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
    ly_graph_value v;
    bool view = op == LY_GRAPH_OP_SLICE || op == LY_GRAPH_OP_RESHAPE;
    ly_status st = new_value(g, view ? VALUE_SLICE : VALUE_NODE, &v);
    if (st != LY_OK) {
        free(name_copy);
        return st;
    }
    node *n = &g->nodes[g->n_nodes];
    *n = (node){.op = op,
                .name = name_copy,
                .n_in = n_in,
                .out = v,
                .residual = LY_GRAPH_NONE,
                .scratch_buffer = -1};
    memcpy(n->in, in, (size_t)n_in * sizeof *in);
    memset(&n->params, 0, sizeof n->params);
    g->values[v].producer = (int32_t)g->n_nodes;
    g->n_nodes++;
    g->planned = false;
    g->aliases_decided = false;
    if (out_node) *out_node = n;
    *out_value = v;
    return LY_OK;
}

/* ---- building ---------------------------------------------------------- */

ly_status ly_graph_create(ly_graph **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_create: out is NULL");
    *out = calloc(1, sizeof(ly_graph));
    if (!*out) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_create: out of memory");
    return LY_OK;
}

void ly_graph_free(ly_graph *g)
{
    if (!g) return;
    const ly_nn_blocked_conv_provider *provider = ly_nn_blocked_conv(NULL, NULL);
    for (size_t i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        if (g->nodes[i].packed.keeper && provider) provider->forget(&g->nodes[i].packed);
        if (g->nodes[i].op == LY_GRAPH_OP_CUSTOM && g->nodes[i].custom.destroy)
            g->nodes[i].custom.destroy(g->nodes[i].custom_ctx);
    }
    for (size_t i = 0; i < g->n_constants; i++) {
        free(g->constants[i]->data);
        free(g->constants[i]);
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        free(g->input_names[i]);
    for (size_t i = 0; i < g->n_outputs; i++)
        free(g->outputs[i].name);
    free(g->values);
    free(g->nodes);
    free(g->constants);
    free(g->inputs);
    free(g->input_names);
    free(g->outputs);
    free(g->planned_shapes);
    free(g->buffers);
    free(g->arena);
    free(g);
}

ly_status ly_graph_input(ly_graph *g, const char *name, int ndim, ly_graph_value *out)
{
    if (!g || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input: graph or out is NULL");
    if (ndim < 1 || ndim > LY_MAX_DIMS)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input: ndim %d, expected 1 to %d",
                            ndim, LY_MAX_DIMS);
    size_t n = g->n_inputs + 1;
    if (!grow((void **)&g->inputs, &g->cap_inputs, n, sizeof *g->inputs) ||
        !grow((void **)&g->input_names, &g->cap_input_names, n, sizeof *g->input_names))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_input: out of memory");
    char *name_copy = copy_string(name);
    if (!name_copy) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_input: out of memory");
    ly_graph_value v;
    ly_status st = new_value(g, VALUE_INPUT, &v);
    if (st != LY_OK) {
        free(name_copy);
        return st;
    }
    g->values[v].input_index = (int)g->n_inputs;
    g->values[v].t.ndim = ndim;
    g->values[v].t.dtype = LY_F32;
    g->inputs[g->n_inputs] = v;
    g->input_names[g->n_inputs] = name_copy;
    g->n_inputs++;
    g->planned = false;
    free(g->planned_shapes);
    g->planned_shapes = NULL;
    *out = v;
    return LY_OK;
}

ly_status ly_graph_constant(ly_graph *g, int ndim, const int64_t *shape, ly_tensor *out)
{
    if (!g || !out || (ndim > 0 && !shape))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_constant: NULL argument");
    ly_tensor *t = calloc(1, sizeof *t);
    if (!t) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_constant: out of memory");
    ly_status st = ly_tensor_init(t, NULL, LY_F32, ndim, shape);
    if (st != LY_OK) {
        free(t);
        return st;
    }
    size_t alignment;
    size_t bytes = constant_bytes(ly_tensor_numel(t), &alignment);
    t->data = aligned_alloc(alignment, bytes);
    if (!t->data ||
        !grow((void **)&g->constants, &g->cap_constants, g->n_constants + 1, sizeof(ly_tensor *))) {
        free(t->data);
        free(t);
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_constant: out of memory (%zu bytes)", bytes);
    }
    memset(t->data, 0, bytes);
    g->constants[g->n_constants++] = t;
    g->constant_bytes += bytes;
    *out = *t;
    return LY_OK;
}

/* The graph-owned tensor behind a caller's copy of a constant. */
static const ly_tensor *find_constant(const ly_graph *g, const ly_tensor *t)
{
    if (!t) return NULL;
    for (size_t i = g->n_constants; i-- > 0;)
        if (g->constants[i]->data == t->data) return g->constants[i];
    return NULL;
}

ly_status ly_graph_conv2d(ly_graph *g, const char *name, ly_graph_value x, const ly_tensor *weight,
                          const ly_tensor *bias, ly_graph_value residual,
                          const ly_conv2d_params *params, ly_graph_value *out)
{
    if (!g || !params)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: graph or params is NULL", name);
    const ly_tensor *w = find_constant(g, weight), *b = find_constant(g, bias);
    if (!w || w->ndim != 4)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: weight must be a 4-d graph constant", name);
    if (bias && (!b || b->ndim != 1 || b->shape[0] != w->shape[0]))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: bias must be a graph constant of shape [%lld]", name,
                            (long long)w->shape[0]);
    if (residual != LY_GRAPH_NONE && !valid_value(g, residual))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: residual is not a value of this graph",
                            name);
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_CONV2D, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->weight = w;
    n->bias = b;
    n->residual = residual;
    n->params.conv2d = *params;
    return LY_OK;
}

static ly_status add_pool(ly_graph *g, node_op op, const char *name, ly_graph_value x,
                          const ly_pool2d_params *params, ly_graph_value *out)
{
    if (!params) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params is NULL", name);
    node *n = NULL;
    ly_status st = new_node(g, op, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->params.pool2d = *params;
    return LY_OK;
}

ly_status ly_graph_max_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out)
{
    return add_pool(g, LY_GRAPH_OP_MAX_POOL2D, name, x, params, out);
}

ly_status ly_graph_avg_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out)
{
    return add_pool(g, LY_GRAPH_OP_AVG_POOL2D, name, x, params, out);
}

ly_status ly_graph_upsample_nearest2d(ly_graph *g, const char *name, ly_graph_value x,
                                      int64_t scale, ly_graph_value *out)
{
    if (scale < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: scale %lld < 1", name, (long long)scale);
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_UPSAMPLE, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->params.upsample.scale = scale;
    return LY_OK;
}

ly_status ly_graph_silu(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out)
{
    return new_node(g, LY_GRAPH_OP_SILU, name, 1, &x, NULL, out);
}

ly_status ly_graph_sigmoid(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out)
{
    return new_node(g, LY_GRAPH_OP_SIGMOID, name, 1, &x, NULL, out);
}

ly_status ly_graph_add(ly_graph *g, const char *name, ly_graph_value a, ly_graph_value b,
                       ly_graph_value *out)
{
    ly_graph_value in[2] = {a, b};
    return new_node(g, LY_GRAPH_OP_ADD, name, 2, in, NULL, out);
}

ly_status ly_graph_resize_bilinear2d(ly_graph *g, const char *name, ly_graph_value x,
                                     int64_t height, int64_t width,
                                     const ly_resize_bilinear2d_params *params, ly_graph_value *out)
{
    if (!params) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params is NULL", name);
    if (height < 1 || width < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: output size %lldx%lld, expected >= 1", name,
                            (long long)height, (long long)width);
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_RESIZE_BILINEAR, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->params.resize = *params;
    n->params.resize.size[0] = height;
    n->params.resize.size[1] = width;
    return LY_OK;
}

ly_status ly_graph_reshape(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int64_t *shape, ly_graph_value *out)
{
    if (ndim < 1 || ndim > LY_MAX_DIMS || !shape)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: reshape to %d dimensions, expected 1 to %d",
                            name, ndim, LY_MAX_DIMS);
    int inferred = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) inferred++;
        if (shape[i] < -1 || inferred > 1)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: reshape extent %d is %lld, expected >= 0 or one -1", name, i,
                                (long long)shape[i]);
    }
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_RESHAPE, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->shape_ndim = ndim;
    memcpy(n->shape, shape, (size_t)ndim * sizeof *shape);
    return LY_OK;
}

ly_status ly_graph_transpose(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                             const int *perm, ly_graph_value *out)
{
    if (ndim < 1 || ndim > LY_MAX_DIMS || !perm)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: transpose of %d axes, expected 1 to %d",
                            name, ndim, LY_MAX_DIMS);
    bool seen[LY_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        if (perm[i] < 0 || perm[i] >= ndim || seen[perm[i]])
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: perm[%d] = %d, expected a permutation of 0..%d", name, i,
                                perm[i], ndim - 1);
        seen[perm[i]] = true;
    }
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_TRANSPOSE, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->shape_ndim = ndim;
    memcpy(n->perm, perm, (size_t)ndim * sizeof *perm);
    return LY_OK;
}

ly_status ly_graph_dfl(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out)
{
    return new_node(g, LY_GRAPH_OP_DFL, name, 1, &x, NULL, out);
}

ly_status ly_graph_concat(ly_graph *g, const char *name, int n, const ly_graph_value *inputs,
                          ly_graph_value *out)
{
    node *nd = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_CONCAT, name, n, inputs, &nd, out);
    if (st != LY_OK) return st;
    nd->params.concat.axis = 1;
    return LY_OK;
}

ly_status ly_graph_slice(ly_graph *g, const char *name, ly_graph_value x, int64_t start,
                         int64_t count, ly_graph_value *out)
{
    if (start < 0 || count < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: channel range [%lld, +%lld) is empty or negative", name,
                            (long long)start, (long long)count);
    node *n = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_SLICE, name, 1, &x, &n, out);
    if (st != LY_OK) return st;
    n->slice_start = start;
    n->slice_count = count;
    return LY_OK;
}

ly_status ly_graph_custom(ly_graph *g, const char *name, const ly_graph_custom_op *op, void *ctx,
                          int n, const ly_graph_value *inputs, ly_graph_value *out)
{
    if (!op || !op->infer || !op->run) {
        if (op && op->destroy) op->destroy(ctx);
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: custom op without infer/run", name);
    }
    node *nd = NULL;
    ly_status st = new_node(g, LY_GRAPH_OP_CUSTOM, name, n, inputs, &nd, out);
    if (st != LY_OK) {
        if (op->destroy) op->destroy(ctx);
        return st;
    }
    nd->custom = *op;
    nd->custom_ctx = ctx;
    return LY_OK;
}

ly_status ly_graph_output(ly_graph *g, ly_graph_value v, const char *name)
{
    if (!g || !valid_value(g, v))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_output: '%s' is not a value of this graph", name ? name : "");
    if (g->values[v].output_index >= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_output: '%s' is already an output",
                            name ? name : "");
    if (!grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(output)))
        return ly_set_error(LY_E_NO_MEMORY, "ly_graph_output: out of memory");
    char *name_copy = copy_string(name);
    if (!name_copy) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_output: out of memory");
    g->outputs[g->n_outputs] = (output){v, name_copy};
    g->values[v].output_index = (int32_t)g->n_outputs;
    g->n_outputs++;
    g->planned = false;
    return LY_OK;
}

/* ---- shapes ------------------------------------------------------------ */

static ly_status expect_nchw(const node *n, const ly_tensor *t, const char *operand)
{
    if (t->ndim != 4)
        return ly_set_error(LY_E_SHAPE, "%s: %s has %d dimensions, expected 4 (NCHW)", n->name,
                            operand, t->ndim);
    return LY_OK;
}

static ly_status window_extent(const node *n, int64_t in, int64_t k, int64_t s, int64_t p,
                               int64_t d, const char *axis, int64_t *out)
{
    if (k < 1 || s < 1 || p < 0 || d < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: kernel %lld, stride %lld, padding %lld, dilation %lld along %s: "
                            "expected kernel, stride, dilation >= 1 and padding >= 0",
                            n->name, (long long)k, (long long)s, (long long)p, (long long)d, axis);
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return ly_set_error(LY_E_SHAPE, "%s: input %s %lld is smaller than the window (%lld)",
                            n->name, axis, (long long)in, (long long)(d * (k - 1) + 1 - 2 * p));
    *out = span / s + 1;
    return LY_OK;
}

static ly_status infer_node(ly_graph *g, node *n)
{
    ly_tensor *o = &g->values[n->out].t;
    const ly_tensor *x = &g->values[n->in[0]].t;
    char a[96], b[96];
    o->dtype = LY_F32;
    o->data = NULL;
    switch (n->op) {
    case LY_GRAPH_OP_CONV2D: {
        ly_status st = expect_nchw(n, x, "input");
        if (st != LY_OK) return st;
        const ly_tensor *w = n->weight;
        const ly_conv2d_params *cp = &n->params.conv2d;
        int64_t groups = cp->groups;
        if (groups < 1 || w->shape[0] % groups != 0 || x->shape[1] != w->shape[1] * groups)
            return ly_set_error(
                LY_E_SHAPE,
                "%s: input %s does not fit weight %s with groups %lld (expected %lld "
                "input channels)",
                n->name, ly_shape_str(x, a, sizeof a), ly_shape_str(w, b, sizeof b),
                (long long)groups, (long long)(w->shape[1] * groups));
        int64_t ho, wo;
        st = window_extent(n, x->shape[2], w->shape[2], cp->stride[0], cp->padding[0],
                           cp->dilation[0], "height", &ho);
        if (st == LY_OK)
            st = window_extent(n, x->shape[3], w->shape[3], cp->stride[1], cp->padding[1],
                               cp->dilation[1], "width", &wo);
        if (st != LY_OK) return st;
        *o = (ly_tensor){.dtype = LY_F32, .ndim = 4, .shape = {x->shape[0], w->shape[0], ho, wo}};
        if (n->residual != LY_GRAPH_NONE) {
            const ly_tensor *r = &g->values[n->residual].t;
            if (r->ndim != 4 || memcmp(r->shape, o->shape, 4 * sizeof(int64_t)) != 0)
                return ly_set_error(LY_E_SHAPE, "%s: residual %s, expected the output's shape %s",
                                    n->name, ly_shape_str(r, a, sizeof a),
                                    ly_shape_str(o, b, sizeof b));
        }
        return LY_OK;
    }
    case LY_GRAPH_OP_MAX_POOL2D:
    case LY_GRAPH_OP_AVG_POOL2D: {
        ly_status st = expect_nchw(n, x, "input");
        int64_t ho = 0, wo = 0;
        if (st == LY_OK)
            st = window_extent(n, x->shape[2], n->params.pool2d.kernel[0],
                               n->params.pool2d.stride[0], n->params.pool2d.padding[0], 1, "height",
                               &ho);
        if (st == LY_OK)
            st = window_extent(n, x->shape[3], n->params.pool2d.kernel[1],
                               n->params.pool2d.stride[1], n->params.pool2d.padding[1], 1, "width",
                               &wo);
        if (st != LY_OK) return st;
        *o = (ly_tensor){.dtype = LY_F32, .ndim = 4, .shape = {x->shape[0], x->shape[1], ho, wo}};
        return LY_OK;
    }
    case LY_GRAPH_OP_UPSAMPLE: {
        ly_status st = expect_nchw(n, x, "input");
        if (st != LY_OK) return st;
        *o = *x;
        o->shape[2] *= n->params.upsample.scale;
        o->shape[3] *= n->params.upsample.scale;
        o->data = NULL;
        return LY_OK;
    }
    case LY_GRAPH_OP_SILU:
    case LY_GRAPH_OP_SIGMOID:
        *o = *x;
        o->data = NULL;
        return LY_OK;
    case LY_GRAPH_OP_ADD: {
        const ly_tensor *y = &g->values[n->in[1]].t;
        if (y->ndim != x->ndim || memcmp(y->shape, x->shape, (size_t)x->ndim * sizeof(int64_t)))
            return ly_set_error(LY_E_SHAPE, "%s: operands %s and %s, expected one shape", n->name,
                                ly_shape_str(x, a, sizeof a), ly_shape_str(y, b, sizeof b));
        *o = *x;
        o->data = NULL;
        return LY_OK;
    }
    case LY_GRAPH_OP_RESIZE_BILINEAR: {
        ly_status st = expect_nchw(n, x, "input");
        if (st != LY_OK) return st;
        *o = (ly_tensor){.dtype = LY_F32,
                         .ndim = 4,
                         .shape = {x->shape[0], x->shape[1], n->params.resize.size[0],
                                   n->params.resize.size[1]}};
        return LY_OK;
    }
    case LY_GRAPH_OP_RESHAPE: {
        int64_t known = 1, numel = ly_tensor_numel(x);
        int free_axis = -1;
        *o = (ly_tensor){.dtype = LY_F32, .ndim = n->shape_ndim};
        for (int i = 0; i < n->shape_ndim; i++) {
            o->shape[i] = n->shape[i];
            if (n->shape[i] == -1)
                free_axis = i;
            else if (__builtin_mul_overflow(known, n->shape[i], &known))
                known = -1;
        }
        if (free_axis >= 0 && known > 0 && numel % known == 0) o->shape[free_axis] = numel / known;
        if (ly_tensor_numel(o) != numel || (free_axis >= 0 && known <= 0))
            return ly_set_error(LY_E_SHAPE,
                                "%s: cannot view %s (%lld elements) as the %d-d shape "
                                "asked",
                                n->name, ly_shape_str(x, a, sizeof a), (long long)numel,
                                n->shape_ndim);
        return LY_OK;
    }
    case LY_GRAPH_OP_TRANSPOSE:
        if (x->ndim != n->shape_ndim)
            return ly_set_error(LY_E_SHAPE, "%s: input %s has %d dimensions, perm has %d", n->name,
                                ly_shape_str(x, a, sizeof a), x->ndim, n->shape_ndim);
        *o = (ly_tensor){.dtype = LY_F32, .ndim = x->ndim};
        for (int i = 0; i < x->ndim; i++)
            o->shape[i] = x->shape[n->perm[i]];
        return LY_OK;
    case LY_GRAPH_OP_DFL:
        if (x->ndim != 3 || x->shape[1] % 4 != 0 || x->shape[1] == 0)
            return ly_set_error(LY_E_SHAPE, "%s: input %s, expected [N, 4*R, A]", n->name,
                                ly_shape_str(x, a, sizeof a));
        *o = (ly_tensor){.dtype = LY_F32, .ndim = 3, .shape = {x->shape[0], 4, x->shape[2]}};
        return LY_OK;
    case LY_GRAPH_OP_SLICE:
        if (x->ndim < 2 || x->shape[0] != 1 || n->slice_start + n->slice_count > x->shape[1])
            return ly_set_error(LY_E_SHAPE, "%s: channels [%lld, %lld) of %s (batch 1 expected)",
                                n->name, (long long)n->slice_start,
                                (long long)(n->slice_start + n->slice_count),
                                ly_shape_str(x, a, sizeof a));
        *o = *x;
        o->shape[1] = n->slice_count;
        o->data = NULL;
        return LY_OK;
    case LY_GRAPH_OP_CONCAT: {
        if (x->ndim < 2 || x->shape[0] != 1)
            return ly_set_error(LY_E_SHAPE, "%s: input 0 %s, expected batch 1 and a channel axis",
                                n->name, ly_shape_str(x, a, sizeof a));
        *o = *x;
        o->data = NULL;
        for (int i = 1; i < n->n_in; i++) {
            const ly_tensor *y = &g->values[n->in[i]].t;
            bool fits = y->ndim == x->ndim;
            for (int d = 0; fits && d < x->ndim; d++)
                if (d != 1 && y->shape[d] != x->shape[d]) fits = false;
            if (!fits)
                return ly_set_error(
                    LY_E_SHAPE, "%s: input %d %s does not match input 0 %s except on channels",
                    n->name, i, ly_shape_str(y, a, sizeof a), ly_shape_str(x, b, sizeof b));
            o->shape[1] += y->shape[1];
        }
        return LY_OK;
    }
    case LY_GRAPH_OP_CUSTOM: {
        ly_tensor in[LY_GRAPH_MAX_NODE_INPUTS];
        for (int i = 0; i < n->n_in; i++) {
            in[i] = g->values[n->in[i]].t;
            in[i].data = NULL;
        }
        *o = (ly_tensor){.dtype = LY_F32};
        n->scratch_bytes = 0;
        ly_status st = n->custom.infer(n->custom_ctx, n->n_in, in, o, &n->scratch_bytes);
        if (st != LY_OK) return st;
        if (o->ndim < 1 || o->ndim > LY_MAX_DIMS || ly_tensor_numel(o) < 0)
            return ly_set_error(LY_E_INTERNAL, "%s: custom op inferred an invalid shape", n->name);
        o->dtype = LY_F32;
        o->data = NULL;
        return LY_OK;
    }
    }
    return ly_set_error(LY_E_INTERNAL, "%s: unknown op", n->name);
}

/* ---- planning ---------------------------------------------------------- */

static ly_graph_value root_of(const ly_graph *g, ly_graph_value v, int64_t *offset)
{
    int64_t off = 0;
    while (g->values[v].parent != LY_GRAPH_NONE) {
        off += g->values[v].offset;
        v = g->values[v].parent;
    }
    if (offset) *offset = off;
    return v;
}

static bool is_view_ancestor(const ly_graph *g, ly_graph_value ancestor, ly_graph_value v)
{
    for (; v != LY_GRAPH_NONE; v = g->values[v].parent)
        if (v == ancestor) return true;
    return false;
}

/* Which concat inputs are written in place. Depends only on the structure. */
static void decide_aliases(ly_graph *g)
{
    for (size_t i = 0; i < g->n_values; i++) {
        value *v = &g->values[i];
        v->in_concat = false;
        v->parent = LY_GRAPH_NONE;
        if (v->kind == VALUE_SLICE) v->parent = g->nodes[v->producer].in[0];
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        node *n = &g->nodes[i];
        if (n->op != LY_GRAPH_OP_CONCAT) continue;
        for (int k = 0; k < n->n_in; k++) {
            ly_graph_value in = n->in[k];
            value *v = &g->values[in];
            bool repeated = false;
            for (int j = 0; j < k; j++)
                if (n->in[j] == in) repeated = true;
            /* Only a buffer of its own, written by a node, can move into the
             * output; and never the output's own storage (a cycle). */
            bool placeable = v->kind == VALUE_NODE && !v->in_concat && !repeated &&
                             !is_view_ancestor(g, n->out, in) && !is_view_ancestor(g, in, n->out);
            n->copy_in[k] = !placeable;
            if (placeable) {
                v->in_concat = true;
                v->parent = n->out;
            }
        }
    }
    g->aliases_decided = true;
}

static void touch(ly_graph *g, ly_graph_value v, int32_t step)
{
    value *r = &g->values[root_of(g, v, NULL)];
    if (r->buffer < 0) return; /* an input: not planned */
    buffer *b = &g->buffers[r->buffer];
    if (step < b->first) b->first = step;
    if (step > b->last) b->last = step;
}

static ly_status place_buffers(ly_graph *g)
{
    size_t n = g->n_buffers;
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
    /* Largest first (ties: earliest first), by insertion sort: a few hundred buffers. */
    for (size_t i = 1; i < n; i++) {
        int32_t k = order[i];
        size_t j = i;
        while (j > 0) {
            const buffer *p = &g->buffers[order[j - 1]], *q = &g->buffers[k];
            bool before = q->bytes > p->bytes || (q->bytes == p->bytes && q->first < p->first);
            if (!before) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    size_t n_placed = 0, arena = 0;
    for (size_t i = 0; i < n; i++) {
        buffer *b = &g->buffers[order[i]];
        /* Placed buffers alive at the same time, by offset. */
        size_t m = 0;
        for (size_t j = 0; j < n_placed; j++) {
            const buffer *p = &g->buffers[placed[j]];
            if (p->first <= b->last && b->first <= p->last) {
                size_t k = m++;
                while (k > 0 && g->buffers[overlap[k - 1]].offset > p->offset) {
                    overlap[k] = overlap[k - 1];
                    k--;
                }
                overlap[k] = placed[j];
            }
        }
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, end = 0;
        for (size_t j = 0; j < m; j++) {
            const buffer *p = &g->buffers[overlap[j]];
            if (p->offset > end) {
                size_t gap = p->offset - end;
                if (gap >= b->bytes && gap < best_gap) {
                    best_gap = gap;
                    best = end;
                }
            }
            if (p->offset + p->bytes > end) end = p->offset + p->bytes;
        }
        b->offset = best != SIZE_MAX ? best : end;
        if (b->offset + b->bytes > arena) arena = b->offset + b->bytes;
        placed[n_placed++] = order[i];
    }
    free(order);
    free(placed);
    free(overlap);
    g->arena_bytes = arena;
    return LY_OK;
}

/* ---- blocked layouts ----------------------------------------------------
 *
 * oneDNN's convolutions run on 8-channel blocked data (nChw8c), and reordering
 * NCHW to that and back around every convolution cost ~11 ms of ~95 on
 * LibreYOLO9t at 640 (1 thread). So a buffer whose every writer and reader can
 * work on blocked data is kept blocked: convolutions served by the blocked
 * provider (both channel counts multiples of 8), and channel slices and
 * concats at multiples of 8 channels, which in blocked layout are the same
 * contiguous ranges as in NCHW. Anything else (pools, upsample, the decode,
 * graph inputs and outputs) sees NCHW, so the walk API's view of the graph
 * and every output keep NCHW semantics. Never while capturing for export
 * (references only), and only while the registry would give conv2d to the
 * provider that has the blocked entry (LIBREYOLO_KERNELS can change that
 * between runs: the plan is then redone). LIBREYOLO_BLOCKED=0 turns it off. */

static bool blocked_wanted(const ly_nn_blocked_conv_provider **fn_out)
{
    const char *impl = NULL, *active = NULL;
    /* Resolving first also registers the providers (on the first call). */
    if (ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &active, NULL) != LY_OK || !active)
        return false;
    const ly_nn_blocked_conv_provider *fn = ly_nn_blocked_conv(&impl, NULL);
    if (fn_out) *fn_out = fn;
    if (!fn || ly_kernels_capturing()) return false;
    const char *env = getenv("LIBREYOLO_BLOCKED");
    if (env && strcmp(env, "0") == 0) return false;
    return strcmp(active, impl) == 0;
}

static bool multiple_of_8_channels(const ly_tensor *t)
{
    return t->ndim == 4 && t->shape[0] == 1 && t->shape[1] % 8 == 0;
}

/* Whether this conv node can run on the blocked provider (for this call). */
static bool conv_blockable(const ly_graph *g, const node *n, const char *impl)
{
    const ly_tensor *x = &g->values[n->in[0]].t, *y = &g->values[n->out].t;
    /* A first layer (RGB) reads NCHW as it is and may still write blocked. */
    bool first =
        x->ndim == 4 && x->shape[0] == 1 && x->shape[1] < 8 && n->params.conv2d.groups <= 1;
    if (!(multiple_of_8_channels(x) || first) || !multiple_of_8_channels(y)) return false;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.params = &n->params;
    call.in[0] = x;
    call.in[1] = n->weight;
    call.in[2] = n->bias;
    call.in[3] = n->residual != LY_GRAPH_NONE ? &g->values[n->residual].t : NULL;
    call.out[0] = &g->values[n->out].t;
    const char *active = NULL;
    return ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), &call, &active, NULL) == LY_OK && active &&
           strcmp(active, impl) == 0;
}

static int block_of(const ly_graph *g, ly_graph_value v)
{
    return g->values[root_of(g, v, NULL)].block;
}

/* Lower v's buffer to at most `block` (16 -> 8 -> 0: every step is a valid
 * layout for fewer channel counts); true if it changed. */
static bool lower(ly_graph *g, ly_graph_value v, int block)
{
    value *r = &g->values[root_of(g, v, NULL)];
    if (r->block <= block) return false;
    r->block = block;
    return true;
}

/* Largest block (of 16, 8, 0) not above `block` that divides `channels`. */
static int fitting_block(int64_t channels, int block)
{
    if (block >= 16 && channels % 16 == 0) return 16;
    if (block >= 8 && channels % 8 == 0) return 8;
    return 0;
}

static unsigned layout_bits(int src_block, int dst_block)
{
    return (src_block == 16  ? LY_NN_SRC_BLOCKED16
            : src_block == 8 ? LY_NN_SRC_BLOCKED8
                             : 0u) |
           (dst_block == 16  ? LY_NN_DST_BLOCKED16
            : dst_block == 8 ? LY_NN_DST_BLOCKED8
                             : 0u);
}

/* Needs shapes, aliases and view offsets; sets value.block and node.layout. */
static void plan_layouts(ly_graph *g, bool want)
{
    const char *impl = NULL;
    int preferred = 0;
    ly_nn_blocked_conv(&impl, &preferred);
    bool *capable = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *capable);
    if (!capable) want = false; /* NCHW throughout is always right */
    for (size_t i = 0; i < g->n_values; i++) {
        value *v = &g->values[i];
        bool owner = want && v->kind == VALUE_NODE && v->parent == LY_GRAPH_NONE &&
                     v->output_index < 0 && v->t.ndim == 4 && v->t.shape[0] == 1;
        v->block = owner ? fitting_block(v->t.shape[1], preferred) : 0;
    }
    for (size_t i = 0; i < g->n_nodes; i++)
        g->nodes[i].layout = 0;
    if (!want) {
        free(capable);
        return;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        node *n = &g->nodes[i];
        if (n->op == LY_GRAPH_OP_CONV2D) capable[i] = conv_blockable(g, n, impl);
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        lower(g, g->outputs[i].v, 0);
    /* Blocks only go down, so this settles within a few passes. */
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < g->n_nodes; i++) {
            node *n = &g->nodes[i];
            switch (n->op) {
            case LY_GRAPH_OP_CONV2D:
                if (!capable[i]) {
                    changed |= lower(g, n->in[0], 0);
                    changed |= lower(g, n->out, 0);
                    if (n->residual != LY_GRAPH_NONE) changed |= lower(g, n->residual, 0);
                } else if (n->residual != LY_GRAPH_NONE) {
                    /* The residual is added to the output element by element. */
                    int b = block_of(g, n->residual) < block_of(g, n->out)
                                ? block_of(g, n->residual)
                                : block_of(g, n->out);
                    changed |= lower(g, n->residual, b);
                    changed |= lower(g, n->out, b);
                }
                break;
            case LY_GRAPH_OP_SLICE: {
                /* A view of whole blocks: the same range as in NCHW. */
                int b = block_of(g, n->in[0]);
                int fit = fitting_block(n->slice_start, fitting_block(n->slice_count, b));
                if (g->values[n->out].t.ndim != 4) fit = 0;
                changed |= lower(g, n->in[0], fit);
                break;
            }
            case LY_GRAPH_OP_CONCAT: {
                int b = block_of(g, n->out);
                for (int k = 0; k < n->n_in; k++) {
                    const ly_tensor *x = &g->values[n->in[k]].t;
                    int bk = x->ndim == 4 ? fitting_block(x->shape[1], block_of(g, n->in[k])) : 0;
                    if (bk < b) b = bk;
                }
                changed |= lower(g, n->out, b);
                for (int k = 0; k < n->n_in; k++)
                    changed |= lower(g, n->in[k], b);
                break;
            }
            default:
                changed |= lower(g, n->out, 0);
                for (int k = 0; k < n->n_in; k++)
                    changed |= lower(g, n->in[k], 0);
                if (n->residual != LY_GRAPH_NONE) changed |= lower(g, n->residual, 0);
                break;
            }
        }
    }
    int blocked_convs = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        node *n = &g->nodes[i];
        if (n->op != LY_GRAPH_OP_CONV2D || !capable[i]) continue;
        n->layout = layout_bits(block_of(g, n->in[0]), block_of(g, n->out));
        blocked_convs += n->layout != 0;
    }
    ly_log(LY_LOG_DEBUG, "graph: %d convolution(s) on channel-blocked data (%s, block %d)",
           blocked_convs, impl, preferred);
    free(capable);
}

static bool same_input_shapes(const ly_graph *g, int n_inputs, const ly_tensor *inputs)
{
    if (!g->planned || !g->planned_shapes || (size_t)n_inputs != g->n_inputs) return false;
    for (int i = 0; i < n_inputs; i++)
        if (memcmp(g->planned_shapes[i], inputs[i].shape,
                   (size_t)inputs[i].ndim * sizeof(int64_t)) != 0)
            return false;
    return true;
}

static ly_status check_inputs(const ly_graph *g, const char *who, int n_inputs,
                              const ly_tensor *inputs)
{
    if ((size_t)n_inputs != g->n_inputs || (n_inputs > 0 && !inputs))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %d inputs given, the graph has %zu", who,
                            n_inputs, g->n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        const value *v = &g->values[g->inputs[i]];
        /* Shapes only: a plan needs no data (run checks it). */
        if (inputs[i].dtype != LY_F32)
            return ly_set_error(LY_E_DTYPE, "%s: input '%s' is %s, expected f32", who,
                                g->input_names[i], ly_dtype_name(inputs[i].dtype));
        if (inputs[i].ndim != v->t.ndim || ly_tensor_numel(&inputs[i]) < 0)
            return ly_set_error(LY_E_SHAPE, "%s: input '%s' has %d dimensions, expected %d", who,
                                g->input_names[i], inputs[i].ndim, v->t.ndim);
    }
    return LY_OK;
}

/* Point every value into the arena (or the caller's inputs). */
static void resolve_views(ly_graph *g, const ly_tensor *inputs)
{
    for (size_t i = 0; i < g->n_values; i++) {
        int64_t off;
        ly_graph_value r = root_of(g, (ly_graph_value)i, &off);
        const value *rv = &g->values[r];
        char *base = NULL;
        /* An input kept in the arena is still read where the caller has it:
         * its bytes there are only used when the caller wrote into them
         * (ly_graph_input_buffer), so a run costs no copy. */
        if (rv->kind == VALUE_INPUT && inputs && inputs[rv->input_index].data)
            base = inputs[rv->input_index].data;
        else if (rv->kind == VALUE_INPUT && rv->buffer < 0)
            base = NULL;
        else if (rv->buffer >= 0 && g->arena)
            base = (char *)g->arena + g->buffers[rv->buffer].offset;
        g->values[i].t.data = base ? base + off * (int64_t)sizeof(float) : NULL;
    }
}

ly_status ly_graph_plan(ly_graph *g, int n_inputs, const ly_tensor *inputs)
{
    if (!g) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_plan: graph is NULL");
    ly_status st = check_inputs(g, "ly_graph_plan", n_inputs, inputs);
    if (st != LY_OK) return st;
    bool want = blocked_wanted(NULL);
    if (same_input_shapes(g, n_inputs, inputs)) {
        /* Layouts change no buffer's size: the memory plan stands. */
        if (want != g->planned_blocked) plan_layouts(g, want);
        g->planned_blocked = want;
        return LY_OK;
    }
    g->planned = false;

    for (int i = 0; i < n_inputs; i++) {
        ly_tensor *t = &g->values[g->inputs[i]].t;
        memcpy(t->shape, inputs[i].shape, sizeof t->shape);
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        st = infer_node(g, &g->nodes[i]);
        if (st != LY_OK) return st;
    }
    if (!g->aliases_decided) decide_aliases(g);

    /* Offsets of views: a slice starts at its channel range, a concat input
     * after the inputs before it. Channels are the outermost non-unit axis
     * (batch is 1), so a channel step is the product of the later axes. */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const node *n = &g->nodes[i];
        const ly_tensor *o = &g->values[n->out].t;
        int64_t inner = 1;
        for (int d = 2; d < o->ndim; d++)
            inner *= o->shape[d];
        if (n->op == LY_GRAPH_OP_SLICE) {
            g->values[n->out].offset = n->slice_start * inner;
        } else if (n->op == LY_GRAPH_OP_RESHAPE) {
            g->values[n->out].offset = 0;
        } else if (n->op == LY_GRAPH_OP_CONCAT) {
            int64_t channel = 0;
            for (int k = 0; k < n->n_in; k++) {
                if (!n->copy_in[k]) g->values[n->in[k]].offset = channel * inner;
                channel += g->values[n->in[k]].t.shape[1];
            }
        }
    }

    plan_layouts(g, want);
    g->planned_blocked = want;

    /* Buffers: one per value that owns storage, one per custom scratch. */
    g->n_buffers = 0;
    g->unplanned_bytes = 0;
    for (size_t i = 0; i < g->n_values; i++) {
        value *v = &g->values[i];
        v->buffer = -1;
        bool owner = v->kind == VALUE_NODE || (v->kind == VALUE_INPUT && v->in_arena);
        if (!owner || v->parent != LY_GRAPH_NONE) continue;
        if (!grow((void **)&g->buffers, &g->cap_buffers, g->n_buffers + 1, sizeof(buffer)))
            return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
        size_t bytes = align_up((size_t)ly_tensor_numel(&v->t) * sizeof(float));
        g->buffers[g->n_buffers] = (buffer){bytes ? bytes : LY_GRAPH_ALIGN, INT32_MAX, -1, 0};
        g->unplanned_bytes += g->buffers[g->n_buffers].bytes;
        v->buffer = (int32_t)g->n_buffers++;
    }
    int32_t end = (int32_t)g->n_nodes;
    for (size_t i = 0; i < g->n_inputs; i++) /* written before the first node */
        touch(g, g->inputs[i], 0);
    for (size_t i = 0; i < g->n_nodes; i++) {
        node *n = &g->nodes[i];
        int32_t step = (int32_t)i;
        n->scratch_buffer = -1;
        /* Views do no work: their readers keep the source alive. */
        if (n->op == LY_GRAPH_OP_SLICE || n->op == LY_GRAPH_OP_RESHAPE) continue;
        touch(g, n->out, step);
        for (int k = 0; k < n->n_in; k++)
            if (n->op != LY_GRAPH_OP_CONCAT || n->copy_in[k]) touch(g, n->in[k], step);
        if (n->residual != LY_GRAPH_NONE) touch(g, n->residual, step);
        if (n->op == LY_GRAPH_OP_CUSTOM && n->scratch_bytes > 0) {
            if (!grow((void **)&g->buffers, &g->cap_buffers, g->n_buffers + 1, sizeof(buffer)))
                return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
            g->buffers[g->n_buffers] = (buffer){align_up(n->scratch_bytes), step, step, 0};
            g->unplanned_bytes += g->buffers[g->n_buffers].bytes;
            n->scratch_buffer = (int32_t)g->n_buffers++;
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        touch(g, g->outputs[i].v, end);
    for (size_t i = 0; i < g->n_buffers; i++)
        if (g->buffers[i].first > g->buffers[i].last) /* never used: keep it valid anyway */
            g->buffers[i].first = g->buffers[i].last = end;

    st = place_buffers(g);
    if (st != LY_OK) return st;
    if (g->arena_bytes > g->arena_capacity) {
        free(g->arena);
        g->arena_capacity = 0;
        g->arena = aligned_alloc(LY_GRAPH_ALIGN, g->arena_bytes);
        if (!g->arena)
            return ly_set_error(LY_E_NO_MEMORY,
                                "ly_graph_plan: cannot allocate an arena of %zu bytes",
                                g->arena_bytes);
        g->arena_capacity = g->arena_bytes;
        g->arena_allocations++;
    }
    if (!g->planned_shapes) {
        g->planned_shapes = calloc(g->n_inputs ? g->n_inputs : 1, sizeof *g->planned_shapes);
        if (!g->planned_shapes) return ly_set_error(LY_E_NO_MEMORY, "ly_graph_plan: out of memory");
    }
    for (int i = 0; i < n_inputs; i++)
        memcpy(g->planned_shapes[i], inputs[i].shape, sizeof g->planned_shapes[i]);
    resolve_views(g, inputs);
    g->plans++;
    g->planned = true;
    return LY_OK;
}

/* ---- running ----------------------------------------------------------- */

static ly_op op_of(node_op op)
{
    switch (op) {
    case LY_GRAPH_OP_CONV2D:
        return LY_OP_CONV2D;
    case LY_GRAPH_OP_MAX_POOL2D:
        return LY_OP_MAX_POOL2D;
    case LY_GRAPH_OP_AVG_POOL2D:
        return LY_OP_AVG_POOL2D;
    case LY_GRAPH_OP_UPSAMPLE:
        return LY_OP_UPSAMPLE_NEAREST2D;
    case LY_GRAPH_OP_SILU:
        return LY_OP_SILU;
    case LY_GRAPH_OP_SIGMOID:
        return LY_OP_SIGMOID;
    case LY_GRAPH_OP_DFL:
        return LY_OP_DFL;
    case LY_GRAPH_OP_ADD:
        return LY_OP_ADD;
    case LY_GRAPH_OP_RESIZE_BILINEAR:
        return LY_OP_RESIZE_BILINEAR2D;
    default:
        return LY_OP_COUNT;
    }
}

/* y = x with axes permuted (y.shape[i] = x.shape[perm[i]]), walking y in
 * order; the innermost axis is a strided gather. */
static void transpose_copy(const ly_tensor *x, ly_tensor *y, const int *perm)
{
    int nd = x->ndim;
    int64_t numel = ly_tensor_numel(y);
    if (numel <= 0 || nd < 1) return;
    int64_t in_stride[LY_MAX_DIMS] = {0}, stride[LY_MAX_DIMS] = {0}, index[LY_MAX_DIMS] = {0};
    in_stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        in_stride[d] = in_stride[d + 1] * x->shape[d + 1];
    for (int i = 0; i < nd; i++)
        stride[i] = in_stride[perm[i]];
    const float *src = x->data;
    float *dst = y->data;
    int64_t inner = y->shape[nd - 1], step = stride[nd - 1];
    for (int64_t done = 0; done < numel; done += inner) {
        int64_t base = 0;
        for (int i = 0; i < nd - 1; i++)
            base += index[i] * stride[i];
        for (int64_t j = 0; j < inner; j++)
            dst[j] = src[base + j * step];
        dst += inner;
        for (int i = nd - 2; i >= 0; i--) {
            if (++index[i] < y->shape[i]) break;
            index[i] = 0;
        }
    }
}

/* ---- weights held packed by the blocked provider ------------------------
 *
 * Once a conv has run on the blocked provider with weights it packed into a
 * copy of its own, the plain weights are not read again by runs: their pages
 * go back to the system (LibreYOLO9t: 7.5 MiB of peak RSS). They come back,
 * reordered exactly from the packed copy, before anything else may read them:
 * another provider (LIBREYOLO_KERNELS, capture for export) and the walk API,
 * which hands out weight pointers. */

static ly_status restore_weights(const node *n)
{
    ly_nn_conv_weights *w = (ly_nn_conv_weights *)&n->packed;
    if (!w->released) return LY_OK;
    const ly_nn_blocked_conv_provider *provider = ly_nn_blocked_conv(NULL, NULL);
    if (!provider)
        return ly_set_error(LY_E_PROVIDER,
                            "%s: weights were released and no provider can "
                            "restore them",
                            n->name);
    ly_status st = provider->restore(w, n->weight->data);
    if (st != LY_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ly_last_error());
        return ly_set_error(st, "%s: %s", n->name, msg);
    }
    return LY_OK;
}

static void release_weights(const ly_graph *g, node *n)
{
#if defined(__linux__) && defined(MADV_DONTNEED)
    if (n->packed.released || !n->packed.keeper) return;
    size_t alignment;
    size_t bytes = constant_bytes(ly_tensor_numel(n->weight), &alignment);
    if (alignment != CONSTANT_PAGE || (uintptr_t)n->weight->data % CONSTANT_PAGE != 0) return;
    /* Another node on the same weights may read them on another provider. */
    for (size_t i = 0; i < g->n_nodes; i++)
        if (&g->nodes[i] != n && g->nodes[i].op == LY_GRAPH_OP_CONV2D &&
            g->nodes[i].weight == n->weight)
            return;
    if (madvise(n->weight->data, bytes, MADV_DONTNEED) == 0) n->packed.released = true;
#else
    (void)g;
    (void)n;
#endif
}

static ly_status run_node(ly_graph *g, node *n, int threads)
{
    ly_tensor *out = &g->values[n->out].t;
    switch (n->op) {
    case LY_GRAPH_OP_SLICE:
    case LY_GRAPH_OP_RESHAPE:
        return LY_OK;
    case LY_GRAPH_OP_TRANSPOSE:
        transpose_copy(&g->values[n->in[0]].t, out, n->perm);
        return LY_OK;
    case LY_GRAPH_OP_CONCAT: {
        /* Inputs placed in the output are already there; copy the others
         * (a channel range of a batch-1 tensor is one contiguous block). */
        int64_t inner = 1;
        for (int d = 2; d < out->ndim; d++)
            inner *= out->shape[d];
        int64_t channel = 0;
        for (int k = 0; k < n->n_in; k++) {
            const ly_tensor *x = &g->values[n->in[k]].t;
            if (n->copy_in[k])
                memmove((float *)out->data + channel * inner, x->data,
                        (size_t)ly_tensor_numel(x) * sizeof(float));
            channel += x->shape[1];
        }
        return LY_OK;
    }
    case LY_GRAPH_OP_CUSTOM: {
        ly_tensor in[LY_GRAPH_MAX_NODE_INPUTS];
        for (int i = 0; i < n->n_in; i++)
            in[i] = g->values[n->in[i]].t;
        void *scratch =
            n->scratch_buffer >= 0 ? (char *)g->arena + g->buffers[n->scratch_buffer].offset : NULL;
        return n->custom.run(n->custom_ctx, n->n_in, in, out, scratch, threads);
    }
    default: {
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        call.params = &n->params; /* the union's member for this op */
        call.threads = threads;
        call.in[0] = &g->values[n->in[0]].t;
        if (n->op == LY_GRAPH_OP_ADD) call.in[1] = &g->values[n->in[1]].t;
        if (n->op == LY_GRAPH_OP_CONV2D) {
            call.in[1] = n->weight;
            call.in[2] = n->bias;
            call.in[3] = n->residual != LY_GRAPH_NONE ? &g->values[n->residual].t : NULL;
        }
        call.out[0] = out;
        ly_status st;
        const ly_nn_blocked_conv_provider *blocked = NULL;
        if (n->layout && (blocked = ly_nn_blocked_conv(NULL, NULL)) != NULL) {
            st = blocked->run(&call, n->layout, &n->packed);
            if (st == LY_OK) release_weights(g, n);
        } else {
            st = n->op == LY_GRAPH_OP_CONV2D ? restore_weights(n) : LY_OK;
            if (st != LY_OK) return st;
            st = ly_kernel_dispatch_op(op_of(n->op), &call);
        }
        if (st != LY_OK) {
            /* Keep the kernel's message, say which node it was. */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ly_last_error());
            return ly_set_error(st, "%s: %s", n->name, msg);
        }
        return LY_OK;
    }
    }
}

ly_status ly_graph_run(ly_graph *g, int n_inputs, const ly_tensor *inputs, int threads)
{
    if (!g) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_run: graph is NULL");
    ly_status st = ly_graph_plan(g, n_inputs, inputs);
    if (st != LY_OK) return st;
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i].data && ly_tensor_numel(&inputs[i]) > 0)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_run: input '%s' has no data",
                                g->input_names[i]);
    resolve_views(g, inputs);
    for (size_t i = 0; i < g->n_nodes; i++) {
        st = run_node(g, &g->nodes[i], threads);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

ly_status ly_graph_input_in_arena(ly_graph *g, int index)
{
    if (!g || index < 0 || (size_t)index >= g->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input_in_arena: no input %d", index);
    value *v = &g->values[g->inputs[index]];
    if (!v->in_arena) {
        v->in_arena = true;
        g->planned = false;
    }
    return LY_OK;
}

ly_status ly_graph_input_buffer(const ly_graph *g, int index, void **data)
{
    if (!g || !data || index < 0 || (size_t)index >= g->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_input_buffer: no input %d", index);
    const value *v = &g->values[g->inputs[index]];
    if (!g->planned || v->buffer < 0 || !g->arena)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_input_buffer: input '%s' is not planned in the arena",
                            g->input_names[index]);
    *data = (char *)g->arena + g->buffers[v->buffer].offset;
    return LY_OK;
}

/* ---- inspection -------------------------------------------------------- */

int ly_graph_output_count(const ly_graph *g)
{
    return g ? (int)g->n_outputs : 0;
}

ly_status ly_graph_get_output(const ly_graph *g, int index, ly_tensor *view, const char **name)
{
    if (!g || !view || index < 0 || (size_t)index >= g->n_outputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_get_output: no output %d", index);
    if (!g->planned)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_get_output: the graph has not been planned");
    *view = g->values[g->outputs[index].v].t;
    if (name) *name = g->outputs[index].name;
    return LY_OK;
}

ly_status ly_graph_get_stats(const ly_graph *g, ly_graph_stats *stats)
{
    if (!g || !stats)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_get_stats: NULL argument");
    *stats = (ly_graph_stats){.arena_bytes = g->planned ? g->arena_bytes : 0,
                              .arena_capacity = g->arena_capacity,
                              .unplanned_bytes = g->planned ? g->unplanned_bytes : 0,
                              .constant_bytes = g->constant_bytes,
                              .arena_allocations = g->arena_allocations,
                              .plans = g->plans,
                              .nodes = (int)g->n_nodes,
                              .values = (int)g->n_values,
                              .buffers = g->planned ? (int)g->n_buffers : 0};
    return LY_OK;
}

ly_status ly_graph_value_view(const ly_graph *g, ly_graph_value v, ly_tensor *view)
{
    if (!g || !view || !valid_value(g, v))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_value_view: no value %d", (int)v);
    if (!g->planned)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_graph_value_view: the graph has not been planned");
    *view = g->values[v].t;
    return LY_OK;
}

/* ---- walking (export) ---------------------------------------------------- */

int ly_graph_node_count(const ly_graph *g)
{
    return g ? (int)g->n_nodes : 0;
}

ly_status ly_graph_node_at(const ly_graph *g, int index, ly_graph_node_info *info)
{
    if (!g || !info) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_node_at: NULL argument");
    if (index < 0 || (size_t)index >= g->n_nodes)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_graph_node_at: node %d of %zu", index,
                            g->n_nodes);
    const node *n = &g->nodes[index];
    ly_status st = restore_weights(n); /* the caller may read them */
    if (st != LY_OK) return st;
    memset(info, 0, sizeof *info);
    info->op = n->op;
    info->name = n->name;
    info->n_inputs = n->n_in;
    memcpy(info->inputs, n->in, sizeof info->inputs);
    info->output = n->out;
    info->residual = n->residual;
    info->weight = n->weight;
    info->bias = n->bias;
    info->params = n->params;
    info->slice_start = n->slice_start;
    info->slice_count = n->slice_count;
    info->custom = n->op == LY_GRAPH_OP_CUSTOM ? &n->custom : NULL;
    info->custom_ctx = n->custom_ctx;
    info->shape_ndim = n->shape_ndim;
    memcpy(info->shape, n->shape, sizeof info->shape);
    memcpy(info->perm, n->perm, sizeof info->perm);
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
    if (value) *value = g->outputs[index].v;
    if (name) *name = g->outputs[index].name;
    return LY_OK;
}
