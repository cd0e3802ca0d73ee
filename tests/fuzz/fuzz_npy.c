/* SPDX-License-Identifier: MIT */
/* .npy: the magic, the header dictionary, dtypes and shapes. */
#include "fuzz.h"

#include "libreyolo/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_tensor t;
    if (ly_npy_load_buffer(data, size, "fuzz.npy", &t) == LY_OK) ly_npy_free(&t);
    return 0;
}
