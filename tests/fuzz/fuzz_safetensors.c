/* SPDX-License-Identifier: MIT */
/* .safetensors: the header JSON, the tensor table and its tiling of the data
 * section, the metadata (class names), then the model load from a file. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_fuzz_checkpoint_bytes(data, size, "fuzz.safetensors");
    return 0;
}
