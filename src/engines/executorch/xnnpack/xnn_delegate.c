/* SPDX-License-Identifier: MIT */
/*
 * ExecuTorch's XnnpackBackend on the XNNPACK Debian ships (2022 operator API).
 *
 * That XNNPACK predates several subgraph nodes ExecuTorch serializes (static
 * transpose, slice, concatenate, copy, exp, ...), and its subgraph API cannot
 * express strided views. So the XNNGraph is rebuilt here as XNNPACK
 * operators where XNNPACK has them (convolution, depthwise convolution,
 * pooling, fully-connected, softmax, sigmoid, bilinear resize), run on one
 * pthreadpool, and our own loops for the rest; XNNPACK's own subgraph
 * runtime does the same operator-per-node mapping internally.
 *
 * Memory: activations live in one arena planned by live range. Values are
 * rows of their last dimension, `ld` floats apart, so that
 *  - a concatenation on the last axis costs nothing: its inputs are written
 *    straight into their channel range of its output (XNNPACK operators take
 *    pixel strides);
 *  - a slice on the last axis is a view;
 *  - a reshape of a dense value is a view.
 * Everything else reads and writes row-strided data directly.
 *
 * The blob is validated by the pte layer (ly_xnn_decode); what XNNPACK would
 * refuse later (shapes that do not fit the node, non-constant weights, other
 * datatypes) is refused here at init with the node named, so execution never
 * sees an inconsistent graph.
 */
#include "engines/executorch/et_runtime.h"

#include "core/core.h"

#include <math.h>
#include <pthread.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xnnpack.h>

#define MAX_DIMS XNN_MAX_TENSOR_DIMS
#define MAX_POOL_THREADS 64
#define NONE LY_XNN_INVALID_ID
#define MAX_ELEMENTS ((int64_t)1 << 34)

bool ly_et_xnnpack_available(void)
{
    return true;
}

/* ---- process-wide XNNPACK state ----------------------------------------------- */

static struct {
    pthread_once_t once;
    enum xnn_status init;
    pthread_mutex_t lock;
    pthreadpool_t pools[MAX_POOL_THREADS + 1];
} g = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void init_once(void)
{
    g.init = xnn_initialize(NULL);
}

static pthreadpool_t pool_for(int threads)
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
    pthreadpool_t pool = pool_for(ly_threads_resolve(threads));
    if (!pool) return false;
    *runner = (ly_parallel_runner){pool_run, pool};
    return true;
}

/* ---- the executor's model ---------------------------------------------------- */

enum { V_INTERNAL, V_EXT_IN, V_EXT_OUT, V_CONST };

typedef struct xval {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t numel, rows, last; /* rows = numel / last */
    int kind;
    uint32_t ext;
    const float *cdata; /* constants */
    int producer;       /* op index, -1 none */
    /* storage: a view of `parent` at float `offset` (parent == self: own) */
    int parent;
    int64_t offset;
    int64_t ld;          /* resolved: floats between rows */
    int root;            /* resolved */
    int64_t root_off;    /* resolved: floats from the root's base */
    bool dense_view;     /* a reshape of a dense value: rows of its own shape */
    int first, last_use; /* roots: live range over ops */
    size_t arena_off;
} xval;

typedef enum opkind {
    K_XNN,       /* an XNNPACK operator */
    K_BINARY,    /* add, sub, mul, div, min, max (numpy broadcasting) */
    K_UNARY,     /* elementwise of one input */
    K_TRANSPOSE, /* static transpose */
    K_COPY,      /* copy / slice copy / reshape copy / convert */
    K_CONCAT,    /* copies of the inputs that are not placed in the output */
    K_PAD,       /* constant pad */
    K_BMM,       /* batch matrix multiply */
    K_VIEW       /* nothing to do (slice, reshape or concat done by placement) */
} opkind;

typedef enum unary_fn {
    U_ABS,
    U_NEG,
    U_SQUARE,
    U_SQRT,
    U_RSQRT,
    U_FLOOR,
    U_CEIL,
    U_EXP,
    U_LOG,
    U_TANH,
    U_GELU,
    U_SIN,
    U_COS,
    U_HARDSWISH,
    U_LEAKY,
    U_ELU,
    U_CLAMP,
    U_COPY
} unary_fn;

typedef struct xop {
    ly_xnn_node_type type;
    const char *name;
    opkind kind;
    int in[5], n_in, out;
    /* clamp fused into the node (output_min_max), applied where the op has no
     * native clamp */
    bool clamp;
    float lo, hi;
    /* XNNPACK */
    xnn_operator_t op;
    int64_t batch, ih, iw, oh, ow; /* setup sizes */
    const void *set_in, *set_out;
    int set_threads;
    /* own ops */
    int binop;
    unary_fn fn;
    float alpha;
    int perm[MAX_DIMS];
    int64_t offsets[MAX_DIMS]; /* slice / pad pre */
    int axis;                  /* concat */
    bool placed[5];            /* concat input already in place */
    float pad_value;
} xop;

struct ly_et_xnnpack {
    const char *what;
    xval *v;
    size_t n_v;
    xop *ops;
    size_t n_ops;
    uint32_t num_externs;
    int *ext_value; /* external id -> value */
    float *arena;
    size_t arena_bytes;
    pthreadpool_t pool;
};

static ly_status fail(const ly_et_xnnpack *d, const xop *o, const char *fmt, ...) LY_PRINTF(3, 4);
static ly_status fail(const ly_et_xnnpack *d, const xop *o, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o) return ly_set_error(LY_E_FORMAT, "%s: node %s: %s", d->what, o->name, msg);
    return ly_set_error(LY_E_FORMAT, "%s: %s", d->what, msg);
}

static bool dims_equal(const xval *a, int nd, const int64_t *dims)
{
    if (a->ndim != nd) return false;
    for (int i = 0; i < nd; i++)
        if (a->dims[i] != dims[i]) return false;
    return true;
}

static void dims_text(const xval *v, char *out, size_t size)
{
    size_t k = (size_t)snprintf(out, size, "[");
    for (int i = 0; i < v->ndim && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)v->dims[i]);
    if (k < size) snprintf(out + k, size - k, "]");
}

/* ---- values --------------------------------------------------------------------- */

static ly_status load_values(ly_et_xnnpack *d, const ly_pte_program *p, const ly_xnn_graph *xg)
{
    d->n_v = xg->n_xvalues;
    d->v = calloc(d->n_v ? d->n_v : 1, sizeof *d->v);
    d->num_externs = xg->num_externs;
    d->ext_value = calloc(xg->num_externs ? xg->num_externs : 1, sizeof *d->ext_value);
    if (!d->v || !d->ext_value) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    for (uint32_t i = 0; i < xg->num_externs; i++)
        d->ext_value[i] = -1;
    for (size_t i = 0; i < xg->n_xvalues; i++) {
        const ly_xnn_value *src = &xg->xvalues[i];
        const ly_xnn_tensor_value *t = &src->tensor;
        xval *v = &d->v[i];
        v->producer = -1;
        v->parent = (int)i;
        if (src->type != LY_XNN_TENSOR_VALUE || t->datatype != LY_XNN_DT_FP32)
            return fail(d, NULL,
                        "value %zu: only fp32 tensors are supported (quantized values and other "
                        "datatypes are not)",
                        i);
        if (t->num_dims > MAX_DIMS)
            return fail(d, NULL, "value %zu has %u dimensions, at most %d are supported", i,
                        t->num_dims, MAX_DIMS);
        v->ndim = (int)t->num_dims;
        v->numel = 1;
        for (int k = 0; k < v->ndim; k++) {
            v->dims[k] = t->dims[k];
            if (t->dims[k] == 0 || v->numel > MAX_ELEMENTS / (int64_t)t->dims[k])
                return fail(d, NULL, "value %zu: dimension %d is %u", i, k, t->dims[k]);
            v->numel *= t->dims[k];
        }
        v->last = v->ndim ? v->dims[v->ndim - 1] : 1;
        v->rows = v->numel / v->last;
        v->ld = v->last;
        bool in = t->flags & LY_XNN_FLAG_EXTERNAL_INPUT,
             out = t->flags & LY_XNN_FLAG_EXTERNAL_OUTPUT;
        if (in && out) return fail(d, NULL, "value %zu is both an external input and output", i);
        if (in || out) {
            if (t->external_id >= xg->num_externs || d->ext_value[t->external_id] >= 0)
                return fail(d, NULL, "value %zu: external id %u is out of range or repeated", i,
                            t->external_id);
            if (t->constant_buffer_idx != 0)
                return fail(d, NULL, "value %zu is external and constant", i);
            d->ext_value[t->external_id] = (int)i;
            v->kind = in ? V_EXT_IN : V_EXT_OUT;
            v->ext = t->external_id;
        } else if (t->constant_buffer_idx != 0) {
            const ly_xnn_constant_data *c = &xg->constant_data[t->constant_buffer_idx];
            ly_pte_bytes bytes = {0};
            if (c->named_key) {
                ly_status st = ly_pte_named_data_find(p, c->named_key, &bytes);
                if (st != LY_OK) return ly_error_prefix(st, d->what);
            } else {
                if (c->offset > xg->constant_area.size ||
                    c->size > xg->constant_area.size - c->offset)
                    return fail(d, NULL, "value %zu: constant data outside the blob", i);
                bytes.data = xg->constant_area.data + c->offset;
                bytes.size = (size_t)c->size;
            }
            if (bytes.size < (uint64_t)v->numel * sizeof(float))
                return fail(d, NULL, "value %zu: constant holds %zu bytes, its dims need %lld", i,
                            bytes.size, (long long)(v->numel * 4));
            if ((uintptr_t)bytes.data % sizeof(float) != 0)
                return fail(d, NULL, "value %zu: constant data is not 4-byte aligned", i);
            v->kind = V_CONST;
            v->cdata = (const float *)(const void *)bytes.data;
        } else {
            v->kind = V_INTERNAL;
        }
    }
    for (uint32_t i = 0; i < xg->num_externs; i++)
        if (d->ext_value[i] < 0) return fail(d, NULL, "external id %u has no value", i);
    return LY_OK;
}

/* ---- nodes -> ops --------------------------------------------------------------- */

static ly_status check_id(const ly_et_xnnpack *d, const xop *o, uint32_t id, const char *role)
{
    if (id >= d->n_v) return fail(d, o, "%s id %u is not a value", role, id);
    return LY_OK;
}

/* An input must exist when the op runs: an external input, a constant, or the
 * output of an earlier op. */
static ly_status use(ly_et_xnnpack *d, xop *o, uint32_t id, const char *role)
{
    ly_status st = check_id(d, o, id, role);
    if (st != LY_OK) return st;
    const xval *v = &d->v[id];
    if (v->kind == V_INTERNAL || v->kind == V_EXT_OUT) {
        if (v->producer < 0)
            return fail(d, o, "%s (value %u) is read before any node writes it", role, id);
    }
    if (o->n_in == 5) return fail(d, o, "too many inputs");
    o->in[o->n_in++] = (int)id;
    return LY_OK;
}

static ly_status define(ly_et_xnnpack *d, xop *o, uint32_t id, int nd, const int64_t *dims)
{
    ly_status st = check_id(d, o, id, "output");
    if (st != LY_OK) return st;
    xval *v = &d->v[id];
    if (v->kind == V_EXT_IN || v->kind == V_CONST)
        return fail(d, o, "output value %u is an input or a constant", id);
    if (v->producer >= 0) return fail(d, o, "value %u is written twice", id);
    if (dims && !dims_equal(v, nd, dims)) {
        char got[96], want[96];
        dims_text(v, got, sizeof got);
        xval tmp = {.ndim = nd};
        memcpy(tmp.dims, dims, (size_t)nd * sizeof *dims);
        dims_text(&tmp, want, sizeof want);
        return fail(d, o, "output value %u has dims %s, the node computes %s", id, got, want);
    }
    v->producer = (int)(o - d->ops);
    o->out = (int)id;
    return LY_OK;
}

static int64_t conv_out(int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil)
{
    int64_t span = dil * (k - 1) + 1;
    if (in + pad < span) return 0;
    return (in + pad - span) / stride + 1;
}

static ly_status xnn_failed(const ly_et_xnnpack *d, const xop *o, const char *call,
                            enum xnn_status s)
{
    return ly_set_error(s == xnn_status_out_of_memory ? LY_E_NO_MEMORY : LY_E_FORMAT,
                        "%s: node %s: %s failed with status %d (parameters XNNPACK refuses)",
                        d->what, o->name, call, (int)s);
}

static ly_status make_conv(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    bool dw = n->type == LY_XNN_DEPTHWISE_CONV2D;
    const __typeof__(n->u.conv) *c = &n->u.conv;
    ly_status st = use(d, o, c->input1_id, "input");
    if (st == LY_OK) st = check_id(d, o, c->filter_id, "filter");
    if (st == LY_OK && c->bias_id != NONE) st = check_id(d, o, c->bias_id, "bias");
    if (st != LY_OK) return st;
    const xval *x = &d->v[c->input1_id], *f = &d->v[c->filter_id];
    const xval *b = c->bias_id != NONE ? &d->v[c->bias_id] : NULL;
    if (x->ndim != 4) return fail(d, o, "input must be 4-D NHWC");
    if (c->groups == 0 || c->group_input_channels == 0 || c->group_output_channels == 0 ||
        c->kernel_height == 0 || c->kernel_width == 0 || c->subsampling_height == 0 ||
        c->subsampling_width == 0 || c->dilation_height == 0 || c->dilation_width == 0 ||
        c->adjustment_height || c->adjustment_width)
        return fail(d, o, "zero groups, channels, kernel, stride or dilation");
    int64_t groups = c->groups, gic = c->group_input_channels, goc = c->group_output_channels;
    int64_t O = groups * goc, KH = c->kernel_height, KW = c->kernel_width;
    if (x->dims[3] != groups * gic)
        return fail(d, o, "input has %lld channels, groups x group_input_channels = %lld",
                    (long long)x->dims[3], (long long)(groups * gic));
    if (f->kind != V_CONST || (b && b->kind != V_CONST))
        return fail(d, o, "filter and bias must be constants");
    int64_t want_f[4] = {dw ? 1 : O, KH, KW, dw ? O : gic};
    if (dw && gic != 1) return fail(d, o, "depthwise convolution needs group_input_channels 1");
    if (!dims_equal(f, 4, want_f)) return fail(d, o, "filter dims do not fit the convolution");
    if (b && (b->ndim != 1 || b->dims[0] != O))
        return fail(d, o, "bias must be [%lld]", (long long)O);
    int64_t ho = conv_out(x->dims[1], (int64_t)c->padding_top + c->padding_bottom, KH,
                          c->subsampling_height, c->dilation_height);
    int64_t wo = conv_out(x->dims[2], (int64_t)c->padding_left + c->padding_right, KW,
                          c->subsampling_width, c->dilation_width);
    if (ho <= 0 || wo <= 0) return fail(d, o, "the kernel does not fit the padded input");
    int64_t od[4] = {x->dims[0], ho, wo, O};
    st = define(d, o, c->output_id, 4, od);
    if (st != LY_OK) return st;
    o->kind = K_XNN;
    o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
    return LY_OK;
}

/* Create the conv operator once strides are known (after placement). */
static ly_status create_conv(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.conv) *c = &n->u.conv;
    const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
    const float *bias = c->bias_id != NONE ? d->v[c->bias_id].cdata : NULL;
    enum xnn_status s = xnn_create_convolution2d_nhwc_f32(
        c->padding_top, c->padding_right, c->padding_bottom, c->padding_left, c->kernel_height,
        c->kernel_width, c->subsampling_height, c->subsampling_width, c->dilation_height,
        c->dilation_width, c->groups, c->group_input_channels, c->group_output_channels,
        (size_t)x->ld, (size_t)y->ld, d->v[c->filter_id].cdata, bias, o->lo, o->hi,
        n->type == LY_XNN_DEPTHWISE_CONV2D ? XNN_FLAG_DEPTHWISE_CONVOLUTION : 0, &o->op);
    return s == xnn_status_success ? LY_OK
                                   : xnn_failed(d, o, "xnn_create_convolution2d_nhwc_f32", s);
}

static ly_status make_pool(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.pooling) *p = &n->u.pooling;
    ly_status st = use(d, o, p->input_id, "input");
    if (st != LY_OK) return st;
    const xval *x = &d->v[p->input_id];
    if (x->ndim != 4) return fail(d, o, "input must be 4-D NHWC");
    if (p->pooling_height == 0 || p->pooling_width == 0 || p->stride_height == 0 ||
        p->stride_width == 0 || p->pooling_height * p->pooling_width == 1)
        return fail(d, o, "pooling window and stride must be positive (and not 1x1)");
    uint32_t dh = p->dilation_height ? p->dilation_height : 1,
             dwv = p->dilation_width ? p->dilation_width : 1;
    if (n->type == LY_XNN_AVG_POOLING_2D && (dh != 1 || dwv != 1))
        return fail(d, o, "average pooling has no dilation");
    int64_t ho = conv_out(x->dims[1], (int64_t)p->padding_top + p->padding_bottom,
                          p->pooling_height, p->stride_height, dh);
    int64_t wo = conv_out(x->dims[2], (int64_t)p->padding_left + p->padding_right, p->pooling_width,
                          p->stride_width, dwv);
    if (ho <= 0 || wo <= 0) return fail(d, o, "the window does not fit the padded input");
    int64_t od[4] = {x->dims[0], ho, wo, x->dims[3]};
    st = define(d, o, p->output_id, 4, od);
    if (st != LY_OK) return st;
    o->kind = K_XNN;
    o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
    return LY_OK;
}

static ly_status create_pool(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    const __typeof__(n->u.pooling) *p = &n->u.pooling;
    const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
    enum xnn_status s;
    if (n->type == LY_XNN_MAX_POOLING_2D)
        s = xnn_create_max_pooling2d_nhwc_f32(
            p->padding_top, p->padding_right, p->padding_bottom, p->padding_left, p->pooling_height,
            p->pooling_width, p->stride_height, p->stride_width,
            p->dilation_height ? p->dilation_height : 1, p->dilation_width ? p->dilation_width : 1,
            (size_t)x->dims[3], (size_t)x->ld, (size_t)y->ld, o->lo, o->hi, 0, &o->op);
    else
        s = xnn_create_average_pooling2d_nhwc_f32(
            p->padding_top, p->padding_right, p->padding_bottom, p->padding_left, p->pooling_height,
            p->pooling_width, p->stride_height, p->stride_width, (size_t)x->dims[3], (size_t)x->ld,
            (size_t)y->ld, o->lo, o->hi, 0, &o->op);
    return s == xnn_status_success ? LY_OK : xnn_failed(d, o, "xnn_create_*_pooling2d_nhwc_f32", s);
}

/* numpy broadcasting of a and b (right-aligned). */
static ly_status broadcast(const ly_et_xnnpack *d, const xop *o, const xval *a, const xval *b,
                           int *nd, int64_t *dims)
{
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < *nd; i++) {
        int ia = i - (*nd - a->ndim), ib = i - (*nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return fail(d, o, "operands do not broadcast (dimension %d: %lld vs %lld)", i,
                        (long long)da, (long long)db);
        dims[i] = da > db ? da : db;
    }
    return LY_OK;
}

static ly_status make_node(ly_et_xnnpack *d, xop *o, const ly_xnn_node *n)
{
    o->type = n->type;
    o->lo = -INFINITY;
    o->hi = INFINITY;
    if (n->has_output_min_max) {
        if (!(n->output_min <= n->output_max)) return fail(d, o, "output_min > output_max");
        o->clamp = true;
        o->lo = n->output_min;
        o->hi = n->output_max;
    }
    ly_status st;
    switch (n->type) {
    case LY_XNN_CONV2D:
    case LY_XNN_DEPTHWISE_CONV2D:
        return make_conv(d, o, n);
    case LY_XNN_MAX_POOLING_2D:
    case LY_XNN_AVG_POOLING_2D:
        return make_pool(d, o, n);
    case LY_XNN_GLOBAL_AVG_POOLING_2D: {
        st = use(d, o, n->u.n1x1.input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim != 4) return fail(d, o, "input must be 4-D NHWC");
        int64_t od[4] = {x->dims[0], 1, 1, x->dims[3]};
        o->kind = K_XNN;
        return define(d, o, n->u.n1x1.output_id, 4, od);
    }
    case LY_XNN_FULLY_CONNECTED: {
        const __typeof__(n->u.fc) *c = &n->u.fc;
        st = use(d, o, c->input1_id, "input");
        if (st == LY_OK) st = check_id(d, o, c->filter_id, "filter");
        if (st == LY_OK && c->bias_id != NONE) st = check_id(d, o, c->bias_id, "bias");
        if (st != LY_OK) return st;
        const xval *x = &d->v[c->input1_id], *f = &d->v[c->filter_id];
        if (c->flags & ~1u) return fail(d, o, "flags 0x%x are not supported", c->flags);
        bool transposed = c->flags & 1u;
        if (f->kind != V_CONST || f->ndim != 2) return fail(d, o, "filter must be a 2-D constant");
        int64_t out_c = transposed ? f->dims[1] : f->dims[0],
                in_c = transposed ? f->dims[0] : f->dims[1];
        if (x->last != in_c)
            return fail(d, o, "input has %lld channels, the filter %lld", (long long)x->last,
                        (long long)in_c);
        if (c->bias_id != NONE) {
            const xval *b = &d->v[c->bias_id];
            if (b->kind != V_CONST || b->numel != out_c)
                return fail(d, o, "bias must be [%lld]", (long long)out_c);
        }
        int64_t od[MAX_DIMS];
        memcpy(od, x->dims, sizeof od);
        od[x->ndim - 1] = out_c;
        o->kind = K_XNN;
        o->batch = x->rows;
        return define(d, o, c->output_id, x->ndim, od);
    }
    case LY_XNN_SOFTMAX:
    case LY_XNN_SIGMOID: {
        st = use(d, o, n->u.n1x1.input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim < 1) return fail(d, o, "input must have a dimension");
        o->kind = K_XNN;
        o->batch = x->rows;
        return define(d, o, n->u.n1x1.output_id, x->ndim, x->dims);
    }
    case LY_XNN_STATIC_RESIZE_BILINEAR_2D: {
        const __typeof__(n->u.resize) *r = &n->u.resize;
        st = use(d, o, r->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (x->ndim != 4 || r->new_height == 0 || r->new_width == 0)
            return fail(d, o, "input must be 4-D NHWC and the new size positive");
        if ((r->flags & ~0xCu) || (r->flags & 0xC) == 0xC)
            return fail(d, o, "flags 0x%x are not supported", r->flags);
        int64_t od[4] = {x->dims[0], r->new_height, r->new_width, x->dims[3]};
        o->kind = K_XNN;
        o->batch = x->dims[0], o->ih = x->dims[1], o->iw = x->dims[2];
        o->oh = r->new_height, o->ow = r->new_width;
        o->binop = (int)r->flags;
        return define(d, o, r->output_id, 4, od);
    }
    case LY_XNN_ADD:
    case LY_XNN_SUBTRACT:
    case LY_XNN_MULTIPLY:
    case LY_XNN_DIV:
    case LY_XNN_MINIMUM:
    case LY_XNN_MAXIMUM: {
        const __typeof__(n->u.n2x1) *b = &n->u.n2x1;
        st = use(d, o, b->input1_id, "input1");
        if (st == LY_OK) st = use(d, o, b->input2_id, "input2");
        if (st != LY_OK) return st;
        int nd;
        int64_t od[MAX_DIMS];
        st = broadcast(d, o, &d->v[o->in[0]], &d->v[o->in[1]], &nd, od);
        if (st != LY_OK) return st;
        o->kind = K_BINARY;
        o->binop = n->type;
        return define(d, o, b->output_id, nd, od);
    }
    case LY_XNN_ABS:
    case LY_XNN_NEGATE:
    case LY_XNN_SQUARE:
    case LY_XNN_SQUARE_ROOT:
    case LY_XNN_RECIPROCAL_SQUARE_ROOT:
    case LY_XNN_FLOOR:
    case LY_XNN_CEILING:
    case LY_XNN_EXP:
    case LY_XNN_LOG:
    case LY_XNN_TANH:
    case LY_XNN_GELU:
    case LY_XNN_SIN:
    case LY_XNN_COS:
    case LY_XNN_HARDSWISH:
    case LY_XNN_CLAMP:
    case LY_XNN_COPY:
    case LY_XNN_CONVERT:
    case LY_XNN_LEAKY_RELU:
    case LY_XNN_ELU: {
        uint32_t in = n->u.n1x1.input_id, out = n->u.n1x1.output_id;
        if (n->type == LY_XNN_LEAKY_RELU) {
            in = n->u.leaky_relu.input_id, out = n->u.leaky_relu.output_id;
            o->alpha = n->u.leaky_relu.negative_slope;
        } else if (n->type == LY_XNN_ELU) {
            in = n->u.elu.input_id, out = n->u.elu.output_id;
            o->alpha = n->u.elu.alpha;
        }
        st = use(d, o, in, "input");
        if (st != LY_OK) return st;
        static const struct {
            ly_xnn_node_type t;
            unary_fn f;
        } map[] = {{LY_XNN_ABS, U_ABS},
                   {LY_XNN_NEGATE, U_NEG},
                   {LY_XNN_SQUARE, U_SQUARE},
                   {LY_XNN_SQUARE_ROOT, U_SQRT},
                   {LY_XNN_RECIPROCAL_SQUARE_ROOT, U_RSQRT},
                   {LY_XNN_FLOOR, U_FLOOR},
                   {LY_XNN_CEILING, U_CEIL},
                   {LY_XNN_EXP, U_EXP},
                   {LY_XNN_LOG, U_LOG},
                   {LY_XNN_TANH, U_TANH},
                   {LY_XNN_GELU, U_GELU},
                   {LY_XNN_SIN, U_SIN},
                   {LY_XNN_COS, U_COS},
                   {LY_XNN_HARDSWISH, U_HARDSWISH},
                   {LY_XNN_CLAMP, U_CLAMP},
                   {LY_XNN_COPY, U_COPY},
                   {LY_XNN_CONVERT, U_COPY},
                   {LY_XNN_LEAKY_RELU, U_LEAKY},
                   {LY_XNN_ELU, U_ELU}};
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (map[i].t == n->type) o->fn = map[i].f;
        o->kind = K_UNARY;
        const xval *x = &d->v[o->in[0]];
        if (n->type == LY_XNN_LEAKY_RELU && x->ndim >= 1) {
            /* XNNPACK's own, vectorized */
            o->kind = K_XNN;
            o->batch = x->rows;
        }
        return define(d, o, out, x->ndim, x->dims);
    }
    case LY_XNN_STATIC_TRANSPOSE: {
        const __typeof__(n->u.transpose) *t = &n->u.transpose;
        st = use(d, o, t->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (t->num_dims != (uint32_t)x->ndim || t->n_perm != t->num_dims)
            return fail(d, o, "perm has %u entries for a %d-D input", t->num_dims, x->ndim);
        int64_t od[MAX_DIMS];
        bool seen[MAX_DIMS] = {false};
        for (int i = 0; i < x->ndim; i++) {
            uint32_t p = t->perm[i];
            if (p >= (uint32_t)x->ndim || seen[p]) return fail(d, o, "perm is not a permutation");
            seen[p] = true;
            o->perm[i] = (int)p;
            od[i] = x->dims[p];
        }
        o->kind = K_TRANSPOSE;
        return define(d, o, t->output_id, x->ndim, od);
    }
    case LY_XNN_STATIC_RESHAPE: {
        const __typeof__(n->u.reshape) *r = &n->u.reshape;
        st = use(d, o, r->input_id, "input");
        st = st == LY_OK ? check_id(d, o, r->output_id, "output") : st;
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]], *y = &d->v[r->output_id];
        /* XNNPACK takes the output value's dims; new_shape may hold a 0 for
         * "inferred", so the element counts are what must agree. */
        if (x->numel != y->numel) return fail(d, o, "reshape changes the number of elements");
        o->kind = K_COPY;
        o->binop = 1; /* reshape: a view when the input is dense */
        return define(d, o, r->output_id, y->ndim, y->dims);
    }
    case LY_XNN_STATIC_SLICE: {
        const __typeof__(n->u.slice) *s = &n->u.slice;
        st = use(d, o, s->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (s->num_dims != (uint32_t)x->ndim || s->n_offsets != s->num_dims ||
            s->n_sizes != s->num_dims)
            return fail(d, o, "offsets and sizes must have the input's %d dimensions", x->ndim);
        int64_t od[MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) {
            int64_t size = s->sizes[i] == 0 ? x->dims[i] - s->offsets[i] : s->sizes[i];
            if (s->offsets[i] >= x->dims[i] || size <= 0 || s->offsets[i] + size > x->dims[i])
                return fail(d, o, "slice [%u, +%lld) of dimension %d (size %lld)", s->offsets[i],
                            (long long)size, i, (long long)x->dims[i]);
            o->offsets[i] = s->offsets[i];
            od[i] = size;
        }
        o->kind = K_COPY;
        o->binop = 2; /* slice: a view when only the last dimension is cut */
        return define(d, o, s->output_id, x->ndim, od);
    }
    case LY_XNN_CONCATENATE2:
    case LY_XNN_CONCATENATE3:
    case LY_XNN_CONCATENATE4:
    case LY_XNN_CONCATENATE5: {
        const __typeof__(n->u.cat) *c = &n->u.cat;
        int count = n->type == LY_XNN_CONCATENATE5 ? 5 : (int)n->type - LY_XNN_CONCATENATE2 + 2;
        uint32_t ids[5] = {c->input1_id, c->input2_id, c->input3_id, c->input4_id, c->input5_id};
        for (int i = 0; i < count; i++) {
            st = use(d, o, ids[i], "input");
            if (st != LY_OK) return st;
        }
        const xval *x0 = &d->v[o->in[0]];
        if (c->axis >= (uint32_t)x0->ndim)
            return fail(d, o, "axis %u of a %d-D input", c->axis, x0->ndim);
        int64_t od[MAX_DIMS];
        memcpy(od, x0->dims, sizeof od);
        od[c->axis] = 0;
        for (int i = 0; i < count; i++) {
            const xval *xi = &d->v[o->in[i]];
            for (int k = 0; k < x0->ndim; k++)
                if (xi->ndim != x0->ndim || (k != (int)c->axis && xi->dims[k] != x0->dims[k]))
                    return fail(d, o, "input %d does not match input 1 off the axis", i + 1);
            od[c->axis] += xi->dims[c->axis];
        }
        o->axis = (int)c->axis;
        o->kind = K_CONCAT;
        return define(d, o, c->output_id, x0->ndim, od);
    }
    case LY_XNN_STATIC_CONSTANT_PAD: {
        const __typeof__(n->u.pad) *p = &n->u.pad;
        st = use(d, o, p->input_id, "input");
        if (st != LY_OK) return st;
        const xval *x = &d->v[o->in[0]];
        if (p->n_pre_paddings != (size_t)x->ndim || p->n_post_paddings != (size_t)x->ndim)
            return fail(d, o, "paddings must have the input's %d dimensions", x->ndim);
        int64_t od[MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) {
            od[i] = x->dims[i] + p->pre_paddings[i] + p->post_paddings[i];
            o->offsets[i] = p->pre_paddings[i];
        }
        o->pad_value = p->padding_value;
        o->kind = K_PAD;
        return define(d, o, p->output_id, x->ndim, od);
    }
    case LY_XNN_BATCH_MATRIX_MULTIPLY: {
        const __typeof__(n->u.n2x1) *b = &n->u.n2x1;
        st = use(d, o, b->input1_id, "input1");
        if (st == LY_OK) st = use(d, o, b->input2_id, "input2");
        if (st != LY_OK) return st;
        const xval *a = &d->v[o->in[0]], *bb = &d->v[o->in[1]];
        if (a->ndim < 2 || a->ndim != bb->ndim)
            return fail(d, o, "operands must have the same rank, at least 2");
        for (int i = 0; i < a->ndim - 2; i++)
            if (a->dims[i] != bb->dims[i]) return fail(d, o, "batch dimensions differ");
        if (a->dims[a->ndim - 1] != bb->dims[bb->ndim - 2])
            return fail(d, o, "inner dimensions differ");
        if (b->flags & ~1u) return fail(d, o, "flags 0x%x are not supported", b->flags);
        if (b->flags & 1u) return fail(d, o, "transposed right operand is not supported");
        int64_t od[MAX_DIMS];
        memcpy(od, a->dims, sizeof od);
        od[a->ndim - 1] = bb->dims[bb->ndim - 1];
        o->kind = K_BMM;
        return define(d, o, b->output_id, a->ndim, od);
    }
    default:
        return fail(d, o, "%s (tag %d) is not supported by this runtime", ly_xnn_node_name(n->type),
                    (int)n->type);
    }
}

/* ---- placement ---------------------------------------------------------------- */

static int find_root(ly_et_xnnpack *d, int v, int64_t *offset)
{
    int64_t off = 0;
    int guard = 0;
    while (d->v[v].parent != v && guard++ < (int)d->n_v) {
        off += d->v[v].offset;
        v = d->v[v].parent;
    }
    *offset = off;
    return v;
}

/* Floats between rows of `v`: its own row length when it owns its storage or
 * is a dense reshape view, else its parent's (concat placement and
 * last-axis slices keep rows). */
static int64_t resolve_ld(const ly_et_xnnpack *d, int v)
{
    for (size_t guard = 0; guard <= d->n_v; guard++) {
        const xval *x = &d->v[v];
        if (x->parent == v || x->dense_view) return x->last;
        v = x->parent;
    }
    return d->v[v].last;
}

/* Concatenations on the last axis take their inputs in place where they can:
 * an internal value written by an op, not already placed, not an input of
 * this concat twice. Then slices of the last axis and reshapes of dense
 * values become views. */
static void place(ly_et_xnnpack *d)
{
    for (size_t i = d->n_ops; i-- > 0;) {
        xop *o = &d->ops[i];
        const xval *y = &d->v[o->out];
        if (o->kind != K_CONCAT || o->axis != y->ndim - 1) continue;
        int64_t channel = 0;
        for (int k = 0; k < o->n_in; k++) {
            xval *x = &d->v[o->in[k]];
            bool twice = false;
            for (int j = 0; j < o->n_in; j++)
                if (j != k && o->in[j] == o->in[k]) twice = true;
            if (x->kind == V_INTERNAL && x->producer >= 0 && x->parent == o->in[k] && !twice) {
                x->parent = o->out;
                x->offset = channel;
                o->placed[k] = true;
            }
            channel += x->last;
        }
    }
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind != K_COPY) continue;
        xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
        if (y->kind != V_INTERNAL || y->parent != o->out) continue;
        if (o->binop == 2) {
            bool last_only = true;
            for (int k = 0; k < x->ndim - 1; k++)
                if (o->offsets[k] != 0 || y->dims[k] != x->dims[k]) last_only = false;
            if (!last_only || x->ndim == 0) continue;
            y->parent = o->in[0];
            y->offset = o->offsets[x->ndim - 1];
            o->kind = K_VIEW;
        } else if (x->rows == 1 || resolve_ld(d, o->in[0]) == x->last) {
            y->parent = o->in[0];
            y->offset = 0;
            y->dense_view = true;
            o->kind = K_VIEW;
        }
    }
    for (size_t i = 0; i < d->n_v; i++) {
        xval *v = &d->v[i];
        v->root = find_root(d, (int)i, &v->root_off);
        v->ld = resolve_ld(d, (int)i);
    }
}

/* Live ranges per root (externals and constants excluded), then offsets:
 * largest first, first fit among the placed roots whose ranges meet. */
static ly_status plan(ly_et_xnnpack *d)
{
    for (size_t i = 0; i < d->n_v; i++)
        d->v[i].first = d->v[i].last_use = -1;
    for (size_t t = 0; t < d->n_ops; t++) {
        const xop *o = &d->ops[t];
        int ids[6];
        int n = 0;
        for (int k = 0; k < o->n_in; k++)
            ids[n++] = o->in[k];
        ids[n++] = o->out;
        for (int k = 0; k < n; k++) {
            xval *r = &d->v[d->v[ids[k]].root];
            if (r->first < 0 || (int)t < r->first) r->first = (int)t;
            if ((int)t > r->last_use) r->last_use = (int)t;
        }
    }
    size_t n_roots = 0;
    int *roots = calloc(d->n_v ? d->n_v : 1, sizeof *roots);
    if (!roots) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", d->what);
    for (size_t i = 0; i < d->n_v; i++) {
        xval *v = &d->v[i];
        if (v->root == (int)i && v->kind == V_INTERNAL && v->first >= 0) roots[n_roots++] = (int)i;
    }
    /* insertion sort by size, descending (few hundred roots) */
    for (size_t i = 1; i < n_roots; i++) {
        int r = roots[i];
        size_t j = i;
        while (j > 0 && d->v[roots[j - 1]].numel < d->v[r].numel) {
            roots[j] = roots[j - 1];
            j--;
        }
        roots[j] = r;
    }
    size_t total = 0;
    for (size_t i = 0; i < n_roots; i++) {
        xval *v = &d->v[roots[i]];
        size_t size = ((size_t)v->numel * sizeof(float) + 63) / 64 * 64, at = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (size_t j = 0; j < i; j++) {
                const xval *q = &d->v[roots[j]];
                if (q->last_use < v->first || v->last_use < q->first) continue;
                size_t qs = q->arena_off,
                       qe = qs + ((size_t)q->numel * sizeof(float) + 63) / 64 * 64;
                if (at < qe && qs < at + size) {
                    at = qe;
                    moved = true;
                }
            }
        }
        v->arena_off = at;
        if (at + size > total) total = at + size;
    }
    free(roots);
    d->arena_bytes = total + XNN_EXTRA_BYTES;
    if (d->arena_bytes > ((size_t)4 << 30))
        return fail(d, NULL, "the graph needs %zu bytes of activations (over 4 GiB)",
                    d->arena_bytes);
    /* calloc: zeroed pages on demand */
    d->arena = calloc(1, d->arena_bytes);
    if (!d->arena)
        return ly_set_error(LY_E_NO_MEMORY, "%s: cannot allocate %zu bytes of activations", d->what,
                            d->arena_bytes);
    return LY_OK;
}

static ly_status create_operators(ly_et_xnnpack *d, const ly_xnn_graph *xg)
{
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind != K_XNN) continue;
        const ly_xnn_node *n = &xg->xnodes[i];
        const xval *x = &d->v[o->in[0]], *y = &d->v[o->out];
        enum xnn_status s = xnn_status_success;
        const char *call = "";
        ly_status st = LY_OK;
        switch (n->type) {
        case LY_XNN_CONV2D:
        case LY_XNN_DEPTHWISE_CONV2D:
            st = create_conv(d, o, n);
            break;
        case LY_XNN_MAX_POOLING_2D:
        case LY_XNN_AVG_POOLING_2D:
            st = create_pool(d, o, n);
            break;
        case LY_XNN_GLOBAL_AVG_POOLING_2D:
            call = "xnn_create_global_average_pooling_nwc_f32";
            s = xnn_create_global_average_pooling_nwc_f32((size_t)x->last, (size_t)x->ld,
                                                          (size_t)y->ld, o->lo, o->hi, 0, &o->op);
            break;
        case LY_XNN_FULLY_CONNECTED: {
            const float *bias = n->u.fc.bias_id != NONE ? d->v[n->u.fc.bias_id].cdata : NULL;
            call = "xnn_create_fully_connected_nc_f32";
            s = xnn_create_fully_connected_nc_f32((size_t)x->last, (size_t)y->last, (size_t)x->ld,
                                                  (size_t)y->ld, d->v[n->u.fc.filter_id].cdata,
                                                  bias, o->lo, o->hi, n->u.fc.flags & 1u, &o->op);
            break;
        }
        case LY_XNN_SOFTMAX:
            call = "xnn_create_softmax_nc_f32";
            s = xnn_create_softmax_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld, 0, &o->op);
            break;
        case LY_XNN_SIGMOID:
            call = "xnn_create_sigmoid_nc_f32";
            s = xnn_create_sigmoid_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld, 0, &o->op);
            break;
        case LY_XNN_LEAKY_RELU:
            call = "xnn_create_leaky_relu_nc_f32";
            s = xnn_create_leaky_relu_nc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld,
                                             o->alpha, 0, &o->op);
            break;
        case LY_XNN_STATIC_RESIZE_BILINEAR_2D:
            call = "xnn_create_resize_bilinear2d_nhwc_f32";
            s = xnn_create_resize_bilinear2d_nhwc_f32((size_t)x->last, (size_t)x->ld, (size_t)y->ld,
                                                      (uint32_t)o->binop, &o->op);
            break;
        default:
            break;
        }
        if (st != LY_OK) return st;
        if (s != xnn_status_success) return xnn_failed(d, o, call, s);
        /* Ops with a native clamp took it; the others clamp after running. */
        if (n->type == LY_XNN_CONV2D || n->type == LY_XNN_DEPTHWISE_CONV2D ||
            n->type == LY_XNN_MAX_POOLING_2D || n->type == LY_XNN_AVG_POOLING_2D ||
            n->type == LY_XNN_GLOBAL_AVG_POOLING_2D || n->type == LY_XNN_FULLY_CONNECTED)
            o->clamp = false;
    }
    return LY_OK;
}

void ly_et_xnnpack_free(ly_et_xnnpack *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_ops; i++)
        if (d->ops[i].op) xnn_delete_operator(d->ops[i].op);
    free(d->ops);
    free(d->v);
    free(d->ext_value);
    free(d->arena);
    free(d);
}

ly_status ly_et_xnnpack_init(const ly_pte_program *program, const ly_pte_bytes *blob,
                             const char *what, ly_et_xnnpack **out)
{
    *out = NULL;
    pthread_once(&g.once, init_once);
    if (g.init != xnn_status_success)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: XNNPACK could not initialise on this CPU (status %d)", what,
                            (int)g.init);
    ly_xnn_graph *xg = NULL;
    ly_status st = ly_xnn_decode(blob->data, blob->size, what, &xg);
    if (st != LY_OK) return st;
    ly_et_xnnpack *d = calloc(1, sizeof *d);
    if (!d) {
        ly_xnn_graph_free(xg);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    d->what = what;
    st = load_values(d, program, xg);
    if (st == LY_OK) {
        d->n_ops = xg->n_xnodes;
        d->ops = calloc(d->n_ops ? d->n_ops : 1, sizeof *d->ops);
        if (!d->ops) st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    for (size_t i = 0; st == LY_OK && i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        o->name = ly_xnn_node_name(xg->xnodes[i].type);
        o->out = -1;
        st = make_node(d, o, &xg->xnodes[i]);
        if (st == LY_OK && o->out < 0) st = fail(d, o, "the node writes no value");
    }
    for (size_t i = 0; st == LY_OK && i < d->n_v; i++)
        if (d->v[i].kind == V_EXT_OUT && d->v[i].producer < 0)
            st = fail(d, NULL, "external output %u is never written", d->v[i].ext);
    if (st == LY_OK) {
        place(d);
        st = plan(d);
    }
    if (st == LY_OK) st = create_operators(d, xg);
    ly_xnn_graph_free(xg);
    if (st != LY_OK) {
        ly_et_xnnpack_free(d);
        return st;
    }
    *out = d;
    return LY_OK;
}

size_t ly_et_xnnpack_num_externs(const ly_et_xnnpack *d)
{
    return d ? d->num_externs : 0;
}

ly_status ly_et_xnnpack_extern_dims(const ly_et_xnnpack *d, size_t id, int *ndim, int64_t *dims,
                                    bool *is_output)
{
    if (!d || id >= d->num_externs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "xnnpack: no external %zu", id);
    const xval *v = &d->v[d->ext_value[id]];
    *ndim = v->ndim;
    memcpy(dims, v->dims, (size_t)v->ndim * sizeof *dims);
    *is_output = v->kind == V_EXT_OUT;
    return LY_OK;
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
    pthreadpool_t pool = pool_for(threads);
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

ly_status ly_et_xnnpack_execute(ly_et_xnnpack *d, ly_tensor *const *args, size_t n_args,
                                int threads)
{
    if (n_args < d->num_externs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %zu arguments for %u externals", d->what,
                            n_args, d->num_externs);
    for (uint32_t e = 0; e < d->num_externs; e++) {
        const xval *v = &d->v[d->ext_value[e]];
        const ly_tensor *t = args[e];
        if (!t || t->dtype != LY_F32 || !t->data || ly_tensor_numel(t) != v->numel)
            return ly_set_error(LY_E_SHAPE,
                                "%s: argument %u must be an f32 tensor of %lld elements", d->what,
                                e, (long long)v->numel);
    }
    threads = ly_threads_resolve(threads);
    for (size_t i = 0; i < d->n_ops; i++) {
        xop *o = &d->ops[i];
        if (o->kind == K_VIEW) continue;
        float *ptr[6];
        int ids[6], n = 0;
        for (int k = 0; k < o->n_in; k++)
            ids[n++] = o->in[k];
        ids[n++] = o->out;
        for (int k = 0; k < n; k++) {
            const xval *v = &d->v[ids[k]];
            const xval *r = &d->v[v->root];
            float *base;
            if (r->kind == V_CONST)
                base = (float *)r->cdata;
            else if (r->kind == V_INTERNAL)
                base = (float *)((char *)d->arena + r->arena_off);
            else
                base = args[r->ext]->data;
            ptr[k] = base + v->root_off;
        }
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
        if (st != LY_OK) return st;
    }
    return LY_OK;
}
