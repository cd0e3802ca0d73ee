/* SPDX-License-Identifier: MIT */
/*
 * RT-DETR and RT-DETRv2 against LibreYOLO's own outputs
 * (../shared/testdata/{rtdetr,rtdetrv2}; skipped without them): the stages
 * the fixtures keep, each built from the checkpoint and run from input.npy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "detr_util.h"
#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/image.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"
#include "models/dfine/dfine.h"
#include "models/rtdetr/rtdetr.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define V2 LY_SHARED_DIR "/testdata/rtdetrv2"
#define V2_CKPT V2 "/LibreRTDETRv2r18_seed0.pt"
#define V2_REF V2 "/ref_parkour"
#define V1 LY_SHARED_DIR "/testdata/rtdetr"
#define V1_CKPT V1 "/LibreRTDETRr18_seed0.pt"
#define V1_REF V1 "/ref_giraffe"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static ly_checkpoint *open_or_skip(const char *checkpoint, const char *ref_dir, const char *needs)
{
    char ref[512];
    snprintf(ref, sizeof ref, "%s/%s.npy", ref_dir, needs);
    if (!exists(checkpoint) || !exists(ref)) {
        print_message("skipped: the fixture %s is absent\n", ref_dir);
        skip();
    }
    ly_checkpoint *ck;
    if (ly_checkpoint_open(checkpoint, &ck) != LY_OK) fail_msg("%s", ly_last_error());
    return ck;
}

/* PResNet-18 from LibreYOLO's input.npy to its backbone_out2 (stride 32). */
static void test_backbone_r18(void **state)
{
    (void)state;
    ly_checkpoint *ck = open_or_skip(V2_CKPT, V2_REF, "backbone_out2");
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value image, outs[3];
    int64_t shapes[3][3];
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &image), LY_OK);
    if (ly_rtdetr_presnet(g, ck, 18, image, 640, 640, outs, shapes) != LY_OK)
        fail_msg("build: %s", ly_last_error());
    assert_int_equal(shapes[0][0], 128);
    assert_int_equal(shapes[1][1], 40);
    assert_int_equal(shapes[2][0], 512);
    assert_int_equal(ly_graph_output(g, outs[2], "backbone_out2"), LY_OK);
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
    ly_tensor input, want, got;
    ly_test_load_npy(V2_REF, "input", &input);
    ly_test_load_npy(V2_REF, "backbone_out2", &want);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_get_output(ctx, 0, &got, NULL), LY_OK);
    double e = ly_test_rel_error(&got, &want);
    print_message("RT-DETRv2-r18 backbone_out2: max |diff| / max |ref| = %.3g\n", e);
    if (!(e <= 1e-4)) fail_msg("backbone_out2 off by %.3g of max |ref| (gate 1e-4)", e);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
    ly_npy_free(&want);
}

/* PResNet-18 + the hybrid encoder from input.npy to encoder_out2. */
static void test_encoder_r18(void **state)
{
    (void)state;
    ly_checkpoint *ck = open_or_skip(V2_CKPT, V2_REF, "encoder_out2");
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value image, feats[3], outs[3];
    int64_t shapes[3][3];
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &image), LY_OK);
    if (ly_rtdetr_presnet(g, ck, 18, image, 640, 640, feats, shapes) != LY_OK ||
        ly_dfine_hybrid_encoder(g, ck, 3, feats, (const int64_t(*)[3])shapes, 2, 8, outs) != LY_OK)
        fail_msg("build: %s", ly_last_error());
    assert_int_equal(ly_graph_output(g, outs[2], "encoder_out2"), LY_OK);
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
    ly_tensor input, want, got;
    ly_test_load_npy(V2_REF, "input", &input);
    ly_test_load_npy(V2_REF, "encoder_out2", &want);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_get_output(ctx, 0, &got, NULL), LY_OK);
    double e = ly_test_rel_error(&got, &want);
    print_message("RT-DETRv2-r18 encoder_out2 from input.npy: max |diff| / max |ref| = %.3g\n", e);
    if (!(e <= 1e-4)) fail_msg("encoder_out2 off by %.3g of max |ref| (gate 1e-4)", e);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
    ly_npy_free(&want);
}

/* Output `got` [1, Q, n] against LibreYOLO's `want`, row j of want matched to
 * the row of `got` that selected the same token (enc_topk_ind): near-tied
 * encoder scores may order a pair of queries the other way. */
static double matched_error(const ly_tensor *got, const int64_t *ours, const ly_tensor *want,
                            const int64_t *theirs)
{
    assert_int_equal(got->ndim, 3);
    assert_int_equal(got->shape[1], want->shape[1]);
    assert_int_equal(got->shape[2], want->shape[2]);
    int64_t q = want->shape[1], n = want->shape[2];
    const float *a = got->data, *b = want->data;
    double diff = 0, mag = 0;
    for (int64_t j = 0; j < q; j++) {
        int64_t r = 0;
        while (r < q && ours[r] != theirs[j])
            r++;
        if (r == q)
            fail_msg("token %lld (query %lld) was not selected", (long long)theirs[j],
                     (long long)j);
        for (int64_t k = 0; k < n; k++) {
            diff = fmax(diff, fabs((double)a[r * n + k] - (double)b[j * n + k]));
            mag = fmax(mag, fabs((double)b[j * n + k]));
        }
    }
    return mag > 0 ? diff / mag : diff;
}

/* The whole network from input.npy to pred_logits / pred_boxes. */
static void whole_network(const char *checkpoint, const char *ref_dir, bool v1, const char *what)
{
    ly_checkpoint *ck = open_or_skip(checkpoint, ref_dir, "pred_logits");
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value image, feats[3], maps[3];
    ly_graph_value logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE, selected = LY_GRAPH_NONE;
    int64_t shapes[3][3], hw[3][2];
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &image), LY_OK);
    ly_status st = ly_rtdetr_presnet(g, ck, 18, image, 640, 640, feats, shapes);
    if (st == LY_OK)
        st = ly_dfine_hybrid_encoder(g, ck, 3, feats, (const int64_t(*)[3])shapes, 2, 8, maps);
    for (int l = 0; l < 3; l++) {
        hw[l][0] = shapes[l][1];
        hw[l][1] = shapes[l][2];
    }
    ly_rtdetr_head_config cfg = {
        .queries = 300, .heads = 8, .eval_idx = -1, .v1 = v1, .selected = &selected};
    if (st == LY_OK)
        st = ly_rtdetr_head(g, ck, 3, maps, (const int64_t(*)[2])hw, &cfg, &logits, &boxes);
    if (st != LY_OK) fail_msg("build: %s", ly_last_error());
    assert_int_equal(ly_graph_output(g, logits, "pred_logits"), LY_OK);
    assert_int_equal(ly_graph_output(g, boxes, "pred_boxes"), LY_OK);
    assert_int_equal(ly_graph_output(g, selected, "enc_topk_ind"), LY_OK);
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
    ly_tensor input, want[2], theirs, ours, got;
    ly_test_load_npy(ref_dir, "input", &input);
    ly_test_load_npy(ref_dir, "pred_logits", &want[0]);
    ly_test_load_npy(ref_dir, "pred_boxes", &want[1]);
    ly_test_load_npy(ref_dir, "enc_topk_ind", &theirs);
    assert_int_equal(theirs.dtype, LY_I64);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_get_output(ctx, 2, &ours, NULL), LY_OK);
    static const double gates[2] = {2e-4, 1e-4};
    static const char *const names[2] = {"pred_logits", "pred_boxes"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ly_graph_get_output(ctx, i, &got, NULL), LY_OK);
        double e = matched_error(&got, ours.data, &want[i], theirs.data);
        print_message("%s %s: max |diff| / max |ref| = %.3g\n", what, names[i], e);
        if (!(e <= gates[i]))
            fail_msg("%s off by %.3g of max |ref| (gate %g)", names[i], e, gates[i]);
        ly_npy_free(&want[i]);
    }
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
    ly_npy_free(&theirs);
}

static void test_network_v2_r18(void **state)
{
    (void)state;
    whole_network(V2_CKPT, V2_REF, false, "RT-DETRv2-r18");
}

static void test_network_v1_r18(void **state)
{
    (void)state;
    whole_network(V1_CKPT, V1_REF, true, "RT-DETR-r18");
}

static ly_status square_preprocess(const ly_image_view *image, int64_t size, float *input)
{
    return ly_rtdetr_preprocess(image, size, size, input);
}

/* LibreYOLO's input.npy from the image, value for value. */
static void test_preprocess(void **state)
{
    (void)state;
    bool codecs = false;
    ly_image_codecs(&codecs);
    static const struct {
        const char *image, *input;
    } cases[] = {{LY_SHARED_DIR "/testdata/images/parkour.jpg", V2_REF "/input.npy"},
                 {LY_SHARED_DIR "/testdata/images/giraffe.jpg", V1_REF "/input.npy"}};
    if (!codecs || !exists(cases[0].input) || !exists(cases[1].input)) {
        print_message("skipped: no image codecs, or the fixtures are absent\n");
        skip();
    }
    for (size_t c = 0; c < 2; c++)
        ly_test_input_matches(cases[c].image, cases[c].input, 640, square_preprocess);
}

/* ly_model_load (the family by the checkpoint's metadata) + predict at
 * LibreYOLO's defaults: its detections (detr_util.h). */
static void test_detections(void **state)
{
    (void)state;
    static const struct {
        const char *name, *checkpoint, *image, *ref, *family;
    } cases[] = {
        {"RT-DETRv2-r18", V2_CKPT, LY_SHARED_DIR "/testdata/images/parkour.jpg", V2_REF,
         "rtdetrv2"},
        {"RT-DETR-r18", V1_CKPT, LY_SHARED_DIR "/testdata/images/giraffe.jpg", V1_REF, "rtdetr"}};
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build reads no images\n");
        skip();
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char probe[512];
        snprintf(probe, sizeof probe, "%s/det_xyxy.npy", cases[c].ref);
        if (!exists(cases[c].checkpoint) || !exists(probe)) {
            print_message("skipped %s: its fixture is absent\n", cases[c].name);
            continue;
        }
        ly_model *m;
        if (ly_model_load(cases[c].checkpoint, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
        ly_model_info info;
        assert_int_equal(ly_model_get_info(m, &info), LY_OK);
        assert_string_equal(info.family, cases[c].family);
        assert_string_equal(info.size, "r18");
        ly_results *r;
        if (ly_model_predict_file(m, cases[c].image, NULL, &r) != LY_OK)
            fail_msg("%s", ly_last_error());
        ly_test_detections_match(cases[c].name, r, cases[c].ref);
        ly_results_free(r);
        ly_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backbone_r18),   cmocka_unit_test(test_encoder_r18),
        cmocka_unit_test(test_network_v2_r18), cmocka_unit_test(test_network_v1_r18),
        cmocka_unit_test(test_preprocess),     cmocka_unit_test(test_detections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
