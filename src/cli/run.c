/* SPDX-License-Identifier: MIT */
/* `libreyolo run`: the network alone on a preprocessed .npy input, every raw
 * output written as .npy, for comparison with another implementation. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "libreyolo/io.h"
#include "libreyolo/model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ly_cli_usage_run(FILE *to)
{
    fputs("usage: libreyolo run --model M --input X.npy --output-dir DIR [--threads N]\n"
          "                     [--fused-attn MODE]\n"
          "\n"
          "Runs the network of model M (a checkpoint, a TF.js graph model, or a named model\n"
          "such as nanodet), without pre- or post-processing, on X (float32 [1, 3, H, W] as\n"
          "the model's preprocessing makes it: YOLO9 takes H and W multiples of 32, NanoDet-g\n"
          "416 x 416) and writes each output to DIR/<name>.npy (YOLO9: predictions, raw_p3,\n"
          "raw_p4, raw_p5; NanoDet: Identity ... Identity_5, its graph's signature names;\n"
          "the DETR families: pred_logits, pred_boxes; ViT: logits).\n"
          "DIR is created if needed; files are written atomically.\n"
          "  --threads N      worker threads (default: LIBREYOLO_THREADS, else all CPUs)\n"
          "  --fused-attn MODE  on or off: attention through the fused sdpa kernel or the manual\n"
          "                   expression (default: the model's)\n",
          to);
}

typedef struct run_state {
    const char *dir;
    ly_status status; /* first failure */
    char message[1024];
} run_state;

static void save_output(const char *name, const ly_tensor *output, void *user)
{
    run_state *s = user;
    if (s->status != LY_OK) return;
    size_t len = strlen(s->dir) + strlen(name) + 8;
    char *path = malloc(len);
    if (!path) {
        s->status = LY_E_NO_MEMORY;
        snprintf(s->message, sizeof s->message, "out of memory");
        return;
    }
    snprintf(path, len, "%s/%s.npy", s->dir, name);
    s->status = ly_npy_save(path, output);
    if (s->status != LY_OK) {
        snprintf(s->message, sizeof s->message, "%s", ly_last_error());
    } else {
        printf("%s [", path);
        for (int i = 0; i < output->ndim; i++)
            printf("%s%lld", i ? ", " : "", (long long)output->shape[i]);
        printf("] %s\n", ly_dtype_name(output->dtype));
    }
    free(path);
}

int ly_cli_run(int argc, char **argv)
{
    const char *model_path = NULL, *input_path = NULL, *dir = NULL;
    int threads = 0, fused = -1;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_run(stdout);
            return 0;
        }
        if ((v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            model_path = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--input", &missing))) {
            input_path = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--output-dir", &missing))) {
            dir = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--threads", &missing))) {
            char *end;
            errno = 0;
            long t = strtol(v, &end, 10);
            if (errno || end == v || *end || t < 1 || t > 4096)
                return ly_cli_usage_error("run", "--threads '%s': expected a positive integer", v);
            threads = (int)t;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--fused-attn", &missing))) {
            int code = ly_cli_parse_fused("run", v, &fused);
            if (code) return code;
        } else if (missing) {
            return ly_cli_usage_error("run", "%s needs a value", arg);
        } else {
            return ly_cli_unknown_argument("run", arg);
        }
    }
    if (!model_path) return ly_cli_usage_error("run", "missing --model");
    if (!input_path) return ly_cli_usage_error("run", "missing --input");
    if (!dir) return ly_cli_usage_error("run", "missing --output-dir");

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "libreyolo run: --output-dir %s: cannot create it: %s\n", dir,
                strerror(errno));
        return 1;
    }
    ly_tensor input = {0};
    if (ly_npy_load(input_path, &input) != LY_OK)
        return ly_cli_fail("run", LY_EXIT_SOURCE, "data_invalid", NULL, "%s", ly_last_error());
    ly_model_options mo = {threads};
    ly_model *model;
    ly_status loaded = ly_model_load(model_path, &mo, &model);
    if (loaded != LY_OK) {
        ly_npy_free(&input);
        return ly_cli_model_failed("run", loaded);
    }
    run_state state = {dir, LY_OK, ""};
    int code = ly_cli_apply_fused("run", model, fused);
    if (code) {
        ly_model_free(model);
        ly_npy_free(&input);
        return code;
    }
    if (ly_model_run(model, &input, save_output, &state) != LY_OK) {
        fprintf(stderr, "libreyolo run: %s: %s\n", input_path, ly_last_error());
        code = 1;
    } else if (state.status != LY_OK) {
        fprintf(stderr, "libreyolo run: %s\n", state.message);
        code = 1;
    }
    ly_model_free(model);
    ly_npy_free(&input);
    return code;
}
