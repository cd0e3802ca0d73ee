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

#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/io.h"
#include "models/dfine/dfine.h"
#include "models/rtdetr/rtdetr.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#define V2 LY_SHARED_DIR "/testdata/rtdetrv2"
#define V2_CKPT V2 "/LibreRTDETRv2r18_seed0.pt"
#define V2_REF V2 "/ref_parkour"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void load(const char *dir, const char *name, ly_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (ly_npy_load(path, t) != LY_OK) fail_msg("%s: %s", path, ly_last_error());
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

/* max |got - want| / max |want|, shapes checked. */
static double rel_error(const ly_tensor *got, const ly_tensor *want)
{
    assert_int_equal(got->ndim, want->ndim);
    for (int d = 0; d < got->ndim; d++)
        assert_int_equal(got->shape[d], want->shape[d]);
    const float *a = got->data, *b = want->data;
    double diff = 0, mag = 0;
    for (int64_t i = 0; i < ly_tensor_numel(want); i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        mag = fmax(mag, fabs((double)b[i]));
    }
    return mag > 0 ? diff / mag : diff;
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
    load(V2_REF, "input", &input);
    load(V2_REF, "backbone_out2", &want);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_get_output(ctx, 0, &got, NULL), LY_OK);
    double e = rel_error(&got, &want);
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
    load(V2_REF, "input", &input);
    load(V2_REF, "encoder_out2", &want);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    assert_int_equal(ly_graph_get_output(ctx, 0, &got, NULL), LY_OK);
    double e = rel_error(&got, &want);
    print_message("RT-DETRv2-r18 encoder_out2 from input.npy: max |diff| / max |ref| = %.3g\n", e);
    if (!(e <= 1e-4)) fail_msg("encoder_out2 off by %.3g of max |ref| (gate 1e-4)", e);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
    ly_npy_free(&want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backbone_r18),
        cmocka_unit_test(test_encoder_r18),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
