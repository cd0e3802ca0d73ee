/* SPDX-License-Identifier: MIT */
/* Class-wise NMS (nms.h). */
#include "models/nms.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torchvision switches to one NMS per class above 4000 coordinates on the CPU. */
#define COORDINATE_TRICK_MAX_BOXES 1000

static int by_score_desc(const void *a, const void *b)
{
    const ly_nms_candidate *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

void ly_nms_sort(ly_nms_candidate *c, size_t n)
{
    if (n > 1) qsort(c, n, sizeof *c, by_score_desc);
}

/* torchvision's nms over boxes[0..n) already in descending score order;
 * `boxes` is 4 floats per box. keep[i] is set to 1 for the survivors. */
static void nms_sorted(const float *boxes, size_t n, double iou, uint8_t *keep, float *areas)
{
    for (size_t i = 0; i < n; i++) {
        const float *b = boxes + 4 * i;
        areas[i] = (b[2] - b[0]) * (b[3] - b[1]);
        keep[i] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        const float *bi = boxes + 4 * i;
        for (size_t j = i + 1; j < n; j++) {
            if (!keep[j]) continue;
            const float *bj = boxes + 4 * j;
            float xx1 = fmaxf(bi[0], bj[0]), yy1 = fmaxf(bi[1], bj[1]);
            float xx2 = fminf(bi[2], bj[2]), yy2 = fminf(bi[3], bj[3]);
            float w = fmaxf(0.f, xx2 - xx1), h = fmaxf(0.f, yy2 - yy1);
            float inter = w * h;
            float ovr = inter / (areas[i] + areas[j] - inter);
            if ((double)ovr > iou) keep[j] = 0;
        }
    }
}

ly_status ly_nms_batched(const ly_nms_candidate *c, size_t n, double iou, uint8_t *keep,
                         const char *who)
{
    float *boxes = malloc((n ? n : 1) * 4 * sizeof *boxes);
    float *areas = malloc((n ? n : 1) * sizeof *areas);
    size_t *members = NULL;
    uint8_t *keep_class = NULL, *seen = NULL;
    ly_status st = LY_OK;
    if (!boxes || !areas) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
        goto done;
    }
    if (n <= COORDINATE_TRICK_MAX_BOXES) {
        float max_coordinate = -INFINITY;
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 4; k++)
                max_coordinate = fmaxf(max_coordinate, c[i].box[k]);
        for (size_t i = 0; i < n; i++) {
            float offset = (float)c[i].cls * (max_coordinate + 1.f);
            for (int k = 0; k < 4; k++)
                boxes[4 * i + k] = c[i].box[k] + offset;
        }
        nms_sorted(boxes, n, iou, keep, areas);
        goto done;
    }
    /* One NMS per class, over that class's boxes in the same (stable) order. */
    members = malloc(n * sizeof *members);
    keep_class = malloc(n);
    seen = calloc(n, 1);
    if (!members || !keep_class || !seen) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", who);
        goto done;
    }
    memset(keep, 0, n);
    for (size_t first = 0; first < n; first++) {
        if (seen[first]) continue;
        int cls = c[first].cls;
        size_t m = 0;
        for (size_t i = first; i < n; i++) {
            if (c[i].cls != cls) continue;
            seen[i] = 1;
            members[m] = i;
            memcpy(boxes + 4 * m, c[i].box, sizeof c[i].box);
            m++;
        }
        nms_sorted(boxes, m, iou, keep_class, areas);
        for (size_t i = 0; i < m; i++)
            keep[members[i]] = keep_class[i];
    }
done:
    free(boxes);
    free(areas);
    free(members);
    free(keep_class);
    free(seen);
    return st;
}
