/* SPDX-License-Identifier: MIT */
/*
 * What an op's exporter is written against. The manifest's export column
 * (libreyolo/ops.inc) says how the ExecuTorch exporter lowers an op, and the
 * op's own folder defines, in its export.c, what that column names:
 *
 *   XNN       ly_xnn_export_<name>: its XNNPACK nodes inside a partition
 *             (LY_XNN_EXPORT: which calls it covers, and its nodes)
 *   PORTABLE  ly_portable_export_<name>: a KernelCall between partitions
 *             (LY_PORTABLE_EXPORT: which calls, and the call's arguments on
 *             its operator's row of src/pte/op_schema.h, the row our runtime
 *             checks calls against)
 *   EITHER    both; the portable call where its `takes` holds
 *   FOLD, NONE  nothing (computed at export into a constant; refused)
 *
 * Both are declared below from the manifest, and the exporter's dispatch
 * tables (src/export/exports.c) are built from it too, so an op without the
 * exporter its line names does not link.
 *
 * The functions declared here are the lowering's (src/export, which includes
 * this header); its state stays opaque, so an op's folder depends on the
 * ExecuTorch format (src/pte) and nothing above the ops.
 */
#ifndef LY_OPS_OP_EXPORT_H
#define LY_OPS_OP_EXPORT_H

#include "ops/node.h"
#include "pte/op_schema.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ly_lowering ly_lowering;       /* one export of one graph */
typedef struct ly_xnn_builder ly_xnn_builder; /* one partition being built */

#define NONE_ID LY_XNN_INVALID_ID

/* A value's layout inside a partition: the graph's (NCHW) order or channels-last. */
enum { LOGICAL = 0, CHANNELS_LAST = 1 };

/* ---- a node's operands ----------------------------------------------------------------- */

const ly_tensor *ly_lower_shape(const ly_lowering *L, ly_graph_value v); /* shape and dtype */
/* The data of a constant or of a value folded at export (logical order); NULL
 * for what the program computes. */
const float *ly_lower_known(const ly_lowering *L, ly_graph_value v);
bool ly_lower_is_4d(const ly_lowering *L, ly_graph_value v);
bool ly_lower_known_f32(const ly_lowering *L, ly_graph_value v);
int64_t ly_lower_numel(const ly_tensor *t);
/* `takes` that many ops share: operand 0 is 4-d (NCHW); has a rank of 1 or more. */
bool ly_lower_takes_4d(const ly_lowering *L, const ly_graph_node_info *n);
bool ly_lower_takes_ranked(const ly_lowering *L, const ly_graph_node_info *n);

/* A negative axis counted from the end. */
static inline int64_t ly_lower_axis(int64_t axis, int ndim)
{
    return axis < 0 ? axis + ndim : axis;
}

/* ---- a portable call ------------------------------------------------------------------- */

/* Start k as a call of `op` on this program's values. */
void ly_lower_call_begin(ly_lowering *L, ly_pte_call *k, ly_pte_portable_op op);
/* The program value of a value the program computes. */
int ly_lower_pvalue(const ly_lowering *L, ly_graph_value v);
/* A graph value as a program value: constants get one; LY_GRAPH_NONE a Null. */
int ly_lower_program_value(ly_lowering *L, ly_graph_value v);
/* An NCHW (contiguous) program tensor of this shape, memory-planned later; -1: out of memory. */
int ly_lower_tensor_value(ly_lowering *L, const ly_tensor *shape);

/* ---- XNNPACK nodes: failures are kept in the builder (NONE_ID after one) --------------- */

const ly_tensor *ly_xb_shape(const ly_xnn_builder *x, ly_graph_value v);
const float *ly_xb_known(const ly_xnn_builder *x, ly_graph_value v);
/* Zeroed memory that lives until the export ends; NULL (and the builder
 * failed) when out of memory. */
void *ly_xb_alloc(ly_xnn_builder *x, size_t count, size_t size);

bool ly_xb_cl_rank(int ndim); /* ranks that have a channels-last form (3, 4) */
int ly_xb_dims(const ly_tensor *s, int layout, uint32_t *dims);
uint32_t ly_xb_axis(int ndim, int layout, int64_t axis); /* logical axis in `layout` */
uint32_t ly_xb_internal(ly_xnn_builder *x, int ndim, const uint32_t *dims);
/* A constant tensor whose bytes go to named data. `data` must outlive the lowering. */
uint32_t ly_xb_const(ly_xnn_builder *x, const char *name, int ndim, const uint32_t *dims,
                     const void *data, size_t size);
/* "<node>_<what>", dots made underscores */
char *ly_xb_const_name(ly_xnn_builder *x, const char *node, const char *what);
ly_xnn_node *ly_xb_node(ly_xnn_builder *x, ly_xnn_node_type type);
void ly_xb_1x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t in, uint32_t out);
/* Node n (one input, one output) as one XNNPACK node of `type`, on whichever
 * layout its input already has: the element-wise unary ops. */
void ly_xb_unary(ly_xnn_builder *x, const ly_graph_node_info *n, ly_xnn_node_type type);
void ly_xb_2x1(ly_xnn_builder *x, ly_xnn_node_type type, uint32_t a, uint32_t b, uint32_t out);
void ly_xb_transpose(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *perm);
void ly_xb_reshape(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *shape);
void ly_xb_slice(ly_xnn_builder *x, uint32_t in, uint32_t out, int nd, const uint32_t *offsets,
                 const uint32_t *sizes);
/* Concatenate n inputs on `axis` into `out` (chained by fours, as XNNPACK's
 * Concatenate2..4 take). `dims` are the output's. */
void ly_xb_concat(ly_xnn_builder *x, int n, const uint32_t *in, uint32_t out, int nd,
                  const uint32_t *dims, uint32_t axis, const uint32_t *widths);
/* A fully-connected node over the last axis of `in` (logical dims `dims`,
 * rank nd) with a filter [n_out, dims[nd-1]] and bias of its own, named after
 * the node being emitted: the only way an emitter's own constants may enter
 * a partition (XNNPACK packs them). Its output. */
uint32_t ly_xb_fc_const(ly_xnn_builder *x, const char *what, uint32_t in, int nd,
                        const uint32_t *dims, uint32_t n_out, const float *filter,
                        const float *bias);
/* The constant [1, n] holding 0, 1, ..., n-1, shared by the partition's nodes
 * (named "dfl_project", after its first user). */
uint32_t ly_xb_arange_row(ly_xnn_builder *x, int64_t n);

/* Graph value `v` in `layout`, converting with a static transpose if it only
 * exists in the other one. */
uint32_t ly_xb_get(ly_xnn_builder *x, ly_graph_value v, int layout);
/* The layout `v` already has, preferring channels-last. */
int ly_xb_have(const ly_xnn_builder *x, ly_graph_value v);
/* The value `v` has in `layout` so far; NONE_ID if none. */
uint32_t ly_xb_held(const ly_xnn_builder *x, ly_graph_value v, int layout);
/* Let `v` in `layout` be the existing value `id` (a move that is no node). */
void ly_xb_alias(ly_xnn_builder *x, ly_graph_value v, int layout, uint32_t id);
/* The value a node defines for graph value `v` in `layout`. */
uint32_t ly_xb_define(ly_xnn_builder *x, ly_graph_value v, int layout);
/* v's index among the partition's external outputs; -1 if it is not one. */
int ly_xb_ext_out_index(const ly_xnn_builder *x, ly_graph_value v);

extern const uint32_t ly_xb_to_cl4[4], ly_xb_from_cl4[4], ly_xb_swap3[3];

/* ---- the exporters the manifest names -------------------------------------------------- */

/* An op the manifest marks XNN (or EITHER), inside a partition. */
typedef struct ly_xnn_export {
    /* Whether the emitter covers this call's operands (already known to be
     * f32); NULL: every call. */
    bool (*takes)(const ly_lowering *L, const ly_graph_node_info *n);
    /* Its XNNPACK nodes (failures in the builder). */
    void (*emit)(ly_xnn_builder *x, const ly_graph_node_info *n);
} ly_xnn_export;

/* An op the manifest marks PORTABLE (or EITHER), a KernelCall between
 * partitions. An EITHER op is portable exactly when `takes` holds. */
typedef struct ly_portable_export {
    bool (*takes)(const ly_lowering *L, const ly_graph_node_info *n);
    /* The call's arguments and outs, in its schema's order. */
    void (*call)(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k);
} ly_portable_export;

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
    LY_EXPORT_PICK(LY_EXPORT_DECLARE_, export, ly_xnn_export_##name, ly_portable_export_##name)
#include "libreyolo/ops.inc"
#undef LY_OP

/* Define op `name`'s exporter, in its folder's export.c. */
#define LY_XNN_EXPORT(name, takes, emit) const ly_xnn_export ly_xnn_export_##name = {takes, emit}
#define LY_PORTABLE_EXPORT(name, takes, call)                                                      \
    const ly_portable_export ly_portable_export_##name = {takes, call}

#endif
