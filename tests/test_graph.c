/* SPDX-License-Identifier: MIT */
/*
 * The graph (src/graph): its planner (liveness reuse, in-place concat, views,
 * arena reuse across runs and shapes, channel-blocked layouts), shape
 * inference by the ops' contracts, N-d ops of other dtypes, and one graph
 * shared by threads through pooled contexts, bit-identical to a single thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/core.h"
#include "graph/graph.h"
#include "kernels/registry_internal.h"
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"
#include "libreyolo/libreyolo.h"
#include "ops/ops_internal.h"
#include "providers/builtin.h"
#include "test_graph_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000;
}

static ly_graph_value constant_f32(ly_graph *g, int ndim, const int64_t *shape, float **data)
{
    ly_graph_value v;
    void *d;
    assert_int_equal(ly_graph_constant(g, LY_F32, ndim, shape, &v, &d), LY_OK);
    *data = d;
    return v;
}

/* A 1x1 conv that multiplies every channel by `scale` (square weight). */
static ly_graph_value scale_conv(ly_graph *g, ly_graph_value x, int64_t channels, float scale,
                                 float bias, ly_graph_value residual)
{
    int64_t wshape[4] = {channels, channels, 1, 1};
    float *w, *b;
    ly_graph_value wv = constant_f32(g, 4, wshape, &w), bv = constant_f32(g, 1, &channels, &b);
    for (int64_t o = 0; o < channels; o++) {
        w[o * channels + o] = scale;
        b[o] = bias;
    }
    ly_conv2d_params conv = LY_CONV2D_DEFAULTS;
    ly_graph_value out;
    assert_int_equal(ly_graph_conv2d(g, "scale", x, wv, bv, residual, &conv, &out), LY_OK);
    return out;
}

static float symmetric(void)
{
    return uniform(-1.0f, 1.0f);
}

/* A 3x3 conv (padding 1, SiLU) with random weights. */
static ly_graph_value random_conv(ly_graph *g, ly_graph_value x, int64_t in, int64_t out,
                                  ly_graph_value residual)
{
    return ly_test_conv(g, "conv", x, in, out, 3, 1, 1, LY_ACT_SILU, residual, symmetric, 0.3f);
}

static float *view_data(const ly_graph_ctx *ctx, ly_graph_value v)
{
    ly_tensor t;
    assert_int_equal(ly_graph_value_view(ctx, v, &t), LY_OK);
    return t.data;
}

static void make_input(ly_tensor *t, int64_t c, int64_t h, int64_t w)
{
    int64_t shape[4] = {1, c, h, w};
    assert_int_equal(ly_tensor_alloc(t, LY_F32, 4, shape), LY_OK);
    float *d = t->data;
    for (int64_t i = 0; i < ly_tensor_numel(t); i++)
        d[i] = (float)(i % 7) - 3.0f;
}

/* Values between convolutions are kept in channel-blocked layouts where
 * every writer and reader allows it (plan.c, plan_layouts). Whatever the
 * planner decides (slices at offsets that are and are not whole blocks,
 * concats, residuals, a pool in between, the RGB first layer), the outputs
 * are the same as with plain NCHW everywhere (LIBREYOLO_BLOCKED=0) and as
 * the reference's. */
static ly_graph *blocked_test_graph(void)
{
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, b, c, k, d, e, f, f2, parts[3], cat, pool, out, out2;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    a = random_conv(g, x, 3, 32, LY_GRAPH_NONE);
    assert_int_equal(ly_graph_slice(g, "s16", a, 1, 16, 16, &b), LY_OK); /* whole blocks */
    c = random_conv(g, b, 16, 16, b);                                    /* residual */
    k = random_conv(g, c, 16, 16, LY_GRAPH_NONE);
    assert_int_equal(ly_graph_slice(g, "s4", k, 1, 4, 8, &d), LY_OK); /* not whole blocks */
    e = random_conv(g, d, 8, 24, LY_GRAPH_NONE);
    f = random_conv(g, c, 16, 8, LY_GRAPH_NONE);
    parts[0] = c;
    parts[1] = e;
    parts[2] = f;
    assert_int_equal(ly_graph_concat(g, "cat", 3, parts, 1, &cat), LY_OK);
    f2 = random_conv(g, c, 16, 16, LY_GRAPH_NONE);
    ly_pool2d_params pool_params = LY_POOL2D_DEFAULTS;
    pool_params.kernel[0] = pool_params.kernel[1] = 3;
    pool_params.padding[0] = pool_params.padding[1] = 1;
    assert_int_equal(ly_graph_max_pool2d(g, "pool", f2, &pool_params, &pool), LY_OK);
    out = random_conv(g, pool, 16, 16, LY_GRAPH_NONE);
    out2 = random_conv(g, cat, 48, 16, out);
    assert_int_equal(ly_graph_output(g, out2, "y"), LY_OK);
    return g;
}

static void test_blocked_layouts_match_nchw(void **state)
{
    (void)state;
    ly_graph *g = blocked_test_graph();
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor in;
    make_input(&in, 3, 13, 11);
    const char *modes[][2] = {{"", "0"}, {"", ""}, {"reference", ""}};
    float *results[3] = {NULL};
    int64_t n = 16 * 13 * 11;
    for (int m = 0; m < 3; m++) {
        setenv("LIBREYOLO_KERNELS", modes[m][0], 1);
        setenv("LIBREYOLO_BLOCKED", modes[m][1], 1);
        assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
        ly_tensor y;
        assert_int_equal(ly_graph_get_output(ctx, 0, &y, NULL), LY_OK);
        assert_int_equal(ly_tensor_numel(&y), n);
        results[m] = malloc((size_t)n * sizeof(float));
        assert_non_null(results[m]);
        memcpy(results[m], y.data, (size_t)n * sizeof(float));
    }
    setenv("LIBREYOLO_KERNELS", "", 1);
    unsetenv("LIBREYOLO_BLOCKED");
    for (int m = 1; m < 3; m++)
        for (int64_t i = 0; i < n; i++) {
            float want = results[0][i];
            if (fabsf(results[m][i] - want) > 1e-4f * (1.0f + fabsf(want)))
                fail_msg("mode %d element %lld: %g, expected %g", m, (long long)i,
                         (double)results[m][i], (double)want);
        }
    for (int m = 0; m < 3; m++)
        free(results[m]);
    ly_tensor_free(&in);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* A batch runs each image as batch 1 does, bit for bit: its channel slices
 * and concats, views and joins at batch 1, become one copy per image (in the
 * blocked layouts too), so the convolutions keep the layouts, and the
 * kernels, they have at batch 1. */
static void test_batch_matches_images(void **state)
{
    (void)state;
    ly_graph *g = blocked_test_graph();
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    enum { N = 3 };
    int64_t c = 3, h = 13, w = 11, plane = c * h * w, n_out = 16 * h * w;
    ly_tensor batch;
    int64_t shape[4] = {N, c, h, w};
    assert_int_equal(ly_tensor_alloc(&batch, LY_F32, 4, shape), LY_OK);
    float *x = batch.data;
    for (int64_t i = 0; i < N * plane; i++)
        x[i] = symmetric() * 3.0f;
    const char *kernels[] = {"", "reference"};
    for (int k = 0; k < 2; k++) {
        setenv("LIBREYOLO_KERNELS", kernels[k], 1);
        assert_int_equal(ly_graph_run(ctx, 1, &batch, 1), LY_OK);
        ly_graph_stats stats;
        assert_int_equal(ly_graph_get_stats(ctx, &stats), LY_OK);
        int blocked_batch = stats.blocked_nodes;
        ly_tensor y;
        assert_int_equal(ly_graph_get_output(ctx, 0, &y, NULL), LY_OK);
        assert_int_equal(y.shape[0], N);
        float *all = malloc((size_t)(N * n_out) * sizeof *all);
        assert_non_null(all);
        memcpy(all, y.data, (size_t)(N * n_out) * sizeof *all);
        for (int i = 0; i < N; i++) {
            ly_tensor one = {
                .data = x + i * plane, .dtype = LY_F32, .ndim = 4, .shape = {1, c, h, w}};
            assert_int_equal(ly_graph_run(ctx, 1, &one, 1), LY_OK);
            assert_int_equal(ly_graph_get_stats(ctx, &stats), LY_OK);
            assert_int_equal(stats.blocked_nodes, blocked_batch);
            assert_int_equal(ly_graph_get_output(ctx, 0, &y, NULL), LY_OK);
            if (memcmp(all + i * n_out, y.data, (size_t)n_out * sizeof *all) != 0)
                fail_msg("kernels '%s': image %d of the batch differs from its run alone",
                         kernels[k], i);
        }
        free(all);
    }
    setenv("LIBREYOLO_KERNELS", "", 1);
    ly_tensor_free(&batch);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* A chain x -> c1 -> c2 -> c3 -> c4 needs two buffers, not four, and the
 * third reuses the first's memory. */
static void test_liveness_reuse(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, c[4];
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    c[0] = scale_conv(g, x, 4, 2.0f, 0.0f, LY_GRAPH_NONE);
    for (int i = 1; i < 4; i++)
        c[i] = scale_conv(g, c[i - 1], 4, 2.0f, 0.0f, LY_GRAPH_NONE);
    assert_int_equal(ly_graph_output(g, c[3], "y"), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor in;
    make_input(&in, 4, 8, 8);
    setenv("LIBREYOLO_BLOCKED", "0", 1); /* sizes below are plain NCHW's */
    assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
    unsetenv("LIBREYOLO_BLOCKED");
    ly_graph_stats s;
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    size_t one = 4 * 8 * 8 * sizeof(float);
    assert_int_equal(s.unplanned_bytes, 4 * one);
    assert_int_equal(s.arena_bytes, 2 * one);
    assert_ptr_equal(view_data(ctx, c[0]), view_data(ctx, c[2]));
    assert_ptr_equal(view_data(ctx, c[1]), view_data(ctx, c[3]));
    assert_ptr_not_equal(view_data(ctx, c[0]), view_data(ctx, c[1]));
    ly_tensor y;
    assert_int_equal(ly_graph_get_output(ctx, 0, &y, NULL), LY_OK);
    const float *in_d = in.data, *y_d = y.data;
    for (int64_t i = 0; i < 4 * 64; i++)
        assert_float_equal(y_d[i], in_d[i] * 16.0f, 0.0f);
    ly_tensor_free(&in);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* A node replaced by another op keeps its output and readers; pruning drops
 * what nothing reads (a dead branch and the constants only it read), keeps
 * every input, and renumbers what is left. */
static void test_replace_and_prune(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, dead, b, late;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    a = scale_conv(g, x, 4, 2.0f, 0.0f, LY_GRAPH_NONE);
    dead = scale_conv(g, x, 4, 3.0f, 0.0f, LY_GRAPH_NONE); /* read by nothing */
    (void)dead;
    assert_int_equal(ly_graph_unary(g, LY_OP_RELU, "b", a, &b), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_SIGMOID, "late", b, &late), LY_OK);
    assert_int_equal(ly_graph_output(g, b, "y"), LY_OK);
    /* node 2 (b) may not read a value made after it */
    assert_int_equal(ly_graph_node_replace(g, 2, LY_OP_SILU, "b", 1, &late, NULL),
                     LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "made before node 2"));
    assert_int_equal(ly_graph_node_replace(g, 2, LY_OP_SILU, "b", 1, &a, NULL), LY_OK);
    int values = ly_graph_value_count(g), removed = -1;
    assert_int_equal(ly_graph_prune(g, &removed), LY_OK);
    assert_int_equal(removed, 2); /* the dead convolution and `late` */
    assert_int_equal(ly_graph_node_count(g), 2);
    assert_true(ly_graph_value_count(g) < values - 2); /* their outputs and the dead weights */
    ly_graph_node_info n;
    assert_int_equal(ly_graph_node_at(g, 1, &n), LY_OK);
    assert_int_equal(n.op, LY_OP_SILU);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor in, y;
    make_input(&in, 4, 8, 8);
    assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
    assert_int_equal(ly_graph_get_output(ctx, 0, &y, NULL), LY_OK);
    const float *in_d = in.data, *y_d = y.data;
    for (int64_t i = 0; i < 4 * 64; i++) {
        float v = 2.0f * in_d[i];
        assert_float_equal(y_d[i], v / (1.0f + expf(-v)), 1e-6f);
    }
    ly_tensor_free(&in);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* ---- spans run in slabs (ly_graph_item_span) ---- */

enum { SPAN_W = 12, SPAN_N = 16, SPAN_C = 8 };

static ly_graph_value random_constant(ly_graph *g, int ndim, const int64_t *shape)
{
    float *d;
    ly_graph_value v = constant_f32(g, ndim, shape, &d);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        d[i] = symmetric();
    return v;
}

static ly_graph_value span_linear(ly_graph *g, ly_graph_value x, ly_graph_value residual,
                                  int64_t activation)
{
    int64_t ws[2] = {SPAN_C, SPAN_C}, bs = SPAN_C;
    ly_graph_value in[4] = {x, random_constant(g, 2, ws), random_constant(g, 1, &bs), residual};
    ly_linear_params p = LY_LINEAR_DEFAULTS;
    p.activation = activation;
    ly_graph_value out;
    assert_int_equal(
        ly_graph_node(g, LY_OP_LINEAR, "lin", residual == LY_GRAPH_NONE ? 3 : 4, in, &p, 1, &out),
        LY_OK);
    return out;
}

/* x [W, N, C], its token rows permuted by a gather (in the span, reading x
 * whole): layer norm, a linear, a per-window constant (sliced) and a
 * shared one (whole) added, a reshape that keeps dim 0 and back, a linear
 * with x as its residual, read by nodes after the span (the last keeps two
 * channels: the span holds the arena's peak). `leading` 1: the reshape mixes
 * items ([N, W * C]), so the span must run whole; 2: it makes rows of items
 * ([W * N, C], k = N), which slabs take. */
static ly_graph *span_graph(int leading, int64_t seed)
{
    rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)seed;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, y, q, per_window, shared, flat, back, out, after;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 3, &x), LY_OK);
    int64_t c = SPAN_C, window_shape[3] = {SPAN_W, SPAN_N, SPAN_C},
            shared_shape[3] = {1, SPAN_N, SPAN_C}, flat_shape[2] = {SPAN_W, SPAN_N * SPAN_C},
            other[2] = {SPAN_N, SPAN_W * SPAN_C}, token_rows[2] = {SPAN_W * SPAN_N, SPAN_C};
    ly_graph_value mask = random_constant(g, 3, window_shape);
    ly_graph_value bias = random_constant(g, 3, shared_shape);
    /* the span starts with a gather of x's token rows (a permutation), x read whole */
    int64_t tokens = SPAN_W * SPAN_N;
    ly_graph_value table, perm, picked;
    void *perm_data;
    assert_int_equal(ly_graph_reshape(g, "table", x, 2, token_rows, &table), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_I64, 1, &tokens, &perm, &perm_data), LY_OK);
    for (int64_t i = 0; i < tokens; i++)
        ((int64_t *)perm_data)[i] = (i * 7 + 3) % tokens;
    int first = ly_graph_node_count(g);
    ly_gather_params rows_of = {.axis = 0};
    ly_graph_value gather_in[2] = {table, perm};
    assert_int_equal(
        ly_graph_node(g, LY_OP_INDEX_SELECT, "gather", 2, gather_in, &rows_of, 1, &picked), LY_OK);
    assert_int_equal(ly_graph_reshape(g, "windows", picked, 3, window_shape, &x), LY_OK);
    ly_graph_value ln[3] = {x, random_constant(g, 1, &c), random_constant(g, 1, &c)};
    ly_norm_params eps = LY_NORM_DEFAULTS;
    assert_int_equal(ly_graph_node(g, LY_OP_LAYER_NORM, "ln", 3, ln, &eps, 1, &y), LY_OK);
    q = span_linear(g, y, LY_GRAPH_NONE, LY_ACT_GELU);
    assert_int_equal(ly_graph_binary(g, LY_OP_ADD, "mask", q, mask, &per_window), LY_OK);
    assert_int_equal(ly_graph_binary(g, LY_OP_ADD, "bias", per_window, bias, &shared), LY_OK);
    const int64_t *flat_as = leading == 1 ? other : leading == 2 ? token_rows : flat_shape;
    assert_int_equal(ly_graph_reshape(g, "flat", shared, 2, flat_as, &flat), LY_OK);
    assert_int_equal(ly_graph_reshape(g, "back", flat, 3, window_shape, &back), LY_OK);
    out = span_linear(g, back, x, LY_ACT_NONE);
    int end = ly_graph_node_count(g);
    assert_int_equal(ly_graph_unary(g, LY_OP_SIGMOID, "after", out, &after), LY_OK);
    ly_item_span span = {.first = first,
                         .end = end,
                         .n_sliced = 2,
                         .sliced = {mask, perm},
                         .n_whole = 1,
                         .whole = {table}};
    assert_int_equal(ly_graph_item_span(g, &span), LY_OK);
    assert_int_equal(ly_graph_slice(g, "part", after, 2, 0, 2, &after), LY_OK);
    assert_int_equal(ly_graph_output(g, after, "part"), LY_OK);
    return g;
}

/* Runs g at `threads` with LIBREYOLO_SLAB_BYTES=budget; a copy of its output in *y. */
static void run_span_graph(ly_graph *g, const ly_tensor *in, const char *budget, int threads,
                           float **y, ly_graph_stats *stats)
{
    setenv("LIBREYOLO_SLAB_BYTES", budget, 1);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    assert_int_equal(ly_graph_run(ctx, 1, in, threads), LY_OK);
    unsetenv("LIBREYOLO_SLAB_BYTES");
    assert_int_equal(ly_graph_get_stats(ctx, stats), LY_OK);
    ly_tensor t;
    assert_int_equal(ly_graph_get_output(ctx, 0, &t, NULL), LY_OK);
    assert_int_equal(t.shape[0], SPAN_W); /* whole values outside */
    *y = malloc(sizeof(float) * SPAN_W * SPAN_N * 2);
    memcpy(*y, t.data, sizeof(float) * SPAN_W * SPAN_N * 2);
    ly_graph_ctx_free(ctx);
}

static void keep_warning(ly_log_level level, const char *message, void *user)
{
    if (level == LY_LOG_WARNING) snprintf(user, 512, "%s", message);
}

/* A span runs in slabs when its intermediates exceed the budget: outputs
 * bit-identical to the whole run at 1 and 2 threads, a smaller arena; a span
 * whose values do not all lead with one extent, a rewritten graph and a zero
 * budget run whole; a budget that is not a number warns once and plans as
 * the default; bad spans are refused. */
static void test_item_span_slabs(void **state)
{
    (void)state;
    ly_tensor in;
    int64_t shape[3] = {SPAN_W, SPAN_N, SPAN_C};
    assert_int_equal(ly_tensor_alloc(&in, LY_F32, 3, shape), LY_OK);
    for (int64_t i = 0; i < ly_tensor_numel(&in); i++)
        ((float *)in.data)[i] = symmetric() * 3.0f;
    for (int threads = 1; threads <= 2; threads++) {
        ly_graph *whole = span_graph(0, 1), *slabs = span_graph(0, 1), *odd = span_graph(1, 1),
                 *rows = span_graph(2, 1);
        float *a, *b, *c, *d;
        ly_graph_stats sa, sb, sc, sd;
        run_span_graph(whole, &in, "0", threads, &a, &sa);
        run_span_graph(slabs, &in, "256", threads, &b, &sb);
        run_span_graph(odd, &in, "256", threads, &c, &sc);
        run_span_graph(rows, &in, "256", threads, &d, &sd);
        assert_int_equal(sa.slab_spans, 0);
        assert_int_equal(sb.slab_spans, 1);
        assert_int_equal(sc.slab_spans, 0);
        assert_int_equal(sd.slab_spans, 1);
        assert_true(sb.arena_bytes < sa.arena_bytes);
        assert_memory_equal(a, b, sizeof(float) * SPAN_W * SPAN_N * 2);
        assert_memory_equal(a, c, sizeof(float) * SPAN_W * SPAN_N * 2);
        assert_memory_equal(a, d, sizeof(float) * SPAN_W * SPAN_N * 2);
        free(a);
        free(c);
        free(b);
        free(d);
        ly_graph_free(rows);
        ly_graph_free(whole);
        ly_graph_free(odd);
        /* pruning renumbers nodes: the spans go */
        assert_int_equal(ly_graph_prune(slabs, NULL), LY_OK);
        run_span_graph(slabs, &in, "256", threads, &b, &sb);
        assert_int_equal(sb.slab_spans, 0);
        free(b);
        ly_graph_free(slabs);
    }
    /* a budget that is not a number: one warning naming it, the default's plan */
    ly_graph *odd_budget = span_graph(0, 1);
    char warned[512] = "";
    assert_int_equal(ly_set_log_handler(keep_warning, warned, LY_LOG_WARNING), LY_OK);
    float *y;
    ly_graph_stats st;
    run_span_graph(odd_budget, &in, "lots", 1, &y, &st);
    assert_int_equal(ly_set_log_handler(NULL, NULL, LY_LOG_WARNING), LY_OK);
    assert_non_null(strstr(warned, "LIBREYOLO_SLAB_BYTES='lots' is not a byte count"));
    assert_int_equal(st.slab_spans, 0); /* this span fits the default budget whole */
    free(y);
    ly_graph_free(odd_budget);
    ly_tensor_free(&in);
    ly_graph *g = span_graph(0, 2);
    ly_graph_value x;
    assert_int_equal(ly_graph_input_at(g, 0, &x, NULL), LY_OK);
    ly_item_span overlapping = {.first = 1, .end = 3}, past = {.first = 8, .end = 99},
                 sliced_input = {.first = 8, .end = 9, .n_sliced = 1, .sliced = {x}};
    assert_int_equal(ly_graph_item_span(g, &overlapping), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_graph_item_span(g, &past), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_graph_item_span(g, &sliced_input), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "not a constant"));
    ly_graph_free(g);
}

/* Concat inputs are written in place; a graph input and a repeated value are
 * copied; slices are views; a residual is added after the activation. */
static void test_concat_in_place(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, b, cat, half, r, cat2;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    a = scale_conv(g, x, 2, 2.0f, 1.0f, LY_GRAPH_NONE);  /* 2x + 1 */
    b = scale_conv(g, x, 2, -1.0f, 0.0f, LY_GRAPH_NONE); /* -x */
    ly_graph_value parts[3] = {a, b, a};
    assert_int_equal(ly_graph_concat(g, "cat", 3, parts, 1, &cat), LY_OK);
    assert_int_equal(ly_graph_slice(g, "half", cat, 1, 2, 2, &half), LY_OK); /* = b */
    r = scale_conv(g, half, 2, 3.0f, 0.0f, a);                               /* -3x + 2x + 1 */
    ly_graph_value parts2[2] = {x, r};
    assert_int_equal(ly_graph_concat(g, "cat2", 2, parts2, 1, &cat2), LY_OK);
    assert_int_equal(ly_graph_output(g, cat, "cat"), LY_OK);
    assert_int_equal(ly_graph_output(g, cat2, "cat2"), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor in;
    make_input(&in, 2, 4, 5);
    assert_int_equal(ly_graph_run(ctx, 1, &in, 2), LY_OK);
    const int64_t plane = 20;
    float *cat_d = view_data(ctx, cat);
    assert_ptr_equal(view_data(ctx, a), cat_d);
    assert_ptr_equal(view_data(ctx, b), cat_d + 2 * plane);
    assert_ptr_equal(view_data(ctx, half), cat_d + 2 * plane);
    float *cat2_d = view_data(ctx, cat2);
    assert_ptr_equal(view_data(ctx, r), cat2_d + 2 * plane);
    const float *xd = in.data;
    for (int64_t i = 0; i < 2 * plane; i++) {
        assert_float_equal(cat_d[i], 2.0f * xd[i] + 1.0f, 0.0f);
        assert_float_equal(cat_d[2 * plane + i], -xd[i], 0.0f);
        assert_float_equal(cat_d[4 * plane + i], 2.0f * xd[i] + 1.0f, 0.0f);
        assert_float_equal(cat2_d[i], xd[i], 0.0f);
        assert_float_equal(cat2_d[2 * plane + i], -3.0f * xd[i] + 2.0f * xd[i] + 1.0f, 0.0f);
    }
    ly_tensor out;
    const char *name;
    assert_int_equal(ly_graph_get_output(ctx, 1, &out, &name), LY_OK);
    assert_string_equal(name, "cat2");
    assert_int_equal(out.shape[1], 4);
    ly_tensor_free(&in);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* One plan and one arena allocation for any number of runs at a shape; a
 * smaller shape replans into the same arena, a larger one grows it. */
static void test_arena_reuse(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, y;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    y = scale_conv(g, x, 3, 1.0f, 0.5f, LY_GRAPH_NONE);
    ly_pool2d_params pool = LY_POOL2D_DEFAULTS;
    pool.kernel[0] = pool.kernel[1] = 2;
    pool.stride[0] = pool.stride[1] = 2;
    assert_int_equal(ly_graph_max_pool2d(g, "pool", y, &pool, &y), LY_OK);
    assert_int_equal(ly_graph_output(g, y, "y"), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor a, b, c;
    make_input(&a, 3, 16, 16);
    make_input(&b, 3, 8, 8);
    make_input(&c, 3, 32, 16);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ly_graph_run(ctx, 1, &a, 1), LY_OK);
    ly_graph_stats s;
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 1);
    assert_int_equal(s.arena_allocations, 1);
    ly_tensor out;
    assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
    assert_int_equal(out.shape[2], 8);
    assert_int_equal(ly_graph_run(ctx, 1, &b, 1), LY_OK);
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 2);
    assert_int_equal(s.arena_allocations, 1);
    assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
    assert_int_equal(out.shape[2], 4);
    assert_int_equal(ly_graph_run(ctx, 1, &c, 1), LY_OK);
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 3);
    assert_int_equal(s.arena_allocations, 2);
    assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
    assert_int_equal(out.shape[2], 16);
    assert_int_equal(out.shape[3], 8);
    /* Back to the first shape: its plan is still cached. */
    assert_int_equal(ly_graph_run(ctx, 1, &a, 1), LY_OK);
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 3);
    /* A wrong rank or dtype is refused before anything runs. */
    ly_tensor bad = a;
    bad.ndim = 3;
    assert_int_equal(ly_graph_run(ctx, 1, &bad, 1), LY_E_SHAPE);
    bad = a;
    bad.dtype = LY_I32;
    assert_int_equal(ly_graph_run(ctx, 1, &bad, 1), LY_E_DTYPE);
    ly_tensor_free(&a);
    ly_tensor_free(&b);
    ly_tensor_free(&c);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* Shapes by contracts: a node that does not fit names itself and the op's
 * complaint; ly_graph_infer gives every shape without planning. */
static void test_shapes_and_errors(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, y, z, flat, grid;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    y = scale_conv(g, x, 3, 1.0f, 0.0f, LY_GRAPH_NONE);
    int64_t shape[3] = {1, 3, -1};
    assert_int_equal(ly_graph_reshape(g, "flat", y, 3, shape, &flat), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_ANCHOR_GRID, "grid", y, &grid), LY_OK);
    const int perm[3] = {0, 2, 1};
    assert_int_equal(ly_graph_permute(g, "t", flat, 3, perm, &z), LY_OK);
    assert_int_equal(ly_graph_output(g, z, "z"), LY_OK);
    assert_int_equal(ly_graph_output(g, grid, "grid"), LY_OK);
    ly_tensor in = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, 4, 5}};
    ly_tensor shapes[64];
    assert_true(ly_graph_value_count(g) <= 64);
    assert_int_equal(ly_graph_infer(g, 1, &in, shapes), LY_OK);
    assert_int_equal(shapes[z].ndim, 3);
    assert_int_equal(shapes[z].shape[1], 20);
    assert_int_equal(shapes[z].shape[2], 3);
    assert_int_equal(shapes[grid].shape[2], 20);

    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_tensor data;
    make_input(&data, 3, 4, 5);
    assert_int_equal(ly_graph_run(ctx, 1, &data, 1), LY_OK);
    ly_tensor out;
    assert_int_equal(ly_graph_get_output(ctx, 1, &out, NULL), LY_OK);
    const float *a = out.data;
    assert_float_equal(a[0], 0.5f, 0.0f);      /* x of cell (0, 0) */
    assert_float_equal(a[6], 1.5f, 0.0f);      /* x of cell (1, 1) */
    assert_float_equal(a[20 + 6], 1.5f, 0.0f); /* y of cell (1, 1) */
    assert_float_equal(a[20 + 19], 3.5f, 0.0f);
    /* 4 channels do not fit the 3-channel weights: the node says so. */
    ly_tensor wrong;
    make_input(&wrong, 4, 4, 5);
    assert_int_not_equal(ly_graph_run(ctx, 1, &wrong, 1), LY_OK);
    if (!strstr(ly_last_error(), "scale: conv2d")) fail_msg("message: %s", ly_last_error());
    ly_tensor_free(&data);
    ly_tensor_free(&wrong);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* Ops on any dtype: an i64 input sliced, joined with a constant, permuted. */
static void test_integer_values(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, s, c, cat, t;
    assert_int_equal(ly_graph_input(g, "ids", LY_I64, 2, &x), LY_OK);
    assert_int_equal(ly_graph_slice(g, "s", x, 1, 1, 2, &s), LY_OK);
    int64_t cshape[2] = {2, 1};
    void *cd;
    assert_int_equal(ly_graph_constant(g, LY_I64, 2, cshape, &c, &cd), LY_OK);
    ((int64_t *)cd)[0] = 100;
    ((int64_t *)cd)[1] = 200;
    ly_graph_value parts[2] = {s, c};
    assert_int_equal(ly_graph_concat(g, "cat", 2, parts, -1, &cat), LY_OK);
    const int perm[2] = {1, 0};
    assert_int_equal(ly_graph_permute(g, "t", cat, 2, perm, &t), LY_OK);
    assert_int_equal(ly_graph_output(g, t, "t"), LY_OK);
    int64_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    ly_tensor in;
    int64_t ishape[2] = {2, 4};
    assert_int_equal(ly_tensor_init(&in, ids, LY_I64, 2, ishape), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
    ly_tensor out;
    assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
    assert_int_equal(out.dtype, LY_I64);
    assert_int_equal(out.shape[0], 3);
    assert_int_equal(out.shape[1], 2);
    const int64_t want[6] = {1, 5, 2, 6, 100, 200};
    assert_memory_equal(out.data, want, sizeof want);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
}

/* ---- a prepared implementation that fails --------------------------------------- */

static int flaky_prepares, flaky_runs;

static ly_status flaky_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                               void **state)
{
    (void)call;
    (void)info;
    flaky_prepares++;
    *state = &flaky_prepares;
    return LY_OK;
}

static ly_status flaky_run(void *state, const ly_kernel_call *call)
{
    (void)state;
    (void)call;
    flaky_runs++;
    return LY_E_PROVIDER;
}

static void flaky_release(void *state)
{
    (void)state;
}

static const ly_kernel_stateful flaky = {
    .prepare = flaky_prepare, .run = flaky_run, .release = flaky_release};

static void quiet(ly_log_level level, const char *message, void *user)
{
    (void)level;
    (void)message;
    (*(int *)user)++;
}

/* Prepared in the plan, failing at run time: the node falls back to the next
 * implementation (the reference: the same numbers), the failed one is disabled
 * with one warning, and the next run plans without it. */
static void test_failing_prepared_implementation(void **state)
{
    (void)state;
    ly_kernel_impl_desc d = {.struct_size = sizeof d,
                             .slot = ly_op_name(LY_OP_RELU),
                             .name = "flaky",
                             .stateful = &flaky};
    assert_int_equal(ly_kernel_register_impl(&d), LY_OK);
    int warnings = 0;
    ly_set_log_handler(quiet, &warnings, LY_LOG_WARNING);
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, y;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 2, &x), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_RELU, "relu", x, &y), LY_OK);
    assert_int_equal(ly_graph_output(g, y, "y"), LY_OK);
    float data[6] = {-2, -1, 0, 1, 2, -0.5f};
    int64_t shape[2] = {2, 3};
    ly_tensor in;
    assert_int_equal(ly_tensor_init(&in, data, LY_F32, 2, shape), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    for (int run = 0; run < 3; run++) {
        assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
        ly_tensor out;
        assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
        const float *o = out.data;
        for (int i = 0; i < 6; i++)
            assert_float_equal(o[i], data[i] > 0 ? data[i] : 0.0f, 0.0f);
    }
    assert_int_equal(flaky_prepares, 1);
    assert_int_equal(flaky_runs, 1);
    assert_int_equal(warnings, 1);
    ly_graph_stats s;
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 2); /* the second without the disabled implementation */
    ly_set_log_handler(NULL, NULL, LY_LOG_WARNING);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    assert_int_equal(ly_kernel_unregister(ly_op_name(LY_OP_RELU), "flaky"), LY_OK);
}

/* ---- one graph, many threads ------------------------------------------------------ */

enum { THREADS = 4, RUNS = 20 };

typedef struct shared_run {
    ly_graph *g;
    const ly_tensor *input;
    const float *want;
    int64_t n;
    int mismatches;
    ly_status status;
} shared_run;

static void *run_shared(void *arg)
{
    shared_run *r = arg;
    for (int i = 0; i < RUNS && r->status == LY_OK; i++) {
        ly_graph_ctx *ctx;
        r->status = ly_graph_ctx_acquire(r->g, &ctx);
        if (r->status != LY_OK) break;
        r->status = ly_graph_run(ctx, 1, r->input, 1);
        ly_tensor y;
        if (r->status == LY_OK) r->status = ly_graph_get_output(ctx, 0, &y, NULL);
        if (r->status == LY_OK && memcmp(y.data, r->want, (size_t)r->n * sizeof(float)) != 0)
            r->mismatches++;
        ly_graph_ctx_release(ctx);
    }
    return NULL;
}

/* An int8 convolution of random codes (padding k / 2, no activation). Codes
 * within +-64 keep every pair of u8 x s8 products inside int16, so oneDNN's
 * int8 sums are exact without VNNI too (the provider's test hook below). */
/* conv2d_int8 of x (c channels) into o, k x k with padding k / 2, `stride`,
 * then `activation`, + residual: random codes, biases and scales. */
static ly_graph_value int8_conv_of(ly_graph *g, ly_graph_value x, int64_t c, int64_t o, int64_t k,
                                   int64_t stride, int64_t activation, ly_graph_value residual)
{
    int64_t ws[4] = {o, c, k, k}, one = 1, channels = o;
    ly_graph_value in[7] = {x, 0, 0, residual, 0, 0, 0};
    void *codes, *bias, *scale, *lo, *hi;
    assert_int_equal(ly_graph_constant(g, LY_I8, 4, ws, &in[1], &codes), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &channels, &in[2], &bias), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &channels, &in[4], &scale), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &one, &in[5], &lo), LY_OK);
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &one, &in[6], &hi), LY_OK);
    for (int64_t i = 0; i < ws[0] * ws[1] * ws[2] * ws[3]; i++)
        ((int8_t *)codes)[i] = (int8_t)(uniform(-64.0f, 64.0f));
    for (int64_t o = 0; o < channels; o++) {
        ((float *)bias)[o] = symmetric();
        ((float *)scale)[o] = 0.002f;
    }
    *(float *)lo = -3.0f;
    *(float *)hi = 4.0f;
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.padding[0] = p.padding[1] = k / 2;
    p.stride[0] = p.stride[1] = stride;
    p.activation = activation;
    ly_graph_value out;
    assert_int_equal(ly_graph_node(g, LY_OP_CONV2D_INT8, "int8", 7, in, &p, 1, &out), LY_OK);
    return out;
}

static ly_graph_value int8_conv(ly_graph *g, ly_graph_value x, int64_t channels, int64_t k,
                                ly_graph_value residual)
{
    return int8_conv_of(g, x, channels, channels, k, 1, LY_ACT_NONE, residual);
}

/* Nodes that another node's prepared state runs (plan.c's folds; on AVX-512
 * with VNNI the int8 provider takes both): the int8 LibreYOLO9t's RepConvN,
 * SiLU(conv3x3(x) + conv1x1(x)), then another convolution. The 1x1 takes the
 * 3x3 that writes its residual from the same codes (fold_residuals) and the
 * SiLU after the sum (fold_activations). The same graph with the sum also an
 * output folds the 3x3 only; with the 3x3's map an output too, nothing. All
 * three give the same bits, at 16 and 24 channels (channels-last written in
 * place, and the copy back into 8-channel blocks), at 1 and 2 threads. */
static void test_folded_nodes(void **state)
{
    (void)state;
    /* Without VNNI the f32 definition would serve the graphs, each on the
     * layouts its own plan picks (different sums); the integer provider's
     * sums are exact on these codes on every AVX2 CPU. */
    ly_onednn_int8_allow_without_vnni(1);
    for (int64_t channels = 16; channels <= 24; channels += 8)
        for (int threads = 1; threads <= 2; threads++) {
            enum { GRAPHS = 3 };
            ly_graph *g[GRAPHS];
            ly_graph_value sum[GRAPHS], out[GRAPHS];
            for (int k = 0; k < GRAPHS; k++) {
                rng_state = 12345;
                assert_int_equal(ly_graph_create(&g[k]), LY_OK);
                ly_graph_value x;
                assert_int_equal(ly_graph_input(g[k], "x", LY_F32, 4, &x), LY_OK);
                ly_graph_value t = int8_conv(g[k], x, channels, 3, LY_GRAPH_NONE);
                sum[k] = int8_conv(g[k], x, channels, 1, t);
                ly_graph_value act;
                assert_int_equal(ly_graph_unary(g[k], LY_OP_SILU, "silu", sum[k], &act), LY_OK);
                out[k] = int8_conv(g[k], act, channels, 1, LY_GRAPH_NONE); /* not an output */
                assert_int_equal(ly_graph_output(g[k], out[k], "y"), LY_OK);
                if (k >= 1) assert_int_equal(ly_graph_output(g[k], sum[k], "sum"), LY_OK);
                if (k >= 2) assert_int_equal(ly_graph_output(g[k], t, "t"), LY_OK);
            }
            ly_tensor x;
            make_input(&x, channels, 20, 13);
            const float *y[GRAPHS];
            ly_graph_ctx *ctx[GRAPHS];
            int folded[GRAPHS];
            for (int k = 0; k < GRAPHS; k++) {
                assert_int_equal(ly_graph_ctx_create(g[k], &ctx[k]), LY_OK);
                assert_int_equal(ly_graph_run(ctx[k], 1, &x, threads), LY_OK);
                y[k] = view_data(ctx[k], out[k]);
                ly_graph_stats stats;
                assert_int_equal(ly_graph_get_stats(ctx[k], &stats), LY_OK);
                folded[k] = stats.folded_nodes;
            }
            /* Each output taken away undoes one fold; on an AVX-512 VNNI CPU
             * the int8 provider takes both (its copy back applies the SiLU). */
            assert_int_equal(folded[2], 0);
            assert_true(folded[0] >= folded[1] && folded[1] <= 1);
#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(LY_HAVE_ONEDNN)
            if (ly_cpu()->avx512f && ly_cpu()->avx512_vnni) {
                assert_int_equal(folded[0], 2);
                assert_int_equal(folded[1], 1);
            }
#endif
            int64_t n = channels * 20 * 13;
            for (int k = 1; k < GRAPHS; k++)
                assert_memory_equal(y[0], y[k], (size_t)n * sizeof(float));
            double biggest = 0;
            for (int64_t i = 0; i < n; i++)
                biggest = fmax(biggest, fabs(y[0][i]));
            assert_true(biggest > 0.5); /* a live result, not zeros */
            for (int k = 0; k < GRAPHS; k++) {
                ly_graph_ctx_free(ctx[k]);
                ly_graph_free(g[k]);
            }
            ly_tensor_free(&x);
        }
    ly_onednn_int8_allow_without_vnni(0);
}

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(LY_HAVE_ONEDNN)
typedef struct eligible_impls {
    bool amx_int8, onednn_int8;
} eligible_impls;

static void note_eligible(const char *slot, const char *impl, bool eligible, const char *why_not,
                          void *user)
{
    (void)slot;
    (void)why_not;
    eligible_impls *seen = user;
    if (strcmp(impl, "amx_int8") == 0) seen->amx_int8 = eligible;
    if (strcmp(impl, "onednn_int8") == 0) seen->onednn_int8 = eligible;
}
#endif

/* The int8 convolutions' sums on AMX tiles (amx_int8) against oneDNN's
 * (onednn_int8), each alone with the references: the same bits. Rows of 37
 * pixels (two blocks of 16 and a tail), a stride of 2, 24 to 72 channels (a
 * chunk of 64 codes and a tail, blocks of 16 outputs and a tail of 8), a
 * residual, and the RepConvN fold; 1 and 3 threads (bands of unequal rows). */
static void test_amx_int8_sums_match_onednn(void **state)
{
    (void)state;
#if !defined(LY_HAVE_AVX2_PROVIDERS) || !defined(LY_HAVE_ONEDNN)
    print_message("skipped: this build has no oneDNN or no AVX2 providers\n");
    skip();
#else
    eligible_impls seen = {0};
    assert_int_equal(ly_kernel_list("conv2d_int8", note_eligible, &seen), LY_OK);
    if (!seen.amx_int8 || !seen.onednn_int8) {
        print_message("skipped: amx_int8 or onednn_int8 not eligible here (AMX-INT8, VNNI)\n");
        skip();
    }
    const char *impls[2] = {"onednn_int8", "amx_int8"};
    float *y[2] = {NULL, NULL};
    int64_t n = 0;
    for (int threads = 1; threads <= 3; threads += 2) {
        for (int k = 0; k < 2; k++) {
            rng_state = 777;
            ly_graph *g;
            assert_int_equal(ly_graph_create(&g), LY_OK);
            ly_graph_value x, a, b, c, d, t, sum, e;
            assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
            a = int8_conv_of(g, x, 24, 24, 3, 1, LY_ACT_SILU, LY_GRAPH_NONE);
            b = int8_conv_of(g, a, 24, 40, 3, 2, LY_ACT_SILU, LY_GRAPH_NONE);
            c = int8_conv_of(g, b, 40, 72, 1, 1, LY_ACT_SILU, LY_GRAPH_NONE);
            d = int8_conv_of(g, c, 72, 40, 1, 1, LY_ACT_NONE, b);
            t = int8_conv_of(g, d, 40, 40, 3, 1, LY_ACT_NONE, LY_GRAPH_NONE);
            sum = int8_conv_of(g, d, 40, 40, 1, 1, LY_ACT_NONE, t);
            assert_int_equal(ly_graph_unary(g, LY_OP_SILU, "silu", sum, &e), LY_OK);
            assert_int_equal(ly_graph_output(g, e, "y"), LY_OK);
            ly_tensor in;
            make_input(&in, 24, 29, 74); /* 37 output pixels a row after the stride */
            setenv("LIBREYOLO_KERNELS", impls[k], 1);
            ly_graph_ctx *ctx;
            assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
            ly_status st = ly_graph_run(ctx, 1, &in, threads);
            unsetenv("LIBREYOLO_KERNELS");
            assert_int_equal(st, LY_OK);
            ly_tensor out;
            assert_int_equal(ly_graph_value_view(ctx, e, &out), LY_OK);
            n = ly_tensor_numel(&out);
            assert_int_equal(n, 40 * 15 * 37);
            y[k] = malloc((size_t)n * sizeof(float));
            assert_non_null(y[k]);
            memcpy(y[k], out.data, (size_t)n * sizeof(float));
            ly_graph_ctx_free(ctx);
            ly_graph_free(g);
            ly_tensor_free(&in);
        }
        assert_memory_equal(y[0], y[1], (size_t)n * sizeof(float));
        double biggest = 0;
        for (int64_t i = 0; i < n; i++)
            biggest = fmax(biggest, fabs(y[0][i]));
        assert_true(biggest > 0.5);
        free(y[0]);
        free(y[1]);
    }
#endif
}

/* A stateful conv2d_int8 on the reference's numbers whose states take the
 * node writing their residual (registry_internal.h) and then fail. */
typedef struct folding_state {
    bool took_residual;
} folding_state;
static int folding_failures;

static ly_status folding_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                 void **state)
{
    (void)call;
    (void)info;
    *state = calloc(1, sizeof(folding_state));
    return *state ? LY_OK : LY_E_NO_MEMORY;
}

static ly_status folding_run(void *state, const ly_kernel_call *call)
{
    if (((folding_state *)state)->took_residual) {
        folding_failures++;
        return LY_E_PROVIDER;
    }
    return ly_op_defs[LY_OP_CONV2D_INT8].reference(call);
}

static bool folding_take_residual(void *state, void *producer)
{
    (void)producer;
    ((folding_state *)state)->took_residual = true;
    return true;
}

static const ly_kernel_stateful folding = {
    .prepare = folding_prepare, .run = folding_run, .release = free};

/* A node whose state took its residual's producer and then fails: the
 * producer runs again first (it wrote nothing), then the node on the
 * implementations after the failed one, which is disabled (one warning). */
static void test_folded_residual_falls_back(void **state)
{
    (void)state;
    ly_kernel_impl_desc d = {.struct_size = sizeof d,
                             .slot = ly_op_name(LY_OP_CONV2D_INT8),
                             .name = "folding",
                             .stateful = &folding};
    assert_int_equal(ly_kernel_register_impl(&d), LY_OK);
    ly_kernel_folds folds = {.residual = folding_take_residual};
    ly_kernel_folds_register(&folding, &folds);
    int warnings = 0;
    ly_set_log_handler(quiet, &warnings, LY_LOG_WARNING);
    ly_graph *g;
    rng_state = 777;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    ly_graph_value t = int8_conv(g, x, 8, 3, LY_GRAPH_NONE);
    ly_graph_value sum = int8_conv(g, x, 8, 1, t);
    assert_int_equal(ly_graph_output(g, sum, "sum"), LY_OK);
    ly_tensor x_in;
    make_input(&x_in, 8, 9, 7);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    float *first = malloc(8 * 9 * 7 * sizeof(float));
    assert_non_null(first);
    for (int run = 0; run < 2; run++) {
        assert_int_equal(ly_graph_run(ctx, 1, &x_in, 1), LY_OK);
        ly_graph_stats stats;
        assert_int_equal(ly_graph_get_stats(ctx, &stats), LY_OK);
        if (run == 0) assert_int_equal(stats.folded_nodes, 1);
        ly_tensor out;
        assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
        const float *o = out.data;
        if (run == 0) {
            memcpy(first, o, 8 * 9 * 7 * sizeof(float));
            continue;
        }
        /* the next run planned without it: the same sums, within conv2d_int8's tolerance */
        double biggest = 0, worst = 0;
        for (int64_t i = 0; i < 8 * 9 * 7; i++) {
            biggest = fmax(biggest, fabs(o[i]));
            worst = fmax(worst, fabs(o[i] - first[i]));
        }
        assert_true(biggest > 0.5);
        assert_true(worst <= 1e-4 * biggest);
    }
    assert_int_equal(folding_failures, 1);
    assert_int_equal(warnings, 1);
    free(first);
    ly_tensor_free(&x_in);
    ly_set_log_handler(NULL, NULL, LY_LOG_WARNING);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    assert_int_equal(ly_kernel_unregister(ly_op_name(LY_OP_CONV2D_INT8), "folding"), LY_OK);
}

static void test_shared_by_threads(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, b, parts[2], cat, y;
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    a = random_conv(g, x, 3, 16, LY_GRAPH_NONE);
    b = random_conv(g, a, 16, 16, a);
    parts[0] = a;
    parts[1] = b;
    assert_int_equal(ly_graph_concat(g, "cat", 2, parts, 1, &cat), LY_OK);
    y = random_conv(g, cat, 32, 8, LY_GRAPH_NONE);
    assert_int_equal(ly_graph_output(g, y, "y"), LY_OK);
    ly_tensor in;
    make_input(&in, 3, 24, 20);

    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_acquire(g, &ctx), LY_OK);
    assert_int_equal(ly_graph_run(ctx, 1, &in, 1), LY_OK);
    ly_tensor out;
    assert_int_equal(ly_graph_get_output(ctx, 0, &out, NULL), LY_OK);
    int64_t n = ly_tensor_numel(&out);
    float *want = malloc((size_t)n * sizeof(float));
    assert_non_null(want);
    memcpy(want, out.data, (size_t)n * sizeof(float));
    ly_graph_ctx_release(ctx);

    pthread_t threads[THREADS];
    shared_run runs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        runs[t] = (shared_run){.g = g, .input = &in, .want = want, .n = n, .status = LY_OK};
        assert_int_equal(pthread_create(&threads[t], NULL, run_shared, &runs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        if (runs[t].status != LY_OK) fail_msg("thread %d: %s", t, ly_status_name(runs[t].status));
        assert_int_equal(runs[t].mismatches, 0);
    }
    /* Every thread planned nothing new: one plan for the one shape. */
    assert_int_equal(ly_graph_ctx_acquire(g, &ctx), LY_OK);
    ly_graph_stats s;
    assert_int_equal(ly_graph_get_stats(ctx, &s), LY_OK);
    assert_int_equal(s.plans, 1);
    ly_graph_ctx_release(ctx);
    free(want);
    ly_tensor_free(&in);
    ly_graph_free(g); /* frees the pooled contexts */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_layouts_match_nchw),
        cmocka_unit_test(test_batch_matches_images),
        cmocka_unit_test(test_liveness_reuse),
        cmocka_unit_test(test_replace_and_prune),
        cmocka_unit_test(test_item_span_slabs),
        cmocka_unit_test(test_concat_in_place),
        cmocka_unit_test(test_arena_reuse),
        cmocka_unit_test(test_shapes_and_errors),
        cmocka_unit_test(test_integer_values),
        cmocka_unit_test(test_failing_prepared_implementation),
        cmocka_unit_test(test_folded_nodes),
        cmocka_unit_test(test_amx_int8_sums_match_onednn),
        cmocka_unit_test(test_folded_residual_falls_back),
        cmocka_unit_test(test_shared_by_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
