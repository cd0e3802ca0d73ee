/* SPDX-License-Identifier: MIT */
/*
 * The "avx2" quant implementations against the reference on the quant ops'
 * own cases (src/ops/quant/cases*.c) through the parity harness, on the
 * thread counts the gate (test_parity: 1 and 3) leaves out: the sweep cases on
 * 2 and 4 threads; the streamed outputs (the full set's 8 MiB ones, or the quick
 * set's in sanitized builds, whose streaming threshold is 64 KiB) on 2 and 3,
 * NVFP4's dynamic path also in place. Then the AVX2 primitives the kernels are
 * built on against their scalar definitions, swept over fp32 bit patterns (the
 * E4M3 conversions, the MXFP4 exponent), and conv2d_int8's input quantizer.
 * Skips when the CPU lacks AVX2/FMA or the build has no AVX2 providers.
 */
#include "core/core.h"
#include "core/layout.h"
#include "kernels/check.h"
#include "libreyolo/kernels.h"
#include "ops/quant/numerics.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "parity_report.h"

#ifdef LY_SANITIZED
#define SMALL_RUN 1
#else
#define SMALL_RUN 0
#endif

#ifdef LY_HAVE_AVX2_PROVIDERS
/* Test hooks of the AVX2 files. */
int ly_avx2_mxfp4_eff_bits(float amax, uint32_t *eff_bits);
void ly_avx2_e4m3_encode_array(const float *x, int64_t n, uint8_t *codes);
void ly_avx2_e4m3_decode_array(const uint8_t *codes, int64_t n, float *out);
void ly_avx2_e4m3_round_clamped_array(const float *x, int64_t n, float *out);
#ifdef LY_HAVE_ONEDNN
void ly_onednn_quantize_u8_nhwc_lanes(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int block, float inv, float zero_point, uint8_t *out,
                                      int threads, int lanes);
#endif
#endif

#define SKIP_WITHOUT_AVX2()                                                                        \
    do {                                                                                           \
        if (!ly_test_have_avx2()) {                                                                \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- The quant ops' cases through the harness ------------------------------------------- */

/* Runs "avx2" on every quant op as `base` says (slot set per op); ops with no
 * case the options select count as run when `every_op_runs` is false. */
static void check_quant_ops(ly_check_options base, const char *what, bool every_op_runs)
{
    int ops = 0;
    for (int i = 0; i < LY_OP_COUNT; i++) {
        const ly_op_def *def = ly_op_def_of((ly_op)i);
        if (def->cases != &ly_cases_quant) continue;
        ly_check_options options = base;
        options.slot = def->name;
        options.impl = "avx2";
        if (i != LY_OP_FAKE_QUANT_NVFP4_DYNAMIC) options.alias_inputs = 0;
        char label[160];
        snprintf(label, sizeof label, "%s, %s, %d threads", def->name, what, base.threads);
        int ran = parity_expect_clean(&options, label);
        if (every_op_runs && ran != 1) fail_msg("%s: avx2 ran no case", label);
        ops++;
    }
    assert_true(ops >= 18); /* 8 forward, 8 backward, 2 unpack */
}

/* The sweep family (every shape, fill and operand variant, shapes above the
 * threading threshold): the gate runs it on 1 and 3 threads. */
static void test_quant_cases_on_more_threads(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    for (int threads = 2; threads <= 4; threads += 2)
        check_quant_ops(
            (ly_check_options){.threads = threads, .size = LY_CHECK_QUICK, .cases = "sweep"},
            "the sweep cases", true);
}

/* Streaming stores need the output's alignment: the cases put it 0, 4, 12 and
 * 1 floats past a 64-byte boundary. The dynamic NVFP4 path keeps its block
 * maxima in the output, which must then not be its input: in place too. */
static void test_streamed_outputs(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    for (int threads = 2; threads <= 3; threads++)
        check_quant_ops((ly_check_options){.threads = threads,
                                           .size = SMALL_RUN ? LY_CHECK_QUICK : LY_CHECK_FULL,
                                           .cases = "streamed",
                                           .alias_inputs = 1u << 0},
                        "streamed outputs", false);
}

/* ---- The AVX2 primitives against their scalar definitions ------------------------------ */

static uint64_t rng_state;

static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline float rng_uniform(void) /* [0, 1) */
{
    return (float)(rng_next() >> 40) * 0x1p-24f;
}

/* Every eighth value one the quantizers treat specially. */
static inline void fill_edge(float *x, int64_t n)
{
    static const float specials[] = {NAN,    -NAN,    INFINITY,   -INFINITY, 0.0f,    -0.0f,
                                     1e-39f, -3e-39f, FLT_MAX,    -FLT_MAX,  1e30f,   -1e30f,
                                     127.5f, -128.5f, 127.49999f, -128.4f,   -128.6f, 0x1p-149f};
    for (int64_t i = 0; i < n; i++) {
        float u = rng_uniform() + rng_uniform() + rng_uniform() - 1.5f;
        x[i] = rng_next() % 8 == 0 ? specials[rng_next() % (sizeof specials / sizeof specials[0])]
                                   : 3.0f * u;
    }
}

#ifdef LY_HAVE_AVX2_PROVIDERS
/* The table-based MXFP4 exponent against the reference's log2 densely around
 * every power of two, where fp32 rounding of log2 moves the floor. */
static void test_mxfp4_exponent(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    const int window = SMALL_RUN ? 300 : 2048;
    uint32_t got;
    assert_true(ly_avx2_mxfp4_eff_bits(1.0f, &got));
    for (int e = -127; e <= 128; e++) {
        uint32_t center = e <= 127 ? ly_nm_f32_bits(ldexpf(1.0f, e)) : 0x7F800000u;
        for (int d = -window; d <= window; d++) {
            uint32_t b = center + (uint32_t)d;
            if ((int64_t)center + d < 0 || b > 0x7F800000u) continue;
            float a = ly_nm_bits_f32(b);
            ly_avx2_mxfp4_eff_bits(a, &got);
            uint32_t want = ly_nm_f32_bits(ly_nm_mxfp4_eff(a));
            if (got != want)
                fail_msg("mxfp4 eff of %a (0x%08x): reference 0x%08x avx2 0x%08x", (double)a, b,
                         want, got);
        }
    }
    rng_state = 8;
    for (int i = 0; i < (SMALL_RUN ? 20000 : 1000000); i++) {
        uint32_t b = (uint32_t)rng_next() & 0x7FFFFFFFu;
        float a = ly_nm_bits_f32(b);
        ly_avx2_mxfp4_eff_bits(a, &got);
        uint32_t want = ly_nm_f32_bits(ly_nm_mxfp4_eff(a));
        if (got != want)
            fail_msg("mxfp4 eff of %a (0x%08x): reference 0x%08x avx2 0x%08x", (double)a, b, want,
                     got);
    }
}

/* The 8-lane E4M3 conversions against the scalar ones: a sweep over fp32 bit
 * patterns, densely where the rounding matters, and every code. */
static void check_e4m3_range(uint32_t first, uint32_t last, uint32_t step)
{
    enum { CHUNK = 4096 };
    static float x[CHUNK];
    static uint8_t codes[CHUNK];
    int64_t n = 0;
    for (uint64_t b = first;; b += step) {
        bool end = b > last;
        if (!end) x[n++] = ly_nm_bits_f32((uint32_t)b);
        if (n == CHUNK || (end && n > 0)) {
            ly_avx2_e4m3_encode_array(x, n, codes);
            for (int64_t i = 0; i < n; i++)
                if (codes[i] != ly_nm_fp32_to_e4m3(x[i]))
                    fail_msg("e4m3 of %a (0x%08x): reference 0x%02x avx2 0x%02x", (double)x[i],
                             ly_nm_f32_bits(x[i]), ly_nm_fp32_to_e4m3(x[i]), codes[i]);
            n = 0;
        }
        if (end) break;
    }
}

/* The round trip for |x| <= 448 (and NaN), which the kernels use after their
 * clamps: every such fp32 value of one sign below 2^-5 and a sweep above. */
static void check_e4m3_round_range(uint32_t first, uint32_t last, uint32_t step)
{
    enum { CHUNK = 4096 };
    static float x[CHUNK], got[CHUNK];
    int64_t n = 0;
    for (uint64_t b = first;; b += step) {
        bool end = b > last;
        if (!end) x[n++] = ly_nm_bits_f32((uint32_t)b);
        if (n == CHUNK || (end && n > 0)) {
            ly_avx2_e4m3_round_clamped_array(x, n, got);
            for (int64_t i = 0; i < n; i++) {
                float want = ly_nm_e4m3_to_fp32(ly_nm_fp32_to_e4m3(x[i]));
                if (ly_nm_f32_bits(got[i]) != ly_nm_f32_bits(want))
                    fail_msg("e4m3 round trip of %a (0x%08x): reference 0x%08x avx2 0x%08x",
                             (double)x[i], ly_nm_f32_bits(x[i]), ly_nm_f32_bits(want),
                             ly_nm_f32_bits(got[i]));
            }
            n = 0;
        }
        if (end) break;
    }
}

static void test_e4m3_primitives(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    uint8_t all[256];
    float decoded[256];
    for (int c = 0; c < 256; c++)
        all[c] = (uint8_t)c;
    ly_avx2_e4m3_decode_array(all, 256, decoded);
    for (int c = 0; c < 256; c++)
        assert_int_equal(ly_nm_f32_bits(decoded[c]),
                         ly_nm_f32_bits(ly_nm_e4m3_to_fp32((uint8_t)c)));
    for (uint32_t sign = 0; sign <= 1; sign++) {
        uint32_t s = sign << 31;
        uint32_t sparse = SMALL_RUN ? 65521u : 509u;
        check_e4m3_range(s, s | 0x7FFFFFFFu, sparse);
        /* around 2^-10 .. 2^-5 (subnormal E4M3 and the first normals) */
        check_e4m3_range(s | 0x3A800000u, s | 0x3D000000u, SMALL_RUN ? 997u : 7u);
        /* around 448 .. 480 and the overflow edge */
        check_e4m3_range(s | 0x43D00000u, s | 0x43F10000u, SMALL_RUN ? 31u : 1u);
        /* inf and the NaNs near it */
        check_e4m3_range(s | 0x7F7FFF00u, s | 0x7F800100u, 1u);
        check_e4m3_round_range(s, s | 0x3D000000u, SMALL_RUN ? 4099u : 13u);
        check_e4m3_round_range(s, s | 0x43E00000u, SMALL_RUN ? 65521u : 263u);
        check_e4m3_round_range(s | 0x43D00000u, s | 0x43E00000u, 1u);
        check_e4m3_round_range(s | 0x7F800001u, s | 0x7F800100u, 1u);
        check_e4m3_round_range(s | 0x7FC00000u, s | 0x7FC00100u, 1u);
    }
}

#else
static void test_mxfp4_exponent(void **state)
{
    (void)state;
    skip();
}

static void test_e4m3_primitives(void **state)
{
    (void)state;
    skip();
}
#endif

/* ---- the int8 execute provider's input quantizer ----------------------------------------- */

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(LY_HAVE_ONEDNN)
/* conv2d_int8's quantizer (providers/onednn/quantize_u8_avx2.c) writes
 * fake_quant_int8_affine's codes + 128 as u8 channels-last: the reference's
 * codes bit for bit, from plain and channel-blocked maps, on 8 and (AVX-512)
 * 16 lanes, on 1 and 2 threads, specials and exact midpoints included. */
static void test_quantize_u8_nhwc(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    static const struct {
        int64_t c, h, w;
    } shapes[] = {{48, 3, 21}, {40, 2, 17}, {16, 4, 9},
                  {32, 3, 7},  {5, 3, 19},  {64, 40, 33} /* threaded */};
    static const struct {
        float scale;
        int32_t zero_point;
    } qparams[] = {{0.05f, -3}, {0.05f, -128}, {1.0f / 255.0f, 127}, {0.3f, 0}};
    int checked = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t c = shapes[si].c, h = shapes[si].h, w = shapes[si].w, n = c * h * w;
        int64_t dims[4] = {1, c, h, w};
        float *x = malloc((size_t)n * sizeof(float)),
              *blocked = malloc((size_t)(n + 16 * h * w) * sizeof(float));
        assert_non_null(x);
        assert_non_null(blocked);
        uint8_t *got = malloc((size_t)n), *want = malloc((size_t)n);
        assert_non_null(got);
        assert_non_null(want);
        for (size_t qi = 0; qi < sizeof qparams / sizeof qparams[0]; qi++) {
            float scale = qparams[qi].scale, inv = 1.0f / scale;
            float zp = (float)qparams[qi].zero_point;
            fill_edge(x, n);
            for (int64_t i = 0; i < n; i += 7) /* exact midpoints of the code grid */
                x[i] = ((float)(int)(rng_next() % 300) - 150.5f) * scale;
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t p = 0; p < h * w; p++)
                    want[p * c + ch] =
                        (uint8_t)(ly_nm_clamp_i64(ly_nm_int8_code(x[ch * h * w + p], inv, zp), -128,
                                                  127) +
                                  128);
            for (int block = 0; block <= 16; block += 8) {
                if (block && c % block != 0) continue; /* the graph blocks whole blocks only */
                const float *in = x;
                if (block) {
                    ly_layout_reorder(x, LY_LAYOUT_PLAIN, blocked,
                                      block == 16 ? LY_LAYOUT_NCHW16C : LY_LAYOUT_NCHW8C, dims);
                    in = blocked;
                }
                for (int lanes = 8; lanes <= 16; lanes += 8) {
                    if (lanes == 16 && !ly_cpu()->avx512f) continue;
                    for (int threads = 1; threads <= 2; threads++) {
                        memset(got, 0xA5, (size_t)n);
                        ly_onednn_quantize_u8_nhwc_lanes(in, 1, c, h, w, block, inv, zp, got,
                                                         threads, lanes);
                        for (int64_t i = 0; i < n; i++)
                            if (got[i] != want[i])
                                fail_msg("quantize_u8 [%lld,%lld,%lld] block %d, %d lanes, %d "
                                         "threads, scale %g zp %g: element %lld (%a) got %u, "
                                         "the reference's code + 128 is %u",
                                         (long long)c, (long long)h, (long long)w, block, lanes,
                                         threads, (double)scale, (double)zp, (long long)i,
                                         (double)x[(i % c) * h * w + i / c], got[i], want[i]);
                        checked++;
                    }
                }
            }
        }
        free(x);
        free(blocked);
        free(got);
        free(want);
    }
    print_message("conv2d_int8's u8 quantizer: %d layout, lane and thread combinations "
                  "bit-identical to the reference's codes\n",
                  checked);
}
#else
static void test_quantize_u8_nhwc(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_primitives),
        cmocka_unit_test(test_mxfp4_exponent),
        cmocka_unit_test(test_quant_cases_on_more_threads),
        cmocka_unit_test(test_streamed_outputs),
        cmocka_unit_test(test_quantize_u8_nhwc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
