/* SPDX-License-Identifier: MIT */
/* Prediction options (libreyolo/model.h) checked once and resolved against a
 * model, and the class filter applied where LibreYOLO applies it (internal). */
#ifndef LY_MODELS_PREDICT_OPTIONS_H
#define LY_MODELS_PREDICT_OPTIONS_H

#include "models/recipe.h"

/* ly_predict_options_check (libreyolo/model.h) on a model's description
 * (NULL: what needs no model). */
ly_status ly_predict_options_validate(const ly_model_desc *d, const ly_predict_options *options);

/* `options` checked against the model (ly_predict_options_check's refusals)
 * and copied into `resolved` with every default filled in: the form recipes'
 * postprocessing takes. */
ly_status ly_predict_options_resolve(const ly_model_desc *d, const ly_predict_options *options,
                                     ly_predict_options *resolved);

/* LibreYOLO's classes filter (its _wrap_results, after NMS and max_det): the
 * boxes of the listed classes, moved to the front in their order; returns
 * how many. Every box is kept when options->classes is NULL. */
size_t ly_predict_keep_classes(ly_box *boxes, size_t count, const ly_predict_options *options);

#endif
