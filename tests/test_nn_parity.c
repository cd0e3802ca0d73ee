/* SPDX-License-Identifier: MIT */
/*
 * The network ops' providers against the reference on the ops' own cases
 * (src/ops/nn/cases.c: YOLO9t and NanoDet-g layers at reduced resolution, odd
 * shapes, dilation, batches), through the parity harness: on 1 and 2 threads,
 * every case called twice (the second served from the operator caches) and
 * again with its weights rewritten at the same addresses, conv2d's output also
 * written over its residual. Then what the caches owe beyond one caller:
 * threads sharing one cached operator, a LeakyReLU slope changed between calls,
 * dispatch, and each optional library selectable by name.
 */
#include "kernels/check.h"
#include "libreyolo/nn.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parity_report.h"

/* ---- Through the harness ---------------------------------------------------------- */

static void test_providers_match_reference(void **state)
{
    (void)state;
    static const ly_op ops[] = {LY_OP_CONV2D, LY_OP_MAX_POOL2D, LY_OP_AVG_POOL2D,
                                LY_OP_SILU,   LY_OP_SIGMOID,    LY_OP_DFL};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int threads = 1; threads <= 2; threads++) {
            ly_check_options options = {.slot = ly_op_name(ops[i]),
                                        .threads = threads,
                                        .size = LY_CHECK_QUICK,
                                        .repeat = true,
                                        .alias_inputs = ops[i] == LY_OP_CONV2D ? 1u << 3 : 0};
            char what[96];
            snprintf(what, sizeof what, "%s, %d thread%s", ly_op_name(ops[i]), threads,
                     threads > 1 ? "s" : "");
            parity_expect_clean(&options, what);
        }
}

/* ---- One case, by hand -------------------------------------------------------------- */

typedef struct conv_run {
    ly_check_case c;
    ly_kernel_call call;
    ly_tensor ref, out;
} conv_run;

/* conv2d's case `name`, its reference output in r->ref, r->out of the same shape. */
static void conv_run_init(conv_run *r, const char *name)
{
    if (ly_check_case_named(LY_OP_CONV2D, false, name, &r->c) != LY_OK)
        fail_msg("%s", ly_last_error());
    ly_check_case_call(&r->c, &r->call, NULL);
    r->call.threads = 1;
    int n_out = 0;
    ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
    assert_int_equal(ly_kernel_infer_outputs(ly_op_name(LY_OP_CONV2D), &r->call, shapes, &n_out),
                     LY_OK);
    r->ref = shapes[0];
    size_t bytes = (size_t)ly_tensor_numel(&r->ref) * sizeof(float);
    r->out = r->ref;
    r->ref.data = malloc(bytes);
    r->out.data = malloc(bytes);
    assert_non_null(r->ref.data);
    assert_non_null(r->out.data);
    r->call.out[0] = &r->ref;
    ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), "reference", &r->call);
    if (st != LY_OK) fail_msg("reference: %s", ly_last_error());
}

static void conv_run_free(conv_run *r)
{
    free(r->ref.data);
    free(r->out.data);
    ly_check_case_free(&r->c);
}

/* conv2d's parity rule (the manifest's): max |diff| <= t * max(1, max |ref|). */
static void expect_close(const char *impl, const char *what, const ly_tensor *ref,
                         const ly_tensor *got)
{
    double tolerance = ly_op_def_of(LY_OP_CONV2D)->tolerance, max_diff = 0, max_ref = 1;
    const float *a = ref->data, *b = got->data;
    for (int64_t i = 0; i < ly_tensor_numel(ref); i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (!(diff <= max_diff)) max_diff = isnan(diff) ? INFINITY : diff; /* NaN: the worst */
        if (fabs(a[i]) > max_ref) max_ref = fabs(a[i]);
    }
    if (!(max_diff <= tolerance * max_ref))
        fail_msg("%s on '%s': max |diff| %g > %g * %g", impl, what, max_diff, tolerance, max_ref);
}

typedef struct impl_list {
    const char *names[16];
    int count;
} impl_list;

static bool collect_impl(const char *name, ly_kernel_fn fn, void *user)
{
    (void)fn;
    impl_list *list = user;
    if (strcmp(name, "reference") != 0 && list->count < 16) list->names[list->count++] = name;
    return true;
}

static impl_list providers_for(const ly_kernel_call *call)
{
    impl_list list = {.count = 0};
    assert_int_equal(ly_kernel_iter(ly_op_name(LY_OP_CONV2D), call, collect_impl, &list), LY_OK);
    return list;
}

/* Each optional library, when built, is registered under its name and is what
 * LIBREYOLO_KERNELS=<name> selects for conv2d. */
static void test_conv2d_providers_registered_by_name(void **state)
{
    (void)state;
    const char *built[3];
    int n = 0;
#ifdef LY_HAVE_ONEDNN
    built[n++] = "onednn";
#endif
#ifdef LY_HAVE_XNNPACK
    built[n++] = "xnnpack";
#endif
#ifdef LY_HAVE_OPENBLAS
    built[n++] = "openblas";
#endif
    if (n == 0) skip();
    for (int i = 0; i < n; i++) {
        setenv("LIBREYOLO_KERNELS", built[i], 1);
        const char *name = NULL;
        ly_status st = ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &name, NULL);
        if (st != LY_OK) fail_msg("%s: %s", built[i], ly_last_error());
        assert_string_equal(name, built[i]);
    }
    setenv("LIBREYOLO_KERNELS", "off", 1);
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), NULL, &name, NULL), LY_OK);
    assert_string_equal(name, "reference");
    unsetenv("LIBREYOLO_KERNELS");
}

/* The LeakyReLU slope is part of what a cached operator was built for. */
static void test_conv2d_leaky_alpha_not_cached_stale(void **state)
{
    (void)state;
    conv_run r;
    conv_run_init(&r, "nanodet 1x1 leaky 64->32 13x13");
    ly_conv2d_params *p = (ly_conv2d_params *)(void *)r.c.params;
    impl_list list = providers_for(&r.call);
    for (int k = 0; k < list.count; k++)
        for (int round = 0; round < 2; round++) {
            p->alpha = round == 0 ? 0.1 : 0.25;
            r.call.out[0] = &r.ref;
            assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), "reference", &r.call),
                             LY_OK);
            r.call.out[0] = &r.out;
            ly_status st = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), list.names[k], &r.call);
            if (st == LY_E_DECLINED) break; /* graph-only: kernels check runs it prepared */
            if (st != LY_OK) fail_msg("%s: %s", list.names[k], ly_last_error());
            expect_close(list.names[k], round == 0 ? "leaky 0.1" : "leaky 0.25 after 0.1", &r.ref,
                         &r.out);
        }
    /* A slope that is not a number is refused by the slot. */
    p->alpha = NAN;
    r.call.out[0] = &r.out;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONV2D, &r.call), LY_E_INVALID_ARGUMENT);
    assert_non_null(strstr(ly_last_error(), "params.alpha"));
    conv_run_free(&r);
}

/* Dispatch (the path a model takes) gives the reference's numbers too. */
static void test_conv2d_dispatch(void **state)
{
    (void)state;
    conv_run r;
    conv_run_init(&r, "head box 64->64 3x3 g4 20x20");
    r.call.out[0] = &r.out;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_CONV2D, &r.call), LY_OK);
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve(ly_op_name(LY_OP_CONV2D), &r.call, &name, NULL), LY_OK);
    expect_close(name, "dispatch", &r.ref, &r.out);
    conv_run_free(&r);
}

/* Threads sharing one weight tensor (hence one cached operator) each get what
 * one caller alone gets, bit for bit. */
typedef struct worker {
    const ly_kernel_call *shared;
    const char *impl;
    ly_tensor out;
    ly_status status;
} worker;

static void *worker_run(void *arg)
{
    worker *wk = arg;
    ly_kernel_call call = *wk->shared;
    call.out[0] = &wk->out;
    for (int i = 0; i < 8 && wk->status == LY_OK; i++)
        wk->status = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), wk->impl, &call);
    return NULL;
}

static void test_conv2d_concurrent_callers(void **state)
{
    (void)state;
    enum { WORKERS = 4 };
    conv_run r;
    conv_run_init(&r, "head cls 80->80 3x3 12x12");
    impl_list list = providers_for(&r.call);
    size_t bytes = (size_t)ly_tensor_numel(&r.out) * sizeof(float);
    for (int k = 0; k < list.count; k++) {
        r.call.out[0] = &r.out;
        ly_status first = ly_kernel_run_impl(ly_op_name(LY_OP_CONV2D), list.names[k], &r.call);
        /* a graph-only kernel (prepared per node): test_threads shares its states */
        if (first == LY_E_DECLINED) continue;
        assert_int_equal(first, LY_OK);
        worker workers[WORKERS];
        pthread_t ids[WORKERS];
        for (int i = 0; i < WORKERS; i++) {
            workers[i] = (worker){&r.call, list.names[k], r.out, LY_OK};
            workers[i].out.data = malloc(bytes);
            assert_non_null(workers[i].out.data);
            assert_int_equal(pthread_create(&ids[i], NULL, worker_run, &workers[i]), 0);
        }
        for (int i = 0; i < WORKERS; i++)
            assert_int_equal(pthread_join(ids[i], NULL), 0);
        for (int i = 0; i < WORKERS; i++) {
            if (workers[i].status != LY_OK)
                fail_msg("%s: %s", list.names[k], ly_status_name(workers[i].status));
            if (memcmp(workers[i].out.data, r.out.data, bytes) != 0)
                fail_msg("%s: a concurrent caller got other bits than one caller alone",
                         list.names[k]);
            free(workers[i].out.data);
        }
    }
    conv_run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_providers_match_reference),
        cmocka_unit_test(test_conv2d_providers_registered_by_name),
        cmocka_unit_test(test_conv2d_dispatch),
        cmocka_unit_test(test_conv2d_leaky_alpha_not_cached_stale),
        cmocka_unit_test(test_conv2d_concurrent_callers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
