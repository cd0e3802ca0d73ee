/* Registration entry points of the network-op providers, one per optional
 * library; each exists only when CMake found its library. */
#ifndef LY_KERNELS_NN_PROVIDERS_H
#define LY_KERNELS_NN_PROVIDERS_H

#include "libreyolo/kernels.h"

/* A conv2d whose source and/or destination are in a channel-blocked layout
 * (oneDNN's nChw8c / nChw16c: [N][C/B][H][W][B]) rather than NCHW; the
 * tensors keep their NCHW shapes (C a multiple of B on a blocked side), only
 * the data order differs. The graph keeps values between consecutive oneDNN
 * convolutions in such a layout, so the reorders around every convolution go
 * away. The call is not validated (the graph inferred it) and never declines. */
#define LY_NN_SRC_BLOCKED8 1u  /* call->in[0] is nChw8c */
#define LY_NN_DST_BLOCKED8 2u  /* call->out[0] and call->in[3] (residual) are nChw8c */
#define LY_NN_SRC_BLOCKED16 4u /* ... nChw16c */
#define LY_NN_DST_BLOCKED16 8u
typedef ly_status (*ly_nn_blocked_conv_fn)(const ly_kernel_call *call, unsigned layout);
/* Set by the provider that has one: its registration name in `impl` (static)
 * and the block it runs fastest on where channels allow (8 or 16). */
void ly_nn_set_blocked_conv(ly_nn_blocked_conv_fn fn, const char *impl, int block);
/* NULL when no provider has one; *impl names it and *block gives its block. */
ly_nn_blocked_conv_fn ly_nn_blocked_conv(const char **impl, int *block);

#ifdef LY_HAVE_ONEDNN
void ly_register_nn_onednn(void);         /* conv2d */
void ly_register_nn_onednn_eltwise(void); /* silu, sigmoid */
void ly_register_nn_onednn_dfl(void);
void ly_register_nn_onednn_pool(void); /* max_pool2d, avg_pool2d (AVX-512 only) */
#endif
#ifdef LY_HAVE_XNNPACK
void ly_register_nn_xnnpack(void);
#endif
#ifdef LY_HAVE_OPENBLAS
void ly_register_nn_openblas(void);
#endif

#endif
