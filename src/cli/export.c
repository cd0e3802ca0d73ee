/* SPDX-License-Identifier: MIT */
/* `libreyolo export`: a checkpoint written as an ExecuTorch program (.pte) with
 * the XNNPACK delegate, and its metadata sidecar (ly_model_export). */
#include "libreyolo/export.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/model.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void ly_cli_usage_export(FILE *to)
{
    fputs("usage: libreyolo export --model M --format executorch [--imgsz S | H,W] [--batch 1]\n"
          "                        [--dynamic] [--delegate xnnpack] [--device cpu] [--half]\n"
          "                        [--int8] [--nms] [--msda portable|custom] [--output PATH]\n"
          "                        [--json]\n"
          "\n"
          "Writes model M as an ExecuTorch program with the XNNPACK delegate (ExecuTorch 1.2\n"
          "format) and its metadata sidecar PATH.json, as a pair: a failure leaves the\n"
          "previous pair, if any, in place. Options are checked as LibreYOLO checks them,\n"
          "before anything is written.\n"
          "  --model M        checkpoint (.pt or .safetensors)\n"
          "  --format F       export format: executorch\n"
          "  --imgsz S        input size: S or H,W (square only for ExecuTorch); default the\n"
          "                   model's\n"
          "  --batch N        batch size: 1 (ExecuTorch v1)\n"
          "  --dynamic        dynamic shapes: refused (ExecuTorch v1)\n"
          "  --delegate D     backend delegate: xnnpack\n"
          "  --device D       cpu (or auto)\n"
          "  --half, --int8   refused: ExecuTorch export is FP32\n"
          "  --nms            refused: no embedded NMS\n"
          "  --msda FORM      the DETR families' deformable attention: portable (default;\n"
          "                   ATen's grid_sampler_2d: runs in a stock ExecuTorch) or custom\n"
          "                   (our operator libreyolo::ms_deform_attn.out: faster; ExecuTorch\n"
          "                   needs our kernel library)\n"
          "  --output PATH    the program (default weights/<stem of M>.pte)\n"
          "  --json           print {\"program\", \"sidecar\"} instead of text\n"
          "The program runs with `libreyolo predict --model PATH ...`.\n",
          to);
}

/* "640", "640,480", "640x480", "(640, 480)": up to 8 integers. */
static bool parse_imgsz(const char *text, int64_t *v, size_t *n)
{
    *n = 0;
    const char *p = text;
    while (*p == ' ' || *p == '(' || *p == '[')
        p++;
    while (*p) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || *n == 8) return false;
        v[(*n)++] = x;
        p = end;
        while (*p == ' ' || *p == ')' || *p == ']')
            p++;
        if (*p == ',' || *p == 'x' || *p == 'X') {
            p++;
            while (*p == ' ')
                p++;
        } else if (*p) {
            return false;
        }
    }
    return *n > 0;
}

static bool parse_bool(const char *text, bool *v)
{
    if (strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0 || strcasecmp(text, "yes") == 0)
        *v = true;
    else if (strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0 ||
             strcasecmp(text, "no") == 0)
        *v = false;
    else
        return false;
    return true;
}

int ly_cli_export(int argc, char **argv)
{
    const char *cmd = "export";
    ly_export_options o;
    ly_export_options_init(&o);
    int64_t imgsz[8];
    bool json = false;
    const char *model_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_export(stdout);
            return 0;
        }
        if (strcmp(arg, "--json") == 0) {
            json = true;
        } else if (strcmp(arg, "--half") == 0) {
            o.half = true;
        } else if (strcmp(arg, "--int8") == 0) {
            o.int8 = true;
        } else if (strcmp(arg, "--nms") == 0) {
            o.nms = true;
        } else if (strcmp(arg, "--dynamic") == 0) {
            o.dynamic = true;
        } else if (strncmp(arg, "--dynamic=", 10) == 0) {
            if (!parse_bool(arg + 10, &o.dynamic))
                return ly_cli_usage_error(cmd, "--dynamic=%s: expected true or false", arg + 10);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            model_path = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--format", &missing))) {
            o.format = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--imgsz", &missing))) {
            if (!parse_imgsz(v, imgsz, &o.imgsz_len))
                return ly_cli_usage_error(cmd, "--imgsz %s: expected S or H,W", v);
            o.imgsz = imgsz;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--batch", &missing))) {
            if (!ly_cli_parse_int(v, -1000000, 1000000, &o.batch))
                return ly_cli_usage_error(cmd, "--batch %s: expected an integer", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--delegate", &missing))) {
            o.delegate = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--device", &missing))) {
            o.device = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--msda", &missing))) {
            o.msda = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--output", &missing)) ||
                   (v = ly_cli_option_value(argc, argv, &i, "--output-path", &missing))) {
            o.output_path = v;
        } else if (missing) {
            return ly_cli_usage_error(cmd, "missing the value of %s", arg);
        } else {
            return ly_cli_unknown_argument(cmd, arg);
        }
    }
    if (!model_path) return ly_cli_usage_error(cmd, "missing --model");
    if (!o.format) return ly_cli_usage_error(cmd, "missing --format (executorch)");
    o.model_path = model_path;
    ly_model *model;
    ly_status loaded = ly_model_load(model_path, NULL, &model);
    if (loaded != LY_OK) return ly_cli_model_failed("export", loaded);
    ly_model_info info;
    ly_model_get_info(model, &info);
    int wrong_task = ly_cli_check_task("export", info.task);
    if (wrong_task) {
        ly_model_free(model);
        return wrong_task;
    }
    char written[4096];
    ly_status st = ly_model_export(model, &o, written, sizeof written);
    ly_model_free(model);
    if (st != LY_OK) {
        /* LibreYOLO's codes: an unknown format, a precision the format lacks */
        bool format = strcasecmp(o.format, "executorch") != 0;
        bool precision = st == LY_E_UNSUPPORTED && (o.half || o.int8);
        if (format || precision)
            return ly_cli_fail("export", LY_EXIT_EXPORT_FORMAT,
                               format ? "export_format_unknown" : "format_precision_unsupported",
                               NULL, "%s", ly_last_error());
        return ly_cli_fail("export", LY_EXIT_FAILURE, "export_failed", NULL, "%s", ly_last_error());
    }
    char sidecar[4200];
    snprintf(sidecar, sizeof sidecar, "%s.json", written);
    if (json) {
        fputs("{\"program\":", stdout);
        ly_json_string(stdout, written);
        fputs(",\"sidecar\":", stdout);
        ly_json_string(stdout, sidecar);
        fputs("}\n", stdout);
    } else {
        printf("Export complete: %s (metadata %s)\n", written, sidecar);
    }
    return 0;
}
