/* SPDX-License-Identifier: MIT */
/* Shifted-window machinery (windows.h). */
#include "models/common/windows.h"

#include "core/core.h"
#include "libreyolo/sdpa.h"

#include <math.h>

#include <stdlib.h>

void ly_window_relative_index(int ws, int64_t *idx)
{
    int64_t n = (int64_t)ws * ws, side = 2 * (int64_t)ws - 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            idx[i * n + j] = (i / ws - j / ws + ws - 1) * side + (i % ws - j % ws + ws - 1);
}

/* The band of row (or column) p of an extent-`size` map: 0, 1 or 2. */
static int band(int64_t p, int64_t size, int ws, int ss)
{
    return p < size - ws ? 0 : p < size - ss ? 1 : 2;
}

void ly_window_shift_mask(int64_t hp, int64_t wp, int ws, int ss, float *mask)
{
    int64_t n = (int64_t)ws * ws, across = wp / ws;
    for (int64_t w = 0; w < (hp / ws) * across; w++) {
        int64_t y0 = w / across * ws, x0 = w % across * ws;
        float *m = mask + w * n * n;
        for (int64_t i = 0; i < n; i++) {
            int li = 3 * band(y0 + i / ws, hp, ws, ss) + band(x0 + i % ws, wp, ws, ss);
            for (int64_t j = 0; j < n; j++) {
                int lj = 3 * band(y0 + j / ws, hp, ws, ss) + band(x0 + j % ws, wp, ws, ss);
                m[i * n + j] = li != lj ? -100.0f : 0.0f;
            }
        }
    }
}

static int64_t wrap(int64_t i, int64_t n)
{
    return ((i % n) + n) % n;
}

void ly_build_shifted_window_order(ly_builder *b, int64_t h, int64_t w, int ws, int ss,
                                   ly_graph_value order[4])
{
    int64_t n = h * w, *at[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        order[i] = LY_GRAPH_NONE;
        if (b->st == LY_OK)
            ly_build_fail(b, ly_graph_constant(b->g, LY_I64, 1, &n, &order[i], (void **)&at[i]));
    }
    int64_t *place = malloc((size_t)(n ? n : 1) * sizeof *place); /* map -> window order */
    if (!place && b->st == LY_OK)
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    if (b->st != LY_OK) {
        free(place);
        return;
    }
    int64_t across = w / ws;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            place[y * w + x] = ((y / ws * across + x / ws) * ws + y % ws) * ws + x % ws;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            /* token (y, x) of the rolled map: window (y / ws, x / ws), place (y % ws, x % ws) */
            int64_t t = place[y * w + x], from = wrap(y + ss, h) * w + wrap(x + ss, w);
            at[0][t] = from;
            at[1][from] = t;
            at[2][t] = place[from];
            at[3][place[from]] = t;
        }
    free(place);
}

ly_graph_value ly_build_window_partition(ly_builder *b, const char *what, ly_graph_value x,
                                         int64_t batch, int64_t h, int64_t w, int64_t c, int ws)
{
    int64_t split[6] = {batch, h / ws, ws, w / ws, ws, c}, order[6] = {0, 1, 3, 2, 4, 5};
    int64_t windows[3] = {batch * (h / ws) * (w / ws), (int64_t)ws * ws, c};
    x = ly_build_permute(b, what, ly_build_reshape(b, what, x, 6, split), 6, order);
    return ly_build_reshape(b, what, x, 3, windows);
}

ly_graph_value ly_build_window_reverse(ly_builder *b, const char *what, ly_graph_value x,
                                       int64_t batch, int64_t h, int64_t w, int64_t c, int ws)
{
    int64_t split[6] = {batch, h / ws, w / ws, ws, ws, c}, order[6] = {0, 1, 3, 2, 4, 5};
    int64_t map[4] = {batch, h, w, c};
    x = ly_build_permute(b, what, ly_build_reshape(b, what, x, 6, split), 6, order);
    return ly_build_reshape(b, what, x, 4, map);
}

ly_graph_value ly_build_relative_bias(ly_builder *b, const char *key, int ws, int64_t heads)
{
    int64_t n = (int64_t)ws * ws, rows = (2 * (int64_t)ws - 1) * (2 * (int64_t)ws - 1);
    int64_t tshape[2] = {rows, heads}, bshape[4] = {1, heads, n, n};
    const float *table = ly_build_take(b, key, 2, tshape);
    if (!table || b->st != LY_OK) return LY_GRAPH_NONE;
    int64_t *idx = malloc((size_t)(n * n) * sizeof *idx);
    float *bias = malloc((size_t)(heads * n * n) * sizeof *bias);
    ly_graph_value out = LY_GRAPH_NONE;
    if (!idx || !bias) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    } else {
        ly_window_relative_index(ws, idx);
        for (int64_t hd = 0; hd < heads; hd++)
            for (int64_t k = 0; k < n * n; k++)
                bias[hd * n * n + k] = table[idx[k] * heads + hd];
        out = ly_build_constant(b, 4, bshape, bias);
    }
    free(idx);
    free(bias);
    return out;
}

ly_graph_value ly_build_shift_mask(ly_builder *b, int64_t hp, int64_t wp, int ws, int ss)
{
    int64_t windows = (hp / ws) * (wp / ws), n = (int64_t)ws * ws;
    int64_t shape[4] = {windows, 1, n, n};
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    float *m = malloc((size_t)(windows * n * n) * sizeof *m);
    if (!m) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
        return LY_GRAPH_NONE;
    }
    ly_window_shift_mask(hp, wp, ws, ss, m);
    ly_graph_value v = ly_build_constant(b, 4, shape, m);
    free(m);
    return v;
}

/* Window attention (§1.1) on the windows x [nW, N, c] (N = ws^2) of a map
 * whose shifted blocks add `mask` ([nW, 1, N, N]; NONE unshifted): q, k and v
 * linears (the qkv weight's (q | k | v) rows) writing [nW, N, heads, d];
 * fused, the sdpa slot tokens first with the bias and the mask; manual, the
 * graph's own (q * d^-0.5) @ k^T + bias + mask, softmax, @ v on heads first.
 * Then proj, `residual` added in its epilogue. */
static ly_graph_value window_attention(ly_builder *b, ly_graph_value x, int64_t windows,
                                       const ly_window_block *k, ly_graph_value mask,
                                       ly_graph_value residual)
{
    int64_t c = k->c, n = (int64_t)k->window * k->window, d = c / k->heads;
    int64_t wshape[2] = {3 * c, c}, three_c = 3 * c;
    const float *w = ly_build_take(b, "attn.qkv.weight", 2, wshape);
    const float *bias = ly_build_take(b, "attn.qkv.bias", 1, &three_c);
    ly_graph_value rel =
        ly_build_relative_bias(b, "attn.relative_position_bias_table", k->window, k->heads);
    if (!w || !bias || b->st != LY_OK) return LY_GRAPH_NONE;
    static const char *const names[3] = {"attn.q", "attn.k", "attn.v"};
    int64_t split[4] = {windows, n, k->heads, d}, one[2] = {c, c}, merged[3] = {windows, n, c};
    ly_graph_value part[3];
    for (int i = 0; i < 3; i++) {
        ly_graph_value in[3] = {x, ly_build_constant(b, 2, one, w + (size_t)(i * c * c)),
                                ly_build_constant(b, 1, &c, bias + (size_t)(i * c))};
        part[i] = ly_build_reshape(b, names[i],
                                   ly_build_node(b, LY_OP_LINEAR, names[i], 3, in, NULL), 4, split);
    }
    ly_graph_value o;
    if (k->fused) {
        ly_sdpa_params p = LY_SDPA_DEFAULTS; /* d^-0.5 on q */
        p.layout = LY_SDPA_BNHD;
        ly_graph_value in[5] = {part[0], part[1], part[2], rel, mask};
        o = ly_build_node(b, LY_OP_SDPA, "attn.sdpa", mask == LY_GRAPH_NONE ? 4 : 5, in, &p);
    } else {
        int64_t heads_first[4] = {0, 2, 1, 3};
        for (int i = 0; i < 3; i++)
            part[i] = ly_build_permute(b, names[i], part[i], 4, heads_first);
        ly_graph_value q = ly_build_binary(b, LY_OP_MUL, "attn.scale", part[0],
                                           ly_build_scalar(b, (float)(1.0 / sqrt((double)d))));
        ly_matmul_params t = {.transpose_b = 1};
        ly_graph_value qk[2] = {q, part[1]};
        ly_graph_value s = ly_build_node(b, LY_OP_MATMUL, "attn.scores", 2, qk, &t);
        s = ly_build_binary(b, LY_OP_ADD, "attn.bias", s, rel);
        if (mask != LY_GRAPH_NONE) s = ly_build_binary(b, LY_OP_ADD, "attn.mask", s, mask);
        ly_axis_params last = {.axis = -1};
        s = ly_build_node(b, LY_OP_SOFTMAX, "attn.softmax", 1, &s, &last);
        ly_matmul_params plain = LY_MATMUL_DEFAULTS;
        ly_graph_value pv[2] = {s, part[2]};
        o = ly_build_node(b, LY_OP_MATMUL, "attn.values", 2, pv, &plain);
        o = ly_build_permute(b, "attn.merge", o, 4, heads_first);
    }
    o = ly_build_reshape(b, "attn.merge", o, 3, merged);
    return ly_build_linear_fused(b, "attn.proj", o, c, c, LY_ACT_NONE, residual);
}

ly_token_order ly_window_block_order(const ly_window_block *k)
{
    return k->shift ? LY_TOKENS_SHIFTED : LY_TOKENS_WINDOWS;
}

/* Tokens x from order `from` into order `to`: windows [nW, ws * ws, c], or
 * the map [1, h, w, c]. A change of order through the shifted one is one
 * gather of rows from the tokens [h * w, c]: *gather (when asked) says at
 * which node, reading which rows of which table (node -1: no gather). */
typedef struct gather_at {
    int node;
    ly_graph_value table, rows;
} gather_at;

static ly_graph_value reorder(ly_builder *b, ly_graph_value x, const ly_window_block *k,
                              ly_token_order from, ly_token_order to, gather_at *gather)
{
    int64_t h = k->h, w = k->w, c = k->c, ws = k->window;
    int64_t windows[3] = {(h / ws) * (w / ws), ws * ws, c}, tokens[3] = {1, h * w, c},
            rows_c[2] = {h * w, c}, map[4] = {1, h, w, c};
    if (gather) *gather = (gather_at){.node = -1};
    if (from == to)
        return ly_build_reshape(b, "tokens", x, 3, to == LY_TOKENS_MAP ? tokens : windows);
    if (from == LY_TOKENS_MAP && to == LY_TOKENS_WINDOWS)
        return ly_build_window_partition(b, "windows", x, 1, h, w, c, k->window);
    if (from == LY_TOKENS_WINDOWS && to == LY_TOKENS_MAP)
        return ly_build_window_reverse(b, "windows", x, 1, h, w, c, k->window);
    /* the rest through the shifted order: one gather of rows */
    ly_graph_value rows = from == LY_TOKENS_MAP     ? k->order[0]
                          : to == LY_TOKENS_MAP     ? k->order[1]
                          : to == LY_TOKENS_SHIFTED ? k->order[2]
                                                    : k->order[3];
    const char *what = to == LY_TOKENS_SHIFTED ? "roll" : "unroll";
    ly_gather_params along = {.axis = 0};
    ly_graph_value in[2] = {ly_build_reshape(b, what, x, 2, rows_c), rows};
    if (gather && b->g)
        *gather = (gather_at){.node = ly_graph_node_count(b->g), .table = in[0], .rows = rows};
    x = ly_build_node(b, LY_OP_INDEX_SELECT, what, 2, in, &along);
    return ly_build_reshape(b, what, x, to == LY_TOKENS_MAP ? 4 : 3,
                            to == LY_TOKENS_MAP ? map : windows);
}

ly_graph_value ly_build_window_block(ly_builder *b, ly_graph_value x, const ly_window_block *k)
{
    int64_t windows = (k->h / k->window) * (k->w / k->window), c = k->c;
    ly_token_order own = ly_window_block_order(k);
    /* attention and MLP work token by token outside the windows' attention,
     * so the block runs in its own window order throughout */
    gather_at gather;
    x = reorder(b, x, k, k->from, own, &gather);
    int first = gather.node >= 0 ? gather.node : b->g ? ly_graph_node_count(b->g) : 0;
    ly_graph_value mask = k->shift ? k->mask : LY_GRAPH_NONE;
    ly_graph_value y = ly_build_layer_norm(b, "norm1", x, c, 1e-5);
    x = window_attention(b, y, windows, k, mask, x); /* + x */
    ly_graph_value m =
        ly_build_linear_fused(b, "mlp.fc1", ly_build_layer_norm(b, "norm2", x, c, 1e-5), k->hidden,
                              c, LY_ACT_GELU, LY_GRAPH_NONE);
    x = ly_build_linear_fused(b, "mlp.fc2", m, c, k->hidden, LY_ACT_NONE, x); /* + x */
    /* window by window from the gather into this order (its rows of the
     * previous order read whole) to fc2, the shift mask a window's slice
     * each: the graph may run them a few windows at a time, in cache */
    if (b->g && b->st == LY_OK) {
        ly_item_span span = {.first = first, .end = ly_graph_node_count(b->g)};
        if (mask != LY_GRAPH_NONE) span.sliced[span.n_sliced++] = mask;
        if (gather.node >= 0) {
            span.sliced[span.n_sliced++] = gather.rows;
            span.whole[span.n_whole++] = gather.table;
        }
        ly_build_fail(b, ly_graph_item_span(b->g, &span));
    }
    return k->to == LY_TOKENS_MAP ? reorder(b, x, k, own, LY_TOKENS_MAP, NULL) : x;
}
