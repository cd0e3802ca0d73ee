/* SPDX-License-Identifier: MIT */
/*
 * One application of a manifest op in a graph, as the graph (src/graph) and
 * an op's exporter (op_export.h) both see it. It lives with the ops so that an
 * op's folder can describe its own lowering without depending on the graph.
 */
#ifndef LY_OPS_NODE_H
#define LY_OPS_NODE_H

#include "libreyolo/kernels.h"

typedef int32_t ly_graph_value;

#define LY_GRAPH_NONE ((ly_graph_value)-1)

typedef struct ly_graph_node_info {
    ly_op op;
    const char *name;
    int n_inputs;
    ly_graph_value inputs[LY_KERNEL_MAX_INPUTS]; /* LY_GRAPH_NONE where left out */
    int n_outputs;
    ly_graph_value outputs[LY_KERNEL_MAX_OUTPUTS];
    const void *params; /* the op's parameters struct (never NULL) */
} ly_graph_node_info;

#endif
