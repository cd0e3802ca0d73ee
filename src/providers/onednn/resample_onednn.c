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

static ly_status resample_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                    const char **why_not)
{
    if (call && !ly_onednn_unary_blockable(call->in[0])) {
        *why_not = "not a batch-1 map of whole 8-channel blocks (plain maps: the reference)";
        return LY_E_DECLINED;
    }
    return ly_onednn_predicate(call, cpu, why_not);
}

static ly_status resample_layouts(const ly_kernel_call *call, ly_kernel_layouts *out)
{
    (void)call;
    ly_onednn_unary_layouts(out);
    return LY_OK;
}

static ly_status resample_prepare(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                  void **state)
{
    ly_onednn_unary *u;
    ly_status status = ly_onednn_unary_begin(call, info, slot_name(), &u);
    if (status != LY_OK) return status; /* plain maps: the function hands them on */
    dnnl_resampling_desc_t desc;
    dnnl_status_t st = dnnl_resampling_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_resampling_nearest, NULL, &u->src_md, &u->dst_md);
    if (st != dnnl_success)
        status = ly_onednn_failed(slot_name(), "dnnl_resampling_forward_desc_init", st);
    else
        status = ly_onednn_unary_create(u, &desc);
    if (status != LY_OK) {
        ly_onednn_unary_release(u);
        return status;
    }
    *state = u;
    return LY_OK;
}

/* Plain maps (and calls outside a graph) go on to the reference. */
static ly_status resample_plain(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_DECLINED;
}

static const ly_kernel_stateful resample_stateful = {.layouts = resample_layouts,
                                                     .prepare = resample_prepare,
                                                     .run = ly_onednn_unary_run,
                                                     .release = ly_onednn_unary_release};

void ly_onednn_register_resample(void)
{
    ly_provider_add(LY_OP_UPSAMPLE_NEAREST2D, "onednn", resample_plain, resample_predicate,
                    &resample_stateful);
}
