/* Image buffers, and the image-file calls of a build without stb. */
#include "io/image.h"

#include "core/core.h"

#include <stdlib.h>

ly_status ly_image_alloc(ly_image *image, int width, int height)
{
    if (!image) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_alloc: image is NULL");
    image->pixels = NULL;
    image->width = image->height = 0;
    if (width <= 0 || height <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_image_alloc: size %dx%d: expected a positive width and height",
                            width, height);
    size_t bytes = (size_t)width * (size_t)height * 3;
    if (bytes / 3 / (size_t)height != (size_t)width)
        return ly_set_error(LY_E_NO_MEMORY, "ly_image_alloc: %dx%d pixels do not fit in memory",
                            width, height);
    image->pixels = malloc(bytes);
    if (!image->pixels)
        return ly_set_error(LY_E_NO_MEMORY, "ly_image_alloc: cannot allocate %zu bytes for %dx%d",
                            bytes, width, height);
    image->width = width;
    image->height = height;
    return LY_OK;
}

ly_status ly_image_free(ly_image *image)
{
    if (!image) return LY_OK;
    free(image->pixels);
    image->pixels = NULL;
    image->width = image->height = 0;
    return LY_OK;
}

ly_status ly_image_codecs(bool *available)
{
    if (!available) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_codecs: NULL argument");
    *available = ly_image_codecs_available();
    return LY_OK;
}

#ifndef LY_HAVE_STB

#define NO_STB "built without stb: install libstb-dev and rebuild to read and write images"

ly_status ly_image_load(const char *path, ly_image *out)
{
    if (out) out->pixels = NULL, out->width = out->height = 0;
    return ly_set_error(LY_E_UNSUPPORTED, "image %s: " NO_STB, path ? path : "(null)");
}

ly_status ly_image_save(const char *path, const ly_image *image, int jpeg_quality)
{
    (void)image;
    (void)jpeg_quality;
    return ly_set_error(LY_E_UNSUPPORTED, "image %s: " NO_STB, path ? path : "(null)");
}

bool ly_image_codecs_available(void)
{
    return false;
}

#endif
