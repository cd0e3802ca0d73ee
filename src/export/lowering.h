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
 *   xnn_ops.c       each XNN op's emitter: ly_xnn_export_<name>
 *   portable_ops.c  each PORTABLE op's KernelCall, on the operator schemas
 *                   of src/pte/op_schema.h: ly_portable_export_<name>
 *   exports.c       the tables of those exporters, built from the manifest
 *
 * The manifest (libreyolo/ops.inc) declares, below, the exporter an op's
 * export column names: an XNN op must define ly_xnn_export_<name>, a
 * PORTABLE one ly_portable_export_<name>, an EITHER one both; the tables
 * that dispatch on them are built from the manifest too, so an op without
 * the exporter its entry names does not link.
 */
#ifndef LY_EXPORT_LOWERING_H
#define LY_EXPORT_LOWERING_H

#include "core/core.h"
#include "export/lower.h"
#include "ops/ops_internal.h"
#include "pte/op_schema.h"
#include "pte/pte.h"

#include <stdlib.h>
#include <string.h>

#define NONE_ID LY_XNN_INVALID_ID

/* A value's layout inside a partition: the graph's (NCHW) order or channels-last. */
enum { LOGICAL = 0, CHANNELS_LAST = 1 };

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

typedef struct ly_lowering {
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
} ly_lowering;

int64_t ly_lower_numel(const ly_tensor *t);

/* ---- classify.c ------------------------------------------------------------------------- */

/* Delegated, portable, folded, or no mapping (an error naming the op). */
ly_status ly_lower_classify(ly_lowering *L, ly_lower_node *gn);

/* Operand tests the ops' `takes` share. */
static inline bool ly_lower_is_4d(const ly_lowering *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->shape[v].ndim == 4;
}

static inline bool ly_lower_known_f32(const ly_lowering *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->known[v] && L->shape[v].dtype == LY_F32;
}

/* A negative axis counted from the end. */
static inline int64_t ly_lower_axis(int64_t axis, int ndim)
{
    return axis < 0 ? axis + ndim : axis;
}

/* ---- program.c ---------------------------------------------------------------------------- */

/* An NCHW (contiguous) program tensor of v's shape, memory-planned later; -1: out of memory. */
int ly_lower_tensor_value(ly_lowering *L, const ly_tensor *shape);
/* A program-level constant holding known value `v`, in the constant segment. */
int ly_lower_constant_value(ly_lowering *L, ly_graph_value v);
/* A graph value as a program value: constants get one; LY_GRAPH_NONE a Null. */
int ly_lower_program_value(ly_lowering *L, ly_graph_value v);
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

/* ---- portable_ops.c ----------------------------------------------------------------------- */

/* A portable node's KernelCall, by its op's portable call `e`. */
typedef struct ly_portable_export ly_portable_export;
ly_status ly_lower_emit_portable(ly_lowering *L, const ly_lower_node *gn,
                                 const ly_portable_export *e);

/* ---- partition.c, xnn_builder.c: one partition as an XNNGraph ---------------------------- */

typedef struct ly_xnn_builder {
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
    uint32_t proj_id; /* the DFL projection [1, 16], shared */
    const char *node_name;
} ly_xnn_builder;

/* Partitions in dependency order (sets every node's part); their count. */
int ly_lower_partition(ly_lowering *L);
/* Build partition `part` as an XNNGraph, encode it, and emit its DelegateCall. */
ly_status ly_lower_emit_partition(ly_lowering *L, int part);

/* What an emitter builds with (failures are kept in x->st; NONE_ID after one). */
bool ly_xb_cl_rank(int ndim); /* ranks that have a channels-last form (3, 4) */
int ly_xb_dims(const ly_tensor *s, int layout, uint32_t *dims);
uint32_t ly_xb_axis(int ndim, int layout, int64_t axis); /* logical axis in `layout` */
uint32_t ly_xb_value(ly_xnn_builder *x, int ndim, const uint32_t *dims, uint32_t external_id,
                     uint32_t flags);
uint32_t ly_xb_internal(ly_xnn_builder *x, int ndim, const uint32_t *dims);
/* A constant tensor whose bytes go to named data. `data` must outlive the lowering. */
uint32_t ly_xb_const(ly_xnn_builder *x, const char *name, int ndim, const uint32_t *dims,
                     const void *data, size_t size);
/* "<node>_<what>", dots made underscores */
char *ly_xb_const_name(ly_xnn_builder *x, const char *node, const char *what);
ly_xnn_node *ly_xb_node(ly_xnn_builder *x, ly_xnn_node_type type);
void ly_xb_1x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t in, uint32_t out);
void ly_xb_2x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t a, uint32_t b, uint32_t out);
void ly_xb_transpose(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *perm);
void ly_xb_reshape(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *shape);
void ly_xb_slice(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *offsets,
                 const uint32_t *sizes);
/* Concatenate n inputs on `axis` into `out` (chained by fours, as XNNPACK's
 * Concatenate2..4 take). `dims` are the output's. */
void ly_xb_concat(ly_xnn_builder *x, int n, const uint32_t *in, uint32_t out, int nd,
                  const uint32_t *dims, uint32_t axis, const uint32_t *widths);
/* Graph value `v` in `layout`, converting with a static transpose if it only
 * exists in the other one. */
uint32_t ly_xb_get(ly_xnn_builder *x, ly_graph_value v, int layout);
/* The layout `v` already has, preferring channels-last. */
int ly_xb_have(const ly_xnn_builder *x, ly_graph_value v);
/* The value a node defines for graph value `v` in `layout`. */
uint32_t ly_xb_define(ly_xnn_builder *x, ly_graph_value v, int layout);
int ly_xb_ext_out_index(const ly_xnn_builder *x, ly_graph_value v);

extern const uint32_t ly_xb_to_cl4[4], ly_xb_from_cl4[4], ly_xb_swap3[3];

/* ---- the exporters the manifest names ------------------------------------------------- */

/* An op the manifest marks XNN (or EITHER), inside a partition. */
typedef struct ly_xnn_export {
    /* Whether the emitter covers this call's operands (already known to be
     * f32); NULL: every call. */
    bool (*takes)(const ly_lowering *L, const ly_graph_node_info *n);
    /* Its XNNPACK nodes (failures in x->st). */
    void (*emit)(ly_xnn_builder *x, const ly_graph_node_info *n);
} ly_xnn_export;

/* An op the manifest marks PORTABLE (or EITHER), a KernelCall between
 * partitions. An EITHER op is portable exactly when `takes` holds. */
struct ly_portable_export {
    bool (*takes)(const ly_lowering *L, const ly_graph_node_info *n);
    /* The call's arguments and outs, in its schema's order. */
    void (*call)(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k);
};

/* The manifest's export column: LY_EXPORT_PICK(macro, export, xnn, portable) is
 * macro<export>(xnn, portable), with the op's two symbols already named. */
#if defined(XNN) || defined(PORTABLE) || defined(EITHER) || defined(FOLD) || defined(NONE)
#error "the manifest's export values are read as tokens here"
#endif
#define LY_EXPORT_PICK_(macro, export, xnn, portable) macro##export(xnn, portable)
#define LY_EXPORT_PICK(macro, export, xnn, portable) LY_EXPORT_PICK_(macro, export, xnn, portable)

#define LY_EXPORT_DECLARE_XNN(xnn, portable) extern const ly_xnn_export xnn;
#define LY_EXPORT_DECLARE_PORTABLE(xnn, portable) extern const ly_portable_export portable;
#define LY_EXPORT_DECLARE_EITHER(xnn, portable)                                                    \
    LY_EXPORT_DECLARE_XNN(xnn, portable) LY_EXPORT_DECLARE_PORTABLE(xnn, portable)
#define LY_EXPORT_DECLARE_FOLD(xnn, portable)
#define LY_EXPORT_DECLARE_NONE(xnn, portable)
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    LY_EXPORT_PICK(LY_EXPORT_DECLARE_, export, ly_xnn_export_##name,         \
                   ly_portable_export_##name)
#include "libreyolo/ops.inc"
#undef LY_OP

/* Define op `name`'s exporter (in xnn_ops.c, portable_ops.c). */
#define LY_XNN_EXPORT(name, takes, emit) const ly_xnn_export ly_xnn_export_##name = {takes, emit}
#define LY_PORTABLE_EXPORT(name, takes, call)                                                      \
    const ly_portable_export ly_portable_export_##name = {takes, call}

/* exports.c: per op, its XNNPACK emitter and its portable call, where the manifest names them. */
extern const ly_xnn_export *const ly_xnn_exports[LY_OP_COUNT];
extern const ly_portable_export *const ly_portable_exports[LY_OP_COUNT];

#endif
