/* SPDX-License-Identifier: MIT */
/*
 * TF.js graph-model reader (tfjs.h). The JSON is parsed by cJSON and kept for
 * the model's life: nodes and signature entries point into it.
 */
#include "importers/tfjs/tfjs.h"

#include "core/checked.h"
#include "core/core.h"
#include "core/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bigger JSON files are not models (NanoDet-g's is 120 KB). */
#define MAX_JSON_BYTES ((size_t)64 << 20)
#define MAX_SHARD_BYTES ((size_t)4 << 30)

/* ---- small helpers ------------------------------------------------------ */

float ly_tfjs_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu,
             mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int shift = 0;
            while (!(mantissa & 0x400u)) {
                mantissa <<= 1;
                shift++;
            }
            mantissa &= 0x3ffu;
            bits = sign | ((uint32_t)(113 - shift) << 23) | (mantissa << 13);
        }
    } else if (exponent == 31) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

bool ly_tfjs_base64_decode(const char *in, uint8_t *out, size_t size, size_t *len)
{
    size_t n = strlen(in);
    while (n > 0 && in[n - 1] == '=')
        n--;
    if (n % 4 == 1) return false;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = base64_value(in[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= size) return false;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1u;
        }
    }
    *len = o;
    return true;
}

/* Lookups by name are binary searches over indices sorted by name. */
typedef struct named_index {
    const char *name;
    size_t index;
} named_index;

static int by_name(const void *a, const void *b)
{
    const named_index *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Sorted order of `count` names (NULL + error on failure); *duplicate gets the
 * first repeated name, if any. */
static size_t *sort_names(const char *const *names, size_t count, const char **duplicate)
{
    named_index *tmp = malloc((count ? count : 1) * sizeof *tmp);
    size_t *order = malloc((count ? count : 1) * sizeof *order);
    if (!tmp || !order) {
        free(tmp);
        free(order);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        tmp[i] = (named_index){names[i], i};
    qsort(tmp, count, sizeof *tmp, by_name);
    *duplicate = NULL;
    for (size_t i = 0; i < count; i++) {
        order[i] = tmp[i].index;
        if (i > 0 && !*duplicate && strcmp(tmp[i].name, tmp[i - 1].name) == 0)
            *duplicate = tmp[i].name;
    }
    free(tmp);
    return order;
}

/* ---- JSON field access with messages ------------------------------------- */

static bool json_float(const cJSON *item, double *out)
{
    if (cJSON_IsNumber(item)) {
        *out = item->valuedouble;
        return true;
    }
    if (cJSON_IsString(item) && item->valuestring) {
        const char *s = item->valuestring;
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-Infinity") == 0)
            *out = -INFINITY;
        else
            return false;
        return true;
    }
    return false;
}

static const char *json_string(const cJSON *object, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) && item->valuestring ? item->valuestring : NULL;
}

/* ---- the model ------------------------------------------------------------ */

void ly_tfjs_free(ly_tfjs_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_weights; i++)
        free(m->weights[i].data);
    for (size_t i = 0; i < m->n_nodes; i++) {
        free(m->nodes[i].inputs);
        free(m->nodes[i].control);
    }
    free(m->weights);
    free(m->nodes);
    free(m->inputs);
    free(m->outputs);
    free(m->node_order);
    free(m->weight_order);
    cJSON_Delete(m->root);
    free(m->path);
    free(m);
}

static ly_status fmt_error(const ly_tfjs_model *m, const char *fmt, ...) LY_PRINTF(2, 3);
static ly_status fmt_error(const ly_tfjs_model *m, const char *fmt, ...)
{
    char message[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return ly_set_error(LY_E_FORMAT, "%s: %s", m->path, message);
}

static ly_status no_memory(const ly_tfjs_model *m)
{
    return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->path);
}

static ly_status parse_nodes(ly_tfjs_model *m, const cJSON *topology)
{
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(topology, "node");
    if (!cJSON_IsArray(nodes))
        return fmt_error(m, "modelTopology.node: expected an array of nodes");
    size_t count = (size_t)cJSON_GetArraySize(nodes);
    m->nodes = calloc(count ? count : 1, sizeof *m->nodes);
    if (!m->nodes) return no_memory(m);
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, nodes)
    {
        ly_tfjs_node *n = &m->nodes[i];
        m->n_nodes = ++i;
        if (!cJSON_IsObject(item))
            return fmt_error(m, "modelTopology.node[%zu]: expected an object", i - 1);
        n->name = json_string(item, "name");
        n->op = json_string(item, "op");
        if (!n->name || !*n->name)
            return fmt_error(m, "modelTopology.node[%zu]: \"name\": expected a non-empty string",
                             i - 1);
        if (!n->op || !*n->op)
            return fmt_error(m, "node '%s': \"op\": expected a non-empty string", n->name);
        const cJSON *attr = cJSON_GetObjectItemCaseSensitive(item, "attr");
        if (attr && !cJSON_IsObject(attr))
            return fmt_error(m, "node '%s': \"attr\": expected an object", n->name);
        n->attr = attr;
        const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(item, "input");
        if (inputs && !cJSON_IsArray(inputs))
            return fmt_error(m, "node '%s': \"input\": expected an array of strings", n->name);
        int total = inputs ? cJSON_GetArraySize(inputs) : 0;
        n->inputs = calloc((size_t)total + 1, sizeof *n->inputs);
        n->control = calloc((size_t)total + 1, sizeof *n->control);
        if (!n->inputs || !n->control) return no_memory(m);
        const cJSON *in;
        int k = 0;
        cJSON_ArrayForEach(in, inputs)
        {
            if (!cJSON_IsString(in) || !in->valuestring || !*in->valuestring)
                return fmt_error(m, "node '%s': input %d: expected a non-empty string", n->name, k);
            if (in->valuestring[0] == '^')
                n->control[n->n_control++] = in->valuestring + 1;
            else
                n->inputs[n->n_inputs++] = in->valuestring;
            k++;
        }
    }
    const char **names = malloc((count ? count : 1) * sizeof *names);
    if (!names) return no_memory(m);
    for (size_t j = 0; j < count; j++)
        names[j] = m->nodes[j].name;
    const char *duplicate = NULL;
    m->node_order = sort_names(names, count, &duplicate);
    free(names);
    if (!m->node_order) return no_memory(m);
    if (duplicate) return fmt_error(m, "node '%s' is defined twice", duplicate);
    return LY_OK;
}

ly_status ly_tfjs_split_ref(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *ref,
                            char *buf, size_t size, int *index)
{
    const char *colon = strrchr(ref, ':');
    size_t len = colon ? (size_t)(colon - ref) : strlen(ref);
    *index = 0;
    if (colon) {
        const char *digits = colon + 1;
        long v = 0;
        if (!*digits)
            return fmt_error(m, "node '%s': input '%s': empty output index", n->name, ref);
        for (const char *p = digits; *p; p++) {
            if (*p < '0' || *p > '9' || v > 100000)
                return fmt_error(m, "node '%s': input '%s': bad output index", n->name, ref);
            v = v * 10 + (*p - '0');
        }
        *index = (int)v;
    }
    if (len == 0) return fmt_error(m, "node '%s': input '%s': empty node name", n->name, ref);
    if (len >= size) return fmt_error(m, "node '%s': input '%s': name too long", n->name, ref);
    memcpy(buf, ref, len);
    buf[len] = '\0';
    return LY_OK;
}

static ly_status check_references(const ly_tfjs_model *m)
{
    char name[512];
    for (size_t i = 0; i < m->n_nodes; i++) {
        const ly_tfjs_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_inputs + n->n_control; k++) {
            const char *ref = k < n->n_inputs ? n->inputs[k] : n->control[k - n->n_inputs];
            int index;
            ly_status st = ly_tfjs_split_ref(m, n, ref, name, sizeof name, &index);
            if (st != LY_OK) return st;
            if (!ly_tfjs_node_find(m, name))
                return fmt_error(m, "node '%s': input '%s' names no node of the graph", n->name,
                                 ref);
        }
    }
    return LY_OK;
}

static ly_status parse_io(ly_tfjs_model *m, const cJSON *list, const char *what, ly_tfjs_io **out,
                          size_t *count)
{
    *count = 0;
    if (!list) return LY_OK;
    if (!cJSON_IsObject(list)) return fmt_error(m, "signature.%s: expected an object", what);
    size_t n = (size_t)cJSON_GetArraySize(list);
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out) return no_memory(m);
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        ly_tfjs_io *io = &(*out)[*count];
        io->key = item->string;
        if (!io->key || !*io->key || !cJSON_IsObject(item))
            return fmt_error(m, "signature.%s: expected objects under non-empty names", what);
        (*count)++;
        io->dtype = json_string(item, "dtype");
        if (!io->dtype) io->dtype = "";
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "tensorShape");
        io->ndim = -1;
        if (!shape || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(shape, "unknownRank")))
            continue;
        if (!cJSON_IsObject(shape))
            return fmt_error(m, "signature.%s '%s': tensorShape: expected an object", what,
                             io->key);
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(shape, "dim");
        io->ndim = 0;
        if (!dims) continue; /* a scalar */
        if (!cJSON_IsArray(dims) || cJSON_GetArraySize(dims) > LY_MAX_DIMS)
            return fmt_error(m, "signature.%s '%s': tensorShape.dim: expected up to %d dims", what,
                             io->key, LY_MAX_DIMS);
        const cJSON *dim;
        cJSON_ArrayForEach(dim, dims)
        {
            /* proto3 JSON leaves out zeros: {} is a 0-sized dim. */
            const cJSON *size = cJSON_GetObjectItemCaseSensitive(dim, "size");
            int64_t v = 0;
            if (!cJSON_IsObject(dim) || (size && !ly_json_int(size, &v)) || v < -1)
                return fmt_error(m,
                                 "signature.%s '%s': tensorShape.dim[%d]: expected {\"size\": N}",
                                 what, io->key, io->ndim);
            io->shape[io->ndim++] = v;
        }
    }
    return LY_OK;
}

/* Shard names stay inside the model's folder. */
static bool safe_shard_name(const char *s)
{
    if (!*s || s[0] == '/') return false;
    for (const char *p = s; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || (len == 2 && p[0] == '.' && p[1] == '.')) return false;
        p += len + (end ? 1 : 0);
    }
    return true;
}

typedef struct stored_kind {
    ly_dtype dtype;     /* what the model holds */
    size_t stored_size; /* bytes per element in the shard */
    int quant;          /* 0 none, 1 float16, 2 affine uint8/uint16 */
    double scale, min;
} stored_kind;

static ly_status entry_kind(const ly_tfjs_model *m, const cJSON *entry, const char *where,
                            const char *name, stored_kind *k)
{
    const char *dtype = json_string(entry, "dtype");
    if (!dtype) return fmt_error(m, "%s '%s': \"dtype\": expected a string", where, name);
    *k = (stored_kind){LY_F32, 4, 0, 1.0, 0.0};
    if (strcmp(dtype, "int32") == 0) {
        k->dtype = LY_I32;
    } else if (strcmp(dtype, "bool") == 0) {
        k->dtype = LY_U8;
        k->stored_size = 1;
    } else if (strcmp(dtype, "float32") != 0) {
        return fmt_error(m, "%s '%s': dtype '%s' is not supported (float32, int32, bool)", where,
                         name, dtype);
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(entry, "quantization");
    if (!q || cJSON_IsNull(q)) return LY_OK;
    const char *qtype = json_string(q, "dtype");
    const char *original = json_string(q, "original_dtype");
    if (!cJSON_IsObject(q) || !qtype)
        return fmt_error(m, "%s '%s': quantization: expected an object with \"dtype\"", where,
                         name);
    if (k->dtype != LY_F32 || (original && strcmp(original, "float32") != 0))
        return fmt_error(m, "%s '%s': quantization of %s weights is not supported (only float32)",
                         where, name, original ? original : dtype);
    if (strcmp(qtype, "float16") == 0) {
        k->stored_size = 2;
        k->quant = 1;
        return LY_OK;
    }
    if (strcmp(qtype, "uint8") != 0 && strcmp(qtype, "uint16") != 0)
        return fmt_error(m,
                         "%s '%s': quantization dtype '%s' is not supported (float16, uint8, "
                         "uint16)",
                         where, name, qtype);
    k->stored_size = qtype[4] == '8' ? 1 : 2;
    k->quant = 2;
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(q, "scale");
    const cJSON *min = cJSON_GetObjectItemCaseSensitive(q, "min");
    if (!json_float(scale, &k->scale) || !json_float(min, &k->min) || !isfinite(k->scale) ||
        !isfinite(k->min))
        return fmt_error(m, "%s '%s': quantization %s: expected finite \"scale\" and \"min\"",
                         where, name, qtype);
    return LY_OK;
}

static void decode_values(const stored_kind *k, const uint8_t *src, int64_t numel, void *dst)
{
    if (k->dtype == LY_U8) {
        memcpy(dst, src, (size_t)numel);
        return;
    }
    if (k->dtype == LY_I32) {
        int32_t *d = dst;
        for (int64_t i = 0; i < numel; i++, src += 4)
            d[i] = (int32_t)((uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 |
                             (uint32_t)src[3] << 24);
        return;
    }
    float *d = dst;
    for (int64_t i = 0; i < numel; i++) {
        if (k->quant == 1) {
            d[i] = ly_tfjs_half_to_float((uint16_t)(src[0] | src[1] << 8));
            src += 2;
        } else if (k->quant == 2) {
            uint32_t q = k->stored_size == 1 ? src[0] : (uint32_t)(src[0] | src[1] << 8);
            d[i] = (float)((double)q * k->scale + k->min);
            src += k->stored_size;
        } else {
            uint32_t bits = (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 |
                            (uint32_t)src[3] << 24;
            memcpy(&d[i], &bits, sizeof bits);
            src += 4;
        }
    }
}

/* The bytes of one manifest group: its shards, concatenated. */
static ly_status read_group(ly_tfjs_model *m, const cJSON *group, size_t g, ly_tfjs_read_fn read,
                            void *user, uint8_t **bytes, size_t *size, char *shards,
                            size_t shards_size)
{
    const cJSON *paths = cJSON_GetObjectItemCaseSensitive(group, "paths");
    if (!cJSON_IsArray(paths) || cJSON_GetArraySize(paths) < 1)
        return fmt_error(m, "weightsManifest[%zu].paths: expected a non-empty array of file names",
                         g);
    *bytes = NULL;
    *size = 0;
    shards[0] = '\0';
    const cJSON *p;
    cJSON_ArrayForEach(p, paths)
    {
        if (!cJSON_IsString(p) || !p->valuestring || !safe_shard_name(p->valuestring))
            return fmt_error(m,
                             "weightsManifest[%zu].paths: expected relative file names inside "
                             "the model's folder",
                             g);
        size_t used = strlen(shards);
        snprintf(shards + used, shards_size - used, "%s%s", used ? ", " : "", p->valuestring);
        uint8_t *part = NULL;
        size_t part_size = 0;
        ly_status st = read(user, p->valuestring, &part, &part_size);
        if (st != LY_OK) return st;
        if (part_size > MAX_SHARD_BYTES - *size) {
            free(part);
            return fmt_error(m, "weightsManifest[%zu]: the shards are larger than %zu bytes", g,
                             MAX_SHARD_BYTES);
        }
        if (!*bytes) {
            *bytes = part;
            *size = part_size;
            continue;
        }
        size_t joined;
        uint8_t *grown = ly_checked_add_size(*size, part_size, &joined) &&
                                 ly_checked_add_size(joined, 1, &joined)
                             ? realloc(*bytes, joined)
                             : NULL;
        if (!grown) {
            free(part);
            return no_memory(m);
        }
        memcpy(grown + *size, part, part_size);
        free(part);
        *bytes = grown;
        *size += part_size;
    }
    return LY_OK;
}

static ly_status parse_group(ly_tfjs_model *m, const cJSON *group, size_t g, ly_tfjs_read_fn read,
                             void *user)
{
    if (!cJSON_IsObject(group)) return fmt_error(m, "weightsManifest[%zu]: expected an object", g);
    const cJSON *weights = cJSON_GetObjectItemCaseSensitive(group, "weights");
    if (!cJSON_IsArray(weights))
        return fmt_error(m, "weightsManifest[%zu].weights: expected an array", g);
    uint8_t *bytes = NULL;
    size_t size = 0;
    char shards[256];
    ly_status st = read_group(m, group, g, read, user, &bytes, &size, shards, sizeof shards);
    if (st != LY_OK) {
        free(bytes);
        return st;
    }
    size_t count = (size_t)cJSON_GetArraySize(weights);
    ly_tfjs_weight *grown = realloc(m->weights, (m->n_weights + count + 1) * sizeof *grown);
    if (!grown) {
        free(bytes);
        return no_memory(m);
    }
    m->weights = grown;
    size_t offset = 0, index = 0;
    char where[64];
    const cJSON *entry;
    cJSON_ArrayForEach(entry, weights)
    {
        snprintf(where, sizeof where, "weightsManifest[%zu].weights[%zu]", g, index);
        index++;
        const char *name = cJSON_IsObject(entry) ? json_string(entry, "name") : NULL;
        if (!name || !*name) {
            st = fmt_error(m, "%s: expected an object with a non-empty \"name\"", where);
            break;
        }
        ly_tfjs_weight *w = &m->weights[m->n_weights];
        memset(w, 0, sizeof *w);
        w->name = name;
        stored_kind k = {LY_F32, 4, 0, 1.0, 0.0};
        st = entry_kind(m, entry, where, name, &k);
        if (st != LY_OK) break;
        w->dtype = k.dtype;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > LY_MAX_DIMS) {
            st = fmt_error(m, "%s '%s': \"shape\": expected an array of up to %d sizes", where,
                           name, LY_MAX_DIMS);
            break;
        }
        int64_t numel = 1;
        const cJSON *dim;
        cJSON_ArrayForEach(dim, shape)
        {
            int64_t v;
            if (!ly_json_int(dim, &v) || v > (int64_t)MAX_SHARD_BYTES ||
                !ly_checked_mul(numel, v, &numel) || numel > (int64_t)MAX_SHARD_BYTES) {
                st = fmt_error(m,
                               "%s '%s': \"shape\": expected sizes >= 0 (and a tensor smaller "
                               "than the shards)",
                               where, name);
                break;
            }
            w->shape[w->ndim++] = v;
        }
        if (st != LY_OK) break;
        size_t need = 0, held;
        if (!ly_checked_mul_size((size_t)numel, k.stored_size, &need) || need > size - offset) {
            st = fmt_error(m,
                           "%s '%s': needs %zu bytes at offset %zu, but the shards (%s) hold %zu "
                           "bytes in all",
                           where, name, need, offset, shards, size);
            break;
        }
        w->data = ly_checked_mul_size((size_t)numel, ly_dtype_size(w->dtype), &held) &&
                          ly_checked_add_size(held, 1, &held)
                      ? malloc(held)
                      : NULL;
        if (!w->data) {
            st = no_memory(m);
            break;
        }
        decode_values(&k, bytes + offset, numel, w->data);
        offset += need;
        m->n_weights++;
    }
    free(bytes);
    if (st != LY_OK) return st;
    if (offset != size)
        return fmt_error(m,
                         "weightsManifest[%zu]: the %zu weights take %zu bytes, but the shards "
                         "(%s) hold %zu",
                         g, count, offset, shards, size);
    return LY_OK;
}

static ly_status parse_manifest(ly_tfjs_model *m, ly_tfjs_read_fn read, void *user)
{
    const cJSON *manifest = cJSON_GetObjectItemCaseSensitive(m->root, "weightsManifest");
    if (!manifest) return LY_OK;
    if (!cJSON_IsArray(manifest)) return fmt_error(m, "weightsManifest: expected an array");
    size_t g = 0;
    const cJSON *group;
    cJSON_ArrayForEach(group, manifest)
    {
        ly_status st = parse_group(m, group, g++, read, user);
        if (st != LY_OK) return st;
    }
    const char **names = malloc((m->n_weights ? m->n_weights : 1) * sizeof *names);
    if (!names) return no_memory(m);
    for (size_t i = 0; i < m->n_weights; i++)
        names[i] = m->weights[i].name;
    const char *duplicate = NULL;
    m->weight_order = sort_names(names, m->n_weights, &duplicate);
    free(names);
    if (!m->weight_order) return no_memory(m);
    if (duplicate) return fmt_error(m, "weightsManifest: weight '%s' is listed twice", duplicate);
    return LY_OK;
}

ly_status ly_tfjs_parse(const char *json, size_t size, const char *name, ly_tfjs_read_fn read_shard,
                        void *user, ly_tfjs_model **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tfjs_parse: out is NULL");
    *out = NULL;
    if (!json || !read_shard)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tfjs_parse: json or read_shard is NULL");
    ly_tfjs_model *m = calloc(1, sizeof *m);
    if (!m) return ly_set_error(LY_E_NO_MEMORY, "ly_tfjs_parse: out of memory");
    size_t name_len = strlen(name ? name : "model.json");
    m->path = malloc(name_len + 1);
    if (!m->path) {
        free(m);
        return ly_set_error(LY_E_NO_MEMORY, "ly_tfjs_parse: out of memory");
    }
    memcpy(m->path, name ? name : "model.json", name_len + 1);
    m->generated_by = m->converted_by = "";
    ly_status st = LY_OK;
    const char *end = NULL;
    if (size > MAX_JSON_BYTES) {
        st = fmt_error(m, "%zu bytes: larger than any model topology (%zu)", size, MAX_JSON_BYTES);
        goto done;
    }
    m->root = cJSON_ParseWithLengthOpts(json, size, &end, false);
    if (!m->root) {
        size_t at = end && end >= json && end <= json + size ? (size_t)(end - json) : 0;
        st = fmt_error(m, "not valid JSON (at byte %zu)", at);
        goto done;
    }
    if (!cJSON_IsObject(m->root)) {
        st = fmt_error(m, "expected a JSON object at the top");
        goto done;
    }
    const char *format = json_string(m->root, "format");
    if (cJSON_GetObjectItemCaseSensitive(m->root, "format") &&
        (!format || strcmp(format, "graph-model") != 0)) {
        st = fmt_error(m, "\"format\" is '%s', expected 'graph-model' (a TF.js graph model)",
                       format ? format : "(not a string)");
        goto done;
    }
    if (json_string(m->root, "generatedBy")) m->generated_by = json_string(m->root, "generatedBy");
    if (json_string(m->root, "convertedBy")) m->converted_by = json_string(m->root, "convertedBy");
    const cJSON *topology = cJSON_GetObjectItemCaseSensitive(m->root, "modelTopology");
    if (!cJSON_IsObject(topology)) {
        st = fmt_error(m, "modelTopology: expected an object (the TensorFlow graph)");
        goto done;
    }
    st = parse_nodes(m, topology);
    if (st == LY_OK) st = check_references(m);
    const cJSON *signature = cJSON_GetObjectItemCaseSensitive(m->root, "signature");
    if (st == LY_OK && signature && !cJSON_IsNull(signature) && !cJSON_IsObject(signature))
        st = fmt_error(m, "signature: expected an object");
    if (st == LY_OK)
        st = parse_io(m, cJSON_GetObjectItemCaseSensitive(signature, "inputs"), "inputs",
                      &m->inputs, &m->n_inputs);
    if (st == LY_OK)
        st = parse_io(m, cJSON_GetObjectItemCaseSensitive(signature, "outputs"), "outputs",
                      &m->outputs, &m->n_outputs);
    if (st == LY_OK) st = parse_manifest(m, read_shard, user);
    for (size_t i = 0; st == LY_OK && i < m->n_nodes; i++)
        if (strcmp(m->nodes[i].op, "Const") == 0 && !ly_tfjs_weight_find(m, m->nodes[i].name))
            st = fmt_error(m, "node '%s': Const without an entry in weightsManifest",
                           m->nodes[i].name);
done:
    if (st != LY_OK) {
        ly_tfjs_free(m);
        return st;
    }
    *out = m;
    return LY_OK;
}

/* ---- files ------------------------------------------------------------------ */

static ly_status read_whole_file(const char *path, size_t limit, uint8_t **bytes, size_t *size)
{
    *bytes = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ly_set_error(errno == ENOENT ? LY_E_NOT_FOUND : LY_E_IO, "%s: cannot open: %s", path,
                            strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap + 1);
    ly_status st = LY_OK;
    while (buf) {
        if (n == cap) {
            if (cap > limit) {
                st = ly_set_error(LY_E_FORMAT, "%s: larger than %zu bytes", path, limit);
                break;
            }
            uint8_t *grown = realloc(buf, 2 * cap + 1);
            if (!grown) break;
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = ly_set_error(LY_E_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!buf) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", path);
    if (st == LY_OK && n > limit)
        st = ly_set_error(LY_E_FORMAT, "%s: larger than %zu bytes", path, limit);
    if (st != LY_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *bytes = buf;
    *size = n;
    return LY_OK;
}

static ly_status read_shard_file(void *user, const char *shard, uint8_t **bytes, size_t *size)
{
    const char *dir = user;
    size_t len = strlen(dir) + strlen(shard) + 2;
    char *path = malloc(len);
    if (!path) return ly_set_error(LY_E_NO_MEMORY, "out of memory");
    snprintf(path, len, "%s%s", dir, shard);
    ly_status st = read_whole_file(path, MAX_SHARD_BYTES, bytes, size);
    free(path);
    return st;
}

ly_status ly_tfjs_load(const char *json_path, ly_tfjs_model **out)
{
    if (!out || !json_path)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tfjs_load: path or out is NULL");
    *out = NULL;
    uint8_t *json;
    size_t size;
    ly_status st = read_whole_file(json_path, MAX_JSON_BYTES, &json, &size);
    if (st != LY_OK) return st;
    /* The shards' folder, with its trailing slash ("" for the current one). */
    const char *slash = strrchr(json_path, '/');
    size_t dir_len = slash ? (size_t)(slash - json_path) + 1 : 0;
    char *dir = malloc(dir_len + 1);
    if (!dir) {
        free(json);
        return ly_set_error(LY_E_NO_MEMORY, "ly_tfjs_load: out of memory");
    }
    memcpy(dir, json_path, dir_len);
    dir[dir_len] = '\0';
    st = ly_tfjs_parse((const char *)json, size, json_path, read_shard_file, dir, out);
    free(dir);
    free(json);
    return st;
}

/* ---- lookups -------------------------------------------------------------- */

const ly_tfjs_node *ly_tfjs_node_find(const ly_tfjs_model *m, const char *name)
{
    if (!m || !name || !m->node_order) return NULL;
    size_t lo = 0, hi = m->n_nodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->nodes[m->node_order[mid]].name, name);
        if (c == 0) return &m->nodes[m->node_order[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const ly_tfjs_weight *ly_tfjs_weight_find(const ly_tfjs_model *m, const char *name)
{
    if (!m || !name || !m->weight_order) return NULL;
    size_t lo = 0, hi = m->n_weights;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->weights[m->weight_order[mid]].name, name);
        if (c == 0) return &m->weights[m->weight_order[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- attributes -------------------------------------------------------------- */

/* The attribute's object, NULL when absent; an error when not an object. */
static ly_status attr_item(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                           const cJSON **item, bool *present)
{
    *item = n->attr ? cJSON_GetObjectItemCaseSensitive(n->attr, key) : NULL;
    if (present) *present = *item != NULL;
    if (*item && !cJSON_IsObject(*item))
        return fmt_error(m, "node '%s' (%s): attr '%s': expected an object", n->name, n->op, key);
    return LY_OK;
}

ly_status ly_tfjs_attr_string(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                              char *out, size_t size, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    if (st != LY_OK || !item) return st;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(item, "s");
    size_t len = 0;
    if (!s) { /* proto3 JSON leaves out the empty string */
        if (size) out[0] = '\0';
        return LY_OK;
    }
    if (!cJSON_IsString(s) || !s->valuestring || size == 0 ||
        !ly_tfjs_base64_decode(s->valuestring, (uint8_t *)out, size - 1, &len) ||
        memchr(out, '\0', len))
        return fmt_error(m,
                         "node '%s' (%s): attr '%s': expected a base64 string (\"s\") of "
                         "text shorter than %zu bytes",
                         n->name, n->op, key, size);
    out[len] = '\0';
    return LY_OK;
}

ly_status ly_tfjs_attr_int(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                           int64_t *out, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    if (st != LY_OK || !item) return st;
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(item, "i");
    if (!i) {
        *out = 0;
        return LY_OK;
    }
    if (!ly_json_int(i, out))
        return fmt_error(m, "node '%s' (%s): attr '%s': expected an integer (\"i\")", n->name,
                         n->op, key);
    return LY_OK;
}

ly_status ly_tfjs_attr_float(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                             double *out, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    if (st != LY_OK || !item) return st;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(item, "f");
    if (!f) {
        *out = 0.0;
        return LY_OK;
    }
    if (!json_float(f, out))
        return fmt_error(m, "node '%s' (%s): attr '%s': expected a number (\"f\")", n->name, n->op,
                         key);
    return LY_OK;
}

ly_status ly_tfjs_attr_bool(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                            bool *out, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    if (st != LY_OK || !item) return st;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(item, "b");
    if (!b) {
        *out = false;
        return LY_OK;
    }
    if (!cJSON_IsBool(b))
        return fmt_error(m, "node '%s' (%s): attr '%s': expected a boolean (\"b\")", n->name, n->op,
                         key);
    *out = cJSON_IsTrue(b);
    return LY_OK;
}

ly_status ly_tfjs_attr_type(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                            char *out, size_t size, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    if (st != LY_OK || !item) return st;
    const char *type = json_string(item, "type");
    if (!type || size == 0 || strlen(type) >= size)
        return fmt_error(m, "node '%s' (%s): attr '%s': expected a type name (\"type\")", n->name,
                         n->op, key);
    memcpy(out, type, strlen(type) + 1);
    return LY_OK;
}

ly_status ly_tfjs_attr_int_list(const ly_tfjs_model *m, const ly_tfjs_node *n, const char *key,
                                int64_t *out, int max, int *count, bool *present)
{
    const cJSON *item;
    ly_status st = attr_item(m, n, key, &item, present);
    *count = 0;
    if (st != LY_OK || !item) return st;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(item, "list");
    if (!list) return LY_OK;
    const cJSON *values = cJSON_GetObjectItemCaseSensitive(list, "i");
    if (!cJSON_IsObject(list) || (values && !cJSON_IsArray(values)))
        return fmt_error(m, "node '%s' (%s): attr '%s': expected a list of integers", n->name,
                         n->op, key);
    const cJSON *v;
    cJSON_ArrayForEach(v, values)
    {
        if (*count >= max || !ly_json_int(v, &out[*count]))
            return fmt_error(m, "node '%s' (%s): attr '%s': expected a list of at most %d integers",
                             n->name, n->op, key, max);
        (*count)++;
    }
    return LY_OK;
}
