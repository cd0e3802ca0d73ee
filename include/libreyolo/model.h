/* SPDX-License-Identifier: MIT */
/*
 * Detectors: load a checkpoint, predict on an image file or a pixel buffer, read
 * the results.
 *
 *   ly_model *m;
 *   ly_model_load("LibreYOLO9t.pt", NULL, &m);
 *   ly_predict_options opt;
 *   ly_predict_options_init(&opt);
 *   ly_results *r;
 *   ly_model_predict_file(m, "photo.jpg", &opt, &r);
 *   size_t n; ly_results_count(r, &n);
 *   for (size_t i = 0; i < n; i++) { ly_detection d; ly_results_get(r, i, &d); ... }
 *   ly_results_free(r);
 *   ly_model_free(m);
 *
 * Pre- and post-processing are each family's own, as LibreYOLO does them
 * (YOLO9: RGB, top-left letterbox on 114, bilinear resize, /255; multi-label
 * candidates with score > conf, class-aware NMS, max_det; NanoDet: BGR,
 * letterbox to 416, mean/std, distribution-integral boxes; the DETR families:
 * PIL bilinear resize, sigmoid top-K, no NMS; ViT: PIL bicubic, centre crop,
 * softmax top-5); boxes in original-image pixels, descending score.
 *
 * Threads. A loaded model is immutable: ly_model_predict_file,
 * ly_model_predict_image, ly_model_run, ly_model_get_info and
 * ly_model_get_stats may be called on one model from any number of threads at
 * once, and give each the results one thread alone would (bit for bit). Each
 * call runs in memory of its own (a per-call arena, kept in a pool for the
 * next call), while the weights, prepared once, are shared.
 * ly_model_set_threads may be called at any time (calls already running keep
 * their count); ly_model_set_fused_attention is a setting to make before the
 * model is shared; ly_model_free only after every call on it has returned. Results are independent
 * objects: any thread may read a ly_results, none may free it twice.
 *
 * Ownership. Every pointer the API returns is owned by the library:
 *  - ly_model_info's strings and names: the model's, valid until ly_model_free;
 *  - a ly_detection's `name`: the results' own copy, valid until
 *    ly_results_free (results outlive the model);
 *  - the tensors ly_model_run's callback sees: valid during the callback only.
 * The caller frees what it received with the matching _free call.
 */
#ifndef LIBREYOLO_MODEL_H
#define LIBREYOLO_MODEL_H

#include "libreyolo/libreyolo.h"

#include <limits.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ly_model ly_model;
typedef struct ly_results ly_results;

typedef struct ly_model_options {
    int threads; /* 0: LIBREYOLO_THREADS, else all logical CPUs */
} ly_model_options;

/* `options` may be NULL (defaults). Errors name the file and the key, entry or
 * byte offset that was wrong. */
LY_API ly_status ly_model_load(const char *path, const ly_model_options *options, ly_model **out);
LY_API ly_status ly_model_free(ly_model *model);

typedef struct ly_model_info {
    const char *family; /* "yolo9", "nanodet" */
    const char *size;   /* "t", "s", "m", "c" */
    const char *task;   /* "detect" */
    int64_t nc;
    int64_t imgsz;            /* square input size the checkpoint was made for */
    const char *const *names; /* nc entries */
    /* What predict uses for options left at "model default". */
    float default_conf, default_iou;
    int default_max_det;
    const char *input;  /* what the preprocessing makes of an image ("float32 RGB /255, ...") */
    const char *engine; /* what runs the network: "graph" or "executorch" */
    /* LibreYOLO quantization (its checkpoint's `quant` manifest): recipe NULL
     * for a float model; else "int8" or "fp8", state "prepared" or "finalized",
     * remainder "fp32", "fp16" or "" (prepared), and the quantized modules. */
    const char *quant_recipe, *quant_state, *quant_remainder;
    int quant_modules;
    /* The network takes several images in one call (ly_model_predict_batch) */
    bool batched;
} ly_model_info;

/* `info`'s strings are the model's (valid until ly_model_free). */
LY_API ly_status ly_model_get_info(const ly_model *model, ly_model_info *info);

/* What the loaded network is made of (benchmarks, `libreyolo info`). */
typedef struct ly_model_stats {
    /* The checkpoint as stored (-1: the model was not loaded from one): its
     * tensors, and their elements less the buffers (BatchNorm's running
     * statistics, FrozenBatchNorm's four, the family's own): what torch's
     * parameters() counts. */
    int64_t file_tensors, file_parameters;
    size_t weight_tensors; /* the network's constants as loaded (folded weights and biases) */
    int64_t parameters;    /* their elements */
    size_t weight_bytes;
    int nodes;    /* ops of the graph */
    double gflop; /* 2 x the multiply-adds of convolutions, linears, matmuls and attention at imgsz
                     (NAN: no graph) */
} ly_model_stats;

/* Stats at a square input of `imgsz` (0: the model's). Reads no weights, so
 * it costs no memory on a model whose packed weights replaced the originals. */
LY_API ly_status ly_model_get_stats(const ly_model *model, int imgsz, ly_model_stats *stats);
/* The threads each later call of this model uses (0: LIBREYOLO_THREADS, else
 * all CPUs). */
LY_API ly_status ly_model_set_threads(ly_model *model, int threads);

/* Prediction options, checked by ly_predict_options_check on every call (the
 * command and the Python package go through it too, so the same options get
 * the same refusal everywhere):
 *   conf     score threshold, in [0, 1] (a detection needs score > conf)
 *   iou      NMS IoU threshold, in [0, 1] (boxes overlapping a better one of
 *            their class by IoU > iou are suppressed)
 *   max_det  at most this many detections per image, >= 1
 *   imgsz    square input size: positive, at most 32768, a multiple of the
 *            model's stride (YOLO9: 32), or the one size of a fixed-size model
 *   classes  keep only detections of these class ids (each in 0..nc-1),
 *            applied after post-processing (NMS and max_det), as LibreYOLO
 *            does; NULL: all classes. Classifiers ignore it (as LibreYOLO).
 *   tile     restoration models (SwinIR): run the network on tiles of this
 *            many (padded) input pixels a side, >= 0; 0 (the default): the
 *            whole image at once, unless it is larger than 256 x 256, which
 *            is tiled at 64 with a warning. Refused for other models.
 *   tile_pad restoration models: each tile's context on every side, >= 0
 *            (default 16, as LibreYOLO).
 * Restoration models ignore conf, iou, max_det, imgsz and classes, as
 * LibreYOLO (the input is the image's own size, padded to a multiple of 8).
 *
 * The model's default (ly_model_info's default_conf, default_iou and
 * default_max_det, which `libreyolo info` shows; imgsz: ly_model_info's):
 * a field left as ly_predict_options_init sets it,
 * LY_PREDICT_DEFAULT for max_det and imgsz, NAN for conf and iou. Any other
 * value is the caller's own and is checked: 0 or a negative size is refused,
 * never read as "the default". A binding that forwards whatever its user gave
 * also sets the field's bit in `given`; with it set, the field is checked
 * even when it holds the marker (a user's NaN conf is refused, not taken for
 * the default). */
#define LY_PREDICT_DEFAULT INT_MIN
enum {
    LY_PREDICT_CONF = 1u << 0,
    LY_PREDICT_IOU = 1u << 1,
    LY_PREDICT_MAX_DET = 1u << 2,
    LY_PREDICT_IMGSZ = 1u << 3,
    LY_PREDICT_TILE = 1u << 4,
    LY_PREDICT_TILE_PAD = 1u << 5,
    LY_PREDICT_OVERLAP_RATIO = 1u << 6,
};

typedef struct ly_predict_options {
    float conf;
    float iou;
    int max_det;
    int imgsz;
    const int *classes; /* n_classes ids (NULL: all; a list of none keeps none) */
    size_t n_classes;
    int tile, tile_pad; /* restoration models only */
    unsigned given;     /* LY_PREDICT_* bits: fields given by the user, whatever they hold */
    /* LibreYOLO's tiling=True: an image larger than the input size is cut
     * into overlapping tiles of that size (ly_predict_tiles), each predicted
     * alone, the boxes shifted back and merged by class-wise NMS at iou;
     * classifiers predict once. */
    bool tiling;
    double overlap_ratio; /* between tiles, in [0, 1); NAN: 0.2 (LibreYOLO's) */
} ly_predict_options;

/* Every field at the model's default, classes NULL. */
LY_API ly_status ly_predict_options_init(ly_predict_options *options);

/* imgsz given as LibreYOLO takes it, one size or (height, width): sets imgsz
 * (and its `given` bit) when height == width; LY_E_INVALID_ARGUMENT naming both
 * otherwise, since predict's input is square here. The command's imgsz=S,
 * imgsz=H,W, imgsz=[H,W] and imgsz=HxW and Python's imgsz=(h, w) come here. */
LY_API ly_status ly_predict_options_set_imgsz(ly_predict_options *options, int height, int width);

/* LY_E_INVALID_ARGUMENT, and a message naming the option, its value and what
 * is expected, for options that predict on `model` refuses. `model` may be
 * NULL: then only what needs no model is checked (ranges, class ids >= 0),
 * as the command does before it loads one. The checks needing no model come
 * first, so a refusal's message is the same with or without the model. */
LY_API ly_status ly_predict_options_check(const ly_model *model, const ly_predict_options *options);

/* LibreYOLO's get_slice_bboxes: the tiles (x1, y1, x2, y2) that tiling cuts a
 * width x height image into, `size` pixels a side, overlapping by
 * int(size * overlap_ratio), the last of a row or column moved back to end
 * at the edge. *count is how many there are; the first min(*count,
 * capacity) are written. LY_E_INVALID_ARGUMENT for sizes below 1, an
 * overlap outside [0, 1), or more than 4096 tiles (the message says how many). */
LY_API ly_status ly_predict_tiles(int width, int height, int size, double overlap_ratio,
                                  int (*tiles)[4], size_t capacity, size_t *count);

/* `options` may be NULL for the model's defaults. */
typedef enum ly_pixel_format { LY_PIXELS_RGB = 0, LY_PIXELS_BGR = 1 } ly_pixel_format;

/* Interleaved 8-bit pixels, 3 channels, rows `stride` bytes apart. */
typedef struct ly_image_view {
    const uint8_t *pixels;
    int width, height;
    size_t stride;
    ly_pixel_format format;
} ly_image_view;

LY_API ly_status ly_model_predict_file(ly_model *model, const char *path,
                                       const ly_predict_options *options, ly_results **out);
LY_API ly_status ly_model_predict_image(ly_model *model, const ly_image_view *image,
                                        const ly_predict_options *options, ly_results **out);
/* ly_model_predict_image on an image that ly_image_load decoded, which it takes:
 * the pixels are freed as soon as preprocessing has read them, so the network
 * runs without them (a 1280x852 photo: 3.3 MB less at the peak, a 12-megapixel
 * one 36 MB), and *image is empty on return whatever the outcome.
 * ly_model_predict_file works this way. */
typedef struct ly_image ly_image;
LY_API ly_status ly_model_predict_decoded(ly_model *model, ly_image *image,
                                          const ly_predict_options *options, ly_results **out);

/* Predict on n images in one network call where the model's network takes
 * a batch (ly_model_info.batched; LibreYOLO's batch=N): out[i] gets image
 * i's results, what ly_model_predict_image gives for it alone (the same
 * detections; scores may differ in the last bits where a kernel's sums run
 * in another order for a batch). Each result's speed is its share of the
 * call (the call's time / n). Models without a batch, and calls with
 * tiling, run the images one by one. The whole batch shares one option set
 * and one input size; its memory grows with n, so callers cut long lists
 * into batches of at most LY_PREDICT_MAX_BATCH. On failure every out[i] is
 * NULL and the message names the image. `out` has room for n results (each
 * freed with ly_results_free). */
#define LY_PREDICT_MAX_BATCH 256
LY_API ly_status ly_model_predict_batch(ly_model *model, const ly_image_view *images, size_t n,
                                        const ly_predict_options *options, ly_results **out);

typedef struct ly_detection {
    float xyxy[4]; /* original-image pixels */
    float conf;
    int cls;
    const char *name; /* class name ("" if the checkpoint has none) */
} ly_detection;

LY_API ly_status ly_results_count(const ly_results *results, size_t *count);
LY_API ly_status ly_results_get(const ly_results *results, size_t index, ly_detection *out);
LY_API ly_status ly_results_orig_shape(const ly_results *results, int *height, int *width);
/* How many tiles the prediction ran on: 0 when it did not tile (LibreYOLO's
 * result.tiled and result.num_tiles are set only when it tiled). */
LY_API ly_status ly_results_tiles(const ly_results *results, int *num_tiles);
/* Milliseconds spent in preprocessing, the network, and postprocessing. A
 * model's first prediction at a size counts its one-time planning (weights
 * packed for the kernels) as inference. */
LY_API ly_status ly_results_speed(const ly_results *results, double *preprocess_ms,
                                  double *inference_ms, double *postprocess_ms);
LY_API ly_status ly_results_free(ly_results *results);

/* One results type for every task. Detection results hold detections
 * (ly_results_count/get); a classifier's (task "classify") hold no detections
 * and class probabilities instead; a restoration model's (task "restore")
 * the restored image. *task is static ("detect", "classify", "restore"). */
LY_API ly_status ly_results_task(const ly_results *results, const char **task);

typedef struct ly_class_prob {
    int cls;
    float conf;       /* probability (softmax of the logits) */
    const char *name; /* valid until ly_results_free */
} ly_class_prob;

/* The min(k, classes) most probable classes, descending (ties: lower id),
 * into out; LY_E_UNSUPPORTED for results that are not a classifier's. */
LY_API ly_status ly_results_top(const ly_results *results, size_t k, ly_class_prob *out, size_t *n);
/* Every class's probability (*probs valid until ly_results_free; *count the
 * classes). LY_E_UNSUPPORTED for results that are not a classifier's. */
LY_API ly_status ly_results_probs(const ly_results *results, const float **probs, size_t *count);

/* The restored image (RGB, rows width * 3 bytes apart; its pixels belong to
 * the results and are valid until ly_results_free) and how many times larger
 * than the source it is (*scale; may be NULL): LibreYOLO's
 * Results.restored and restore_scale. LY_E_UNSUPPORTED for results that are
 * not a restoration model's. */
LY_API ly_status ly_results_restored(const ly_results *results, ly_image_view *image, int *scale);

/* Run the network alone on a preprocessed input [1, 3, H, W] ([N, 3, H, W]
 * where ly_model_info.batched: the outputs then lead with N) and visit each
 * raw output by name (YOLO9: "predictions", "raw_p3", "raw_p4", "raw_p5").
 * The views are valid during the callback only. */
typedef void (*ly_model_output_fn)(const char *name, const ly_tensor *output, void *user);
LY_API ly_status ly_model_run(ly_model *model, const ly_tensor *input, ly_model_output_fn visit,
                              void *user);

/* Fused attention (spec: LibreYOLO's set_fused_attention): set the
 * `fused_attn` flag of every attention module of the model to `enabled` and
 * report in *count how many modules carry the flag (also those already set;
 * 0 for models without attention, such as YOLO9 and NanoDet). A module with
 * the flag runs the fused SDPA provider when it is on; graph capture for
 * export always uses the manual math. `count` may be NULL. */
LY_API ly_status ly_model_set_fused_attention(ly_model *model, bool enabled, int *count);
/* How many attention modules carry the flag, and whether it is on (false
 * with 0 modules). Changing it rebuilds the network from the checkpoint file
 * (ViT): not while another thread predicts with the model. */
LY_API ly_status ly_model_fused_attention(const ly_model *model, int *modules, bool *enabled);

#ifdef __cplusplus
}
#endif

#endif
