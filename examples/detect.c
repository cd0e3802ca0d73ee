/* SPDX-License-Identifier: MIT */
/*
 * libreyolo as a library: load a model, detect objects in an image, print the
 * boxes, free everything, checking every status.
 *
 *   cc detect.c $(pkg-config --cflags --libs libreyolo) -o detect
 *   ./detect [MODEL] IMAGE        (MODEL: a checkpoint, a .pte, or a name such
 *                                  as nanodet, the default, or yolo9-t)
 *
 * Every call returns a ly_status; on failure ly_last_error() says what was
 * wrong (the file, the field, what was expected) for this thread.
 */
#include <libreyolo/libreyolo.h>
#include <libreyolo/model.h>

#include <stdio.h>

static int failed(const char *what)
{
    fprintf(stderr, "detect: %s: %s\n", what, ly_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s [MODEL] IMAGE\n", argv[0]);
        return 2;
    }
    const char *model_path = argc == 3 ? argv[1] : "nanodet";
    const char *image = argv[argc - 1];

    ly_model *model = NULL;
    if (ly_model_load(model_path, NULL, &model) != LY_OK) return failed(model_path);

    ly_predict_options options;
    ly_results *results = NULL;
    if (ly_predict_options_init(&options) != LY_OK ||
        ly_model_predict_file(model, image, &options, &results) != LY_OK) {
        ly_model_free(model);
        return failed(image);
    }
    size_t count = 0;
    int status = 0;
    if (ly_results_count(results, &count) != LY_OK) status = failed("ly_results_count");
    printf("%s: %zu detections\n", image, count);
    for (size_t i = 0; i < count && status == 0; i++) {
        ly_detection d;
        if (ly_results_get(results, i, &d) != LY_OK) {
            status = failed("ly_results_get");
            break;
        }
        /* d.name belongs to the results: valid until ly_results_free */
        printf("  %-16s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", d.name, d.conf, d.xyxy[0], d.xyxy[1],
               d.xyxy[2], d.xyxy[3]);
    }
    if (ly_results_free(results) != LY_OK && status == 0) status = failed("ly_results_free");
    if (ly_model_free(model) != LY_OK && status == 0) status = failed("ly_model_free");
    return status;
}
