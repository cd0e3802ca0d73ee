/* SPDX-License-Identifier: MIT */
/*
 * Annotation labels: none hides another and none leaves the image — on the
 * demo's detections (NanoDet-g on darknet's dog.jpg, as the README shows them:
 * "truck 0.37" sat under "car 0.53"), on parkour.jpg with the YOLO9 fixture,
 * and on a crowd of identical boxes, where lower-scored labels give way. The
 * same drawing from a caller's detections, a classifier's lines, and where
 * saved predictions go (ly_save_folder's numbering).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "libreyolo/image.h"
#include "libreyolo/model.h"
#include "models/annotate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t check_layout(const char *what, int width, int height, const ly_detection *d, size_t n)
{
    ly_label_place *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    ly_annotate_layout(width, height, d, n, p);
    size_t drawn = 0;
    for (size_t i = 0; i < n; i++) {
        if (!p[i].drawn) continue;
        drawn++;
        if (p[i].x < 0 || p[i].y < 0 || p[i].x + p[i].w > width || p[i].y + p[i].h > height)
            fail_msg("%s: label %zu [%d, %d, %d x %d] leaves the %dx%d image", what, i, p[i].x,
                     p[i].y, p[i].w, p[i].h, width, height);
        for (size_t j = 0; j < i; j++)
            if (p[j].drawn && p[i].x < p[j].x + p[j].w && p[j].x < p[i].x + p[i].w &&
                p[i].y < p[j].y + p[j].h && p[j].y < p[i].y + p[i].h)
                fail_msg("%s: label %zu (%s %.2f) overlaps label %zu (%s %.2f)", what, i, d[i].name,
                         (double)d[i].conf, j, d[j].name, (double)d[j].conf);
    }
    print_message("%s: %zu of %zu labels drawn, none over another, all inside\n", what, drawn, n);
    free(p);
    return drawn;
}

static void test_demo_labels(void **state)
{
    (void)state;
    static const ly_detection demo[6] = {{{131.0f, 207.8f, 334.9f, 543.0f}, 0.684f, 16, "dog"},
                                         {{111.8f, 118.5f, 572.1f, 458.3f}, 0.565f, 1, "bicycle"},
                                         {{472.2f, 83.3f, 700.4f, 169.7f}, 0.525f, 2, "car"},
                                         {{287.1f, 133.3f, 572.3f, 421.9f}, 0.413f, 1, "bicycle"},
                                         {{135.6f, 132.8f, 256.9f, 216.5f}, 0.384f, 13, "bench"},
                                         {{465.5f, 80.9f, 692.9f, 168.0f}, 0.374f, 7, "truck"}};
    assert_int_equal(check_layout("demo (dog.jpg)", 768, 576, demo, 6), 6);
}

static void test_crowd_gives_way(void **state)
{
    (void)state;
    ly_detection crowd[40];
    for (int i = 0; i < 40; i++)
        crowd[i] =
            (ly_detection){{100.0f, 100.0f, 200.0f, 180.0f}, 0.9f - 0.01f * (float)i, 0, "person"};
    size_t drawn = check_layout("40 identical boxes", 320, 240, crowd, 40);
    assert_true(drawn >= 2 && drawn < 40);
    /* the top of the image and boxes on its edges */
    ly_detection edge[2] = {{{0.0f, 0.0f, 320.0f, 240.0f}, 0.8f, 0, "person"},
                            {{300.0f, 0.0f, 320.0f, 10.0f}, 0.7f, 0, "a long class name"}};
    check_layout("boxes at the edges", 320, 240, edge, 2);
}

static void test_parkour_labels(void **state)
{
    (void)state;
    const char *model_path = LY_SHARED_DIR "/testdata/yolo9/LibreYOLO9t_seed0.pt";
    const char *image = LY_SHARED_DIR "/testdata/images/parkour.jpg";
    struct stat st;
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (stat(model_path, &st) != 0 || stat(image, &st) != 0 || !codecs) {
        print_message("skipped: the YOLO9 fixture is absent or this build reads no images\n");
        skip();
    }
    ly_model *m;
    ly_results *r;
    if (ly_model_load(model_path, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    if (ly_model_predict_file(m, image, NULL, &r) != LY_OK) fail_msg("%s", ly_last_error());
    size_t n;
    assert_int_equal(ly_results_count(r, &n), LY_OK);
    ly_detection *d = calloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ly_results_get(r, i, &d[i]), LY_OK);
    int h, w;
    assert_int_equal(ly_results_orig_shape(r, &h, &w), LY_OK);
    assert_true(check_layout("YOLO9 fixture on parkour.jpg", w, h, d, n) > 0);

    /* drawn from the results or from the caller's copy of them: the same pixels */
    ly_image a, b;
    assert_int_equal(ly_image_load(image, &a), LY_OK);
    assert_int_equal(ly_image_load(image, &b), LY_OK);
    assert_int_equal(ly_image_annotate(&a, r), LY_OK);
    assert_int_equal(ly_image_annotate_detections(&b, d, n), LY_OK);
    assert_memory_equal(a.pixels, b.pixels, (size_t)a.width * (size_t)a.height * 3);
    ly_image_free(&a);
    ly_image_free(&b);
    free(d);
    ly_results_free(r);
    ly_model_free(m);
}

/* The classifier drawing and the refusals of an empty image or missing rows. */
static void test_annotate_arguments(void **state)
{
    (void)state;
    ly_image im = {0}, empty = {0};
    assert_int_equal(ly_image_alloc(&im, 64, 48), LY_OK);
    memset(im.pixels, 0, 64 * 48 * 3);
    ly_class_prob top[2] = {{3, 0.75f, "dog"}, {5, 0.125f, NULL}};
    assert_int_equal(ly_image_annotate_classes(&im, top, 2), LY_OK);
    size_t lit = 0;
    for (size_t i = 0; i < 64 * 48 * 3; i++)
        lit += im.pixels[i] != 0;
    assert_true(lit > 0);
    assert_int_equal(ly_image_annotate_detections(&empty, NULL, 0), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_image_annotate_detections(&im, NULL, 1), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "1 detections at NULL"));
    assert_int_equal(ly_image_annotate_detections(&im, NULL, 0), LY_OK);
    ly_image_free(&im);
}

/* predict, predict2, predict3; with exist_ok predict again; a folder given whole is made as is. */
static void test_save_folder_numbering(void **state)
{
    (void)state;
    char root[] = "/tmp/ly_save_folder.XXXXXX", out[512], want[600];
    assert_non_null(mkdtemp(root));
    char project[64];
    snprintf(project, sizeof project, "%s/runs/detect", root);
    const char *names[] = {"predict", "predict2", "predict3", "predict"};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ly_save_folder(project, "predict", k == 3, out, sizeof out), LY_OK);
        snprintf(want, sizeof want, "%s/%s", project, names[k]);
        assert_string_equal(out, want);
        struct stat st;
        assert_int_equal(stat(out, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
    }
    char whole[600];
    snprintf(whole, sizeof whole, "%s/given/deeper", root);
    assert_int_equal(ly_save_folder(whole, NULL, false, out, sizeof out), LY_OK);
    assert_string_equal(out, whole);
    assert_int_equal(ly_save_folder(project, "predict", false, out, 8), LY_E_INVALID_ARGUMENT);
    char blocked[600];
    snprintf(blocked, sizeof blocked, "%s/file", root);
    FILE *f = fopen(blocked, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ly_save_folder(blocked, "predict", false, out, sizeof out), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), "cannot create"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_labels), cmocka_unit_test(test_crowd_gives_way),
        cmocka_unit_test(test_parkour_labels), cmocka_unit_test(test_annotate_arguments),
        cmocka_unit_test(test_save_folder_numbering)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
