/* Registration entry points of the network-op providers, one per optional
 * library; each exists only when CMake found its library. */
#ifndef LY_KERNELS_NN_PROVIDERS_H
#define LY_KERNELS_NN_PROVIDERS_H

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
