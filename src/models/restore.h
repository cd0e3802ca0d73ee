/* SPDX-License-Identifier: MIT */
/*
 * The restore task (internal): an image in, an image `restore_scale` times
 * larger out (SwinIR; ../shared/specs/swin.md §4.4-4.6). The image as floats
 * in [0, 1] padded bottom and right to the model's stride, the network on the
 * whole of it or tile by tile (LibreYOLO's tile / tile_pad: cores without
 * overlap, each run on its core grown by tile_pad and padded again), and the
 * output cropped to scale x the source, clamped, x255, rounded half to even,
 * as uint8 RGB. Tiles are quantized straight into the image, so a large
 * photo never holds its float output whole.
 */
#ifndef LY_MODELS_RESTORE_H
#define LY_MODELS_RESTORE_H

#include "models/recipe.h"

/* Above this many padded input pixels an untiled call is tiled instead (with
 * a warning naming tile and tile_pad): SwinIR-s untiled at 256 x 256 peaks
 * near 200 MiB. Automatic tiles of 64 (96 x 96 inputs with tile_pad 16) keep
 * a 1280 x 852 photo within 2x the weights + 64 MiB + its uint8 output (108
 * MiB measured; tiles of 128 run ~1.8x faster but peak at 146 MiB). */
#define LY_RESTORE_UNTILED_MAX_PIXELS (256 * 256)
#define LY_RESTORE_AUTO_TILE 64
#define LY_RESTORE_DEFAULT_TILE_PAD 16

/* recipe.h preprocess for restorers: pixel / 255 (f32) into [1, 3, h, w], the
 * image's rows and columns beyond its size filled by reflection (replication
 * where a pad is not smaller than its side, or a side is 1). */
ly_status ly_restore_preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                                int64_t w, float *input, ly_prep *prep);

/* The restored image of `image` (its pixels freed with `release` once read):
 * *pixels (malloc'd, width*scale x height*scale RGB) and the times spent
 * (preprocess, network, postprocess). tile 0: untiled unless the image is
 * larger than the limit above. */
ly_status ly_restore_run(const ly_model_desc *d, int threads, const ly_image_view *image,
                         ly_image *release, int tile, int tile_pad, uint8_t **pixels,
                         double times_ms[3]);

#endif
