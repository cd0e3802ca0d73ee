/* SPDX-License-Identifier: MIT */
/*
 * The portable form of multi-scale deformable attention (see lower.h): a copy
 * of the graph in which every ms_deform_attn node is LibreYOLO's
 * ms_deform_attn_core_pytorch (detr.md 6) in ops a stock ExecuTorch runs, so
 * that the program needs no operator of ours:
 *
 *   value [B, S, H, C] per level l: slice its h_l·w_l rows, permute and
 *     reshape to [B·H, C, h_l, w_l];
 *   grid = 2·loc - 1, per level its points: [B·H, Lq, P_l, 2];
 *   grid_sample (bilinear, zeros, align_corners False) -> [B·H, C, Lq, P_l],
 *     the levels concatenated on the points: [B·H, C, Lq, K];
 *   the weighted sum over the K points as a batched matrix product with the
 *     attention weights [B·H, Lq, K, 1] -> [B, Lq, H·C].
 *
 * grid_sample is a portable call (aten::grid_sampler_2d.out); the slices,
 * permutes, products and concatenations go to the XNNPACK partitions as any
 * graph's. The discrete sampling method has no such form and is refused.
 */
#include "export/lower.h"

#include "core/core.h"
#include "libreyolo/msda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rewrite {
    ly_graph *src, *dst;
    const ly_tensor *shapes; /* of src's values */
    ly_graph_value *map;     /* src value -> dst value */
    ly_status st;
    char name[160];
} rewrite;

static bool ok(rewrite *r, ly_status st)
{
    if (st != LY_OK && r->st == LY_OK) r->st = st;
    return r->st == LY_OK;
}

/* dst's value for src value `v`: constants are copied on first use. */
static ly_graph_value mapped(rewrite *r, ly_graph_value v)
{
    if (v == LY_GRAPH_NONE || r->st != LY_OK) return LY_GRAPH_NONE;
    if (r->map[v] != LY_GRAPH_NONE) return r->map[v];
    ly_graph_value_info info;
    if (!ok(r, ly_graph_value_at(r->src, v, &info))) return LY_GRAPH_NONE;
    if (info.kind != LY_GRAPH_VALUE_CONSTANT) {
        ok(r, ly_set_error(LY_E_INTERNAL, "msda portable form: value %d read before it is made",
                           (int)v));
        return LY_GRAPH_NONE;
    }
    const ly_tensor *data = NULL;
    void *copy = NULL;
    if (!ok(r, ly_graph_constant_read(r->src, v, &data)) ||
        !ok(r, ly_graph_constant(r->dst, data->dtype, data->ndim, data->shape, &r->map[v], &copy)))
        return LY_GRAPH_NONE;
    memcpy(copy, data->data, (size_t)ly_tensor_numel(data) * ly_dtype_size(data->dtype));
    return r->map[v];
}

static const char *step(rewrite *r, const char *node, const char *what, int level)
{
    if (level >= 0)
        snprintf(r->name, sizeof r->name, "%s.%s%d", node, what, level);
    else
        snprintf(r->name, sizeof r->name, "%s.%s", node, what);
    return r->name;
}

static ly_graph_value scalar(rewrite *r, float value)
{
    int64_t one = 1;
    ly_graph_value v = LY_GRAPH_NONE;
    void *data = NULL;
    if (ok(r, ly_graph_constant(r->dst, LY_F32, 1, &one, &v, &data))) memcpy(data, &value, 4);
    return v;
}

static ly_graph_value reshape(rewrite *r, const char *name, ly_graph_value x, int ndim,
                              const int64_t *shape)
{
    ly_graph_value out = LY_GRAPH_NONE;
    if (r->st == LY_OK) ok(r, ly_graph_reshape(r->dst, name, x, ndim, shape, &out));
    return out;
}

static ly_graph_value permute(rewrite *r, const char *name, ly_graph_value x, int ndim,
                              const int *perm)
{
    ly_graph_value out = LY_GRAPH_NONE;
    if (r->st == LY_OK) ok(r, ly_graph_permute(r->dst, name, x, ndim, perm, &out));
    return out;
}

static ly_graph_value slice(rewrite *r, const char *name, ly_graph_value x, int64_t axis,
                            int64_t start, int64_t count)
{
    ly_graph_value out = LY_GRAPH_NONE;
    if (r->st == LY_OK) ok(r, ly_graph_slice(r->dst, name, x, axis, start, count, &out));
    return out;
}

static ly_graph_value binary(rewrite *r, ly_op op, const char *name, ly_graph_value a,
                             ly_graph_value b)
{
    ly_graph_value out = LY_GRAPH_NONE;
    if (r->st == LY_OK) ok(r, ly_graph_binary(r->dst, op, name, a, b, &out));
    return out;
}

/* An int64 constant of src as data (spatial shapes, point counts). */
static const int64_t *constant_i64(rewrite *r, ly_graph_value v, int64_t want, const char *what,
                                   const char *node)
{
    const ly_tensor *t = NULL;
    ly_graph_value_info info;
    if (!ok(r, ly_graph_value_at(r->src, v, &info))) return NULL;
    if (info.kind != LY_GRAPH_VALUE_CONSTANT || info.dtype != LY_I64 ||
        !ok(r, ly_graph_constant_read(r->src, v, &t)) || ly_tensor_numel(t) != want) {
        ok(r, ly_set_error(LY_E_UNSUPPORTED,
                           "%s: its %s must be an int64 constant of %lld values for the "
                           "portable form of ms_deform_attn",
                           node, what, (long long)want));
        return NULL;
    }
    return t->data;
}

static void expand(rewrite *r, const ly_graph_node_info *n)
{
    const ly_ms_deform_attn_params *p = n->params;
    if (p->mode != LY_MSDA_BILINEAR) {
        ok(r, ly_set_error(LY_E_UNSUPPORTED,
                           "%s: ms_deform_attn's discrete sampling has no portable form (export "
                           "with the custom operator: msda=custom)",
                           n->name));
        return;
    }
    const ly_tensor *vs = &r->shapes[n->inputs[0]], *ls = &r->shapes[n->inputs[2]];
    int64_t B = vs->shape[0], H = vs->shape[2], C = vs->shape[3], Lq = ls->shape[1];
    int64_t L = r->shapes[n->inputs[1]].shape[0];
    bool ragged = ls->ndim == 5;
    int64_t K = ragged ? ls->shape[3] : ls->shape[3] * ls->shape[4];
    const int64_t *hw = constant_i64(r, n->inputs[1], 2 * L, "spatial_shapes", n->name);
    int64_t points[LY_MSDA_MAX_LEVELS];
    if (!hw) return;
    if (L < 1 || L > LY_MSDA_MAX_LEVELS) {
        ok(r, ly_set_error(LY_E_UNSUPPORTED, "%s: %lld levels", n->name, (long long)L));
        return;
    }
    if (ragged) {
        const int64_t *np = n->n_inputs > 4 && n->inputs[4] != LY_GRAPH_NONE
                                ? constant_i64(r, n->inputs[4], L, "num_points", n->name)
                                : NULL;
        if (!np) {
            if (r->st == LY_OK)
                ok(r,
                   ly_set_error(LY_E_UNSUPPORTED, "%s: ragged points without num_points", n->name));
            return;
        }
        memcpy(points, np, (size_t)L * sizeof *points);
    } else {
        for (int64_t l = 0; l < L; l++)
            points[l] = ls->shape[4];
    }
    ly_graph_value value = mapped(r, n->inputs[0]), loc = mapped(r, n->inputs[2]),
                   attn = mapped(r, n->inputs[3]);
    int64_t loc_flat[5] = {B, Lq, H, K, 2}, attn_flat[4] = {B, Lq, H, K};
    if (!ragged) {
        loc = reshape(r, step(r, n->name, "locations", -1), loc, 5, loc_flat);
        attn = reshape(r, step(r, n->name, "weights", -1), attn, 4, attn_flat);
    }
    ly_graph_value grid =
        binary(r, LY_OP_MUL, step(r, n->name, "grid_scale", -1), loc, scalar(r, 2.0f));
    grid = binary(r, LY_OP_SUB, step(r, n->name, "grid", -1), grid, scalar(r, 1.0f));
    static const int value_perm[4] = {0, 2, 3, 1}, grid_perm[5] = {0, 2, 1, 3, 4};
    ly_graph_value sampled[LY_MSDA_MAX_LEVELS];
    int n_sampled = 0;
    int64_t row = 0, k = 0;
    for (int64_t l = 0; l < L && r->st == LY_OK; l++) {
        int64_t h = hw[2 * l], w = hw[2 * l + 1];
        if (points[l] > 0) {
            ly_graph_value v = slice(r, step(r, n->name, "value", (int)l), value, 1, row, h * w);
            v = permute(r, step(r, n->name, "value_cf", (int)l), v, 4, value_perm);
            int64_t vshape[4] = {B * H, C, h, w};
            v = reshape(r, step(r, n->name, "value_map", (int)l), v, 4, vshape);
            ly_graph_value g = slice(r, step(r, n->name, "grid", (int)l), grid, 3, k, points[l]);
            g = permute(r, step(r, n->name, "grid_hf", (int)l), g, 5, grid_perm);
            int64_t gshape[4] = {B * H, Lq, points[l], 2};
            g = reshape(r, step(r, n->name, "grid_map", (int)l), g, 4, gshape);
            ly_graph_value in[2] = {v, g}, out = LY_GRAPH_NONE;
            ly_grid_sample_params gp = LY_GRID_SAMPLE_DEFAULTS;
            if (r->st == LY_OK)
                ok(r, ly_graph_node(r->dst, LY_OP_GRID_SAMPLE,
                                    step(r, n->name, "grid_sample", (int)l), 2, in, &gp, 1, &out));
            sampled[n_sampled++] = out;
        }
        row += h * w;
        k += points[l];
    }
    if (r->st != LY_OK) return;
    ly_graph_value all = sampled[0];
    if (n_sampled > 1 && !ok(r, ly_graph_concat(r->dst, step(r, n->name, "samples", -1), n_sampled,
                                                sampled, 3, &all)))
        return;
    /* [B·H, C, Lq, K] -> [B·H, Lq, C, K] times weights [B·H, Lq, K, 1] */
    static const int lq_first[4] = {0, 2, 1, 3}, heads_first[4] = {0, 2, 1, 3};
    all = permute(r, step(r, n->name, "samples_q", -1), all, 4, lq_first);
    ly_graph_value a = permute(r, step(r, n->name, "weights_hf", -1), attn, 4, heads_first);
    int64_t ashape[4] = {B * H, Lq, K, 1};
    a = reshape(r, step(r, n->name, "weights_col", -1), a, 4, ashape);
    ly_graph_value prod[2] = {all, a}, sum = LY_GRAPH_NONE;
    ly_matmul_params mp = LY_MATMUL_DEFAULTS;
    if (r->st == LY_OK)
        ok(r, ly_graph_node(r->dst, LY_OP_MATMUL, step(r, n->name, "weighted_sum", -1), 2, prod,
                            &mp, 1, &sum));
    int64_t bhqc[4] = {B, H, Lq, C}, out_shape[3] = {B, Lq, H * C};
    sum = reshape(r, step(r, n->name, "heads", -1), sum, 4, bhqc);
    sum = permute(r, step(r, n->name, "tokens", -1), sum, 4, heads_first);
    ly_graph_value out = reshape(r, step(r, n->name, "out", -1), sum, 3, out_shape);
    if (r->st == LY_OK) r->map[n->outputs[0]] = out;
}

static ly_status copy_graph(rewrite *r)
{
    for (int i = 0; i < ly_graph_input_count(r->src) && r->st == LY_OK; i++) {
        ly_graph_value v;
        const char *name = NULL;
        ly_graph_value_info info;
        if (ok(r, ly_graph_input_at(r->src, i, &v, &name)) &&
            ok(r, ly_graph_value_at(r->src, v, &info)))
            ok(r, ly_graph_input(r->dst, name, info.dtype, info.ndim, &r->map[v]));
    }
    for (int i = 0; i < ly_graph_node_count(r->src) && r->st == LY_OK; i++) {
        ly_graph_node_info n;
        if (!ok(r, ly_graph_node_at(r->src, i, &n))) break;
        if (n.op == LY_OP_MS_DEFORM_ATTN) {
            expand(r, &n);
            continue;
        }
        ly_graph_value in[LY_KERNEL_MAX_INPUTS], out[LY_KERNEL_MAX_OUTPUTS];
        for (int k = 0; k < n.n_inputs; k++)
            in[k] = mapped(r, n.inputs[k]);
        if (r->st == LY_OK &&
            ok(r, ly_graph_node(r->dst, n.op, n.name, n.n_inputs, in, n.params, n.n_outputs, out)))
            for (int k = 0; k < n.n_outputs; k++)
                r->map[n.outputs[k]] = out[k];
    }
    for (int i = 0; i < ly_graph_output_count(r->src) && r->st == LY_OK; i++) {
        ly_graph_value v;
        const char *name = NULL;
        if (ok(r, ly_graph_output_value(r->src, i, &v, &name)))
            ok(r, ly_graph_output(r->dst, mapped(r, v), name));
    }
    return r->st;
}

ly_status ly_export_msda_portable(ly_graph *g, const ly_tensor *shapes, ly_graph **out)
{
    *out = NULL;
    bool any = false;
    for (int i = 0; i < ly_graph_node_count(g) && !any; i++) {
        ly_graph_node_info n;
        if (ly_graph_node_at(g, i, &n) == LY_OK && n.op == LY_OP_MS_DEFORM_ATTN) any = true;
    }
    if (!any) return LY_OK;
    int n_values = ly_graph_value_count(g);
    rewrite r = {.src = g, .shapes = shapes, .map = malloc(((size_t)n_values + 1) * sizeof *r.map)};
    if (!r.map) return ly_set_error(LY_E_NO_MEMORY, "msda portable form: out of memory");
    for (int i = 0; i < n_values; i++)
        r.map[i] = LY_GRAPH_NONE;
    ly_status st = ly_graph_create(&r.dst);
    if (st == LY_OK) st = copy_graph(&r);
    free(r.map);
    if (st != LY_OK) {
        ly_graph_free(r.dst);
        return st;
    }
    *out = r.dst;
    return LY_OK;
}
