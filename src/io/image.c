/* SPDX-License-Identifier: MIT */
/* Image buffers, and the image-file calls of a build without stb. */
#include "io/image.h"

#include "core/checked.h"
#include "core/core.h"
#include "io/http.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* PIL's Image.MAX_IMAGE_PIXELS: 1024 * 1024 * 1024 // 4 // 3. */
#define PIL_MAX_IMAGE_PIXELS 89478485ull

ly_status ly_image_pixel_limit(uint64_t *limit)
{
    *limit = PIL_MAX_IMAGE_PIXELS;
    const char *env = getenv("LIBREYOLO_MAX_IMAGE_PIXELS");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || env[0] == '-')
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "LIBREYOLO_MAX_IMAGE_PIXELS=%s: expected a pixel count (0 for no "
                                "limit)",
                                env);
        *limit = v;
    }
    return LY_OK;
}

ly_status ly_image_check_pixels(const char *path, const char *format, uint64_t width,
                                uint64_t height)
{
    uint64_t warn_above;
    ly_status st = ly_image_pixel_limit(&warn_above);
    if (st != LY_OK) return st;
    if (warn_above == 0) return LY_OK;
    /* Dimensions come from headers as at most 32-bit values: no overflow. */
    uint64_t pixels = width * height;
    if (pixels > 2 * warn_above)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "image %s: the %s header says %llux%llu = %llu pixels, more than "
                            "%llu (twice LIBREYOLO_MAX_IMAGE_PIXELS=%llu, PIL's "
                            "decompression-bomb limit): refused before decoding; set "
                            "LIBREYOLO_MAX_IMAGE_PIXELS to a larger count, or 0 for no limit",
                            path, format, (unsigned long long)width, (unsigned long long)height,
                            (unsigned long long)pixels, (unsigned long long)(2 * warn_above),
                            (unsigned long long)warn_above);
    if (pixels > warn_above)
        ly_log(LY_LOG_WARNING,
               "image %s: %llu pixels is more than LIBREYOLO_MAX_IMAGE_PIXELS=%llu: it could be a "
               "decompression bomb",
               path, (unsigned long long)pixels, (unsigned long long)warn_above);
    return LY_OK;
}

#define PNG_INFLATE_SLACK (1 << 20)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The filtered bytes of a w x h image of `bits` per pixel: one filter byte
 * per row, rows padded to whole bytes; false when that overflows int64. */
static bool png_filtered_bytes(int64_t w, int64_t h, int64_t bits, int64_t *out)
{
    int64_t row;
    return ly_checked_mul(w, bits, &row) && ly_checked_add(row, 7, &row) &&
           ly_checked_mul(h, 1 + row / 8, out);
}

/* The filtered bytes a PNG's image data inflates to, from IHDR (PNG spec
 * section 7; Adam7 passes are images of their own). 0 when IHDR is unusable
 * or implies more than int64 counts. */
static uint64_t png_inflated_size(const uint8_t *ihdr)
{
    int64_t width = be32(ihdr), height = be32(ihdr + 4);
    unsigned depth = ihdr[8], colour = ihdr[9], interlace = ihdr[12];
    unsigned channels = colour == 0   ? 1
                        : colour == 2 ? 3
                        : colour == 3 ? 1
                        : colour == 4 ? 2
                        : colour == 6 ? 4
                                      : 0;
    if (!channels || depth == 0 || depth > 16 || width == 0 || height == 0) return 0;
    int64_t bits = (int64_t)channels * depth, total = 0, pass;
    if (!interlace) return png_filtered_bytes(width, height, bits, &total) ? (uint64_t)total : 0;
    static const unsigned x0[7] = {0, 4, 0, 2, 0, 1, 0}, dx[7] = {8, 8, 4, 4, 2, 2, 1};
    static const unsigned y0[7] = {0, 0, 4, 0, 2, 0, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
    for (int p = 0; p < 7; p++) {
        int64_t w = width > x0[p] ? (width - x0[p] + dx[p] - 1) / dx[p] : 0;
        int64_t h = height > y0[p] ? (height - y0[p] + dy[p] - 1) / dy[p] : 0;
        if (!w || !h) continue;
        if (!png_filtered_bytes(w, h, bits, &pass) || !ly_checked_add(total, pass, &total))
            return 0;
    }
    return (uint64_t)total;
}

ly_status ly_image_check_png_inflate(const uint8_t *bytes, size_t size, const char *path)
{
    /* Signature, then IHDR: the first chunk, 13 bytes. */
    if (size < 8 + 8 + 13 + 4 || be32(bytes + 8) != 13 || memcmp(bytes + 12, "IHDR", 4) != 0)
        return ly_set_error(LY_E_FORMAT, "image %s: PNG: the first chunk is not a 13-byte IHDR",
                            path);
    uint64_t implied = png_inflated_size(bytes + 16);
    /* Some encoders leave a little after the image data, which decoders
     * ignore: tolerated, but never more than a megabyte (implied < 2^63). */
    uint64_t limit = implied + PNG_INFLATE_SLACK;
    if (implied == 0)
        return ly_set_error(LY_E_FORMAT,
                            "image %s: PNG: IHDR has an unusable size, bit depth or "
                            "colour type",
                            path);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return ly_set_error(LY_E_NO_MEMORY, "image %s: PNG: cannot start zlib", path);
    uint8_t scratch[16384];
    uint64_t inflated = 0;
    ly_status st = LY_OK;
    bool ended = false;
    for (size_t at = 8; !ended && at + 12 <= size;) {
        uint64_t length = be32(bytes + at);
        if (length > size - at - 12) break; /* truncated: the decoder reports it */
        const uint8_t *type = bytes + at + 4;
        if (memcmp(type, "IEND", 4) == 0) break;
        if (memcmp(type, "IDAT", 4) == 0) {
            z.next_in = (Bytef *)(bytes + at + 8);
            z.avail_in = (uInt)length;
            while (z.avail_in > 0 && !ended) {
                z.next_out = scratch;
                z.avail_out = sizeof scratch;
                int r = inflate(&z, Z_NO_FLUSH);
                inflated += sizeof scratch - z.avail_out;
                if (inflated > limit) {
                    st = ly_set_error(LY_E_FORMAT,
                                      "image %s: PNG: the image data inflates to more than the "
                                      "%llu bytes its IHDR (%ux%u) implies (and %d of slack): "
                                      "refused before decoding",
                                      path, (unsigned long long)implied, be32(bytes + 16),
                                      be32(bytes + 20), PNG_INFLATE_SLACK);
                    ended = true;
                } else if (r == Z_STREAM_END) {
                    ended = true;
                } else if (r != Z_OK && r != Z_BUF_ERROR) {
                    ended = true; /* corrupt stream: the decoder names it */
                }
            }
        }
        at += 12 + (size_t)length;
    }
    inflateEnd(&z);
    return st;
}

ly_status ly_image_alloc(ly_image *image, int width, int height)
{
    if (!image) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_alloc: image is NULL");
    image->pixels = NULL;
    image->width = image->height = 0;
    if (width <= 0 || height <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_image_alloc: size %dx%d: expected a positive width and height",
                            width, height);
    size_t bytes;
    if (!ly_checked_mul_size((size_t)width, (size_t)height, &bytes) ||
        !ly_checked_mul_size(bytes, 3, &bytes))
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

ly_status ly_image_load_buffer(const void *bytes, size_t size, const char *name, ly_image *out)
{
    (void)bytes;
    (void)size;
    if (out) out->pixels = NULL, out->width = out->height = 0;
    return ly_set_error(LY_E_UNSUPPORTED, "image %s: " NO_STB, name ? name : "(buffer)");
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

#define MAX_URL_IMAGE_BYTES ((size_t)64 << 20)

ly_status ly_image_load_url(const char *url, ly_image *out)
{
    if (out) out->pixels = NULL, out->width = out->height = 0;
    if (!url || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_load_url: NULL argument");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "image %s: expected an http:// or https:// URL",
                            url);
#ifdef LY_HAVE_CURL
    uint8_t *bytes = NULL;
    size_t size = 0;
    ly_status st = ly_http_get(url, MAX_URL_IMAGE_BYTES, &bytes, &size);
    if (st != LY_OK) return ly_error_prefix(LY_E_IO, "image");
    st = ly_image_load_buffer(bytes, size, url, out);
    free(bytes);
    return st;
#else
    return ly_set_error(LY_E_UNSUPPORTED,
                        "image %s: this build reads no URLs (built without libcurl: install "
                        "libcurl4-openssl-dev and rebuild), download it and give the file",
                        url);
#endif
}
