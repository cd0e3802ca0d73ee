/* SPDX-License-Identifier: MIT */
/*
 * References of the index ops. topk breaks ties by the lower index and ranks
 * NaN above every number, as torch.topk on the CPU; cumsum accumulates f32 in
 * double and rounds each prefix, as PyTorch's CPU kernel (acc_type double).
 */
#include "core/core.h"
#include "ops/ops_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* outer x extent x inner around `axis`. */
static void split(const ly_tensor *t, int64_t axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int64_t d = 0; d < axis; d++)
        *outer *= t->shape[d];
    for (int64_t d = axis + 1; d < t->ndim; d++)
        *inner *= t->shape[d];
}

static int64_t axis_of(int64_t axis, int ndim)
{
    return axis < 0 ? axis + ndim : axis;
}

static ly_status out_of_range(const char *op, int64_t value, int64_t position, int64_t extent)
{
    return ly_set_error(LY_E_INVALID_ARGUMENT,
                        "%s: index[%lld] is %lld, expected 0..%lld (the extent of the axis)", op,
                        (long long)position, (long long)value, (long long)extent - 1);
}

ly_status ly_ref_gather(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *index = call->in[1];
    ly_tensor *y = call->out[0];
    int nd = x->ndim;
    int64_t axis = axis_of(LY_PARAMS(call, ly_gather_params)->axis, nd);
    size_t elem = ly_dtype_size(x->dtype);
    int64_t stride[LY_MAX_DIMS], coord[LY_MAX_DIMS] = {0};
    stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * x->shape[d + 1];
    const int64_t *idx = index->data;
    int64_t n = ly_tensor_numel(index);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx[i];
        if (v < 0 || v >= x->shape[axis])
            return out_of_range(ly_op_name(LY_OP_GATHER), v, i, x->shape[axis]);
        int64_t src = 0;
        for (int d = 0; d < nd; d++)
            src += (d == axis ? v : coord[d]) * stride[d];
        memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)src * elem,
               elem);
        for (int d = nd - 1; d >= 0; d--) {
            if (++coord[d] < index->shape[d]) break;
            coord[d] = 0;
        }
    }
    return LY_OK;
}

ly_status ly_ref_index_select(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0], *index = call->in[1];
    int64_t axis = axis_of(LY_PARAMS(call, ly_gather_params)->axis, x->ndim);
    int64_t outer, inner;
    split(x, axis, &outer, &inner);
    size_t row = (size_t)inner * ly_dtype_size(x->dtype);
    const int64_t *idx = index->data;
    int64_t k = index->shape[0];
    for (int64_t j = 0; j < k; j++)
        if (idx[j] < 0 || idx[j] >= x->shape[axis])
            return out_of_range(ly_op_name(LY_OP_INDEX_SELECT), idx[j], j, x->shape[axis]);
    char *dst = call->out[0]->data;
    int64_t per = LY_PARAMS(call, ly_gather_params)->per_image;
    if (per > 0) { /* image b: its run of the index, on x[b] (or the one x) */
        for (int64_t b = 0; b < k / per; b++) {
            int64_t from = x->shape[0] == 1 ? 0 : b;
            for (int64_t j = 0; j < per; j++) {
                memcpy(dst,
                       (const char *)x->data +
                           (size_t)(from * x->shape[1] + idx[b * per + j]) * row,
                       row);
                dst += row;
            }
        }
        return LY_OK;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++) {
            memcpy(dst, (const char *)x->data + (size_t)(o * x->shape[axis] + idx[j]) * row, row);
            dst += row;
        }
    return LY_OK;
}

typedef struct ranked {
    float value;
    int64_t index;
} ranked;

/* Descending, NaN first, ties by index: the order of torch.topk(largest=True). */
static int before_largest(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    bool na = isnan(a->value), nb = isnan(b->value);
    if (na != nb) return na ? -1 : 1;
    if (!na && a->value != b->value) return a->value > b->value ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Ascending, NaN last, ties by index: torch.topk(largest=False). */
static int before_smallest(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    bool na = isnan(a->value), nb = isnan(b->value);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->value != b->value) return a->value < b->value ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

ly_status ly_ref_topk(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    const ly_topk_params *p = call->params;
    int64_t axis = axis_of(p->axis, x->ndim), extent = x->shape[axis];
    int64_t outer, inner;
    split(x, axis, &outer, &inner);
    if (p->k == 0 || outer * inner == 0) return LY_OK;
    ranked *row = malloc((size_t)extent * sizeof *row);
    if (!row)
        return ly_set_error(LY_E_NO_MEMORY, "topk: out of memory for %lld values",
                            (long long)extent);
    const float *src = x->data;
    float *values = call->out[0]->data;
    int64_t *indices = call->out[1]->data;
    int (*before)(const void *, const void *) = p->largest ? before_largest : before_smallest;
    /* a few of many (a row's best class, LQE's top 4): insertion into the k
     * kept so far, the same total order as sorting the row */
    bool select = p->k * 8 <= extent;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            if (select) {
                int64_t kept = 0;
                for (int64_t j = 0; j < extent; j++) {
                    ranked r = {src[(o * extent + j) * inner + i], j};
                    if (kept == p->k && before(&r, &row[kept - 1]) >= 0) continue;
                    int64_t at = kept < p->k ? kept++ : kept - 1;
                    for (; at > 0 && before(&r, &row[at - 1]) < 0; at--)
                        row[at] = row[at - 1];
                    row[at] = r;
                }
            } else {
                for (int64_t j = 0; j < extent; j++)
                    row[j] = (ranked){src[(o * extent + j) * inner + i], j};
                qsort(row, (size_t)extent, sizeof *row, before);
            }
            for (int64_t j = 0; j < p->k; j++) {
                values[(o * p->k + j) * inner + i] = row[j].value;
                indices[(o * p->k + j) * inner + i] = row[j].index;
            }
        }
    free(row);
    return LY_OK;
}

ly_status ly_ref_cumsum(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    int64_t axis = axis_of(LY_PARAMS(call, ly_axis_params)->axis, x->ndim);
    int64_t outer, inner, extent = x->shape[axis];
    split(x, axis, &outer, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t at = o * extent * inner + i;
            if (x->dtype == LY_I64) {
                const int64_t *src = x->data;
                int64_t *dst = call->out[0]->data;
                int64_t acc = 0;
                for (int64_t j = 0; j < extent; j++, at += inner)
                    dst[at] = acc = (int64_t)((uint64_t)acc + (uint64_t)src[at]);
            } else {
                const float *src = x->data;
                float *dst = call->out[0]->data;
                double acc = 0.0;
                for (int64_t j = 0; j < extent; j++, at += inner) {
                    acc += src[at];
                    dst[at] = (float)acc;
                }
            }
        }
    return LY_OK;
}
