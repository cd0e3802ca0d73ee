/* SPDX-License-Identifier: MIT */
/*
 * A plugin built for plugin API 2 (calls carried one shared ly_kernel_params):
 * the loader must refuse it with a message that says to rebuild it, and none
 * of its registrations may take effect.
 */
#include "libreyolo/kernels.h"

static ly_status never_called(const ly_kernel_call *call)
{
    (void)call;
    return LY_E_INTERNAL;
}

__attribute__((visibility("default"))) ly_status
libreyolo_kernels_plugin(const ly_kernel_plugin_api *api, uint32_t *built_for_api_version)
{
    *built_for_api_version = 2;
    return api->register_kernel("fake_quant_int8_affine", "oldapi", never_called, NULL);
}
