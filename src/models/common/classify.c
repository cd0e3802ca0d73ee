/* SPDX-License-Identifier: MIT */
/* What LibreYOLO's image classifiers share (classify.h). */
#include "models/common/classify.h"

#include "core/core.h"
#include "models/common/audit.h"
#include "models/pil_resize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

ly_status ly_classify_eval_transform(const char *what, const ly_image_view *image, int size,
                                     double crop_pct, const float mean[3], const float std[3],
                                     float *input)
{
    int shorter = (int)floor(size / crop_pct);
    int iw = image->width, ih = image->height, rw, rh;
    if (iw <= ih) {
        rw = shorter;
        rh = (int)((double)shorter * ih / iw);
    } else {
        rh = shorter;
        rw = (int)((double)shorter * iw / ih);
    }
    uint8_t *rgb = malloc((size_t)rw * (size_t)rh * 3);
    if (!rgb) return ly_set_error(LY_E_NO_MEMORY, "%s preprocess: out of memory", what);
    ly_status st = ly_pil_resize(image, rw, rh, LY_PIL_BICUBIC, rgb);
    if (st == LY_OK) {
        int top = (int)nearbyint((rh - size) / 2.0), left = (int)nearbyint((rw - size) / 2.0);
        size_t plane = (size_t)size * size;
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++)
                for (int c = 0; c < 3; c++) {
                    float v = (float)rgb[((size_t)(y + top) * rw + (size_t)(x + left)) * 3 + c];
                    input[c * plane + (size_t)y * size + (size_t)x] =
                        (v / 255.0f - mean[c]) / std[c];
                }
    }
    free(rgb);
    return st;
}

void ly_classify_softmax(const float *logits, int64_t n, float *probs)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = logits[i] > m ? logits[i] : m;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(probs[i] = expf(logits[i] - m));
    for (int64_t i = 0; i < n; i++)
        probs[i] = (float)(probs[i] / sum);
}

ly_status ly_classify_build_checked(const ly_classify_flagged *f, const ly_checkpoint *ck,
                                    int64_t classes, bool fused, ly_graph **out)
{
    ly_graph *g = NULL;
    char context[PATH_MAX + 64];
    snprintf(context, sizeof context, "ly_model_load: %s: %s", f->path, f->what);
    ly_state_dict dict;
    ly_status st = ly_state_dict_of(ck, &dict);
    if (st == LY_OK) st = ly_audit_begin(&dict, NULL);
    if (st == LY_OK) st = ly_graph_create(&g);
    if (st == LY_OK) st = f->build(ck, f, classes, fused, g);
    st = ly_audit_end(st, context);
    if (st != LY_OK) {
        ly_graph_free(g);
        return st;
    }
    *out = g;
    return LY_OK;
}

/* The graph of the other form, from the checkpoint file. */
static ly_status rebuild(const ly_classify_flagged *f, int64_t classes, bool fused,
                         const char *what, ly_graph **out)
{
    char context[128];
    snprintf(context, sizeof context, "%s: rebuilding from the checkpoint", what);
    ly_checkpoint *ck;
    ly_status st = ly_checkpoint_open(f->path, &ck);
    if (st != LY_OK) return ly_error_prefix(st, context);
    st = ly_classify_build_checked(f, ck, classes, fused, out);
    ly_checkpoint_close(ck);
    return st == LY_OK ? st : ly_error_prefix(st, what);
}

ly_status ly_classify_set_fused(ly_model_desc *d, bool enabled, int *count)
{
    ly_classify_flagged *f = d->recipe_data;
    *count = f ? f->modules : 0; /* none: a program, its attention lowered */
    if (!f || f->fused == enabled || d->engine->graph == NULL) return LY_OK;
    ly_graph *g = NULL;
    ly_status st = rebuild(f, d->nc, enabled, "ly_model_set_fused_attention", &g);
    if (st != LY_OK) return st;
    d->engine->free(d->engine_data);
    d->engine_data = NULL;
    st = ly_graph_engine_attach(d, g);
    if (st == LY_OK) f->fused = enabled;
    return st;
}

/* Captures never use the fused path (the policy's first rule). */
ly_status ly_classify_capture_graph(const ly_model_desc *d, int64_t h, int64_t w, ly_graph **out)
{
    (void)h, (void)w; /* the classifiers' one size */
    const ly_classify_flagged *f = d->recipe_data;
    *out = NULL;
    if (!f->fused) return LY_OK;
    return rebuild(f, d->nc, false, "export: rebuilding the manual attention", out);
}

bool ly_classify_fused_state(const ly_model_desc *d, int *modules)
{
    const ly_classify_flagged *f = d->recipe_data;
    *modules = f ? f->modules : 0;
    return f && f->fused;
}

ly_status ly_classify_bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                           const char *path)
{
    if (n_outputs < 1 || outputs[0].ndim != 2 || outputs[0].shape[1] != d->nc)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the network's output is not a %s classifier's "
                            "logits [1, %lld]",
                            path, d->recipe->family, (long long)d->nc);
    return LY_OK;
}

ly_status ly_classify_load(ly_model_desc *d, const ly_checkpoint *ck, ly_classify_flagged *data,
                           bool fused, const char *size, int64_t imgsz)
{
    data->fused = fused;
    ly_graph *g;
    ly_status st = ly_classify_build_checked(data, ck, d->nc, fused, &g);
    if (st != LY_OK) {
        free(data);
        return st;
    }
    d->recipe_data = data;
    st = ly_graph_engine_attach(d, g);
    if (st != LY_OK) return st;
    snprintf(d->size, sizeof d->size, "%s", size);
    snprintf(d->task, sizeof d->task, "classify");
    d->stride = 0;
    d->imgsz = d->fixed_h = d->fixed_w = imgsz;
    return ly_model_names_from_checkpoint(d, ck);
}

void ly_classify_output_name(int index, char *buf, size_t size)
{
    snprintf(buf, size, "%s", index == 0 ? "logits" : "output");
}

ly_status ly_classify_probabilities(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                                    float *probs)
{
    (void)n_outputs;
    ly_classify_softmax(outputs[0].data, d->nc, probs);
    return LY_OK;
}
