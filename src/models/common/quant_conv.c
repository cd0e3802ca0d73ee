/* SPDX-License-Identifier: MIT */
/* LibreYOLO's quantized nn.Conv2d modules in a checkpoint (quant_conv.h). */
#include "models/common/quant_conv.h"

#include "core/core.h"
#include "libreyolo/nn.h"
#include "libreyolo/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ly_qinput_same(const ly_qinput *a, const ly_qinput *c)
{
    return a->on == c->on && (!a->on || (memcmp(&a->lo, &c->lo, sizeof a->lo) == 0 &&
                                         memcmp(&a->hi, &c->hi, sizeof a->hi) == 0));
}

/* Selection by substring of the qualified module name; "dfl" always stays float. */
static bool kept_float(const ly_conv_quant *q, const char *module)
{
    if (strstr(module, "dfl")) return true;
    for (const char *s = q->keep ? q->keep : ""; *s;) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        char sub[LY_KEY_MAX];
        if (n > 0 && n < sizeof sub) {
            memcpy(sub, s, n);
            sub[n] = '\0';
            if (strstr(module, sub)) return true;
        }
        if (!end) break;
        s = end + 1;
    }
    return false;
}

bool ly_quant_selects(const ly_conv_quant *q, const char *module)
{
    return q && q->recipe != LY_QUANT_FLOAT && !kept_float(q, module);
}

void ly_quant_scratch_free(ly_quant_scratch *s)
{
    free(s->weight);
    free(s->scale);
    free(s->codes);
    *s = (ly_quant_scratch){0};
}

static bool grow(ly_quant_scratch *s, size_t n, size_t channels)
{
    if (n > s->weight_cap) {
        float *w = realloc(s->weight, n * sizeof *w);
        uint8_t *c = w ? realloc(s->codes, n) : NULL;
        if (w) s->weight = w;
        if (c) s->codes = c;
        if (!w || !c) return false;
        s->weight_cap = n;
    }
    if (channels > s->scale_cap) {
        float *p = realloc(s->scale, channels * sizeof *p);
        if (!p) return false;
        s->scale = p;
        s->scale_cap = channels;
    }
    return true;
}

/* The codes of a finalized module unpacked with its stored scales. */
static ly_status unpack_finalized(ly_builder *b, ly_quant_scratch *s, const ly_conv_quant *q,
                                  const char *module, const char *key, const ly_tensor *w,
                                  const float *scale, ly_tensor *sc, ly_tensor *out, bool *refused)
{
    bool int8 = q->recipe == LY_QUANT_INT8;
    int64_t c2 = w->shape[0], n = ly_tensor_numel(w);
    const char *dtype = ly_audit_stored_dtype(key);
    const char *want = int8 ? "int8" : "float8_e4m3fn";
    *refused = true;
    if (dtype && strcmp(dtype, want) != 0) {
        ly_build_problem(b, LY_PROBLEM_TYPE, "key '%s' is stored as %s, expected %s (recipe %s)",
                         key, dtype, want, int8 ? "int8" : "fp8");
        return LY_OK;
    }
    bool any = false;
    for (int64_t o = 0; o < c2; o++)
        any = any || scale[o] != 0.0f;
    if (!any) {
        ly_build_problem(b, LY_PROBLEM_OTHER,
                         "key '%s._q_w_scale' is all zeros: a finalized checkpoint holds the "
                         "scales finalize computed",
                         module);
        return LY_OK;
    }
    memcpy(s->scale, scale, (size_t)c2 * sizeof *scale);
    ly_tensor codes = {.dtype = int8 ? LY_I8 : LY_F8E4M3, .ndim = 4, .data = s->codes};
    memcpy(codes.shape, w->shape, 4 * sizeof *w->shape);
    for (int64_t i = 0; i < n; i++) {
        if (int8) {
            int64_t v = w->dtype == LY_I64 ? ((const int64_t *)w->data)[i]
                                           : (int64_t)((const float *)w->data)[i];
            if (v < -128 || v > 127) {
                ly_build_problem(b, LY_PROBLEM_OTHER, "key '%s' holds %lld, outside int8", key,
                                 (long long)v);
                return LY_OK;
            }
            ((int8_t *)s->codes)[i] = (int8_t)v;
        } else {
            float v = w->dtype == LY_F32 ? ((const float *)w->data)[i] : NAN;
            s->codes[i] = ly_fp32_to_e4m3(v); /* exact: v was decoded from a code */
        }
    }
    *refused = false;
    return int8 ? ly_unpack_int8(&codes, sc, out) : ly_unpack_fp8(&codes, sc, out);
}

/* A prepared module's master through the per-channel fake-quant slot with
 * the absmax scale LibreYOLO recomputes on every call (_q_w_scale is zeros
 * then), and for int8 the codes behind code * scale. */
static ly_status fake_quant_prepared(ly_builder *b, ly_quant_scratch *s, const ly_conv_quant *q,
                                     const char *key, const ly_tensor *w, ly_tensor *sc,
                                     ly_tensor *out, bool *refused)
{
    bool int8 = q->recipe == LY_QUANT_INT8;
    *refused = w->dtype != LY_F32;
    if (*refused) {
        ly_build_problem(b, LY_PROBLEM_TYPE,
                         "key '%s' is %s, expected f32 (a prepared checkpoint's master)", key,
                         ly_dtype_name(w->dtype));
        return LY_OK;
    }
    ly_status st = int8 ? ly_int8_weight_qparams(w, 0, sc) : ly_fp8_weight_qparams(w, false, sc);
    if (st == LY_OK) {
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        ly_fake_quant_int8_per_channel_params axis0 = {.axis = 0};
        call.in[0] = w;
        call.in[1] = sc;
        call.out[0] = out;
        call.params = int8 ? &axis0 : NULL;
        call.threads = 1;
        st = ly_kernel_dispatch_op(int8 ? LY_OP_FAKE_QUANT_INT8_PER_CHANNEL : LY_OP_FAKE_QUANT_FP8,
                                   &call);
    }
    /* Exact: the product of an integer below 2^8 and the scale divides back to it. */
    int64_t n = ly_tensor_numel(w), per_channel = n / w->shape[0];
    for (int64_t i = 0; int8 && st == LY_OK && i < n; i++) {
        float scale_o = s->scale[i / per_channel];
        ((int8_t *)s->codes)[i] = scale_o != 0.0f ? (int8_t)lrintf(s->weight[i] / scale_o) : 0;
    }
    return st;
}

/* The weight as the forward uses it, given its _q_w_scale (NULL when that
 * key was absent or wrong: the weight's key is still taken, and counted). */
static const float *effective_weight(ly_builder *b, ly_quant_scratch *s, const ly_conv_quant *q,
                                     const char *module, const int64_t *wshape, const float *scale)
{
    char suffix[LY_KEY_MAX], key[LY_KEY_MAX], full_module[LY_KEY_MAX];
    snprintf(suffix, sizeof suffix, "%s%s", module, q->finalized ? ".weight_packed" : ".weight");
    ly_build_key(b, suffix, key);
    ly_build_key(b, module, full_module);
    size_t before = ly_audit_problems();
    ly_tensor w;
    bool taken = ly_build_take_view(b, suffix, 4, wshape, &w) && w.data;
    if (!taken || ly_audit_problems() != before || !scale) return NULL;
    int64_t c2 = wshape[0], n = ly_tensor_numel(&w);
    if (!grow(s, (size_t)n, (size_t)c2)) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "out of memory"));
        return NULL;
    }
    ly_tensor out = {.dtype = LY_F32, .ndim = 4, .data = s->weight};
    memcpy(out.shape, wshape, 4 * sizeof *wshape);
    ly_tensor sc = {.dtype = LY_F32, .ndim = 1, .shape = {c2}, .data = s->scale};
    bool refused;
    ly_status st = q->finalized
                       ? unpack_finalized(b, s, q, full_module, key, &w, scale, &sc, &out, &refused)
                       : fake_quant_prepared(b, s, q, key, &w, &sc, &out, &refused);
    if (st != LY_OK) ly_build_fail(b, st);
    return st == LY_OK && !refused ? s->weight : NULL;
}

const float *ly_quant_conv_weight(ly_builder *b, ly_quant_scratch *s, const ly_conv_quant *q,
                                  const char *module, const int64_t wshape[4], ly_qinput *in)
{
    char key[LY_KEY_MAX];
    int64_t one = 1;
    *in = (ly_qinput){0};
    size_t before = ly_audit_problems();
    snprintf(key, sizeof key, "%s._q_act_lo", module);
    const float *lo = ly_build_take(b, key, 1, &one);
    snprintf(key, sizeof key, "%s._q_act_hi", module);
    const float *hi = ly_build_take(b, key, 1, &one);
    snprintf(key, sizeof key, "%s._q_calibrated", module);
    ly_tensor calibrated;
    bool have_calibrated = ly_build_take_view(b, key, 1, &one, &calibrated) && calibrated.data;
    snprintf(key, sizeof key, "%s._q_w_scale", module);
    size_t before_scale = ly_audit_problems();
    const float *scale = ly_build_take(b, key, 1, &wshape[0]);
    bool have_scale = scale && ly_audit_problems() == before_scale;
    const float *w = effective_weight(b, s, q, module, wshape, have_scale ? scale : NULL);
    if (!lo || !hi || !have_calibrated || !w || ly_audit_problems() != before) return NULL;
    in->on = calibrated.dtype == LY_I64 ? ((const int64_t *)calibrated.data)[0] != 0
                                        : ((const float *)calibrated.data)[0] != 0.0f;
    in->lo = lo[0];
    in->hi = hi[0];
    return w;
}

ly_graph_value ly_quant_input(ly_builder *b, const ly_conv_quant *q, const char *module,
                              ly_graph_value x, const ly_qinput *in)
{
    if (!b->g || !in->on || b->st != LY_OK || x == LY_GRAPH_NONE) return x;
    char name[LY_KEY_MAX];
    snprintf(name, sizeof name, "%s.input_quant", module);
    int64_t one = 1;
    ly_graph_value args[3] = {x, LY_GRAPH_NONE, LY_GRAPH_NONE};
    void *d;
    bool int8 = q->recipe == LY_QUANT_INT8;
    int n = int8 ? 3 : 2;
    float values[2] = {in->lo, in->hi};
    if (!int8 && ly_fp8_act_qparams(in->lo, in->hi, &values[0]) != LY_OK) {
        ly_build_fail(b, LY_E_INVALID_ARGUMENT);
        return LY_GRAPH_NONE;
    }
    for (int i = 1; i < n; i++) {
        ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &one, &args[i], &d));
        if (b->st != LY_OK) return LY_GRAPH_NONE;
        *(float *)d = values[i - 1];
    }
    return ly_build_node(b, int8 ? LY_OP_FAKE_QUANT_INT8_AFFINE : LY_OP_FAKE_QUANT_FP8, name, n,
                         args, NULL);
}

bool ly_quant_int8_executes(const ly_builder *b, const ly_conv_quant *q, const ly_qinput *in)
{
    return q && q->recipe == LY_QUANT_INT8 && in->on && ly_audit_problems() == 0 && b->st == LY_OK;
}

ly_graph_value ly_quant_conv_int8(ly_builder *b, const ly_quant_scratch *s, const char *name,
                                  ly_graph_value x, const int64_t wshape[4], const double *bn_scale,
                                  const float *bias_f32, const double *bias,
                                  const ly_conv2d_params *p, ly_graph_value residual,
                                  const ly_qinput *in)
{
    if (b->st != LY_OK || !b->g) return LY_GRAPH_NONE;
    int64_t c2 = wshape[0], one = 1, n = wshape[0] * wshape[1] * wshape[2] * wshape[3];
    ly_graph_value args[7] = {x, LY_GRAPH_NONE, LY_GRAPH_NONE, residual};
    void *codes, *scale, *bias_out, *lo, *hi;
    ly_build_fail(b, ly_graph_constant(b->g, LY_I8, 4, wshape, &args[1], &codes));
    if (b->st == LY_OK)
        ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &c2, &args[2], &bias_out));
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &c2, &args[4], &scale));
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &one, &args[5], &lo));
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_constant(b->g, LY_F32, 1, &one, &args[6], &hi));
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    memcpy(codes, s->codes, (size_t)n);
    for (int64_t o = 0; o < c2; o++) {
        ((float *)scale)[o] = (float)((double)s->scale[o] * (bn_scale ? bn_scale[o] : 1.0));
        ((float *)bias_out)[o] = bias_f32 ? bias_f32[o] : (float)bias[o];
    }
    *(float *)lo = in->lo;
    *(float *)hi = in->hi;
    return ly_build_node(b, LY_OP_CONV2D_INT8, name, 7, args, p);
}
