/* SPDX-License-Identifier: MIT */
/*
 * The TF.js graph-model reader and its lowering onto ly_graph:
 *  - base64, float16, attribute access;
 *  - every kind of malformed model is LY_E_FORMAT naming the file and the node
 *    or field (never a crash), weights sized exactly against the shards;
 *  - a small synthetic onnx-tf-style graph (Pad/Transpose/Conv2D/Add/LeakyRelu,
 *    PadV2(-inf)+MaxPool, ResizeBilinear, residual and plain Adds, ConcatV2,
 *    SplitV, Sigmoid, Reshape with a SparseToDense shape, depthwise SAME conv
 *    with BiasAdd+Relu, float16 weights) lowered and run on the reference and
 *    the default kernels, against naive double-precision math in this file;
 *  - unsupported ops and layouts are LY_E_UNSUPPORTED naming the node and op;
 *  - a bounded deterministic fuzz of the JSON and the shard (also under ASan);
 *  - the real NanoDet-g model when present (LIBREYOLO_NANODET_DIR, else the
 *    model cache): node/weight counts and the parameter count of nanodet.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "graph/graph.h"
#include "importers/tfjs/tfjs.h"
#include "importers/tfjs/tfjs_graph.h"
#include "libreyolo/fetch.h"
#include "libreyolo/kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- a tiny model builder ------------------------------------------------- */

typedef struct builder {
    char nodes[1 << 16];
    char weights[1 << 15];
    uint8_t bin[1 << 16];
    size_t bin_len;
    int n_nodes, n_weights;
} builder;

static void b_append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < cap - used);
}

/* inputs: comma-separated quoted names; attr: members of the attr object. */
static void b_node(builder *b, const char *name, const char *op, const char *inputs,
                   const char *attr)
{
    b_append(b->nodes, sizeof b->nodes,
             "%s{\"name\":\"%s\",\"op\":\"%s\",\"input\":[%s],\"attr\":{%s}}",
             b->n_nodes++ ? "," : "", name, op, inputs ? inputs : "", attr ? attr : "");
}

static void b_bytes(builder *b, const void *p, size_t n)
{
    assert_true(b->bin_len + n <= sizeof b->bin);
    memcpy(b->bin + b->bin_len, p, n);
    b->bin_len += n;
}

static uint16_t half_exact(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (v == 0.0f) return (uint16_t)(bits >> 16);
    uint32_t sign = bits >> 31, exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
    assert_true(exponent >= 113 && exponent <= 142 && (mantissa & 0x1fff) == 0);
    return (uint16_t)(sign << 15 | (exponent - 112) << 10 | mantissa >> 13);
}

static void shape_json(char *out, size_t size, int ndim, const int64_t *shape)
{
    out[0] = '\0';
    for (int d = 0; d < ndim; d++)
        b_append(out, size, "%s%lld", d ? "," : "", (long long)shape[d]);
}

static void b_const_f32(builder *b, const char *name, int ndim, const int64_t *shape,
                        const float *v, bool f16)
{
    char s[128];
    shape_json(s, sizeof s, ndim, shape);
    b_node(b, name, "Const", NULL, "\"dtype\":{\"type\":\"DT_FLOAT\"}");
    b_append(b->weights, sizeof b->weights,
             "%s{\"name\":\"%s\",\"shape\":[%s],\"dtype\":\"float32\"%s}",
             b->n_weights++ ? "," : "", name, s,
             f16 ? ",\"quantization\":{\"dtype\":\"float16\",\"original_dtype\":\"float32\"}" : "");
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        if (f16) {
            uint16_t h = half_exact(v[i]);
            uint8_t le[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
            b_bytes(b, le, 2);
        } else {
            uint32_t bits;
            memcpy(&bits, &v[i], 4);
            uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                             (uint8_t)(bits >> 24)};
            b_bytes(b, le, 4);
        }
    }
}

static void b_const_i32(builder *b, const char *name, int ndim, const int64_t *shape,
                        const int32_t *v)
{
    char s[128];
    shape_json(s, sizeof s, ndim, shape);
    b_node(b, name, "Const", NULL, "\"dtype\":{\"type\":\"DT_INT32\"}");
    b_append(b->weights, sizeof b->weights,
             "%s{\"name\":\"%s\",\"shape\":[%s],\"dtype\":\"int32\"}", b->n_weights++ ? "," : "",
             name, s);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)v[i];
        uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        b_bytes(b, le, 4);
    }
}

static void b_ints(builder *b, const char *name, int n, ...)
{
    int32_t v[16];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        v[i] = va_arg(ap, int);
    va_end(ap);
    int64_t shape[1] = {n};
    b_const_i32(b, name, 1, shape, v);
}

/* The model JSON; outputs: comma-separated signature output names. */
static char *b_json(const builder *b, const char *outputs)
{
    size_t cap = sizeof b->nodes + sizeof b->weights + 4096;
    char *json = calloc(1, cap);
    assert_non_null(json);
    b_append(json, cap,
             "{\"format\":\"graph-model\",\"generatedBy\":\"test\",\"signature\":{"
             "\"inputs\":{\"x:0\":{\"name\":\"x:0\",\"dtype\":\"DT_FLOAT\"}},\"outputs\":{");
    char copy[512];
    snprintf(copy, sizeof copy, "%s", outputs);
    int k = 0;
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
        b_append(json, cap, "%s\"%s:0\":{\"name\":\"%s:0\",\"dtype\":\"DT_FLOAT\"}", k++ ? "," : "",
                 tok, tok);
    b_append(json, cap,
             "}},\"modelTopology\":{\"node\":[%s],\"library\":{},\"versions\":{}},"
             "\"weightsManifest\":[{\"paths\":[\"m.bin\"],\"weights\":[%s]}]}",
             b->nodes, b->weights);
    return json;
}

typedef struct shard {
    const uint8_t *bytes;
    size_t size;
} shard;

static ly_status read_shard(void *user, const char *name, uint8_t **bytes, size_t *size)
{
    const shard *s = user;
    if (strcmp(name, "m.bin") != 0) return LY_E_NOT_FOUND;
    *bytes = malloc(s->size + 1);
    if (!*bytes) return LY_E_NO_MEMORY;
    memcpy(*bytes, s->bytes, s->size);
    *size = s->size;
    return LY_OK;
}

static ly_status parse(const char *json, const uint8_t *bin, size_t bin_len, ly_tfjs_model **m)
{
    shard s = {bin, bin_len};
    return ly_tfjs_parse(json, strlen(json), "test.json", read_shard, &s, m);
}

/* ---- basics ----------------------------------------------------------------- */

static void test_base64_and_half(void **state)
{
    (void)state;
    uint8_t out[16];
    size_t len;
    assert_true(ly_tfjs_base64_decode("TkhXQw==", out, sizeof out, &len));
    assert_int_equal(len, 4);
    assert_memory_equal(out, "NHWC", 4);
    assert_true(ly_tfjs_base64_decode("VkFMSUQ", out, sizeof out, &len)); /* no padding */
    assert_memory_equal(out, "VALID", 5);
    assert_false(ly_tfjs_base64_decode("TkhX*w==", out, sizeof out, &len));
    assert_false(ly_tfjs_base64_decode("TkhXQw==", out, 3, &len)); /* too small */
    assert_false(ly_tfjs_base64_decode("T", out, sizeof out, &len));
    assert_true(ly_tfjs_half_to_float(0x3c00) == 1.0f);
    assert_true(ly_tfjs_half_to_float(0xc000) == -2.0f);
    assert_true(ly_tfjs_half_to_float(0x3555) == 0.333251953125f);
    assert_true(ly_tfjs_half_to_float(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(ly_tfjs_half_to_float(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(ly_tfjs_half_to_float(0x7bff) == 65504.0f);
    assert_true(isinf(ly_tfjs_half_to_float(0xfc00)) && ly_tfjs_half_to_float(0xfc00) < 0);
    assert_true(isnan(ly_tfjs_half_to_float(0x7e00)));
    assert_true(signbit(ly_tfjs_half_to_float(0x8000)));
    /* Every finite half round-trips through our exact encoder. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ly_tfjs_half_to_float((uint16_t)h);
        uint32_t e = (h >> 10) & 0x1f;
        if (e == 0 || e == 31) continue;
        assert_int_equal(half_exact(f), h);
    }
}

static void test_parse_minimal_model(void **state)
{
    (void)state;
    builder *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b_node(b, "x", "Placeholder", NULL,
           "\"dtype\":{\"type\":\"DT_FLOAT\"},\"shape\":{\"shape\":{\"dim\":[{\"size\":\"1\"},"
           "{\"size\":\"2\"}]}}");
    float w[3] = {0.5f, -1.0f, 2.0f};
    int64_t ws[1] = {3};
    b_const_f32(b, "w", 1, ws, w, true);
    b_ints(b, "i", 2, 7, -9);
    b_node(b, "y", "Identity", "\"x\",\"^w\"",
           "\"s\":{\"s\":\"TkhXQw==\"},\"n\":{\"i\":\"42\"},\"f\":{\"f\":0.25},\"b\":{\"b\":true},"
           "\"l\":{\"list\":{\"i\":[\"1\",\"2\",\"2\",\"1\"]}},\"e\":{\"list\":{}},\"empty\":{}");
    char *json = b_json(b, "y");
    ly_tfjs_model *m = NULL;
    assert_int_equal(parse(json, b->bin, b->bin_len, &m), LY_OK);
    assert_int_equal(m->n_nodes, 4);
    assert_int_equal(m->n_weights, 2);
    const ly_tfjs_weight *wt = ly_tfjs_weight_find(m, "w");
    assert_non_null(wt);
    assert_int_equal(wt->dtype, LY_F32);
    assert_true(((float *)wt->data)[2] == 2.0f);
    const ly_tfjs_weight *it = ly_tfjs_weight_find(m, "i");
    assert_int_equal(it->dtype, LY_I32);
    assert_int_equal(((int32_t *)it->data)[1], -9);
    const ly_tfjs_node *y = ly_tfjs_node_find(m, "y");
    assert_non_null(y);
    assert_int_equal(y->n_inputs, 1);
    assert_int_equal(y->n_control, 1);
    assert_string_equal(y->control[0], "w");
    assert_null(ly_tfjs_node_find(m, "nope"));
    char s[16];
    bool present;
    int64_t n;
    double f;
    bool flag;
    int64_t list[8];
    int count;
    assert_int_equal(ly_tfjs_attr_string(m, y, "s", s, sizeof s, &present), LY_OK);
    assert_true(present);
    assert_string_equal(s, "NHWC");
    assert_int_equal(ly_tfjs_attr_int(m, y, "n", &n, &present), LY_OK);
    assert_int_equal(n, 42);
    assert_int_equal(ly_tfjs_attr_float(m, y, "f", &f, &present), LY_OK);
    assert_true(f == 0.25);
    assert_int_equal(ly_tfjs_attr_bool(m, y, "b", &flag, &present), LY_OK);
    assert_true(flag);
    assert_int_equal(ly_tfjs_attr_bool(m, y, "empty", &flag, &present), LY_OK);
    assert_true(present && !flag); /* proto3 JSON drops false */
    assert_int_equal(ly_tfjs_attr_int_list(m, y, "l", list, 8, &count, &present), LY_OK);
    assert_int_equal(count, 4);
    assert_int_equal(list[1], 2);
    assert_int_equal(ly_tfjs_attr_int_list(m, y, "e", list, 8, &count, &present), LY_OK);
    assert_int_equal(count, 0);
    assert_int_equal(ly_tfjs_attr_int(m, y, "absent", &n, &present), LY_OK);
    assert_false(present);
    /* Wrong kinds are errors naming the node and attribute. */
    assert_int_equal(ly_tfjs_attr_int(m, y, "s", &n, &present), LY_OK); /* {"s"} has no "i": 0 */
    assert_int_equal(ly_tfjs_attr_string(m, y, "n", s, sizeof s, &present), LY_OK);
    assert_int_equal(ly_tfjs_attr_int_list(m, y, "l", list, 2, &count, &present), LY_E_FORMAT);
    assert_non_null(strstr(ly_last_error(), "test.json: node 'y' (Identity): attr 'l'"));
    char ref[64];
    int index;
    assert_int_equal(ly_tfjs_split_ref(m, y, "a:3", ref, sizeof ref, &index), LY_OK);
    assert_string_equal(ref, "a");
    assert_int_equal(index, 3);
    assert_int_equal(ly_tfjs_split_ref(m, y, "a:x", ref, sizeof ref, &index), LY_E_FORMAT);
    ly_tfjs_free(m);
    free(json);
    free(b);
}

/* ---- malformed models --------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    const char *json;
    size_t bin_len;
    const char *message; /* a substring of the error */
} bad_case;

static void test_malformed_models(void **state)
{
    (void)state;
#define TOPO(nodes) "\"modelTopology\":{\"node\":[" nodes "]}"
#define MANIFEST(weights) "\"weightsManifest\":[{\"paths\":[\"m.bin\"],\"weights\":[" weights "]}]"
#define CONST(name) "{\"name\":\"" name "\",\"op\":\"Const\"}"
#define W(name, shape, dtype)                                                                      \
    "{\"name\":\"" name "\",\"shape\":[" shape "],\"dtype\":\"" dtype "\"}"
    static const bad_case cases[] = {
        {"not JSON", "{\"format\":", 0, "test.json: not valid JSON"},
        {"an array", "[1,2]", 0, "expected a JSON object"},
        {"layers model", "{\"format\":\"layers-model\"," TOPO("") "}", 0, "'layers-model'"},
        {"no topology", "{\"format\":\"graph-model\"}", 0, "modelTopology"},
        {"nodes not an array", "{\"modelTopology\":{\"node\":{}}}", 0, "modelTopology.node"},
        {"node without name", "{" TOPO("{\"op\":\"Const\"}") "}", 0, "node[0]: \"name\""},
        {"node without op", "{" TOPO("{\"name\":\"a\"}") "}", 0, "node 'a': \"op\""},
        {"duplicate node",
         "{" TOPO(CONST("a") "," CONST("a")) "," MANIFEST(W("a", "1", "int32")) "}", 4,
         "node 'a' is defined twice"},
        {"unknown input", "{" TOPO("{\"name\":\"b\",\"op\":\"Identity\",\"input\":[\"zz\"]}") "}",
         0, "node 'b': input 'zz' names no node"},
        {"bad output index",
         "{" TOPO(CONST("a") ",{\"name\":\"b\",\"op\":\"Identity\",\"input\":[\"a:q\"]"
                             "}") "," MANIFEST(W("a", "1", "int32")) "}",
         4, "node 'b': input 'a:q': bad output index"},
        {"input not a string", "{" TOPO("{\"name\":\"b\",\"op\":\"Identity\",\"input\":[3]}") "}",
         0, "node 'b': input 0"},
        {"attr not an object", "{" TOPO("{\"name\":\"b\",\"op\":\"X\",\"attr\":[]}") "}", 0,
         "node 'b': \"attr\""},
        {"const without weights", "{" TOPO(CONST("a")) "}", 0,
         "node 'a': Const without an entry in weightsManifest"},
        {"shard too short", "{" TOPO(CONST("a")) "," MANIFEST(W("a", "2,3", "float32")) "}", 20,
         "weights[0] 'a': needs 24 bytes at offset 0, but the shards (m.bin) hold 20"},
        {"shard too long", "{" TOPO(CONST("a")) "," MANIFEST(W("a", "2", "int32")) "}", 9,
         "the 1 weights take 8 bytes, but the shards (m.bin) hold 9"},
        {"string weights", "{" TOPO(CONST("a")) "," MANIFEST(W("a", "1", "string")) "}", 4,
         "dtype 'string' is not supported"},
        {"negative size", "{" TOPO(CONST("a")) "," MANIFEST(W("a", "-1", "int32")) "}", 0,
         "'a': \"shape\""},
        {"fractional size", "{" TOPO(CONST("a")) "," MANIFEST(W("a", "1.5", "int32")) "}", 0,
         "'a': \"shape\""},
        {"huge shape",
         "{" TOPO(CONST("a")) "," MANIFEST(W("a", "100000,100000,100000", "int32")) "}", 0,
         "'a': \"shape\""},
        {"int8 quantisation",
         "{" TOPO(CONST("a")) "," MANIFEST("{\"name\":\"a\",\"shape\":[1],\"dtype\":\"float32\","
                                           "\"quantization\":{\"dtype\":\"int8\"}}") "}",
         1, "quantization dtype 'int8'"},
        {"affine quantisation without scale",
         "{" TOPO(CONST("a")) "," MANIFEST("{\"name\":\"a\",\"shape\":[1],\"dtype\":\"float32\","
                                           "\"quantization\":{\"dtype\":\"uint8\",\"min\":0}}") "}",
         1, "\"scale\" and \"min\""},
        {"escaping shard path",
         "{" TOPO("") ",\"weightsManifest\":[{\"paths\":[\"../m.bin\"],\"weights\":[]}]}", 0,
         "weightsManifest[0].paths"},
        {"absolute shard path",
         "{" TOPO("") ",\"weightsManifest\":[{\"paths\":[\"/etc/passwd\"],\"weights\":[]}]}", 0,
         "weightsManifest[0].paths"},
        {"no shard paths", "{" TOPO("") ",\"weightsManifest\":[{\"paths\":[],\"weights\":[]}]}", 0,
         "weightsManifest[0].paths"},
        {"duplicate weight",
         "{" TOPO(CONST("a")) "," MANIFEST(W("a", "1", "int32") "," W("a", "1", "int32")) "}", 8,
         "weight 'a' is listed twice"},
        {"weight without name",
         "{" TOPO("") "," MANIFEST("{\"shape\":[1],\"dtype\":\"int32\"}") "}", 4,
         "weights[0]: expected an object with a non-empty \"name\""},
        {"signature outputs not an object", "{" TOPO("") ",\"signature\":{\"outputs\":[]}}", 0,
         "signature.outputs"},
        {"signature dim not a size",
         "{" TOPO("") ",\"signature\":{\"inputs\":{\"x\":{\"tensorShape\":{\"dim\":[{"
                      "\"size\":\"a\"}"
                      "]}}}}}",
         0, "signature.inputs 'x': tensorShape.dim[0]"},
    };
#undef TOPO
#undef MANIFEST
#undef CONST
#undef W
    uint8_t zeros[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ly_tfjs_model *m = (ly_tfjs_model *)1;
        ly_status st = parse(cases[i].json, zeros, cases[i].bin_len, &m);
        if (st != LY_E_FORMAT || m != NULL || !strstr(ly_last_error(), cases[i].message) ||
            !strstr(ly_last_error(), "test.json"))
            fail_msg("%s: got %s, '%s'; expected LY_E_FORMAT with '%s'", cases[i].what,
                     ly_status_name(st), ly_last_error(), cases[i].message);
    }
}

/* ---- lowering a synthetic graph ------------------------------------------------- */

static uint64_t rng = 12345;

/* Multiples of 1/64 in [-1, 1]: exact in float16. */
static float small_value(void)
{
    return (float)((int)(ly_test_splitmix64(&rng) % 129) - 64) / 64.0f;
}

static void fill(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = small_value();
}

/* Naive references in double, NCHW, batch 1. */
static void ref_conv(const double *x, int c, int h, int w, const float *hwio, int kh, int kw,
                     int cin_group, int o, int groups, int mult, const float *bias, int pad,
                     int stride, double *y, int *ho, int *wo)
{
    *ho = (h + 2 * pad - kh) / stride + 1;
    *wo = (w + 2 * pad - kw) / stride + 1;
    int og = o / groups;
    for (int oc = 0; oc < o; oc++)
        for (int oy = 0; oy < *ho; oy++)
            for (int ox = 0; ox < *wo; ox++) {
                double acc = bias ? bias[oc] : 0.0;
                int g = oc / og;
                for (int ci = 0; ci < cin_group; ci++)
                    for (int ky = 0; ky < kh; ky++)
                        for (int kx = 0; kx < kw; kx++) {
                            int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                            int in_c = g * cin_group + ci;
                            /* depthwise: filter [kh, kw, C, mult], o = c * mult + m */
                            float wv = mult ? hwio[((ky * kw + kx) * c + in_c) * mult + oc % mult]
                                            : hwio[((ky * kw + kx) * cin_group + ci) * o + oc];
                            acc += x[(in_c * h + iy) * w + ix] * wv;
                        }
                y[(oc * *ho + oy) * *wo + ox] = acc;
            }
}

static double ref_bilinear_src(int d, int in, int out)
{
    double s = ((double)d + 0.5) * in / out - 0.5;
    return s < 0 ? 0 : s;
}

static void ref_resize(const double *x, int c, int h, int w, int ho, int wo, double *y)
{
    for (int ch = 0; ch < c; ch++)
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                double sy = ref_bilinear_src(oy, h, ho), sx = ref_bilinear_src(ox, w, wo);
                int y0 = (int)sy, x0 = (int)sx;
                int y1 = y0 < h - 1 ? y0 + 1 : y0, x1 = x0 < w - 1 ? x0 + 1 : x0;
                double ly = sy - y0, lx = sx - x0;
                const double *p = x + ch * h * w;
                y[(ch * ho + oy) * wo + ox] =
                    (1 - ly) * ((1 - lx) * p[y0 * w + x0] + lx * p[y0 * w + x1]) +
                    ly * ((1 - lx) * p[y1 * w + x0] + lx * p[y1 * w + x1]);
            }
}

typedef struct mini {
    builder b;
    float x[4 * 8 * 8];
    float w0[3 * 3 * 4 * 6], b0[6], w2[3 * 3 * 6 * 6], b2[6], w3[12 * 5], b3[5], wd[3 * 3 * 6],
        bd[6];
    double out0[64 * 3], out1[64 * 2], out2[6 * 64];
} mini;

static const char *NHWC = "\"data_format\":{\"s\":\"TkhXQw==\"}";

static void conv_node(builder *b, const char *name, const char *in, const char *filter,
                      const char *padding)
{
    char attr[256], inputs[128];
    snprintf(attr, sizeof attr,
             "%s,\"padding\":{\"s\":\"%s\"},\"strides\":{\"list\":{\"i\":[\"1\",\"1\",\"1\","
             "\"1\"]}},\"dilations\":{\"list\":{\"i\":[\"1\",\"1\",\"1\",\"1\"]}},"
             "\"explicit_paddings\":{\"list\":{}}",
             NHWC, padding);
    snprintf(inputs, sizeof inputs, "\"%s\",\"%s\"", in, filter);
    b_node(b, name, "Conv2D", inputs, attr);
}

/* The graph of the file comment, with its expected outputs. `variant`
 * replaces one piece to make an unsupported model (0: none). */
static void build_mini(mini *t, int variant)
{
    builder *b = &t->b;
    memset(b, 0, sizeof *b);
    rng = 12345;
    fill(t->x, 4 * 8 * 8);
    fill(t->w0, 3 * 3 * 4 * 6);
    fill(t->b0, 6);
    fill(t->w2, 3 * 3 * 6 * 6);
    fill(t->b2, 6);
    fill(t->w3, 12 * 5);
    fill(t->b3, 5);
    fill(t->wd, 3 * 3 * 6);
    fill(t->bd, 6);
    b_node(b, "x", "Placeholder", NULL,
           "\"dtype\":{\"type\":\"DT_FLOAT\"},\"shape\":{\"shape\":{\"dim\":[{\"size\":\"-1\"},"
           "{\"size\":\"4\"},{\"size\":\"8\"},{\"size\":\"8\"}]}}");
    b_ints(b, "pads", 8, 0, 0, 0, 0, 1, 1, 1, 1);
    b_ints(b, "pads_asym", 8, 0, 0, 0, 0, 0, 1, 0, 1);
    b_ints(b, "to_nhwc", 4, 0, 2, 3, 1);
    b_ints(b, "to_nchw", 4, 0, 3, 1, 2);
    int64_t s_w0[4] = {3, 3, 4, 6}, s6[1] = {6}, s_w2[4] = {3, 3, 6, 6}, s_w3[4] = {1, 1, 12, 5},
            s5[1] = {5}, s_wd[4] = {3, 3, 6, 1}, s1[1] = {1};
    b_const_f32(b, "w0", 4, s_w0, t->w0, true);
    b_const_f32(b, "b0", 1, s6, t->b0, false);
    b_const_f32(b, "w2", 4, s_w2, t->w2, true);
    b_const_f32(b, "b2", 1, s6, t->b2, true);
    b_const_f32(b, "w3", 4, s_w3, t->w3, false);
    b_const_f32(b, "b3", 1, s5, t->b3, false);
    b_const_f32(b, "wd", 4, s_wd, t->wd, true);
    b_const_f32(b, "bd", 1, s6, t->bd, false);
    float neg_inf = -INFINITY;
    b_const_f32(b, "minus_inf", 1, s1, &neg_inf, false);
    b_ints(b, "size8", 2, 8, 8);
    b_ints(b, "axis1", 1, 1);
    b_ints(b, "splits", 2, 3, 2);
    b_ints(b, "shape3", 3, 1, 3, -1);
    b_ints(b, "shape2", 3, 1, 2, -1);
    b_ints(b, "perm021", 3, 0, 2, 1);
    /* SparseToDense(empty indices, [3], [], 0) -> zeros[3], as onnx-tf writes it. */
    int64_t s01[2] = {0, 1}, s_empty[1] = {0}, sc[1] = {0};
    b_const_i32(b, "where", 2, s01, NULL);
    b_ints(b, "three", 1, 3);
    b_const_i32(b, "novalues", 1, s_empty, NULL);
    int32_t zero = 0;
    b_const_i32(b, "zero", 0, sc, &zero);
    b_node(b, "std", "SparseToDense", "\"where\",\"three\",\"novalues\",\"zero\"",
           "\"validate_indices\":{\"b\":true}");
    b_node(b, "shape3z", "AddV2", "\"shape3\",\"std\"", NULL);

    /* conv0: Pad -> NHWC -> Conv2D 3x3 -> bias -> NCHW -> LeakyRelu(0.1) */
    b_node(b, "p0", "Pad", variant == 2 ? "\"x\",\"pads_asym\"" : "\"x\",\"pads\"", NULL);
    b_node(b, "t0", "Transpose", "\"p0\",\"to_nhwc\"", NULL);
    conv_node(b, "c0", "t0", "w0", "VkFMSUQ=");
    b_node(b, "a0", "Add", "\"c0\",\"b0\"", NULL);
    b_node(b, "t1", "Transpose", "\"a0\",\"to_nchw\"", NULL);
    b_node(b, "l0", variant == 1 ? "Elu" : "LeakyRelu", "\"t1\"", "\"alpha\":{\"f\":0.1}");
    /* stem pool: PadV2(-inf) -> MaxPool 3x3 /2 */
    b_node(b, "pp", "PadV2", "\"l0\",\"pads\",\"minus_inf\"", NULL);
    b_node(b, "tp", "Transpose", "\"pp\",\"to_nhwc\"", NULL);
    b_node(b, "mp", "MaxPool", "\"tp\"",
           "\"data_format\":{\"s\":\"TkhXQw==\"},\"padding\":{\"s\":\"VkFMSUQ=\"},\"ksize\":{"
           "\"list\":{\"i\":[\"1\",\"3\",\"3\",\"1\"]}},\"strides\":{\"list\":{\"i\":[\"1\",\"2\","
           "\"2\",\"1\"]}}");
    /* up: bilinear 4 -> 8 on NHWC, back to NCHW, plain Add with l0 */
    b_node(b, "r0", "ResizeBilinear", "\"mp\",\"size8\"",
           "\"align_corners\":{\"b\":false},\"half_pixel_centers\":{\"b\":true}");
    b_node(b, "tr", "Transpose", "\"r0\",\"to_nchw\"", NULL);
    b_node(b, "s0", "Add", variant == 3 ? "\"l0\",\"mp\"" : "\"l0\",\"tr\"", NULL);
    /* conv2 with l0 as residual */
    b_node(b, "p2", "Pad", "\"s0\",\"pads\"", NULL);
    b_node(b, "t2", "Transpose", "\"p2\",\"to_nhwc\"", NULL);
    conv_node(b, "c2", "t2", "w2", "VkFMSUQ=");
    b_node(b, "a2", "Add", "\"c2\",\"b2\"", NULL);
    b_node(b, "t3", "Transpose", "\"a2\",\"to_nchw\"", NULL);
    b_node(b, "res", "Add", "\"t3\",\"l0\"", NULL);
    b_node(b, "cat", "ConcatV2",
           variant == 4 ? "\"res\",\"l0\",\"pads\"" : "\"res\",\"l0\",\"axis1\"",
           "\"N\":{\"i\":\"2\"}");
    /* head 1x1 12 -> 5, split 3 + 2, sigmoid, reshape, [0,2,1] */
    b_node(b, "th", "Transpose", "\"cat\",\"to_nhwc\"", NULL);
    conv_node(b, "c3", "th", "w3", "VkFMSUQ=");
    b_node(b, "a3", "Add", "\"c3\",\"b3\"", NULL);
    b_node(b, "t4", "Transpose", "\"a3\",\"to_nchw\"", NULL);
    b_node(b, "sp", "SplitV", "\"t4\",\"splits\",\"axis1\"", "\"num_split\":{\"i\":\"2\"}");
    b_node(b, "sg", "Sigmoid", "\"sp\"", NULL);
    b_node(b, "rs", "Reshape", "\"sg\",\"shape3z\"", NULL);
    b_node(b, "o0", "Transpose", "\"rs\",\"perm021\"", NULL);
    b_node(b, "Identity", "Identity", "\"o0\"", NULL);
    b_node(b, "rs1", "Reshape", "\"sp:1\",\"shape2\"", NULL);
    b_node(b, "o1", "Transpose", "\"rs1\",\"perm021\"", NULL);
    b_node(b, "Identity_1", "Identity", "\"o1\"", NULL);
    /* depthwise 3x3 SAME, BiasAdd, Relu, NCHW out */
    b_node(b, "td", "Transpose", "\"s0\",\"to_nhwc\"", NULL);
    b_node(b, "dw", "DepthwiseConv2dNative", "\"td\",\"wd\"",
           "\"data_format\":{\"s\":\"TkhXQw==\"},\"padding\":{\"s\":\"U0FNRQ==\"},\"strides\":{"
           "\"list\":{\"i\":[\"1\",\"1\",\"1\",\"1\"]}}");
    b_node(b, "ba", "BiasAdd", "\"dw\",\"bd\"", "\"data_format\":{\"s\":\"TkhXQw==\"}");
    b_node(b, "rl", "Relu", "\"ba\"", NULL);
    b_node(b, "to", "Transpose", "\"rl\",\"to_nchw\"", NULL);
    b_node(b, "Identity_2", "Identity", "\"to\"", NULL);

    /* Expected outputs. */
    double x[4 * 64], l0[6 * 64], mp[6 * 16], up[6 * 64], s0[6 * 64], c2[6 * 64], cat[12 * 64],
        head[5 * 64], dw[6 * 64];
    int ho, wo;
    for (int i = 0; i < 4 * 64; i++)
        x[i] = t->x[i];
    ref_conv(x, 4, 8, 8, t->w0, 3, 3, 4, 6, 1, 0, t->b0, 1, 1, l0, &ho, &wo);
    for (int i = 0; i < 6 * 64; i++)
        l0[i] = l0[i] < 0 ? l0[i] * (double)0.1f : l0[i];
    for (int c = 0; c < 6; c++)
        for (int oy = 0; oy < 4; oy++)
            for (int ox = 0; ox < 4; ox++) {
                double best = -INFINITY;
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        int iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
                        if (iy >= 0 && iy < 8 && ix >= 0 && ix < 8)
                            best = fmax(best, l0[(c * 8 + iy) * 8 + ix]);
                    }
                mp[(c * 4 + oy) * 4 + ox] = best;
            }
    ref_resize(mp, 6, 4, 4, 8, 8, up);
    for (int i = 0; i < 6 * 64; i++)
        s0[i] = l0[i] + up[i];
    ref_conv(s0, 6, 8, 8, t->w2, 3, 3, 6, 6, 1, 0, t->b2, 1, 1, c2, &ho, &wo);
    for (int i = 0; i < 6 * 64; i++) {
        cat[i] = c2[i] + l0[i];
        cat[6 * 64 + i] = l0[i];
    }
    ref_conv(cat, 12, 8, 8, t->w3, 1, 1, 12, 5, 1, 0, t->b3, 0, 1, head, &ho, &wo);
    for (int p = 0; p < 64; p++) {
        for (int k = 0; k < 3; k++)
            t->out0[p * 3 + k] = 1.0 / (1.0 + exp(-head[k * 64 + p]));
        for (int k = 0; k < 2; k++)
            t->out1[p * 2 + k] = head[(3 + k) * 64 + p];
    }
    ref_conv(s0, 6, 8, 8, t->wd, 3, 3, 1, 6, 6, 1, t->bd, 1, 1, dw, &ho, &wo);
    for (int i = 0; i < 6 * 64; i++)
        t->out2[i] = dw[i] > 0 ? dw[i] : 0;
}

static void expect_close(const char *what, const float *got, const double *want, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
    }
    if (!(worst <= 1e-4)) fail_msg("%s: max |diff| %g > 1e-4", what, worst);
}

static void run_mini(ly_graph *g, const mini *t)
{
    int64_t shape[4] = {1, 4, 8, 8};
    ly_tensor in;
    assert_int_equal(ly_tensor_init(&in, (void *)t->x, LY_F32, 4, shape), LY_OK);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    ly_status st = ly_graph_run(ctx, 1, &in, 1);
    if (st != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_output_count(g), 3);
    static const char *names[3] = {"Identity", "Identity_1", "Identity_2"};
    static const int64_t shapes[3][4] = {{1, 64, 3, 0}, {1, 64, 2, 0}, {1, 6, 8, 8}};
    const double *want[3] = {t->out0, t->out1, t->out2};
    for (int i = 0; i < 3; i++) {
        ly_tensor out;
        const char *name;
        assert_int_equal(ly_graph_get_output(ctx, i, &out, &name), LY_OK);
        assert_string_equal(name, names[i]);
        assert_int_equal(out.ndim, i == 2 ? 4 : 3);
        for (int d = 0; d < out.ndim; d++)
            assert_int_equal(out.shape[d], shapes[i][d]);
        expect_close(name, out.data, want[i], ly_tensor_numel(&out));
    }
    ly_graph_ctx_free(ctx);
}

static ly_status lower_mini(mini *t, int variant, ly_graph **g)
{
    build_mini(t, variant);
    char *json = b_json(&t->b, "Identity_2,Identity,Identity_1");
    ly_tfjs_model *m = NULL;
    ly_status st = parse(json, t->b.bin, t->b.bin_len, &m);
    free(json);
    if (st != LY_OK) fail_msg("parse: %s", ly_last_error());
    st = ly_tfjs_lower(m, g);
    ly_tfjs_free(m);
    return st;
}

static void test_lower_synthetic_graph(void **state)
{
    (void)state;
    mini *t = calloc(1, sizeof *t);
    assert_non_null(t);
    ly_graph *g = NULL;
    ly_status st = lower_mini(t, 0, &g);
    if (st != LY_OK) fail_msg("lower: %s", ly_last_error());
    /* Folding: 4 convs, no standalone bias or activation nodes. */
    int convs = 0, adds = 0, transposes = 0;
    for (int i = 0; i < ly_graph_node_count(g); i++) {
        ly_graph_node_info info;
        assert_int_equal(ly_graph_node_at(g, i, &info), LY_OK);
        convs += info.op == LY_OP_CONV2D;
        adds += info.op == LY_OP_ADD;
        transposes += info.op == LY_OP_PERMUTE;
        const ly_conv2d_params *conv = info.params;
        if (info.op == LY_OP_CONV2D && strcmp(info.name, "c0") == 0) {
            assert_int_equal(conv->activation, LY_ACT_LEAKY_RELU);
            assert_true(fabs(conv->alpha - 0.1) < 1e-7);
            assert_int_equal(conv->padding[0], 1);
        }
        if (info.op == LY_OP_CONV2D && strcmp(info.name, "c2") == 0)
            assert_true(info.n_inputs > 3 && info.inputs[3] != LY_GRAPH_NONE);
    }
    assert_int_equal(convs, 4);
    assert_int_equal(adds, 1);       /* l0 + up: l0 has other readers */
    assert_int_equal(transposes, 2); /* only the two [0, 2, 1] outputs move data */
    setenv("LIBREYOLO_KERNELS", "reference", 1);
    run_mini(g, t);
    unsetenv("LIBREYOLO_KERNELS");
    run_mini(g, t);
    ly_graph_free(g);
    free(t);
}

static void test_lower_refuses_what_it_cannot_run(void **state)
{
    (void)state;
    static const struct {
        int variant;
        const char *message;
    } cases[] = {
        {1, "node 'l0' (Elu): op 'Elu' is not supported"},
        {2, "node 'c0' (Conv2D): asymmetric padding (0 before, 1 after) along height"},
        {3, "node 's0' (Add): adding tensors of shapes [1, 6, 8, 8] and [1, 4, 4, 6]"},
        {4, "node 'cat' (ConcatV2): axis (input 2)"},
    };
    mini *t = calloc(1, sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ly_graph *g = (ly_graph *)1;
        ly_status st = lower_mini(t, cases[i].variant, &g);
        if (st == LY_OK) fail_msg("variant %d lowered", cases[i].variant);
        assert_null(g);
        if (!strstr(ly_last_error(), cases[i].message) || !strstr(ly_last_error(), "test.json"))
            fail_msg("variant %d: '%s', expected '%s'", cases[i].variant, ly_last_error(),
                     cases[i].message);
    }
    free(t);
}

/* ---- fuzz --------------------------------------------------------------------------- */

static void test_fuzz_json_and_shard(void **state)
{
    (void)state;
    mini *t = calloc(1, sizeof *t);
    assert_non_null(t);
    build_mini(t, 0);
    char *json = b_json(&t->b, "Identity,Identity_1,Identity_2");
    size_t len = strlen(json);
    char *mutated = malloc(len + 64);
    /* LY_TEST_FUZZ_ITERATIONS / LY_TEST_FUZZ_SEED: longer or other runs by hand. */
    const char *env = getenv("LY_TEST_FUZZ_ITERATIONS");
    int iterations = env && atoi(env) > 0 ? atoi(env) : 400;
    env = getenv("LY_TEST_FUZZ_SEED");
    uint8_t *bin = malloc(t->b.bin_len + 16);
    assert_non_null(mutated);
    assert_non_null(bin);
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : 0xfeed;
    static const char alphabet[] = "{}[]\":,0123456789-.eE tfnulabcxyzIN\\";
    int parsed = 0, lowered = 0;
    for (int iter = 0; iter < iterations; iter++) {
        memcpy(mutated, json, len + 1);
        size_t n = len;
        int edits = 1 + (int)(ly_test_splitmix64(&seed) % 4);
        if (n + edits + 1 > len + 64) edits = 0;
        for (int e = 0; e < edits && n > 0; e++) {
            uint64_t r = ly_test_splitmix64(&seed);
            size_t at = (size_t)(r >> 8) % n;
            switch (r % 5) {
            case 0: /* replace a byte */
                mutated[at] = alphabet[(r >> 40) % (sizeof alphabet - 1)];
                break;
            case 1: /* delete a byte */
                memmove(mutated + at, mutated + at + 1, n - at);
                n--;
                break;
            case 2: /* truncate */
                if (iter % 7 == 0) n = at, mutated[n] = '\0';
                break;
            case 3: /* a digit becomes another */
                if (mutated[at] >= '0' && mutated[at] <= '9')
                    mutated[at] = (char)('0' + (r >> 33) % 10);
                break;
            default: /* insert a byte */
                memmove(mutated + at + 1, mutated + at, n - at + 1);
                mutated[at] = alphabet[(r >> 40) % (sizeof alphabet - 1)];
                n++;
                break;
            }
        }
        size_t bin_len = t->b.bin_len;
        memcpy(bin, t->b.bin, bin_len);
        if (iter % 5 == 0) bin_len -= (size_t)(ly_test_splitmix64(&seed) % 3);
        ly_tfjs_model *m = NULL;
        shard s = {bin, bin_len};
        ly_status st = ly_tfjs_parse(mutated, n, "fuzz.json", read_shard, &s, &m);
        if (st != LY_OK) {
            assert_null(m);
            assert_non_null(strstr(ly_last_error(), "fuzz.json"));
            continue;
        }
        parsed++;
        ly_graph *g = NULL;
        st = ly_tfjs_lower(m, &g);
        if (st == LY_OK) {
            lowered++;
            int64_t shape[4] = {1, 4, 8, 8};
            ly_tensor in;
            ly_tensor_init(&in, t->x, LY_F32, 4, shape);
            ly_graph_ctx *ctx = NULL;
            /* A mutated graph may not plan: no crash. */
            if (ly_graph_ctx_create(g, &ctx) == LY_OK) (void)ly_graph_prepare(ctx, 1, &in, 1);
            ly_graph_ctx_free(ctx);
            ly_graph_free(g);
        } else {
            assert_null(g);
            assert_true(strlen(ly_last_error()) > 0);
        }
        ly_tfjs_free(m);
    }
    /* The mutations hit both the parser and the lowering. */
    assert_true(parsed > 10);
    assert_true(lowered > 0);
    free(mutated);
    free(bin);
    free(json);
    free(t);
}

/* ---- the real model ---------------------------------------------------------------- */

static bool nanodet_json(char *out, size_t size)
{
    const char *dir = getenv("LIBREYOLO_NANODET_DIR");
    char cached[4096];
    bool present = false;
    if (!dir || !*dir) {
        if (ly_model_cached("nanodet", cached, sizeof cached, &present) != LY_OK || !present)
            return false;
        dir = cached;
    }
    snprintf(out, size, "%s/nanodet.json", dir);
    struct stat st;
    return stat(out, &st) == 0;
}

static void test_real_nanodet_model(void **state)
{
    (void)state;
    char path[4200];
    if (!nanodet_json(path, sizeof path)) {
        print_message("skipped: no NanoDet model (set LIBREYOLO_NANODET_DIR or run `libreyolo "
                      "fetch nanodet`)\n");
        skip();
    }
    ly_tfjs_model *m = NULL;
    if (ly_tfjs_load(path, &m) != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(m->n_nodes, 489);
    assert_int_equal(m->n_weights, 229);
    assert_int_equal(m->n_outputs, 6);
    int64_t params = 0;
    int floats = 0, convs = 0;
    for (size_t i = 0; i < m->n_weights; i++)
        if (m->weights[i].dtype == LY_F32) {
            floats++;
            int64_t n = 1;
            for (int d = 0; d < m->weights[i].ndim; d++)
                n *= m->weights[i].shape[d];
            params += n;
        }
    for (size_t i = 0; i < m->n_nodes; i++)
        convs += strcmp(m->nodes[i].op, "Conv2D") == 0;
    assert_int_equal(floats, 69);
    assert_int_equal(convs, 34);
    /* 3,786,068 network parameters plus PadV2's -inf. */
    assert_int_equal(params, 3786068 + 1);
    ly_graph *g = NULL;
    if (ly_tfjs_lower(m, &g) != LY_OK) fail_msg("%s", ly_last_error());
    int conv_nodes = 0;
    for (int i = 0; i < ly_graph_node_count(g); i++) {
        ly_graph_node_info info;
        ly_graph_node_at(g, i, &info);
        conv_nodes += info.op == LY_OP_CONV2D;
    }
    assert_int_equal(conv_nodes, 34);
    ly_graph_free(g);
    ly_tfjs_free(m);

    /* The same JSON with a shard one byte short. */
    char dir[4096], json_copy[4300], bin_copy[4300], bin_path[4300];
    snprintf(dir, sizeof dir, "%s", ly_test_scratch());
    snprintf(json_copy, sizeof json_copy, "%s/nanodet.json", dir);
    snprintf(bin_copy, sizeof bin_copy, "%s/nanodet.bin", dir);
    snprintf(bin_path, sizeof bin_path, "%.*s/nanodet.bin", (int)(strlen(path) - 13), path);
    FILE *in = fopen(path, "rb"), *out = fopen(json_copy, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, got, out), got);
    fclose(in);
    fclose(out);
    in = fopen(bin_path, "rb");
    out = fopen(bin_copy, "wb");
    assert_non_null(in);
    assert_non_null(out);
    size_t total = 0;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) {
        assert_int_equal(fwrite(buf, 1, got, out), got);
        total += got;
    }
    fclose(in);
    fclose(out);
    assert_int_equal(truncate(bin_copy, (off_t)total - 1), 0);
    assert_int_equal(ly_tfjs_load(json_copy, &m), LY_E_FORMAT);
    assert_non_null(strstr(ly_last_error(), "hold 7574557 bytes in all"));
    assert_int_equal(unlink(bin_copy), 0);
    assert_int_equal(ly_tfjs_load(json_copy, &m), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "nanodet.bin"));
    unlink(json_copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_and_half),
        cmocka_unit_test(test_parse_minimal_model),
        cmocka_unit_test(test_malformed_models),
        cmocka_unit_test(test_lower_synthetic_graph),
        cmocka_unit_test(test_lower_refuses_what_it_cannot_run),
        cmocka_unit_test(test_fuzz_json_and_shard),
        cmocka_unit_test(test_real_nanodet_model),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
