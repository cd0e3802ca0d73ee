/* SPDX-License-Identifier: MIT */
/* json.dumps(indent=2, sort_keys=True) for cJSON trees (see json_text.h). */
#include "pte/json_text.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    char *p;
    size_t n, cap;
    bool failed;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void indent(buf *b, int level)
{
    for (int i = 0; i < level; i++)
        put(b, "  ", 2);
}

static void put_escape(buf *b, unsigned code)
{
    char e[8];
    snprintf(e, sizeof e, "\\u%04x", code);
    put(b, e, 6);
}

/* UTF-8 -> code point; invalid sequences give U+FFFD and consume one byte. */
static unsigned next_code(const unsigned char **s)
{
    const unsigned char *p = *s;
    unsigned c = p[0];
    int len = c < 0x80             ? 1
              : (c & 0xE0) == 0xC0 ? 2
              : (c & 0xF0) == 0xE0 ? 3
              : (c & 0xF8) == 0xF0 ? 4
                                   : 0;
    if (len == 0) {
        *s = p + 1;
        return 0xFFFD;
    }
    unsigned code = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *s = p + 1;
            return 0xFFFD;
        }
        code = (code << 6) | (p[i] & 0x3F);
    }
    static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < min[len] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
        *s = p + 1;
        return 0xFFFD;
    }
    *s = p + len;
    return code;
}

static void put_string(buf *b, const char *s)
{
    put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned c = next_code(&p);
        switch (c) {
        case '"':
            puts_(b, "\\\"");
            break;
        case '\\':
            puts_(b, "\\\\");
            break;
        case '\n':
            puts_(b, "\\n");
            break;
        case '\r':
            puts_(b, "\\r");
            break;
        case '\t':
            puts_(b, "\\t");
            break;
        case '\b':
            puts_(b, "\\b");
            break;
        case '\f':
            puts_(b, "\\f");
            break;
        default:
            if (c < 0x20 || (c >= 0x7F && c < 0x10000)) {
                put_escape(b, c);
            } else if (c >= 0x10000) {
                unsigned v = c - 0x10000;
                put_escape(b, 0xD800 + (v >> 10));
                put_escape(b, 0xDC00 + (v & 0x3FF));
            } else {
                char ch = (char)c;
                put(b, &ch, 1);
            }
        }
    }
    put(b, "\"", 1);
}

void ly_json_float_repr(double v, char out[32])
{
    if (isnan(v)) {
        snprintf(out, 32, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, 32, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    /* Shortest digits that read back as v, then Python's layout: positional
     * for exponents in [-4, 16), else d.ddde[+-]XX. */
    char digits[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(digits, sizeof digits, "%.*e", prec - 1, v);
        if (strtod(digits, NULL) == v) break;
    }
    char *e = strchr(digits, 'e');
    int exp10 = atoi(e + 1);
    *e = '\0';
    char mant[24];
    size_t m = 0;
    bool neg = digits[0] == '-';
    for (const char *p = digits + neg; *p; p++)
        if (*p != '.') mant[m++] = *p;
    mant[m] = '\0';
    while (m > 1 && mant[m - 1] == '0')
        mant[--m] = '\0';
    char *o = out;
    if (neg) *o++ = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            o += sprintf(o, "0.");
            for (int i = 0; i < -exp10 - 1; i++)
                *o++ = '0';
            o += sprintf(o, "%s", mant);
        } else if ((int)m <= exp10 + 1) {
            o += sprintf(o, "%s", mant);
            for (int i = (int)m; i < exp10 + 1; i++)
                *o++ = '0';
            o += sprintf(o, ".0");
        } else {
            o += sprintf(o, "%.*s.%s", exp10 + 1, mant, mant + exp10 + 1);
        }
        *o = '\0';
    } else {
        if (m > 1)
            o += sprintf(o, "%c.%se", mant[0], mant + 1);
        else
            o += sprintf(o, "%ce", mant[0]);
        sprintf(o, "%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

static int compare_keys(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

static void put_value(buf *b, const cJSON *item, int level)
{
    if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
        bool object = cJSON_IsObject(item);
        int n = cJSON_GetArraySize(item);
        if (n == 0) {
            puts_(b, object ? "{}" : "[]");
            return;
        }
        const cJSON **children = malloc((size_t)n * sizeof *children);
        if (!children) {
            b->failed = true;
            return;
        }
        int k = 0;
        for (const cJSON *c = item->child; c && k < n; c = c->next)
            children[k++] = c;
        if (object) qsort(children, (size_t)k, sizeof *children, compare_keys);
        puts_(b, object ? "{\n" : "[\n");
        for (int i = 0; i < k; i++) {
            indent(b, level + 1);
            if (object) {
                put_string(b, children[i]->string);
                puts_(b, ": ");
            }
            put_value(b, children[i], level + 1);
            puts_(b, i + 1 < k ? ",\n" : "\n");
        }
        free(children);
        indent(b, level);
        puts_(b, object ? "}" : "]");
    } else if (cJSON_IsString(item)) {
        put_string(b, item->valuestring);
    } else if (cJSON_IsRaw(item)) {
        puts_(b, item->valuestring ? item->valuestring : "null");
    } else if (cJSON_IsNumber(item)) {
        double v = item->valuedouble;
        char text[40];
        if (v == floor(v) && fabs(v) < 9007199254740992.0)
            snprintf(text, sizeof text, "%lld", (long long)v);
        else
            ly_json_float_repr(v, text);
        puts_(b, text);
    } else if (cJSON_IsTrue(item)) {
        puts_(b, "true");
    } else if (cJSON_IsFalse(item)) {
        puts_(b, "false");
    } else {
        puts_(b, "null");
    }
}

ly_status ly_json_python_dumps(const cJSON *root, char **text, size_t *length)
{
    buf b = {0};
    put_value(&b, root, 0);
    if (b.failed || !b.p) {
        free(b.p);
        return ly_set_error(LY_E_NO_MEMORY, "export: out of memory printing JSON");
    }
    *text = b.p;
    *length = b.n;
    return LY_OK;
}
