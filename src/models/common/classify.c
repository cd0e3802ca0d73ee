/* SPDX-License-Identifier: MIT */
/* What LibreYOLO's image classifiers share (classify.h). */
#include "models/common/classify.h"

#include "core/core.h"
#include "models/pil_resize.h"

#include <math.h>
#include <stdlib.h>

ly_status ly_classify_eval_transform(const char *what, const ly_image_view *image, int size,
                                     double crop_pct, const float mean[3], const float std[3],
                                     float *input)
{
    int shorter = (int)floor(size / crop_pct);
    int iw = image->width, ih = image->height, rw, rh;
    if (iw <= ih) {
        rw = shorter;
        rh = (int)((double)shorter * ih / iw);
    } else {
        rh = shorter;
        rw = (int)((double)shorter * iw / ih);
    }
    uint8_t *rgb = malloc((size_t)rw * (size_t)rh * 3);
    if (!rgb) return ly_set_error(LY_E_NO_MEMORY, "%s preprocess: out of memory", what);
    ly_status st = ly_pil_resize(image, rw, rh, LY_PIL_BICUBIC, rgb);
    if (st == LY_OK) {
        int top = (int)nearbyint((rh - size) / 2.0), left = (int)nearbyint((rw - size) / 2.0);
        size_t plane = (size_t)size * size;
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++)
                for (int c = 0; c < 3; c++) {
                    float v = (float)rgb[((size_t)(y + top) * rw + (size_t)(x + left)) * 3 + c];
                    input[c * plane + (size_t)y * size + (size_t)x] =
                        (v / 255.0f - mean[c]) / std[c];
                }
    }
    free(rgb);
    return st;
}

void ly_classify_softmax(const float *logits, int64_t n, float *probs)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = logits[i] > m ? logits[i] : m;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(probs[i] = expf(logits[i] - m));
    for (int64_t i = 0; i < n; i++)
        probs[i] = (float)(probs[i] / sum);
}
