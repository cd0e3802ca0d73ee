/* SPDX-License-Identifier: MIT */
/*
 * The "forward" method of an ExecuTorch program, as ExecuTorch's
 * Method::init / execute do it (executorch.md B4): values parsed once,
 * memory-planned tensors placed in the planned buffers, constants pointing
 * into the program, operators resolved (here: against our portable kernels),
 * delegates initialised; every check that can fail on a bad program runs at
 * load. Execution walks the chains' instructions.
 */
#include "engines/executorch/method_internal.h"

#include "core/core.h"
#include "export/lower.h"
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLACK 64                        /* bytes past every buffer: XNNPACK reads up to 16 ahead */
#define MAX_PLANNED ((uint64_t)4 << 30) /* per buffer: far above any detector's needs */

/* A run of calls in one chain (delegates that run as our graphs and portable
 * kernels with an op of ours) executed as one graph: no copies at the
 * delegates' boundaries, one plan, in-place concatenations across them, a
 * layout chosen for the whole run (graph/). The values the run reads from
 * before it are its inputs, read where they are; what is read after it (or
 * returned) is copied out at its end. */
typedef struct segment {
    size_t end; /* the instruction after the run */
    ly_graph *g;
    ly_graph_ctx *ctx;
    int32_t *inputs, *outputs; /* value indices of the graph's inputs and outputs */
    int n_inputs, n_outputs;
    ly_tensor *views;
} segment;

typedef struct instr_rt {
    const et_kernel *kernel;   /* kernel calls */
    ly_tensor **delegate_args; /* delegate calls */
    segment *segment;          /* the first call of a merged run */
    bool merged;               /* inside a merged run */
} instr_rt;

struct ly_et_method {
    const ly_pte_program *p;
    const ly_pte_plan *plan;
    char what[600];
    et_value *v;
    size_t n_v;
    uint8_t **buffers;
    uint64_t *buffer_used; /* per buffer: where its last tensor ends */
    size_t n_buffers;
    void **owned; /* private tensor memory */
    size_t n_owned;
    ly_et_xnnpack **delegates;
    /* the delegates' activations: one arena, as they run one at a time */
    ly_graph_arena delegate_arena;
    instr_rt **instr; /* per chain */
    size_t delegate_calls, kernel_calls, merged_calls;
    size_t recognised_msda; /* portable forms of ms_deform_attn run as the op */
    size_t folded_sdpa;     /* attentions between transposes run tokens first */
    /* MoveCalls can put a value of another shape where a kernel was checked:
     * then every kernel call is checked again before it runs. */
    bool has_moves;
    bool pooled_run; /* this execute runs on the delegates' workers throughout */
    /* per method input: only merged runs read it, and they read it where the
     * caller has it (no copy into the program's memory) */
    bool *input_in_place;
    const ly_tensor *run_inputs; /* the caller's inputs, during an execute */
};

static ly_status bad(const ly_et_method *m, const char *fmt, ...) LY_PRINTF(2, 3);
static ly_status bad(const ly_et_method *m, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ly_set_error(LY_E_FORMAT, "%s: %s", m->what, msg);
}

/* The tensor type a value of ExecuTorch scalar type `scalar_type` is held as:
 * one of the same element size (kernels check scalar_type itself), so that a
 * tensor's bytes are its elements times ly_dtype_size. False for the types
 * this runtime has no such type for (they are refused at load). */
static bool dtype_of(int scalar_type, ly_dtype *dtype)
{
    static const struct {
        int scalar_type;
        ly_dtype dtype;
    } map[] = {
        {LY_PTE_BYTE, LY_U8},
        {LY_PTE_CHAR, LY_I8},
        {LY_PTE_INT, LY_I32},
        {LY_PTE_LONG, LY_I64},
        {LY_PTE_HALF, LY_F16},
        {LY_PTE_FLOAT, LY_F32},
        {LY_PTE_DOUBLE, LY_F64},
        {LY_PTE_BOOL, LY_U8},
        {LY_PTE_QINT8, LY_I8},
        {LY_PTE_QUINT8, LY_U8},
        {LY_PTE_QINT32, LY_I32},
        {LY_PTE_QUINT4X2, LY_U8},
        {LY_PTE_QUINT2X4, LY_U8},
        {LY_PTE_FLOAT8E5M2, LY_U8},
        {LY_PTE_FLOAT8E4M3FN, LY_F8E4M3},
        {LY_PTE_FLOAT8E5M2FNUZ, LY_U8},
        {LY_PTE_FLOAT8E4M3FNUZ, LY_U8},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].scalar_type == scalar_type) {
            *dtype = map[i].dtype;
            return true;
        }
    return false; /* SHORT, BFLOAT16, BITS16, UINT16, UINT32, UINT64 */
}

static void *alloc_owned(ly_et_method *m, uint64_t bytes)
{
    void **list = realloc(m->owned, (m->n_owned + 1) * sizeof *list);
    if (!list) return NULL;
    m->owned = list;
    void *p = calloc(1, (size_t)bytes + SLACK);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

static ly_status load_tensor(ly_et_method *m, size_t index, const ly_pte_tensor *t, et_value *v)
{
    if (t->n_sizes > LY_MAX_DIMS)
        return bad(m, "value %zu: rank %zu is above the %d this runtime supports", index,
                   t->n_sizes, LY_MAX_DIMS);
    if (t->shape_dynamism != LY_PTE_STATIC && t->shape_dynamism != LY_PTE_DYNAMIC_BOUND)
        return bad(m, "value %zu: dynamic unbound shapes are not supported", index);
    v->scalar_type = t->scalar_type;
    if (!dtype_of(t->scalar_type, &v->t.dtype))
        return bad(m,
                   "value %zu: scalar type %s (%zu-byte elements) is not supported by this runtime",
                   index, ly_pte_scalar_name(t->scalar_type), ly_pte_scalar_size(t->scalar_type));
    v->t.ndim = (int)t->n_sizes;
    v->contiguous = t->n_dim_order == t->n_sizes;
    for (size_t i = 0; i < t->n_sizes; i++) {
        v->t.shape[i] = t->sizes[i];
        if (v->contiguous && t->dim_order[i] != i) v->contiguous = false;
    }
    ly_status st = ly_pte_tensor_nbytes(t, &v->nbytes);
    if (st != LY_OK) return ly_error_prefix(st, m->what);
    if (t->data_buffer_idx > 0 && !t->allocation_info.present) {
        ly_pte_bytes bytes;
        st = ly_pte_constant_data(m->p, t, &bytes);
        if (st != LY_OK) return ly_error_prefix(st, m->what);
        if (bytes.size < v->nbytes)
            return bad(m, "value %zu: constant holds %zu bytes, needs %llu", index, bytes.size,
                       (unsigned long long)v->nbytes);
        v->t.data = (void *)bytes.data;
        size_t align = ly_pte_scalar_size(t->scalar_type);
        if (align > 1 && (uintptr_t)v->t.data % align != 0)
            return bad(m, "value %zu: constant data is not aligned to its %zu-byte elements", index,
                       align);
        return LY_OK;
    }
    if (t->data_buffer_idx > 0)
        return bad(m, "value %zu: mutable (initialised planned) tensors are not supported", index);
    v->writable = true;
    if (t->allocation_info.present) {
        uint32_t id = t->allocation_info.memory_id;
        uint64_t off = ly_pte_memory_offset(&t->allocation_info);
        if (id == 0 || id > m->n_buffers)
            return bad(m, "value %zu: memory_id %u, the plan has %zu buffers", index, id,
                       m->n_buffers);
        uint64_t size = (uint64_t)m->plan->non_const_buffer_sizes[id];
        if (!ly_pte_range_within(off, v->nbytes, size))
            return bad(m,
                       "value %zu: %llu bytes at offset %llu do not fit planned buffer %u (%llu "
                       "bytes)",
                       index, (unsigned long long)v->nbytes, (unsigned long long)off, id,
                       (unsigned long long)size);
        size_t align = ly_pte_scalar_size(t->scalar_type);
        if (align > 1 && off % align != 0)
            return bad(m, "value %zu: offset %llu is not aligned to its %zu-byte elements", index,
                       (unsigned long long)off, align);
        v->memory_id = id;
        v->memory_offset = off;
        uint64_t end = off + v->nbytes; /* within the buffer's size: checked above */
        if (end > m->buffer_used[id - 1]) m->buffer_used[id - 1] = end;
        return LY_OK;
    }
    /* Neither constant nor planned: memory of its own (ExecuTorch expects the
     * caller to bind inputs like this; we copy into it). */
    if (v->nbytes > MAX_PLANNED) return bad(m, "value %zu is too large", index);
    v->own_memory = true;
    return LY_OK;
}

/* A declared buffer may exceed what its tensors use only by the planner's
 * rounding (ExecuTorch's MemoryPlanningPass aligns to 16): more is refused,
 * so a small hostile file cannot make us reserve gigabytes. */
#define PLAN_ALIGNMENT 16

static ly_status check_buffer_sizes(const ly_et_method *m)
{
    for (size_t i = 0; i < m->n_buffers; i++) {
        uint64_t declared = (uint64_t)m->plan->non_const_buffer_sizes[i + 1];
        uint64_t used = m->buffer_used[i];
        uint64_t rounded = (used + PLAN_ALIGNMENT - 1) / PLAN_ALIGNMENT * PLAN_ALIGNMENT;
        if (declared > rounded)
            return bad(m,
                       "planned buffer %zu declares %llu bytes, but the tensors placed in it end "
                       "at byte %llu (%llu rounded to the planner's %d-byte alignment)",
                       i + 1, (unsigned long long)declared, (unsigned long long)used,
                       (unsigned long long)rounded, PLAN_ALIGNMENT);
    }
    return LY_OK;
}

/* Memory, once values, buffer sizes and delegates are validated. */
static ly_status bind_memory(ly_et_method *m)
{
    for (size_t i = 0; i < m->n_buffers; i++) {
        int64_t size = m->plan->non_const_buffer_sizes[i + 1];
        /* calloc: zeroed pages on demand, so a large plan costs what it touches */
        m->buffers[i] = calloc(1, (size_t)size + SLACK);
        if (!m->buffers[i])
            return ly_set_error(LY_E_NO_MEMORY,
                                "%s: cannot allocate planned buffer %zu (%lld bytes)", m->what,
                                i + 1, (long long)size);
    }
    for (size_t i = 0; i < m->n_v; i++) {
        et_value *v = &m->v[i];
        if (v->memory_id) v->t.data = m->buffers[v->memory_id - 1] + v->memory_offset;
        if (v->own_memory && !(v->t.data = alloc_owned(m, v->nbytes)))
            return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    }
    return LY_OK;
}

static ly_status load_values(ly_et_method *m)
{
    const ly_pte_plan *plan = m->plan;
    m->n_buffers = plan->n_non_const_buffer_sizes > 0 ? plan->n_non_const_buffer_sizes - 1 : 0;
    m->buffers = calloc(m->n_buffers ? m->n_buffers : 1, sizeof *m->buffers);
    m->buffer_used = calloc(m->n_buffers ? m->n_buffers : 1, sizeof *m->buffer_used);
    if (!m->buffers || !m->buffer_used)
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    for (size_t i = 0; i < m->n_buffers; i++) {
        int64_t size = plan->non_const_buffer_sizes[i + 1];
        if (size < 0 || (uint64_t)size > MAX_PLANNED)
            return bad(m, "planned buffer %zu has size %lld", i + 1, (long long)size);
    }
    m->n_v = plan->n_values;
    m->v = calloc(m->n_v ? m->n_v : 1, sizeof *m->v);
    if (!m->v) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    for (size_t i = 0; i < m->n_v; i++) {
        const ly_pte_evalue *e = &plan->values[i];
        et_value *v = &m->v[i];
        v->type = e->type;
        switch (e->type) {
        case LY_PTE_EVALUE_TENSOR: {
            ly_status st = load_tensor(m, i, &e->u.tensor, v);
            if (st != LY_OK) return st;
            break;
        }
        case LY_PTE_EVALUE_INT:
            v->i = e->u.int_val;
            break;
        case LY_PTE_EVALUE_DOUBLE:
            v->d = e->u.double_val;
            break;
        case LY_PTE_EVALUE_BOOL:
            v->b = e->u.bool_val;
            break;
        case LY_PTE_EVALUE_INT_LIST: /* resolved below, once every Int is read */
            v->n_items = e->u.int_list.n_items;
            break;
        case LY_PTE_EVALUE_DOUBLE_LIST:
            v->doubles = e->u.double_list.items;
            v->n_items = e->u.double_list.n_items;
            break;
        case LY_PTE_EVALUE_TENSOR_LIST:
        case LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST:
            v->tensors = e->type == LY_PTE_EVALUE_TENSOR_LIST ? e->u.tensor_list.items
                                                              : e->u.optional_tensor_list.items;
            v->n_items = e->u.tensor_list.n_items;
            for (size_t k = 0; k < v->n_items; k++)
                if (v->tensors[k] < -1 || v->tensors[k] >= (int32_t)m->n_v)
                    return bad(m, "value %zu: tensor list item %zu is not a value", i, k);
            break;
        default:
            break;
        }
    }
    /* An IntList's items are the indices of Int values, not the ints: ExecuTorch
     * boxes each one (a SymInt may be computed at run time), and its runtime
     * reads them so. */
    for (size_t i = 0; i < m->n_v; i++) {
        et_value *v = &m->v[i];
        if (v->type != LY_PTE_EVALUE_INT_LIST) continue;
        const int64_t *index = plan->values[i].u.int_list.items;
        int64_t *ints = alloc_owned(m, v->n_items * sizeof *ints);
        if (!ints) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
        for (size_t k = 0; k < v->n_items; k++) {
            if (index[k] < 0 || (uint64_t)index[k] >= m->n_v ||
                plan->values[index[k]].type != LY_PTE_EVALUE_INT)
                return bad(m,
                           "value %zu: int list item %zu (%lld) is not the index of an Int value",
                           i, k, (long long)index[k]);
            ints[k] = plan->values[index[k]].u.int_val;
        }
        v->ints = ints;
    }
    return LY_OK;
}

static bool tensor_value(const ly_et_method *m, int32_t index)
{
    return index >= 0 && (size_t)index < m->n_v && m->v[index].type == LY_PTE_EVALUE_TENSOR;
}

static ly_status check_args(const ly_et_method *m, const int32_t *args, size_t n, size_t at)
{
    for (size_t k = 0; k < n; k++)
        if (args[k] < 0 || (size_t)args[k] >= m->n_v)
            return bad(m, "instruction %zu: argument %zu (%d) is not a value", at, k, args[k]);
    return LY_OK;
}

static ly_status prepare_delegate_call(ly_et_method *m, const ly_pte_instruction *in, instr_rt *rt,
                                       size_t at)
{
    int32_t di = in->u.delegate_call.delegate_index;
    if (di < 0 || (size_t)di >= m->plan->n_delegates)
        return bad(m, "instruction %zu: delegate %d of %zu", at, di, m->plan->n_delegates);
    ly_et_xnnpack *d = m->delegates[di];
    size_t n = in->u.delegate_call.n_args, externs = ly_et_xnnpack_num_externs(d);
    const int32_t *args = in->u.delegate_call.args;
    ly_status st = check_args(m, args, n, at);
    if (st != LY_OK) return st;
    if (n != externs)
        return bad(m,
                   "instruction %zu: the delegate call passes %zu arguments, delegate %d has "
                   "%zu externals",
                   at, n, di, externs);
    rt->delegate_args = calloc(n ? n : 1, sizeof *rt->delegate_args);
    if (!rt->delegate_args) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    for (size_t k = 0; k < n; k++) {
        if (!tensor_value(m, args[k]))
            return bad(m, "instruction %zu: delegate argument %zu is not a tensor", at, k);
        et_value *v = &m->v[args[k]];
        int nd;
        int64_t dims[16];
        bool is_output;
        st = ly_et_xnnpack_extern_dims(d, k, &nd, dims, &is_output);
        if (st != LY_OK) return st;
        bool same = v->scalar_type == LY_PTE_FLOAT && v->contiguous && v->t.ndim == nd;
        for (int i = 0; same && i < nd; i++)
            same = v->t.shape[i] == dims[i];
        if (!same)
            return bad(m,
                       "instruction %zu: delegate argument %zu (value %d) is not the contiguous "
                       "f32 tensor its external declares",
                       at, k, args[k]);
        if (is_output && !v->writable)
            return bad(m, "instruction %zu: delegate output %zu is a constant", at, k);
        rt->delegate_args[k] = &v->t;
    }
    return LY_OK;
}

static void mark_read(const ly_et_method *m, bool *read, int32_t value)
{
    if (value < 0 || (size_t)value >= m->n_v) return;
    const et_value *v = &m->v[value];
    read[value] = true;
    if (v->tensors)
        for (size_t i = 0; i < v->n_items; i++)
            if (v->tensors[i] >= 0 && (size_t)v->tensors[i] < m->n_v) read[v->tensors[i]] = true;
}

/* What the instructions read, into read[]: a kernel's arguments (not its out
 * tensors), a delegate's every one, both ends of a move, a jump's condition,
 * and the outputs; leaving out instructions [first, end) of chain
 * `skip_chain` (none where it is past the last chain) and, with
 * skip_merged, those inside merged runs. */
static void mark_reads(const ly_et_method *m, size_t skip_chain, size_t first, size_t end,
                       bool skip_merged, bool *read)
{
    const ly_pte_plan *plan = m->plan;
    for (size_t c = 0; c < plan->n_chains; c++)
        for (size_t i = 0; i < plan->chains[c].n_instructions; i++) {
            if ((c == skip_chain && i >= first && i < end) ||
                (skip_merged && m->instr[c][i].merged))
                continue;
            const ly_pte_instruction *in = &plan->chains[c].instructions[i];
            const instr_rt *rt = &m->instr[c][i];
            switch (in->type) {
            case LY_PTE_KERNEL_CALL: {
                /* the schema's arguments; then come the outs (and again, as
                 * the return values) */
                size_t n = in->u.kernel_call.n_args, args = (size_t)rt->kernel->schema->n_args;
                for (size_t k = 0; k < n && k < args; k++)
                    mark_read(m, read, in->u.kernel_call.args[k]);
                break;
            }
            case LY_PTE_DELEGATE_CALL:
                for (size_t k = 0; k < in->u.delegate_call.n_args; k++)
                    mark_read(m, read, in->u.delegate_call.args[k]);
                break;
            case LY_PTE_MOVE_CALL:
                mark_read(m, read, in->u.move_call.move_from);
                mark_read(m, read, in->u.move_call.move_to);
                break;
            case LY_PTE_JUMP_FALSE_CALL:
                mark_read(m, read, in->u.jump_false_call.cond_value_index);
                break;
            default:
                break;
            }
        }
    for (size_t i = 0; i < plan->n_outputs; i++)
        mark_read(m, read, plan->outputs[i]);
}

/* What no instruction reads (out of memory: nothing, which makes kernels
 * write every out tensor). */
static void mark_unread(ly_et_method *m)
{
    bool *read = calloc(m->n_v ? m->n_v : 1, sizeof *read);
    if (read) mark_reads(m, SIZE_MAX, 0, 0, false, read);
    for (size_t i = 0; i < m->n_v; i++)
        m->v[i].unread = read && !read[i];
    free(read);
}

static ly_status prepare(ly_et_method *m)
{
    const ly_pte_plan *plan = m->plan;
    if (plan->n_chains == 0) return bad(m, "the plan has no chains");
    m->instr = calloc(plan->n_chains, sizeof *m->instr);
    if (!m->instr) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    for (size_t c = 0; c < plan->n_chains; c++) {
        const ly_pte_chain *chain = &plan->chains[c];
        m->instr[c] = calloc(chain->n_instructions ? chain->n_instructions : 1, sizeof **m->instr);
        if (!m->instr[c]) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
        for (size_t i = 0; i < chain->n_instructions; i++) {
            const ly_pte_instruction *in = &chain->instructions[i];
            instr_rt *rt = &m->instr[c][i];
            ly_status st = LY_OK;
            switch (in->type) {
            case LY_PTE_KERNEL_CALL: {
                int32_t op = in->u.kernel_call.op_index;
                if (op < 0 || (size_t)op >= plan->n_operators)
                    return bad(m, "instruction %zu: operator %d of %zu", i, op, plan->n_operators);
                const ly_pte_operator *o = &plan->operators[op];
                const char *overload = o->overload ? o->overload : "";
                rt->kernel = ly_et_find_kernel(o->name, overload);
                if (!rt->kernel)
                    return ly_set_error(LY_E_UNSUPPORTED,
                                        "%s: instruction %zu: operator %s%s%s is not registered "
                                        "in this runtime (the program's instructions don't have "
                                        "a corresponding operator registered)",
                                        m->what, i, o->name, *overload ? "." : "", overload);
                st = check_args(m, in->u.kernel_call.args, in->u.kernel_call.n_args, i);
                if (st == LY_OK) {
                    char what[700];
                    snprintf(what, sizeof what, "%s: instruction %zu (%s%s%s)", m->what, i, o->name,
                             *overload ? "." : "", overload);
                    st = ly_et_kernel_check(rt->kernel, m->v, in->u.kernel_call.args,
                                            in->u.kernel_call.n_args, what);
                }
                m->kernel_calls++;
                break;
            }
            case LY_PTE_DELEGATE_CALL:
                st = prepare_delegate_call(m, in, rt, i);
                m->delegate_calls++;
                break;
            case LY_PTE_MOVE_CALL:
                m->has_moves = true;
                if (in->u.move_call.move_from < 0 || (size_t)in->u.move_call.move_from >= m->n_v ||
                    in->u.move_call.move_to < 0 || (size_t)in->u.move_call.move_to >= m->n_v)
                    st = bad(m, "instruction %zu: move between values out of range", i);
                break;
            case LY_PTE_JUMP_FALSE_CALL: {
                int32_t cv = in->u.jump_false_call.cond_value_index,
                        dst = in->u.jump_false_call.destination_instruction;
                if (cv < 0 || (size_t)cv >= m->n_v || m->v[cv].type != LY_PTE_EVALUE_BOOL ||
                    dst < 0 || (size_t)dst > chain->n_instructions)
                    st = bad(m, "instruction %zu: jump with a bad condition or destination", i);
                break;
            }
            case LY_PTE_FREE_CALL:
                if (in->u.free_call.value_index < 0 ||
                    (size_t)in->u.free_call.value_index >= m->n_v)
                    st = bad(m, "instruction %zu: free of a value out of range", i);
                break;
            default:
                st = bad(m, "instruction %zu has no arguments", i);
            }
            if (st != LY_OK) return st;
        }
    }
    for (size_t i = 0; i < plan->n_inputs; i++)
        if (!tensor_value(m, plan->inputs[i]) || !m->v[plan->inputs[i]].writable ||
            !m->v[plan->inputs[i]].contiguous)
            return bad(m, "input %zu is not a writable contiguous tensor", i);
    for (size_t i = 0; i < plan->n_outputs; i++)
        if (!tensor_value(m, plan->outputs[i]))
            return bad(m, "output %zu is not a tensor (this runtime returns tensors only)", i);
    return LY_OK;
}

static void segment_free(segment *sg)
{
    if (!sg) return;
    ly_graph_ctx_free(sg->ctx);
    ly_graph_free(sg->g);
    free(sg->inputs);
    free(sg->outputs);
    free(sg->views);
    free(sg);
}

/* Whether instruction `in` can join a merged run. */
static bool mergeable(const ly_et_method *m, const ly_pte_instruction *in, const instr_rt *rt)
{
    switch (in->type) {
    case LY_PTE_DELEGATE_CALL:
        return !ly_et_xnnpack_runs_operators(m->delegates[in->u.delegate_call.delegate_index]);
    case LY_PTE_KERNEL_CALL:
        return rt->kernel->node &&
               rt->kernel->node(m->v, in->u.kernel_call.args, NULL, NULL) == LY_OK;
    case LY_PTE_FREE_CALL:
        return true;
    default:
        return false;
    }
}

static bool is_call(const ly_pte_instruction *in)
{
    return in->type == LY_PTE_DELEGATE_CALL || in->type == LY_PTE_KERNEL_CALL;
}

/* Value `x` as a graph value where nothing in the run wrote it: a constant of
 * the program (copied, small ones: providers prepare on constants) or an
 * input of the run, read where it is. */
enum { SEGMENT_CONSTANT_BYTES = 1 << 20 };

static ly_status segment_read(ly_et_method *m, segment *sg, ly_graph_value *map, int32_t x)
{
    if (map[x] != LY_GRAPH_NONE) return LY_OK;
    const et_value *v = &m->v[x];
    if (v->type != LY_PTE_EVALUE_TENSOR || !v->contiguous ||
        (v->t.dtype != LY_F32 && v->t.dtype != LY_I64))
        return LY_E_DECLINED;
    if (!v->writable && v->nbytes <= SEGMENT_CONSTANT_BYTES) {
        void *data;
        ly_status st = ly_graph_constant(sg->g, v->t.dtype, v->t.ndim, v->t.shape, &map[x], &data);
        if (st == LY_OK && v->nbytes) memcpy(data, v->t.data, (size_t)v->nbytes);
        return st;
    }
    char name[32];
    snprintf(name, sizeof name, "value%d", (int)x);
    ly_status st = ly_graph_input(sg->g, name, v->t.dtype, v->t.ndim, &map[x]);
    if (st == LY_OK) sg->inputs[sg->n_inputs++] = x;
    return st;
}

/* Calls [first, end) of chain c into sg->g. */
static ly_status segment_build(ly_et_method *m, size_t c, size_t first, segment *sg,
                               ly_graph_value *map, bool *produced)
{
    const ly_pte_chain *chain = &m->plan->chains[c];
    ly_status st = LY_OK;
    for (size_t i = first; st == LY_OK && i < sg->end; i++) {
        const ly_pte_instruction *in = &chain->instructions[i];
        const instr_rt *rt = &m->instr[c][i];
        if (in->type == LY_PTE_KERNEL_CALL) {
            const int32_t *a = in->u.kernel_call.args;
            size_t reads = (size_t)rt->kernel->schema->n_args;
            for (size_t k = 0; st == LY_OK && k < reads && k < in->u.kernel_call.n_args; k++)
                if (m->v[a[k]].type == LY_PTE_EVALUE_TENSOR) st = segment_read(m, sg, map, a[k]);
            if (st == LY_OK) st = rt->kernel->node(m->v, a, sg->g, map);
            for (size_t k = reads; st == LY_OK && k < in->u.kernel_call.n_args; k++)
                if (map[a[k]] != LY_GRAPH_NONE) produced[a[k]] = true;
        } else if (in->type == LY_PTE_DELEGATE_CALL) {
            int di = in->u.delegate_call.delegate_index;
            ly_et_xnnpack *d = m->delegates[di];
            const int32_t *a = in->u.delegate_call.args;
            size_t n = ly_et_xnnpack_num_externs(d);
            ly_graph_value *bound = malloc((n + 1) * sizeof *bound),
                           *out = malloc((n + 1) * sizeof *out);
            if (!bound || !out) st = LY_E_NO_MEMORY;
            for (size_t k = 0; st == LY_OK && k < n; k++) {
                int nd;
                int64_t dims[LY_MAX_DIMS + 2];
                bool is_output;
                bound[k] = out[k] = LY_GRAPH_NONE;
                st = ly_et_xnnpack_extern_dims(d, k, &nd, dims, &is_output);
                if (st == LY_OK && !is_output) {
                    st = segment_read(m, sg, map, a[k]);
                    if (st == LY_OK) bound[k] = map[a[k]];
                }
            }
            if (st == LY_OK) st = ly_et_xnnpack_append(d, sg->g, di, bound, out);
            for (size_t k = 0; st == LY_OK && k < n; k++)
                if (out[k] != LY_GRAPH_NONE) {
                    map[a[k]] = out[k];
                    produced[a[k]] = true;
                }
            free(bound);
            free(out);
        }
    }
    return st;
}

/* What our exporter writes in ops a stock ExecuTorch runs, run as the ops
 * our providers serve, now that a merged run sees each form whole:
 * ms_deform_attn as grid samples, transposes and a batched product (D-FINE-n's
 * program spent 11 ms a run there against 1.3 ms in the op), tokens-first
 * attention between heads-first transposes (RF-DETR-n's: 56 transposes a
 * run). Any failure leaves the run as built. */
static void recognise_forms(ly_et_method *m, segment *sg)
{
    ly_tensor *shapes = calloc((size_t)sg->n_inputs + 1, sizeof *shapes);
    int found = 0, folded = 0;
    if (!shapes) return;
    for (int i = 0; i < sg->n_inputs; i++)
        shapes[i] = m->v[sg->inputs[i]].t;
    ly_status st = ly_export_msda_recognise(sg->g, sg->n_inputs, shapes, &found);
    if (st == LY_OK) st = ly_graph_fold_sdpa_transposes(sg->g, &folded);
    if (st == LY_OK && folded) st = ly_graph_prune(sg->g, NULL);
    if (st != LY_OK)
        ly_log(LY_LOG_DEBUG, "%s: a form left as written: %s", m->what, ly_last_error());
    else if (found || folded)
        ly_log(LY_LOG_DEBUG,
               "%s: %d portable forms of ms_deform_attn and %d transposed attentions run as "
               "the ops",
               m->what, found, folded);
    m->recognised_msda += (size_t)found;
    m->folded_sdpa += (size_t)folded;
    free(shapes);
}

/* Calls [first, end) of chain c as one graph, or NULL (declined: they run
 * one by one, as before) with *st LY_OK. */
static segment *segment_make(ly_et_method *m, size_t c, size_t first, size_t end, ly_status *st)
{
    segment *sg = calloc(1, sizeof *sg);
    ly_graph_value *map = malloc(m->n_v * sizeof *map);
    bool *produced = calloc(m->n_v, sizeof *produced), *read = calloc(m->n_v, sizeof *read);
    *st = LY_OK;
    if (!sg || !map || !produced || !read) *st = LY_E_NO_MEMORY;
    if (*st == LY_OK) {
        sg->end = end;
        sg->inputs = malloc(m->n_v * sizeof *sg->inputs);
        sg->outputs = malloc(m->n_v * sizeof *sg->outputs);
        if (!sg->inputs || !sg->outputs) *st = LY_E_NO_MEMORY;
    }
    for (size_t i = 0; *st == LY_OK && i < m->n_v; i++)
        map[i] = LY_GRAPH_NONE;
    if (*st == LY_OK) *st = ly_graph_create(&sg->g);
    if (*st == LY_OK) *st = segment_build(m, c, first, sg, map, produced);
    if (*st == LY_OK) mark_reads(m, c, first, end, false, read);
    for (size_t x = 0; *st == LY_OK && x < m->n_v; x++) {
        if (!produced[x] || !read[x]) continue;
        char name[32];
        snprintf(name, sizeof name, "value%d", (int)x);
        *st = ly_graph_output(sg->g, map[x], name);
        if (*st == LY_OK) sg->outputs[sg->n_outputs++] = (int32_t)x;
    }
    if (*st == LY_OK) {
        sg->views = calloc((size_t)sg->n_inputs + 1, sizeof *sg->views);
        if (!sg->views) *st = LY_E_NO_MEMORY;
    }
    if (*st == LY_OK) recognise_forms(m, sg);
    if (*st == LY_OK) *st = ly_graph_ctx_create(sg->g, &sg->ctx);
    free(map);
    free(produced);
    free(read);
    if (*st == LY_OK) return sg;
    segment_free(sg);
    if (*st == LY_E_NO_MEMORY) {
        ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
        return NULL;
    }
    /* The calls passed their checks one by one: they still run that way. */
    ly_log(LY_LOG_DEBUG, "%s: chain %zu, instructions %zu-%zu run one by one (%s)", m->what, c,
           first, end - 1,
           *st == LY_E_DECLINED ? "a value or call the graph cannot take" : ly_last_error());
    *st = LY_OK;
    return NULL;
}

/* Which method inputs only merged runs read (they read them in place). */
static ly_status inputs_in_place(ly_et_method *m)
{
    size_t n = m->plan->n_inputs;
    m->input_in_place = calloc(n ? n : 1, sizeof *m->input_in_place);
    bool *read = calloc(m->n_v ? m->n_v : 1, sizeof *read);
    if (!m->input_in_place || !read) {
        free(read);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->what);
    }
    if (m->merged_calls) mark_reads(m, SIZE_MAX, 0, 0, true, read);
    for (size_t i = 0; i < n; i++)
        m->input_in_place[i] = m->merged_calls && !read[m->plan->inputs[i]];
    free(read);
    return LY_OK;
}

/* Every run of mergeable calls with a delegate among them (in chains
 * without jumps, in a method without moves: a value then has one writer and
 * is read after it) as one graph; a delegate alone too, which then reads the
 * method's inputs where the caller has them. */
static ly_status merge_calls(ly_et_method *m)
{
    if (m->has_moves) return LY_OK;
    const ly_pte_plan *plan = m->plan;
    for (size_t c = 0; c < plan->n_chains; c++) {
        const ly_pte_chain *chain = &plan->chains[c];
        bool jumps = false;
        for (size_t i = 0; i < chain->n_instructions; i++)
            jumps |= chain->instructions[i].type == LY_PTE_JUMP_FALSE_CALL;
        if (jumps) continue;
        for (size_t i = 0; i < chain->n_instructions;) {
            size_t end = i, calls = 0, delegates = 0;
            for (; end < chain->n_instructions &&
                   mergeable(m, &chain->instructions[end], &m->instr[c][end]);
                 end++) {
                calls += is_call(&chain->instructions[end]);
                delegates += chain->instructions[end].type == LY_PTE_DELEGATE_CALL;
            }
            if (end == i && chain->instructions[i].type == LY_PTE_KERNEL_CALL)
                ly_log(LY_LOG_DEBUG,
                       "%s: chain %zu, instruction %zu (%s) runs alone: no op of ours "
                       "takes it into a graph",
                       m->what, c, i,
                       m->plan->operators[chain->instructions[i].u.kernel_call.op_index].name);
            if (delegates == 0) {
                i = end > i ? end : i + 1;
                continue;
            }
            ly_status st;
            segment *sg = segment_make(m, c, i, end, &st);
            if (st != LY_OK) return st;
            if (sg) {
                ly_graph_ctx_share_arena(sg->ctx, &m->delegate_arena);
                m->instr[c][i].segment = sg;
                for (size_t k = i; k < end; k++)
                    m->instr[c][k].merged = true;
                m->merged_calls += calls;
                for (size_t k = i; k < end; k++)
                    if (chain->instructions[k].type == LY_PTE_DELEGATE_CALL)
                        ly_et_xnnpack_merged(
                            m->delegates[chain->instructions[k].u.delegate_call.delegate_index]);
                ly_log(LY_LOG_DEBUG,
                       "%s: chain %zu, instructions %zu-%zu run as one graph of %d nodes", m->what,
                       c, i, end - 1, ly_graph_node_count(sg->g));
            }
            i = end;
        }
    }
    return LY_OK;
}

/* Whether `p` lies in the arena the method's graphs run in. */
static bool in_arena(const ly_graph_arena *a, const void *p)
{
    const char *base = a->data;
    return base && (const char *)p >= base && (const char *)p < base + a->capacity;
}

static ly_status segment_run(ly_et_method *m, segment *sg, int threads)
{
    for (int i = 0; i < sg->n_inputs; i++) {
        sg->views[i] = m->v[sg->inputs[i]].t;
        for (size_t k = 0; k < m->plan->n_inputs; k++)
            if (m->plan->inputs[k] == sg->inputs[i] && m->input_in_place[k])
                sg->views[i].data = m->run_inputs[k].data;
    }
    ly_status st = ly_graph_run(sg->ctx, sg->n_inputs, sg->views, threads);
    /* Outputs that are views of the run's inputs first: the program's memory
     * plan may put a later value where such an input was (the arena is ours
     * alone). memmove: a view may meet its own destination. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; st == LY_OK && i < sg->n_outputs; i++) {
            ly_tensor view, *dst = &m->v[sg->outputs[i]].t;
            st = ly_graph_get_output(sg->ctx, i, &view, NULL);
            if (st != LY_OK || in_arena(&m->delegate_arena, view.data) != (pass == 1)) continue;
            if (ly_tensor_numel(&view) != ly_tensor_numel(dst) || view.dtype != dst->dtype)
                st = ly_set_error(LY_E_INTERNAL,
                                  "%s: value %d is %s of %lld elements, %s of %lld expected",
                                  m->what, (int)sg->outputs[i], ly_dtype_name(view.dtype),
                                  (long long)ly_tensor_numel(&view), ly_dtype_name(dst->dtype),
                                  (long long)ly_tensor_numel(dst));
            if (st == LY_OK)
                memmove(dst->data, view.data,
                        (size_t)ly_tensor_numel(dst) * ly_dtype_size(dst->dtype));
        }
    return st;
}

void ly_et_method_free(ly_et_method *m)
{
    if (!m) return;
    if (m->instr) {
        for (size_t c = 0; c < m->plan->n_chains; c++) {
            if (!m->instr[c]) continue;
            for (size_t i = 0; i < m->plan->chains[c].n_instructions; i++) {
                free(m->instr[c][i].delegate_args);
                segment_free(m->instr[c][i].segment);
            }
            free(m->instr[c]);
        }
        free(m->instr);
    }
    if (m->delegates)
        for (size_t i = 0; i < m->plan->n_delegates; i++)
            ly_et_xnnpack_free(m->delegates[i]);
    free(m->delegates);
    ly_graph_arena_release(&m->delegate_arena);
    free(m->input_in_place);
    for (size_t i = 0; i < m->n_buffers; i++)
        free(m->buffers ? m->buffers[i] : NULL);
    free(m->buffers);
    free(m->buffer_used);
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->v);
    free(m);
}

ly_status ly_et_method_load(const ly_pte_program *p, const char *what, ly_et_method **out)
{
    *out = NULL;
    const ly_pte_plan *plan = ly_pte_find_plan(p, LY_PTE_FORWARD);
    if (!plan)
        return ly_set_error(LY_E_FORMAT,
                            "%s: ExecuTorch program does not contain a 'forward' "
                            "method.",
                            what);
    ly_et_method *m = calloc(1, sizeof *m);
    if (!m) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    m->p = p;
    m->plan = plan;
    snprintf(m->what, sizeof m->what, "%s", what);
    ly_status st = load_values(m);
    if (st == LY_OK) st = check_buffer_sizes(m);
    if (st == LY_OK) {
        m->delegates = calloc(plan->n_delegates ? plan->n_delegates : 1, sizeof *m->delegates);
        if (!m->delegates) st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    for (size_t i = 0; st == LY_OK && i < plan->n_delegates; i++) {
        const ly_pte_delegate *d = &plan->delegates[i];
        if (!d->id || strcmp(d->id, LY_PTE_XNNPACK_BACKEND_ID) != 0) {
            st = ly_set_error(LY_E_NOT_FOUND, "%s: Backend %s is not registered.", what,
                              d->id ? d->id : "(null)");
            break;
        }
        if (!ly_et_xnnpack_available()) {
            st = ly_set_error(LY_E_UNSUPPORTED,
                              "%s: The installed ExecuTorch runtime does not provide "
                              "XnnpackBackend, but this program requires it.",
                              what);
            break;
        }
        ly_pte_bytes blob;
        st = ly_pte_delegate_blob(p, d, &blob);
        if (st != LY_OK) break;
        char dwhat[700];
        snprintf(dwhat, sizeof dwhat, "%s: delegate %zu", what, i);
        st = ly_et_xnnpack_init(p, &blob, dwhat, &m->delegates[i]);
    }
    /* Kernel checks read the tensors they are given: memory is bound first,
     * once values, buffer sizes and delegates have passed. */
    if (st == LY_OK) st = bind_memory(m);
    if (st == LY_OK) st = prepare(m);
    if (st == LY_OK) mark_unread(m);
    if (st == LY_OK) st = merge_calls(m);
    if (st == LY_OK) st = inputs_in_place(m);
    for (size_t i = 0; st == LY_OK && i < plan->n_delegates; i++)
        st = ly_et_xnnpack_finish(m->delegates[i], &m->delegate_arena);
    if (st != LY_OK) {
        ly_et_method_free(m);
        return st;
    }
    *out = m;
    return LY_OK;
}

size_t ly_et_method_num_inputs(const ly_et_method *m)
{
    return m->plan->n_inputs;
}

size_t ly_et_method_num_outputs(const ly_et_method *m)
{
    return m->plan->n_outputs;
}

ly_status ly_et_method_input_shape(const ly_et_method *m, size_t i, ly_tensor *shape)
{
    if (i >= m->plan->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: no input %zu", m->what, i);
    *shape = m->v[m->plan->inputs[i]].t;
    shape->data = NULL;
    return LY_OK;
}

size_t ly_et_method_operator_delegates(const ly_et_method *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->plan->n_delegates; i++)
        n += ly_et_xnnpack_runs_operators(m->delegates[i]);
    return n;
}

size_t ly_et_method_recognised_msda(const ly_et_method *m)
{
    return m->recognised_msda;
}

size_t ly_et_method_folded_sdpa(const ly_et_method *m)
{
    return m->folded_sdpa;
}

size_t ly_et_method_merged_calls(const ly_et_method *m)
{
    return m->merged_calls;
}

void ly_et_method_counts(const ly_et_method *m, size_t *delegate_calls, size_t *kernel_calls)
{
    if (delegate_calls) *delegate_calls = m->delegate_calls;
    if (kernel_calls) *kernel_calls = m->kernel_calls;
}

static ly_status run_chains(ly_et_method *m, int threads);

ly_status ly_et_method_execute(ly_et_method *m, const ly_tensor *inputs, size_t n_inputs,
                               int threads)
{
    const ly_pte_plan *plan = m->plan;
    if (n_inputs != plan->n_inputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %zu inputs given, the method takes %zu",
                            m->what, n_inputs, plan->n_inputs);
    for (size_t i = 0; i < n_inputs; i++) {
        et_value *v = &m->v[plan->inputs[i]];
        const ly_tensor *x = &inputs[i];
        bool same = x->dtype == v->t.dtype && x->ndim == v->t.ndim && x->data;
        for (int k = 0; same && k < x->ndim; k++)
            same = x->shape[k] == v->t.shape[k];
        /* what is copied is what the caller's tensor holds */
        same = same && (uint64_t)ly_tensor_numel(x) * ly_dtype_size(x->dtype) == v->nbytes;
        if (!same) {
            char got[96], want[96];
            return ly_set_error(LY_E_SHAPE, "%s: input %zu is %s %s, the program takes %s %s",
                                m->what, i, ly_dtype_name(x->dtype),
                                ly_shape_str(x, got, sizeof got), ly_dtype_name(v->t.dtype),
                                ly_shape_str(&v->t, want, sizeof want));
        }
        if (!m->input_in_place[i]) memcpy(v->t.data, x->data, (size_t)v->nbytes);
    }
    m->run_inputs = inputs;
    /* Portable kernels and the delegates' own loops on the delegates' workers
     * where every delegate runs XNNPACK operators; where some run as our
     * graphs, only the others' calls do (oneDNN's OpenMP team beside a
     * spinning pthreadpool took 3x the time on 2 cores). */
    ly_parallel_runner pool;
    size_t operators = ly_et_method_operator_delegates(m);
    bool pooled =
        operators > 0 && operators == m->plan->n_delegates && ly_et_xnnpack_runner(threads, &pool);
    const ly_parallel_runner *previous = pooled ? ly_parallel_use(&pool) : NULL;
    m->pooled_run = pooled;
    ly_status st = run_chains(m, threads);
    m->run_inputs = NULL;
    if (pooled) ly_parallel_use(previous);
    return st;
}

/* A delegate that runs XNNPACK operators in a method that also runs our
 * graphs: its own loops on its workers for the call's length. */
static ly_status delegate_call(const ly_et_method *m, ly_et_xnnpack *d, ly_tensor *const *args,
                               size_t n, int threads)
{
    ly_parallel_runner pool;
    bool pooled =
        !m->pooled_run && ly_et_xnnpack_runs_operators(d) && ly_et_xnnpack_runner(threads, &pool);
    const ly_parallel_runner *previous = pooled ? ly_parallel_use(&pool) : NULL;
    ly_status st = ly_et_xnnpack_execute(d, args, n, threads);
    if (pooled) ly_parallel_use(previous);
    return st;
}

static ly_status run_chains(ly_et_method *m, int threads)
{
    const ly_pte_plan *plan = m->plan;
    for (size_t c = 0; c < plan->n_chains; c++) {
        const ly_pte_chain *chain = &plan->chains[c];
        size_t budget = (chain->n_instructions + 1) * 4096, pc = 0;
        while (pc < chain->n_instructions) {
            if (budget-- == 0)
                return ly_set_error(LY_E_FORMAT, "%s: chain %zu did not finish (a jump loop?)",
                                    m->what, c);
            const ly_pte_instruction *in = &chain->instructions[pc];
            const instr_rt *rt = &m->instr[c][pc];
            ly_status st = LY_OK;
            size_t next = pc + 1;
            if (rt->segment) {
                st = segment_run(m, rt->segment, threads);
                if (st != LY_OK) return st;
                pc = rt->segment->end;
                continue;
            }
            switch (in->type) {
            case LY_PTE_KERNEL_CALL:
                if (m->has_moves)
                    st = ly_et_kernel_check(rt->kernel, m->v, in->u.kernel_call.args,
                                            in->u.kernel_call.n_args, m->what);
                if (st == LY_OK) st = rt->kernel->run(m->v, in->u.kernel_call.args, threads);
                break;
            case LY_PTE_DELEGATE_CALL:
                st = delegate_call(m, m->delegates[in->u.delegate_call.delegate_index],
                                   rt->delegate_args, in->u.delegate_call.n_args, threads);
                break;
            case LY_PTE_MOVE_CALL:
                m->v[in->u.move_call.move_to] = m->v[in->u.move_call.move_from];
                break;
            case LY_PTE_JUMP_FALSE_CALL:
                if (!m->v[in->u.jump_false_call.cond_value_index].b)
                    next = (size_t)in->u.jump_false_call.destination_instruction;
                break;
            default:
                break;
            }
            if (st != LY_OK) return st;
            pc = next;
        }
    }
    return LY_OK;
}

ly_status ly_et_method_output(const ly_et_method *m, size_t i, ly_tensor *view)
{
    if (i >= m->plan->n_outputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: no output %zu", m->what, i);
    *view = m->v[m->plan->outputs[i]].t;
    return LY_OK;
}
