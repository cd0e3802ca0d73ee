#include "cli/cli_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ly_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "libreyolo %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see libreyolo %s --help)\n", command);
    va_end(ap);
    return 2;
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
    return tty == 1;
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
