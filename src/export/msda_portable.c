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

/* ---- recognising the form ---------------------------------------------------- */

/* What one portable form computes, as ms_deform_attn's operands. */
typedef struct msda_form {
    int root; /* the node making [B, Lq, H·C]: it becomes the ms_deform_attn node */
    ly_graph_value value, loc, attn;
    int64_t L, hw[2 * LY_MSDA_MAX_LEVELS], points[LY_MSDA_MAX_LEVELS];
} msda_form;

typedef struct recogniser {
    ly_graph *g;
    const ly_tensor *shapes;
} recogniser;

/* The node making `v` when it is op `op`. */
static bool made_by(const recogniser *r, ly_graph_value v, ly_op op, ly_graph_node_info *n)
{
    ly_graph_value_info info;
    return v != LY_GRAPH_NONE && ly_graph_value_at(r->g, v, &info) == LY_OK &&
           info.kind == LY_GRAPH_VALUE_NODE && ly_graph_node_at(r->g, info.producer, n) == LY_OK &&
           n->op == op;
}

static bool permutes(const ly_graph_node_info *n, int ndim, const int *perm)
{
    const ly_permute_params *p = n->params;
    if (n->op != LY_OP_PERMUTE || p->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (p->perm[i] != perm[i]) return false;
    return true;
}

static bool shaped(const recogniser *r, ly_graph_value v, int ndim, const int64_t *dims)
{
    const ly_tensor *t = &r->shapes[v];
    if (t->dtype != LY_F32 || t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != dims[i]) return false;
    return true;
}

static bool scalar_constant(const recogniser *r, ly_graph_value v, float want)
{
    ly_graph_value_info info;
    const ly_tensor *t = NULL;
    return ly_graph_value_at(r->g, v, &info) == LY_OK && info.kind == LY_GRAPH_VALUE_CONSTANT &&
           info.dtype == LY_F32 && ly_graph_constant_read(r->g, v, &t) == LY_OK &&
           ly_tensor_numel(t) == 1 && ((const float *)t->data)[0] == want;
}

/* The unit slice `x[..., start:start+count, ...]` on `axis` of an `ndim`-d
 * value: its source, start and count. A slice of the whole extent (one
 * level) is no node at all in a delegate's graph: `v` is then its own source. */
static bool sliced(const recogniser *r, ly_graph_value v, int ndim, int axis,
                   ly_graph_value *source, int64_t *start, int64_t *count)
{
    ly_graph_node_info n;
    if (!made_by(r, v, LY_OP_SLICE, &n)) {
        *source = v;
        *start = 0;
        *count = r->shapes[v].shape[axis];
        return r->shapes[v].ndim == ndim;
    }
    const ly_slice_params *p = n.params;
    const ly_tensor *in = &r->shapes[n.inputs[0]];
    if (p->step != 1 || in->ndim != ndim || (p->axis + (p->axis < 0 ? ndim : 0)) != axis ||
        p->start < 0)
        return false;
    *source = n.inputs[0];
    *start = p->start;
    *count = r->shapes[v].shape[axis];
    return true;
}

/* grid = 2·loc - 1: loc. */
static ly_graph_value grid_of(const recogniser *r, ly_graph_value grid)
{
    ly_graph_node_info sub, mul;
    if (!made_by(r, grid, LY_OP_SUB, &sub) || !scalar_constant(r, sub.inputs[1], 1.0f) ||
        !made_by(r, sub.inputs[0], LY_OP_MUL, &mul))
        return LY_GRAPH_NONE;
    for (int k = 0; k < 2; k++)
        if (scalar_constant(r, mul.inputs[1 - k], 2.0f) &&
            shaped(r, mul.inputs[k], r->shapes[grid].ndim, r->shapes[grid].shape))
            return mul.inputs[k];
    return LY_GRAPH_NONE;
}

/* Whether node `root` ends the form expand() writes; fills `f`. */
static bool match(const recogniser *r, int root, msda_form *f)
{
    static const int swap12[4] = {0, 2, 1, 3}, channels_first[4] = {0, 2, 3, 1},
                     heads_first[5] = {0, 2, 1, 3, 4};
    ly_graph_node_info out, tokens, heads, sum, samples_q, weights_col, weights_hf;
    if (ly_graph_node_at(r->g, root, &out) != LY_OK || out.op != LY_OP_RESHAPE ||
        !made_by(r, out.inputs[0], LY_OP_PERMUTE, &tokens) || !permutes(&tokens, 4, swap12) ||
        !made_by(r, tokens.inputs[0], LY_OP_RESHAPE, &heads) ||
        !made_by(r, heads.inputs[0], LY_OP_MATMUL, &sum) ||
        ((const ly_matmul_params *)sum.params)->transpose_b != 0)
        return false;
    const ly_tensor *bhqc = &r->shapes[heads.outputs[0]];
    if (bhqc->ndim != 4) return false;
    int64_t B = bhqc->shape[0], H = bhqc->shape[1], Lq = bhqc->shape[2], C = bhqc->shape[3];
    int64_t out_dims[3] = {B, Lq, H * C}, sum_dims[4] = {B * H, Lq, C, 1};
    if (!shaped(r, out.outputs[0], 3, out_dims) || !shaped(r, sum.outputs[0], 4, sum_dims) ||
        !made_by(r, sum.inputs[0], LY_OP_PERMUTE, &samples_q) || !permutes(&samples_q, 4, swap12) ||
        !made_by(r, sum.inputs[1], LY_OP_RESHAPE, &weights_col) ||
        !made_by(r, weights_col.inputs[0], LY_OP_PERMUTE, &weights_hf) ||
        !permutes(&weights_hf, 4, swap12))
        return false;
    /* The levels' samples, concatenated on the points, in level order. */
    ly_graph_value parts[LY_KERNEL_MAX_INPUTS] = {samples_q.inputs[0]};
    int n_parts = 1;
    ly_graph_node_info cat;
    if (made_by(r, samples_q.inputs[0], LY_OP_CONCAT, &cat)) {
        const ly_axis_params *p = cat.params;
        if (p->axis != 3 && p->axis != -1) return false;
        n_parts = cat.n_inputs;
        for (int k = 0; k < n_parts; k++)
            parts[k] = cat.inputs[k];
    }
    if (n_parts > LY_MSDA_MAX_LEVELS) return false;
    ly_graph_value value = LY_GRAPH_NONE, grid = LY_GRAPH_NONE;
    int64_t rows = 0, K = 0;
    for (int l = 0; l < n_parts; l++) {
        ly_graph_node_info gs, vmap, vcf, gmap, ghf;
        if (!made_by(r, parts[l], LY_OP_GRID_SAMPLE, &gs)) return false;
        const ly_grid_sample_params *gp = gs.params;
        if (gp->mode != 0 || gp->padding_mode != 0 || gp->align_corners != 0 ||
            !made_by(r, gs.inputs[0], LY_OP_RESHAPE, &vmap) ||
            !made_by(r, vmap.inputs[0], LY_OP_PERMUTE, &vcf) ||
            !permutes(&vcf, 4, channels_first) || !made_by(r, gs.inputs[1], LY_OP_RESHAPE, &gmap) ||
            !made_by(r, gmap.inputs[0], LY_OP_PERMUTE, &ghf) || !permutes(&ghf, 5, heads_first))
            return false;
        ly_graph_value v, gr;
        int64_t row, count, k, points;
        if (!sliced(r, vcf.inputs[0], 4, 1, &v, &row, &count) ||
            !sliced(r, ghf.inputs[0], 5, 3, &gr, &k, &points) || row != rows || k != K ||
            (l > 0 && (v != value || gr != grid)))
            return false;
        const ly_tensor *map = &r->shapes[vmap.outputs[0]];
        int64_t gdims[4] = {B * H, Lq, points, 2};
        /* the op's contract: levels of 1 to 2^24 rows and columns, a point at least */
        if (map->ndim != 4 || map->shape[2] < 1 || map->shape[3] < 1 || map->shape[2] > (1 << 24) ||
            map->shape[3] > (1 << 24) || points < 1 || map->shape[2] * map->shape[3] != count ||
            !shaped(r, vmap.outputs[0], 4, (int64_t[]){B * H, C, map->shape[2], map->shape[3]}) ||
            !shaped(r, gmap.outputs[0], 4, gdims))
            return false;
        f->hw[2 * l] = map->shape[2];
        f->hw[2 * l + 1] = map->shape[3];
        f->points[l] = points;
        value = v;
        grid = gr;
        rows += count;
        K += points;
    }
    int64_t value_dims[4] = {B, rows, H, C}, grid_dims[5] = {B, Lq, H, K, 2},
            attn_dims[4] = {B, Lq, H, K}, col_dims[4] = {B * H, Lq, K, 1};
    if (!shaped(r, value, 4, value_dims) || !shaped(r, grid, 5, grid_dims) ||
        !shaped(r, weights_hf.inputs[0], 4, attn_dims) ||
        !shaped(r, weights_col.outputs[0], 4, col_dims))
        return false;
    f->root = root;
    f->value = value;
    f->loc = grid_of(r, grid);
    f->attn = weights_hf.inputs[0];
    f->L = n_parts;
    return f->loc != LY_GRAPH_NONE;
}

static ly_status replace(ly_graph *g, const msda_form *f)
{
    int64_t L = f->L, hw_dims[2] = {L, 2};
    ly_graph_value in[5] = {f->value, LY_GRAPH_NONE, f->loc, f->attn, LY_GRAPH_NONE};
    void *hw = NULL, *points = NULL;
    ly_status st = ly_graph_constant(g, LY_I64, 2, hw_dims, &in[1], &hw);
    if (st == LY_OK) st = ly_graph_constant(g, LY_I64, 1, &L, &in[4], &points);
    if (st != LY_OK) return st;
    memcpy(hw, f->hw, (size_t)(2 * L) * sizeof *f->hw);
    memcpy(points, f->points, (size_t)L * sizeof *f->points);
    ly_graph_node_info n;
    st = ly_graph_node_at(g, f->root, &n);
    char name[160];
    if (st == LY_OK) {
        snprintf(name, sizeof name, "%s.ms_deform_attn", n.name);
        ly_ms_deform_attn_params p = LY_MS_DEFORM_ATTN_DEFAULTS;
        st = ly_graph_node_replace(g, f->root, LY_OP_MS_DEFORM_ATTN, name, 5, in, &p);
    }
    return st;
}

ly_status ly_export_msda_recognise(ly_graph *g, int n_inputs, const ly_tensor *inputs, int *found)
{
    *found = 0;
    int n_nodes = ly_graph_node_count(g);
    bool any = false;
    for (int i = 0; i < n_nodes && !any; i++) {
        ly_graph_node_info n;
        any = ly_graph_node_at(g, i, &n) == LY_OK && n.op == LY_OP_GRID_SAMPLE;
    }
    if (!any) return LY_OK;
    ly_tensor *shapes = calloc((size_t)ly_graph_value_count(g) + 1, sizeof *shapes);
    msda_form *forms = malloc(((size_t)n_nodes + 1) * sizeof *forms);
    if (!shapes || !forms) {
        free(shapes);
        free(forms);
        return ly_set_error(LY_E_NO_MEMORY, "ms_deform_attn's portable form: out of memory");
    }
    ly_status st = ly_graph_infer(g, n_inputs, inputs, shapes);
    recogniser r = {.g = g, .shapes = shapes};
    int n_forms = 0;
    for (int i = 0; st == LY_OK && i < n_nodes; i++)
        if (match(&r, i, &forms[n_forms])) n_forms++;
    for (int i = 0; st == LY_OK && i < n_forms; i++)
        st = replace(g, &forms[i]);
    if (st == LY_OK && n_forms) st = ly_graph_prune(g, NULL);
    if (st == LY_OK) *found = n_forms;
    free(shapes);
    free(forms);
    return st;
}
