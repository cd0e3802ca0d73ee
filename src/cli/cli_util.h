/* SPDX-License-Identifier: MIT */
/* Helpers every subcommand shares: option parsing, usage errors, timing, progress. */
#ifndef LY_CLI_CLI_UTIL_H
#define LY_CLI_CLI_UTIL_H

#include "libreyolo/libreyolo.h"
#include "libreyolo/model.h"

#include <stdbool.h>
#include <stddef.h>

/* Exit codes, as LibreYOLO's cli/errors.py maps its error codes. */
enum {
    LY_EXIT_OK = 0,
    LY_EXIT_FAILURE = 1,       /* anything without a code of its own */
    LY_EXIT_USAGE = 2,         /* config_*: unknown key, wrong type or range, conflict */
    LY_EXIT_SOURCE = 3,        /* source_not_found, data_invalid */
    LY_EXIT_MODEL = 4,         /* model_not_found, model_load_failed */
    LY_EXIT_EXPORT_FORMAT = 5, /* export_format_unknown, format_precision_unsupported */
};

/* Under --json, failures are LibreYOLO's error document on stdout
 * ({"schema_version": 1, "error", "message", "suggestion"}) instead of text on
 * stderr. Set by main when the arguments hold --json. */
void ly_cli_set_json_errors(bool on);
bool ly_cli_json_errors(void);

/* A failure: "libreyolo <command>: <message>" (and "  suggestion: ..." when
 * there is one) on stderr, or the error document; returns exit_code.
 * `error` is LibreYOLO's code ("source_not_found", "model_load_failed", ...). */
int ly_cli_fail(const char *command, int exit_code, const char *error, const char *suggestion,
                const char *fmt, ...) LY_PRINTF(5, 6);

/* ly_model_load failed with `status`: model_not_found or model_load_failed, exit 4. */
int ly_cli_model_failed(const char *command, ly_status status);

/* A usage error (exit 2) with LibreYOLO's code, and a pointer to --help. */
int ly_cli_usage_error_code(const char *command, const char *error, const char *fmt, ...)
    LY_PRINTF(3, 4);
/* The same as config_type_error. */
int ly_cli_usage_error(const char *command, const char *fmt, ...) LY_PRINTF(2, 3);

/* The task word given before the command (`libreyolo detect predict ...`),
 * or NULL; a command that loads a model checks it against the model's task. */
void ly_cli_set_task_word(const char *task);
/* 0, or the usage error for a task word that is not the model's task. */
int ly_cli_check_task(const char *command, const char *model_task);
/* --fused-attn on|off (LibreYOLO's set_fused_attention(model, enabled)):
 * *setting 1 or 0; a usage error's exit code otherwise. */
int ly_cli_parse_fused(const char *command, const char *value, int *setting);
/* Apply a parsed setting (-1: leave the model's default); 0 or an exit code. */
int ly_cli_apply_fused(const char *command, ly_model *model, int setting);

/* --quiet (set by main): no progress lines, no warnings. */
void ly_cli_set_quiet(bool quiet);
bool ly_cli_quiet(void);

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
