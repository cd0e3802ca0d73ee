/* SPDX-License-Identifier: MIT */
/* `libreyolo predict`: detections (or a classifier's top-5) on image files, printed for people or
 * as JSON lines for scripts, and annotated copies of the images. */
#include "cli/predict.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/fetch_progress.h"
#include "cli/json_out.h"
#include "libreyolo/image.h"
#include "libreyolo/kernels.h"
#include "libreyolo/model.h"

#include <errno.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define DEFAULT_MODEL "nanodet"
#define DEFAULT_NAME "predict"
#define JPEG_QUALITY 90

void ly_cli_usage_predict(FILE *to)
{
    fputs("usage: libreyolo [detect|classify|restore] predict source=PATH [model=M] [conf=X] "
          "[iou=X]\n"
          "                         [max_det=N] [imgsz=S|H,W] [classes=[0,2,5]] [tile=N] "
          "[tile_pad=N]\n"
          "                         [save] [output_file_format=jpg|png] [project=P] [name=N]\n"
          "                         [vid_stride=N] [stream] [batch=N] [tiling] "
          "[overlap_ratio=X]\n"
          "                         [exist_ok] [device=cpu] [threads=N] [json | jsonl]\n"
          "\n"
          "Detects objects in an image, or in every image of a directory (JPEG, PNG, BMP; in\n"
          "name order), with the model's own pre- and post-processing; classifies it, or\n"
          "restores it (SwinIR: x4), as the model's task is. Options are written key=value or\n"
          "--key value, as LibreYOLO's CLI takes them.\n"
          "  --model M        a checkpoint (.pt or .safetensors), a TF.js graph model (.json),\n"
          "                   an ExecuTorch program (.pte), or a named model: \"nanodet\"\n"
          "                   (NanoDet-g, COCO; the default), fetched into the cache on first\n"
          "                   use (see libreyolo fetch --help)\n"
          "  --source PATH    an image file, a folder of them (subfolders too), a glob (quoted:\n"
          "                   'imgs/*.jpg'), a .txt file listing them (one per line), or an\n"
          "                   http(s):// URL (WebP and TIFF are not read by this build); a\n"
          "                   video file (.mp4 .avi .mkv .mov .webm .gif ... as LibreYOLO),\n"
          "                   and (ours) an rtsp:// or http(s) stream, a camera (0 is\n"
          "                   /dev/video0) or an image sequence ('frames/%04d.png'), with\n"
          "                   FFmpeg's libraries: one line (or JSON object, with \"frame\"\n"
          "                   and \"timestamp\") per frame\n",
          to);
    fputs("  --tiling         LibreYOLO's tiled detection: an image larger than imgsz is cut\n"
          "                   into overlapping imgsz tiles, each predicted, the boxes merged\n"
          "                   by class-wise NMS at iou (for .pte models too, which LibreYOLO's\n"
          "                   CLI refuses); classifiers predict once\n"
          "  --overlap-ratio X  the tiles' overlap, in [0, 1) (default 0.2)\n"
          "  --vid-stride N   video: predict on every Nth frame (default 1)\n"
          "  --stream         accepted (LibreYOLO's stream=True): each frame's result is\n"
          "                   printed as it is done either way\n"
          "  --stream-buffer  no effect, with a warning, as in LibreYOLO\n"
          "  --batch N        images (or video frames) per network call, 1..256, where the\n"
          "                   model's network takes a batch (info: \"batched\"; else one\n"
          "                   by one, with a note); results as one by one\n"
          "  --conf X         keep detections scoring above X, in [0, 1] (default: the\n"
          "                   model's, which libreyolo info --model M shows)\n"
          "  --iou X          NMS: suppress boxes overlapping a better one of their class by\n"
          "                   IoU > X, in [0, 1] (default: the model's)\n"
          "  --max-det N      at most N detections per image (default: the model's)\n"
          "  --imgsz S        square input size (also H,W, [H,W] or HxW with H = W), a\n"
          "                   multiple of the model's stride (32 for\n"
          "                   YOLO9); fixed-size models take their own only (default: the\n"
          "                   checkpoint's)\n"
          "  --classes LIST   only these class ids: [0,2,5] (LibreYOLO's form) or 0,2,5, kept\n"
          "                   after NMS and --max-det, as LibreYOLO does; classifiers ignore it\n"
          "  --tile N         restoration models: run on tiles of N input pixels a side (0: the\n"
          "                   whole image, the default; images over 256x256 are tiled at 64\n"
          "                   with a warning), LibreYOLO's tile\n"
          "  --tile-pad N     restoration models: each tile's context on every side (default 16)\n"
          "  --save [DIR]     write annotated images (boxes, names, scores), as <stem>.jpg, into\n"
          "                   <project>/<name>, numbered predict, predict2, ... so that no run\n"
          "                   overwrites another; --save DIR (ours) writes into DIR itself.\n"
          "                   A video is written as <stem> in its own container and codec\n"
          "                   where this build encodes them, else as <stem>.mp4 (MPEG-4 part 2,\n"
          "                   LibreYOLO's mp4v), at its rate / vid_stride; Ctrl-C stops and\n"
          "                   keeps a playable file of the frames done\n"
          "                   Off by default, as in LibreYOLO\n"
          "                   (a restoration model writes its restored image)\n"
          "  --output-file-format F  jpg (the default, as LibreYOLO) or png for saved images\n"
          "  --no-save        write no images (the default)\n"
          "  --project P      where --save numbers its folders (default: runs/<task>, e.g.\n"
          "                   runs/detect)\n"
          "  --name N         the folder's name in the project (default: predict)\n"
          "  --exist-ok       reuse <project>/<name> instead of numbering a new folder\n",
          to);
    fputs(
        "  --device D       cpu or auto (both run on the CPU; whole models do not run on a\n"
        "                   GPU here)\n"
        "  --half, --int8   --half warns and runs FP32 (LibreYOLO ignores it too); --int8 refused\n"
        "  --threads N      worker threads (default: LIBREYOLO_THREADS, else all CPUs)\n"
        "  --fused-attn MODE  on or off: attention through the fused sdpa kernel or the manual\n"
        "                   expression (LibreYOLO's set_fused_attention; default: the\n"
        "                   model's, on for ViT)\n"
        "  --json           one JSON document at the end, as LibreYOLO's: {\"source\", \"model\",\n"
        "                   \"model_family\", \"image_size\": [h, w], \"device\", \"results\": "
        "[{\"path\",\n"
        "                   \"original_shape\": [h, w], \"detections\": [{\"class\", "
        "\"class_id\",\n"
        "                   \"confidence\", \"bbox_xyxy\"}], classifiers' \"classification\":\n"
        "                   {\"name\", \"class\", \"confidence\"} and \"top5\": [the same],\n"
        "                   \"speed\": {\"preprocess\",\n"
        "                   \"inference\", \"postprocess\"} (ms)}], \"output_path\" (when "
        "saving),\n"
        "                   \"schema_version\": 1}; a failure is LibreYOLO's error document\n"
        "                   {\"schema_version\": 1, \"error\", \"message\", \"suggestion\"}\n"
        "  --jsonl          the same result objects, one line per image as it is done (for\n"
        "                   large folders)\n"
        "  --verbose        under each image's line (LibreYOLO's \"image 1/3 a.jpg: 640x480\n"
        "                   2 persons, 1 dog, 12.3ms\"), its boxes or a classifier's top 5\n"
        "Exit codes: 0 done, 2 usage, 3 a source or image that is absent or unreadable, 4 a\n"
        "model that is absent or refused, 1 anything else.\n",
        to);
}

/* A number as Python's float() reads it; its range is ly_predict_options_check's. */
static bool parse_float(const char *text, float *value)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end) return false;
    *value = v;
    return true;
}

/* LibreYOLO's list(ast.literal_eval(classes)) forms ([0,2,5], (0,2), 0,2,5, 0,)
 * and ours (0,2,5): integers, comma-separated, optionally bracketed. */
/* imgsz as LibreYOLO's CLI takes it: S, H,W, [H,W] or HxW. */
static int parse_imgsz(const char *text, predict_args *a)
{
    char buf[64];
    size_t n = strlen(text);
    if (n >= sizeof buf)
        return ly_cli_usage_error("predict", "--imgsz '%s': expected S, H,W, [H,W] or HxW", text);
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']')
        snprintf(buf, sizeof buf, "%.*s", (int)(n - 2), text + 1);
    else
        snprintf(buf, sizeof buf, "%s", text);
    size_t kept = 0; /* "[480, 640]" as "[480,640]" */
    for (size_t k = 0; buf[k]; k++)
        if (buf[k] != ' ') buf[kept++] = buf[k];
    buf[kept] = '\0';
    char *sep = strpbrk(buf, ",xX");
    int h, w;
    if (sep) *sep = '\0';
    if (!ly_cli_parse_int(buf, INT_MIN, INT_MAX, &h) ||
        (sep && !ly_cli_parse_int(sep + 1, INT_MIN, INT_MAX, &w)))
        return ly_cli_usage_error("predict", "--imgsz '%s': expected S, H,W, [H,W] or HxW", text);
    if (!sep) w = h;
    if (ly_predict_options_set_imgsz(&a->options, h, w) != LY_OK)
        return ly_cli_usage_error_code("predict", "config_range_error", "%s", ly_last_error());
    return 0;
}

int ly_predict_parse_classes(const char *command, const char *text, int *classes,
                             ly_predict_options *options)
{
    size_t n = 0, len = strlen(text);
    const char *p = text, *end_all = text + len;
    while (p < end_all && (*p == ' '))
        p++;
    while (end_all > p && end_all[-1] == ' ')
        end_all--;
    if (p < end_all && ((*p == '[' && end_all[-1] == ']') || (*p == '(' && end_all[-1] == ')')))
        p++, end_all--;
    bool trailing_comma_ok = false;
    while (p < end_all) {
        while (p < end_all && *p == ' ')
            p++;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || end > end_all || v < INT_MIN || v > INT_MAX)
            return ly_cli_usage_error(
                command, "--classes '%s': expected class ids like [0,2,5] or 0,2,5", text);
        if (n == MAX_CLASSES)
            return ly_cli_usage_error(command, "--classes: at most %d ids", MAX_CLASSES);
        classes[n++] = (int)v;
        p = end;
        while (p < end_all && *p == ' ')
            p++;
        if (p == end_all) break;
        if (*p != ',')
            return ly_cli_usage_error(
                command, "--classes '%s': expected class ids like [0,2,5] or 0,2,5", text);
        p++;
        while (p < end_all && *p == ' ')
            p++;
        /* Python's "0," is a one-element tuple; "1,,2" is not anything */
        if (p == end_all) trailing_comma_ok = n == 1;
        if (p == end_all && !trailing_comma_ok)
            return ly_cli_usage_error(command, "--classes '%s': trailing comma", text);
        if (p < end_all && *p == ',')
            return ly_cli_usage_error(command, "--classes '%s': expected class ids like [0,2,5]",
                                      text);
    }
    if (n == 0) return ly_cli_usage_error(command, "--classes: give at least one class id");
    options->classes = classes;
    options->n_classes = n;
    return 0;
}

/* --device: where LibreYOLO would pick a GPU, this build runs the CPU. */
static void cuda_plugin_status(const char *slot, const char *impl, bool eligible,
                               const char *why_not, void *user)
{
    (void)slot;
    char *status = user;
    if (strstr(impl, "cuda"))
        snprintf(status, 256, "loaded, %s%s", eligible ? "serving ms_deform_attn" : "idle: ",
                 eligible ? "" : (why_not ? why_not : "not eligible"));
}

static int check_device(const char *device)
{
    if (strcasecmp(device, "cpu") == 0 || strcasecmp(device, "auto") == 0) return 0;
    char status[256] = "not loaded (no libreyolo_kernels_cuda.so on LIBREYOLO_KERNELS_PATH)";
    ly_kernel_list("ms_deform_attn", cuda_plugin_status, status);
    return ly_cli_fail("predict", LY_EXIT_FAILURE, "device_not_available",
                       "use --device cpu (or auto)",
                       "--device %s: whole models run on the CPU in this library; the CUDA "
                       "plugin accelerates kernels only (CUDA plugin: %s)",
                       device, status);
}

static int parse_args(int argc, char **argv, predict_args *a)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ly_cli_usage_predict(stdout);
            return -1;
        }
        if ((v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            a->model = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--source", &missing))) {
            a->source = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--conf", &missing))) {
            if (!parse_float(v, &a->options.conf))
                return ly_cli_usage_error("predict", "--conf '%s': expected a number", v);
            a->options.given |= LY_PREDICT_CONF;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--iou", &missing))) {
            if (!parse_float(v, &a->options.iou))
                return ly_cli_usage_error("predict", "--iou '%s': expected a number", v);
            a->options.given |= LY_PREDICT_IOU;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--max-det", &missing))) {
            if (!ly_cli_parse_int(v, INT_MIN, INT_MAX, &a->options.max_det))
                return ly_cli_usage_error("predict", "--max-det '%s': expected an integer", v);
            a->options.given |= LY_PREDICT_MAX_DET;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--imgsz", &missing))) {
            int code = parse_imgsz(v, a);
            if (code) return code;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--tile", &missing))) {
            if (!ly_cli_parse_int(v, INT_MIN, INT_MAX, &a->options.tile))
                return ly_cli_usage_error("predict", "--tile '%s': expected an integer", v);
            a->options.given |= LY_PREDICT_TILE;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--tile-pad", &missing))) {
            if (!ly_cli_parse_int(v, INT_MIN, INT_MAX, &a->options.tile_pad))
                return ly_cli_usage_error("predict", "--tile-pad '%s': expected an integer", v);
            a->options.given |= LY_PREDICT_TILE_PAD;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--output-file-format", &missing))) {
            if (strcasecmp(v, "jpg") == 0 || strcasecmp(v, "jpeg") == 0)
                a->file_format = "jpg";
            else if (strcasecmp(v, "png") == 0)
                a->file_format = "png";
            else
                return ly_cli_usage_error_code("predict", "config_range_error",
                                               "--output-file-format '%s': expected jpg or png "
                                               "(the formats this build writes)",
                                               v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--classes", &missing))) {
            int code = ly_predict_parse_classes("predict", v, a->classes, &a->options);
            if (code) return code;
        } else if (strcmp(arg, "--save") == 0) {
            /* --save DIR (ours): a following word that is no option is the folder */
            a->save = true;
            if (i + 1 < argc && argv[i + 1][0] != '-') a->save_dir = argv[++i];
        } else if (strncmp(arg, "--save=", 7) == 0) {
            a->save = true;
            a->save_dir = arg + 7;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--project", &missing))) {
            a->project = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--name", &missing))) {
            a->name = v;
        } else if (strcmp(arg, "--tiling") == 0) {
            a->options.tiling = true;
        } else if (strcmp(arg, "--no-tiling") == 0) {
            a->options.tiling = false;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--overlap-ratio", &missing))) {
            char *end;
            errno = 0;
            double x = strtod(v, &end);
            if (end == v || *end || errno)
                return ly_cli_usage_error("predict", "--overlap-ratio '%s': expected a number", v);
            a->options.overlap_ratio = x;
            a->options.given |= LY_PREDICT_OVERLAP_RATIO;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--vid-stride", &missing))) {
            if (!ly_cli_parse_int(v, 1, INT_MAX, &a->vid_stride))
                return ly_cli_usage_error_code("predict", "config_range_error",
                                               "--vid-stride '%s': expected a positive integer", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--batch", &missing))) {
            if (!ly_cli_parse_int(v, 1, LY_PREDICT_MAX_BATCH, &a->batch))
                return ly_cli_usage_error_code("predict", "config_range_error",
                                               "--batch '%s': expected an integer in 1..%d", v,
                                               LY_PREDICT_MAX_BATCH);
        } else if (strcmp(arg, "--stream") == 0 || strcmp(arg, "--no-stream") == 0) {
            /* the command prints each frame's result as it is done either way */
        } else if (strcmp(arg, "--stream-buffer") == 0 || strcmp(arg, "--no-stream-buffer") == 0) {
            /* LibreYOLO accepts stream_buffer and ignores it with a warning */
            if (!ly_cli_quiet())
                fprintf(stderr, "libreyolo predict: warning: --stream-buffer has no effect (as in "
                                "LibreYOLO): live sources are read as fast as they are "
                                "predicted, and frames that arrive meanwhile wait in the "
                                "stream's own buffer\n");
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--device", &missing))) {
            int code = check_device(v);
            if (code) return code;
        } else if (strcmp(arg, "--half") == 0) {
            /* LibreYOLO warns that half is a no-op for predict and goes on */
            fprintf(stderr, "libreyolo predict: warning: --half: predict runs FP32 (LibreYOLO's "
                            "predict ignores half too); running in FP32\n");
        } else if (strcmp(arg, "--int8") == 0) {
            return ly_cli_usage_error_code(
                "predict", "config_unsupported",
                "%s: predict runs FP32; int8 is a quantized checkpoint's or an exported "
                "program's, not an option of predict",
                arg);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--threads", &missing))) {
            if (!ly_cli_parse_int(v, 1, 4096, &a->threads))
                return ly_cli_usage_error_code("predict", "config_range_error",
                                               "--threads '%s': expected a positive integer", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--fused-attn", &missing))) {
            int code = ly_cli_parse_fused("predict", v, &a->fused);
            if (code) return code;
        } else if (strcmp(arg, "--no-save") == 0) {
            a->no_save = true;
        } else if (strcmp(arg, "--exist-ok") == 0) {
            a->exist_ok = true;
        } else if (strcmp(arg, "--no-exist-ok") == 0) {
            a->exist_ok = false;
        } else if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--verbose") == 0) {
            a->verbose = true;
        } else if (strcmp(arg, "--jsonl") == 0) {
            a->jsonl = true;
        } else if (missing) {
            return ly_cli_usage_error_code("predict", "config_required_key", "%s needs a value",
                                           arg);
        } else {
            return ly_cli_unknown_argument("predict", arg);
        }
    }
    /* What needs no model is refused before one loads (the rest once it has). */
    if (ly_predict_options_check(NULL, &a->options) != LY_OK)
        return ly_cli_usage_error_code("predict", "config_range_error", "%s", ly_last_error());
    if (!a->model) a->model = DEFAULT_MODEL;
    if (!a->source)
        return ly_cli_usage_error_code("predict", "config_required_key",
                                       "missing source= (or --source): an image, or a folder of "
                                       "them");
    if (a->save && a->no_save)
        return ly_cli_usage_error_code("predict", "config_conflict",
                                       "--save and --no-save exclude each other");
    if (a->json && a->jsonl)
        return ly_cli_usage_error_code("predict", "config_conflict",
                                       "--json and --jsonl exclude each other");
    if (a->no_save) a->save = false;
    return 0;
}

/* ---- Sources ------------------------------------------------------------ */

static bool is_url(const char *source)
{
    return strncmp(source, "http://", 7) == 0 || strncmp(source, "https://", 8) == 0;
}

/* The images to process (ly_source_list_expand), with the command's error
 * documents: a missing source or one without images, an unsupported format. */
static int list_sources(const char *source, ly_source_list *out)
{
    ly_status st = ly_source_list_expand(source, out);
    if (st == LY_E_NO_MEMORY)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "%s", ly_last_error());
    if (st == LY_E_FORMAT || st == LY_E_UNSUPPORTED)
        return ly_cli_fail("predict", LY_EXIT_SOURCE, "data_invalid",
                           st == LY_E_FORMAT ? "convert it to JPEG or PNG" : NULL, "%s",
                           ly_last_error());
    if (st != LY_OK) {
        const char *message = ly_last_error();
        bool empty = strstr(message, ": no .jpg") || strstr(message, ": lists no images");
        return ly_cli_fail("predict", LY_EXIT_SOURCE,
                           empty ? "data_images_missing" : "source_not_found",
                           empty ? NULL
                                 : "give an image file, a folder of images, a glob, a .txt list "
                                   "of them or an http(s) URL",
                           "%s", message);
    }
    if (out->skipped && !ly_cli_quiet())
        fprintf(stderr,
                "libreyolo predict: warning: skipped %zu WebP, TIFF or GIF image%s: this build "
                "reads JPEG, PNG and BMP\n",
                out->skipped, out->skipped == 1 ? "" : "s");
    return 0;
}

/* A video source, before the model loads: a build that reads video, and a
 * file that is there (streams and cameras are found when they open). */
static int check_video_source(const char *source)
{
    bool available = false;
    ly_video_available(&available);
    if (!available) {
        ly_video_reader *r;
        ly_video_open(source, NULL, &r); /* for its message */
        return ly_cli_fail("predict", LY_EXIT_SOURCE, "data_invalid",
                           "rebuild with FFmpeg's libraries (tools/setup-deps.sh installs them)",
                           "%s", ly_last_error());
    }
    bool file = !strstr(source, "://") && !strchr(source, '%') &&
                strspn(source, "0123456789") != strlen(source) &&
                strncmp(source, "/dev/video", 10) != 0;
    struct stat st;
    if (file && stat(source, &st) != 0)
        return ly_cli_fail("predict", LY_EXIT_SOURCE, "source_not_found",
                           "give an image file, a folder of images, a glob, a .txt list, a video "
                           "file, a stream URL or a camera number",
                           "Source not found: %s", source);
    return 0;
}

/* The folder --save writes into: DIR as given, else <project>/<name>, numbered
 * as LibreYOLO's increment_path numbers it (predict, predict2, predict3, ...)
 * unless --exist-ok. Created; 0 or an exit code. */
static int save_folder(const predict_args *a, const char *task, char *out, size_t size)
{
    char project[PATH_MAX];
    if (a->project)
        snprintf(project, sizeof project, "%s", a->project);
    else
        snprintf(project, sizeof project, "runs/%s", task);
    ly_status st = a->save_dir ? ly_save_folder(a->save_dir, NULL, true, out, size)
                               : ly_save_folder(project, a->name ? a->name : DEFAULT_NAME,
                                                a->exist_ok, out, size);
    if (st == LY_E_INVALID_ARGUMENT)
        return ly_cli_usage_error("predict", "--project/--name: %s", ly_last_error());
    if (st != LY_OK)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                           ly_last_error());
    return 0;
}

static bool name_used(const used_names *u, const char *name)
{
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->names[i], name) == 0) return true;
    return false;
}

/* DIR/<stem of the image>.<ext>, as LibreYOLO names them, made unique in this run. */
char *ly_predict_output_path(const char *dir, const char *image, const char *ext, used_names *used)
{
    const char *base = strrchr(image, '/');
    base = base ? base + 1 : image;
    /* a URL's name ends before its query; none at all is LibreYOLO's "inference" */
    int base_len = is_url(image) ? (int)strcspn(base, "?#") : (int)strlen(base);
    if (base_len == 0) base = "inference", base_len = 9;
    const char *dot = memrchr(base, '.', (size_t)base_len);
    int stem = dot && dot != base ? (int)(dot - base) : base_len;
    char name[NAME_MAX + 16];
    snprintf(name, sizeof name, "%.*s.%s", stem, base, ext);
    for (int k = 2; name_used(used, name); k++)
        snprintf(name, sizeof name, "%.*s_%d.%s", stem, base, k, ext);
    if (used->n == used->cap) {
        size_t cap = used->cap ? 2 * used->cap : 16;
        char **grown = realloc(used->names, cap * sizeof *grown);
        if (!grown) return NULL;
        used->names = grown, used->cap = cap;
    }
    if (!(used->names[used->n] = strdup(name))) return NULL;
    used->n++;
    size_t len = strlen(dir) + strlen(name) + 2;
    char *out = malloc(len);
    if (out) snprintf(out, len, "%s/%s", dir, name);
    return out;
}

/* ---- Output ------------------------------------------------------------- */

/* One result as LibreYOLO's --json writes it (plus "speed", which LibreYOLO
 * keeps in Results.speed). */
/* One row of LibreYOLO's Results.summary() for a classifier. */
static void print_class_row(FILE *to, const ly_class_prob *p)
{
    fputs("{\"name\": ", to);
    ly_json_string(to, p->name);
    fprintf(to, ", \"class\": %d, \"confidence\": ", p->cls);
    ly_json_float32(to, p->conf);
    fputs("}", to);
}

static void print_result(FILE *to, const char *image, const ly_results *r,
                         const ly_video_frame *frame)
{
    int h, w;
    double pre, inf, post;
    size_t n;
    ly_results_orig_shape(r, &h, &w);
    ly_results_speed(r, &pre, &inf, &post);
    ly_results_count(r, &n);
    fputs("{\"path\": ", to);
    ly_json_string(to, image);
    if (frame)
        fprintf(to, ", \"frame\": %lld, \"timestamp\": %.6f", (long long)frame->index,
                frame->time_s);
    fprintf(to, ", \"original_shape\": [%d, %d], \"detections\": [", h, w);
    const char *task;
    ly_class_prob top[5];
    size_t n_top = 0;
    ly_results_task(r, &task);
    if (strcmp(task, "classify") == 0) ly_results_top(r, 5, top, &n_top);
    for (size_t i = 0; i < n; i++) {
        ly_detection d;
        ly_results_get(r, i, &d);
        fputs(i ? ", {\"class\": " : "{\"class\": ", to);
        ly_json_string(to, d.name);
        fprintf(to, ", \"class_id\": %d, \"confidence\": ", d.cls);
        ly_json_float32(to, d.conf);
        fputs(", \"bbox_xyxy\": [", to);
        for (int k = 0; k < 4; k++) {
            if (k) fputs(", ", to);
            ly_json_float32(to, d.xyxy[k]);
        }
        fputs("]}", to);
    }
    fputs("]", to);
    int tiles = 0;
    ly_results_tiles(r, &tiles);
    if (tiles) fprintf(to, ", \"tiled\": true, \"num_tiles\": %d", tiles);
    ly_image_view restored;
    int scale;
    if (strcmp(task, "restore") == 0 && ly_results_restored(r, &restored, &scale) == LY_OK)
        fprintf(to, ", \"restored_shape\": [%d, %d, 3], \"restore_scale\": %d", restored.height,
                restored.width, scale);
    if (n_top) {
        /* LibreYOLO's: "classification" is the first row of "top5" (Results.summary()) */
        fputs(", \"classification\": ", to);
        print_class_row(to, &top[0]);
        fputs(", \"top5\": [", to);
        for (size_t i = 0; i < n_top; i++) {
            if (i) fputs(", ", to);
            print_class_row(to, &top[i]);
        }
        fputs("]", to);
    }
    fprintf(to, ", \"speed\": {\"preprocess\": %.3f, \"inference\": %.3f, \"postprocess\": %.3f}}",
            pre, inf, post);
}

/* An image that could not be read or run, in the results. */
static void print_failed_result(FILE *to, const char *image, const char *error, const char *message)
{
    fputs("{\"path\": ", to);
    ly_json_string(to, image);
    fputs(", \"error\": ", to);
    ly_json_string(to, error);
    fputs(", \"message\": ", to);
    ly_json_string(to, message);
    fputs("}", to);
}

/* "dog" counted n times as LibreYOLO's summary line counts it: "2 dogs". */
static void print_count(const char *name, int cls, int n, bool first)
{
    char unnamed[32];
    snprintf(unnamed, sizeof unnamed, "%d", cls);
    printf("%s%d %s%s", first ? "" : ", ", n, name && *name ? name : unnamed, n > 1 ? "s" : "");
}

/* LibreYOLO's line per image, "image 1/3 a.jpg: 640x480 2 persons, 1 dog, 12.3ms" (classes
 * in the order of their best box; a classifier's top class and its confidence), and with
 * --verbose each box (or the top 5) under it. */
static void print_human(const char *image, size_t index, size_t total, bool verbose,
                        const ly_results *r)
{
    int h, w;
    double pre, inf, post;
    size_t n;
    ly_results_orig_shape(r, &h, &w);
    ly_results_speed(r, &pre, &inf, &post);
    ly_results_count(r, &n);
    const char *task, *base = strrchr(image, '/');
    ly_results_task(r, &task);
    if (total)
        printf("image %zu/%zu %s: %dx%d ", index, total, base && base[1] ? base + 1 : image, w, h);
    else
        printf("image %zu %s: %dx%d ", index, base && base[1] ? base + 1 : image, w, h);
    ly_image_view restored;
    int scale;
    if (strcmp(task, "restore") == 0 && ly_results_restored(r, &restored, &scale) == LY_OK) {
        printf("restored %dx%d (x%d), %.1fms\n", restored.width, restored.height, scale,
               pre + inf + post);
        return;
    }
    if (strcmp(task, "classify") == 0) {
        ly_class_prob top[5];
        size_t k = 0;
        ly_results_top(r, 5, top, &k);
        if (k) {
            char unnamed[32]; /* LibreYOLO's names.get(id, str(id)) */
            snprintf(unnamed, sizeof unnamed, "%d", top[0].cls);
            printf("%s %.4f, %.1fms\n", *top[0].name ? top[0].name : unnamed, (double)top[0].conf,
                   pre + inf + post);
        } else
            printf("(no classification), %.1fms\n", pre + inf + post);
        for (size_t i = 0; verbose && i < k; i++) {
            char cls[32];
            snprintf(cls, sizeof cls, "class %d", top[i].cls);
            printf("  %-16s %.4f  (class %d)\n", *top[i].name ? top[i].name : cls,
                   (double)top[i].conf, top[i].cls);
        }
        return;
    }
    ly_detection *d = calloc(n ? n : 1, sizeof *d);
    bool *counted = calloc(n ? n : 1, sizeof *counted);
    if (!d || !counted) {
        printf("%zu detections, %.1fms\n", n, pre + inf + post);
        free(d);
        free(counted);
        return;
    }
    for (size_t i = 0; i < n; i++)
        ly_results_get(r, i, &d[i]);
    for (size_t i = 0; i < n; i++) {
        if (counted[i]) continue;
        int same = 0;
        for (size_t j = i; j < n; j++)
            if (d[j].cls == d[i].cls) counted[j] = true, same++;
        print_count(d[i].name, d[i].cls, same, i == 0);
    }
    int tiles = 0;
    ly_results_tiles(r, &tiles);
    printf("%s", n ? "" : "(no detections)");
    if (tiles) printf(" (%d tiles)", tiles);
    printf(", %.1fms\n", pre + inf + post);
    for (size_t i = 0; verbose && i < n; i++) {
        char cls[32];
        snprintf(cls, sizeof cls, "class %d", d[i].cls);
        printf("  %-16s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", *d[i].name ? d[i].name : cls,
               (double)d[i].conf, (double)d[i].xyxy[0], (double)d[i].xyxy[1], (double)d[i].xyxy[2],
               (double)d[i].xyxy[3]);
    }
    free(d);
    free(counted);
}

/* Draw onto `im` (the decoded image) and write it into the save folder; a
 * restoration model's restored image instead (LibreYOLO's RestoredImage.save). */
/* A tiled prediction is saved as LibreYOLO saves one: its own folder
 * <stem>_<family>_<size>_<timestamp> in the save folder, with the tiles, the
 * annotated image, the grid and metadata.json (ly_results_save_tiled). */
static int save_tiled(run_state *rs, const char *image, const ly_image *im, const ly_results *r)
{
    ly_model_info info;
    ly_model_get_info(rs->model, &info);
    char stem[NAME_MAX];
    const char *base = strrchr(image, '/');
    base = base ? base + 1 : image;
    int len = is_url(image) ? (int)strcspn(base, "?#") : (int)strlen(base);
    const char *dot = memrchr(base, '.', (size_t)len);
    if (dot && dot != base) len = (int)(dot - base);
    snprintf(stem, sizeof stem, "%.*s", len, len ? base : "inference");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    localtime_r(&now.tv_sec, &tm);
    char when[32], dir[PATH_MAX];
    strftime(when, sizeof when, "%Y%m%d_%H%M%S", &tm);
    int n = snprintf(dir, sizeof dir, "%s/%s_%s_%s_%s_%06ld", rs->save_dir, stem, info.family,
                     info.size ? info.size : "", when, now.tv_nsec / 1000);
    if (n < 0 || (size_t)n >= sizeof dir)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "%s: path too long",
                           rs->save_dir);
    const char *ext = rs->a->file_format ? rs->a->file_format : "jpg";
    if (ly_results_save_tiled(r, im, rs->model, image, dir, ext) != LY_OK)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "%s", ly_last_error());
    return 0;
}

static int save_annotated(run_state *rs, const char *image, ly_image *im, const ly_results *r)
{
    int tiles = 0;
    ly_results_tiles(r, &tiles);
    if (tiles) return save_tiled(rs, image, im, r);
    const char *ext = rs->a->file_format ? rs->a->file_format : "jpg";
    char *path = ly_predict_output_path(rs->save_dir, image, ext, &rs->used);
    if (!path) return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
    ly_image_view restored;
    ly_status st;
    if (rs->restores && (st = ly_results_restored(r, &restored, NULL)) == LY_OK) {
        ly_image out = {(uint8_t *)restored.pixels, restored.width, restored.height};
        st = ly_image_save(path, &out, JPEG_QUALITY);
    } else if (!rs->restores) {
        st = ly_image_annotate(im, r);
        if (st == LY_OK) st = ly_image_save(path, im, JPEG_QUALITY);
    }
    free(path);
    if (st != LY_OK)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "%s", ly_last_error());
    return 0;
}

void ly_predict_emit_failure(run_state *rs, const char *source, const char *error,
                             const char *message)
{
    if (rs->results) {
        if (rs->n_results++) fputs(", ", rs->results);
        print_failed_result(rs->results, source, error, message);
    } else if (rs->a->jsonl) {
        print_failed_result(stdout, source, error, message);
        fputc('\n', stdout);
    } else {
        fprintf(stderr, "libreyolo predict: %s\n", message);
    }
}

void ly_predict_emit_result(run_state *rs, const char *source, const ly_results *r,
                            const ly_video_frame *frame)
{
    if (rs->results) {
        if (rs->n_results++) fputs(", ", rs->results);
        print_result(rs->results, source, r, frame);
    } else if (rs->a->jsonl) {
        print_result(stdout, source, r, frame);
        fputc('\n', stdout);
    } else {
        print_human(source, rs->index, rs->total, rs->a->verbose, r);
    }
}

/* Predict on sources[0..n) as one batch (ly_model_predict_batch): each
 * image decoded, those that decoded run together, every result (or
 * failure) given in source order; 0 or the first exit code. */
static int predict_batch(run_state *rs, char **sources, size_t n, size_t first_index)
{
    ly_image *im = calloc(n, sizeof *im);
    ly_image_view *views = calloc(n, sizeof *views);
    ly_results **r = calloc(n, sizeof *r);
    char **unread = calloc(n, sizeof *unread); /* a source's load error, NULL when it decoded */
    if (!im || !views || !r || !unread) {
        free(im), free(views), free(r), free(unread);
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
    }
    size_t good = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = sources[i];
        if ((is_url(s) ? ly_image_load_url(s, &im[i]) : ly_image_load(s, &im[i])) != LY_OK) {
            unread[i] = strdup(ly_last_error());
            if (!unread[i]) unread[i] = strdup("could not be read");
            continue;
        }
        views[good++] = (ly_image_view){im[i].pixels, im[i].width, im[i].height,
                                        (size_t)im[i].width * 3, LY_PIXELS_RGB};
    }
    ly_status st = ly_model_predict_batch(rs->model, views, good, &rs->a->options, r);
    char batch_error[2048];
    snprintf(batch_error, sizeof batch_error, "%s", st != LY_OK ? ly_last_error() : "");
    int code = 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        rs->index = first_index + i + 1;
        const char *s = sources[i];
        if (!im[i].pixels) { /* the images that decoded are views[0..good), in order */
            ly_predict_emit_failure(rs, s, "data_invalid",
                                    unread[i] ? unread[i] : "could not be read");
            if (!code) code = LY_EXIT_SOURCE;
            continue;
        }
        if (st != LY_OK) {
            char message[2300];
            snprintf(message, sizeof message, "%s: %s", s, batch_error);
            ly_predict_emit_failure(rs, s, "inference_failed", message);
            if (!code) code = LY_EXIT_FAILURE;
        } else {
            ly_predict_emit_result(rs, s, r[k], NULL);
            int saved = rs->save_dir ? save_annotated(rs, s, &im[i], r[k]) : 0;
            if (saved && !code) code = saved;
            ly_results_free(r[k]);
        }
        k++;
    }
    for (size_t i = 0; i < n; i++) {
        ly_image_free(&im[i]);
        free(unread[i]);
    }
    free(im), free(views), free(r), free(unread);
    fflush(stdout);
    return code;
}

/* Predict on one file; 0 or an exit code. */
static int predict_one(run_state *rs, const char *source)
{
    ly_image im;
    if ((is_url(source) ? ly_image_load_url(source, &im) : ly_image_load(source, &im)) != LY_OK) {
        ly_predict_emit_failure(rs, source, "data_invalid", ly_last_error());
        return LY_EXIT_SOURCE;
    }
    ly_image_view view = {im.pixels, im.width, im.height, (size_t)im.width * 3, LY_PIXELS_RGB};
    ly_results *r;
    int code = 0;
    /* Without an annotated copy to draw, the pixels go once preprocessed. */
    ly_status st = rs->save_dir && !rs->restores
                       ? ly_model_predict_image(rs->model, &view, &rs->a->options, &r)
                       : ly_model_predict_decoded(rs->model, &im, &rs->a->options, &r);
    if (st != LY_OK) {
        char message[2048];
        snprintf(message, sizeof message, "%s: %s", source, ly_last_error());
        ly_predict_emit_failure(rs, source, "inference_failed", message);
        code = LY_EXIT_FAILURE;
    } else {
        ly_predict_emit_result(rs, source, r, NULL);
        if (rs->save_dir) code = save_annotated(rs, source, &im, r);
        ly_results_free(r);
    }
    ly_image_free(&im);
    fflush(stdout);
    return code;
}

/* LibreYOLO's document around the results. */
static void print_document(const run_state *rs, const char *results, const ly_model_info *info)
{
    int imgsz = rs->a->options.imgsz > 0 ? rs->a->options.imgsz : (int)info->imgsz;
    fputs("{\"source\": ", stdout);
    ly_json_string(stdout, rs->a->source);
    fputs(", \"model\": ", stdout);
    ly_json_string(stdout, rs->a->model);
    fputs(", \"model_family\": ", stdout);
    ly_json_string(stdout, info->family && *info->family ? info->family : "unknown");
    fprintf(stdout, ", \"image_size\": [%d, %d], \"device\": \"cpu\", \"results\": [%s]", imgsz,
            imgsz, results ? results : "");
    if (rs->save_dir) {
        fputs(", \"output_path\": ", stdout);
        ly_json_string(stdout, rs->save_dir);
    }
    fputs(", \"schema_version\": 1}\n", stdout);
}

int ly_predict_results_begin(run_state *rs, char **text, size_t *size)
{
    *text = NULL;
    *size = 0;
    if (rs->a->json && !(rs->results = open_memstream(text, size)))
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
    return 0;
}

void ly_predict_results_end(run_state *rs, char **text, const ly_model_info *info)
{
    if (rs->results) {
        fclose(rs->results); /* sets *text */
        rs->results = NULL;
        print_document(rs, *text, info);
    } else if (rs->save_dir && !rs->a->jsonl) {
        printf("Results saved to %s\n", rs->save_dir);
    }
    free(*text);
    *text = NULL;
}

static int run_all(run_state *rs, char **sources, size_t n_sources, const ly_model_info *info)
{
    char *text;
    size_t text_size;
    int status = ly_predict_results_begin(rs, &text, &text_size);
    if (status) return status;
    double start = ly_cli_now_s();
    rs->total = n_sources;
    size_t step = rs->batch > 1 ? (size_t)rs->batch : 1;
    for (size_t i = 0; i < n_sources; i += step) {
        size_t n = n_sources - i < step ? n_sources - i : step;
        rs->index = i + 1;
        int code = step > 1 ? predict_batch(rs, sources + i, n, i) : predict_one(rs, sources[i]);
        /* the first failure decides the exit code, as the first exception would */
        if (code && !status) status = code;
        if (n_sources > 1) {
            double done = ly_cli_now_s() - start, rate = (double)(i + n) / (done > 0 ? done : 1e-9);
            ly_cli_progress("predict: %zu/%zu images, %.1f images/s, %.0f s left", i + n, n_sources,
                            rate, (double)(n_sources - i - n) / rate);
        }
    }
    ly_cli_progress_end();
    ly_predict_results_end(rs, &text, info);
    return status;
}

int ly_cli_predict(int argc, char **argv)
{
    predict_args a;
    memset(&a, 0, sizeof a);
    a.fused = -1;
    a.vid_stride = 1;
    ly_predict_options_init(&a.options);
    int code = parse_args(argc, argv, &a);
    if (code != 0) return code < 0 ? 0 : code;
    if (a.jsonl) ly_cli_set_json_errors(true);

    ly_source_list sources = {0};
    bool video = false;
    ly_video_is_source(a.source, &video);
    if (video ? (code = check_video_source(a.source)) != 0
              : (code = list_sources(a.source, &sources)) != 0)
        return code;
    /* A named model is fetched here rather than by the loader, so that a first
     * download shows the command's progress line. */
    char dir[PATH_MAX];
    bool cached = false;
    if (ly_model_cached(a.model, dir, sizeof dir, &cached) == LY_OK && !cached &&
        ly_cli_fetch_quietly("predict", a.model, dir, sizeof dir) != 0) {
        ly_source_list_free(&sources);
        return LY_EXIT_MODEL;
    }
    ly_model_options mo = {a.threads};
    ly_model *model;
    ly_status st = ly_model_load(a.model, &mo, &model);
    if (st != LY_OK) {
        ly_source_list_free(&sources);
        return ly_cli_model_failed("predict", st);
    }
    ly_model_info info;
    ly_model_get_info(model, &info);
    code = ly_cli_check_task("predict", info.task);
    if (!code && ly_predict_options_check(model, &a.options) != LY_OK)
        code = ly_cli_usage_error_code("predict", "config_range_error", "%s", ly_last_error());
    if (!code) code = ly_cli_apply_fused("predict", model, a.fused);
    run_state rs = {.a = &a, .model = model, .restores = strcmp(info.task, "restore") == 0};
    /* LibreYOLO batches where the family can and tiling is off; else one by one */
    if (!code && a.batch > 1 && (!info.batched || a.options.tiling)) {
        if (!ly_cli_quiet())
            fprintf(stderr,
                    "libreyolo predict: note: batch=%d: %s, so images and frames run one by "
                    "one (the results are the same)\n",
                    a.batch,
                    a.options.tiling ? "tiling=True predicts tile by tile"
                                     : "this model's network takes one image per call");
    } else if (!code && a.batch > 1) {
        rs.batch = a.batch;
    }
    char folder[PATH_MAX];
    if (!code && a.save && (code = save_folder(&a, info.task, folder, sizeof folder)) == 0)
        rs.save_dir = folder;
        /* Loading's temporaries are freed by now: give their pages back before the
         * runs reuse only part of them. */
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    if (!code && video && a.options.tiling)
        code = ly_cli_usage_error_code("predict", "config_unsupported",
                                       "tiling=True: tiled detection is for images; %s is a video "
                                       "(LibreYOLO ignores tiling there)",
                                       a.source);
    if (!code && video && rs.restores)
        code = ly_cli_fail("predict", LY_EXIT_USAGE, "config_unsupported", NULL,
                           "%s: a restoration model runs on images, not on video", a.source);
    if (!code)
        code = video ? ly_predict_video(&rs, a.source, &info)
                     : run_all(&rs, sources.paths, sources.count, &info);
    for (size_t i = 0; i < rs.used.n; i++)
        free(rs.used.names[i]);
    free(rs.used.names);
    ly_model_free(model);
    ly_source_list_free(&sources);
    return code;
}
