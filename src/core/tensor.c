/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <stdio.h>

size_t ly_dtype_size(ly_dtype dtype)
{
    switch (dtype) {
    case LY_F32:
        return 4;
    case LY_F64:
        return 8;
    case LY_I8:
        return 1;
    case LY_U8:
        return 1;
    case LY_I32:
        return 4;
    case LY_I64:
        return 8;
    case LY_F8E4M3:
        return 1;
    case LY_F16:
        return 2;
    }
    return 0;
}

const char *ly_dtype_name(ly_dtype dtype)
{
    switch (dtype) {
    case LY_F32:
        return "f32";
    case LY_F64:
        return "f64";
    case LY_I8:
        return "i8";
    case LY_U8:
        return "u8";
    case LY_I32:
        return "i32";
    case LY_I64:
        return "i64";
    case LY_F8E4M3:
        return "f8e4m3";
    case LY_F16:
        return "f16";
    }
    return "?";
}

ly_status ly_tensor_init(ly_tensor *t, void *data, ly_dtype dtype, int ndim, const int64_t *shape)
{
    if (!t) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tensor_init: tensor is NULL");
    if (ly_dtype_size(dtype) == 0)
        return ly_set_error(LY_E_DTYPE, "ly_tensor_init: unknown dtype %d", (int)dtype);
    if (ndim < 0 || ndim > LY_MAX_DIMS)
        return ly_set_error(LY_E_SHAPE, "ly_tensor_init: ndim %d outside [0, %d]", ndim,
                            LY_MAX_DIMS);
    if (ndim > 0 && !shape)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tensor_init: shape is NULL for ndim %d",
                            ndim);
    *t = (ly_tensor){.data = data, .dtype = dtype, .ndim = ndim};
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ly_set_error(LY_E_SHAPE, "ly_tensor_init: dim %d is %lld, expected >= 0", i,
                                (long long)shape[i]);
        t->shape[i] = shape[i];
    }
    return LY_OK;
}

const char *ly_shape_str(const ly_tensor *t, char *buf, size_t size)
{
    size_t used = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; t && i < t->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)t->shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static _Thread_local int shapes_only;

void ly_shapes_only_begin(void)
{
    shapes_only++;
}

void ly_shapes_only_end(void)
{
    if (shapes_only > 0) shapes_only--;
}

/* `what` is "op: name" (name may be NULL: op alone), put together only when
 * there is something to say: validation runs on every call. */
#define WHAT "%s%s%s"
#define WHAT_ARGS(op, name) (op), (name) ? ": " : "", (name) ? (name) : ""

static ly_status check_tensor(const ly_tensor *t, const char *op, const char *name, ly_dtype dtype)
{
    if (!t)
        return ly_set_error(LY_E_INVALID_ARGUMENT, WHAT ": tensor is NULL", WHAT_ARGS(op, name));
    if (t->ndim < 0 || t->ndim > LY_MAX_DIMS)
        return ly_set_error(LY_E_SHAPE, WHAT ": ndim %d outside [0, %d]", WHAT_ARGS(op, name),
                            t->ndim, LY_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return ly_set_error(LY_E_SHAPE, WHAT ": dim %d is %lld, expected >= 0",
                                WHAT_ARGS(op, name), i, (long long)t->shape[i]);
        if (t->shape[i] > 0 && numel > INT64_MAX / 8 / t->shape[i])
            return ly_set_error(LY_E_SHAPE, WHAT ": shape overflows the address space",
                                WHAT_ARGS(op, name));
        numel *= t->shape[i];
    }
    if (t->dtype != dtype)
        return ly_set_error(LY_E_DTYPE, WHAT ": dtype %s, expected %s", WHAT_ARGS(op, name),
                            ly_dtype_name(t->dtype), ly_dtype_name(dtype));
    if (numel > 0 && !t->data && !shapes_only)
        return ly_set_error(LY_E_INVALID_ARGUMENT, WHAT ": data is NULL for %lld elements",
                            WHAT_ARGS(op, name), (long long)numel);
    return LY_OK;
}

ly_status ly_check_tensor(const ly_tensor *t, const char *what, ly_dtype dtype)
{
    return check_tensor(t, what, NULL, dtype);
}

ly_status ly_check_operand(const ly_tensor *t, const char *op, const char *name, ly_dtype dtype)
{
    return check_tensor(t, op, name, dtype);
}

ly_status ly_check_same_shape(const ly_tensor *a, const char *what_a, const ly_tensor *b,
                              const char *what_b)
{
    bool same = a && b && a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++)
        same = a->shape[i] == b->shape[i];
    if (same) return LY_OK;
    char sa[128], sb[128];
    return ly_set_error(LY_E_SHAPE, "%s has shape %s, expected the shape of %s %s", what_b,
                        ly_shape_str(b, sb, sizeof sb), what_a, ly_shape_str(a, sa, sizeof sa));
}
