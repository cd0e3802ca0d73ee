/* SPDX-License-Identifier: MIT */
/*
 * NanoDet-g: the family's loader, pre- and post-processing, and parity with the
 * fixture of an independent NumPy/PyTorch interpreter (../shared/testdata/
 * nanodet/<image>/), per kernel selection:
 *  - ly_model_run on input.npy matches the six Identity*.npy within 1e-4
 *    absolute, with the default kernels, LIBREYOLO_KERNELS=reference and each
 *    conv2d provider on its own;
 *  - our preprocessing of images/<image>.jpg is input.npy bit for bit (with
 *    libjpeg-turbo; without it the test checks only the detections);
 *  - predict with conf 0.05 reproduces detections.json: the same classes in the
 *    same order for every detection above 0.3, IoU >= 0.95, scores within 0.01.
 * The model comes from LIBREYOLO_NANODET_DIR, else the model cache; the tests
 * that need it or the fixture skip without them. LIBREYOLO_TEST_VERBOSE=1
 * prints the figures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "io/image.h"
#include "libreyolo/fetch.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"
#include "libreyolo/nn.h"
#include "models/nanodet/nanodet.h"
#include "models/predict_options.h"
#include "models/recipe.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIXTURE LY_SHARED_DIR "/testdata/nanodet"
#define IMAGES LY_SHARED_DIR "/testdata/images"

#if defined(LY_SANITIZED) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static const char *const images[] = {"dog", "giraffe", "parkour"};
static const char *const outputs[] = {"Identity",   "Identity_1", "Identity_2",
                                      "Identity_3", "Identity_4", "Identity_5"};

static bool verbose(void)
{
    const char *v = getenv("LIBREYOLO_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char model_dir[4096];

static bool find_model(void)
{
    const char *dir = getenv("LIBREYOLO_NANODET_DIR");
    bool present = false;
    if (dir && *dir)
        snprintf(model_dir, sizeof model_dir, "%s", dir);
    else if (ly_model_cached("nanodet", model_dir, sizeof model_dir, &present) != LY_OK || !present)
        return false;
    char json[4200];
    snprintf(json, sizeof json, "%s/nanodet.json", model_dir);
    return exists(json);
}

static void need_model(void)
{
    if (!find_model()) {
        print_message("skipped: no NanoDet model (set LIBREYOLO_NANODET_DIR or run `libreyolo "
                      "fetch nanodet`)\n");
        skip();
    }
}

static void need_fixture(void)
{
    need_model();
    if (!exists(FIXTURE "/dog/input.npy")) {
        print_message("skipped: the fixture " FIXTURE " is absent\n");
        skip();
    }
}

/* One model for the tests that only run it (the kernel selection is read on
 * every call, so one model serves every provider); freed by the teardown. */
static ly_model *shared_model;

static ly_model *load_model(void)
{
    /* One thread: the suite runs tests side by side, and idle library
     * threads that spin only cost the others. */
    ly_model_options one = {.threads = 1};
    if (!shared_model && ly_model_load(model_dir, &one, &shared_model) != LY_OK)
        fail_msg("load: %s", ly_last_error());
    return shared_model;
}

static int teardown(void **state)
{
    ly_model_free(shared_model);
    shared_model = NULL;
    return ly_test_scratch_teardown(state);
}

/* ---- without the model -------------------------------------------------------- */

static void test_letterbox_geometry(void **state)
{
    (void)state;
    static const struct {
        int w, h, nw, nh, ox, oy;
    } cases[] = {
        {768, 576, 416, 312, 0, 52},  /* dog.jpg, as detections.json says */
        {1280, 852, 416, 277, 0, 69}, /* parkour: 276.9 rounds up, offset rounds down */
        {500, 500, 416, 416, 0, 0},   {100, 400, 104, 416, 156, 0},
        {1, 5000, 1, 416, 207, 0},    {416, 416, 416, 416, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ly_nanodet_letterbox g;
        assert_int_equal(ly_nanodet_letterbox_geometry(cases[i].w, cases[i].h, 416, &g), LY_OK);
        assert_int_equal(g.new_width, cases[i].nw);
        assert_int_equal(g.new_height, cases[i].nh);
        assert_int_equal(g.offset_x, cases[i].ox);
        assert_int_equal(g.offset_y, cases[i].oy);
    }
    ly_nanodet_letterbox g;
    assert_int_equal(ly_nanodet_letterbox_geometry(0, 10, 416, &g), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_nanodet_letterbox_geometry(10, 10, 0, &g), LY_E_INVALID_ARGUMENT);
}

static void test_preprocess_constant_image(void **state)
{
    (void)state;
    /* A grey 4x2 BGR image: pasted centred, normalised per channel. */
    uint8_t px[4 * 2 * 3];
    for (int i = 0; i < 8; i++) {
        px[3 * i] = 10; /* B */
        px[3 * i + 1] = 20;
        px[3 * i + 2] = 30; /* R */
    }
    float *x = malloc(3 * 8 * 8 * sizeof *x);
    assert_non_null(x);
    ly_nanodet_letterbox g;
    assert_int_equal(ly_nanodet_preprocess(px, 4, 2, 12, true, 8, x, &g), LY_OK);
    assert_int_equal(g.new_width, 8);
    assert_int_equal(g.new_height, 4);
    assert_int_equal(g.offset_y, 2);
    assert_true(x[0] == (0.0f - 103.53f) / 57.375f);                    /* border, B */
    assert_true(x[2 * 8 + 3] == (10.0f - 103.53f) / 57.375f);           /* inside, B */
    assert_true(x[2 * 64 + 5 * 8 + 7] == (30.0f - 123.675f) / 58.395f); /* inside, R */
    assert_true(x[2 * 64 + 6 * 8] == (0.0f - 123.675f) / 58.395f);      /* below, R */
    /* The same pixels as RGB give the same planes. */
    for (int i = 0; i < 8; i++) {
        px[3 * i] = 30;
        px[3 * i + 2] = 10;
    }
    float *y = malloc(3 * 8 * 8 * sizeof *y);
    assert_non_null(y);
    assert_int_equal(ly_nanodet_preprocess(px, 4, 2, 12, false, 8, y, &g), LY_OK);
    assert_memory_equal(x, y, 3 * 8 * 8 * sizeof *x);
    free(x);
    free(y);
}

/* Logits that put (almost) all of a side's mass on one bin. */
static void peaked(float *logits, int bins, int bin)
{
    for (int b = 0; b < bins; b++)
        logits[b] = b == bin ? 40.0f : 0.0f;
}

static void test_postprocess_decode_and_nms(void **state)
{
    (void)state;
    enum { SIZE = 64, NC = 6, BINS = 11, LEVELS = 3 };
    const int strides[LEVELS] = {8, 16, 32};
    ly_tensor cls_t[LEVELS], reg_t[LEVELS];
    const ly_tensor *cls[LEVELS], *reg[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        int64_t side = SIZE / strides[l];
        int64_t cs[3] = {1, side * side, NC}, rs[3] = {1, side * side, 4 * BINS};
        assert_int_equal(ly_tensor_alloc(&cls_t[l], LY_F32, 3, cs), LY_OK);
        assert_int_equal(ly_tensor_alloc(&reg_t[l], LY_F32, 3, rs), LY_OK);
        cls[l] = &cls_t[l];
        reg[l] = &reg_t[l];
    }
    /* Level 0, anchor (x 3, y 2), centre (28, 20): class 5 at 0.9, one bin
     * (8 px) on every side: (20, 12, 36, 28). */
    float *p = (float *)cls_t[0].data + (2 * 8 + 3) * NC;
    p[5] = 0.9f;
    float *r = (float *)reg_t[0].data + (2 * 8 + 3) * 4 * BINS;
    for (int side = 0; side < 4; side++)
        peaked(r + side * BINS, BINS, 1);
    /* Its neighbour (centre (36, 20)), class 5 at 0.8 and class 1 at 0.7:
     * (20, 12, 52, 28), IoU 0.5 with the first. */
    p = (float *)cls_t[0].data + (2 * 8 + 4) * NC;
    p[5] = 0.8f;
    p[1] = 0.7f;
    r = (float *)reg_t[0].data + (2 * 8 + 4) * 4 * BINS;
    peaked(r, BINS, 2);
    peaked(r + BINS, BINS, 1);
    peaked(r + 2 * BINS, BINS, 2);
    peaked(r + 3 * BINS, BINS, 1);
    /* Level 2, anchor (1, 1): a box reaching past the canvas, clipped. */
    p = (float *)cls_t[2].data + 3 * NC;
    p[0] = 0.5f;
    r = (float *)reg_t[2].data + 3 * 4 * BINS;
    peaked(r, BINS, 10);
    peaked(r + BINS, BINS, 0);
    peaked(r + 2 * BINS, BINS, 10);
    peaked(r + 3 * BINS, BINS, 0);
    /* Letterbox: a 128x64 image at scale 0.5 on the 64 canvas, 16 px down. */
    ly_nanodet_letterbox g = {0.5, 64, 32, 0, 16};
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.conf = 0.3f;
    o.iou = 0.6f;
    o.max_det = 100;
    ly_box *boxes = NULL;
    size_t n = 0;
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, SIZE, &g, 128, 64, &o, &boxes, &n),
        LY_OK);
    assert_int_equal(n, 4);
    /* 0.9 class 5: (20, 12, 36, 28) -> ((x - 0) / 0.5, (y - 16) / 0.5) = (40, -8, 72,
     * 24), clipped to the image. */
    assert_int_equal(boxes[0].cls, 5);
    assert_true(fabsf(boxes[0].conf - 0.9f) < 1e-6f);
    const float want[4] = {40.0f, 0.0f, 72.0f, 24.0f};
    for (int k = 0; k < 4; k++)
        assert_true(fabsf(boxes[0].xyxy[k] - want[k]) < 1e-3f);
    assert_int_equal(boxes[1].cls, 5);
    assert_int_equal(boxes[2].cls, 1);
    /* Level 2 (stride 32), centre (48, 48): x1 = 48 - 320 clipped to 0, x2 = 64. */
    assert_int_equal(boxes[3].cls, 0);
    assert_true(boxes[3].xyxy[0] == 0.0f && boxes[3].xyxy[2] == 128.0f);
    free(boxes);

    /* IoU 0.45 suppresses the 0.8 box of class 5 only; class 1 survives. */
    o.iou = 0.45f;
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, SIZE, &g, 128, 64, &o, &boxes, &n),
        LY_OK);
    assert_int_equal(n, 3);
    assert_int_equal(boxes[1].cls, 1);
    free(boxes);
    /* max_det, the class filter, conf. */
    o.iou = 0.6f;
    o.max_det = 2;
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, SIZE, &g, 128, 64, &o, &boxes, &n),
        LY_OK);
    assert_int_equal(n, 2);
    free(boxes);
    /* The class filter follows postprocessing (model.c): of the four, class 1's. */
    o.max_det = 100;
    int only[1] = {1};
    o.classes = only;
    o.n_classes = 1;
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, SIZE, &g, 128, 64, &o, &boxes, &n),
        LY_OK);
    assert_int_equal(n, 4);
    n = ly_predict_keep_classes(boxes, n, &o);
    assert_int_equal(n, 1);
    assert_int_equal(boxes[0].cls, 1);
    free(boxes);
    o.classes = NULL;
    o.n_classes = 0;
    o.conf = 0.95f;
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, SIZE, &g, 128, 64, &o, &boxes, &n),
        LY_OK);
    assert_int_equal(n, 0);
    assert_null(boxes);
    /* Shapes that are not a head are refused. */
    assert_int_equal(
        ly_nanodet_postprocess(cls, reg, strides, LEVELS, 96, &g, 128, 64, &o, &boxes, &n),
        LY_E_SHAPE);
    assert_non_null(strstr(ly_last_error(), "level 0 (stride 8)"));
    for (int l = 0; l < LEVELS; l++) {
        ly_tensor_free(&cls_t[l]);
        ly_tensor_free(&reg_t[l]);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_loader_accepts_and_declines(void **state)
{
    (void)state;
    ly_model_desc d;
    memset(&d, 0, sizeof d);
    /* Not ours: declined without an error, for the next loader. */
    ly_model *m = NULL;
    char path[512];
    assert_int_equal(ly_nanodet_load_path("LibreYOLO9t.pt", &d), LY_E_DECLINED);
    assert_int_equal(ly_nanodet_load_path(ly_test_scratch(), &d), LY_E_DECLINED); /* no json */
    assert_null(d.engine);
    /* A .json is ours: what is wrong with it is an error naming it. */
    ly_test_scratch_path("missing.json", path, sizeof path);
    assert_int_equal(ly_model_load(path, NULL, &m), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "missing.json"));
    ly_test_scratch_path("bad.json", path, sizeof path);
    write_file(path, "{\"format\": \"layers-model\", \"modelTopology\": {}}");
    assert_int_equal(ly_model_load(path, NULL, &m), LY_E_FORMAT);
    assert_non_null(strstr(ly_last_error(), "bad.json"));
    assert_non_null(strstr(ly_last_error(), "graph-model"));
    /* A valid graph that is not a detector head. */
    ly_test_scratch_path("tiny.json", path, sizeof path);
    write_file(path,
               "{\"format\":\"graph-model\",\"signature\":{\"inputs\":{\"x:0\":{\"name\":\"x:0\","
               "\"tensorShape\":{\"dim\":[{\"size\":\"1\"},{\"size\":\"3\"},{\"size\":\"32\"},"
               "{\"size\":\"32\"}]}}},\"outputs\":{\"y:0\":{\"name\":\"y:0\"}}},"
               "\"modelTopology\":{\"node\":[{\"name\":\"x\",\"op\":\"Placeholder\"},"
               "{\"name\":\"y\",\"op\":\"Sigmoid\",\"input\":[\"x\"]}]}}");
    assert_int_equal(ly_model_load(path, NULL, &m), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "1 outputs, a NanoDet network"));
    unlink(path);
    /* An op the importer does not know: named with its node. */
    write_file(path,
               "{\"format\":\"graph-model\",\"signature\":{\"inputs\":{\"x:0\":{\"name\":\"x:0\","
               "\"tensorShape\":{\"dim\":[{\"size\":\"1\"},{\"size\":\"3\"},{\"size\":\"32\"},"
               "{\"size\":\"32\"}]}}},\"outputs\":{\"y:0\":{\"name\":\"y:0\"}}},"
               "\"modelTopology\":{\"node\":[{\"name\":\"x\",\"op\":\"Placeholder\"},"
               "{\"name\":\"y\",\"op\":\"Softplus\",\"input\":[\"x\"]}]}}");
    assert_int_equal(ly_model_load(path, NULL, &m), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "node 'y' (Softplus): op 'Softplus' is not supported"));
    unlink(path);
    ly_test_scratch_path("bad.json", path, sizeof path);
    unlink(path);
}

/* ---- with the model ------------------------------------------------------------ */

static void ignore_output(const char *name, const ly_tensor *t, void *user)
{
    (void)name;
    (void)t;
    (void)user;
}

static void test_model_info_and_input_checks(void **state)
{
    (void)state;
    need_model();
    ly_model *m = NULL;
    if (ly_model_load(model_dir, NULL, &m) != LY_OK) fail_msg("load: %s", ly_last_error());
    ly_model_info info;
    assert_int_equal(ly_model_get_info(m, &info), LY_OK);
    assert_string_equal(info.family, "nanodet");
    assert_string_equal(info.size, "g");
    assert_string_equal(info.task, "detect");
    assert_int_equal(info.nc, 80);
    assert_int_equal(info.imgsz, 416);
    assert_string_equal(info.names[0], "person");
    assert_string_equal(info.names[79], "toothbrush");
    assert_true(info.default_conf == 0.35f);
    assert_true(info.default_iou == 0.6f);
    assert_int_equal(info.default_max_det, 100);
    /* The graph's resize sizes fix the input at 416. */
    int64_t shape[4] = {1, 3, 320, 320};
    ly_tensor x;
    assert_int_equal(ly_tensor_alloc(&x, LY_F32, 4, shape), LY_OK);
    assert_int_equal(ly_model_run(m, &x, ignore_output, NULL), LY_E_SHAPE);
    assert_non_null(strstr(ly_last_error(), "expected [1, 3, 416, 416]"));
    ly_tensor_free(&x);
    ly_model_free(m);
    /* The folder and the JSON inside it load alike. */
    char json[4200];
    snprintf(json, sizeof json, "%s/nanodet.json", model_dir);
    assert_int_equal(ly_model_load(json, NULL, &m), LY_OK);
    ly_model_free(m);
}

typedef struct compare_state {
    const char *dir;
    const char *impl;
    int seen;
    double worst[6];
} compare_state;

static void compare_output(const char *name, const ly_tensor *t, void *user)
{
    compare_state *s = user;
    int k = -1;
    for (int i = 0; i < 6; i++)
        if (strcmp(name, outputs[i]) == 0) k = i;
    if (k < 0) fail_msg("unexpected output '%s'", name);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", s->dir, name);
    ly_tensor ref;
    if (ly_npy_load(path, &ref) != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(t->ndim, ref.ndim);
    for (int d = 0; d < ref.ndim; d++)
        assert_int_equal(t->shape[d], ref.shape[d]);
    double worst = 0;
    const float *a = t->data, *b = ref.data;
    for (int64_t i = 0; i < ly_tensor_numel(&ref); i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (!(diff <= worst)) worst = isnan(diff) ? INFINITY : diff;
    }
    ly_npy_free(&ref);
    if (worst > s->worst[k]) s->worst[k] = worst;
    s->seen++;
    if (!(worst <= 1e-4))
        fail_msg("%s, kernels '%s': %s max |diff| %g > 1e-4", s->dir, s->impl, name, worst);
}

typedef struct impl_names {
    char names[8][32];
    int count;
} impl_names;

static void collect_conv_impl(const char *slot, const char *impl, bool eligible,
                              const char *why_not, void *user)
{
    (void)slot;
    (void)why_not;
    impl_names *l = user;
    if (eligible && strcmp(impl, "reference") != 0 && l->count < 8)
        snprintf(l->names[l->count++], sizeof l->names[0], "%s", impl);
}

static void test_run_matches_fixture(void **state)
{
    (void)state;
    need_fixture();
    impl_names impls = {.count = 2};
    snprintf(impls.names[0], sizeof impls.names[0], "%s", "");
    snprintf(impls.names[1], sizeof impls.names[1], "%s", "reference");
    /* The providers' own code is not instrumented: under the sanitizers the
     * default and the reference suffice. */
    if (!SANITIZED)
        assert_int_equal(ly_kernel_list(ly_op_name(LY_OP_CONV2D), collect_conv_impl, &impls),
                         LY_OK);
    /* Without providers the default is the reference: once is enough. */
    const char *active = NULL;
    unsetenv("LIBREYOLO_KERNELS");
    if (ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &active, NULL) == LY_OK &&
        strcmp(active, "reference") == 0)
        impls.count = 1;
    for (int p = 0; p < impls.count; p++) {
        const char *impl = impls.names[p];
        setenv("LIBREYOLO_KERNELS", impl, 1);
        ly_model *m = load_model();
        compare_state s = {.impl = *impl ? impl : "default"};
        /* Each provider alone on one image (the default covers all three);
         * the reference, slow under the sanitizers, on one there. */
        int n_images = p >= 2 || (SANITIZED && p == 1) ? 1 : 3;
        for (int i = 0; i < n_images; i++) {
            char dir[256], path[300];
            snprintf(dir, sizeof dir, FIXTURE "/%s", images[i]);
            snprintf(path, sizeof path, "%s/input.npy", dir);
            ly_tensor x;
            if (ly_npy_load(path, &x) != LY_OK) fail_msg("%s", ly_last_error());
            s.dir = dir;
            if (ly_model_run(m, &x, compare_output, &s) != LY_OK)
                fail_msg("run (%s): %s", s.impl, ly_last_error());
            ly_npy_free(&x);
        }
        assert_int_equal(s.seen, 6 * n_images);
        if (verbose())
            printf("  run %-9s max |diff| per output: %.2g %.2g %.2g %.2g %.2g %.2g\n", s.impl,
                   s.worst[0], s.worst[1], s.worst[2], s.worst[3], s.worst[4], s.worst[5]);
    }
    unsetenv("LIBREYOLO_KERNELS");
}

static double iou(const float *a, const double *b)
{
    double w = fmin(a[2], b[2]) - fmax(a[0], b[0]), h = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    double inter = (w > 0 ? w : 0) * (h > 0 ? h : 0);
    double u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return u > 0 ? inter / u : 1.0;
}

static cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    return j;
}

/* Every reference detection above 0.3 at the same rank: class, IoU, score. */
static void check_detections(const char *image, const char *impl, const ly_results *res,
                             const cJSON *ref)
{
    const cJSON *dets = cJSON_GetObjectItem(ref, "detections");
    size_t n;
    assert_int_equal(ly_results_count(res, &n), LY_OK);
    double worst_iou = 1, worst_score = 0;
    int above = 0, i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, dets)
    {
        double conf = cJSON_GetObjectItem(d, "conf")->valuedouble;
        if (conf <= 0.3) break;
        above++;
        if ((size_t)i >= n) fail_msg("%s (%s): only %zu detections", image, impl, n);
        ly_detection got;
        ly_results_get(res, (size_t)i, &got);
        int cls = cJSON_GetObjectItem(d, "cls")->valueint;
        const cJSON *xyxy = cJSON_GetObjectItem(d, "xyxy");
        double box[4];
        for (int k = 0; k < 4; k++)
            box[k] = cJSON_GetArrayItem(xyxy, k)->valuedouble;
        double o = iou(got.xyxy, box), ds = fabs(got.conf - conf);
        if (got.cls != cls || o < 0.95 || ds > 0.01)
            fail_msg("%s (%s) detection %d: got class %d %.4f [%.1f %.1f %.1f %.1f], expected "
                     "class %d %.4f [%.1f %.1f %.1f %.1f] (IoU %.3f)",
                     image, impl, i, got.cls, got.conf, got.xyxy[0], got.xyxy[1], got.xyxy[2],
                     got.xyxy[3], cls, conf, box[0], box[1], box[2], box[3], o);
        worst_iou = fmin(worst_iou, o);
        worst_score = fmax(worst_score, ds);
        i++;
    }
    /* ... and nothing else above 0.3. */
    if ((size_t)above < n) {
        ly_detection next;
        ly_results_get(res, (size_t)above, &next);
        if (next.conf > 0.3f + 0.01f)
            fail_msg("%s (%s): an extra detection, class %d at %.4f", image, impl, next.cls,
                     next.conf);
    }
    assert_true(above > 0);
    if (verbose())
        printf("  predict %-8s %-9s %3zu detections (%d above 0.3, reference %d): min IoU %.4f, "
               "max |score diff| %.5f\n",
               image, impl, n, above, cJSON_GetArraySize(dets), worst_iou, worst_score);
}

static void test_predict_matches_fixture(void **state)
{
    (void)state;
    need_fixture();
    if (!ly_image_codecs_available()) {
        print_message("skipped: this build cannot read JPEG files\n");
        skip();
    }
    /* The reference kernels' outputs are checked on every image by
     * test_run_matches_fixture and predict adds no kernel of its own, so they
     * predict one image here (none under the sanitizers, where they are slow). */
    const char *impls[2] = {"", "reference"};
    for (int p = 0; p < (SANITIZED ? 1 : 2); p++) {
        setenv("LIBREYOLO_KERNELS", impls[p], 1);
        ly_model *m = load_model();
        for (int i = p == 0 ? 0 : 2; i < 3; i++) {
            char jpg[256], npy[256], json[256];
            snprintf(jpg, sizeof jpg, IMAGES "/%s.jpg", images[i]);
            snprintf(npy, sizeof npy, FIXTURE "/%s/input.npy", images[i]);
            snprintf(json, sizeof json, FIXTURE "/%s/detections.json", images[i]);
#ifdef LY_HAVE_LIBJPEG
            if (p == 0) { /* the input, bit for bit */
                ly_image im;
                ly_tensor ref;
                assert_int_equal(ly_image_load(jpg, &im), LY_OK);
                assert_int_equal(ly_npy_load(npy, &ref), LY_OK);
                float *x = malloc((size_t)ly_tensor_numel(&ref) * sizeof *x);
                assert_non_null(x);
                ly_nanodet_letterbox g;
                assert_int_equal(ly_nanodet_preprocess(im.pixels, im.width, im.height,
                                                       (size_t)im.width * 3, false, 416, x, &g),
                                 LY_OK);
                int64_t differ = 0;
                for (int64_t k = 0; k < ly_tensor_numel(&ref); k++)
                    differ += x[k] != ((float *)ref.data)[k];
                if (differ)
                    fail_msg("%s: %lld input values differ from input.npy", jpg, (long long)differ);
                free(x);
                ly_npy_free(&ref);
                ly_image_free(&im);
            }
#endif
            ly_predict_options o;
            ly_predict_options_init(&o);
            o.conf = 0.05f;
            ly_results *res = NULL;
            if (ly_model_predict_file(m, jpg, &o, &res) != LY_OK) fail_msg("%s", ly_last_error());
            cJSON *ref = read_json(json);
            check_detections(images[i], *impls[p] ? impls[p] : "default", res, ref);
            cJSON_Delete(ref);
            ly_results_free(res);
        }
    }
    unsetenv("LIBREYOLO_KERNELS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_letterbox_geometry),
        cmocka_unit_test(test_preprocess_constant_image),
        cmocka_unit_test(test_postprocess_decode_and_nms),
        cmocka_unit_test(test_loader_accepts_and_declines),
        cmocka_unit_test(test_model_info_and_input_checks),
        cmocka_unit_test(test_run_matches_fixture),
        cmocka_unit_test(test_predict_matches_fixture),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, teardown);
}
