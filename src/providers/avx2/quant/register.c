/*
 * Registers the AVX2+FMA quant implementations, all named "avx2". They handle
 * every input the slots' validators accept (any shape, tails, empty tensors),
 * so the predicate only asks for the instruction sets. This file is compiled
 * for the baseline ISA: it runs before anyone knows the CPU has AVX2.
 */
#include "core/core.h"
#include "providers/avx2/quant/quant_providers.h"
#include "kernels/slot.h"
#include "ops/quant/reference.h"

#ifdef LY_HAVE_AVX2_PROVIDERS

static ly_status avx2_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                const char **why_not)
{
    (void)call;
    if (cpu && cpu->avx2 && cpu->fma) return LY_OK;
    *why_not = "CPU or OS lacks AVX2/FMA";
    return LY_E_DECLINED;
}

void ly_register_quant_avx2(void)
{
    static const struct {
        const char *slot;
        ly_kernel_fn fn;
    } impls[] = {
        {LY_SLOT_FAKE_QUANT_INT8_PER_CHANNEL, ly_avx2_fake_quant_int8_per_channel},
        {LY_SLOT_FAKE_QUANT_INT8_AFFINE, ly_avx2_fake_quant_int8_affine},
        {LY_SLOT_FAKE_QUANT_FP8, ly_avx2_fake_quant_fp8},
        {LY_SLOT_FAKE_QUANT_INT_GROUPED, ly_avx2_fake_quant_int_grouped},
        {LY_SLOT_FAKE_QUANT_NVFP4_WEIGHT, ly_avx2_fake_quant_nvfp4_weight},
        {LY_SLOT_FAKE_QUANT_NVFP4_DYNAMIC, ly_avx2_fake_quant_nvfp4_dynamic},
        {LY_SLOT_FAKE_QUANT_MXFP4_WEIGHT, ly_avx2_fake_quant_mxfp4_weight},
        {LY_SLOT_FAKE_QUANT_MXFP4_DYNAMIC, ly_avx2_fake_quant_mxfp4_dynamic},
        {LY_SLOT_UNPACK_INT_GROUPED, ly_avx2_unpack_int_grouped},
        {LY_SLOT_UNPACK_NVFP4, ly_avx2_unpack_nvfp4},
        {LY_SLOT_FAKE_QUANT_INT8_PER_CHANNEL_BACKWARD,
         ly_avx2_fake_quant_int8_per_channel_backward},
        {LY_SLOT_FAKE_QUANT_INT8_AFFINE_BACKWARD, ly_avx2_fake_quant_int8_affine_backward},
        {LY_SLOT_FAKE_QUANT_FP8_BACKWARD, ly_avx2_fake_quant_fp8_backward},
        {LY_SLOT_FAKE_QUANT_INT_GROUPED_BACKWARD, ly_avx2_fake_quant_int_grouped_backward},
        {LY_SLOT_FAKE_QUANT_NVFP4_WEIGHT_BACKWARD, ly_avx2_fake_quant_nvfp4_weight_backward},
        {LY_SLOT_FAKE_QUANT_NVFP4_DYNAMIC_BACKWARD, ly_avx2_fake_quant_nvfp4_dynamic_backward},
        {LY_SLOT_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD, ly_avx2_fake_quant_mxfp4_weight_backward},
        {LY_SLOT_FAKE_QUANT_MXFP4_DYNAMIC_BACKWARD, ly_avx2_fake_quant_mxfp4_dynamic_backward},
    };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
        ly_status st = ly_kernel_register(impls[i].slot, "avx2", impls[i].fn, avx2_predicate);
        if (st != LY_OK)
            ly_log(LY_LOG_WARNING, "could not register the avx2 kernel of '%s': %s", impls[i].slot,
                   ly_last_error());
    }
}

#endif
