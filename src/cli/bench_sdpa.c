/* `bench kernels` rows for the sdpa slot: placeholder until they land. */
#include "cli/cli.h"

int ly_cli_bench_sdpa(const ly_bench_attention_options *options)
{
    (void)options;
    return 0;
}
