/* SPDX-License-Identifier: MIT */
/* Image files through stb_image / stb_image_write (libstb provides the code). */
#include "io/image.h"

#include "core/atomic_file.h"
#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stb_image.h>
#include <stb_image_write.h>

bool ly_image_codecs_available(void)
{
    return true;
}

/* ---- Reading ------------------------------------------------------------ */

static ly_status read_whole_file(const char *path, uint8_t **bytes, size_t *size)
{
    *bytes = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return ly_set_error(LY_E_NOT_FOUND, "image %s: no such file", path);
        return ly_set_error(LY_E_IO, "image %s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ly_status s = ly_set_error(LY_E_IO, "image %s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ly_set_error(LY_E_IO, "image %s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return ly_set_error(LY_E_FORMAT, "image %s: the file is empty", path);
    }
    /* stb takes the length as an int. */
    if ((uint64_t)st.st_size > (uint64_t)INT_MAX) {
        close(fd);
        return ly_set_error(LY_E_UNSUPPORTED, "image %s: %lld bytes, more than the %d supported",
                            path, (long long)st.st_size, INT_MAX);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n);
    if (!buf) {
        close(fd);
        return ly_set_error(LY_E_NO_MEMORY, "image %s: cannot allocate %zu bytes", path, n);
    }
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            ly_status s =
                got < 0 ? ly_set_error(LY_E_IO, "image %s: read failed: %s", path, strerror(errno))
                        : ly_set_error(LY_E_IO, "image %s: the file shrank while read", path);
            free(buf);
            close(fd);
            return s;
        }
        done += (size_t)got;
    }
    close(fd);
    *bytes = buf;
    *size = n;
    return LY_OK;
}

/* The format from the first bytes, NULL when it is none of ours. */
static const char *sniff_format(const uint8_t *b, size_t n)
{
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "JPEG";
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return "PNG";
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
    return NULL;
}

ly_status ly_image_load(const char *path, ly_image *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_load: out is NULL");
    out->pixels = NULL;
    out->width = out->height = 0;
    if (!path || !*path)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_load: path is NULL or empty");

    uint8_t *bytes;
    size_t size;
    ly_status st = read_whole_file(path, &bytes, &size);
    if (st != LY_OK) return st;
    st = ly_image_load_buffer(bytes, size, path, out);
    free(bytes);
    return st;
}

ly_status ly_image_load_buffer(const void *data, size_t size, const char *path, ly_image *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_load_buffer: out is NULL");
    out->pixels = NULL;
    out->width = out->height = 0;
    if (!path) path = "(buffer)";
    if (!data || size == 0) return ly_set_error(LY_E_FORMAT, "image %s: no bytes", path);
    if (size > (size_t)INT_MAX)
        return ly_set_error(LY_E_UNSUPPORTED, "image %s: %zu bytes, more than the %d supported",
                            path, size, INT_MAX);
    const uint8_t *bytes = data;
    ly_status st;
    const char *format = sniff_format(bytes, size);
    if (!format)
        return ly_set_error(LY_E_FORMAT, "image %s: unsupported format (expected JPEG, PNG or BMP)",
                            path);
#ifdef LY_HAVE_LIBJPEG
    if (strcmp(format, "JPEG") == 0) {
        st = ly_image_decode_jpeg(bytes, size, path, out);
        if (st != LY_E_DECLINED) return st;
    }
#endif
    /* Sizes from the header, so a bomb costs its file and no more (libjpeg
     * checks its own). */
    int w = 0, h = 0, channels = 0;
    if (!stbi_info_from_memory(bytes, (int)size, &w, &h, &channels)) {
        const char *why = stbi_failure_reason();
        return ly_set_error(LY_E_FORMAT, "image %s: cannot read the %s header: %s", path, format,
                            why ? why : "unknown error");
    }
    st = ly_image_check_pixels(path, format, (uint64_t)w, (uint64_t)h);
    if (st == LY_OK && strcmp(format, "PNG") == 0)
        st = ly_image_check_png_inflate(bytes, size, path);
    if (st != LY_OK) return st;
    uint8_t *rgb = stbi_load_from_memory(bytes, (int)size, &w, &h, &channels, 3);
    if (!rgb) {
        const char *why = stbi_failure_reason();
        return ly_set_error(LY_E_FORMAT, "image %s: cannot decode the %s data: %s", path, format,
                            why ? why : "unknown error");
    }
    if (w <= 0 || h <= 0) {
        stbi_image_free(rgb);
        return ly_set_error(LY_E_FORMAT, "image %s: the %s image has no pixels (%dx%d)", path,
                            format, w, h);
    }
    /* Copied so every ly_image is released the same way, whoever decoded it. */
    st = ly_image_alloc(out, w, h);
    if (st == LY_OK) memcpy(out->pixels, rgb, (size_t)w * (size_t)h * 3);
    stbi_image_free(rgb);
    return st;
}

/* ---- Writing ------------------------------------------------------------ */

static void sink_write(void *context, void *data, int size)
{
    ly_atomic_file_write(context, data, size > 0 ? (size_t)size : 0);
}

static bool has_extension(const char *path, const char *ext)
{
    size_t n = strlen(path), m = strlen(ext);
    return n > m && strcasecmp(path + n - m, ext) == 0;
}

ly_status ly_image_save(const char *path, const ly_image *image, int jpeg_quality)
{
    if (!path || !*path)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_save: path is NULL or empty");
    if (!image || !image->pixels || image->width <= 0 || image->height <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_save: %s: the image is empty", path);
    bool png = has_extension(path, ".png");
    bool jpeg = has_extension(path, ".jpg") || has_extension(path, ".jpeg");
    if (!png && !jpeg)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_image_save: %s: unknown extension, expected .jpg, .jpeg or .png",
                            path);
    if (jpeg && (jpeg_quality < 1 || jpeg_quality > 100))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_image_save: %s: JPEG quality %d, expected 1..100", path,
                            jpeg_quality);
    if (image->width > INT_MAX / 3)
        return ly_set_error(LY_E_UNSUPPORTED, "ly_image_save: %s: width %d is too large", path,
                            image->width);

    char what[1024];
    snprintf(what, sizeof what, "image %s", path);
    ly_atomic_file f;
    ly_status st = ly_atomic_file_begin(&f, path, what);
    if (st != LY_OK) return st;
    int ok = png ? stbi_write_png_to_func(sink_write, &f, image->width, image->height, 3,
                                          image->pixels, image->width * 3)
                 : stbi_write_jpg_to_func(sink_write, &f, image->width, image->height, 3,
                                          image->pixels, jpeg_quality);
    if (!ok && !f.error) {
        ly_atomic_file_abort(&f);
        return ly_set_error(LY_E_INTERNAL, "image %s: the %s encoder failed", path,
                            png ? "PNG" : "JPEG");
    }
    return ly_atomic_file_commit(&f);
}
