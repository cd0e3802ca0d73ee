/* SPDX-License-Identifier: MIT */
/* A strict reader for the members of a .tgz (gzip over POSIX ustar, with pax and
 * GNU long-name headers), just enough for npm package tarballs: the archive is
 * hash-checked before it gets here, so strictness is about never mistaking a
 * damaged or unexpected archive for a good one. */
#include "io/fetch/fetch_internal.h"

#include "core/checked.h"
#include "core/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { BLOCK = 512, CHUNK = 1 << 16, MAX_META = 1 << 20 };

typedef struct gz_in {
    FILE *f;
    z_stream z;
    bool z_ready, stream_end;
    const char *path, *label;
    uint64_t consumed, file_size;
    ly_progress_fn progress;
    void *user;
    const char *what;
    uint64_t reported;
    unsigned char in[CHUNK];
} gz_in;

static ly_status truncated(const gz_in *g, const char *during)
{
    return ly_set_error(LY_E_FORMAT, "%s: truncated archive: it ends inside %s", g->label, during);
}

/* Exactly `n` decompressed bytes into `out` (NULL: skip them). */
static ly_status gz_read(gz_in *g, unsigned char *out, uint64_t n, const char *during)
{
    unsigned char sink[4096];
    while (n > 0) {
        size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
        if (!out && want > sizeof sink) want = sizeof sink;
        g->z.next_out = out ? out : sink;
        g->z.avail_out = (uInt)want;
        while (g->z.avail_out > 0) {
            if (g->stream_end) return truncated(g, during);
            if (g->z.avail_in == 0) {
                size_t got = fread(g->in, 1, sizeof g->in, g->f);
                if (got == 0) {
                    if (ferror(g->f))
                        return ly_set_error(LY_E_IO, "%s: read error: %s", g->path,
                                            strerror(errno));
                    return truncated(g, during);
                }
                g->consumed += got;
                g->z.next_in = g->in;
                g->z.avail_in = (uInt)got;
                /* Whole percents only: the callback may redraw a terminal line. */
                if (g->progress && g->file_size &&
                    g->consumed * 100 / g->file_size != g->reported * 100 / g->file_size) {
                    g->progress(g->what, g->consumed, g->file_size, g->user);
                    g->reported = g->consumed;
                }
            }
            int ret = inflate(&g->z, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) {
                g->stream_end = true;
            } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
                return ly_set_error(LY_E_FORMAT, "%s: corrupt gzip data (%s)", g->label,
                                    g->z.msg ? g->z.msg : zError(ret));
            }
        }
        size_t got = want;
        if (out) out += got;
        n -= got;
    }
    return LY_OK;
}

static bool all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

/* A numeric header field: octal digits (space/NUL padded) or, with the high
 * bit of the first byte set, a big-endian base-256 number (GNU, for >8 GiB). */
static bool parse_number(const unsigned char *field, size_t len, uint64_t *value)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        if (field[0] != 0x80) return false; /* negative or above 2^(8·(len-1)) */
        for (size_t i = 1; i < len; i++) {
            if (v >> 55) return false; /* sizes stay below 2^63, as int64 counts them */
            v = v << 8 | field[i];
        }
        *value = v;
        return true;
    }
    size_t i = 0;
    while (i < len && field[i] == ' ')
        i++;
    size_t digits = 0;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v >> 60) return false;
        v = v << 3 | (uint64_t)(field[i] - '0');
    }
    for (; i < len; i++)
        if (field[i] != ' ' && field[i] != '\0') return false;
    if (digits == 0) return false;
    *value = v;
    return true;
}

static bool checksum_ok(const unsigned char *h)
{
    uint64_t stored;
    if (!parse_number(h + 148, 8, &stored)) return false;
    uint64_t sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += (i >= 148 && i < 156) ? (unsigned char)' ' : h[i];
    return sum == stored;
}

/* A NUL-terminated copy of a fixed-width header field. */
static void field_string(const unsigned char *field, size_t len, char *out)
{
    size_t n = 0;
    while (n < len && field[n])
        n++;
    memcpy(out, field, n);
    out[n] = '\0';
}

/* pax records "<len> <key>=<value>\n": the path and size that override the
 * next header's. */
static ly_status parse_pax(const gz_in *g, const char *data, size_t size, char **path,
                           uint64_t *pax_size, bool *has_size)
{
    size_t pos = 0;
    while (pos < size) {
        size_t len = 0, i = pos;
        while (i < size && data[i] >= '0' && data[i] <= '9' && len < size)
            len = len * 10 + (size_t)(data[i++] - '0');
        if (i == pos || i >= size || data[i] != ' ' || len < 5 || len > size - pos ||
            data[pos + len - 1] != '\n')
            return ly_set_error(LY_E_FORMAT, "%s: corrupt pax header record at byte %zu", g->label,
                                pos);
        const char *key = data + i + 1, *end = data + pos + len - 1;
        const char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq)
            return ly_set_error(LY_E_FORMAT, "%s: pax header record without '=' at byte %zu",
                                g->label, pos);
        size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(key, "path", 4) == 0) {
            free(*path);
            if (!(*path = strndup(eq + 1, vlen)))
                return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", g->label);
        } else if (klen == 4 && memcmp(key, "size", 4) == 0) {
            int64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return ly_set_error(LY_E_FORMAT, "%s: bad pax size", g->label);
            for (size_t k = 0; k < vlen; k++) {
                char c = eq[1 + k];
                if (c < '0' || c > '9' || !ly_checked_mul(v, 10, &v) ||
                    !ly_checked_add(v, c - '0', &v))
                    return ly_set_error(LY_E_FORMAT, "%s: bad pax size", g->label);
            }
            *pax_size = (uint64_t)v;
            *has_size = true;
        }
        pos += len;
    }
    return LY_OK;
}

/* The whole blocks holding `size` bytes; false when they overflow int64. */
static bool padded_size(uint64_t size, uint64_t *padded)
{
    int64_t end;
    if (size > (uint64_t)INT64_MAX || !ly_checked_add((int64_t)size, BLOCK - 1, &end)) return false;
    *padded = (uint64_t)(end / BLOCK * BLOCK);
    return true;
}

/* The data of a metadata entry (pax header, GNU long name), NUL-terminated. */
static ly_status read_meta(gz_in *g, uint64_t size, char **out)
{
    if (size > MAX_META)
        return ly_set_error(LY_E_FORMAT, "%s: a %llu-byte metadata header (at most %d expected)",
                            g->label, (unsigned long long)size, MAX_META);
    uint64_t padded = (size + BLOCK - 1) / BLOCK * BLOCK; /* size <= MAX_META */
    char *data = malloc((size_t)padded + 1);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", g->label);
    ly_status st = gz_read(g, (unsigned char *)data, padded, "a metadata header");
    if (st != LY_OK) {
        free(data);
        return st;
    }
    data[size] = '\0';
    *out = data;
    return LY_OK;
}

static ly_status walk(gz_in *g, ly_targz_member *members, size_t n)
{
    size_t left = n;
    char *pax_path = NULL, *long_name = NULL;
    uint64_t pax_size = 0;
    bool has_pax_size = false;
    ly_status st = LY_OK;
    unsigned char h[BLOCK];
    while (left > 0) {
        if ((st = gz_read(g, h, BLOCK, "a header")) != LY_OK) break;
        if (all_zero(h, BLOCK)) break; /* end of archive: what is missing stays missing */
        if (!checksum_ok(h)) {
            st = ly_set_error(LY_E_FORMAT, "%s: corrupt archive: a header checksum does not match",
                              g->label);
            break;
        }
        bool posix = memcmp(h + 257,
                            "ustar\0"
                            "00",
                            8) == 0;
        bool gnu = memcmp(h + 257, "ustar  \0", 8) == 0;
        if (!posix && !gnu) {
            st = ly_set_error(LY_E_FORMAT, "%s: not a ustar archive (unknown header magic)",
                              g->label);
            break;
        }
        uint64_t size;
        if (!parse_number(h + 124, 12, &size)) {
            st = ly_set_error(LY_E_FORMAT, "%s: corrupt archive: bad size field", g->label);
            break;
        }
        char type = (char)h[156];
        if (type == 'x' || type == 'g' || type == 'L') {
            char *meta = NULL;
            if ((st = read_meta(g, size, &meta)) != LY_OK) break;
            if (type == 'x') {
                st = parse_pax(g, meta, (size_t)size, &pax_path, &pax_size, &has_pax_size);
            } else if (type == 'L') {
                free(long_name);
                long_name = meta;
                meta = NULL;
            }
            free(meta);
            if (st != LY_OK) break;
            continue;
        }
        if (has_pax_size) size = pax_size;
        char name[256 + 2], prefix[156], base[101];
        field_string(h, 100, base);
        field_string(h + 345, 155, prefix);
        if (posix && prefix[0])
            snprintf(name, sizeof name, "%s/%s", prefix, base);
        else
            snprintf(name, sizeof name, "%s", base);
        const char *full = pax_path ? pax_path : long_name ? long_name : name;
        ly_targz_member *m = NULL;
        if (type == '0' || type == '\0' || type == '7')
            for (size_t i = 0; i < n; i++)
                if (!members[i].data && strcmp(members[i].name, full) == 0) m = &members[i];
        uint64_t padded;
        if (!padded_size(size, &padded)) {
            st = ly_set_error(LY_E_FORMAT, "%s: corrupt archive: %s claims %llu bytes", g->label,
                              full, (unsigned long long)size);
            break;
        }
        if (m) {
            if (size != m->size) {
                st = ly_set_error(LY_E_FORMAT, "%s: %s has %llu bytes, expected %llu", g->label,
                                  full, (unsigned long long)size, (unsigned long long)m->size);
                break;
            }
            m->data = malloc(size ? (size_t)size : 1);
            if (!m->data) {
                st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory for %s (%llu bytes)", g->label,
                                  full, (unsigned long long)size);
                break;
            }
            if ((st = gz_read(g, m->data, size, full)) != LY_OK) break;
            if ((st = gz_read(g, NULL, padded - size, full)) != LY_OK) break;
            left--;
        } else if ((st = gz_read(g, NULL, padded, full)) != LY_OK) {
            break;
        }
        free(pax_path);
        free(long_name);
        pax_path = long_name = NULL;
        has_pax_size = false;
    }
    free(pax_path);
    free(long_name);
    if (st == LY_OK)
        for (size_t i = 0; i < n; i++)
            if (!members[i].data) {
                st = ly_set_error(LY_E_FORMAT, "%s: the archive has no member %s", g->label,
                                  members[i].name);
                break;
            }
    return st;
}

ly_status ly_targz_extract(const char *path, const char *label, ly_targz_member *members, size_t n,
                           ly_progress_fn progress, void *user, const char *what)
{
    for (size_t i = 0; i < n; i++)
        members[i].data = NULL;
    gz_in *g = calloc(1, sizeof *g);
    if (!g) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", path);
    g->path = path;
    g->label = label ? label : path;
    g->progress = progress;
    g->user = user;
    g->what = what;
    ly_status st = LY_OK;
    struct stat sb;
    if (!(g->f = fopen(path, "rb"))) {
        st = ly_set_error(LY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (fstat(fileno(g->f), &sb) != 0) {
        st = ly_set_error(LY_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
        st = ly_set_error(LY_E_NO_MEMORY, "%s: cannot start zlib", path);
    } else {
        g->z_ready = true;
        g->file_size = (uint64_t)sb.st_size;
        st = walk(g, members, n);
    }
    if (g->z_ready) inflateEnd(&g->z);
    if (g->f) fclose(g->f);
    free(g);
    if (st != LY_OK)
        for (size_t i = 0; i < n; i++) {
            free(members[i].data);
            members[i].data = NULL;
        }
    return st;
}
