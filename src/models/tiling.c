/* SPDX-License-Identifier: MIT */
#include "models/tiling.h"

#include "core/atomic_file.h"
#include "core/core.h"
#include "core/dirs.h"
#include "libreyolo/image.h"
#include "models/nms.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TILES 4096
#define TILED_JPEG_QUALITY 90 /* the command's, for every JPEG it saves */

ly_status ly_predict_tiles(int width, int height, int size, double overlap_ratio, int (*tiles)[4],
                           size_t capacity, size_t *count)
{
    if (!count) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_tiles: count is NULL");
    *count = 0;
    if (width < 1 || height < 1 || size < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_predict_tiles: image %dx%d, tiles of %d: expected sizes of 1 or "
                            "more",
                            width, height, size);
    if (!(overlap_ratio >= 0 && overlap_ratio < 1))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "overlap_ratio %g: expected a number in [0, 1)",
                            overlap_ratio);
    if (capacity && !tiles)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_predict_tiles: tiles is NULL");
    /* get_slice_bboxes, with Python's int() of a float product */
    int overlap = (int)((double)size * overlap_ratio);
    int step = size - overlap;
    /* count first: a tiny step on a large image would make millions */
    int64_t across = 0, down = 0;
    for (int64_t x = 0;; x += step) {
        across++;
        if ((x + size < width ? x + size : width) == width) break;
    }
    for (int64_t y = 0;; y += step) {
        down++;
        if ((y + size < height ? y + size : height) == height) break;
    }
    if (across * down > MAX_TILES)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "tiling: %lld tiles of %d pixels (overlap_ratio %g) on a %dx%d image, "
                            "more than %d: use a smaller overlap_ratio or a larger imgsz",
                            (long long)(across * down), size, overlap_ratio, width, height,
                            MAX_TILES);
    size_t n = 0;
    for (int y = 0;; y += step) {
        int y2 = y + size < height ? y + size : height;
        for (int x = 0;; x += step) {
            int x2 = x + size < width ? x + size : width;
            int x1 = x2 == width ? (x2 - size > 0 ? x2 - size : 0) : x;
            int y1 = y2 == height ? (y2 - size > 0 ? y2 - size : 0) : y;
            if (n < capacity) {
                tiles[n][0] = x1, tiles[n][1] = y1, tiles[n][2] = x2, tiles[n][3] = y2;
            }
            n++;
            if (x2 == width) break;
        }
        if (y2 == height) break;
    }
    *count = n;
    return LY_OK;
}

ly_status ly_tiles_merge(ly_box *boxes, size_t n, double iou, size_t *kept)
{
    *kept = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        bool ok = isfinite(boxes[i].conf);
        for (int k = 0; k < 4; k++)
            ok = ok && isfinite(boxes[i].xyxy[k]);
        if (ok) boxes[finite++] = boxes[i];
    }
    if (!finite) return LY_OK;
    /* boxes - boxes.min().clamp(max=0), in float32 */
    float low = boxes[0].xyxy[0];
    for (size_t i = 0; i < finite; i++)
        for (int k = 0; k < 4; k++)
            if (boxes[i].xyxy[k] < low) low = boxes[i].xyxy[k];
    float shift = low < 0.f ? low : 0.f;
    ly_nms_candidate *c = malloc(finite * sizeof *c);
    uint8_t *keep = malloc(finite);
    ly_box *out = malloc(finite * sizeof *out);
    if (!c || !keep || !out) {
        free(c), free(keep), free(out);
        return ly_set_error(LY_E_NO_MEMORY, "tiling: out of memory");
    }
    for (size_t i = 0; i < finite; i++) {
        for (int k = 0; k < 4; k++)
            c[i].box[k] = boxes[i].xyxy[k] - shift;
        c[i].score = boxes[i].conf;
        c[i].cls = boxes[i].cls;
        c[i].order = (int64_t)i;
    }
    ly_nms_sort(c, finite);
    ly_status st = ly_nms_batched(c, finite, iou, keep, "tiling");
    size_t m = 0;
    for (size_t i = 0; st == LY_OK && i < finite; i++)
        if (keep[i]) out[m++] = boxes[c[i].order];
    for (size_t i = 0; i < m; i++)
        boxes[i] = out[i];
    if (st == LY_OK) *kept = m;
    free(c), free(keep), free(out);
    return st;
}

/* ---- LibreYOLO's tiled save ------------------------------------------------ */

static ly_status save_crop(const ly_image *image, const int t[4], const char *path)
{
    ly_image crop;
    ly_status st = ly_image_alloc(&crop, t[2] - t[0], t[3] - t[1]);
    if (st != LY_OK) return st;
    for (int y = 0; y < crop.height; y++)
        memcpy(crop.pixels + (size_t)y * (size_t)crop.width * 3,
               image->pixels + ((size_t)(t[1] + y) * (size_t)image->width + (size_t)t[0]) * 3,
               (size_t)crop.width * 3);
    st = ly_image_save(path, &crop, TILED_JPEG_QUALITY);
    ly_image_free(&crop);
    return st;
}

/* draw_tile_grid: each tile's rectangle in red, max(2, min(int(3 * longer /
 * 640), 10)) pixels wide, inside its edges as PIL draws an outline. */
static void outline(ly_image *im, const int t[4], int width)
{
    static const uint8_t red[3] = {255, 0, 0};
    for (int y = t[1]; y <= t[3] && y < im->height; y++)
        for (int x = t[0]; x <= t[2] && x < im->width; x++) {
            bool edge =
                x < t[0] + width || x > t[2] - width || y < t[1] + width || y > t[3] - width;
            if (edge) memcpy(im->pixels + ((size_t)y * (size_t)im->width + (size_t)x) * 3, red, 3);
        }
}

/* A float32 option as the decimal a user wrote (0.45, not 0.449999988...). */
static double as_written(float v)
{
    char text[32];
    return strtod(ly_shortest_decimal(v, true, text, sizeof text), NULL);
}

ly_status ly_results_save_tiled(const ly_results *results, const ly_image *image,
                                const ly_model *model, const char *source, const char *dir,
                                const char *ext)
{
    if (!results || !image || !image->pixels || !model || !dir || !ext)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_results_save_tiled: NULL argument");
    int tile_size;
    double overlap;
    float conf, iou;
    if (!ly_results_tiling(results, &tile_size, &overlap, &conf, &iou))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_results_save_tiled: this result did not tile (an image within "
                            "the input size, or tiling off)");
    size_t n_tiles = 0;
    ly_status st =
        ly_predict_tiles(image->width, image->height, tile_size, overlap, NULL, 0, &n_tiles);
    if (st != LY_OK) return st;
    int(*tiles)[4] = malloc(n_tiles * sizeof *tiles);
    size_t path_size = strlen(dir) + 64;
    char *path = malloc(path_size);
    ly_image copy = {0};
    if (!tiles || !path) {
        st = ly_set_error(LY_E_NO_MEMORY, "ly_results_save_tiled: out of memory");
        goto done;
    }
    ly_predict_tiles(image->width, image->height, tile_size, overlap, tiles, n_tiles, &n_tiles);
    snprintf(path, path_size, "%s/tiles", dir);
    char failed[LY_PATH_MAX];
    int err = ly_make_dirs(path, 0777, failed, sizeof failed);
    if (err) {
        st = ly_set_error(LY_E_IO, "ly_results_save_tiled: cannot create %s: %s", failed,
                          strerror(err));
        goto done;
    }
    for (size_t i = 0; st == LY_OK && i < n_tiles; i++) {
        snprintf(path, path_size, "%s/tiles/tile_%03zu.%s", dir, i, ext);
        st = save_crop(image, tiles[i], path);
    }
    if (st == LY_OK) st = ly_image_alloc(&copy, image->width, image->height);
    if (st == LY_OK) {
        memcpy(copy.pixels, image->pixels, (size_t)image->width * (size_t)image->height * 3);
        st = ly_image_annotate(&copy, results);
    }
    if (st == LY_OK) {
        snprintf(path, path_size, "%s/final_image.%s", dir, ext);
        st = ly_image_save(path, &copy, TILED_JPEG_QUALITY);
    }
    if (st == LY_OK) {
        memcpy(copy.pixels, image->pixels, (size_t)image->width * (size_t)image->height * 3);
        int longer = image->width > image->height ? image->width : image->height;
        int width = (int)(3 * (longer / 640.0));
        width = width < 2 ? 2 : width > 10 ? 10 : width;
        for (size_t i = 0; i < n_tiles; i++)
            outline(&copy, tiles[i], width);
        snprintf(path, path_size, "%s/grid_visualization.%s", dir, ext);
        st = ly_image_save(path, &copy, TILED_JPEG_QUALITY);
    }
    if (st == LY_OK) {
        ly_model_info info;
        ly_model_get_info(model, &info);
        size_t count = 0;
        ly_results_count(results, &count);
        cJSON *meta = cJSON_CreateObject();
        cJSON_AddStringToObject(meta, "model", info.family);
        cJSON_AddStringToObject(meta, "size", info.size ? info.size : "");
        cJSON_AddStringToObject(meta, "image_source", source ? source : "PIL/numpy input");
        cJSON *shape = cJSON_AddArrayToObject(meta, "original_size");
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(image->width));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(image->height));
        cJSON_AddNumberToObject(meta, "num_tiles", (double)n_tiles);
        cJSON_AddNumberToObject(meta, "tile_size", tile_size);
        cJSON_AddNumberToObject(meta, "overlap_ratio", overlap);
        cJSON_AddNumberToObject(meta, "num_detections", (double)count);
        cJSON_AddNumberToObject(meta, "conf", as_written(conf));
        cJSON_AddNumberToObject(meta, "iou", as_written(iou));
        char *text = cJSON_Print(meta);
        cJSON_Delete(meta);
        snprintf(path, path_size, "%s/metadata.json", dir);
        ly_atomic_file f;
        st = text ? ly_atomic_file_begin(&f, path, path)
                  : ly_set_error(LY_E_NO_MEMORY, "ly_results_save_tiled: out of memory");
        if (st == LY_OK) {
            ly_atomic_file_write(&f, text, strlen(text));
            ly_atomic_file_write(&f, "\n", 1);
            st = ly_atomic_file_commit(&f);
        }
        free(text);
    }
done:
    ly_image_free(&copy);
    free(tiles);
    free(path);
    return st;
}
