/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench kernels --dispatch`: what one call through the registry
 * costs on top of the implementation it reaches. A 16-element add (the
 * smallest realistic op: the work is a few nanoseconds) is timed three ways in
 * one run: the implementation's function called directly (the floor), by op id
 * (ly_kernel_dispatch_op: what the graph's unprepared nodes use) and by slot
 * name (ly_kernel_dispatch: what plugins and tools use). The difference is the
 * dispatch: selection variable read, contract validation, resolution, predicate.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/kernels.h"

#include <stdio.h>

enum { ELEMENTS = 16, CALLS = 200000, ROUNDS = 5 };

typedef enum way { DIRECT, BY_ID, BY_NAME } way;

/* Best per-call time over ROUNDS rounds of CALLS calls, in ns; < 0 on failure. */
static double time_way(way w, ly_kernel_fn fn, const ly_kernel_call *call)
{
    double best = -1.0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = ly_cli_now_s();
        for (int i = 0; i < CALLS; i++) {
            ly_status st = w == DIRECT  ? fn(call)
                           : w == BY_ID ? ly_kernel_dispatch_op(LY_OP_ADD, call)
                                        : ly_kernel_dispatch("add", call);
            if (st != LY_OK) return -1.0;
        }
        double ns = (ly_cli_now_s() - t0) * 1e9 / CALLS;
        if (best < 0 || ns < best) best = ns;
    }
    return best;
}

int ly_cli_bench_dispatch(bool json)
{
    float a[ELEMENTS], b[ELEMENTS], y[ELEMENTS];
    for (int i = 0; i < ELEMENTS; i++)
        a[i] = (float)i, b[i] = 0.5f * (float)i;
    int64_t n = ELEMENTS;
    ly_tensor ta, tb, ty;
    ly_tensor_init(&ta, a, LY_F32, 1, &n);
    ly_tensor_init(&tb, b, LY_F32, 1, &n);
    ly_tensor_init(&ty, y, LY_F32, 1, &n);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &ta;
    call.in[1] = &tb;
    call.out[0] = &ty;
    call.threads = 1;
    const char *impl = NULL;
    ly_kernel_fn fn = NULL;
    if (ly_kernel_resolve("add", &call, &impl, &fn) != LY_OK || !fn) {
        fprintf(stderr, "libreyolo bench kernels: %s\n", ly_last_error());
        return 1;
    }
    double direct = time_way(DIRECT, fn, &call), by_id = time_way(BY_ID, fn, &call),
           by_name = time_way(BY_NAME, fn, &call);
    if (direct < 0 || by_id < 0 || by_name < 0) {
        fprintf(stderr, "libreyolo bench kernels: %s\n", ly_last_error());
        return 1;
    }
    if (json) {
        printf("{\"dispatch\": {\"op\": \"add\", \"elements\": %d, \"impl\": ", ELEMENTS);
        ly_json_string(stdout, impl);
        printf(", \"direct_ns\": ");
        ly_json_number(stdout, direct);
        printf(", \"by_id_ns\": ");
        ly_json_number(stdout, by_id);
        printf(", \"by_name_ns\": ");
        ly_json_number(stdout, by_name);
        printf(", \"overhead_by_id_ns\": ");
        ly_json_number(stdout, by_id - direct);
        printf(", \"overhead_by_name_ns\": ");
        ly_json_number(stdout, by_name - direct);
        printf("}}\n");
        return 0;
    }
    printf("dispatch cost: add of %d floats on '%s', best of %d x %d calls, 1 thread\n\n", ELEMENTS,
           impl, ROUNDS, CALLS);
    printf("%-34s %10s %12s\n", "call", "ns/call", "dispatch ns");
    printf("%-34s %10.1f %12s\n", "implementation directly", direct, "-");
    printf("%-34s %10.1f %12.1f\n", "ly_kernel_dispatch_op (by id)", by_id, by_id - direct);
    printf("%-34s %10.1f %12.1f\n", "ly_kernel_dispatch (by name)", by_name, by_name - direct);
    printf("\n(goal: under 1000 ns of dispatch per call)\n");
    return 0;
}
