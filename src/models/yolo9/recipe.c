/* SPDX-License-Identifier: MIT */
/* The YOLO9 recipe (recipe.h): LibreYOLO9 checkpoints, LibreYOLO's letterbox
 * and decode, its defaults and export rules. */
#include "models/recipe.h"
#include "core/core.h"
#include "models/yolo9/build.h"
#include "models/yolo9/prepost.h"
#include "models/yolo9/yolo9.h"

#include <stdio.h>
#include <string.h>

enum { DEFAULT_IMGSZ = 640, STRIDE = 32 };

_Static_assert(sizeof(ly_letterbox) <= sizeof(ly_prep), "the letterbox fits a ly_prep");

/* LibreYOLO9's keys, as stored or under the prefixes LibreYOLO accepts. */
static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    static const char *const keys[] = {"backbone.conv0.conv.weight",
                                       "module.backbone.conv0.conv.weight"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        ly_tensor view;
        if (ly_checkpoint_find(ck, keys[i], &view) == LY_OK) return true;
        ly_clear_error();
    }
    return false;
}

static ly_status load_checkpoint(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    ly_yolo9 *net;
    ly_status st = ly_yolo9_build(ck, &net);
    if (st != LY_OK) {
        char context[600];
        snprintf(context, sizeof context, "ly_model_load: %s", path);
        return ly_error_prefix(st, context);
    }
    snprintf(d->size, sizeof d->size, "%s", ly_yolo9_size(net));
    d->nc = ly_yolo9_num_classes(net);
    snprintf(d->quant_recipe, sizeof d->quant_recipe, "%s", net->quant_recipe);
    snprintf(d->quant_state, sizeof d->quant_state, "%s", net->quant_state);
    snprintf(d->quant_remainder, sizeof d->quant_remainder, "%s", net->quant_remainder);
    d->quant_modules = net->quant_modules;
    st = ly_graph_engine_attach(d, ly_yolo9_release_graph(net));
    if (st != LY_OK) return st;
    int64_t meta_nc;
    st = ly_checkpoint_meta_int(ck, "nc", &meta_nc);
    if (st == LY_OK && meta_nc != d->nc)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: metadata nc = %lld but the weights have %lld "
                            "classes",
                            path, (long long)meta_nc, (long long)d->nc);
    if (st != LY_OK && st != LY_E_NOT_FOUND) return ly_error_prefix(st, "ly_model_load");
    d->stride = STRIDE;
    st = ly_model_meta_imgsz(ck, path, DEFAULT_IMGSZ, STRIDE, 32768, &d->imgsz);
    if (st != LY_OK) return st;
    return ly_model_names_from_checkpoint(d, ck);
}

/* The first output is the decoded predictions [1, 4 + nc, anchors]. */
static ly_status bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    const ly_tensor *p = n_outputs > 0 ? &outputs[0] : NULL;
    if (!p || p->dtype != LY_F32 || p->ndim != 3 || p->shape[0] != 1 || p->shape[1] != 4 + d->nc) {
        char shape[96] = "nothing";
        if (p) ly_shape_str(p, shape, sizeof shape);
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the network's first output is %s, expected YOLO9 "
                            "predictions [1, %lld, anchors] for %lld classes",
                            path, shape, (long long)(4 + d->nc), (long long)d->nc);
    }
    return LY_OK;
}

static void output_name(int index, char *buf, size_t size)
{
    if (index == 0)
        snprintf(buf, size, "predictions");
    else
        snprintf(buf, size, "output_%d", index);
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    return ly_yolo9_preprocess(image->pixels, image->width, image->height, image->stride,
                               image->format == LY_PIXELS_BGR, (int)h, (int)w, input,
                               (ly_letterbox *)prep->bytes);
}

static ly_status postprocess(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                             const ly_prep *prep, const ly_image_view *image,
                             const ly_predict_options *options, ly_box **boxes, size_t *count)
{
    (void)d;
    (void)n_outputs;
    const ly_letterbox *geometry = (const ly_letterbox *)prep->bytes;
    return ly_yolo9_postprocess(&outputs[0], geometry->ratio, image->width, image->height, options,
                                boxes, count);
}

/* LibreYOLO lists segment in YOLO9's registry and blocks its export with a
 * reason, so `formats` can say why. */
static const char *const tasks[] = {"detect", "segment", NULL};

static const ly_export_rule export_rules[] = {
    {"detect", "executorch", LY_EXPORT_VALIDATED,
     "Runtime and raw-output parity are covered in tests/e2e/test_executorch.py; "
     "trained-checkpoint detection parity is covered by its external-data flagship test.",
     LY_EXPORT_ET_CONSTRAINT},
    {"segment", NULL, LY_EXPORT_BLOCKED,
     "YOLO9 segmentation export is not supported; YOLO9 is detection-only in LibreYOLO.", NULL},
    {NULL, NULL, LY_EXPORT_BLOCKED, NULL, NULL},
};

const ly_recipe ly_yolo9_recipe = {
    .family = "yolo9",
    .task = "detect",
    .batched = true,
    .input_description = "float32 RGB /255, letterboxed top-left on 114",
    .default_conf = 0.25f,
    .default_iou = 0.45f,
    .default_max_det = 300,
    .accepts_keys = accepts_keys,
    .load_checkpoint = load_checkpoint,
    .bind = bind,
    .output_name = output_name,
    .preprocess = preprocess,
    .postprocess = postprocess,
    .file_prefix = "LibreYOLO9",
    .published_sizes = (const char *const[]){"t", "s", "m", "c", NULL},
    .export_outputs = 1, /* the decoded predictions only, as LibreYOLO's export head */
    .rectangular = true,
    .tasks = tasks,
    .export_rules = export_rules,
};
