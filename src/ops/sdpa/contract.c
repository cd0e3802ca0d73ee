/* SPDX-License-Identifier: MIT */
/*
 * The sdpa slot's contract (include/libreyolo/sdpa.h): validation, output shape,
 * the reference; the registration of the fused provider; the fused-attention
 * policy helpers.
 */
#include "core/core.h"
#include "ops/sdpa/sdpa_internal.h"

#include <stdio.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static const char *const operand_names[5] = {"q", "k", "v", "mask (in[3])", "mask2 (in[4])"};

static ly_status check_qkv(const ly_tensor *t, int index, const char *layout)
{
    const char *op = ly_op_name(LY_OP_SDPA);
    TRY(ly_check_operand(t, op, operand_names[index], LY_F32));
    char buf[128];
    if (t->ndim != 4)
        return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected 4 dims %s", op,
                            operand_names[index], ly_shape_str(t, buf, sizeof buf), layout);
    return LY_OK;
}

static ly_status check_mask(const ly_tensor *m, int index, const int64_t target[4])
{
    char what[64], buf[128];
    snprintf(what, sizeof what, "%s: %s", ly_op_name(LY_OP_SDPA), operand_names[index]);
    TRY(ly_check_tensor(m, what, m->dtype == LY_U8 ? LY_U8 : LY_F32));
    bool fits = m->ndim <= 4;
    for (int i = 0; fits && i < m->ndim; i++) {
        int64_t want = target[4 - m->ndim + i];
        fits = m->shape[i] == want || m->shape[i] == 1;
    }
    if (!fits)
        return ly_set_error(LY_E_SHAPE,
                            "%s: shape %s does not broadcast to the scores [%lld, %lld, %lld, "
                            "%lld] (at most 4 dims, right aligned, each equal or 1)",
                            what, ly_shape_str(m, buf, sizeof buf), (long long)target[0],
                            (long long)target[1], (long long)target[2], (long long)target[3]);
    return LY_OK;
}

/* Axis of the heads and of the tokens of q, k, v and out in `layout`. */
static void layout_axes(int64_t layout, int *head, int *token)
{
    *head = layout == LY_SDPA_BNHD ? 2 : 1;
    *token = layout == LY_SDPA_BNHD ? 1 : 2;
}

ly_status ly_contract_sdpa(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                           int *n_out)
{
    const char *slot = ly_op_name(LY_OP_SDPA);
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    const ly_sdpa_params *params = LY_PARAMS(call, ly_sdpa_params);
    if (params->layout != LY_SDPA_BHND && params->layout != LY_SDPA_BNHD)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.layout is %lld, expected %d (LY_SDPA_BHND) or %d "
                            "(LY_SDPA_BNHD)",
                            slot, (long long)params->layout, LY_SDPA_BHND, LY_SDPA_BNHD);
    bool bnhd = params->layout == LY_SDPA_BNHD;
    int H, N;
    layout_axes(params->layout, &H, &N);
    const ly_tensor *q = call->in[0], *k = call->in[1], *v = call->in[2];
    TRY(check_qkv(q, 0, bnhd ? "([B, Nq, H, d])" : "([B, H, Nq, d])"));
    TRY(check_qkv(k, 1, bnhd ? "([B, Nk, H, d])" : "([B, H, Nk, d])"));
    TRY(check_qkv(v, 2, bnhd ? "([B, Nk, H, dv])" : "([B, H, Nk, dv])"));
    char qs[128], ks[128], vs[128];
    if (k->shape[0] != q->shape[0] || k->shape[H] != q->shape[H] || k->shape[3] != q->shape[3])
        return ly_set_error(LY_E_SHAPE, "%s: k: shape %s, expected %s with B, H and d of q %s",
                            slot, ly_shape_str(k, ks, sizeof ks),
                            bnhd ? "[B, Nk, H, d]" : "[B, H, Nk, d]",
                            ly_shape_str(q, qs, sizeof qs));
    if (v->shape[0] != q->shape[0] || v->shape[H] != q->shape[H] || v->shape[N] != k->shape[N])
        return ly_set_error(
            LY_E_SHAPE, "%s: v: shape %s, expected %s with B, H of q %s and Nk of k %s", slot,
            ly_shape_str(v, vs, sizeof vs), bnhd ? "[B, Nk, H, dv]" : "[B, H, Nk, dv]",
            ly_shape_str(q, qs, sizeof qs), ly_shape_str(k, ks, sizeof ks));
    int64_t target[4] = {q->shape[0], q->shape[H], q->shape[N], k->shape[N]};
    for (int i = 3; i <= 4; i++)
        if (call->in[i]) TRY(check_mask(call->in[i], i, target));
    if (call->in[5])
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: in[5] must be NULL (the slot takes q, "
                            "k, v and up to two masks)",
                            slot);
    if (!isfinite(params->scale))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.scale is %g, expected a finite scale (0: 1/sqrt(d))", slot,
                            params->scale);
    out[0] = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = 4};
    out[0].shape[0] = q->shape[0];
    out[0].shape[1] = q->shape[1];
    out[0].shape[2] = q->shape[2];
    out[0].shape[3] = v->shape[3];
    int64_t numel = 1;
    for (int i = 0; i < 4; i++)
        if (__builtin_mul_overflow(numel, out[0].shape[i], &numel) || numel > INT64_MAX / 8)
            return ly_set_error(LY_E_SHAPE, "%s: the output overflows the address space", slot);
    *n_out = 1;
    return LY_OK;
}

/* ---- Unpacking a validated call ----------------------------------------------------- */

static const float empty_tensor[1];

static void mask_init(const ly_tensor *t, ly_sdpa_mask *m)
{
    memset(m, 0, sizeof *m);
    if (!t) return;
    int64_t numel = ly_tensor_numel(t);
    m->data = numel > 0 ? t->data : (const void *)empty_tensor;
    m->is_bool = t->dtype == LY_U8;
    int64_t stride = 1, strides[4] = {0, 0, 0, 0};
    for (int i = t->ndim - 1; i >= 0; i--) {
        int axis = 4 - t->ndim + i;
        strides[axis] = t->shape[i] == 1 ? 0 : stride;
        stride *= t->shape[i];
    }
    m->sb = strides[0];
    m->sh = strides[1];
    m->sq = strides[2];
    m->sk = strides[3];
}

static ly_sdpa_strides strides_of(const ly_tensor *t, int head, int token)
{
    int64_t stride[4] = {t->shape[1] * t->shape[2] * t->shape[3], t->shape[2] * t->shape[3],
                         t->shape[3], 1};
    return (ly_sdpa_strides){.batch = stride[0], .head = stride[head], .row = stride[token]};
}

void ly_sdpa_problem_init(const ly_kernel_call *call, ly_sdpa_problem *p)
{
    const ly_tensor *q = call->in[0], *k = call->in[1], *v = call->in[2];
    const ly_sdpa_params *params = LY_PARAMS(call, ly_sdpa_params);
    int H, N;
    layout_axes(params->layout, &H, &N);
    memset(p, 0, sizeof *p);
    p->B = q->shape[0];
    p->H = q->shape[H];
    p->Nq = q->shape[N];
    p->d = q->shape[3];
    p->Nk = k->shape[N];
    p->dv = v->shape[3];
    p->scale = params->scale != 0.0 ? (float)params->scale : (float)(1.0 / sqrt((double)p->d));
    /* Empty operands may carry NULL data; arithmetic on NULL is undefined even
     * with offset 0, so they point at a static element nobody reads. */
    p->q = ly_tensor_numel(q) > 0 ? q->data : empty_tensor;
    p->k = ly_tensor_numel(k) > 0 ? k->data : empty_tensor;
    p->v = ly_tensor_numel(v) > 0 ? v->data : empty_tensor;
    p->out = call->out[0]->data;
    p->qs = strides_of(q, H, N);
    p->ks = strides_of(k, H, N);
    p->vs = strides_of(v, H, N);
    p->os = strides_of(call->out[0], H, N);
    mask_init(call->in[3], &p->mask[0]);
    mask_init(call->in[4], &p->mask[1]);
    p->threads = ly_threads_resolve(call->threads);
}

float ly_sdpa_expf(float x)
{
    return ly_sdpa_expf_inline(x);
}

/* ---- Fused-attention policy ------------------------------------------------------------ */

ly_status ly_sdpa_run(const ly_attention_module *module, const ly_kernel_call *call)
{
    if (!module) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_sdpa_run: module is NULL");
    if (module->fused_attn && !ly_kernels_capturing())
        return ly_kernel_dispatch_op(LY_OP_SDPA, call);
    return ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), "reference", call);
}

ly_status ly_attention_set_fused(ly_attention_module *const *modules, size_t n, bool enabled,
                                 int *count)
{
    if (n > 0 && !modules)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_attention_set_fused: modules is NULL for %zu modules", n);
    int carried = 0;
    for (size_t i = 0; i < n; i++) {
        if (!modules[i]) continue;
        modules[i]->fused_attn = enabled;
        carried++;
    }
    if (count) *count = carried;
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_sdpa_params, LY_FIELD_DOUBLE(ly_sdpa_params, scale, 1),
                 LY_FIELD_INT(ly_sdpa_params, layout, 1))
