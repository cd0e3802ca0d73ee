/* SPDX-License-Identifier: MIT */
/*
 * ExecuTorch's XnnpackBackend on the XNNPACK Debian ships (2022 operator API).
 *
 * That XNNPACK predates several subgraph nodes ExecuTorch serializes (static
 * transpose, slice, concatenate, copy, exp, ...), and its subgraph API cannot
 * express strided views. So the XNNGraph is rebuilt here as XNNPACK
 * operators where XNNPACK has them (convolution, depthwise convolution,
 * pooling, fully-connected, softmax, sigmoid, bilinear resize), run on one
 * pthreadpool, and our own loops for the rest; XNNPACK's own subgraph
 * runtime does the same operator-per-node mapping internally.
 *
 * Memory: activations live in one arena planned by live range. Values are
 * rows of their last dimension, `ld` floats apart, so that
 *  - a concatenation on the last axis costs nothing: its inputs are written
 *    straight into their channel range of its output (XNNPACK operators take
 *    pixel strides);
 *  - a slice on the last axis is a view;
 *  - a reshape of a dense value is a view.
 * Everything else reads and writes row-strided data directly.
 *
 * The blob is validated by the pte layer (ly_xnn_decode); what XNNPACK would
 * refuse later (shapes that do not fit the node, non-constant weights, other
 * datatypes) is refused here at init with the node named, so execution never
 * sees an inconsistent graph.
 */
#include "engines/executorch/xnnpack/xnn_internal.h"

#include "core/checked.h"
#include "graph/graph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ly_et_xnnpack_available(void)
{
    return true;
}

/* ---- process-wide XNNPACK state ----------------------------------------------- */

static struct {
    pthread_once_t once;
    enum xnn_status init;
} g = {.once = PTHREAD_ONCE_INIT};

static void init_once(void)
{
    g.init = xnn_initialize(NULL);
}

/* LIBREYOLO_XNNPACK=operators: run the delegate's nodes as XNNPACK operators
 * and our loops even where they form a graph of our ops (to compare the two);
 * =graph (or unset): the default. */
static bool operators_only(void)
{
    const char *e = getenv("LIBREYOLO_XNNPACK");
    if (!e || !*e || !strcmp(e, "graph")) return false;
    if (!strcmp(e, "operators")) return true;
    ly_warn_once("LIBREYOLO_XNNPACK", "LIBREYOLO_XNNPACK=%s: expected graph or operators; ignored",
                 e);
    return false;
}

/* ---- values --------------------------------------------------------------------- */

static ly_status load_values(ly_et_xnnpack *d, const ly_pte_program *p, const ly_xnn_graph *xg)
{
    d->n_v = xg->n_xvalues;
    d->v = calloc(d->n_v ? d->n_v : 1, sizeof *d->v);
    d->num_externs = xg->num_externs;
    d->ext_value = calloc(xg->num_externs ? xg->num_externs : 1, sizeof *d->ext_value);
    if (!d->v || !d->ext_value) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    for (uint32_t i = 0; i < xg->num_externs; i++)
        d->ext_value[i] = -1;
    for (size_t i = 0; i < xg->n_xvalues; i++) {
        const ly_xnn_value *src = &xg->xvalues[i];
        const ly_xnn_tensor_value *t = &src->tensor;
        xval *v = &d->v[i];
        v->producer = -1;
        v->parent = (int)i;
        if (src->type != LY_XNN_TENSOR_VALUE || t->datatype != LY_XNN_DT_FP32)
            return ly_xd_fail(
                d, NULL,
                "value %zu: only fp32 tensors are supported (quantized values and other "
                "datatypes are not)",
                i);
        if (t->num_dims > MAX_DIMS)
            return ly_xd_fail(d, NULL, "value %zu has %u dimensions, at most %d are supported", i,
                              t->num_dims, MAX_DIMS);
        v->ndim = (int)t->num_dims;
        v->numel = 1;
        for (int k = 0; k < v->ndim; k++) {
            v->dims[k] = t->dims[k];
            if (t->dims[k] == 0 || !ly_checked_mul(v->numel, t->dims[k], &v->numel) ||
                v->numel > MAX_ELEMENTS)
                return ly_xd_fail(d, NULL, "value %zu: dimension %d is %u", i, k, t->dims[k]);
        }
        v->last = v->ndim ? v->dims[v->ndim - 1] : 1;
        v->rows = v->numel / v->last;
        v->ld = v->last;
        bool in = t->flags & LY_XNN_FLAG_EXTERNAL_INPUT,
             out = t->flags & LY_XNN_FLAG_EXTERNAL_OUTPUT;
        if (in && out)
            return ly_xd_fail(d, NULL, "value %zu is both an external input and output", i);
        if (in || out) {
            if (t->external_id >= xg->num_externs || d->ext_value[t->external_id] >= 0)
                return ly_xd_fail(d, NULL, "value %zu: external id %u is out of range or repeated",
                                  i, t->external_id);
            if (t->constant_buffer_idx != 0)
                return ly_xd_fail(d, NULL, "value %zu is external and constant", i);
            d->ext_value[t->external_id] = (int)i;
            v->kind = in ? V_EXT_IN : V_EXT_OUT;
            v->ext = t->external_id;
        } else if (t->constant_buffer_idx != 0) {
            const ly_xnn_constant_data *c = &xg->constant_data[t->constant_buffer_idx];
            ly_pte_bytes bytes = {0};
            if (c->named_key) {
                ly_status st = ly_pte_named_data_find(p, c->named_key, &bytes);
                if (st != LY_OK) return ly_error_prefix(st, d->what);
            } else {
                if (!ly_pte_range_within(c->offset, c->size, xg->constant_area.size))
                    return ly_xd_fail(d, NULL, "value %zu: constant data outside the blob", i);
                bytes.data = xg->constant_area.data + c->offset;
                bytes.size = (size_t)c->size;
            }
            int64_t need = 0;
            if (!ly_checked_mul(v->numel, (int64_t)sizeof(float), &need) ||
                bytes.size < (uint64_t)need)
                return ly_xd_fail(d, NULL,
                                  "value %zu: constant holds %zu bytes, its dims need %lld", i,
                                  bytes.size, (long long)need);
            if ((uintptr_t)bytes.data % sizeof(float) != 0)
                return ly_xd_fail(d, NULL, "value %zu: constant data is not 4-byte aligned", i);
            v->kind = V_CONST;
            v->cdata = (const float *)(const void *)bytes.data;
        } else {
            v->kind = V_INTERNAL;
        }
    }
    for (uint32_t i = 0; i < xg->num_externs; i++)
        if (d->ext_value[i] < 0) return ly_xd_fail(d, NULL, "external id %u has no value", i);
    return LY_OK;
}

/* ---- placement ---------------------------------------------------------------- */

static int find_root(ly_et_xnnpack *d, int v, int64_t *offset)
{
    int64_t off = 0;
    int guard = 0;
    while (d->v[v].parent != v && guard++ < (int)d->n_v) {
        off += d->v[v].offset;
        v = d->v[v].parent;
    }
    *offset = off;
    return v;
}

/* Floats between rows of `v`: its own row length when it owns its storage or
 * is a dense reshape view, else its parent's (concat placement and
 * last-axis slices keep rows). */
static int64_t resolve_ld(const ly_et_xnnpack *d, int v)
{
    for (size_t guard = 0; guard <= d->n_v; guard++) {
        const xval *x = &d->v[v];
        if (x->parent == v || x->dense_view) return x->last;
        v = x->parent;
    }
    return d->v[v].last;
}

/* Concatenations on the last axis take their inputs in place where they can:
 * an internal value written by an op, not already placed, not an input of
 * this concat twice. Then slices of the last axis and reshapes of dense
 * values become views. */
static void place(ly_et_xnnpack *d)
{
    for (size_t i = d->n_ops; i-- > 0;) {
        xop *o = &d->ops[i];
        const xval *y = &d->v[o->out];
        if (o->kind != K_CONCAT || o->axis != y->ndim - 1) continue;
        int64_t channel = 0;
        for (int k = 0; k < o->n_in; k++) {
            xval *x = &d->v[o->in[k]];
            bool twice = false;
            for (int j = 0; j < o->n_in; j++)
                if (j != k && o->in[j] == o->in[k]) twice = true;
            if (x->kind == V_INTERNAL && x->producer >= 0 && x->parent == o->in[k] && !twice) {
                x->parent = o->out;
                x->offset = channel;
                o->placed[k] = true;
            }
            channel += x->last;
        }
    }
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind != K_COPY) continue;
        xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
        if (y->kind != V_INTERNAL || y->parent != o->out) continue;
        if (o->binop == 2) {
            bool last_only = true;
            for (int k = 0; k < x->ndim - 1; k++)
                if (o->offsets[k] != 0 || y->dims[k] != x->dims[k]) last_only = false;
            if (!last_only || x->ndim == 0) continue;
            y->parent = o->in[0];
            y->offset = o->offsets[x->ndim - 1];
            o->kind = K_VIEW;
        } else if (x->rows == 1 || resolve_ld(d, o->in[0]) == x->last) {
            y->parent = o->in[0];
            y->offset = 0;
            y->dense_view = true;
            o->kind = K_VIEW;
        }
    }
    for (size_t i = 0; i < d->n_v; i++) {
        xval *v = &d->v[i];
        v->root = find_root(d, (int)i, &v->root_off);
        v->ld = resolve_ld(d, (int)i);
    }
}

/* Live ranges per root (externals and constants excluded), then offsets:
 * largest first, first fit among the placed roots whose ranges meet. */
static ly_status plan(ly_et_xnnpack *d)
{
    for (size_t i = 0; i < d->n_v; i++)
        d->v[i].first = d->v[i].last_use = -1;
    for (size_t t = 0; t < d->n_ops; t++) {
        const xop *o = &d->ops[t];
        int ids[6];
        int n = 0;
        for (int k = 0; k < o->n_in; k++)
            ids[n++] = o->in[k];
        ids[n++] = o->out;
        for (int k = 0; k < n; k++) {
            xval *r = &d->v[d->v[ids[k]].root];
            if (r->first < 0 || (int)t < r->first) r->first = (int)t;
            if ((int)t > r->last_use) r->last_use = (int)t;
        }
    }
    size_t n_roots = 0;
    int *roots = calloc(d->n_v ? d->n_v : 1, sizeof *roots);
    if (!roots) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    for (size_t i = 0; i < d->n_v; i++) {
        xval *v = &d->v[i];
        if (v->root == (int)i && v->kind == V_INTERNAL && v->first >= 0) roots[n_roots++] = (int)i;
    }
    /* insertion sort by size, descending (few hundred roots) */
    for (size_t i = 1; i < n_roots; i++) {
        int r = roots[i];
        size_t j = i;
        while (j > 0 && d->v[roots[j - 1]].numel < d->v[r].numel) {
            roots[j] = roots[j - 1];
            j--;
        }
        roots[j] = r;
    }
    size_t total = 0;
    for (size_t i = 0; i < n_roots; i++) {
        xval *v = &d->v[roots[i]];
        size_t size = ((size_t)v->numel * sizeof(float) + 63) / 64 * 64, at = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (size_t j = 0; j < i; j++) {
                const xval *q = &d->v[roots[j]];
                if (q->last_use < v->first || v->last_use < q->first) continue;
                size_t qs = q->arena_off,
                       qe = qs + ((size_t)q->numel * sizeof(float) + 63) / 64 * 64;
                if (at < qe && qs < at + size) {
                    at = qe;
                    moved = true;
                }
            }
        }
        v->arena_off = at;
        if (at + size > total) total = at + size;
    }
    free(roots);
    d->arena_bytes = total + XNN_EXTRA_BYTES;
    if (d->arena_bytes > ((size_t)4 << 30))
        return ly_xd_fail(d, NULL, "the graph needs %zu bytes of activations (over 4 GiB)",
                          d->arena_bytes);
    /* calloc: zeroed pages on demand */
    d->arena = calloc(1, d->arena_bytes);
    if (!d->arena)
        return ly_set_error(LY_E_NO_MEMORY, "%s: cannot allocate %zu bytes of activations", d->what,
                            d->arena_bytes);
    return LY_OK;
}

void ly_et_xnnpack_free(ly_et_xnnpack *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_ops; i++)
        if (d->ops[i].op) xnn_delete_operator(d->ops[i].op);
    if (d->graph_ctx) ly_graph_ctx_free(d->graph_ctx);
    if (d->graph) ly_graph_free(d->graph);
    ly_xnn_graph_free(d->xg);
    free(d->graph_inputs);
    free(d->graph_outputs);
    free(d->graph_input_views);
    free(d->ops);
    free(d->v);
    free(d->ext_value);
    free(d->arena);
    free(d);
}

/* The delegate on XNNPACK's operators and our loops; the decoded graph goes. */
static ly_status finish_operators(ly_et_xnnpack *d)
{
    place(d);
    ly_status st = plan(d);
    if (st == LY_OK) st = ly_xd_create_operators(d, d->xg);
    ly_xnn_graph_free(d->xg);
    d->xg = NULL;
    return st;
}

ly_status ly_et_xnnpack_init(const ly_pte_program *program, const ly_pte_bytes *blob,
                             const char *what, ly_et_xnnpack **out)
{
    *out = NULL;
    pthread_once(&g.once, init_once);
    if (g.init != xnn_status_success)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: XNNPACK could not initialise on this CPU (status %d)", what,
                            (int)g.init);
    ly_xnn_graph *xg = NULL;
    ly_status st = ly_xnn_decode(blob->data, blob->size, what, &xg);
    if (st != LY_OK) return st;
    ly_et_xnnpack *d = calloc(1, sizeof *d);
    if (!d) {
        ly_xnn_graph_free(xg);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    d->what = what;
    st = load_values(d, program, xg);
    if (st == LY_OK) {
        d->n_ops = xg->n_xnodes;
        d->ops = calloc(d->n_ops ? d->n_ops : 1, sizeof *d->ops);
        if (!d->ops) st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    for (size_t i = 0; st == LY_OK && i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        o->name = ly_xnn_node_name(xg->xnodes[i].type);
        o->out = -1;
        st = ly_xd_make_node(d, o, &xg->xnodes[i]);
        if (st == LY_OK && o->out < 0) st = ly_xd_fail(d, o, "the node writes no value");
    }
    for (size_t i = 0; st == LY_OK && i < d->n_v; i++)
        if (d->v[i].kind == V_EXT_OUT && d->v[i].producer < 0)
            st = ly_xd_fail(d, NULL, "external output %u is never written", d->v[i].ext);
    /* Our graph is built once the method knows whether the delegate runs in
     * a graph of its own or inside a merged one (ly_et_xnnpack_finish): not
     * twice, as its constants are copied in. */
    d->xg = xg;
    if (st == LY_OK && operators_only()) st = finish_operators(d);
    if (st != LY_OK) {
        ly_et_xnnpack_free(d);
        return st;
    }
    *out = d;
    return LY_OK;
}

ly_status ly_et_xnnpack_finish(ly_et_xnnpack *d, ly_graph_arena *arena)
{
    if (!d || !d->xg) return LY_OK; /* finished, merged, or on operators */
    ly_status st = ly_xd_graph_build(d, d->xg);
    if (st == LY_OK && !d->graph) return finish_operators(d);
    ly_xnn_graph_free(d->xg);
    d->xg = NULL;
    if (st == LY_OK && arena) ly_graph_ctx_share_arena(d->graph_ctx, arena);
    return st;
}

ly_status ly_et_xnnpack_append(ly_et_xnnpack *d, ly_graph *g, int tag, const ly_graph_value *bound,
                               ly_graph_value *produced)
{
    return ly_xd_graph_append(d, g, tag, bound, produced);
}

void ly_et_xnnpack_merged(ly_et_xnnpack *d)
{
    if (!d || !d->xg) return;
    ly_xnn_graph_free(d->xg);
    d->xg = NULL;
    d->merged = true;
}

bool ly_et_xnnpack_runs_operators(const ly_et_xnnpack *d)
{
    return d && !d->graph && !d->merged && !d->xg;
}

size_t ly_et_xnnpack_num_externs(const ly_et_xnnpack *d)
{
    return d ? d->num_externs : 0;
}

ly_status ly_et_xnnpack_extern_dims(const ly_et_xnnpack *d, size_t id, int *ndim, int64_t *dims,
                                    bool *is_output)
{
    if (!d || id >= d->num_externs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "xnnpack: no external %zu", id);
    const xval *v = &d->v[d->ext_value[id]];
    *ndim = v->ndim;
    memcpy(dims, v->dims, (size_t)v->ndim * sizeof *dims);
    *is_output = v->kind == V_EXT_OUT;
    return LY_OK;
}

ly_status ly_et_xnnpack_execute(ly_et_xnnpack *d, ly_tensor *const *args, size_t n_args,
                                int threads)
{
    if (n_args < d->num_externs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %zu arguments for %u externals", d->what,
                            n_args, d->num_externs);
    for (uint32_t e = 0; e < d->num_externs; e++) {
        const xval *v = &d->v[d->ext_value[e]];
        const ly_tensor *t = args[e];
        if (!t || t->dtype != LY_F32 || !t->data || ly_tensor_numel(t) != v->numel)
            return ly_set_error(LY_E_SHAPE,
                                "%s: argument %u must be an f32 tensor of %lld elements", d->what,
                                e, (long long)v->numel);
    }
    threads = ly_threads_resolve(threads);
    if (d->merged || d->xg)
        return ly_set_error(LY_E_INTERNAL, "%s: %s", d->what,
                            d->merged ? "runs inside its method's graph only"
                                      : "not finished (ly_et_xnnpack_finish)");
    if (d->graph) return ly_xd_graph_execute(d, args, threads);
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind == K_VIEW) continue;
        float *ptr[6];
        int ids[6], n = 0;
        for (int k = 0; k < o->n_in; k++)
            ids[n++] = o->in[k];
        ids[n++] = o->out;
        for (int k = 0; k < n; k++) {
            const xval *v = &d->v[ids[k]];
            const xval *r = &d->v[v->root];
            float *base;
            if (r->kind == V_CONST)
                base = (float *)r->cdata;
            else if (r->kind == V_INTERNAL)
                base = (float *)((char *)d->arena + r->arena_off);
            else
                base = args[r->ext]->data;
            ptr[k] = base + v->root_off;
        }
        ly_status st = ly_xd_run(d, o, ptr, n, threads);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}
