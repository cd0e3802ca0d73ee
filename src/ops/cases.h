/* SPDX-License-Identifier: MIT */
/*
 * Parity cases: the inputs an op's folder gives everything that runs the op
 * against its reference. Each op's cases come from one place, its folder's
 * cases.c, which defines the case set the manifest's check column names
 * (ly_cases_<check>, declared from the manifest in ops/ops_internal.h); the
 * parity harness (src/kernels/check.c, `libreyolo kernels check`), the parity
 * tests and `libreyolo bench kernels` all draw from it.
 *
 * A case owns its tensors. Every case is seeded from its name (ly_check_seed),
 * so a reported case reproduces alone.
 */
#ifndef LY_OPS_CASES_H
#define LY_OPS_CASES_H

#include "libreyolo/kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LY_CHECK_MAX_PARAMS 256

/* The inputs and params of one call of an op. */
typedef struct ly_check_case {
    char name[112];
    ly_tensor in[LY_KERNEL_MAX_INPUTS];
    bool present[LY_KERNEL_MAX_INPUTS];  /* false: in[i] is NULL in the call */
    bool constant[LY_KERNEL_MAX_INPUTS]; /* a weight: prepared implementations may pack it */
    _Alignas(8) unsigned char params[LY_CHECK_MAX_PARAMS];
    bool has_params; /* false: NULL params (the defaults) */
    /* Elements past a 64-byte boundary at which the case's tensors start,
     * inputs and outputs alike: implementations meet aligned and misaligned
     * memory (ly_check_case_init sets 1 on every other case; a builder may set
     * another offset before it allocates). */
    int offset;
    /* More runs of each implementation with its outputs elsewhere (bit k: k
     * elements past a 64-byte boundary): streaming stores take one path per
     * alignment. */
    uint32_t out_offsets;
    void *alloc[LY_KERNEL_MAX_INPUTS]; /* what in[i].data points into */
} ly_check_case;

/* What a benchmark call says besides its tensors. */
typedef struct ly_case_bench {
    double bytes;      /* what the op must move; 0: every input read once and
                          every output written once */
    bool speed_target; /* the quant kernels' target applies (>= 8x the reference
                          and >= 50% of copy bandwidth, one thread) */
} ly_case_bench;

/* An op's cases, as its folder defines them. `op` is the op asking (a set may
 * serve several); `full` asks for the full set (every variant on large
 * tensors, the largest shapes), else the quick one (tests, sanitizers). */
typedef struct ly_case_set {
    /* Fill case `index` (ly_check_case_init'ed); LY_E_NOT_FOUND past the last. */
    ly_status (*build)(ly_op op, int64_t index, bool full, ly_check_case *c);
    /* How many cases the set holds, without building them; NULL: counted by
     * building each (for sets of small tensors). */
    int64_t (*count)(ly_op op, bool full);
    /* The name case `index` gets, without building it (false past the last);
     * NULL: built to learn it. */
    bool (*name)(ly_op op, int64_t index, bool full, char *buf, size_t size);
    /* The input values behind element `index` of output `out` (of `shape`),
     * for a mismatch report; NULL: the report names the tolerance. */
    void (*describe)(ly_op op, const ly_check_case *c, int out, const ly_tensor *shape,
                     int64_t index, char *buf, size_t size);
    /* `libreyolo bench kernels`: a realistic call whose largest tensors hold
     * `numel` fp32 elements (*b zeroed on entry); LY_E_NOT_FOUND: no recipe
     * for this op; NULL: none for any op of the set. */
    ly_status (*bench)(ly_op op, size_t numel, ly_check_case *c, ly_case_bench *b);
} ly_case_set;

/* ---- Building cases ----------------------------------------------------------- */

/* An empty case; odd indices misaligned by one element. */
void ly_check_case_init(ly_check_case *c, int64_t index);
/* Tensor in[index] of any dtype, zeroed, at the case's offset (the caller
 * fills it); NULL when out of memory. */
void *ly_check_case_input(ly_check_case *c, int index, ly_dtype dtype, int ndim,
                          const int64_t *shape);
/* Tensor in[index]: uniform in [-scale, scale) (f32), seeded by *seed. */
ly_status ly_check_case_random(ly_check_case *c, int index, int ndim, const int64_t *shape,
                               float scale, uint64_t *seed);
/* Tensor in[index] of benchmark size: roughly normal(0, 1) (a sum of four
 * uniforms, no logs), seeded by `seed`; a prefix of a larger tensor of the
 * same seed holds the same values. */
ly_status ly_check_case_normalish(ly_check_case *c, int index, int ndim, const int64_t *shape,
                                  uint64_t seed);
/* The params to pass (copied into the case). */
void ly_check_case_params(ly_check_case *c, const void *params, size_t size);
void ly_check_case_free(ly_check_case *c);

/* The case of `op`'s set named `name` (LY_E_NOT_FOUND: it has none). */
ly_status ly_check_case_named(ly_op op, bool full, const char *name, ly_check_case *c);

/* The call a case makes (outputs left unset) and its constant inputs (bit i:
 * in[i] is a weight). */
void ly_check_case_call(const ly_check_case *c, ly_kernel_call *call, uint32_t *constant);

/* Memory for `bytes` starting `offset` bytes past a 64-byte boundary, with
 * LY_CHECK_GUARD_BYTES after it and before it; *alloc is what to free. */
#define LY_CHECK_GUARD_BYTES 64
void *ly_check_alloc(size_t bytes, size_t offset, void **alloc);

/* ---- Sets enumerated from specs ------------------------------------------------- */

/* A set that describes its cases by small specs, visited in order (so they can
 * be counted, named and found without building any): the visitor returns
 * false to stop. */
typedef bool (*ly_case_visit_fn)(const void *spec, void *user);

/* Finds the index-th spec (copying `size` bytes of it into `spec`). */
typedef struct ly_case_finder {
    int64_t index;
    void *spec;
    size_t size;
    bool found;
} ly_case_finder;

static inline bool ly_case_find(const void *spec, void *user)
{
    ly_case_finder *f = user;
    if (f->index-- > 0) return true;
    memcpy(f->spec, spec, f->size);
    f->found = true;
    return false;
}

/* Counts the specs (user: an int64_t). */
static inline bool ly_case_count(const void *spec, void *user)
{
    (void)spec;
    ++*(int64_t *)user;
    return true;
}

/* ---- The cases' deterministic generator ---------------------------------------- */

/* splitmix64, seeded from a case's name. */
typedef struct ly_check_rng {
    uint64_t state;
    /* Box-Muller's second value, handed out by the next call */
    float spare;
    int has_spare;
} ly_check_rng;

static inline uint64_t ly_check_rng_next(ly_check_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t ly_check_rng_below(ly_check_rng *r, uint64_t n)
{
    return n ? ly_check_rng_next(r) % n : 0;
}

/* Uniform in [0, 1) with 53 bits. */
static inline double ly_check_rng_unit(ly_check_rng *r)
{
    return (double)(ly_check_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Box-Muller in float, both values used: filling the cases' tensors was a
 * third of the parity gate's time with one double log and cos per value. */
static inline float ly_check_rng_normal(ly_check_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    float u1 = (float)((ly_check_rng_next(r) >> 40) + 1) * 0x1.0p-24f; /* (0, 1] */
    float u2 = (float)(ly_check_rng_next(r) >> 40) * 0x1.0p-24f;
    float radius = sqrtf(-2.0f * logf(u1)), angle = 6.2831853f * u2;
    r->spare = radius * sinf(angle);
    r->has_spare = 1;
    return radius * cosf(angle);
}

/* FNV-1a of "a|b": the seed of case `b` of slot `a`. */
static inline uint64_t ly_check_seed(const char *a, const char *b)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *s = a; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    h = (h ^ '|') * 0x100000001B3ull;
    for (const char *s = b; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

#endif
