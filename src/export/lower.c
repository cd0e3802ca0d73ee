/* SPDX-License-Identifier: MIT */
/* A model graph lowered to an ExecuTorch program with the XNNPACK delegate (see lower.h). */
#include "export/lower.h"

#include "core/core.h"
#include "pte/pte.h"
#include "ops/ops_internal.h"
#include "ops/shape/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE_ID LY_XNN_INVALID_ID

enum { LOGICAL = 0, CHANNELS_LAST = 1 };

/* ---- memory ---------------------------------------------------------------- */

typedef struct arena {
    void **blocks;
    size_t n, cap;
    bool failed;
} arena;

static void *arena_calloc(arena *a, size_t count, size_t size)
{
    if (a->failed) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        void **p = realloc(a->blocks, cap * sizeof *p);
        if (!p) {
            a->failed = true;
            return NULL;
        }
        a->blocks = p;
        a->cap = cap;
    }
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        a->failed = true;
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    *a = (arena){0};
}

/* Grow *items (of `size` bytes each) to hold one more; false when out of memory. */
static bool grow(void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, c * size);
    if (!p) return false;
    memset((char *)p + *cap * size, 0, (c - *cap) * size);
    *items = p;
    *cap = c;
    return true;
}

#define GROW(arr, n, cap) grow((void **)&(arr), &(cap), (n), sizeof *(arr))

/* ---- the lowering state ---------------------------------------------------- */

typedef struct gnode {
    ly_graph_node_info info;
    bool portable;
    bool folded; /* computed here into a constant (LY_LOWER_FOLD) */
    int part;    /* delegated: partition; portable: level (runs after partition `part`) */
} gnode;

typedef struct ptensor {
    int evalue;
    uint64_t nbytes;
    int first, last; /* instruction range where it is live */
} ptensor;

typedef struct named_entry {
    char *key;
    const void *data;
    size_t size;
} named_entry;

typedef struct lower {
    ly_graph *g;
    arena mem;
    int n_nodes, n_values;
    gnode *nodes;
    ly_tensor *shape; /* per value */
    int *producer;    /* per value: node index, -1 graph input, -2 none, CONSTANT */
    /* Per value: the data of constants and folded nodes' outputs (logical
     * order), NULL for everything computed by the program. */
    const float **known;
    bool *exported; /* per value: an exported graph output */
    int *pvalue;    /* per value: program EValue index or -1 */
    /* program */
    ly_pte_evalue *values;
    size_t n_pvalues, cap_pvalues;
    ly_pte_instruction *instr;
    size_t n_instr, cap_instr;
    ly_pte_operator ops[16];
    size_t n_ops;
    ly_pte_delegate *delegates;
    size_t n_delegates, cap_delegates;
    ly_pte_bytes *blobs; /* delegate payloads, owned (malloc'd) */
    size_t n_blobs, cap_blobs;
    named_entry *named;
    size_t n_named, cap_named;
    ptensor *pt;
    size_t n_pt, cap_pt;
    int32_t *inputs, *outputs;
    size_t n_inputs, n_outputs;
    int kernel_calls;
    /* The constant segment: program-level constants (what partitions read but
     * XNNPACK does not pack), each 16-aligned; offsets[0] is the placeholder. */
    uint8_t *const_seg;
    size_t const_seg_size, const_seg_cap;
    uint64_t *const_offsets;
    size_t n_const_offsets, cap_const_offsets;
} lower;

enum { CONSTANT = -3 }; /* lower.producer of constants and folded values */

static ly_status oom(void)
{
    return ly_set_error(LY_E_NO_MEMORY, "export: out of memory");
}

static int64_t numel_of(const ly_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* ---- program values ---------------------------------------------------------- */

static int add_evalue(lower *L, ly_pte_evalue v)
{
    if (!GROW(L->values, L->n_pvalues, L->cap_pvalues)) return -1;
    L->values[L->n_pvalues] = v;
    return (int)L->n_pvalues++;
}

/* An NCHW (contiguous) f32 tensor, memory-planned later. */
/* The program's scalar type of a graph dtype (f32, or i64 indices). */
static int scalar_type_of(ly_dtype dtype)
{
    return dtype == LY_I64 ? LY_PTE_LONG : LY_PTE_FLOAT;
}

static size_t tensor_bytes(const ly_tensor *t)
{
    return (size_t)numel_of(t) * ly_pte_scalar_size(scalar_type_of(t->dtype));
}

static int add_tensor_value(lower *L, const ly_tensor *shape)
{
    int32_t *sizes = arena_calloc(&L->mem, (size_t)shape->ndim, sizeof *sizes);
    uint8_t *order = arena_calloc(&L->mem, (size_t)shape->ndim, 1);
    if (!sizes || !order) return -1;
    for (int i = 0; i < shape->ndim; i++) {
        sizes[i] = (int32_t)shape->shape[i];
        order[i] = (uint8_t)i;
    }
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_TENSOR};
    v.u.tensor = (ly_pte_tensor){.scalar_type = scalar_type_of(shape->dtype),
                                 .sizes = sizes,
                                 .n_sizes = (size_t)shape->ndim,
                                 .dim_order = order,
                                 .n_dim_order = (size_t)shape->ndim,
                                 .allocation_info = {.present = true, .memory_id = 1},
                                 .shape_dynamism = LY_PTE_STATIC};
    int id = add_evalue(L, v);
    if (id < 0 || !GROW(L->pt, L->n_pt, L->cap_pt)) return -1;
    L->pt[L->n_pt++] =
        (ptensor){.evalue = id, .nbytes = (uint64_t)tensor_bytes(shape), .first = -1, .last = -1};
    return id;
}

/* A program-level constant holding known value `v` (logical order), its
 * bytes in the constant segment: the program keeps them loaded for as long as
 * it lives, which XNNPACK's unpacked operands need (executorch.md: before
 * 1.4.1 the delegate frees the named data it loaded once its runtime exists). */
static int add_constant_value(lower *L, ly_graph_value v)
{
    const ly_tensor *shape = &L->shape[v];
    size_t bytes = tensor_bytes(shape);
    size_t at = (L->const_seg_size + 15) / 16 * 16;
    if (at + bytes > L->const_seg_cap) {
        size_t cap = L->const_seg_cap ? 2 * L->const_seg_cap : 4096;
        while (cap < at + bytes)
            cap *= 2;
        uint8_t *grown = realloc(L->const_seg, cap);
        if (!grown) return -1;
        memset(grown + L->const_seg_cap, 0, cap - L->const_seg_cap);
        L->const_seg = grown;
        L->const_seg_cap = cap;
    }
    memcpy(L->const_seg + at, L->known[v], bytes);
    L->const_seg_size = at + bytes;
    if (L->n_const_offsets == 0) {
        if (!GROW(L->const_offsets, L->n_const_offsets, L->cap_const_offsets)) return -1;
        L->const_offsets[L->n_const_offsets++] = 0; /* the placeholder */
    }
    if (!GROW(L->const_offsets, L->n_const_offsets, L->cap_const_offsets)) return -1;
    uint32_t index = (uint32_t)L->n_const_offsets;
    L->const_offsets[L->n_const_offsets++] = at;
    int32_t *sizes = arena_calloc(&L->mem, (size_t)shape->ndim, sizeof *sizes);
    uint8_t *order = arena_calloc(&L->mem, (size_t)shape->ndim, 1);
    if (!sizes || !order) return -1;
    for (int i = 0; i < shape->ndim; i++) {
        sizes[i] = (int32_t)shape->shape[i];
        order[i] = (uint8_t)i;
    }
    ly_pte_evalue ev = {.type = LY_PTE_EVALUE_TENSOR};
    ev.u.tensor = (ly_pte_tensor){.scalar_type = scalar_type_of(shape->dtype),
                                  .sizes = sizes,
                                  .n_sizes = (size_t)shape->ndim,
                                  .dim_order = order,
                                  .n_dim_order = (size_t)shape->ndim,
                                  .data_buffer_idx = index,
                                  .shape_dynamism = LY_PTE_STATIC};
    return add_evalue(L, ev);
}

static ly_pte_instruction *add_instr(lower *L)
{
    if (!GROW(L->instr, L->n_instr, L->cap_instr)) return NULL;
    ly_pte_instruction *in = &L->instr[L->n_instr++];
    memset(in, 0, sizeof *in);
    return in;
}

static int op_index(lower *L, const char *name, const char *overload)
{
    for (size_t i = 0; i < L->n_ops; i++)
        if (strcmp(L->ops[i].name, name) == 0 && strcmp(L->ops[i].overload, overload) == 0)
            return (int)i;
    if (L->n_ops == sizeof L->ops / sizeof L->ops[0]) return -1;
    L->ops[L->n_ops] = (ly_pte_operator){name, overload};
    return (int)L->n_ops++;
}

/* Record that program value `evalue` is used (or defined) by instruction `at`. */
static void touch(lower *L, int evalue, int at)
{
    for (size_t i = 0; i < L->n_pt; i++)
        if (L->pt[i].evalue == evalue) {
            ptensor *p = &L->pt[i];
            if (p->first < 0 || at < p->first) p->first = at;
            if (at > p->last) p->last = at;
            return;
        }
}

/* ---- named data -------------------------------------------------------------- */

static ly_status add_named(lower *L, const char *name, const void *data, size_t size,
                           const char **key_out)
{
    size_t cap = strlen(name) + 80;
    char *key = arena_calloc(&L->mem, cap, 1);
    if (!key) return oom();
    ly_status st = ly_pte_named_key(name, data, size, key, cap);
    if (st != LY_OK) return st;
    for (size_t i = 0; i < L->n_named; i++)
        if (strcmp(L->named[i].key, key) == 0) {
            *key_out = L->named[i].key;
            return LY_OK;
        }
    if (!GROW(L->named, L->n_named, L->cap_named)) return oom();
    L->named[L->n_named++] = (named_entry){key, data, size};
    *key_out = key;
    return LY_OK;
}

/* ---- one delegated partition as an XNNGraph ------------------------------------ */

typedef struct xgraph {
    lower *L;
    int part;
    ly_xnn_value *v;
    size_t n_v, cap_v;
    ly_xnn_node *n;
    size_t n_n, cap_n;
    ly_xnn_constant_data *c;
    size_t n_c, cap_c;
    uint32_t (*xid)[2];    /* per graph value and layout */
    int *ext_in, *ext_out; /* graph values */
    size_t n_in, n_out;
    uint32_t *in_ids, *out_ids;
    ly_status st;
    uint32_t proj_id; /* the DFL projection [1, 16], shared */
    const char *node_name;
} xgraph;

static bool cl_rank(int ndim)
{
    return ndim == 3 || ndim == 4;
}

/* Dims of graph value `v` in `layout`. */
static int dims_of(const ly_tensor *s, int layout, uint32_t *dims)
{
    int nd = s->ndim;
    if (layout == CHANNELS_LAST && nd == 4) {
        int64_t d[4] = {s->shape[0], s->shape[2], s->shape[3], s->shape[1]};
        for (int i = 0; i < 4; i++)
            dims[i] = (uint32_t)d[i];
    } else if (layout == CHANNELS_LAST && nd == 3) {
        dims[0] = (uint32_t)s->shape[0];
        dims[1] = (uint32_t)s->shape[2];
        dims[2] = (uint32_t)s->shape[1];
    } else {
        for (int i = 0; i < nd; i++)
            dims[i] = (uint32_t)s->shape[i];
    }
    return nd;
}

static uint32_t new_value(xgraph *x, int ndim, const uint32_t *dims, uint32_t external_id,
                          uint32_t flags)
{
    if (x->st != LY_OK) return NONE_ID;
    uint32_t *d = arena_calloc(&x->L->mem, (size_t)ndim, sizeof *d);
    if (!d || !GROW(x->v, x->n_v, x->cap_v)) {
        x->st = oom();
        return NONE_ID;
    }
    memcpy(d, dims, (size_t)ndim * sizeof *d);
    uint32_t id = (uint32_t)x->n_v++;
    x->v[id] = (ly_xnn_value){.type = LY_XNN_TENSOR_VALUE,
                              .tensor = {.datatype = LY_XNN_DT_FP32,
                                         .num_dims = (uint32_t)ndim,
                                         .dims = d,
                                         .n_dims = (size_t)ndim,
                                         .external_id = external_id,
                                         .flags = flags,
                                         .id_out = id}};
    return id;
}

static uint32_t new_internal(xgraph *x, int ndim, const uint32_t *dims)
{
    return new_value(x, ndim, dims, NONE_ID, 0);
}

/* A constant tensor whose bytes go to named data. `data` must outlive the lowering. */
static uint32_t new_const(xgraph *x, const char *name, int ndim, const uint32_t *dims,
                          const void *data, size_t size)
{
    if (x->st != LY_OK) return NONE_ID;
    const char *key = NULL;
    ly_status st = add_named(x->L, name, data, size, &key);
    if (st != LY_OK || !GROW(x->c, x->n_c, x->cap_c)) {
        x->st = st != LY_OK ? st : oom();
        return NONE_ID;
    }
    uint32_t index = (uint32_t)x->n_c++;
    x->c[index] = (ly_xnn_constant_data){.offset = UINT64_MAX, .size = size, .named_key = key};
    uint32_t id = new_internal(x, ndim, dims);
    if (id != NONE_ID) x->v[id].tensor.constant_buffer_idx = index;
    return id;
}

static ly_xnn_node *new_node(xgraph *x, ly_xnn_node_type type)
{
    if (x->st != LY_OK) return NULL;
    if (!GROW(x->n, x->n_n, x->cap_n)) {
        x->st = oom();
        return NULL;
    }
    ly_xnn_node *n = &x->n[x->n_n];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->debug_handle = (uint32_t)++x->n_n;
    return n;
}

static void node_1x1(xgraph *x, ly_xnn_node_type type, uint32_t in, uint32_t out)
{
    ly_xnn_node *n = new_node(x, type);
    if (n) n->u.n1x1 = (__typeof__(n->u.n1x1)){in, out, 0};
}

static void node_2x1(xgraph *x, ly_xnn_node_type type, uint32_t a, uint32_t b, uint32_t out)
{
    ly_xnn_node *n = new_node(x, type);
    if (n) n->u.n2x1 = (__typeof__(n->u.n2x1)){a, b, out, 0};
}

static void node_transpose(xgraph *x, uint32_t in, uint32_t out, int nd, const uint32_t *perm)
{
    uint32_t *p = arena_calloc(&x->L->mem, (size_t)nd, sizeof *p);
    ly_xnn_node *n = new_node(x, LY_XNN_STATIC_TRANSPOSE);
    if (!p) x->st = oom();
    if (!n || !p) return;
    memcpy(p, perm, (size_t)nd * sizeof *p);
    n->u.transpose.num_dims = (uint32_t)nd;
    n->u.transpose.perm = p;
    n->u.transpose.n_perm = (size_t)nd;
    n->u.transpose.input_id = in;
    n->u.transpose.output_id = out;
}

static void node_reshape(xgraph *x, uint32_t in, uint32_t out, int nd, const uint32_t *shape)
{
    uint32_t *p = arena_calloc(&x->L->mem, (size_t)nd, sizeof *p);
    ly_xnn_node *n = new_node(x, LY_XNN_STATIC_RESHAPE);
    if (!p) x->st = oom();
    if (!n || !p) return;
    memcpy(p, shape, (size_t)nd * sizeof *p);
    n->u.reshape.num_dims = (uint32_t)nd;
    n->u.reshape.new_shape = p;
    n->u.reshape.n_new_shape = (size_t)nd;
    n->u.reshape.input_id = in;
    n->u.reshape.output_id = out;
}

static void node_slice(xgraph *x, uint32_t in, uint32_t out, int nd, const uint32_t *offsets,
                       const uint32_t *sizes)
{
    uint32_t *o = arena_calloc(&x->L->mem, (size_t)nd, sizeof *o);
    uint32_t *s = arena_calloc(&x->L->mem, (size_t)nd, sizeof *s);
    ly_xnn_node *n = new_node(x, LY_XNN_STATIC_SLICE);
    if (!o || !s) x->st = oom();
    if (!n || !o || !s) return;
    memcpy(o, offsets, (size_t)nd * sizeof *o);
    memcpy(s, sizes, (size_t)nd * sizeof *s);
    n->u.slice = (__typeof__(n->u.slice)){.num_dims = (uint32_t)nd,
                                          .offsets = o,
                                          .n_offsets = (size_t)nd,
                                          .sizes = s,
                                          .n_sizes = (size_t)nd,
                                          .input_id = in,
                                          .output_id = out};
}

/* Concatenate n inputs on `axis` into `out` (chained by fours, as XNNPACK's
 * Concatenate2..4 take). `dims` are the output's. */
static void node_concat(xgraph *x, int n, const uint32_t *in, uint32_t out, int nd,
                        const uint32_t *dims, uint32_t axis, const uint32_t *widths)
{
    uint32_t acc = in[0], acc_width = widths[0];
    int i = 1;
    while (i < n && x->st == LY_OK) {
        int take = n - i < 3 ? n - i : 3;
        if (take + 1 < 2) break;
        bool last = i + take == n;
        uint32_t width = acc_width;
        for (int k = 0; k < take; k++)
            width += widths[i + k];
        uint32_t target = out;
        if (!last) {
            uint32_t d[LY_MAX_DIMS] = {0};
            memcpy(d, dims, (size_t)nd * sizeof *d);
            d[axis] = width;
            target = new_internal(x, nd, d);
        }
        static const ly_xnn_node_type types[] = {LY_XNN_CONCATENATE2, LY_XNN_CONCATENATE3,
                                                 LY_XNN_CONCATENATE4};
        ly_xnn_node *node = new_node(x, types[take - 1]);
        if (!node) return;
        uint32_t ids[4] = {acc, NONE_ID, NONE_ID, NONE_ID};
        for (int k = 0; k < take; k++)
            ids[k + 1] = in[i + k];
        node->u.cat = (__typeof__(node->u.cat)){.axis = axis,
                                                .input1_id = ids[0],
                                                .input2_id = ids[1],
                                                .input3_id = ids[2],
                                                .input4_id = ids[3],
                                                .output_id = target,
                                                .input5_id = NONE_ID};
        acc = target;
        acc_width = width;
        i += take;
    }
}

static char *const_name(xgraph *x, const char *node, const char *what)
{
    size_t n = strlen(node) + strlen(what) + 2;
    char *s = arena_calloc(&x->L->mem, n, 1);
    if (!s) {
        x->st = oom();
        return NULL;
    }
    snprintf(s, n, "%s_%s", node, what);
    for (char *p = s; *p; p++)
        if (*p == '.') *p = '_';
    return s;
}

static const uint32_t to_cl4[4] = {0, 2, 3, 1}, from_cl4[4] = {0, 3, 1, 2};
static const uint32_t swap3[3] = {0, 2, 1};

/* Where logical axis `axis` of an `ndim`-d value sits in `layout`. */
static uint32_t layout_axis(int ndim, int layout, int64_t axis)
{
    if (layout != CHANNELS_LAST || !cl_rank(ndim)) return (uint32_t)axis;
    if (ndim == 3) return (uint32_t)swap3[axis];
    return (uint32_t)from_cl4[axis];
}

/* Graph value `v` in `layout`, converting with a static transpose if it only
 * exists in the other one. */
static uint32_t get(xgraph *x, ly_graph_value v, int layout)
{
    if (x->st != LY_OK) return NONE_ID;
    const ly_tensor *s = &x->L->shape[v];
    if (!cl_rank(s->ndim)) layout = LOGICAL;
    if (x->xid[v][layout] != NONE_ID) return x->xid[v][layout];
    int other = 1 - layout;
    if (x->xid[v][other] == NONE_ID) {
        x->st = ly_set_error(LY_E_INTERNAL, "export: %s: value %d used before it is defined",
                             x->node_name, (int)v);
        return NONE_ID;
    }
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(s, layout, dims);
    uint32_t id = new_internal(x, nd, dims);
    const uint32_t *perm = nd == 3 ? swap3 : layout == CHANNELS_LAST ? to_cl4 : from_cl4;
    node_transpose(x, x->xid[v][other], id, nd, perm);
    x->xid[v][layout] = id;
    return id;
}

/* The layout `v` already has, preferring channels-last (constants: either). */
static int have(const xgraph *x, ly_graph_value v)
{
    return x->xid[v][CHANNELS_LAST] != NONE_ID ? CHANNELS_LAST : LOGICAL;
}

static int ext_out_index(const xgraph *x, ly_graph_value v)
{
    for (size_t i = 0; i < x->n_out; i++)
        if (x->ext_out[i] == v) return (int)i;
    return -1;
}

/* The value a node defines for graph value `v` in `layout`: the partition's
 * external output itself when `v` leaves it and the layout is the logical one. */
static uint32_t define(xgraph *x, ly_graph_value v, int layout)
{
    const ly_tensor *s = &x->L->shape[v];
    if (!cl_rank(s->ndim)) layout = LOGICAL;
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(s, layout, dims);
    int k = ext_out_index(x, v);
    uint32_t id;
    if (k >= 0 && layout == LOGICAL) {
        id = new_value(x, nd, dims, (uint32_t)(x->n_in + (size_t)k), LY_XNN_FLAG_EXTERNAL_OUTPUT);
        if (id != NONE_ID) x->out_ids[k] = id;
    } else {
        id = new_internal(x, nd, dims);
    }
    if (id != NONE_ID) x->xid[v][layout] = id;
    return id;
}

/* ---- ops ------------------------------------------------------------------- */

/* y = act(conv(x) + b) (* s + t) (+ residual): Conv2d / DepthwiseConv2d, then
 * the activation as XNNPACK nodes (SiLU = x * sigmoid(x)), the post-affine,
 * then the add. */
static void emit_conv(xgraph *x, const ly_graph_node_info *n)
{
    const ly_conv2d_params *p = n->params;
    ly_graph_value wv = n->inputs[1], bv = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    ly_graph_value residual = n->n_inputs > 3 ? n->inputs[3] : LY_GRAPH_NONE;
    const ly_tensor *w = &x->L->shape[wv];
    const ly_tensor *out_shape = &x->L->shape[n->outputs[0]];
    int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
    int64_t G = p->groups > 0 ? p->groups : 1;
    bool depthwise = Cg == 1;
    uint32_t in = get(x, n->inputs[0], CHANNELS_LAST);
    float *filter = arena_calloc(&x->L->mem, (size_t)(O * Cg * KH * KW), sizeof(float));
    if (!filter) {
        x->st = oom();
        return;
    }
    const float *src = x->L->known[wv];
    uint32_t fdims[4];
    if (depthwise) {
        /* [O, 1, KH, KW] -> [1, KH, KW, O] */
        for (int64_t o = 0; o < O; o++)
            for (int64_t t = 0; t < KH * KW; t++)
                filter[t * O + o] = src[o * KH * KW + t];
        fdims[0] = 1, fdims[1] = (uint32_t)KH, fdims[2] = (uint32_t)KW, fdims[3] = (uint32_t)O;
    } else {
        /* OIHW -> OHWI */
        for (int64_t o = 0; o < O; o++)
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t t = 0; t < KH * KW; t++)
                    filter[(o * KH * KW + t) * Cg + c] = src[(o * Cg + c) * KH * KW + t];
        fdims[0] = (uint32_t)O, fdims[1] = (uint32_t)KH, fdims[2] = (uint32_t)KW,
        fdims[3] = (uint32_t)Cg;
    }
    uint32_t filter_id = new_const(x, const_name(x, n->name, "weight"), 4, fdims, filter,
                                   (size_t)(O * Cg * KH * KW) * sizeof(float));
    uint32_t bias_id = NONE_ID;
    if (bv != LY_GRAPH_NONE) {
        uint32_t bd = (uint32_t)O;
        bias_id = new_const(x, const_name(x, n->name, "bias"), 1, &bd, x->L->known[bv],
                            (size_t)O * sizeof(float));
    }
    int64_t act = p->activation;
    bool tail = act == LY_ACT_SILU || act == LY_ACT_SIGMOID || act == LY_ACT_LEAKY_RELU ||
                residual != LY_GRAPH_NONE || p->post_affine;
    uint32_t dims[4] = {0};
    dims_of(out_shape, CHANNELS_LAST, dims);
    uint32_t conv_out = tail ? new_internal(x, 4, dims) : define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = new_node(x, depthwise ? LY_XNN_DEPTHWISE_CONV2D : LY_XNN_CONV2D);
    if (!node) return;
    node->u.conv = (__typeof__(node->u.conv)){.padding_top = (uint32_t)p->padding[0],
                                              .padding_right = (uint32_t)p->padding[1],
                                              .padding_bottom = (uint32_t)p->padding[0],
                                              .padding_left = (uint32_t)p->padding[1],
                                              .kernel_height = (uint32_t)KH,
                                              .kernel_width = (uint32_t)KW,
                                              .subsampling_height = (uint32_t)p->stride[0],
                                              .subsampling_width = (uint32_t)p->stride[1],
                                              .dilation_height = (uint32_t)p->dilation[0],
                                              .dilation_width = (uint32_t)p->dilation[1],
                                              .group_input_channels = (uint32_t)Cg,
                                              .group_output_channels = (uint32_t)(O / G),
                                              .groups = (uint32_t)G,
                                              .input1_id = in,
                                              .filter_id = filter_id,
                                              .bias_id = bias_id,
                                              .output_id = conv_out};
    if (act == LY_ACT_RELU) {
        node->has_output_min_max = true;
        node->output_min = 0.0f;
        node->output_max = INFINITY;
    }
    if (!tail) return;
    bool has_residual = residual != LY_GRAPH_NONE;
    uint32_t y = conv_out;
    if (act == LY_ACT_SILU || act == LY_ACT_SIGMOID || act == LY_ACT_LEAKY_RELU) {
        uint32_t done =
            has_residual ? new_internal(x, 4, dims) : define(x, n->outputs[0], CHANNELS_LAST);
        if (act == LY_ACT_SILU) {
            uint32_t s = new_internal(x, 4, dims);
            node_1x1(x, LY_XNN_SIGMOID, y, s);
            node_2x1(x, LY_XNN_MULTIPLY, y, s, done);
        } else if (act == LY_ACT_SIGMOID) {
            node_1x1(x, LY_XNN_SIGMOID, y, done);
        } else {
            ly_xnn_node *l = new_node(x, LY_XNN_LEAKY_RELU);
            if (l) l->u.leaky_relu = (__typeof__(l->u.leaky_relu)){(float)p->alpha, y, done, 0};
        }
        y = done;
    }
    if (p->post_affine) {
        /* A 1x1 depthwise convolution with every filter tap the scale and
         * every bias the shift: constants inside partitions stay packed
         * filters and biases. */
        float *k = arena_calloc(&x->L->mem, (size_t)(2 * O), sizeof(float));
        if (!k) {
            x->st = oom();
            return;
        }
        for (int64_t o = 0; o < O; o++) {
            k[o] = (float)p->post_scale;
            k[O + o] = (float)p->post_shift;
        }
        uint32_t adims[4] = {1, 1, 1, (uint32_t)O}, bd = (uint32_t)O;
        uint32_t scale_id = new_const(x, const_name(x, n->name, "post_scale"), 4, adims, k,
                                      (size_t)O * sizeof(float));
        uint32_t shift_id = new_const(x, const_name(x, n->name, "post_shift"), 1, &bd, k + O,
                                      (size_t)O * sizeof(float));
        uint32_t done =
            has_residual ? new_internal(x, 4, dims) : define(x, n->outputs[0], CHANNELS_LAST);
        ly_xnn_node *affine = new_node(x, LY_XNN_DEPTHWISE_CONV2D);
        if (!affine) return;
        affine->u.conv = (__typeof__(affine->u.conv)){.kernel_height = 1,
                                                      .kernel_width = 1,
                                                      .subsampling_height = 1,
                                                      .subsampling_width = 1,
                                                      .dilation_height = 1,
                                                      .dilation_width = 1,
                                                      .group_input_channels = 1,
                                                      .group_output_channels = 1,
                                                      .groups = (uint32_t)O,
                                                      .input1_id = y,
                                                      .filter_id = scale_id,
                                                      .bias_id = shift_id,
                                                      .output_id = done};
        y = done;
    }
    if (has_residual) {
        uint32_t r = get(x, residual, CHANNELS_LAST);
        node_2x1(x, LY_XNN_ADD, y, r, define(x, n->outputs[0], CHANNELS_LAST));
    }
}

static void emit_pool(xgraph *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    const ly_pool2d_params *p = n->params;
    uint32_t in = get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t out = define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = new_node(x, type);
    if (!node) return;
    node->u.pooling = (__typeof__(node->u.pooling)){.padding_top = (uint32_t)p->padding[0],
                                                    .padding_right = (uint32_t)p->padding[1],
                                                    .padding_bottom = (uint32_t)p->padding[0],
                                                    .padding_left = (uint32_t)p->padding[1],
                                                    .pooling_height = (uint32_t)p->kernel[0],
                                                    .pooling_width = (uint32_t)p->kernel[1],
                                                    .stride_height = (uint32_t)p->stride[0],
                                                    .stride_width = (uint32_t)p->stride[1],
                                                    .dilation_height = 1,
                                                    .dilation_width = 1,
                                                    .input_id = in,
                                                    .output_id = out};
}

static void emit_max_pool(xgraph *x, const ly_graph_node_info *n)
{
    emit_pool(x, n, LY_XNN_MAX_POOLING_2D);
}

static void emit_avg_pool(xgraph *x, const ly_graph_node_info *n)
{
    emit_pool(x, n, LY_XNN_AVG_POOLING_2D);
}

static void emit_sigmoid(xgraph *x, const ly_graph_node_info *n)
{
    int layout = have(x, n->inputs[0]);
    uint32_t in = get(x, n->inputs[0], layout);
    node_1x1(x, LY_XNN_SIGMOID, in, define(x, n->outputs[0], layout));
}

static void emit_silu(xgraph *x, const ly_graph_node_info *n)
{
    int layout = have(x, n->inputs[0]);
    uint32_t in = get(x, n->inputs[0], layout);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(&x->L->shape[n->outputs[0]], layout, dims);
    uint32_t s = new_internal(x, nd, dims);
    node_1x1(x, LY_XNN_SIGMOID, in, s);
    node_2x1(x, LY_XNN_MULTIPLY, in, s, define(x, n->outputs[0], layout));
}

/* Broadcasting follows the logical shapes: channels-last only when both
 * operands have the output's rank (so their axes move alike) or one is a
 * single element. */
static void emit_binary(xgraph *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    ly_graph_value a = n->inputs[0], b = n->inputs[1];
    const ly_tensor *sa = &x->L->shape[a], *sb = &x->L->shape[b];
    int nd = x->L->shape[n->outputs[0]].ndim;
    int layout = LOGICAL;
    if (sa->ndim == nd && sb->ndim == nd)
        layout =
            have(x, a) == CHANNELS_LAST || have(x, b) == CHANNELS_LAST ? CHANNELS_LAST : LOGICAL;
    else if (numel_of(sb) == 1 && sa->ndim == nd)
        layout = have(x, a);
    else if (numel_of(sa) == 1 && sb->ndim == nd)
        layout = have(x, b);
    uint32_t ia = get(x, a, sa->ndim == nd ? layout : LOGICAL);
    uint32_t ib = get(x, b, sb->ndim == nd ? layout : LOGICAL);
    node_2x1(x, type, ia, ib, define(x, n->outputs[0], layout));
}

static void emit_add(xgraph *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_ADD);
}

static void emit_sub(xgraph *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_SUBTRACT);
}

static void emit_mul(xgraph *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_MULTIPLY);
}

static void emit_div(xgraph *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_DIV);
}

static int64_t resolved_axis(int64_t axis, int ndim)
{
    return axis < 0 ? axis + ndim : axis;
}

static void emit_concat(xgraph *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->outputs[0]];
    int64_t axis = resolved_axis(((const ly_concat_params *)n->params)->axis, s->ndim);
    int layout = LOGICAL;
    for (int i = 0; i < n->n_inputs; i++)
        if (have(x, n->inputs[i]) == CHANNELS_LAST) layout = CHANNELS_LAST;
    if (!cl_rank(s->ndim)) layout = LOGICAL;
    uint32_t in[LY_KERNEL_MAX_INPUTS], widths[LY_KERNEL_MAX_INPUTS];
    for (int i = 0; i < n->n_inputs; i++) {
        in[i] = get(x, n->inputs[i], layout);
        widths[i] = (uint32_t)x->L->shape[n->inputs[i]].shape[axis];
    }
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(s, layout, dims);
    uint32_t out = define(x, n->outputs[0], layout);
    if (n->n_inputs == 1) {
        node_1x1(x, LY_XNN_COPY, in[0], out);
        return;
    }
    node_concat(x, n->n_inputs, in, out, nd, dims, layout_axis(nd, layout, axis), widths);
}

static void emit_slice(xgraph *x, const ly_graph_node_info *n)
{
    const ly_slice_params *p = n->params;
    const ly_tensor *s = &x->L->shape[n->outputs[0]], *src = &x->L->shape[n->inputs[0]];
    int64_t axis = resolved_axis(p->axis, src->ndim), start, count;
    ly_slice_resolve(p, src->shape[axis], &start, &count);
    int layout = cl_rank(s->ndim) ? have(x, n->inputs[0]) : LOGICAL;
    uint32_t in = get(x, n->inputs[0], layout);
    uint32_t dims[LY_MAX_DIMS], offsets[LY_MAX_DIMS] = {0};
    int nd = dims_of(s, layout, dims);
    offsets[layout_axis(nd, layout, axis)] = (uint32_t)start;
    node_slice(x, in, define(x, n->outputs[0], layout), nd, offsets, dims);
}

/* [1, 4R, A] -> [1, 4, A]: channels-last [1, A, 4R] viewed as [1, 4A, R],
 * softmax over R, projected on 0..R-1 (a fully-connected layer), [1, A, 4]. */
static uint32_t dfl_projection(xgraph *x, int64_t R)
{
    if (x->proj_id != NONE_ID && x->v[x->proj_id].tensor.dims[1] == (uint32_t)R) return x->proj_id;
    float *proj = arena_calloc(&x->L->mem, (size_t)R, sizeof(float));
    if (!proj) {
        x->st = oom();
        return NONE_ID;
    }
    for (int64_t i = 0; i < R; i++)
        proj[i] = (float)i;
    uint32_t dims[2] = {1, (uint32_t)R};
    x->proj_id = new_const(x, "dfl_project", 2, dims, proj, (size_t)R * sizeof(float));
    return x->proj_id;
}

static void emit_dfl(xgraph *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    int64_t A = s->shape[2], R = s->shape[1] / 4;
    uint32_t box_cl = get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t d3[3] = {1, (uint32_t)(A * 4), (uint32_t)R};
    uint32_t r = new_internal(x, 3, d3);
    node_reshape(x, box_cl, r, 3, d3);
    uint32_t p = new_internal(x, 3, d3);
    node_1x1(x, LY_XNN_SOFTMAX, r, p);
    uint32_t e3[3] = {1, (uint32_t)(A * 4), 1};
    uint32_t e = new_internal(x, 3, e3);
    ly_xnn_node *fc = new_node(x, LY_XNN_FULLY_CONNECTED);
    uint32_t proj = dfl_projection(x, R);
    if (fc) fc->u.fc = (__typeof__(fc->u.fc)){p, proj, NONE_ID, e, 0};
    uint32_t o3[3] = {1, (uint32_t)A, 4};
    node_reshape(x, e, define(x, n->outputs[0], CHANNELS_LAST), 3, o3);
}

static void emit_resize(xgraph *x, const ly_graph_node_info *n)
{
    const ly_resize_bilinear2d_params *p = n->params;
    uint32_t in = get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t out = define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = new_node(x, LY_XNN_STATIC_RESIZE_BILINEAR_2D);
    if (!node) return;
    uint32_t flags = 0;
    if (p->align_corners)
        flags = 0x8; /* XNN_FLAG_ALIGN_CORNERS */
    else if (!p->half_pixel_centers)
        flags = 0x4; /* XNN_FLAG_TENSORFLOW_LEGACY_MODE */
    node->u.resize =
        (__typeof__(node->u.resize)){(uint32_t)p->size[0], (uint32_t)p->size[1], in, out, flags};
}

/* A reshape is on the logical order, except [N, C, H, W] -> [N, C, H*W] of a
 * channels-last value: [N, H, W, C] -> [N, H*W, C] is the same move. */
static void emit_reshape(xgraph *x, const ly_graph_node_info *n)
{
    const ly_tensor *in_shape = &x->L->shape[n->inputs[0]], *out = &x->L->shape[n->outputs[0]];
    uint32_t dims[LY_MAX_DIMS] = {0};
    bool flattens_space = in_shape->ndim == 4 && out->ndim == 3 &&
                          out->shape[0] == in_shape->shape[0] &&
                          out->shape[1] == in_shape->shape[1];
    if (flattens_space && have(x, n->inputs[0]) == CHANNELS_LAST) {
        uint32_t in = get(x, n->inputs[0], CHANNELS_LAST);
        int nd = dims_of(out, CHANNELS_LAST, dims);
        node_reshape(x, in, define(x, n->outputs[0], CHANNELS_LAST), nd, dims);
        return;
    }
    uint32_t in = get(x, n->inputs[0], LOGICAL);
    int nd = dims_of(out, LOGICAL, dims);
    node_reshape(x, in, define(x, n->outputs[0], LOGICAL), nd, dims);
}

/* A permute that undoes the channels-last move of its input ([N, C, W] ->
 * [N, W, C] of a value held as [N, W, C]) is that value: no node. */
static bool permute_is_layout(const xgraph *x, const ly_graph_node_info *n)
{
    const ly_permute_params *p = n->params;
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    if (x->xid[n->inputs[0]][CHANNELS_LAST] == NONE_ID || p->ndim != s->ndim) return false;
    const uint32_t *want = s->ndim == 3 ? swap3 : s->ndim == 4 ? to_cl4 : NULL;
    if (!want) return false;
    for (int i = 0; i < s->ndim; i++)
        if ((uint32_t)p->perm[i] != want[i]) return false;
    return true;
}

static void emit_permute(xgraph *x, const ly_graph_node_info *n)
{
    const ly_permute_params *p = n->params;
    if (permute_is_layout(x, n)) {
        uint32_t in = x->xid[n->inputs[0]][CHANNELS_LAST];
        if (ext_out_index(x, n->outputs[0]) >= 0)
            node_1x1(x, LY_XNN_COPY, in, define(x, n->outputs[0], LOGICAL));
        else
            x->xid[n->outputs[0]][LOGICAL] = in;
        return;
    }
    uint32_t in = get(x, n->inputs[0], LOGICAL);
    uint32_t perm[LY_MAX_DIMS];
    for (int i = 0; i < p->ndim; i++)
        perm[i] = (uint32_t)p->perm[i];
    node_transpose(x, in, define(x, n->outputs[0], LOGICAL), (int)p->ndim, perm);
}

/* act(x·Wᵀ + b) + residual over the last logical axis: a fully-connected
 * node, whose filter ([N, K], PyTorch's layout) and bias XNNPACK packs (relu
 * as its output range), then a GELU node and an add node for what our
 * runtime fuses into the GEMM (xnn_takes admits no other activation). */
static void emit_linear(xgraph *x, const ly_graph_node_info *n)
{
    const ly_linear_params *p = n->params;
    int64_t act = p ? p->activation : LY_ACT_NONE;
    ly_graph_value residual = n->n_inputs > 3 ? n->inputs[3] : LY_GRAPH_NONE;
    ly_graph_value wv = n->inputs[1], bv = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    const ly_tensor *w = &x->L->shape[wv];
    uint32_t in = get(x, n->inputs[0], LOGICAL);
    uint32_t wd[2] = {(uint32_t)w->shape[0], (uint32_t)w->shape[1]};
    size_t bytes = (size_t)numel_of(w) * sizeof(float);
    uint32_t filter = new_const(x, const_name(x, n->name, "weight"), 2, wd, x->L->known[wv], bytes);
    uint32_t bias = NONE_ID;
    if (bv != LY_GRAPH_NONE)
        bias = new_const(x, const_name(x, n->name, "bias"), 1, wd, x->L->known[bv],
                         (size_t)wd[0] * sizeof(float));
    bool gelu = act == LY_ACT_GELU, has_residual = residual != LY_GRAPH_NONE;
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(&x->L->shape[n->outputs[0]], LOGICAL, dims);
    uint32_t out =
        gelu || has_residual ? new_internal(x, nd, dims) : define(x, n->outputs[0], LOGICAL);
    ly_xnn_node *fc = new_node(x, LY_XNN_FULLY_CONNECTED);
    if (!fc) return;
    fc->u.fc = (__typeof__(fc->u.fc)){in, filter, bias, out, 0};
    if (act == LY_ACT_RELU) {
        fc->has_output_min_max = true;
        fc->output_min = 0.0f;
        fc->output_max = INFINITY;
    }
    if (gelu) {
        uint32_t done =
            has_residual ? new_internal(x, nd, dims) : define(x, n->outputs[0], LOGICAL);
        node_1x1(x, LY_XNN_GELU, out, done);
        out = done;
    }
    if (has_residual) {
        uint32_t r = get(x, residual, LOGICAL);
        node_2x1(x, LY_XNN_ADD, out, r, define(x, n->outputs[0], LOGICAL));
    }
}

/* a·b (a·bᵀ: b's last two axes transposed first, as torch.export writes
 * q @ k.transpose(-2, -1)): a batch matrix multiply on the logical order. */
static void emit_matmul(xgraph *x, const ly_graph_node_info *n)
{
    const ly_matmul_params *p = n->params;
    uint32_t a = get(x, n->inputs[0], LOGICAL), b = get(x, n->inputs[1], LOGICAL);
    if (p && p->transpose_b) {
        uint32_t dims[LY_MAX_DIMS] = {0}, perm[LY_MAX_DIMS];
        int nd = dims_of(&x->L->shape[n->inputs[1]], LOGICAL, dims);
        for (int i = 0; i < nd; i++)
            perm[i] = (uint32_t)i;
        perm[nd - 2] = (uint32_t)nd - 1;
        perm[nd - 1] = (uint32_t)nd - 2;
        uint32_t t = dims[nd - 1];
        dims[nd - 1] = dims[nd - 2];
        dims[nd - 2] = t;
        uint32_t bt = new_internal(x, nd, dims);
        node_transpose(x, b, bt, nd, perm);
        b = bt;
    }
    node_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, a, b, define(x, n->outputs[0], LOGICAL));
}

static void emit_softmax(xgraph *x, const ly_graph_node_info *n)
{
    uint32_t in = get(x, n->inputs[0], LOGICAL);
    node_1x1(x, LY_XNN_SOFTMAX, in, define(x, n->outputs[0], LOGICAL));
}

/* clamp and relu: XNNPACK's clamp node (its bounds are the node's output range). */
static void emit_clamp_range(xgraph *x, const ly_graph_node_info *n, float lo, float hi)
{
    int layout = have(x, n->inputs[0]);
    uint32_t in = get(x, n->inputs[0], layout);
    uint32_t out = define(x, n->outputs[0], layout);
    ly_xnn_node *node = new_node(x, LY_XNN_CLAMP);
    if (!node) return;
    node->u.n1x1 = (__typeof__(node->u.n1x1)){in, out, 0};
    node->has_output_min_max = true;
    node->output_min = lo;
    node->output_max = hi;
}

static void emit_clamp(xgraph *x, const ly_graph_node_info *n)
{
    const ly_clamp_params *p = n->params;
    emit_clamp_range(x, n, p ? (float)p->min : -INFINITY, p ? (float)p->max : INFINITY);
}

static void emit_relu(xgraph *x, const ly_graph_node_info *n)
{
    emit_clamp_range(x, n, 0.0f, INFINITY);
}

static void emit_log(xgraph *x, const ly_graph_node_info *n)
{
    int layout = have(x, n->inputs[0]);
    uint32_t in = get(x, n->inputs[0], layout);
    node_1x1(x, LY_XNN_LOG, in, define(x, n->outputs[0], layout));
}

/* A fully-connected node over the last axis of `in` (logical dims `dims`,
 * rank nd) with a filter and bias of its own: the only way an emitter's own
 * constants may enter a partition (XNNPACK packs them). */
static uint32_t fc_const(xgraph *x, const char *what, uint32_t in, int nd, const uint32_t *dims,
                         uint32_t n_out, const float *filter, const float *bias)
{
    uint32_t k = dims[nd - 1], fd[2] = {n_out, k}, od[LY_MAX_DIMS];
    memcpy(od, dims, (size_t)nd * sizeof *od);
    od[nd - 1] = n_out;
    uint32_t f = new_const(x, const_name(x, x->node_name, what), 2, fd, filter,
                           (size_t)n_out * k * sizeof(float));
    uint32_t b = bias ? new_const(x, const_name(x, x->node_name, "bias"), 1, fd, bias,
                                  (size_t)n_out * sizeof(float))
                      : NONE_ID;
    uint32_t out = new_internal(x, nd, od);
    ly_xnn_node *fc = new_node(x, LY_XNN_FULLY_CONNECTED);
    if (fc) fc->u.fc = (__typeof__(fc->u.fc)){in, f, b, out, 0};
    return out;
}

/* RMSNorm as torch.export decomposes it, on XNNPACK nodes: x * rsqrt(mean(x²)
 * + eps) * scale, the mean and the eps one fully-connected node (a filter of
 * 1/C and a bias of eps, both packed). */
static void emit_rms_norm(xgraph *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    const ly_norm_params *p = n->params;
    uint32_t in = get(x, n->inputs[0], LOGICAL);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = dims_of(s, LOGICAL, dims);
    uint32_t c = dims[nd - 1];
    float *mean = arena_calloc(&x->L->mem, c + 1, sizeof(float));
    if (!mean) {
        x->st = oom();
        return;
    }
    for (uint32_t i = 0; i < c; i++)
        mean[i] = 1.0f / (float)c;
    mean[c] = (float)(p ? p->eps : 1e-6);
    uint32_t sq = new_internal(x, nd, dims);
    node_1x1(x, LY_XNN_SQUARE, in, sq);
    uint32_t ms = fc_const(x, "mean", sq, nd, dims, 1, mean, &mean[c]);
    uint32_t rd[LY_MAX_DIMS];
    memcpy(rd, dims, sizeof rd);
    rd[nd - 1] = 1;
    uint32_t r = new_internal(x, nd, rd);
    node_1x1(x, LY_XNN_RECIPROCAL_SQUARE_ROOT, ms, r);
    bool scaled = n->n_inputs > 1 && n->inputs[1] != LY_GRAPH_NONE;
    uint32_t normed = scaled ? new_internal(x, nd, dims) : define(x, n->outputs[0], LOGICAL);
    node_2x1(x, LY_XNN_MULTIPLY, in, r, normed);
    if (scaled)
        node_2x1(x, LY_XNN_MULTIPLY, normed, get(x, n->inputs[1], LOGICAL),
                 define(x, n->outputs[0], LOGICAL));
}

/* sdpa as the manual expression (captures never take the fused path):
 * softmax((q * scale) · kᵀ) · v, the scale a fully-connected node with a
 * diagonal filter (exact: one product, zeros added), kᵀ a static transpose. */
static void emit_sdpa(xgraph *x, const ly_graph_node_info *n)
{
    const ly_sdpa_params *p = n->params;
    const ly_tensor *qs = &x->L->shape[n->inputs[0]], *ks = &x->L->shape[n->inputs[1]];
    uint32_t q = get(x, n->inputs[0], LOGICAL), k = get(x, n->inputs[1], LOGICAL),
             v = get(x, n->inputs[2], LOGICAL);
    uint32_t qd[4], kd[4];
    dims_of(qs, LOGICAL, qd);
    dims_of(ks, LOGICAL, kd);
    uint32_t d = qd[3];
    double scale = p && p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)d);
    float *diag = arena_calloc(&x->L->mem, (size_t)d * d, sizeof(float));
    if (!diag) {
        x->st = oom();
        return;
    }
    for (uint32_t i = 0; i < d; i++)
        diag[i * d + i] = (float)scale;
    uint32_t qscaled = fc_const(x, "scale", q, 4, qd, d, diag, NULL);
    uint32_t kt_dims[4] = {kd[0], kd[1], kd[3], kd[2]}, swap_last[4] = {0, 1, 3, 2};
    uint32_t kt = new_internal(x, 4, kt_dims);
    node_transpose(x, k, kt, 4, swap_last);
    uint32_t sd[4] = {qd[0], qd[1], qd[2], kd[2]};
    uint32_t scores = new_internal(x, 4, sd), probs = new_internal(x, 4, sd);
    node_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, qscaled, kt, scores);
    node_1x1(x, LY_XNN_SOFTMAX, scores, probs);
    node_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, probs, v, define(x, n->outputs[0], LOGICAL));
}

static void emit_gelu(xgraph *x, const ly_graph_node_info *n)
{
    int layout = have(x, n->inputs[0]);
    uint32_t in = get(x, n->inputs[0], layout);
    node_1x1(x, LY_XNN_GELU, in, define(x, n->outputs[0], layout));
}

typedef void (*emit_fn)(xgraph *x, const ly_graph_node_info *n);

/* What each op the manifest marks XNN (or EITHER) becomes inside a partition. */
static const emit_fn emitters[LY_OP_COUNT] = {
    [LY_OP_CONV2D] = emit_conv,
    [LY_OP_MAX_POOL2D] = emit_max_pool,
    [LY_OP_AVG_POOL2D] = emit_avg_pool,
    [LY_OP_SILU] = emit_silu,
    [LY_OP_SIGMOID] = emit_sigmoid,
    [LY_OP_DFL] = emit_dfl,
    [LY_OP_RESIZE_BILINEAR2D] = emit_resize,
    [LY_OP_ADD] = emit_add,
    [LY_OP_SUB] = emit_sub,
    [LY_OP_MUL] = emit_mul,
    [LY_OP_DIV] = emit_div,
    [LY_OP_RESHAPE] = emit_reshape,
    [LY_OP_PERMUTE] = emit_permute,
    [LY_OP_SLICE] = emit_slice,
    [LY_OP_CONCAT] = emit_concat,
    [LY_OP_LINEAR] = emit_linear,
    [LY_OP_MATMUL] = emit_matmul,
    [LY_OP_SOFTMAX] = emit_softmax,
    [LY_OP_GELU] = emit_gelu,
    [LY_OP_CLAMP] = emit_clamp,
    [LY_OP_RELU] = emit_relu,
    [LY_OP_LOG] = emit_log,
    [LY_OP_RMS_NORM] = emit_rms_norm,
    [LY_OP_SDPA] = emit_sdpa,
};

static ly_status emit(xgraph *x, const gnode *gn)
{
    const ly_graph_node_info *n = &gn->info;
    x->node_name = n->name;
    emitters[n->op](x, n);
    return x->st;
}

/* ---- classification and partitioning ----------------------------------------- */

static bool is_4d(const lower *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->shape[v].ndim == 4;
}

static bool known_f32(const lower *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->known[v] && L->shape[v].dtype == LY_F32;
}

/* Whether the XNNPACK lowering of this call exists (the manifest says the op
 * has one; these are the operands it covers). */
static bool xnn_takes(const lower *L, const ly_graph_node_info *n)
{
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && L->shape[n->inputs[i]].dtype != LY_F32) return false;
    switch (n->op) {
    case LY_OP_CONV2D: {
        const ly_conv2d_params *p = n->params;
        ly_graph_value bias = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
        return is_4d(L, n->inputs[0]) && known_f32(L, n->inputs[1]) &&
               (bias == LY_GRAPH_NONE || known_f32(L, bias)) && p->activation <= LY_ACT_LEAKY_RELU;
    }
    case LY_OP_MAX_POOL2D:
    case LY_OP_AVG_POOL2D:
    case LY_OP_RESIZE_BILINEAR2D:
        return is_4d(L, n->inputs[0]);
    case LY_OP_DFL:
        return L->shape[n->inputs[0]].ndim == 3;
    case LY_OP_SLICE:
        return ((const ly_slice_params *)n->params)->step == 1;
    case LY_OP_LINEAR: {
        const ly_linear_params *p = n->params;
        int64_t act = p ? p->activation : LY_ACT_NONE;
        ly_graph_value bias = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
        return known_f32(L, n->inputs[1]) && (bias == LY_GRAPH_NONE || known_f32(L, bias)) &&
               (act == LY_ACT_NONE || act == LY_ACT_RELU || act == LY_ACT_GELU);
    }
    case LY_OP_MATMUL: {
        /* XNNPACK's batch matrix multiply does not broadcast batch axes */
        const ly_tensor *a = &L->shape[n->inputs[0]], *b = &L->shape[n->inputs[1]];
        if (a->ndim != b->ndim) return false;
        for (int i = 0; i < a->ndim - 2; i++)
            if (a->shape[i] != b->shape[i]) return false;
        return true;
    }
    case LY_OP_SDPA: {
        /* no masks; q, k, v of one batch and head layout */
        if (n->n_inputs > 3)
            for (int i = 3; i < n->n_inputs; i++)
                if (n->inputs[i] != LY_GRAPH_NONE) return false;
        return L->shape[n->inputs[0]].ndim == 4;
    }
    case LY_OP_SOFTMAX: {
        /* over the last axis, as XNNPACK's softmax */
        const ly_tensor *a = &L->shape[n->inputs[0]];
        const ly_axis_params *p = n->params;
        return a->ndim >= 1 && resolved_axis(p ? p->axis : -1, a->ndim) == a->ndim - 1;
    }
    default:
        return true;
    }
}

/* Whether the portable kernel of this call takes its operands. */
static bool portable_takes(const lower *L, const ly_graph_node_info *n)
{
    switch (n->op) {
    case LY_OP_LAYER_NORM:
    case LY_OP_TOPK:
    case LY_OP_INDEX_SELECT:
    case LY_OP_MS_DEFORM_ATTN:
    case LY_OP_RESHAPE:
        return L->shape[n->inputs[0]].ndim >= 1;
    default:
        return is_4d(L, n->inputs[0]);
    }
}

static ly_status no_mapping(const gnode *gn, const char *why)
{
    return ly_set_error(LY_E_UNSUPPORTED,
                        "export: node '%s': op '%s' has no ExecuTorch export mapping%s",
                        gn->info.name, ly_op_name(gn->info.op), why);
}

/* Fold a node whose result follows from shapes and constants (the manifest's
 * FOLD): its reference runs here and the program gets a constant. */
static ly_status fold(lower *L, gnode *gn)
{
    const ly_graph_node_info *n = &gn->info;
    ly_graph_value out = n->outputs[0];
    if (n->n_outputs != 1 || L->shape[out].dtype != LY_F32) return no_mapping(gn, " (folded)");
    ly_tensor in[LY_KERNEL_MAX_INPUTS], result = L->shape[out];
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.threads = 1;
    call.params = n->params;
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] == LY_GRAPH_NONE) continue;
        in[i] = L->shape[n->inputs[i]];
        if (L->known[n->inputs[i]]) in[i].data = (void *)L->known[n->inputs[i]];
        call.in[i] = &in[i];
    }
    result.data = arena_calloc(&L->mem, (size_t)numel_of(&result), sizeof(float));
    if (!result.data) return oom();
    call.out[0] = &result;
    ly_status st = ly_kernel_dispatch_op(n->op, &call);
    if (st != LY_OK) return st;
    gn->folded = true;
    L->known[out] = result.data;
    L->producer[out] = CONSTANT;
    return LY_OK;
}

/* Delegated, portable, folded, or no mapping (an error naming the op). */
static ly_status classify(lower *L, gnode *gn)
{
    const ly_graph_node_info *n = &gn->info;
    const ly_op_def *def = ly_op_def_of(n->op);
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        ly_graph_value v = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
        if (v != LY_GRAPH_NONE && L->shape[v].dtype != LY_F32 && L->shape[v].dtype != LY_I64)
            return no_mapping(gn, " for these operands (program tensors are f32 or i64)");
    }
    switch (def ? def->lower : LY_LOWER_NONE) {
    case LY_LOWER_FOLD:
        return fold(L, gn);
    case LY_LOWER_PORTABLE:
        gn->portable = true;
        return portable_takes(L, n) ? LY_OK : no_mapping(gn, " for these operands");
    case LY_LOWER_EITHER:
        if (n->op == LY_OP_RESHAPE && L->shape[n->inputs[0]].dtype != LY_F32) {
            /* indices between portable kernels: view_copy */
            gn->portable = true;
            return LY_OK;
        }
        if (n->op == LY_OP_AVG_POOL2D) {
            /* XNNPACK's average pooling leaves padding out of the count. */
            const ly_pool2d_params *p = n->params;
            gn->portable = p->count_include_pad && (p->padding[0] > 0 || p->padding[1] > 0);
            if (gn->portable) return is_4d(L, n->inputs[0]) ? LY_OK : no_mapping(gn, "");
        }
        /* fall through */
    case LY_LOWER_XNN:
        if (!emitters[n->op]) return no_mapping(gn, "");
        return xnn_takes(L, n) ? LY_OK : no_mapping(gn, " for these operands");
    case LY_LOWER_NONE:
        break;
    }
    return no_mapping(gn, "");
}

/* Whether XNNPACK packs operand k of this node into storage of its own when
 * its runtime is made: the filters and biases of convolutions and
 * fully-connected layers (and the DFL
 * projection, which its emitter makes itself). Only those constants may live
 * inside a partition: ExecuTorch before 1.4.1 frees every constant it loaded
 * from named data once the runtime exists, and an elementwise node keeps a
 * pointer to its constant operand and reads it on every run. Every other
 * known operand (anchors, strides, scales, masks, position embeddings) is an
 * input of the delegate, fed from a program-level constant. */
static bool packs_operand(ly_op op, int k)
{
    return (op == LY_OP_CONV2D || op == LY_OP_LINEAR) && (k == 1 || k == 2);
}

/* The inputs a node reads from the program (constants and folded values are
 * part of the node's own lowering). */
static int node_inputs(const lower *L, const ly_graph_node_info *n, ly_graph_value *out)
{
    int k = 0;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && !L->known[n->inputs[i]]) out[k++] = n->inputs[i];
    return k;
}

/* Partitions in dependency order: a delegated node goes after every portable
 * node it depends on; a portable node runs after the partitions it reads. */
static int partition(lower *L)
{
    int parts = 0;
    for (int i = 0; i < L->n_nodes; i++) {
        gnode *gn = &L->nodes[i];
        if (gn->folded) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = node_inputs(L, &gn->info, ins);
        int p = gn->portable ? -1 : 0;
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            if (src < 0) continue;
            const gnode *s = &L->nodes[src];
            int need = gn->portable ? s->part : s->portable ? s->part + 1 : s->part;
            if (need > p) p = need;
        }
        gn->part = p;
        if (!gn->portable && p + 1 > parts) parts = p + 1;
    }
    return parts;
}

/* ---- memory planning ---------------------------------------------------------- */

static int compare_size(const void *a, const void *b)
{
    const ptensor *x = *(const ptensor *const *)a, *y = *(const ptensor *const *)b;
    return x->nbytes < y->nbytes ? 1 : x->nbytes > y->nbytes ? -1 : x->evalue - y->evalue;
}

/* Greedy by size, first fit among the placed tensors whose live ranges meet. */
static ly_status plan_memory(lower *L, uint64_t *total)
{
    size_t n = L->n_pt;
    ptensor **order = calloc(n ? n : 1, sizeof *order);
    uint64_t *offset = calloc(n ? n : 1, sizeof *offset);
    bool *placed = calloc(n ? n : 1, sizeof *placed);
    if (!order || !offset || !placed) {
        free(order);
        free(offset);
        free(placed);
        return oom();
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &L->pt[i];
    qsort(order, n, sizeof *order, compare_size);
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        ptensor *p = order[i];
        uint64_t size = (p->nbytes + 15) / 16 * 16, at = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (size_t j = 0; j < i; j++) {
                const ptensor *q = order[j];
                size_t qi = (size_t)(q - L->pt);
                if (q->last < p->first || p->last < q->first) continue;
                uint64_t qs = offset[qi], qe = qs + (q->nbytes + 15) / 16 * 16;
                if (at < qe && qs < at + size) {
                    at = qe;
                    moved = true;
                }
            }
        }
        size_t pi = (size_t)(p - L->pt);
        offset[pi] = at;
        placed[pi] = true;
        if (at + size > *total) *total = at + size;
    }
    for (size_t i = 0; i < n; i++) {
        ly_pte_allocation *a = &L->values[L->pt[i].evalue].u.tensor.allocation_info;
        a->memory_offset_low = (uint32_t)(offset[i] & 0xFFFFFFFFu);
        a->memory_offset_high = (uint32_t)(offset[i] >> 32);
    }
    free(order);
    free(offset);
    free(placed);
    return LY_OK;
}

/* ---- the program ------------------------------------------------------------ */

/* One portable KernelCall under construction: its ATen schema's arguments,
 * then its out tensors, then the return values (the out tensors again), as
 * ExecuTorch's emitter writes them. */
typedef struct kcall {
    int32_t args[16];
    int n_args;
    int outs[3];
    int n_outs;
    int op;
} kcall;

/* An IntList of Int values: its items are their value indices, as ExecuTorch's
 * emitter writes them (its runtime boxes the ints). */
static int int_list(lower *L, int n, const int64_t *src)
{
    int64_t *items = arena_calloc(&L->mem, (size_t)n, sizeof *items);
    if (!items) return -1;
    for (int i = 0; i < n; i++) {
        ly_pte_evalue item = {.type = LY_PTE_EVALUE_INT};
        item.u.int_val = src[i];
        if ((items[i] = add_evalue(L, item)) < 0) return -1;
    }
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_INT_LIST};
    v.u.int_list.items = items;
    v.u.int_list.n_items = (size_t)n;
    return add_evalue(L, v);
}

static int none_value(lower *L)
{
    return add_evalue(L, (ly_pte_evalue){.type = LY_PTE_EVALUE_NULL});
}

/* A graph value as a program value: constants get one in the constant segment. */
static int program_value(lower *L, ly_graph_value v)
{
    if (v == LY_GRAPH_NONE) return none_value(L);
    if (L->pvalue[v] < 0 && L->known[v]) L->pvalue[v] = add_constant_value(L, v);
    return L->pvalue[v];
}

/* upsample_nearest2d.vec_out(input, output_size?, scale_factors?, *, out) */
static ly_status call_upsample(lower *L, const ly_graph_node_info *n, kcall *k)
{
    double *scales = arena_calloc(&L->mem, 2, sizeof *scales);
    if (!scales) return oom();
    scales[0] = scales[1] = (double)((const ly_upsample_nearest2d_params *)n->params)->scale;
    ly_pte_evalue sv = {.type = LY_PTE_EVALUE_DOUBLE_LIST};
    sv.u.double_list.items = scales;
    sv.u.double_list.n_items = 2;
    k->op = op_index(L, "aten::upsample_nearest2d", "vec_out");
    k->args[k->n_args++] = L->pvalue[n->inputs[0]];
    k->args[k->n_args++] = none_value(L);
    k->args[k->n_args++] = add_evalue(L, sv);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    return LY_OK;
}

/* avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?, *, out) */
static ly_status call_avg_pool(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_pool2d_params *pool = n->params;
    ly_pte_evalue f = {.type = LY_PTE_EVALUE_BOOL}, t = {.type = LY_PTE_EVALUE_BOOL};
    t.u.bool_val = pool->count_include_pad != 0;
    k->op = op_index(L, "aten::avg_pool2d", "out");
    k->args[k->n_args++] = L->pvalue[n->inputs[0]];
    k->args[k->n_args++] = int_list(L, 2, pool->kernel);
    k->args[k->n_args++] = int_list(L, 2, pool->stride);
    k->args[k->n_args++] = int_list(L, 2, pool->padding);
    k->args[k->n_args++] = add_evalue(L, f);
    k->args[k->n_args++] = add_evalue(L, t);
    k->args[k->n_args++] = none_value(L);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    return LY_OK;
}

/* native_layer_norm.out(input, normalized_shape, weight?, bias?, eps, *, out0,
 * out1, out2): what layer_norm decomposes to in the edge dialect; out1 and
 * out2 (mean and 1/std, [..., 1]) are program tensors nothing else reads. */
static ly_status call_layer_norm(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_tensor *x = &L->shape[n->inputs[0]];
    const ly_norm_params *p = n->params;
    ly_pte_evalue eps = {.type = LY_PTE_EVALUE_DOUBLE};
    eps.u.double_val = p ? p->eps : 1e-5;
    ly_tensor stats = *x;
    stats.shape[x->ndim - 1] = 1;
    k->op = op_index(L, "aten::native_layer_norm", "out");
    k->args[k->n_args++] = L->pvalue[n->inputs[0]];
    k->args[k->n_args++] = int_list(L, 1, &x->shape[x->ndim - 1]);
    k->args[k->n_args++] = program_value(L, n->n_inputs > 1 ? n->inputs[1] : LY_GRAPH_NONE);
    k->args[k->n_args++] = program_value(L, n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE);
    k->args[k->n_args++] = add_evalue(L, eps);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    k->outs[k->n_outs++] = add_tensor_value(L, &stats);
    k->outs[k->n_outs++] = add_tensor_value(L, &stats);
    return LY_OK;
}

static int int_value(lower *L, int64_t i)
{
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_INT};
    v.u.int_val = i;
    return add_evalue(L, v);
}

static int bool_value(lower *L, bool b)
{
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_BOOL};
    v.u.bool_val = b;
    return add_evalue(L, v);
}

/* topk.values(self, k, dim, largest, sorted, *, values, indices) */
static ly_status call_topk(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_topk_params *p = n->params;
    k->op = op_index(L, "aten::topk", "values");
    k->args[k->n_args++] = L->pvalue[n->inputs[0]];
    k->args[k->n_args++] = int_value(L, p->k);
    k->args[k->n_args++] = int_value(L, p->axis);
    k->args[k->n_args++] = bool_value(L, p->largest != 0);
    k->args[k->n_args++] = bool_value(L, true);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    k->outs[k->n_outs++] = L->pvalue[n->outputs[1]];
    return LY_OK;
}

/* index_select.out(self, dim, index, *, out) */
static ly_status call_index_select(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_gather_params *p = n->params;
    k->op = op_index(L, "aten::index_select", "out");
    k->args[k->n_args++] = program_value(L, n->inputs[0]);
    k->args[k->n_args++] = int_value(L, p->axis);
    k->args[k->n_args++] = program_value(L, n->inputs[1]);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    return LY_OK;
}

/* view_copy.out(self, size, *, out): a reshape of indices */
static ly_status call_view_copy(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_tensor *o = &L->shape[n->outputs[0]];
    k->op = op_index(L, "aten::view_copy", "out");
    k->args[k->n_args++] = program_value(L, n->inputs[0]);
    k->args[k->n_args++] = int_list(L, o->ndim, o->shape);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    return LY_OK;
}

/* libreyolo::ms_deform_attn.out(value, spatial_shapes, sampling_locations,
 * attention_weights, num_points?, mode, *, out): the custom operator
 * docs/attention.md documents (the ms_deform_attn slot's contract). */
static ly_status call_ms_deform_attn(lower *L, const ly_graph_node_info *n, kcall *k)
{
    const ly_ms_deform_attn_params *p = n->params;
    k->op = op_index(L, "libreyolo::ms_deform_attn", "out");
    for (int i = 0; i < 4; i++)
        k->args[k->n_args++] = program_value(L, n->inputs[i]);
    k->args[k->n_args++] = program_value(L, n->n_inputs > 4 ? n->inputs[4] : LY_GRAPH_NONE);
    k->args[k->n_args++] = int_value(L, p ? p->mode : 0);
    k->outs[k->n_outs++] = L->pvalue[n->outputs[0]];
    return LY_OK;
}

static ly_status emit_portable(lower *L, const gnode *gn)
{
    const ly_graph_node_info *n = &gn->info;
    kcall k = {.op = -1};
    ly_status st;
    switch (n->op) {
    case LY_OP_UPSAMPLE_NEAREST2D:
        st = call_upsample(L, n, &k);
        break;
    case LY_OP_LAYER_NORM:
        st = call_layer_norm(L, n, &k);
        break;
    case LY_OP_TOPK:
        st = call_topk(L, n, &k);
        break;
    case LY_OP_INDEX_SELECT:
        st = call_index_select(L, n, &k);
        break;
    case LY_OP_RESHAPE:
        st = call_view_copy(L, n, &k);
        break;
    case LY_OP_MS_DEFORM_ATTN:
        st = call_ms_deform_attn(L, n, &k);
        break;
    default:
        st = call_avg_pool(L, n, &k);
        break;
    }
    if (st != LY_OK) return st;
    bool ok = k.op >= 0;
    for (int i = 0; i < k.n_args; i++)
        ok = ok && k.args[i] >= 0;
    for (int i = 0; i < k.n_outs; i++)
        ok = ok && k.outs[i] >= 0;
    ly_pte_instruction *ins = add_instr(L);
    int32_t *args = arena_calloc(&L->mem, (size_t)(k.n_args + 2 * k.n_outs), sizeof *args);
    if (!ok || !ins || !args) return oom();
    int at = (int)L->n_instr - 1, n_args = 0;
    for (int i = 0; i < k.n_args; i++)
        args[n_args++] = k.args[i];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < k.n_outs; i++)
            args[n_args++] = k.outs[i];
    ins->type = LY_PTE_KERNEL_CALL;
    ins->u.kernel_call.op_index = k.op;
    ins->u.kernel_call.args = args;
    ins->u.kernel_call.n_args = (size_t)n_args;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && !L->known[n->inputs[i]])
            touch(L, L->pvalue[n->inputs[i]], at);
    for (int i = 0; i < k.n_outs; i++)
        touch(L, k.outs[i], at);
    L->kernel_calls++;
    return LY_OK;
}

static bool in_list(const int *list, size_t n, int v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v) return true;
    return false;
}

/* Build partition `part` as an XNNGraph, encode it, and emit its DelegateCall. */
static ly_status emit_partition(lower *L, int part)
{
    xgraph x = {.L = L, .part = part, .proj_id = NONE_ID};
    ly_status st = LY_OK;
    x.xid = calloc((size_t)L->n_values, sizeof *x.xid);
    x.ext_in = calloc((size_t)L->n_values, sizeof *x.ext_in);
    x.ext_out = calloc((size_t)L->n_values, sizeof *x.ext_out);
    x.in_ids = calloc((size_t)L->n_values, sizeof *x.in_ids);
    x.out_ids = calloc((size_t)L->n_values, sizeof *x.out_ids);
    if (!x.xid || !x.ext_in || !x.ext_out || !x.in_ids || !x.out_ids ||
        !GROW(x.c, x.n_c, x.cap_c)) {
        st = oom();
        goto done;
    }
    for (int v = 0; v < L->n_values; v++)
        x.xid[v][0] = x.xid[v][1] = NONE_ID;
    x.c[x.n_c++] = (ly_xnn_constant_data){0, 0, NULL};

    /* Externals: inputs in first-use order, then outputs in definition order. */
    for (int i = 0; i < L->n_nodes; i++) {
        const gnode *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = node_inputs(L, &gn->info, ins);
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            bool inside = src >= 0 && !L->nodes[src].portable && L->nodes[src].part == part;
            if (!inside && !in_list(x.ext_in, x.n_in, ins[j])) x.ext_in[x.n_in++] = ins[j];
        }
        for (int j = 0; j < gn->info.n_inputs; j++) {
            ly_graph_value v = gn->info.inputs[j];
            if (v == LY_GRAPH_NONE || !L->known[v] || packs_operand(gn->info.op, j)) continue;
            if (in_list(x.ext_in, x.n_in, v)) continue;
            if (L->pvalue[v] < 0) L->pvalue[v] = add_constant_value(L, v);
            if (L->pvalue[v] < 0) {
                st = oom();
                goto done;
            }
            x.ext_in[x.n_in++] = v;
        }
    }
    for (int i = 0; i < L->n_nodes; i++) {
        const gnode *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value v = gn->info.outputs[0];
        bool leaves = L->exported[v];
        for (int j = 0; j < L->n_nodes && !leaves; j++) {
            const gnode *c = &L->nodes[j];
            if (c->folded || (!c->portable && c->part == part)) continue;
            ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
            int k = node_inputs(L, &c->info, ins);
            for (int m = 0; m < k; m++)
                if (ins[m] == v) leaves = true;
        }
        if (leaves) x.ext_out[x.n_out++] = v;
    }
    for (size_t i = 0; i < x.n_in; i++) {
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = dims_of(&L->shape[x.ext_in[i]], LOGICAL, dims);
        x.in_ids[i] = new_value(&x, nd, dims, (uint32_t)i, LY_XNN_FLAG_EXTERNAL_INPUT);
        x.xid[x.ext_in[i]][LOGICAL] = x.in_ids[i];
    }
    for (size_t i = 0; i < x.n_out; i++)
        x.out_ids[i] = NONE_ID;
    for (int i = 0; i < L->n_nodes && st == LY_OK; i++) {
        const gnode *gn = &L->nodes[i];
        if (!gn->portable && !gn->folded && gn->part == part) st = emit(&x, gn);
    }
    /* Outputs still channels-last leave through a transpose. */
    for (size_t i = 0; i < x.n_out && st == LY_OK; i++) {
        if (x.out_ids[i] != NONE_ID) continue;
        ly_graph_value v = x.ext_out[i];
        uint32_t src = x.xid[v][CHANNELS_LAST];
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = dims_of(&L->shape[v], LOGICAL, dims);
        uint32_t id = new_value(&x, nd, dims, (uint32_t)(x.n_in + i), LY_XNN_FLAG_EXTERNAL_OUTPUT);
        node_transpose(&x, src, id, nd, nd == 3 ? swap3 : from_cl4);
        x.out_ids[i] = id;
        st = x.st;
    }
    if (st != LY_OK) goto done;

    ly_xnn_graph graph = {.version = "0",
                          .xnodes = x.n,
                          .n_xnodes = x.n_n,
                          .xvalues = x.v,
                          .n_xvalues = x.n_v,
                          .num_externs = (uint32_t)(x.n_in + x.n_out),
                          .input_ids = x.in_ids,
                          .n_input_ids = x.n_in,
                          .output_ids = x.out_ids,
                          .n_output_ids = x.n_out,
                          .constant_data = x.c,
                          .n_constant_data = x.n_c};
    uint8_t *blob = NULL;
    size_t blob_size = 0;
    st = ly_xnn_encode(&graph, NULL, 0, &blob, &blob_size);
    if (st != LY_OK) goto done;
    if (!GROW(L->blobs, L->n_blobs, L->cap_blobs) ||
        !GROW(L->delegates, L->n_delegates, L->cap_delegates)) {
        free(blob);
        st = oom();
        goto done;
    }
    L->blobs[L->n_blobs++] = (ly_pte_bytes){blob, blob_size};
    /* Segment index fixed up once the segment list is known. */
    L->delegates[L->n_delegates++] = (ly_pte_delegate){
        .id = LY_PTE_XNNPACK_BACKEND_ID, .location = LY_PTE_SEGMENT, .index = (uint32_t)L->n_blobs};

    ly_pte_instruction *ins = add_instr(L);
    int32_t *args = arena_calloc(&L->mem, x.n_in + x.n_out, sizeof *args);
    if (!ins || !args) {
        st = oom();
        goto done;
    }
    int at = (int)L->n_instr - 1;
    for (size_t i = 0; i < x.n_in; i++) {
        args[i] = L->pvalue[x.ext_in[i]];
        touch(L, args[i], at);
    }
    for (size_t i = 0; i < x.n_out; i++) {
        args[x.n_in + i] = L->pvalue[x.ext_out[i]];
        touch(L, args[x.n_in + i], at);
    }
    ins->type = LY_PTE_DELEGATE_CALL;
    ins->u.delegate_call.delegate_index = (int32_t)L->n_delegates - 1;
    ins->u.delegate_call.args = args;
    ins->u.delegate_call.n_args = x.n_in + x.n_out;
done:
    free(x.xid);
    free(x.ext_in);
    free(x.ext_out);
    free(x.in_ids);
    free(x.out_ids);
    free(x.v);
    free(x.n);
    free(x.c);
    return st;
}

/* Which values exist at program level: graph inputs, whatever crosses a
 * partition boundary or feeds a portable op, portable outputs, exported outputs. */
static ly_status make_program_values(lower *L)
{
    for (int v = 0; v < L->n_values; v++)
        L->pvalue[v] = -1;
    for (int i = 0; i < ly_graph_input_count(L->g); i++) {
        ly_graph_value v;
        ly_status st = ly_graph_input_at(L->g, i, &v, NULL);
        if (st != LY_OK) return st;
        int id = add_tensor_value(L, &L->shape[v]);
        if (id < 0) return oom();
        L->pvalue[v] = id;
        L->inputs[L->n_inputs++] = id;
        touch(L, id, 0);
    }
    for (int i = 0; i < L->n_nodes; i++) {
        const gnode *gn = &L->nodes[i];
        if (gn->folded) continue;
        /* every output of a portable kernel (topk's indices too) */
        for (int o = 1; gn->portable && o < gn->info.n_outputs; o++) {
            int id = add_tensor_value(L, &L->shape[gn->info.outputs[o]]);
            if (id < 0) return oom();
            L->pvalue[gn->info.outputs[o]] = id;
        }
        ly_graph_value v = gn->info.outputs[0];
        bool program = gn->portable || L->exported[v];
        for (int j = i + 1; j < L->n_nodes && !program; j++) {
            const gnode *c = &L->nodes[j];
            if (c->folded) continue;
            ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
            int k = node_inputs(L, &c->info, ins);
            for (int m = 0; m < k; m++)
                if (ins[m] == v && (c->portable || c->part != gn->part)) program = true;
        }
        if (!program) continue;
        int id = add_tensor_value(L, &L->shape[v]);
        if (id < 0) return oom();
        L->pvalue[v] = id;
    }
    return LY_OK;
}

ly_status ly_export_lower(ly_graph *g, const ly_graph_ctx *ctx, const ly_lower_options *options,
                          ly_lower_result *out)
{
    if (!g || !ctx || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_lower: NULL argument");
    memset(out, 0, sizeof *out);
    lower L = {.g = g};
    ly_status st = LY_OK;
    L.n_nodes = ly_graph_node_count(g);
    L.n_values = ly_graph_value_count(g);
    L.nodes = calloc((size_t)L.n_nodes + 1, sizeof *L.nodes);
    L.shape = calloc((size_t)L.n_values + 1, sizeof *L.shape);
    L.producer = calloc((size_t)L.n_values + 1, sizeof *L.producer);
    L.known = calloc((size_t)L.n_values + 1, sizeof *L.known);
    L.exported = calloc((size_t)L.n_values + 1, sizeof *L.exported);
    L.pvalue = calloc((size_t)L.n_values + 1, sizeof *L.pvalue);
    L.inputs = calloc((size_t)ly_graph_input_count(g) + 1, sizeof *L.inputs);
    L.outputs = calloc((size_t)ly_graph_output_count(g) + 1, sizeof *L.outputs);
    if (!L.nodes || !L.shape || !L.producer || !L.known || !L.exported || !L.pvalue || !L.inputs ||
        !L.outputs) {
        st = oom();
        goto done;
    }
    for (int v = 0; v < L.n_values; v++) {
        L.producer[v] = -2;
        st = ly_graph_value_view(ctx, v, &L.shape[v]);
        ly_graph_value_info info;
        if (st == LY_OK) st = ly_graph_value_at(g, v, &info);
        if (st != LY_OK) goto done;
        if (info.kind == LY_GRAPH_VALUE_CONSTANT) {
            const ly_tensor *data;
            st = ly_graph_constant_read(g, v, &data);
            if (st != LY_OK) goto done;
            L.producer[v] = CONSTANT;
            L.known[v] = data->data;
        }
    }
    for (int i = 0; i < ly_graph_input_count(g); i++) {
        ly_graph_value v;
        st = ly_graph_input_at(g, i, &v, NULL);
        if (st != LY_OK) goto done;
        L.producer[v] = -1;
    }
    for (int i = 0; i < L.n_nodes; i++) {
        st = ly_graph_node_at(g, i, &L.nodes[i].info);
        if (st != LY_OK) goto done;
        for (int k = 0; k < L.nodes[i].info.n_outputs; k++)
            L.producer[L.nodes[i].info.outputs[k]] = i;
    }
    for (int i = 0; i < L.n_nodes; i++) {
        st = classify(&L, &L.nodes[i]);
        if (st != LY_OK) goto done;
    }
    int n_out = options && options->outputs ? options->n_outputs : ly_graph_output_count(g);
    for (int i = 0; i < n_out; i++) {
        int index = options && options->outputs ? options->outputs[i] : i;
        ly_graph_value v;
        st = ly_graph_output_value(g, index, &v, NULL);
        if (st != LY_OK) goto done;
        L.exported[v] = true;
    }
    int parts = partition(&L);
    if (parts == 0) {
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "ExecuTorch produced no XNNPACK delegate partitions. Refusing to label "
                          "a portable-kernel-only program as XNNPACK.");
        goto done;
    }
    st = make_program_values(&L);
    if (st != LY_OK) goto done;
    /* Portable nodes that read only graph inputs, then each partition followed
     * by the portable nodes that read it. */
    for (int level = -1; level < parts && st == LY_OK; level++) {
        if (level >= 0) {
            bool any = false;
            for (int i = 0; i < L.n_nodes; i++)
                if (!L.nodes[i].portable && !L.nodes[i].folded && L.nodes[i].part == level)
                    any = true;
            if (any) st = emit_partition(&L, level);
        }
        for (int i = 0; i < L.n_nodes && st == LY_OK; i++)
            if (L.nodes[i].portable && !L.nodes[i].folded && L.nodes[i].part == level)
                st = emit_portable(&L, &L.nodes[i]);
    }
    if (st != LY_OK) goto done;
    for (int i = 0; i < n_out; i++) {
        int index = options && options->outputs ? options->outputs[i] : i;
        ly_graph_value v;
        st = ly_graph_output_value(g, index, &v, NULL);
        if (st != LY_OK) goto done;
        if (L.pvalue[v] < 0) {
            st = ly_set_error(LY_E_UNSUPPORTED, "export: output %d is a graph input or a constant",
                              index);
            goto done;
        }
        L.outputs[L.n_outputs++] = L.pvalue[v];
        touch(&L, L.pvalue[v], (int)L.n_instr);
    }
    uint64_t planned = 0;
    st = plan_memory(&L, &planned);
    if (st != LY_OK) goto done;

    /* Segments: [0] the (empty) constant segment, the delegate blobs, then
     * one segment per named buffer. */
    size_t n_segments = 1 + L.n_blobs + L.n_named;
    ly_pte_segment_in *segments = calloc(n_segments, sizeof *segments);
    ly_pte_named_data *named = calloc(L.n_named + 1, sizeof *named);
    if (!segments || !named) {
        free(segments);
        free(named);
        st = oom();
        goto done;
    }
    for (size_t i = 0; i < L.n_blobs; i++)
        segments[1 + i] = (ly_pte_segment_in){L.blobs[i].data, L.blobs[i].size, 0};
    for (size_t i = 0; i < L.n_named; i++) {
        segments[1 + L.n_blobs + i] = (ly_pte_segment_in){L.named[i].data, L.named[i].size, 16};
        named[i] = (ly_pte_named_data){L.named[i].key, (uint32_t)(1 + L.n_blobs + i)};
    }
    static const uint64_t no_constants[1] = {0};
    segments[0] = (ly_pte_segment_in){L.const_seg, L.const_seg_size, 16};
    int64_t buffer_sizes[2] = {0, (int64_t)planned};
    ly_pte_chain chain = {.instructions = L.instr, .n_instructions = L.n_instr};
    ly_pte_plan plan = {.name = LY_PTE_FORWARD,
                        .has_container_meta_type = true,
                        .encoded_inp_str = "T2#1#0(T1#1($),D0())",
                        .encoded_out_str = "$",
                        .values = L.values,
                        .n_values = L.n_pvalues,
                        .inputs = L.inputs,
                        .n_inputs = L.n_inputs,
                        .outputs = L.outputs,
                        .n_outputs = L.n_outputs,
                        .chains = &chain,
                        .n_chains = 1,
                        .operators = L.ops,
                        .n_operators = L.n_ops,
                        .delegates = L.delegates,
                        .n_delegates = L.n_delegates,
                        .non_const_buffer_sizes = buffer_sizes,
                        .n_non_const_buffer_sizes = 2};
    ly_pte_program program = {
        .version = 0,
        .execution_plan = &plan,
        .n_execution_plan = 1,
        .constant_segment = {.present = true,
                             .segment_index = 0,
                             .offsets = L.n_const_offsets ? L.const_offsets : no_constants,
                             .n_offsets = L.n_const_offsets ? L.n_const_offsets : 1},
        .named_data = named,
        .n_named_data = L.n_named};
    st = ly_pte_encode(&program, segments, n_segments, &out->program, &out->size);
    free(segments);
    free(named);
    if (st != LY_OK) goto done;
    out->delegate_partitions = (int)L.n_delegates;
    out->kernel_calls = L.kernel_calls;
done:
    if (L.mem.failed && st == LY_OK) st = oom();
    for (size_t i = 0; i < L.n_blobs; i++)
        free((void *)L.blobs[i].data);
    free(L.blobs);
    free(L.nodes);
    free(L.shape);
    free(L.producer);
    free(L.known);
    free(L.exported);
    free(L.pvalue);
    free(L.inputs);
    free(L.outputs);
    free(L.values);
    free(L.instr);
    free(L.delegates);
    free(L.named);
    free(L.pt);
    free(L.const_seg);
    free(L.const_offsets);
    arena_free(&L.mem);
    return st;
}
