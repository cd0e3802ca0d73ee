/* SPDX-License-Identifier: MIT */
/*
 * A small FlatBuffers builder and bounds-checked reader (internal to src/pte/).
 *
 * Builder: back to front, as the reference C++ builder does, so children are created before
 * the tables that point at them and every offset points forward. Scalars equal to their
 * schema default are omitted; vtables are shared between identical tables. Failures (out of
 * memory, a buffer over 2 GiB) are sticky and reported by fb_finish.
 *
 * Reader: every access is checked against the buffer the way flatbuffers::Verifier does
 * (offset ranges, 4-byte alignment of tables, vectors and strings, vtable sizes, fields inside
 * their table, string NUL terminators, union types) and counts the tables and vector elements
 * it visits against a budget proportional to the buffer, so shared sub-objects cannot make a
 * small hostile file expensive. The first failure is recorded with the field path, and all
 * later calls fail fast.
 */
#ifndef LY_PTE_FB_H
#define LY_PTE_FB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Builder ------------------------------------------------------------ */

typedef uint32_t fb_ref; /* an object's distance from the end of the buffer; 0 = none */

enum { FB_MAX_SLOTS = 64 };

typedef struct fb_builder {
    uint8_t *buf; /* data occupies buf[cap - size, cap) */
    size_t cap, size, minalign;
    bool failed;
    bool omit_null; /* encoder policy: a NULL vector is left absent (tests of hostile files) */
    /* the table being built */
    bool in_table;
    size_t table_start;
    uint32_t field_loc[FB_MAX_SLOTS]; /* distance from the end of each field, 0 if unset */
    int max_slot;
    /* vtables written so far, for sharing */
    uint32_t *vtables;
    size_t n_vtables, cap_vtables;
} fb_builder;

void fb_init(fb_builder *b);
void fb_free(fb_builder *b);

fb_ref fb_string(fb_builder *b, const char *s); /* NULL -> 0 (field left absent) */
fb_ref fb_string_n(fb_builder *b, const char *s, size_t len);
/* A vector of little-endian scalars of elem_size bytes (1, 2, 4, 8) from host-order values;
 * `align` > elem_size forces the alignment of the first element (force_align). */
fb_ref fb_vec_scalars(fb_builder *b, const void *elems, size_t count, size_t elem_size,
                      size_t align);
fb_ref fb_vec_refs(fb_builder *b, const fb_ref *refs, size_t count);

void fb_table_start(fb_builder *b);
void fb_add_u8(fb_builder *b, int slot, uint8_t v, uint8_t def);
void fb_add_u16(fb_builder *b, int slot, uint16_t v, uint16_t def);
void fb_add_u32(fb_builder *b, int slot, uint32_t v, uint32_t def);
void fb_add_u64(fb_builder *b, int slot, uint64_t v, uint64_t def);
void fb_add_f32(fb_builder *b, int slot, float v, float def);
void fb_add_f64(fb_builder *b, int slot, double v, double def);
void fb_add_ref(fb_builder *b, int slot, fb_ref ref); /* ref 0: absent */
fb_ref fb_table_end(fb_builder *b);

/* Root offset + 4-character identifier. On success *out is malloc'd (free()). Returns false
 * after any failure. */
bool fb_finish(fb_builder *b, fb_ref root, const char *identifier, uint8_t **out, size_t *out_size);

/* ---- Reader ------------------------------------------------------------- */

typedef struct fb_reader {
    const uint8_t *buf;
    size_t size;
    const char *what; /* file name for messages */
    bool failed;
    char msg[1024];
    char path[384]; /* current field path, e.g. "execution_plan[0].values[3]" */
    size_t path_len;
    uint64_t tables_left, elems_left;
} fb_reader;

typedef struct fb_table {
    uint32_t pos; /* table start (its soffset) */
    uint32_t vt;  /* vtable start */
    uint16_t vt_size, obj_size;
} fb_table;

typedef struct fb_vec {
    uint32_t pos; /* first element */
    uint32_t count;
    bool present;
} fb_vec;

void fb_reader_init(fb_reader *r, const uint8_t *buf, size_t size, const char *what);
/* Record a failure "<what>: <path>[.field]: <message>" (first one wins); returns false. */
bool fb_fail(fb_reader *r, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Path stack: push appends ".name" or "name[i]" (i >= 0), pop restores the saved length. */
size_t fb_path_push(fb_reader *r, const char *name, long index);
void fb_path_pop(fb_reader *r, size_t saved);
/* Charge `n` vector elements against the budget. */
bool fb_charge(fb_reader *r, uint64_t n);

bool fb_root(fb_reader *r, fb_table *t);
bool fb_table_at(fb_reader *r, uint32_t pos, fb_table *t);

/* Scalar fields: absent -> def. */
bool fb_u8(fb_reader *r, const fb_table *t, int slot, const char *field, uint8_t def, uint8_t *v);
bool fb_u16(fb_reader *r, const fb_table *t, int slot, const char *field, uint16_t def,
            uint16_t *v);
bool fb_u32(fb_reader *r, const fb_table *t, int slot, const char *field, uint32_t def,
            uint32_t *v);
bool fb_u64(fb_reader *r, const fb_table *t, int slot, const char *field, uint64_t def,
            uint64_t *v);
bool fb_f32(fb_reader *r, const fb_table *t, int slot, const char *field, float def, float *v);
bool fb_f64(fb_reader *r, const fb_table *t, int slot, const char *field, double def, double *v);
/* Sub-table: *present false when absent. */
bool fb_sub(fb_reader *r, const fb_table *t, int slot, const char *field, fb_table *sub,
            bool *present);
/* String: *s NULL when absent; a view into the buffer, NUL-terminated. */
bool fb_str(fb_reader *r, const fb_table *t, int slot, const char *field, const char **s,
            uint32_t *len);
/* Vector header: elements bounds-checked for elem_size bytes each. */
bool fb_vector(fb_reader *r, const fb_table *t, int slot, const char *field, size_t elem_size,
               fb_vec *v);
/* Element i of a vector of tables / strings. */
bool fb_vec_table(fb_reader *r, const fb_vec *v, uint32_t i, fb_table *t);
bool fb_vec_str(fb_reader *r, const fb_vec *v, uint32_t i, const char **s, uint32_t *len);

/* Little-endian loads at a checked position. */
static inline uint16_t fb_ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t fb_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t fb_ld64(const uint8_t *p)
{
    return (uint64_t)fb_ld32(p) | ((uint64_t)fb_ld32(p + 4) << 32);
}
static inline void fb_st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void fb_st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void fb_st64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif
