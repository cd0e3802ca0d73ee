/* SPDX-License-Identifier: MIT */
/* The registry's behaviour (spec kernels.md section 1), on test-only slots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "libreyolo/kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char warnings[4096];
static int warning_count;

static void capture(ly_log_level level, const char *message, void *user)
{
    (void)user;
    if (level < LY_LOG_WARNING) return;
    warning_count++;
    strncat(warnings, message, sizeof warnings - strlen(warnings) - 2);
    strcat(warnings, "\n");
}

static int setup(void **state)
{
    (void)state;
    warnings[0] = '\0';
    warning_count = 0;
    unsetenv("LIBREYOLO_KERNELS");
    unsetenv("LIBREYOLO_QUANT_KERNELS");
    return ly_set_log_handler(capture, NULL, LY_LOG_WARNING) == LY_OK ? 0 : -1;
}

static atomic_int calls_a, calls_b, calls_ref, calls_failing;

static ly_status impl_ref(const ly_kernel_call *c)
{
    (void)c;
    calls_ref++;
    return LY_OK;
}
static ly_status impl_a(const ly_kernel_call *c)
{
    (void)c;
    calls_a++;
    return LY_OK;
}
static ly_status impl_b(const ly_kernel_call *c)
{
    (void)c;
    calls_b++;
    return LY_OK;
}
static ly_status impl_failing(const ly_kernel_call *c)
{
    (void)c;
    calls_failing++;
    return LY_E_PROVIDER;
}
static ly_status impl_declining(const ly_kernel_call *c)
{
    (void)c;
    return LY_E_DECLINED;
}
static ly_status pred_never(const ly_kernel_call *c, const ly_cpu_features *cpu, const char **why)
{
    (void)c;
    (void)cpu;
    *why = "never eligible (test)";
    return LY_E_DECLINED;
}
static ly_status pred_error(const ly_kernel_call *c, const ly_cpu_features *cpu, const char **why)
{
    (void)c;
    (void)cpu;
    (void)why;
    return LY_E_INTERNAL;
}
/* Eligible on the machine, but declines calls whose params.bits is 2. */
static ly_status pred_no_bits2(const ly_kernel_call *c, const ly_cpu_features *cpu,
                               const char **why)
{
    (void)cpu;
    /* A slot only the test knows: its calls carry whatever struct they agree on. */
    if (c && c->params && LY_PARAMS(c, ly_fake_quant_int_grouped_params)->bits == 2) {
        *why = "bits 2 not handled";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

static const char *resolved(const char *slot)
{
    const char *name = NULL;
    return ly_kernel_resolve(slot, NULL, &name, NULL) == LY_OK ? name : "unavailable";
}

static void test_newest_first_and_unregister(void **state)
{
    (void)state;
    assert_int_equal(ly_kernel_register("t_order", "reference", impl_ref, NULL), LY_OK);
    assert_string_equal(resolved("t_order"), "reference");
    /* No clear_cache needed: registering invalidates (the upstream quirk, fixed). */
    assert_int_equal(ly_kernel_register("t_order", "a", impl_a, NULL), LY_OK);
    assert_string_equal(resolved("t_order"), "a");
    assert_int_equal(ly_kernel_register("t_order", "b", impl_b, NULL), LY_OK);
    assert_string_equal(resolved("t_order"), "b");
    /* A duplicate name gives two entries; unregister removes both. */
    assert_int_equal(ly_kernel_register("t_order", "b", impl_b, NULL), LY_OK);
    assert_int_equal(ly_kernel_unregister("t_order", "b"), LY_OK);
    assert_string_equal(resolved("t_order"), "a");
    assert_int_equal(ly_kernel_unregister("t_order", "a"), LY_OK);
    assert_string_equal(resolved("t_order"), "reference");
}

static bool collect(const char *name, ly_kernel_fn fn, void *user)
{
    (void)fn;
    char *buf = user;
    strcat(buf, name);
    strcat(buf, ",");
    return true;
}

static void test_iter_and_selection(void **state)
{
    (void)state;
    ly_kernel_register("t_sel", "reference", impl_ref, NULL);
    ly_kernel_register("t_sel", "a", impl_a, NULL);
    ly_kernel_register("t_sel", "b", impl_b, NULL);
    char seen[256] = "";
    assert_int_equal(ly_kernel_iter("t_sel", NULL, collect, seen), LY_OK);
    assert_string_equal(seen, "b,a,reference,");

    setenv("LIBREYOLO_KERNELS", "  A \t", 1); /* stripped and lower-cased */
    assert_string_equal(resolved("t_sel"), "a");
    seen[0] = '\0';
    ly_kernel_iter("t_sel", NULL, collect, seen);
    assert_string_equal(seen, "a,reference,");
    setenv("LIBREYOLO_KERNELS", "off", 1);
    assert_string_equal(resolved("t_sel"), "reference");
    setenv("LIBREYOLO_KERNELS", "Reference", 1);
    assert_string_equal(resolved("t_sel"), "reference");
    setenv("LIBREYOLO_KERNELS", "nosuchimpl", 1);
    assert_string_equal(resolved("t_sel"), "reference");

    /* The legacy alias counts only when LIBREYOLO_KERNELS is unset or empty. */
    setenv("LIBREYOLO_QUANT_KERNELS", "a", 1);
    setenv("LIBREYOLO_KERNELS", "b", 1);
    assert_string_equal(resolved("t_sel"), "b");
    setenv("LIBREYOLO_KERNELS", "   ", 1);
    assert_string_equal(resolved("t_sel"), "a");
    unsetenv("LIBREYOLO_KERNELS");
    assert_string_equal(resolved("t_sel"), "a");
    unsetenv("LIBREYOLO_QUANT_KERNELS");
    assert_string_equal(resolved("t_sel"), "b");
}

static void test_predicates(void **state)
{
    (void)state;
    ly_kernel_register("t_pred", "reference", impl_ref, NULL);
    ly_kernel_register("t_pred", "picky", impl_a, pred_no_bits2);
    ly_kernel_register("t_pred", "never", impl_b, pred_never);
    ly_kernel_register("t_pred", "broken", impl_b, pred_error);
    assert_string_equal(resolved("t_pred"), "picky");
    assert_int_equal(warning_count, 1);
    assert_non_null(strstr(warnings, "Kernel predicate failed for broken"));

    ly_kernel_call call;
    ly_kernel_call_init(&call);
    ly_fake_quant_int_grouped_params bits = {.bits = 2};
    call.params = &bits;
    const char *name = NULL;
    assert_int_equal(ly_kernel_resolve("t_pred", &call, &name, NULL), LY_OK);
    assert_string_equal(name, "reference");
    int before_ref = calls_ref, before_a = calls_a;
    assert_int_equal(ly_kernel_dispatch("t_pred", &call), LY_OK);
    assert_int_equal(calls_ref, before_ref + 1);
    bits.bits = 4;
    assert_int_equal(ly_kernel_dispatch("t_pred", &call), LY_OK);
    assert_int_equal(calls_a, before_a + 1);
}

typedef struct listing {
    char text[1024];
} listing;

static void list_cb(const char *slot, const char *impl, bool eligible, const char *why, void *user)
{
    listing *l = user;
    char line[256];
    snprintf(line, sizeof line, "%s/%s=%s;", slot, impl, eligible ? "yes" : why);
    strcat(l->text, line);
}

static void test_list_reasons(void **state)
{
    (void)state;
    ly_kernel_register("t_list", "reference", impl_ref, NULL);
    ly_kernel_register("t_list", "never", impl_b, pred_never);
    ly_kernel_register("t_list", "a", impl_a, NULL);
    listing l = {""};
    setenv("LIBREYOLO_KERNELS", "never", 1);
    assert_int_equal(ly_kernel_list("t_list", list_cb, &l), LY_OK);
    unsetenv("LIBREYOLO_KERNELS");
    assert_string_equal(l.text, "t_list/a=not selected by LIBREYOLO_KERNELS;"
                                "t_list/never=never eligible (test);t_list/reference=yes;");
}

static void test_runtime_failure_falls_back_and_disables(void **state)
{
    (void)state;
    ly_kernel_register("t_fail", "reference", impl_ref, NULL);
    ly_kernel_register("t_fail", "decliner", impl_declining, NULL);
    ly_kernel_register("t_fail", "failing", impl_failing, NULL);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    int ref0 = calls_ref;
    assert_int_equal(ly_kernel_dispatch("t_fail", &call), LY_OK);
    assert_int_equal(calls_failing, 1);
    assert_int_equal(calls_ref, ref0 + 1);
    assert_int_equal(ly_kernel_dispatch("t_fail", &call), LY_OK);
    assert_int_equal(calls_failing, 1); /* disabled for the rest of the process */
    assert_int_equal(calls_ref, ref0 + 2);
    assert_int_equal(warning_count, 1);
    assert_non_null(strstr(warnings, "kernel 'failing' for slot 't_fail' failed"));
    /* The decliner declined but was not disabled: it is still resolvable. */
    assert_string_equal(resolved("t_fail"), "decliner");
}

static void active_cb(const char *slot, const char *impl, void *user)
{
    listing *l = user;
    if (strncmp(slot, "t_active", 8) != 0) return;
    char line[128];
    snprintf(line, sizeof line, "%s=%s;", slot, impl);
    strcat(l->text, line);
}

static void test_active_and_unknown(void **state)
{
    (void)state;
    ly_kernel_register("t_active1", "reference", impl_ref, NULL);
    ly_kernel_unregister("t_active2", "whatever"); /* creates the slot, empty */
    listing l = {""};
    assert_int_equal(ly_kernel_active(active_cb, &l), LY_OK);
    assert_string_equal(l.text, "t_active1=reference;t_active2=unavailable;");

    ly_kernel_call call;
    ly_kernel_call_init(&call);
    assert_int_equal(ly_kernel_dispatch("t_active2", &call), LY_E_UNAVAILABLE);
    assert_int_equal(ly_kernel_dispatch("no_such_slot", &call), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "no_such_slot"));
    assert_int_equal(ly_kernel_dispatch(NULL, &call), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_dispatch("t_active1", NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_register("t_x", "n", NULL, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_register("t_x", "", impl_a, NULL), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_run_impl("t_active1", "nope", &call), LY_E_NOT_FOUND);
    assert_int_equal(ly_kernel_run_impl("t_active1", "reference", &call), LY_OK);
}

/* Dispatchers race a writer that keeps registering and unregistering. */
static atomic_bool stop_writer;

static void *dispatcher(void *arg)
{
    (void)arg;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    for (int i = 0; i < 20000; i++)
        if (ly_kernel_dispatch("t_race", &call) != LY_OK) return (void *)1;
    return NULL;
}

static void *writer(void *arg)
{
    (void)arg;
    while (!stop_writer) {
        ly_kernel_register("t_race", "a", impl_a, NULL);
        ly_kernel_unregister("t_race", "a");
    }
    return NULL;
}

static void test_concurrent_dispatch(void **state)
{
    (void)state;
    ly_kernel_register("t_race", "reference", impl_ref, NULL);
    pthread_t w, d[2];
    pthread_create(&w, NULL, writer, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&d[i], NULL, dispatcher, NULL);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(d[i], &ret);
        assert_null(ret);
    }
    stop_writer = true;
    pthread_join(w, NULL);
}

static void test_cpu_features(void **state)
{
    (void)state;
    ly_cpu_features f;
    assert_int_equal(ly_cpu_features_get(&f), LY_OK);
    assert_true(f.logical_cpus >= 1);
    if (f.avx2) assert_true(f.avx); /* AVX2 implies the OS saves YMM */
    if (f.fma) assert_true(f.avx);
    if (f.avx512_vnni) assert_true(f.avx512f); /* needs the OS to save ZMM too */
    if (f.avx_vnni) assert_true(f.avx2);
    assert_int_equal(ly_cpu_features_get(NULL), LY_E_INVALID_ARGUMENT);
}

/* A stateful implementation that counts: prepared once by
 * ly_kernel_prepare_impl, run as often as asked, released by
 * ly_kernel_prepared_free; one that declines plain maps is named. */
static atomic_int prepares, runs, releases;

static ly_status counting_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    (void)call;
    assert_int_equal(info->in_layout[0], LY_LAYOUT_PLAIN);
    assert_int_equal(info->out_layout[0], LY_LAYOUT_PLAIN);
    assert_true(info->constant_inputs & 1u); /* every input given */
    prepares++;
    *state = (void *)&prepares;
    return LY_OK;
}
static ly_status counting_run(void *state, const ly_kernel_call *call)
{
    (void)call;
    assert_ptr_equal(state, (void *)&prepares);
    runs++;
    return LY_OK;
}
static void counting_release(void *state)
{
    assert_ptr_equal(state, (void *)&prepares);
    releases++;
}
static ly_status blocked_only_prepare(const ly_kernel_call *call,
                                      const ly_kernel_prepare_info *info, void **state)
{
    (void)call;
    (void)info;
    (void)state;
    return LY_E_DECLINED;
}

static void test_prepared_implementation(void **state)
{
    (void)state;
    static const ly_kernel_stateful counting = {
        .prepare = counting_prepare, .run = counting_run, .release = counting_release};
    static const ly_kernel_stateful blocked_only = {
        .prepare = blocked_only_prepare, .run = counting_run, .release = counting_release};
    ly_kernel_impl_desc d = {
        .struct_size = sizeof d, .slot = "t_prepared", .name = "counting", .stateful = &counting};
    assert_int_equal(ly_kernel_register("t_prepared", "reference", impl_ref, NULL), LY_OK);
    assert_int_equal(ly_kernel_register_impl(&d), LY_OK);
    d.name = "blocked_only";
    d.stateful = &blocked_only;
    assert_int_equal(ly_kernel_register_impl(&d), LY_OK);
    float x = 1.0f;
    int64_t one = 1;
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, &x, LY_F32, 1, &one), LY_OK);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &t;
    call.out[0] = &t;
    ly_kernel_prepared *p = NULL;
    assert_int_equal(ly_kernel_prepare_impl("t_prepared", "counting", &call, &p), LY_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ly_kernel_prepared_run(p, &call), LY_OK);
    assert_int_equal(ly_kernel_prepared_free(p), LY_OK);
    assert_int_equal(prepares, 1);
    assert_int_equal(runs, 3);
    assert_int_equal(releases, 1);
    /* a function-only implementation runs as itself */
    calls_ref = 0;
    assert_int_equal(ly_kernel_prepare_impl("t_prepared", "reference", &call, &p), LY_OK);
    assert_int_equal(ly_kernel_prepared_run(p, &call), LY_OK);
    assert_int_equal(ly_kernel_prepared_free(p), LY_OK);
    assert_int_equal(calls_ref, 1);
    /* refusals name what was wrong */
    p = (ly_kernel_prepared *)&x;
    assert_int_equal(ly_kernel_prepare_impl("t_prepared", "blocked_only", &call, &p),
                     LY_E_DECLINED);
    assert_null(p);
    assert_non_null(strstr(ly_last_error(), "'blocked_only' does not prepare this call on plain"));
    assert_int_equal(ly_kernel_prepare_impl("t_prepared", "missing", &call, &p), LY_E_NOT_FOUND);
    assert_int_equal(ly_kernel_prepare_impl("t_prepared", "counting", &call, NULL),
                     LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_prepared_run(NULL, &call), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_kernel_prepared_free(NULL), LY_OK);
    assert_int_equal(releases, 1);
    assert_int_equal(ly_kernel_unregister("t_prepared", "blocked_only"), LY_OK);
    assert_int_equal(ly_kernel_unregister("t_prepared", "counting"), LY_OK);
    assert_int_equal(ly_kernel_unregister("t_prepared", "reference"), LY_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_newest_first_and_unregister, setup),
        cmocka_unit_test_setup(test_iter_and_selection, setup),
        cmocka_unit_test_setup(test_predicates, setup),
        cmocka_unit_test_setup(test_list_reasons, setup),
        cmocka_unit_test_setup(test_runtime_failure_falls_back_and_disables, setup),
        cmocka_unit_test_setup(test_active_and_unknown, setup),
        cmocka_unit_test_setup(test_concurrent_dispatch, setup),
        cmocka_unit_test_setup(test_cpu_features, setup),
        cmocka_unit_test_setup(test_prepared_implementation, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
