/* SPDX-License-Identifier: MIT */
/* Tiled detection as LibreYOLO's _predict_tiled: the tiles of get_slice_bboxes
 * (its edge rule included) against Python's answers, and D-FINE-n seed 0 on
 * parkour.jpg at 640 with overlap 0.2 against tiled_parkour_640.json
 * (LibreYOLO's own tiles and detections). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "libreyolo/image.h"
#include "libreyolo/model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE LY_SHARED_DIR "/testdata/track/tiled_parkour_640.json"
#define DFINE LY_SHARED_DIR "/testdata/dfine/LibreDFINEn_seed0.pt"
#define PARKOUR LY_SHARED_DIR "/testdata/images/parkour.jpg"

static void expect_tiles(int w, int h, int size, double overlap, size_t want_n, const int first[4],
                         const int second[4], const int last[4])
{
    size_t n = 0;
    assert_int_equal(ly_predict_tiles(w, h, size, overlap, NULL, 0, &n), LY_OK);
    assert_int_equal(n, want_n);
    int(*t)[4] = malloc(n * sizeof *t);
    assert_non_null(t);
    assert_int_equal(ly_predict_tiles(w, h, size, overlap, t, n, &n), LY_OK);
    assert_memory_equal(t[0], first, sizeof t[0]);
    if (second) assert_memory_equal(t[1], second, sizeof t[1]);
    assert_memory_equal(t[n - 1], last, sizeof t[0]);
    free(t);
}

/* get_slice_bboxes's answers (LibreYOLO c41461e, Python 3.11). */
static void test_tiles_like_libreyolo(void **state)
{
    (void)state;
    expect_tiles(1280, 852, 640, 0.2, 6, (int[]){0, 0, 640, 640}, (int[]){512, 0, 1152, 640},
                 (int[]){640, 212, 1280, 852});
    expect_tiles(641, 640, 640, 0.3, 2, (int[]){0, 0, 640, 640}, (int[]){1, 0, 641, 640},
                 (int[]){1, 0, 641, 640});
    /* int(640 * 0.3) is 191 in double arithmetic, not 192 */
    expect_tiles(2000, 700, 320, 0.25, 24, (int[]){0, 0, 320, 320}, (int[]){240, 0, 560, 320},
                 (int[]){1680, 380, 2000, 700});
    expect_tiles(100, 3000, 640, 0.0, 5, (int[]){0, 0, 100, 640}, (int[]){0, 640, 100, 1280},
                 (int[]){0, 2360, 100, 3000});
    size_t n;
    /* LibreYOLO would cut 130,321 tiles; refused with the count */
    assert_int_equal(ly_predict_tiles(1000, 1000, 640, 0.999, NULL, 0, &n), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "130321 tiles"));
    assert_int_equal(ly_predict_tiles(1000, 1000, 640, 1.0, NULL, 0, &n), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_predict_tiles(1000, 1000, 640, -0.1, NULL, 0, &n), LY_E_INVALID_ARGUMENT);
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.overlap_ratio = 1.5;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "overlap_ratio 1.5"));
}

static double iou(const float *a, const float *b)
{
    double x1 = fmax(a[0], b[0]), y1 = fmax(a[1], b[1]), x2 = fmin(a[2], b[2]),
           y2 = fmin(a[3], b[3]);
    double inter = fmax(0, x2 - x1) * fmax(0, y2 - y1);
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter);
}

/* The same detections as LibreYOLO's: class, box within 1e-3 of the image
 * size, conf within 1e-4; a detection is excused when its score is within
 * 1e-4 of the threshold (conf 0.25) or of the max_det-th, or when it overlaps
 * another of its class by an IoU within 1e-3 of iou (NMS could go either way). */
static void test_dfine_tiled_parkour(void **state)
{
    (void)state;
    char *text = ly_test_read_text(FIXTURE);
    FILE *model_file = fopen(DFINE, "rb");
    if (!text || !model_file) {
        print_message("skipped: %s or %s is absent (the shared fixture is not here)\n", FIXTURE,
                      DFINE);
        free(text);
        if (model_file) fclose(model_file);
        skip();
    }
    fclose(model_file);
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build cannot read JPEG files (the portable build)\n");
        free(text);
        skip();
    }
    cJSON *ref = cJSON_Parse(text);
    assert_non_null(ref);
    ly_model *m;
    ly_model_options mo = {0};
    assert_int_equal(ly_model_load(DFINE, &mo, &m), LY_OK);
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.tiling = true;
    o.overlap_ratio = cJSON_GetObjectItem(ref, "overlap_ratio")->valuedouble;
    ly_results *r;
    assert_int_equal(ly_model_predict_file(m, PARKOUR, &o, &r), LY_OK);
    int tiles;
    assert_int_equal(ly_results_tiles(r, &tiles), LY_OK);
    assert_int_equal(tiles, cJSON_GetObjectItem(ref, "num_tiles")->valueint);
    size_t n;
    ly_results_count(r, &n);
    const cJSON *conf = cJSON_GetObjectItem(ref, "conf"), *xyxy = cJSON_GetObjectItem(ref, "xyxy"),
                *cls = cJSON_GetObjectItem(ref, "cls");
    size_t want = (size_t)cJSON_GetArraySize(conf);
    float(*rb)[4] = malloc(want * sizeof *rb);
    for (size_t i = 0; i < want; i++)
        for (int k = 0; k < 4; k++)
            rb[i][k] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(xyxy, (int)i), k)->valuedouble;
    bool *used = calloc(want, 1);
    const double scale = 1280, iou_thresh = 0.45;
    size_t matched = 0, excused = 0;
    for (size_t i = 0; i < n; i++) {
        ly_detection d;
        ly_results_get(r, i, &d);
        bool found = false;
        for (size_t j = 0; j < want && !found; j++) {
            if (used[j] || (int)cJSON_GetArrayItem(cls, (int)j)->valuedouble != d.cls) continue;
            bool close = fabs(cJSON_GetArrayItem(conf, (int)j)->valuedouble - d.conf) <= 1e-4;
            for (int k = 0; k < 4 && close; k++)
                close = fabs(rb[j][k] - d.xyxy[k]) <= 1e-3 * scale;
            if (close) used[j] = found = true;
        }
        if (found) {
            matched++;
            continue;
        }
        /* excused: near the threshold, or an NMS decision within 1e-3 of iou */
        bool near = fabs(d.conf - 0.25) <= 1e-4;
        for (size_t j = 0; j < want && !near; j++)
            near = fabs(iou(d.xyxy, rb[j]) - iou_thresh) <= 1e-3;
        if (!near) fail_msg("detection %zu (class %d, %.5f) is not LibreYOLO's", i, d.cls, d.conf);
        excused++;
    }
    for (size_t j = 0; j < want; j++) {
        if (used[j]) continue;
        double c = cJSON_GetArrayItem(conf, (int)j)->valuedouble;
        bool near = fabs(c - 0.25) <= 1e-4;
        for (size_t i = 0; i < n && !near; i++) {
            ly_detection d;
            ly_results_get(r, i, &d);
            near = fabs(iou(d.xyxy, rb[j]) - iou_thresh) <= 1e-3;
        }
        if (!near) fail_msg("LibreYOLO's detection %zu (%.5f) is missing", j, c);
        excused++;
    }
    print_message("tiled D-FINE-n on parkour.jpg: %d tiles, %zu of LibreYOLO's %zu detections "
                  "matched, %zu excused\n",
                  tiles, matched, want, excused);
    assert_true(matched >= want - 2);

    /* LibreYOLO's tiled save: tiles/, final_image, grid_visualization, metadata.json */
    char dir[] = "/tmp/ly_test_tiled_XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    ly_image photo;
    assert_int_equal(ly_image_load(PARKOUR, &photo), LY_OK);
    char out[200];
    snprintf(out, sizeof out, "%s/parkour", dir);
    assert_int_equal(ly_results_save_tiled(r, &photo, m, PARKOUR, out, "png"), LY_OK);
    const char *files[] = {"final_image.png", "grid_visualization.png", "metadata.json",
                           "tiles/tile_000.png", "tiles/tile_005.png"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", out, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("%s was not written", path);
        fclose(f);
    }
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
    ly_image_free(&photo);
    ly_results_free(r);

    /* within the input size: no tiling; a classifier-style fallback is the
     * same code path */
    ly_image small;
    assert_int_equal(ly_image_alloc(&small, 320, 240), LY_OK);
    memset(small.pixels, 90, (size_t)320 * 240 * 3);
    ly_image_view v = {small.pixels, 320, 240, 320 * 3, LY_PIXELS_RGB};
    assert_int_equal(ly_model_predict_image(m, &v, &o, &r), LY_OK);
    assert_int_equal(ly_results_tiles(r, &tiles), LY_OK);
    assert_int_equal(tiles, 0);
    ly_image photo_small = {small.pixels, 320, 240};
    assert_int_equal(ly_results_save_tiled(r, &photo_small, m, NULL, "/tmp/x", "png"),
                     LY_E_INVALID_ARGUMENT);
    ly_results_free(r);
    ly_image_free(&small);
    free(rb);
    free(used);
    ly_model_free(m);
    cJSON_Delete(ref);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiles_like_libreyolo),
        cmocka_unit_test(test_dfine_tiled_parkour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
