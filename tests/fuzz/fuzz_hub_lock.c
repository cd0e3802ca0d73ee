/* SPDX-License-Identifier: MIT */
/* The kernel hub's lock file (LIBREYOLO_HUB_LOCK), parsed as `libreyolo
 * kernels` reads it: nothing is fetched or loaded. */
#include "fuzz.h"

#include "libreyolo/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ly_fuzz_harness_init(void)
{
    /* An empty cache of our own: the entries' hashes are checked against it. */
    const char *marker = ly_fuzz_file("cache-marker", (const uint8_t *)"", 0);
    if (marker) {
        char cache[600];
        snprintf(cache, sizeof cache, "%.*s/cache", (int)(strrchr(marker, '/') - marker), marker);
        setenv("LIBREYOLO_CACHE", cache, 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *lock = ly_fuzz_file("kernels.lock.json", data, size);
    if (!lock) return 0;
    setenv("LIBREYOLO_HUB_LOCK", lock, 1);
    ly_hub_status s;
    if (ly_hub_status_get(&s) == LY_OK) ly_hub_status_free(&s);
    return 0;
}
