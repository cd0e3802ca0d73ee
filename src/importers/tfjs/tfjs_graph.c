/* SPDX-License-Identifier: MIT */
/* TF.js graph -> ly_graph (tfjs_graph.h). */
#include "importers/tfjs/tfjs_graph.h"

#include "core/checked.h"
#include "core/core.h"
#include "core/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Folded constants stay small (shape arithmetic), far below any weight. */
#define MAX_FOLDED_ELEMENTS (1 << 20)
/* Spatial extents and sizes far beyond any detector's: shape arithmetic on
 * them cannot overflow. */
#define MAX_EXTENT (1 << 16)
#define MAX_NAME 512

/* A convolution whose output nobody has read yet, so a bias, an activation
 * and a residual can still be folded into it. */
typedef struct pending_conv {
    char *name;
    ly_graph_value x;
    float *weight; /* OIHW */
    int64_t wshape[4];
    float *bias; /* [O] or NULL */
    ly_conv2d_params params;
    ly_graph_value residual;
} pending_conv;

typedef enum sym_kind { SYM_UNSET, SYM_CONST, SYM_TENSOR } sym_kind;

/* What one TensorFlow value is. */
typedef struct sym {
    sym_kind kind;
    int ndim; /* TF (logical) shape */
    int64_t shape[LY_MAX_DIMS];
    /* SYM_CONST: exactly one of f / i (owned by the context) */
    const float *f;
    const int64_t *i;
    /* SYM_TENSOR: the graph value holds it NCHW-like: logical axis d is
     * physical axis perm[d]. While `conv` is pending, v is LY_GRAPH_NONE. */
    ly_graph_value v;
    int perm[LY_MAX_DIMS];
    /* A Pad not applied yet (logical axes), for the Conv2D or pool reading it. */
    bool padded;
    int64_t pad[LY_MAX_DIMS][2];
    float pad_value;
    pending_conv *conv;
    int uses; /* readers in the graph, plus one per signature output */
} sym;

typedef struct node_state {
    sym *out;
    int n_out;
    int *uses; /* per output index */
    int n_uses;
    int visit; /* 0 new, 1 on the stack, 2 ordered */
} node_state;

typedef struct ctx {
    const ly_tfjs_model *m;
    ly_graph *g;
    node_state *st;
    const ly_tfjs_node *node; /* being lowered, for messages */
    const char *output;       /* the signature output being laid out (node NULL) */
    void **allocs;
    size_t n_allocs, cap_allocs;
} ctx;

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static ly_status node_error(ctx *c, ly_status status, const char *fmt, ...) LY_PRINTF(3, 4);
static ly_status node_error(ctx *c, ly_status status, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (!c->node) return ly_set_error(status, "%s: %s", c->m->path, message);
    return ly_set_error(status, "%s: node '%s' (%s): %s", c->m->path, c->node->name, c->node->op,
                        message);
}

#define UNSUPPORTED(...) node_error(c, LY_E_UNSUPPORTED, __VA_ARGS__)
#define MALFORMED(...) node_error(c, LY_E_FORMAT, __VA_ARGS__)

static void *ctx_alloc(ctx *c, size_t bytes)
{
    if (c->n_allocs == c->cap_allocs) {
        size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 64;
        void **grown = realloc(c->allocs, cap * sizeof *grown);
        if (!grown) return NULL;
        c->allocs = grown;
        c->cap_allocs = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) c->allocs[c->n_allocs++] = p;
    return p;
}

static void free_pending(pending_conv *pc)
{
    if (!pc) return;
    free(pc->name);
    free(pc->weight);
    free(pc->bias);
    free(pc);
}

static size_t node_index(const ctx *c, const ly_tfjs_node *n)
{
    return (size_t)(n - c->m->nodes);
}

/* Saturates at INT64_MAX (shapes are bounded, but never trusted). */
static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(n, shape[d], &n)) return INT64_MAX;
    return n;
}

static void identity_perm(int *perm, int ndim)
{
    for (int d = 0; d < ndim; d++)
        perm[d] = d;
}

static bool same_perm(const int *a, const int *b, int ndim)
{
    for (int d = 0; d < ndim; d++)
        if (a[d] != b[d]) return false;
    return true;
}

static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- inputs of the current node ------------------------------------------ */

static ly_status resolve(ctx *c, const ly_tfjs_node *n, const char *ref, size_t *producer,
                         int *index)
{
    char name[MAX_NAME];
    TRY(ly_tfjs_split_ref(c->m, n, ref, name, sizeof name, index));
    const ly_tfjs_node *p = ly_tfjs_node_find(c->m, name);
    if (!p) return MALFORMED("input '%s' names no node", ref);
    *producer = node_index(c, p);
    return LY_OK;
}

static ly_status input_sym(ctx *c, int k, sym **out)
{
    const ly_tfjs_node *n = c->node;
    if (k >= n->n_inputs)
        return MALFORMED("expected at least %d inputs, it has %d", k + 1, n->n_inputs);
    size_t p = 0;
    int index = 0;
    TRY(resolve(c, n, n->inputs[k], &p, &index));
    node_state *s = &c->st[p];
    if (index >= s->n_out)
        return MALFORMED("input '%s': node '%s' has %d output(s)", n->inputs[k],
                         c->m->nodes[p].name, s->n_out);
    *out = &s->out[index];
    return LY_OK;
}

static ly_status const_input(ctx *c, int k, const char *what, sym **out)
{
    TRY(input_sym(c, k, out));
    if ((*out)->kind != SYM_CONST)
        return UNSUPPORTED("%s (input %d) is computed, expected a constant", what, k);
    return LY_OK;
}

/* Integers of a constant (any shape), at most `max`. */
static ly_status const_ints(ctx *c, int k, const char *what, int64_t *out, int max, int *count)
{
    sym *s = NULL;
    TRY(const_input(c, k, what, &s));
    int64_t n = numel_of(s->ndim, s->shape);
    if (!s->i || n > max)
        return UNSUPPORTED("%s (input %d): expected at most %d integers", what, k, max);
    for (int64_t j = 0; j < n; j++)
        out[j] = s->i[j];
    *count = (int)n;
    return LY_OK;
}

static ly_status const_scalar_int(ctx *c, int k, const char *what, int64_t *out)
{
    int count;
    int64_t v[1];
    TRY(const_ints(c, k, what, v, 1, &count));
    if (count != 1) return UNSUPPORTED("%s (input %d): expected one integer", what, k);
    *out = v[0];
    return LY_OK;
}

static ly_status attr_text(ctx *c, const char *key, const char *fallback, char *out, size_t size)
{
    bool present;
    TRY(ly_tfjs_attr_string(c->m, c->node, key, out, size, &present));
    if (!present) snprintf(out, size, "%s", fallback);
    return LY_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

static ly_status emit_conv(ctx *c, sym *s)
{
    pending_conv *pc = s->conv;
    ly_graph_value w, b = LY_GRAPH_NONE;
    void *data;
    TRY(ly_graph_constant(c->g, LY_F32, 4, pc->wshape, &w, &data));
    memcpy(data, pc->weight, (size_t)numel_of(4, pc->wshape) * sizeof(float));
    if (pc->bias) {
        TRY(ly_graph_constant(c->g, LY_F32, 1, pc->wshape, &b, &data));
        memcpy(data, pc->bias, (size_t)pc->wshape[0] * sizeof(float));
    }
    TRY(ly_graph_conv2d(c->g, pc->name, pc->x, w, b, pc->residual, &pc->params, &s->v));
    free_pending(pc);
    s->conv = NULL;
    return LY_OK;
}

static ly_status materialize(ctx *c, sym *s)
{
    if (s->kind != SYM_TENSOR) return UNSUPPORTED("a constant operand where a tensor is expected");
    if (s->conv) TRY(emit_conv(c, s));
    return LY_OK;
}

static bool pads_nonzero(const sym *s)
{
    if (!s->padded) return false;
    for (int d = 0; d < s->ndim; d++)
        if (s->pad[d][0] || s->pad[d][1]) return true;
    return false;
}

/* The value of `s` in layout `want` (a physical transpose when it is in
 * another), without a pending pad. */
static ly_status value_in(ctx *c, sym *s, const int *want, ly_graph_value *out)
{
    TRY(materialize(c, s));
    if (pads_nonzero(s))
        return UNSUPPORTED("reads the output of a Pad (only Conv2D, DepthwiseConv2dNative, "
                           "MaxPool and AvgPool can)");
    if (same_perm(s->perm, want, s->ndim)) {
        *out = s->v;
        return LY_OK;
    }
    int inverse[LY_MAX_DIMS], t[LY_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++)
        inverse[want[d]] = d;
    for (int j = 0; j < s->ndim; j++)
        t[j] = s->perm[inverse[j]];
    char name[MAX_NAME];
    snprintf(name, sizeof name, "%s/layout", c->node ? c->node->name : c->output);
    return ly_graph_permute(c->g, name, s->v, s->ndim, t, out);
}

/* out = in for a pass-through op: a pending convolution moves along when
 * this is its only reader, and is emitted first otherwise. */
static ly_status forward(ctx *c, sym *in, sym *out)
{
    if (in->kind == SYM_TENSOR && in->conv && in->uses != 1) TRY(emit_conv(c, in));
    int uses = out->uses;
    *out = *in;
    out->uses = uses;
    in->conv = NULL; /* moved (in had no other reader) */
    return LY_OK;
}

static bool foldable(const sym *s)
{
    return s->kind == SYM_TENSOR && s->conv && s->uses == 1;
}

/* ---- ops ------------------------------------------------------------------- */

static ly_status op_placeholder(ctx *c, sym *out)
{
    const ly_tfjs_node *n = c->node;
    char dtype[32];
    bool present;
    TRY(ly_tfjs_attr_type(c->m, n, "dtype", dtype, sizeof dtype, &present));
    if (present && strcmp(dtype, "DT_FLOAT") != 0)
        return UNSUPPORTED("input of type %s, expected DT_FLOAT", dtype);
    out->ndim = -1;
    const cJSON *shape = n->attr ? cJSON_GetObjectItemCaseSensitive(n->attr, "shape") : NULL;
    const cJSON *inner = shape ? cJSON_GetObjectItemCaseSensitive(shape, "shape") : NULL;
    const cJSON *dims = inner ? cJSON_GetObjectItemCaseSensitive(inner, "dim") : NULL;
    if (cJSON_IsArray(dims)) {
        if (cJSON_GetArraySize(dims) > LY_MAX_DIMS)
            return UNSUPPORTED("input of more than %d dimensions", LY_MAX_DIMS);
        out->ndim = 0;
        const cJSON *d;
        cJSON_ArrayForEach(d, dims)
        {
            const cJSON *size = cJSON_GetObjectItemCaseSensitive(d, "size");
            long long v = 0;
            if (cJSON_IsString(size) && size->valuestring) {
                char *end;
                v = strtoll(size->valuestring, &end, 10);
                if (*end || end == size->valuestring) v = -2;
            } else if (cJSON_IsNumber(size)) {
                int64_t whole;
                v = ly_json_int(size, &whole) ? whole : -2;
            } else if (size) {
                v = -2;
            }
            if (v < -1) return MALFORMED("attr 'shape': dim %d is not a size", out->ndim);
            out->shape[out->ndim++] = v;
        }
    } else {
        /* The signature says it. */
        char key[MAX_NAME];
        snprintf(key, sizeof key, "%s:0", n->name);
        for (size_t i = 0; i < c->m->n_inputs; i++)
            if (strcmp(c->m->inputs[i].key, key) == 0 && c->m->inputs[i].ndim >= 0) {
                out->ndim = c->m->inputs[i].ndim;
                memcpy(out->shape, c->m->inputs[i].shape, sizeof out->shape);
            }
    }
    if (out->ndim < 1) return UNSUPPORTED("input without a known shape");
    if (out->shape[0] == -1) out->shape[0] = 1; /* the batch: we run one image */
    for (int d = 0; d < out->ndim; d++)
        if (out->shape[d] < 1 || out->shape[d] > MAX_EXTENT)
            return UNSUPPORTED("input dimension %d is %lld: expected 1..%d (dynamic or empty "
                               "shapes are not supported)",
                               d, (long long)out->shape[d], MAX_EXTENT);
    out->kind = SYM_TENSOR;
    identity_perm(out->perm, out->ndim);
    return ly_graph_input(c->g, n->name, LY_F32, out->ndim, &out->v);
}

static ly_status op_const(ctx *c, sym *out)
{
    const ly_tfjs_weight *w = ly_tfjs_weight_find(c->m, c->node->name);
    if (!w) return MALFORMED("no weights in the manifest");
    out->kind = SYM_CONST;
    out->ndim = w->ndim;
    memcpy(out->shape, w->shape, sizeof out->shape);
    if (w->dtype == LY_F32) {
        out->f = w->data;
        return LY_OK;
    }
    int64_t n = numel_of(w->ndim, w->shape);
    int64_t *v = ctx_alloc(c, (size_t)n * sizeof *v);
    if (!v) return MALFORMED("out of memory");
    for (int64_t j = 0; j < n; j++)
        v[j] = w->dtype == LY_I32 ? ((const int32_t *)w->data)[j] : ((const uint8_t *)w->data)[j];
    out->i = v;
    return LY_OK;
}

static ly_status op_identity(ctx *c, sym *out)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    return forward(c, x, out);
}

static ly_status op_transpose(ctx *c, sym *out)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    if (x->kind != SYM_TENSOR) return UNSUPPORTED("transposing a constant");
    int64_t perm[LY_MAX_DIMS];
    int count;
    TRY(const_ints(c, 1, "perm", perm, LY_MAX_DIMS, &count));
    bool seen[LY_MAX_DIMS] = {false};
    if (count != x->ndim) return MALFORMED("perm has %d entries for a %d-d input", count, x->ndim);
    for (int d = 0; d < count; d++) {
        if (perm[d] < 0 || perm[d] >= count || seen[perm[d]])
            return MALFORMED("perm is not a permutation of 0..%d", count - 1);
        seen[perm[d]] = true;
    }
    TRY(forward(c, x, out));
    sym in = *out;
    for (int d = 0; d < count; d++) {
        out->shape[d] = in.shape[perm[d]];
        out->perm[d] = in.perm[perm[d]];
        out->pad[d][0] = in.pad[perm[d]][0];
        out->pad[d][1] = in.pad[perm[d]][1];
    }
    return LY_OK;
}

static ly_status op_pad(ctx *c, sym *out, bool v2)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    if (x->kind != SYM_TENSOR) return UNSUPPORTED("padding a constant");
    int64_t pads[2 * LY_MAX_DIMS];
    int count;
    TRY(const_ints(c, 1, "paddings", pads, 2 * LY_MAX_DIMS, &count));
    if (count != 2 * x->ndim)
        return MALFORMED("paddings has %d values for a %d-d input, expected %d", count, x->ndim,
                         2 * x->ndim);
    float value = 0.0f;
    if (v2) {
        sym *v = NULL;
        TRY(const_input(c, 2, "constant_values", &v));
        if (!v->f || numel_of(v->ndim, v->shape) != 1)
            return UNSUPPORTED("constant_values: expected one float");
        value = v->f[0];
    }
    char mode[32];
    TRY(attr_text(c, "mode", "CONSTANT", mode, sizeof mode));
    if (strcmp(mode, "CONSTANT") != 0) return UNSUPPORTED("padding mode %s", mode);
    TRY(materialize(c, x));
    bool had = pads_nonzero(x);
    if (had && x->pad_value != value && !(isnan(value) && isnan(x->pad_value)))
        return UNSUPPORTED("a Pad with %g after a Pad with %g", (double)value,
                           (double)x->pad_value);
    TRY(forward(c, x, out));
    for (int d = 0; d < out->ndim; d++) {
        if (pads[2 * d] < 0 || pads[2 * d + 1] < 0) return UNSUPPORTED("negative padding (a crop)");
        out->pad[d][0] += pads[2 * d];
        out->pad[d][1] += pads[2 * d + 1];
        out->shape[d] += pads[2 * d] + pads[2 * d + 1];
    }
    out->padded = true;
    out->pad_value = value;
    return LY_OK;
}

/* Layout of a 4-d NHWC or NCHW op: the permutation wanted and the axes. */
typedef struct layout4 {
    int perm[4];
    int h, w, ch;
} layout4;

static ly_status data_format(ctx *c, layout4 *l)
{
    char format[16];
    TRY(attr_text(c, "data_format", "NHWC", format, sizeof format));
    if (strcmp(format, "NHWC") == 0) {
        *l = (layout4){{0, 2, 3, 1}, 1, 2, 3};
    } else if (strcmp(format, "NCHW") == 0) {
        *l = (layout4){{0, 1, 2, 3}, 2, 3, 1};
    } else {
        return UNSUPPORTED("data_format %s (NHWC and NCHW are)", format);
    }
    return LY_OK;
}

/* A spatial op's input in layout `l` with its pending pad per spatial axis. */
static ly_status spatial_input(ctx *c, sym *x, const layout4 *l, ly_graph_value *v,
                               int64_t pad[2][2], float *pad_value, bool *padded)
{
    if (x->kind != SYM_TENSOR || x->ndim != 4)
        return UNSUPPORTED("input of %d dimensions, expected a 4-d tensor", x->ndim);
    TRY(materialize(c, x));
    *padded = pads_nonzero(x);
    *pad_value = x->pad_value;
    for (int d = 0; d < 4; d++)
        if ((d == 0 || d == l->ch) && (x->pad[d][0] || x->pad[d][1]))
            return UNSUPPORTED("padding along the batch or channel axis");
    pad[0][0] = x->pad[l->h][0];
    pad[0][1] = x->pad[l->h][1];
    pad[1][0] = x->pad[l->w][0];
    pad[1][1] = x->pad[l->w][1];
    if (same_perm(x->perm, l->perm, 4)) {
        *v = x->v;
        return LY_OK;
    }
    if (*padded) return UNSUPPORTED("a padded input in another layout than the op's");
    return value_in(c, x, l->perm, v);
}

/* strides/dilations/ksize attrs: [1, h, w, 1] (NHWC) or [1, 1, h, w]. */
static ly_status window_attr(ctx *c, const char *key, const layout4 *l, int64_t fallback,
                             int64_t out[2])
{
    int64_t v[8];
    int count;
    bool present;
    TRY(ly_tfjs_attr_int_list(c->m, c->node, key, v, 8, &count, &present));
    if (!present || count == 0) {
        out[0] = out[1] = fallback;
        return LY_OK;
    }
    if (count != 4 || v[0] != 1 || v[l->ch] != 1 || v[l->h] < 1 || v[l->w] < 1)
        return UNSUPPORTED("attr '%s' must be 4 positive values with 1 on batch and channels", key);
    out[0] = v[l->h];
    out[1] = v[l->w];
    return LY_OK;
}

/* Symmetric padding p per spatial axis equivalent to (before, after), given
 * the TF padding attr. `input` is the unpadded extent. */
static ly_status resolve_padding(ctx *c, const layout4 *l, const int64_t input[2],
                                 int64_t pending[2][2], const int64_t kernel[2],
                                 const int64_t stride[2], const int64_t dilation[2],
                                 int64_t padding[2], int64_t output[2], bool *same)
{
    char mode[16];
    TRY(attr_text(c, "padding", "VALID", mode, sizeof mode));
    int64_t explicit_pads[8] = {0};
    *same = strcmp(mode, "SAME") == 0;
    if (strcmp(mode, "EXPLICIT") == 0) {
        int count;
        bool present;
        TRY(ly_tfjs_attr_int_list(c->m, c->node, "explicit_paddings", explicit_pads, 8, &count,
                                  &present));
        if (count != 8) return MALFORMED("padding EXPLICIT without 8 explicit_paddings");
    } else if (!*same && strcmp(mode, "VALID") != 0) {
        return UNSUPPORTED("padding %s", mode);
    }
    int axes[2] = {l->h, l->w};
    for (int a = 0; a < 2; a++) {
        int64_t span = dilation[a] * (kernel[a] - 1) + 1;
        int64_t in = input[a] + pending[a][0] + pending[a][1];
        int64_t before = pending[a][0] + explicit_pads[2 * axes[a]];
        int64_t after = pending[a][1] + explicit_pads[2 * axes[a] + 1];
        if (*same) {
            int64_t out = (in + stride[a] - 1) / stride[a];
            int64_t total = (out - 1) * stride[a] + span - in;
            if (total < 0) total = 0;
            before += total / 2;
            after += total - total / 2;
        }
        int64_t room = input[a] + before + after - span;
        if (room < 0) return UNSUPPORTED("the window is larger than the padded input");
        output[a] = room / stride[a] + 1;
        /* Symmetric `before` gives the same windows when it gives as many. */
        int64_t sym_room = input[a] + 2 * before - span;
        if (sym_room < 0 || sym_room / stride[a] + 1 != output[a])
            return UNSUPPORTED("asymmetric padding (%lld before, %lld after) along %s",
                               (long long)before, (long long)after, a == 0 ? "height" : "width");
        padding[a] = before;
    }
    return LY_OK;
}

static ly_status op_conv(ctx *c, sym *out, bool depthwise)
{
    sym *x = NULL, *f = NULL;
    TRY(input_sym(c, 0, &x));
    TRY(const_input(c, 1, "filter", &f));
    layout4 l;
    TRY(data_format(c, &l));
    ly_graph_value v;
    int64_t pending[2][2];
    float pad_value;
    bool padded;
    TRY(spatial_input(c, x, &l, &v, pending, &pad_value, &padded));
    if (padded && pad_value != 0.0f)
        return UNSUPPORTED("a convolution of an input padded with %g (only 0 is)",
                           (double)pad_value);
    if (!f->f || f->ndim != 4) return UNSUPPORTED("filter: expected a 4-d float constant (HWIO)");
    int64_t kh = f->shape[0], kw = f->shape[1], fin = f->shape[2], fout = f->shape[3];
    int64_t channels = x->shape[l.ch], groups, o;
    if (depthwise) {
        if (fin != channels)
            return MALFORMED("filter %lldx%lldx%lldx%lld for %lld channels", (long long)kh,
                             (long long)kw, (long long)fin, (long long)fout, (long long)channels);
        groups = channels;
        o = channels * fout;
    } else {
        if (fin < 1 || channels % fin != 0 || fout % (channels / fin) != 0)
            return MALFORMED("filter with %lld input channels for an input of %lld", (long long)fin,
                             (long long)channels);
        groups = channels / fin;
        o = fout;
    }
    if (kh < 1 || kw < 1 || o < 1) return MALFORMED("empty filter");
    int64_t stride[2], dilation[2], kernel[2] = {kh, kw}, padding[2], output[2];
    int64_t input[2] = {x->shape[l.h] - pending[0][0] - pending[0][1],
                        x->shape[l.w] - pending[1][0] - pending[1][1]};
    bool same;
    TRY(window_attr(c, "strides", &l, 1, stride));
    TRY(window_attr(c, "dilations", &l, 1, dilation));
    TRY(resolve_padding(c, &l, input, pending, kernel, stride, dilation, padding, output, &same));

    pending_conv *pc = calloc(1, sizeof *pc);
    int64_t cg = depthwise ? 1 : fin;
    if (pc) {
        pc->name = malloc(strlen(c->node->name) + 1);
        pc->weight = malloc((size_t)(o * cg * kh * kw) * sizeof(float));
    }
    if (!pc || !pc->name || !pc->weight) {
        free_pending(pc);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    }
    memcpy(pc->name, c->node->name, strlen(c->node->name) + 1);
    /* HWIO (depthwise: HW, C, multiplier) -> OIHW. */
    for (int64_t y = 0; y < kh; y++)
        for (int64_t xk = 0; xk < kw; xk++)
            for (int64_t i = 0; i < fin; i++)
                for (int64_t j = 0; j < fout; j++) {
                    float w = f->f[((y * kw + xk) * fin + i) * fout + j];
                    int64_t oc = depthwise ? i * fout + j : j, ic = depthwise ? 0 : i;
                    pc->weight[((oc * cg + ic) * kh + y) * kw + xk] = w;
                }
    pc->wshape[0] = o;
    pc->wshape[1] = cg;
    pc->wshape[2] = kh;
    pc->wshape[3] = kw;
    pc->x = v;
    pc->residual = LY_GRAPH_NONE;
    pc->params = (ly_conv2d_params)LY_CONV2D_DEFAULTS;
    for (int a = 0; a < 2; a++) {
        pc->params.stride[a] = stride[a];
        pc->params.padding[a] = padding[a];
        pc->params.dilation[a] = dilation[a];
    }
    pc->params.groups = groups;
    pc->params.activation = LY_ACT_NONE;
    out->kind = SYM_TENSOR;
    out->ndim = 4;
    out->shape[0] = x->shape[0];
    out->shape[l.ch] = o;
    out->shape[l.h] = output[0];
    out->shape[l.w] = output[1];
    memcpy(out->perm, l.perm, sizeof l.perm);
    out->v = LY_GRAPH_NONE;
    out->conv = pc;
    return LY_OK;
}

static ly_status op_pool(ctx *c, sym *out, bool max)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    layout4 l;
    TRY(data_format(c, &l));
    ly_graph_value v;
    int64_t pending[2][2];
    float pad_value;
    bool padded;
    TRY(spatial_input(c, x, &l, &v, pending, &pad_value, &padded));
    if (padded && max && !(isinf(pad_value) && pad_value < 0))
        return UNSUPPORTED("max pooling of an input padded with %g (only -inf is)",
                           (double)pad_value);
    if (padded && !max && pad_value != 0.0f)
        return UNSUPPORTED("average pooling of an input padded with %g (only 0 is)",
                           (double)pad_value);
    int64_t kernel[2], stride[2], dilation[2] = {1, 1}, padding[2], output[2];
    int64_t input[2] = {x->shape[l.h] - pending[0][0] - pending[0][1],
                        x->shape[l.w] - pending[1][0] - pending[1][1]};
    bool same;
    TRY(window_attr(c, "ksize", &l, 0, kernel));
    if (kernel[0] < 1) return MALFORMED("attr 'ksize' missing");
    TRY(window_attr(c, "strides", &l, 1, stride));
    TRY(resolve_padding(c, &l, input, pending, kernel, stride, dilation, padding, output, &same));
    if (!max && same && padded)
        return UNSUPPORTED("average pooling with both a Pad and padding SAME");
    for (int a = 0; a < 2; a++)
        if (padding[a] > kernel[a] / 2)
            return UNSUPPORTED("pooling padding %lld wider than half the window %lld",
                               (long long)padding[a], (long long)kernel[a]);
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    for (int a = 0; a < 2; a++) {
        p.kernel[a] = kernel[a];
        p.stride[a] = stride[a];
        p.padding[a] = padding[a];
    }
    p.count_include_pad = same ? 0 : 1;
    *out = (sym){.kind = SYM_TENSOR, .ndim = 4, .uses = out->uses};
    out->shape[0] = x->shape[0];
    out->shape[l.ch] = x->shape[l.ch];
    out->shape[l.h] = output[0];
    out->shape[l.w] = output[1];
    memcpy(out->perm, l.perm, sizeof l.perm);
    return max ? ly_graph_max_pool2d(c->g, c->node->name, v, &p, &out->v)
               : ly_graph_avg_pool2d(c->g, c->node->name, v, &p, &out->v);
}

/* Broadcast (NumPy rules) of two constants, summed. */
static ly_status fold_add(ctx *c, const sym *a, const sym *b, sym *out)
{
    if ((a->f != NULL) != (b->f != NULL)) return MALFORMED("adding an integer and a float");
    int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[LY_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return MALFORMED("constants of shapes that do not broadcast");
        shape[d] = sa == 1 ? sb : sa;
    }
    int64_t n = numel_of(ndim, shape);
    if (n > MAX_FOLDED_ELEMENTS)
        return UNSUPPORTED("folding a constant of %lld elements", (long long)n);
    void *data = ctx_alloc(c, (size_t)n * 8);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    for (int64_t k = 0; k < n; k++) {
        int64_t rest = k, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t idx = rest % shape[d];
            rest /= shape[d];
            int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
            if (da >= 0) {
                if (a->shape[da] != 1) ia += idx * sa;
                sa *= a->shape[da];
            }
            if (db >= 0) {
                if (b->shape[db] != 1) ib += idx * sb;
                sb *= b->shape[db];
            }
        }
        if (a->f)
            ((float *)data)[k] = a->f[ia] + b->f[ib];
        else
            ((int64_t *)data)[k] = (int64_t)((uint64_t)a->i[ia] + (uint64_t)b->i[ib]);
    }
    int uses = out->uses;
    *out = (sym){.kind = SYM_CONST, .ndim = ndim, .uses = uses};
    memcpy(out->shape, shape, sizeof shape);
    if (a->f)
        out->f = data;
    else
        out->i = data;
    return LY_OK;
}

/* Add constant k to the bias of t's pending convolution when k varies only
 * along t's channels (logical axis `channel_axis`, or found by broadcast). */
static ly_status fold_bias(ctx *c, sym *t, const sym *k, int channel_axis, sym *out)
{
    if (!k->f) return MALFORMED("adding an integer constant to a float tensor");
    pending_conv *pc = t->conv;
    int64_t o = pc->wshape[0];
    int64_t n = numel_of(k->ndim, k->shape);
    bool scalar = n == 1;
    if (!scalar) {
        int64_t kshape[LY_MAX_DIMS] = {0};
        int kd = k->ndim;
        if (channel_axis >= 0) { /* BiasAdd: a vector on that axis */
            if (kd != 1 || k->shape[0] != o)
                return MALFORMED("bias of %lld values for %lld channels", (long long)n,
                                 (long long)o);
            if (channel_axis >= t->ndim || t->perm[channel_axis] != 1)
                return UNSUPPORTED("a bias along an axis that is not the convolution's "
                                   "channels");
        } else {
            if (kd > t->ndim)
                return UNSUPPORTED("adding a constant of more dimensions than the tensor");
            for (int j = 0; j < kd; j++) {
                kshape[j] = k->shape[j];
                int d = t->ndim - kd + j;
                if (kshape[j] != 1 && (t->perm[d] != 1 || kshape[j] != o))
                    return UNSUPPORTED("adding a constant that varies along other axes than "
                                       "the channels");
            }
            if (n != o) return UNSUPPORTED("adding a constant that is not one value per channel");
        }
    }
    TRY(forward(c, t, out));
    if (!pc->bias) {
        pc->bias = calloc((size_t)o, sizeof *pc->bias);
        if (!pc->bias) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    }
    for (int64_t j = 0; j < o; j++)
        pc->bias[j] += scalar ? k->f[0] : k->f[j];
    return LY_OK;
}

static ly_status op_add(ctx *c, sym *out, bool bias_add)
{
    sym *a = NULL, *b = NULL;
    TRY(input_sym(c, 0, &a));
    TRY(input_sym(c, 1, &b));
    if (a->kind == SYM_CONST && b->kind == SYM_CONST) return fold_add(c, a, b, out);
    int channel_axis = -1;
    if (bias_add) {
        if (b->kind != SYM_CONST) return UNSUPPORTED("a computed bias");
        layout4 l;
        TRY(data_format(c, &l));
        channel_axis = a->ndim == 4 ? l.ch : a->ndim - 1;
    }
    if (a->kind == SYM_CONST || b->kind == SYM_CONST) {
        sym *t = a->kind == SYM_CONST ? b : a, *k = a->kind == SYM_CONST ? a : b;
        if (foldable(t) && t->conv->params.activation == LY_ACT_NONE &&
            t->conv->residual == LY_GRAPH_NONE)
            return fold_bias(c, t, k, channel_axis, out);
        return UNSUPPORTED("adding a constant to a value that is not a convolution's output");
    }
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) != 0) {
        char sa[96], sb[96];
        return UNSUPPORTED("adding tensors of shapes %s and %s (broadcasting is not supported)",
                           shape_text(a->ndim, a->shape, sa, sizeof sa),
                           shape_text(b->ndim, b->shape, sb, sizeof sb));
    }
    /* Into a convolution that only this Add reads, as its residual. */
    sym *target = NULL, *other = NULL;
    if (foldable(b) && b->conv->residual == LY_GRAPH_NONE && a != b)
        target = b, other = a;
    else if (foldable(a) && a->conv->residual == LY_GRAPH_NONE && a != b)
        target = a, other = b;
    if (target) {
        ly_graph_value r;
        TRY(value_in(c, other, target->perm, &r));
        pending_conv *pc = target->conv;
        TRY(forward(c, target, out));
        pc->residual = r;
        return LY_OK;
    }
    ly_graph_value va, vb;
    TRY(value_in(c, a, a->perm, &va));
    TRY(value_in(c, b, a->perm, &vb));
    int uses = out->uses;
    *out = (sym){.kind = SYM_TENSOR, .ndim = a->ndim, .uses = uses};
    memcpy(out->shape, a->shape, sizeof out->shape);
    memcpy(out->perm, a->perm, sizeof out->perm);
    return ly_graph_binary(c->g, LY_OP_ADD, c->node->name, va, vb, &out->v);
}

static ly_status op_activation(ctx *c, sym *out, int64_t activation)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    if (x->kind != SYM_TENSOR) return UNSUPPORTED("an activation of a constant");
    double alpha = 0.2; /* TF's default */
    if (activation == LY_ACT_LEAKY_RELU) {
        bool present;
        TRY(ly_tfjs_attr_float(c->m, c->node, "alpha", &alpha, &present));
        if (!isfinite(alpha)) return MALFORMED("attr 'alpha' is not finite");
    }
    if (foldable(x) && x->conv->params.activation == LY_ACT_NONE &&
        x->conv->residual == LY_GRAPH_NONE) {
        pending_conv *pc = x->conv;
        TRY(forward(c, x, out));
        pc->params.activation = activation;
        pc->params.alpha = alpha;
        return LY_OK;
    }
    if (activation != LY_ACT_SIGMOID)
        return UNSUPPORTED("this activation only runs fused into the convolution before it, and "
                           "its input is not a convolution's output read by it alone");
    ly_graph_value v;
    TRY(value_in(c, x, x->perm, &v));
    int uses = out->uses;
    *out = (sym){.kind = SYM_TENSOR, .ndim = x->ndim, .uses = uses};
    memcpy(out->shape, x->shape, sizeof out->shape);
    memcpy(out->perm, x->perm, sizeof out->perm);
    return ly_graph_unary(c->g, LY_OP_SIGMOID, c->node->name, v, &out->v);
}

static ly_status op_resize(ctx *c, sym *out, bool bilinear)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    if (x->kind != SYM_TENSOR || x->ndim != 4) return UNSUPPORTED("expected a 4-d NHWC tensor");
    int64_t size[2];
    int count;
    TRY(const_ints(c, 1, "size", size, 2, &count));
    if (count != 2 || size[0] < 1 || size[1] < 1 || size[0] > MAX_EXTENT || size[1] > MAX_EXTENT)
        return MALFORMED("size: expected two integers in 1..%d", MAX_EXTENT);
    bool align = false, half = false, present;
    TRY(ly_tfjs_attr_bool(c->m, c->node, "align_corners", &align, &present));
    TRY(ly_tfjs_attr_bool(c->m, c->node, "half_pixel_centers", &half, &present));
    if (align && half) return MALFORMED("align_corners and half_pixel_centers are both set");
    static const int nhwc[4] = {0, 2, 3, 1};
    ly_graph_value v;
    TRY(value_in(c, x, nhwc, &v));
    int uses = out->uses;
    *out = (sym){.kind = SYM_TENSOR, .ndim = 4, .uses = uses};
    out->shape[0] = x->shape[0];
    out->shape[1] = size[0];
    out->shape[2] = size[1];
    out->shape[3] = x->shape[3];
    memcpy(out->perm, nhwc, sizeof nhwc);
    if (bilinear) {
        ly_resize_bilinear2d_params p = LY_RESIZE_BILINEAR2D_DEFAULTS;
        p.align_corners = align;
        p.half_pixel_centers = half;
        return ly_graph_resize_bilinear2d(c->g, c->node->name, v, size[0], size[1], &p, &out->v);
    }
    /* Nearest neighbour is a plain repeat only for one integer factor (and
     * without align_corners, which rounds source coordinates differently). */
    int64_t h = x->shape[1], w = x->shape[2];
    if (size[0] % h != 0 || size[1] % w != 0 || size[0] / h != size[1] / w ||
        (align && size[0] != h))
        return UNSUPPORTED("nearest-neighbour resize %lldx%lld -> %lldx%lld (only one integer "
                           "factor on both axes is)",
                           (long long)h, (long long)w, (long long)size[0], (long long)size[1]);
    return ly_graph_upsample_nearest2d(c->g, c->node->name, v, size[0] / h, &out->v);
}

static ly_status normalise_axis(ctx *c, int64_t *axis, int ndim)
{
    if (*axis < -ndim || *axis >= ndim)
        return MALFORMED("axis %lld for a %d-d tensor", (long long)*axis, ndim);
    if (*axis < 0) *axis += ndim;
    return LY_OK;
}

static ly_status op_concat(ctx *c, sym *out)
{
    int n = c->node->n_inputs - 1;
    if (n < 1) return MALFORMED("no values to join");
    int64_t axis = 0;
    TRY(const_scalar_int(c, n, "axis", &axis));
    sym *first = NULL;
    TRY(input_sym(c, 0, &first));
    if (first->kind != SYM_TENSOR) return UNSUPPORTED("joining constants");
    TRY(materialize(c, first));
    TRY(normalise_axis(c, &axis, first->ndim));
    if (n == 1) return forward(c, first, out);
    if (n > LY_KERNEL_MAX_INPUTS)
        return UNSUPPORTED("joining %d values (at most %d)", n, LY_KERNEL_MAX_INPUTS);
    int perm[LY_MAX_DIMS];
    memcpy(perm, first->perm, sizeof perm);
    ly_graph_value values[LY_KERNEL_MAX_INPUTS];
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        sym *s = NULL;
        TRY(input_sym(c, k, &s));
        if (s->kind != SYM_TENSOR) return UNSUPPORTED("joining a constant");
        bool fits = s->ndim == first->ndim;
        for (int d = 0; fits && d < s->ndim; d++)
            fits = d == axis || s->shape[d] == first->shape[d];
        if (!fits) return MALFORMED("input %d does not match input 0 off the joined axis", k);
        TRY(value_in(c, s, perm, &values[k]));
        total += s->shape[axis];
    }
    int uses = out->uses;
    *out = (sym){.kind = SYM_TENSOR, .ndim = first->ndim, .uses = uses};
    memcpy(out->shape, first->shape, sizeof out->shape);
    out->shape[axis] = total;
    memcpy(out->perm, perm, sizeof perm);
    return ly_graph_concat(c->g, c->node->name, n, values, perm[axis], &out->v);
}

static ly_status op_split(ctx *c, node_state *ns, bool sizes_given)
{
    int value_input = sizes_given ? 0 : 1, axis_input = sizes_given ? 2 : 0;
    sym *x = NULL;
    TRY(input_sym(c, value_input, &x));
    if (x->kind != SYM_TENSOR) return UNSUPPORTED("splitting a constant");
    int64_t axis = 0;
    TRY(const_scalar_int(c, axis_input, "split_dim", &axis));
    TRY(normalise_axis(c, &axis, x->ndim));
    int64_t extent = x->shape[axis];
    int64_t sizes[LY_KERNEL_MAX_INPUTS * 8];
    int count = 0;
    if (sizes_given) {
        TRY(const_ints(c, 1, "size_splits", sizes, (int)(sizeof sizes / sizeof sizes[0]), &count));
        int64_t known = 0;
        int free_index = -1;
        for (int k = 0; k < count; k++) {
            if (sizes[k] == -1 && free_index < 0)
                free_index = k;
            else if (sizes[k] < 0)
                return MALFORMED("size_splits has a negative size");
            else
                known += sizes[k];
        }
        if (free_index >= 0) sizes[free_index] = extent - known;
        if (count < 1 || known > extent || (free_index < 0 && known != extent))
            return MALFORMED("size_splits do not add up to %lld", (long long)extent);
    } else {
        int64_t n;
        bool present;
        TRY(ly_tfjs_attr_int(c->m, c->node, "num_split", &n, &present));
        if (n < 1 || n > (int64_t)(sizeof sizes / sizeof sizes[0]) || extent % n != 0)
            return MALFORMED("num_split %lld for an axis of %lld", (long long)n, (long long)extent);
        count = (int)n;
        for (int k = 0; k < count; k++)
            sizes[k] = extent / n;
    }
    ly_graph_value v;
    TRY(value_in(c, x, x->perm, &v));
    ns->out = calloc((size_t)count, sizeof *ns->out);
    if (!ns->out) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    ns->n_out = count;
    int64_t start = 0;
    for (int k = 0; k < count; k++) {
        sym *o = &ns->out[k];
        *o = *x;
        o->conv = NULL;
        o->padded = false;
        memset(o->pad, 0, sizeof o->pad);
        o->uses = k < ns->n_uses ? ns->uses[k] : 0;
        o->shape[axis] = sizes[k];
        if (sizes[k] < 1) return UNSUPPORTED("an empty split");
        char name[MAX_NAME];
        snprintf(name, sizeof name, "%s:%d", c->node->name, k);
        TRY(ly_graph_slice(c->g, name, v, x->perm[axis], start, sizes[k], &o->v));
        start += sizes[k];
    }
    return LY_OK;
}

static ly_status op_reshape(ctx *c, sym *out)
{
    sym *x = NULL;
    TRY(input_sym(c, 0, &x));
    int64_t shape[LY_MAX_DIMS];
    int ndim;
    TRY(const_ints(c, 1, "shape", shape, LY_MAX_DIMS, &ndim));
    int64_t numel = numel_of(x->ndim, x->shape), known = 1;
    int free_axis = -1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == -1 && free_axis < 0)
            free_axis = d;
        else if (!ly_checked_mul(known, shape[d], &known))
            return MALFORMED("shape has a negative or huge extent");
    }
    if (free_axis >= 0 && known > 0 && numel % known == 0) shape[free_axis] = numel / known;
    if (ndim < 1 || numel_of(ndim, shape) != numel)
        return MALFORMED("cannot reshape %lld elements to the shape asked", (long long)numel);
    if (x->kind == SYM_CONST) {
        int uses = out->uses;
        *out = *x;
        out->uses = uses;
        out->ndim = ndim;
        memcpy(out->shape, shape, sizeof shape);
        return LY_OK;
    }
    /* A view when the logical order is the physical one (unit axes aside). */
    TRY(materialize(c, x));
    int want[LY_MAX_DIMS], last = -1;
    bool in_order = true;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != 1) {
            if (x->perm[d] < last) in_order = false;
            last = x->perm[d];
        }
    ly_graph_value v;
    if (in_order) {
        TRY(value_in(c, x, x->perm, &v));
    } else {
        identity_perm(want, x->ndim);
        TRY(value_in(c, x, want, &v));
    }
    int uses = out->uses;
    *out = (sym){.kind = SYM_TENSOR, .ndim = ndim, .uses = uses};
    memcpy(out->shape, shape, sizeof shape);
    identity_perm(out->perm, ndim);
    return ly_graph_reshape(c->g, c->node->name, v, ndim, shape, &out->v);
}

static ly_status op_sparse_to_dense(ctx *c, sym *out)
{
    sym *indices = NULL, *shape = NULL, *values = NULL, *fallback = NULL;
    TRY(const_input(c, 0, "sparse_indices", &indices));
    TRY(const_input(c, 1, "output_shape", &shape));
    TRY(const_input(c, 2, "sparse_values", &values));
    TRY(const_input(c, 3, "default_value", &fallback));
    if (!indices->i || !shape->i) return MALFORMED("integer indices and shape expected");
    int64_t elements = numel_of(shape->ndim, shape->shape);
    if (shape->ndim > 1 || elements < 0 || elements > LY_MAX_DIMS)
        return UNSUPPORTED("output_shape of rank > %d", LY_MAX_DIMS);
    int rank = (int)elements;
    int64_t dims[LY_MAX_DIMS], total = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = shape->i[d];
        if (!ly_checked_mul(total, dims[d], &total) || total > MAX_FOLDED_ELEMENTS)
            return UNSUPPORTED("output_shape too large or negative");
    }
    int64_t n = indices->ndim == 0 ? 1 : indices->shape[0];
    int64_t per = indices->ndim == 2 ? indices->shape[1] : 1;
    if (indices->ndim > 2 || (indices->ndim == 2 && per != rank) || (indices->ndim < 2 && rank > 1))
        return MALFORMED("sparse_indices of the wrong shape");
    int64_t n_values = numel_of(values->ndim, values->shape);
    if ((values->f != NULL) != (fallback->f != NULL) ||
        numel_of(fallback->ndim, fallback->shape) != 1 || (n_values != 1 && n_values != n))
        return MALFORMED("sparse_values / default_value do not fit");
    bool is_float = values->f != NULL;
    void *data = ctx_alloc(c, (size_t)total * 8);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    for (int64_t k = 0; k < total; k++) {
        if (is_float)
            ((float *)data)[k] = fallback->f[0];
        else
            ((int64_t *)data)[k] = fallback->i[0];
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t flat = 0;
        for (int d = 0; d < rank; d++) {
            int64_t idx = indices->i[j * per + d];
            if (idx < 0 || idx >= dims[d]) return MALFORMED("sparse index out of bounds");
            flat = flat * dims[d] + idx;
        }
        int64_t src = n_values == 1 ? 0 : j;
        if (is_float)
            ((float *)data)[flat] = values->f[src];
        else
            ((int64_t *)data)[flat] = values->i[src];
    }
    int uses = out->uses;
    *out = (sym){.kind = SYM_CONST, .ndim = rank, .uses = uses};
    memcpy(out->shape, dims, (size_t)rank * sizeof *dims);
    if (is_float)
        out->f = data;
    else
        out->i = data;
    return LY_OK;
}

static ly_status lower_node(ctx *c, size_t index)
{
    const ly_tfjs_node *n = &c->m->nodes[index];
    node_state *ns = &c->st[index];
    c->node = n;
    const char *op = n->op;
    if (strcmp(op, "Split") == 0) return op_split(c, ns, false);
    if (strcmp(op, "SplitV") == 0) return op_split(c, ns, true);
    ns->out = calloc(1, sizeof *ns->out);
    if (!ns->out) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
    ns->n_out = 1;
    sym *out = ns->out;
    out->uses = ns->n_uses > 0 ? ns->uses[0] : 0;
    out->v = LY_GRAPH_NONE;
    if (strcmp(op, "Placeholder") == 0) return op_placeholder(c, out);
    if (strcmp(op, "Const") == 0) return op_const(c, out);
    if (strcmp(op, "Identity") == 0 || strcmp(op, "StopGradient") == 0 ||
        strcmp(op, "Snapshot") == 0)
        return op_identity(c, out);
    if (strcmp(op, "Transpose") == 0) return op_transpose(c, out);
    if (strcmp(op, "Pad") == 0) return op_pad(c, out, false);
    if (strcmp(op, "PadV2") == 0) return op_pad(c, out, true);
    if (strcmp(op, "Conv2D") == 0) return op_conv(c, out, false);
    if (strcmp(op, "DepthwiseConv2dNative") == 0) return op_conv(c, out, true);
    if (strcmp(op, "Add") == 0 || strcmp(op, "AddV2") == 0) return op_add(c, out, false);
    if (strcmp(op, "BiasAdd") == 0) return op_add(c, out, true);
    if (strcmp(op, "Relu") == 0) return op_activation(c, out, LY_ACT_RELU);
    if (strcmp(op, "LeakyRelu") == 0) return op_activation(c, out, LY_ACT_LEAKY_RELU);
    if (strcmp(op, "Sigmoid") == 0) return op_activation(c, out, LY_ACT_SIGMOID);
    if (strcmp(op, "MaxPool") == 0) return op_pool(c, out, true);
    if (strcmp(op, "AvgPool") == 0) return op_pool(c, out, false);
    if (strcmp(op, "ResizeBilinear") == 0) return op_resize(c, out, true);
    if (strcmp(op, "ResizeNearestNeighbor") == 0) return op_resize(c, out, false);
    if (strcmp(op, "ConcatV2") == 0) return op_concat(c, out);
    if (strcmp(op, "Reshape") == 0) return op_reshape(c, out);
    if (strcmp(op, "SparseToDense") == 0) return op_sparse_to_dense(c, out);
    return UNSUPPORTED("op '%s' is not supported by the TF.js importer", op);
}

/* ---- order, outputs ---------------------------------------------------------- */

/* Depth-first post-order from the signature's outputs over data inputs;
 * counts the readers of every (node, output). */
static ly_status order_nodes(ctx *c, const size_t *roots, size_t n_roots, size_t *order,
                             size_t *n_order)
{
    size_t n = c->m->n_nodes;
    size_t *stack = malloc((n ? n : 1) * sizeof *stack);
    int *next = calloc(n ? n : 1, sizeof *next);
    ly_status st = LY_OK;
    if (!stack || !next) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
        goto done;
    }
    *n_order = 0;
    for (size_t r = 0; r < n_roots && st == LY_OK; r++) {
        if (c->st[roots[r]].visit) continue;
        size_t depth = 0;
        stack[depth++] = roots[r];
        c->st[roots[r]].visit = 1;
        while (depth > 0 && st == LY_OK) {
            size_t top = stack[depth - 1];
            const ly_tfjs_node *node = &c->m->nodes[top];
            if (next[top] == node->n_inputs) {
                c->st[top].visit = 2;
                order[(*n_order)++] = top;
                depth--;
                continue;
            }
            size_t p = 0;
            int index = 0;
            c->node = node;
            st = resolve(c, node, node->inputs[next[top]++], &p, &index);
            if (st != LY_OK) break;
            node_state *ps = &c->st[p];
            if (index >= ps->n_uses) {
                int *grown = realloc(ps->uses, (size_t)(index + 1) * sizeof *grown);
                if (!grown) {
                    st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", c->m->path);
                    break;
                }
                memset(grown + ps->n_uses, 0, (size_t)(index + 1 - ps->n_uses) * sizeof *grown);
                ps->uses = grown;
                ps->n_uses = index + 1;
            }
            ps->uses[index]++;
            if (ps->visit == 1) {
                st = MALFORMED("is part of a cycle");
                break;
            }
            if (ps->visit == 0) {
                ps->visit = 1;
                stack[depth++] = p;
            }
        }
    }
done:
    c->node = NULL;
    free(stack);
    free(next);
    return st;
}

/* "Identity_2" before "Identity_10". */
static int natural_compare(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static int by_io_key(const void *x, const void *y)
{
    return natural_compare((*(const ly_tfjs_io *const *)x)->key,
                           (*(const ly_tfjs_io *const *)y)->key);
}

static ly_status lower(ctx *c)
{
    const ly_tfjs_model *m = c->m;
    if (m->n_nodes == 0)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: the graph has no nodes", m->path);
    if (m->n_outputs == 0)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: the model has no signature outputs", m->path);
    const ly_tfjs_io **outs = malloc(m->n_outputs * sizeof *outs);
    size_t *roots = malloc(m->n_outputs * sizeof *roots);
    int *root_index = malloc(m->n_outputs * sizeof *root_index);
    size_t *order = malloc((m->n_nodes ? m->n_nodes : 1) * sizeof *order);
    ly_status st = LY_OK;
    if (!outs || !roots || !root_index || !order) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->path);
        goto done;
    }
    for (size_t i = 0; i < m->n_outputs; i++)
        outs[i] = &m->outputs[i];
    qsort(outs, m->n_outputs, sizeof *outs, by_io_key);
    char name[MAX_NAME];
    for (size_t i = 0; i < m->n_outputs && st == LY_OK; i++) {
        /* The signature's "name" is the tensor; its key names the output. */
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(m->root, "signature"), "outputs");
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(sig, outs[i]->key);
        const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(entry, "name");
        const char *ref =
            cJSON_IsString(tensor) && tensor->valuestring ? tensor->valuestring : outs[i]->key;
        const ly_tfjs_node *p;
        if (ly_tfjs_split_ref(m, &m->nodes[0], ref, name, sizeof name, &root_index[i]) != LY_OK ||
            !(p = ly_tfjs_node_find(m, name)))
            st = ly_set_error(LY_E_FORMAT, "%s: signature output '%s' names no node", m->path,
                              outs[i]->key);
        else
            roots[i] = node_index(c, p);
    }
    size_t n_order = 0;
    if (st == LY_OK) st = order_nodes(c, roots, m->n_outputs, order, &n_order);
    for (size_t i = 0; st == LY_OK && i < m->n_outputs; i++) {
        node_state *ps = &c->st[roots[i]];
        if (root_index[i] >= ps->n_uses) {
            int *grown = realloc(ps->uses, (size_t)(root_index[i] + 1) * sizeof *grown);
            if (!grown) {
                st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->path);
                break;
            }
            memset(grown + ps->n_uses, 0, (size_t)(root_index[i] + 1 - ps->n_uses) * sizeof *grown);
            ps->uses = grown;
            ps->n_uses = root_index[i] + 1;
        }
        ps->uses[root_index[i]]++;
    }
    for (size_t k = 0; st == LY_OK && k < n_order; k++)
        st = lower_node(c, order[k]);
    c->node = NULL;
    for (size_t i = 0; st == LY_OK && i < m->n_outputs; i++) {
        node_state *ps = &c->st[roots[i]];
        if (root_index[i] >= ps->n_out) {
            st = ly_set_error(LY_E_FORMAT, "%s: signature output '%s': node '%s' has %d outputs",
                              m->path, outs[i]->key, m->nodes[roots[i]].name, ps->n_out);
            break;
        }
        sym *s = &ps->out[root_index[i]];
        if (s->kind != SYM_TENSOR) {
            st = ly_set_error(LY_E_UNSUPPORTED, "%s: signature output '%s' is a constant", m->path,
                              outs[i]->key);
            break;
        }
        int want[LY_MAX_DIMS];
        identity_perm(want, s->ndim);
        ly_graph_value v;
        snprintf(name, sizeof name, "%s", outs[i]->key);
        size_t len = strlen(name);
        if (len > 2 && strcmp(name + len - 2, ":0") == 0) name[len - 2] = '\0';
        c->output = name;
        st = value_in(c, s, want, &v);
        if (st == LY_OK) {
            /* A value already given out (or an input) goes out as a copy. */
            bool taken = false;
            for (int k = 0; k < ly_graph_output_count(c->g) && !taken; k++) {
                ly_graph_value used;
                ly_graph_output_value(c->g, k, &used, NULL);
                taken = used == v;
            }
            for (int k = 0; k < ly_graph_input_count(c->g) && !taken; k++) {
                ly_graph_value in;
                ly_graph_input_at(c->g, k, &in, NULL);
                taken = in == v;
            }
            if (taken) st = ly_graph_permute(c->g, name, v, s->ndim, want, &v);
        }
        if (st == LY_OK) st = ly_graph_output(c->g, v, name);
    }
done:
    free(outs);
    free(roots);
    free(root_index);
    free(order);
    return st;
}

ly_status ly_tfjs_lower(const ly_tfjs_model *m, ly_graph **out)
{
    if (!m || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_tfjs_lower: NULL argument");
    *out = NULL;
    ctx c = {.m = m};
    c.st = calloc(m->n_nodes ? m->n_nodes : 1, sizeof *c.st);
    if (!c.st) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", m->path);
    ly_status st = ly_graph_create(&c.g);
    if (st == LY_OK) st = lower(&c);
    for (size_t i = 0; i < m->n_nodes; i++) {
        for (int k = 0; k < c.st[i].n_out; k++)
            free_pending(c.st[i].out[k].conv);
        free(c.st[i].out);
        free(c.st[i].uses);
    }
    free(c.st);
    for (size_t i = 0; i < c.n_allocs; i++)
        free(c.allocs[i]);
    free(c.allocs);
    if (st != LY_OK) {
        ly_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return LY_OK;
}
