/* YOLO9 as a model family: checkpoint loading, predict and run (family.h). */
#include "models/family.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/io.h"
#include "models/coco_names.h"
#include "models/yolo9/build.h"
#include "models/yolo9/prepost.h"
#include "models/yolo9/yolo9.h"

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_IMGSZ = 640, STRIDE = 32 };

typedef struct yolo9_model {
    ly_yolo9 *net;
} yolo9_model;

static ly_status check_metadata(const ly_checkpoint *ck, const char *path)
{
    const char *value;
    ly_status st = ly_checkpoint_meta_string(ck, "model_family", &value);
    if (st == LY_OK && strcmp(value, "yolo9") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: model family '%s' is not supported (this build "
                            "runs yolo9 checkpoints)",
                            path, value);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    st = ly_checkpoint_meta_string(ck, "task", &value);
    if (st == LY_OK && strcmp(value, "detect") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: task '%s' is not supported (this build runs "
                            "detect)",
                            path, value);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    return LY_OK;
}

static ly_status load_names(ly_model_desc *d, const ly_checkpoint *ck)
{
    size_t count = 0;
    const char *const *names = NULL;
    ly_status st = ly_checkpoint_class_names(ck, &count, &names);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    if (st == LY_E_NOT_FOUND) count = 0, names = NULL;
    if (!names && d->nc == LY_COCO_CLASSES) names = ly_coco_names, count = LY_COCO_CLASSES;
    return ly_model_names_copy(d, names, count);
}

static ly_status read_imgsz(const ly_checkpoint *ck, const char *path, int64_t *imgsz)
{
    *imgsz = DEFAULT_IMGSZ;
    int64_t v;
    ly_status st = ly_checkpoint_meta_int(ck, "imgsz", &v);
    if (st == LY_E_NOT_FOUND) return LY_OK;
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_load");
    if (v <= 0 || v % STRIDE != 0 || v > 32768)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: metadata imgsz = %lld, expected a positive "
                            "multiple of %d",
                            path, (long long)v, STRIDE);
    *imgsz = v;
    return LY_OK;
}

static ly_status load_from_checkpoint(yolo9_model *y, ly_model_desc *d, const ly_checkpoint *ck,
                                      const char *path)
{
    ly_status st = check_metadata(ck, path);
    if (st != LY_OK) return st;
    st = ly_yolo9_build(ck, &y->net);
    if (st != LY_OK) {
        char context[600];
        snprintf(context, sizeof context, "ly_model_load: %s", path);
        return ly_error_prefix(st, context);
    }
    /* The input lives in the graph's arena, so predict letterboxes straight
     * into it and its bytes serve later layers once the stem has read it
     * (LibreYOLO9t at 640: ~3 MiB less peak RSS than a buffer of its own). */
    st = ly_graph_input_in_arena(y->net->graph, 0);
    if (st != LY_OK) return st;
    snprintf(d->size, sizeof d->size, "%s", ly_yolo9_size(y->net));
    d->nc = ly_yolo9_num_classes(y->net);
    int64_t meta_nc;
    st = ly_checkpoint_meta_int(ck, "nc", &meta_nc);
    if (st == LY_OK && meta_nc != d->nc)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: metadata nc = %lld but the weights have %lld "
                            "classes",
                            path, (long long)meta_nc, (long long)d->nc);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    st = read_imgsz(ck, path, &d->imgsz);
    if (st != LY_OK) return st;
    return load_names(d, ck);
}

static void yolo9_free(void *net)
{
    yolo9_model *y = net;
    if (!y) return;
    if (y->net) ly_yolo9_free(y->net);
    free(y);
}

static ly_status yolo9_run(void *net, const ly_tensor *input, int threads, ly_model_output_fn visit,
                           void *user)
{
    yolo9_model *y = net;
    ly_graph_ctx *ctx;
    ly_status st = ly_graph_ctx_acquire(y->net->graph, &ctx);
    if (st != LY_OK) return st;
    ly_tensor outputs[LY_YOLO9_OUTPUTS];
    const char *names[LY_YOLO9_OUTPUTS];
    st = ly_yolo9_forward(y->net, ctx, input, threads, outputs, names);
    for (int i = 0; st == LY_OK && i < LY_YOLO9_OUTPUTS; i++)
        visit(names[i], &outputs[i], user);
    ly_graph_ctx_release(ctx);
    return st;
}

/* The context's own input buffer for a size x size image, planned now. */
static ly_status arena_input(ly_graph_ctx *ctx, int size, int threads, ly_tensor *input)
{
    ly_tensor shape;
    memset(&shape, 0, sizeof shape);
    shape.dtype = LY_F32;
    shape.ndim = 4;
    shape.shape[0] = 1;
    shape.shape[1] = 3;
    shape.shape[2] = size;
    shape.shape[3] = size;
    ly_status st = ly_graph_prepare(ctx, 1, &shape, threads);
    if (st == LY_OK) st = ly_graph_ctx_input_buffer(ctx, 0, &shape.data);
    if (st == LY_OK) *input = shape;
    return st;
}

static ly_status predict_in(const yolo9_model *y, ly_graph_ctx *ctx, const ly_image_view *image,
                            const ly_predict_options *options, int threads, ly_box **boxes,
                            size_t *count, double times_ms[3])
{
    double t0 = ly_now_ms();
    int size = options->imgsz;
    threads = ly_threads_resolve(threads);
    ly_tensor input;
    ly_status st = arena_input(ctx, size, threads, &input);
    if (st != LY_OK) return st;
    ly_letterbox geometry;
    st = ly_yolo9_preprocess(image->pixels, image->width, image->height, image->stride,
                             image->format == LY_PIXELS_BGR, size, size, input.data, &geometry);
    if (st != LY_OK) return st;

    double t1 = ly_now_ms();
    ly_tensor outputs[LY_YOLO9_OUTPUTS];
    const char *names[LY_YOLO9_OUTPUTS];
    st = ly_yolo9_forward(y->net, ctx, &input, threads, outputs, names);
    if (st != LY_OK) return st;

    double t2 = ly_now_ms();
    st = ly_yolo9_postprocess(&outputs[0], geometry.ratio, image->width, image->height, options,
                              boxes, count);
    times_ms[0] = t1 - t0;
    times_ms[1] = t2 - t1;
    times_ms[2] = ly_now_ms() - t2;
    return st;
}

static ly_status yolo9_predict(void *net, const ly_image_view *image,
                               const ly_predict_options *options, int threads, ly_box **boxes,
                               size_t *count, double times_ms[3])
{
    yolo9_model *y = net;
    ly_graph_ctx *ctx;
    ly_status st = ly_graph_ctx_acquire(y->net->graph, &ctx);
    if (st != LY_OK) return st;
    st = predict_in(y, ctx, image, options, threads, boxes, count, times_ms);
    ly_graph_ctx_release(ctx);
    return st;
}

static struct ly_graph *yolo9_graph(void *net)
{
    return ((yolo9_model *)net)->net->graph;
}

static const ly_model_family yolo9_family = {
    .name = "yolo9",
    .run = yolo9_run,
    .predict = yolo9_predict,
    .free = yolo9_free,
    .graph = yolo9_graph,
};

ly_status ly_yolo9_load_model(const char *path, ly_model_desc *d)
{
    ly_checkpoint *ck;
    ly_status st = ly_checkpoint_open(path, &ck);
    if (st != LY_OK) return st;
    yolo9_model *y = calloc(1, sizeof *y);
    if (!y) {
        ly_checkpoint_close(ck);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    d->family = &yolo9_family;
    d->net = y;
    snprintf(d->task, sizeof d->task, "detect");
    d->stride = STRIDE;
    d->default_conf = 0.25f;
    d->default_iou = 0.45f;
    d->default_max_det = 300;
    st = load_from_checkpoint(y, d, ck, path);
    ly_checkpoint_close(ck);
    return st;
}
