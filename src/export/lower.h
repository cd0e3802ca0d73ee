/* SPDX-License-Identifier: MIT */
/*
 * A model graph (src/graph/graph.h) lowered to an ExecuTorch program with the
 * XNNPACK delegate, as ExecuTorch's to_edge_transform_and_lower + XNNPACK
 * partitioner + to_executorch would emit it (executorch.md A4, B2-B4):
 *
 *  - every op the XNNPACK delegate takes becomes XNNPACK nodes; ops it cannot
 *    take (nearest upsample, average pooling counting padding) become
 *    KernelCalls to portable "out" kernels between delegated partitions, which
 *    are cut where a delegated op depends on a portable one;
 *  - inside a partition activations are channels-last: conv/pool/resize need
 *    it, reshape/transpose need the logical (NCHW) order, the rest take either;
 *    static transposes are inserted where a value is needed in the other
 *    order, and at the partition's external inputs and outputs, which are
 *    NCHW (contiguous dim order) as in ExecuTorch;
 *  - which op goes where is the manifest's export column (ops.inc): XNN ops
 *    have an emitter, PORTABLE ones a KernelCall on their operator's schema
 *    (src/pte/op_schema.h), both defined in the op's folder
 *    (src/ops/<folder>/export.c); EITHER ones have both, FOLD ones (results
 *    of shapes and constants, such as anchor grids)
 *    are computed here by their reference into program constants, NONE ones
 *    are refused by name;
 *  - constants a partition reads: only those XNNPACK packs (conv filters and
 *    biases, the DFL projection of a fully-connected node) are XNNPACK
 *    constants, in named data (key "<name>_<sha256>", one segment each); every
 *    other one (anchor grids, strides, scales, masks) is an input of the
 *    delegate, fed from a program-level constant in the constant segment, which
 *    the program keeps loaded (ExecuTorch before 1.4.1 frees named data once
 *    the delegate is built, while elementwise nodes keep reading it);
 *  - program-level tensors are memory-planned into one buffer.
 *
 * Shapes come from shape inference (ly_graph_infer) at the export input
 * size, constants from the graph; nothing is planned or run but the FOLD ops'
 * references.
 */
#ifndef LY_EXPORT_LOWER_H
#define LY_EXPORT_LOWER_H

#include "graph/graph.h"

typedef struct ly_lower_options {
    const int *outputs; /* graph output indices to export, in order (NULL: all) */
    int n_outputs;
} ly_lower_options;

typedef struct ly_lower_result {
    uint8_t *program; /* the .pte bytes (free()) */
    size_t size;
    int delegate_partitions; /* DelegateCalls in the program */
    int kernel_calls;        /* portable KernelCalls */
} ly_lower_result;

/* Lower `g` at `shapes` (one per value, as ly_graph_infer gives them). */
ly_status ly_export_lower(ly_graph *g, const ly_tensor *shapes, const ly_lower_options *options,
                          ly_lower_result *out);

/* A copy of `g` (value shapes `shapes`) with every ms_deform_attn node in its
 * portable form (msda_portable.c): grid_sample calls and XNNPACK-delegable ops
 * a stock ExecuTorch runs. *out is NULL when `g` has no such node. */
ly_status ly_export_msda_portable(ly_graph *g, const ly_tensor *shapes, ly_graph **out);

/* The inverse, for runtimes: every portable form in `g` (inputs of these
 * shapes) becomes the one ms_deform_attn node it computes, whose providers
 * serve it, and what only the forms read goes. *found: how many. A graph in
 * which no form is found whole is left as it was. */
ly_status ly_export_msda_recognise(ly_graph *g, int n_inputs, const ly_tensor *inputs, int *found);

#endif
