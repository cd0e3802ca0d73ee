/* `libreyolo fetch`: placeholder until it lands. */
#include "cli/cli.h"

#include <stdio.h>

int ly_cli_fetch(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("libreyolo fetch: not available in this build yet\n", stderr);
    return 1;
}
