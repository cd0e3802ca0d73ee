/* SPDX-License-Identifier: MIT */
/* ExecuTorch programs: the header and flatbuffer (verifier and validation),
 * segments and named data, then the "forward" method's load (values, planned
 * buffers, operators, XNNPACK delegates) and, when its inputs are small, one
 * run on zeros (inputs of their declared element type and size). */
#include "fuzz.h"

#include "core/core.h"
#include "engines/executorch/et_runtime.h"
#include "pte/pte.h"

#include <stdlib.h>

#define MAX_INPUT_ELEMENTS ((int64_t)1 << 16)

static void run_on_zeros(ly_et_method *m)
{
    size_t n = ly_et_method_num_inputs(m);
    if (n == 0 || n > 8) return;
    ly_tensor in[8];
    void *mem[8] = {0};
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = ly_et_method_input_shape(m, i, &in[i]) == LY_OK;
        int64_t count = 1;
        for (int d = 0; ok && d < in[i].ndim; d++) {
            if (in[i].shape[d] < 0 || in[i].shape[d] > MAX_INPUT_ELEMENTS) ok = false;
            count *= ok ? in[i].shape[d] : 1;
            if (count > MAX_INPUT_ELEMENTS) ok = false;
        }
        /* exactly the bytes of the declared elements, so that a runtime
         * which copies more (an element size it got wrong) reads past them */
        size_t bytes = (size_t)count * ly_dtype_size(in[i].dtype);
        if (ok) ok = (mem[i] = calloc(bytes ? bytes : 1, 1)) != NULL;
        if (ok) in[i].data = mem[i];
    }
    if (ok) ly_et_method_execute(m, in, n, 1);
    for (size_t i = 0; i < n; i++)
        free(mem[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_pte_program *p = NULL;
    if (ly_pte_decode(data, size, "fuzz.pte", &p) != LY_OK) return 0;
    ly_et_method *m = NULL;
    if (ly_et_method_load(p, "fuzz.pte", &m) == LY_OK) {
        run_on_zeros(m);
        ly_et_method_free(m);
    }
    ly_pte_program_free(p);
    return 0;
}
