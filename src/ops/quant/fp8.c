/* SPDX-License-Identifier: MIT */
/* The public E4M3FN conversions: thin wrappers over the integer-only primitives
 * that the reference and the accelerated providers share (quant/numerics.h). */
#include "libreyolo/quant.h"
#include "ops/quant/numerics.h"

uint8_t ly_fp32_to_e4m3(float x)
{
    return ly_nm_fp32_to_e4m3(x);
}

float ly_e4m3_to_fp32(uint8_t code)
{
    return ly_nm_e4m3_to_fp32(code);
}
