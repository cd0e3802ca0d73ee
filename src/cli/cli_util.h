/* Helpers every subcommand shares: option parsing, usage errors, timing, progress. */
#ifndef LY_CLI_CLI_UTIL_H
#define LY_CLI_CLI_UTIL_H

#include "libreyolo/libreyolo.h"

#include <stdbool.h>
#include <stddef.h>

/* Prints "libreyolo <command>: <message>" and a pointer to --help on stderr;
 * returns 2, the usage-error exit code. */
int ly_cli_usage_error(const char *command, const char *fmt, ...) LY_PRINTF(2, 3);

/* The value of "--opt VALUE" or "--opt=VALUE" at argv[*i] (advancing *i past a
 * separate value); NULL if argv[*i] is not `opt`, or, with *missing set, if the
 * value is absent. */
const char *ly_cli_option_value(int argc, char **argv, int *i, const char *opt, bool *missing);

/* A whole decimal integer in [lo, hi]. */
bool ly_cli_parse_int(const char *text, long lo, long hi, int *value);

/* Monotonic seconds. */
double ly_cli_now_s(void);

/* A one-line progress message on stderr, overwritten by the next, shown only when
 * stderr is a terminal; ly_cli_progress_end clears the line. */
void ly_cli_progress(const char *fmt, ...) LY_PRINTF(1, 2);
void ly_cli_progress_end(void);

/* ---- Subprocesses: the benchmark peers in bench/peers --------------------------- */

/* What a child wrote (each stream kept up to LY_CLI_MAX_CAPTURE bytes, NUL-terminated;
 * NULL when it wrote nothing) and how it ended. */
#define LY_CLI_MAX_CAPTURE (1 << 20)
typedef struct ly_cli_captured {
    char *out, *err;
    size_t out_len, err_len;
    int exit_code; /* -1: killed, timed out or did not exit normally */
    bool timed_out;
} ly_cli_captured;

/* Runs argv (argv[0] searched on PATH) with stdin from /dev/null, collecting stdout
 * and stderr, killing it after timeout_s. Returns 0 (then free *c with
 * ly_cli_captured_free), or the errno that kept it from starting. */
int ly_cli_run_capture(char *const argv[], int timeout_s, ly_cli_captured *c);
void ly_cli_captured_free(ly_cli_captured *c);

/* The last non-empty line of text (a child's stderr), for a one-line reason; "" if none. */
void ly_cli_last_line(const char *text, char *out, size_t size);

/* A regular file exists at path. */
bool ly_cli_file_exists(const char *path);

/* <dir>/<name> for the first of $LIBREYOLO_BENCH_PEERS, ./bench/peers and
 * <exe>/../bench/peers that holds it. */
bool ly_cli_find_peer_script(const char *name, char *out, size_t size);

/* The Python that runs `-c code` with exit status 0 within timeout_s: $LIBREYOLO_PYTHON
 * alone when set, else the first of python3, /usr/bin/python3. NULL when none does;
 * *tried then names what was tried, for the message. */
const char *ly_cli_find_python(const char *code, int timeout_s, const char **tried);

#endif
