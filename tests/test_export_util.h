/* SPDX-License-Identifier: MIT */
/* Shared by the export and .pte runtime tests: a LibreYOLO9t checkpoint with
 * random weights written as .safetensors (so the tests run without the shared
 * fixture), and small file helpers. Include after cmocka.h and test_util.h. */
#ifndef LY_TESTS_TEST_EXPORT_UTIL_H
#define LY_TESTS_TEST_EXPORT_UTIL_H

#include "engines/executorch/et_runtime.h"
#include "export/lower.h"
#include "graph/graph.h"
#include "models/yolo9/build.h"
#include "pte/pte.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Lower `g` at `in`'s shape, as ly_model_export does: the shapes by inference. */
static inline ly_status lower_graph(ly_graph *g, const ly_tensor *in, ly_lower_result *r)
{
    ly_tensor *shapes = calloc((size_t)ly_graph_value_count(g) + 1, sizeof *shapes);
    assert_non_null(shapes);
    ly_status st = ly_graph_infer(g, 1, in, shapes);
    if (st == LY_OK) st = ly_export_lower(g, shapes, NULL, r);
    free(shapes);
    return st;
}

typedef struct st_key {
    char name[160];
    int ndim;
    int64_t shape[4];
} st_key;

typedef struct st_keys {
    st_key *k;
    size_t n, cap;
} st_keys;

static void st_collect(const char *key, int ndim, const int64_t *shape, void *user)
{
    st_keys *ks = user;
    if (ks->n == ks->cap) {
        ks->cap = ks->cap ? 2 * ks->cap : 256;
        ks->k = realloc(ks->k, ks->cap * sizeof *ks->k);
        assert_non_null(ks->k);
    }
    st_key *k = &ks->k[ks->n++];
    snprintf(k->name, sizeof k->name, "%s", key);
    k->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        k->shape[i] = shape[i];
}

static bool ends_with_(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* LibreYOLO9t with `nc` classes, random weights (seeded), BatchNorm statistics
 * that keep activations in range; written to `path` as .safetensors. */
static inline void write_random_yolo9t(const char *path, int64_t nc, uint64_t seed)
{
    st_keys ks = {0};
    assert_int_equal(ly_yolo9_expected_keys("t", nc, st_collect, &ks), LY_OK);
    size_t total = 0;
    for (size_t i = 0; i < ks.n; i++) {
        int64_t n = 1;
        for (int d = 0; d < ks.k[i].ndim; d++)
            n *= ks.k[i].shape[d];
        total += (size_t)n;
    }
    float *data = malloc(total * sizeof(float));
    assert_non_null(data);
    size_t header_cap = ks.n * 256 + 256, len = 0;
    char *header = malloc(header_cap);
    assert_non_null(header);
    len += (size_t)snprintf(header + len, header_cap - len,
                            "{\"__metadata__\":{\"model_family\":\"yolo9\",\"task\":\"detect\"}");
    size_t at = 0;
    for (size_t i = 0; i < ks.n; i++) {
        const st_key *k = &ks.k[i];
        int64_t n = 1, fan_in = 1;
        for (int d = 0; d < k->ndim; d++)
            n *= k->shape[d];
        for (int d = 1; d < k->ndim; d++)
            fan_in *= k->shape[d];
        float scale = k->ndim == 4 ? 1.7f / sqrtf((float)fan_in) : 0.1f;
        for (int64_t j = 0; j < n; j++) {
            float u = (float)(ly_test_splitmix64(&seed) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
            float v = u * scale;
            if (ends_with_(k->name, ".bn.weight")) v = 1.0f + 0.2f * u;
            if (ends_with_(k->name, ".bn.running_var")) v = 1.0f + 0.5f * (u + 1.0f);
            if (ends_with_(k->name, ".bn.running_mean")) v = 0.05f * u;
            data[at + (size_t)j] = v;
        }
        len += (size_t)snprintf(header + len, header_cap - len,
                                ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", k->name);
        for (int d = 0; d < k->ndim; d++)
            len += (size_t)snprintf(header + len, header_cap - len, "%s%lld", d ? "," : "",
                                    (long long)k->shape[d]);
        len += (size_t)snprintf(header + len, header_cap - len, "],\"data_offsets\":[%zu,%zu]}",
                                at * 4, (at + (size_t)n) * 4);
        at += (size_t)n;
    }
    len += (size_t)snprintf(header + len, header_cap - len, "}");
    while (len % 8)
        header[len++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = len;
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(hl >> (8 * i));
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(header, 1, len, f), len);
    assert_int_equal(fwrite(data, sizeof(float), total, f), total);
    assert_int_equal(fclose(f), 0);
    free(header);
    free(data);
    free(ks.k);
}

static inline bool file_exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0;
}

/* Whole file into memory (NUL-terminated); NULL if unreadable. */
static inline uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[n] = 0;
    if (size) *size = (size_t)n;
    return p;
}

/* A classifier's sidecar: its eval transform's keys (crop 0.9, bicubic) and the task. */
static inline void expect_classify_sidecar(const char *sidecar)
{
    char *text = (char *)read_all(sidecar, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"crop_pct\": 0.9,"));
    assert_non_null(strstr(text, "\"interpolation\": \"bicubic\""));
    assert_non_null(strstr(text, "\"task\": \"classify\""));
    free(text);
}

static inline void write_all(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

/* ---- what may be a constant inside an XNNPACK partition ------------------------------

 * Only the operands XNNPACK packs into storage of its own when its runtime is
 * made: filters and biases of convolutions and fully-connected nodes
 * (ExecuTorch before 1.4.1 frees every other constant it loaded, and the nodes
 * reading one keep a pointer to it). Returns how many nodes read a constant
 * elsewhere (their names in `why`), or -1 (with `why`) for a node type or a
 * payload this walker cannot read. */
static inline bool xnn_is_constant(const ly_xnn_graph *g, uint32_t id)
{
    return id < g->n_xvalues && g->xvalues[id].tensor.constant_buffer_idx != 0;
}

static inline int unpacked_constant_readers(const uint8_t *program, size_t size, char *why,
                                            size_t why_size)
{
    ly_pte_program *p;
    why[0] = '\0';
    if (ly_pte_decode(program, size, "walk", &p) != LY_OK) {
        snprintf(why, why_size, "%s", ly_last_error());
        return -1;
    }
    int found = 0;
    for (size_t e = 0; e < p->n_execution_plan && found >= 0; e++) {
        const ly_pte_plan *plan = &p->execution_plan[e];
        for (size_t d = 0; d < plan->n_delegates && found >= 0; d++) {
            ly_pte_bytes blob;
            ly_xnn_graph *g;
            if (ly_pte_delegate_blob(p, &plan->delegates[d], &blob) != LY_OK ||
                ly_xnn_decode(blob.data, blob.size, "walk", &g) != LY_OK) {
                snprintf(why, why_size, "delegate %zu: %s", d, ly_last_error());
                found = -1;
                break;
            }
            for (size_t i = 0; i < g->n_xnodes; i++) {
                const ly_xnn_node *n = &g->xnodes[i];
                uint32_t read[8];
                int k = 0;
                switch (ly_xnn_node_kind_of(n->type)) {
                case LY_XNN_KIND_1X1:
                    read[k++] = n->u.n1x1.input_id;
                    break;
                case LY_XNN_KIND_2X1:
                    read[k++] = n->u.n2x1.input1_id;
                    read[k++] = n->u.n2x1.input2_id;
                    break;
                case LY_XNN_KIND_CONV: /* filter and bias are packed */
                    read[k++] = n->u.conv.input1_id;
                    break;
                case LY_XNN_KIND_FULLY_CONNECTED:
                    read[k++] = n->u.fc.input1_id;
                    break;
                case LY_XNN_KIND_POOLING:
                    read[k++] = n->u.pooling.input_id;
                    break;
                case LY_XNN_KIND_CAT: {
                    int inputs = n->type == LY_XNN_CONCATENATE5   ? 5
                                 : n->type == LY_XNN_CONCATENATE4 ? 4
                                 : n->type == LY_XNN_CONCATENATE3 ? 3
                                                                  : 2;
                    const uint32_t ids[5] = {n->u.cat.input1_id, n->u.cat.input2_id,
                                             n->u.cat.input3_id, n->u.cat.input4_id,
                                             n->u.cat.input5_id};
                    for (int c = 0; c < inputs && c < 5; c++)
                        read[k++] = ids[c];
                    break;
                }
                case LY_XNN_KIND_TRANSPOSE:
                    read[k++] = n->u.transpose.input_id;
                    break;
                case LY_XNN_KIND_RESIZE_BILINEAR:
                    read[k++] = n->u.resize.input_id;
                    break;
                case LY_XNN_KIND_RESHAPE:
                    read[k++] = n->u.reshape.input_id;
                    break;
                case LY_XNN_KIND_SLICE:
                    read[k++] = n->u.slice.input_id;
                    break;
                case LY_XNN_KIND_LEAKY_RELU:
                    read[k++] = n->u.leaky_relu.input_id;
                    break;
                default:
                    snprintf(why, why_size, "delegate %zu node %zu: %s is not walked", d, i,
                             ly_xnn_node_name(n->type));
                    found = -1;
                    break;
                }
                for (int r = 0; found >= 0 && r < k; r++)
                    if (xnn_is_constant(g, read[r])) {
                        size_t len = strlen(why);
                        snprintf(why + len, why_size - len, "%s%s reads constant value %u",
                                 len ? "; " : "", ly_xnn_node_name(n->type), read[r]);
                        found++;
                    }
                if (found < 0) break;
            }
            ly_xnn_graph_free(g);
        }
    }
    ly_pte_program_free(p);
    return found;
}

/* Fail unless every constant inside the program's partitions is a packed one. */
static inline void expect_packed_constants_only(const uint8_t *program, size_t size,
                                                const char *what)
{
    char why[1024];
    int n = unpacked_constant_readers(program, size, why, sizeof why);
    if (n != 0) fail_msg("%s: %s", what, why);
}

/* Export classifier `m` (taken: freed here) to `out`, check its sidecar's
 * classify keys and that only packed constants sit inside its partitions,
 * and load the program: NULL (after checking the refusal) in a build that
 * runs no XNNPACK program. `what` names the model in the message then. */
static inline ly_model *export_classifier_and_reload(ly_model *m, const char *out, const char *what)
{
    char sidecar[4200];
    snprintf(sidecar, sizeof sidecar, "%s.json", out);
    ly_export_options o;
    ly_export_options_init(&o);
    o.output_path = out;
    if (ly_model_export(m, &o, NULL, 0) != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_free(m);
    expect_classify_sidecar(sidecar);
    size_t size = 0;
    uint8_t *program = read_all(out, &size);
    assert_non_null(program);
    expect_packed_constants_only(program, size, out);
    free(program);
    ly_model *pte = NULL;
    ly_status st = ly_model_load(out, NULL, &pte);
    if (!ly_et_xnnpack_available()) {
        assert_int_equal(st, LY_E_UNSUPPORTED);
        print_message("%s exported; this build runs no XNNPACK programs\n", what);
        return NULL;
    }
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    return pte;
}

#endif
