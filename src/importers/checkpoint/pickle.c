/* SPDX-License-Identifier: MIT */
/*
 * Restricted unpickler (see pickle.h). The opcode semantics follow CPython's
 * Lib/pickle.py (_Unpickler); the allow-list follows torch/_weights_only_
 * unpickler.py, narrowed to what a state dict and LibreYOLO's metadata need.
 *
 * Resource use is bounded by the input: every opcode pushes at most one value,
 * memo indices must be smaller than the pickle (CPython's pickler numbers them
 * from 0, each BINPUT taking at least two bytes), MARK nesting is capped like
 * CPython's recursion limit, and the arena holding values has a budget
 * proportional to the pickle's size.
 */
#include "importers/checkpoint/pickle.h"

#include "core/core.h"

#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PICKLE_MAX_MARK_DEPTH 1000
#define PICKLE_MAX_MEMO ((size_t)1 << 24)
#define PICKLE_MAX_STRING ((size_t)1 << 26)
#define PICKLE_MAX_GLOBAL_NAME 256
#define PICKLE_ARENA_BLOCK ((size_t)64 << 10)
/* Values, containers and their growth slack stay well below this many bytes
 * per pickle byte; the constant term covers tiny pickles. */
#define PICKLE_ARENA_PER_BYTE 64
#define PICKLE_ARENA_BASE ((size_t)1 << 20)

/* ---- Allowed globals --------------------------------------------------------- */

typedef enum global_role {
    ROLE_ORDERED_DICT,
    ROLE_REBUILD_TENSOR,    /* _rebuild_tensor(storage, offset, size, stride) */
    ROLE_REBUILD_TENSOR_V2, /* ... requires_grad, backward_hooks[, metadata] */
    ROLE_REBUILD_TENSOR_V3, /* ... requires_grad, backward_hooks, dtype[, metadata] */
    ROLE_REBUILD_PARAMETER, /* _rebuild_parameter(data, requires_grad, hooks[, state]) */
    ROLE_REBUILD_FROM_TYPE, /* _rebuild_from_type_v2(func, type, args, state) */
    ROLE_TENSOR_CLASS,
    ROLE_SIZE,
    ROLE_DEVICE, /* torch.device('cuda', 0): kept as its type string */
    ROLE_STORAGE,
    ROLE_DTYPE
} global_role;

typedef struct allowed_global {
    const char *module;
    const char *name;
    global_role role;
    ly_elem elem;
} allowed_global;

static const allowed_global allowed_globals[] = {
    {"collections", "OrderedDict", ROLE_ORDERED_DICT, LY_ELEM_F32},
    {"torch._utils", "_rebuild_tensor", ROLE_REBUILD_TENSOR, LY_ELEM_F32},
    {"torch._utils", "_rebuild_tensor_v2", ROLE_REBUILD_TENSOR_V2, LY_ELEM_F32},
    {"torch._utils", "_rebuild_tensor_v3", ROLE_REBUILD_TENSOR_V3, LY_ELEM_F32},
    {"torch._utils", "_rebuild_parameter", ROLE_REBUILD_PARAMETER, LY_ELEM_F32},
    {"torch._utils", "_rebuild_parameter_with_state", ROLE_REBUILD_PARAMETER, LY_ELEM_F32},
    {"torch._tensor", "_rebuild_from_type_v2", ROLE_REBUILD_FROM_TYPE, LY_ELEM_F32},
    {"torch", "Tensor", ROLE_TENSOR_CLASS, LY_ELEM_F32},
    {"torch.nn.parameter", "Parameter", ROLE_TENSOR_CLASS, LY_ELEM_F32},
    {"torch", "Size", ROLE_SIZE, LY_ELEM_F32},
    {"torch", "device", ROLE_DEVICE, LY_ELEM_F32},
    {"torch", "FloatStorage", ROLE_STORAGE, LY_ELEM_F32},
    {"torch", "DoubleStorage", ROLE_STORAGE, LY_ELEM_F64},
    {"torch", "HalfStorage", ROLE_STORAGE, LY_ELEM_F16},
    {"torch", "BFloat16Storage", ROLE_STORAGE, LY_ELEM_BF16},
    {"torch", "LongStorage", ROLE_STORAGE, LY_ELEM_I64},
    {"torch", "IntStorage", ROLE_STORAGE, LY_ELEM_I32},
    {"torch", "ShortStorage", ROLE_STORAGE, LY_ELEM_I16},
    {"torch", "CharStorage", ROLE_STORAGE, LY_ELEM_I8},
    {"torch", "ByteStorage", ROLE_STORAGE, LY_ELEM_U8},
    {"torch", "BoolStorage", ROLE_STORAGE, LY_ELEM_BOOL},
    {"torch", "Float8_e4m3fnStorage", ROLE_STORAGE, LY_ELEM_F8E4M3},
    {"torch", "UntypedStorage", ROLE_STORAGE, LY_ELEM_UNTYPED},
    {"torch.storage", "UntypedStorage", ROLE_STORAGE, LY_ELEM_UNTYPED},
    {"torch", "float32", ROLE_DTYPE, LY_ELEM_F32},
    {"torch", "float", ROLE_DTYPE, LY_ELEM_F32},
    {"torch", "float64", ROLE_DTYPE, LY_ELEM_F64},
    {"torch", "double", ROLE_DTYPE, LY_ELEM_F64},
    {"torch", "float16", ROLE_DTYPE, LY_ELEM_F16},
    {"torch", "half", ROLE_DTYPE, LY_ELEM_F16},
    {"torch", "bfloat16", ROLE_DTYPE, LY_ELEM_BF16},
    {"torch", "int64", ROLE_DTYPE, LY_ELEM_I64},
    {"torch", "long", ROLE_DTYPE, LY_ELEM_I64},
    {"torch", "int32", ROLE_DTYPE, LY_ELEM_I32},
    {"torch", "int", ROLE_DTYPE, LY_ELEM_I32},
    {"torch", "int16", ROLE_DTYPE, LY_ELEM_I16},
    {"torch", "short", ROLE_DTYPE, LY_ELEM_I16},
    {"torch", "int8", ROLE_DTYPE, LY_ELEM_I8},
    {"torch", "uint8", ROLE_DTYPE, LY_ELEM_U8},
    {"torch", "float8_e4m3fn", ROLE_DTYPE, LY_ELEM_F8E4M3},
    {"torch", "bool", ROLE_DTYPE, LY_ELEM_BOOL},
};
#define ALLOWED_GLOBAL_COUNT ((int)(sizeof allowed_globals / sizeof allowed_globals[0]))

/* ---- Arena ------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

struct ly_pickle {
    arena_block *blocks;
    size_t allocated;
    size_t budget;
    bool over_budget; /* an allocation was refused by the budget, not by malloc */
};

void ly_pickle_free(ly_pickle *p)
{
    if (!p) return;
    arena_block *b = p->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(p);
}

/* NULL when out of memory or over budget; the caller reports it. */
static void *arena_alloc(ly_pickle *p, size_t n)
{
    const size_t align = alignof(max_align_t);
    if (n > p->budget) {
        p->over_budget = true;
        return NULL;
    }
    n = (n + align - 1) / align * align;
    arena_block *b = p->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > PICKLE_ARENA_BLOCK ? n : PICKLE_ARENA_BLOCK;
        if (cap > p->budget - p->allocated) {
            p->over_budget = true;
            return NULL;
        }
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = p->blocks;
        p->blocks = b;
        p->allocated += cap;
    }
    void *out = (unsigned char *)b->data + b->used;
    b->used += n;
    return out;
}

/* ---- Unpickler state --------------------------------------------------------- */

typedef struct unpickler {
    ly_pickle *p;
    const char *context;
    const uint8_t *bytes;
    size_t size;
    size_t pos;   /* next byte to read */
    size_t op_at; /* offset of the opcode being run, for messages */
    ly_pv **stack;
    size_t stack_len, stack_cap;
    size_t *marks;
    size_t mark_len, mark_cap;
    ly_pv **memo;
    size_t memo_cap, memo_count;
} unpickler;

static ly_status up_fail(const unpickler *u, ly_status status, const char *fmt, ...)
    LY_PRINTF(3, 4);

static ly_status up_fail(const unpickler *u, ly_status status, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ly_set_error(status, "%s: byte %zu: %s", u->context, u->op_at, what);
}

static ly_status up_no_memory(const unpickler *u)
{
    if (u->p->over_budget)
        return up_fail(u, LY_E_FORMAT,
                       "the pickle builds more than %zu bytes of values, far more than a "
                       "checkpoint of its size holds",
                       u->p->budget);
    return up_fail(u, LY_E_NO_MEMORY, "out of memory");
}

static ly_status up_need(const unpickler *u, size_t n, const char *what)
{
    if (u->size - u->pos < n)
        return up_fail(u, LY_E_FORMAT, "truncated pickle: %s needs %zu bytes, only %zu remain",
                       what, n, u->size - u->pos);
    return LY_OK;
}

static ly_pv *pv_new(unpickler *u, ly_pv_kind kind)
{
    ly_pv *v = arena_alloc(u->p, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->kind = kind;
    }
    return v;
}

static ly_status up_push(unpickler *u, ly_pv *v)
{
    if (!v) return up_no_memory(u);
    if (u->stack_len == u->stack_cap) {
        /* Each push consumes at least one input byte, so this stays < size. */
        size_t cap = u->stack_cap * 2;
        ly_pv **grown = realloc(u->stack, cap * sizeof *grown);
        if (!grown) return up_no_memory(u);
        u->stack = grown;
        u->stack_cap = cap;
    }
    u->stack[u->stack_len++] = v;
    return LY_OK;
}

/* The bottom of the current MARK frame: values below it are not ours. */
static size_t up_frame_base(const unpickler *u)
{
    return u->mark_len ? u->marks[u->mark_len - 1] : 0;
}

static ly_status up_pop(unpickler *u, ly_pv **out, const char *opname)
{
    if (u->stack_len <= up_frame_base(u))
        return up_fail(u, LY_E_FORMAT, "%s needs a value but the stack is empty", opname);
    *out = u->stack[--u->stack_len];
    return LY_OK;
}

static ly_status up_top(unpickler *u, ly_pv **out, const char *opname)
{
    if (u->stack_len <= up_frame_base(u))
        return up_fail(u, LY_E_FORMAT, "%s needs a value but the stack is empty", opname);
    *out = u->stack[u->stack_len - 1];
    return LY_OK;
}

/* Pop the last MARK; the values above it are stack[*base, stack_len). */
static ly_status up_pop_mark(unpickler *u, size_t *base, const char *opname)
{
    if (u->mark_len == 0) return up_fail(u, LY_E_FORMAT, "%s without a preceding MARK", opname);
    *base = u->marks[--u->mark_len];
    return LY_OK;
}

static ly_status seq_reserve(unpickler *u, ly_pv *seq, size_t extra)
{
    size_t *len = seq->kind == LY_PV_DICT ? &seq->u.dict.len : &seq->u.seq.len;
    size_t *cap = seq->kind == LY_PV_DICT ? &seq->u.dict.cap : &seq->u.seq.cap;
    ly_pv ***items = seq->kind == LY_PV_DICT ? &seq->u.dict.items : &seq->u.seq.items;
    size_t per = seq->kind == LY_PV_DICT ? 2 : 1;
    if (extra <= *cap - *len) return LY_OK;
    size_t want = *len + extra;
    size_t cap_new = *cap ? *cap : 4;
    while (cap_new < want) {
        if (cap_new > SIZE_MAX / 2 / per / sizeof(ly_pv *)) return up_no_memory(u);
        cap_new *= 2;
    }
    ly_pv **grown = arena_alloc(u->p, cap_new * per * sizeof *grown);
    if (!grown) return up_no_memory(u);
    if (*len) memcpy(grown, *items, *len * per * sizeof *grown);
    *items = grown;
    *cap = cap_new;
    return LY_OK;
}

static ly_pv *up_make_seq(unpickler *u, ly_pv_kind kind, ly_pv *const *items, size_t n)
{
    ly_pv *v = pv_new(u, kind);
    if (!v) return NULL;
    if (n && seq_reserve(u, v, n) != LY_OK) return NULL;
    if (n) memcpy(v->u.seq.items, items, n * sizeof *items);
    v->u.seq.len = n;
    return v;
}

/* ---- Readers ----------------------------------------------------------------- */

static uint64_t rd_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

static ly_status up_read_string(unpickler *u, size_t len_bytes, ly_pv_kind kind, const char *opname)
{
    ly_status st = up_need(u, len_bytes, opname);
    if (st != LY_OK) return st;
    uint64_t len = rd_le(u->bytes + u->pos, len_bytes);
    u->pos += len_bytes;
    if (len > PICKLE_MAX_STRING)
        return up_fail(u, LY_E_FORMAT, "%s of %llu bytes exceeds the %zu accepted", opname,
                       (unsigned long long)len, PICKLE_MAX_STRING);
    st = up_need(u, (size_t)len, opname);
    if (st != LY_OK) return st;
    const uint8_t *src = u->bytes + u->pos;
    if (kind == LY_PV_STR && !ly_utf8_valid(src, (size_t)len))
        return up_fail(u, LY_E_FORMAT, "%s is not valid UTF-8", opname);
    ly_pv *v = pv_new(u, kind);
    char *copy = arena_alloc(u->p, (size_t)len + 1);
    if (!v || !copy) return up_no_memory(u);
    if (len) memcpy(copy, src, (size_t)len);
    copy[len] = '\0';
    v->u.str.bytes = copy;
    v->u.str.len = (size_t)len;
    u->pos += (size_t)len;
    return up_push(u, v);
}

static ly_status up_push_int(unpickler *u, int64_t value)
{
    ly_pv *v = pv_new(u, LY_PV_INT);
    if (v) v->u.integer = value;
    return up_push(u, v);
}

/* LONG1/LONG4: little-endian two's complement of n bytes. */
static ly_status up_read_long(unpickler *u, size_t len_bytes, const char *opname)
{
    ly_status st = up_need(u, len_bytes, opname);
    if (st != LY_OK) return st;
    uint64_t n = rd_le(u->bytes + u->pos, len_bytes);
    u->pos += len_bytes;
    if (len_bytes == 4 && (n & 0x80000000u))
        return up_fail(u, LY_E_FORMAT, "%s has a negative byte count", opname);
    if (n > 8)
        return up_fail(u, LY_E_FORMAT, "%s integer of %llu bytes does not fit in 64 bits", opname,
                       (unsigned long long)n);
    st = up_need(u, (size_t)n, opname);
    if (st != LY_OK) return st;
    uint64_t raw = rd_le(u->bytes + u->pos, (size_t)n);
    u->pos += (size_t)n;
    int64_t value;
    if (n == 0) {
        value = 0;
    } else if (n < 8 && (raw >> (8 * n - 1)) & 1u) {
        /* Sign-extend without shifting a negative number. */
        value = (int64_t)(raw | ~(((uint64_t)1 << (8 * n)) - 1));
    } else {
        memcpy(&value, &raw, sizeof value);
    }
    return up_push_int(u, value);
}

/* ---- Globals ----------------------------------------------------------------- */

static ly_status up_global(unpickler *u, const char *module, size_t module_len, const char *name,
                           size_t name_len)
{
    for (int i = 0; i < ALLOWED_GLOBAL_COUNT; i++) {
        const allowed_global *g = &allowed_globals[i];
        if (strlen(g->module) == module_len && memcmp(g->module, module, module_len) == 0 &&
            strlen(g->name) == name_len && memcmp(g->name, name, name_len) == 0) {
            ly_pv *v = pv_new(u, LY_PV_GLOBAL);
            if (v) v->u.global = i;
            return up_push(u, v);
        }
    }
    char shown[2 * PICKLE_MAX_GLOBAL_NAME + 2];
    snprintf(shown, sizeof shown, "%.*s.%.*s", (int)module_len, module, (int)name_len, name);
    for (char *c = shown; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return up_fail(u, LY_E_FORMAT,
                   "global '%s' is not allowed in a checkpoint (weights_only): only "
                   "OrderedDict, tensor rebuild functions, storages and dtypes are",
                   shown);
}

/* GLOBAL: "module\nname\n". */
static ly_status up_read_global_line(unpickler *u, const char **text, size_t *len)
{
    size_t limit = u->size - u->pos;
    if (limit > PICKLE_MAX_GLOBAL_NAME + 1) limit = PICKLE_MAX_GLOBAL_NAME + 1;
    const uint8_t *start = u->bytes + u->pos;
    const uint8_t *nl = memchr(start, '\n', limit);
    if (!nl)
        return up_fail(u, LY_E_FORMAT,
                       "GLOBAL name is not ended by a newline within %d bytes (truncated pickle "
                       "or an overlong name)",
                       PICKLE_MAX_GLOBAL_NAME);
    *text = (const char *)start;
    *len = (size_t)(nl - start);
    u->pos += *len + 1;
    return LY_OK;
}

static const allowed_global *as_global(const ly_pv *v)
{
    return v && v->kind == LY_PV_GLOBAL ? &allowed_globals[v->u.global] : NULL;
}

/* ---- Calls (REDUCE) ---------------------------------------------------------- */

static const ly_pv *tuple_item(const ly_pv *t, size_t i)
{
    return i < t->u.seq.len ? t->u.seq.items[i] : NULL;
}

static ly_status up_int_tuple(unpickler *u, const ly_pv *v, const char *what, int64_t *out, int *n)
{
    if (!v || (v->kind != LY_PV_TUPLE && v->kind != LY_PV_LIST))
        return up_fail(u, LY_E_FORMAT, "tensor %s is %s, expected a tuple of ints", what,
                       ly_pv_a(v));
    if (v->u.seq.len > LY_MAX_DIMS)
        return up_fail(u, LY_E_FORMAT, "tensor %s has %zu dimensions, at most %d are supported",
                       what, v->u.seq.len, LY_MAX_DIMS);
    for (size_t i = 0; i < v->u.seq.len; i++) {
        const ly_pv *item = v->u.seq.items[i];
        if (item->kind != LY_PV_INT)
            return up_fail(u, LY_E_FORMAT, "tensor %s[%zu] is %s, expected an int", what, i,
                           ly_pv_a(item));
        if (item->u.integer < 0)
            return up_fail(u, LY_E_FORMAT, "tensor %s[%zu] is %lld, expected >= 0", what, i,
                           (long long)item->u.integer);
        out[i] = item->u.integer;
    }
    *n = (int)v->u.seq.len;
    return LY_OK;
}

static ly_status up_rebuild_tensor(unpickler *u, const allowed_global *g, const ly_pv *args,
                                   ly_pv **result)
{
    size_t min_args = g->role == ROLE_REBUILD_TENSOR      ? 4
                      : g->role == ROLE_REBUILD_TENSOR_V2 ? 6
                                                          : 7;
    size_t max_args = g->role == ROLE_REBUILD_TENSOR ? 4 : min_args + 1;
    size_t n = args->u.seq.len;
    if (n < min_args || n > max_args)
        return up_fail(u, LY_E_FORMAT, "%s takes %zu to %zu arguments, got %zu", g->name, min_args,
                       max_args, n);
    const ly_pv *storage = tuple_item(args, 0), *offset = tuple_item(args, 1);
    if (storage->kind != LY_PV_STORAGE)
        return up_fail(u, LY_E_FORMAT, "%s: argument 0 is %s, expected a storage", g->name,
                       ly_pv_a(storage));
    if (offset->kind != LY_PV_INT || offset->u.integer < 0)
        return up_fail(u, LY_E_FORMAT, "%s: storage offset is not an int >= 0", g->name);
    ly_pv_tensor *t = arena_alloc(u->p, sizeof *t);
    if (!t) return up_no_memory(u);
    memset(t, 0, sizeof *t);
    t->storage = storage;
    t->elem = storage->u.storage->elem;
    t->offset = offset->u.integer;
    int ndim_stride = 0;
    ly_status st = up_int_tuple(u, tuple_item(args, 2), "size", t->shape, &t->ndim);
    if (st == LY_OK) st = up_int_tuple(u, tuple_item(args, 3), "stride", t->stride, &ndim_stride);
    if (st != LY_OK) return st;
    if (ndim_stride != t->ndim)
        return up_fail(u, LY_E_FORMAT, "tensor size has %d dimensions but stride has %d", t->ndim,
                       ndim_stride);
    if (g->role == ROLE_REBUILD_TENSOR_V3) {
        const allowed_global *dtype = as_global(tuple_item(args, 6));
        if (!dtype || dtype->role != ROLE_DTYPE)
            return up_fail(u, LY_E_FORMAT, "%s: argument 6 is not a torch dtype", g->name);
        if (t->elem != LY_ELEM_UNTYPED && t->elem != dtype->elem)
            return up_fail(u, LY_E_FORMAT, "%s: dtype %s does not match its %s storage", g->name,
                           ly_elem_name(dtype->elem), ly_elem_name(t->elem));
        t->elem = dtype->elem;
    }
    if (t->elem == LY_ELEM_UNTYPED)
        return up_fail(u, LY_E_FORMAT,
                       "%s views an untyped storage without saying its dtype (only "
                       "_rebuild_tensor_v3 does)",
                       g->name);
    ly_pv *v = pv_new(u, LY_PV_TENSOR);
    if (!v) return up_no_memory(u);
    v->u.tensor = t;
    *result = v;
    return LY_OK;
}

static ly_status up_call(unpickler *u, const ly_pv *callable, const ly_pv *args, ly_pv **result,
                         int depth)
{
    const allowed_global *g = as_global(callable);
    if (!g)
        return up_fail(u, LY_E_FORMAT, "REDUCE calls %s, expected an allowed global",
                       ly_pv_a(callable));
    if (args->kind != LY_PV_TUPLE)
        return up_fail(u, LY_E_FORMAT, "REDUCE arguments of %s.%s are %s, expected a tuple",
                       g->module, g->name, ly_pv_a(args));
    size_t n = args->u.seq.len;
    switch (g->role) {
    case ROLE_ORDERED_DICT:
        if (n != 0)
            return up_fail(u, LY_E_FORMAT,
                           "collections.OrderedDict is called with %zu arguments; only an empty "
                           "OrderedDict() is supported",
                           n);
        *result = pv_new(u, LY_PV_DICT);
        return *result ? LY_OK : up_no_memory(u);
    case ROLE_REBUILD_TENSOR:
    case ROLE_REBUILD_TENSOR_V2:
    case ROLE_REBUILD_TENSOR_V3:
        return up_rebuild_tensor(u, g, args, result);
    case ROLE_REBUILD_PARAMETER: {
        const ly_pv *data = tuple_item(args, 0);
        if (n < 3 || n > 4 || data->kind != LY_PV_TENSOR)
            return up_fail(u, LY_E_FORMAT, "%s expects (tensor, requires_grad, hooks[, state])",
                           g->name);
        *result = (ly_pv *)data;
        return LY_OK;
    }
    case ROLE_REBUILD_FROM_TYPE: {
        /* (func, type, func_args, state): a tensor (sub)class rebuilt by func. */
        const allowed_global *type = n == 4 ? as_global(tuple_item(args, 1)) : NULL;
        const ly_pv *inner_args = n == 4 ? tuple_item(args, 2) : NULL;
        if (!type || type->role != ROLE_TENSOR_CLASS || depth > 0)
            return up_fail(u, LY_E_FORMAT,
                           "%s expects (rebuild function, torch.Tensor or Parameter, args, state)",
                           g->name);
        ly_status st = up_call(u, tuple_item(args, 0), inner_args, result, depth + 1);
        if (st != LY_OK) return st;
        if ((*result)->kind != LY_PV_TENSOR)
            return up_fail(u, LY_E_FORMAT, "%s did not rebuild a tensor", g->name);
        return LY_OK;
    }
    case ROLE_SIZE: {
        const ly_pv *dims = tuple_item(args, 0);
        if (n != 1 || dims->kind != LY_PV_TUPLE)
            return up_fail(u, LY_E_FORMAT, "torch.Size expects one tuple argument");
        *result = (ly_pv *)dims;
        return LY_OK;
    }
    case ROLE_DEVICE: {
        const ly_pv *type = tuple_item(args, 0);
        if (n < 1 || n > 2 || type->kind != LY_PV_STR)
            return up_fail(u, LY_E_FORMAT, "torch.device expects (type[, index])");
        *result = (ly_pv *)type;
        return LY_OK;
    }
    case ROLE_TENSOR_CLASS:
    case ROLE_STORAGE:
    case ROLE_DTYPE:
        break;
    }
    return up_fail(u, LY_E_FORMAT, "global '%s.%s' cannot be called in a checkpoint", g->module,
                   g->name);
}

/* BINPERSID: ('storage', storage_type, key, location, numel). */
static ly_status up_persistent_load(unpickler *u, const ly_pv *pid, ly_pv **result)
{
    const char *shape_msg = "persistent id is not ('storage', storage type, key, location, numel)";
    if (pid->kind != LY_PV_TUPLE || pid->u.seq.len != 5)
        return up_fail(u, LY_E_FORMAT, "%s", shape_msg);
    const ly_pv *tag = tuple_item(pid, 0), *type = tuple_item(pid, 1), *key = tuple_item(pid, 2);
    const ly_pv *location = tuple_item(pid, 3), *numel = tuple_item(pid, 4);
    if (tag->kind != LY_PV_STR || strcmp(tag->u.str.bytes, "storage") != 0)
        return up_fail(u, LY_E_FORMAT, "%s", shape_msg);
    const allowed_global *g = as_global(type);
    if (!g || g->role != ROLE_STORAGE)
        return up_fail(u, LY_E_FORMAT, "persistent id names %s, expected a torch storage type",
                       g ? g->name : ly_pv_a(type));
    if (key->kind != LY_PV_STR || key->u.str.len == 0 || strlen(key->u.str.bytes) != key->u.str.len)
        return up_fail(u, LY_E_FORMAT, "storage key is not a non-empty string");
    if (location->kind != LY_PV_STR)
        return up_fail(u, LY_E_FORMAT, "storage location is %s, expected a str", ly_pv_a(location));
    if (numel->kind != LY_PV_INT || numel->u.integer < 0 ||
        (uint64_t)numel->u.integer > (uint64_t)INT64_MAX / 8)
        return up_fail(u, LY_E_FORMAT, "storage '%s' has an invalid element count",
                       key->u.str.bytes);
    ly_pv_storage *s = arena_alloc(u->p, sizeof *s);
    ly_pv *v = pv_new(u, LY_PV_STORAGE);
    if (!s || !v) return up_no_memory(u);
    s->elem = g->elem;
    s->key = key->u.str.bytes;
    s->numel = numel->u.integer;
    v->u.storage = s;
    *result = v;
    return LY_OK;
}

/* ---- Opcode names (for messages about the ones we refuse) --------------------- */

static const char *opcode_name(uint8_t op)
{
    switch (op) {
    case '(':
        return "MARK";
    case '.':
        return "STOP";
    case '0':
        return "POP";
    case '1':
        return "POP_MARK";
    case '2':
        return "DUP";
    case 'F':
        return "FLOAT";
    case 'I':
        return "INT";
    case 'J':
        return "BININT";
    case 'K':
        return "BININT1";
    case 'L':
        return "LONG";
    case 'M':
        return "BININT2";
    case 'N':
        return "NONE";
    case 'P':
        return "PERSID";
    case 'Q':
        return "BINPERSID";
    case 'R':
        return "REDUCE";
    case 'S':
        return "STRING";
    case 'T':
        return "BINSTRING";
    case 'U':
        return "SHORT_BINSTRING";
    case 'V':
        return "UNICODE";
    case 'X':
        return "BINUNICODE";
    case 'a':
        return "APPEND";
    case 'b':
        return "BUILD";
    case 'c':
        return "GLOBAL";
    case 'd':
        return "DICT";
    case '}':
        return "EMPTY_DICT";
    case 'e':
        return "APPENDS";
    case 'g':
        return "GET";
    case 'h':
        return "BINGET";
    case 'i':
        return "INST";
    case 'j':
        return "LONG_BINGET";
    case 'l':
        return "LIST";
    case ']':
        return "EMPTY_LIST";
    case 'o':
        return "OBJ";
    case 'p':
        return "PUT";
    case 'q':
        return "BINPUT";
    case 'r':
        return "LONG_BINPUT";
    case 's':
        return "SETITEM";
    case 't':
        return "TUPLE";
    case ')':
        return "EMPTY_TUPLE";
    case 'u':
        return "SETITEMS";
    case 'G':
        return "BINFLOAT";
    case 0x80:
        return "PROTO";
    case 0x81:
        return "NEWOBJ";
    case 0x82:
        return "EXT1";
    case 0x83:
        return "EXT2";
    case 0x84:
        return "EXT4";
    case 0x85:
        return "TUPLE1";
    case 0x86:
        return "TUPLE2";
    case 0x87:
        return "TUPLE3";
    case 0x88:
        return "NEWTRUE";
    case 0x89:
        return "NEWFALSE";
    case 0x8a:
        return "LONG1";
    case 0x8b:
        return "LONG4";
    case 'B':
        return "BINBYTES";
    case 'C':
        return "SHORT_BINBYTES";
    case 0x8c:
        return "SHORT_BINUNICODE";
    case 0x8d:
        return "BINUNICODE8";
    case 0x8e:
        return "BINBYTES8";
    case 0x8f:
        return "EMPTY_SET";
    case 0x90:
        return "ADDITEMS";
    case 0x91:
        return "FROZENSET";
    case 0x92:
        return "NEWOBJ_EX";
    case 0x93:
        return "STACK_GLOBAL";
    case 0x94:
        return "MEMOIZE";
    case 0x95:
        return "FRAME";
    case 0x96:
        return "BYTEARRAY8";
    case 0x97:
        return "NEXT_BUFFER";
    case 0x98:
        return "READONLY_BUFFER";
    default:
        return NULL;
    }
}

/* ---- The machine ------------------------------------------------------------- */

static bool hashable(const ly_pv *v)
{
    return v->kind != LY_PV_LIST && v->kind != LY_PV_DICT;
}

static ly_status up_memo_put(unpickler *u, uint64_t index)
{
    ly_pv *top = NULL;
    ly_status st = up_top(u, &top, "PUT");
    if (st != LY_OK) return st;
    if (index >= u->size || index >= PICKLE_MAX_MEMO)
        return up_fail(u, LY_E_FORMAT,
                       "memo index %llu is larger than a pickle of %zu bytes can fill",
                       (unsigned long long)index, u->size);
    if (index >= u->memo_cap) {
        size_t cap = u->memo_cap ? u->memo_cap : 256;
        while (cap <= index)
            cap *= 2;
        ly_pv **grown = realloc(u->memo, cap * sizeof *grown);
        if (!grown) return up_no_memory(u);
        memset(grown + u->memo_cap, 0, (cap - u->memo_cap) * sizeof *grown);
        u->memo = grown;
        u->memo_cap = cap;
    }
    if (!u->memo[index]) u->memo_count++;
    u->memo[index] = top;
    return LY_OK;
}

static ly_status up_memo_get(unpickler *u, uint64_t index)
{
    if (index >= u->memo_cap || !u->memo[index])
        return up_fail(u, LY_E_FORMAT, "memo index %llu was never stored",
                       (unsigned long long)index);
    return up_push(u, u->memo[index]);
}

static ly_status up_step(unpickler *u, uint8_t op, bool *stop)
{
    ly_status st;
    ly_pv *a = NULL, *b = NULL, *c = NULL;
    size_t base = 0;
    const char *name = opcode_name(op);
    switch (op) {
    case 0x80: { /* PROTO */
        if ((st = up_need(u, 1, "PROTO")) != LY_OK) return st;
        uint8_t proto = u->bytes[u->pos++];
        if (proto < 2 || proto > 5)
            return up_fail(u, LY_E_FORMAT, "pickle protocol %u is not supported (2 to 5 are)",
                           (unsigned)proto);
        return LY_OK;
    }
    case 0x95: { /* FRAME: a length hint for buffered readers */
        if ((st = up_need(u, 8, "FRAME")) != LY_OK) return st;
        uint64_t len = rd_le(u->bytes + u->pos, 8);
        u->pos += 8;
        if (len > u->size - u->pos)
            return up_fail(u, LY_E_FORMAT, "FRAME of %llu bytes runs past the end of the pickle",
                           (unsigned long long)len);
        return LY_OK;
    }
    case '.':
        if (u->stack_len == 0) return up_fail(u, LY_E_FORMAT, "STOP with an empty stack");
        if (u->mark_len != 0) return up_fail(u, LY_E_FORMAT, "STOP inside an unclosed MARK");
        *stop = true;
        return LY_OK;
    case '}':
        return up_push(u, pv_new(u, LY_PV_DICT));
    case ']':
        return up_push(u, pv_new(u, LY_PV_LIST));
    case ')':
        return up_push(u, pv_new(u, LY_PV_TUPLE));
    case 'N':
        return up_push(u, pv_new(u, LY_PV_NONE));
    case 0x88:
    case 0x89:
        a = pv_new(u, LY_PV_BOOL);
        if (a) a->u.boolean = op == 0x88;
        return up_push(u, a);
    case '(':
        if (u->mark_len == PICKLE_MAX_MARK_DEPTH)
            return up_fail(u, LY_E_FORMAT, "MARKs nest deeper than %d levels",
                           PICKLE_MAX_MARK_DEPTH);
        if (u->mark_len == u->mark_cap) {
            size_t cap = u->mark_cap ? u->mark_cap * 2 : 32;
            size_t *grown = realloc(u->marks, cap * sizeof *grown);
            if (!grown) return up_no_memory(u);
            u->marks = grown;
            u->mark_cap = cap;
        }
        u->marks[u->mark_len++] = u->stack_len;
        return LY_OK;
    case '0':
        return up_pop(u, &a, "POP");
    case '1':
        if ((st = up_pop_mark(u, &base, "POP_MARK")) != LY_OK) return st;
        u->stack_len = base;
        return LY_OK;
    case '2':
        if ((st = up_top(u, &a, "DUP")) != LY_OK) return st;
        return up_push(u, a);
    case 'X':
        return up_read_string(u, 4, LY_PV_STR, "BINUNICODE");
    case 0x8c:
        return up_read_string(u, 1, LY_PV_STR, "SHORT_BINUNICODE");
    case 0x8d:
        return up_read_string(u, 8, LY_PV_STR, "BINUNICODE8");
    case 'C':
        return up_read_string(u, 1, LY_PV_BYTES, "SHORT_BINBYTES");
    case 'B':
        return up_read_string(u, 4, LY_PV_BYTES, "BINBYTES");
    case 0x8e:
        return up_read_string(u, 8, LY_PV_BYTES, "BINBYTES8");
    case 'K':
        if ((st = up_need(u, 1, "BININT1")) != LY_OK) return st;
        u->pos += 1;
        return up_push_int(u, u->bytes[u->pos - 1]);
    case 'M':
        if ((st = up_need(u, 2, "BININT2")) != LY_OK) return st;
        u->pos += 2;
        return up_push_int(u, (int64_t)rd_le(u->bytes + u->pos - 2, 2));
    case 'J': {
        if ((st = up_need(u, 4, "BININT")) != LY_OK) return st;
        uint32_t raw = (uint32_t)rd_le(u->bytes + u->pos, 4);
        u->pos += 4;
        int32_t value;
        memcpy(&value, &raw, sizeof value);
        return up_push_int(u, value);
    }
    case 0x8a:
        return up_read_long(u, 1, "LONG1");
    case 0x8b:
        return up_read_long(u, 4, "LONG4");
    case 'G': { /* BINFLOAT: big-endian IEEE double */
        if ((st = up_need(u, 8, "BINFLOAT")) != LY_OK) return st;
        uint64_t raw = 0;
        for (int i = 0; i < 8; i++)
            raw = raw << 8 | u->bytes[u->pos + (size_t)i];
        u->pos += 8;
        a = pv_new(u, LY_PV_FLOAT);
        if (a) memcpy(&a->u.real, &raw, sizeof raw);
        return up_push(u, a);
    }
    case 0x85:
    case 0x86:
    case 0x87: {
        size_t n = (size_t)(op - 0x84);
        if (u->stack_len - up_frame_base(u) < n)
            return up_fail(u, LY_E_FORMAT, "%s needs %zu values on the stack", name, n);
        u->stack_len -= n;
        return up_push(u, up_make_seq(u, LY_PV_TUPLE, u->stack + u->stack_len, n));
    }
    case 't':
        if ((st = up_pop_mark(u, &base, "TUPLE")) != LY_OK) return st;
        a = up_make_seq(u, LY_PV_TUPLE, u->stack + base, u->stack_len - base);
        u->stack_len = base;
        return up_push(u, a);
    case 'a':
        if ((st = up_pop(u, &b, "APPEND")) != LY_OK) return st;
        if ((st = up_top(u, &a, "APPEND")) != LY_OK) return st;
        if (a->kind != LY_PV_LIST)
            return up_fail(u, LY_E_FORMAT, "APPEND to %s, expected a list", ly_pv_a(a));
        if ((st = seq_reserve(u, a, 1)) != LY_OK) return st;
        a->u.seq.items[a->u.seq.len++] = b;
        return LY_OK;
    case 'e': {
        if ((st = up_pop_mark(u, &base, "APPENDS")) != LY_OK) return st;
        if (base == 0 || base <= up_frame_base(u))
            return up_fail(u, LY_E_FORMAT, "APPENDS has no list below its MARK");
        a = u->stack[base - 1];
        if (a->kind != LY_PV_LIST)
            return up_fail(u, LY_E_FORMAT, "APPENDS to %s, expected a list", ly_pv_a(a));
        size_t n = u->stack_len - base;
        if ((st = seq_reserve(u, a, n)) != LY_OK) return st;
        if (n) memcpy(a->u.seq.items + a->u.seq.len, u->stack + base, n * sizeof *u->stack);
        a->u.seq.len += n;
        u->stack_len = base;
        return LY_OK;
    }
    case 's':
    case 'u': {
        size_t n;
        if (op == 's') {
            if (u->stack_len - up_frame_base(u) < 3)
                return up_fail(u, LY_E_FORMAT, "SETITEM needs a dict, a key and a value");
            base = u->stack_len - 2;
        } else {
            if ((st = up_pop_mark(u, &base, "SETITEMS")) != LY_OK) return st;
            if (base == 0 || base <= up_frame_base(u))
                return up_fail(u, LY_E_FORMAT, "SETITEMS has no dict below its MARK");
        }
        n = u->stack_len - base;
        a = u->stack[base - 1];
        if (a->kind != LY_PV_DICT)
            return up_fail(u, LY_E_FORMAT, "%s on %s, expected a dict", name, ly_pv_a(a));
        if (n % 2) return up_fail(u, LY_E_FORMAT, "%s has a key without a value", name);
        for (size_t i = base; i < u->stack_len; i += 2)
            if (!hashable(u->stack[i]))
                return up_fail(u, LY_E_FORMAT, "%s with an unhashable %s key", name,
                               ly_pv_type_name(u->stack[i]));
        /* Keys are appended, not replaced: readers take the last of duplicates,
         * and the state-dict reader refuses them. */
        if ((st = seq_reserve(u, a, n / 2)) != LY_OK) return st;
        if (n) memcpy(a->u.dict.items + 2 * a->u.dict.len, u->stack + base, n * sizeof *u->stack);
        a->u.dict.len += n / 2;
        u->stack_len = base;
        return LY_OK;
    }
    case 'q':
        if ((st = up_need(u, 1, "BINPUT")) != LY_OK) return st;
        u->pos += 1;
        return up_memo_put(u, u->bytes[u->pos - 1]);
    case 'r':
        if ((st = up_need(u, 4, "LONG_BINPUT")) != LY_OK) return st;
        u->pos += 4;
        return up_memo_put(u, rd_le(u->bytes + u->pos - 4, 4));
    case 0x94:
        return up_memo_put(u, u->memo_count);
    case 'h':
        if ((st = up_need(u, 1, "BINGET")) != LY_OK) return st;
        u->pos += 1;
        return up_memo_get(u, u->bytes[u->pos - 1]);
    case 'j':
        if ((st = up_need(u, 4, "LONG_BINGET")) != LY_OK) return st;
        u->pos += 4;
        return up_memo_get(u, rd_le(u->bytes + u->pos - 4, 4));
    case 'c': {
        const char *module = NULL, *gname = NULL;
        size_t module_len = 0, gname_len = 0;
        if ((st = up_read_global_line(u, &module, &module_len)) != LY_OK) return st;
        if ((st = up_read_global_line(u, &gname, &gname_len)) != LY_OK) return st;
        return up_global(u, module, module_len, gname, gname_len);
    }
    case 0x93:
        if ((st = up_pop(u, &b, "STACK_GLOBAL")) != LY_OK) return st;
        if ((st = up_pop(u, &a, "STACK_GLOBAL")) != LY_OK) return st;
        if (a->kind != LY_PV_STR || b->kind != LY_PV_STR)
            return up_fail(u, LY_E_FORMAT, "STACK_GLOBAL needs two strings, got %s and %s",
                           ly_pv_a(a), ly_pv_a(b));
        return up_global(
            u, a->u.str.bytes,
            a->u.str.len > PICKLE_MAX_GLOBAL_NAME ? PICKLE_MAX_GLOBAL_NAME : a->u.str.len,
            b->u.str.bytes,
            b->u.str.len > PICKLE_MAX_GLOBAL_NAME ? PICKLE_MAX_GLOBAL_NAME : b->u.str.len);
    case 'R':
        if ((st = up_pop(u, &b, "REDUCE")) != LY_OK) return st;
        if ((st = up_pop(u, &a, "REDUCE")) != LY_OK) return st;
        if ((st = up_call(u, a, b, &c, 0)) != LY_OK) return st;
        return up_push(u, c);
    case 'b':
        if ((st = up_pop(u, &b, "BUILD")) != LY_OK) return st;
        if ((st = up_top(u, &a, "BUILD")) != LY_OK) return st;
        /* OrderedDict state (state_dict's _metadata) and tensor state carry
         * nothing the runtime uses; anything else would set attributes on an
         * object we do not have. */
        if (a->kind != LY_PV_DICT && a->kind != LY_PV_TENSOR)
            return up_fail(u, LY_E_FORMAT, "BUILD on %s is not allowed in a checkpoint",
                           ly_pv_a(a));
        return LY_OK;
    case 'Q':
        if ((st = up_pop(u, &a, "BINPERSID")) != LY_OK) return st;
        if ((st = up_persistent_load(u, a, &c)) != LY_OK) return st;
        return up_push(u, c);
    default:
        break;
    }
    if (name)
        return up_fail(u, LY_E_FORMAT,
                       "opcode %s (0x%02x) is not allowed in a checkpoint pickle (weights_only)",
                       name, (unsigned)op);
    return up_fail(u, LY_E_FORMAT, "unknown opcode 0x%02x", (unsigned)op);
}

ly_status ly_pickle_load(const uint8_t *bytes, size_t size, const char *context, ly_pickle **out,
                         const ly_pv **root)
{
    if (!out || !root || (!bytes && size))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pickle_load: NULL argument");
    *out = NULL;
    *root = NULL;
    ly_pickle *p = calloc(1, sizeof *p);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "%s: cannot allocate the unpickler", context);
    p->budget = size > (SIZE_MAX - PICKLE_ARENA_BASE) / PICKLE_ARENA_PER_BYTE
                    ? SIZE_MAX
                    : size * PICKLE_ARENA_PER_BYTE + PICKLE_ARENA_BASE;
    unpickler u = {.p = p, .context = context ? context : "pickle", .bytes = bytes, .size = size};
    /* Never NULL, so `stack + base` is defined even for an opcode that finds
     * the stack empty (a MARK then TUPLE pickle, `(t.`). */
    u.stack_cap = 64;
    u.stack = malloc(u.stack_cap * sizeof *u.stack);
    if (!u.stack) {
        ly_pickle_free(p);
        return ly_set_error(LY_E_NO_MEMORY, "%s: cannot allocate the unpickler", u.context);
    }
    ly_status st = LY_OK;
    bool stop = false;
    while (!stop) {
        u.op_at = u.pos;
        if (u.pos >= u.size) {
            st = up_fail(&u, LY_E_FORMAT, "truncated pickle: it ends without a STOP opcode");
            break;
        }
        uint8_t op = u.bytes[u.pos++];
        st = up_step(&u, op, &stop);
        if (st != LY_OK) break;
    }
    if (st == LY_OK) {
        *root = u.stack[u.stack_len - 1];
        *out = p;
    } else {
        ly_pickle_free(p);
    }
    free(u.stack);
    free(u.marks);
    free(u.memo);
    return st;
}

/* ---- Helpers for readers of the result ---------------------------------------- */

const char *ly_pv_type_name(const ly_pv *v)
{
    if (!v) return "missing value";
    switch (v->kind) {
    case LY_PV_NONE:
        return "None";
    case LY_PV_BOOL:
        return "bool";
    case LY_PV_INT:
        return "int";
    case LY_PV_FLOAT:
        return "float";
    case LY_PV_STR:
        return "str";
    case LY_PV_BYTES:
        return "bytes";
    case LY_PV_TUPLE:
        return "tuple";
    case LY_PV_LIST:
        return "list";
    case LY_PV_DICT:
        return "dict";
    case LY_PV_GLOBAL:
        return "global";
    case LY_PV_STORAGE:
        return "storage";
    case LY_PV_TENSOR:
        return "tensor";
    }
    return "?";
}

const char *ly_pv_a(const ly_pv *v)
{
    if (!v) return "a missing value";
    switch (v->kind) {
    case LY_PV_NONE:
        return "None";
    case LY_PV_BOOL:
        return "a bool";
    case LY_PV_INT:
        return "an int";
    case LY_PV_FLOAT:
        return "a float";
    case LY_PV_STR:
        return "a str";
    case LY_PV_BYTES:
        return "a bytes object";
    case LY_PV_TUPLE:
        return "a tuple";
    case LY_PV_LIST:
        return "a list";
    case LY_PV_DICT:
        return "a dict";
    case LY_PV_GLOBAL:
        return "a global";
    case LY_PV_STORAGE:
        return "a storage";
    case LY_PV_TENSOR:
        return "a tensor";
    }
    return "?";
}

const ly_pv *ly_pv_dict_get(const ly_pv *dict, const char *key)
{
    if (!dict || dict->kind != LY_PV_DICT || !key) return NULL;
    size_t key_len = strlen(key);
    for (size_t i = dict->u.dict.len; i-- > 0;) {
        const ly_pv *k = dict->u.dict.items[2 * i];
        if (k->kind == LY_PV_STR && k->u.str.len == key_len &&
            memcmp(k->u.str.bytes, key, key_len) == 0)
            return dict->u.dict.items[2 * i + 1];
    }
    return NULL;
}
