/* SPDX-License-Identifier: MIT */
/*
 * Video in and out, through FFmpeg's libraries (libavformat, libavcodec,
 * libswscale, libavdevice) where the build has them. They live in a module,
 * libreyolo_video.so (<libdir>/libreyolo/plugins; LIBREYOLO_VIDEO_MODULE
 * names another), loaded on the first video call: a program that never calls
 * these does not load FFmpeg. Without the module every open fails with
 * LY_E_UNSUPPORTED ("not supported in this build") and ly_video_available
 * says false.
 *
 *   ly_video_reader *in;
 *   ly_video_open("clip.mp4", NULL, &in);
 *   ly_video_info info;
 *   ly_video_get_info(in, &info);
 *   ly_video_writer *out;
 *   ly_video_writer_open("out.mp4", info.width, info.height, info.fps, NULL, &out);
 *   ly_image frame = {0};
 *   ly_video_frame at;
 *   bool got;
 *   while (ly_video_read(in, &frame, &at, &got) == LY_OK && got) {
 *       ... predict on frame, ly_image_annotate(&frame, results) ...
 *       ly_video_write(out, &frame);
 *   }
 *   ly_video_writer_close(out);   (publishes out.mp4; ly_video_writer_discard drops it)
 *   ly_video_close(in);
 *   ly_image_free(&frame);
 *
 * Sources (ly_video_open): a video file (any container and codec the libraries
 * decode), an http(s)://, rtsp:// or rtmp:// stream, a V4L2 camera ("0" is
 * /dev/video0, or the device path), and an image sequence ("frames/%04d.png",
 * FFmpeg's pattern). Frames are 8-bit RGB exactly as OpenCV's VideoCapture
 * (FFmpeg backend) followed by cvtColor(BGR2RGB) gives them: the decoder's
 * picture converted to BGR24 by libswscale with SWS_BICUBIC at the coded size,
 * then the channels swapped. LibreYOLO reads video that way.
 *
 * Threads. A reader or a writer is used by one thread at a time (one per
 * stream); different readers and writers run in parallel freely.
 * ly_video_cancel is the exception: any thread, or a signal handler, may call
 * it on a reader another thread is reading.
 *
 * Ownership. Readers and writers are the caller's, released by
 * ly_video_close and ly_video_writer_close / _discard. The strings of
 * ly_video_info belong to the reader (valid until ly_video_close). A frame
 * filled by ly_video_read is the caller's ly_image (ly_image_free).
 */
#ifndef LIBREYOLO_VIDEO_H
#define LIBREYOLO_VIDEO_H
#include "libreyolo/image.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct ly_video_reader ly_video_reader;
typedef struct ly_video_writer ly_video_writer;

typedef struct ly_video_options {
    /* Deliver frames 0, N, 2N, ... of the source (LibreYOLO's vid_stride); >= 1. */
    int vid_stride;
    /* The longest one open or read may wait on a network stream or a camera
     * before it fails with LY_E_IO naming the source, in ms; >= 1 (default 10000). */
    int timeout_ms;
    /* Frames of more pixels are refused at open (LY_E_UNSUPPORTED); 0: the
     * image limit (LIBREYOLO_MAX_IMAGE_PIXELS, else PIL's 89478485). */
    uint64_t max_pixels;
} ly_video_options;

/* vid_stride 1, timeout_ms 10000, max_pixels 0. */
LY_API ly_status ly_video_options_init(ly_video_options *options);

typedef struct ly_video_info {
    int width, height;
    double fps;            /* the stream's average rate; 30 where it states none, as LibreYOLO */
    int64_t frame_count;   /* as the container states or its duration implies; -1 unknown */
    bool live;             /* a camera or a network stream */
    const char *codec;     /* FFmpeg's codec name: "h264", "mjpeg", "mpeg4", ... */
    const char *container; /* FFmpeg's demuxer name: "avi", "mov,mp4,m4a,3gp,3g2,mj2", ... */
} ly_video_info;

typedef struct ly_video_frame {
    int64_t index; /* the frame's number in the source, from 0 (vid_stride skips some) */
    double time_s; /* its presentation time from the stream's start; index / fps where none */
} ly_video_frame;

/* Whether this build reads and writes video (*available). */
LY_API ly_status ly_video_available(bool *available);

/* Whether predict reads `source` as video (*is_video): a file with one of
 * LibreYOLO's video extensions (.asf .avi .gif .m4v .mkv .mov .mp4 .mpeg .mpg
 * .ts .wmv .webm) or .flv; an rtsp:// or rtmp:// URL, or an http(s) URL whose
 * path ends in one of those extensions or .m3u8; a camera ("0", "1", ... or
 * /dev/videoN); a name with a printf-style frame number (%d, %04d). Decided
 * from the text alone; nothing is opened. */
LY_API ly_status ly_video_is_source(const char *source, bool *is_video);

/* Open `source` (options NULL: ly_video_options_init's). LY_E_NOT_FOUND for a
 * missing file or camera; LY_E_FORMAT for a file that is no video, truncated
 * or without a decodable video stream; LY_E_IO for a stream that cannot be
 * reached or does not answer within the timeout; LY_E_UNSUPPORTED for frames
 * over the pixel limit, or a build without video. Messages name the source. */
LY_API ly_status ly_video_open(const char *source, const ly_video_options *options,
                               ly_video_reader **out);
LY_API ly_status ly_video_get_info(const ly_video_reader *reader, ly_video_info *info);
/* The next frame (after vid_stride) into `frame`: its pixels are reused when
 * it already holds an image of the frame's size, else (re)allocated; start
 * with a zeroed ly_image. *got is false at the end of the source (status
 * LY_OK, frame untouched). A packet that does not decode is skipped with a
 * warning, as OpenCV skips it; a read that fails (truncated container, a
 * stream that disconnects or stalls past the timeout) is LY_E_FORMAT or
 * LY_E_IO naming the source and the frame; after ly_video_cancel, LY_E_IO
 * "cancelled". `at` may be NULL. */
LY_API ly_status ly_video_read(ly_video_reader *reader, ly_image *frame, ly_video_frame *at,
                               bool *got);
/* Make the reader's current or next wait return (ly_video_read fails with
 * "cancelled"); async-signal-safe. */
LY_API ly_status ly_video_cancel(ly_video_reader *reader);
/* Release the reader; NULL is fine. */
LY_API ly_status ly_video_close(ly_video_reader *reader);

/* A video file at `path`, written atomically: frames go to a temporary file
 * next to it, which ly_video_writer_close finishes (the encoder flushed, the
 * container's index written, fsync) and renames over `path`. The container is
 * chosen by the extension (.mp4, .avi, .mkv, .mov, ...). `codec`: an FFmpeg
 * encoder or codec name ("mpeg4", "mjpeg", "h264", "libx264", ...); NULL:
 * "mpeg4" (LibreYOLO's mp4v) where the container takes it, else the
 * container's default. LY_E_UNSUPPORTED when there is no such encoder or the
 * container cannot hold it; LY_E_INVALID_ARGUMENT for a size that is not
 * positive or a rate that is not finite and positive. */
LY_API ly_status ly_video_writer_open(const char *path, int width, int height, double fps,
                                      const char *codec, ly_video_writer **out);
/* The encoder the writer uses (FFmpeg's name), valid until the writer closes. */
LY_API ly_status ly_video_writer_codec(const ly_video_writer *writer, const char **codec);
/* Append one frame of the writer's size (LY_E_SHAPE otherwise). */
LY_API ly_status ly_video_write(ly_video_writer *writer, const ly_image *frame);
/* Finish and publish the file; on failure nothing is left at `path` (an
 * earlier file there is untouched). Releases the writer either way. */
LY_API ly_status ly_video_writer_close(ly_video_writer *writer);
/* Drop the temporary file and release the writer; NULL is fine. */
LY_API ly_status ly_video_writer_discard(ly_video_writer *writer);

#ifdef __cplusplus
}
#endif
#endif
