/* SPDX-License-Identifier: MIT */
/* Partitions, and one partition as an XNNGraph and its DelegateCall (see
 * lower_internal.h): the builder the XNN emitters (xnn_ops.c) call, and the
 * layouts of values inside a partition. */
#include "export/lower_internal.h"

#include <stdio.h>

/* ---- building an XNNGraph ------------------------------------------------------------ */

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

/* ---- partitions ---------------------------------------------------------------- */

/* Partitions in dependency order: a delegated node goes after every portable
 * node it depends on; a portable node runs after the partitions it reads. */
int ly_lower_partition(ly_lowering *L)
{
    int parts = 0;
    for (int i = 0; i < L->n_nodes; i++) {
        ly_lower_node *gn = &L->nodes[i];
        if (gn->folded) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = ly_lower_node_inputs(L, &gn->info, ins);
        int p = gn->portable ? -1 : 0;
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            if (src < 0) continue;
            const ly_lower_node *s = &L->nodes[src];
            int need = gn->portable ? s->part : s->portable ? s->part + 1 : s->part;
            if (need > p) p = need;
        }
        gn->part = p;
        if (!gn->portable && p + 1 > parts) parts = p + 1;
    }
    return parts;
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

/* One delegated node's XNNPACK nodes, by its op's emitter. */
static ly_status emit(ly_xnn_builder *x, const ly_lower_node *gn)
{
    const ly_graph_node_info *n = &gn->info;
    x->node_name = n->name;
    ly_xnn_exports[n->op]->emit(x, n);
    return x->st;
}

static bool in_list(const int *list, size_t n, int v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v) return true;
    return false;
}

/* Build partition `part` as an XNNGraph, encode it, and emit its DelegateCall. */
ly_status ly_lower_emit_partition(ly_lowering *L, int part)
{
    ly_xnn_builder x = {.L = L, .part = part, .proj_id = NONE_ID};
    ly_status st = LY_OK;
    x.xid = calloc((size_t)L->n_values, sizeof *x.xid);
    x.ext_in = calloc((size_t)L->n_values, sizeof *x.ext_in);
    x.ext_out = calloc((size_t)L->n_values, sizeof *x.ext_out);
    x.in_ids = calloc((size_t)L->n_values, sizeof *x.in_ids);
    x.out_ids = calloc((size_t)L->n_values, sizeof *x.out_ids);
    if (!x.xid || !x.ext_in || !x.ext_out || !x.in_ids || !x.out_ids ||
        !LY_LOWER_GROW(x.c, x.n_c, x.cap_c)) {
        st = ly_lower_oom();
        goto done;
    }
    for (int v = 0; v < L->n_values; v++)
        x.xid[v][0] = x.xid[v][1] = NONE_ID;
    x.c[x.n_c++] = (ly_xnn_constant_data){0, 0, NULL};

    /* Externals: inputs in first-use order, then outputs in definition order. */
    for (int i = 0; i < L->n_nodes; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = ly_lower_node_inputs(L, &gn->info, ins);
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            bool inside = src >= 0 && !L->nodes[src].portable && L->nodes[src].part == part;
            if (!inside && !in_list(x.ext_in, x.n_in, ins[j])) x.ext_in[x.n_in++] = ins[j];
        }
        for (int j = 0; j < gn->info.n_inputs; j++) {
            ly_graph_value v = gn->info.inputs[j];
            if (v == LY_GRAPH_NONE || !L->known[v] || packs_operand(gn->info.op, j)) continue;
            if (in_list(x.ext_in, x.n_in, v)) continue;
            if (L->pvalue[v] < 0) L->pvalue[v] = ly_lower_constant_value(L, v);
            if (L->pvalue[v] < 0) {
                st = ly_lower_oom();
                goto done;
            }
            x.ext_in[x.n_in++] = v;
        }
    }
    for (int i = 0; i < L->n_nodes; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value v = gn->info.outputs[0];
        bool leaves = L->exported[v];
        for (int j = 0; j < L->n_nodes && !leaves; j++) {
            const ly_lower_node *c = &L->nodes[j];
            if (c->folded || (!c->portable && c->part == part)) continue;
            ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
            int k = ly_lower_node_inputs(L, &c->info, ins);
            for (int m = 0; m < k; m++)
                if (ins[m] == v) leaves = true;
        }
        if (leaves) x.ext_out[x.n_out++] = v;
    }
    for (size_t i = 0; i < x.n_in; i++) {
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = ly_xb_dims(&L->shape[x.ext_in[i]], LOGICAL, dims);
        x.in_ids[i] = ly_xb_value(&x, nd, dims, (uint32_t)i, LY_XNN_FLAG_EXTERNAL_INPUT);
        x.xid[x.ext_in[i]][LOGICAL] = x.in_ids[i];
    }
    for (size_t i = 0; i < x.n_out; i++)
        x.out_ids[i] = NONE_ID;
    for (int i = 0; i < L->n_nodes && st == LY_OK; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (!gn->portable && !gn->folded && gn->part == part) st = emit(&x, gn);
    }
    /* Outputs still channels-last leave through a transpose. */
    for (size_t i = 0; i < x.n_out && st == LY_OK; i++) {
        if (x.out_ids[i] != NONE_ID) continue;
        ly_graph_value v = x.ext_out[i];
        uint32_t src = x.xid[v][CHANNELS_LAST];
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = ly_xb_dims(&L->shape[v], LOGICAL, dims);
        uint32_t id =
            ly_xb_value(&x, nd, dims, (uint32_t)(x.n_in + i), LY_XNN_FLAG_EXTERNAL_OUTPUT);
        ly_xb_transpose(&x, src, id, nd, nd == 3 ? ly_xb_swap3 : ly_xb_from_cl4);
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
    if (!LY_LOWER_GROW(L->blobs, L->n_blobs, L->cap_blobs) ||
        !LY_LOWER_GROW(L->delegates, L->n_delegates, L->cap_delegates)) {
        free(blob);
        st = ly_lower_oom();
        goto done;
    }
    L->blobs[L->n_blobs++] = (ly_pte_bytes){blob, blob_size};
    /* Segment index fixed up once the segment list is known. */
    L->delegates[L->n_delegates++] = (ly_pte_delegate){
        .id = LY_PTE_XNNPACK_BACKEND_ID, .location = LY_PTE_SEGMENT, .index = (uint32_t)L->n_blobs};

    ly_pte_instruction *ins = ly_lower_instruction(L);
    int32_t *args = ly_lower_calloc(&L->mem, x.n_in + x.n_out, sizeof *args);
    if (!ins || !args) {
        st = ly_lower_oom();
        goto done;
    }
    int at = (int)L->n_instr - 1;
    for (size_t i = 0; i < x.n_in; i++) {
        args[i] = L->pvalue[x.ext_in[i]];
        ly_lower_touch(L, args[i], at);
    }
    for (size_t i = 0; i < x.n_out; i++) {
        args[x.n_in + i] = L->pvalue[x.ext_out[i]];
        ly_lower_touch(L, args[x.n_in + i], at);
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
