/* SPDX-License-Identifier: MIT */
/* Shifted-window machinery (windows.h). */
#include "models/common/windows.h"

#include "core/core.h"

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

/* torch.roll along one axis of extent n: out[i] = x[(i - shift) mod n]. */
static ly_graph_value roll_axis(ly_builder *b, const char *what, ly_graph_value x, int64_t axis,
                                int64_t n, int64_t shift)
{
    int64_t s = n > 0 ? ((shift % n) + n) % n : 0;
    if (s == 0) return x;
    ly_graph_value parts[2] = {ly_build_slice(b, what, x, axis, n - s, s),
                               ly_build_slice(b, what, x, axis, 0, n - s)};
    return ly_build_concat(b, what, 2, parts, axis);
}

ly_graph_value ly_build_roll(ly_builder *b, const char *what, ly_graph_value x, int64_t h,
                             int64_t w, int64_t shift)
{
    return roll_axis(b, what, roll_axis(b, what, x, 1, h, shift), 2, w, shift);
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
