/* SPDX-License-Identifier: MIT */
/* `libreyolo predict` on a video source: every vid_stride-th frame predicted
 * as an image is, its result printed as it is done, and with --save the
 * annotated frames written as a video (LibreYOLO's run_video_inference). */
#include "cli/cli_util.h"
#include "cli/predict.h"

#include <ctype.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Ctrl-C: the loop stops after the frame in hand (a wait on a live source
 * ends at once) and the video written so far is finished, not lost. */
static volatile sig_atomic_t interrupted;
static ly_video_reader *_Atomic reading;
static struct sigaction previous_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    ly_video_reader *r = atomic_load(&reading);
    if (r) ly_video_cancel(r);
}

void ly_cli_sigint_watch(ly_video_reader *reader)
{
    interrupted = 0;
    atomic_store(&reading, reader);
    struct sigaction action = {.sa_handler = on_sigint};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_sigint);
}

bool ly_cli_sigint_seen(void)
{
    return interrupted != 0;
}

void ly_cli_sigint_unwatch(void)
{
    sigaction(SIGINT, &previous_sigint, NULL);
    atomic_store(&reading, NULL);
}

void ly_predict_video_stem(const char *source, char *out, size_t size)
{
    if (strspn(source, "0123456789") == strlen(source)) {
        snprintf(out, size, "camera%s", source);
        return;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(source, "?#"), source);
    if (strchr(path, '%')) { /* frames/%04d.png: the folder names the sequence */
        char *slash = strrchr(path, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(path, sizeof path, "sequence");
    }
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    int len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    snprintf(out, size, "%.*s", len, *base ? base : "video");
}

/* The source's extension, lowercase, when it names a container ("mp4"), else "". */
static void video_extension(const char *source, char *out, size_t size)
{
    out[0] = '\0';
    size_t n = strcspn(source, "?#");
    const char *dot = NULL;
    for (size_t i = 0; i < n; i++)
        if (source[i] == '.')
            dot = source + i;
        else if (source[i] == '/')
            dot = NULL;
    if (!dot || strchr(source, '%') || (size_t)(source + n - dot) >= size) return;
    size_t k = 0;
    for (const char *p = dot + 1; p < source + n; p++)
        out[k++] = (char)tolower((unsigned char)*p);
    out[k] = '\0';
}

/* The writer for the annotated video: the source's container and codec when
 * this build encodes them, else MP4 with MPEG-4 part 2 (LibreYOLO's mp4v).
 * 0 or an exit code. */
static int open_writer(run_state *rs, const char *source, const ly_video_info *vi, double fps,
                       ly_video_writer **out)
{
    char stem[NAME_MAX], ext[16], name[NAME_MAX + 32];
    ly_predict_video_stem(source, stem, sizeof stem);
    video_extension(source, ext, sizeof ext);
    char *path = NULL;
    ly_status st = LY_E_UNSUPPORTED;
    if (*ext && !vi->live) {
        snprintf(name, sizeof name, "%s.%s", stem, ext);
        path = ly_predict_output_path(rs->save_dir, name, ext, &rs->used);
        if (!path)
            return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
        st = ly_video_writer_open(path, vi->width, vi->height, fps, vi->codec, out);
        if (st != LY_OK && st != LY_E_UNSUPPORTED) {
            int code = ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                                   ly_last_error());
            free(path);
            return code;
        }
        if (st != LY_OK && !ly_cli_quiet())
            fprintf(stderr, "libreyolo predict: note: %s; writing MP4 (MPEG-4 part 2) instead\n",
                    ly_last_error());
        if (st != LY_OK) {
            /* the name stays reserved: harmless, and a later source keeps its own */
            free(path);
            path = NULL;
        }
    }
    if (st != LY_OK) {
        snprintf(name, sizeof name, "%s.mp4", stem);
        path = ly_predict_output_path(rs->save_dir, name, "mp4", &rs->used);
        if (!path)
            return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
        st = ly_video_writer_open(path, vi->width, vi->height, fps, NULL, out);
    }
    free(path);
    if (st != LY_OK)
        return ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                           ly_last_error());
    return 0;
}

/* Draw a frame's result as the image loop does (boxes, or a classifier's top 5). */
static ly_status annotate(ly_image *frame, const ly_results *r)
{
    const char *task;
    ly_results_task(r, &task);
    if (strcmp(task, "classify") == 0) {
        ly_class_prob top[5];
        size_t k = 0;
        ly_results_top(r, 5, top, &k);
        return ly_image_annotate_classes(frame, top, k);
    }
    return ly_image_annotate(frame, r);
}

int ly_predict_video(run_state *rs, const char *source, const ly_model_info *info)
{
    ly_video_options vo;
    ly_video_options_init(&vo);
    vo.vid_stride = rs->a->vid_stride > 0 ? rs->a->vid_stride : 1;
    ly_video_reader *in;
    ly_status st = ly_video_open(source, &vo, &in);
    if (st != LY_OK)
        return ly_cli_fail("predict", LY_EXIT_SOURCE,
                           st == LY_E_NOT_FOUND ? "source_not_found" : "data_invalid", NULL, "%s",
                           ly_last_error());
    ly_video_info vi;
    ly_video_get_info(in, &vi);
    /* LibreYOLO's count: frames // vid_stride; ours counts the frames read
     * exactly (0, N, 2N, ...) */
    rs->total =
        vi.frame_count > 0 ? (size_t)((vi.frame_count + vo.vid_stride - 1) / vo.vid_stride) : 0;
    ly_video_writer *out = NULL;
    char *text;
    size_t text_size;
    int status = ly_predict_results_begin(rs, &text, &text_size);
    if (!status && rs->save_dir)
        status = open_writer(rs, source, &vi, vi.fps / vo.vid_stride, &out);
    if (status) {
        if (rs->results) fclose(rs->results), rs->results = NULL;
        free(text);
        ly_video_close(in);
        return status;
    }

    ly_cli_sigint_watch(in);

    /* batch > 1: that many frames read, then run as one batch (a live
     * source's results come a batch late) */
    size_t batch = rs->batch > 1 ? (size_t)rs->batch : 1;
    ly_image *frames = calloc(batch, sizeof *frames);
    ly_video_frame *at = calloc(batch, sizeof *at);
    ly_image_view *views = calloc(batch, sizeof *views);
    ly_results **r = calloc(batch, sizeof *r);
    if (!frames || !at || !views || !r)
        status = ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
    double start = ly_cli_now_s();
    size_t done = 0;
    bool ended = false;
    while (!status && !ended && !ly_cli_sigint_seen()) {
        size_t n = 0;
        while (n < batch && !ly_cli_sigint_seen()) {
            bool got;
            st = ly_video_read(in, &frames[n], &at[n], &got);
            if (st != LY_OK) {
                if (ly_cli_sigint_seen()) break;
                ly_predict_emit_failure(rs, source, "data_invalid", ly_last_error());
                status = LY_EXIT_SOURCE;
                break;
            }
            if (!got) {
                ended = true;
                break;
            }
            views[n] = (ly_image_view){frames[n].pixels, frames[n].width, frames[n].height,
                                       (size_t)frames[n].width * 3, LY_PIXELS_RGB};
            n++;
        }
        /* the frames read before a failure or an interruption are still done */
        if (!n) break;
        if (ly_model_predict_batch(rs->model, views, n, &rs->a->options, r) != LY_OK) {
            char message[2048];
            snprintf(message, sizeof message, "%s: frame %lld: %s", source, (long long)at[0].index,
                     ly_last_error());
            ly_predict_emit_failure(rs, source, "inference_failed", message);
            if (!status) status = LY_EXIT_FAILURE;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            rs->index = ++done;
            ly_predict_emit_result(rs, source, r[i], &at[i]);
            if (out && !status &&
                ((st = annotate(&frames[i], r[i])) != LY_OK ||
                 (st = ly_video_write(out, &frames[i])) != LY_OK))
                status = ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                                     ly_last_error());
            ly_results_free(r[i]);
        }
        fflush(stdout);
        double seconds = ly_cli_now_s() - start,
               fps = (double)done / (seconds > 0 ? seconds : 1e-9);
        if (rs->total)
            ly_cli_progress("predict: frame %zu/%zu, %.1f frames/s, %.0f s left", done, rs->total,
                            fps, (double)(rs->total > done ? rs->total - done : 0) / fps);
        else
            ly_cli_progress("predict: frame %zu, %.1f frames/s", done, fps);
    }
    ly_cli_sigint_unwatch();
    ly_cli_progress_end();
    for (size_t i = 0; frames && i < batch; i++)
        ly_image_free(&frames[i]);
    free(frames), free(at), free(views), free(r);
    ly_video_close(in);
    /* An interruption finishes the frames written (the file plays up to
     * there); a failure leaves nothing half-written. */
    if (out && status)
        ly_video_writer_discard(out);
    else if (out && ly_video_writer_close(out) != LY_OK)
        status = ly_cli_fail("predict", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                             ly_last_error());
    ly_predict_results_end(rs, &text, info);
    if (ly_cli_sigint_seen()) {
        if (!ly_cli_quiet())
            fprintf(stderr, "libreyolo predict: interrupted after %zu frame%s%s\n", done,
                    done == 1 ? "" : "s", out ? "; the video written so far is saved" : "");
        return status ? status : 130; /* the shell's code for SIGINT */
    }
    return status;
}
