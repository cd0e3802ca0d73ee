/* SPDX-License-Identifier: MIT */
/* Building test graphs: a convolution with weights from a generator. */
#ifndef LY_TEST_GRAPH_UTIL_H
#define LY_TEST_GRAPH_UTIL_H

#include "graph/graph.h"

/* conv(x) with `groups`, padding k / 2, `act` (leaky slope 0.1) and an
 * optional residual; weights rnd() * weight_scale, biases rnd() * 0.1. */
static inline ly_graph_value ly_test_conv(ly_graph *g, const char *name, ly_graph_value x,
                                          int64_t cin, int64_t cout, int64_t k, int64_t stride,
                                          int64_t groups, int64_t act, ly_graph_value residual,
                                          float (*rnd)(void), float weight_scale)
{
    int64_t ws[4] = {cout, cin / groups, k, k};
    ly_graph_value w, b, out = LY_GRAPH_NONE;
    void *wd, *bd;
    assert_int_equal(ly_graph_constant(g, LY_F32, 4, ws, &w, &wd), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &cout, &b, &bd), LY_OK);
    for (int64_t i = 0; i < ws[0] * ws[1] * ws[2] * ws[3]; i++)
        ((float *)wd)[i] = rnd() * weight_scale;
    for (int64_t i = 0; i < cout; i++)
        ((float *)bd)[i] = 0.1f * rnd();
    ly_conv2d_params c = LY_CONV2D_DEFAULTS;
    c.stride[0] = c.stride[1] = stride;
    c.padding[0] = c.padding[1] = k / 2;
    c.groups = groups;
    c.activation = act;
    c.alpha = 0.1;
    assert_int_equal(ly_graph_conv2d(g, name, x, w, b, residual, &c, &out), LY_OK);
    return out;
}

#endif
