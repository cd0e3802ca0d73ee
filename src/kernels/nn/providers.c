/*
 * Registers the network-op providers of the optional libraries found at build
 * time. Registration order sets preference (the newest registration is tried
 * first): OpenBLAS, then XNNPACK, then oneDNN, the fastest conv2d measured on
 * LibreYOLO9t (see `libreyolo bench conv`); oneDNN also serves silu and sigmoid.
 * Pooling, upsample, concat and dfl stay on the references: they are memory
 * moves or expf-bound, and the references are within a few tenths of a
 * millisecond per LibreYOLO9t forward. Each provider declines, through its
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
#endif
}
