/* SPDX-License-Identifier: MIT */
/*
 * Hub artifacts: accelerated providers downloaded at run time as plugin
 * libraries, pinned to an audited revision by a lock file, as LibreYOLO fetches
 * compiled kernels from its hub.
 *
 * The lock (LIBREYOLO_HUB_LOCK, default src/kernels/hub/kernels.lock.json of the
 * source tree this library was built from) lists per provider its slot(s), name
 * and revision, and per build variant the file and its SHA-256:
 *
 *   {"format": 1, "providers": [{"name": "cuda", "slot": "ms_deform_attn",
 *     "revision": "r1", "variants": {"cuda13-x86_64-linux":
 *       {"file": "libreyolo_kernels_cuda.so", "sha256": "<64 hex digits>"}}}]}
 *
 * Variants are "<kind>-<arch>-linux" with kind cuda<N> (a CUDA driver for CUDA
 * N or newer), cpu-avx2 (AVX2 and FMA) or cpu; a machine takes the best one it
 * supports (cuda, then cpu-avx2, then cpu).
 *
 * The hub is consulted once per process, when the kernel providers initialise,
 * and only if all of: the library was built with libcurl (LIBREYOLO_WITH_CURL),
 * LIBREYOLO_HUB_URL is set, LIBREYOLO_HUB_KERNELS is not 0/false/off/no, and
 * LIBREYOLO_KERNELS is not off/reference. Otherwise no network request is made.
 * Each file is taken from $LIBREYOLO_CACHE/kernels/<name>/<revision>/<variant>/
 * or downloaded from <url>/<name>/<revision>/<variant>/<file> into it
 * (atomically), verified against the pinned SHA-256 (a cached copy too: a bad
 * one is fetched again), and loaded as a plugin that may register only the pinned
 * name for the pinned slots. A hash mismatch, a failed download or a library
 * that does not load disables that provider for the process with one warning;
 * one that fails at run time is disabled by the registry. The portable path
 * carries on in every case.
 */
#ifndef LY_KERNELS_HUB_H
#define LY_KERNELS_HUB_H

#include "libreyolo/hub.h"

/* Consult the hub (see above) and load the pinned providers; once per process,
 * later calls do nothing. Called while the registry initialises its providers. */
void ly_hub_load(void);

/* Whether LIBREYOLO_HUB_KERNELS disables the hub (0, false, off, no; stripped,
 * case-insensitive). */
bool ly_hub_disabled_by_env(void);
/* Whether the lock the hub read this process pins a provider `name` (loaded or
 * not: the hub has said why not). */
bool ly_hub_pins(const char *name);

/* Load one plugin library by path (src/kernels/plugin.c). Its registrations are
 * committed only if every one is named `name` and is for one of `slots`; on
 * failure nothing is registered and the error says why. `registered` may be
 * NULL. Called with the registry's providers lock held. */
ly_status ly_plugin_load_file(const char *path, const char *name, const char *const *slots,
                              size_t n_slots, size_t *registered);

#endif
