/* SPDX-License-Identifier: MIT */
/* Prediction options: one check for every family, engine and door (the C
 * API, the command, the Python package), the model's defaults filled in, and
 * the class filter (predict_options.h, libreyolo/model.h). */
#include "models/predict_options.h"

#include "core/core.h"

#include <math.h>
#include <string.h>

/* Far beyond any detector's input, so sizes stay small in index arithmetic. */
enum { MAX_IMGSZ = 32768 };

static bool given_float(const ly_predict_options *o, float value, unsigned bit)
{
    return (o->given & bit) || !isnan(value);
}

static bool given_int(const ly_predict_options *o, int value, unsigned bit)
{
    return (o->given & bit) || value != LY_PREDICT_DEFAULT;
}

/* What needs no model first: a refusal reads the same whether the caller
 * knows the model yet or not. `d` may be NULL. */
static ly_status check(const ly_model_desc *d, const ly_predict_options *o)
{
    if (!o) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_options_check: options is NULL");
    if (given_float(o, o->conf, LY_PREDICT_CONF) && !(o->conf >= 0.f && o->conf <= 1.f))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "conf %g: expected a number in [0, 1]",
                            (double)o->conf);
    if (given_float(o, o->iou, LY_PREDICT_IOU) && !(o->iou >= 0.f && o->iou <= 1.f))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "iou %g: expected a number in [0, 1]",
                            (double)o->iou);
    if (given_int(o, o->max_det, LY_PREDICT_MAX_DET) && o->max_det < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "max_det %d: expected a positive integer",
                            o->max_det);
    bool imgsz = given_int(o, o->imgsz, LY_PREDICT_IMGSZ);
    if (imgsz && o->imgsz < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "imgsz %d: expected a positive size", o->imgsz);
    if (imgsz && o->imgsz > MAX_IMGSZ)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "imgsz %d: expected at most %d", o->imgsz,
                            MAX_IMGSZ);
    if (o->n_classes && !o->classes)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "classes: %zu class ids, but the list is NULL",
                            o->n_classes);
    for (size_t i = 0; o->classes && i < o->n_classes; i++)
        if (o->classes[i] < 0)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "classes: class id %d: expected 0 or more",
                                o->classes[i]);
    if (given_int(o, o->tile, LY_PREDICT_TILE) && o->tile < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "tile %d: expected 0 (off) or a positive size",
                            o->tile);
    if (given_int(o, o->tile_pad, LY_PREDICT_TILE_PAD) && o->tile_pad < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "tile_pad %d: expected 0 or more", o->tile_pad);
    if ((o->given & LY_PREDICT_OVERLAP_RATIO || !isnan(o->overlap_ratio)) &&
        !(o->overlap_ratio >= 0 && o->overlap_ratio < 1))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "overlap_ratio %g: expected a number in [0, 1)",
                            o->overlap_ratio);
    if (!d) return LY_OK;
    if (o->tiling && d->recipe->restore_scale > 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "tiling=True: a restoration model tiles with tile and tile_pad");
    if (d->recipe->restore_scale > 0) return LY_OK; /* LibreYOLO ignores the rest there */
    if (given_int(o, o->tile, LY_PREDICT_TILE) && o->tile != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "tile %d: a restoration model's option (SwinIR); this %s model "
                            "has none",
                            o->tile, d->recipe->family);
    if (imgsz && d->stride > 0 && o->imgsz % d->stride != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "imgsz %d: expected a multiple of %lld (the model's stride)", o->imgsz,
                            (long long)d->stride);
    if (imgsz && d->stride == 0 && o->imgsz != d->imgsz)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "imgsz %d: this %s model takes only %lld",
                            o->imgsz, d->recipe->family, (long long)d->imgsz);
    for (size_t i = 0; o->classes && i < o->n_classes; i++)
        if (o->classes[i] >= d->nc)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "classes: class id %d: the model has classes 0..%lld",
                                o->classes[i], (long long)d->nc - 1);
    return LY_OK;
}

ly_status ly_predict_options_init(ly_predict_options *options)
{
    if (!options)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_options_init: options is NULL");
    *options = (ly_predict_options){.conf = NAN,
                                    .iou = NAN,
                                    .max_det = LY_PREDICT_DEFAULT,
                                    .imgsz = LY_PREDICT_DEFAULT,
                                    .tile = LY_PREDICT_DEFAULT,
                                    .tile_pad = LY_PREDICT_DEFAULT,
                                    .overlap_ratio = NAN};
    return LY_OK;
}

ly_status ly_predict_options_set_imgsz(ly_predict_options *options, int height, int width)
{
    if (!options)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_options_set_imgsz: options is NULL");
    if (height != width)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "imgsz %dx%d: predict takes a square input (one size, a multiple of "
                            "the model's stride); a rectangular imgsz is not supported yet",
                            height, width);
    options->imgsz = height;
    options->given |= LY_PREDICT_IMGSZ;
    return LY_OK;
}

ly_status ly_predict_options_validate(const ly_model_desc *d, const ly_predict_options *options)
{
    return check(d, options);
}

ly_status ly_predict_options_resolve(const ly_model_desc *d, const ly_predict_options *o,
                                     ly_predict_options *resolved)
{
    ly_status st = check(d, o);
    if (st != LY_OK) return st;
    const ly_recipe *r = d->recipe;
    *resolved = *o;
    if (!given_float(o, o->conf, LY_PREDICT_CONF)) resolved->conf = r->default_conf;
    if (!given_float(o, o->iou, LY_PREDICT_IOU)) resolved->iou = r->default_iou;
    if (!given_int(o, o->max_det, LY_PREDICT_MAX_DET)) resolved->max_det = r->default_max_det;
    if (!given_int(o, o->imgsz, LY_PREDICT_IMGSZ) || r->restore_scale > 0)
        resolved->imgsz = (int)d->imgsz;
    if (!given_int(o, o->tile, LY_PREDICT_TILE)) resolved->tile = 0;
    if (!given_int(o, o->tile_pad, LY_PREDICT_TILE_PAD)) resolved->tile_pad = 16;
    if (!(o->given & LY_PREDICT_OVERLAP_RATIO) && isnan(o->overlap_ratio))
        resolved->overlap_ratio = 0.2;
    resolved->given = LY_PREDICT_CONF | LY_PREDICT_IOU | LY_PREDICT_MAX_DET | LY_PREDICT_IMGSZ |
                      LY_PREDICT_TILE | LY_PREDICT_TILE_PAD | LY_PREDICT_OVERLAP_RATIO;
    return LY_OK;
}

size_t ly_predict_keep_classes(ly_box *boxes, size_t count, const ly_predict_options *o)
{
    if (!o->classes) return count;
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        bool wanted = false;
        for (size_t k = 0; k < o->n_classes && !wanted; k++)
            wanted = o->classes[k] == boxes[i].cls;
        if (wanted) boxes[kept++] = boxes[i];
    }
    return kept;
}
