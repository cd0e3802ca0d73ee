/* SPDX-License-Identifier: MIT */
/* Image files: PNG/JPEG round trips, BMP, the fixture photo, and every way a
 * file can be wrong, each with a status and a message naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "io/image.h"
#include "libreyolo/image.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PARKOUR LY_SHARED_DIR "/testdata/images/parkour.jpg"

static void gradient(ly_image *im, int w, int h)
{
    assert_int_equal(ly_image_alloc(im, w, h), LY_OK);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->pixels + 3 * ((size_t)y * (size_t)w + (size_t)x);
            p[0] = (uint8_t)(x * 255 / (w - 1));
            p[1] = (uint8_t)(y * 255 / (h - 1));
            p[2] = (uint8_t)((x + y) & 255);
        }
}

static void test_alloc_and_free(void **state)
{
    (void)state;
    ly_image im;
    assert_int_equal(ly_image_alloc(&im, 0, 5), LY_E_INVALID_ARGUMENT);
    assert_null(im.pixels);
    assert_int_equal(ly_image_alloc(&im, 3, 2), LY_OK);
    assert_int_equal(im.width, 3);
    ly_image_free(&im);
    assert_null(im.pixels);
    ly_image_free(&im);
    ly_image_free(NULL);
}

#ifdef LY_HAVE_STB

static void write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void expect_error(const char *path, ly_status want, const char *words)
{
    ly_image im = {(uint8_t *)1, 7, 7}; /* must be emptied */
    assert_int_equal(ly_image_load(path, &im), want);
    assert_null(im.pixels);
    assert_int_equal(im.width, 0);
    const char *msg = ly_last_error();
    if (!strstr(msg, path)) fail_msg("message does not name %s: %s", path, msg);
    if (words && !strstr(msg, words)) fail_msg("message lacks '%s': %s", words, msg);
}

static void test_png_round_trip(void **state)
{
    (void)state;
    char path[512];
    ly_test_scratch_path("g.png", path, sizeof path);
    ly_image im, back;
    gradient(&im, 37, 21);
    assert_int_equal(ly_image_save(path, &im, 90), LY_OK);
    assert_int_equal(ly_image_load(path, &back), LY_OK);
    assert_int_equal(back.width, 37);
    assert_int_equal(back.height, 21);
    assert_memory_equal(back.pixels, im.pixels, 37 * 21 * 3);
    ly_image_free(&back);

    /* Upper-case extensions are fine; no temporary file is left behind. */
    ly_test_scratch_path("G2.PNG", path, sizeof path);
    assert_int_equal(ly_image_save(path, &im, 90), LY_OK);
    DIR *d = opendir(ly_test_scratch());
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') files++, assert_null(strstr(e->d_name, ".tmp"));
    closedir(d);
    assert_int_equal(files, 2);
    ly_image_free(&im);
}

static void test_jpeg_round_trip(void **state)
{
    (void)state;
    char path[512];
    ly_test_scratch_path("g.jpg", path, sizeof path);
    ly_image im, back;
    gradient(&im, 64, 48);
    assert_int_equal(ly_image_save(path, &im, 95), LY_OK);
    assert_int_equal(ly_image_load(path, &back), LY_OK);
    assert_int_equal(back.width, 64);
    assert_int_equal(back.height, 48);
    long total = 0;
    for (size_t i = 0; i < 64 * 48 * 3; i++)
        total += labs((long)back.pixels[i] - im.pixels[i]);
    assert_true(total / (64 * 48 * 3) < 6); /* lossy, but close */
    ly_image_free(&back);
    ly_image_free(&im);
}

/* A 2x2 24-bit BMP (bottom-up rows, BGR, rows padded to 4 bytes). */
static void test_bmp(void **state)
{
    (void)state;
    static const uint8_t bmp[] = {
        'B',
        'M',
        70,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        54,
        0,
        0,
        0, /* file header */
        40,
        0,
        0,
        0,
        2,
        0,
        0,
        0,
        2,
        0,
        0,
        0,
        1,
        0,
        24,
        0,
        0,
        0,
        0,
        0, /* info header */
        16,
        0,
        0,
        0,
        0x13,
        0x0B,
        0,
        0,
        0x13,
        0x0B,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        /* bottom row: blue, white */ 255,
        0,
        0,
        255,
        255,
        255,
        0,
        0,
        /* top row: red, green */ 0,
        0,
        255,
        0,
        255,
        0,
        0,
        0,
    };
    char path[512];
    write_file(ly_test_scratch_path("t.bmp", path, sizeof path), bmp, sizeof bmp);
    ly_image im;
    assert_int_equal(ly_image_load(path, &im), LY_OK);
    assert_int_equal(im.width, 2);
    assert_int_equal(im.height, 2);
    const uint8_t want[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};
    assert_memory_equal(im.pixels, want, 12);
    ly_image_free(&im);
}

static void test_fixture_photo(void **state)
{
    (void)state;
    struct stat st;
    if (stat(PARKOUR, &st) != 0) {
        print_message("skipped: %s is absent (the shared fixture is not here)\n", PARKOUR);
        skip();
    }
    ly_image im;
    assert_int_equal(ly_image_load(PARKOUR, &im), LY_OK);
    assert_int_equal(im.width, 1280);
    assert_int_equal(im.height, 852);
    ly_image_free(&im);
}

static void test_bad_files(void **state)
{
    (void)state;
    char path[512];
    expect_error(ly_test_scratch_path("missing.jpg", path, sizeof path), LY_E_NOT_FOUND,
                 "no such file");
    write_file(ly_test_scratch_path("empty.png", path, sizeof path), "", 0);
    expect_error(path, LY_E_FORMAT, "empty");
    write_file(ly_test_scratch_path("text.jpg", path, sizeof path), "hello, not an image\n", 20);
    expect_error(path, LY_E_FORMAT, "unsupported format");
    /* GIF is a real image format, but not one of ours. */
    write_file(ly_test_scratch_path("a.gif", path, sizeof path),
               "GIF89a\x01\x00\x01\x00\x00\x00\x00;", 14);
    expect_error(path, LY_E_FORMAT, "expected JPEG, PNG or BMP");
    /* Right magic, garbage after it. */
    static const uint8_t bad_png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3, 4};
    write_file(ly_test_scratch_path("bad.png", path, sizeof path), bad_png, sizeof bad_png);
    expect_error(path, LY_E_FORMAT, "PNG");
    static const uint8_t bad_jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 'J', 'F', 'I', 'F', 0};
    write_file(ly_test_scratch_path("bad.jpg", path, sizeof path), bad_jpeg, sizeof bad_jpeg);
    expect_error(path, LY_E_FORMAT, "JPEG");
    /* A valid JPEG cut in half. */
    ly_image im;
    gradient(&im, 64, 64);
    ly_test_scratch_path("whole.jpg", path, sizeof path);
    assert_int_equal(ly_image_save(path, &im, 90), LY_OK);
    ly_image_free(&im);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 600 && n < sizeof buf);
    write_file(ly_test_scratch_path("cut.jpg", path, sizeof path), buf, n / 2);
    expect_error(path, LY_E_FORMAT, NULL);
    /* A directory. */
    ly_test_scratch_path("dir.png", path, sizeof path);
    assert_int_equal(mkdir(path, 0700), 0);
    expect_error(path, LY_E_IO, NULL);
    if (geteuid() != 0) { /* root reads anything */
        write_file(ly_test_scratch_path("locked.png", path, sizeof path), bad_png, sizeof bad_png);
        chmod(path, 0);
        expect_error(path, LY_E_IO, "cannot open");
    }
}

static void test_save_errors(void **state)
{
    (void)state;
    char path[512];
    ly_image im;
    gradient(&im, 4, 4);
    assert_int_equal(ly_image_save(ly_test_scratch_path("x.gif", path, sizeof path), &im, 90),
                     LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "x.gif"));
    assert_int_equal(ly_image_save(ly_test_scratch_path("x.jpg", path, sizeof path), &im, 0),
                     LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_image_save("/nonexistent-dir/x.png", &im, 90), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), "/nonexistent-dir/x.png"));
    ly_image empty = {0};
    assert_int_equal(ly_image_save(ly_test_scratch_path("e.png", path, sizeof path), &empty, 90),
                     LY_E_INVALID_ARGUMENT);
    ly_image_free(&im);
}

#else

static void test_without_stb(void **state)
{
    (void)state;
    ly_image im;
    assert_false(ly_image_codecs_available());
    assert_int_equal(ly_image_load("photo.jpg", &im), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "photo.jpg"));
    assert_non_null(strstr(ly_last_error(), "libstb-dev"));
    gradient(&im, 4, 4);
    assert_int_equal(ly_image_save("out.png", &im, 90), LY_E_UNSUPPORTED);
    ly_image_free(&im);
}

#endif

static void touch(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* What a source names, without reading any image: a folder and its subfolder
 * in path order (formats this build does not read counted), a .txt list in its
 * order, a glob, and the refusals with what they name. */
static void test_source_lists(void **state)
{
    (void)state;
    char dir[] = "/tmp/ly_sources.XXXXXX", path[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    touch(dir, "b.JPG", "x");
    touch(dir, "a.png", "x");
    touch(dir, "sub/c.bmp", "x");
    touch(dir, "d.webp", "x");
    touch(dir, "notes.md", "x");
    touch(dir, "clip.mp4", "x");
    char list[700];
    snprintf(list, sizeof list, "# two\n%s/sub/c.bmp\n\n  %s/a.png\n", dir, dir);
    touch(dir, "list.txt", list);
    ly_source_list l;
    assert_int_equal(ly_source_list_expand(dir, &l), LY_OK);
    assert_int_equal(l.count, 3);
    assert_int_equal(l.skipped, 1);
    assert_non_null(strstr(l.paths[0], "/a.png"));
    assert_non_null(strstr(l.paths[1], "/b.JPG"));
    assert_non_null(strstr(l.paths[2], "/sub/c.bmp"));
    ly_source_list_free(&l);
    snprintf(path, sizeof path, "%s/list.txt", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_OK);
    assert_int_equal(l.count, 2);
    assert_non_null(strstr(l.paths[0], "/sub/c.bmp"));
    ly_source_list_free(&l);
    snprintf(path, sizeof path, "%s/*.png", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_OK);
    assert_int_equal(l.count, 1);
    ly_source_list_free(&l);
    assert_int_equal(ly_source_list_expand("https://example.com/x.jpg", &l), LY_OK);
    assert_int_equal(l.count, 1);
    ly_source_list_free(&l);
    snprintf(path, sizeof path, "%s/missing.jpg", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "Source not found: "));
    assert_null(l.paths);
    snprintf(path, sizeof path, "%s/d.webp", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_E_FORMAT);
    snprintf(path, sizeof path, "%s/clip.mp4", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "a video source"));
    touch(dir, "list.txt", "nowhere.jpg\n");
    snprintf(path, sizeof path, "%s/list.txt", dir);
    assert_int_equal(ly_source_list_expand(path, &l), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "list.txt line 1: Source not found: nowhere.jpg"));
    assert_int_equal(ly_source_list_expand(NULL, &l), LY_E_INVALID_ARGUMENT);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_and_free),
        cmocka_unit_test(test_source_lists),
#ifdef LY_HAVE_STB
        cmocka_unit_test(test_png_round_trip),
        cmocka_unit_test(test_jpeg_round_trip),
        cmocka_unit_test(test_bmp),
        cmocka_unit_test(test_fixture_photo),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_save_errors),
#else
        cmocka_unit_test(test_without_stb),
#endif
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
