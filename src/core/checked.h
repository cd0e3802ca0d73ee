/* SPDX-License-Identifier: MIT */
/*
 * Checked size arithmetic: the one place where a product or a sum of sizes
 * read from a file (extents, counts, offsets, byte sizes) is computed. Every
 * parser goes through these, so a hostile file that declares extents near
 * 2^63 (or 2^32 in a 32-bit field widened later) gets a refusal, never
 * undefined behaviour or a wrapped size that passes a later bounds check.
 *
 * Each returns false, leaving *out untouched, when an operand is negative or
 * the result does not fit; callers turn that into an error naming the file
 * and the field.
 */
#ifndef LY_CORE_CHECKED_H
#define LY_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* a * b for sizes (both >= 0). */
static inline bool ly_checked_mul(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* a + b for sizes (both >= 0). */
static inline bool ly_checked_add(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* The same in size_t, for byte counts about to be allocated or compared. */
static inline bool ly_checked_mul_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

static inline bool ly_checked_add_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

/* The product of dims[0..n) (1 for n == 0), each >= 0. */
static inline bool ly_checked_numel(const int64_t *dims, int n, int64_t *out)
{
    int64_t r = 1;
    for (int i = 0; i < n; i++)
        if (!ly_checked_mul(r, dims[i], &r)) return false;
    *out = r;
    return true;
}

/* numel * element size in bytes, as a size_t that also fits int64_t. */
static inline bool ly_checked_bytes(const int64_t *dims, int n, size_t element_size, size_t *out)
{
    int64_t numel, bytes;
    if (!ly_checked_numel(dims, n, &numel) || !ly_checked_mul(numel, (int64_t)element_size, &bytes))
        return false;
    if ((uint64_t)bytes > (uint64_t)SIZE_MAX) return false;
    *out = (size_t)bytes;
    return true;
}

#endif
