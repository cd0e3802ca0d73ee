/* SPDX-License-Identifier: MIT */
/* The checkpoint-to-graph toolkit: weights by key, nodes, shared blocks (builder.h). */
#include "models/common/builder.h"

#include "core/checked.h"
#include "core/core.h"
#include "libreyolo/sdpa.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ly_build_fail(ly_builder *b, ly_status st)
{
    if (b->st == LY_OK) b->st = st;
}

void ly_build_problem(ly_builder *b, ly_problem_kind kind, const char *fmt, ...)
{
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (ly_audit_running())
        ly_audit_problem(kind, "%s", text);
    else
        ly_build_fail(b, ly_set_error(LY_E_FORMAT, "%s: %s", b->what, text));
}

void ly_build_key(const ly_builder *b, const char *suffix, char *key)
{
    /* longer than any key a model has: cut, so it is found nowhere */
    size_t p = strnlen(b->prefix, sizeof b->prefix), s = strlen(suffix);
    if (p + s >= LY_KEY_MAX) s = LY_KEY_MAX - 1 - p;
    memcpy(key, b->prefix, p);
    memcpy(key + p, suffix, s);
    key[p + s] = '\0';
}

/* The state dict's tensor `key`, marked read: the audit's when one runs,
 * else the checkpoint's. */
static bool lookup(const ly_builder *b, const char *key, ly_tensor *view, const char **stored)
{
    if (ly_audit_running()) return ly_audit_find(key, view, stored);
    if (stored) *stored = key;
    if (b->ck && ly_checkpoint_find(b->ck, key, view) == LY_OK) return true;
    ly_clear_error();
    return false;
}

bool ly_build_find(ly_builder *b, const char *suffix, ly_tensor *view)
{
    char key[LY_KEY_MAX];
    ly_build_key(b, suffix, key);
    return lookup(b, key, view, NULL);
}

int64_t ly_build_extent(ly_builder *b, const char *suffix, int dim)
{
    ly_tensor view;
    if (!ly_build_find(b, suffix, &view) || view.ndim <= dim) return -1;
    return view.shape[dim];
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    ly_tensor t = {.dtype = LY_F32, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    ly_shape_str(&t, buf, size);
}

/* Zeros of `shape` standing in for a key the audit recorded, in `view`. */
static void stand_in(ly_builder *b, int ndim, const int64_t *shape, ly_tensor *view)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        if (!ly_checked_mul(numel, shape[i] > 0 ? shape[i] : 1, &numel)) numel = -1;
    *view = (ly_tensor){.dtype = LY_F32, .ndim = ndim, .data = ly_audit_stand_in(numel)};
    for (int i = 0; i < ndim; i++)
        view->shape[i] = shape[i];
    if (!view->data) ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
}

/* take_view, and for `f32` the dtype too (the messages without an audit
 * say both at once). */
static bool take(ly_builder *b, const char *suffix, int ndim, const int64_t *shape, bool f32,
                 ly_tensor *view)
{
    *view = (ly_tensor){0};
    if (b->st != LY_OK) return false;
    char key[LY_KEY_MAX];
    ly_build_key(b, suffix, key);
    if (!b->g) {
        if (b->visit) b->visit(key, ndim, shape, b->visit_user);
        return false;
    }
    bool audited = ly_audit_running();
    char want[96], got[96];
    shape_text(ndim, shape, want, sizeof want);
    const char *stored = key;
    if (!lookup(b, key, view, &stored)) {
        if (!audited) {
            ly_build_fail(b, ly_set_error(LY_E_FORMAT, "%s: missing key '%s'", b->what, key));
            return false;
        }
        ly_audit_problem(LY_PROBLEM_MISSING, "missing key '%s' (expected shape %s)", key, want);
        stand_in(b, ndim, shape, view);
        return false;
    }
    bool same = view->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = view->shape[i] == shape[i];
    bool typed = !f32 || view->dtype == LY_F32;
    if (same && typed) return true;
    ly_shape_str(view, got, sizeof got);
    if (!audited) {
        ly_build_fail(b, f32 ? ly_set_error(LY_E_FORMAT, "%s: key '%s' is %s %s, expected f32 %s",
                                            b->what, key, ly_dtype_name(view->dtype), got, want)
                             : ly_set_error(LY_E_FORMAT, "%s: key '%s' has shape %s, expected %s",
                                            b->what, key, got, want));
        *view = (ly_tensor){0};
        return false;
    }
    if (!same)
        ly_audit_problem(LY_PROBLEM_SHAPE, "key '%s' has shape %s, expected %s", stored, got, want);
    else
        ly_audit_problem(LY_PROBLEM_TYPE, "key '%s' is %s, expected f32", key,
                         ly_dtype_name(view->dtype));
    stand_in(b, ndim, shape, view);
    return false;
}

bool ly_build_take_view(ly_builder *b, const char *suffix, int ndim, const int64_t *shape,
                        ly_tensor *view)
{
    return take(b, suffix, ndim, shape, false, view);
}

const float *ly_build_take(ly_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    ly_tensor view;
    take(b, suffix, ndim, shape, true, &view);
    return view.data;
}

void ly_build_expect(ly_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    (void)ly_build_take(b, suffix, ndim, shape);
}

ly_graph_value ly_build_constant(ly_builder *b, int ndim, const int64_t *shape, const float *src)
{
    if (b->st != LY_OK || !b->g || !src) return LY_GRAPH_NONE;
    ly_graph_value v;
    void *data;
    ly_status st = ly_graph_constant(b->g, LY_F32, ndim, shape, &v, &data);
    if (st != LY_OK) {
        ly_build_fail(b, st);
        return LY_GRAPH_NONE;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i]; /* the graph allocated exactly this */
    memcpy(data, src, (size_t)n * sizeof(float));
    return v;
}

ly_graph_value ly_build_weight(ly_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    return ly_build_constant(b, ndim, shape, ly_build_take(b, suffix, ndim, shape));
}

ly_graph_value ly_build_scalar(ly_builder *b, float value)
{
    int64_t one = 1;
    return ly_build_constant(b, 1, &one, &value);
}

ly_graph_value ly_build_node(ly_builder *b, ly_op op, const char *what, int n_in,
                             const ly_graph_value *in, const void *params)
{
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    char name[LY_KEY_MAX];
    ly_build_key(b, what, name);
    ly_graph_value out = LY_GRAPH_NONE;
    ly_build_fail(b, ly_graph_node(b->g, op, name, n_in, in, params, 1, &out));
    return out;
}

ly_graph_value ly_build_unary(ly_builder *b, ly_op op, const char *what, ly_graph_value x)
{
    return ly_build_node(b, op, what, 1, &x, NULL);
}

ly_graph_value ly_build_binary(ly_builder *b, ly_op op, const char *what, ly_graph_value x,
                               ly_graph_value y)
{
    ly_graph_value in[2] = {x, y};
    return ly_build_node(b, op, what, 2, in, NULL);
}

ly_graph_value ly_build_reshape(ly_builder *b, const char *what, ly_graph_value x, int ndim,
                                const int64_t *shape)
{
    ly_reshape_params p = {.ndim = ndim};
    memcpy(p.shape, shape, (size_t)ndim * sizeof *shape);
    return ly_build_node(b, LY_OP_RESHAPE, what, 1, &x, &p);
}

ly_graph_value ly_build_permute(ly_builder *b, const char *what, ly_graph_value x, int ndim,
                                const int64_t *perm)
{
    ly_permute_params p = {.ndim = ndim};
    memcpy(p.perm, perm, (size_t)ndim * sizeof *perm);
    return ly_build_node(b, LY_OP_PERMUTE, what, 1, &x, &p);
}

ly_graph_value ly_build_slice(ly_builder *b, const char *what, ly_graph_value x, int64_t axis,
                              int64_t start, int64_t count)
{
    ly_slice_params p = LY_SLICE_DEFAULTS;
    p.axis = axis;
    p.start = start;
    p.end = start + count;
    return ly_build_node(b, LY_OP_SLICE, what, 1, &x, &p);
}

ly_graph_value ly_build_concat(ly_builder *b, const char *what, int n, const ly_graph_value *in,
                               int64_t axis)
{
    ly_concat_params p = {.axis = axis};
    return ly_build_node(b, LY_OP_CONCAT, what, n, in, &p);
}

ly_graph_value ly_build_linear(ly_builder *b, const char *name, ly_graph_value x, int64_t n,
                               int64_t k)
{
    return ly_build_linear_fused(b, name, x, n, k, LY_ACT_NONE, LY_GRAPH_NONE);
}

ly_graph_value ly_build_linear_fused(ly_builder *b, const char *name, ly_graph_value x, int64_t n,
                                     int64_t k, ly_activation activation, ly_graph_value residual)
{
    char key[LY_KEY_MAX];
    int64_t wshape[2] = {n, k};
    snprintf(key, sizeof key, "%s.weight", name);
    ly_graph_value w = ly_build_weight(b, key, 2, wshape);
    snprintf(key, sizeof key, "%s.bias", name);
    ly_graph_value bias = ly_build_weight(b, key, 1, &n);
    ly_graph_value in[4] = {x, w, bias, residual};
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    p.activation = activation;
    return ly_build_node(b, LY_OP_LINEAR, name, residual == LY_GRAPH_NONE ? 3 : 4, in, &p);
}

ly_graph_value ly_build_layer_norm(ly_builder *b, const char *name, ly_graph_value x, int64_t c,
                                   double eps)
{
    char key[LY_KEY_MAX];
    snprintf(key, sizeof key, "%s.weight", name);
    ly_graph_value w = ly_build_weight(b, key, 1, &c);
    snprintf(key, sizeof key, "%s.bias", name);
    ly_graph_value bias = ly_build_weight(b, key, 1, &c);
    ly_norm_params p = LY_NORM_DEFAULTS;
    p.eps = eps;
    ly_graph_value in[3] = {x, w, bias};
    return ly_build_node(b, LY_OP_LAYER_NORM, name, 3, in, &p);
}

/* [B, Q, C] -> [B, heads, Q, C / heads]. */
ly_graph_value ly_build_mha(ly_builder *b, const char *name, ly_graph_value x, ly_graph_value qk,
                            int64_t q, int heads, int64_t c)
{
    char key[LY_KEY_MAX], names[3][LY_KEY_MAX];
    int64_t packed[2] = {3 * c, c}, three_c = 3 * c;
    snprintf(key, sizeof key, "%s.in_proj_weight", name);
    const float *w = ly_build_take(b, key, 2, packed);
    snprintf(key, sizeof key, "%s.in_proj_bias", name);
    const float *bias = ly_build_take(b, key, 1, &three_c);
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    /* the projections' [1, q, c] rows are [1, q, heads, c / heads]: the
     * attention reads and writes that layout (tokens first), no transposes */
    ly_graph_value proj[3];
    static const char parts[3] = {'q', 'k', 'v'};
    int64_t split[4] = {LY_RESHAPE_KEEP, q, heads, c / heads}, merged[3] = {LY_RESHAPE_KEEP, q, c};
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "%s.%c", name, parts[i]);
        int64_t wshape[2] = {c, c};
        ly_graph_value wi = ly_build_constant(b, 2, wshape, w + (size_t)(i * c * c));
        ly_graph_value bi = ly_build_constant(b, 1, &c, bias + (size_t)(i * c));
        ly_graph_value in[3] = {i < 2 ? qk : x, wi, bi};
        proj[i] = ly_build_reshape(b, names[i],
                                   ly_build_node(b, LY_OP_LINEAR, names[i], 3, in, NULL), 4, split);
    }
    ly_sdpa_params p = LY_SDPA_DEFAULTS; /* 1/sqrt(head dim) on q, as PyTorch's MHA math */
    p.layout = LY_SDPA_BNHD;
    snprintf(key, sizeof key, "%s.sdpa", name);
    ly_graph_value attn = ly_build_node(b, LY_OP_SDPA, key, 3, proj, &p);
    snprintf(key, sizeof key, "%s.merge", name);
    attn = ly_build_reshape(b, key, attn, 3, merged);
    snprintf(key, sizeof key, "%s.out_proj", name);
    return ly_build_linear(b, key, attn, c, c);
}

void ly_build_expect_linear(ly_builder *b, const char *name, int64_t n, int64_t k)
{
    char key[2 * LY_KEY_MAX];
    int64_t wshape[2] = {n, k};
    snprintf(key, sizeof key, "%.100s.weight", name);
    ly_build_expect(b, key, 2, wshape);
    snprintf(key, sizeof key, "%.100s.bias", name);
    ly_build_expect(b, key, 1, &n);
}
