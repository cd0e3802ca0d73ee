/* SPDX-License-Identifier: MIT */
/*
 * The built-in providers (builtin.c lists them) and the one helper they share.
 * Each provider registers its implementations through the public registry
 * calls, like a plugin would; the registry knows none of them.
 */
#ifndef LY_PROVIDERS_BUILTIN_H
#define LY_PROVIDERS_BUILTIN_H

#include "libreyolo/kernels.h"

/* Register every built-in provider this build has, in preference order. */
void ly_builtin_providers_register(void);

/* Register an implementation of manifest op `op` named `name` (fn and/or
 * stateful); a failure is logged and the provider carries on without it. */
void ly_provider_add(ly_op op, const char *name, ly_kernel_fn fn, ly_kernel_predicate predicate,
                     const ly_kernel_stateful *stateful);

/* Tests only (conv2d_int8_onednn.c): let onednn_int8 take oneDNN's int8
 * kernels without VNNI too (exact while no pair of u8 x s8 products leaves
 * int16); a no-op in builds without that provider. */
#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(LY_HAVE_ONEDNN)
void ly_onednn_int8_allow_without_vnni(int allow);
#else
static inline void ly_onednn_int8_allow_without_vnni(int allow)
{
    (void)allow;
}
#endif

#endif
