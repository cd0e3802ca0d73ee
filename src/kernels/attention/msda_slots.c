/* Slots of multi-scale deformable attention (ms_deform_attn): placeholder until they land. */
#include "kernels/slot.h"

const ly_slot_def ly_msda_slots[1] = {{0}};
const size_t ly_msda_slot_count = 0;

void ly_register_msda_providers(void)
{
}
