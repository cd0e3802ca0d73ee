/* SPDX-License-Identifier: MIT */
/*
 * The table of built-in providers, one entry per optional library or ISA,
 * each compiled only when CMake found what it needs. Registration order sets
 * preference within a slot (the newest registration is tried first): for
 * conv2d OpenBLAS, then XNNPACK, then oneDNN, the fastest measured on
 * LibreYOLO9t (`libreyolo bench conv`), then our own AVX-512 kernels for the
 * few shapes their predicates take (where they measured faster than oneDNN).
 */
#include "providers/builtin.h"

#include "core/core.h"

typedef struct builtin_provider {
    const char *name;
    void (*register_all)(void);
} builtin_provider;

void ly_dequant_register(void);
#ifdef LY_HAVE_OPENBLAS
void ly_openblas_register(void);
#endif
#ifdef LY_HAVE_XNNPACK
void ly_xnnpack_register(void);
#endif
#ifdef LY_HAVE_ONEDNN
void ly_onednn_register(void);
#endif
#ifdef LY_HAVE_AVX2_PROVIDERS
void ly_avx2_register(void);
void ly_avx512_register(void);
void ly_amx_register(void);
#endif

static const builtin_provider providers[] = {
    /* first, so tried last: conv2d_int8 on the float convolution where no
     * integer kernel takes it */
    {"dequant", ly_dequant_register},
#ifdef LY_HAVE_AVX2_PROVIDERS
    {"avx2", ly_avx2_register},
#endif
#ifdef LY_HAVE_OPENBLAS
    {"openblas", ly_openblas_register},
#endif
#ifdef LY_HAVE_XNNPACK
    {"xnnpack", ly_xnnpack_register},
#endif
#ifdef LY_HAVE_ONEDNN
    {"onednn", ly_onednn_register},
#endif
#ifdef LY_HAVE_AVX2_PROVIDERS
    /* last, so tried first: our own kernels for shapes the libraries serve
     * poorly, and linear on AMX tiles where a CPU has them */
    {"avx512", ly_avx512_register},
    {"amx", ly_amx_register},
#endif
    {NULL, NULL},
};

void ly_builtin_providers_register(void)
{
    for (size_t i = 0; providers[i].name; i++) {
        ly_log(LY_LOG_DEBUG, "registering the built-in provider '%s'", providers[i].name);
        providers[i].register_all();
    }
}

void ly_provider_add(ly_op op, const char *name, ly_kernel_fn fn, ly_kernel_predicate predicate,
                     const ly_kernel_stateful *stateful)
{
    ly_kernel_impl_desc desc = {.struct_size = sizeof desc,
                                .slot = ly_op_name(op),
                                .name = name,
                                .fn = fn,
                                .predicate = predicate,
                                .stateful = stateful};
    if (ly_kernel_register_impl(&desc) != LY_OK)
        ly_log(LY_LOG_WARNING, "could not register the %s kernel of '%s': %s", name, ly_op_name(op),
               ly_last_error());
}
