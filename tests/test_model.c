/* SPDX-License-Identifier: MIT */
/* The detector API end to end on the fixture checkpoint: LibreYOLO's
 * detections from its input tensor and from the photo, pixel formats and
 * strides, options, info, and load errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "io/image.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"
#include "models/yolo9/prepost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define YOLO9_DIR LY_SHARED_DIR "/testdata/yolo9"
#define CHECKPOINT YOLO9_DIR "/LibreYOLO9t_seed0.pt"
#define REF_DIR YOLO9_DIR "/ref_parkour"
#define PARKOUR LY_SHARED_DIR "/testdata/images/parkour.jpg"

/* The network's float differences from PyTorch (fused Conv+BN, other
 * summation orders) move scores by up to ~5e-4 on this checkpoint, enough to
 * swap near-tied detections in the order and at the 300th place. So the
 * detections are compared as sets: every reference detection scoring above
 * the last one by more than SCORE_TOL has a detection of the same class with
 * the score within SCORE_TOL and every coordinate within BOX_TOL pixels or
 * BOX_REL_TOL of the box's extent on that axis, whichever is larger, and the
 * other way round. The relative part is the network's own ~1e-3 relative
 * noise: one 1031-px-wide box lands 0.84-1.55 px off depending on which
 * conv2d provider runs (measured: reference 1.08, oneDNN 1.55, XNNPACK 0.88). */
#define BOX_TOL 1.0
#define BOX_REL_TOL 2e-3
#define SCORE_TOL 1e-3

static ly_model *model;

static bool have_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int load_model(void **state)
{
    (void)state;
    if (!have_file(CHECKPOINT)) return 0;
    if (ly_model_load(CHECKPOINT, NULL, &model) != LY_OK) {
        fprintf(stderr, "cannot load %s: %s\n", CHECKPOINT, ly_last_error());
        return -1;
    }
    return 0;
}

static int free_model(void **state)
{
    (void)state;
    ly_model_free(model);
    return 0;
}

static void need_fixture(void)
{
    if (!model) {
        print_message("skipped: %s is absent (the shared fixture is not here)\n", CHECKPOINT);
        skip();
    }
}

typedef struct det_set {
    size_t n;
    ly_box *b;
} det_set;

static void load_reference(det_set *ref)
{
    ly_tensor xyxy, conf, cls;
    const char *names[3] = {REF_DIR "/det_xyxy.npy", REF_DIR "/det_conf.npy",
                            REF_DIR "/det_cls.npy"};
    ly_tensor *t[3] = {&xyxy, &conf, &cls};
    for (int i = 0; i < 3; i++)
        if (ly_npy_load(names[i], t[i]) != LY_OK) fail_msg("%s", ly_last_error());
    ref->n = (size_t)conf.shape[0];
    ref->b = calloc(ref->n, sizeof *ref->b);
    assert_non_null(ref->b);
    for (size_t i = 0; i < ref->n; i++) {
        memcpy(ref->b[i].xyxy, (float *)xyxy.data + 4 * i, 4 * sizeof(float));
        ref->b[i].conf = ((float *)conf.data)[i];
        ref->b[i].cls = (int)((float *)cls.data)[i];
    }
    for (int i = 0; i < 3; i++)
        ly_npy_free(t[i]);
}

/* Every detection of `a` clearly inside the top N finds its twin in `b`. */
static void expect_covered(const det_set *a, const det_set *b, const char *what)
{
    float floor_score = a->b[a->n - 1].conf + (float)SCORE_TOL;
    for (size_t i = 0; i < a->n; i++) {
        if (a->b[i].conf <= floor_score) continue;
        bool found = false;
        for (size_t j = 0; j < b->n && !found; j++) {
            if (b->b[j].cls != a->b[i].cls) continue;
            if (fabs(b->b[j].conf - a->b[i].conf) > SCORE_TOL) continue;
            bool near = true;
            for (int k = 0; k < 4; k++) {
                double extent = a->b[i].xyxy[(k & 1) + 2] - a->b[i].xyxy[k & 1];
                near &=
                    fabs(b->b[j].xyxy[k] - a->b[i].xyxy[k]) <= fmax(BOX_TOL, BOX_REL_TOL * extent);
            }
            found = near;
        }
        if (!found)
            fail_msg("%s: detection %zu (class %d, %.5f, [%.2f %.2f %.2f %.2f]) has no match", what,
                     i, a->b[i].cls, (double)a->b[i].conf, (double)a->b[i].xyxy[0],
                     (double)a->b[i].xyxy[1], (double)a->b[i].xyxy[2], (double)a->b[i].xyxy[3]);
    }
}

static void expect_parity(const det_set *ours)
{
    det_set ref;
    load_reference(&ref);
    assert_int_equal(ours->n, ref.n);
    expect_covered(&ref, ours, "reference vs ours");
    expect_covered(ours, &ref, "ours vs reference");
    free(ref.b);
}

static void results_to_set(const ly_results *r, det_set *s)
{
    assert_int_equal(ly_results_count(r, &s->n), LY_OK);
    s->b = calloc(s->n ? s->n : 1, sizeof *s->b);
    assert_non_null(s->b);
    for (size_t i = 0; i < s->n; i++) {
        ly_detection d;
        assert_int_equal(ly_results_get(r, i, &d), LY_OK);
        memcpy(s->b[i].xyxy, d.xyxy, sizeof d.xyxy);
        s->b[i].conf = d.conf;
        s->b[i].cls = d.cls;
        assert_non_null(d.name);
        if (i) assert_true(d.conf <= s->b[i - 1].conf);
    }
}

typedef struct captured {
    ly_tensor predictions;
    int outputs;
} captured;

static void capture(const char *name, const ly_tensor *output, void *user)
{
    captured *c = user;
    c->outputs++;
    if (strcmp(name, "predictions") != 0) return;
    assert_int_equal(ly_tensor_alloc(&c->predictions, output->dtype, output->ndim, output->shape),
                     LY_OK);
    memcpy(c->predictions.data, output->data, (size_t)ly_tensor_numel(output) * sizeof(float));
}

/* The network on LibreYOLO's own input, then our post-processing. */
static void test_run_and_postprocess_parity(void **state)
{
    (void)state;
    need_fixture();
    ly_tensor input;
    if (ly_npy_load(REF_DIR "/input.npy", &input) != LY_OK) fail_msg("%s", ly_last_error());
    captured c = {0};
    if (ly_model_run(model, &input, capture, &c) != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(c.outputs, 4);
    assert_non_null(c.predictions.data);
    assert_int_equal(c.predictions.shape[1], 84);
    assert_int_equal(c.predictions.shape[2], 8400);
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.conf = 0.25f, o.iou = 0.45f, o.max_det = 300; /* YOLO9's defaults */
    det_set ours;
    assert_int_equal(ly_yolo9_postprocess(&c.predictions, 0.5, 1280, 852, &o, &ours.b, &ours.n),
                     LY_OK);
    expect_parity(&ours);
    free(ours.b);
    ly_tensor_free(&c.predictions);

    input.shape[2] = 600; /* not a multiple of 32 */
    assert_int_equal(ly_model_run(model, &input, capture, &c), LY_E_SHAPE);
    ly_npy_free(&input);
}

static void test_predict_file(void **state)
{
    (void)state;
    need_fixture();
    if (!ly_image_codecs_available()) {
        print_message("skipped: built without stb, images cannot be read\n");
        skip();
    }
    ly_results *r;
    if (ly_model_predict_file(model, PARKOUR, NULL, &r) != LY_OK) fail_msg("%s", ly_last_error());
    int h, w;
    assert_int_equal(ly_results_orig_shape(r, &h, &w), LY_OK);
    assert_int_equal(h, 852);
    assert_int_equal(w, 1280);
    double pre, inf, post;
    assert_int_equal(ly_results_speed(r, &pre, &inf, &post), LY_OK);
    assert_true(pre > 0 && inf > 0 && post > 0);
    det_set ours;
    results_to_set(r, &ours);
    assert_int_equal(ours.n, 300);
#ifdef LY_HAVE_LIBJPEG
    /* With libjpeg the input is LibreYOLO's bit for bit. */
    expect_parity(&ours);
#endif
    ly_detection d;
    assert_int_equal(ly_results_get(r, 300, &d), LY_E_INVALID_ARGUMENT);
    free(ours.b);
    ly_results_free(r);
}

/* The same pixels as RGB, as BGR, and with padded rows give the same boxes. */
static void test_pixel_formats(void **state)
{
    (void)state;
    need_fixture();
    enum { W = 96, H = 64, STRIDE = W * 3 + 5 };
    uint8_t *rgb = malloc(W * H * 3), *bgr = malloc((size_t)STRIDE * H);
    assert_non_null(rgb);
    assert_non_null(bgr);
    for (int i = 0; i < W * H * 3; i++)
        rgb[i] = (uint8_t)((i * 37) ^ (i >> 7));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                bgr[(size_t)y * STRIDE + 3 * x + c] = rgb[3 * (y * W + x) + 2 - c];
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.imgsz = 128; /* small and fast */
    o.conf = 0.05f;
    ly_image_view a = {rgb, W, H, W * 3, LY_PIXELS_RGB}, b = {bgr, W, H, STRIDE, LY_PIXELS_BGR};
    ly_results *ra, *rb;
    if (ly_model_predict_image(model, &a, &o, &ra) != LY_OK) fail_msg("%s", ly_last_error());
    if (ly_model_predict_image(model, &b, &o, &rb) != LY_OK) fail_msg("%s", ly_last_error());
    det_set sa, sb;
    results_to_set(ra, &sa);
    results_to_set(rb, &sb);
    assert_int_equal(sa.n, sb.n);
    for (size_t i = 0; i < sa.n; i++) {
        assert_int_equal(sa.b[i].cls, sb.b[i].cls);
        assert_true(sa.b[i].conf == sb.b[i].conf);
        assert_memory_equal(sa.b[i].xyxy, sb.b[i].xyxy, sizeof sa.b[i].xyxy);
        for (int k = 0; k < 4; k++)
            assert_true(sa.b[i].xyxy[k] >= 0);
        assert_true(sa.b[i].xyxy[2] <= W && sa.b[i].xyxy[3] <= H);
    }
    free(sb.b);
    ly_results_free(rb);

    /* A decoded image handed over: the same boxes, and the image is emptied,
     * on success and on a refused request alike. */
    ly_image owned = {malloc(W * H * 3), W, H};
    assert_non_null(owned.pixels);
    memcpy(owned.pixels, rgb, W * H * 3);
    if (ly_model_predict_decoded(model, &owned, &o, &rb) != LY_OK) fail_msg("%s", ly_last_error());
    assert_null(owned.pixels);
    results_to_set(rb, &sb);
    assert_int_equal(sa.n, sb.n);
    for (size_t i = 0; i < sa.n; i++)
        assert_memory_equal(sa.b[i].xyxy, sb.b[i].xyxy, sizeof sa.b[i].xyxy);
    int h, w;
    assert_int_equal(ly_results_orig_shape(rb, &h, &w), LY_OK);
    assert_true(h == H && w == W);
    free(sb.b);
    ly_results_free(rb);
    owned = (ly_image){malloc(W * H * 3), W, H};
    assert_non_null(owned.pixels);
    o.imgsz = 100;
    assert_int_equal(ly_model_predict_decoded(model, &owned, &o, &rb), LY_E_INVALID_ARGUMENT);
    assert_null(owned.pixels);
    o.imgsz = 128;
    assert_int_equal(ly_model_predict_decoded(model, NULL, &o, &rb), LY_E_INVALID_ARGUMENT);
    free(sa.b);
    ly_results_free(ra);

    /* A class filter keeps only those classes. */
    int keep[2] = {0, 27};
    o.classes = keep;
    o.n_classes = 2;
    if (ly_model_predict_image(model, &a, &o, &ra) != LY_OK) fail_msg("%s", ly_last_error());
    results_to_set(ra, &sa);
    for (size_t i = 0; i < sa.n; i++)
        assert_true(sa.b[i].cls == 0 || sa.b[i].cls == 27);
    free(sa.b);
    ly_results_free(ra);

    /* Bad requests. */
    keep[1] = 80;
    assert_int_equal(ly_model_predict_image(model, &a, &o, &ra), LY_E_INVALID_ARGUMENT);
    assert_null(ra);
    assert_non_null(strstr(ly_last_error(), "class id 80"));
    o.n_classes = 0;
    o.classes = NULL;
    o.imgsz = 100;
    assert_int_equal(ly_model_predict_image(model, &a, &o, &ra), LY_E_INVALID_ARGUMENT);
    o.imgsz = 128;
    a.stride = W * 3 - 1;
    assert_int_equal(ly_model_predict_image(model, &a, &o, &ra), LY_E_INVALID_ARGUMENT);
    free(rgb);
    free(bgr);
}

static void test_info(void **state)
{
    (void)state;
    need_fixture();
    ly_model_info info;
    assert_int_equal(ly_model_get_info(model, &info), LY_OK);
    assert_string_equal(info.family, "yolo9");
    assert_string_equal(info.size, "t");
    assert_string_equal(info.task, "detect");
    assert_int_equal(info.nc, 80);
    assert_int_equal(info.imgsz, 640);
    assert_string_equal(info.names[0], "person");
    assert_string_equal(info.names[79], "toothbrush");
    assert_true(info.default_conf == 0.25f && info.default_iou == 0.45f &&
                info.default_max_det == 300);
    int fused = -1; /* YOLO9 has no attention modules */
    assert_int_equal(ly_model_set_fused_attention(model, true, &fused), LY_OK);
    assert_int_equal(fused, 0);
    assert_int_equal(ly_model_set_fused_attention(NULL, true, &fused), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_model_set_threads(model, -1), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_model_set_threads(model, 0), LY_OK);
}

/* A one-tensor .safetensors file with the given metadata entries. */
static void write_safetensors(const char *path, const char *metadata)
{
    char header[512];
    int n = snprintf(header, sizeof header,
                     "{\"__metadata__\":{%s},\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                     "\"data_offsets\":[0,4]}}",
                     metadata);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t len[8] = {(uint8_t)n};
    assert_int_equal(fwrite(len, 1, 8, f), 8);
    assert_int_equal(fwrite(header, 1, (size_t)n, f), (size_t)n);
    assert_int_equal(fwrite("\0\0\0\0", 1, 4, f), 4);
    assert_int_equal(fclose(f), 0);
}

static void expect_load_error(const char *path, ly_status want, const char *words)
{
    ly_model *m = NULL;
    assert_int_equal(ly_model_load(path, NULL, &m), want);
    assert_null(m);
    const char *msg = ly_last_error();
    if (!strstr(msg, path) || (words && !strstr(msg, words)))
        fail_msg("message should name %s and say '%s': %s", path, words ? words : "", msg);
}

static void test_load_errors(void **state)
{
    (void)state;
    ly_model *m = NULL;
    expect_load_error("/nonexistent/model.pt", LY_E_NOT_FOUND, NULL);
    /* a mistyped model name: the closest name suggested, as difflib would */
    expect_load_error("nanodett", LY_E_NOT_FOUND, "did you mean 'nanodet'?");
    expect_load_error("yolo9tt", LY_E_NOT_FOUND, "did you mean 'yolo9-t'?");
    const char *words[] = {"predict", "export", NULL, "info"};
    assert_string_equal(ly_closest_word("predct", words, 4), "predict");
    assert_null(ly_closest_word("zzz", words, 4));
    assert_null(ly_closest_word(NULL, words, 4));
    char path[] = "/tmp/ly_test_model_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_safetensors(path, "\"model_family\":\"yolo8\"");
    expect_load_error(path, LY_E_UNSUPPORTED, "model family 'yolo8'");
    write_safetensors(path, "\"model_family\":\"yolo9\",\"task\":\"segment\"");
    expect_load_error(path, LY_E_UNSUPPORTED, "task 'segment'");
    /* No YOLO9 weights in it: the network's own error, with the file named. */
    write_safetensors(path, "\"model_family\":\"yolo9\"");
    assert_int_not_equal(ly_model_load(path, NULL, &m), LY_OK);
    assert_null(m);
    assert_non_null(strstr(ly_last_error(), path));
    unlink(path);
    ly_model_options bad = {-2};
    assert_int_equal(ly_model_load("x.pt", &bad, &m), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_model_load(NULL, NULL, &m), LY_E_INVALID_ARGUMENT);
    ly_predict_options o;
    assert_int_equal(ly_predict_options_init(&o), LY_OK);
    /* "The model's default" everywhere: markers no checked value is. */
    assert_true(isnan(o.conf) && isnan(o.iou));
    assert_true(o.max_det == LY_PREDICT_DEFAULT && o.imgsz == LY_PREDICT_DEFAULT);
    assert_null(o.classes);
    assert_int_equal(o.given, 0);
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_OK);
    /* imgsz as (height, width): square only, and then given */
    assert_int_equal(ly_predict_options_set_imgsz(&o, 480, 640), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "imgsz 480x640: predict takes a square input"));
    assert_int_equal(o.given, 0);
    assert_int_equal(ly_predict_options_set_imgsz(&o, 320, 320), LY_OK);
    assert_true(o.imgsz == 320 && o.given == LY_PREDICT_IMGSZ);
    assert_int_equal(ly_predict_options_init(&o), LY_OK);
    /* The marker given by a user is a value like any other, and refused. */
    o.given = LY_PREDICT_CONF;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(), "conf nan: expected a number in [0, 1]");
    o.given = LY_PREDICT_MAX_DET;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    o.given = 0;
    o.max_det = 0; /* no longer "the default" */
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(), "max_det 0: expected a positive integer");
    assert_int_equal(ly_predict_options_check(NULL, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_model_free(NULL), LY_OK);
    assert_int_equal(ly_results_free(NULL), LY_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_and_postprocess_parity),
        cmocka_unit_test(test_predict_file),
        cmocka_unit_test(test_pixel_formats),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, load_model, free_model);
}
