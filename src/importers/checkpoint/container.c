/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint container (container.h): tensors converted out of a format's
 * bytes into f32/i64 C-contiguous buffers, LibreYOLO's metadata (yolo9.md
 * section 1.4) and class names, and the queries of
 * include/libreyolo/checkpoint.h.
 */
#include "importers/checkpoint/container.h"

#include "core/checked.h"
#include "core/core.h"
#include "libreyolo/io.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Storages and safetensors payloads are little-endian and read as is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint reader assumes a little-endian host"
#endif

#define CK_MAX_ELEMENTS (INT64_MAX / 8)

typedef struct ck_tensor {
    char *name;
    ly_tensor t;
    ly_elem stored; /* the element type in the file */
} ck_tensor;

typedef enum ck_meta_kind { CK_META_STR, CK_META_INT, CK_META_OTHER } ck_meta_kind;

typedef struct ck_meta {
    char *key;
    ck_meta_kind kind;
    char *str;
    int64_t integer;
    const char *type_phrase; /* static: "a str", "an int", "None", ... */
} ck_meta;

struct ly_checkpoint {
    char *context; /* "ly_checkpoint_open: <file>" */
    ck_tensor *tensors;
    size_t count, cap;
    const ck_tensor **sorted;
    ck_meta *meta;
    size_t meta_count, meta_cap;
    char **names;
    size_t names_count;
    bool has_names;
    /* Converted bytes so far and the most a file of this size may expand to:
     * stride-0 views and many tensors sharing one storage could otherwise
     * turn a small file into an allocation of any size. */
    uint64_t converted, converted_limit;
};

const char *ly_ck_context(const ly_checkpoint *ck)
{
    return ck->context;
}

ly_status ly_ck_fail(const ly_checkpoint *ck, ly_status status, const char *fmt, ...)
{
    char what[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ly_set_error(status, "%s: %s", ck->context, what);
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

/* ---- Tensors ------------------------------------------------------------------- */

static void shape_text(char *buf, size_t size, int ndim, const int64_t *v)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", v[i]);
    if (used < size) snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
}

/* `items` with room for one more than `len` (doubling), or NULL when out of
 * memory, in which case `items` is unchanged. */
static void *grow_array(void *items, size_t *cap, size_t len, size_t item_size)
{
    if (len < *cap) return items;
    size_t new_cap = *cap ? *cap * 2 : 64;
    if (new_cap > SIZE_MAX / item_size) return NULL;
    void *grown = realloc(items, new_cap * item_size);
    if (grown) *cap = new_cap;
    return grown;
}

ly_status ly_ck_add_tensor(ly_checkpoint *ck, const char *key, ly_elem elem, const uint8_t *base,
                           uint64_t base_bytes, const char *base_what, int64_t offset, int ndim,
                           const int64_t *shape, const int64_t *stride)
{
    if (strncmp(key, "module.", 7) == 0) key += 7;
    if (ck->count >= LY_CK_MAX_TENSORS)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "more than %zu tensors (at '%s'): no checkpoint this library reads has "
                          "as many",
                          LY_CK_MAX_TENSORS, key);
    char shape_buf[160], stride_buf[160];
    if (elem == LY_ELEM_UNTYPED || ly_elem_size(elem) == 0)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has no element type", key);
    if (ndim < 0 || ndim > LY_MAX_DIMS)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' has %d dimensions, at most %d are supported", key, ndim,
                          LY_MAX_DIMS);
    int64_t contiguous[LY_MAX_DIMS];
    int64_t numel = 1;
    bool empty = false;
    for (int d = ndim; d-- > 0;) {
        if (shape[d] < 0 || (stride && stride[d] < 0))
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has a negative size or stride", key);
        contiguous[d] = numel;
        if (shape[d] == 0)
            empty = true;
        else if (!ly_checked_mul(numel, shape[d], &numel) || numel > CK_MAX_ELEMENTS)
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has too many elements", key);
    }
    if (empty) numel = 0;
    if (!stride) stride = contiguous;
    if (offset < 0) return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has a negative offset", key);

    const size_t esize = ly_elem_size(elem);
    if (numel > 0) {
        /* The last element the view touches must lie inside the base. */
        int64_t last = offset, span;
        bool overflow = last > CK_MAX_ELEMENTS;
        for (int d = 0; d < ndim && !overflow; d++) {
            if (shape[d] <= 1 || stride[d] == 0) continue;
            overflow = !ly_checked_mul(shape[d] - 1, stride[d], &span) ||
                       !ly_checked_add(last, span, &last) || last > CK_MAX_ELEMENTS;
        }
        if (overflow || (uint64_t)last >= base_bytes / esize) {
            shape_text(shape_buf, sizeof shape_buf, ndim, shape);
            shape_text(stride_buf, sizeof stride_buf, ndim, stride);
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s' (offset %" PRId64 ", size %s, stride %s, %s) reaches "
                              "past the end of %s, which holds %" PRIu64 " bytes",
                              key, offset, shape_buf, stride_buf, ly_elem_name(elem), base_what,
                              base_bytes);
        }
    }

    bool to_float = ly_elem_is_float(elem);
    const size_t out_size = to_float ? sizeof(float) : sizeof(int64_t);
    if ((uint64_t)numel > (ck->converted_limit - ck->converted) / out_size)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' (%" PRId64 " elements) brings the converted tensors past "
                          "%" PRIu64 " bytes, more than a file of this size can hold (views "
                          "repeating storage elements?)",
                          key, numel, ck->converted_limit);
    ck->converted += (uint64_t)numel * out_size;
    ck_tensor *grown = grow_array(ck->tensors, &ck->cap, ck->count, sizeof *ck->tensors);
    if (!grown) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot grow the tensor table");
    ck->tensors = grown;
    ck_tensor *t = &ck->tensors[ck->count];
    *t = (ck_tensor){0};
    ly_status st = ly_tensor_alloc(&t->t, to_float ? LY_F32 : LY_I64, ndim, shape);
    if (st != LY_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ly_last_error());
        return ly_ck_fail(ck, st, "tensor '%s': %s", key, why);
    }
    t->stored = elem;
    t->name = dup_string(key);
    if (!t->name) {
        ly_tensor_free(&t->t);
        return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy the name of tensor '%s'", key);
    }
    ck->count++;
    if (numel == 0) return LY_OK;

    bool is_contiguous = true;
    for (int d = 0; d < ndim; d++)
        if (shape[d] > 1 && stride[d] != contiguous[d]) is_contiguous = false;
    uint8_t *out = t->t.data;
    if (is_contiguous || ndim == 0) {
        ly_elem_convert(out, base + (size_t)offset * esize, numel, 1, elem, to_float);
        return LY_OK;
    }
    /* Odometer over all but the last dimension; the last one is a strided run. */
    int64_t idx[LY_MAX_DIMS] = {0};
    const int inner = ndim - 1;
    const int64_t run = shape[inner];
    for (int64_t done = 0; done < numel; done += run) {
        int64_t at = offset;
        for (int d = 0; d < inner; d++)
            at += idx[d] * stride[d];
        ly_elem_convert(out, base + (size_t)at * esize, run, stride[inner], elem, to_float);
        out += (size_t)run * out_size;
        for (int d = inner; d-- > 0;) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
    return LY_OK;
}

/* ---- Metadata ------------------------------------------------------------------- */

/* Appended, never replaced in place: lookups take the last entry of a key, as
 * a Python dict keeps the last value, and a pickle with many keys costs O(n). */
static ck_meta *meta_slot(ly_checkpoint *ck, const char *key, ly_status *st)
{
    ck_meta *grown = grow_array(ck->meta, &ck->meta_cap, ck->meta_count, sizeof *ck->meta);
    if (!grown) {
        *st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot grow the metadata table");
        return NULL;
    }
    ck->meta = grown;
    ck_meta *m = &ck->meta[ck->meta_count];
    *m = (ck_meta){.key = dup_string(key)};
    if (!m->key) {
        *st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy metadata key '%s'", key);
        return NULL;
    }
    ck->meta_count++;
    *st = LY_OK;
    return m;
}

ly_status ly_ck_add_meta_string(ly_checkpoint *ck, const char *key, const char *value)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_STR;
    m->type_phrase = "a str";
    m->str = dup_string(value);
    if (!m->str) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy metadata '%s'", key);
    return LY_OK;
}

ly_status ly_ck_add_meta_int(ly_checkpoint *ck, const char *key, int64_t value)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_INT;
    m->type_phrase = "an int";
    m->integer = value;
    return LY_OK;
}

ly_status ly_ck_add_meta_other(ly_checkpoint *ck, const char *key, const char *type_phrase)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_OTHER;
    m->type_phrase = type_phrase;
    return LY_OK;
}

ly_status ly_ck_names_reserve(ly_checkpoint *ck, size_t count)
{
    if (count > LY_CK_MAX_CLASSES)
        return ly_ck_fail(ck, LY_E_FORMAT, "'names' has %zu classes, at most %zu are supported",
                          count, LY_CK_MAX_CLASSES);
    for (size_t i = 0; i < ck->names_count; i++)
        free(ck->names[i]);
    free(ck->names);
    ck->names = calloc(count ? count : 1, sizeof *ck->names);
    ck->names_count = 0;
    ck->has_names = false;
    if (!ck->names) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate %zu class names", count);
    ck->names_count = count;
    ck->has_names = true;
    return LY_OK;
}

ly_status ly_ck_names_set(ly_checkpoint *ck, size_t index, const char *name)
{
    if (index >= ck->names_count)
        return ly_ck_fail(ck, LY_E_INTERNAL, "class index %zu outside the %zu reserved", index,
                          ck->names_count);
    char *copy = dup_string(name);
    if (!copy) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy class name %zu", index);
    free(ck->names[index]);
    ck->names[index] = copy;
    return LY_OK;
}

/* ---- Index and close ------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const ck_tensor *const *)a)->name, (*(const ck_tensor *const *)b)->name);
}

ly_status ly_ck_finish(ly_checkpoint *ck)
{
    ck->sorted = malloc((ck->count ? ck->count : 1) * sizeof *ck->sorted);
    if (!ck->sorted) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the tensor index");
    for (size_t i = 0; i < ck->count; i++)
        ck->sorted[i] = &ck->tensors[i];
    qsort(ck->sorted, ck->count, sizeof *ck->sorted, cmp_tensor_name);
    for (size_t i = 1; i < ck->count; i++)
        if (strcmp(ck->sorted[i - 1]->name, ck->sorted[i]->name) == 0)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "two tensors are named '%s' (once a 'module.' prefix is removed)",
                              ck->sorted[i]->name);
    return LY_OK;
}

ly_checkpoint *ly_ck_create(const char *func, const char *name, size_t file_size)
{
    ly_checkpoint *ck = calloc(1, sizeof *ck);
    size_t len = strlen(func) + strlen(name) + 3;
    if (ck) ck->context = malloc(len);
    if (!ck || !ck->context) {
        free(ck);
        ly_set_error(LY_E_NO_MEMORY, "%s: %s: cannot allocate a checkpoint", func, name);
        return NULL;
    }
    snprintf(ck->context, len, "%s: %s", func, name);
    /* int8/bool storages widen 8x to i64; tied weights may repeat a storage. */
    ck->converted_limit = (uint64_t)file_size * 16 + ((uint64_t)256 << 20);
    return ck;
}

ly_status ly_checkpoint_close(ly_checkpoint *ck)
{
    if (!ck) return LY_OK;
    for (size_t i = 0; i < ck->count; i++) {
        free(ck->tensors[i].name);
        ly_tensor_free(&ck->tensors[i].t);
    }
    free(ck->tensors);
    free(ck->sorted);
    for (size_t i = 0; i < ck->meta_count; i++) {
        free(ck->meta[i].key);
        free(ck->meta[i].str);
    }
    free(ck->meta);
    for (size_t i = 0; i < ck->names_count; i++)
        free(ck->names[i]);
    free(ck->names);
    free(ck->context);
    free(ck);
    return LY_OK;
}

/* ---- Queries ------------------------------------------------------------------ */

ly_status ly_checkpoint_tensor_count(const ly_checkpoint *ck, size_t *count)
{
    if (!ck || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_tensor_count: %s is NULL",
                            !ck ? "checkpoint" : "count");
    *count = ck->count;
    return LY_OK;
}

ly_status ly_checkpoint_tensor_at(const ly_checkpoint *ck, size_t index, const char **name,
                                  ly_tensor *view)
{
    if (!ck)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_tensor_at: checkpoint is NULL");
    if (index >= ck->count)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_checkpoint_tensor_at: index %zu is out of range (%zu tensors)",
                            index, ck->count);
    if (name) *name = ck->tensors[index].name;
    if (view) *view = ck->tensors[index].t;
    return LY_OK;
}

/* The tensor named `name` (binary search of the sorted table), or NULL with
 * LY_E_NOT_FOUND set. */
static const ck_tensor *find_tensor(const ly_checkpoint *ck, const char *name)
{
    size_t lo = 0, hi = ck->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->sorted[mid]->name, name);
        if (c == 0) return ck->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    ly_set_error(LY_E_NOT_FOUND, "%s: no tensor named '%s'", ck->context, name);
    return NULL;
}

ly_status ly_checkpoint_find(const ly_checkpoint *ck, const char *name, ly_tensor *view)
{
    if (!ck || !name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_find: %s is NULL",
                            !ck ? "checkpoint" : "name");
    const ck_tensor *t = find_tensor(ck, name);
    if (!t) return LY_E_NOT_FOUND;
    if (view) *view = t->t;
    return LY_OK;
}

ly_status ly_checkpoint_stored_dtype(const ly_checkpoint *ck, const char *name, const char **dtype)
{
    if (!ck || !name || !dtype)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_stored_dtype: NULL argument");
    const ck_tensor *t = find_tensor(ck, name);
    if (!t) return LY_E_NOT_FOUND;
    *dtype = ly_elem_name(t->stored);
    return LY_OK;
}

static const ck_meta *meta_find(const ly_checkpoint *ck, const char *key)
{
    for (size_t i = ck->meta_count; i-- > 0;)
        if (strcmp(ck->meta[i].key, key) == 0) return &ck->meta[i];
    return NULL;
}

ly_status ly_checkpoint_meta_string(const ly_checkpoint *ck, const char *key, const char **value)
{
    if (!ck || !key || !value)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_meta_string: NULL argument");
    const ck_meta *m = meta_find(ck, key);
    if (!m) return ly_set_error(LY_E_NOT_FOUND, "%s: no metadata '%s'", ck->context, key);
    if (m->kind != CK_META_STR)
        return ly_set_error(LY_E_DTYPE, "%s: metadata '%s' is %s, not a str", ck->context, key,
                            m->type_phrase);
    *value = m->str;
    return LY_OK;
}

/* A whole decimal integer, optionally signed, that fits in int64. */
static bool parse_int64(const char *s, int64_t *out)
{
    bool negative = *s == '-';
    if (*s == '-' || *s == '+') s++;
    if (*s < '0' || *s > '9') return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > ((uint64_t)INT64_MAX + 1 - (uint64_t)(*s - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (*s != '\0' || (!negative && v > (uint64_t)INT64_MAX)) return false;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

ly_status ly_checkpoint_meta_int(const ly_checkpoint *ck, const char *key, int64_t *value)
{
    if (!ck || !key || !value)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_meta_int: NULL argument");
    const ck_meta *m = meta_find(ck, key);
    if (!m) return ly_set_error(LY_E_NOT_FOUND, "%s: no metadata '%s'", ck->context, key);
    if (m->kind == CK_META_INT) {
        *value = m->integer;
        return LY_OK;
    }
    /* safetensors metadata holds only strings: "80" is nc 80 there. */
    if (m->kind == CK_META_STR && parse_int64(m->str, value)) return LY_OK;
    return ly_set_error(LY_E_DTYPE, "%s: metadata '%s' is %s, not an integer", ck->context, key,
                        m->type_phrase);
}

ly_status ly_checkpoint_class_names(const ly_checkpoint *ck, size_t *count,
                                    const char *const **names)
{
    if (!ck || !count || !names)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_class_names: NULL argument");
    if (!ck->has_names) return ly_set_error(LY_E_NOT_FOUND, "%s: no 'names' metadata", ck->context);
    *count = ck->names_count;
    *names = (const char *const *)ck->names;
    return LY_OK;
}

ly_status ly_checkpoint_subset(const ly_checkpoint *ck, bool (*keep)(const char *key, void *user),
                               void *user, ly_checkpoint **out)
{
    *out = NULL;
    const char *name = strchr(ck->context, ':') ? strchr(ck->context, ':') + 2 : ck->context;
    ly_checkpoint *sub = ly_ck_create("ly_checkpoint_subset", name, 0);
    if (!sub) return LY_E_NO_MEMORY;
    sub->converted_limit = ck->converted; /* no more than the original holds */
    ly_status st = LY_OK;
    for (size_t i = 0; st == LY_OK && i < ck->count; i++) {
        const ck_tensor *t = &ck->tensors[i];
        if (!keep(t->name, user)) continue;
        ly_elem elem = t->t.dtype == LY_I64 ? LY_ELEM_I64 : LY_ELEM_F32;
        uint64_t bytes = (uint64_t)ly_tensor_numel(&t->t) * (elem == LY_ELEM_I64 ? 8 : 4);
        st = ly_ck_add_tensor(sub, t->name, elem, t->t.data, bytes, t->name, 0, t->t.ndim,
                              t->t.shape, NULL);
    }
    if (st == LY_OK) st = ly_ck_finish(sub);
    if (st != LY_OK) {
        ly_checkpoint_close(sub);
        return st;
    }
    *out = sub;
    return LY_OK;
}
