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
 * output unwritten (each run starts from a different canary), writes outside
 * an output (guard bytes either side), or modifies its inputs. Inputs and
 * outputs start where the case asks: 64-byte aligned, or misaligned by one
 * element on every other case, or another offset. An implementation with a
 * stateful form is run through it as well: prepared once per case with every
 * layout it offers (plain, and channel-blocked inputs and outputs), its inputs
 * reordered to that layout and its outputs back. An element-wise op (the
 * manifest's layout column) is also run as a graph runs it: in place, out[0]
 * over each input of its shape, and on channel-blocked maps. On request
 * (ly_check_options) every case runs twice and again with its constant inputs
 * rewritten at the same addresses (operator caches), and with out[0] over
 * other inputs (conv2d's residual).
 *
 * Cases come from the op's folder: the case set its manifest line names
 * (ops/cases.h), which also says what the inputs behind a mismatching element
 * were. Every case is seeded from its name, so a reported case reproduces alone.
 */
#ifndef LY_KERNELS_CHECK_H
#define LY_KERNELS_CHECK_H

#include "libreyolo/check.h"
#include "ops/ops_internal.h"

/* Checks one op of the manifest on its case set (ly_cases_<check>): every
 * case passes through `adjust` (may be NULL) before it runs, for a test that
 * needs a case's inputs drawn otherwise (see test_parity's 7-bit int8 inputs).
 * *n_matched grows by the number of implementations the options select. */
typedef void (*ly_check_adjust_fn)(ly_check_case *c);
ly_status ly_check_op(ly_op op, const ly_check_options *options, ly_check_adjust_fn adjust,
                      ly_check_report_fn report, void *user, int *n_matched);

#endif
