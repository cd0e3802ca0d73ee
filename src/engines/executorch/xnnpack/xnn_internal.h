/* SPDX-License-Identifier: MIT */
/*
 * The XNNPACK delegate's model of one XNNGraph (see xnn_delegate.c), shared
 * by its parts:
 *   xnn_delegate.c  XNNPACK's initialisation, values, placement and memory,
 *                   the entry points (init, execute)
 *   xnn_nodes.c     each node checked into an op (its shapes, in checked
 *                   arithmetic), and the XNNPACK operators created
 *   xnn_kernels.c   the thread pools, and running an op: XNNPACK's operators
 *                   and our own loops
 */
#ifndef LY_ENGINES_EXECUTORCH_XNNPACK_XNN_INTERNAL_H
#define LY_ENGINES_EXECUTORCH_XNNPACK_XNN_INTERNAL_H

#include "core/core.h"
#include "engines/executorch/et_runtime.h"

#include <pthreadpool.h>
#include <xnnpack.h>

#define MAX_DIMS XNN_MAX_TENSOR_DIMS
#define NONE LY_XNN_INVALID_ID
#define MAX_ELEMENTS ((int64_t)1 << 34)

enum { V_INTERNAL, V_EXT_IN, V_EXT_OUT, V_CONST };

typedef struct xval {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t numel, rows, last; /* rows = numel / last */
    int kind;
    uint32_t ext;
    const float *cdata; /* constants */
    int producer;       /* op index, -1 none */
    /* storage: a view of `parent` at float `offset` (parent == self: own) */
    int parent;
    int64_t offset;
    int64_t ld;          /* resolved: floats between rows */
    int root;            /* resolved */
    int64_t root_off;    /* resolved: floats from the root's base */
    bool dense_view;     /* a reshape of a dense value: rows of its own shape */
    int first, last_use; /* roots: live range over ops */
    size_t arena_off;
} xval;

typedef enum opkind {
    K_XNN,       /* an XNNPACK operator */
    K_BINARY,    /* add, sub, mul, div, min, max (numpy broadcasting) */
    K_UNARY,     /* elementwise of one input */
    K_TRANSPOSE, /* static transpose */
    K_COPY,      /* copy / slice copy / reshape copy / convert */
    K_CONCAT,    /* copies of the inputs that are not placed in the output */
    K_PAD,       /* constant pad */
    K_BMM,       /* batch matrix multiply */
    K_VIEW       /* nothing to do (slice, reshape or concat done by placement) */
} opkind;

typedef enum unary_fn {
    U_ABS,
    U_NEG,
    U_SQUARE,
    U_SQRT,
    U_RSQRT,
    U_FLOOR,
    U_CEIL,
    U_EXP,
    U_LOG,
    U_TANH,
    U_GELU,
    U_SIN,
    U_COS,
    U_HARDSWISH,
    U_LEAKY,
    U_ELU,
    U_CLAMP,
    U_COPY
} unary_fn;

typedef struct xop {
    ly_xnn_node_type type;
    const char *name;
    opkind kind;
    int in[5], n_in, out;
    /* clamp fused into the node (output_min_max), applied where the op has no
     * native clamp */
    bool clamp;
    float lo, hi;
    /* XNNPACK */
    xnn_operator_t op;
    int64_t batch, ih, iw, oh, ow; /* setup sizes */
    const void *set_in, *set_out;
    int set_threads;
    /* own ops */
    int binop;
    unary_fn fn;
    float alpha;
    int perm[MAX_DIMS];
    int64_t offsets[MAX_DIMS]; /* slice / pad pre */
    int axis;                  /* concat */
    bool placed[5];            /* concat input already in place */
    float pad_value;
} xop;

struct ly_et_xnnpack {
    const char *what;
    xval *v;
    size_t n_v;
    xop *ops;
    size_t n_ops;
    uint32_t num_externs;
    int *ext_value; /* external id -> value */
    float *arena;
    size_t arena_bytes;
    pthreadpool_t pool;
    /* the same graph as one of ours (xnn_graph.c), when every node has an op;
     * then ops[] are only checked, never run */
    struct ly_graph *graph;
    struct ly_graph_ctx *graph_ctx;
    int *graph_inputs, *graph_outputs; /* external ids of the graph's inputs and outputs */
    int n_graph_inputs, n_graph_outputs;
    ly_tensor *graph_input_views; /* what a run hands the graph */
    /* the decoded XNNGraph until ly_et_xnnpack_finish builds the delegate's
     * own graph (or operators) from it or a method's merged graph takes it */
    ly_xnn_graph *xg;
    /* runs inside a method's merged graph only */
    bool merged;
};

/* xnn_nodes.c: a refusal naming the delegate and, when given, the node. */
ly_status ly_xd_fail(const ly_et_xnnpack *d, const xop *o, const char *fmt, ...) LY_PRINTF(3, 4);

/* xnn_nodes.c: node `n` as op `o` (inputs defined, output dims what the node
 * computes), and the XNNPACK operators of K_XNN ops once strides are known. */
ly_status ly_xd_make_node(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n);
ly_status ly_xd_create_operators(ly_et_xnnpack *d, const ly_xnn_graph *xg);

/* xnn_kernels.c: the process's pthreadpool for `threads` (NULL for one), and
 * running op `o` on its operands (inputs, then the output). */
pthreadpool_t ly_xd_pool(int threads);
ly_status ly_xd_run(ly_et_xnnpack *d, xop *o, float *const *ptr, int n, int threads);

/* xnn_graph.c: d->graph from the checked ops (left NULL, with a debug line,
 * where a node has no op of ours), and a run of it on the externals. */
ly_status ly_xd_graph_build(ly_et_xnnpack *d, const ly_xnn_graph *xg);
ly_status ly_xd_graph_append(ly_et_xnnpack *d, struct ly_graph *g, int tag,
                             const ly_graph_value *bound, ly_graph_value *produced);
ly_status ly_xd_graph_execute(ly_et_xnnpack *d, ly_tensor *const *args, int threads);

#endif
