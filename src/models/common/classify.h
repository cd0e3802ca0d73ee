/* SPDX-License-Identifier: MIT */
/*
 * What LibreYOLO's image classifiers share (internal): the eval transform
 * timm/torchvision run on a PIL image and the softmax of the logits.
 */
#ifndef LY_MODELS_COMMON_CLASSIFY_H
#define LY_MODELS_COMMON_CLASSIFY_H

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/image.h"
#include "libreyolo/libreyolo.h"
#include "models/recipe.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* Resize(floor(size / crop_pct)) of the shorter side (the longer one
 * int(short' * long / short)), PIL bicubic with antialias; CenterCrop(size)
 * at int(round((side - size) / 2)) (Python's round: halves to even);
 * ToTensor; Normalize(mean, std): input [3, size, size]. `what` names the
 * family in messages. */
ly_status ly_classify_eval_transform(const char *what, const ly_image_view *image, int size,
                                     double crop_pct, const float mean[3], const float std[3],
                                     float *input);

/* probs = softmax(logits), the sum in double. */
void ly_classify_softmax(const float *logits, int64_t n, float *probs);

/* A classifier with LibreYOLO's fused-attention flag: its loaded graph holds
 * one attention form, so changing the flag (and exporting, which captures
 * the manual form) rebuilds it from the checkpoint file. The recipe's data
 * (ly_model_desc.recipe_data) starts with this struct. */
typedef struct ly_classify_flagged ly_classify_flagged;
typedef ly_status (*ly_classify_build_fn)(const ly_checkpoint *ck, const ly_classify_flagged *data,
                                          int64_t classes, bool fused, ly_graph *g);
struct ly_classify_flagged {
    char path[PATH_MAX];
    const char *what; /* "ViT-s", "Swin-t": in messages */
    int modules;      /* attention modules carrying the flag */
    bool fused;
    ly_classify_build_fn build;
};

/* The rest of a flagged classifier's load, `data` (calloc'd, its flag filled
 * but for `fused`) taking ownership: its graph in the form `fused`, built,
 * attached, and the model's size, task, input size and names. */
ly_status ly_classify_load(ly_model_desc *d, const ly_checkpoint *ck, ly_classify_flagged *data,
                           bool fused, const char *size, int64_t imgsz);

/* output 0 is "logits"; probs = softmax(logits) (recipe.h hooks). */
void ly_classify_output_name(int index, char *buf, size_t size);
ly_status ly_classify_probabilities(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                                    float *probs);

/* build() of `ck` into a new graph, every key of the checkpoint accounted for. */
ly_status ly_classify_build_checked(const ly_classify_flagged *f, const ly_checkpoint *ck,
                                    int64_t classes, bool fused, ly_graph **out);
/* The recipe hooks (recipe.h) of such a classifier, and its bind: one output,
 * the logits [1, nc]. */
ly_status ly_classify_set_fused(ly_model_desc *d, bool enabled, int *count);
ly_status ly_classify_capture_graph(const ly_model_desc *d, int64_t h, int64_t w, ly_graph **out);
bool ly_classify_fused_state(const ly_model_desc *d, int *modules);
ly_status ly_classify_bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                           const char *path);

#endif
