/* SPDX-License-Identifier: MIT */
/*
 * libreyolo on video: read a video (a file, an rtsp:// or http(s) stream, a
 * camera number, an image sequence), detect objects in every frame, print
 * one line per frame, and optionally write the annotated frames to a video
 * file, checking every status.
 *
 *   cc video_detect.c $(pkg-config --cflags --libs libreyolo) -o video_detect
 *   ./video_detect MODEL SOURCE [OUT.mp4]
 *
 * One reader and one writer per stream, used by this thread only; the model
 * could serve other threads (other streams) at the same time.
 */
#include <libreyolo/image.h>
#include <libreyolo/libreyolo.h>
#include <libreyolo/model.h>
#include <libreyolo/video.h>

#include <stdio.h>

static int failed(const char *what)
{
    fprintf(stderr, "video_detect: %s: %s\n", what, ly_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL SOURCE [OUT.mp4]\n", argv[0]);
        return 2;
    }
    ly_model *model = NULL;
    if (ly_model_load(argv[1], NULL, &model) != LY_OK) return failed(argv[1]);
    ly_video_reader *in = NULL;
    if (ly_video_open(argv[2], NULL, &in) != LY_OK) {
        ly_model_free(model);
        return failed(argv[2]);
    }
    ly_video_info info;
    ly_video_get_info(in, &info);
    printf("%s: %dx%d, %.2f frames/s, %s in %s\n", argv[2], info.width, info.height, info.fps,
           info.codec, info.container);

    ly_video_writer *out = NULL;
    int code = 0;
    if (argc == 4 &&
        ly_video_writer_open(argv[3], info.width, info.height, info.fps, NULL, &out) != LY_OK)
        code = failed(argv[3]);

    ly_predict_options options;
    ly_predict_options_init(&options);
    ly_image frame = {0}; /* reused for every frame of the same size */
    ly_video_frame at;
    bool got = false;
    ly_status read = LY_OK;
    while (!code && (read = ly_video_read(in, &frame, &at, &got)) == LY_OK && got) {
        ly_image_view view = {frame.pixels, frame.width, frame.height, (size_t)frame.width * 3,
                              LY_PIXELS_RGB};
        ly_results *results = NULL;
        if (ly_model_predict_image(model, &view, &options, &results) != LY_OK) {
            code = failed("predict");
            break;
        }
        size_t n = 0;
        ly_results_count(results, &n);
        printf("frame %lld (%.3f s): %zu detections\n", (long long)at.index, at.time_s, n);
        if (out &&
            (ly_image_annotate(&frame, results) != LY_OK || ly_video_write(out, &frame) != LY_OK))
            code = failed(argv[3]);
        ly_results_free(results);
    }
    if (!code && read != LY_OK) code = failed(argv[2]); /* a read that failed, not the end */
    /* close publishes the file (atomically); discard drops a failed one */
    if (out && (code ? ly_video_writer_discard(out) : ly_video_writer_close(out)) != LY_OK)
        code = failed(argv[3]);
    ly_image_free(&frame);
    ly_video_close(in);
    ly_model_free(model);
    return code;
}
