/* SPDX-License-Identifier: MIT */
/*
 * Shifted-window machinery (internal): what Swin and SwinIR share, and what
 * DINO-DETR's Swin backbone and BiRefNet will (../shared/specs/swin.md §1).
 * Maps are channels last, [B, H, W, C], tokens row-major (y, then x);
 * windows are numbered row-major over the window grid, tokens inside a
 * window row-major.
 */
#ifndef LY_MODELS_COMMON_WINDOWS_H
#define LY_MODELS_COMMON_WINDOWS_H

#include "models/common/builder.h"

#include <stdint.h>

/* idx[i * N + j] (N = ws * ws) for tokens i = (yi, xi), j = (yj, xj) of one
 * window: (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1), a row of the
 * (2ws - 1)^2-row relative position bias table. */
void ly_window_relative_index(int ws, int64_t *idx);

/* The attention mask of a shifted block on an hp x wp map (multiples of ws),
 * window ws, shift ss: every pixel labelled 3 r + c by its row band r (0 for
 * rows [0, hp - ws), 1 for [hp - ws, hp - ss), 2 for [hp - ss, hp)) and column
 * band c; per window, mask[w][i][j] = -100 where tokens i and j carry other
 * labels, else 0. Labels come from the unshifted grid (the mask applies to
 * the rolled map). mask: (hp / ws) * (wp / ws) * N * N floats. Also where the
 * map is one window (LibreYOLO shifts there as well). */
void ly_window_shift_mask(int64_t hp, int64_t wp, int ws, int ss, float *mask);

/* [B, H, W, C] -> [B * (H / ws) * (W / ws), ws * ws, C], and back. */
ly_graph_value ly_build_window_partition(ly_builder *b, const char *what, ly_graph_value x,
                                         int64_t batch, int64_t h, int64_t w, int64_t c, int ws);
ly_graph_value ly_build_window_reverse(ly_builder *b, const char *what, ly_graph_value x,
                                       int64_t batch, int64_t h, int64_t w, int64_t c, int ws);

/* The relative position bias of a window attention with `heads` heads, from
 * the table at prefix + key ([(2ws - 1)^2, heads]): table[idx] as a constant
 * [1, heads, N, N], added to every window's scores. */
ly_graph_value ly_build_relative_bias(ly_builder *b, const char *key, int ws, int64_t heads);

/* ly_window_shift_mask as a constant [nW, 1, N, N] (the blocks of a stage
 * share one). */
ly_graph_value ly_build_shift_mask(ly_builder *b, int64_t hp, int64_t wp, int ws, int ss);

/* The orders a stage's tokens are in between its blocks: the map's (row
 * major), a block's windows (partitioned) or a shifted block's (rolled by
 * -shift, then partitioned). Consecutive blocks run in their own window order
 * and change order with one gather, instead of partitioning and reversing
 * around every attention. */
typedef enum ly_token_order { LY_TOKENS_MAP, LY_TOKENS_WINDOWS, LY_TOKENS_SHIFTED } ly_token_order;

/* A shifted block's gathers on an h x w map (window ws, shift ss), as int64
 * constants [h * w] (the blocks of a stage share them), each the rows of its
 * source order that make its target order: order[0] map -> shifted (the roll
 * and the partition as one row copy), order[1] shifted -> map (reversing
 * both: torch.roll by +ss after window_reverse), order[2] windows ->
 * shifted, order[3] shifted -> windows. */
void ly_build_shifted_window_order(ly_builder *b, int64_t h, int64_t w, int ws, int ss,
                                   ly_graph_value order[4]);

/* One shifted-window transformer block (Swin's SwinTransformerBlock and
 * SwinIR's, spec §1 and §3.2): x + attn(LN1(x)), then + fc2(GELU(fc1(LN2(x)))),
 * keys under the builder's prefix (norm1, attn.{qkv, relative_position_bias_table,
 * proj}, norm2, mlp.fc1, mlp.fc2). */
typedef struct ly_window_block {
    int64_t h, w, c;   /* the map [1, h, w, c]: h and w multiples of window */
    int heads, window; /* window: ws */
    int shift;         /* 0: unshifted; else rolled by -shift, `mask` added */
    int64_t hidden;    /* the MLP's hidden width */
    ly_graph_value mask;
    ly_graph_value order[4]; /* ly_build_shifted_window_order */
    bool fused;              /* the sdpa slot tokens first, else the manual expression */
    ly_token_order from, to; /* x's order, and the result's: the map or the block's own */
} ly_window_block;
/* x in order `from` (the map: [1, h, w, c] or its tokens [1, h * w, c]);
 * the result in order `to`: [1, h, w, c] for the map, else the block's own
 * windows [nW, ws * ws, c] for the next block. */
ly_graph_value ly_build_window_block(ly_builder *b, ly_graph_value x, const ly_window_block *k);

/* The order a block leaves its result in when the next block takes it:
 * its own window order. */
ly_token_order ly_window_block_order(const ly_window_block *k);

#endif
