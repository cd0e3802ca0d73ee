/* SPDX-License-Identifier: MIT */
/*
 * libreyolo_kernels_cuda.so: multi-scale deformable attention on an NVIDIA GPU,
 * as an out-of-tree provider (include/libreyolo/kernels.h, "Out-of-tree
 * providers"). It registers "cuda" for ms_deform_attn and
 * ms_deform_attn_backward (include/libreyolo/msda.h).
 *
 * The numbers are the portable reference's (src/ops/msda/,
 * order in docs/attention.md), meant bit for bit. The arithmetic lives in
 * msda_cuda_kernels.h, shared with a CPU run of the same code that the tests
 * compare with the reference (tests/test_cuda_kernels.c): every product, sum
 * and FMA is an explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn,
 * __fmaf_rn), so nvcc can neither contract nor reorder them (it also builds
 * with -fmad=false), and each thread runs one output element's chain in the
 * reference's order:
 *  - forward: one thread per (b, q, h, c), levels then points;
 *  - backward, value gradient: one thread per (b, h, c), queries then levels
 *    then points, as the reference accumulates (threads never split q, so no
 *    atomics and no order that depends on scheduling);
 *  - backward, location and weight gradients: one thread per (b, q, h, point),
 *    channels into 8 lane sums (c mod 8) folded by the reference's fixed tree.
 * NaN results are written as the canonical 0x7FC00000, as the reference does.
 *
 * Memory: libreyolo tensors are host memory. Each call copies its operands to
 * the device and the results back (device buffers are kept and grown between
 * calls, one call at a time); for small calls the copies cost more than the
 * kernel. A call whose buffers do not fit on the device is declined and the
 * next implementation serves it.
 *
 * Loading: the CUDA runtime is linked statically and used only after the driver
 * (libcuda.so.1, opened with dlopen) reports a device, so the library loads,
 * registers and declines cleanly on a machine without a GPU or driver.
 *
 * The predicate declines: without a usable device (the reason says what is
 * missing), while a graph is captured for export, for anything but f32 value,
 * locations and weights with i64 shapes, for empty tensors, and for operands
 * outside the contract (the registry validates them first anyway).
 */
#include "msda_cuda_kernels.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EXPORT extern "C" __attribute__((visibility("default")))

/* A named namespace, not an anonymous one: anonymous names are mangled with a
 * hash of the source path, which would make the library's bytes depend on where
 * it was built (the build is reproducible otherwise; hidden visibility keeps
 * these symbols private anyway). */
namespace ly_cuda_msda
{

constexpr int kBlock = 256;
const char *const kName = "cuda";

const ly_kernel_plugin_api *host;

/* ---- Is there a device? ---------------------------------------------------- */

/* The driver API through dlopen (return codes are CUresult, 0 = success): the
 * runtime is touched only once the driver says a device is there. */
typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_int_fn)(int *);

pthread_once_t probe_once = PTHREAD_ONCE_INIT;
bool device_ok;
const char *device_why = "the CUDA device probe did not run";
char device_why_buf[160];

void probe_device()
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
        device_why = "no CUDA driver on this machine (libcuda.so.1 not found)";
        return;
    }
    cu_init_fn cu_init = (cu_init_fn)dlsym(driver, "cuInit");
    cu_int_fn cu_version = (cu_int_fn)dlsym(driver, "cuDriverGetVersion");
    cu_int_fn cu_count = (cu_int_fn)dlsym(driver, "cuDeviceGetCount");
    int version = 0, count = 0;
    if (!cu_init || !cu_version || !cu_count) {
        device_why = "libcuda.so.1 lacks cuInit/cuDriverGetVersion/cuDeviceGetCount";
    } else if (cu_version(&version) != 0 || version / 1000 < CUDART_VERSION / 1000) {
        snprintf(device_why_buf, sizeof device_why_buf,
                 "the CUDA driver supports CUDA %d.%d; this plugin needs %d.x", version / 1000,
                 version % 1000 / 10, CUDART_VERSION / 1000);
        device_why = device_why_buf;
    } else if (cu_init(0) != 0) {
        device_why = "the CUDA driver failed to initialise (cuInit; no device present?)";
    } else if (cu_count(&count) != 0 || count == 0) {
        device_why = "no CUDA device present";
    } else {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n == 0) {
            snprintf(device_why_buf, sizeof device_why_buf, "CUDA runtime: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device");
            device_why = device_why_buf;
        } else {
            device_ok = true;
            device_why = NULL;
        }
    }
    /* The driver stays loaded when it works: the runtime uses it from now on. */
    if (!device_ok) dlclose(driver);
}

/* ---- Kernels: one thread per *_at call of msda_cuda_kernels.h ---------------- */

__device__ __forceinline__ long long thread_index()
{
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__global__ void forward_kernel(const float *__restrict__ value, const float *__restrict__ loc,
                               const float *__restrict__ attn, float *__restrict__ out,
                               const msda_geometry g)
{
    const long long idx = thread_index();
    if (idx < g.B * g.queries * g.heads * g.channels)
        msda_forward_at(idx, value, loc, attn, out, &g);
}

__global__ void grad_value_kernel(const float *__restrict__ grad_out, const float *__restrict__ loc,
                                  const float *__restrict__ attn, float *__restrict__ grad_value,
                                  const msda_geometry g)
{
    const long long idx = thread_index();
    if (idx < g.B * g.heads * g.channels)
        msda_grad_value_at(idx, grad_out, loc, attn, grad_value, &g);
}

__global__ void grad_sample_kernel(const float *__restrict__ grad_out,
                                   const float *__restrict__ value, const float *__restrict__ loc,
                                   const float *__restrict__ attn, float *__restrict__ grad_loc,
                                   float *__restrict__ grad_attn, const msda_geometry g)
{
    const long long idx = thread_index();
    if (idx < g.B * g.queries * g.heads * g.points)
        msda_grad_sample_at(idx, grad_out, value, loc, attn, grad_loc, grad_attn, &g);
}

__global__ void canon_kernel(float *p, long long n)
{
    const long long idx = thread_index();
    if (idx < n) msda_canon_at(idx, p);
}

unsigned blocks_for(long long n)
{
    return (unsigned)((n + kBlock - 1) / kBlock);
}

/* ---- Device buffers, kept between calls ------------------------------------- */

enum {
    BUF_VALUE,
    BUF_LOC,
    BUF_ATTN,
    BUF_OUT,
    BUF_GRAD_OUT,
    BUF_GRAD_LOC,
    BUF_GRAD_ATTN,
    BUF_COUNT
};

pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;
void *buffers[BUF_COUNT];
size_t capacity[BUF_COUNT];
cudaEvent_t events[2];
bool events_ready;
float last_kernel_ms = -1.0f;

cudaError_t reserve(int which, size_t bytes)
{
    if (capacity[which] >= bytes) return cudaSuccess;
    if (buffers[which]) cudaFree(buffers[which]);
    buffers[which] = NULL;
    capacity[which] = 0;
    cudaError_t e = cudaMalloc(&buffers[which], bytes);
    if (e == cudaSuccess) capacity[which] = bytes;
    return e;
}

ly_status failure(const char *slot, const char *what, cudaError_t e)
{
    char message[256];
    snprintf(message, sizeof message, "cuda %s: %s: %s", slot, what, cudaGetErrorString(e));
    return host->set_error(LY_E_PROVIDER, message);
}

struct Transfer {
    int buffer;
    const void *host_in; /* copied to the device first, when set */
    void *host_out;      /* copied back at the end, when set */
    size_t bytes;
};

/* Reserve and fill the buffers, run `launch`, copy the results back. Out of
 * device memory declines the call; anything else fails it (the registry then
 * disables the provider). */
template <typename Launch> ly_status run(const char *slot, Transfer *t, int n, Launch launch)
{
    pthread_mutex_lock(&device_lock);
    ly_status st = LY_OK;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < n && e == cudaSuccess; i++)
        e = reserve(t[i].buffer, t[i].bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* clear it: the next call may be smaller */
        pthread_mutex_unlock(&device_lock);
        return LY_E_DECLINED;
    }
    if (e != cudaSuccess) {
        st = failure(slot, "allocating device memory", e);
        goto done;
    }
    if (!events_ready && cudaEventCreate(&events[0]) == cudaSuccess &&
        cudaEventCreate(&events[1]) == cudaSuccess)
        events_ready = true;
    for (int i = 0; i < n; i++)
        if (t[i].host_in && (e = cudaMemcpy(buffers[t[i].buffer], t[i].host_in, t[i].bytes,
                                            cudaMemcpyHostToDevice)) != cudaSuccess) {
            st = failure(slot, "copying the inputs to the device", e);
            goto done;
        }
    if (events_ready) cudaEventRecord(events[0]);
    if ((e = launch()) != cudaSuccess || (e = cudaGetLastError()) != cudaSuccess) {
        st = failure(slot, "launching the kernels", e);
        goto done;
    }
    if (events_ready) cudaEventRecord(events[1]);
    for (int i = 0; i < n; i++)
        if (t[i].host_out && (e = cudaMemcpy(t[i].host_out, buffers[t[i].buffer], t[i].bytes,
                                             cudaMemcpyDeviceToHost)) != cudaSuccess) {
            st = failure(slot, "running the kernels or copying the results back", e);
            goto done;
        }
    if (events_ready) cudaEventElapsedTime(&last_kernel_ms, events[0], events[1]);
done:
    pthread_mutex_unlock(&device_lock);
    return st;
}

template <typename T> T *buf(int which)
{
    return (T *)buffers[which];
}

ly_status msda_forward(const ly_kernel_call *call)
{
    msda_geometry g;
    if (msda_read_geometry(call, false, &g))
        return LY_E_DECLINED; /* the predicate said so already */
    const long long values = g.B * g.len_in * g.heads * g.channels;
    const long long samples = g.B * g.queries * g.heads * g.points;
    const long long outs = g.B * g.queries * g.heads * g.channels;
    Transfer t[] = {
        {BUF_VALUE, call->in[0]->data, NULL, (size_t)values * sizeof(float)},
        {BUF_LOC, call->in[2]->data, NULL, (size_t)samples * 2 * sizeof(float)},
        {BUF_ATTN, call->in[3]->data, NULL, (size_t)samples * sizeof(float)},
        {BUF_OUT, NULL, call->out[0]->data, (size_t)outs * sizeof(float)},
    };
    return run("ms_deform_attn", t, 4, [&]() {
        forward_kernel<<<blocks_for(outs), kBlock>>>(buf<float>(BUF_VALUE), buf<float>(BUF_LOC),
                                                     buf<float>(BUF_ATTN), buf<float>(BUF_OUT), g);
        return cudaSuccess;
    });
}

ly_status msda_backward(const ly_kernel_call *call)
{
    msda_geometry g;
    if (msda_read_geometry(call, true, &g)) return LY_E_DECLINED;
    const long long values = g.B * g.len_in * g.heads * g.channels;
    const long long samples = g.B * g.queries * g.heads * g.points;
    const long long outs = g.B * g.queries * g.heads * g.channels;
    /* The value gradient reuses the forward's output buffer. */
    Transfer t[] = {
        {BUF_GRAD_OUT, call->in[0]->data, NULL, (size_t)outs * sizeof(float)},
        {BUF_VALUE, call->in[1]->data, NULL, (size_t)values * sizeof(float)},
        {BUF_LOC, call->in[3]->data, NULL, (size_t)samples * 2 * sizeof(float)},
        {BUF_ATTN, call->in[4]->data, NULL, (size_t)samples * sizeof(float)},
        {BUF_OUT, NULL, call->out[0]->data, (size_t)values * sizeof(float)},
        {BUF_GRAD_LOC, NULL, call->out[1]->data, (size_t)samples * 2 * sizeof(float)},
        {BUF_GRAD_ATTN, NULL, call->out[2]->data, (size_t)samples * sizeof(float)},
    };
    return run("ms_deform_attn_backward", t, 7, [&]() {
        cudaError_t e = cudaMemset(buf<float>(BUF_OUT), 0, (size_t)values * sizeof(float));
        if (e != cudaSuccess) return e;
        grad_value_kernel<<<blocks_for(g.B * g.heads * g.channels), kBlock>>>(
            buf<float>(BUF_GRAD_OUT), buf<float>(BUF_LOC), buf<float>(BUF_ATTN),
            buf<float>(BUF_OUT), g);
        canon_kernel<<<blocks_for(values), kBlock>>>(buf<float>(BUF_OUT), values);
        if (samples > 0)
            grad_sample_kernel<<<blocks_for(samples), kBlock>>>(
                buf<float>(BUF_GRAD_OUT), buf<float>(BUF_VALUE), buf<float>(BUF_LOC),
                buf<float>(BUF_ATTN), buf<float>(BUF_GRAD_LOC), buf<float>(BUF_GRAD_ATTN), g);
        return cudaSuccess;
    });
}

ly_status predicate(const ly_kernel_call *call, bool backward, const char **why_not)
{
    pthread_once(&probe_once, probe_device);
    if (!device_ok) {
        *why_not = device_why;
        return LY_E_DECLINED;
    }
    /* Only asked about an actual call: the registry caches the machine-wide
     * answer (call == NULL). */
    if (!call) return LY_OK;
    if (host->capturing && host->capturing()) {
        *why_not = "a graph is being captured for export (portable math only)";
        return LY_E_DECLINED;
    }
    msda_geometry g;
    const char *why = msda_read_geometry(call, backward, &g);
    if (why) {
        *why_not = why;
        return LY_E_DECLINED;
    }
    return LY_OK;
}

ly_status forward_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                            const char **why_not)
{
    (void)cpu;
    return predicate(call, false, why_not);
}

ly_status backward_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                             const char **why_not)
{
    (void)cpu;
    return predicate(call, true, why_not);
}

} // namespace ly_cuda_msda

using namespace ly_cuda_msda;

/* Milliseconds the kernels of the last call took on the device (without the
 * copies), or -1 before the first call; for tools/device_check_cuda.sh. */
EXPORT double libreyolo_kernels_cuda_last_kernel_ms(void)
{
    pthread_mutex_lock(&device_lock);
    double ms = last_kernel_ms;
    pthread_mutex_unlock(&device_lock);
    return ms;
}

EXPORT ly_status libreyolo_kernels_plugin(const ly_kernel_plugin_api *api,
                                          uint32_t *built_for_api_version)
{
    *built_for_api_version = LY_KERNEL_PLUGIN_API_VERSION;
    /* API 2 brought `capturing`, which the predicates ask. */
    if (api->api_version != LY_KERNEL_PLUGIN_API_VERSION ||
        api->struct_size < offsetof(ly_kernel_plugin_api, capturing) + sizeof api->capturing)
        return LY_E_UNSUPPORTED;
    host = api;
    ly_status st =
        api->register_kernel("ms_deform_attn", kName, msda_forward, forward_predicate);
    if (st != LY_OK) return st;
    return api->register_kernel("ms_deform_attn_backward", kName, msda_backward,
                                backward_predicate);
}
