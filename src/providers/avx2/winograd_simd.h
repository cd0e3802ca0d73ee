/* SPDX-License-Identifier: MIT */
/*
 * The vector part of conv2d_winograd_avx2.c, written once for both widths: the
 * file includes it twice, for 8-lane (AVX2) and 16-lane (AVX-512) registers,
 * each a channel block of its layout (NCHW8C, NCHW16C). Defined by the
 * includer: WG_VL (lanes), WG_ROWS (tiles a GEMM step), WG_V (the register
 * type), WG_ATTR (the functions' target), WG_NAME(x) (the names' suffix), and
 * the operations WG_LOAD, WG_STORE, WG_SET1, WG_ZERO, WG_ADD, WG_SUB,
 * WG_FMADD, WG_FNMADD, WG_FMSUB, WG_BCAST (from memory) and WG_ACTIVATE.
 */

/* B^T on six registers (one column or row of the tile). */
WG_ATTR static inline void WG_NAME(input_1d)(const WG_V d[6], WG_V t[6])
{
    WG_V half = WG_SET1(0.5f), two = WG_SET1(2.0f);
    WG_V three_halves = WG_SET1(1.5f), five_halves = WG_SET1(2.5f);
    WG_V odd = WG_SUB(d[3], d[1]), even = WG_SUB(d[4], d[2]);
    t[0] = WG_FMADD(three_halves, odd, WG_FNMADD(two, d[2], WG_ADD(d[0], d[4])));
    t[1] = WG_ADD(WG_FMADD(half, d[2], d[4]), WG_FMSUB(five_halves, d[3], d[1]));
    t[2] = WG_ADD(WG_FMADD(half, d[3], d[4]), WG_FNMADD(five_halves, d[2], d[1]));
    t[3] = WG_FMADD(two, odd, even);
    t[4] = WG_FNMADD(half, odd, even);
    t[5] = WG_FMADD(three_halves, even, WG_FNMADD(two, d[3], WG_ADD(d[1], d[5])));
}

/* A^T on six registers: four. */
WG_ATTR static inline void WG_NAME(output_1d)(const WG_V m[6], WG_V o[4])
{
    WG_V sum12 = WG_ADD(m[1], m[2]), diff12 = WG_SUB(m[1], m[2]);
    o[0] = WG_ADD(WG_ADD(m[0], sum12), WG_ADD(m[3], m[4]));
    o[1] = WG_FMADD(WG_SET1(0.5f), m[3], WG_FNMADD(WG_SET1(2.0f), m[4], diff12));
    o[2] = WG_FMADD(WG_SET1(0.25f), m[3], WG_FMADD(WG_SET1(4.0f), m[4], sum12));
    o[3] = WG_ADD(WG_FMADD(WG_SET1(0.125f), m[3], WG_FNMADD(WG_SET1(8.0f), m[4], diff12)), m[5]);
}

/* One tile's channel block (6x6 pixels from `src`, rows `row` floats apart,
 * pixels WG_VL) into v[point * stride]. */
WG_ATTR static inline void WG_NAME(transform_input)(const float *src, int64_t row, float *v,
                                                    int64_t stride)
{
    WG_V t[SPAN][SPAN]; /* [column of the input][row of B^T d] */
    for (int j = 0; j < SPAN; j++) {
        WG_V d[SPAN];
        for (int i = 0; i < SPAN; i++)
            d[i] = WG_LOAD(src + i * row + j * WG_VL);
        WG_NAME(input_1d)(d, t[j]);
    }
    for (int i = 0; i < SPAN; i++) {
        WG_V d[SPAN], r[SPAN];
        for (int j = 0; j < SPAN; j++)
            d[j] = t[j][i];
        WG_NAME(input_1d)(d, r);
        for (int j = 0; j < SPAN; j++)
            WG_STORE(v + (i * SPAN + j) * stride, r[j]);
    }
}

/* WG_ROWS tiles' transformed inputs (rows `vstride` apart) times a block of
 * 2 * WG_VL output channels' weights ([cin][2 * WG_VL]), into m (rows
 * `mstride` apart). `next`, where not NULL, is as much of the weights read
 * next, fetched into the cache meanwhile. */
WG_ATTR static inline void WG_NAME(gemm_wide)(const float *v, int64_t vstride, const float *u,
                                              int64_t cin, float *m, int64_t mstride,
                                              const float *next)
{
    WG_V lo[WG_ROWS], hi[WG_ROWS];
#pragma GCC unroll 12
    for (int r = 0; r < WG_ROWS; r++)
        lo[r] = WG_ZERO(), hi[r] = WG_ZERO();
    for (int64_t ci = 0; ci < cin; ci++, u += 2 * WG_VL) {
        if (next) {
            for (int line = 0; line < 2 * WG_VL; line += 16)
                _mm_prefetch((const char *)(next + ci * 2 * WG_VL + line), _MM_HINT_T0);
        }
        WG_V w0 = WG_LOAD(u), w1 = WG_LOAD(u + WG_VL);
#pragma GCC unroll 12
        for (int r = 0; r < WG_ROWS; r++) {
            WG_V b = WG_BCAST(v + r * vstride + ci);
            lo[r] = WG_FMADD(b, w0, lo[r]);
            hi[r] = WG_FMADD(b, w1, hi[r]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < WG_ROWS; r++) {
        WG_STORE(m + r * mstride, lo[r]);
        WG_STORE(m + r * mstride + WG_VL, hi[r]);
    }
}

/* The same for a last block of WG_VL output channels ([cin][WG_VL]). */
WG_ATTR static inline void WG_NAME(gemm_narrow)(const float *v, int64_t vstride, const float *u,
                                                int64_t cin, float *m, int64_t mstride)
{
    WG_V acc[WG_ROWS];
#pragma GCC unroll 12
    for (int r = 0; r < WG_ROWS; r++)
        acc[r] = WG_ZERO();
    for (int64_t ci = 0; ci < cin; ci++, u += WG_VL) {
        WG_V w = WG_LOAD(u);
#pragma GCC unroll 12
        for (int r = 0; r < WG_ROWS; r++)
            acc[r] = WG_FMADD(WG_BCAST(v + r * vstride + ci), w, acc[r]);
    }
#pragma GCC unroll 12
    for (int r = 0; r < WG_ROWS; r++)
        WG_STORE(m + r * mstride, acc[r]);
}

/* Tiles [first, first + count) of one image: v and m are [chunk][POINTS][cin or cout]. */
WG_ATTR static void WG_NAME(run_chunk)(const wino_run *run, int64_t first, int64_t count, float *v,
                                       float *m)
{
    const wino_state *s = run->s;
    int64_t cin = s->cin, cout = s->cout, plane_in = s->h * s->w * WG_VL;
    int64_t groups = (count + WG_ROWS - 1) / WG_ROWS;
    float edge[SPAN * SPAN * WG_VL];
    /* a channel block at a time: the tiles along a row read each input row in order */
    for (int64_t cb = 0; cb < cin / WG_VL; cb++) {
        const float *plane = run->x + cb * plane_in;
        for (int64_t t = 0; t < count; t++) {
            int64_t ty = (first + t) / s->tiles_w, tx = (first + t) % s->tiles_w;
            int64_t y0 = ty * TILE - 1, x0 = tx * TILE - 1;
            float *dst = v + t * POINTS * cin + cb * WG_VL;
            if (y0 >= 0 && x0 >= 0 && y0 + SPAN <= s->h && x0 + SPAN <= s->w) {
                WG_NAME(transform_input)(plane + (y0 * s->w + x0) * WG_VL, s->w * WG_VL, dst, cin);
                continue;
            }
            memset(edge, 0, sizeof edge);
            for (int64_t i = 0; i < SPAN; i++) {
                int64_t iy = y0 + i;
                if (iy < 0 || iy >= s->h) continue;
                for (int64_t j = 0; j < SPAN; j++) {
                    int64_t ix = x0 + j;
                    if (ix >= 0 && ix < s->w)
                        memcpy(edge + (i * SPAN + j) * WG_VL, plane + (iy * s->w + ix) * WG_VL,
                               WG_VL * sizeof(float));
                }
            }
            WG_NAME(transform_input)(edge, SPAN * WG_VL, dst, cin);
        }
    }
    /* the last group's missing tiles: zeros, computed and not stored */
    memset(v + count * POINTS * cin, 0, (size_t)((groups * WG_ROWS - count) * POINTS * cin) * 4);

    for (int64_t p = 0; p < POINTS; p++) {
        const float *u = run->u + p * cin * cout;
        for (int64_t o = 0; o < cout; o += 2 * WG_VL) {
            bool wide = o + 2 * WG_VL <= cout;
            for (int64_t g = 0; g < groups; g++) {
                const float *vg = v + (g * WG_ROWS * POINTS + p) * cin;
                float *mg = m + (g * WG_ROWS * POINTS + p) * cout + o;
                /* The first group of tiles fetches the next block of
                 * weights while it multiplies: they wait in L2 or memory, and
                 * a chunk's few groups (one or two at 64 channels; three on a
                 * 24x24 map) left that wait unhidden. In-process pairs, 1
                 * thread, 2-core AVX-512 Xeon: NanoDet-g 0.89-0.91x the
                 * time, RT-DETR-r18 0.96x, LibreYOLO9t 0.97-0.98x (its int8
                 * model's float head too: 0.97x), RF-DETR-n 0.99x (its
                 * projector's 128->128 on 24x24 0.79 -> 0.66 ms, weights
                 * from memory). Two or four blocks ahead: no better. */
                const float *next = g == 0 && (u - run->u) + 4 * WG_VL * cin <= POINTS * cin * cout
                                        ? u + 2 * WG_VL * cin
                                        : NULL;
                if (wide)
                    WG_NAME(gemm_wide)(vg, POINTS * cin, u, cin, mg, POINTS * cout, next);
                else
                    WG_NAME(gemm_narrow)(vg, POINTS * cin, u, cin, mg, POINTS * cout);
            }
            u += (wide ? 2 * WG_VL : WG_VL) * cin;
        }
    }

    int64_t plane_out = s->h * s->w * WG_VL;
    /* a block of output channels at a time: the tiles along a row write each output row in order */
    for (int64_t b = 0; b < s->cout / WG_VL; b++) {
        WG_V bias = WG_LOAD(run->bias + b * WG_VL);
        for (int64_t t = 0; t < count; t++) {
            int64_t ty = (first + t) / s->tiles_w, tx = (first + t) % s->tiles_w;
            int64_t rows = s->h - ty * TILE < TILE ? s->h - ty * TILE : TILE;
            int64_t cols = s->w - tx * TILE < TILE ? s->w - tx * TILE : TILE;
            const float *mt = m + t * POINTS * cout + b * WG_VL;
            WG_V half[TILE][SPAN]; /* [row of A^T m][column] */
            for (int j = 0; j < SPAN; j++) {
                WG_V col[SPAN], o[TILE];
                for (int i = 0; i < SPAN; i++)
                    col[i] = WG_LOAD(mt + (i * SPAN + j) * cout);
                WG_NAME(output_1d)(col, o);
                for (int i = 0; i < TILE; i++)
                    half[i][j] = o[i];
            }
            size_t base = (size_t)(b * plane_out + ((ty * TILE) * s->w + tx * TILE) * WG_VL);
            for (int64_t i = 0; i < rows; i++) {
                WG_V o[TILE];
                WG_NAME(output_1d)(half[i], o);
                for (int64_t j = 0; j < cols; j++) {
                    size_t at = base + (size_t)((i * s->w + j) * WG_VL);
                    WG_V out = WG_ACTIVATE(WG_ADD(o[j], bias), s->activation, s->alpha);
                    if (run->residual) out = WG_ADD(out, WG_LOAD(run->residual + at));
                    WG_STORE(run->y + at, out);
                }
            }
        }
    }
}
