/* SPDX-License-Identifier: MIT */
/*
 * The "avx2" quant implementations against the reference, slot by slot: forward
 * and unpack outputs must be bit-identical (bit patterns compared, so the sign
 * of zero counts; for NaN see values_identical), backward within 1e-6, on 1, 2
 * and 4 threads. Inputs: model-like and odd shapes, tails, one element, empty; normal,
 * wide-range and edge values (NaN, +-inf, +-0, subnormals, FLT_MAX, values at
 * 448/464/480, huge |x|); exact rounding midpoints; dynamic and frozen scales.
 * Skips when the CPU lacks AVX2/FMA or the build has no AVX2 providers.
 */
#include "core/core.h"
#include "core/layout.h"
#include "libreyolo/kernels.h"
#include "libreyolo/quant.h"
#include "ops/quant/numerics.h"
#include "ops/quant/reference.h"
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

/* ---- helpers --------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(void) /* [0, 1) */
{
    return (float)(rng_next() >> 40) * 0x1p-24f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#define SKIP_WITHOUT_AVX2()                                                                        \
    do {                                                                                           \
        if (!ly_test_have_avx2()) {                                                                \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

typedef struct shape {
    int ndim;
    int64_t d[4];
} shape;

static const shape nd_shapes[] = {
    {4, {64, 32, 3, 3}},   {2, {7, 13}},    {2, {3, 301}}, {1, {1}},       {1, {0}},
    {2, {0, 5}},           {2, {5, 0}},     {1, {17}},     {3, {2, 3, 5}}, {2, {1, 1000}},
    {2, {33, 17}},         {2, {8, 48}},    {2, {8, 20}},  {2, {8, 40}},   {4, {3, 5, 7, 9}},
    {2, {300, 250}}, /* above the threading threshold, with tails */
#if !SMALL_RUN
    {4, {256, 128, 1, 1}}, {2, {512, 256}},
#endif
};
#define N_SHAPES (sizeof nd_shapes / sizeof nd_shapes[0])

static int64_t shape_numel(const shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->d[i];
    return n;
}

static ly_tensor make_tensor(void *data, ly_dtype dtype, int ndim, const int64_t *dims)
{
    ly_tensor t;
    assert_int_equal(ly_tensor_init(&t, data, dtype, ndim, dims), LY_OK);
    return t;
}

static float *alloc_floats(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

/* Values where the quantizers change their mind, and the usual suspects. */
static const float specials[] = {
    NAN,
    -NAN,
    INFINITY,
    -INFINITY,
    0.0f,
    -0.0f,
    0x1p-149f,
    -0x1p-149f,
    1e-39f,
    -3e-39f,
    FLT_MIN,
    -FLT_MIN,
    FLT_MAX,
    -FLT_MAX,
    1e9f,
    -1e9f,
    1e30f,
    -1e30f,
    448.0f,
    -448.0f,
    464.0f,
    -464.0f,
    0x1.d00002p+8f,
    480.0f,
    -480.0f,
    0x1.dffffep+8f,
    0.25f,
    0.75f,
    5.0f,
    -2.5f,
    6.0f,
    1e-30f,
    0x1.fffffep+2f,
    0x1p127f,
    0x1p-126f,
    0x1p-127f,
    0x1p63f,
    -0x1p63f,
    0x1.fffffep+62f,
    127.5f,
    -128.5f,
    127.49999f,
    -128.4f,
    -128.6f,
    3.4e38f,
    0x1p-10f,
    0x1.000002p-10f,
    0x1p-9f,
    0x1.8p-10f,
    0x1p-6f,
    0x1.fffffep-7f,
};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

typedef enum fill_kind { FILL_NORMAL, FILL_WIDE, FILL_EDGE, FILL_KINDS } fill_kind;

static void fill(float *x, int64_t n, fill_kind kind)
{
    for (int64_t i = 0; i < n; i++) {
        float u = rng_uniform() + rng_uniform() + rng_uniform() - 1.5f;
        switch (kind) {
        case FILL_NORMAL:
            x[i] = 2.0f * u;
            break;
        case FILL_WIDE: {
            float m = 1.0f + rng_uniform();
            int e = (int)(rng_next() % 81) - 40;
            x[i] = ldexpf((rng_next() & 1) ? -m : m, e);
            break;
        }
        default:
            x[i] = (rng_next() % 8 == 0) ? specials[rng_next() % N_SPECIALS] : 3.0f * u;
            break;
        }
    }
}

static const char *fill_name(fill_kind kind)
{
    return kind == FILL_NORMAL ? "normal" : kind == FILL_WIDE ? "wide" : "edge";
}

/* ---- running and comparing ------------------------------------------------------------ */

typedef struct case_info {
    const char *slot;
    char name[160];
    const float *input; /* element-wise input for messages (NULL if not element-wise) */
    int64_t input_n;
} case_info;

static bool values_close(float ref, float got)
{
    if (bits_of(ref) == bits_of(got)) return true;
    if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got);
    if (isinf(ref) || isinf(got)) return false;
    return fabs((double)ref - (double)got) <= 1e-6;
}

/* Forward outputs: the same bits, NaN sign and payload included. IEEE 754 and C
 * leave open which NaN an add or multiply of two NaNs returns (x86 returns the
 * first operand's, and compilers commute + and *), so the reference pins the
 * choice explicitly (ly_nm_add_nan_first / ly_nm_mul_nan_first) and the result
 * no longer depends on the compiler or -O level. */
static bool values_identical(float ref, float got)
{
    return bits_of(ref) == bits_of(got);
}

static void compare(const case_info *info, int threads, bool exact, const float *ref,
                    const float *got, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        bool ok = exact ? values_identical(ref[i], got[i]) : values_close(ref[i], got[i]);
        if (ok) continue;
        char input[96] = "";
        if (info->input && i < info->input_n)
            snprintf(input, sizeof input, " input %.9g (0x%08x)", (double)info->input[i],
                     bits_of(info->input[i]));
        fail_msg("%s [%s] threads=%d: index %lld:%s reference %.9g (0x%08x) avx2 %.9g (0x%08x)",
                 info->slot, info->name, threads, (long long)i, input, (double)ref[i],
                 bits_of(ref[i]), (double)got[i], bits_of(got[i]));
    }
}

/* Run `call` through the registry on "reference" and on "avx2" with 1, 2 and 4
 * threads, and compare. Returns false when the validator rejects the call. */
static bool run_case(const case_info *info, ly_kernel_call *call)
{
    ly_tensor outs[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    if (ly_kernel_infer_outputs(info->slot, call, outs, &n_out) != LY_OK) return false;
    assert_int_equal(n_out, 1);
    int64_t n = ly_tensor_numel(&outs[0]);
    float *ref = alloc_floats(n + 8), *got = alloc_floats(n + 8);
    ly_tensor ref_t = make_tensor(ref, LY_F32, outs[0].ndim, outs[0].shape);
    ly_tensor got_t = make_tensor(got, LY_F32, outs[0].ndim, outs[0].shape);
    bool exact = strstr(info->slot, "_backward") == NULL;

    call->out[0] = &ref_t;
    call->threads = 1;
    ly_status st = ly_kernel_run_impl(info->slot, "reference", call);
    if (st != LY_OK) fail_msg("%s [%s]: reference: %s", info->slot, info->name, ly_last_error());

    static const int thread_counts[] = {1, 2, 4};
    for (size_t t = 0; t < 3; t++) {
        /* A canary in every element (and past the end) catches unwritten outputs
         * and overruns. */
        for (int64_t i = 0; i < n + 8; i++)
            got[i] = from_bits(0x7FBADBADu);
        call->out[0] = &got_t;
        call->threads = thread_counts[t];
        st = ly_kernel_run_impl(info->slot, "avx2", call);
        if (st != LY_OK) fail_msg("%s [%s]: avx2: %s", info->slot, info->name, ly_last_error());
        compare(info, thread_counts[t], exact, ref, got, n);
        for (int64_t i = n; i < n + 8; i++)
            assert_int_equal(bits_of(got[i]), 0x7FBADBADu);
    }
    free(ref);
    free(got);
    return true;
}

/* Forward then backward (grad first, then the forward's inputs). */
static void run_forward_backward(case_info *info, const char *slot, ly_kernel_call *call, int n_in,
                                 int64_t numel)
{
    info->slot = slot;
    run_case(info, call);

    char backward[96];
    snprintf(backward, sizeof backward, "%s_backward", slot);
    float *grad = alloc_floats(numel);
    fill(grad, numel, FILL_NORMAL);
    if (numel > 3) {
        grad[0] = NAN;
        grad[numel / 2] = INFINITY;
        grad[numel - 1] = -0.0f;
    }
    ly_tensor grad_t = make_tensor(grad, LY_F32, call->in[0]->ndim, call->in[0]->shape);
    ly_kernel_call back;
    ly_kernel_call_init(&back);
    back.params = call->params;
    back.in[0] = &grad_t;
    for (int i = 0; i < n_in; i++)
        back.in[i + 1] = call->in[i];
    case_info binfo = *info;
    binfo.slot = backward;
    binfo.input = grad;
    binfo.input_n = numel;
    run_case(&binfo, &back);
    free(grad);
}

/* ---- fake_quant_int8_per_channel ---------------------------------------------------- */

/* Round-half ties of x * inv with a power-of-two frozen scale. */
static void fill_int_ties(float *x, int64_t n, float scale, int range)
{
    for (int64_t i = 0; i < n; i++) {
        int k = (int)(rng_next() % (uint64_t)(2 * range + 1)) - range;
        x[i] = ((float)k + ((rng_next() & 1) ? 0.5f : 0.0f)) * scale;
    }
}

static void test_int8_per_channel(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 1;
    for (size_t si = 0; si < N_SHAPES; si++) {
        const shape *sh = &nd_shapes[si];
        int64_t n = shape_numel(sh);
        float *x = alloc_floats(n);
        ly_tensor x_t = make_tensor(x, LY_F32, sh->ndim, sh->d);
        int64_t axes[3] = {0, sh->ndim - 1, sh->ndim > 2 ? 1 : -1};
        for (int fk = 0; fk <= FILL_KINDS; fk++) {
            for (int ai = 0; ai < 3; ai++) {
                int64_t axis = axes[ai];
                int64_t channels = sh->d[axis < 0 ? axis + sh->ndim : axis];
                float *scale = alloc_floats(channels);
                ly_tensor scale_t = make_tensor(scale, LY_F32, 1, &channels);
                for (int frozen = 0; frozen < 3; frozen++) {
                    if (fk == FILL_KINDS) {
                        if (frozen == 0) continue;
                        fill_int_ties(x, n, 0x1p-4f, 140);
                    } else {
                        fill(x, n, (fill_kind)fk);
                    }
                    for (int64_t c = 0; c < channels; c++)
                        scale[c] = frozen == 2 && c < (int64_t)N_SPECIALS
                                       ? specials[(c * 7) % N_SPECIALS]
                                       : (fk == FILL_KINDS ? 0x1p-4f : 0.01f + rng_uniform());
                    ly_kernel_call call;
                    ly_kernel_call_init(&call);
                    call.in[0] = &x_t;
                    call.in[1] = frozen ? &scale_t : NULL;
                    call.params = &(ly_fake_quant_int8_per_channel_params){.axis = axis};
                    case_info info = {.input = x, .input_n = n};
                    snprintf(info.name, sizeof info.name, "shape %zu, %s, axis %lld, scale %s", si,
                             fk == FILL_KINDS ? "ties" : fill_name((fill_kind)fk), (long long)axis,
                             frozen == 0   ? "dynamic"
                             : frozen == 1 ? "frozen"
                                           : "frozen special");
                    run_forward_backward(&info, ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL),
                                         &call, 2, n);
                }
                free(scale);
            }
        }
        free(x);
    }
}

/* ---- fake_quant_int8_affine ------------------------------------------------------------ */

static void test_int8_affine(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 2;
    static const float ranges[][2] = {
        {-1.0f, 3.0f},     {-0.5f, 0.7f},     {0.0f, 0.0f},      {2.0f, 5.0f},
        {-8.0f, 7.9375f},  {-4.0f, 11.9375f}, {-INFINITY, 1.0f}, {NAN, 1.0f},
        {-1.0f, INFINITY}, {-3.0f, NAN},      {-1e30f, 1e30f},   {-1e-30f, 1e-30f},
    };
    for (size_t si = 0; si < N_SHAPES; si++) {
        const shape *sh = &nd_shapes[si];
        int64_t n = shape_numel(sh);
        float *x = alloc_floats(n);
        ly_tensor x_t = make_tensor(x, LY_F32, sh->ndim, sh->d);
        for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
            float lo = ranges[ri][0], hi = ranges[ri][1];
            int64_t one = 1;
            ly_tensor lo_t = make_tensor(&lo, LY_F32, 1, &one);
            ly_tensor hi_t = make_tensor(&hi, LY_F32, 1, &one);
            for (int fk = 0; fk <= FILL_KINDS; fk++) {
                if (fk == FILL_KINDS)
                    fill_int_ties(x, n, 0x1p-4f, 140);
                else
                    fill(x, n, (fill_kind)fk);
                ly_kernel_call call;
                ly_kernel_call_init(&call);
                call.in[0] = &x_t;
                call.in[1] = &lo_t;
                call.in[2] = &hi_t;
                case_info info = {.input = x, .input_n = n};
                snprintf(info.name, sizeof info.name, "shape %zu, %s, lo %g hi %g", si,
                         fk == FILL_KINDS ? "ties" : fill_name((fill_kind)fk), (double)lo,
                         (double)hi);
                run_forward_backward(&info, ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &call, 3, n);
            }
        }
        free(x);
    }
    /* A 0-d input. */
    float x0 = 0.3f, lo = -1.0f, hi = 1.0f;
    int64_t one = 1;
    ly_tensor x_t = make_tensor(&x0, LY_F32, 0, NULL);
    ly_tensor lo_t = make_tensor(&lo, LY_F32, 1, &one), hi_t = make_tensor(&hi, LY_F32, 1, &one);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &x_t;
    call.in[1] = &lo_t;
    call.in[2] = &hi_t;
    case_info info = {.input = &x0, .input_n = 1};
    snprintf(info.name, sizeof info.name, "0-d");
    run_forward_backward(&info, ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), &call, 3, 1);
}

/* ---- fake_quant_fp8 -------------------------------------------------------------------- */

/* Every E4M3 value and every midpoint between neighbours, both signs, times s. */
static void fill_e4m3_ties(float *x, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(rng_next() % 0x7E);
        float a = ly_nm_e4m3_to_fp32(c), b = ly_nm_e4m3_to_fp32((uint8_t)(c + 1));
        float v = (rng_next() & 1) ? a : (a + b) * 0.5f;
        x[i] = ((rng_next() & 1) ? -v : v) * s;
    }
}

static void test_fp8(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 3;
    for (size_t si = 0; si < N_SHAPES; si++) {
        const shape *sh = &nd_shapes[si];
        int64_t n = shape_numel(sh), rows = sh->d[0];
        float *x = alloc_floats(n), *scale = alloc_floats(rows);
        ly_tensor x_t = make_tensor(x, LY_F32, sh->ndim, sh->d);
        for (int per_row = 0; per_row < 2; per_row++) {
            int64_t sn = per_row ? rows : 1;
            ly_tensor scale_t = make_tensor(scale, LY_F32, 1, &sn);
            for (int fk = 0; fk <= FILL_KINDS; fk++) {
                for (int variant = 0; variant < 3; variant++) {
                    float base = fk == FILL_KINDS ? (variant == 0 ? 1.0f : 0x1p-3f) : 0.0f;
                    if (fk == FILL_KINDS)
                        fill_e4m3_ties(x, n, base);
                    else
                        fill(x, n, (fill_kind)fk);
                    for (int64_t r = 0; r < sn; r++) {
                        if (fk == FILL_KINDS)
                            scale[r] = base;
                        else if (variant == 2)
                            scale[r] = specials[(r * 5 + 3) % N_SPECIALS];
                        else
                            scale[r] = (variant ? 1.0f : 0.01f) * (0.05f + rng_uniform());
                    }
                    ly_kernel_call call;
                    ly_kernel_call_init(&call);
                    call.in[0] = &x_t;
                    call.in[1] = &scale_t;
                    case_info info = {.input = x, .input_n = n};
                    snprintf(info.name, sizeof info.name, "shape %zu, %s, %s scale, variant %d", si,
                             fk == FILL_KINDS ? "ties" : fill_name((fill_kind)fk),
                             per_row ? "per-row" : "single", variant);
                    run_forward_backward(&info, ly_op_name(LY_OP_FAKE_QUANT_FP8), &call, 2, n);
                }
            }
        }
        free(x);
        free(scale);
    }
}

/* ---- fake_quant_int_grouped ------------------------------------------------------------ */

static const shape shapes_2d[] = {
    {2, {7, 13}},    {2, {3, 301}}, {2, {1, 1}},   {2, {0, 5}},    {2, {5, 0}},
    {2, {33, 17}},   {2, {8, 300}}, {2, {4, 100}}, {2, {16, 256}}, {2, {300, 250}},
#if !SMALL_RUN
    {2, {512, 256}},
#endif
};
#define N_SHAPES_2D (sizeof shapes_2d / sizeof shapes_2d[0])

static void test_int_grouped(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 4;
    static const int64_t variants[][2] = {{4, 128}, {2, 64}, {4, 8}, {2, 16},
                                          {4, 3},   {2, 1},  {4, 7}};
    for (size_t si = 0; si < N_SHAPES_2D; si++) {
        const shape *sh = &shapes_2d[si];
        int64_t n = shape_numel(sh);
        float *x = alloc_floats(n);
        ly_tensor x_t = make_tensor(x, LY_F32, 2, sh->d);
        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
            int64_t bits = variants[vi][0], g = variants[vi][1];
            int64_t sd[2] = {sh->d[0], (sh->d[1] + g - 1) / g};
            float *scale = alloc_floats(sd[0] * sd[1]);
            ly_tensor scale_t = make_tensor(scale, LY_F32, 2, sd);
            for (int fk = 0; fk <= FILL_KINDS; fk++)
                for (int frozen = 0; frozen < 3; frozen++) {
                    if (fk == FILL_KINDS) {
                        if (frozen == 0) continue;
                        fill_int_ties(x, n, 0x1p-3f, 12);
                    } else {
                        fill(x, n, (fill_kind)fk);
                    }
                    for (int64_t i = 0; i < sd[0] * sd[1]; i++)
                        scale[i] = frozen == 2 && i % 5 == 0 ? specials[(i * 3) % N_SPECIALS]
                                   : fk == FILL_KINDS        ? 0x1p-3f
                                                             : 0.05f + rng_uniform();
                    ly_kernel_call call;
                    ly_kernel_call_init(&call);
                    call.in[0] = &x_t;
                    call.in[1] = frozen ? &scale_t : NULL;
                    call.params =
                        &(ly_fake_quant_int_grouped_params){.bits = bits, .group_size = g};
                    case_info info = {.input = x, .input_n = n};
                    snprintf(info.name, sizeof info.name,
                             "shape [%lld, %lld], bits %lld g %lld, %s, scale %s",
                             (long long)sh->d[0], (long long)sh->d[1], (long long)bits,
                             (long long)g, fk == FILL_KINDS ? "ties" : fill_name((fill_kind)fk),
                             frozen == 0   ? "dynamic"
                             : frozen == 1 ? "frozen"
                                           : "frozen special");
                    run_forward_backward(&info, ly_op_name(LY_OP_FAKE_QUANT_INT_GROUPED), &call, 2,
                                         n);
                }
            free(scale);
        }
        free(x);
    }
}

/* ---- NVFP4 / MXFP4 --------------------------------------------------------------------- */

/* Blocks whose amax is 6 * 2^k, the other elements E2M1 levels and midpoints
 * times 2^k: with eff = 2^k (MXFP4 always; NVFP4 when tensor_amax is 2688) every
 * scaled value is exactly a level or a tie. */
static void fill_fp4_ties(float *x, int64_t n, int64_t cols, int64_t block)
{
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                                 2.0f, 2.5f,  3.0f, 3.5f,  4.0f, 5.0f,  6.0f};
    float scale = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i % cols;
        if (c % block == 0) {
            scale = ldexpf(1.0f, (int)(rng_next() % 13) - 6);
            x[i] = ((rng_next() & 1) ? -6.0f : 6.0f) * scale;
        } else {
            float v = grid[rng_next() % (sizeof grid / sizeof grid[0])];
            x[i] = ((rng_next() & 1) ? -v : v) * scale;
        }
    }
}

static void run_fp4(const char *slot, bool weight, bool mx)
{
    /* NVFP4 weight tensor_amax values; entry 0 stands for the captured max|W|. */
    static const float amaxes[] = {-1.0f,    2688.0f, 1.0f,   0.0f, NAN,
                                   INFINITY, 1e-30f,  100.0f, 1e30f};
    bool has_amax = weight && !mx;
    int64_t block = mx ? LY_MXFP4_BLOCK : LY_NVFP4_BLOCK;
    for (size_t si = 0; si < N_SHAPES; si++) {
        const shape *sh = &nd_shapes[si];
        int64_t n = shape_numel(sh), cols = sh->d[sh->ndim - 1];
        float *x = alloc_floats(n);
        ly_tensor x_t = make_tensor(x, LY_F32, sh->ndim, sh->d);
        size_t n_amax = has_amax ? sizeof amaxes / sizeof amaxes[0] : 1;
        for (int fk = 0; fk <= FILL_KINDS; fk++)
            for (size_t ai = 0; ai < n_amax; ai++) {
                if (fk == FILL_KINDS) {
                    if (has_amax && ai > 1) continue; /* ties need ts' = 1 */
                    fill_fp4_ties(x, n, cols, block);
                    /* the dynamic NVFP4 scale: tensor amax 2688 gives ts' = 1 */
                    if (!weight && !mx && n > 0) x[n - 1] = 2688.0f;
                } else {
                    fill(x, n, (fill_kind)fk);
                }
                float amax = ai == 0 ? ly_quant_amax(x, n) : amaxes[ai];
                int64_t one = 1;
                ly_tensor amax_t = make_tensor(&amax, LY_F32, 1, &one);
                ly_kernel_call call;
                ly_kernel_call_init(&call);
                call.in[0] = &x_t;
                if (has_amax) call.in[1] = &amax_t;
                case_info info = {.input = x, .input_n = n};
                snprintf(info.name, sizeof info.name, "shape %zu, %s, tensor_amax %g", si,
                         fk == FILL_KINDS ? "ties" : fill_name((fill_kind)fk), (double)amax);
                run_forward_backward(&info, slot, &call, has_amax ? 2 : 1, n);
            }
        free(x);
    }
}

static void test_nvfp4_weight(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 5;
    run_fp4(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), true, false);
}

static void test_nvfp4_dynamic(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 6;
    run_fp4(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), false, false);
}

static void test_mxfp4(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 7;
    run_fp4(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), true, true);
    run_fp4(ly_op_name(LY_OP_FAKE_QUANT_MXFP4_DYNAMIC), false, true);
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
        uint32_t center = e <= 127 ? bits_of(ldexpf(1.0f, e)) : 0x7F800000u;
        for (int d = -window; d <= window; d++) {
            uint32_t b = center + (uint32_t)d;
            if ((int64_t)center + d < 0 || b > 0x7F800000u) continue;
            float a = from_bits(b);
            ly_avx2_mxfp4_eff_bits(a, &got);
            uint32_t want = bits_of(ly_nm_mxfp4_eff(a));
            if (got != want)
                fail_msg("mxfp4 eff of %a (0x%08x): reference 0x%08x avx2 0x%08x", (double)a, b,
                         want, got);
        }
    }
    rng_state = 8;
    for (int i = 0; i < (SMALL_RUN ? 20000 : 1000000); i++) {
        uint32_t b = (uint32_t)rng_next() & 0x7FFFFFFFu;
        float a = from_bits(b);
        ly_avx2_mxfp4_eff_bits(a, &got);
        uint32_t want = bits_of(ly_nm_mxfp4_eff(a));
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
        if (!end) x[n++] = from_bits((uint32_t)b);
        if (n == CHUNK || (end && n > 0)) {
            ly_avx2_e4m3_encode_array(x, n, codes);
            for (int64_t i = 0; i < n; i++)
                if (codes[i] != ly_nm_fp32_to_e4m3(x[i]))
                    fail_msg("e4m3 of %a (0x%08x): reference 0x%02x avx2 0x%02x", (double)x[i],
                             bits_of(x[i]), ly_nm_fp32_to_e4m3(x[i]), codes[i]);
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
        if (!end) x[n++] = from_bits((uint32_t)b);
        if (n == CHUNK || (end && n > 0)) {
            ly_avx2_e4m3_round_clamped_array(x, n, got);
            for (int64_t i = 0; i < n; i++) {
                float want = ly_nm_e4m3_to_fp32(ly_nm_fp32_to_e4m3(x[i]));
                if (bits_of(got[i]) != bits_of(want))
                    fail_msg("e4m3 round trip of %a (0x%08x): reference 0x%08x avx2 0x%08x",
                             (double)x[i], bits_of(x[i]), bits_of(want), bits_of(got[i]));
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
        assert_int_equal(bits_of(decoded[c]), bits_of(ly_nm_e4m3_to_fp32((uint8_t)c)));
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

/* ---- unpack ------------------------------------------------------------------------------ */

static void test_unpack_int_grouped(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 9;
    static const int64_t variants[][2] = {{4, 128}, {2, 64}, {4, 8},  {2, 16}, {4, 2},
                                          {2, 4},   {4, 6},  {2, 12}, {4, 10}};
    static const int64_t rows_list[] = {1, 7, 64, SMALL_RUN ? 100 : 512};
    static const int64_t groups_list[] = {1, 2, 3, 9};
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++)
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
            for (size_t gi = 0; gi < sizeof groups_list / sizeof groups_list[0]; gi++) {
                int64_t bits = variants[vi][0], g = variants[vi][1];
                int64_t rows = rows_list[ri], ng = groups_list[gi];
                if (rows * ng * g > (SMALL_RUN ? 100000 : 1000000)) continue;
                int64_t width = ng * g * bits / 8;
                uint8_t *payload = malloc((size_t)(rows * width > 0 ? rows * width : 1));
                float *scale = alloc_floats(rows * ng);
                assert_non_null(payload);
                for (int64_t i = 0; i < rows * width; i++)
                    payload[i] = (uint8_t)rng_next();
                for (int64_t i = 0; i < rows * ng; i++)
                    scale[i] = i % 7 == 3 ? specials[(i * 11) % N_SPECIALS] : rng_uniform();
                int64_t pd[2] = {rows, width}, sd[2] = {rows, ng};
                ly_tensor payload_t = make_tensor(payload, LY_U8, 2, pd);
                ly_tensor scale_t = make_tensor(scale, LY_F32, 2, sd);
                int64_t features[] = {-1, ng * g - 1, ng * g / 2 + 1, 1, 0};
                for (size_t fi = 0; fi < sizeof features / sizeof features[0]; fi++) {
                    ly_kernel_call call;
                    ly_kernel_call_init(&call);
                    call.in[0] = &payload_t;
                    call.in[1] = &scale_t;
                    call.params = &(ly_unpack_int_grouped_params){
                        .bits = bits, .group_size = g, .in_features = features[fi]};
                    case_info info = {.slot = ly_op_name(LY_OP_UNPACK_INT_GROUPED)};
                    snprintf(info.name, sizeof info.name,
                             "rows %lld, bits %lld, g %lld, ng %lld, in_features %lld",
                             (long long)rows, (long long)bits, (long long)g, (long long)ng,
                             (long long)features[fi]);
                    assert_true(run_case(&info, &call));
                }
                free(payload);
                free(scale);
            }
}

static void test_unpack_nvfp4(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 10;
    static const int64_t rows_list[] = {1, 5, 64, SMALL_RUN ? 100 : 700};
    static const int64_t blocks_list[] = {1, 2, 3, 10, 64};
    static const float amaxes[] = {2688.0f, 1.0f, 0.0f, NAN, INFINITY, 1e-30f, 100.0f};
    static const ly_dtype dtypes[] = {LY_F8E4M3, LY_U8, LY_F32};
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
        for (size_t bi = 0; bi < sizeof blocks_list / sizeof blocks_list[0]; bi++) {
            int64_t rows = rows_list[ri], nb = blocks_list[bi];
            uint8_t *payload = malloc((size_t)(rows * nb * 8));
            uint8_t *codes = malloc((size_t)(rows * nb));
            float *scales = alloc_floats(rows * nb);
            assert_non_null(payload);
            assert_non_null(codes);
            for (int64_t i = 0; i < rows * nb * 8; i++)
                payload[i] = (uint8_t)rng_next();
            for (int64_t i = 0; i < rows * nb; i++) {
                codes[i] = (uint8_t)rng_next();
                scales[i] = i % 5 == 2 ? specials[(i * 13) % N_SPECIALS] : rng_uniform() * 448.0f;
            }
            int64_t pd[2] = {rows, nb * 8}, sd[2] = {rows, nb};
            ly_tensor payload_t = make_tensor(payload, LY_U8, 2, pd);
            for (size_t di = 0; di < 3; di++) {
                ly_tensor bs_t = make_tensor(dtypes[di] == LY_F32 ? (void *)scales : (void *)codes,
                                             dtypes[di], 2, sd);
                for (size_t ai = 0; ai < sizeof amaxes / sizeof amaxes[0]; ai++) {
                    float amax = amaxes[ai];
                    int64_t one = 1;
                    ly_tensor amax_t = make_tensor(&amax, LY_F32, 1, &one);
                    int64_t features[] = {-1, nb * 16 - 5, 1, 0};
                    for (size_t fi = 0; fi < sizeof features / sizeof features[0]; fi++) {
                        ly_kernel_call call;
                        ly_kernel_call_init(&call);
                        call.in[0] = &payload_t;
                        call.in[1] = &bs_t;
                        call.in[2] = &amax_t;
                        call.params = &(ly_unpack_nvfp4_params){.in_features = features[fi]};
                        case_info info = {.slot = ly_op_name(LY_OP_UNPACK_NVFP4)};
                        snprintf(info.name, sizeof info.name,
                                 "rows %lld, blocks %lld, %s scales, amax %g, in_features %lld",
                                 (long long)rows, (long long)nb, ly_dtype_name(dtypes[di]),
                                 (double)amax, (long long)features[fi]);
                        assert_true(run_case(&info, &call));
                    }
                }
            }
            free(payload);
            free(codes);
            free(scales);
        }
}

/* ---- large outputs: streaming stores, output alignment, kept block maxima ------------------ */

/* Outputs of at least 8 MiB (64 KiB in sanitized builds, see quant_avx2.h) are
 * written with non-temporal stores, which need the output's alignment: run every
 * slot that streams on such a tensor with the output at several float offsets
 * from a 64-byte boundary (32-byte aligned, 16 mod 32 at both halves of a line,
 * and 4-byte aligned, which falls back to ordinary stores), on 1, 2 and 3 threads,
 * with canaries on both sides. The shape has rows of whole NVFP4 and MXFP4 blocks,
 * block counts that leave partial groups of eight, and (NVFP4) more than one
 * segment of the dynamic path's kept block maxima, the last one partial. */
#define STREAM_COLS 1056 /* 33 MXFP4 blocks, 66 NVFP4 blocks */
#define STREAM_ROWS (SMALL_RUN ? 63 : 1987)

typedef struct stream_case {
    const char *slot;
    const ly_tensor *in[LY_KERNEL_MAX_INPUTS];
    int64_t axis;
    int64_t bits, group, in_features; /* in_features 0: the default */
} stream_case;

static void run_streamed(const stream_case *sc, const char *fill_label)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        call.in[i] = sc->in[i];
    /* The parameters of whichever op the case is for. */
    ly_fake_quant_int8_per_channel_params axis = {.axis = sc->axis};
    ly_fake_quant_int_grouped_params grouped = {.bits = sc->bits, .group_size = sc->group};
    ly_unpack_int_grouped_params unpack = {.bits = sc->bits,
                                           .group_size = sc->group,
                                           .in_features = sc->in_features ? sc->in_features : -1};
    ly_unpack_nvfp4_params unpack4 = {.in_features = sc->in_features ? sc->in_features : -1};
    ly_op op = LY_OP_COUNT;
    ly_op_from_name(sc->slot, &op);
    if (op == LY_OP_FAKE_QUANT_INT8_PER_CHANNEL) call.params = &axis;
    if (op == LY_OP_FAKE_QUANT_INT_GROUPED) call.params = &grouped;
    if (op == LY_OP_UNPACK_INT_GROUPED) call.params = &unpack;
    if (op == LY_OP_UNPACK_NVFP4) call.params = &unpack4;
    ly_tensor outs[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    if (ly_kernel_infer_outputs(sc->slot, &call, outs, &n_out) != LY_OK)
        fail_msg("%s: %s", sc->slot, ly_last_error());
    int64_t n = ly_tensor_numel(&outs[0]);
    float *ref = alloc_floats(n);
    ly_tensor ref_t = make_tensor(ref, LY_F32, outs[0].ndim, outs[0].shape);
    call.out[0] = &ref_t;
    call.threads = 1;
    if (ly_kernel_run_impl(sc->slot, "reference", &call) != LY_OK)
        fail_msg("%s: reference: %s", sc->slot, ly_last_error());

    bool exact = strstr(sc->slot, "_backward") == NULL;
    const int64_t pad = 16;
    float *buf = aligned_alloc(64, (size_t)(n + 2 * pad) * sizeof(float));
    assert_non_null(buf);
    static const int64_t offsets[] = {0, 4, 12, 1};
    static const int thread_counts[] = {1, 2, 3};
    for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++)
        for (size_t ti = 0; ti < 3; ti++) {
            for (int64_t i = 0; i < n + 2 * pad; i++)
                buf[i] = from_bits(0x7FBADBADu);
            float *got = buf + pad + offsets[oi];
            ly_tensor got_t = make_tensor(got, LY_F32, outs[0].ndim, outs[0].shape);
            call.out[0] = &got_t;
            call.threads = thread_counts[ti];
            if (ly_kernel_run_impl(sc->slot, "avx2", &call) != LY_OK)
                fail_msg("%s: avx2: %s", sc->slot, ly_last_error());
            case_info info = {.slot = sc->slot};
            snprintf(info.name, sizeof info.name, "%s, output offset %lld floats", fill_label,
                     (long long)offsets[oi]);
            compare(&info, thread_counts[ti], exact, ref, got, n);
            for (int64_t i = 0; i < pad + offsets[oi]; i++)
                assert_int_equal(bits_of(buf[i]), 0x7FBADBADu);
            for (int64_t i = pad + offsets[oi] + n; i < n + 2 * pad; i++)
                assert_int_equal(bits_of(buf[i]), 0x7FBADBADu);
        }
    free(buf);
    free(ref);
}

static void test_streamed_outputs(void **state)
{
    (void)state;
    SKIP_WITHOUT_AVX2();
    rng_state = 11;
    const int64_t rows = STREAM_ROWS, cols = STREAM_COLS, n = rows * cols;
    int64_t mat[2] = {rows, cols}, one = 1;
    float *x = alloc_floats(n), *grad = alloc_floats(n), *row_scale = alloc_floats(rows);
    ly_tensor x_t = make_tensor(x, LY_F32, 2, mat), grad_t = make_tensor(grad, LY_F32, 2, mat);
    ly_tensor row_scale_t = make_tensor(row_scale, LY_F32, 1, &rows);
    float amax = 4.0f, lo = -3.0f, hi = 3.0f;
    ly_tensor amax_t = make_tensor(&amax, LY_F32, 1, &one);
    ly_tensor lo_t = make_tensor(&lo, LY_F32, 1, &one), hi_t = make_tensor(&hi, LY_F32, 1, &one);

    /* Packed operands of the unpack slots: int4 in groups of 128, of which
     * in_features uses a part of the last, and NVFP4 with E4M3 block scales. */
    int64_t group_dims[2] = {rows, (cols + 127) / 128};
    int64_t packed_dims[2] = {rows, group_dims[1] * 64}, nv_dims[2] = {rows, cols / 2};
    int64_t block_dims[2] = {rows, cols / 16};
    uint8_t *payload = malloc((size_t)(packed_dims[0] * packed_dims[1]));
    uint8_t *codes = malloc((size_t)(rows * cols / 16));
    float *group_scale = alloc_floats(group_dims[0] * group_dims[1]);
    assert_non_null(payload);
    assert_non_null(codes);
    for (int64_t i = 0; i < packed_dims[0] * packed_dims[1]; i++)
        payload[i] = (uint8_t)rng_next();
    for (int64_t i = 0; i < rows * cols / 16; i++)
        codes[i] = (uint8_t)(0x30 + rng_next() % 0x20);
    for (int64_t i = 0; i < group_dims[0] * group_dims[1]; i++)
        group_scale[i] = rng_uniform();
    ly_tensor payload_t = make_tensor(payload, LY_U8, 2, packed_dims);
    ly_tensor nv_payload_t = make_tensor(payload, LY_U8, 2, nv_dims);
    ly_tensor codes_t = make_tensor(codes, LY_F8E4M3, 2, block_dims);
    ly_tensor group_scale_t = make_tensor(group_scale, LY_F32, 2, group_dims);

    const stream_case cases[] = {
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), {&x_t, NULL}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), {&x_t, &row_scale_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL), {&x_t, NULL}, 1, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_PER_CHANNEL_BACKWARD), {&grad_t, &x_t, NULL}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), {&x_t, &lo_t, &hi_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE_BACKWARD),
         {&grad_t, &x_t, &lo_t, &hi_t},
         0,
         0,
         0,
         0},
        {ly_op_name(LY_OP_FAKE_QUANT_FP8), {&x_t, &row_scale_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_FP8_BACKWARD), {&grad_t, &x_t, &row_scale_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT), {&x_t, &amax_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_NVFP4_WEIGHT_BACKWARD), {&grad_t, &x_t, &amax_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), {&x_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC_BACKWARD), {&grad_t, &x_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT), {&x_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_FAKE_QUANT_MXFP4_WEIGHT_BACKWARD), {&grad_t, &x_t}, 0, 0, 0, 0},
        {ly_op_name(LY_OP_UNPACK_INT_GROUPED), {&payload_t, &group_scale_t}, 0, 4, 128, cols},
        {ly_op_name(LY_OP_UNPACK_NVFP4), {&nv_payload_t, &codes_t, &amax_t}, 0, 0, 0, 0},
    };
    /* normal values (the fast paths), then edge values (NaN blocks take the
     * general path in the middle of a streamed range). */
    for (int fk = 0; fk < 2; fk++) {
        fill(x, n, fk ? FILL_EDGE : FILL_NORMAL);
        fill(grad, n, FILL_NORMAL);
        for (int64_t r = 0; r < rows; r++)
            row_scale[r] = 0.01f + rng_uniform();
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            bool unpack = strncmp(cases[ci].slot, "unpack", 6) == 0;
            if (fk && unpack) continue; /* their inputs do not depend on the fill */
            run_streamed(&cases[ci], fk ? "edge" : "normal");
        }
    }

    /* In place: the dynamic NVFP4 path keeps its block maxima in the output, which
     * must not be the input. */
    float *in_place = alloc_floats(n), *ref = alloc_floats(n);
    fill(x, n, FILL_NORMAL);
    memcpy(in_place, x, (size_t)n * sizeof(float));
    ly_tensor in_place_t = make_tensor(in_place, LY_F32, 2, mat),
              ref_t = make_tensor(ref, LY_F32, 2, mat);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &x_t;
    call.out[0] = &ref_t;
    assert_int_equal(
        ly_kernel_run_impl(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), "reference", &call), LY_OK);
    call.in[0] = &in_place_t;
    call.out[0] = &in_place_t;
    call.threads = 2;
    assert_int_equal(ly_kernel_run_impl(ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), "avx2", &call),
                     LY_OK);
    case_info info = {.slot = ly_op_name(LY_OP_FAKE_QUANT_NVFP4_DYNAMIC), .name = "in place"};
    compare(&info, 2, true, ref, in_place, n);

    free(in_place);
    free(ref);
    free(payload);
    free(codes);
    free(group_scale);
    free(x);
    free(grad);
    free(row_scale);
}

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
    } shapes[] = {{48, 3, 21}, {40, 2, 17}, {16, 4, 9}, {5, 3, 19}, {64, 40, 33} /* threaded */};
    static const struct {
        float scale;
        int32_t zero_point;
    } qparams[] = {{0.05f, -3}, {0.05f, -128}, {1.0f / 255.0f, 127}, {0.3f, 0}};
    int checked = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t c = shapes[si].c, h = shapes[si].h, w = shapes[si].w, n = c * h * w;
        int64_t dims[4] = {1, c, h, w};
        float *x = alloc_floats(n), *blocked = alloc_floats(n + 16 * h * w);
        uint8_t *got = malloc((size_t)n), *want = malloc((size_t)n);
        assert_non_null(got);
        assert_non_null(want);
        for (size_t qi = 0; qi < sizeof qparams / sizeof qparams[0]; qi++) {
            float scale = qparams[qi].scale, inv = 1.0f / scale;
            float zp = (float)qparams[qi].zero_point;
            fill(x, n, FILL_EDGE);
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
        cmocka_unit_test(test_int8_per_channel),
        cmocka_unit_test(test_int8_affine),
        cmocka_unit_test(test_fp8),
        cmocka_unit_test(test_int_grouped),
        cmocka_unit_test(test_nvfp4_weight),
        cmocka_unit_test(test_nvfp4_dynamic),
        cmocka_unit_test(test_mxfp4),
        cmocka_unit_test(test_unpack_int_grouped),
        cmocka_unit_test(test_unpack_nvfp4),
        cmocka_unit_test(test_streamed_outputs),
        cmocka_unit_test(test_quantize_u8_nhwc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
