/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO9 internals shared by build.c, yolo9.c and the tests: the network
 * object and a builder that reads weights through a callback, so tests can
 * hand it state dicts with keys missing, renamed or of the wrong shape.
 */
#ifndef LY_MODELS_YOLO9_BUILD_H
#define LY_MODELS_YOLO9_BUILD_H

#include "graph/graph.h"
#include "models/common/builder.h"
#include "models/common/quant_conv.h"
#include "models/yolo9/yolo9.h"

struct ly_yolo9 {
    ly_graph *graph;
    char size[2];
    int64_t nc;
    int64_t reg_max;
    int quant_modules; /* Conv2d modules built quantized */
    /* LibreYOLO's quant manifest ("" when the checkpoint is float) */
    char quant_recipe[8], quant_state[12], quant_remainder[8];
};

/* A state dict: `count` tensors, visited by index (names as stored; a "module."
 * or "detect." prefix is normalised by the builder). */
typedef struct ly_yolo9_state {
    size_t count;
    ly_status (*at)(void *user, size_t index, const char **name, ly_tensor *view);
    void *user;
    /* Optional: the element type a tensor has in the file ("int8", ...). */
    const char *(*stored_dtype)(void *user, const char *name);
    /* NULL: a float checkpoint. Without a keep list, LibreYOLO's yolo9
     * default: "head." and "backbone.conv0." stay float. */
    const ly_conv_quant *quant;
} ly_yolo9_state;

/* Build from `state`. `size` ("t", "s", "m", "c") comes from the checkpoint's
 * metadata, or NULL to tell it from the shapes (yolo9.md 1.2); `nc_meta` is the
 * metadata's class count or -1. Every missing key, unexpected key (other than
 * num_batches_tracked and the DFL/anchor buffers) and wrong shape is listed in
 * one LY_E_FORMAT message naming each key, expected and actual shapes. */
ly_status ly_yolo9_build_state(const ly_yolo9_state *state, const char *size, int64_t nc_meta,
                               ly_yolo9 **out);

/* Every state-dict key a LibreYOLO9 of `size` with `nc` classes needs, with
 * its shape, in build order (num_batches_tracked not included). */
typedef ly_key_fn ly_yolo9_key_fn;
ly_status ly_yolo9_expected_keys(const char *size, int64_t nc, ly_yolo9_key_fn visit, void *user);

#endif
