/* SPDX-License-Identifier: MIT */
/* The program a lowering writes: its values, instructions, operators, named
 * data and memory plan (see lowering.h). */
#include "export/lowering.h"

#include <stdio.h>

/* ---- memory ---------------------------------------------------------------- */

void *ly_lower_calloc(ly_lower_arena *a, size_t count, size_t size)
{
    if (a->failed) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        void **p = realloc(a->blocks, cap * sizeof *p);
        if (!p) {
            a->failed = true;
            return NULL;
        }
        a->blocks = p;
        a->cap = cap;
    }
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        a->failed = true;
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

void ly_lower_arena_free(ly_lower_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    *a = (ly_lower_arena){0};
}

/* Grow *items (of `size` bytes each) to hold one more; false when out of memory. */
bool ly_lower_grow(void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, c * size);
    if (!p) return false;
    memset((char *)p + *cap * size, 0, (c - *cap) * size);
    *items = p;
    *cap = c;
    return true;
}

ly_status ly_lower_oom(void)
{
    return ly_set_error(LY_E_NO_MEMORY, "export: out of memory");
}

int64_t ly_lower_numel(const ly_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* ---- program values ---------------------------------------------------------- */

/* The program's scalar type of a graph dtype (f32, or i64 indices). */
/* ---- what an op's exporter reads (ops/op_export.h) ---------------------------------------- */

const ly_tensor *ly_lower_shape(const ly_lowering *L, ly_graph_value v)
{
    return &L->shape[v];
}

const float *ly_lower_known(const ly_lowering *L, ly_graph_value v)
{
    return L->known[v];
}

bool ly_lower_is_4d(const ly_lowering *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->shape[v].ndim == 4;
}

bool ly_lower_known_f32(const ly_lowering *L, ly_graph_value v)
{
    return v != LY_GRAPH_NONE && L->known[v] && L->shape[v].dtype == LY_F32;
}

bool ly_lower_takes_4d(const ly_lowering *L, const ly_graph_node_info *n)
{
    return ly_lower_is_4d(L, n->inputs[0]);
}

bool ly_lower_takes_ranked(const ly_lowering *L, const ly_graph_node_info *n)
{
    return L->shape[n->inputs[0]].ndim >= 1;
}

void ly_lower_call_begin(ly_lowering *L, ly_pte_call *k, ly_pte_portable_op op)
{
    ly_pte_call_begin(k, op, &L->values);
}

int ly_lower_pvalue(const ly_lowering *L, ly_graph_value v)
{
    return L->pvalue[v];
}

static int scalar_type_of(ly_dtype dtype)
{
    return dtype == LY_I64 ? LY_PTE_LONG : LY_PTE_FLOAT;
}

static size_t tensor_bytes(const ly_tensor *t)
{
    return (size_t)ly_lower_numel(t) * ly_pte_scalar_size(scalar_type_of(t->dtype));
}

/* A contiguous tensor EValue of `shape` (its sizes and dim order in the
 * lowering's arena); false when out of memory. */
static bool tensor_evalue(ly_lowering *L, const ly_tensor *shape, ly_pte_evalue *v)
{
    int32_t *sizes = ly_lower_calloc(&L->mem, (size_t)shape->ndim, sizeof *sizes);
    uint8_t *order = ly_lower_calloc(&L->mem, (size_t)shape->ndim, 1);
    if (!sizes || !order) return false;
    for (int i = 0; i < shape->ndim; i++) {
        sizes[i] = (int32_t)shape->shape[i];
        order[i] = (uint8_t)i;
    }
    *v = (ly_pte_evalue){.type = LY_PTE_EVALUE_TENSOR};
    v->u.tensor = (ly_pte_tensor){.scalar_type = scalar_type_of(shape->dtype),
                                  .sizes = sizes,
                                  .n_sizes = (size_t)shape->ndim,
                                  .dim_order = order,
                                  .n_dim_order = (size_t)shape->ndim,
                                  .shape_dynamism = LY_PTE_STATIC};
    return true;
}

int ly_lower_tensor_value(ly_lowering *L, const ly_tensor *shape)
{
    ly_pte_evalue v;
    if (!tensor_evalue(L, shape, &v)) return -1;
    v.u.tensor.allocation_info = (ly_pte_allocation){.present = true, .memory_id = 1};
    int id = ly_pte_values_add(&L->values, v);
    if (id < 0 || !LY_LOWER_GROW(L->pt, L->n_pt, L->cap_pt)) return -1;
    L->pt[L->n_pt++] = (ly_lower_planned){
        .evalue = id, .nbytes = (uint64_t)tensor_bytes(shape), .first = -1, .last = -1};
    return id;
}

/* A program-level constant holding known value `v` (logical order), its
 * bytes in the constant segment: the program keeps them loaded for as long as
 * it lives, which XNNPACK's unpacked operands need (executorch.md: before
 * 1.4.1 the delegate frees the named data it loaded once its runtime exists). */
int ly_lower_constant_value(ly_lowering *L, ly_graph_value v)
{
    const ly_tensor *shape = &L->shape[v];
    size_t bytes = tensor_bytes(shape);
    size_t at = (L->const_seg_size + 15) / 16 * 16;
    if (at + bytes > L->const_seg_cap) {
        size_t cap = L->const_seg_cap ? 2 * L->const_seg_cap : 4096;
        while (cap < at + bytes)
            cap *= 2;
        uint8_t *grown = realloc(L->const_seg, cap);
        if (!grown) return -1;
        memset(grown + L->const_seg_cap, 0, cap - L->const_seg_cap);
        L->const_seg = grown;
        L->const_seg_cap = cap;
    }
    memcpy(L->const_seg + at, L->known[v], bytes);
    L->const_seg_size = at + bytes;
    if (L->n_const_offsets == 0) {
        if (!LY_LOWER_GROW(L->const_offsets, L->n_const_offsets, L->cap_const_offsets)) return -1;
        L->const_offsets[L->n_const_offsets++] = 0; /* the placeholder */
    }
    if (!LY_LOWER_GROW(L->const_offsets, L->n_const_offsets, L->cap_const_offsets)) return -1;
    uint32_t index = (uint32_t)L->n_const_offsets;
    L->const_offsets[L->n_const_offsets++] = at;
    ly_pte_evalue ev;
    if (!tensor_evalue(L, shape, &ev)) return -1;
    ev.u.tensor.data_buffer_idx = index;
    return ly_pte_values_add(&L->values, ev);
}

ly_pte_instruction *ly_lower_instruction(ly_lowering *L)
{
    if (!LY_LOWER_GROW(L->instr, L->n_instr, L->cap_instr)) return NULL;
    ly_pte_instruction *in = &L->instr[L->n_instr++];
    memset(in, 0, sizeof *in);
    return in;
}

int ly_lower_operator(ly_lowering *L, const char *name, const char *overload)
{
    for (size_t i = 0; i < L->n_ops; i++)
        if (strcmp(L->ops[i].name, name) == 0 && strcmp(L->ops[i].overload, overload) == 0)
            return (int)i;
    if (L->n_ops == sizeof L->ops / sizeof L->ops[0]) return -1;
    L->ops[L->n_ops] = (ly_pte_operator){name, overload};
    return (int)L->n_ops++;
}

/* Record that program value `evalue` is used (or defined) by instruction `at`. */
void ly_lower_touch(ly_lowering *L, int evalue, int at)
{
    for (size_t i = 0; i < L->n_pt; i++)
        if (L->pt[i].evalue == evalue) {
            ly_lower_planned *p = &L->pt[i];
            if (p->first < 0 || at < p->first) p->first = at;
            if (at > p->last) p->last = at;
            return;
        }
}

/* ---- named data -------------------------------------------------------------- */

ly_status ly_lower_named_data(ly_lowering *L, const char *name, const void *data, size_t size,
                              const char **key_out)
{
    size_t cap = strlen(name) + 80;
    char *key = ly_lower_calloc(&L->mem, cap, 1);
    if (!key) return ly_lower_oom();
    ly_status st = ly_pte_named_key(name, data, size, key, cap);
    if (st != LY_OK) return st;
    for (size_t i = 0; i < L->n_named; i++)
        if (strcmp(L->named[i].key, key) == 0) {
            *key_out = L->named[i].key;
            return LY_OK;
        }
    if (!LY_LOWER_GROW(L->named, L->n_named, L->cap_named)) return ly_lower_oom();
    L->named[L->n_named++] = (ly_lower_named){key, data, size};
    *key_out = key;
    return LY_OK;
}

/* A graph value as a program value: constants get one in the constant segment. */
int ly_lower_program_value(ly_lowering *L, ly_graph_value v)
{
    if (v == LY_GRAPH_NONE) return ly_pte_values_null(&L->values);
    if (L->pvalue[v] < 0 && L->known[v]) L->pvalue[v] = ly_lower_constant_value(L, v);
    return L->pvalue[v];
}

/* The inputs a node reads from the program (constants and folded values are
 * part of the node's own lowering). */
int ly_lower_node_inputs(const ly_lowering *L, const ly_graph_node_info *n, ly_graph_value *out)
{
    int k = 0;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && !L->known[n->inputs[i]]) out[k++] = n->inputs[i];
    return k;
}

/* Which values exist at program level: graph inputs, whatever crosses a
 * partition boundary or feeds a portable op, portable outputs, exported outputs. */
ly_status ly_lower_program_values(ly_lowering *L)
{
    for (int v = 0; v < L->n_values; v++)
        L->pvalue[v] = -1;
    for (int i = 0; i < ly_graph_input_count(L->g); i++) {
        ly_graph_value v;
        ly_status st = ly_graph_input_at(L->g, i, &v, NULL);
        if (st != LY_OK) return st;
        int id = ly_lower_tensor_value(L, &L->shape[v]);
        if (id < 0) return ly_lower_oom();
        L->pvalue[v] = id;
        L->inputs[L->n_inputs++] = id;
        ly_lower_touch(L, id, 0);
    }
    for (int i = 0; i < L->n_nodes; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (gn->folded) continue;
        /* every output of a portable kernel (topk's indices too) */
        for (int o = 1; gn->portable && o < gn->info.n_outputs; o++) {
            int id = ly_lower_tensor_value(L, &L->shape[gn->info.outputs[o]]);
            if (id < 0) return ly_lower_oom();
            L->pvalue[gn->info.outputs[o]] = id;
        }
        ly_graph_value v = gn->info.outputs[0];
        bool program = gn->portable || L->exported[v];
        for (int j = i + 1; j < L->n_nodes && !program; j++) {
            const ly_lower_node *c = &L->nodes[j];
            if (c->folded) continue;
            ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
            int k = ly_lower_node_inputs(L, &c->info, ins);
            for (int m = 0; m < k; m++)
                if (ins[m] == v && (c->portable || c->part != gn->part)) program = true;
        }
        if (!program) continue;
        int id = ly_lower_tensor_value(L, &L->shape[v]);
        if (id < 0) return ly_lower_oom();
        L->pvalue[v] = id;
    }
    return LY_OK;
}

/* ---- memory planning ---------------------------------------------------------- */

static int compare_size(const void *a, const void *b)
{
    const ly_lower_planned *x = *(const ly_lower_planned *const *)a,
                           *y = *(const ly_lower_planned *const *)b;
    return x->nbytes < y->nbytes ? 1 : x->nbytes > y->nbytes ? -1 : x->evalue - y->evalue;
}

/* Greedy by size, first fit among the placed tensors whose live ranges meet. */
ly_status ly_lower_plan_memory(ly_lowering *L, uint64_t *total)
{
    size_t n = L->n_pt;
    ly_lower_planned **order = calloc(n ? n : 1, sizeof *order);
    uint64_t *offset = calloc(n ? n : 1, sizeof *offset);
    bool *placed = calloc(n ? n : 1, sizeof *placed);
    if (!order || !offset || !placed) {
        free(order);
        free(offset);
        free(placed);
        return ly_lower_oom();
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &L->pt[i];
    qsort(order, n, sizeof *order, compare_size);
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        ly_lower_planned *p = order[i];
        uint64_t size = (p->nbytes + 15) / 16 * 16, at = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (size_t j = 0; j < i; j++) {
                const ly_lower_planned *q = order[j];
                size_t qi = (size_t)(q - L->pt);
                if (q->last < p->first || p->last < q->first) continue;
                uint64_t qs = offset[qi], qe = qs + (q->nbytes + 15) / 16 * 16;
                if (at < qe && qs < at + size) {
                    at = qe;
                    moved = true;
                }
            }
        }
        size_t pi = (size_t)(p - L->pt);
        offset[pi] = at;
        placed[pi] = true;
        if (at + size > *total) *total = at + size;
    }
    for (size_t i = 0; i < n; i++) {
        ly_pte_allocation *a = &L->values.items[L->pt[i].evalue].u.tensor.allocation_info;
        a->memory_offset_low = (uint32_t)(offset[i] & 0xFFFFFFFFu);
        a->memory_offset_high = (uint32_t)(offset[i] >> 32);
    }
    free(order);
    free(offset);
    free(placed);
    return LY_OK;
}
