/* SPDX-License-Identifier: MIT */
/* Out-of-tree providers: discovery, staging, version check, run-time failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "libreyolo/quant.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char warnings[8192];

static void capture(ly_log_level level, const char *message, void *user)
{
    (void)user;
    if (level < LY_LOG_WARNING) return;
    strncat(warnings, message, sizeof warnings - strlen(warnings) - 2);
    strcat(warnings, "\n");
}

static char corrupt_dir[] = "/tmp/ly_plugins_XXXXXX";

/* All plugins go on the path before the first resolution: loading happens once. */
static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(corrupt_dir)) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/libreyolo_kernels_corrupt.so", corrupt_dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs("this is not an ELF file", f);
    fclose(f);
    char list[2048];
    snprintf(list, sizeof list,
             "%s/libreyolo_kernels_example:%s/libreyolo_kernels_failing:"
             "%s/libreyolo_kernels_badversion:%s/libreyolo_kernels_oldapi:%s:/nonexistent/dir",
             LY_PLUGIN_DIR, LY_PLUGIN_DIR, LY_PLUGIN_DIR, LY_PLUGIN_DIR, corrupt_dir);
    setenv("LIBREYOLO_KERNELS_PATH", list, 1);
    unsetenv("LIBREYOLO_KERNELS");
    return ly_set_log_handler(capture, NULL, LY_LOG_WARNING) == LY_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/libreyolo_kernels_corrupt.so", corrupt_dir);
    unlink(path);
    rmdir(corrupt_dir);
    return 0;
}

typedef struct names {
    char text[512];
} names;

static void list_cb(const char *slot, const char *impl, bool eligible, const char *why, void *user)
{
    (void)slot;
    (void)eligible;
    (void)why;
    names *n = user;
    strcat(n->text, impl);
    strcat(n->text, ",");
}

static void test_loading(void **state)
{
    (void)state;
    names n = {""};
    assert_int_equal(ly_kernel_list(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), list_cb, &n), LY_OK);
    assert_non_null(strstr(n.text, "example,"));
    assert_non_null(strstr(n.text, "failing,"));
    assert_null(strstr(n.text, "badversion"));
    assert_null(strstr(n.text, "oldapi"));
    assert_non_null(strstr(warnings, "libreyolo_kernels_badversion.so skipped: built for plugin "
                                     "API version 4, this library provides version 3"));
    /* A plugin of the shared-params era is told why and what to do. */
    assert_non_null(strstr(warnings, "libreyolo_kernels_oldapi.so skipped: built for plugin "
                                     "API version 2"));
    assert_non_null(strstr(warnings, "rebuild the plugin against this library's headers"));
    assert_non_null(strstr(warnings, "libreyolo_kernels_corrupt.so skipped: cannot load it"));
}

static void run_affine(float *out)
{
    float x[5] = {-1.0f, -0.3f, 0.0f, 0.7f, 2.9f}, lo = -1.0f, hi = 3.0f;
    int64_t s5 = 5, s1 = 1;
    ly_tensor tx, tlo, thi, to;
    ly_tensor_init(&tx, x, LY_F32, 1, &s5);
    ly_tensor_init(&tlo, &lo, LY_F32, 1, &s1);
    ly_tensor_init(&thi, &hi, LY_F32, 1, &s1);
    ly_tensor_init(&to, out, LY_F32, 1, &s5);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &tx;
    call.in[1] = &tlo;
    call.in[2] = &thi;
    call.out[0] = &to;
    assert_int_equal(ly_kernel_dispatch_op(LY_OP_FAKE_QUANT_INT8_AFFINE, &call), LY_OK);
}

static void test_example_selected_by_name(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/libreyolo_kernels_example/libreyolo_kernels_example.so",
             LY_PLUGIN_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    long (*calls)(void);
    *(void **)&calls = dlsym(h, "libreyolo_kernels_example_calls");
    assert_non_null(calls);

    float ref[5], got[5];
    setenv("LIBREYOLO_KERNELS", "reference", 1);
    run_affine(ref);
    setenv("LIBREYOLO_KERNELS", "example", 1);
    long before = calls();
    run_affine(got);
    assert_int_equal(calls(), before + 1);
    assert_memory_equal(ref, got, sizeof ref);
    unsetenv("LIBREYOLO_KERNELS");
    dlclose(h);
}

static void test_failing_plugin_falls_back(void **state)
{
    (void)state;
    float ref[5], got[5];
    setenv("LIBREYOLO_KERNELS", "reference", 1);
    run_affine(ref);
    setenv("LIBREYOLO_KERNELS", "failing", 1);
    warnings[0] = '\0';
    run_affine(got);
    assert_memory_equal(ref, got, sizeof ref);
    assert_non_null(strstr(warnings, "kernel 'failing' for slot 'fake_quant_int8_affine' failed"));
    assert_non_null(strstr(warnings, "simulated device failure"));
    warnings[0] = '\0';
    run_affine(got); /* disabled now: no second warning */
    assert_string_equal(warnings, "");
    unsetenv("LIBREYOLO_KERNELS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loading),
        cmocka_unit_test(test_example_selected_by_name),
        cmocka_unit_test(test_failing_plugin_falls_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
