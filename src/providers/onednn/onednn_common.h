/* SPDX-License-Identifier: MIT */
/* What the oneDNN providers share: one CPU engine and the OpenMP thread count. */
#ifndef LY_KERNELS_NN_ONEDNN_COMMON_H
#define LY_KERNELS_NN_ONEDNN_COMMON_H

#include "libreyolo/kernels.h"

#include <dnnl.h>
#include <pthread.h>

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

/* This thread's stream on the engine, created on first use and destroyed with
 * the thread; NULL if oneDNN refused. For primitives that several threads run
 * at once (each run brings its own memory objects and scratchpad). */
dnnl_stream_t ly_onednn_thread_stream(void);

/* dnnl_primitive_desc_create, passing over the implementations whose name
 * contains `skip` (NULL: none) for the next one oneDNN offers; dnnl_unimplemented
 * when only such ones (or none) exist. */
dnnl_status_t ly_onednn_primitive_desc_create_skipping(dnnl_primitive_desc_t *pd,
                                                       const_dnnl_op_desc_t desc,
                                                       const_dnnl_primitive_attr_t attr,
                                                       dnnl_engine_t engine, const char *skip);

/* The channel block oneDNN's kernels run fastest on here: 16 on AVX-512
 * (avx512_core) CPUs, else 8. */
ly_layout ly_onednn_preferred_layout(void);

/* A prepared one-input one-output primitive (pooling, resampling on blocked
 * maps) that several threads may run at once: a user scratchpad per thread,
 * the thread's stream, memory objects per run. */
typedef struct ly_onednn_unary {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, dst_md, scratch_md;
    int threads;
    const char *slot; /* in messages */
} ly_onednn_unary;

/* Such a node on blocked maps only (where the graph can keep one: 4-d,
 * batch 1, whole 8-channel blocks): the same blocked layout in and out. */
bool ly_onednn_unary_blockable(const ly_tensor *x);
void ly_onednn_unary_layouts(ly_kernel_layouts *out);
/* A new state for a call prepared on blocked layouts, its src_md and dst_md
 * set from the call's shapes; LY_E_DECLINED on plain maps (the function
 * serves those). The caller makes an op descriptor on those and creates. */
ly_status ly_onednn_unary_begin(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                const char *slot, ly_onednn_unary **out);
/* Create u's primitive from `desc` on u->threads threads. LY_E_DECLINED where
 * oneDNN has no JIT kernel for it (its reference loops are slower than ours). */
ly_status ly_onednn_unary_create(ly_onednn_unary *u, const_dnnl_op_desc_t desc);
/* A ly_kernel_stateful's run and release for such a state. */
ly_status ly_onednn_unary_run(void *state, const ly_kernel_call *call);
void ly_onednn_unary_release(void *state);

/* The operators of one prepared convolution state. A run takes an idle one
 * (an operator's stream and memory objects serve one thread at a time) and
 * gives it back; a run that finds none makes a spare over the primary's
 * packed weights. Each operator struct starts with its ly_onednn_spare link. */
typedef struct ly_onednn_spare {
    struct ly_onednn_spare *next;
} ly_onednn_spare;

typedef struct ly_onednn_spares {
    pthread_mutex_t lock;
    ly_onednn_spare *idle; /* operators not running, the primary among them */
} ly_onednn_spares;

void ly_onednn_spares_init(ly_onednn_spares *s);
ly_onednn_spare *ly_onednn_spares_take(ly_onednn_spares *s); /* NULL: none idle */
void ly_onednn_spares_give(ly_onednn_spares *s, ly_onednn_spare *op);
/* Every idle operator but `primary` (the spares read its packed weights: they
 * go first), then `primary` (may be NULL), each through `destroy`. */
void ly_onednn_spares_destroy(ly_onednn_spares *s, ly_onednn_spare *primary,
                              void (*destroy)(ly_onednn_spare *op));

/* The predicate every oneDNN provider starts from: the engine exists, and a
 * call's first input and output are not empty (nothing for oneDNN to do). */
ly_status ly_onednn_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                              const char **why_not);

/* The implementations of each file, registered by register.c. */
void ly_onednn_register_conv2d(void);
void ly_onednn_register_eltwise(void); /* silu, sigmoid */
void ly_onednn_register_dfl(void);
void ly_onednn_register_linear(void);      /* prepared: packed weights */
void ly_onednn_register_pool(void);        /* max_pool2d, avg_pool2d: NCHW (AVX-512), blocked */
void ly_onednn_register_resample(void);    /* upsample_nearest2d on blocked maps */
void ly_onednn_register_conv2d_int8(void); /* integer kernels, VNNI only */

/* Rows [row0, row1) of x (f32 [1, c, h, w], plain or in blocks of `block` =
 * 8 or 16 channels; 0: plain) as u8 channels-last codes, row row0 at `out`
 * and each next row_bytes (>= w * c) on: fake_quant_int8_affine's code (with
 * 1/scale `inv` and `zero_point`) plus 128. Only in builds with the AVX2
 * providers. */
void ly_onednn_quantize_u8_nhwc_rows(const float *x, int64_t c, int64_t h, int64_t w, int block,
                                     float inv, float zero_point, int64_t row0, int64_t row1,
                                     uint8_t *out, size_t row_bytes);

/* What a band's copy back does to each value: the convolution's activation
 * (none, silu or sigmoid), then v * post_scale + post_shift where
 * post_affine, then the residual, then `after` (none, silu or sigmoid: an
 * activation node folded into the convolution). */
typedef struct ly_onednn_epilogue {
    int64_t activation;
    float alpha;
    bool post_affine;
    float post_scale, post_shift;
    int64_t after;
} ly_onednn_epilogue;

/* Whether this CPU runs `epilogue` in the copy back into blocks of `block`
 * (AVX-512; the activations oneDNN's post-ops cost most, silu and sigmoid,
 * at least one of them). */
bool ly_onednn_epilogue_supported(const ly_onednn_epilogue *epilogue, int block);

/* out (f32 [1, o, ho, wo] in blocks of `block` = 8 or 16 channels, 0: plain),
 * rows [r0, r0 + rows) = epilogue(nhwc) (those rows, channels-last; NULL: as
 * they are; else only where ly_onednn_epilogue_supported) + residual (out's
 * layout; NULL: none; it may be out itself). */
void ly_onednn_nhwc_rows_to_layout(const float *nhwc, float *out, const float *residual, int64_t o,
                                   int64_t ho, int64_t wo, int64_t r0, int64_t rows, int block,
                                   const ly_onednn_epilogue *epilogue);

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
