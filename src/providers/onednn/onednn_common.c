/* SPDX-License-Identifier: MIT */
#include "providers/onednn/onednn_common.h"

#include "core/core.h"
#include "providers/op_cache.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

static pthread_key_t stream_key;
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static bool stream_key_ok;

static void destroy_stream(void *stream)
{
    dnnl_stream_destroy(stream);
}

static void make_stream_key(void)
{
    stream_key_ok = pthread_key_create(&stream_key, destroy_stream) == 0;
}

dnnl_stream_t ly_onednn_thread_stream(void)
{
    pthread_once(&stream_once, make_stream_key);
    if (!stream_key_ok || !ly_onednn_engine()) return NULL;
    dnnl_stream_t stream = pthread_getspecific(stream_key);
    if (stream) return stream;
    if (dnnl_stream_create(&stream, ly_onednn_engine(), dnnl_stream_default_flags) != dnnl_success)
        return NULL;
    if (pthread_setspecific(stream_key, stream) != 0) {
        dnnl_stream_destroy(stream);
        return NULL;
    }
    return stream;
}

ly_layout ly_onednn_preferred_layout(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? LY_LAYOUT_NCHW16C
                                                                        : LY_LAYOUT_NCHW8C;
}

dnnl_status_t ly_onednn_primitive_desc_create_skipping(dnnl_primitive_desc_t *pd,
                                                       const_dnnl_op_desc_t desc,
                                                       const_dnnl_primitive_attr_t attr,
                                                       dnnl_engine_t engine, const char *skip)
{
    *pd = NULL;
    if (!skip) return dnnl_primitive_desc_create(pd, desc, attr, engine, NULL);
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t st = dnnl_primitive_desc_iterator_create(&it, desc, attr, engine, NULL);
    if (st != dnnl_success) return st;
    st = dnnl_unimplemented;
    do {
        dnnl_primitive_desc_t candidate = dnnl_primitive_desc_iterator_fetch(it);
        if (!candidate) continue;
        const char *impl = "";
        dnnl_primitive_desc_query(candidate, dnnl_query_impl_info_str, 0, &impl);
        if (!strstr(impl, skip)) {
            *pd = candidate;
            st = dnnl_success;
            break;
        }
        dnnl_primitive_desc_destroy(candidate);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return st;
}

ly_status ly_onednn_unary_create(ly_onednn_unary *u, const_dnnl_op_desc_t desc)
{
    dnnl_engine_t engine = ly_onednn_engine();
    if (!engine) return ly_onednn_failed(u->slot, "dnnl_engine_create", ly_onednn_engine_status());
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = "", *failed = NULL;
    ly_status status = LY_OK;
    int previous = ly_onednn_threads_begin(u->threads);
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st != dnnl_success) failed = "dnnl_primitive_attr_set_scratchpad_mode";
    if (!failed) {
        st = dnnl_primitive_desc_create(&pd, desc, attr, engine, NULL);
        if (st == dnnl_success)
            st = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (st == dnnl_unimplemented || (st == dnnl_success && strncmp(impl, "jit", 3) != 0))
            status = LY_E_DECLINED;
        else if (st != dnnl_success)
            failed = "dnnl_primitive_desc_create";
    }
    if (!failed && status == LY_OK) {
        u->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if ((st = dnnl_primitive_create(&u->prim, pd)) != dnnl_success)
            failed = "dnnl_primitive_create";
    }
    ly_onednn_threads_end(previous);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return failed ? ly_onednn_failed(u->slot, failed, st) : status;
}

ly_status ly_onednn_unary_run(void *state, const ly_kernel_call *call)
{
    const ly_onednn_unary *u = state;
    dnnl_engine_t engine = ly_onednn_engine();
    dnnl_stream_t stream = ly_onednn_thread_stream();
    if (!stream) return ly_onednn_failed(u->slot, "dnnl_stream_create", dnnl_runtime_error);
    size_t scratch_bytes = dnnl_memory_desc_get_size(&u->scratch_md);
    void *scratch = scratch_bytes ? ly_nn_scratch(2, scratch_bytes) : NULL;
    if (scratch_bytes && !scratch)
        return ly_set_error(LY_E_NO_MEMORY, "%s (onednn): out of memory for the scratchpad",
                            u->slot);
    dnnl_memory_t a = NULL, b = NULL, pad = NULL;
    int previous = ly_onednn_threads_begin(u->threads);
    dnnl_status_t st = dnnl_memory_create(&a, &u->src_md, engine, call->in[0]->data);
    if (st == dnnl_success) st = dnnl_memory_create(&b, &u->dst_md, engine, call->out[0]->data);
    if (st == dnnl_success) st = dnnl_memory_create(&pad, &u->scratch_md, engine, scratch);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_DST, b}, {DNNL_ARG_SCRATCHPAD, pad}};
        st = dnnl_primitive_execute(u->prim, stream, 3, args);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    ly_onednn_threads_end(previous);
    if (a) dnnl_memory_destroy(a);
    if (b) dnnl_memory_destroy(b);
    if (pad) dnnl_memory_destroy(pad);
    return st == dnnl_success ? LY_OK : ly_onednn_failed(u->slot, "dnnl_primitive_execute", st);
}

void ly_onednn_unary_release(void *state)
{
    ly_onednn_unary *u = state;
    if (!u) return;
    if (u->prim) dnnl_primitive_destroy(u->prim);
    free(u);
}

bool ly_onednn_unary_blockable(const ly_tensor *x)
{
    return x && x->ndim == 4 && x->shape[1] % 8 == 0;
}

void ly_onednn_unary_layouts(ly_kernel_layouts *out)
{
    memset(out, 0, sizeof *out);
    uint32_t blocked = LY_LAYOUT_BIT(LY_LAYOUT_NCHW8C);
    if (ly_onednn_preferred_layout() == LY_LAYOUT_NCHW16C)
        blocked |= LY_LAYOUT_BIT(LY_LAYOUT_NCHW16C);
    out->in[0] = blocked;
    out->out[0] = blocked;
    out->tied = 1u << 0;
    out->preferred = ly_onednn_preferred_layout();
}

ly_status ly_onednn_unary_begin(const ly_kernel_call *call, const ly_kernel_prepare_info *info,
                                const char *slot, ly_onednn_unary **out)
{
    ly_layout layout = info->in_layout[0];
    if (layout == LY_LAYOUT_PLAIN || info->out_layout[0] != layout) return LY_E_DECLINED;
    ly_onednn_unary *u = calloc(1, sizeof *u);
    if (!u) return ly_set_error(LY_E_NO_MEMORY, "%s (onednn): out of memory", slot);
    u->threads = info->threads;
    u->slot = slot;
    dnnl_format_tag_t tag = layout == LY_LAYOUT_NCHW16C ? dnnl_nChw16c : dnnl_nChw8c;
    const ly_tensor *x = call->in[0], *y = call->out[0];
    dnnl_dims_t src_dims = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    dnnl_dims_t dst_dims = {y->shape[0], y->shape[1], y->shape[2], y->shape[3]};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&u->src_md, 4, src_dims, dnnl_f32, tag);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&u->dst_md, 4, dst_dims, dnnl_f32, tag);
    if (st != dnnl_success) {
        free(u);
        return ly_onednn_failed(slot, "dnnl_memory_desc_init_by_tag", st);
    }
    *out = u;
    return LY_OK;
}

void ly_onednn_spares_init(ly_onednn_spares *s)
{
    pthread_mutex_init(&s->lock, NULL);
    s->idle = NULL;
}

ly_onednn_spare *ly_onednn_spares_take(ly_onednn_spares *s)
{
    pthread_mutex_lock(&s->lock);
    ly_onednn_spare *op = s->idle;
    if (op) s->idle = op->next;
    pthread_mutex_unlock(&s->lock);
    return op;
}

void ly_onednn_spares_give(ly_onednn_spares *s, ly_onednn_spare *op)
{
    pthread_mutex_lock(&s->lock);
    op->next = s->idle;
    s->idle = op;
    pthread_mutex_unlock(&s->lock);
}

void ly_onednn_spares_destroy(ly_onednn_spares *s, ly_onednn_spare *primary,
                              void (*destroy)(ly_onednn_spare *op))
{
    for (ly_onednn_spare *op = s->idle, *next; op; op = next) {
        next = op->next;
        if (op != primary) destroy(op);
    }
    if (primary) destroy(primary);
    pthread_mutex_destroy(&s->lock);
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
