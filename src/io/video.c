/* SPDX-License-Identifier: MIT */
/* What names a video source, and the video calls of a build without FFmpeg's
 * libraries (the readers and writers are in src/io/ffmpeg/). */
#include "libreyolo/video.h"
#include "core/core.h"
#include "io/video_internal.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

ly_status ly_video_options_init(ly_video_options *options)
{
    if (!options)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_options_init: options is NULL");
    *options = (ly_video_options){.vid_stride = 1, .timeout_ms = 10000, .max_pixels = 0};
    return LY_OK;
}

static bool ends_with_video_extension(const char *name, size_t n)
{
    /* LibreYOLO's VIDEO_EXTENSIONS (utils/video.py), and .flv */
    static const char *const exts[] = {".asf",  ".avi", ".gif", ".m4v", ".mkv",  ".mov", ".mp4",
                                       ".mpeg", ".mpg", ".ts",  ".wmv", ".webm", ".flv"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t m = strlen(exts[i]);
        if (n > m && strncasecmp(name + n - m, exts[i], m) == 0) return true;
    }
    return false;
}

bool ly_video_frame_pattern(const char *s)
{
    for (const char *p = strchr(s, '%'); p; p = strchr(p + 1, '%')) {
        const char *q = p + 1;
        while (isdigit((unsigned char)*q))
            q++;
        if (*q == 'd') return true;
    }
    return false;
}

bool ly_video_camera_index(const char *s)
{
    if (!*s || strlen(s) > 3) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

ly_status ly_video_is_source(const char *source, bool *is_video)
{
    if (!source || !is_video)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_is_source: NULL argument");
    *is_video = false;
    if (!*source) return LY_OK;
    if (strncasecmp(source, "rtsp://", 7) == 0 || strncasecmp(source, "rtmp://", 7) == 0 ||
        strncasecmp(source, "rtsps://", 8) == 0) {
        *is_video = true;
        return LY_OK;
    }
    if (strncasecmp(source, "http://", 7) == 0 || strncasecmp(source, "https://", 8) == 0) {
        size_t n = strcspn(source, "?#"); /* the path, without its query */
        *is_video = ends_with_video_extension(source, n) ||
                    (n > 5 && strncasecmp(source + n - 5, ".m3u8", 5) == 0);
        return LY_OK;
    }
    if (ly_video_camera_index(source)) {
        *is_video = true;
        return LY_OK;
    }
    *is_video = strncmp(source, "/dev/video", 10) == 0 ||
                ends_with_video_extension(source, strlen(source)) || ly_video_frame_pattern(source);
    return LY_OK;
}

#ifndef LY_HAVE_FFMPEG

static ly_status no_video(const char *what, const char *name)
{
    return ly_set_error(LY_E_UNSUPPORTED,
                        "%s%s%s: video is not supported in this build (built without FFmpeg's "
                        "libraries: libavformat-dev, libavcodec-dev, libswscale-dev, "
                        "libavdevice-dev)",
                        what, name ? " " : "", name ? name : "");
}

ly_status ly_video_available(bool *available)
{
    if (!available) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_available: NULL");
    *available = false;
    return LY_OK;
}

ly_status ly_video_open(const char *source, const ly_video_options *options, ly_video_reader **out)
{
    (void)options;
    if (out) *out = NULL;
    return no_video("video", source);
}

ly_status ly_video_get_info(const ly_video_reader *reader, ly_video_info *info)
{
    (void)reader, (void)info;
    return no_video("ly_video_get_info", NULL);
}

ly_status ly_video_read(ly_video_reader *reader, ly_image *frame, ly_video_frame *at, bool *got)
{
    (void)reader, (void)frame, (void)at;
    if (got) *got = false;
    return no_video("ly_video_read", NULL);
}

ly_status ly_video_cancel(ly_video_reader *reader)
{
    (void)reader;
    return no_video("ly_video_cancel", NULL);
}

ly_status ly_video_close(ly_video_reader *reader)
{
    (void)reader;
    return LY_OK;
}

ly_status ly_video_writer_open(const char *path, int width, int height, double fps,
                               const char *codec, ly_video_writer **out)
{
    (void)width, (void)height, (void)fps, (void)codec;
    if (out) *out = NULL;
    return no_video("video", path);
}

ly_status ly_video_writer_codec(const ly_video_writer *writer, const char **codec)
{
    (void)writer, (void)codec;
    return no_video("ly_video_writer_codec", NULL);
}

ly_status ly_video_write(ly_video_writer *writer, const ly_image *frame)
{
    (void)writer, (void)frame;
    return no_video("ly_video_write", NULL);
}

ly_status ly_video_writer_close(ly_video_writer *writer)
{
    (void)writer;
    return no_video("ly_video_writer_close", NULL);
}

ly_status ly_video_writer_discard(ly_video_writer *writer)
{
    (void)writer;
    return LY_OK;
}

#endif
