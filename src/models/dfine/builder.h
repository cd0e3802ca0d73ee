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
/* The checkpoint tensor prefix + suffix, f32 of `ndim` dims `shape`. */
const float *df_tensor(df_builder *b, const char *suffix, int ndim, const int64_t *shape);
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
ly_graph_value df_layer_norm(df_builder *b, const char *norm_name, ly_graph_value x, int64_t c);
ly_graph_value df_reshape(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *shape);
ly_graph_value df_permute(df_builder *b, const char *what, ly_graph_value x, int ndim,
                          const int64_t *perm);
ly_graph_value df_slice(df_builder *b, const char *what, ly_graph_value x, int64_t axis,
                        int64_t start, int64_t count);

#endif
