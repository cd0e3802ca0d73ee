/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harnesses for every parser of untrusted bytes (tests/fuzz/fuzz_<target>.c, one
 * target each). Built two ways: with clang's -fsanitize=fuzzer for `make fuzz`
 * (LIBREYOLO_FUZZ=ON), and linked with replay.c into a plain program that
 * `make test` runs over the committed corpus and regression inputs, so every
 * input that ever mattered is replayed in every build, the sanitizer one too.
 *
 * A harness must only return 0: a crash, a leak, a sanitizer report or an
 * abort is the finding.
 */
#ifndef LY_TESTS_FUZZ_H
#define LY_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* `data` as the file `name` in a private directory (tmpfs when there is one,
 * removed at exit): for the readers that take a path. Returns the path (a
 * static buffer) or NULL when the file cannot be written. */
const char *ly_fuzz_file(const char *name, const uint8_t *data, size_t size);

/* LLVMFuzzerInitialize (fuzz_util.c) gives every harness quiet logging,
 * images bounded to half a megapixel (an input that decodes costs
 * milliseconds, not a gigabyte) and no network, then calls this, which a
 * harness may define for settings of its own. */
void ly_fuzz_harness_init(void);

/* Checkpoint bytes as a file named `name` (its extension picks the reader):
 * ly_checkpoint_open_buffer, then the whole ly_model_load. */
void ly_fuzz_checkpoint_bytes(const uint8_t *data, size_t size, const char *name);

#endif
