/* SPDX-License-Identifier: MIT */
/* The `libreyolo` command: one file per subcommand. Each entry takes the
 * arguments after its own name, already normalised (cli_args.h), and returns
 * the process exit code (cli_util.h: LY_EXIT_*, LibreYOLO's codes). */
#ifndef LY_CLI_CLI_H
#define LY_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

int ly_cli_kernels(int argc, char **argv); /* kernels [--all] [--json]; dispatches check/run */
int ly_cli_kernels_check(int argc, char **argv); /* kernels check [--slot S] [--impl I] [--json] */
int ly_cli_kernels_run(int argc,
                       char **argv); /* kernels run SLOT --impl NAME --in A.npy ... --out Y.npy */
int ly_cli_bench(int argc, char **argv);         /* bench kernels|conv|model [...] */
int ly_cli_bench_kernels(int argc, char **argv); /* takes "kernels" [...] (argv[0] is "kernels") */
int ly_cli_bench_conv(int argc, char **argv);    /* the arguments after "conv" */
int ly_cli_bench_dispatch(bool json);            /* bench kernels --dispatch */
int ly_cli_bench_model(int argc, char **argv);   /* the arguments after "model" */
int ly_cli_bench_track(int argc, char **argv);   /* the arguments after "track" */
/* Attention rows of `bench kernels` (with the PyTorch peer); return an exit code. */
typedef struct ly_bench_attention_options {
    int threads; /* 0: 1 and 2 */
    int repeats; /* timed runs per case (median) */
    bool json;
    bool no_peer; /* skip PyTorch */
} ly_bench_attention_options;
int ly_cli_bench_msda(const ly_bench_attention_options *options);
int ly_cli_bench_sdpa(const ly_bench_attention_options *options);
int ly_cli_predict(int argc, char **argv); /* predict --model M --source PATH [...] */
int ly_cli_track(int argc, char **argv);   /* track --model M --source VIDEO [...] */
int ly_cli_run(int argc, char **argv);     /* run --model M --input X.npy --output-dir D */
int ly_cli_info(int argc, char **argv);    /* info --model M [--json] */
int ly_cli_fetch(int argc, char **argv);   /* fetch NAME [--force] [--json] */
int ly_cli_export(int argc, char **argv);  /* export --model M --format executorch [...] */
int ly_cli_formats(int argc, char **argv); /* formats [--family F] [--task T] [--json] */

/* Each command's --help text, which is also the list of its options that
 * argument normalisation and "did you mean" read (cli_args.h). */
#define LY_CLI_USAGE(id) void ly_cli_usage_##id(FILE *to);
LY_CLI_USAGE(bench)
LY_CLI_USAGE(bench_conv)
LY_CLI_USAGE(bench_kernels)
LY_CLI_USAGE(bench_model)
LY_CLI_USAGE(bench_track)
LY_CLI_USAGE(track)
LY_CLI_USAGE(export)
LY_CLI_USAGE(fetch)
LY_CLI_USAGE(formats)
LY_CLI_USAGE(info)
LY_CLI_USAGE(kernels)
LY_CLI_USAGE(kernels_check)
LY_CLI_USAGE(kernels_run)
LY_CLI_USAGE(predict)
LY_CLI_USAGE(run)
#undef LY_CLI_USAGE

#endif
