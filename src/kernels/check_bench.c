/* SPDX-License-Identifier: MIT */
/* The case sets' benchmark calls (libreyolo/check.h), for `libreyolo bench
 * kernels`: each op's recipe lives with its cases (ops/cases.h). */
#include "libreyolo/check.h"

#include "core/core.h"
#include "ops/ops_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct bench_owner {
    ly_check_case c;
    ly_tensor out[LY_KERNEL_MAX_OUTPUTS];
} bench_owner;

void ly_check_call_free(ly_check_call *c)
{
    if (!c) return;
    bench_owner *o = c->owner;
    if (o) {
        for (int i = 0; i < LY_KERNEL_MAX_OUTPUTS; i++)
            free(o->out[i].data);
        ly_check_case_free(&o->c);
        free(o);
    }
    memset(c, 0, sizeof *c);
}

static double tensor_bytes(const ly_tensor *t)
{
    return (double)ly_tensor_numel(t) * (double)ly_dtype_size(t->dtype);
}

ly_status ly_check_bench_call(const char *slot, size_t numel, ly_check_call *out)
{
    if (!slot || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_check_bench_call: NULL argument");
    memset(out, 0, sizeof *out);
    ly_op op;
    if (!ly_op_lookup(slot, &op))
        return ly_set_error(LY_E_UNSUPPORTED,
                            "no benchmark recipe for slot '%s' (not in the manifest)", slot);
    const ly_case_set *set = ly_op_def_of(op)->cases;
    bench_owner *o = calloc(1, sizeof *o);
    if (!o) return ly_set_error(LY_E_NO_MEMORY, "ly_check_bench_call: out of memory");
    out->owner = o;
    ly_check_case_init(&o->c, 0);
    ly_case_bench b = {0};
    ly_status st = set->bench ? set->bench(op, numel, &o->c, &b) : LY_E_NOT_FOUND;
    if (st == LY_E_NOT_FOUND)
        st = ly_set_error(LY_E_UNSUPPORTED, "no benchmark recipe for this slot");
    int n_out = 0;
    if (st == LY_OK) {
        ly_check_case_call(&o->c, &out->call, NULL);
        st = ly_kernel_infer_outputs(slot, &out->call, o->out, &n_out);
    }
    double bytes = 0.0;
    for (int i = 0; st == LY_OK && i < n_out; i++) {
        size_t size = (size_t)tensor_bytes(&o->out[i]);
        o->out[i].data = calloc(1, size ? size : 1);
        if (!o->out[i].data)
            st = ly_set_error(LY_E_NO_MEMORY, "ly_check_bench_call: out of memory");
        out->call.out[i] = &o->out[i];
        bytes += tensor_bytes(&o->out[i]);
    }
    if (st != LY_OK) {
        ly_check_call_free(out);
        return st;
    }
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        if (out->call.in[i]) bytes += tensor_bytes(out->call.in[i]);
    out->bytes = b.bytes > 0.0 ? b.bytes : bytes;
    out->speed_target = b.speed_target;
    return LY_OK;
}
