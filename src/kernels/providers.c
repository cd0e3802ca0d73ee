/* SPDX-License-Identifier: MIT */
/*
 * Loading the providers, once, at the first resolution (unless the selection is
 * off/reference): out-of-tree plugins first, then the built-in providers, so
 * in-tree implementations are newer and win when eligible (as upstream, where
 * the out-of-tree package is imported before the lazy in-tree providers), then
 * the pinned hub artifacts, which upstream prefers where eligible.
 */
#include "kernels/hub/hub.h"
#include "kernels/registry_internal.h"
#include "providers/builtin.h"

void ly_providers_load(void)
{
    ly_plugins_load();
    ly_builtin_providers_register();
    ly_hub_load();
}
