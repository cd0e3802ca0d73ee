/* `libreyolo predict`: detections on image files, printed for people or as JSON
 * lines for scripts, and annotated copies of the images. */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/fetch_progress.h"
#include "cli/json_out.h"
#include "libreyolo/image.h"
#include "libreyolo/model.h"

#include <dirent.h>
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

#define DEFAULT_SAVE_DIR "runs/predict"
#define DEFAULT_MODEL "nanodet"
#define JPEG_QUALITY 90

static void print_usage(FILE *to)
{
    fputs("usage: libreyolo predict --source PATH [--model M] [--conf X] [--iou X] [--max-det N]\n"
          "                         [--imgsz S] [--classes 0,2,5] [--save DIR | --no-save]\n"
          "                         [--threads N] [--json]\n"
          "\n"
          "Detects objects in an image, or in every image of a directory (JPEG, PNG, BMP; in\n"
          "name order), with the model's own pre- and post-processing.\n"
          "  --model M        a checkpoint (.pt or .safetensors), a TF.js graph model (.json),\n"
          "                   an ExecuTorch program (.pte), or a named model: \"nanodet\"\n"
          "                   (NanoDet-g, COCO; the default), fetched into the cache on first\n"
          "                   use (see libreyolo fetch --help)\n"
          "  --source PATH    an image file or a directory of them\n"
          "  --conf X         keep detections scoring above X (default: the model's,\n"
          "                   0.25 for YOLO9, 0.35 for NanoDet)\n"
          "  --iou X          NMS: suppress boxes overlapping a better one of their class by\n"
          "                   IoU > X (default: 0.45 YOLO9, 0.6 NanoDet)\n"
          "  --max-det N      at most N detections per image (default: 300 YOLO9, 100 NanoDet)\n"
          "  --imgsz S        square input size, a multiple of 32 (default: the checkpoint's)\n"
          "  --classes LIST   only these class ids, comma-separated\n"
          "  --save DIR       write annotated images (boxes, names, scores) into DIR; the\n"
          "                   default is " DEFAULT_SAVE_DIR " without --json, none with it\n"
          "  --no-save        write no images\n"
          "  --threads N      worker threads (default: LIBREYOLO_THREADS, else all CPUs)\n"
          "  --json           one JSON object per image and line: {\"image\", \"orig_shape\":\n"
          "                   [h, w], \"speed_ms\": {\"preprocess\", \"inference\", "
          "\"postprocess\"},\n"
          "                   \"detections\": [{\"cls\", \"name\", \"conf\", \"xyxy\"}]}\n",
          to);
}

static bool parse_float(const char *text, float lo, float hi, float *value)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi)) return false;
    *value = v;
    return true;
}

#define MAX_CLASSES 4096

typedef struct predict_args {
    const char *model;
    const char *source;
    const char *save_dir;
    bool no_save, json;
    int threads;
    ly_predict_options options;
    int classes[MAX_CLASSES];
} predict_args;

static int parse_classes(const char *text, predict_args *a)
{
    size_t n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT_MAX || (*end && *end != ','))
            return ly_cli_usage_error("predict", "--classes '%s': expected class ids like 0,2,5",
                                      text);
        if (n == MAX_CLASSES)
            return ly_cli_usage_error("predict", "--classes: at most %d ids", MAX_CLASSES);
        a->classes[n++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return ly_cli_usage_error("predict", "--classes '%s': trailing comma", text);
    }
    if (n == 0) return ly_cli_usage_error("predict", "--classes: give at least one class id");
    a->options.classes = a->classes;
    a->options.n_classes = n;
    return 0;
}

static int parse_args(int argc, char **argv, predict_args *a)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(stdout);
            return -1;
        }
        if ((v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            a->model = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--source", &missing))) {
            a->source = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--conf", &missing))) {
            if (!parse_float(v, 0.f, 1.f, &a->options.conf))
                return ly_cli_usage_error("predict", "--conf '%s': expected a number in [0, 1]", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--iou", &missing))) {
            if (!parse_float(v, 0.f, 1.f, &a->options.iou))
                return ly_cli_usage_error("predict", "--iou '%s': expected a number in [0, 1]", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--max-det", &missing))) {
            if (!ly_cli_parse_int(v, 1, INT_MAX, &a->options.max_det))
                return ly_cli_usage_error("predict", "--max-det '%s': expected a positive integer",
                                          v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--imgsz", &missing))) {
            if (!ly_cli_parse_int(v, 32, 32768, &a->options.imgsz) || a->options.imgsz % 32)
                return ly_cli_usage_error("predict", "--imgsz '%s': expected a multiple of 32", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--classes", &missing))) {
            int code = parse_classes(v, a);
            if (code) return code;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--save", &missing))) {
            a->save_dir = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--threads", &missing))) {
            if (!ly_cli_parse_int(v, 1, 4096, &a->threads))
                return ly_cli_usage_error("predict", "--threads '%s': expected a positive integer",
                                          v);
        } else if (strcmp(arg, "--no-save") == 0) {
            a->no_save = true;
        } else if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (missing) {
            return ly_cli_usage_error("predict", "%s needs a value", arg);
        } else {
            return ly_cli_usage_error("predict", "unexpected argument '%s'", arg);
        }
    }
    if (!a->model) a->model = DEFAULT_MODEL;
    if (!a->source) return ly_cli_usage_error("predict", "missing --source");
    if (a->save_dir && a->no_save)
        return ly_cli_usage_error("predict", "--save and --no-save exclude each other");
    if (!a->save_dir && !a->no_save && !a->json) a->save_dir = DEFAULT_SAVE_DIR;
    if (a->no_save) a->save_dir = NULL;
    return 0;
}

/* ---- Sources ------------------------------------------------------------ */

static bool is_image_name(const char *name)
{
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t m = strlen(exts[i]);
        if (n > m && strcasecmp(name + n - m, exts[i]) == 0) return true;
    }
    return false;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* The image files to process: `source` itself, or the images in it. */
static int list_sources(const char *source, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    struct stat st;
    if (stat(source, &st) != 0) {
        fprintf(stderr, "libreyolo predict: %s: %s\n", source,
                errno == ENOENT ? "no such file or directory" : strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        char **list = malloc(sizeof *list);
        if (!list || !(list[0] = strdup(source))) {
            free(list);
            fputs("libreyolo predict: out of memory\n", stderr);
            return 1;
        }
        *out = list;
        *count = 1;
        return 0;
    }
    DIR *dir = opendir(source);
    if (!dir) {
        fprintf(stderr, "libreyolo predict: %s: cannot list: %s\n", source, strerror(errno));
        return 1;
    }
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    struct dirent *e;
    bool slash = source[strlen(source) - 1] == '/';
    while (list && (e = readdir(dir))) {
        if (e->d_name[0] == '.' || !is_image_name(e->d_name)) continue;
        if (n == cap) {
            char **grown = realloc(list, 2 * cap * sizeof *list);
            if (!grown) break;
            list = grown, cap *= 2;
        }
        size_t len = strlen(source) + strlen(e->d_name) + 2;
        if (!(list[n] = malloc(len))) break;
        snprintf(list[n], len, "%s%s%s", source, slash ? "" : "/", e->d_name);
        n++;
    }
    bool failed = !list || e != NULL;
    closedir(dir);
    if (failed) {
        if (list) free_list(list, n);
        fputs("libreyolo predict: out of memory\n", stderr);
        return 1;
    }
    if (n == 0) {
        free(list);
        fprintf(stderr, "libreyolo predict: %s: no .jpg, .jpeg, .png or .bmp images in it\n",
                source);
        return 1;
    }
    qsort(list, n, sizeof *list, compare_names);
    *out = list;
    *count = n;
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
        *s = saved;
        if (err || saved == '\0') break;
    }
    struct stat st;
    if (!err && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) err = ENOTDIR;
    free(p);
    return err;
}

/* DIR/<name of the image>, as .png when the image is not a JPEG or PNG. */
static char *output_path(const char *dir, const char *image)
{
    const char *base = strrchr(image, '/');
    base = base ? base + 1 : image;
    size_t n = strlen(base);
    bool keep = (n > 4 && (strcasecmp(base + n - 4, ".jpg") == 0 ||
                           strcasecmp(base + n - 4, ".png") == 0)) ||
                (n > 5 && strcasecmp(base + n - 5, ".jpeg") == 0);
    const char *dot = strrchr(base, '.');
    int stem = keep || !dot ? (int)n : (int)(dot - base);
    size_t len = strlen(dir) + n + 8;
    char *out = malloc(len);
    if (out) snprintf(out, len, "%s/%.*s%s", dir, stem, base, keep ? "" : ".png");
    return out;
}

/* ---- Output ------------------------------------------------------------- */

static void print_json(const char *image, const ly_results *r)
{
    int h, w;
    double pre, inf, post;
    size_t n;
    ly_results_orig_shape(r, &h, &w);
    ly_results_speed(r, &pre, &inf, &post);
    ly_results_count(r, &n);
    fputs("{\"image\":", stdout);
    ly_json_string(stdout, image);
    printf(",\"orig_shape\":[%d,%d],\"speed_ms\":{\"preprocess\":%.3f,\"inference\":%.3f,"
           "\"postprocess\":%.3f},\"detections\":[",
           h, w, pre, inf, post);
    for (size_t i = 0; i < n; i++) {
        ly_detection d;
        ly_results_get(r, i, &d);
        printf("%s{\"cls\":%d,\"name\":", i ? "," : "", d.cls);
        ly_json_string(stdout, d.name);
        fputs(",\"conf\":", stdout);
        ly_json_number(stdout, d.conf);
        fputs(",\"xyxy\":[", stdout);
        for (int k = 0; k < 4; k++) {
            if (k) fputc(',', stdout);
            ly_json_number(stdout, d.xyxy[k]);
        }
        fputs("]}", stdout);
    }
    fputs("]}\n", stdout);
}

static void print_human(const char *image, const ly_results *r)
{
    int h, w;
    double pre, inf, post;
    size_t n;
    ly_results_orig_shape(r, &h, &w);
    ly_results_speed(r, &pre, &inf, &post);
    ly_results_count(r, &n);
    printf("%s: %dx%d, %zu detection%s (%.1f ms preprocess, %.1f ms inference, %.1f ms "
           "postprocess)\n",
           image, w, h, n, n == 1 ? "" : "s", pre, inf, post);
    for (size_t i = 0; i < n; i++) {
        ly_detection d;
        ly_results_get(r, i, &d);
        char cls[32];
        snprintf(cls, sizeof cls, "class %d", d.cls);
        printf("  %-16s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", *d.name ? d.name : cls, (double)d.conf,
               (double)d.xyxy[0], (double)d.xyxy[1], (double)d.xyxy[2], (double)d.xyxy[3]);
    }
}

/* Draw onto `im` (the decoded image) and write it into `dir`. */
static int save_annotated(const char *dir, const char *image, ly_image *im, const ly_results *r,
                          bool quiet)
{
    char *path = output_path(dir, image);
    if (!path) {
        fputs("libreyolo predict: out of memory\n", stderr);
        return 1;
    }
    ly_status st = ly_image_annotate(im, r);
    if (st == LY_OK) st = ly_image_save(path, im, JPEG_QUALITY);
    int code = 0;
    if (st != LY_OK) {
        fprintf(stderr, "libreyolo predict: %s\n", ly_last_error());
        code = 1;
    } else if (!quiet) {
        printf("  saved %s\n", path);
    }
    free(path);
    return code;
}

/* Predict on one file; 0 or 1. */
static int predict_one(ly_model *model, const predict_args *a, const char *source)
{
    ly_image im;
    if (ly_image_load(source, &im) != LY_OK) {
        fprintf(stderr, "libreyolo predict: %s\n", ly_last_error());
        return 1;
    }
    ly_image_view view = {im.pixels, im.width, im.height, (size_t)im.width * 3, LY_PIXELS_RGB};
    ly_results *r;
    int code = 0;
    if (ly_model_predict_image(model, &view, &a->options, &r) != LY_OK) {
        fprintf(stderr, "libreyolo predict: %s: %s\n", source, ly_last_error());
        code = 1;
    } else {
        if (a->json)
            print_json(source, r);
        else
            print_human(source, r);
        if (a->save_dir) code = save_annotated(a->save_dir, source, &im, r, a->json);
        ly_results_free(r);
    }
    ly_image_free(&im);
    fflush(stdout);
    return code;
}

int ly_cli_predict(int argc, char **argv)
{
    predict_args a;
    memset(&a, 0, sizeof a);
    ly_predict_options_init(&a.options);
    int code = parse_args(argc, argv, &a);
    if (code != 0) return code < 0 ? 0 : code;

    char **sources;
    size_t n_sources;
    if (list_sources(a.source, &sources, &n_sources) != 0) return 1;
    if (a.save_dir) {
        int err = make_dirs(a.save_dir);
        if (err) {
            fprintf(stderr, "libreyolo predict: --save %s: cannot create the directory: %s\n",
                    a.save_dir, strerror(err));
            free_list(sources, n_sources);
            return 1;
        }
    }
    /* A named model is fetched here rather than by the loader, so that a first
     * download shows the command's progress line. */
    char dir[PATH_MAX];
    bool cached = false;
    if (ly_model_cached(a.model, dir, sizeof dir, &cached) == LY_OK && !cached &&
        ly_cli_fetch_quietly("predict", a.model, dir, sizeof dir) != 0) {
        free_list(sources, n_sources);
        return 1;
    }
    ly_model_options mo = {a.threads};
    ly_model *model;
    if (ly_model_load(a.model, &mo, &model) != LY_OK) {
        fprintf(stderr, "libreyolo predict: %s\n", ly_last_error());
        free_list(sources, n_sources);
        return 1;
    }
    /* Loading's temporaries are freed by now: give their pages back before the
     * runs reuse only part of them. */
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    int status = 0;
    for (size_t i = 0; i < n_sources; i++)
        if (predict_one(model, &a, sources[i]) != 0) status = 1;
    ly_model_free(model);
    free_list(sources, n_sources);
    return status;
}
