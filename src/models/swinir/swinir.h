/* SPDX-License-Identifier: MIT */
/* SwinIR's network with its stages exposed (internal, for tests): the
 * stages LibreYOLO's fixtures keep. */
#ifndef LY_MODELS_SWINIR_SWINIR_H
#define LY_MODELS_SWINIR_SWINIR_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"

/* The network of `ck` for an input [1, 3, h, w] (multiples of 8) into the
 * empty graph g, its stages in taps[0 .. *n_taps) (at most 11): conv_first
 * [1, C, h, w], each RSTB's output tokens [1, h * w, C], the upsampler's input
 * (conv_after_body + conv_first) [1, C, h, w]. */
ly_status ly_swinir_build_taps(ly_graph *g, const ly_checkpoint *ck, int64_t h, int64_t w,
                               ly_graph_value *taps, int *n_taps);

#endif
