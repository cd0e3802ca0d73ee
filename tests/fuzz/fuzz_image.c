/* SPDX-License-Identifier: MIT */
/* Image files (JPEG through libjpeg-turbo, PNG and BMP through stb, the pixel
 * limit and the PNG inflate bound), read from a file as predict reads them. */
#include "fuzz.h"

#include "libreyolo/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = ly_fuzz_file("fuzz.img", data, size);
    ly_image img;
    if (path && ly_image_load(path, &img) == LY_OK) ly_image_free(&img);
    return 0;
}
