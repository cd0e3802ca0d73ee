/* SPDX-License-Identifier: MIT */
/*
 * Prediction options, one check for every door and family, and the class
 * filter where LibreYOLO applies it:
 *  - the same bad options (conf 1.5, iou -0.1, imgsz 0, imgsz 33 on a stride-32
 *    model, max_det -1, a negative class id, a class id beyond nc, ...) are
 *    refused by ly_predict_options_check, ly_model_predict_image and
 *    ly_model_predict_file, and by the command (exit 2, config_range_error),
 *    all with one message; python/tests/test_options.py holds the Python
 *    package to the command's message;
 *  - `classes` keeps, of what predict gives without it, the detections of the
 *    listed classes in their order (LibreYOLO's _wrap_results filters after
 *    NMS and max_det), for YOLO9 (where max_det binds), NanoDet, D-FINE, DEIM,
 *    DEIMv2 and a YOLO9 ExecuTorch program; ViT ignores it, as LibreYOLO's
 *    classifiers do (DeiT: test_vit).
 * The fixtures' parts skip without ../shared/testdata (NanoDet without the
 * model cache, the program without XNNPACK).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "libreyolo/export.h"
#include "libreyolo/fetch.h"
#include "libreyolo/model.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define TESTDATA LY_SHARED_DIR "/testdata"
#define YOLO9 TESTDATA "/yolo9/LibreYOLO9t_seed0.pt"
#define PARKOUR TESTDATA "/images/parkour.jpg"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static ly_model *load_or_skip(const char *path)
{
    if (!exists(path)) {
        print_message("skipped: %s is absent (the shared fixture is not here)\n", path);
        skip();
    }
    ly_model *m;
    if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s: %s", path, ly_last_error());
    return m;
}

/* A deterministic 200x150 picture: any network finds something in it. */
typedef struct picture {
    uint8_t pixels[200 * 150 * 3];
    ly_image_view view;
} picture;

static void make_picture(picture *p)
{
    uint64_t seed = 29;
    for (size_t i = 0; i < sizeof p->pixels; i++)
        p->pixels[i] = (uint8_t)(ly_test_splitmix64(&seed) >> 56);
    p->view = (ly_image_view){p->pixels, 200, 150, 200 * 3, LY_PIXELS_RGB};
}

/* ---- The same bad options through every door ----------------------------- */

/* An option as the command takes it, and the refusal every door gives. */
typedef struct bad_option {
    const char *flag, *value, *message;
} bad_option;

static const bad_option bad_options[] = {
    {"--conf", "1.5", "conf 1.5: expected a number in [0, 1]"},
    {"--conf", "nan", "conf nan: expected a number in [0, 1]"},
    {"--iou", "-0.1", "iou -0.1: expected a number in [0, 1]"},
    {"--imgsz", "0", "imgsz 0: expected a positive size"},
    {"--imgsz", "33", "imgsz 33: expected a multiple of 32 (the model's stride)"},
    {"--imgsz", "40000", "imgsz 40000: expected at most 32768"},
    {"--max-det", "-1", "max_det -1: expected a positive integer"},
    {"--max-det", "0", "max_det 0: expected a positive integer"},
    {"--classes", "[-1]", "classes: class id -1: expected 0 or more"},
    {"--classes", "[0,80]", "classes: class id 80: the model has classes 0..79"},
};

/* The C options the command makes of `b` (classes: "[a]" or "[a,b]"). */
static void options_of(const bad_option *b, ly_predict_options *o, int classes[2])
{
    ly_predict_options_init(o);
    if (strcmp(b->flag, "--conf") == 0) {
        o->conf = strtof(b->value, NULL);
        o->given |= LY_PREDICT_CONF; /* a NaN of the user's own, not the default's marker */
    }
    if (strcmp(b->flag, "--iou") == 0) o->iou = strtof(b->value, NULL);
    if (strcmp(b->flag, "--max-det") == 0) o->max_det = atoi(b->value);
    if (strcmp(b->flag, "--imgsz") == 0) o->imgsz = atoi(b->value);
    if (strcmp(b->flag, "--classes") == 0) {
        int n = sscanf(b->value, "[%d,%d]", &classes[0], &classes[1]);
        o->classes = classes;
        o->n_classes = (size_t)n;
    }
}

/* The command's error document for `b`: its message (malloc'd); exit 2 and
 * config_range_error. */
static char *command_refusal(const char *model, const bad_option *b)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' predict --model '%s' --source '%s' %s='%s' --json 2>/dev/null",
             LY_CLI_PATH, model, PARKOUR, b->flag, b->value);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
        fail_msg("%s: exit status %d, expected 2; stdout: %s", cmd, status, out);
    cJSON *doc = cJSON_Parse(out);
    if (!doc) fail_msg("%s: not a JSON document: %s", cmd, out);
    const cJSON *error = cJSON_GetObjectItem(doc, "error"),
                *message = cJSON_GetObjectItem(doc, "message");
    assert_true(cJSON_IsString(error) && cJSON_IsString(message));
    assert_string_equal(error->valuestring, "config_range_error");
    char *text = strdup(message->valuestring);
    cJSON_Delete(doc);
    return text;
}

static void test_bad_options_one_refusal(void **state)
{
    (void)state;
    ly_model *m = load_or_skip(YOLO9);
    picture pic;
    make_picture(&pic);
    for (size_t i = 0; i < sizeof bad_options / sizeof bad_options[0]; i++) {
        const bad_option *b = &bad_options[i];
        ly_predict_options o;
        int classes[2];
        options_of(b, &o, classes);
        assert_int_equal(ly_predict_options_check(m, &o), LY_E_INVALID_ARGUMENT);
        assert_string_equal(ly_last_error(), b->message);
        ly_results *r = (ly_results *)&o;
        assert_int_equal(ly_model_predict_image(m, &pic.view, &o, &r), LY_E_INVALID_ARGUMENT);
        assert_string_equal(ly_last_error(), b->message);
        assert_null(r);
        /* before the image is read: the same refusal with or without codecs */
        assert_int_equal(ly_model_predict_file(m, PARKOUR, &o, &r), LY_E_INVALID_ARGUMENT);
        assert_string_equal(ly_last_error(), b->message);
        char *said = command_refusal(YOLO9, b);
        assert_string_equal(said, b->message);
        free(said);
    }
    ly_model_free(m);
}

/* What needs no model is refused with the same words before a model loads
 * (the command checks before loading; a missing model would be exit 4). */
static void test_refused_before_the_model(void **state)
{
    (void)state;
    if (!exists(PARKOUR)) {
        print_message("skipped: %s is absent\n", PARKOUR);
        skip();
    }
    for (size_t i = 0; i < sizeof bad_options / sizeof bad_options[0]; i++) {
        const bad_option *b = &bad_options[i];
        ly_predict_options o;
        int classes[2];
        options_of(b, &o, classes);
        if (ly_predict_options_check(NULL, &o) == LY_OK) continue; /* needs the model */
        assert_string_equal(ly_last_error(), b->message);
        char *said = command_refusal("/nonexistent/model.pt", b);
        assert_string_equal(said, b->message);
        free(said);
    }
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.conf = 0.5f, o.iou = 0.5f, o.max_det = 1, o.imgsz = 64;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_OK);
    o.n_classes = 2; /* ids without a list */
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
}

/* ---- The class filter, family by family ----------------------------------- */

typedef struct detections {
    size_t n;
    ly_detection *d;
    ly_results *r;
} detections;

static void predict(ly_model *m, const picture *pic, const ly_predict_options *o, detections *out)
{
    if (ly_model_predict_image(m, &pic->view, o, &out->r) != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(ly_results_count(out->r, &out->n), LY_OK);
    out->d = calloc(out->n + 1, sizeof *out->d);
    assert_non_null(out->d);
    for (size_t i = 0; i < out->n; i++)
        assert_int_equal(ly_results_get(out->r, i, &out->d[i]), LY_OK);
}

static void release(detections *x)
{
    free(x->d);
    ly_results_free(x->r);
}

static bool listed(int cls, const int *classes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (classes[i] == cls) return true;
    return false;
}

/* With `classes`, predict gives exactly the detections of those classes of
 * its result without (same boxes, scores, order); returns how many. */
static size_t expect_filtered(ly_model *m, const picture *pic, ly_predict_options o,
                              const int *classes, size_t n_classes, const char *what)
{
    detections all, some;
    predict(m, pic, &o, &all);
    o.classes = classes;
    o.n_classes = n_classes;
    predict(m, pic, &o, &some);
    size_t k = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (!listed(all.d[i].cls, classes, n_classes)) continue;
        if (k >= some.n) fail_msg("%s: detection %zu (class %d) is missing", what, i, all.d[i].cls);
        const ly_detection *a = &all.d[i], *b = &some.d[k++];
        if (a->cls != b->cls || a->conf != b->conf || memcmp(a->xyxy, b->xyxy, sizeof a->xyxy))
            fail_msg("%s: filtered detection %zu differs", what, k - 1);
    }
    assert_int_equal(k, some.n);
    release(&all);
    release(&some);
    return k;
}

/* Classes of the first detection of `a` and of one that only `b` has. */
static bool pick_classes(const detections *a, const detections *b, int classes[2])
{
    if (a->n == 0) return false;
    classes[0] = a->d[0].cls;
    for (size_t i = 0; i < b->n; i++) {
        bool in_a = false;
        for (size_t j = 0; j < a->n; j++)
            in_a |= a->d[j].cls == b->d[i].cls;
        if (!in_a) {
            classes[1] = b->d[i].cls;
            return true;
        }
    }
    return false;
}

/* Where max_det binds, the filter follows it: a class only beyond the top
 * max_det is absent with the filter too (filtering first would have given
 * its detections), and the rest is the unfiltered result's. */
static void expect_filter_after_max_det(ly_model *m, const picture *pic, int imgsz, float conf,
                                        int max_det, const char *what)
{
    ly_predict_options o;
    ly_predict_options_init(&o);
    if (imgsz) o.imgsz = imgsz;
    o.conf = conf;
    o.max_det = max_det;
    detections top, wide;
    predict(m, pic, &o, &top);
    o.max_det = 10 * max_det;
    predict(m, pic, &o, &wide);
    int classes[2];
    if (!pick_classes(&top, &wide, classes))
        fail_msg("%s: no class beyond the top %d to show the order with", what, max_det);
    size_t beyond = 0;
    for (size_t i = 0; i < wide.n; i++)
        beyond += listed(wide.d[i].cls, classes, 2);
    release(&top);
    release(&wide);
    o.max_det = max_det;
    size_t kept = expect_filtered(m, pic, o, classes, 2, what);
    assert_true(kept < beyond && kept <= (size_t)max_det);
    print_message("%s: classes [%d, %d] with max_det %d keep %zu of the top %d (%zu without the "
                  "bound)\n",
                  what, classes[0], classes[1], max_det, kept, max_det, beyond);
}

static void test_classes_yolo9(void **state)
{
    (void)state;
    ly_model *m = load_or_skip(YOLO9);
    picture pic;
    make_picture(&pic);
    expect_filter_after_max_det(m, &pic, 320, 0.005f, 5, "YOLO9");
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.imgsz = 160;
    int none[1] = {0};
    expect_filtered(m, &pic, o, none, 0, "YOLO9, a list of no class"); /* keeps none */
    ly_model_free(m);
}

static void test_classes_nanodet(void **state)
{
    (void)state;
    char dir[4096];
    bool cached = false;
    if (ly_model_cached("nanodet", dir, sizeof dir, &cached) != LY_OK || !cached) {
        print_message("skipped: NanoDet is not in the model cache (libreyolo fetch nanodet)\n");
        skip();
    }
    ly_model *m;
    if (ly_model_load("nanodet", NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    picture pic;
    make_picture(&pic);
    expect_filter_after_max_det(m, &pic, 0, 0.01f, 3, "NanoDet");
    ly_model_free(m);
}

/* The DETR families: top-K of queries x classes, conf, then the filter. */
static void expect_detr(const char *path, const char *what)
{
    ly_model *m = load_or_skip(path);
    picture pic;
    make_picture(&pic);
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.conf = 0.05f;
    detections all;
    predict(m, &pic, &o, &all);
    assert_true(all.n > 1);
    int classes[2] = {all.d[0].cls, all.d[all.n - 1].cls};
    release(&all);
    size_t kept = expect_filtered(m, &pic, o, classes, 2, what);
    assert_true(kept >= 1);
    print_message("%s: classes [%d, %d] keep %zu detections\n", what, classes[0], classes[1], kept);
    ly_model_free(m);
}

static void test_classes_dfine(void **state)
{
    (void)state;
    expect_detr(TESTDATA "/dfine/LibreDFINEn_seed0.pt", "D-FINE");
}

static void test_classes_deim(void **state)
{
    (void)state;
    expect_detr(TESTDATA "/deim/LibreDEIMn_seed2.pt", "DEIM");
}

static void test_classes_deimv2(void **state)
{
    (void)state;
    expect_detr(TESTDATA "/deimv2/LibreDEIMv2atto_seed0.pt", "DEIMv2");
}

/* The filter is model.c's, whatever runs the network: a .pte program too. */
static void test_classes_program(void **state)
{
    (void)state;
    ly_model *m = load_or_skip(YOLO9);
    char path[512];
    ly_test_scratch_path("LibreYOLO9t.pte", path, sizeof path);
    ly_export_options eo;
    ly_export_options_init(&eo);
    int64_t size[1] = {160};
    eo.imgsz = size;
    eo.imgsz_len = 1;
    eo.output_path = path;
    if (ly_model_export(m, &eo, NULL, 0) != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_free(m);
    ly_status st = ly_model_load(path, NULL, &m);
    if (st == LY_E_UNSUPPORTED) {
        print_message("skipped: this build runs no ExecuTorch program (%s)\n", ly_last_error());
        skip();
    }
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    picture pic;
    make_picture(&pic);
    expect_filter_after_max_det(m, &pic, 0, 0.005f, 5, "YOLO9 program");
    ly_model_free(m);
}

/* Classifiers ignore classes, as LibreYOLO's: the same probabilities. */
static void test_classes_ignored_by_vit(void **state)
{
    (void)state;
    ly_model *m = load_or_skip(TESTDATA "/vit/LibreViTti_seed0.pt");
    picture pic;
    make_picture(&pic);
    ly_predict_options o;
    ly_predict_options_init(&o);
    ly_results *a, *b;
    if (ly_model_predict_image(m, &pic.view, &o, &a) != LY_OK) fail_msg("%s", ly_last_error());
    int only[1] = {7};
    o.classes = only;
    o.n_classes = 1;
    if (ly_model_predict_image(m, &pic.view, &o, &b) != LY_OK) fail_msg("%s", ly_last_error());
    const float *pa, *pb;
    size_t na, nb;
    assert_int_equal(ly_results_probs(a, &pa, &na), LY_OK);
    assert_int_equal(ly_results_probs(b, &pb, &nb), LY_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na * sizeof *pa);
    ly_results_free(a);
    ly_results_free(b);
    /* its class ids are checked all the same */
    only[0] = 1000;
    assert_int_equal(ly_model_predict_image(m, &pic.view, &o, &a), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(), "classes: class id 1000: the model has classes 0..999");
    ly_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options_one_refusal),
        cmocka_unit_test(test_refused_before_the_model),
        cmocka_unit_test(test_classes_yolo9),
        cmocka_unit_test(test_classes_nanodet),
        cmocka_unit_test(test_classes_dfine),
        cmocka_unit_test(test_classes_deim),
        cmocka_unit_test(test_classes_deimv2),
        cmocka_unit_test(test_classes_program),
        cmocka_unit_test(test_classes_ignored_by_vit),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
