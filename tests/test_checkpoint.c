/* SPDX-License-Identifier: MIT */
/* The checkpoint reader: LibreYOLO's fixture checkpoint (keys, shapes, values,
 * metadata), small PyTorch 1.13- and 2.x-style archives and safetensors files
 * built here byte by byte, the restricted unpickler refusing what
 * torch.load(weights_only=True) refuses, and every malformed case with its
 * status and message. */
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
#include <unistd.h>

#define FIXTURE_DIR LY_SHARED_DIR "/testdata/yolo9"

/* ---- helpers ---------------------------------------------------------------- */

static ly_checkpoint *open_ok(const bbuf *b)
{
    ly_checkpoint *ck = NULL;
    ly_status st = ly_checkpoint_open_buffer(b->p, b->n, "test.pt", &ck);
    if (st != LY_OK) fail_msg("open failed: %s: %s", ly_status_name(st), ly_last_error());
    assert_non_null(ck);
    return ck;
}

/* Open `b` expecting `status` and a message holding each of the NULL-ended
 * fragments (and always the name of the file). */
static void expect_error(const bbuf *b, ly_status status, ...)
{
    ly_checkpoint *ck = (ly_checkpoint *)(uintptr_t)1;
    ly_status st = ly_checkpoint_open_buffer(b->p, b->n, "bad.pt", &ck);
    const char *msg = ly_last_error();
    if (st != status)
        fail_msg("expected %s, got %s: %s", ly_status_name(status), ly_status_name(st), msg);
    assert_null(ck);
    if (!strstr(msg, "bad.pt")) fail_msg("message does not name the file: %s", msg);
    va_list ap;
    va_start(ap, status);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!strstr(msg, frag)) fail_msg("message lacks \"%s\": %s", frag, msg);
    va_end(ap);
}

/* A zip with data.pkl = `pickle` and the small checkpoint's storages. */
static void zip_with_pickle(bbuf *out, const bbuf *pickle)
{
    small_storages s;
    small_storages_init(&s);
    small_zip(out, &s, pickle->p, pickle->n, false, ZB_ZIP64_END);
}

static void expect_pickle_error(const bbuf *pickle, ly_status status, const char *frag1,
                                const char *frag2)
{
    bbuf z = {0};
    zip_with_pickle(&z, pickle);
    expect_error(&z, status, frag1, frag2, (const char *)NULL);
    b_free(&z);
}

static size_t find_bytes(const bbuf *b, const void *needle, size_t n)
{
    for (size_t i = 0; i + n <= b->n; i++)
        if (memcmp(b->p + i, needle, n) == 0) return i;
    fail_msg("needle not found");
    return 0;
}

static void check_small_tensors(const ly_checkpoint *ck)
{
    size_t count = 0;
    assert_int_equal(ly_checkpoint_tensor_count(ck, &count), LY_OK);
    assert_int_equal(count, 4);
    const char *name;
    ly_tensor t;

    assert_int_equal(ly_checkpoint_tensor_at(ck, 0, &name, &t), LY_OK);
    assert_string_equal(name, "a.weight"); /* "module." stripped */
    assert_int_equal(t.dtype, LY_F32);
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 3);
    for (int i = 0; i < 6; i++)
        assert_true(((const float *)t.data)[i] == (float)i * 0.5f - 1.0f);

    assert_int_equal(ly_checkpoint_tensor_at(ck, 1, &name, &t), LY_OK);
    assert_string_equal(name, "a.bias");
    assert_int_equal(t.ndim, 1);
    assert_int_equal(t.shape[0], 3);
    /* offset 2, stride 2 over 10, 11, ... */
    assert_true(((const float *)t.data)[0] == 12.0f);
    assert_true(((const float *)t.data)[1] == 14.0f);
    assert_true(((const float *)t.data)[2] == 16.0f);

    assert_int_equal(ly_checkpoint_tensor_at(ck, 2, &name, &t), LY_OK);
    assert_string_equal(name, "bn.num_batches_tracked");
    assert_int_equal(t.dtype, LY_I64);
    assert_int_equal(t.ndim, 0);
    assert_int_equal(((const int64_t *)t.data)[0], 12345);

    assert_int_equal(ly_checkpoint_tensor_at(ck, 3, &name, &t), LY_OK);
    assert_string_equal(name, "c.half");
    assert_int_equal(t.dtype, LY_F32);
    /* Half storage [1, 2, -0.5, 65504] viewed with stride (1, 2): transposed. */
    const float *h = t.data;
    assert_true(h[0] == 1.0f && h[1] == -0.5f && h[2] == 2.0f && h[3] == 65504.0f);

    assert_int_equal(ly_checkpoint_tensor_at(ck, 4, &name, &t), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_checkpoint_find(ck, "a.bias", &t), LY_OK);
    assert_true(((const float *)t.data)[0] == 12.0f);
    assert_int_equal(ly_checkpoint_find(ck, "module.a.weight", &t), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "'module.a.weight'"));
    /* The "ema" copy is not read, so its missing storage "9" does not matter. */
    assert_int_equal(ly_checkpoint_find(ck, "x", &t), LY_E_NOT_FOUND);
}

static void check_small_metadata(const ly_checkpoint *ck)
{
    const char *s;
    int64_t v;
    assert_int_equal(ly_checkpoint_meta_string(ck, "schema_version", &s), LY_OK);
    assert_string_equal(s, "1.0");
    assert_int_equal(ly_checkpoint_meta_string(ck, "model_family", &s), LY_OK);
    assert_string_equal(s, "yolo9");
    assert_int_equal(ly_checkpoint_meta_string(ck, "size", &s), LY_OK);
    assert_string_equal(s, "t");
    assert_int_equal(ly_checkpoint_meta_string(ck, "task", &s), LY_OK);
    assert_string_equal(s, "detect");
    assert_int_equal(ly_checkpoint_meta_int(ck, "nc", &v), LY_OK);
    assert_int_equal(v, 2);
    assert_int_equal(ly_checkpoint_meta_int(ck, "imgsz", &v), LY_OK);
    assert_int_equal(v, 640);
    assert_int_equal(ly_checkpoint_meta_string(ck, "libreyolo_version", &s), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "libreyolo_version"));
    assert_int_equal(ly_checkpoint_meta_string(ck, "nc", &s), LY_E_DTYPE);
    assert_int_equal(ly_checkpoint_meta_int(ck, "optimizer", &v), LY_E_DTYPE);
    assert_non_null(strstr(ly_last_error(), "None"));
    assert_int_equal(ly_checkpoint_meta_int(ck, "task", &v), LY_E_DTYPE);
    size_t count;
    const char *const *names;
    assert_int_equal(ly_checkpoint_class_names(ck, &count, &names), LY_OK);
    assert_int_equal(count, 2);
    assert_string_equal(names[0], "person");
    assert_string_equal(names[1], "bicycle");
}

/* ---- small archives ----------------------------------------------------------- */

static void test_crc32_matches_zip(void **state)
{
    (void)state;
    assert_int_equal(ly_crc32(0, "123456789", 9), 0xcbf43926u);
    uint8_t buf[1031];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 131u + 7u);
    for (size_t n = 0; n < sizeof buf; n += 97)
        assert_int_equal(ly_crc32(0, buf, n), test_crc32(buf, n));
    /* Continuing a CRC over split input gives the same answer. */
    assert_int_equal(ly_crc32(ly_crc32(0, buf, 13), buf + 13, sizeof buf - 13),
                     test_crc32(buf, sizeof buf));
}

static void test_torch113_layout(void **state)
{
    (void)state;
    small_storages s;
    small_storages_init(&s);
    bbuf pickle = {0}, z = {0};
    small_pickle(&pickle, 2);
    small_zip(&z, &s, pickle.p, pickle.n, false, ZB_ZIP64_END);
    ly_checkpoint *ck = open_ok(&z);
    check_small_tensors(ck);
    check_small_metadata(ck);
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);

    /* The same from a file. */
    char path[] = "/tmp/ly_test_checkpoint_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, z.p, z.n), (ssize_t)z.n);
    close(fd);
    ck = NULL;
    assert_int_equal(ly_checkpoint_open(path, &ck), LY_OK);
    check_small_tensors(ck);
    ly_checkpoint_close(ck);
    unlink(path);
    assert_int_equal(ly_checkpoint_open(path, &ck), LY_E_NOT_FOUND);
    assert_null(ck);
    assert_non_null(strstr(ly_last_error(), path));
    assert_int_equal(ly_checkpoint_open("/tmp", &ck), LY_E_IO);
    assert_int_equal(ly_checkpoint_close(NULL), LY_OK);
    b_free(&pickle);
    b_free(&z);
}

static void test_torch2_layout(void **state)
{
    (void)state;
    small_storages s;
    small_storages_init(&s);
    bbuf pickle = {0}, z = {0};
    small_pickle(&pickle, 2);
    small_zip(&z, &s, pickle.p, pickle.n, true, ZB_ZIP64_END);
    ly_checkpoint *ck = open_ok(&z);
    check_small_tensors(ck);
    check_small_metadata(ck);
    ly_checkpoint_close(ck);
    b_free(&z);

    /* Sizes and offsets in ZIP64 extra fields, as in archives over 4 GB. */
    small_zip(&z, &s, pickle.p, pickle.n, true, ZB_ZIP64_END | ZB_ZIP64_EXTRA);
    ck = open_ok(&z);
    check_small_tensors(ck);
    ly_checkpoint_close(ck);
    /* ... and without the ZIP64 field they defer to */
    size_t extra_at = find_bytes(&z, "\x01\x00\x18\x00", 4);
    z.p[extra_at] = 0x02;
    expect_error(&z, LY_E_FORMAT, "ZIP64 extra field that is missing", (const char *)NULL);
    b_free(&z);

    /* Written on a big-endian machine: refused, not misread. */
    zentry e[2] = {zent("archive/data.pkl", pickle.p, pickle.n),
                   zent("archive/byteorder", "big", 3)};
    zip_build(&z, e, 2, ZB_ZIP64_END);
    expect_error(&z, LY_E_UNSUPPORTED, "archive/byteorder", "big-endian", (const char *)NULL);
    b_free(&z);
    e[1] = zent("archive/byteorder", "middle", 6);
    zip_build(&z, e, 2, ZB_ZIP64_END);
    expect_error(&z, LY_E_FORMAT, "archive/byteorder", (const char *)NULL);
    b_free(&z);
    b_free(&pickle);
}

static void sstr(bbuf *b, const char *s)
{
    b_u8(b, 0x8c);
    b_u8(b, (uint8_t)strlen(s));
    b_str(b, s);
}

/* Protocol 4 as pickle.dumps writes it: FRAME, SHORT_BINUNICODE, MEMOIZE,
 * STACK_GLOBAL, BINGET, plus _rebuild_parameter and torch.Size. */
static void test_protocol4_pickle(void **state)
{
    (void)state;
    bbuf body = {0}, p = {0}, z = {0};
    b_u8(&body, '}');
    b_u8(&body, 0x94); /* memo 0: top dict */
    sstr(&body, "state_dict");
    b_u8(&body, 0x94); /* 1 */
    sstr(&body, "collections");
    b_u8(&body, 0x94); /* 2 */
    sstr(&body, "OrderedDict");
    b_u8(&body, 0x94); /* 3 */
    b_u8(&body, 0x93);
    b_u8(&body, 0x94); /* 4: OrderedDict */
    b_u8(&body, ')');
    b_u8(&body, 'R');
    b_u8(&body, 0x94); /* 5: the state dict */
    sstr(&body, "w");
    sstr(&body, "torch._utils");
    sstr(&body, "_rebuild_parameter");
    b_u8(&body, 0x93);
    sstr(&body, "torch._utils");
    sstr(&body, "_rebuild_tensor_v2");
    b_u8(&body, 0x93);
    b_u8(&body, '(');
    b_u8(&body, '(');
    sstr(&body, "storage");
    sstr(&body, "torch");
    sstr(&body, "FloatStorage");
    b_u8(&body, 0x93);
    sstr(&body, "0");
    sstr(&body, "cpu");
    pk_int(&body, 6);
    b_u8(&body, 't');
    b_u8(&body, 'Q');
    pk_int(&body, 0);
    sstr(&body, "torch");
    sstr(&body, "Size");
    b_u8(&body, 0x93);
    pk_int(&body, 2);
    pk_int(&body, 3);
    b_u8(&body, 0x86);
    b_u8(&body, 0x85);
    b_u8(&body, 'R'); /* torch.Size((2, 3)) */
    pk_int(&body, 3);
    pk_int(&body, 1);
    b_u8(&body, 0x86);
    b_u8(&body, 0x88);
    b_u8(&body, 'h');
    b_u8(&body, 4);
    b_u8(&body, ')');
    b_u8(&body, 'R');
    b_u8(&body, 't');
    b_u8(&body, 'R'); /* the tensor */
    b_u8(&body, 0x88);
    b_u8(&body, 'h');
    b_u8(&body, 4);
    b_u8(&body, ')');
    b_u8(&body, 'R');
    b_u8(&body, 0x87);
    b_u8(&body, 'R'); /* _rebuild_parameter(tensor, True, OrderedDict()) */
    b_u8(&body, 's');
    b_u8(&body, 's'); /* top["state_dict"] = sd */
    sstr(&body, "nc");
    b_u8(&body, 0x8a);
    b_u8(&body, 1);
    b_u8(&body, 80); /* LONG1 */
    b_u8(&body, 's');
    sstr(&body, "lr");
    b_u8(&body, 'G');
    b_put(&body, "\x3f\x84\x7a\xe1\x47\xae\x14\x7b", 8); /* 0.01 */
    b_u8(&body, 's');
    b_u8(&body, '.');
    pk_proto(&p, 4);
    b_u8(&p, 0x95);
    b_le(&p, body.n, 8);
    b_put(&p, body.p, body.n);

    small_storages s;
    small_storages_init(&s);
    small_zip(&z, &s, p.p, p.n, true, ZB_ZIP64_END);
    ly_checkpoint *ck = open_ok(&z);
    size_t count;
    ly_checkpoint_tensor_count(ck, &count);
    assert_int_equal(count, 1);
    ly_tensor t;
    assert_int_equal(ly_checkpoint_find(ck, "w", &t), LY_OK);
    assert_int_equal(t.ndim, 2);
    assert_true(((const float *)t.data)[5] == 1.5f);
    int64_t nc;
    assert_int_equal(ly_checkpoint_meta_int(ck, "nc", &nc), LY_OK);
    assert_int_equal(nc, 80);
    ly_checkpoint_close(ck);
    b_free(&body);
    b_free(&p);
    b_free(&z);
}

static void test_bare_state_dict_and_name_lists(void **state)
{
    (void)state;
    bbuf p = {0}, z = {0};
    pk_proto(&p, 2);
    pk_global(&p, "collections", "OrderedDict");
    pk_op(&p, ')');
    pk_op(&p, 'R');
    pk_op(&p, '(');
    pk_str(&p, "k");
    pk_tensor(&p, "FloatStorage", "0", 6, 1, 1, (const int64_t[]){5}, NULL);
    pk_op(&p, 'u');
    /* state_dict's _metadata arrives through BUILD */
    pk_op(&p, '}');
    pk_str(&p, "_metadata");
    pk_op(&p, '}');
    pk_op(&p, 's');
    pk_op(&p, 'b');
    pk_op(&p, '.');
    zip_with_pickle(&z, &p);
    ly_checkpoint *ck = open_ok(&z);
    ly_tensor t;
    assert_int_equal(ly_checkpoint_find(ck, "k", &t), LY_OK);
    assert_true(((const float *)t.data)[0] == -0.5f);
    const char *s;
    size_t count;
    const char *const *names;
    assert_int_equal(ly_checkpoint_meta_string(ck, "model_family", &s), LY_E_NOT_FOUND);
    assert_int_equal(ly_checkpoint_class_names(ck, &count, &names), LY_E_NOT_FOUND);
    ly_checkpoint_close(ck);
    b_free(&p);
    b_free(&z);

    /* {"model": sd, "names": ["a", "b"]} and a sparse dict of names. */
    for (int form = 0; form < 2; form++) {
        pk_proto(&p, 2);
        pk_op(&p, '}');
        pk_str(&p, "model");
        pk_op(&p, '}');
        pk_str(&p, "k");
        pk_tensor(&p, "FloatStorage", "0", 6, 0, 1, (const int64_t[]){6}, NULL);
        pk_op(&p, 's');
        pk_op(&p, 's');
        /* torch.device, which weights_only also allows, as metadata */
        pk_str(&p, "device");
        pk_global(&p, "torch", "device");
        pk_str(&p, "cuda");
        pk_int(&p, 0);
        pk_op(&p, 0x86);
        pk_op(&p, 'R');
        pk_op(&p, 's');
        /* a repeated key: the last value counts, as in Python */
        pk_str(&p, "size");
        pk_str(&p, "s");
        pk_op(&p, 's');
        pk_str(&p, "size");
        pk_str(&p, "m");
        pk_op(&p, 's');
        pk_str(&p, "names");
        if (form == 0) {
            pk_op(&p, ']');
            pk_op(&p, '(');
            pk_str(&p, "a");
            pk_str(&p, "b");
            pk_op(&p, 'e');
        } else {
            pk_op(&p, '}');
            pk_int(&p, 2);
            pk_str(&p, "c");
            pk_op(&p, 's');
        }
        pk_op(&p, 's');
        pk_op(&p, '.');
        zip_with_pickle(&z, &p);
        ck = open_ok(&z);
        assert_int_equal(ly_checkpoint_meta_string(ck, "size", &s), LY_OK);
        assert_string_equal(s, "m");
        assert_int_equal(ly_checkpoint_meta_string(ck, "device", &s), LY_OK);
        assert_string_equal(s, "cuda");
        assert_int_equal(ly_checkpoint_class_names(ck, &count, &names), LY_OK);
        if (form == 0) {
            assert_int_equal(count, 2);
            assert_string_equal(names[1], "b");
        } else {
            assert_int_equal(count, 3);
            assert_null(names[0]);
            assert_string_equal(names[2], "c");
        }
        ly_checkpoint_close(ck);
        b_free(&p);
        b_free(&z);
    }
}

/* ---- the unpickler refuses code ---------------------------------------------------- */

static void test_malicious_pickles_refused(void **state)
{
    (void)state;
    bbuf p = {0};
    /* os.system("ls") the classic way */
    pk_proto(&p, 2);
    pk_global(&p, "os", "system");
    pk_str(&p, "ls");
    pk_op(&p, 0x85);
    pk_op(&p, 'R');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT,
                        "global 'os.system' is not allowed in a checkpoint (weights_only)",
                        "small/data.pkl: byte 2:");
    b_free(&p);

    /* posix.system through STACK_GLOBAL (protocol 4) */
    pk_proto(&p, 4);
    sstr(&p, "posix");
    sstr(&p, "system");
    pk_op(&p, 0x93);
    sstr(&p, "id");
    pk_op(&p, 0x85);
    pk_op(&p, 'R');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "global 'posix.system' is not allowed", "byte 17:");
    b_free(&p);

    /* builtins.eval inside an otherwise normal state dict */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_str(&p, "model");
    pk_global(&p, "builtins", "eval");
    pk_str(&p, "1");
    pk_op(&p, 0x85);
    pk_op(&p, 'R');
    pk_op(&p, 's');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "global 'builtins.eval' is not allowed", "byte 13:");
    b_free(&p);

    /* Allowed globals cannot be abused as callables either. */
    pk_proto(&p, 2);
    pk_global(&p, "torch", "FloatStorage");
    pk_op(&p, ')');
    pk_op(&p, 'R');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "'torch.FloatStorage' cannot be called", NULL);
    b_free(&p);

    /* Object-building opcodes are refused by name. */
    pk_proto(&p, 2);
    pk_global(&p, "collections", "OrderedDict");
    pk_op(&p, ')');
    pk_op(&p, 0x81);
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "opcode NEWOBJ (0x81) is not allowed", "byte 28:");
    b_free(&p);

    pk_proto(&p, 2);
    pk_op(&p, ']');
    pk_op(&p, '}');
    pk_op(&p, 'b');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "BUILD on a list is not allowed", NULL);
    b_free(&p);
}

/* ---- malformed pickles ---------------------------------------------------------- */

static void test_malformed_pickles(void **state)
{
    (void)state;
    bbuf p = {0};
    b_put(&p, "\x80\x02\xff", 3);
    expect_pickle_error(&p, LY_E_FORMAT, "byte 2: unknown opcode 0xff", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02}", 3);
    expect_pickle_error(&p, LY_E_FORMAT, "without a STOP", NULL);
    b_free(&p);

    b_put(&p, "\x80\x09}.", 4);
    expect_pickle_error(&p, LY_E_FORMAT, "protocol 9", NULL);
    b_free(&p);

    b_put(&p,
          "\x80\x02X\xff\xff\x00\x00"
          "ab.",
          10);
    expect_pickle_error(&p, LY_E_FORMAT, "truncated pickle", "BINUNICODE");
    b_free(&p);

    b_put(&p, "\x80\x02h\x07.", 5);
    expect_pickle_error(&p, LY_E_FORMAT, "memo index 7 was never stored", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02}r\xff\xff\xff\x7f.", 9);
    expect_pickle_error(&p, LY_E_FORMAT, "memo index 2147483647", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.", 14);
    expect_pickle_error(&p, LY_E_FORMAT, "does not fit in 64 bits", NULL);
    b_free(&p);

    pk_proto(&p, 2);
    for (int i = 0; i < 1001; i++)
        pk_op(&p, '(');
    expect_pickle_error(&p, LY_E_FORMAT, "nest deeper than 1000", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02X\x02\x00\x00\x00\xc3\x28.", 10);
    expect_pickle_error(&p, LY_E_FORMAT, "not valid UTF-8", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02\x85.", 4);
    expect_pickle_error(&p, LY_E_FORMAT, "TUPLE1 needs 1 values", NULL);
    b_free(&p);

    b_put(&p, "\x80\x02(s.", 5);
    expect_pickle_error(&p, LY_E_FORMAT, "SETITEM needs", NULL);
    b_free(&p);

    /* A list is not a checkpoint. */
    b_put(&p, "\x80\x02].", 4);
    expect_pickle_error(&p, LY_E_FORMAT, "is a list, expected a dict", NULL);
    b_free(&p);

    /* A persistent id that is not a storage tuple. */
    pk_proto(&p, 2);
    pk_str(&p, "storage");
    pk_op(&p, 'Q');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "persistent id is not ('storage'", NULL);
    b_free(&p);
}

static void state_dict_pickle(bbuf *p, const char *key1, const char *key2, int64_t numel, int ndim,
                              const int64_t *shape)
{
    pk_proto(p, 2);
    pk_op(p, '}');
    pk_str(p, "model");
    pk_op(p, '}');
    pk_op(p, '(');
    pk_str(p, key1);
    pk_tensor(p, "FloatStorage", "0", numel, 0, ndim, shape, NULL);
    if (key2) {
        pk_str(p, key2);
        pk_int(p, 7);
    }
    pk_op(p, 'u');
    pk_op(p, 's');
    pk_op(p, '.');
}

static void test_state_dict_errors(void **state)
{
    (void)state;
    bbuf p = {0};
    /* 3 x 3 on storage "0" of 6 floats */
    state_dict_pickle(&p, "a.weight", NULL, 6, 2, (const int64_t[]){3, 3});
    expect_pickle_error(&p, LY_E_FORMAT, "tensor 'a.weight'",
                        "reaches past the end of its storage '0'");
    b_free(&p);

    /* storage claims more elements than its record holds */
    state_dict_pickle(&p, "a.weight", NULL, 100, 1, (const int64_t[]){100});
    expect_pickle_error(&p, LY_E_FORMAT, "record 'small/data/0' holds 24 bytes", "a.weight");
    b_free(&p);

    state_dict_pickle(&p, "a.weight", "b.other", 6, 1, (const int64_t[]){6});
    expect_pickle_error(&p, LY_E_FORMAT, "state dict entry 'b.other' is an int, expected a tensor",
                        NULL);
    b_free(&p);

    /* "module.x" and "x" collide once the prefix is dropped */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_op(&p, '(');
    pk_str(&p, "module.x");
    pk_tensor(&p, "FloatStorage", "0", 6, 0, 1, (const int64_t[]){6}, NULL);
    pk_str(&p, "x");
    pk_tensor(&p, "FloatStorage", "0", 6, 0, 1, (const int64_t[]){6}, NULL);
    pk_op(&p, 'u');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "two tensors are named 'x'", NULL);
    b_free(&p);

    /* a storage key with no record */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "42", 1, 0, 1, (const int64_t[]){1}, NULL);
    pk_op(&p, 's');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "tensor 'w': its storage '42' is missing",
                        "no record 'small/data/42'");
    b_free(&p);

    /* neither a wrapper nor a bare state dict */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_str(&p, "epoch");
    pk_int(&p, 3);
    pk_op(&p, 's');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "no state dict", "'epoch' is an int");
    b_free(&p);

    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_str(&p, "model");
    pk_op(&p, 'N');
    pk_op(&p, 's');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "'model' is None", NULL);
    b_free(&p);

    /* a stride-0 view that would expand one float into a gigabyte */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_str(&p, "w");
    pk_tensor(&p, "FloatStorage", "0", 6, 0, 1, (const int64_t[]){(int64_t)1 << 28},
              (const int64_t[]){0});
    pk_op(&p, 's');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "tensor 'w' (268435456 elements)",
                        "more than a file of this size can hold");
    b_free(&p);

    /* names of the wrong kind */
    pk_proto(&p, 2);
    pk_op(&p, '}');
    pk_op(&p, '(');
    pk_str(&p, "model");
    pk_op(&p, '}');
    pk_str(&p, "names");
    pk_op(&p, '}');
    pk_str(&p, "zero");
    pk_str(&p, "person");
    pk_op(&p, 's');
    pk_op(&p, 'u');
    pk_op(&p, '.');
    expect_pickle_error(&p, LY_E_FORMAT, "'names' has a str key", NULL);
    b_free(&p);
}

/* ---- broken archives ------------------------------------------------------------ */

static void test_broken_archives(void **state)
{
    (void)state;
    small_storages s;
    small_storages_init(&s);
    bbuf pickle = {0}, z = {0};
    small_pickle(&pickle, 2);
    small_zip(&z, &s, pickle.p, pickle.n, false, ZB_ZIP64_END);

    /* cut short: the end records are gone */
    bbuf cut = {.p = z.p, .n = z.n / 2};
    expect_error(&cut, LY_E_FORMAT, "truncated zip", (const char *)NULL);
    cut.n = z.n - 1;
    expect_error(&cut, LY_E_FORMAT, "truncated zip", (const char *)NULL);
    cut.n = 10;
    expect_error(&cut, LY_E_FORMAT, "truncated zip", (const char *)NULL);

    /* a flipped bit in a storage */
    size_t at = find_bytes(&z, s.weight, sizeof s.weight);
    z.p[at + 5] ^= 0x10;
    expect_error(&z, LY_E_FORMAT, "bad CRC-32 in entry 'small/data/0'", (const char *)NULL);
    z.p[at + 5] ^= 0x10;

    /* ... and in the pickle */
    at = find_bytes(&z, "schema_version", 14);
    z.p[at] = 'S';
    expect_error(&z, LY_E_FORMAT, "bad CRC-32 in entry 'small/data.pkl'", (const char *)NULL);
    z.p[at] = 's';

    /* the central directory claims more entries than it holds */
    size_t z64 = find_bytes(&z, "PK\x06\x06", 4);
    z.p[z64 + 24] = 0xff;
    z.p[z64 + 32] = 0xff;
    expect_error(&z, LY_E_FORMAT, "central directory claims", (const char *)NULL);
    b_free(&z);

    /* a local header offset pointing past the data */
    small_zip(&z, &s, pickle.p, pickle.n, false, ZB_ZIP64_END);
    size_t cd = find_bytes(&z, "PK\x01\x02", 4);
    z.p[cd + 42] = 0xf0;
    z.p[cd + 43] = 0xff;
    expect_error(&z, LY_E_FORMAT, "local header offset", (const char *)NULL);
    b_free(&z);

    /* no data.pkl */
    zentry e[2] = {zent("x/version", "3\n", 2), zent("x/data/0", s.weight, sizeof s.weight)};
    zip_build(&z, e, 2, 0);
    expect_error(&z, LY_E_FORMAT, "missing data.pkl", (const char *)NULL);
    b_free(&z);

    /* duplicate names */
    e[0] = zent("x/data.pkl", pickle.p, pickle.n);
    e[1] = zent("x/data.pkl", pickle.p, pickle.n);
    zip_build(&z, e, 2, 0);
    expect_error(&z, LY_E_FORMAT, "two entries are named 'x/data.pkl'", (const char *)NULL);
    b_free(&z);

    /* a compressed entry */
    e[0] = zent("x/data.pkl", pickle.p, pickle.n);
    e[0].method = 8;
    zip_build(&z, e, 1, 0);
    expect_error(&z, LY_E_UNSUPPORTED, "'x/data.pkl' is compressed with method 8", "STORED",
                 (const char *)NULL);
    b_free(&z);

    /* other things that are not checkpoints */
    bbuf junk = {0};
    expect_error(&junk, LY_E_FORMAT, "empty", (const char *)NULL);
    b_put(&junk, "hello, this is not a checkpoint", 31);
    expect_error(&junk, LY_E_FORMAT, "not a checkpoint", (const char *)NULL);
    b_free(&junk);
    b_put(&junk, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
    expect_error(&junk, LY_E_UNSUPPORTED, "legacy", (const char *)NULL);
    b_free(&junk);
    b_free(&pickle);

    ly_checkpoint *ck = NULL;
    assert_int_equal(ly_checkpoint_open_buffer(NULL, 4, "x", &ck), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_checkpoint_open(NULL, &ck), LY_E_INVALID_ARGUMENT);
}

/* ---- safetensors --------------------------------------------------------------- */

typedef struct st_payload {
    float w[6];     /* 0..24 */
    uint16_t h[2];  /* 24..28 */
    uint16_t bf[2]; /* 28..32 */
    int64_t i[1];   /* 32..40 */
    int32_t j[2];   /* 40..48 */
    float k;        /* 48..52 */
} st_payload;

static const char st_header[] =
    "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"h\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [24, 28]},"
    "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[28,32]},"
    "\"__metadata__\":{\"model_family\":\"yolo9\",\"size\":\"t\",\"nc\":\"2\",\"imgsz\":\"640\","
    "\"names\":\"{\\\"0\\\": \\\"person\\\", \\\"1\\\": "
    "\\\"bi\\u00e7ycle\\\"}\",\"format\":\"pt\"},"
    "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[32,40]},"
    "\"j\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[40,48]},"
    "\"module.k\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[48,52]}}";

static void st_payload_init(st_payload *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < 6; i++)
        d->w[i] = (float)i;
    d->h[0] = 0x3c00;  /* 1.0 */
    d->h[1] = 0x0001;  /* smallest subnormal, 2^-24 */
    d->bf[0] = 0x4049; /* 3.140625 */
    d->bf[1] = 0xc000; /* -2 */
    d->i[0] = -5;
    d->j[0] = 7;
    d->j[1] = -8;
    d->k = 42.0f;
}

static void test_safetensors(void **state)
{
    (void)state;
    st_payload d;
    st_payload_init(&d);
    bbuf b = {0};
    safetensors_build(&b, st_header, &d, 52);
    ly_checkpoint *ck = open_ok(&b);
    size_t count;
    ly_checkpoint_tensor_count(ck, &count);
    assert_int_equal(count, 6);
    const char *name;
    ly_tensor t;
    ly_checkpoint_tensor_at(ck, 0, &name, &t);
    assert_string_equal(name, "w");
    assert_int_equal(t.ndim, 2);
    assert_true(((const float *)t.data)[5] == 5.0f);
    ly_checkpoint_tensor_at(ck, 1, &name, &t);
    assert_string_equal(name, "h");
    assert_true(((const float *)t.data)[0] == 1.0f);
    assert_true(((const float *)t.data)[1] == 0x1p-24f);
    assert_int_equal(ly_checkpoint_find(ck, "bf", &t), LY_OK);
    assert_true(((const float *)t.data)[0] == 3.140625f);
    assert_true(((const float *)t.data)[1] == -2.0f);
    assert_int_equal(ly_checkpoint_find(ck, "i", &t), LY_OK);
    assert_int_equal(t.dtype, LY_I64);
    assert_int_equal(((const int64_t *)t.data)[0], -5);
    assert_int_equal(ly_checkpoint_find(ck, "j", &t), LY_OK);
    assert_int_equal(((const int64_t *)t.data)[1], -8);
    assert_int_equal(ly_checkpoint_find(ck, "k", &t), LY_OK);
    assert_int_equal(t.ndim, 0);
    assert_true(((const float *)t.data)[0] == 42.0f);

    const char *s;
    int64_t v;
    assert_int_equal(ly_checkpoint_meta_string(ck, "model_family", &s), LY_OK);
    assert_string_equal(s, "yolo9");
    assert_int_equal(ly_checkpoint_meta_int(ck, "nc", &v), LY_OK);
    assert_int_equal(v, 2);
    assert_int_equal(ly_checkpoint_meta_int(ck, "imgsz", &v), LY_OK);
    assert_int_equal(v, 640);
    assert_int_equal(ly_checkpoint_meta_int(ck, "size", &v), LY_E_DTYPE);
    const char *const *names;
    assert_int_equal(ly_checkpoint_class_names(ck, &count, &names), LY_OK);
    assert_int_equal(count, 2);
    assert_string_equal(names[0], "person");
    assert_string_equal(names[1], "bi\xc3\xa7ycle");
    ly_checkpoint_close(ck);
    b_free(&b);
}

static void expect_st_error(const char *header, size_t payload, ly_status status, const char *frag)
{
    st_payload d;
    st_payload_init(&d);
    bbuf b = {0};
    safetensors_build(&b, header, &d, payload);
    expect_error(&b, status, frag, (const char *)NULL);
    b_free(&b);
}

static void test_safetensors_errors(void **state)
{
    (void)state;
    expect_st_error(st_header, 51, LY_E_FORMAT,
                    "tensor 'module.k': data_offsets [48, 52] are outside");
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 52,
                    LY_E_FORMAT, "span 20 bytes");
    expect_st_error("{\"w\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", 52,
                    LY_E_UNSUPPORTED, "dtype 'F8_E5M2' is not supported");
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 52,
                    LY_E_FORMAT, "unknown field 'x'");
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 52,
                    LY_E_FORMAT, "shape[0] is not a non-negative integer");
    expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 52,
                    LY_E_FORMAT, "not valid JSON");
    expect_st_error("{\"w\":[1,2", 52, LY_E_FORMAT, "not valid JSON");
    expect_st_error("{\"__metadata__\":{\"nc\":80}}", 0, LY_E_FORMAT,
                    "'__metadata__' entry 'nc' is a number");
    expect_st_error("{\"__metadata__\":{\"names\":\"{0: 'person'}\"}}", 0, LY_E_FORMAT,
                    "metadata 'names' is not JSON");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"module.a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                    8, LY_E_FORMAT, "two tensors are named 'a'");
    /* The tensors tile the data section exactly, as the reference
     * implementation requires: no overlap, no gap, nothing after the last. */
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                    12, LY_E_FORMAT, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    expect_st_error("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                    12, LY_E_FORMAT,
                    "tensor 'b': data_offsets begin at 8, but the tensor before "
                    "it ends at 4: 4 bytes belong to no tensor");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                    LY_E_FORMAT,
                    "tensor 'a': data_offsets begin at 4, but the data section's start");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
                    LY_E_FORMAT,
                    "the data section holds 8 bytes, but the tensors end at 4 (the "
                    "last is 'a')");

    /* header length beyond the file */
    bbuf b = {0};
    b_le(&b, 1000, 8);
    b_str(&b, "{}");
    expect_error(&b, LY_E_FORMAT, "header length 1000 exceeds", (const char *)NULL);
    b_free(&b);

    /* nesting beyond the parser's limit */
    char deep[300];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    deep[n++] = ':';
    for (int i = 0; i < 100; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    expect_st_error(deep, 0, LY_E_FORMAT, "nesting is too deep");

    /* An empty safetensors file (no tensors) is a valid, empty checkpoint. */
    safetensors_build(&b, "{}", NULL, 0);
    ly_checkpoint *ck = open_ok(&b);
    size_t count = 1;
    ly_checkpoint_tensor_count(ck, &count);
    assert_int_equal(count, 0);
    ly_checkpoint_close(ck);
    b_free(&b);
}

/* ---- the fixture ------------------------------------------------------------------ */

static bool fixture_present(const char *path)
{
    return access(path, R_OK) == 0;
}

static void test_fixture_checkpoint(void **state)
{
    (void)state;
    const char *path = FIXTURE_DIR "/LibreYOLO9t_seed0.pt";
    const char *keys_path = FIXTURE_DIR "/keys_LibreYOLO9t.txt";
    if (!fixture_present(path) || !fixture_present(keys_path)) {
        print_message("skipped: %s not present (the shared fixtures are not in a plain clone)\n",
                      FIXTURE_DIR);
        skip();
    }
    ly_checkpoint *ck = NULL;
    ly_status st = ly_checkpoint_open(path, &ck);
    if (st != LY_OK) fail_msg("%s", ly_last_error());

    /* keys_LibreYOLO9t.txt: "<key> (<d0>, <d1>, ...) <dtype>" per line, in state-dict order. */
    FILE *f = fopen(keys_path, "r");
    assert_non_null(f);
    char line[512];
    size_t index = 0, count = 0;
    assert_int_equal(ly_checkpoint_tensor_count(ck, &count), LY_OK);
    while (fgets(line, sizeof line, f)) {
        char *open_paren = strchr(line, '(');
        char *close_paren = strchr(line, ')');
        assert_non_null(open_paren);
        assert_non_null(close_paren);
        open_paren[-1] = '\0';
        int64_t shape[LY_MAX_DIMS];
        int ndim = 0;
        for (char *p = open_paren + 1; p < close_paren;) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p) break;
            assert_true(ndim < LY_MAX_DIMS);
            shape[ndim++] = v;
            p = end;
            while (p < close_paren && (*p == ',' || *p == ' '))
                p++;
        }
        const char *dtype = close_paren + 2;
        ly_dtype expected = strncmp(dtype, "int64", 5) == 0 ? LY_I64 : LY_F32;
        assert_true(strncmp(dtype, "float32", 7) == 0 || expected == LY_I64);

        const char *name;
        ly_tensor t;
        assert_true(index < count);
        assert_int_equal(ly_checkpoint_tensor_at(ck, index, &name, &t), LY_OK);
        if (strcmp(name, line) != 0)
            fail_msg("tensor %zu is '%s', the list says '%s'", index, name, line);
        assert_int_equal(t.dtype, expected);
        assert_int_equal(t.ndim, ndim);
        for (int d = 0; d < ndim; d++)
            assert_int_equal(t.shape[d], shape[d]);
        ly_tensor found;
        assert_int_equal(ly_checkpoint_find(ck, line, &found), LY_OK);
        assert_ptr_equal(found.data, t.data);
        index++;
    }
    fclose(f);
    assert_int_equal(index, 1338);
    assert_int_equal(count, 1338);

    ly_tensor t;
    assert_int_equal(ly_checkpoint_find(ck, "backbone.conv0.conv.weight", &t), LY_OK);
    assert_true(((const float *)t.data)[0] == -0.1514502614736557f);
    assert_int_equal(ly_checkpoint_find(ck, "backbone.conv0.bn.num_batches_tracked", &t), LY_OK);
    assert_int_equal(((const int64_t *)t.data)[0], 2);

    const char *s;
    int64_t v;
    assert_int_equal(ly_checkpoint_meta_string(ck, "schema_version", &s), LY_OK);
    assert_string_equal(s, "1.0");
    assert_int_equal(ly_checkpoint_meta_string(ck, "model_family", &s), LY_OK);
    assert_string_equal(s, "yolo9");
    assert_int_equal(ly_checkpoint_meta_string(ck, "size", &s), LY_OK);
    assert_string_equal(s, "t");
    assert_int_equal(ly_checkpoint_meta_string(ck, "task", &s), LY_OK);
    assert_string_equal(s, "detect");
    assert_int_equal(ly_checkpoint_meta_string(ck, "libreyolo_version", &s), LY_OK);
    assert_int_equal(ly_checkpoint_meta_int(ck, "nc", &v), LY_OK);
    assert_int_equal(v, 80);
    assert_int_equal(ly_checkpoint_meta_int(ck, "imgsz", &v), LY_OK);
    assert_int_equal(v, 640);
    const char *const *names;
    assert_int_equal(ly_checkpoint_class_names(ck, &count, &names), LY_OK);
    assert_int_equal(count, 80);
    for (size_t i = 0; i < count; i++)
        assert_non_null(names[i]);
    assert_string_equal(names[0], "person");
    assert_string_equal(names[79], "toothbrush");
    ly_checkpoint_close(ck);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_matches_zip),
        cmocka_unit_test(test_torch113_layout),
        cmocka_unit_test(test_torch2_layout),
        cmocka_unit_test(test_protocol4_pickle),
        cmocka_unit_test(test_bare_state_dict_and_name_lists),
        cmocka_unit_test(test_malicious_pickles_refused),
        cmocka_unit_test(test_malformed_pickles),
        cmocka_unit_test(test_state_dict_errors),
        cmocka_unit_test(test_broken_archives),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_safetensors_errors),
        cmocka_unit_test(test_fixture_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
