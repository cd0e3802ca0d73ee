/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tests (header-only; everything static inline so a test
 * that uses only part of it compiles without warnings). */
#ifndef LY_TESTS_TEST_UTIL_H
#define LY_TESTS_TEST_UTIL_H

#include "libreyolo/kernels.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether the AVX2+FMA providers were built and this CPU can run them: the tests
 * comparing them against the reference skip otherwise. */
static inline bool ly_test_have_avx2(void)
{
#ifndef LY_HAVE_AVX2_PROVIDERS
    return false;
#else
    ly_cpu_features cpu;
    return ly_cpu_features_get(&cpu) == LY_OK && cpu.avx2 && cpu.fma;
#endif
}

/* splitmix64: a deterministic, seedable stream for test data. */
static inline uint64_t ly_test_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A scratch directory per test program: created by the group setup, emptied and
 * removed by the group teardown (one level of subdirectories included). */
static inline char *ly_test_scratch(void)
{
    static char dir[256];
    return dir;
}

static inline int ly_test_scratch_setup(void **state)
{
    (void)state;
    snprintf(ly_test_scratch(), 256, "/tmp/ly_test_XXXXXX");
    return mkdtemp(ly_test_scratch()) ? 0 : -1;
}

static inline int ly_test_scratch_teardown(void **state)
{
    (void)state;
    DIR *d = opendir(ly_test_scratch());
    if (!d) return 0;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", ly_test_scratch(), e->d_name);
        if (rmdir(path) != 0) unlink(path);
    }
    closedir(d);
    rmdir(ly_test_scratch());
    return 0;
}

/* The whole of a text file, NUL-terminated (free it); NULL if unreadable. */
static inline char *ly_test_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1))) {
        if (fread(text, 1, (size_t)size, f) == (size_t)size)
            text[size] = '\0';
        else
            free(text), text = NULL;
    }
    fclose(f);
    return text;
}

/* "<scratch>/<name>" in buf. */
static inline const char *ly_test_scratch_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", ly_test_scratch(), name);
    return buf;
}

#endif
