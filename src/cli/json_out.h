/* SPDX-License-Identifier: MIT */
/* JSON output of the command's --json modes. */
#ifndef LY_CLI_JSON_OUT_H
#define LY_CLI_JSON_OUT_H

#include <stdio.h>

/* A JSON string literal (escaped); null for NULL. */
void ly_json_string(FILE *to, const char *s);
/* A number with 9 significant digits (round-trips a float); null when not finite,
 * which JSON cannot represent. */
void ly_json_number(FILE *to, double v);

/* A float32 in the fewest digits (6 to 9) that read back as the same float. */
void ly_json_float32(FILE *to, float v);

#endif
