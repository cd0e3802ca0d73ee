/* SPDX-License-Identifier: MIT */
/*
 * LibreYOLO's argument styles, read into ours before a command parses them.
 *
 * LibreYOLO (a Typer app with its own key=value layer) takes `key=value`,
 * `--key value` and `--key=value`, booleans as `key=true|false|1|0` or a bare
 * `save`, and underscores in keys (`max_det=5`). Each command here parses
 * `--key value` / `--key=value`; ly_cli_normalize_args rewrites the rest into
 * that form. A command's options are read from its own --help text, so that
 * the text a user reads and what the command accepts cannot drift apart.
 */
#ifndef LY_CLI_ARGS_H
#define LY_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum ly_cli_flag_kind {
    LY_CLI_FLAG_BOOL,     /* --json */
    LY_CLI_FLAG_VALUE,    /* --conf X */
    LY_CLI_FLAG_OPTIONAL, /* --save [DIR]: a boolean that may take a value */
} ly_cli_flag_kind;

typedef struct ly_cli_flag {
    char name[48]; /* without the leading "--" */
    ly_cli_flag_kind kind;
} ly_cli_flag;

#define LY_CLI_MAX_FLAGS 96
typedef struct ly_cli_flags {
    ly_cli_flag items[LY_CLI_MAX_FLAGS];
    size_t n;
} ly_cli_flags;

/* The options `usage` prints ("--name X" takes a value, "--name [X]" may,
 * anything else is a boolean). */
void ly_cli_flags_from_usage(void (*usage)(FILE *to), ly_cli_flags *out);
const ly_cli_flag *ly_cli_flag_find(const ly_cli_flags *flags, const char *name);

/* A new argv (the strings are argv's or allocated; free with
 * ly_cli_args_free) in which every option is "--name" or "--name=value".
 * NULL after printing a usage error (exit code 2 in *code). */
char **ly_cli_normalize_args(const char *command, int argc, char **argv, const ly_cli_flags *flags,
                             int *out_argc, int *code);
void ly_cli_args_free(char **args, int argc, char **original);


/* The command being run and its options, for "did you mean" (set by main). */
void ly_cli_set_current_flags(const ly_cli_flags *flags);

/* "unexpected argument 'X'", with "did you mean '--Y'?" when an option of the
 * current command is close; returns 2. */
int ly_cli_unknown_argument(const char *command, const char *arg);

#endif
