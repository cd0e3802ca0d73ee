/* SPDX-License-Identifier: MIT */
/* `libreyolo track`: LibreYOLO's model.track on the command line (its own CLI
 * has none): the detector on every vid_stride-th frame at the tracker's
 * track_low_thresh, ByteTrack on its detections, a line (or a JSON object) per
 * frame, and with save the annotated video in runs/track/. */
#include "libreyolo/track.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "cli/fetch_progress.h"
#include "cli/json_out.h"
#include "cli/predict.h"
#include "libreyolo/fetch.h"
#include "libreyolo/image.h"
#include "libreyolo/model.h"
#include "libreyolo/video.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void ly_cli_usage_track(FILE *to)
{
    fputs("usage: libreyolo track source=VIDEO [model=M] [iou=X] [imgsz=S] [classes=[0,2]]\n"
          "                       [max_det=N] [vid_stride=N] [save] [output_path=P] [threads=N]\n"
          "                       [tracker options] [--jsonl]\n"
          "\n"
          "Follows objects through a video (a file, stream, camera or image sequence, as predict\n"
          "reads it) with ByteTrack as LibreYOLO's model.track does: the detector runs at\n"
          "track_low_thresh on every frame, the tracker keeps the ids. One line per frame, or\n"
          "with --jsonl one JSON object per frame: {\"path\", \"frame\", \"timestamp\",\n"
          "\"original_shape\", \"detections\": [{\"class\", \"class_id\", \"confidence\",\n"
          "\"bbox_xyxy\", \"track_id\"}], \"speed\"}.\n"
          "  --model M        as predict's (default: nanodet)\n"
          "  --source VIDEO   a video file, an rtsp:// or http(s) stream, a camera number or an\n"
          "                   image sequence\n"
          "  --iou X --imgsz S --classes LIST --max-det N --threads N   as predict's\n"
          "  --vid-stride N   track every Nth frame (default 1)\n"
          "  --save           write the annotated video (a colour per track, \"#<id> 0.87\") as\n"
          "                   runs/track/<stem>.mp4 (<stem>2.mp4, ... when it exists)\n"
          "  --output-path P  write it to P instead\n"
          "  --track-conf X   LibreYOLO's track_conf: accepted and, as in LibreYOLO, changes\n"
          "                   nothing (a warning names track_high_thresh, which does)\n"
          "tracker options (LibreYOLO's TrackConfig, its defaults):\n"
          "  --track-high-thresh X (0.25) --track-low-thresh X (0.1) --new-track-thresh X (0.25)\n"
          "  --match-thresh X (0.8) --match-thresh-low X (0.5) --match-thresh-unconfirmed X (0.7)\n"
          "  --track-buffer N (30) --frame-rate N (30; never the video's)\n"
          "  --fuse-score / --no-fuse-score (on) --minimum-consecutive-frames N (1)\n"
          "  --jsonl          one JSON object per frame and no summary line\n",
          to);
}

typedef struct track_args {
    const char *model, *source, *output_path;
    bool save, jsonl;
    int threads, vid_stride;
    ly_predict_options options;
    int classes[MAX_CLASSES];
    ly_track_config cfg;
    bool track_conf_given;
    double track_conf;
} track_args;

static bool parse_double(const char *text, double *value)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno) return false;
    *value = v;
    return true;
}

static int parse_args(int argc, char **argv, track_args *a)
{
    static const struct {
        const char *flag;
        size_t offset;
    } thresholds[] = {
        {"--track-high-thresh", offsetof(ly_track_config, track_high_thresh)},
        {"--track-low-thresh", offsetof(ly_track_config, track_low_thresh)},
        {"--new-track-thresh", offsetof(ly_track_config, new_track_thresh)},
        {"--match-thresh", offsetof(ly_track_config, match_thresh)},
        {"--match-thresh-low", offsetof(ly_track_config, match_thresh_low)},
        {"--match-thresh-unconfirmed", offsetof(ly_track_config, match_thresh_unconfirmed)},
    };
    static const struct {
        const char *flag;
        size_t offset;
    } counts[] = {
        {"--track-buffer", offsetof(ly_track_config, track_buffer)},
        {"--frame-rate", offsetof(ly_track_config, frame_rate)},
        {"--minimum-consecutive-frames", offsetof(ly_track_config, minimum_consecutive_frames)},
    };
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false, done = false;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            ly_cli_usage_track(stdout);
            return -1;
        }
        for (size_t k = 0; k < sizeof thresholds / sizeof thresholds[0] && !done; k++)
            if ((v = ly_cli_option_value(argc, argv, &i, thresholds[k].flag, &missing))) {
                if (!parse_double(v, (double *)((char *)&a->cfg + thresholds[k].offset)))
                    return ly_cli_usage_error_code("track", "config_type_error",
                                                   "%s '%s': expected a number", thresholds[k].flag,
                                                   v);
                done = true;
            }
        for (size_t k = 0; k < sizeof counts / sizeof counts[0] && !done; k++)
            if ((v = ly_cli_option_value(argc, argv, &i, counts[k].flag, &missing))) {
                if (!ly_cli_parse_int(v, INT_MIN, INT_MAX,
                                      (int *)((char *)&a->cfg + counts[k].offset)))
                    return ly_cli_usage_error_code("track", "config_type_error",
                                                   "%s '%s': expected an integer", counts[k].flag,
                                                   v);
                done = true;
            }
        if (done) continue;
        if ((v = ly_cli_option_value(argc, argv, &i, "--model", &missing))) {
            a->model = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--source", &missing))) {
            a->source = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--output-path", &missing))) {
            a->output_path = v;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--iou", &missing))) {
            double x;
            if (!parse_double(v, &x))
                return ly_cli_usage_error("track", "--iou '%s': expected a number", v);
            a->options.iou = (float)x;
            a->options.given |= LY_PREDICT_IOU;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--imgsz", &missing))) {
            int s;
            if (!ly_cli_parse_int(v, INT_MIN, INT_MAX, &s))
                return ly_cli_usage_error("track", "--imgsz '%s': expected an integer", v);
            a->options.imgsz = s;
            a->options.given |= LY_PREDICT_IMGSZ;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--max-det", &missing))) {
            if (!ly_cli_parse_int(v, INT_MIN, INT_MAX, &a->options.max_det))
                return ly_cli_usage_error("track", "--max-det '%s': expected an integer", v);
            a->options.given |= LY_PREDICT_MAX_DET;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--classes", &missing))) {
            int code = ly_predict_parse_classes("track", v, a->classes, &a->options);
            if (code) return code;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--vid-stride", &missing))) {
            if (!ly_cli_parse_int(v, 1, INT_MAX, &a->vid_stride))
                return ly_cli_usage_error_code("track", "config_range_error",
                                               "--vid-stride '%s': expected a positive integer", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--threads", &missing))) {
            if (!ly_cli_parse_int(v, 1, 4096, &a->threads))
                return ly_cli_usage_error_code("track", "config_range_error",
                                               "--threads '%s': expected a positive integer", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--track-conf", &missing))) {
            if (!parse_double(v, &a->track_conf))
                return ly_cli_usage_error("track", "--track-conf '%s': expected a number", v);
            a->track_conf_given = true;
        } else if (!strcmp(arg, "--fuse-score")) {
            a->cfg.fuse_score = true;
        } else if (!strcmp(arg, "--no-fuse-score")) {
            a->cfg.fuse_score = false;
        } else if (!strcmp(arg, "--save")) {
            a->save = true;
        } else if (!strcmp(arg, "--no-save")) {
            a->save = false;
        } else if (!strcmp(arg, "--jsonl")) {
            a->jsonl = true;
        } else if (missing) {
            return ly_cli_usage_error_code("track", "config_required_key", "%s needs a value", arg);
        } else {
            return ly_cli_unknown_argument("track", arg);
        }
    }
    if (!a->source)
        return ly_cli_usage_error_code("track", "config_required_key",
                                       "missing source= (or --source): a video");
    if (!a->model) a->model = "nanodet";
    if (ly_track_config_check(&a->cfg) != LY_OK)
        return ly_cli_usage_error_code("track", "config_range_error", "%s", ly_last_error());
    if (a->track_conf_given && a->track_conf != 0.25 && !ly_cli_quiet())
        fprintf(stderr,
                "libreyolo track: warning: --track-conf %g changes nothing (as in "
                "LibreYOLO); the first association's threshold is --track-high-thresh "
                "(%g)\n",
                a->track_conf, a->cfg.track_high_thresh);
    /* the detector runs at the tracker's low threshold, as LibreYOLO's track */
    a->options.conf = (float)a->cfg.track_low_thresh;
    a->options.given |= LY_PREDICT_CONF;
    if (ly_predict_options_check(NULL, &a->options) != LY_OK)
        return ly_cli_usage_error_code("track", "config_range_error", "%s", ly_last_error());
    return 0;
}

/* runs/track/<stem>.mp4, else <stem>2.mp4, <stem>3.mp4, ... (LibreYOLO's
 * increment_path on a file). */
static int default_output(const char *source, char *out, size_t size)
{
    char stem[NAME_MAX];
    ly_predict_video_stem(source, stem, sizeof stem);
    if (ly_save_folder("runs/track", NULL, true, out, size) != LY_OK)
        return ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                           ly_last_error());
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", out);
    struct stat st;
    int written = snprintf(out, size, "%s/%s.mp4", dir, stem);
    for (int k = 2; written > 0 && (size_t)written < size && stat(out, &st) == 0 && k < 10000; k++)
        written = snprintf(out, size, "%s/%.200s%d.mp4", dir, stem, k);
    if (written < 0 || (size_t)written >= size)
        return ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s: path too long",
                           dir);
    return 0;
}

static void print_json(const char *source, const ly_video_frame *at, int w, int h,
                       const ly_detection *d, const size_t *index, const int64_t *id, size_t n,
                       const double times[3])
{
    fputs("{\"path\": ", stdout);
    ly_json_string(stdout, source);
    printf(
        ", \"frame\": %lld, \"timestamp\": %.6f, \"original_shape\": [%d, %d], \"detections\": [",
        (long long)at->index, at->time_s, h, w);
    for (size_t k = 0; k < n; k++) {
        const ly_detection *x = &d[index[k]];
        fputs(k ? ", {\"class\": " : "{\"class\": ", stdout);
        ly_json_string(stdout, x->name ? x->name : "");
        printf(", \"class_id\": %d, \"confidence\": ", x->cls);
        ly_json_float32(stdout, x->conf);
        fputs(", \"bbox_xyxy\": [", stdout);
        for (int c = 0; c < 4; c++) {
            if (c) fputs(", ", stdout);
            ly_json_float32(stdout, x->xyxy[c]);
        }
        printf("], \"track_id\": %lld}", (long long)id[k]);
    }
    printf("], \"speed\": {\"preprocess\": %.3f, \"inference\": %.3f, \"postprocess\": %.3f}}\n",
           times[0], times[1], times[2]);
}

/* "frame 3/120 clip.mp4: 640x480 2 persons, 1 car; tracks #1 #2 #4, 12.3ms" */
static void print_line(const char *source, size_t k, size_t total, int w, int h,
                       const ly_detection *d, const size_t *index, const int64_t *id, size_t n,
                       double ms)
{
    const char *base = strrchr(source, '/');
    base = base && base[1] ? base + 1 : source;
    if (total)
        printf("frame %zu/%zu %s: %dx%d ", k, total, base, w, h);
    else
        printf("frame %zu %s: %dx%d ", k, base, w, h);
    if (!n) printf("(no tracks)");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const ly_detection *x = &d[index[i]];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = d[index[j]].cls == x->cls;
        if (seen) continue;
        int same = 0;
        for (size_t j = i; j < n; j++)
            same += d[index[j]].cls == x->cls;
        char unnamed[32];
        snprintf(unnamed, sizeof unnamed, "%d", x->cls);
        printf("%s%d %s%s", first ? "" : ", ", same, x->name && *x->name ? x->name : unnamed,
               same > 1 ? "s" : "");
        first = false;
    }
    if (n) fputs("; tracks", stdout);
    for (size_t i = 0; i < n; i++)
        printf(" #%lld", (long long)id[i]);
    printf(", %.1fms\n", ms);
}

int ly_cli_track(int argc, char **argv)
{
    track_args a;
    memset(&a, 0, sizeof a);
    a.vid_stride = 1;
    ly_predict_options_init(&a.options);
    ly_track_config_init(&a.cfg);
    int code = parse_args(argc, argv, &a);
    if (code) return code < 0 ? 0 : code;
    if (a.jsonl) ly_cli_set_json_errors(true);
    bool video = false;
    ly_video_is_source(a.source, &video);
    struct stat sb;
    if (!video && stat(a.source, &sb) == 0)
        return ly_cli_fail("track", LY_EXIT_SOURCE, "data_invalid", "give a video",
                           "%s: track follows objects through a video; for images use predict",
                           a.source);
    ly_video_options vo;
    ly_video_options_init(&vo);
    vo.vid_stride = a.vid_stride;
    ly_video_reader *in = NULL;
    ly_status st = ly_video_open(a.source, &vo, &in);
    if (st != LY_OK)
        return ly_cli_fail("track", LY_EXIT_SOURCE,
                           st == LY_E_NOT_FOUND ? "source_not_found" : "data_invalid", NULL, "%s",
                           ly_last_error());
    char dir[PATH_MAX];
    bool cached = false;
    ly_model *model = NULL;
    ly_tracker *tracker = NULL;
    ly_video_writer *out = NULL;
    if (ly_model_cached(a.model, dir, sizeof dir, &cached) == LY_OK && !cached &&
        ly_cli_fetch_quietly("track", a.model, dir, sizeof dir) != 0) {
        code = LY_EXIT_MODEL;
        goto done;
    }
    ly_model_options mo = {a.threads};
    if ((st = ly_model_load(a.model, &mo, &model)) != LY_OK) {
        code = ly_cli_model_failed("track", st);
        goto done;
    }
    ly_model_info info;
    ly_model_get_info(model, &info);
    if (strcmp(info.task, "detect") != 0) {
        /* LibreYOLO's sentence for a classifier; the same form for the others */
        code = ly_cli_fail("track", LY_EXIT_USAGE, "config_unsupported", "use predict",
                           strcmp(info.task, "classify") == 0
                               ? "Tracking does not support classification models. Use predict()."
                               : "Tracking does not support %s models. Use predict().",
                           info.task);
        goto done;
    }
    if (ly_predict_options_check(model, &a.options) != LY_OK) {
        code = ly_cli_usage_error_code("track", "config_range_error", "%s", ly_last_error());
        goto done;
    }
    if ((st = ly_tracker_create(&a.cfg, &tracker)) != LY_OK) {
        code = ly_cli_usage_error_code("track", "config_range_error", "%s", ly_last_error());
        goto done;
    }
    ly_video_info vi;
    ly_video_get_info(in, &vi);
    char path[PATH_MAX];
    if (a.save || a.output_path) {
        if (a.output_path)
            snprintf(path, sizeof path, "%s", a.output_path);
        else if ((code = default_output(a.source, path, sizeof path)) != 0)
            goto done;
        if (ly_video_writer_open(path, vi.width, vi.height, vi.fps / a.vid_stride, NULL, &out) !=
            LY_OK) {
            code = ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                               ly_last_error());
            goto done;
        }
    }
    size_t total =
        vi.frame_count > 0 ? (size_t)((vi.frame_count + a.vid_stride - 1) / a.vid_stride) : 0;
    ly_cli_sigint_watch(in);
    ly_image frame = {0};
    ly_video_frame at;
    bool got;
    size_t done_frames = 0, cap = 0;
    ly_detection *d = NULL;
    ly_detection *picked = NULL;
    size_t *index = NULL;
    int64_t *id = NULL;
    double start = ly_cli_now_s();
    while (!ly_cli_sigint_seen() && !code) {
        st = ly_video_read(in, &frame, &at, &got);
        if (st != LY_OK) {
            if (!ly_cli_sigint_seen())
                code = ly_cli_fail("track", LY_EXIT_SOURCE, "data_invalid", NULL, "%s",
                                   ly_last_error());
            break;
        }
        if (!got) break;
        ly_image_view view = {frame.pixels, frame.width, frame.height, (size_t)frame.width * 3,
                              LY_PIXELS_RGB};
        ly_results *r;
        if (ly_model_predict_image(model, &view, &a.options, &r) != LY_OK) {
            code =
                ly_cli_fail("track", LY_EXIT_FAILURE, "inference_failed", NULL,
                            "%s: frame %lld: %s", a.source, (long long)at.index, ly_last_error());
            break;
        }
        size_t n = 0, m = 0;
        ly_results_count(r, &n);
        if (n + 1 > cap) {
            cap = 2 * (n + 1);
            free(d), free(picked), free(index), free(id);
            d = malloc(cap * sizeof *d), picked = malloc(cap * sizeof *picked);
            index = malloc(cap * sizeof *index), id = malloc(cap * sizeof *id);
            if (!d || !picked || !index || !id) {
                ly_results_free(r);
                code = ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
                break;
            }
        }
        for (size_t i = 0; i < n; i++)
            ly_results_get(r, i, &d[i]);
        double times[3];
        ly_results_speed(r, &times[0], &times[1], &times[2]);
        double t0 = ly_cli_now_s();
        st = ly_tracker_update(tracker, d, n, index, id, &m);
        times[2] += (ly_cli_now_s() - t0) * 1e3; /* tracking is post-processing */
        done_frames++;
        if (st == LY_OK) {
            if (a.jsonl)
                print_json(a.source, &at, frame.width, frame.height, d, index, id, m, times);
            else
                print_line(a.source, done_frames, total, frame.width, frame.height, d, index, id, m,
                           times[0] + times[1] + times[2]);
            fflush(stdout);
        }
        if (st == LY_OK && out) {
            for (size_t k = 0; k < m; k++)
                picked[k] = d[index[k]];
            st = ly_image_annotate_tracks(&frame, picked, id, m);
            if (st == LY_OK) st = ly_video_write(out, &frame);
        }
        ly_results_free(r); /* the names in d belong to r */
        if (st != LY_OK) {
            code = ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "%s", ly_last_error());
            break;
        }
        double seconds = ly_cli_now_s() - start,
               fps = (double)done_frames / (seconds > 0 ? seconds : 1e-9);
        if (total)
            ly_cli_progress("track: frame %zu/%zu, %.1f frames/s, %.0f s left", done_frames, total,
                            fps, (double)(total > done_frames ? total - done_frames : 0) / fps);
        else
            ly_cli_progress("track: frame %zu, %.1f frames/s", done_frames, fps);
    }
    ly_cli_sigint_unwatch();
    ly_cli_progress_end();
    ly_image_free(&frame);
    free(d), free(picked), free(index), free(id);
    if (out) {
        st = code ? ly_video_writer_discard(out) : ly_video_writer_close(out);
        out = NULL;
        if (st != LY_OK && !code)
            code = ly_cli_fail("track", LY_EXIT_FAILURE, "io_error", NULL, "--save: %s",
                               ly_last_error());
        else if (!code && !a.jsonl)
            printf("Results saved to %s\n", path);
    }
    if (ly_cli_sigint_seen() && !code) {
        if (!ly_cli_quiet())
            fprintf(stderr, "libreyolo track: interrupted after %zu frame%s\n", done_frames,
                    done_frames == 1 ? "" : "s");
        code = 130;
    }
done:
    ly_video_writer_discard(out);
    ly_tracker_free(tracker);
    ly_model_free(model);
    ly_video_close(in);
    return code;
}
