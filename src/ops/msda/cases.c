/*
 * Parity cases of the ms_deform_attn slots for the harness (kernels/check.h):
 * every implementation but the reference runs next to the reference on the
 * same inputs, each into its own canary-filled buffer with guard bytes, and the
 * outputs are compared bit for bit (forward) or within the harness's backward
 * tolerance (the providers here are bit-identical there too; the verdict says
 * "bit-identical" when no bit differs).
 *
 * Shapes come from the models that use the op (RT-DETR-R18, D-FINE-N,
 * RF-DETR-Nano, DEIMv2-atto's ragged [4, 2] points) plus the classic test shape
 * and odd ones (C = 1, 13, 33, 40: vector tails and more than one channel
 * block; more points than one prepared chunk (K 300); a level of 1x1; a level with no
 * points; empty outputs). Locations: inside, edge coordinates loc*W - 0.5 in
 * {-1, -0.5, 0, W-1, W-0.5, W} and one ulp either side, far outside, NaN, inf.
 * Values: normal, or with NaN, inf, huge and subnormal entries (in value,
 * attention weights and the incoming gradient). Each case is seeded from its
 * name, so a reported case can be rerun alone.
 */
#include "core/core.h"
#include "kernels/check_common.h"
#include "ops/msda/msda_internal.h"
#include "kernels/check.h"
#include "kernels/check_rng.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Cases --------------------------------------------------------------------- */

typedef enum loc_kind { LOC_INSIDE, LOC_EDGE, LOC_OUTSIDE } loc_kind;
typedef enum val_kind { VAL_NORMAL, VAL_SPECIAL } val_kind;

typedef struct shape_def {
    const char *name;
    int64_t B, Lq, H, C, L;
    int64_t hw[5][2];
    int64_t P;         /* uniform points per level, or -1: ragged (points[]) */
    int64_t points[5]; /* ragged counts */
    bool big;          /* model-sized: fewer variants in the quick set */
} shape_def;

static const shape_def shapes[] = {
    {"classic", 2, 3, 2, 4, 2, {{4, 6}, {2, 3}}, 2, {0}, false},
    {"rtdetr_r18", 1, 300, 8, 32, 3, {{80, 80}, {40, 40}, {20, 20}}, 4, {0}, true},
    {"dfine_n", 1, 300, 8, 16, 2, {{40, 40}, {20, 20}}, 6, {0}, true},
    {"rfdetr_nano", 1, 300, 16, 16, 1, {{24, 24}}, 2, {0}, true},
    {"deimv2_atto_ragged", 1, 100, 8, 8, 2, {{20, 20}, {10, 10}}, -1, {4, 2}, false},
    {"odd_c13", 2, 5, 3, 13, 3, {{5, 7}, {3, 2}, {1, 1}}, 3, {0}, false},
    {"wide_c40", 1, 7, 2, 40, 1, {{4, 4}}, 5, {0}, false},
    {"c1", 1, 4, 1, 1, 1, {{3, 3}}, 1, {0}, false},
    {"c33_ragged_empty_level", 1, 3, 2, 33, 2, {{2, 5}, {6, 1}}, -1, {3, 0}, false},
    {"k80", 1, 2, 2, 8, 4, {{8, 8}, {4, 4}, {2, 2}, {1, 1}}, 20, {0}, false},
    {"k300_chunks", 1, 3, 2, 12, 2, {{5, 5}, {3, 3}}, 150, {0}, false},
    {"edge_pow2", 1, 8, 2, 12, 2, {{4, 8}, {2, 4}}, 4, {0}, false},
    {"edge_odd", 1, 8, 2, 9, 2, {{3, 5}, {7, 1}}, 4, {0}, false},
    {"no_queries", 1, 0, 2, 4, 1, {{4, 6}}, 2, {0}, false},
    {"no_points", 1, 3, 2, 4, 1, {{4, 6}}, 0, {0}, false},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct variant {
    int mode;
    loc_kind loc;
    val_kind val;
} variant;

static const variant variants[] = {
    {LY_MSDA_BILINEAR, LOC_INSIDE, VAL_NORMAL},   {LY_MSDA_BILINEAR, LOC_EDGE, VAL_NORMAL},
    {LY_MSDA_BILINEAR, LOC_OUTSIDE, VAL_NORMAL},  {LY_MSDA_BILINEAR, LOC_INSIDE, VAL_SPECIAL},
    {LY_MSDA_BILINEAR, LOC_OUTSIDE, VAL_SPECIAL}, {LY_MSDA_DISCRETE, LOC_INSIDE, VAL_NORMAL},
    {LY_MSDA_DISCRETE, LOC_EDGE, VAL_NORMAL},     {LY_MSDA_DISCRETE, LOC_OUTSIDE, VAL_SPECIAL},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static const char *const loc_names[] = {"inside", "edge", "outside"};
static const char *const val_names[] = {"normal", "special"};

static bool wanted(const shape_def *s, const variant *v, ly_check_size size)
{
    if (size == LY_CHECK_FULL) return true;
    if (!s->big) return true;
    /* Model shapes in the quick set: the common path, the edges, and D-FINE's
     * own discrete mode. */
    if (v->mode == LY_MSDA_BILINEAR) return v->val == VAL_NORMAL && v->loc != LOC_OUTSIDE;
    return strcmp(s->name, "dfine_n") == 0 && v->loc == LOC_INSIDE;
}

/* ---- Deterministic data ---------------------------------------------------------- */

typedef ly_check_rng rng;

static float rng_unit(rng *r) /* [0, 1) */
{
    return (float)(ly_check_rng_next(r) >> 40) * 0x1p-24f;
}

/* Roughly normal (a sum of four uniforms), cheap enough for megabytes. */
static float rng_normalish(rng *r)
{
    return (rng_unit(r) + rng_unit(r) + rng_unit(r) + rng_unit(r) - 2.0f) * 1.7f;
}

static float special_value(rng *r)
{
    static const float table[] = {NAN,     INFINITY, -INFINITY, 1e30f,   -3e38f,  0x1p-140f,
                                  -1e-45f, 0.0f,     -0.0f,     FLT_MIN, 65504.0f};
    return table[ly_check_rng_below(r, sizeof table / sizeof table[0])];
}

static void fill_values(float *p, int64_t n, val_kind k, rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        p[i] = rng_normalish(r);
        if (k == VAL_SPECIAL && ly_check_rng_below(r, 16) == 0) p[i] = special_value(r);
    }
}

/* One coordinate in [0, 1]-normalised units for an axis of `size`. */
static float pick_loc(loc_kind k, int64_t size, rng *r)
{
    if (k == LOC_EDGE) {
        static const float xs[6] = {-1.0f, -0.5f, 0.0f, 0.0f, 0.5f, 1.0f}; /* + size for 3..5 */
        int e = (int)ly_check_rng_below(r, 7);
        if (e == 6) return rng_unit(r);
        float x = xs[e] + (e >= 3 ? (float)size - 1.0f : 0.0f);
        float loc = (x + 0.5f) / (float)size;
        uint64_t nudge = ly_check_rng_below(r, 4);
        if (nudge == 1) loc = nextafterf(loc, -INFINITY);
        if (nudge == 2) loc = nextafterf(loc, INFINITY);
        return loc;
    }
    if (k == LOC_OUTSIDE) {
        static const float far[] = {1e10f, -1e10f, INFINITY, -INFINITY, NAN,   -0.0f, 0.0f,
                                    1.0f,  3e38f,  -3e38f,   1e-40f,    -2.0f, 9.5f};
        if (ly_check_rng_below(r, 4) == 0)
            return far[ly_check_rng_below(r, sizeof far / sizeof far[0])];
        return rng_unit(r) * 3.0f - 1.0f;
    }
    return rng_unit(r) * 1.1f - 0.05f;
}

/* ---- A materialised case ------------------------------------------------------ */

enum { GUARD_BYTES = 64, ALIGN = 64, MAX_IN = LY_KERNEL_MAX_INPUTS };

typedef struct owned {
    ly_tensor t;
    void *alloc;
    size_t bytes;
    void *pristine;
} owned;

typedef struct mcase {
    char name[112];
    const shape_def *shape;
    const variant *var;
    bool backward, misaligned;
    owned in[MAX_IN];
    bool present[MAX_IN];
    ly_kernel_params params;
} mcase;

static void *alloc_view(size_t bytes, size_t elem, bool misaligned, void **alloc)
{
    *alloc = malloc(bytes + elem + ALIGN + GUARD_BYTES);
    if (!*alloc) return NULL;
    uintptr_t p = ((uintptr_t)*alloc + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
    return (void *)(p + (misaligned ? elem : 0));
}

static void *add_input(mcase *c, int i, ly_dtype dtype, int ndim, const int64_t *shape)
{
    owned *o = &c->in[i];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    size_t elem = ly_dtype_size(dtype);
    o->bytes = (size_t)n * elem;
    void *data = alloc_view(o->bytes, elem, c->misaligned, &o->alloc);
    if (!data) return NULL;
    ly_tensor_init(&o->t, data, dtype, ndim, shape);
    o->pristine = malloc(o->bytes + 1);
    if (!o->pristine) return NULL;
    c->present[i] = true;
    return data;
}

static void case_free(mcase *c)
{
    for (int i = 0; i < MAX_IN; i++) {
        free(c->in[i].alloc);
        free(c->in[i].pristine);
    }
}

static void snapshot(mcase *c)
{
    for (int i = 0; i < MAX_IN; i++)
        if (c->present[i]) memcpy(c->in[i].pristine, c->in[i].t.data, c->in[i].bytes);
}

static int inputs_modified(const mcase *c)
{
    for (int i = 0; i < MAX_IN; i++)
        if (c->present[i] && memcmp(c->in[i].pristine, c->in[i].t.data, c->in[i].bytes) != 0)
            return i;
    return -1;
}

static void restore_inputs(mcase *c)
{
    for (int i = 0; i < MAX_IN; i++)
        if (c->present[i]) memcpy(c->in[i].t.data, c->in[i].pristine, c->in[i].bytes);
}

/* Inputs in the slot's order; false when out of memory. */
static bool materialize(mcase *c, const char *slot)
{
    const shape_def *s = c->shape;
    const variant *v = c->var;
    snprintf(c->name, sizeof c->name, "%s %s loc=%s values=%s%s", s->name,
             v->mode == LY_MSDA_DISCRETE ? "discrete" : "bilinear", loc_names[v->loc],
             val_names[v->val], c->misaligned ? " misaligned" : "");
    rng r = {ly_check_seed(slot, c->name)};
    c->params = (ly_kernel_params){.mode = v->mode};
    int base = c->backward ? 1 : 0;

    int64_t len_in = 0, K = 0;
    for (int64_t l = 0; l < s->L; l++) {
        len_in += s->hw[l][0] * s->hw[l][1];
        K += s->P >= 0 ? s->P : s->points[l];
    }
    int64_t rows = s->B * s->Lq * s->H;
    float *value = add_input(c, base, LY_F32, 4, (int64_t[]){s->B, len_in, s->H, s->C});
    if (!value) return false;
    fill_values(value, s->B * len_in * s->H * s->C, v->val, &r);

    int64_t *hw = add_input(c, base + 1, LY_I64, 2, (int64_t[]){s->L, 2});
    if (!hw) return false;
    for (int64_t l = 0; l < s->L; l++) {
        hw[2 * l] = s->hw[l][0];
        hw[2 * l + 1] = s->hw[l][1];
    }

    float *loc, *attn;
    if (s->P >= 0) {
        loc = add_input(c, base + 2, LY_F32, 6, (int64_t[]){s->B, s->Lq, s->H, s->L, s->P, 2});
        attn = loc ? add_input(c, base + 3, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, s->L, s->P})
                   : NULL;
    } else {
        loc = add_input(c, base + 2, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, K, 2});
        attn = loc ? add_input(c, base + 3, LY_F32, 4, (int64_t[]){s->B, s->Lq, s->H, K}) : NULL;
        int64_t *np = attn ? add_input(c, c->backward ? 5 : 4, LY_I64, 1, (int64_t[]){s->L}) : NULL;
        if (!np) return false;
        for (int64_t l = 0; l < s->L; l++)
            np[l] = s->points[l];
    }
    if (!attn) return false;
    for (int64_t row = 0; row < rows; row++) {
        int64_t k = 0;
        for (int64_t l = 0; l < s->L; l++)
            for (int64_t p = 0; p < (s->P >= 0 ? s->P : s->points[l]); p++, k++) {
                float *xy = loc + (row * K + k) * 2;
                xy[0] = pick_loc(v->loc, s->hw[l][1], &r);
                xy[1] = pick_loc(v->loc, s->hw[l][0], &r);
            }
        /* Softmax over all the points of the row, as the models normalise. */
        float *a = attn + row * K, sum = 0.0f;
        for (int64_t i = 0; i < K; i++) {
            a[i] = expf(rng_normalish(&r));
            sum += a[i];
        }
        for (int64_t i = 0; i < K; i++) {
            a[i] /= sum;
            if (v->val == VAL_SPECIAL && ly_check_rng_below(&r, 16) == 0) a[i] = special_value(&r);
        }
    }
    if (c->backward) {
        float *go = add_input(c, 0, LY_F32, 3, (int64_t[]){s->B, s->Lq, s->H * s->C});
        if (!go) return false;
        fill_values(go, rows * s->C, v->val, &r);
    }
    snapshot(c);
    return true;
}

/* ---- Outputs ------------------------------------------------------------------------ */

typedef struct output_set {
    int n;
    ly_tensor t[LY_KERNEL_MAX_OUTPUTS];
    void *alloc[LY_KERNEL_MAX_OUTPUTS];
    size_t bytes[LY_KERNEL_MAX_OUTPUTS];
} output_set;

static void outputs_free(output_set *o)
{
    for (int i = 0; i < LY_KERNEL_MAX_OUTPUTS; i++)
        free(o->alloc[i]);
}

static bool outputs_alloc(output_set *o, const ly_tensor *shapes_, int n, bool misaligned)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    for (int i = 0; i < n; i++) {
        o->t[i] = shapes_[i];
        o->bytes[i] = (size_t)ly_tensor_numel(&shapes_[i]) * sizeof(float);
        o->t[i].data = alloc_view(o->bytes[i], sizeof(float), misaligned, &o->alloc[i]);
        if (!o->t[i].data) return false;
    }
    return true;
}

static void outputs_fill(output_set *o, uint32_t canary)
{
    for (int i = 0; i < o->n; i++) {
        uint8_t *p = o->t[i].data;
        for (size_t b = 0; b < o->bytes[i]; b += 4)
            memcpy(p + b, &canary, 4);
        memset(p + o->bytes[i], 0xCC, GUARD_BYTES);
    }
}

static int outputs_guard_broken(const output_set *o)
{
    for (int i = 0; i < o->n; i++) {
        const uint8_t *p = (const uint8_t *)o->t[i].data + o->bytes[i];
        for (int b = 0; b < GUARD_BYTES; b++)
            if (p[b] != 0xCC) return i;
    }
    return -1;
}

/* ---- Comparing ---------------------------------------------------------------------- */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void append(char *buf, size_t size, const char *fmt, ...) LY_PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

static void shape_text(const ly_tensor *t, char *buf, size_t size)
{
    buf[0] = '\0';
    append(buf, size, "[");
    for (int i = 0; i < t->ndim; i++)
        append(buf, size, "%s%" PRId64, i ? "," : "", t->shape[i]);
    append(buf, size, "]");
}

/* What an output element depends on, briefly: its coordinates and, for
 * per-sample outputs, the sample's location and weight. */
static void describe(const mcase *c, int out_index, int64_t index, char *buf, size_t size)
{
    buf[0] = '\0';
    const shape_def *s = c->shape;
    int base = c->backward ? 1 : 0;
    const float *loc = c->in[base + 2].t.data, *attn = c->in[base + 3].t.data;
    if (!c->backward || out_index == 0) {
        int64_t C = s->C, H = s->H;
        int64_t ch = index % C, h = (index / C) % H, r = index / C / H;
        if (!c->backward)
            append(buf, size, "b=%" PRId64 " q=%" PRId64 " h=%" PRId64 " c=%" PRId64,
                   r / (s->Lq ? s->Lq : 1), r % (s->Lq ? s->Lq : 1), h, ch);
        else
            append(buf, size, "value[%" PRId64 "]=%.9g (0x%08" PRIx32 ") h=%" PRId64 " c=%" PRId64,
                   index, (double)((const float *)c->in[1].t.data)[index],
                   f32_bits(((const float *)c->in[1].t.data)[index]), h, ch);
        return;
    }
    int64_t k = out_index == 1 ? index / 2 : index;
    append(buf, size, "loc=(%.9g, %.9g) attn=%.9g", (double)loc[2 * k], (double)loc[2 * k + 1],
           (double)attn[k]);
}

static void compare(ly_check_result *r, const mcase *c, const output_set *ref,
                    const output_set *got)
{
    for (int o = 0; o < ref->n; o++) {
        int64_t n = ly_tensor_numel(&ref->t[o]);
        r->elements += n;
        const uint32_t *a = ref->t[o].data, *b = got->t[o].data;
        for (int64_t i = 0; i < n; i++) {
            if (a[i] == b[i]) continue;
            r->bit_differences++;
            double diff = ly_attn_abs_diff(bits_f32(a[i]), bits_f32(b[i]));
            if (diff > r->max_abs_diff) r->max_abs_diff = diff;
            if (!r->exact && diff <= r->tolerance) continue;
            r->mismatches++;
            if (r->n_shown >= LY_CHECK_MAX_SHOWN) continue;
            ly_check_mismatch *m = &r->shown[r->n_shown++];
            snprintf(m->case_name, sizeof m->case_name, "%s", c->name);
            shape_text(&ref->t[o], m->shape, sizeof m->shape);
            m->output = o;
            m->index = i;
            describe(c, o, i, m->inputs, sizeof m->inputs);
            m->reference_bits = a[i];
            m->impl_bits = b[i];
            m->reference = bits_f32(a[i]);
            m->impl = bits_f32(b[i]);
        }
    }
}

/* ---- Running ------------------------------------------------------------------------ */

typedef struct impl_state {
    char name[64];
    bool runnable;
    ly_check_result result;
} impl_state;

typedef struct listing {
    impl_state *items;
    int n, cap;
    const ly_check_options *opt;
    const char *slot;
    bool backward, out_of_memory;
} listing;

static void on_listed(const char *slot, const char *impl, bool eligible, const char *why_not,
                      void *user)
{
    (void)slot;
    listing *l = user;
    if (l->opt->impl ? strcmp(l->opt->impl, impl) != 0 : strcmp(impl, "reference") == 0) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        impl_state *grown = realloc(l->items, (size_t)cap * sizeof *grown);
        if (!grown) {
            l->out_of_memory = true;
            return;
        }
        l->items = grown;
        l->cap = cap;
    }
    impl_state *s = &l->items[l->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", impl);
    s->runnable = eligible;
    ly_check_result *r = &s->result;
    r->slot = l->slot;
    r->exact = !l->backward;
    r->tolerance = l->backward ? LY_CHECK_BACKWARD_TOLERANCE : 0.0;
    if (!eligible) {
        r->skipped = true;
        snprintf(r->why_skipped, sizeof r->why_skipped, "%s", why_not ? why_not : "not eligible");
    }
}

static const uint32_t REFERENCE_CANARY = 0x7FB0B0B0u, IMPL_CANARY = 0x7FBADBADu;

/* One case against every runnable implementation; LY_OK unless out of memory. */
static ly_status run_case(const char *slot, mcase *c, listing *l)
{
    if (!materialize(c, slot))
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory", slot,
                            c->name);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    for (int i = 0; i < MAX_IN; i++)
        call.in[i] = c->present[i] ? &c->in[i].t : NULL;
    call.params = c->params;
    call.threads = l->opt->threads;
    ly_tensor shapes_out[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    if (ly_kernel_infer_outputs(slot, &call, shapes_out, &n_out) != LY_OK) {
        for (int k = 0; k < l->n; k++)
            if (l->items[k].runnable) l->items[k].result.rejected++;
        ly_clear_error();
        return LY_OK;
    }
    output_set ref, got;
    bool ok = outputs_alloc(&ref, shapes_out, n_out, c->misaligned) &&
              outputs_alloc(&got, shapes_out, n_out, c->misaligned);
    if (!ok) {
        outputs_free(&ref);
        outputs_free(&got);
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory", slot,
                            c->name);
    }
    for (int i = 0; i < n_out; i++)
        call.out[i] = &ref.t[i];
    outputs_fill(&ref, REFERENCE_CANARY);
    ly_status st = ly_kernel_run_impl(slot, "reference", &call);
    int broken = outputs_guard_broken(&ref), modified = inputs_modified(c);
    if (st != LY_OK || broken >= 0 || modified >= 0) {
        for (int k = 0; k < l->n; k++) {
            if (!l->items[k].runnable) continue;
            ly_check_result *r = &l->items[k].result;
            if (st != LY_OK)
                ly_attn_note_error(r, "reference failed on case '%s': %s: %s", c->name,
                                   ly_status_name(st), ly_last_error());
            else if (broken >= 0)
                ly_attn_note_error(r, "reference wrote past the end of out[%d] on case '%s'",
                                   broken, c->name);
            else
                ly_attn_note_error(r, "reference modified in[%d] on case '%s'", modified, c->name);
        }
        restore_inputs(c);
        outputs_free(&ref);
        outputs_free(&got);
        return LY_OK;
    }
    for (int k = 0; k < l->n; k++) {
        if (!l->items[k].runnable) continue;
        ly_check_result *r = &l->items[k].result;
        for (int i = 0; i < n_out; i++)
            call.out[i] = &got.t[i];
        outputs_fill(&got, IMPL_CANARY);
        st = ly_kernel_run_impl(slot, l->items[k].name, &call);
        if (st == LY_E_DECLINED || st == LY_E_UNAVAILABLE) {
            r->declined++;
            ly_clear_error();
            continue;
        }
        if (st != LY_OK) {
            ly_attn_note_error(r, "failed on case '%s': %s: %s", c->name, ly_status_name(st),
                               ly_last_error());
            continue;
        }
        r->cases++;
        modified = inputs_modified(c);
        if (modified >= 0) {
            ly_attn_note_error(r, "modified in[%d] on case '%s'", modified, c->name);
            restore_inputs(c);
        }
        broken = outputs_guard_broken(&got);
        if (broken >= 0)
            ly_attn_note_error(r, "wrote past the end of out[%d] on case '%s'", broken, c->name);
        compare(r, c, &ref, &got);
    }
    outputs_free(&ref);
    outputs_free(&got);
    return LY_OK;
}

ly_status ly_check_msda_slot(const char *slot, const ly_check_options *options,
                             ly_check_report_fn report, void *user, int *n_matched)
{
    if (!slot || !options || !n_matched)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_check_msda_slot: missing argument");
    bool backward;
    if (strcmp(slot, LY_SLOT_MS_DEFORM_ATTN) == 0)
        backward = false;
    else if (strcmp(slot, LY_SLOT_MS_DEFORM_ATTN_BACKWARD) == 0)
        backward = true;
    else
        return ly_set_error(LY_E_NOT_FOUND, "parity check: no cases for slot '%s'", slot);
    listing l = {.opt = options, .slot = slot, .backward = backward};
    ly_status st = ly_kernel_list(slot, on_listed, &l);
    if (st == LY_OK && l.out_of_memory)
        st = ly_set_error(LY_E_NO_MEMORY, "parity check: %s: out of memory", slot);
    if (st != LY_OK) {
        free(l.items);
        return st;
    }
    *n_matched += l.n;
    bool any = false;
    for (int k = 0; k < l.n; k++)
        any |= l.items[k].runnable;

    int64_t total = 0, done = 0;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (size_t v = 0; v < N_VARIANTS; v++)
            total += wanted(&shapes[s], &variants[v], options->size);
    int64_t ordinal = 0;
    for (size_t s = 0; any && st == LY_OK && s < N_SHAPES; s++)
        for (size_t v = 0; st == LY_OK && v < N_VARIANTS; v++) {
            if (!wanted(&shapes[s], &variants[v], options->size)) continue;
            mcase c = {.shape = &shapes[s],
                       .var = &variants[v],
                       .backward = backward,
                       .misaligned = (ordinal++ & 1) != 0};
            st = run_case(slot, &c, &l);
            case_free(&c);
            done++;
            if (options->progress) options->progress(slot, done, total, options->progress_user);
        }
    for (int k = 0; st == LY_OK && report && k < l.n; k++) {
        l.items[k].result.impl = l.items[k].name;
        report(&l.items[k].result, user);
    }
    free(l.items);
    return st;
}
