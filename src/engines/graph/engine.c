/* SPDX-License-Identifier: MIT */
/*
 * The graph engine (recipe.h): a model's network as an ly_graph, each session
 * one of the graph's pooled contexts (its arena), so threads share the graph,
 * its plans and its prepared weights and each runs in memory of its own. The
 * input is planned in the arena: preprocessing writes into it and its bytes
 * serve later layers once the first has read it (LibreYOLO9t at 640: ~3 MiB
 * less peak RSS than an input buffer of its own).
 */
#include "core/core.h"
#include "engines/graph/graph_engine.h"
#include "graph/graph.h"
#include "models/recipe.h"

#include <stdlib.h>

/* A session is a pooled context (ly_engine_session stays incomplete here). */
static ly_status acquire(void *data, ly_engine_session **out)
{
    return ly_graph_ctx_acquire(data, (ly_graph_ctx **)out);
}

static void release(void *data, ly_engine_session *s)
{
    (void)data;
    ly_graph_ctx_release((ly_graph_ctx *)s);
}

static ly_status batch_input_buffer(ly_engine_session *s, int64_t n, int64_t h, int64_t w,
                                    int threads, float **data)
{
    ly_graph_ctx *ctx = (ly_graph_ctx *)s;
    ly_tensor shape = {.dtype = LY_F32, .ndim = 4, .shape = {n, 3, h, w}};
    ly_status st = ly_graph_prepare(ctx, 1, &shape, threads);
    void *room = NULL;
    if (st == LY_OK) st = ly_graph_ctx_input_buffer(ctx, 0, &room);
    *data = room;
    return st;
}

static ly_status input_buffer(ly_engine_session *s, int64_t h, int64_t w, int threads, float **data)
{
    return batch_input_buffer(s, 1, h, w, threads, data);
}

static ly_status run(ly_engine_session *s, const ly_tensor *input, int threads)
{
    return ly_graph_run((ly_graph_ctx *)s, 1, input, threads);
}

ly_status ly_graph_engine_outputs(ly_graph_ctx *ctx, ly_tensor *views, const char **names,
                                  int capacity, int *count)
{
    *count = 0;
    for (int i = 0;; i++) {
        ly_tensor view;
        const char *name;
        if (ly_graph_get_output(ctx, i, &view, &name) != LY_OK) {
            ly_clear_error();
            return LY_OK;
        }
        if (i >= capacity)
            return ly_set_error(LY_E_UNSUPPORTED, "the network has more than %d outputs", capacity);
        views[i] = view;
        names[i] = name;
        *count = i + 1;
    }
}

ly_status ly_graph_engine_output_shapes(ly_graph *g, int64_t h, int64_t w, ly_tensor *shapes,
                                        int capacity, int *count)
{
    *count = 0;
    int n = ly_graph_output_count(g);
    if (n > capacity)
        return ly_set_error(LY_E_UNSUPPORTED, "the network has %d outputs, at most %d", n,
                            capacity);
    ly_tensor *all = calloc((size_t)ly_graph_value_count(g) + 1, sizeof *all);
    if (!all) return ly_set_error(LY_E_NO_MEMORY, "out of memory");
    ly_tensor input = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, h, w}};
    ly_status st = ly_graph_infer(g, 1, &input, all);
    for (int i = 0; st == LY_OK && i < n; i++) {
        ly_graph_value v;
        st = ly_graph_output_value(g, i, &v, NULL);
        if (st == LY_OK) shapes[i] = all[v];
    }
    free(all);
    *count = st == LY_OK ? n : 0;
    return st;
}

static ly_status outputs(ly_engine_session *s, ly_tensor *views, const char **names, int capacity,
                         int *count)
{
    return ly_graph_engine_outputs((ly_graph_ctx *)s, views, names, capacity, count);
}

static ly_status output_shapes(void *data, int64_t h, int64_t w, ly_tensor *shapes, int capacity,
                               int *count)
{
    return ly_graph_engine_output_shapes(data, h, w, shapes, capacity, count);
}

static struct ly_graph *graph(void *data)
{
    return data;
}

static void engine_free(void *data)
{
    ly_graph_free(data);
}

static const ly_engine graph_engine = {.name = "graph",
                                       .acquire = acquire,
                                       .release = release,
                                       .input_buffer = input_buffer,
                                       .batch_input_buffer = batch_input_buffer,
                                       .run = run,
                                       .outputs = outputs,
                                       .output_shapes = output_shapes,
                                       .graph = graph,
                                       .free = engine_free};

ly_status ly_graph_engine_attach(ly_model_desc *d, struct ly_graph *g)
{
    ly_status st = ly_graph_input_in_arena(g, 0);
    if (st != LY_OK) {
        ly_graph_free(g);
        return st;
    }
    d->engine = &graph_engine;
    d->engine_data = g;
    return LY_OK;
}
