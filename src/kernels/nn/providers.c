/* Registers the network-op providers of the optional libraries found at build time. */
#include "kernels/slot.h"

void ly_register_nn_providers(void)
{
}
