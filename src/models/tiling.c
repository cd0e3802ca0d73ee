/* SPDX-License-Identifier: MIT */
#include "models/tiling.h"

#include "core/core.h"
#include "models/nms.h"

#include <math.h>
#include <stdlib.h>

#define MAX_TILES 4096

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
