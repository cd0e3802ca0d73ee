/* SPDX-License-Identifier: MIT */
/*
 * The linear sum assignment of a dense cost matrix, as SciPy's
 * linear_sum_assignment solves it (scipy/optimize/rectangular_lsap: the
 * shortest augmenting path method of Crouse, 2016), so that among equal
 * optima it picks the one SciPy picks: the matrix is transposed when it has
 * more rows than columns, columns are scanned in SciPy's order, and a tie
 * for the lowest reduced cost goes to a column that is still unassigned.
 */
#ifndef LY_TRACK_LSAP_H
#define LY_TRACK_LSAP_H

#include "libreyolo/libreyolo.h"

/* Minimise the sum of cost[rows[k] * nc + cols[k]] over min(nr, nc) pairs.
 * rows/cols receive the pairs sorted by row (SciPy's output order); *n the
 * count. `cost` must hold no NaN or -inf (LY_E_INVALID_ARGUMENT);
 * LY_E_INVALID_ARGUMENT also when no complete assignment has a finite cost.
 * Scratch is malloc'ed per call. */
ly_status ly_lsap_solve(size_t nr, size_t nc, const double *cost, size_t *rows, size_t *cols,
                        size_t *n);

#endif
