/* SPDX-License-Identifier: MIT */
/* Queries on a `.pte` program model. */
#include "core/core.h"
#include "pte/pte_internal.h"

#include <string.h>

typedef struct scalar_info {
    int type;
    size_t size;
    const char *name;
} scalar_info;

static const scalar_info scalars[] = {
    {LY_PTE_BYTE, 1, "BYTE"},
    {LY_PTE_CHAR, 1, "CHAR"},
    {LY_PTE_SHORT, 2, "SHORT"},
    {LY_PTE_INT, 4, "INT"},
    {LY_PTE_LONG, 8, "LONG"},
    {LY_PTE_HALF, 2, "HALF"},
    {LY_PTE_FLOAT, 4, "FLOAT"},
    {LY_PTE_DOUBLE, 8, "DOUBLE"},
    {LY_PTE_BOOL, 1, "BOOL"},
    {LY_PTE_QINT8, 1, "QINT8"},
    {LY_PTE_QUINT8, 1, "QUINT8"},
    {LY_PTE_QINT32, 4, "QINT32"},
    {LY_PTE_BFLOAT16, 2, "BFLOAT16"},
    {LY_PTE_QUINT4X2, 1, "QUINT4X2"},
    {LY_PTE_QUINT2X4, 1, "QUINT2X4"},
    {LY_PTE_BITS16, 2, "BITS16"},
    {LY_PTE_FLOAT8E5M2, 1, "FLOAT8E5M2"},
    {LY_PTE_FLOAT8E4M3FN, 1, "FLOAT8E4M3FN"},
    {LY_PTE_FLOAT8E5M2FNUZ, 1, "FLOAT8E5M2FNUZ"},
    {LY_PTE_FLOAT8E4M3FNUZ, 1, "FLOAT8E4M3FNUZ"},
    {LY_PTE_UINT16, 2, "UINT16"},
    {LY_PTE_UINT32, 4, "UINT32"},
    {LY_PTE_UINT64, 8, "UINT64"},
};

static const scalar_info *scalar_find(int type)
{
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        if (scalars[i].type == type) return &scalars[i];
    return NULL;
}

size_t ly_pte_scalar_size(int scalar_type)
{
    const scalar_info *s = scalar_find(scalar_type);
    return s ? s->size : 0;
}

const char *ly_pte_scalar_name(int scalar_type)
{
    const scalar_info *s = scalar_find(scalar_type);
    return s ? s->name : "?";
}

const ly_pte_plan *ly_pte_find_plan(const ly_pte_program *p, const char *name)
{
    if (!p || !name) return NULL;
    for (size_t i = 0; i < p->n_execution_plan; i++)
        if (p->execution_plan[i].name && strcmp(p->execution_plan[i].name, name) == 0)
            return &p->execution_plan[i];
    return NULL;
}

ly_status ly_pte_tensor_nbytes(const ly_pte_tensor *t, uint64_t *nbytes)
{
    if (!t || !nbytes) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_tensor_nbytes: NULL");
    *nbytes = 0;
    int64_t n = (int64_t)ly_pte_scalar_size(t->scalar_type);
    if (!n)
        return ly_set_error(LY_E_FORMAT, "tensor: scalar_type %d is not a ScalarType",
                            t->scalar_type);
    if (t->n_sizes && !t->sizes) return ly_set_error(LY_E_FORMAT, "tensor: sizes missing");
    for (size_t i = 0; i < t->n_sizes; i++) {
        if (t->sizes[i] < 0)
            return ly_set_error(LY_E_FORMAT, "tensor: sizes[%zu] is negative (%d)", i,
                                (int)t->sizes[i]);
        if (!ly_checked_mul(n, t->sizes[i], &n))
            return ly_set_error(LY_E_FORMAT, "tensor: byte size overflows 64 bits");
    }
    *nbytes = (uint64_t)n;
    return LY_OK;
}

ly_status ly_pte_segment(const ly_pte_program *p, uint32_t index, ly_pte_bytes *out)
{
    if (!p || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_segment: NULL");
    if (index >= p->n_segments || !p->segment_data)
        return ly_set_error(LY_E_FORMAT, "segment %u is out of range (%zu segments)", index,
                            p->segment_data ? p->n_segments : 0);
    *out = p->segment_data[index];
    return LY_OK;
}

ly_status ly_pte_delegate_blob(const ly_pte_program *p, const ly_pte_delegate *d, ly_pte_bytes *out)
{
    if (!p || !d || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_delegate_blob: NULL");
    if (d->location == LY_PTE_INLINE) {
        if (d->index >= p->n_backend_delegate_data)
            return ly_set_error(LY_E_FORMAT,
                                "delegate \"%s\": inline data %u is out of range (%zu blobs)",
                                d->id ? d->id : "", d->index, p->n_backend_delegate_data);
        *out = p->backend_delegate_data[d->index];
        return LY_OK;
    }
    if (d->location == LY_PTE_SEGMENT) return ly_pte_segment(p, d->index, out);
    return ly_set_error(LY_E_FORMAT, "delegate \"%s\": data location %u is not INLINE or SEGMENT",
                        d->id ? d->id : "", d->location);
}

ly_status ly_pte_named_data_find(const ly_pte_program *p, const char *key, ly_pte_bytes *out)
{
    if (!p || !key || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_named_data_find: NULL");
    for (size_t i = 0; i < p->n_named_data; i++)
        if (p->named_data[i].key && strcmp(p->named_data[i].key, key) == 0)
            return ly_pte_segment(p, p->named_data[i].segment_index, out);
    return ly_set_error(LY_E_NOT_FOUND, "named data \"%s\" is not in the program (%zu entries)",
                        key, p->n_named_data);
}

ly_status ly_pte_constant_data(const ly_pte_program *p, const ly_pte_tensor *t, ly_pte_bytes *out)
{
    if (!p || !t || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_constant_data: NULL");
    uint32_t idx = t->data_buffer_idx;
    if (idx == 0 || t->allocation_info.present)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "data_buffer_idx %u%s: not a constant tensor",
                            idx, t->allocation_info.present ? " with allocation_info" : "");
    uint64_t nbytes = 0;
    ly_status st = ly_pte_tensor_nbytes(t, &nbytes);
    if (st != LY_OK) return st;
    const ly_pte_subsegment_offsets *cs = &p->constant_segment;
    if (cs->present && cs->n_offsets > 1) {
        if (idx >= cs->n_offsets)
            return ly_set_error(LY_E_FORMAT,
                                "data_buffer_idx: %u is out of range (constant_segment has %zu "
                                "offsets)",
                                idx, cs->n_offsets);
        ly_pte_bytes seg = {NULL, 0};
        if ((st = ly_pte_segment(p, cs->segment_index, &seg)) != LY_OK) return st;
        uint64_t off = cs->offsets[idx];
        if (!ly_pte_range_within(off, nbytes, seg.size))
            return ly_set_error(LY_E_FORMAT,
                                "data_buffer_idx %u: %llu bytes at constant offset %llu run past "
                                "the constant segment (%zu bytes)",
                                idx, (unsigned long long)nbytes, (unsigned long long)off, seg.size);
        out->data = seg.data + off;
        out->size = (size_t)nbytes;
        return LY_OK;
    }
    if (p->n_constant_buffer) { /* the pre-0.7 inline form */
        if (idx >= p->n_constant_buffer)
            return ly_set_error(LY_E_FORMAT,
                                "data_buffer_idx: %u is out of range (%zu constant buffers)", idx,
                                p->n_constant_buffer);
        if (nbytes > p->constant_buffer[idx].size)
            return ly_set_error(LY_E_FORMAT,
                                "data_buffer_idx %u: %llu bytes, the constant buffer has %zu", idx,
                                (unsigned long long)nbytes, p->constant_buffer[idx].size);
        out->data = p->constant_buffer[idx].data;
        out->size = (size_t)nbytes;
        return LY_OK;
    }
    return ly_set_error(LY_E_FORMAT,
                        "data_buffer_idx %u: a constant tensor, but the program has no constant "
                        "data",
                        idx);
}
