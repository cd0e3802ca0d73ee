/* SPDX-License-Identifier: MIT */
/*
 * RF-DETR-n against LibreYOLO's own outputs (../shared/testdata/rfdetr;
 * skipped without them): the stages ref_parkour/ keeps (backbone stages 3,
 * 6 and 12, the projector, the query selection) and the outputs of both
 * fixtures from input.npy; LibreYOLO's input.npy from the image; its
 * detections through ly_model_predict; a task this build does not run,
 * refused by name.
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
#include "models/rfdetr/rfdetr.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURE LY_SHARED_DIR "/testdata/rfdetr"
#define CKPT FIXTURE "/LibreRFDETRn_seed0.pt"
#define PARKOUR FIXTURE "/ref_parkour"
#define DOG FIXTURE "/ref_dog"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The network from the checkpoint on ref_dir/input.npy: every named output
 * that the folder keeps within 1e-4 of max|ref| (the query selection
 * exactly). With `stages`, the backbone's and projector's maps too. */
static void network(const char *ref_dir, bool stages, const char *what)
{
    char probe[512];
    snprintf(probe, sizeof probe, "%s/pred_logits.npy", ref_dir);
    if (!exists(CKPT) || !exists(probe)) {
        print_message("skipped: the fixture %s is absent\n", ref_dir);
        skip();
    }
    ly_checkpoint *ck;
    if (ly_checkpoint_open(CKPT, &ck) != LY_OK) fail_msg("%s", ly_last_error());
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value image = LY_GRAPH_NONE, map = LY_GRAPH_NONE,
                   taps[4] = {LY_GRAPH_NONE, LY_GRAPH_NONE, LY_GRAPH_NONE, LY_GRAPH_NONE},
                   logits = LY_GRAPH_NONE, boxes = LY_GRAPH_NONE, selected = LY_GRAPH_NONE;
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &image), LY_OK);
    ly_status st = ly_rfdetr_backbone(g, ck, image, 384, &map, taps);
    if (st == LY_OK) st = ly_rfdetr_head(g, ck, map, 24, 300, 2, &logits, &boxes, &selected);
    if (st != LY_OK) fail_msg("build: %s", ly_last_error());
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
    static const char *const names[] = {"pred_logits",   "pred_boxes",    "enc_topk_ind",
                                        "backbone_out0", "backbone_out1", "backbone_out3",
                                        "projector_out0"};
    ly_graph_value values[] = {logits, boxes, selected, taps[0], taps[1], taps[3], map};
    int n = stages ? 7 : 3;
    for (int i = 0; i < n; i++)
        assert_int_equal(ly_graph_output(g, values[i], names[i]), LY_OK);
    ly_tensor input;
    ly_test_load_npy(ref_dir, "input", &input);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 2) != LY_OK) fail_msg("run: %s", ly_last_error());
    for (int i = 0; i < n; i++) {
        ly_tensor got, want;
        assert_int_equal(ly_graph_get_output(ctx, i, &got, NULL), LY_OK);
        ly_test_load_npy(ref_dir, names[i], &want);
        if (i == 2) { /* the tokens chosen, best first */
            assert_int_equal(want.dtype, LY_I64);
            assert_int_equal(ly_tensor_numel(&got), ly_tensor_numel(&want));
            const int64_t *a = got.data, *b = want.data;
            int64_t differ = 0;
            for (int64_t k = 0; k < ly_tensor_numel(&want); k++)
                differ += a[k] != b[k];
            print_message("%s %s: %lld of %lld tokens differ\n", what, names[i], (long long)differ,
                          (long long)ly_tensor_numel(&want));
            if (differ) fail_msg("the query selection differs from LibreYOLO's");
        } else {
            double e = ly_test_rel_error(&got, &want);
            print_message("%s %s: max |diff| / max |ref| = %.3g\n", what, names[i], e);
            if (!(e <= 1e-4)) fail_msg("%s off by %.3g of max |ref| (gate 1e-4)", names[i], e);
        }
        ly_npy_free(&want);
    }
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
}

static void test_stages_parkour(void **state)
{
    (void)state;
    network(PARKOUR, true, "RF-DETR-n (parkour)");
}

static void test_outputs_dog(void **state)
{
    (void)state;
    network(DOG, false, "RF-DETR-n (dog)");
}

/* LibreYOLO's input.npy from the image, value for value. */
static void test_preprocess(void **state)
{
    (void)state;
    bool codecs = false;
    ly_image_codecs(&codecs);
    static const struct {
        const char *image, *input;
    } cases[] = {{LY_SHARED_DIR "/testdata/images/parkour.jpg", PARKOUR "/input.npy"},
                 {LY_SHARED_DIR "/testdata/images/dog.jpg", DOG "/input.npy"}};
    if (!codecs || !exists(cases[0].input) || !exists(cases[1].input)) {
        print_message("skipped: no image codecs, or the fixtures are absent\n");
        skip();
    }
    for (size_t c = 0; c < 2; c++)
        ly_test_input_matches(cases[c].image, cases[c].input, 384, ly_rfdetr_preprocess);
}

/* ly_model_load (family and size from the metadata) + predict at
 * LibreYOLO's defaults: its detections (detr_util.h). */
static void test_detections(void **state)
{
    (void)state;
    static const struct {
        const char *name, *image, *ref;
    } cases[] = {{"RF-DETR-n (parkour)", LY_SHARED_DIR "/testdata/images/parkour.jpg", PARKOUR},
                 {"RF-DETR-n (dog)", LY_SHARED_DIR "/testdata/images/dog.jpg", DOG}};
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs || !exists(CKPT)) {
        print_message("skipped: no image codecs, or the fixture is absent\n");
        skip();
    }
    ly_model *m;
    if (ly_model_load(CKPT, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_info info;
    assert_int_equal(ly_model_get_info(m, &info), LY_OK);
    assert_string_equal(info.family, "rfdetr");
    assert_string_equal(info.size, "n");
    assert_int_equal(info.imgsz, 384);
    /* the attention (tokens first) counted with its heads and tokens where they are */
    ly_model_stats stats;
    assert_int_equal(ly_model_get_stats(m, 0, &stats), LY_OK);
    print_message("RF-DETR-n at 384: %.2f GFLOP\n", stats.gflop);
    if (!(stats.gflop > 31.7 && stats.gflop < 31.9))
        fail_msg("RF-DETR-n at 384 counts %.3f GFLOP, expected 31.82", stats.gflop);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ly_results *r;
        if (ly_model_predict_file(m, cases[c].image, NULL, &r) != LY_OK)
            fail_msg("%s", ly_last_error());
        ly_test_detections_match(cases[c].name, r, cases[c].ref);
        ly_results_free(r);
    }
    ly_model_free(m);
}

/* The fixture's position table resized to a 32x32 grid (RF-DETR-s's) and to
 * 20x20 (shrinking: the antialiased filter) against PyTorch 1.13's
 * F.interpolate(bicubic, align_corners False, antialias True) of it, at
 * 28 points each (channel, row, column, value; printed by
 * torch.nn.functional.interpolate on Debian's python3-torch). */
static void test_resize_positions(void **state)
{
    (void)state;
    typedef struct {
        int c, y, x;
        float v;
    } point;
    static const point to32[] = {
        {175, 4, 25, -6.770238979e-04f},  {67, 19, 23, 2.283342741e-02f},
        {103, 28, 25, 1.485547423e-02f},  {23, 8, 25, -2.630651463e-03f},
        {366, 10, 26, 4.136429634e-03f},  {167, 6, 4, -5.304174032e-03f},
        {383, 7, 12, 3.308372397e-04f},   {0, 11, 23, 3.174433485e-02f},
        {250, 6, 19, 2.251796238e-02f},   {44, 31, 5, -1.453151926e-02f},
        {312, 24, 23, -1.227111835e-02f}, {112, 27, 29, -1.710673096e-04f},
        {290, 24, 9, -4.830063321e-03f},  {38, 4, 14, 4.560179543e-03f},
        {137, 23, 3, 1.235034782e-02f},   {195, 8, 19, 5.852635205e-02f},
        {257, 0, 16, 3.217502311e-02f},   {374, 31, 29, 1.998873800e-02f},
        {92, 28, 7, 1.295158989e-03f},    {279, 10, 9, 1.426078961e-03f},
        {291, 0, 29, 1.223187987e-02f},   {151, 28, 23, 3.344032168e-02f},
        {224, 21, 4, 1.624048688e-02f},   {67, 27, 27, -1.571946777e-02f},
        {5, 0, 0, 2.167607844e-02f},      {100, 31, 31, 2.238799259e-02f},
        {383, 0, 31, 3.787246998e-03f},   {200, 31, 0, 1.442133635e-02f},
    };
    static const point to20[] = {
        {19, 4, 19, 8.918114938e-03f},    {33, 5, 9, -5.644361023e-03f},
        {383, 2, 19, 1.994937100e-02f},   {21, 3, 11, -6.714132614e-03f},
        {47, 16, 12, 1.584211178e-02f},   {349, 11, 9, -8.460657671e-03f},
        {332, 3, 14, -2.941946033e-03f},  {142, 15, 3, 1.143602747e-02f},
        {304, 4, 11, -1.911234669e-02f},  {250, 11, 15, 1.537408307e-02f},
        {215, 13, 18, -9.039977565e-03f}, {39, 3, 12, -5.114749074e-03f},
        {335, 8, 6, -2.124445885e-02f},   {373, 6, 12, -3.841819474e-03f},
        {135, 17, 10, -9.942320175e-03f}, {197, 4, 9, -5.140499212e-03f},
        {169, 0, 2, 1.854175585e-03f},    {12, 6, 8, -3.327946411e-03f},
        {106, 14, 17, 2.136735059e-02f},  {349, 6, 10, -1.439398061e-02f},
        {17, 5, 15, -2.737132832e-02f},   {49, 12, 9, 8.993757889e-03f},
        {182, 15, 5, -1.192874089e-02f},  {87, 4, 12, 1.027896907e-02f},
        {5, 0, 0, 1.384509075e-02f},      {100, 19, 19, 1.887211204e-02f},
        {383, 0, 19, -1.057549613e-03f},  {200, 19, 0, 2.349680726e-04f},
    };
    if (!exists(CKPT)) {
        print_message("skipped: the fixture " CKPT " is absent\n");
        skip();
    }
    ly_checkpoint *ck;
    if (ly_checkpoint_open(CKPT, &ck) != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor table;
    assert_int_equal(
        ly_checkpoint_find(ck, "backbone.0.encoder.encoder.embeddings.position_embeddings", &table),
        LY_OK);
    assert_int_equal(ly_tensor_numel(&table), 577 * 384);
    const float *patches = (const float *)table.data + 384; /* past the CLS row */
    static const struct {
        int grid;
        const point *points;
        size_t n;
        double tolerance; /* of the table's max |value| (0.096) */
    } cases[] = {{32, to32, sizeof to32 / sizeof to32[0], 0.0},
                 {20, to20, sizeof to20 / sizeof to20[0], 1e-5}};
    for (size_t k = 0; k < 2; k++) {
        int g = cases[k].grid;
        float *out = malloc((size_t)g * g * 384 * sizeof *out);
        assert_non_null(out);
        assert_int_equal(ly_rfdetr_resize_positions(patches, 24, 384, g, g, out), LY_OK);
        double worst = 0;
        for (size_t i = 0; i < cases[k].n; i++) {
            const point *p = &cases[k].points[i];
            worst = fmax(worst, fabs((double)out[((size_t)p->y * g + p->x) * 384 + p->c] - p->v));
        }
        print_message("position table 24x24 -> %dx%d: max |diff| %.3g against PyTorch\n", g, g,
                      worst);
        if (!(worst <= cases[k].tolerance * 0.0961)) fail_msg("%dx%d: off by %.3g", g, g, worst);
        free(out);
    }
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
}

/* A .safetensors file of one f32 tensor `key` [n] with `metadata` members. */
static void write_small(const char *path, const char *metadata, const char *key, int n)
{
    char json[512];
    int len = snprintf(json, sizeof json,
                       "{\"__metadata__\":{%s},\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                       "\"data_offsets\":[0,%d]}}",
                       metadata, key, n, 4 * n);
    while (len % 8)
        json[len++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t le[8] = {0};
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)len >> (8 * i));
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(json, 1, (size_t)len, f), (size_t)len);
    float zero = 0.0f;
    for (int i = 0; i < n; i++)
        assert_int_equal(fwrite(&zero, sizeof zero, 1, f), 1);
    assert_int_equal(fclose(f), 0);
}

/* Segment, pose and obb checkpoints: refused naming the task, by their
 * metadata or, without it, by their heads' keys. */
static void test_other_tasks_refused(void **state)
{
    (void)state;
    static const struct {
        const char *metadata, *key, *task;
    } cases[] = {
        {"\"model_family\":\"rfdetr\",\"task\":\"segment\"", "class_embed.bias", "segment"},
        {"\"model_family\":\"rfdetr\",\"task\":\"pose\"", "class_embed.bias", "pose"},
        {"\"model_family\":\"rfdetr\"", "transformer.angle_embed.layers.2.bias", "obb"},
    };
    char dir[] = "/tmp/ly_rfdetr.XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/LibreRFDETRn-%s.safetensors", dir, cases[i].task);
        write_small(path, cases[i].metadata, cases[i].key, 4);
        ly_model *m = NULL;
        assert_int_equal(ly_model_load(path, NULL, &m), LY_E_UNSUPPORTED);
        const char *msg = ly_last_error();
        char want[64];
        snprintf(want, sizeof want, "task '%s'", cases[i].task);
        if (!strstr(msg, want) || !strstr(msg, path))
            fail_msg("the message does not name the file and %s: %s", want, msg);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_parkour),      cmocka_unit_test(test_outputs_dog),
        cmocka_unit_test(test_preprocess),          cmocka_unit_test(test_detections),
        cmocka_unit_test(test_other_tasks_refused), cmocka_unit_test(test_resize_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
