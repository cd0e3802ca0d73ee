/* SPDX-License-Identifier: MIT */
/*
 * Parity cases of the sdpa slot (ops/cases.h): the attention shapes of the
 * target models (Swin-T windows, ViT-S/16, OWLv2-B/16 @960, a DETR
 * cross-attention) and odd sizes, tails and degenerate extents, with every
 * mask layout the slot takes, hostile values (NaN, inf, huge, subnormal) and
 * several scales. The gate is bit identity (the fused provider is defined to
 * reproduce the reference's order).
 */
#include "ops/cases.h"
#include "core/core.h"
#include "ops/sdpa/sdpa_internal.h"

#include <float.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
    {"tails", 2, 3, 5, 13, 7, 9, false},
    {"tails", 1, 2, 17, 33, 3, 5, false},
    {"one", 1, 1, 1, 1, 1, 1, false},
    {"wide d", 1, 1, 3, 9, 65, 33, false},
    {"exact", 3, 1, 7, 8, 16, 8, false},
    {"one key", 1, 1, 13, 1, 4, 4, false},
    {"long", 1, 1, 2, 129, 40, 40, false},
    {"odd", 1, 2, 11, 7, 8, 17, false},
    {"rows", 1, 1, 25, 23, 12, 24, false},
    {"no keys", 1, 2, 4, 0, 8, 8, false},
    {"d=0", 1, 1, 3, 5, 0, 4, false},
    {"no queries", 2, 1, 0, 5, 4, 4, false},
    {"dv=0", 1, 1, 3, 5, 4, 0, false},
    {"no batch", 0, 2, 3, 5, 4, 4, false},
    {"cross rows", 2, 2, 300, 85, 32, 32, false},
    /* 16 to 64 keys in whole 16-lane vectors: the avx2 provider's softmax
     * held in registers, blocks of six rows and a remainder */
    {"short rows", 2, 2, 13, 16, 5, 7, false},
    {"short rows", 1, 3, 12, 32, 10, 10, false},
    {"short rows", 1, 2, 19, 48, 3, 16, false},
    {"short rows", 2, 1, 6, 64, 10, 10, false},
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
    bool tokens_first; /* LY_SDPA_BNHD */
} case_spec;

static void enumerate(bool full, ly_case_visit_fn fn, void *user)
{
    int64_t ordinal = 0;
    const shape *models = full ? full_models : quick_models;
    size_t n_models = full ? N_FULL_MODELS : N_QUICK_MODELS;
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
            if (!full && s == 2 && v == 2) continue; /* keep OWLv2 to two runs */
            case_spec spec = {&models[s],
                              model_variants[s][v].mask,
                              model_variants[s][v].values,
                              (int)((s + (size_t)v) % 2),
                              ordinal++,
                              false};
            if (!fn(&spec, user)) return;
        }
    for (size_t s = 0; s < N_SMALL; s++)
        for (int m = 0; m < M_COUNT; m++)
            for (int v = 0; v < V_COUNT; v++) {
                if (!full && v != (m + (int)s) % V_COUNT && v != V_EDGE) continue;
                case_spec spec = {&small[s],   (mask_kind)m, (value_kind)v,
                                  (m + v) % 4, ordinal++,    false};
                if (!fn(&spec, user)) return;
            }
    /* Tokens first (LY_SDPA_BNHD): RF-DETR's windows as its backbone runs them,
     * and the small shapes with and without a mask. */
    static const shape rfdetr_window = {"rf-detr window", 4, 6, 145, 145, 64, 64, true};
    case_spec window = {&rfdetr_window, M_NONE, V_NORMAL, 0, ordinal++, true};
    if (!fn(&window, user)) return;
    /* SwinIR-s's shifted windows (8x8 tokens, head dim 10: bias and mask) */
    static const shape swinir_window = {"swinir-s window", 16, 6, 64, 64, 10, 10, true};
    case_spec shifted = {&swinir_window, M_BIAS_AND_B1QK, V_NORMAL, 0, ordinal++, true};
    if (!fn(&shifted, user)) return;
    for (size_t s = 0; s < N_SMALL; s++)
        for (int m = 0; m < 2; m++) {
            case_spec spec = {&small[s],    m ? M_B1QK : M_NONE, (value_kind)(s % V_COUNT),
                              (int)(s % 4), ordinal++,           true};
            if (!fn(&spec, user)) return;
        }
}

/* ---- a materialised case --------------------------------------------------------------- */

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

static bool add_mask(ly_check_case *c, int index, mask_kind kind, const shape *s, ly_check_rng *r)
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
        return true;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    if (is_bool) {
        uint8_t *m = ly_check_case_input(c, index, LY_U8, ndim, dims);
        if (!m) return false;
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = ly_check_rng_next(r) % 5;
            m[i] = kind == M_BOOL_K ? (uint8_t)(u * 60) : (uint8_t)(u < 2);
        }
        return true;
    }
    float *m = ly_check_case_input(c, index, LY_F32, ndim, dims);
    if (!m) return false;
    fill_mask(m, n, dims[ndim - 1], fill, r);
    return true;
}

static int64_t count_cases(ly_op op, bool full)
{
    (void)op;
    int64_t total = 0;
    enumerate(full, ly_case_count, &total);
    return total;
}

static ly_status build(ly_op op, int64_t index, bool full, ly_check_case *c)
{
    case_spec found;
    ly_case_finder f = {.index = index, .spec = &found, .size = sizeof found};
    enumerate(full, ly_case_find, &f);
    if (!f.found) return LY_E_NOT_FOUND;
    const case_spec *spec = &found;
    const shape *s = spec->shape;
    snprintf(c->name, sizeof c->name,
             "%s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",d%" PRId64 ",dv%" PRId64
             "] %s mask=%s scale=%s%s%s",
             s->name, s->B, s->H, s->Nq, s->Nk, s->d, s->dv, value_names[spec->values],
             mask_names[spec->mask], scale_names[spec->scale],
             spec->tokens_first ? " tokens-first" : "", c->offset ? " misaligned" : "");
    ly_check_rng r = {.state = ly_check_seed(ly_op_name(op), c->name)};
    ly_sdpa_params params = {.scale = scales[spec->scale],
                             .layout = spec->tokens_first ? LY_SDPA_BNHD : LY_SDPA_BHND};
    ly_check_case_params(c, &params, sizeof params);
    int64_t qs[4] = {s->B, s->H, s->Nq, s->d}, ks[4] = {s->B, s->H, s->Nk, s->d},
            vs[4] = {s->B, s->H, s->Nk, s->dv};
    if (spec->tokens_first) {
        qs[1] = s->Nq, qs[2] = s->H;
        ks[1] = vs[1] = s->Nk, ks[2] = vs[2] = s->H;
    }
    float *q = ly_check_case_input(c, 0, LY_F32, 4, qs);
    float *k = q ? ly_check_case_input(c, 1, LY_F32, 4, ks) : NULL;
    float *v = k ? ly_check_case_input(c, 2, LY_F32, 4, vs) : NULL;
    bool ok = v != NULL;
    if (ok) {
        fill_values(q, s->B * s->H * s->Nq * s->d, spec->values, 1.5f, &r);
        fill_values(k, s->B * s->H * s->Nk * s->d, spec->values, 1.0f, &r);
        fill_values(v, s->B * s->H * s->Nk * s->dv, spec->values, 1.0f, &r);
    }
    if (ok && spec->mask == M_BIAS_AND_B1QK)
        ok = add_mask(c, 3, M_1HQK, s, &r) && add_mask(c, 4, M_B1QK, s, &r);
    else if (ok && spec->mask != M_NONE)
        ok = add_mask(c, 3, spec->mask, s, &r);
    if (!ok)
        return ly_set_error(LY_E_NO_MEMORY, "parity check: %s: case '%s': out of memory",
                            ly_op_name(op), c->name);
    return LY_OK;
}

static void describe(ly_op op, const ly_check_case *c, int out, const ly_tensor *shape,
                     int64_t index, char *buf, size_t size)
{
    (void)op;
    (void)out;
    (void)shape;
    const int64_t *q = c->in[0].shape, *v = c->in[2].shape;
    const ly_sdpa_params *p = (const ly_sdpa_params *)c->params;
    bool tokens_first = c->has_params && p->layout == LY_SDPA_BNHD;
    int64_t dv = v[3], rows = index / dv, inner = q[2], outer = q[1];
    int64_t b = rows / inner / outer, a1 = rows / inner % outer, a2 = rows % inner;
    snprintf(buf, size,
             "b=%" PRId64 " h=%" PRId64 " query %" PRId64 " channel %" PRId64
             " (a whole row of q.k^T and column of v)",
             b, tokens_first ? a2 : a1, tokens_first ? a1 : a2, index % dv);
}

const ly_case_set ly_cases_sdpa = {.build = build, .count = count_cases, .describe = describe};
