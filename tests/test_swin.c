/* SPDX-License-Identifier: MIT */
/*
 * Swin V1 (src/models/swin): a Swin-T checkpoint synthesised from LibreYOLO's
 * key list by tools/swin_numpy_ref.py, our network against that script's
 * NumPy transcription of the spec's §3 (within 1e-5 of max|ref|), the fused
 * window attention byte for byte the manual one (LibreYOLO's default), the
 * flag's module count, and one model shared by threads. Skipped without ../shared or a Python with
 * NumPy (LIBREYOLO_PYTHON, else python3, else /usr/bin/python3). The window pieces (masks, relative
 * position index) are test_windows'.
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
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"
#include "libreyolo/model.h"
#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines/executorch/et_runtime.h"
#include "test_export_util.h"

#define KEYS_DIR LY_SHARED_DIR "/testdata/swin/keys"
#define KEYS KEYS_DIR "/keys_LibreSwint.txt"

#if defined(LY_SANITIZED) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#define SCRIPT LY_TOOLS_DIR "/swin_numpy_ref.py"

static char dir[64];
static const char *python;

/* The first of LIBREYOLO_PYTHON, python3, /usr/bin/python3 that imports numpy. */
static const char *python_with_numpy(void)
{
    static const char *const candidates[] = {NULL, "python3", "/usr/bin/python3"};
    const char *env = getenv("LIBREYOLO_PYTHON");
    for (int i = env ? 0 : 1; i < 3; i++) {
        const char *py = i == 0 ? env : candidates[i];
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", py);
        if (system(cmd) == 0) return py;
    }
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    struct stat st;
    if (stat(KEYS, &st) != 0) return 0;
    const char *py = python = python_with_numpy();
    if (!py) return 0;
    snprintf(dir, sizeof dir, "/tmp/ly_swin_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s %s", py, SCRIPT, KEYS, dir);
    if (system(cmd) != 0) dir[0] = '\0';
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!dir[0]) return 0;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct logits {
    float *v;
    int64_t n;
} logits;

static void keep(const char *name, const ly_tensor *t, void *user)
{
    (void)name;
    logits *l = user;
    l->n = ly_tensor_numel(t);
    l->v = malloc((size_t)l->n * sizeof(float));
    assert_non_null(l->v);
    memcpy(l->v, t->data, (size_t)l->n * sizeof(float));
}

/* The test skipped without the synthesised Swin-T (setup's). */
static void need_synthesised(void)
{
    if (!dir[0]) {
        print_message("skipped: %s or a Python with NumPy is absent\n", KEYS);
        skip();
    }
}

static void synthesised_path(char path[128])
{
    snprintf(path, 128, "%s/LibreSwint-cls_synth.safetensors", dir);
}

static ly_model *load_synthesised(const ly_model_options *options)
{
    need_synthesised();
    char path[128];
    synthesised_path(path);
    ly_model *m;
    if (ly_model_load(path, options, &m) != LY_OK) fail_msg("%s", ly_last_error());
    return m;
}

static void test_swin_t(void **state)
{
    (void)state;
    ly_model *m = load_synthesised(NULL);
    ly_model_info info;
    assert_int_equal(ly_model_get_info(m, &info), LY_OK);
    assert_string_equal(info.family, "swin");
    assert_string_equal(info.size, "t");
    assert_string_equal(info.task, "classify");
    ly_model_stats stats;
    assert_int_equal(ly_model_get_stats(m, 0, &stats), LY_OK);
    assert_int_equal(stats.file_parameters, 28288354); /* LibreYOLO's count */
    int modules = 0;
    bool fused = true;
    assert_int_equal(ly_model_fused_attention(m, &modules, &fused), LY_OK);
    assert_int_equal(modules, 12);
    assert_false(fused); /* fused_attn False on every WindowAttention */

    ly_tensor input, ref;
    ly_test_load_npy(dir, "input", &input);
    ly_test_load_npy(dir, "logits", &ref);
    logits manual = {0}, sdpa = {0};
    if (ly_model_run(m, &input, keep, &manual) != LY_OK) fail_msg("%s", ly_last_error());
    double e = ly_test_rel_error(
        &(ly_tensor){.data = manual.v, .dtype = LY_F32, .ndim = 2, .shape = {1, manual.n}}, &ref);
    print_message("Swin-T (synthesised) logits against the NumPy transcription: %.3g of max|ref|\n",
                  e);
    if (!(e <= 1e-5)) fail_msg("logits off by %.3g of max |ref| (gate 1e-5)", e);

    int count = 0;
    assert_int_equal(ly_model_set_fused_attention(m, true, &count), LY_OK);
    assert_int_equal(count, 12);
    if (ly_model_run(m, &input, keep, &sdpa) != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(sdpa.n, manual.n);
    assert_memory_equal(sdpa.v, manual.v, (size_t)manual.n * sizeof(float));
    print_message("Swin-T fused window attention: the manual form's bits\n");
    free(manual.v);
    free(sdpa.v);
    ly_npy_free(&input);
    ly_npy_free(&ref);
    ly_model_free(m);
}

typedef struct shared_run {
    ly_model *m;
    const ly_tensor *input;
    const logits *want;
    int mismatches;
    ly_status status;
} shared_run;

static void *run_shared(void *arg)
{
    shared_run *r = arg;
    for (int round = 0; round < 2; round++) {
        logits got = {0};
        r->status = ly_model_run(r->m, r->input, keep, &got);
        if (r->status != LY_OK) return NULL;
        r->mismatches +=
            got.n != r->want->n || memcmp(got.v, r->want->v, (size_t)got.n * sizeof(float)) != 0;
        free(got.v);
    }
    return NULL;
}

/* One Swin-T shared by three threads (each run in a context of its own, both
 * attention forms): the logits of a run alone, bit for bit. */
static void test_swin_shared_by_threads(void **state)
{
    (void)state;
    ly_model_options mo = {.threads = 1};
    ly_model *m = load_synthesised(&mo);
    ly_tensor input;
    ly_test_load_npy(dir, "input", &input);
    for (int fused = 0; fused < 2; fused++) {
        int count = 0;
        assert_int_equal(ly_model_set_fused_attention(m, fused, &count), LY_OK);
        logits alone = {0};
        if (ly_model_run(m, &input, keep, &alone) != LY_OK) fail_msg("%s", ly_last_error());
        shared_run runs[3];
        pthread_t t[3];
        for (int i = 0; i < 3; i++) {
            runs[i] = (shared_run){.m = m, .input = &input, .want = &alone};
            assert_int_equal(pthread_create(&t[i], NULL, run_shared, &runs[i]), 0);
        }
        for (int i = 0; i < 3; i++) {
            pthread_join(t[i], NULL);
            assert_int_equal(runs[i].status, LY_OK);
            assert_int_equal(runs[i].mismatches, 0);
        }
        free(alone.v);
    }
    ly_npy_free(&input);
    ly_model_free(m);
}

/* Export with the flag on (the capture takes the manual form all the same):
 * the sidecar's classify keys, only packed constants inside the partitions,
 * and the program's logits in our runtime against the transcription's. */
static void test_swin_export(void **state)
{
    (void)state;
    ly_model *m = load_synthesised(NULL);
    char out[96];
    snprintf(out, sizeof out, "%s/swin.pte", dir);
    int count = 0;
    assert_int_equal(ly_model_set_fused_attention(m, true, &count), LY_OK);
    ly_model *pte = export_classifier_and_reload(m, out, "Swin-T");
    if (!pte) return;
    ly_tensor input, ref;
    ly_test_load_npy(dir, "input", &input);
    ly_test_load_npy(dir, "logits", &ref);
    logits got = {0};
    if (ly_model_run(pte, &input, keep, &got) != LY_OK) fail_msg("%s", ly_last_error());
    double e = ly_test_rel_error(
        &(ly_tensor){.data = got.v, .dtype = LY_F32, .ndim = 2, .shape = {1, got.n}}, &ref);
    print_message("Swin-T .pte in our runtime: logits %.3g of max|ref|\n", e);
    if (!(e <= 1e-4)) fail_msg("the program's logits off by %.3g of max |ref| (gate 1e-4)", e);
    free(got.v);
    ly_npy_free(&input);
    ly_npy_free(&ref);
    ly_model_free(pte);
    unlink(out);
    strncat(out, ".json", sizeof out - strlen(out) - 1); /* the sidecar */
    unlink(out);
}

static void count_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                       void *user)
{
    (void)slot;
    (void)impl;
    (void)why_not;
    if (eligible) ++*(int *)user;
}

/* s, b and l (786 MB of weights for l) build from LibreYOLO's key lists and
 * check their recognition, parameter counts and flag, once: in the default
 * build only (not under sanitizers, not on the references alone). */
/* What recognition reads (detect_size): a checkpoint of these keys alone is
 * recognised, or refused, before any weight is read. */
static bool recognition_key(const char *name)
{
    return strcmp(name, "patch_embed.proj.weight") == 0 || strcmp(name, "norm.weight") == 0 ||
           strcmp(name, "head.fc.weight") == 0 ||
           strcmp(name, "layers.0.blocks.0.attn.relative_position_bias_table") == 0 ||
           (strncmp(name, "layers.2.blocks.", 16) == 0 && strstr(name, ".norm1.weight"));
}

/* The synthesised Swin-T with other metadata (`meta`: JSON members) and one
 * key added (NULL: none), as .safetensors at `out`; `few`: only the keys
 * recognition reads. */
static void rewrite(const char *meta, const char *extra, bool few, const char *out)
{
    char path[128];
    synthesised_path(path);
    ly_checkpoint *ck;
    assert_int_equal(ly_checkpoint_open(path, &ck), LY_OK);
    size_t count;
    assert_int_equal(ly_checkpoint_tensor_count(ck, &count), LY_OK);
    bbuf json = {0}, data = {0};
    b_str(&json, "{\"__metadata__\": {");
    b_str(&json, meta);
    b_str(&json, "}");
    for (size_t i = 0; i < count; i++) {
        const char *name;
        ly_tensor t;
        assert_int_equal(ly_checkpoint_tensor_at(ck, i, &name, &t), LY_OK);
        if (!few || recognition_key(name)) st_entry(&json, &data, name, &t);
    }
    float one[4] = {1, 1, 1, 1};
    ly_tensor added = {.data = one, .dtype = LY_F32, .ndim = 2, .shape = {2, 2}};
    if (extra) st_entry(&json, &data, extra, &added);
    st_finish(&json, &data, out);
    ly_checkpoint_close(ck);
}

/* A size's keys under another size's metadata, and SwinV2's continuous
 * position bias (not this family), are refused naming what is wrong. */
static void test_swin_refused(void **state)
{
    (void)state;
    need_synthesised();
    char out[128];
    snprintf(out, sizeof out, "%s/edited.safetensors", dir);
    rewrite("\"model_family\": \"swin\", \"size\": \"b\"", NULL, true, out);
    ly_model *m = NULL;
    assert_int_not_equal(ly_model_load(out, NULL, &m), LY_OK);
    print_message("refused: %s\n", ly_last_error());
    assert_non_null(strstr(ly_last_error(), "size 'b'"));
    assert_non_null(strstr(ly_last_error(), out));
    rewrite("", "layers.0.blocks.0.attn.cpb_mlp.0.weight", true, out); /* no metadata: by keys */
    assert_int_not_equal(ly_model_load(out, NULL, &m), LY_OK);
    print_message("refused: %s\n", ly_last_error());
    assert_non_null(strstr(ly_last_error(), out));
    rewrite("\"model_family\": \"swin\"", "layers.0.blocks.0.attn.cpb_mlp.0.weight", false, out);
    assert_int_not_equal(ly_model_load(out, NULL, &m), LY_OK);
    print_message("refused: %s\n", ly_last_error());
    assert_non_null(strstr(ly_last_error(), "cpb_mlp"));
}

static void test_swin_sizes(void **state)
{
    (void)state;
    int conv = 0;
    ly_kernel_list("conv2d", count_impl, &conv);
    if (!dir[0] || SANITIZED || conv <= 1) {
        print_message("skipped: the larger sizes build in the default build only, with %s and "
                      "a Python with NumPy\n",
                      KEYS_DIR);
        skip();
    }
    static const struct {
        const char *size;
        int64_t parameters; /* spec §3.1, LibreYOLO's counts */
    } sizes[] = {{"s", 49606258}, {"b", 87768224}, {"l", 196532476}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char cmd[1024], path[160];
        snprintf(cmd, sizeof cmd, "%s %s %s/keys_LibreSwin%s.txt %s --size %s --no-forward", python,
                 SCRIPT, KEYS_DIR, sizes[i].size, dir, sizes[i].size);
        assert_int_equal(system(cmd), 0);
        snprintf(path, sizeof path, "%s/LibreSwin%s-cls_synth.safetensors", dir, sizes[i].size);
        ly_model *m;
        if (ly_model_load(path, NULL, &m) != LY_OK) fail_msg("%s", ly_last_error());
        ly_model_info info;
        assert_int_equal(ly_model_get_info(m, &info), LY_OK);
        assert_string_equal(info.size, sizes[i].size);
        ly_model_stats stats;
        assert_int_equal(ly_model_get_stats(m, 0, &stats), LY_OK);
        assert_int_equal(stats.file_parameters, sizes[i].parameters);
        int modules = 0;
        bool fused = true;
        assert_int_equal(ly_model_fused_attention(m, &modules, &fused), LY_OK);
        assert_int_equal(modules, 24);
        print_message("Swin-%s: %lld parameters, %d window attentions\n", sizes[i].size,
                      (long long)stats.file_parameters, modules);
        ly_model_free(m);
        assert_int_equal(unlink(path), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swin_t), cmocka_unit_test(test_swin_shared_by_threads),
        cmocka_unit_test(test_swin_export), cmocka_unit_test(test_swin_refused),
        cmocka_unit_test(test_swin_sizes)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
