/* SPDX-License-Identifier: MIT */
/* Boxes and labels drawn with a built-in 5x7 font: no font library needed, and
 * the same pixels in every build. */
#include "models/annotate.h"
#include "io/image.h"
#include "libreyolo/image.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    BOX_THICKNESS = 2,
    GLYPH_W = 5,
    GLYPH_H = 7,
    GLYPH_FIRST = 32,
    GLYPH_LAST = 126,
    LABEL_PAD = 2 /* font pixels around the text */
};

/* Printable ASCII, 5 columns each, bit 0 at the top. */
static const uint8_t font5x7[GLYPH_LAST - GLYPH_FIRST + 1][GLYPH_W] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},
    {0x36, 0x49, 0x55, 0x22, 0x50}, {0x00, 0x05, 0x03, 0x00, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x14, 0x08, 0x3E, 0x08, 0x14}, {0x08, 0x08, 0x3E, 0x08, 0x08},
    {0x00, 0x50, 0x30, 0x00, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x60, 0x60, 0x00, 0x00},
    {0x20, 0x10, 0x08, 0x04, 0x02}, {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00},
    {0x42, 0x61, 0x51, 0x49, 0x46}, {0x21, 0x41, 0x45, 0x4B, 0x31}, {0x18, 0x14, 0x12, 0x7F, 0x10},
    {0x27, 0x45, 0x45, 0x45, 0x39}, {0x3C, 0x4A, 0x49, 0x49, 0x30}, {0x01, 0x71, 0x09, 0x05, 0x03},
    {0x36, 0x49, 0x49, 0x49, 0x36}, {0x06, 0x49, 0x49, 0x29, 0x1E}, {0x00, 0x36, 0x36, 0x00, 0x00},
    {0x00, 0x56, 0x36, 0x00, 0x00}, {0x08, 0x14, 0x22, 0x41, 0x00}, {0x14, 0x14, 0x14, 0x14, 0x14},
    {0x00, 0x41, 0x22, 0x14, 0x08}, {0x02, 0x01, 0x51, 0x09, 0x06}, {0x32, 0x49, 0x79, 0x41, 0x3E},
    {0x7E, 0x11, 0x11, 0x11, 0x7E}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},
    {0x7F, 0x41, 0x41, 0x22, 0x1C}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x09, 0x01},
    {0x3E, 0x41, 0x49, 0x49, 0x7A}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},
    {0x7F, 0x02, 0x0C, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},
    {0x46, 0x49, 0x49, 0x49, 0x31}, {0x01, 0x01, 0x7F, 0x01, 0x01}, {0x3F, 0x40, 0x40, 0x40, 0x3F},
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x3F, 0x40, 0x38, 0x40, 0x3F}, {0x63, 0x14, 0x08, 0x14, 0x63},
    {0x07, 0x08, 0x70, 0x08, 0x07}, {0x61, 0x51, 0x49, 0x45, 0x43}, {0x00, 0x7F, 0x41, 0x41, 0x00},
    {0x02, 0x04, 0x08, 0x10, 0x20}, {0x00, 0x41, 0x41, 0x7F, 0x00}, {0x04, 0x02, 0x01, 0x02, 0x04},
    {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x01, 0x02, 0x04, 0x00}, {0x20, 0x54, 0x54, 0x54, 0x78},
    {0x7F, 0x48, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x20}, {0x38, 0x44, 0x44, 0x48, 0x7F},
    {0x38, 0x54, 0x54, 0x54, 0x18}, {0x08, 0x7E, 0x09, 0x01, 0x02}, {0x0C, 0x52, 0x52, 0x52, 0x3E},
    {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00}, {0x20, 0x40, 0x44, 0x3D, 0x00},
    {0x7F, 0x10, 0x28, 0x44, 0x00}, {0x00, 0x41, 0x7F, 0x40, 0x00}, {0x7C, 0x04, 0x18, 0x04, 0x78},
    {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38}, {0x7C, 0x14, 0x14, 0x14, 0x08},
    {0x08, 0x14, 0x14, 0x18, 0x7C}, {0x7C, 0x08, 0x04, 0x04, 0x08}, {0x48, 0x54, 0x54, 0x54, 0x20},
    {0x04, 0x3F, 0x44, 0x40, 0x20}, {0x3C, 0x40, 0x40, 0x20, 0x7C}, {0x1C, 0x20, 0x40, 0x20, 0x1C},
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44}, {0x0C, 0x50, 0x50, 0x50, 0x3C},
    {0x44, 0x64, 0x54, 0x4C, 0x44}, {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x7F, 0x00, 0x00},
    {0x00, 0x41, 0x36, 0x08, 0x00}, {0x08, 0x04, 0x08, 0x10, 0x08},
};

/* Class colours (RGB), cycled by class id. */
static const uint8_t palette[20][3] = {
    {255, 56, 56},  {255, 157, 151}, {255, 112, 31}, {255, 178, 29},  {207, 210, 49},
    {72, 249, 10},  {146, 204, 23},  {61, 219, 134}, {26, 147, 52},   {0, 212, 187},
    {44, 153, 168}, {0, 194, 255},   {52, 69, 147},  {100, 115, 255}, {0, 24, 236},
    {132, 56, 255}, {82, 0, 133},    {203, 56, 255}, {255, 149, 200}, {255, 55, 199},
};

static void fill_rect(ly_image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > im->width) x1 = im->width;
    if (y1 > im->height) y1 = im->height;
    for (int y = y0; y < y1; y++) {
        uint8_t *p = im->pixels + ((size_t)y * (size_t)im->width + (size_t)x0) * 3;
        for (int x = x0; x < x1; x++, p += 3)
            memcpy(p, rgb, 3);
    }
}

/* Pixel bounds of a box: floor/ceil, limited to the image. */
static int to_pixel(float v, int limit)
{
    if (!(v > 0.f)) return 0;
    if (v >= (float)limit) return limit;
    return (int)v;
}

static void draw_text(ly_image *im, int x, int y, int scale, const char *text, const uint8_t rgb[3])
{
    for (const char *c = text; *c; c++, x += (GLYPH_W + 1) * scale) {
        int ch = (unsigned char)*c;
        if (ch < GLYPH_FIRST || ch > GLYPH_LAST) ch = '?';
        const uint8_t *glyph = font5x7[ch - GLYPH_FIRST];
        for (int col = 0; col < GLYPH_W; col++)
            for (int row = 0; row < GLYPH_H; row++)
                if (glyph[col] >> row & 1)
                    fill_rect(im, x + col * scale, y + row * scale, x + (col + 1) * scale,
                              y + (row + 1) * scale, rgb);
    }
}

/* A track's label is LibreYOLO's "#23 0.87"; a detection's "name 0.87". */
static void label_text(const ly_detection *d, const int64_t *id, char *label, size_t size)
{
    if (id)
        snprintf(label, size, "#%lld %.2f", (long long)*id, (double)d->conf);
    else if (d->name && *d->name)
        snprintf(label, size, "%s %.2f", d->name, (double)d->conf);
    else
        snprintf(label, size, "class %d %.2f", d->cls, (double)d->conf);
}

static void box_pixels(const ly_detection *d, int width, int height, int b[4])
{
    b[0] = to_pixel(d->xyxy[0], width);
    b[1] = to_pixel(d->xyxy[1], height);
    b[2] = to_pixel(ceilf(d->xyxy[2]), width);
    b[3] = to_pixel(ceilf(d->xyxy[3]), height);
}

static int font_scale(int width, int height)
{
    int shorter = width < height ? width : height;
    return shorter / 400 > 1 ? shorter / 400 : 1;
}

static bool overlaps(const ly_label_place *a, int x, int y, int w, int h)
{
    return a->drawn && x < a->x + a->w && a->x < x + w && y < a->y + a->h && a->y < y + h;
}

void ly_annotate_layout(int width, int height, const ly_detection *d, size_t n, ly_label_place *out)
{
    ly_annotate_layout_tracks(width, height, d, NULL, n, out);
}

void ly_annotate_layout_tracks(int width, int height, const ly_detection *d, const int64_t *ids,
                               size_t n, ly_label_place *out)
{
    for (size_t i = 0; i < n; i++) {
        ly_label_place *p = &out[i];
        *p = (ly_label_place){.drawn = false};
        char label[160];
        label_text(&d[i], ids ? &ids[i] : NULL, label, sizeof label);
        int b[4];
        box_pixels(&d[i], width, height, b);
        for (int scale = font_scale(width, height); scale >= 1 && !p->drawn; scale--) {
            int w = ((int)strlen(label) * (GLYPH_W + 1) - 1 + 2 * LABEL_PAD) * scale;
            int h = (GLYPH_H + 2 * LABEL_PAD) * scale;
            const int ys[4] = {b[1] - h, b[1], b[3], b[3] - h};
            const int xs[2] = {b[0], b[2] - w};
            for (int k = 0; k < 8 && !p->drawn; k++) {
                int x = xs[k % 2], y = ys[k / 2];
                if (x < 0 || y < 0 || x + w > width || y + h > height) continue;
                bool free_spot = true;
                for (size_t j = 0; j < i && free_spot; j++)
                    free_spot = !overlaps(&out[j], x, y, w, h);
                if (free_spot) *p = (ly_label_place){true, x, y, w, h, scale};
            }
        }
    }
}

/* A colour per class, or per track where there is an id (as LibreYOLO's). */
static const uint8_t *color_of(const ly_detection *d, const int64_t *id)
{
    return palette[id ? (uint64_t)*id % 20 : (unsigned)d->cls % 20];
}

static void draw_box(ly_image *im, const ly_detection *d, const int64_t *id)
{
    const uint8_t *color = color_of(d, id);
    int b[4];
    box_pixels(d, im->width, im->height, b);
    int t = BOX_THICKNESS;
    fill_rect(im, b[0], b[1], b[2], b[1] + t, color);
    fill_rect(im, b[0], b[3] - t, b[2], b[3], color);
    fill_rect(im, b[0], b[1], b[0] + t, b[3], color);
    fill_rect(im, b[2] - t, b[1], b[2], b[3], color);
}

static void draw_label(ly_image *im, const ly_detection *d, const int64_t *id,
                       const ly_label_place *p)
{
    if (!p->drawn) return;
    const uint8_t *color = color_of(d, id);
    char label[160];
    label_text(d, id, label, sizeof label);
    fill_rect(im, p->x, p->y, p->x + p->w, p->y + p->h, color);
    /* Dark text on light colours, white on dark ones (Rec. 601 luma). */
    int luma = (299 * color[0] + 587 * color[1] + 114 * color[2]) / 1000;
    static const uint8_t black[3] = {0, 0, 0}, white[3] = {255, 255, 255};
    draw_text(im, p->x + LABEL_PAD * p->scale, p->y + LABEL_PAD * p->scale, p->scale, label,
              luma > 150 ? black : white);
}

/* A classifier's top classes, one label per line from the top-left corner. */
static void draw_top(ly_image *im, const ly_class_prob *top, size_t n, int scale)
{
    int y = LABEL_PAD * scale, line = (GLYPH_H + 2 * LABEL_PAD) * scale;
    static const uint8_t black[3] = {0, 0, 0}, white[3] = {255, 255, 255};
    for (size_t i = 0; i < n; i++, y += line) {
        char label[160];
        if (top[i].name && *top[i].name)
            snprintf(label, sizeof label, "%s %.2f", top[i].name, (double)top[i].conf);
        else
            snprintf(label, sizeof label, "class %d %.2f", top[i].cls, (double)top[i].conf);
        int w = (int)strlen(label) * (GLYPH_W + 1) * scale - scale + 2 * LABEL_PAD * scale;
        fill_rect(im, 0, y - LABEL_PAD * scale, w, y - LABEL_PAD * scale + line, black);
        draw_text(im, LABEL_PAD * scale, y, scale, label, white);
    }
}

static bool drawable(const ly_image *image, const char *what)
{
    if (image && image->pixels && image->width > 0 && image->height > 0) return true;
    ly_set_error(LY_E_INVALID_ARGUMENT, "%s: the image is empty", what);
    return false;
}

static ly_status annotate(ly_image *image, const ly_detection *detections, const int64_t *ids,
                          size_t n, const char *what)
{
    if (!drawable(image, what)) return LY_E_INVALID_ARGUMENT;
    if (n && !detections)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %zu detections at NULL", what, n);
    ly_label_place *places = calloc(n ? n : 1, sizeof *places);
    if (!places) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    /* Boxes lowest score first (the best on top), then the labels, placed
     * best first where none covers another. */
    ly_annotate_layout_tracks(image->width, image->height, detections, ids, n, places);
    for (size_t i = n; i-- > 0;)
        draw_box(image, &detections[i], ids ? &ids[i] : NULL);
    for (size_t i = n; i-- > 0;)
        draw_label(image, &detections[i], ids ? &ids[i] : NULL, &places[i]);
    free(places);
    return LY_OK;
}

ly_status ly_image_annotate_detections(ly_image *image, const ly_detection *detections, size_t n)
{
    return annotate(image, detections, NULL, n, "ly_image_annotate_detections");
}

ly_status ly_image_annotate_tracks(ly_image *image, const ly_detection *detections,
                                   const int64_t *ids, size_t n)
{
    if (n && !ids)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_annotate_tracks: %zu ids at NULL", n);
    return annotate(image, detections, ids, n, "ly_image_annotate_tracks");
}

ly_status ly_image_annotate_classes(ly_image *image, const ly_class_prob *top, size_t n)
{
    if (!drawable(image, "ly_image_annotate_classes")) return LY_E_INVALID_ARGUMENT;
    if (n && !top)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_annotate_classes: %zu classes at NULL",
                            n);
    draw_top(image, top, n, font_scale(image->width, image->height));
    return LY_OK;
}

ly_status ly_image_annotate(ly_image *image, const ly_results *results)
{
    if (!drawable(image, "ly_image_annotate")) return LY_E_INVALID_ARGUMENT;
    if (!results) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_image_annotate: results is NULL");
    const char *task;
    ly_status st = ly_results_task(results, &task);
    if (st != LY_OK) return st;
    if (strcmp(task, "classify") == 0) {
        ly_class_prob top[5];
        size_t n;
        st = ly_results_top(results, 5, top, &n);
        return st != LY_OK ? st : ly_image_annotate_classes(image, top, n);
    }
    size_t n;
    st = ly_results_count(results, &n);
    if (st != LY_OK) return st;
    ly_detection *d = calloc(n ? n : 1, sizeof *d);
    if (!d) return ly_set_error(LY_E_NO_MEMORY, "ly_image_annotate: out of memory");
    for (size_t i = 0; i < n && st == LY_OK; i++)
        st = ly_results_get(results, i, &d[i]);
    if (st == LY_OK) st = ly_image_annotate_detections(image, d, n);
    free(d);
    return st;
}
