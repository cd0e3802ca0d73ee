/* SPDX-License-Identifier: MIT */
/*
 * The lowering's state and the parts of it (see lower.h):
 *
 *   lower.c         the driver: graph -> classified nodes -> partitions ->
 *                   program values -> instructions -> memory plan -> .pte
 *   classify.c      which nodes are delegated, portable or folded, by the
 *                   manifest's export column and each op's `takes`
 *   program.c       program values (tensors, constants), instructions,
 *                   operators, named data, the memory plan
 *   partition.c     the partitions, and one partition as an XNNGraph (its
 *                   externals, its nodes by their ops' emitters) and DelegateCall
 *   xnn_builder.c   building an XNNGraph: values, constants, nodes, and the
 *                   two layouts (logical, channels-last) of a value
 *   portable_call.c a portable node's KernelCall instruction
 *   exports.c       the tables of the ops' exporters, built from the manifest
 *
 * What each op becomes is the op's own: src/ops/<folder>/export.c defines the
 * exporter its manifest line names (ly_xnn_export_<name>,
 * ly_portable_export_<name>), written against ops/op_export.h, whose
 * functions are this folder's; the state below is opaque to the ops.
 */
#ifndef LY_EXPORT_LOWERING_H
#define LY_EXPORT_LOWERING_H

#include "core/core.h"
#include "export/lower.h"
#include "ops/op_export.h"
#include "pte/op_schema.h"
#include "pte/pte.h"

#include <stdlib.h>
#include <string.h>

/* ---- memory ---------------------------------------------------------------------------- */

/* Blocks freed together when the lowering ends. */
typedef struct ly_lower_arena {
    void **blocks;
    size_t n, cap;
    bool failed;
} ly_lower_arena;

void *ly_lower_calloc(ly_lower_arena *a, size_t count, size_t size);
void ly_lower_arena_free(ly_lower_arena *a);

/* Grow *items (of `size` bytes each) to hold one more; false when out of memory. */
bool ly_lower_grow(void **items, size_t *cap, size_t n, size_t size);
#define LY_LOWER_GROW(arr, n, cap) ly_lower_grow((void **)&(arr), &(cap), (n), sizeof *(arr))

ly_status ly_lower_oom(void);

/* ---- the lowering state -------------------------------------------------------------- */

typedef struct ly_lower_node {
    ly_graph_node_info info;
    bool portable;
    bool folded; /* computed here into a constant (LY_LOWER_FOLD) */
    int part;    /* delegated: partition; portable: level (runs after partition `part`) */
} ly_lower_node;

/* A memory-planned program tensor and the instructions it is live over. */
typedef struct ly_lower_planned {
    int evalue;
    uint64_t nbytes;
    int first, last;
} ly_lower_planned;

typedef struct ly_lower_named {
    char *key;
    const void *data;
    size_t size;
} ly_lower_named;

enum { LY_LOWER_CONSTANT = -3 }; /* ly_lowering.producer of constants and folded values */

struct ly_lowering {
    ly_graph *g;
    ly_lower_arena mem;
    int n_nodes, n_values;
    ly_lower_node *nodes;
    const ly_tensor *shape; /* per value: its shape and dtype */
    int *producer;          /* per value: node index, -1 graph input, -2 none, LY_LOWER_CONSTANT */
    /* Per value: the data of constants and folded nodes' outputs (logical
     * order), NULL for everything computed by the program. */
    const float **known;
    bool *exported; /* per value: an exported graph output */
    int *pvalue;    /* per value: program EValue index or -1 */
    /* program */
    ly_pte_values values;
    ly_pte_instruction *instr;
    size_t n_instr, cap_instr;
    ly_pte_operator ops[16];
    size_t n_ops;
    ly_pte_delegate *delegates;
    size_t n_delegates, cap_delegates;
    ly_pte_bytes *blobs; /* delegate payloads, owned (malloc'd) */
    size_t n_blobs, cap_blobs;
    ly_lower_named *named;
    size_t n_named, cap_named;
    ly_lower_planned *pt;
    size_t n_pt, cap_pt;
    int32_t *inputs, *outputs;
    size_t n_inputs, n_outputs;
    int kernel_calls;
    /* The constant segment: program-level constants (what partitions read but
     * XNNPACK does not pack), each 16-aligned; offsets[0] is the placeholder. */
    uint8_t *const_seg;
    size_t const_seg_size, const_seg_cap;
    uint64_t *const_offsets;
    size_t n_const_offsets, cap_const_offsets;
};

/* ---- classify.c ------------------------------------------------------------------------- */

/* Delegated, portable, folded, or no mapping (an error naming the op). */
ly_status ly_lower_classify(ly_lowering *L, ly_lower_node *gn);

/* ---- program.c ---------------------------------------------------------------------------- */

/* A program-level constant holding known value `v`, in the constant segment. */
int ly_lower_constant_value(ly_lowering *L, ly_graph_value v);
ly_pte_instruction *ly_lower_instruction(ly_lowering *L);
int ly_lower_operator(ly_lowering *L, const char *name, const char *overload);
/* Program value `evalue` is used (or defined) by instruction `at`. */
void ly_lower_touch(ly_lowering *L, int evalue, int at);
/* A named-data entry (key "<name>_<sha256>"; one per distinct key). */
ly_status ly_lower_named_data(ly_lowering *L, const char *name, const void *data, size_t size,
                              const char **key);
/* The inputs a node reads from the program (not constants or folded values). */
int ly_lower_node_inputs(const ly_lowering *L, const ly_graph_node_info *n, ly_graph_value *out);
/* Which values exist at program level. */
ly_status ly_lower_program_values(ly_lowering *L);
/* Offsets of the planned tensors in the one planned buffer; its size in *total. */
ly_status ly_lower_plan_memory(ly_lowering *L, uint64_t *total);

/* ---- portable_call.c ----------------------------------------------------------------------- */

/* A portable node's KernelCall, by its op's portable call `e`. */
ly_status ly_lower_emit_portable(ly_lowering *L, const ly_lower_node *gn,
                                 const ly_portable_export *e);

/* ---- partition.c, xnn_builder.c: one partition as an XNNGraph ---------------------------- */

struct ly_xnn_builder {
    ly_lowering *L;
    int part;
    ly_xnn_value *v;
    size_t n_v, cap_v;
    ly_xnn_node *n;
    size_t n_n, cap_n;
    ly_xnn_constant_data *c;
    size_t n_c, cap_c;
    uint32_t (*xid)[2];    /* per graph value and layout */
    int *ext_in, *ext_out; /* graph values */
    size_t n_in, n_out;
    uint32_t *in_ids, *out_ids;
    ly_status st;
    uint32_t arange_id; /* ly_xb_arange_row's, shared */
    const char *node_name;
};

/* Partitions in dependency order (sets every node's part); their count. */
int ly_lower_partition(ly_lowering *L);
/* Build partition `part` as an XNNGraph, encode it, and emit its DelegateCall. */
ly_status ly_lower_emit_partition(ly_lowering *L, int part);

/* The builder's own (what emitters use is in ops/op_export.h). */
uint32_t ly_xb_value(ly_xnn_builder *x, int ndim, const uint32_t *dims, uint32_t external_id,
                     uint32_t flags);

/* exports.c: per op, its XNNPACK emitter and its portable call, where the manifest names them. */
extern const ly_xnn_export *const ly_xnn_exports[LY_OP_COUNT];
extern const ly_portable_export *const ly_portable_exports[LY_OP_COUNT];

#endif
