/* SPDX-License-Identifier: MIT */
/*
 * The portable reference of the quantization slots. These loops define the numbers
 * (see docs/numerics.md): they are deliberately plain, single-threaded and follow
 * PyTorch's operation order one operation at a time.
 */
#include "ops/quant/reference.h"

#include "core/core.h"
#include "ops/quant/numerics.h"

#include <stdlib.h>
#include <string.h>

/* ---- Shared pieces ------------------------------------------------------------- */

ly_axis_view ly_quant_axis_view(const ly_tensor *t, int64_t axis)
{
    ly_axis_view v = {1, 1, 1};
    for (int i = 0; i < t->ndim; i++) {
        if (i < axis)
            v.outer *= t->shape[i];
        else if (i == axis)
            v.channels = t->shape[i];
        else
            v.inner *= t->shape[i];
    }
    return v;
}

float ly_quant_amax(const float *x, int64_t n)
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++)
        m = ly_nm_amax_step(m, x[i]);
    return m;
}

void ly_quant_channel_scale(const float *x, ly_axis_view view, float divisor, float *scale)
{
    for (int64_t c = 0; c < view.channels; c++) {
        float m = 0.0f;
        for (int64_t o = 0; o < view.outer; o++)
            for (int64_t i = 0; i < view.inner; i++)
                m = ly_nm_amax_step(m, x[(o * view.channels + c) * view.inner + i]);
        scale[c] = ly_nm_clamp_min(m / divisor, LY_QUANT_EPS);
    }
}

void ly_quant_group_scale(const float *w, int64_t rows, int64_t cols, int64_t group_size,
                          int64_t bits, float *scale)
{
    int64_t groups = cols / group_size + (cols % group_size != 0);
    float qmax = (float)((1 << (bits - 1)) - 1);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t gi = 0; gi < groups; gi++) {
            /* The zero padding of the last group never raises an amax. */
            int64_t begin = gi * group_size;
            int64_t end = cols - begin > group_size ? begin + group_size : cols;
            float m = ly_quant_amax(w + r * cols + begin, end - begin);
            scale[r * groups + gi] = ly_nm_clamp_min(m / qmax, LY_QUANT_EPS);
        }
}

void ly_quant_int8_act_qparams(float lo, float hi, float *scale, int32_t *zero_point)
{
    float lo0 = ly_nm_clamp_max(lo, 0.0f);
    float hi0 = ly_nm_clamp_min(hi, 0.0f);
    float s = ly_nm_clamp_min((hi0 - lo0) / 255.0f, LY_QUANT_EPS);
    float zp = ly_nm_clamp(nearbyintf(-128.0f - lo0 / s), -128.0f, 127.0f);
    *scale = s;
    *zero_point = ly_nm_f32_to_i32(zp);
}

static const float *f32_in(const ly_kernel_call *call, int i)
{
    return (const float *)call->in[i]->data;
}

static float *f32_out(const ly_kernel_call *call)
{
    return (float *)call->out[0]->data;
}

static int64_t normalized_axis(const ly_tensor *t, int64_t axis)
{
    return axis < 0 ? axis + t->ndim : axis;
}

/* ---- fake_quant_int8_per_channel ------------------------------------------------------ */

/* The channel scales: the caller's (used as given) or int8_weight_qparams. *owned
 * is set when the returned buffer must be freed. */
static ly_status int8_channel_scales(const ly_tensor *w, const ly_tensor *given, ly_axis_view view,
                                     const float **scale, float **owned)
{
    *owned = NULL;
    if (given) {
        *scale = (const float *)given->data;
        return LY_OK;
    }
    float *s = malloc((size_t)view.channels * sizeof *s);
    if (!s) return ly_set_error(LY_E_NO_MEMORY, "fake_quant_int8_per_channel: out of memory");
    ly_quant_channel_scale((const float *)w->data, view, 127.0f, s);
    *scale = s;
    *owned = s;
    return LY_OK;
}

/* Forward (grad == NULL) or backward of torch.fake_quantize_per_channel_affine with
 * zero-point 0 and range [-128, 127]: inv = 1.0f / s, code = int64(nearbyint(x*inv)),
 * then clamp; out = code * s (exact in double, so equal to torch's double expression). */
static ly_status int8_per_channel(const ly_tensor *w, const ly_tensor *given_scale, int64_t axis,
                                  const float *grad, float *out)
{
    int64_t n = ly_tensor_numel(w);
    if (n == 0) return LY_OK;
    ly_axis_view view = ly_quant_axis_view(w, normalized_axis(w, axis));
    const float *scale = NULL;
    float *owned = NULL;
    ly_status st = int8_channel_scales(w, given_scale, view, &scale, &owned);
    if (st != LY_OK) return st;
    const float *x = (const float *)w->data;
    for (int64_t o = 0; o < view.outer; o++)
        for (int64_t c = 0; c < view.channels; c++) {
            float s = scale[c];
            float inv = 1.0f / s;
            for (int64_t i = 0; i < view.inner; i++) {
                int64_t at = (o * view.channels + c) * view.inner + i;
                int64_t code = ly_nm_int8_code(x[at], inv, 0.0f);
                if (grad) /* torch multiplies by the mask, so a NaN gradient stays NaN. */
                    out[at] = grad[at] * (ly_nm_int8_in_range(code) ? 1.0f : 0.0f);
                else
                    out[at] = (float)ly_nm_clamp_i64(code, -128, 127) * s;
            }
        }
    free(owned);
    return LY_OK;
}

ly_status ly_ref_fake_quant_int8_per_channel(const ly_kernel_call *call)
{
    return int8_per_channel(call->in[0], call->in[1],
                            LY_PARAMS(call, ly_fake_quant_int8_per_channel_params)->axis, NULL,
                            f32_out(call));
}

ly_status ly_ref_fake_quant_int8_per_channel_backward(const ly_kernel_call *call)
{
    return int8_per_channel(call->in[1], call->in[2],
                            LY_PARAMS(call, ly_fake_quant_int8_per_channel_params)->axis,
                            f32_in(call, 0), f32_out(call));
}

/* ---- fake_quant_int8_affine ----------------------------------------------------------- */

/* torch.fake_quantize_per_tensor_affine(x, scale, zp, -128, 127) with the qparams of
 * int8_act_qparams(lo, hi): code = int64(zp + nearbyint(x * (1/scale))) (an fp32
 * add), clamped; out = (code - zp) * scale evaluated in double as torch does (it
 * equals the fp32 product whenever zp is in [-128, 127]). */
static void int8_affine(const ly_tensor *x_t, float lo, float hi, const float *grad, float *out)
{
    float scale;
    int32_t zp;
    ly_quant_int8_act_qparams(lo, hi, &scale, &zp);
    float inv = 1.0f / scale;
    float zp_f = (float)zp;
    const float *x = (const float *)x_t->data;
    int64_t n = ly_tensor_numel(x_t);
    for (int64_t i = 0; i < n; i++) {
        int64_t code = ly_nm_int8_code(x[i], inv, zp_f);
        if (grad)
            out[i] = grad[i] * (ly_nm_int8_in_range(code) ? 1.0f : 0.0f);
        else
            out[i] =
                (float)(((double)ly_nm_clamp_i64(code, -128, 127) - (double)zp) * (double)scale);
    }
}

ly_status ly_ref_fake_quant_int8_affine(const ly_kernel_call *call)
{
    int8_affine(call->in[0], f32_in(call, 1)[0], f32_in(call, 2)[0], NULL, f32_out(call));
    return LY_OK;
}

ly_status ly_ref_fake_quant_int8_affine_backward(const ly_kernel_call *call)
{
    int8_affine(call->in[1], f32_in(call, 2)[0], f32_in(call, 3)[0], f32_in(call, 0),
                f32_out(call));
    return LY_OK;
}

/* ---- fake_quant_fp8 ------------------------------------------------------------------ */

/* s = clamp(scale, min=1e-12); y = clamp(x / s, +-448) (IEEE division); q = e4m3(y) * s;
 * out = x + (q - x). The scale has one element or one per index of dim 0. */
ly_status ly_ref_fake_quant_fp8(const ly_kernel_call *call)
{
    const ly_tensor *x_t = call->in[0];
    int64_t n = ly_tensor_numel(x_t);
    if (n == 0) return LY_OK;
    const float *x = f32_in(call, 0);
    const float *scale = f32_in(call, 1);
    float *out = f32_out(call);
    int64_t rows = x_t->shape[0], inner = n / rows;
    bool per_row = ly_tensor_numel(call->in[1]) != 1;
    for (int64_t r = 0; r < rows; r++) {
        float s = ly_nm_clamp_min(scale[per_row ? r : 0], LY_QUANT_EPS);
        for (int64_t i = r * inner; i < (r + 1) * inner; i++) {
            float y = ly_nm_clamp(x[i] / s, -LY_E4M3_MAX, LY_E4M3_MAX);
            float q = ly_nm_mul_nan_first(ly_nm_e4m3_to_fp32(ly_nm_fp32_to_e4m3(y)), s);
            out[i] = ly_nm_ste(x[i], q);
        }
    }
    return LY_OK;
}

/* The STE's gradient with respect to x is exactly the incoming gradient. */
static ly_status identity_backward(const ly_kernel_call *call)
{
    int64_t n = ly_tensor_numel(call->in[0]);
    if (n > 0) memmove(f32_out(call), f32_in(call, 0), (size_t)n * sizeof(float));
    return LY_OK;
}

ly_status ly_ref_fake_quant_fp8_backward(const ly_kernel_call *call)
{
    return identity_backward(call);
}

/* ---- fake_quant_int_grouped -------------------------------------------------------------- */

/* Groups of g along the row (zero padded); s = clamp(scale, min=1e-12);
 * q = clamp(rint(w / s), qmin, qmax) * s (IEEE division); out = w + (q - w). */
ly_status ly_ref_fake_quant_int_grouped(const ly_kernel_call *call)
{
    const ly_tensor *w_t = call->in[0];
    int64_t rows = w_t->shape[0], cols = w_t->shape[1];
    if (rows == 0 || cols == 0) return LY_OK;
    const ly_fake_quant_int_grouped_params *p = call->params;
    int64_t bits = p->bits, g = p->group_size;
    int64_t groups = cols / g + (cols % g != 0);
    const float *w = f32_in(call, 0);
    float *out = f32_out(call);
    const float *scale = call->in[1] ? f32_in(call, 1) : NULL;
    float *owned = NULL;
    if (!scale) {
        owned = malloc((size_t)(rows * groups) * sizeof *owned);
        if (!owned) return ly_set_error(LY_E_NO_MEMORY, "fake_quant_int_grouped: out of memory");
        ly_quant_group_scale(w, rows, cols, g, bits, owned);
        scale = owned;
    }
    float qmax = (float)((1 << (bits - 1)) - 1), qmin = (float)(-(1 << (bits - 1)));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float s = ly_nm_clamp_min(scale[r * groups + c / g], LY_QUANT_EPS);
            float v = w[r * cols + c];
            float q = ly_nm_mul_nan_first(s, ly_nm_clamp(nearbyintf(v / s), qmin, qmax));
            out[r * cols + c] = ly_nm_ste(v, q);
        }
    free(owned);
    return LY_OK;
}

ly_status ly_ref_fake_quant_int_grouped_backward(const ly_kernel_call *call)
{
    return identity_backward(call);
}

/* ---- NVFP4 / MXFP4: blockwise E2M1 along the last dim ------------------------------------ */

typedef struct fp4_format {
    int64_t block;
    bool mx;            /* MXFP4: eff = 2^e; NVFP4: eff from E4M3 block scale and ts' */
    float tensor_scale; /* NVFP4 ts' = max(tensor_amax / 2688, 1e-12) */
} fp4_format;

static float fp4_eff(const fp4_format *f, float block_amax)
{
    if (f->mx) return ly_nm_mxfp4_eff(block_amax);
    return ly_nm_nvfp4_eff(ly_nm_nvfp4_block_scale(block_amax, f->tensor_scale), f->tensor_scale);
}

/* out = fake_quant_e2m1(v / eff) * eff per block (IEEE division, one fp32 multiply);
 * backward: (grad * eff) / eff, as autograd computes it through that expression.
 * Padding is zeros, which never changes a block's amax and is never written. */
static void fp4_blockwise(const ly_tensor *x_t, const fp4_format *f, const float *grad, float *out)
{
    int64_t n = ly_tensor_numel(x_t);
    if (n == 0) return;
    int64_t cols = x_t->shape[x_t->ndim - 1], rows = n / cols;
    const float *x = (const float *)x_t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t begin = 0; begin < cols; begin += f->block) {
            int64_t end = begin + f->block < cols ? begin + f->block : cols;
            const float *v = x + r * cols;
            float eff = fp4_eff(f, ly_quant_amax(v + begin, end - begin));
            for (int64_t c = begin; c < end; c++) {
                int64_t at = r * cols + c;
                if (grad)
                    out[at] = (grad[at] * eff) / eff;
                else
                    out[at] = ly_nm_mul_nan_first(ly_nm_fake_quant_e2m1(v[c] / eff), eff);
            }
        }
}

static fp4_format nvfp4_format(float tensor_amax)
{
    return (fp4_format){LY_NVFP4_BLOCK, false, ly_nm_nvfp4_tensor_scale(tensor_amax)};
}

static const fp4_format mxfp4_format = {LY_MXFP4_BLOCK, true, 0.0f};

ly_status ly_ref_fake_quant_nvfp4_weight(const ly_kernel_call *call)
{
    fp4_format f = nvfp4_format(f32_in(call, 1)[0]);
    fp4_blockwise(call->in[0], &f, NULL, f32_out(call));
    return LY_OK;
}

ly_status ly_ref_fake_quant_nvfp4_weight_backward(const ly_kernel_call *call)
{
    fp4_format f = nvfp4_format(f32_in(call, 2)[0]);
    fp4_blockwise(call->in[1], &f, f32_in(call, 0), f32_out(call));
    return LY_OK;
}

/* The dynamic variant takes tensor_amax = max|x| over the whole tensor, so one NaN
 * anywhere makes every output NaN. */
static fp4_format nvfp4_dynamic_format(const ly_tensor *x)
{
    return nvfp4_format(ly_quant_amax((const float *)x->data, ly_tensor_numel(x)));
}

ly_status ly_ref_fake_quant_nvfp4_dynamic(const ly_kernel_call *call)
{
    fp4_format f = nvfp4_dynamic_format(call->in[0]);
    fp4_blockwise(call->in[0], &f, NULL, f32_out(call));
    return LY_OK;
}

ly_status ly_ref_fake_quant_nvfp4_dynamic_backward(const ly_kernel_call *call)
{
    fp4_format f = nvfp4_dynamic_format(call->in[1]);
    fp4_blockwise(call->in[1], &f, f32_in(call, 0), f32_out(call));
    return LY_OK;
}

ly_status ly_ref_fake_quant_mxfp4_weight(const ly_kernel_call *call)
{
    fp4_blockwise(call->in[0], &mxfp4_format, NULL, f32_out(call));
    return LY_OK;
}

ly_status ly_ref_fake_quant_mxfp4_weight_backward(const ly_kernel_call *call)
{
    fp4_blockwise(call->in[1], &mxfp4_format, f32_in(call, 0), f32_out(call));
    return LY_OK;
}

/* The weight and dynamic MXFP4 ops are the same math (no tensor-level scale). */
ly_status ly_ref_fake_quant_mxfp4_dynamic(const ly_kernel_call *call)
{
    return ly_ref_fake_quant_mxfp4_weight(call);
}

ly_status ly_ref_fake_quant_mxfp4_dynamic_backward(const ly_kernel_call *call)
{
    return ly_ref_fake_quant_mxfp4_weight_backward(call);
}

/* ---- Unpack ------------------------------------------------------------------------------ */

/* out[r, c] = (code + qmin) * clamp(scale[r, c / g], min=1e-12) for c < in_features;
 * codes are packed low bits first (the even column in the low nibble). */
ly_status ly_ref_unpack_int_grouped(const ly_kernel_call *call)
{
    const ly_tensor *payload_t = call->in[0], *scale_t = call->in[1];
    const uint8_t *payload = (const uint8_t *)payload_t->data;
    const float *scale = f32_in(call, 1);
    float *out = f32_out(call);
    int64_t rows = payload_t->shape[0], width = payload_t->shape[1];
    int64_t groups = scale_t->shape[1];
    const ly_unpack_int_grouped_params *p = call->params;
    int64_t bits = p->bits, g = p->group_size;
    int64_t cols = call->out[0]->shape[1];
    int64_t per_byte = 8 / bits;
    unsigned mask = (1u << bits) - 1u;
    int qmin = -(1 << (bits - 1));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint8_t byte = payload[r * width + c / per_byte];
            int code = (int)((byte >> ((c % per_byte) * bits)) & mask);
            float s = ly_nm_clamp_min(scale[r * groups + c / g], LY_QUANT_EPS);
            out[r * cols + c] = (float)(code + qmin) * s;
        }
    return LY_OK;
}

/* out[r, c] = e2m1(code) * eff, eff = max(bs * max(amax / 2688, 1e-12), 1e-12), with bs
 * the block scale (an E4M3 code decoded exactly, or fp32 used as is). */
ly_status ly_ref_unpack_nvfp4(const ly_kernel_call *call)
{
    const ly_tensor *payload_t = call->in[0], *bs_t = call->in[1];
    const uint8_t *payload = (const uint8_t *)payload_t->data;
    float *out = f32_out(call);
    int64_t rows = payload_t->shape[0], width = payload_t->shape[1];
    int64_t blocks = bs_t->shape[1];
    int64_t cols = call->out[0]->shape[1];
    float ts = ly_nm_nvfp4_tensor_scale(f32_in(call, 2)[0]);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t b = r * blocks + c / LY_NVFP4_BLOCK;
            float bs = bs_t->dtype == LY_F32 ? ((const float *)bs_t->data)[b]
                                             : ly_nm_e4m3_to_fp32(((const uint8_t *)bs_t->data)[b]);
            uint8_t byte = payload[r * width + c / 2];
            uint8_t code = (uint8_t)((c % 2) ? byte >> 4 : byte & 0xFu);
            out[r * cols + c] = ly_nm_e2m1_decode(code) * ly_nm_nvfp4_eff(bs, ts);
        }
    return LY_OK;
}
