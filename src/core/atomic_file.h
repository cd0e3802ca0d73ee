/* SPDX-License-Identifier: MIT */
/* Files written atomically: into a temporary file next to the target, then
 * fsync'ed and renamed over it, so a reader sees the old file or the whole new
 * one, never a part; on any failure the temporary file is removed and the
 * target is untouched. */
#ifndef LY_CORE_ATOMIC_FILE_H
#define LY_CORE_ATOMIC_FILE_H

#include "libreyolo/libreyolo.h"

typedef struct ly_atomic_file {
    int fd;
    int error; /* first errno of a failed write, 0 if none */
    char *tmp;
    const char *path;
    const char *what; /* message prefix, e.g. "ly_npy_save: out.npy" */
} ly_atomic_file;

/* Create the temporary file (with the mode the umask gives, unlike mkstemp). */
ly_status ly_atomic_file_begin(ly_atomic_file *f, const char *path, const char *what);
/* Append bytes; a failure is remembered and reported by commit. */
void ly_atomic_file_write(ly_atomic_file *f, const void *bytes, size_t n);
/* Finish: on success (and no earlier write failure) the file replaces `path`
 * and its directory entry is made durable; otherwise the temporary file is
 * removed. Always releases `f`. */
ly_status ly_atomic_file_commit(ly_atomic_file *f);
/* Give up: remove the temporary file and release `f`. */
void ly_atomic_file_abort(ly_atomic_file *f);

#endif
