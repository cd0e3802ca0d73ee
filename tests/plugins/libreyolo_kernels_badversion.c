/* SPDX-License-Identifier: MIT */
/* A provider built for a future plugin API: it must be skipped with a warning and
 * none of its registrations may take effect. */
#include "libreyolo/kernels.h"

static ly_status never_called(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_INTERNAL;
}

__attribute__((visibility("default"))) ly_status
libreyolo_kernels_plugin(const ly_kernel_plugin_api *api, uint32_t *built_for_api_version)
{
    *built_for_api_version = LY_KERNEL_PLUGIN_API_VERSION + 1;
    return api->register_kernel("fake_quant_int8_affine", "badversion", never_called, NULL);
}
