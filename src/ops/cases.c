/* SPDX-License-Identifier: MIT */
/* Building parity cases (ops/cases.h). */
#include "ops/cases.h"

#include "core/core.h"
#include "ops/ops_internal.h"

#include <stdlib.h>
#include <string.h>

enum { ALIGN = 64 };

void *ly_check_alloc(size_t bytes, size_t offset, void **alloc)
{
    *alloc = malloc(ALIGN + LY_CHECK_GUARD_BYTES + offset + bytes + LY_CHECK_GUARD_BYTES);
    if (!*alloc) return NULL;
    uintptr_t p = ((uintptr_t)*alloc + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
    return (void *)(p + LY_CHECK_GUARD_BYTES + offset);
}

void ly_check_case_init(ly_check_case *c, int64_t index)
{
    memset(c, 0, sizeof *c);
    c->offset = (int)(index & 1);
}

void *ly_check_case_input(ly_check_case *c, int index, ly_dtype dtype, int ndim,
                          const int64_t *shape)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    size_t elem = ly_dtype_size(dtype), bytes = (size_t)(numel > 0 ? numel : 0) * elem;
    void *alloc;
    void *data = ly_check_alloc(bytes, (size_t)c->offset * elem, &alloc);
    if (!data) return NULL;
    memset(data, 0, bytes);
    free(c->alloc[index]);
    c->alloc[index] = alloc;
    ly_tensor_init(&c->in[index], data, dtype, ndim, shape);
    c->present[index] = true;
    return data;
}

ly_status ly_check_case_random(ly_check_case *c, int index, int ndim, const int64_t *shape,
                               float scale, uint64_t *seed)
{
    float *p = ly_check_case_input(c, index, LY_F32, ndim, shape);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "parity check: out of memory");
    ly_check_rng r = {.state = *seed};
    int64_t n = ly_tensor_numel(&c->in[index]);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(ly_check_rng_unit(&r) * 2.0 - 1.0) * scale;
    *seed = r.state;
    return LY_OK;
}

ly_status ly_check_case_normalish(ly_check_case *c, int index, int ndim, const int64_t *shape,
                                  uint64_t seed)
{
    float *p = ly_check_case_input(c, index, LY_F32, ndim, shape);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "benchmark case: out of memory");
    ly_check_rng r = {.state = seed};
    int64_t n = ly_tensor_numel(&c->in[index]);
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = ly_check_rng_next(&r);
        float s = (float)(u & 0xFFFF) + (float)((u >> 16) & 0xFFFF) + (float)((u >> 32) & 0xFFFF) +
                  (float)(u >> 48);
        p[i] = (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
    }
    return LY_OK;
}

void ly_check_case_params(ly_check_case *c, const void *params, size_t size)
{
    if (size > sizeof c->params) size = sizeof c->params;
    memcpy(c->params, params, size);
    c->has_params = true;
}

void ly_check_case_free(ly_check_case *c)
{
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        free(c->alloc[i]);
    memset(c, 0, sizeof *c);
}

void ly_check_case_call(const ly_check_case *c, ly_kernel_call *call, uint32_t *constant)
{
    ly_kernel_call_init(call);
    uint32_t bits = 0;
    for (int k = 0; k < LY_KERNEL_MAX_INPUTS; k++) {
        if (c->present[k]) call->in[k] = &c->in[k];
        if (c->constant[k]) bits |= 1u << k;
    }
    call->params = c->has_params ? c->params : NULL;
    if (constant) *constant = bits;
}

ly_status ly_check_case_named(ly_op op, bool full, const char *name, ly_check_case *c)
{
    const ly_op_def *def = ly_op_def_of(op);
    if (!def || !name || !c)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_check_case_named: bad argument");
    for (int64_t i = 0;; i++) {
        ly_check_case_init(c, i);
        ly_status st = def->cases->build(op, i, full, c);
        if (st == LY_OK && strcmp(c->name, name) == 0) return LY_OK;
        ly_check_case_free(c);
        if (st == LY_E_NOT_FOUND)
            return ly_set_error(LY_E_NOT_FOUND, "%s has no case named '%s'", def->name, name);
        if (st != LY_OK) return st;
    }
}
