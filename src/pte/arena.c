/* SPDX-License-Identifier: MIT */
#include "pte/pte_internal.h"

#include "core/checked.h"

#include <stdlib.h>
#include <string.h>

typedef struct ly_arena_block {
    struct ly_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} ly_arena_block;

struct ly_arena {
    ly_arena_block *head;
};

enum { LY_ARENA_CHUNK = 64 * 1024 };

ly_arena *ly_arena_new(void)
{
    return calloc(1, sizeof(ly_arena));
}

void *ly_arena_alloc(ly_arena *a, size_t size)
{
    if (!a) return NULL;
    if (size == 0) size = 1;
    if (size > SIZE_MAX - 15) return NULL;
    size = (size + 15) & ~(size_t)15;
    ly_arena_block *b = a->head;
    if (!b || b->cap - b->used < size) {
        /* Large requests get a block of their own behind the current one, so the rest of the
         * current block stays usable. */
        size_t cap = size > LY_ARENA_CHUNK / 4 ? size : LY_ARENA_CHUNK;
        size_t bytes = 0;
        ly_arena_block *nb = ly_checked_add_size(sizeof *nb, cap, &bytes) ? malloc(bytes) : NULL;
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && cap == size) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

void ly_arena_free(ly_arena *a)
{
    if (!a) return;
    ly_arena_block *b = a->head;
    while (b) {
        ly_arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(a);
}
