/* SPDX-License-Identifier: MIT */
/*
 * Hub artifacts (src/kernels/hub) against a local HTTP server on 127.0.0.1 that
 * this test runs in a thread, serving plugin libraries the build produced
 * (tests/plugins) and counting requests.
 *
 * The hub is consulted once per process, so each scenario runs in a fresh
 * process: this program re-executed with "--child", the scenario's environment,
 * and what it should observe (LY_T_* variables). The parent checks the request
 * count around it.
 */
/* cmocka.h needs these first. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
/* clang-format on */

#include "core/digest.h"
#include "kernels/hub/hub.h"
#include "libreyolo/quant.h"
#include "test_util.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

#if defined(__x86_64__)
#define ARCH "x86_64"
#elif defined(__aarch64__)
#define ARCH "aarch64"
#else
#define ARCH NULL
#endif
#define VARIANT "cpu-" ARCH "-linux"

/* ---- Files -------------------------------------------------------------------------- */

static bool read_file(const char *path, char **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    *size = *data ? fread(*data, 1, (size_t)n, f) : 0;
    fclose(f);
    return *data && *size == (size_t)n;
}

static bool write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static void make_dirs(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char child[1024];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void sha256_hex(const char *path, char hex[65])
{
    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    hex[0] = '\0';
    if (ly_digest_file(path, LY_SHA256, digest, &len) == LY_OK) ly_digest_hex(digest, len, hex);
}

/* ---- The server ----------------------------------------------------------------------- */

typedef struct server {
    int fd;
    int port;
    char root[512];
    atomic_int requests;
    atomic_bool stop;
    pthread_t thread;
} server;

static server srv;

static void send_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return;
        p += put;
        n -= (size_t)put;
    }
}

static void respond(int fd, const char *root, const char *path)
{
    char file[1024];
    char *body = NULL;
    size_t size = 0;
    int n = snprintf(file, sizeof file, "%s%s", root, path);
    if (n < 0 || (size_t)n >= sizeof file || strstr(path, "..") || !read_file(file, &body, &size)) {
        const char *nf = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        send_all(fd, nf, strlen(nf));
        free(body);
        return;
    }
    char head[256];
    n = snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                 size);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, size);
    free(body);
}

static void *serve(void *arg)
{
    server *s = arg;
    for (;;) {
        int c = accept(s->fd, NULL, NULL);
        if (atomic_load(&s->stop)) {
            if (c >= 0) close(c);
            break;
        }
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            break;
        }
        char req[4096];
        size_t n = 0;
        while (n < sizeof req - 1) {
            ssize_t got = recv(c, req + n, sizeof req - 1 - n, 0);
            if (got <= 0) break;
            n += (size_t)got;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n")) break;
        }
        req[n] = '\0';
        char path[1024];
        if (sscanf(req, "GET %1000s HTTP/", path) == 1) {
            atomic_fetch_add(&s->requests, 1);
            respond(c, s->root, path);
        }
        close(c);
    }
    return NULL;
}

static int bind_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

static int server_start(void)
{
    srv.fd = bind_loopback(&srv.port);
    if (srv.fd < 0 || listen(srv.fd, 16) != 0) return -1;
    return pthread_create(&srv.thread, NULL, serve, &srv) == 0 ? 0 : -1;
}

static void server_stop(void)
{
    atomic_store(&srv.stop, true);
    /* Wake the accept with one last connection. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0) {
        (void)connect(fd, (struct sockaddr *)&addr, sizeof addr);
        close(fd);
    }
    pthread_join(srv.thread, NULL);
    close(srv.fd);
}

/* ---- Fixture ------------------------------------------------------------------------ */

static char exe[1024];
static char url[128], down_url[128];
static char example_sha[65], failing_sha[65], junk_sha[65];
static char lock_good[512], lock_bad_pin[512], lock_junk[512], lock_failing[512], lock_missing[512],
    lock_unpinned[512];

static void artifact(const char *name, const char *file, const char *source, char sha[65])
{
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/%s/r1/%s", srv.root, name, VARIANT);
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *data;
    size_t size;
    if (!read_file(source, &data, &size)) {
        data = strdup("this is not an ELF file\n");
        size = strlen(data);
    }
    write_file(path, data, size);
    free(data);
    sha256_hex(path, sha);
}

static void write_lock(char *out, const char *file_name, const char *name, const char *slot,
                       const char *file, const char *sha)
{
    ly_test_scratch_path(file_name, out, 512);
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "{\"format\": 1, \"providers\": [{\"name\": \"%s\", \"slot\": \"%s\", "
                     "\"revision\": \"r1\", \"variants\": {\"" VARIANT "\": {\"file\": \"%s\", "
                     "\"sha256\": \"%s\"}}}]}\n",
                     name, slot, file, sha);
    write_file(out, text, (size_t)n);
}

static int setup(void **state)
{
    if (ly_test_scratch_setup(state) != 0) return -1;
    if (!ARCH) return 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    ly_test_scratch_path("www", srv.root, sizeof srv.root);
    make_dirs(srv.root);
    char source[1024];
    snprintf(source, sizeof source, "%s/libreyolo_kernels_example/libreyolo_kernels_example.so",
             LY_PLUGIN_DIR);
    artifact("example", "libreyolo_kernels_example.so", source, example_sha);
    artifact("other", "libreyolo_kernels_example.so", source, example_sha);
    snprintf(source, sizeof source, "%s/libreyolo_kernels_failing/libreyolo_kernels_failing.so",
             LY_PLUGIN_DIR);
    artifact("failing", "libreyolo_kernels_failing.so", source, failing_sha);
    artifact("junk", "libreyolo_kernels_junk.so", "/nonexistent", junk_sha);
    if (!example_sha[0] || !failing_sha[0] || !junk_sha[0]) return -1;

    const char *affine = ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE);
    write_lock(lock_good, "good.json", "example", affine, "libreyolo_kernels_example.so",
               example_sha);
    write_lock(lock_bad_pin, "bad_pin.json", "example", affine, "libreyolo_kernels_example.so",
               junk_sha);
    write_lock(lock_junk, "junk.json", "junk", affine, "libreyolo_kernels_junk.so", junk_sha);
    write_lock(lock_failing, "failing.json", "failing", affine, "libreyolo_kernels_failing.so",
               failing_sha);
    write_lock(lock_missing, "missing.json", "example", affine, "libreyolo_kernels_gone.so",
               example_sha);
    write_lock(lock_unpinned, "unpinned.json", "other", affine, "libreyolo_kernels_example.so",
               example_sha);

    if (server_start() != 0) return -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", srv.port);
    /* A port nobody listens on: bound, then released. */
    int down_port = 0, fd = bind_loopback(&down_port);
    if (fd < 0) return -1;
    close(fd);
    snprintf(down_url, sizeof down_url, "http://127.0.0.1:%d", down_port);
    return 0;
}

static int teardown(void **state)
{
    if (ARCH && srv.fd > 0) server_stop();
    char path[512];
    remove_tree(ly_test_scratch_path("www", path, sizeof path));
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "cache%d", i);
        remove_tree(ly_test_scratch_path(name, path, sizeof path));
    }
    return ly_test_scratch_teardown(state);
}

/* ---- Running a scenario -------------------------------------------------------------- */

#define MAX_ENV 256

/* Run this program as a child with `overrides` ("NAME=value", or "NAME" to
 * unset) on top of our environment; its exit status (128 + signal if killed). */
static int run_process(const char *path, char *const argv[], const char *const *overrides)
{
    char *envp[MAX_ENV];
    size_t n = 0;
    for (char **e = environ; *e && n < MAX_ENV - 32; e++) {
        bool replaced = false;
        for (const char *const *o = overrides; *o && !replaced; o++) {
            size_t key = strcspn(*o, "=");
            replaced = strncmp(*e, *o, key) == 0 && (*e)[key] == '=';
        }
        if (!replaced) envp[n++] = *e;
    }
    for (const char *const *o = overrides; *o && n < MAX_ENV - 1; o++)
        if (strchr(*o, '=')) envp[n++] = (char *)*o;
    envp[n] = NULL;
    pid_t pid;
    if (posix_spawn(&pid, path, NULL, NULL, argv, envp) != 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Environment of a scenario: hub settings, then what the child expects. */
typedef struct scenario {
    const char *url;         /* NULL: LIBREYOLO_HUB_URL unset */
    const char *lock;        /* the lock file */
    int cache;               /* cache directory number */
    const char *hub_kernels; /* LIBREYOLO_HUB_KERNELS, or NULL */
    const char *kernels;     /* LIBREYOLO_KERNELS, or NULL: the provider's name */
    const char *provider;    /* LY_T_PROVIDER: the entry the child looks at */
    const char *impl;  /* LY_T_IMPL: what fake_quant_int8_affine resolves to after two calls */
    const char *state; /* LY_T_STATE: the entry's state */
    const char *why;   /* LY_T_WHY: a part of the entry's reason or why_off */
    int warnings;      /* LY_T_WARNINGS: warnings the child must see, -1: any */
} scenario;

static void cache_dir(int n, char *out, size_t size)
{
    char name[32];
    snprintf(name, sizeof name, "cache%d", n);
    ly_test_scratch_path(name, out, size);
}

static int requests(void)
{
    return atomic_load(&srv.requests);
}

static int run_scenario(const scenario *s)
{
    static char vars[12][1200];
    char cache[512];
    cache_dir(s->cache, cache, sizeof cache);
    snprintf(vars[0], sizeof vars[0], "LIBREYOLO_HUB_URL%s%s", s->url ? "=" : "",
             s->url ? s->url : "");
    snprintf(vars[1], sizeof vars[1], "LIBREYOLO_HUB_LOCK=%s", s->lock);
    snprintf(vars[2], sizeof vars[2], "LIBREYOLO_CACHE=%s", cache);
    snprintf(vars[3], sizeof vars[3], "LIBREYOLO_HUB_KERNELS%s%s", s->hub_kernels ? "=" : "",
             s->hub_kernels ? s->hub_kernels : "");
    /* Selected by name: the in-tree providers of the slot are newer than any
     * plugin and would win otherwise. */
    snprintf(vars[4], sizeof vars[4], "LIBREYOLO_KERNELS=%s",
             s->kernels ? s->kernels : s->provider);
    snprintf(vars[5], sizeof vars[5], "LY_T_PROVIDER=%s", s->provider);
    snprintf(vars[6], sizeof vars[6], "LY_T_IMPL=%s", s->impl);
    snprintf(vars[7], sizeof vars[7], "LY_T_STATE=%s", s->state);
    snprintf(vars[8], sizeof vars[8], "LY_T_WHY=%s", s->why ? s->why : "");
    snprintf(vars[9], sizeof vars[9], "LY_T_WARNINGS=%d", s->warnings);
    const char *overrides[] = {vars[0],
                               vars[1],
                               vars[2],
                               vars[3],
                               vars[4],
                               vars[5],
                               vars[6],
                               vars[7],
                               vars[8],
                               vars[9],
                               "NO_PROXY=*",
                               "no_proxy=*",
                               "LIBREYOLO_KERNELS_PATH=",
                               "LIBREYOLO_QUANT_KERNELS=",
                               "LIBREYOLO_LOG=warning",
                               NULL};
    char *argv[] = {exe, "--child", NULL};
    return run_process(exe, argv, overrides);
}

static void cached_path(int cache, const char *name, const char *file, char *out, size_t size)
{
    char dir[512];
    cache_dir(cache, dir, sizeof dir);
    snprintf(out, size, "%s/kernels/%s/r1/%s/%s", dir, name, VARIANT, file);
}

/* ---- The child ------------------------------------------------------------------------ */

static char child_log[8192];
static int child_warnings;

static void child_capture(ly_log_level level, const char *message, void *user)
{
    (void)user;
    if (level < LY_LOG_WARNING) return;
    child_warnings++;
    size_t used = strlen(child_log);
    snprintf(child_log + used, sizeof child_log - used, "  warning: %s\n", message);
}

static ly_status run_affine(void)
{
    float x[5] = {-1.0f, -0.3f, 0.0f, 0.7f, 2.9f}, lo = -1.0f, hi = 3.0f, out[5];
    int64_t s5 = 5, s1 = 1;
    ly_tensor tx, tlo, thi, to;
    ly_tensor_init(&tx, x, LY_F32, 1, &s5);
    ly_tensor_init(&tlo, &lo, LY_F32, 1, &s1);
    ly_tensor_init(&thi, &hi, LY_F32, 1, &s1);
    ly_tensor_init(&to, out, LY_F32, 1, &s5);
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &tx;
    call.in[1] = &tlo;
    call.in[2] = &thi;
    call.out[0] = &to;
    return ly_kernel_dispatch_op(LY_OP_FAKE_QUANT_INT8_AFFINE, &call);
}

#define CHILD_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child: " __VA_ARGS__);                                                \
            fprintf(stderr, "\n%s", child_log);                                                    \
            failed = true;                                                                         \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

static int child_main(void)
{
    const char *provider = getenv("LY_T_PROVIDER"), *impl = getenv("LY_T_IMPL"),
               *state = getenv("LY_T_STATE"), *why = getenv("LY_T_WHY");
    int warnings = atoi(getenv("LY_T_WARNINGS") ? getenv("LY_T_WARNINGS") : "-1");
    bool failed = false;
    ly_hub_status hub = {0};
    ly_set_log_handler(child_capture, NULL, LY_LOG_WARNING);
    const char *name = NULL;
    ly_status st = ly_kernel_resolve(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), NULL, &name, NULL);
    CHILD_CHECK(st == LY_OK, "resolve failed: %s", ly_last_error());
    /* Twice: a provider that fails at run time is disabled by the first. */
    CHILD_CHECK(run_affine() == LY_OK, "dispatch failed: %s", ly_last_error());
    CHILD_CHECK(run_affine() == LY_OK, "dispatch failed: %s", ly_last_error());
    st = ly_kernel_resolve(ly_op_name(LY_OP_FAKE_QUANT_INT8_AFFINE), NULL, &name, NULL);
    CHILD_CHECK(st == LY_OK && strcmp(name, impl) == 0, "resolves to '%s', expected '%s'",
                name ? name : "(none)", impl);
    CHILD_CHECK(ly_hub_status_get(&hub) == LY_OK, "ly_hub_status_get: %s", ly_last_error());
    const ly_hub_entry *e = NULL;
    for (size_t i = 0; i < hub.count; i++)
        if (strcmp(hub.entries[i].name, provider) == 0) e = &hub.entries[i];
    CHILD_CHECK(e, "no hub entry '%s' (lock error: '%s', why_off: '%s')", provider, hub.lock_error,
                hub.why_off);
    CHILD_CHECK(strcmp(e->state, state) == 0, "'%s' is %s (%s), expected %s", provider, e->state,
                e->why, state);
    if (why && *why)
        CHILD_CHECK(strstr(e->why, why) || strstr(hub.why_off, why),
                    "neither why '%s' nor why_off '%s' contains '%s'", e->why, hub.why_off, why);
    if (strcmp(impl, "example") == 0) {
        /* The example provider really served the calls, from the cached file. */
        void *h = dlopen(e->path, RTLD_NOW | RTLD_NOLOAD);
        CHILD_CHECK(h, "%s is not loaded", e->path);
        long (*calls)(void);
        *(void **)&calls = dlsym(h, "libreyolo_kernels_example_calls");
        long n = calls ? calls() : -1;
        dlclose(h);
        CHILD_CHECK(n == 2, "the example provider served %ld calls, expected 2", n);
    }
    CHILD_CHECK(warnings < 0 || child_warnings == warnings, "%d warnings, expected %d",
                child_warnings, warnings);
done:
    ly_hub_status_free(&hub);
    return failed ? 1 : 0;
}

/* ---- Scenarios ------------------------------------------------------------------------- */

#define SKIP_WITHOUT_ARCH()                                                                        \
    do {                                                                                           \
        if (!ARCH) {                                                                               \
            print_message("skipped: no hub variant name for this architecture\n");                 \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#ifdef LY_HAVE_CURL
#define SKIP_WITHOUT_CURL() SKIP_WITHOUT_ARCH()
#else
#define SKIP_WITHOUT_CURL()                                                                        \
    do {                                                                                           \
        print_message("skipped: built without libcurl (LIBREYOLO_WITH_CURL=OFF)\n");               \
        skip();                                                                                    \
    } while (0)
#endif

static void expect_file(int cache, const char *name, const char *file, const char *sha)
{
    char path[1024], hex[65];
    cached_path(cache, name, file, path, sizeof path);
    sha256_hex(path, hex);
    assert_string_equal(hex, sha);
}

static void expect_no_file(int cache, const char *name, const char *file)
{
    char path[1024];
    cached_path(cache, name, file, path, sizeof path);
    assert_int_not_equal(access(path, F_OK), 0);
}

static void test_fetch_and_load(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_good,
                  .cache = 0,
                  .provider = "example",
                  .impl = "example",
                  .state = "loaded",
                  .warnings = 0};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 1);
    expect_file(0, "example", "libreyolo_kernels_example.so", example_sha);
}

static void test_cache_hit_makes_no_request(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_good,
                  .cache = 0,
                  .provider = "example",
                  .impl = "example",
                  .state = "loaded",
                  .warnings = 0};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 0);
}

/* `libreyolo kernels --all [--json]` reports the loaded provider. */
static void test_cli_reports_hub(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    char cache[512], out[512];
    cache_dir(0, cache, sizeof cache);
    ly_test_scratch_path("cli.json", out, sizeof out);
    char v_url[256], v_lock[600], v_cache[600];
    snprintf(v_url, sizeof v_url, "LIBREYOLO_HUB_URL=%s", url);
    snprintf(v_lock, sizeof v_lock, "LIBREYOLO_HUB_LOCK=%s", lock_good);
    snprintf(v_cache, sizeof v_cache, "LIBREYOLO_CACHE=%s", cache);
    const char *env[] = {v_url, v_cache, v_lock, "LIBREYOLO_HUB_KERNELS", "NO_PROXY=*", NULL};
    char *argv[] = {"sh", "-c", NULL, NULL};
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' kernels --all --json > '%s'", LY_CLI_PATH, out);
    argv[2] = cmd;
    int before = requests();
    assert_int_equal(run_process("/bin/sh", argv, env), 0);
    assert_int_equal(requests() - before, 0);
    char *text;
    size_t size;
    assert_true(read_file(out, &text, &size));
    cJSON *root = cJSON_ParseWithLength(text, size);
    free(text);
    assert_non_null(root);
    const cJSON *hub = cJSON_GetObjectItem(root, "hub");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(hub, "consulted")));
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(hub, "providers"), 0);
    assert_string_equal(cJSON_GetObjectItem(p, "name")->valuestring, "example");
    assert_string_equal(cJSON_GetObjectItem(p, "state")->valuestring, "loaded");
    assert_string_equal(cJSON_GetObjectItem(p, "variant")->valuestring, VARIANT);
    assert_string_equal(cJSON_GetObjectItem(p, "sha256")->valuestring, example_sha);
    cJSON_Delete(root);

    snprintf(cmd, sizeof cmd, "'%s' kernels --all > '%s'", LY_CLI_PATH, out);
    assert_int_equal(run_process("/bin/sh", argv, env), 0);
    assert_true(read_file(out, &text, &size));
    text = realloc(text, size + 1);
    text[size] = '\0';
    assert_non_null(strstr(text, "hub: consulted"));
    assert_non_null(
        strstr(text, "example  fake_quant_int8_affine  revision r1  " VARIANT "  loaded"));
    free(text);
}

static void test_corrupt_cache_is_fetched_again(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    char path[1024];
    cached_path(0, "example", "libreyolo_kernels_example.so", path, sizeof path);
    assert_true(write_file(path, "garbage", 7));
    scenario s = {.url = url,
                  .lock = lock_good,
                  .cache = 0,
                  .provider = "example",
                  .impl = "example",
                  .state = "loaded",
                  .warnings = 0};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 1);
    expect_file(0, "example", "libreyolo_kernels_example.so", example_sha);
}

static void test_pin_mismatch_is_refused(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_bad_pin,
                  .cache = 1,
                  .provider = "example",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "SHA-256 mismatch",
                  .warnings = 1};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 1);
    expect_no_file(1, "example", "libreyolo_kernels_example.so");
}

static void test_server_down(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = down_url,
                  .lock = lock_good,
                  .cache = 2,
                  .provider = "example",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "download failed",
                  .warnings = 1};
    assert_int_equal(run_scenario(&s), 0);
    expect_no_file(2, "example", "libreyolo_kernels_example.so");
}

static void test_missing_artifact(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_missing,
                  .cache = 2,
                  .provider = "example",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "404",
                  .warnings = 1};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 1);
}

static void test_library_that_does_not_load(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_junk,
                  .cache = 3,
                  .provider = "junk",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "does not load",
                  .warnings = 1};
    assert_int_equal(run_scenario(&s), 0);
}

static void test_library_that_fails_at_run_time(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    /* The one warning is the registry's, when the first call fails. */
    scenario s = {.url = url,
                  .lock = lock_failing,
                  .cache = 3,
                  .provider = "failing",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "failed at run time",
                  .warnings = 1};
    assert_int_equal(run_scenario(&s), 0);
}

static void test_registration_outside_the_pin(void **state)
{
    (void)state;
    SKIP_WITHOUT_CURL();
    scenario s = {.url = url,
                  .lock = lock_unpinned,
                  .cache = 3,
                  .provider = "other",
                  .impl = "reference",
                  .state = "disabled",
                  .why = "which the lock does not pin",
                  .warnings = 1};
    assert_int_equal(run_scenario(&s), 0);
}

/* LIBREYOLO_HUB_KERNELS=0/false/off/no, LIBREYOLO_KERNELS=off and an unset URL:
 * no request at all (an empty cache, so anything consulted would fetch). */
static void test_no_request_when_off(void **state)
{
    (void)state;
    SKIP_WITHOUT_ARCH();
    const char *values[] = {"0", "false", " OFF ", "No"};
    for (size_t i = 0; i < 4; i++) {
        scenario s = {.url = url,
                      .lock = lock_good,
                      .cache = 4,
                      .hub_kernels = values[i],
                      .provider = "example",
                      .impl = "reference",
                      .state = "pinned",
#ifdef LY_HAVE_CURL
                      .why = "LIBREYOLO_HUB_KERNELS=",
#endif
                      .warnings = 0};
        int before = requests();
        assert_int_equal(run_scenario(&s), 0);
        assert_int_equal(requests() - before, 0);
    }
    scenario off = {.url = url,
                    .lock = lock_good,
                    .cache = 4,
                    .kernels = "off",
                    .provider = "example",
                    .impl = "reference",
                    .state = "pinned",
                    .warnings = 0};
    scenario unset = {.url = NULL,
                      .lock = lock_good,
                      .cache = 4,
                      .provider = "example",
                      .impl = "reference",
                      .state = "pinned",
#ifdef LY_HAVE_CURL
                      .why = "LIBREYOLO_HUB_URL is unset",
#else
                      .why = "built without libcurl",
#endif
                      .warnings = 0};
    int before = requests();
    assert_int_equal(run_scenario(&off), 0);
    assert_int_equal(run_scenario(&unset), 0);
    assert_int_equal(requests() - before, 0);
    expect_no_file(4, "example", "libreyolo_kernels_example.so");
}

/* Without libcurl nothing is fetched even when asked to. */
static void test_no_request_without_curl(void **state)
{
    (void)state;
#ifdef LY_HAVE_CURL
    skip();
#else
    SKIP_WITHOUT_ARCH();
    scenario s = {.url = url,
                  .lock = lock_good,
                  .cache = 5,
                  .provider = "example",
                  .impl = "reference",
                  .state = "pinned",
                  .why = "built without libcurl",
                  .warnings = 0};
    int before = requests();
    assert_int_equal(run_scenario(&s), 0);
    assert_int_equal(requests() - before, 0);
#endif
}

/* ---- The lock, parsed in this process (the hub is not consulted here) ------------------ */

static void expect_lock_error(const char *text, const char *field)
{
    char path[512];
    ly_test_scratch_path("malformed.json", path, sizeof path);
    assert_true(write_file(path, text, strlen(text)));
    setenv("LIBREYOLO_HUB_LOCK", path, 1);
    ly_hub_status hub;
    assert_int_equal(ly_hub_status_get(&hub), LY_OK);
    if (!strstr(hub.lock_error, field))
        fail_msg("lock error '%s' does not name '%s'", hub.lock_error, field);
    assert_int_equal(hub.count, 0);
    ly_hub_status_free(&hub);
    unsetenv("LIBREYOLO_HUB_LOCK");
}

static void test_malformed_lock_names_the_field(void **state)
{
    (void)state;
    unsetenv("LIBREYOLO_HUB_URL");
    const char *sha = "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";
    char text[1024];
    expect_lock_error("{\"format\": 1, \"providers\": [", "not valid JSON");
    expect_lock_error("{\"providers\": []}", "format");
    expect_lock_error("{\"format\": 2, \"providers\": []}", "format");
    expect_lock_error("{\"format\": 1}", "providers");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"slot\": \"x\"}]}", "providers[0].name");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"name\": \"Upper\"}]}",
                      "providers[0].name");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"../x\"}]}",
                      "providers[0].revision");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"r\", "
                      "\"slot\": 3}]}",
                      "providers[0].slot");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"r\", "
                      "\"slot\": \"s\", \"variants\": {}}]}",
                      "providers[0].variants");
    snprintf(text, sizeof text,
             "{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"r\", \"slot\": "
             "\"s\", \"variants\": {\"cpu-x86_64-linux\": {\"file\": \"a/b.so\", \"sha256\": "
             "%s}}}]}",
             sha);
    expect_lock_error(text, "providers[0].variants.cpu-x86_64-linux.file");
    expect_lock_error("{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"r\", "
                      "\"slot\": \"s\", \"variants\": {\"cpu-x86_64-linux\": {\"file\": "
                      "\"a.so\", \"sha256\": \"abc\"}}}]}",
                      "providers[0].variants.cpu-x86_64-linux.sha256");
    snprintf(text, sizeof text,
             "{\"format\": 1, \"providers\": [{\"name\": \"a\", \"revision\": \"r\", \"slot\": "
             "[\"s\"], \"variants\": {\"cpu-x86_64-linux\": {\"file\": \"a.so\", \"sha256\": "
             "%s}}}, {\"name\": \"a\", \"revision\": \"r\", \"slot\": \"s\", \"variants\": "
             "{\"cpu-x86_64-linux\": {\"file\": \"a.so\", \"sha256\": %s}}}]}",
             sha, sha);
    expect_lock_error(text, "providers[1].name");
}

/* The in-tree lock parses, and a machine picks its best variant. */
static void test_lock_and_variants(void **state)
{
    (void)state;
    SKIP_WITHOUT_ARCH();
    unsetenv("LIBREYOLO_HUB_URL");
    unsetenv("LIBREYOLO_HUB_LOCK");
    ly_hub_status hub;
    assert_int_equal(ly_hub_status_get(&hub), LY_OK);
    if (hub.lock_error[0]) fail_msg("in-tree lock: %s", hub.lock_error);
    assert_true(hub.count >= 1);
    ly_hub_status_free(&hub);

    char path[512], text[2048];
    ly_test_scratch_path("variants.json", path, sizeof path);
    snprintf(text, sizeof text,
             "{\"format\": 1, \"providers\": [{\"name\": \"v\", \"revision\": \"r\", \"slot\": "
             "\"s\", \"variants\": {\"cpu-" ARCH "-linux\": {\"file\": \"a.so\", \"sha256\": "
             "\"%s\"}, \"cpu-avx2-" ARCH "-linux\": {\"file\": \"b.so\", \"sha256\": \"%s\"}, "
             "\"cuda999-" ARCH "-linux\": {\"file\": \"c.so\", \"sha256\": \"%s\"}, "
             "\"cpu-sparc-linux\": {\"file\": \"d.so\", \"sha256\": \"%s\"}}}, "
             "{\"name\": \"w\", \"revision\": \"r\", \"slot\": \"s\", \"variants\": "
             "{\"cpu-sparc-linux\": {\"file\": \"d.so\", \"sha256\": \"%s\"}}}]}",
             example_sha, example_sha, example_sha, example_sha, example_sha);
    assert_true(write_file(path, text, strlen(text)));
    setenv("LIBREYOLO_HUB_LOCK", path, 1);
    assert_int_equal(ly_hub_status_get(&hub), LY_OK);
    if (hub.lock_error[0]) fail_msg("%s", hub.lock_error);
    assert_int_equal(hub.count, 2);
    ly_cpu_features cpu;
    ly_cpu_features_get(&cpu);
    bool avx2 = strcmp(ARCH, "x86_64") == 0 && cpu.avx2 && cpu.fma;
    assert_string_equal(hub.entries[0].variant, avx2 ? "cpu-avx2-" ARCH "-linux" : VARIANT);
    assert_string_equal(hub.entries[0].state, "pinned");
    assert_string_equal(hub.entries[1].state, "unavailable");
    assert_non_null(strstr(hub.entries[1].why, "cpu-sparc-linux"));
    ly_hub_status_free(&hub);
    unsetenv("LIBREYOLO_HUB_LOCK");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0) return child_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_and_load),
        cmocka_unit_test(test_cache_hit_makes_no_request),
        cmocka_unit_test(test_cli_reports_hub),
        cmocka_unit_test(test_corrupt_cache_is_fetched_again),
        cmocka_unit_test(test_pin_mismatch_is_refused),
        cmocka_unit_test(test_server_down),
        cmocka_unit_test(test_missing_artifact),
        cmocka_unit_test(test_library_that_does_not_load),
        cmocka_unit_test(test_library_that_fails_at_run_time),
        cmocka_unit_test(test_registration_outside_the_pin),
        cmocka_unit_test(test_no_request_when_off),
        cmocka_unit_test(test_no_request_without_curl),
        cmocka_unit_test(test_malformed_lock_names_the_field),
        cmocka_unit_test(test_lock_and_variants),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
