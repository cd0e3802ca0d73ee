/* SPDX-License-Identifier: MIT */
/* What names a video source, and the public video calls, which the module
 * libreyolo_video.so (src/io/ffmpeg/, loaded on first use) serves. */
#include "libreyolo/video.h"
#include "core/core.h"
#include "io/image.h"
#include "io/video_backend.h"
#include "io/video_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

/* ---- The backend module ------------------------------------------------------ */

static const ly_video_backend *loaded;
static char load_failure[LY_PATH_MAX + 512];

static const ly_video_host host = {.version = LY_VIDEO_BACKEND_VERSION,
                                   .set_error = ly_set_error,
                                   .log = ly_log,
                                   .image_alloc = ly_image_alloc,
                                   .image_free = ly_image_free,
                                   .pixel_limit = ly_image_pixel_limit,
                                   .atomic_begin = ly_atomic_file_begin,
                                   .atomic_commit = ly_atomic_file_commit,
                                   .atomic_abort = ly_atomic_file_abort,
                                   .frame_pattern = ly_video_frame_pattern,
                                   .camera_index = ly_video_camera_index};

/* libreyolo_video.so in the plugin directories beside the library
 * (<libdir>/libreyolo/plugins, installed) or in the build tree's plugins/
 * (seen from <build> and <build>/tests); LIBREYOLO_VIDEO_MODULE names another. */
static void load_backend(void)
{
    const char *env = getenv("LIBREYOLO_VIDEO_MODULE");
    char dirs[4][LY_PATH_MAX], path[LY_PATH_MAX + 64], self[LY_PATH_MAX];
    int n = 0;
    if (!(env && *env)) {
        n = ly_plugin_dirs(dirs, 2);
        if (ly_self_dir(self, sizeof self)) {
            snprintf(dirs[n++], LY_PATH_MAX, "%.4000s/plugins", self);
            snprintf(dirs[n++], LY_PATH_MAX, "%.4000s/../plugins", self);
        }
    }
    void *module = NULL;
    if (env && *env) module = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; !module && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], LY_VIDEO_MODULE);
        if (access(path, F_OK) != 0) continue;
        module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!module) {
            const char *why = dlerror();
            snprintf(load_failure, sizeof load_failure, "%s does not load: %.400s", path,
                     why ? why : "?");
        }
    }
    if (!module) {
        if (!load_failure[0])
            snprintf(load_failure, sizeof load_failure,
                     "no %s beside the library (built without FFmpeg's libraries: "
                     "libavformat-dev, libavcodec-dev, libswscale-dev, libavdevice-dev)",
                     env && *env ? env : LY_VIDEO_MODULE);
        return;
    }
    ly_video_backend_init_fn init;
    *(void **)&init = dlsym(module, LY_VIDEO_BACKEND_INIT);
    loaded = init ? init(&host) : NULL;
    if (!loaded) {
        snprintf(load_failure, sizeof load_failure, "%s is of another version of the library",
                 LY_VIDEO_MODULE);
        dlclose(module);
    }
}

static const ly_video_backend *backend(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_backend);
    return loaded;
}

static ly_status no_video(const char *what, const char *name)
{
    return ly_set_error(LY_E_UNSUPPORTED, "%s%s%s: video is not supported in this build: %s", what,
                        name ? " " : "", name ? name : "", load_failure);
}

ly_status ly_video_available(bool *available)
{
    if (!available) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_available: NULL");
    *available = backend() != NULL;
    return LY_OK;
}

ly_status ly_video_open(const char *source, const ly_video_options *options, ly_video_reader **out)
{
    if (out) *out = NULL;
    if (!source || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_open: NULL argument");
    const ly_video_backend *b = backend();
    return b ? b->open(source, options, out) : no_video("video", source);
}

ly_status ly_video_get_info(const ly_video_reader *reader, ly_video_info *info)
{
    const ly_video_backend *b = backend();
    return b ? b->get_info(reader, info) : no_video("ly_video_get_info", NULL);
}

ly_status ly_video_read(ly_video_reader *reader, ly_image *frame, ly_video_frame *at, bool *got)
{
    if (got) *got = false;
    const ly_video_backend *b = backend();
    return b ? b->read(reader, frame, at, got) : no_video("ly_video_read", NULL);
}

ly_status ly_video_cancel(ly_video_reader *reader)
{
    /* async-signal-safe: the backend is loaded, since the reader exists */
    return reader && loaded ? loaded->cancel(reader) : LY_E_INVALID_ARGUMENT;
}

ly_status ly_video_close(ly_video_reader *reader)
{
    return reader && loaded ? loaded->close(reader) : LY_OK;
}

ly_status ly_video_writer_open(const char *path, int width, int height, double fps,
                               const char *codec, ly_video_writer **out)
{
    if (out) *out = NULL;
    if (!path || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_writer_open: NULL argument");
    const ly_video_backend *b = backend();
    return b ? b->writer_open(path, width, height, fps, codec, out) : no_video("video", path);
}

ly_status ly_video_writer_codec(const ly_video_writer *writer, const char **codec)
{
    const ly_video_backend *b = backend();
    return b ? b->writer_codec(writer, codec) : no_video("ly_video_writer_codec", NULL);
}

ly_status ly_video_write(ly_video_writer *writer, const ly_image *frame)
{
    const ly_video_backend *b = backend();
    return b ? b->write(writer, frame) : no_video("ly_video_write", NULL);
}

ly_status ly_video_writer_close(ly_video_writer *writer)
{
    const ly_video_backend *b = backend();
    return b ? b->writer_close(writer) : no_video("ly_video_writer_close", NULL);
}

ly_status ly_video_writer_discard(ly_video_writer *writer)
{
    return writer && loaded ? loaded->writer_discard(writer) : LY_OK;
}
