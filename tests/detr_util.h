/* SPDX-License-Identifier: MIT */
/* What the DETR families' tests share: an output's error against
 * LibreYOLO's, its .npy files, a predict's detections against LibreYOLO's
 * (det_cls.npy, det_conf.npy, det_xyxy.npy of a reference folder).
 * Header-only, for cmocka tests (fail_msg). */
#ifndef LY_TESTS_DETR_UTIL_H
#define LY_TESTS_DETR_UTIL_H

#include "libreyolo/image.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* max |got - want| / max |want| (a non-finite value of got: infinite), the
 * element counts checked. */
static inline double ly_test_rel_error(const ly_tensor *got, const ly_tensor *want)
{
    if (ly_tensor_numel(got) != ly_tensor_numel(want))
        fail_msg("%lld values, LibreYOLO's %lld", (long long)ly_tensor_numel(got),
                 (long long)ly_tensor_numel(want));
    const float *a = got->data, *b = want->data;
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < ly_tensor_numel(want); i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!isfinite(a[i])) d = INFINITY;
        worst = fmax(worst, d);
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? worst / scale : worst;
}

static inline double ly_test_iou(const float *a, const float *b)
{
    double w = fmin(a[2], b[2]) - fmax(a[0], b[0]), h = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    double inter = w > 0 && h > 0 ? w * h : 0;
    double area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return area > 0 ? inter / area : 0;
}

static inline void ly_test_load_npy(const char *dir, const char *name, ly_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (ly_npy_load(path, t) != LY_OK) fail_msg("%s: %s", path, ly_last_error());
}

/* A family's preprocessing of the image at `image`, square `size`. */
typedef ly_status (*ly_test_prep_fn)(const ly_image_view *image, int64_t size, float *input);

/* `prep` of the image at `image` equals LibreYOLO's input.npy at `input`,
 * value for value. */
static inline void ly_test_input_matches(const char *image, const char *input, int64_t size,
                                         ly_test_prep_fn prep)
{
    ly_image im;
    if (ly_image_load(image, &im) != LY_OK) fail_msg("%s", ly_last_error());
    ly_image_view view = {im.pixels, im.width, im.height, (size_t)im.width * 3, LY_PIXELS_RGB};
    ly_tensor want;
    if (ly_npy_load(input, &want) != LY_OK) fail_msg("%s", ly_last_error());
    int64_t n = 3 * size * size;
    if (ly_tensor_numel(&want) != n)
        fail_msg("%s: %lld values, expected %lld", input, (long long)ly_tensor_numel(&want),
                 (long long)n);
    float *got = malloc((size_t)n * sizeof *got);
    if (!got) fail_msg("out of memory");
    if (prep(&view, size, got) != LY_OK) fail_msg("%s: %s", image, ly_last_error());
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += got[i] != ((const float *)want.data)[i];
    if (differ)
        fail_msg("%s: %lld of %lld values differ from LibreYOLO's", image, (long long)differ,
                 (long long)n);
    free(got);
    ly_npy_free(&want);
    ly_image_free(&im);
}

/* Detection i is LibreYOLO's i, or (scores closer than the tolerance may sort
 * either way) an unmatched one of the same class and box near it: class for
 * class, score within 1e-4, IoU >= 0.999, as many as LibreYOLO's. */
static inline void ly_test_detections_match(const char *name, const ly_results *r,
                                            const char *ref_dir)
{
    ly_tensor cls, conf, xyxy;
    ly_test_load_npy(ref_dir, "det_cls", &cls);
    ly_test_load_npy(ref_dir, "det_conf", &conf);
    ly_test_load_npy(ref_dir, "det_xyxy", &xyxy);
    size_t n;
    ly_results_count(r, &n);
    if ((int64_t)n != ly_tensor_numel(&conf))
        fail_msg("%s: %zu detections, LibreYOLO's %lld", name, n,
                 (long long)ly_tensor_numel(&conf));
    double worst_score = 0, worst_iou = 1;
    bool *taken = calloc(n ? n : 1, sizeof *taken);
    if (!taken) fail_msg("out of memory");
    const float *want_conf = conf.data, *want_box = xyxy.data;
    size_t reordered = 0;
    for (size_t i = 0; i < n; i++) {
        ly_detection d;
        ly_results_get(r, i, &d);
        size_t match = n;
        for (size_t k = 0; k < n && match == n; k++) {
            size_t j = k == 0 ? i : (k % 2 ? i + (k + 1) / 2 : i - k / 2);
            if (j >= n || taken[j]) continue;
            double want_cls = cls.dtype == LY_F32 ? ((const float *)cls.data)[j]
                                                  : (double)((const int64_t *)cls.data)[j];
            if (d.cls == (int)want_cls && fabs(d.conf - want_conf[j]) <= 1e-4 &&
                ly_test_iou(d.xyxy, want_box + 4 * j) >= 0.999)
                match = j;
        }
        if (match == n)
            fail_msg("%s detection %zu: class %d score %.7g, not among LibreYOLO's near it", name,
                     i, d.cls, (double)d.conf);
        taken[match] = true;
        reordered += match != i;
        worst_score = fmax(worst_score, fabs(d.conf - want_conf[match]));
        worst_iou = fmin(worst_iou, ly_test_iou(d.xyxy, want_box + 4 * match));
    }
    free(taken);
    if (reordered)
        print_message("%s: %zu detections in another order among near-ties\n", name, reordered);
    print_message("%s: %zu detections as LibreYOLO's, scores within %.2g, IoU >= %.6f\n", name, n,
                  worst_score, worst_iou);
    ly_npy_free(&cls);
    ly_npy_free(&conf);
    ly_npy_free(&xyxy);
}

#endif
