/* SPDX-License-Identifier: MIT */
/* D-FINE's pre- and post-processing, as LibreYOLO's (dfine.h; detr.md 8, 9). */
#include "models/dfine/dfine.h"

#include "core/core.h"
#include "models/common/audit.h"
#include "models/pil_resize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ly_status ly_dfine_preprocess(const ly_image_view *image, int size, float *input)
{
    uint8_t *rgb = malloc((size_t)size * (size_t)size * 3);
    if (!rgb) return ly_set_error(LY_E_NO_MEMORY, "preprocess: out of memory");
    ly_status st = ly_pil_resize(image, size, size, LY_PIL_BILINEAR, rgb);
    if (st == LY_OK) {
        size_t plane = (size_t)size * (size_t)size;
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++)
                input[(size_t)c * plane + i] = (float)rgb[i * 3 + (size_t)c] / 255.0f;
    }
    free(rgb);
    return st;
}

typedef struct scored {
    float score;
    int64_t index;
} scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index); /* ties: lower index, as torch.topk */
}

ly_status ly_dfine_postprocess(const ly_tensor *logits, const ly_tensor *boxes, int orig_w,
                               int orig_h, const ly_predict_options *options, ly_box **out,
                               size_t *count)
{
    *out = NULL;
    *count = 0;
    int64_t q = logits->shape[1], nc = logits->shape[2], n = q * nc;
    scored *all = malloc((size_t)n * sizeof *all);
    if (!all) return ly_set_error(LY_E_NO_MEMORY, "postprocess: out of memory");
    const float *l = logits->data, *bx = boxes->data;
    for (int64_t i = 0; i < n; i++) {
        all[i].score = 1.0f / (1.0f + expf(-l[i]));
        all[i].index = i;
    }
    qsort(all, (size_t)n, sizeof *all, by_score);
    int64_t k = options->max_det < n ? options->max_det : n;
    ly_box *kept = malloc((size_t)(k ? k : 1) * sizeof *kept);
    if (!kept) {
        free(all);
        return ly_set_error(LY_E_NO_MEMORY, "postprocess: out of memory");
    }
    size_t m = 0;
    for (int64_t i = 0; i < k; i++) {
        if (!(all[i].score > options->conf)) continue;
        int64_t query = all[i].index / nc;
        const float *b = bx + query * 4;
        float cx = b[0], cy = b[1], w = b[2], h = b[3];
        ly_box *o = &kept[m++];
        /* box_cxcywh_to_xyxy, then x (W, H, W, H); no clamping, as LibreYOLO */
        o->xyxy[0] = (cx - 0.5f * w) * (float)orig_w;
        o->xyxy[1] = (cy - 0.5f * h) * (float)orig_h;
        o->xyxy[2] = (cx + 0.5f * w) * (float)orig_w;
        o->xyxy[3] = (cy + 0.5f * h) * (float)orig_h;
        o->conf = all[i].score;
        o->cls = (int)(all[i].index % nc);
    }
    free(all);
    *out = kept;
    *count = m;
    return LY_OK;
}

ly_status ly_detr_bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    bool ok = n_outputs >= 2 && outputs[0].ndim == 3 && outputs[0].shape[0] == 1 &&
              outputs[0].shape[2] == d->nc && outputs[1].ndim == 3 &&
              outputs[1].shape[1] == outputs[0].shape[1] && outputs[1].shape[2] == 4;
    if (!ok)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the network's outputs are not a DETR's "
                            "pred_logits [1, Q, %lld] and pred_boxes [1, Q, 4]",
                            path, (long long)d->nc);
    return LY_OK;
}

void ly_detr_output_name(int index, char *buf, size_t size)
{
    snprintf(buf, size, "%s", index == 0 ? "pred_logits" : index == 1 ? "pred_boxes" : "output");
}

ly_status ly_detr_postprocess(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                              const ly_prep *prep, const ly_image_view *image,
                              const ly_predict_options *options, ly_box **boxes, size_t *count)
{
    (void)d;
    (void)n_outputs;
    (void)prep;
    return ly_dfine_postprocess(&outputs[0], &outputs[1], image->width, image->height, options,
                                boxes, count);
}

ly_status ly_detr_load_graph(const ly_checkpoint *ck, const ly_key_rules *rules,
                             const char *context, int64_t imgsz, ly_detr_build_fn build,
                             const void *const *what, ly_model_desc *d)
{
    ly_graph *g = NULL;
    ly_state_dict dict;
    ly_status st = ly_state_dict_of(ck, &dict);
    if (st == LY_OK) st = ly_audit_begin(&dict, rules);
    if (st == LY_OK) st = ly_graph_create(&g);
    if (st == LY_OK) st = build(what, ck, imgsz, g);
    /* every missing, misshapen and unexpected key at once, before any other error */
    st = ly_audit_end(st, context);
    if (st != LY_OK) {
        ly_graph_free(g);
        return st;
    }
    st = ly_graph_engine_attach(d, g);
    if (st != LY_OK) return st;
    /* the anchors and the AIFI position embedding are built for this size only */
    d->stride = 0;
    d->imgsz = d->fixed_h = d->fixed_w = imgsz;
    return ly_model_names_from_checkpoint(d, ck);
}
