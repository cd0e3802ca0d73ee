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
#include "kernels/nn/providers.h"
#include "kernels/slot.h"

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
