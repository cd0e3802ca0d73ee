/* SPDX-License-Identifier: MIT */
/*
 * The fp32 -> E4M3 conversion against an independent exact oracle on every fp32 bit
 * pattern (a stride of them under the sanitizers), plus the decode of all 256 codes and the
 * probe values of numerics.md section 1.3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "libreyolo/quant.h"
#include "ops/quant/numerics.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The oracle, in double, one binade [2^E, 2^(E+1)) of |x| at a time. Within a binade
 * the E4M3 grid has a fixed quantum (2^(E-3), or 2^-9 below 2^-6), so the rounded
 * value is k quanta with k = nearbyint(|x| / quantum) (ties to even), and the code is
 * the binade's first code plus k (k may reach the next binade's first code, which is
 * the right code). PyTorch's non-saturating policy: a code >= 0x7F (480, the NaN
 * slot), inf and NaN give 0x7F|sign. */
typedef struct binade_oracle {
    enum { ALL_NAN, ALL_ZERO, ROUND } kind;
    double inv_quantum;
    int first_code; /* code of k = 0 */
} binade_oracle;

static binade_oracle oracle_for_exponent_field(uint32_t field)
{
    if (field == 255) return (binade_oracle){ALL_NAN, 0, 0};
    if (field == 0) return (binade_oracle){ALL_ZERO, 0, 0}; /* zero and fp32 subnormals */
    int e = (int)field - 127;
    if (e >= 9) return (binade_oracle){ALL_NAN, 0, 0};   /* >= 512 > 464 */
    if (e <= -12) return (binade_oracle){ALL_ZERO, 0, 0}; /* < 2^-11: under half a quantum */
    if (e < -6) return (binade_oracle){ROUND, ldexp(1.0, 9), 0};
    return (binade_oracle){ROUND, ldexp(1.0, 3 - e), ((e + 7) << 3) - 8};
}

static uint8_t oracle_e4m3(const binade_oracle *b, float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (b->kind == ALL_NAN || isnan(x)) return 0x7F | sign;
    if (b->kind == ALL_ZERO) return sign;
    double k = nearbyint(fabs((double)x) * b->inv_quantum); /* exact scaling by 2^n */
    int code = b->first_code + (int)k;
    return code >= 0x7F ? (0x7F | sign) : (uint8_t)(sign | code);
}

typedef struct range_job {
    uint32_t first_field, field_step; /* exponent fields first, first+step, ... */
    uint32_t mantissa_stride;
    uint64_t checked, mismatches;
    uint32_t first_bad;
    uint8_t first_got, first_want;
} range_job;

static void note_mismatch(range_job *job, uint32_t u, uint8_t got, uint8_t want)
{
    if (job->mismatches++ == 0) {
        job->first_bad = u;
        job->first_got = got;
        job->first_want = want;
    }
}

static void *run_range(void *arg)
{
    range_job *job = arg;
    for (uint32_t field = job->first_field; field < 256; field += job->field_step) {
        binade_oracle b = oracle_for_exponent_field(field);
        for (uint32_t sign = 0; sign < 2; sign++) {
            uint32_t base = sign << 31 | field << 23;
            /* The inlined primitive (what the reference and the providers' tails use)
             * on every pattern; the public wrapper on a stride of them. */
            for (uint32_t m = 0; m < (1u << 23); m += 37 * job->mantissa_stride) {
                float x = from_bits(base | m);
                if (ly_fp32_to_e4m3(x) != ly_nm_fp32_to_e4m3(x))
                    note_mismatch(job, base | m, ly_fp32_to_e4m3(x), ly_nm_fp32_to_e4m3(x));
            }
            if (b.kind != ROUND) {
                /* One answer for the whole binade (NaN patterns included): a tight,
                 * branch-free loop. */
                uint8_t want = oracle_e4m3(&b, from_bits(base));
                uint64_t bad = 0;
                for (uint32_t m = 0; m < (1u << 23); m += job->mantissa_stride)
                    bad += ly_nm_fp32_to_e4m3(from_bits(base | m)) != want;
                job->checked += ((1u << 23) + job->mantissa_stride - 1) / job->mantissa_stride;
                if (bad) {
                    for (uint32_t m = 0; m < (1u << 23); m += job->mantissa_stride) {
                        uint8_t got = ly_nm_fp32_to_e4m3(from_bits(base | m));
                        if (got != want) {
                            note_mismatch(job, base | m, got, want);
                            break;
                        }
                    }
                    job->mismatches += bad - 1;
                }
                continue;
            }
            for (uint32_t m = 0; m < (1u << 23); m += job->mantissa_stride) {
                float x = from_bits(base | m);
                uint8_t got = ly_nm_fp32_to_e4m3(x), want = oracle_e4m3(&b, x);
                job->checked++;
                if (got != want) note_mismatch(job, base | m, got, want);
            }
        }
    }
    return NULL;
}

static void test_every_fp32_pattern(void **state)
{
    (void)state;
#ifdef LY_SANITIZED
    const uint32_t stride = 7;
#else
    const uint32_t stride = 1;
#endif
    /* Alternate exponent fields between the two threads so both get half of the
     * binades that need rounding. */
    range_job jobs[2] = {{.first_field = 0, .field_step = 2, .mantissa_stride = stride},
                         {.first_field = 1, .field_step = 2, .mantissa_stride = stride}};
    pthread_t thread;
    bool threaded = pthread_create(&thread, NULL, run_range, &jobs[1]) == 0;
    run_range(&jobs[0]);
    if (threaded)
        pthread_join(thread, NULL);
    else
        run_range(&jobs[1]);
    for (int i = 0; i < 2; i++) {
        if (jobs[i].mismatches)
            fail_msg("%llu mismatches; first: bits 0x%08x (%a) gave 0x%02x, oracle 0x%02x",
                     (unsigned long long)jobs[i].mismatches, jobs[i].first_bad,
                     (double)from_bits(jobs[i].first_bad), jobs[i].first_got, jobs[i].first_want);
    }
    uint64_t per_binade = ((1u << 23) + stride - 1) / stride * 2;
    assert_int_equal(jobs[0].checked + jobs[1].checked, 256 * per_binade);
}

/* Decode oracle: (-1)^s * 2^(e-7) * (1 + m/8), subnormal m * 2^-9, 0x7F/0xFF NaN. */
static void test_decode_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        float got = ly_e4m3_to_fp32((uint8_t)c);
        int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
        if (e == 15 && m == 7) {
            assert_true(isnan(got));
            assert_int_equal(signbit(got) != 0, s);
            continue;
        }
        double mag = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, e - 7);
        float want = (float)(s ? -mag : mag);
        assert_int_equal(to_bits(got), to_bits(want));
        /* Every finite value is on the grid, so it encodes back to its own code. */
        assert_int_equal(ly_fp32_to_e4m3(got), c);
    }
    assert_true(ly_e4m3_to_fp32(0x7E) == 448.0f);
    assert_true(ly_e4m3_to_fp32(0x08) == 0x1p-6f);
    assert_true(ly_e4m3_to_fp32(0x01) == 0x1p-9f);
}

static void test_probe_values(void **state)
{
    (void)state;
    assert_int_equal(ly_fp32_to_e4m3(464.0f), 0x7E);
    assert_int_equal(ly_fp32_to_e4m3(nextafterf(464.0f, 1000.0f)), 0x7F);
    assert_int_equal(ly_fp32_to_e4m3(464.0001f), 0x7F);
    assert_int_equal(ly_fp32_to_e4m3(-464.0001f), 0xFF);
    assert_int_equal(ly_fp32_to_e4m3(448.0f), 0x7E);
    assert_int_equal(ly_fp32_to_e4m3(480.0f), 0x7F);
    assert_int_equal(ly_fp32_to_e4m3(0x1p-10f), 0x00);
    assert_int_equal(ly_fp32_to_e4m3(1.0000001f * 0x1p-10f), 0x01);
    assert_int_equal(ly_fp32_to_e4m3(-0x1p-10f), 0x80);
    assert_int_equal(ly_fp32_to_e4m3(3.0f * 0x1p-10f), 0x02); /* 1.5 quanta: tie to even 2 */
    assert_int_equal(ly_fp32_to_e4m3(5.0f * 0x1p-10f), 0x02); /* 2.5 quanta: tie to even 2 */
    assert_int_equal(ly_fp32_to_e4m3(0x1p-6f), 0x08);
    assert_int_equal(ly_fp32_to_e4m3(-0.0f), 0x80);
    assert_int_equal(ly_fp32_to_e4m3(0.0f), 0x00);
    assert_int_equal(ly_fp32_to_e4m3(-1e-30f), 0x80);
    assert_int_equal(ly_fp32_to_e4m3(NAN), 0x7F);
    assert_int_equal(ly_fp32_to_e4m3(-NAN), 0xFF);
    assert_int_equal(ly_fp32_to_e4m3(INFINITY), 0x7F);
    assert_int_equal(ly_fp32_to_e4m3(-INFINITY), 0xFF);
    assert_int_equal(ly_fp32_to_e4m3(1.0f), 0x38);
    assert_int_equal(ly_fp32_to_e4m3(1.0625f), 0x38); /* tie between 1 and 1.125: even */
    assert_int_equal(ly_fp32_to_e4m3(1.1875f), 0x3A); /* tie between 1.125 and 1.25: even */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_values),
        cmocka_unit_test(test_decode_all_codes),
        cmocka_unit_test(test_every_fp32_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
