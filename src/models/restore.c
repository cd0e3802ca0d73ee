/* SPDX-License-Identifier: MIT */
/* The restore task (restore.h). */
#include "models/restore.h"

#include "core/core.h"
#include "libreyolo/image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch's padding of the bottom/right edge: reflect (p -> 2(n-1) - p) where
 * every pad is smaller than its side and no side is 1, else replicate. */
static bool reflects(int64_t h, int64_t w, int64_t hp, int64_t wp)
{
    return h > 1 && w > 1 && hp - h < h && wp - w < w;
}

static int64_t source_index(int64_t p, int64_t n, bool reflect)
{
    if (p < n) return p;
    return reflect ? 2 * (n - 1) - p : n - 1;
}

ly_status ly_restore_preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                                int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    int64_t ih = image->height, iw = image->width;
    if (h < ih || w < iw)
        return ly_set_error(LY_E_INTERNAL, "restore: input %lldx%lld for an image of %lldx%lld",
                            (long long)h, (long long)w, (long long)ih, (long long)iw);
    bool reflect = reflects(ih, iw, h, w), bgr = image->format == LY_PIXELS_BGR;
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *row = image->pixels + (size_t)source_index(y, ih, reflect) * image->stride;
        for (int64_t x = 0; x < w; x++) {
            const uint8_t *px = row + 3 * source_index(x, iw, reflect);
            for (int c = 0; c < 3; c++)
                input[(c * h + y) * w + x] = (float)px[bgr ? 2 - c : c] / 255.0f;
        }
    }
    return LY_OK;
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* torch: clamp(0, 1), * 255, round half to even, uint8 (NaN: 0). */
static uint8_t quantize(float v)
{
    if (!(v > 0.0f)) return 0;
    if (v > 1.0f) v = 1.0f;
    return (uint8_t)nearbyintf(v * 255.0f);
}

/* out rows [y0, y1) x columns [x0, x1) of the image (scaled pixels) from the
 * network's output [1, 3, oh, ow], whose pixel (0, 0) is the image's (oy, ox). */
static void put(uint8_t *image, int64_t image_w, const float *out, int64_t oh, int64_t ow,
                int64_t oy, int64_t ox, int64_t y0, int64_t y1, int64_t x0, int64_t x1)
{
    for (int64_t y = y0; y < y1; y++)
        for (int64_t x = x0; x < x1; x++)
            for (int c = 0; c < 3; c++)
                image[(y * image_w + x) * 3 + c] =
                    quantize(out[(c * oh + (y - oy)) * ow + (x - ox)]);
}

/* One network call on input [1, 3, h, w] the `fill` callback writes. */
typedef struct restore_call {
    const ly_model_desc *d;
    ly_engine_session *session;
    int threads;
    double *times;
} restore_call;

static ly_status run_once(restore_call *call, int64_t h, int64_t w,
                          ly_status (*fill)(void *ctx, float *input, int64_t h, int64_t w),
                          void *ctx, const float **out, int64_t *oh, int64_t *ow)
{
    const ly_engine *e = call->d->engine;
    float *room = NULL;
    double t0 = ly_now_ms();
    ly_status st = e->input_buffer(call->session, h, w, call->threads, &room);
    double t1 = ly_now_ms();
    if (st == LY_OK) st = fill(ctx, room, h, w);
    double t2 = ly_now_ms();
    ly_tensor input = {.data = room, .dtype = LY_F32, .ndim = 4, .shape = {1, 3, h, w}};
    if (st == LY_OK) st = e->run(call->session, &input, call->threads);
    ly_tensor views[LY_MODEL_MAX_OUTPUTS];
    const char *names[LY_MODEL_MAX_OUTPUTS];
    int n = 0;
    if (st == LY_OK) st = e->outputs(call->session, views, names, LY_MODEL_MAX_OUTPUTS, &n);
    int64_t scale = call->d->recipe->restore_scale;
    if (st == LY_OK &&
        (n < 1 || views[0].dtype != LY_F32 || views[0].ndim != 4 || views[0].shape[1] != 3 ||
         views[0].shape[2] != h * scale || views[0].shape[3] != w * scale))
        st = ly_set_error(LY_E_INTERNAL, "restore: the network's output is not [1, 3, %lld, %lld]",
                          (long long)(h * scale), (long long)(w * scale));
    if (st == LY_OK) {
        *out = views[0].data;
        *oh = views[0].shape[2];
        *ow = views[0].shape[3];
    }
    call->times[0] += t2 - t1;
    call->times[1] += (t1 - t0) + (ly_now_ms() - t2);
    return st;
}

typedef struct whole_fill {
    const ly_model_desc *d;
    const ly_image_view *image;
    ly_image *release;
} whole_fill;

static ly_status fill_whole(void *ctx, float *input, int64_t h, int64_t w)
{
    whole_fill *f = ctx;
    ly_prep prep;
    ly_status st = f->d->recipe->preprocess(f->d, f->image, h, w, input, &prep);
    if (f->release) ly_image_free(f->release); /* the network runs without the pixels */
    return st;
}

/* A tile's input: rows [y0, y0 + th) x columns [x0, x0 + tw) of the image
 * padded to ph x pw (as ly_restore_preprocess pads it), padded again to the
 * network's input as its check_image_size: both paddings read straight from
 * the 8-bit image, so no float copy of a large photo is held. */
typedef struct tile_fill {
    const ly_image_view *image;
    int64_t ph, pw;
    int64_t y0, x0, th, tw;
} tile_fill;

static ly_status fill_tile(void *ctx, float *input, int64_t h, int64_t w)
{
    const tile_fill *t = ctx;
    const ly_image_view *im = t->image;
    bool outer = reflects(im->height, im->width, t->ph, t->pw),
         inner = reflects(t->th, t->tw, h, w);
    bool bgr = im->format == LY_PIXELS_BGR;
    for (int64_t y = 0; y < h; y++) {
        int64_t sy = source_index(t->y0 + source_index(y, t->th, inner), im->height, outer);
        const uint8_t *row = im->pixels + (size_t)sy * im->stride;
        for (int64_t x = 0; x < w; x++) {
            int64_t sx = source_index(t->x0 + source_index(x, t->tw, inner), im->width, outer);
            for (int c = 0; c < 3; c++)
                input[(c * h + y) * w + x] = (float)row[3 * sx + (bgr ? 2 - c : c)] / 255.0f;
        }
    }
    return LY_OK;
}

/* The network's input for a box of h x w: the stride's next multiples, or a
 * fixed-size program's canvas (where the box must fit). */
static void input_size(const ly_model_desc *d, int64_t h, int64_t w, int64_t *ih, int64_t *iw)
{
    if (d->stride > 0) {
        *ih = round_up(h, d->stride), *iw = round_up(w, d->stride);
    } else {
        *ih = d->fixed_h, *iw = d->fixed_w;
    }
}

/* LibreYOLO's tiles of a ph x pw input, row-major: tile i's core and its
 * input box (the core grown by tile_pad, clipped), and the network's input
 * size for that box. */
typedef struct tile_grid {
    int64_t ph, pw, tile, pad, rows, cols;
} tile_grid;

typedef struct tile_box {
    int64_t cy0, cy1, cx0, cx1; /* the core */
    int64_t iy0, iy1, ix0, ix1; /* what the network sees */
    int64_t net_h, net_w;
} tile_box;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static tile_box tile_at(const tile_grid *g, int64_t i, const ly_model_desc *d)
{
    tile_box b;
    b.cy0 = i / g->cols * g->tile, b.cy1 = min64(b.cy0 + g->tile, g->ph);
    b.cx0 = i % g->cols * g->tile, b.cx1 = min64(b.cx0 + g->tile, g->pw);
    b.iy0 = max64(b.cy0 - g->pad, 0), b.iy1 = min64(b.cy1 + g->pad, g->ph);
    b.ix0 = max64(b.cx0 - g->pad, 0), b.ix1 = min64(b.cx1 + g->pad, g->pw);
    input_size(d, b.iy1 - b.iy0, b.ix1 - b.ix0, &b.net_h, &b.net_w);
    return b;
}

ly_status ly_restore_run(const ly_model_desc *d, int threads, const ly_image_view *image,
                         ly_image *release, int tile, int tile_pad, uint8_t **pixels,
                         double times_ms[3])
{
    int64_t scale = d->recipe->restore_scale, stride = d->stride > 0 ? d->stride : 1;
    int64_t h = image->height, w = image->width;
    int64_t ph = round_up(h, stride), pw = round_up(w, stride);
    int64_t out_h = h * scale, out_w = w * scale;
    times_ms[0] = times_ms[1] = times_ms[2] = 0;
    *pixels = NULL;
    if (d->stride == 0) {
        /* A program of one canvas: an image that fits is padded to it, a
         * larger one tiled so that a tile and its context fit. */
        int64_t room = (d->fixed_h < d->fixed_w ? d->fixed_h : d->fixed_w) - 2 * (int64_t)tile_pad;
        if (tile == 0 && (h > d->fixed_h || w > d->fixed_w)) {
            if (room < 1)
                return ly_set_error(LY_E_INVALID_ARGUMENT,
                                    "restore: tile_pad %d leaves no room for a tile on this "
                                    "program's %lldx%lld canvas",
                                    tile_pad, (long long)d->fixed_w, (long long)d->fixed_h);
            tile = (int)room;
            ly_warn_once("restore-canvas-tile",
                         "%s: a %lldx%lld image is larger than the program's %lldx%lld canvas: "
                         "restored tile by tile (tile=%d, tile_pad=%d)",
                         d->recipe->family, (long long)w, (long long)h, (long long)d->fixed_w,
                         (long long)d->fixed_h, tile, tile_pad);
        } else if (tile > 0 && tile > room) {
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "tile %d: with tile_pad %d a tile does not fit this program's "
                                "%lldx%lld canvas (at most tile %lld)",
                                tile, tile_pad, (long long)d->fixed_w, (long long)d->fixed_h,
                                (long long)(room > 0 ? room : 0));
        }
        ph = tile == 0 ? d->fixed_h : h, pw = tile == 0 ? d->fixed_w : w;
    }
    if (d->stride > 0 && tile == 0 && ph * pw > LY_RESTORE_UNTILED_MAX_PIXELS) {
        tile = LY_RESTORE_AUTO_TILE;
        ly_warn_once("restore-auto-tile",
                     "%s: a %lldx%lld image is restored tile by tile (tile=%d, tile_pad=%d) to "
                     "bound memory; the seams differ from LibreYOLO's untiled output: pass "
                     "tile and tile_pad to choose",
                     d->recipe->family, (long long)w, (long long)h, tile, tile_pad);
    }
    uint8_t *out = malloc((size_t)(out_h * out_w * 3));
    if (!out)
        return ly_set_error(LY_E_NO_MEMORY, "restore: out of memory for a %lldx%lld image",
                            (long long)out_w, (long long)out_h);
    restore_call call = {.d = d, .threads = threads, .times = times_ms};
    ly_status st = d->engine->acquire(d->engine_data, &call.session);
    if (st != LY_OK) {
        free(out);
        return st;
    }
    const float *y = NULL;
    int64_t oh = 0, ow = 0;
    if (tile == 0) {
        whole_fill f = {d, image, release};
        st = run_once(&call, ph, pw, fill_whole, &f, &y, &oh, &ow);
        double t = ly_now_ms();
        if (st == LY_OK) put(out, out_w, y, oh, ow, 0, 0, 0, out_h, 0, out_w);
        times_ms[2] += ly_now_ms() - t;
    } else {
        /* Tiles grouped by their input size (cores do not overlap, so the
         * order is free): each size's network is made and its memory laid
         * out once. */
        tile_grid g = {ph, pw, tile, tile_pad, (ph + tile - 1) / tile, (pw + tile - 1) / tile};
        int64_t total = g.rows * g.cols;
        bool *done = calloc((size_t)total, sizeof *done);
        if (!done) st = ly_set_error(LY_E_NO_MEMORY, "restore: out of memory");
        for (int64_t first = 0; st == LY_OK && first < total; first++) {
            if (done[first]) continue;
            tile_box want = tile_at(&g, first, d);
            for (int64_t i = first; st == LY_OK && i < total; i++) {
                tile_box b = tile_at(&g, i, d);
                if (done[i] || b.net_h != want.net_h || b.net_w != want.net_w) continue;
                done[i] = true;
                tile_fill f = {image, ph, pw, b.iy0, b.ix0, b.iy1 - b.iy0, b.ix1 - b.ix0};
                st = run_once(&call, b.net_h, b.net_w, fill_tile, &f, &y, &oh, &ow);
                double t = ly_now_ms();
                /* the core, inside the cropped image */
                int64_t y1 = b.cy1 * scale < out_h ? b.cy1 * scale : out_h;
                int64_t x1 = b.cx1 * scale < out_w ? b.cx1 * scale : out_w;
                if (st == LY_OK)
                    put(out, out_w, y, oh, ow, b.iy0 * scale, b.ix0 * scale, b.cy0 * scale, y1,
                        b.cx0 * scale, x1);
                times_ms[2] += ly_now_ms() - t;
            }
        }
        free(done);
        if (release) ly_image_free(release);
    }
    d->engine->release(d->engine_data, call.session);
    if (st != LY_OK) {
        free(out);
        return st;
    }
    *pixels = out;
    return LY_OK;
}
