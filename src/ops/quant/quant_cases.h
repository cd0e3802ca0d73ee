/* SPDX-License-Identifier: MIT */
/*
 * The quant ops' parity cases: one set, ly_cases_quant (cases.c), in three
 * families, each generated independently of the library's own quantizers (the
 * cases need plausible and deliberately implausible operands, not the
 * oracle's):
 *   grid   (cases_grid.c): real-model weight shapes x value distributions x
 *          operand variants (dynamic, frozen and hostile scales, packed widths);
 *   sweep  (cases_sweep.c): shapes x fills (normal, wide exponents, specials,
 *          exact rounding ties on the scales that make them ties) x every
 *          operand variant, shapes above the threading threshold, gradients
 *          with NaN, inf and -0;
 *   stream (cases_sweep.c): outputs large enough for the streaming stores, at
 *          offsets that take each of their alignment paths.
 */
#ifndef LY_OPS_QUANT_QUANT_CASES_H
#define LY_OPS_QUANT_QUANT_CASES_H

#include "core/core.h"
#include "libreyolo/quant.h"
#include "ops/cases.h"
#include "ops/quant/numerics.h"

#include <string.h>

typedef enum quant_kind {
    K_INT8_PER_CHANNEL,
    K_INT8_AFFINE,
    K_FP8,
    K_INT_GROUPED,
    K_NVFP4_WEIGHT,
    K_NVFP4_DYNAMIC,
    K_MXFP4_WEIGHT,
    K_MXFP4_DYNAMIC,
    K_UNPACK_INT_GROUPED,
    K_UNPACK_NVFP4,
    K_UNKNOWN
} quant_kind;

/* The kind of a quant op, and whether it is the backward of that kind. */
quant_kind ly_quant_case_kind(ly_op op, bool *backward);

static inline bool quant_unpacks(quant_kind k)
{
    return k == K_UNPACK_INT_GROUPED || k == K_UNPACK_NVFP4;
}

/* A family of cases of one kind (and direction). */
typedef struct quant_family {
    int64_t (*count)(quant_kind kind, bool backward, bool full);
    /* The name of case `index`, as build gives it to a case at `offset`,
     * without building it; false past the last. */
    bool (*name)(quant_kind kind, bool backward, int64_t index, bool full, int offset, char *buf,
                 size_t size);
    /* Case `index` into c (ly_check_case_init'ed), named first: the name
     * seeds its values. */
    ly_status (*build)(ly_op op, quant_kind kind, bool backward, int64_t index, bool full,
                       ly_check_case *c);
} quant_family;

extern const quant_family ly_quant_grid_cases, ly_quant_sweep_cases, ly_quant_stream_cases;

/* ---- Shared by the families ------------------------------------------------------- */

typedef ly_check_rng rng;

/* A tensor shape of a family; `big` ones are in the full set only. */
typedef struct quant_shape {
    int ndim;
    int64_t dim[4];
    bool big;
} quant_shape;

static inline int64_t quant_shape_numel(const quant_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dim[i];
    return n;
}

/* in[index] of `c`; NULL (with *oom set) when out of memory. */
static inline void *add_input(ly_check_case *c, int index, ly_dtype dtype, int ndim,
                              const int64_t *shape, bool *oom)
{
    void *data = ly_check_case_input(c, index, dtype, ndim, shape);
    if (!data) *oom = true;
    return data;
}

void ly_quant_append(char *buf, size_t size, const char *fmt, ...) LY_PRINTF(3, 4);
/* "[2,3,47]" */
void ly_quant_shape_text(int ndim, const int64_t *dim, char *buf, size_t size);
/* E4M3FN code -> value, from the format's definition (not the code it checks). */
float ly_quant_e4m3_value(unsigned code);

#endif
