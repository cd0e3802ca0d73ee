/* SPDX-License-Identifier: MIT */
/*
 * .safetensors reader: an 8-byte little-endian header length N, N bytes of JSON
 *   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *    ..., "__metadata__": {"<key>": "<string>", ...}}
 * (optionally padded with spaces), then the tensor bytes; offsets are relative
 * to the end of the header.
 *
 * A header's cost is bounded by what the file can hold before anything is
 * built: the header is read member by member (json.h), each tensor entry
 * checked on its own (its dtype and shape need exactly the bytes of its
 * data_offsets, which lie in the data section) and kept as an extent of 24
 * bytes, the entries' bytes summed as they come (once they exceed the data
 * section two of them must overlap: the file is refused there); then the
 * extents must tile the data section. Only then is the header read again and
 * the tensors converted into the container.
 */
#include "importers/checkpoint/safetensors.h"

#include "core/checked.h"
#include "core/core.h"
#include "importers/checkpoint/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reference implementation's limit. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* The shortest a tensor entry's text can be: "":{"dtype":"U8","shape":[],
 * "data_offsets":[0,0]}. */
#define ST_MIN_ENTRY 48

typedef struct st_dtype {
    const char *name;
    ly_elem elem;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", LY_ELEM_F32},   {"F64", LY_ELEM_F64},        {"F16", LY_ELEM_F16},
    {"BF16", LY_ELEM_BF16}, {"I64", LY_ELEM_I64},        {"I32", LY_ELEM_I32},
    {"I16", LY_ELEM_I16},   {"I8", LY_ELEM_I8},          {"U8", LY_ELEM_U8},
    {"BOOL", LY_ELEM_BOOL}, {"F8_E4M3", LY_ELEM_F8E4M3},
};

/* One tensor entry, checked against the data section. */
typedef struct st_entry {
    const char *name;
    ly_elem elem;
    int ndim;
    int64_t dims[LY_MAX_DIMS];
    int64_t begin, end;
} st_entry;

/* Where one tensor's bytes lie in the data section, and where its name
 * starts in the header (decoded again for messages). */
typedef struct st_extent {
    int64_t begin, end;
    size_t name_at;
} st_extent;

static ly_status st_entry_read(ly_checkpoint *ck, const ly_json_doc *d, size_t node,
                               uint64_t data_size, st_entry *e)
{
    const char *name = ly_json_key(d, node);
    e->name = name;
    if (d->nodes[node].kind != LY_J_OBJECT)
        return ly_ck_fail(ck, LY_E_FORMAT, "safetensors entry '%s' is %s, expected an object", name,
                          ly_json_kind_name(d->nodes[node].kind));
    size_t dtype = LY_JSON_NONE, shape = LY_JSON_NONE, offsets = LY_JSON_NONE;
    for (size_t c = d->nodes[node].first_child; c != LY_JSON_NONE; c = d->nodes[c].next_sibling) {
        const char *field = ly_json_key(d, c);
        size_t *slot = strcmp(field, "dtype") == 0          ? &dtype
                       : strcmp(field, "shape") == 0        ? &shape
                       : strcmp(field, "data_offsets") == 0 ? &offsets
                                                            : NULL;
        if (!slot)
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': unknown field '%s'", name, field);
        if (*slot != LY_JSON_NONE)
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': field '%s' appears twice", name,
                              field);
        *slot = c;
    }
    if (dtype == LY_JSON_NONE || shape == LY_JSON_NONE || offsets == LY_JSON_NONE)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' lacks %s", name,
                          dtype == LY_JSON_NONE   ? "'dtype'"
                          : shape == LY_JSON_NONE ? "'shape'"
                                                  : "'data_offsets'");
    if (d->nodes[dtype].kind != LY_J_STRING)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'dtype' is %s, expected a string", name,
                          ly_json_kind_name(d->nodes[dtype].kind));
    const st_dtype *dt = NULL;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, ly_json_str(d, dtype)) == 0) dt = &st_dtypes[i];
    if (!dt)
        return ly_ck_fail(ck, LY_E_UNSUPPORTED,
                          "tensor '%s': dtype '%s' is not supported (F32, F64, F16, BF16, I64, "
                          "I32, I16, I8, U8, BOOL are)",
                          name, ly_json_str(d, dtype));
    e->elem = dt->elem;

    if (d->nodes[shape].kind != LY_J_ARRAY)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'shape' is %s, expected an array", name,
                          ly_json_kind_name(d->nodes[shape].kind));
    if (d->nodes[shape].child_count > LY_MAX_DIMS)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' has %zu dimensions, at most %d are supported", name,
                          d->nodes[shape].child_count, LY_MAX_DIMS);
    e->ndim = 0;
    for (size_t c = d->nodes[shape].first_child; c != LY_JSON_NONE; c = d->nodes[c].next_sibling) {
        if (!ly_json_uint(d, c, &e->dims[e->ndim]))
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': shape[%d] is not a non-negative integer", name,
                              e->ndim);
        e->ndim++;
    }

    int64_t range[2];
    int n = 0;
    if (d->nodes[offsets].kind != LY_J_ARRAY || d->nodes[offsets].child_count != 2)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'data_offsets' is not [begin, end]", name);
    for (size_t c = d->nodes[offsets].first_child; c != LY_JSON_NONE; c = d->nodes[c].next_sibling)
        if (!ly_json_uint(d, c, &range[n++]))
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': 'data_offsets' holds something other than "
                              "non-negative integers",
                              name);
    if (range[1] < range[0] || (uint64_t)range[1] > data_size)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] are outside the "
                          "%" PRIu64 " data bytes (truncated file?)",
                          name, range[0], range[1], data_size);
    int64_t bytes = range[1] - range[0], needed;
    bool fits = ly_checked_numel(e->dims, e->ndim, &needed) &&
                ly_checked_mul(needed, (int64_t)ly_elem_size(dt->elem), &needed) &&
                (uint64_t)needed <= data_size;
    if (!fits || needed != bytes)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s': data_offsets span %" PRId64 " bytes, but its shape and "
                          "dtype %s need %s",
                          name, bytes, dt->name,
                          !fits ? "more than the file holds" : "a different size");
    e->begin = range[0];
    e->end = range[1];
    return LY_OK;
}

static int extent_order(const void *a, const void *b)
{
    const st_extent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* As the reference implementation validates: sorted by offset, the tensors
 * tile the data section exactly, back to back, no byte shared, none left.
 * With `overlap_only` (the extents so far sum to more than the section: two
 * of them overlap) only an overlap is reported. */
static ly_status st_check_tiling(ly_checkpoint *ck, ly_json_doc *d, st_extent *extents,
                                 size_t count, uint64_t data_size, bool overlap_only)
{
    qsort(extents, count, sizeof *extents, extent_order);
    int64_t covered = 0;
    for (size_t i = 0; i < count; i++) {
        const st_extent *e = &extents[i];
        if (e->begin < covered) {
            const st_extent *p = &extents[i - 1];
            const char *name = ly_json_key_from(d, e->name_at, 0);
            const char *before = ly_json_key_from(d, p->name_at, strlen(name) + 1);
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] overlap "
                              "tensor '%s' [%" PRId64 ", %" PRId64 "]; each tensor must have "
                              "bytes of its own",
                              name, e->begin, e->end, before, p->begin, p->end);
        }
        if (e->begin > covered && !overlap_only)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': data_offsets begin at %" PRId64 ", but %s ends at "
                              "%" PRId64 ": %" PRId64 " bytes belong to no tensor (safetensors "
                              "stores tensors back to back)",
                              ly_json_key_from(d, e->name_at, 0), e->begin,
                              i ? "the tensor before it" : "the data section's start (0)", covered,
                              e->begin - covered);
        covered = e->end > covered ? e->end : covered;
    }
    if ((uint64_t)covered != data_size && !overlap_only)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "the data section holds %" PRIu64 " bytes, but the tensors end at "
                          "%" PRId64 "%s%s%s: the rest belongs to no tensor",
                          data_size, covered, count ? " (the last is '" : "",
                          count ? ly_json_key_from(d, extents[count - 1].name_at, 0) : "",
                          count ? "')" : "");
    return LY_OK;
}

/* `names` metadata: a JSON object {"0": "person", ...} or array ["person", ...]. */
static ly_status st_names(ly_checkpoint *ck, const char *text)
{
    ly_json_doc d;
    ly_status st = LY_OK;
    if (!ly_json_parse(&d, text, strlen(text))) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "metadata 'names' is not JSON (%s at character %zu); expected an object "
                        "of class index to name, or an array of names",
                        d.error, d.error_at);
        ly_json_free(&d);
        return st;
    }
    const ly_json_node *root = &d.nodes[0];
    if (root->kind == LY_J_ARRAY) {
        st = ly_ck_names_reserve(ck, root->child_count);
        size_t i = 0;
        for (size_t c = root->first_child; st == LY_OK && c != LY_JSON_NONE;
             c = d.nodes[c].next_sibling, i++) {
            if (d.nodes[c].kind != LY_J_STRING)
                st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names'[%zu] is %s, expected a string",
                                i, ly_json_kind_name(d.nodes[c].kind));
            else
                st = ly_ck_names_set(ck, i, ly_json_str(&d, c));
        }
    } else if (root->kind == LY_J_OBJECT) {
        size_t count = 0;
        for (size_t c = root->first_child; st == LY_OK && c != LY_JSON_NONE;
             c = d.nodes[c].next_sibling) {
            const char *key = ly_json_key(&d, c);
            char *end = NULL;
            unsigned long long index = strtoull(key, &end, 10);
            if (key[0] < '0' || key[0] > '9' || *end != '\0' || index >= LY_CK_MAX_CLASSES)
                st = ly_ck_fail(ck, LY_E_FORMAT,
                                "metadata 'names' has the key '%s', expected a class index", key);
            else if (d.nodes[c].kind != LY_J_STRING)
                st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names'[%s] is %s, expected a string",
                                key, ly_json_kind_name(d.nodes[c].kind));
            else if (index + 1 > count)
                count = (size_t)index + 1;
        }
        if (st == LY_OK) st = ly_ck_names_reserve(ck, count);
        for (size_t c = root->first_child; st == LY_OK && c != LY_JSON_NONE;
             c = d.nodes[c].next_sibling)
            st = ly_ck_names_set(ck, (size_t)strtoull(ly_json_key(&d, c), NULL, 10),
                                 ly_json_str(&d, c));
    } else {
        st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names' is %s, expected an object or array",
                        ly_json_kind_name(root->kind));
    }
    ly_json_free(&d);
    return st;
}

static ly_status st_metadata(ly_checkpoint *ck, const ly_json_doc *d, size_t node)
{
    if (d->nodes[node].kind != LY_J_OBJECT)
        return ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' is %s, expected an object",
                          ly_json_kind_name(d->nodes[node].kind));
    for (size_t c = d->nodes[node].first_child; c != LY_JSON_NONE; c = d->nodes[c].next_sibling) {
        const char *key = ly_json_key(d, c);
        if (d->nodes[c].kind != LY_J_STRING)
            return ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' entry '%s' is %s, expected a string",
                              key, ly_json_kind_name(d->nodes[c].kind));
        ly_status st = ly_ck_add_meta_string(ck, key, ly_json_str(d, c));
        if (st == LY_OK && strcmp(key, "names") == 0) st = st_names(ck, ly_json_str(d, c));
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

bool ly_safetensors_looks_like(const uint8_t *data, size_t size)
{
    return size >= 9 && data[8] == '{';
}

static ly_status st_json_error(ly_checkpoint *ck, const ly_json_doc *d)
{
    return ly_ck_fail(ck, LY_E_FORMAT, "safetensors header is not valid JSON: %s at byte %zu",
                      d->error, (size_t)8 + d->error_at);
}

/* The first pass: every entry checked and its extent kept, nothing built. */
static ly_status st_check(ly_checkpoint *ck, ly_json_doc *d, uint64_t data_size)
{
    /* Room for as many entries as the header can hold, each at least
     * "":{"dtype":"U8","shape":[],"data_offsets":[0,0]} long, up to the
     * container's cap: never moved while it fills. */
    size_t cap = d->len / ST_MIN_ENTRY + 1, count = 0;
    if (cap > LY_CK_MAX_TENSORS + 1) cap = LY_CK_MAX_TENSORS + 1;
    st_extent *extents = malloc(cap * sizeof *extents);
    if (!extents) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the tensor table");
    uint64_t declared = 0;
    bool seen_metadata = false;
    ly_status st = LY_OK;
    for (;;) {
        size_t node;
        bool end;
        if (!ly_json_object_next(d, &node, &end)) {
            st = st_json_error(ck, d);
            break;
        }
        if (end) break;
        if (strcmp(ly_json_key(d, node), "__metadata__") == 0) {
            if (seen_metadata) {
                st = ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' appears twice");
                break;
            }
            seen_metadata = true;
            continue;
        }
        st_entry e;
        st = st_entry_read(ck, d, node, data_size, &e);
        if (st != LY_OK) break;
        if (count == LY_CK_MAX_TENSORS) {
            st = ly_ck_fail(ck, LY_E_FORMAT,
                            "more than %zu tensor entries (at '%s'): no checkpoint this library "
                            "reads has as many",
                            LY_CK_MAX_TENSORS, e.name);
            break;
        }
        extents[count++] = (st_extent){e.begin, e.end, ly_json_key_at(d, node)};
        declared += (uint64_t)(e.end - e.begin); /* each <= data_size: no wrap */
        if (declared > data_size) {
            st = st_check_tiling(ck, d, extents, count, data_size, true);
            if (st != LY_OK) break;
        }
    }
    if (st == LY_OK) st = st_check_tiling(ck, d, extents, count, data_size, false);
    free(extents);
    return st;
}

/* The second pass: the metadata and the tensors into the container. */
static ly_status st_build(ly_checkpoint *ck, ly_json_doc *d, const uint8_t *payload,
                          uint64_t data_size)
{
    for (;;) {
        size_t node;
        bool end;
        if (!ly_json_object_next(d, &node, &end)) return st_json_error(ck, d);
        if (end) return LY_OK;
        ly_status st;
        if (strcmp(ly_json_key(d, node), "__metadata__") == 0) {
            st = st_metadata(ck, d, node);
        } else {
            st_entry e;
            st = st_entry_read(ck, d, node, data_size, &e);
            char what[300];
            snprintf(what, sizeof what, "its data_offsets range of tensor '%.200s'", e.name);
            if (st == LY_OK)
                st = ly_ck_add_tensor(ck, e.name, e.elem, payload + e.begin,
                                      (uint64_t)(e.end - e.begin), what, 0, e.ndim, e.dims, NULL);
        }
        if (st != LY_OK) return st;
    }
}

ly_status ly_safetensors_load(ly_checkpoint *ck, const uint8_t *data, size_t size)
{
    if (size < 8)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "truncated safetensors file: %zu bytes, no header length", size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | data[i];
    if (header_len > ST_MAX_HEADER)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "safetensors header length %" PRIu64 " is over the %" PRIu64
                          "-byte cap of the reference implementation: not a safetensors file",
                          header_len, ST_MAX_HEADER);
    if (header_len > size - 8)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "safetensors header length %" PRIu64 " exceeds the %zu bytes that follow "
                          "it: truncated or not a safetensors file",
                          header_len, size - 8);
    const uint8_t *payload = data + 8 + header_len;
    uint64_t payload_size = size - 8 - header_len;
    ly_json_doc d;
    ly_json_kind kind;
    ly_status st = LY_OK;
    if (!ly_json_object_begin(&d, (const char *)data + 8, (size_t)header_len, &kind))
        st = d.error ? st_json_error(ck, &d)
                     : ly_ck_fail(ck, LY_E_FORMAT, "safetensors header is %s, expected an object",
                                  ly_json_kind_name(kind));
    if (st == LY_OK) st = st_check(ck, &d, payload_size);
    if (st == LY_OK) {
        ly_json_object_rewind(&d);
        st = st_build(ck, &d, payload, payload_size);
    }
    ly_json_free(&d);
    return st;
}
