/* SPDX-License-Identifier: MIT */
/*
 * Where saved predictions go (ly_save_folder, libreyolo/image.h): the one
 * rule the command and the Python package share, LibreYOLO's increment_path
 * numbering of <project>/<name> (predict, predict2, predict3, ...).
 */
#include "core/core.h"
#include "core/dirs.h"
#include "libreyolo/image.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ly_status ly_save_folder(const char *project, const char *name, bool exist_ok, char *out,
                         size_t size)
{
    if (!project || !*project || !out || size == 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_save_folder: no project folder given");
    int n = name ? snprintf(out, size, "%s/%s", project, name) : snprintf(out, size, "%s", project);
    if (n < 0 || (size_t)n >= size)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "save folder %s/%s: the path is too long",
                            project, name ? name : "");
    struct stat st;
    for (int k = 2; name && !exist_ok && stat(out, &st) == 0; k++) {
        if (k == INT_MAX)
            return ly_set_error(LY_E_IO, "save folder %s/%s: every number is taken", project, name);
        n = snprintf(out, size, "%s/%s%d", project, name, k);
        if (n < 0 || (size_t)n >= size)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "save folder %s/%s: the path is too long",
                                project, name);
    }
    char failed[PATH_MAX];
    int err = ly_make_dirs(out, 0777, failed, sizeof failed);
    if (err)
        return ly_set_error(LY_E_IO, "save folder %s: cannot create it: %s: %s", out, failed,
                            strerror(err));
    return LY_OK;
}
