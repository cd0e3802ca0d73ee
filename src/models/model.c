/* The public detector API (libreyolo/model.h) over the YOLO9 network. */
#include "libreyolo/model.h"

#include "core/core.h"
#include "io/image.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/yolo9/prepost.h"
#include "models/yolo9/yolo9.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { DEFAULT_IMGSZ = 640, STRIDE = 32 };

struct ly_model {
    ly_yolo9 *net;
    char size[8];
    int64_t nc, imgsz;
    char **names;    /* nc strings, "" where the checkpoint has none */
    int threads;     /* resolved */
    ly_tensor input; /* letterboxed input, reused while the size stays */
};

struct ly_results {
    size_t count;
    ly_detection *detections;
    char *name_text; /* the names the detections point to */
    int orig_height, orig_width;
    double preprocess_ms, inference_ms, postprocess_ms;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Re-set the current error with `context: ` in front of its message. */
static ly_status prefix_error(ly_status status, const char *context)
{
    char message[768];
    snprintf(message, sizeof message, "%s", ly_last_error());
    return ly_set_error(status, "%s: %s", context, message);
}

/* ---- Loading ------------------------------------------------------------ */

static ly_status check_metadata(const ly_checkpoint *ck, const char *path)
{
    const char *value;
    ly_status st = ly_checkpoint_meta_string(ck, "model_family", &value);
    if (st == LY_OK && strcmp(value, "yolo9") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: model family '%s' is not supported (this build "
                            "runs yolo9)",
                            path, value);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return prefix_error(st, "ly_model_load");
    st = ly_checkpoint_meta_string(ck, "task", &value);
    if (st == LY_OK && strcmp(value, "detect") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: task '%s' is not supported (this build runs "
                            "detect)",
                            path, value);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return prefix_error(st, "ly_model_load");
    return LY_OK;
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static ly_status load_names(ly_model *m, const ly_checkpoint *ck, const char *path)
{
    size_t count = 0;
    const char *const *names = NULL;
    ly_status st = ly_checkpoint_class_names(ck, &count, &names);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return prefix_error(st, "ly_model_load");
    if (st == LY_E_NOT_FOUND) count = 0, names = NULL;
    if (!names && m->nc == LY_COCO_CLASSES) names = ly_coco_names, count = LY_COCO_CLASSES;
    m->names = calloc((size_t)m->nc, sizeof *m->names);
    if (!m->names)
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: %s: out of memory for %lld names", path,
                            (long long)m->nc);
    for (int64_t i = 0; i < m->nc; i++) {
        const char *name = (size_t)i < count && names[i] ? names[i] : "";
        m->names[i] = copy_string(name);
        if (!m->names[i])
            return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: %s: out of memory", path);
    }
    return LY_OK;
}

static ly_status load_from_checkpoint(ly_model *m, const ly_checkpoint *ck, const char *path)
{
    ly_status st = check_metadata(ck, path);
    if (st != LY_OK) return st;
    st = ly_yolo9_build(ck, &m->net);
    if (st != LY_OK) {
        char context[600];
        snprintf(context, sizeof context, "ly_model_load: %s", path);
        return prefix_error(st, context);
    }
    snprintf(m->size, sizeof m->size, "%s", ly_yolo9_size(m->net));
    m->nc = ly_yolo9_num_classes(m->net);
    int64_t meta_nc;
    st = ly_checkpoint_meta_int(ck, "nc", &meta_nc);
    if (st == LY_OK && meta_nc != m->nc)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: metadata nc = %lld but the weights have %lld "
                            "classes",
                            path, (long long)meta_nc, (long long)m->nc);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return prefix_error(st, "ly_model_load");
    m->imgsz = DEFAULT_IMGSZ;
    int64_t imgsz;
    st = ly_checkpoint_meta_int(ck, "imgsz", &imgsz);
    if (st == LY_OK) {
        if (imgsz <= 0 || imgsz % STRIDE != 0 || imgsz > 32768)
            return ly_set_error(LY_E_FORMAT,
                                "ly_model_load: %s: metadata imgsz = %lld, expected a positive "
                                "multiple of %d",
                                path, (long long)imgsz, STRIDE);
        m->imgsz = imgsz;
    } else if (st != LY_E_NOT_FOUND) {
        return prefix_error(st, "ly_model_load");
    }
    return load_names(m, ck, path);
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

    ly_checkpoint *ck;
    ly_status st = ly_checkpoint_open(path, &ck);
    if (st == LY_OK) {
        st = load_from_checkpoint(m, ck, path);
        ly_checkpoint_close(ck);
    }
    if (st != LY_OK) {
        ly_model_free(m);
        return st;
    }
    *out = m;
    return LY_OK;
}

ly_status ly_model_free(ly_model *model)
{
    if (!model) return LY_OK;
    if (model->net) ly_yolo9_free(model->net);
    if (model->names)
        for (int64_t i = 0; i < model->nc; i++)
            free(model->names[i]);
    free(model->names);
    ly_tensor_free(&model->input);
    free(model);
    return LY_OK;
}

ly_status ly_model_get_info(const ly_model *model, ly_model_info *info)
{
    if (!model || !info)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_get_info: model or info is NULL");
    info->family = "yolo9";
    info->size = model->size;
    info->task = "detect";
    info->nc = model->nc;
    info->imgsz = model->imgsz;
    info->names = (const char *const *)model->names;
    return LY_OK;
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

/* ---- Running ------------------------------------------------------------ */

ly_status ly_model_run(ly_model *model, const ly_tensor *input, ly_model_output_fn visit,
                       void *user)
{
    if (!model || !input || !visit)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_run: model, input or visit is NULL");
    ly_status st = ly_check_tensor(input, "ly_model_run: input", LY_F32);
    if (st != LY_OK) return st;
    char shape[96];
    if (input->ndim != 4 || input->shape[0] != 1 || input->shape[1] != 3 || input->shape[2] <= 0 ||
        input->shape[3] <= 0 || input->shape[2] % STRIDE != 0 || input->shape[3] % STRIDE != 0)
        return ly_set_error(LY_E_SHAPE,
                            "ly_model_run: input %s: expected [1, 3, H, W] with H and W positive "
                            "multiples of %d",
                            ly_shape_str(input, shape, sizeof shape), STRIDE);
    ly_tensor outputs[LY_YOLO9_OUTPUTS];
    const char *names[LY_YOLO9_OUTPUTS];
    st = ly_yolo9_forward(model->net, input, model->threads, outputs, names);
    if (st != LY_OK) return st;
    for (int i = 0; i < LY_YOLO9_OUTPUTS; i++)
        visit(names[i], &outputs[i], user);
    return LY_OK;
}

ly_status ly_predict_options_init(ly_predict_options *options)
{
    if (!options)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_options_init: options is NULL");
    memset(options, 0, sizeof *options);
    options->conf = 0.25f;
    options->iou = 0.45f;
    options->max_det = 300;
    options->imgsz = 0;
    return LY_OK;
}

static ly_status check_predict_args(const ly_model *m, const ly_image_view *image,
                                    const ly_predict_options *o, int *imgsz)
{
    const char *fn = "ly_model_predict";
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
    int64_t size = o->imgsz ? o->imgsz : m->imgsz;
    if (size <= 0 || size % STRIDE != 0 || size > 32768)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: imgsz %lld: expected a positive multiple of %d", fn,
                            (long long)size, STRIDE);
    for (size_t i = 0; i < o->n_classes; i++)
        if (o->classes && (o->classes[i] < 0 || o->classes[i] >= m->nc))
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: class %d: the model has classes 0..%lld", fn, o->classes[i],
                                (long long)m->nc - 1);
    *imgsz = (int)size;
    return LY_OK;
}

static ly_status ensure_input(ly_model *m, int size)
{
    ly_tensor *t = &m->input;
    if (t->data && t->shape[2] == size && t->shape[3] == size) return LY_OK;
    ly_tensor_free(t);
    int64_t shape[4] = {1, 3, size, size};
    return ly_tensor_alloc(t, LY_F32, 4, shape);
}

static ly_status make_results(const ly_model *m, const ly_box *boxes, size_t count,
                              ly_results **out)
{
    ly_results *r = calloc(1, sizeof *r);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "ly_model_predict: out of memory");
    size_t text = 1;
    for (size_t i = 0; i < count; i++)
        text += strlen(m->names[boxes[i].cls]) + 1;
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
        size_t n = strlen(m->names[d->cls]) + 1;
        memcpy(p, m->names[d->cls], n);
        d->name = p;
        p += n;
    }
    r->count = count;
    *out = r;
    return LY_OK;
}

ly_status ly_model_predict_image(ly_model *model, const ly_image_view *image,
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
    int size = 0;
    ly_status st = check_predict_args(model, image, options, &size);
    if (st != LY_OK) return st;

    double t0 = now_ms();
    st = ensure_input(model, size);
    if (st != LY_OK) return st;
    ly_letterbox geometry;
    st = ly_yolo9_preprocess(image->pixels, image->width, image->height, image->stride,
                             image->format == LY_PIXELS_BGR, size, size, model->input.data,
                             &geometry);
    if (st != LY_OK) return st;

    double t1 = now_ms();
    ly_tensor outputs[LY_YOLO9_OUTPUTS];
    const char *names[LY_YOLO9_OUTPUTS];
    st = ly_yolo9_forward(model->net, &model->input, model->threads, outputs, names);
    if (st != LY_OK) return st;

    double t2 = now_ms();
    ly_box *boxes = NULL;
    size_t count = 0;
    st = ly_yolo9_postprocess(&outputs[0], geometry.ratio, image->width, image->height, options,
                              &boxes, &count);
    if (st == LY_OK) st = make_results(model, boxes, count, out);
    free(boxes);
    if (st != LY_OK) return st;

    double t3 = now_ms();
    ly_results *r = *out;
    r->orig_height = image->height;
    r->orig_width = image->width;
    r->preprocess_ms = t1 - t0;
    r->inference_ms = t2 - t1;
    r->postprocess_ms = t3 - t2;
    return LY_OK;
}

ly_status ly_model_predict_file(ly_model *model, const char *path,
                                const ly_predict_options *options, ly_results **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict_file: out is NULL");
    *out = NULL;
    if (!model) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_predict_file: model is NULL");
    ly_image image;
    ly_status st = ly_image_load(path, &image);
    if (st != LY_OK) return st;
    ly_image_view view = {image.pixels, image.width, image.height, (size_t)image.width * 3,
                          LY_PIXELS_RGB};
    st = ly_model_predict_image(model, &view, options, out);
    ly_image_free(&image);
    return st;
}

/* ---- Results ------------------------------------------------------------ */

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
    free(results);
    return LY_OK;
}
