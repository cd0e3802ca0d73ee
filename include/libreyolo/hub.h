/* SPDX-License-Identifier: MIT */
/*
 * The kernel hub's state: pinned accelerated providers downloaded at run time
 * (the lock file, the cache, what loaded), as `libreyolo kernels --all` shows
 * it. How the hub works: src/kernels/hub/hub.h and docs/architecture.md. The lock
 * is LIBREYOLO_HUB_LOCK, else the one installed with the library
 * (<datadir>/libreyolo/kernels.lock.json).
 */
#ifndef LIBREYOLO_HUB_H
#define LIBREYOLO_HUB_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What `libreyolo kernels --all` shows about one pinned provider. */
typedef struct ly_hub_entry {
    char name[64];
    char slots[256]; /* comma separated */
    char revision[128];
    char variant[64]; /* the variant for this machine; "" when none fits */
    char file[128];
    char sha256[65];
    /* "pinned" (not in the cache), "cached" (verified in the cache, not loaded),
     * "loaded", "disabled" (why says why), "unavailable" (no variant for this
     * machine; why says which were offered). */
    char state[16];
    char why[512];
    char path[4096]; /* the cached file */
} ly_hub_entry;

typedef struct ly_hub_status {
    bool built;        /* compiled with libcurl */
    bool consulted;    /* ly_hub_load ran with the hub enabled */
    char why_off[256]; /* why the hub is not consulted in this process ("" when it is) */
    char url[1024];
    char lock[4096];
    char lock_error[512]; /* "" when the lock parsed */
    size_t count;
    ly_hub_entry *entries;
} ly_hub_status;

/* The hub's state for this process. Before the hub was consulted, or when it is
 * off, the entries come from the lock and the cache (hashes verified), without
 * loading or fetching anything. Free with ly_hub_status_free. */
LY_API ly_status ly_hub_status_get(ly_hub_status *out);
LY_API ly_status ly_hub_status_free(ly_hub_status *status);

#ifdef __cplusplus
}
#endif

#endif
