/*
 * What a model family provides to the public detector API (internal).
 *
 * model.c owns argument checking, results and names; a family owns its network,
 * its pre- and post-processing. One loader per family; ly_model_load picks the
 * first whose `accepts` says yes.
 */
#ifndef LY_MODELS_FAMILY_H
#define LY_MODELS_FAMILY_H

#include "libreyolo/model.h"

typedef struct ly_box {
    float xyxy[4]; /* original-image pixels */
    float conf;
    int cls;
} ly_box;

typedef struct ly_model_family ly_model_family;

/* What a loader fills in. Strings are owned by the model (model.c frees
 * `names[i]`, `names` and calls family->free(net)). */
typedef struct ly_model_desc {
    const ly_model_family *family;
    void *net;
    char size[16];
    char task[16];
    int64_t nc;
    int64_t imgsz;  /* default (square) input size */
    int64_t stride; /* inputs must be multiples of this; 0: only imgsz */
    char **names;   /* nc strings, "" where unknown */
    float default_conf, default_iou;
    int default_max_det;
} ly_model_desc;

struct ly_model_family {
    const char *name; /* "yolo9", "nanodet" */
    /* Run the network on a preprocessed input and visit each raw output by name. */
    ly_status (*run)(void *net, const ly_tensor *input, int threads, ly_model_output_fn visit,
                     void *user);
    /* Image to boxes in original-image pixels, descending score (*boxes: free()).
     * `options` has every field resolved (no "model default" left; imgsz set and
     * checked against stride). times_ms receives preprocess, network, postprocess. */
    ly_status (*predict)(void *net, const ly_image_view *image, const ly_predict_options *options,
                         int threads, ly_box **boxes, size_t *count, double times_ms[3]);
    void (*free)(void *net);
    /* The network as a graph, for exporters (NULL when the family has none). */
    struct ly_graph *(*graph)(void *net);
    /* Set the fused_attn flag of every attention module; returns how many
     * carry it (NULL: the family has no attention modules). */
    int (*set_fused_attention)(void *net, bool enabled);
};

/* The model's family description and network (exporters, benchmarks). */
const ly_model_desc *ly_model_desc_of(const ly_model *model);

/* A loader: returns LY_E_DECLINED when `path` is not its kind of file (without
 * setting an error), anything else is final. */
typedef ly_status (*ly_model_loader_fn)(const char *path, ly_model_desc *out);

ly_status ly_yolo9_load_model(const char *path, ly_model_desc *out);   /* .pt, .safetensors */
ly_status ly_nanodet_load_model(const char *path, ly_model_desc *out); /* TF.js graph, "nanodet" */
ly_status ly_pte_load_model(const char *path, ly_model_desc *out);     /* ExecuTorch .pte */

/* Helpers for loaders. */
ly_status ly_model_names_copy(ly_model_desc *desc, const char *const *names, size_t count);
double ly_now_ms(void);
/* Re-set the current error with `context: ` in front of its message. */
ly_status ly_error_prefix(ly_status status, const char *context);

#endif
