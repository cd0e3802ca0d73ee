/* SPDX-License-Identifier: MIT */
/*
 * The graph: a network of manifest ops over N-d values of any dtype, run
 * through the kernel registry on memory planned once per input shape.
 *
 * A graph is built once (inputs, constants, nodes, outputs) and is immutable
 * afterwards: any number of threads may run it at once, each through a
 * context of its own (ly_graph_ctx: the arena and the views into it). What the
 * graph keeps behind the scenes, its plans, is shared, immutable once made,
 * and guarded by the graph's lock.
 *
 * A plan (made on the first run for a set of input shapes, a thread count, a
 * kernel selection and a registry state, and reused until one changes):
 *  - infers every shape with the ops' own contracts (so a bad graph is refused
 *    with the op's message, prefixed by the node's name);
 *  - picks each node's implementation through the registry once; a stateful
 *    implementation prepares its state there (packed weights, primitives);
 *  - turns reshapes, contiguous slices and concats whose parts are contiguous
 *    into views that cost nothing: a concat's inputs are, where possible,
 *    planned as parts of its output, so their producers write in place;
 *  - keeps values in a channel-blocked layout between nodes whose
 *    implementations all take it (ly_kernel_layouts), so the reorders around
 *    each go away; graph inputs, outputs and every other node see plain data;
 *  - runs spans of nodes independent along dimension 0 (ly_graph_item_span)
 *    depth first, a slab of items at a time, where their intermediates would
 *    leave the cache;
 *  - places every buffer in one arena by live range (greedy by size, best fit).
 * A context allocates the arena for the plan it runs (grown, never shrunk).
 *
 * A node whose implementation fails at run time falls back through the
 * registry like any call (the failed implementation is disabled for the
 * process, with one warning) and the run carries on; the next run plans again
 * without it.
 */
#ifndef LY_GRAPH_GRAPH_H
#define LY_GRAPH_GRAPH_H

#include "libreyolo/kernels.h"
#include "ops/node.h"

typedef struct ly_graph ly_graph;
typedef struct ly_graph_ctx ly_graph_ctx;
#define LY_GRAPH_ALIGN 64 /* bytes: every planned buffer starts on this boundary */

/* ---- Building --------------------------------------------------------------------- */

ly_status ly_graph_create(ly_graph **out);
void ly_graph_free(ly_graph *g);

/* An input of `ndim` dimensions and `dtype`; its shape comes with each run. */
ly_status ly_graph_input(ly_graph *g, const char *name, ly_dtype dtype, int ndim,
                         ly_graph_value *out);

/* Plan room for input `index` in the arena, whose bytes the planner reuses once
 * its last reader has run: a caller that writes the input there
 * (ly_graph_ctx_input_buffer) saves the input's size of peak memory. A run on
 * other data still reads that data where it is. */
ly_status ly_graph_input_in_arena(ly_graph *g, int index);

/* A constant of any dtype, owned by the graph (64-byte aligned; page-aligned
 * from a page up), zeroed: the caller writes its values through *data before
 * the graph first runs. */
ly_status ly_graph_constant(ly_graph *g, ly_dtype dtype, int ndim, const int64_t *shape,
                            ly_graph_value *out, void **data);

/* A node of manifest op `op`: inputs in the op's operand order (LY_GRAPH_NONE
 * for an optional operand left out), `params` the op's parameters struct
 * (copied; NULL: its defaults), `n_out` outputs written to out[]. */
ly_status ly_graph_node(ly_graph *g, ly_op op, const char *name, int n_in, const ly_graph_value *in,
                        const void *params, int n_out, ly_graph_value *out);

/* The common ones, typed. */
ly_status ly_graph_conv2d(ly_graph *g, const char *name, ly_graph_value x, ly_graph_value weight,
                          ly_graph_value bias, ly_graph_value residual,
                          const ly_conv2d_params *params, ly_graph_value *out);
ly_status ly_graph_max_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out);
ly_status ly_graph_avg_pool2d(ly_graph *g, const char *name, ly_graph_value x,
                              const ly_pool2d_params *params, ly_graph_value *out);
ly_status ly_graph_upsample_nearest2d(ly_graph *g, const char *name, ly_graph_value x,
                                      int64_t scale, ly_graph_value *out);
ly_status ly_graph_resize_bilinear2d(ly_graph *g, const char *name, ly_graph_value x,
                                     int64_t height, int64_t width,
                                     const ly_resize_bilinear2d_params *params,
                                     ly_graph_value *out);
/* One input, no params (silu, sigmoid, dfl, relu, gelu, exp, ...). */
ly_status ly_graph_unary(ly_graph *g, ly_op op, const char *name, ly_graph_value x,
                         ly_graph_value *out);
/* Two inputs, no params (add, sub, mul, div, maximum, minimum: broadcasting). */
ly_status ly_graph_binary(ly_graph *g, ly_op op, const char *name, ly_graph_value a,
                          ly_graph_value b, ly_graph_value *out);
/* Join n (at most LY_KERNEL_MAX_INPUTS) values on `axis`. */
ly_status ly_graph_concat(ly_graph *g, const char *name, int n, const ly_graph_value *inputs,
                          int64_t axis, ly_graph_value *out);
/* x[..., start:start+count, ...] on `axis`. */
ly_status ly_graph_slice(ly_graph *g, const char *name, ly_graph_value x, int64_t axis,
                         int64_t start, int64_t count, ly_graph_value *out);
/* x with another shape of as many elements (one extent may be -1). */
ly_status ly_graph_reshape(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int64_t *shape, ly_graph_value *out);
/* out.shape[i] = x.shape[perm[i]]. */
ly_status ly_graph_permute(ly_graph *g, const char *name, ly_graph_value x, int ndim,
                           const int *perm, ly_graph_value *out);

/* Nodes [first, end) (numbered as ly_graph_node_count counts them) are
 * independent along dimension 0: item i of every value they write is computed
 * from item i of every value they read (the items of a value whose extent is
 * k times the span's are its rows [k i, k (i + 1))), but for the constants
 * not listed in `sliced` and the values listed in `whole` (a gather's table),
 * which are read whole. A plan may then run them depth first, a slab of items
 * through every node of the span before the next slab, so that the values
 * passed between them (planned one slab large, the same bytes for every slab)
 * stay in cache instead of streaming whole maps through memory. It does so
 * when every other value the span reads or writes leads with a multiple of
 * the smallest such extent (the items; reshapes inside it keep dimension 0
 * whole rows) and more than one slab results; outputs are bit-identical
 * either way (every kernel computes an item alone). LIBREYOLO_SLAB_BYTES sets
 * the slab's budget of intermediate bytes (0: every span runs whole). */
#define LY_GRAPH_SPAN_VALUES 4
typedef struct ly_item_span {
    int first, end;
    int n_sliced, n_whole;
    ly_graph_value sliced[LY_GRAPH_SPAN_VALUES]; /* constants read item by item */
    ly_graph_value whole[LY_GRAPH_SPAN_VALUES];  /* other values read whole */
} ly_item_span;
ly_status ly_graph_item_span(ly_graph *g, const ly_item_span *span);

/* Mark `v` as output number <count so far> under `name`. */
ly_status ly_graph_output(ly_graph *g, ly_graph_value v, const char *name);

/* Every value's shape and dtype (data NULL) for inputs of these shapes, by the
 * ops' contracts, without planning: `shapes` has ly_graph_value_count entries. */
ly_status ly_graph_infer(ly_graph *g, int n_inputs, const ly_tensor *inputs, ly_tensor *shapes);

/* ---- Rewriting (recognisers; before the graph first runs) ------------------------- */

/* Node `index` computes `op` on `in` instead (its outputs, their ids and
 * readers unchanged): every input must be made before the node. */
ly_status ly_graph_node_replace(ly_graph *g, int index, ly_op op, const char *name, int n_in,
                                const ly_graph_value *in, const void *params);

/* Drop every node none of whose outputs the graph's outputs or a kept node
 * reads, and every constant only they read. Values and nodes are renumbered
 * (ids taken before are void; inputs and outputs keep their order; spans
 * go, as they do when a node is replaced);
 * *removed (may be NULL): how many nodes went. */
ly_status ly_graph_prune(ly_graph *g, int *removed);

/* Attention between heads-first transposes of q, k, v and of its result
 * runs tokens first on the operands as they are (simplify.c); *folded: how
 * many. Prune afterwards. */
ly_status ly_graph_fold_sdpa_transposes(ly_graph *g, int *folded);

/* ---- Running ---------------------------------------------------------------------- */

/* Per-run state (arena, views): one per thread that runs the graph at a time.
 * A context must not be used by two threads at once; the graph must outlive it. */
ly_status ly_graph_ctx_create(ly_graph *g, ly_graph_ctx **out);
void ly_graph_ctx_free(ly_graph_ctx *ctx);

/* Memory that several contexts lay their arenas in, one context at a time:
 * contexts run one after another (the delegates of one program) keep their
 * activations in the same cache-warm bytes instead of one arena each, which
 * left each first write of a run to miss the cache (ViT-Ti's program: 1.14x
 * the checkpoint's time with 25 arenas, 1.01-1.02x with one). Grown, never
 * shrunk; its owner frees it after every context that shares it. */
typedef struct ly_graph_arena {
    void *data;
    size_t capacity;
    size_t allocations;
} ly_graph_arena;

void ly_graph_arena_release(ly_graph_arena *a);

/* From the next prepare on, `ctx` lays its arena in `arena` (NULL: its own
 * again). The caller keeps every context sharing `arena` from running while
 * another runs, and reads a run's outputs (views into the arena) before the
 * next context sharing it prepares or runs. */
void ly_graph_ctx_share_arena(ly_graph_ctx *ctx, ly_graph_arena *arena);

/* A context from the graph's pool (made when none is idle), for callers that
 * run a shared graph from any thread: release it when the outputs have been
 * read. Pooled contexts keep their arenas between uses and go with the graph,
 * which must not be freed while one is acquired. */
ly_status ly_graph_ctx_acquire(ly_graph *g, ly_graph_ctx **out);
void ly_graph_ctx_release(ly_graph_ctx *ctx);

/* Plan for these input shapes (data ignored) unless already planned, and lay
 * out the context's arena for it. ly_graph_run calls it itself. `threads`:
 * what every kernel call gets (0: LIBREYOLO_THREADS, else all CPUs). */
ly_status ly_graph_prepare(ly_graph_ctx *ctx, int n_inputs, const ly_tensor *inputs, int threads);

/* Input `index`'s room in the arena (ly_graph_input_in_arena) after a prepare;
 * valid until the next prepare for other shapes. */
ly_status ly_graph_ctx_input_buffer(const ly_graph_ctx *ctx, int index, void **data);

/* Run every node on `inputs` (shapes and dtypes as declared; an input kept in
 * the arena may have NULL data: its room is read). */
ly_status ly_graph_run(ly_graph_ctx *ctx, int n_inputs, const ly_tensor *inputs, int threads);

/* Output `index` after a run: a view into the arena or a constant, valid until
 * the context's next prepare or run. `name` may be NULL. */
ly_status ly_graph_get_output(const ly_graph_ctx *ctx, int index, ly_tensor *view,
                              const char **name);
int ly_graph_output_count(const ly_graph *g);

/* Any value's view (shape, dtype, data) under the context's current plan; a
 * value a span run in slabs keeps to itself holds its last slab only. */
ly_status ly_graph_value_view(const ly_graph_ctx *ctx, ly_graph_value v, ly_tensor *view);

typedef struct ly_graph_stats {
    size_t arena_bytes;       /* what the current plan uses */
    size_t arena_capacity;    /* what the context has allocated */
    size_t unplanned_bytes;   /* sum of every planned buffer, as if none were reused */
    size_t constant_bytes;    /* constants (weights), as allocated */
    size_t arena_allocations; /* times this context's arena was (re)allocated */
    size_t plans;             /* plans the graph made so far */
    int nodes, values, buffers;
    int blocked_nodes; /* nodes running on channel-blocked data in the current plan */
    int folded_nodes;  /* nodes another node's prepared state runs (plan.c's folds) */
    int slab_spans;    /* spans (ly_graph_item_span) it runs in slabs */
} ly_graph_stats;
ly_status ly_graph_get_stats(const ly_graph_ctx *ctx, ly_graph_stats *stats);

/* ---- Walking (exporters) ------------------------------------------------------------ */

typedef enum ly_graph_value_kind {
    LY_GRAPH_VALUE_INPUT,
    LY_GRAPH_VALUE_CONSTANT,
    LY_GRAPH_VALUE_NODE
} ly_graph_value_kind;

typedef struct ly_graph_value_info {
    ly_graph_value_kind kind;
    ly_dtype dtype;
    int producer;     /* nodes: the node's index, else -1 */
    int output_index; /* -1 when not a graph output */
    /* Constants: their shape; inputs: ndim as declared (shape 0); nodes: 0. */
    int ndim;
    int64_t shape[LY_MAX_DIMS];
} ly_graph_value_info;

/* Shapes and links only: reads no constant's data. */
ly_status ly_graph_value_at(const ly_graph *g, ly_graph_value v, ly_graph_value_info *info);

/* A constant's data (pages the graph gave back after packing are written back
 * first, for good): valid while the graph lives. */
ly_status ly_graph_constant_read(ly_graph *g, ly_graph_value v, const ly_tensor **data);

/* ly_graph_node_info (ops/node.h): a node's op, name, operands and parameters. */

int ly_graph_node_count(const ly_graph *g);
int ly_graph_value_count(const ly_graph *g);
/* Pointers stay valid while the graph lives. */
ly_status ly_graph_node_at(const ly_graph *g, int index, ly_graph_node_info *info);
int ly_graph_input_count(const ly_graph *g);
ly_status ly_graph_input_at(const ly_graph *g, int index, ly_graph_value *value, const char **name);
/* The value behind output `index`. */
ly_status ly_graph_output_value(const ly_graph *g, int index, ly_graph_value *value,
                                const char **name);

#endif
