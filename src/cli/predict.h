/* SPDX-License-Identifier: MIT */
/* `libreyolo predict`'s pieces shared by its image loop (predict.c) and its
 * video loop (predict_video.c). */
#ifndef LY_CLI_PREDICT_H
#define LY_CLI_PREDICT_H

#include "libreyolo/image.h"
#include "libreyolo/model.h"
#include "libreyolo/video.h"

#include <stdio.h>

#define MAX_CLASSES 4096

typedef struct predict_args {
    const char *model;
    const char *source;
    const char *save_dir; /* --save DIR */
    const char *project, *name;
    const char *file_format; /* "jpg" or "png": saved images' (LibreYOLO's output_file_format) */
    bool save, no_save, exist_ok, json, jsonl, verbose;
    int threads;
    int vid_stride; /* video: every Nth frame (LibreYOLO's vid_stride) */
    int batch;      /* images (and frames) per network call, where the model takes a batch */
    int fused;      /* -1: the model's default */
    ly_predict_options options;
    int classes[MAX_CLASSES];
} predict_args;

/* The names this run has written, so that two inputs with one stem (a/x.jpg
 * and b/x.png) get x.jpg and x_2.jpg rather than one overwriting the other. */
typedef struct used_names {
    char **names;
    size_t n, cap;
} used_names;

typedef struct run_state {
    const predict_args *a;
    ly_model *model;
    const char *save_dir; /* NULL: no images written */
    bool restores;        /* a restoration model: saves its output, draws nothing */
    used_names used;
    FILE *results; /* --json: the results array, written as they come */
    size_t n_results;
    size_t index, total; /* the image being predicted (from 1) and how many there are */
    int batch;           /* images per network call (> 1 only where the model batches) */
} run_state;

/* DIR/<stem of the source>.<ext>, as LibreYOLO names saved files, made unique
 * in this run; malloc'ed, NULL when out of memory. */
char *ly_predict_output_path(const char *dir, const char *source, const char *ext,
                             used_names *used);
/* One result as the command prints it: a JSON object (--json, --jsonl; with
 * the frame's "frame" (its index) and "timestamp" for video) or LibreYOLO's line.
 * `total` 0: not known (a live source). */
void ly_predict_emit_result(run_state *rs, const char *source, const ly_results *r,
                            const ly_video_frame *frame);
/* A source or frame that could not be read or run, in the results. */
void ly_predict_emit_failure(run_state *rs, const char *source, const char *error,
                             const char *message);
/* --json's results array, opened before the first result and closed into
 * LibreYOLO's document after the last (no-ops without --json). */
int ly_predict_results_begin(run_state *rs, char **text, size_t *size);
void ly_predict_results_end(run_state *rs, char **text, const ly_model_info *info);
/* Ctrl-C while a command reads `reader`: watch sets the handler (which
 * cancels the reader's wait), seen says whether it came, unwatch restores
 * the previous handler. One video at a time. */
void ly_cli_sigint_watch(ly_video_reader *reader);
bool ly_cli_sigint_seen(void);
void ly_cli_sigint_unwatch(void);
/* --classes as LibreYOLO's CLI takes it ([0,2,5], (0,2), 0,2,5, 0,) into
 * classes[0..MAX_CLASSES) and options; 0 or the usage error's exit code
 * (its message names `command`). predict and track read it here. */
int ly_predict_parse_classes(const char *command, const char *text, int *classes,
                             ly_predict_options *options);
/* What a saved video is called: the source's file name without its
 * extension (a stream's last path part, "camera0", a sequence's folder). */
void ly_predict_video_stem(const char *source, char *out, size_t size);
/* Predict on the frames of a video source; 0 or an exit code. */
int ly_predict_video(run_state *rs, const char *source, const ly_model_info *info);

#endif
