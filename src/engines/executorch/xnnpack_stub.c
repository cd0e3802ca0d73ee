/* SPDX-License-Identifier: MIT */
/* Builds without XNNPACK: the delegate is absent, and programs that need it
 * are refused at load with ExecuTorch's message. */
#ifndef LY_HAVE_XNNPACK
#include "engines/executorch/et_runtime.h"

#include "core/core.h"

bool ly_et_xnnpack_available(void)
{
    return false;
}

ly_status ly_et_xnnpack_init(const ly_pte_program *program, const ly_pte_bytes *blob,
                             const char *what, ly_et_xnnpack **out)
{
    (void)program;
    (void)blob;
    *out = NULL;
    return ly_set_error(LY_E_UNSUPPORTED,
                        "%s: The installed ExecuTorch runtime does not provide XnnpackBackend, "
                        "but this program requires it. (libreyolo was built without XNNPACK: "
                        "LIBREYOLO_WITH_XNNPACK=OFF or libxnnpack-dev missing)",
                        what);
}

size_t ly_et_xnnpack_num_externs(const ly_et_xnnpack *d)
{
    (void)d;
    return 0;
}

ly_status ly_et_xnnpack_extern_dims(const ly_et_xnnpack *d, size_t id, int *ndim, int64_t *dims,
                                    bool *is_output)
{
    (void)d;
    (void)id;
    (void)ndim;
    (void)dims;
    (void)is_output;
    return ly_set_error(LY_E_UNSUPPORTED, "xnnpack: not in this build");
}

ly_status ly_et_xnnpack_execute(ly_et_xnnpack *d, ly_tensor *const *args, size_t n_args,
                                int threads)
{
    (void)d;
    (void)args;
    (void)n_args;
    (void)threads;
    return ly_set_error(LY_E_UNSUPPORTED, "xnnpack: not in this build");
}

void ly_et_xnnpack_free(ly_et_xnnpack *d)
{
    (void)d;
}

bool ly_et_xnnpack_runner(int threads, ly_parallel_runner *runner)
{
    (void)threads, (void)runner;
    return false;
}

ly_status ly_et_xnnpack_finish(ly_et_xnnpack *d, ly_graph_arena *arena)
{
    (void)d;
    (void)arena;
    return LY_OK;
}

ly_status ly_et_xnnpack_append(ly_et_xnnpack *d, ly_graph *g, int tag, const ly_graph_value *bound,
                               ly_graph_value *produced)
{
    (void)d;
    (void)g;
    (void)tag;
    (void)bound;
    (void)produced;
    return LY_E_DECLINED;
}

void ly_et_xnnpack_merged(ly_et_xnnpack *d)
{
    (void)d;
}

bool ly_et_xnnpack_runs_operators(const ly_et_xnnpack *d)
{
    (void)d;
    return false;
}
#else
typedef int ly_xnnpack_stub_unused; /* ISO C wants something in a translation unit */
#endif
