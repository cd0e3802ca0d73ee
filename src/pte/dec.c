/* SPDX-License-Identifier: MIT */
/* Helpers for decoding flatbuffers into arena-allocated models. */
#include "core/checked.h"
#include "core/core.h"
#include "pte/pte_internal.h"

#include <string.h>

const max_align_t ly_pte_empty_vector;

void *dec_alloc(dec *d, size_t n)
{
    void *p = ly_arena_alloc(d->arena, n);
    if (!p) {
        d->oom = true;
        fb_fail(&d->r, NULL, "out of memory");
    }
    return p;
}

bool dec_vec(dec *d, const fb_table *t, int slot, const char *field, size_t es, void **out,
             size_t *n)
{
    fb_vec v;
    *out = NULL;
    *n = 0;
    if (!fb_vector(&d->r, t, slot, field, es, &v)) return false;
    if (!v.present) return true;
    *n = v.count;
    if (!v.count) {
        *out = EMPTY;
        return true;
    }
    size_t bytes = SIZE_MAX; /* an impossible request when the product overflows */
    ly_checked_mul_size(v.count, es, &bytes);
    uint8_t *dst = dec_alloc(d, bytes);
    if (!dst) return false;
    const uint8_t *src = d->r.buf + v.pos;
    for (uint32_t i = 0; i < v.count; i++) {
        switch (es) {
        case 1:
            dst[i] = src[i];
            break;
        case 2: {
            uint16_t x = fb_ld16(src + 2 * i);
            memcpy(dst + 2 * i, &x, 2);
            break;
        }
        case 4: {
            uint32_t x = fb_ld32(src + 4 * i);
            memcpy(dst + 4 * i, &x, 4);
            break;
        }
        default: {
            uint64_t x = fb_ld64(src + 8 * i);
            memcpy(dst + 8 * i, &x, 8);
            break;
        }
        }
    }
    *out = dst;
    return true;
}

bool dec_bytes(dec *d, const fb_table *t, int slot, const char *field, ly_pte_bytes *b,
               bool *present)
{
    fb_vec v;
    b->data = NULL;
    b->size = 0;
    *present = false;
    if (!fb_vector(&d->r, t, slot, field, 1, &v)) return false;
    *present = v.present;
    if (v.present) {
        b->data = d->r.buf + v.pos;
        b->size = v.count;
    }
    return true;
}

bool dec_tables(dec *d, const fb_table *t, int slot, const char *field, size_t es, dec_fn fn,
                void **out, size_t *n)
{
    fb_vec v;
    *out = NULL;
    *n = 0;
    if (!fb_vector(&d->r, t, slot, field, 4, &v)) return false;
    if (!v.present) return true;
    *n = v.count;
    if (!v.count) {
        *out = EMPTY;
        return true;
    }
    size_t bytes = SIZE_MAX; /* an impossible request when the product overflows */
    ly_checked_mul_size(v.count, es, &bytes);
    uint8_t *items = dec_alloc(d, bytes);
    if (!items) return false;
    for (uint32_t i = 0; i < v.count; i++) {
        size_t saved = fb_path_push(&d->r, field, (long)i);
        fb_table et;
        if (!fb_vec_table(&d->r, &v, i, &et) || !fn(d, &et, items + i * es)) return false;
        fb_path_pop(&d->r, saved);
    }
    *out = items;
    return true;
}

ly_status dec_error(dec *d)
{
    return ly_set_error(d->oom ? LY_E_NO_MEMORY : LY_E_FORMAT, "%s", d->r.msg);
}
