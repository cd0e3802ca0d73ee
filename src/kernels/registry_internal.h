/* Shared between the registry and the plugin loader. */
#ifndef LY_KERNELS_REGISTRY_INTERNAL_H
#define LY_KERNELS_REGISTRY_INTERNAL_H

#include "libreyolo/kernels.h"

/* Load out-of-tree providers (plugin.c). Called once, with no registry lock
 * held, before the in-tree accelerated providers register. */
void ly_plugins_load(void);

#endif
