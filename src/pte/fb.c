/* SPDX-License-Identifier: MIT */
#include "pte/fb.h"

#include "core/checked.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FlatBuffers offsets are 32-bit; stay clear of the sign bit as the reference builder does. */
#define FB_MAX_SIZE 0x7FFFFFF0u

/* ---- Builder ------------------------------------------------------------ */

void fb_init(fb_builder *b)
{
    memset(b, 0, sizeof *b);
    b->minalign = 1;
}

void fb_free(fb_builder *b)
{
    free(b->buf);
    free(b->vtables);
    memset(b, 0, sizeof *b);
}

static uint8_t *fb_push(fb_builder *b, size_t n)
{
    if (b->failed) return NULL;
    if (n > FB_MAX_SIZE - b->size) {
        b->failed = true;
        return NULL;
    }
    if (b->cap - b->size < n) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->size < n)
            cap *= 2;
        uint8_t *nb = malloc(cap);
        if (!nb) {
            b->failed = true;
            return NULL;
        }
        if (b->size) memcpy(nb + cap - b->size, b->buf + b->cap - b->size, b->size);
        free(b->buf);
        b->buf = nb;
        b->cap = cap;
    }
    b->size += n;
    uint8_t *p = b->buf + b->cap - b->size;
    memset(p, 0, n);
    return p;
}

/* Pad so that after `len` more bytes the size is a multiple of `align` (a power of two). */
static void fb_prealign(fb_builder *b, size_t len, size_t align)
{
    if (align > b->minalign) b->minalign = align;
    size_t pad = (~(b->size + len) + 1) & (align - 1);
    if (pad) fb_push(b, pad);
}

fb_ref fb_string_n(fb_builder *b, const char *s, size_t len)
{
    if (len > FB_MAX_SIZE) {
        b->failed = true;
        return 0;
    }
    fb_prealign(b, len + 1, 4);
    uint8_t *p = fb_push(b, len + 1);
    if (!p) return 0;
    if (len) memcpy(p, s, len);
    p = fb_push(b, 4);
    if (!p) return 0;
    fb_st32(p, (uint32_t)len);
    return (fb_ref)b->size;
}

fb_ref fb_string(fb_builder *b, const char *s)
{
    return s ? fb_string_n(b, s, strlen(s)) : 0;
}

fb_ref fb_vec_scalars(fb_builder *b, const void *elems, size_t count, size_t elem_size,
                      size_t align)
{
    if (count > FB_MAX_SIZE / elem_size || (count && !elems)) {
        b->failed = true;
        return 0;
    }
    size_t n = count * elem_size;
    fb_prealign(b, n, 4);
    fb_prealign(b, n, align > elem_size ? align : elem_size);
    uint8_t *p = fb_push(b, n);
    if (!p) return 0;
    const uint8_t *src = elems;
    for (size_t i = 0; i < count; i++, src += elem_size) {
        switch (elem_size) {
        case 1:
            p[i] = *src;
            break;
        case 2: {
            uint16_t v;
            memcpy(&v, src, 2);
            fb_st16(p + 2 * i, v);
            break;
        }
        case 4: {
            uint32_t v;
            memcpy(&v, src, 4);
            fb_st32(p + 4 * i, v);
            break;
        }
        default: {
            uint64_t v;
            memcpy(&v, src, 8);
            fb_st64(p + 8 * i, v);
            break;
        }
        }
    }
    p = fb_push(b, 4);
    if (!p) return 0;
    fb_st32(p, (uint32_t)count);
    return (fb_ref)b->size;
}

fb_ref fb_vec_refs(fb_builder *b, const fb_ref *refs, size_t count)
{
    if (count > FB_MAX_SIZE / 4) {
        b->failed = true;
        return 0;
    }
    fb_prealign(b, count * 4, 4);
    uint8_t *p = fb_push(b, count * 4);
    if (!p) return 0;
    for (size_t i = 0; i < count; i++) {
        /* An offset is stored relative to its own position: distance(elem) - distance(obj). */
        size_t at = b->size - 4 * i;
        if (refs[i] == 0 || refs[i] >= at) {
            b->failed = true;
            return 0;
        }
        fb_st32(p + 4 * i, (uint32_t)(at - refs[i]));
    }
    p = fb_push(b, 4);
    if (!p) return 0;
    fb_st32(p, (uint32_t)count);
    return (fb_ref)b->size;
}

void fb_table_start(fb_builder *b)
{
    if (b->in_table) b->failed = true; /* tables cannot nest while being built */
    b->in_table = true;
    b->table_start = b->size;
    memset(b->field_loc, 0, sizeof b->field_loc);
    b->max_slot = -1;
}

static uint8_t *fb_field(fb_builder *b, int slot, size_t n)
{
    if (!b->in_table || slot < 0 || slot >= FB_MAX_SLOTS) {
        b->failed = true;
        return NULL;
    }
    fb_prealign(b, n, n);
    uint8_t *p = fb_push(b, n);
    if (!p) return NULL;
    b->field_loc[slot] = (uint32_t)b->size;
    if (slot > b->max_slot) b->max_slot = slot;
    return p;
}

void fb_add_u8(fb_builder *b, int slot, uint8_t v, uint8_t def)
{
    uint8_t *p = v == def ? NULL : fb_field(b, slot, 1);
    if (p) *p = v;
}

void fb_add_u16(fb_builder *b, int slot, uint16_t v, uint16_t def)
{
    uint8_t *p = v == def ? NULL : fb_field(b, slot, 2);
    if (p) fb_st16(p, v);
}

void fb_add_u32(fb_builder *b, int slot, uint32_t v, uint32_t def)
{
    uint8_t *p = v == def ? NULL : fb_field(b, slot, 4);
    if (p) fb_st32(p, v);
}

void fb_add_u64(fb_builder *b, int slot, uint64_t v, uint64_t def)
{
    uint8_t *p = v == def ? NULL : fb_field(b, slot, 8);
    if (p) fb_st64(p, v);
}

/* Floats are compared by bits: -0.0 and NaN payloads survive a round trip. */
void fb_add_f32(fb_builder *b, int slot, float v, float def)
{
    uint32_t bits, dbits;
    memcpy(&bits, &v, 4);
    memcpy(&dbits, &def, 4);
    fb_add_u32(b, slot, bits, dbits);
}

void fb_add_f64(fb_builder *b, int slot, double v, double def)
{
    uint64_t bits, dbits;
    memcpy(&bits, &v, 8);
    memcpy(&dbits, &def, 8);
    fb_add_u64(b, slot, bits, dbits);
}

void fb_add_ref(fb_builder *b, int slot, fb_ref ref)
{
    if (!ref) return;
    if (!b->in_table || slot < 0 || slot >= FB_MAX_SLOTS) {
        b->failed = true;
        return;
    }
    fb_prealign(b, 4, 4);
    size_t at = b->size + 4;
    if (ref >= at) {
        b->failed = true;
        return;
    }
    uint8_t *p = fb_push(b, 4);
    if (!p) return;
    fb_st32(p, (uint32_t)(at - ref));
    b->field_loc[slot] = (uint32_t)b->size;
    if (slot > b->max_slot) b->max_slot = slot;
}

fb_ref fb_table_end(fb_builder *b)
{
    if (!b->in_table) b->failed = true;
    b->in_table = false;
    fb_prealign(b, 4, 4);
    if (!fb_push(b, 4)) return 0; /* the soffset to the vtable, patched below */
    size_t table = b->size;
    size_t obj_size = table - b->table_start;
    int nslots = b->max_slot + 1;
    size_t vt_size = 4 + 2 * (size_t)nslots;
    if (obj_size > 0xFFFF) {
        b->failed = true;
        return 0;
    }
    uint8_t vt[4 + 2 * FB_MAX_SLOTS];
    fb_st16(vt, (uint16_t)vt_size);
    fb_st16(vt + 2, (uint16_t)obj_size);
    for (int s = 0; s < nslots; s++)
        fb_st16(vt + 4 + 2 * s, (uint16_t)(b->field_loc[s] ? table - b->field_loc[s] : 0));

    size_t vt_ref = 0;
    for (size_t i = 0; i < b->n_vtables && !vt_ref; i++) {
        const uint8_t *old = b->buf + b->cap - b->vtables[i];
        if (fb_ld16(old) == vt_size && memcmp(old, vt, vt_size) == 0) vt_ref = b->vtables[i];
    }
    if (!vt_ref) {
        uint8_t *p = fb_push(b, vt_size);
        if (!p) return 0;
        memcpy(p, vt, vt_size);
        vt_ref = b->size;
        if (b->n_vtables == b->cap_vtables) {
            size_t cap = b->cap_vtables ? 2 * b->cap_vtables : 16;
            uint32_t *nv = realloc(b->vtables, cap * sizeof *nv);
            if (!nv) {
                b->failed = true;
                return 0;
            }
            b->vtables = nv;
            b->cap_vtables = cap;
        }
        b->vtables[b->n_vtables++] = (uint32_t)vt_ref;
    }
    /* table - vtable, in bytes: positive when the vtable sits before the table. */
    int64_t soff = (int64_t)vt_ref - (int64_t)table;
    fb_st32(b->buf + b->cap - table, (uint32_t)(int32_t)soff);
    return (fb_ref)table;
}

bool fb_finish(fb_builder *b, fb_ref root, const char *identifier, uint8_t **out, size_t *out_size)
{
    *out = NULL;
    *out_size = 0;
    if (b->in_table || !root) b->failed = true;
    fb_prealign(b, 8, b->minalign);
    uint8_t *p = fb_push(b, 4);
    if (p) memcpy(p, identifier, 4);
    size_t at = b->size + 4;
    p = fb_push(b, 4);
    if (!p || b->failed) return false;
    fb_st32(p, (uint32_t)(at - root));
    *out = malloc(b->size);
    if (!*out) return false;
    memcpy(*out, b->buf + b->cap - b->size, b->size);
    *out_size = b->size;
    return true;
}

/* ---- Reader ------------------------------------------------------------- */

void fb_reader_init(fb_reader *r, const uint8_t *buf, size_t size, const char *what)
{
    memset(r, 0, sizeof *r);
    r->buf = buf;
    r->size = size;
    r->what = what;
    /* Without shared sub-objects every table costs at least 4 bytes and every element one. */
    r->tables_left = size / 2 + 64;
    r->elems_left = 2 * (uint64_t)size + 4096;
}

bool fb_fail(fb_reader *r, const char *field, const char *fmt, ...)
{
    if (r->failed) return false;
    r->failed = true;
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *sep = r->path_len && field ? "." : "";
    if (!r->path_len && !field)
        snprintf(r->msg, sizeof r->msg, "%s: %s", r->what, detail);
    else
        snprintf(r->msg, sizeof r->msg, "%s: %s%s%s: %s", r->what, r->path, sep, field ? field : "",
                 detail);
    return false;
}

size_t fb_path_push(fb_reader *r, const char *name, long index)
{
    size_t saved = r->path_len;
    size_t room = sizeof r->path - r->path_len;
    int n;
    const char *dot = r->path_len && name[0] && name[0] != '(' ? "." : "";
    if (index >= 0)
        n = snprintf(r->path + r->path_len, room, "%s%s[%ld]", dot, name, index);
    else
        n = snprintf(r->path + r->path_len, room, "%s%s", dot, name);
    if (n < 0) n = 0;
    r->path_len = (size_t)n < room ? r->path_len + (size_t)n : sizeof r->path - 1;
    return saved;
}

void fb_path_pop(fb_reader *r, size_t saved)
{
    r->path_len = saved;
    r->path[saved] = '\0';
}

bool fb_charge(fb_reader *r, uint64_t n)
{
    if (r->failed) return false;
    if (n > r->elems_left)
        return fb_fail(r, NULL,
                       "more vector elements than a buffer of %zu bytes can hold "
                       "(shared sub-objects?)",
                       r->size);
    r->elems_left -= n;
    return true;
}

/* Whether `len` bytes at `pos` lie inside the buffer: a sum of sizes read
 * from the buffer, in checked arithmetic (src/core/checked.h). */
static bool inside(const fb_reader *r, uint64_t pos, uint64_t len)
{
    int64_t end = 0;
    return pos <= INT64_MAX && len <= INT64_MAX &&
           ly_checked_add((int64_t)pos, (int64_t)len, &end) && (uint64_t)end <= r->size;
}

bool fb_table_at(fb_reader *r, uint32_t pos, fb_table *t)
{
    if (r->failed) return false;
    if (r->tables_left == 0)
        return fb_fail(r, NULL,
                       "more tables than a buffer of %zu bytes can hold "
                       "(shared sub-objects?)",
                       r->size);
    r->tables_left--;
    if (pos % 4 || !inside(r, pos, 4))
        return fb_fail(r, NULL, "table at offset %u is outside the %zu-byte buffer or misaligned",
                       pos, r->size);
    int32_t soff = (int32_t)fb_ld32(r->buf + pos);
    int64_t vt = (int64_t)pos - soff;
    if (vt < 0 || vt % 2 || !inside(r, (uint64_t)vt, 4))
        return fb_fail(r, NULL, "vtable of the table at offset %u is outside the buffer", pos);
    uint16_t vt_size = fb_ld16(r->buf + vt), obj = fb_ld16(r->buf + vt + 2);
    if (vt_size < 4 || vt_size % 2 || !inside(r, (uint64_t)vt, vt_size))
        return fb_fail(r, NULL, "vtable at offset %lld has a bad size %u", (long long)vt, vt_size);
    if (obj < 4 || !inside(r, pos, obj))
        return fb_fail(r, NULL, "table at offset %u (%u bytes) runs past the buffer", pos, obj);
    t->pos = pos;
    t->vt = (uint32_t)vt;
    t->vt_size = vt_size;
    t->obj_size = obj;
    return true;
}

bool fb_root(fb_reader *r, fb_table *t)
{
    if (r->size < 8) return fb_fail(r, NULL, "%zu bytes is too small for a flatbuffer", r->size);
    uint32_t root = fb_ld32(r->buf);
    if (!inside(r, root, 4))
        return fb_fail(r, NULL, "root table offset %u is outside the %zu-byte buffer", root,
                       r->size);
    return fb_table_at(r, root, t);
}

/* Position of a field of `n` bytes, 0 when absent. */
static bool fb_locate(fb_reader *r, const fb_table *t, int slot, const char *field, size_t n,
                      uint32_t *at)
{
    *at = 0;
    if (r->failed) return false;
    size_t e = 4 + 2 * (size_t)slot;
    if (e + 2 > t->vt_size) return true;
    uint16_t off = fb_ld16(r->buf + t->vt + e);
    if (!off) return true;
    if ((size_t)off + n > t->obj_size) return fb_fail(r, field, "field lies outside its table");
    uint32_t p = t->pos + off;
    if (p % n) return fb_fail(r, field, "field at offset %u is not %zu-byte aligned", p, n);
    *at = p;
    return true;
}

#define FB_SCALAR_GETTER(name, type, n, load)                                                      \
    bool name(fb_reader *r, const fb_table *t, int slot, const char *field, type def, type *v)     \
    {                                                                                              \
        uint32_t at = 0;                                                                           \
        *v = def;                                                                                  \
        if (!fb_locate(r, t, slot, field, n, &at)) return false;                                   \
        if (at) load;                                                                              \
        return true;                                                                               \
    }

FB_SCALAR_GETTER(fb_u8, uint8_t, 1, *v = r->buf[at])
FB_SCALAR_GETTER(fb_u16, uint16_t, 2, *v = fb_ld16(r->buf + at))
FB_SCALAR_GETTER(fb_u32, uint32_t, 4, *v = fb_ld32(r->buf + at))
FB_SCALAR_GETTER(fb_u64, uint64_t, 8, *v = fb_ld64(r->buf + at))

bool fb_f32(fb_reader *r, const fb_table *t, int slot, const char *field, float def, float *v)
{
    uint32_t bits, dbits;
    memcpy(&dbits, &def, 4);
    if (!fb_u32(r, t, slot, field, dbits, &bits)) return false;
    memcpy(v, &bits, 4);
    return true;
}

bool fb_f64(fb_reader *r, const fb_table *t, int slot, const char *field, double def, double *v)
{
    uint64_t bits, dbits;
    memcpy(&dbits, &def, 8);
    if (!fb_u64(r, t, slot, field, dbits, &bits)) return false;
    memcpy(v, &bits, 8);
    return true;
}

/* Follow the uoffset stored at `at`. */
static bool fb_follow(fb_reader *r, uint32_t at, const char *field, uint32_t *target)
{
    int64_t tgt = 0;
    if (!ly_checked_add(at, fb_ld32(r->buf + at), &tgt) || !inside(r, (uint64_t)tgt, 4))
        return fb_fail(r, field, "offset points outside the %zu-byte buffer", r->size);
    if (tgt % 4)
        return fb_fail(r, field, "offset target %llu is misaligned", (unsigned long long)tgt);
    *target = (uint32_t)tgt;
    return true;
}

bool fb_sub(fb_reader *r, const fb_table *t, int slot, const char *field, fb_table *sub,
            bool *present)
{
    uint32_t at, tgt = 0;
    *present = false;
    if (!fb_locate(r, t, slot, field, 4, &at)) return false;
    if (!at) return true;
    if (!fb_follow(r, at, field, &tgt)) return false;
    size_t saved = fb_path_push(r, field, -1);
    bool ok = fb_table_at(r, tgt, sub);
    fb_path_pop(r, saved);
    *present = ok;
    return ok;
}

static bool fb_string_at(fb_reader *r, uint32_t tgt, const char *field, const char **s,
                         uint32_t *len)
{
    uint32_t n = fb_ld32(r->buf + tgt);
    if (!inside(r, (uint64_t)tgt + 4, (uint64_t)n + 1))
        return fb_fail(r, field, "string of %u bytes runs past the buffer", n);
    if (r->buf[tgt + 4 + n] != 0) return fb_fail(r, field, "string is not NUL-terminated");
    *s = (const char *)r->buf + tgt + 4;
    if (len) *len = n;
    return true;
}

bool fb_str(fb_reader *r, const fb_table *t, int slot, const char *field, const char **s,
            uint32_t *len)
{
    uint32_t at, tgt = 0;
    *s = NULL;
    if (len) *len = 0;
    if (!fb_locate(r, t, slot, field, 4, &at)) return false;
    if (!at) return true;
    if (!fb_follow(r, at, field, &tgt)) return false;
    return fb_string_at(r, tgt, field, s, len);
}

bool fb_vector(fb_reader *r, const fb_table *t, int slot, const char *field, size_t elem_size,
               fb_vec *v)
{
    uint32_t at, tgt = 0;
    memset(v, 0, sizeof *v);
    if (!fb_locate(r, t, slot, field, 4, &at)) return false;
    if (!at) return true;
    if (!fb_follow(r, at, field, &tgt)) return false;
    uint32_t n = fb_ld32(r->buf + tgt);
    int64_t bytes = 0;
    if (!ly_checked_mul(n, (int64_t)elem_size, &bytes) ||
        !inside(r, (uint64_t)tgt + 4, (uint64_t)bytes))
        return fb_fail(r, field, "vector of %u elements runs past the buffer", n);
    if (!fb_charge(r, n)) return false;
    v->pos = tgt + 4;
    v->count = n;
    v->present = true;
    return true;
}

bool fb_vec_table(fb_reader *r, const fb_vec *v, uint32_t i, fb_table *t)
{
    uint32_t tgt = 0;
    if (r->failed) return false;
    if (!fb_follow(r, v->pos + 4 * i, NULL, &tgt)) return false;
    return fb_table_at(r, tgt, t);
}

bool fb_vec_str(fb_reader *r, const fb_vec *v, uint32_t i, const char **s, uint32_t *len)
{
    uint32_t tgt = 0;
    if (r->failed) return false;
    if (!fb_follow(r, v->pos + 4 * i, NULL, &tgt)) return false;
    return fb_string_at(r, tgt, NULL, s, len);
}
