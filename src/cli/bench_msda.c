/* `bench kernels` rows for the msda slot: placeholder until they land. */
#include "cli/cli.h"

int ly_cli_bench_msda(const ly_bench_attention_options *options)
{
    (void)options;
    return 0;
}
