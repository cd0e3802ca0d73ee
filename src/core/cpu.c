/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <pthread.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* CPUID only says the CPU implements an instruction set; the OS must also have
 * enabled saving the wider registers (XCR0), or using them faults. */
static uint64_t read_xcr0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static void detect_x86(ly_cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    f->sse2 = (d >> 26) & 1;
    f->sse41 = (c >> 19) & 1;
    bool osxsave = (c >> 27) & 1;
    bool cpu_avx = (c >> 28) & 1;
    bool cpu_fma = (c >> 12) & 1;
    bool cpu_f16c = (c >> 29) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    bool os_ymm = (xcr0 & 0x6) == 0x6;   /* XMM and YMM state */
    bool os_zmm = (xcr0 & 0xE6) == 0xE6; /* plus opmask and ZMM state */
    f->avx = cpu_avx && os_ymm;
    f->fma = f->avx && cpu_fma;
    f->f16c = f->avx && cpu_f16c;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        unsigned subleaves = a;
        f->avx2 = f->avx && ((b >> 5) & 1);
        f->avx512f = os_zmm && ((b >> 16) & 1);
        f->avx512_vnni = f->avx512f && ((c >> 11) & 1);
        bool os_tiles = (xcr0 & 0x60000) == 0x60000; /* XTILECFG and XTILEDATA */
        bool tiles = os_tiles && ((d >> 24) & 1) && ((d >> 22) & 1) && ((b >> 30) & 1);
        bool int8_tiles = os_tiles && ((d >> 24) & 1) && ((d >> 25) & 1) && ((b >> 30) & 1);
        if (subleaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avx_vnni = f->avx2 && ((a >> 4) & 1);
            /* with AVX512BW and AVX512_BF16, which every AMX CPU has: the
             * provider packs its operands with them */
            f->amx_bf16 = f->avx512f && tiles && ((a >> 5) & 1);
        }
        f->amx_int8 = f->avx512f && int8_tiles; /* with AVX512BW (b bit 30): the epilogue's */
    }
}
#endif

static ly_cpu_features detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    detect_x86(&detected);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    detected.logical_cpus = n > 0 ? (int)n : 1;
}

const ly_cpu_features *ly_cpu(void)
{
    pthread_once(&detect_once, detect);
    return &detected;
}

ly_status ly_cpu_features_get(ly_cpu_features *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_cpu_features_get: out is NULL");
    *out = *ly_cpu();
    return LY_OK;
}
