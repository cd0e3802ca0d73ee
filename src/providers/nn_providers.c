/* The blocked-layout conv side channel (nn_providers.h), until the graph
 * negotiates layouts through the registry. */
#include "providers/nn_providers.h"

#include <stdatomic.h>

/* Written at registration (under the registry's once), read at graph plans. */
static const ly_nn_blocked_conv_provider *_Atomic blocked_conv;
static const char *_Atomic blocked_conv_impl;
static _Atomic int blocked_conv_block;

void ly_nn_set_blocked_conv(const ly_nn_blocked_conv_provider *provider, const char *impl,
                            int block)
{
    atomic_store(&blocked_conv_impl, impl);
    atomic_store(&blocked_conv_block, block);
    atomic_store(&blocked_conv, provider);
}

const ly_nn_blocked_conv_provider *ly_nn_blocked_conv(const char **impl, int *block)
{
    const ly_nn_blocked_conv_provider *p = atomic_load(&blocked_conv);
    if (impl) *impl = p ? atomic_load(&blocked_conv_impl) : NULL;
    if (block) *block = p ? atomic_load(&blocked_conv_block) : 0;
    return p;
}
