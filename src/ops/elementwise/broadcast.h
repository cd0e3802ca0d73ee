/* SPDX-License-Identifier: MIT */
/*
 * NumPy broadcasting (right-aligned shapes; each extent equal or 1), shared by
 * the elementwise contracts and references: the output shape, then a walk over
 * the output in rows of its last dimension with each input's offset and step.
 */
#ifndef LY_OPS_ELEMENTWISE_BROADCAST_H
#define LY_OPS_ELEMENTWISE_BROADCAST_H

#include "libreyolo/kernels.h"

#define LY_BCAST_MAX_INPUTS 3

/* The broadcast shape of in[0..n) into out (dtype left to the caller), or an
 * error naming `op`, the operands (names[i]) and their shapes. */
ly_status ly_bcast_shape(const char *op, int n, const ly_tensor *const *in,
                         const char *const *names, ly_tensor *out);

typedef struct ly_bcast {
    int n, ndim;
    int64_t shape[LY_MAX_DIMS];                       /* the output's */
    int64_t stride[LY_BCAST_MAX_INPUTS][LY_MAX_DIMS]; /* elements; 0 where broadcast */
} ly_bcast;

void ly_bcast_init(ly_bcast *b, int n, const ly_tensor *const *in, const ly_tensor *out);

/* Rows of the output: row r covers out[r * inner .. (r + 1) * inner) with
 * inner = the last extent (1 for a 0-d output); input i starts at
 * *offset[i] and steps by step[i] (0 or 1) within the row. */
int64_t ly_bcast_rows(const ly_bcast *b, int64_t *inner);
void ly_bcast_row(const ly_bcast *b, int64_t row, int64_t offset[LY_BCAST_MAX_INPUTS],
                  int64_t step[LY_BCAST_MAX_INPUTS]);

/* Each input's element offset for output element `index` (all dimensions,
 * as a batch index over broadcast batch dimensions). */
void ly_bcast_offsets(const ly_bcast *b, int64_t index, int64_t offset[LY_BCAST_MAX_INPUTS]);

/* Batched matrix products (matmul): the broadcast over every dimension but
 * the last two of x, w and y; returns the number of batches (matrices of y),
 * whose offsets ly_bcast_offsets gives in matrices. */
int64_t ly_bcast_init_matrices(ly_bcast *b, const ly_tensor *x, const ly_tensor *w,
                               const ly_tensor *y);

/* Merges dimensions every operand walks contiguously (or not at all) into
 * one, so rows are as long as they can be: the same elements in the same
 * order, fewer, longer rows. */
void ly_bcast_coalesce(ly_bcast *b);

/* Rows in order from `row` without a division per row: start, then next. */
typedef struct ly_bcast_walk {
    int64_t coord[LY_MAX_DIMS];
    int64_t offset[LY_BCAST_MAX_INPUTS], step[LY_BCAST_MAX_INPUTS];
} ly_bcast_walk;
void ly_bcast_walk_start(const ly_bcast *b, int64_t row, ly_bcast_walk *w);
void ly_bcast_walk_next(const ly_bcast *b, ly_bcast_walk *w);

#endif
