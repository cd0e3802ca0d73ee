/* SPDX-License-Identifier: MIT */
/*
 * Running the XNNPACK delegate's ops (see xnn_internal.h): XNNPACK's own
 * operators (set up once per pointers and thread count), and our loops for
 * the nodes Debian's XNNPACK has no operator for, on row-strided values.
 */
#include "engines/executorch/xnnpack/xnn_internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- the process's thread pools ------------------------------------------------- */

#define MAX_POOL_THREADS 64

static struct {
    pthread_mutex_t lock;
    pthreadpool_t pools[MAX_POOL_THREADS + 1];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

pthreadpool_t ly_xd_pool(int threads)
{
    if (threads <= 1) return NULL;
    if (threads > MAX_POOL_THREADS) threads = MAX_POOL_THREADS;
    pthread_mutex_lock(&g.lock);
    if (!g.pools[threads]) g.pools[threads] = pthreadpool_create((size_t)threads);
    pthreadpool_t p = g.pools[threads];
    pthread_mutex_unlock(&g.lock);
    return p;
}

static void pool_run(void *pool, void (*task)(void *arg, size_t i), void *arg, size_t n)
{
    pthreadpool_parallelize_1d(pool, task, arg, n, 0);
}

bool ly_et_xnnpack_runner(int threads, ly_parallel_runner *runner)
{
    pthreadpool_t pool = ly_xd_pool(ly_threads_resolve(threads));
    if (!pool) return false;
    *runner = (ly_parallel_runner){pool_run, pool};
    return true;
}

/* ---- own kernels ------------------------------------------------------------------ */

/* Element strides of a row-strided value: the last dimension contiguous,
 * rows `ld` apart. */
static void strides_of(const xval *v, int64_t ld, int64_t *s)
{
    if (v->ndim == 0) return;
    s[v->ndim - 1] = 1;
    if (v->ndim >= 2) s[v->ndim - 2] = ld;
    for (int i = v->ndim - 3; i >= 0; i--)
        s[i] = s[i + 1] * v->dims[i + 1];
}

typedef struct nd_iter {
    int nd;
    int64_t dims[MAX_DIMS];
    int64_t idx[MAX_DIMS];
} nd_iter;

/* Advance over all but the last dimension; false when done. */
static bool next_row(nd_iter *it)
{
    for (int i = it->nd - 2; i >= 0; i--) {
        if (++it->idx[i] < it->dims[i]) return true;
        it->idx[i] = 0;
    }
    return false;
}

static float apply_unary(unary_fn f, float x, float alpha, float lo, float hi)
{
    switch (f) {
    case U_ABS:
        return fabsf(x);
    case U_NEG:
        return -x;
    case U_SQUARE:
        return x * x;
    case U_SQRT:
        return sqrtf(x);
    case U_RSQRT:
        return 1.0f / sqrtf(x);
    case U_FLOOR:
        return floorf(x);
    case U_CEIL:
        return ceilf(x);
    case U_EXP:
        return expf(x);
    case U_LOG:
        return logf(x);
    case U_TANH:
        return tanhf(x);
    case U_GELU:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case U_SIN:
        return sinf(x);
    case U_COS:
        return cosf(x);
    case U_HARDSWISH: {
        float t = x + 3.0f;
        t = t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t;
        return x * t / 6.0f;
    }
    case U_LEAKY:
        return x < 0.0f ? x * alpha : x;
    case U_ELU:
        return x < 0.0f ? alpha * expm1f(x) : x;
    case U_CLAMP:
        return x < lo ? lo : x > hi ? hi : x;
    case U_COPY:
        return x;
    }
    return x;
}

static float clampf(float x, float lo, float hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

typedef struct rows_job {
    const xop *o;
    const float *a, *b;
    float *y;
    int nd;
    int64_t dims[MAX_DIMS], sa[MAX_DIMS], sb[MAX_DIMS], sy[MAX_DIMS];
} rows_job;

static void binary_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows_job *j = ctx;
    int nd = j->nd;
    int64_t n = j->dims[nd - 1], rows_per[MAX_DIMS];
    /* row index -> multi-index over dims[0..nd-2] */
    int64_t count = 1;
    for (int i = nd - 2; i >= 0; i--) {
        rows_per[i] = count;
        count *= j->dims[i];
    }
    int op = j->o->binop;
    bool clamp = j->o->clamp;
    float lo = j->o->lo, hi = j->o->hi;
    int64_t sa = j->sa[nd - 1], sb = j->sb[nd - 1];
    for (int64_t r = begin; r < end; r++) {
        int64_t oa = 0, ob = 0, oy = 0, rem = r;
        for (int i = 0; i < nd - 1; i++) {
            int64_t k = rem / rows_per[i];
            rem %= rows_per[i];
            oa += k * j->sa[i], ob += k * j->sb[i], oy += k * j->sy[i];
        }
        const float *a = j->a + oa, *b = j->b + ob;
        float *y = j->y + oy;
#define LOOP(EXPR)                                                                                 \
    do {                                                                                           \
        if (sa == 1 && sb == 1)                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float x0 = a[i], x1 = b[i];                                                        \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float x0 = a[i * sa], x1 = b[i * sb];                                              \
                y[i] = (EXPR);                                                                     \
            }                                                                                      \
    } while (0)
        switch (op) {
        case LY_XNN_ADD:
            LOOP(x0 + x1);
            break;
        case LY_XNN_SUBTRACT:
            LOOP(x0 - x1);
            break;
        case LY_XNN_MULTIPLY:
            LOOP(x0 * x1);
            break;
        case LY_XNN_DIV:
            LOOP(x0 / x1);
            break;
        case LY_XNN_MINIMUM:
            LOOP(x0 < x1 ? x0 : x1);
            break;
        default:
            LOOP(x0 > x1 ? x0 : x1);
            break;
        }
#undef LOOP
        if (clamp)
            for (int64_t i = 0; i < n; i++)
                y[i] = clampf(y[i], lo, hi);
    }
}

static void unary_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows_job *j = ctx;
    int64_t n = j->dims[1];
    const xop *o = j->o;
    float alpha = o->alpha, lo = o->lo, hi = o->hi;
    for (int64_t r = begin; r < end; r++) {
        const float *a = j->a + r * j->sa[0];
        float *y = j->y + r * j->sy[0];
        /* The cheap functions get loops of their own, which vectorize. */
        switch (o->fn) {
        case U_COPY:
            memmove(y, a, (size_t)n * sizeof(float));
            break;
        case U_LEAKY:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] < 0.0f ? a[i] * alpha : a[i];
            break;
        case U_CLAMP:
            for (int64_t i = 0; i < n; i++)
                y[i] = clampf(a[i], lo, hi);
            break;
        case U_ABS:
            for (int64_t i = 0; i < n; i++)
                y[i] = fabsf(a[i]);
            break;
        case U_NEG:
            for (int64_t i = 0; i < n; i++)
                y[i] = -a[i];
            break;
        case U_SQUARE:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] * a[i];
            break;
        case U_HARDSWISH:
            for (int64_t i = 0; i < n; i++) {
                float t = clampf(a[i] + 3.0f, 0.0f, 6.0f);
                y[i] = a[i] * t / 6.0f;
            }
            break;
        default:
            for (int64_t i = 0; i < n; i++)
                y[i] = apply_unary(o->fn, a[i], alpha, lo, hi);
        }
        if (o->clamp && o->fn != U_CLAMP)
            for (int64_t i = 0; i < n; i++)
                y[i] = clampf(y[i], lo, hi);
    }
}

static int64_t grain_rows(int64_t row_len)
{
    int64_t g = 16384 / (row_len > 0 ? row_len : 1);
    return g > 0 ? g : 1;
}

typedef struct same_job {
    const xop *o;
    const float *a, *b;
    float *y;
    int64_t n, lda, ldb, ldy;
} same_job;

/* Operands of one shape: rows of n, each at its own stride. */
static void same_rows(void *ctx, int64_t begin, int64_t end)
{
    const same_job *j = ctx;
    int64_t n = j->n;
    for (int64_t r = begin; r < end; r++) {
        const float *a = j->a + r * j->lda, *b = j->b + r * j->ldb;
        float *y = j->y + r * j->ldy;
        switch (j->o->binop) {
        case LY_XNN_ADD:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] + b[i];
            break;
        case LY_XNN_SUBTRACT:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] - b[i];
            break;
        case LY_XNN_MULTIPLY:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] * b[i];
            break;
        case LY_XNN_DIV:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] / b[i];
            break;
        case LY_XNN_MINIMUM:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] < b[i] ? a[i] : b[i];
            break;
        default:
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] > b[i] ? a[i] : b[i];
            break;
        }
        if (j->o->clamp)
            for (int64_t i = 0; i < n; i++)
                y[i] = clampf(y[i], j->o->lo, j->o->hi);
    }
}

static void run_binary(const ly_et_xnnpack *d, const xop *o, float *const *ptr, int threads)
{
    const xval *a = &d->v[o->in[0]], *b = &d->v[o->in[1]], *y = &d->v[o->out];
    if (a->ndim == y->ndim && b->ndim == y->ndim && a->numel == y->numel && b->numel == y->numel &&
        a->last == y->last && b->last == y->last) {
        same_job j = {.o = o,
                      .a = ptr[0],
                      .b = ptr[1],
                      .y = ptr[2],
                      .n = y->last,
                      .lda = a->ld,
                      .ldb = b->ld,
                      .ldy = y->ld};
        int64_t rows = y->rows;
        if (a->ld == y->last && b->ld == y->last && y->ld == y->last) {
            /* all dense: one long row, split in chunks */
            j.n = y->numel;
            rows = 1;
            int64_t chunk = 16384;
            if (threads > 1 && y->numel > 2 * chunk) {
                j.n = chunk;
                j.lda = j.ldb = j.ldy = chunk;
                int64_t full = y->numel / chunk;
                ly_parallel_for(full, 1, threads, same_rows, &j);
                int64_t done = full * chunk;
                same_job tail = {.o = o,
                                 .a = ptr[0] + done,
                                 .b = ptr[1] + done,
                                 .y = ptr[2] + done,
                                 .n = y->numel - done};
                if (tail.n > 0) same_rows(&tail, 0, 1);
                return;
            }
        }
        ly_parallel_for(rows, grain_rows(j.n), threads, same_rows, &j);
        return;
    }
    rows_job j = {.o = o, .a = ptr[0], .b = ptr[1], .y = ptr[2], .nd = y->ndim};
    memcpy(j.dims, y->dims, sizeof j.dims);
    int64_t sa[MAX_DIMS], sb[MAX_DIMS];
    strides_of(a, a->ld, sa);
    strides_of(b, b->ld, sb);
    strides_of(y, y->ld, j.sy);
    for (int i = 0; i < y->ndim; i++) {
        int ia = i - (y->ndim - a->ndim), ib = i - (y->ndim - b->ndim);
        j.sa[i] = ia >= 0 && a->dims[ia] != 1 ? sa[ia] : 0;
        j.sb[i] = ib >= 0 && b->dims[ib] != 1 ? sb[ib] : 0;
    }
    if (y->ndim == 0) {
        j.nd = 1;
        j.dims[0] = 1;
        j.sa[0] = j.sb[0] = j.sy[0] = 1;
    }
    int64_t rows = y->rows;
    ly_parallel_for(rows, grain_rows(y->last), threads, binary_rows, &j);
}

static void run_unary(const xval *x, const xval *y, const xop *o, const float *in, float *out,
                      int threads)
{
    if (o->fn == U_GELU && x->ld == x->last && y->ld == y->last && !o->clamp) {
        /* dense: the library's gelu slot (its exact-erf providers serve it) */
        ly_tensor tx = {.dtype = LY_F32, .ndim = 1, .shape = {x->numel}, .data = (float *)in};
        ly_tensor ty = {.dtype = LY_F32, .ndim = 1, .shape = {x->numel}, .data = out};
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        call.in[0] = &tx;
        call.out[0] = &ty;
        call.threads = threads;
        if (ly_kernel_dispatch_op(LY_OP_GELU, &call) == LY_OK) return;
    }
    rows_job j = {.o = o, .a = in, .y = out, .nd = 2, .dims = {x->rows, x->last}};
    j.sa[0] = x->ld;
    j.sy[0] = y->ld;
    ly_parallel_for(x->rows, grain_rows(x->last), threads, unary_rows, &j);
}

/* y[..] = x[..] over `dims`, element strides sx / sy (last dimension
 * contiguous in both unless stated by the strides). */
static void copy_nd(const float *x, const int64_t *sx, float *y, const int64_t *sy,
                    const int64_t *dims, int nd)
{
    if (nd == 0) {
        *y = *x;
        return;
    }
    nd_iter it = {.nd = nd};
    memcpy(it.dims, dims, (size_t)nd * sizeof *dims);
    int64_t n = dims[nd - 1];
    do {
        int64_t ox = 0, oy = 0;
        for (int i = 0; i < nd - 1; i++)
            ox += it.idx[i] * sx[i], oy += it.idx[i] * sy[i];
        if (sx[nd - 1] == 1 && sy[nd - 1] == 1)
            memmove(y + oy, x + ox, (size_t)n * sizeof(float));
        else
            for (int64_t i = 0; i < n; i++)
                y[oy + i * sy[nd - 1]] = x[ox + i * sx[nd - 1]];
    } while (next_row(&it));
}

#define TILE 32

typedef struct t2d_job {
    const float *src;
    float *dst;
    int64_t rows, cols, src_rs, dst_rs, src_bs, dst_bs, row_tiles, col_tiles;
} t2d_job;

/* dst[c * dst_rs + r] = src[r * src_rs + c], tile by tile, per batch. */
static void t2d_tiles(void *ctx, int64_t begin, int64_t end)
{
    const t2d_job *j = ctx;
    int64_t per = j->row_tiles * j->col_tiles;
    for (int64_t t = begin; t < end; t++) {
        int64_t bidx = t / per, rt = t % per / j->col_tiles, ct = t % j->col_tiles;
        const float *s = j->src + bidx * j->src_bs;
        float *o = j->dst + bidx * j->dst_bs;
        int64_t r0 = rt * TILE, r1 = r0 + TILE < j->rows ? r0 + TILE : j->rows;
        int64_t c0 = ct * TILE, c1 = c0 + TILE < j->cols ? c0 + TILE : j->cols;
        for (int64_t c = c0; c < c1; c++)
            for (int64_t r = r0; r < r1; r++)
                o[c * j->dst_rs + r] = s[r * j->src_rs + c];
    }
}

static void run_transpose(const ly_et_xnnpack *d, const xop *o, const float *x, float *y,
                          int threads)
{
    const xval *xv = &d->v[o->in[0]], *yv = &d->v[o->out];
    int nd = xv->ndim;
    int64_t sx[MAX_DIMS], sy[MAX_DIMS];
    strides_of(xv, xv->ld, sx);
    strides_of(yv, yv->ld, sy);
    /* Batched 2-D transposes: perm = [0, k..nd-1, 1..k-1] moves block A =
     * dims 1..k-1 behind block B = dims k..nd-1 (NCHW <-> NHWC and the like).
     * B must be one contiguous run in the input (the last dimension alone, or
     * a dense input), A one run in the output (likewise). */
    int k = nd >= 3 && o->perm[0] == 0 ? o->perm[1] : 0;
    bool rotation = k >= 2;
    for (int i = 1; i < nd && rotation; i++) {
        int want = i <= nd - k ? k + i - 1 : i - (nd - k);
        if (o->perm[i] != want) rotation = false;
    }
    if (rotation && (k == nd - 1 || xv->ld == xv->last) && (k == 2 || yv->ld == yv->last)) {
        int64_t A = 1, B = 1;
        for (int i = 1; i < k; i++)
            A *= xv->dims[i];
        for (int i = k; i < nd; i++)
            B *= xv->dims[i];
        t2d_job j = {.src = x,
                     .dst = y,
                     .rows = A,
                     .cols = B,
                     .src_rs = k == nd - 1 ? xv->ld : B,
                     .dst_rs = k == 2 ? yv->ld : A,
                     .src_bs = sx[0],
                     .dst_bs = sy[0]};
        j.row_tiles = (A + TILE - 1) / TILE;
        j.col_tiles = (B + TILE - 1) / TILE;
        ly_parallel_for(xv->dims[0] * j.row_tiles * j.col_tiles, 4, threads, t2d_tiles, &j);
        return;
    }
    int64_t s[MAX_DIMS];
    for (int i = 0; i < nd; i++)
        s[i] = sx[o->perm[i]];
    copy_nd(x, s, y, sy, yv->dims, nd);
}

static void run_copy(const ly_et_xnnpack *d, const xop *o, const float *x, float *y)
{
    const xval *xv = &d->v[o->in[0]], *yv = &d->v[o->out];
    int64_t sx[MAX_DIMS], sy[MAX_DIMS];
    strides_of(xv, xv->ld, sx);
    strides_of(yv, yv->ld, sy);
    if (o->binop == 2) { /* slice */
        const float *src = x;
        for (int i = 0; i < xv->ndim; i++)
            src += o->offsets[i] * sx[i];
        copy_nd(src, sx, y, sy, yv->dims, yv->ndim);
        return;
    }
    /* reshape (or copy): element i of x in order -> element i of y in order */
    if (xv->ld == xv->last && yv->ld == yv->last) {
        memmove(y, x, (size_t)xv->numel * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < xv->numel; i++) {
        int64_t xr = i / xv->last, xc = i % xv->last, yr = i / yv->last, yc = i % yv->last;
        y[yr * yv->ld + yc] = x[xr * xv->ld + xc];
    }
}

static void run_concat(const ly_et_xnnpack *d, const xop *o, float *const *ptr)
{
    const xval *yv = &d->v[o->out];
    int64_t sy[MAX_DIMS];
    strides_of(yv, yv->ld, sy);
    int64_t at = 0;
    for (int k = 0; k < o->n_in; k++) {
        const xval *xv = &d->v[o->in[k]];
        if (!o->placed[k]) {
            int64_t sx[MAX_DIMS];
            strides_of(xv, xv->ld, sx);
            copy_nd(ptr[k], sx, ptr[o->n_in] + at * sy[o->axis], sy, xv->dims, xv->ndim);
        }
        at += xv->dims[o->axis];
    }
}

static void run_pad(const ly_et_xnnpack *d, const xop *o, const float *x, float *y)
{
    const xval *xv = &d->v[o->in[0]], *yv = &d->v[o->out];
    for (int64_t r = 0; r < yv->rows; r++)
        for (int64_t i = 0; i < yv->last; i++)
            y[r * yv->ld + i] = o->pad_value;
    int64_t sx[MAX_DIMS], sy[MAX_DIMS];
    strides_of(xv, xv->ld, sx);
    strides_of(yv, yv->ld, sy);
    float *dst = y;
    for (int i = 0; i < yv->ndim; i++)
        dst += o->offsets[i] * sy[i];
    copy_nd(x, sx, dst, sy, xv->dims, xv->ndim);
}

static ly_status run_bmm(const ly_et_xnnpack *d, const xop *o, float *const *ptr, int threads)
{
    const xval *a = &d->v[o->in[0]], *b = &d->v[o->in[1]], *y = &d->v[o->out];
    int nd = a->ndim;
    int64_t M = a->dims[nd - 2], K = a->dims[nd - 1], N = b->dims[nd - 1];
    int64_t batches = a->numel / (M * K);
    if (a->ld == K && b->ld == N && y->ld == N && !o->clamp) {
        /* dense rows: the library's matmul slot (its providers serve it) */
        ly_tensor ta = {.dtype = LY_F32, .ndim = 3, .shape = {batches, M, K}, .data = ptr[0]};
        ly_tensor tb = {.dtype = LY_F32, .ndim = 3, .shape = {batches, K, N}, .data = ptr[1]};
        ly_tensor ty = {.dtype = LY_F32, .ndim = 3, .shape = {batches, M, N}, .data = ptr[2]};
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        call.in[0] = &ta;
        call.in[1] = &tb;
        call.out[0] = &ty;
        call.threads = threads;
        return ly_kernel_dispatch_op(LY_OP_MATMUL, &call);
    }
    for (int64_t bt = 0; bt < batches; bt++) {
        const float *pa = ptr[0] + bt * M * a->ld, *pb = ptr[1] + bt * K * b->ld;
        float *py = ptr[2] + bt * M * y->ld;
        for (int64_t m = 0; m < M; m++) {
            float *row = py + m * y->ld;
            for (int64_t n = 0; n < N; n++)
                row[n] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float av = pa[m * a->ld + k];
                const float *brow = pb + k * b->ld;
                for (int64_t n = 0; n < N; n++)
                    row[n] += av * brow[n];
            }
            if (o->clamp)
                for (int64_t n = 0; n < N; n++)
                    row[n] = clampf(row[n], o->lo, o->hi);
        }
    }
    return LY_OK;
}

static void clamp_rows(const xval *y, float *p, float lo, float hi)
{
    for (int64_t r = 0; r < y->rows; r++)
        for (int64_t i = 0; i < y->last; i++)
            p[r * y->ld + i] = clampf(p[r * y->ld + i], lo, hi);
}

static ly_status run_xnn(ly_et_xnnpack *d, xop *o, const float *x, float *y, int threads)
{
    pthreadpool_t pool = ly_xd_pool(threads);
    if (o->set_in != x || o->set_out != y || o->set_threads != threads) {
        enum xnn_status s;
        switch (o->type) {
        case LY_XNN_CONV2D:
        case LY_XNN_DEPTHWISE_CONV2D:
            s = xnn_setup_convolution2d_nhwc_f32(o->op, (size_t)o->batch, (size_t)o->ih,
                                                 (size_t)o->iw, x, y, pool);
            break;
        case LY_XNN_MAX_POOLING_2D:
            s = xnn_setup_max_pooling2d_nhwc_f32(o->op, (size_t)o->batch, (size_t)o->ih,
                                                 (size_t)o->iw, x, y, pool);
            break;
        case LY_XNN_AVG_POOLING_2D:
            s = xnn_setup_average_pooling2d_nhwc_f32(o->op, (size_t)o->batch, (size_t)o->ih,
                                                     (size_t)o->iw, x, y, pool);
            break;
        case LY_XNN_GLOBAL_AVG_POOLING_2D: {
            const xval *xv = &d->v[o->in[0]];
            s = xnn_setup_global_average_pooling_nwc_f32(
                o->op, (size_t)xv->dims[0], (size_t)(xv->dims[1] * xv->dims[2]), x, y, pool);
            break;
        }
        case LY_XNN_FULLY_CONNECTED:
            s = xnn_setup_fully_connected_nc_f32(o->op, (size_t)o->batch, x, y, pool);
            break;
        case LY_XNN_SOFTMAX:
            s = xnn_setup_softmax_nc_f32(o->op, (size_t)o->batch, x, y, pool);
            break;
        case LY_XNN_SIGMOID:
            s = xnn_setup_sigmoid_nc_f32(o->op, (size_t)o->batch, x, y, pool);
            break;
        case LY_XNN_LEAKY_RELU:
            s = xnn_setup_leaky_relu_nc_f32(o->op, (size_t)o->batch, x, y, pool);
            break;
        case LY_XNN_STATIC_RESIZE_BILINEAR_2D:
            s = xnn_setup_resize_bilinear2d_nhwc_f32(o->op, (size_t)o->batch, (size_t)o->ih,
                                                     (size_t)o->iw, (size_t)o->oh, (size_t)o->ow, x,
                                                     y, pool);
            break;
        default:
            s = xnn_status_unsupported_parameter;
        }
        if (s != xnn_status_success)
            return ly_set_error(LY_E_PROVIDER, "%s: node %s: XNNPACK setup failed with status %d",
                                d->what, o->name, (int)s);
        o->set_in = x;
        o->set_out = y;
        o->set_threads = threads;
    }
    enum xnn_status s = xnn_run_operator(o->op, pool);
    if (s != xnn_status_success)
        return ly_set_error(LY_E_PROVIDER, "%s: node %s: xnn_run_operator failed with status %d",
                            d->what, o->name, (int)s);
    if (o->clamp) clamp_rows(&d->v[o->out], y, o->lo, o->hi);
    return LY_OK;
}

ly_status ly_xd_run(ly_et_xnnpack *d, xop *o, float *const *ptr, int n, int threads)
{
    ly_status st = LY_OK;
    switch (o->kind) {
    case K_XNN:
        st = run_xnn(d, o, ptr[0], ptr[n - 1], threads);
        break;
    case K_BINARY:
        run_binary(d, o, ptr, threads);
        break;
    case K_UNARY:
        run_unary(&d->v[o->in[0]], &d->v[o->out], o, ptr[0], ptr[1], threads);
        break;
    case K_TRANSPOSE:
        run_transpose(d, o, ptr[0], ptr[1], threads);
        break;
    case K_COPY:
        run_copy(d, o, ptr[0], ptr[1]);
        break;
    case K_CONCAT:
        run_concat(d, o, ptr);
        break;
    case K_PAD:
        run_pad(d, o, ptr[0], ptr[1]);
        break;
    case K_BMM:
        st = run_bmm(d, o, ptr, threads);
        break;
    case K_VIEW:
        break;
    }
    return st;
}
