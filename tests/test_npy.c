/* SPDX-License-Identifier: MIT */
/* The .npy reader and writer: round trips, the header forms NumPy writes, every
 * malformed case with its status and message, and the atomic save. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "libreyolo/io.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static size_t read_file(const char *path, uint8_t *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, size, f);
    fclose(f);
    return n;
}

/* Build a .npy of format `major`.0 around `header` (written as given) and a
 * payload. Returns its length. */
static size_t make_npy(uint8_t *buf, size_t size, int major, const char *header,
                       const void *payload, size_t payload_len)
{
    size_t hlen = strlen(header);
    size_t at = major == 1 ? 10 : 12;
    assert_true(at + hlen + payload_len <= size);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    if (major != 1) {
        buf[10] = (uint8_t)(hlen >> 16);
        buf[11] = (uint8_t)(hlen >> 24);
    }
    memcpy(buf + at, header, hlen);
    if (payload_len) memcpy(buf + at + hlen, payload, payload_len);
    return at + hlen + payload_len;
}

/* ---- Tensor allocation ---------------------------------------------------- */

static void test_alloc(void **state)
{
    (void)state;
    ly_tensor t;
    const int64_t shape[3] = {2, 3, 5};
    assert_int_equal(ly_tensor_alloc(&t, LY_F32, 3, shape), LY_OK);
    assert_non_null(t.data);
    assert_int_equal((uintptr_t)t.data % 64, 0);
    for (int i = 0; i < 30; i++)
        assert_true(((float *)t.data)[i] == 0.0f);
    assert_int_equal(ly_tensor_numel(&t), 30);
    assert_int_equal(ly_tensor_free(&t), LY_OK);
    assert_null(t.data);
    assert_int_equal(ly_tensor_free(&t), LY_OK);
    assert_int_equal(ly_tensor_free(NULL), LY_OK);

    const int64_t empty[2] = {0, 7};
    assert_int_equal(ly_tensor_alloc(&t, LY_U8, 2, empty), LY_OK);
    assert_non_null(t.data);
    ly_tensor_free(&t);
    assert_int_equal(ly_tensor_alloc(&t, LY_F64, 0, NULL), LY_OK);
    assert_int_equal(ly_tensor_numel(&t), 1);
    ly_tensor_free(&t);

    const int64_t negative[1] = {-1};
    const int64_t huge[2] = {INT64_MAX, 2};
    assert_int_equal(ly_tensor_alloc(NULL, LY_F32, 0, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_tensor_alloc(&t, LY_F32, 1, negative), LY_E_SHAPE);
    assert_null(t.data);
    assert_int_equal(ly_tensor_alloc(&t, LY_F32, 2, huge), LY_E_SHAPE);
    assert_int_equal(ly_tensor_alloc(&t, LY_F32, LY_MAX_DIMS + 1, shape), LY_E_SHAPE);
    assert_int_equal(ly_tensor_alloc(&t, LY_F32, 1, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_tensor_alloc(&t, (ly_dtype)99, 1, shape), LY_E_DTYPE);
}

/* ---- Round trips ---------------------------------------------------------- */

static void test_round_trip_every_dtype_and_rank(void **state)
{
    (void)state;
    const ly_dtype dtypes[] = {LY_F32, LY_F64, LY_I8, LY_U8, LY_I32, LY_I64, LY_F16, LY_F8E4M3};
    const struct {
        int ndim;
        int64_t shape[3];
    } shapes[] = {{0, {0}}, {1, {5}}, {3, {2, 3, 4}}, {2, {0, 3}}, {1, {1}}};
    char path[512];
    ly_test_scratch_path("round.npy", path, sizeof path);
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            ly_tensor t;
            assert_int_equal(ly_tensor_alloc(&t, dtypes[d], shapes[s].ndim, shapes[s].shape),
                             LY_OK);
            size_t bytes = (size_t)ly_tensor_numel(&t) * ly_dtype_size(dtypes[d]);
            for (size_t i = 0; i < bytes; i++)
                ((uint8_t *)t.data)[i] = (uint8_t)(i * 37 + d);
            assert_int_equal(ly_npy_save(path, &t), LY_OK);

            ly_tensor back;
            assert_int_equal(ly_npy_load(path, &back), LY_OK);
            /* NumPy has no E4M3 dtype: the codes come back as u8. */
            assert_int_equal(back.dtype, dtypes[d] == LY_F8E4M3 ? LY_U8 : dtypes[d]);
            assert_int_equal(back.ndim, t.ndim);
            for (int i = 0; i < t.ndim; i++)
                assert_int_equal(back.shape[i], t.shape[i]);
            if (bytes) assert_memory_equal(back.data, t.data, bytes);
            assert_int_equal((uintptr_t)back.data % 64, 0);

            /* The in-memory reader gives the same tensor. */
            uint8_t file[512];
            size_t n = read_file(path, file, sizeof file);
            ly_tensor mem;
            assert_int_equal(ly_npy_load_buffer(file, n, "round", &mem), LY_OK);
            assert_int_equal(mem.dtype, back.dtype);
            assert_int_equal(mem.ndim, back.ndim);
            if (bytes) assert_memory_equal(mem.data, t.data, bytes);
            ly_npy_free(&mem);
            ly_npy_free(&back);
            ly_tensor_free(&t);
        }
    }
}

/* The writer produces exactly what NumPy's write_array does. */
static void test_saved_header_matches_numpy(void **state)
{
    (void)state;
    float data[6] = {1, 2, 3, 4, 5, 6};
    ly_tensor t;
    const int64_t shape[2] = {2, 3};
    assert_int_equal(ly_tensor_init(&t, data, LY_F32, 2, shape), LY_OK);
    char path[512];
    assert_int_equal(ly_npy_save(ly_test_scratch_path("header.npy", path, sizeof path), &t), LY_OK);
    uint8_t file[256];
    size_t n = read_file(path, file, sizeof file);
    assert_int_equal(n, 128 + sizeof data);
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert_memory_equal(file, "\x93NUMPY\x01\x00", 8);
    assert_int_equal(file[8] | file[9] << 8, 118);
    assert_memory_equal(file + 10, dict, sizeof dict - 1);
    for (size_t i = 10 + sizeof dict - 1; i < 127; i++)
        assert_int_equal(file[i], ' ');
    assert_int_equal(file[127], '\n');
    assert_memory_equal(file + 128, data, sizeof data);

    const int64_t one[1] = {7};
    uint8_t codes[7] = {0};
    assert_int_equal(ly_tensor_init(&t, codes, LY_F8E4M3, 1, one), LY_OK);
    assert_int_equal(ly_npy_save(path, &t), LY_OK);
    n = read_file(path, file, sizeof file);
    const char dict1[] = "{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }";
    assert_memory_equal(file + 10, dict1, sizeof dict1 - 1);
    assert_int_equal(ly_tensor_init(&t, data, LY_F32, 0, NULL), LY_OK);
    assert_int_equal(ly_npy_save(path, &t), LY_OK);
    n = read_file(path, file, sizeof file);
    assert_int_equal(n, 128 + 4);
    const char dict0[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    assert_memory_equal(file + 10, dict0, sizeof dict0 - 1);
}

/* ---- Hand-written headers: every form NumPy (or a person) writes ----------- */

static void expect_valid(const uint8_t *buf, size_t n, ly_dtype dtype, int ndim,
                         const int64_t *shape, const void *payload, size_t payload_len)
{
    ly_tensor t;
    ly_status st = ly_npy_load_buffer(buf, n, "hand", &t);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(t.dtype, dtype);
    assert_int_equal(t.ndim, ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(t.shape[i], shape[i]);
    if (payload_len) assert_memory_equal(t.data, payload, payload_len);
    ly_npy_free(&t);

    /* The file reader agrees. */
    char path[512];
    write_file(ly_test_scratch_path("hand.npy", path, sizeof path), buf, n);
    st = ly_npy_load(path, &t);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(t.dtype, dtype);
    assert_int_equal(t.ndim, ndim);
    if (payload_len) assert_memory_equal(t.data, payload, payload_len);
    ly_npy_free(&t);
}

static void test_hand_written_headers(void **state)
{
    (void)state;
    uint8_t buf[1024];
    const float f[6] = {1.5f, -2.0f, 0.0f, 3.25f, 1e30f, -0.0f};
    const int64_t s23[2] = {2, 3}, s6[1] = {6}, s321[3] = {3, 2, 1};
    size_t n;
    for (int major = 1; major <= 3; major++) {
        n = make_npy(buf, sizeof buf, major,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", f,
                     sizeof f);
        expect_valid(buf, n, LY_F32, 2, s23, f, sizeof f);
        /* Any key order, double quotes, no trailing comma, odd spacing, no newline. */
        n = make_npy(buf, sizeof buf, major,
                     "{ \"shape\" : ( 6 , ) ,'fortran_order':False,\t'descr':\"<f4\"}", f,
                     sizeof f);
        expect_valid(buf, n, LY_F32, 1, s6, f, sizeof f);
        n = make_npy(buf, sizeof buf, major,
                     "{'fortran_order': False, 'descr': '|u1', 'shape': (3, 2, 1,),}\n", f, 6);
        expect_valid(buf, n, LY_U8, 3, s321, f, 6);
    }
    n = make_npy(buf, sizeof buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': ()}", f, 8);
    expect_valid(buf, n, LY_I64, 0, NULL, f, 8);
    n = make_npy(buf, sizeof buf, 2, "{'descr': '|i1', 'fortran_order': False, 'shape': (0, 4)}",
                 NULL, 0);
    const int64_t s04[2] = {0, 4};
    expect_valid(buf, n, LY_I8, 2, s04, NULL, 0);
    /* Every descr. */
    const struct {
        const char *descr;
        ly_dtype dtype;
        size_t size;
    } descrs[] = {{"<f4", LY_F32, 4}, {"<f8", LY_F64, 8}, {"<f2", LY_F16, 2}, {"|i1", LY_I8, 1},
                  {"|u1", LY_U8, 1},  {"<i4", LY_I32, 4}, {"<i8", LY_I64, 8}};
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++) {
        char header[128];
        snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }",
                 descrs[i].descr);
        const uint8_t payload[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        n = make_npy(buf, sizeof buf, 3, header, payload, 2 * descrs[i].size);
        const int64_t s2[1] = {2};
        expect_valid(buf, n, descrs[i].dtype, 1, s2, payload, 2 * descrs[i].size);
    }
    /* The largest rank. */
    n = make_npy(buf, sizeof buf, 1,
                 "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 2), }", f,
                 8);
    const int64_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    expect_valid(buf, n, LY_F32, 8, s8, f, 8);
}

/* ---- Malformed input ----------------------------------------------------- */

/* Both readers give `status` and a message naming the file and containing
 * each of the NULL-terminated `words`. */
static void expect_error(const uint8_t *buf, size_t n, ly_status status, ...)
{
    ly_tensor t = {.data = (void *)1};
    ly_status st = ly_npy_load_buffer(buf, n, "bad_thing.npy", &t);
    if (st != status)
        fail_msg("status %d (%s), expected %d; message: %s", st, ly_status_name(st), status,
                 ly_last_error());
    assert_null(t.data);
    const char *msg = ly_last_error();
    if (!strstr(msg, "bad_thing.npy")) fail_msg("message does not name the buffer: %s", msg);
    va_list ap;
    va_start(ap, status);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(msg, w)) fail_msg("message lacks \"%s\": %s", w, msg);
    va_end(ap);

    char path[512];
    write_file(ly_test_scratch_path("bad_file.npy", path, sizeof path), buf, n);
    st = ly_npy_load(path, &t);
    if (st != status) fail_msg("file: status %d, expected %d; %s", st, status, ly_last_error());
    assert_null(t.data);
    msg = ly_last_error();
    if (!strstr(msg, path)) fail_msg("message does not name the file: %s", msg);
    va_start(ap, status);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(msg, w)) fail_msg("file: message lacks \"%s\": %s", w, msg);
    va_end(ap);
}

static void expect_header_error(int major, const char *header, size_t payload_len,
                                const char *word1, const char *word2)
{
    uint8_t buf[1024];
    uint8_t payload[64] = {0};
    assert_true(payload_len <= sizeof payload);
    size_t n = make_npy(buf, sizeof buf, major, header, payload, payload_len);
    expect_error(buf, n, LY_E_FORMAT, word1, word2, (const char *)NULL);
}

#define DICT(descr, fortran, shape)                                                                \
    "{'descr': " descr ", 'fortran_order': " fortran ", 'shape': " shape ", }"

static void test_bad_preamble(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = make_npy(buf, sizeof buf, 1, DICT("'<f4'", "False", "(1,)"), "\0\0\0\0", 4);

    expect_error(buf, 0, LY_E_FORMAT, "magic", (const char *)NULL);
    expect_error(buf, 5, LY_E_FORMAT, "magic", (const char *)NULL);
    buf[1] = 'n';
    expect_error(buf, n, LY_E_FORMAT, "magic", (const char *)NULL);
    buf[1] = 'N';
    expect_error(buf, 7, LY_E_FORMAT, "version", (const char *)NULL);

    buf[6] = 4;
    expect_error(buf, n, LY_E_FORMAT, "version 4.0", "1.0, 2.0, 3.0", (const char *)NULL);
    buf[6] = 0;
    expect_error(buf, n, LY_E_FORMAT, "version 0.0", (const char *)NULL);
    buf[6] = 1;
    buf[7] = 1;
    expect_error(buf, n, LY_E_FORMAT, "version 1.1", (const char *)NULL);
    buf[7] = 0;

    expect_error(buf, 9, LY_E_FORMAT, "header length field", (const char *)NULL);
    /* Header length past the end of the file. */
    uint8_t saved = buf[9];
    buf[9] = 0x7f;
    expect_error(buf, n, LY_E_FORMAT, "header length", "past the end", (const char *)NULL);
    buf[9] = saved;
    expect_error(buf, 40, LY_E_FORMAT, "header length", "past the end", (const char *)NULL);

    n = make_npy(buf, sizeof buf, 2, DICT("'<f4'", "False", "(1,)"), "\0\0\0\0", 4);
    expect_error(buf, 11, LY_E_FORMAT, "header length field", (const char *)NULL);
    buf[11] = 0x80; /* a 2 GiB header */
    expect_error(buf, n, LY_E_FORMAT, "header length", (const char *)NULL);
}

static void test_bad_header_dict(void **state)
{
    (void)state;
    for (int major = 1; major <= 3; major++) {
        expect_header_error(major, "{'descr': '<f4', 'fortran_order': False}", 4,
                            "missing key 'shape'", NULL);
        expect_header_error(major, "{'shape': (1,), 'fortran_order': False}", 4,
                            "missing key 'descr'", NULL);
        expect_header_error(major, "{'shape': (1,), 'descr': '<f4'}", 4,
                            "missing key 'fortran_order'", NULL);
        expect_header_error(major, DICT("'<c8'", "False", "(1,)"), 8, "unsupported descr '<c8'",
                            "'<f4', '<f8', '<f2', '|i1', '|u1', '<i4', '<i8'");
        expect_header_error(major, DICT("'<u4'", "False", "(1,)"), 4, "unsupported descr '<u4'",
                            "'|u1'");
        expect_header_error(major, DICT("'>f4'", "False", "(1,)"), 4, "big-endian", "'>f4'");
        expect_header_error(major, DICT("'>i8'", "False", "(1,)"), 8, "big-endian", NULL);
        expect_header_error(major, DICT("[('a', '<f4')]", "False", "(1,)"), 4, "structured",
                            "'<f4'");
        expect_header_error(major, DICT("'<f4'", "True", "(2, 2)"), 16, "fortran_order", "Fortran");
        expect_header_error(major, DICT("'<f4'", "1", "(1,)"), 4, "True or False", NULL);
        expect_header_error(major, DICT("'<f4'", "Falsey", "(1,)"), 4, "True or False", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(2, -3)"), 0, "negative", "-3");
        expect_header_error(major, DICT("'<f4'", "False", "(99999999999999999999,)"), 0,
                            "overflows", NULL);
        /* Each extent fits, the product does not (multiplication overflow). */
        expect_header_error(major, DICT("'<f4'", "False", "(4294967296, 4294967296)"), 0,
                            "overflows", NULL);
        expect_header_error(major, DICT("'<f8'", "False", "(1152921504606846976,)"), 0, "overflows",
                            NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4,
                            "more than 8 dimensions", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(3)"), 12, "not a tuple", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "[3]"), 12, "shape", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(3, x)"), 12, "shape", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(3,"), 12, "shape", NULL);
        expect_header_error(major,
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                            "'extra': 1}",
                            4, "unexpected key 'extra'", NULL);
        expect_header_error(major,
                            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                            "'shape': (1,)}",
                            4, "'descr' appears twice", NULL);
        expect_header_error(major, "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4,
                            "unsupported descr", NULL);
        expect_header_error(major, "{'descr': '<f4", 4, "unterminated string", NULL);
        expect_header_error(major, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
                            "':'", NULL);
        expect_header_error(major, DICT("'<f4'", "False", "(1,)") " trailing", 4,
                            "after the header dict", NULL);
        expect_header_error(major, "'descr': '<f4'", 4, "'{'", NULL);
        expect_header_error(major, "", 4, "ends early", NULL);
        expect_header_error(major, "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4,
                            "',' or '}'", NULL);
        expect_header_error(major, "{'de\\x': '<f4'}", 4, "escape", NULL);
        expect_header_error(major, "{\x01}", 4, "0x01", NULL);
    }
}

static void test_bad_payload(void **state)
{
    (void)state;
    /* Shorter than shape * itemsize: expected vs actual bytes. */
    expect_header_error(1, DICT("'<f4'", "False", "(2, 3)"), 20, "expected 24 bytes", "got 20");
    expect_header_error(2, DICT("'<i8'", "False", "(3,)"), 0, "expected 24 bytes", "got 0");
    expect_header_error(3, DICT("'<f4'", "False", "()"), 3, "expected 4 bytes", "got 3");
    /* Longer than the shape says. */
    expect_header_error(1, DICT("'<f4'", "False", "(2,)"), 9, "too long", "expected 8 bytes");
    expect_header_error(1, DICT("'<f4'", "False", "(0, 5)"), 1, "too long", "expected 0 bytes");
    /* A huge shape with a tiny payload is refused before anything is allocated. */
    expect_header_error(1, DICT("'|u1'", "False", "(1099511627776,)"), 8, "truncated",
                        "expected 1099511627776 bytes");
}

static void test_bad_arguments_and_files(void **state)
{
    (void)state;
    ly_tensor t;
    char path[512];
    assert_int_equal(ly_npy_load(NULL, &t), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_load("", &t), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_load("x.npy", NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_load_buffer(NULL, 10, NULL, &t), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_load_buffer("x", 1, NULL, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_load_buffer(NULL, 0, NULL, &t), LY_E_FORMAT);
    assert_non_null(strstr(ly_last_error(), "<buffer>"));

    ly_test_scratch_path("does_not_exist.npy", path, sizeof path);
    assert_int_equal(ly_npy_load(path, &t), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), path));
    ly_test_scratch_path("no_dir/x.npy", path, sizeof path);
    assert_int_equal(ly_npy_load(path, &t), LY_E_NOT_FOUND);
    /* A directory is not a .npy file. */
    assert_int_equal(ly_npy_load(ly_test_scratch(), &t), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), ly_test_scratch()));
    assert_null(t.data);
}

/* ---- Atomic save --------------------------------------------------------- */

static int count_entries(const char *dir, const char *containing)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, containing)) count++;
    closedir(d);
    return count;
}

static void test_atomic_save(void **state)
{
    (void)state;
    char path[512];
    ly_test_scratch_path("target.npy", path, sizeof path);
    int32_t values[4] = {1, -2, 3, -4};
    const int64_t shape[1] = {4};
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, values, LY_I32, 1, shape), LY_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ly_npy_save(path, &t), LY_OK);
    assert_int_equal(count_entries(ly_test_scratch(), ".tmp"), 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    /* The usual mode, not mkstemp's 0600. */
    mode_t mask = umask(0);
    umask(mask);
    assert_int_equal(sb.st_mode & 0777, 0666 & ~mask);

    uint8_t before[256], after[256];
    size_t n_before = read_file(path, before, sizeof before);

    /* Failures before anything is written leave the target alone. */
    ly_tensor bad = t;
    bad.shape[0] = -1;
    assert_int_equal(ly_npy_save(path, &bad), LY_E_SHAPE);
    bad = t;
    bad.dtype = (ly_dtype)42;
    assert_int_equal(ly_npy_save(path, &bad), LY_E_DTYPE);
    bad = t;
    bad.data = NULL;
    assert_int_equal(ly_npy_save(path, &bad), LY_E_INVALID_ARGUMENT);
    bad = t;
    bad.ndim = LY_MAX_DIMS + 1;
    assert_int_equal(ly_npy_save(path, &bad), LY_E_SHAPE);
    assert_int_equal(ly_npy_save(path, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_npy_save(NULL, &t), LY_E_INVALID_ARGUMENT);
    assert_int_equal(read_file(path, after, sizeof after), n_before);
    assert_memory_equal(before, after, n_before);

    /* A directory that does not exist: an I/O error naming the path, nothing created. */
    char missing[512];
    ly_test_scratch_path("no_such_dir/out.npy", missing, sizeof missing);
    assert_int_equal(ly_npy_save(missing, &t), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), missing));
    assert_int_equal(count_entries(ly_test_scratch(), "no_such_dir"), 0);

    /* Renaming over a directory fails after the data was written: the temporary
     * file is removed and the directory stays. */
    char dir_target[512];
    ly_test_scratch_path("a_directory", dir_target, sizeof dir_target);
    assert_int_equal(mkdir(dir_target, 0700), 0);
    assert_int_equal(ly_npy_save(dir_target, &t), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), "rename"));
    assert_int_equal(count_entries(ly_test_scratch(), ".tmp"), 0);
    assert_int_equal(stat(dir_target, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    rmdir(dir_target);

    /* The saved file reads back. */
    ly_tensor back;
    assert_int_equal(ly_npy_load(path, &back), LY_OK);
    assert_memory_equal(back.data, values, sizeof values);
    ly_npy_free(&back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc),
        cmocka_unit_test(test_round_trip_every_dtype_and_rank),
        cmocka_unit_test(test_saved_header_matches_numpy),
        cmocka_unit_test(test_hand_written_headers),
        cmocka_unit_test(test_bad_preamble),
        cmocka_unit_test(test_bad_header_dict),
        cmocka_unit_test(test_bad_payload),
        cmocka_unit_test(test_bad_arguments_and_files),
        cmocka_unit_test(test_atomic_save),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
