/* SPDX-License-Identifier: MIT */
#include "track/lsap.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct lsap_work {
    double *u, *v, *shortest;
    int64_t *path, *col4row, *row4col, *remaining;
    bool *sr, *sc;
} lsap_work;

/* One shortest augmenting path from free row i; the sink column, or -1 when
 * every remaining column costs infinity. */
static int64_t augmenting_path(size_t nc, const double *cost, lsap_work *w, int64_t i,
                               double *p_min)
{
    double min_val = 0;
    /* Filled in reverse, as SciPy does: a constant matrix gives the identity. */
    size_t num_remaining = nc;
    for (size_t it = 0; it < nc; it++)
        w->remaining[it] = (int64_t)(nc - it - 1);
    for (size_t j = 0; j < nc; j++) {
        w->sc[j] = false;
        w->shortest[j] = INFINITY;
    }
    int64_t sink = -1;
    while (sink == -1) {
        size_t index = (size_t)-1;
        double lowest = INFINITY;
        w->sr[i] = true;
        for (size_t it = 0; it < num_remaining; it++) {
            int64_t j = w->remaining[it];
            double r = min_val + cost[(size_t)i * nc + (size_t)j] - w->u[i] - w->v[j];
            if (r < w->shortest[j]) {
                w->path[j] = i;
                w->shortest[j] = r;
            }
            /* among equal lowest costs, one that gives a new sink */
            if (w->shortest[j] < lowest || (w->shortest[j] == lowest && w->row4col[j] == -1)) {
                lowest = w->shortest[j];
                index = it;
            }
        }
        min_val = lowest;
        if (min_val == INFINITY) return -1;
        int64_t j = w->remaining[index];
        if (w->row4col[j] == -1)
            sink = j;
        else
            i = w->row4col[j];
        w->sc[j] = true;
        w->remaining[index] = w->remaining[--num_remaining];
    }
    *p_min = min_val;
    return sink;
}

static ly_status solve(size_t nr, size_t nc, const double *cost, int64_t *col4row_out)
{
    lsap_work w = {0};
    w.u = calloc(nr, sizeof *w.u);
    w.v = calloc(nc, sizeof *w.v);
    w.shortest = malloc(nc * sizeof *w.shortest);
    w.path = malloc(nc * sizeof *w.path);
    w.col4row = malloc(nr * sizeof *w.col4row);
    w.row4col = malloc(nc * sizeof *w.row4col);
    w.remaining = malloc(nc * sizeof *w.remaining);
    w.sr = malloc(nr * sizeof *w.sr);
    w.sc = malloc(nc * sizeof *w.sc);
    ly_status st = LY_OK;
    if (!w.u || !w.v || !w.shortest || !w.path || !w.col4row || !w.row4col || !w.remaining ||
        !w.sr || !w.sc) {
        st = ly_set_error(LY_E_NO_MEMORY, "linear sum assignment: out of memory");
        goto done;
    }
    for (size_t j = 0; j < nc; j++)
        w.path[j] = -1, w.row4col[j] = -1;
    for (size_t i = 0; i < nr; i++)
        w.col4row[i] = -1;
    for (size_t cur = 0; cur < nr; cur++) {
        for (size_t i = 0; i < nr; i++)
            w.sr[i] = false;
        double min_val;
        int64_t sink = augmenting_path(nc, cost, &w, (int64_t)cur, &min_val);
        if (sink < 0) {
            st = ly_set_error(LY_E_INVALID_ARGUMENT, "linear sum assignment: cost matrix is "
                                                     "infeasible");
            goto done;
        }
        w.u[cur] += min_val;
        for (size_t i = 0; i < nr; i++)
            if (w.sr[i] && i != cur) w.u[i] += min_val - w.shortest[w.col4row[i]];
        for (size_t j = 0; j < nc; j++)
            if (w.sc[j]) w.v[j] -= min_val - w.shortest[j];
        int64_t j = sink;
        for (;;) {
            int64_t i = w.path[j];
            w.row4col[j] = i;
            int64_t previous = w.col4row[i];
            w.col4row[i] = j;
            j = previous;
            if ((size_t)i == cur) break;
        }
    }
    memcpy(col4row_out, w.col4row, nr * sizeof *col4row_out);
done:
    free(w.u), free(w.v), free(w.shortest), free(w.path), free(w.col4row), free(w.row4col);
    free(w.remaining), free(w.sr), free(w.sc);
    return st;
}

ly_status ly_lsap_solve(size_t nr, size_t nc, const double *cost, size_t *rows, size_t *cols,
                        size_t *n)
{
    *n = 0;
    if (nr == 0 || nc == 0) return LY_OK;
    for (size_t k = 0; k < nr * nc; k++)
        if (isnan(cost[k]) || cost[k] == -INFINITY)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "linear sum assignment: the cost matrix holds NaN or -inf");
    bool transpose = nc < nr;
    const double *c = cost;
    double *t = NULL;
    if (transpose) {
        t = malloc(nr * nc * sizeof *t);
        if (!t) return ly_set_error(LY_E_NO_MEMORY, "linear sum assignment: out of memory");
        for (size_t i = 0; i < nr; i++)
            for (size_t j = 0; j < nc; j++)
                t[j * nr + i] = cost[i * nc + j];
        c = t;
        size_t swap = nr;
        nr = nc, nc = swap;
    }
    int64_t *col4row = malloc(nr * sizeof *col4row);
    ly_status st = col4row ? solve(nr, nc, c, col4row)
                           : ly_set_error(LY_E_NO_MEMORY, "linear sum assignment: out of memory");
    if (st == LY_OK && transpose) {
        /* SciPy's argsort of col4row: the original rows in increasing order */
        for (size_t k = 0, emitted = 0; emitted < nr; k++) {
            for (size_t i = 0; i < nr; i++)
                if ((size_t)col4row[i] == k) {
                    rows[emitted] = k;
                    cols[emitted] = i;
                    emitted++;
                }
        }
    } else if (st == LY_OK) {
        for (size_t i = 0; i < nr; i++)
            rows[i] = i, cols[i] = (size_t)col4row[i];
    }
    if (st == LY_OK) *n = nr;
    free(col4row);
    free(t);
    return st;
}
