/* SPDX-License-Identifier: MIT */
/* What the graph engines (engine.c: one graph; sized.c: a graph per input
 * size) share (internal). */
#ifndef LY_ENGINES_GRAPH_GRAPH_ENGINE_H
#define LY_ENGINES_GRAPH_GRAPH_ENGINE_H

#include "graph/graph.h"

/* recipe.h's engine outputs() of a run context: views and names of every
 * output (LY_E_UNSUPPORTED past `capacity`). */
ly_status ly_graph_engine_outputs(ly_graph_ctx *ctx, ly_tensor *views, const char **names,
                                  int capacity, int *count);
/* recipe.h's engine output_shapes() of graph g for an input [1, 3, h, w]. */
ly_status ly_graph_engine_output_shapes(ly_graph *g, int64_t h, int64_t w, ly_tensor *shapes,
                                        int capacity, int *count);

#endif
