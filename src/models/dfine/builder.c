/* SPDX-License-Identifier: MIT */
/* Graph building from a checkpoint, for the D-FINE family (builder.h). */
#include "models/dfine/builder.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void df_fail(df_builder *b, ly_status st)
{
    if (b->st == LY_OK) b->st = st;
}

/* ---- The audit of one load ----------------------------------------------- */

enum { AUDIT_LIST = 12 };

typedef struct audit_key {
    const char *name;
    bool used;
} audit_key;

typedef struct df_audit {
    const ly_checkpoint *ck;
    audit_key *keys; /* the checkpoint's, sorted by name */
    size_t n_keys;
    char missing[AUDIT_LIST][KEY_MAX], misshapen[AUDIT_LIST][2 * KEY_MAX];
    size_t n_missing, n_misshapen;
    void **zeros; /* stand-ins for absent tensors, so building goes on */
    size_t n_zeros;
} df_audit;

/* Loading is one call on one thread: the audit belongs to that call. */
static _Thread_local df_audit *current;

static int compare_keys(const void *a, const void *b)
{
    return strcmp(((const audit_key *)a)->name, ((const audit_key *)b)->name);
}

ly_status df_audit_begin(const ly_checkpoint *ck)
{
    df_audit_end(NULL);
    size_t n = 0;
    ly_status st = ly_checkpoint_tensor_count(ck, &n);
    if (st != LY_OK) return st;
    df_audit *a = calloc(1, sizeof *a);
    audit_key *keys = calloc(n ? n : 1, sizeof *keys);
    if (!a || !keys) {
        free(a);
        free(keys);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        ly_tensor view;
        st = ly_checkpoint_tensor_at(ck, i, &keys[i].name, &view);
        if (st != LY_OK) {
            free(keys);
            free(a);
            return st;
        }
    }
    qsort(keys, n, sizeof *keys, compare_keys);
    *a = (df_audit){.ck = ck, .keys = keys, .n_keys = n};
    current = a;
    return LY_OK;
}

static audit_key *audit_lookup(const char *key)
{
    df_audit *a = current;
    if (!a) return NULL;
    audit_key probe = {.name = key};
    return bsearch(&probe, a->keys, a->n_keys, sizeof probe, compare_keys);
}

void df_mark(const char *key)
{
    audit_key *k = audit_lookup(key);
    if (k) k->used = true;
}

/* Keys a LibreYOLO model has that inference never reads. */
static bool unused_by_design(const char *key)
{
    static const char *const exact[] = {"decoder.denoising_class_embed.weight",
                                        "decoder.decoder.up", "decoder.decoder.reg_scale"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(key, exact[i]) == 0) return true;
    size_t n = strlen(key), t = strlen(".num_batches_tracked");
    return n > t && strcmp(key + n - t, ".num_batches_tracked") == 0;
}

static void append_list(char *out, size_t cap, const char *what, size_t total, const char *names,
                        size_t stride, size_t shown)
{
    size_t at = strlen(out);
    if (!total || at >= cap) return;
    at += (size_t)snprintf(out + at, cap - at, "%s%zu %s (", at ? "; " : "", total, what);
    for (size_t i = 0; i < shown && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%s", i ? ", " : "", names + i * stride);
    if (at < cap && total > shown)
        at += (size_t)snprintf(out + at, cap - at, ", and %zu more", total - shown);
    if (at < cap) snprintf(out + at, cap - at, ")");
}

ly_status df_audit_end(const char *context)
{
    df_audit *a = current;
    current = NULL;
    if (!a) return LY_OK;
    char unexpected[AUDIT_LIST][KEY_MAX];
    size_t n_unexpected = 0;
    for (size_t i = 0; i < a->n_keys; i++) {
        if (a->keys[i].used || unused_by_design(a->keys[i].name)) continue;
        if (n_unexpected < AUDIT_LIST)
            snprintf(unexpected[n_unexpected], KEY_MAX, "%s", a->keys[i].name);
        n_unexpected++;
    }
    ly_status st = LY_OK;
    if (context && (a->n_missing || a->n_misshapen || n_unexpected)) {
        char list[3072] = "";
        append_list(list, sizeof list, a->n_missing == 1 ? "missing key" : "missing keys",
                    a->n_missing, a->missing[0], KEY_MAX,
                    a->n_missing < AUDIT_LIST ? a->n_missing : AUDIT_LIST);
        append_list(list, sizeof list,
                    a->n_misshapen == 1 ? "key of the wrong shape" : "keys of the wrong shape",
                    a->n_misshapen, a->misshapen[0], 2 * KEY_MAX,
                    a->n_misshapen < AUDIT_LIST ? a->n_misshapen : AUDIT_LIST);
        append_list(list, sizeof list, n_unexpected == 1 ? "unexpected key" : "unexpected keys",
                    n_unexpected, unexpected[0], KEY_MAX,
                    n_unexpected < AUDIT_LIST ? n_unexpected : AUDIT_LIST);
        st = ly_set_error(LY_E_FORMAT, "%s: the keys are not the model's: %s", context, list);
    }
    for (size_t i = 0; i < a->n_zeros; i++)
        free(a->zeros[i]);
    free(a->zeros);
    free(a->keys);
    free(a);
    return st;
}

bool df_audit_failed(void)
{
    return current && (current->n_missing || current->n_misshapen);
}

/* A zero tensor standing in for an absent or misshapen key while the audit
 * collects the rest (the load fails at its end). */
static const float *stand_in(int ndim, const int64_t *shape)
{
    df_audit *a = current;
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)(shape[i] > 0 ? shape[i] : 1);
    void **grown = realloc(a->zeros, (a->n_zeros + 1) * sizeof *grown);
    if (!grown) return NULL;
    a->zeros = grown;
    float *z = calloc(n, sizeof *z);
    if (z) a->zeros[a->n_zeros++] = z;
    return z;
}

/* The checkpoint's tensor `key`, marked read. */
static ly_status find_key(const ly_checkpoint *ck, const char *key, ly_tensor *view)
{
    ly_status st = ly_checkpoint_find(ck, key, view);
    if (st == LY_OK) df_mark(key);
    return st;
}

/* The checkpoint tensor prefix + suffix, f32 of `ndim` dims `shape`. */
const float *df_tensor(df_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    if (b->st != LY_OK) return NULL;
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s%s", b->prefix, suffix);
    ly_tensor view;
    ly_status st = find_key(b->ck, key, &view);
    df_audit *a = current;
    if (st != LY_OK && a) {
        ly_clear_error();
        if (a->n_missing < AUDIT_LIST) snprintf(a->missing[a->n_missing], KEY_MAX, "%s", key);
        a->n_missing++;
        return stand_in(ndim, shape);
    }
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
        ly_shape_str(&view, got, sizeof got);
        ly_shape_str(&want, exp, sizeof exp);
        if (a) {
            if (a->n_misshapen < AUDIT_LIST)
                snprintf(a->misshapen[a->n_misshapen], 2 * KEY_MAX,
                         "%.150s is %.8s %.60s, expected f32 %.60s", key, ly_dtype_name(view.dtype),
                         got, exp);
            a->n_misshapen++;
            return stand_in(ndim, shape);
        }
        df_fail(b, ly_set_error(LY_E_FORMAT, "%s: key '%s' is %s %s, expected f32 %s", b->what, key,
                                ly_dtype_name(view.dtype), got, exp));
        return NULL;
    }
    return view.data;
}

void df_expect(df_builder *b, const char *suffix, int ndim, const int64_t *shape)
{
    (void)df_tensor(b, suffix, ndim, shape);
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

ly_graph_value df_linear(df_builder *b, const char *linear_name, ly_graph_value x, int64_t n,
                         int64_t k)
{
    return df_linear_fused(b, linear_name, x, n, k, LY_ACT_NONE, LY_GRAPH_NONE);
}

ly_graph_value df_linear_fused(df_builder *b, const char *linear_name, ly_graph_value x, int64_t n,
                               int64_t k, ly_activation activation, ly_graph_value residual)
{
    char key[KEY_MAX];
    int64_t wshape[2] = {n, k};
    snprintf(key, sizeof key, "%s.weight", linear_name);
    ly_graph_value w = df_weight(b, key, 2, wshape);
    snprintf(key, sizeof key, "%s.bias", linear_name);
    ly_graph_value bias = df_weight(b, key, 1, &n);
    ly_graph_value in[4] = {x, w, bias, residual};
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    p.activation = activation;
    return df_node(b, LY_OP_LINEAR, linear_name, residual == LY_GRAPH_NONE ? 3 : 4, in, &p);
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

/* [B, Q, C] -> [B, heads, Q, C / heads]. */
static ly_graph_value split_heads(df_builder *b, const char *what, ly_graph_value x, int64_t q,
                                  int heads, int64_t c)
{
    static const int64_t perm[4] = {0, 2, 1, 3};
    int64_t shape[4] = {1, q, heads, c / heads};
    return df_permute(b, what, df_reshape(b, what, x, 4, shape), 4, perm);
}

/* nn.MultiheadAttention(q = k = x + pos, v = x) at prefix "self_attn": the
 * packed in_proj (rows q, k, v), SDPA per head, out_proj. */
ly_graph_value df_self_attention(df_builder *b, ly_graph_value x, ly_graph_value qk, int64_t q,
                                 int heads, int64_t c)
{
    int64_t packed[2] = {3 * c, c}, three_c = 3 * c;
    const float *w = df_tensor(b, "self_attn.in_proj_weight", 2, packed);
    const float *bias = df_tensor(b, "self_attn.in_proj_bias", 1, &three_c);
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    ly_graph_value proj[3];
    static const char *const names[3] = {"self_attn.q", "self_attn.k", "self_attn.v"};
    for (int i = 0; i < 3; i++) {
        int64_t wshape[2] = {c, c};
        ly_graph_value wi = df_constant(b, 2, wshape, w + (size_t)(i * c * c));
        ly_graph_value bi = df_constant(b, 1, &c, bias + (size_t)(i * c));
        ly_graph_value in[3] = {i < 2 ? qk : x, wi, bi};
        proj[i] =
            split_heads(b, names[i], df_node(b, LY_OP_LINEAR, names[i], 3, in, NULL), q, heads, c);
    }
    ly_sdpa_params p = LY_SDPA_DEFAULTS; /* 1/sqrt(head dim) on q, as PyTorch's MHA math */
    ly_graph_value attn = df_node(b, LY_OP_SDPA, "self_attn.sdpa", 3, proj, &p);
    static const int64_t perm[4] = {0, 2, 1, 3};
    int64_t merged[3] = {1, q, c};
    attn = df_reshape(b, "self_attn.merge", df_permute(b, "self_attn.merge", attn, 4, perm), 3,
                      merged);
    return df_linear(b, "self_attn.out_proj", attn, c, c);
}

bool df_fold_conv_bn(df_builder *b, const char *name, const char *norm, int64_t cout, int64_t cin,
                     int64_t k, double *w, double *bias)
{
    char conv[2 * KEY_MAX], bn_prefix[2 * KEY_MAX];
    snprintf(conv, sizeof conv, "%.100s.conv.weight", name);
    snprintf(bn_prefix, sizeof bn_prefix, "%.100s.%.20s", name, norm);
    return df_fold_conv_bn_keys(b, conv, bn_prefix, cout, cin, k, w, bias);
}

bool df_fold_conv_bn_keys(df_builder *b, const char *conv_weight, const char *bn_prefix,
                          int64_t cout, int64_t cin, int64_t k, double *w, double *bias)
{
    char key[2 * KEY_MAX];
    int64_t wshape[4] = {cout, cin, k, k};
    const float *cw = df_tensor(b, conv_weight, 4, wshape);
    const float *bn[4];
    static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%.150s.%s", bn_prefix, parts[i]);
        bn[i] = df_tensor(b, key, 1, &cout);
    }
    if (b->st != LY_OK) return false;
    int64_t per = cin * k * k;
    for (int64_t o = 0; o < cout; o++) {
        double var = (double)bn[3][o] + 1e-5; /* nn.BatchNorm2d's eps */
        if (!(var > 0)) {
            df_fail(b, ly_set_error(LY_E_FORMAT,
                                    "%s: key '%s%.150s.running_var' [%lld] is %g: var + eps "
                                    "must be positive",
                                    b->what, b->prefix, bn_prefix, (long long)o, (double)bn[3][o]));
            return false;
        }
        double s = (double)bn[0][o] / sqrt(var);
        for (int64_t i = 0; i < per; i++)
            w[o * per + i] = (double)cw[o * per + i] * s;
        bias[o] = (double)bn[1][o] - (double)bn[2][o] * s;
    }
    return true;
}

df_fmap df_conv_node(df_builder *b, const char *name, df_fmap x, const double *w,
                     const double *bias, int64_t cout, int64_t k, int64_t stride, int64_t groups,
                     int activation, const float *post_affine)
{
    df_fmap y = {LY_GRAPH_NONE, cout, 0, 0};
    if (b->st != LY_OK) return y;
    int64_t cin = x.c / groups, wshape[4] = {cout, cin, k, k};
    ly_graph_value wv, bv;
    void *wdata, *bdata;
    df_fail(b, ly_graph_constant(b->g, LY_F32, 4, wshape, &wv, &wdata));
    if (b->st == LY_OK) df_fail(b, ly_graph_constant(b->g, LY_F32, 1, &cout, &bv, &bdata));
    if (b->st != LY_OK) return y;
    for (int64_t i = 0; i < cout * cin * k * k; i++)
        ((float *)wdata)[i] = (float)w[i];
    for (int64_t o = 0; o < cout; o++)
        ((float *)bdata)[o] = (float)bias[o];
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = (k - 1) / 2;
    p.groups = groups;
    p.activation = activation;
    if (post_affine) {
        p.post_affine = 1;
        p.post_scale = post_affine[0];
        p.post_shift = post_affine[1];
    }
    char node_name[2 * KEY_MAX];
    snprintf(node_name, sizeof node_name, "%s%.100s", b->prefix, name);
    df_fail(b, ly_graph_conv2d(b->g, node_name, x.v, wv, bv, LY_GRAPH_NONE, &p, &y.v));
    y.h = (x.h + 2 * p.padding[0] - k) / stride + 1;
    y.w = (x.w + 2 * p.padding[1] - k) / stride + 1;
    return y;
}

df_fmap df_conv_norm(df_builder *b, const char *name, const char *norm, df_fmap x, int64_t cout,
                     int64_t k, int64_t stride, bool depthwise, int activation)
{
    return df_conv_norm_affine(b, name, norm, x, cout, k, stride, depthwise, activation, NULL);
}

df_fmap df_conv_norm_affine(df_builder *b, const char *name, const char *norm, df_fmap x,
                            int64_t cout, int64_t k, int64_t stride, bool depthwise, int activation,
                            const float *post_affine)
{
    df_fmap y = {LY_GRAPH_NONE, cout, 0, 0};
    int64_t groups = depthwise ? x.c : 1, cin = x.c / groups;
    double *w = malloc((size_t)(cout * cin * k * k) * sizeof *w);
    double *bias = malloc((size_t)cout * sizeof *bias);
    if (!w || !bias)
        df_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    else if (df_fold_conv_bn(b, name, norm, cout, cin, k, w, bias))
        y = df_conv_node(b, name, x, w, bias, cout, k, stride, groups, activation, post_affine);
    free(w);
    free(bias);
    return y;
}

int64_t df_extent(df_builder *b, const char *key, int dim)
{
    char full[2 * KEY_MAX];
    snprintf(full, sizeof full, "%.95s%.200s", b->prefix, key);
    ly_tensor view;
    if (find_key(b->ck, full, &view) != LY_OK || view.ndim <= dim) {
        ly_clear_error();
        return -1;
    }
    return view.shape[dim];
}
