/* SPDX-License-Identifier: MIT */
#include "ops/elementwise/broadcast.h"

#include "core/core.h"

#include <stdio.h>
#include <string.h>

ly_status ly_bcast_shape(const char *op, int n, const ly_tensor *const *in,
                         const char *const *names, ly_tensor *out)
{
    int ndim = 0;
    for (int i = 0; i < n; i++)
        if (in[i]->ndim > ndim) ndim = in[i]->ndim;
    *out = (ly_tensor){.ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        int64_t extent = 1;
        for (int i = 0; i < n; i++) {
            int k = d - (ndim - in[i]->ndim);
            int64_t e = k >= 0 ? in[i]->shape[k] : 1;
            if (e == 1) continue;
            if (extent != 1 && e != extent) {
                char a[128], b[128];
                int j = 0;
                while (j < n) {
                    int kj = d - (ndim - in[j]->ndim);
                    if (kj >= 0 && in[j]->shape[kj] == extent) break;
                    j++;
                }
                return ly_set_error(LY_E_SHAPE,
                                    "%s: %s %s and %s %s do not broadcast (dim %d from the end: "
                                    "%lld vs %lld; extents must be equal or 1)",
                                    op, names[j < n ? j : 0],
                                    ly_shape_str(in[j < n ? j : 0], a, sizeof a), names[i],
                                    ly_shape_str(in[i], b, sizeof b), ndim - d, (long long)extent,
                                    (long long)e);
            }
            extent = e;
        }
        out->shape[d] = extent; /* 0 meets only 1 or 0, as NumPy */
    }
    return LY_OK;
}

void ly_bcast_init(ly_bcast *b, int n, const ly_tensor *const *in, const ly_tensor *out)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->ndim = out->ndim;
    memcpy(b->shape, out->shape, sizeof b->shape);
    for (int i = 0; i < n; i++) {
        int64_t stride = 1;
        for (int d = out->ndim - 1; d >= 0; d--) {
            int k = d - (out->ndim - in[i]->ndim);
            int64_t e = k >= 0 ? in[i]->shape[k] : 1;
            b->stride[i][d] = e == 1 ? 0 : stride;
            stride *= e;
        }
    }
}

int64_t ly_bcast_rows(const ly_bcast *b, int64_t *inner)
{
    *inner = b->ndim > 0 ? b->shape[b->ndim - 1] : 1;
    int64_t rows = 1;
    for (int d = 0; d + 1 < b->ndim; d++)
        rows *= b->shape[d];
    return rows;
}

void ly_bcast_row(const ly_bcast *b, int64_t row, int64_t offset[LY_BCAST_MAX_INPUTS],
                  int64_t step[LY_BCAST_MAX_INPUTS])
{
    for (int i = 0; i < b->n; i++) {
        offset[i] = 0;
        step[i] = b->ndim > 0 ? b->stride[i][b->ndim - 1] : 0;
    }
    for (int d = b->ndim - 2; d >= 0; d--) {
        int64_t index = row % b->shape[d];
        row /= b->shape[d];
        for (int i = 0; i < b->n; i++)
            offset[i] += index * b->stride[i][d];
    }
}

void ly_bcast_coalesce(ly_bcast *b)
{
    int nd = 0;
    for (int d = 0; d < b->ndim; d++) {
        bool merge = nd > 0;
        for (int i = 0; merge && i < b->n; i++)
            merge = b->stride[i][nd - 1] == b->stride[i][d] * b->shape[d];
        if (merge) {
            b->shape[nd - 1] *= b->shape[d];
            for (int i = 0; i < b->n; i++)
                b->stride[i][nd - 1] = b->stride[i][d];
            continue;
        }
        b->shape[nd] = b->shape[d];
        for (int i = 0; i < b->n; i++)
            b->stride[i][nd] = b->stride[i][d];
        nd++;
    }
    b->ndim = nd;
}

void ly_bcast_walk_start(const ly_bcast *b, int64_t row, ly_bcast_walk *w)
{
    for (int i = 0; i < b->n; i++) {
        w->offset[i] = 0;
        w->step[i] = b->ndim > 0 ? b->stride[i][b->ndim - 1] : 0;
    }
    for (int d = b->ndim - 2; d >= 0; d--) {
        w->coord[d] = row % b->shape[d];
        row /= b->shape[d];
        for (int i = 0; i < b->n; i++)
            w->offset[i] += w->coord[d] * b->stride[i][d];
    }
}

void ly_bcast_walk_next(const ly_bcast *b, ly_bcast_walk *w)
{
    for (int d = b->ndim - 2; d >= 0; d--) {
        for (int i = 0; i < b->n; i++)
            w->offset[i] += b->stride[i][d];
        if (++w->coord[d] < b->shape[d]) return;
        for (int i = 0; i < b->n; i++)
            w->offset[i] -= b->shape[d] * b->stride[i][d];
        w->coord[d] = 0;
    }
}

void ly_bcast_offsets(const ly_bcast *b, int64_t index, int64_t offset[LY_BCAST_MAX_INPUTS])
{
    for (int i = 0; i < b->n; i++)
        offset[i] = 0;
    for (int d = b->ndim - 1; d >= 0; d--) {
        int64_t at = index % b->shape[d];
        index /= b->shape[d];
        for (int i = 0; i < b->n; i++)
            offset[i] += at * b->stride[i][d];
    }
}

int64_t ly_bcast_init_matrices(ly_bcast *b, const ly_tensor *x, const ly_tensor *w,
                               const ly_tensor *y)
{
    ly_tensor bx = *x, bw = *w, by = *y;
    bx.ndim -= 2, bw.ndim -= 2, by.ndim -= 2;
    const ly_tensor *pair[2] = {&bx, &bw};
    ly_bcast_init(b, 2, pair, &by);
    return ly_tensor_numel(&by);
}
