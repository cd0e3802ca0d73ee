/* SPDX-License-Identifier: MIT */
#include "core/dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

static int failed_at(const char *where, int err, char *failed, size_t failed_size)
{
    if (failed && failed_size) snprintf(failed, failed_size, "%s", where);
    return err;
}

int ly_make_dirs(const char *path, mode_t mode, char *failed, size_t failed_size)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s", path) >= sizeof p)
        return failed_at(path, ENAMETOOLONG, failed, failed_size);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST) return failed_at(p, errno, failed, failed_size);
        *s = saved;
        if (saved == '\0') break;
    }
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
        return failed_at(p, ENOTDIR, failed, failed_size);
    return 0;
}
