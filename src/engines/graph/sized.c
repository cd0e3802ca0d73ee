/* SPDX-License-Identifier: MIT */
/*
 * The graph engine for networks whose structure depends on the input size
 * (recipe.h): shifted-window transformers at any size have as many windows,
 * and a shift mask, as their map asks, so one graph cannot serve every size.
 * The recipe's builder makes a graph per input size on first use; the last
 * SIZED_KEEP sizes are kept, the least recently used idle one making room
 * (its memory given back first). One: each size's graph holds its weights,
 * masks and arena, and the restore task runs a photo's tiles grouped by size,
 * so one kept size bounds a large photo's memory. When every kept graph is in
 * use by another thread, a session builds one of its own and frees it on
 * release. Sessions are pooled contexts
 * of their size's graph, as in the plain graph engine.
 */
#include "core/core.h"
#include "engines/graph/graph_engine.h"
#include "graph/graph.h"
#include "models/recipe.h"

#include <pthread.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

enum { SIZED_KEEP = 1 };

typedef struct sized_graph {
    int64_t h, w;
    ly_graph *g;
    int users;         /* sessions running it */
    unsigned long age; /* the clock at its last use */
} sized_graph;

typedef struct sized_engine {
    ly_sized_build_fn build;
    void *user;
    void (*free_user)(void *user);
    int64_t canonical_h, canonical_w; /* the graph exporters get */
    pthread_mutex_t lock;
    sized_graph kept[SIZED_KEEP];
    unsigned long clock;
    ly_graph *exported; /* graph()'s, at the canonical size */
} sized_engine;

typedef struct sized_session {
    sized_engine *e;
    sized_graph *kept; /* NULL: `own` is this session's alone */
    ly_graph *own;
    int64_t h, w; /* the size of the graph it holds */
    ly_graph_ctx *ctx;
} sized_session;

static ly_status build_graph(sized_engine *e, int64_t h, int64_t w, ly_graph **out)
{
    ly_graph *g = NULL;
    ly_status st = ly_graph_create(&g);
    if (st == LY_OK) st = e->build(e->user, h, w, g);
    if (st == LY_OK) st = ly_graph_input_in_arena(g, 0);
    if (st != LY_OK) {
        ly_graph_free(g);
        return st;
    }
    *out = g;
    return LY_OK;
}

/* The kept graph of h x w, marked in use, or NULL with *room the slot a new
 * one may take (NULL when every slot is in use). Under the lock. */
static sized_graph *find_kept(sized_engine *e, int64_t h, int64_t w, sized_graph **room)
{
    *room = NULL;
    for (int i = 0; i < SIZED_KEEP; i++) {
        sized_graph *k = &e->kept[i];
        if (k->g && k->h == h && k->w == w) return k;
        if (k->users == 0 && (!*room || !k->g || ((*room)->g && k->age < (*room)->age))) *room = k;
    }
    return NULL;
}

/* A graph for h x w, in use by the session until release. */
static ly_status take_graph(sized_session *s, int64_t h, int64_t w)
{
    sized_engine *e = s->e;
    pthread_mutex_lock(&e->lock);
    sized_graph *room, *k = find_kept(e, h, w, &room);
    if (k) {
        k->users++;
        k->age = ++e->clock;
        pthread_mutex_unlock(&e->lock);
        s->kept = k;
        return LY_OK;
    }
    if (!room) {
        pthread_mutex_unlock(&e->lock);
        return build_graph(e, h, w, &s->own);
    }
    /* Built under the lock: two threads asking for a new size build it once. */
    if (room->g) {
        ly_graph_free(room->g);
        room->g = NULL;
#if defined(__GLIBC__)
        malloc_trim(0); /* the graph's weights and arenas, before the next size's */
#endif
    }
    ly_status st = build_graph(e, h, w, &room->g);
    if (st == LY_OK) {
        room->h = h, room->w = w;
        room->users = 1;
        room->age = ++e->clock;
        s->kept = room;
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

static void drop_graph(sized_session *s)
{
    if (s->ctx) ly_graph_ctx_release(s->ctx);
    s->ctx = NULL;
    if (s->kept) {
        pthread_mutex_lock(&s->e->lock);
        s->kept->users--;
        pthread_mutex_unlock(&s->e->lock);
    }
    ly_graph_free(s->own);
    s->kept = NULL;
    s->own = NULL;
}

static ly_status acquire(void *data, ly_engine_session **out)
{
    sized_session *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "out of memory for a session");
    s->e = data;
    *out = (ly_engine_session *)s;
    return LY_OK;
}

static void release(void *data, ly_engine_session *session)
{
    (void)data;
    sized_session *s = (sized_session *)session;
    drop_graph(s);
    free(s);
}

/* The session on a context of the h x w graph. */
static ly_status hold_size(sized_session *s, int64_t h, int64_t w)
{
    if (s->ctx && s->h == h && s->w == w) return LY_OK;
    drop_graph(s);
    ly_status st = take_graph(s, h, w);
    if (st == LY_OK) st = ly_graph_ctx_acquire(s->own ? s->own : s->kept->g, &s->ctx);
    if (st != LY_OK) return st;
    s->h = h, s->w = w;
    return LY_OK;
}

static ly_status input_buffer(ly_engine_session *session, int64_t h, int64_t w, int threads,
                              float **data)
{
    sized_session *s = (sized_session *)session;
    *data = NULL;
    ly_status hold = hold_size(s, h, w);
    if (hold != LY_OK) return hold;
    ly_tensor shape = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, h, w}};
    ly_status st = ly_graph_prepare(s->ctx, 1, &shape, threads);
    void *room = NULL;
    if (st == LY_OK) st = ly_graph_ctx_input_buffer(s->ctx, 0, &room);
    *data = room;
    return st;
}

static ly_status run(ly_engine_session *session, const ly_tensor *input, int threads)
{
    sized_session *s = (sized_session *)session;
    if (input->ndim != 4)
        return ly_set_error(LY_E_SHAPE, "the network takes one input [1, 3, H, W]");
    ly_status st = hold_size(s, input->shape[2], input->shape[3]);
    return st == LY_OK ? ly_graph_run(s->ctx, 1, input, threads) : st;
}

static ly_status outputs(ly_engine_session *session, ly_tensor *views, const char **names,
                         int capacity, int *count)
{
    sized_session *s = (sized_session *)session;
    *count = 0;
    if (!s->ctx) return ly_set_error(LY_E_INTERNAL, "a sized graph has no run to read");
    return ly_graph_engine_outputs(s->ctx, views, names, capacity, count);
}

static ly_status output_shapes(void *data, int64_t h, int64_t w, ly_tensor *shapes, int capacity,
                               int *count)
{
    sized_session s = {.e = data};
    *count = 0;
    ly_status st = take_graph(&s, h, w);
    if (st == LY_OK)
        st =
            ly_graph_engine_output_shapes(s.own ? s.own : s.kept->g, h, w, shapes, capacity, count);
    drop_graph(&s);
    return st;
}

/* Exporters and stats read the canonical size's graph: one of its own, kept
 * while the model lives (the pointer they get must stay valid), apart from
 * the graphs predictions take turns with. */
static struct ly_graph *graph(void *data)
{
    sized_engine *e = data;
    pthread_mutex_lock(&e->lock);
    if (!e->exported && build_graph(e, e->canonical_h, e->canonical_w, &e->exported) != LY_OK)
        e->exported = NULL;
    ly_graph *g = e->exported;
    pthread_mutex_unlock(&e->lock);
    return g;
}

static ly_status graph_for(void *data, int64_t h, int64_t w, struct ly_graph **out)
{
    return build_graph(data, h, w, out);
}

static void engine_free(void *data)
{
    sized_engine *e = data;
    for (int i = 0; i < SIZED_KEEP; i++)
        ly_graph_free(e->kept[i].g);
    ly_graph_free(e->exported);
    pthread_mutex_destroy(&e->lock);
    if (e->free_user) e->free_user(e->user);
    free(e);
}

static const ly_engine sized_graph_engine = {.name = "graph",
                                             .acquire = acquire,
                                             .release = release,
                                             .input_buffer = input_buffer,
                                             .run = run,
                                             .outputs = outputs,
                                             .output_shapes = output_shapes,
                                             .graph = graph,
                                             .graph_for = graph_for,
                                             .free = engine_free};

ly_status ly_sized_graph_engine_attach(ly_model_desc *d, ly_sized_build_fn build, void *user,
                                       void (*free_user)(void *user), int64_t canonical_h,
                                       int64_t canonical_w)
{
    sized_engine *e = calloc(1, sizeof *e);
    if (!e) {
        if (free_user) free_user(user);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    e->build = build;
    e->user = user;
    e->free_user = free_user;
    e->canonical_h = canonical_h;
    e->canonical_w = canonical_w;
    pthread_mutex_init(&e->lock, NULL);
    d->engine = &sized_graph_engine;
    d->engine_data = e;
    return LY_OK;
}
