/* SPDX-License-Identifier: MIT */
/*
 * JPEG decoding with libjpeg-turbo (Debian libjpeg62-turbo-dev), used in place
 * of stb_image for JPEG when the build has it (LY_HAVE_LIBJPEG).
 *
 * Why: LibreYOLO reads images with PIL, which decodes JPEG with libjpeg-turbo
 * (accurate integer IDCT, fancy upsampling, its colour tables). stb_image
 * rounds differently and lands 1-3 levels off on a few percent of the pixels;
 * the fixture network turns 10 such values into score changes of 1e-2, so
 * matching LibreYOLO's detections needs libjpeg's exact pixels.
 */
#include "io/image.h"

#ifdef LY_HAVE_LIBJPEG

#include "core/core.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include <jerror.h>

typedef struct error_state {
    struct jpeg_error_mgr mgr; /* first: libjpeg hands back this pointer */
    jmp_buf escape;
    char message[JMSG_LENGTH_MAX];
    bool truncated;
} error_state;

static void on_error(j_common_ptr cinfo)
{
    error_state *e = (error_state *)cinfo->err;
    e->mgr.format_message(cinfo, e->message);
    longjmp(e->escape, 1);
}

/* Warnings go nowhere (not to stderr); running out of data is remembered,
 * since libjpeg then pads the image with grey where PIL reports an error. */
static void on_message(j_common_ptr cinfo, int level)
{
    error_state *e = (error_state *)cinfo->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

ly_status ly_image_decode_jpeg(const uint8_t *bytes, size_t size, const char *path, ly_image *out)
{
    struct jpeg_decompress_struct cinfo;
    error_state err;
    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = on_error;
    err.mgr.emit_message = on_message;
    out->pixels = NULL;
    out->width = out->height = 0;
    /* Touched after setjmp, so kept where longjmp cannot lose it. */
    ly_image *volatile result = out;
    if (setjmp(err.escape)) {
        jpeg_destroy_decompress(&cinfo);
        ly_image_free(result);
        return ly_set_error(LY_E_FORMAT, "image %s: cannot decode the JPEG data: %s", path,
                            err.message);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, bytes, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    ly_status limit = ly_image_check_pixels(path, "JPEG", cinfo.image_width, cinfo.image_height);
    if (limit != LY_OK) {
        jpeg_destroy_decompress(&cinfo);
        return limit;
    }
    if (cinfo.jpeg_color_space != JCS_YCbCr && cinfo.jpeg_color_space != JCS_GRAYSCALE &&
        cinfo.jpeg_color_space != JCS_RGB) {
        /* CMYK and YCCK: libjpeg has no conversion to RGB; stb has one. */
        jpeg_destroy_decompress(&cinfo);
        return LY_E_DECLINED;
    }
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3) {
        jpeg_destroy_decompress(&cinfo);
        return ly_set_error(LY_E_FORMAT, "image %s: JPEG decodes to %d components, expected 3",
                            path, cinfo.output_components);
    }
    if (cinfo.output_width > (JDIMENSION)INT32_MAX / 3 ||
        cinfo.output_height > (JDIMENSION)INT32_MAX) {
        jpeg_destroy_decompress(&cinfo);
        return ly_set_error(LY_E_UNSUPPORTED, "image %s: %ux%u pixels is too large", path,
                            cinfo.output_width, cinfo.output_height);
    }
    ly_status st = ly_image_alloc(out, (int)cinfo.output_width, (int)cinfo.output_height);
    if (st != LY_OK) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    size_t row = (size_t)out->width * 3;
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW line = out->pixels + (size_t)cinfo.output_scanline * row;
        jpeg_read_scanlines(&cinfo, &line, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (err.truncated) {
        ly_image_free(out);
        return ly_set_error(LY_E_FORMAT, "image %s: the JPEG data is truncated", path);
    }
    return LY_OK;
}

#else

/* Without libjpeg this file is empty; ISO C wants a declaration. */
typedef int ly_libjpeg_unused;

#endif
