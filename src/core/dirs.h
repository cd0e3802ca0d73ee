/* SPDX-License-Identifier: MIT */
/* mkdir -p for the library's folders (the model cache, hub kernels, saved
 * predictions). */
#ifndef LY_CORE_DIRS_H
#define LY_CORE_DIRS_H

#include <stddef.h>
#include <sys/types.h>

/* Create `path` and its missing parents with `mode` (before the umask). 0 when
 * it is a directory at the end, else the errno of the first step that failed
 * (ENOTDIR when `path` is something else, ENAMETOOLONG when it does not fit
 * PATH_MAX), that step's path copied into `failed` (may be NULL). */
int ly_make_dirs(const char *path, mode_t mode, char *failed, size_t failed_size);

#endif
