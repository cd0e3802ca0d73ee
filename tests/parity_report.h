/* SPDX-License-Identifier: MIT */
/* The parity harness's results as the parity tests read them: every failing
 * (slot, implementation) with its verdict, first error and the mismatches it
 * shows (header-only). Include after <cmocka.h>. */
#ifndef LY_TESTS_PARITY_REPORT_H
#define LY_TESTS_PARITY_REPORT_H

#include "kernels/check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parity_report {
    char *text;
    size_t len, cap;
    int results, failed, ran;
} parity_report;

static inline void parity_report_printf(parity_report *r, const char *fmt, ...) LY_PRINTF(2, 3);
static inline void parity_report_printf(parity_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) return;
    if (r->len + (size_t)need + 1 > r->cap) {
        size_t cap = (r->len + (size_t)need + 1) * 2;
        char *grown = realloc(r->text, cap);
        if (!grown) return;
        r->text = grown;
        r->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(r->text + r->len, r->cap - r->len, fmt, ap);
    va_end(ap);
    r->len += (size_t)need;
}

/* A ly_check_report_fn; `user` is a parity_report. */
static inline void parity_collect(const ly_check_result *res, void *user)
{
    parity_report *r = user;
    char verdict[192];
    r->results++;
    if (!res->skipped && res->cases > 0) r->ran++;
    if (!ly_check_result_failed(res)) return;
    r->failed++;
    ly_check_verdict(res, verdict, sizeof verdict);
    parity_report_printf(r,
                         "%s / %s: %s: %" PRId64 " cases, %" PRId64 " mismatches, %" PRId64
                         " errors, max |diff| %g\n",
                         res->slot, res->impl, verdict, res->cases, res->mismatches, res->errors,
                         res->max_abs_diff);
    if (res->errors) parity_report_printf(r, "  first error: %s\n", res->first_error);
    for (int i = 0; i < res->n_shown; i++) {
        const ly_check_mismatch *m = &res->shown[i];
        parity_report_printf(r,
                             "  case '%s'%s%s%s out[%d] %s index %" PRId64
                             ": %s: reference %.9g (0x%08" PRIx32 ") vs %.9g (0x%08" PRIx32 ")\n",
                             m->case_name, m->run[0] ? " (" : "", m->run, m->run[0] ? ")" : "",
                             m->output, m->shape, m->index, m->inputs, (double)m->reference,
                             m->reference_bits, (double)m->impl, m->impl_bits);
    }
}

static inline void parity_report_free(parity_report *r)
{
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* Runs the harness as `options` say and fails the test on anything it
 * reports (printed in full: cmocka's own printing truncates long messages);
 * returns how many (slot, implementation) results ran a case. */
static inline int parity_expect_clean(const ly_check_options *options, const char *what)
{
    parity_report r = {0};
    ly_status st = ly_check_parity_ex(options, parity_collect, &r);
    if (st != LY_OK)
        fail_msg("%s: the harness stopped: %s: %s", what, ly_status_name(st), ly_last_error());
    int ran = r.ran;
    if (r.failed) {
        fprintf(stderr, "%s", r.text ? r.text : "");
        fflush(stderr);
        parity_report_free(&r);
        fail_msg("%s: parity mismatches, see above", what);
    }
    parity_report_free(&r);
    return ran;
}

#endif
