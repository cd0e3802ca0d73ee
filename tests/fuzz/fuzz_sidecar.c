/* SPDX-License-Identifier: MIT */
/* The .pte.json sidecar, read as ly_model_load reads it beside a program
 * (the program here is empty: every sidecar check runs before it is read). */
#include "fuzz.h"

#include "libreyolo/model.h"

#include <stdio.h>
#include <string.h>

static char program[600];

void ly_fuzz_harness_init(void)
{
    const char *p = ly_fuzz_file("fuzz.pte", (const uint8_t *)"", 0);
    if (p) snprintf(program, sizeof program, "%s", p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!program[0] || !ly_fuzz_file("fuzz.pte.json", data, size)) return 0;
    ly_model *m = NULL;
    if (ly_model_load(program, NULL, &m) == LY_OK) ly_model_free(m);
    return 0;
}
