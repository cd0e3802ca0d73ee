/*
 * Image files (internal): JPEG, PNG and BMP read into interleaved 8-bit RGB,
 * JPEG or PNG written from it. Decoding and encoding use stb (libstb-dev);
 * without it every call that touches a file fails with LY_E_UNSUPPORTED.
 */
#ifndef LY_IO_IMAGE_H
#define LY_IO_IMAGE_H

#include "libreyolo/libreyolo.h"

/* Interleaved RGB, rows of exactly width * 3 bytes. */
typedef struct ly_image {
    uint8_t *pixels;
    int width, height;
} ly_image;

/* Allocate an uninitialised width x height image (both > 0). */
ly_status ly_image_alloc(ly_image *image, int width, int height);
/* Free the pixels and empty `image`; NULL or an empty image is fine. */
void ly_image_free(ly_image *image);

/* Read `path` (JPEG, PNG or BMP, recognised by content; grey, palette and
 * alpha are converted to RGB, alpha dropped, 16-bit samples reduced to 8).
 * LY_E_NOT_FOUND for a missing file, LY_E_IO when it cannot be read,
 * LY_E_FORMAT for another format, a corrupt file or one without pixels;
 * every message names the file. */
ly_status ly_image_load(const char *path, ly_image *out);

/* Write `image` to `path` as JPEG (.jpg, .jpeg; quality 1..100) or PNG (.png),
 * chosen by the extension (case-insensitive), atomically: a temporary file in
 * the same directory is written and renamed over `path`. */
ly_status ly_image_save(const char *path, const ly_image *image, int jpeg_quality);

/* JPEG through libjpeg-turbo, bit for bit as PIL decodes it (only in builds
 * with LY_HAVE_LIBJPEG; ly_image_load uses it for JPEG files). LY_E_DECLINED
 * for colour spaces libjpeg cannot turn into RGB (CMYK, YCCK). */
ly_status ly_image_decode_jpeg(const uint8_t *bytes, size_t size, const char *path, ly_image *out);

/* Whether this build can read and write image files. */
bool ly_image_codecs_available(void);

#endif
