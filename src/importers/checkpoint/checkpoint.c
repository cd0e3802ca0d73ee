/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint reader: LibreYOLO .pt files (torch.save zip archives, PyTorch 1.6+
 * and 2.x layouts) and .safetensors files, into f32/i64 C-contiguous tensors
 * plus LibreYOLO's metadata (yolo9.md section 1.4).
 *
 * The whole file is read into memory once; tensors are converted out of it and
 * the file buffer is released before ly_checkpoint_open returns, so a
 * checkpoint costs its converted tensors and nothing more.
 */
#include "importers/checkpoint/checkpoint_internal.h"
#include "libreyolo/quant.h"

#include "core/core.h"
#include "importers/checkpoint/zip.h"
#include "libreyolo/io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Storages and safetensors payloads are little-endian and read as is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint reader assumes a little-endian host"
#endif

#define CK_MAX_ELEMENTS (INT64_MAX / 8)

typedef struct ck_tensor {
    char *name;
    ly_tensor t;
    ly_elem stored; /* the element type in the file */
} ck_tensor;

typedef enum ck_meta_kind { CK_META_STR, CK_META_INT, CK_META_OTHER } ck_meta_kind;

typedef struct ck_meta {
    char *key;
    ck_meta_kind kind;
    char *str;
    int64_t integer;
    const char *type_phrase; /* static: "a str", "an int", "None", ... */
} ck_meta;

struct ly_checkpoint {
    char *context; /* "ly_checkpoint_open: <file>" */
    ck_tensor *tensors;
    size_t count, cap;
    const ck_tensor **sorted;
    ck_meta *meta;
    size_t meta_count, meta_cap;
    char **names;
    size_t names_count;
    bool has_names;
    /* Converted bytes so far and the most a file of this size may expand to:
     * stride-0 views and many tensors sharing one storage could otherwise
     * turn a small file into an allocation of any size. */
    uint64_t converted, converted_limit;
};

ly_status ly_ck_fail(const ly_checkpoint *ck, ly_status status, const char *fmt, ...)
{
    char what[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ly_set_error(status, "%s: %s", ck->context, what);
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

/* ---- Element conversion --------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            /* Subnormal: shift the mantissa up to a leading 1, lowering the exponent. */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) {
                mant <<= 1;
                exp--;
            }
            bits = sign | exp << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float load_float(const uint8_t *p, ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_F32: {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    case LY_ELEM_F64: {
        double d;
        memcpy(&d, p, sizeof d);
        return (float)d;
    }
    case LY_ELEM_F16:
        return half_to_float((uint16_t)(p[0] | p[1] << 8));
    case LY_ELEM_BF16: {
        uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    case LY_ELEM_F8E4M3:
        return ly_e4m3_to_fp32(p[0]); /* exact: every code is an f32 */
    default:
        return 0.0f;
    }
}

static int64_t load_int(const uint8_t *p, ly_elem elem)
{
    switch (elem) {
    case LY_ELEM_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I16: {
        int16_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case LY_ELEM_I8:
        return (int8_t)p[0];
    case LY_ELEM_U8:
        return p[0];
    case LY_ELEM_BOOL:
        return p[0] != 0;
    default:
        return 0;
    }
}

/* Convert `n` elements spaced `stride` elements apart, starting at `src`. */
static void convert_run(void *dst, const uint8_t *src, int64_t n, int64_t stride, ly_elem elem,
                        bool to_float)
{
    size_t esize = ly_elem_size(elem);
    size_t step = (size_t)stride * esize;
    if (to_float) {
        float *out = dst;
        if (elem == LY_ELEM_F32 && stride == 1) {
            memcpy(out, src, (size_t)n * sizeof *out);
            return;
        }
        for (int64_t i = 0; i < n; i++, src += step)
            out[i] = load_float(src, elem);
    } else {
        int64_t *out = dst;
        if (elem == LY_ELEM_I64 && stride == 1) {
            memcpy(out, src, (size_t)n * sizeof *out);
            return;
        }
        for (int64_t i = 0; i < n; i++, src += step)
            out[i] = load_int(src, elem);
    }
}

static void shape_text(char *buf, size_t size, int ndim, const int64_t *v)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", v[i]);
    if (used < size) snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
}

/* `items` with room for one more than `len` (doubling), or NULL when out of
 * memory, in which case `items` is unchanged. */
static void *grow_array(void *items, size_t *cap, size_t len, size_t item_size)
{
    if (len < *cap) return items;
    size_t new_cap = *cap ? *cap * 2 : 64;
    if (new_cap > SIZE_MAX / item_size) return NULL;
    void *grown = realloc(items, new_cap * item_size);
    if (grown) *cap = new_cap;
    return grown;
}

ly_status ly_ck_add_tensor(ly_checkpoint *ck, const char *key, ly_elem elem, const uint8_t *base,
                           uint64_t base_bytes, const char *base_what, int64_t offset, int ndim,
                           const int64_t *shape, const int64_t *stride)
{
    if (strncmp(key, "module.", 7) == 0) key += 7;
    char shape_buf[160], stride_buf[160];
    if (elem == LY_ELEM_UNTYPED || ly_elem_size(elem) == 0)
        return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has no element type", key);
    if (ndim < 0 || ndim > LY_MAX_DIMS)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' has %d dimensions, at most %d are supported", key, ndim,
                          LY_MAX_DIMS);
    int64_t contiguous[LY_MAX_DIMS];
    int64_t numel = 1;
    bool empty = false;
    for (int d = ndim; d-- > 0;) {
        if (shape[d] < 0 || (stride && stride[d] < 0))
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has a negative size or stride", key);
        contiguous[d] = numel;
        if (shape[d] == 0)
            empty = true;
        else if (numel > CK_MAX_ELEMENTS / shape[d])
            return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has too many elements", key);
        else
            numel *= shape[d];
    }
    if (empty) numel = 0;
    if (!stride) stride = contiguous;
    if (offset < 0) return ly_ck_fail(ck, LY_E_FORMAT, "tensor '%s' has a negative offset", key);

    const size_t esize = ly_elem_size(elem);
    if (numel > 0) {
        /* The last element the view touches must lie inside the base. */
        uint64_t last = (uint64_t)offset;
        bool overflow = last > (uint64_t)CK_MAX_ELEMENTS;
        for (int d = 0; d < ndim && !overflow; d++) {
            if (shape[d] <= 1 || stride[d] == 0) continue;
            if ((uint64_t)stride[d] > (uint64_t)CK_MAX_ELEMENTS / (uint64_t)(shape[d] - 1)) {
                overflow = true;
                break;
            }
            last += (uint64_t)(shape[d] - 1) * (uint64_t)stride[d];
            overflow = last > (uint64_t)CK_MAX_ELEMENTS;
        }
        if (overflow || last >= base_bytes / esize) {
            shape_text(shape_buf, sizeof shape_buf, ndim, shape);
            shape_text(stride_buf, sizeof stride_buf, ndim, stride);
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "tensor '%s' (offset %" PRId64 ", size %s, stride %s, %s) reaches "
                              "past the end of %s, which holds %" PRIu64 " bytes",
                              key, offset, shape_buf, stride_buf, ly_elem_name(elem), base_what,
                              base_bytes);
        }
    }

    bool to_float = ly_elem_is_float(elem);
    const size_t out_size = to_float ? sizeof(float) : sizeof(int64_t);
    if ((uint64_t)numel > (ck->converted_limit - ck->converted) / out_size)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "tensor '%s' (%" PRId64 " elements) brings the converted tensors past "
                          "%" PRIu64 " bytes, more than a file of this size can hold (views "
                          "repeating storage elements?)",
                          key, numel, ck->converted_limit);
    ck->converted += (uint64_t)numel * out_size;
    ck_tensor *grown = grow_array(ck->tensors, &ck->cap, ck->count, sizeof *ck->tensors);
    if (!grown) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot grow the tensor table");
    ck->tensors = grown;
    ck_tensor *t = &ck->tensors[ck->count];
    *t = (ck_tensor){0};
    ly_status st = ly_tensor_alloc(&t->t, to_float ? LY_F32 : LY_I64, ndim, shape);
    if (st != LY_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ly_last_error());
        return ly_ck_fail(ck, st, "tensor '%s': %s", key, why);
    }
    t->stored = elem;
    t->name = dup_string(key);
    if (!t->name) {
        ly_tensor_free(&t->t);
        return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy the name of tensor '%s'", key);
    }
    ck->count++;
    if (numel == 0) return LY_OK;

    bool is_contiguous = true;
    for (int d = 0; d < ndim; d++)
        if (shape[d] > 1 && stride[d] != contiguous[d]) is_contiguous = false;
    uint8_t *out = t->t.data;
    if (is_contiguous || ndim == 0) {
        convert_run(out, base + (size_t)offset * esize, numel, 1, elem, to_float);
        return LY_OK;
    }
    /* Odometer over all but the last dimension; the last one is a strided run. */
    int64_t idx[LY_MAX_DIMS] = {0};
    const int inner = ndim - 1;
    const int64_t run = shape[inner];
    for (int64_t done = 0; done < numel; done += run) {
        int64_t at = offset;
        for (int d = 0; d < inner; d++)
            at += idx[d] * stride[d];
        convert_run(out, base + (size_t)at * esize, run, stride[inner], elem, to_float);
        out += (size_t)run * out_size;
        for (int d = inner; d-- > 0;) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
    return LY_OK;
}

/* ---- Metadata ------------------------------------------------------------------- */

/* Appended, never replaced in place: lookups take the last entry of a key, as
 * a Python dict keeps the last value, and a pickle with many keys costs O(n). */
static ck_meta *meta_slot(ly_checkpoint *ck, const char *key, ly_status *st)
{
    ck_meta *grown = grow_array(ck->meta, &ck->meta_cap, ck->meta_count, sizeof *ck->meta);
    if (!grown) {
        *st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot grow the metadata table");
        return NULL;
    }
    ck->meta = grown;
    ck_meta *m = &ck->meta[ck->meta_count];
    *m = (ck_meta){.key = dup_string(key)};
    if (!m->key) {
        *st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy metadata key '%s'", key);
        return NULL;
    }
    ck->meta_count++;
    *st = LY_OK;
    return m;
}

ly_status ly_ck_add_meta_string(ly_checkpoint *ck, const char *key, const char *value)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_STR;
    m->type_phrase = "a str";
    m->str = dup_string(value);
    if (!m->str) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy metadata '%s'", key);
    return LY_OK;
}

ly_status ly_ck_add_meta_int(ly_checkpoint *ck, const char *key, int64_t value)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_INT;
    m->type_phrase = "an int";
    m->integer = value;
    return LY_OK;
}

ly_status ly_ck_add_meta_other(ly_checkpoint *ck, const char *key, const char *type_phrase)
{
    ly_status st;
    ck_meta *m = meta_slot(ck, key, &st);
    if (!m) return st;
    m->kind = CK_META_OTHER;
    m->type_phrase = type_phrase;
    return LY_OK;
}

ly_status ly_ck_names_reserve(ly_checkpoint *ck, size_t count)
{
    if (count > LY_CK_MAX_CLASSES)
        return ly_ck_fail(ck, LY_E_FORMAT, "'names' has %zu classes, at most %zu are supported",
                          count, LY_CK_MAX_CLASSES);
    for (size_t i = 0; i < ck->names_count; i++)
        free(ck->names[i]);
    free(ck->names);
    ck->names = calloc(count ? count : 1, sizeof *ck->names);
    ck->names_count = 0;
    ck->has_names = false;
    if (!ck->names) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate %zu class names", count);
    ck->names_count = count;
    ck->has_names = true;
    return LY_OK;
}

ly_status ly_ck_names_set(ly_checkpoint *ck, size_t index, const char *name)
{
    if (index >= ck->names_count)
        return ly_ck_fail(ck, LY_E_INTERNAL, "class index %zu outside the %zu reserved", index,
                          ck->names_count);
    char *copy = dup_string(name);
    if (!copy) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy class name %zu", index);
    free(ck->names[index]);
    ck->names[index] = copy;
    return LY_OK;
}

/* ---- PyTorch archives ----------------------------------------------------------- */

/* A string value usable as a C string (no NUL inside). */
static bool pv_c_string(const ly_pv *v)
{
    return v && v->kind == LY_PV_STR && strlen(v->u.str.bytes) == v->u.str.len;
}

static ly_status torch_names(ly_checkpoint *ck, const ly_pv *names)
{
    if (names->kind == LY_PV_LIST || names->kind == LY_PV_TUPLE) {
        ly_status st = ly_ck_names_reserve(ck, names->u.seq.len);
        for (size_t i = 0; st == LY_OK && i < names->u.seq.len; i++) {
            const ly_pv *name = names->u.seq.items[i];
            if (!pv_c_string(name))
                return ly_ck_fail(ck, LY_E_FORMAT, "'names'[%zu] is %s, expected a str", i,
                                  ly_pv_a(name));
            st = ly_ck_names_set(ck, i, name->u.str.bytes);
        }
        return st;
    }
    if (names->kind != LY_PV_DICT)
        return ly_ck_fail(ck, LY_E_FORMAT, "'names' is %s, expected dict[int, str] or list[str]",
                          ly_pv_a(names));
    size_t count = 0;
    for (size_t i = 0; i < names->u.dict.len; i++) {
        const ly_pv *k = names->u.dict.items[2 * i], *v = names->u.dict.items[2 * i + 1];
        if (k->kind != LY_PV_INT || k->u.integer < 0 || (uint64_t)k->u.integer >= LY_CK_MAX_CLASSES)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "'names' has %s key%s, expected class indices 0 to %zu", ly_pv_a(k),
                              k->kind == LY_PV_INT ? " out of range" : "", LY_CK_MAX_CLASSES - 1);
        if (!pv_c_string(v))
            return ly_ck_fail(ck, LY_E_FORMAT, "'names'[%lld] is %s, expected a str",
                              (long long)k->u.integer, ly_pv_a(v));
        if ((size_t)k->u.integer + 1 > count) count = (size_t)k->u.integer + 1;
    }
    ly_status st = ly_ck_names_reserve(ck, count);
    for (size_t i = 0; st == LY_OK && i < names->u.dict.len; i++)
        st = ly_ck_names_set(ck, (size_t)names->u.dict.items[2 * i]->u.integer,
                             names->u.dict.items[2 * i + 1]->u.str.bytes);
    return st;
}

/* LibreYOLO's quantization manifest (quantized-checkpoints.md 4), a flat
 * dict, as "quant.<key>" metadata: strings, ints (bools as 0/1), and lists of
 * strings joined by newlines (keep_high_precision). */
static ly_status quant_manifest(ly_checkpoint *ck, const ly_pv *dict)
{
    for (size_t i = 0; i < dict->u.dict.len; i++) {
        const ly_pv *k = dict->u.dict.items[2 * i], *v = dict->u.dict.items[2 * i + 1];
        if (!pv_c_string(k)) continue;
        char key[96];
        if ((size_t)snprintf(key, sizeof key, "quant.%s", k->u.str.bytes) >= sizeof key) continue;
        ly_status st = LY_OK;
        if (pv_c_string(v)) {
            st = ly_ck_add_meta_string(ck, key, v->u.str.bytes);
        } else if (v->kind == LY_PV_INT || v->kind == LY_PV_BOOL) {
            st = ly_ck_add_meta_int(ck, key, v->kind == LY_PV_INT ? v->u.integer : v->u.boolean);
        } else if (v->kind == LY_PV_LIST || v->kind == LY_PV_TUPLE) {
            size_t len = 1;
            bool strings = true;
            for (size_t j = 0; j < v->u.seq.len; j++) {
                strings = strings && pv_c_string(v->u.seq.items[j]);
                if (strings) len += v->u.seq.items[j]->u.str.len + 1;
            }
            if (!strings) {
                st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
            } else {
                char *joined = calloc(1, len);
                if (!joined) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot copy '%s'", key);
                for (size_t j = 0; j < v->u.seq.len; j++) {
                    if (j) strcat(joined, "\n");
                    strcat(joined, v->u.seq.items[j]->u.str.bytes);
                }
                st = ly_ck_add_meta_string(ck, key, joined);
                free(joined);
            }
        } else {
            st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        }
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

static ly_status torch_metadata(ly_checkpoint *ck, const ly_pv *top, const char *state_key)
{
    for (size_t i = 0; i < top->u.dict.len; i++) {
        const ly_pv *k = top->u.dict.items[2 * i], *v = top->u.dict.items[2 * i + 1];
        if (!pv_c_string(k) || strcmp(k->u.str.bytes, state_key) == 0) continue;
        const char *key = k->u.str.bytes;
        ly_status st;
        if (strcmp(key, "names") == 0) {
            st = torch_names(ck, v);
            if (st == LY_OK) st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        } else if (v->kind == LY_PV_STR) {
            if (!pv_c_string(v))
                return ly_ck_fail(ck, LY_E_FORMAT, "metadata '%s' holds a NUL character", key);
            st = ly_ck_add_meta_string(ck, key, v->u.str.bytes);
        } else if (v->kind == LY_PV_INT) {
            st = ly_ck_add_meta_int(ck, key, v->u.integer);
        } else if (strcmp(key, "quant") == 0 && v->kind == LY_PV_DICT) {
            st = quant_manifest(ck, v);
            if (st == LY_OK) st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        } else {
            /* Training state (optimizer, ema, ...) is not read, tensors included. */
            st = ly_ck_add_meta_other(ck, key, ly_pv_a(v));
        }
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

typedef struct torch_archive {
    ly_zip zip;
    const char *stem;
    size_t stem_len;
    bool *verified; /* per zip entry: CRC already checked */
} torch_archive;

static ly_status torch_storage_bytes(ly_checkpoint *ck, torch_archive *ar, const char *key,
                                     const ly_pv_storage *s, const uint8_t **bytes, uint64_t *size)
{
    size_t key_len = strlen(s->key);
    size_t name_len = ar->stem_len + 6 + key_len;
    char *name = malloc(name_len + 1);
    if (!name) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate a record name");
    memcpy(name, ar->stem, ar->stem_len);
    memcpy(name + ar->stem_len, "/data/", 6);
    memcpy(name + ar->stem_len + 6, s->key, key_len + 1);
    const ly_zip_entry *e = ly_zip_find(&ar->zip, name);
    ly_status st = LY_OK;
    if (!e) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "tensor '%s': its storage '%s' is missing: the archive has no record '%s'",
                        key, s->key, name);
        free(name);
        return st;
    }
    size_t index = (size_t)(e - ar->zip.entries);
    size_t got = 0;
    if (!ar->verified[index]) {
        st = ly_zip_read(&ar->zip, e, bytes, &got);
        if (st != LY_OK) {
            free(name);
            return st;
        }
        ar->verified[index] = true;
    }
    *bytes = ar->zip.data + e->data_at;
    uint64_t needed = (uint64_t)s->numel * ly_elem_size(s->elem);
    if (e->size < needed) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "tensor '%s': record '%s' holds %" PRIu64 " bytes, but its storage "
                        "declares %" PRId64 " %s elements (%" PRIu64 " bytes)",
                        key, name, e->size, s->numel, ly_elem_name(s->elem), needed);
    }
    *size = needed;
    free(name);
    return st;
}

static ly_status torch_state_dict(ly_checkpoint *ck, torch_archive *ar, const ly_pv *sd)
{
    char what[256];
    for (size_t i = 0; i < sd->u.dict.len; i++) {
        const ly_pv *k = sd->u.dict.items[2 * i], *v = sd->u.dict.items[2 * i + 1];
        if (!pv_c_string(k))
            return ly_ck_fail(ck, LY_E_FORMAT, "state dict key %zu is %s, expected a str", i,
                              ly_pv_a(k));
        const char *key = k->u.str.bytes;
        if (v->kind != LY_PV_TENSOR)
            return ly_ck_fail(ck, LY_E_FORMAT, "state dict entry '%s' is %s, expected a tensor",
                              key, ly_pv_a(v));
        const ly_pv_tensor *t = v->u.tensor;
        const ly_pv_storage *s = t->storage->u.storage;
        const uint8_t *bytes = NULL;
        uint64_t size = 0;
        ly_status st = torch_storage_bytes(ck, ar, key, s, &bytes, &size);
        if (st != LY_OK) return st;
        snprintf(what, sizeof what, "its storage '%.200s'", s->key);
        st = ly_ck_add_tensor(ck, key, t->elem, bytes, size, what, t->offset, t->ndim, t->shape,
                              t->stride);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

/* The state dict and where metadata lives: {"model": sd, meta...},
 * {"state_dict": sd, ...} or a bare state dict. */
static ly_status torch_top_level(ly_checkpoint *ck, torch_archive *ar, const ly_pv *root)
{
    if (root->kind != LY_PV_DICT)
        return ly_ck_fail(ck, LY_E_FORMAT,
                          "the pickled object is %s, expected a dict (a state dict or "
                          "LibreYOLO's checkpoint dict)",
                          ly_pv_a(root));
    static const char *const wrappers[] = {"model", "state_dict"};
    for (size_t w = 0; w < 2; w++) {
        const ly_pv *sd = ly_pv_dict_get(root, wrappers[w]);
        if (!sd || sd->kind == LY_PV_TENSOR) continue; /* a tensor: a bare state dict's key */
        if (sd->kind != LY_PV_DICT)
            return ly_ck_fail(ck, LY_E_FORMAT, "'%s' is %s, expected a state dict of tensors",
                              wrappers[w], ly_pv_a(sd));
        ly_status st = torch_state_dict(ck, ar, sd);
        if (st == LY_OK) st = torch_metadata(ck, root, wrappers[w]);
        return st;
    }
    if (root->u.dict.len == 0)
        return ly_ck_fail(ck, LY_E_FORMAT, "the checkpoint is an empty dict: no state dict");
    for (size_t i = 0; i < root->u.dict.len; i++) {
        const ly_pv *k = root->u.dict.items[2 * i], *v = root->u.dict.items[2 * i + 1];
        if (v->kind != LY_PV_TENSOR)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "no state dict: there is no 'model' or 'state_dict' entry, and entry "
                              "'%.200s' is %s, so this is not a bare state dict of tensors either",
                              pv_c_string(k) ? k->u.str.bytes : "?", ly_pv_a(v));
    }
    return torch_state_dict(ck, ar, root);
}

static ly_status torch_load(ly_checkpoint *ck, const uint8_t *data, size_t size)
{
    torch_archive ar = {0};
    ly_pickle *pickle = NULL;
    char *pickle_context = NULL, *byteorder_name = NULL;
    ly_status st = ly_zip_open(&ar.zip, data, size, ck->context);
    if (st != LY_OK) return st;

    /* torch.save puts every record under one folder, "<stem>/". */
    const ly_zip_entry *pkl = NULL;
    for (size_t i = 0; i < ar.zip.count; i++) {
        const char *name = ar.zip.entries[i].name;
        const char *slash = strchr(name, '/');
        if (!slash || slash == name || strcmp(slash, "/data.pkl") != 0) continue;
        if (pkl) {
            st = ly_ck_fail(ck, LY_E_FORMAT,
                            "two pickles, '%s' and '%s': which one is the checkpoint?", pkl->name,
                            name);
            goto done;
        }
        pkl = &ar.zip.entries[i];
    }
    if (!pkl) {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "missing data.pkl: none of the %zu zip entries is '<folder>/data.pkl', so "
                        "this is not a torch.save checkpoint",
                        ar.zip.count);
        goto done;
    }
    ar.stem = pkl->name;
    ar.stem_len = (size_t)(strchr(pkl->name, '/') - pkl->name);
    ar.verified = calloc(ar.zip.count, sizeof *ar.verified);
    pickle_context = malloc(strlen(ck->context) + strlen(pkl->name) + 3);
    if (!ar.verified || !pickle_context) {
        st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the archive state");
        goto done;
    }
    sprintf(pickle_context, "%s: %s", ck->context, pkl->name);

    /* PyTorch 2.x records the writer's byte order; storages are raw memory. */
    byteorder_name = malloc(ar.stem_len + sizeof "/byteorder");
    if (!byteorder_name) {
        st = ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate a record name");
        goto done;
    }
    memcpy(byteorder_name, ar.stem, ar.stem_len);
    memcpy(byteorder_name + ar.stem_len, "/byteorder", sizeof "/byteorder");
    const ly_zip_entry *bo = ly_zip_find(&ar.zip, byteorder_name);
    if (bo) {
        const uint8_t *text;
        size_t len;
        st = ly_zip_read(&ar.zip, bo, &text, &len);
        if (st != LY_OK) goto done;
        if (len == 3 && memcmp(text, "big", 3) == 0) {
            st = ly_ck_fail(ck, LY_E_UNSUPPORTED,
                            "'%s' says the checkpoint was written on a big-endian machine; only "
                            "little-endian storages are supported",
                            byteorder_name);
            goto done;
        }
        if (len != 6 || memcmp(text, "little", 6) != 0) {
            st = ly_ck_fail(ck, LY_E_FORMAT, "'%s' is neither \"little\" nor \"big\"",
                            byteorder_name);
            goto done;
        }
    }

    const uint8_t *pkl_bytes;
    size_t pkl_size;
    st = ly_zip_read(&ar.zip, pkl, &pkl_bytes, &pkl_size);
    if (st != LY_OK) goto done;
    const ly_pv *root = NULL;
    st = ly_pickle_load(pkl_bytes, pkl_size, pickle_context, &pickle, &root);
    if (st != LY_OK) goto done;
    st = torch_top_level(ck, &ar, root);

done:
    ly_pickle_free(pickle);
    free(pickle_context);
    free(byteorder_name);
    free(ar.verified);
    ly_zip_close(&ar.zip);
    return st;
}

/* ---- Open / close ------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const ck_tensor *const *)a)->name, (*(const ck_tensor *const *)b)->name);
}

static ly_status ck_finish(ly_checkpoint *ck)
{
    ck->sorted = malloc((ck->count ? ck->count : 1) * sizeof *ck->sorted);
    if (!ck->sorted) return ly_ck_fail(ck, LY_E_NO_MEMORY, "cannot allocate the tensor index");
    for (size_t i = 0; i < ck->count; i++)
        ck->sorted[i] = &ck->tensors[i];
    qsort(ck->sorted, ck->count, sizeof *ck->sorted, cmp_tensor_name);
    for (size_t i = 1; i < ck->count; i++)
        if (strcmp(ck->sorted[i - 1]->name, ck->sorted[i]->name) == 0)
            return ly_ck_fail(ck, LY_E_FORMAT,
                              "two tensors are named '%s' (once a 'module.' prefix is removed)",
                              ck->sorted[i]->name);
    return LY_OK;
}

static ly_status ck_load(const uint8_t *data, size_t size, const char *func, const char *name,
                         ly_checkpoint **out)
{
    ly_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck)
        return ly_set_error(LY_E_NO_MEMORY, "%s: %s: cannot allocate a checkpoint", func, name);
    size_t len = strlen(func) + strlen(name) + 3;
    ck->context = malloc(len);
    if (!ck->context) {
        free(ck);
        return ly_set_error(LY_E_NO_MEMORY, "%s: %s: cannot allocate a checkpoint", func, name);
    }
    snprintf(ck->context, len, "%s: %s", func, name);
    /* int8/bool storages widen 8x to i64; tied weights may repeat a storage. */
    ck->converted_limit = (uint64_t)size * 16 + ((uint64_t)256 << 20);

    ly_status st;
    static const uint8_t legacy_magic[4] = {0x80, 0x02, 0x8a, 0x0a};
    if (size == 0) {
        st = ly_ck_fail(ck, LY_E_FORMAT, "the file is empty");
    } else if (ly_zip_looks_like(data, size)) {
        st = torch_load(ck, data, size);
    } else if (size >= 9 && data[8] == '{') {
        st = ly_safetensors_load(ck, data, size);
    } else if (size >= 4 && memcmp(data, legacy_magic, 4) == 0) {
        st = ly_ck_fail(ck, LY_E_UNSUPPORTED,
                        "this is a legacy (PyTorch < 1.6, not zip) torch.save file; re-save it "
                        "with a current PyTorch");
    } else {
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "not a checkpoint: neither a zip archive (a .pt written by torch.save) "
                        "nor a .safetensors file");
    }
    if (st == LY_OK) st = ck_finish(ck);
    if (st != LY_OK) {
        ly_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return LY_OK;
}

static ly_status read_whole_file(const char *path, uint8_t **out, size_t *size)
{
    const char *func = "ly_checkpoint_open";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return ly_set_error(err == ENOENT || err == ENOTDIR ? LY_E_NOT_FOUND : LY_E_IO,
                            "%s: %s: cannot open: %s", func, path, strerror(err));
    }
    struct stat sb;
    ly_status st = LY_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb) != 0) {
        st = ly_set_error(LY_E_IO, "%s: %s: stat failed: %s", func, path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = ly_set_error(LY_E_IO, "%s: %s: not a regular file", func, path);
    } else if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 1) {
        st = ly_set_error(LY_E_IO, "%s: %s: too large to read", func, path);
    } else {
        size_t total = (size_t)sb.st_size;
        buf = malloc(total ? total : 1);
        if (!buf)
            st = ly_set_error(LY_E_NO_MEMORY, "%s: %s: cannot allocate %zu bytes", func, path,
                              total);
        size_t done = 0;
        while (st == LY_OK && done < total) {
            ssize_t got = read(fd, buf + done, total - done);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                st = ly_set_error(LY_E_IO, "%s: %s: read failed: %s", func, path, strerror(errno));
            else if (got == 0)
                st = ly_set_error(LY_E_IO, "%s: %s: the file shrank while being read", func, path);
            else
                done += (size_t)got;
        }
        *size = total;
    }
    close(fd);
    if (st != LY_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return LY_OK;
}

ly_status ly_checkpoint_open(const char *path, ly_checkpoint **out)
{
    if (!path || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_open: %s is NULL",
                            !path ? "path" : "out");
    *out = NULL;
    uint8_t *data = NULL;
    size_t size = 0;
    ly_status st = read_whole_file(path, &data, &size);
    if (st != LY_OK) return st;
    st = ck_load(data, size, "ly_checkpoint_open", path, out);
    free(data);
    return st;
}

ly_status ly_checkpoint_open_buffer(const void *bytes, size_t size, const char *name,
                                    ly_checkpoint **out)
{
    if (!out || (!bytes && size))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_open_buffer: %s is NULL",
                            !out ? "out" : "bytes");
    *out = NULL;
    /* Tensors are converted out of `bytes`; nothing keeps pointing into them. */
    return ck_load(bytes, size, "ly_checkpoint_open_buffer", name ? name : "<memory>", out);
}

ly_status ly_checkpoint_close(ly_checkpoint *ck)
{
    if (!ck) return LY_OK;
    for (size_t i = 0; i < ck->count; i++) {
        free(ck->tensors[i].name);
        ly_tensor_free(&ck->tensors[i].t);
    }
    free(ck->tensors);
    free(ck->sorted);
    for (size_t i = 0; i < ck->meta_count; i++) {
        free(ck->meta[i].key);
        free(ck->meta[i].str);
    }
    free(ck->meta);
    for (size_t i = 0; i < ck->names_count; i++)
        free(ck->names[i]);
    free(ck->names);
    free(ck->context);
    free(ck);
    return LY_OK;
}

/* ---- Queries ------------------------------------------------------------------ */

ly_status ly_checkpoint_tensor_count(const ly_checkpoint *ck, size_t *count)
{
    if (!ck || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_tensor_count: %s is NULL",
                            !ck ? "checkpoint" : "count");
    *count = ck->count;
    return LY_OK;
}

ly_status ly_checkpoint_tensor_at(const ly_checkpoint *ck, size_t index, const char **name,
                                  ly_tensor *view)
{
    if (!ck)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_tensor_at: checkpoint is NULL");
    if (index >= ck->count)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_checkpoint_tensor_at: index %zu is out of range (%zu tensors)",
                            index, ck->count);
    if (name) *name = ck->tensors[index].name;
    if (view) *view = ck->tensors[index].t;
    return LY_OK;
}

/* The tensor named `name` (binary search of the sorted table), or NULL with
 * LY_E_NOT_FOUND set. */
static const ck_tensor *find_tensor(const ly_checkpoint *ck, const char *name)
{
    size_t lo = 0, hi = ck->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->sorted[mid]->name, name);
        if (c == 0) return ck->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    ly_set_error(LY_E_NOT_FOUND, "%s: no tensor named '%s'", ck->context, name);
    return NULL;
}

ly_status ly_checkpoint_find(const ly_checkpoint *ck, const char *name, ly_tensor *view)
{
    if (!ck || !name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_find: %s is NULL",
                            !ck ? "checkpoint" : "name");
    const ck_tensor *t = find_tensor(ck, name);
    if (!t) return LY_E_NOT_FOUND;
    if (view) *view = t->t;
    return LY_OK;
}

ly_status ly_checkpoint_stored_dtype(const ly_checkpoint *ck, const char *name, const char **dtype)
{
    if (!ck || !name || !dtype)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_stored_dtype: NULL argument");
    const ck_tensor *t = find_tensor(ck, name);
    if (!t) return LY_E_NOT_FOUND;
    *dtype = ly_elem_name(t->stored);
    return LY_OK;
}

static const ck_meta *meta_find(const ly_checkpoint *ck, const char *key)
{
    for (size_t i = ck->meta_count; i-- > 0;)
        if (strcmp(ck->meta[i].key, key) == 0) return &ck->meta[i];
    return NULL;
}

ly_status ly_checkpoint_meta_string(const ly_checkpoint *ck, const char *key, const char **value)
{
    if (!ck || !key || !value)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_meta_string: NULL argument");
    const ck_meta *m = meta_find(ck, key);
    if (!m) return ly_set_error(LY_E_NOT_FOUND, "%s: no metadata '%s'", ck->context, key);
    if (m->kind != CK_META_STR)
        return ly_set_error(LY_E_DTYPE, "%s: metadata '%s' is %s, not a str", ck->context, key,
                            m->type_phrase);
    *value = m->str;
    return LY_OK;
}

/* A whole decimal integer, optionally signed, that fits in int64. */
static bool parse_int64(const char *s, int64_t *out)
{
    bool negative = *s == '-';
    if (*s == '-' || *s == '+') s++;
    if (*s < '0' || *s > '9') return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > ((uint64_t)INT64_MAX + 1 - (uint64_t)(*s - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (*s != '\0' || (!negative && v > (uint64_t)INT64_MAX)) return false;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

ly_status ly_checkpoint_meta_int(const ly_checkpoint *ck, const char *key, int64_t *value)
{
    if (!ck || !key || !value)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_meta_int: NULL argument");
    const ck_meta *m = meta_find(ck, key);
    if (!m) return ly_set_error(LY_E_NOT_FOUND, "%s: no metadata '%s'", ck->context, key);
    if (m->kind == CK_META_INT) {
        *value = m->integer;
        return LY_OK;
    }
    /* safetensors metadata holds only strings: "80" is nc 80 there. */
    if (m->kind == CK_META_STR && parse_int64(m->str, value)) return LY_OK;
    return ly_set_error(LY_E_DTYPE, "%s: metadata '%s' is %s, not an integer", ck->context, key,
                        m->type_phrase);
}

ly_status ly_checkpoint_class_names(const ly_checkpoint *ck, size_t *count,
                                    const char *const **names)
{
    if (!ck || !count || !names)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_class_names: NULL argument");
    if (!ck->has_names) return ly_set_error(LY_E_NOT_FOUND, "%s: no 'names' metadata", ck->context);
    *count = ck->names_count;
    *names = (const char *const *)ck->names;
    return LY_OK;
}
