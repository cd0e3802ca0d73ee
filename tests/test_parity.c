/* SPDX-License-Identifier: MIT */
/*
 * The parity gate: every implementation of every slot against the reference
 * (forward and unpack bit-identical, backward within 1e-6), the AVX2 providers
 * present where they should be, LIBREYOLO_KERNELS=off meaning the reference
 * everywhere, and the harness itself catching what it is meant to catch.
 */
#include "kernels/check.h"
#include "libreyolo/quant.h"
#include "ops/quant/reference.h"
#include "providers/builtin.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parity_report.h"

/* ---- The gate ------------------------------------------------------------------ */

static void run_gate(int threads, ly_check_size size)
{
    ly_check_options options = {.threads = threads, .size = size};
    char what[64];
    snprintf(what, sizeof what, "the gate (threads=%d)", threads);
    parity_expect_clean(&options, what);
}

/* The quick case set (every variant of every slot on small tensors, the
 * model shapes); LIBREYOLO_TEST_FULL=1 or `libreyolo kernels check --full`
 * runs the full one (~35 s here: large tensors, the largest shapes), which
 * a change to a provider runs before it lands. */
static void test_every_implementation_matches_the_reference(void **state)
{
    (void)state;
    const char *full = getenv("LIBREYOLO_TEST_FULL");
    run_gate(1, full && strcmp(full, "1") == 0 ? LY_CHECK_FULL : LY_CHECK_QUICK);
}

/* Larger tensors take the providers' threaded paths; more threads than this
 * machine has cores still splits the work. */
static void test_parity_with_threads(void **state)
{
    (void)state;
    run_gate(3, LY_CHECK_QUICK);
}

/* ---- The harness catches what it is meant to catch -------------------------------- */

typedef enum sabotage { FLIP_ZERO_SIGN, SKIP_LAST, NUDGE_NAN, TOUCH_INPUT, FAIL } sabotage;

static sabotage current_sabotage;

static ly_status broken_impl(const ly_kernel_call *call)
{
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), "reference", call);
    if (st != LY_OK) return st;
    float *y = call->out[0]->data;
    int64_t n = ly_tensor_numel(call->out[0]);
    if (n <= 0) return LY_OK;
    switch (current_sabotage) {
    case FLIP_ZERO_SIGN:
        for (int64_t i = 0; i < n; i++)
            if (y[i] == 0.0f) {
                y[i] = -y[i];
                break;
            }
        break;
    case SKIP_LAST:
        memset(&y[n - 1], 0x55, sizeof y[0]);
        break;
    case NUDGE_NAN:
        for (int64_t i = 0; i < n; i++)
            if (y[i] != y[i]) {
                uint32_t bits;
                memcpy(&bits, &y[i], 4);
                bits ^= 1u;
                memcpy(&y[i], &bits, 4);
                break;
            }
        break;
    case TOUCH_INPUT:
        ((float *)call->in[0]->data)[0] += 1.0f;
        break;
    case FAIL:
        return LY_E_PROVIDER;
    }
    return LY_OK;
}

static parity_report run_broken(sabotage s)
{
    current_sabotage = s;
    parity_report r = {0};
    assert_int_equal(
        ly_kernel_register(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), "broken", broken_impl, NULL),
        LY_OK);
    ly_status st =
        ly_check_parity(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), "broken", 1, parity_collect, &r);
    assert_int_equal(ly_kernel_unregister(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), "broken"),
                     LY_OK);
    assert_int_equal(st, LY_OK);
    assert_int_equal(r.results, 1);
    return r;
}

static void test_harness_catches_sabotage(void **state)
{
    (void)state;
    static const sabotage all[] = {FLIP_ZERO_SIGN, SKIP_LAST, NUDGE_NAN, TOUCH_INPUT, FAIL};
    static const char *const expect[] = {"(0x80000000)", "(0x55555555)", "nan (0x",
                                         "modified in[0]", "LY_E_PROVIDER"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        parity_report r = run_broken(all[i]);
        if (r.failed != 1 || !r.text || !strstr(r.text, expect[i]))
            fail_msg("sabotage %zu not reported as expected ('%s'); report:\n%s", i, expect[i],
                     r.text ? r.text : "(none)");
        parity_report_free(&r);
    }
}

/* An element-wise implementation that writes its output before reading its
 * input: right out of place, wrong in place (which a graph does). */
static ly_status clobbering_relu(const ly_kernel_call *call)
{
    memset(call->out[0]->data, 0, (size_t)ly_tensor_numel(call->out[0]) * sizeof(float));
    return ly_kernel_run_impl(ly_op_name(LY_OP_RELU), "reference", call);
}

/* A cache keyed by the weight's address that never looks at the weight again. */
static const void *cached_weight;
static float cached_out[4096];

static ly_status stale_linear(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->out[0]);
    if (n > 4096) return LY_E_DECLINED;
    if (call->in[1]->data == cached_weight) {
        memcpy(call->out[0]->data, cached_out, (size_t)n * sizeof(float));
        return LY_OK;
    }
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_LINEAR), "reference", call);
    if (st == LY_OK) {
        cached_weight = call->in[1]->data;
        memcpy(cached_out, call->out[0]->data, (size_t)n * sizeof(float));
    }
    return st;
}

static parity_report run_registered(ly_op op, ly_kernel_fn fn, bool repeat)
{
    parity_report r = {0};
    assert_int_equal(ly_kernel_register(ly_op_name(op), "broken", fn, NULL), LY_OK);
    ly_check_options options = {
        .slot = ly_op_name(op), .impl = "broken", .threads = 1, .repeat = repeat};
    ly_status st = ly_check_parity_ex(&options, parity_collect, &r);
    assert_int_equal(ly_kernel_unregister(ly_op_name(op), "broken"), LY_OK);
    assert_int_equal(st, LY_OK);
    assert_int_equal(r.results, 1);
    return r;
}

/* Element-wise ops are run in place as a graph runs them; with repeat, a case
 * runs again after its weights were rewritten at the same addresses. */
static void test_harness_catches_in_place_and_stale_caches(void **state)
{
    (void)state;
    parity_report r = run_registered(LY_OP_RELU, clobbering_relu, false);
    if (r.failed != 1 || !r.text || !strstr(r.text, "(out[0] over in[0]) out[0]"))
        fail_msg("writing before reading not caught in place; report:\n%s",
                 r.text ? r.text : "(none)");
    parity_report_free(&r);
    cached_weight = NULL;
    r = run_registered(LY_OP_LINEAR, stale_linear, true);
    if (r.failed != 1 || !r.text || !strstr(r.text, "MISMATCH"))
        fail_msg("a stale cache not caught; report:\n%s", r.text ? r.text : "(none)");
    parity_report_free(&r);
}

static void test_harness_rejects_unknown_names(void **state)
{
    (void)state;
    parity_report r = {0};
    assert_int_equal(ly_check_parity("no_such_slot", NULL, 1, parity_collect, &r), LY_E_NOT_FOUND);
    assert_int_equal(ly_check_parity(NULL, "no_such_impl", 1, parity_collect, &r), LY_E_NOT_FOUND);
    assert_int_equal(r.failed, 0);
    parity_report_free(&r);
    assert_int_equal(ly_check_parity_ex(NULL, parity_collect, &r), LY_E_INVALID_ARGUMENT);
}

/* ---- Providers present, and switched off ---------------------------------------- */

#ifdef LY_HAVE_AVX2_PROVIDERS
typedef struct impl_seen {
    const char *want;
    bool found, eligible;
    char why_not[160];
} impl_seen;

static void on_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                    void *user)
{
    (void)slot;
    impl_seen *s = user;
    if (strcmp(impl, s->want) != 0) return;
    s->found = true;
    s->eligible = eligible;
    snprintf(s->why_not, sizeof s->why_not, "%s", why_not ? why_not : "");
}
#endif

static void test_avx2_serves_every_quant_slot(void **state)
{
    (void)state;
#ifndef LY_HAVE_AVX2_PROVIDERS
    skip();
#else
    ly_cpu_features cpu;
    assert_int_equal(ly_cpu_features_get(&cpu), LY_OK);
    if (!cpu.avx2 || !cpu.fma) skip();
    int quant_slots = 0;
    for (int i = 0; i < LY_OP_COUNT; i++) {
        const ly_op_def *def = ly_op_def_of((ly_op)i);
        if (def->cases != &ly_cases_quant) continue; /* the manifest's quant ops */
        const char *slot = def->name;
        quant_slots++;
        impl_seen seen = {.want = "avx2"};
        assert_int_equal(ly_kernel_list(slot, on_impl, &seen), LY_OK);
        if (!seen.found) fail_msg("slot %s has no \"avx2\" implementation", slot);
        if (!seen.eligible)
            fail_msg("slot %s: \"avx2\" is not eligible on an AVX2+FMA machine: %s", slot,
                     seen.why_not);
    }
    assert_true(quant_slots >= 18); /* 8 forward, 8 backward, 2 unpack */
#endif
}

/* Where the CPU has VNNI, conv2d_int8 must have its integer provider (and so
 * the parity run above checks it), not fall silently to the f32 definition. */
static void test_int8_execute_provider_with_vnni(void **state)
{
    (void)state;
#if !defined(LY_HAVE_AVX2_PROVIDERS) || !defined(LY_HAVE_ONEDNN)
    print_message("skipped: this build has no oneDNN or no AVX2 providers\n");
    skip();
#else
    ly_cpu_features cpu;
    assert_int_equal(ly_cpu_features_get(&cpu), LY_OK);
    if (!cpu.avx512_vnni && !cpu.avx_vnni) {
        print_message("skipped: this CPU has no VNNI (onednn_int8 declines)\n");
        skip();
    }
    impl_seen seen = {.want = "onednn_int8"};
    assert_int_equal(ly_kernel_list("conv2d_int8", on_impl, &seen), LY_OK);
    if (!seen.found || !seen.eligible)
        fail_msg("conv2d_int8: \"onednn_int8\" is not eligible on a VNNI machine: %s",
                 seen.found ? seen.why_not : "not registered");
#endif
}

/* linear on AMX tiles: a float split into three bf16 terms (the default) and
 * into two (LIBREYOLO_MATMUL_PRECISION=high), both within the slot's
 * tolerance, one and three threads (rows and panels split between tasks). */
static void test_amx_linear_both_precisions(void **state)
{
    (void)state;
#ifndef LY_HAVE_AVX2_PROVIDERS
    print_message("skipped: this build has no AVX2 providers (nor the AMX one)\n");
    skip();
#else
    ly_cpu_features cpu;
    assert_int_equal(ly_cpu_features_get(&cpu), LY_OK);
    impl_seen seen = {.want = "amx_bf16"};
    assert_int_equal(ly_kernel_list("linear", on_impl, &seen), LY_OK);
    if (!cpu.amx_bf16 || !seen.found || !seen.eligible) {
        print_message("skipped: no AMX-BF16 tiles here (or the OS withholds them)\n");
        skip();
    }
    static const char *const precisions[] = {NULL, "high"};
    for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++) {
        if (precisions[i])
            setenv("LIBREYOLO_MATMUL_PRECISION", precisions[i], 1);
        else
            unsetenv("LIBREYOLO_MATMUL_PRECISION");
        for (int threads = 1; threads <= 3; threads += 2) {
            parity_report r = {0};
            assert_int_equal(ly_check_parity("linear", "amx_bf16", threads, parity_collect, &r),
                             LY_OK);
            unsetenv("LIBREYOLO_MATMUL_PRECISION");
            if (r.failed || !r.ran)
                fail_msg("linear / amx_bf16 (precision %s, %d threads): %s",
                         precisions[i] ? precisions[i] : "highest", threads,
                         r.text ? r.text : "no case ran");
            free(r.text);
            if (precisions[i]) setenv("LIBREYOLO_MATMUL_PRECISION", precisions[i], 1);
        }
    }
    unsetenv("LIBREYOLO_MATMUL_PRECISION");
#endif
}

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(LY_HAVE_ONEDNN)

/* Moves a conv2d_int8 case's input into the lower half of its quantizer's
 * grid, u8 codes 0..~125 (a few clamp at 0): there oneDNN's int8 sums are
 * exact without VNNI too (a u8 x s8 pair sums to at most 2 * 127 * 128). */
static void squeeze_to_7_bit_codes(ly_check_case *c)
{
    float scale;
    int32_t zp;
    ly_quant_int8_act_qparams(((const float *)c->in[5].data)[0], ((const float *)c->in[6].data)[0],
                              &scale, &zp);
    float bottom = (float)(-131 - zp) * scale, top = (float)(-3 - zp) * scale;
    float *x = c->in[0].data;
    int64_t n = ly_tensor_numel(&c->in[0]);
    for (int64_t i = 0; i < n; i++) /* the cases draw x in [-3, 3] */
        x[i] = bottom + (x[i] + 3.0f) / 6.0f * (top - bottom);
}
#endif

/* The integer provider on every machine with AVX2: where the CPU has no VNNI
 * it declines in use (a full-range input would saturate), so the gate above
 * never runs it there; here a test hook lets it take oneDNN's non-VNNI int8
 * kernels on inputs that cannot saturate, and conv2d_int8's own cases (every
 * layout its stateful form offers, parts, residual, bands, 1, 2 and 5 threads) must
 * match the reference as the gate demands. */
static void test_int8_execute_provider_on_7_bit_inputs(void **state)
{
    (void)state;
#if !defined(LY_HAVE_AVX2_PROVIDERS) || !defined(LY_HAVE_ONEDNN)
    print_message("skipped: this build has no oneDNN or no AVX2 providers\n");
    skip();
#else
    ly_cpu_features cpu;
    assert_int_equal(ly_cpu_features_get(&cpu), LY_OK);
    if (!cpu.avx2 || !cpu.fma) {
        print_message("skipped: this CPU has no AVX2\n");
        skip();
    }
    /* 5 threads: 1x1 and 3x3 convolutions in bands of unequal rows (conv2d_int8_onednn.c). */
    static const int thread_counts[] = {1, 2, 5};
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        int threads = thread_counts[t];
        parity_report r = {0};
        ly_check_options options = {.slot = "conv2d_int8",
                                    .impl = "onednn_int8",
                                    .threads = threads,
                                    .size = LY_CHECK_QUICK};
        int matched = 0;
        /* On only for the run: a failed check below must not leave it on for
         * the tests after this one. */
        ly_onednn_int8_allow_without_vnni(1);
        ly_status st = ly_check_op(LY_OP_CONV2D_INT8, &options, squeeze_to_7_bit_codes,
                                   parity_collect, &r, &matched);
        ly_onednn_int8_allow_without_vnni(0);
        if (st != LY_OK) fail_msg("the harness stopped: %s", ly_last_error());
        assert_int_equal(matched, 1);
        if (r.failed) {
            fprintf(stderr, "%s", r.text ? r.text : "");
            parity_report_free(&r);
            fail_msg("onednn_int8 on 7-bit inputs (threads=%d): mismatches, see above", threads);
        }
        if (r.ran != 1) fail_msg("onednn_int8 ran no case (threads=%d)", threads);
        parity_report_free(&r);
    }
#endif
}

static void expect_everything_reference(void)
{
    size_t count = 0;
    assert_int_equal(ly_kernel_slot_count(&count), LY_OK);
    assert_true(count > 0);
    for (size_t i = 0; i < count; i++) {
        const char *slot = NULL, *active = NULL;
        assert_int_equal(ly_kernel_slot_name(i, &slot), LY_OK);
        ly_status st = ly_kernel_resolve(slot, NULL, &active, NULL);
        if (st != LY_OK) fail_msg("slot %s does not resolve: %s", slot, ly_last_error());
        if (strcmp(active, "reference") != 0)
            fail_msg("slot %s resolves to %s with kernels off", slot, active);
    }
}

static void test_kernels_off_means_reference(void **state)
{
    (void)state;
    assert_int_equal(setenv("LIBREYOLO_KERNELS", "off", 1), 0);
    expect_everything_reference();
    assert_int_equal(setenv("LIBREYOLO_KERNELS", "  Reference ", 1), 0);
    expect_everything_reference();
    /* The legacy alias counts only while the first is unset or empty. */
    assert_int_equal(setenv("LIBREYOLO_KERNELS", "", 1), 0);
    assert_int_equal(setenv("LIBREYOLO_QUANT_KERNELS", "OFF", 1), 0);
    expect_everything_reference();
    unsetenv("LIBREYOLO_KERNELS");
    unsetenv("LIBREYOLO_QUANT_KERNELS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_harness_rejects_unknown_names),
        cmocka_unit_test(test_harness_catches_in_place_and_stale_caches),
        cmocka_unit_test(test_harness_catches_sabotage),
        cmocka_unit_test(test_avx2_serves_every_quant_slot),
        cmocka_unit_test(test_int8_execute_provider_with_vnni),
        cmocka_unit_test(test_amx_linear_both_precisions),
        cmocka_unit_test(test_int8_execute_provider_on_7_bit_inputs),
        cmocka_unit_test(test_every_implementation_matches_the_reference),
        cmocka_unit_test(test_parity_with_threads),
        cmocka_unit_test(test_kernels_off_means_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
