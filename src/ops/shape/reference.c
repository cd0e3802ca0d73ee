/* SPDX-License-Identifier: MIT */
/* References of the shape ops: copies, element by element in output order. */
#include "core/core.h"
#include "ops/ops_internal.h"
#include "ops/shape/shape.h"

#include <string.h>

static size_t bytes_of(const ly_tensor *t)
{
    return (size_t)ly_tensor_numel(t) * ly_dtype_size(t->dtype);
}

/* Every tensor is contiguous: a reshape is the same bytes. */
ly_status ly_ref_reshape(const ly_kernel_call *call)
{
    if (call->out[0]->data != call->in[0]->data)
        memmove(call->out[0]->data, call->in[0]->data, bytes_of(call->in[0]));
    return LY_OK;
}

/* y = x with axes permuted (y.shape[i] = x.shape[perm[i]]), walking y in order;
 * the innermost axis is a strided gather. */
/* dst[j] = src[j * step] for j < n, elements of `elem` bytes (typed copies for
 * the usual sizes: a byte-wise memcpy per element costs ~5x). */
static void gather(char *dst, const char *src, int64_t n, int64_t step, size_t elem)
{
    if (step == 1) { /* the innermost axis stays innermost: one run of bytes */
        memcpy(dst, src, (size_t)n * elem);
        return;
    }
    switch (elem) {
    case 4:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + 4 * j, src + 4 * j * step, 4);
        break;
    case 8:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + 8 * j, src + 8 * j * step, 8);
        break;
    case 2:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + 2 * j, src + 2 * j * step, 2);
        break;
    default:
        for (int64_t j = 0; j < n; j++)
            memcpy(dst + (size_t)j * elem, src + (size_t)j * step * elem, elem);
        break;
    }
}

typedef struct permute_job {
    const char *src;
    char *dst;
    const int64_t *shape;        /* y's */
    int64_t stride[LY_MAX_DIMS]; /* x's stride (elements) along each axis of y */
    int nd;
    size_t elem;
} permute_job;

/* Runs [begin, end) of y's innermost rows. */
static void permute_rows(void *ctx, int64_t begin, int64_t end)
{
    const permute_job *j = ctx;
    int nd = j->nd;
    int64_t inner = j->shape[nd - 1], index[LY_MAX_DIMS] = {0};
    for (int64_t i = nd - 2, r = begin; i >= 0; i--) {
        index[i] = r % j->shape[i];
        r /= j->shape[i];
    }
    char *dst = j->dst + (size_t)(begin * inner) * j->elem;
    for (int64_t row = begin; row < end; row++) {
        int64_t base = 0;
        for (int i = 0; i < nd - 1; i++)
            base += index[i] * j->stride[i];
        gather(dst, j->src + (size_t)base * j->elem, inner, j->stride[nd - 1], j->elem);
        dst += (size_t)inner * j->elem;
        for (int i = nd - 2; i >= 0; i--) {
            if (++index[i] < j->shape[i]) break;
            index[i] = 0;
        }
    }
}

ly_status ly_ref_permute(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    ly_tensor *y = call->out[0];
    const ly_permute_params *p = call->params;
    int nd = x->ndim;
    int64_t numel = ly_tensor_numel(y);
    size_t elem = ly_dtype_size(x->dtype);
    if (numel == 0) return LY_OK;
    if (nd == 0) {
        memcpy(y->data, x->data, elem);
        return LY_OK;
    }
    permute_job j = {.src = x->data, .dst = y->data, .shape = y->shape, .nd = nd, .elem = elem};
    int64_t in_stride[LY_MAX_DIMS];
    in_stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--)
        in_stride[d] = in_stride[d + 1] * x->shape[d + 1];
    for (int i = 0; i < nd; i++)
        j.stride[i] = in_stride[p->perm[i]];
    /* Split over threads only when the copy is big enough to pay for it (and
     * the other core's cache holds half of what a transformer wrote). */
    int64_t rows = numel / y->shape[nd - 1];
    int threads = (size_t)numel * elem >= (64u << 10) ? ly_threads_resolve(call->threads) : 1;
    ly_parallel_for(rows, 1, threads, permute_rows, &j);
    return LY_OK;
}

ly_status ly_ref_slice(const ly_kernel_call *call)
{
    const ly_tensor *x = call->in[0];
    ly_tensor *y = call->out[0];
    const ly_slice_params *p = call->params;
    int64_t axis = p->axis < 0 ? p->axis + x->ndim : p->axis;
    int64_t start, count;
    ly_slice_resolve(p, x->shape[axis], &start, &count);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; d++)
        outer *= x->shape[d];
    for (int64_t d = axis + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    size_t row = (size_t)inner * ly_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = y->data;
    if (ly_tensor_numel(y) == 0) return LY_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < count; k++) {
            memcpy(dst, src + (size_t)(o * x->shape[axis] + start + k * p->step) * row, row);
            dst += row;
        }
    return LY_OK;
}

ly_status ly_ref_concat(const ly_kernel_call *call)
{
    const ly_tensor *first = call->in[0];
    int ndim = first->ndim;
    int64_t axis = LY_PARAMS(call, ly_concat_params)->axis;
    if (axis < 0) axis += ndim;
    const ly_tensor *y = call->out[0];
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; d++)
        outer *= y->shape[d];
    for (int64_t d = axis + 1; d < ndim; d++)
        inner *= y->shape[d];
    /* a part of batch 1 among parts of batch B (a constant) repeats per image */
    int64_t per_image = axis > 0 && y->shape[0] ? outer / y->shape[0] : outer;
    char *out = y->data;
    size_t elem = ly_dtype_size(first->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < LY_KERNEL_MAX_INPUTS && call->in[i]; i++) {
            size_t chunk = (size_t)(call->in[i]->shape[axis] * inner) * elem;
            if (chunk == 0) continue;
            int64_t at = axis > 0 && call->in[i]->shape[0] != y->shape[0] ? o % per_image : o;
            const char *src = (const char *)call->in[i]->data + (size_t)at * chunk;
            /* one 4-byte element a chunk (interleaving, as a stack on a new last
             * axis): a library call per element cost ~3 ns, the move itself ~0 */
            if (chunk == 4) {
                uint32_t word;
                memcpy(&word, src, 4);
                memcpy(out, &word, 4);
            } else {
                memmove(out, src, chunk);
            }
            out += chunk;
        }
    }
    return LY_OK;
}
