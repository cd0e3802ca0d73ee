/* SPDX-License-Identifier: MIT */
/* `libreyolo info`: what a checkpoint holds and what the model expects. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/model.h"

#include <stdio.h>
#include <string.h>

void ly_cli_usage_info(FILE *to)
{
    fputs("usage: libreyolo info --model M [--json]\n"
          "\n"
          "Shows the model family, size, task, classes and input size of model M (a\n"
          "checkpoint, a TF.js graph model or a named model such as nanodet), a detector's\n"
          "predict defaults (conf, iou, max_det), and how many tensors and parameters it\n"
          "has: a checkpoint's state dict (parameters exclude BatchNorm running statistics,\n"
          "counters and the family's other buffers), else the weights and biases of its\n"
          "network.\n"
          "  --json           one JSON object instead of text\n",
          to);
}

int ly_cli_info(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_info(stdout);
            return 0;
        }
        if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--model") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(arg, "--model=", 8) == 0) {
            path = arg + 8;
        } else {
            if (strcmp(arg, "--model") == 0)
                return ly_cli_usage_error_code("info", "config_required_key",
                                               "missing the value of '%s'", arg);
            return ly_cli_unknown_argument("info", arg);
        }
    }
    if (!path) {
        fputs("libreyolo info: missing --model\n(see libreyolo info --help)\n", stderr);
        return 2;
    }
    ly_model *model;
    ly_model_info info;
    size_t tensors = 0;
    int64_t params = 0;
    ly_status loaded = ly_model_load(path, NULL, &model);
    if (loaded != LY_OK) return ly_cli_model_failed("info", loaded);
    ly_model_get_info(model, &info);
    int wrong_task = ly_cli_check_task("info", info.task);
    if (wrong_task) {
        ly_model_free(model);
        return wrong_task;
    }
    /* A checkpoint is counted as stored; a graph from anything else (TF.js) as
     * loaded; a .pte program's weights are inside it. */
    ly_model_stats stats;
    ly_status counted = ly_model_get_stats(model, 0, &stats);
    bool is_pte = strcmp(info.engine, "graph") != 0;
    tensors = stats.file_tensors >= 0 ? (size_t)stats.file_tensors : stats.weight_tensors;
    params = stats.file_tensors >= 0 ? stats.file_parameters : stats.parameters;
    if (counted != LY_OK) {
        fprintf(stderr, "libreyolo info: %s\n", ly_last_error());
        ly_model_free(model);
        return 1;
    }
    /* a classifier's predict takes no thresholds (top-5 of every class) */
    bool detects = strcmp(info.task, "detect") == 0;
    int attention = 0;
    bool fused = false;
    ly_model_fused_attention(model, &attention, &fused);
    if (json) {
        fputs("{\"model\":", stdout);
        ly_json_string(stdout, path);
        fputs(",\"family\":", stdout);
        ly_json_string(stdout, info.family);
        fputs(",\"size\":", stdout);
        ly_json_string(stdout, info.size);
        fputs(",\"task\":", stdout);
        ly_json_string(stdout, info.task);
        printf(",\"attention_modules\":%d,\"fused_attn\":%s", attention,
               attention ? (fused ? "true" : "false") : "null");
        if (info.quant_recipe) {
            fputs(",\"quant\":{\"recipe\":", stdout);
            ly_json_string(stdout, info.quant_recipe);
            fputs(",\"state\":", stdout);
            ly_json_string(stdout, info.quant_state);
            fputs(",\"remainder\":", stdout);
            if (*info.quant_remainder)
                ly_json_string(stdout, info.quant_remainder);
            else
                fputs("null", stdout);
            printf(",\"modules\":%d}", info.quant_modules);
        } else {
            fputs(",\"quant\":null", stdout);
        }
        printf(",\"nc\":%lld,\"imgsz\":%lld,\"input_shape\":[1,3,%lld,%lld],\"batched\":%s",
               (long long)info.nc, (long long)info.imgsz, (long long)info.imgsz,
               (long long)info.imgsz, info.batched ? "true" : "false");
        if (detects) {
            fputs(",\"defaults\":{\"conf\":", stdout);
            ly_json_float32(stdout, info.default_conf);
            fputs(",\"iou\":", stdout);
            ly_json_float32(stdout, info.default_iou);
            printf(",\"max_det\":%d}", info.default_max_det);
        }
        if (is_pte)
            fputs(",\"tensors\":null,\"parameters\":null", stdout);
        else
            printf(",\"tensors\":%zu,\"parameters\":%lld", tensors, (long long)params);
        fputs(",\"names\":[", stdout);
        for (int64_t i = 0; i < info.nc; i++) {
            if (i) fputc(',', stdout);
            ly_json_string(stdout, info.names[i]);
        }
        fputs("]}\n", stdout);
    } else {
        printf("model       %s\n", path);
        printf("family      %s\n", info.family);
        printf("size        %s\n", info.size);
        printf("task        %s\n", info.task);
        if (attention)
            printf("attention   %d modules, fused_attn %s (--fused-attn on|off in predict, run)\n",
                   attention, fused ? "on" : "off");
        else
            printf("attention   no module with a fused_attn flag\n");
        if (info.quant_recipe)
            printf("quant       %s, %s%s%s, %d quantized modules\n", info.quant_recipe,
                   info.quant_state, *info.quant_remainder ? ", remainder " : "",
                   info.quant_remainder, info.quant_modules);
        printf("classes     %lld\n", (long long)info.nc);
        printf("imgsz       %lld\n", (long long)info.imgsz);
        printf("input       [1, 3, %lld, %lld] %s\n", (long long)info.imgsz, (long long)info.imgsz,
               info.input);
        printf("batch       %s\n", info.batched ? "any (predict batch=N runs N images in one call)"
                                                : "1 (predict batch=N runs the images one by one)");
        if (detects)
            printf("defaults    conf %g, iou %g, max_det %d (predict's, unless given)\n",
                   (double)info.default_conf, (double)info.default_iou, info.default_max_det);
        if (is_pte) { /* the weights live in the program's segments */
            puts("tensors     (inside the ExecuTorch program)");
        } else {
            printf("tensors     %zu\n", tensors);
            printf("parameters  %lld\n", (long long)params);
        }
        fputs("names      ", stdout);
        for (int64_t i = 0; i < info.nc; i++)
            printf("%s%lld:%s", i ? ", " : " ", (long long)i, *info.names[i] ? info.names[i] : "?");
        fputc('\n', stdout);
    }
    ly_model_free(model);
    return 0;
}
