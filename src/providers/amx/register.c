/* SPDX-License-Identifier: MIT */
/*
 * The AMX provider: linear as bf16 products on the tiles (linear_amx_avx2.c).
 * Compiled for the baseline ISA: registration and the predicate run on every
 * CPU. Linux hands a process the tiles' 8 KiB of state only when it asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM), once for all its threads; where it says
 * no, the provider declines and the slot's next kernel serves.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "providers/amx/amx.h"
#include "providers/builtin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(LY_HAVE_AVX2_PROVIDERS) && defined(__x86_64__)

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

extern const ly_kernel_stateful ly_amx_linear_stateful;

static pthread_once_t permission_once = PTHREAD_ONCE_INIT;
static bool permitted;

static void ask_permission(void)
{
#ifdef __linux__
    const long ask_for_state = 0x1023, tile_data = 18; /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
    permitted = syscall(SYS_arch_prctl, ask_for_state, tile_data) == 0;
    if (!permitted)
        ly_log(LY_LOG_DEBUG, "amx: the kernel did not give this process the tiles' state");
#endif
}

bool ly_amx_tiles_granted(void)
{
    pthread_once(&permission_once, ask_permission);
    return permitted;
}

/* Terms a float is split into, by PyTorch's torch.set_float32_matmul_precision
 * names in LIBREYOLO_MATMUL_PRECISION: "highest" (the default) 3, every bit of
 * the float; "high" and "medium" 2, a float as the sum of two bf16 (~16 bits).
 * Another value warns once and counts as "highest". */
int ly_amx_planes(void)
{
    static atomic_bool warned;
    const char *precision = getenv("LIBREYOLO_MATMUL_PRECISION");
    if (!precision || !*precision || strcmp(precision, "highest") == 0) return 3;
    if (strcmp(precision, "high") == 0 || strcmp(precision, "medium") == 0) return 2;
    if (!atomic_exchange(&warned, true))
        ly_log(
            LY_LOG_WARNING,
            "LIBREYOLO_MATMUL_PRECISION is '%s', expected highest, high or medium: using highest",
            precision);
    return 3;
}

static ly_status amx_predicate(const ly_kernel_call *call, const ly_cpu_features *cpu,
                               const char **why_not)
{
    if (!cpu || !cpu->amx_bf16) {
        *why_not = "CPU or OS lacks AMX-BF16 tiles";
        return LY_E_DECLINED;
    }
    if (!ly_amx_tiles_granted()) {
        *why_not = "the OS did not grant the AMX tiles' state (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return LY_E_DECLINED;
    }
    if (!call || call->in[0]->ndim < 1 || call->in[1]->ndim != 2) return LY_OK;
    if (LY_PARAMS(call, ly_linear_params)->activation == LY_ACT_GELU && call->in[3]) {
        *why_not = "GELU before a residual (the GELU runs after the GEMM, on its output)";
        return LY_E_DECLINED;
    }
    /* Each call splits x and the weight, (m + n) k floats, for m n k products:
     * below ~128 products a split float (ViT-Ti's [197, 192] x [192, 192]: 97,
     * no faster than oneDNN; its [1, 192] head 1.65x slower) the splitting
     * eats what the tiles save. */
    const ly_tensor *x = call->in[0];
    int64_t k = x->shape[x->ndim - 1], n = call->in[1]->shape[0];
    int64_t m = k > 0 ? ly_tensor_numel(x) / k : 0;
    if (m < 1 || n < 1 || k < 1 || m * n < 128 * (m + n)) {
        *why_not = "too few rows or outputs: splitting the operands would cost more than it saves";
        return LY_E_DECLINED;
    }
    return LY_OK;
}

void ly_amx_register(void)
{
    ly_provider_add(LY_OP_LINEAR, "amx_bf16", NULL, amx_predicate, &ly_amx_linear_stateful);
}

#else
void ly_amx_register(void)
{
}
#endif
