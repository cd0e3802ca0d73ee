/* SPDX-License-Identifier: MIT */
/*
 * The parity harness, as `libreyolo kernels check` runs it: every registered
 * implementation of every op against the portable reference, by the op's
 * parity rule (bit-identical, or within its tolerance), on a deterministic set
 * of cases. How it works: src/kernels/check.h.
 */
#ifndef LIBREYOLO_CHECK_H
#define LIBREYOLO_CHECK_H

#include "libreyolo/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LY_CHECK_MAX_SHOWN 5

typedef enum ly_check_size {
    LY_CHECK_QUICK = 0, /* every shape, fewer variants on large tensors (tests, sanitizers) */
    LY_CHECK_FULL = 1   /* every shape x distribution x variant, plus the largest shapes */
} ly_check_size;

/* One mismatching element. Strings are owned by the struct. */
typedef struct ly_check_mismatch {
    char case_name[112];
    char run[48];     /* which run of the case: "" (plain), "second call", "out[0] over
                         in[0]", "prepared: in nChw8c, out plain", ... */
    char shape[48];   /* output shape, "[128, 64, 3, 3]" */
    int output;       /* which output of the slot */
    int64_t index;    /* flat index into that output; >= numel: written past the end */
    char inputs[160]; /* the input value(s) this element depends on, with hex bits */
    float reference;  /* reference value (and bits) */
    uint32_t reference_bits;
    float impl; /* implementation value (and bits) */
    uint32_t impl_bits;
} ly_check_mismatch;

/* Outcome for one (slot, implementation). */
typedef struct ly_check_result {
    const char *slot;
    const char *impl;
    bool skipped; /* not eligible on this machine: nothing was run */
    char why_skipped[128];
    bool exact;       /* bit identity required */
    bool relative;    /* tolerance scaled by max(1, max |ref|) */
    double tolerance; /* 0 when exact */
    int64_t cases;    /* cases compared */
    int64_t prepared; /* of which through its stateful form (one per layout offered) */
    int64_t rejected; /* cases the slot's validator rejected (not run by anyone) */
    int64_t declined; /* cases this implementation declined (its predicate or LY_E_DECLINED) */
    int64_t errors;   /* runs that failed, modified inputs or wrote out of bounds */
    char first_error[256];
    int64_t elements; /* output elements compared */
    int64_t mismatches;
    int64_t bit_differences; /* elements whose bits differ (>= mismatches) */
    double max_abs_diff;     /* over compared elements; inf when a NaN/inf disagreed */
    int n_shown;
    ly_check_mismatch shown[LY_CHECK_MAX_SHOWN];
} ly_check_result;

/* Called once per (slot, implementation), after that slot's cases ran. */
typedef void (*ly_check_report_fn)(const ly_check_result *result, void *user);
/* Progress: case `done` of `total` of `slot` finished. */
typedef void (*ly_check_progress_fn)(const char *slot, int64_t done, int64_t total, void *user);

typedef struct ly_check_options {
    const char *slot; /* NULL: every slot */
    const char *impl; /* NULL: every implementation but "reference"; "reference" checks
                         the reference against itself (determinism) */
    int threads;      /* passed to every call; 0: LIBREYOLO_THREADS, else all CPUs */
    ly_check_size size;
    ly_check_progress_fn progress; /* may be NULL */
    void *progress_user;
    /* More runs per case (the parity tests ask for them): */
    bool repeat;           /* each implementation runs a case twice, then once more after the
                              case's constant inputs were rewritten at the same addresses
                              (caches keyed by address must not serve what they packed before) */
    uint32_t alias_inputs; /* bit k: also run with out[0] over in[k] where their shapes
                              match (element-wise ops always do, over every input) */
    const char *cases;     /* only the cases whose name contains this (NULL: all) */
} ly_check_options;

/* Runs the harness with the quick case set. Mismatches are results, not
 * failures: the status reports only what stopped the harness itself (unknown
 * slot or implementation, no memory). */
LY_API ly_status ly_check_parity(const char *slot_or_null, const char *impl_or_null, int threads,
                                 ly_check_report_fn report, void *user);
LY_API ly_status ly_check_parity_ex(const ly_check_options *options, ly_check_report_fn report,
                                    void *user);

/* True when `result` fails the gate (any mismatch or error). */
static inline bool ly_check_result_failed(const ly_check_result *result)
{
    return result && !result->skipped && (result->mismatches > 0 || result->errors > 0);
}

/* Human-readable verdict: "bit-identical", "within 1e-6", "MISMATCH", "ERROR",
 * "skipped: <why>", "no cases run (all declined)", written into buf. */
LY_API ly_status ly_check_verdict(const ly_check_result *result, char *buf, size_t size);

/* ---- The cases as benchmark inputs --------------------------------------------- */

/* A realistic call of one slot, from its op's case set (what `libreyolo bench
 * kernels` times). */
typedef struct ly_check_call {
    ly_kernel_call call; /* inputs, params and outputs (from the op's contract) */
    double bytes;        /* what the op must move: bytes read + written, each once */
    bool speed_target;   /* the quant kernels' target applies (>= 8x the reference
                            and >= 50% of copy bandwidth, one thread) */
    void *owner;         /* what ly_check_call_free releases */
} ly_check_call;

/* The benchmark call of `slot` whose largest tensors hold `numel` fp32
 * elements. LY_E_UNSUPPORTED: the slot's cases have no benchmark recipe. */
LY_API ly_status ly_check_bench_call(const char *slot, size_t numel, ly_check_call *out);
LY_API void ly_check_call_free(ly_check_call *c);

#ifdef __cplusplus
}
#endif

#endif
