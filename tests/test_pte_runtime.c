/* SPDX-License-Identifier: MIT */
/*
 * Running .pte programs: the checkpoint and its export give the same raw
 * outputs (1e-4 relative) and the same detections on the shared fixture
 * (skipped without it); the sidecar is mandatory and checked with
 * LibreYOLO's messages; an interrupted export is finished before a load; and
 * truncated or corrupted programs and sidecars are refused with a message,
 * never a crash (bounded fuzzing, meant for the sanitizer build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_graph_util.h"
#include "test_util.h"

#include "core/core.h"
#include "engines/executorch/et_runtime.h"
#include "engines/executorch/method_internal.h"
#include "export/lower.h"
#include "graph/graph.h"
#include "libreyolo/export.h"
#include "libreyolo/fetch.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"
#include "models/recipe.h"
#include "pte/commit.h"
#include "pte/pte_samples.h"
#include "pte/sidecar.h"
#include "test_export_util.h"

#include <math.h>
#include <unistd.h>

#define FIXTURE LY_SHARED_DIR "/testdata/yolo9"
#define IMAGE LY_SHARED_DIR "/testdata/images/parkour.jpg"
#define NANODET_FIXTURE LY_SHARED_DIR "/testdata/nanodet/dog"
#define DOG LY_SHARED_DIR "/testdata/images/dog.jpg"

#ifdef LY_SANITIZED
enum { FUZZ_PROGRAM = 150, FUZZ_SIDECAR = 150, PARITY_SIZE = 160 };
#else
enum { FUZZ_PROGRAM = 400, FUZZ_SIDECAR = 300, PARITY_SIZE = 640 };
#endif

static uint64_t seed = 1234;
static uint8_t *tiny; /* a small lowered program */
static size_t tiny_size;
static char tiny_path[512], yolo_path[512];

static void quiet_log(ly_log_level level, const char *message, void *user)
{
    (void)level, (void)message, (void)user;
}

static bool verbose(void)
{
    const char *v = getenv("LY_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

/* LY_TEST_FUZZ=N runs N iterations of each fuzz test (deeper runs by hand). */
static int fuzz_iterations(int fallback)
{
    const char *v = getenv("LY_TEST_FUZZ");
    int n = v ? atoi(v) : 0;
    return n > 0 ? n : fallback;
}

static float rnd(void)
{
    return (float)(ly_test_splitmix64(&seed) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void conv(ly_graph *g, ly_graph_value x, int64_t cin, int64_t cout, int64_t k, int64_t act,
                 ly_graph_value *out)
{
    *out = ly_test_conv(g, "conv", x, cin, cout, k, 1, 1, act, LY_GRAPH_NONE, rnd, 0.3f);
}

/* conv -> upsample (portable) -> concat -> slice -> conv: two partitions. */
static void make_tiny(void)
{
    ly_graph *g;
    ly_graph_value x, a, u, c, s, y, parts[2];
    assert_int_equal(ly_graph_create(&g), LY_OK);
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    conv(g, x, 3, 4, 3, LY_ACT_SILU, &a);
    assert_int_equal(ly_graph_upsample_nearest2d(g, "up", a, 2, &u), LY_OK);
    conv(g, u, 4, 4, 1, LY_ACT_NONE, &y);
    parts[0] = u;
    parts[1] = y;
    assert_int_equal(ly_graph_concat(g, "cat", 2, parts, 1, &c), LY_OK);
    assert_int_equal(ly_graph_slice(g, "s", c, 1, 2, 4, &s), LY_OK);
    conv(g, s, 4, 2, 3, LY_ACT_SIGMOID, &y);
    assert_int_equal(ly_graph_output(g, y, "y"), LY_OK);
    ly_tensor in = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, 4, 4}};
    ly_lower_result r;
    assert_int_equal(lower_graph(g, &in, &r), LY_OK);
    assert_int_equal(r.delegate_partitions, 2);
    tiny = r.program;
    tiny_size = r.size;
    ly_graph_free(g);
}

static int setup(void **state)
{
    if (ly_test_scratch_setup(state) != 0) return -1;
    ly_set_log_handler(quiet_log, NULL, LY_LOG_DEBUG);
    make_tiny();
    ly_test_scratch_path("tiny.pte", tiny_path, sizeof tiny_path);
    write_all(tiny_path, tiny, tiny_size);
    ly_test_scratch_path("yolo.safetensors", yolo_path, sizeof yolo_path);
    write_random_yolo9t(yolo_path, 3, 99);
    return 0;
}

static int teardown(void **state)
{
    free(tiny);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ly_test_scratch());
    if (system(cmd) != 0) return ly_test_scratch_teardown(state);
    return 0;
}

static void expect_error(ly_status st, const char *needle)
{
    if (st == LY_OK || !strstr(ly_last_error(), needle))
        fail_msg("status %s, message \"%s\"; expected \"%s\"", ly_status_name(st), ly_last_error(),
                 needle);
}

/* ---- parity on the fixture ---------------------------------------------------- */

typedef struct outputs {
    ly_tensor predictions;
} outputs;

static void keep(const char *name, const ly_tensor *t, void *user)
{
    outputs *o = user;
    if (strcmp(name, "predictions") != 0) return;
    int64_t n = ly_tensor_numel(t);
    o->predictions = *t;
    o->predictions.data = malloc((size_t)n * sizeof(float));
    memcpy(o->predictions.data, t->data, (size_t)n * sizeof(float));
}

/* Normwise errors, as test_yolo9.c measures them: this random-weight network
 * amplifies f32 rounding about 10^4-fold, so single elements of two correct
 * f32 evaluations (our checkpoint providers among themselves, or against
 * PyTorch) differ by up to ~1e-3 of the tensor's scale; the L2 measure is the
 * one that says whether two evaluations compute the same function. */
static void errors(const ly_tensor *a, const ly_tensor *b, double *max_rel, double *rms_rel)
{
    int64_t n = ly_tensor_numel(a);
    double diff = 0, mag = 0, se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
        diff = fmax(diff, fabs(x - y));
        mag = fmax(mag, fabs(x));
        se += (x - y) * (x - y);
        sr += x * x;
    }
    *max_rel = mag > 0 ? diff / mag : diff;
    *rms_rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
}

static void test_fixture_parity(void **state)
{
    (void)state;
    const char *ck = FIXTURE "/LibreYOLO9t_seed0.pt";
    if (!file_exists(ck)) {
        print_message("skipped: %s not present\n", ck);
        skip();
    }
    if (!ly_et_xnnpack_available()) {
        print_message("skipped: built without XNNPACK\n");
        skip();
    }
    ly_model *a, *b;
    assert_int_equal(ly_model_load(ck, NULL, &a), LY_OK);
    char out[600];
    ly_test_scratch_path("fixture/LibreYOLO9t_seed0.pte", out, sizeof out);
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t size[1] = {PARITY_SIZE};
    o.imgsz = size;
    o.imgsz_len = 1;
    o.output_path = out;
    assert_int_equal(ly_model_export(a, &o, NULL, 0), LY_OK);
    size_t program_size = 0;
    uint8_t *program = read_all(out, &program_size);
    assert_non_null(program);
    expect_packed_constants_only(program, program_size, out);
    free(program);
    ly_status st = ly_model_load(out, NULL, &b);
    if (st != LY_OK) fail_msg("%s", ly_last_error());

    ly_tensor input = {0};
    bool own_input =
        PARITY_SIZE == 640 && ly_npy_load(FIXTURE "/ref_parkour/input.npy", &input) == LY_OK;
    float *data = NULL;
    if (!own_input) {
        int64_t shape[4] = {1, 3, PARITY_SIZE, PARITY_SIZE};
        data = malloc((size_t)(3 * PARITY_SIZE * PARITY_SIZE) * sizeof(float));
        for (int i = 0; i < 3 * PARITY_SIZE * PARITY_SIZE; i++)
            data[i] = 0.5f + 0.5f * rnd();
        assert_int_equal(ly_tensor_init(&input, data, LY_F32, 4, shape), LY_OK);
    }
    outputs oa = {0}, ob = {0};
    assert_int_equal(ly_model_run(a, &input, keep, &oa), LY_OK);
    assert_int_equal(ly_model_run(b, &input, keep, &ob), LY_OK);
    double max_rel, rms_rel;
    errors(&oa.predictions, &ob.predictions, &max_rel, &rms_rel);
    free(oa.predictions.data);
    free(ob.predictions.data);
    if (verbose())
        print_message("predictions at %d: checkpoint vs .pte rms_rel %.3g, max_rel %.3g\n",
                      PARITY_SIZE, rms_rel, max_rel);
    assert_true(rms_rel <= 1e-4);
    assert_true(max_rel <= 5e-3);
    if (own_input) ly_npy_free(&input);
    free(data);

    if (file_exists(IMAGE) && PARITY_SIZE == 640) {
        ly_results *ra, *rb;
        assert_int_equal(ly_model_predict_file(a, IMAGE, NULL, &ra), LY_OK);
        assert_int_equal(ly_model_predict_file(b, IMAGE, NULL, &rb), LY_OK);
        size_t na, nb;
        ly_results_count(ra, &na);
        ly_results_count(rb, &nb);
        assert_int_equal(na, nb);
        /* The same detections; order may differ only where two scores tie within
         * rounding, so each is matched to its nearest unmatched twin of its class. */
        double worst_box = 0, worst_conf = 0;
        bool *used = calloc(nb ? nb : 1, sizeof *used);
        int reordered = 0;
        for (size_t i = 0; i < na; i++) {
            ly_detection da, db;
            ly_results_get(ra, i, &da);
            size_t best = nb;
            double best_d = 1e30;
            for (size_t j = 0; j < nb; j++) {
                ly_results_get(rb, j, &db);
                if (used[j] || db.cls != da.cls) continue;
                double dist = 0;
                for (int k = 0; k < 4; k++)
                    dist = fmax(dist, fabs(da.xyxy[k] - db.xyxy[k]));
                if (dist < best_d) best_d = dist, best = j;
            }
            assert_true(best < nb);
            used[best] = true;
            if (best != i) reordered++;
            ly_results_get(rb, best, &db);
            worst_box = fmax(worst_box, best_d);
            worst_conf = fmax(worst_conf, fabs(da.conf - db.conf));
        }
        free(used);
        if (verbose())
            print_message("detections: %zu each, matched one to one by class (%d swapped "
                          "places with a near-tie); worst box difference %.3g px, worst score "
                          "difference %.3g\n",
                          na, reordered, worst_box, worst_conf);
        assert_true(worst_box < 2.0);
        assert_true(worst_conf < 1e-3);
        ly_results_free(ra);
        ly_results_free(rb);
    }
    ly_model_free(a);
    ly_model_free(b);
}

/* NanoDet-g (from the model cache; never fetched here): every output and the
 * detections of the export against the TF.js import. */
typedef struct all_outputs {
    ly_tensor t[8];
    int n;
} all_outputs;

static void keep_all(const char *name, const ly_tensor *t, void *user)
{
    (void)name;
    all_outputs *o = user;
    if (o->n == 8) return;
    ly_tensor *c = &o->t[o->n++];
    *c = *t;
    c->data = malloc((size_t)ly_tensor_numel(t) * sizeof(float));
    memcpy(c->data, t->data, (size_t)ly_tensor_numel(t) * sizeof(float));
}

static void test_nanodet_parity(void **state)
{
    (void)state;
    char dir[1024];
    bool present = false;
    if (ly_model_cached("nanodet", dir, sizeof dir, &present) != LY_OK || !present ||
        !file_exists(NANODET_FIXTURE "/input.npy") || !file_exists(DOG)) {
        print_message("skipped: NanoDet is not in the model cache, or no shared fixture\n");
        skip();
    }
    if (!ly_et_xnnpack_available()) skip();
    ly_model *a, *b;
    assert_int_equal(ly_model_load(dir, NULL, &a), LY_OK);
    char out[600];
    ly_test_scratch_path("nanodet/nanodet.pte", out, sizeof out);
    ly_export_options o;
    ly_export_options_init(&o);
    o.output_path = out;
    assert_int_equal(ly_model_export(a, &o, NULL, 0), LY_OK);
    size_t program_size = 0;
    uint8_t *program = read_all(out, &program_size);
    assert_non_null(program);
    expect_packed_constants_only(program, program_size, out);
    free(program);
    ly_status st = ly_model_load(out, NULL, &b);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_info ia, ib;
    ly_model_get_info(a, &ia);
    ly_model_get_info(b, &ib);
    assert_string_equal(ib.family, "nanodet");
    assert_int_equal(ib.nc, ia.nc);
    assert_int_equal(ib.imgsz, ia.imgsz);
    assert_true(ib.default_conf == ia.default_conf && ib.default_max_det == ia.default_max_det);
    ly_tensor input;
    assert_int_equal(ly_npy_load(NANODET_FIXTURE "/input.npy", &input), LY_OK);
    all_outputs oa = {0}, ob = {0};
    assert_int_equal(ly_model_run(a, &input, keep_all, &oa), LY_OK);
    assert_int_equal(ly_model_run(b, &input, keep_all, &ob), LY_OK);
    ly_npy_free(&input);
    assert_int_equal(oa.n, ob.n);
    double worst_rms = 0, worst_max = 0;
    for (int i = 0; i < oa.n; i++) {
        double max_rel, rms_rel;
        assert_int_equal(ly_tensor_numel(&oa.t[i]), ly_tensor_numel(&ob.t[i]));
        errors(&oa.t[i], &ob.t[i], &max_rel, &rms_rel);
        worst_rms = fmax(worst_rms, rms_rel);
        worst_max = fmax(worst_max, max_rel);
        free(oa.t[i].data);
        free(ob.t[i].data);
    }
    if (verbose())
        print_message("nanodet: %d outputs, worst rms_rel %.3g, worst max_rel %.3g\n", oa.n,
                      worst_rms, worst_max);
    assert_true(worst_rms <= 1e-4);
    ly_results *ra, *rb;
    assert_int_equal(ly_model_predict_file(a, DOG, NULL, &ra), LY_OK);
    assert_int_equal(ly_model_predict_file(b, DOG, NULL, &rb), LY_OK);
    size_t na, nb;
    ly_results_count(ra, &na);
    ly_results_count(rb, &nb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        ly_detection da, db;
        ly_results_get(ra, i, &da);
        ly_results_get(rb, i, &db);
        assert_int_equal(da.cls, db.cls);
        for (int k = 0; k < 4; k++)
            assert_true(fabs(da.xyxy[k] - db.xyxy[k]) < 0.01);
        assert_true(fabs(da.conf - db.conf) < 1e-4);
    }
    ly_results_free(ra);
    ly_results_free(rb);
    ly_model_free(a);
    ly_model_free(b);
}

/* ---- the sidecar ------------------------------------------------------------------ */

static const char *const good_sidecar =
    "{\"dynamic\": false, \"executorch_delegate\": \"xnnpack\", \"imgsz\": 4, \"imgsz_h\": 4, "
    "\"imgsz_w\": 4, \"model_family\": \"yolo9\", \"nc\": 2, \"precision\": \"fp32\", "
    "\"schema_version\": \"1.0\", \"size\": \"t\", \"task\": \"detect\"}";

static bool yolo9_only(const char *family)
{
    return strcmp(family, "yolo9") == 0;
}

static ly_status load_with(const char *sidecar)
{
    char side[600];
    snprintf(side, sizeof side, "%s.json", tiny_path);
    unlink(side);
    if (sidecar) write_all(side, sidecar, strlen(sidecar));
    ly_model *m = NULL;
    ly_status st = ly_model_load(tiny_path, NULL, &m);
    ly_model_free(m);
    return st;
}

static void test_sidecar_checks(void **state)
{
    (void)state;
    char want[700];
    snprintf(want, sizeof want, "ExecuTorch metadata sidecar not found: %s.json", tiny_path);
    expect_error(load_with(NULL), want);
    expect_error(load_with("{\"a\": "), "Invalid ExecuTorch metadata sidecar: ");
    expect_error(load_with("[1, 2]"), "ExecuTorch metadata sidecar must contain a JSON object: ");
    expect_error(load_with("{\"precision\": \"fp32\"}"),
                 "This LibreYOLO version only supports ExecuTorch programs exported for XNNPACK, "
                 "got 'missing delegate metadata'.");
    expect_error(load_with("{\"executorch_delegate\": \"coreml\"}"), "got 'coreml'.");
    /* Every refusal names the sidecar, then says what upstream says. */
    snprintf(want, sizeof want, "%s.json: This LibreYOLO version only supports", tiny_path);
    expect_error(load_with("{\"executorch_delegate\": \"coreml\"}"), want);
    expect_error(load_with("{\"executorch_delegate\": \"XNNPACK\", \"dynamic\": true}"),
                 "ExecuTorch v1 requires metadata dynamic=false, got True.");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"dynamic\": \"true\"}"),
                 "ExecuTorch v1 requires metadata dynamic=false, got 'true'.");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"dynamic\": \"False\"}"),
                 "ExecuTorch v1 requires metadata precision='fp32', got 'missing precision "
                 "metadata'.");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"precision\": \"fp16\"}"),
                 "ExecuTorch v1 requires metadata precision='fp32', got 'fp16'.");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"precision\": \"FP32\", "
                           "\"imgsz_h\": 4}"),
                 "ExecuTorch metadata must define both imgsz_h and imgsz_w, or neither.");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"precision\": \"fp32\"}"),
                 "ExecuTorch metadata must declare a fixed input size.");
    /* Sizes beyond what the exporter writes are too large, naming the limit. */
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"precision\": \"fp32\", "
                           "\"imgsz\": 65535}"),
                 ".json: input size 65535x65535 is too large (at most 16384 per side)");
    expect_error(load_with("{\"executorch_delegate\": \"xnnpack\", \"precision\": \"fp32\", "
                           "\"imgsz_h\": 0, \"imgsz_w\": 8}"),
                 "input size 0x8 is not a positive size");
    /* Keys all right, but the program is not a YOLO9 detector. */
    expect_error(load_with(good_sidecar), ly_et_xnnpack_available()
                                              ? "the network's first output"
                                              : "does not provide XnnpackBackend");
    char missing[600];
    ly_test_scratch_path("absent.pte", missing, sizeof missing);
    ly_model *m;
    snprintf(want, sizeof want, "ExecuTorch program not found: %s", missing);
    expect_error(ly_model_load(missing, NULL, &m), want);
    ly_model_desc d = {0};
    assert_int_equal(ly_pte_load_model("model.PTE", &d), LY_E_DECLINED);
    assert_int_equal(ly_pte_load_model("model.pt", &d), LY_E_DECLINED);
}

/* What the writer puts, the reader gives back: one table serves both. */
static void test_sidecar_round_trip(void **state)
{
    (void)state;
    char *names[3] = {"cat", "", "a \"dog\""};
    ly_sidecar w = {.h = 320,
                    .w = 256,
                    .nc = 3,
                    .names = names,
                    .libreyolo_version = "0.0.0",
                    .delegate_partitions = 2,
                    .crop_pct = 0.875,
                    .interpolation = "bicubic"};
    snprintf(w.family, sizeof w.family, "yolo9");
    snprintf(w.size, sizeof w.size, "t");
    snprintf(w.task, sizeof w.task, "detect");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ly_sidecar_write(&w, &text, &len), LY_OK);
    assert_int_equal(strlen(text), len);
    char side[600];
    snprintf(side, sizeof side, "%s.json", tiny_path);
    write_all(side, text, len);
    const ly_sidecar_read_options rectangular = {.rectangular = yolo9_only};
    ly_sidecar r;
    ly_status st = ly_sidecar_read(tiny_path, &rectangular, &r);
    if (st != LY_OK) fail_msg("%s\n%s", ly_last_error(), text);
    assert_string_equal(r.family, "yolo9");
    assert_string_equal(r.size, "t");
    assert_string_equal(r.task, "detect");
    assert_int_equal(r.h, 320);
    assert_int_equal(r.w, 256);
    assert_int_equal(r.nc, 3);
    assert_string_equal(r.names[0], "cat");
    assert_string_equal(r.names[1], "class_1");
    assert_string_equal(r.names[2], "a \"dog\"");
    ly_sidecar_free(&r);
    /* the rows a reader ignores are written all the same, sorted as json.dumps */
    static const char *const keys[] = {
        "\"crop_pct\": 0.875",
        "\"default_task\": \"detect\"",
        "\"dynamic\": false",
        "\"executorch_delegate\": \"xnnpack\"",
        "\"executorch_delegate_partitions\": 2",
        "\"executorch_version\": \"" LY_SIDECAR_EXECUTORCH_VERSION "\"",
        "\"imgsz\": 320",
        "\"imgsz_h\": 320",
        "\"imgsz_w\": 256",
        "\"interpolation\": \"bicubic\"",
        "\"libreyolo_version\": \"0.0.0\"",
        "\"model_family\": \"yolo9\"",
        "\"model_size\": \"t\"",
        "\"names\": {",
        "\"nb_classes\": 3",
        "\"nc\": 3",
        "\"obb\": false",
        "\"precision\": \"fp32\"",
        "\"schema_version\": \"" LY_SIDECAR_SCHEMA_VERSION "\"",
        "\"size\": \"t\"",
        "\"supported_tasks\": [",
        "\"task\": \"detect\"",
    };
    const char *at = text;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *found = strstr(at, keys[i]);
        if (!found) fail_msg("%s is not where json.dumps puts it in:\n%s", keys[i], text);
        at = found;
    }
    /* Without the family's leave a rectangular size is refused; a names
     * object left out gives the default names to as many classes. */
    w.crop_pct = 0;
    w.interpolation = NULL;
    w.names = NULL;
    w.nc = 2;
    free(text);
    assert_int_equal(ly_sidecar_write(&w, &text, &len), LY_OK);
    write_all(side, text, len);
    expect_error(ly_sidecar_read(tiny_path, NULL, &r),
                 "rectangular input 320x256 is not allowed for yolo9 programs");
    ly_sidecar_free(&r);
    static const char *const two[2] = {"first", "second"};
    const ly_sidecar_read_options defaults = {
        .rectangular = yolo9_only, .default_names = two, .n_default_names = 2};
    assert_true(strstr(text, "\"crop_pct\"") == NULL && strstr(text, "interpolation") == NULL);
    char *no_names = strstr(text, "\"names\"");
    memcpy(no_names, "\"nameX\"", 7);
    write_all(side, text, len);
    assert_int_equal(ly_sidecar_read(tiny_path, &defaults, &r), LY_OK);
    assert_string_equal(r.names[0], "first");
    assert_string_equal(r.names[1], "second");
    ly_sidecar_free(&r);
    free(text);
}

/* An export interrupted between the two swaps is finished by the next load. */
static void test_load_after_interrupted_export(void **state)
{
    (void)state;
    if (!ly_et_xnnpack_available()) skip();
    ly_model *m, *p;
    assert_int_equal(ly_model_load(yolo_path, NULL, &m), LY_OK);
    char out[600];
    ly_test_scratch_path("crash/y.pte", out, sizeof out);
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t s64[1] = {64}, s96[1] = {96};
    o.imgsz = s64;
    o.imgsz_len = 1;
    o.output_path = out;
    assert_int_equal(ly_model_export(m, &o, NULL, 0), LY_OK);
    /* Count the steps of a second export, then crash one in the middle of the swap. */
    o.imgsz = s96;
    ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
    assert_int_equal(ly_model_export(m, &o, NULL, 0), LY_OK);
    int steps = ly_pte_fault_steps();
    /* The swap is the four renames before the last ten steps (directory sync,
     * the "committed" journal, removing the backups and the journal): crash
     * after the program was replaced and before the sidecar was. */
    for (int k = steps - 13; k <= steps - 11; k++) {
        o.imgsz = o.imgsz == s64 ? s96 : s64;
        ly_pte_fault_inject(k, LY_PTE_FAULT_CRASH, 0);
        assert_int_equal(ly_model_export(m, &o, NULL, 0), LY_E_INTERNAL);
        ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
        ly_status st = ly_model_load(out, NULL, &p);
        if (st != LY_OK) fail_msg("crash at step %d of %d: %s", k, steps, ly_last_error());
        ly_model_info info;
        ly_model_get_info(p, &info);
        assert_true(info.imgsz == 64 || info.imgsz == 96);
        ly_model_free(p);
    }
    ly_model_free(m);
}

/* ---- a program of portable kernel calls only ----------------------------------- */

static int32_t sizes_pool[64][4];
static uint8_t order_pool[64][4];
static int n_pool;

static ly_pte_evalue tensor_value(int ndim, const int32_t *dims, uint64_t offset)
{
    int k = n_pool++;
    for (int i = 0; i < ndim; i++) {
        sizes_pool[k][i] = dims[i];
        order_pool[k][i] = (uint8_t)i;
    }
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_TENSOR};
    v.u.tensor = (ly_pte_tensor){.scalar_type = LY_PTE_FLOAT,
                                 .sizes = sizes_pool[k],
                                 .n_sizes = (size_t)ndim,
                                 .dim_order = order_pool[k],
                                 .n_dim_order = (size_t)ndim,
                                 .allocation_info = {.present = true,
                                                     .memory_id = 1,
                                                     .memory_offset_low = (uint32_t)offset}};
    return v;
}

static ly_pte_evalue int_value(int64_t x)
{
    ly_pte_evalue v = {.type = LY_PTE_EVALUE_INT};
    v.u.int_val = x;
    return v;
}

/* add, sub, mul, sigmoid, silu, view_copy, permute_copy, cat, _softmax,
 * slice_copy and clone, as ExecuTorch's emitter writes them (out twice). */
static void test_portable_kernels(void **state)
{
    (void)state;
    n_pool = 0;
    int32_t d23[2] = {2, 3}, d32[2] = {3, 2}, d62[2] = {6, 2};
    /* IntLists hold the indices of Int values: 3, 2 and 1, 0 are values 25..28 */
    static const int64_t size32[2] = {25, 26}, perm10[2] = {27, 28};
    static const int32_t cat_items[2] = {7, 7};
    ly_pte_evalue v[29];
    for (int i = 0; i < 29; i++)
        v[i] = (ly_pte_evalue){.type = LY_PTE_EVALUE_NULL};
    v[0] = tensor_value(2, d23, 0);
    v[1] = tensor_value(2, d23, 32);
    v[2] = tensor_value(2, d23, 64);
    v[3] = int_value(1);
    v[4] = tensor_value(2, d23, 96);
    v[5] = tensor_value(2, d23, 128);
    v[6].type = LY_PTE_EVALUE_INT_LIST;
    v[6].u.int_list.items = size32;
    v[6].u.int_list.n_items = 2;
    v[7] = tensor_value(2, d32, 160);
    v[8].type = LY_PTE_EVALUE_INT_LIST;
    v[8].u.int_list.items = perm10;
    v[8].u.int_list.n_items = 2;
    v[9] = tensor_value(2, d23, 192);
    v[10].type = LY_PTE_EVALUE_TENSOR_LIST;
    v[10].u.tensor_list.items = cat_items;
    v[10].u.tensor_list.n_items = 2;
    v[11] = int_value(0);
    v[12] = tensor_value(2, d62, 224);
    v[14] = (ly_pte_evalue){.type = LY_PTE_EVALUE_BOOL};
    v[15] = tensor_value(2, d62, 288);
    v[17] = int_value(1);
    v[18] = (ly_pte_evalue){.type = LY_PTE_EVALUE_NULL};
    v[19] = int_value(2);
    v[20] = tensor_value(2, d32, 352);
    v[21] = tensor_value(2, d23, 384);
    v[22] = tensor_value(2, d23, 416);
    v[23] = tensor_value(2, d23, 448);
    v[24] = int_value(1);
    v[25] = int_value(3);
    v[26] = int_value(2);
    v[27] = int_value(1);
    v[28] = int_value(0);
    static const ly_pte_operator ops[] = {
        {"aten::add", "out"},          {"aten::sub", "out"},
        {"aten::mul", "out"},          {"aten::sigmoid", "out"},
        {"aten::silu", "out"},         {"aten::view_copy", "out"},
        {"aten::permute_copy", "out"}, {"aten::cat", "out"},
        {"aten::_softmax", "out"},     {"aten::slice_copy", "Tensor_out"},
        {"aten::clone", "out"}};
    static const int32_t a_add[] = {0, 1, 3, 2, 2}, a_sub[] = {0, 1, 3, 21, 21},
                         a_mul[] = {0, 1, 4, 4}, a_sig[] = {0, 5, 5}, a_silu[] = {0, 22, 22},
                         a_view[] = {0, 6, 7, 7}, a_perm[] = {7, 8, 9, 9},
                         a_cat[] = {10, 11, 12, 12}, a_soft[] = {12, 24, 14, 15, 15},
                         a_slice[] = {15, 11, 17, 18, 19, 20, 20}, a_clone[] = {0, 18, 23, 23};
    const int32_t *args[] = {a_add,  a_sub, a_mul,  a_sig,   a_silu, a_view,
                             a_perm, a_cat, a_soft, a_slice, a_clone};
    size_t n_args[] = {5, 5, 4, 3, 3, 4, 4, 4, 5, 7, 4};
    ly_pte_instruction ins[11];
    for (int i = 0; i < 11; i++) {
        ins[i] = (ly_pte_instruction){.type = LY_PTE_KERNEL_CALL};
        ins[i].u.kernel_call.op_index = i;
        ins[i].u.kernel_call.args = args[i];
        ins[i].u.kernel_call.n_args = n_args[i];
    }
    static const int32_t inputs[] = {0, 1}, outputs[] = {2, 21, 4, 5, 22, 9, 12, 15, 20, 23};
    static const int64_t buffers[] = {0, 480}; /* 472 used, rounded to 16 */
    static const uint64_t offsets[] = {0};
    ly_pte_chain chain = {.instructions = ins, .n_instructions = 11};
    ly_pte_plan plan = {.name = "forward",
                        .values = v,
                        .n_values = 29,
                        .inputs = inputs,
                        .n_inputs = 2,
                        .outputs = outputs,
                        .n_outputs = 10,
                        .chains = &chain,
                        .n_chains = 1,
                        .operators = ops,
                        .n_operators = 11,
                        .non_const_buffer_sizes = buffers,
                        .n_non_const_buffer_sizes = 2};
    ly_pte_program prog = {
        .execution_plan = &plan,
        .n_execution_plan = 1,
        .constant_segment = {.present = true, .offsets = offsets, .n_offsets = 1}};
    ly_pte_segment_in seg0 = {0};
    uint8_t *bytes;
    size_t size;
    ly_status st = ly_pte_encode(&prog, &seg0, 1, &bytes, &size);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(bytes, size, "kernels", &p), LY_OK);
    ly_et_method *m;
    st = ly_et_method_load(p, "kernels", &m);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    float x[6] = {-2, -1, 0, 1, 2, 3}, y[6] = {0.5f, 0.25f, -1, 4, -3, 1};
    ly_tensor in[2];
    int64_t s23[2] = {2, 3};
    ly_tensor_init(&in[0], x, LY_F32, 2, s23);
    ly_tensor_init(&in[1], y, LY_F32, 2, s23);
    assert_int_equal(ly_et_method_execute(m, in, 2, 1), LY_OK);
    ly_tensor o[10];
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(ly_et_method_output(m, i, &o[i]), LY_OK);
#define AT(k, i) (((const float *)o[k].data)[i])
    for (int i = 0; i < 6; i++) {
        assert_float_equal(AT(0, i), x[i] + y[i], 1e-6);
        assert_float_equal(AT(1, i), x[i] - y[i], 1e-6);
        assert_float_equal(AT(2, i), x[i] * y[i], 1e-6);
        assert_float_equal(AT(3, i), 1.0f / (1.0f + expf(-x[i])), 1e-6);
        assert_float_equal(AT(4, i), x[i] / (1.0f + expf(-x[i])), 1e-6);
        assert_float_equal(AT(9, i), x[i], 0);
    }
    /* view [3, 2] of x, permuted [1, 0] to [2, 3]: element (r, c) = x[c * 2 + r] */
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++)
            assert_float_equal(AT(5, r * 3 + c), x[c * 2 + r], 0);
    /* cat of the view with itself on dim 0 */
    for (int i = 0; i < 6; i++) {
        assert_float_equal(AT(6, i), x[i], 0);
        assert_float_equal(AT(6, 6 + i), x[i], 0);
    }
    /* softmax over dim 1 of the cat, then rows 1, 3, 5 */
    for (int r = 0; r < 6; r++) {
        float a = AT(6, 2 * r), b = AT(6, 2 * r + 1), mx = a > b ? a : b;
        float ea = expf(a - mx), eb = expf(b - mx);
        assert_float_equal(AT(7, 2 * r), ea / (ea + eb), 1e-6);
        if (r % 2) assert_float_equal(AT(8, r / 2 * 2), AT(7, 2 * r), 0);
    }
#undef AT
    ly_et_method_free(m);
    ly_pte_program_free(p);
    free(bytes);
    /* An IntList item that names a tensor, or no value at all, is refused. */
    static const int64_t not_ints[2][2] = {{25, 0}, {25, 29}};
    for (int bad = 0; bad < 2; bad++) {
        v[6].u.int_list.items = not_ints[bad];
        assert_int_equal(ly_pte_encode(&prog, &seg0, 1, &bytes, &size), LY_OK);
        assert_int_equal(ly_pte_decode(bytes, size, "kernels", &p), LY_OK);
        m = NULL;
        assert_int_equal(ly_et_method_load(p, "kernels", &m), LY_E_FORMAT);
        assert_non_null(strstr(ly_last_error(), "value 6: int list item 1"));
        assert_non_null(strstr(ly_last_error(), "is not the index of an Int value"));
        ly_pte_program_free(p);
        free(bytes);
    }
}

/* Our runtime has a kernel for every operator schema, and none without one. */
static void test_every_schema_has_a_kernel(void **state)
{
    (void)state;
    for (int op = 0; op < LY_PTE_PORTABLE_COUNT; op++) {
        const ly_pte_op_schema *s = &ly_pte_op_schemas[op];
        const et_kernel *k = ly_et_find_kernel(s->name, s->overload);
        if (!k) fail_msg("%s.%s has no kernel", s->name, s->overload);
        assert_ptr_equal(k->schema, s);
        assert_non_null(k->check);
        assert_non_null(k->run);
    }
    assert_null(ly_et_find_kernel("aten::avg_pool2d", "vec_out"));
    assert_null(ly_et_find_kernel("aten::convolution", "out"));
}

/* ---- fuzzing --------------------------------------------------------------------- */

static void try_program(const uint8_t *bytes, size_t size)
{
    ly_pte_program *p = NULL;
    if (ly_pte_decode(bytes, size, "fuzz", &p) != LY_OK) {
        assert_true(ly_last_error()[0] != '\0');
        return;
    }
    ly_et_method *m = NULL;
    if (ly_et_method_load(p, "fuzz", &m) == LY_OK) {
        ly_tensor shape;
        if (ly_et_method_num_inputs(m) == 1 && ly_et_method_input_shape(m, 0, &shape) == LY_OK &&
            shape.dtype == LY_F32 && ly_tensor_numel(&shape) > 0 &&
            ly_tensor_numel(&shape) < (1 << 20)) {
            float *x = calloc((size_t)ly_tensor_numel(&shape), sizeof(float));
            shape.data = x;
            (void)ly_et_method_execute(m, &shape, 1, 1);
            free(x);
        }
        ly_et_method_free(m);
    } else {
        assert_true(ly_last_error()[0] != '\0');
    }
    ly_pte_program_free(p);
}

static void test_fuzz_program(void **state)
{
    (void)state;
    /* the original runs */
    try_program(tiny, tiny_size);
    uint8_t *buf = malloc(tiny_size);
    int iterations = fuzz_iterations(FUZZ_PROGRAM);
    for (int it = 0; it < iterations; it++) {
        memcpy(buf, tiny, tiny_size);
        uint64_t r = ly_test_splitmix64(&seed);
        size_t size = tiny_size;
        if (r % 5 == 0) {
            size = (size_t)(ly_test_splitmix64(&seed) % tiny_size);
        } else {
            int flips = 1 + (int)(r >> 8) % 6;
            for (int f = 0; f < flips; f++) {
                uint64_t q = ly_test_splitmix64(&seed);
                /* mostly the flatbuffers (program and delegate tables), sometimes anywhere */
                size_t at =
                    (size_t)(q % (q & 1 ? tiny_size : (tiny_size < 2048 ? tiny_size : 2048)));
                buf[at] ^= (uint8_t)(1u << ((q >> 20) % 8));
                if ((q >> 30) % 4 == 0) buf[at] = (uint8_t)(q >> 40);
            }
        }
        try_program(buf, size);
    }
    free(buf);
}

static void test_fuzz_sidecar(void **state)
{
    (void)state;
    size_t n = strlen(good_sidecar);
    char *buf = malloc(n + 1);
    static const char alphabet[] = "{}[]\":,0123456789-.eEtrufalsnxp \\";
    int iterations = fuzz_iterations(FUZZ_SIDECAR);
    for (int it = 0; it < iterations; it++) {
        memcpy(buf, good_sidecar, n + 1);
        uint64_t r = ly_test_splitmix64(&seed);
        size_t len = n;
        if (r % 4 == 0) {
            len = (size_t)(ly_test_splitmix64(&seed) % n);
            buf[len] = '\0';
        } else {
            int edits = 1 + (int)(r >> 8) % 4;
            for (int e = 0; e < edits; e++) {
                uint64_t q = ly_test_splitmix64(&seed);
                buf[q % n] = alphabet[(q >> 32) % (sizeof alphabet - 1)];
            }
        }
        ly_status st = load_with(buf);
        assert_true(st != LY_OK);
        assert_true(ly_last_error()[0] != '\0');
    }
    free(buf);
}

/* A program the writer made before constants left the partitions (f2af27d,
 * tests/fixtures/pte/README.md): the anchor grid and the stride are XNNPACK
 * constants read by Subtract, Add and Multiply. Programs written by other tools
 * have such constants too: our runtime runs it to the predictions recorded
 * then, and the walker sees the three readers. */
static void test_program_with_constants_in_delegate(void **state)
{
    (void)state;
    size_t size = 0;
    uint8_t *program = read_all(PTE_FIXTURES "/yolo9_head_constants_in_delegate.pte", &size);
    assert_non_null(program);
    char why[1024];
    int readers = unpacked_constant_readers(program, size, why, sizeof why);
    if (readers != 3) fail_msg("expected 3 unpacked-constant readers, found %d: %s", readers, why);
    ly_tensor input, want;
    assert_int_equal(ly_npy_load(PTE_FIXTURES "/yolo9_head_input.npy", &input), LY_OK);
    assert_int_equal(ly_npy_load(PTE_FIXTURES "/yolo9_head_predictions.npy", &want), LY_OK);
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(program, size, "fixture", &p), LY_OK);
    ly_et_method *m;
    ly_status st = ly_et_method_load(p, "fixture", &m);
    if (!ly_et_xnnpack_available()) {
        assert_int_equal(st, LY_E_UNSUPPORTED);
    } else {
        if (st != LY_OK) fail_msg("%s", ly_last_error());
        for (int threads = 1; threads <= 2; threads++) {
            assert_int_equal(ly_et_method_execute(m, &input, 1, threads), LY_OK);
            ly_tensor got;
            assert_int_equal(ly_et_method_output(m, 0, &got), LY_OK);
            assert_int_equal(ly_tensor_numel(&got), ly_tensor_numel(&want));
            double max_rel, rms_rel;
            errors(&want, &got, &max_rel, &rms_rel);
            if (!(max_rel <= 1e-5)) fail_msg("predictions off by %g of max |ref|", max_rel);
        }
        ly_et_method_free(m);
    }
    ly_pte_program_free(p);
    ly_npy_free(&input);
    ly_npy_free(&want);
    free(program);
}

/* One XNNGraph node: a Sigmoid (an op of ours: the delegate runs as our graph)
 * and an Abs (none: the delegate keeps XNNPACK's operators and our loops),
 * each to the numbers it computes. */
static void test_delegate_graph_or_operators(void **state)
{
    (void)state;
    if (!ly_et_xnnpack_available()) {
        print_message("skipped: built without XNNPACK\n");
        skip();
    }
    static const struct {
        ly_xnn_node_type type;
        bool operators;
    } cases[] = {{LY_XNN_SIGMOID, false}, {LY_XNN_ABS, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pte_sample s;
        assert_int_equal(pte_sample_mixed(&s), LY_OK);
        free(s.blob);
        s.nodes[0].type = cases[c].type;
        assert_int_equal(ly_xnn_encode(&s.graph, NULL, 0, &s.blob, &s.blob_size), LY_OK);
        ly_et_xnnpack *d;
        ly_pte_bytes blob = {s.blob, s.blob_size};
        if (ly_et_xnnpack_init(&s.program, &blob, "hand-made", &d) != LY_OK ||
            ly_et_xnnpack_finish(d, NULL) != LY_OK)
            fail_msg("%s", ly_last_error());
        assert_int_equal(ly_et_xnnpack_runs_operators(d), cases[c].operators);
        int64_t shape[4] = {1, 4, 4, 4};
        ly_tensor x, y;
        assert_int_equal(ly_tensor_alloc(&x, LY_F32, 4, shape), LY_OK);
        assert_int_equal(ly_tensor_alloc(&y, LY_F32, 4, shape), LY_OK);
        float *xd = x.data, *yd = y.data;
        for (int i = 0; i < 64; i++)
            xd[i] = (float)(i - 32) / 8.0f;
        ly_tensor *args[2] = {&x, &y};
        for (int threads = 1; threads <= 2; threads++) {
            assert_int_equal(ly_et_xnnpack_execute(d, args, 2, threads), LY_OK);
            for (int i = 0; i < 64; i++) {
                float want =
                    cases[c].type == LY_XNN_ABS ? fabsf(xd[i]) : 1.0f / (1.0f + expf(-xd[i]));
                if (fabsf(yd[i] - want) > 1e-6f)
                    fail_msg("%s: element %d is %g, expected %g", ly_xnn_node_name(cases[c].type),
                             i, yd[i], want);
            }
        }
        ly_tensor_free(&x);
        ly_tensor_free(&y);
        ly_et_xnnpack_free(d);
        pte_sample_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_parity),
        cmocka_unit_test(test_nanodet_parity),
        cmocka_unit_test(test_portable_kernels),
        cmocka_unit_test(test_every_schema_has_a_kernel),
        cmocka_unit_test(test_sidecar_checks),
        cmocka_unit_test(test_sidecar_round_trip),
        cmocka_unit_test(test_load_after_interrupted_export),
        cmocka_unit_test(test_fuzz_program),
        cmocka_unit_test(test_fuzz_sidecar),
        cmocka_unit_test(test_program_with_constants_in_delegate),
        cmocka_unit_test(test_delegate_graph_or_operators),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
