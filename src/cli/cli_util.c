/* SPDX-License-Identifier: MIT */
#include "cli/cli_util.h"

#include "cli/json_out.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static bool json_errors, quiet;
static const char *task_word;

void ly_cli_set_json_errors(bool on)
{
    json_errors = on;
}

bool ly_cli_json_errors(void)
{
    return json_errors;
}

void ly_cli_set_quiet(bool on)
{
    quiet = on;
}

bool ly_cli_quiet(void)
{
    return quiet;
}

static void report(const char *command, const char *error, const char *suggestion, const char *fmt,
                   va_list ap)
{
    char message[2048];
    vsnprintf(message, sizeof message, fmt, ap);
    if (json_errors) {
        fputs("{\"schema_version\": 1, \"error\": ", stdout);
        ly_json_string(stdout, error);
        fputs(", \"message\": ", stdout);
        ly_json_string(stdout, message);
        fputs(", \"suggestion\": ", stdout);
        ly_json_string(stdout, suggestion);
        fputs("}\n", stdout);
        fflush(stdout);
        return;
    }
    fprintf(stderr, "libreyolo %s: %s\n", command, message);
    if (suggestion) fprintf(stderr, "  suggestion: %s\n", suggestion);
}

int ly_cli_fail(const char *command, int exit_code, const char *error, const char *suggestion,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(command, error, suggestion, fmt, ap);
    va_end(ap);
    return exit_code;
}

int ly_cli_model_failed(const char *command, ly_status status)
{
    return ly_cli_fail(command, LY_EXIT_MODEL,
                       status == LY_E_NOT_FOUND ? "model_not_found" : "model_load_failed", NULL,
                       "%s", ly_last_error());
}

static int usage_error(const char *command, const char *error, const char *fmt, va_list ap)
{
    char help[128];
    snprintf(help, sizeof help, "see libreyolo %s --help", command);
    if (json_errors) {
        report(command, error, help, fmt, ap);
    } else {
        report(command, error, NULL, fmt, ap);
        fprintf(stderr, "(%s)\n", help);
    }
    return LY_EXIT_USAGE;
}

int ly_cli_usage_error_code(const char *command, const char *error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = usage_error(command, error, fmt, ap);
    va_end(ap);
    return code;
}

int ly_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = usage_error(command, "config_type_error", fmt, ap);
    va_end(ap);
    return code;
}

void ly_cli_set_task_word(const char *task)
{
    task_word = task;
}

int ly_cli_check_task(const char *command, const char *model_task)
{
    if (!task_word || !model_task || strcmp(task_word, model_task) == 0) return 0;
    return ly_cli_usage_error_code(command, "config_conflict",
                                   "`libreyolo %s %s`: the model's task is %s, not %s", task_word,
                                   command, model_task, task_word);
}

int ly_cli_parse_fused(const char *command, const char *value, int *setting)
{
    if (strcmp(value, "on") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
        *setting = 1;
    else if (strcmp(value, "off") == 0 || strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
        *setting = 0;
    else
        return ly_cli_usage_error_code(command, "config_range_error",
                                       "--fused-attn '%s': expected on or off", value);
    return 0;
}

int ly_cli_apply_fused(const char *command, ly_model *model, int setting)
{
    if (setting < 0) return 0;
    int modules = 0;
    if (ly_model_set_fused_attention(model, setting == 1, &modules) != LY_OK)
        return ly_cli_fail(command, LY_EXIT_MODEL, "model_invalid", NULL, "%s", ly_last_error());
    if (modules == 0)
        fprintf(stderr,
                "libreyolo %s: --fused-attn: this model has no attention module with "
                "the flag; nothing changed\n",
                command);
    return 0;
}

const char *ly_cli_option_value(int argc, char **argv, int *i, const char *opt, bool *missing)
{
    size_t n = strlen(opt);
    const char *arg = argv[*i];
    if (strncmp(arg, opt, n) != 0) return NULL;
    if (arg[n] == '=') return arg + n + 1;
    if (arg[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

bool ly_cli_parse_int(const char *text, long lo, long hi, int *value)
{
    if (!text) return false;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return false;
    *value = (int)v;
    return true;
}

double ly_cli_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool progress_enabled(void)
{
    static int tty = -1; /* decided once: stderr does not change under us */
    if (tty < 0) tty = isatty(STDERR_FILENO) ? 1 : 0;
    return tty == 1 && !quiet && !json_errors;
}

void ly_cli_progress(const char *fmt, ...)
{
    if (!progress_enabled()) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

void ly_cli_progress_end(void)
{
    if (!progress_enabled()) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

static void append_capped(char **buf, size_t *len, const char *data, size_t n)
{
    if (*len + n > LY_CLI_MAX_CAPTURE) n = LY_CLI_MAX_CAPTURE - *len;
    char *grown = realloc(*buf, *len + n + 1);
    if (!grown) return;
    memcpy(grown + *len, data, n);
    *len += n;
    grown[*len] = '\0';
    *buf = grown;
}

int ly_cli_run_capture(char *const argv[], int timeout_s, ly_cli_captured *c)
{
    memset(c, 0, sizeof *c);
    c->exit_code = -1;
    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0) return errno;
    if (pipe(err_pipe) != 0) {
        int e = errno;
        close(out_pipe[0]);
        close(out_pipe[1]);
        return e;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
    posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
    posix_spawn_file_actions_addclose(&fa, out_pipe[1]);
    posix_spawn_file_actions_addclose(&fa, err_pipe[1]);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (e != 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        return e;
    }
    struct pollfd fds[2] = {{.fd = out_pipe[0], .events = POLLIN},
                            {.fd = err_pipe[0], .events = POLLIN}};
    int open_fds = 2;
    double deadline = ly_cli_now_s() + timeout_s;
    char chunk[4096];
    while (open_fds > 0) {
        double left = deadline - ly_cli_now_s();
        if (left <= 0) {
            c->timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        int n = poll(fds, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            kill(pid, SIGKILL);
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
            if (got > 0) {
                if (i == 0)
                    append_capped(&c->out, &c->out_len, chunk, (size_t)got);
                else
                    append_capped(&c->err, &c->err_len, chunk, (size_t)got);
            } else if (got == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!c->timed_out && WIFEXITED(status)) c->exit_code = WEXITSTATUS(status);
    return 0;
}

void ly_cli_captured_free(ly_cli_captured *c)
{
    free(c->out);
    free(c->err);
    memset(c, 0, sizeof *c);
}

void ly_cli_last_line(const char *text, char *out, size_t size)
{
    out[0] = '\0';
    if (!text) return;
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    size_t n = (size_t)(end - start);
    if (n >= size) n = size - 1;
    memcpy(out, start, n);
    out[n] = '\0';
}

bool ly_cli_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool ly_cli_find_peer_script(const char *name, char *out, size_t size)
{
    /* next to the executable when it sits in <repo>/build/ */
    char exe_based[PATH_MAX + 32] = "";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(exe_based, sizeof exe_based, "%s/../bench/peers", exe);
    }
    const char *dirs[3] = {getenv("LIBREYOLO_BENCH_PEERS"), "bench/peers", exe_based};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i] || !*dirs[i]) continue;
        snprintf(out, size, "%s/%s", dirs[i], name);
        if (ly_cli_file_exists(out)) return true;
    }
    return false;
}

const char *ly_cli_find_python(const char *code, int timeout_s, const char **tried)
{
    const char *env_python = getenv("LIBREYOLO_PYTHON");
    const char *candidates[2] = {"python3", "/usr/bin/python3"};
    int n_candidates = 2;
    if (env_python && *env_python) {
        candidates[0] = env_python;
        n_candidates = 1;
    }
    for (int i = 0; i < n_candidates; i++) {
        char *probe[] = {(char *)candidates[i], "-c", (char *)code, NULL};
        ly_cli_captured c;
        if (ly_cli_run_capture(probe, timeout_s, &c) != 0) continue;
        bool ok = c.exit_code == 0;
        ly_cli_captured_free(&c);
        if (ok) return candidates[i];
    }
    if (tried) *tried = n_candidates == 1 ? candidates[0] : "python3, /usr/bin/python3";
    return NULL;
}
