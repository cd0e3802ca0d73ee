/* SPDX-License-Identifier: MIT */
/* A small strict JSON parser for the checkpoint readers (json.h). */
#include "importers/checkpoint/json.h"

#include "core/checked.h"
#include "importers/checkpoint/elem.h"

#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

static bool json_error(ly_json_doc *d, const char *what)
{
    if (!d->error) {
        d->error = what;
        d->error_at = d->pos;
    }
    return false;
}

static void json_skip_space(ly_json_doc *d)
{
    while (d->pos < d->len) {
        char c = d->in[d->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        d->pos++;
    }
}

static size_t json_new_node(ly_json_doc *d, ly_json_kind kind)
{
    if (d->node_count == d->node_cap) {
        size_t cap = d->node_cap ? d->node_cap * 2 : 64;
        ly_json_node *grown = realloc(d->nodes, cap * sizeof *grown);
        if (!grown) return LY_JSON_NONE;
        d->nodes = grown;
        d->node_cap = cap;
    }
    d->nodes[d->node_count] = (ly_json_node){.kind = kind,
                                             .key = LY_JSON_NONE,
                                             .first_child = LY_JSON_NONE,
                                             .next_sibling = LY_JSON_NONE};
    return d->node_count++;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool json_hex4(ly_json_doc *d, uint32_t *out)
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
static bool json_string(ly_json_doc *d, size_t *at, size_t *len)
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

static bool json_value(ly_json_doc *d, int depth, size_t *out);

static bool json_number(ly_json_doc *d, size_t node)
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

static bool json_literal(ly_json_doc *d, const char *word)
{
    size_t n = strlen(word);
    if (d->len - d->pos < n || memcmp(d->in + d->pos, word, n) != 0)
        return json_error(d, "unexpected character");
    d->pos += n;
    return true;
}

static bool json_container(ly_json_doc *d, int depth, size_t node, bool object)
{
    char close = object ? '}' : ']';
    d->pos++;
    json_skip_space(d);
    if (d->pos < d->len && d->in[d->pos] == close) {
        d->pos++;
        return true;
    }
    size_t last = LY_JSON_NONE;
    for (;;) {
        size_t key = LY_JSON_NONE, key_len = 0;
        size_t key_at = 0;
        if (object) {
            json_skip_space(d);
            if (d->pos >= d->len || d->in[d->pos] != '"')
                return json_error(d, "expected a member name");
            key_at = ++d->pos;
            if (!json_string(d, &key, &key_len)) return false;
            json_skip_space(d);
            if (d->pos >= d->len || d->in[d->pos] != ':') return json_error(d, "expected ':'");
            d->pos++;
        }
        size_t child;
        if (!json_value(d, depth + 1, &child)) return false;
        d->nodes[child].key = key;
        d->nodes[child].key_at = key_at;
        if (last == LY_JSON_NONE)
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

static bool json_value(ly_json_doc *d, int depth, size_t *out)
{
    if (depth > JSON_MAX_DEPTH) return json_error(d, "nesting is too deep");
    json_skip_space(d);
    if (d->pos >= d->len) return json_error(d, "expected a value");
    char c = d->in[d->pos];
    ly_json_kind kind = c == '{'               ? LY_J_OBJECT
                        : c == '['             ? LY_J_ARRAY
                        : c == '"'             ? LY_J_STRING
                        : c == 't' || c == 'f' ? LY_J_BOOL
                        : c == 'n'             ? LY_J_NULL
                                               : LY_J_NUMBER;
    size_t node = json_new_node(d, kind);
    if (node == LY_JSON_NONE) return json_error(d, "out of memory");
    *out = node;
    switch (kind) {
    case LY_J_OBJECT:
        return json_container(d, depth, node, true);
    case LY_J_ARRAY:
        return json_container(d, depth, node, false);
    case LY_J_STRING: {
        d->pos++;
        size_t at, len;
        if (!json_string(d, &at, &len)) return false;
        d->nodes[node].text = at;
        d->nodes[node].text_len = len;
        return true;
    }
    case LY_J_BOOL:
        d->nodes[node].boolean = c == 't';
        return json_literal(d, c == 't' ? "true" : "false");
    case LY_J_NULL:
        return json_literal(d, "null");
    case LY_J_NUMBER:
        return json_number(d, node);
    }
    return false;
}

/* Parse `len` bytes holding one JSON value (and whitespace). */
bool ly_json_parse(ly_json_doc *d, const char *in, size_t len)
{
    *d = (ly_json_doc){.in = in, .len = len};
    d->strings = malloc(len + 1);
    if (!d->strings) return json_error(d, "out of memory");
    size_t root;
    if (!json_value(d, 0, &root)) return false;
    json_skip_space(d);
    if (d->pos != d->len) return json_error(d, "trailing characters after the JSON value");
    return true;
}

/* What the value starting with `c` is, as json_value tells it. */
static ly_json_kind kind_of(char c)
{
    return c == '{'               ? LY_J_OBJECT
           : c == '['             ? LY_J_ARRAY
           : c == '"'             ? LY_J_STRING
           : c == 't' || c == 'f' ? LY_J_BOOL
           : c == 'n'             ? LY_J_NULL
                                  : LY_J_NUMBER;
}

bool ly_json_object_begin(ly_json_doc *d, const char *in, size_t len, ly_json_kind *kind)
{
    *d = (ly_json_doc){.in = in, .len = len};
    d->strings = malloc(len + 1); /* pages are touched only as far as a member needs */
    if (!d->strings) return json_error(d, "out of memory");
    json_skip_space(d);
    if (d->pos >= d->len) return json_error(d, "expected a value");
    *kind = kind_of(d->in[d->pos]);
    if (*kind != LY_J_OBJECT) return false;
    d->body = ++d->pos;
    return true;
}

void ly_json_object_rewind(ly_json_doc *d)
{
    d->pos = d->body;
    d->members = 0;
    d->error = NULL;
}

bool ly_json_object_next(ly_json_doc *d, size_t *value, bool *end)
{
    *end = false;
    d->node_count = 0; /* the last member's nodes and strings are done with */
    d->strings_used = 0;
    json_skip_space(d);
    bool closed = false;
    if (d->members == 0) {
        closed = d->pos < d->len && d->in[d->pos] == '}';
        if (closed) d->pos++;
    } else {
        if (d->pos >= d->len) return json_error(d, "unterminated object or array");
        char c = d->in[d->pos++];
        closed = c == '}';
        if (!closed && c != ',') return json_error(d, "expected ',' or '}'");
    }
    if (closed) {
        json_skip_space(d);
        if (d->pos != d->len) return json_error(d, "trailing characters after the JSON value");
        *end = true;
        return true;
    }
    json_skip_space(d);
    if (d->pos >= d->len || d->in[d->pos] != '"') return json_error(d, "expected a member name");
    size_t key_at = ++d->pos, key, key_len;
    if (!json_string(d, &key, &key_len)) return false;
    json_skip_space(d);
    if (d->pos >= d->len || d->in[d->pos] != ':') return json_error(d, "expected ':'");
    d->pos++;
    if (!json_value(d, 1, value)) return false;
    d->nodes[*value].key = key;
    d->nodes[*value].key_at = key_at;
    d->members++;
    return true;
}

size_t ly_json_key_at(const ly_json_doc *d, size_t value)
{
    return d->nodes[value].key_at;
}

const char *ly_json_key_from(ly_json_doc *d, size_t at, size_t skip)
{
    size_t pos = d->pos, used = d->strings_used, key, len;
    const char *error = d->error;
    d->pos = at;
    d->strings_used = skip;
    bool ok = json_string(d, &key, &len);
    d->pos = pos;
    d->strings_used = used;
    d->error = error;
    return ok ? d->strings + key : "?";
}

void ly_json_free(ly_json_doc *d)
{
    free(d->nodes);
    free(d->strings);
}

const char *ly_json_str(const ly_json_doc *d, size_t node)
{
    return d->strings + d->nodes[node].text;
}

const char *ly_json_key(const ly_json_doc *d, size_t node)
{
    return d->strings + d->nodes[node].key;
}

/* A non-negative integer without fraction or exponent that fits in int64. */
bool ly_json_uint(const ly_json_doc *d, size_t node, int64_t *out)
{
    const ly_json_node *n = &d->nodes[node];
    if (n->kind != LY_J_NUMBER) return false;
    const char *s = d->in + n->text;
    int64_t v = 0;
    for (size_t i = 0; i < n->text_len; i++)
        if (s[i] < '0' || s[i] > '9' || !ly_checked_mul(v, 10, &v) ||
            !ly_checked_add(v, s[i] - '0', &v))
            return false;
    *out = v;
    return true;
}

const char *ly_json_kind_name(ly_json_kind kind)
{
    switch (kind) {
    case LY_J_NULL:
        return "null";
    case LY_J_BOOL:
        return "a boolean";
    case LY_J_NUMBER:
        return "a number";
    case LY_J_STRING:
        return "a string";
    case LY_J_ARRAY:
        return "an array";
    case LY_J_OBJECT:
        return "an object";
    }
    return "?";
}
