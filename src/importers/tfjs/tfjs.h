/* SPDX-License-Identifier: MIT */
/*
 * TF.js graph models (internal): a model.json ("format": "graph-model") with
 * the TensorFlow graph as JSON (modelTopology.node[]: name, op, input, attr),
 * its signature, and a weightsManifest that says how the bytes of the weight
 * shards (*.bin next to the JSON) split into the graph's constants.
 *
 * Weights: each manifest group's shards are concatenated in order; its entries
 * take consecutive bytes with no padding, little-endian. float32 (optionally
 * quantised: float16, or uint8/uint16 affine q * scale + min) is dequantised to
 * f32; int32 stays i32 (graphs that say DT_INT64 store int32 in TF.js); bool
 * becomes u8. The entries must take exactly the shards' bytes. Strings and
 * other dtypes are refused.
 *
 * Every malformed thing is LY_E_FORMAT with a message naming the file and the
 * node, weight or field; a missing file is LY_E_NOT_FOUND.
 */
#ifndef LY_IO_TFJS_TFJS_H
#define LY_IO_TFJS_TFJS_H

#include "libreyolo/libreyolo.h"

#include <cjson/cJSON.h>

typedef struct ly_tfjs_node {
    const char *name;
    const char *op;
    int n_inputs;        /* data inputs, in order: "node" or "node:k" */
    const char **inputs; /* (strings owned by the model) */
    int n_control;       /* control dependencies ("^node"), the names without '^' */
    const char **control;
    const cJSON *attr; /* the node's "attr" object, or NULL */
} ly_tfjs_node;

/* A weight: the value of the Const node of the same name. */
typedef struct ly_tfjs_weight {
    const char *name;
    ly_dtype dtype; /* LY_F32, LY_I32 or LY_U8 (bool) */
    int ndim;
    int64_t shape[LY_MAX_DIMS];
    void *data; /* owned by the model; never NULL */
} ly_tfjs_weight;

/* A signature input or output: "name:0", dtype "DT_FLOAT", shape (-1 unknown). */
typedef struct ly_tfjs_io {
    const char *key;
    const char *dtype;
    int ndim; /* -1: unknown rank */
    int64_t shape[LY_MAX_DIMS];
} ly_tfjs_io;

typedef struct ly_tfjs_model {
    char *path; /* of the JSON, as messages name it */
    cJSON *root;
    ly_tfjs_node *nodes;
    size_t n_nodes;
    ly_tfjs_weight *weights;
    size_t n_weights;
    ly_tfjs_io *inputs, *outputs;
    size_t n_inputs, n_outputs;
    const char *generated_by, *converted_by; /* "" when absent */
    size_t *node_order, *weight_order;       /* indices sorted by name (lookups) */
} ly_tfjs_model;

/* Read `json_path` and its weight shards (paths relative to its folder). */
ly_status ly_tfjs_load(const char *json_path, ly_tfjs_model **out);

/* The same from memory: `read_shard` returns the bytes of a shard named in the
 * manifest (*bytes malloc'ed, the model frees them), or an error. `name` is how
 * messages refer to the JSON. */
typedef ly_status (*ly_tfjs_read_fn)(void *user, const char *shard, uint8_t **bytes, size_t *size);
ly_status ly_tfjs_parse(const char *json, size_t size, const char *name, ly_tfjs_read_fn read_shard,
                        void *user, ly_tfjs_model **out);

void ly_tfjs_free(ly_tfjs_model *model);

/* Lookups by exact name (NULL when absent). */
const ly_tfjs_node *ly_tfjs_node_find(const ly_tfjs_model *m, const char *name);
const ly_tfjs_weight *ly_tfjs_weight_find(const ly_tfjs_model *m, const char *name);

/* Split an input reference "node:k" into the node name (into buf) and k (0
 * when absent). LY_E_FORMAT for an empty name or a bad index. */
ly_status ly_tfjs_split_ref(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *ref,
                            char *buf, size_t size, int *index);

/* Node attributes. Absent: *present = false and the output untouched (LY_OK).
 * Malformed: LY_E_FORMAT naming the file, node and attribute. */
ly_status ly_tfjs_attr_string(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                              char *out, size_t size, bool *present); /* "s", base64 decoded */
ly_status ly_tfjs_attr_int(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                           int64_t *out, bool *present); /* "i" */
ly_status ly_tfjs_attr_float(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                             double *out, bool *present); /* "f" */
ly_status ly_tfjs_attr_bool(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                            bool *out, bool *present); /* "b" */
ly_status ly_tfjs_attr_type(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                            char *out, size_t size, bool *present); /* "type": "DT_FLOAT" */
/* "list": {"i": [...]}; an empty list ({}) gives *count 0. */
ly_status ly_tfjs_attr_int_list(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                                int64_t *out, int max, int *count, bool *present);

/* Standard base64 (padding optional) into out; *len receives the byte count.
 * false on a bad character or when out is too small. */
bool ly_tfjs_base64_decode(const char *in, uint8_t *out, size_t size, size_t *len);

/* IEEE 754 binary16 to binary32 (exact). */
float ly_tfjs_half_to_float(uint16_t h);

#endif
