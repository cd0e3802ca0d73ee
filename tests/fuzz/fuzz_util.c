/* SPDX-License-Identifier: MIT */
/* What the harnesses share (fuzz.h). */
#include "fuzz.h"

#include "libreyolo/checkpoint.h"
#include "libreyolo/libreyolo.h"
#include "libreyolo/model.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

const char *ly_fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[600];
    if (!dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/ly_fuzz_XXXXXX", base);
        if (!mkdtemp(dir)) {
            dir[0] = '\0';
            return NULL;
        }
        atexit(remove_dir);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t put = write(fd, data + done, size - done);
        if (put <= 0) break;
        done += (size_t)put;
    }
    close(fd);
    return done == size ? path : NULL;
}

static void discard(ly_log_level level, const char *message, void *user)
{
    (void)level;
    (void)message;
    (void)user;
}

__attribute__((weak)) void ly_fuzz_harness_init(void)
{
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ly_set_log_handler(discard, NULL, LY_LOG_OFF);
    setenv("LIBREYOLO_MAX_IMAGE_PIXELS", "500000", 1);
    setenv("LIBREYOLO_HUB_URL", "", 1);
    setenv("LIBREYOLO_THREADS", "1", 1);
    ly_fuzz_harness_init();
    return 0;
}

void ly_fuzz_checkpoint_bytes(const uint8_t *data, size_t size, const char *name)
{
    ly_checkpoint *ck = NULL;
    if (ly_checkpoint_open_buffer(data, size, name, &ck) != LY_OK) return;
    ly_checkpoint_close(ck);
    const char *path = ly_fuzz_file(name, data, size);
    ly_model *m = NULL;
    if (path && ly_model_load(path, NULL, &m) == LY_OK) ly_model_free(m);
}
