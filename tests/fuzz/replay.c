/* SPDX-License-Identifier: MIT */
/*
 * Replays inputs through one harness without libFuzzer: each argument is a
 * file or a directory (read recursively); a missing one is skipped with a
 * note (../shared/testdata is not in every clone). What `make test` runs.
 */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* Exactly sized, so AddressSanitizer sees a read past the end. */
    uint8_t *bytes = malloc(n > 0 ? (size_t)n : 1);
    size_t got = bytes && n > 0 ? fread(bytes, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!bytes || got != (size_t)(n > 0 ? n : 0)) {
        free(bytes);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput(bytes, got);
    free(bytes);
    replayed++;
    return 0;
}

static int replay(const char *path)
{
    struct stat s;
    if (stat(path, &s) != 0) {
        printf("replay: %s is absent, skipped\n", path);
        return 0;
    }
    if (!S_ISDIR(s.st_mode)) return replay_file(path);
    DIR *d = opendir(path);
    if (!d) return 1;
    int rc = 0;
    struct dirent *e;
    char child[4096];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && strcmp(e->d_name, "README.md") != 0) {
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            rc |= replay(child);
        }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= replay(argv[i]);
    printf("replay: %zu inputs, no finding\n", replayed);
    return rc;
}
