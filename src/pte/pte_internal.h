/* SPDX-License-Identifier: MIT */
/* Internals of src/pte/ shared by its sources and its tests. */
#ifndef LY_PTE_PTE_INTERNAL_H
#define LY_PTE_PTE_INTERNAL_H

#include "pte/fb.h"
#include "pte/pte.h"

/* A bump allocator: a decoded model is many small arrays freed together. */
typedef struct ly_arena ly_arena;
ly_arena *ly_arena_new(void);
void *ly_arena_alloc(ly_arena *a, size_t size); /* 16-aligned, zeroed; NULL on failure */
void ly_arena_free(ly_arena *a);

/* ly_pte_encode with test-only options, so tests can write hostile files:
 *  LY_PTE_ENC_UNCHECKED: no closing decode check, and a non-NULL p->segments is written
 *                        verbatim instead of the computed table;
 *  LY_PTE_ENC_OMIT_NULL: a NULL vector pointer leaves the field absent instead of empty. */
enum { LY_PTE_ENC_UNCHECKED = 1, LY_PTE_ENC_OMIT_NULL = 2 };
ly_status ly_pte_encode_ex(const ly_pte_program *p, const ly_pte_segment_in *segments,
                           size_t n_segments, unsigned flags, uint8_t **bytes, size_t *size);
/* The same for the XNNPACK payload. */
ly_status ly_xnn_encode_unchecked(const ly_xnn_graph *g, const uint8_t *constant_area,
                                  size_t constant_size, uint8_t **bytes, size_t *size);

/* Decoding state shared by the program and XNNPACK decoders: a checked reader plus the arena
 * the model is built in. */
typedef struct dec {
    fb_reader r;
    ly_arena *arena;
    bool oom;
} dec;

/* Present-but-empty vectors point here, so that in a decoded model NULL means "absent". */
extern const max_align_t ly_pte_empty_vector;
#define EMPTY ((void *)&ly_pte_empty_vector)

void *dec_alloc(dec *d, size_t n);
/* A vector of scalars (es = 1, 2, 4, 8 bytes) copied out in host order; NULL when absent. */
bool dec_vec(dec *d, const fb_table *t, int slot, const char *field, size_t es, void **out,
             size_t *n);
/* A byte vector as a view into the buffer. */
bool dec_bytes(dec *d, const fb_table *t, int slot, const char *field, ly_pte_bytes *b,
               bool *present);
/* A vector of tables decoded by `fn` into an array of `es`-byte items; NULL when absent. On
 * failure the reader's path still names the failing element. */
typedef bool (*dec_fn)(dec *d, const fb_table *t, void *item);
bool dec_tables(dec *d, const fb_table *t, int slot, const char *field, size_t es, dec_fn fn,
                void **out, size_t *n);
/* The reader's failure as a ly_status with its message. */
ly_status dec_error(dec *d);

#define READ_VEC(d, t, slot, field, ptr, n)                                                        \
    dec_vec(d, t, slot, field, sizeof *(ptr), (void **)&(ptr), &(n))
#define READ_TABLES(d, t, slot, field, ptr, n, fn)                                                 \
    dec_tables(d, t, slot, field, sizeof *(ptr), fn, (void **)&(ptr), &(n))

static inline uint64_t ly_pte_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

#endif
