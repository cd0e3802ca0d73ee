/* SPDX-License-Identifier: MIT */
/*
 * NumPy .npy reader and writer.
 *
 * Layout (numpy/lib/format.py): the magic "\x93NUMPY", major and minor version
 * bytes, the header length (uint16 LE for 1.0, uint32 LE for 2.0 and 3.0), then
 * the header: a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ended by '\n', then the raw C-order payload.
 *
 * The header is parsed strictly rather than evaluated: exactly the three keys,
 * in any order, with the literal forms NumPy writes, so a malformed file is
 * reported precisely instead of being half-understood.
 */
#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/core.h"
#include "libreyolo/io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The payload is copied as is, which is only right on a little-endian host. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .npy reader and writer assume a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy itself refuses headers over 10000 bytes by default; a larger limit still
 * keeps a corrupt length field from allocating gigabytes. */
#define NPY_MAX_HEADER_LEN ((size_t)1 << 20)

typedef struct npy_descr {
    const char *descr;
    ly_dtype dtype;
} npy_descr;

/* Reading order; the list also appears in error messages. */
static const npy_descr npy_descrs[] = {
    {"<f4", LY_F32}, {"<f8", LY_F64}, {"<f2", LY_F16}, {"|i1", LY_I8},
    {"|u1", LY_U8},  {"<i4", LY_I32}, {"<i8", LY_I64},
};
#define NPY_SUPPORTED "'<f4', '<f8', '<f2', '|i1', '|u1', '<i4', '<i8'"

static const char *npy_descr_of(ly_dtype dtype)
{
    if (dtype == LY_F8E4M3) return "|u1"; /* NumPy has no E4M3 dtype: store the codes */
    for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++)
        if (npy_descrs[i].dtype == dtype) return npy_descrs[i].descr;
    return NULL;
}

/* Who is reporting, and about which file. */
typedef struct npy_ctx {
    const char *func;
    const char *name;
} npy_ctx;

static ly_status npy_fail(const npy_ctx *ctx, ly_status status, const char *fmt, ...)
    LY_PRINTF(3, 4);

static ly_status npy_fail(const npy_ctx *ctx, ly_status status, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ly_set_error(status, "%s: %s: %s", ctx->func, ctx->name, what);
}

/* What the header says. */
typedef struct npy_header {
    ly_dtype dtype;
    int ndim;
    int64_t shape[LY_MAX_DIMS];
    size_t payload_bytes;
} npy_header;

static void npy_shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (used < size) snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
}

/* ---- Preamble: magic, version, header length ------------------------------ */

/* `bytes` holds the first min(total, 12) bytes of a file of `total` bytes. On
 * success *header_at and *header_len locate the dict text. */
static ly_status npy_parse_preamble(const npy_ctx *ctx, const uint8_t *bytes, size_t total,
                                    size_t *header_at, size_t *header_len)
{
    if (total < NPY_MAGIC_LEN || memcmp(bytes, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return npy_fail(ctx, LY_E_FORMAT,
                        "bad magic: not a .npy file (expected it to start with \\x93NUMPY)");
    if (total < NPY_MAGIC_LEN + 2)
        return npy_fail(ctx, LY_E_FORMAT, "truncated: the file ends inside the version bytes");
    unsigned major = bytes[6], minor = bytes[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return npy_fail(ctx, LY_E_FORMAT,
                        "unknown .npy format version %u.%u (supported: 1.0, 2.0, 3.0)", major,
                        minor);
    size_t len_bytes = major == 1 ? 2 : 4;
    size_t at = NPY_MAGIC_LEN + 2 + len_bytes;
    if (total < at)
        return npy_fail(ctx, LY_E_FORMAT,
                        "truncated: the file ends inside the header length field");
    size_t len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    if (len_bytes == 4) len |= (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
    if (len > total - at)
        return npy_fail(ctx, LY_E_FORMAT,
                        "header length %zu runs past the end of the file (%zu bytes follow the "
                        "length field)",
                        len, total - at);
    if (len > NPY_MAX_HEADER_LEN)
        return npy_fail(ctx, LY_E_FORMAT, "header length %zu exceeds the %zu bytes accepted", len,
                        NPY_MAX_HEADER_LEN);
    *header_at = at;
    *header_len = len;
    return LY_OK;
}

/* ---- Header dict ---------------------------------------------------------- */

typedef struct npy_lexer {
    const npy_ctx *ctx;
    const char *text;
    size_t len;
    size_t pos;
} npy_lexer;

static void lex_skip_space(npy_lexer *lx)
{
    while (lx->pos < lx->len) {
        char c = lx->text[lx->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        lx->pos++;
    }
}

static int lex_peek(const npy_lexer *lx)
{
    return lx->pos < lx->len ? (unsigned char)lx->text[lx->pos] : -1;
}

static ly_status lex_unexpected(npy_lexer *lx, const char *expected)
{
    int c = lex_peek(lx);
    if (c < 0) return npy_fail(lx->ctx, LY_E_FORMAT, "header: ends early, expected %s", expected);
    if (c >= 0x20 && c < 0x7f)
        return npy_fail(lx->ctx, LY_E_FORMAT, "header: unexpected '%c' at offset %zu, expected %s",
                        c, lx->pos, expected);
    return npy_fail(lx->ctx, LY_E_FORMAT,
                    "header: unexpected byte 0x%02x at offset %zu, expected %s", (unsigned)c,
                    lx->pos, expected);
}

static ly_status lex_expect(npy_lexer *lx, char c, const char *expected)
{
    lex_skip_space(lx);
    if (lex_peek(lx) != (unsigned char)c) return lex_unexpected(lx, expected);
    lx->pos++;
    return LY_OK;
}

/* A Python string literal in single or double quotes, without escapes (NumPy
 * never writes any in the keys or descrs this reader accepts). */
static ly_status lex_string(npy_lexer *lx, const char **s, size_t *n, const char *what)
{
    lex_skip_space(lx);
    int quote = lex_peek(lx);
    if (quote != '\'' && quote != '"') return lex_unexpected(lx, what);
    size_t start = ++lx->pos;
    while (lx->pos < lx->len && lx->text[lx->pos] != quote) {
        char c = lx->text[lx->pos];
        if (c == '\\' || c == '\n')
            return npy_fail(lx->ctx, LY_E_FORMAT,
                            "header: escape or line break inside a string at offset %zu", lx->pos);
        lx->pos++;
    }
    if (lx->pos >= lx->len)
        return npy_fail(lx->ctx, LY_E_FORMAT, "header: unterminated string at offset %zu",
                        start - 1);
    *s = lx->text + start;
    *n = lx->pos - start;
    lx->pos++;
    return LY_OK;
}

static bool lex_word(npy_lexer *lx, const char *word)
{
    size_t n = strlen(word);
    if (lx->len - lx->pos < n || memcmp(lx->text + lx->pos, word, n) != 0) return false;
    /* "Falsey" is not "False". */
    if (lx->pos + n < lx->len) {
        char next = lx->text[lx->pos + n];
        if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
            (next >= '0' && next <= '9') || next == '_')
            return false;
    }
    lx->pos += n;
    return true;
}

static ly_status parse_descr(npy_lexer *lx, npy_header *h)
{
    lex_skip_space(lx);
    if (lex_peek(lx) == '[')
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "header: structured dtypes are not supported (descr is a list); supported "
                        "descrs: " NPY_SUPPORTED);
    const char *s;
    size_t n;
    ly_status st = lex_string(lx, &s, &n, "a descr string such as '<f4'");
    if (st != LY_OK) return st;
    for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++) {
        if (strlen(npy_descrs[i].descr) == n && memcmp(npy_descrs[i].descr, s, n) == 0) {
            h->dtype = npy_descrs[i].dtype;
            return LY_OK;
        }
    }
    int shown = n > 32 ? 32 : (int)n;
    if (n > 0 && (s[0] == '>' || s[0] == '!'))
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "big-endian data (descr '%.*s') is not supported; convert with "
                        "arr.astype(arr.dtype.newbyteorder('<')) (supported descrs: " NPY_SUPPORTED
                        ")",
                        shown, s);
    return npy_fail(lx->ctx, LY_E_FORMAT,
                    "unsupported descr '%.*s'%s; supported descrs: " NPY_SUPPORTED, shown, s,
                    n > 32 ? "..." : "");
}

static ly_status parse_fortran_order(npy_lexer *lx)
{
    lex_skip_space(lx);
    if (lex_word(lx, "False")) return LY_OK;
    if (lex_word(lx, "True"))
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "fortran_order is True: Fortran-order arrays are not supported; save "
                        "np.ascontiguousarray(arr) instead");
    return lex_unexpected(lx, "True or False for 'fortran_order'");
}

static ly_status parse_dim(npy_lexer *lx, int index, int64_t *dim)
{
    lex_skip_space(lx);
    size_t start = lx->pos;
    bool negative = lex_peek(lx) == '-';
    if (negative) lx->pos++;
    int c = lex_peek(lx);
    if (c < '0' || c > '9') {
        lx->pos = start;
        return lex_unexpected(lx, "an integer in 'shape'");
    }
    int64_t value = 0;
    bool overflow = false;
    while ((c = lex_peek(lx)) >= '0' && c <= '9') {
        overflow = overflow || !ly_checked_mul(value, 10, &value) ||
                   !ly_checked_add(value, c - '0', &value);
        lx->pos++;
    }
    if (negative && (value != 0 || overflow))
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "shape: dimension %d is negative (%.*s), expected >= 0", index,
                        (int)(lx->pos - start > 24 ? 24 : lx->pos - start), lx->text + start);
    if (overflow)
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "shape: dimension %d (%.*s%s) overflows a 64-bit integer", index,
                        (int)(lx->pos - start > 24 ? 24 : lx->pos - start), lx->text + start,
                        lx->pos - start > 24 ? "..." : "");
    *dim = value;
    return LY_OK;
}

/* A Python tuple of non-negative ints: "()", "(3,)", "(3, 4)", "(3, 4,)". */
static ly_status parse_shape(npy_lexer *lx, npy_header *h)
{
    ly_status st = lex_expect(lx, '(', "'(' opening the 'shape' tuple");
    if (st != LY_OK) return st;
    int ndim = 0;
    bool trailing_comma = false;
    for (;;) {
        lex_skip_space(lx);
        if (lex_peek(lx) == ')') {
            lx->pos++;
            break;
        }
        if (ndim == LY_MAX_DIMS)
            return npy_fail(lx->ctx, LY_E_FORMAT, "shape: more than %d dimensions", LY_MAX_DIMS);
        st = parse_dim(lx, ndim, &h->shape[ndim]);
        if (st != LY_OK) return st;
        ndim++;
        lex_skip_space(lx);
        trailing_comma = lex_peek(lx) == ',';
        if (trailing_comma) {
            lx->pos++;
        } else if (lex_peek(lx) != ')') {
            return lex_unexpected(lx, "',' or ')' in 'shape'");
        }
    }
    if (ndim == 1 && !trailing_comma)
        return npy_fail(lx->ctx, LY_E_FORMAT,
                        "shape: (%" PRId64 ") is an integer, not a tuple; a 1-d shape is written "
                        "(%" PRId64 ",)",
                        h->shape[0], h->shape[0]);
    h->ndim = ndim;
    return LY_OK;
}

static ly_status npy_parse_dict(const npy_ctx *ctx, const char *text, size_t len, npy_header *h)
{
    npy_lexer lx = {.ctx = ctx, .text = text, .len = len, .pos = 0};
    enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };
    unsigned seen = 0;
    ly_status st = lex_expect(&lx, '{', "'{' opening the header dict");
    if (st != LY_OK) return st;
    for (;;) {
        lex_skip_space(&lx);
        if (lex_peek(&lx) == '}') {
            lx.pos++;
            break;
        }
        const char *key;
        size_t n;
        st = lex_string(&lx, &key, &n, "a quoted key or '}'");
        if (st != LY_OK) return st;
        unsigned which = 0;
        if (n == 5 && memcmp(key, "descr", 5) == 0)
            which = KEY_DESCR;
        else if (n == 13 && memcmp(key, "fortran_order", 13) == 0)
            which = KEY_FORTRAN;
        else if (n == 5 && memcmp(key, "shape", 5) == 0)
            which = KEY_SHAPE;
        else
            return npy_fail(ctx, LY_E_FORMAT,
                            "header: unexpected key '%.*s' (expected exactly 'descr', "
                            "'fortran_order' and 'shape')",
                            n > 32 ? 32 : (int)n, key);
        if (seen & which)
            return npy_fail(ctx, LY_E_FORMAT, "header: key '%.*s' appears twice", (int)n, key);
        seen |= which;
        st = lex_expect(&lx, ':', "':' after a key");
        if (st != LY_OK) return st;
        st = which == KEY_DESCR     ? parse_descr(&lx, h)
             : which == KEY_FORTRAN ? parse_fortran_order(&lx)
                                    : parse_shape(&lx, h);
        if (st != LY_OK) return st;
        lex_skip_space(&lx);
        if (lex_peek(&lx) == ',')
            lx.pos++;
        else if (lex_peek(&lx) != '}')
            return lex_unexpected(&lx, "',' or '}' after a value");
    }
    lex_skip_space(&lx);
    if (lx.pos != lx.len) return lex_unexpected(&lx, "only padding after the header dict");
    static const char *const names[] = {"descr", "fortran_order", "shape"};
    for (unsigned i = 0; i < 3; i++)
        if (!(seen & (1u << i)))
            return npy_fail(ctx, LY_E_FORMAT, "header: missing key '%s'", names[i]);

    /* Bytes must fit both size_t and the int64 element counts used everywhere.
     * The product of the non-zero extents must fit even when another extent is
     * zero: code elsewhere multiplies extents in any order. */
    uint64_t limit = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : SIZE_MAX;
    int64_t bytes = (int64_t)ly_dtype_size(h->dtype);
    bool empty = false;
    for (int i = 0; i < h->ndim; i++) {
        empty = empty || h->shape[i] == 0;
        if (h->shape[i] == 0) continue;
        if (!ly_checked_mul(bytes, h->shape[i], &bytes) || (uint64_t)bytes > limit) {
            char shape[256];
            npy_shape_str(h->shape, h->ndim, shape, sizeof shape);
            return npy_fail(ctx, LY_E_FORMAT,
                            "shape %s overflows: its size in bytes exceeds %" PRIu64, shape, limit);
        }
    }
    h->payload_bytes = empty ? 0 : (size_t)bytes;
    return LY_OK;
}

static ly_status npy_check_payload(const npy_ctx *ctx, const npy_header *h, size_t actual)
{
    if (actual == h->payload_bytes) return LY_OK;
    char shape[256];
    npy_shape_str(h->shape, h->ndim, shape, sizeof shape);
    if (actual < h->payload_bytes)
        return npy_fail(ctx, LY_E_FORMAT,
                        "payload is truncated: expected %zu bytes for shape %s of %s, got %zu",
                        h->payload_bytes, shape, npy_descr_of(h->dtype), actual);
    return npy_fail(ctx, LY_E_FORMAT,
                    "payload is too long: expected %zu bytes for shape %s of %s, got %zu",
                    h->payload_bytes, shape, npy_descr_of(h->dtype), actual);
}

/* ---- Loading -------------------------------------------------------------- */

ly_status ly_npy_free(ly_tensor *t)
{
    return ly_tensor_free(t);
}

ly_status ly_npy_load_buffer(const void *bytes, size_t size, const char *name_for_messages,
                             ly_tensor *out)
{
    npy_ctx ctx = {"ly_npy_load_buffer", name_for_messages ? name_for_messages : "<buffer>"};
    if (!out) return npy_fail(&ctx, LY_E_INVALID_ARGUMENT, "output tensor is NULL");
    *out = (ly_tensor){0};
    if (!bytes && size > 0) return npy_fail(&ctx, LY_E_INVALID_ARGUMENT, "bytes is NULL");
    const uint8_t *b = bytes;
    size_t at = 0, len = 0;
    ly_status st = npy_parse_preamble(&ctx, b ? b : (const uint8_t *)"", size, &at, &len);
    if (st != LY_OK) return st;
    npy_header h = {0};
    st = npy_parse_dict(&ctx, (const char *)b + at, len, &h);
    if (st != LY_OK) return st;
    size_t data_at = at + len;
    st = npy_check_payload(&ctx, &h, size - data_at);
    if (st != LY_OK) return st;
    st = ly_tensor_alloc(out, h.dtype, h.ndim, h.shape);
    if (st != LY_OK) return st;
    if (h.payload_bytes > 0) memcpy(out->data, b + data_at, h.payload_bytes);
    return LY_OK;
}

/* Read exactly `n` bytes at the current position. */
static ly_status read_exact(const npy_ctx *ctx, int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return npy_fail(ctx, LY_E_IO, "read failed: %s", strerror(errno));
        if (got == 0) return npy_fail(ctx, LY_E_IO, "the file shrank while it was being read");
        p += got;
        n -= (size_t)got;
    }
    return LY_OK;
}

static ly_status npy_load_fd(const npy_ctx *ctx, int fd, ly_tensor *out)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) return npy_fail(ctx, LY_E_IO, "stat failed: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode)) return npy_fail(ctx, LY_E_IO, "not a regular file");
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX)
        return npy_fail(ctx, LY_E_IO, "file too large for this machine");
    size_t total = (size_t)sb.st_size;

    uint8_t preamble[12];
    size_t first = total < sizeof preamble ? total : sizeof preamble;
    ly_status st = read_exact(ctx, fd, preamble, first);
    if (st != LY_OK) return st;
    size_t at = 0, len = 0;
    st = npy_parse_preamble(ctx, preamble, total, &at, &len);
    if (st != LY_OK) return st;

    /* The header text starts inside the preamble buffer for version 1.0. */
    char *text = malloc(len + 1);
    if (!text) return npy_fail(ctx, LY_E_NO_MEMORY, "cannot allocate %zu header bytes", len);
    size_t in_preamble = first - at < len ? first - at : len;
    memcpy(text, preamble + at, in_preamble);
    st = read_exact(ctx, fd, text + in_preamble, len - in_preamble);
    npy_header h = {0};
    if (st == LY_OK) st = npy_parse_dict(ctx, text, len, &h);
    free(text);
    if (st != LY_OK) return st;

    size_t data_at = at + len;
    st = npy_check_payload(ctx, &h, total - data_at);
    if (st != LY_OK) return st;
    st = ly_tensor_alloc(out, h.dtype, h.ndim, h.shape);
    if (st != LY_OK) return st;
    /* The preamble may already hold the first payload bytes of a tiny file. */
    size_t consumed = first > data_at ? first - data_at : 0;
    if (consumed > 0) memcpy(out->data, preamble + data_at, consumed);
    st = read_exact(ctx, fd, (uint8_t *)out->data + consumed, h.payload_bytes - consumed);
    if (st != LY_OK) ly_tensor_free(out);
    return st;
}

ly_status ly_npy_load(const char *path, ly_tensor *out)
{
    npy_ctx ctx = {"ly_npy_load", path ? path : "(null)"};
    if (!out) return npy_fail(&ctx, LY_E_INVALID_ARGUMENT, "output tensor is NULL");
    *out = (ly_tensor){0};
    if (!path || !*path) return npy_fail(&ctx, LY_E_INVALID_ARGUMENT, "path is NULL or empty");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return npy_fail(&ctx, err == ENOENT || err == ENOTDIR ? LY_E_NOT_FOUND : LY_E_IO,
                        "cannot open: %s", strerror(err));
    }
    ly_status st = npy_load_fd(&ctx, fd, out);
    close(fd);
    return st;
}

/* Build the version 1.0 preamble and header, padded with spaces so the payload
 * starts on a 64-byte boundary as NumPy does. With at most LY_MAX_DIMS
 * dimensions the header always fits version 1.0's 16-bit length. */
static size_t npy_build_header(const ly_tensor *t, const char *descr, char *buf, size_t size)
{
    char shape[256];
    npy_shape_str(t->shape, t->ndim, shape, sizeof shape);
    char dict[400];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    size_t dict_len = (size_t)n;
    size_t unpadded = NPY_MAGIC_LEN + 2 + 2 + dict_len + 1;
    size_t total = (unpadded + 63) / 64 * 64;
    if (total > size) return 0;
    size_t header_len = total - (NPY_MAGIC_LEN + 4);
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(header_len & 0xff);
    buf[9] = (char)(header_len >> 8);
    memcpy(buf + 10, dict, dict_len);
    memset(buf + 10 + dict_len, ' ', total - 10 - dict_len - 1);
    buf[total - 1] = '\n';
    return total;
}

static ly_status npy_check_savable(const npy_ctx *ctx, const ly_tensor *t, size_t *bytes)
{
    if (!t) return npy_fail(ctx, LY_E_INVALID_ARGUMENT, "tensor is NULL");
    if (!npy_descr_of(t->dtype))
        return npy_fail(ctx, LY_E_DTYPE, "dtype %d has no .npy descr", (int)t->dtype);
    if (t->ndim < 0 || t->ndim > LY_MAX_DIMS)
        return npy_fail(ctx, LY_E_SHAPE, "ndim %d outside [0, %d]", t->ndim, LY_MAX_DIMS);
    uint64_t limit = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : SIZE_MAX;
    uint64_t total = ly_dtype_size(t->dtype);
    bool empty = false;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return npy_fail(ctx, LY_E_SHAPE, "dim %d is %" PRId64 ", expected >= 0", i,
                            t->shape[i]);
        if (t->shape[i] == 0)
            empty = true;
        else if (total > limit / (uint64_t)t->shape[i])
            return npy_fail(ctx, LY_E_SHAPE, "shape is too large");
        else
            total *= (uint64_t)t->shape[i];
    }
    if (empty) total = 0;
    if (total > 0 && !t->data)
        return npy_fail(ctx, LY_E_INVALID_ARGUMENT, "data is NULL for %" PRIu64 " bytes", total);
    *bytes = (size_t)total;
    return LY_OK;
}

ly_status ly_npy_save(const char *path, const ly_tensor *t)
{
    npy_ctx ctx = {"ly_npy_save", path ? path : "(null)"};
    if (!path || !*path) return npy_fail(&ctx, LY_E_INVALID_ARGUMENT, "path is NULL or empty");
    size_t payload = 0;
    ly_status st = npy_check_savable(&ctx, t, &payload);
    if (st != LY_OK) return st;
    char header[512];
    size_t header_len = npy_build_header(t, npy_descr_of(t->dtype), header, sizeof header);
    if (header_len == 0) return npy_fail(&ctx, LY_E_INTERNAL, "header does not fit");

    char what[1024];
    snprintf(what, sizeof what, "%s: %s", ctx.func, ctx.name);
    ly_atomic_file f;
    st = ly_atomic_file_begin(&f, path, what);
    if (st != LY_OK) return st;
    ly_atomic_file_write(&f, header, header_len);
    ly_atomic_file_write(&f, t->data, payload);
    return ly_atomic_file_commit(&f);
}
