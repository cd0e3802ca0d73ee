/* SPDX-License-Identifier: MIT */
/*
 * upsample_nearest2d on channel-blocked maps: oneDNN's nearest resampling,
 * prepared per node. On plain maps the reference serves it (a copy is a
 * copy); what this buys is that YOLO9's neck keeps its maps blocked through
 * the upsample and the concat after it, so the convolutions on either side
 * lose their reorders (and the int8 ones their NCHW quantize and transpose).
 * oneDNN's nearest source index, round((o + 0.5) / s - 0.5) rounding halves
 * down, is o / s for an integer factor s: the values are the reference's,
 * bit for bit (`kernels check` on blocked layouts).
 */
#include "core/core.h"
#include "providers/builtin.h"
#include "providers/onednn/onednn_common.h"

#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

static const char *slot_name(void)
{
    return ly_op_name(LY_OP_UPSAMPLE_NEAREST2D);
}

/* Blocked maps only where the graph can keep one: 4-d, batch 1, whole blocks. */
static ly_status resample_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    const ly_tensor *x = call ? call->in[0] : NULL;
    if (x && !(x->ndim == 4 && x->shape[0] == 1 && x->shape[1] % 8 == 0)) {
        *why_not = "not a batch-1 map of whole 8-channel blocks (plain maps: the reference)";
        return LY_E_DECLINED;
    }
    return ly_onednn_predicate(call, cpu, why_not);
}

static ly_status resample_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    memset(out, 0, sizeof *out);
    uint32_t blocked = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    if (ly_onednn_preferred_layout() == LY_LAYOUT_NCHW16C)
        blocked |= LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C);
    out->in[0] = blocked;
    out->out[0] = blocked;
    out->tied = 1u << 0;
    out->preferred = ly_onednn_preferred_layout();
    return LY_OK;
}

static void resample_release(void *state)
{
    ly_onednn_unary *u = state;
    if (!u) return;
    ly_onednn_unary_destroy(u);
    free(u);
}

static ly_status resample_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    ly_layout layout = info->in_layout[0];
    if (layout == LY_LAYOUT_PLAIN || info->out_layout[0] != layout)
        return LY_E_DECLINED; /* plain maps: the function hands them on */
    const ly_tensor *x = call->in[0], *y = call->out[0];
    ly_onednn_unary *u = calloc(1, sizeof *u);
    if (!u) return ly_set_error(LY_E_NO_MEMORY, "%s (onednn): out of memory", slot_name());
    u->threads = info->threads;
    u->slot = slot_name();
    dnnl_format_tag_t tag = layout == LY_LAYOUT_NCHW16C ? dnnl_nChw16c : dnnl_nChw8c;
    dnnl_dims_t src_dims = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    dnnl_dims_t dst_dims = {y->shape[0], y->shape[1], y->shape[2], y->shape[3]};
    dnnl_resampling_desc_t desc;
    ly_status status;
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&u->src_md, 4, src_dims, dnnl_f32, tag);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&u->dst_md, 4, dst_dims, dnnl_f32, tag);
    if (st == dnnl_success)
        st = dnnl_resampling_forward_desc_init(
            &desc, dnnl_forward_inference, dnnl_resampling_nearest, NULL, &u->src_md, &u->dst_md);
    if (st != dnnl_success)
        status = ly_onednn_failed(slot_name(), "dnnl_resampling_forward_desc_init", st);
    else
        status = ly_onednn_unary_create(u, &desc);
    if (status != LY_OK) {
        resample_release(u);
        return status;
    }
    *state = u;
    return LY_OK;
}

static ly_status resample_run(void *state, const ly_kernel_call *call)
{
    return ly_onednn_unary_run(state, call->in[0]->data, call->out[0]->data);
}

/* Plain maps (and calls outside a graph) go on to the reference. */
static ly_status resample_plain(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_DECLINED;
}

static const ly_kernel_stateful resample_stateful = {.layouts = resample_layouts,
                                                     .prepare = resample_prepare,
                                                     .run = resample_run,
                                                     .release = resample_release};

void ly_onednn_register_resample(void)
{
    ly_provider_add(LY_OP_UPSAMPLE_NEAREST2D, "onednn", resample_plain, resample_predicate,
                    &resample_stateful);
}
