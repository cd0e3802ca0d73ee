/* SPDX-License-Identifier: MIT */
/* A bounded, deterministic mutation fuzzer for the `.pte` reader and the XNNPACK payload
 * reader (src/export/pte/). Every call must come back with a status, and a refusal with a
 * message; the sanitizer build turns any out-of-bounds access or undefined behaviour into a
 * failure. Mutated files are allocated to their exact size, and the decoder keeps an
 * exact-size copy, so AddressSanitizer sees any read past the end. When a mutant is accepted,
 * everything the runtime would touch next is exercised too (delegate blobs, XNNPACK graphs,
 * constant and named data). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "pte/fb.h"
#include "pte/pte_samples.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ITERATIONS
#ifdef LY_SANITIZED
#define ITERATIONS 4000
#else
#define ITERATIONS 25000
#endif
#endif

typedef struct fuzz_stats {
    size_t accepted, refused;
} fuzz_stats;

static uint64_t rnd(uint64_t *state, uint64_t bound)
{
    return bound ? ly_test_splitmix64(state) % bound : 0;
}

/* One to four mutations, biased towards the flatbuffer (the first `hot` bytes) and towards
 * values that make offsets and lengths interesting. */
static size_t mutate(uint8_t *b, size_t n, size_t hot, uint64_t *state)
{
    static const uint32_t words[] = {0,           1,           4,        0x7fffffffu, 0x80000000u,
                                     0xffffffffu, 0xfffffffcu, 0x10000u, 0xffffu,     24};
    int k = 1 + (int)rnd(state, 4);
    for (int i = 0; i < k; i++) {
        size_t limit = rnd(state, 4) ? hot : n;
        size_t pos = (size_t)rnd(state, limit);
        switch (rnd(state, 5)) {
        case 0:
            b[pos] ^= (uint8_t)(1u << rnd(state, 8));
            break;
        case 1:
            b[pos] = (uint8_t)rnd(state, 256);
            break;
        case 2:
            if (pos + 4 <= n) {
                pos &= ~(size_t)3;
                fb_st32(b + pos, words[rnd(state, sizeof words / sizeof words[0])]);
            }
            break;
        case 3:
            if (pos + 2 <= n) fb_st16(b + pos, (uint16_t)rnd(state, 64));
            break;
        default: /* copy a word from elsewhere: plausible offsets in the wrong place */
            if (pos + 4 <= n && n >= 4) memcpy(b + pos, b + rnd(state, n - 3), 4);
            break;
        }
    }
    if (rnd(state, 16) == 0) return (size_t)rnd(state, n); /* truncate too */
    return n;
}

static void exercise_program(const ly_pte_program *p)
{
    const ly_pte_plan *fwd = ly_pte_find_plan(p, "forward");
    assert_non_null(fwd); /* the decoder guarantees it */
    for (size_t i = 0; i < fwd->n_delegates; i++) {
        ly_pte_bytes blob;
        assert_int_equal(ly_pte_delegate_blob(p, &fwd->delegates[i], &blob), LY_OK);
        ly_xnn_graph *g = NULL;
        if (ly_xnn_decode(blob.data, blob.size, "fuzz: delegate", &g) == LY_OK) {
            for (size_t c = 0; c < g->n_constant_data; c++) {
                ly_pte_bytes data;
                if (g->constant_data[c].named_key)
                    (void)ly_pte_named_data_find(p, g->constant_data[c].named_key, &data);
            }
            ly_xnn_graph_free(g);
        } else {
            assert_true(strlen(ly_last_error()) > 0);
        }
    }
    for (size_t i = 0; i < fwd->n_values; i++) {
        const ly_pte_evalue *v = &fwd->values[i];
        if (v->type != LY_PTE_EVALUE_TENSOR) continue;
        uint64_t nbytes;
        assert_int_equal(ly_pte_tensor_nbytes(&v->u.tensor, &nbytes), LY_OK);
        if (v->u.tensor.data_buffer_idx && !v->u.tensor.allocation_info.present) {
            ly_pte_bytes data;
            assert_int_equal(ly_pte_constant_data(p, &v->u.tensor, &data), LY_OK);
            volatile uint8_t sink = 0;
            for (size_t j = 0; j < data.size; j++)
                sink ^= data.data[j]; /* in bounds? */
            (void)sink;
        }
    }
}

static void fuzz_program(const uint8_t *orig, size_t n, uint64_t seed, fuzz_stats *stats)
{
    size_t hot = n;
    if (n >= 24 && memcmp(orig + 8, "eh00", 4) == 0) hot = (size_t)fb_ld64(orig + 16);
    uint64_t state = seed;
    for (int it = 0; it < ITERATIONS; it++) {
        uint8_t *b = malloc(n);
        assert_non_null(b);
        memcpy(b, orig, n);
        size_t m = mutate(b, n, hot, &state);
        uint8_t *exact = malloc(m ? m : 1);
        assert_non_null(exact);
        memcpy(exact, b, m);
        free(b);
        ly_pte_program *p = NULL;
        ly_status st = ly_pte_decode(exact, m, "fuzz.pte", &p);
        if (st == LY_OK) {
            stats->accepted++;
            exercise_program(p);
            ly_pte_program_free(p);
        } else {
            stats->refused++;
            assert_null(p);
            assert_true(strlen(ly_last_error()) > 0);
        }
        free(exact);
    }
}

static void fuzz_xnn(const uint8_t *orig, size_t n, uint64_t seed, fuzz_stats *stats)
{
    uint64_t state = seed;
    for (int it = 0; it < ITERATIONS; it++) {
        uint8_t *b = malloc(n);
        assert_non_null(b);
        memcpy(b, orig, n);
        size_t m = mutate(b, n, n, &state);
        uint8_t *exact = malloc(m ? m : 1);
        assert_non_null(exact);
        memcpy(exact, b, m);
        free(b);
        ly_xnn_graph *g = NULL;
        if (ly_xnn_decode(exact, m, "fuzz blob", &g) == LY_OK) {
            stats->accepted++;
            /* Every id the decoder let through must index xvalues. */
            for (size_t i = 0; i < g->n_input_ids; i++)
                assert_true(g->input_ids[i] < g->n_xvalues);
            for (size_t i = 0; i < g->n_xvalues; i++)
                assert_int_equal(g->xvalues[i].tensor.n_dims, g->xvalues[i].tensor.num_dims);
            ly_xnn_graph_free(g);
        } else {
            stats->refused++;
            assert_true(strlen(ly_last_error()) > 0);
        }
        free(exact);
    }
}

static void test_fuzz_delegated_program(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    fuzz_stats stats = {0, 0};
    fuzz_program(b, n, 0x5eed0001, &stats);
    print_message("delegated program (%zu bytes): %zu mutants accepted, %zu refused\n", n,
                  stats.accepted, stats.refused);
    assert_true(stats.refused > stats.accepted / 4);
    free(b);
    pte_sample_free(&s);
}

static void test_fuzz_mixed_program(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    fuzz_stats stats = {0, 0};
    fuzz_program(b, n, 0x5eed0002, &stats);
    print_message("mixed program (%zu bytes): %zu mutants accepted, %zu refused\n", n,
                  stats.accepted, stats.refused);
    free(b);

    /* The same program without a header (inline delegate data), where truncation is silent. */
    ly_pte_bytes inline_blob = {s.blob, s.blob_size};
    ly_pte_bytes cbuf[2] = {{NULL, 0}, {(const uint8_t *)s.bias, sizeof s.bias}};
    s.delegate.location = LY_PTE_INLINE;
    s.delegate.index = 0;
    s.program.backend_delegate_data = &inline_blob;
    s.program.n_backend_delegate_data = 1;
    s.program.constant_buffer = cbuf;
    s.program.n_constant_buffer = 2;
    s.program.constant_segment.present = false;
    assert_int_equal(ly_pte_encode(&s.program, NULL, 0, &b, &n), LY_OK);
    stats = (fuzz_stats){0, 0};
    fuzz_program(b, n, 0x5eed0003, &stats);
    print_message("headerless program (%zu bytes): %zu mutants accepted, %zu refused\n", n,
                  stats.accepted, stats.refused);
    free(b);
    pte_sample_free(&s);
}

static void test_fuzz_xnnpack_payload(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    fuzz_stats stats = {0, 0};
    fuzz_xnn(s.blob, s.blob_size, 0x5eed0004, &stats);
    print_message("XNNPACK payload (%zu bytes): %zu mutants accepted, %zu refused\n", s.blob_size,
                  stats.accepted, stats.refused);
    /* Bare flatbuffer (no XH00). */
    uint32_t fs = fb_ld32(s.blob + 14);
    stats = (fuzz_stats){0, 0};
    fuzz_xnn(s.blob + 32, fs, 0x5eed0005, &stats);
    print_message("bare XNNGraph (%u bytes): %zu mutants accepted, %zu refused\n", fs,
                  stats.accepted, stats.refused);
    pte_sample_free(&s);
}

/* Random bytes behind a valid prefix: headers that look right over garbage. */
static void test_garbage_after_valid_header(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    uint64_t st = 0x5eed0006;
    for (int it = 0; it < ITERATIONS / 10; it++) {
        size_t keep = 8 + (size_t)rnd(&st, 64);
        uint8_t *g = malloc(n);
        assert_non_null(g);
        memcpy(g, b, keep);
        for (size_t i = keep; i < n; i++)
            g[i] = (uint8_t)rnd(&st, 256);
        ly_pte_program *p = NULL;
        if (ly_pte_decode(g, n, "garbage.pte", &p) == LY_OK) {
            exercise_program(p);
            ly_pte_program_free(p);
        }
        free(g);
    }
    free(b);
    pte_sample_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_delegated_program),
        cmocka_unit_test(test_fuzz_mixed_program),
        cmocka_unit_test(test_fuzz_xnnpack_payload),
        cmocka_unit_test(test_garbage_after_valid_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
