/* SPDX-License-Identifier: MIT */
/* Checkpoint files: the zip container, the restricted unpickler and the
 * state-dict reader (ly_checkpoint_open_buffer), then the whole model load
 * (family recognition, the recipe's key checks and builder) from a file. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_fuzz_checkpoint_bytes(data, size, "fuzz.pt");
    return 0;
}
