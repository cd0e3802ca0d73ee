/* SPDX-License-Identifier: MIT */
/*
 * The ops: their ids (from the manifest, libreyolo/ops.inc) and the parameters
 * each one reads from ly_kernel_call.params.
 *
 * A call passes a pointer to its op's parameters struct, or NULL for the op's
 * defaults (the *_DEFAULTS initializers below:
 * `ly_conv2d_params p = LY_CONV2D_DEFAULTS;`). Implementations always see a
 * non-NULL struct that passed the op's contract: the registry substitutes the
 * defaults before any of them runs.
 *
 * Operand contracts (in[] / out[]) are documented with each family of ops:
 * libreyolo/quant.h, libreyolo/nn.h, libreyolo/msda.h, libreyolo/sdpa.h.
 */
#ifndef LIBREYOLO_OPS_H
#define LIBREYOLO_OPS_H

#include "libreyolo/libreyolo.h"

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ly_op {
#define LY_OP(ID, name, params, defaults, check, parity, export, layout) LY_OP_##ID,
#include "libreyolo/ops.inc"
#undef LY_OP
    LY_OP_COUNT
} ly_op;

/* The slot name of `op` ("conv2d"); NULL for an id out of range. */
LY_API const char *ly_op_name(ly_op op);
/* The id of the op named `name` (LY_E_NOT_FOUND for a name the manifest does not
 * list, e.g. a slot only a plugin registers). */
LY_API ly_status ly_op_from_name(const char *name, ly_op *op);

/* ---- Parameters ---------------------------------------------------------------- */

/* A field of a parameters struct, for tools that set parameters by name
 * (`libreyolo kernels run --arg stride=2,2`). */
typedef enum ly_param_type {
    LY_PARAM_INT,   /* int64_t[count] */
    LY_PARAM_DOUBLE /* double[count] */
} ly_param_type;

typedef struct ly_param_field {
    const char *name;
    ly_param_type type;
    int count; /* elements (2 for (h, w) pairs) */
    size_t offset;
} ly_param_field;

/* The fields of `op`'s parameters struct, its size and its defaults (all
 * static). An op without parameters has no fields. */
LY_API ly_status ly_op_params(ly_op op, const ly_param_field **fields, size_t *n_fields,
                              size_t *size, const void **defaults);

/* Ops that take none. */
typedef struct ly_no_params {
    int64_t unused;
} ly_no_params;
#define LY_NO_PARAMS                                                                               \
    {                                                                                              \
        0                                                                                          \
    }

/* fake_quant_int8_per_channel (and its backward). */
typedef struct ly_fake_quant_int8_per_channel_params {
    int64_t axis; /* channel axis, default 0; negative counts from the end */
} ly_fake_quant_int8_per_channel_params;
#define LY_FAKE_QUANT_INT8_PER_CHANNEL_DEFAULTS                                                    \
    {                                                                                              \
        .axis = 0                                                                                  \
    }

/* fake_quant_int_grouped (and its backward). */
typedef struct ly_fake_quant_int_grouped_params {
    int64_t bits;       /* 2 or 4 (default 4) */
    int64_t group_size; /* elements per group along the last dimension (default 128) */
} ly_fake_quant_int_grouped_params;
#define LY_FAKE_QUANT_INT_GROUPED_DEFAULTS                                                         \
    {                                                                                              \
        .bits = 4, .group_size = 128                                                               \
    }

typedef struct ly_unpack_int_grouped_params {
    int64_t bits, group_size; /* as fake_quant_int_grouped */
    int64_t in_features;      /* columns to keep; -1 (default): all */
} ly_unpack_int_grouped_params;
#define LY_UNPACK_INT_GROUPED_DEFAULTS                                                             \
    {                                                                                              \
        .bits = 4, .group_size = 128, .in_features = -1                                            \
    }

typedef struct ly_unpack_nvfp4_params {
    int64_t in_features; /* columns to keep; -1 (default): all */
} ly_unpack_nvfp4_params;
#define LY_UNPACK_NVFP4_DEFAULTS                                                                   \
    {                                                                                              \
        .in_features = -1                                                                          \
    }

/* Activations fused into conv2d (NONE to LEAKY_RELU) and linear (all). */
typedef enum ly_activation {
    LY_ACT_NONE = 0,
    LY_ACT_SILU = 1,    /* x * sigmoid(x) */
    LY_ACT_SIGMOID = 2, /* 1 / (1 + exp(-x)) */
    LY_ACT_RELU = 3,
    LY_ACT_LEAKY_RELU = 4, /* x < 0 ? alpha * x : x */
    LY_ACT_GELU = 5        /* x * 0.5 * (1 + erf(x / sqrt 2)): PyTorch's nn.GELU() */
} ly_activation;

typedef struct ly_conv2d_params {
    int64_t stride[2];   /* (h, w), default (1, 1) */
    int64_t padding[2];  /* (h, w) on both sides, default (0, 0) */
    int64_t dilation[2]; /* (h, w), default (1, 1) */
    int64_t groups;      /* default 1 */
    int64_t activation;  /* an ly_activation, default LY_ACT_NONE */
    double alpha;        /* LY_ACT_LEAKY_RELU's negative slope (default 0.01, as PyTorch) */
    /* post_affine != 0: the activation's output times post_scale plus post_shift
     * (each rounded to f32, two f32 operations), before the residual: HGNetv2's
     * LearnableAffineBlock. Default 0 (off). */
    int64_t post_affine;
    double post_scale, post_shift;
} ly_conv2d_params;
#define LY_CONV2D_DEFAULTS                                                                         \
    {                                                                                              \
        .stride = {1, 1}, .padding = {0, 0}, .dilation = {1, 1}, .groups = 1,                      \
        .activation = LY_ACT_NONE, .alpha = 0.01                                                   \
    }

/* max_pool2d, avg_pool2d. */
typedef struct ly_pool2d_params {
    int64_t kernel[2];         /* window (h, w), default (1, 1) */
    int64_t stride[2];         /* default (1, 1) */
    int64_t padding[2];        /* on both sides; max pads with -inf */
    int64_t count_include_pad; /* avg_pool2d: 1 (default, as PyTorch) or 0 */
} ly_pool2d_params;
#define LY_POOL2D_DEFAULTS                                                                         \
    {                                                                                              \
        .kernel = {1, 1}, .stride = {1, 1}, .padding = {0, 0}, .count_include_pad = 1              \
    }

typedef struct ly_upsample_nearest2d_params {
    int64_t scale; /* integer factor on both axes, default 2 */
} ly_upsample_nearest2d_params;
#define LY_UPSAMPLE_NEAREST2D_DEFAULTS                                                             \
    {                                                                                              \
        .scale = 2                                                                                 \
    }

/* concat: as torch.cat, except that on an axis other than 0 a part whose
 * first extent is 1 among parts of B (a constant beside a batch) is repeated
 * for each of the B. */
typedef struct ly_concat_params {
    int64_t axis; /* default 0, as torch.cat; negative counts from the end */
} ly_concat_params;
#define LY_CONCAT_DEFAULTS                                                                         \
    {                                                                                              \
        .axis = 0                                                                                  \
    }

/* anchor_grid: the cell centres of a detection level. */
typedef struct ly_anchor_grid_params {
    double offset; /* added to the column and row indices, default 0.5 */
} ly_anchor_grid_params;
#define LY_ANCHOR_GRID_DEFAULTS                                                                    \
    {                                                                                              \
        .offset = 0.5                                                                              \
    }

typedef struct ly_resize_bilinear2d_params {
    int64_t size[2];            /* output (h, w); required */
    int64_t align_corners;      /* 0 (default) or 1 */
    int64_t half_pixel_centers; /* 1 (default, PyTorch/TF2) or 0 (legacy TF) */
} ly_resize_bilinear2d_params;
#define LY_RESIZE_BILINEAR2D_DEFAULTS                                                              \
    {                                                                                              \
        .size = {0, 0}, .align_corners = 0, .half_pixel_centers = 1                                \
    }

/* ms_deform_attn and its backward. */
typedef struct ly_ms_deform_attn_params {
    int64_t mode; /* LY_MSDA_BILINEAR (default) or LY_MSDA_DISCRETE (libreyolo/msda.h) */
} ly_ms_deform_attn_params;
#define LY_MS_DEFORM_ATTN_DEFAULTS                                                                 \
    {                                                                                              \
        .mode = 0                                                                                  \
    }

/* grid_sample: torch.nn.functional.grid_sample of an NCHW input at the (x, y)
 * points of a grid [N, Ho, Wo, 2] in [-1, 1] (x along W), padding with zeros:
 * ATen's grid_sampler_2d (the portable form of ms_deform_attn). */
typedef struct ly_grid_sample_params {
    int64_t mode;          /* 0 bilinear (default) or 1 nearest, as ATen numbers them */
    int64_t padding_mode;  /* 0 zeros (the only one) */
    int64_t align_corners; /* 0 (default) or 1 */
} ly_grid_sample_params;
#define LY_GRID_SAMPLE_DEFAULTS                                                                    \
    {                                                                                              \
        .mode = 0, .padding_mode = 0, .align_corners = 0                                           \
    }

typedef struct ly_sdpa_params {
    double scale;   /* factor applied to q·kᵀ; 0 (default) = 1/sqrt(head dim) */
    int64_t layout; /* LY_SDPA_BHND (default) or LY_SDPA_BNHD (libreyolo/sdpa.h) */
} ly_sdpa_params;
#define LY_SDPA_DEFAULTS                                                                           \
    {                                                                                              \
        .scale = 0.0, .layout = 0                                                                  \
    }

/* linear: out = act(x·weightᵀ + bias) + residual (in[3], NULL or out's
 * shape), so a transformer's MLP and residual adds run in the GEMM's epilogue. */
typedef struct ly_linear_params {
    int64_t activation; /* an ly_activation, default LY_ACT_NONE */
    double alpha;       /* LY_ACT_LEAKY_RELU's negative slope (default 0.01, as PyTorch) */
} ly_linear_params;
#define LY_LINEAR_DEFAULTS                                                                         \
    {                                                                                              \
        .activation = LY_ACT_NONE, .alpha = 0.01                                                   \
    }

typedef struct ly_matmul_params {
    int64_t transpose_b; /* 1: b is [..., N, K] (a·bᵀ), as q·kᵀ; default 0 */
} ly_matmul_params;
#define LY_MATMUL_DEFAULTS                                                                         \
    {                                                                                              \
        .transpose_b = 0                                                                           \
    }

/* layer_norm, rms_norm: over the last dimension. */
typedef struct ly_norm_params {
    double eps; /* layer_norm default 1e-5 (torch); rms_norm takes 1e-6 as DEIMv2 */
} ly_norm_params;
#define LY_NORM_DEFAULTS                                                                           \
    {                                                                                              \
        .eps = 1e-5                                                                                \
    }

/* softmax, cumsum: along one axis. */
typedef struct ly_axis_params {
    int64_t axis; /* default -1 (the last); negative counts from the end */
} ly_axis_params;
#define LY_AXIS_DEFAULTS                                                                           \
    {                                                                                              \
        .axis = -1                                                                                 \
    }

typedef struct ly_clamp_params {
    double min, max; /* either may be -inf / +inf (one-sided); default (-inf, +inf) */
} ly_clamp_params;
#define LY_CLAMP_DEFAULTS                                                                          \
    {                                                                                              \
        .min = -HUGE_VAL, .max = HUGE_VAL                                                          \
    }

/* A reshape extent that is the input's extent on the same axis (ONNX's 0),
 * so one graph serves every batch size. */
#define LY_RESHAPE_KEEP (-2)
typedef struct ly_reshape_params {
    int64_t ndim;
    /* one extent may be -1: what the others leave; any may be LY_RESHAPE_KEEP */
    int64_t shape[LY_MAX_DIMS];
} ly_reshape_params;
#define LY_RESHAPE_DEFAULTS                                                                        \
    {                                                                                              \
        .ndim = 0                                                                                  \
    }

typedef struct ly_permute_params {
    int64_t ndim;
    int64_t perm[LY_MAX_DIMS]; /* out.shape[i] = in.shape[perm[i]] */
} ly_permute_params;
#define LY_PERMUTE_DEFAULTS                                                                        \
    {                                                                                              \
        .ndim = 0                                                                                  \
    }

/* x[..., start:end:step, ...] on `axis`, as Python slicing: negative start/end
 * count from the end, both are clamped to [0, extent]. */
typedef struct ly_slice_params {
    int64_t axis;
    int64_t start, end; /* default 0 and INT64_MAX (to the end) */
    int64_t step;       /* >= 1, default 1 */
} ly_slice_params;
#define LY_SLICE_DEFAULTS                                                                          \
    {                                                                                              \
        .axis = 0, .start = 0, .end = INT64_MAX, .step = 1                                         \
    }

/* gather (torch.gather) and index_select: along `axis`. */
typedef struct ly_gather_params {
    int64_t axis; /* default 0; negative counts from the end */
    /* index_select on axis 1 only: 0 (default), or K: the (1-d) index is B
     * runs of K rows, run b selecting from x[b] (from x[0] when x has one):
     * out [B, K, ...], a batch's top-K rows (with B = 1 plain index_select) */
    int64_t per_image;
} ly_gather_params;
#define LY_GATHER_DEFAULTS                                                                         \
    {                                                                                              \
        .axis = 0                                                                                  \
    }

typedef struct ly_topk_params {
    int64_t k;       /* required, 0..extent */
    int64_t axis;    /* default -1 */
    int64_t largest; /* 1 (default): the k largest, descending; 0: the k smallest, ascending */
} ly_topk_params;
#define LY_TOPK_DEFAULTS                                                                           \
    {                                                                                              \
        .k = 0, .axis = -1, .largest = 1                                                           \
    }

#ifdef __cplusplus
}
#endif

#endif
