/* SPDX-License-Identifier: MIT */
/* The public detector API (libreyolo/model.h): loading picks a recipe and an
 * engine (recipe.h), and every prediction runs preprocess -> engine ->
 * postprocess the same way. */
#include "libreyolo/model.h"

#include "core/core.h"
#include "graph/graph.h"
#include "io/image.h"
#include "libreyolo/io.h"
#include "libreyolo/sdpa.h"
#include "models/coco_names.h"
#include "models/predict_options.h"
#include "models/recipe.h"
#include "models/restore.h"
#include "models/tiling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

struct ly_model {
    ly_model_desc d;
    _Atomic int threads; /* resolved; ly_model_set_threads may change it */
};

struct ly_results {
    const char *task; /* static: "detect", "classify", "restore" */
    size_t count;
    ly_detection *detections;
    char *name_text; /* the names the detections (or classes) point to */
    /* classify: probabilities, the classes by descending probability (ties:
     * lower id), each class's name */
    float *probs;
    int *ranked;
    const char **class_names;
    size_t n_probs;
    /* restore: the image, scale x the source */
    uint8_t *restored;
    int restore_scale;
    int orig_height, orig_width;
    int num_tiles; /* tiling: how many tiles it ran on; 0 when it did not tile */
    int tile_size; /* and with what: the tile size, overlap, conf and iou */
    double overlap_ratio;
    float tile_conf, tile_iou;
    double preprocess_ms, inference_ms, postprocess_ms;
};

/* ---- Loading ------------------------------------------------------------ */

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

ly_status ly_model_names_copy(ly_model_desc *d, const char *const *names, size_t count)
{
    d->names = calloc(d->nc > 0 ? (size_t)d->nc : 1, sizeof *d->names);
    if (!d->names)
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory for %lld names",
                            (long long)d->nc);
    for (int64_t i = 0; i < d->nc; i++) {
        const char *name = (size_t)i < count && names && names[i] ? names[i] : "";
        d->names[i] = copy_string(name);
        if (!d->names[i]) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    return LY_OK;
}

ly_status ly_model_names_from_checkpoint(ly_model_desc *d, const ly_checkpoint *ck)
{
    size_t count = 0;
    const char *const *names = NULL;
    ly_status st = ly_checkpoint_class_names(ck, &count, &names);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    if (st == LY_E_NOT_FOUND) count = 0, names = NULL;
    if (!names && d->nc == LY_COCO_CLASSES) names = ly_coco_names, count = LY_COCO_CLASSES;
    return ly_model_names_copy(d, names, count);
}

static bool any_key(const ly_checkpoint *ck, const char *text, bool prefix)
{
    size_t n = 0, len = strlen(text);
    if (ly_checkpoint_tensor_count(ck, &n) != LY_OK) return false;
    for (size_t i = 0; i < n; i++) {
        const char *name;
        ly_tensor view;
        if (ly_checkpoint_tensor_at(ck, i, &name, &view) == LY_OK &&
            (prefix ? strncmp(name, text, len) == 0 : strstr(name, text) != NULL))
            return true;
    }
    ly_clear_error();
    return false;
}

bool ly_model_has_key_containing(const ly_checkpoint *ck, const char *part)
{
    return any_key(ck, part, false);
}

bool ly_model_has_key_starting(const ly_checkpoint *ck, const char *prefix)
{
    return any_key(ck, prefix, true);
}

int64_t ly_model_key_extent(const ly_checkpoint *ck, const char *key, int dim, int ndim)
{
    ly_tensor view;
    if (ly_checkpoint_find(ck, key, &view) != LY_OK || view.ndim <= dim ||
        (ndim >= 0 && view.ndim != ndim)) {
        ly_clear_error();
        return -1;
    }
    return view.shape[dim];
}

ly_status ly_model_meta_size_agrees(const ly_checkpoint *ck, const char *path, const char *family,
                                    const char *size)
{
    const char *meta;
    if (ly_checkpoint_meta_string(ck, "size", &meta) == LY_OK && strcmp(meta, size) != 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the metadata says size '%s', the keys are those "
                            "of %s-%s",
                            path, meta, family, size);
    ly_clear_error();
    return LY_OK;
}

ly_status ly_model_meta_imgsz(const ly_checkpoint *ck, const char *path, int64_t fallback,
                              int64_t multiple, int64_t max, int64_t *imgsz)
{
    *imgsz = fallback;
    int64_t v;
    ly_status st = ly_checkpoint_meta_int(ck, "imgsz", &v);
    if (st == LY_E_NOT_FOUND) {
        ly_clear_error();
        return LY_OK;
    }
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    if (v <= 0 || v % multiple != 0 || v > max)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: metadata imgsz = %lld, expected a positive "
                            "multiple of %lld",
                            path, (long long)v, (long long)multiple);
    *imgsz = v;
    return LY_OK;
}

/* A checkpoint's recipe: by its model_family metadata first (as LibreYOLO's
 * factory), else the first whose keys it has. */
static ly_status checkpoint_recipe(const ly_checkpoint *ck, const char *path, const ly_recipe **out)
{
    char runs[160] = "";
    for (int i = 0; i < ly_recipe_count; i++)
        if (ly_recipes[i]->load_checkpoint)
            snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s", *runs ? ", " : "",
                     ly_recipes[i]->family);
    const char *family, *task;
    ly_status st = ly_checkpoint_meta_string(ck, "model_family", &family);
    if (st == LY_E_NOT_FOUND) {
        ly_clear_error();
        family = NULL;
    } else if (st != LY_OK) {
        return ly_error_prefix(st, "ly_model_load");
    }
    const ly_recipe *r = NULL;
    if (family) {
        r = ly_recipe_find(family);
        if (!r || !r->load_checkpoint)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "ly_model_load: %s: model family '%s' is not supported (this "
                                "build runs %s checkpoints)",
                                path, family, runs);
    } else {
        for (int i = 0; i < ly_recipe_count && !r; i++)
            if (ly_recipes[i]->accepts_keys && ly_recipes[i]->accepts_keys(ck, path))
                r = ly_recipes[i];
        if (!r)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "ly_model_load: %s: no model_family in the metadata, and the keys "
                                "are not those of a family this build runs (%s)",
                                path, runs);
    }
    st = ly_checkpoint_meta_string(ck, "task", &task);
    if (st == LY_OK && strcmp(task, r->task) != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: task '%s' is not supported (this build runs %s "
                            "%s)",
                            path, task, r->family, r->task);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    ly_clear_error();
    *out = r;
    return LY_OK;
}

static bool ends_with_any(const char *key, const char *const *suffixes)
{
    size_t n = strlen(key);
    for (const char *const *s = suffixes; s && *s; s++) {
        size_t m = strlen(*s);
        if (n >= m && strcmp(key + n - m, *s) == 0) return true;
    }
    return false;
}

static bool has_key(const ly_checkpoint *ck, const char *prefix, size_t len, const char *suffix)
{
    char key[512];
    if (len + strlen(suffix) >= sizeof key) return false;
    snprintf(key, sizeof key, "%.*s%s", (int)len, prefix, suffix);
    ly_tensor view;
    bool found = ly_checkpoint_find(ck, key, &view) == LY_OK;
    if (!found) ly_clear_error();
    return found;
}

/* Buffers are state, not parameters (as torch's parameters() sees it):
 * BatchNorm's statistics, the recipe's own, and the affine of a
 * FrozenBatchNorm2d (torchvision's and RT-DETR's: weight and bias are
 * buffers too), told from a BatchNorm2d by its statistics without a step
 * count. */
static bool is_buffer(const char *key, const ly_recipe *r, const ly_checkpoint *ck)
{
    static const char *const batch_norm[] = {"running_mean", "running_var", "num_batches_tracked",
                                             NULL};
    static const char *const affine[] = {".weight", ".bias", NULL};
    if (ends_with_any(key, batch_norm) || ends_with_any(key, r->buffer_suffixes)) return true;
    if (!ends_with_any(key, affine)) return false;
    size_t stem = strlen(key) - (ends_with_any(key, (const char *const[]){".bias", NULL}) ? 5 : 7);
    return has_key(ck, key, stem, ".running_mean") &&
           !has_key(ck, key, stem, ".num_batches_tracked");
}

static ly_status count_stored(const ly_checkpoint *ck, const ly_recipe *r, ly_model_desc *d)
{
    size_t n = 0;
    ly_status st = ly_checkpoint_tensor_count(ck, &n);
    int64_t params = 0;
    for (size_t i = 0; st == LY_OK && i < n; i++) {
        const char *name;
        ly_tensor view;
        st = ly_checkpoint_tensor_at(ck, i, &name, &view);
        if (st == LY_OK && !is_buffer(name, r, ck)) params += ly_tensor_numel(&view);
    }
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    d->file_tensors = (int64_t)n;
    d->file_parameters = params;
    return LY_OK;
}

/* The file or name at `path` loaded into `d` (recipe and engine set). */
static ly_status load_any(const char *path, ly_model_desc *d)
{
    ly_status st = ly_pte_load_model(path, d);
    for (int i = 0; i < ly_recipe_count && st == LY_E_DECLINED; i++)
        if (ly_recipes[i]->load_path) {
            st = ly_recipes[i]->load_path(path, d);
            if (st != LY_E_DECLINED) d->recipe = ly_recipes[i];
        }
    if (st != LY_E_DECLINED) return st;
    /* "yolo9-t", "LibreYOLO9t": the weights file they name */
    char resolved[4200];
    st = ly_model_name_resolve(path, resolved, sizeof resolved);
    if (st == LY_OK) path = resolved;
    if (st != LY_OK && st != LY_E_DECLINED) return st;
    ly_checkpoint *ck;
    st = ly_checkpoint_open(path, &ck);
    if (st == LY_E_NOT_FOUND && !strchr(path, '/') && !strchr(path, '.')) {
        char known[1024], names[1024];
        ly_model_names_known(known, sizeof known);
        /* "did you mean": the list split at its ", " into names */
        const char *each[128];
        size_t n = 0;
        snprintf(names, sizeof names, "%s", known);
        for (char *p = names; *p && n < sizeof each / sizeof each[0];) {
            each[n++] = p;
            char *comma = strstr(p, ", ");
            if (!comma) break;
            *comma = '\0';
            p = comma + 2;
        }
        const char *close = ly_closest_word(path, each, n);
        return ly_set_error(LY_E_NOT_FOUND,
                            "ly_model_load: '%s' is no file here, and no model name this build "
                            "knows%s%s%s (%s)",
                            path, close ? "; did you mean '" : "", close ? close : "",
                            close ? "'?" : "", known);
    }
    if (st != LY_OK) return st;
    const ly_recipe *r = NULL;
    st = checkpoint_recipe(ck, path, &r);
    if (st == LY_OK) st = count_stored(ck, r, d);
    if (st == LY_OK) {
        d->recipe = r;
        snprintf(d->task, sizeof d->task, "%s", r->task);
        st = r->load_checkpoint(ck, path, d);
    }
    ly_checkpoint_close(ck);
    return st;
}

/* The recipe checks the engine's outputs, and names default to COCO's for 80
 * classes when the model has none. */
static ly_status bind(ly_model_desc *d, const char *path)
{
    if (!d->recipe || !d->engine)
        return ly_set_error(LY_E_INTERNAL, "ly_model_load: %s: loader left the model incomplete",
                            path);
    if (d->stride == 0 && (d->fixed_h <= 0 || d->fixed_w <= 0)) d->fixed_h = d->fixed_w = d->imgsz;
    int64_t h = d->stride ? d->imgsz : d->fixed_h, w = d->stride ? d->imgsz : d->fixed_w;
    ly_tensor shapes[LY_MODEL_MAX_OUTPUTS];
    int n = 0;
    ly_status st = d->engine->output_shapes(d->engine_data, h, w, shapes, LY_MODEL_MAX_OUTPUTS, &n);
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    if (d->recipe->bind) st = d->recipe->bind(d, shapes, n, path);
    if (st != LY_OK) return st;
    if (d->names) return LY_OK;
    if (d->nc == LY_COCO_CLASSES) return ly_model_names_copy(d, ly_coco_names, LY_COCO_CLASSES);
    return ly_model_names_copy(d, NULL, 0);
}

ly_status ly_model_load(const char *path, const ly_model_options *options, ly_model **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: path is NULL or empty");
    if (options && options->threads < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_model_load: threads %d: expected 0 (automatic) or a positive count",
                            options->threads);
    ly_model *m = calloc(1, sizeof *m);
    if (!m) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    m->threads = ly_threads_resolve(options ? options->threads : 0);
    m->d.file_tensors = m->d.file_parameters = -1;
    ly_status st = load_any(path, &m->d);
    if (st == LY_OK) st = bind(&m->d, path);
    if (st != LY_OK) {
        ly_model_free(m);
        return st;
    }
#if defined(__GLIBC__)
    /* Loading read the whole checkpoint and built the network beside it:
     * what it freed goes back to the system now, not when glibc's heap top
     * happens to be free (a model's resident size is its weights, not twice). */
    malloc_trim(0);
#endif
    *out = m;
    return LY_OK;
}

const ly_model_desc *ly_model_desc_of(const ly_model *model)
{
    return model ? &model->d : NULL;
}

ly_status ly_model_free(ly_model *model)
{
    if (!model) return LY_OK;
    if (model->d.engine && model->d.engine_data) model->d.engine->free(model->d.engine_data);
    if (model->d.recipe && model->d.recipe->free_data && model->d.recipe_data)
        model->d.recipe->free_data(model->d.recipe_data);
    if (model->d.names)
        for (int64_t i = 0; i < model->d.nc; i++)
            free(model->d.names[i]);
    free(model->d.names);
    free(model);
    return LY_OK;
}

/* Where n images go through the network at once: the recipe's graph takes a
 * batch and the engine runs one. */
static bool batches(const ly_model *m)
{
    return m->d.recipe->batched && m->d.engine->batch_input_buffer;
}

ly_status ly_model_get_info(const ly_model *model, ly_model_info *info)
{
    if (!model || !info)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_get_info: model or info is NULL");
    info->family = model->d.recipe->family;
    info->size = model->d.size;
    info->task = model->d.task;
    info->nc = model->d.nc;
    info->imgsz = model->d.imgsz;
    info->names = (const char *const *)model->d.names;
    info->default_conf = model->d.recipe->default_conf;
    info->default_iou = model->d.recipe->default_iou;
    info->default_max_det = model->d.recipe->default_max_det;
    info->input = model->d.recipe->input_description;
    info->engine = model->d.engine->name;
    bool quant = model->d.quant_recipe[0] != '\0';
    info->quant_recipe = quant ? model->d.quant_recipe : NULL;
    info->quant_state = quant ? model->d.quant_state : NULL;
    info->quant_remainder = quant ? model->d.quant_remainder : NULL;
    info->quant_modules = quant ? model->d.quant_modules : 0;
    info->batched = batches(model);
    return LY_OK;
}

static bool input_size_ok(const ly_model *m, int64_t h, int64_t w);

/* 2 x the multiply-adds of every convolution, linear, matmul and attention
 * at [1, 3, imgsz, imgsz]. */
static ly_status conv_gflop(ly_graph *g, int imgsz, double *gflop)
{
    ly_tensor *shapes = calloc((size_t)ly_graph_value_count(g) + 1, sizeof *shapes);
    if (!shapes) return ly_set_error(LY_E_NO_MEMORY, "ly_model_get_stats: out of memory");
    ly_tensor input = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, imgsz, imgsz}};
    ly_status st = ly_graph_infer(g, 1, &input, shapes);
    double macs = 0;
    for (int i = 0; st == LY_OK && i < ly_graph_node_count(g); i++) {
        ly_graph_node_info n;
        st = ly_graph_node_at(g, i, &n);
        if (st != LY_OK) continue;
        const ly_tensor *y = &shapes[n.outputs[0]],
                        *b = n.n_inputs > 1 ? &shapes[n.inputs[1]] : NULL;
        if (n.op == LY_OP_LINEAR && b && b->ndim == 2) /* weight [N, K] */
            macs += (double)ly_tensor_numel(y) * (double)b->shape[1];
        if (n.op == LY_OP_MATMUL && y->ndim >= 2) { /* each output takes K of a's last extent */
            const ly_tensor *a = &shapes[n.inputs[0]];
            macs += (double)ly_tensor_numel(y) * (double)a->shape[a->ndim - 1];
        }
        if (n.op == LY_OP_SDPA && n.n_inputs >= 3 && y->ndim == 4) {
            /* q·kᵀ [.., Nq, Nk] over d, then P·v over Nk */
            const ly_tensor *q = &shapes[n.inputs[0]], *k = &shapes[n.inputs[1]];
            const ly_sdpa_params *p = n.params;
            int tokens = p && p->layout == LY_SDPA_BNHD ? 1 : 2; /* the other middle axis: heads */
            double nq = (double)q->shape[tokens], nk = (double)k->shape[tokens];
            macs += (double)(q->shape[0] * q->shape[3 - tokens]) * nq * nk *
                    (double)(q->shape[3] + y->shape[3]);
        }
        if (n.op != LY_OP_CONV2D) continue;
        const ly_tensor *w = &shapes[n.inputs[1]];
        /* weight [O, C / groups, kh, kw]: each output takes C / groups * kh * kw. */
        if (w->ndim == 4)
            macs += (double)ly_tensor_numel(&shapes[n.outputs[0]]) *
                    (double)(w->shape[1] * w->shape[2] * w->shape[3]);
    }
    free(shapes);
    *gflop = 2.0 * macs / 1e9;
    return st;
}

ly_status ly_model_get_stats(const ly_model *model, int imgsz, ly_model_stats *stats)
{
    if (!model || !stats)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_get_stats: model or stats is NULL");
    if (imgsz < 0) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_get_stats: imgsz < 0");
    *stats = (ly_model_stats){.gflop = NAN,
                              .file_tensors = model->d.file_tensors,
                              .file_parameters = model->d.file_parameters};
    const ly_engine *e = model->d.engine;
    ly_graph *g = e->graph ? e->graph(model->d.engine_data) : NULL;
    if (!g) return LY_OK;
    stats->nodes = ly_graph_node_count(g);
    for (int v = 0; v < ly_graph_value_count(g); v++) {
        ly_graph_value_info info;
        ly_status st = ly_graph_value_at(g, v, &info);
        if (st != LY_OK) return st;
        if (info.kind != LY_GRAPH_VALUE_CONSTANT) continue;
        int64_t n = 1;
        for (int d = 0; d < info.ndim; d++)
            n *= info.shape[d];
        stats->weight_tensors++;
        stats->parameters += n;
        stats->weight_bytes += (size_t)n * ly_dtype_size(info.dtype);
    }
    int size = imgsz ? imgsz : (int)model->d.imgsz;
    if (!input_size_ok(model, size, size))
        return ly_set_error(LY_E_SHAPE, "ly_model_get_stats: imgsz %d does not fit the model",
                            size);
    ly_graph *sized = NULL;
    if (e->graph_for) {
        ly_status st = e->graph_for(model->d.engine_data, size, size, &sized);
        if (st != LY_OK) return ly_error_prefix(st, "ly_model_get_stats");
    }
    ly_status st = conv_gflop(sized ? sized : g, size, &stats->gflop);
    ly_graph_free(sized);
    return st;
}

ly_status ly_model_set_threads(ly_model *model, int threads)
{
    if (!model) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_set_threads: model is NULL");
    if (threads < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_model_set_threads: threads %d: expected 0 (automatic) or a "
                            "positive count",
                            threads);
    model->threads = ly_threads_resolve(threads);
    return LY_OK;
}

ly_status ly_model_set_fused_attention(ly_model *model, bool enabled, int *count)
{
    if (!model)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_set_fused_attention: model is NULL");
    const ly_recipe *r = model->d.recipe;
    int n = 0;
    ly_status st = r->set_fused_attention ? r->set_fused_attention(&model->d, enabled, &n) : LY_OK;
    if (count) *count = n;
    return st;
}

ly_status ly_model_fused_attention(const ly_model *model, int *modules, bool *enabled)
{
    if (!model || !modules || !enabled)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_fused_attention: NULL argument");
    const ly_recipe *r = model->d.recipe;
    *modules = 0;
    *enabled = r->fused_attention && r->fused_attention(&model->d, modules);
    return LY_OK;
}

/* ---- Running ------------------------------------------------------------ */

static bool input_size_ok(const ly_model *m, int64_t h, int64_t w)
{
    if (h <= 0 || w <= 0) return false;
    if (m->d.stride > 0) return h % m->d.stride == 0 && w % m->d.stride == 0;
    return h == m->d.fixed_h && w == m->d.fixed_w;
}

ly_status ly_model_run(ly_model *model, const ly_tensor *input, ly_model_output_fn visit,
                       void *user)
{
    if (!model || !input || !visit)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_run: model, input or visit is NULL");
    ly_status st = ly_check_tensor(input, "ly_model_run: input", LY_F32);
    if (st != LY_OK) return st;
    char shape[96];
    bool batch = batches(model);
    if (input->ndim != 4 || input->shape[0] < 1 || (input->shape[0] != 1 && !batch) ||
        input->shape[1] != 3 || !input_size_ok(model, input->shape[2], input->shape[3])) {
        const char *n = batch ? "N" : "1";
        if (model->d.stride > 0)
            return ly_set_error(LY_E_SHAPE,
                                "ly_model_run: input %s: expected [%s, 3, H, W] with H and W "
                                "positive multiples of %lld",
                                ly_shape_str(input, shape, sizeof shape), n,
                                (long long)model->d.stride);
        return ly_set_error(LY_E_SHAPE, "ly_model_run: input %s: expected [%s, 3, %lld, %lld]",
                            ly_shape_str(input, shape, sizeof shape), n,
                            (long long)model->d.fixed_h, (long long)model->d.fixed_w);
    }
    const ly_engine *e = model->d.engine;
    ly_engine_session *session;
    st = e->acquire(model->d.engine_data, &session);
    if (st != LY_OK) return st;
    int threads = model->threads;
    st = e->run(session, input, threads);
    ly_tensor views[LY_MODEL_MAX_OUTPUTS];
    const char *names[LY_MODEL_MAX_OUTPUTS];
    int n = 0;
    if (st == LY_OK) st = e->outputs(session, views, names, LY_MODEL_MAX_OUTPUTS, &n);
    for (int i = 0; st == LY_OK && i < n; i++)
        visit(names[i], &views[i], user);
    e->release(model->d.engine_data, session);
    return st;
}

ly_status ly_predict_options_check(const ly_model *model, const ly_predict_options *options)
{
    return ly_predict_options_validate(model ? &model->d : NULL, options);
}

static ly_status check_predict_args(const ly_model *m, const ly_image_view *image,
                                    const ly_predict_options *o, ly_predict_options *resolved)
{
    const char *fn = "ly_model_predict";
    ly_status st = ly_predict_options_resolve(&m->d, o, resolved);
    if (st != LY_OK) return st;
    if (!image->pixels) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: image pixels is NULL", fn);
    if (image->width <= 0 || image->height <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: image size %dx%d: expected positive", fn,
                            image->width, image->height);
    if (image->stride < (size_t)image->width * 3)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: image stride %zu is shorter than a row of %d pixels (%zu bytes)",
                            fn, image->stride, image->width, (size_t)image->width * 3);
    if (image->format != LY_PIXELS_RGB && image->format != LY_PIXELS_BGR)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: unknown pixel format %d", fn,
                            (int)image->format);
    return LY_OK;
}

/* Output view `v` of a batch run, narrowed to image `i` of `n`. */
static ly_status image_view(const ly_tensor *v, int64_t i, int64_t n, ly_tensor *out)
{
    if (v->ndim < 1 || v->shape[0] != n)
        return ly_set_error(LY_E_INTERNAL,
                            "ly_model_predict_batch: an output does not lead with the batch (%lld)",
                            (long long)n);
    *out = *v;
    out->shape[0] = 1;
    if (v->data)
        out->data =
            (char *)v->data + (size_t)i * (size_t)ly_tensor_numel(out) * ly_dtype_size(v->dtype);
    return LY_OK;
}

/* One image's outcome of a network call. */
typedef struct predicted {
    ly_box *boxes;
    size_t count;
    float *probs; /* classifiers: nc, the caller's */
} predicted;

/* Preprocess into the engine's own input, run, postprocess: the same for
 * every recipe and engine, in a session of this call's own. n images run as
 * one batch (n > 1 only where batches(m)); times_ms are the whole call's. */
/* `release`: NULL, or per image a decoded image behind it to free once
 * preprocessing has read it (only preprocessing reads pixels; postprocessing
 * needs the size). */
static ly_status predict_n(const ly_model *m, size_t n, const ly_image_view *images,
                           ly_image *const *release, const ly_predict_options *o, int threads,
                           predicted *out, double times_ms[3])
{
    const ly_model_desc *d = &m->d;
    const ly_engine *e = d->engine;
    int64_t h = d->stride ? o->imgsz : d->fixed_h, w = d->stride ? o->imgsz : d->fixed_w;
    double t0 = ly_now_ms();
    ly_engine_session *session;
    ly_status st = e->acquire(d->engine_data, &session);
    if (st != LY_OK) return st;
    float *room = NULL;
    ly_prep stack_prep, *prep = n > 1 ? malloc(n * sizeof *prep) : &stack_prep;
    ly_image_view stack_view, *sized = n > 1 ? malloc(n * sizeof *sized) : &stack_view;
    if (!prep || !sized) st = ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    /* The engine's input buffer comes with its plan (made, and the weights
     * packed, on a first call): engine time, reported as inference. */
    if (st == LY_OK)
        st = n > 1 ? e->batch_input_buffer(session, (int64_t)n, h, w, threads, &room)
                   : e->input_buffer(session, h, w, threads, &room);
    double planned = ly_now_ms();
    size_t plane = (size_t)(3 * h * w);
    for (size_t i = 0; i < n; i++) {
        if (st == LY_OK)
            st = d->recipe->preprocess(d, &images[i], h, w, room + i * plane, &prep[i]);
        sized[i] = images[i];
        if (release && release[i]) {
            ly_image_free(release[i]);
            sized[i].pixels = NULL;
        }
    }
    double t1 = ly_now_ms();
    ly_tensor input = {.data = room, .dtype = LY_F32, .ndim = 4, .shape = {(int64_t)n, 3, h, w}};
    if (st == LY_OK) st = e->run(session, &input, threads);
    double t2 = ly_now_ms();
    ly_tensor views[LY_MODEL_MAX_OUTPUTS], mine[LY_MODEL_MAX_OUTPUTS];
    const char *names[LY_MODEL_MAX_OUTPUTS];
    int k = 0;
    if (st == LY_OK) st = e->outputs(session, views, names, LY_MODEL_MAX_OUTPUTS, &k);
    for (size_t i = 0; st == LY_OK && i < n; i++) {
        for (int j = 0; st == LY_OK && j < k; j++)
            st = n > 1 ? image_view(&views[j], (int64_t)i, (int64_t)n, &mine[j])
                       : (mine[j] = views[j], LY_OK);
        if (st == LY_OK && d->recipe->probabilities)
            st = d->recipe->probabilities(d, mine, k, out[i].probs);
        else if (st == LY_OK)
            st = d->recipe->postprocess(d, mine, k, &prep[i], &sized[i], o, &out[i].boxes,
                                        &out[i].count);
    }
    e->release(d->engine_data, session);
    if (n > 1) free(prep), free(sized);
    times_ms[0] = t1 - planned;
    times_ms[1] = (t2 - t1) + (planned - t0);
    times_ms[2] = ly_now_ms() - t2;
    return st;
}

static ly_status predict(const ly_model *m, const ly_image_view *image, ly_image *release,
                         const ly_predict_options *o, int threads, ly_box **boxes, size_t *count,
                         float *probs, double times_ms[3])
{
    predicted one = {.probs = probs};
    ly_status st = predict_n(m, 1, image, release ? &release : NULL, o, threads, &one, times_ms);
    *boxes = one.boxes;
    *count = one.count;
    return st;
}

/* A class's name, "" for a class the checkpoint names none for (RF-DETR's
 * no-object column, nc, can be a detection as in LibreYOLO). */
static const char *class_name(const ly_model *m, int cls)
{
    return cls >= 0 && cls < m->d.nc && m->d.names ? m->d.names[cls] : "";
}

static ly_status make_results(const ly_model *m, const ly_box *boxes, size_t count,
                              ly_results **out)
{
    ly_results *r = calloc(1, sizeof *r);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    size_t text = 1;
    for (size_t i = 0; i < count; i++)
        text += strlen(class_name(m, boxes[i].cls)) + 1;
    r->detections = calloc(count ? count : 1, sizeof *r->detections);
    r->name_text = malloc(text);
    if (!r->detections || !r->name_text) {
        ly_results_free(r);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    }
    /* Copies, so results outlive the model. */
    char *p = r->name_text;
    for (size_t i = 0; i < count; i++) {
        ly_detection *d = &r->detections[i];
        memcpy(d->xyxy, boxes[i].xyxy, sizeof d->xyxy);
        d->conf = boxes[i].conf;
        d->cls = boxes[i].cls;
        const char *name = class_name(m, d->cls);
        size_t n = strlen(name) + 1;
        memcpy(p, name, n);
        d->name = p;
        p += n;
    }
    r->count = count;
    r->task = "detect";
    *out = r;
    return LY_OK;
}

static _Thread_local const float *ranking_probs; /* qsort has no context argument */

static int by_probability(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    float x = ranking_probs[i], y = ranking_probs[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

/* Takes `probs` (nc, malloc'd). */
static ly_status make_class_results(const ly_model *m, float *probs, ly_results **out)
{
    size_t nc = (size_t)m->d.nc, text = 1;
    ly_results *r = calloc(1, sizeof *r);
    if (!r) {
        free(probs);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    }
    r->task = "classify";
    r->probs = probs;
    r->n_probs = nc;
    for (size_t i = 0; i < nc; i++)
        text += strlen(m->d.names[i]) + 1;
    r->ranked = malloc(nc * sizeof *r->ranked);
    r->class_names = malloc(nc * sizeof *r->class_names);
    r->name_text = malloc(text);
    r->detections = calloc(1, sizeof *r->detections);
    if (!r->ranked || !r->class_names || !r->name_text || !r->detections) {
        ly_results_free(r);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    }
    char *p = r->name_text;
    for (size_t i = 0; i < nc; i++) {
        size_t n = strlen(m->d.names[i]) + 1;
        memcpy(p, m->d.names[i], n);
        r->class_names[i] = p;
        p += n;
        r->ranked[i] = (int)i;
    }
    ranking_probs = probs;
    qsort(r->ranked, nc, sizeof *r->ranked, by_probability);
    *out = r;
    return LY_OK;
}

/* What every results object says of its source and its time. */
static void stamp_results(ly_results *r, int height, int width, const double times[3])
{
    r->orig_height = height;
    r->orig_width = width;
    r->preprocess_ms = times[0];
    r->inference_ms = times[1];
    r->postprocess_ms = times[2];
}

/* The restore task: the image to its restored form (restore.c). */
static ly_status restore_view(const ly_model *m, const ly_image_view *image, ly_image *release,
                              const ly_predict_options *o, ly_results **out)
{
    int width = image->width, height = image->height; /* `image` may go with `release` */
    ly_results *r = calloc(1, sizeof *r);
    if (r) r->detections = calloc(1, sizeof *r->detections);
    if (!r || !r->detections) {
        ly_results_free(r);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    }
    double times[3];
    ly_status st = ly_restore_run(&m->d, m->threads, image, release, o->tile, o->tile_pad,
                                  &r->restored, times);
    if (st != LY_OK) {
        ly_results_free(r);
        return st;
    }
    r->task = "restore";
    r->restore_scale = m->d.recipe->restore_scale;
    stamp_results(r, height, width, times);
    *out = r;
    return LY_OK;
}

/* LibreYOLO's _predict_tiled for an image larger than the input: each tile a
 * plain prediction of its crop (the same conf, iou, classes, max_det), its
 * boxes shifted back (added in float64, stored as float32, as LibreYOLO's
 * lists become a float32 tensor), merged by class-wise NMS at iou, max_det
 * kept, classes applied again. */
/* One tile's prediction, run on a worker thread or the caller's. */
typedef struct tile_job {
    const ly_model *model;
    const ly_image_view *image;
    const ly_predict_options *options;
    const int (*tiles)[4];
    int threads; /* each tile's */
    struct tile_out {
        ly_box *boxes;
        size_t count;
        ly_status st;
        char error[512]; /* the worker's message (errors are per thread) */
        double times[3];
    } * out;
} tile_job;

static void run_tiles(void *ctx, int64_t begin, int64_t end)
{
    tile_job *job = ctx;
    for (int64_t t = begin; t < end; t++) {
        struct tile_out *o = &job->out[t];
        int x1 = job->tiles[t][0], y1 = job->tiles[t][1];
        ly_image_view crop = {job->image->pixels + (size_t)y1 * job->image->stride + (size_t)x1 * 3,
                              job->tiles[t][2] - x1, job->tiles[t][3] - y1, job->image->stride,
                              job->image->format};
        o->st = predict(job->model, &crop, NULL, job->options, job->threads, &o->boxes, &o->count,
                        NULL, o->times);
        if (o->st != LY_OK) {
            snprintf(o->error, sizeof o->error, "%s", ly_last_error());
            continue;
        }
        o->count = ly_predict_keep_classes(o->boxes, o->count, job->options);
        /* shifted back to the image: added in float64, stored as float32, as
         * LibreYOLO's Python lists become a float32 tensor */
        for (size_t i = 0; i < o->count; i++) {
            float *b = o->boxes[i].xyxy;
            b[0] = (float)((double)b[0] + x1), b[1] = (float)((double)b[1] + y1);
            b[2] = (float)((double)b[2] + x1), b[3] = (float)((double)b[3] + y1);
        }
    }
}

/* LibreYOLO's _predict_tiled for an image larger than the input: each tile a
 * plain prediction of its crop (the same conf, iou, classes, max_det), its
 * boxes shifted back, merged by class-wise NMS at iou, max_det kept, classes
 * applied again. With several threads the tiles run side by side, one
 * thread each (the model is shared); merged in tile order either way. */
static ly_status predict_tiled(ly_model *model, const ly_image_view *image,
                               const ly_predict_options *o, ly_box **boxes_out, size_t *count,
                               int *num_tiles, double times[3])
{
    size_t n_tiles = 0;
    ly_status st = ly_predict_tiles(image->width, image->height, o->imgsz, o->overlap_ratio, NULL,
                                    0, &n_tiles);
    if (st != LY_OK) return st;
    int(*tiles)[4] = malloc(n_tiles * sizeof *tiles);
    struct tile_out *out = calloc(n_tiles, sizeof *out);
    if (!tiles || !out) {
        free(tiles), free(out);
        return ly_set_error(LY_E_NO_MEMORY, "tiling: out of memory");
    }
    ly_predict_tiles(image->width, image->height, o->imgsz, o->overlap_ratio, tiles, n_tiles,
                     &n_tiles);
    ly_predict_options tile_options = *o;
    tile_options.tiling = false;
    int workers = model->threads < (int)n_tiles ? model->threads : (int)n_tiles;
    tile_job job = {
        model, image, &tile_options, (const int(*)[4])tiles, workers > 1 ? 1 : model->threads, out};
    ly_parallel_for((int64_t)n_tiles, 1, workers > 1 ? workers : 1, run_tiles, &job);
    size_t total = 0;
    for (size_t t = 0; t < n_tiles; t++) {
        if (out[t].st != LY_OK && st == LY_OK) st = ly_set_error(out[t].st, "%s", out[t].error);
        total += out[t].count;
        for (int k = 0; k < 3; k++)
            times[k] += out[t].times[k];
    }
    ly_box *all = st == LY_OK ? malloc((total ? total : 1) * sizeof *all) : NULL;
    if (st == LY_OK && !all) st = ly_set_error(LY_E_NO_MEMORY, "tiling: out of memory");
    size_t at = 0;
    for (size_t t = 0; t < n_tiles; t++) {
        if (all && out[t].count) memcpy(all + at, out[t].boxes, out[t].count * sizeof *all);
        at += out[t].count;
        free(out[t].boxes);
    }
    free(out);
    free(tiles);
    size_t kept = 0;
    double t0 = ly_now_ms();
    if (st == LY_OK && total) st = ly_tiles_merge(all, total, o->iou, &kept);
    if (st == LY_OK && kept > (size_t)o->max_det) kept = (size_t)o->max_det;
    if (st == LY_OK) kept = ly_predict_keep_classes(all, kept, o);
    times[2] += ly_now_ms() - t0;
    if (st != LY_OK) {
        free(all);
        return st;
    }
    *boxes_out = all;
    *count = kept;
    *num_tiles = (int)n_tiles;
    return LY_OK;
}

/* The results of one image from its boxes (freed here) or, for a
 * classifier, its probabilities (taken): classes checked and filtered
 * (tiled predictions filtered their own), stamped with its size and times. */
static ly_status finish(const ly_model *model, const ly_predict_options *resolved, ly_box *boxes,
                        size_t count, float *probs, int num_tiles, int height, int width,
                        const double times[3], ly_results **out)
{
    ly_status st = LY_OK;
    int64_t classes = model->d.nc + (model->d.recipe->no_object_class ? 1 : 0);
    for (size_t i = 0; st == LY_OK && i < count; i++)
        if (boxes[i].cls < 0 || boxes[i].cls >= classes)
            st = ly_set_error(LY_E_INTERNAL, "ly_model_predict: class %d out of range",
                              boxes[i].cls);
    if (st == LY_OK && !num_tiles) count = ly_predict_keep_classes(boxes, count, resolved);
    if (st == LY_OK)
        st = probs ? make_class_results(model, probs, out) : make_results(model, boxes, count, out);
    else
        free(probs);
    free(boxes);
    if (st != LY_OK) return st;
    if (num_tiles) {
        (*out)->num_tiles = num_tiles;
        (*out)->tile_size = resolved->imgsz;
        (*out)->overlap_ratio = resolved->overlap_ratio;
        (*out)->tile_conf = resolved->conf;
        (*out)->tile_iou = resolved->iou;
    }
    stamp_results(*out, height, width, times);
    return LY_OK;
}

static ly_status new_probs(const ly_model *model, float **probs)
{
    *probs = NULL;
    if (!model->d.recipe->probabilities) return LY_OK;
    *probs = calloc((size_t)model->d.nc, sizeof **probs);
    return *probs ? LY_OK : ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
}

static ly_status predict_view(ly_model *model, const ly_image_view *image, ly_image *release,
                              const ly_predict_options *options, ly_results **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict: out is NULL");
    *out = NULL;
    if (!model || !image)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict: model or image is NULL");
    ly_predict_options defaults;
    if (!options) {
        ly_predict_options_init(&defaults);
        options = &defaults;
    }
    ly_predict_options resolved;
    ly_status st = check_predict_args(model, image, options, &resolved);
    if (st != LY_OK) return st;

    ly_box *boxes = NULL;
    size_t count = 0;
    double times[3] = {0, 0, 0};
    if (model->d.recipe->restore_scale > 0)
        return restore_view(model, image, release, &resolved, out);
    float *probs;
    st = new_probs(model, &probs);
    if (st != LY_OK) return st;
    int width = image->width, height = image->height; /* `image` may go with `release` */
    int num_tiles = 0;
    /* a classifier predicts once (LibreYOLO's fallback); an image within the
     * input size too */
    bool tiled = resolved.tiling && !probs && (width > resolved.imgsz || height > resolved.imgsz);
    if (tiled) {
        st = predict_tiled(model, image, &resolved, &boxes, &count, &num_tiles, times);
        if (release) ly_image_free(release);
    } else {
        st =
            predict(model, image, release, &resolved, model->threads, &boxes, &count, probs, times);
    }
    if (st != LY_OK) {
        free(boxes), free(probs);
        return st;
    }
    return finish(model, &resolved, boxes, count, probs, num_tiles, height, width, times, out);
}

ly_status ly_model_predict_batch(ly_model *model, const ly_image_view *images, size_t n,
                                 const ly_predict_options *options, ly_results **out)
{
    const char *fn = "ly_model_predict_batch";
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: out is NULL", fn);
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (!model || (!images && n))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: model or images is NULL", fn);
    if (n > LY_PREDICT_MAX_BATCH)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %zu images: expected 1..%d a call", fn, n,
                            LY_PREDICT_MAX_BATCH);
    ly_predict_options defaults;
    if (!options) {
        ly_predict_options_init(&defaults);
        options = &defaults;
    }
    ly_predict_options resolved;
    ly_status st = LY_OK;
    for (size_t i = 0; st == LY_OK && i < n; i++) {
        st = check_predict_args(model, &images[i], options, &resolved);
        if (st != LY_OK) {
            char context[64];
            snprintf(context, sizeof context, "%s: image %zu", fn, i);
            st = ly_error_prefix(st, context);
        }
    }
    if (st != LY_OK || n == 0) return st;
    bool alone = n == 1 || !batches(model) || resolved.tiling || model->d.recipe->restore_scale;
    if (alone) {
        for (size_t i = 0; st == LY_OK && i < n; i++)
            st = predict_view(model, &images[i], NULL, options, &out[i]);
    } else {
        predicted *p = calloc(n, sizeof *p);
        if (!p) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", fn);
        for (size_t i = 0; st == LY_OK && i < n; i++)
            st = new_probs(model, &p[i].probs);
        double times[3] = {0, 0, 0};
        if (st == LY_OK)
            st = predict_n(model, n, images, NULL, &resolved, model->threads, p, times);
        /* each image's share of the call */
        for (int k = 0; k < 3; k++)
            times[k] /= (double)n;
        for (size_t i = 0; i < n; i++) {
            if (st == LY_OK)
                st = finish(model, &resolved, p[i].boxes, p[i].count, p[i].probs, 0,
                            images[i].height, images[i].width, times, &out[i]);
            else
                free(p[i].boxes), free(p[i].probs);
        }
        free(p);
    }
    if (st != LY_OK)
        for (size_t i = 0; i < n; i++) {
            ly_results_free(out[i]);
            out[i] = NULL;
        }
    return st;
}

ly_status ly_model_predict_image(ly_model *model, const ly_image_view *image,
                                 const ly_predict_options *options, ly_results **out)
{
    return predict_view(model, image, NULL, options, out);
}

ly_status ly_model_predict_decoded(ly_model *model, ly_image *image,
                                   const ly_predict_options *options, ly_results **out)
{
    if (!image || !image->pixels) {
        if (out) *out = NULL;
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict_decoded: image is NULL or "
                                                   "empty (expected one ly_image_load decoded)");
    }
    ly_image_view view = {image->pixels, image->width, image->height, (size_t)image->width * 3,
                          LY_PIXELS_RGB};
    ly_status st = predict_view(model, &view, image, options, out);
    ly_image_free(image); /* when the prediction stopped before preprocessing */
    return st;
}

ly_status ly_model_predict_file(ly_model *model, const char *path,
                                const ly_predict_options *options, ly_results **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict_file: out is NULL");
    *out = NULL;
    if (!model) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict_file: model is NULL");
    /* Options before the image, as the command and the Python package check them. */
    ly_status st = options ? ly_predict_options_check(model, options) : LY_OK;
    if (st != LY_OK) return st;
    ly_image image;
    st = ly_image_load(path, &image);
    if (st != LY_OK) return st;
    return ly_model_predict_decoded(model, &image, options, out);
}

/* ---- Results ------------------------------------------------------------ */

bool ly_results_tiling(const ly_results *r, int *tile_size, double *overlap_ratio, float *conf,
                       float *iou)
{
    *tile_size = r->tile_size, *overlap_ratio = r->overlap_ratio;
    *conf = r->tile_conf, *iou = r->tile_iou;
    return r->num_tiles > 0;
}

ly_status ly_results_tiles(const ly_results *results, int *num_tiles)
{
    if (!results || !num_tiles)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_results_tiles: results or num_tiles is NULL");
    *num_tiles = results->num_tiles;
    return LY_OK;
}

ly_status ly_results_count(const ly_results *results, size_t *count)
{
    if (!results || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_count: results or count is NULL");
    *count = results->count;
    return LY_OK;
}

ly_status ly_results_get(const ly_results *results, size_t index, ly_detection *out)
{
    if (!results || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_get: results or out is NULL");
    if (index >= results->count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_get: index %zu: there are %zu",
                            index, results->count);
    *out = results->detections[index];
    return LY_OK;
}

ly_status ly_results_orig_shape(const ly_results *results, int *height, int *width)
{
    if (!results || !height || !width)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_results_orig_shape: results, height or width is NULL");
    *height = results->orig_height;
    *width = results->orig_width;
    return LY_OK;
}

ly_status ly_results_speed(const ly_results *results, double *preprocess_ms, double *inference_ms,
                           double *postprocess_ms)
{
    if (!results) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_speed: results is NULL");
    if (preprocess_ms) *preprocess_ms = results->preprocess_ms;
    if (inference_ms) *inference_ms = results->inference_ms;
    if (postprocess_ms) *postprocess_ms = results->postprocess_ms;
    return LY_OK;
}

ly_status ly_results_free(ly_results *results)
{
    if (!results) return LY_OK;
    free(results->detections);
    free(results->name_text);
    free(results->probs);
    free(results->ranked);
    free(results->class_names);
    free(results->restored);
    free(results);
    return LY_OK;
}

ly_status ly_results_task(const ly_results *results, const char **task)
{
    if (!results || !task)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_task: results or task is NULL");
    *task = results->task ? results->task : "detect";
    return LY_OK;
}

ly_status ly_results_top(const ly_results *results, size_t k, ly_class_prob *out, size_t *n)
{
    if (!results || !n || (k && !out))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_top: NULL argument");
    *n = 0;
    if (!results->probs)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_results_top: these are %s results, not a classifier's",
                            results->task ? results->task : "detect");
    if (k > results->n_probs) k = results->n_probs;
    for (size_t i = 0; i < k; i++) {
        int c = results->ranked[i];
        out[i] =
            (ly_class_prob){.cls = c, .conf = results->probs[c], .name = results->class_names[c]};
    }
    *n = k;
    return LY_OK;
}

ly_status ly_results_probs(const ly_results *results, const float **probs, size_t *count)
{
    if (!results || !probs || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_probs: NULL argument");
    if (!results->probs)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_results_probs: these are %s results, not a classifier's",
                            results->task ? results->task : "detect");
    *probs = results->probs;
    *count = results->n_probs;
    return LY_OK;
}

ly_status ly_results_restored(const ly_results *results, ly_image_view *image, int *scale)
{
    if (!results || !image)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_restored: results or image is NULL");
    if (!results->restored)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_results_restored: these are %s results, not a restoration "
                            "model's",
                            results->task ? results->task : "detect");
    int w = results->orig_width * results->restore_scale;
    *image = (ly_image_view){.pixels = results->restored,
                             .width = w,
                             .height = results->orig_height * results->restore_scale,
                             .stride = (size_t)w * 3,
                             .format = LY_PIXELS_RGB};
    if (scale) *scale = results->restore_scale;
    return LY_OK;
}
