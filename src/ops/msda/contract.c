/* SPDX-License-Identifier: MIT */
/*
 * The contracts of the ms_deform_attn slots (include/libreyolo/msda.h): operand
 * validation with output shapes, and the typed wrappers.
 */
#include "core/core.h"
#include "ops/msda/msda_internal.h"

#include <inttypes.h>
#include <stdio.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

/* Level sizes are exact in fp32 (coordinates are computed in float) and the
 * element offsets of any level fit in int64 with room to spare. */
#define MAX_LEVEL_SIZE ((int64_t)1 << 24)
#define MAX_POINTS ((int64_t)1 << 20)

/* "[1, ?, 8, 3, ?, 2]": the expected extents, "?" where any is fine. */
static void expected_text(int ndim, const int64_t *want, char *buf, size_t size)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < size; i++) {
        if (want[i] < 0)
            len += (size_t)snprintf(buf + len, size - len, "%s?", i ? ", " : "");
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, i ? ", " : "", want[i]);
    }
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* dtype, then rank and extents (want[i] < 0: any). `layout` names the dims,
 * `origin` says where the fixed ones come from. */
static ly_status check_operand(const char *slot, const ly_tensor *t, const char *name,
                               ly_dtype dtype, int ndim, const int64_t *want, const char *layout,
                               const char *origin)
{
    TRY(ly_check_operand(t, slot, name, dtype));
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = want[i] < 0 || t->shape[i] == want[i];
    if (ok) return LY_OK;
    char what[96];
    snprintf(what, sizeof what, "%s: %s", slot, name);
    char got[128], exp[128];
    expected_text(ndim, want, exp, sizeof exp);
    return ly_set_error(LY_E_SHAPE, "%s: shape %s, expected %s = %s%s%s", what,
                        ly_shape_str(t, got, sizeof got), layout, exp, origin[0] ? " " : "",
                        origin);
}

typedef struct dims {
    int64_t B, len_in, H, C, Lq, L, P, K;
    bool ragged;
} dims;

static ly_status check_mode(const char *slot, const ly_kernel_call *call)
{
    int64_t mode = LY_PARAMS(call, ly_ms_deform_attn_params)->mode;
    if (mode == LY_MSDA_BILINEAR || mode == LY_MSDA_DISCRETE) return LY_OK;
    return ly_set_error(LY_E_INVALID_ARGUMENT,
                        "%s: params.mode is %lld, expected 0 (bilinear) or 1 (discrete)", slot,
                        (long long)mode);
}

/* value, spatial_shapes, num_points, sampling_locations, attention_weights:
 * in[base..base+3] and in[np_index]. */
static ly_status check_inputs(const char *slot, const ly_kernel_call *call, int base, int np_index,
                              dims *d)
{
    TRY(check_mode(slot, call));
    const ly_tensor *value = call->in[base], *shapes = call->in[base + 1],
                    *loc = call->in[base + 2], *attn = call->in[base + 3],
                    *npoints = call->in[np_index];
    TRY(check_operand(slot, value, "value", LY_F32, 4, (const int64_t[]){-1, -1, -1, -1},
                      "[B, Len_in, H, C]", ""));
    d->B = value->shape[0];
    d->len_in = value->shape[1];
    d->H = value->shape[2];
    d->C = value->shape[3];

    TRY(ly_check_operand(shapes, slot, "spatial_shapes", LY_I64));
    char what[96];
    snprintf(what, sizeof what, "%s: spatial_shapes", slot);
    char got[128];
    if (shapes->ndim != 2 || shapes->shape[1] != 2 || shapes->shape[0] < 1 ||
        shapes->shape[0] > LY_MSDA_MAX_LEVELS)
        return ly_set_error(LY_E_SHAPE,
                            "%s: shape %s, expected [L, 2] (rows (h, w)) with 1 <= L <= %d", what,
                            ly_shape_str(shapes, got, sizeof got), LY_MSDA_MAX_LEVELS);
    d->L = shapes->shape[0];
    const int64_t *hw = shapes->data;
    int64_t total = 0;
    for (int64_t l = 0; l < d->L; l++) {
        int64_t h = hw[2 * l], w = hw[2 * l + 1];
        if (h < 1 || w < 1 || h > MAX_LEVEL_SIZE || w > MAX_LEVEL_SIZE)
            return ly_set_error(
                LY_E_SHAPE, "%s: level %lld is (h %lld, w %lld), expected each in [1, %lld]", what,
                (long long)l, (long long)h, (long long)w, (long long)MAX_LEVEL_SIZE);
        total += h * w;
    }
    if (total != d->len_in)
        return ly_set_error(LY_E_SHAPE,
                            "%s: the levels cover sum(h*w) = %lld positions, expected Len_in = "
                            "%lld (value is %s)",
                            what, (long long)total, (long long)d->len_in,
                            ly_shape_str(value, got, sizeof got));

    d->ragged = npoints != NULL;
    if (d->ragged) {
        snprintf(what, sizeof what, "%s: num_points", slot);
        TRY(ly_check_tensor(npoints, what, LY_I64));
        if (npoints->ndim != 1 || npoints->shape[0] != d->L)
            return ly_set_error(LY_E_SHAPE,
                                "%s: shape %s, expected [L] = [%lld] (one count per level of "
                                "spatial_shapes)",
                                what, ly_shape_str(npoints, got, sizeof got), (long long)d->L);
        const int64_t *np = npoints->data;
        d->K = 0;
        for (int64_t l = 0; l < d->L; l++) {
            if (np[l] < 0 || np[l] > MAX_POINTS)
                return ly_set_error(LY_E_INVALID_ARGUMENT,
                                    "%s: level %lld has %lld points, expected [0, %lld]", what,
                                    (long long)l, (long long)np[l], (long long)MAX_POINTS);
            d->K += np[l];
        }
        TRY(check_operand(slot, loc, "sampling_locations", LY_F32, 5,
                          (const int64_t[]){d->B, -1, d->H, d->K, 2}, "[B, Lq, H, sum(P), 2]",
                          "(B, H from value; sum(P) from num_points)"));
        d->Lq = loc->shape[1];
        TRY(check_operand(slot, attn, "attention_weights", LY_F32, 4,
                          (const int64_t[]){d->B, d->Lq, d->H, d->K}, "[B, Lq, H, sum(P)]",
                          "(as sampling_locations)"));
    } else {
        TRY(check_operand(slot, loc, "sampling_locations", LY_F32, 6,
                          (const int64_t[]){d->B, -1, d->H, d->L, -1, 2}, "[B, Lq, H, L, P, 2]",
                          "(B, H from value; L from spatial_shapes; ragged point counts need "
                          "num_points)"));
        d->Lq = loc->shape[1];
        d->P = loc->shape[4];
        if (d->P > MAX_POINTS)
            return ly_set_error(LY_E_SHAPE,
                                "%s: sampling_locations: P = %lld points per level, expected at "
                                "most %lld",
                                slot, (long long)d->P, (long long)MAX_POINTS);
        d->K = d->L * d->P;
        TRY(check_operand(slot, attn, "attention_weights", LY_F32, 5,
                          (const int64_t[]){d->B, d->Lq, d->H, d->L, d->P}, "[B, Lq, H, L, P]",
                          "(as sampling_locations)"));
    }
    int64_t n;
    if (__builtin_mul_overflow(d->B, d->Lq, &n) || __builtin_mul_overflow(n, d->H, &n) ||
        __builtin_mul_overflow(n, d->C, &n) || n > INT64_MAX / 8 ||
        __builtin_mul_overflow(d->H, d->C, &n) || n > INT64_MAX / 8)
        return ly_set_error(LY_E_SHAPE, "%s: the output [B, Lq, H*C] overflows the address space",
                            slot);
    return LY_OK;
}

static ly_status check_call(const char *slot, const ly_kernel_call *call,
                            ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    return LY_OK;
}

static void set_output(ly_tensor *out, const ly_tensor *like)
{
    *out = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = like->ndim};
    for (int i = 0; i < like->ndim; i++)
        out->shape[i] = like->shape[i];
}

ly_status ly_contract_ms_deform_attn(const ly_kernel_call *call,
                                     ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    const char *slot = ly_op_name(LY_OP_MS_DEFORM_ATTN);
    TRY(check_call(slot, call, out, n_out));
    if (call->in[5])
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: in[5] is set, expected NULL (num_points is in[4])", slot);
    dims d;
    TRY(check_inputs(slot, call, 0, 4, &d));
    out[0] = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = 3, .shape = {d.B, d.Lq, d.H * d.C}};
    *n_out = 1;
    return LY_OK;
}

/* input [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]. */
ly_status ly_contract_grid_sample(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                  int *n_out)
{
    const char *slot = ly_op_name(LY_OP_GRID_SAMPLE);
    TRY(check_call(slot, call, out, n_out));
    const ly_grid_sample_params *p = LY_PARAMS(call, ly_grid_sample_params);
    if (p->mode != 0 && p->mode != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.mode is %lld, expected 0 (bilinear) or 1 (nearest)", slot,
                            (long long)p->mode);
    if (p->padding_mode != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: params.padding_mode is %lld, expected 0 (zeros; border and "
                            "reflection are not supported)",
                            slot, (long long)p->padding_mode);
    if (p->align_corners != 0 && p->align_corners != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.align_corners is %lld, expected 0 or 1", slot,
                            (long long)p->align_corners);
    const ly_tensor *x = call->in[0], *grid = call->in[1];
    TRY(check_operand(slot, x, "input", LY_F32, 4, (const int64_t[]){-1, -1, -1, -1},
                      "[N, C, H, W]", ""));
    TRY(check_operand(slot, grid, "grid", LY_F32, 4, (const int64_t[]){x->shape[0], -1, -1, 2},
                      "[N, Ho, Wo, 2]", "(N as the input's)"));
    if (x->shape[2] > MAX_LEVEL_SIZE || x->shape[3] > MAX_LEVEL_SIZE)
        return ly_set_error(LY_E_SHAPE, "%s: input is %lldx%lld, at most %lld on a side", slot,
                            (long long)x->shape[2], (long long)x->shape[3],
                            (long long)MAX_LEVEL_SIZE);
    out[0] = (ly_tensor){.data = NULL,
                         .dtype = LY_F32,
                         .ndim = 4,
                         .shape = {x->shape[0], x->shape[1], grid->shape[1], grid->shape[2]}};
    *n_out = 1;
    return LY_OK;
}

ly_status ly_contract_ms_deform_attn_backward(const ly_kernel_call *call,
                                              ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    const char *slot = ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD);
    TRY(check_call(slot, call, out, n_out));
    dims d;
    TRY(check_inputs(slot, call, 1, 5, &d));
    TRY(check_operand(slot, call->in[0], "grad_output", LY_F32, 3,
                      (const int64_t[]){d.B, d.Lq, d.H * d.C}, "[B, Lq, H*C]",
                      "(the forward's output)"));
    set_output(&out[0], call->in[1]);
    set_output(&out[1], call->in[3]);
    set_output(&out[2], call->in[4]);
    *n_out = 3;
    return LY_OK;
}

void ly_msda_geom_init(const ly_kernel_call *call, bool backward, ly_msda_geom *g)
{
    int base = backward ? 1 : 0;
    const ly_tensor *value = call->in[base], *shapes = call->in[base + 1],
                    *loc = call->in[base + 2], *attn = call->in[base + 3],
                    *npoints = call->in[backward ? 5 : 4];
    memset(g, 0, sizeof *g);
    g->B = value->shape[0];
    g->len_in = value->shape[1];
    g->H = value->shape[2];
    g->C = value->shape[3];
    g->Lq = loc->shape[1];
    g->L = shapes->shape[0];
    g->mode = (int)LY_PARAMS(call, ly_ms_deform_attn_params)->mode;
    const int64_t *hw = shapes->data;
    const int64_t *np = npoints ? npoints->data : NULL;
    int64_t start = 0;
    g->K = 0;
    for (int64_t l = 0; l < g->L; l++) {
        g->lvl_h[l] = hw[2 * l];
        g->lvl_w[l] = hw[2 * l + 1];
        g->lvl_start[l] = start;
        start += g->lvl_h[l] * g->lvl_w[l];
        g->lvl_points[l] = np ? np[l] : loc->shape[4];
        g->K += g->lvl_points[l];
        g->size_w[l] = (float)g->lvl_w[l];
        g->size_h[l] = (float)g->lvl_h[l];
        g->half_w[l] = 0.5f * g->size_w[l];
        g->half_h[l] = 0.5f * g->size_h[l];
        g->max_col[l] = (float)(g->lvl_w[l] - 1);
        g->max_row[l] = (float)(g->lvl_h[l] - 1);
    }
    g->value = value->data;
    g->loc = loc->data;
    g->attn = attn->data;
    g->grad_out = backward ? call->in[0]->data : NULL;
}

/* ---- Typed wrappers --------------------------------------------------------------- */

ly_status ly_ms_deform_attn(const ly_tensor *value, const ly_tensor *spatial_shapes,
                            const ly_tensor *sampling_locations, const ly_tensor *attention_weights,
                            const ly_tensor *num_points, int mode, int threads, ly_tensor *out)
{
    ly_kernel_call call;
    TRY(ly_kernel_call_init(&call));
    call.in[0] = value;
    call.in[1] = spatial_shapes;
    call.in[2] = sampling_locations;
    call.in[3] = attention_weights;
    call.in[4] = num_points;
    call.out[0] = out;
    ly_ms_deform_attn_params p = {.mode = mode};
    call.params = &p;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_MS_DEFORM_ATTN, &call);
}

ly_status ly_ms_deform_attn_backward(const ly_tensor *grad_output, const ly_tensor *value,
                                     const ly_tensor *spatial_shapes,
                                     const ly_tensor *sampling_locations,
                                     const ly_tensor *attention_weights,
                                     const ly_tensor *num_points, int mode, int threads,
                                     ly_tensor *grad_value, ly_tensor *grad_locations,
                                     ly_tensor *grad_attention_weights)
{
    ly_kernel_call call;
    TRY(ly_kernel_call_init(&call));
    call.in[0] = grad_output;
    call.in[1] = value;
    call.in[2] = spatial_shapes;
    call.in[3] = sampling_locations;
    call.in[4] = attention_weights;
    call.in[5] = num_points;
    call.out[0] = grad_value;
    call.out[1] = grad_locations;
    call.out[2] = grad_attention_weights;
    ly_ms_deform_attn_params p = {.mode = mode};
    call.params = &p;
    call.threads = threads;
    return ly_kernel_dispatch_op(LY_OP_MS_DEFORM_ATTN_BACKWARD, &call);
}

LY_PARAMS_FIELDS(ly_ms_deform_attn_params, LY_FIELD_INT(ly_ms_deform_attn_params, mode, 1))
LY_PARAMS_FIELDS(ly_grid_sample_params, LY_FIELD_INT(ly_grid_sample_params, mode, 1),
                 LY_FIELD_INT(ly_grid_sample_params, padding_mode, 1),
                 LY_FIELD_INT(ly_grid_sample_params, align_corners, 1))
