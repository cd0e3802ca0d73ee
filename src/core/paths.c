/* SPDX-License-Identifier: MIT */
/*
 * Files the library ships beside itself (the hub lock, plugins), found
 * relative to where the library is at run time, never where it was built:
 * the object holding this code is the shared library (in <libdir>) or the
 * executable it is linked into (in <bindir>, or the build tree), and the
 * install layout's relative paths come from CMake (GNUInstallDirs).
 */
#include "core/core.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef LY_LIBDIR_TO_DATADIR
#define LY_LIBDIR_TO_DATADIR "../share"
#endif
#ifndef LY_BINDIR_TO_DATADIR
#define LY_BINDIR_TO_DATADIR "../share"
#endif
#ifndef LY_BINDIR_TO_LIBDIR
#define LY_BINDIR_TO_LIBDIR "../lib"
#endif

/* An object of this file's: dladdr says which loaded object holds it. */
static const char here = 0;

bool ly_self_dir(char *out, size_t size)
{
    Dl_info info;
    char real[PATH_MAX];
    bool found = dladdr(&here, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
                 realpath(info.dli_fname, real);
    if (!found) {
        /* the main program (dladdr names it by argv[0]) */
        ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
        if (n <= 0) return false;
        real[n] = '\0';
    }
    char *slash = strrchr(real, '/');
    if (!slash) return false;
    *slash = '\0';
    return (size_t)snprintf(out, size, "%s", real) < size;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool ly_data_file(const char *name, char *out, size_t size)
{
    char dir[PATH_MAX];
    if (!ly_self_dir(dir, sizeof dir)) return false;
    /* installed (from <libdir> or <bindir>), then the build tree (<build>, <build>/tests) */
    const char *const relative[] = {LY_LIBDIR_TO_DATADIR, LY_BINDIR_TO_DATADIR, "share",
                                    "../share"};
    for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++)
        if ((size_t)snprintf(out, size, "%s/%s/libreyolo/%s", dir, relative[i], name) < size &&
            is_file(out))
            return true;
    return false;
}

int ly_plugin_dirs(char dirs[][LY_PATH_MAX], int max)
{
    char dir[PATH_MAX];
    if (!ly_self_dir(dir, sizeof dir) || max < 2) return 0;
    int n = 0;
    /* <libdir>/libreyolo/plugins, seen from the library and from <bindir> */
    if ((size_t)snprintf(dirs[n], LY_PATH_MAX, "%s/libreyolo/plugins", dir) < LY_PATH_MAX) n++;
    if ((size_t)snprintf(dirs[n], LY_PATH_MAX, "%s/%s/libreyolo/plugins", dir,
                         LY_BINDIR_TO_LIBDIR) < LY_PATH_MAX)
        n++;
    return n;
}
