/* SPDX-License-Identifier: MIT */
/*
 * ExecuTorch export: option validation in LibreYOLO's order and wording,
 * the formats matrix, the sidecar, the atomic commit of the pair under
 * injected failures and crashes at every step, and lowering of graphs to
 * programs that run back to the graph's numbers. Runs without the shared
 * fixture (a random-weight LibreYOLO9t is written to the scratch directory).
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
#include "export/lower.h"
#include "graph/graph.h"
#include "libreyolo/export.h"
#include "libreyolo/model.h"
#include "libreyolo/nn.h"
#include "libreyolo/sdpa.h"
#include "pte/commit.h"
#include "test_export_util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static char model_path[512];
static ly_model *model;
/* Where the commit tests write: tmpfs when there is one, so the hundreds of
 * fsyncs they make cost nothing (the logic under test is the same). */
static char commit_root[256];

static void quiet_log(ly_log_level level, const char *message, void *user)
{
    (void)level, (void)message, (void)user;
}

static int setup(void **state)
{
    if (ly_test_scratch_setup(state) != 0) return -1;
    ly_test_scratch_path("LibreYOLO9t_rand.safetensors", model_path, sizeof model_path);
    write_random_yolo9t(model_path, 4, 7);
    ly_set_log_handler(quiet_log, NULL, LY_LOG_DEBUG);
    snprintf(commit_root, sizeof commit_root, "/dev/shm/ly_export_XXXXXX");
    if (!mkdtemp(commit_root)) snprintf(commit_root, sizeof commit_root, "%s", ly_test_scratch());
    return ly_model_load(model_path, NULL, &model) == LY_OK ? 0 : -1;
}

static int teardown(void **state)
{
    ly_model_free(model);
    /* remove nested directories the tests made */
    char cmd[600];
    if (strcmp(commit_root, ly_test_scratch()) != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", commit_root);
        if (system(cmd) != 0) return -1;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ly_test_scratch());
    if (system(cmd) != 0) return ly_test_scratch_teardown(state);
    return 0;
}

static void expect_error(ly_status st, ly_status want, const char *needle)
{
    if (st != want || !strstr(ly_last_error(), needle))
        fail_msg("status %s, message \"%s\"; expected %s with \"%s\"", ly_status_name(st),
                 ly_last_error(), ly_status_name(want), needle);
}

/* ---- formats ------------------------------------------------------------------ */

static void test_formats_matrix(void **state)
{
    (void)state;
    const ly_export_format_info *f;
    size_t n;
    assert_int_equal(ly_export_formats(&f, &n), LY_OK);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].name, "executorch");
    assert_string_equal(f[0].extension, ".pte");
    assert_false(f[0].fp16 || f[0].int8 || f[0].requires_onnx || f[0].dynamic);

    ly_export_tier tier;
    const char *reason, *constraint;
    assert_int_equal(
        ly_export_support("yolo9", "detect", "executorch", &tier, &reason, &constraint), LY_OK);
    assert_int_equal(tier, LY_EXPORT_VALIDATED);
    assert_string_equal(constraint,
                        "ExecuTorch 1.2, XNNPACK, CPU, FP32, batch 1, fixed input shape");
    assert_non_null(strstr(reason, "raw-output parity"));
    assert_int_equal(ly_export_support("yolo9", "segment", "executorch", &tier, &reason, NULL),
                     LY_OK);
    assert_int_equal(tier, LY_EXPORT_BLOCKED);
    assert_string_equal(reason,
                        "YOLO9 segmentation export is not supported; YOLO9 is detection-only in "
                        "LibreYOLO.");
    assert_int_equal(ly_export_support("nanodet", "detect", "executorch", &tier, &reason, NULL),
                     LY_OK);
    assert_int_equal(tier, LY_EXPORT_AVAILABLE);
    assert_non_null(strstr(reason, "numeric runtime parity has not been recorded"));
    assert_int_equal(ly_export_support("yolo9", "dance", "executorch", &tier, &reason, NULL),
                     LY_OK);
    assert_int_equal(tier, LY_EXPORT_BLOCKED);
    assert_string_equal(reason, "'dance' is not a canonical LibreYOLO task.");
    assert_int_equal(ly_export_support("yolo9", "detect", "onnx", &tier, &reason, NULL), LY_OK);
    assert_string_equal(reason, "'onnx' is not a registered export format.");
    assert_string_equal(ly_export_tier_name(LY_EXPORT_AVAILABLE), "available");

    const char *const *tasks;
    assert_int_equal(ly_export_family_tasks("yolo9", &tasks, &n), LY_OK);
    assert_string_equal(tasks[0], "detect");
    expect_error(ly_export_family_tasks("yolo99", &tasks, &n), LY_E_NOT_FOUND,
                 "Unknown model family: 'yolo99'");
}

/* ---- option validation -------------------------------------------------------- */

static ly_status export_with(ly_export_options *o)
{
    char out_dir[600], out[700];
    ly_test_scratch_path("never", out_dir, sizeof out_dir);
    snprintf(out, sizeof out, "%s/v.pte", out_dir);
    if (!o->output_path) o->output_path = out;
    ly_status st = ly_model_export(model, o, NULL, 0);
    /* every refusal comes before anything is written, directories included */
    if (st != LY_OK) assert_false(file_exists(out_dir));
    return st;
}

static void test_validation_order_and_wording(void **state)
{
    (void)state;
    ly_export_options o;
    ly_export_options_init(&o);
    o.batch = 2;
    o.half = true;
    o.delegate = "coreml";
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT,
                 "ExecuTorch v1 requires batch=1, got batch=2.");
    ly_export_options_init(&o);
    o.dynamic = true;
    o.int8 = true;
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT, "ExecuTorch v1 requires dynamic=False.");
    ly_export_options_init(&o);
    o.half = true;
    o.delegate = "coreml";
    expect_error(export_with(&o), LY_E_UNSUPPORTED, "EXECUTORCH FP16 export is not supported.");
    ly_export_options_init(&o);
    o.int8 = true;
    expect_error(export_with(&o), LY_E_UNSUPPORTED, "EXECUTORCH INT8 export is not supported.");
    ly_export_options_init(&o);
    o.half = o.int8 = true; /* INT8 wins, as upstream warns */
    expect_error(export_with(&o), LY_E_UNSUPPORTED, "EXECUTORCH INT8 export is not supported.");
    ly_export_options_init(&o);
    o.delegate = "CoreML";
    o.device = "cuda";
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT,
                 "ExecuTorch v1 supports delegate='xnnpack' only, got 'coreml'.");
    ly_export_options_init(&o);
    o.nms = true;
    o.device = "cuda";
    expect_error(export_with(&o), LY_E_UNSUPPORTED,
                 "EXECUTORCH embedded NMS export is not supported.");
    ly_export_options_init(&o);
    o.device = "cuda:0";
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT,
                 "ExecuTorch XNNPACK export requires device='cpu'.");
    int64_t three[3] = {640, 640, 3}, neg[1] = {-1}, rect[2] = {640, 480}, odd[1] = {100},
            zero[2] = {0, 640};
    ly_export_options_init(&o);
    o.imgsz = three;
    o.imgsz_len = 3;
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT,
                 "imgsz tuple must be (height, width), got (640, 640, 3)");
    ly_export_options_init(&o);
    o.imgsz = neg;
    o.imgsz_len = 1;
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT, "imgsz values must be positive, got -1.");
    ly_export_options_init(&o);
    o.imgsz = zero;
    o.imgsz_len = 2;
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT,
                 "imgsz values must be positive, got (0, 640).");
    ly_export_options_init(&o);
    o.imgsz = odd;
    o.imgsz_len = 1;
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT, "must be divisible by 32");
    ly_export_options_init(&o);
    o.imgsz = rect;
    o.imgsz_len = 2;
    expect_error(export_with(&o), LY_E_UNSUPPORTED,
                 "Rectangular imgsz export is not validated for format 'executorch'.");
    ly_export_options_init(&o);
    o.format = "onnx";
    expect_error(export_with(&o), LY_E_INVALID_ARGUMENT, "Unsupported export format 'onnx'");
}

static void test_default_output_path(void **state)
{
    (void)state;
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(ly_test_scratch()), 0);
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t small[1] = {64};
    o.imgsz = small;
    o.imgsz_len = 1;
    o.model_path = "/somewhere/My.Model.safetensors";
    char written[256];
    assert_int_equal(ly_model_export(model, &o, written, sizeof written), LY_OK);
    assert_string_equal(written, "weights/My.Model.pte");
    assert_true(file_exists("weights/My.Model.pte.json"));
    o.model_path = NULL;
    assert_int_equal(ly_model_export(model, &o, written, sizeof written), LY_OK);
    assert_string_equal(written, "weights/LibreYOLO9t.pte");
    /* a stem only from checkpoint suffixes; a short out_path is refused before writing */
    o.model_path = "model.bin";
    unlink("weights/LibreYOLO9t.pte");
    expect_error(ly_model_export(model, &o, written, 4), LY_E_INVALID_ARGUMENT,
                 "weights/LibreYOLO9t.pte");
    assert_false(file_exists("weights/LibreYOLO9t.pte"));
    assert_int_equal(chdir(cwd), 0);
}

/* ---- the sidecar ------------------------------------------------------------- */

static void test_sidecar_keys(void **state)
{
    (void)state;
    char out[700], side[720];
    ly_test_scratch_path("side/m.pte", out, sizeof out);
    snprintf(side, sizeof side, "%s.json", out);
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t small[2] = {64, 64};
    o.imgsz = small;
    o.imgsz_len = 2;
    o.output_path = out;
    o.device = "AUTO"; /* accepted, as "cpu" */
    o.delegate = "XNNPACK";
    assert_int_equal(ly_model_export(model, &o, NULL, 0), LY_OK);
    size_t n;
    char *text = (char *)read_all(side, &n);
    assert_non_null(text);
    /* json.dumps(metadata, indent=2, sort_keys=True), no trailing newline */
    static const char *const expected = "{\n"
                                        "  \"default_task\": \"detect\",\n"
                                        "  \"dynamic\": false,\n"
                                        "  \"executorch_delegate\": \"xnnpack\",\n"
                                        "  \"executorch_delegate_partitions\": 3,\n"
                                        "  \"executorch_version\": \"1.2.0\",\n"
                                        "  \"imgsz\": 64,\n"
                                        "  \"imgsz_h\": 64,\n"
                                        "  \"imgsz_w\": 64,\n"
                                        "  \"libreyolo_version\": \"" LY_VERSION_STRING "\",\n"
                                        "  \"model_family\": \"yolo9\",\n"
                                        "  \"model_size\": \"t\",\n"
                                        "  \"names\": {\n"
                                        "    \"0\": \"class_0\",\n"
                                        "    \"1\": \"class_1\",\n"
                                        "    \"2\": \"class_2\",\n"
                                        "    \"3\": \"class_3\"\n"
                                        "  },\n"
                                        "  \"nb_classes\": 4,\n"
                                        "  \"nc\": 4,\n"
                                        "  \"obb\": false,\n"
                                        "  \"precision\": \"fp32\",\n"
                                        "  \"schema_version\": \"1.0\",\n"
                                        "  \"size\": \"t\",\n"
                                        "  \"supported_tasks\": [\n"
                                        "    \"detect\"\n"
                                        "  ],\n"
                                        "  \"task\": \"detect\"\n"
                                        "}";
    assert_string_equal(text, expected);
    free(text);
}

/* ---- the atomic commit --------------------------------------------------------- */

static const char NEW_PROGRAM[] = "new program bytes", NEW_SIDECAR[] = "{\"new\": true}";
static const char OLD_PROGRAM[] = "old program", OLD_SIDECAR[] = "{\"old\": true}";

typedef enum pair_state { NOTHING, OLD_PAIR, NEW_PAIR, MIXED } pair_state;

static pair_state state_of(const char *program)
{
    char side[800];
    snprintf(side, sizeof side, "%s.json", program);
    size_t np = 0, ns = 0;
    char *p = (char *)read_all(program, &np), *s = (char *)read_all(side, &ns);
    pair_state st = MIXED;
    if (!p && !s)
        st = NOTHING;
    else if (p && s && strcmp(p, OLD_PROGRAM) == 0 && strcmp(s, OLD_SIDECAR) == 0)
        st = OLD_PAIR;
    else if (p && s && strcmp(p, NEW_PROGRAM) == 0 && strcmp(s, NEW_SIDECAR) == 0)
        st = NEW_PAIR;
    free(p);
    free(s);
    return st;
}

/* Entries of `dir` other than the pair (temporaries, backups, journals). */
static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "m.pte") &&
            strcmp(e->d_name, "m.pte.json"))
            n++;
    closedir(d);
    return n;
}

static void reset_dir(const char *dir, bool with_old)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    if (!with_old) return;
    assert_int_equal(mkdir(dir, 0777), 0);
    char p[700], s[720];
    snprintf(p, sizeof p, "%s/m.pte", dir);
    snprintf(s, sizeof s, "%s/m.pte.json", dir);
    write_all(p, OLD_PROGRAM, strlen(OLD_PROGRAM));
    write_all(s, OLD_SIDECAR, strlen(OLD_SIDECAR));
}

static ly_status commit(const char *program)
{
    return ly_pte_commit_pair(program, NEW_PROGRAM, strlen(NEW_PROGRAM), NEW_SIDECAR,
                              strlen(NEW_SIDECAR));
}

static void test_commit_faults(void **state)
{
    (void)state;
    char dir[600], program[700];
    snprintf(dir, sizeof dir, "%s/%s", commit_root, "pair");
    snprintf(program, sizeof program, "%s/m.pte", dir);
    for (int with_old = 0; with_old < 2; with_old++) {
        pair_state before = with_old ? OLD_PAIR : NOTHING;
        /* How many steps a clean commit takes. */
        reset_dir(dir, with_old);
        ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
        assert_int_equal(commit(program), LY_OK);
        int steps = ly_pte_fault_steps();
        assert_true(steps > 10);
        assert_int_equal(state_of(program), NEW_PAIR);
        assert_int_equal(leftovers(dir), 0);
        for (int k = 1; k <= steps; k++) {
            /* A full disk (or any error) at step k: the previous state, nothing left over,
             * unless the failure hit only the tidying after the commit point. */
            reset_dir(dir, with_old);
            ly_pte_fault_inject(k, LY_PTE_FAULT_ERROR, ENOSPC);
            ly_status st = commit(program);
            pair_state now = state_of(program);
            if (st == LY_OK) {
                assert_int_equal(now, NEW_PAIR);
            } else {
                if (now != before)
                    fail_msg("error at step %d/%d (with_old %d): state %d, %s", k, steps, with_old,
                             (int)now, ly_last_error());
                assert_int_equal(leftovers(dir), 0);
            }
            ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
            bool recovered;
            assert_int_equal(ly_pte_recover(program, &recovered), LY_OK);
            assert_int_equal(leftovers(dir), 0);
            /* A crash at step k: whatever is on disk, the next reader (recovery)
             * sees the old pair or the new one. */
            reset_dir(dir, with_old);
            ly_pte_fault_inject(k, LY_PTE_FAULT_CRASH, 0);
            st = commit(program);
            assert_int_equal(st, LY_E_INTERNAL);
            ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
            assert_int_equal(ly_pte_recover(program, &recovered), LY_OK);
            now = state_of(program);
            if (now != before && now != NEW_PAIR)
                fail_msg("crash at step %d/%d (with_old %d): state %d after recovery", k, steps,
                         with_old, (int)now);
            /* ... and nothing the killed commit made is left beside it */
            if (leftovers(dir) != 0)
                fail_msg("crash at step %d/%d (with_old %d): %d stray files after recovery", k,
                         steps, with_old, leftovers(dir));
            /* and a later commit works */
            assert_int_equal(commit(program), LY_OK);
            assert_int_equal(state_of(program), NEW_PAIR);
        }
    }
    ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
}

/* A failure during the rollback itself: the backups are kept and named, and
 * the journal lets the next reader restore the old pair. */
static void test_commit_rollback_incomplete(void **state)
{
    (void)state;
    char dir[600], program[700];
    snprintf(dir, sizeof dir, "%s/%s", commit_root, "pair2");
    snprintf(program, sizeof program, "%s/m.pte", dir);
    reset_dir(dir, true);
    ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
    assert_int_equal(commit(program), LY_OK);
    int steps = ly_pte_fault_steps();
    bool seen = false;
    for (int k = 1; k <= steps && !seen; k++) {
        for (int j = k + 1; j <= k + 6 && !seen; j++) {
            reset_dir(dir, true);
            ly_pte_fault_inject(k, LY_PTE_FAULT_ERROR, EIO);
            ly_pte_fault_also(j);
            ly_status st = commit(program);
            ly_pte_fault_inject(0, LY_PTE_FAULT_ERROR, 0);
            if (st == LY_OK || !strstr(ly_last_error(), "rollback was incomplete")) continue;
            seen = true;
            assert_non_null(strstr(ly_last_error(),
                                   "ExecuTorch artifact commit failed and rollback was "
                                   "incomplete. Recovery backups were retained at: "));
            assert_true(leftovers(dir) > 0);
            bool recovered = false;
            assert_int_equal(ly_pte_recover(program, &recovered), LY_OK);
            assert_true(recovered);
            assert_int_equal(state_of(program), OLD_PAIR);
            assert_int_equal(leftovers(dir), 0);
        }
    }
    assert_true(seen);
}

static void test_commit_hostile_journal(void **state)
{
    (void)state;
    char dir[600], program[700], journal[720];
    snprintf(dir, sizeof dir, "%s/%s", commit_root, "pair3");
    snprintf(program, sizeof program, "%s/m.pte", dir);
    snprintf(journal, sizeof journal, "%s/.m.pte.commit", dir);
    reset_dir(dir, true);
    /* A journal naming files outside the pair is refused, not obeyed. */
    const char *bad = "libreyolo-export-commit 1\nstate pending\nfile m.pte\t\t../../etc/x\n"
                      "file m.pte.json\t\t\n";
    write_all(journal, bad, strlen(bad));
    expect_error(ly_pte_recover(program, NULL), LY_E_FORMAT, "is malformed");
    assert_int_equal(state_of(program), OLD_PAIR);
    unlink(journal);
}

/* ---- lowering ------------------------------------------------------------------ */

static uint64_t seed = 42;

static float rnd(void)
{
    return (float)(ly_test_splitmix64(&seed) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void conv(ly_graph *g, const char *name, ly_graph_value x, int64_t cin, int64_t cout,
                 int64_t k, int64_t stride, int64_t groups, int64_t act, ly_graph_value residual,
                 ly_graph_value *out)
{
    *out = ly_test_conv(g, name, x, cin, cout, k, stride, groups, act, residual, rnd,
                        1.0f / sqrtf((float)(cin / groups * k * k)));
}

/* Every op the lowering maps, in one graph: conv (plain, grouped, depthwise,
 * each activation, residual), pooling (average counting padding stays
 * portable), nearest upsample (portable), bilinear resize, concat of five,
 * slices, add, sigmoid, silu, reshape, transpose, dfl. */
static ly_graph *make_graph(void)
{
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, b, c, d, e, f, h, u, r, cat, s1, s2, sum, sg, sl, re, tr, pooled, dfl_in,
        dfl;
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &x), LY_OK);
    conv(g, "c0", x, 3, 16, 3, 2, 1, LY_ACT_SILU, LY_GRAPH_NONE, &a);
    conv(g, "c1", a, 16, 16, 3, 1, 4, LY_ACT_RELU, LY_GRAPH_NONE, &b);
    conv(g, "dw", b, 16, 16, 3, 1, 16, LY_ACT_LEAKY_RELU, a, &c);
    conv(g, "c2", c, 16, 8, 1, 1, 1, LY_ACT_SIGMOID, LY_GRAPH_NONE, &d);
    ly_pool2d_params k = LY_POOL2D_DEFAULTS;
    k.kernel[0] = k.kernel[1] = 3;
    k.stride[0] = k.stride[1] = 2;
    k.padding[0] = k.padding[1] = 1;
    assert_int_equal(ly_graph_max_pool2d(g, "mp", c, &k, &e), LY_OK);
    k.count_include_pad = 1;
    assert_int_equal(ly_graph_avg_pool2d(g, "ap_pad", e, &k, &pooled), LY_OK);
    assert_int_equal(ly_graph_upsample_nearest2d(g, "up", pooled, 2, &u), LY_OK);
    conv(g, "c3", u, 16, 8, 3, 1, 1, LY_ACT_NONE, LY_GRAPH_NONE, &f);
    ly_resize_bilinear2d_params rp = LY_RESIZE_BILINEAR2D_DEFAULTS;
    rp.half_pixel_centers = 1;
    assert_int_equal(ly_graph_resize_bilinear2d(g, "rs", f, 16, 16, &rp, &r), LY_OK);
    conv(g, "c4", e, 16, 8, 1, 1, 1, LY_ACT_SILU, LY_GRAPH_NONE, &h);
    ly_graph_value up2;
    assert_int_equal(ly_graph_upsample_nearest2d(g, "up2", h, 2, &up2), LY_OK);
    ly_graph_value parts[5] = {a, d, r, up2, b};
    assert_int_equal(ly_graph_concat(g, "cat", 5, parts, 1, &cat), LY_OK);
    assert_int_equal(ly_graph_slice(g, "s1", cat, 1, 4, 16, &s1), LY_OK);
    assert_int_equal(ly_graph_slice(g, "s2", cat, 1, 20, 16, &s2), LY_OK);
    assert_int_equal(ly_graph_binary(g, LY_OP_ADD, "sum", s1, s2, &sum), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_SIGMOID, "sg", sum, &sg), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_SILU, "sl", sg, &sl), LY_OK);
    int64_t shape[3] = {1, 16, -1};
    assert_int_equal(ly_graph_reshape(g, "re", sl, 3, shape, &re), LY_OK);
    int perm[3] = {0, 2, 1};
    assert_int_equal(ly_graph_permute(g, "tr", re, 3, perm, &tr), LY_OK);
    conv(g, "c5", cat, 56, 64, 1, 1, 1, LY_ACT_NONE, LY_GRAPH_NONE, &dfl_in);
    int64_t dshape[3] = {1, 64, -1};
    ly_graph_value dfl_flat;
    assert_int_equal(ly_graph_reshape(g, "dre", dfl_in, 3, dshape, &dfl_flat), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_DFL, "dfl", dfl_flat, &dfl), LY_OK);
    assert_int_equal(ly_graph_output(g, tr, "tr"), LY_OK);
    assert_int_equal(ly_graph_output(g, dfl, "dfl"), LY_OK);
    assert_int_equal(ly_graph_output(g, cat, "cat"), LY_OK);
    return g;
}

static double rel_diff(const ly_tensor *a, const ly_tensor *b)
{
    int64_t n = ly_tensor_numel(a);
    double diff = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
        if (fabs(x - y) > diff) diff = fabs(x - y);
        if (fabs(x) > mag) mag = fabs(x);
    }
    return mag > 0 ? diff / mag : diff;
}

/* Lower `g` at `in`'s shape, check the program keeps only packed constants in
 * its partitions, and run it back (1 and 2 threads) to the graph's numbers. */
static void lower_and_compare(ly_graph *g, const ly_tensor *in, int kernel_calls,
                              int min_partitions, double tolerance, bool as_graphs,
                              int merged_calls, int msda_forms, int folded_sdpa)
{
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    assert_int_equal(ly_kernels_capture_begin(), LY_OK);
    ly_lower_result r;
    ly_status st = lower_graph(g, in, &r);
    assert_int_equal(ly_kernels_capture_end(), LY_OK);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    assert_true(r.delegate_partitions >= min_partitions);
    assert_int_equal(r.kernel_calls, kernel_calls);
    expect_packed_constants_only(r.program, r.size, "lowered graph");
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(r.program, r.size, "lowered", &p), LY_OK);
    /* the delegates as our graphs (the default), then as XNNPACK operators */
    for (int operators = 0; operators <= 1; operators++) {
        if (operators) setenv("LIBREYOLO_XNNPACK", "operators", 1);
        ly_et_method *m;
        st = ly_et_method_load(p, "lowered", &m);
        unsetenv("LIBREYOLO_XNNPACK");
        if (!ly_et_xnnpack_available()) {
            expect_error(st, LY_E_UNSUPPORTED, "does not provide XnnpackBackend");
        } else {
            if (st != LY_OK) fail_msg("%s", ly_last_error());
            size_t delegates, as_operators;
            ly_et_method_counts(m, &delegates, NULL);
            as_operators = ly_et_method_operator_delegates(m);
            assert_int_equal(as_operators, operators || !as_graphs ? delegates : 0);
            /* runs of delegates and portable calls as one graph: not where a
             * delegate runs operators */
            assert_int_equal(ly_et_method_merged_calls(m),
                             operators || !as_graphs ? 0 : (size_t)merged_calls);
            /* ms_deform_attn's portable form runs as the op in merged runs */
            assert_int_equal(ly_et_method_recognised_msda(m),
                             operators || !as_graphs ? 0 : (size_t)msda_forms);
            assert_int_equal(ly_et_method_folded_sdpa(m),
                             operators || !as_graphs ? 0 : (size_t)folded_sdpa);
            assert_int_equal(ly_graph_run(ctx, 1, in, 1), LY_OK);
            int outputs = ly_graph_output_count(g);
            for (int threads = 1; threads <= 2; threads++) {
                assert_int_equal(ly_et_method_execute(m, in, 1, threads), LY_OK);
                assert_int_equal(ly_et_method_num_outputs(m), outputs);
                for (int i = 0; i < outputs; i++) {
                    ly_tensor want, got;
                    assert_int_equal(ly_graph_get_output(ctx, i, &want, NULL), LY_OK);
                    assert_int_equal(ly_et_method_output(m, (size_t)i, &got), LY_OK);
                    assert_int_equal(got.ndim, want.ndim);
                    for (int k = 0; k < want.ndim; k++)
                        assert_int_equal(got.shape[k], want.shape[k]);
                    double rel = rel_diff(&want, &got);
                    if (rel > tolerance) fail_msg("output %d differs by %g relative", i, rel);
                }
            }
            ly_et_method_free(m);
        }
    }
    ly_pte_program_free(p);
    free(r.program);
    ly_graph_ctx_free(ctx);
}

static float *random_input(ly_tensor *in, int64_t side)
{
    int64_t ishape[4] = {1, 3, side, side};
    assert_int_equal(ly_tensor_init(in, NULL, LY_F32, 4, ishape), LY_OK);
    float *data = malloc((size_t)(3 * side * side) * sizeof(float));
    for (int64_t i = 0; i < 3 * side * side; i++)
        data[i] = rnd();
    in->data = data;
    return data;
}

static void test_lower_every_op(void **state)
{
    (void)state;
    ly_graph *g = make_graph();
    ly_tensor in;
    float *data = random_input(&in, 32);
    /* two upsamples and the padded average pool: every call runs in one graph */
    lower_and_compare(g, &in, 3, 2, 1e-5, true, 5, 0, 0);
    free(data);
    ly_graph_free(g);
}

/* RMSNorm as the exporter writes it out (Square, a mean as a fully-connected
 * node, reciprocal square root, two Multiplies) runs as our rms_norm op in the
 * delegate's graph, and as XNNPACK operators, to the graph's numbers. (A
 * delegate with a node that has no op of ours: test_pte_runtime.) */
static void test_lower_rms_norm(void **state)
{
    (void)state;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, a, w, n;
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &x), LY_OK);
    conv(g, "c0", x, 3, 8, 3, 1, 1, LY_ACT_NONE, LY_GRAPH_NONE, &a);
    int64_t c = 16;
    void *wd;
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &c, &w, &wd), LY_OK);
    for (int i = 0; i < c; i++)
        ((float *)wd)[i] = 1.0f + 0.1f * rnd();
    ly_graph_value in[2] = {a, w};
    ly_norm_params p = {.eps = 1e-6};
    assert_int_equal(ly_graph_node(g, LY_OP_RMS_NORM, "rms", 2, in, &p, 1, &n), LY_OK);
    assert_int_equal(ly_graph_output(g, n, "rms"), LY_OK);
    ly_tensor input;
    float *data = random_input(&input, 16);
    lower_and_compare(g, &input, 0, 1, 1e-5, true, 1, 0, 0); /* one delegate: a run of one */
    free(data);
    ly_graph_free(g);
}

static ly_graph_value random_constant(ly_graph *g, int ndim, const int64_t *shape, float scale)
{
    ly_graph_value v;
    void *d;
    assert_int_equal(ly_graph_constant(g, LY_F32, ndim, shape, &v, &d), LY_OK);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        ((float *)d)[i] = scale * rnd();
    return v;
}

static ly_graph_value t_node(ly_graph *g, ly_op op, const char *name, int n, ly_graph_value *in,
                             const void *params)
{
    ly_graph_value out;
    assert_int_equal(ly_graph_node(g, op, name, n, in, params, 1, &out), LY_OK);
    return out;
}

static ly_graph_value t_linear(ly_graph *g, const char *name, ly_graph_value x, int64_t n,
                               int64_t k)
{
    int64_t ws[2] = {n, k};
    ly_graph_value in[3] = {x, random_constant(g, 2, ws, 1.0f / sqrtf((float)k)),
                            random_constant(g, 1, &n, 0.1f)};
    return t_node(g, LY_OP_LINEAR, name, 3, in, NULL);
}

static ly_graph_value t_layer_norm(ly_graph *g, const char *name, ly_graph_value x, int64_t c)
{
    ly_graph_value in[3] = {x, random_constant(g, 1, &c, 1.0f), random_constant(g, 1, &c, 0.1f)};
    ly_norm_params p = {.eps = 1e-6};
    return t_node(g, LY_OP_LAYER_NORM, name, 3, in, &p);
}

/* A ViT block's ops, as the ViT recipe builds them with the manual attention:
 * patch embedding (conv, flatten, tokens), class token and position embedding
 * (constants the partitions read as inputs), layer norm (portable), qkv
 * linear, heads split by reshape/permute/slice, scale, q·kᵀ, softmax, ·v,
 * merge, projection, residual, GELU MLP, class-token pooling, head. */
static void test_lower_transformer_ops(void **state)
{
    (void)state;
    const int64_t E = 32, H = 2, D = E / H, T = 17; /* 16 patches + the class token */
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x;
    assert_int_equal(ly_graph_input(g, "images", LY_F32, 4, &x), LY_OK);
    int64_t ws[4] = {E, 3, 4, 4};
    ly_conv2d_params cp = LY_CONV2D_DEFAULTS;
    cp.stride[0] = cp.stride[1] = 4;
    ly_graph_value tok;
    assert_int_equal(ly_graph_conv2d(g, "patch", x, random_constant(g, 4, ws, 0.2f),
                                     random_constant(g, 1, &E, 0.1f), LY_GRAPH_NONE, &cp, &tok),
                     LY_OK);
    int64_t flat[3] = {1, E, T - 1};
    int to_tokens[3] = {0, 2, 1};
    assert_int_equal(ly_graph_reshape(g, "flat", tok, 3, flat, &tok), LY_OK);
    assert_int_equal(ly_graph_permute(g, "tokens", tok, 3, to_tokens, &tok), LY_OK);
    int64_t cls_shape[3] = {1, 1, E}, pos_shape[3] = {1, T, E};
    ly_graph_value with_cls[2] = {random_constant(g, 3, cls_shape, 0.5f), tok};
    assert_int_equal(ly_graph_concat(g, "cls", 2, with_cls, 1, &tok), LY_OK);
    assert_int_equal(
        ly_graph_binary(g, LY_OP_ADD, "pos", tok, random_constant(g, 3, pos_shape, 0.5f), &tok),
        LY_OK);
    ly_graph_value qkv = t_linear(g, "qkv", t_layer_norm(g, "norm1", tok, E), 3 * E, E);
    int64_t split[5] = {1, T, 3, H, D};
    int heads[5] = {2, 0, 3, 1, 4};
    assert_int_equal(ly_graph_reshape(g, "split", qkv, 5, split, &qkv), LY_OK);
    assert_int_equal(ly_graph_permute(g, "heads", qkv, 5, heads, &qkv), LY_OK);
    ly_graph_value part[3];
    int64_t one[4] = {1, H, T, D};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ly_graph_slice(g, "part", qkv, 0, i, 1, &part[i]), LY_OK);
        assert_int_equal(ly_graph_reshape(g, "part", part[i], 4, one, &part[i]), LY_OK);
    }
    int64_t scalar = 1;
    ly_graph_value scale, q;
    void *sd;
    assert_int_equal(ly_graph_constant(g, LY_F32, 1, &scalar, &scale, &sd), LY_OK);
    *(float *)sd = 0.25f;
    assert_int_equal(ly_graph_binary(g, LY_OP_MUL, "scale", part[0], scale, &q), LY_OK);
    ly_matmul_params tb = {.transpose_b = 1};
    ly_graph_value qk[2] = {q, part[1]};
    ly_graph_value s = t_node(g, LY_OP_MATMUL, "scores", 2, qk, &tb);
    ly_axis_params last = {.axis = -1};
    s = t_node(g, LY_OP_SOFTMAX, "softmax", 1, &s, &last);
    ly_graph_value pv[2] = {s, part[2]};
    ly_graph_value o = t_node(g, LY_OP_MATMUL, "values", 2, pv, NULL);
    int back[4] = {0, 2, 1, 3};
    int64_t merged[3] = {1, T, E};
    assert_int_equal(ly_graph_permute(g, "merge", o, 4, back, &o), LY_OK);
    assert_int_equal(ly_graph_reshape(g, "merge", o, 3, merged, &o), LY_OK);
    assert_int_equal(
        ly_graph_binary(g, LY_OP_ADD, "residual", tok, t_linear(g, "proj", o, E, E), &tok), LY_OK);
    ly_graph_value m = t_linear(g, "fc1", t_layer_norm(g, "norm2", tok, E), 4 * E, E);
    assert_int_equal(ly_graph_unary(g, LY_OP_GELU, "gelu", m, &m), LY_OK);
    assert_int_equal(
        ly_graph_binary(g, LY_OP_ADD, "mlp", tok, t_linear(g, "fc2", m, E, 4 * E), &tok), LY_OK);
    int64_t pooled[2] = {1, E};
    ly_graph_value cls;
    assert_int_equal(ly_graph_slice(g, "pool", t_layer_norm(g, "norm", tok, E), 1, 0, 1, &cls),
                     LY_OK);
    assert_int_equal(ly_graph_reshape(g, "pool", cls, 2, pooled, &cls), LY_OK);
    assert_int_equal(ly_graph_output(g, t_linear(g, "head", cls, 10, E), "logits"), LY_OK);
    assert_int_equal(ly_graph_output(g, s, "attention"), LY_OK);
    ly_tensor in;
    float *data = random_input(&in, 16);
    /* the three layer norms are portable: every call runs in one graph */
    lower_and_compare(g, &in, 3, 3, 1e-5, true, 7, 0, 0);
    free(data);
    ly_graph_free(g);
}

/* Multi-scale deformable attention between linear layers, as a DETR decoder
 * reads it: tokens x [1, S, 32] give the value (all S) and, from the first
 * Lq, the sampling locations and weights; levels `hw`, points per level
 * `points` (ragged: the 5-d form with num_points, as D-FINE's). */
static ly_graph *msda_graph(int L, const int64_t *hw, const int64_t *points, bool ragged)
{
    const int64_t E = 32, H = 2, C = 16, Lq = 6;
    int64_t S = 0, K = 0;
    for (int l = 0; l < L; l++) {
        S += hw[2 * l] * hw[2 * l + 1];
        K += points[l];
    }
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, value, q, loc, attn, hw_c, np_c = LY_GRAPH_NONE, out;
    assert_int_equal(ly_graph_input(g, "tokens", LY_F32, 3, &x), LY_OK);
    int64_t vshape[4] = {1, S, H, C};
    assert_int_equal(
        ly_graph_reshape(g, "value", t_linear(g, "value_proj", x, E, E), 4, vshape, &value), LY_OK);
    assert_int_equal(ly_graph_slice(g, "queries", x, 1, 0, Lq, &q), LY_OK);
    int64_t lshape[6] = {1, Lq, H, L, points[0], 2}, lragged[5] = {1, Lq, H, K, 2};
    assert_int_equal(
        ly_graph_unary(g, LY_OP_SIGMOID, "loc", t_linear(g, "offsets", q, H * K * 2, E), &loc),
        LY_OK);
    assert_int_equal(
        ly_graph_reshape(g, "loc", loc, ragged ? 5 : 6, ragged ? lragged : lshape, &loc), LY_OK);
    int64_t ashape[4] = {1, Lq, H, K}, aregular[5] = {1, Lq, H, L, points[0]};
    assert_int_equal(
        ly_graph_reshape(g, "weights", t_linear(g, "weights_proj", q, H * K, E), 4, ashape, &attn),
        LY_OK);
    ly_axis_params last = {.axis = -1};
    attn = t_node(g, LY_OP_SOFTMAX, "softmax", 1, &attn, &last);
    if (!ragged) assert_int_equal(ly_graph_reshape(g, "weights", attn, 5, aregular, &attn), LY_OK);
    int64_t hw_shape[2] = {L, 2}, n = L;
    void *d;
    assert_int_equal(ly_graph_constant(g, LY_I64, 2, hw_shape, &hw_c, &d), LY_OK);
    memcpy(d, hw, (size_t)(2 * L) * sizeof *hw);
    if (ragged) {
        assert_int_equal(ly_graph_constant(g, LY_I64, 1, &n, &np_c, &d), LY_OK);
        memcpy(d, points, (size_t)L * sizeof *points);
    }
    ly_graph_value in[5] = {value, hw_c, loc, attn, np_c};
    out = t_node(g, LY_OP_MS_DEFORM_ATTN, "msda", ragged ? 5 : 4, in, NULL);
    assert_int_equal(ly_graph_output(g, t_linear(g, "out_proj", out, E, E), "out"), LY_OK);
    return g;
}

static int count_op(const ly_graph *g, ly_op op)
{
    int n = 0;
    for (int i = 0; i < ly_graph_node_count(g); i++) {
        ly_graph_node_info info;
        assert_int_equal(ly_graph_node_at(g, i, &info), LY_OK);
        n += info.op == op;
    }
    return n;
}

/* Graphs a and b give output 0 the same bits on `in`. */
static void expect_same_bits(ly_graph *a, ly_graph *b, const ly_tensor *in)
{
    ly_graph_ctx *ca, *cb;
    ly_tensor want, got;
    assert_int_equal(ly_graph_ctx_create(a, &ca), LY_OK);
    assert_int_equal(ly_graph_ctx_create(b, &cb), LY_OK);
    assert_int_equal(ly_graph_run(ca, 1, in, 1), LY_OK);
    assert_int_equal(ly_graph_run(cb, 1, in, 1), LY_OK);
    assert_int_equal(ly_graph_get_output(ca, 0, &want, NULL), LY_OK);
    assert_int_equal(ly_graph_get_output(cb, 0, &got, NULL), LY_OK);
    assert_int_equal(ly_tensor_numel(&got), ly_tensor_numel(&want));
    assert_int_equal(memcmp(want.data, got.data, (size_t)ly_tensor_numel(&want) * sizeof(float)),
                     0);
    ly_graph_ctx_free(ca);
    ly_graph_ctx_free(cb);
}

/* The portable form of ms_deform_attn the exporter writes (grid samples,
 * transposes, a batched product) is recognised back into the one op, in a
 * graph (nothing of the form left behind) and in the program's merged run, at
 * the numbers of the op: two uniform levels, ragged levels (D-FINE's) and one
 * level, whose whole-extent slices are no nodes in the program (RF-DETR's). */
static void test_msda_portable_form(void **state)
{
    (void)state;
    static const int64_t hw2[4] = {4, 4, 2, 2}, uniform[2] = {2, 2}, ragged[2] = {2, 3},
                         hw1[2] = {3, 5}, one[1] = {4};
    static const struct {
        int L;
        const int64_t *hw, *points;
        bool ragged;
    } cases[] = {{2, hw2, uniform, false}, {2, hw2, ragged, true}, {1, hw1, one, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ly_graph *g = msda_graph(cases[c].L, cases[c].hw, cases[c].points, cases[c].ragged);
        int64_t S = 0;
        for (int l = 0; l < cases[c].L; l++)
            S += cases[c].hw[2 * l] * cases[c].hw[2 * l + 1];
        int64_t ishape[3] = {1, S, 32};
        ly_tensor in;
        assert_int_equal(ly_tensor_init(&in, NULL, LY_F32, 3, ishape), LY_OK);
        float *data = malloc((size_t)(S * 32) * sizeof *data);
        for (int64_t i = 0; i < S * 32; i++)
            data[i] = rnd();
        in.data = data;
        ly_tensor *shapes = calloc((size_t)ly_graph_value_count(g), sizeof *shapes);
        assert_int_equal(ly_graph_infer(g, 1, &in, shapes), LY_OK);
        ly_graph *portable = NULL;
        assert_int_equal(ly_export_msda_portable(g, shapes, &portable), LY_OK);
        assert_non_null(portable);
        assert_int_equal(count_op(portable, LY_OP_GRID_SAMPLE), cases[c].L);
        /* the program: the grid samples are its portable calls */
        lower_and_compare(portable, &in, cases[c].L, 2, 1e-5, true, 2 + cases[c].L, 1, 0);
        /* the graph: back to one node, the form's own nodes gone */
        int found = -1, before = ly_graph_node_count(portable);
        assert_int_equal(ly_export_msda_recognise(portable, 1, &in, &found), LY_OK);
        assert_int_equal(found, 1);
        assert_int_equal(count_op(portable, LY_OP_MS_DEFORM_ATTN), 1);
        assert_int_equal(count_op(portable, LY_OP_GRID_SAMPLE), 0);
        assert_int_equal(count_op(portable, LY_OP_MATMUL), 0);
        assert_true(ly_graph_node_count(portable) < before);
        expect_same_bits(g, portable, &in);
        ly_graph_free(portable);
        ly_graph_free(g);
        free(shapes);
        free(data);
    }
}

/* Attention on tokens-first q, k, v (LY_SDPA_BNHD, as RF-DETR's and the
 * DETR decoders' are built) between linear layers; `heads_first`: the same
 * written as the exporter writes it, heads-first attention between
 * transposes; `scaled`: q times one constant value (after its transpose
 * where heads first), with the attention's own scale 1 (as a program's manual
 * attention, ViT's, reads back) or 0.5. */
static ly_graph *tokens_first_graph(bool heads_first, double scaled)
{
    const int64_t E = 32, H = 4, D = E / H, T = 10;
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_graph_value x, qkv[3], out;
    assert_int_equal(ly_graph_input(g, "tokens", LY_F32, 3, &x), LY_OK);
    int64_t split[4] = {1, T, H, D}, merged[3] = {1, T, E};
    int swap[4] = {0, 2, 1, 3};
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            ly_graph_reshape(g, names[i], t_linear(g, names[i], x, E, E), 4, split, &qkv[i]),
            LY_OK);
        if (heads_first)
            assert_int_equal(ly_graph_permute(g, "heads", qkv[i], 4, swap, &qkv[i]), LY_OK);
    }
    ly_sdpa_params p = {.layout = heads_first ? LY_SDPA_BHND : LY_SDPA_BNHD};
    if (scaled) {
        int64_t one = 1;
        ly_graph_value c;
        void *value;
        assert_int_equal(ly_graph_constant(g, LY_F32, 1, &one, &c, &value), LY_OK);
        *(float *)value = 0.375f;
        assert_int_equal(ly_graph_binary(g, LY_OP_MUL, "q.scale", qkv[0], c, &qkv[0]), LY_OK);
        p.scale = scaled;
    }
    out = t_node(g, LY_OP_SDPA, "attention", 3, qkv, &p);
    if (heads_first) assert_int_equal(ly_graph_permute(g, "tokens", out, 4, swap, &out), LY_OK);
    assert_int_equal(ly_graph_reshape(g, "merge", out, 3, merged, &out), LY_OK);
    assert_int_equal(ly_graph_output(g, t_linear(g, "proj", out, E, E), "out"), LY_OK);
    return g;
}

/* Tokens-first attention, which the exporter writes between heads-first
 * transposes (XNNPACK has no other layout), runs tokens first again: in the
 * program's merged run, and in a graph, where the transposes go and the
 * numbers are the tokens-first graph's, bit for bit. */
static void test_sdpa_tokens_first_form(void **state)
{
    (void)state;
    int64_t ishape[3] = {1, 10, 32};
    ly_tensor in;
    assert_int_equal(ly_tensor_init(&in, NULL, LY_F32, 3, ishape), LY_OK);
    float data[320];
    for (int i = 0; i < 320; i++)
        data[i] = rnd();
    in.data = data;
    uint64_t weights = seed;
    ly_graph *g = tokens_first_graph(false, 0);
    seed = weights;
    ly_graph *written = tokens_first_graph(true, 0); /* the same weights */
    lower_and_compare(g, &in, 0, 1, 1e-5, true, 1, 0, 1);
    int folded = 0, removed = 0;
    assert_int_equal(ly_graph_fold_sdpa_transposes(written, &folded), LY_OK);
    assert_int_equal(folded, 1);
    assert_int_equal(ly_graph_prune(written, &removed), LY_OK);
    assert_int_equal(removed, 4); /* three transposes and the heads-first attention */
    assert_int_equal(count_op(written, LY_OP_PERMUTE), 0);
    expect_same_bits(g, written, &in);
    ly_graph_free(written);
    ly_graph_free(g);
    /* q scaled after its transpose: by the attention itself where it scales
     * by 1, else before the transpose */
    for (int attention_scales = 0; attention_scales < 2; attention_scales++) {
        double scale = attention_scales ? 0.5 : 1.0;
        seed = weights;
        g = tokens_first_graph(false, scale);
        seed = weights;
        written = tokens_first_graph(true, scale);
        assert_int_equal(ly_graph_fold_sdpa_transposes(written, &folded), LY_OK);
        assert_int_equal(folded, 1);
        assert_int_equal(ly_graph_prune(written, &removed), LY_OK);
        assert_int_equal(removed, attention_scales ? 4 : 5);
        assert_int_equal(count_op(written, LY_OP_PERMUTE), 0);
        assert_int_equal(count_op(written, LY_OP_MUL), attention_scales);
        expect_same_bits(g, written, &in);
        ly_graph_free(written);
        ly_graph_free(g);
    }
}

/* Lower `g` at `in`'s shape. */
static ly_status lower_at(ly_graph *g, const ly_tensor *in, ly_lower_result *r)
{
    return lower_graph(g, in, r);
}

static void test_lower_refusals(void **state)
{
    (void)state;
    int64_t ishape[4] = {1, 3, 8, 8};
    ly_tensor in = {.dtype = LY_F32, .ndim = 4};
    memcpy(in.shape, ishape, sizeof ishape);
    ly_lower_result r;
    /* Only a portable op: no delegate partition, upstream's wording. */
    ly_graph *g;
    ly_graph_value x, y;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    assert_int_equal(ly_graph_upsample_nearest2d(g, "up", x, 2, &y), LY_OK);
    assert_int_equal(ly_graph_output(g, y, "y"), LY_OK);
    expect_error(lower_at(g, &in, &r), LY_E_UNSUPPORTED,
                 "ExecuTorch produced no XNNPACK delegate partitions. Refusing to label a "
                 "portable-kernel-only program as XNNPACK.");
    ly_graph_free(g);
    /* An op the manifest gives no mapping is named. */
    assert_int_equal(ly_graph_create(&g), LY_OK);
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_SIGMOID, "s", x, &y), LY_OK);
    ly_graph_value z;
    ly_axis_params along = {.axis = 1};
    assert_int_equal(ly_graph_node(g, LY_OP_CUMSUM, "head.mystery", 1, &y, &along, 1, &z), LY_OK);
    assert_int_equal(ly_graph_output(g, z, "z"), LY_OK);
    expect_error(lower_at(g, &in, &r), LY_E_UNSUPPORTED,
                 "node 'head.mystery': op 'cumsum' has no ExecuTorch export mapping");
    ly_graph_free(g);
    /* A mapped op on operands its lowering does not cover. */
    assert_int_equal(ly_graph_create(&g), LY_OK);
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    assert_int_equal(ly_graph_unary(g, LY_OP_SIGMOID, "s", x, &y), LY_OK);
    ly_slice_params every_other = LY_SLICE_DEFAULTS;
    every_other.axis = 1;
    every_other.step = 2;
    assert_int_equal(ly_graph_node(g, LY_OP_SLICE, "strided", 1, &y, &every_other, 1, &z), LY_OK);
    assert_int_equal(ly_graph_output(g, z, "z"), LY_OK);
    expect_error(lower_at(g, &in, &r), LY_E_UNSUPPORTED,
                 "node 'strided': op 'slice' has no ExecuTorch export mapping for these operands");
    ly_graph_free(g);
}

/* The random YOLO9t exported at 64 and run back through ly_model_load. */
static void collect(const char *name, const ly_tensor *t, void *user)
{
    ly_tensor *out = user;
    if (strcmp(name, "predictions") != 0) return;
    int64_t n = ly_tensor_numel(t);
    out->data = malloc((size_t)n * sizeof(float));
    memcpy(out->data, t->data, (size_t)n * sizeof(float));
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof out->shape);
    out->dtype = LY_F32;
}

static void test_yolo9_round_trip(void **state)
{
    (void)state;
    char out[700];
    ly_test_scratch_path("rt/y.pte", out, sizeof out);
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t small[1] = {64};
    o.imgsz = small;
    o.imgsz_len = 1;
    o.output_path = out;
    assert_int_equal(ly_model_export(model, &o, NULL, 0), LY_OK);
    size_t program_size = 0;
    uint8_t *program = read_all(out, &program_size);
    assert_non_null(program);
    expect_packed_constants_only(program, program_size, out);
    free(program);
    ly_model *pte;
    ly_status st = ly_model_load(out, NULL, &pte);
    if (!ly_et_xnnpack_available()) {
        expect_error(st, LY_E_UNSUPPORTED, "does not provide XnnpackBackend");
        return;
    }
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    ly_model_info info;
    assert_int_equal(ly_model_get_info(pte, &info), LY_OK);
    assert_string_equal(info.family, "yolo9");
    assert_string_equal(info.size, "t");
    assert_int_equal(info.nc, 4);
    assert_int_equal(info.imgsz, 64);
    assert_string_equal(info.names[3], "class_3");
    int64_t shape[4] = {1, 3, 64, 64};
    ly_tensor in;
    assert_int_equal(ly_tensor_init(&in, NULL, LY_F32, 4, shape), LY_OK);
    float *data = malloc(3 * 64 * 64 * sizeof(float));
    for (int i = 0; i < 3 * 64 * 64; i++)
        data[i] = 0.5f + 0.5f * rnd();
    in.data = data;
    ly_tensor a = {0}, b = {0};
    assert_int_equal(ly_model_run(model, &in, collect, &a), LY_OK);
    assert_int_equal(ly_model_run(pte, &in, collect, &b), LY_OK);
    assert_non_null(a.data);
    assert_non_null(b.data);
    assert_int_equal(a.shape[1], 8);
    assert_int_equal(b.shape[1], 8);
    assert_int_equal(a.shape[2], 64 + 16 + 4);
    assert_int_equal(b.shape[2], 84);
    /* the program's delegates and upsamples run as one graph on the
     * checkpoint's providers: the checkpoint's bits */
    double rel = rel_diff(&a, &b);
    if (memcmp(a.data, b.data, (size_t)ly_tensor_numel(&a) * sizeof(float)) != 0)
        fail_msg("predictions differ (by %g relative)", rel);
    free(a.data);
    free(b.data);
    free(data);
    ly_model_free(pte);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_matrix),
        cmocka_unit_test(test_validation_order_and_wording),
        cmocka_unit_test(test_default_output_path),
        cmocka_unit_test(test_sidecar_keys),
        cmocka_unit_test(test_commit_faults),
        cmocka_unit_test(test_commit_rollback_incomplete),
        cmocka_unit_test(test_commit_hostile_journal),
        cmocka_unit_test(test_lower_every_op),
        cmocka_unit_test(test_lower_transformer_ops),
        cmocka_unit_test(test_lower_rms_norm),
        cmocka_unit_test(test_msda_portable_form),
        cmocka_unit_test(test_sdpa_tokens_first_form),
        cmocka_unit_test(test_lower_refusals),
        cmocka_unit_test(test_yolo9_round_trip),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
