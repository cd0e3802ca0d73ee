/* SPDX-License-Identifier: MIT */
/*
 * Opening a checkpoint: the one place that tells the formats apart and hands
 * the bytes to the reader of theirs (torch.h: .pt zip archives, safetensors.h),
 * which fills the container (container.h).
 *
 * The whole file is read into memory once; tensors are converted out of it and
 * the file buffer is released before ly_checkpoint_open returns, so a
 * checkpoint costs its converted tensors and nothing more.
 */
#include "core/core.h"
#include "importers/checkpoint/container.h"
#include "importers/checkpoint/safetensors.h"
#include "importers/checkpoint/torch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The formats, tried in order. */
static const struct checkpoint_format {
    bool (*looks_like)(const uint8_t *data, size_t size);
    ly_status (*fill)(ly_checkpoint *ck, const uint8_t *data, size_t size);
} checkpoint_formats[] = {
    {ly_torch_looks_like, ly_torch_load},
    {ly_safetensors_looks_like, ly_safetensors_load},
};

static ly_status ck_load(const uint8_t *data, size_t size, const char *func, const char *name,
                         ly_checkpoint **out)
{
    ly_checkpoint *ck = ly_ck_create(func, name, size);
    if (!ck) return LY_E_NO_MEMORY;
    const struct checkpoint_format *format = NULL;
    for (size_t i = 0; !format && i < sizeof checkpoint_formats / sizeof checkpoint_formats[0]; i++)
        if (checkpoint_formats[i].looks_like(data, size)) format = &checkpoint_formats[i];
    static const uint8_t legacy_magic[4] = {0x80, 0x02, 0x8a, 0x0a};
    ly_status st;
    if (size == 0)
        st = ly_ck_fail(ck, LY_E_FORMAT, "the file is empty");
    else if (format)
        st = format->fill(ck, data, size);
    else if (size >= 4 && memcmp(data, legacy_magic, 4) == 0)
        st = ly_ck_fail(ck, LY_E_UNSUPPORTED,
                        "this is a legacy (PyTorch < 1.6, not zip) torch.save file; re-save it "
                        "with a current PyTorch");
    else
        st = ly_ck_fail(ck, LY_E_FORMAT,
                        "not a checkpoint: neither a zip archive (a .pt written by torch.save) "
                        "nor a .safetensors file");
    if (st == LY_OK) st = ly_ck_finish(ck);
    if (st != LY_OK) {
        ly_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return LY_OK;
}

static ly_status read_whole_file(const char *path, uint8_t **out, size_t *size)
{
    const char *func = "ly_checkpoint_open";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return ly_set_error(err == ENOENT || err == ENOTDIR ? LY_E_NOT_FOUND : LY_E_IO,
                            "%s: %s: cannot open: %s", func, path, strerror(err));
    }
    struct stat sb;
    ly_status st = LY_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb) != 0) {
        st = ly_set_error(LY_E_IO, "%s: %s: stat failed: %s", func, path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = ly_set_error(LY_E_IO, "%s: %s: not a regular file", func, path);
    } else if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 1) {
        st = ly_set_error(LY_E_IO, "%s: %s: too large to read", func, path);
    } else {
        size_t total = (size_t)sb.st_size;
        buf = malloc(total ? total : 1);
        if (!buf)
            st = ly_set_error(LY_E_NO_MEMORY, "%s: %s: cannot allocate %zu bytes", func, path,
                              total);
        size_t done = 0;
        while (st == LY_OK && done < total) {
            ssize_t got = read(fd, buf + done, total - done);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                st = ly_set_error(LY_E_IO, "%s: %s: read failed: %s", func, path, strerror(errno));
            else if (got == 0)
                st = ly_set_error(LY_E_IO, "%s: %s: the file shrank while being read", func, path);
            else
                done += (size_t)got;
        }
        *size = total;
    }
    close(fd);
    if (st != LY_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return LY_OK;
}

ly_status ly_checkpoint_open(const char *path, ly_checkpoint **out)
{
    if (!path || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_open: %s is NULL",
                            !path ? "path" : "out");
    *out = NULL;
    uint8_t *data = NULL;
    size_t size = 0;
    ly_status st = read_whole_file(path, &data, &size);
    if (st != LY_OK) return st;
    st = ck_load(data, size, "ly_checkpoint_open", path, out);
    free(data);
    return st;
}

ly_status ly_checkpoint_open_buffer(const void *bytes, size_t size, const char *name,
                                    ly_checkpoint **out)
{
    if (!out || (!bytes && size))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_checkpoint_open_buffer: %s is NULL",
                            !out ? "out" : "bytes");
    *out = NULL;
    /* Tensors are converted out of `bytes`; nothing keeps pointing into them. */
    return ck_load(bytes, size, "ly_checkpoint_open_buffer", name ? name : "<memory>", out);
}
