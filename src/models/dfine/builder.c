/* Graph building from a checkpoint, for the D-FINE family (builder.h). */
#include "models/dfine/builder.h"

#include "core/core.h"

#include <stdio.h>
#include <string.h>

void df_fail(df_builder *b, ly_status st)
{
    if (b->st == LY_OK) b->st = st;
}

/* The checkpoint tensor prefix + suffix, f32 of `ndim` dims `shape`. */
const float *df_tensor(df_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    if (b->st != LY_OK) return NULL;
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s%s", b->prefix, suffix);
    ly_tensor view;
    ly_status st = ly_checkpoint_find(b->ck, key, &view);
    if (st != LY_OK) {
        df_fail(b, ly_set_error(LY_E_FORMAT, "%s: missing key '%s'", b->what, key));
        return NULL;
    }
    bool fits = view.dtype == LY_F32 && view.ndim == ndim;
    for (int i = 0; fits && i < ndim; i++)
        fits = view.shape[i] == shape[i];
    if (!fits) {
        ly_tensor want = {.dtype = LY_F32, .ndim = ndim};
        memcpy(want.shape, shape, (size_t)ndim * sizeof *shape);
        char got[96], exp[96];
        df_fail(b, ly_set_error(LY_E_FORMAT, "%s: key '%s' is %s %s, expected f32 %s", b->what, key,
                                ly_dtype_name(view.dtype), ly_shape_str(&view, got, sizeof got),
                                ly_shape_str(&want, exp, sizeof exp)));
        return NULL;
    }
    return view.data;
}

/* A constant holding `count` floats from `src` (shape `shape`). */
ly_graph_value df_constant(df_builder *b, int ndim, const int64_t *shape, const float *src)
{
    if (b->st != LY_OK || !src) return LY_GRAPH_NONE;
    ly_graph_value v;
    void *data;
    ly_status st = ly_graph_constant(b->g, LY_F32, ndim, shape, &v, &data);
    if (st != LY_OK) {
        df_fail(b, st);
        return LY_GRAPH_NONE;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    memcpy(data, src, (size_t)n * sizeof(float));
    return v;
}

ly_graph_value df_weight(df_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    return df_constant(b, ndim, shape, df_tensor(b, suffix, ndim, shape));
}

ly_graph_value df_scalar(df_builder *b, float value)
{
    int64_t one = 1;
    return df_constant(b, 1, &one, &value);
}

ly_graph_value df_node(df_builder *b, ly_op op, const char *what, int n_in,
                       const ly_graph_value *in, const void *params)
{
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    char name[KEY_MAX];
    snprintf(name, sizeof name, "%s%s", b->prefix, what);
    ly_graph_value out = LY_GRAPH_NONE;
    ly_status st = ly_graph_node(b->g, op, name, n_in, in, params, 1, &out);
    if (st != LY_OK) df_fail(b, st);
    return out;
}

ly_graph_value df_binary(df_builder *b, ly_op op, const char *what, ly_graph_value x,
                         ly_graph_value y)
{
    ly_graph_value in[2] = {x, y};
    return df_node(b, op, what, 2, in, NULL);
}

/* x·Wᵀ + b with W [n, k] and b [n] at prefix + `linear` (".weight", ".bias"). */
ly_graph_value df_linear(df_builder *b, const char *linear_name, ly_graph_value x, int64_t n,
                         int64_t k)
{
    char key[KEY_MAX];
    int64_t wshape[2] = {n, k};
    snprintf(key, sizeof key, "%s.weight", linear_name);
    ly_graph_value w = df_weight(b, key, 2, wshape);
    snprintf(key, sizeof key, "%s.bias", linear_name);
    ly_graph_value bias = df_weight(b, key, 1, &n);
    ly_graph_value in[3] = {x, w, bias};
    return df_node(b, LY_OP_LINEAR, linear_name, 3, in, NULL);
}

ly_graph_value df_layer_norm(df_builder *b, const char *norm_name, ly_graph_value x, int64_t c)
{
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.weight", norm_name);
    ly_graph_value w = df_weight(b, key, 1, &c);
    snprintf(key, sizeof key, "%s.bias", norm_name);
    ly_graph_value bias = df_weight(b, key, 1, &c);
    ly_norm_params p = LY_NORM_DEFAULTS; /* eps 1e-5, as nn.LayerNorm */
    ly_graph_value in[3] = {x, w, bias};
    return df_node(b, LY_OP_LAYER_NORM, norm_name, 3, in, &p);
}

ly_graph_value df_reshape(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *shape)
{
    ly_reshape_params p = {.ndim = ndim};
    memcpy(p.shape, shape, (size_t)ndim * sizeof *shape);
    return df_node(b, LY_OP_RESHAPE, what, 1, &x, &p);
}

ly_graph_value df_permute(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *perm)
{
    ly_permute_params p = {.ndim = ndim};
    memcpy(p.perm, perm, (size_t)ndim * sizeof *perm);
    return df_node(b, LY_OP_PERMUTE, what, 1, &x, &p);
}

ly_graph_value df_slice(df_builder *b, const char *what, ly_graph_value x, int64_t axis,
                        int64_t start, int64_t count)
{
    ly_slice_params p = LY_SLICE_DEFAULTS;
    p.axis = axis;
    p.start = start;
    p.end = start + count;
    return df_node(b, LY_OP_SLICE, what, 1, &x, &p);
}
