/* SPDX-License-Identifier: MIT */
/*
 * An example out-of-tree provider. Build it as a shared library named
 * libreyolo_kernels<anything>.so and put it on LIBREYOLO_KERNELS_PATH (or next to
 * the executable): the registry loads it at the first resolution.
 *
 * It registers "example" for fake_quant_int8_affine, wrapping the portable
 * reference and counting its calls, to show the shape of a provider: a kernel,
 * a predicate that can decline a call, and one exported entry point. It uses
 * only the API struct it is given, so it links against nothing.
 */
#include "libreyolo/kernels.h"

#include <stdatomic.h>

static const ly_kernel_plugin_api *host;
static atomic_long calls;

__attribute__((visibility("default"))) long libreyolo_kernels_example_calls(void)
{
    return calls;
}

static ly_status example_fake_quant_int8_affine(const ly_kernel_call *call)
{
    calls++;
    return host->run_reference("fake_quant_int8_affine", call);
}

/* Declines empty tensors, to show a call-dependent decision. */
static ly_status example_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                   const char **why_not)
{
    (void)cpu;
    if (call && call->in[0] && ly_tensor_numel(call->in[0]) == 0) {
        *why_not = "example declines empty tensors";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

__attribute__((visibility("default"))) ly_status
libreyolo_kernels_plugin(const ly_kernel_plugin_api *api, uint32_t *built_for_api_version)
{
    *built_for_api_version = LY_KERNEL_PLUGIN_API_VERSION;
    if (api->api_version != LY_KERNEL_PLUGIN_API_VERSION || api->struct_size < sizeof *api)
        return LY_E_UNSUPPORTED;
    host = api;
    return api->register_kernel("fake_quant_int8_affine", "example",
                                example_fake_quant_int8_affine, example_predicate);
}
