/* SPDX-License-Identifier: MIT */
/* `libreyolo kernels run`: one slot on .npy files, so anyone can compare an
 * implementation with their own reference. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ly_cli_usage_kernels_run(FILE *to)
{
    fputs("usage: libreyolo kernels run SLOT [--impl NAME] --in A.npy [--in B.npy ...]\n"
          "                             [--arg KEY=VALUE ...] [--threads N]\n"
          "                             --out Y.npy [--out Z.npy]\n"
          "\n"
          "Runs slot SLOT on the inputs, in the order of the slot's contract, and writes\n"
          "each output. Without --impl the call is dispatched as the library would;\n"
          "with it, only implementation NAME runs (no fallback).\n"
          "\n"
          "  --in PATH        a .npy input (C order, little-endian); the word `none`\n"
          "                   leaves an optional operand out (a file named none: ./none)\n"
          "  --arg KEY=VALUE  a parameter of the slot by its field name (libreyolo/ops.h), e.g.\n"
          "                   axis=1, bits=4, stride=2,2 (pairs as two numbers), alpha=0.1\n"
          "  --threads N      worker threads (default: LIBREYOLO_THREADS, else all CPUs)\n"
          "  --out PATH       where to write an output (.npy, written atomically)\n"
          "\n"
          "Each slot's operands, in order, are listed with its family of ops in\n"
          "include/libreyolo/ (quant.h, nn.h, msda.h, sdpa.h).\n",
          to);
}

static int fail(void)
{
    fprintf(stderr, "libreyolo: %s\n", ly_last_error());
    return 1;
}

static int fail_status(void)
{
    return fail();
}

static bool parse_int64(const char *text, int64_t *value)
{
    if (!text || !*text) return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *value = (int64_t)v;
    return true;
}

typedef struct run_args {
    const char *slot;
    const char *impl;
    const char *in_paths[LY_KERNEL_MAX_INPUTS];
    int n_in;
    const char *out_paths[LY_KERNEL_MAX_OUTPUTS];
    int n_out;
    int threads;
    const char *args[32]; /* --arg KEY=VALUE, applied once the slot is known */
    int n_args;
} run_args;

/* One field's comma-separated values. */
static bool parse_values(const ly_param_field *f, const char *text, void *field)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL, *item = strtok_r(buf, ",", &save);
    for (int k = 0; k < f->count; k++) {
        if (!item) return false;
        if (f->type == LY_PARAM_INT) {
            int64_t v;
            if (!parse_int64(item, &v)) return false;
            ((int64_t *)field)[k] = v;
        } else {
            char *end;
            errno = 0;
            double v = strtod(item, &end);
            if (errno != 0 || *end != '\0') return false;
            ((double *)field)[k] = v;
        }
        item = strtok_r(NULL, ",", &save);
    }
    return item == NULL;
}

/* Every --arg into `params` (the op's struct, starting from its defaults). */
static int set_params(const run_args *a, ly_op op, void *params)
{
    const ly_param_field *fields;
    size_t n_fields, size;
    const void *defaults;
    if (ly_op_params(op, &fields, &n_fields, &size, &defaults) != LY_OK) return fail_status();
    memcpy(params, defaults, size);
    for (int i = 0; i < a->n_args; i++) {
        const char *assignment = a->args[i], *eq = strchr(assignment, '=');
        if (!eq)
            return ly_cli_usage_error("kernels run", "--arg '%s': expected KEY=VALUE", assignment);
        int key_len = (int)(eq - assignment);
        const ly_param_field *f = NULL;
        for (size_t k = 0; k < n_fields && !f; k++)
            if ((int)strlen(fields[k].name) == key_len &&
                memcmp(fields[k].name, assignment, (size_t)key_len) == 0)
                f = &fields[k];
        if (!f) {
            char known[256] = "";
            for (size_t k = 0; k < n_fields; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
                         fields[k].name);
            return ly_cli_usage_error(
                "kernels run", "--arg '%s': slot %s has no parameter '%.*s' (%s%s)", assignment,
                a->slot, key_len, assignment, n_fields ? "its parameters: " : "it has none", known);
        }
        if (!parse_values(f, eq + 1, (char *)params + f->offset))
            return ly_cli_usage_error("kernels run", "--arg '%s': expected %d %s value%s",
                                      assignment, f->count,
                                      f->type == LY_PARAM_INT ? "integer" : "number",
                                      f->count == 1 ? "" : "s (comma-separated)");
    }
    return 0;
}

static int parse_args(int argc, char **argv, run_args *a)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_kernels_run(stdout);
            return -1;
        }
        if ((v = ly_cli_option_value(argc, argv, &i, "--impl", &missing))) {
            a->impl = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--in", &missing))) {
            if (a->n_in == LY_KERNEL_MAX_INPUTS)
                return ly_cli_usage_error("kernels run", "at most %d --in", LY_KERNEL_MAX_INPUTS);
            a->in_paths[a->n_in++] = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--out", &missing))) {
            if (a->n_out == LY_KERNEL_MAX_OUTPUTS)
                return ly_cli_usage_error("kernels run", "at most %d --out", LY_KERNEL_MAX_OUTPUTS);
            a->out_paths[a->n_out++] = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--arg", &missing))) {
            if (a->n_args == (int)(sizeof a->args / sizeof a->args[0]))
                return ly_cli_usage_error("kernels run", "at most %zu --arg",
                                          sizeof a->args / sizeof a->args[0]);
            a->args[a->n_args++] = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--threads", &missing))) {
            int64_t threads;
            if (!parse_int64(v, &threads) || threads < 1 || threads > INT_MAX)
                return ly_cli_usage_error("kernels run",
                                          "--threads '%s': expected a positive integer", v);
            a->threads = (int)threads;
        } else if (missing) {
            return ly_cli_usage_error("kernels run", "%s needs a value", arg);
        } else if (arg[0] == '-') {
            return ly_cli_unknown_argument("kernels run", arg);
        } else if (!a->slot) {
            a->slot = arg;
        } else {
            return ly_cli_usage_error("kernels run",
                                      "unexpected argument '%s' (the slot is given once)", arg);
        }
    }
    if (!a->slot) return ly_cli_usage_error("kernels run", "missing SLOT");
    if (a->n_in == 0) return ly_cli_usage_error("kernels run", "give at least one --in");
    if (a->n_out == 0) return ly_cli_usage_error("kernels run", "give at least one --out");
    return 0;
}

/* Load, run, save; the caller frees the tensors whatever happens. */
static int run(const run_args *a, ly_kernel_call *call, ly_tensor *inputs, ly_tensor *outputs)
{
    for (int i = 0; i < a->n_in; i++) {
        if (strcmp(a->in_paths[i], "none") == 0) continue; /* optional operand left out */
        if (ly_npy_load(a->in_paths[i], &inputs[i]) != LY_OK) return fail();
        call->in[i] = &inputs[i];
    }

    ly_tensor shapes[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    if (ly_kernel_infer_outputs(a->slot, call, shapes, &n_out) != LY_OK) return fail();
    if (n_out != a->n_out) {
        fprintf(stderr, "libreyolo kernels run: slot %s writes %d output%s, got %d --out\n",
                a->slot, n_out, n_out == 1 ? "" : "s", a->n_out);
        return 2;
    }
    for (int i = 0; i < n_out; i++) {
        if (ly_tensor_alloc(&outputs[i], shapes[i].dtype, shapes[i].ndim, shapes[i].shape) != LY_OK)
            return fail();
        call->out[i] = &outputs[i];
    }
    ly_status st =
        a->impl ? ly_kernel_run_impl(a->slot, a->impl, call) : ly_kernel_dispatch(a->slot, call);
    if (st != LY_OK) return fail();
    for (int i = 0; i < n_out; i++)
        if (ly_npy_save(a->out_paths[i], &outputs[i]) != LY_OK) return fail();
    return 0;
}

int ly_cli_kernels_run(int argc, char **argv)
{
    run_args a = {0};
    ly_kernel_call call;
    if (ly_kernel_call_init(&call) != LY_OK) return fail();
    int code = parse_args(argc, argv, &a);
    if (code != 0) return code < 0 ? 0 : code;
    /* A slot of the manifest takes its parameters by name; one only a plugin
     * knows takes none. */
    _Alignas(16) unsigned char params[256];
    ly_op op;
    if (ly_op_from_name(a.slot, &op) == LY_OK) {
        code = set_params(&a, op, params);
        if (code != 0) return code;
        call.params = params;
    } else if (a.n_args > 0) {
        return ly_cli_usage_error(
            "kernels run", "slot %s is not one of the library's ops: it takes no --arg", a.slot);
    }
    call.threads = a.threads;

    ly_tensor inputs[LY_KERNEL_MAX_INPUTS] = {0};
    ly_tensor outputs[LY_KERNEL_MAX_OUTPUTS] = {0};
    code = run(&a, &call, inputs, outputs);
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        ly_npy_free(&inputs[i]);
    for (int i = 0; i < LY_KERNEL_MAX_OUTPUTS; i++)
        ly_tensor_free(&outputs[i]);
    return code;
}
