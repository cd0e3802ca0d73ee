/* SPDX-License-Identifier: MIT */
/*
 * ExecuTorch .pte programs (executorch.md A5): LibreYOLO's ExecuTorchBackend,
 * as an engine (recipe.h). The .pte suffix selects it; the metadata sidecar
 * (<program>.json) is mandatory and checked key by key, and names the recipe
 * (its model_family) whose pre- and post-processing the program gets, so a
 * .pte predicts as its checkpoint does. XNNPACK's presence is checked before
 * the program is read (into memory, no mmap) and validated, and the method is
 * prepared (every delegate built, every operator resolved) before anything
 * runs.
 *
 * Sessions: a method instance holds its planned memory and delegate state,
 * so each session is one instance over the shared, immutable program; one is
 * made at load, others when threads run at once, and they are kept for reuse.
 */
#include "core/core.h"
#include "engines/executorch/et_runtime.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/export_support.h"
#include "models/recipe.h"
#include "pte/commit.h"
#include "pte/sidecar.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct pte_engine;
struct ly_engine_session {
    const struct pte_engine *engine;
    ly_et_method *method;
    ly_tensor input; /* the letterboxed input, the session's own */
    struct ly_engine_session *next_idle;
};

typedef struct pte_engine {
    ly_pte_program *program;
    char *what; /* the path, for messages */
    int64_t h, w;
    int n_outputs;
    char names[LY_MODEL_MAX_OUTPUTS][32];
    pthread_mutex_t lock;
    ly_engine_session *idle;
} pte_engine;

static void session_free(ly_engine_session *s)
{
    if (!s) return;
    ly_et_method_free(s->method);
    ly_tensor_free(&s->input);
    free(s);
}

static ly_status session_new(pte_engine *e, ly_engine_session **out)
{
    ly_engine_session *s = calloc(1, sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "ly_model: out of memory");
    ly_status st = ly_et_method_load(e->program, e->what, &s->method);
    if (st != LY_OK) {
        free(s);
        return st;
    }
    s->engine = e;
    *out = s;
    return LY_OK;
}

static ly_status pte_acquire(void *data, ly_engine_session **out)
{
    pte_engine *e = data;
    pthread_mutex_lock(&e->lock);
    ly_engine_session *s = e->idle;
    if (s) e->idle = s->next_idle;
    pthread_mutex_unlock(&e->lock);
    if (s) {
        *out = s;
        return LY_OK;
    }
    return session_new(e, out);
}

static void pte_release(void *data, ly_engine_session *s)
{
    pte_engine *e = data;
    pthread_mutex_lock(&e->lock);
    s->next_idle = e->idle;
    e->idle = s;
    pthread_mutex_unlock(&e->lock);
}

static ly_status pte_input_buffer(ly_engine_session *s, int64_t h, int64_t w, int threads,
                                  float **data)
{
    (void)threads;
    if (!s->input.data) {
        int64_t shape[4] = {1, 3, h, w};
        ly_status st = ly_tensor_alloc(&s->input, LY_F32, 4, shape);
        if (st != LY_OK) return st;
    }
    *data = s->input.data;
    return LY_OK;
}

static ly_status pte_run(ly_engine_session *s, const ly_tensor *input, int threads)
{
    return ly_et_method_execute(s->method, input, 1, threads);
}

static ly_status method_outputs(const pte_engine *e, const ly_et_method *m, ly_tensor *views,
                                const char **names, int capacity, int *count)
{
    size_t n = ly_et_method_num_outputs(m);
    if (n > (size_t)capacity)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: the program returns %zu outputs, at most %d",
                            e->what, n, capacity);
    for (size_t i = 0; i < n; i++) {
        ly_status st = ly_et_method_output(m, i, &views[i]);
        if (st != LY_OK) return st;
        if (names) names[i] = e->names[i];
    }
    *count = (int)n;
    return LY_OK;
}

static ly_status pte_outputs(ly_engine_session *s, ly_tensor *views, const char **names,
                             int capacity, int *count)
{
    return method_outputs(s->engine, s->method, views, names, capacity, count);
}

/* A program's shapes are fixed: the first method's, made at load. */
static ly_status pte_output_shapes(void *data, int64_t h, int64_t w, ly_tensor *shapes,
                                   int capacity, int *count)
{
    pte_engine *e = data;
    if (h != e->h || w != e->w)
        return ly_set_error(LY_E_SHAPE, "%s: the program takes [1, 3, %lld, %lld] only", e->what,
                            (long long)e->h, (long long)e->w);
    pthread_mutex_lock(&e->lock);
    ly_status st = e->idle ? method_outputs(e, e->idle->method, shapes, NULL, capacity, count)
                           : ly_set_error(LY_E_INTERNAL, "%s: no method", e->what);
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; st == LY_OK && i < *count; i++)
        shapes[i].data = NULL;
    return st;
}

static void pte_free(void *data)
{
    pte_engine *e = data;
    if (!e) return;
    for (ly_engine_session *s = e->idle, *next; s; s = next) {
        next = s->next_idle;
        session_free(s);
    }
    ly_pte_program_free(e->program);
    pthread_mutex_destroy(&e->lock);
    free(e->what);
    free(e);
}

static const ly_engine pte_engine_ops = {.name = "executorch",
                                         .acquire = pte_acquire,
                                         .release = pte_release,
                                         .input_buffer = pte_input_buffer,
                                         .run = pte_run,
                                         .outputs = pte_outputs,
                                         .output_shapes = pte_output_shapes,
                                         .free = pte_free};

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A rectangular program is allowed for the families whose inputs may be. */
static bool rectangular_family(const char *family)
{
    const ly_recipe *recipe = ly_recipe_find(family);
    return recipe && recipe->rectangular;
}

/* ---- loading ---------------------------------------------------------------------- */

ly_status ly_pte_load_model(const char *path, ly_model_desc *d)
{
    if (!path || !ends_with(path, ".pte")) return LY_E_DECLINED;
    /* An interrupted export leaves a journal: finish it before reading the pair. */
    ly_status st = ly_pte_recover(path, NULL);
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    struct stat sb;
    if (stat(path, &sb) != 0 || S_ISDIR(sb.st_mode))
        return ly_set_error(LY_E_NOT_FOUND, "ExecuTorch program not found: %s", path);
    const ly_sidecar_read_options read = {.rectangular = rectangular_family,
                                          .default_names = ly_coco_names,
                                          .n_default_names = LY_COCO_CLASSES};
    ly_sidecar info;
    st = ly_sidecar_read(path, &read, &info);
    if (st != LY_OK) {
        ly_sidecar_free(&info);
        return st;
    }
    if (!ly_et_xnnpack_available()) {
        ly_sidecar_free(&info);
        return ly_set_error(LY_E_UNSUPPORTED,
                            "The installed ExecuTorch runtime does not provide XnnpackBackend, but "
                            "this program requires it. (libreyolo was built without XNNPACK)");
    }
    /* "detection" reads as "detect"; a task no family has stays as written */
    const char *canonical = ly_export_canonical_task(info.task);
    char task[16];
    snprintf(task, sizeof task, "%.15s", canonical ? canonical : info.task);
    const ly_recipe *recipe = ly_recipe_find(info.family);
    if (!recipe || strcmp(task, recipe->task) != 0) {
        char runs[160] = "";
        for (int i = 0; i < ly_recipe_count; i++)
            snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s %s", i ? ", " : "",
                     ly_recipes[i]->family, ly_recipes[i]->task);
        ly_status e =
            ly_set_error(LY_E_UNSUPPORTED,
                         "ly_model_load: %s: ExecuTorch programs of %s %s are not "
                         "supported by this runtime (%s)",
                         path, *info.family ? info.family : "(no model_family)", task, runs);
        ly_sidecar_free(&info);
        return e;
    }
    pte_engine *e = calloc(1, sizeof *e);
    char *what = malloc(strlen(path) + 1);
    if (!e || !what) {
        free(e);
        free(what);
        ly_sidecar_free(&info);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    strcpy(what, path);
    e->what = what;
    pthread_mutex_init(&e->lock, NULL);
    e->h = info.h;
    e->w = info.w;
    d->recipe = recipe;
    d->engine = &pte_engine_ops;
    d->engine_data = e;
    d->names = info.names; /* the model owns them now */
    d->nc = info.nc;
    snprintf(d->size, sizeof d->size, "%s", info.size);
    snprintf(d->task, sizeof d->task, "%s", task);
    d->imgsz = info.h > info.w ? info.h : info.w;
    d->stride = 0;
    d->fixed_h = info.h;
    d->fixed_w = info.w;

    st = ly_pte_read_file(path, &e->program);
    ly_engine_session *first = NULL;
    if (st == LY_OK) st = session_new(e, &first);
    if (st != LY_OK) return st;
    e->idle = first;
    /* The program must take what the sidecar says. */
    ly_tensor in;
    if (ly_et_method_num_inputs(first->method) != 1 || ly_et_method_num_outputs(first->method) < 1)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: a detection program takes one input and returns "
                            "at least one output",
                            path);
    st = ly_et_method_input_shape(first->method, 0, &in);
    if (st != LY_OK) return st;
    if (in.dtype != LY_F32 || in.ndim != 4 || in.shape[0] != 1 || in.shape[1] != 3 ||
        in.shape[2] != info.h || in.shape[3] != info.w) {
        char shape[96];
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the program's input is %s %s, the sidecar says "
                            "f32 [1, 3, %lld, %lld]",
                            path, ly_dtype_name(in.dtype), ly_shape_str(&in, shape, sizeof shape),
                            (long long)info.h, (long long)info.w);
    }
    size_t n = ly_et_method_num_outputs(first->method);
    e->n_outputs = n < LY_MODEL_MAX_OUTPUTS ? (int)n : LY_MODEL_MAX_OUTPUTS;
    for (int i = 0; i < e->n_outputs; i++) {
        if (recipe->output_name)
            recipe->output_name(i, e->names[i], sizeof e->names[i]);
        else
            snprintf(e->names[i], sizeof e->names[i], "output_%d", i);
    }
    return LY_OK;
}
