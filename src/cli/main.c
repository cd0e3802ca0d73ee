/* SPDX-License-Identifier: MIT */
/* The `libreyolo` command: global options, then one subcommand per file. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/libreyolo.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static void print_usage(FILE *to)
{
    fputs(
        "usage: libreyolo [--version] [--help] [TASK] <command> [<args>]\n"
        "\n"
        "commands:\n"
        "  predict source=P [model=M]   detect objects in images and video (default model: "
        "nanodet)\n"
        "  track source=VIDEO [model=M] follow objects through a video (ByteTrack, ids)\n"
        "  info model=M                 what a checkpoint holds\n"
        "  export model=M format=F      write an ExecuTorch program (.pte) and its sidecar\n"
        "  formats [family=F]           which export formats each family supports\n"
        "  run model=M input=X.npy      run the network alone, write its outputs\n"
        "  fetch NAME | --list          install a named model (nanodet) into the cache\n"
        "  version                      the library's version (--json)\n"
        "  kernels [--all] [--json]     show which implementation serves each kernel slot\n"
        "  kernels check [...]          run every implementation against the reference\n"
        "  kernels run SLOT [...]       run one slot on .npy inputs\n"
        "  bench kernels [...]          measure every quant kernel implementation\n"
        "  bench conv [...]             time every conv2d provider on LibreYOLO9t's convolutions\n"
        "  bench model --model M [...]  latency, load time and memory, against ONNX Runtime and "
        "PyTorch\n"
        "  bench track [...]            the tracker's cost per frame, against LibreYOLO's\n"
        "\n"
        "Arguments are written as LibreYOLO's CLI takes them: key=value, --key value or\n"
        "--key=value (max_det=5 is --max-det 5), booleans as save, --save, save=true or\n"
        "save=false. TASK, when given, is the model's task (detect, classify): `libreyolo\n"
        "detect predict ...`. Every command takes --quiet (no progress, no warnings) and\n"
        "--verbose (debug messages).\n"
        "\n"
        "Exit codes (LibreYOLO's): 0 success, 1 other failure, 2 usage (an unknown, missing\n"
        "or invalid argument), 3 source or data (an image that is absent or unreadable), 4\n"
        "model (absent, unknown name, or refused on load), 5 export format or precision.\n"
        "\n"
        "Run `libreyolo <command> --help` for a command's options.\n",
        to);
}

static void usage_version(FILE *to)
{
    fputs("usage: libreyolo version [--json]\n"
          "\n"
          "Prints the library's version (`libreyolo --version` too).\n"
          "  --json           {\"version\", \"schema_version\": 1}\n",
          to);
}

static int cli_version(int argc, char **argv)
{
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_version(stdout);
            return 0;
        } else {
            return ly_cli_unknown_argument("version", argv[i]);
        }
    }
    if (json) {
        fputs("{\"version\": ", stdout);
        ly_json_string(stdout, ly_version());
        fputs(", \"schema_version\": 1}\n", stdout);
    } else {
        printf("libreyolo %s\n", ly_version());
    }
    return 0;
}

static void usage_help(FILE *to)
{
    print_usage(to);
}

static int cli_help(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    print_usage(stdout);
    return 0;
}

/* Two-word rows ("bench model") pick the options a dispatcher's target takes;
 * the entry point is still the first word's. */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *to);
} command;

static const command commands[] = {
    {"predict", ly_cli_predict, ly_cli_usage_predict},
    {"track", ly_cli_track, ly_cli_usage_track},
    {"info", ly_cli_info, ly_cli_usage_info},
    {"export", ly_cli_export, ly_cli_usage_export},
    {"formats", ly_cli_formats, ly_cli_usage_formats},
    {"run", ly_cli_run, ly_cli_usage_run},
    {"fetch", ly_cli_fetch, ly_cli_usage_fetch},
    {"version", cli_version, usage_version},
    {"kernels", ly_cli_kernels, ly_cli_usage_kernels},
    {"kernels check", ly_cli_kernels, ly_cli_usage_kernels_check},
    {"kernels run", ly_cli_kernels, ly_cli_usage_kernels_run},
    {"bench", ly_cli_bench, ly_cli_usage_bench},
    {"bench kernels", ly_cli_bench, ly_cli_usage_bench_kernels},
    {"bench conv", ly_cli_bench, ly_cli_usage_bench_conv},
    {"bench model", ly_cli_bench, ly_cli_usage_bench_model},
    {"bench track", ly_cli_bench, ly_cli_usage_bench_track},
    {"help", cli_help, usage_help},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* LibreYOLO's task words (libreyolo/tasks.py) that a command may follow. */
static const char *const task_words[] = {"detect", "classify", "restore", "segment", "pose", "obb"};

static const command *find_command(const char *name, const char *next)
{
    const command *found = NULL;
    char two[128];
    if (next) snprintf(two, sizeof two, "%s %s", name, next);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (next && strcmp(commands[i].name, two) == 0) return &commands[i];
        if (strcmp(commands[i].name, name) == 0) found = &commands[i];
    }
    return found;
}

static int unknown_command(const char *name)
{
    const char *names[N_COMMANDS];
    size_t n = 0;
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strchr(commands[i].name, ' ')) names[n++] = commands[i].name;
    const char *close = ly_closest_word(name, names, n);
    if (close)
        fprintf(stderr, "libreyolo: unknown command '%s'; did you mean '%s'?\n", name, close);
    else
        fprintf(stderr, "libreyolo: unknown command '%s'\n", name);
    print_usage(stderr);
    return LY_EXIT_USAGE;
}

/* --quiet and --verbose are everyone's: applied here, and taken out (moved
 * past the arguments the command sees, still owned by the array) unless the
 * command has its own (`formats --quiet`: names only). Returns how many
 * arguments are left for the command. */
static int take_log_flags(char **args, int argc, const bool own[2])
{
    int n = 0;
    char *taken[8];
    int n_taken = 0;
    for (int i = 0; i < argc; i++) {
        bool quiet = strcmp(args[i], "--quiet") == 0, verbose = strcmp(args[i], "--verbose") == 0;
        if (strcmp(args[i], "--") == 0 || (!quiet && !verbose) || n_taken == 8) {
            if (strcmp(args[i], "--") == 0) {
                while (i < argc)
                    args[n++] = args[i++];
                break;
            }
            args[n++] = args[i];
            continue;
        }
        if (quiet) ly_cli_set_quiet(true);
        /* a command's own --verbose is its own (predict: each box under its line, as
         * LibreYOLO's); elsewhere it means debug messages */
        if (quiet || !own[1]) setenv("LIBREYOLO_LOG", quiet ? "error" : "debug", 1);
        if (own[quiet ? 0 : 1])
            args[n++] = args[i];
        else
            taken[n_taken++] = args[i];
    }
    for (int k = 0; k < n_taken; k++)
        args[n + k] = taken[k];
    /* the default handler reads the level again */
    ly_set_log_handler(NULL, NULL, LY_LOG_WARNING);
    return n;
}

int main(int argc, char **argv)
{
    /* oneDNN's ITT profiling hook (~1 ms per forward in a profile) stays off unless asked for. */
    if (!getenv("DNNL_ITT_TASK_LEVEL")) setenv("ONEDNN_ITT_TASK_LEVEL", "0", 0);
#if defined(__GLIBC__)
    /* glibc raises its mmap threshold to the largest block freed so far: after
     * a checkpoint is read (15 MB for D-FINE-n) every image and map buffer
     * comes from the heap and stays resident when freed (+9 MiB after the
     * first predict). A fixed threshold gives them back. The command's own
     * choice; a program embedding the library keeps its malloc settings. */
    if (!getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
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
        return LY_EXIT_USAGE;
    }
    for (size_t t = 0; i + 1 < argc && t < sizeof task_words / sizeof task_words[0]; t++)
        if (strcmp(argv[i], task_words[t]) == 0 && find_command(argv[i + 1], NULL)) {
            ly_cli_set_task_word(task_words[t]);
            i++;
            break;
        }
    if (i == argc) {
        print_usage(stderr);
        return LY_EXIT_USAGE;
    }
    const command *c = find_command(argv[i], i + 1 < argc ? argv[i + 1] : NULL);
    if (!c) return unknown_command(argv[i]);

    static ly_cli_flags flags;
    ly_cli_flags_from_usage(c->usage, &flags);
    static const char *const everyones[] = {"quiet", "verbose"};
    bool own[2] = {false, false};
    for (size_t k = 0; k < 2 && flags.n < LY_CLI_MAX_FLAGS; k++)
        if (!(own[k] = ly_cli_flag_find(&flags, everyones[k]) != NULL)) {
            snprintf(flags.items[flags.n].name, sizeof flags.items[0].name, "%s", everyones[k]);
            flags.items[flags.n++].kind = LY_CLI_FLAG_BOOL;
        }
    ly_cli_set_current_flags(&flags);
    /* Each command gets the arguments after its own (first) name. */
    int sub_argc = 0, code = 0;
    char **sub_argv =
        ly_cli_normalize_args(argv[i], argc - i - 1, argv + i + 1, &flags, &sub_argc, &code);
    if (!sub_argv) return code;
    int own_argc = take_log_flags(sub_argv, sub_argc, own);
    for (int k = 0; k < own_argc; k++)
        if (strcmp(sub_argv[k], "--json") == 0) ly_cli_set_json_errors(true);
    code = c->run(own_argc, sub_argv);
    ly_cli_args_free(sub_argv, sub_argc, argv + i + 1);
    return code;
}
