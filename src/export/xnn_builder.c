/* SPDX-License-Identifier: MIT */
/* Building one partition's XNNGraph (see lowering.h): its values, constants
 * and nodes, and the two layouts a graph value may have inside it. */
#include "export/lowering.h"

#include <stdio.h>

const ly_tensor *ly_xb_shape(const ly_xnn_builder *x, ly_graph_value v)
{
    return &x->L->shape[v];
}

const float *ly_xb_known(const ly_xnn_builder *x, ly_graph_value v)
{
    return x->L->known[v];
}

void *ly_xb_alloc(ly_xnn_builder *x, size_t count, size_t size)
{
    void *p = ly_lower_calloc(&x->L->mem, count, size);
    if (!p) x->st = ly_lower_oom();
    return p;
}

uint32_t ly_xb_held(const ly_xnn_builder *x, ly_graph_value v, int layout)
{
    return x->xid[v][layout];
}

void ly_xb_alias(ly_xnn_builder *x, ly_graph_value v, int layout, uint32_t id)
{
    x->xid[v][layout] = id;
}

bool ly_xb_cl_rank(int ndim)
{
    return ndim == 3 || ndim == 4;
}

/* Dims of graph value `v` in `layout`. */
int ly_xb_dims(const ly_tensor *s, int layout, uint32_t *dims)
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

uint32_t ly_xb_value(ly_xnn_builder *x, int ndim, const uint32_t *dims, uint32_t external_id,
                     uint32_t flags)
{
    if (x->st != LY_OK) return NONE_ID;
    uint32_t *d = ly_lower_calloc(&x->L->mem, (size_t)ndim, sizeof *d);
    if (!d || !LY_LOWER_GROW(x->v, x->n_v, x->cap_v)) {
        x->st = ly_lower_oom();
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

uint32_t ly_xb_internal(ly_xnn_builder *x, int ndim, const uint32_t *dims)
{
    return ly_xb_value(x, ndim, dims, NONE_ID, 0);
}

/* A constant tensor whose bytes go to named data. `data` must outlive the lowering. */
uint32_t ly_xb_const(ly_xnn_builder *x, const char *name, int ndim, const uint32_t *dims,
                     const void *data, size_t size)
{
    if (x->st != LY_OK) return NONE_ID;
    const char *key = NULL;
    ly_status st = ly_lower_named_data(x->L, name, data, size, &key);
    if (st != LY_OK || !LY_LOWER_GROW(x->c, x->n_c, x->cap_c)) {
        x->st = st != LY_OK ? st : ly_lower_oom();
        return NONE_ID;
    }
    uint32_t index = (uint32_t)x->n_c++;
    x->c[index] = (ly_xnn_constant_data){.offset = UINT64_MAX, .size = size, .named_key = key};
    uint32_t id = ly_xb_internal(x, ndim, dims);
    if (id != NONE_ID) x->v[id].tensor.constant_buffer_idx = index;
    return id;
}

ly_xnn_node *ly_xb_node(ly_xnn_builder *x, ly_xnn_node_type type)
{
    if (x->st != LY_OK) return NULL;
    if (!LY_LOWER_GROW(x->n, x->n_n, x->cap_n)) {
        x->st = ly_lower_oom();
        return NULL;
    }
    ly_xnn_node *n = &x->n[x->n_n];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->debug_handle = (uint32_t)++x->n_n;
    return n;
}

void ly_xb_1x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t in, uint32_t out)
{
    ly_xnn_node *n = ly_xb_node(x, type);
    if (n) n->u.n1x1 = (__typeof__(n->u.n1x1)){in, out, 0};
}

void ly_xb_2x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t a, uint32_t b, uint32_t out)
{
    ly_xnn_node *n = ly_xb_node(x, type);
    if (n) n->u.n2x1 = (__typeof__(n->u.n2x1)){a, b, out, 0};
}

void ly_xb_transpose(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *perm)
{
    uint32_t *p = ly_lower_calloc(&x->L->mem, (size_t)nd, sizeof *p);
    ly_xnn_node *n = ly_xb_node(x, LY_XNN_STATIC_TRANSPOSE);
    if (!p) x->st = ly_lower_oom();
    if (!n || !p) return;
    memcpy(p, perm, (size_t)nd * sizeof *p);
    n->u.transpose.num_dims = (uint32_t)nd;
    n->u.transpose.perm = p;
    n->u.transpose.n_perm = (size_t)nd;
    n->u.transpose.input_id = in;
    n->u.transpose.output_id = out;
}

void ly_xb_reshape(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *shape)
{
    uint32_t *p = ly_lower_calloc(&x->L->mem, (size_t)nd, sizeof *p);
    ly_xnn_node *n = ly_xb_node(x, LY_XNN_STATIC_RESHAPE);
    if (!p) x->st = ly_lower_oom();
    if (!n || !p) return;
    memcpy(p, shape, (size_t)nd * sizeof *p);
    n->u.reshape.num_dims = (uint32_t)nd;
    n->u.reshape.new_shape = p;
    n->u.reshape.n_new_shape = (size_t)nd;
    n->u.reshape.input_id = in;
    n->u.reshape.output_id = out;
}

void ly_xb_slice(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *offsets,
                 const uint32_t *sizes)
{
    uint32_t *o = ly_lower_calloc(&x->L->mem, (size_t)nd, sizeof *o);
    uint32_t *s = ly_lower_calloc(&x->L->mem, (size_t)nd, sizeof *s);
    ly_xnn_node *n = ly_xb_node(x, LY_XNN_STATIC_SLICE);
    if (!o || !s) x->st = ly_lower_oom();
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
void ly_xb_concat(ly_xnn_builder *x, int n, const uint32_t *in, uint32_t out, int nd,
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
            target = ly_xb_internal(x, nd, d);
        }
        static const ly_xnn_node_type types[] = {LY_XNN_CONCATENATE2, LY_XNN_CONCATENATE3,
                                                 LY_XNN_CONCATENATE4};
        ly_xnn_node *node = ly_xb_node(x, types[take - 1]);
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

char *ly_xb_const_name(ly_xnn_builder *x, const char *node, const char *what)
{
    size_t n = strlen(node) + strlen(what) + 2;
    char *s = ly_lower_calloc(&x->L->mem, n, 1);
    if (!s) {
        x->st = ly_lower_oom();
        return NULL;
    }
    snprintf(s, n, "%s_%s", node, what);
    for (char *p = s; *p; p++)
        if (*p == '.') *p = '_';
    return s;
}

const uint32_t ly_xb_to_cl4[4] = {0, 2, 3, 1}, ly_xb_from_cl4[4] = {0, 3, 1, 2};
const uint32_t ly_xb_swap3[3] = {0, 2, 1};

/* Where logical axis `axis` of an `ndim`-d value sits in `layout`. */
uint32_t ly_xb_axis(int ndim, int layout, int64_t axis)
{
    if (layout != CHANNELS_LAST || !ly_xb_cl_rank(ndim)) return (uint32_t)axis;
    if (ndim == 3) return (uint32_t)ly_xb_swap3[axis];
    return (uint32_t)ly_xb_from_cl4[axis];
}

/* Graph value `v` in `layout`, converting with a static transpose if it only
 * exists in the other one. */
uint32_t ly_xb_get(ly_xnn_builder *x, ly_graph_value v, int layout)
{
    if (x->st != LY_OK) return NONE_ID;
    const ly_tensor *s = &x->L->shape[v];
    if (!ly_xb_cl_rank(s->ndim)) layout = LOGICAL;
    if (x->xid[v][layout] != NONE_ID) return x->xid[v][layout];
    int other = 1 - layout;
    if (x->xid[v][other] == NONE_ID) {
        x->st = ly_set_error(LY_E_INTERNAL, "export: %s: value %d used before it is defined",
                             x->node_name, (int)v);
        return NONE_ID;
    }
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, layout, dims);
    uint32_t id = ly_xb_internal(x, nd, dims);
    const uint32_t *perm = nd == 3                   ? ly_xb_swap3
                           : layout == CHANNELS_LAST ? ly_xb_to_cl4
                                                     : ly_xb_from_cl4;
    ly_xb_transpose(x, x->xid[v][other], id, nd, perm);
    x->xid[v][layout] = id;
    return id;
}

/* The layout `v` already has, preferring channels-last (constants: either). */
int ly_xb_have(const ly_xnn_builder *x, ly_graph_value v)
{
    return x->xid[v][CHANNELS_LAST] != NONE_ID ? CHANNELS_LAST : LOGICAL;
}

int ly_xb_ext_out_index(const ly_xnn_builder *x, ly_graph_value v)
{
    for (size_t i = 0; i < x->n_out; i++)
        if (x->ext_out[i] == v) return (int)i;
    return -1;
}

/* The value a node defines for graph value `v` in `layout`: the partition's
 * external output itself when `v` leaves it and the layout is the logical one. */
uint32_t ly_xb_define(ly_xnn_builder *x, ly_graph_value v, int layout)
{
    const ly_tensor *s = &x->L->shape[v];
    if (!ly_xb_cl_rank(s->ndim)) layout = LOGICAL;
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, layout, dims);
    int k = ly_xb_ext_out_index(x, v);
    uint32_t id;
    if (k >= 0 && layout == LOGICAL) {
        id = ly_xb_value(x, nd, dims, (uint32_t)(x->n_in + (size_t)k), LY_XNN_FLAG_EXTERNAL_OUTPUT);
        if (id != NONE_ID) x->out_ids[k] = id;
    } else {
        id = ly_xb_internal(x, nd, dims);
    }
    if (id != NONE_ID) x->xid[v][layout] = id;
    return id;
}

uint32_t ly_xb_fc_const(ly_xnn_builder *x, const char *what, uint32_t in, int nd,
                        const uint32_t *dims, uint32_t n_out, const float *filter,
                        const float *bias)
{
    uint32_t k = dims[nd - 1], fd[2] = {n_out, k}, od[LY_MAX_DIMS];
    memcpy(od, dims, (size_t)nd * sizeof *od);
    od[nd - 1] = n_out;
    uint32_t f = ly_xb_const(x, ly_xb_const_name(x, x->node_name, what), 2, fd, filter,
                             (size_t)n_out * k * sizeof(float));
    uint32_t b = bias ? ly_xb_const(x, ly_xb_const_name(x, x->node_name, "bias"), 1, fd, bias,
                                    (size_t)n_out * sizeof(float))
                      : NONE_ID;
    uint32_t out = ly_xb_internal(x, nd, od);
    ly_xnn_node *fc = ly_xb_node(x, LY_XNN_FULLY_CONNECTED);
    if (fc) fc->u.fc = (__typeof__(fc->u.fc)){in, f, b, out, 0};
    return out;
}

uint32_t ly_xb_arange_row(ly_xnn_builder *x, int64_t n)
{
    if (x->arange_id != NONE_ID && x->v[x->arange_id].tensor.dims[1] == (uint32_t)n)
        return x->arange_id;
    float *row = ly_xb_alloc(x, (size_t)n, sizeof(float));
    if (!row) return NONE_ID;
    for (int64_t i = 0; i < n; i++)
        row[i] = (float)i;
    uint32_t dims[2] = {1, (uint32_t)n};
    x->arange_id = ly_xb_const(x, "dfl_project", 2, dims, row, (size_t)n * sizeof(float));
    return x->arange_id;
}

void ly_xb_unary(ly_xnn_builder *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    ly_xb_1x1(x, type, in, ly_xb_define(x, n->outputs[0], layout));
}
