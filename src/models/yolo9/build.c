/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO9 from a state dict: the size table, the key mapping with strict
 * checking, Conv+BN folding, RepConvN merging, and the graph (yolo9.md 1.1-1.6,
 * LibreYOLO's libreyolo/models/yolo9/nn.py).
 *
 * Numeric effect of folding. LibreYOLO's eval forward computes
 * BN(conv(x)) = (conv(x) - mean) * gamma / sqrt(var + eps) + beta in f32, and
 * RepConvN as act(BN1(conv3x3(x)) + BN2(conv1x1(x))). Here every Conv+BN
 * becomes one conv with w' = w * s, b' = beta - mean * s, s = gamma /
 * sqrt(var + eps) (eps 1e-3), and each RepConvN one 3x3 conv whose kernel is
 * the folded 3x3 plus the folded 1x1 placed at its centre (biases summed).
 * The folding is done in double and rounded once to f32, so the weights are
 * the correctly rounded folded values; what differs from the unfused forward
 * is the order of f32 rounding inside each layer (scale applied to the weights
 * before the sum, not to the sum), a few ulps per layer. Through 100+ layers
 * this grows to about 2-5e-4 relative on the fixture's outputs, the figure the
 * fixture README gives for fused against unfused PyTorch.
 */
#include "models/yolo9/build.h"

#include "core/core.h"
#include "libreyolo/nn.h"
#include "libreyolo/quant.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_EPS 1e-3
#define REG_MAX 16
#define KEY_MAX 192

/* ---- the size table (nn.py YOLO9_CONFIGS) -------------------------------- */

typedef struct yolo9_config {
    const char *size;
    int conv0, conv1;
    bool first_is_elan; /* ELAN for t and s, RepNCSPELAN for m and c */
    int first_out, first_part;
    bool adown;      /* ADown for c, AConv otherwise */
    int stage[3][3]; /* per backbone stage: down out, RepNCSPELAN out, part */
    int spp_out;
    int repeat;         /* RepNCSP bottlenecks */
    int up1[2], up2[2]; /* neck RepNCSPELANs: out, part */
    int down1_out, down1[2];
    int down2_out, down2[2];
} yolo9_config;

static const yolo9_config configs[] = {
    {"t",
     16,
     32,
     true,
     32,
     32,
     false,
     {{64, 64, 64}, {96, 96, 96}, {128, 128, 128}},
     128,
     3,
     {96, 96},
     {64, 64},
     48,
     {96, 96},
     64,
     {128, 128}},
    {"s",
     32,
     64,
     true,
     64,
     64,
     false,
     {{128, 128, 128}, {192, 192, 192}, {256, 256, 256}},
     256,
     3,
     {192, 192},
     {128, 128},
     96,
     {192, 192},
     128,
     {256, 256}},
    {"m",
     32,
     64,
     false,
     128,
     128,
     false,
     {{240, 240, 240}, {360, 360, 360}, {480, 480, 480}},
     480,
     1,
     {360, 360},
     {240, 240},
     184,
     {360, 360},
     240,
     {480, 480}},
    {"c",
     64,
     128,
     false,
     256,
     128,
     true,
     {{256, 512, 256}, {512, 512, 512}, {512, 512, 512}},
     512,
     1,
     {512, 512},
     {256, 256},
     256,
     {512, 512},
     512,
     {512, 512}},
};

static const yolo9_config *find_config(const char *size)
{
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (size && strcmp(configs[i].size, size) == 0) return &configs[i];
    return NULL;
}

/* ---- the state dict, normalised and sorted ------------------------------- */

typedef struct entry {
    char *name;
    const char *stored; /* as in the file, for messages */
    ly_tensor view;
    bool used;
} entry;

typedef struct problems {
    size_t count;
    size_t len;
    char text[3072];
} problems;

typedef struct builder {
    ly_graph *g; /* NULL: only list the keys (ly_yolo9_expected_keys) */
    entry *entries;
    size_t n_entries;
    problems issues;
    ly_yolo9_key_fn visit;
    void *visit_user;
    const yolo9_config *cfg;
    int64_t nc, box_hidden, class_hidden;
    ly_status fatal;               /* out of memory or an internal error: stop at once */
    double *scratch_w, *scratch_b; /* folding accumulators, grown as needed */
    size_t scratch_w_cap, scratch_b_cap;
    const ly_yolo9_state *state;
    const ly_yolo9_quant *quant; /* NULL: float */
    float *qweight, *qscale;     /* a quantized module's effective weight and scales */
    uint8_t *qcodes;
    size_t qweight_cap, qscale_cap;
    int quant_modules;
    double *bn_factor; /* the last fold's gamma / sqrt(var + eps) per channel */
    size_t bn_factor_cap;
} builder;

static void add_problem(builder *b, const char *fmt, ...) LY_PRINTF(2, 3);
static void add_problem(builder *b, const char *fmt, ...)
{
    problems *p = &b->issues;
    p->count++;
    if (p->count > 12) return; /* the count says how many more */
    size_t room = sizeof p->text - p->len;
    if (room < 2) return;
    if (p->len > 0) {
        int n = snprintf(p->text + p->len, room, "; ");
        p->len += (size_t)n < room ? (size_t)n : room - 1;
        room = sizeof p->text - p->len;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->text + p->len, room, fmt, ap);
    va_end(ap);
    if (n > 0) p->len += (size_t)n < room ? (size_t)n : room - 1;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static entry *find_entry(builder *b, const char *name)
{
    if (b->n_entries == 0) return NULL; /* entries is NULL then: bsearch wants an array */
    entry key = {.name = (char *)name};
    return bsearch(&key, b->entries, b->n_entries, sizeof(entry), compare_entries);
}

/* LibreYOLO's legacy "detect." head prefix, and DDP's "module." (the checkpoint
 * reader strips it already; a test's state may not). */
static char *normalise_key(const char *name)
{
    if (strncmp(name, "module.", 7) == 0) name += 7;
    const char *rest = name;
    const char *head = "";
    if (strncmp(name, "detect.", 7) == 0) {
        head = "head.";
        rest = name + 7;
    }
    size_t n = strlen(head) + strlen(rest) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", head, rest);
    return s;
}

static ly_status load_entries(builder *b, const ly_yolo9_state *state)
{
    if (state->count == 0) return LY_OK;
    b->entries = calloc(state->count, sizeof(entry));
    if (!b->entries) return ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
    for (size_t i = 0; i < state->count; i++) {
        const char *name = NULL;
        ly_tensor view;
        ly_status st = state->at(state->user, i, &name, &view);
        if (st != LY_OK) return st;
        if (!name)
            return ly_set_error(LY_E_FORMAT, "ly_yolo9_build: state-dict entry %zu has no name", i);
        entry *e = &b->entries[b->n_entries];
        e->name = normalise_key(name);
        if (!e->name) return ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
        e->stored = name;
        e->view = view;
        b->n_entries++;
    }
    qsort(b->entries, b->n_entries, sizeof(entry), compare_entries);
    for (size_t i = 1; i < b->n_entries; i++)
        if (strcmp(b->entries[i - 1].name, b->entries[i].name) == 0)
            add_problem(b, "keys '%s' and '%s' both name '%s'", b->entries[i - 1].stored,
                        b->entries[i].stored, b->entries[i].name);
    return LY_OK;
}

static void free_entries(builder *b)
{
    for (size_t i = 0; i < b->n_entries; i++)
        free(b->entries[i].name);
    free(b->entries);
    free(b->scratch_w);
    free(b->scratch_b);
    free(b->qweight);
    free(b->qscale);
    free(b->qcodes);
    free(b->bn_factor);
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    ly_tensor t = {.ndim = ndim};
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    ly_shape_str(&t, buf, size);
}

/* The view of `key` if present with exactly `shape` (any dtype), else NULL
 * with the problem recorded. */
static const ly_tensor *take_view(builder *b, const char *key, int ndim, const int64_t *shape)
{
    if (!b->g) {
        if (b->visit) b->visit(key, ndim, shape, b->visit_user);
        return NULL;
    }
    char want[96], got[96];
    shape_text(ndim, shape, want, sizeof want);
    entry *e = find_entry(b, key);
    if (!e) {
        add_problem(b, "missing key '%s' (expected shape %s)", key, want);
        return NULL;
    }
    e->used = true;
    const ly_tensor *t = &e->view;
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        ly_shape_str(t, got, sizeof got);
        add_problem(b, "key '%s' has shape %s, expected %s", e->stored, got, want);
        return NULL;
    }
    return t->data ? t : NULL;
}

/* The f32 data of `key` if present with exactly `shape`, else NULL with the
 * problem recorded. */
static const float *take(builder *b, const char *key, int ndim, const int64_t *shape)
{
    const ly_tensor *t = take_view(b, key, ndim, shape);
    if (!t) return NULL;
    if (t->dtype != LY_F32) {
        add_problem(b, "key '%s' is %s, expected f32", key, ly_dtype_name(t->dtype));
        return NULL;
    }
    return t->data;
}

static const float *take1(builder *b, const char *key, int64_t n)
{
    return take(b, key, 1, &n);
}

/* Keys are built from this file's own short names, far below KEY_MAX. */
static void key_of(char *out, const char *prefix, const char *suffix)
{
    int n = snprintf(out, KEY_MAX, "%s%s", prefix, suffix);
    if (n < 0 || n >= KEY_MAX) out[0] = '\0';
}

/* Keys that carry no weights here: BatchNorm's step counter and buffers the
 * head derives itself (DFL projection, anchors, strides). */
static bool ignorable(const char *name)
{
    size_t n = strlen(name);
    const char *nbt = ".num_batches_tracked";
    size_t m = strlen(nbt);
    if (n >= m && strcmp(name + n - m, nbt) == 0) return true;
    return strncmp(name, "head.dfl.", 9) == 0 || strcmp(name, "head.anchors") == 0 ||
           strcmp(name, "head.strides") == 0 || strcmp(name, "head.stride") == 0;
}

/* ---- quantized Conv2d modules (quantized-checkpoints.md 3, 5) -------------- */

static void note_graph_error(builder *b, ly_status st);

/* What a module does to its input before convolving: LibreYOLO's activation
 * fake-quant with the calibrated range (off when _q_calibrated is 0). */
typedef struct qinput {
    bool on;
    float lo, hi;
} qinput;

static bool same_qinput(const qinput *a, const qinput *c)
{
    return a->on == c->on && (!a->on || (memcmp(&a->lo, &c->lo, sizeof a->lo) == 0 &&
                                         memcmp(&a->hi, &c->hi, sizeof a->hi) == 0));
}

/* Selection by substring of the qualified module name; "dfl" always stays float. */
static bool kept_float(const builder *b, const char *module)
{
    if (strstr(module, "dfl")) return true;
    const char *keep = b->quant->keep ? b->quant->keep : "head.\nbackbone.conv0.";
    for (const char *s = keep; *s;) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        char sub[KEY_MAX];
        if (n > 0 && n < sizeof sub) {
            memcpy(sub, s, n);
            sub[n] = '\0';
            if (strstr(module, sub)) return true;
        }
        if (!end) break;
        s = end + 1;
    }
    return false;
}

static bool quantized(const builder *b, const char *module)
{
    return b->quant && b->quant->recipe != LY_YOLO9_FLOAT && !kept_float(b, module);
}

static bool grow_quant(builder *b, size_t n, size_t channels)
{
    if (n > b->qweight_cap) {
        float *w = realloc(b->qweight, n * sizeof *w);
        uint8_t *c = w ? realloc(b->qcodes, n) : NULL;
        if (w) b->qweight = w;
        if (c) b->qcodes = c;
        if (!w || !c) return false;
        b->qweight_cap = n;
    }
    if (channels > b->qscale_cap) {
        float *p = realloc(b->qscale, channels * sizeof *p);
        if (!p) return false;
        b->qscale = p;
        b->qscale_cap = channels;
    }
    return true;
}

/* The weight of a quantized module as its forward uses it, into b->qweight:
 * finalized, unpack(weight_packed, _q_w_scale) (the stored codes and scales);
 * prepared, the fp32 master through the per-channel fake-quant slot with the
 * absmax scale LibreYOLO recomputes on every call (_q_w_scale is zeros then).
 * Both give the same bits (unpack(pack(W)) is the fake-quant by construction). */
static const float *quant_weight(builder *b, const char *module, const int64_t *wshape,
                                 const float *scale, qinput *q)
{
    char key[KEY_MAX];
    bool int8 = b->quant->recipe == LY_YOLO9_INT8;
    int64_t c2 = wshape[0], n = wshape[0] * wshape[1] * wshape[2] * wshape[3];
    key_of(key, module, b->quant->finalized ? ".weight_packed" : ".weight");
    const ly_tensor *w = take_view(b, key, 4, wshape);
    if (!w || !scale) return NULL;
    if (!grow_quant(b, (size_t)n, (size_t)c2)) {
        b->fatal = ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
        return NULL;
    }
    ly_tensor out = {.dtype = LY_F32, .ndim = 4, .data = b->qweight};
    memcpy(out.shape, wshape, 4 * sizeof *wshape);
    ly_tensor sc = {.dtype = LY_F32, .ndim = 1, .shape = {c2}, .data = b->qscale};
    ly_status st;
    const char *recipe = int8 ? "int8" : "fp8";
    if (b->quant->finalized) {
        const entry *e = find_entry(b, key);
        const char *dtype =
            e && b->state->stored_dtype ? b->state->stored_dtype(b->state->user, e->stored) : NULL;
        const char *want = int8 ? "int8" : "float8_e4m3fn";
        if (dtype && strcmp(dtype, want) != 0) {
            add_problem(b, "key '%s' is stored as %s, expected %s (recipe %s)", key, dtype, want,
                        recipe);
            return NULL;
        }
        bool any = false;
        for (int64_t o = 0; o < c2; o++)
            any = any || scale[o] != 0.0f;
        if (!any) {
            add_problem(b,
                        "key '%s._q_w_scale' is all zeros: a finalized checkpoint holds the "
                        "scales finalize computed",
                        module);
            return NULL;
        }
        memcpy(b->qscale, scale, (size_t)c2 * sizeof *scale);
        ly_tensor codes = {.dtype = int8 ? LY_I8 : LY_F8E4M3, .ndim = 4, .data = b->qcodes};
        memcpy(codes.shape, wshape, 4 * sizeof *wshape);
        for (int64_t i = 0; i < n; i++) {
            if (int8) {
                int64_t v = w->dtype == LY_I64 ? ((const int64_t *)w->data)[i]
                                               : (int64_t)((const float *)w->data)[i];
                if (v < -128 || v > 127) {
                    add_problem(b, "key '%s' holds %lld, outside int8", key, (long long)v);
                    return NULL;
                }
                ((int8_t *)b->qcodes)[i] = (int8_t)v;
            } else {
                float v = w->dtype == LY_F32 ? ((const float *)w->data)[i] : NAN;
                b->qcodes[i] = ly_fp32_to_e4m3(v); /* exact: v was decoded from a code */
            }
        }
        st = int8 ? ly_unpack_int8(&codes, &sc, &out) : ly_unpack_fp8(&codes, &sc, &out);
    } else {
        if (w->dtype != LY_F32) {
            add_problem(b, "key '%s' is %s, expected f32 (a prepared checkpoint's master)", key,
                        ly_dtype_name(w->dtype));
            return NULL;
        }
        st = int8 ? ly_int8_weight_qparams(w, 0, &sc) : ly_fp8_weight_qparams(w, false, &sc);
        if (st == LY_OK) {
            ly_kernel_call call;
            ly_kernel_call_init(&call);
            ly_fake_quant_int8_per_channel_params axis0 = {.axis = 0};
            call.in[0] = w;
            call.in[1] = &sc;
            call.out[0] = &out;
            call.params = int8 ? &axis0 : NULL;
            call.threads = 1;
            st = ly_kernel_dispatch_op(
                int8 ? LY_OP_FAKE_QUANT_INT8_PER_CHANNEL : LY_OP_FAKE_QUANT_FP8, &call);
        }
        /* The codes behind code * scale, for conv2d_int8: exact, since the
         * product of an integer below 2^8 and the scale divides back to it. */
        int64_t per_channel = n / c2;
        for (int64_t i = 0; int8 && st == LY_OK && i < n; i++) {
            float scale_o = b->qscale[i / per_channel];
            ((int8_t *)b->qcodes)[i] =
                scale_o != 0.0f ? (int8_t)lrintf(b->qweight[i] / scale_o) : 0;
        }
    }
    if (st != LY_OK) {
        b->fatal = ly_error_prefix(st, "ly_yolo9_build");
        return NULL;
    }
    (void)q;
    return b->qweight;
}

/* The weight [c2, cin, k, k] of Conv2d `module` as the model computes with it
 * (f32), and what the module does to its input; NULL with the problem recorded. */
static const float *module_weight(builder *b, const char *module, const int64_t *wshape, qinput *q)
{
    char key[KEY_MAX];
    *q = (qinput){0};
    if (!quantized(b, module)) {
        key_of(key, module, ".weight");
        return take(b, key, 4, wshape);
    }
    b->quant_modules++;
    int64_t one = 1;
    key_of(key, module, "._q_act_lo");
    const float *lo = take1(b, key, 1);
    key_of(key, module, "._q_act_hi");
    const float *hi = take1(b, key, 1);
    key_of(key, module, "._q_calibrated");
    const ly_tensor *calibrated = take_view(b, key, 1, &one);
    key_of(key, module, "._q_w_scale");
    const float *scale = take1(b, key, wshape[0]);
    const float *w = quant_weight(b, module, wshape, scale, q);
    if (!lo || !hi || !calibrated || !w) return NULL;
    q->on = calibrated->dtype == LY_I64 ? ((const int64_t *)calibrated->data)[0] != 0
                                        : ((const float *)calibrated->data)[0] != 0.0f;
    q->lo = lo[0];
    q->hi = hi[0];
    return w;
}

/* x fake-quantized as `module`'s input: int8 affine on [lo, hi] (zero point
 * and scale from the range, kernels.md 2.2), or fp8 with scale max(|lo|,
 * |hi|)/448; through their slots (the AVX2 providers serve them). */
static ly_graph_value quantize_input(builder *b, const char *module, ly_graph_value x,
                                     const qinput *q)
{
    if (!b->g || !q->on || b->fatal != LY_OK || x == LY_GRAPH_NONE) return x;
    char name[KEY_MAX];
    key_of(name, module, ".input_quant");
    int64_t one = 1;
    ly_graph_value in[3] = {x, LY_GRAPH_NONE, LY_GRAPH_NONE}, out = LY_GRAPH_NONE;
    void *d;
    bool int8 = b->quant->recipe == LY_YOLO9_INT8;
    int n = int8 ? 3 : 2;
    float values[2] = {q->lo, q->hi};
    if (!int8 && ly_fp8_act_qparams(q->lo, q->hi, &values[0]) != LY_OK) {
        b->fatal = ly_error_prefix(LY_E_INVALID_ARGUMENT, "ly_yolo9_build");
        return LY_GRAPH_NONE;
    }
    for (int i = 1; i < n; i++) {
        if (ly_graph_constant(b->g, LY_F32, 1, &one, &in[i], &d) != LY_OK) {
            b->fatal = LY_E_NO_MEMORY;
            return LY_GRAPH_NONE;
        }
        *(float *)d = values[i - 1];
    }
    note_graph_error(b,
                     ly_graph_node(b->g, int8 ? LY_OP_FAKE_QUANT_INT8_AFFINE : LY_OP_FAKE_QUANT_FP8,
                                   name, n, in, NULL, 1, &out));
    return out;
}

/* ---- folding ----------------------------------------------------------- */

static bool reserve(builder *b, size_t weights, size_t channels)
{
    if (weights > b->scratch_w_cap) {
        double *p = realloc(b->scratch_w, weights * sizeof(double));
        if (!p) return false;
        b->scratch_w = p;
        b->scratch_w_cap = weights;
    }
    if (channels > b->scratch_b_cap) {
        double *p = realloc(b->scratch_b, channels * sizeof(double));
        if (!p) return false;
        b->scratch_b = p;
        b->scratch_b_cap = channels;
    }
    return true;
}

/* Add Conv `p` (conv.weight [c2, cin, k, k] + bn.*) folded with its BatchNorm
 * into acc_w [c2, cin, kd, kd] (the k x k kernel centred) and acc_b [c2]. */
static void fold_conv_bn(builder *b, const char *p, int64_t c2, int64_t cin, int64_t k, int64_t kd,
                         double *acc_w, double *acc_b, qinput *q)
{
    char key[KEY_MAX];
    int64_t wshape[4] = {c2, cin, k, k};
    key_of(key, p, ".conv");
    const float *w = module_weight(b, key, wshape, q);
    key_of(key, p, ".bn.weight");
    const float *gamma = take1(b, key, c2);
    key_of(key, p, ".bn.bias");
    const float *beta = take1(b, key, c2);
    key_of(key, p, ".bn.running_mean");
    const float *mean = take1(b, key, c2);
    key_of(key, p, ".bn.running_var");
    const float *var = take1(b, key, c2);
    if (!w || !gamma || !beta || !mean || !var || !acc_w) return;
    if (c2 > (int64_t)b->bn_factor_cap) {
        double *f = realloc(b->bn_factor, (size_t)c2 * sizeof *f);
        if (!f) {
            b->fatal = ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
            return;
        }
        b->bn_factor = f;
        b->bn_factor_cap = (size_t)c2;
    }
    int64_t off = (kd - k) / 2;
    for (int64_t o = 0; o < c2; o++) {
        double v = (double)var[o] + BN_EPS;
        if (!(v > 0.0) || !isfinite(v)) {
            add_problem(b, "key '%s' [%lld] is %g: var + eps must be positive", key, (long long)o,
                        (double)var[o]);
            return;
        }
        double s = (double)gamma[o] / sqrt(v);
        b->bn_factor[o] = s;
        acc_b[o] += (double)beta[o] - (double)mean[o] * s;
        for (int64_t i = 0; i < cin; i++)
            for (int64_t y = 0; y < k; y++)
                for (int64_t x = 0; x < k; x++)
                    acc_w[((o * cin + i) * kd + y + off) * kd + x + off] +=
                        (double)w[((o * cin + i) * k + y) * k + x] * s;
    }
}

/* Graph constants holding the accumulators rounded to f32. */
static bool emit_weights(builder *b, int64_t c2, int64_t cin, int64_t kd, ly_graph_value *w,
                         ly_graph_value *bias)
{
    int64_t wshape[4] = {c2, cin, kd, kd};
    void *wv, *bv;
    if (ly_graph_constant(b->g, LY_F32, 4, wshape, w, &wv) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &c2, bias, &bv) != LY_OK) {
        b->fatal = LY_E_NO_MEMORY;
        return false;
    }
    float *wd = wv, *bd = bv;
    for (int64_t i = 0; i < c2 * cin * kd * kd; i++)
        wd[i] = (float)b->scratch_w[i];
    for (int64_t o = 0; o < c2; o++)
        bd[o] = (float)b->scratch_b[o];
    return true;
}

static bool start_fold(builder *b, int64_t c2, int64_t cin, int64_t kd)
{
    if (!b->g) return true;
    size_t nw = (size_t)(c2 * cin * kd * kd);
    if (!reserve(b, nw, (size_t)c2)) {
        b->fatal = ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
        return false;
    }
    memset(b->scratch_w, 0, nw * sizeof(double));
    memset(b->scratch_b, 0, (size_t)c2 * sizeof(double));
    return true;
}

/* ---- blocks ------------------------------------------------------------ */

static void note_graph_error(builder *b, ly_status st)
{
    if (st != LY_OK && b->fatal == LY_OK) b->fatal = st;
}

/* A YOLO9 convolution's window and activation (square, SiLU or none). */
static ly_conv2d_params conv_params(int64_t stride, int64_t pad, int64_t groups, bool silu)
{
    ly_conv2d_params p = LY_CONV2D_DEFAULTS;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = pad;
    p.groups = groups;
    p.activation = silu ? LY_ACT_SILU : LY_ACT_NONE;
    return p;
}

static ly_graph_value add_conv(builder *b, const char *name, ly_graph_value x, ly_graph_value w,
                               ly_graph_value bias, int64_t stride, int64_t pad, int64_t groups,
                               bool silu, ly_graph_value residual)
{
    ly_conv2d_params p = conv_params(stride, pad, groups, silu);
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_conv2d(b->g, name, x, w, bias, residual, &p, &out));
    return out;
}

/* Whether a module with input quantizer `q` convolves on its integer codes
 * (conv2d_int8): the int8 recipe with a calibrated input. The fp8 recipe and an
 * uncalibrated module convolve the fake-quantized values in f32. */
static bool int8_execute(const builder *b, const qinput *q)
{
    /* After a problem the module's codes may not have been read: the build
     * fails anyway, through the float path that needs nothing of them. */
    return b->quant && b->quant->recipe == LY_YOLO9_INT8 && q->on && b->issues.count == 0 &&
           b->fatal == LY_OK;
}

/* The last module read as conv2d_int8: its codes (b->qcodes), the weight scales
 * (times the fold's BN factors, b->bn_factor, when `bn`), and the bias from the
 * fold's accumulator, or `bias` when given. */
static ly_graph_value add_conv_int8(builder *b, const char *name, ly_graph_value x,
                                    const int64_t *wshape, bool bn, const float *bias,
                                    int64_t stride, int64_t pad, int64_t groups, bool silu,
                                    ly_graph_value residual, const qinput *q)
{
    int64_t c2 = wshape[0], one = 1, n = wshape[0] * wshape[1] * wshape[2] * wshape[3];
    ly_graph_value in[7] = {x, LY_GRAPH_NONE, LY_GRAPH_NONE, residual};
    void *codes, *scale, *bias_out, *lo, *hi;
    if (ly_graph_constant(b->g, LY_I8, 4, wshape, &in[1], &codes) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &c2, &in[2], &bias_out) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &c2, &in[4], &scale) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &one, &in[5], &lo) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &one, &in[6], &hi) != LY_OK) {
        b->fatal = LY_E_NO_MEMORY;
        return LY_GRAPH_NONE;
    }
    memcpy(codes, b->qcodes, (size_t)n);
    for (int64_t o = 0; o < c2; o++) {
        ((float *)scale)[o] = (float)((double)b->qscale[o] * (bn ? b->bn_factor[o] : 1.0));
        ((float *)bias_out)[o] = bias ? bias[o] : (float)b->scratch_b[o];
    }
    *(float *)lo = q->lo;
    *(float *)hi = q->hi;
    ly_conv2d_params p = conv_params(stride, pad, groups, silu);
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_node(b->g, LY_OP_CONV2D_INT8, name, 7, in, &p, 1, &out));
    return out;
}

/* Conv(c1, c2, k, s, p=(k-1)/2 unless given, groups): Conv2d + BN + SiLU. */
static ly_graph_value conv(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                           int64_t k, int64_t stride, int64_t groups, ly_graph_value residual)
{
    if (b->fatal != LY_OK) return LY_GRAPH_NONE;
    int64_t cin = c1 / groups;
    if (!start_fold(b, c2, cin, k)) return LY_GRAPH_NONE;
    qinput q;
    fold_conv_bn(b, p, c2, cin, k, k, b->g ? b->scratch_w : NULL, b->scratch_b, &q);
    if (!b->g) return 0;
    if (int8_execute(b, &q))
        return add_conv_int8(b, p, x, (int64_t[4]){c2, cin, k, k}, true, NULL, stride, (k - 1) / 2,
                             groups, true, residual, &q);
    ly_graph_value w, bias;
    if (!emit_weights(b, c2, cin, k, &w, &bias)) return LY_GRAPH_NONE;
    char module[KEY_MAX];
    key_of(module, p, ".conv");
    x = quantize_input(b, module, x, &q);
    return add_conv(b, p, x, w, bias, stride, (k - 1) / 2, groups, true, residual);
}

/* RepConvN(c1, c2): SiLU(BN(conv3x3(x)) + BN(conv1x1(x))) as one 3x3 conv. */
static ly_graph_value rep_conv(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2)
{
    if (b->fatal != LY_OK) return LY_GRAPH_NONE;
    char q[2][KEY_MAX], module[2][KEY_MAX];
    if (!start_fold(b, c2, c1, 3)) return LY_GRAPH_NONE;
    double *acc = b->g ? b->scratch_w : NULL;
    qinput in[2];
    key_of(q[0], p, ".conv1");
    fold_conv_bn(b, q[0], c2, c1, 3, 3, acc, b->scratch_b, &in[0]);
    key_of(q[1], p, ".conv2");
    fold_conv_bn(b, q[1], c2, c1, 1, 3, acc, b->scratch_b, &in[1]);
    if (!b->g) return 0;
    ly_graph_value w, bias;
    key_of(module[0], q[0], ".conv");
    key_of(module[1], q[1], ".conv");
    /* On integer codes the branches keep their own scales: two convolutions. */
    if (same_qinput(&in[0], &in[1]) && !int8_execute(b, &in[0])) {
        /* one input quantizer (calibration saw the same input twice): one conv */
        if (!emit_weights(b, c2, c1, 3, &w, &bias)) return LY_GRAPH_NONE;
        x = quantize_input(b, module[0], x, &in[0]);
        return add_conv(b, p, x, w, bias, 1, 1, 1, true, LY_GRAPH_NONE);
    }
    /* Two quantizers: the branches convolve apart, SiLU(conv3x3 + conv1x1). */
    ly_graph_value branch = LY_GRAPH_NONE;
    for (int i = 0; i < 2 && b->fatal == LY_OK; i++) {
        int64_t k = i == 0 ? 3 : 1;
        if (!start_fold(b, c2, c1, k)) return LY_GRAPH_NONE;
        qinput again;
        fold_conv_bn(b, q[i], c2, c1, k, k, b->scratch_w, b->scratch_b, &again);
        b->quant_modules--; /* counted in the merged attempt */
        if (b->fatal != LY_OK) return LY_GRAPH_NONE;
        if (int8_execute(b, &in[i])) {
            branch = add_conv_int8(b, q[i], x, (int64_t[4]){c2, c1, k, k}, true, NULL, 1, k / 2, 1,
                                   false, branch, &in[i]);
            continue;
        }
        if (!emit_weights(b, c2, c1, k, &w, &bias)) return LY_GRAPH_NONE;
        ly_graph_value xq = quantize_input(b, module[i], x, &in[i]);
        branch = add_conv(b, q[i], xq, w, bias, 1, k / 2, 1, false, branch);
    }
    ly_graph_value out = LY_GRAPH_NONE;
    if (b->fatal == LY_OK) note_graph_error(b, ly_graph_unary(b->g, LY_OP_SILU, p, branch, &out));
    return out;
}

/* nn.Conv2d(c1, c2, 1, groups) with bias, no BN, no activation (head outputs). */
static ly_graph_value plain_conv(builder *b, const char *p, ly_graph_value x, int64_t c1,
                                 int64_t c2, int64_t groups)
{
    if (b->fatal != LY_OK) return LY_GRAPH_NONE;
    char key[KEY_MAX];
    int64_t wshape[4] = {c2, c1 / groups, 1, 1};
    qinput q;
    const float *w = module_weight(b, p, wshape, &q);
    key_of(key, p, ".bias");
    const float *bias = take1(b, key, c2);
    if (!b->g) return 0;
    if (w && bias && int8_execute(b, &q))
        return add_conv_int8(b, p, x, wshape, false, bias, 1, 0, groups, false, LY_GRAPH_NONE, &q);
    ly_graph_value wt, bt;
    void *wv, *bv;
    if (ly_graph_constant(b->g, LY_F32, 4, wshape, &wt, &wv) != LY_OK ||
        ly_graph_constant(b->g, LY_F32, 1, &c2, &bt, &bv) != LY_OK) {
        b->fatal = LY_E_NO_MEMORY;
        return LY_GRAPH_NONE;
    }
    if (w) memcpy(wv, w, (size_t)(wshape[0] * wshape[1]) * sizeof(float));
    if (bias) memcpy(bv, bias, (size_t)c2 * sizeof(float));
    x = quantize_input(b, p, x, &q);
    return add_conv(b, p, x, wt, bt, 1, 0, groups, false, LY_GRAPH_NONE);
}

static ly_graph_value slice(builder *b, const char *name, ly_graph_value x, int64_t start,
                            int64_t count)
{
    if (!b->g || b->fatal != LY_OK) return b->g ? LY_GRAPH_NONE : 0;
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_slice(b->g, name, x, 1, start, count, &out));
    return out;
}

static ly_graph_value concat(builder *b, const char *name, int n, const ly_graph_value *in)
{
    if (!b->g || b->fatal != LY_OK) return b->g ? LY_GRAPH_NONE : 0;
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_concat(b->g, name, n, in, 1, &out));
    return out;
}

static ly_graph_value pool(builder *b, const char *name, bool max, ly_graph_value x, int64_t k,
                           int64_t stride, int64_t pad)
{
    if (!b->g || b->fatal != LY_OK) return b->g ? LY_GRAPH_NONE : 0;
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = p.kernel[1] = k;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = pad;
    p.count_include_pad = 1; /* F.avg_pool2d's default; no padding is used anyway */
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, max ? ly_graph_max_pool2d(b->g, name, x, &p, &out)
                            : ly_graph_avg_pool2d(b->g, name, x, &p, &out));
    return out;
}

static ly_graph_value upsample(builder *b, const char *name, ly_graph_value x)
{
    if (!b->g || b->fatal != LY_OK) return b->g ? LY_GRAPH_NONE : 0;
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_upsample_nearest2d(b->g, name, x, 2, &out));
    return out;
}

/* RepNCSP(c1, c2, n): cv3(cat(m(cv1(x)), cv2(x))), m = n RepNBottlenecks
 * y = x + cv2(cv1(x)) with cv1 a RepConvN; the add is the conv's residual. */
static ly_graph_value rep_ncsp(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                               int n)
{
    char q[KEY_MAX], r[KEY_MAX];
    int64_t h = c2 / 2;
    key_of(q, p, ".cv1");
    ly_graph_value a = conv(b, q, x, c1, h, 1, 1, 1, LY_GRAPH_NONE);
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q, "%s.m.%d.cv1", p, i);
        ly_graph_value t = rep_conv(b, q, a, h, h);
        snprintf(r, sizeof r, "%s.m.%d.cv2", p, i);
        a = conv(b, r, t, h, h, 3, 1, 1, a);
    }
    key_of(q, p, ".cv2");
    ly_graph_value c = conv(b, q, x, c1, h, 1, 1, 1, LY_GRAPH_NONE);
    ly_graph_value parts[2] = {a, c};
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 2, parts);
    key_of(q, p, ".cv3");
    return conv(b, q, cat, 2 * h, c2, 1, 1, 1, LY_GRAPH_NONE);
}

/* ELAN (n = 1) and RepNCSPELAN(c1, c2, c3, c4, n): cv1 splits into halves
 * (a, b); cv4 over cat(a, b, cv2(b), cv3(cv2(b))). cat(a, b) is cv1's output
 * itself, so the concat takes it whole and its producer writes in place. */
static ly_graph_value elan(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                           int64_t c3, int64_t c4, bool rep, int n)
{
    char q[KEY_MAX], r[KEY_MAX];
    key_of(q, p, ".cv1");
    ly_graph_value y1 = conv(b, q, x, c1, c2, 1, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".split");
    ly_graph_value half = slice(b, q, y1, c2 / 2, c2 / 2);
    ly_graph_value y2, y3;
    if (rep) {
        key_of(q, p, ".cv2.0");
        ly_graph_value t = rep_ncsp(b, q, half, c2 / 2, c3, n);
        key_of(r, p, ".cv2.1");
        y2 = conv(b, r, t, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
        key_of(q, p, ".cv3.0");
        t = rep_ncsp(b, q, y2, c3, c3, n);
        key_of(r, p, ".cv3.1");
        y3 = conv(b, r, t, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
    } else {
        key_of(q, p, ".cv2");
        y2 = conv(b, q, half, c2 / 2, c3, 3, 1, 1, LY_GRAPH_NONE);
        key_of(q, p, ".cv3");
        y3 = conv(b, q, y2, c3, c3, 3, 1, 1, LY_GRAPH_NONE);
    }
    ly_graph_value parts[3] = {y1, y2, y3};
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 3, parts);
    key_of(q, p, ".cv4");
    return conv(b, q, cat, c2 + 2 * c3, c4, 1, 1, 1, LY_GRAPH_NONE);
}

/* AConv: avg_pool2d(2, 1, 0) then Conv 3x3 s2 p1. ADown (size c): the pooled
 * map's halves go through Conv 3x3 s2 and max_pool2d(3, 2, 1) + Conv 1x1. */
static ly_graph_value down(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2)
{
    char q[KEY_MAX];
    key_of(q, p, ".avg_pool");
    ly_graph_value pooled = pool(b, q, false, x, 2, 1, 0);
    if (!b->cfg->adown) {
        key_of(q, p, ".cv");
        return conv(b, q, pooled, c1, c2, 3, 2, 1, LY_GRAPH_NONE);
    }
    key_of(q, p, ".x1");
    ly_graph_value x1 = slice(b, q, pooled, 0, c1 / 2);
    key_of(q, p, ".x2");
    ly_graph_value x2 = slice(b, q, pooled, c1 / 2, c1 / 2);
    key_of(q, p, ".cv1");
    ly_graph_value y1 = conv(b, q, x1, c1 / 2, c2 / 2, 3, 2, 1, LY_GRAPH_NONE);
    key_of(q, p, ".max_pool");
    ly_graph_value m = pool(b, q, true, x2, 3, 2, 1);
    key_of(q, p, ".cv2");
    ly_graph_value y2 = conv(b, q, m, c1 / 2, c2 / 2, 1, 1, 1, LY_GRAPH_NONE);
    ly_graph_value parts[2] = {y1, y2};
    key_of(q, p, ".cat");
    return concat(b, q, 2, parts);
}

/* SPPELAN(c1, c2, c3): cv5(cat(y, mp(y), mp(mp(y)), mp(mp(mp(y))))), y = cv1(x),
 * mp = max_pool2d(5, 1, 2). */
static ly_graph_value sppelan(builder *b, const char *p, ly_graph_value x, int64_t c1, int64_t c2,
                              int64_t c3)
{
    char q[KEY_MAX];
    ly_graph_value f[4];
    key_of(q, p, ".cv1");
    f[0] = conv(b, q, x, c1, c2, 1, 1, 1, LY_GRAPH_NONE);
    for (int i = 1; i < 4; i++) {
        snprintf(q, sizeof q, "%s.pool%d", p, i);
        f[i] = pool(b, q, true, f[i - 1], 5, 1, 2);
    }
    key_of(q, p, ".cat");
    ly_graph_value cat = concat(b, q, 4, f);
    key_of(q, p, ".cv5");
    return conv(b, q, cat, 4 * c2, c3, 1, 1, 1, LY_GRAPH_NONE);
}

/* ---- head decode ----------------------------------------------------------- *
 *
 * predictions [1, 4 + nc, A] from the head levels P3, P4, P5 (raw [1, 64 + nc,
 * h, w]), in standard ops, so every engine and exporter sees what it computes:
 * per level the DFL distances of the 64 box channels, boxes = (anchor -/+
 * distances) * stride as xyxy, anchors row-major at (x + 0.5, y + 0.5) grid
 * units; the levels joined, then the sigmoid of the class logits. */

static ly_graph_value op1(builder *b, ly_op op, const char *name, ly_graph_value x)
{
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_unary(b->g, op, name, x, &out));
    return out;
}

static ly_graph_value op2(builder *b, ly_op op, const char *name, ly_graph_value x,
                          ly_graph_value y)
{
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_binary(b->g, op, name, x, y, &out));
    return out;
}

static ly_graph_value join(builder *b, const char *name, int n, const ly_graph_value *in,
                           int64_t axis)
{
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_concat(b->g, name, n, in, axis, &out));
    return out;
}

static ly_graph_value part(builder *b, const char *name, ly_graph_value x, int64_t axis,
                           int64_t start, int64_t count)
{
    ly_graph_value out = LY_GRAPH_NONE;
    note_graph_error(b, ly_graph_slice(b->g, name, x, axis, start, count, &out));
    return out;
}

static ly_graph_value scalar(builder *b, float value)
{
    int64_t one = 1;
    ly_graph_value v = LY_GRAPH_NONE;
    void *data;
    note_graph_error(b, ly_graph_constant(b->g, LY_F32, 1, &one, &v, &data));
    if (b->fatal == LY_OK) *(float *)data = value;
    return v;
}

/* The decode (levels at strides 8, 16, 32); the anchor grids follow each
 * level's shape, so one graph serves every input size. */
static ly_graph_value decode(builder *b, const ly_graph_value raw[3])
{
    int64_t nc = b->nc, R = REG_MAX;
    ly_graph_value boxes[3], logits[3];
    for (int l = 0; l < 3 && b->fatal == LY_OK; l++) {
        int64_t stride = (int64_t)8 << l;
        char q[KEY_MAX];
        snprintf(q, sizeof q, "head.decode%d", l);
        int64_t flat_shape[3] = {1, 4 * R + nc, -1};
        ly_graph_value flat = LY_GRAPH_NONE;
        note_graph_error(b, ly_graph_reshape(b->g, q, raw[l], 3, flat_shape, &flat));
        ly_graph_value box = part(b, q, flat, 1, 0, 4 * R);
        logits[l] = part(b, q, flat, 1, 4 * R, nc);
        ly_graph_value dist = op1(b, LY_OP_DFL, q, box);
        ly_graph_value lt = part(b, q, dist, 1, 0, 2), rb = part(b, q, dist, 1, 2, 2);
        ly_graph_value grid = op1(b, LY_OP_ANCHOR_GRID, q, raw[l]);
        ly_graph_value corners[2] = {op2(b, LY_OP_SUB, q, grid, lt),
                                     op2(b, LY_OP_ADD, q, grid, rb)};
        ly_graph_value xyxy = join(b, q, 2, corners, 1);
        boxes[l] = op2(b, LY_OP_MUL, q, xyxy, scalar(b, (float)stride));
    }
    if (b->fatal != LY_OK) return LY_GRAPH_NONE;
    ly_graph_value parts[2] = {
        join(b, "head.decode.boxes", 3, boxes, 2),
        op1(b, LY_OP_SIGMOID, "head.decode.scores", join(b, "head.decode.logits", 3, logits, 2))};
    return join(b, "head.decode", 2, parts, 1);
}

/* ---- the network ---------------------------------------------------------- */

static ly_graph_value head_level(builder *b, int level, ly_graph_value x, int64_t ch)
{
    char p[KEY_MAX], q[KEY_MAX];
    int64_t bh = b->box_hidden, ch_ = b->class_hidden;
    snprintf(p, sizeof p, "head.cv2.%d", level);
    key_of(q, p, ".0");
    ly_graph_value t = conv(b, q, x, ch, bh, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".1");
    t = conv(b, q, t, bh, bh, 3, 1, 4, LY_GRAPH_NONE);
    key_of(q, p, ".2");
    ly_graph_value box = plain_conv(b, q, t, bh, 4 * REG_MAX, 4);
    snprintf(p, sizeof p, "head.cv3.%d", level);
    key_of(q, p, ".0");
    t = conv(b, q, x, ch, ch_, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".1");
    t = conv(b, q, t, ch_, ch_, 3, 1, 1, LY_GRAPH_NONE);
    key_of(q, p, ".2");
    ly_graph_value cls = plain_conv(b, q, t, ch_, b->nc, 1);
    ly_graph_value parts[2] = {box, cls};
    snprintf(p, sizeof p, "head.raw_p%d", level + 3);
    return concat(b, p, 2, parts);
}

static void build_network(builder *b)
{
    const yolo9_config *c = b->cfg;
    int n = c->repeat;
    ly_graph_value x = 0;
    if (b->g) note_graph_error(b, ly_graph_input(b->g, "images", LY_F32, 4, &x));

    /* Backbone. */
    x = conv(b, "backbone.conv0", x, 3, c->conv0, 3, 2, 1, LY_GRAPH_NONE);
    x = conv(b, "backbone.conv1", x, c->conv0, c->conv1, 3, 2, 1, LY_GRAPH_NONE);
    if (c->first_is_elan)
        x = elan(b, "backbone.elan1", x, c->conv1, c->first_out, c->first_out / 2, c->first_out,
                 false, 1);
    else
        x = elan(b, "backbone.elan1", x, c->conv1, c->first_part, c->first_part / 2, c->first_out,
                 true, n);
    x = down(b, "backbone.down2", x, c->first_out, c->stage[0][0]);
    ly_graph_value b3 = elan(b, "backbone.elan2", x, c->stage[0][0], c->stage[0][2],
                             c->stage[0][2] / 2, c->stage[0][1], true, n);
    x = down(b, "backbone.down3", b3, c->stage[0][1], c->stage[1][0]);
    ly_graph_value b4 = elan(b, "backbone.elan3", x, c->stage[1][0], c->stage[1][2],
                             c->stage[1][2] / 2, c->stage[1][1], true, n);
    x = down(b, "backbone.down4", b4, c->stage[1][1], c->stage[2][0]);
    x = elan(b, "backbone.elan4", x, c->stage[2][0], c->stage[2][2], c->stage[2][2] / 2,
             c->stage[2][1], true, n);
    ly_graph_value b5 = sppelan(b, "backbone.spp", x, c->stage[2][1], c->spp_out / 2, c->spp_out);

    /* Neck: top-down, then bottom-up (upsampled or downsampled map first in each concat). */
    ly_graph_value parts[2];
    parts[0] = upsample(b, "neck.up1", b5);
    parts[1] = b4;
    x = concat(b, "neck.cat_up1", 2, parts);
    ly_graph_value n4 = elan(b, "neck.elan_up1", x, c->spp_out + c->stage[1][1], c->up1[1],
                             c->up1[1] / 2, c->up1[0], true, n);
    parts[0] = upsample(b, "neck.up2", n4);
    parts[1] = b3;
    x = concat(b, "neck.cat_up2", 2, parts);
    ly_graph_value p3 = elan(b, "neck.elan_up2", x, c->up1[0] + c->stage[0][1], c->up2[1],
                             c->up2[1] / 2, c->up2[0], true, n);
    parts[0] = down(b, "neck.down1", p3, c->up2[0], c->down1_out);
    parts[1] = n4;
    x = concat(b, "neck.cat_down1", 2, parts);
    ly_graph_value p4 = elan(b, "neck.elan_down1", x, c->down1_out + c->up1[0], c->down1[1],
                             c->down1[1] / 2, c->down1[0], true, n);
    parts[0] = down(b, "neck.down2", p4, c->down1[0], c->down2_out);
    parts[1] = b5;
    x = concat(b, "neck.cat_down2", 2, parts);
    ly_graph_value p5 = elan(b, "neck.elan_down2", x, c->down2_out + c->spp_out, c->down2[1],
                             c->down2[1] / 2, c->down2[0], true, n);

    /* Head and decode. */
    int64_t ch[3] = {c->up2[0], c->down1[0], c->down2[0]};
    ly_graph_value feats[3] = {p3, p4, p5}, raw[3];
    for (int i = 0; i < 3; i++)
        raw[i] = head_level(b, i, feats[i], ch[i]);
    if (!b->g || b->fatal != LY_OK) return;

    ly_graph_value pred = decode(b, raw);
    if (b->fatal != LY_OK) return;
    note_graph_error(b, ly_graph_output(b->g, pred, "predictions"));
    note_graph_error(b, ly_graph_output(b->g, raw[0], "raw_p3"));
    note_graph_error(b, ly_graph_output(b->g, raw[1], "raw_p4"));
    note_graph_error(b, ly_graph_output(b->g, raw[2], "raw_p5"));
}

/* Head widths (DDetect): the box tower is a quarter of the first level's
 * channels rounded up to the 4 groups, at least 4 * reg_max; the class tower
 * is max(ch0, min(nc, 100)) unless the checkpoint says otherwise (LibreYOLO
 * reads it from the tensors, for towers reused under a new nc). */
static void head_widths(builder *b, const entry *class_tower)
{
    int64_t ch0 = b->cfg->up2[0];
    int64_t quarter = (ch0 / 4 + 3) / 4 * 4;
    b->box_hidden = quarter > 4 * REG_MAX ? quarter : 4 * REG_MAX;
    int64_t floor_nc = b->nc < 100 ? b->nc : 100;
    b->class_hidden = ch0 > floor_nc ? ch0 : floor_nc;
    if (class_tower && class_tower->view.ndim == 4 && class_tower->view.shape[0] > 0)
        b->class_hidden = class_tower->view.shape[0];
}

static const char *detect_size(builder *b)
{
    entry *conv0 = find_entry(b, "backbone.conv0.conv.weight");
    if (!conv0 || conv0->view.ndim != 4) return NULL;
    switch (conv0->view.shape[0]) {
    case 16:
        return "t";
    case 64:
        return "c";
    case 32: {
        entry *e = find_entry(b, "backbone.elan1.cv1.conv.weight");
        if (!e || e->view.ndim != 4) return NULL;
        return e->view.shape[0] == 64 ? "s" : e->view.shape[0] == 128 ? "m" : NULL;
    }
    default:
        return NULL;
    }
}

ly_status ly_yolo9_build_state(const ly_yolo9_state *state, const char *size, int64_t nc_meta,
                               ly_yolo9 **out)
{
    if (!state || !out || (state->count > 0 && !state->at))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_build: NULL argument");
    *out = NULL;
    builder b = {.state = state, .quant = state->quant};
    ly_yolo9 *net = NULL;
    ly_status st = load_entries(&b, state);
    if (st != LY_OK) goto done;

    if (size) {
        b.cfg = find_config(size);
        if (!b.cfg) {
            st = ly_set_error(
                LY_E_UNSUPPORTED,
                "ly_yolo9_build: size '%s' unsupported (LibreYOLO9 sizes: t, s, m, c)", size);
            goto done;
        }
    } else {
        const char *detected = detect_size(&b);
        if (!detected) {
            st = ly_set_error(
                LY_E_FORMAT,
                "ly_yolo9_build: cannot tell the LibreYOLO9 size: no metadata 'size', and "
                "backbone.conv0.conv.weight / backbone.elan1.cv1.conv.weight have "
                "widths no size has (t 16, s 32/64, m 32/128, c 64)");
            goto done;
        }
        b.cfg = find_config(detected);
    }

    entry *cls_out = find_entry(&b, "head.cv3.0.2.weight");
    if (cls_out && cls_out->view.ndim == 4 && cls_out->view.shape[0] > 0)
        b.nc = cls_out->view.shape[0];
    else
        b.nc = nc_meta > 0 ? nc_meta : 80; /* the missing key is reported below */
    if (nc_meta > 0 && nc_meta != b.nc) {
        st = ly_set_error(
            LY_E_FORMAT,
            "ly_yolo9_build: metadata nc is %lld but head.cv3.0.2.weight has %lld classes",
            (long long)nc_meta, (long long)b.nc);
        goto done;
    }
    head_widths(&b, find_entry(&b, "head.cv3.0.0.conv.weight"));

    net = calloc(1, sizeof *net);
    if (!net) {
        st = ly_set_error(LY_E_NO_MEMORY, "ly_yolo9_build: out of memory");
        goto done;
    }
    st = ly_graph_create(&net->graph);
    if (st != LY_OK) goto done;
    snprintf(net->size, sizeof net->size, "%s", b.cfg->size);
    net->nc = b.nc;
    net->reg_max = REG_MAX;
    b.g = net->graph;
    build_network(&b);
    if (b.fatal != LY_OK) {
        st = b.fatal;
        goto done;
    }
    for (size_t i = 0; i < b.n_entries; i++)
        if (!b.entries[i].used && !ignorable(b.entries[i].name)) {
            char got[96];
            add_problem(&b, "unexpected key '%s' %s", b.entries[i].stored,
                        ly_shape_str(&b.entries[i].view, got, sizeof got));
        }
    if (b.issues.count > 0) {
        st = ly_set_error(
            LY_E_FORMAT,
            "ly_yolo9_build: the state dict does not fit LibreYOLO9%s with %lld classes "
            "(%zu problem%s): %s%s",
            b.cfg->size, (long long)b.nc, b.issues.count, b.issues.count == 1 ? "" : "s",
            b.issues.text, b.issues.count > 12 ? "; ..." : "");
        goto done;
    }
    net->quant_modules = b.quant_modules;
    *out = net;
    net = NULL;
done:
    if (net) {
        ly_graph_free(net->graph);
        free(net);
    }
    free_entries(&b);
    return st;
}

ly_status ly_yolo9_expected_keys(const char *size, int64_t nc, ly_yolo9_key_fn visit, void *user)
{
    builder b = {.visit = visit, .visit_user = user, .nc = nc};
    b.cfg = find_config(size);
    if (!b.cfg)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_expected_keys: size '%s' unsupported (t, s, m, c)",
                            size ? size : "(null)");
    if (nc < 1 || !visit)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_expected_keys: nc %lld or visit NULL",
                            (long long)nc);
    head_widths(&b, NULL);
    build_network(&b);
    free_entries(&b);
    return b.fatal;
}
