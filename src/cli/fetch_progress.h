/* SPDX-License-Identifier: MIT */
/* The progress line of a model fetch (`fetch`, and `predict` on first use). */
#ifndef LY_CLI_FETCH_PROGRESS_H
#define LY_CLI_FETCH_PROGRESS_H

#include "libreyolo/fetch.h"

/* A ly_progress_fn drawing "nanodet: downloading ...  12.3 of 137.8 MiB (9%)"
 * on stderr when it is a terminal (ly_cli_progress); `user` is unused. */
void ly_cli_fetch_progress(const char *what, uint64_t done, uint64_t total, void *user);

/* Fetch `name` unless cached, with the progress line; prints the error and
 * returns 1 on failure, 0 with the folder in `dir`. */
int ly_cli_fetch_quietly(const char *command, const char *name, char *dir, size_t dir_size);

#endif
