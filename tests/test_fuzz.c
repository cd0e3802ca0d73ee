/* SPDX-License-Identifier: MIT */
/* A bounded, deterministic mutation fuzzer for the readers of untrusted bytes:
 * the .npy parser and the unpack slots. Every call must come back with a
 * status (LY_OK, or an error with a message); the sanitizer build turns any
 * out-of-bounds access or undefined behaviour into a failure. Inputs are
 * allocated to their exact size so that AddressSanitizer sees overreads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "libreyolo/io.h"
#include "libreyolo/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LY_SANITIZED
#define NPY_ITERATIONS 30000
#define UNPACK_ITERATIONS 10000
#else
#define NPY_ITERATIONS 100000
#define UNPACK_ITERATIONS 30000
#endif

/* ---- Deterministic randomness -------------------------------------------- */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t splitmix64(rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. The tiny modulo bias does not matter here. */
static uint64_t below(rng *r, uint64_t n)
{
    return splitmix64(r) % n;
}

static int64_t pick(rng *r, const int64_t *values, size_t n)
{
    return values[below(r, n)];
}

/* How many calls of each kind succeeded: a fuzzer whose every input is
 * rejected at the door proves nothing about the code behind it. */
enum { N_KINDS = 8 };
static const char *const kind_names[N_KINDS] = {
    "ly_npy_load_buffer", "unpack_int_grouped", "ly_unpack_int_grouped", "unpack_nvfp4",
    "ly_unpack_nvfp4",    "ly_unpack_mxfp4",    "ly_unpack_int8",        "ly_unpack_fp8"};
static unsigned ok_count[N_KINDS], call_count[N_KINDS];

static void count(const char *where, ly_status st)
{
    for (int k = 0; k < N_KINDS; k++) {
        if (strcmp(where, kind_names[k]) != 0) continue;
        call_count[k]++;
        if (st == LY_OK) ok_count[k]++;
    }
}

/* Every failure must explain itself. */
static void expect_status(ly_status st, const char *where, uint64_t iteration)
{
    count(where, st);
    if (st == LY_OK) return;
    if (ly_last_error()[0] == '\0')
        fail_msg("%s, iteration %llu: status %s with an empty message", where,
                 (unsigned long long)iteration, ly_status_name(st));
}

/* ---- (a) .npy ------------------------------------------------------------- */

#define NPY_MAX 2048

static size_t build_npy(uint8_t *buf, int major, const char *header, const uint8_t *payload,
                        size_t payload_len)
{
    size_t hlen = strlen(header);
    size_t at = major == 1 ? 10 : 12;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)hlen;
    buf[9] = (uint8_t)(hlen >> 8);
    if (major != 1) buf[10] = buf[11] = 0;
    memcpy(buf + at, header, hlen);
    memcpy(buf + at + hlen, payload, payload_len);
    return at + hlen + payload_len;
}

typedef struct seed {
    int major;
    const char *header;
    size_t payload_len;
} seed;

static const seed seeds[] = {
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }            \n", 24},
    {1, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }\n", 5},
    {2, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n", 8},
    {3, "{'shape': (2, 1, 2), 'descr': '<i8', 'fortran_order': False}", 32},
    {1, "{\"descr\": \"|i1\", \"fortran_order\": False, \"shape\": (0, 4)}", 0},
    {2, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2,), }\n", 12},
    {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 3), }", 12},
};

static const char *const tokens[] = {
    "'shape'",
    "'descr'",
    "'fortran_order'",
    "(",
    ")",
    ",",
    ":",
    "{",
    "}",
    "'",
    "\"",
    "-1",
    "0",
    "99999999999999999999",
    "4294967296",
    "9223372036854775807",
    "True",
    "False",
    "'<f4'",
    "'>f4'",
    "'|u1'",
    "'<c8'",
    "[",
    "]",
    " ",
    "\n",
    "\\",
    "\x93",
    "\0",
};

static size_t mutate(rng *r, uint8_t *buf, size_t n)
{
    int rounds = 1 + (int)below(r, 4);
    for (int k = 0; k < rounds; k++) {
        switch (below(r, 9)) {
        case 0: /* bit flip */
            if (n) buf[below(r, n)] ^= (uint8_t)(1u << below(r, 8));
            break;
        case 1: /* random byte */
            if (n) buf[below(r, n)] = (uint8_t)splitmix64(r);
            break;
        case 2: /* truncate */
            n = n ? (size_t)below(r, n + 1) : 0;
            break;
        case 3: { /* insert a token (the header region is where it bites) */
            const char *t = tokens[below(r, sizeof tokens / sizeof tokens[0])];
            size_t len = t[0] ? strlen(t) : 1;
            if (n + len > NPY_MAX) break;
            size_t at = n > 10 ? 10 + (size_t)below(r, n - 9) : n;
            memmove(buf + at + len, buf + at, n - at);
            memcpy(buf + at, t, len);
            n += len;
            break;
        }
        case 4: { /* delete a range */
            if (n < 2) break;
            size_t at = (size_t)below(r, n), len = 1 + (size_t)below(r, 8);
            if (len > n - at) len = n - at;
            memmove(buf + at, buf + at + len, n - at - len);
            n -= len;
            break;
        }
        case 5: { /* header length field */
            static const int64_t lengths[] = {0,     1,      2,       0x7f,       0xff,
                                              0x100, 0xffff, 0x10000, 0x7fffffff, 0xffffffff};
            uint64_t v = below(r, 2) ? (uint64_t)pick(r, lengths, 10) : below(r, 300);
            if (n > 9) {
                buf[8] = (uint8_t)v;
                buf[9] = (uint8_t)(v >> 8);
            }
            if (n > 11 && buf[6] != 1) {
                buf[10] = (uint8_t)(v >> 16);
                buf[11] = (uint8_t)(v >> 24);
            }
            break;
        }
        case 6: { /* version */
            static const int64_t versions[] = {0, 1, 2, 3, 4, 255};
            if (n > 7) {
                buf[6] = (uint8_t)pick(r, versions, 6);
                if (below(r, 8) == 0) buf[7] = (uint8_t)splitmix64(r);
            }
            break;
        }
        case 7: { /* append random bytes */
            size_t len = (size_t)below(r, 16);
            for (size_t i = 0; i < len && n < NPY_MAX; i++)
                buf[n++] = (uint8_t)splitmix64(r);
            break;
        }
        default: /* replace a header character by a structural one */
            if (n > 12) buf[10 + below(r, n - 10)] = (uint8_t) "{}()',: 0-9\"TF<|>"[below(r, 17)];
            break;
        }
    }
    return n;
}

static void check_npy_buffer(const uint8_t *buf, size_t n, uint64_t iteration)
{
    /* An exactly sized copy, so a read past the end is an ASan error. */
    uint8_t *exact = malloc(n ? n : 1);
    assert_non_null(exact);
    if (n) memcpy(exact, buf, n);
    ly_tensor t = {.data = (void *)1};
    ly_status st = ly_npy_load_buffer(exact, n, "fuzz", &t);
    expect_status(st, "ly_npy_load_buffer", iteration);
    if (st == LY_OK) {
        assert_non_null(t.data);
        int64_t numel = ly_tensor_numel(&t);
        assert_true(numel >= 0);
        assert_true((uint64_t)numel * ly_dtype_size(t.dtype) <= n);
        /* Touch every byte: the allocation must be as large as the shape says. */
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < numel * (int64_t)ly_dtype_size(t.dtype); i++)
            sink ^= ((uint8_t *)t.data)[i];
        (void)sink;
    } else {
        assert_null(t.data);
        assert_int_equal(ly_last_error()[0] != '\0', 1);
    }
    ly_npy_free(&t);
    free(exact);
}

static void test_fuzz_npy(void **state)
{
    (void)state;
    rng r = {0x6e70795f66757a7aull};
    uint8_t payload[64];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 29 + 7);
    uint8_t buf[NPY_MAX];
    /* The seeds themselves are valid. */
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        size_t n = build_npy(buf, seeds[s].major, seeds[s].header, payload, seeds[s].payload_len);
        ly_tensor t;
        if (ly_npy_load_buffer(buf, n, "seed", &t) != LY_OK)
            fail_msg("seed %zu: %s", s, ly_last_error());
        ly_npy_free(&t);
    }
    for (uint64_t it = 0; it < NPY_ITERATIONS; it++) {
        const seed *s = &seeds[below(&r, sizeof seeds / sizeof seeds[0])];
        size_t n = build_npy(buf, s->major, s->header, payload, s->payload_len);
        n = mutate(&r, buf, n);
        check_npy_buffer(buf, n, it);
    }
    /* Every prefix of every seed. */
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        size_t n = build_npy(buf, seeds[s].major, seeds[s].header, payload, seeds[s].payload_len);
        for (size_t len = 0; len < n; len++)
            check_npy_buffer(buf, len, len);
    }
}

/* ---- (b) unpack readers ----------------------------------------------------- */

/* A tensor with random contents in an exactly sized buffer (or, half of the
 * time, a 64-byte aligned one, so alignment-dependent providers run too). */
typedef struct fuzz_tensor {
    ly_tensor t;
    void *block;
} fuzz_tensor;

static void fuzz_tensor_make(rng *r, fuzz_tensor *f, ly_dtype dtype, int ndim, const int64_t *shape)
{
    f->t = (ly_tensor){.dtype = dtype, .ndim = ndim};
    size_t bytes = ly_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        f->t.shape[i] = shape[i];
        bytes *= shape[i] > 0 ? (size_t)shape[i] : 0;
    }
    if (below(r, 2)) {
        f->block = malloc(bytes ? bytes : 1);
    } else {
        size_t rounded = (bytes + 63) / 64 * 64;
        f->block = aligned_alloc(64, rounded ? rounded : 64);
    }
    assert_non_null(f->block);
    uint8_t *p = f->block;
    int flavour = (int)below(r, 4);
    for (size_t i = 0; i < bytes; i++) {
        uint8_t byte = (uint8_t)splitmix64(r);
        if (flavour == 1)
            byte = 0;
        else if (flavour == 2)
            byte = 0xff;
        else if (flavour == 3 && dtype == LY_F32 && i % 4 == 3)
            byte &= 0x7f; /* positive */
        p[i] = byte;
    }
    f->t.data = f->block;
}

static void fuzz_tensor_free(fuzz_tensor *f)
{
    free(f->block);
    f->block = NULL;
}

static int random_dims(rng *r, int64_t *shape, int ndim, int64_t max)
{
    for (int i = 0; i < ndim; i++)
        shape[i] = (int64_t)below(r, (uint64_t)max + 1);
    return ndim;
}

/* Mostly the rank the slot expects; sometimes another one. */
static int random_rank(rng *r, int expected)
{
    return below(r, 8) == 0 ? (int)below(r, 4) : expected;
}

static ly_dtype random_dtype(rng *r, ly_dtype expected)
{
    static const int64_t all[] = {LY_F32, LY_F64, LY_I8, LY_U8, LY_I32, LY_I64, LY_F8E4M3, LY_F16};
    return below(r, 10) == 0 ? (ly_dtype)pick(r, all, 8) : expected;
}

/* Mostly values a slot accepts, so the fuzz reaches the code behind the
 * validation; sometimes hostile ones. */
static int64_t random_bits(rng *r)
{
    static const int64_t good[] = {4, 2};
    static const int64_t bad[] = {0, 1, 3, 5, 8, -2, -4, INT64_MAX, INT64_MIN};
    return below(r, 4) ? pick(r, good, 2) : pick(r, bad, sizeof bad / sizeof bad[0]);
}

static int64_t random_group(rng *r)
{
    static const int64_t good[] = {128, 64, 32, 16, 8, 4, 2};
    static const int64_t bad[] = {0, -1, -128, 1, 3, 7, INT64_MAX, INT64_MIN};
    return below(r, 4) ? pick(r, good, sizeof good / sizeof good[0])
                       : pick(r, bad, sizeof bad / sizeof bad[0]);
}

static int64_t random_in_features(rng *r, int64_t columns)
{
    switch (below(r, 10)) {
    case 0:
        return columns + 1 + (int64_t)below(r, 16);
    case 1:
        return below(r, 2) ? INT64_MAX : INT64_MIN;
    case 2:
        return -2 - (int64_t)below(r, 100);
    case 3:
    case 4:
        return columns;
    case 5:
    case 6:
        return -1;
    default:
        return columns > 0 ? (int64_t)below(r, (uint64_t)columns + 1) : 0;
    }
}

/* Output of the shape the slot says (when it accepts the inputs), or a random
 * one to check that the output is validated too. */
static void make_output(rng *r, const char *slot, const ly_kernel_call *call, fuzz_tensor *out,
                        uint64_t iteration)
{
    ly_tensor expected[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    ly_status st = ly_kernel_infer_outputs(slot, call, expected, &n_out);
    expect_status(st, slot, iteration);
    int64_t shape[LY_MAX_DIMS];
    if (st == LY_OK && below(r, 8) != 0) {
        assert_int_equal(n_out, 1);
        int64_t numel = ly_tensor_numel(&expected[0]);
        if (numel < 0 || numel > (1 << 24))
            fail_msg("%s, iteration %llu: inferred output of %lld elements from small inputs", slot,
                     (unsigned long long)iteration, (long long)numel);
        fuzz_tensor_make(r, out, expected[0].dtype, expected[0].ndim, expected[0].shape);
        return;
    }
    int ndim = random_dims(r, shape, random_rank(r, 2), 40);
    fuzz_tensor_make(r, out, random_dtype(r, LY_F32), ndim, shape);
}

static void fuzz_unpack_int_grouped(rng *r, uint64_t it)
{
    int64_t rows = (int64_t)below(r, 6);
    int64_t bits = random_bits(r);
    int64_t g = random_group(r);
    int64_t ng = (int64_t)below(r, 4);
    int64_t payload_cols;
    if (below(r, 4) && (bits == 2 || bits == 4) && g > 0 && g <= 128)
        payload_cols = ng * g * bits / 8; /* consistent */
    else
        payload_cols = (int64_t)below(r, 80);
    int64_t pshape[LY_MAX_DIMS] = {rows, payload_cols}, sshape[LY_MAX_DIMS] = {rows, ng};
    if (below(r, 6) == 0) random_dims(r, sshape, 2, 6);
    fuzz_tensor payload, scale, out;
    fuzz_tensor_make(r, &payload, random_dtype(r, LY_U8), random_rank(r, 2), pshape);
    fuzz_tensor_make(r, &scale, random_dtype(r, LY_F32), random_rank(r, 2), sshape);

    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = below(r, 20) ? &payload.t : NULL;
    call.in[1] = below(r, 20) ? &scale.t : NULL;
    ly_unpack_int_grouped_params params = {
        .bits = bits,
        .group_size = g,
        .in_features = random_in_features(r, ng * (g > 0 && g < 4096 ? g : 1))};
    call.params = &params;
    call.threads = 1 + (int)below(r, 3);
    make_output(r, ly_op_name(LY_OP_UNPACK_INT_GROUPED), &call, &out, it);
    call.out[0] = &out.t;
    expect_status(ly_kernel_dispatch_op(LY_OP_UNPACK_INT_GROUPED, &call), "unpack_int_grouped", it);
    expect_status(
        ly_unpack_int_grouped(call.in[0], call.in[1], bits, g, params.in_features, &out.t),
        "ly_unpack_int_grouped", it);
    fuzz_tensor_free(&payload);
    fuzz_tensor_free(&scale);
    fuzz_tensor_free(&out);
}

static void fuzz_unpack_nvfp4(rng *r, uint64_t it)
{
    int64_t rows = (int64_t)below(r, 6), nb = (int64_t)below(r, 5);
    int64_t pshape[LY_MAX_DIMS] = {rows, below(r, 3) ? nb * 8 : (int64_t)below(r, 50)};
    int64_t sshape[LY_MAX_DIMS] = {rows, nb};
    int64_t ashape[LY_MAX_DIMS] = {below(r, 8) ? 1 : (int64_t)below(r, 3)};
    if (below(r, 6) == 0) random_dims(r, sshape, 2, 6);
    fuzz_tensor payload, block_scale, amax, out;
    fuzz_tensor_make(r, &payload, random_dtype(r, LY_U8), random_rank(r, 2), pshape);
    fuzz_tensor_make(r, &block_scale, random_dtype(r, below(r, 2) ? LY_F8E4M3 : LY_F32),
                     random_rank(r, 2), sshape);
    fuzz_tensor_make(r, &amax, random_dtype(r, LY_F32), random_rank(r, 1), ashape);

    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = below(r, 20) ? &payload.t : NULL;
    call.in[1] = below(r, 20) ? &block_scale.t : NULL;
    call.in[2] = below(r, 20) ? &amax.t : NULL;
    ly_unpack_nvfp4_params params = {.in_features = random_in_features(r, nb * LY_NVFP4_BLOCK)};
    call.params = &params;
    call.threads = 1 + (int)below(r, 3);
    make_output(r, ly_op_name(LY_OP_UNPACK_NVFP4), &call, &out, it);
    call.out[0] = &out.t;
    expect_status(ly_kernel_dispatch_op(LY_OP_UNPACK_NVFP4, &call), "unpack_nvfp4", it);
    expect_status(ly_unpack_nvfp4(call.in[0], call.in[1], call.in[2], params.in_features, &out.t),
                  "ly_unpack_nvfp4", it);
    fuzz_tensor_free(&payload);
    fuzz_tensor_free(&block_scale);
    fuzz_tensor_free(&amax);
    fuzz_tensor_free(&out);
}

static void fuzz_unpack_mxfp4(rng *r, uint64_t it)
{
    int64_t rows = (int64_t)below(r, 6), nb = (int64_t)below(r, 4);
    int64_t pshape[LY_MAX_DIMS] = {rows, below(r, 3) ? nb * 16 : (int64_t)below(r, 70)};
    int64_t eshape[LY_MAX_DIMS] = {rows, nb};
    if (below(r, 6) == 0) random_dims(r, eshape, 2, 6);
    int64_t in_features = random_in_features(r, nb * LY_MXFP4_BLOCK);
    int64_t oshape[LY_MAX_DIMS] = {rows, in_features < 0 ? nb * LY_MXFP4_BLOCK : in_features};
    if (oshape[1] > nb * LY_MXFP4_BLOCK + 16 || below(r, 8) == 0) random_dims(r, oshape, 2, 40);
    fuzz_tensor payload, block_exp, out;
    fuzz_tensor_make(r, &payload, random_dtype(r, LY_U8), random_rank(r, 2), pshape);
    fuzz_tensor_make(r, &block_exp, random_dtype(r, LY_I8), random_rank(r, 2), eshape);
    fuzz_tensor_make(r, &out, random_dtype(r, LY_F32), random_rank(r, 2), oshape);
    expect_status(ly_unpack_mxfp4(below(r, 20) ? &payload.t : NULL,
                                  below(r, 20) ? &block_exp.t : NULL, in_features,
                                  below(r, 20) ? &out.t : NULL),
                  "ly_unpack_mxfp4", it);
    fuzz_tensor_free(&payload);
    fuzz_tensor_free(&block_exp);
    fuzz_tensor_free(&out);
}

/* int8 and fp8: codes of the weight's shape, one scale per row. */
static void fuzz_unpack_codes(rng *r, uint64_t it, bool fp8)
{
    int64_t shape[LY_MAX_DIMS];
    int ndim = random_dims(r, shape, 1 + (int)below(r, 4), 6);
    int64_t sshape[LY_MAX_DIMS] = {shape[0]};
    if (below(r, 6) == 0) sshape[0] = (int64_t)below(r, 8);
    int64_t oshape[LY_MAX_DIMS];
    memcpy(oshape, shape, sizeof oshape);
    if (below(r, 8) == 0) random_dims(r, oshape, ndim, 6);
    fuzz_tensor codes, scale, out;
    ly_dtype code_dtype = fp8 ? (below(r, 2) ? LY_F8E4M3 : LY_U8) : LY_I8;
    fuzz_tensor_make(r, &codes, random_dtype(r, code_dtype), ndim, shape);
    fuzz_tensor_make(r, &scale, random_dtype(r, LY_F32), random_rank(r, 1), sshape);
    fuzz_tensor_make(r, &out, random_dtype(r, LY_F32), ndim, oshape);
    const ly_tensor *c = below(r, 20) ? &codes.t : NULL;
    const ly_tensor *s = below(r, 20) ? &scale.t : NULL;
    ly_tensor *o = below(r, 20) ? &out.t : NULL;
    if (fp8)
        expect_status(ly_unpack_fp8(c, s, o), "ly_unpack_fp8", it);
    else
        expect_status(ly_unpack_int8(c, s, o), "ly_unpack_int8", it);
    fuzz_tensor_free(&codes);
    fuzz_tensor_free(&scale);
    fuzz_tensor_free(&out);
}

static void test_fuzz_unpack(void **state)
{
    (void)state;
    rng r = {0x756e7061636b2121ull};
    for (uint64_t it = 0; it < UNPACK_ITERATIONS; it++) {
        switch (it % 5) {
        case 0:
            fuzz_unpack_int_grouped(&r, it);
            break;
        case 1:
            fuzz_unpack_nvfp4(&r, it);
            break;
        case 2:
            fuzz_unpack_mxfp4(&r, it);
            break;
        case 3:
            fuzz_unpack_codes(&r, it, false);
            break;
        default:
            fuzz_unpack_codes(&r, it, true);
            break;
        }
    }
}

/* The same fuzz with only the references, so both paths are covered whatever
 * this machine's providers are. */
static void test_fuzz_unpack_reference_only(void **state)
{
    setenv("LIBREYOLO_KERNELS", "off", 1);
    test_fuzz_unpack(state);
    unsetenv("LIBREYOLO_KERNELS");
}

/* Runs after the others: each kind of call succeeded often enough (at least
 * 1%) for the fuzz to have exercised the code behind the validation. */
static void test_fuzz_reached_the_kernels(void **state)
{
    (void)state;
    for (int k = 0; k < N_KINDS; k++)
        if (call_count[k] == 0 || ok_count[k] * 100u < call_count[k])
            fail_msg("%s: only %u of %u fuzzed calls succeeded", kind_names[k], ok_count[k],
                     call_count[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_npy),
        cmocka_unit_test(test_fuzz_unpack),
        cmocka_unit_test(test_fuzz_unpack_reference_only),
        cmocka_unit_test(test_fuzz_reached_the_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
