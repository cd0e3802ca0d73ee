/* SPDX-License-Identifier: MIT */
/* XNNPACK delegate payloads (the XN00 header and its flatbuffer graph), as
 * the delegate decodes them before building a runtime. */
#include "fuzz.h"

#include "pte/pte.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_xnn_graph *g = NULL;
    if (ly_xnn_decode(data, size, "fuzz payload", &g) == LY_OK) ly_xnn_graph_free(g);
    return 0;
}
