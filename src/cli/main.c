/* The `libreyolo` command: global options, then one subcommand per file. */
#include "cli/cli.h"
#include "libreyolo/libreyolo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_usage(FILE *to)
{
    fputs(
        "usage: libreyolo [--version] [--help] <command> [<args>]\n"
        "\n"
        "commands:\n"
        "  kernels [--all] [--json]     show which implementation serves each kernel slot\n"
        "  kernels check [...]          run every implementation against the reference\n"
        "  kernels run SLOT [...]       run one slot on .npy inputs\n"
        "  bench kernels [...]          measure every quant kernel implementation\n"
        "  bench conv [...]             time every conv2d provider on LibreYOLO9t's convolutions\n"
        "  bench model --model M [...]  latency, load time and memory, against ONNX Runtime and "
        "PyTorch\n"
        "  predict --source P [--model M] detect objects in images (default model: nanodet)\n"
        "  run --model M --input X.npy  run the network alone, write its outputs\n"
        "  info --model M               what a checkpoint holds\n"
        "  fetch NAME | --list          install a named model (nanodet) into the cache\n"
        "  export --model M --format F  write an ExecuTorch program (.pte) and its sidecar\n"
        "  formats [--family F]         which export formats each family supports\n"
        "\n"
        "Run `libreyolo <command> --help` for a command's options.\n",
        to);
}

int main(int argc, char **argv)
{
    /* oneDNN's ITT profiling hook (~1 ms per forward in a profile) stays off unless asked for. */
    if (!getenv("DNNL_ITT_TASK_LEVEL")) setenv("ONEDNN_ITT_TASK_LEVEL", "0", 0);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("libreyolo %s\n", ly_version());
            return 0;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_usage(stdout);
            return 0;
        }
        fprintf(stderr, "libreyolo: unknown option '%s'\n", argv[i]);
        print_usage(stderr);
        return 2;
    }
    if (i == argc) {
        print_usage(stderr);
        return 2;
    }
    const char *command = argv[i];
    /* Each subcommand gets the arguments after its own name. */
    int sub_argc = argc - i - 1;
    char **sub_argv = argv + i + 1;
    if (strcmp(command, "kernels") == 0) return ly_cli_kernels(sub_argc, sub_argv);
    if (strcmp(command, "bench") == 0) return ly_cli_bench(sub_argc, sub_argv);
    if (strcmp(command, "predict") == 0) return ly_cli_predict(sub_argc, sub_argv);
    if (strcmp(command, "run") == 0) return ly_cli_run(sub_argc, sub_argv);
    if (strcmp(command, "info") == 0) return ly_cli_info(sub_argc, sub_argv);
    if (strcmp(command, "fetch") == 0) return ly_cli_fetch(sub_argc, sub_argv);
    if (strcmp(command, "export") == 0) return ly_cli_export(sub_argc, sub_argv);
    if (strcmp(command, "formats") == 0) return ly_cli_formats(sub_argc, sub_argv);
    if (strcmp(command, "help") == 0) {
        print_usage(stdout);
        return 0;
    }
    fprintf(stderr, "libreyolo: unknown command '%s'\n", command);
    print_usage(stderr);
    return 2;
}
