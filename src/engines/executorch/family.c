/*
 * ExecuTorch .pte programs as a model family (executorch.md A5): LibreYOLO's
 * ExecuTorchBackend. The .pte suffix selects it; the metadata sidecar
 * (<program>.json) is mandatory and checked key by key; XNNPACK's presence
 * is checked before the program is read (into memory, no mmap) and
 * validated, and the method is prepared (every delegate built, every
 * operator resolved) before anything runs. Pre- and post-processing are the
 * family's named in the sidecar, so a .pte predicts as its checkpoint does.
 */
#include "models/family.h"
#include "engines/executorch/et_runtime.h"
#include "core/core.h"
#include "export/commit.h"
#include "export/export_internal.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/nanodet/nanodet.h"
#include "models/yolo9/prepost.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct pte_model {
    ly_pte_program *program;
    ly_et_method *method;
    int64_t h, w;    /* fixed input size */
    ly_tensor input; /* letterboxed input */
    /* NanoDet: outputs are cls for each level, then reg for each level */
    int levels;
    int strides[LY_NANODET_MAX_LEVELS];
} pte_model;

static void pte_free(void *net)
{
    pte_model *m = net;
    if (!m) return;
    ly_et_method_free(m->method);
    ly_pte_program_free(m->program);
    ly_tensor_free(&m->input);
    free(m);
}

static ly_status pte_run(void *net, const ly_tensor *input, int threads, ly_model_output_fn visit,
                         void *user)
{
    pte_model *m = net;
    ly_status st = ly_et_method_execute(m->method, input, 1, threads);
    if (st != LY_OK) return st;
    size_t n = ly_et_method_num_outputs(m->method);
    for (size_t i = 0; i < n; i++) {
        ly_tensor out;
        st = ly_et_method_output(m->method, i, &out);
        if (st != LY_OK) return st;
        /* The names the checkpoint's outputs have. */
        char name[32];
        if (m->levels > 0 && i > 0)
            snprintf(name, sizeof name, "Identity_%zu", i);
        else if (m->levels > 0)
            snprintf(name, sizeof name, "Identity");
        else if (i == 0)
            snprintf(name, sizeof name, "predictions");
        else
            snprintf(name, sizeof name, "output_%zu", i);
        visit(name, &out, user);
    }
    return LY_OK;
}

static ly_status yolo9_pte_predict(void *net, const ly_image_view *image,
                                   const ly_predict_options *options, int threads, ly_box **boxes,
                                   size_t *count, double times_ms[3])
{
    pte_model *m = net;
    double t0 = ly_now_ms();
    if (!m->input.data) {
        int64_t shape[4] = {1, 3, m->h, m->w};
        ly_status st = ly_tensor_alloc(&m->input, LY_F32, 4, shape);
        if (st != LY_OK) return st;
    }
    ly_letterbox geometry;
    ly_status st = ly_yolo9_preprocess(image->pixels, image->width, image->height, image->stride,
                                       image->format == LY_PIXELS_BGR, (int)m->h, (int)m->w,
                                       m->input.data, &geometry);
    if (st != LY_OK) return st;
    double t1 = ly_now_ms();
    st = ly_et_method_execute(m->method, &m->input, 1, threads);
    if (st != LY_OK) return st;
    ly_tensor predictions;
    st = ly_et_method_output(m->method, 0, &predictions);
    if (st != LY_OK) return st;
    double t2 = ly_now_ms();
    st = ly_yolo9_postprocess(&predictions, geometry.ratio, image->width, image->height, options,
                              boxes, count);
    times_ms[0] = t1 - t0;
    times_ms[1] = t2 - t1;
    times_ms[2] = ly_now_ms() - t2;
    return st;
}

static ly_status nanodet_pte_predict(void *net, const ly_image_view *image,
                                     const ly_predict_options *options, int threads, ly_box **boxes,
                                     size_t *count, double times_ms[3])
{
    pte_model *m = net;
    double t0 = ly_now_ms();
    if (!m->input.data) {
        int64_t shape[4] = {1, 3, m->h, m->w};
        ly_status st = ly_tensor_alloc(&m->input, LY_F32, 4, shape);
        if (st != LY_OK) return st;
    }
    ly_nanodet_letterbox geometry;
    ly_status st =
        ly_nanodet_preprocess(image->pixels, image->width, image->height, image->stride,
                              image->format == LY_PIXELS_BGR, (int)m->h, m->input.data, &geometry);
    if (st != LY_OK) return st;
    double t1 = ly_now_ms();
    st = ly_et_method_execute(m->method, &m->input, 1, threads);
    if (st != LY_OK) return st;
    double t2 = ly_now_ms();
    ly_tensor views[2 * LY_NANODET_MAX_LEVELS];
    const ly_tensor *cls[LY_NANODET_MAX_LEVELS], *reg[LY_NANODET_MAX_LEVELS];
    for (int i = 0; st == LY_OK && i < 2 * m->levels; i++)
        st = ly_et_method_output(m->method, (size_t)i, &views[i]);
    if (st != LY_OK) return st;
    for (int l = 0; l < m->levels; l++) {
        cls[l] = &views[l];
        reg[l] = &views[m->levels + l];
    }
    st = ly_nanodet_postprocess(cls, reg, m->strides, m->levels, (int)m->h, &geometry, image->width,
                                image->height, options, boxes, count);
    times_ms[0] = t1 - t0;
    times_ms[1] = t2 - t1;
    times_ms[2] = ly_now_ms() - t2;
    return st;
}

static const ly_model_family nanodet_pte_family = {
    .name = "nanodet", .run = pte_run, .predict = nanodet_pte_predict, .free = pte_free};

static const ly_model_family yolo9_pte_family = {
    .name = "yolo9", .run = pte_run, .predict = yolo9_pte_predict, .free = pte_free};

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
        if (v->valuedouble == (double)(long long)v->valuedouble)
            snprintf(out, size, "%lld", (long long)v->valuedouble);
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
    if (!*present) return true;
    if (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble) {
        *out = (int64_t)v->valuedouble;
        return true;
    }
    if (cJSON_IsString(v)) {
        char *end;
        errno = 0;
        long long x = strtoll(v->valuestring, &end, 10);
        if (!errno && end != v->valuestring && !*end) {
            *out = x;
            return true;
        }
    }
    return false;
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
                          "This LibreYOLO version only supports ExecuTorch programs exported for "
                          "XNNPACK, got %s.",
                          got);
        goto done;
    }
    const cJSON *dynamic = cJSON_GetObjectItemCaseSensitive(meta, "dynamic");
    if (dynamic && !cJSON_IsFalse(dynamic) &&
        !(cJSON_IsString(dynamic) && (strcmp(dynamic->valuestring, "false") == 0 ||
                                      strcmp(dynamic->valuestring, "False") == 0))) {
        repr(dynamic, NULL, got, sizeof got);
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "ExecuTorch v1 requires metadata dynamic=false, got %s.", got);
        goto done;
    }
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(meta, "precision");
    if (!cJSON_IsString(precision) || strcasecmp(precision->valuestring, "fp32") != 0) {
        repr(precision, "missing precision metadata", got, sizeof got);
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "ExecuTorch v1 requires metadata precision='fp32', got %s.", got);
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
                          "ExecuTorch metadata must define both imgsz_h and imgsz_w, or neither.");
        goto done;
    }
    if (!has_h) {
        if (!has_s) {
            st = ly_set_error(LY_E_FORMAT, "ExecuTorch metadata must declare a fixed input size.");
            goto done;
        }
        h = w = s;
    }
    if (h <= 0 || w <= 0 || h > 16384 || w > 16384) {
        st = ly_set_error(LY_E_FORMAT, "%s: input size %lldx%lld is not a positive size", side,
                          (long long)h, (long long)w);
        goto done;
    }
    if (h != w && strcmp(info->family, "yolo9") != 0 && strcmp(info->family, "yolo9_e2e") != 0) {
        st = ly_set_error(LY_E_FORMAT,
                          "%s: rectangular input %lldx%lld is allowed for yolo9 programs only",
                          side, (long long)h, (long long)w);
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

/* NanoDet's outputs: cls [1, A_l, nc] for each level, then reg [1, A_l, 4k]
 * for each level, A_l = (size / stride_l)^2. */
static ly_status nanodet_heads(pte_model *m, const char *path, int64_t nc)
{
    size_t n = ly_et_method_num_outputs(m->method);
    if (n == 0 || n % 2 || n / 2 > LY_NANODET_MAX_LEVELS)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: a NanoDet program returns cls then reg per level "
                            "(an even count up to %d), this one returns %zu",
                            path, 2 * LY_NANODET_MAX_LEVELS, n);
    m->levels = (int)(n / 2);
    for (int l = 0; l < m->levels; l++) {
        ly_tensor cls, reg;
        ly_status st = ly_et_method_output(m->method, (size_t)l, &cls);
        if (st == LY_OK) st = ly_et_method_output(m->method, (size_t)(m->levels + l), &reg);
        if (st != LY_OK) return st;
        int64_t a = cls.ndim == 3 ? cls.shape[1] : 0, side = 1;
        while (side * side < a)
            side++;
        bool ok = cls.dtype == LY_F32 && reg.dtype == LY_F32 && cls.ndim == 3 && reg.ndim == 3 &&
                  cls.shape[0] == 1 && cls.shape[2] == nc && reg.shape[0] == 1 &&
                  reg.shape[1] == a && reg.shape[2] % 4 == 0 && reg.shape[2] >= 8 && a > 0 &&
                  side * side == a && m->h % side == 0;
        if (!ok)
            return ly_set_error(LY_E_FORMAT,
                                "ly_model_load: %s: outputs %d and %d are not NanoDet's cls [1, "
                                "A, %lld] and reg [1, A, 4k] of a square level",
                                path, l, m->levels + l, (long long)nc);
        m->strides[l] = (int)(m->h / side);
    }
    return LY_OK;
}

ly_status ly_pte_load_model(const char *path, ly_model_desc *d)
{
    if (!path || !ends_with(path, ".pte")) return LY_E_DECLINED;
    /* An interrupted export leaves a journal: finish it before reading the pair. */
    ly_status st = ly_export_recover(path, NULL);
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
    bool yolo9 = strcmp(info.family, "yolo9") == 0, nanodet = strcmp(info.family, "nanodet") == 0;
    if ((!yolo9 && !nanodet) || strcmp(info.task, "detect") != 0 || (nanodet && info.h != info.w)) {
        ly_status e =
            ly_set_error(LY_E_UNSUPPORTED,
                         "ly_model_load: %s: ExecuTorch programs of %s %s are not "
                         "supported by this runtime (yolo9 and nanodet detect; nanodet square)",
                         path, *info.family ? info.family : "(no model_family)", info.task);
        free_names(info.names, info.nc);
        return e;
    }
    pte_model *m = calloc(1, sizeof *m);
    if (!m) {
        free_names(info.names, info.nc);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    d->family = yolo9 ? &yolo9_pte_family : &nanodet_pte_family;
    d->net = m;
    d->names = info.names; /* the model owns them now */
    d->nc = info.nc;
    snprintf(d->size, sizeof d->size, "%s", info.size);
    snprintf(d->task, sizeof d->task, "%s", info.task);
    d->imgsz = info.h > info.w ? info.h : info.w;
    d->stride = 0;
    /* The family's predict defaults (YOLO9: LibreYOLO's; NanoDet: nanodet-g.yml's). */
    d->default_conf = yolo9 ? 0.25f : 0.35f;
    d->default_iou = yolo9 ? 0.45f : 0.6f;
    d->default_max_det = yolo9 ? 300 : 100;
    m->h = info.h;
    m->w = info.w;

    st = ly_pte_read_file(path, &m->program);
    if (st != LY_OK) return st;
    st = ly_et_method_load(m->program, path, &m->method);
    if (st != LY_OK) return st;
    /* The program must take what the sidecar says and give YOLO9's predictions. */
    ly_tensor in;
    if (ly_et_method_num_inputs(m->method) != 1 || ly_et_method_num_outputs(m->method) < 1)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: a YOLO9 program takes one input and returns "
                            "predictions first",
                            path);
    st = ly_et_method_input_shape(m->method, 0, &in);
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
    if (nanodet) return nanodet_heads(m, path, info.nc);
    ly_tensor out;
    st = ly_et_method_output(m->method, 0, &out);
    if (st != LY_OK) return st;
    if (out.dtype != LY_F32 || out.ndim != 3 || out.shape[0] != 1 || out.shape[1] != 4 + info.nc) {
        char shape[96];
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the program's first output is %s, expected YOLO9 "
                            "predictions [1, %lld, anchors] for %lld classes",
                            path, ly_shape_str(&out, shape, sizeof shape), (long long)(4 + info.nc),
                            (long long)info.nc);
    }
    return LY_OK;
}
