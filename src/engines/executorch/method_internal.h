/* SPDX-License-Identifier: MIT */
/* The method executor's values, shared with the portable kernels (internal). */
#ifndef LY_BACKENDS_EXECUTORCH_METHOD_INTERNAL_H
#define LY_BACKENDS_EXECUTORCH_METHOD_INTERNAL_H

#include "engines/executorch/et_runtime.h"
#include "graph/graph.h"
#include "pte/op_schema.h"

typedef struct et_value {
    ly_pte_evalue_type type;
    /* tensors */
    ly_tensor t;     /* view: data, dtype (f32 for FLOAT), shape */
    int scalar_type; /* ly_pte_scalar_type */
    bool writable;   /* planned or private memory (not a constant) */
    bool contiguous; /* dim_order is 0..n-1 */
    uint64_t nbytes;
    /* where memory is bound once the whole program is validated: planned
     * buffer `memory_id` (1-based) at `memory_offset`, or 0 with `own_memory`
     * for a tensor of its own */
    uint32_t memory_id;
    uint64_t memory_offset;
    bool own_memory;
    /* scalars and lists (pointing into the program) */
    int64_t i;
    double d;
    bool b;
    const int64_t *ints;
    const double *doubles;
    const int32_t *tensors; /* tensor list: value indices */
    size_t n_items;
    /* no instruction reads it and the method does not return it: a kernel
     * may leave such an out tensor unwritten (native_layer_norm's saved
     * statistics) */
    bool unread;
} et_value;

typedef struct et_kernel et_kernel;

/* A portable kernel for one operator schema: `check` validates the values of
 * a call whose arguments the schema has type-checked (dtypes, shapes, that
 * outputs are writable), `run` executes it. Args are value indices, already
 * checked to be in range. */
struct et_kernel {
    const ly_pte_op_schema *schema;
    ly_status (*check)(const et_value *v, const int32_t *args, const char *what);
    ly_status (*run)(et_value *v, const int32_t *args, int threads);
    /* Optional: the call as a node of a graph in which the method runs it
     * with its neighbours (map: each value's graph value by value index; the
     * tensors it reads are mapped, it maps what it writes); with g NULL only
     * whether it can (LY_OK) or not (LY_E_DECLINED). */
    ly_status (*node)(const et_value *v, const int32_t *args, ly_graph *g, ly_graph_value *map);
};

/* The kernel registered for (name, overload), NULL if none. */
const et_kernel *ly_et_find_kernel(const char *name, const char *overload);
/* A call's arguments against the kernel's schema, then its values. */
ly_status ly_et_kernel_check(const et_kernel *k, const et_value *v, const int32_t *args, size_t n,
                             const char *what);

#endif
