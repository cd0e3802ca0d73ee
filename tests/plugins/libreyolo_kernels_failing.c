/* SPDX-License-Identifier: MIT */
/* A provider whose kernel always fails at run time: the registry must disable it,
 * warn once, and serve the call from the next implementation. */
#include "libreyolo/kernels.h"

static const ly_kernel_plugin_api *host;

static ly_status failing_kernel(const ly_kernel_call *call)
{
    (void)call;
    return host->set_error(LY_E_PROVIDER, "simulated device failure");
}

__attribute__((visibility("default"))) ly_status
libreyolo_kernels_plugin(const ly_kernel_plugin_api *api, uint32_t *built_for_api_version)
{
    *built_for_api_version = LY_KERNEL_PLUGIN_API_VERSION;
    host = api;
    return api->register_kernel("fake_quant_int8_affine", "failing", failing_kernel, NULL);
}
