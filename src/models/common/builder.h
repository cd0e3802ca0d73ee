/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint-to-graph toolkit (internal), one for every family: a module's
 * weights taken by key under a prefix with the dtype and shape the model
 * expects, the nodes a graph is made of, and the blocks checkpoints share
 * (linear, layer norm, multi-head attention; conv + BatchNorm folding is in
 * fold.h, LibreYOLO's quantized convolutions in quant_conv.h).
 *
 * The first error sticks in `st`: later calls do nothing and return
 * LY_GRAPH_NONE, so a module is written straight through and checked once.
 * Keys are looked up in the audit of the load when one runs (audit.h): a key
 * that is absent or misshapen is recorded there and zeros stand in, so the
 * build goes on and the load names every such key. Without an audit the
 * checkpoint is read directly and the first such key is the error.
 *
 * With no graph (g NULL) the builder only lists the keys it would take, in
 * order, to `visit`: what a family's "expected keys" are.
 */
#ifndef LY_MODELS_COMMON_BUILDER_H
#define LY_MODELS_COMMON_BUILDER_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "models/common/audit.h"

typedef void (*ly_key_fn)(const char *key, int ndim, const int64_t *shape, void *user);

typedef struct ly_builder {
    ly_graph *g;             /* NULL: list the keys to `visit`, make nothing */
    const ly_checkpoint *ck; /* read when no audit runs */
    const char *what;        /* how messages name the module: "D-FINE decoder" */
    char prefix[96];         /* of every key and node name */
    double bn_eps;           /* BatchNorm's eps; 0: PyTorch's default 1e-5 */
    ly_status st;
    ly_key_fn visit;
    void *visit_user;
} ly_builder;

void ly_build_fail(ly_builder *b, ly_status st);
/* A problem with the weights (a value out of range, ...): recorded by the
 * audit, or the builder's error "<what>: <text>" when none runs. */
void ly_build_problem(ly_builder *b, ly_problem_kind kind, const char *fmt, ...) LY_PRINTF(3, 4);

/* prefix + suffix, in `key` (LY_KEY_MAX bytes). */
void ly_build_key(const ly_builder *b, const char *suffix, char *key);

/* The tensor prefix + suffix as it is (any dtype and shape), marked read;
 * false, and no error, when absent. */
bool ly_build_find(ly_builder *b, const char *suffix, ly_tensor *view);
/* Extent `dim` of prefix + suffix, or -1 (no error) when absent or of fewer
 * dims: for the widths and counts the keys decide. */
int64_t ly_build_extent(ly_builder *b, const char *suffix, int dim);

/* The tensor prefix + suffix, of exactly `ndim` dims `shape` (any dtype):
 * true with its view; false when absent or misshapen (recorded; `view` then
 * holds f32 zeros of `shape` while an audit runs, else no data). */
bool ly_build_take_view(ly_builder *b, const char *suffix, int ndim, const int64_t *shape,
                        ly_tensor *view);
/* The same, f32 only: its floats, zeros standing in (an audit runs) or NULL. */
const float *ly_build_take(ly_builder *b, const char *suffix, int ndim, const int64_t *shape);
/* prefix + suffix must be there, f32 `shape`, though nothing reads it. */
void ly_build_expect(ly_builder *b, const char *suffix, int ndim, const int64_t *shape);

/* An nn.Linear at prefix + name (weight [n, k], bias [n]) the model has but
 * inference does not read: a strict load wants it there, of that shape. */
void ly_build_expect_linear(ly_builder *b, const char *name, int64_t n, int64_t k);

/* A constant holding the floats of `src` (shape `shape`); NONE when src is NULL. */
ly_graph_value ly_build_constant(ly_builder *b, int ndim, const int64_t *shape, const float *src);
ly_graph_value ly_build_weight(ly_builder *b, const char *suffix, int ndim, const int64_t *shape);
ly_graph_value ly_build_scalar(ly_builder *b, float value);

/* A one-output node named prefix + what. */
ly_graph_value ly_build_node(ly_builder *b, ly_op op, const char *what, int n_in,
                             const ly_graph_value *in, const void *params);
ly_graph_value ly_build_unary(ly_builder *b, ly_op op, const char *what, ly_graph_value x);
ly_graph_value ly_build_binary(ly_builder *b, ly_op op, const char *what, ly_graph_value x,
                               ly_graph_value y);
ly_graph_value ly_build_reshape(ly_builder *b, const char *what, ly_graph_value x, int ndim,
                                const int64_t *shape);
ly_graph_value ly_build_permute(ly_builder *b, const char *what, ly_graph_value x, int ndim,
                                const int64_t *perm);
ly_graph_value ly_build_slice(ly_builder *b, const char *what, ly_graph_value x, int64_t axis,
                              int64_t start, int64_t count);
ly_graph_value ly_build_concat(ly_builder *b, const char *what, int n, const ly_graph_value *in,
                               int64_t axis);

/* nn.Linear: x·Wᵀ + b with W [n, k] and b [n] at prefix + name (".weight",
 * ".bias"). */
ly_graph_value ly_build_linear(ly_builder *b, const char *name, ly_graph_value x, int64_t n,
                               int64_t k);
/* act(x·Wᵀ + b) + residual in one node (residual: LY_GRAPH_NONE for none), so
 * the GEMM's epilogue does what separate element-wise nodes would. */
ly_graph_value ly_build_linear_fused(ly_builder *b, const char *name, ly_graph_value x, int64_t n,
                                     int64_t k, ly_activation activation, ly_graph_value residual);
/* nn.LayerNorm(c, eps) over the last axis, its affine at prefix + name. */
ly_graph_value ly_build_layer_norm(ly_builder *b, const char *name, ly_graph_value x, int64_t c,
                                   double eps);

/* nn.MultiheadAttention (batch first, q = k = qk, v = x, both [1, q, c]) at
 * prefix + name: the packed in_proj_weight / in_proj_bias (rows q, k, v),
 * SDPA per head (1/sqrt(head dim), as PyTorch's math), out_proj. q may be -1
 * (any number of tokens). */
ly_graph_value ly_build_mha(ly_builder *b, const char *name, ly_graph_value x, ly_graph_value qk,
                            int64_t q, int heads, int64_t c);

#endif
