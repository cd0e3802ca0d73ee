/*
 * Image files (internal side of libreyolo/image.h): the codecs behind it.
 */
#ifndef LY_IO_IMAGE_H
#define LY_IO_IMAGE_H

#include "libreyolo/image.h"

/* JPEG through libjpeg-turbo, bit for bit as PIL decodes it (only in builds
 * with LY_HAVE_LIBJPEG; ly_image_load uses it for JPEG files). LY_E_DECLINED
 * for colour spaces libjpeg cannot turn into RGB (CMYK, YCCK). */
ly_status ly_image_decode_jpeg(const uint8_t *bytes, size_t size, const char *path, ly_image *out);

/* Whether this build can read and write image files. */
bool ly_image_codecs_available(void);

#endif
