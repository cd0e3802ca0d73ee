/* SPDX-License-Identifier: MIT */
/*
 * .safetensors reader: an 8-byte little-endian header length N, N bytes of JSON
 *   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *    ..., "__metadata__": {"<key>": "<string>", ...}}
 * (optionally padded with spaces), then the tensor bytes; offsets are relative
 * to the end of the header.
 *
 * The JSON is parsed by a small strict parser (RFC 8259, no extensions) into a
 * flat node array: nodes never outnumber header bytes, nesting is capped, and
 * every string is decoded into one buffer no longer than the header.
 */
#include "core/core.h"
#include "importers/checkpoint/checkpoint_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reference implementation's limit. */
#define ST_MAX_HEADER ((uint64_t)100000000)
#define JSON_MAX_DEPTH 64
#define JSON_NONE SIZE_MAX

typedef enum json_kind { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } json_kind;

typedef struct json_node {
    json_kind kind;
    bool boolean;
    size_t key;  /* object members: offset of the member's name in `strings` */
    size_t text; /* strings: offset in `strings`; numbers: offset in the input */
    size_t text_len;
    size_t first_child, next_sibling, child_count;
} json_node;

typedef struct json_doc {
    const char *in;
    size_t len, pos;
    json_node *nodes;
    size_t node_count, node_cap;
    char *strings; /* decoded strings, each NUL-terminated */
    size_t strings_used;
    const char *error; /* static text */
    size_t error_at;
} json_doc;

static bool json_error(json_doc *d, const char *what)
{
    if (!d->error) {
        d->error = what;
        d->error_at = d->pos;
    }
    return false;
}

static void json_skip_space(json_doc *d)
{
    while (d->pos < d->len) {
        char c = d->in[d->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        d->pos++;
    }
}

static size_t json_new_node(json_doc *d, json_kind kind)
{
    if (d->node_count == d->node_cap) {
        size_t cap = d->node_cap ? d->node_cap * 2 : 64;
        json_node *grown = realloc(d->nodes, cap * sizeof *grown);
        if (!grown) return JSON_NONE;
        d->nodes = grown;
        d->node_cap = cap;
    }
    d->nodes[d->node_count] = (json_node){
        .kind = kind, .key = JSON_NONE, .first_child = JSON_NONE, .next_sibling = JSON_NONE};
    return d->node_count++;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool json_hex4(json_doc *d, uint32_t *out)
{
    if (d->len - d->pos < 4) return json_error(d, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(d->in[d->pos + (size_t)i]);
        if (h < 0) return json_error(d, "bad \\u escape");
        v = v << 4 | (uint32_t)h;
    }
    d->pos += 4;
    *out = v;
    return true;
}

/* Decode the string at d->pos (just past the opening quote) into `strings`;
 * *at receives its offset there. */
static bool json_string(json_doc *d, size_t *at, size_t *len)
{
    *at = d->strings_used;
    char *out = d->strings + d->strings_used;
    size_t n = 0;
    size_t start = d->pos;
    for (;;) {
        if (d->pos >= d->len) return json_error(d, "unterminated string");
        unsigned char c = (unsigned char)d->in[d->pos];
        if (c == '"') break;
        if (c < 0x20) return json_error(d, "control character in a string");
        if (c != '\\') {
            out[n++] = (char)c;
            d->pos++;
            continue;
        }
        d->pos++;
        if (d->pos >= d->len) return json_error(d, "unterminated string");
        char e = d->in[d->pos++];
        switch (e) {
        case '"':
            out[n++] = '"';
            break;
        case '\\':
            out[n++] = '\\';
            break;
        case '/':
            out[n++] = '/';
            break;
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u': {
            uint32_t cp;
            if (!json_hex4(d, &cp)) return false;
            if (cp >= 0xdc00 && cp <= 0xdfff) return json_error(d, "lone low surrogate");
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t low;
                if (d->len - d->pos < 2 || d->in[d->pos] != '\\' || d->in[d->pos + 1] != 'u')
                    return json_error(d, "lone high surrogate");
                d->pos += 2;
                if (!json_hex4(d, &low)) return false;
                if (low < 0xdc00 || low > 0xdfff) return json_error(d, "bad surrogate pair");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            }
            if (cp == 0) return json_error(d, "\\u0000 in a string");
            /* Encoded UTF-8 is never longer than the escape it came from. */
            if (cp < 0x80) {
                out[n++] = (char)cp;
            } else if (cp < 0x800) {
                out[n++] = (char)(0xc0 | cp >> 6);
                out[n++] = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                out[n++] = (char)(0xe0 | cp >> 12);
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[n++] = (char)(0xf0 | cp >> 18);
                out[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default:
            return json_error(d, "unknown escape in a string");
        }
    }
    if (!ly_utf8_valid((const uint8_t *)d->in + start, d->pos - start))
        return json_error(d, "string is not valid UTF-8");
    d->pos++; /* closing quote */
    out[n] = '\0';
    d->strings_used += n + 1;
    *len = n;
    return true;
}

static bool json_value(json_doc *d, int depth, size_t *out);

static bool json_number(json_doc *d, size_t node)
{
    size_t start = d->pos;
    if (d->pos < d->len && d->in[d->pos] == '-') d->pos++;
    if (d->pos >= d->len) return json_error(d, "truncated number");
    if (d->in[d->pos] == '0') {
        d->pos++;
    } else if (d->in[d->pos] >= '1' && d->in[d->pos] <= '9') {
        while (d->pos < d->len && d->in[d->pos] >= '0' && d->in[d->pos] <= '9')
            d->pos++;
    } else {
        return json_error(d, "bad number");
    }
    if (d->pos < d->len && d->in[d->pos] == '.') {
        d->pos++;
        size_t digits = d->pos;
        while (d->pos < d->len && d->in[d->pos] >= '0' && d->in[d->pos] <= '9')
            d->pos++;
        if (d->pos == digits) return json_error(d, "bad number");
    }
    if (d->pos < d->len && (d->in[d->pos] == 'e' || d->in[d->pos] == 'E')) {
        d->pos++;
        if (d->pos < d->len && (d->in[d->pos] == '+' || d->in[d->pos] == '-')) d->pos++;
        size_t digits = d->pos;
        while (d->pos < d->len && d->in[d->pos] >= '0' && d->in[d->pos] <= '9')
            d->pos++;
        if (d->pos == digits) return json_error(d, "bad number");
    }
    d->nodes[node].text = start;
    d->nodes[node].text_len = d->pos - start;
    return true;
}

static bool json_literal(json_doc *d, const char *word)
{
    size_t n = strlen(word);
    if (d->len - d->pos < n || memcmp(d->in + d->pos, word, n) != 0)
        return json_error(d, "unexpected character");
    d->pos += n;
    return true;
}

static bool json_container(json_doc *d, int depth, size_t node, bool object)
{
    char close = object ? '}' : ']';
    d->pos++;
    json_skip_space(d);
    if (d->pos < d->len && d->in[d->pos] == close) {
        d->pos++;
        return true;
    }
    size_t last = JSON_NONE;
    for (;;) {
        size_t key = JSON_NONE, key_len = 0;
        if (object) {
            json_skip_space(d);
            if (d->pos >= d->len || d->in[d->pos] != '"')
                return json_error(d, "expected a member name");
            d->pos++;
            if (!json_string(d, &key, &key_len)) return false;
            json_skip_space(d);
            if (d->pos >= d->len || d->in[d->pos] != ':') return json_error(d, "expected ':'");
            d->pos++;
        }
        size_t child;
        if (!json_value(d, depth + 1, &child)) return false;
        d->nodes[child].key = key;
        if (last == JSON_NONE)
            d->nodes[node].first_child = child;
        else
            d->nodes[last].next_sibling = child;
        last = child;
        d->nodes[node].child_count++;
        json_skip_space(d);
        if (d->pos >= d->len) return json_error(d, "unterminated object or array");
        char c = d->in[d->pos++];
        if (c == close) return true;
        if (c != ',') return json_error(d, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool json_value(json_doc *d, int depth, size_t *out)
{
    if (depth > JSON_MAX_DEPTH) return json_error(d, "nesting is too deep");
    json_skip_space(d);
    if (d->pos >= d->len) return json_error(d, "expected a value");
    char c = d->in[d->pos];
    json_kind kind = c == '{'               ? J_OBJECT
                     : c == '['             ? J_ARRAY
                     : c == '"'             ? J_STRING
                     : c == 't' || c == 'f' ? J_BOOL
                     : c == 'n'             ? J_NULL
                                            : J_NUMBER;
    size_t node = json_new_node(d, kind);
    if (node == JSON_NONE) return json_error(d, "out of memory");
    *out = node;
    switch (kind) {
    case J_OBJECT:
        return json_container(d, depth, node, true);
    case J_ARRAY:
        return json_container(d, depth, node, false);
    case J_STRING: {
        d->pos++;
        size_t at, len;
        if (!json_string(d, &at, &len)) return false;
        d->nodes[node].text = at;
        d->nodes[node].text_len = len;
        return true;
    }
    case J_BOOL:
        d->nodes[node].boolean = c == 't';
        return json_literal(d, c == 't' ? "true" : "false");
    case J_NULL:
        return json_literal(d, "null");
    case J_NUMBER:
        return json_number(d, node);
    }
    return false;
}

/* Parse `len` bytes holding one JSON value (and whitespace). */
static bool json_parse(json_doc *d, const char *in, size_t len)
{
    *d = (json_doc){.in = in, .len = len};
    d->strings = malloc(len + 1);
    if (!d->strings) return json_error(d, "out of memory");
    size_t root;
    if (!json_value(d, 0, &root)) return false;
    json_skip_space(d);
    if (d->pos != d->len) return json_error(d, "trailing characters after the JSON value");
    return true;
}

static void json_free(json_doc *d)
{
    free(d->nodes);
    free(d->strings);
}

static const char *json_str(const json_doc *d, size_t node)
{
    return d->strings + d->nodes[node].text;
}

static const char *json_key(const json_doc *d, size_t node)
{
    return d->strings + d->nodes[node].key;
}

/* A non-negative integer without fraction or exponent that fits in int64. */
static bool json_uint(const json_doc *d, size_t node, int64_t *out)
{
    const json_node *n = &d->nodes[node];
    if (n->kind != J_NUMBER) return false;
    const char *s = d->in + n->text;
    uint64_t v = 0;
    for (size_t i = 0; i < n->text_len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)(s[i] - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = (int64_t)v;
    return true;
}

static const char *json_kind_name(json_kind kind)
{
    switch (kind) {
    case J_NULL:
        return "null";
    case J_BOOL:
        return "a boolean";
    case J_NUMBER:
        return "a number";
    case J_STRING:
        return "a string";
    case J_ARRAY:
        return "an array";
    case J_OBJECT:
        return "an object";
    }
    return "?";
}

/* ---- safetensors ----------------------------------------------------------------- */

typedef struct st_dtype {
    const char *name;
    ly_elem elem;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", LY_ELEM_F32},   {"F64", LY_ELEM_F64},        {"F16", LY_ELEM_F16},
    {"BF16", LY_ELEM_BF16}, {"I64", LY_ELEM_I64},        {"I32", LY_ELEM_I32},
    {"I16", LY_ELEM_I16},   {"I8", LY_ELEM_I8},          {"U8", LY_ELEM_U8},
    {"BOOL", LY_ELEM_BOOL}, {"F8_E4M3", LY_ELEM_F8E4M3},
};

/* Where one tensor's bytes lie in the data section. */
typedef struct st_extent {
    const char *name; /* in the parsed header */
    int64_t begin, end;
} st_extent;

static ly_status st_tensor(ly_checkpoint *ck, const json_doc *d, size_t node, const uint8_t *data,
                           uint64_t data_size, st_extent *extent)
{
    const char *name = json_key(d, node);
    if (d->nodes[node].kind != J_OBJECT)
        return ly_ck_fail(ck, LY_E_FORMAT, "safetensors entry '%s' is %s, expected an object", name,
                          json_kind_name(d->nodes[node].kind));
    size_t dtype = JSON_NONE, shape = JSON_NONE, offsets = JSON_NONE;
    for (size_t c = d->nodes[node].first_child; c != JSON_NONE; c = d->nodes[c].next_sibling) {
        const char *field = json_key(d, c);
        size_t *slot = strcmp(field, "dtype") == 0          ? &dtype
                       : strcmp(field, "shape") == 0        ? &shape
                       : strcmp(field, "data_offsets") == 0 ? &offsets
                                                            : NULL;
        if (!slot)
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': unknown field '%s'", name, field);
        if (*slot != JSON_NONE)
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': field '%s' appears twice", name,
                              field);
        *slot = c;
    }
    if (dtype == JSON_NONE || shape == JSON_NONE || offsets == JSON_NONE)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' lacks %s", name,
                          dtype == JSON_NONE   ? "'dtype'"
                          : shape == JSON_NONE ? "'shape'"
                                               : "'data_offsets'");
    if (d->nodes[dtype].kind != J_STRING)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'dtype' is %s, expected a string", name,
                          json_kind_name(d->nodes[dtype].kind));
    const st_dtype *dt = NULL;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, json_str(d, dtype)) == 0) dt = &st_dtypes[i];
    if (!dt)
        return ly_ck_fail(ck, LY_E_UNSUPPORTED,
                          "tensor '%s': dtype '%s' is not supported (F32, F64, F16, BF16, I64, "
                          "I32, I16, I8, U8, BOOL are)",
                          name, json_str(d, dtype));

    int64_t dims[LY_MAX_DIMS];
    int ndim = 0;
    if (d->nodes[shape].kind != J_ARRAY)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'shape' is %s, expected an array", name,
                          json_kind_name(d->nodes[shape].kind));
    if (d->nodes[shape].child_count > LY_MAX_DIMS)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' has %zu dimensions, at most %d are supported", name,
                          d->nodes[shape].child_count, LY_MAX_DIMS);
    uint64_t numel = 1;
    for (size_t c = d->nodes[shape].first_child; c != JSON_NONE; c = d->nodes[c].next_sibling) {
        if (!json_uint(d, c, &dims[ndim]))
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': shape[%d] is not a non-negative integer", name, ndim);
        if (dims[ndim] != 0 && numel > data_size / (uint64_t)dims[ndim])
            numel = data_size + 1; /* certainly more than the data holds */
        else
            numel *= (uint64_t)dims[ndim];
        ndim++;
    }

    int64_t range[2];
    int n = 0;
    if (d->nodes[offsets].kind != J_ARRAY || d->nodes[offsets].child_count != 2)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s': 'data_offsets' is not [begin, end]", name);
    for (size_t c = d->nodes[offsets].first_child; c != JSON_NONE; c = d->nodes[c].next_sibling)
        if (!json_uint(d, c, &range[n++]))
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': 'data_offsets' holds something other than "
                              "non-negative integers",
                              name);
    if (range[1] < range[0] || (uint64_t)range[1] > data_size)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] are outside the "
                          "%" PRIu64 " data bytes (truncated file?)",
                          name, range[0], range[1], data_size);
    uint64_t bytes = (uint64_t)(range[1] - range[0]);
    size_t esize = ly_elem_size(dt->elem);
    if (numel > data_size || numel * esize != bytes)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s': data_offsets span %" PRIu64 " bytes, but its shape and "
                          "dtype %s need %s",
                          name, bytes, dt->name,
                          numel > data_size ? "more than the file holds" : "a different size");
    *extent = (st_extent){name, range[0], range[1]};
    char what[300];
    snprintf(what, sizeof what, "its data_offsets range of tensor '%.200s'", name);
    return ly_ck_add_tensor(ck, name, dt->elem, data + range[0], bytes, what, 0, ndim, dims, NULL);
}

static int extent_order(const void *a, const void *b)
{
    const st_extent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* As the reference implementation validates: sorted by offset, the tensors
 * tile the data section exactly, back to back, no byte shared, none left. */
static ly_status st_check_tiling(ly_checkpoint *ck, st_extent *extents, size_t count,
                                 uint64_t data_size)
{
    qsort(extents, count, sizeof *extents, extent_order);
    int64_t covered = 0;
    for (size_t i = 0; i < count; i++) {
        const st_extent *e = &extents[i];
        if (e->begin < covered)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] overlap "
                              "tensor '%s' [%" PRId64 ", %" PRId64 "]; each tensor must have "
                              "bytes of its own",
                              e->name, e->begin, e->end, extents[i - 1].name, extents[i - 1].begin,
                              extents[i - 1].end);
        if (e->begin > covered)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s': data_offsets begin at %" PRId64 ", but %s ends at "
                              "%" PRId64 ": %" PRId64 " bytes belong to no tensor (safetensors "
                              "stores tensors back to back)",
                              e->name, e->begin,
                              i ? "the tensor before it" : "the data section's start (0)", covered,
                              e->begin - covered);
        covered = e->end;
    }
    if ((uint64_t)covered != data_size)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "the data section holds %" PRIu64 " bytes, but the tensors end at "
                          "%" PRId64 "%s%s%s: the rest belongs to no tensor",
                          data_size, covered, count ? " (the last is '" : "",
                          count ? extents[count - 1].name : "", count ? "')" : "");
    return LY_OK;
}

/* `names` metadata: a JSON object {"0": "person", ...} or array ["person", ...]. */
static ly_status st_names(ly_checkpoint *ck, const char *text)
{
    json_doc d;
    ly_status st = LY_OK;
    if (!json_parse(&d, text, strlen(text))) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "metadata 'names' is not JSON (%s at character %zu); expected an object "
                        "of class index to name, or an array of names",
                        d.error, d.error_at);
        json_free(&d);
        return st;
    }
    const json_node *root = &d.nodes[0];
    if (root->kind == J_ARRAY) {
        st = ly_ck_names_reserve(ck, root->child_count);
        size_t i = 0;
        for (size_t c = root->first_child; st == LY_OK && c != JSON_NONE;
             c = d.nodes[c].next_sibling, i++) {
            if (d.nodes[c].kind != J_STRING)
                st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names'[%zu] is %s, expected a string",
                                i, json_kind_name(d.nodes[c].kind));
            else
                st = ly_ck_names_set(ck, i, json_str(&d, c));
        }
    } else if (root->kind == J_OBJECT) {
        size_t count = 0;
        for (size_t c = root->first_child; st == LY_OK && c != JSON_NONE;
             c = d.nodes[c].next_sibling) {
            const char *key = json_key(&d, c);
            char *end = NULL;
            unsigned long long index = strtoull(key, &end, 10);
            if (key[0] < '0' || key[0] > '9' || *end != '\0' || index >= LY_CK_MAX_CLASSES)
                st = ly_ck_fail(ck, LY_E_FORMAT,
                                "metadata 'names' has the key '%s', expected a class index", key);
            else if (d.nodes[c].kind != J_STRING)
                st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names'[%s] is %s, expected a string",
                                key, json_kind_name(d.nodes[c].kind));
            else if (index + 1 > count)
                count = (size_t)index + 1;
        }
        if (st == LY_OK) st = ly_ck_names_reserve(ck, count);
        for (size_t c = root->first_child; st == LY_OK && c != JSON_NONE;
             c = d.nodes[c].next_sibling)
            st = ly_ck_names_set(ck, (size_t)strtoull(json_key(&d, c), NULL, 10), json_str(&d, c));
    } else {
        st = ly_ck_fail(ck, LY_E_FORMAT, "metadata 'names' is %s, expected an object or array",
                        json_kind_name(root->kind));
    }
    json_free(&d);
    return st;
}

static ly_status st_metadata(ly_checkpoint *ck, const json_doc *d, size_t node)
{
    if (d->nodes[node].kind != J_OBJECT)
        return ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' is %s, expected an object",
                          json_kind_name(d->nodes[node].kind));
    for (size_t c = d->nodes[node].first_child; c != JSON_NONE; c = d->nodes[c].next_sibling) {
        const char *key = json_key(d, c);
        if (d->nodes[c].kind != J_STRING)
            return ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' entry '%s' is %s, expected a string",
                              key, json_kind_name(d->nodes[c].kind));
        ly_status st = ly_ck_add_meta_string(ck, key, json_str(d, c));
        if (st == LY_OK && strcmp(key, "names") == 0) st = st_names(ck, json_str(d, c));
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

ly_status ly_safetensors_load(ly_checkpoint *ck, const uint8_t *data, size_t size)
{
    if (size < 8)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "truncated safetensors file: %zu bytes, no header length", size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | data[i];
    if (header_len > ST_MAX_HEADER || header_len > size - 8)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "safetensors header length %" PRIu64 " exceeds the %zu bytes that follow "
                          "it (or the %" PRIu64 " accepted): truncated or not a safetensors file",
                          header_len, size - 8, ST_MAX_HEADER);
    json_doc d;
    ly_status st = LY_OK;
    if (!json_parse(&d, (const char *)data + 8, (size_t)header_len)) {
        st = ly_ck_fail(ck, LY_E_FORMAT, "safetensors header is not valid JSON: %s at byte %zu",
                        d.error, (size_t)8 + d.error_at);
        json_free(&d);
        return st;
    }
    if (d.nodes[0].kind != J_OBJECT) {
        st = ly_ck_fail(ck, LY_E_FORMAT, "safetensors header is %s, expected an object",
                        json_kind_name(d.nodes[0].kind));
        json_free(&d);
        return st;
    }
    const uint8_t *payload = data + 8 + header_len;
    uint64_t payload_size = size - 8 - header_len;
    bool seen_metadata = false;
    st_extent *extents = calloc(d.nodes[0].child_count + 1, sizeof *extents);
    if (!extents) {
        json_free(&d);
        return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the tensor table");
    }
    size_t n_extents = 0;
    for (size_t c = d.nodes[0].first_child; st == LY_OK && c != JSON_NONE;
         c = d.nodes[c].next_sibling) {
        if (strcmp(json_key(&d, c), "__metadata__") == 0) {
            if (seen_metadata)
                st = ly_ck_fail(ck, LY_E_FORMAT, "'__metadata__' appears twice");
            else
                st = st_metadata(ck, &d, c);
            seen_metadata = true;
        } else {
            st = st_tensor(ck, &d, c, payload, payload_size, &extents[n_extents++]);
        }
    }
    if (st == LY_OK) st = st_check_tiling(ck, extents, n_extents, payload_size);
    free(extents);
    json_free(&d);
    return st;
}
