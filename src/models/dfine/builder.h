/* SPDX-License-Identifier: MIT */
/*
 * Graph building from a checkpoint for the D-FINE family (internal): weights
 * read by key under a prefix, checked for dtype and shape (every missing or
 * misshapen key is an error naming it), and the nodes the family's modules
 * are made of. The first error sticks in `st`; later calls do nothing and
 * return LY_GRAPH_NONE, so a module is built straight through and checked once.
 */
#ifndef LY_MODELS_DFINE_BUILDER_H
#define LY_MODELS_DFINE_BUILDER_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"

#define KEY_MAX 160

typedef struct df_builder {
    ly_graph *g;
    const ly_checkpoint *ck;
    const char *what; /* "D-FINE decoder": how messages name the module */
    char prefix[96];  /* of every key and node name */
    ly_status st;
} df_builder;

void df_fail(df_builder *b, ly_status st);

/* The audit of one load (on the loading thread): while it runs, an absent or
 * misshapen key is recorded and a zero tensor stands in, so building goes on
 * and every such key is found; df_audit_end then lists them with the keys
 * nothing read (LibreYOLO's strict load_state_dict names them all), as one
 * error prefixed by `context` (NULL: discard). Keys the model has but
 * inference never reads are declared with df_expect. */
ly_status df_audit_begin(const ly_checkpoint *ck);
ly_status df_audit_end(const char *context);
/* Whether keys were missing or misshapen so far. */
bool df_audit_failed(void);
/* Key `key` (whole) was read. */
void df_mark(const char *key);
/* prefix + suffix must be there, f32 `shape`, though nothing reads it. */
void df_expect(df_builder *b, const char *suffix, int ndim, const int64_t *shape);
/* The checkpoint tensor prefix + suffix, f32 of `ndim` dims `shape`. */
const float *df_tensor(df_builder *b, const char *suffix, int ndim, const int64_t *shape);
/* Extent `dim` of key prefix + `key`, or -1 (no error) when absent or of
 * fewer dims: for widths and counts the keys decide. */
int64_t df_extent(df_builder *b, const char *key, int dim);
/* A constant holding the floats of `src` (shape `shape`). */
ly_graph_value df_constant(df_builder *b, int ndim, const int64_t *shape, const float *src);
ly_graph_value df_weight(df_builder *b, const char *suffix, int ndim, const int64_t *shape);
ly_graph_value df_scalar(df_builder *b, float value);
ly_graph_value df_node(df_builder *b, ly_op op, const char *what, int n_in,
                       const ly_graph_value *in, const void *params);
ly_graph_value df_binary(df_builder *b, ly_op op, const char *what, ly_graph_value x,
                         ly_graph_value y);
/* x·Wᵀ + b with W [n, k] and b [n] at prefix + `linear` (".weight", ".bias"). */
ly_graph_value df_linear(df_builder *b, const char *linear_name, ly_graph_value x, int64_t n,
                         int64_t k);
/* act(x·Wᵀ + b) + residual in one node (residual: LY_GRAPH_NONE for none), so
 * the GEMM's epilogue does what separate element-wise nodes would. */
ly_graph_value df_linear_fused(df_builder *b, const char *linear_name, ly_graph_value x, int64_t n,
                               int64_t k, ly_activation activation, ly_graph_value residual);
ly_graph_value df_layer_norm(df_builder *b, const char *norm_name, ly_graph_value x, int64_t c);
ly_graph_value df_reshape(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *shape);
ly_graph_value df_permute(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *perm);
ly_graph_value df_slice(df_builder *b, const char *what, ly_graph_value x, int64_t axis,
                        int64_t start, int64_t count);

/* nn.MultiheadAttention(q = k = qk, v = x) at prefix "self_attn.": the packed
 * in_proj (rows q, k, v), sdpa per head (1/sqrt(head dim), as PyTorch's
 * math), out_proj. x and qk are [1, q, c]. */
ly_graph_value df_self_attention(df_builder *b, ly_graph_value x, ly_graph_value qk, int64_t q,
                                 int heads, int64_t c);

/* A value and its shape [1, c, h, w]. */
typedef struct df_fmap {
    ly_graph_value v;
    int64_t c, h, w;
} df_fmap;

/* Conv2d (no bias) name.conv.weight [cout, cin, k, k] with the BatchNorm
 * name.<norm>.* (eps 1e-5) folded in, in double: w (cout*cin*k*k), bias. */
bool df_fold_conv_bn(df_builder *b, const char *name, const char *norm, int64_t cout, int64_t cin,
                     int64_t k, double *w, double *bias);
/* The same with the keys given whole: the conv weight, the BN prefix. */
bool df_fold_conv_bn_keys(df_builder *b, const char *conv_weight, const char *bn_prefix,
                          int64_t cout, int64_t cin, int64_t k, double *w, double *bias);
/* A conv node (pad (k-1)/2) from folded weights, rounded to f32 once;
 * `activation` an ly_activation, then `post_affine` (scale, shift) when not
 * NULL (conv2d's post_affine). */
df_fmap df_conv_node(df_builder *b, const char *name, df_fmap x, const double *w,
                     const double *bias, int64_t cout, int64_t k, int64_t stride, int64_t groups,
                     int activation, const float *post_affine);
/* Both: Conv + BN (+ activation) at `name`, depthwise when asked. */
df_fmap df_conv_norm(df_builder *b, const char *name, const char *norm, df_fmap x, int64_t cout,
                     int64_t k, int64_t stride, bool depthwise, int activation);
/* The same with a post-affine after the activation (NULL: none). */
df_fmap df_conv_norm_affine(df_builder *b, const char *name, const char *norm, df_fmap x,
                            int64_t cout, int64_t k, int64_t stride, bool depthwise, int activation,
                            const float *post_affine);

#endif
