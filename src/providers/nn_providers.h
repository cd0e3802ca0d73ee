/* Registration entry points of the network-op providers, one per optional
 * library; each exists only when CMake found its library. */
#ifndef LY_KERNELS_NN_PROVIDERS_H
#define LY_KERNELS_NN_PROVIDERS_H

#include "libreyolo/kernels.h"

#include <stdbool.h>
#include <stdint.h>

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
/*
 * A graph node's weights as the blocked provider sees them, so that the graph
 * can give back the pages of weights the provider keeps a packed copy of
 * (LibreYOLO9t: 7.5 MiB of plain fp32 that nothing reads between runs).
 * Zero-initialised by the graph, then owned by the provider:
 * - fingerprint: of the weight and bias values, computed on the first call
 *   and reused, so later calls never read the plain weights;
 * - keeper: the cached operator holding the packed copy, pinned (never
 *   evicted) while set; NULL when the provider reads the plain weights in
 *   place (then they must stay).
 * `released` is the graph's: the plain weight pages are given back. While it
 * is set the provider must not read them: a call whose operator is not the
 * keeper's (other threads or layout) restores them first.
 */
typedef struct ly_nn_conv_weights {
    uint64_t fingerprint;
    bool fingerprinted;
    bool released;
    void *keeper;
    int keeper_threads;
    unsigned keeper_layout;
} ly_nn_conv_weights;

typedef ly_status (*ly_nn_blocked_conv_fn)(const ly_kernel_call *call, unsigned layout,
                                           ly_nn_conv_weights *weights);
/* Writes the keeper's packed weights back, exactly, as plain OIHW into
 * `plain` (the call's weight buffer), unpins the keeper and clears it and
 * `released`. */
typedef ly_status (*ly_nn_restore_weights_fn)(ly_nn_conv_weights *weights, void *plain);
/* Unpins the keeper (the graph is going away); the weights stay as they are. */
typedef void (*ly_nn_forget_weights_fn)(ly_nn_conv_weights *weights);

typedef struct ly_nn_blocked_conv_provider {
    ly_nn_blocked_conv_fn run;
    ly_nn_restore_weights_fn restore;
    ly_nn_forget_weights_fn forget;
} ly_nn_blocked_conv_provider;

/* Set by the provider that has one: its registration name in `impl` (static)
 * and the block it runs fastest on where channels allow (8 or 16). */
void ly_nn_set_blocked_conv(const ly_nn_blocked_conv_provider *provider, const char *impl,
                            int block);
/* NULL when no provider has one; *impl names it and *block gives its block. */
const ly_nn_blocked_conv_provider *ly_nn_blocked_conv(const char **impl, int *block);

#endif
