/*
 * The kernel registry.
 *
 * Every accelerated operation has a named slot ("fake_quant_fp8", "unpack_nvfp4",
 * ...). Each slot holds an ordered list of implementations, newest first; the
 * portable C "reference" is registered first and so always sits last. A call is
 * served by the newest implementation that is allowed (LIBREYOLO_KERNELS) and
 * whose predicate accepts the call; an implementation that fails at run time is
 * disabled for the rest of the process (one warning) and the same call is retried
 * on the next one, down to the reference.
 *
 * Selection (read on every call, stripped and lower-cased):
 *   LIBREYOLO_KERNELS=off|reference  only "reference"; accelerated providers and
 *                                    plugins are not even initialised.
 *   LIBREYOLO_KERNELS=<name>         only implementations named <name>, plus
 *                                    "reference".
 *   LIBREYOLO_QUANT_KERNELS          legacy alias, read only when the first is
 *                                    unset or empty.
 *
 * Unlike upstream LibreYOLO (whose register() evicted a cache key that never
 * existed), register/unregister here invalidate the resolution cache at once.
 *
 * Thread safety: every function may be called from any thread. The dispatch path
 * takes no lock once a slot's resolution is cached.
 */
#ifndef LIBREYOLO_KERNELS_H
#define LIBREYOLO_KERNELS_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU features --------------------------------------------------------- */

/* Instruction sets usable here: CPUID says the CPU has them AND (for AVX and
 * wider) XGETBV says the operating system saves the registers. */
typedef struct ly_cpu_features {
    bool sse2, sse41, avx, avx2, fma, f16c, avx512f;
    int logical_cpus;
} ly_cpu_features;

LY_API ly_status ly_cpu_features_get(ly_cpu_features *out);

/* ---- A call ------------------------------------------------------------- */

#define LY_KERNEL_MAX_INPUTS 6
#define LY_KERNEL_MAX_OUTPUTS 3

/* Scalar arguments. Each slot documents which fields it reads; the others are
 * ignored. ly_kernel_params_default() gives the defaults. */
typedef struct ly_kernel_params {
    int64_t axis;        /* fake_quant_int8_per_channel: channel axis (default 0); concat axis */
    int64_t bits;        /* int grouped: 2 or 4 (default 4) */
    int64_t group_size;  /* int grouped: elements per group (default 128) */
    int64_t in_features; /* unpack: columns to keep (default: all) = -1 */
    int64_t stride[2];   /* conv2d, pooling: (h, w), default (1, 1) */
    int64_t padding[2];  /* conv2d, pooling: (h, w), applied on both sides, default (0, 0) */
    int64_t dilation[2]; /* conv2d: (h, w), default (1, 1) */
    int64_t kernel[2];   /* pooling window (h, w), default (1, 1) */
    int64_t groups;      /* conv2d: default 1 */
    int64_t activation;  /* conv2d: an ly_activation, default LY_ACT_NONE */
    int64_t scale;       /* upsample_nearest2d: integer factor, default 2 */
    int64_t count_include_pad; /* avg_pool2d: 1 (default, as PyTorch) or 0 */
    double alpha;        /* LY_ACT_LEAKY_RELU negative slope (default 0.01, as PyTorch) */
    double attn_scale;   /* sdpa: factor applied to q·kᵀ; 0 (default) = 1/sqrt(head dim) */
    int64_t mode;        /* ms_deform_attn: 0 bilinear (default), 1 discrete (nearest) */
    int64_t size[2];     /* resize_bilinear2d: output (h, w) */
    int64_t align_corners;      /* resize_bilinear2d: 0 (default) or 1 */
    int64_t half_pixel_centers; /* resize_bilinear2d: 1 (default, PyTorch/TF2) or 0 (legacy TF) */
} ly_kernel_params;

/* Activations fused into conv2d. */
typedef enum ly_activation {
    LY_ACT_NONE = 0,
    LY_ACT_SILU = 1,    /* x * sigmoid(x) */
    LY_ACT_SIGMOID = 2, /* 1 / (1 + exp(-x)) */
    LY_ACT_RELU = 3,
    LY_ACT_LEAKY_RELU = 4 /* x < 0 ? alpha * x : x (params.alpha) */
} ly_activation;

/* One invocation of a slot. Inputs that a slot marks optional may be NULL
 * (e.g. the scale of fake_quant_int8_per_channel: NULL = computed from data). */
typedef struct ly_kernel_call {
    const ly_tensor *in[LY_KERNEL_MAX_INPUTS];
    ly_tensor *out[LY_KERNEL_MAX_OUTPUTS];
    ly_kernel_params params;
    int threads; /* 0: LIBREYOLO_THREADS, else all logical CPUs */
} ly_kernel_call;

LY_API ly_status ly_kernel_call_init(ly_kernel_call *call);

/* An implementation. It may assume the call passed the slot's validation
 * (shapes, dtypes, non-NULL required operands, contiguous memory).
 * Returns LY_OK; LY_E_DECLINED to hand this input to the next implementation
 * (not a failure); anything else is a failure: the registry disables it. */
typedef ly_status (*ly_kernel_fn)(const ly_kernel_call *call);

/* Eligibility. `call` is NULL when the registry asks about this machine in
 * general (listing, caching); otherwise it is the call about to run.
 * Return LY_OK if eligible, LY_E_DECLINED if not (set *why_not to a static
 * string saying why). Any other status is an error in the predicate: the
 * registry warns and treats the implementation as not eligible. */
typedef ly_status (*ly_kernel_predicate)(const ly_kernel_call *call, const ly_cpu_features *cpu,
                                         const char **why_not);

/* ---- Registry ------------------------------------------------------------ */

/* Add an implementation at the front of `slot`'s list (a new slot is created
 * on first registration). `name` is matched against LIBREYOLO_KERNELS exactly,
 * so use lower case. `predicate` may be NULL (always eligible). Strings are
 * copied. */
LY_API ly_status ly_kernel_register(const char *slot, const char *name, ly_kernel_fn fn,
                                    ly_kernel_predicate predicate);

/* Remove every implementation named `name` from `slot`. An unknown slot is
 * created empty (it then reports "unavailable"), as upstream does. */
LY_API ly_status ly_kernel_unregister(const char *slot, const char *name);

/* Drop every cached resolution (they are also dropped automatically when the
 * registry or the selection variables change). */
LY_API ly_status ly_kernel_clear_cache(void);

/* The implementation that would serve `call` (NULL: this machine in general).
 * LY_E_NOT_FOUND for an unknown slot, LY_E_UNAVAILABLE when none is eligible.
 * `name_out` and `fn_out` may be NULL. */
LY_API ly_status ly_kernel_resolve(const char *slot, const ly_kernel_call *call,
                                   const char **name_out, ly_kernel_fn *fn_out);

/* Visit every eligible implementation of `slot` for `call`, newest first, until
 * `visit` returns false. */
typedef bool (*ly_kernel_visit_fn)(const char *name, ly_kernel_fn fn, void *user);
LY_API ly_status ly_kernel_iter(const char *slot, const ly_kernel_call *call,
                                ly_kernel_visit_fn visit, void *user);

/* Every slot in the order it was first registered, with the name of the
 * implementation a call would get on this machine, or "unavailable". */
typedef void (*ly_kernel_active_fn)(const char *slot, const char *impl, void *user);
LY_API ly_status ly_kernel_active(ly_kernel_active_fn visit, void *user);

/* Every implementation of `slot` (eligible or not), newest first, with the
 * reason it is not eligible here (NULL when it is). */
typedef void (*ly_kernel_list_fn)(const char *slot, const char *impl, bool eligible,
                                  const char *why_not, void *user);
LY_API ly_status ly_kernel_list(const char *slot, ly_kernel_list_fn visit, void *user);

/* Number of slots, and the name of slot `index` (registration order). */
LY_API ly_status ly_kernel_slot_count(size_t *count);
LY_API ly_status ly_kernel_slot_name(size_t index, const char **name);

/* Validate `call` against `slot`'s contract, then run it on the first eligible
 * implementation, falling back as described above. */
LY_API ly_status ly_kernel_dispatch(const char *slot, const ly_kernel_call *call);

/* Validate `call`, then run it on the implementation named `impl` only (no
 * fallback, no forcing rules; its predicate must still accept the call).
 * This is what the parity harness and `libreyolo kernels run --impl` use. */
LY_API ly_status ly_kernel_run_impl(const char *slot, const char *impl, const ly_kernel_call *call);

/* Shapes and dtypes of the outputs that `call` must provide (its `out` array is
 * ignored). `n_out` receives how many outputs the slot writes. */
LY_API ly_status ly_kernel_infer_outputs(const char *slot, const ly_kernel_call *call,
                                         ly_tensor outputs[LY_KERNEL_MAX_OUTPUTS], int *n_out);

/* ---- Graph capture --------------------------------------------------------
 *
 * While the calling thread captures a graph for export, every call on that
 * thread is served by the portable reference only (accelerated providers and
 * plugins are skipped, as their predicates would decline), so exported
 * programs carry the portable math. Captures nest; end matches begin.
 */
LY_API ly_status ly_kernels_capture_begin(void);
LY_API ly_status ly_kernels_capture_end(void);
/* True while the calling thread is inside a capture. */
LY_API bool ly_kernels_capturing(void);

/* ---- Out-of-tree providers ------------------------------------------------
 *
 * Shared libraries named libreyolo_kernels*.so on LIBREYOLO_KERNELS_PATH (colon
 * separated) and next to the running executable are loaded at the first
 * resolution (never when LIBREYOLO_KERNELS is off/reference). Each exports
 *
 *   ly_status libreyolo_kernels_plugin(const ly_kernel_plugin_api *api,
 *                                      uint32_t *built_for_api_version);
 *
 * which sets *built_for_api_version = LY_KERNEL_PLUGIN_API_VERSION and
 * registers its implementations through api->register_kernel. Registrations
 * take effect only if the entry returns LY_OK and the versions match; otherwise
 * the library is skipped with one warning naming the file.
 */
#define LY_KERNEL_PLUGIN_API_VERSION 2u
#define LY_KERNEL_PLUGIN_ENTRY "libreyolo_kernels_plugin"

typedef struct ly_kernel_plugin_api {
    uint32_t api_version;
    uint32_t struct_size;
    const ly_cpu_features *cpu;
    ly_status (*register_kernel)(const char *slot, const char *name, ly_kernel_fn fn,
                                 ly_kernel_predicate predicate);
    /* Run the portable reference of `slot` (plugins may wrap it). */
    ly_status (*run_reference)(const char *slot, const ly_kernel_call *call);
    /* Record the failure message returned with a non-OK status. */
    ly_status (*set_error)(ly_status status, const char *message);
    /* Since API 2: true while the calling thread captures a graph for export
     * (predicates should decline). */
    bool (*capturing)(void);
} ly_kernel_plugin_api;

typedef ly_status (*ly_kernel_plugin_entry_fn)(const ly_kernel_plugin_api *api,
                                               uint32_t *built_for_api_version);

#ifdef __cplusplus
}
#endif

#endif
