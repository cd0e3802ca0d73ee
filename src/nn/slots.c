/* Network-op slots: contracts and references (placeholder until the ops land). */
#include "kernels/slot.h"

const ly_slot_def ly_nn_slots[1];
const size_t ly_nn_slot_count = 0;
