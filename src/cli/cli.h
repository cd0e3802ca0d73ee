/* The `libreyolo` command: one file per subcommand. Each entry takes the
 * arguments after its own name and returns the process exit code
 * (0 ok, 1 failure, 2 usage error). */
#ifndef LY_CLI_CLI_H
#define LY_CLI_CLI_H

#include <stdbool.h>

int ly_cli_kernels(int argc, char **argv); /* kernels [--all] [--json]; dispatches check/run */
int ly_cli_kernels_check(int argc, char **argv); /* kernels check [--slot S] [--impl I] [--json] */
int ly_cli_kernels_run(int argc,
                       char **argv); /* kernels run SLOT --impl NAME --in A.npy ... --out Y.npy */
int ly_cli_bench(int argc, char **argv);         /* bench kernels|conv|model [...] */
int ly_cli_bench_kernels(int argc, char **argv); /* takes "kernels" [...] (argv[0] is "kernels") */
int ly_cli_bench_conv(int argc, char **argv);    /* the arguments after "conv" */
int ly_cli_bench_dispatch(bool json);            /* bench kernels --dispatch */
int ly_cli_bench_model(int argc, char **argv);   /* the arguments after "model" */
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
int ly_cli_run(int argc, char **argv);     /* run --model M --input X.npy --output-dir D */
int ly_cli_info(int argc, char **argv);    /* info --model M [--json] */
int ly_cli_fetch(int argc, char **argv);   /* fetch NAME [--force] [--json] */
int ly_cli_export(int argc, char **argv);  /* export --model M --format executorch [...] */
int ly_cli_formats(int argc, char **argv); /* formats [--family F] [--task T] [--json] */

#endif
