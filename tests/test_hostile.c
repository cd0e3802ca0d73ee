/* SPDX-License-Identifier: MIT */
/*
 * The hostile files of ../shared/testdata/hostile/ (reproducers from the
 * parser audit), replayed through the public API: each is refused with a
 * message naming the file, and the image bombs are refused from their headers
 * (peak memory grows by at most 8 MiB). Skips when the fixtures are absent.
 * (The .pte case also uses the runtime's internal method load, so that it is
 * checked in builds without XNNPACK too.)
 */
#include "engines/executorch/et_runtime.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/image.h"
#include "libreyolo/libreyolo.h"
#include "libreyolo/model.h"
#include "pte/pte.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define HOSTILE LY_SHARED_DIR "/testdata/hostile/"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static bool have(const char *path)
{
    if (access(path, R_OK) == 0) return true;
    print_message("skipped: %s is absent (../shared/testdata is not beside this clone)\n", path);
    return false;
}

static long peak_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* Refusing `path` raised the peak resident memory by at most 8 MiB (not
 * measured under the sanitizers, whose allocators keep their own pools). */
static void expect_small_growth(const char *path, long peak_before)
{
#ifdef UNDER_ASAN
    (void)path;
    (void)peak_before;
#else
    long grown = peak_kib() - peak_before;
    if (grown > 8 * 1024) fail_msg("%s: peak memory grew by %ld KiB refusing it", path, grown);
#endif
}

/* The call failed with `status` and a message naming `path` and `fragment`. */
static void expect_refusal(ly_status got, ly_status status, const char *path, const char *fragment)
{
    const char *msg = ly_last_error();
    if (got != status || !strstr(msg, path) || !strstr(msg, fragment))
        fail_msg("%s: status %d (expected %d), message: %s (expected the file name and \"%s\")",
                 path, (int)got, (int)status, msg, fragment);
}

static void expect_image_refused(const char *path, const char *fragment)
{
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build reads no images\n");
        skip();
    }
    if (!have(path)) skip();
    long before = peak_kib();
    ly_image img;
    expect_refusal(ly_image_load(path, &img), LY_E_UNSUPPORTED, path, fragment);
    assert_null(img.pixels);
    expect_small_growth(path, before);
}

static void test_jpeg_bombs(void **state)
{
    (void)state;
    unsetenv("LIBREYOLO_MAX_IMAGE_PIXELS");
    expect_image_refused(HOSTILE "jpeg_20000x20000_170b.jpg",
                         "20000x20000 = 400000000 pixels, more than 178956970 (twice "
                         "LIBREYOLO_MAX_IMAGE_PIXELS=89478485");
    expect_image_refused(HOSTILE "jpeg_65500x65500_170b.jpg", "65500x65500");
    /* The variable moves the limit: a tenth of a megapixel refuses it too. */
    setenv("LIBREYOLO_MAX_IMAGE_PIXELS", "100000", 1);
    expect_image_refused(HOSTILE "jpeg_20000x20000_170b.jpg", "more than 200000");
    unsetenv("LIBREYOLO_MAX_IMAGE_PIXELS");
}

static void test_png_inflate_bomb(void **state)
{
    (void)state;
    bool codecs = false;
    ly_image_codecs(&codecs);
    const char *path = HOSTILE "png_1x1_idat_bomb_256m.png";
    if (!codecs || !have(path)) skip();
    long before = peak_kib();
    ly_image img;
    /* Within the pixel limit, so refused by the inflate bound. */
    expect_refusal(ly_image_load(path, &img), LY_E_FORMAT, path,
                   "inflates to more than the 4 bytes its IHDR (1x1) implies");
    expect_small_growth(path, before);
}

static void expect_checkpoint_refused(const char *path, const char *fragment)
{
    if (!have(path)) skip();
    ly_checkpoint *ck = NULL;
    expect_refusal(ly_checkpoint_open(path, &ck), LY_E_FORMAT, path, fragment);
    assert_null(ck);
}

static void test_safetensors_layout(void **state)
{
    (void)state;
    expect_checkpoint_refused(HOSTILE "overlapping_offsets.safetensors",
                              "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    expect_checkpoint_refused(HOSTILE "gap_between_tensors.safetensors",
                              "4 bytes belong to no tensor");
}

/* Undefined behaviour in the sanitizer build before: now plain refusals. */
static void test_pickle_and_builder_ub(void **state)
{
    (void)state;
    expect_checkpoint_refused(HOSTILE "mark_tuple_empty_stack.pt",
                              "the pickled object is a tuple, expected a dict");
    const char *empty = HOSTILE "empty_state_dict.pt";
    if (!have(empty)) skip();
    ly_model *m = NULL;
    ly_status st = ly_model_load(empty, NULL, &m);
    assert_null(m);
    assert_int_not_equal(st, LY_OK);
    assert_non_null(strstr(ly_last_error(), empty));
}

static void test_pte_planned_buffer(void **state)
{
    (void)state;
    const char *path = HOSTILE "planned_buffer_4g.pte";
    if (!have(path)) skip();
    const char *want = "planned buffer 2 declares 4294967296 bytes, but the tensors placed in it "
                       "end at byte 0";
    /* The method load refuses it before its delegates or memory, in every build. */
    ly_pte_program *p = NULL;
    assert_int_equal(ly_pte_read_file(path, &p), LY_OK);
    ly_et_method *method = NULL;
    expect_refusal(ly_et_method_load(p, path, &method), LY_E_FORMAT, path, want);
    assert_null(method);
    ly_pte_program_free(p);
    /* And so does the model load, where this build runs XNNPACK programs. */
    if (!ly_et_xnnpack_available()) return;
    ly_model *m = NULL;
    expect_refusal(ly_model_load(path, NULL, &m), LY_E_FORMAT, path, want);
    assert_null(m);
}

/* A safetensors header just under the 100,000,000-byte cap with 1.4 M
 * entries (1.12 GiB and 4.6 s before any family could refuse it): each entry
 * a 4-byte tensor tiling the data section, a well-formed file. The reader
 * refuses it once the entries pass the container's tensor cap, having read
 * only those, before anything is built. With fewer entries and the last one's
 * bytes missing, the first pass (24-byte extents) refuses it, again before
 * anything is built. Generated here (up to 105 MB); the growth measured is the
 * reader's, the file's bytes being the test's. */
enum { HEADER_CAP = 100000000 };

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static uint8_t *many_entries_safetensors(size_t entries, bool last_bytes_missing, size_t *size)
{
    size_t data = 4 * entries - (last_bytes_missing ? 4 : 0), cap = 8 + HEADER_CAP + data;
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    size_t at = 8;
    b[at++] = '{';
    for (size_t i = 0; i < entries; i++)
        at += (size_t)snprintf((char *)b + at, cap - at,
                               "%s\"%zu\":{\"dtype\":\"F32\",\"shape\":[1],"
                               "\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", i, 4 * i, 4 * i + 4);
    b[at++] = '}';
    assert_true(at - 8 < HEADER_CAP);
    memset(b + at, ' ', HEADER_CAP - 1 - (at - 8)); /* padded to just under the cap */
    at = 8 + HEADER_CAP - 1;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)(at - 8) >> (8 * i));
    memset(b + at, 0, data);
    *size = at + data;
    return b;
}

static void expect_cheap_refusal(size_t entries, bool last_bytes_missing, const char *name,
                                 const char *message)
{
    size_t size;
    uint8_t *bytes = many_entries_safetensors(entries, last_bytes_missing, &size);
    long before = peak_kib();
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    ly_checkpoint *ck = NULL;
    ly_status st = ly_checkpoint_open_buffer(bytes, size, name, &ck);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long grown = peak_kib() - before;
    print_message("%s (%zu bytes): refused in %.3f s (%.3f s of CPU), peak memory +%ld KiB: %s\n",
                  name, size, seconds_between(&t0, &t1), seconds_between(&c0, &c1), grown,
                  ly_last_error());
    expect_refusal(st, LY_E_FORMAT, name, message);
    assert_null(ck);
#ifndef UNDER_ASAN
    if (grown > 64 * 1024) fail_msg("%s: peak memory grew by %ld KiB refusing it", name, grown);
#endif
    free(bytes);
}

static void test_safetensors_header_cost(void **state)
{
    (void)state;
    expect_cheap_refusal(1400000, false, "header_1.4m_entries.safetensors",
                         "more than 65536 tensor entries (at '65536')");
    expect_cheap_refusal(60000, true, "header_last_bytes_missing.safetensors",
                         "tensor '59999': data_offsets [239996, 240000] are outside the 239996 "
                         "data bytes");

    /* A header length over the cap is refused by it, whatever follows. */
    ly_checkpoint *ck = NULL;
    uint8_t over[10] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100000001 */
    expect_refusal(ly_checkpoint_open_buffer(over, sizeof over, "over_cap.safetensors", &ck),
                   LY_E_FORMAT, "over_cap.safetensors",
                   "header length 100000001 is over the 100000000-byte cap");
}

/* An XNNPACK convolution declaring groups and channels near 2^32 (found by
 * fuzz_pte): the delegate's shape checks multiply them in checked arithmetic
 * and refuse it at load, naming the node (before: signed 64-bit overflow). */
static void test_pte_xnn_conv_overflow(void **state)
{
    (void)state;
    const char *path = HOSTILE "pte_xnn_conv_overflow.pte";
    if (!have(path)) skip();
    ly_pte_program *p = NULL;
    assert_int_equal(ly_pte_read_file(path, &p), LY_OK);
    ly_et_method *method = NULL;
    ly_status st = ly_et_method_load(p, path, &method);
    assert_null(method);
    ly_pte_program_free(p);
    if (!ly_et_xnnpack_available()) {
        expect_refusal(st, LY_E_UNSUPPORTED, path, "does not provide XnnpackBackend");
        return;
    }
    const char *want = "node XNNConv2d: 4294901761 groups of 767 input and 4294967295 output "
                       "channels overflow 64 bits";
    expect_refusal(st, LY_E_FORMAT, path, want);
    ly_model *m = NULL;
    expect_refusal(ly_model_load(path, NULL, &m), LY_E_FORMAT, path, want);
    assert_null(m);
}

/* A program whose input is `scalar_type` [16], returned as its output. */
static void encode_one_input(int scalar_type, uint8_t **bytes, size_t *size)
{
    static int32_t sizes[1] = {16};
    static uint8_t order[1] = {0};
    static const int32_t io[1] = {0};
    static const uint64_t offsets[1] = {0};
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_TENSOR};
    v.u.tensor = (ly_pte_tensor){.scalar_type = (int8_t)scalar_type,
                                 .sizes = sizes,
                                 .n_sizes = 1,
                                 .dim_order = order,
                                 .n_dim_order = 1,
                                 .allocation_info = {.present = true, .memory_id = 1}};
    int64_t buffers[2] = {0, (int64_t)(16 * ly_pte_scalar_size(scalar_type))};
    ly_pte_chain chain = {0};
    ly_pte_plan plan = {.name = LY_PTE_FORWARD,
                        .values = &v,
                        .n_values = 1,
                        .inputs = io,
                        .n_inputs = 1,
                        .outputs = io,
                        .n_outputs = 1,
                        .chains = &chain,
                        .n_chains = 1,
                        .non_const_buffer_sizes = buffers,
                        .n_non_const_buffer_sizes = 2};
    ly_pte_program prog = {
        .execution_plan = &plan,
        .n_execution_plan = 1,
        .constant_segment = {.present = true, .offsets = offsets, .n_offsets = 1}};
    ly_pte_segment_in seg0 = {0};
    assert_int_equal(ly_pte_encode(&prog, &seg0, 1, bytes, size), LY_OK);
}

/* An input of a type other than f32 (reachable through the method API; the
 * model load takes f32 only): a QINT32 input is 4 bytes an element, so the
 * caller's tensor is int32 and is copied whole and no further (before: sized
 * one byte an element and copied with its true size, a heap over-read); a
 * type this runtime has no element type for is refused at load.
 * (tests/fuzz/regressions/pte/qint32_input.pte replays the first through
 * fuzz_pte, whose inputs are now exactly their declared elements' size.) */
static void test_pte_input_element_size(void **state)
{
    (void)state;
    uint8_t *bytes = NULL;
    size_t size = 0;
    encode_one_input(LY_PTE_QINT32, &bytes, &size);
    ly_pte_program *p = NULL;
    assert_int_equal(ly_pte_decode(bytes, size, "qint32.pte", &p), LY_OK);
    free(bytes);
    ly_et_method *m = NULL;
    assert_int_equal(ly_et_method_load(p, "qint32.pte", &m), LY_OK);
    ly_tensor shape;
    assert_int_equal(ly_et_method_input_shape(m, 0, &shape), LY_OK);
    assert_int_equal(shape.dtype, LY_I32);
    int32_t x[16];
    for (int i = 0; i < 16; i++)
        x[i] = i - 8;
    int64_t n16 = 16;
    ly_tensor in;
    ly_tensor_init(&in, x, LY_I32, 1, &n16);
    assert_int_equal(ly_et_method_execute(m, &in, 1, 1), LY_OK);
    ly_tensor out;
    assert_int_equal(ly_et_method_output(m, 0, &out), LY_OK);
    assert_memory_equal(out.data, x, sizeof x);
    /* sixteen bytes are not sixteen int32 elements */
    uint8_t small[16] = {0};
    ly_tensor_init(&in, small, LY_U8, 1, &n16);
    expect_refusal(ly_et_method_execute(m, &in, 1, 1), LY_E_SHAPE, "qint32.pte",
                   "the program takes i32 [16]");
    ly_et_method_free(m);
    ly_pte_program_free(p);
    static const int refused[] = {LY_PTE_SHORT,  LY_PTE_BFLOAT16, LY_PTE_BITS16,
                                  LY_PTE_UINT16, LY_PTE_UINT32,   LY_PTE_UINT64};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        encode_one_input(refused[i], &bytes, &size);
        assert_int_equal(ly_pte_decode(bytes, size, "typed.pte", &p), LY_OK);
        free(bytes);
        char want[160];
        snprintf(want, sizeof want, "value 0: scalar type %s (%zu-byte elements) is not supported",
                 ly_pte_scalar_name(refused[i]), ly_pte_scalar_size(refused[i]));
        expect_refusal(ly_et_method_load(p, "typed.pte", &m), LY_E_FORMAT, "typed.pte", want);
        assert_null(m);
        ly_pte_program_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jpeg_bombs),
        cmocka_unit_test(test_png_inflate_bomb),
        cmocka_unit_test(test_safetensors_layout),
        cmocka_unit_test(test_pickle_and_builder_ub),
        cmocka_unit_test(test_pte_planned_buffer),
        cmocka_unit_test(test_safetensors_header_cost),
        cmocka_unit_test(test_pte_xnn_conv_overflow),
        cmocka_unit_test(test_pte_input_element_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
