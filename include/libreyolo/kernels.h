/* SPDX-License-Identifier: MIT */
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
#include "libreyolo/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU features --------------------------------------------------------- */

/* Instruction sets usable here: CPUID says the CPU has them AND (for AVX and
 * wider) XGETBV says the operating system saves the registers. */
typedef struct ly_cpu_features {
    bool sse2, sse41, avx, avx2, fma, f16c, avx512f;
    int logical_cpus;
    /* int8 dot products (vpdpbusd) on 512-bit and on 256-bit registers */
    bool avx512_vnni, avx_vnni;
    /* AMX tiles with bf16 dot products (tdpbf16ps), their state enabled by the
     * OS (XCR0); on Linux a process must still ask for them (arch_prctl) */
    bool amx_bf16;
    /* AMX tiles with u8 x s8 dot products (tdpbusd), likewise */
    bool amx_int8;
} ly_cpu_features;

LY_API ly_status ly_cpu_features_get(ly_cpu_features *out);

/* ---- A call ------------------------------------------------------------- */

#define LY_KERNEL_MAX_INPUTS 8
#define LY_KERNEL_MAX_OUTPUTS 3

/* One invocation of a slot. Inputs that a slot marks optional may be NULL
 * (e.g. the scale of fake_quant_int8_per_channel: NULL = computed from data).
 * `params` points to the op's own parameters struct (libreyolo/ops.h), or is
 * NULL for the op's defaults; implementations always see a non-NULL pointer. */
typedef struct ly_kernel_call {
    const ly_tensor *in[LY_KERNEL_MAX_INPUTS];
    ly_tensor *out[LY_KERNEL_MAX_OUTPUTS];
    const void *params;
    int threads; /* 0: LIBREYOLO_THREADS, else all logical CPUs */
} ly_kernel_call;

LY_API ly_status ly_kernel_call_init(ly_kernel_call *call);

/* The parameters of a call an implementation is given, typed. */
#define LY_PARAMS(call, type) ((const type *)(call)->params)

/* An implementation. It may assume the call passed the slot's validation
 * (shapes, dtypes, non-NULL required operands, contiguous memory).
 * Element-wise slots (layout ELEMENTWISE in libreyolo/ops.inc) may be called
 * with out[0] aliasing an input of the same shape: a graph writes over an input
 * nothing reads afterwards. Their implementations read element i of each input
 * only to write element i of the output.
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

/* ---- Stateful implementations ---------------------------------------------
 *
 * An implementation that prepares something per call site (packed weights, a
 * library primitive) registers these besides, or instead of, a plain function.
 * A graph prepares each node it gives to such an implementation once per plan
 * (input shapes, thread count, selection) and owns the state; a call outside a
 * graph (ly_kernel_dispatch) uses the plain function, or prepares, runs and
 * releases on the spot when there is none.
 *
 * Layouts: besides the plain C-contiguous order every op documents, a state may
 * read and write channel-blocked 4-d maps ([N][C/B][H][W][B], B = 8 or 16; the
 * tensors keep their NCHW shapes, only the data order differs). The graph keeps
 * a value blocked between nodes that all take the layout, so the reorders
 * around each such node go away; anything else sees plain data.
 */
typedef enum ly_layout {
    LY_LAYOUT_PLAIN = 0,
    LY_LAYOUT_NCHW8C = 1,
    LY_LAYOUT_NCHW16C = 2
} ly_layout;
#define LY_LAYOUT_BIT(layout) (1u << (layout))

typedef struct ly_kernel_layouts {
    uint32_t in[LY_KERNEL_MAX_INPUTS];   /* LY_LAYOUT_BITs each input may have (plain: always) */
    uint32_t out[LY_KERNEL_MAX_OUTPUTS]; /* ... each output may be written in */
    uint32_t tied;                       /* bit i: in[i] must have out[0]'s layout */
    ly_layout preferred;                 /* the blocked layout it runs fastest on */
} ly_kernel_layouts;

typedef struct ly_kernel_prepare_info {
    uint32_t constant_inputs; /* bit i: in[i] holds its final values (weights), may be packed */
    ly_layout in_layout[LY_KERNEL_MAX_INPUTS];
    ly_layout out_layout[LY_KERNEL_MAX_OUTPUTS];
    int threads; /* what every run on the state will pass (resolved, >= 1) */
} ly_kernel_prepare_info;

typedef struct ly_kernel_stateful {
    /* The layouts it takes for calls shaped like `call` (NULL: plain only). */
    ly_status (*layouts)(const ly_kernel_call *call, ly_kernel_layouts *out);
    /* Prepare for calls shaped like `call` (validated; inputs not in
     * info->constant_inputs may have no data). LY_E_DECLINED: not this call. */
    ly_status (*prepare)(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                         void **state);
    /* Run a call shaped as prepared. May be called from several threads at once
     * on one state. A failure disables the implementation, as for a function. */
    ly_status (*run)(void *state, const ly_kernel_call *call);
    void (*release)(void *state);
    /* Optional, with held_constants: write constant input `index` back into
     * `dst` exactly as prepare saw it, so that the graph may give its own
     * copy's pages back meanwhile. */
    ly_status (*restore_constant)(void *state, int index, void *dst);
    /* Optional: the constant inputs (bit i) this state keeps an exact copy of
     * and never reads from the caller again (packed weights, copied biases). */
    uint32_t (*held_constants)(void *state);
} ly_kernel_stateful;

typedef struct ly_kernel_impl_desc {
    uint32_t struct_size; /* sizeof(ly_kernel_impl_desc) */
    const char *slot;
    const char *name;
    ly_kernel_fn fn;                    /* may be NULL when `stateful` is given */
    ly_kernel_predicate predicate;      /* may be NULL (always eligible) */
    const ly_kernel_stateful *stateful; /* may be NULL; must outlive the process */
} ly_kernel_impl_desc;

/* ---- Registry ------------------------------------------------------------ */

/* Add an implementation at the front of `slot`'s list (a new slot is created
 * on first registration). `name` is matched against LIBREYOLO_KERNELS exactly,
 * so use lower case. `predicate` may be NULL (always eligible). Strings are
 * copied. */
LY_API ly_status ly_kernel_register(const char *slot, const char *name, ly_kernel_fn fn,
                                    ly_kernel_predicate predicate);
/* The same with every field of an implementation (stateful ones). */
LY_API ly_status ly_kernel_register_impl(const ly_kernel_impl_desc *desc);

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
/* The same for an op of the manifest, without looking its name up. */
LY_API ly_status ly_kernel_dispatch_op(ly_op op, const ly_kernel_call *call);

/* Validate `call`, then run it on the implementation named `impl` only (no
 * fallback, no forcing rules; its predicate must still accept the call).
 * This is what the parity harness and `libreyolo kernels run --impl` use. */
LY_API ly_status ly_kernel_run_impl(const char *slot, const char *impl, const ly_kernel_call *call);

/* The same implementation prepared once for calls shaped like `call` and run
 * as often as wanted, as a graph runs a node: a stateful implementation
 * (packed or transformed weights) prepares on plain maps, every input given
 * taken as constant (LY_E_DECLINED where it takes only blocked ones); a
 * function-only one runs as ly_kernel_run_impl. Each run validates its call,
 * whose shapes and constant inputs must be the prepared call's. What
 * `libreyolo bench conv` times. The handle is the caller's
 * (ly_kernel_prepared_free), valid while the implementation stays
 * registered; one handle may run from several threads at once. */
typedef struct ly_kernel_prepared ly_kernel_prepared;
LY_API ly_status ly_kernel_prepare_impl(const char *slot, const char *impl,
                                        const ly_kernel_call *call, ly_kernel_prepared **out);
LY_API ly_status ly_kernel_prepared_run(ly_kernel_prepared *prepared, const ly_kernel_call *call);
LY_API ly_status ly_kernel_prepared_free(ly_kernel_prepared *prepared);

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
 * registers its implementations through api->register_kernel (or
 * api->register_impl). Registrations take effect only if the entry returns
 * LY_OK and the versions match; otherwise the library is skipped with one
 * warning naming the file. API 3 (this one) passes each op's own parameters
 * struct (call->params); plugins built for API 1 or 2, whose calls carried one
 * shared ly_kernel_params, are refused and must be rebuilt. The api table
 * stays valid for the life of the process: a plugin may keep the pointer and
 * call run_reference, set_error and capturing from its kernels.
 */
#define LY_KERNEL_PLUGIN_API_VERSION 3u
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
    /* True while the calling thread captures a graph for export (predicates
     * should decline). */
    bool (*capturing)(void);
    /* Register with every field (stateful implementations). */
    ly_status (*register_impl)(const ly_kernel_impl_desc *desc);
} ly_kernel_plugin_api;

typedef ly_status (*ly_kernel_plugin_entry_fn)(const ly_kernel_plugin_api *api,
                                               uint32_t *built_for_api_version);

#ifdef __cplusplus
}
#endif

#endif
