/* SPDX-License-Identifier: MIT */
/*
 * Batching (ly_model_predict_batch, ly_model_run on [N, 3, H, W]): where a
 * model's network takes a batch (LibreYOLO9t, its int8 checkpoint, D-FINE-n,
 * DEIMv2-atto, RT-DETR-r18, ViT-Ti), image i's raw outputs from a batch are
 * within 1e-5 of max|ref| of its run alone (bit-identical on AVX-512, where
 * every kernel runs each image of a batch as it runs that image alone; on
 * AVX2 oneDNN's sgemm sums a linear's row in an order that depends on the
 * call's row count) and
 * its detections are the same (class, score within 1e-5, IoU >= 0.999, in
 * any order among ties); models without a batch give the one-by-one results
 * through the same call; bad arguments are refused naming the image.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "libreyolo/fetch.h"
#include "libreyolo/image.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define YOLO9 LY_SHARED_DIR "/testdata/yolo9/LibreYOLO9t_seed0.pt"
#define YOLO9_INT8 LY_SHARED_DIR "/testdata/yolo9-quant/int8/LibreYOLO9t_seed0-final.pt"
#define DFINE LY_SHARED_DIR "/testdata/dfine/LibreDFINEn_seed0.pt"
#define RTDETR LY_SHARED_DIR "/testdata/rtdetr/LibreRTDETRr18_seed0.pt"
#define DEIMV2 LY_SHARED_DIR "/testdata/deimv2/LibreDEIMv2atto_seed0.pt"
#define VIT LY_SHARED_DIR "/testdata/vit/LibreViTti_seed0.pt"
#define IMAGES LY_SHARED_DIR "/testdata/images"

enum { N = 4 };

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static bool verbose(void)
{
    const char *v = getenv("LY_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

typedef struct images {
    ly_image im[N];
    ly_image_view view[N];
} images;

/* Stripes and a gradient of w x h, for builds that cannot read JPEG files. */
static void pattern(ly_image *im, int w, int h, int seed)
{
    im->width = w, im->height = h;
    im->pixels = malloc((size_t)w * (size_t)h * 3);
    assert_non_null(im->pixels);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im->pixels + ((size_t)y * (size_t)w + (size_t)x) * 3;
            p[0] = (uint8_t)(((x / (8 + seed)) % 2) * 200 + y % 50);
            p[1] = (uint8_t)(x * 255 / w);
            p[2] = (uint8_t)(((x + y) / (16 + seed)) % 2 * 255);
        }
}

/* The three fixture photos (three patterns where JPEG cannot be read) and
 * the first again, mirrored: four sizes and contents in one batch. */
static bool load_images(images *s)
{
    static const char *const names[3] = {"dog.jpg", "giraffe.jpg", "parkour.jpg"};
    static const int sizes[3][2] = {{768, 576}, {500, 500}, {1280, 852}};
    memset(s, 0, sizeof *s);
    bool codecs = false;
    ly_image_codecs(&codecs);
    for (int i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof path, IMAGES "/%s", names[i]);
        if (!codecs)
            pattern(&s->im[i], sizes[i][0], sizes[i][1], i);
        else if (ly_image_load(path, &s->im[i]) != LY_OK)
            return false;
    }
    ly_image *m = &s->im[3], *src = &s->im[0];
    m->width = src->width, m->height = src->height;
    m->pixels = malloc((size_t)m->width * (size_t)m->height * 3);
    assert_non_null(m->pixels);
    for (int y = 0; y < m->height; y++)
        for (int x = 0; x < m->width; x++)
            memcpy(m->pixels + ((size_t)y * (size_t)m->width + (size_t)x) * 3,
                   src->pixels + ((size_t)y * (size_t)m->width + (size_t)(m->width - 1 - x)) * 3,
                   3);
    for (int i = 0; i < N; i++)
        s->view[i] = (ly_image_view){s->im[i].pixels, s->im[i].width, s->im[i].height,
                                     (size_t)s->im[i].width * 3, LY_PIXELS_RGB};
    return true;
}

static void free_images(images *s)
{
    for (int i = 0; i < N; i++)
        ly_image_free(&s->im[i]);
}

static double iou(const float *a, const float *b)
{
    double w = fmin(a[2], b[2]) - fmax(a[0], b[0]), h = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (w <= 0 || h <= 0) return 0;
    double inter = w * h, ua = (a[2] - a[0]) * (a[3] - a[1]), ub = (b[2] - b[0]) * (b[3] - b[1]);
    return inter / (ua + ub - inter);
}

/* Every detection of `want` has one in `got` of its class, score within
 * 1e-5 and IoU >= 0.999, and the counts agree. */
static void expect_same_detections(const ly_results *got, const ly_results *want, int image)
{
    size_t ng, nw;
    assert_int_equal(ly_results_count(got, &ng), LY_OK);
    assert_int_equal(ly_results_count(want, &nw), LY_OK);
    if (ng != nw) fail_msg("image %d: %zu detections in the batch, %zu alone", image, ng, nw);
    bool *used = calloc(ng ? ng : 1, sizeof *used);
    assert_non_null(used);
    for (size_t i = 0; i < nw; i++) {
        ly_detection w;
        assert_int_equal(ly_results_get(want, i, &w), LY_OK);
        bool found = false;
        for (size_t j = 0; j < ng && !found; j++) {
            ly_detection g;
            assert_int_equal(ly_results_get(got, j, &g), LY_OK);
            if (used[j] || g.cls != w.cls || fabsf(g.conf - w.conf) > 1e-5f ||
                iou(g.xyxy, w.xyxy) < 0.999)
                continue;
            used[j] = found = true;
        }
        if (!found)
            fail_msg("image %d: detection %zu (class %d, %.6f) has no match in the batch", image, i,
                     w.cls, (double)w.conf);
    }
    free(used);
}

typedef struct outputs {
    int count;
    ly_tensor t[8];
    char name[8][32];
} outputs;

static void keep_output(const char *name, const ly_tensor *t, void *user)
{
    outputs *o = user;
    assert_true(o->count < 8);
    ly_tensor *c = &o->t[o->count];
    assert_int_equal(ly_tensor_alloc(c, t->dtype, t->ndim, t->shape), LY_OK);
    memcpy(c->data, t->data, (size_t)ly_tensor_numel(t) * ly_dtype_size(t->dtype));
    snprintf(o->name[o->count++], sizeof o->name[0], "%s", name);
}

static void free_outputs(outputs *o)
{
    for (int i = 0; i < o->count; i++)
        ly_tensor_free(&o->t[i]);
    o->count = 0;
}

/* Raw outputs: a batch of N preprocessed-like inputs against each alone. */
static void expect_run_matches(ly_model *m, int64_t size, const char *what)
{
    ly_tensor batch;
    int64_t shape[4] = {N, 3, size, size};
    assert_int_equal(ly_tensor_alloc(&batch, LY_F32, 4, shape), LY_OK);
    float *x = batch.data;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < ly_tensor_numel(&batch); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) & 0xffffff) / (float)0x1000000;
    }
    outputs all = {0};
    if (ly_model_run(m, &batch, keep_output, &all) != LY_OK)
        fail_msg("%s: batch run: %s", what, ly_last_error());
    int64_t plane = 3 * size * size;
    double worst = 0;
    for (int b = 0; b < N; b++) {
        ly_tensor one = {
            .data = x + b * plane, .dtype = LY_F32, .ndim = 4, .shape = {1, 3, size, size}};
        outputs alone = {0};
        assert_int_equal(ly_model_run(m, &one, keep_output, &alone), LY_OK);
        assert_int_equal(alone.count, all.count);
        for (int k = 0; k < alone.count; k++) {
            const ly_tensor *a = &alone.t[k], *t = &all.t[k];
            assert_string_equal(alone.name[k], all.name[k]);
            assert_int_equal(t->shape[0], N);
            int64_t n = ly_tensor_numel(a);
            assert_int_equal(ly_tensor_numel(t), N * n);
            if (a->dtype != LY_F32) {
                assert_memory_equal((const char *)t->data +
                                        (size_t)(b * n) * ly_dtype_size(a->dtype),
                                    a->data, (size_t)n * ly_dtype_size(a->dtype));
                continue;
            }
            const float *ref = a->data, *got = (const float *)t->data + b * n;
            double peak = 0, diff = 0;
            for (int64_t i = 0; i < n; i++) {
                peak = fmax(peak, fabs(ref[i]));
                diff = fmax(diff, fabs((double)got[i] - ref[i]));
            }
            double rel = peak > 0 ? diff / peak : diff;
            worst = fmax(worst, rel);
            if (rel > 1e-5)
                fail_msg("%s: image %d output %s: %.3g of max|ref| from its run alone", what, b,
                         alone.name[k], rel);
        }
        free_outputs(&alone);
    }
    if (verbose())
        print_message("%s: batch of %d at %lld: outputs within %.3g of max|ref|\n", what, N,
                      (long long)size, worst);
    free_outputs(&all);
    ly_tensor_free(&batch);
}

static void expect_batch_predicts_alone(const char *path, const char *what, bool batched,
                                        int64_t run_size, bool fused)
{
    if (!exists(path) || !exists(IMAGES "/dog.jpg")) {
        print_message("skipped: the fixture %s is absent\n", path);
        skip();
    }
    ly_model *m;
    if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s: %s", what, ly_last_error());
    if (fused) assert_int_equal(ly_model_set_fused_attention(m, true, NULL), LY_OK);
    ly_model_info info;
    assert_int_equal(ly_model_get_info(m, &info), LY_OK);
    assert_int_equal(info.batched, batched);
    images s;
    assert_true(load_images(&s));
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.conf = 0.05f;
    ly_results *got[N], *want[N];
    if (ly_model_predict_batch(m, s.view, N, &o, got) != LY_OK)
        fail_msg("%s: %s", what, ly_last_error());
    for (int i = 0; i < N; i++) {
        assert_int_equal(ly_model_predict_image(m, &s.view[i], &o, &want[i]), LY_OK);
        expect_same_detections(got[i], want[i], i);
        const float *pg, *pw;
        size_t ng, nw;
        if (ly_results_probs(want[i], &pw, &nw) == LY_OK) { /* a classifier */
            assert_int_equal(ly_results_probs(got[i], &pg, &ng), LY_OK);
            assert_int_equal(ng, nw);
            /* Bit for bit where the linears' GEMM sums a row alone (oneDNN's
             * brgemm, AVX-512); its AVX2 sgemm sums a row in an order that
             * depends on how many rows the call has. */
            float worst = 0;
            for (size_t c = 0; c < nw; c++)
                worst = fmaxf(worst, fabsf(pg[c] - pw[c]));
            if (worst > 1e-5f)
                fail_msg("%s: image %d: probabilities %.3g from its run alone", what, i,
                         (double)worst);
        }
        int h, w;
        assert_int_equal(ly_results_orig_shape(got[i], &h, &w), LY_OK);
        assert_int_equal(h, s.im[i].height);
        assert_int_equal(w, s.im[i].width);
        ly_results_free(got[i]);
        ly_results_free(want[i]);
    }
    if (batched) expect_run_matches(m, run_size, what);

    /* refusals name the image; nothing is left in out[] */
    ly_image_view bad[2] = {s.view[0], s.view[1]};
    bad[1].stride = 1;
    ly_results *r[2] = {(ly_results *)1, (ly_results *)1};
    assert_int_equal(ly_model_predict_batch(m, bad, 2, &o, r), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "image 1"));
    assert_null(r[0]);
    assert_null(r[1]);
    assert_int_equal(ly_model_predict_batch(m, s.view, 0, &o, r), LY_OK);
    ly_results *many[LY_PREDICT_MAX_BATCH + 1];
    assert_int_equal(ly_model_predict_batch(m, s.view, LY_PREDICT_MAX_BATCH + 1, &o, many),
                     LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "expected 1..256"));
    assert_null(many[LY_PREDICT_MAX_BATCH]);
    assert_int_equal(ly_model_predict_batch(m, NULL, 2, &o, r), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_model_predict_batch(m, s.view, 2, &o, NULL), LY_E_INVALID_ARGUMENT);
    if (!batched) {
        ly_tensor two;
        int64_t shape[4] = {2, 3, run_size, run_size};
        assert_int_equal(ly_tensor_alloc(&two, LY_F32, 4, shape), LY_OK);
        assert_int_equal(ly_model_run(m, &two, keep_output, NULL), LY_E_SHAPE);
        assert_non_null(strstr(ly_last_error(), "expected [1, 3"));
        ly_tensor_free(&two);
    }
    free_images(&s);
    ly_model_free(m);
}

static void test_yolo9_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(YOLO9, "LibreYOLO9t", true, 640, false);
}

static void test_yolo9_int8_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(YOLO9_INT8, "LibreYOLO9t int8", true, 320, false);
}

static void test_dfine_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(DFINE, "D-FINE-n", true, 640, false);
}

static void test_deimv2_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(DEIMV2, "DEIMv2-atto", true, 320, false);
}

/* Its ResNet's 3x3s run on oneDNN's Winograd, whose tiles oneDNN picks by
 * batch size: image by image in a batch, or its top-K selection would flip. */
static void test_rtdetr_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(RTDETR, "RT-DETR-r18", true, 640, false);
}

/* A classifier: its probabilities within 1e-5 (bit for bit on AVX-512),
 * with the manual attention (LibreYOLO's default) and the fused one. */
static void test_vit_batch(void **state)
{
    (void)state;
    expect_batch_predicts_alone(VIT, "LibreViT-Ti", true, 224, false);
    expect_batch_predicts_alone(VIT, "LibreViT-Ti fused", true, 224, true);
}

/* NanoDet's TF.js graph bakes batch 1 into its reshapes: one by one, the
 * same results, and ly_model_run refuses a batch. */
static void test_nanodet_one_by_one(void **state)
{
    (void)state;
    char dir[4096];
    bool cached = false;
    if (ly_model_cached("nanodet", dir, sizeof dir, &cached) != LY_OK || !cached) {
        print_message("skipped: no NanoDet model (run `libreyolo fetch nanodet`)\n");
        skip();
    }
    expect_batch_predicts_alone(dir, "NanoDet-g", false, 416, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yolo9_batch),        cmocka_unit_test(test_yolo9_int8_batch),
        cmocka_unit_test(test_dfine_batch),        cmocka_unit_test(test_deimv2_batch),
        cmocka_unit_test(test_rtdetr_batch),       cmocka_unit_test(test_vit_batch),
        cmocka_unit_test(test_nanodet_one_by_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
