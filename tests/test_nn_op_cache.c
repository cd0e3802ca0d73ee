/* SPDX-License-Identifier: MIT */
/*
 * The conv2d providers' operator cache (src/providers/op_cache.c): hits, the
 * weight fingerprint, least-recently-used eviction that spares entries in use,
 * and the per-thread scratch buffers.
 */
#include "libreyolo/nn.h"
#include "providers/op_cache.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int created, destroyed;

static void *create_counted(const ly_conv_key *key, const ly_kernel_call *call, ly_status *status)
{
    (void)call;
    (void)status;
    int64_t *op = malloc(sizeof *op);
    if (op) *op = key->c;
    created++;
    return op;
}

static void destroy_counted(void *op)
{
    destroyed++;
    free(op);
}

static void *create_failing(const ly_conv_key *key, const ly_kernel_call *call, ly_status *status)
{
    (void)key;
    (void)call;
    *status = LY_E_DECLINED;
    return NULL;
}

static ly_conv_key key_for(int64_t c)
{
    ly_conv_key key;
    memset(&key, 0, sizeof key);
    key.c = c;
    return key;
}

static void use(ly_op_cache *cache, int64_t c)
{
    ly_conv_key key = key_for(c);
    ly_op_entry *entry = NULL;
    void *op = NULL;
    assert_int_equal(ly_op_cache_acquire(cache, &key, create_counted, NULL, &entry, &op), LY_OK);
    assert_int_equal(*(int64_t *)op, c);
    ly_op_cache_release(cache, entry);
}

static void test_hits_and_eviction(void **state)
{
    (void)state;
    static ly_op_cache cache = LY_OP_CACHE_INIT(2, destroy_counted);
    created = destroyed = 0;
    use(&cache, 1);
    use(&cache, 1);
    assert_int_equal(created, 1);
    use(&cache, 2);
    use(&cache, 1); /* 2 is now the least recently used */
    use(&cache, 3);
    assert_int_equal(created, 3);
    assert_int_equal(destroyed, 1);
    use(&cache, 1);
    use(&cache, 3);
    assert_int_equal(created, 3); /* 1 and 3 stayed */
    use(&cache, 2);
    assert_int_equal(created, 4);

    /* An entry in use is never evicted: the cache grows past its capacity. */
    ly_conv_key held_key = key_for(7);
    ly_op_entry *held = NULL;
    void *op = NULL;
    assert_int_equal(ly_op_cache_acquire(&cache, &held_key, create_counted, NULL, &held, &op),
                     LY_OK);
    int before = destroyed;
    use(&cache, 8);
    use(&cache, 9);
    assert_int_equal(*(int64_t *)op, 7);
    ly_op_cache_release(&cache, held);
    assert_true(destroyed > before);

    /* A creation that fails returns its status and caches nothing. */
    ly_conv_key missing = key_for(42);
    ly_op_entry *entry = NULL;
    assert_int_equal(ly_op_cache_acquire(&cache, &missing, create_failing, NULL, &entry, &op),
                     LY_E_DECLINED);
}

static void test_fingerprint_sees_values(void **state)
{
    (void)state;
    float w[2 * 3 * 3 * 3], b[2], x[3 * 5 * 5], y[2 * 5 * 5];
    for (int i = 0; i < 54; i++)
        w[i] = (float)i;
    b[0] = b[1] = 0.5f;
    ly_tensor xt, wt, bt, yt;
    assert_int_equal(ly_tensor_init(&xt, x, LY_F32, 4, (int64_t[]){1, 3, 5, 5}), LY_OK);
    assert_int_equal(ly_tensor_init(&wt, w, LY_F32, 4, (int64_t[]){2, 3, 3, 3}), LY_OK);
    assert_int_equal(ly_tensor_init(&bt, b, LY_F32, 1, (int64_t[]){2}), LY_OK);
    assert_int_equal(ly_tensor_init(&yt, y, LY_F32, 4, (int64_t[]){1, 2, 5, 5}), LY_OK);
    ly_kernel_call call;
    assert_int_equal(ly_kernel_call_init(&call), LY_OK);
    call.in[0] = &xt;
    call.in[1] = &wt;
    call.in[2] = &bt;
    call.out[0] = &yt;
    ly_conv2d_params params = LY_CONV2D_DEFAULTS;
    params.padding[0] = params.padding[1] = 1;
    call.params = &params;
    ly_conv_key a, again, changed, bias_changed, threads;
    ly_conv_key_init(&a, &call, 1);
    ly_conv_key_init(&again, &call, 1);
    assert_memory_equal(&a, &again, sizeof a);
    w[53] = -1.0f; /* the last weight is always sampled */
    ly_conv_key_init(&changed, &call, 1);
    assert_memory_not_equal(&a, &changed, sizeof a);
    b[1] = 0.25f;
    ly_conv_key_init(&bias_changed, &call, 1);
    assert_memory_not_equal(&changed, &bias_changed, sizeof a);
    ly_conv_key_init(&threads, &call, 2);
    assert_memory_not_equal(&bias_changed, &threads, sizeof a);
}

static void test_scratch(void **state)
{
    (void)state;
    unsigned char *a = ly_nn_scratch(0, 100);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 1, 100);
    assert_ptr_equal(ly_nn_scratch(0, 50), a); /* kept while big enough */
    unsigned char *b = ly_nn_scratch(1, 100);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    unsigned char *grown = ly_nn_scratch(0, 1 << 20);
    assert_non_null(grown);
    grown[(1 << 20) - 1] = 2;
    assert_null(ly_nn_scratch(LY_NN_SCRATCH_BUFFERS, 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_and_eviction),
        cmocka_unit_test(test_fingerprint_sees_values),
        cmocka_unit_test(test_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
