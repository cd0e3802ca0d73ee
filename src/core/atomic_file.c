/* SPDX-License-Identifier: MIT */
#include "core/atomic_file.h"

#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

ly_status ly_atomic_file_begin(ly_atomic_file *f, const char *path, const char *what)
{
    *f = (ly_atomic_file){.fd = -1, .path = path, .what = what};
    size_t size = strlen(path) + 64;
    f->tmp = malloc(size);
    if (!f->tmp) return ly_set_error(LY_E_NO_MEMORY, "%s: cannot allocate a file name", what);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (unsigned attempt = 0; attempt < 100 && f->fd < 0; attempt++) {
        snprintf(f->tmp, size, "%s.tmp-%ld-%ld-%u", path, (long)getpid(), (long)now.tv_nsec,
                 attempt);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd < 0 && errno != EEXIST) break;
    }
    if (f->fd >= 0) return LY_OK;
    ly_status st = ly_set_error(LY_E_IO, "%s: cannot create a temporary file next to it: %s", what,
                                strerror(errno));
    free(f->tmp);
    f->tmp = NULL;
    return st;
}

void ly_atomic_file_write(ly_atomic_file *f, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    while (n > 0 && !f->error) {
        ssize_t put = write(f->fd, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) {
            f->error = put < 0 ? errno : EIO;
            return;
        }
        p += put;
        n -= (size_t)put;
    }
}

/* Make the rename itself durable; a failure here leaves a complete file either
 * way, so it is not reported. */
static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

ly_status ly_atomic_file_commit(ly_atomic_file *f)
{
    ly_status st = LY_OK;
    if (f->error) st = ly_set_error(LY_E_IO, "%s: write failed: %s", f->what, strerror(f->error));
    if (st == LY_OK && fsync(f->fd) != 0)
        st = ly_set_error(LY_E_IO, "%s: fsync failed: %s", f->what, strerror(errno));
    if (close(f->fd) != 0 && st == LY_OK)
        st = ly_set_error(LY_E_IO, "%s: close failed: %s", f->what, strerror(errno));
    if (st == LY_OK && rename(f->tmp, f->path) != 0)
        st = ly_set_error(LY_E_IO, "%s: cannot rename the temporary file %s over it: %s", f->what,
                          f->tmp, strerror(errno));
    if (st != LY_OK)
        unlink(f->tmp);
    else
        sync_parent_dir(f->path);
    free(f->tmp);
    f->tmp = NULL;
    f->fd = -1;
    return st;
}

void ly_atomic_file_abort(ly_atomic_file *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    f->fd = -1;
}
