/* SPDX-License-Identifier: MIT */
/* `libreyolo bench`: picks the benchmark. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

void ly_cli_usage_bench(FILE *to)
{
    fputs("usage: libreyolo bench kernels [--help | options]   quant kernels vs reference and "
          "bandwidth\n"
          "       libreyolo bench conv [--help | options]      conv2d providers on LibreYOLO9t "
          "shapes\n"
          "       libreyolo bench model --model M [options]    a detector, with ONNX Runtime and "
          "PyTorch\n"
          "       libreyolo bench track [options]              the tracker per frame, with "
          "LibreYOLO's\n",
          to);
}

int ly_cli_bench(int argc, char **argv)
{
    if (argc > 0 && strcmp(argv[0], "kernels") == 0) return ly_cli_bench_kernels(argc, argv);
    if (argc > 0 && strcmp(argv[0], "conv") == 0) return ly_cli_bench_conv(argc - 1, argv + 1);
    if (argc > 0 && strcmp(argv[0], "model") == 0) return ly_cli_bench_model(argc - 1, argv + 1);
    if (argc > 0 && strcmp(argv[0], "track") == 0) return ly_cli_bench_track(argc - 1, argv + 1);
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        ly_cli_usage_bench(stdout);
        return 0;
    }
    fprintf(stderr, "libreyolo bench: %s\n", argc ? "unknown target" : "what to benchmark?");
    ly_cli_usage_bench(stderr);
    return 2;
}
