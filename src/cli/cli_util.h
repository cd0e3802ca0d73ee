/* Helpers every subcommand shares: option parsing, usage errors, timing, progress. */
#ifndef LY_CLI_CLI_UTIL_H
#define LY_CLI_CLI_UTIL_H

#include "libreyolo/libreyolo.h"

#include <stdbool.h>

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

#endif
