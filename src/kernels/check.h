/* SPDX-License-Identifier: MIT */
/*
 * The parity harness (checkasm style).
 *
 * For every op of the manifest, every registered implementation other than
 * "reference" is run on a deterministic set of cases next to the reference,
 * each into its own output buffer, and the outputs are compared by the op's
 * parity rule (the manifest's parity column):
 *   - EXACT: bit patterns must be identical (NaN payloads and signed zeros count);
 *   - GRAD(t): |impl - ref| <= t, NaN only with NaN;
 *   - TOL(t): |impl - ref| <= t * max(1, max |ref|) over each output.
 * Besides values, the runner catches an implementation that leaves part of its
 * output unwritten (each run starts from a different canary), writes past the
 * end of an output (guard bytes), or modifies its inputs. Outputs are aligned
 * or misaligned by one element, as the case asks. An implementation with a
 * stateful form is run through it as well: prepared once per case with every
 * layout it offers (plain, and channel-blocked inputs and outputs), its inputs
 * reordered to that layout and its outputs back.
 *
 * Cases come from the op's folder (the manifest's check column): the quant
 * harness (src/ops/quant/cases.c: real-model shapes x value distributions x
 * operand variants, edge values, midpoints), ms_deform_attn and sdpa
 * (src/ops/{msda,sdpa}/cases.c), or the op's own ly_cases_<name> run by this
 * file. Every case is seeded from its name, so a reported case reproduces alone.
 */
#ifndef LY_KERNELS_CHECK_H
#define LY_KERNELS_CHECK_H

#include "libreyolo/check.h"
#include "ops/ops_internal.h"

#include <math.h>

/* ---- The shared runner (harnesses of the op folders) ------------------------------ */

/* The implementations of one op that the options select, each with its result. */
typedef struct ly_check_run ly_check_run;

/* Start checking `op`: lists its implementations (skipped ones get their
 * reason). *n_matched grows by the number the options select. */
ly_status ly_check_run_begin(ly_op op, const ly_check_options *options, int64_t total_cases,
                             ly_check_run **out, int *n_matched);
/* Whether any selected implementation can run here (else there is nothing to do). */
bool ly_check_run_active(const ly_check_run *run);

/* Names the inputs behind output element `index` of output `out` (for reports). */
typedef void (*ly_check_describe_fn)(const void *user, int out, int64_t index, char *buf,
                                     size_t size);

/* One case: `call` holds its inputs and params (its outputs are allocated here
 * from the contract; a call the contract refuses counts as rejected). `constant`
 * (bit i: in[i] is a weight) tells stateful forms what they may pack. Returns a
 * failure only for what stops the harness (no memory). */
ly_status ly_check_run_case(ly_check_run *run, const char *name, const ly_kernel_call *call,
                            uint32_t constant, bool misaligned, ly_check_describe_fn describe,
                            const void *describe_user);

/* Report every result, free the run. */
void ly_check_run_end(ly_check_run *run, ly_check_report_fn report, void *user);

/* The op's own cases (ly_cases_<name>, the manifest's check column CASES),
 * each passed to `adjust` (may be NULL) before it runs: a test that needs a
 * case's inputs drawn otherwise (see test_parity's 7-bit int8 inputs). */
typedef void (*ly_check_adjust_fn)(ly_check_case *c);
ly_status ly_check_cases_op(ly_op op, const ly_check_options *options, ly_check_adjust_fn adjust,
                            ly_check_report_fn report, void *user, int *n_matched);
/* What the per-folder harnesses provide (the manifest's check column). */
ly_status ly_check_quant_op(ly_op op, const ly_check_options *options, ly_check_report_fn report,
                            void *user, int *n_matched);
ly_status ly_check_msda_op(ly_op op, const ly_check_options *options, ly_check_report_fn report,
                           void *user, int *n_matched);
ly_status ly_check_sdpa_op(ly_op op, const ly_check_options *options, ly_check_report_fn report,
                           void *user, int *n_matched);

/* Counts an error; only the first one's text is kept. */
void ly_check_note_error(ly_check_result *r, const char *fmt, ...) LY_PRINTF(2, 3);

/* |a - b| where NaN matches only NaN and an infinity only itself. */
static inline double ly_check_abs_diff(float a, float b)
{
    if (isnan(a) && isnan(b)) return 0.0;
    if (isnan(a) || isnan(b)) return INFINITY;
    if (a == b) return 0.0;
    if (isinf(a) || isinf(b)) return INFINITY;
    return fabs((double)a - (double)b);
}

/* ---- Building cases (ly_cases_<name>) ------------------------------------------- */

/* Tensor in[index] of `c`: uniform in [-scale, scale) (f32), seeded by *seed. */
ly_status ly_check_case_random(ly_check_case *c, int index, int ndim, const int64_t *shape,
                               float scale, uint64_t *seed);
/* Tensor in[index] of `c` of any dtype, zeroed (the caller fills it). */
void *ly_check_case_input(ly_check_case *c, int index, ly_dtype dtype, int ndim,
                          const int64_t *shape);
/* The params to pass (copied into the case). */
void ly_check_case_params(ly_check_case *c, const void *params, size_t size);
void ly_check_case_free(ly_check_case *c);

#endif
