/* SPDX-License-Identifier: MIT */
/*
 * Recipes and engines (internal): what a model family is, apart from what
 * runs it.
 *
 * A recipe (src/models/<family>/recipe.c) says which checkpoints are its own
 * (by the metadata's model_family first, as LibreYOLO's factory does, then by
 * the keys), how its network is built, its pre- and post-processing, its
 * defaults and its export rules. An engine (src/engines/) runs a network: the
 * graph runtime, or an ExecuTorch program. model.c runs every prediction the
 * same way, whatever the pair: preprocess into the engine's input, run,
 * postprocess the outputs. Adding a family is one recipe and one line in
 * recipes.c; nothing outside a recipe compares family names.
 *
 * Sharing: a loaded model (its recipe data and engine data) is immutable. An
 * engine session is the per-call state (a graph context, an ExecuTorch method
 * instance): one thread uses a session at a time, and any number of sessions
 * run at once, so one model serves any number of threads.
 */
#ifndef LY_MODELS_RECIPE_H
#define LY_MODELS_RECIPE_H

#include "libreyolo/checkpoint.h"
#include "libreyolo/export.h"
#include "libreyolo/model.h"
#include "models/export_support.h"

typedef struct ly_box {
    float xyxy[4]; /* original-image pixels */
    float conf;
    int cls;
} ly_box;

/* One row of the export support matrix (executorch.md A6): the tier of
 * (the recipe's family, `task`, `format`) and why. */
typedef struct ly_export_rule {
    const char *task;   /* canonical; NULL ends a recipe's list */
    const char *format; /* NULL: every format */
    ly_export_tier tier;
    const char *reason;
    const char *constraint; /* NULL: none */
} ly_export_rule;

typedef struct ly_recipe ly_recipe;
typedef struct ly_engine ly_engine;
typedef struct ly_engine_session ly_engine_session;
struct ly_graph;

#define LY_MODEL_MAX_OUTPUTS 16

/* What loading fills in. Strings are owned by the model (model.c frees
 * `names[i]`, `names`, the recipe data and the engine). */
typedef struct ly_model_desc {
    const ly_recipe *recipe;
    void *recipe_data; /* the recipe's facts about this model (recipe->free_data) */
    const ly_engine *engine;
    void *engine_data;
    char size[16];
    char task[16];
    int64_t nc;
    int64_t imgsz;            /* default (square) input size */
    int64_t stride;           /* inputs must be multiples of this; 0: the fixed size only */
    int64_t fixed_h, fixed_w; /* stride 0: the one input size (may be rectangular) */
    char **names;             /* nc strings, "" where unknown */
    int64_t file_tensors, file_parameters; /* the checkpoint as stored (-1: none) */
    /* LibreYOLO quantization ("" recipe: float) */
    char quant_recipe[8], quant_state[12], quant_remainder[8];
    int quant_modules;
} ly_model_desc;

/* Where preprocessing put the image: the recipe's own geometry, opaque here. */
typedef struct ly_prep {
    _Alignas(8) unsigned char bytes[64];
} ly_prep;

struct ly_recipe {
    const char *family;            /* the metadata's model_family: "yolo9" */
    const char *task;              /* the task it runs: "detect" */
    const char *input_description; /* what its preprocessing makes (libreyolo info) */
    /* What predict uses for options left at the model's default (model.h). */
    float default_conf, default_iou;
    int default_max_det;
    /* Detections may have class nc, a no-object column LibreYOLO keeps among
     * the candidates (RF-DETR); it has no name. */
    bool no_object_class;
    /* Its graph takes a batch dimension: for an input [n, 3, h, w] every
     * output leads with n, and image i's outputs are what it alone would
     * give (LibreYOLO's SUPPORTS_BATCHED_PREDICT; ly_model_predict_batch). */
    bool batched;

    /* ---- loading (each may be NULL) ---- */
    /* A path in a format of the recipe's own (a TF.js graph, a named model):
     * LY_E_DECLINED, with no error set, when it is not. */
    ly_status (*load_path)(const char *path, ly_model_desc *d);
    /* Whether a checkpoint without model_family metadata has this family's
     * keys (and, where keys are shared between families, file name: `path`). */
    bool (*accepts_keys)(const ly_checkpoint *ck, const char *path);
    /* Checkpoint keys that are state, not parameters, besides BatchNorm's
     * running statistics: suffixes, NULL-terminated (NULL: none). The stored
     * parameter count leaves them out, as torch's parameters() does. */
    const char *const *buffer_suffixes;
    /* Build from a checkpoint (an engine with it). */
    ly_status (*load_checkpoint)(const ly_checkpoint *ck, const char *path, ly_model_desc *d);
    /* Check an engine's outputs (shapes, at the fixed or default input size)
     * are this family's, and keep what postprocessing needs in recipe_data. */
    ly_status (*bind)(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path);
    void (*free_data)(void *data);
    /* The name of output `index` for engines whose programs do not name them. */
    void (*output_name)(int index, char *buf, size_t size);
    /* Fused attention (model.h): set every module's flag, *count the modules
     * that carry it (NULL: none). fused_attention: the flag now, and how many
     * modules carry it. */
    ly_status (*set_fused_attention)(ly_model_desc *d, bool enabled, int *count);
    bool (*fused_attention)(const ly_model_desc *d, int *modules);
    /* The graph an export captures for an input [1, 3, h, w] when it is not
     * the running one (ViT with fused attention on: captures use the manual
     * expression), the caller's to free; *out NULL: the running one (NULL
     * hook: always). */
    ly_status (*capture_graph)(const ly_model_desc *d, int64_t h, int64_t w, struct ly_graph **out);

    /* ---- predicting ---- */
    /* The image into input [1, 3, h, w] at `input`; `prep` says where it went. */
    ly_status (*preprocess)(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep);
    /* Restorers (task "restore"): the output is the image this many times
     * larger, made by models/restore.c (padding, tiles, uint8) instead of
     * postprocess; 0 for every other task. */
    int restore_scale;
    /* Classifiers: the outputs to class probabilities, probs[nc] (instead
     * of postprocess). */
    ly_status (*probabilities)(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                               float *probs);
    /* Outputs to boxes in original-image pixels, descending score, at most
     * max_det (*boxes: free()); `options` has every field resolved. The
     * classes filter is model.c's, after this, for every family. */
    ly_status (*postprocess)(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                             const ly_prep *prep, const ly_image_view *image,
                             const ly_predict_options *options, ly_box **boxes, size_t *count);

    /* ---- export rules ---- */
    /* LibreYOLO's tasks of the family, its default first, NULL-terminated
     * (NULL: `task` alone). A task listed but not run has a blocking row in
     * export_rules, so that `formats` can say why (YOLO9's segment). */
    const char *const *tasks;
    /* The family's rows of the support matrix, asked in order (NULL: none:
     * the format's default tier). */
    const ly_export_rule *export_rules;
    const char *file_prefix; /* default stem = prefix + size ("LibreYOLO9t"); NULL: family_size */
    /* The sizes LibreYOLO publishes weights for (NULL-terminated; NULL: none),
     * which make the model names "<family>-<size>" and "<prefix><size>"
     * (model names, models/names.c). */
    const char *const *published_sizes;
    int export_outputs; /* the leading outputs an export keeps (0: all) */
    bool rectangular;   /* h != w is the family's (its programs may be rectangular) */
    /* Classifiers' eval transform, for export sidecars (0 / NULL: none). */
    double crop_pct;
    const char *interpolation;
};

/* A model name ("yolo9-t", "LibreYOLO9t", "LibreYOLO9t.pt") that is no file
 * here, resolved to the weights file in ., weights/ or <cache>/weights/ (into
 * `out`). LY_E_DECLINED when `name` is a path or no name this build knows
 * (nothing set); LY_E_NOT_FOUND naming the file expected, where it was looked
 * for and the address LibreYOLO downloads it from. */
ly_status ly_model_name_resolve(const char *name, char *out, size_t size);
/* "nanodet, yolo9-t, yolo9-s, ..." for messages. */
void ly_model_names_known(char *out, size_t size);

/* Every recipe this build has (recipes.c), in the order loading asks them. */
extern const ly_recipe *const ly_recipes[];
extern const int ly_recipe_count;
/* The recipe of metadata family `family` (aliases included), or NULL. */
const ly_recipe *ly_recipe_find(const char *family);
/* Every recipe's family name, in name order (static, *count of them). */
const char *const *ly_recipe_families(size_t *count);

struct ly_engine {
    const char *name; /* "graph", "executorch" */
    ly_status (*acquire)(void *data, ly_engine_session **out);
    void (*release)(void *data, ly_engine_session *session);
    /* The session's own room for an input [1, 3, h, w], valid until its next
     * call (preprocessing writes straight into it). */
    ly_status (*input_buffer)(ly_engine_session *s, int64_t h, int64_t w, int threads,
                              float **data);
    /* The same for n images, [n, 3, h, w], for engines whose networks take a
     * batch (NULL: batch 1 only); its run's outputs then lead with n. */
    ly_status (*batch_input_buffer)(ly_engine_session *s, int64_t n, int64_t h, int64_t w,
                                    int threads, float **data);
    ly_status (*run)(ly_engine_session *s, const ly_tensor *input, int threads);
    /* After a run: views of every output (valid until the session's next
     * call) and their names. */
    ly_status (*outputs)(ly_engine_session *s, ly_tensor *views, const char **names, int capacity,
                         int *count);
    /* The outputs' shapes for an input [1, 3, h, w], without running. */
    ly_status (*output_shapes)(void *data, int64_t h, int64_t w, ly_tensor *shapes, int capacity,
                               int *count);
    /* The network as a graph, for exporters (NULL when the engine has none). */
    struct ly_graph *(*graph)(void *data);
    /* Engines whose graph depends on the input size: the network's graph
     * for an input [1, 3, h, w], the caller's to free (NULL: graph() serves
     * every size). */
    ly_status (*graph_for)(void *data, int64_t h, int64_t w, struct ly_graph **out);
    void (*free)(void *data);
};

/* The graph engine over `g` (which it owns from then on, freed on failure). */
ly_status ly_graph_engine_attach(ly_model_desc *d, struct ly_graph *g);

/* The graph engine for networks built per input size (shifted windows):
 * build(user, h, w, g) fills the empty graph `g` for an input [1, 3, h, w];
 * graphs are built on first use and the last few sizes kept. The engine owns
 * `user` from then on (free_user at the end, also on failure here). Exporters
 * get the graph of canonical_h x canonical_w. */
typedef ly_status (*ly_sized_build_fn)(void *user, int64_t h, int64_t w, struct ly_graph *g);
ly_status ly_sized_graph_engine_attach(ly_model_desc *d, ly_sized_build_fn build, void *user,
                                       void (*free_user)(void *user), int64_t canonical_h,
                                       int64_t canonical_w);

/* The model's description (exporters, benchmarks). */
const ly_model_desc *ly_model_desc_of(const ly_model *model);

/* Loaders of formats that carry their own family (a .pte with its sidecar):
 * LY_E_DECLINED, with no error set, for any other path. */
ly_status ly_pte_load_model(const char *path, ly_model_desc *out);

/* Helpers for recipes. */
ly_status ly_model_names_copy(ly_model_desc *desc, const char *const *names, size_t count);
/* The checkpoint's class names, else COCO's for 80 classes, else "". */
ly_status ly_model_names_from_checkpoint(ly_model_desc *desc, const ly_checkpoint *ck);
/* Extent `dim` of checkpoint tensor `key`, or -1 (no error set) when it is
 * absent, has no such dimension, or (ndim >= 0) is not of rank ndim: for
 * recognising sizes by their keys. */
int64_t ly_model_key_extent(const ly_checkpoint *ck, const char *key, int dim, int ndim);
/* Whether some key of the checkpoint contains `part` / starts with `prefix`
 * (recognising families and sizes by their keys). */
bool ly_model_has_key_containing(const ly_checkpoint *ck, const char *part);
bool ly_model_has_key_starting(const ly_checkpoint *ck, const char *prefix);
/* The size the keys say (`family` names the family in the message) against
 * the metadata's size, where it has one: LY_E_FORMAT naming both when they
 * differ. */
ly_status ly_model_meta_size_agrees(const ly_checkpoint *ck, const char *path, const char *family,
                                    const char *size);
/* Metadata imgsz (`fallback` without one): a positive multiple of `multiple`
 * up to `max`, else an error naming `path`. */
ly_status ly_model_meta_imgsz(const ly_checkpoint *ck, const char *path, int64_t fallback,
                              int64_t multiple, int64_t max, int64_t *imgsz);

#endif
