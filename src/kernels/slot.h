/* A slot's contract: how to validate a call and what its reference is. */
#ifndef LY_KERNELS_SLOT_H
#define LY_KERNELS_SLOT_H

#include "libreyolo/kernels.h"

typedef struct ly_slot_def {
    const char *name;
    /* Validate the inputs and params of `call` (ignoring call->out) and fill the
     * shapes/dtypes of the outputs it must provide. Sets the error on failure,
     * naming the slot, the operand and what was expected. */
    ly_status (*infer)(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                       int *n_out);
    ly_kernel_fn reference;
} ly_slot_def;

/* Builtin slot tables, registered with their references when the registry
 * initialises (in this order). */
extern const ly_slot_def ly_quant_slots[];
extern const size_t ly_quant_slot_count;
extern const ly_slot_def ly_nn_slots[]; /* src/ops/nn/contract.c */
extern const size_t ly_nn_slot_count;
extern const ly_slot_def ly_msda_slots[]; /* src/ops/msda/contract.c */
extern const size_t ly_msda_slot_count;
extern const ly_slot_def ly_sdpa_slots[]; /* src/ops/sdpa/contract.c */
extern const size_t ly_sdpa_slot_count;

/* Contract of a builtin slot, or NULL. */
const ly_slot_def *ly_slot_def_find(const char *name);

/* In-tree accelerated providers: each registers its implementations. Called once,
 * at the first resolution, unless LIBREYOLO_KERNELS is off/reference. */
void ly_register_quant_avx2(void);
/* Network-op providers from optional libraries (oneDNN, XNNPACK, OpenBLAS), each
 * compiled only when CMake found its library. */
void ly_register_nn_providers(void);
/* Attention providers (AVX2 multi-deformable attention, fused SDPA). */
void ly_register_msda_providers(void);
void ly_register_sdpa_providers(void);

#endif
