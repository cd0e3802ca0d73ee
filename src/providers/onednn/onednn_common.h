/* SPDX-License-Identifier: MIT */
/* What the oneDNN providers share: one CPU engine and the OpenMP thread count. */
#ifndef LY_KERNELS_NN_ONEDNN_COMMON_H
#define LY_KERNELS_NN_ONEDNN_COMMON_H

#include "libreyolo/kernels.h"

#include <dnnl.h>

/* The process's CPU engine, created on first use; NULL if oneDNN refused. */
dnnl_engine_t ly_onednn_engine(void);
/* The dnnl status of that creation (dnnl_success once it exists). */
dnnl_status_t ly_onednn_engine_status(void);

/* Debian's oneDNN runs on OpenMP (libgomp), which reads the calling thread's
 * omp_get_max_threads() when a primitive is created (to plan its split) and
 * when it runs. begin sets it to `threads` for this thread and returns the
 * previous value for end to restore. The symbols are looked up at run time, so
 * the library need not link OpenMP itself; without them both do nothing. */
int ly_onednn_threads_begin(int threads);
void ly_onednn_threads_end(int previous);

/* The predicate every oneDNN provider starts from: the engine exists, and a
 * call's first input and output are not empty (nothing for oneDNN to do). */
ly_status ly_onednn_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                              const char **why_not);

/* The implementations of each file, registered by register.c. */
void ly_onednn_register_conv2d(void);
void ly_onednn_register_eltwise(void); /* silu, sigmoid */
void ly_onednn_register_dfl(void);
void ly_onednn_register_linear(void);      /* prepared: packed weights */
void ly_onednn_register_pool(void);        /* max_pool2d, avg_pool2d (AVX-512 only) */
void ly_onednn_register_conv2d_int8(void); /* integer kernels, VNNI only */

/* x (f32 [n, c, h, w], plain or in blocks of `block` = 8 or 16 channels; 0:
 * plain) as u8 channels-last codes: fake_quant_int8_affine's code (with 1/scale
 * `inv` and `zero_point`) plus 128. Only in builds with the AVX2 providers. */
void ly_onednn_quantize_u8_nhwc(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                int block, float inv, float zero_point, uint8_t *out, int threads);

/* Append `activation` (an ly_activation; alpha: LY_ACT_LEAKY_RELU's negative
 * slope) as an eltwise post-op: swish, logistic, relu or gelu_erf. Nothing
 * for none; dnnl_unimplemented for an activation it does not know. */
dnnl_status_t ly_onednn_append_activation(dnnl_post_ops_t post_ops, int64_t activation,
                                          float alpha);

/* The values of `from` written into `dst`, laid out as `plain` (a reorder:
 * exact). What a state that packed a constant restores it with. */
dnnl_status_t ly_onednn_unpack(dnnl_memory_t from, const dnnl_memory_desc_t *plain, void *dst);

/* LY_E_PROVIDER naming the slot and the failed dnnl call. */
ly_status ly_onednn_failed(const char *slot, const char *call, dnnl_status_t status);

#endif
