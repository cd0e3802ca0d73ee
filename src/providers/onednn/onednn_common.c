/* SPDX-License-Identifier: MIT */
#include "providers/onednn/onednn_common.h"

#include "core/core.h"

#include <dlfcn.h>
#include <pthread.h>

static struct {
    pthread_once_t once;
    dnnl_engine_t engine;
    dnnl_status_t engine_status;
    void (*omp_set_num_threads)(int);
    int (*omp_get_max_threads)(void);
} g = {.once = PTHREAD_ONCE_INIT};

static void init_once(void)
{
    g.engine_status = dnnl_engine_create(&g.engine, dnnl_cpu, 0);
    if (g.engine_status != dnnl_success) g.engine = NULL;
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    *(void **)&g.omp_set_num_threads = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    *(void **)&g.omp_get_max_threads = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (!g.omp_set_num_threads || !g.omp_get_max_threads) {
        g.omp_set_num_threads = NULL;
        g.omp_get_max_threads = NULL;
        ly_log(LY_LOG_DEBUG, "onednn: OpenMP symbols not found; oneDNN uses OpenMP's own "
                             "thread count");
    }
#endif
}

dnnl_engine_t ly_onednn_engine(void)
{
    pthread_once(&g.once, init_once);
    return g.engine;
}

dnnl_status_t ly_onednn_engine_status(void)
{
    pthread_once(&g.once, init_once);
    return g.engine_status;
}

int ly_onednn_threads_begin(int threads)
{
    pthread_once(&g.once, init_once);
    if (!g.omp_set_num_threads) return 0;
    int previous = g.omp_get_max_threads();
    if (previous != threads) g.omp_set_num_threads(threads);
    return previous;
}

void ly_onednn_threads_end(int previous)
{
    if (!g.omp_set_num_threads || previous < 1) return;
    if (g.omp_get_max_threads() != previous) g.omp_set_num_threads(previous);
}

ly_status ly_onednn_failed(const char *slot, const char *call, dnnl_status_t status)
{
    return ly_set_error(LY_E_PROVIDER, "%s (onednn): %s failed with dnnl status %d", slot, call,
                        (int)status);
}

ly_status ly_onednn_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                              const char **why_not)
{
    (void)cpu;
    if (!ly_onednn_engine()) {
        *why_not = "oneDNN could not create a CPU engine";
        return LY_E_DECLINED;
    }
    if (call && ((call->in[0] && ly_tensor_numel(call->in[0]) <= 0) ||
                 (call->out[0] && ly_tensor_numel(call->out[0]) <= 0))) {
        *why_not = "empty tensor (nothing for oneDNN to do)";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

dnnl_status_t ly_onednn_append_activation(dnnl_post_ops_t post_ops, int64_t activation, float alpha)
{
    switch (activation) {
    case LY_ACT_SILU:
        return dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_swish, 1.0f, 0.0f);
    case LY_ACT_SIGMOID:
        return dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_logistic, 0.0f, 0.0f);
    case LY_ACT_RELU:
        return dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    case LY_ACT_LEAKY_RELU: /* oneDNN's relu alpha is the negative slope */
        return dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_relu, alpha, 0.0f);
    case LY_ACT_GELU:
        return dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f);
    case LY_ACT_NONE:
        return dnnl_success;
    default:
        return dnnl_unimplemented;
    }
}

dnnl_status_t ly_onednn_unpack(dnnl_memory_t from, const dnnl_memory_desc_t *plain, void *dst)
{
    dnnl_engine_t engine = ly_onednn_engine();
    const dnnl_memory_desc_t *packed = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t to = NULL;
    dnnl_status_t st = dnnl_memory_get_memory_desc(from, &packed);
    if (st == dnnl_success) st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (st == dnnl_success) st = dnnl_memory_create(&to, plain, engine, dst);
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&pd, packed, engine, plain, engine, NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(&reorder, pd);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        st = dnnl_primitive_execute(reorder, stream, 2, args);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    if (reorder) dnnl_primitive_destroy(reorder);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (to) dnnl_memory_destroy(to);
    if (stream) dnnl_stream_destroy(stream);
    return st;
}
