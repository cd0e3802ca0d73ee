/* SPDX-License-Identifier: MIT */
/* TF.js graph models: model.json (topology, weightsManifest) and its weight
 * shard, then the lowering to our graph. The input is the JSON, a NUL, and
 * the bytes every shard the manifest names reads as. */
#include "fuzz.h"

#include "graph/graph.h"
#include "importers/tfjs/tfjs.h"
#include "importers/tfjs/tfjs_graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct shard {
    const uint8_t *bytes;
    size_t size;
} shard;

static ly_status read_shard(void *user, const char *name, uint8_t **bytes, size_t *size)
{
    (void)name;
    const shard *s = user;
    *bytes = malloc(s->size ? s->size : 1);
    if (!*bytes) return LY_E_NO_MEMORY;
    if (s->size) memcpy(*bytes, s->bytes, s->size);
    *size = s->size;
    return LY_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_size = nul ? (size_t)(nul - data) : size;
    shard s = {nul ? nul + 1 : data + size, nul ? size - json_size - 1 : 0};
    ly_tfjs_model *m = NULL;
    if (ly_tfjs_parse((const char *)data, json_size, "fuzz/model.json", read_shard, &s, &m) !=
        LY_OK)
        return 0;
    ly_graph *g = NULL;
    if (ly_tfjs_lower(m, &g) == LY_OK) ly_graph_free(g);
    ly_tfjs_free(m);
    return 0;
}
