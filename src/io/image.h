/* SPDX-License-Identifier: MIT */
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

/* PIL's decompression-bomb rule, checked from the header before any pixel is
 * allocated: warn above LIBREYOLO_MAX_IMAGE_PIXELS (default PIL's
 * Image.MAX_IMAGE_PIXELS, 89,478,485), refuse above twice that; 0 lifts it.
 * LY_E_UNSUPPORTED naming the file, its size and the variable. */
ly_status ly_image_check_pixels(const char *path, const char *format, uint64_t width,
                                uint64_t height);
/* The count above which that rule warns (0: no limit); LY_E_INVALID_ARGUMENT
 * for a variable that is no count. Video frames are refused above it. */
ly_status ly_image_pixel_limit(uint64_t *limit);

/* Whether PNG data cannot inflate (much) past what its IHDR implies (the zlib stream
 * of all IDAT chunks is inflated into a small scratch buffer and counted, so a
 * 1x1 image that inflates to a gigabyte costs kilobytes). Run before a decoder
 * that would inflate the stream whole (stb). LY_E_FORMAT naming the file. */
ly_status ly_image_check_png_inflate(const uint8_t *bytes, size_t size, const char *path);

/* Whether this build can read and write image files. */
bool ly_image_codecs_available(void);

#endif
