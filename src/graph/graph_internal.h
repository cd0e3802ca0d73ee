/* SPDX-License-Identifier: MIT */
/* The graph's records, shared by graph.c (building, walking), plan.c (plans)
 * and run.c (contexts, execution). */
#ifndef LY_GRAPH_GRAPH_INTERNAL_H
#define LY_GRAPH_GRAPH_INTERNAL_H

#include "graph/graph.h"
#include "kernels/registry_internal.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct plan plan;

typedef ly_item_span gspan; /* ly_graph_item_span */

typedef struct gvalue {
    ly_graph_value_kind kind;
    ly_dtype dtype;
    int ndim;         /* inputs: declared */
    int32_t producer; /* nodes */
    int out_index;    /* nodes: which of the producer's outputs */
    int input_index;  /* inputs */
    int output_index; /* -1: not a graph output */
    bool in_arena;    /* inputs: stored in the arena */
    /* Constants. */
    ly_tensor constant;
    size_t constant_bytes;
    bool page_aligned;
    /* Set while the constant's pages are given back: the prepared state of node
     * `keeper_node` in `keeper` (held) can write them back exactly. */
    atomic_bool released;
    plan *keeper;
    int keeper_node, keeper_input;
} gvalue;

typedef struct gnode {
    ly_op op;
    char *name;
    int n_in, n_out;
    ly_graph_value in[LY_KERNEL_MAX_INPUTS];
    ly_graph_value out[LY_KERNEL_MAX_OUTPUTS];
    void *params; /* the op's params struct, owned */
} gnode;

#define LY_GRAPH_MAX_PLANS 4

struct ly_graph {
    gvalue *values;
    size_t n_values, cap_values;
    gnode *nodes;
    size_t n_nodes, cap_nodes;
    ly_graph_value *inputs;
    char **input_names;
    size_t n_inputs, cap_inputs, cap_input_names;
    ly_graph_value *outputs;
    char **output_names;
    size_t n_outputs, cap_outputs, cap_output_names;
    size_t constant_bytes;
    gspan *spans;
    size_t n_spans, cap_spans;

    pthread_mutex_t lock;            /* plans and released constants */
    plan *plans[LY_GRAPH_MAX_PLANS]; /* most recent first */
    plan *live;                      /* every plan alive (cached or still referenced) */
    size_t plans_made;
    ly_graph_ctx *idle; /* pooled contexts not in use (ly_graph_ctx_acquire) */
};

/* Free the pooled contexts (graph free; graph's lock held). */
void ly_graph_ctx_pool_clear_locked(ly_graph *g);

/* ---- plans (plan.c) ---------------------------------------------------------------- */

typedef enum node_mode {
    NODE_VIEW, /* reshape / contiguous slice / concat of placed parts: nothing to do */
    NODE_JOIN, /* concat of contiguous parts: copies the parts not placed in place */
    /* a slice (step 1) or concat with dimensions before its axis (a batch),
     * run by the op's reference, which copies whole ranges of each image: in
     * any layout whose ranges are whole channel blocks, as a view or join is
     * at batch 1 */
    NODE_COPY,
    NODE_KERNEL /* a registry implementation */
} node_mode;

typedef struct pnode {
    node_mode mode;
    const ly_impl *impl; /* NODE_KERNEL */
    void *state;         /* its prepared state, or NULL */
    ly_layout in_layout[LY_KERNEL_MAX_INPUTS];
    ly_layout out_layout[LY_KERNEL_MAX_OUTPUTS];
    bool blocked;                              /* any operand not plain */
    int32_t span;                              /* the span run in slabs it is in, or -1 */
    bool copy_in[LY_KERNEL_MAX_INPUTS];        /* NODE_JOIN: parts copied, not placed */
    int64_t part_offset[LY_KERNEL_MAX_INPUTS]; /* NODE_JOIN: bytes into the output */
    /* the activation node after it that its state took (ly_activation; the
     * node became a view): NONE but for such a node */
    int64_t folded_activation;
    /* its state runs the node writing its residual (input 3), a view now */
    bool residual_folded;
} pnode;

typedef struct pvalue {
    ly_tensor shape;       /* dtype and shape (data NULL) */
    ly_graph_value parent; /* a view of this value (LY_GRAPH_NONE: storage of its own) */
    int64_t offset;        /* bytes into the parent */
    int32_t buffer;        /* owners in the arena; -1 otherwise */
    ly_layout layout;      /* owners; a view has its root's */
    bool in_join;          /* placed in a concat's output */
    bool slab;             /* a root only its span reads: one slab's storage */
} pvalue;

/* How a span (gspan of the same index) runs: `rows` items of `items` at a
 * time, or whole (rows 0). */
typedef struct pspan {
    int64_t items, rows;
} pspan;

typedef struct pbuffer {
    size_t bytes;
    int32_t first, last; /* live range over node indices, inclusive */
    size_t offset;
} pbuffer;

struct plan {
    atomic_int refs;
    plan *next_live; /* every plan still referenced (graph's lock) */
    /* What it was made for. */
    int n_inputs;
    int64_t (*input_shapes)[LY_MAX_DIMS];
    int threads;
    ly_selection selection;
    uint64_t generation;
    bool capturing, blocked_allowed;
    /* What it decided. */
    pvalue *values;
    pnode *nodes;
    pbuffer *buffers;
    pspan *spans; /* per graph span */
    size_t n_buffers, arena_bytes, unplanned_bytes;
    int blocked_nodes;
    int folded_nodes;
};

/* The plan for these inputs under the current selection and registry, made
 * when the cache has none (a reference the caller releases). */
ly_status ly_plan_acquire(ly_graph *g, int n_inputs, const ly_tensor *inputs, int threads,
                          plan **out);
void ly_plan_release(ly_graph *g, plan *p);
void ly_plan_release_locked(ly_graph *g, plan *p);
/* Free a plan whose last reference is gone (graph's lock held). */
void ly_plan_free_locked(ly_graph *g, plan *p);
/* Drop every cached plan (graph free). */
void ly_plans_clear(ly_graph *g);

/* A constant's data, written back first if its pages were given back. The
 * _locked form is for callers holding the graph's lock. */
ly_status ly_graph_constant_data(ly_graph *g, ly_graph_value v, const ly_tensor **out);
ly_status ly_graph_constant_restore_locked(ly_graph *g, ly_graph_value v);

/* The root of a view chain and the byte offset into it. */
ly_graph_value ly_plan_root(const plan *p, ly_graph_value v, int64_t *offset);

/* Whether operand `v` of a node in span `span` is read or written a slab at a
 * time (a value whose storage is not the slab's own, or a sliced constant). */
bool ly_plan_span_slices(const ly_graph *g, const plan *p, int32_t span, ly_graph_value v);

#endif
