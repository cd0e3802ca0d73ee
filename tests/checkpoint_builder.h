/* SPDX-License-Identifier: MIT */
/*
 * Builders for checkpoint tests: byte buffers, pickle opcodes, zip archives laid
 * out as torch.save writes them, safetensors files. Shared by test_checkpoint.c
 * and test_fuzz_checkpoint.c (include after cmocka.h). The CRC-32 here is the
 * bitwise textbook one, independent of the library's table-driven version.
 */
#ifndef LY_TESTS_CHECKPOINT_BUILDER_H
#define LY_TESTS_CHECKPOINT_BUILDER_H

#include "libreyolo/libreyolo.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bbuf {
    uint8_t *p;
    size_t n, cap;
} bbuf;

static inline void b_put(bbuf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        assert_non_null(grown);
        b->p = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void b_free(bbuf *b)
{
    free(b->p);
    *b = (bbuf){0};
}

static inline void b_u8(bbuf *b, uint8_t v)
{
    b_put(b, &v, 1);
}

static inline void b_le(bbuf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b_u8(b, (uint8_t)(v >> (8 * i)));
}

static inline void b_str(bbuf *b, const char *s)
{
    b_put(b, s, strlen(s));
}

static inline uint32_t test_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* ---- Pickle ------------------------------------------------------------------ */

static inline void pk_proto(bbuf *b, int proto)
{
    b_u8(b, 0x80);
    b_u8(b, (uint8_t)proto);
}

static inline void pk_op(bbuf *b, uint8_t op)
{
    b_u8(b, op);
}

static inline void pk_str(bbuf *b, const char *s)
{
    b_u8(b, 'X');
    b_le(b, strlen(s), 4);
    b_str(b, s);
}

static inline void pk_int(bbuf *b, int64_t v)
{
    if (v >= 0 && v < 256) {
        b_u8(b, 'K');
        b_u8(b, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        b_u8(b, 'M');
        b_le(b, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        b_u8(b, 'J');
        b_le(b, (uint64_t)v, 4);
    } else {
        b_u8(b, 0x8a);
        b_u8(b, 8);
        b_le(b, (uint64_t)v, 8);
    }
}

static inline void pk_global(bbuf *b, const char *module, const char *name)
{
    b_u8(b, 'c');
    b_str(b, module);
    b_u8(b, '\n');
    b_str(b, name);
    b_u8(b, '\n');
}

static inline void pk_int_tuple(bbuf *b, int n, const int64_t *v)
{
    pk_op(b, '(');
    for (int i = 0; i < n; i++)
        pk_int(b, v[i]);
    pk_op(b, 't');
}

/* _rebuild_tensor_v2(('storage', torch.<storage_type>, key, 'cpu', numel), offset,
 * shape, stride, False, OrderedDict()) as torch 1.13 and 2.x pickle a tensor.
 * `stride` NULL: C-contiguous. */
static inline void pk_tensor(bbuf *b, const char *storage_type, const char *key, int64_t numel,
                             int64_t offset, int ndim, const int64_t *shape, const int64_t *stride)
{
    int64_t contiguous[8];
    int64_t s = 1;
    for (int d = ndim; d-- > 0;) {
        contiguous[d] = s;
        s *= shape[d];
    }
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    pk_op(b, '(');
    pk_op(b, '(');
    pk_str(b, "storage");
    pk_global(b, "torch", storage_type);
    pk_str(b, key);
    pk_str(b, "cpu");
    pk_int(b, numel);
    pk_op(b, 't');
    pk_op(b, 'Q');
    pk_int(b, offset);
    pk_int_tuple(b, ndim, shape);
    pk_int_tuple(b, ndim, stride ? stride : contiguous);
    pk_op(b, 0x89);
    pk_global(b, "collections", "OrderedDict");
    pk_op(b, ')');
    pk_op(b, 'R');
    pk_op(b, 't');
    pk_op(b, 'R');
}

/* ---- Zip ----------------------------------------------------------------------- */

typedef struct zentry {
    char name[96];
    const uint8_t *data;
    size_t len;
    uint16_t method;
} zentry;

#define ZB_ZIP64_END 1   /* ZIP64 end record and locator, as PyTorch always writes */
#define ZB_ZIP64_EXTRA 2 /* sizes and offsets through ZIP64 extra fields (files > 4 GB) */

/* Lay `n` entries out as PyTorch's writer does: data-descriptor flag with zero
 * sizes in local headers, an "FB" extra field padding data to 64 bytes, a
 * 16-byte data descriptor after each entry, then the central directory and
 * the end records chosen by `flags`. */
static inline void zip_build(bbuf *out, const zentry *e, size_t n, int flags)
{
    const bool zip64 = flags & ZB_ZIP64_END, extra64 = flags & ZB_ZIP64_EXTRA;
    uint64_t *offsets = calloc(n ? n : 1, sizeof *offsets);
    assert_non_null(offsets);
    for (size_t i = 0; i < n; i++) {
        offsets[i] = out->n;
        size_t name_len = strlen(e[i].name);
        size_t header_end = out->n + 30 + name_len + 4;
        size_t pad = (64 - header_end % 64) % 64;
        b_le(out, 0x04034b50u, 4);
        b_le(out, 0, 2);      /* version needed */
        b_le(out, 0x0808, 2); /* data descriptor, UTF-8 names */
        b_le(out, e[i].method, 2);
        b_le(out, 0, 4); /* time, date */
        b_le(out, 0, 4); /* crc: in the descriptor */
        b_le(out, 0, 4);
        b_le(out, 0, 4);
        b_le(out, name_len, 2);
        b_le(out, 4 + pad, 2);
        b_str(out, e[i].name);
        b_str(out, "FB");
        b_le(out, pad, 2);
        for (size_t k = 0; k < pad; k++)
            b_u8(out, 'Z');
        b_put(out, e[i].data, e[i].len);
        b_le(out, 0x08074b50u, 4);
        b_le(out, test_crc32(e[i].data, e[i].len), 4);
        b_le(out, e[i].len, 4);
        b_le(out, e[i].len, 4);
    }
    uint64_t cd_at = out->n;
    for (size_t i = 0; i < n; i++) {
        size_t name_len = strlen(e[i].name);
        b_le(out, 0x02014b50u, 4);
        b_le(out, 0, 2);
        b_le(out, 0, 2);
        b_le(out, 0x0808, 2);
        b_le(out, e[i].method, 2);
        b_le(out, 0, 4);
        b_le(out, test_crc32(e[i].data, e[i].len), 4);
        b_le(out, extra64 ? 0xffffffffu : e[i].len, 4);
        b_le(out, extra64 ? 0xffffffffu : e[i].len, 4);
        b_le(out, name_len, 2);
        b_le(out, extra64 ? 8 + 28 : 0, 2); /* extra: an unrelated field, then ZIP64 */
        b_le(out, 0, 2);                    /* comment */
        b_le(out, 0, 2);                    /* disk */
        b_le(out, 0, 2);
        b_le(out, 0, 4);
        b_le(out, extra64 ? 0xffffffffu : offsets[i], 4);
        b_str(out, e[i].name);
        if (extra64) {
            b_le(out, 0x5455, 2); /* extended timestamp, skipped by readers */
            b_le(out, 4, 2);
            b_le(out, 0, 4);
            b_le(out, 0x0001, 2);
            b_le(out, 24, 2);
            b_le(out, e[i].len, 8); /* uncompressed */
            b_le(out, e[i].len, 8); /* compressed */
            b_le(out, offsets[i], 8);
        }
    }
    uint64_t cd_size = out->n - cd_at;
    if (zip64) {
        uint64_t z64_at = out->n;
        b_le(out, 0x06064b50u, 4);
        b_le(out, 44, 8);
        b_le(out, 0x1e, 2);
        b_le(out, 0x2d, 2);
        b_le(out, 0, 4);
        b_le(out, 0, 4);
        b_le(out, n, 8);
        b_le(out, n, 8);
        b_le(out, cd_size, 8);
        b_le(out, cd_at, 8);
        b_le(out, 0x07064b50u, 4);
        b_le(out, 0, 4);
        b_le(out, z64_at, 8);
        b_le(out, 1, 4);
    }
    b_le(out, 0x06054b50u, 4);
    b_le(out, 0, 2);
    b_le(out, 0, 2);
    b_le(out, n, 2);
    b_le(out, n, 2);
    b_le(out, cd_size, 4);
    b_le(out, cd_at, 4);
    b_le(out, 0, 2);
    free(offsets);
}

static inline zentry zent(const char *name, const void *data, size_t len)
{
    zentry e = {.data = data, .len = len};
    size_t n = strlen(name);
    assert_true(n < sizeof e.name);
    memcpy(e.name, name, n + 1);
    return e;
}

/* ---- A small LibreYOLO checkpoint ------------------------------------------------ */

/* Storage payloads of the small checkpoint. */
typedef struct small_storages {
    float weight[6];    /* key "0": module.a.weight (2, 3) */
    float bias_src[8];  /* key "1": a.bias (3,) viewed at offset 2, stride 2 */
    int64_t tracked[1]; /* key "2": bn.num_batches_tracked () */
    uint16_t half[4];   /* key "3": c.half (2, 2) transposed view */
} small_storages;

static inline void small_storages_init(small_storages *s)
{
    for (int i = 0; i < 6; i++)
        s->weight[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 8; i++)
        s->bias_src[i] = (float)(10 + i);
    s->tracked[0] = 12345;
    /* 1.0, 2.0, -0.5, 65504 in IEEE half */
    s->half[0] = 0x3c00;
    s->half[1] = 0x4000;
    s->half[2] = 0xb800;
    s->half[3] = 0x7bff;
}

/* The data.pkl of {"model": OrderedDict(...), metadata..., "optimizer": None,
 * "ema": {"model": {"x": tensor on storage "9" (not in the archive)}}}. */
static inline void small_pickle(bbuf *b, int proto)
{
    pk_proto(b, proto);
    pk_op(b, '}');
    pk_op(b, '(');
    pk_str(b, "model");
    pk_global(b, "collections", "OrderedDict");
    pk_op(b, ')');
    pk_op(b, 'R');
    pk_op(b, '(');
    pk_str(b, "module.a.weight");
    pk_tensor(b, "FloatStorage", "0", 6, 0, 2, (const int64_t[]){2, 3}, NULL);
    pk_str(b, "a.bias");
    pk_tensor(b, "FloatStorage", "1", 8, 2, 1, (const int64_t[]){3}, (const int64_t[]){2});
    pk_str(b, "bn.num_batches_tracked");
    pk_tensor(b, "LongStorage", "2", 1, 0, 0, NULL, NULL);
    pk_str(b, "c.half");
    pk_tensor(b, "HalfStorage", "3", 4, 0, 2, (const int64_t[]){2, 2}, (const int64_t[]){1, 2});
    pk_op(b, 'u');
    pk_str(b, "schema_version");
    pk_str(b, "1.0");
    pk_str(b, "model_family");
    pk_str(b, "yolo9");
    pk_str(b, "size");
    pk_str(b, "t");
    pk_str(b, "task");
    pk_str(b, "detect");
    pk_str(b, "nc");
    pk_int(b, 2);
    pk_str(b, "names");
    pk_op(b, '}');
    pk_op(b, '(');
    pk_int(b, 0);
    pk_str(b, "person");
    pk_int(b, 1);
    pk_str(b, "bicycle");
    pk_op(b, 'u');
    pk_str(b, "imgsz");
    pk_int(b, 640);
    pk_str(b, "optimizer");
    pk_op(b, 'N');
    pk_str(b, "ema");
    pk_op(b, '}');
    pk_str(b, "model");
    pk_op(b, '}');
    pk_str(b, "x");
    pk_tensor(b, "FloatStorage", "9", 1, 0, 1, (const int64_t[]){1}, NULL);
    pk_op(b, 's');
    pk_op(b, 's');
    pk_op(b, 'u');
    pk_op(b, '.');
}

/* The small checkpoint's zip around `pickle` (torch 1.13 layout, or 2.x with
 * byteorder and .data records when `v2`), with zip_build `flags`. */
static inline void small_zip(bbuf *out, const small_storages *s, const uint8_t *pickle,
                             size_t pickle_len, bool v2, int flags)
{
    const char *stem = v2 ? "archive" : "small";
    char names[9][64];
    zentry e[9];
    size_t n = 0;
    snprintf(names[n], 64, "%s/data.pkl", stem);
    e[n] = zent(names[n], pickle, pickle_len), n++;
    if (v2) {
        snprintf(names[n], 64, "%s/byteorder", stem);
        e[n] = zent(names[n], "little", 6), n++;
    }
    snprintf(names[n], 64, "%s/data/0", stem);
    e[n] = zent(names[n], s->weight, sizeof s->weight), n++;
    snprintf(names[n], 64, "%s/data/1", stem);
    e[n] = zent(names[n], s->bias_src, sizeof s->bias_src), n++;
    snprintf(names[n], 64, "%s/data/2", stem);
    e[n] = zent(names[n], s->tracked, sizeof s->tracked), n++;
    snprintf(names[n], 64, "%s/data/3", stem);
    e[n] = zent(names[n], s->half, sizeof s->half), n++;
    snprintf(names[n], 64, "%s/version", stem);
    e[n] = zent(names[n], "3\n", 2), n++;
    if (v2) {
        snprintf(names[n], 64, "%s/.data/serialization_id", stem);
        e[n] = zent(names[n], "1234567890123456789012345678901234567890", 40), n++;
        snprintf(names[n], 64, "%s/.data/version", stem);
        e[n] = zent(names[n], "3\n", 2), n++;
    }
    zip_build(out, e, n, flags);
}

/* A zip holding only "<stem>/data.pkl" = `pickle`: enough to reach the unpickler. */
static inline void pickle_only_zip(bbuf *out, const uint8_t *pickle, size_t len)
{
    zentry e = zent("p/data.pkl", pickle, len);
    zip_build(out, &e, 1, 0);
}

/* ---- safetensors ------------------------------------------------------------------ */

/* A safetensors file with header `json` (padded to 8 bytes) and `data`. */
static inline void safetensors_build(bbuf *out, const char *json, const void *data, size_t len)
{
    size_t n = strlen(json);
    size_t pad = (8 - n % 8) % 8;
    b_le(out, n + pad, 8);
    b_str(out, json);
    for (size_t i = 0; i < pad; i++)
        b_u8(out, ' ');
    b_put(out, data, len);
}

/* One tensor of a .safetensors file being written: its header entry (after
 * others: a leading comma) and its bytes. */
static inline void st_entry(bbuf *json, bbuf *data, const char *name, const ly_tensor *t)
{
    size_t bytes = (size_t)ly_tensor_numel(t) * (t->dtype == LY_I64 ? 8 : 4), at = data->n;
    char entry[512];
    int k = snprintf(entry, sizeof entry, ", \"%s\": {\"dtype\": \"%s\", \"shape\": [", name,
                     t->dtype == LY_I64 ? "I64" : "F32");
    for (int d = 0; d < t->ndim; d++)
        k += snprintf(entry + k, sizeof entry - (size_t)k, d ? ", %lld" : "%lld",
                      (long long)t->shape[d]);
    snprintf(entry + k, sizeof entry - (size_t)k, "], \"data_offsets\": [%zu, %zu]}", at,
             at + bytes);
    b_str(json, entry);
    b_put(data, t->data, bytes);
}

/* The header closed and the file written at `path` (both buffers freed). */
static inline void st_finish(bbuf *json, bbuf *data, const char *path)
{
    b_str(json, "}");
    b_u8(json, 0);
    bbuf file = {0};
    safetensors_build(&file, (const char *)json->p, data->p, data->n);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(file.p, 1, file.n, f), file.n);
    fclose(f);
    b_free(json);
    b_free(data);
    b_free(&file);
}

#endif
