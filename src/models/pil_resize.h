/* SPDX-License-Identifier: MIT */
/*
 * PIL's Image.resize(size, BILINEAR | BICUBIC) of 8-bit RGB, bit for bit
 * (Pillow's Resample.c): per output pixel a filter whose support grows with
 * the downscaling ratio (antialiasing), weights normalised in double then
 * rounded to 22-bit fixed point, a horizontal pass into 8-bit rows (rounded,
 * clipped), then a vertical pass. What LibreYOLO's PIL-based preprocessing
 * (D-FINE's resize, torchvision's Resize on a PIL image) computes.
 */
#ifndef LY_MODELS_PIL_RESIZE_H
#define LY_MODELS_PIL_RESIZE_H

#include "libreyolo/image.h"

#include <stdint.h>

typedef enum ly_pil_filter { LY_PIL_BILINEAR, LY_PIL_BICUBIC } ly_pil_filter;

/* image (RGB; BGR views are read as RGB) resized to out_w x out_h into out
 * (out_w * out_h * 3, RGB). */
ly_status ly_pil_resize(const ly_image_view *image, int out_w, int out_h, ly_pil_filter filter,
                        uint8_t *out);

#endif
