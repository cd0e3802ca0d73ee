/* SPDX-License-Identifier: MIT */
/*
 * SwinIR (src/models/swinir, the restore task in src/models/restore.c) on
 * LibreYOLO's own outputs (../shared/testdata/swinir: SwinIR-s, seed 0): the
 * network within 1e-4 of max|ref| at 64x64 (the checkpoint's stored masks)
 * and 70x52 (reflect padding to 72x56); predict's restored image against
 * LibreYOLO's untiled and tiled (tile 60, tile_pad 16) ones, and through a
 * saved PNG, within the bar (at most 0.05% of the values, each off by
 * one); the options; automatic tiling; checkpoints refused by name.
 * Skipped without ../shared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "checkpoint_builder.h"
#include "detr_util.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/export.h"
#include "libreyolo/image.h"
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"
#include "libreyolo/model.h"
#include "models/swinir/swinir.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURES LY_SHARED_DIR "/testdata/swinir"
#define CKPT FIXTURES "/LibreSwinIRs-restore_seed0.pt"

#if defined(LY_SANITIZED) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static ly_model *model;

static void count_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                       void *user)
{
    (void)slot, (void)impl, (void)why_not;
    if (eligible) ++*(int *)user;
}

/* A build whose convolutions have only the reference (portable): slow, so the
 * larger runs are left to the default and sanitizer builds. */
static bool reference_only(void)
{
    int conv = 0;
    ly_kernel_list("conv2d", count_impl, &conv);
    return conv <= 1;
}

static int setup(void **state)
{
    if (ly_test_scratch_setup(state) != 0) return -1;
    struct stat st;
    if (stat(CKPT, &st) != 0) return 0;
    ly_model_options mo = {.threads = 0};
    return ly_model_load(CKPT, &mo, &model) == LY_OK ? 0 : -1;
}

static int teardown(void **state)
{
    ly_model_free(model);
    return ly_test_scratch_teardown(state);
}

#define NEED_FIXTURE()                                                                             \
    do {                                                                                           \
        if (!model) {                                                                              \
            print_message("skipped: the fixture " CKPT " is absent\n");                            \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static void test_info(void **state)
{
    (void)state;
    NEED_FIXTURE();
    ly_model_info info;
    assert_int_equal(ly_model_get_info(model, &info), LY_OK);
    assert_string_equal(info.family, "swinir");
    assert_string_equal(info.size, "s");
    assert_string_equal(info.task, "restore");
    ly_model_stats stats;
    assert_int_equal(ly_model_get_stats(model, 0, &stats), LY_OK);
    assert_int_equal(stats.file_parameters, 929628); /* LibreYOLO's count */
    /* no module carries fused_attn: set_fused_attention counts 0 (as LibreYOLO) */
    int count = -1;
    assert_int_equal(ly_model_set_fused_attention(model, true, &count), LY_OK);
    assert_int_equal(count, 0);
}

typedef struct kept {
    ly_tensor t;
} kept;

static void keep(const char *name, const ly_tensor *t, void *user)
{
    (void)name;
    kept *k = user;
    assert_int_equal(ly_tensor_alloc(&k->t, LY_F32, t->ndim, t->shape), LY_OK);
    memcpy(k->t.data, t->data, (size_t)ly_tensor_numel(t) * sizeof(float));
}

/* The network on LibreYOLO's preprocessed input against its default (SDPA)
 * and manual outputs. */
static void network_matches(const char *ref)
{
    char sub[200];
    snprintf(sub, sizeof sub, FIXTURES "/%s", ref);
    ly_tensor input, want, manual;
    ly_test_load_npy(sub, "input", &input);
    ly_test_load_npy(sub, "output", &want);
    ly_test_load_npy(sub, "output_manual", &manual);
    kept got = {0};
    if (ly_model_run(model, &input, keep, &got) != LY_OK) fail_msg("%s", ly_last_error());
    double e = ly_test_rel_error(&got.t, &want), em = ly_test_rel_error(&got.t, &manual);
    print_message("SwinIR-s %s: output %.3g of max|ref| (manual form %.3g)\n", ref, e, em);
    if (!(e <= 1e-4)) fail_msg("%s: output off by %.3g of max|ref| (gate 1e-4)", ref, e);
    ly_tensor_free(&got.t);
    ly_npy_free(&input);
    ly_npy_free(&want);
    ly_npy_free(&manual);
}

/* The window blocks run a few windows at a time (slabs, which only large
 * maps take by default): the same bits as whole on AVX-512, within 1e-5
 * of max|ref| on AVX2. */
static void slabs_match(const char *ref)
{
    char sub[200];
    snprintf(sub, sizeof sub, FIXTURES "/%s", ref);
    ly_tensor input;
    ly_test_load_npy(sub, "input", &input);
    kept whole = {0}, slabs = {0};
    if (ly_model_run(model, &input, keep, &whole) != LY_OK) fail_msg("%s", ly_last_error());
    setenv("LIBREYOLO_SLAB_BYTES", "16384", 1);
    ly_model *small_slabs;
    ly_model_options mo = {.threads = 0};
    assert_int_equal(ly_model_load(CKPT, &mo, &small_slabs), LY_OK);
    ly_status st = ly_model_run(small_slabs, &input, keep, &slabs);
    unsetenv("LIBREYOLO_SLAB_BYTES");
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    /* Bit for bit where every linear sums a row alone (oneDNN's brgemm,
     * AVX-512); its AVX2 sgemm's order depends on the call's row count. */
    double e = ly_test_rel_error(&slabs.t, &whole.t);
    if (memcmp(whole.t.data, slabs.t.data, (size_t)ly_tensor_numel(&whole.t) * sizeof(float)))
        print_message("SwinIR-s %s: slabs %.3g of max|ref| from whole\n", ref, e);
    if (!(e <= 1e-5)) fail_msg("%s: slabs off by %.3g of max|ref| from whole (gate 1e-5)", ref, e);
    ly_model_free(small_slabs);
    ly_tensor_free(&whole.t);
    ly_tensor_free(&slabs.t);
    ly_npy_free(&input);
}

static void test_network(void **state)
{
    (void)state;
    NEED_FIXTURE();
    network_matches("ref_dog_64x64"); /* the stored masks' size */
    network_matches("ref_dog_70x52"); /* reflect-padded to 72x56 */
    slabs_match("ref_dog_70x52");
}

/* The pieces: the shallow conv, each RSTB (six shifted-window blocks: window
 * attention with the relative position bias and the shift mask, and the
 * conv), the upsampler's input, against LibreYOLO's manual-form stages. */
static void test_stages(void **state)
{
    (void)state;
    NEED_FIXTURE();
    ly_checkpoint *ck;
    if (ly_checkpoint_open(CKPT, &ck) != LY_OK) fail_msg("%s", ly_last_error());
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value taps[11];
    int n = 0;
    if (ly_swinir_build_taps(g, ck, 64, 64, taps, &n) != LY_OK) fail_msg("%s", ly_last_error());
    ly_checkpoint_close(ck);
    assert_int_equal(n, 6);
    static const char *const names[6] = {"manual_conv_first", "manual_rstb0", "manual_rstb1",
                                         "manual_rstb2",      "manual_rstb3", "manual_upsample_in"};
    for (int i = 0; i < n; i++)
        assert_int_equal(ly_graph_output(g, taps[i], names[i]), LY_OK);
    ly_tensor input;
    ly_test_load_npy(FIXTURES "/ref_dog_64x64", "input", &input);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 0) != LY_OK) fail_msg("%s", ly_last_error());
    for (int i = 0; i < n; i++) {
        ly_tensor got, want;
        assert_int_equal(ly_graph_get_output(ctx, 1 + i, &got, NULL), LY_OK); /* 0: the image */
        ly_test_load_npy(FIXTURES "/ref_dog_64x64", names[i], &want);
        assert_int_equal(ly_tensor_numel(&got), ly_tensor_numel(&want));
        double e = ly_test_rel_error(&got, &want);
        print_message("SwinIR-s %s: %.3g of max|ref|\n", names[i], e);
        if (!(e <= 1e-4)) fail_msg("%s off by %.3g of max|ref| (gate 1e-4)", names[i], e);
        ly_npy_free(&want);
    }
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_npy_free(&input);
}

/* The restored image against LibreYOLO's (uint8 HWC): at most 0.05% of the
 * values differ, by one each (rounding at .5 on float noise). */
static void restored_matches(const char *what, const uint8_t *got, int w, int h,
                             const uint8_t *want, int want_w, int want_h)
{
    assert_int_equal(w, want_w);
    assert_int_equal(h, want_h);
    size_t n = (size_t)w * h * 3, differ = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)got[i] - (int)want[i]);
        if (d > 1) fail_msg("%s: value %zu off by %d", what, i, d);
        differ += d != 0;
    }
    print_message("SwinIR-s %s: %zu of %zu values off by one (%.4f%%)\n", what, differ, n,
                  100.0 * (double)differ / (double)n);
    if ((double)differ > 0.0005 * (double)n) fail_msg("%s: %zu values differ", what, differ);
}

static void predict_matches(const char *ref, int tile)
{
    char image[512], path[512];
    snprintf(image, sizeof image, FIXTURES "/%s/image.png", ref);
    ly_predict_options o;
    ly_predict_options_init(&o);
    if (tile) o.tile = tile, o.tile_pad = 16;
    ly_results *r;
    if (ly_model_predict_file(model, image, &o, &r) != LY_OK) fail_msg("%s", ly_last_error());
    const char *task;
    assert_int_equal(ly_results_task(r, &task), LY_OK);
    assert_string_equal(task, "restore");
    size_t count = 9;
    assert_int_equal(ly_results_count(r, &count), LY_OK);
    assert_int_equal(count, 0);
    ly_image_view v;
    int scale = 0;
    assert_int_equal(ly_results_restored(r, &v, &scale), LY_OK);
    assert_int_equal(scale, 4);
    int oh, ow;
    assert_int_equal(ly_results_orig_shape(r, &oh, &ow), LY_OK);
    assert_int_equal(v.width, 4 * ow);
    assert_int_equal(v.height, 4 * oh);

    ly_tensor want;
    char sub[200];
    snprintf(sub, sizeof sub, FIXTURES "/%s", ref);
    ly_test_load_npy(sub, "restored", &want);
    assert_int_equal(want.dtype, LY_U8);
    char what[128];
    snprintf(what, sizeof what, "%s restored", ref);
    restored_matches(what, v.pixels, v.width, v.height, want.data, (int)want.shape[1],
                     (int)want.shape[0]);

    /* what predict(save=True, output_file_format="png") writes: the same
     * bytes through our PNG writer and reader, against LibreYOLO's file */
    char saved[512];
    ly_image out = {(uint8_t *)v.pixels, v.width, v.height}, back, theirs;
    assert_int_equal(
        ly_image_save(ly_test_scratch_path("restored.png", saved, sizeof saved), &out, 90), LY_OK);
    assert_int_equal(ly_image_load(saved, &back), LY_OK);
    assert_memory_equal(back.pixels, v.pixels, (size_t)v.width * v.height * 3);
    snprintf(path, sizeof path, FIXTURES "/%s/restored.png", ref);
    assert_int_equal(ly_image_load(path, &theirs), LY_OK);
    snprintf(what, sizeof what, "%s restored.png", ref);
    restored_matches(what, back.pixels, back.width, back.height, theirs.pixels, theirs.width,
                     theirs.height);
    ly_image_free(&back);
    ly_image_free(&theirs);
    ly_npy_free(&want);
    ly_results_free(r);
}

static void test_predict(void **state)
{
    (void)state;
    NEED_FIXTURE();
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build reads no image files (PNG)\n");
        skip();
    }
    predict_matches("ref_dog_64x64", 0);
    predict_matches("ref_dog_70x52", 0);
    predict_matches("ref_dog_162x118_tile60", 60); /* 6 calls on 76x{76,92,64} */
}

/* A synthetic photo (smooth gradients and blocks). */
static uint8_t *photo(int w, int h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                p[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)((x * (c + 1) + y * (3 - c) + ((x / 17 + y / 23) % 2) * 60) & 255);
    return p;
}

static uint8_t *restore(const ly_image_view *v, int tile, int tile_pad, int *w, int *h)
{
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.tile = tile;
    o.tile_pad = tile_pad;
    ly_results *r;
    if (ly_model_predict_image(model, v, &o, &r) != LY_OK) fail_msg("%s", ly_last_error());
    ly_image_view out;
    assert_int_equal(ly_results_restored(r, &out, NULL), LY_OK);
    uint8_t *copy = malloc((size_t)out.width * out.height * 3);
    assert_non_null(copy);
    memcpy(copy, out.pixels, (size_t)out.width * out.height * 3);
    *w = out.width, *h = out.height;
    ly_results_free(r);
    return copy;
}

/* Past 256x256 an untiled call tiles itself at 64 (tile_pad as given): the
 * same bytes as asking for it; one tile as large as the image is the
 * untiled run; BGR views are read as such. */
static void test_tiling(void **state)
{
    (void)state;
    NEED_FIXTURE();
    int w = 300, h = 220, aw, ah, bw, bh;
    uint8_t *p = photo(w, h);
    if (!reference_only() && !SANITIZED) { /* 2 x 20 tiles: slow on the references alone */
        ly_image_view v = {p, w, h, (size_t)w * 3, LY_PIXELS_RGB};
        uint8_t *automatic = restore(&v, 0, 16, &aw, &ah);
        uint8_t *asked = restore(&v, 64, 16, &bw, &bh);
        assert_int_equal(aw, 4 * w);
        assert_int_equal(ah, 4 * h);
        assert_memory_equal(automatic, asked, (size_t)aw * ah * 3);
        free(automatic);
        free(asked);
    }

    int sw = 70, sh = 44;
    uint8_t *small = photo(sw, sh);
    ly_image_view sv = {small, sw, sh, (size_t)sw * 3, LY_PIXELS_RGB};
    uint8_t *whole = restore(&sv, 0, 16, &aw, &ah);
    uint8_t *one_tile = restore(&sv, 72, 16, &bw, &bh);
    assert_memory_equal(whole, one_tile, (size_t)aw * ah * 3);
    for (size_t i = 0; i < (size_t)sw * sh; i++) { /* as BGR */
        uint8_t t = small[3 * i];
        small[3 * i] = small[3 * i + 2], small[3 * i + 2] = t;
    }
    sv.format = LY_PIXELS_BGR;
    uint8_t *bgr = restore(&sv, 0, 16, &bw, &bh);
    assert_memory_equal(whole, bgr, (size_t)aw * ah * 3);
    free(whole);
    free(one_tile);
    free(bgr);
    free(small);
    free(p);
}

static void test_options(void **state)
{
    (void)state;
    ly_predict_options o;
    ly_predict_options_init(&o);
    o.tile = -1;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "tile -1"));
    ly_predict_options_init(&o);
    o.tile_pad = -2;
    assert_int_equal(ly_predict_options_check(NULL, &o), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "tile_pad -2"));
    if (!model) return;
    ly_predict_options_init(&o);
    o.tile = 64;
    o.imgsz = 100; /* ignored by restorers, as LibreYOLO's input_size */
    assert_int_equal(ly_predict_options_check(model, &o), LY_OK);
    /* results of another task say so */
    ly_results *r;
    uint8_t px[8 * 8 * 3] = {0};
    ly_image_view v = {px, 8, 8, 24, LY_PIXELS_RGB};
    assert_int_equal(ly_model_predict_image(model, &v, NULL, &r), LY_OK);
    const float *probs;
    size_t n;
    assert_int_equal(ly_results_probs(r, &probs, &n), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "restore"));
    ly_results_free(r);
}

/* The .pte at the fixed 64x64 canvas (the manual expression captured):
 * our runtime runs it to LibreYOLO's numbers; an image of another size is
 * padded to the canvas, a larger one tiled to fit it. */
static void test_export(void **state)
{
    (void)state;
    NEED_FIXTURE();
    char pte[512], sidecar[600];
    ly_export_options o;
    ly_export_options_init(&o);
    o.output_path = ly_test_scratch_path("swinir.pte", pte, sizeof pte);
    o.model_path = CKPT;
    if (ly_model_export(model, &o, NULL, 0) != LY_OK) fail_msg("%s", ly_last_error());
    snprintf(sidecar, sizeof sidecar, "%s.json", pte);
    FILE *f = fopen(sidecar, "r");
    assert_non_null(f);
    char text[4096] = {0};
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(text, "\"task\": \"restore\""));
    assert_non_null(strstr(text, "\"model_family\": \"swinir\""));

    ly_model *program;
    ly_status st = ly_model_load(pte, NULL, &program);
    if (st == LY_E_UNSUPPORTED) { /* a build without XNNPACK runs no delegated program */
        print_message("skipped: %s\n", ly_last_error());
        skip();
    }
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor input, want;
    ly_test_load_npy(FIXTURES "/ref_dog_64x64", "input", &input);
    ly_test_load_npy(FIXTURES "/ref_dog_64x64", "output", &want);
    kept got = {0};
    if (ly_model_run(program, &input, keep, &got) != LY_OK) fail_msg("%s", ly_last_error());
    double e = ly_test_rel_error(&got.t, &want);
    print_message("SwinIR-s .pte (64x64 canvas) in our runtime: %.3g of max|ref|\n", e);
    if (!(e <= 1e-4)) fail_msg(".pte output off by %.3g of max|ref| (gate 1e-4)", e);

    ly_predict_options po;
    ly_predict_options_init(&po);
    ly_results *r;
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        ly_model_free(program);
        ly_npy_free(&input);
        ly_npy_free(&want);
        ly_tensor_free(&got.t);
        return;
    }
    if (ly_model_predict_file(program, FIXTURES "/ref_dog_64x64/image.png", &po, &r) != LY_OK)
        fail_msg("%s", ly_last_error());
    ly_image_view v;
    assert_int_equal(ly_results_restored(r, &v, NULL), LY_OK);
    ly_tensor restored;
    ly_test_load_npy(FIXTURES "/ref_dog_64x64", "restored", &restored);
    restored_matches("ref_dog_64x64 restored by the .pte", v.pixels, v.width, v.height,
                     restored.data, 256, 256);
    ly_results_free(r);
    /* a tile and its context must fit the canvas */
    po.tile = 48;
    po.tile_pad = 16;
    assert_int_equal(ly_model_predict_file(program, FIXTURES "/ref_dog_70x52/image.png", &po, &r),
                     LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "at most tile 32"));
    ly_tensor_free(&got.t);
    ly_npy_free(&input);
    ly_npy_free(&want);
    ly_npy_free(&restored);
    ly_model_free(program);
}

/* ---- refused checkpoints -------------------------------------------------- */

/* The fixture's tensors as a .safetensors file, with `meta` as its metadata,
 * one tensor renamed / dropped / added, or one element changed. */
typedef struct edit {
    const char *meta;  /* JSON object members, "" for none */
    const char *drop;  /* a key left out */
    const char *extra; /* a key added ([1] f32) */
    const char *poke;  /* a key whose first element changes */
} edit;

static void write_edited(const edit *e, const char *path)
{
    ly_checkpoint *ck;
    assert_int_equal(ly_checkpoint_open(CKPT, &ck), LY_OK);
    size_t count;
    assert_int_equal(ly_checkpoint_tensor_count(ck, &count), LY_OK);
    bbuf json = {0}, data = {0};
    b_str(&json, "{\"__metadata__\": {");
    b_str(&json, e->meta);
    b_str(&json, "}");
    for (size_t i = 0; i <= count; i++) {
        const char *name;
        ly_tensor t;
        float one = 1.0f;
        if (i == count) {
            if (!e->extra) break;
            name = e->extra;
            t = (ly_tensor){.data = &one, .dtype = LY_F32, .ndim = 1, .shape = {1}};
        } else {
            assert_int_equal(ly_checkpoint_tensor_at(ck, i, &name, &t), LY_OK);
        }
        if (e->drop && strcmp(name, e->drop) == 0) continue;
        size_t at = data.n;
        st_entry(&json, &data, name, &t);
        if (e->poke && strcmp(name, e->poke) == 0) {
            if (t.dtype == LY_I64)
                ((int64_t *)(data.p + at))[0] += 1;
            else
                ((float *)(data.p + at))[0] += 1.0f;
        }
    }
    st_finish(&json, &data, path);
    ly_checkpoint_close(ck);
}

static void refused(const edit *e, const char *expect)
{
    char path[512];
    ly_test_scratch_path("edited.safetensors", path, sizeof path);
    write_edited(e, path);
    ly_model *m = NULL;
    ly_status st = ly_model_load(path, NULL, &m);
    if (st == LY_OK) {
        ly_model_free(m);
        fail_msg("loaded; expected a refusal naming '%s'", expect);
    }
    if (!strstr(ly_last_error(), expect) || !strstr(ly_last_error(), path))
        fail_msg("the refusal does not name '%s' and the file: %s", expect, ly_last_error());
    print_message("refused: %s\n", ly_last_error());
}

static void test_refused(void **state)
{
    (void)state;
    NEED_FIXTURE();
    /* the same tensors load as .safetensors with LibreYOLO's metadata */
    char path[512];
    ly_test_scratch_path("edited.safetensors", path, sizeof path);
    edit same = {.meta = "\"model_family\": \"swinir\", \"size\": \"s\", \"task\": \"restore\""};
    write_edited(&same, path);
    ly_model *m;
    if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_free(m);

    edit other_size = {.meta = "\"model_family\": \"swinir\", \"size\": \"m\""};
    refused(&other_size, "size");
    edit index = {.meta = "",
                  .poke = "layers.2.residual_group.blocks.3.attn.relative_position_index"};
    refused(&index, "layers.2.residual_group.blocks.3.attn.relative_position_index");
    edit missing = {.meta = "", .drop = "layers.1.residual_group.blocks.4.attn.qkv.bias"};
    refused(&missing, "layers.1.residual_group.blocks.4.attn.qkv.bias");
    edit unexpected = {.meta = "", .extra = "layers.0.residual_group.blocks.0.attn.surprise"};
    refused(&unexpected, "layers.0.residual_group.blocks.0.attn.surprise");
    edit no_layer = {.meta = "\"model_family\": \"swinir\"",
                     .drop = "layers.3.residual_group.blocks.0.norm1.weight"};
    refused(&no_layer, "layers.3.residual_group.blocks.0.norm1.weight");

    /* a stored mask that differs from the formula is LibreYOLO's at 64x64 */
    edit mask = {.meta = "", .poke = "layers.0.residual_group.blocks.1.attn_mask"};
    write_edited(&mask, path);
    if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor input;
    ly_test_load_npy(FIXTURES "/ref_dog_64x64", "input", &input);
    kept poked = {0}, plain = {0};
    assert_int_equal(ly_model_run(m, &input, keep, &poked), LY_OK);
    assert_int_equal(ly_model_run(model, &input, keep, &plain), LY_OK);
    assert_true(
        memcmp(poked.t.data, plain.t.data, (size_t)ly_tensor_numel(&plain.t) * sizeof(float)) != 0);
    ly_tensor_free(&poked.t);
    ly_tensor_free(&plain.t);
    ly_npy_free(&input);
    ly_model_free(m);
}

/* A checkpoint of size `size` from LibreYOLO's key list (every key by name,
 * dtype and shape): small pseudo-random weights, the relative position
 * index by its formula, zero masks. */
static void synthesise(const char *size, const char *path)
{
    char keys[256], line[512];
    snprintf(keys, sizeof keys, FIXTURES "/keys/keys_LibreSwinIR%s.txt", size);
    FILE *f = fopen(keys, "r");
    assert_non_null(f);
    bbuf json = {0}, data = {0};
    char meta[160];
    snprintf(meta, sizeof meta,
             "{\"__metadata__\": {\"model_family\": \"swinir\", \"size\": \"%s\", "
             "\"task\": \"restore\"}",
             size);
    b_str(&json, meta);
    uint64_t seed = 11;
    while (fgets(line, sizeof line, f)) {
        char name[256], dtype[16], dims[64];
        if (sscanf(line, "%255s %15s %63s", name, dtype, dims) != 3) continue;
        ly_tensor t = {.ndim = 0};
        for (char *p = dims; *p; p++) {
            t.shape[t.ndim++] = strtoll(p, &p, 10);
            if (*p != 'x') break;
        }
        t.dtype = strcmp(dtype, "int64") == 0 ? LY_I64 : LY_F32;
        int64_t n = ly_tensor_numel(&t);
        if (n < 1 || n > ((int64_t)1 << 28)) fail_msg("%s: %s: bad shape %s", keys, name, dims);
        t.data = calloc((size_t)n, 8);
        assert_non_null(t.data);
        if (t.dtype == LY_I64) {
            int64_t *idx = t.data; /* relative_position_index: the formula */
            for (int64_t i = 0; i < 64; i++)
                for (int64_t j = 0; j < 64; j++)
                    idx[i * 64 + j] = (i / 8 - j / 8 + 7) * 15 + (i % 8 - j % 8 + 7);
        } else if (!strstr(name, "attn_mask")) {
            float *w = t.data;
            for (int64_t i = 0; i < n; i++)
                w[i] =
                    (float)((ly_test_splitmix64(&seed) >> 40) & 0xffff) / 65536.0f * 0.04f - 0.02f;
        }
        st_entry(&json, &data, name, &t);
        free(t.data);
    }
    fclose(f);
    st_finish(&json, &data, path);
}

/* m and l (nearest+conv upsampling, l's 3conv) from LibreYOLO's key lists,
 * once, in the default build only: recognised, LibreYOLO's parameter counts,
 * a x4 image out of a 16x24 input. */
static void test_sizes(void **state)
{
    (void)state;
    if (!model || SANITIZED || reference_only()) {
        print_message("skipped: SwinIR m and l build in the default build only, with " FIXTURES
                      "\n");
        skip();
    }
    static const struct {
        const char *size;
        int64_t parameters;
    } sizes[] = {{"m", 11715559}, {"l", 28013059}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char path[512];
        ly_test_scratch_path("synth.safetensors", path, sizeof path);
        synthesise(sizes[i].size, path);
        ly_model *m;
        if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
        ly_model_info info;
        assert_int_equal(ly_model_get_info(m, &info), LY_OK);
        assert_string_equal(info.family, "swinir");
        assert_string_equal(info.size, sizes[i].size);
        ly_model_stats stats;
        assert_int_equal(ly_model_get_stats(m, 0, &stats), LY_OK);
        assert_int_equal(stats.file_parameters, sizes[i].parameters);
        ly_tensor input;
        int64_t shape[4] = {1, 3, 16, 24};
        assert_int_equal(ly_tensor_alloc(&input, LY_F32, 4, shape), LY_OK);
        for (int64_t k = 0; k < ly_tensor_numel(&input); k++)
            ((float *)input.data)[k] = (float)(k % 17) / 17.0f;
        kept got = {0};
        if (ly_model_run(m, &input, keep, &got) != LY_OK) fail_msg("%s", ly_last_error());
        assert_int_equal(got.t.shape[2], 64);
        assert_int_equal(got.t.shape[3], 96);
        for (int64_t k = 0; k < ly_tensor_numel(&got.t); k++)
            assert_true(isfinite(((float *)got.t.data)[k]));
        print_message("SwinIR-%s: %lld parameters (LibreYOLO's), a 16x24 input restored to "
                      "64x96\n",
                      sizes[i].size, (long long)stats.file_parameters);
        ly_tensor_free(&got.t);
        ly_tensor_free(&input);
        ly_model_free(m);
        unlink(path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),   cmocka_unit_test(test_network),
        cmocka_unit_test(test_stages), cmocka_unit_test(test_predict),
        cmocka_unit_test(test_tiling), cmocka_unit_test(test_options),
        cmocka_unit_test(test_export), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
