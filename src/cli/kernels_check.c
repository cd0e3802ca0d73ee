/* SPDX-License-Identifier: MIT */
/* `libreyolo kernels check`: the parity harness (src/kernels/check.h) as a table. */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int threads_of(int requested)
{
    int n = 1;
    ly_thread_count(requested, &n);
    return n;
}

void ly_cli_usage_kernels_check(FILE *to)
{
    fputs(
        "usage: libreyolo kernels check [--slot S] [--impl NAME] [--case TEXT] [--threads N] [--full]\n"
        "                               [--json]\n"
        "\n"
        "Runs every implementation of every slot against the reference on shapes from real\n"
        "models, odd sizes, empty tensors and edge values (NaN, inf, -0, subnormals, rounding\n"
        "ties). Forward and unpack slots must be bit-identical, backward slots within 1e-6.\n"
        "  --slot S      only slot S\n"
        "  --impl NAME   only implementation NAME (\"reference\" checks it against itself)\n"
        "  --case TEXT   only the cases whose name contains TEXT (a reported case reruns alone:\n"
        "                its values are seeded from its name)\n"
        "  --threads N   threads per call (default: LIBREYOLO_THREADS, else every CPU)\n"
        "  --full        the full case set (every variant on large tensors, the largest shapes)\n"
        "  --json        one JSON object instead of the table\n"
        "Exit status: 0 all match, 1 a mismatch or failure, 2 usage error.\n",
        to);
}

typedef struct results {
    ly_check_result *items;
    size_t n, cap;
    bool out_of_memory;
} results;

static void collect(const ly_check_result *r, void *user)
{
    results *rs = user;
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 32;
        ly_check_result *grown = realloc(rs->items, cap * sizeof *grown);
        if (!grown) {
            rs->out_of_memory = true;
            return;
        }
        rs->items = grown;
        rs->cap = cap;
    }
    /* slot/impl point into the harness' memory: keep them only as long as needed. */
    ly_check_result *copy = &rs->items[rs->n++];
    *copy = *r;
    copy->slot = strdup(r->slot);
    copy->impl = strdup(r->impl);
    if (!copy->slot || !copy->impl) rs->out_of_memory = true;
}

static void results_free(results *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free((char *)rs->items[i].slot);
        free((char *)rs->items[i].impl);
    }
    free(rs->items);
}

/* ---- Progress (stderr, terminals only) ------------------------------------------ */

typedef struct progress {
    struct timespec last;
} progress;

static void on_progress(const char *slot, int64_t done, int64_t total, void *user)
{
    progress *p = user;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double since =
        (double)(now.tv_sec - p->last.tv_sec) + (double)(now.tv_nsec - p->last.tv_nsec) * 1e-9;
    if (done != total && since < 0.1) return;
    p->last = now;
    fprintf(stderr, "\r\033[K%s: case %" PRId64 "/%" PRId64, slot, done, total);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* ---- Output ---------------------------------------------------------------------- */

static void format_diff(double d, char *buf, size_t size)
{
    if (d == 0.0)
        snprintf(buf, size, "0");
    else
        snprintf(buf, size, "%.3g", d);
}

static void print_json(const results *rs, const ly_check_options *opt, int failed)
{
    printf("{\"size\": \"%s\", \"threads\": %d, \"failed\": %d, \"results\": [",
           opt->size == LY_CHECK_FULL ? "full" : "quick", threads_of(opt->threads), failed);
    for (size_t i = 0; i < rs->n; i++) {
        const ly_check_result *r = &rs->items[i];
        char verdict[192];
        printf("%s{\"slot\": ", i ? ", " : "");
        ly_json_string(stdout, r->slot);
        printf(", \"impl\": ");
        ly_json_string(stdout, r->impl);
        printf(", \"verdict\": ");
        ly_check_verdict(r, verdict, sizeof verdict);
        ly_json_string(stdout, verdict);
        printf(", \"failed\": %s, \"skipped\": %s", ly_check_result_failed(r) ? "true" : "false",
               r->skipped ? "true" : "false");
        if (r->skipped) {
            printf(", \"why_skipped\": ");
            ly_json_string(stdout, r->why_skipped);
            printf("}");
            continue;
        }
        printf(", \"exact\": %s, \"tolerance\": %g", r->exact ? "true" : "false", r->tolerance);
        printf(", \"cases\": %" PRId64 ", \"rejected\": %" PRId64 ", \"declined\": %" PRId64
               ", \"errors\": %" PRId64 ", \"elements\": %" PRId64 ", \"mismatches\": %" PRId64
               ", \"bit_differences\": %" PRId64 ", \"max_abs_diff\": ",
               r->cases, r->rejected, r->declined, r->errors, r->elements, r->mismatches,
               r->bit_differences);
        ly_json_number(stdout, r->max_abs_diff);
        if (r->errors) {
            printf(", \"first_error\": ");
            ly_json_string(stdout, r->first_error);
        }
        printf(", \"mismatch_examples\": [");
        for (int k = 0; k < r->n_shown; k++) {
            const ly_check_mismatch *m = &r->shown[k];
            char bits[16];
            printf("%s{\"case\": ", k ? ", " : "");
            ly_json_string(stdout, m->case_name);
            if (m->run[0]) {
                printf(", \"run\": ");
                ly_json_string(stdout, m->run);
            }
            printf(", \"output\": %d, \"shape\": ", m->output);
            ly_json_string(stdout, m->shape);
            printf(", \"index\": %" PRId64 ", \"inputs\": ", m->index);
            ly_json_string(stdout, m->inputs);
            printf(", \"reference\": ");
            ly_json_number(stdout, m->reference);
            snprintf(bits, sizeof bits, "0x%08" PRIx32, m->reference_bits);
            printf(", \"reference_bits\": ");
            ly_json_string(stdout, bits);
            printf(", \"impl\": ");
            ly_json_number(stdout, m->impl);
            snprintf(bits, sizeof bits, "0x%08" PRIx32, m->impl_bits);
            printf(", \"impl_bits\": ");
            ly_json_string(stdout, bits);
            printf("}");
        }
        printf("]}");
    }
    printf("]}\n");
}

static void print_table(const results *rs, const ly_check_options *opt)
{
    int slot_w = 4, impl_w = 4;
    int64_t rejected = 0;
    for (size_t i = 0; i < rs->n; i++) {
        int n = (int)strlen(rs->items[i].slot);
        if (n > slot_w) slot_w = n;
        n = (int)strlen(rs->items[i].impl);
        if (n > impl_w) impl_w = n;
    }
    printf("parity against the reference: %s case set, %d thread(s) per call\n\n",
           opt->size == LY_CHECK_FULL ? "full" : "quick", threads_of(opt->threads));
    printf("%-*s  %-*s  %7s  %11s  %10s  %10s  %s\n", slot_w, "slot", impl_w, "impl", "cases",
           "elements", "mismatches", "max |diff|", "verdict");
    for (size_t i = 0; i < rs->n; i++) {
        const ly_check_result *r = &rs->items[i];
        char verdict[192], diff[32];
        ly_check_verdict(r, verdict, sizeof verdict);
        if (r->skipped) {
            printf("%-*s  %-*s  %7s  %11s  %10s  %10s  %s\n", slot_w, r->slot, impl_w, r->impl, "-",
                   "-", "-", "-", verdict);
            continue;
        }
        if (r->rejected > rejected) rejected = r->rejected;
        format_diff(r->max_abs_diff, diff, sizeof diff);
        printf("%-*s  %-*s  %7" PRId64 "  %11" PRId64 "  %10" PRId64 "  %10s  %s\n", slot_w,
               r->slot, impl_w, r->impl, r->cases, r->elements, r->mismatches, diff, verdict);
    }
    bool details = false;
    for (size_t i = 0; i < rs->n; i++) {
        const ly_check_result *r = &rs->items[i];
        if (!ly_check_result_failed(r)) continue;
        if (!details) printf("\nDetails:\n");
        details = true;
        printf("%s / %s:\n", r->slot, r->impl);
        if (r->errors)
            printf("  %" PRId64 " failed run(s); first: %s\n", r->errors, r->first_error);
        for (int k = 0; k < r->n_shown; k++) {
            const ly_check_mismatch *m = &r->shown[k];
            printf("  case '%s'%s%s%s: out[%d] %s, index %" PRId64 ": %s\n"
                   "    reference %.9g (0x%08" PRIx32 ")  impl %.9g (0x%08" PRIx32 ")\n",
                   m->case_name, m->run[0] ? " (" : "", m->run, m->run[0] ? ")" : "", m->output,
                   m->shape, m->index, m->inputs, (double)m->reference, m->reference_bits,
                   (double)m->impl, m->impl_bits);
        }
        if (r->mismatches > r->n_shown)
            printf("  ... and %" PRId64 " more mismatching element(s)\n",
                   r->mismatches - r->n_shown);
    }
    if (rejected > 0)
        printf("\n(cases the slot's validator rejects are generated too and counted, not run: up "
               "to %" PRId64 " per slot)\n",
               rejected);
}

int ly_cli_kernels_check(int argc, char **argv)
{
    ly_check_options opt = {.size = LY_CHECK_QUICK};
    bool json = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ly_cli_usage_kernels_check(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--full") == 0) {
            opt.size = LY_CHECK_FULL;
        } else if (strcmp(a, "--slot") == 0 && has_value) {
            opt.slot = argv[++i];
        } else if (strcmp(a, "--impl") == 0 && has_value) {
            opt.impl = argv[++i];
        } else if (strcmp(a, "--case") == 0 && has_value) {
            opt.cases = argv[++i];
        } else if (strcmp(a, "--threads") == 0 && has_value) {
            if (!ly_cli_parse_int(argv[++i], 0, 1024, &opt.threads)) {
                fprintf(stderr,
                        "libreyolo kernels check: --threads: '%s' is not a count in "
                        "[0, 1024]\n",
                        argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "libreyolo kernels check: unknown or incomplete argument '%s'\n", a);
            ly_cli_usage_kernels_check(stderr);
            return 2;
        }
    }
    progress prog = {{0, 0}};
    if (isatty(STDERR_FILENO)) {
        opt.progress = on_progress;
        opt.progress_user = &prog;
    }
    results rs = {0};
    ly_status st = ly_check_parity_ex(&opt, collect, &rs);
    if (st != LY_OK || rs.out_of_memory) {
        fprintf(stderr, "libreyolo kernels check: %s\n",
                st != LY_OK ? ly_last_error() : "out of memory");
        results_free(&rs);
        return st == LY_E_NOT_FOUND || st == LY_E_INVALID_ARGUMENT ? 2 : 1;
    }
    int failed = 0, checked = 0;
    for (size_t i = 0; i < rs.n; i++) {
        if (ly_check_result_failed(&rs.items[i])) failed++;
        if (!rs.items[i].skipped) checked++;
    }
    if (json) {
        print_json(&rs, &opt, failed);
    } else if (rs.n == 0) {
        const char *sel = getenv("LIBREYOLO_KERNELS");
        if (!sel || !*sel) sel = getenv("LIBREYOLO_QUANT_KERNELS");
        printf(
            "no implementation other than the reference is registered%s; nothing to check%s%s%s\n",
            opt.slot ? " for this slot" : "", sel && *sel ? " (the selection in force is '" : "",
            sel && *sel ? sel : "",
            sel && *sel ? "': off/reference does not load accelerated providers)" : "");
    } else {
        print_table(&rs, &opt);
        printf("\n%d implementation(s) checked, %d failed\n", checked, failed);
    }
    results_free(&rs);
    return failed ? 1 : 0;
}
