/* `libreyolo export`: placeholder until it lands. */
#include "cli/cli.h"

#include <stdio.h>

int ly_cli_export(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("libreyolo export: not available in this build yet\n", stderr);
    return 1;
}
