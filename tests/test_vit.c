/* SPDX-License-Identifier: MIT */
/*
 * ViT-Ti from LibreYOLO's checkpoint (../shared/testdata/vit): the eval
 * transform bit for bit (input.npy: PIL bicubic, centre crop, mean/std 0.5),
 * logits within 1e-4 of max |ref| against LibreYOLO's manual attention with
 * the fused-attention flag on and off, and byte-identical to each other; the
 * flag's 12 modules and what each setting runs (sdpa vs matmul + softmax
 * nodes), and top-5 as predict.json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

#include "graph/graph.h"
#include "libreyolo/export.h"
#include "libreyolo/image.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"
#include "models/recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/executorch/et_runtime.h"
#include "test_export_util.h"

#define FIXTURE LY_SHARED_DIR "/testdata/vit"
#define CHECKPOINT FIXTURE "/LibreViTti_seed0.pt"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static ly_model *load_model(void)
{
    if (!exists(CHECKPOINT)) {
        print_message("skipped: the fixture " FIXTURE " is absent\n");
        skip();
    }
    ly_model *m;
    if (ly_model_load(CHECKPOINT, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
    return m;
}

static void load_ref(const char *image, const char *name, ly_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURE "/ref_%s/%s.npy", image, name);
    if (ly_npy_load(path, t) != LY_OK) fail_msg("%s: %s", path, ly_last_error());
}

static double rel_error(const float *x, const float *y, int64_t n)
{
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        worst = fmax(worst, isfinite(x[i]) ? d : INFINITY);
        scale = fmax(scale, fabs((double)y[i]));
    }
    return worst / scale;
}

static void keep_logits(const char *name, const ly_tensor *t, void *user)
{
    if (strcmp(name, "logits") != 0) return;
    ly_tensor *out = user;
    assert_int_equal(ly_tensor_alloc(out, LY_F32, t->ndim, t->shape), LY_OK);
    memcpy(out->data, t->data, (size_t)ly_tensor_numel(t) * sizeof(float));
}

/* Nodes of each op in the model's graph: what a forward calls. */
static void count_ops(const ly_model *m, int *sdpa, int *softmax, int *matmul)
{
    const ly_model_desc *d = ly_model_desc_of(m);
    ly_graph *g = d->engine->graph(d->engine_data);
    *sdpa = *softmax = *matmul = 0;
    for (int i = 0; i < ly_graph_node_count(g); i++) {
        ly_graph_node_info n;
        assert_int_equal(ly_graph_node_at(g, i, &n), LY_OK);
        *sdpa += n.op == LY_OP_SDPA;
        *softmax += n.op == LY_OP_SOFTMAX;
        *matmul += n.op == LY_OP_MATMUL;
    }
}

static const char *const images[] = {"dog", "giraffe", "parkour"};

static void test_preprocess(void **state)
{
    (void)state;
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs || !exists(FIXTURE "/ref_dog/input.npy")) {
        print_message("skipped: no image codecs, or the fixture is absent\n");
        skip();
    }
    ly_model *m = load_model();
    const ly_model_desc *d = ly_model_desc_of(m);
    for (size_t c = 0; c < sizeof images / sizeof images[0]; c++) {
        char path[512];
        snprintf(path, sizeof path, LY_SHARED_DIR "/testdata/images/%s.jpg", images[c]);
        ly_image im;
        if (ly_image_load(path, &im) != LY_OK) fail_msg("%s", ly_last_error());
        ly_image_view view = {im.pixels, im.width, im.height, (size_t)im.width * 3, LY_PIXELS_RGB};
        ly_tensor want;
        load_ref(images[c], "input", &want);
        int64_t n = 3 * 224 * 224;
        assert_int_equal(ly_tensor_numel(&want), n);
        float *got = malloc((size_t)n * sizeof *got);
        assert_non_null(got);
        ly_prep prep;
        assert_int_equal(d->recipe->preprocess(d, &view, 224, 224, got, &prep), LY_OK);
        int64_t differ = 0;
        for (int64_t i = 0; i < n; i++)
            differ += got[i] != ((const float *)want.data)[i];
        print_message("ViT eval transform of %s (%dx%d): %lld of %lld values differ\n", images[c],
                      im.width, im.height, (long long)differ, (long long)n);
        if (differ) fail_msg("%s: the input differs from LibreYOLO's", images[c]);
        free(got);
        ly_npy_free(&want);
        ly_image_free(&im);
    }
    ly_model_free(m);
}

/* Both flag settings from input.npy against logits_manual.npy, and the
 * nodes each runs. */
static void test_logits_and_flag(void **state)
{
    (void)state;
    ly_model *m = load_model();
    int count = -1, sdpa, softmax, matmul;
    ly_tensor got[2][3];
    for (int fused = 1; fused >= 0; fused--) {
        assert_int_equal(ly_model_set_fused_attention(m, fused, &count), LY_OK);
        assert_int_equal(count, 12);
        count_ops(m, &sdpa, &softmax, &matmul);
        print_message("fused_attn %s: %d sdpa, %d softmax, %d matmul nodes per forward\n",
                      fused ? "on" : "off", sdpa, softmax, matmul);
        assert_int_equal(sdpa, fused ? 12 : 0);
        assert_int_equal(softmax, fused ? 0 : 12);
        assert_int_equal(matmul, fused ? 0 : 24);
        for (size_t c = 0; c < sizeof images / sizeof images[0]; c++) {
            ly_tensor input, want;
            load_ref(images[c], "input", &input);
            load_ref(images[c], "logits_manual", &want);
            got[fused][c] = (ly_tensor){0};
            if (ly_model_run(m, &input, keep_logits, &got[fused][c]) != LY_OK)
                fail_msg("%s", ly_last_error());
            assert_int_equal(ly_tensor_numel(&got[fused][c]), ly_tensor_numel(&want));
            double e = rel_error(got[fused][c].data, want.data, ly_tensor_numel(&want));
            print_message("ViT-Ti %s, fused_attn %s: logits %.3g of max |ref| (manual)\n",
                          images[c], fused ? "on" : "off", e);
            if (!(e <= 1e-4)) fail_msg("logits off by %.3g (gate 1e-4)", e);
            ly_npy_free(&input);
            ly_npy_free(&want);
        }
    }
    for (size_t c = 0; c < sizeof images / sizeof images[0]; c++) {
        int64_t n = ly_tensor_numel(&got[0][c]), differ = 0;
        for (int64_t i = 0; i < n; i++)
            differ += ((const float *)got[0][c].data)[i] != ((const float *)got[1][c].data)[i];
        print_message("ViT-Ti %s: fused and manual logits differ in %lld of %lld\n", images[c],
                      (long long)differ, (long long)n);
        /* the manual expression's matmul and softmax follow the sdpa reference's
         * order, and the fused provider reproduces that reference */
        if (differ) fail_msg("%s: fused and manual logits are not byte-identical", images[c]);
        ly_tensor_free(&got[0][c]);
        ly_tensor_free(&got[1][c]);
    }
    ly_model_free(m);
}

typedef struct kept {
    const char *names[16];
    ly_tensor t[16];
    int n;
} kept;

static void keep_named(const char *name, const ly_tensor *t, void *user)
{
    kept *k = user;
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->names[i], name) == 0 && !k->t[i].data) {
            assert_int_equal(ly_tensor_alloc(&k->t[i], LY_F32, t->ndim, t->shape), LY_OK);
            memcpy(k->t[i].data, t->data, (size_t)ly_tensor_numel(t) * sizeof(float));
        }
}

/* The last node named `name` (a reshape and a permute may share one) made
 * an output too. */
static void expose(ly_graph *g, const char *name)
{
    int found = -1;
    for (int i = 0; i < ly_graph_node_count(g); i++) {
        ly_graph_node_info n;
        assert_int_equal(ly_graph_node_at(g, i, &n), LY_OK);
        if (strcmp(n.name, name) == 0) found = i;
    }
    if (found < 0) fail_msg("no node '%s'", name);
    ly_graph_node_info n;
    assert_int_equal(ly_graph_node_at(g, found, &n), LY_OK);
    assert_int_equal(ly_graph_output(g, n.outputs[0], name), LY_OK);
}

/* The manual path stage by stage against LibreYOLO's manual_*.npy: the patch
 * tokens, every block's output, the final norm. */
static void test_intermediates(void **state)
{
    (void)state;
    ly_model *m = load_model();
    int count;
    assert_int_equal(ly_model_set_fused_attention(m, false, &count), LY_OK);
    const ly_model_desc *d = ly_model_desc_of(m);
    ly_graph *g = d->engine->graph(d->engine_data);
    kept k = {.n = 14};
    static char block_names[12][32];
    k.names[0] = "patch_embed.tokens";
    for (int i = 0; i < 12; i++) {
        snprintf(block_names[i], sizeof block_names[i], "blocks.%d.mlp.fc2",
                 i); /* + the residual */
        k.names[1 + i] = block_names[i];
    }
    k.names[13] = "norm";
    for (int i = 0; i < k.n; i++)
        expose(g, k.names[i]);
    ly_tensor input;
    load_ref("dog", "input", &input);
    if (ly_model_run(m, &input, keep_named, &k) != LY_OK) fail_msg("%s", ly_last_error());
    double worst = 0;
    for (int i = 0; i < k.n; i++) {
        char ref[32];
        if (i == 0)
            snprintf(ref, sizeof ref, "manual_patch_embed");
        else if (i == 13)
            snprintf(ref, sizeof ref, "manual_final_norm");
        else
            snprintf(ref, sizeof ref, "manual_block%02d", i - 1);
        ly_tensor want;
        load_ref("dog", ref, &want);
        assert_non_null(k.t[i].data);
        assert_int_equal(ly_tensor_numel(&k.t[i]), ly_tensor_numel(&want));
        double e = rel_error(k.t[i].data, want.data, ly_tensor_numel(&want));
        worst = fmax(worst, e);
        if (!(e <= 1e-4)) fail_msg("%s off by %.3g of max |ref|", ref, e);
        ly_npy_free(&want);
        ly_tensor_free(&k.t[i]);
    }
    print_message("ViT-Ti dog, manual path: patch tokens, 12 blocks and the final norm within "
                  "%.3g of max |ref|\n",
                  worst);
    ly_npy_free(&input);
    ly_model_free(m);
}

/* predict() on the fixture images at the defaults: top-5 ids as
 * predict.json, probabilities within 1e-5. */
static void test_top5(void **state)
{
    (void)state;
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build reads no images\n");
        skip();
    }
    ly_model *m = load_model();
    for (size_t c = 0; c < sizeof images / sizeof images[0]; c++) {
        char path[512];
        snprintf(path, sizeof path, LY_SHARED_DIR "/testdata/images/%s.jpg", images[c]);
        ly_results *r;
        if (ly_model_predict_file(m, path, NULL, &r) != LY_OK) fail_msg("%s", ly_last_error());
        const char *task;
        assert_int_equal(ly_results_task(r, &task), LY_OK);
        assert_string_equal(task, "classify");
        ly_class_prob top[5];
        size_t n;
        assert_int_equal(ly_results_top(r, 5, top, &n), LY_OK);
        assert_int_equal(n, 5);
        snprintf(path, sizeof path, FIXTURE "/ref_%s/predict.json", images[c]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        char text[8192];
        size_t len = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[len] = '\0';
        const char *p = strstr(text, "\"top5\"");
        assert_non_null(p);
        p = strchr(p, '[');
        for (size_t i = 0; i < 5; i++) {
            int id = (int)strtol(p + 1, (char **)&p, 10);
            if (top[i].cls != id)
                fail_msg("%s: top-5[%zu] is %d, LibreYOLO's %d", images[c], i, top[i].cls, id);
        }
        print_message("ViT-Ti %s: top-5 as LibreYOLO's (%d %s %.4f, ...)\n", images[c], top[0].cls,
                      top[0].name, top[0].conf);
        ly_results_free(r);
    }
    ly_model_free(m);
}

/* ---- checkpoints synthesised from LibreYOLO's key list --------------------- */

/* keys_LibreViTti.txt as a .safetensors file (values random, norm weights
 * near 1; metadata model_family/size when `family` is given). */
static bool write_synthetic(const char *path, const char *family, const char *size)
{
    FILE *in = fopen(FIXTURE "/keys_LibreViTti.txt", "r");
    if (!in) return false;
    char names[256][128];
    int64_t numel[256];
    char shapes[256][64];
    int n = 0;
    char line[512];
    while (n < 256 && fgets(line, sizeof line, in)) {
        char dtype[16], shape[64];
        if (sscanf(line, "%127s %15s %63s", names[n], dtype, shape) != 3) continue;
        int64_t count = 1;
        size_t at = 0;
        for (char *p = shape; *p;) {
            long long v = strtoll(p, &p, 10);
            count *= v;
            at +=
                (size_t)snprintf(shapes[n] + at, sizeof shapes[n] - at, "%s%lld", at ? "," : "", v);
            if (*p == 'x') p++;
        }
        numel[n++] = count;
    }
    fclose(in);
    char *json = malloc(65536);
    assert_non_null(json);
    size_t at = (size_t)snprintf(json, 65536, "{");
    if (family)
        at += (size_t)snprintf(json + at, 65536 - at,
                               "\"__metadata__\":{\"model_family\":\"%s\",\"size\":\"%s\"},",
                               family, size);
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        at += (size_t)snprintf(json + at, 65536 - at,
                               "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%lld,"
                               "%lld]}",
                               i ? "," : "", names[i], shapes[i], (long long)offset,
                               (long long)(offset + 4 * numel[i]));
        offset += 4 * numel[i];
    }
    at += (size_t)snprintf(json + at, 65536 - at, "}");
    while (at % 8)
        json[at++] = ' ';
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)at >> (8 * i));
    fwrite(le, 1, 8, out);
    fwrite(json, 1, at, out);
    free(json);
    uint64_t seed = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; i++) {
        bool unit = strstr(names[i], "norm") && strstr(names[i], ".weight");
        float scale = 1.0f / sqrtf((float)(numel[i] > 4096 ? 192 : 16));
        for (int64_t k = 0; k < numel[i]; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            float v = unit ? 1.0f + 0.1f * u : scale * u;
            fwrite(&v, 4, 1, out);
        }
    }
    assert_int_equal(fclose(out), 0);
    return true;
}

/* Classifiers ignore classes, as LibreYOLO's: the same probabilities with a
 * filter as without. */
static void expect_classes_ignored(ly_model *m)
{
    enum { W = 64, H = 48 };
    uint8_t pixels[W * H * 3];
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (uint8_t)((i * 37) ^ (i >> 5));
    ly_image_view view = {pixels, W, H, W * 3, LY_PIXELS_RGB};
    ly_predict_options o;
    ly_predict_options_init(&o);
    ly_results *a, *b;
    if (ly_model_predict_image(m, &view, &o, &a) != LY_OK) fail_msg("%s", ly_last_error());
    int only[2] = {3, 9};
    o.classes = only;
    o.n_classes = 2;
    if (ly_model_predict_image(m, &view, &o, &b) != LY_OK) fail_msg("%s", ly_last_error());
    const float *pa, *pb;
    size_t na, nb;
    assert_int_equal(ly_results_probs(a, &pa, &na), LY_OK);
    assert_int_equal(ly_results_probs(b, &pb, &nb), LY_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na * sizeof *pa);
    ly_results_free(a);
    ly_results_free(b);
}

/* ViT-Ti from a .safetensors without metadata (its keys), and the same
 * weights as DeiT-t (its model_family): DeiT's layout is ViT's, so on one
 * input the logits are the same bits. Both ignore classes. */
static void test_safetensors_and_deit(void **state)
{
    (void)state;
    char dir[] = "/tmp/ly_vit.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char vit_path[64], deit_path[64];
    snprintf(vit_path, sizeof vit_path, "%s/vit.safetensors", dir);
    snprintf(deit_path, sizeof deit_path, "%s/LibreDeiTt.safetensors", dir);
    if (!write_synthetic(vit_path, NULL, NULL) || !write_synthetic(deit_path, "deit", "t")) {
        rmdir(dir);
        print_message("skipped: " FIXTURE "/keys_LibreViTti.txt is absent\n");
        skip();
    }
    ly_tensor input, got[2] = {{0}, {0}};
    int64_t shape[4] = {1, 3, 224, 224};
    assert_int_equal(ly_tensor_alloc(&input, LY_F32, 4, shape), LY_OK);
    for (int64_t i = 0; i < ly_tensor_numel(&input); i++)
        ((float *)input.data)[i] = (float)((i * 7919) % 255) / 127.5f - 1.0f;
    const char *paths[2] = {vit_path, deit_path}, *families[2] = {"vit", "deit"};
    const char *sizes[2] = {"ti", "t"};
    for (int k = 0; k < 2; k++) {
        ly_model *m;
        if (ly_model_load(paths[k], NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
        ly_model_info info;
        assert_int_equal(ly_model_get_info(m, &info), LY_OK);
        assert_string_equal(info.family, families[k]);
        assert_string_equal(info.size, sizes[k]);
        assert_string_equal(info.task, "classify");
        if (ly_model_run(m, &input, keep_logits, &got[k]) != LY_OK) fail_msg("%s", ly_last_error());
        expect_classes_ignored(m);
        ly_model_free(m);
    }
    assert_int_equal(ly_tensor_numel(&got[0]), 1000);
    assert_memory_equal(got[0].data, got[1].data, 1000 * sizeof(float));
    print_message("ViT-Ti from a .safetensors by its keys, DeiT-t by its metadata: the same "
                  "logits bit for bit\n");
    ly_tensor_free(&got[0]);
    ly_tensor_free(&got[1]);
    ly_tensor_free(&input);
    unlink(vit_path);
    unlink(deit_path);
    rmdir(dir);
}

/* The k largest of x[n], descending (ties: lower index first). */
static void top_ids(const float *x, int64_t n, int k, int *ids)
{
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int64_t j = 0; j < n; j++) {
            bool taken = false;
            for (int t = 0; t < i; t++)
                taken = taken || ids[t] == (int)j;
            if (!taken && (best < 0 || x[j] > x[best])) best = (int)j;
        }
        ids[i] = best;
    }
}

/* Export with the flag on (the default: the capture still takes the manual
 * expression), the sidecar's classify keys, only packed constants inside the
 * partitions, and the program's logits against LibreYOLO's. */
static void test_export_round_trip(void **state)
{
    (void)state;
    ly_model *m = load_model();
    char dir[] = "/tmp/ly_vit_pte.XXXXXX", out[96], sidecar[112];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/vit.pte", dir);
    snprintf(sidecar, sizeof sidecar, "%s.json", out);
    ly_model *pte = export_classifier_and_reload(m, out, "ViT-Ti");
    if (pte) {
        ly_model_info info;
        assert_int_equal(ly_model_get_info(pte, &info), LY_OK);
        assert_string_equal(info.family, "vit");
        assert_string_equal(info.task, "classify");
        int count = -1;
        assert_int_equal(ly_model_set_fused_attention(pte, true, &count), LY_OK);
        assert_int_equal(count, 0); /* a program: its attention is lowered */
        for (size_t c = 0; c < sizeof images / sizeof images[0]; c++) {
            ly_tensor input, want, got = {0};
            load_ref(images[c], "input", &input);
            load_ref(images[c], "logits_manual", &want);
            if (ly_model_run(pte, &input, keep_logits, &got) != LY_OK)
                fail_msg("%s", ly_last_error());
            int64_t n = ly_tensor_numel(&want);
            assert_int_equal(ly_tensor_numel(&got), n);
            double e = rel_error(got.data, want.data, n);
            int a[5], b[5];
            top_ids(got.data, n, 5, a);
            top_ids(want.data, n, 5, b);
            print_message("ViT-Ti .pte %s: logits %.3g of max |ref| (manual), top-5 %s\n",
                          images[c], e, memcmp(a, b, sizeof a) ? "differs" : "the same");
            if (!(e <= 1e-4)) fail_msg("logits off by %.3g (gate 1e-4)", e);
            assert_memory_equal(a, b, sizeof a);
            ly_tensor_free(&got);
            ly_npy_free(&input);
            ly_npy_free(&want);
        }
        ly_model_free(pte);
    }
    unlink(out);
    unlink(sidecar);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_preprocess),
                                       cmocka_unit_test(test_logits_and_flag),
                                       cmocka_unit_test(test_top5),
                                       cmocka_unit_test(test_intermediates),
                                       cmocka_unit_test(test_safetensors_and_deit),
                                       cmocka_unit_test(test_export_round_trip)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
