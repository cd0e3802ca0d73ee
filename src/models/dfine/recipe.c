/* The D-FINE and DEIM recipes (recipe.h): LibreYOLO's LibreDFINE and
 * LibreDEIM checkpoints (size n so far), their PIL resize and top-K
 * post-processing, their defaults (detr.md 1, 3, 8, 9, 11). */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "models/dfine/dfine.h"

#include <stdio.h>
#include <string.h>

enum { DEFAULT_IMGSZ = 640, QUERIES = 300, HEADS = 8 };

static bool has_key(const ly_checkpoint *ck, const char *key)
{
    ly_tensor view;
    bool found = ly_checkpoint_find(ck, key, &view) == LY_OK;
    ly_clear_error();
    return found;
}

/* LibreYOLO's can_load: any decoder.pre_bbox_head key (D-FINE and DEIM alike;
 * without metadata the checkpoint is taken as D-FINE). */
static bool accepts_keys(const ly_checkpoint *ck)
{
    return has_key(ck, "decoder.pre_bbox_head.layers.0.weight");
}

/* detr.md 11: by encoder.lateral_convs.0.conv.weight's input channels. */
static ly_status recognise_size(const ly_checkpoint *ck, const char *path, char *size, size_t cap)
{
    ly_tensor v;
    if (ly_checkpoint_find(ck, "encoder.lateral_convs.0.conv.weight", &v) != LY_OK || v.ndim != 4)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: D-FINE key 'encoder.lateral_convs.0.conv.weight' "
                            "missing or not a conv weight",
                            path);
    int64_t c = v.shape[1];
    bool two_levels = has_key(ck, "encoder.input_proj.1.conv.weight") &&
                      !has_key(ck, "encoder.input_proj.2.conv.weight");
    const char *s = c == 128 && two_levels ? "n" : c == 384 ? "x" : c == 256 ? "s/m/l" : NULL;
    if (!s)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: encoder.lateral_convs.0.conv.weight has %lld input "
                            "channels, no D-FINE size has that (n 128, s/m/l 256, x 384)",
                            path, (long long)c);
    if (strcmp(s, "n") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_load: %s: D-FINE/DEIM size %s is not built yet (this build "
                            "runs n)",
                            path, s);
    snprintf(size, cap, "%s", s);
    return LY_OK;
}

/* D-FINE and DEIM: one architecture, one key set; DEIM's decoder (FFN, MLPs,
 * LQE) uses SiLU where D-FINE's uses ReLU (detr.md 1). */
static ly_status load_lineage(const ly_checkpoint *ck, const char *path, ly_model_desc *d,
                              bool silu)
{
    ly_status st = recognise_size(ck, path, d->size, sizeof d->size);
    if (st != LY_OK) return st;
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, DEFAULT_IMGSZ, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    ly_tensor bias;
    if (ly_checkpoint_find(ck, "decoder.dec_score_head.0.bias", &bias) != LY_OK || bias.ndim != 1)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: D-FINE key 'decoder.dec_score_head.0.bias' missing "
                            "or not [classes]",
                            path);
    d->nc = bias.shape[0];

    ly_graph *g;
    st = ly_graph_create(&g);
    if (st != LY_OK) return st;
    ly_graph_value image, feats[2], maps[2], logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE;
    static const int stages[2] = {2, 3};
    const int64_t feat_shapes[2][3] = {{512, imgsz / 16, imgsz / 16},
                                       {1024, imgsz / 32, imgsz / 32}};
    const int64_t map_shapes[2][2] = {{imgsz / 16, imgsz / 16}, {imgsz / 32, imgsz / 32}};
    st = ly_graph_input(g, "images", LY_F32, 4, &image);
    if (st == LY_OK)
        st = ly_dfine_hgnetv2(g, ck, "B0", true, image, imgsz, imgsz, 2, stages, feats);
    if (st == LY_OK) st = ly_dfine_hybrid_encoder(g, ck, 2, feats, feat_shapes, 1, HEADS, maps);
    if (st == LY_OK)
        st = ly_dfine_head(g, ck, 2, maps, map_shapes, QUERIES, HEADS, silu, &logits, &boxes);
    if (st == LY_OK) st = ly_graph_output(g, logits, "pred_logits");
    if (st == LY_OK) st = ly_graph_output(g, boxes, "pred_boxes");
    if (st != LY_OK) {
        ly_graph_free(g);
        char context[600];
        snprintf(context, sizeof context, "ly_model_load: %s", path);
        return ly_error_prefix(st, context);
    }
    st = ly_graph_engine_attach(d, g);
    if (st != LY_OK) return st;
    /* the anchors and the AIFI position embedding are built for this size only */
    d->stride = 0;
    d->imgsz = d->fixed_h = d->fixed_w = imgsz;
    return ly_model_names_from_checkpoint(d, ck);
}

static ly_status load_dfine(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(ck, path, d, false);
}

static ly_status load_deim(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    return load_lineage(ck, path, d, true);
}

static ly_status bind(ly_model_desc *d, const ly_tensor *outputs, int n_outputs, const char *path)
{
    bool ok = n_outputs >= 2 && outputs[0].ndim == 3 && outputs[0].shape[0] == 1 &&
              outputs[0].shape[2] == d->nc && outputs[1].ndim == 3 &&
              outputs[1].shape[1] == outputs[0].shape[1] && outputs[1].shape[2] == 4;
    if (!ok)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: the network's outputs are not D-FINE's "
                            "pred_logits [1, Q, %lld] and pred_boxes [1, Q, 4]",
                            path, (long long)d->nc);
    return LY_OK;
}

static void output_name(int index, char *buf, size_t size)
{
    snprintf(buf, size, "%s", index == 0 ? "pred_logits" : index == 1 ? "pred_boxes" : "output");
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    if (h != w)
        return ly_set_error(LY_E_SHAPE, "D-FINE: the input is square (%lldx%lld asked)",
                            (long long)h, (long long)w);
    return ly_dfine_preprocess(image, (int)h, input);
}

static ly_status postprocess(const ly_model_desc *d, const ly_tensor *outputs, int n_outputs,
                             const ly_prep *prep, const ly_image_view *image,
                             const ly_predict_options *options, ly_box **boxes, size_t *count)
{
    (void)d;
    (void)n_outputs;
    (void)prep;
    return ly_dfine_postprocess(&outputs[0], &outputs[1], image->width, image->height, options,
                                boxes, count);
}

/* One lineage, two families: what differs is the name, the loader, the
 * weights' file prefix and recognition by keys. */
#define LINEAGE_RECIPE(name, loader, prefix, keys)                                                 \
    {                                                                                              \
        .family = name, .task = "detect",                                                          \
        .input_description = "float32 RGB /255, PIL bilinear resize (antialiased) to the "         \
                             "model's size, no letterbox",                                         \
        .default_conf = 0.25f, .default_iou = 0.45f /* unused: no NMS */, .default_max_det = 300,  \
        .accepts_keys = keys, .load_checkpoint = loader, .bind = bind, .output_name = output_name, \
        .preprocess = preprocess, .postprocess = postprocess, .file_prefix = prefix,               \
        .published_sizes = (const char *const[]){"n", "s", "m", "l", "x", NULL},                   \
    }

/* D-FINE is recognised by its keys too (DEIM's are the same: it needs its
 * model_family metadata). */
const ly_recipe ly_dfine_recipe = LINEAGE_RECIPE("dfine", load_dfine, "LibreDFINE", accepts_keys);
const ly_recipe ly_deim_recipe = LINEAGE_RECIPE("deim", load_deim, "LibreDEIM", NULL);
