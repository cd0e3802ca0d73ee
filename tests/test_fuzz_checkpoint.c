/* SPDX-License-Identifier: MIT */
/* Mutation fuzzing of the checkpoint reader: the zip container, the restricted
 * unpickler (mutated pickles are re-wrapped with valid CRCs so they reach it),
 * the safetensors header parser, and, when the shared fixture is present,
 * mutated copies of LibreYOLO9t_seed0.pt's pickle and of its head and central
 * directory. Deterministic (fixed seeds) and bounded; any input must give
 * LY_OK or a format/unsupported status with a message, never a crash, leak or
 * sanitizer report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "checkpoint_builder.h"
#include "importers/checkpoint/zip.h"
#include "libreyolo/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE LY_SHARED_DIR "/testdata/yolo9/LibreYOLO9t_seed0.pt"

/* Iterations per unit; -DLY_FUZZ_SCALE=200 makes a long campaign. */
#ifndef LY_FUZZ_SCALE
#ifdef LY_SANITIZED
#define LY_FUZZ_SCALE 5
#else
#define LY_FUZZ_SCALE 10
#endif
#endif
#define SCALE LY_FUZZ_SCALE

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static size_t rng_below(rng *r, size_t n)
{
    return n ? (size_t)(rng_next(r) % n) : 0;
}

static const char pickle_opcodes[] = "(.012FIJKLMNPQRSTUVXabcde}ghijl]opqrstu)GBC"
                                     "\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d"
                                     "\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98";
static const char json_bytes[] = "{}[]\",:\\u0123456789-+.eEtfn \t\nxF";

/* Apply 1-4 random edits to b[lo, hi) (the edit window; the buffer may grow or
 * shrink). `dict` supplies bytes worth trying. */
static void mutate(rng *r, bbuf *b, size_t lo, size_t hi, const char *dict, size_t dict_len)
{
    int edits = 1 + (int)rng_below(r, 4);
    for (int k = 0; k < edits && b->n > 0; k++) {
        if (hi > b->n) hi = b->n;
        if (lo >= hi) lo = 0;
        size_t at = lo + rng_below(r, hi - lo);
        switch (rng_below(r, 8)) {
        case 0:
            b->p[at] ^= (uint8_t)(1u << rng_below(r, 8));
            break;
        case 1:
            b->p[at] = (uint8_t)rng_next(r);
            break;
        case 2:
        case 3:
            b->p[at] = (uint8_t)dict[rng_below(r, dict_len)];
            break;
        case 4: {
            static const uint32_t values[] = {0,    1,      0x7f,       0x80,
                                              0xff, 0xffff, 0x7fffffff, 0xffffffffu};
            uint32_t v = values[rng_below(r, sizeof values / sizeof values[0])];
            for (size_t i = 0; i < 4 && at + i < b->n; i++)
                b->p[at + i] = (uint8_t)(v >> (8 * i));
            break;
        }
        case 5:
            b->n = at;
            break; /* truncate */
        case 6: {  /* delete a chunk */
            size_t len = 1 + rng_below(r, 16);
            if (len > b->n - at) len = b->n - at;
            memmove(b->p + at, b->p + at + len, b->n - at - len);
            b->n -= len;
            break;
        }
        case 7: { /* duplicate a chunk in place */
            size_t len = 1 + rng_below(r, 16);
            if (len > b->n - at) len = b->n - at;
            uint8_t chunk[16];
            memcpy(chunk, b->p + at, len);
            size_t tail = b->n - at;
            b_put(b, chunk, len); /* grow */
            memmove(b->p + at + len, b->p + at, tail);
            memcpy(b->p + at, chunk, len);
            break;
        }
        }
    }
}

/* Open `bytes`; whatever happens must be clean. */
static void open_and_check(const bbuf *b)
{
    ly_checkpoint *ck = NULL;
    ly_status st = ly_checkpoint_open_buffer(b->p, b->n, "fuzz.pt", &ck);
    if (st != LY_OK) {
        assert_null(ck);
        const char *msg = ly_last_error();
        if (st != LY_E_FORMAT && st != LY_E_UNSUPPORTED)
            fail_msg("unexpected status %s: %s", ly_status_name(st), msg);
        if (!strstr(msg, "fuzz.pt")) fail_msg("message does not name the file: %s", msg);
        return;
    }
    /* Touch every element so the sanitizers see any bad buffer. */
    size_t count = 0;
    assert_int_equal(ly_checkpoint_tensor_count(ck, &count), LY_OK);
    volatile double sink = 0;
    for (size_t i = 0; i < count; i++) {
        const char *name;
        ly_tensor t;
        assert_int_equal(ly_checkpoint_tensor_at(ck, i, &name, &t), LY_OK);
        assert_int_equal(ly_checkpoint_find(ck, name, NULL), LY_OK);
        int64_t n = ly_tensor_numel(&t);
        assert_true(n >= 0);
        for (int64_t e = 0; e < n; e++)
            sink += t.dtype == LY_F32 ? (double)((const float *)t.data)[e]
                                      : (double)((const int64_t *)t.data)[e];
    }
    size_t names_count;
    const char *const *names;
    if (ly_checkpoint_class_names(ck, &names_count, &names) == LY_OK)
        for (size_t i = 0; i < names_count; i++)
            if (names[i]) sink += (double)strlen(names[i]);
    const char *s;
    int64_t v;
    (void)ly_checkpoint_meta_string(ck, "model_family", &s);
    (void)ly_checkpoint_meta_int(ck, "nc", &v);
    (void)sink;
    ly_checkpoint_close(ck);
}

static void test_fuzz_pickle(void **state)
{
    (void)state;
    small_storages s;
    small_storages_init(&s);
    bbuf seeds[2] = {{0}, {0}};
    small_pickle(&seeds[0], 2);
    small_pickle(&seeds[1], 4);
    rng r = {0x9e3779b97f4a7c15u};
    for (int i = 0; i < 500 * SCALE; i++) {
        const bbuf *seed = &seeds[i % 2];
        bbuf p = {0}, z = {0};
        b_put(&p, seed->p, seed->n);
        mutate(&r, &p, 0, p.n, pickle_opcodes, sizeof pickle_opcodes - 1);
        small_zip(&z, &s, p.p, p.n, (i / 2) % 2 == 1, ZB_ZIP64_END);
        open_and_check(&z);
        b_free(&p);
        b_free(&z);
    }
    b_free(&seeds[0]);
    b_free(&seeds[1]);
}

static void test_fuzz_zip(void **state)
{
    (void)state;
    small_storages s;
    small_storages_init(&s);
    bbuf pickle = {0}, seeds[3] = {{0}, {0}, {0}};
    small_pickle(&pickle, 2);
    small_zip(&seeds[0], &s, pickle.p, pickle.n, true, ZB_ZIP64_END);
    small_zip(&seeds[1], &s, pickle.p, pickle.n, true, ZB_ZIP64_END | ZB_ZIP64_EXTRA);
    small_zip(&seeds[2], &s, pickle.p, pickle.n, false, 0);
    static const char zip_dict[] = "PK\x01\x02\x03\x04\x05\x06\x07\x08\x00\xff";
    rng r = {0x2545f4914f6cdd1du};
    for (int i = 0; i < 500 * SCALE; i++) {
        const bbuf *seed = &seeds[(i / 2) % 3];
        bbuf z = {0};
        b_put(&z, seed->p, seed->n);
        /* Half the time aim at the directory and end records, which hold the
         * offsets and sizes. */
        size_t cd = seed->n - 22 - 76 - 9 * (46 + 40 + 24);
        if (i % 2)
            mutate(&r, &z, cd, z.n, zip_dict, sizeof zip_dict - 1);
        else
            mutate(&r, &z, 0, z.n, zip_dict, sizeof zip_dict - 1);
        open_and_check(&z);
        b_free(&z);
    }
    b_free(&pickle);
    for (int i = 0; i < 3; i++)
        b_free(&seeds[i]);
}

static void test_fuzz_safetensors(void **state)
{
    (void)state;
    static const char header[] =
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
        "\"__metadata__\":{\"nc\":\"2\",\"names\":\"[\\\"a\\\", \\\"b\\\\u00e9\\\"]\"},"
        "\"i\":{\"dtype\":\"I64\",\"shape\":[1, 1],\"data_offsets\":[32,40]}}";
    uint8_t payload[40];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 37u);
    bbuf seed = {0};
    safetensors_build(&seed, header, payload, sizeof payload);
    rng r = {0xd1b54a32d192ed03u};
    for (int i = 0; i < 500 * SCALE; i++) {
        bbuf b = {0};
        b_put(&b, seed.p, seed.n);
        if (i % 8 == 0)
            mutate(&r, &b, 0, 8, json_bytes, sizeof json_bytes - 1); /* the length */
        else
            mutate(&r, &b, 8, seed.n - sizeof payload, json_bytes, sizeof json_bytes - 1);
        open_and_check(&b);
        b_free(&b);
    }
    b_free(&seed);
}

static bool read_fixture(bbuf *out)
{
    FILE *f = fopen(FIXTURE, "rb");
    if (!f) return false;
    uint8_t chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        b_put(out, chunk, n);
    fclose(f);
    return true;
}

static void test_fuzz_fixture(void **state)
{
    (void)state;
    bbuf file = {0};
    if (!read_fixture(&file)) {
        print_message("skipped: %s not present (the shared fixtures are not in a plain clone)\n",
                      FIXTURE);
        skip();
    }
    ly_zip z;
    assert_int_equal(ly_zip_open(&z, file.p, file.n, "fixture"), LY_OK);
    const ly_zip_entry *pkl = ly_zip_find(&z, "LibreYOLO9t_seed0/data.pkl");
    assert_non_null(pkl);
    const uint8_t *pkl_bytes;
    size_t pkl_size;
    assert_int_equal(ly_zip_read(&z, pkl, &pkl_bytes, &pkl_size), LY_OK);
    size_t cd_at = (size_t)(z.entries[0].data_at); /* just a valid offset; refined below */
    for (size_t i = 0; i < z.count; i++)
        if (z.entries[i].data_at + z.entries[i].size > cd_at)
            cd_at = (size_t)(z.entries[i].data_at + z.entries[i].size);

    /* The real pickle, mutated mostly in its first few KB and re-wrapped
     * without storages: the unpickler runs over all 223 KB each time. */
    rng r = {0x853c49e6748fea9bu};
    for (int i = 0; i < 25 * SCALE; i++) {
        bbuf p = {0}, zz = {0};
        b_put(&p, pkl_bytes, pkl_size);
        size_t hi = i % 4 == 3 ? p.n : 4096;
        mutate(&r, &p, 0, hi, pickle_opcodes, sizeof pickle_opcodes - 1);
        pickle_only_zip(&zz, p.p, p.n);
        open_and_check(&zz);
        b_free(&p);
        b_free(&zz);
    }

    /* The file itself, mutated in its first 4 KB or in the central directory
     * and end records. */
    static const char zip_dict[] = "PK\x01\x02\x03\x04\x05\x06\x07\x08\x00\xff";
    for (int i = 0; i < 8 * SCALE; i++) {
        bbuf copy = {0};
        b_put(&copy, file.p, file.n);
        if (i % 2)
            mutate(&r, &copy, cd_at, copy.n, zip_dict, sizeof zip_dict - 1);
        else
            mutate(&r, &copy, 0, 4096, zip_dict, sizeof zip_dict - 1);
        open_and_check(&copy);
        b_free(&copy);
    }
    ly_zip_close(&z);
    b_free(&file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_pickle),
        cmocka_unit_test(test_fuzz_zip),
        cmocka_unit_test(test_fuzz_safetensors),
        cmocka_unit_test(test_fuzz_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
