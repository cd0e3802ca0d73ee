/* SPDX-License-Identifier: MIT */
/* YOLO9 pre- and post-processing: parity with LibreYOLO on the fixture
 * (ref_parkour: input.npy, predictions.npy -> det_*), OpenCV's resize on small
 * cases worked out by hand, and the NMS rules on synthetic predictions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "io/image.h"
#include "libreyolo/io.h"
#include "models/predict_options.h"
#include "models/yolo9/prepost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REF_DIR LY_SHARED_DIR "/testdata/yolo9/ref_parkour"
#define PARKOUR LY_SHARED_DIR "/testdata/images/parkour.jpg"

static bool have_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void skip_without(const char *path)
{
    if (!have_file(path)) {
        print_message("skipped: %s is absent (the shared fixture is not here)\n", path);
        skip();
    }
}

static void load_npy(const char *name, ly_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", REF_DIR, name);
    if (ly_npy_load(path, t) != LY_OK) fail_msg("%s", ly_last_error());
}

static ly_predict_options defaults(void)
{
    ly_predict_options o;
    assert_int_equal(ly_predict_options_init(&o), LY_OK);
    o.conf = 0.25f, o.iou = 0.45f, o.max_det = 300; /* YOLO9's defaults */
    return o;
}

/* ---- Parity with LibreYOLO --------------------------------------------- */

static void test_fixture_postprocess(void **state)
{
    (void)state;
    skip_without(REF_DIR "/predictions.npy");
    ly_tensor pred, xyxy, conf, cls;
    load_npy("predictions.npy", &pred);
    load_npy("det_xyxy.npy", &xyxy);
    load_npy("det_conf.npy", &conf);
    load_npy("det_cls.npy", &cls);
    assert_int_equal(cls.dtype, LY_F32);

    ly_letterbox g;
    assert_int_equal(ly_letterbox_geometry(1280, 852, 640, 640, &g), LY_OK);
    ly_predict_options o = defaults();
    ly_box *boxes = NULL;
    size_t n = 0;
    assert_int_equal(ly_yolo9_postprocess(&pred, g.ratio, 1280, 852, &o, &boxes, &n), LY_OK);
    assert_int_equal(n, (size_t)xyxy.shape[0]);
    assert_int_equal(n, 300);
    const float *rx = xyxy.data, *rc = conf.data, *rk = cls.data;
    double box_diff = 0, score_diff = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(boxes[i].cls, (int)rk[i]);
        for (int k = 0; k < 4; k++)
            box_diff = fmax(box_diff, fabs(boxes[i].xyxy[k] - rx[4 * i + k]));
        score_diff = fmax(score_diff, fabs(boxes[i].conf - rc[i]));
        if (i) assert_true(boxes[i].conf <= boxes[i - 1].conf);
    }
    /* Measured: both exactly 0. */
    if (box_diff > 1e-3 || score_diff > 1e-6)
        fail_msg("max box diff %g px, max score diff %g", box_diff, score_diff);
    free(boxes);
    ly_npy_free(&pred);
    ly_npy_free(&xyxy);
    ly_npy_free(&conf);
    ly_npy_free(&cls);
}

static void test_fixture_preprocess(void **state)
{
    (void)state;
#ifndef LY_HAVE_STB
    print_message("skipped: built without stb, images cannot be read\n");
    skip();
#else
    skip_without(REF_DIR "/input.npy");
    skip_without(PARKOUR);
    ly_image im;
    if (ly_image_load(PARKOUR, &im) != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor ref;
    load_npy("input.npy", &ref);
    float *out = malloc(3 * 640 * 640 * sizeof *out);
    assert_non_null(out);
    ly_letterbox g;
    assert_int_equal(ly_yolo9_preprocess(im.pixels, im.width, im.height, (size_t)im.width * 3,
                                         false, 640, 640, out, &g),
                     LY_OK);
    assert_int_equal(g.new_width, 640);
    assert_int_equal(g.new_height, 426);
    const float *r = ref.data;
    double max_diff = 0;
    size_t differ = 0, total = 3 * 640 * 640;
    for (size_t i = 0; i < total; i++) {
        double d = fabs(out[i] - r[i]);
        max_diff = fmax(max_diff, d);
        differ += d > 0;
    }
    /* The resize and the rest are exact (checked with libjpeg-turbo's decode:
     * 0 difference); stb's JPEG decoder rounds its IDCT, upsampling and colour
     * conversion differently from the libjpeg-turbo PIL uses, which leaves
     * 19260 values (1.6%) 1 or 2 levels apart after the 2x reduction. */
    if (max_diff > 2.0 / 255 + 1e-6 || differ > total / 50)
        fail_msg("input differs from LibreYOLO's by up to %g (%g levels) in %zu of %zu values",
                 max_diff, max_diff * 255, differ, total);
    free(out);
    ly_npy_free(&ref);
    ly_image_free(&im);
#endif
}

/* ---- Letterbox and resize ---------------------------------------------- */

static void test_letterbox_geometry(void **state)
{
    (void)state;
    ly_letterbox g;
    assert_int_equal(ly_letterbox_geometry(1280, 852, 640, 640, &g), LY_OK);
    assert_true(g.ratio == 0.5);
    assert_int_equal(g.new_width, 640);
    assert_int_equal(g.new_height, 426);
    /* int() truncation and the floor of 1. */
    assert_int_equal(ly_letterbox_geometry(1000, 1, 640, 640, &g), LY_OK);
    assert_int_equal(g.new_width, 640);
    assert_int_equal(g.new_height, 1);
    assert_int_equal(ly_letterbox_geometry(333, 500, 640, 640, &g), LY_OK);
    assert_int_equal(g.new_height, 640);
    assert_int_equal(g.new_width, (int)(333 * (640.0 / 500)));
    /* Rectangular targets take the tighter side. */
    assert_int_equal(ly_letterbox_geometry(100, 100, 320, 640, &g), LY_OK);
    assert_int_equal(g.new_width, 320);
    assert_int_equal(g.new_height, 320);
    assert_int_equal(ly_letterbox_geometry(0, 10, 640, 640, &g), LY_E_INVALID_ARGUMENT);
}

static void fill_gray(uint8_t *px, int n, const uint8_t *values)
{
    for (int i = 0; i < n; i++)
        px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = values[i];
}

static void test_resize_cases(void **state)
{
    (void)state;
    uint8_t src[64 * 3], dst[64 * 3];

    /* cv2.resize([[0, 255]], (4, 1)) == [[0, 64, 191, 255]]: clamped left tap,
     * 11-bit weights (1536, 512), truncating vertical pass. */
    fill_gray(src, 2, (const uint8_t[]){0, 255});
    assert_int_equal(ly_resize_linear_u8c3(src, 2, 1, 6, dst, 4, 1, 12), LY_OK);
    const uint8_t up[4] = {0, 64, 191, 255};
    for (int i = 0; i < 12; i++)
        assert_int_equal(dst[i], up[i / 3]);

    /* An exact 2x reduction is INTER_AREA: (a + b + c + d + 2) >> 2 per channel. */
    const uint8_t q[4] = {1, 2, 2, 2}; /* 7/4 = 1.75 -> (7 + 2) >> 2 = 2 */
    fill_gray(src, 4, q);
    src[0] = 0;                                      /* red: 0 + 2 + 2 + 2 = 6 -> 2 */
    src[1] = 1, src[4] = 1, src[7] = 1, src[10] = 0; /* green: 3 -> (3 + 2) >> 2 = 1 */
    assert_int_equal(ly_resize_linear_u8c3(src, 2, 2, 6, dst, 1, 1, 3), LY_OK);
    assert_int_equal(dst[0], 2);
    assert_int_equal(dst[1], 1);
    assert_int_equal(dst[2], 2);

    /* 4x1 -> 2x1 is not a 2x reduction on both axes: bilinear with weights
     * (1024, 1024), i.e. (a + b) / 2 rounded half up. */
    fill_gray(src, 4, (const uint8_t[]){1, 2, 10, 13});
    assert_int_equal(ly_resize_linear_u8c3(src, 4, 1, 12, dst, 2, 1, 6), LY_OK);
    assert_int_equal(dst[0], 2);
    assert_int_equal(dst[3], 12);

    /* Same size copies; strides are honoured. */
    for (int i = 0; i < 24; i++)
        src[i] = (uint8_t)(7 * i);
    assert_int_equal(ly_resize_linear_u8c3(src, 2, 2, 12, dst, 2, 2, 9), LY_OK);
    assert_memory_equal(dst, src, 6);
    assert_memory_equal(dst + 9, src + 12, 6);

    /* A constant image stays constant whatever the scale. */
    memset(src, 77, sizeof src);
    for (int w = 1; w <= 7; w++)
        for (int h = 1; h <= 5; h++) {
            memset(dst, 0, sizeof dst);
            assert_int_equal(ly_resize_linear_u8c3(src, 3, 4, 9, dst, w, h, (size_t)w * 3), LY_OK);
            for (int i = 0; i < w * h * 3; i++)
                assert_int_equal(dst[i], 77);
        }
    assert_int_equal(ly_resize_linear_u8c3(src, 0, 4, 9, dst, 1, 1, 3), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_resize_linear_u8c3(src, 3, 4, 8, dst, 1, 1, 3), LY_E_INVALID_ARGUMENT);
}

/* cv2.resize(src, (dw, dh), interpolation=cv2.INTER_LINEAR) as OpenCV 4.6
 * (Debian python3-opencv) computed it, src[i] = (37 i + 11) mod 256 over the
 * HxWx3 bytes: up, down and mixed scales, odd widths (the row tails). */
typedef struct cv_case {
    int sw, sh, dw, dh;
    uint8_t dst[11 * 7 * 3];
} cv_case;

static const cv_case opencv_cases[] = {
    {5, 4, 7, 3, {18,  55,  92,  82,  118, 155, 149, 125, 162, 197, 21,  58,  124, 100, 137, 143,
                  161, 107, 206, 200, 24,  76,  113, 150, 139, 176, 140, 145, 182, 128, 42,  79,
                  116, 121, 158, 195, 145, 127, 164, 136, 45,  82,  133, 170, 207, 196, 111, 124,
                  202, 87,  93,  99,  136, 173, 178, 215, 100, 148, 185, 100, 65,  102, 139}},
    {9, 7, 4, 5, {95,  112, 149, 101, 112, 143, 63,  100, 137, 89,  93,  130, 136, 135, 114,
                  66,  103, 108, 28,  65,  102, 181, 58,  95,  101, 138, 79,  31,  68,  105,
                  217, 30,  67,  147, 184, 61,  130, 103, 140, 220, 33,  70,  182, 219, 32,
                  111, 148, 185, 191, 68,  105, 185, 177, 35,  147, 184, 176, 153, 114, 150}},
    {6, 3, 11, 7, {11,  48,  85,  46,  83,  120, 107, 144, 181, 167, 99,  137, 228, 20,  57,  160,
                   69,  106, 93,  130, 155, 153, 190, 76,  179, 216, 32,  100, 137, 92,  54,  91,
                   128, 33,  70,  107, 57,  94,  131, 97,  134, 171, 153, 100, 137, 213, 41,  78,
                   164, 73,  110, 113, 115, 142, 154, 176, 83,  170, 207, 49,  110, 147, 90,  76,
                   113, 113, 99,  136, 173, 88,  125, 162, 68,  105, 142, 109, 101, 138, 169, 102,
                   139, 175, 84,  121, 174, 72,  104, 155, 132, 104, 141, 178, 100, 141, 179, 81,
                   142, 179, 70,  165, 202, 239, 119, 156, 193, 40,  77,  114, 65,  102, 139, 126,
                   163, 200, 187, 96,  133, 235, 28,  65,  156, 89,  126, 112, 149, 151, 173, 210,
                   72,  208, 245, 26,  121, 158, 195, 110, 147, 184, 91,  128, 165, 86,  124, 160,
                   87,  124, 161, 143, 107, 143, 196, 89,  126, 177, 90,  127, 163, 105, 122, 164,
                   166, 103, 164, 201, 92,  77,  114, 151, 101, 138, 175, 142, 179, 216, 108, 144,
                   181, 48,  85,  122, 99,  118, 155, 158, 150, 187, 198, 91,  128, 214, 62,  94,
                   155, 122, 134, 121, 158, 158, 63,  100, 137, 98,  135, 172, 159, 196, 233, 115,
                   152, 189, 35,  72,  110, 84,  121, 158, 145, 170, 207, 205, 91,  128, 231, 47,
                   84,  152, 108, 145, 106, 143, 180}},
    {11, 2, 3, 5, {159, 110, 148, 54,  91,  128, 205, 71,  108, 153, 113, 150, 74,  85,  122,
                   199, 82,  102, 130, 124, 161, 153, 62,  99,  175, 127, 79,  106, 134, 171,
                   231, 38,  75,  152, 172, 55,  100, 137, 174, 251, 32,  69,  146, 183, 49}},
};

static void test_resize_matches_opencv(void **state)
{
    (void)state;
    uint8_t src[11 * 7 * 3], dst[11 * 7 * 3];
    for (size_t c = 0; c < sizeof opencv_cases / sizeof opencv_cases[0]; c++) {
        const cv_case *k = &opencv_cases[c];
        for (int i = 0; i < k->sw * k->sh * 3; i++)
            src[i] = (uint8_t)((37 * i + 11) % 256);
        assert_int_equal(ly_resize_linear_u8c3(src, k->sw, k->sh, (size_t)k->sw * 3, dst, k->dw,
                                               k->dh, (size_t)k->dw * 3),
                         LY_OK);
        for (int i = 0; i < k->dw * k->dh * 3; i++)
            if (dst[i] != k->dst[i])
                fail_msg("%dx%d -> %dx%d: byte %d is %d, OpenCV has %d", k->sw, k->sh, k->dw, k->dh,
                         i, dst[i], k->dst[i]);
    }
}

static void test_preprocess_layout(void **state)
{
    (void)state;
    /* 2x1 image, RGB then BGR, into 64x64: pasted top-left (64x32), 114 elsewhere. */
    const uint8_t px[6] = {10, 20, 30, 10, 20, 30};
    float *out = malloc(3 * 64 * 64 * sizeof *out);
    assert_non_null(out);
    ly_letterbox g;
    assert_int_equal(ly_yolo9_preprocess(px, 2, 1, 6, false, 64, 64, out, &g), LY_OK);
    assert_int_equal(g.new_width, 64);
    assert_int_equal(g.new_height, 32);
    assert_true(out[0] == 10.f / 255.f);
    assert_true(out[64 * 64] == 20.f / 255.f);
    assert_true(out[2 * 64 * 64 + 31 * 64 + 63] == 30.f / 255.f);
    assert_true(out[32 * 64] == 114.f / 255.f);
    assert_true(out[2 * 64 * 64 + 63 * 64 + 63] == 114.f / 255.f);
    assert_int_equal(ly_yolo9_preprocess(px, 2, 1, 6, true, 64, 64, out, &g), LY_OK);
    assert_true(out[0] == 30.f / 255.f);
    assert_true(out[2 * 64 * 64] == 10.f / 255.f);
    assert_int_equal(ly_yolo9_preprocess(px, 2, 1, 5, false, 64, 64, out, &g),
                     LY_E_INVALID_ARGUMENT);
    free(out);
}

/* ---- NMS on synthetic predictions -------------------------------------- */

typedef struct synth {
    ly_tensor t;
    int64_t anchors, nc;
} synth;

static void synth_init(synth *s, int64_t nc, int64_t anchors)
{
    int64_t shape[3] = {1, 4 + nc, anchors};
    assert_int_equal(ly_tensor_alloc(&s->t, LY_F32, 3, shape), LY_OK);
    s->anchors = anchors;
    s->nc = nc;
}

static void synth_set(synth *s, int64_t a, float x1, float y1, float x2, float y2, int cls,
                      float score)
{
    float *p = s->t.data;
    p[0 * s->anchors + a] = x1;
    p[1 * s->anchors + a] = y1;
    p[2 * s->anchors + a] = x2;
    p[3 * s->anchors + a] = y2;
    p[(4 + cls) * s->anchors + a] = score;
}

static size_t run_post(synth *s, const ly_predict_options *o, double ratio, int w, int h,
                       ly_box **boxes)
{
    size_t n = 99;
    ly_status st = ly_yolo9_postprocess(&s->t, ratio, w, h, o, boxes, &n);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    return n;
}

static void test_nms_class_aware(void **state)
{
    (void)state;
    synth s;
    synth_init(&s, 3, 4);
    synth_set(&s, 0, 10, 10, 50, 50, 0, 0.9f);
    synth_set(&s, 1, 11, 11, 50, 50, 0, 0.8f); /* same class, IoU ~0.95: suppressed */
    synth_set(&s, 2, 10, 10, 50, 50, 1, 0.7f); /* same box, other class: kept */
    synth_set(&s, 3, 10, 10, 50, 50, 2, 0.3f);
    synth_set(&s, 3, 10, 10, 50, 50, 1, 0.6f); /* multi-label anchor: class 1 suppressed by a2 */
    ly_predict_options o = defaults();
    ly_box *b;
    size_t n = run_post(&s, &o, 1.0, 100, 100, &b);
    assert_int_equal(n, 3);
    assert_int_equal(b[0].cls, 0);
    assert_true(b[0].conf == 0.9f);
    assert_int_equal(b[1].cls, 1);
    assert_true(b[1].conf == 0.7f);
    assert_int_equal(b[2].cls, 2);
    assert_true(b[2].conf == 0.3f);
    free(b);

    /* The class filter follows NMS (model.c, as LibreYOLO's _wrap_results):
     * postprocessing does not read it; of the survivors, class 1's stays. */
    int only[1] = {1};
    o.classes = only;
    o.n_classes = 1;
    n = run_post(&s, &o, 1.0, 100, 100, &b);
    assert_int_equal(n, 3);
    n = ly_predict_keep_classes(b, n, &o);
    assert_int_equal(n, 1);
    assert_int_equal(b[0].cls, 1);
    assert_true(b[0].conf == 0.7f);
    o.n_classes = 0; /* a list of none keeps none */
    assert_int_equal(ly_predict_keep_classes(b, n, &o), 0);
    free(b);
    ly_tensor_free(&s.t);
}

static void test_nms_threshold_is_strict(void **state)
{
    (void)state;
    /* IoU exactly 1/2: [0,0,2,1] and [0,0,1,1] overlap by 1, union 2. */
    synth s;
    synth_init(&s, 1, 2);
    synth_set(&s, 0, 0, 0, 2, 1, 0, 0.9f);
    synth_set(&s, 1, 0, 0, 1, 1, 0, 0.8f);
    ly_predict_options o = defaults();
    ly_box *b;
    o.iou = 0.5f;
    assert_int_equal(run_post(&s, &o, 1.0, 10, 10, &b), 2); /* 0.5 > 0.5 is false */
    free(b);
    o.iou = 0.49f;
    assert_int_equal(run_post(&s, &o, 1.0, 10, 10, &b), 1);
    assert_true(b[0].conf == 0.9f);
    free(b);
    ly_tensor_free(&s.t);
}

static void test_conf_and_max_det(void **state)
{
    (void)state;
    synth s;
    synth_init(&s, 1, 10);
    for (int a = 0; a < 10; a++)
        synth_set(&s, a, (float)(10 * a), 0, (float)(10 * a + 5), 5, 0, 0.1f + 0.05f * (float)a);
    ly_predict_options o = defaults();
    o.conf = 0.1f + 0.05f * 3; /* anchor 3 scores exactly conf: not a candidate */
    ly_box *b;
    size_t n = run_post(&s, &o, 1.0, 200, 200, &b);
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++)
        assert_true(b[i].conf > o.conf);
    assert_true(b[0].conf == 0.1f + 0.05f * 9);
    free(b);
    o.max_det = 3;
    n = run_post(&s, &o, 1.0, 200, 200, &b);
    assert_int_equal(n, 3);
    assert_true(b[0].xyxy[0] == 90.f && b[1].xyxy[0] == 80.f && b[2].xyxy[0] == 70.f);
    free(b);
    ly_tensor_free(&s.t);
}

static void test_clip_scale_and_degenerate(void **state)
{
    (void)state;
    synth s;
    synth_init(&s, 1, 6);
    synth_set(&s, 0, -10, -5, 50, 30, 0, 0.9f);       /* /0.5 then clipped to 60x40 */
    synth_set(&s, 1, 40, 0, 50, 10, 0, 0.8f);         /* right of the image: no width */
    synth_set(&s, 2, 5, 5, 5, 9, 0, 0.7f);            /* zero width */
    synth_set(&s, 3, NAN, 0, 10, 10, 0, 0.7f);        /* not finite */
    synth_set(&s, 4, 0, 0, INFINITY, 10, 0, 0.7f);    /* not finite */
    synth_set(&s, 5, 1, 1.5f, 2.25f, 3.75f, 0, 0.6f); /* scaled exactly */
    ly_predict_options o = defaults();
    ly_box *b;
    size_t n = run_post(&s, &o, 0.5, 60, 40, &b);
    assert_int_equal(n, 2);
    assert_true(b[0].xyxy[0] == 0.f && b[0].xyxy[1] == 0.f);
    assert_true(b[0].xyxy[2] == 60.f && b[0].xyxy[3] == 40.f);
    assert_true(b[1].xyxy[0] == 2.f && b[1].xyxy[1] == 3.f);
    assert_true(b[1].xyxy[2] == 4.5f && b[1].xyxy[3] == 7.5f);
    free(b);

    /* Nothing above conf: no boxes, no allocation needed. */
    o.conf = 0.95f;
    b = (ly_box *)&o; /* must be overwritten */
    assert_int_equal(run_post(&s, &o, 0.5, 60, 40, &b), 0);
    free(b);
    ly_tensor_free(&s.t);
}

/* Above 1000 boxes torchvision runs one NMS per class instead of the offset
 * trick; the survivors must follow the same rules. */
static void test_many_boxes_per_class(void **state)
{
    (void)state;
    enum { GRID = 40, PER = GRID * GRID }; /* 1600 cells, x2 classes + duplicates */
    synth s;
    synth_init(&s, 2, 2 * PER);
    for (int i = 0; i < PER; i++) {
        float x = (float)(10 * (i % GRID)), y = (float)(10 * (i / GRID));
        float score = 0.3f + 0.6f * (float)i / PER;
        synth_set(&s, i, x, y, x + 8, y + 8, i % 2, score);
        /* a slightly shifted copy of lower score in the same class: suppressed */
        synth_set(&s, PER + i, x + 0.5f, y, x + 8.5f, y + 8, i % 2, score - 0.01f);
    }
    ly_predict_options o = defaults();
    o.max_det = 5000;
    ly_box *b;
    size_t n = run_post(&s, &o, 1.0, 1000, 1000, &b);
    assert_int_equal(n, PER);
    for (size_t i = 1; i < n; i++)
        assert_true(b[i].conf <= b[i - 1].conf);
    for (size_t i = 0; i < n; i++)
        assert_true(fmodf(b[i].xyxy[0], 10.f) == 0.f);
    free(b);
    ly_tensor_free(&s.t);
}

/* More than 30000 candidates: only the 30000 best enter NMS. */
static void test_topk_cap(void **state)
{
    (void)state;
    enum { SAME = 30000, EXTRA = 500 };
    synth s;
    synth_init(&s, 1, SAME + EXTRA);
    for (int i = 0; i < SAME; i++)
        synth_set(&s, i, 0, 0, 10, 10, 0, 0.5f + 0.4f * (float)i / SAME);
    for (int i = 0; i < EXTRA; i++) /* disjoint boxes, below all of the above */
        synth_set(&s, SAME + i, (float)(20 * i + 20), 0, (float)(20 * i + 30), 10, 0, 0.3f);
    ly_predict_options o = defaults();
    ly_box *b;
    size_t n = run_post(&s, &o, 1.0, 20000, 20, &b);
    assert_int_equal(n, 1);
    assert_true(b[0].xyxy[2] == 10.f);
    free(b);
    ly_tensor_free(&s.t);
}

static void test_postprocess_errors(void **state)
{
    (void)state;
    synth s;
    synth_init(&s, 1, 4);
    ly_predict_options o = defaults();
    ly_box *b;
    size_t n;
    assert_int_equal(ly_yolo9_postprocess(&s.t, 0.0, 10, 10, &o, &b, &n), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_yolo9_postprocess(&s.t, 1.0, 0, 10, &o, &b, &n), LY_E_INVALID_ARGUMENT);
    s.t.shape[1] = 4;
    assert_int_equal(ly_yolo9_postprocess(&s.t, 1.0, 10, 10, &o, &b, &n), LY_E_SHAPE);
    assert_non_null(strstr(ly_last_error(), "predictions"));
    s.t.shape[1] = 5;
    s.t.dtype = LY_F64;
    assert_int_equal(ly_yolo9_postprocess(&s.t, 1.0, 10, 10, &o, &b, &n), LY_E_DTYPE);
    s.t.dtype = LY_F32;
    ly_tensor_free(&s.t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_postprocess),
        cmocka_unit_test(test_fixture_preprocess),
        cmocka_unit_test(test_letterbox_geometry),
        cmocka_unit_test(test_resize_cases),
        cmocka_unit_test(test_resize_matches_opencv),
        cmocka_unit_test(test_preprocess_layout),
        cmocka_unit_test(test_nms_class_aware),
        cmocka_unit_test(test_nms_threshold_is_strict),
        cmocka_unit_test(test_conf_and_max_det),
        cmocka_unit_test(test_clip_scale_and_degenerate),
        cmocka_unit_test(test_many_boxes_per_class),
        cmocka_unit_test(test_topk_cap),
        cmocka_unit_test(test_postprocess_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
