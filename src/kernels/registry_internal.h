/* SPDX-License-Identifier: MIT */
/*
 * The registry's internal surface: what the graph, the parity harness and the
 * loaders (plugins, built-in providers, hub) use beyond the public API.
 */
#ifndef LY_KERNELS_REGISTRY_INTERNAL_H
#define LY_KERNELS_REGISTRY_INTERNAL_H

#include "libreyolo/kernels.h"

/* Load every provider once (plugin.c, then src/providers/builtin.c, then the
 * hub), each registering through the public calls. Called by the registry at
 * the first resolution, with no registry lock held. */
void ly_providers_load(void);
void ly_plugins_load(void);

/* LIBREYOLO_KERNELS (or its legacy alias), stripped and lower-cased. Read it
 * once and pass it on when resolving many calls as one (a graph run). */
#define LY_SELECTION_MAX 64
typedef struct ly_selection {
    char text[LY_SELECTION_MAX];
} ly_selection;
void ly_selection_read(ly_selection *selection);
bool ly_selection_equal(const ly_selection *a, const ly_selection *b);

/* Bumped by every registration, unregistration, clear_cache and disable: an
 * answer computed under another generation may be stale. */
uint64_t ly_kernel_generation(void);

/* A registered implementation (valid for the life of the process). */
typedef struct ly_impl ly_impl;
const char *ly_impl_name(const ly_impl *impl);
ly_kernel_fn ly_impl_fn(const ly_impl *impl);
const ly_kernel_stateful *ly_impl_stateful(const ly_impl *impl);
bool ly_impl_is_reference(const ly_impl *impl);

/* Check `call` against op's contract, with NULL params replaced by the op's
 * defaults in *resolved; *use points to whichever of call and resolved to run. */
ly_status ly_kernel_validate(ly_op op, const ly_kernel_call *call, ly_kernel_call *resolved,
                             const ly_kernel_call **use);

/* The first implementation that accepts `call` under `selection` (the call's
 * data may be NULL: a graph plans from shapes). */
ly_status ly_kernel_select(ly_op op, const ly_selection *selection, const ly_kernel_call *call,
                           const ly_impl **out);

/* The implementation element-wise slot `op` picks to run in place on `y`
 * (`threads` threads) under the current selection, where that is not the
 * reference: a prepared implementation that leaves the activation to the
 * slot's own kernel (GELU after a GEMM) asks once, at prepare. NULL: the
 * reference, or nothing accepts (dispatch the op then). */
const ly_impl *ly_kernel_select_in_place(ly_op op, const ly_tensor *y, int threads);

/* `impl` returned `status` on `call` (validated, params set): unless that was
 * LY_E_DECLINED, disable it for the process (one warning); then run the call
 * on the implementations after it, as dispatch would have. */
ly_status ly_kernel_fallback(ly_op op, const ly_selection *selection, const ly_impl *impl,
                             ly_status status, const ly_kernel_call *call);

/* Disable `impl` for the process after it failed with `status` (one warning). */
void ly_kernel_disable(ly_op op, const ly_impl *impl, ly_status status);

/* Neighbouring nodes a prepared state can take into its own pass, offered
 * for its stateful form; the graph folds them while planning (plan.c), each
 * function returning whether the state took the node:
 * - activation: an activation node (an ly_activation) rewriting output 0 in
 *   place, applied after everything else the state does, its residual
 *   included;
 * - residual: the node that writes its residual (input 3) alone, reads the
 *   same input 0 and was prepared on the same implementation (`producer`,
 *   alive as long as this state): the int8 LibreYOLO9t's RepConvN, a 3x3
 *   and a 1x1 convolution of the same codes summed. That node then runs no
 *   more unless this one falls back. */
typedef struct ly_kernel_folds {
    bool (*activation)(void *state, int64_t activation);
    bool (*residual)(void *state, void *producer);
} ly_kernel_folds;
void ly_kernel_folds_register(const ly_kernel_stateful *stateful, const ly_kernel_folds *folds);
/* Zeros where the form offers none. */
ly_kernel_folds ly_kernel_folds_of(const ly_kernel_stateful *stateful);

/* Run a validated call on `impl` alone: its function, or prepare, run and
 * release its stateful form on the spot. */
ly_status ly_impl_run(const ly_impl *impl, const ly_kernel_call *call);

#endif
