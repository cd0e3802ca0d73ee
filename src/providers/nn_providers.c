/*
 * Registers the network-op providers of the optional libraries found at build
 * time. Registration order sets preference (the newest registration is tried
 * first): OpenBLAS, then XNNPACK, then oneDNN, the fastest conv2d measured on
 * LibreYOLO9t (see `libreyolo bench conv`); oneDNN also serves silu, sigmoid
 * and dfl, where its vectorised exp replaces libm's expf (~10x on silu and
 * sigmoid, ~3x on dfl), and the pools on AVX-512 machines (2-4x; elsewhere its
 * NCHW pooling is slower than the reference and declines). Upsample and
 * concat stay on the references: they only move memory. Running these on
 * oneDNN also keeps them on its OpenMP threads, which otherwise spin while
 * our own threads want the cores. Each provider declines, through its
 * predicate, what it cannot do; LIBREYOLO_KERNELS=<name> selects one.
 */
#include "providers/nn_providers.h"
#include "kernels/slot.h"

#include <stdatomic.h>

/* Written at registration (under the registry's once), read at graph plans. */
static const ly_nn_blocked_conv_provider *_Atomic blocked_conv;
static const char *_Atomic blocked_conv_impl;
static _Atomic int blocked_conv_block;

void ly_nn_set_blocked_conv(const ly_nn_blocked_conv_provider *provider, const char *impl,
                            int block)
{
    atomic_store(&blocked_conv_impl, impl);
    atomic_store(&blocked_conv_block, block);
    atomic_store(&blocked_conv, provider);
}

const ly_nn_blocked_conv_provider *ly_nn_blocked_conv(const char **impl, int *block)
{
    const ly_nn_blocked_conv_provider *p = atomic_load(&blocked_conv);
    if (impl) *impl = p ? atomic_load(&blocked_conv_impl) : NULL;
    if (block) *block = p ? atomic_load(&blocked_conv_block) : 0;
    return p;
}

void ly_register_nn_providers(void)
{
#ifdef LY_HAVE_OPENBLAS
    ly_register_nn_openblas();
#endif
#ifdef LY_HAVE_XNNPACK
    ly_register_nn_xnnpack();
#endif
#ifdef LY_HAVE_ONEDNN
    ly_register_nn_onednn();
    ly_register_nn_onednn_eltwise();
    ly_register_nn_onednn_dfl();
    ly_register_nn_onednn_pool();
#endif
}
