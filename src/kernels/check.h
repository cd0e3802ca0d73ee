/*
 * The parity harness (checkasm style).
 *
 * For every slot, every registered implementation other than "reference" is run
 * on a deterministic set of cases next to the reference, each into its own
 * output buffer, and the two outputs are compared element by element:
 *   - forward and unpack slots must be BIT-identical (bit patterns are compared,
 *     so NaN payloads and the sign of zero count);
 *   - "<op>_backward" slots must agree within |diff| <= 1e-6 (NaN only with NaN).
 * Besides values, the harness also catches an implementation that leaves part
 * of its output unwritten (each run starts from a different canary), writes
 * past the end of an output (guard bytes), or modifies its inputs.
 *
 * Cases are shapes drawn from real models (YOLO/DETR conv and linear weights),
 * odd sizes and tails, one-element and empty tensors, times value distributions
 * (normal, outliers, subnormals, an edge-value tensor, exact rounding
 * midpoints), times the slot's operand variants (dynamic and frozen scales,
 * bits/group sizes, in_features, block-scale codes, ...). A case the slot's
 * validator rejects is counted as "rejected" and not run. Every case is seeded
 * from its name (splitmix64), so a reported case can be reproduced alone.
 */
#ifndef LY_KERNELS_CHECK_H
#define LY_KERNELS_CHECK_H

#include "libreyolo/kernels.h"

#define LY_CHECK_BACKWARD_TOLERANCE 1e-6
#define LY_CHECK_MAX_SHOWN 5

typedef enum ly_check_size {
    LY_CHECK_QUICK = 0, /* every shape, fewer variants on large tensors (tests, sanitizers) */
    LY_CHECK_FULL = 1   /* every shape x distribution x variant, plus the largest shapes */
} ly_check_size;

/* One mismatching element. Strings are owned by the struct. */
typedef struct ly_check_mismatch {
    char case_name[112];
    char shape[48];   /* output shape, "[128, 64, 3, 3]" */
    int output;       /* which output of the slot (0 for every quant slot) */
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
    bool exact;       /* bit-identity required (forward/unpack) vs tolerance (backward) */
    double tolerance; /* 0 when exact */
    int64_t cases;    /* cases compared */
    int64_t rejected; /* cases the slot's validator rejected (not run by anyone) */
    int64_t declined; /* cases this implementation declined (its predicate or LY_E_DECLINED) */
    int64_t errors;   /* runs that failed, modified inputs or wrote out of bounds */
    char first_error[256];
    int64_t elements; /* output elements compared */
    int64_t mismatches;
    int64_t bit_differences; /* elements whose bits differ (>= mismatches; backward only) */
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
} ly_check_options;

/* Runs the harness with the quick case set. Mismatches are results, not
 * failures: the status reports only what stopped the harness itself (unknown
 * slot or implementation, no memory). */
ly_status ly_check_parity(const char *slot_or_null, const char *impl_or_null, int threads,
                          ly_check_report_fn report, void *user);

ly_status ly_check_parity_ex(const ly_check_options *options, ly_check_report_fn report,
                             void *user);

/* Network-op slots (conv2d, pools, upsample, silu, sigmoid, dfl) are gated by a
 * tolerance: |impl - reference| <= LY_CHECK_NN_TOLERANCE * max(1, max|reference|)
 * (libraries sum in their own order and bring their own exp). */
#define LY_CHECK_NN_TOLERANCE 1e-4
bool ly_check_is_nn_slot(const char *slot);
ly_status ly_check_nn_slot(const char *slot, const ly_check_options *options,
                           ly_check_report_fn report, void *user, int *n_matched);

/* Slots whose cases are generated next to their kernels (attention): same
 * contract as one slot of ly_check_parity_ex; *n_matched counts the
 * implementations that matched options->impl. */
ly_status ly_check_msda_slot(const char *slot, const ly_check_options *options,
                             ly_check_report_fn report, void *user, int *n_matched);
ly_status ly_check_sdpa_slot(const char *slot, const ly_check_options *options,
                             ly_check_report_fn report, void *user, int *n_matched);

/* True when `result` fails the gate (any mismatch or error). */
bool ly_check_result_failed(const ly_check_result *result);

/* Human-readable verdict: "bit-identical", "within 1e-6", "MISMATCH", "ERROR",
 * "skipped: <why>", "no cases run (all declined)". Written into buf. */
const char *ly_check_verdict(const ly_check_result *result, char *buf, size_t size);

#endif
