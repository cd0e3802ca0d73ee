/* SPDX-License-Identifier: MIT */
/*
 * The parity harness's deterministic generator (internal): splitmix64 seeded
 * from a case's name, so every reported case can be reproduced alone. Shared by
 * src/kernels/check.c and the attention cases.
 */
#ifndef LY_KERNELS_CHECK_RNG_H
#define LY_KERNELS_CHECK_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct ly_check_rng {
    uint64_t state;
    /* Box-Muller's second value, handed out by the next call */
    float spare;
    int has_spare;
} ly_check_rng;

static inline uint64_t ly_check_rng_next(ly_check_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t ly_check_rng_below(ly_check_rng *r, uint64_t n)
{
    return n ? ly_check_rng_next(r) % n : 0;
}

/* Uniform in [0, 1) with 53 bits. */
static inline double ly_check_rng_unit(ly_check_rng *r)
{
    return (double)(ly_check_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Box-Muller in float, both values used: filling the cases' tensors was a
 * third of the parity gate's time with one double log and cos per value. */
static inline float ly_check_rng_normal(ly_check_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    float u1 = (float)((ly_check_rng_next(r) >> 40) + 1) * 0x1.0p-24f; /* (0, 1] */
    float u2 = (float)(ly_check_rng_next(r) >> 40) * 0x1.0p-24f;
    float radius = sqrtf(-2.0f * logf(u1)), angle = 6.2831853f * u2;
    r->spare = radius * sinf(angle);
    r->has_spare = 1;
    return radius * cosf(angle);
}

/* FNV-1a of "a|b": the seed of case `b` of slot `a`. */
static inline uint64_t ly_check_seed(const char *a, const char *b)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *s = a; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    h = (h ^ '|') * 0x100000001B3ull;
    for (const char *s = b; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

#endif
