/* SPDX-License-Identifier: MIT */
/*
 * The video backend (internal): FFmpeg's readers and writers live in a module
 * of their own, libreyolo_video.so (src/io/ffmpeg/), which the library loads
 * with dlopen the first time a video call needs it. A program that never
 * touches video (and libreyolo.so itself) does not load FFmpeg's libraries
 * (about 180 shared objects, ~0.1 s and ~37 MiB at start-up) nor link their
 * GPL parts. The module calls back into the library through a host table, so
 * it works beside the static library as beside the shared one.
 */
#ifndef LY_IO_VIDEO_BACKEND_H
#define LY_IO_VIDEO_BACKEND_H

#include "core/atomic_file.h"
#include "libreyolo/video.h"

#define LY_VIDEO_MODULE "libreyolo_video.so"
#define LY_VIDEO_BACKEND_VERSION 1

/* What the module uses of the library. */
typedef struct ly_video_host {
    int version;
    ly_status (*set_error)(ly_status status, const char *fmt, ...);
    void (*log)(ly_log_level level, const char *fmt, ...);
    ly_status (*image_alloc)(ly_image *image, int width, int height);
    ly_status (*image_free)(ly_image *image);
    ly_status (*pixel_limit)(uint64_t *limit);
    ly_status (*atomic_begin)(ly_atomic_file *f, const char *path, const char *what);
    ly_status (*atomic_commit)(ly_atomic_file *f);
    void (*atomic_abort)(ly_atomic_file *f);
    bool (*frame_pattern)(const char *source);
    bool (*camera_index)(const char *source);
} ly_video_host;

/* The module's calls: the public ones of libreyolo/video.h, arguments checked. */
typedef struct ly_video_backend {
    int version;
    ly_status (*open)(const char *source, const ly_video_options *options, ly_video_reader **out);
    ly_status (*get_info)(const ly_video_reader *reader, ly_video_info *info);
    ly_status (*read)(ly_video_reader *reader, ly_image *frame, ly_video_frame *at, bool *got);
    ly_status (*cancel)(ly_video_reader *reader);
    ly_status (*close)(ly_video_reader *reader);
    ly_status (*writer_open)(const char *path, int width, int height, double fps, const char *codec,
                             ly_video_writer **out);
    ly_status (*writer_codec)(const ly_video_writer *writer, const char **codec);
    ly_status (*write)(ly_video_writer *writer, const ly_image *frame);
    ly_status (*writer_close)(ly_video_writer *writer);
    ly_status (*writer_discard)(ly_video_writer *writer);
} ly_video_backend;

/* The module's one exported symbol; NULL when the host is of another version. */
typedef const ly_video_backend *(*ly_video_backend_init_fn)(const ly_video_host *host);
#define LY_VIDEO_BACKEND_INIT "ly_video_backend_init"

#endif
