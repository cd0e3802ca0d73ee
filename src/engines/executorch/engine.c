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
#include "core/json.h"
#include "engines/executorch/et_runtime.h"
#include "pte/commit.h"
#include "export/export_internal.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/recipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* ---- the sidecar --------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Python's repr of a JSON value, for messages quoting upstream's {x!r}. */
static void repr(const cJSON *v, const char *missing, char *out, size_t size)
{
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !*v->valuestring) || cJSON_IsFalse(v)) {
        if (missing) {
            snprintf(out, size, "'%s'", missing);
            return;
        }
    }
    if (!v || cJSON_IsNull(v)) {
        snprintf(out, size, "None");
    } else if (cJSON_IsString(v)) {
        snprintf(out, size, "'%.200s'", v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(out, size, cJSON_IsTrue(v) ? "True" : "False");
    } else if (cJSON_IsNumber(v)) {
        int64_t whole;
        if (ly_json_int(v, &whole))
            snprintf(out, size, "%lld", (long long)whole);
        else
            snprintf(out, size, "%g", v->valuedouble);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(out, size, "%.200s", t ? t : "?");
        free(t);
    }
}

static const char *string_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* An integer value (JSON number or numeric string), as Python's int(). */
static bool int_of(const cJSON *o, const char *key, int64_t *out, bool *present)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *present = v && !cJSON_IsNull(v);
    return !*present || ly_json_int(v, out);
}

typedef struct sidecar_info {
    char family[32], size[16], task[16];
    int64_t h, w, nc;
    char **names; /* nc entries or NULL */
} sidecar_info;

static void free_names(char **names, int64_t n)
{
    if (!names) return;
    for (int64_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static ly_status read_names(const cJSON *meta, sidecar_info *info, const char *path)
{
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(meta, "names");
    cJSON *parsed = NULL;
    if (cJSON_IsString(names)) {
        parsed = cJSON_Parse(names->valuestring);
        names = parsed;
    }
    info->names = calloc((size_t)info->nc, sizeof *info->names);
    if (!info->names) {
        cJSON_Delete(parsed);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    if (cJSON_IsObject(names)) {
        for (const cJSON *c = names->child; c; c = c->next) {
            char *end;
            errno = 0;
            long long k = strtoll(c->string, &end, 10);
            if (errno || end == c->string || *end) {
                cJSON_Delete(parsed);
                return ly_set_error(LY_E_FORMAT,
                                    "ly_model_load: %s: names key '%s' is not a class index", path,
                                    c->string);
            }
            if (k < 0 || k >= info->nc) continue;
            char text[256];
            if (cJSON_IsString(c))
                snprintf(text, sizeof text, "%s", c->valuestring);
            else
                repr(c, NULL, text, sizeof text);
            free(info->names[k]);
            info->names[k] = strdup(text);
            if (!info->names[k]) {
                cJSON_Delete(parsed);
                return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
            }
        }
    }
    cJSON_Delete(parsed);
    for (int64_t i = 0; i < info->nc; i++) {
        if (info->names[i]) continue;
        char text[40];
        if (info->nc == LY_COCO_CLASSES && !cJSON_IsObject(names))
            snprintf(text, sizeof text, "%s", ly_coco_names[i]);
        else
            snprintf(text, sizeof text, "class_%lld", (long long)i);
        info->names[i] = strdup(text);
        if (!info->names[i]) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    return LY_OK;
}

/* A5 step 4 and the key checks of A2, in upstream's order. */
static ly_status check_sidecar(const char *path, sidecar_info *info)
{
    char side[4200];
    if ((size_t)snprintf(side, sizeof side, "%s.json", path) >= sizeof side)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: path too long");
    FILE *f = fopen(side, "rb");
    if (!f) {
        if (errno == ENOENT)
            return ly_set_error(LY_E_NOT_FOUND, "ExecuTorch metadata sidecar not found: %s", side);
        return ly_set_error(LY_E_IO, "Invalid ExecuTorch metadata sidecar: %s (%s)", side,
                            strerror(errno));
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    bool too_big = false;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap >= (size_t)64 << 20) {
                too_big = true;
                break;
            }
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(text, cap);
            if (!p) {
                free(text);
                fclose(f);
                return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
            }
            text = p;
        }
        size_t got = fread(text + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    bool read_error = ferror(f);
    fclose(f);
    if (too_big || read_error || !text) {
        free(text);
        return ly_set_error(LY_E_FORMAT, "Invalid ExecuTorch metadata sidecar: %s", side);
    }
    text[len] = '\0';
    const char *end = NULL;
    cJSON *meta = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
    free(text);
    if (!meta) return ly_set_error(LY_E_FORMAT, "Invalid ExecuTorch metadata sidecar: %s", side);
    ly_status st = LY_OK;
    char got[300];
    if (!cJSON_IsObject(meta)) {
        st = ly_set_error(LY_E_FORMAT, "ExecuTorch metadata sidecar must contain a JSON object: %s",
                          side);
        goto done;
    }
    const cJSON *delegate = cJSON_GetObjectItemCaseSensitive(meta, "executorch_delegate");
    if (!cJSON_IsString(delegate) || strcasecmp(delegate->valuestring, "xnnpack") != 0) {
        repr(delegate, "missing delegate metadata", got, sizeof got);
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "%s: This LibreYOLO version only supports ExecuTorch programs exported "
                          "for XNNPACK, got %s.",
                          side, got);
        goto done;
    }
    const cJSON *dynamic = cJSON_GetObjectItemCaseSensitive(meta, "dynamic");
    if (dynamic && !cJSON_IsFalse(dynamic) &&
        !(cJSON_IsString(dynamic) && (strcmp(dynamic->valuestring, "false") == 0 ||
                                      strcmp(dynamic->valuestring, "False") == 0))) {
        repr(dynamic, NULL, got, sizeof got);
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "%s: ExecuTorch v1 requires metadata dynamic=false, got %s.", side, got);
        goto done;
    }
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(meta, "precision");
    if (!cJSON_IsString(precision) || strcasecmp(precision->valuestring, "fp32") != 0) {
        repr(precision, "missing precision metadata", got, sizeof got);
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "%s: ExecuTorch v1 requires metadata precision='fp32', got %s.", side,
                          got);
        goto done;
    }
    const char *schema = string_of(meta, "schema_version");
    if (!schema || strncmp(schema, "1.", 2) != 0)
        ly_log(LY_LOG_WARNING, "%s: metadata schema_version %s; this library reads 1.x", side,
               schema ? schema : "missing");

    const char *family = string_of(meta, "model_family");
    snprintf(info->family, sizeof info->family, "%s", family ? family : "");
    const char *size = string_of(meta, "size");
    if (!size) size = string_of(meta, "model_size");
    snprintf(info->size, sizeof info->size, "%s", size ? size : "");
    const char *task = string_of(meta, "task");
    if (!task) task = string_of(meta, "default_task");
    const char *canonical = ly_export_canonical_task(task ? task : "detect");
    snprintf(info->task, sizeof info->task, "%s", canonical ? canonical : task);

    /* _read_metadata_imgsz */
    int64_t h = 0, w = 0, s = 0;
    bool has_h, has_w, has_s;
    if (!int_of(meta, "imgsz_h", &h, &has_h) || !int_of(meta, "imgsz_w", &w, &has_w) ||
        !int_of(meta, "imgsz", &s, &has_s)) {
        st = ly_set_error(LY_E_FORMAT, "%s: imgsz, imgsz_h and imgsz_w must be integers", side);
        goto done;
    }
    if (has_h != has_w) {
        st = ly_set_error(LY_E_FORMAT,
                          "%s: ExecuTorch metadata must define both imgsz_h and imgsz_w, or "
                          "neither.",
                          side);
        goto done;
    }
    if (!has_h) {
        if (!has_s) {
            st = ly_set_error(LY_E_FORMAT,
                              "%s: ExecuTorch metadata must declare a fixed input size.", side);
            goto done;
        }
        h = w = s;
    }
    if (h <= 0 || w <= 0 || h > 16384 || w > 16384) {
        st = ly_set_error(LY_E_FORMAT, "%s: input size %lldx%lld is not a positive size", side,
                          (long long)h, (long long)w);
        goto done;
    }
    const ly_recipe *recipe = ly_recipe_find(info->family);
    if (h != w && (!recipe || !recipe->rectangular)) {
        st = ly_set_error(LY_E_FORMAT,
                          "%s: rectangular input %lldx%lld is not allowed for %s programs", side,
                          (long long)h, (long long)w, *info->family ? info->family : "these");
        goto done;
    }
    info->h = h;
    info->w = w;
    int64_t nc = 0;
    bool has_nc, has_nb;
    if (!int_of(meta, "nc", &nc, &has_nc)) {
        st = ly_set_error(LY_E_FORMAT, "%s: nc must be an integer", side);
        goto done;
    }
    if (!has_nc && !int_of(meta, "nb_classes", &nc, &has_nb)) {
        st = ly_set_error(LY_E_FORMAT, "%s: nb_classes must be an integer", side);
        goto done;
    }
    if (!has_nc && !has_nb) nc = 80;
    if (nc < 1 || nc > 100000) {
        st = ly_set_error(LY_E_FORMAT, "%s: class count %lld", side, (long long)nc);
        goto done;
    }
    info->nc = nc;
    st = read_names(meta, info, side);
done:
    cJSON_Delete(meta);
    return st;
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
    sidecar_info info = {0};
    st = check_sidecar(path, &info);
    if (st != LY_OK) {
        free_names(info.names, info.nc);
        return st;
    }
    if (!ly_et_xnnpack_available()) {
        free_names(info.names, info.nc);
        return ly_set_error(LY_E_UNSUPPORTED,
                            "The installed ExecuTorch runtime does not provide XnnpackBackend, but "
                            "this program requires it. (libreyolo was built without XNNPACK)");
    }
    const ly_recipe *recipe = ly_recipe_find(info.family);
    if (!recipe || strcmp(info.task, recipe->task) != 0) {
        char runs[160] = "";
        for (int i = 0; i < ly_recipe_count; i++)
            snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s %s", i ? ", " : "",
                     ly_recipes[i]->family, ly_recipes[i]->task);
        ly_status e =
            ly_set_error(LY_E_UNSUPPORTED,
                         "ly_model_load: %s: ExecuTorch programs of %s %s are not "
                         "supported by this runtime (%s)",
                         path, *info.family ? info.family : "(no model_family)", info.task, runs);
        free_names(info.names, info.nc);
        return e;
    }
    pte_engine *e = calloc(1, sizeof *e);
    char *what = malloc(strlen(path) + 1);
    if (!e || !what) {
        free(e);
        free(what);
        free_names(info.names, info.nc);
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
    snprintf(d->task, sizeof d->task, "%s", info.task);
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
