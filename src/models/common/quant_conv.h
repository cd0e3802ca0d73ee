/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO's quantized nn.Conv2d modules in a checkpoint (internal; the
 * toolkit of builder.h; quantized-checkpoints.md 3, 5). The conv recipes
 * (int8, fp8) swap every exact nn.Conv2d whose qualified name contains none
 * of the kept substrings ("dfl" always among them) for a QuantConv2d: it
 * fake-quantizes its input with the calibrated range and convolves with its
 * weight as the recipe makes it, unpacked from weight_packed + _q_w_scale
 * (finalized) or fake-quantized from the fp32 master with a per-channel
 * absmax scale (prepared). Whichever family has such modules reads them
 * here; which modules a family keeps by default is the family's.
 */
#ifndef LY_MODELS_COMMON_QUANT_CONV_H
#define LY_MODELS_COMMON_QUANT_CONV_H

#include "models/common/builder.h"

typedef enum ly_quant_recipe { LY_QUANT_FLOAT, LY_QUANT_INT8, LY_QUANT_FP8 } ly_quant_recipe;

/* The checkpoint's quant manifest, as far as the conv recipes go. */
typedef struct ly_conv_quant {
    ly_quant_recipe recipe;
    bool finalized;
    const char *keep; /* newline-separated substrings of module names kept float */
} ly_conv_quant;

/* What a module does to its input before convolving: the activation
 * fake-quant on the calibrated range (off when _q_calibrated is 0). */
typedef struct ly_qinput {
    bool on;
    float lo, hi;
} ly_qinput;

bool ly_qinput_same(const ly_qinput *a, const ly_qinput *c);

/* Whether module `module` (qualified name) is quantized under `q` (NULL:
 * a float checkpoint). */
bool ly_quant_selects(const ly_conv_quant *q, const char *module);

/* The last quantized module read, as the model computes with it: its
 * effective f32 weight, its integer codes and per-channel weight scales
 * (grown as needed; ly_quant_scratch_free gives them back). */
typedef struct ly_quant_scratch {
    float *weight, *scale;
    uint8_t *codes;
    size_t weight_cap, scale_cap;
} ly_quant_scratch;

void ly_quant_scratch_free(ly_quant_scratch *s);

/* The weight [c2, cin, k, k] of quantized module `module` (keys
 * <module>.weight or .weight_packed, ._q_act_lo, ._q_act_hi, ._q_calibrated,
 * ._q_w_scale) as its forward uses it, in s->weight, with *in its input
 * quantizer; NULL when a key is absent or wrong (recorded) or the builder
 * failed. Both states give the same bits: unpack(pack(W)) is the
 * fake-quant by construction. */
const float *ly_quant_conv_weight(ly_builder *b, ly_quant_scratch *s, const ly_conv_quant *q,
                                  const char *module, const int64_t wshape[4], ly_qinput *in);

/* x fake-quantized as `module`'s input (node <module>.input_quant): int8
 * affine on [lo, hi], or fp8 with scale max(|lo|, |hi|)/448; x itself when
 * the quantizer is off. */
ly_graph_value ly_quant_input(ly_builder *b, const ly_conv_quant *q, const char *module,
                              ly_graph_value x, const ly_qinput *in);

/* Whether the module convolves on its integer codes (conv2d_int8): the int8
 * recipe with a calibrated input, and no problem so far (after one the codes
 * may not have been read; the load fails anyway). */
bool ly_quant_int8_executes(const ly_builder *b, const ly_conv_quant *q, const ly_qinput *in);

/* A conv2d_int8 node named `name` of the last module read: its codes, the
 * weight scales times `bn_scale` per channel (NULL: 1), the bias `bias_f32`
 * or, when NULL, `bias` rounded to f32, the input range of `in`. */
ly_graph_value ly_quant_conv_int8(ly_builder *b, const ly_quant_scratch *s, const char *name,
                                  ly_graph_value x, const int64_t wshape[4], const double *bn_scale,
                                  const float *bias_f32, const double *bias,
                                  const ly_conv2d_params *p, ly_graph_value residual,
                                  const ly_qinput *in);

#endif
