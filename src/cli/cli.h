/* The `libreyolo` command: one file per subcommand. Each entry takes the
 * arguments after its own name and returns the process exit code
 * (0 ok, 1 failure, 2 usage error). */
#ifndef LY_CLI_CLI_H
#define LY_CLI_CLI_H

int ly_cli_kernels(int argc, char **argv);       /* kernels [--all] [--json]; dispatches check/run */
int ly_cli_kernels_check(int argc, char **argv); /* kernels check [--slot S] [--impl I] [--json] */
int ly_cli_kernels_run(int argc, char **argv);   /* kernels run SLOT --impl NAME --in A.npy ... --out Y.npy */
int ly_cli_bench(int argc, char **argv);         /* bench kernels [...] */

#endif
