/* SPDX-License-Identifier: MIT */
#include "core/core.h"
#include "libreyolo/io.h"

#include <stdlib.h>
#include <string.h>

/* 64 bytes: a cache line, and enough for any vector load the providers use. */
#define LY_TENSOR_ALIGN 64

ly_status ly_tensor_alloc(ly_tensor *t, ly_dtype dtype, int ndim, const int64_t *shape)
{
    if (!t) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tensor_alloc: tensor is NULL");
    *t = (ly_tensor){.data = NULL, .dtype = dtype, .ndim = 0};
    size_t itemsize = ly_dtype_size(dtype);
    if (itemsize == 0)
        return ly_set_error(LY_E_DTYPE, "ly_tensor_alloc: unknown dtype %d", (int)dtype);
    if (ndim < 0 || ndim > LY_MAX_DIMS)
        return ly_set_error(LY_E_SHAPE, "ly_tensor_alloc: ndim %d outside [0, %d]", ndim,
                            LY_MAX_DIMS);
    if (ndim > 0 && !shape)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tensor_alloc: shape is NULL for ndim %d",
                            ndim);
    /* Bytes stay below both INT64_MAX (element counts are int64) and SIZE_MAX
     * minus the rounding slack, so the round-up below cannot wrap. */
    const size_t limit = (uint64_t)INT64_MAX < (uint64_t)(SIZE_MAX - LY_TENSOR_ALIGN)
                             ? (size_t)INT64_MAX
                             : SIZE_MAX - LY_TENSOR_ALIGN;
    size_t bytes = itemsize;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ly_set_error(LY_E_SHAPE, "ly_tensor_alloc: dim %d is %lld, expected >= 0", i,
                                (long long)shape[i]);
        if (shape[i] == 0) continue; /* the other extents must still fit */
        if ((uint64_t)shape[i] > limit || bytes > limit / (size_t)shape[i])
            return ly_set_error(LY_E_SHAPE, "ly_tensor_alloc: shape is too large to allocate");
        bytes *= (size_t)shape[i];
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) bytes = 0;
    size_t rounded = (bytes + LY_TENSOR_ALIGN - 1) / LY_TENSOR_ALIGN * LY_TENSOR_ALIGN;
    if (rounded == 0) rounded = LY_TENSOR_ALIGN; /* empty tensors still get a valid pointer */
    void *data = aligned_alloc(LY_TENSOR_ALIGN, rounded);
    if (!data)
        return ly_set_error(LY_E_NO_MEMORY, "ly_tensor_alloc: cannot allocate %zu bytes", rounded);
    memset(data, 0, rounded);
    t->data = data;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    return LY_OK;
}

ly_status ly_tensor_free(ly_tensor *t)
{
    if (!t) return LY_OK;
    free(t->data);
    t->data = NULL;
    t->ndim = 0;
    return LY_OK;
}
