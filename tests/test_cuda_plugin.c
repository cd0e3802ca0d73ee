/* SPDX-License-Identifier: MIT */
/*
 * The CUDA provider plugin (plugins/cuda): it loads and registers everywhere,
 * declines without a device (saying why), and where a GPU is present computes
 * ms_deform_attn forward and backward bit-identically to the reference.
 *
 * With LY_CUDA_BENCH=1 it also prints timings (tools/device_check_cuda.sh);
 * nothing asserts on them.
 */
/* cmocka.h needs these first. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
/* clang-format on */

#include "msda_problem.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LY_CUDA_PLUGIN_DIR

static bool listed, eligible;
static char why_not[256];

static void on_impl(const char *slot, const char *impl, bool ok, const char *why, void *user)
{
    (void)slot;
    (void)user;
    if (strcmp(impl, "cuda") != 0) return;
    listed = true;
    eligible = ok;
    snprintf(why_not, sizeof why_not, "%s", why ? why : "");
}

static bool cuda_listed(const char *slot)
{
    listed = eligible = false;
    why_not[0] = '\0';
    return ly_kernel_list(slot, on_impl, NULL) == LY_OK && listed;
}

static int setup(void **state)
{
    (void)state;
    /* Before the first resolution: plugins load once. */
    setenv("LIBREYOLO_KERNELS_PATH", LY_CUDA_PLUGIN_DIR, 1);
    unsetenv("LIBREYOLO_KERNELS");
    return 0;
}

static void test_registers_both_slots(void **state)
{
    (void)state;
    assert_true(cuda_listed(ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD)));
    assert_true(cuda_listed(ly_op_name(LY_OP_MS_DEFORM_ATTN)));
}

/* ---- No device: declines, says why, and the command shows it ------------------------ */

static void test_declines_without_device(void **state)
{
    (void)state;
    assert_true(cuda_listed(ly_op_name(LY_OP_MS_DEFORM_ATTN)));
    if (eligible) {
        print_message("skipped: a CUDA device is present\n");
        skip();
    }
    assert_true(why_not[0] != '\0');
    assert_true(strstr(why_not, "CUDA") || strstr(why_not, "cuda"));

    problem p = {.B = 1, .Lq = 2, .H = 1, .C = 3, .L = 1, .shapes = {2, 2}, .points = {1}};
    problem_init(&p, 1);
    float out[6];
    assert_int_equal(forward(&p, "cuda", out, 1), LY_E_UNAVAILABLE);
    assert_non_null(strstr(ly_last_error(), why_not));
    problem_free(&p);

    char out_path[512], cmd[1400];
    ly_test_scratch_setup(NULL);
    ly_test_scratch_path("kernels.txt", out_path, sizeof out_path);
    snprintf(cmd, sizeof cmd, "LIBREYOLO_KERNELS_PATH='%s' '%s' kernels --all > '%s' 2>&1",
             LY_CUDA_PLUGIN_DIR, LY_CLI_PATH, out_path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(out_path, "r");
    assert_non_null(f);
    char line[1024];
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (strstr(line, " cuda ") && strstr(line, "not eligible: ") && strstr(line, why_not))
            found = true;
    fclose(f);
    unlink(out_path);
    ly_test_scratch_teardown(NULL);
    assert_true(found);
}

/* ---- With a device: bit-identical to the reference ------------------------------------ */

static bool have_device(void)
{
    return cuda_listed(ly_op_name(LY_OP_MS_DEFORM_ATTN)) && eligible;
}

static void expect_same_bits(const float *want, const float *got, int64_t n, const char *what)
{
    char why[256];
    if (!msda_same_bits(want, got, n, what, why, sizeof why)) fail_msg("%s", why);
}

static void check_problem(problem *p, uint64_t seed)
{
    problem_init(p, seed);
    int64_t nv = p->B * p->len_in * p->H * p->C, ns = p->B * p->Lq * p->H * p->K,
            no = p->B * p->Lq * p->H * p->C;
    float *want = malloc((size_t)no * sizeof(float)), *got = malloc((size_t)no * sizeof(float));
    assert_int_equal(forward(p, "reference", want, 1), LY_OK);
    assert_int_equal(forward(p, "cuda", got, 1), LY_OK);
    expect_same_bits(want, got, no, "forward");
    free(want);
    free(got);
    float *gv[2], *gl[2], *ga[2];
    for (int i = 0; i < 2; i++) {
        gv[i] = malloc((size_t)nv * sizeof(float));
        gl[i] = malloc((size_t)ns * 2 * sizeof(float));
        ga[i] = malloc((size_t)ns * sizeof(float));
    }
    assert_int_equal(backward(p, "reference", gv[0], gl[0], ga[0], 1), LY_OK);
    assert_int_equal(backward(p, "cuda", gv[1], gl[1], ga[1], 1), LY_OK);
    expect_same_bits(gv[0], gv[1], nv, "grad_value");
    expect_same_bits(gl[0], gl[1], 2 * ns, "grad_locations");
    expect_same_bits(ga[0], ga[1], ns, "grad_attention_weights");
    for (int i = 0; i < 2; i++) {
        free(gv[i]);
        free(gl[i]);
        free(ga[i]);
    }
    problem_free(p);
}

static void test_parity(void **state)
{
    (void)state;
    if (!have_device()) {
        print_message("skipped: no CUDA device (%s)\n", why_not);
        skip();
    }
    problem classic = {
        .B = 2, .Lq = 3, .H = 2, .C = 4, .L = 2, .shapes = {4, 6, 2, 3}, .points = {2, 2}};
    check_problem(&classic, 0);
    problem discrete = classic;
    discrete.mode = LY_MSDA_DISCRETE;
    check_problem(&discrete, 1);
    problem ragged = {.B = 1,
                      .Lq = 7,
                      .H = 3,
                      .C = 13,
                      .L = 2,
                      .shapes = {10, 12, 5, 6},
                      .points = {4, 2},
                      .ragged = true};
    check_problem(&ragged, 2);
    problem empty_level = {.B = 1,
                           .Lq = 5,
                           .H = 2,
                           .C = 9,
                           .L = 3,
                           .shapes = {8, 8, 4, 4, 2, 2},
                           .points = {3, 0, 2},
                           .ragged = true};
    check_problem(&empty_level, 3);
    problem rtdetr = {.B = 1,
                      .Lq = 300,
                      .H = 8,
                      .C = 32,
                      .L = 3,
                      .shapes = {80, 80, 40, 40, 20, 20},
                      .points = {4, 4, 4}};
    check_problem(&rtdetr, 4);
    problem rfdetr = {
        .B = 1, .Lq = 300, .H = 16, .C = 16, .L = 1, .shapes = {24, 24}, .points = {2}};
    check_problem(&rfdetr, 5);
}

/* A graph capture sees the reference only. */
static void test_capture_declines(void **state)
{
    (void)state;
    problem p = {.B = 1, .Lq = 2, .H = 1, .C = 3, .L = 1, .shapes = {2, 2}, .points = {1}};
    problem_init(&p, 9);
    float out[6];
    assert_int_equal(ly_kernels_capture_begin(), LY_OK);
    assert_int_equal(forward(&p, "cuda", out, 1), LY_E_UNAVAILABLE);
    assert_int_equal(ly_kernels_capture_end(), LY_OK);
    problem_free(&p);
}

/* ---- Timings (LY_CUDA_BENCH=1) ---------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef ly_status (*runner)(const problem *p, const char *impl, float **bufs, int threads);

static ly_status run_forward(const problem *p, const char *impl, float **bufs, int threads)
{
    return forward(p, impl, bufs[0], threads);
}

static ly_status run_backward(const problem *p, const char *impl, float **bufs, int threads)
{
    return backward(p, impl, bufs[1], bufs[2], bufs[3], threads);
}

/* Best of `reps` after one warm-up, in ms; -1 if the implementation is absent. */
static double best_ms(runner fn, const problem *p, const char *impl, float **bufs, int threads,
                      int reps)
{
    if (fn(p, impl, bufs, threads) != LY_OK) return -1.0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        fn(p, impl, bufs, threads);
        double t = now_ms() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void test_timings(void **state)
{
    (void)state;
    const char *bench = getenv("LY_CUDA_BENCH");
    if (!bench || strcmp(bench, "1") != 0 || !have_device()) {
        print_message("skipped: timings run with LY_CUDA_BENCH=1 on a CUDA machine\n");
        skip();
    }
    char path[512];
    snprintf(path, sizeof path, "%s/libreyolo_kernels_cuda.so", LY_CUDA_PLUGIN_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    double (*kernel_ms)(void) = NULL;
    if (h) *(void **)&kernel_ms = dlsym(h, "libreyolo_kernels_cuda_last_kernel_ms");
    struct {
        const char *name;
        problem p;
    } shapes[] = {
        {"RT-DETR-R18 @640 (B1 Lq300 H8 C32 L3 P4, Len_in 8400)",
         {.B = 1,
          .Lq = 300,
          .H = 8,
          .C = 32,
          .L = 3,
          .shapes = {80, 80, 40, 40, 20, 20},
          .points = {4, 4, 4}}},
        {"RF-DETR-Nano @384 (B1 Lq300 H16 C16 L1 P2, 24x24)",
         {.B = 1, .Lq = 300, .H = 16, .C = 16, .L = 1, .shapes = {24, 24}, .points = {2}}},
        {"batch 8 RT-DETR (B8 Lq300 H8 C32 L3 P4)",
         {.B = 8,
          .Lq = 300,
          .H = 8,
          .C = 32,
          .L = 3,
          .shapes = {80, 80, 40, 40, 20, 20},
          .points = {4, 4, 4}}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        problem *p = &shapes[i].p;
        problem_init(p, 42);
        int64_t nv = p->B * p->len_in * p->H * p->C, ns = p->B * p->Lq * p->H * p->K,
                no = p->B * p->Lq * p->H * p->C;
        float *bufs[4] = {malloc((size_t)no * 4), malloc((size_t)nv * 4), malloc((size_t)ns * 8),
                          malloc((size_t)ns * 4)};
        printf("%s\n", shapes[i].name);
        struct {
            const char *what;
            runner fn;
        } passes[] = {{"forward", run_forward}, {"backward", run_backward}};
        for (int k = 0; k < 2; k++) {
            double ref = best_ms(passes[k].fn, p, "reference", bufs, 1, 3);
            double avx1 = best_ms(passes[k].fn, p, "avx2", bufs, 1, 5);
            double avxn = best_ms(passes[k].fn, p, "avx2", bufs, 0, 5);
            double cuda = best_ms(passes[k].fn, p, "cuda", bufs, 0, 20);
            double kern = kernel_ms ? kernel_ms() : -1.0;
            printf("  %-8s reference(1t) %9.3f ms | avx2(1t) %8.3f ms | avx2(all) %8.3f ms | "
                   "cuda %8.3f ms incl. copies, kernels %8.3f ms | cuda vs reference %6.1fx\n",
                   passes[k].what, ref, avx1, avxn, cuda, kern, cuda > 0 ? ref / cuda : 0.0);
        }
        for (int k = 0; k < 4; k++)
            free(bufs[k]);
        problem_free(p);
    }
    if (h) dlclose(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registers_both_slots),
        cmocka_unit_test(test_declines_without_device),
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_capture_declines),
        cmocka_unit_test(test_timings),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

#else

static void test_not_built(void **state)
{
    (void)state;
    print_message("skipped: the CUDA plugin is not built (nvcc not found or "
                  "LIBREYOLO_WITH_CUDA=OFF)\n");
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_built)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
