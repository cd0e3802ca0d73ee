/* Slots of scaled dot-product attention (sdpa): placeholder until they land. */
#include "kernels/slot.h"

const ly_slot_def ly_sdpa_slots[1] = {{0}};
const size_t ly_sdpa_slot_count = 0;

void ly_register_sdpa_providers(void)
{
}
