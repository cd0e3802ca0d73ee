/* SPDX-License-Identifier: MIT */
/*
 * What the conv2d providers share: a bounded, thread-safe cache of prepared
 * operators (packed weights, library primitives) keyed on the call's weight
 * pointer, a fingerprint of the weight values, shapes and params; and per-thread
 * scratch buffers for layout changes.
 *
 * The key holds the weight and bias pointers AND a fingerprint of their values,
 * so a tensor freed and another allocated at the same address with different
 * values misses. The fingerprint samples at most ~256 weight values (all of
 * the bias), so changing a few weights in place, under the same pointer, is not
 * guaranteed to be noticed: give changed weights a new buffer.
 */
#ifndef LY_KERNELS_NN_OP_CACHE_H
#define LY_KERNELS_NN_OP_CACHE_H

#include "libreyolo/kernels.h"

#include <pthread.h>

typedef struct ly_conv_key {
    const void *weight, *bias;
    uint64_t fingerprint;
    int64_t n, c, h, w, o, kh, kw, ho, wo;
    int64_t sh, sw, ph, pw, dh, dw, groups, activation;
    int64_t has_residual, threads;
    uint32_t alpha_bits;  /* LY_ACT_LEAKY_RELU's slope as float bits (0 otherwise) */
    uint32_t layout;      /* the provider's own bits for blocked sides (0: NCHW) */
    uint32_t post_affine; /* 1: post_scale/post_shift apply */
    uint32_t post_scale_bits, post_shift_bits; /* as float bits (0 otherwise) */
    uint32_t algorithm; /* the provider's own choice among its algorithms (0: its default); also
                           keeps the key free of padding: it is hashed as bytes */
} ly_conv_key;

/* Fill `key` for a validated conv2d call run on `threads` threads. */
void ly_conv_key_init(ly_conv_key *key, const ly_kernel_call *call, int threads);
/* The same with the weights' fingerprint given (a state made for one call
 * site passes 0): the weights are not read. */
void ly_conv_key_init_with(ly_conv_key *key, const ly_kernel_call *call, int threads,
                           uint64_t fingerprint);
uint64_t ly_conv_fingerprint(const ly_kernel_call *call);

typedef struct ly_op_entry ly_op_entry;

/* Build a prepared operator for `key` (NULL with *status set on failure). */
typedef void *(*ly_op_create_fn)(const ly_conv_key *key, const ly_kernel_call *call,
                                 ly_status *status);
typedef void (*ly_op_destroy_fn)(void *op);

#define LY_OP_CACHE_BUCKETS 256

typedef struct ly_op_cache {
    pthread_mutex_t lock;
    size_t capacity;
    ly_op_destroy_fn destroy;
    ly_op_entry *buckets[LY_OP_CACHE_BUCKETS]; /* chained by key hash */
    size_t count;
    uint64_t clock; /* ticks at every use: least recently used = smallest stamp */
} ly_op_cache;

#define LY_OP_CACHE_INIT(capacity, destroy)                                                        \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, (capacity), (destroy), {NULL}, 0, 0                             \
    }

/* The operator for `key`, created on a miss, held for this thread's exclusive
 * use until ly_op_cache_release (a prepared operator has per-call state).
 * Idle entries beyond the capacity are destroyed, least recently used first. */
ly_status ly_op_cache_acquire(ly_op_cache *cache, const ly_conv_key *key, ly_op_create_fn create,
                              const ly_kernel_call *call, ly_op_entry **entry, void **op);
void ly_op_cache_release(ly_op_cache *cache, ly_op_entry *entry);
/* A per-thread, 64-byte aligned buffer of at least `bytes` (index 0..3 gives
 * independent buffers), kept and grown across calls; NULL if out of memory. */
#define LY_NN_SCRATCH_BUFFERS 4
void *ly_nn_scratch(int index, size_t bytes);

#endif
