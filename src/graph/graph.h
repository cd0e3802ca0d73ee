/*
 * A small graph of network ops over f32 tensors with batch 1 (NCHW for the
 * spatial ops), run through the kernel registry, on memory planned once per
 * input shape.
 *
 * Building: add inputs, constants (weights owned by the graph), and nodes in
 * execution order; each node produces one value. Values are referred to by
 * index (ly_graph_value). Concat, slice and reshape cost nothing at run time:
 *  - a slice along the channel axis is a view (with batch 1 a channel range of
 *    an NCHW tensor is contiguous), and so is a reshape (every value is
 *    contiguous);
 *  - the inputs of a channel concat are, where possible, planned as views of
 *    its output, so their producers write straight into their channel range.
 *    An input that cannot be placed there (a graph input, a slice, a value
 *    already placed in another concat, a value repeated in the same concat) is
 *    copied by the concat node instead.
 *
 * Planning (on the first run and whenever the input shapes change): infer
 * every shape, give each buffer that is not a view of another one a live range
 * over the node order (from its first write to its last read; graph outputs
 * live to the end), then place the buffers in one arena, largest first, each
 * at the best-fitting gap among the already placed buffers whose live ranges
 * overlap its own (greedy by size, best fit). The arena is allocated only when
 * the plan needs more than it holds, so repeated runs at one shape allocate
 * nothing.
 *
 * A graph is not safe to run from two threads at once (it owns the arena).
 */
#ifndef LY_NN_GRAPH_H
#define LY_NN_GRAPH_H

#include "libreyolo/kernels.h"

typedef struct ly_graph ly_graph;
typedef int32_t ly_graph_value;

#define LY_GRAPH_NONE ((ly_graph_value)-1)
#define LY_GRAPH_MAX_NODE_INPUTS 8
#define LY_GRAPH_ALIGN 64 /* bytes: every planned buffer starts on this boundary */

/* An op the registry has no slot for (e.g. a detector's decode). `infer` sets
 * out->ndim/shape from the input shapes (their data is NULL then) and the
 * scratch it needs in bytes (planned in the arena, live only during the node);
 * `run` computes `out`. Both return LY_OK or set the error. */
typedef struct ly_graph_custom_op {
    /* Stable name of what the op computes ("yolo9.decode"): exporters map it. */
    const char *kind;
    ly_status (*infer)(void *ctx, int n_in, const ly_tensor *in, ly_tensor *out,
                       size_t *scratch_bytes);
    ly_status (*run)(void *ctx, int n_in, const ly_tensor *in, ly_tensor *out, void *scratch,
                     int threads);
    void (*destroy)(void *ctx); /* may be NULL */
} ly_graph_custom_op;

ly_status ly_graph_create(ly_graph **out);
void ly_graph_free(ly_graph *g);

/* A graph input of `ndim` dimensions; its shape comes with each run. */
ly_status ly_graph_input(ly_graph *g, const char *name, int ndim, ly_graph_value *out);

/* Plan room for input `index` in the arena, whose bytes the planner reuses
 * once its last reader has run. A caller can fill it (ly_graph_input_buffer,
 * after ly_graph_plan) and run on it, instead of a buffer of its own: that
 * saves the input's size on a model whose arena peak is past the first layers.
 * A run on other data still reads that data where it is. */
ly_status ly_graph_input_in_arena(ly_graph *g, int index);

/* Input `index`'s room in the arena of the current plan (ly_graph_input_in_arena);
 * valid until the next plan for other shapes, or free. */
ly_status ly_graph_input_buffer(const ly_graph *g, int index, void **data);

/* A zeroed f32 tensor owned by the graph (64-byte aligned), for weights to be
 * written by the caller. Its address never changes. */
ly_status ly_graph_constant(ly_graph *g, int ndim, const int64_t *shape, ly_tensor *out);

/* A node's parameters: those of its op. */
typedef union ly_graph_params {
    ly_conv2d_params conv2d;
    ly_pool2d_params pool2d;
    ly_upsample_nearest2d_params upsample;
    ly_resize_bilinear2d_params resize;
    ly_concat_params concat;
} ly_graph_params;

/* conv2d slot: act(conv(x, weight) + bias) + residual. `weight` and `bias`
 * (bias may be NULL) must be graph constants; `residual` may be LY_GRAPH_NONE.
 * Reads params stride, padding, dilation, groups, activation, alpha. */
ly_status ly_graph_conv2d(ly_graph *g, const char *name, ly_graph_value x, const ly_tensor *weight,
                          const ly_tensor *bias, ly_graph_value residual,
                          const ly_conv2d_params *params, ly_graph_value *out);
/* max_pool2d / avg_pool2d slots: params kernel, stride, padding (+ count_include_pad). */
ly_status ly_graph_max_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out);
ly_status ly_graph_avg_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out);
ly_status ly_graph_upsample_nearest2d(ly_graph *g, const char *name, ly_graph_value x,
                                      int64_t scale, ly_graph_value *out);
ly_status ly_graph_silu(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out);
ly_status ly_graph_sigmoid(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out);
/* add slot: a + b, both of one shape. */
ly_status ly_graph_add(ly_graph *g, const char *name, ly_graph_value a, ly_graph_value b,
                       ly_graph_value *out);
/* resize_bilinear2d slot to (height, width): params.size is set from them, and
 * align_corners, half_pixel_centers are read from `params`. */
ly_status ly_graph_resize_bilinear2d(ly_graph *g, const char *name, ly_graph_value x,
                                     int64_t height, int64_t width,
                                     const ly_resize_bilinear2d_params *params,
                                     ly_graph_value *out);
/* x viewed with another shape of as many elements (a view: no copy). One
 * extent may be -1: whatever the others leave. */
ly_status ly_graph_reshape(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int64_t *shape, ly_graph_value *out);
/* out = x with its axes permuted: out.shape[i] = x.shape[perm[i]] (a copy, run
 * by the graph itself; perm has x's number of dimensions). */
ly_status ly_graph_transpose(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                             const int *perm, ly_graph_value *out);
/* dfl slot: [1, 4*R, A] -> [1, 4, A]. */
ly_status ly_graph_dfl(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value *out);
/* Join on axis 1 (channels); batch must be 1. */
ly_status ly_graph_concat(ly_graph *g, const char *name, int n, const ly_graph_value *inputs,
                          ly_graph_value *out);
/* Channels [start, start + count) of x (a view; batch must be 1). */
ly_status ly_graph_slice(ly_graph *g, const char *name, ly_graph_value x, int64_t start,
                         int64_t count, ly_graph_value *out);
/* The graph takes ownership of `ctx` (op->destroy frees it, also on failure). */
ly_status ly_graph_custom(ly_graph *g, const char *name, const ly_graph_custom_op *op, void *ctx,
                          int n, const ly_graph_value *inputs, ly_graph_value *out);

/* Mark `v` as output number <count so far> under `name`. */
ly_status ly_graph_output(ly_graph *g, ly_graph_value v, const char *name);

/* Plan for these input shapes (data ignored) unless already planned for them.
 * Run calls it itself; it is public for tests and for sizing ahead of time. */
ly_status ly_graph_plan(ly_graph *g, int n_inputs, const ly_tensor *inputs);

/* Run every node on `inputs` (f32, shapes as declared ndim). `threads` goes into
 * each kernel call as is (0: LIBREYOLO_THREADS, else all CPUs). */
ly_status ly_graph_run(ly_graph *g, int n_inputs, const ly_tensor *inputs, int threads);

/* Output `index` after a run or plan: a view into the arena valid until the
 * next plan for other shapes, or free. `name` may be NULL. */
ly_status ly_graph_get_output(const ly_graph *g, int index, ly_tensor *view, const char **name);
int ly_graph_output_count(const ly_graph *g);

/* Planner figures and the planned view of any value (for tests and reports). */
typedef struct ly_graph_stats {
    size_t arena_bytes;       /* what the current plan uses */
    size_t arena_capacity;    /* what is allocated */
    size_t unplanned_bytes;   /* sum of every planned buffer, as if none were reused */
    size_t constant_bytes;    /* weights */
    size_t arena_allocations; /* times the arena was (re)allocated so far */
    size_t plans;             /* times a plan was made so far */
    int nodes, values, buffers;
} ly_graph_stats;
ly_status ly_graph_get_stats(const ly_graph *g, ly_graph_stats *stats);
ly_status ly_graph_value_view(const ly_graph *g, ly_graph_value v, ly_tensor *view);

/* ---- Walking the graph (exporters) -------------------------------------- */

typedef enum ly_graph_op {
    LY_GRAPH_OP_CONV2D,
    LY_GRAPH_OP_MAX_POOL2D,
    LY_GRAPH_OP_AVG_POOL2D,
    LY_GRAPH_OP_UPSAMPLE, /* nearest, integer params.scale */
    LY_GRAPH_OP_SILU,
    LY_GRAPH_OP_SIGMOID,
    LY_GRAPH_OP_DFL,
    LY_GRAPH_OP_CONCAT, /* channels */
    LY_GRAPH_OP_SLICE,  /* channels [slice_start, +slice_count) */
    LY_GRAPH_OP_CUSTOM,
    LY_GRAPH_OP_ADD,             /* inputs[0] + inputs[1] */
    LY_GRAPH_OP_RESIZE_BILINEAR, /* params.size, align_corners, half_pixel_centers */
    LY_GRAPH_OP_RESHAPE,         /* a view with shape[0..shape_ndim) (-1: inferred) */
    LY_GRAPH_OP_TRANSPOSE        /* out.shape[i] = in.shape[perm[i]] */
} ly_graph_op;

/* One node, in execution order. Pointers stay valid while the graph lives. */
typedef struct ly_graph_node_info {
    ly_graph_op op;
    const char *name;
    int n_inputs;
    ly_graph_value inputs[LY_GRAPH_MAX_NODE_INPUTS];
    ly_graph_value output;
    ly_graph_value residual;        /* conv2d: added after the activation, or NONE */
    const ly_tensor *weight, *bias; /* conv2d (bias may be NULL) */
    ly_graph_params params;
    int64_t slice_start, slice_count; /* slice */
    const ly_graph_custom_op *custom; /* custom */
    void *custom_ctx;
    int shape_ndim; /* reshape: target shape; transpose: number of axes of perm */
    int64_t shape[LY_MAX_DIMS];
    int perm[LY_MAX_DIMS]; /* transpose */
} ly_graph_node_info;

int ly_graph_node_count(const ly_graph *g);
ly_status ly_graph_node_at(const ly_graph *g, int index, ly_graph_node_info *info);
int ly_graph_input_count(const ly_graph *g);
ly_status ly_graph_input_at(const ly_graph *g, int index, ly_graph_value *value, const char **name);
/* The value behind output `index` (ly_graph_get_output gives its data). */
ly_status ly_graph_output_value(const ly_graph *g, int index, ly_graph_value *value,
                                const char **name);

#endif
