/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the sdpa slot for `libreyolo kernels check` (see check.h for
 * the contract): every implementation but the reference runs next to it on the
 * attention shapes of the target models (Swin-T windows, ViT-S/16, OWLv2-B/16 @960,
 * a DETR cross-attention) and on odd sizes, tails and degenerate extents, with
 * every mask layout the slot takes, hostile values (NaN, inf, huge, subnormal)
 * and several scales. The gate is bit identity (the fused provider is defined to
 * reproduce the reference's order). As in check.c, each run starts from its own
 * output canary, guard bytes follow every output, inputs are compared with a copy
 * afterwards, and half the cases use buffers misaligned by one element.
 */
#include "core/core.h"
#include "kernels/check.h"
#include "kernels/check_rng.h"
#include "ops/sdpa/sdpa_internal.h"

#include <float.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- randomness (splitmix64, seeded from the case name) -------------------------------- */

/* ---- the case list ------------------------------------------------------------------ */

typedef enum mask_kind {
    M_NONE,
    M_QK,            /* f32 [Nq, Nk] normal */
    M_B1QK,          /* f32 [B, 1, Nq, Nk] of 0 / -100 (Swin's shifted-window mask) */
    M_1HQK,          /* f32 [1, H, Nq, Nk] normal (relative position bias) */
    M_K,             /* f32 [Nk] */
    M_B11K_INF,      /* f32 [B, 1, 1, Nk] of 0 / -inf (key padding) */
    M_FULL_MIN,      /* f32 [B, H, Nq, Nk] of 0 / -FLT_MAX */
    M_Q1,            /* f32 [Nq, 1]: broadcast along keys */
    M_BOOL_B1QK,     /* u8 [B, 1, Nq, Nk] (adds 1.0 where true) */
    M_BOOL_K,        /* u8 [Nk] with values other than 0/1 */
    M_BIAS_AND_B1QK, /* Swin: bias [1, H, Nq, Nk] then mask [B, 1, Nq, Nk] */
    M_ROWS_INF,      /* f32 [B, H, Nq, Nk], some rows entirely -inf (NaN rows) */
    M_COUNT
} mask_kind;

static const char *const mask_names[M_COUNT] = {
    "none",
    "f32[Nq,Nk]",
    "f32[B,1,Nq,Nk]-100",
    "f32[1,H,Nq,Nk]",
    "f32[Nk]",
    "f32[B,1,1,Nk]-inf",
    "f32[B,H,Nq,Nk]-FLT_MAX",
    "f32[Nq,1]",
    "u8[B,1,Nq,Nk]",
    "u8[Nk]",
    "bias+mask",
    "f32[B,H,Nq,Nk]-inf-rows",
};

typedef enum value_kind { V_NORMAL, V_PEAKY, V_EDGE, V_TINY, V_COUNT } value_kind;
static const char *const value_names[V_COUNT] = {"normal", "peaky", "edge", "tiny"};

static const double scales[4] = {0.0, 0.125, 1.0, -0.3};
static const char *const scale_names[4] = {"default", "0.125", "1", "-0.3"};

typedef struct shape {
    const char *name;
    int64_t B, H, Nq, Nk, d, dv;
    bool model; /* a model shape: fewer variants */
} shape;

/* Model shapes in the quick set are cut down (fewer windows, heads or query
 * rows) so the reference stays quick under sanitizers; the full set has them
 * whole, OWLv2 with one of its 12 heads in its first variant and 601 query rows
 * in the others (the reference takes ~5 s per full head). */
static const shape quick_models[] = {
    {"swin-t window", 8, 3, 49, 49, 32, 32, true},
    {"vit-s/16", 1, 6, 197, 197, 64, 64, true},
    {"owlv2-b/16@960 (151 query rows)", 1, 1, 151, 3601, 64, 64, true},
    {"detr cross-attention", 2, 2, 300, 425, 32, 32, true},
};
static const shape full_models[] = {
    {"swin-t window", 64, 3, 49, 49, 32, 32, true},
    {"vit-s/16", 1, 6, 197, 197, 64, 64, true},
    /* OWLv2's 3601-key rows, 601 of its 3601 queries: every row is computed
     * alone, and the whole square cost the gate 8 s */
    {"owlv2-b/16@960 (601 query rows)", 1, 1, 601, 3601, 64, 64, true},
    {"detr cross-attention", 2, 8, 300, 850, 32, 32, true},
};
static const shape small[] = {
    {"tails", 2, 3, 5, 13, 7, 9, false},   {"tails", 1, 2, 17, 33, 3, 5, false},
    {"one", 1, 1, 1, 1, 1, 1, false},      {"wide d", 1, 1, 3, 9, 65, 33, false},
    {"exact", 3, 1, 7, 8, 16, 8, false},   {"one key", 1, 1, 13, 1, 4, 4, false},
    {"long", 1, 1, 2, 129, 40, 40, false}, {"odd", 1, 2, 11, 7, 8, 17, false},
    {"rows", 1, 1, 25, 23, 12, 24, false}, {"no keys", 1, 2, 4, 0, 8, 8, false},
    {"d=0", 1, 1, 3, 5, 0, 4, false},      {"no queries", 2, 1, 0, 5, 4, 4, false},
    {"dv=0", 1, 1, 3, 5, 4, 0, false},     {"no batch", 0, 2, 3, 5, 4, 4, false},
};
#define N_QUICK_MODELS (sizeof quick_models / sizeof quick_models[0])
#define N_FULL_MODELS (sizeof full_models / sizeof full_models[0])
#define N_SMALL (sizeof small / sizeof small[0])

typedef struct case_spec {
    const shape *shape;
    mask_kind mask;
    value_kind values;
    int scale;
    int64_t ordinal;
} case_spec;

typedef bool (*spec_fn)(const case_spec *spec, void *user);

static void enumerate(ly_check_size size, spec_fn fn, void *user)
{
    int64_t ordinal = 0;
    const shape *models = size == LY_CHECK_FULL ? full_models : quick_models;
    size_t n_models = size == LY_CHECK_FULL ? N_FULL_MODELS : N_QUICK_MODELS;
    /* Model shapes with the masks their models use, plus one hostile run. */
    static const struct {
        mask_kind mask;
        value_kind values;
    } model_variants[4][3] = {
        {{M_BIAS_AND_B1QK, V_NORMAL}, {M_B1QK, V_PEAKY}, {M_NONE, V_EDGE}},
        {{M_NONE, V_NORMAL}, {M_NONE, V_PEAKY}, {M_BOOL_B1QK, V_EDGE}},
        {{M_NONE, V_NORMAL}, {M_B11K_INF, V_NORMAL}, {M_NONE, V_EDGE}},
        {{M_B11K_INF, V_NORMAL}, {M_QK, V_PEAKY}, {M_FULL_MIN, V_EDGE}},
    };
    for (size_t s = 0; s < n_models; s++)
        for (int v = 0; v < 3; v++) {
            if (size == LY_CHECK_QUICK && s == 2 && v == 2) continue; /* keep OWLv2 to two runs */
            case_spec spec = {&models[s], model_variants[s][v].mask, model_variants[s][v].values,
                              (int)((s + (size_t)v) % 2), ordinal++};
            if (!fn(&spec, user)) return;
        }
    for (size_t s = 0; s < N_SMALL; s++)
        for (int m = 0; m < M_COUNT; m++)
            for (int v = 0; v < V_COUNT; v++) {
                if (size == LY_CHECK_QUICK && v != (m + (int)s) % V_COUNT && v != V_EDGE) continue;
                case_spec spec = {&small[s], (mask_kind)m, (value_kind)v, (m + v) % 4, ordinal++};
                if (!fn(&spec, user)) return;
            }
}

/* ---- a materialised case --------------------------------------------------------------- */

enum { GUARD_BYTES = 64, ALIGN = 64 };

typedef struct buffer {
    ly_tensor t;
    void *alloc;
    size_t bytes;
} buffer;

typedef struct sdpa_case {
    char name[112];
    buffer in[5];
    int n_in;
    ly_sdpa_params params;
    bool out_of_memory;
} sdpa_case;

static void *alloc_view(size_t bytes, size_t elem, bool misaligned, void **alloc)
{
    *alloc = malloc(bytes + elem + ALIGN + GUARD_BYTES);
    if (!*alloc) return NULL;
    uintptr_t p = ((uintptr_t)*alloc + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
    return (void *)(p + (misaligned ? elem : 0));
}

static void *add_input(sdpa_case *c, int index, ly_dtype dtype, int ndim, const int64_t *shape,
                       bool misaligned)
{
    buffer *b = &c->in[index];
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    size_t elem = ly_dtype_size(dtype);
    b->bytes = (size_t)numel * elem;
    void *data = alloc_view(b->bytes, elem, misaligned, &b->alloc);
    if (!data) {
        c->out_of_memory = true;
        return NULL;
    }
    ly_tensor_init(&b->t, data, dtype, ndim, shape);
    if (index + 1 > c->n_in) c->n_in = index + 1;
    return data;
}

static void case_free(sdpa_case *c)
{
    for (int i = 0; i < 5; i++)
        free(c->in[i].alloc);
}

static float hostile(ly_check_rng *r)
{
    static const float values[] = {NAN,  INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e30f,  -1e30f,
                                   0.0f, -0.0f,    1e-45f,    FLT_MIN, 88.0f,    -88.0f, 1e4f};
    return values[ly_check_rng_next(r) % (sizeof values / sizeof values[0])];
}

static void fill_values(float *x, int64_t n, value_kind kind, float gain, ly_check_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        float v = ly_check_rng_normal(r);
        switch (kind) {
        case V_PEAKY:
            v *= 30.0f * gain; /* most softmax terms underflow; sums near 1 */
            break;
        case V_EDGE:
            v *= gain;
            if (ly_check_rng_next(r) % 97 == 0) v = hostile(r);
            break;
        case V_TINY:
            v *= 1e-39f; /* subnormal operands and products */
            break;
        default:
            v *= gain;
            break;
        }
        x[i] = v;
    }
}

static void fill_mask(float *m, int64_t n, int64_t row_len, int kind, ly_check_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = ly_check_rng_next(r);
        switch (kind) {
        case 0: /* normal */
            m[i] = ly_check_rng_normal(r);
            break;
        case 1: /* 0 / -100 */
            m[i] = u % 3 == 0 ? -100.0f : 0.0f;
            break;
        case 2: /* 0 / -inf, never the first key */
            m[i] = i % (row_len ? row_len : 1) != 0 && u % 4 == 0 ? -INFINITY : 0.0f;
            break;
        case 3: /* 0 / -FLT_MAX */
            m[i] = u % 2 ? -FLT_MAX : 0.0f;
            break;
        default: /* -inf rows: whole rows of -inf */
            m[i] = ((i / (row_len ? row_len : 1)) % 3 == 1) ? -INFINITY : ly_check_rng_normal(r);
            break;
        }
    }
}

static void add_mask(sdpa_case *c, int index, mask_kind kind, const shape *s, bool misaligned,
                     ly_check_rng *r)
{
    int64_t dims[4];
    int ndim = 4;
    int fill = 0;
    bool is_bool = false;
    switch (kind) {
    case M_QK:
        ndim = 2;
        dims[0] = s->Nq;
        dims[1] = s->Nk;
        break;
    case M_B1QK:
        dims[0] = s->B, dims[1] = 1, dims[2] = s->Nq, dims[3] = s->Nk;
        fill = 1;
        break;
    case M_1HQK:
        dims[0] = 1, dims[1] = s->H, dims[2] = s->Nq, dims[3] = s->Nk;
        break;
    case M_K:
        ndim = 1;
        dims[0] = s->Nk;
        break;
    case M_B11K_INF:
        dims[0] = s->B, dims[1] = 1, dims[2] = 1, dims[3] = s->Nk;
        fill = 2;
        break;
    case M_FULL_MIN:
        dims[0] = s->B, dims[1] = s->H, dims[2] = s->Nq, dims[3] = s->Nk;
        fill = 3;
        break;
    case M_Q1:
        ndim = 2;
        dims[0] = s->Nq;
        dims[1] = 1;
        break;
    case M_BOOL_B1QK:
        dims[0] = s->B, dims[1] = 1, dims[2] = s->Nq, dims[3] = s->Nk;
        is_bool = true;
        break;
    case M_BOOL_K:
        ndim = 1;
        dims[0] = s->Nk;
        is_bool = true;
        break;
    case M_ROWS_INF:
        dims[0] = s->B, dims[1] = s->H, dims[2] = s->Nq, dims[3] = s->Nk;
        fill = 4;
        break;
    default:
        return;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    if (is_bool) {
        uint8_t *m = add_input(c, index, LY_U8, ndim, dims, misaligned);
        if (!m) return;
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = ly_check_rng_next(r) % 5;
            m[i] = kind == M_BOOL_K ? (uint8_t)(u * 60) : (uint8_t)(u < 2);
        }
        return;
    }
    float *m = add_input(c, index, LY_F32, ndim, dims, misaligned);
    if (m) fill_mask(m, n, dims[ndim - 1], fill, r);
}

static void materialize(sdpa_case *c, const char *slot, const case_spec *spec)
{
    const shape *s = spec->shape;
    bool mis = spec->ordinal & 1;
    snprintf(c->name, sizeof c->name,
             "%s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",d%" PRId64 ",dv%" PRId64
             "] %s mask=%s scale=%s%s",
             s->name, s->B, s->H, s->Nq, s->Nk, s->d, s->dv, value_names[spec->values],
             mask_names[spec->mask], scale_names[spec->scale], mis ? " misaligned" : "");
    ly_check_rng r = {.state = ly_check_seed(slot, c->name)};
    c->params = (ly_sdpa_params){.scale = scales[spec->scale]};
    int64_t qs[4] = {s->B, s->H, s->Nq, s->d}, ks[4] = {s->B, s->H, s->Nk, s->d},
            vs[4] = {s->B, s->H, s->Nk, s->dv};
    float *q = add_input(c, 0, LY_F32, 4, qs, mis);
    float *k = add_input(c, 1, LY_F32, 4, ks, mis);
    float *v = add_input(c, 2, LY_F32, 4, vs, mis);
    if (!q || !k || !v) return;
    fill_values(q, s->B * s->H * s->Nq * s->d, spec->values, 1.5f, &r);
    fill_values(k, s->B * s->H * s->Nk * s->d, spec->values, 1.0f, &r);
    fill_values(v, s->B * s->H * s->Nk * s->dv, spec->values, 1.0f, &r);
    c->n_in = 3;
    if (spec->mask == M_BIAS_AND_B1QK) {
        add_mask(c, 3, M_1HQK, s, mis, &r);
        add_mask(c, 4, M_B1QK, s, mis, &r);
    } else if (spec->mask != M_NONE) {
        add_mask(c, 3, spec->mask, s, mis, &r);
    }
}

/* ---- running ---------------------------------------------------------------------------- */

typedef struct run_state {
    const char *slot;
    ly_check_run *run;
    ly_status fatal;
} run_state;

static void describe(const void *user, int out, int64_t index, char *buf, size_t size)
{
    (void)out;
    const sdpa_case *c = user;
    const int64_t *q = c->in[0].t.shape, *v = c->in[2].t.shape;
    int64_t dv = v[3], rows = index / dv;
    snprintf(buf, size,
             "b=%" PRId64 " h=%" PRId64 " query %" PRId64 " channel %" PRId64
             " (a whole row of q.k^T and column of v)",
             rows / q[2] / q[1], rows / q[2] % q[1], rows % q[2], index % dv);
}

static bool run_case(const case_spec *spec, void *user)
{
    run_state *run = user;
    sdpa_case c;
    memset(&c, 0, sizeof c);
    materialize(&c, run->slot, spec);
    if (c.out_of_memory) {
        run->fatal = ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                                  run->slot, c.name);
    } else {
        ly_kernel_call call;
        ly_kernel_call_init(&call);
        for (int i = 0; i < c.n_in; i++)
            call.in[i] = c.in[i].t.data ? &c.in[i].t : NULL;
        call.params = &c.params;
        run->fatal = ly_check_run_case(run->run, c.name, &call, 0, spec->ordinal & 1, describe, &c);
    }
    case_free(&c);
    return run->fatal == LY_OK;
}

static bool count_spec(const case_spec *spec, void *user)
{
    (void)spec;
    (*(int64_t *)user)++;
    return true;
}

ly_status ly_check_sdpa_op(ly_op op, const ly_check_options *options, ly_check_report_fn report,
                           void *user, int *n_matched)
{
    int64_t total = 0;
    enumerate(options->size, count_spec, &total);
    run_state run = {.slot = ly_op_name(op)};
    ly_status st = ly_check_run_begin(op, options, total, &run.run, n_matched);
    if (st != LY_OK) return st;
    if (ly_check_run_active(run.run)) enumerate(options->size, run_case, &run);
    st = run.fatal;
    ly_check_run_end(run.run, st == LY_OK ? report : NULL, user);
    return st;
}
